// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/residency"
)

// TestSeveralGPUs: jobs of several GPUs share GPU by GPU on real daemons, on
// the layout that names each GPU's shards by its Type (gres.conf Type=gI on
// every shard line). A 4-GPU and a 2-GPU tagged job placed next to one-GPU
// residents get exactly the GPUs and shards the plugin chose (scontrol -d
// show job); the Prolog records each GPU; the guard reads each and acts on a
// several-GPU job as one job; a waiting several-GPU job is deferred and
// re-placed by the re-decide loop where an update can name several Types
// (23.11 and later); on the earlier layout (untyped shard lines) the same jobs
// take whole GPUs and slurmctld's log says why.
func TestSeveralGPUs(t *testing.T) {
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	// The optimistic predictor makes every pair look fast: sharing is always
	// preferred to an idle GPU, so the placements are known in advance.
	// The inference floor 0.7 keeps two busy inference jobs apart (latency
	// speed 1/(1+1.0) = 0.5 next to each other) while a light job may join
	// either (1/(1+0.06) = 0.94).
	c := optimisticGuardedCluster(t, a, func(cfg *config.Config) { cfg.SpeedFloor.Infer = 0.7 })
	if n := c.countLog("job_submit/coscheml", "share_multi_gpu: several-GPU jobs share GPU by GPU"); n < 1 {
		t.Errorf("slurmctld's log does not say several-GPU jobs share:\n%s", c.logTail(30))
	}
	sub := c.subtests(t)
	sub("placed_next_to_residents", testSeveralGPUsPlaced)
	sub("redecided", testSeveralGPUsRedecided)
	sub("spans_two_nodes", testSeveralGPUsSpan)
	sub("span_redecided", testSeveralGPUsSpanRedecided)
	// Last: the job it requeues is placed again elsewhere, and that decision's
	// reservation outlives the job's cancellation until the plugin's next queue
	// check (up to 30 s), which would steer the placements of a later subtest.
	sub("guard_acts_on_the_job", testSeveralGPUsGuard)
	c.reportPins("typed, several GPUs")

	// The earlier layout: one GPU is pinned exactly, several would be
	// misallocated, so several-GPU jobs take whole GPUs.
	old := newClusterTopo(t, a, true, topology{typed: true, untypedShards: true}, func(cfg *config.Config) {
		cfg.ShardTypePrefix = "g"
		cfg.Predictor = config.PredictorOptimistic
	})
	t.Run("untyped_shard_lines", func(st *testing.T) {
		old.t = st
		defer func() { old.t = t }()
		testSeveralGPUsOldLayout(st, old)
	})
}

// sleepJob submits a job (tag "": untagged) that sleeps, with args (its GPU
// request and placement flags), and returns its id and the marker file its
// script touches first (it exists once the Prolog has recorded the job).
func (c *cluster) sleepJob(tag string, args ...string) (int, string) {
	c.t.Helper()
	marker := c.path("jobs", fmt.Sprintf("started.%d", time.Now().UnixNano()))
	args = append(args, "--time=10", "-o", "/dev/null", "--wrap=touch "+marker+"; exec sleep 600")
	if tag != "" {
		if !strings.Contains(tag, ",class=") {
			tag += ",class=train"
		}
		args = append(args, "--comment=coscheml:app="+tag)
	}
	return c.mustSbatch(args...), marker
}

// resident waits until job id runs and the plugin's view holds it: its
// Prolog's record is written (marker) and the plugin re-read the residency
// (every 500 ms).
func (c *cluster) resident(id int, marker string) job {
	c.t.Helper()
	if !c.waitStarted(id, marker, 30*time.Second) {
		c.t.Fatalf("job %d did not start within 30 s:\n%s", id, c.showJob(id).Raw)
	}
	time.Sleep(1500 * time.Millisecond)
	return c.showJob(id)
}

func (c *cluster) running(id int) job {
	c.t.Helper()
	j, ok := c.waitJob(id, 30*time.Second, func(j job) bool { return j.State == "RUNNING" })
	if !ok {
		c.t.Fatalf("job %d did not start within 30 s: %s (%s)\n%s", id, j.State, j.Reason, j.Raw)
	}
	return j
}

// shardsOn reads, from `scontrol -d show job`'s GRES of the job's first node,
// the shards it holds on each GPU index: 22.05 "shard:g0:2(IDX:0)", 23.11+
// "shard:g0:2(2/4,0/4,0/4,0/4)".
func shardsOn(j job) map[int]int {
	for _, per := range shardsPerNode(j) {
		return per
	}
	return map[int]int{}
}

