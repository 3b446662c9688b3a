// SPDX-License-Identifier: Apache-2.0

package sharescore

import (
	"bytes"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

func TestLabel(t *testing.T) {
	for _, tc := range []struct {
		speed float64
		want  int
	}{{0.5, 2}, {0.849, 2}, {0.85, 1}, {0.949, 1}, {0.95, 0}, {1, 0}} {
		if got := Label(tc.speed); got != tc.want {
			t.Errorf("Label(%v) = %d, want %d", tc.speed, got, tc.want)
		}
	}
}

func prof(tag string, sm, bw, mem float64) *profile.Profile {
	p := &profile.Profile{Tag: tag, Class: profile.ClassTrain, MemUsedMiB: mem}
	p.SMUtil.Mean, p.MemBWUtil.Mean = sm, bw
	return p
}

// A job's label is its mean co-located speed's; the tree splits the solo
// features so that heavy, middle and light applications get 2, 1 and 0.
func TestTrainSeparatesByUtilization(t *testing.T) {
	var ps []*profile.Profile
	var obs []observation.Observation
	add := func(tag string, sm, speed float64) {
		ps = append(ps, prof(tag, sm, sm/2, 4000))
		obs = append(obs, observation.Observation{Tag: tag, CoTags: []string{"x"}, Speed: speed},
			observation.Observation{Tag: tag, CoTags: []string{"y"}, Speed: speed})
	}
	for i, sm := range []float64{90, 85, 80} {
		add(string(rune('a'+i)), sm, 0.6)
	}
	for i, sm := range []float64{50, 45, 40} {
		add(string(rune('m'+i)), sm, 0.9)
	}
	for i, sm := range []float64{10, 8, 5} {
		add(string(rune('u'+i)), sm, 0.99)
	}
	obs = append(obs, observation.Observation{Tag: "a", Speed: 1}) // alone: not a label
	c, err := Train(profile.CatalogOf(ps), obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sm   float64
		want int
	}{{95, 2}, {82, 2}, {47, 1}, {6, 0}, {0, 0}} {
		if got := c.Score(prof("q", tc.sm, tc.sm/2, 4000)); got != tc.want {
			t.Errorf("SM %v%%: score %d, want %d", tc.sm, got, tc.want)
		}
	}
	if got := c.Score(nil); got != c.Fallback {
		t.Errorf("no profile: %d, want the fallback %d", got, c.Fallback)
	}
	var none *Classifier
	if got := none.Score(prof("q", 1, 1, 1)); got != 2 {
		t.Errorf("no classifier: %d, want 2 (never packed)", got)
	}
}

func TestTrainTooFew(t *testing.T) {
	_, err := Train(profile.CatalogOf([]*profile.Profile{prof("a", 1, 1, 1)}),
		[]observation.Observation{{Tag: "a", CoTags: []string{"b"}, Speed: 0.5}})
	if err == nil {
		t.Fatal("trained on one application")
	}
}

// On the shipped training data (the default model's) every score occurs and
// the tree agrees with most applications' own labels.
func TestTrainLucidShipped(t *testing.T) {
	solo, err := models.Solo()
	if err != nil {
		t.Skipf("no shipped Lucid data in this build: %v", err)
	}
	pairs, err := models.Pairs()
	if err != nil {
		t.Skipf("no shipped Lucid data in this build: %v", err)
	}
	c, err := TrainLucid(bytes.NewReader(solo), bytes.NewReader(pairs))
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := profile.ReadLucidSolo(bytes.NewReader(solo))
	obs, _ := observation.ReadLucidPairs(bytes.NewReader(pairs))
	sum, n := map[string]float64{}, map[string]int{}
	for _, o := range obs {
		sum[o.Tag] += o.Speed
		n[o.Tag]++
	}
	var seen [nClasses]int
	agree, total := 0, 0
	for _, p := range ps {
		if n[p.Tag] == 0 {
			continue
		}
		total++
		got := c.Score(p)
		seen[got]++
		if got == Label(sum[p.Tag]/float64(n[p.Tag])) {
			agree++
		}
	}
	t.Logf("scores over %d applications: %v; %d agree with their own label", total, seen, agree)
	if agree*10 < total*7 {
		t.Errorf("the tree agrees with %d of %d training labels", agree, total)
	}
	for l, k := range seen {
		if k == 0 {
			t.Errorf("no application scored %d: %v", l, seen)
		}
	}
}
