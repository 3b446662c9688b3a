// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"errors"
	"fmt"
	"github.com/coscheml/coscheml/pkg/comment"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/redecide"
	"github.com/coscheml/coscheml/pkg/residency"
)

// smPredictor is a transparent stand-in for the trained model: the more SM time the
// co-runners use, the slower the job, in proportion to its own SM use.
type smPredictor struct{}

// smPredictions counts smPredictor's predictions (the latency reports show how
// many a phase needed: the memo's work, free of machine noise).
var smPredictions atomic.Int64

func (smPredictor) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	smPredictions.Add(1)
	sum := 0.0
	for _, c := range co {
		sum += c.SMUtil.Mean
	}
	return 1 - job.SMUtil.Mean*sum/20000
}

func prof(tag string, class profile.Class, sm float64) *profile.Profile {
	return &profile.Profile{Tag: tag, Class: class, SMUtil: profile.Stat{Mean: sm, P95: sm, Max: sm}, MemUsedMiB: 10000}
}

type fixture struct {
	mu       sync.Mutex
	cfg      config.Config
	cfgErr   error
	cat      profile.Catalog
	modelErr error
	policy   func(config.Config, model.Predictor) (placement.Policy, error)
	now      time.Time
	e        *Engine
}

func newFixture(t testing.TB, edit func(*config.Config)) *fixture {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.ProfileDir = filepath.Join(dir, "profiles")
	cfg.ResidencyDir = filepath.Join(dir, "residency")
	cfg.DecisionLog = filepath.Join(dir, "decisions.log")
	cfg.DecisionKey = filepath.Join(dir, "decision.key")
	cfg.ObservationDir = filepath.Join(dir, "observations")
	os.MkdirAll(cfg.ObservationDir, 0o755)
	cfg.Cluster = config.ClusterSpec{Nodes: "n[1-3]", GPUsPerNode: 4, GPUMemoryMiB: 80000}
	os.MkdirAll(cfg.ResidencyDir, 0o755)
	if edit != nil {
		edit(&cfg)
	}
	f := &fixture{cfg: cfg, now: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)}
	f.cat = profile.Catalog{}
	for _, p := range []*profile.Profile{
		prof("light-a", profile.ClassTrain, 20), prof("light-b", profile.ClassTrain, 20),
		prof("heavy-a", profile.ClassHPC, 90), prof("heavy-b", profile.ClassHPC, 90),
		prof("mid", profile.ClassHPC, 35), prof("serve", profile.ClassInfer, 60),
	} {
		f.cat[p.Tag] = p
	}
	f.e = New(f.sources(), Options{Now: f.clock})
	t.Cleanup(f.e.Close)
	return f
}

