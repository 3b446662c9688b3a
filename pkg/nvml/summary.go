// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

// maxNotes bounds the notes a summary keeps (a flapping GPU must not grow a
// profile without bound).
const maxNotes = 16

// Summary accumulates samples into the statistics a profile stores. It is a Sink.
//
// A multi-GPU job's GPUs are pooled: every GPU's reading at every instant is one
// value, so the mean is that of the average GPU and p95/max are over all GPUs and
// instants (a profile describes one GPU). Samples counts sampling instants.
type Summary struct {
	vals    [NumMetrics][]float64
	rounds  int
	first   time.Time
	last    time.Time
	models  []string
	notes   []string
	dropped int
	partial bool
}

// Device records the GPU model.
func (s *Summary) Device(_ int, name string) error {
	name = oneLine(name)
	for _, m := range s.models {
		if m == name {
			return nil
		}
	}
	s.models = append(s.models, name)
	return nil
}

// Round adds one sampling instant.
func (s *Summary) Round(at time.Time, samples []Sample) error {
	if len(samples) == 0 {
		return nil
	}
	if s.rounds == 0 || at.Before(s.first) {
		s.first = at
	}
	if at.After(s.last) {
		s.last = at
	}
	s.rounds++
	for i := range samples {
		for m := Metric(0); m < NumMetrics; m++ {
			if samples[i].Has(m) {
				s.vals[m] = append(s.vals[m], samples[i].Values[m])
			}
		}
	}
	return nil
}

// Note records a note once.
func (s *Summary) Note(text string, partial bool) error {
	s.partial = s.partial || partial
	text = oneLine(text)
	for _, n := range s.notes {
		if n == text {
			return nil
		}
	}
	if len(s.notes) >= maxNotes {
		s.dropped++
		return nil
	}
	s.notes = append(s.notes, text)
	return nil
}

// Notes returns the notes recorded so far (do not modify).
func (s *Summary) Notes() []string { return s.notes }

// Rounds is the number of sampling instants seen.
func (s *Summary) Rounds() int { return s.rounds }

// Values returns the readings of metric m (do not modify).
func (s *Summary) Values(m Metric) []float64 { return s.vals[m] }

// Stat summarizes metric m; ok is false when it was never read.
func (s *Summary) Stat(m Metric) (st profile.Stat, ok bool) {
	if len(s.vals[m]) == 0 {
		return profile.Stat{}, false
	}
	return Summarize(s.vals[m]), true
}

// GPUModel is the GPUs' model name; several models are joined with "+".
func (s *Summary) GPUModel() string { return strings.Join(s.models, "+") }

// Fill writes the metric summary, sample count, duration and partial state into p.
// A metric never read at all also makes the profile partial. DurationS is the
// span from the first to the last sampling instant.
func (s *Summary) Fill(p *profile.Profile) {
	stat := func(m Metric) profile.Stat {
		st, ok := s.Stat(m)
		if !ok {
			_ = s.Note(fmt.Sprintf("%s: no readings", m), true)
		}
		return st
	}
	p.SMUtil = stat(SMUtil)
	p.MemBWUtil = stat(MemBWUtil)
	p.MemUsedMiB = stat(MemUsedMiB).Max
	p.PCIeTxMBps = stat(PCIeTxMBps)
	p.PCIeRxMBps = stat(PCIeRxMBps)
	p.PowerW = stat(PowerW)
	p.SMClockMHz = stat(SMClockMHz)
	if m := s.GPUModel(); m != "" {
		p.GPUModel = clip(m, profile.MaxTextLen)
	}
	p.Samples = s.rounds
	p.DurationS = s.last.Sub(s.first).Seconds()
	p.Partial = s.partial
	notes := append([]string(nil), s.notes...)
	if s.dropped > 0 {
		notes = append(notes, fmt.Sprintf("%d more notes dropped", s.dropped))
	}
	p.PartialNote = clip(strings.Join(notes, "; "), profile.MaxTextLen)
}

// clip shortens s to at most n bytes (it is ASCII: notes are sanitized).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Summarize returns mean, p95 and max of vals (which it does not modify).
//
// p95 is exact, by the nearest-rank method: sort the n values ascending and take
// the one at 1-based rank ceil(0.95*n). No interpolation, so the p95 is always a
// value that was actually read; for n < 20 it equals the maximum.
func Summarize(vals []float64) profile.Stat {
	if len(vals) == 0 {
		return profile.Stat{}
	}
	sorted := append([]float64(nil), vals...)
	sort.Float64s(sorted)
	// A running mean cannot overflow where a sum of huge values would.
	var mean float64
	for i, v := range sorted {
		mean += (v - mean) / float64(i+1)
	}
	// Rounding must not put the mean outside the values (Validate checks max >= mean).
	mean = min(max(mean, sorted[0]), sorted[len(sorted)-1])
	return profile.Stat{
		Mean: mean,
		P95:  sorted[NearestRank(len(sorted), 0.95)],
		Max:  sorted[len(sorted)-1],
	}
}

// NearestRank returns the 0-based index of the q-quantile (0 < q <= 1) of n sorted
// values by the nearest-rank method: ceil(q*n) - 1, clamped to [0, n-1].
func NearestRank(n int, q float64) int {
	// The epsilon keeps float error from pushing an exact rank up by one
	// (0.95*20 is 19.000000000000004 in float64, which ceil would make 20).
	r := int(math.Ceil(q*float64(n) - 1e-9))
	if r < 1 {
		r = 1
	}
	if r > n {
		r = n
	}
	return r - 1
}
