package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
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
		Description: "Looks the job up with `scontrol show job -o JOBID` (pending or running jobs),\n" +
			"reads the decision id the plugin appended to its comment, and prints that\n" +
			"decision from the decision log (decision_log in the configuration): the\n" +
			"action (share, exclusive, wait), the node and GPU chosen, the predicted\n" +
			"speeds and the reason. For a running job it also shows the GPUs the node's\n" +
			"prolog recorded. --decision ID skips scontrol (e.g. for a finished job\n" +
			"whose id is in slurmctld's log line).\n\n" +
			"Examples:\n" +
			"   coscheml explain 4242\n" +
			"   coscheml explain --decision mx2uzeo0-1f --json\n\n" +
			"Exit codes: 0 ok, 2 bad arguments, 3 no such job or decision, 1 other failures.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "decision", Usage: "decision `ID` to show (instead of asking scontrol)"},
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
	Note       string              `json:"note,omitempty"`
}

var (
	explainJobIDRE   = regexp.MustCompile(`^[0-9]+(_[0-9]+)?$`)
	explainTokenRE   = regexp.MustCompile(`coscheml-id=([a-z0-9-]{1,32}):[0-9]+`)
	explainStateRE   = regexp.MustCompile(`(?:^|\s)JobState=(\S+)`)
	explainNodesRE   = regexp.MustCompile(`(?:^|\s)NodeList=(\S+)`)
	explainCommentRE = regexp.MustCompile(`(?:^|\s)Comment=(.*?)(?:\s[A-Z][A-Za-z]*=|$)`)
)

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
		line, err := scontrolShowJob(c.Context, out.JobID)
		if err != nil {
			return err
		}
		if m := explainStateRE.FindStringSubmatch(line); m != nil {
			out.JobState = m[1]
		}
		if m := explainNodesRE.FindStringSubmatch(line); m != nil && m[1] != "(null)" {
			out.NodeList = m[1]
		}
		if m := explainCommentRE.FindStringSubmatch(line); m != nil && m[1] != "(null)" {
			out.Comment = sanitizeLine(m[1])
		}
		if m := explainTokenRE.FindStringSubmatch(line); m != nil {
			out.DecisionID = m[1]
		}
	}
	if out.DecisionID != "" {
		rec, err := decisionlog.Find(cfg.DecisionLog, out.DecisionID, "")
		switch {
		case err == nil:
			out.Decision = &rec
		case errors.Is(err, decisionlog.ErrNotFound):
			out.Note = "decision " + out.DecisionID + " is not in " + cfg.DecisionLog + " (rotated away, or logged on another controller)"
		default:
			return err
		}
	} else if out.JobID != "" {
		// Modified jobs are logged under their job id.
		if rec, err := decisionlog.Find(cfg.DecisionLog, "", out.JobID); err == nil {
			out.Decision = &rec
			out.DecisionID = rec.ID
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
			}
		}
	}
	if out.Decision == nil && out.JobState == "" && len(out.Running) == 0 {
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

// scontrolShowJob runs `scontrol show job -o JOBID` ($COSCHEML_SCONTROL overrides
// the program, for tests and odd installs).
func scontrolShowJob(ctx context.Context, jobID string) (string, error) {
	prog := os.Getenv("COSCHEML_SCONTROL")
	if prog == "" {
		prog = "scontrol"
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "show", "job", "-o", jobID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "Invalid job id") {
			return "", &notFoundError{msg: fmt.Sprintf("job %s: not known to Slurm (finished and purged?); try --decision ID from slurmctld's log", jobID)}
		}
		return "", fmt.Errorf("scontrol show job %s: %w: %s", jobID, err, sanitizeLine(msg))
	}
	return strings.TrimSpace(string(b)), nil
}

func sanitizeLine(s string) string { return safetext.Limit(s, 300) }

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
		fmt.Fprintf(w, "decision %s (%s, %s): %s", d.ID, d.Op, d.Time.Format(time.RFC3339), d.Outcome)
		if d.Action != "" {
			fmt.Fprintf(w, ", %s", d.Action)
		}
		if d.Node != "" {
			fmt.Fprintf(w, " on %s GPU %d", sanitize(d.Node), d.GPU)
		}
		if d.Shards > 0 {
			fmt.Fprintf(w, " with %d shards", d.Shards)
		}
		fmt.Fprintln(w)
		if d.Tag != "" {
			fmt.Fprintf(w, "  application: %s (%s)\n", sanitize(d.Tag), sanitize(d.Class))
		}
		if d.PredictedSpeed > 0 {
			fmt.Fprintf(w, "  predicted speed: %.2f (lowest resident after joining: %.2f)\n", d.PredictedSpeed, d.MinResidentSpeed)
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
		fmt.Fprintf(w, "  reason: %s\n", sanitizeLine(d.Reason))
	}
	for _, e := range o.Running {
		gpus := make([]string, len(e.GPUs))
		for i, g := range e.GPUs {
			gpus[i] = fmt.Sprint(g)
		}
		fmt.Fprintf(w, "running on %s GPU %s since %s (recorded by the prolog)\n", e.Node, strings.Join(gpus, ","), e.Start.Format(time.RFC3339))
	}
	if o.Note != "" {
		fmt.Fprintf(w, "note: %s\n", o.Note)
	}
}
