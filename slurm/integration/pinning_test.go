// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// tally counts, for one cluster, the placements the plugin pinned to a GPU and
// how many Slurm really put on that GPU.
type tally struct {
	checked  int // placements pinned to one GPU by the policy
	landed   int // ... that Slurm allocated on that GPU
	unpinned int // placements without a GPU of their own (exclusive, pass)
}

var decisionRE = regexp.MustCompile(`decision=(\S+) outcome=(\S+) action=(\S+)(?: node=(\S+) gpu=(-?\d+)(?: gpus=([0-9,]+))?)?`)

// intended returns the node and GPUs the plugin chose for a decision ID, as its
// slurmctld log line says ("... decision=ID outcome=rewrite action=share node=n1
// gpu=2 ..."; several: "gpu=0 gpus=0,3"), as "0" or "0,3"; gpus "" when it
// chose none.
func (c *cluster) intended(decision string) (node string, gpus string, ok bool) {
	for _, l := range c.logLines("decision=" + decision + " ") {
		if !strings.Contains(l, "job_submit/coscheml") {
			continue
		}
		m := decisionRE.FindStringSubmatch(l)
		if m == nil || m[1] != decision {
			continue
		}
		if m[4] == "" || strings.HasPrefix(m[5], "-") {
			return "", "", true
		}
		if m[6] != "" {
			return m[4], m[6], true
		}
		return m[4], m[5], true
	}
	return "", "", false
}

// checkPlacement compares, for a running job the plugin placed, the GPU the
// policy chose with the GPU Slurm allocated (scontrol show job -d).
func (c *cluster) checkPlacement(j job) {
	c.t.Helper()
	id := decisionID(j.Comment)
	// (A miss is always an error: a pinning mode that cannot pin must put the
	// plugin in safe mode instead.)
	if id == "" {
		return // not placed by the plugin
	}
	node, gpus, ok := c.intended(id)
	if !ok {
		c.t.Errorf("job %d: no slurmctld log line for its decision %s", j.ID, id)
		return
	}
	if gpus == "" {
		c.pins.unpinned++
		return
	}
	c.pins.checked++
	got := j.NodeList + "/" + j.GPUIdx
	want := node + "/" + gpus
	if got == want {
		c.pins.landed++
		return
	}
	c.t.Errorf("job %d (decision %s): the policy chose %s, Slurm allocated %s (TresPerNode=%s)",
		j.ID, id, want, got, j.TresPerNode)
}

// reportPins logs the cluster's tally and appends it to $COSCHEML_INTEGRATION_REPORT.
func (c *cluster) reportPins(what string) {
	line := fmt.Sprintf("slurm=%s topology=%q mode=%q placements=%d landed=%d unpinned=%d",
		c.a.slurm.version, c.topo, what, c.pins.checked, c.pins.landed, c.pins.unpinned)
	c.t.Log(line)
	report(c.t, line)
}

