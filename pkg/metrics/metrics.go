// SPDX-License-Identifier: Apache-2.0

// Package metrics writes coscheml's metrics in the Prometheus text exposition
// format (version 0.0.4) to a file for node_exporter's textfile collector: the
// file is replaced atomically (pkg/atomicfile: temp file + rename), so the
// collector never reads half of it, and the temp file's name does not end in
// .prom, so the collector skips it. Names start with coscheml_, carry their unit
// (_seconds, _ratio) and counters end in _total, as Prometheus' naming
// conventions ask (docs/monitoring.md lists every metric).
package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/atomicfile"
)

// Type is a metric family's type.
type Type string

// The types this package writes.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Label is one label pair; a sample's labels are written in the order given.
type Label struct{ Name, Value string }

// Sample is one line of a family. Suffix is "" or, for histograms, "_bucket",
// "_sum" or "_count".
type Sample struct {
	Suffix string
	Labels []Label
	Value  float64
}

// Family is one metric: its HELP and TYPE lines and its samples.
type Family struct {
	Name    string
	Help    string
	Type    Type
	Samples []Sample
}

var (
	nameRE  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Validate checks what the exposition format and our conventions require.
func (f *Family) Validate() error {
	if !nameRE.MatchString(f.Name) || !strings.HasPrefix(f.Name, "coscheml_") {
		return fmt.Errorf("metric name %q: want coscheml_[a-z0-9_]*", f.Name)
	}
	if f.Help == "" {
		return fmt.Errorf("metric %s: no help text", f.Name)
	}
	switch f.Type {
	case Counter:
		if !strings.HasSuffix(f.Name, "_total") {
			return fmt.Errorf("counter %s: name must end in _total", f.Name)
		}
	case Gauge, Histogram:
	default:
		return fmt.Errorf("metric %s: unknown type %q", f.Name, f.Type)
	}
	for _, s := range f.Samples {
		switch {
		case f.Type == Histogram && s.Suffix != "_bucket" && s.Suffix != "_sum" && s.Suffix != "_count":
			return fmt.Errorf("histogram %s: sample suffix %q", f.Name, s.Suffix)
		case f.Type != Histogram && s.Suffix != "":
			return fmt.Errorf("metric %s: suffix %q on a %s", f.Name, s.Suffix, f.Type)
		}
		for _, l := range s.Labels {
			if !labelRE.MatchString(l.Name) || strings.HasPrefix(l.Name, "__") {
				return fmt.Errorf("metric %s: label name %q", f.Name, l.Name)
			}
		}
	}
	return nil
}

// Write writes the families in the text format, sorted by name. Label values are
// escaped; a family that fails Validate is an error and nothing is written.
func Write(w io.Writer, fams []Family) error {
	fams = append([]Family(nil), fams...)
	sort.SliceStable(fams, func(i, j int) bool { return fams[i].Name < fams[j].Name })
	seen := map[string]bool{}
	var b bytes.Buffer
	for i := range fams {
		f := &fams[i]
		if err := f.Validate(); err != nil {
			return err
		}
		if seen[f.Name] {
			return fmt.Errorf("metric %s: written twice", f.Name)
		}
		seen[f.Name] = true
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.Name, escapeHelp(f.Help), f.Name, f.Type)
		for _, s := range f.Samples {
			b.WriteString(f.Name + s.Suffix)
			if len(s.Labels) > 0 {
				b.WriteByte('{')
				for k, l := range s.Labels {
					if k > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l.Name + `="` + escapeLabel(l.Value) + `"`)
				}
				b.WriteByte('}')
			}
			b.WriteString(" " + formatValue(s.Value) + "\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteFile replaces path with the families, atomically, mode 0644 (node_exporter
// runs as another user). path should end in .prom for the textfile collector.
func WriteFile(path string, fams []Family) error {
	if path == "" {
		return errors.New("metrics: no file given")
	}
	var b bytes.Buffer
	if err := Write(&b, fams); err != nil {
		return fmt.Errorf("metrics %s: %w", path, err)
	}
	if err := atomicfile.Write(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
