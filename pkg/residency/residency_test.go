// SPDX-License-Identifier: Apache-2.0

package residency

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func entry(job, node string, gpus []int, tag string, start time.Time) Entry {
	return Entry{V: Version, JobID: job, Node: node, GPUs: gpus, Shards: 2, Tag: tag, Class: "train",
		DecisionID: "abc-1", User: "alice", Start: start, Expires: start.Add(time.Hour)}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	e := entry("42", "n1", []int{0, 3}, "resnet18-bs32", t0)
	b, err := Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip: got %+v, want %+v", got, e)
	}
}

// A job of several nodes carries its node count; one of one node has no
// "nodes" key (what readers that predate the field expect); a count out of
// range is refused.
func TestEntryNodes(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, true}, {2, true}, {MaxNodes, true}, {-1, false}, {MaxNodes + 1, false}} {
		e := entry("42", "n1", []int{0, 1}, "a", t0)
		e.Nodes = tc.n
		b, err := Encode(&e)
		if (err == nil) != tc.ok {
			t.Fatalf("nodes %d: encode error %v, want ok %v", tc.n, err, tc.ok)
		}
		if err != nil {
			continue
		}
		got, err := Decode(b)
		if err != nil || got.Nodes != tc.n || (tc.n == 0) == strings.Contains(string(b), `"nodes"`) {
			t.Errorf("nodes %d: %s decoded %+v, %v", tc.n, b, got, err)
		}
	}
}

