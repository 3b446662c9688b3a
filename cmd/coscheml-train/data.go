// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// dataFlags are the inputs shared by train and eval.
func dataFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "solo", Usage: "Lucid solo-profile CSV `FILE` (default: the built-in lucid-train solo_profiles.csv)"},
		&cli.StringFlag{Name: "pairs", Usage: "Lucid co-located pairs CSV `FILE` (default: the built-in lucid-train colocate_pairs.csv)"},
		&cli.StringFlag{Name: "generic-profiles", Usage: "extra profiles in the generic profile CSV `FILE` (docs/profiles.md)"},
		&cli.StringFlag{Name: "obs", Usage: "extra observations in the generic observation CSV `FILE` (docs/observations.md)"},
		&cli.BoolFlag{Name: "skip-unknown", Usage: "drop (and count) observations naming a tag with no profile, instead of failing"},
	}
}

// input is one data file read whole, with its digest for provenance.
type input struct {
	name   string // file name, or "built-in <name>"
	data   []byte
	digest string
}

func readInput(c *cli.Context, flag string, builtin func() ([]byte, error), builtinName string) (*input, error) {
	path := c.String(flag)
	if path == "" {
		if builtin == nil {
			return nil, nil
		}
		b, err := builtin()
		if errors.Is(err, models.ErrNoLucid) {
			return nil, nil // loadData says what is missing when nothing replaces it
		}
		if err != nil {
			return nil, fmt.Errorf("no --%s given, and the default Lucid data is unreadable: %w", flag, err)
		}
		if !models.Embedded {
			return newInput(filepath.Join(models.LucidDir, filepath.Base(builtinName)), b), nil
		}
		return newInput("built-in "+builtinName, b), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return newInput(path, b), nil
}

func newInput(name string, b []byte) *input {
	s := sha256.Sum256(b)
	return &input{name: name, data: b, digest: hex.EncodeToString(s[:])}
}

func (in *input) String() string { return fmt.Sprintf("%s (sha256 %s)", in.name, in.digest) }

// trainingData is what train and eval read.
type trainingData struct {
	ds      training.Dataset
	profIn  []*input // profile files
	obsIn   []*input // observation files
	dropped int
	missing []string
	// excluded counts observations left out by --exclude-families (families the
	// model must never see, to build an "unseen applications" benchmark).
	excluded     int
	excludedFams string
	// measured: the pair file's measurements (never --obs, which users' jobs
	// measured), for the model's measured pairs; measuredSD their noise.
	measured   []model.MeasuredPair
	measuredSD float64
}

// excludeFamilies drops every observation in which a job or co-runner belongs to
// one of fams (model.Family), so the trained model has never seen them.
func excludeFamilies(obs []observation.Observation, fams map[string]bool) (kept []observation.Observation, dropped int) {
	for _, o := range obs {
		hit := fams[model.Family(o.Tag)]
		for _, ct := range o.CoTags {
			hit = hit || fams[model.Family(ct)]
		}
		if hit {
			dropped++
			continue
		}
		kept = append(kept, o)
	}
	return kept, dropped
}

// loadData reads profiles and observations from the flags and builds the dataset.
// Errors name the file.
func loadData(c *cli.Context) (*trainingData, error) {
	solo, err := readInput(c, "solo", models.Solo, "lucid-train/solo_profiles.csv")
	if err != nil {
		return nil, err
	}
	pairs, err := readInput(c, "pairs", models.Pairs, "lucid-train/colocate_pairs.csv")
	if err != nil {
		return nil, err
	}
	gen, err := readInput(c, "generic-profiles", nil, "")
	if err != nil {
		return nil, err
	}
	obsIn, err := readInput(c, "obs", nil, "")
	if err != nil {
		return nil, err
	}
	// Without the Lucid data (a build without it and no coscheml-model-lucid)
	// the site's own files are the whole training set.
	if solo == nil && gen == nil {
		return nil, fmt.Errorf("no profiles to train on: give --solo or --generic-profiles (%w)", models.Missing(filepath.Join(models.LucidDir, models.SoloFile)))
	}
	if pairs == nil && obsIn == nil {
		return nil, fmt.Errorf("no observations to train on: give --pairs or --obs (%w)", models.Missing(filepath.Join(models.LucidDir, models.PairsFile)))
	}
	td := &trainingData{}
	if solo != nil {
		td.profIn = append(td.profIn, solo)
	}
	if pairs != nil {
		td.obsIn = append(td.obsIn, pairs)
	}

	cat := profile.Catalog{}
	from := map[string]string{}
	add := func(in *input, read func(io.Reader) ([]*profile.Profile, error)) error {
		ps, err := read(bytes.NewReader(in.data))
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		for _, p := range ps {
			if prev, dup := from[p.Tag]; dup {
				return fmt.Errorf("%s: profile %s is also defined in %s", in.name, p.Tag, prev)
			}
			cat[p.Tag], from[p.Tag] = p, in.name
		}
		return nil
	}
	if solo != nil {
		if err := add(solo, profile.ReadLucidSolo); err != nil {
			return nil, err
		}
	}
	if gen != nil {
		td.profIn = append(td.profIn, gen)
		if err := add(gen, profile.ReadGenericCSV); err != nil {
			return nil, err
		}
	}
	var obs []observation.Observation
	if pairs != nil {
		if obs, err = observation.ReadLucidPairs(bytes.NewReader(pairs.data)); err != nil {
			return nil, fmt.Errorf("%s: %w", pairs.name, err)
		}
	}
	pairObs := obs
	if obsIn != nil {
		td.obsIn = append(td.obsIn, obsIn)
		more, err := observation.ReadCSV(bytes.NewReader(obsIn.data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", obsIn.name, err)
		}
		obs = append(obs, more...)
	}
	if ex := c.String("exclude-families"); ex != "" {
		fams := map[string]bool{}
		for _, f := range strings.Split(ex, ",") {
			fams[strings.ToLower(strings.TrimSpace(f))] = true
		}
		obs, td.excluded = excludeFamilies(obs, fams)
		pairObs, _ = excludeFamilies(pairObs, fams)
		td.excludedFams = ex
	}
	if c.Bool("skip-unknown") {
		obs, td.dropped, td.missing = training.FilterKnown(cat, obs)
		pairObs, _, _ = training.FilterKnown(cat, pairObs)
	}
	td.measured, td.measuredSD = training.MeasuredPairs(pairObs)
	td.ds, err = training.BuildDataset(cat, obs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (profiles from %s)", names(td.obsIn), err, names(td.profIn))
	}
	return td, nil
}

func names(ins []*input) string {
	var n []string
	for _, in := range ins {
		n = append(n, in.name)
	}
	return strings.Join(n, " + ")
}

// source is the provenance line stored in a model file.
func (td *trainingData) source() string {
	var s []string
	for _, in := range append(append([]*input(nil), td.profIn...), td.obsIn...) {
		s = append(s, in.String())
	}
	if td.excludedFams != "" {
		s = append(s, fmt.Sprintf("families excluded: %s (%d observations)", td.excludedFams, td.excluded))
	}
	return strings.Join(s, "; ")
}

// warnDropped tells the user what --skip-unknown dropped.
func (td *trainingData) warnDropped(w io.Writer) {
	if td.dropped == 0 {
		return
	}
	const show = 5
	m := td.missing
	more := ""
	if len(m) > show {
		more = fmt.Sprintf(" and %d more", len(m)-show)
		m = m[:show]
	}
	for i := range m {
		m[i] = profile.Sanitize(m[i])
	}
	fmt.Fprintf(w, "warning: skipped %d observations naming tags with no profile: %s%s\n", td.dropped, strings.Join(m, ", "), more)
}
