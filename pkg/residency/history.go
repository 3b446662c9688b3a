// SPDX-License-Identifier: Apache-2.0

package residency

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// MaxHistoryBytes is the size at which a GPU's history log is rotated (the previous
// log is kept as .1). 1 MiB holds roughly 15,000 events.
const MaxHistoryBytes = 1 << 20

// EventKind is what happened to a job on a GPU.
type EventKind string

const (
	EventStart EventKind = "start"
	EventEnd   EventKind = "end"
	EventLost  EventKind = "lost" // removed by Reconcile: the epilog never came
)

// Event is one line of a GPU's history.
type Event struct {
	At    time.Time
	Kind  EventKind
	JobID string
	Tag   string // "" for an untagged job
}

// encodeEvent writes "<unix-nanos> <kind> <jobid> <tag|-> <crc32>\n"; the checksum
// covers the text before it, so a torn or garbled line is detected and skipped.
func encodeEvent(ev Event) []byte {
	tag := ev.Tag
	if tag == "" {
		tag = "-"
	}
	body := fmt.Sprintf("%d %s %s %s", ev.At.UnixNano(), ev.Kind, ev.JobID, tag)
	return fmt.Appendf(nil, "%s %08x\n", body, crc32.ChecksumIEEE([]byte(body)))
}

// DecodeEvent parses one history line (without its newline).
func DecodeEvent(line []byte) (Event, error) {
	i := bytes.LastIndexByte(line, ' ')
	if i < 0 || len(line)-i-1 != 8 {
		return Event{}, errors.New("history line: no checksum")
	}
	body := line[:i]
	sum, err := strconv.ParseUint(string(line[i+1:]), 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE(body) {
		return Event{}, errors.New("history line: bad checksum")
	}
	f := strings.Fields(string(body))
	if len(f) != 4 {
		return Event{}, fmt.Errorf("history line: %d fields, want 4", len(f))
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Event{}, fmt.Errorf("history line: time: %w", err)
	}
	ev := Event{At: time.Unix(0, ns), Kind: EventKind(f[1]), JobID: f[2], Tag: f[3]}
	switch ev.Kind {
	case EventStart, EventEnd, EventLost:
	default:
		return Event{}, fmt.Errorf("history line: unknown kind %q", profile.Sanitize(f[1]))
	}
	if err := ValidJobID(ev.JobID); err != nil {
		return Event{}, fmt.Errorf("history line: %w", err)
	}
	if ev.Tag == "-" {
		ev.Tag = ""
	} else if err := profile.ValidateTag(ev.Tag); err != nil {
		return Event{}, fmt.Errorf("history line: %w", err)
	}
	return ev, nil
}

func (s *Store) historyPath(node string, gpu int) (string, error) {
	if !hostlist.ValidName(node) {
		return "", fmt.Errorf("invalid node name %q", profile.Sanitize(node))
	}
	if gpu < 0 || gpu >= MaxGPUsPerNode {
		return "", fmt.Errorf("GPU index %d out of range", gpu)
	}
	return filepath.Join(s.dir, "history", node, "gpu"+strconv.Itoa(gpu)+".log"), nil
}

// openLog opens a history log for appending as root: never through a symlink,
// never blocking on a FIFO, only a regular file.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}

// appendEvent appends one event under an exclusive lock on the log (prologs and
// epilogs of different jobs on one node run concurrently), rotating a full log.
func (s *Store) appendEvent(node string, gpu int, ev Event) error {
	path, err := s.historyPath(node, gpu)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	f, err := openLog(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("history %s: lock: %w", path, err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() >= MaxHistoryBytes {
		// Rotate under the lock; a writer waiting on the old file's lock notices
		// nothing worse than appending one line to the rotated log.
		if err := os.Rename(path, path+".1"); err != nil {
			return fmt.Errorf("history %s: rotate: %w", path, err)
		}
		f.Close()
		if f, err = openLog(path); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		defer f.Close()
	}
	if _, err := f.Write(encodeEvent(ev)); err != nil {
		return fmt.Errorf("history %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("history %s: %w", path, err)
	}
	return nil
}

// History returns the events of one GPU, oldest first (rotated log included).
// Lines that fail to decode are counted in bad and skipped.
func (s *Store) History(node string, gpu int) (events []Event, bad int, err error) {
	path, err := s.historyPath(node, gpu)
	if err != nil {
		return nil, 0, err
	}
	for _, p := range []string{path + ".1", path} {
		f, err := safeopen.Regular(p, safeopen.NoFollow)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, bad, fmt.Errorf("history: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 4096), 4096)
		for sc.Scan() {
			ev, err := DecodeEvent(sc.Bytes())
			if err != nil {
				bad++
				continue
			}
			events = append(events, ev)
		}
		if err := sc.Err(); err != nil {
			bad++ // an over-long garbage line ends this file's scan
		}
		f.Close()
	}
	slices.SortStableFunc(events, func(a, b Event) int { return a.At.Compare(b.At) })
	return events, bad, nil
}

// Interval is a stretch of time during which a job shared its GPUs with the jobs
// tagged CoTags (sorted, each once; "" stands for an untagged job, whose
// interference is unknown). An empty CoTags means the job ran alone.
type Interval struct {
	Start, End time.Time
	CoTags     []string
}

// CoRuns reconstructs, from the history of the given GPUs of node, who shared them
// with job jobID between start and end. Several GPUs are merged: at each moment the
// co-runners are the union over the GPUs.
func (s *Store) CoRuns(node string, gpus []int, jobID string, start, end time.Time) ([]Interval, error) {
	if !end.After(start) {
		return nil, nil
	}
	type change struct {
		at    time.Time
		gpu   int
		ev    Event
		order int
	}
	var changes []change
	for _, g := range gpus {
		evs, _, err := s.History(node, g)
		if err != nil {
			return nil, err
		}
		for i, ev := range evs {
			if ev.JobID == jobID || ev.At.After(end) {
				continue
			}
			changes = append(changes, change{at: ev.At, gpu: g, ev: ev, order: i})
		}
	}
	slices.SortStableFunc(changes, func(a, b change) int { return a.at.Compare(b.at) })
	active := map[int]map[string]string{} // gpu -> job -> tag
	apply := func(c change) {
		m := active[c.gpu]
		if m == nil {
			m = map[string]string{}
			active[c.gpu] = m
		}
		if c.ev.Kind == EventStart {
			m[c.ev.JobID] = c.ev.Tag
		} else {
			delete(m, c.ev.JobID)
		}
	}
	tags := func() []string {
		set := map[string]bool{}
		for _, m := range active {
			for _, t := range m {
				set[t] = true
			}
		}
		out := make([]string, 0, len(set))
		for t := range set {
			out = append(out, t)
		}
		slices.Sort(out)
		return out
	}
	i := 0
	for ; i < len(changes) && !changes[i].at.After(start); i++ {
		apply(changes[i])
	}
	var out []Interval
	cur := Interval{Start: start, CoTags: tags()}
	for ; i < len(changes); i++ {
		apply(changes[i])
		next := tags()
		if slices.Equal(next, cur.CoTags) {
			continue
		}
		if changes[i].at.After(cur.Start) {
			cur.End = changes[i].at
			out = append(out, cur)
			cur = Interval{Start: changes[i].at}
		}
		cur.CoTags = next
	}
	cur.End = end
	return append(out, cur), nil
}