// report appends one line to $COSCHEML_INTEGRATION_REPORT (for the compatibility
// table), when set.
func report(t *testing.T, line string) {
	path := os.Getenv("COSCHEML_INTEGRATION_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Logf("report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
}

// startSoft submits a sleeping job and waits until it runs; ok is false (and the
// job cancelled) when it is still pending after d (a Slurm requeue extends d,
// waitStarted).
func (c *cluster) startSoft(args []string, d time.Duration) (job, bool) {
	c.t.Helper()
	marker := c.path("jobs", fmt.Sprintf("started.%d", time.Now().UnixNano()))
	args = append(append([]string{"--time=10", "-o", "/dev/null"}, args...), "--wrap=touch "+marker+"; exec sleep 300")
	id := c.mustSbatch(args...)
	if c.waitStarted(id, marker, d) {
		return c.showJob(id), true
	}
	j := c.showJob(id)
	c.cancel(id)
	return j, false
}

// measureSlurmPick asks Slurm itself (no plugin) whether a steering rule holds on
// this release and topology: random shard requests on node n1, each compared with
// the GPU the rule predicts. firstFit: --gres=shard:K lands on the lowest-index
// GPU with K free shards (the rule first-fit steering relies on). typed:
// --gres=shard:g<i>:K lands on GPU i. Returns (requests started, landed as
// predicted).
func measureSlurmPick(t *testing.T, c *cluster, typed bool, seed int64, n int) (int, int) {
	rng := rand.New(rand.NewSource(seed))
	free := make([]int, gpusPerNode)
	for i := range free {
		free[i] = shardsPerGPU
	}
	var ids []int
	defer func() { c.cancel(ids...) }()
	started, landed := 0, 0
	for k := 0; k < n; k++ {
		want := -1
		var gres string
		if typed {
			// A GPU with room, at random, and a count that fits it.
			var room []int
			for i, f := range free {
				if f > 0 {
					room = append(room, i)
				}
			}
			if len(room) == 0 {
				break
			}
			want = room[rng.Intn(len(room))]
			kk := 1 + rng.Intn(free[want])
			gres = fmt.Sprintf("shard:g%d:%d", want, kk)
		} else {
			kk := 1 + rng.Intn(shardsPerGPU)
			for i, f := range free {
				if f >= kk {
					want = i
					break
				}
			}
			if want < 0 {
				break
			}
			gres = fmt.Sprintf("shard:%d", kk)
		}
		j, ok := c.startSoft([]string{"--gres=" + gres, "-w", "n1"}, 20*time.Second)
		if !ok {
			t.Logf("request %s on n1 did not start (%s): stopping this series", gres, j.Reason)
			break
		}
		ids = append(ids, j.ID)
		started++
		got, err := strconv.Atoi(j.GPUIdx)
		if err != nil {
			t.Errorf("job %d (%s): GPU index %q not a single GPU:\n%s", j.ID, gres, j.GPUIdx, j.Raw)
			continue
		}
		cnt, _ := strconv.Atoi(gres[strings.LastIndexByte(gres, ':')+1:])
		free[got] -= cnt // Slurm's truth, whatever the prediction was
		if got == want {
			landed++
		} else {
			t.Logf("request %s on n1: predicted GPU %d, Slurm allocated GPU %d", gres, want, got)
		}
	}
	return started, landed
}

// pinningCase is one GPU description of the test cluster.
type pinningCase struct {
	name  string
	topo  topology
	since [2]int // oldest release that has the setting
}

var pinningCases = []pinningCase{
	{name: "plain", topo: topology{}},
	{name: "cores", topo: topology{cores: true}},
	{name: "ll_shared_gres", topo: topology{selectParams: "CR_Core,LL_SHARED_GRES"}, since: [2]int{23, 11}},
	{name: "typed", topo: topology{typed: true}},
	{name: "typed_cores", topo: topology{typed: true, cores: true}},
	{name: "typed_ll_shared_gres", topo: topology{typed: true, selectParams: "CR_Core,LL_SHARED_GRES"}, since: [2]int{23, 11}},
}

// TestPinning checks, on the release under test and for each GPU description,
// that every placement the plugin pins lands on the GPU its policy chose, or that
// the plugin knows it cannot pin there (safe mode, said once at start). It also
// measures whether Slurm's own shard pick follows the rule a pinning mode relies
// on (first fit; the GPU named by a per-GPU type), and requires the rule where
// the plugin relies on it. Results go to the log and $COSCHEML_INTEGRATION_REPORT.
func TestPinning(t *testing.T) {
	needRoot(t)
	a := build(t)
	ensureMunge(t)
	par := pinningParallel(t)
	slots := make(chan struct{}, par)
	for _, pc := range pinningCases {
		t.Run(pc.name, func(t *testing.T) {
			if !a.slurm.atLeast(pc.since[0], pc.since[1]) {
				t.Skipf("%s needs Slurm %d.%02d or newer (this is %s)", pc.topo, pc.since[0], pc.since[1], a.slurm.version)
			}
			if par > 1 {
				t.Parallel()
			}
			// The slot is given back after the cluster stopped (cleanups run
			// last-registered first).
			slots <- struct{}{}
			t.Cleanup(func() { <-slots })
			// The first series is first-fit on every topology (the default, auto,
			// would be typed on the per-GPU-type ones: its series is below).
			c := newClusterTopo(t, a, true, pc.topo, func(cfg *config.Config) { cfg.ShardPinning = config.PinFirstFit })
			// What the plugin should conclude from this cluster's files.
			sc, err := slurmconf.LoadWithGres(c.path("slurm.conf"))
			if err != nil {
				t.Fatal(err)
			}
			safeWhy := sc.CheckSteering(slurmconf.FirstFit)

			// Slurm alone (untagged requests pass the plugin untouched).
			for _, rule := range []struct {
				name  string
				typed bool
			}{{"first-fit", false}, {"typed", true}} {
				if rule.typed && !pc.topo.typed {
					continue
				}
				started, landed := 0, 0
				for seed := int64(1); seed <= 2; seed++ {
					s, l := measureSlurmPick(t, c, rule.typed, seed, 7)
					started += s
					landed += l
					c.waitNoJobs(60 * time.Second)
				}
				line := fmt.Sprintf("slurm=%s topology=%q rule=%s requests=%d as_predicted=%d",
					a.slurm.version, pc.topo, rule.name, started, landed)
				t.Log(line)
				report(t, line)
				if started == 0 {
					t.Errorf("%s: no request started", rule.name)
				}
				relied := rule.typed || safeWhy == nil
				if relied && landed != started {
					t.Errorf("%s rule, which the plugin relies on here: %d of %d requests landed where predicted", rule.name, landed, started)
				}
			}

			// The plugin's own placements, each checked against Slurm's allocation.
			pluginSeries(t, c, 10)
			c.reportPins("first-fit")
			n := c.countLog("job_submit/coscheml", "SAFE MODE")
			if safeWhy != nil {
				// First-fit steering is impossible here: the plugin says so once at
				// start and pins nothing.
				if n != 1 {
					t.Errorf("want the SAFE MODE line once in slurmctld's log (%v), found %d", safeWhy, n)
				} else {
					t.Logf("start-up: %s", c.lastLogLine("SAFE MODE"))
				}
				if c.pins.checked != 0 {
					t.Errorf("safe mode: %d placements were pinned to a GPU", c.pins.checked)
				}
			} else {
				if n != 0 {
					t.Errorf("SAFE MODE where first-fit pinning works: %s", c.lastLogLine("SAFE MODE"))
				}
				if c.pins.checked == 0 {
					t.Errorf("no placement was pinned: the check proves nothing")
				}
			}

			// With per-GPU types, the default shard_pinning auto resolves to the
			// typed mode, which names the GPU in the request: it must pin on every
			// topology, safe mode never, and say what auto chose at start.
			if pc.topo.typed {
				before := c.countLog("job_submit/coscheml", "SAFE MODE")
				autoBefore := c.countLog("job_submit/coscheml", "shard_pinning auto: typed")
				cfg := c.cfg
				cfg.ShardPinning = config.Default().ShardPinning
				cfg.ShardTypePrefix = "g"
				c.writeConfig(cfg)
				c.restartCtld()
				if n := c.countLog("job_submit/coscheml", "shard_pinning auto: typed") - autoBefore; n != 1 {
					t.Errorf("shard_pinning %s on per-GPU types: want one start line \"shard_pinning auto: typed\", found %d", cfg.ShardPinning, n)
				}
				c.pins = tally{}
				pluginSeries(t, c, 10)
				c.reportPins("typed")
				if n := c.countLog("job_submit/coscheml", "SAFE MODE") - before; n != 0 {
					t.Errorf("typed mode on per-GPU types went to safe mode: %s", c.lastLogLine("SAFE MODE"))
				}
				if c.pins.checked == 0 {
					t.Errorf("typed mode pinned no placement: the check proves nothing")
				}
			}
		})
	}
}

// pinningParallel is how many of TestPinning's clusters run at once:
// COSCHEML_PINNING_PARALLEL (default 1, one after the other). Each cluster is
// independent (own folder, ports, daemons); the suite's time is mostly waiting
// for Slurm, so two at a time roughly halve TestPinning on two cores. go test's
// -parallel (default GOMAXPROCS) caps it too.
func pinningParallel(t *testing.T) int {
	v := os.Getenv("COSCHEML_PINNING_PARALLEL")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("COSCHEML_PINNING_PARALLEL=%q: want a whole number >= 1", v)
	}
	return n
}

