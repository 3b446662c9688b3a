#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the .deb packages from dist/ on this machine (root, Debian/Ubuntu),
# checks that the files land and the programs run, then purges them again unless
# KEEP=1. The plugin lands in Debian's Slurm plugin folder, which the integration
# suite also searches, so run this under the suite's lock:
#   flock /tmp/coscheml-integration.lock packaging/test-deb.sh
set -u
dist="${1:-dist}"
fail=0
check() { # check DESCRIPTION COMMAND...
	d="$1"; shift
	if out=$("$@" 2>&1); then
		echo "ok    $d"
	else
		echo "FAIL  $d: $(echo "$out" | tail -3)"
		fail=1
	fi
}
main=$(ls "$dist"/coscheml_*.deb | tail -1)
plugin=$(ls "$dist"/coscheml-slurm-plugin_*.deb | tail -1)
lucid=$(ls "$dist"/coscheml-model-lucid_*.deb | tail -1)
check "dpkg -i $main $plugin" dpkg -i "$main" "$plugin"
check "plugin depends on its Slurm release" sh -c "dpkg-query -W -f='\${Depends}' coscheml-slurm-plugin | grep -q 'slurmctld (>= '"
check "no Lucid data without coscheml-model-lucid" sh -c '! test -e /usr/share/coscheml/lucid && ! grep -qs "BERT,SQuAD,32,0,84.872" /usr/bin/coscheml /usr/lib/coscheml/libcoscheml.so'
check "without coscheml-model-lucid predict names the package" sh -c '/usr/bin/coscheml --config /etc/coscheml/coscheml.yaml predict resnet18-bs128 dcgan-bs128 2>&1 | grep -q coscheml-model-lucid'
check "dpkg -i $lucid" dpkg -i "$lucid"
check "dpkg -s coscheml: installed" sh -c 'dpkg -s coscheml | grep -q "Status: install ok installed"'
for p in coscheml coscheml-train coscheml-node; do
	check "$p --version" sh -c "/usr/bin/$p --version | grep -q '^$p version [0-9]'"
done
for f in /usr/lib/coscheml/libcoscheml.so /usr/libexec/coscheml/prolog.sh /usr/libexec/coscheml/epilog.sh \
	/usr/lib/systemd/system/coscheml-reconcile.timer /usr/lib/systemd/system/coscheml-reconcile.service \
	/usr/lib/systemd/system/coscheml-metrics.timer /usr/lib/systemd/system/coscheml-metrics.service /usr/lib/systemd/system/coscheml-redecide.service \
	/usr/lib/systemd/system/coscheml-guard.service \
	/usr/share/coscheml/lucid/solo_profiles.csv /usr/share/coscheml/lucid/LICENSE.txt /usr/share/coscheml/lucid/default.model \
	/usr/share/doc/coscheml/LICENSE /usr/share/doc/coscheml/NOTICE /usr/share/doc/coscheml/licenses/dependencies.csv \
	/usr/share/doc/coscheml-slurm-plugin/LICENSE \
	/usr/share/coscheml/data/README-gpu.md /usr/share/doc/coscheml/docs/install.md /usr/share/coscheml/grafana/coscheml.json; do
	check "file $f" test -s "$f"
done
if command -v systemctl >/dev/null; then
	check "plugin package enables the re-decide loop with slurmctld" test -L /etc/systemd/system/slurmctld.service.wants/coscheml-redecide.service
	check "package enables the runtime guard with slurmd" test -L /etc/systemd/system/slurmd.service.wants/coscheml-guard.service
fi
check "plugin in Slurm's plugin folder" sh -c 'ls /usr/lib/*/slurm-wlm/job_submit_coscheml.so'
check "plugin looks for /usr/lib/coscheml" sh -c 'grep -q /usr/lib/coscheml /usr/lib/*/slurm-wlm/job_submit_coscheml.so'
check "library exports coscheml_init" sh -c 'nm -D /usr/lib/coscheml/libcoscheml.so | grep -q " T coscheml_init"'
check "default config is a conffile" sh -c 'dpkg-query -W -f="\${Conffiles}" coscheml | grep -q /etc/coscheml/coscheml.yaml'
check "default config loads" /usr/bin/coscheml --config /etc/coscheml/coscheml.yaml model info
check "man coscheml" sh -c 'man -P cat coscheml 2>/dev/null | grep -q "interference-aware"'
check "man coscheml-train" sh -c 'man -P cat coscheml-train 2>/dev/null | grep -q coscheml-train'
check "man 8 coscheml-node" sh -c 'man -P cat 8 coscheml-node 2>/dev/null | grep -q reconcile'
check "prolog hook finds /usr/bin/coscheml-node" grep -q 'COSCHEML_BIN:-/usr/bin}' /usr/libexec/coscheml/prolog.sh
check "prolog hook exits 0 outside Slurm" sh -c 'COSCHEML_CONFIG=/nonexistent /usr/libexec/coscheml/prolog.sh'
check "epilog hook finds /usr/bin/coscheml-node" grep -q 'COSCHEML_BIN:-/usr/bin}' /usr/libexec/coscheml/epilog.sh
check "epilog hook exits 0 outside Slurm" sh -c 'COSCHEML_CONFIG=/nonexistent /usr/libexec/coscheml/epilog.sh'
tmp=$(mktemp -d)
printf 'profile_dir: %s/profiles\nresidency_dir: %s/residency\n' "$tmp" "$tmp" >"$tmp/c.yaml"
check "profile import of the packaged Lucid data" /usr/bin/coscheml --config "$tmp/c.yaml" profile import --format lucid /usr/share/coscheml/lucid/solo_profiles.csv
check "profile list shows the imported tags" sh -c "/usr/bin/coscheml --config $tmp/c.yaml profile list | grep -q resnet18-bs128"
check "predict with the packaged default model" /usr/bin/coscheml --config "$tmp/c.yaml" predict resnet18-bs128 dcgan-bs128
check "coscheml-node reconcile" sh -c "mkdir -p $tmp/residency && /usr/bin/coscheml-node reconcile --config $tmp/c.yaml"
if command -v systemd-analyze >/dev/null; then
	check "systemd-analyze verify units" systemd-analyze verify /usr/lib/systemd/system/coscheml-reconcile.timer /usr/lib/systemd/system/coscheml-reconcile.service /usr/lib/systemd/system/coscheml-metrics.timer /usr/lib/systemd/system/coscheml-metrics.service /usr/lib/systemd/system/coscheml-redecide.service /usr/lib/systemd/system/coscheml-guard.service
fi
# An admin's edit of the configuration survives a reinstall.
echo "# site edit" >>/etc/coscheml/coscheml.yaml
check "reinstall (dpkg -i again)" dpkg -i "$main"
check "edited config kept on reinstall" grep -q "# site edit" /etc/coscheml/coscheml.yaml
rm -rf "$tmp"
if [ "${KEEP:-0}" != 1 ]; then
	check "dpkg --purge" dpkg --purge coscheml-slurm-plugin coscheml coscheml-model-lucid
	check "nothing left in /usr/bin" sh -c '! ls /usr/bin/coscheml* 2>/dev/null'
	check "re-decide loop no longer enabled" sh -c '! test -e /etc/systemd/system/slurmctld.service.wants/coscheml-redecide.service'
	check "runtime guard no longer enabled" sh -c '! test -e /etc/systemd/system/slurmd.service.wants/coscheml-guard.service'
fi
[ "$fail" = 0 ] && echo "test-deb: all checks passed" || echo "test-deb: FAILED"
exit "$fail"
