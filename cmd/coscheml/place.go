// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safeopen"
	"github.com/coscheml/coscheml/pkg/submit"
	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

func placeCommand() *cli.Command {
	return &cli.Command{
		Name:  "place",
		Usage: "show where a job would go on a cluster state read from a file",
		Description: "Runs the placement policy that slurmctld runs (through libcoscheml) on a\n" +
			"hand-written cluster state and prints the chosen node/GPU, the action\n" +
			"(share, exclusive or wait) and the policy's reason. Nothing is changed.\n\n" +
			"The state file (YAML) lists nodes, their GPUs and the tagged jobs on them:\n\n" +
			"   nodes:\n" +
			"     - name: n1\n" +
			"       model: \"NVIDIA A100-SXM4-40GB\"  # default: its cluster.groups entry's gpu_model\n" +
			"       features: [a100]        # default: its group's feature and gres_type\n" +
			"       gpus:\n" +
			"         - index: 0            # default: position in the list\n" +
			"           memory_mib: 24576   # default: the node's group's gpu_memory_mib\n" +
			"           slots: 4            # default: config slots_per_gpu\n" +
			"           residents:\n" +
			"             - job: \"1001\"\n" +
			"               tag: pointnet-bs32-amp\n" +
			"               class: train    # default: the profile's class\n" +
			"               slots: 2        # default: slots / max_corunners\n" +
			"               # exclusive: true   holds every slot of the GPU\n\n" +
			"Examples (see etc/examples/ and docs/cli.md):\n" +
			"   coscheml place --dry-run --state etc/examples/share-light.yaml --tag neumf-bs64-amp\n" +
			"   coscheml place --dry-run --state etc/examples/infer-floor.yaml --tag resnet18-bs32 --json\n" +
			"   coscheml place --dry-run --state s.yaml --tag dcgan-bs128 --policy blind\n" +
			"   coscheml place --dry-run --state etc/examples/hetero-state.yaml --tag dcgan-bs128 --constraint h100\n\n" +
			"A \"wait\" decision is an answer, not an error: exit 0. Exit codes: 2 bad\n" +
			"flags or state file, 3 state file missing or a tag without a profile.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "decide only (required: real jobs are placed by slurmctld)"},
			&cli.StringFlag{Name: "state", Usage: "cluster state `FILE` (YAML)"},
			&cli.StringFlag{Name: "tag", Usage: "application `TAG` of the new job"},
			&cli.StringFlag{Name: "class", Usage: "job class hpc|train|infer (default: the profile's class)"},
			&cli.IntFlag{Name: "gpus", Value: 1, Usage: "GPUs the job wants"},
			&cli.StringFlag{Name: "gpu-model", Usage: "GPU `MODEL` the job must run on (a node's model, as NVML names it)"},
			&cli.StringSliceFlag{Name: "constraint", Usage: "node `FEATURE` the job asks for (--constraint; repeat for several, all required)"},
			&cli.StringFlag{Name: "policy", Usage: "placement policy `NAME`: " + strings.Join(config.Policies, ", ") + " (default: the config's policy)"},
			&cli.StringFlag{Name: "job-id", Value: "new", Usage: "job `ID` to show in the reason"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
		},
		Action: runPlace,
	}
}

// placeOut is place's result.
type placeOut struct {
	Policy           string     `json:"policy"`
	Job              string     `json:"job"`
	Tag              string     `json:"tag"`
	Class            string     `json:"class"`
	GPUs             int        `json:"gpus"`
	Action           string     `json:"action"` // share | exclusive | wait
	Placement        []placeGPU `json:"placement"`
	PredictedSpeed   float64    `json:"predicted_speed"`
	MinResidentSpeed float64    `json:"min_resident_speed"`
	Reason           string     `json:"reason"`
	// ModelView is the model's prediction for every job on the chosen GPUs, shown
	// for every policy: for a baseline it is what its choice costs.
	ModelView []modelSpeed `json:"model_view,omitempty"`
	// Slurm is the rewrite the plugin makes for this single-GPU placement of a job
	// submitted with --gres=gpu:1 (22.05 syntax), under the config's shard_pinning.
	Slurm *slurmRewrite `json:"slurm,omitempty"`
}

