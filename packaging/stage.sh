#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Stages the generated files of the packages into $1 (make package calls it):
# man pages from the programs' own command trees, shell completions, and the node
# hooks with the packages' paths (/usr/bin, /usr/libexec) instead of make install's
# /usr/local ones. $2 is the folder with the freshly built programs.
set -eu
stage="$1"
bin="$2"
here=$(dirname "$0")
rm -rf "$stage"
mkdir -p "$stage/man" "$stage/completion/bash" "$stage/completion/zsh" "$stage/libexec" "$stage/slurm"
for p in coscheml coscheml-train; do
	"$bin/$p" man | gzip -9n >"$stage/man/$p.1.gz"
	"$bin/$p" completion bash >"$stage/completion/bash/$p"
	"$bin/$p" completion zsh >"$stage/completion/zsh/_$p"
done
gzip -9n <"$here/man/coscheml-node.8" >"$stage/man/coscheml-node.8.gz"
for f in prolog.sh epilog.sh; do
	sed -e 's|COSCHEML_BIN:-/usr/local/bin}|COSCHEML_BIN:-/usr/bin}|' -e 's|(default /usr/local/bin)|(default /usr/bin)|' \
		-e 's|/usr/local/libexec|/usr/libexec|g' "$here/../slurm/$f" >"$stage/libexec/$f"
	chmod 0755 "$stage/libexec/$f"
done
for f in slurm.conf.example gres.conf.example; do
	sed -e 's|/usr/local/libexec|/usr/libexec|g' -e 's|/usr/local/lib/coscheml|/usr/lib/coscheml|g' "$here/../slurm/$f" >"$stage/slurm/$f"
done
# The hooks must still find the binary where the package puts it.
grep -q '/usr/bin}/coscheml-node' "$stage/libexec/prolog.sh" && grep -q '/usr/bin}/coscheml-node' "$stage/libexec/epilog.sh" || {
	echo "stage.sh: prolog.sh or epilog.sh no longer defaults COSCHEML_BIN to /usr/local/bin; update the sed above" >&2
	exit 1
}
