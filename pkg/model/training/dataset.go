// SPDX-License-Identifier: Apache-2.0

package training

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Sample is one training or evaluation example: a job, its co-runners and the
// measured normalized speed of the job.
type Sample struct {
	Tag    string
	CoTags []string
	Job    *profile.Profile
	Co     []*profile.Profile
	Speed  float64
	x      model.FeatureVec
}

// Features returns a copy of the sample's feature vector (see FeatureNames).
func (s *Sample) Features() []float64 {
	out := make([]float64, model.NumFeatures)
	copy(out, s.x[:])
	return out
}

// Feature returns feature f of the sample (f indexes FeatureNames) without
// copying the vector; it is what a trainer's inner loops read.
func (s *Sample) Feature(f int) float64 { return s.x[f] }

// UtilSum is the baseline heuristic's score: the sum of the solo SM utilizations of
// the job and its co-runners (higher = more likely slow).
func (s *Sample) UtilSum() float64 { return s.x[model.TotalSMFeature] }

// Dataset is a set of samples with their features computed from profiles. Build
// it with BuildDataset (or Subset of one): a Sample made by hand lacks the
// computed features.
type Dataset struct {
	Samples []Sample
}

// Len is the number of samples.
func (d Dataset) Len() int { return len(d.Samples) }

// Subset returns the samples at the given indices (shared, not copied deeply).
func (d Dataset) Subset(idx []int) Dataset {
	out := Dataset{Samples: make([]Sample, len(idx))}
	for i, j := range idx {
		out.Samples[i] = d.Samples[j]
	}
	return out
}

// Digest is the SHA-256 of the dataset's content in order: tags, co-tags, speeds
// and feature values (so a changed profile changes the digest too).
func (d Dataset) Digest() string {
	h := sha256.New()
	var b [8]byte
	putF := func(v float64) {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	for i := range d.Samples {
		s := &d.Samples[i]
		h.Write([]byte(s.Tag))
		h.Write([]byte{0})
		h.Write([]byte(strings.Join(s.CoTags, ",")))
		h.Write([]byte{0})
		putF(s.Speed)
		for _, v := range s.x {
			putF(v)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// BuildDataset turns observations into samples using the profiles in cat. It is
// strict: an observation whose tag or any co-tag has no profile is an error that
// names the tag and the observation (wrapping profile.ErrNotFound), because a model
// silently trained on less data than asked for is worse than no model. Callers
// that accumulate observations over time and expect some profiles to be gone can
// drop those first with FilterKnown, which counts what it drops.
func BuildDataset(cat profile.Catalog, obs []observation.Observation) (Dataset, error) {
	if len(obs) == 0 {
		return Dataset{}, errors.New("no observations")
	}
	ds := Dataset{Samples: make([]Sample, 0, len(obs))}
	for i := range obs {
		o := &obs[i]
		if err := profile.ValidateTag(o.Tag); err != nil {
			return Dataset{}, fmt.Errorf("observation %d: %w", i+1, err)
		}
		if math.IsNaN(o.Speed) || o.Speed <= 0 || o.Speed > observation.MaxSpeed {
			return Dataset{}, fmt.Errorf("observation %d (%s): speed %v outside (0, %v]", i+1, o.Tag, o.Speed, observation.MaxSpeed)
		}
		job, err := cat.Get(o.Tag)
		if err != nil {
			return Dataset{}, fmt.Errorf("observation %d: job %w", i+1, err)
		}
		s := Sample{Tag: o.Tag, CoTags: o.CoTags, Job: job, Speed: o.Speed}
		s.Co = make([]*profile.Profile, len(o.CoTags))
		for j, ct := range o.CoTags {
			if err := profile.ValidateTag(ct); err != nil {
				return Dataset{}, fmt.Errorf("observation %d (%s): co-runner: %w", i+1, o.Tag, err)
			}
			if s.Co[j], err = cat.Get(ct); err != nil {
				return Dataset{}, fmt.Errorf("observation %d (%s): co-runner %w", i+1, o.Tag, err)
			}
		}
		model.ComputeFeatures(s.Job, s.Co, &s.x)
		ds.Samples = append(ds.Samples, s)
	}
	return ds, nil
}

// FilterKnown keeps the observations whose tag and co-tags all have a profile in
// cat, and returns how many it dropped and the missing tags in order of first appearance.
func FilterKnown(cat profile.Catalog, obs []observation.Observation) (kept []observation.Observation, dropped int, missing []string) {
	seen := map[string]bool{}
	for _, o := range obs {
		ok := true
		for _, t := range append([]string{o.Tag}, o.CoTags...) {
			if _, found := cat[t]; !found {
				ok = false
				if !seen[t] {
					seen[t] = true
					missing = append(missing, t)
				}
			}
		}
		if ok {
			kept = append(kept, o)
		} else {
			dropped++
		}
	}
	return kept, dropped, missing
}

// Tags returns the applications the dataset holds, as job or co-runner, sorted
// (the model's Tags: which co-locations get the seen-pairs margins).
func (d Dataset) Tags() []string {
	set := map[string]bool{}
	for i := range d.Samples {
		set[d.Samples[i].Tag] = true
		for _, t := range d.Samples[i].CoTags {
			set[t] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
