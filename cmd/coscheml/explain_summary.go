// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// summarizeExplain shortens a forest's decision paths (model.Explain: one line per
// split, prefixed "tree N: ", a leaf line per tree and a closing "forest of ..."
// line) to what a reader can take in: the full path of the one tree whose leaf is
// closest to the average, the features the paths split on most, how far the trees'
// leaves spread, and the forest's average. A single tree's path is short
// and is returned whole, as is anything this does not recognise.
func summarizeExplain(lines []string) []string {
	type tree struct {
		num    int
		splits []string
		leaf   float64
		ok     bool
	}
	var trees []*tree
	var forest string
	var after []string // closing lines kept as they are (a measured pair's)
	byNum := map[int]*tree{}
	for _, l := range lines {
		if strings.HasPrefix(l, "forest of ") {
			forest = l
			continue
		}
		if strings.HasPrefix(l, "measured pair: ") {
			after = append(after, l)
			continue
		}
		num, rest, ok := cutTreePrefix(l)
		if !ok {
			return lines
		}
		t := byNum[num]
		if t == nil {
			t = &tree{num: num}
			byNum[num] = t
			trees = append(trees, t)
		}
		if v, ok := leafSpeed(rest); ok {
			t.leaf, t.ok = v, true
			continue
		}
		t.splits = append(t.splits, rest)
	}
	if len(trees) < 2 || forest == "" {
		return lines
	}
	mean, n := 0.0, 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, t := range trees {
		if !t.ok {
			return lines
		}
		mean += t.leaf
		n++
		lo, hi = math.Min(lo, t.leaf), math.Max(hi, t.leaf)
	}
	mean /= float64(n)

	// Features by the number of trees whose path splits on them.
	inTrees := map[string]int{}
	for _, t := range trees {
		seen := map[string]bool{}
		for _, s := range t.splits {
			if f, _, ok := strings.Cut(s, " "); ok && !seen[f] {
				seen[f] = true
				inTrees[f]++
			}
		}
	}
	feats := make([]string, 0, len(inTrees))
	for f := range inTrees {
		feats = append(feats, f)
	}
	sort.Slice(feats, func(i, j int) bool {
		if inTrees[feats[i]] != inTrees[feats[j]] {
			return inTrees[feats[i]] > inTrees[feats[j]]
		}
		return feats[i] < feats[j]
	})
	if len(feats) > 4 {
		feats = feats[:4]
	}
	var top []string
	for _, f := range feats {
		top = append(top, fmt.Sprintf("%s (%d)", f, inTrees[f]))
	}

	closest := 0
	for i, t := range trees {
		if math.Abs(t.leaf-mean) < math.Abs(trees[closest].leaf-mean) {
			closest = i
		}
	}
	// Like the full form, it ends with the forest's answer.
	out := []string{fmt.Sprintf("path of tree %d, the one closest to the average (leaf %.3f):", trees[closest].num, trees[closest].leaf)}
	for _, s := range trees[closest].splits {
		out = append(out, "  "+s)
	}
	out = append(out,
		fmt.Sprintf("features the paths split on most (in how many of the %d trees): %s", n, strings.Join(top, ", ")),
		fmt.Sprintf("tree leaves range %.3f .. %.3f", lo, hi),
		forest)
	return append(out, after...)
}

// cutTreePrefix splits "tree 12: rest" into 12 and "rest".
func cutTreePrefix(l string) (int, string, bool) {
	head, rest, ok := strings.Cut(l, ": ")
	if !ok || !strings.HasPrefix(head, "tree ") {
		return 0, "", false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(head, "tree "))
	if err != nil {
		return 0, "", false
	}
	return n, rest, true
}

// leafSpeed reads "leaf: speed 0.971 (mean of ...)".
func leafSpeed(s string) (float64, bool) {
	rest, ok := strings.CutPrefix(s, "leaf: speed ")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, " ")
	v, err := strconv.ParseFloat(num, 64)
	return v, err == nil
}
