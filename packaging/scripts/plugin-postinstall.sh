#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The plugin is installed where slurmctld runs: enable the re-decide loop with
# slurmctld there (WantedBy=slurmctld.service), so that "wait" answers are
# re-decided as GPUs free up (docs/install.md). It starts with slurmctld's next
# (re)start, which loading the plugin needs anyway; the plugin defers nothing
# until it sees the loop's heartbeat. `systemctl disable coscheml-redecide.service`
# turns it off for good (an upgrade does not enable it again).
if command -v systemctl >/dev/null 2>&1; then
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null 2>&1 || true
	fi
	# Only on the first install: an admin's disable survives upgrades.
	case "${1:-}" in
	configure) [ -n "${2:-}" ] && exit 0 ;; # deb: $2 is the version upgraded from
	2) exit 0 ;;                            # rpm: an upgrade
	esac
	systemctl enable coscheml-redecide.service >/dev/null 2>&1 || true
	if [ -d /run/systemd/system ] && systemctl is-active --quiet slurmctld.service 2>/dev/null; then
		systemctl start coscheml-redecide.service >/dev/null 2>&1 || true
	fi
fi
exit 0
