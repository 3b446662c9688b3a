// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/profile"
)

// formatLogRef is the fmt wording formatLog's appends must reproduce byte for byte
// (admins grep these lines; the explain and suite parsers read them).
func formatLogRef(r *decisionlog.Record) string {
	var b strings.Builder
	job := r.JobID
	if job == "" {
		job = "new"
	}
	fmt.Fprintf(&b, "%s job=%s uid=%d", r.Op, job, r.UserID)
	if r.Tag != "" {
		fmt.Fprintf(&b, " tag=%s", profile.Sanitize(r.Tag))
	}
	if r.Class != "" {
		fmt.Fprintf(&b, " class=%s", profile.Sanitize(r.Class))
	}
	if r.ID != "" {
		fmt.Fprintf(&b, " decision=%s", r.ID)
	}
	fmt.Fprintf(&b, " outcome=%s action=%s", r.Outcome, r.Action)
	if r.Node != "" {
		fmt.Fprintf(&b, " node=%s", profile.Sanitize(r.Node))
		for i, n := range r.Nodes {
			if i > 0 {
				fmt.Fprintf(&b, ",%s", profile.Sanitize(n))
			}
		}
		fmt.Fprintf(&b, " gpu=%d", r.GPU)
		if len(r.GPUs) > 1 {
			gpus := make([]string, len(r.GPUs))
			for i, g := range r.GPUs {
				gpus[i] = fmt.Sprint(g)
			}
			fmt.Fprintf(&b, " gpus=%s", strings.Join(gpus, ","))
		}
	}
	if r.Shards > 0 {
		fmt.Fprintf(&b, " shards=%d", r.Shards)
	}
	if r.PredictedSpeed > 0 {
		fmt.Fprintf(&b, " speed=%.2f min_resident=%.2f", r.PredictedSpeed, r.MinResidentSpeed)
	}
	if r.TresOut != "" {
		fmt.Fprintf(&b, " tres=%s->%s", profile.Sanitize(r.TresIn), profile.Sanitize(r.TresOut))
	}
	fmt.Fprintf(&b, " reason=%q", sanitizeLong(r.Reason))
	return b.String()
}

func TestFormatLogWording(t *testing.T) {
	for _, r := range []decisionlog.Record{
		{Op: "submit", UserID: 1000, Outcome: "unchanged", Action: "pass", Reason: "untagged"},
		{Op: "submit", JobID: "42", UserID: 4294967294, Tag: "resnet50", Class: "train", ID: "abc.1", Outcome: "rewrite",
			Action: "share", Node: "n3", GPU: 2, Shards: 2, PredictedSpeed: 0.876, MinResidentSpeed: 0.5049,
			TresIn: "gres:gpu:1", TresOut: "gres:shard:g2:2", Reason: `coscheml: share "quoted" \ and ` + "\n\tcontrol"},
		{Op: "submit", UserID: 1000, Tag: "a", ID: "d.2", Outcome: "rewrite", Action: "share", Node: "n1", Nodes: []string{"n1", "n\x002"},
			GPU: 0, GPUs: []int{0, 1}, Shards: 2, Reason: "span"},
		{Op: "modify", JobID: "7", Tag: "bad\x00tag\"", Node: "n\xff1", GPU: -1, Outcome: "reject", Action: "reject",
			Reason: strings.Repeat("é", 700)},
	} {
		if got, want := formatLog(&r), formatLogRef(&r); got != want {
			t.Errorf("formatLog:\n got %s\nwant %s", got, want)
		}
	}
}

func FuzzFormatLog(f *testing.F) {
	f.Add("resnet", "n1", "", "gres:gpu:1", "why \"not\"", 0.5)
	f.Add("resnet", "n1", "n\xff2", "gres:gpu:2", "span", 0.5)
	f.Fuzz(func(t *testing.T, tag, node, node2, tres, reason string, speed float64) {
		r := decisionlog.Record{Op: "submit", JobID: "1", Tag: tag, Node: node, TresIn: tres, TresOut: tres,
			Reason: reason, PredictedSpeed: speed, MinResidentSpeed: speed / 2, Shards: 1, Outcome: "rewrite", Action: "share"}
		if node2 != "" {
			r.Nodes, r.GPUs = []string{node, node2}, []int{0, 3}
		}
		if got, want := formatLog(&r), formatLogRef(&r); got != want {
			t.Fatalf("formatLog:\n got %s\nwant %s", got, want)
		}
	})
}
