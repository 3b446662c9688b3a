// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/profile/csvtab"
)

// Importers of solo-profile CSV files (formats in docs/profiles.md). Both are
// header-driven: columns may come in any order, and every error names the line
// and the column.

// LucidGPUModel is the GPU model recorded for profiles from the Lucid artifact,
// which does not name its GPU.
const LucidGPUModel = "unknown (>=24 GB, Lucid artifact)"

// LucidSource is the Source of profiles imported with ReadLucidSolo.
const LucidSource = "lucid-train solo_profiles.csv"

// lucidNote explains what a Lucid profile lacks.
const lucidNote = "source gives means only: p95 and max are set to the mean; no PCIe, power or clock data"

// dupTags remembers the line of each tag to report duplicates.
type dupTags map[string]int

func (d dupTags) check(tag string, line int) error {
	if first, ok := d[tag]; ok {
		return fmt.Errorf("line %d: tag %q already defined on line %d", line, tag, first)
	}
	d[tag] = line
	return nil
}

// ReadLucidSolo reads the solo-profile CSV of the Lucid artifact
// (models/data/lucid-train/solo_profiles.csv): columns model, batchsize, amp,
// speed, gpu_util, gmem_util, gmem (others, such as dataset and label, are
// ignored). Each row becomes a "train" profile tagged LucidTag(model, batchsize,
// amp). The source gives means only, so P95 and Max repeat the mean and the
// profile is marked Partial. Two rows with the same tag are an error.
func ReadLucidSolo(r io.Reader) ([]*Profile, error) {
	t, err := csvtab.New(r, csvtab.Options{Required: []string{"model", "batchsize", "amp", "speed", "gpu_util", "gmem_util", "gmem"}})
	if err != nil {
		return nil, fmt.Errorf("lucid solo csv: %w", err)
	}
	return readRows(t, "lucid solo csv", lucidRow)
}

