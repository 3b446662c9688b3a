// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// gpuEntries counts the GPU and shard entries a job asks for across its TRES
// fields after the shim applied res: a rewrite must never lose or duplicate one.
func gpuEntries(t *testing.T, j JobFields, res Result) int {
	t.Helper()
	node, job, task := j.TresPerNode, j.TresPerJob, j.TresPerTask
	if res.Code == Rewrite {
		if res.TresPerNode != "" {
			node = res.TresPerNode
		}
		if res.Replace&ReplaceTresPerJob != 0 {
			job = res.TresPerJob
		}
		if res.Replace&ReplaceTresPerTask != 0 {
			task = res.TresPerTask
		}
	}
	n := 0
	for _, s := range []string{node, job, task, j.TresPerSocket} {
		g, err := ParseTres(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if g.HasGPU() {
			n++
		}
	}
	return n
}

// TestJobFields: the job's own options are honoured by a pin or leave the job to
// Slurm; each case failed before the plugin read the option (arrays were pinned,
// -x/-w/partition ignored, --gpus forms not recognised, types lost).
func TestJobFields(t *testing.T) {
	const tag = "coscheml:app=light-a"
	cases := []struct {
		name     string
		edit     func(*JobFields)
		code     Code
		node     string // wanted ReqNodes ("-": any non-empty but not the ones in notNode)
		notNodes []string
		logHas   string
		set      AnswerField
	}{
		{"plain pins the best node", nil, Rewrite, "n1", nil, "", 0},
		{"array is not pinned", func(j *JobFields) { j.ArrayInx = "0-9" }, Rewrite, "", nil, "job array", 0},
		{"array of several-GPU tasks passes", func(j *JobFields) { j.ArrayInx = "1,3"; j.TresPerNode = "gres:gpu:2" }, Unchanged, "", nil, "job array", 0},
		{"-x n1", func(j *JobFields) { j.ExcNodes = "n1" }, Rewrite, "n2", nil, "", 0},
		{"-x n[1-2]", func(j *JobFields) { j.ExcNodes = "n[1-2]" }, Rewrite, "n3", nil, "", 0},
		{"-x every node: whole GPU, not pinned", func(j *JobFields) { j.ExcNodes = "n1,n2,n3" }, Rewrite, "", nil, "may not use", 0},
		{"-x of several GPUs", func(j *JobFields) { j.ExcNodes = "n1"; j.TresPerNode = "gres:gpu:2" }, Rewrite, "n2", nil, "", 0},
		{"-x not understood", func(j *JobFields) { j.ExcNodes = "n[1-" }, Unchanged, "", nil, "-x", 0},
		{"-w n3", func(j *JobFields) { j.ReqNodes = "n3" }, Rewrite, "n3", nil, "", 0},
		{"-w of two nodes passes", func(j *JobFields) { j.ReqNodes = "n[2-3]" }, Unchanged, "", nil, "-w names 2 nodes", 0},
		{"-N 2 -w n[2-3], several GPUs where they do not share: passes", func(j *JobFields) {
			j.ReqNodes, j.MinNodes, j.MaxNodes, j.TresPerNode = "n[2-3]", 2, 2, "gres:gpu:2"
		}, Unchanged, "", nil, "several-GPU jobs do not share", 0},
		{"-N 2 -w of three nodes passes", func(j *JobFields) {
			j.ReqNodes, j.MinNodes, j.MaxNodes, j.TresPerNode = "n[1-3]", 2, 2, "gres:gpu:2"
		}, Unchanged, "", nil, "-w names 3 nodes for a job of 2", 0},
		{"-w of a foreign node passes", func(j *JobFields) { j.ReqNodes = "login1" }, Unchanged, "", nil, "not a node coscheml manages", 0},
		{"-w and -x of the same node: not pinned", func(j *JobFields) { j.ReqNodes = "n2"; j.ExcNodes = "n2" }, Rewrite, "", nil, "may not use", 0},
		{"--exclusive passes", func(j *JobFields) { j.Exclusive = true }, Unchanged, "", nil, "--exclusive", 0},
		{"--mem-per-gpu passes", func(j *JobFields) { j.MemPerTres = "gres:gpu:4096" }, Unchanged, "", nil, "--mem-per-gpu", 0},
		{"--cpus-per-gpu passes", func(j *JobFields) { j.CpusPerTres = "gres/gpu:4" }, Unchanged, "", nil, "--cpus-per-gpu", 0},
		{"other per-TRES memory is kept", func(j *JobFields) { j.MemPerTres = "gres/nic:1" }, Rewrite, "n1", nil, "", 0},
		{"typed --gres passes", func(j *JobFields) { j.TresPerNode = "gres:gpu:a100:1" }, Unchanged, "", nil, "typed GPU request (type a100)", 0},
		{"typed without count passes", func(j *JobFields) { j.TresPerNode = "gres/gpu:a100" }, Unchanged, "", nil, "type a100", 0},
		{"typed --gpus passes", func(j *JobFields) { j.TresPerNode = ""; j.TresPerJob = "gres/gpu:a100:1" }, Unchanged, "", nil, "type a100", 0},
		{"--gpus=1 moves to tres_per_node", func(j *JobFields) { j.TresPerNode = ""; j.TresPerJob = "gres:gpu:1" }, Rewrite, "n1", nil, "", ReplaceTresPerJob},
		{"--gpus=1 keeps the job's other TRES", func(j *JobFields) { j.TresPerNode = "gres:nic:1"; j.TresPerJob = "gres:gpu:1,gres:fpga:1" }, Rewrite, "n1", nil, "", ReplaceTresPerJob},
		{"--gpus=2 passes", func(j *JobFields) { j.TresPerNode = ""; j.TresPerJob = "gres/gpu:2" }, Unchanged, "", nil, "several GPUs", 0},
		{"--gpus-per-task=1 -n1 moves", func(j *JobFields) { j.TresPerNode = ""; j.TresPerTask = "gres/gpu:1"; j.NumTasks = 1 }, Rewrite, "n1", nil, "", ReplaceTresPerTask},
		{"--gpus-per-task=1 -n4 passes", func(j *JobFields) { j.TresPerNode = ""; j.TresPerTask = "gres/gpu:1"; j.NumTasks = 4 }, Unchanged, "", nil, "task count", 0},
		{"--gpus-per-socket passes", func(j *JobFields) { j.TresPerNode = ""; j.TresPerSocket = "gres/gpu:1" }, Unchanged, "", nil, "per socket", 0},
		{"two forms pass", func(j *JobFields) { j.TresPerJob = "gres:gpu:1" }, Unchanged, "", nil, "more than one way", 0},
		{"--gpus=1 in an update passes", func(j *JobFields) { j.TresPerNode = ""; j.TresPerJob = "gres:gpu:1"; j.Modify = true; j.JobID = 9 }, Unchanged, "", nil, "", 0},
		// A job requeued after it started comes back with the pin it ran with
		// (the re-decide loop's update, an administrator's): placed again (here
		// away from the node it was requeued from), not left to Slurm as a
		// typed request.
		{"own pin in the loop's update is placed again", func(j *JobFields) {
			j.TresPerNode, j.ExcNodes, j.Modify, j.JobID, j.Admin = "gres:shard:g0:2", "n1", true, 9, true
		}, Rewrite, "n2", nil, "", 0},
		// A user's own update with the plugin's Type is a raw shard request.
		{"own pin in a user's update is a raw shard request", func(j *JobFields) {
			j.TresPerNode, j.ExcNodes, j.Modify, j.JobID = "gres:shard:g0:2", "n1", true, 9
		}, Deny, "", nil, "raw_shard", 0},
		{"model-typed shards in an update are raw shards", func(j *JobFields) { j.TresPerNode = "gres:shard:a100:2"; j.Modify = true; j.JobID = 9 }, Deny, "", nil, "raw_shard", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			j := job(tag)
			if tc.edit != nil {
				tc.edit(&j)
			}
			res := f.e.Decide(j)
			if res.Code != tc.code || res.ReqNodes != tc.node {
				t.Fatalf("code %d node %q, want %d %q: %+v", res.Code, res.ReqNodes, tc.code, tc.node, res)
			}
			if !strings.Contains(logOf(res), tc.logHas) {
				t.Errorf("log %q lacks %q", logOf(res), tc.logHas)
			}
			if res.Replace != tc.set {
				t.Errorf("Replace = %b, want %b", res.Replace, tc.set)
			}
			before := gpuEntries(t, j, Result{})
			if n := gpuEntries(t, j, res); res.Code == Rewrite && n != 1 || n != before {
				t.Errorf("%d GPU requests after the answer (%d before), want 1: %+v", n, before, res)
			}
			if res.Code == Rewrite {
				g, err := ParseTres(res.TresPerNode)
				if err != nil || g.Shards == 0 && g.GPUs == 0 {
					t.Errorf("rewrite %q: %v", res.TresPerNode, err)
				}
				if tc.name == "--gpus=1 keeps the job's other TRES" && (res.TresPerJob != "gres:fpga:1" || !strings.HasPrefix(res.TresPerNode, "gres:nic:1,gres:shard:")) {
					t.Errorf("other TRES: job %q node %q", res.TresPerJob, res.TresPerNode)
				}
			}
		})
	}
}

