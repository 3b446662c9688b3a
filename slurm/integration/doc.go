// SPDX-License-Identifier: Apache-2.0

// Package integration tests coscheml against real Slurm daemons: one slurmctld with
// the job_submit/coscheml plugin and four slurmd with fake GPUs (gres/gpu and
// gres/shard), all on loopback, driven through the real sbatch, scontrol and squeue.
//
// The tests carry the build tag "integration" and need root (they install the Debian
// packages slurm-wlm, munge and libslurm-dev when missing, create device nodes and
// run the daemons):
//
//	go test -tags integration -count=1 -v ./slurm/integration/...
//
// Without root they skip with a message. COSCHEML_INTEGRATION_NOBUILD=1 uses the
// bin/ and lib/ already built by `make build` instead of building them.
// COSCHEML_INSTALLED=/usr builds nothing of coscheml and tests an installed one
// (the .deb's layout: /usr/bin, /usr/lib/coscheml/libcoscheml.so, the plugin in the
// Slurm plugin folder, /usr/libexec/coscheml/{prolog,epilog}.sh); test data comes
// from the clone. packaging/test-deb-suite.sh installs, runs and purges.
// COSCHEML_PERF=1 also runs TestSubmissionCost, which only measures and reports the
// submission cost with and without the plugin (docs/performance-slurm.md).
// COSCHEML_REPRO_LOSTLAUNCH=N runs TestLostLaunch, which tries N times to make
// Slurm lose a batch launch across a slurmctld stop (docs/compatibility.md,
// "Determinism").
package integration
