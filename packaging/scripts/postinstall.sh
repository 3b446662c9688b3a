#!/bin/sh
# Makes systemd see the reconcile timer; enabling it is the admin's choice
# (docs/install.md), because it must run on exactly the hosts that mount residency_dir.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