// shardsPerNode is shardsOn for each node of the job, from its node lines
// ("Nodes=" of `scontrol -d show job`, a node or a range of nodes each).
func shardsPerNode(j job) map[string]map[int]int {
	all := map[string]map[int]int{}
	for _, line := range strings.Split(j.Raw, "\n") {
		trim := strings.TrimSpace(line)
		if !strings.HasPrefix(trim, "Nodes=") {
			continue
		}
		out := map[int]int{}
		node := ""
		for _, m := range fieldRE.FindAllStringSubmatch(line, -1) {
			if m[1] == "Nodes" && node == "" {
				node = m[2]
			}
			if m[1] != "GRES" {
				continue
			}
			for _, e := range shardEntryRE.FindAllStringSubmatch(m[2], -1) {
				k, _ := strconv.Atoi(e[1])
				if idx, err := strconv.Atoi(e[2]); err == nil && e[2] != "" {
					out[idx] += k
					continue
				}
				for i, part := range strings.Split(e[3], ",") {
					used, _, _ := strings.Cut(part, "/")
					if n, err := strconv.Atoi(used); err == nil && n > 0 {
						out[i] += n
					}
				}
			}
		}
		// Nodes of the same allocation share one line: Nodes=n[1-2].
		names, err := hostlist.Expand(node)
		if err != nil {
			names = []string{node}
		}
		for _, n := range names {
			all[n] = out
		}
	}
	return all
}

var shardEntryRE = regexp.MustCompile(`shard(?::[^:(,]+)?:(\d+)\((?:IDX:(\d+)|((?:\d+/\d+,?)+))\)`)

// A 4-GPU job next to two one-GPU residents, then a 2-GPU job next to it:
// each gets the K shards of each GPU the plugin chose, and the Prolog records
// every GPU.
func testSeveralGPUsPlaced(t *testing.T, c *cluster) {
	const (
		busy  = "resnet50-bs64"     // solo SM 100%
		light = "pointnet-bs64-amp" // solo SM 6%
	)
	var ids []int
	defer func() { c.cancel(ids...); c.waitNoJobs(60 * time.Second) }()
	// Two one-GPU inference residents of n1, placed by the plugin: the second
	// cannot join the first (latency), so they hold GPUs 0 and 1.
	for g := 0; g < 2; g++ {
		id, marker := c.sleepJob(busy+",class=infer", "-w", "n1", "--gres=gpu:1")
		ids = append(ids, id)
		if j := c.resident(id, marker); j.NodeList != "n1" || j.GPUIdx != strconv.Itoa(g) {
			t.Fatalf("inference resident %d on %s GPU %s, want n1 GPU %d:\n%s", id, j.NodeList, j.GPUIdx, g, j.Raw)
		}
	}
	for _, n := range []int{4, 2} {
		id, marker := c.sleepJob(light, fmt.Sprintf("--gres=gpu:%d", n))
		ids = append(ids, id)
		j := c.resident(id, marker)
		c.checkPlacement(j) // Slurm's allocation is the decision's, GPU for GPU
		node, gpus, ok := c.intended(decisionID(j.Comment))
		if !ok || strings.Count(gpus, ",") != n-1 || node != "n1" {
			t.Fatalf("%d-GPU job %d: decision on %s GPUs %q (ok %v), want %d GPUs of n1 shared with its residents:\n%s", n, id, node, gpus, ok, n, j.Raw)
		}
		per := shardsOn(j)
		t.Logf("%d-GPU job %d on %s: TresPerNode=%s, shards per GPU %v", n, id, j.NodeList, j.TresPerNode, per)
		if len(per) != n {
			t.Errorf("%d-GPU job %d holds shards on %d GPUs: %v", n, id, len(per), per)
		}
		for g, k := range per {
			if k != shardsPerGPU/2 {
				t.Errorf("%d-GPU job %d: %d shards on GPU %d, want %d", n, id, k, g, shardsPerGPU/2)
			}
		}
		// The Prolog recorded the job on each of its GPUs, with its shards per GPU.
		store, err := residency.Open(c.cfg.ResidencyDir)
		if err != nil {
			t.Fatal(err)
		}
		en, err := store.Get(strconv.Itoa(id), "n1")
		if err != nil {
			t.Fatalf("no residency entry for job %d: %v", id, err)
		}
		got := make([]string, len(en.GPUs))
		for i, g := range en.GPUs {
			got[i] = strconv.Itoa(g)
		}
		if strings.Join(got, ",") != gpus || en.Shards != shardsPerGPU/2 {
			t.Errorf("job %d recorded on GPUs %v with %d shards each, want %s with %d", id, en.GPUs, en.Shards, gpus, shardsPerGPU/2)
		}
		if out := c.coscheml("explain", strconv.Itoa(id)); !strings.Contains(out, "GPUs "+gpus) || !strings.Contains(out, "shards on each") {
			t.Errorf("coscheml explain %d does not show its GPUs %s:\n%s", id, gpus, out)
		}
	}
}

