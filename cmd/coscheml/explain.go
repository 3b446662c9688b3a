// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/coscheml/coscheml/pkg/safetext"
	"github.com/urfave/cli/v2"
)

func explainCommand() *cli.Command {
	return &cli.Command{
		Name:      "explain",
		Usage:     "show why the job_submit plugin placed a job where it did",
		ArgsUsage: "JOBID",
		Description: "Looks the job up with `squeue -j JOBID` (pending or running jobs),\n" +
			"reads the decision id the plugin appended to its comment, and prints that\n" +
			"decision from the decision log (decision_log in the configuration): the\n" +
			"action (share, exclusive, wait), the node and GPU chosen, the predicted\n" +
			"speeds and the reason. For a running job it also shows the GPUs the node's\n" +
			"prolog recorded, and what the node's runtime guard observed or did to it\n" +
			"(guard.event_dir). --decision ID skips squeue (e.g. for a finished job:\n" +
			"the id is in its comment in sacct with AccountingStoreFlags=job_comment,\n" +
			"and in slurmctld's log line with log_decisions: info or SlurmctldDebug\n" +
			"verbose). Root and SlurmUser (the log's owner)\n" +
			"see every decision; other users only their own jobs'.\n\n" +
			"Examples:\n" +
			"   coscheml explain 4242\n" +
			"   coscheml explain --decision mx2uzeo0-1f --json\n\n" +
			"Exit codes: 0 ok, 2 bad arguments, 3 no such job or decision, 1 other failures.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "decision", Usage: "decision `ID` to show (instead of asking squeue)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
		},
		Action: runExplain,
	}
}

// explainOut is what explain prints.
type explainOut struct {
	JobID      string              `json:"job_id,omitempty"`
	JobState   string              `json:"job_state,omitempty"`
	NodeList   string              `json:"node_list,omitempty"`
	Comment    string              `json:"comment,omitempty"`
	DecisionID string              `json:"decision_id,omitempty"`
	Decision   *decisionlog.Record `json:"decision,omitempty"`
	Running    []residency.Entry   `json:"running,omitempty"`
	// SharingNow are the other jobs the residency store has on the job's GPUs
	// now ("job ID (tag)", or "another user's job" for a caller who may not
	// see it): a job placed alone may have been joined since.
	SharingNow []string `json:"sharing_now,omitempty"`
	Note       string   `json:"note,omitempty"`
	// Guard: the node runtime guard's events for the job (guard.event_dir).
	Guard []decisionlog.Record `json:"guard,omitempty"`
}

var (
	explainJobIDRE = regexp.MustCompile(`^[0-9]+(_[0-9]+)?$`)
	explainTokenRE = regexp.MustCompile(`coscheml-id=([a-z0-9-]{1,32}):[0-9]+`)
)

// callerUID is whose decisions explain may show (a variable for tests).
var callerUID = os.Getuid

// seesAll reports whether the caller may see every user's decisions: root and
// the log's owner (SlurmUser, which writes it). Everyone else sees only records
// of their own uid, as Slurm's PrivateData would have it.
func seesAll(uid int, logPath string) bool {
	if uid == 0 {
		return true
	}
	st, err := os.Stat(logPath)
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == uid
}

// decisionSource is where the caller reads decisions: the log itself for root,
// its owner and whoever may read it (its group: admins); for anyone else their
// own per-user view (decisionlog.ViewPublisher, written by the controller's
// `coscheml redecide --loop`). note says why there is none ("" when there is).
func decisionSource(logPath string) (path, note string) {
	uid := callerUID()
	if seesAll(uid, logPath) {
		return logPath, ""
	}
	if readable(logPath) {
		return logPath, ""
	}
	if p := decisionlog.OpenableUserView(logPath, uint32(uid)); p != "" {
		return p, ""
	}
	return logPath, fmt.Sprintf("no decision of yours is published yet: the decision log is readable by admins only, and the controller's "+
		"`coscheml redecide --loop` copies each user's decisions to %s within seconds (is coscheml-redecide.service running?)",
		decisionlog.UserViewPath(logPath, uint32(uid)))
}

