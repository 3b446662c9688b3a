// SPDX-License-Identifier: Apache-2.0

package redecide

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/atomicfile"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// The heartbeat tells slurmctld's plugin that a re-decide loop runs: the plugin
// defers a "wait" (wait_defer) only then, because without the loop a deferral
// would only delay the job. The loop renews it after every pass that could list
// the queue; it names a time, so a loop that died (or hangs) stops counting
// within HeartbeatTTL of its last pass, and the loop removes it when stopped.

// heartbeatMagic starts the file's one line: "coscheml-redecide until=<unix s> pid=<pid>".
const heartbeatMagic = "coscheml-redecide"

// HeartbeatTTL is how long a pass's heartbeat counts for a loop running a pass
// every interval: three passes, and at least 10 s (a pass waits for squeue and
// the updates of up to --max-per-pass jobs).
func HeartbeatTTL(interval time.Duration) time.Duration {
	return max(3*interval, 10*time.Second)
}

// WriteHeartbeat replaces path with a heartbeat valid until until (atomically:
// the plugin reads the old or the new one).
func WriteHeartbeat(path string, until time.Time) error {
	line := fmt.Sprintf("%s until=%d pid=%d\n", heartbeatMagic, until.Unix(), os.Getpid())
	if err := atomicfile.Write(path, []byte(line), 0o644); err != nil {
		return fmt.Errorf("re-decide heartbeat: %w", err)
	}
	return nil
}

// RemoveHeartbeat removes path if it is this process's heartbeat (a second loop,
// started by mistake, must not take the running one's away).
func RemoveHeartbeat(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("re-decide heartbeat: %w", err)
	}
	if hb, err := parseHeartbeat(string(b)); err != nil || hb.pid != os.Getpid() {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("re-decide heartbeat: %w", err)
	}
	return nil
}

// ErrNoHeartbeat: no heartbeat file (no loop ever ran, or it stopped cleanly).
var ErrNoHeartbeat = errors.New("no re-decide heartbeat")

// ReadHeartbeat returns until when the loop's heartbeat at path counts. The file
// is trusted only if it is a regular file (not a symlink), owned by root or by
// this process's user (slurmctld's SlurmUser), and writable by nobody else: a
// user who could write it would make the plugin defer jobs no loop re-decides.
func ReadHeartbeat(path string) (time.Time, error) {
	f, err := safeopen.Regular(path, safeopen.NoFollow)
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, ErrNoHeartbeat
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("re-decide heartbeat: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}, fmt.Errorf("re-decide heartbeat: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
			return time.Time{}, fmt.Errorf("re-decide heartbeat %s ignored: owned by uid %d, want root or uid %d (slurmctld's user)", path, st.Uid, os.Geteuid())
		}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return time.Time{}, fmt.Errorf("re-decide heartbeat %s ignored: mode %v lets others write it", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return time.Time{}, fmt.Errorf("re-decide heartbeat %s: %w", path, err)
	}
	hb, err := parseHeartbeat(string(b))
	if err != nil {
		return time.Time{}, fmt.Errorf("re-decide heartbeat %s: %w", path, err)
	}
	return hb.until, nil
}

type heartbeat struct {
	until time.Time
	pid   int
}

// parseHeartbeat reads the one line WriteHeartbeat writes; anything else is an error.
func parseHeartbeat(s string) (heartbeat, error) {
	line, ok := strings.CutSuffix(s, "\n")
	f := strings.Split(line, " ")
	if !ok || len(f) != 3 || f[0] != heartbeatMagic {
		return heartbeat{}, fmt.Errorf("not a heartbeat line (want %q)", heartbeatMagic+" until=<unix seconds> pid=<pid>")
	}
	u, okU := strings.CutPrefix(f[1], "until=")
	p, okP := strings.CutPrefix(f[2], "pid=")
	until, errU := strconv.ParseInt(u, 10, 64)
	pid, errP := strconv.Atoi(p)
	if !okU || !okP || errU != nil || errP != nil || until <= 0 || pid <= 0 {
		return heartbeat{}, fmt.Errorf("malformed heartbeat line %q", strconv.Quote(cutLine(line)))
	}
	return heartbeat{until: time.Unix(until, 0), pid: pid}, nil
}

func cutLine(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