// The guard reads each GPU of a several-GPU job and acts on it as one job: a
// 2-GPU job the optimistic plugin places next to a job that slows it below its
// floor on one GPU (mobilenetv3-bs128 runs at 0.63 next to dcgan-bs64, Lucid)
// was placed into the conflict, so it is requeued, once, and its co-runner is
// left alone.
func testSeveralGPUsGuard(t *testing.T, c *cluster) {
	stop := c.startGuards()
	defer stop()
	earlier := c.submitEmulated("dcgan-bs64", 20, []string{"-w", "n2", "--gres=gpu:1"})
	defer c.cancel(earlier)
	c.running(earlier)
	time.Sleep(2 * time.Second) // its Prolog's record, then the plugin's next residency read
	gang := c.submitEmulated("mobilenetv3-bs128", 20, []string{"-w", "n2", "--gres=gpu:2"})
	defer c.cancel(gang)
	g := c.running(gang)
	if !strings.Contains(","+g.GPUIdx+",", ",0,") {
		t.Fatalf("the 2-GPU job %d does not share GPU 0 with job %d (GPUs %s): the test proves nothing", gang, earlier, g.GPUIdx)
	}
	g, ok := c.waitJob(gang, 30*time.Second, func(j job) bool { return strings.Contains(adminComment(j), "requeue") })
	if !ok {
		t.Fatalf("the 2-GPU job %d was not acted on within 30 s (state %s, AdminComment %q)", gang, g.State, adminComment(g))
	}
	t.Logf("2-GPU job %d: %s, AdminComment=%s", gang, g.State, adminComment(g))
	if e := c.showJob(earlier); strings.Contains(adminComment(e), "coscheml guard") {
		t.Errorf("the earlier job %d was acted on: %q", earlier, adminComment(e))
	}
	// The guard logs its action once scontrol has answered, a moment after
	// the job's AdminComment shows it: wait for the line, then count.
	requeues := func() int { return countLines(c.path("log", "guard-n2.log"), "requeue job "+strconv.Itoa(gang)) }
	for deadline := time.Now().Add(10 * time.Second); requeues() == 0 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a second action would come within a round or two
	if n := requeues(); n != 1 {
		t.Errorf("the guard requeued job %d %d times, want once (one job, whatever its GPUs)", gang, n)
	}
}

// A several-GPU job that cannot be placed now waits with its whole-GPU
// request; where an update can name several shard Types (23.11 and later) the
// plugin defers it and the re-decide loop places it GPU by GPU once its GPUs
// free up; on 22.05 it is not deferred and Slurm starts it on whole GPUs.
func testSeveralGPUsRedecided(t *testing.T, c *cluster) {
	id, j := c.waitThenStart(t, "2-GPU job", []string{"n3"}, "-w", "n3", "--gres=gpu:2")
	defer c.cancel(id)
	typedUpdates := a2311(c)
	switch {
	case typedUpdates:
		if !strings.Contains(j.TresPerNode, "shard:g") || len(shardsOn(j)) != 2 {
			t.Errorf("23.11+: the loop should have placed job %d GPU by GPU: TresPerNode=%s GRES %v", id, j.TresPerNode, shardsOn(j))
		}
		c.checkPlacement(j)
	default:
		if j.TresPerNode != "gres:gpu:2" {
			t.Errorf("22.05: job %d should keep its whole GPUs: TresPerNode=%s", id, j.TresPerNode)
		}
	}
	t.Logf("2-GPU job %d started on %s GPUs %s (%s)", id, j.NodeList, j.GPUIdx, j.TresPerNode)
}