// loopRuns writes the re-decide loop's heartbeat, valid for an hour of the
// fixture's clock, and reloads: `coscheml redecide --loop` runs beside slurmctld.
func (f *fixture) loopRuns(t testing.TB) {
	t.Helper()
	if err := redecide.WriteHeartbeat(f.cfg.HeartbeatPath(), f.clock().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.e.Reload()
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fixture) sources() Sources {
	def := DefaultSources("")
	return Sources{
		LoadConfig: func(string) (config.Config, error) { return f.cfg, f.cfgErr },
		LoadModel: func(string) (model.Predictor, error) {
			if f.modelErr != nil {
				return nil, f.modelErr
			}
			return smPredictor{}, nil
		},
		LoadCatalog: func(string, int) (profile.Catalog, []error, error) { return f.cat, nil, nil },
		NewPolicy: func(cfg config.Config, pred model.Predictor) (placement.Policy, error) {
			if f.policy != nil {
				return f.policy(cfg, pred)
			}
			return def.NewPolicy(cfg, pred)
		},
	}
}

func job(comment string) JobFields {
	return JobFields{Comment: comment, TresPerNode: "gres:gpu:1", UserID: 1000, MinNodes: 1, MaxNodes: 1, TimeLimit: 60, JobID: NoVal}
}

// lastRecord reads the decision log back from disk.
func (f *fixture) record(t *testing.T, res Result) decisionlog.Record {
	t.Helper()
	f.e.refresh.mu.Lock()
	f.e.refresh.dlog.w.Close() // flush; a new writer is opened on the next refresh
	f.e.refresh.dlog.w = nil
	f.e.refresh.mu.Unlock()
	d := comment.ParseComment(res.Comment)
	rec, err := decisionlog.Find(f.cfg.DecisionLog, d.DecisionID, "")
	if err != nil {
		t.Fatalf("decision %q: %v", d.DecisionID, err)
	}
	f.e.Reload()
	return rec
}

func TestGoodPairSharesOneGPU(t *testing.T) {
	f := newFixture(t, nil)
	a := f.e.Decide(job("coscheml:app=light-a"))
	b := f.e.Decide(job("nightly coscheml:app=light-b"))
	for _, r := range []Result{a, b} {
		if r.Code != Rewrite || r.ReqNodes != "n1" || r.TresPerNode != "gres:shard:2" {
			t.Fatalf("result %+v", r)
		}
	}
	if !strings.HasPrefix(b.Comment, "nightly coscheml:app=light-b coscheml-id=") {
		t.Fatalf("comment %q", b.Comment)
	}
	rb := f.record(t, b)
	if rb.Action != "share" || rb.GPU != 0 || rb.Node != "n1" || len(rb.CoRunners) != 1 || rb.CoRunners[0] != "light-a" {
		t.Fatalf("record %+v", rb)
	}
	if rb.PredictedSpeed < 0.97 || rb.PredictedSpeed > 0.99 {
		t.Fatalf("predicted speed %v, want 1-20*20/20000=0.98", rb.PredictedSpeed)
	}
	if !strings.Contains(logOf(b), "tag=light-b") || !strings.Contains(logOf(b), "action=share") || !strings.Contains(logOf(b), "node=n1 gpu=0") {
		t.Fatalf("log line %q", logOf(b))
	}
}

func TestHeavyPairGetsSeparateGPUs(t *testing.T) {
	f := newFixture(t, nil)
	a := f.e.Decide(job("coscheml:app=heavy-a"))
	b := f.e.Decide(job("coscheml:app=heavy-b"))
	if a.ReqNodes != "n1" || a.TresPerNode != "gres:shard:2" {
		t.Fatalf("first %+v", a)
	}
	// GPU 0 of n1 has 2 free shards: 3 make Slurm's first fit skip it for GPU 1.
	if b.Code != Rewrite || b.ReqNodes != "n1" || b.TresPerNode != "gres:shard:3" {
		t.Fatalf("second %+v", b)
	}
	rb := f.record(t, b)
	if rb.GPU != 1 || rb.Action != "exclusive" || rb.Shards != 3 {
		t.Fatalf("record %+v", rb)
	}
}

func TestInferNotSharedPastFloor(t *testing.T) {
	f := newFixture(t, nil)
	f.e.Decide(job("coscheml:app=mid"))
	s := f.e.Decide(job("coscheml:app=serve")) // 1-60*35/20000 = 0.895 < infer floor 0.9
	r := f.record(t, s)
	if r.Action != "exclusive" || r.GPU == 0 && r.Node == "n1" {
		t.Fatalf("infer job shared past its floor: %+v", r)
	}
	// As hpc (floor 0.75) the same pair shares.
	h := f.e.Decide(job("coscheml:app=serve,class=hpc"))
	rh := f.record(t, h)
	if rh.Action != "share" || rh.Class != "hpc" {
		t.Fatalf("hpc-class job: %+v", rh)
	}
}

func TestUntagged(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.e.Decide(job("just a comment")); r.Code != Unchanged || logOf(r) != "" || r.TresPerNode != "" {
		t.Fatalf("untagged pass: %+v", r)
	}
	if r := f.e.Decide(job("")); r.Code != Unchanged {
		t.Fatalf("no comment: %+v", r)
	}
	f.cfg.Untagged = "exclusive"
	f.e.Reload()
	r := f.e.Decide(job("x"))
	if r.Code != Rewrite || r.TresPerNode != "gres:shard:4" || r.ReqNodes != "" || !strings.HasPrefix(r.Comment, "x coscheml-id=") {
		t.Fatalf("untagged exclusive: %+v", r)
	}
	cpu := job("")
	cpu.TresPerNode = ""
	if r := f.e.Decide(cpu); r.Code != Unchanged {
		t.Fatalf("untagged CPU job: %+v", r)
	}
}

// TestNearMissWarned: a misspelt directive prefix runs the job untouched, with
// a warning that names the word; plain free text gets none.
func TestNearMissWarned(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct{ untagged, comment, tres, warn string }{
		{"pass", "cosceml:app=resnet18", "", `"cosceml:app=resnet18" in the comment is not a coscheml directive`},
		{"pass", "nightly coschemel:app=x,class=train", "", `"coschemel:app=x,class=train"`},
		{"pass", "see ticket:42", "", ""},
		{"exclusive", "cosceml:app=resnet18", "gres:shard:4", `"cosceml:app=resnet18" in the comment`},
	} {
		f.cfg.Untagged = tc.untagged
		f.e.Reload()
		r := f.e.Decide(job(tc.comment))
		if r.TresPerNode != tc.tres || (tc.warn == "") != (r.UserMsg == "") || !strings.Contains(r.UserMsg, tc.warn) {
			t.Errorf("%s %q: %+v", tc.untagged, tc.comment, r)
		}
		if tc.untagged == "pass" && r.Code != Unchanged {
			t.Errorf("%q: code %v, want unchanged", tc.comment, r.Code)
		}
	}
}

func TestBadInputRejected(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.UnknownProfile = config.UnknownReject })
	tests := []struct{ comment, msg string }{
		{"coscheml:app=" + strings.Repeat("x", 10000), "longer than 1024"},
		{"coscheml:app=../../etc/passwd", "invalid tag"},
		{"coscheml:app=a;rm${IFS}-rf", "invalid tag"},
		{"coscheml:app=a,gpus=3", "unknown key"},
		{"coscheml:app=nosuch", "unknown application profile 'nosuch'; see `coscheml profile list`"},
	}
	for _, tc := range tests {
		r := f.e.Decide(job(tc.comment))
		if r.Code != Reject || !strings.HasPrefix(r.UserMsg, "coscheml: ") || !strings.Contains(r.UserMsg, tc.msg) {
			t.Errorf("%.40q: %+v", tc.comment, r)
		}
		if len(r.UserMsg) > 300 || !strings.Contains(logOf(r), "outcome=reject") {
			t.Errorf("%.40q: message %d chars, log %q", tc.comment, len(r.UserMsg), logOf(r))
		}
	}
}