type slurmRewrite struct {
	TresPerNode  string `json:"tres_per_node"`
	ReqNodes     string `json:"req_nodes"`
	ShardPinning string `json:"shard_pinning"`
}

type modelSpeed struct {
	Job   string  `json:"job"`
	Tag   string  `json:"tag"`
	Node  string  `json:"node"`
	GPU   int     `json:"gpu"`
	Speed float64 `json:"speed"`
	Floor float64 `json:"floor"`
}

type placeGPU struct {
	Node  string `json:"node"`
	GPU   int    `json:"gpu"`
	Slots int    `json:"slots"`
	// Of the GPU at decision time: its slots, and the jobs the new one joins.
	GPUSlots  int      `json:"gpu_slots"`
	Residents []string `json:"residents"`
}

var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func runPlace(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("place: unexpected argument %q (flags go before arguments; see coscheml place --help)", sanitize(c.Args().First()))
	}
	if !c.Bool("dry-run") {
		return usageErrorf("place: only --dry-run is supported: real jobs are placed by slurmctld's job_submit/coscheml")
	}
	statePath, tag := c.String("state"), c.String("tag")
	if statePath == "" {
		return usageErrorf("place: --state FILE is required")
	}
	if tag == "" {
		return usageErrorf("place: --tag TAG is required")
	}
	if c.Int("gpus") < 1 || c.Int("gpus") > 1024 {
		return usageErrorf("place: --gpus %d: want 1..1024", c.Int("gpus"))
	}
	jobID := c.String("job-id")
	if !jobIDRE.MatchString(jobID) {
		return usageErrorf("place: --job-id %q: want 1-64 of A-Z a-z 0-9 . _ -", sanitize(jobID))
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	policyName := c.String("policy")
	if policyName == "" {
		policyName = cfg.Policy
	}
	if !slices.Contains(config.Policies, policyName) {
		return usageErrorf("place: --policy %q: want one of %s (the oracle needs measured truth: see coscheml simulate)",
			sanitize(policyName), strings.Join(config.Policies, ", "))
	}
	cat, err := loadCatalog(c)
	if err != nil {
		return err
	}
	p, err := lookupTag(cat, tag)
	if err != nil {
		return fmt.Errorf("place: --tag: %w", err)
	}
	class := p.Class
	if s := c.String("class"); s != "" {
		if class, err = profile.ParseClass(s); err != nil {
			return &usageError{msg: "place: --class: " + err.Error()}
		}
	}
	// An admin names the state file: a link is fine, a FIFO must not hang the CLI.
	data, err := safeopen.ReadLimited(statePath, safeopen.FollowLinks, maxStateBytes)
	if err != nil {
		return fmt.Errorf("place: state: %w", err)
	}
	cluster, err := parseState(data, cat, cfg)
	if err != nil {
		var nf *notFoundError
		if errors.As(err, &nf) || errors.Is(err, profile.ErrNotFound) {
			return fmt.Errorf("place: state %s: %w", statePath, err)
		}
		return &usageError{msg: fmt.Sprintf("place: state %s: %v", statePath, err)}
	}
	m, err := loadModel(c)
	if err != nil {
		return err
	}
	pol, err := placeconf.PolicyNamed(policyName, cfg, m)
	if err != nil {
		return fmt.Errorf("place: %w", err)
	}
	req := &placement.Request{JobID: jobID, Tag: p.Tag, Profile: p, Class: class, GPUs: c.Int("gpus"),
		Model: c.String("gpu-model"), Features: c.StringSlice("constraint")}
	d := pol.Place(cluster, req)

	out := placeOut{
		Policy: pol.Name(), Job: jobID, Tag: p.Tag, Class: string(class), GPUs: req.GPUs,
		Action: d.Action.String(), Placement: []placeGPU{},
		PredictedSpeed: d.PredictedSpeed, MinResidentSpeed: d.MinResidentSpeed, Reason: d.Reason,
	}
	for _, s := range d.Placement {
		n := &cluster.Nodes[s.Node]
		g := &n.GPUs[s.GPU]
		pg := placeGPU{Node: n.Name, GPU: g.Index, Slots: s.Slots, GPUSlots: g.Slots, Residents: []string{}}
		for _, r := range g.Residents {
			pg.Residents = append(pg.Residents, r.JobID)
		}
		out.Placement = append(out.Placement, pg)
		if len(g.Residents) == 0 {
			continue
		}
		// The model's view of this GPU with the new job on it.
		all := []placement.Resident{{JobID: jobID, Profile: p, Class: class}}
		all = append(all, g.Residents...)
		for i, r := range all {
			var co []*profile.Profile
			for j, o := range all {
				if j != i {
					co = append(co, o.Profile)
				}
			}
			out.ModelView = append(out.ModelView, modelSpeed{Job: r.JobID, Tag: r.Profile.Tag, Node: n.Name, GPU: g.Index,
				Speed: m.PredictSpeed(r.Profile, co), Floor: cfg.SpeedFloor.Floor(string(r.Class))})
		}
	}
	if len(d.Placement) == 1 && req.GPUs == 1 {
		s := d.Placement[0]
		n := &cluster.Nodes[s.Node]
		g, _ := submit.ParseTres("gres:gpu:1")
		rw := &slurmRewrite{TresPerNode: g.WithShards(s.Slots), ReqNodes: n.Name, ShardPinning: cluster.Reach.String()}
		if cluster.Reach == placement.ReachTyped {
			rw.TresPerNode = g.WithTypedShards(submit.TypeName(cfg.ShardTypePrefix, n.GPUs[s.GPU].Index), s.Slots, 0)
		}
		out.Slurm = rw
	}
	return printPlace(c.App.Writer, out, c.Bool("json"))
}