// A requeued job's run carries its restart count; a first run's entry is what
// readers that predate the field expect (no "restarts" key).
func TestEntryRestarts(t *testing.T) {
	for _, n := range []int{0, 1, MaxRestarts} {
		e := entry("42", "n1", []int{0}, "a", t0)
		e.Restarts = n
		b, err := Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(b), `"restarts"`); has != (n > 0) {
			t.Errorf("restarts %d: encoded %s", n, b)
		}
		if got, err := Decode(b); err != nil || got.Restarts != n {
			t.Errorf("restarts %d: decoded %+v, %v", n, got, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := `{"v":1,"job_id":"7","node":"n1","gpus":[0],"shards":1,"start":"2026-11-30T06:00:00Z","expires":"2026-11-30T07:00:00Z"}`
	tests := []struct{ name, in, want string }{
		{"torn", good[:40], "decode entry"},
		{"empty", "", "decode entry"},
		{"version", strings.Replace(good, `"v":1`, `"v":2`, 1), "version 2"},
		{"unknown field", strings.Replace(good, `"v":1`, `"v":1,"x":1`, 1), "unknown field"},
		{"bad job", strings.Replace(good, `"7"`, `"../7"`, 1), "invalid job id"},
		{"bad node", strings.Replace(good, `"n1"`, `"n1/../x"`, 1), "invalid node name"},
		{"bad gpu", strings.Replace(good, `[0]`, `[99]`, 1), "out of range"},
		{"bad tag", strings.Replace(good, `"shards":1`, `"shards":1,"tag":"a;b"`, 1), "invalid tag"},
		{"expiry", strings.Replace(good, `07:00`, `05:00`, 1), "before start"},
		{"trailing", good + `{}`, "trailing"},
		{"huge", strings.Repeat(" ", MaxEntrySize+1), "larger than"},
		{"negative restarts", strings.Replace(good, `"shards":1`, `"shards":1,"restarts":-1`, 1), "restart count"},
		{"restarts past 16 bits", strings.Replace(good, `"shards":1`, `"shards":1,"restarts":65536`, 1), "restart count"},
	}
	for _, tc := range tests {
		_, err := Decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Decode([]byte(good)); err != nil {
		t.Errorf("good entry: %v", err)
	}
}

func TestStartListEnd(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	a := entry("1", "n1", []int{0}, "a", t0)
	b := entry("2", "n1", []int{0}, "b", t0.Add(time.Minute))
	c := entry("3", "n2", []int{1}, "", t0)
	for _, e := range []Entry{a, b, c} {
		if err := s.Start(e); err != nil {
			t.Fatal(err)
		}
	}
	// A torn file (as a crash mid-write on a non-atomic FS would leave) is reported
	// once and does not hide the others.
	if err := os.WriteFile(filepath.Join(dir, "active", "9@n3.json"), []byte(`{"v":1,"job_`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.NewReader()
	res, err := r.Read(t0.Add(2*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range res.Entries {
		ids = append(ids, e.JobID+"@"+e.Node)
	}
	if want := []string{"1@n1", "2@n1", "3@n2"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("entries %v, want %v", ids, want)
	}
	if !res.Changed || len(res.NewProblems) != 1 {
		t.Fatalf("first read: changed=%v problems=%v", res.Changed, res.NewProblems)
	}
	res, _ = r.Read(t0.Add(2*time.Minute), time.Minute)
	if res.Changed || len(res.NewProblems) != 0 || len(res.Entries) != 3 {
		t.Fatalf("second read: changed=%v problems=%v entries=%d", res.Changed, res.NewProblems, len(res.Entries))
	}
	got, err := s.End("2", "n1", t0.Add(3*time.Minute))
	if err != nil || got.Tag != "b" {
		t.Fatalf("End: %+v, %v", got, err)
	}
	res, _ = r.Read(t0.Add(3*time.Minute), time.Minute)
	if !res.Changed || len(res.Entries) != 2 {
		t.Fatalf("after End: changed=%v entries=%d", res.Changed, len(res.Entries))
	}
	if _, err := s.End("2", "n1", t0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("second End: %v, want not-exist", err)
	}
	// Past expiry + grace, entries are ignored by readers.
	res, _ = r.Read(t0.Add(2*time.Hour), time.Minute)
	if len(res.Entries) != 0 || res.Stale != 2 {
		t.Fatalf("stale: entries=%d stale=%d", len(res.Entries), res.Stale)
	}
}

func TestReadUnreadableStore(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(filepath.Join(dir, "missing"))
	if _, err := s.List(t0, 0); err == nil {
		t.Fatal("missing store folder: want error")
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	s, _ = Open(file)
	if _, err := s.List(t0, 0); err == nil {
		t.Fatal("store that is a file: want error")
	}
	s, _ = Open(dir) // exists, no active/ yet: empty
	res, err := s.List(t0, 0)
	if err != nil || len(res.Entries) != 0 {
		t.Fatalf("empty store: %v %v", res, err)
	}
}

func TestReconcile(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	old := entry("10", "n1", []int{0}, "a", t0.Add(-3*time.Hour)) // expired
	gone := entry("11", "n1", []int{1}, "b", t0.Add(-10*time.Minute))
	live := entry("12", "n2", []int{0}, "c", t0.Add(-10*time.Minute))
	fresh := entry("13", "n2", []int{1}, "d", t0.Add(time.Second)) // started after the list
	for _, e := range []Entry{old, gone, live, fresh} {
		if err := s.Start(e); err != nil {
			t.Fatal(err)
		}
	}
	liveIDs, err := ParseLiveJobs(strings.NewReader("12\n\n99\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Reconcile(t0, 5*time.Minute, liveIDs, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != 1 || res.Expired[0].JobID != "10" || len(res.Gone) != 1 || res.Gone[0].JobID != "11" {
		t.Fatalf("reconcile: expired=%v gone=%v", res.Expired, res.Gone)
	}
	left, _ := s.List(t0, 5*time.Minute)
	if len(left.Entries) != 2 || left.Entries[0].JobID != "12" || left.Entries[1].JobID != "13" {
		t.Fatalf("left: %+v", left.Entries)
	}
	evs, _, _ := s.History("n1", 0)
	if len(evs) != 2 || evs[1].Kind != EventLost || evs[1].JobID != "10" {
		t.Fatalf("history after reconcile: %+v", evs)
	}
	if _, err := ParseLiveJobs(strings.NewReader("12\nrm -rf\n")); err == nil {
		t.Fatal("garbage live list: want error")
	}
}

func TestCoRuns(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	before := entry("1", "n1", []int{0}, "a", m(0)) // already there when job 2 starts
	job := entry("2", "n1", []int{0, 1}, "me", m(10))
	later := entry("3", "n1", []int{1}, "", m(20)) // untagged, on the second GPU
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Start(before))
	must(s.Start(job))
	must(s.Start(later))
	_, err := s.End("1", "n1", m(30))
	must(err)
	// A torn line in the log is skipped, the rest still counts.
	path, _ := s.historyPath("n1", 0)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("1234 start 77 tor")
	f.Close()
	_, err = s.End("3", "n1", m(40))
	must(err)
	got, err := s.CoRuns("n1", job.GPUs, "2", m(10), m(50))
	must(err)
	want := []Interval{
		{Start: m(10), End: m(20), CoTags: []string{"a"}},
		{Start: m(20), End: m(30), CoTags: []string{"", "a"}},
		{Start: m(30), End: m(40), CoTags: []string{""}},
		{Start: m(40), End: m(50), CoTags: []string{}},
	}
	if len(got) != len(want) {
		t.Fatalf("co-runs %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || !got[i].End.Equal(want[i].End) || !reflect.DeepEqual(got[i].CoTags, want[i].CoTags) {
			t.Errorf("interval %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	_, bad, _ := s.History("n1", 0)
	if bad != 1 {
		t.Errorf("bad lines %d, want 1", bad)
	}
}

func TestHistoryRotation(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	path, _ := s.historyPath("n1", 0)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte(strings.Repeat("x\n", MaxHistoryBytes/2)), 0o644)
	if err := s.appendEvent("n1", 0, Event{At: t0, Kind: EventStart, JobID: "5", Tag: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatalf("no rotated log: %v", err)
	}
	evs, bad, err := s.History("n1", 0)
	if err != nil || len(evs) != 1 || bad != MaxHistoryBytes/2 {
		t.Fatalf("history after rotation: %d events, %d bad, %v", len(evs), bad, err)
	}
}

func TestPathsRejectHostileNames(t *testing.T) {
	s, _ := Open(t.TempDir())
	e := entry("1", "../etc", []int{0}, "a", t0)
	if err := s.Start(e); err == nil {
		t.Fatal("node ../etc accepted")
	}
	e = entry("1;rm", "n1", []int{0}, "a", t0)
	if err := s.Start(e); err == nil {
		t.Fatal("job id 1;rm accepted")
	}
}

func FuzzDecode(f *testing.F) {
	e := entry("42", "n1", []int{0, 3}, "resnet18-bs32", t0)
	b, _ := Encode(&e)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("decoded entry does not validate: %v", err)
		}
		if _, err := Encode(&e); err != nil {
			t.Fatalf("decoded entry does not encode: %v", err)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	line := encodeEvent(Event{At: t0, Kind: EventStart, JobID: "12", Tag: "a"})
	f.Add(line[:len(line)-1])
	f.Add([]byte("1 start 1 - 00000000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err != nil {
			return
		}
		again, err := DecodeEvent(encodeEvent(ev)[:len(encodeEvent(ev))-1])
		if err != nil || !again.At.Equal(ev.At) || again.JobID != ev.JobID || again.Tag != ev.Tag || again.Kind != ev.Kind {
			t.Fatalf("re-encode of %q: %+v %v", b, again, err)
		}
	})
}

func TestDoneMarkers(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := s.NewReader()
	e := entry("300", "n2", []int{1}, "ppo-bs64", t0)
	e.DecisionID = "d300"
	if err := s.Start(e); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End("300", "n2", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err := r.Read(t0.Add(2*time.Second), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 0 || !res.Changed || len(res.Done) != 1 || res.Done[0] != "d300" {
		t.Fatalf("after a job that started and ended: %+v", res)
	}
	// Still reported while young, without counting as a change; removed after DoneTTL.
	res, _ = r.Read(t0.Add(time.Minute), time.Minute)
	if res.Changed || len(res.Done) != 1 {
		t.Fatalf("second read: %+v", res)
	}
	res, _ = r.Read(t0.Add(DoneTTL+time.Minute), time.Minute)
	if len(res.Done) != 0 {
		t.Fatalf("marker outlived DoneTTL: %+v", res)
	}
	if names, _ := os.ReadDir(filepath.Join(s.Dir(), "done")); len(names) != 0 {
		t.Fatalf("marker file not removed: %v", names)
	}
}
