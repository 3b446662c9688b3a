// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/placement"
)

// BenchmarkRedecide1000x8 is BenchmarkDecide1000x8's cluster under typed
// pinning, decided as the re-decide loop's updates on a release that refuses
// typed updates (the engine's release is unknown: as 22.05): each decision
// chooses among the GPUs an untyped count reaches (placement.Cluster.WithReach).
// Compare with BenchmarkDecide1000x8 (a submission on the same cluster).
func BenchmarkRedecide1000x8(b *testing.B) {
	f, tags := bigFixture(b)
	f.cfg.ShardPinning, f.cfg.ShardTypePrefix = config.PinTyped, "g"
	f.e.Reload()
	if r := f.e.view.cluster.Reach; r != placement.ReachTyped {
		b.Fatalf("cluster reach %v after the reload, want typed", r)
	}
	jobs := make([]JobFields, len(tags))
	for i, t := range tags {
		jobs[i] = job("coscheml:app=" + t)
		jobs[i].Modify, jobs[i].JobID, jobs[i].Admin = true, uint32(100+i), true
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := decideAndForget(f, jobs[i%len(jobs)])
		if r.Code != Rewrite {
			b.Fatalf("re-decision %+v", r)
		}
	}
}
