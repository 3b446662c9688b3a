// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/profile"
)

// A pin names one node; if that node drains or goes down the job cannot move. So
// decisions do not pin to nodes that cannot start jobs now, as far as the last
// poll of the node states (a background goroutine, never the decision path) knows.
// A poll that fails or is too old is not used: then no node is ruled out by its
// state (fail open).

// nodeStates is one poll: the nodes that cannot start jobs, and when.
type nodeStates struct {
	down map[string]bool
	at   time.Time
}

// statePoller is the background poll of the node states and of the queue
// (queuecheck.go).
type statePoller struct {
	states atomic.Pointer[nodeStates] // the last poll
	// nodeStates and queueIDs are src.NodeStates and src.QueueIDs, copied at
	// creation: the first load may replace src (prep) while Start reads these.
	nodeStates func(ctx context.Context) (map[string]bool, error)
	queueIDs   func(ctx context.Context) (QueueListing, error)
	done       chan struct{} // the poll loop ended
}

// maxStateBytes bounds what one poll reads.
const maxStateBytes = 16 << 20

// ParseNodeStates reads `sinfo -h -N -o '%N %T'` and returns the nodes that
// cannot take a pinned job: drained or draining, down, failing, in maintenance,
// rebooting, powering down, invalid or future (see startsJobs).
// A node listed once per partition counts as down if any line says so.
func ParseNodeStates(out []byte) (map[string]bool, error) {
	if len(out) > maxStateBytes {
		return nil, fmt.Errorf("node states: %d bytes, more than %d", len(out), maxStateBytes)
	}
	down := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 4096), 1<<16)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 || !hostlist.ValidName(f[0]) {
			return nil, fmt.Errorf("node states line %d: want NODE STATE, got %q", n, profile.Sanitize(sc.Text()))
		}
		if !down[f[0]] {
			down[f[0]] = !startsJobs(f[1])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("node states: %w", err)
	}
	for k, v := range down {
		if !v {
			delete(down, k)
		}
	}
	return down, nil
}

// startsJobs says whether a sinfo long state (%T: "mixed", "drained", "idle*",
// "down~", "idle+drain") lets the node take a pinned job. Only states an admin or
// Slurm set to keep jobs away count against it: drained or draining, down,
// failing, maintenance, reboot, powering down, invalid, future. "unknown" and a
// '*' (not responding yet) do not: right after slurmctld starts every node is so
// until its slurmd registers, and a node that stays away turns "down".
func startsJobs(state string) bool {
	s := strings.ToLower(state)
	for _, bad := range []string{"drain", "down", "fail", "maint", "reboot", "power_down", "powering_down", "inval", "future"} {
		if strings.Contains(s, bad) {
			return false
		}
	}
	return true
}

// SinfoStates polls the node states with sinfo, the one of the running Slurm
// when it sits beside slurmctld (PREFIX/sbin/slurmctld, PREFIX/bin/sinfo), else
// from PATH, against slurmConf (SLURM_CONF; "" keeps the environment's).
func SinfoStates(slurmConf string) func(ctx context.Context) (map[string]bool, error) {
	bin := slurmClient("sinfo")
	return func(ctx context.Context) (map[string]bool, error) {
		out, err := runClient(ctx, bin, slurmConf, maxStateBytes, "-h", "-N", "-o", "%N %T")
		if err != nil {
			return nil, err
		}
		return ParseNodeStates(out)
	}
}

// slurmClient is the path of a Slurm client command: the one beside the running
// slurmctld (PREFIX/bin/NAME for PREFIX/sbin/slurmctld) when there is one, so a
// site with several Slurm installations asks its own release, else NAME from PATH.
func slurmClient(name string) string {
	if exe, err := os.Executable(); err == nil {
		if c := filepath.Join(filepath.Dir(exe), "..", "bin", name); isFile(c) {
			return c
		}
	}
	return name
}

// runClient runs a Slurm client against slurmConf ("" keeps the environment's)
// and returns its output, refusing more than max bytes.
func runClient(ctx context.Context, bin, slurmConf string, max int, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	if slurmConf != "" {
		cmd.Env = append(os.Environ(), "SLURM_CONF="+slurmConf)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limitWriter{w: &out, n: max + 1}, &limitWriter{w: &errOut, n: 4096}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", bin, err, profile.Sanitize(strings.TrimSpace(errOut.String())))
	}
	if out.Len() > max {
		return nil, fmt.Errorf("%s: output larger than %d bytes", bin, max)
	}
	return out.Bytes(), nil
}

// stopBound returns a context that ends after d or when the engine closes, so
// Close never waits for a hung client.
func (e *Engine) stopBound(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// limitWriter keeps the first n bytes and drops the rest.
type limitWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// pollStates runs NodeStates every StatesEvery, and the queue check every
// QueueEvery, until stop. Each poll has its own
// timeout, so a hung sinfo delays nothing but the next poll.
func (e *Engine) pollStates() {
	defer close(e.poll.done)
	t := time.NewTicker(e.opts.StatesEvery)
	defer t.Stop()
	var listed time.Time
	checkedReady := false // a listing succeeded after the first load (and its restore)
	for {
		if e.poll.nodeStates != nil {
			e.pollOnce()
		}
		// The reservations rebuilt at a start include jobs cancelled since:
		// check as soon as the first load is done (retrying every tick until a
		// listing succeeds), then every QueueEvery.
		now := e.opts.Now()
		if e.poll.queueIDs != nil && (now.Sub(listed) >= e.opts.QueueEvery || !checkedReady && e.ready.Load()) {
			listed = now
			ready := e.ready.Load()
			if e.checkQueue() && ready {
				checkedReady = true
			}
		}
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
	}
}

func (e *Engine) pollOnce() {
	defer func() {
		if r := recover(); r != nil {
			e.note("info-nodestates", fmt.Sprintf("internal error polling node states: %v", r))
		}
	}()
	ctx, cancel := e.stopBound(e.opts.StatesEvery * 2)
	defer cancel()
	down, err := e.poll.nodeStates(ctx)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) {
			e.note("info-nodestates", fmt.Sprintf("node states unknown (pins may land on drained nodes): %v", err))
		}
		return
	}
	e.poll.states.Store(&nodeStates{down: down, at: e.opts.Now()})
	e.note("info-nodestates", "")
}

// downNow is the last poll's unusable nodes, nil when there is none or it is
// older than StatesMaxAge.
func (e *Engine) downNow(now time.Time) map[string]bool {
	s := e.poll.states.Load()
	if s == nil || now.Sub(s.at) > e.opts.StatesMaxAge {
		return nil
	}
	return s.down
}