// readRows reads every data row of t with row, refusing a repeated tag and a
// table without rows; errors are prefixed with what (the format's name).
func readRows(t *csvtab.Table, what string, row func(*csvtab.Table) (*Profile, error)) ([]*Profile, error) {
	var out []*Profile
	seen := dupTags{}
	for {
		if err := t.Next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		p, err := row(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := seen.check(p.Tag, t.Line()); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no data rows", what)
	}
	return out, nil
}

func lucidRow(t *csvtab.Table) (*Profile, error) {
	tag, err := LucidRowTag(t, "model", "batchsize", "amp")
	if err != nil {
		return nil, err
	}
	speed, err := t.Float("speed", 0, math.MaxFloat64)
	if err != nil {
		return nil, err
	}
	if speed == 0 {
		return nil, t.Errf("speed", "must be positive")
	}
	sm, err := t.Float("gpu_util", 0, 100)
	if err != nil {
		return nil, err
	}
	bw, err := t.Float("gmem_util", 0, 100)
	if err != nil {
		return nil, err
	}
	mem, err := t.Float("gmem", 0, math.MaxFloat64)
	if err != nil {
		return nil, err
	}
	src := fmt.Sprintf("%s line %d", LucidSource, t.Line())
	if ds := t.Str("dataset"); ds != "" {
		src += " (" + Sanitize(t.Str("model")) + " on " + Sanitize(ds) + ")"
	}
	p := &Profile{
		Tag:            tag,
		Class:          ClassTrain,
		GPUModel:       LucidGPUModel,
		SMUtil:         Stat{Mean: sm, P95: sm, Max: sm},
		MemBWUtil:      Stat{Mean: bw, P95: bw, Max: bw},
		MemUsedMiB:     mem,
		SoloThroughput: speed,
		Partial:        true,
		PartialNote:    lucidNote,
		Source:         src,
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("line %d: %w", t.Line(), err)
	}
	return p, nil
}

// LucidRowTag returns the tag of a Lucid setup read from the current row of t:
// the model, batch size and amp (0 or 1) columns are named by the caller ("model",
// "batchsize", "amp" in the solo file; "model1", ... in the pairs file). Errors name
// the line and the column.
func LucidRowTag(t *csvtab.Table, modelCol, batchCol, ampCol string) (string, error) {
	model := t.Str(modelCol)
	if model == "" {
		return "", t.Errf(modelCol, "empty")
	}
	bs, err := t.Int(batchCol, 1, 1<<20)
	if err != nil {
		return "", err
	}
	var amp bool
	switch a := t.Str(ampCol); a {
	case "0":
	case "1":
		amp = true
	default:
		return "", t.Errf(ampCol, "%q: want 0 or 1", Sanitize(a))
	}
	tag, err := LucidTag(model, bs, amp)
	if err != nil {
		return "", t.Errf(modelCol, "%v", err)
	}
	return tag, nil
}

// Columns of the generic profile CSV (docs/profiles.md).
var (
	genericRequired = []string{"tag", "class", "sm_mean", "membw_mean", "mem_used_mib"}
	genericOptional = []string{
		"sm_p95", "sm_max", "membw_p95", "membw_max",
		"pcie_tx_mbps_mean", "pcie_rx_mbps_mean", "power_w_mean", "sm_clock_mhz_mean",
		"solo_runtime_s", "solo_throughput", "samples", "duration_s",
		"gpu_model", "collected_at", "collected_on", "source",
	}
)

// GenericColumns returns the columns of the generic profile CSV: the required ones
// first, then the optional ones.
func GenericColumns() (required, optional []string) {
	return append([]string(nil), genericRequired...), append([]string(nil), genericOptional...)
}

// ReadGenericCSV reads the generic profile CSV (docs/profiles.md). Required
// columns: tag, class, sm_mean, membw_mean, mem_used_mib; the optional ones are
// listed by GenericColumns, and an unknown column is an error (it is most likely a
// typo). Lines starting with '#' are comments. A missing p95 or max is derived
// from the mean and the profile is marked Partial with a note saying so.
func ReadGenericCSV(r io.Reader) ([]*Profile, error) {
	known := map[string]bool{}
	for _, c := range genericRequired {
		known[c] = true
	}
	for _, c := range genericOptional {
		known[c] = true
	}
	t, err := csvtab.New(r, csvtab.Options{Required: genericRequired, Known: known, Comments: true})
	if err != nil {
		return nil, fmt.Errorf("profile csv: %w", err)
	}
	return readRows(t, "profile csv", genericRow)
}

func genericRow(t *csvtab.Table) (*Profile, error) {
	p := &Profile{Source: "generic profile csv"}
	p.Tag = t.Str("tag")
	if err := ValidateTag(p.Tag); err != nil {
		return nil, t.Errf("tag", "%v", err)
	}
	c, err := ParseClass(t.Str("class"))
	if err != nil {
		return nil, t.Errf("class", "%v", err)
	}
	p.Class = c
	var derived []string
	// pctStat reads <pre>_mean and the optional <pre>_p95 and <pre>_max.
	pctStat := func(pre string) (Stat, error) {
		var s Stat
		var err error
		if s.Mean, err = t.Float(pre+"_mean", 0, 100); err != nil {
			return s, err
		}
		s.P95 = s.Mean
		if t.Has(pre + "_p95") {
			if s.P95, err = t.Float(pre+"_p95", 0, 100); err != nil {
				return s, err
			}
		} else {
			derived = append(derived, pre+"_p95=mean")
		}
		s.Max = math.Max(s.Mean, s.P95)
		if t.Has(pre + "_max") {
			if s.Max, err = t.Float(pre+"_max", 0, 100); err != nil {
				return s, err
			}
			if s.Max < s.Mean || s.Max < s.P95 {
				return s, t.Errf(pre+"_max", "%v is below the mean or p95", s.Max)
			}
		} else {
			derived = append(derived, pre+"_max=max(mean,p95)")
		}
		return s, nil
	}
	if p.SMUtil, err = pctStat("sm"); err != nil {
		return nil, err
	}
	if p.MemBWUtil, err = pctStat("membw"); err != nil {
		return nil, err
	}
	if p.MemUsedMiB, err = t.Float("mem_used_mib", 0, math.MaxFloat64); err != nil {
		return nil, err
	}
	// Optional non-negative quantities; a means-only Stat has P95 = Max = 0
	// ("not measured"), as Validate allows.
	opt := func(name string, dst *float64) error {
		if !t.Has(name) {
			return nil
		}
		v, err := t.Float(name, 0, math.MaxFloat64)
		*dst = v
		return err
	}
	for _, o := range []struct {
		n string
		d *float64
	}{
		{"pcie_tx_mbps_mean", &p.PCIeTxMBps.Mean}, {"pcie_rx_mbps_mean", &p.PCIeRxMBps.Mean},
		{"power_w_mean", &p.PowerW.Mean}, {"sm_clock_mhz_mean", &p.SMClockMHz.Mean},
		{"solo_runtime_s", &p.SoloRuntimeS}, {"solo_throughput", &p.SoloThroughput},
		{"duration_s", &p.DurationS},
	} {
		if err := opt(o.n, o.d); err != nil {
			return nil, err
		}
	}
	if t.Has("samples") {
		if p.Samples, err = t.Int("samples", 0, math.MaxInt32); err != nil {
			return nil, err
		}
	}
	for _, s := range []struct {
		n string
		d *string
	}{{"gpu_model", &p.GPUModel}, {"collected_on", &p.CollectedOn}, {"source", &p.Source}} {
		if !t.Has(s.n) {
			continue
		}
		v := t.Str(s.n)
		if err := CheckText(v); err != nil {
			return nil, t.Errf(s.n, "%v", err)
		}
		*s.d = v
	}
	if t.Has("collected_at") {
		v := t.Str("collected_at")
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, t.Errf("collected_at", "%q is not an RFC 3339 time", Sanitize(v))
		}
		p.CollectedAt = at
	}
	if len(derived) > 0 {
		p.Partial = true
		p.PartialNote = "not in source, derived: " + strings.Join(derived, ", ")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("line %d: %w", t.Line(), err)
	}
	return p, nil
}
