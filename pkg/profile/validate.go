// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"fmt"
	"math"
)

// MaxTextLen bounds the free-text fields of a profile (GPU model, host, source,
// note): they end up in log lines and terminals.
const MaxTextLen = 256

// Validate checks that p is internally consistent: a valid tag and class,
// utilizations that are percentages, and no negative or non-finite quantity. The
// store refuses to write a profile that does not validate, and re-validates on
// read, so every profile a caller gets from this package passed here.
func (p *Profile) Validate() error {
	if p == nil {
		return errors.New("profile: nil")
	}
	if err := ValidateTag(p.Tag); err != nil {
		return err
	}
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if _, err := ParseClass(string(p.Class)); err != nil {
		errs = append(errs, err)
	}
	pct := func(name string, s Stat) {
		for _, f := range []struct {
			n string
			v float64
		}{{"mean", s.Mean}, {"p95", s.P95}, {"max", s.Max}} {
			if !finite(f.v) || f.v < 0 || f.v > 100 {
				add("%s %s = %v: want a percentage in 0..100", name, f.n, f.v)
			}
		}
		statOrder(name, s, add)
	}
	pct("sm_util", p.SMUtil)
	pct("membw_util", p.MemBWUtil)
	nonNeg := func(name string, v float64) {
		if !finite(v) || v < 0 {
			add("%s = %v: want a finite non-negative number", name, v)
		}
	}
	for _, st := range []struct {
		n string
		s Stat
	}{{"pcie_tx_mbps", p.PCIeTxMBps}, {"pcie_rx_mbps", p.PCIeRxMBps}, {"power_w", p.PowerW}, {"sm_clock_mhz", p.SMClockMHz}} {
		nonNeg(st.n+" mean", st.s.Mean)
		nonNeg(st.n+" p95", st.s.P95)
		nonNeg(st.n+" max", st.s.Max)
		statOrder(st.n, st.s, add)
	}
	nonNeg("mem_used_mib", p.MemUsedMiB)
	nonNeg("solo_runtime_s", p.SoloRuntimeS)
	nonNeg("solo_throughput", p.SoloThroughput)
	nonNeg("duration_s", p.DurationS)
	if p.Samples < 0 {
		add("samples = %d: want >= 0", p.Samples)
	}
	for _, t := range []struct{ n, v string }{
		{"gpu_model", p.GPUModel}, {"collected_on", p.CollectedOn},
		{"source", p.Source}, {"partial_note", p.PartialNote},
	} {
		if err := CheckText(t.v); err != nil {
			add("%s: %v", t.n, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("profile %s: %w", p.Tag, errors.Join(errs...))
	}
	return nil
}

// statOrder checks that the maximum is not below the mean or the p95. (The p95 may
// legitimately lie below the mean of a skewed sample, so that is not checked.) A
// zero maximum means "not measured" and is accepted.
func statOrder(name string, s Stat, add func(string, ...any)) {
	if s.Max != 0 && (s.Max < s.Mean || s.Max < s.P95) {
		add("%s max = %v is below its mean %v or p95 %v", name, s.Max, s.Mean, s.P95)
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// CheckText accepts printable ASCII of at most MaxTextLen bytes, so free text (GPU
// model, host, source, note) can be printed and logged without escaping and
// cannot carry terminal escapes or bidi controls.
func CheckText(s string) error {
	if len(s) > MaxTextLen {
		return fmt.Errorf("%d bytes, longer than %d", len(s), MaxTextLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%q: only printable ASCII is allowed", Sanitize(s))
		}
	}
	return nil
}
