// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/residency"
)

// TestReloadWarmsMemo: a reload builds a new policy; its prediction memo is filled
// in the background before the swap, so the first decision after a reload predicts
// what a steady-state decision does (the chosen GPU's explanation), not once per
// distinct resident set of the cluster.
func TestReloadWarmsMemo(t *testing.T) {
	f := newFixture(t, nil)
	store, err := residency.Open(f.cfg.ResidencyDir)
	if err != nil {
		t.Fatal(err)
	}
	for i, en := range []struct {
		node, tag string
		gpu       int
	}{{"n1", "light-a", 0}, {"n1", "light-b", 1}, {"n2", "heavy-a", 0}, {"n2", "mid", 1}, {"n3", "serve", 0}, {"n3", "heavy-b", 1}} {
		if err := store.Start(residency.Entry{JobID: strconv.Itoa(100 + i), Node: en.node, GPUs: []int{en.gpu}, Shards: 2,
			Tag: en.tag, Start: f.now, Expires: f.now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	f.e.Reload() // reads the residency
	if n := len(f.e.refresh.entries); n != 6 {
		t.Fatalf("%d residency entries read, want 6", n)
	}
	f.e.Reload() // a new policy, warmed on those entries
	first := predictionsOf(f, "light-a")
	steady := predictionsOf(f, "light-a") // the same state again: memo warm by now
	if first != steady {
		t.Errorf("first decision after a reload made %d predictions, a steady-state one %d: the memo was not warmed", first, steady)
	}
}

// predictionsOf decides one tagged job (its reservation dropped again) and returns
// how many model predictions it made.
func predictionsOf(f *fixture, tag string) int64 {
	before := smPredictions.Load()
	decideAndForget(f, job("coscheml:app="+tag))
	return smPredictions.Load() - before
}

// TestWarmDecisionHasNoEffect: the replay after a refresh reserves, numbers,
// logs and counts nothing, and the decisions after it are those an engine
// without it makes (same placement, same decision number).
func TestWarmDecisionHasNoEffect(t *testing.T) {
	withWarm, without := newFixture(t, nil), newFixture(t, nil)
	jobs := []string{"light-a", "heavy-a", "light-b", "serve", "mid"}
	for i, tag := range jobs {
		var rs [2]Result
		for k, f := range []*fixture{withWarm, without} {
			if k == 0 && i > 0 {
				before := withWarm.e.idSeq
				reserved := len(withWarm.e.view.res.list)
				fam := fmt.Sprint(withWarm.e.metrics.counters.Families(withWarm.now))
				withWarm.e.warmDecision()
				withWarm.e.warmDecision()
				if withWarm.e.idSeq != before || len(withWarm.e.view.res.list) != reserved ||
					fmt.Sprint(withWarm.e.metrics.counters.Families(withWarm.now)) != fam {
					t.Fatalf("the replay changed the engine: seq %d -> %d, reservations %d -> %d",
						before, withWarm.e.idSeq, reserved, len(withWarm.e.view.res.list))
				}
			}
			rs[k] = f.e.Decide(job("coscheml:app=" + tag))
		}
		a, b := rs[0], rs[1]
		da, db := comment.ParseComment(a.Comment), comment.ParseComment(b.Comment)
		seqA, seqB := da.DecisionID[:strings.LastIndexByte(da.DecisionID, '-')], db.DecisionID[:strings.LastIndexByte(db.DecisionID, '-')]
		if a.Code != b.Code || a.TresPerNode != b.TresPerNode || a.ReqNodes != b.ReqNodes || seqA != seqB {
			t.Fatalf("%s: with the replay %+v, without %+v", tag, a, b)
		}
	}
	if !withWarm.e.view.hasPlaced {
		t.Fatal("no submission remembered for the replay")
	}
	lines, err := os.ReadFile(withWarm.cfg.DecisionLog)
	if err == nil && strings.Count(string(lines), "\n") > len(jobs) {
		t.Errorf("the decision log holds more lines than decisions:\n%s", lines)
	}
}