func printPlace(w io.Writer, out placeOut, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	gpus := "1 GPU"
	if out.GPUs != 1 {
		gpus = fmt.Sprintf("%d GPUs", out.GPUs)
	}
	fmt.Fprintf(w, "job %s (%s, class %s, %s) under policy %s:\n", out.Job, out.Tag, out.Class, gpus, out.Policy)
	switch out.Action {
	case "wait":
		fmt.Fprintln(w, "  decision: WAIT: no acceptable GPU now; the job stays queued")
	default:
		fmt.Fprintf(w, "  decision: %s\n", decisionWords(out.Action, out.Placement))
		for _, g := range out.Placement {
			with := "idle GPU"
			if len(g.Residents) > 0 {
				with = "shared with job " + strings.Join(g.Residents, ", job ")
			}
			fmt.Fprintf(w, "  %s GPU %d: %s (takes %d of %d slots)\n", g.Node, g.GPU, with, g.Slots, g.GPUSlots)
		}
		for _, v := range out.ModelView {
			verdict := "ok"
			if v.Speed < v.Floor {
				verdict = "BELOW FLOOR"
			}
			fmt.Fprintf(w, "  model: job %s (%s) on %s GPU %d: speed %.3f, floor %.2f: %s\n", v.Job, v.Tag, v.Node, v.GPU, v.Speed, v.Floor, verdict)
		}
		if out.Slurm != nil {
			fmt.Fprintf(w, "  slurm: tres_per_node=%s req_nodes=%s (shard_pinning %s)\n", out.Slurm.TresPerNode, out.Slurm.ReqNodes, out.Slurm.ShardPinning)
		}
	}
	_, err := fmt.Fprintf(w, "  reason: %s\n", out.Reason)
	return err
}

// maxStateBytes bounds a state file: 1,000 nodes x 8 GPUs x 4 residents is ~3 MB.
const maxStateBytes = 64 << 20