// pluginSeries submits n tagged single-GPU jobs of random Lucid setups, one at a
// time, each running before the next (so the plugin sees it in the residency
// store), checking each placement.
func pluginSeries(t *testing.T, c *cluster, n int) {
	tags := lucidTags(t, c.a.repo)
	rng := rand.New(rand.NewSource(42))
	var ids []int
	defer func() {
		c.cancel(ids...)
		c.waitNoJobs(60 * time.Second)
	}()
	for k := 0; k < n; k++ {
		tag := tags[rng.Intn(len(tags))]
		j, ok := c.startSoft([]string{"--gres=gpu:1", "--comment=coscheml:app=" + tag}, 20*time.Second)
		if !ok {
			t.Logf("tagged job %d (%s) still pending (%s): the plugin queued it", j.ID, tag, j.Reason)
			continue
		}
		ids = append(ids, j.ID)
		c.checkPlacement(j)
		time.Sleep(residencySettle)
	}
}

// lucidProfiles reads the Lucid solo profiles the cluster imports.
func lucidProfiles(t *testing.T, repo string) []*profile.Profile {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, lucidSolo))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := profile.ReadLucidSolo(f)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// lucidTags lists the tags of the Lucid solo profiles the cluster imports, sorted.
func lucidTags(t *testing.T, repo string) []string {
	t.Helper()
	ps := lucidProfiles(t, repo)
	tags := make([]string, 0, len(ps))
	for _, p := range ps {
		tags = append(tags, p.Tag)
	}
	sort.Strings(tags)
	return tags
}
