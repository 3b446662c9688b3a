// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOpenCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "profiles")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		t.Fatalf("store folder not created: %v", err)
	}
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(file); err == nil {
		t.Error("Open on a regular file succeeded")
	}
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}

func TestPutGetFromDisk(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	p := validProfile()
	if err := s.Put(p); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, p.Tag+".prof"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", fi.Mode().Perm())
	}
	// A second Store value (as another process would) reads it back.
	s2, _ := Open(dir)
	q, err := s2.Get(p.Tag)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("Get:\n got %+v\nwant %+v", q, p)
	}
	// Replace.
	p.SMUtil.Mean = 42
	if err := s.Put(p); err != nil {
		t.Fatal(err)
	}
	if q, _ := s2.Get(p.Tag); q.SMUtil.Mean != 42 {
		t.Errorf("after replace SM mean %v", q.SMUtil.Mean)
	}
	assertNoTemp(t, dir)
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

func TestGetErrors(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	_, err := s.Get("missing")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Get(missing) = %v, want ErrNotFound naming the tag", err)
	}
	for _, tag := range []string{"../escape", "a/b", "", "x\ny"} {
		if _, err := s.Get(tag); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v, want an invalid-tag error", tag, err)
		}
	}
	if err := s.Remove("missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove(missing) = %v", err)
	}
}

func TestPutRejectsBadTagBeforeTouchingDisk(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	s, _ := Open(dir)
	for _, tag := range []string{"../outside", "/abs", "a b", ".x"} {
		p := validProfile()
		p.Tag = tag
		if err := s.Put(p); err == nil {
			t.Errorf("Put(%q) succeeded", tag)
		}
	}
	for _, d := range []string{parent, dir} {
		ents, _ := os.ReadDir(d)
		if d == parent && len(ents) != 1 || d == dir && len(ents) != 0 {
			t.Errorf("%s: files created by rejected Puts: %v", d, ents)
		}
	}
}

func TestListReportsBadFilesByName(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	for _, tag := range []string{"good-a", "good-b", "victim"} {
		p := validProfile()
		p.Tag = tag
		if err := s.Put(p); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "victim.prof"))
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("truncated.prof", b[:len(b)/2])
	write("garbage.prof", []byte("not a profile"))
	write("renamed.prof", b) // holds tag "victim"
	write("Bad Name.prof", b)
	write(".victim.prof.123.tmp", b[:5]) // a writer in progress
	write("notes.txt", []byte("ignored"))
	os.Mkdir(filepath.Join(dir, "sub.prof"), 0o755)

	ps, problems := s.List()
	var tags []string
	for _, p := range ps {
		tags = append(tags, p.Tag)
	}
	if want := []string{"good-a", "good-b", "victim"}; !reflect.DeepEqual(tags, want) {
		t.Errorf("List tags %v, want %v", tags, want)
	}
	wantProblems := map[string]string{
		"truncated.prof": "truncated",
		"garbage.prof":   "bad magic",
		"renamed.prof":   "not \"renamed\"",
		"Bad Name.prof":  "not a valid tag",
		"sub.prof":       "not a regular file",
	}
	if len(problems) != len(wantProblems) {
		t.Errorf("problems %v, want %d", problems, len(wantProblems))
	}
	for name, what := range wantProblems {
		found := false
		for _, p := range problems {
			msg := p.Error()
			if strings.Contains(msg, filepath.Join(dir, Sanitize(name))) && strings.Contains(msg, what) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem naming %s (%s) in %v", name, what, problems)
		}
	}
	c, problems2 := s.Catalog()
	if len(c) != 3 || len(problems2) != len(problems) {
		t.Errorf("Catalog: %d profiles, %d problems", len(c), len(problems2))
	}
	if _, err := s.Get("truncated"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "truncated.prof") {
		t.Errorf("Get(truncated) = %v", err)
	}
}