// The state file's schema. Pointers tell "absent" (take the default) from zero.
type stateFile struct {
	Nodes []stateNode `yaml:"nodes"`
}

type stateNode struct {
	Name     string     `yaml:"name"`
	Model    *string    `yaml:"model"`
	Features []string   `yaml:"features"`
	GPUs     []stateGPU `yaml:"gpus"`
}

type stateGPU struct {
	Index     *int            `yaml:"index"`
	MemoryMiB *float64        `yaml:"memory_mib"`
	Slots     *int            `yaml:"slots"`
	Residents []stateResident `yaml:"residents"`
}

type stateResident struct {
	Job       string `yaml:"job"`
	Tag       string `yaml:"tag"`
	Class     string `yaml:"class"`
	Slots     *int   `yaml:"slots"`
	Exclusive bool   `yaml:"exclusive"`
}

// parseState decodes a cluster state file strictly (unknown keys are errors, with
// their line) and resolves every resident's tag in cat. Tags without a profile are
// notFoundErrors; everything else wrong is a plain error naming node, GPU and job.
func parseState(data []byte, cat profile.Catalog, cfg config.Config) (*placement.Cluster, error) {
	var sf stateFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&sf); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty state file: want a 'nodes:' list")
		}
		return nil, fmt.Errorf("YAML: %s", sanitizeMultiline(err.Error()))
	}
	if len(sf.Nodes) == 0 {
		return nil, errors.New("no nodes: want a 'nodes:' list with at least one node")
	}
	const maxNodes, maxGPUs = 100000, 64
	if len(sf.Nodes) > maxNodes {
		return nil, fmt.Errorf("%d nodes: at most %d", len(sf.Nodes), maxNodes)
	}
	c := &placement.Cluster{Nodes: make([]placement.Node, len(sf.Nodes))}
	names := map[string]bool{}
	// A node of the configured inventory takes its group's model, features and
	// GPU memory unless the state file says otherwise.
	shapes := map[string]placement.Node{}
	if inv, err := placeconf.Nodes(cfg); err == nil {
		for _, n := range inv {
			shapes[n.Name] = n
		}
	}
	for ni, sn := range sf.Nodes {
		if !hostlist.ValidName(sn.Name) {
			return nil, fmt.Errorf("nodes[%d]: name %q: want a host name (letters, digits, '-', '_', '.')", ni, sanitize(sn.Name))
		}
		if names[sn.Name] {
			return nil, fmt.Errorf("node %q listed twice", sn.Name)
		}
		names[sn.Name] = true
		if len(sn.GPUs) == 0 || len(sn.GPUs) > maxGPUs {
			return nil, fmt.Errorf("node %q: %d GPUs: want 1..%d", sn.Name, len(sn.GPUs), maxGPUs)
		}
		shape := shapes[sn.Name]
		node := placement.Node{Name: sn.Name, GPUs: make([]placement.GPU, len(sn.GPUs)), Model: shape.Model, Features: shape.Features}
		if sn.Model != nil {
			node.Model = *sn.Model
		}
		if sn.Features != nil {
			node.Features = sn.Features
		}
		if len(node.Model) > 96 || sanitize(node.Model) != node.Model {
			return nil, fmt.Errorf("node %q: model %q: want printable characters, at most 96", sn.Name, sanitize(node.Model))
		}
		for _, f := range node.Features {
			if !featureRE.MatchString(f) {
				return nil, fmt.Errorf("node %q: feature %q: want 1-64 of A-Z a-z 0-9 . _ -", sn.Name, sanitize(f))
			}
		}
		memDefault := cfg.Cluster.GPUMemoryMiB
		if len(shape.GPUs) > 0 {
			memDefault = shape.GPUs[0].MemMiB
		}
		indexes := map[int]bool{}
		for gi, sg := range sn.GPUs {
			g, err := stateGPUOf(sg, gi, cat, cfg, memDefault)
			if err != nil {
				return nil, fmt.Errorf("node %q gpus[%d]: %w", sn.Name, gi, err)
			}
			if indexes[g.Index] {
				return nil, fmt.Errorf("node %q: GPU index %d listed twice", sn.Name, g.Index)
			}
			indexes[g.Index] = true
			node.GPUs[gi] = g
		}
		c.Nodes[ni] = node
	}
	// Slurm's first-fit shard choice goes by GPU index: keep each node's GPUs in
	// index order, and model the configured pinning as the plugin does.
	for n := range c.Nodes {
		slices.SortFunc(c.Nodes[n].GPUs, func(a, b placement.GPU) int { return a.Index - b.Index })
	}
	c.Reach = placeconf.ModelReach(cfg)
	c.Reindex()
	return c, nil
}

