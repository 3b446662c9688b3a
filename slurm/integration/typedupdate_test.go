// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/submit"
)

// TestTypedUpdate: whether a typed shard request set by `scontrol update` on a
// pending job (as the plugin's job_modify does for a re-decision) makes the job
// start on the GPU it names is what submit.TypedUpdates says of this release:
// the plugin names the GPU's type in re-decisions only where Slurm honours it,
// and steers with untyped counts elsewhere (docs/compatibility.md). The
// request is written in the release's spelling, as the plugin writes it. Run
// on each release by the matrix, it measures them all.
func TestTypedUpdate(t *testing.T) {
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	c := newClusterTopo(t, a, false, topology{typed: true}, nil)
	v := slurmVersionNumber(a.slurm.version)
	want := submit.TypedUpdates(v)
	prefix := "gres:"
	if v >= 23<<16|11<<8 {
		prefix = "gres/"
	}
	// The plugin re-decides jobs it deferred (a whole GPU's shards) and jobs
	// submitted with a GPU request; GPU 0 is the one Slurm's first fit takes
	// for any untyped request on the idle cluster, so a job on GPU 1 was
	// placed by its type.
	type attempt struct {
		from, to string
		relied   bool // what the plugin would write; else reported only
	}
	attempts := []attempt{{"shard:4", prefix + "shard:g1:2", true}, {"gpu:1", prefix + "shard:g1:2", true}}
	if prefix == "gres:" {
		// 22.05 stores the newer spelling without refusing it: where does the job run?
		attempts = append(attempts, attempt{"shard:4", "gres/shard:g1:2", false})
	}
	for _, at := range attempts {
		from, to := at.from, at.to
		m := c.path("jobs", fmt.Sprintf("typed.%d", time.Now().UnixNano()))
		id := c.mustSbatch("--hold", "--gres="+from, "-o", "/dev/null", "--wrap=touch "+m+"; exec sleep 60")
		out, err := c.run("scontrol", "update", "jobid="+strconv.Itoa(id), "TresPerNode="+to)
		took := false
		gpu := "-"
		if err == nil {
			c.mustRun("scontrol", "release", strconv.Itoa(id))
			if c.waitStarted(id, m, 30*time.Second) {
				gpu = c.showJob(id).GPUIdx
				took = gpu == "1"
			}
		}
		c.cancel(id)
		t.Logf("Slurm %s: update of a pending --gres=%s job to %s: %s (update error %v, output %q; started on GPU %s); the plugin assumes %v",
			a.slurm.version, from, to, map[bool]string{true: "honoured", false: "not honoured"}[took], err, strings.TrimSpace(out), gpu, want)
		if at.relied && took != want {
			t.Errorf("Slurm %s honours a typed update of a --gres=%s job: %v; submit.TypedUpdates says %v (update slurmTypedUpdate and docs/compatibility.md)",
				a.slurm.version, from, took, want)
		}
	}
}
