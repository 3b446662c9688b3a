// SPDX-License-Identifier: Apache-2.0

package jobprofile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

func TestPendingRoundTrip(t *testing.T) {
	cfg := testConfig(t)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	run := &Run{Env: JobEnv{JobID: "9", Node: "n3", Tag: "a", Class: profile.ClassInfer, UID: "7", GPUs: []int{1}},
		Start: t0, End: t0.Add(time.Minute), Throughput: 12.5, Sampled: true,
		Sample: &profile.Profile{Samples: 3, MemUsedMiB: 100}, CoTags: []string{"b"}, CoFrac: 0.9, Shared: 0.9}
	path, err := SavePending(cfg, run)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "9@n3.run0.json" {
		t.Errorf("pending file %s", path)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", p, fi.Mode().Perm(), want, err)
		}
	}
	back, err := LoadPending(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, run) {
		t.Errorf("read back %+v\nwant %+v", back, run)
	}

	for name, content := range map[string]string{
		"bad-tag.json":   `{"env":{"JobID":"9","Tag":"../x"}}`,
		"bad-id.json":    `{"env":{"JobID":"../9","Tag":"a"}}`,
		"restarts.json":  `{"env":{"JobID":"9","Tag":"a","Restarts":-1}}`,
		"restarts2.json": `{"env":{"JobID":"9","Tag":"a","Restarts":65536}}`,
		"junk.json":      `{`,
		"huge.json":      `{"notes":["` + strings.Repeat("x", maxPendingBytes) + `"]}`,
	} {
		p := filepath.Join(filepath.Dir(path), name)
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := LoadPending(p); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	link := filepath.Join(filepath.Dir(path), "link.json")
	os.Symlink(path, link)
	if _, err := LoadPending(link); err == nil {
		t.Error("followed a symlink")
	}
}

// Each run of a job has its own pending file: a requeued job runs again under
// the same id on the same node, and one run's finisher must never read or remove
// the other's.
func TestPendingPathPerRun(t *testing.T) {
	cfg := testConfig(t)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]int{}
	for _, tc := range []struct {
		env  JobEnv
		want string
	}{
		{JobEnv{JobID: "9", Node: "n3", Tag: "a"}, "9@n3.run0.json"},
		{JobEnv{JobID: "9", Node: "n3", Tag: "a", Restarts: 1}, "9@n3.run1.json"},
		{JobEnv{JobID: "9", Node: "n4", Tag: "a", Restarts: 1}, "9@n4.run1.json"},
		{JobEnv{JobID: "9", Node: "n3", Tag: "a", Restarts: 65535}, "9@n3.run65535.json"},
	} {
		path, err := SavePending(cfg, &Run{Env: tc.env, Start: t0, End: t0.Add(time.Minute)})
		if err != nil || filepath.Base(path) != tc.want {
			t.Fatalf("%+v: %s, %v; want %s", tc.env, path, err, tc.want)
		}
		if back, err := LoadPending(path); err != nil || back.Env.Restarts != tc.env.Restarts {
			t.Errorf("%s read back %+v, %v", path, back, err)
		}
		seen[path]++
	}
	if len(seen) != 4 {
		t.Errorf("runs share pending files: %v", seen)
	}
	for _, r := range []int{-1, 65536} {
		if p, err := SavePending(cfg, &Run{Env: JobEnv{JobID: "9", Node: "n3", Tag: "a", Restarts: r}}); err == nil {
			t.Errorf("restart count %d saved as %s", r, p)
		}
	}
}