// featureRE is a node feature in a state file (Slurm's feature alphabet).
var featureRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func stateGPUOf(sg stateGPU, pos int, cat profile.Catalog, cfg config.Config, memDefault float64) (placement.GPU, error) {
	g := placement.GPU{Index: pos, MemMiB: memDefault, Slots: cfg.SlotsPerGPU}
	if sg.Index != nil {
		g.Index = *sg.Index
	}
	if sg.MemoryMiB != nil {
		g.MemMiB = *sg.MemoryMiB
	}
	if sg.Slots != nil {
		g.Slots = *sg.Slots
	}
	switch {
	case g.Index < 0 || g.Index > 1023:
		return g, fmt.Errorf("index %d: want 0..1023", g.Index)
	case !(g.MemMiB > 0 && g.MemMiB <= 16<<20):
		return g, fmt.Errorf("GPU %d: memory_mib %v: want 1..16777216 (set it here, or the node's memory in the config's cluster section)", g.Index, g.MemMiB)
	case g.Slots < 1 || g.Slots > 1024:
		return g, fmt.Errorf("GPU %d: slots %d: want 1..1024", g.Index, g.Slots)
	}
	shareSlots := max(g.Slots/max(cfg.MaxCoRunners, 1), 1)
	used := 0
	jobs := map[string]bool{}
	for ri, sr := range sg.Residents {
		if !jobIDRE.MatchString(sr.Job) {
			return g, fmt.Errorf("GPU %d residents[%d]: job %q: want 1-64 of A-Z a-z 0-9 . _ -", g.Index, ri, sanitize(sr.Job))
		}
		where := fmt.Sprintf("GPU %d job %s", g.Index, sr.Job)
		if jobs[sr.Job] {
			return g, fmt.Errorf("%s: listed twice on this GPU", where)
		}
		jobs[sr.Job] = true
		if err := profile.ValidateTag(sr.Tag); err != nil {
			return g, fmt.Errorf("%s: %w", where, err)
		}
		p, err := cat.Get(sr.Tag)
		if err != nil {
			return g, fmt.Errorf("%s: %w", where, err)
		}
		class := p.Class
		if sr.Class != "" {
			if class, err = profile.ParseClass(sr.Class); err != nil {
				return g, fmt.Errorf("%s: %w", where, err)
			}
		}
		slots := shareSlots
		switch {
		case sr.Exclusive && sr.Slots != nil:
			return g, fmt.Errorf("%s: give slots or exclusive, not both", where)
		case sr.Exclusive:
			slots = g.Slots
		case sr.Slots != nil:
			slots = *sr.Slots
		}
		if slots < 1 || slots > g.Slots {
			return g, fmt.Errorf("%s: slots %d: want 1..%d", where, slots, g.Slots)
		}
		if used += slots; used > g.Slots {
			return g, fmt.Errorf("%s: residents hold %d slots, the GPU has %d", where, used, g.Slots)
		}
		g.Residents = append(g.Residents, placement.Resident{JobID: sr.Job, Profile: p, Class: class, Slots: slots})
	}
	return g, nil
}

// sanitizeMultiline sanitizes each line of a (yaml.v3) message and joins them.
func sanitizeMultiline(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = sanitize(strings.TrimSpace(l))
	}
	return strings.Join(lines, "; ")
}
