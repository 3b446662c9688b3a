// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/model"
)

// TestBackgroundReload: the refresh loop picks up a changed configuration
// file on its own.
func TestBackgroundReload(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "coscheml.yaml")
	res := filepath.Join(dir, "res")
	os.MkdirAll(res, 0o755)
	os.MkdirAll(filepath.Join(dir, "profiles"), 0o755)
	os.MkdirAll(filepath.Join(dir, "obs"), 0o755)
	write := func(untagged string) {
		y := "profile_dir: " + filepath.Join(dir, "profiles") + "\nresidency_dir: " + res + "\ndecision_log: " + filepath.Join(dir, "d.log") +
			"\nobservation_dir: " + filepath.Join(dir, "obs") +
			"\nuntagged: " + untagged + "\ncluster:\n  nodes: n[1-2]\n  gpus_per_node: 2\n  gpu_memory_mib: 80000\n"
		if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pass")
	src := DefaultSources(cfgPath)
	src.LoadModel = func(string) (model.Predictor, error) { return smPredictor{}, nil }
	e := New(src, Options{ReloadEvery: 10 * time.Millisecond, ResidencyEvery: 10 * time.Millisecond})
	defer e.Close()
	if p := e.Problems(); len(p) != 0 {
		t.Fatalf("problems: %v", p)
	}
	if r := e.Decide(job("x")); r.Code != Unchanged {
		t.Fatalf("before: %+v", r)
	}
	e.Start()
	write("exclusive")
	future := time.Now().Add(time.Hour)
	os.Chtimes(cfgPath, future, future) // a distinct mtime even on coarse clocks
	deadline := time.Now().Add(10 * time.Second)
	for e.Decide(job("x")).Code != Rewrite {
		if time.Now().After(deadline) {
			t.Fatal("configuration change not picked up")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDecisionLogFileEnsure: the writer is kept while the path stays, replaced
// (and decisions see the new one) when it changes, and dropped for "".
func TestDecisionLogFileEnsure(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	var d decisionLogFile
	defer func() {
		if d.w != nil {
			d.w.Close()
		}
	}()
	steps := []struct {
		path    string
		wantNew bool // another writer (or none) replaces the previous one
		wantNil bool
	}{
		{a, true, false},
		{a, false, false},
		{b, true, false},
		{"", true, true},
		{"", false, true},
		{a, true, false},
	}
	for i, s := range steps {
		prev := d.w
		d.ensure(s.path, 0)
		if (d.w == nil) != s.wantNil || (d.w != prev) != s.wantNew {
			t.Fatalf("step %d ensure(%q): writer %p (was %p), want new %v, nil %v", i, s.path, d.w, prev, s.wantNew, s.wantNil)
		}
		if d.current.Load() != d.w || d.path != s.path {
			t.Fatalf("step %d ensure(%q): current %p, path %q; want %p, %q", i, s.path, d.current.Load(), d.path, d.w, s.path)
		}
	}
}