// TestUntaggedGpusForm: untagged=exclusive routes a --gpus=1 job to a whole GPU
// without asking for the GPU twice.
func TestUntaggedGpusForm(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Untagged = "exclusive" })
	j := job("")
	j.TresPerNode, j.TresPerJob = "", "gres/gpu:1"
	res := f.e.Decide(j)
	if res.Code != Rewrite || res.TresPerNode != "gres/shard:4" || res.Replace != ReplaceTresPerJob || res.TresPerJob != "" {
		t.Fatalf("%+v", res)
	}
	j.Exclusive = true
	if res := f.e.Decide(j); res.Code != Unchanged {
		t.Fatalf("--exclusive untagged: %+v", res)
	}
}

// TestNodeStates: no pin on a node that cannot start jobs, while the last poll is
// fresh; a stale poll rules nothing out.
func TestNodeStates(t *testing.T) {
	f := newFixture(t, nil)
	f.e.poll.states.Store(&nodeStates{down: map[string]bool{"n1": true}, at: f.now})
	if res := f.e.Decide(job("coscheml:app=light-a")); res.ReqNodes != "n2" {
		t.Fatalf("drained n1: %+v", res)
	}
	f.e.poll.states.Store(&nodeStates{down: map[string]bool{"n1": true, "n2": true, "n3": true}, at: f.now})
	if res := f.e.Decide(job("coscheml:app=heavy-a")); res.Code != Rewrite || res.ReqNodes != "" {
		t.Fatalf("every node down: want a whole GPU unpinned, got %+v", res)
	}
	f.advance(2 * f.e.opts.StatesMaxAge)
	j := job("coscheml:app=heavy-b")
	j.ExcNodes = "n[2-3]"
	if res := f.e.Decide(j); res.ReqNodes != "n1" {
		t.Fatalf("stale states should rule nothing out: %+v", res)
	}
}

