// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestAppendFileCreatesWithHeaderOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node1.csv")
	in := sampleObs()
	if err := AppendFile(path, in[0]); err != nil {
		t.Fatal(err)
	}
	if err := AppendFile(path, in[1:]...); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "tag,class,co_tags"); n != 1 {
		t.Errorf("header written %d times:\n%s", n, b)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	out, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d of %d read back", len(out), len(in))
	}
	for i := range in {
		if !equalObs(in[i], out[i]) {
			t.Errorf("row %d: got %+v want %+v", i, out[i], in[i])
		}
	}
}

func TestAppendFileRejects(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.csv")
	if err := AppendFile(path, Observation{Tag: "ok", Speed: 1}, Observation{Tag: "bad", Speed: -1}); err == nil {
		t.Error("appended an invalid observation")
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Error("file created although nothing valid was to be written")
	}
	other := filepath.Join(dir, "other.csv")
	os.WriteFile(other, []byte("model,speed\nx,1\n"), 0o644)
	err := AppendFile(other, Observation{Tag: "ok", Speed: 1})
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "not an observation file") {
		t.Errorf("append to a foreign file: %v", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "model,speed\nx,1\n" {
		t.Errorf("foreign file changed: %q", b)
	}
}

func TestAppendFileAfterTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "torn.csv")
	if err := AppendFile(path, Observation{Tag: "a", Speed: 1}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("b,train,,0.") // a writer died mid-line
	f.Close()
	if err := AppendFile(path, Observation{Tag: "c", Speed: 0.5}); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("torn line: error %v, want one naming %s line 3", err, path)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "b,train,,0.\nc,,,0.5,,,,,\n") {
		t.Errorf("the new row is not on its own line:\n%s", b)
	}
}

func TestAppendFileConcurrentGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.csv")
	const writers, rows = 8, 40
	var wg sync.WaitGroup
	errc := make(chan error, writers*rows)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rows; r++ {
				o := Observation{Tag: fmt.Sprintf("w%d", w), CoTags: []string{"x"}, Speed: 0.5, JobID: strconv.Itoa(r),
					Source: strings.Repeat("s", 200)} // long rows make torn writes likely if locking failed
				if err := AppendFile(path, o); err != nil {
					errc <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	checkAppended(t, path, writers, rows)
}

// checkAppended reads the file and checks that each writer wN appended rows 0..rows-1
// exactly once and that the header appears once.
func checkAppended(t *testing.T, path string, writers, rows int) {
	t.Helper()
	obs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != writers*rows {
		t.Fatalf("%d rows, want %d", len(obs), writers*rows)
	}
	seen := map[string]bool{}
	for _, o := range obs {
		seen[o.Tag+"/"+o.JobID] = true
	}
	if len(seen) != writers*rows {
		t.Errorf("%d distinct rows, want %d", len(seen), writers*rows)
	}
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "tag,class"); n != 1 {
		t.Errorf("header appears %d times", n)
	}
}

// TestAppendFileConcurrentProcesses has several processes (this test binary,
// re-executed) append to one new file at once, as epilogs on one node would.
func TestAppendFileConcurrentProcesses(t *testing.T) {
	if path := os.Getenv("COSCHEML_OBS_TEST_APPEND"); path != "" {
		w := os.Getenv("COSCHEML_OBS_TEST_ID")
		for r := 0; r < 50; r++ {
			o := Observation{Tag: "w" + w, Speed: 1, JobID: strconv.Itoa(r), Node: "node-" + w}
			if err := AppendFile(path, o); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "node.csv")
	const procs = 4
	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAppendFileConcurrentProcesses$")
		cmd.Env = append(os.Environ(), "COSCHEML_OBS_TEST_APPEND="+path, "COSCHEML_OBS_TEST_ID="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("appender: %v", err)
		}
	}
	checkAppended(t, path, procs, 50)
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	in := sampleObs()
	if err := AppendFile(filepath.Join(dir, "b.csv"), in[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := AppendFile(filepath.Join(dir, "a.csv"), in[2]); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bad.csv"), []byte("tag,co_tags,speed\nx,,9\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "foreign.csv"), []byte("model,speed\nx,1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden.csv"), []byte("junk"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub.csv"), 0o755)
	obs, problems := ReadDir(dir)
	if len(obs) != 3 {
		t.Fatalf("%d observations, want 3", len(obs))
	}
	if !equalObs(obs[0], in[2]) || !equalObs(obs[1], in[0]) { // a.csv before b.csv
		t.Errorf("order: %+v", obs)
	}
	if len(problems) != 2 || !strings.Contains(problems[0].Error(), filepath.Join(dir, "bad.csv")) ||
		!strings.Contains(problems[0].Error(), "line 2") || !strings.Contains(problems[1].Error(), "foreign.csv") {
		t.Errorf("problems %v, want one naming bad.csv line 2 and one naming foreign.csv", problems)
	}
	_, problems = ReadDir(filepath.Join(dir, "missing"))
	if len(problems) != 1 || !errors.Is(problems[0], fs.ErrNotExist) {
		t.Errorf("missing folder: %v", problems)
	}
}
