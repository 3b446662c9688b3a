// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/sim"
	"github.com/coscheml/coscheml/pkg/submit"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// choice is where one path put one job: node name, GPU index, slots (Slurm shards).
type choice struct {
	node        string
	gpu, shards int
}

// TestPathsAgree submits the same jobs one after the other to the three decision
// paths, each keeping its own cluster state (the plugin's engine its reservations,
// the simulator its running jobs, place --dry-run a state file rewritten after
// each decision), and checks that they choose the same node, GPU and shard count
// every time, under both shard pinning modes.
func TestPathsAgree(t *testing.T) {
	cat, err := embeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	// A fixed mix of heavy and light applications from the shipped catalog, so
	// decisions share, open idle GPUs and (first-fit) steer shard counts.
	tags := []string{"resnet18-bs128", "dcgan-bs128", "ppo-bs64", "pointnet-bs32-amp", "neumf-bs64-amp",
		"mobilenetv3-bs64", "resnet18-bs32", "ppo-bs64", "pointnet-bs32-amp", "neumf-bs64-amp"}
	for _, tag := range tags {
		if cat[tag] == nil {
			t.Fatalf("tag %s not in the embedded catalog", tag)
		}
	}
	for _, pin := range []string{config.PinFirstFit, config.PinTyped} {
		t.Run(pin, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "coscheml.yaml")
			y := fmt.Sprintf("profile_dir: %s\nresidency_dir: %s\ndecision_log: \"\"\ndecision_key: \"\"\nshard_pinning: %s\n"+
				"cluster:\n  nodes: n[1-2]\n  gpus_per_node: 4\n  gpu_memory_mib: 32768\n",
				filepath.Join(dir, "no-profiles"), filepath.Join(dir, "residency"), pin)
			if err := os.MkdirAll(filepath.Join(dir, "residency"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			plugin := pluginPath(t, cfgPath, cat, tags, pin, cfg.ShardTypePrefix)
			placed := placePath(t, dir, cfgPath, cfg, tags)
			simulated := simPath(t, cfg, tags)
			if len(plugin) < 6 {
				t.Fatalf("only %d of %d jobs placed by the plugin before one waited: too few to compare", len(plugin), len(tags))
			}
			t.Logf("plugin %v", plugin)
			shared, steered := false, false
			for i, want := range plugin {
				if i >= len(placed) || i >= len(simulated) {
					t.Fatalf("job %d (%s): plugin %+v; place chose %d jobs, the simulator %d", i, tags[i], want, len(placed), len(simulated))
				}
				if placed[i] != want || simulated[i] != want {
					t.Fatalf("job %d (%s): plugin %+v, place --dry-run %+v, simulator %+v", i, tags[i], want, placed[i], simulated[i])
				}
				steered = steered || want.shards != cfg.SlotsPerGPU/cfg.MaxCoRunners
				for _, o := range plugin[:i] {
					shared = shared || (o.node == want.node && o.gpu == want.gpu)
				}
			}
			// The sequence must exercise what differs between the paths' old code.
			if !shared {
				t.Errorf("no job shared a GPU: the sequence does not test sharing")
			}
			if pin == config.PinFirstFit && !steered {
				t.Errorf("first-fit: no shard count was steered: the sequence does not test reachability")
			}
		})
	}
}

var logChoiceRE = regexp.MustCompile(`node=(\S+) gpu=(\d+) shards=(\d+)`)

// pluginPath decides through the slurmctld library's engine (its reservations hold
// the earlier decisions) until the first job that waits.
func pluginPath(t *testing.T, cfgPath string, cat profile.Catalog, tags []string, pin, prefix string) []choice {
	src := submit.DefaultSources(cfgPath)
	src.LoadCatalog = func(string, int) (profile.Catalog, []error, error) { return cat, nil, nil }
	e := submit.New(src, submit.Options{})
	defer e.Close()
	if p := e.Problems(); len(p) > 0 {
		t.Fatalf("engine problems: %v", p)
	}
	var out []choice
	for i, tag := range tags {
		r := e.Decide(submit.JobFields{Comment: "coscheml:app=" + tag, TresPerNode: "gres:gpu:1", MinNodes: 1, MaxNodes: 1, JobID: submit.NoVal})
		if r.Code != submit.Rewrite {
			t.Fatalf("job %d: %+v", i, r)
		}
		if r.ReqNodes == "" { // waits: queued for a whole GPU, not pinned
			break
		}
		m := logChoiceRE.FindStringSubmatch(r.Line)
		if m == nil {
			t.Fatalf("job %d: no choice in the decision line %q (log %q)", i, r.Line, r.Log)
		}
		g, _ := strconv.Atoi(m[2])
		k, _ := strconv.Atoi(m[3])
		want := "gres:shard:" + strconv.Itoa(k)
		if pin == config.PinTyped {
			want = "gres:shard:" + submit.TypeName(prefix, g) + ":" + strconv.Itoa(k)
		}
		if m[1] != r.ReqNodes || r.TresPerNode != want {
			t.Fatalf("job %d: rewrite %q on %q does not name the logged choice %v (want %q)", i, r.TresPerNode, r.ReqNodes, m[1:], want)
		}
		out = append(out, choice{m[1], g, k})
	}
	return out
}

