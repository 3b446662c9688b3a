package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

func predictCommand() *cli.Command {
	return &cli.Command{
		Name:      "predict",
		Usage:     "predict how fast applications run when they share one GPU",
		ArgsUsage: "TAG TAG [TAG...]",
		Description: "Prints, for each application, its predicted speed (1.0 = as fast as alone)\n" +
			"next to the others on one GPU, and whether that stays above its class's\n" +
			"speed floor (speed_floor in the configuration). Profiles come from the\n" +
			"config's profile_dir, or the embedded Lucid catalog when that is empty.\n\n" +
			"Examples:\n" +
			"   coscheml predict pointnet-bs32-amp neumf-bs64-amp\n" +
			"   coscheml predict resnet50-bs64 dcgan-bs128 --explain\n" +
			"   coscheml --model ./my.model predict resnet18-bs32 ppo-bs64 --json\n\n" +
			"Exit codes: 0 ok, 2 bad arguments or invalid tag, 3 a tag has no profile.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "explain", Usage: "summarize why: the forest's average and spread, the features its paths split on most, one representative path"},
			&cli.BoolFlag{Name: "explain-full", Usage: "print every tree's decision path (long: one line per split)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
		},
		Action: runPredict,
	}
}

// predictionOut is one line of predict's output.
type predictionOut struct {
	Tag        string   `json:"tag"`
	Class      string   `json:"class"`
	CoRunners  []string `json:"co_runners"`
	Speed      float64  `json:"speed"`
	Floor      float64  `json:"floor"`
	AboveFloor bool     `json:"above_floor"`
	Explain    []string `json:"explain,omitempty"`
}

type predictOut struct {
	Model       string          `json:"model"`
	Predictions []predictionOut `json:"predictions"`
	Share       bool            `json:"share"` // every job stays at or above its floor
	// Why Share is false although every prediction clears its floor (too many jobs).
	Reason string `json:"reason,omitempty"`
}

func runPredict(c *cli.Context) error {
	explain, full, asJSON := c.Bool("explain"), c.Bool("explain-full"), c.Bool("json")
	// urfave/cli stops at the first argument, so accept the flags after the tags
	// too: "predict A B --json" is what people type.
	var tags []string
	for _, a := range c.Args().Slice() {
		switch a {
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
	m, err := loadModel(c)
	if err != nil {
		return err
	}
	out := predictOut{Model: modelName(modelPath(c, cfg)), Share: true}
	co := make([]*profile.Profile, 0, len(profs)-1)
	for i, p := range profs {
		co = co[:0]
		var coTags []string
		for j, q := range profs {
			if j != i {
				co = append(co, q)
				coTags = append(coTags, q.Tag)
			}
		}
		speed := m.PredictSpeed(p, co)
		floor := cfg.SpeedFloor.Floor(string(p.Class))
		po := predictionOut{Tag: p.Tag, Class: string(p.Class), CoRunners: coTags, Speed: speed, Floor: floor, AboveFloor: speed >= floor}
		switch {
		case full:
			po.Explain = m.Explain(p, co)
		case explain:
			po.Explain = summarizeExplain(m.Explain(p, co))
		}
		out.Share = out.Share && po.AboveFloor
		out.Predictions = append(out.Predictions, po)
	}
	if why := tooManyJobs(len(tags), cfg.MaxCoRunners); why != "" {
		out.Share, out.Reason = false, why
		fmt.Fprintln(c.App.ErrWriter, "coscheml: predict: warning:", why)
	}
	w := c.App.Writer
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, p := range out.Predictions {
		verdict := "above"
		if !p.AboveFloor {
			verdict = "BELOW"
		}
		fmt.Fprintf(w, "%s next to %s: speed %.3f (%s), %s its %s floor %.2f\n",
			p.Tag, strings.Join(p.CoRunners, " + "), p.Speed, slowdown(p.Speed), verdict, p.Class, p.Floor)
		for _, line := range p.Explain {
			fmt.Fprintln(w, "    ", line)
		}
	}
	if explain && !full && len(m.Trees) > 1 {
		fmt.Fprintln(w, "(--explain-full prints every tree's path)")
	}
	switch {
	case out.Share:
		fmt.Fprintln(w, "verdict: may share one GPU (every job stays above its floor)")
	case out.Reason != "":
		fmt.Fprintln(w, "verdict: keep apart:", out.Reason)
	default:
		fmt.Fprintln(w, "verdict: keep apart (a job would fall below its floor)")
	}
	fmt.Fprintln(w, "model:", out.Model)
	return nil
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
	if path == "" {
		return "embedded default (models/default.model)"
	}
	return path
}