func TestBadInputExclusiveByConfig(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.UnknownProfile, c.InvalidTag = "exclusive", "exclusive" })
	for _, c := range []string{"coscheml:app=nosuch", "coscheml:app=A!"} {
		r := f.e.Decide(job(c))
		if r.Code != Rewrite || r.TresPerNode != "gres:shard:4" || !strings.Contains(r.UserMsg, "warning") {
			t.Errorf("%q: %+v", c, r)
		}
	}
}

func TestFailOpenModel(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.UnknownProfile = config.UnknownReject })
	f.modelErr = errors.New("load model /m: bad checksum")
	f.e.Close()
	f.e = New(f.sources(), Options{Now: f.clock}) // broken from the start
	defer f.e.Close()
	r1 := f.e.Decide(job("coscheml:app=light-a"))
	r2 := f.e.Decide(job("coscheml:app=light-b"))
	if r1.Code != Unchanged || r2.Code != Unchanged {
		t.Fatalf("degraded decisions: %+v %+v", r1, r2)
	}
	if r := f.e.Decide(job("coscheml:app=nosuch")); r.Code != Reject {
		t.Fatalf("unknown profile while the model is broken: %+v", r)
	}
	if !strings.Contains(logOf(r1), "bad checksum") || strings.Contains(logOf(r2), "bad checksum") {
		t.Fatalf("failure must be logged once: %q / %q", logOf(r1), logOf(r2))
	}
	// Untagged jobs carry the pending note only; nothing else is logged for them.
	f.modelErr = nil
	f.e.Reload()
	if r := f.e.Decide(job("coscheml:app=light-a")); r.Code != Rewrite || !strings.Contains(logOf(r), "model ok again") {
		t.Fatalf("recovered: %+v", r)
	}
	// A broken model file on reload keeps the last good model, reported once.
	f.modelErr = errors.New("truncated")
	f.e.Reload()
	if r := f.e.Decide(job("coscheml:app=light-b")); r.Code != Rewrite || !strings.Contains(logOf(r), "keeping the previous model") {
		t.Fatalf("bad reload: %+v", r)
	}
}

func TestFailOpenConfigAndResidency(t *testing.T) {
	f := newFixture(t, nil)
	f.cfgErr = errors.New("config x: unknown key")
	f.e.Reload()
	if r := f.e.Decide(job("coscheml:app=../x")); r.Code != Unchanged {
		t.Fatalf("config broken: %+v", r)
	}
	f.cfgErr = nil
	f.cfg.ResidencyDir = filepath.Join(t.TempDir(), "absent")
	f.e.Reload()
	r1 := f.e.Decide(job("coscheml:app=light-a"))
	r2 := f.e.Decide(job("coscheml:app=light-a"))
	if r1.Code != Unchanged || r2.Code != Unchanged || !strings.Contains(logOf(r1), "no such file") || strings.Contains(logOf(r2), "no such file") {
		t.Fatalf("residency unreadable: %+v / %+v", r1, r2)
	}
	// Bad tags are still answered while degraded: parsing needs no model.
	if r := f.e.Decide(job("coscheml:app=../x")); r.Code != Reject {
		t.Fatalf("bad tag while degraded: %+v", r)
	}
}

type panicPolicy struct{}

func (panicPolicy) Name() string { return "panic" }
func (panicPolicy) Place(*placement.Cluster, *placement.Request) placement.Decision {
	panic("boom")
}

func TestPanicRecovered(t *testing.T) {
	f := newFixture(t, nil)
	f.policy = func(config.Config, model.Predictor) (placement.Policy, error) { return panicPolicy{}, nil }
	f.e.Reload()
	r1 := f.e.Decide(job("coscheml:app=light-a"))
	r2 := f.e.Decide(job("coscheml:app=light-a"))
	if r1.Code != Unchanged || !strings.Contains(logOf(r1), "boom") || r2.Code != Unchanged || strings.Contains(logOf(r2), "boom") {
		t.Fatalf("panic: %+v / %+v", r1, r2)
	}
}

func TestReservationLifecycle(t *testing.T) {
	f := newFixture(t, nil)
	a := f.e.Decide(job("coscheml:app=heavy-a"))
	d := comment.ParseComment(a.Comment)
	// The prolog records the job with the decision id from the comment.
	store, _ := residency.Open(f.cfg.ResidencyDir)
	en := residency.Entry{JobID: "100", Node: "n1", GPUs: []int{0}, Shards: d.Shards, Tag: "heavy-a", DecisionID: d.DecisionID, Start: f.now, Expires: f.now.Add(time.Hour)}
	if err := store.Start(en); err != nil {
		t.Fatal(err)
	}
	f.e.Reload()
	f.e.view.mu.Lock()
	nres, reserved := len(f.e.view.cluster.Nodes[0].GPUs[0].Residents), len(f.e.view.res.list)
	f.e.view.mu.Unlock()
	if nres != 1 || reserved != 0 {
		t.Fatalf("after prolog: %d residents on n1/gpu0, %d reservations", nres, reserved)
	}
	// A second heavy job is kept off GPU 0 by the residency entry.
	b := f.e.Decide(job("coscheml:app=heavy-b"))
	if b.TresPerNode != "gres:shard:3" {
		t.Fatalf("second heavy: %+v", b)
	}
	// Its reservation expires after the TTL if the job never starts.
	f.advance(16 * time.Minute)
	f.e.Reload()
	f.e.view.mu.Lock()
	reserved = len(f.e.view.res.list)
	f.e.view.mu.Unlock()
	if reserved != 0 {
		t.Fatalf("reservation survived its TTL")
	}
	// Epilog: GPU 0 idle again, the next job takes it.
	if _, err := store.End("100", "n1", f.now); err != nil {
		t.Fatal(err)
	}
	f.e.Reload()
	c := f.e.Decide(job("coscheml:app=heavy-b"))
	if c.TresPerNode != "gres:shard:2" || c.ReqNodes != "n1" {
		t.Fatalf("after epilog: %+v", c)
	}
}

