// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// testMetrics: two tagged jobs that share a GPU and end normally leave an
// observation of each other (the Epilog), and the plugin inside slurmctld
// counts them in metrics_file: the model's error for both, and jobs below
// floor by class. The file is read back from disk.
func testMetrics(t *testing.T, c *cluster) {
	tags := pickTags(t, c.cfg, c.a.repo)
	store, err := profile.Open(c.cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	// Copies of the good pair whose solo run time is the jobs' own, so that a
	// co-located run is measured against it (a sane speed near 1).
	const runS = 10
	var own [2]string
	for i, src := range []string{tags.goodA, tags.goodB} {
		p, err := store.Get(src)
		if err != nil {
			t.Fatalf("profile %s: %v", src, err)
		}
		q := *p
		q.Tag = fmt.Sprintf("integration-metrics-%c", 'a'+i)
		q.SoloRuntimeS, q.SoloThroughput = runS, 0
		if err := store.Put(&q); err != nil {
			t.Fatal(err)
		}
		own[i] = q.Tag
	}
	// The plugin re-reads the profile store every few seconds.
	for _, tag := range own {
		if !c.waitPinnable(tag, 20*time.Second) {
			t.Fatalf("the plugin did not pin a job of the new profile %s within 20s", tag)
		}
	}

	// Both held, then released together: the second is placed beside the
	// first's reservation and both run the whole time side by side.
	var ids []int
	var markers []string
	for _, tag := range own {
		m := c.path("jobs", fmt.Sprintf("metrics.%s.%d", tag, time.Now().UnixNano()))
		id := c.mustSbatch("--hold", "--gres=gpu:1", "--time=5", "-o", "/dev/null", "--comment=coscheml:app="+tag,
			fmt.Sprintf("--wrap=touch %s; exec sleep %d", m, runS))
		ids, markers = append(ids, id), append(markers, m)
	}
	defer c.cancel(ids...)
	c.mustRun("scontrol", "release", strconv.Itoa(ids[0])+","+strconv.Itoa(ids[1]))
	var js []job
	for i, id := range ids {
		if !c.waitStarted(id, markers[i], 30*time.Second) {
			t.Fatalf("job %d did not start:\n%s", id, c.showJob(id).Raw)
		}
		js = append(js, c.showJob(id))
	}
	if where(js[0]) != where(js[1]) {
		t.Fatalf("the pair %s + %s did not share a GPU: %s and %s", own[0], own[1], where(js[0]), where(js[1]))
	}
	c.waitGone(js...)

	// The Epilog's observations: each job next to the other.
	deadline := time.Now().Add(45 * time.Second)
	for {
		obs, _ := observation.ReadDir(c.cfg.ObservationDir)
		found := 0
		for _, o := range obs {
			for _, id := range ids {
				if o.JobID == strconv.Itoa(id) && len(o.CoTags) == 1 {
					found++
				}
			}
		}
		if found == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 co-located observations of jobs %v in %s; slurmd log:\n%s", found, ids, c.cfg.ObservationDir,
				grepFile(c.path("log"), "slurmd-", "observation"))
		}
		time.Sleep(250 * time.Millisecond)
	}

	// metrics_file switched on now: the configuration's change reloads the
	// plugin's snapshot (observations included) and the file follows within
	// its 30 s period.
	old := c.cfg
	defer c.writeConfig(old)
	cfg := c.cfg
	cfg.MetricsFile = c.path("var", "ctld.prom")
	c.writeConfig(cfg)
	deadline = time.Now().Add(60 * time.Second)
	var text string
	for {
		b, _ := os.ReadFile(cfg.MetricsFile)
		text = string(b)
		if strings.Contains(text, "\ncoscheml_prediction_abs_error_ratio_count 2\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics_file %s does not count the 2 co-located runs after 60s:\n%s", cfg.MetricsFile, text)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, want := range []string{"# TYPE coscheml_jobs_below_floor_total counter", "coscheml_prediction_abs_error_ratio_sum "} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics_file lacks %q:\n%s", want, text)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "coscheml_prediction_abs_error_ratio_sum") || strings.HasPrefix(l, "coscheml_jobs_below_floor_total{") {
			t.Logf("%s", l)
		}
	}
	c.mustCtldAlive()
}
