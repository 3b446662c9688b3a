// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/profile"
)

// update is an `scontrol update` of pending job 42 by uid 1000 carrying only the
// fields named in set (as the shim hands job_modify over).
func update(set FieldSet, f func(*JobFields)) JobFields {
	j := JobFields{UserID: 1000, SubmitUID: 1000, MinNodes: 1, MaxNodes: NoVal, TimeLimit: NoVal, JobID: 42, Modify: true, Set: set}
	if f != nil {
		f(&j)
	}
	return j
}

// submitAs is a new job of uid 1000 (the shim sets every field it has).
func submitAs(comment, tres string, f func(*JobFields)) JobFields {
	j := job(comment)
	j.TresPerNode, j.SubmitUID = tres, 1000
	j.Set = FieldComment | FieldTres
	if f != nil {
		f(&j)
	}
	return j
}

// placed marks a rewrite the policy pinned to a node (its shard count is the policy's).
const placed = "placed"

// TestRawRequests: raw shard requests and updates that would move a pending job
// onto the shared GPUs without its GPU request are refused for ordinary users
// (raw_requests: refuse), re-decided where the update carries enough, and left
// alone for admins, other partitions and nodes coscheml does not share.
func TestRawRequests(t *testing.T) {
	pass := func(c *config.Config) {}
	excl := func(c *config.Config) { c.Untagged = "exclusive" }
	part := func(c *config.Config) { c.Cluster.Partition = "gpu" }
	allow := func(c *config.Config) { c.RawRequests = config.RawAllow }
	admins := func(c *config.Config) { c.AdminUsers = "root, 1234" }
	admin := func(j *JobFields) { j.Admin = true }
	tests := []struct {
		name string
		cfg  func(*config.Config)
		job  JobFields
		code Code
		tres string // the rewrite's request, when code is Rewrite (placed: pinned to a node by the policy)
		msg  string // in UserMsg
	}{
		// Submissions.
		{"raw shard", pass, submitAs("", "gres:shard:2", nil), Deny, "", "GPU shards directly (gres:shard:2)"},
		{"raw shard 23.11 form", pass, submitAs("", "gres/shard:1", nil), Deny, "", "Raw shard requests are reserved for administrators"},
		{"raw shard typed", pass, submitAs("", "gres/shard:g0:1", nil), Deny, "", "gres/shard:g0:1"},
		{"raw shard no count", pass, submitAs("", "gres:shard", nil), Deny, "", "--gres=gpu:1"},
		{"raw shard with gpu", pass, submitAs("", "gres:gpu:1,gres:shard:1", nil), Deny, "", "shards directly"},
		{"raw shard pinned to a shared node", pass, submitAs("", "gres:shard:1", func(j *JobFields) { j.ReqNodes, j.Set = "n[2-3]", j.Set|FieldReqNodes }), Deny, "", "shards directly"},
		{"raw shard pinned elsewhere", pass, submitAs("", "gres:shard:1", func(j *JobFields) { j.ReqNodes, j.Set = "cpu7", j.Set|FieldReqNodes }), Unchanged, "", ""},
		{"raw shard by root", pass, submitAs("", "gres:shard:1", admin), Unchanged, "", ""},
		{"raw shard by admin_users uid", admins, submitAs("", "gres:shard:1", func(j *JobFields) { j.SubmitUID = 1234 }), Unchanged, "", ""},
		{"raw shard allowed by config", allow, submitAs("", "gres:shard:1", nil), Unchanged, "", ""},
		{"raw shard other partition", part, submitAs("", "gres:shard:1", func(j *JobFields) { j.Partition, j.Set = "cpu", j.Set|FieldPartition }), Unchanged, "", ""},
		{"raw shard partition list with ours", part, submitAs("", "gres:shard:1", func(j *JobFields) { j.Partition, j.Set = "cpu,gpu", j.Set|FieldPartition }), Deny, "", "shards directly"},
		{"raw shard untagged exclusive: whole GPU", excl, submitAs("", "gres:shard:1", nil), Rewrite, "gres:shard:4", ""},
		{"tagged shard request is placed", pass, submitAs("coscheml:app=light-a", "gres:shard:2", nil), Rewrite, placed, ""},
		{"raw shard per task", pass, submitAs("", "", func(j *JobFields) { j.TresPerTask, j.NumTasks = "gres/shard:1", 1 }), Deny, "", "(gres/shard:1)"},
		{"raw shard per job", pass, submitAs("", "", func(j *JobFields) { j.TresPerJob = "gres:shard:2" }), Deny, "", "(gres:shard:2)"},
		{"whole GPU untouched", pass, submitAs("", "gres:gpu:1", nil), Unchanged, "", ""},
		{"whole GPU pinned untouched", pass, submitAs("", "gres:gpu:1", func(j *JobFields) { j.ReqNodes, j.Set = "n1", j.Set|FieldReqNodes }), Unchanged, "", ""},

		// Updates of a pending job without its comment.
		{"update gres to shards", pass, update(FieldTres, func(j *JobFields) { j.TresPerNode = "gres/shard:1" }), Deny, "", "update asks for GPU shards"},
		{"update gres to shards, exclusive", excl, update(FieldTres, func(j *JobFields) { j.TresPerNode = "gres/shard:1" }), Rewrite, "gres/shard:4", ""},
		{"update gres to a GPU, exclusive", excl, update(FieldTres, func(j *JobFields) { j.TresPerNode = "gres/gpu:1" }), Rewrite, "gres/shard:4", ""},
		{"update gres to a GPU, pass", pass, update(FieldTres, func(j *JobFields) { j.TresPerNode = "gres/gpu:1" }), Unchanged, "", ""},
		{"update node list", pass, update(FieldReqNodes, func(j *JobFields) { j.ReqNodes = "n2" }), Deny, "", "changes the node list of a pending job but not its GPU request"},
		{"update node list, exclusive", excl, update(FieldReqNodes, func(j *JobFields) { j.ReqNodes = "n2" }), Deny, "", "scontrol update JobId=42 TresPerNode=gres:gpu:1"},
		{"update clears node list", pass, update(FieldReqNodes, nil), Deny, "", "clearing it"},
		{"update node list and comment", pass, update(FieldReqNodes|FieldComment, func(j *JobFields) { j.ReqNodes, j.Comment = "n2", "coscheml:app=light-a" }), Deny, "", "node list"},
		{"update node list elsewhere", pass, update(FieldReqNodes, func(j *JobFields) { j.ReqNodes = "cpu7" }), Unchanged, "", ""},
		{"update node list by root", pass, update(FieldReqNodes, func(j *JobFields) { j.ReqNodes, j.Admin = "n2", true }), Unchanged, "", ""},
		{"update node list allowed by config", allow, update(FieldReqNodes, func(j *JobFields) { j.ReqNodes = "n2" }), Unchanged, "", ""},
		{"update node list with --gpus", pass, update(FieldReqNodes, func(j *JobFields) { j.ReqNodes, j.TresPerJob = "n2", "gres/gpu:1" }), Unchanged, "", ""},
		{"update node list with a GPU request", excl, update(FieldReqNodes|FieldTres, func(j *JobFields) { j.ReqNodes, j.TresPerNode = "n2", "gres:gpu:1" }), Rewrite, "gres:shard:4", ""},
		{"update excluded nodes", pass, update(FieldExcNodes, func(j *JobFields) { j.ExcNodes = "n1" }), Unchanged, "", ""},
		{"update partition into ours", part, update(FieldPartition, func(j *JobFields) { j.Partition = "gpu" }), Deny, "", "partition (into gpu"},
		{"update partition elsewhere", part, update(FieldPartition, func(j *JobFields) { j.Partition = "cpu" }), Unchanged, "", ""},
		{"update time limit only", pass, update(0, func(j *JobFields) { j.Set = 1 << 20 }), Unchanged, "", ""},

		// Updates carrying the comment are placed again, within the job's node
		// options; a user's update of a job whose options coscheml does not
		// know (never decided, or a restart forgot it) is not pinned: a whole
		// GPU through shards, where its own node list puts it.
		{"update comment and gres, options unknown", pass, update(FieldComment|FieldTres, func(j *JobFields) { j.Comment, j.TresPerNode = "coscheml:app=light-a", "gres:gpu:1" }), Rewrite, "gres:shard:4", ""},
		{"admin comment update (realq)", pass, update(FieldComment|FieldTres, func(j *JobFields) {
			j.Comment, j.TresPerNode, j.Admin, j.SubmitUID = "coscheml:app=light-a", "gres:gpu:1", true, 0
		}), Rewrite, placed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			r := f.e.Decide(tc.job)
			if r.Code != tc.code {
				t.Fatalf("code %d, want %d: %+v", r.Code, tc.code, r)
			}
			switch {
			case tc.code != Rewrite:
			case tc.tres == placed:
				if r.ReqNodes == "" || !strings.HasPrefix(r.TresPerNode, "gres:shard:") {
					t.Errorf("not placed by the policy: %+v", r)
				}
			case r.TresPerNode != tc.tres || r.ReqNodes != "":
				t.Errorf("rewrite to %q on %q, want %q on any node", r.TresPerNode, r.ReqNodes, tc.tres)
			}
			if !strings.Contains(r.UserMsg, tc.msg) {
				t.Errorf("message %q lacks %q", r.UserMsg, tc.msg)
			}
			if tc.code == Deny {
				if !strings.HasPrefix(r.UserMsg, "coscheml: ") || len(r.UserMsg) > 600 || !strings.Contains(logOf(r), "outcome=reject") || !strings.Contains(logOf(r), "raw_requests=refuse") {
					t.Errorf("refusal not worded or logged: msg %d chars %q, log %q", len(r.UserMsg), r.UserMsg, logOf(r))
				}
				if r.TresPerNode != "" || r.ReqNodes != "" || r.Comment != "" {
					t.Errorf("a refusal rewrites fields: %+v", r)
				}
				f.assertLogged(t, "raw_requests=refuse")
			}
		})
	}
}