func TestModify(t *testing.T) {
	f := newFixture(t, nil)
	a := f.e.Decide(job("coscheml:app=heavy-a"))
	m := job(a.Comment)
	m.Modify, m.JobID, m.StoredComment = true, 55, a.Comment
	r := f.e.Decide(m)
	// The old reservation is dropped before deciding again, so the job keeps GPU 0.
	if r.Code != Rewrite || r.TresPerNode != "gres:shard:2" || strings.Count(r.Comment, "coscheml-id=") != 1 || !strings.Contains(logOf(r), "modify job=55") {
		t.Fatalf("modify: %+v", r)
	}
	f.e.view.mu.Lock()
	n := len(f.e.view.res.list)
	f.e.view.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d reservations after modify, want 1", n)
	}
	// Updates without a comment are not ours.
	if r := f.e.Decide(JobFields{Modify: true, JobID: 55, TresPerNode: "gres:gpu:2"}); r.Code != Unchanged || logOf(r) != "" {
		t.Fatalf("modify without comment: %+v", r)
	}
	// A running job keeps its placement.
	store, _ := residency.Open(f.cfg.ResidencyDir)
	store.Start(residency.Entry{JobID: "55", Node: "n1", GPUs: []int{0}, Shards: 2, Tag: "heavy-a", Start: f.now, Expires: f.now.Add(time.Hour)})
	f.e.Reload()
	if r := f.e.Decide(m); r.Code != Unchanged || !strings.Contains(logOf(r), "running") {
		t.Fatalf("modify running: %+v", r)
	}
}

func TestMultiGPU(t *testing.T) {
	f := newFixture(t, nil)
	f.e.Decide(job("coscheml:app=light-a")) // n1 now has a job
	j := job("coscheml:app=heavy-a")
	j.TresPerNode = "gres:gpu:2"
	r := f.e.Decide(j)
	if r.Code != Rewrite || r.ReqNodes != "n2" || r.TresPerNode != "gres:gpu:2" {
		t.Fatalf("multi-GPU: %+v", r)
	}
	r = f.e.Decide(j)
	if r.ReqNodes != "n3" {
		t.Fatalf("second multi-GPU: %+v", r)
	}
	if r = f.e.Decide(j); r.Code != Unchanged || !strings.Contains(logOf(r), "no node is free") {
		t.Fatalf("third multi-GPU: %+v", r)
	}
}

func TestPartitionAndNoGPU(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Cluster.Partition = "gpu" })
	j := job("coscheml:app=light-a")
	j.Partition = "cpu"
	if r := f.e.Decide(j); r.Code != Unchanged || !strings.Contains(logOf(r), "not managed") {
		t.Fatalf("other partition: %+v", r)
	}
	j.Partition, j.TresPerNode = "gpu", ""
	if r := f.e.Decide(j); r.Code != Unchanged || !strings.Contains(logOf(r), "no GPU requested") {
		t.Fatalf("no GPU: %+v", r)
	}
}

func TestFirstFitUnreachableGPU(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Cluster.Nodes = "n1" })
	store, _ := residency.Open(f.cfg.ResidencyDir)
	// light-a holds 2 shards of GPU 1; GPU 0 is idle. Joining GPU 1 needs a count
	// above GPU 0's 4 free shards: impossible, so the job must get GPU 0.
	store.Start(residency.Entry{JobID: "1", Node: "n1", GPUs: []int{1}, Shards: 2, Tag: "light-a", Start: f.now, Expires: f.now.Add(time.Hour)})
	f.e.Reload()
	r := f.e.Decide(job("coscheml:app=light-b"))
	rec := f.record(t, r)
	if r.Code != Rewrite || rec.GPU != 0 || r.TresPerNode != "gres:shard:2" {
		t.Fatalf("%+v / %+v", r, rec)
	}
	// Now GPUs 0 and 1 each have 2 free shards: GPU 1 stays unreachable. A third
	// job may join GPU 0 (exactly 2 shards) or take idle GPU 2 (3 or more shards,
	// past the 2 free on GPUs 0 and 1); never GPU 1.
	r3 := f.e.Decide(job("coscheml:app=light-a,class=hpc"))
	rec3 := f.record(t, r3)
	if rec3.Node != "n1" {
		t.Fatalf("third job: %+v", rec3)
	}
	switch rec3.GPU {
	case 0:
		if r3.TresPerNode != "gres:shard:2" {
			t.Fatalf("joining GPU 0 needs exactly its 2 free shards: %+v", r3)
		}
	case 2:
		if r3.TresPerNode != "gres:shard:3" {
			t.Fatalf("reaching GPU 2 past 2 free shards on GPUs 0 and 1 needs 3: %+v", r3)
		}
	default:
		t.Fatalf("third job on unreachable GPU %d: %+v", rec3.GPU, rec3)
	}
}

