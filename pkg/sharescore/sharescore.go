// SPDX-License-Identifier: Apache-2.0

// Package sharescore is the per-job sharing score of the Lucid peer (Hu et al.,
// ASPLOS'23; docs/peers.md): 0, 1 or 2, from a small decision-tree classifier on
// a job's solo profile (GPU utilization, memory utilization, memory), trained
// on the training pairs with each job's label from its mean co-located speed
// (< 0.85: 2, < 0.95: 1, else 0). It scores a job, not a pair: what Lucid's
// packing rule sums.
package sharescore

import (
	"fmt"
	"io"
	"slices"

	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// The label thresholds and the tree's size.
const (
	heavyBelow = 0.85 // mean co-located speed below this: score 2
	midBelow   = 0.95 // below this: score 1
	maxDepth   = 3
	minLeaf    = 2
	nClasses   = 3
)

// Classifier scores a job's solo profile.
type Classifier struct {
	root *node
	// Fallback is the score of a job without a profile (the most common label).
	Fallback int
}

type node struct {
	feature   int // 0 SM, 1 memory bandwidth, 2 memory; -1: leaf
	threshold float64
	left      *node // value <= threshold
	right     *node
	label     int
}

func features(p *profile.Profile) [3]float64 {
	return [3]float64{p.SMUtil.Mean, p.MemBWUtil.Mean, p.MemUsedMiB}
}

// Label is the score of a mean co-located speed.
func Label(meanSpeed float64) int {
	switch {
	case meanSpeed < heavyBelow:
		return 2
	case meanSpeed < midBelow:
		return 1
	}
	return 0
}

type sample struct {
	x     [3]float64
	label int
}

// Train builds the classifier from solo profiles (by tag) and co-location
// observations: each application's label is its mean speed over the
// observations of it next to co-runners.
func Train(cat profile.Catalog, obs []observation.Observation) (*Classifier, error) {
	sum, n := map[string]float64{}, map[string]int{}
	for _, o := range obs {
		if len(o.CoTags) == 0 || !(o.Speed > 0) {
			continue
		}
		sum[o.Tag] += o.Speed
		n[o.Tag]++
	}
	var samples []sample
	tags := make([]string, 0, len(n))
	for t := range n {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	for _, t := range tags {
		p, ok := cat[t]
		if !ok {
			continue
		}
		samples = append(samples, sample{x: features(p), label: Label(sum[t] / float64(n[t]))})
	}
	if len(samples) < 2*minLeaf {
		return nil, fmt.Errorf("sharescore: %d applications with profiles and co-located runs, need %d", len(samples), 2*minLeaf)
	}
	c := &Classifier{root: grow(samples, 0)}
	c.Fallback = majority(samples)
	return c, nil
}

// TrainLucid trains the classifier on the Lucid artifact's files (the format of
// models/data/lucid-train: the solo profiles and the co-located pairs), the
// data the default model is trained on.
func TrainLucid(solo, pairs io.Reader) (*Classifier, error) {
	ps, err := profile.ReadLucidSolo(solo)
	if err != nil {
		return nil, fmt.Errorf("sharescore: %w", err)
	}
	obs, err := observation.ReadLucidPairs(pairs)
	if err != nil {
		return nil, fmt.Errorf("sharescore: %w", err)
	}
	return Train(profile.CatalogOf(ps), obs)
}

// Score is the job's sharing score.
func (c *Classifier) Score(p *profile.Profile) int {
	if c == nil || c.root == nil || p == nil {
		if c == nil {
			return 2
		}
		return c.Fallback
	}
	x := features(p)
	n := c.root
	for n.feature >= 0 {
		if x[n.feature] <= n.threshold {
			n = n.left
		} else {
			n = n.right
		}
	}
	return n.label
}

// grow is CART with Gini impurity, at most maxDepth deep, leaves of at least
// minLeaf samples; thresholds halfway between consecutive values.
func grow(s []sample, depth int) *node {
	leaf := &node{feature: -1, label: majority(s)}
	if depth >= maxDepth || len(s) < 2*minLeaf || gini(s) == 0 {
		return leaf
	}
	bestF, bestT, bestG := -1, 0.0, gini(s)
	for f := 0; f < 3; f++ {
		vals := make([]float64, len(s))
		for i := range s {
			vals[i] = s[i].x[f]
		}
		slices.Sort(vals)
		vals = slices.Compact(vals)
		for i := 0; i+1 < len(vals); i++ {
			t := (vals[i] + vals[i+1]) / 2
			l, r := split(s, f, t)
			if len(l) < minLeaf || len(r) < minLeaf {
				continue
			}
			g := (float64(len(l))*gini(l) + float64(len(r))*gini(r)) / float64(len(s))
			if g < bestG-1e-12 {
				bestF, bestT, bestG = f, t, g
			}
		}
	}
	if bestF < 0 {
		return leaf
	}
	l, r := split(s, bestF, bestT)
	return &node{feature: bestF, threshold: bestT, left: grow(l, depth+1), right: grow(r, depth+1), label: leaf.label}
}

func split(s []sample, f int, t float64) (l, r []sample) {
	for _, x := range s {
		if x.x[f] <= t {
			l = append(l, x)
		} else {
			r = append(r, x)
		}
	}
	return l, r
}

func gini(s []sample) float64 {
	var c [nClasses]int
	for _, x := range s {
		c[x.label]++
	}
	g := 1.0
	for _, k := range c {
		p := float64(k) / float64(len(s))
		g -= p * p
	}
	return g
}

// majority is the most common label (ties: the higher score, the safer one).
func majority(s []sample) int {
	var c [nClasses]int
	for _, x := range s {
		c[x.label]++
	}
	best := nClasses - 1
	for l := nClasses - 1; l >= 0; l-- {
		if c[l] > c[best] {
			best = l
		}
	}
	return best
}