// assertLogged reads the decision log back from disk: its last record's reason
// holds sub.
func (f *fixture) assertLogged(t *testing.T, sub string) {
	t.Helper()
	f.e.refresh.mu.Lock()
	if f.e.refresh.dlog.w == nil {
		f.e.refresh.mu.Unlock()
		t.Fatalf("no decision log open")
	}
	f.e.refresh.dlog.w.Close()
	f.e.refresh.dlog.w = nil
	f.e.refresh.mu.Unlock()
	recs, err := decisionlog.Since(f.cfg.DecisionLog, time.Time{})
	if err != nil || len(recs) == 0 {
		t.Fatalf("decision log %s: %d records, %v", f.cfg.DecisionLog, len(recs), err)
	}
	if last := recs[len(recs)-1]; last.Outcome != "reject" || !strings.Contains(last.Reason, sub) {
		t.Errorf("last record %+v lacks %q", last, sub)
	}
}

// TestAdminUsers: admin_users names resolve to uids when the configuration loads;
// unknown names are reported and exempt nobody.
func TestAdminUsers(t *testing.T) {
	tests := []struct {
		list    string
		uids    []uint32
		problem string
	}{
		{"", nil, ""},
		{"root", []uint32{0}, ""},
		{"7, 1234", []uint32{7, 1234}, ""},
		{"root,no-such-user-coscheml", []uint32{0}, "no-such-user-coscheml"},
	}
	for _, tc := range tests {
		got, problem := resolveAdmins(tc.list)
		if len(got) != len(tc.uids) {
			t.Errorf("%q: %v, want uids %v", tc.list, got, tc.uids)
		}
		for _, u := range tc.uids {
			if !got[u] {
				t.Errorf("%q: uid %d not an admin (%v)", tc.list, u, got)
			}
		}
		if (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
			t.Errorf("%q: problem %q, want one naming %q", tc.list, problem, tc.problem)
		}
	}
}

