// SPDX-License-Identifier: Apache-2.0

package jobprofile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// The Epilog cannot know how the job ended: slurmd gives a CANCELLED or TIMEOUT
// job's Epilog exit code 0 like a COMPLETED one, and the controller calls every
// job COMPLETING until the Epilogs are done (docs/profiling.md). So a collected
// run waits in <RunDir>/pending/<jobid>@<node>.run<N>.json for a detached finisher
// that reads the job's final state once the Epilogs are over, then keeps or drops
// it. N is the job's restart count when the run started: a requeued job's runs
// share the job id and node, and each run's finisher must read and remove only
// its own file.

// PendingDir is where collected runs wait for their job's end state.
func PendingDir(cfg config.Config) string { return filepath.Join(RunDir(cfg), "pending") }

// maxPendingBytes bounds a pending file (a profile and a few co-runner tags).
const maxPendingBytes = 256 << 10

// SavePending writes run to PendingDir (root-only: folder 0700, file 0600) and
// returns the file's path.
func SavePending(cfg config.Config, run *Run) (string, error) {
	if run == nil {
		return "", errors.New("pending: no run")
	}
	path, err := PendingPath(cfg, run.Env)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(PendingDir(cfg), 0o700); err != nil {
		return "", fmt.Errorf("pending: %w", err)
	}
	b, err := json.Marshal(run)
	if err != nil {
		return "", fmt.Errorf("pending: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return "", fmt.Errorf("pending: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("pending %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("pending %s: %w", path, err)
	}
	return path, nil
}

// PendingPath is where env's run waits: per node (the run folder may be shared,
// and a job spans nodes) and per run (a requeued job runs again under its id).
func PendingPath(cfg config.Config, env JobEnv) (string, error) {
	if _, err := jobDir(cfg, env.JobID); err != nil {
		return "", fmt.Errorf("pending: %w", err)
	}
	if env.Restarts < 0 || env.Restarts > maxRestarts {
		return "", fmt.Errorf("pending: job %s: restart count %d out of range", env.JobID, env.Restarts)
	}
	return filepath.Join(PendingDir(cfg), env.JobID+"@"+nodeName(env.Node)+".run"+strconv.Itoa(env.Restarts)+".json"), nil
}

// maxRestarts bounds a restart count: Slurm keeps it in 16 bits.
const maxRestarts = 1<<16 - 1

// LoadPending reads a pending run back and checks what later steps rely on.
func LoadPending(path string) (*Run, error) {
	b, err := safeopen.ReadLimited(path, safeopen.NoFollow, maxPendingBytes)
	if err != nil {
		return nil, fmt.Errorf("pending: %w", err)
	}
	var run Run
	if err := json.Unmarshal(b, &run); err != nil {
		return nil, fmt.Errorf("pending %s: %w", path, err)
	}
	if err := profile.ValidateTag(run.Env.Tag); err != nil {
		return nil, fmt.Errorf("pending %s: %w", path, err)
	}
	if !jobIDRE.MatchString(run.Env.JobID) {
		return nil, fmt.Errorf("pending %s: invalid job id", path)
	}
	if run.Env.Restarts < 0 || run.Env.Restarts > maxRestarts {
		return nil, fmt.Errorf("pending %s: restart count %d out of range", path, run.Env.Restarts)
	}
	return &run, nil
}

// Defer saves run as pending and starts `exe args... --pending FILE` detached
// (its own session, output to FILE.log), the finisher that keeps or drops it.
func Defer(cfg config.Config, run *Run, exe string, args []string) (string, error) {
	path, err := SavePending(cfg, run)
	if err != nil {
		return "", err
	}
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			os.Remove(path)
			return "", fmt.Errorf("pending: finding the finisher program: %w", err)
		}
	}
	if _, err := startDetached(exe, append(append([]string(nil), args...), "--pending", path), path+".log"); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("pending: starting the finisher: %w", err)
	}
	return path, nil
}
