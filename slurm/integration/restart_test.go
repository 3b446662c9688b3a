// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
)

// testRestart: a queued job's reservation survives a slurmctld restart (rebuilt
// from the decision log), and another user who copies the job's decision id from
// its public comment neither drops the reservation nor keeps the id.
func testRestart(t *testing.T, c *cluster) {
	tags := pickTags(t, c.cfg, c.a.repo)
	c.waitNoJobs(60 * time.Second)
	time.Sleep(residencySettle)
	var ids []int
	defer func() { c.cancel(ids...) }()
	held := func(tag string) job {
		t.Helper()
		id := c.mustSbatch("--hold", "--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app="+tag, "--wrap=true")
		ids = append(ids, id)
		return c.showJob(id)
	}
	// pinned submits held jobs until one is pinned: right after a (re)start the
	// plugin's node-state poll may not have seen the nodes registered yet, and a
	// job it cannot pin waits unpinned (cancelled here).
	pinned := func(tag string) job {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			p := held(tag)
			if p.ReqNodeList != "(null)" && p.ReqNodeList != "" {
				return p
			}
			c.cancel(p.ID)
			if time.Now().After(deadline) {
				t.Fatalf("no %s job pinned within 20 s; plugin log:\n%s", tag, strings.Join(c.logLines("coscheml"), "\n"))
			}
			time.Sleep(time.Second)
		}
	}
	// The victim: a heavy job, pinned and held (it never starts, so only its
	// reservation keeps its GPU from the next heavy job).
	v := pinned(tags.heavyA)
	d := comment.ParseComment(v.Comment)
	if d.DecisionID == "" {
		t.Fatalf("victim job %d has no decision id: %q", v.ID, v.Comment)
	}
	c.restartCtld()
	onVictimsGPU := func(o job) bool { return o.ReqNodeList == v.ReqNodeList && o.TresPerNode == v.TresPerNode }
	// The first heavy job the restarted plugin pins must not get the victim's GPU.
	p := pinned(tags.heavyB)
	if onVictimsGPU(p) {
		t.Errorf("after the restart, job %d was placed on the GPU reserved for held job %d (%s %s): the reservation was lost",
			p.ID, v.ID, v.ReqNodeList, v.TresPerNode)
	}
	t.Logf("after restart: job %d pinned to %s %s", p.ID, p.ReqNodeList, p.TresPerNode)

	// Another user copies the victim's token (squeue shows comments to all). The
	// cluster folder is private: give that user a readable copy of slurm.conf.
	tok := comment.FormatToken(d.DecisionID, d.Shards)
	pub, err := os.MkdirTemp("", "coscheml-restart-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pub)
	conf, err := os.ReadFile(c.path("slurm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pub, "slurm.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", "-u", "nobody", "--", c.a.slurm.bin("sbatch"), "--hold", "--gres=gpu:1",
		"-o", "/dev/null", "--chdir=/tmp", "--comment=coscheml:app="+tags.heavyB+" "+tok, "--wrap=true")
	cmd.Env = append(c.env, "SLURM_CONF="+filepath.Join(pub, "slurm.conf"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sbatch as nobody: %v: %s", err, errb.String())
	}
	m := jobIDRE.FindStringSubmatch(strings.TrimSpace(out.String()))
	if m == nil {
		t.Fatalf("sbatch as nobody printed no job id: %q", out.String())
	}
	fid, _ := strconv.Atoi(m[1])
	f := c.showJob(fid)
	ids = append(ids, f.ID)
	if strings.Contains(f.Comment, d.DecisionID) {
		t.Errorf("the forged job %d keeps the victim's decision id: %q", f.ID, f.Comment)
	}

	// The reservation survived both: the next heavy job is kept off the victim's GPU.
	h := pinned(tags.heavyB)
	t.Logf("victim %d: %s %s; forged %d: %s %s; next %d: %s %s", v.ID, v.ReqNodeList, v.TresPerNode,
		f.ID, f.ReqNodeList, f.TresPerNode, h.ID, h.ReqNodeList, h.TresPerNode)
	for _, o := range []job{f, h} {
		if onVictimsGPU(o) {
			t.Errorf("job %d was placed on the GPU reserved for held job %d (%s %s): the reservation was lost",
				o.ID, v.ID, v.ReqNodeList, v.TresPerNode)
		}
	}
	if c.countLog("reservations of queued jobs from the decision log") == 0 {
		t.Errorf("the restarted plugin did not log the reservations it rebuilt")
	}
	if n := c.countLog("removed a coscheml-id token"); n == 0 {
		t.Errorf("no log line for the removed token")
	}
}
