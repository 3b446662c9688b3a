// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"testing"

	"github.com/coscheml/coscheml/internal/racebuild"
)

// TestDecideAllocs bounds the allocations of one decision on the submit path
// (each one is a trip to Go's allocator, which after a garbage collection
// refills its per-size caches from memory: issue 13). Untagged jobs, most of a
// site's, allocate nothing; a tagged rewrite allocates its answer (comment,
// TRES, log line, id), its reservation and the policy's reason.
func TestDecideAllocs(t *testing.T) {
	if racebuild.Enabled {
		t.Skip("allocation counts differ under the race detector (make race); checked by make unit")
	}
	f, tags := bigFixtureNodes(t, 64)
	for _, tc := range []struct {
		name string
		j    JobFields
		max  float64
	}{
		{"untagged, no comment", job(""), 0},
		{"untagged, free-text comment", job("nightly run 42"), 0},
		{"tagged, rewritten", job("coscheml:app=" + tags[0]), 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			got := testing.AllocsPerRun(200, func() { r = decideAndForget(f, tc.j) })
			if got > tc.max {
				t.Errorf("%v allocations per decision (%s), want at most %v", got, logOf(r), tc.max)
			}
			t.Logf("%v allocations per decision", got)
		})
	}
}

// BenchmarkDecideUntagged is an untagged job's decision in Go (what the C side
// answers itself while the pass window is open).
func BenchmarkDecideUntagged(b *testing.B) {
	f, _ := bigFixtureNodes(b, 64)
	j := job("nightly")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.e.Decide(j)
	}
}