// readable says whether the caller may open path (or it is missing: the
// readers say so); a variable so tests, which run as root, can play a user.
var readable = func(path string) bool {
	f, err := os.Open(path)
	if err == nil {
		f.Close()
	}
	return !errors.Is(err, os.ErrPermission)
}

// findDecision looks a record up and hides other users' records from a caller
// who may not see them (reported exactly as a missing one, so ids of other
// users' jobs cannot be probed).
func findDecision(path, id, jobID string) (decisionlog.Record, error) {
	rec, err := decisionlog.Find(path, id, jobID)
	if err != nil {
		return rec, err
	}
	if uid := callerUID(); !seesAll(uid, path) && int64(rec.UserID) != int64(uid) {
		key := "decision " + id
		if id == "" {
			key = "job " + jobID
		}
		return decisionlog.Record{}, fmt.Errorf("%s in %s: %w", key, path, decisionlog.ErrNotFound)
	}
	return rec, nil
}

func runExplain(c *cli.Context) error {
	out := explainOut{DecisionID: c.String("decision")}
	switch {
	case out.DecisionID == "" && c.Args().Len() != 1:
		return usageErrorf("explain needs one JOBID (or --decision ID)")
	case c.Args().Len() > 1:
		return usageErrorf("explain takes one JOBID")
	case c.Args().Len() == 1:
		out.JobID = c.Args().First()
		if !explainJobIDRE.MatchString(out.JobID) {
			return usageErrorf("invalid job id %q", sanitize(out.JobID))
		}
	}
	if out.DecisionID != "" && !regexp.MustCompile(`^[a-z0-9-]{1,32}$`).MatchString(out.DecisionID) {
		return usageErrorf("invalid decision id %q", sanitize(out.DecisionID))
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	if out.JobID != "" && out.DecisionID == "" {
		job, err := squeueJob(c.Context, out.JobID)
		if err != nil {
			return err
		}
		out.JobState, out.NodeList, out.Comment = job.State, job.Nodes, sanitizeLine(job.Comment)
		if m := explainTokenRE.FindStringSubmatch(job.Comment); m != nil {
			out.DecisionID = m[1]
		}
	}
	logPath, viewNote := decisionSource(cfg.DecisionLog)
	if out.DecisionID != "" {
		rec, err := findDecision(logPath, out.DecisionID, "")
		switch {
		case err == nil:
			out.Decision = &rec
		case viewNote != "":
			out.Note = viewNote
		case errors.Is(err, decisionlog.ErrNotFound):
			out.Note = "decision " + out.DecisionID + " is not in " + logPath + " (rotated away, logged on another controller, or another user's)"
		case errors.Is(err, os.ErrPermission):
			out.Note = fmt.Sprintf("cannot read the decision log %s: it is mode 0640 (root, SlurmUser and its group)", cfg.DecisionLog)
		default:
			return err
		}
	} else if out.JobID != "" {
		// Modified jobs are logged under their job id.
		if rec, err := findDecision(logPath, "", out.JobID); err == nil {
			out.Decision = &rec
			out.DecisionID = rec.ID
		} else if viewNote != "" {
			out.Note = viewNote
		} else if errors.Is(err, os.ErrPermission) {
			out.Note = fmt.Sprintf("cannot read the decision log %s: it is mode 0640 (root, SlurmUser and its group)", cfg.DecisionLog)
		} else {
			out.Note = "the plugin did not rewrite this job (untagged, or left unchanged); its comment carries no coscheml-id"
		}
	}
	if out.JobID != "" {
		if store, err := residency.Open(cfg.ResidencyDir); err == nil {
			if res, err := store.List(time.Now(), 10*time.Minute); err == nil {
				for _, e := range res.Entries {
					if e.JobID == out.JobID {
						out.Running = append(out.Running, e)
					}
				}
				out.SharingNow = sharingNow(res.Entries, out.Running, seesAll(callerUID(), cfg.DecisionLog), ownNames(callerUID()))
			}
		}
	}
	if out.JobID != "" {
		view := ""
		if logPath != cfg.DecisionLog {
			view = logPath // the caller's own view holds the guard's events about their jobs
		}
		out.Guard = guardEvents(cfg.Guard.EventDir, view, out.JobID)
	}
	if out.Decision == nil && out.JobState == "" && len(out.Running) == 0 && len(out.Guard) == 0 {
		return &notFoundError{msg: "no decision found: " + out.Note}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printExplain(c.App.Writer, &out)
	return nil
}

// squeueFormat asks squeue for the fields explain needs. Slurm's own fields come
// first, separated by '|', which neither a state nor a node list can hold; the
// comment, which the user controls, comes last so that nothing in it can shift
// the others. The job name (also the user's) is not asked for at all: with
// `scontrol show job -o` a name such as "x JobState=COMPLETED NodeList=n9" read
// as the job's state and nodes.
const squeueFormat = "%i|%T|%N|%k"

// squeueInfo is one job as squeue printed it with squeueFormat.
type squeueInfo struct {
	ID, State, Nodes, Comment string
}

var (
	squeueIDRE    = regexp.MustCompile(`^[0-9]+(_([0-9]+|\[[0-9,%-]+\]))?(\+[0-9]+)?$`)
	squeueStateRE = regexp.MustCompile(`^[A-Z_]{1,32}$`)
	squeueNodesRE = regexp.MustCompile(`^[A-Za-z0-9_.,\[\]()-]*$`)
)

// parseSqueue reads squeue's output for one job: its first line (a comment may
// hold a newline; what follows it is the comment's, not another job's).
func parseSqueue(out string) (squeueInfo, error) {
	line, _, _ := strings.Cut(out, "\n")
	f := strings.SplitN(line, "|", 4)
	if len(f) != 4 {
		return squeueInfo{}, fmt.Errorf("squeue: unexpected output %q", sanitize(safetext.Limit(line, 80)))
	}
	j := squeueInfo{ID: f[0], State: f[1], Nodes: f[2], Comment: f[3]}
	switch {
	case !squeueIDRE.MatchString(j.ID):
		return squeueInfo{}, fmt.Errorf("squeue: bad job id %q", sanitize(safetext.Limit(j.ID, 40)))
	case !squeueStateRE.MatchString(j.State):
		return squeueInfo{}, fmt.Errorf("squeue: bad job state %q", sanitize(safetext.Limit(j.State, 40)))
	case len(j.Nodes) > 65536 || !squeueNodesRE.MatchString(j.Nodes):
		return squeueInfo{}, fmt.Errorf("squeue: bad node list %q", sanitize(safetext.Limit(j.Nodes, 40)))
	}
	if j.Nodes == "(null)" {
		j.Nodes = ""
	}
	if j.Comment == "(null)" {
		j.Comment = ""
	}
	return j, nil
}

// squeueJob runs `squeue --noheader --array --states=all -j JOBID -o FORMAT` ($COSCHEML_SQUEUE
// overrides the program, for tests and odd installs).
func squeueJob(ctx context.Context, jobID string) (squeueInfo, error) {
	prog := os.Getenv("COSCHEML_SQUEUE")
	if prog == "" {
		prog = "squeue"
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// --states=all: squeue otherwise hides jobs that ended but are still in
	// slurmctld's memory (MinJobAge), which scontrol showed.
	cmd := exec.CommandContext(ctx, prog, "--noheader", "--array", "--states=all", "-j", jobID, "-o", squeueFormat)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	notFound := &notFoundError{msg: fmt.Sprintf("job %s: not known to Slurm (finished and purged?); try --decision ID from slurmctld's log", jobID)}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "Invalid job id") {
			return squeueInfo{}, notFound
		}
		return squeueInfo{}, fmt.Errorf("squeue -j %s: %w: %s", jobID, err, sanitizeLine(msg))
	}
	if strings.TrimSpace(string(b)) == "" { // some releases print nothing for a purged job
		return squeueInfo{}, notFound
	}
	return parseSqueue(string(b))
}

func sanitizeLine(s string) string { return safetext.Limit(s, 300) }

// ownNames are the names a residency entry's user may carry for uid: the
// number and the login name.
func ownNames(uid int) map[string]bool {
	own := map[string]bool{strconv.Itoa(uid): true}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		own[u.Username] = true
	}
	return own
}

