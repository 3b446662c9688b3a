// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

func predictCommand() *cli.Command {
	return &cli.Command{
		Name:      "predict",
		Usage:     "predict how fast applications run when they share one GPU",
		ArgsUsage: "TAG TAG [TAG...]",
		Description: "Prints, for each application, its predicted speed (1.0 = as fast as alone;\n" +
			"for class infer, solo latency / shared latency) next to the others on one\n" +
			"GPU, the lower bound the placement tests (the model's calibrated margin at\n" +
			"floor_confidence) and its class's floor (speed_floor in the configuration).\n" +
			"The verdict is the coscheml placement's own test: every lower bound at its\n" +
			"floor, max_corunners, slots and memory fit (cluster.gpu_memory_mib, else\n" +
			"32768 MiB). Profiles come from the config's profile_dir, or the embedded\n" +
			"Lucid catalog when that is empty.\n\n" +
			"Examples:\n" +
			"   coscheml predict pointnet-bs32-amp neumf-bs64-amp\n" +
			"   coscheml predict resnet50-bs64 dcgan-bs128 --explain\n" +
			"   coscheml predict --class infer mobilenetv3-bs64 resnet18-bs32\n" +
			"   coscheml --model ./my.model predict resnet18-bs32 ppo-bs64 --json\n\n" +
			"Exit codes: 0 ok, 2 bad arguments or invalid tag, 3 a tag has no profile.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "explain", Usage: "summarize why: the forest's average and spread, the features its paths split on most, one representative path"},
			&cli.BoolFlag{Name: "explain-full", Usage: "print every tree's decision path (long: one line per split)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
			&cli.StringFlag{Name: "class", Usage: "class hpc|train|infer of the first TAG's job (default: its profile's class); the others keep their profiles'"},
		},
		Action: runPredict,
	}
}

// predictionOut is one line of predict's output.
type predictionOut struct {
	Tag       string   `json:"tag"`
	Class     string   `json:"class"`
	CoRunners []string `json:"co_runners"`
	// Speed is the point prediction (for class infer, solo latency / shared
	// latency: the infer floor bounds latency).
	Speed float64 `json:"speed"`
	// LowerBound is what the placement tests against Floor: the model's
	// calibrated lower bound at the coverage it uses for that floor.
	LowerBound float64  `json:"lower_bound"`
	Floor      float64  `json:"floor"`
	AboveFloor bool     `json:"above_floor"` // LowerBound >= Floor
	Explain    []string `json:"explain,omitempty"`
}

type predictOut struct {
	Model       string          `json:"model"`
	Predictions []predictionOut `json:"predictions"`
	// Share is the placement's verdict: the coscheml policy would let the
	// first job join the others on one GPU (the floors at each job's lower
	// bound, the co-runner limit, slots and memory fit).
	Share bool `json:"share"`
	// Why Share is false.
	Reason string `json:"reason,omitempty"`
	// GPUMemMiB is the GPU memory the fit was tested on.
	GPUMemMiB float64 `json:"gpu_memory_mib"`
}

// defaultPredictGPUMemMiB is the GPU memory predict tests the fit on when the
// configuration names none (the simulator's default GPU).
const defaultPredictGPUMemMiB = 32768

func runPredict(c *cli.Context) error {
	explain, full, asJSON := c.Bool("explain"), c.Bool("explain-full"), c.Bool("json")
	// urfave/cli stops at the first argument, so accept the flags after the tags
	// too: "predict A B --json" is what people type.
	className := c.String("class")
	var tags []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if v, ok := strings.CutPrefix(strings.TrimPrefix(a, "-"), "-class="); ok {
			className = v
			continue
		}
		switch a {
		case "--class", "-class":
			if i+1 >= len(args) {
				return usageErrorf("predict: --class needs a value: hpc, train or infer")
			}
			i++
			className = args[i]
		case "--json", "-json":
			asJSON = true
		case "--explain", "-explain":
			explain = true
		case "--explain-full", "-explain-full":
			full = true
		default:
			if strings.HasPrefix(a, "-") {
				return usageErrorf("predict: unknown flag %q (see coscheml predict --help)", sanitize(a))
			}
			tags = append(tags, a)
		}
	}
	if len(tags) < 2 {
		return usageErrorf("predict: want at least two tags, got %d (see coscheml predict --help)", len(tags))
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	cat, err := loadCatalog(c)
	if err != nil {
		return err
	}
	profs := make([]*profile.Profile, len(tags))
	for i, t := range tags {
		if profs[i], err = lookupTag(cat, t); err != nil {
			return fmt.Errorf("predict: %w", err)
		}
	}
	classes := make([]profile.Class, len(profs))
	for i, p := range profs {
		classes[i] = p.Class
	}
	if className != "" {
		if classes[0], err = profile.ParseClass(className); err != nil {
			return &usageError{msg: "predict: --class: " + err.Error()}
		}
	}
	m, err := loadModel(c)
	if err != nil {
		return err
	}
	out, err := predictVerdict(cfg, m, profs, classes)
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	out.Model = modelName(modelPath(c, cfg))
	for i := range out.Predictions {
		p, co := profs[i], others(profs, i)
		switch {
		case full:
			out.Predictions[i].Explain = m.Explain(p, co)
		case explain:
			out.Predictions[i].Explain = summarizeExplain(m.Explain(p, co))
		}
	}
	if why := tooManyJobs(len(tags), cfg.MaxCoRunners); why != "" {
		fmt.Fprintln(c.App.ErrWriter, "coscheml: predict: warning:", why)
	}
	w := c.App.Writer
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, p := range out.Predictions {
		fmt.Fprintln(w, predictionLine(p))
		for _, line := range p.Explain {
			fmt.Fprintln(w, "    ", line)
		}
	}
	if explain && !full && len(m.Trees) > 1 {
		fmt.Fprintln(w, "(--explain-full prints every tree's path)")
	}
	if out.Share {
		fmt.Fprintln(w, "verdict: may share one GPU (every job's lower bound clears its floor, and they fit)")
	} else {
		fmt.Fprintln(w, "verdict: keep apart:", out.Reason)
	}
	fmt.Fprintln(w, "model:", out.Model)
	return nil
}