// A job that starts and ends between two reads of the residency store never shows
// in active/; its done marker must still release the reservation at once.
func TestShortJobReleasesReservation(t *testing.T) {
	f := newFixture(t, nil)
	a := f.e.Decide(job("coscheml:app=heavy-a"))
	d := comment.ParseComment(a.Comment)
	f.e.view.mu.Lock()
	reserved := len(f.e.view.res.list)
	f.e.view.mu.Unlock()
	if reserved != 1 {
		t.Fatalf("%d reservations after one decision, want 1", reserved)
	}
	store, _ := residency.Open(f.cfg.ResidencyDir)
	en := residency.Entry{JobID: "200", Node: a.ReqNodes, GPUs: []int{0}, Shards: d.Shards, Tag: "heavy-a", DecisionID: d.DecisionID, Start: f.now, Expires: f.now.Add(time.Hour)}
	if err := store.Start(en); err != nil {
		t.Fatal(err)
	}
	if _, err := store.End("200", a.ReqNodes, f.now.Add(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	f.e.Reload() // the first read after both prolog and epilog
	f.e.view.mu.Lock()
	reserved = len(f.e.view.res.list)
	residents := 0
	for _, g := range f.e.view.cluster.Nodes[0].GPUs {
		for _, r := range g.Residents {
			_ = r
			residents++
		}
	}
	f.e.view.mu.Unlock()
	if reserved != 0 || residents != 0 {
		t.Fatalf("after a job that already ended: %d reservations, %d residents on n1", reserved, residents)
	}
	// The next heavy job gets GPU 0 whole again rather than being steered around a
	// job that no longer exists.
	b := f.e.Decide(job("coscheml:app=heavy-b"))
	if b.TresPerNode != "gres:shard:2" || b.ReqNodes != a.ReqNodes {
		t.Fatalf("next job: %+v (first was %+v)", b, a)
	}
}

// sbatch leaves min_nodes unset (NoVal) without -N: one node, not a multi-node job.
func TestMinNodesUnsetIsOneNode(t *testing.T) {
	f := newFixture(t, nil)
	j := job("coscheml:app=light-a")
	j.MinNodes, j.MaxNodes = NoVal, NoVal
	r := f.e.Decide(j)
	if r.ReqNodes == "" || !strings.HasPrefix(r.TresPerNode, "gres:shard:") {
		t.Fatalf("unset min_nodes was not placed on one node: %+v", r)
	}
}

// shard_pinning: typed names the chosen GPU's Type in the request, in the syntax of
// the job's own request, with exactly the shards a share needs: a heavy job next to
// a resident on GPU 0 gets GPU 1 with 2 shards (first-fit would need 3).
func TestTypedPinning(t *testing.T) {
	for _, tc := range []struct {
		tres, prefix, want string
	}{
		{"gres:gpu:1", "g", "gres:shard:g1:2"},
		{"gres/gpu:1", "g", "gres/shard:g1:2"},
		{"cpu=4,gres/gpu:1", "gpu_", "cpu=4,gres/shard:gpu_1:2"},
	} {
		f := newFixture(t, func(c *config.Config) {
			c.ShardPinning, c.ShardTypePrefix = config.PinTyped, tc.prefix
		})
		a := f.e.Decide(job("coscheml:app=heavy-a"))
		if a.Code != Rewrite || a.ReqNodes != "n1" || a.TresPerNode != "gres:shard:"+tc.prefix+"0:2" {
			t.Fatalf("first job: %+v", a)
		}
		j := job("coscheml:app=heavy-b")
		j.TresPerNode = tc.tres
		b := f.e.Decide(j)
		if b.Code != Rewrite || b.ReqNodes != "n1" || b.TresPerNode != tc.want {
			t.Fatalf("%s: second job %+v, want %q", tc.tres, b, tc.want)
		}
		if d := comment.ParseComment(b.Comment); d.Shards != 2 || !strings.Contains(logOf(b), "gpu=1 shards=2") {
			t.Fatalf("%s: token %+v, log %q", tc.tres, d, logOf(b))
		}
	}
}

// The decision stages change nothing: deciding twice on the same snapshot and view
// gives the same outcome and leaves the view as it was; only the engine applies the
// reservation (and takes the decision ID) afterwards.
func TestDecisionHasNoSideEffects(t *testing.T) {
	f := newFixture(t, nil)
	f.e.Decide(job("coscheml:app=light-a")) // a reservation in the view
	f.e.view.mu.Lock()
	defer f.e.view.mu.Unlock()
	before := f.e.view.cluster.Clone()
	reserved, seq := len(f.e.view.res.list), f.e.idSeq
	var outs []outcome
	for i := 0; i < 2; i++ {
		q := query{snap: f.e.snap.Load(), j: job("coscheml:app=heavy-a"), now: f.now, idPfx: "t", view: &f.e.view.viewState, seq: 7}
		in, out, ok := prepare(&q)
		if !ok {
			t.Fatalf("not placed: %+v", out.res)
		}
		outs = append(outs, place(&q, &in))
	}
	a, b := outs[0], outs[1]
	if a.res != b.res || !a.reserve || !b.reserve || a.rv.node != b.rv.node || a.rv.slots != b.rv.slots || !a.usedID {
		t.Fatalf("two decisions on one state differ: %+v / %+v", a, b)
	}
	if !strings.HasPrefix(a.rv.id, "t-7-") || !strings.Contains(a.res.Comment, "coscheml-id="+a.rv.id+":") {
		t.Fatalf("decision ID not the one offered: %+v", a)
	}
	if len(f.e.view.res.list) != reserved || f.e.idSeq != seq {
		t.Fatalf("deciding changed the view: %d reservations (was %d), id seq %d (was %d)", len(f.e.view.res.list), reserved, f.e.idSeq, seq)
	}
	if err := f.e.view.cluster.Check(); err != nil {
		t.Fatal(err)
	}
	for n := range before.Nodes {
		for g := range before.Nodes[n].GPUs {
			if x, y := len(before.Nodes[n].GPUs[g].Residents), len(f.e.view.cluster.Nodes[n].GPUs[g].Residents); x != y {
				t.Fatalf("n%d/gpu%d: %d residents, was %d", n+1, g, y, x)
			}
		}
	}
}

// TestWaitDeferral: a tagged job that nothing fits is deferred (wait_defer) for the
// re-decide loop, keeping its whole-GPU request; its re-decision through
// job_modify defers it again or, once it is placed, makes it eligible now. Only
// the plugin's own deferrals have their begin time changed.
func TestWaitDeferral(t *testing.T) {
	const userBegin = 1_900_000_000 // the user's --begin (unix seconds)
	cases := []struct {
		name        string
		waitDefer   time.Duration
		submitBegin int64 // job_desc begin_time at submit
		free        bool  // the blocking job's reservation expires before the re-decision
		modifyBegin int64 // the update's StartTime
		wantSubmit  int64 // answer's begin_time at submit, seconds after now (-1: 0, left alone)
		wantModify  int64 // at the re-decision (-1: 0)
		wantAction  string
		noLoop      bool // no re-decide loop runs (no heartbeat)
	}{
		{name: "off: a wait runs on a whole GPU", waitDefer: 0, wantSubmit: -1, wantModify: -1, wantAction: "wait"},
		{name: "no loop running: not deferred", waitDefer: 30 * time.Second, noLoop: true, wantSubmit: -1, wantModify: -1, wantAction: "wait"},
		{name: "deferred, still no room: deferred again", waitDefer: 30 * time.Second, wantSubmit: 30, wantModify: 30, wantAction: "wait"},
		{name: "deferred, room now: placed and eligible now", waitDefer: 30 * time.Second, free: true, wantSubmit: 30, wantModify: 0, wantAction: "exclusive"},
		{name: "user's --begin kept at submit and after", waitDefer: 30 * time.Second, submitBegin: userBegin, free: true, wantSubmit: -1, wantModify: -1, wantAction: "exclusive"},
		{name: "user's --begin not deferred again", waitDefer: 30 * time.Second, submitBegin: userBegin, wantSubmit: -1, wantModify: -1, wantAction: "wait"},
		{name: "update's own StartTime without our deferral", waitDefer: 30 * time.Second, submitBegin: userBegin, modifyBegin: userBegin + 60, wantSubmit: -1, wantModify: -1, wantAction: "wait"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n1", 1
				c.WaitDefer = tc.waitDefer
			})
			if !tc.noLoop {
				f.loopRuns(t)
			}
			first := f.e.Decide(job("coscheml:app=heavy-a"))
			if first.Code != Rewrite || first.BeginTime != 0 {
				t.Fatalf("first job: %+v", first)
			}
			j := job("coscheml:app=heavy-b")
			j.BeginTime = tc.submitBegin
			w := f.e.Decide(j)
			if w.Code != Rewrite || w.TresPerNode != "gres:shard:4" || w.ReqNodes != "" {
				t.Fatalf("wait answer is not the whole-GPU fail-safe: %+v", w)
			}
			if got := rel(w.BeginTime, f.clock()); got != tc.wantSubmit {
				t.Fatalf("submit begin_time %+d s from now, want %+d (%+v)", got, tc.wantSubmit, w)
			}
			if rec := f.record(t, w); rec.Action != "wait" || (tc.wantSubmit > 0) != strings.Contains(rec.Reason, "deferred") {
				t.Fatalf("submit record %+v", rec)
			}
			f.advance(10 * time.Second)
			if tc.free {
				f.advance(16 * time.Minute) // past the reservation TTL: the GPU is idle
				f.e.Reload()
			}
			m := JobFields{Comment: w.Comment, StoredComment: w.Comment, TresPerNode: w.TresPerNode, UserID: 0, Admin: true, MinNodes: 1, JobID: 77, Modify: true, BeginTime: tc.modifyBegin} // the re-decide loop: root (the shim sets Admin)
			r := f.e.Decide(m)
			if r.Code != Rewrite {
				t.Fatalf("re-decision: %+v", r)
			}
			if got := rel(r.BeginTime, f.clock()); got != tc.wantModify {
				t.Fatalf("re-decision begin_time %+d s from now, want %+d (%+v)", got, tc.wantModify, r)
			}
			rec := f.record(t, r)
			if rec.Action != tc.wantAction || rec.Op != "modify" {
				t.Fatalf("re-decision record %+v, want action %s", rec, tc.wantAction)
			}
			if tc.wantAction != "wait" && (r.ReqNodes != "n1" || r.TresPerNode != "gres:shard:2") {
				t.Fatalf("placed re-decision not pinned to its GPU: %+v", r)
			}
		})
	}
}

