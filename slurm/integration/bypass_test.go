// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
)

// The ordinary user of the bypass checks: nobody exists on every Debian system
// and is neither root nor SlurmUser (root here).
const (
	userUID = 65534
	userGID = 65534
)

// runAsUser runs a Slurm client as the ordinary user (munge authenticates the
// process's uid, so slurmctld sees that user as the submitter).
func (c *cluster) runAsUser(name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.a.slurm.bin(name), args...)
	cmd.Env = c.env
	cmd.Dir = "/tmp"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: userUID, Gid: userGID}}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// userSbatch submits a held job as the ordinary user.
func (c *cluster) userSbatch(args ...string) (int, string, error) {
	args = append([]string{"--hold", "--chdir=/tmp", "-o", "/dev/null"}, append(args, "--wrap=true")...)
	stdout, stderr, err := c.runAsUser("sbatch", args...)
	if err != nil {
		return 0, stderr, fmt.Errorf("sbatch (uid %d) %s: %w", userUID, strings.Join(args, " "), err)
	}
	m := jobIDRE.FindStringSubmatch(strings.TrimSpace(stdout))
	if m == nil {
		return 0, stderr, fmt.Errorf("sbatch printed no job ID: %q", stdout)
	}
	id, _ := strconv.Atoi(m[1])
	return id, stderr, nil
}

// userUpdate runs `scontrol update JobId=id args...` as the ordinary user.
func (c *cluster) userUpdate(id int, args ...string) (string, error) {
	_, stderr, err := c.runAsUser("scontrol", append([]string{"update", "JobId=" + strconv.Itoa(id)}, args...)...)
	return strings.TrimSpace(stderr), err
}