// A job of -N 2 that nothing fits waits with its whole-GPU request; once
// GPUs free up, on 23.11 and later the re-decide loop places it over both
// nodes at the same GPUs (its update names the node count); on 22.05 it keeps
// whole GPUs of Slurm's choice.
func testSeveralGPUsSpanRedecided(t *testing.T, c *cluster) {
	id, j := c.waitThenStart(t, "span job", []string{"n3", "n4"}, "-w", "n3,n4", "-N", "2", "--gres=gpu:2")
	defer c.cancel(id)
	per := shardsPerNode(j)
	t.Logf("span job %d started on %s (%s): %v", id, j.NodeList, j.TresPerNode, per)
	if !a2311(c) {
		if j.TresPerNode != "gres:gpu:2" {
			t.Errorf("22.05: job %d should keep its whole GPUs: TresPerNode=%s", id, j.TresPerNode)
		}
		return
	}
	nodes, gpus, ok := c.intended(decisionID(j.Comment))
	if !ok || nodes != "n3,n4" || !strings.Contains(j.TresPerNode, "shard:g") || len(per) != 2 {
		t.Fatalf("23.11+: the loop should have placed job %d over n3,n4 GPU by GPU: decision %q GPUs %q, TresPerNode=%s GRES %v", id, nodes, gpus, j.TresPerNode, per)
	}
	for node, got := range per {
		var idx []string
		for _, g := range []int{0, 1, 2, 3} {
			if got[g] > 0 {
				idx = append(idx, strconv.Itoa(g))
			}
		}
		if strings.Join(idx, ",") != gpus {
			t.Errorf("span job %d: Slurm allocated %s GPUs %v, the plugin chose %s", id, node, idx, gpus)
		}
	}
}

// waitThenStart fills every GPU of nodes with root's untagged whole-GPU jobs,
// submits a tagged job of args (2 GPUs per node), checks that it waits with its
// whole-GPU request, frees the nodes and returns the job once it runs.
func (c *cluster) waitThenStart(t *testing.T, what string, nodes []string, args ...string) (int, job) {
	t.Helper()
	var fill []int
	defer func() { c.cancel(fill...) }()
	for _, node := range nodes {
		for g := 0; g < gpusPerNode; g++ {
			// Root's whole GPUs, untagged: nothing can join them.
			id, marker := c.sleepJob("", "-w", node, fmt.Sprintf("--gres=shard:g%d:%d", g, shardsPerGPU))
			fill = append(fill, id)
			c.resident(id, marker)
		}
	}
	id, _ := c.sleepJob("resnet18-bs64", args...)
	time.Sleep(2 * time.Second)
	j := c.showJob(id)
	t.Logf("waiting %s %d: %s (%s), TresPerNode=%s; plugin: %s", what, id, j.State, j.Reason, j.TresPerNode, c.lastLogLine("tag=resnet18-bs64"))
	if j.State != "PENDING" || j.TresPerNode != "gres:gpu:2" {
		c.cancel(id)
		t.Fatalf("the %s %d should wait with its whole-GPU request: %s %s", what, id, j.State, j.TresPerNode)
	}
	c.cancel(fill...)
	j, ok := c.waitJob(id, 60*time.Second, func(j job) bool { return j.State == "RUNNING" })
	if !ok {
		c.cancel(id)
		t.Fatalf("the %s %d did not start within 60 s after its GPUs freed: %s (%s)\n%s", what, id, j.State, j.Reason, j.Raw)
	}
	return id, j
}

// a2311 says whether the release under test honours an update naming several
// shard Types (23.11 and later).
func a2311(c *cluster) bool { return c.a.slurm.atLeast(23, 11) }

// On the earlier layout the same jobs take whole GPUs on a node without other
// jobs, and slurmctld's log says why at start.
func testSeveralGPUsOldLayout(t *testing.T, c *cluster) {
	if n := c.countLog("job_submit/coscheml", "share_multi_gpu: several-GPU jobs take whole GPUs", "shard line without Type="); n < 1 {
		t.Errorf("slurmctld's log does not say why several-GPU jobs take whole GPUs:\n%s", c.logTail(30))
	}
	const tag = "resnet18-bs64"
	var ids []int
	defer func() { c.cancel(ids...); c.waitNoJobs(60 * time.Second) }()
	r, marker := c.sleepJob(tag, "-w", "n1", "--gres=shard:g0:2")
	ids = append(ids, r)
	c.resident(r, marker)
	for _, n := range []int{4, 2} {
		id, marker := c.sleepJob(tag, fmt.Sprintf("--gres=gpu:%d", n))
		ids = append(ids, id)
		j := c.resident(id, marker)
		idx := strings.Split(j.GPUIdx, ",")
		if j.NodeList == "n1" || len(idx) != n || !strings.HasPrefix(j.TresPerNode, "gres:gpu:") {
			t.Errorf("%d-GPU job %d on the earlier layout: %s GPUs %s, TresPerNode=%s; want whole GPUs of a node without other jobs", n, id, j.NodeList, j.GPUIdx, j.TresPerNode)
		}
		if slices.Contains(idx, "") {
			t.Errorf("job %d: no GPU index in its allocation:\n%s", id, j.Raw)
		}
	}
}

