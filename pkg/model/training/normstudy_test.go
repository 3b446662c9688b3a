// SPDX-License-Identifier: Apache-2.0

package training

import (
	"fmt"
	"github.com/coscheml/coscheml/pkg/model"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestTuneNormalizedMargins compares plain margins (by predicted speed) with
// margins normalized by the job application's scale (CalibrationOptions.JobScale)
// on the training data only: for the leave-families-out and leave-pairs-out
// residuals of the default model, the nested per-floor test Calibrate chooses
// the per-floor coverage from, and what is accepted at it (TUNE=1 to run).
func TestTuneNormalizedMargins(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	ds := lucidDataset(t)
	p := DefaultParams()
	lfo, err := LeaveFamiliesOut(ds, p)
	if err != nil {
		t.Fatal(err)
	}
	lpo, err := LeavePairsOut(ds, SeenPairsFolds, p, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, cv := range []struct {
		name string
		oof  []OutOfFold
	}{{"leave-families-out", lfo.OutOfFold}, {"leave-pairs-out", lpo.OutOfFold}} {
		for _, o := range []CalibrationOptions{{}, {JobScale: true}, {JobScale: true, ScaleShrink: 20}, {JobScale: true, Window: 1}} {
			cal, ch, err := Calibrate(cv.oof, o)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for f, fl := range ch.Floors {
				l := slices.Index(ch.Levels, ch.FloorChosen[f])
				fmt.Fprintf(&b, " floor %.2f at %.3g: %.2f%%/%.1f%%;", fl, ch.FloorChosen[f], 100*ch.FloorViolation[f][l], 100*ch.FloorAccepted[f][l])
			}
			b.WriteString(" by level:")
			for l, lv := range ch.Levels {
				if lv < 0.9 {
					continue
				}
				fmt.Fprintf(&b, " %.3g:", lv)
				for f := range ch.Floors {
					fmt.Fprintf(&b, " %.2f%%/%.1f%%", 100*ch.FloorViolation[f][l], 100*ch.FloorAccepted[f][l])
				}
			}
			t.Logf("%s job scale %v shrink %.3g window %.2g: class-weighted %v;%s", cv.name, o.JobScale, o.ScaleShrink, o.Window, cal.DefaultCoverage, b.String())
		}
	}
}

// nestedFloor scores a normalized calibration nested by fold: for each fold F,
// quantiles of (res / scale) from the other folds (scale from scaleOf, which
// is given the folds it may learn from), and each sample of F tested against
// floor at each level: returns violation and accepted shares per level.
func nestedFloor(oof []OutOfFold, floor, window float64, scaleOf func(r OutOfFold, exclude map[string]bool) float64) (viol, acc []float64) {
	var folds []string
	for _, r := range oof {
		if !slices.Contains(folds, r.Fold) {
			folds = append(folds, r.Fold)
		}
	}
	nl := len(CoverageLevels)
	a, b := make([]float64, nl), make([]float64, nl)
	tested := 0.0
	for _, f := range folds {
		type ps struct{ pred, score float64 }
		var rest []ps
		for _, r := range oof {
			if r.Fold != f {
				rest = append(rest, ps{r.Pred, (r.Pred - r.Truth) / scaleOf(r, map[string]bool{f: true, r.Fold: true})})
			}
		}
		for _, r := range oof {
			if r.Fold != f {
				continue
			}
			tested++
			var sc []float64
			for w := window; ; w += 0.01 {
				sc = sc[:0]
				for _, x := range rest {
					if math.Abs(x.pred-r.Pred) <= w {
						sc = append(sc, x.score)
					}
				}
				if len(sc) >= 100 || len(sc) == len(rest) {
					break
				}
			}
			sort.Float64s(sc)
			s := scaleOf(r, map[string]bool{f: true})
			for l, lv := range CoverageLevels {
				k := min(max(int(math.Ceil(float64(len(sc)+1)*lv))-1, 0), len(sc)-1)
				if r.Pred-max(sc[k], 0)*s >= floor {
					a[l]++
					if r.Truth < floor {
						b[l]++
					}
				}
			}
		}
	}
	viol, acc = make([]float64, nl), make([]float64, nl)
	for l := range a {
		acc[l] = a[l] / tested
		if a[l] > 0 {
			viol[l] = b[l] / a[l]
		}
	}
	return viol, acc
}

// TestTuneTagScale screens per-application difficulty (the residuals'
// scale per job tag and co-runner tag, learned from other folds) as the
// normalizer of leave-pairs-out residuals (TUNE=1).
func TestTuneTagScale(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	ds := lucidDataset(t)
	p := DefaultParams()
	lpo, err := LeavePairsOut(ds, SeenPairsFolds, p, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	oof := lpo.OutOfFold
	// the mean |residual| per key among residuals outside the excluded folds,
	// shrunk toward the global mean with k pseudo-residuals
	tagScale := func(key func(r OutOfFold) []string, k float64) func(r OutOfFold, ex map[string]bool) float64 {
		return func(r OutOfFold, ex map[string]bool) float64 {
			want := key(r)
			var gs, gn float64
			ks := make([]float64, len(want))
			kn := make([]float64, len(want))
			for _, x := range oof {
				if ex[x.Fold] {
					continue
				}
				d := math.Abs(x.Pred - x.Truth)
				gs, gn = gs+d, gn+1
				xk := key(x)
				for i := range want {
					if xk[i] == want[i] {
						ks[i], kn[i] = ks[i]+d, kn[i]+1
					}
				}
			}
			g := gs / gn
			v := 0.0
			for i := range want {
				s := (ks[i] + k*g) / (kn[i] + k)
				v += s * s
			}
			return math.Sqrt(v / float64(len(want)))
		}
	}
	job := func(r OutOfFold) []string { return []string{ds.Samples[r.Index].Tag} }
	jobco := func(r OutOfFold) []string {
		return []string{ds.Samples[r.Index].Tag, "co:" + strings.Join(ds.Samples[r.Index].CoTags, "+")}
	}
	jobfam := func(r OutOfFold) []string {
		return []string{model.Family(ds.Samples[r.Index].Tag), "co:" + model.Family(ds.Samples[r.Index].CoTags[0])}
	}
	// hierarchical: the job application next to the co-runner's family,
	// shrunk toward the job application's scale (itself shrunk toward the
	// overall mean)
	hier := func(k1, k2 float64) func(r OutOfFold, ex map[string]bool) float64 {
		return func(r OutOfFold, ex map[string]bool) float64 {
			tag := ds.Samples[r.Index].Tag
			pair := tag + "|" + model.Family(ds.Samples[r.Index].CoTags[0])
			var gs, gn, ts, tn, ps, pn float64
			for _, x := range oof {
				if ex[x.Fold] {
					continue
				}
				d := math.Abs(x.Pred - x.Truth)
				gs, gn = gs+d, gn+1
				xt := ds.Samples[x.Index].Tag
				if xt == tag {
					ts, tn = ts+d, tn+1
					if xt+"|"+model.Family(ds.Samples[x.Index].CoTags[0]) == pair {
						ps, pn = ps+d, pn+1
					}
				}
			}
			js := (ts + k1*gs/gn) / (tn + k1)
			return (ps + k2*js) / (pn + k2)
		}
	}
	one := func(OutOfFold, map[string]bool) float64 { return 1 }
	spread := func(r OutOfFold, _ map[string]bool) float64 { return r.Spread + 0.02 }
	for _, v := range []struct {
		name   string
		window float64
		scale  func(OutOfFold, map[string]bool) float64
	}{
		{"plain", 0.05, one}, {"spread+0.02 global", 1, spread},
		{"job tag k20", 0.05, tagScale(job, 20)},
		{"job tag next to co family, k20 then k5", 0.05, hier(20, 5)}, {"job tag next to co family, k20 then k2", 0.05, hier(20, 2)},
		{"job tag k5", 0.05, tagScale(job, 5)}, {"job tag k5 global", 1, tagScale(job, 5)},
		{"job+co tag k5", 0.05, tagScale(jobco, 5)}, {"job+co tag k5 global", 1, tagScale(jobco, 5)},
		{"job+co tag k20", 0.05, tagScale(jobco, 20)},
		{"job+co family k5", 0.05, tagScale(jobfam, 5)}, {"job+co family k5 global", 1, tagScale(jobfam, 5)},
	} {
		var b strings.Builder
		for _, floor := range []float64{0.75, 0.9} {
			viol, acc := nestedFloor(oof, floor, v.window, v.scale)
			fmt.Fprintf(&b, " | floor %.2f:", floor)
			for l, lv := range CoverageLevels {
				if lv >= 0.9 {
					fmt.Fprintf(&b, " %.3g %.2f%%/%.1f%%", lv, 100*viol[l], 100*acc[l])
				}
			}
		}
		t.Logf("%s%s", v.name, b.String())
	}
}
