#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# coscheml node Prolog. slurm.conf:  Prolog=/usr/local/libexec/coscheml/prolog.sh
#
# Records which GPUs the job holds (the residency store the job_submit plugin
# reads) and starts the NVML sampler for a tagged job whose profile is missing or
# stale. It must never fail a job: a non-zero Prolog exit drains the node, so the
# binary is run (not exec'ed) and this script always exits 0, even if the binary
# is missing or killed. Problems go to syslog (facility daemon, tag coscheml-node).
#
# COSCHEML_BIN    folder of coscheml-node      (default /usr/local/bin)
# COSCHEML_CONFIG site configuration           (default /etc/coscheml/coscheml.yaml)
bin="${COSCHEML_BIN:-/usr/local/bin}/coscheml-node"
conf="${COSCHEML_CONFIG:-/etc/coscheml/coscheml.yaml}"
if [ -x "$bin" ]; then
	if [ -r "$conf" ]; then
		"$bin" prolog --config "$conf" </dev/null
	else
		"$bin" prolog </dev/null
	fi
fi
exit 0
