#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Makes systemd see the reconcile timer; enabling it is the admin's choice
# (docs/install.md), because it must run on exactly the hosts that mount residency_dir.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
# slurmctld (SlurmUser, "slurm" in Debian's and most RPM packages) creates and
# rotates the decision log in /var/lib/coscheml and removes the Epilog's done
# markers; everything else there is written by root (docs/install.md).
# The decision key (signs decision ids; docs/install.md): made once, never replaced.
if [ -d /var/lib/coscheml ] && [ ! -e /var/lib/coscheml/decision.key ]; then
	(umask 077; head -c 32 /dev/urandom > /var/lib/coscheml/decision.key) || true
fi
if id -u slurm >/dev/null 2>&1; then
	chown slurm: /var/lib/coscheml /var/lib/coscheml/residency/done 2>/dev/null || true
	chown slurm: /var/lib/coscheml/decision.key 2>/dev/null || true
fi
# The runtime guard runs with slurmd (WantedBy=slurmd.service), so enabling it
# everywhere starts it on the compute nodes only. Only on the first install: an
# admin's disable survives upgrades; an upgrade restarts a running guard.
if command -v systemctl >/dev/null 2>&1; then
	first=yes
	case "${1:-}" in
	configure) [ -n "${2:-}" ] && first= ;; # deb: $2 is the version upgraded from
	2) first= ;;                            # rpm: an upgrade
	esac
	if [ -n "$first" ]; then
		systemctl enable coscheml-guard.service >/dev/null 2>&1 || true
		if [ -d /run/systemd/system ] && systemctl is-active --quiet slurmd.service 2>/dev/null; then
			systemctl start coscheml-guard.service >/dev/null 2>&1 || true
		fi
	elif [ -d /run/systemd/system ]; then
		systemctl try-restart coscheml-guard.service >/dev/null 2>&1 || true
	fi
fi
exit 0