// openForUser lets the ordinary user read the cluster's slurm.conf (the folder is
// private to root by default).
func (c *cluster) openForUser() {
	if err := os.Chmod(c.dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
}

// testBypass: an ordinary user cannot get a job next to another user's job by a
// raw shard request or by `scontrol update` of a pending job's GRES or node list,
// under untagged: pass (the default) and untagged: exclusive; root (an admin) can.
func testBypass(t *testing.T, c *cluster) {
	c.openForUser()
	prefix := "gres:"
	if c.a.slurm.atLeast(23, 11) {
		prefix = "gres/"
	}
	refused := func(what, stderr string, err error, want string) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s: accepted", what)
		case !strings.Contains(strings.ToLower(stderr), "denied") && !strings.Contains(stderr, want):
			t.Errorf("%s: refused without the reason (want %q or Slurm's access denied): %s", what, want, stderr)
		default:
			t.Logf("%s -> %s", what, strings.ReplaceAll(stderr, "\n", " | "))
		}
	}

	// untagged: pass. A raw shard request pinned to a node.
	_, stderr, err := c.userSbatch("--gres=shard:1", "-w", c.nodes[0])
	refused("user sbatch --gres=shard:1 -w n1", stderr, err, "shards directly")
	if err != nil && !strings.Contains(stderr, "coscheml") {
		t.Errorf("sbatch's stderr does not carry the plugin's message: %s", stderr)
	}
	root := c.mustSbatch("--hold", "-o", "/dev/null", "--gres=shard:1", "-w", c.nodes[0], "--wrap=true")
	t.Logf("root sbatch --gres=shard:1 -w n1 -> job %d (admin exempt)", root)

	// An untagged whole-GPU job, then updates of it without a comment.
	id, stderr, err := c.userSbatch("--gres=gpu:1")
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	msg, err := c.userUpdate(id, "TresPerNode="+prefix+"shard:1")
	refused("user update TresPerNode=shard:1", msg, err, "shards directly")
	msg, err = c.userUpdate(id, "NodeList="+c.nodes[0])
	refused("user update NodeList=n1", msg, err, "node list")
	if j := c.showJob(id); j.TresPerNode != "gres:gpu:1" || j.ReqNodeList != "(null)" {
		t.Errorf("refused updates changed the job: TresPerNode=%s ReqNodeList=%s", j.TresPerNode, j.ReqNodeList)
	}
	if msg, err := c.userUpdate(id, "NodeList="+c.nodes[0], "TresPerNode="+prefix+"gpu:1"); err != nil {
		t.Errorf("user update NodeList with the GPU request: %v: %s", err, msg)
	}
	if _, err := c.run("scontrol", "update", "JobId="+strconv.Itoa(id), "NodeList="+c.nodes[1]); err != nil {
		t.Errorf("root update NodeList (admin exempt): %v", err)
	}
	if n := c.countLog("job_submit/coscheml", "modify job="+strconv.Itoa(id)+" ", "raw_requests=refuse"); n < 2 {
		t.Errorf("%d refusal lines for job %d in slurmctld's log, want 2:\n%s", n, id, c.lastLogLine("raw_requests"))
	}
	c.cancel(root, id)

	// untagged: exclusive. The update of the GPU request alone is decided again
	// (a whole GPU through shards); a node list alone is refused.
	orig := c.cfg
	cfg := orig
	cfg.Untagged = "exclusive"
	c.writeConfig(cfg)
	c.restartCtld()
	defer func() {
		c.writeConfig(orig)
		c.restartCtld()
	}()
	id, stderr, err = c.userSbatch("--gres=gpu:1")
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	all := fmt.Sprintf("gres:shard:%d", shardsPerGPU)
	if j := c.showJob(id); j.TresPerNode != all {
		t.Errorf("untagged exclusive: TresPerNode=%s, want %s", j.TresPerNode, all)
	}
	msg, err = c.userUpdate(id, "NodeList="+c.nodes[0])
	refused("exclusive: user update NodeList=n1", msg, err, "node list")
	if msg, err := c.userUpdate(id, "TresPerNode="+prefix+"shard:1"); err != nil {
		t.Errorf("exclusive: user update TresPerNode=shard:1: %v: %s", err, msg)
	} else if j := c.showJob(id); j.TresPerNode != all {
		t.Errorf("exclusive: update to shard:1 not decided again: TresPerNode=%s, want %s", j.TresPerNode, all)
	}
	if n := c.countLog("job_submit/coscheml", "modify job="+strconv.Itoa(id)+" ", "outcome=rewrite"); n == 0 {
		t.Errorf("no rewrite line for the update of job %d: %s", id, c.lastLogLine("modify job="+strconv.Itoa(id)))
	}
	c.cancel(id)
	c.mustCtldAlive()
}

// testBootstrap: with the default unknown_profile (bootstrap) an ordinary user's
// job of an application without a profile is accepted alone on a whole GPU (all
// its shards, no node named) and the user is told it is profiled there.
func testBootstrap(t *testing.T, c *cluster) {
	if c.cfg.UnknownProfile != config.UnknownBootstrap {
		t.Fatalf("unknown_profile %q, want the default bootstrap", c.cfg.UnknownProfile)
	}
	c.openForUser()
	const tag = "integration-bootstrap-app"
	id, stderr, err := c.userSbatch("--gres=gpu:1", "--comment=coscheml:app="+tag+",class=train")
	if err != nil {
		t.Fatalf("bootstrap job refused: %v: %s", err, stderr)
	}
	defer c.cancel(id)
	if !strings.Contains(stderr, "coscheml") || !strings.Contains(stderr, tag) || !strings.Contains(stderr, "profiled") {
		t.Errorf("no bootstrap note on sbatch's stderr: %q", stderr)
	} else {
		t.Logf("sbatch: %s", strings.TrimSpace(stderr))
	}
	j := c.showJob(id)
	if want := fmt.Sprintf("gres:shard:%d", shardsPerGPU); j.TresPerNode != want || j.ReqNodeList != "(null)" {
		t.Errorf("bootstrap job: TresPerNode=%s ReqNodeList=%s, want %s on any node", j.TresPerNode, j.ReqNodeList, want)
	}
	if tagOf(j.Comment) != tag || decisionID(j.Comment) == "" {
		t.Errorf("bootstrap job's comment %q lacks its tag or decision ID (the Prolog reads both)", j.Comment)
	}
}