func TestConcurrentWritersGoroutines(t *testing.T) {
	dir := t.TempDir()
	const writers, rounds, tags = 8, 25, 3
	var wg sync.WaitGroup
	errc := make(chan error, writers*rounds*2)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s, err := Open(dir) // own Store value, as separate processes would have
			if err != nil {
				errc <- err
				return
			}
			for r := 0; r < rounds; r++ {
				p := validProfile()
				p.Tag = fmt.Sprintf("app-%d", r%tags)
				p.Samples = w*1000 + r
				if err := s.Put(p); err != nil {
					errc <- err
				}
				// Readers never see a partial file.
				if _, err := s.Get(p.Tag); err != nil {
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
	s, _ := Open(dir)
	ps, problems := s.List()
	if len(ps) != tags || len(problems) != 0 {
		t.Errorf("after concurrent writes: %d profiles, problems %v", len(ps), problems)
	}
	assertNoTemp(t, dir)
}

// TestConcurrentWritersProcesses runs two child processes (this test binary,
// re-executed) that rewrite the same tags while this process keeps reading them.
func TestConcurrentWritersProcesses(t *testing.T) {
	if dir := os.Getenv("COSCHEML_PROFILE_TEST_WRITER"); dir != "" {
		writerProcess(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentWritersProcesses$")
		cmd.Env = append(os.Environ(), "COSCHEML_PROFILE_TEST_WRITER="+dir, "COSCHEML_PROFILE_TEST_ID="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	done := make(chan struct{})
	go func() {
		for _, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Errorf("writer process: %v", err)
			}
		}
		close(done)
	}()
	s, _ := Open(dir)
	reads := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		ps, problems := s.List()
		for _, p := range problems {
			t.Errorf("reader saw: %v", p)
		}
		reads += len(ps)
	}
	ps, problems := s.List()
	if len(ps) != 4 || len(problems) != 0 {
		t.Errorf("final: %d profiles, problems %v", len(ps), problems)
	}
	for _, p := range ps {
		if p.Samples != 199 {
			t.Errorf("%s: last write has samples %d, want 199", p.Tag, p.Samples)
		}
	}
	assertNoTemp(t, dir)
	t.Logf("reader decoded %d profiles while the writers ran", reads)
}

func writerProcess(dir string) {
	s, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for r := 0; r < 200; r++ {
		p := validProfile()
		p.Tag = "proc-" + strconv.Itoa(r%4)
		p.Samples = r - r%4 + 3 // both writers end on 199 for every tag
		p.CollectedOn = "writer-" + os.Getenv("COSCHEML_PROFILE_TEST_ID")
		if err := s.Put(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// ListMax reads at most its bound (the first by tag) and says what it left out;
// Count counts profile files without reading them.
func TestListMaxBound(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"c", "a", "e", "b", "d"} {
		if err := s.Put(&Profile{Tag: tag, Class: ClassHPC, CollectedAt: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(s.Dir(), ".tmp-x.prof"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "notes.txt"), []byte("x"), 0o644)
	for _, tc := range []struct {
		max     int
		want    string
		tooMany bool
		problem string
	}{
		{0, "a b c d e", false, ""},
		{5, "a b c d e", false, ""},
		{9, "a b c d e", false, ""},
		{3, "a b c", true, `5 profile files, more than max_profiles (3): the 2 from "d.prof" on are not loaded`},
		{1, "a", true, `the 4 from "b.prof" on`},
	} {
		ps, problems := s.ListMax(tc.max)
		var tags []string
		for _, p := range ps {
			tags = append(tags, p.Tag)
		}
		got := strings.Join(tags, " ")
		if got != tc.want || (len(problems) == 1) != tc.tooMany || (tc.tooMany && (!errors.Is(problems[0], ErrTooMany) || !strings.Contains(problems[0].Error(), tc.problem))) {
			t.Errorf("max %d: loaded %q, problems %v; want %q", tc.max, got, problems, tc.want)
		}
		if cat, _ := s.CatalogMax(tc.max); len(cat) != len(ps) {
			t.Errorf("max %d: catalog of %d, list of %d", tc.max, len(cat), len(ps))
		}
	}
	if n, err := s.Count(); n != 5 || err != nil {
		t.Errorf("Count %d %v, want 5", n, err)
	}
}
