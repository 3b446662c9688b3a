// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/promcheck"
	"github.com/coscheml/coscheml/pkg/config"
)

// The engine counts decisions and its background loop writes metrics_file,
// which is read back from disk and linted by promtool.
func TestEngineWritesMetricsFile(t *testing.T) {
	prom := filepath.Join(t.TempDir(), "coscheml-ctld.prom")
	f := newFixture(t, func(c *config.Config) { c.MetricsFile, c.UnknownProfile = prom, config.UnknownReject })
	jobs := []struct {
		comment string
		code    Code
	}{
		{"just a comment", Unchanged},          // unchanged, pass (not ours)
		{"coscheml:app=light-a", Rewrite},      // rewrite
		{"coscheml:app=light-b", Rewrite},      // rewrite
		{"coscheml:app=../x", Reject},          // invalid_tag
		{"coscheml:app=nosuch", Reject},        // unknown_profile
		{"coscheml:app=nosuch-either", Reject}, // unknown_profile
	}
	for _, j := range jobs {
		if r := f.e.Decide(job(j.comment)); r.Code != j.code {
			t.Fatalf("%q: %+v, want code %d", j.comment, r, j.code)
		}
	}
	if _, err := os.Stat(prom); !os.IsNotExist(err) {
		t.Fatalf("metrics file written on the decision path (stat: %v)", err)
	}
	f.e.opts.MetricsEvery = time.Millisecond
	f.e.opts.ReloadEvery, f.e.opts.ResidencyEvery = 5*time.Millisecond, 5*time.Millisecond
	f.e.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(prom); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("metrics file not written by the background loop")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.e.Close() // writes the last counts
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	rewrite := sampleWith(text, `coscheml_decisions_total{outcome="rewrite"`)
	for _, want := range []string{
		`coscheml_decisions_total{outcome="reject",action="pass"} 3`,
		`coscheml_rejects_total{reason="invalid_tag"} 1`,
		`coscheml_rejects_total{reason="unknown_profile"} 2`,
		`coscheml_waits_total 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics file lacks %q:\n%s", want, text)
		}
	}
	if rewrite != 2 {
		t.Errorf("%v rewrites counted, want 2:\n%s", rewrite, text)
	}
	if n := sampleWith(text, "coscheml_decisions_total{"); n != 5 {
		t.Errorf("%v decisions counted, want 5 (the untagged job passed through is none)", n)
	}
	if strings.Contains(text, "nosuch") || strings.Contains(text, "../x") {
		t.Errorf("a user's tag reached the metrics:\n%s", text)
	}
	if fi, err := os.Stat(prom); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("metrics file mode: %v %v", fi, err)
	}
	promcheck.File(t, prom)
}

// sampleWith sums the values of the lines starting with prefix.
func sampleWith(text, prefix string) float64 {
	var sum float64
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			var v float64
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				if _, err := fmt.Sscan(l[i+1:], &v); err == nil {
					sum += v
				}
			}
		}
	}
	return sum
}

// A metrics file that cannot be written is logged once and degrades nothing.
func TestEngineMetricsFileFailsQuietly(t *testing.T) {
	prom := filepath.Join(t.TempDir(), "no-such-folder", "coscheml-ctld.prom")
	f := newFixture(t, func(c *config.Config) { c.MetricsFile, c.UnknownProfile = prom, config.UnknownReject })
	if r := f.e.Decide(job("coscheml:app=light-a")); r.Code != Rewrite {
		t.Fatalf("%+v", r)
	}
	f.e.Close()
	if p := f.e.Problems(); len(p) != 0 {
		t.Errorf("problems %v: a metrics file must not degrade the plugin", p)
	}
	if r := f.e.Decide(job("coscheml:app=light-b")); !strings.Contains(logOf(r), "metrics file not written") {
		t.Errorf("log %q lacks the metrics problem", logOf(r))
	}
}
