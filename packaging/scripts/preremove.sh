#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Stop and disable the runtime guard when the package goes away (not on upgrade).
case "${1:-}" in
upgrade | 1) exit 0 ;; # deb upgrade; rpm: a version remains
esac
if command -v systemctl >/dev/null 2>&1; then
	if [ -d /run/systemd/system ]; then
		systemctl stop coscheml-guard.service >/dev/null 2>&1 || true
	fi
	systemctl disable coscheml-guard.service >/dev/null 2>&1 || true
fi
exit 0
