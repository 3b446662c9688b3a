#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the packages, installs both .deb files on this machine (root, Debian's
# slurm-wlm), runs the real-daemon integration suite against the installed files
# (COSCHEML_INSTALLED=/usr), then purges the packages again, also when the suite
# fails or is interrupted, so the machine is left as found. Install, suite and
# purge run under the suite's lock: the installed plugin sits in Debian's Slurm
# plugin folder, which a concurrent repo-build run of the suite searches too.
#   packaging/test-deb-suite.sh            (or: make test-deb-suite)
#   NOBUILD=1 packaging/test-deb-suite.sh  (use the packages already in dist/)
# Extra arguments go to `go test` (e.g. -run 'TestSlurm/submit').
set -eu
lock=/tmp/coscheml-integration.lock
go=${GO:-go}

if [ "${1:-}" != --locked ]; then
	[ "$(id -u)" = 0 ] || { echo "test-deb-suite: needs root (dpkg -i, slurmctld)" >&2; exit 2; }
	if [ "${NOBUILD:-0}" != 1 ]; then
		make package
	fi
	exec flock "$lock" "$0" --locked "$@"
fi
shift

main=$(ls dist/coscheml_*.deb 2>/dev/null | tail -1)
plugin=$(ls dist/coscheml-slurm-plugin_*+slurm*.deb 2>/dev/null | tail -1)
lucid=$(ls dist/coscheml-model-lucid_*.deb 2>/dev/null | tail -1)
if [ -z "$main" ] || [ -z "$plugin" ] || [ -z "$lucid" ]; then
	echo "test-deb-suite: no dist/coscheml_*.deb, dist/coscheml-slurm-plugin_*.deb or dist/coscheml-model-lucid_*.deb (run make package)" >&2
	exit 2
fi
# Never purge an installation this script did not make.
for p in coscheml coscheml-slurm-plugin coscheml-model-lucid; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		echo "test-deb-suite: $p is already installed here; remove it first (this script purges what it installs)" >&2
		exit 2
	fi
done

purge() {
	echo "test-deb-suite: dpkg --purge coscheml-slurm-plugin coscheml coscheml-model-lucid"
	dpkg --purge coscheml-slurm-plugin coscheml coscheml-model-lucid >/dev/null || echo "test-deb-suite: purge FAILED" >&2
}
trap purge EXIT
trap 'exit 130' INT TERM HUP

# The suite's configurations use the default model (model_path ""), which the
# packaged programs read from coscheml-model-lucid.
echo "test-deb-suite: dpkg -i $main $plugin $lucid"
dpkg -i "$main" "$plugin" "$lucid"

start=$(date +%s)
rc=0
COSCHEML_INSTALLED=/usr $go test -tags integration -count=1 -timeout 40m -v ./slurm/integration/... "$@" || rc=$?
echo "test-deb-suite: suite exit $rc after $(($(date +%s) - start))s against the installed $(basename "$main") $(basename "$plugin") $(basename "$lucid")"
exit "$rc"
