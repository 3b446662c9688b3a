// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/trace"
)

// benchJobs is the whole Philly trace with applications and classes of seed 1.
func benchJobs(b *testing.B) []trace.Job {
	tt := shipped(b)
	tr, err := trace.ReadPhilly(bytes.NewReader(testPhilly(b)))
	if err != nil {
		b.Fatal(err)
	}
	if err := trace.Assign(tr.Jobs, tt.Tags(), trace.DefaultClassMix, 1); err != nil {
		b.Fatal(err)
	}
	return tr.Jobs
}

func benchRun(b *testing.B, jobs []trace.Job, nodes int, policy string) {
	tt := shipped(b)
	var pred model.Predictor
	switch policy {
	case "coscheml":
		pred = testModel(b)
	case "oracle":
		pred = tt
	}
	b.ReportAllocs()
	events := 0
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		pol, err := placement.ByName(policy, pred, placement.DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(Config{Nodes: nodes, GPUsPerNode: 8}, jobs, tt, pol)
		if err != nil {
			b.Fatal(err)
		}
		events += res.Events
	}
	cpu := (cpuTime() - cpu0).Seconds()
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	if cpu > 0 {
		b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(events)/cpu, "events/cpu-s")
	}
}

// BenchmarkPhillyFull: all 82,247 Philly jobs on 256 nodes x 8 GPUs (2,048 GPUs),
// one policy per sub-benchmark. Run with
// go test -run XXX -bench PhillyFull -benchtime 1x -cpu 1 ./pkg/sim/
func BenchmarkPhillyFull(b *testing.B) {
	jobs := benchJobs(b)
	for _, p := range []string{"exclusive", "coscheml", "oracle", "blind"} {
		b.Run(p, func(b *testing.B) { benchRun(b, jobs, 256, p) })
	}
}

// BenchmarkScaling: time against jobs (first N of the trace, 2,048 GPUs) and
// against GPUs (whole trace), Co-scheML policy.
func BenchmarkScaling(b *testing.B) {
	jobs := benchJobs(b)
	for _, n := range []int{10000, 20000, 40000, len(jobs)} {
		b.Run(fmt.Sprintf("jobs=%d/gpus=2048", n), func(b *testing.B) { benchRun(b, jobs[:n], 256, "coscheml") })
	}
	for _, nodes := range []int{64, 128, 512, 1024} {
		b.Run(fmt.Sprintf("jobs=%d/gpus=%d", len(jobs), nodes*8), func(b *testing.B) { benchRun(b, jobs, nodes, "coscheml") })
	}
}
