// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/promcheck"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		fams    []Family
		want    string
		wantErr string
	}{
		{"gauge with labels, escaped", []Family{{Name: "coscheml_x_ratio", Help: "a\\b\nc", Type: Gauge,
			Samples: []Sample{{Labels: []Label{{"node", `n"1\` + "\n"}}, Value: 0.5}}}},
			"# HELP coscheml_x_ratio a\\\\b\\nc\n# TYPE coscheml_x_ratio gauge\ncoscheml_x_ratio{node=\"n\\\"1\\\\\\n\"} 0.5\n", ""},
		{"sorted by name", []Family{
			{Name: "coscheml_b", Help: "b", Type: Gauge, Samples: []Sample{{Value: 2}}},
			{Name: "coscheml_a_total", Help: "a", Type: Counter, Samples: []Sample{{Value: 1}}}},
			"# HELP coscheml_a_total a\n# TYPE coscheml_a_total counter\ncoscheml_a_total 1\n# HELP coscheml_b b\n# TYPE coscheml_b gauge\ncoscheml_b 2\n", ""},
		{"counter without _total", []Family{{Name: "coscheml_x", Help: "x", Type: Counter}}, "", "_total"},
		{"foreign prefix", []Family{{Name: "node_x", Help: "x", Type: Gauge}}, "", "coscheml_"},
		{"no help", []Family{{Name: "coscheml_x", Type: Gauge}}, "", "help"},
		{"reserved label", []Family{{Name: "coscheml_x", Help: "x", Type: Gauge, Samples: []Sample{{Labels: []Label{{"__name", "v"}}}}}}, "", "label name"},
		{"twice", []Family{{Name: "coscheml_x", Help: "x", Type: Gauge}, {Name: "coscheml_x", Help: "x", Type: Gauge}}, "", "twice"},
		{"suffix on a gauge", []Family{{Name: "coscheml_x", Help: "x", Type: Gauge, Samples: []Sample{{Suffix: "_sum"}}}}, "", "suffix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			err := Write(&b, tt.fams)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one about %q", err, tt.wantErr)
				}
				if b.Len() != 0 {
					t.Errorf("wrote %q despite the error", b.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}

func TestCountersFileReadBack(t *testing.T) {
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	c := NewCounters(t0)
	c.Decision("rewrite", "share", "")
	c.Decision("rewrite", "share", "")
	c.Decision("rewrite", "exclusive", "")
	c.Decision("unchanged", "wait", "")
	c.Decision("reject", "pass", "unknown_profile")
	c.Decision("reject", "pass", "Invalid Tag!\n")
	c.Decision("Moved!", "share", "")     // not one of the log's words: counted under its sanitized label
	c.Measured("train", 0.90, 0.86, 0.75) // error 0.04, above floor
	c.Measured("infer", 0.92, 0.70, 0.90) // error 0.22, below floor
	path := filepath.Join(t.TempDir(), "coscheml.prom")
	if err := WriteFile(path, c.Families(t0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		`coscheml_decisions_total{outcome="rewrite",action="share"} 2`,
		`coscheml_decisions_total{outcome="reject",action="pass"} 2`,
		`coscheml_decisions_total{outcome="rewrite",action="exclusive"} 1`,
		`coscheml_decisions_total{outcome="unchanged",action="wait"} 1`,
		`coscheml_decisions_total{outcome="moved_",action="share"} 1`,
		`coscheml_decisions_total{outcome="unchanged",action="pass"} 0`, // a usual pair, 0 until counted
		`coscheml_waits_total 1`,
		`coscheml_rejects_total{reason="unknown_profile"} 1`,
		`coscheml_rejects_total{reason="invalid_tag__"} 1`, // sanitized, never raw user text
		`coscheml_jobs_below_floor_total{class="infer"} 1`,
		// Known classes are there at 0 before their first breach.
		`coscheml_jobs_below_floor_total{class="hpc"} 0`,
		`coscheml_jobs_below_floor_total{class="train"} 0`,
		`coscheml_prediction_abs_error_ratio_bucket{le="0.05"} 1`,
		`coscheml_prediction_abs_error_ratio_bucket{le="0.2"} 1`,
		`coscheml_prediction_abs_error_ratio_bucket{le="0.3"} 2`,
		`coscheml_prediction_abs_error_ratio_bucket{le="+Inf"} 2`,
		`coscheml_prediction_abs_error_ratio_count 2`,
		`coscheml_counters_start_time_seconds 1.778051289e+09`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("file lacks %q:\n%s", want, got)
		}
	}
	// No temp file is left for the textfile collector to trip over.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("folder holds %d files, want only the .prom file", len(entries))
	}
	promcheck.File(t, path)
}

func TestCountersBoundCardinality(t *testing.T) {
	c := NewCounters(time.Now())
	for i := 0; i < 3*maxLabelValues; i++ {
		c.Decision("reject", "pass", strings.Repeat("r", i%40)+string(rune('a'+i%26)))
	}
	for _, f := range c.Families(time.Now()) {
		if f.Name == "coscheml_rejects_total" && len(f.Samples) > maxLabelValues+1 {
			t.Errorf("%d reject reasons, want at most %d + other", len(f.Samples), maxLabelValues)
		}
	}
}

func TestRunWritesUntilCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.prom")
	c := NewCounters(time.Now())
	c.Decision("rewrite", "share", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, path, time.Hour, t.Logf); close(done) }()
	cancel()
	<-done
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `coscheml_decisions_total{outcome="rewrite",action="share"} 1`) {
		t.Errorf("after cancel: %v\n%s", err, b)
	}
	var logged []string
	NewCounters(time.Now()).Run(ctx, filepath.Join(t.TempDir(), "missing", "c.prom"), time.Hour, func(f string, a ...any) { logged = append(logged, f) })
	if len(logged) != 1 {
		t.Errorf("a write error was logged %d times, want 1", len(logged))
	}
}

// Whatever a label value holds, each sample stays on one line.
func FuzzWriteLabel(f *testing.F) {
	f.Add("n1")
	f.Add("a\"b\\c\nd")
	f.Fuzz(func(t *testing.T, v string) {
		var b bytes.Buffer
		fam := Family{Name: "coscheml_x", Help: "x", Type: Gauge, Samples: []Sample{{Labels: []Label{{"node", v}}, Value: 1}}}
		if err := Write(&b, []Family{fam}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(b.String(), "\n"); n != 3 {
			t.Fatalf("%d lines for one sample: %q", n, b.String())
		}
	})
}
