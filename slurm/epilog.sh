#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# coscheml node Epilog. slurm.conf:  Epilog=/usr/local/libexec/coscheml/epilog.sh
#
# Removes the job from the GPU residency store, stops its sampler and collects
# the run; a detached `coscheml-node finish` then waits until the controller
# reports the job's final state and, only for a COMPLETED job, writes its profile
# and records its run next to its co-runners (an observation for retraining). It must never fail a job: a non-zero Epilog exit drains the node, so the
# binary is run (not exec'ed) and this script always exits 0, even if the binary
# is missing or killed. Problems go to syslog (facility daemon, tag coscheml-node).
#
# COSCHEML_BIN    folder of coscheml-node      (default /usr/local/bin)
# COSCHEML_CONFIG site configuration           (default /etc/coscheml/coscheml.yaml)
# COSCHEML_SLURM_BIN folder of squeue, if not in /usr/local/bin, /usr/bin or /bin
#
# slurmd runs the Epilog with almost no environment (no PATH on 22.05); the
# finisher needs squeue (and SLURM_CONF, which slurmd sets).
PATH="${COSCHEML_SLURM_BIN:+$COSCHEML_SLURM_BIN:}${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin"
export PATH
bin="${COSCHEML_BIN:-/usr/local/bin}/coscheml-node"
conf="${COSCHEML_CONFIG:-/etc/coscheml/coscheml.yaml}"
if [ -x "$bin" ]; then
	if [ -r "$conf" ]; then
		"$bin" epilog --config "$conf" </dev/null
	else
		"$bin" epilog </dev/null
	fi
fi
exit 0