// sharingNow words the entries other than the job's own runs (mine) that hold
// one of the same GPUs on the same node. A caller who may not see every job
// (all false) sees other users' jobs only as "another user's job".
func sharingNow(entries, mine []residency.Entry, all bool, own map[string]bool) []string {
	var out []string
	for _, e := range entries {
		for _, m := range mine {
			if e.JobID == m.JobID || e.Node != m.Node || !slices.ContainsFunc(e.GPUs, func(g int) bool { return slices.Contains(m.GPUs, g) }) {
				continue
			}
			switch {
			case !all && !own[e.User]:
				out = append(out, "another user's job")
			case e.Tag != "":
				out = append(out, fmt.Sprintf("job %s (%s)", sanitize(e.JobID), sanitize(e.Tag)))
			default:
				out = append(out, "job "+sanitize(e.JobID)+" (untagged)")
			}
			break
		}
	}
	return out
}

// decisionLine words a decision's outcome and where it put the job. An
// exclusive decision of a profiled job takes only the share slots of its idle
// GPU, leaving the rest for a co-runner: it is worded as "alone at decision"
// so a job joined later does not read as a broken promise of exclusivity.
func decisionLine(d *decisionlog.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision %s (%s, %s): %s", d.ID, d.Op, d.Time.Format(time.RFC3339), d.Outcome)
	partial := d.Action == "exclusive" && d.Shards > 0
	switch {
	case partial:
		b.WriteString(", alone on an idle GPU at decision (exclusive)")
	case d.Action != "":
		fmt.Fprintf(&b, ", %s", d.Action)
	}
	node := d.Node
	if len(d.Nodes) > 1 {
		node = "each of " + strings.Join(d.Nodes, ",")
	}
	switch {
	case d.Node != "" && len(d.GPUs) > 1:
		gpus := make([]string, len(d.GPUs))
		for i, g := range d.GPUs {
			gpus[i] = strconv.Itoa(g)
		}
		fmt.Fprintf(&b, " on %s GPUs %s", sanitize(node), strings.Join(gpus, ","))
	case d.Node != "":
		fmt.Fprintf(&b, " on %s GPU %d", sanitize(d.Node), d.GPU)
	}
	switch {
	case d.Shards > 0 && len(d.GPUs) > 1:
		fmt.Fprintf(&b, " with %d shards on each", d.Shards)
	case d.Shards > 0:
		fmt.Fprintf(&b, " with %d shards", d.Shards)
	}
	if partial {
		b.WriteString("; the GPU's other shards stay free for a co-runner that may join later")
	}
	return b.String()
}