// rel is an answer's begin_time in seconds after now (-1 when it is 0: unchanged).
func rel(begin int64, now time.Time) int64 {
	if begin == 0 {
		return -1
	}
	return begin - now.Unix()
}

// logOf is everything r has for slurmctld's log: its info lines, then the
// decision line (at log_decisions).
func logOf(r Result) string {
	return strings.TrimSpace(r.Log + "\n" + r.Line)
}

// TestReloadLogsApplied: a reload that applies a changed configuration says so
// in slurmctld's log (with the next job), naming what changed and the settings
// in effect; a reload that changes nothing, and the first load, say nothing.
func TestReloadLogsApplied(t *testing.T) {
	f := newFixture(t, nil)
	f.e.Decide(job("")) // the first load's notes
	f.e.Reload()
	if r := f.e.Decide(job("")); strings.Contains(r.Log, "applied") {
		t.Fatalf("unchanged reload logged: %q", r.Log)
	}
	f.cfg.WaitDefer = 45 * time.Second
	f.cfg.Untagged = "exclusive"
	f.e.Reload()
	r := f.e.Decide(job(""))
	for _, want := range []string{"applied a new configuration from ", "policy=coscheml ", "untagged=exclusive ", "wait_defer=45s "} {
		if !strings.Contains(r.Log, want) {
			t.Errorf("log lacks %q: %q", want, r.Log)
		}
	}
	if r := f.e.Decide(job("")); strings.Contains(r.Log, "applied") {
		t.Errorf("logged twice: %q", r.Log)
	}
}

