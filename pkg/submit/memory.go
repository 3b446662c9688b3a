// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/pairmem"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Bounds of one pair memory load (docs/configuration.md, pair_memory). It runs
// in the background reload, never on the decision path, but must still not keep
// a reload (and so a new model or configuration) waiting for long.
const (
	memMaxFiles = 4096
	memMaxBytes = 64 << 20
	memMaxTime  = 2 * time.Second
)

// memLoad is what building the pair memory gave: the wrapped predictor (nil:
// use the plain model) and the problems, one line.
type memLoad struct {
	pred    model.Predictor
	pairs   int // pairs with any evidence
	known   int // pairs with enough evidence to override the model
	used    int // observations used
	problem string
	// runs are the co-located observations with known profiles, for the
	// metrics (engineMetrics.countRuns); partial: some files were not read.
	runs    []finishedRun
	partial bool
}

// finishedRun is one co-located run the Epilog measured, as the metrics
// count it: the stored profiles (the job's class is its profile's, never the
// job's own say) and the measured speed.
type finishedRun struct {
	key   uint64 // identity of the observation, for counting it once
	job   *profile.Profile
	co    []*profile.Profile
	speed float64
}

// loadMemory builds a pair memory from the observation CSVs in dir, capped per
// user (observation.CapPerUser), and wraps pred with it exactly as the
// simulator does (pairmem.NewPredictor, then Observe for every co-located
// observation whose profiles are known). Unreadable files are skipped and named
// in problem; an unreadable folder gives no predictor: fail open to the model.
// A missing folder is no problem: nothing was observed yet. The co-located
// runs measured at or after runsSince are also returned, for the metrics.
//
// nodeModel, when not nil, is the GPU model of a configured node ("" unnamed):
// a run on a node of another model than its job's profile was measured on says
// nothing about the pairs on the profile's model, so it is not learned from.
func loadMemory(dir string, pred model.Predictor, cat profile.Catalog, now func() time.Time, runsSince time.Time, nodeModel func(node string) string) memLoad {
	var out memLoad
	names, err := obsFiles(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out // no observation yet: the Epilog makes the folder with the first
	}
	if err != nil {
		out.problem = fmt.Sprintf("pair memory off, the model alone decides: %v", err)
		return out
	}
	var (
		obs      []observation.Observation
		problems []string
		bytes    int64
		start    = now()
	)
	for i, path := range names {
		if i >= memMaxFiles || now().Sub(start) > memMaxTime {
			problems = append(problems, fmt.Sprintf("%d observation files not read (bounds: %d files, %v)", len(names)-i, memMaxFiles, memMaxTime))
			break
		}
		fi, err := os.Stat(path)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if bytes+fi.Size() > memMaxBytes {
			problems = append(problems, fmt.Sprintf("%s not read: over %d MiB of observations", path, memMaxBytes>>20))
			continue
		}
		bytes += fi.Size()
		o, err := observation.ReadFileRows(path)
		if err != nil {
			problems = append(problems, err.Error())
		}
		obs = append(obs, o...)
	}
	obs, _ = observation.CapPerUser(obs, observation.DefaultMaxPerUser)
	mem := pairmem.New(pairmem.Options{})
	mp, err := pairmem.NewPredictor(pred, mem)
	if err != nil {
		out.problem = fmt.Sprintf("pair memory off, the model alone decides: %v", err)
		return out
	}
	var unknown int
	for i := range obs {
		o := &obs[i]
		job, co, ok := profilesOf(cat, o)
		if !ok {
			unknown++
			continue
		}
		if nodeModel != nil {
			if m, on := nodeModel(o.Node), job.MeasuredOn(); m != "" && on != "" && m != on {
				continue // measured on another GPU model than the profile's
			}
		}
		if err := mp.Observe(job, co, o.UID, o.Speed); err == nil {
			out.used++
			if !o.When.Before(runsSince) {
				out.runs = append(out.runs, finishedRun{key: runKey(o), job: job, co: co, speed: o.Speed})
			}
		}
	}
	out.pairs, out.known = mem.Len(), mem.Known()
	if out.used > 0 { // an empty memory only costs lookups on every prediction
		out.pred = mp
	}
	if len(problems) > 0 {
		out.partial = true
		if len(problems) > 3 {
			problems = append(problems[:3], fmt.Sprintf("%d more", len(problems)-3))
		}
		out.problem = fmt.Sprintf("pair memory: skipped: %s", strings.Join(problems, "; "))
	}
	return out
}

// runKey identifies an observation across reloads (FNV-1a of its job, node,
// tag and time): the same run read again is counted once.
func runKey(o *observation.Observation) uint64 {
	h := fnv.New64a()
	for _, s := range []string{o.JobID, o.Node, o.Tag, strconv.FormatInt(o.When.UnixNano(), 10)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// profilesOf returns the profiles of a co-located observation's job and
// co-runners; ok is false for a solo run or a tag without a profile.
func profilesOf(cat profile.Catalog, o *observation.Observation) (job *profile.Profile, co []*profile.Profile, ok bool) {
	if len(o.CoTags) == 0 {
		return nil, nil, false
	}
	if job = cat[o.Tag]; job == nil {
		return nil, nil, false
	}
	co = make([]*profile.Profile, len(o.CoTags))
	for i, t := range o.CoTags {
		if co[i] = cat[t]; co[i] == nil {
			return nil, nil, false
		}
	}
	return job, co, true
}

// obsFiles lists the observation CSVs of dir, sorted (ReadDir's rule: *.csv,
// not hidden).
func obsFiles(dir string) ([]string, error) {
	if dir == "" {
		return nil, errors.New("no observation_dir")
	}
	// Not os.ReadDir: its plain open(2) would wait forever on a FIFO there.
	d, err := safeopen.Dir(dir)
	if err != nil {
		return nil, fmt.Errorf("observation_dir: %w", err)
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("observation_dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".csv") || !e.Type().IsRegular() {
			continue
		}
		names = append(names, filepath.Join(dir, n))
	}
	sort.Strings(names)
	return names, nil
}

// obsStamp is the observation files' stamp: the newest mtime, the total size
// and the count. Epilogs append, so any new observation changes it. A folder
// that cannot be listed stamps as zero.
func obsStamp(dir string) stamp {
	names, err := obsFiles(dir)
	if err != nil {
		return stamp{}
	}
	st := stamp{ok: true, n: len(names)}
	for i, path := range names {
		if i >= memMaxFiles {
			break
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		if fi.ModTime().After(st.mod) {
			st.mod = fi.ModTime()
		}
		st.size += fi.Size()
	}
	return st
}