// classWords words a decision's class; without one the placement applied the
// strictest floor (infer's), which is said rather than left implicit.
func classWords(class string) string {
	if class == "" {
		return "no class: the strictest floor applies"
	}
	return sanitize(class)
}

// speedLine words the decision's predicted speeds; an infer job's floor bounds
// its latency, so its speed is worded as the latency ratio it is.
func speedLine(d *decisionlog.Record) string {
	if d.Class == "infer" {
		return fmt.Sprintf("predicted latency speed: %.2f (solo latency / shared latency; lowest resident speed after joining: %.2f)", d.PredictedSpeed, d.MinResidentSpeed)
	}
	return fmt.Sprintf("predicted speed: %.2f (lowest resident after joining: %.2f)", d.PredictedSpeed, d.MinResidentSpeed)
}

// reasonText is a decision's reason made safe to print, whole: the reason
// is the plugin's own words, and cutting it loses the part a reader came for.
func reasonText(s string) string { return safetext.Limit(s, len(s)) }

func printExplain(w io.Writer, o *explainOut) {
	if o.JobID != "" {
		fmt.Fprintf(w, "job %s", o.JobID)
		if o.JobState != "" {
			fmt.Fprintf(w, ": %s", o.JobState)
		}
		if o.NodeList != "" {
			fmt.Fprintf(w, " on %s", o.NodeList)
		}
		fmt.Fprintln(w)
	}
	if d := o.Decision; d != nil {
		fmt.Fprintln(w, decisionLine(d))
		if d.Tag != "" {
			fmt.Fprintf(w, "  application: %s (%s)\n", sanitize(d.Tag), classWords(d.Class))
		}
		if d.PredictedSpeed > 0 {
			fmt.Fprintf(w, "  %s\n", speedLine(d))
		}
		if len(d.CoRunners) > 0 {
			fmt.Fprintf(w, "  co-runners at decision: %s\n", sanitize(strings.Join(d.CoRunners, ", ")))
		}
		if d.TresOut != "" {
			fmt.Fprintf(w, "  request: %s -> %s\n", sanitize(d.TresIn), sanitize(d.TresOut))
		}
		if d.Policy != "" {
			fmt.Fprintf(w, "  policy: %s\n", sanitize(d.Policy))
		}
		fmt.Fprintf(w, "  reason: %s\n", reasonText(d.Reason))
	}
	for _, e := range o.Running {
		gpus := make([]string, len(e.GPUs))
		for i, g := range e.GPUs {
			gpus[i] = fmt.Sprint(g)
		}
		fmt.Fprintf(w, "running on %s GPU %s since %s (recorded by the prolog)\n", e.Node, strings.Join(gpus, ","), e.Start.Format(time.RFC3339))
	}
	if len(o.SharingNow) > 0 {
		fmt.Fprintf(w, "sharing its GPU now with: %s\n", strings.Join(o.SharingNow, ", "))
	}
	if len(o.Guard) > 0 {
		fmt.Fprintln(w, "runtime guard:")
	}
	for _, e := range o.Guard {
		fmt.Fprintf(w, "  %s %s GPU %d: %s (%s): %s\n", e.Time.UTC().Format(time.RFC3339), sanitize(e.Node), e.GPU,
			sanitize(e.Action), sanitize(e.Outcome), sanitizeLine(e.Reason))
	}
	if o.Note != "" {
		fmt.Fprintf(w, "note: %s\n", o.Note)
	}
}