// predictVerdict asks the coscheml policy, configured as the plugin's, whether
// profs[0] may join the others on one GPU, and collects each job's prediction,
// lower bound and floor as the placement tests them: predict's verdict is the
// placement's by construction.
func predictVerdict(cfg config.Config, m model.Predictor, profs []*profile.Profile, classes []profile.Class) (predictOut, error) {
	pol, err := placement.NewCoScheML(m, placeconf.Options(cfg))
	if err != nil {
		return predictOut{}, err
	}
	mem := cfg.Cluster.GPUMemoryMiB
	if mem <= 0 {
		mem = defaultPredictGPUMemMiB
	}
	jobs := make([]placement.Resident, len(profs))
	for i, p := range profs {
		jobs[i] = placement.Resident{JobID: strconv.Itoa(i + 1), Profile: p, Class: classes[i]}
	}
	v := pol.JudgeShare(jobs, mem, cfg.SlotsPerGPU)
	out := predictOut{Share: v.Share, GPUMemMiB: mem}
	var below []string
	for i, b := range v.Jobs {
		var coTags []string
		for _, q := range others(profs, i) {
			coTags = append(coTags, q.Tag)
		}
		po := predictionOut{Tag: profs[i].Tag, Class: string(b.Class), CoRunners: coTags,
			Speed: b.Speed, LowerBound: b.Lower, Floor: b.Floor, AboveFloor: b.Lower >= b.Floor}
		if !po.AboveFloor {
			below = append(below, fmt.Sprintf("%s's lower bound %.3f is below its %s floor %.2f", po.Tag, po.LowerBound, po.Class, po.Floor))
		}
		out.Predictions = append(out.Predictions, po)
	}
	if !out.Share {
		switch why := tooManyJobs(len(profs), cfg.MaxCoRunners); {
		case why != "":
			out.Reason = why
		case len(below) > 0:
			out.Reason = strings.Join(below, "; ")
		default:
			// memory or slots: the placement's own words
			out.Reason = "the placement refuses: " + v.Reason
		}
	}
	return out, nil
}

// others is profs without its i-th.
func others(profs []*profile.Profile, i int) []*profile.Profile {
	co := make([]*profile.Profile, 0, len(profs)-1)
	for j, q := range profs {
		if j != i {
			co = append(co, q)
		}
	}
	return co
}

// predictionLine words one prediction: the speed (for class infer, a latency
// ratio), the lower bound the placement tests and the floor it tests it against.
func predictionLine(p predictionOut) string {
	verdict := "clears"
	if !p.AboveFloor {
		verdict = "BELOW"
	}
	return fmt.Sprintf("%s next to %s: %s; lower bound %.3f, %s its %s floor %.2f",
		p.Tag, strings.Join(p.CoRunners, " + "), speedWords(p.Class, p.Speed), p.LowerBound, verdict, p.Class, p.Floor)
}

// speedWords words a predicted speed; an infer job's floor bounds its latency,
// so its speed is worded as the latency ratio it is.
func speedWords(class string, speed float64) string {
	if class == string(profile.ClassInfer) {
		return fmt.Sprintf("latency speed %.3f (solo latency / shared latency: %s)", speed, latencyWords(speed))
	}
	return fmt.Sprintf("speed %.3f (%s)", speed, slowdown(speed))
}

// latencyWords words a latency speed: "latency 1.14x alone's".
func latencyWords(speed float64) string {
	if !(speed > 0) {
		return "latency unbounded"
	}
	return fmt.Sprintf("latency %.2fx alone's", 1/speed)
}

// tooManyJobs says why n jobs may not share one GPU under max_corunners, or "".
func tooManyJobs(n, maxCoRunners int) string {
	if n <= maxCoRunners {
		return ""
	}
	return fmt.Sprintf("%d jobs on one GPU exceed max_corunners %d in the configuration, so the placement never shares this way "+
		"(and the model was trained on pairs: predictions for more jobs are extrapolations)", n, maxCoRunners)
}

// slowdown words a speed: "12.0% slower than alone".
func slowdown(speed float64) string {
	switch {
	case speed < 1:
		return fmt.Sprintf("%.1f%% slower than alone", (1-speed)*100)
	case speed > 1:
		return fmt.Sprintf("%.1f%% faster than alone", (speed-1)*100)
	}
	return "as fast as alone"
}

// modelName names a model file for output ("" = the embedded default).
func modelName(path string) string {
	switch {
	case path != "":
		return path
	case models.Embedded:
		return "embedded default (models/default.model)"
	default:
		return "default (" + models.ModelPath() + ", coscheml-model-lucid)"
	}
}