// TestPartitions: a pin stays inside the job's partitions (the default one when
// it names none); a partition slurm.conf does not describe leaves the job to Slurm.
func TestPartitions(t *testing.T) {
	conf, err := slurmconf.Parse(strings.NewReader("NodeName=n[1-3] Gres=gpu:4\nNodeSet=second Nodes=n2\nNodeSet=feat Feature=x\n" +
		"PartitionName=DEFAULT Nodes=n3\nPartitionName=main Nodes=n[2-3] Default=YES\nPartitionName=first Nodes=n1\n" +
		"PartitionName=late\nPartitionName=set Nodes=second\nPartitionName=all Nodes=ALL\nPartitionName=byfeature Nodes=feat\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		part   string
		code   Code
		node   string
		logHas string
	}{
		{"", Rewrite, "n2", ""},
		{"first", Rewrite, "n1", ""},
		{"late", Rewrite, "n3", ""}, // PartitionName=DEFAULT's Nodes=
		{"set", Rewrite, "n2", ""},
		{"all", Rewrite, "n1", ""},
		{"first,main", Rewrite, "n1", ""},
		{"nosuch", Unchanged, "", "not in slurm.conf"},
		{"byfeature", Unchanged, "", "features"},
	} {
		t.Run(tc.part, func(t *testing.T) {
			f := newFixture(t, nil)
			src := f.sources()
			src.LoadPartitions = func() (*Partitions, error) { return PartitionsOf(conf), nil }
			f.e.Close()
			f.e = New(src, Options{Now: f.clock})
			t.Cleanup(f.e.Close)
			j := job("coscheml:app=light-a")
			j.Partition = tc.part
			res := f.e.Decide(j)
			if res.Code != tc.code || res.ReqNodes != tc.node || !strings.Contains(logOf(res), tc.logHas) {
				t.Fatalf("partition %q: %+v", tc.part, res)
			}
		})
	}
}

func TestParseNodeStates(t *testing.T) {
	out := "n1 idle\nn2 drained\nn3 mixed\nn3 draining\nn4 down*\nn5 idle*\nn6 allocated\nn7 idle~\nn8 maint\nn9 completing\nn10 unknown*\nn11 drained*\n\n"
	down, err := ParseNodeStates([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]bool{"n1": false, "n2": true, "n3": true, "n4": true, "n5": false, "n6": false, "n7": false, "n8": true, "n9": false, "n10": false, "n11": true} {
		if down[n] != want {
			t.Errorf("%s down = %v, want %v", n, down[n], want)
		}
	}
	for _, bad := range []string{"n1\n", "n1 idle extra\n", "bad/name idle\n"} {
		if _, err := ParseNodeStates([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseNodeStates(f *testing.F) {
	f.Add([]byte("n1 idle\nn2 drained*\n"))
	f.Add([]byte("a b c\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		down, err := ParseNodeStates(b)
		if err != nil {
			return
		}
		for n, d := range down {
			if !d || !strings.Contains(string(b), n) {
				t.Fatalf("node %q marked %v, not from the input", n, d)
			}
		}
	})
}

// TestDrainedPinMoves: a pending job pinned to a node that then drains moves on a
// re-decision (an update that carries its GPU request): to another node when one
// fits, else to a whole GPU anywhere with the plugin's pin cleared. A pin the user
// asked for (-w) is never cleared.
func TestDrainedPinMoves(t *testing.T) {
	for _, tc := range []struct {
		name      string
		userPin   string
		down      []string
		wantNode  string
		wantClear bool
	}{
		{"another node fits", "", []string{"n1"}, "n2", false},
		{"no node left: pin cleared", "", []string{"n1", "n2", "n3"}, "", true},
		{"user's own -w kept", "n1", []string{"n1"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			j := job("coscheml:app=heavy-a")
			j.ReqNodes = tc.userPin
			a := f.e.Decide(j)
			if a.Code != Rewrite || a.ReqNodes != "n1" {
				t.Fatalf("submit: %+v", a)
			}
			down := map[string]bool{}
			for _, n := range tc.down {
				down[n] = true
			}
			f.e.poll.states.Store(&nodeStates{down: down, at: f.now})
			m := job(a.Comment)
			m.Modify, m.JobID, m.StoredComment = true, 77, a.Comment
			r := f.e.Decide(m)
			if r.Code != Rewrite || r.ReqNodes != tc.wantNode || (r.Replace&ClearReqNodes != 0) != tc.wantClear {
				t.Fatalf("re-decision: %+v", r)
			}
		})
	}
}

// TestModifyKeepsJobOptions: an update carries only what it changes, so a
// re-decision reads the job's -x, -w and array from its earlier decision.
func TestModifyKeepsJobOptions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(*JobFields)
		update   func(*JobFields)
		wantNode string
	}{
		{"-x remembered", func(j *JobFields) { j.ExcNodes = "n[1-2]" }, nil, "n3"},
		{"-w remembered", func(j *JobFields) { j.ReqNodes = "n2" }, nil, "n2"},
		{"array stays unpinned", func(j *JobFields) { j.ArrayInx = "1-4" }, nil, ""},
		{"the update's own -x wins", func(j *JobFields) { j.ExcNodes = "n[1-2]" }, func(j *JobFields) { j.ExcNodes = "n3"; j.Set |= FieldExcNodes }, "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			j := job("coscheml:app=heavy-a")
			tc.edit(&j)
			a := f.e.Decide(j)
			if a.Code != Rewrite {
				t.Fatalf("submit: %+v", a)
			}
			m := job(a.Comment)
			m.Modify, m.JobID, m.StoredComment = true, 78, a.Comment
			m.Set = FieldComment | FieldTres
			if tc.update != nil {
				tc.update(&m)
			}
			if r := f.e.Decide(m); r.Code != Rewrite || r.ReqNodes != tc.wantNode {
				t.Fatalf("re-decision: %+v", r)
			}
		})
	}
}
