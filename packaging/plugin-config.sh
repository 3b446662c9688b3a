#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Writes the plugin package's nfpm configuration for Slurm release $1 (e.g.
# 22.05.8) to stdout: packaging/nfpm-slurm-plugin.yaml with SLURM_NEXT, the
# first release the plugin does not load into (22.05.9), filled in. With $2 =
# no, the dependency on the distribution's slurmctld package (the lines marked
# "slurm-depends") is left out, for a Slurm installed from source.
set -eu
release="$1"
depends="${2:-yes}"
case "$release" in
*.*.*) ;;
*) echo "plugin-config.sh: release $release is not MAJOR.MINOR.MICRO" >&2; exit 1 ;;
esac
next="${release%.*}.$((${release##*.} + 1))"
here=$(dirname "$0")
if [ "$depends" = no ]; then
	sed -e '/# slurm-depends$/d' "$here/nfpm-slurm-plugin.yaml"
else
	sed -e "s/\${SLURM_NEXT}/$next/g" "$here/nfpm-slurm-plugin.yaml"
fi