// A job of -N 2 with two GPUs per node next to one-GPU residents of n1 and n2
// spans both at the same GPUs: Slurm allocates exactly the nodes and, on
// each, the shards of each GPU the plugin chose; the Prolog of each node
// records it on those GPUs; explain names both nodes.
func testSeveralGPUsSpan(t *testing.T, c *cluster) {
	const (
		busy  = "resnet50-bs64"     // solo SM 100%
		light = "pointnet-bs64-amp" // solo SM 6%
	)
	// The earlier subtests' jobs must have left: a resident's GPU is chosen by
	// what else is there.
	c.waitNoJobs(60 * time.Second)
	var ids []int
	defer func() { c.cancel(ids...); c.waitNoJobs(60 * time.Second) }()
	for _, node := range []string{"n1", "n2"} {
		id, marker := c.sleepJob(busy+",class=infer", "-w", node, "--gres=gpu:1")
		ids = append(ids, id)
		if j := c.resident(id, marker); j.NodeList != node || j.GPUIdx != "0" {
			t.Fatalf("inference resident %d on %s GPU %s, want %s GPU 0:\n%s", id, j.NodeList, j.GPUIdx, node, j.Raw)
		}
	}
	id, marker := c.sleepJob(light, "-N", "2", "--gres=gpu:2")
	ids = append(ids, id)
	j := c.resident(id, marker)
	nodes, gpus, ok := c.intended(decisionID(j.Comment))
	if !ok || nodes != "n1,n2" || strings.Count(gpus, ",") != 1 || !strings.HasPrefix(gpus, "0,") {
		t.Fatalf("span job %d: decision on %q GPUs %q (ok %v), want n1,n2 with GPU 0 shared with the residents:\n%s", id, nodes, gpus, ok, j.Raw)
	}
	per := shardsPerNode(j)
	t.Logf("span job %d on %s: TresPerNode=%s, shards per node and GPU %v", id, j.NodeList, j.TresPerNode, per)
	if len(per) != 2 {
		t.Fatalf("span job %d: %d node lines in its allocation, want 2 (n1, n2):\n%s", id, len(per), j.Raw)
	}
	store, err := residency.Open(c.cfg.ResidencyDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"n1", "n2"} {
		got, ok := per[node]
		if !ok {
			t.Errorf("span job %d holds nothing on %s: %v", id, node, per)
			continue
		}
		var idx []string
		for _, g := range []int{0, 1, 2, 3} {
			if k := got[g]; k > 0 {
				idx = append(idx, strconv.Itoa(g))
				if k != shardsPerGPU/2 {
					t.Errorf("span job %d: %d shards on %s GPU %d, want %d", id, k, node, g, shardsPerGPU/2)
				}
			}
		}
		if strings.Join(idx, ",") != gpus {
			t.Errorf("span job %d: Slurm allocated %s GPUs %v, the plugin chose %s", id, node, idx, gpus)
		}
		en, err := c.waitEntry(store, strconv.Itoa(id), node)
		if err != nil {
			t.Errorf("no residency entry for job %d on %s: %v", id, node, err)
			continue
		}
		rec := make([]string, len(en.GPUs))
		for i, g := range en.GPUs {
			rec[i] = strconv.Itoa(g)
		}
		// 22.05's Prolog is not given SLURM_JOB_NODELIST: no node count there.
		wantNodes := 2
		if !a2311(c) {
			wantNodes = 0
		}
		if strings.Join(rec, ",") != gpus || en.Shards != shardsPerGPU/2 || en.Nodes != wantNodes {
			t.Errorf("job %d recorded on %s GPUs %v with %d shards each, of %d nodes; want %s with %d, of %d", id, node, en.GPUs, en.Shards, en.Nodes, gpus, shardsPerGPU/2, wantNodes)
		}
	}
	if out := c.coscheml("explain", strconv.Itoa(id)); !strings.Contains(out, "each of n1,n2 GPUs "+gpus) {
		t.Errorf("coscheml explain %d does not name both nodes and GPUs %s:\n%s", id, gpus, out)
	}
}

// waitEntry waits a little for job id's residency entry on node: a span's
// second node runs its Prolog on its own.
func (c *cluster) waitEntry(store *residency.Store, id, node string) (residency.Entry, error) {
	var en residency.Entry
	var err error
	for range 20 {
		if en, err = store.Get(id, node); err == nil {
			return en, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return en, err
}
