// SPDX-License-Identifier: Apache-2.0

// Package redecide is the controller-side loop that re-decides deferred "wait"
// jobs: the plugin answers a tagged job that nothing fits with its whole-GPU
// fail-safe request and a begin time a little ahead (wait_defer); this loop lists
// such jobs with squeue and, when capacity may have freed, sends each an
// `scontrol update` of its own comment and GPU request, which passes job_modify,
// so the plugin decides it again on a fresh view. It runs as SlurmUser or root
// next to slurmctld, never inside it.
package redecide

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/hostlist"
)

// Job is one job of the queue listing.
type Job struct {
	ID      uint32
	State   string // PENDING, RUNNING, ...
	Reason  string // pending reason (BeginTime, Resources, ...)
	Tres    string // tres_per_node as Slurm stores it (gres:shard:4 / gres/shard:4)
	Comment string
	Begin   int64 // start or begin time (unix seconds; 0: unknown)
	// Exclude is the job's excluded nodes (-x, ExcNodeList; "" none): the loop
	// sends them with its update, so that the plugin decides with the job's
	// exclusions as they are now (the guard adds its node to a job it requeues).
	Exclude string
	// Features is the job's --constraint when it is a plain feature list
	// (f1&f2; "" otherwise): the loop sends it with its update, so that the
	// plugin places the job on the GPU model it asked for also when slurmctld
	// restarted since its submission (the plugin's memory of the job is gone).
	Features string
	// Nodes is the job's node count (squeue's %D: for a pending job its
	// minimum). The loop sends a count above one with its update: an update
	// that does not name it hands the plugin no node count, and a job of
	// several nodes must be placed on as many.
	Nodes int
}

// fields before the features in one record of the squeue format.
const nFields = 7

// plainFeaturesRE is a --constraint the plugin reads: features joined by '&'
// in Slurm's feature alphabet. Anything else is not sent back.
var plainFeaturesRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}(&[A-Za-z0-9_.-]{1,64}){0,15}$`)

// TimeEnv makes squeue print times as unix seconds (its %S).
const TimeEnv = "SLURM_TIME_FORMAT=%s"

// NewMarker is a fresh random record marker. Comments are user text and may hold
// newlines or the field separator; a marker drawn for each listing cannot appear
// in a comment written before it, so a comment cannot forge a record of another
// user's job.
func NewMarker() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("record marker: %w", err)
	}
	return "@" + hex.EncodeToString(b[:]) + "@", nil
}

// Format is squeue's -o format for marker: marker, job ID, state, reason,
// tres_per_node, start (for a deferred job: begin) time, excluded nodes, node
// count, features, the field separator, comment, marker, per job. Run squeue
// with TimeEnv in its environment.
func Format(marker string) string {
	return marker + "%i|%T|%r|%b|%S|%x|%D|%f" + fieldSep(marker) + "%k" + marker
}

// fieldSep separates the two fields a user writes freely (features and
// comment): drawn with the marker, it cannot appear in either.
func fieldSep(marker string) string { return "#" + strings.Trim(marker, "@") + "#" }

// ParseQueue reads squeue output written with Format(marker). Between records
// only white space may appear; anything else (output not made with this marker)
// is an error. Records whose job ID is not a plain number (array jobs pending as
// one record: 12_[1-4]) are skipped: they cannot be updated one by one here.
func ParseQueue(out, marker string) ([]Job, error) {
	if len(marker) < 8 {
		return nil, fmt.Errorf("squeue listing: record marker too short")
	}
	parts := strings.Split(out, marker)
	if len(parts)%2 == 0 {
		return nil, fmt.Errorf("squeue listing: unbalanced record markers")
	}
	sep := fieldSep(marker)
	var jobs []Job
	for i, p := range parts {
		if i%2 == 0 {
			if strings.TrimSpace(p) != "" {
				return nil, fmt.Errorf("squeue listing: text outside a record: %.40q", p)
			}
			continue
		}
		head, c, ok := strings.Cut(p, sep)
		f := strings.SplitN(head, "|", nFields+1)
		if !ok || len(f) != nFields+1 {
			return nil, fmt.Errorf("squeue listing: record with %d fields, want %d: %.60q", len(f)+1, nFields+2, p)
		}
		id, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			continue // an array record or a het job component: not re-decided here
		}
		if c == "(null)" {
			c = ""
		}
		feats := f[7]
		if !plainFeaturesRE.MatchString(feats) {
			feats = "" // (null), or an expression the plugin does not read
		}
		exc := f[5]
		if exc == "(null)" || exc == "N/A" {
			exc = ""
		} else if _, err := hostlist.Expand(exc); err != nil || strings.ContainsAny(exc, " \t") {
			exc = "" // a value of another shape is not sent back to Slurm
		}
		tres := f[3]
		if tres == "(null)" || tres == "N/A" {
			tres = ""
		}
		begin, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil || begin < 0 {
			begin = 0 // N/A, Unknown
		}
		nodes, err := strconv.ParseUint(f[6], 10, 16)
		if err != nil || nodes < 1 {
			nodes = 1 // a pending job asks for at least one
		}
		jobs = append(jobs, Job{ID: uint32(id), State: f[1], Reason: f[2], Tres: tres, Comment: c, Begin: begin, Exclude: exc, Nodes: int(nodes), Features: feats})
	}
	return jobs, nil
}

// Deferred is the jobs to re-decide, in submit order (job ID): pending on a
// begin time still ahead (some releases show Reason=None until the scheduler's
// next pass after an update; Reason=BeginTime when the begin time is not
// known), tagged, carrying the plugin's decision token and a GPU request. Which
// of them the plugin itself deferred it knows (a user's own --begin is not
// changed by the re-decision).
//
// A job whose begin time has passed is not deferred, whatever its Reason: the
// Reason stays BeginTime until the scheduler's next pass, also for a job the
// loop has just placed (begin time now), and deciding that one again would drop
// its reservation, move it, or be refused once it started.
func Deferred(jobs []Job, now time.Time) []Job {
	var out []Job
	for _, j := range jobs {
		ahead := j.Begin > now.Unix() || j.Begin == 0 && j.Reason == "BeginTime"
		if j.State != "PENDING" || !ahead || j.Tres == "" {
			continue
		}
		d := comment.ParseComment(j.Comment)
		if !d.Present || d.Err != nil || d.DecisionID == "" {
			continue
		}
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Running is the set of jobs holding resources: when it changes, capacity may
// have freed (or been taken) and deferred jobs are worth deciding again.
func Running(jobs []Job) string {
	var ids []string
	for _, j := range jobs {
		switch j.State {
		case "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED":
			ids = append(ids, strconv.FormatUint(uint64(j.ID), 10))
		}
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// UpdateArgs is scontrol's argument list that re-decides j: its own comment and
// GPU request (and excluded nodes and features, if any) sent back unchanged, so job_modify
// hands the plugin them and it decides again (nothing else of the job changes
// unless the plugin changes it).
func UpdateArgs(j Job) []string {
	args := []string{"update", "JobId=" + strconv.FormatUint(uint64(j.ID), 10),
		"Comment=" + j.Comment, "TresPerNode=" + j.Tres}
	if j.Exclude != "" {
		args = append(args, "ExcNodeList="+j.Exclude)
	}
	if j.Features != "" {
		args = append(args, "Features="+j.Features)
	}
	if j.Nodes > 1 {
		args = append(args, "NumNodes="+strconv.Itoa(j.Nodes))
	}
	return args
}