// TestBootstrap: with the default unknown_profile (bootstrap) a tagged job of an
// application without a profile runs alone on a whole GPU (all its shards, any
// node) and the user is told it is profiled there; once the Epilog's profile is in
// the store the next job of the application is placed with it.
func TestBootstrap(t *testing.T) {
	if got := config.Default().UnknownProfile; got != config.UnknownBootstrap {
		t.Fatalf("default unknown_profile is %q, want bootstrap", got)
	}
	tests := []struct {
		name    string
		cfg     func(*config.Config)
		comment string
		tres    string
		code    Code
		outTres string
		msg     string
	}{
		{"default", nil, "coscheml:app=newapp,class=train", "gres:gpu:1", Rewrite, "gres:shard:4", "runs alone on a whole GPU and is profiled there"},
		{"23.11 form", nil, "coscheml:app=newapp,class=hpc", "gres/gpu:1", Rewrite, "gres/shard:4", "profiled there"},
		{"no class: told to give one", nil, "coscheml:app=newapp", "gres:gpu:1", Rewrite, "gres:shard:4", "add class=hpc, train or infer"},
		{"profiling off", func(c *config.Config) { c.Profiling.Enabled = false }, "coscheml:app=newapp,class=train", "gres:gpu:1", Rewrite, "gres:shard:4", "profiling is disabled here"},
		{"two GPUs: not shared, unchanged", nil, "coscheml:app=newapp,class=train", "gres:gpu:2", Unchanged, "", "the job is not shared"},
		{"reject", func(c *config.Config) { c.UnknownProfile = config.UnknownReject }, "coscheml:app=newapp", "gres:gpu:1", Reject, "", "unknown application profile 'newapp'"},
		{"exclusive", func(c *config.Config) { c.UnknownProfile = config.UnknownExclusive }, "coscheml:app=newapp", "gres:gpu:1", Rewrite, "gres:shard:4", "runs on a GPU of its own"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			j := job(tc.comment)
			j.TresPerNode = tc.tres
			r := f.e.Decide(j)
			if r.Code != tc.code || r.TresPerNode != tc.outTres || r.ReqNodes != "" || !strings.Contains(r.UserMsg, tc.msg) {
				t.Fatalf("got %+v, want code %d tres %q message with %q", r, tc.code, tc.outTres, tc.msg)
			}
			if r.Code == Rewrite && !strings.HasPrefix(r.Comment, tc.comment+" coscheml-id=") {
				t.Errorf("the tag must stay in the comment for the Prolog to profile it: %q", r.Comment)
			}
		})
	}

	// The Epilog writes the profile; the next job is placed on a node and GPU.
	f := newFixture(t, nil)
	if r := f.e.Decide(job("coscheml:app=newapp")); r.ReqNodes != "" {
		t.Fatalf("bootstrap job pinned: %+v", r)
	}
	dir := t.TempDir()
	store, err := profile.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(prof("newapp", profile.ClassTrain, 20)); err != nil {
		t.Fatal(err)
	}
	p, err := store.Get("newapp")
	if err != nil {
		t.Fatal(err)
	}
	f.cat["newapp"] = p // what the store's Catalog gives the engine after the Epilog wrote it
	f.e.Reload()
	if r := f.e.Decide(job("coscheml:app=newapp")); r.Code != Rewrite || r.ReqNodes == "" || r.UserMsg != "" {
		t.Fatalf("profiled application not placed: %+v", r)
	}
}
