// SPDX-License-Identifier: Apache-2.0

package model

import (
	"errors"
	"fmt"
	"math"
)

// Tree is a compiled regression tree in flat form: node i is a leaf when
// Feature[i] < 0 (its prediction is Value[i]); otherwise a sample goes to Left[i]
// when its feature value is < Threshold[i] and to Right[i] otherwise. Children
// always have larger indices than their parent (checked by validate), so walking
// the arrays terminates without recursion or a visited set.
type Tree struct {
	Feature   []int32   `codec:"feature" json:"feature"`
	Threshold []float64 `codec:"threshold" json:"threshold"`
	Left      []int32   `codec:"left" json:"left"`
	Right     []int32   `codec:"right" json:"right"`
	Value     []float64 `codec:"value" json:"value"`     // mean training speed of the node
	Samples   []int32   `codec:"samples" json:"samples"` // training samples that reached the node
}

// predict walks the tree iteratively; no allocation.
func (t *Tree) predict(x *featureVec) float64 {
	i := int32(0)
	for {
		f := t.Feature[i]
		if f < 0 {
			return t.Value[i]
		}
		if x[f] < t.Threshold[i] {
			i = t.Left[i]
		} else {
			i = t.Right[i]
		}
	}
}

// path returns the node indices from the root to x's leaf (for Explain and tests).
func (t *Tree) path(x *featureVec) []int32 {
	var p []int32
	i := int32(0)
	for {
		p = append(p, i)
		f := t.Feature[i]
		if f < 0 {
			return p
		}
		if x[f] < t.Threshold[i] {
			i = t.Left[i]
		} else {
			i = t.Right[i]
		}
	}
}

// depth returns the number of splits on the longest root-to-leaf path.
func (t *Tree) depth() int {
	d := make([]int, len(t.Feature))
	best := 0
	for i, f := range t.Feature {
		if f < 0 {
			best = max(best, d[i])
			continue
		}
		d[t.Left[i]] = d[i] + 1
		d[t.Right[i]] = d[i] + 1
	}
	return best
}

// leaves counts the leaf nodes.
func (t *Tree) leaves() int {
	n := 0
	for _, f := range t.Feature {
		if f < 0 {
			n++
		}
	}
	return n
}

// maxTreeNodes bounds one tree read from a file (a depth-20 tree has < 2^21 nodes).
const maxTreeNodes = 1 << 21

// validate checks everything predict relies on, so a decoded file can never make
// it index out of range or loop: equal array lengths, features in range, children
// after their parent and inside the arrays, every node reached exactly once,
// finite thresholds and values.
func (t *Tree) validate() error {
	n := len(t.Feature)
	switch {
	case n == 0:
		return errors.New("tree has no nodes")
	case n > maxTreeNodes:
		return fmt.Errorf("tree has %d nodes, more than %d", n, maxTreeNodes)
	case len(t.Threshold) != n || len(t.Left) != n || len(t.Right) != n || len(t.Value) != n || len(t.Samples) != n:
		return errors.New("tree arrays have different lengths")
	}
	parents := make([]int32, n)
	for i := 0; i < n; i++ {
		if math.IsNaN(t.Value[i]) || math.IsInf(t.Value[i], 0) {
			return fmt.Errorf("node %d: value is not finite", i)
		}
		f := t.Feature[i]
		if f < 0 {
			continue
		}
		if f >= numFeatures {
			return fmt.Errorf("node %d: feature %d out of range", i, f)
		}
		if math.IsNaN(t.Threshold[i]) || math.IsInf(t.Threshold[i], 0) {
			return fmt.Errorf("node %d: threshold is not finite", i)
		}
		for _, c := range [2]int32{t.Left[i], t.Right[i]} {
			if int(c) <= i || int(c) >= n {
				return fmt.Errorf("node %d: child %d out of order or range", i, c)
			}
			parents[c]++
		}
	}
	for i := 1; i < n; i++ {
		if parents[i] != 1 {
			return fmt.Errorf("node %d has %d parents, want 1", i, parents[i])
		}
	}
	return nil
}