// agreeState is place's state file format.
type agreeState struct {
	Nodes []agreeNode `json:"nodes"`
}

type agreeNode struct {
	Name string     `json:"name"`
	GPUs []agreeGPU `json:"gpus"`
}

type agreeGPU struct {
	Index     int             `json:"index"`
	Residents []agreeResident `json:"residents"`
}

type agreeResident struct {
	Job   string `json:"job"`
	Tag   string `json:"tag"`
	Slots int    `json:"slots"`
}

// placePath runs `coscheml place --dry-run` for each job on a state file holding
// the jobs it placed before (JSON is YAML).
func placePath(t *testing.T, dir, cfgPath string, cfg config.Config, tags []string) []choice {
	st := agreeState{}
	for _, n := range []string{"n1", "n2"} {
		sn := agreeNode{Name: n}
		for g := 0; g < 4; g++ {
			sn.GPUs = append(sn.GPUs, agreeGPU{Index: g, Residents: []agreeResident{}})
		}
		st.Nodes = append(st.Nodes, sn)
	}
	statePath := filepath.Join(dir, "state.yaml")
	var out []choice
	for i, tag := range tags {
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(statePath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{"coscheml", "--config", cfgPath, "place", "--dry-run", "--json", "--state", statePath, "--tag", tag}, &stdout, &stderr); code != exitOK {
			t.Fatalf("place job %d: exit %d: %s", i, code, stderr.String())
		}
		var po placeOut
		if err := json.Unmarshal(stdout.Bytes(), &po); err != nil {
			t.Fatalf("place job %d: %v", i, err)
		}
		if po.Action == "wait" || len(po.Placement) != 1 {
			break
		}
		p := po.Placement[0]
		out = append(out, choice{p.Node, p.GPU, p.Slots})
		// place shows the rewrite the plugin makes; the plugin path checks its own.
		want := "gres:shard:" + strconv.Itoa(p.Slots)
		if cfg.ShardPinning == config.PinTyped {
			want = "gres:shard:" + submit.TypeName(cfg.ShardTypePrefix, p.GPU) + ":" + strconv.Itoa(p.Slots)
		}
		if po.Slurm == nil || po.Slurm.TresPerNode != want || po.Slurm.ReqNodes != p.Node {
			t.Fatalf("place job %d: slurm rewrite %+v, want %s on %s", i, po.Slurm, want, p.Node)
		}
		ni := slices.IndexFunc(st.Nodes, func(n agreeNode) bool { return n.Name == p.Node })
		gpu := &st.Nodes[ni].GPUs[p.GPU]
		gpu.Residents = append(gpu.Residents, agreeResident{Job: strconv.Itoa(1000 + i), Tag: tag, Slots: p.Slots})
	}
	return out
}

// simPath runs the simulator on the same jobs, submitted one second apart and
// running far longer than the test's horizon, and records where each started.
func simPath(t *testing.T, cfg config.Config, tags []string) []choice {
	tt, err := truth.FromLucid(models.DefaultSoloCSV, models.DefaultPairsCSV)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := placeconf.Policy(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []trace.Job
	for i, tag := range tags {
		ti, ok := tt.Index(tag)
		if !ok {
			t.Fatalf("tag %s not in the truth table", tag)
		}
		jobs = append(jobs, trace.Job{ID: strconv.Itoa(i), Submit: float64(i), Duration: 1e9, GPUs: 1, Tag: tag, Class: tt.Profile(ti).Class})
	}
	got := map[int]choice{}
	scfg := sim.Config{Nodes: 2, GPUsPerNode: 4, GPUMemMiB: cfg.Cluster.GPUMemoryMiB, Slots: cfg.SlotsPerGPU,
		Reach: placeconf.Reach(cfg), BackfillDepth: -1,
		OnStart: func(id string, d placement.Decision) {
			i, _ := strconv.Atoi(id)
			s := d.Placement[0]
			got[i] = choice{fmt.Sprintf("n%d", s.Node+1), s.GPU, s.Slots}
		}}
	if _, err := sim.Run(scfg, jobs, tt, pol); err != nil {
		t.Fatal(err)
	}
	var out []choice
	for i := range tags {
		c, ok := got[i]
		if !ok || c.node == "" || strings.HasPrefix(c.node, "n0") {
			break
		}
		out = append(out, c)
	}
	return out
}