// maxGuardEvents bounds the guard events explain shows for one job.
const maxGuardEvents = 20

// guardEvents reads the job's events from every node's guard log in dir and
// from the caller's own view (view, "" for none), oldest first. A caller who is
// neither root nor a log's owner sees only the events of their own jobs: the
// guard's logs are root's, so an ordinary user reads them from their view.
// Unreadable logs are skipped: the guard's events are extra information, never
// a reason for explain to fail.
func guardEvents(dir, view, jobID string) []decisionlog.Record {
	var logs []string
	if dir != "" {
		logs, _ = filepath.Glob(filepath.Join(dir, "*.log"))
	}
	if view != "" {
		logs = append(logs, view)
	}
	uid := callerUID()
	var out []decisionlog.Record
	seen := map[string]bool{}
	for _, p := range logs {
		recs, err := decisionlog.JobRecords(p, jobID, decisionlog.OpGuard, maxGuardEvents)
		if err != nil {
			continue
		}
		all := seesAll(uid, p)
		for _, r := range recs {
			if (all || int64(r.UserID) == int64(uid)) && !seen[r.ID] {
				seen[r.ID] = true
				out = append(out, r)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if len(out) > maxGuardEvents {
		out = out[len(out)-maxGuardEvents:]
	}
	return out
}