// With typed pinning and share_multi_gpu, a several-GPU job is placed GPU by
// GPU: K shards of each chosen GPU's Type on one node, next to one-GPU
// residents where every floor holds, with a reservation on each GPU; on 22.05
// an update of it is left as it is, and the loop's own pin of it is placed
// again on 23.11 and later.
func TestMultiGPUShares(t *testing.T) {
	const v2205, v2605 = 22<<16 | 5<<8 | 8, 26<<16 | 5<<8 | 3
	for _, tc := range []struct {
		version uint32
		in, pfx string
	}{{v2205, "gres:gpu:2", "gres:"}, {v2605, "gres/gpu:2", "gres/"}} {
		t.Run(fmt.Sprintf("%d.%02d", tc.version>>16, tc.version>>8&0xff), func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n1", 4
				c.ShardPinning, c.ShardTypePrefix = config.PinTyped, "g"
			})
			f.e.Close()
			f.e = New(f.sources(), Options{Now: f.clock, SlurmVersion: func() uint32 { return tc.version }})
			t.Cleanup(f.e.Close)
			// Three one-GPU residents: light on GPUs 0 and 1, heavy on GPU 2.
			store, _ := residency.Open(f.cfg.ResidencyDir)
			for i, tag := range []string{"light-a", "light-b", "heavy-a"} {
				store.Start(residency.Entry{JobID: strconv.Itoa(10 + i), Node: "n1", GPUs: []int{i}, Shards: 2, Tag: tag, Start: f.now, Expires: f.now.Add(time.Hour)})
			}
			f.e.Reload()
			j := job("coscheml:app=light-a")
			j.TresPerNode = tc.in
			r := f.e.Decide(j)
			d := comment.ParseComment(r.Comment)
			want := tc.pfx + "shard:g0:2," + tc.pfx + "shard:g1:2"
			if r.Code != Rewrite || r.ReqNodes != "n1" || r.TresPerNode != want || d.Shards != 2 {
				t.Fatalf("several GPUs: %+v; want %s on n1 (the light residents' GPUs, not the heavy one's)", r, want)
			}
			rec := f.record(t, r)
			if rec.Action != "share" || !slices.Equal(rec.GPUs, []int{0, 1}) || rec.Shards != 2 || len(rec.CoRunners) != 2 {
				t.Errorf("decision record %+v", rec)
			}
			var rv reservation
			for _, x := range f.e.view.reservations() {
				if x.id == d.DecisionID {
					rv = x
				}
			}
			if !slices.Equal(rv.gpus, []int{0, 1}) || rv.slots != 2 {
				t.Errorf("reservation %+v, want 2 shards on GPUs 0 and 1", rv)
			}
			// The re-decide loop sends a requeued job's own pin back.
			m := JobFields{Comment: r.Comment, StoredComment: r.Comment, TresPerNode: want, MinNodes: 1, JobID: 77, Modify: true, Admin: true}
			u := f.e.Decide(m)
			switch tc.version {
			case v2205:
				if u.Code != Unchanged || !strings.Contains(logOf(u), "only the submit places a several-GPU job") {
					t.Errorf("22.05 update: %+v", u)
				}
			default:
				if u.Code != Rewrite || u.ReqNodes != "n1" || strings.Count(u.TresPerNode, "shard:g") != 2 {
					t.Errorf("the loop's re-decision: %+v", u)
				}
			}
		})
	}
}

