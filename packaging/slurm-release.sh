#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints the Slurm release (e.g. 22.05.8) of the headers in $1 (default
# /usr/include), from SLURM_VERSION_NUMBER in slurm/slurm_version.h: the plugin is
# stamped with that number and only loads into that release.
h="${1:-/usr/include}/slurm/slurm_version.h"
n=$(sed -n 's/^#define[ 	]*SLURM_VERSION_NUMBER[ 	]*0x\([0-9a-fA-F]*\).*/\1/p' "$h" 2>/dev/null)
if [ -z "$n" ]; then
	echo "slurm-release.sh: no SLURM_VERSION_NUMBER in $h (install libslurm-dev / slurm-devel)" >&2
	exit 1
fi
v=$((0x$n))
printf '%d.%02d.%d\n' $((v >> 16 & 255)) $((v >> 8 & 255)) $((v & 255))
