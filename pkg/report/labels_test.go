// SPDX-License-Identifier: Apache-2.0

package report

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/sim"
)

// svgTexts reads every <text> of an SVG file back from disk.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var texts []string
	in := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return texts
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			in = v.Name.Local == "text"
		case xml.CharData:
			if in {
				texts = append(texts, string(v))
			}
		case xml.EndElement:
			in = false
		}
	}
}

// Every plot's axes name their unit, and summary.md points to the evaluation doc.
func TestAxisUnitsAndEvaluationNote(t *testing.T) {
	runs := fakeRuns()
	in := Input{Title: "t", Baseline: "exclusive", Summaries: sim.SummarizeRuns(runs, "exclusive"), Runs: runs}
	dir := t.TempDir()
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file string
		want []string // axis labels, each with its unit
	}{
		{"jct_cdf.svg", []string{"job completion time (hours, log scale)", "fraction of jobs (cumulative, 0-1)"}},
		{"utilization.svg", []string{"time since first submission (hours)", "allocated GPUs (% of all GPUs)"}},
		{"kernel_util.svg", []string{"time since first submission (hours)", "kernel busy (% of GPU time, mean over all GPUs)"}},
		{"improvement.svg", []string{"change against exclusive (%, higher is better)"}},
		{"below_floor.svg", []string{"jobs started (count, in order of start)", "jobs below floor per "}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			texts := strings.Join(svgTexts(t, filepath.Join(dir, tt.file)), "\n")
			for _, w := range tt.want {
				if !strings.Contains(texts, w) {
					t.Errorf("no axis label %q in:\n%s", w, texts)
				}
			}
			if strings.Contains(texts, "fraction of GPUs") {
				t.Errorf("unitless label left: %s", texts)
			}
		})
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "docs/evaluation.md") {
		t.Errorf("summary.md does not point to docs/evaluation.md:\n%s", md)
	}
}