// share_multi_gpu off, or first-fit pinning: a several-GPU job keeps whole
// GPUs on a node without other jobs.
func TestMultiGPUWholeWhenNotShared(t *testing.T) {
	for _, edit := range []func(*config.Config){
		func(c *config.Config) { c.ShardPinning, c.ShareMultiGPU = config.PinTyped, false },
		func(c *config.Config) { c.ShardPinning = config.PinFirstFit },
	} {
		f := newFixture(t, edit)
		f.e.Decide(job("coscheml:app=light-a"))
		j := job("coscheml:app=light-a")
		j.TresPerNode = "gres:gpu:2"
		if r := f.e.Decide(j); r.Code != Rewrite || r.ReqNodes != "n2" || r.TresPerNode != "gres:gpu:2" {
			t.Errorf("%+v: want whole GPUs on n2, the node without jobs", r)
		}
	}
}

// A job of -N 2 with several GPUs per node spans two nodes at the same GPUs:
// K shards of each chosen GPU's Type on exactly those nodes, the GPUs its
// residents leave compatible on both, a reservation on each node; a range of
// node counts is left to Slurm; the job's node count outlives an update that
// names none (the plugin's own memory of the job) and one that names it (the
// re-decide loop after a restart).
func TestMultiNodeSpan(t *testing.T) {
	const v2605 = 26<<16 | 5<<8 | 3
	f := newFixture(t, func(c *config.Config) {
		c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n[1-3]", 4
		c.ShardPinning, c.ShardTypePrefix = config.PinTyped, "g"
	})
	f.e.Close()
	f.e = New(f.sources(), Options{Now: f.clock, SlurmVersion: func() uint32 { return v2605 }})
	t.Cleanup(f.e.Close)
	// Full GPUs (every shard held): n1 GPU 0, n2 GPU 1, every GPU of n3. Two
	// nodes have GPUs 2 and 3 in common.
	store, _ := residency.Open(f.cfg.ResidencyDir)
	id := 10
	for node, gpus := range map[string][]int{"n1": {0}, "n2": {1}, "n3": {0, 1, 2, 3}} {
		for _, g := range gpus {
			store.Start(residency.Entry{JobID: strconv.Itoa(id), Node: node, GPUs: []int{g}, Shards: 4, Tag: "heavy-a", Start: f.now, Expires: f.now.Add(time.Hour)})
			id++
		}
	}
	f.e.Reload()
	// One GPU per node: a whole GPU per node through shards, not pinned.
	j := job("coscheml:app=heavy-b")
	j.TresPerNode, j.MinNodes, j.MaxNodes = "gres/gpu:1", 2, 2
	if r := f.e.Decide(j); r.Code != Rewrite || r.ReqNodes != "" {
		t.Fatalf("one GPU per node: %+v", r)
	}
	j = job("coscheml:app=light-a")
	j.TresPerNode, j.MinNodes, j.MaxNodes = "gres/gpu:2", 2, 2
	r := f.e.Decide(j)
	d := comment.ParseComment(r.Comment)
	rec := f.record(t, r)
	if r.Code != Rewrite || r.ReqNodes != "n1,n2" || r.TresPerNode != "gres/shard:g2:2,gres/shard:g3:2" || d.Shards != 2 ||
		!slices.Equal(rec.Nodes, []string{"n1", "n2"}) || !slices.Equal(rec.GPUs, []int{2, 3}) {
		t.Fatalf("span: %+v / %+v; want GPUs 2 and 3 of n1 and n2", r, rec)
	}
	var rv reservation
	for _, x := range f.e.view.reservations() {
		if x.id == d.DecisionID {
			rv = x
		}
	}
	if len(rv.more) != 1 || len(rv.gpus) != 2 {
		t.Fatalf("reservation %+v: want the same 2 GPUs on two nodes", rv)
	}
	// The reservation holds on both nodes: a second span joins it on each.
	j2 := job("coscheml:app=light-b")
	j2.TresPerNode, j2.MinNodes, j2.MaxNodes = "gres/gpu:2", 2, 2
	r2 := f.e.Decide(j2)
	rec2 := f.record(t, r2)
	for _, want := range []string{"n1/gpu2 with queued decision " + d.DecisionID, "n2/gpu3 with queued decision " + d.DecisionID} {
		if rec2.Action != "share" || !strings.Contains(rec2.Reason, want) {
			t.Errorf("second span %+v: lacks %q (the first one's reservation on both nodes)", rec2, want)
		}
	}
	// A range of node counts: Slurm could add a node the plugin did not choose.
	jr := job("coscheml:app=light-a")
	jr.TresPerNode, jr.MinNodes, jr.MaxNodes = "gres/gpu:2", 2, 4
	if rr := f.e.Decide(jr); rr.Code != Unchanged || !strings.Contains(logOf(rr), "range of node counts") {
		t.Errorf("node range: %+v", rr)
	}
	// The job's own update names no node count: its decision knew two.
	m := JobFields{Comment: r.Comment, StoredComment: r.Comment, TresPerNode: r.TresPerNode, MinNodes: 1, MaxNodes: NoVal, JobID: 77, Modify: true, Admin: true}
	if u := f.e.Decide(m); u.Code != Rewrite || strings.Count(u.ReqNodes, ",") != 1 {
		t.Errorf("update without a node count: %+v; want two nodes again", u)
	}
}
