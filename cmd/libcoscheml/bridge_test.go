// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/cmd/libcoscheml/internal/cqtest"
	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/submit"
)

func writeConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"profiles", "residency"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	// One known application, for the decisions that honour a job's options.
	st, err := profile.Open(filepath.Join(dir, "profiles"))
	if err != nil {
		t.Fatal(err)
	}
	sm := profile.Stat{Mean: 20, P95: 25, Max: 30}
	if err := st.Put(&profile.Profile{Tag: "harness-app", Class: profile.ClassTrain, SMUtil: sm, MemBWUtil: sm, MemUsedMiB: 8000}); err != nil {
		t.Fatal(err)
	}
	y := "profile_dir: " + filepath.Join(dir, "profiles") + "\nresidency_dir: " + filepath.Join(dir, "residency") +
		"\ndecision_log: " + filepath.Join(dir, "decisions.log") + "\ndecision_key: " + filepath.Join(dir, "decision.key") +
		"\ncluster:\n  nodes: n[1-3]\n  gpus_per_node: 4\n  gpu_memory_mib: 80000\n" + extra
	path := filepath.Join(dir, "coscheml.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBridgeGo(t *testing.T) {
	t.Cleanup(func() {
		if e := engine.Swap(nil); e != nil {
			e.Close()
		}
	})
	if r := decideGo(submit.JobFields{Comment: "coscheml:app=x"}); r.Code != submit.Unchanged {
		t.Fatalf("without init: %+v", r)
	}
	if rc, _ := initGo(writeConfig(t, "unknown_profile: reject\n"), 0x160508, ""); rc != 0 {
		t.Fatalf("init with a good config: %d (%v)", rc, engine.Load().Problems())
	}
	r := decideGo(submit.JobFields{Comment: "coscheml:app=nosuch", TresPerNode: "gres:gpu:1", MinNodes: 1, JobID: submit.NoVal})
	if r.Code != submit.Reject || !strings.Contains(r.UserMsg, "unknown application profile 'nosuch'") {
		t.Fatalf("unknown profile: %+v", r)
	}
	if rc, _ := initGo(writeConfig(t, "model_path: /nonexistent/x.model\nunknown_profile: reject\n"), 0x160508, ""); rc != 1 {
		t.Fatalf("init with a missing model: %d, want 1", rc)
	}
	r = decideGo(submit.JobFields{Comment: "coscheml:app=nosuch", TresPerNode: "gres:gpu:1", MinNodes: 1, JobID: submit.NoVal})
	// The model is needed for placement only: tags are still checked against the
	// profiles, and the failure is in the first job's log.
	if r.Code != submit.Reject || !strings.Contains(r.Log, "nonexistent") {
		t.Fatalf("degraded: %+v", r)
	}
	r = decideGo(submit.JobFields{Comment: "coscheml:app=other", TresPerNode: "gres:gpu:1", MinNodes: 1, JobID: submit.NoVal})
	if strings.Contains(r.Log, "nonexistent") {
		t.Fatalf("the failure is logged per job: %q", r.Log)
	}
	if rc, _ := initGo(filepath.Join(t.TempDir(), "missing.yaml"), 0x160508, ""); rc != 1 {
		t.Fatalf("init with a missing config: %d", rc)
	}
	if r := decideGo(submit.JobFields{Comment: "coscheml:app=../x", TresPerNode: "gres:gpu:1"}); r.Code != submit.Unchanged {
		t.Fatalf("missing config must pass through: %+v", r)
	}
}

// TestPassWindowFromEngine: the engine opens queue.c's pass window once
// loaded under untagged: pass, never under untagged: exclusive, and a
// reconfigure and coscheml_fini shut it.
func TestPassWindowFromEngine(t *testing.T) {
	t.Cleanup(func() {
		if e := engine.Swap(nil); e != nil {
			e.Close()
		}
	})
	waitOpen := func(want bool) bool {
		for i := 0; i < 150; i++ { // the background refresh publishes every 500 ms
			if cqtest.PassOpen() == want {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	if rc, _ := initGo(writeConfig(t, ""), 0x160508, ""); rc != 0 {
		t.Fatalf("init: %d (%v)", rc, engine.Load().Problems())
	}
	if !waitOpen(true) {
		t.Fatalf("untagged: pass, engine ready: the window stays shut (%v)", engine.Load().PassUntaggedFor())
	}
	if rc, _ := initGo(writeConfig(t, "untagged: exclusive\n"), 0x160508, ""); rc != 0 {
		t.Fatalf("init: %d (%v)", rc, engine.Load().Problems())
	}
	if cqtest.PassOpen() {
		t.Fatal("a reconfigure left the window open")
	}
	time.Sleep(1200 * time.Millisecond) // two refreshes
	if cqtest.PassOpen() {
		t.Fatal("untagged: exclusive opened the window")
	}
	if rc, _ := initGo(writeConfig(t, ""), 0x160508, ""); rc != 0 {
		t.Fatalf("init: %d (%v)", rc, engine.Load().Problems())
	}
	if !waitOpen(true) {
		t.Fatal("back to untagged: pass: the window stays shut")
	}
	coscheml_fini()
	if cqtest.PassOpen() {
		t.Fatal("coscheml_fini left the window open")
	}
}

// TestDecideTimeout: the configuration's decide_timeout reaches the C queue
// (what a waiting slurmctld thread reads), and a configuration without it
// brings back the default.
func TestDecideTimeout(t *testing.T) {
	t.Cleanup(func() {
		if e := engine.Swap(nil); e != nil {
			e.Close()
		}
	})
	for _, tc := range []struct {
		extra string
		want  int
	}{
		{"decide_timeout: 50ms\n", 50},
		{"decide_timeout: 2s\n", 2000},
		{"", 500},
	} {
		if rc, _ := initGo(writeConfig(t, tc.extra), 0x160508, ""); rc != 0 {
			t.Fatalf("init with %q: %d (%v)", tc.extra, rc, engine.Load().Problems())
		}
		cur := 0
		applyTimeout(&cur)
		if got := cqtest.TimeoutMS(); got != tc.want {
			t.Errorf("%q: the queue waits %d ms, want %d", tc.extra, got, tc.want)
		}
	}
}

// cLibrary returns a built libcoscheml.so: $LIBCOSCHEML_SO (make builds it into
// lib/ first), or one built here (minutes on a loaded machine; skipped by -short).
func cLibrary(t *testing.T) string {
	t.Helper()
	if so := os.Getenv("LIBCOSCHEML_SO"); so != "" {
		abs, err := filepath.Abs(so)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("LIBCOSCHEML_SO: %v", err)
		}
		return abs
	}
	if testing.Short() {
		t.Skip("-short: set LIBCOSCHEML_SO to a built libcoscheml.so (make test does)")
	}
	so := filepath.Join(t.TempDir(), "libcoscheml.so")
	if out, err := exec.Command("go", "build", "-buildmode=c-shared", "-o", so, ".").CombinedOutput(); err != nil {
		t.Fatalf("building libcoscheml.so: %v\n%s", err, out)
	}
	return so
}

// cc compiles with gcc and fails the test with the compiler's words.
func cc(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// runC runs a built C program and returns its output; env adds variables.
func runC(t *testing.T, env []string, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(prog), err, out)
	}
	return string(out)
}

func wantLines(t *testing.T, what, got string, wants []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s output lacks %q:\n%s", what, want, got)
		}
	}
}

// TestCABI drives the library's C interface directly (testdata/abi.c): the
// version check, the size checks, decisions, reconfigure, fini and init again.
// It needs only gcc, no Slurm headers.
func TestCABI(t *testing.T) {
	so := cLibrary(t)
	bin := filepath.Join(t.TempDir(), "abi")
	// The structs keep interface 4's first layout (a build failure otherwise).
	cc(t, "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-o", filepath.Join(t.TempDir(), "layout"), "testdata/abi4_layout.c")
	cc(t, "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/abi.c", "-ldl")
	got := runC(t, nil, bin, so, writeConfig(t, "unknown_profile: reject\n"))
	wantLines(t, "abi", got, []string{
		"abi=4 header=4",
		"init rc=0",
		"untagged rc=0 tres=NULL nodes=NULL msg=NULL log=NULL level=0 line=NULL",
		"nulls rc=0 tres=NULL",
		"badtag rc=2 tres=NULL nodes=NULL msg=coscheml: invalid tag",
		"unknown rc=2 tres=NULL nodes=NULL msg=coscheml: unknown application profile 'nosuch'",
		// A comment-only update to an unknown tag meets unknown_profile as
		// the submission does; a refusal's line is in log (info), none at
		// log_decisions (the harness checks that line through Slurm's logger).
		"modify rc=2 tres=NULL nodes=NULL msg=coscheml: unknown application profile 'nosuch'",
		"log=modify job=17 uid=1000 tag=nosuch outcome=reject",
		"log=submit job=new uid=1000 tag=nosuch",
		"shortjob rc=0 tres=NULL nodes=NULL msg=NULL log=the plugin passed a job of 8 bytes",
		"abi4.0 rc=2 msg=coscheml: unknown application profile 'nosuch'",
		"shortanswer rc=0 untouched=1",
		"nullanswer rc=0",
		"nulljob rc=0",
		"loop rc=2",
		"afterfini rc=0 tres=NULL nodes=NULL msg=NULL",
		"reinit rc=2",
	})
}

// headerSets lists the Slurm header folders (each holding slurm/slurm.h) to build
// the shim against: every <version>/ under $COSCHEML_SLURM_HEADERS (make
// shim-check points it at ../shared/slurm/headers), else the system's.
func headerSets(t *testing.T) map[string]string {
	t.Helper()
	sets := map[string]string{}
	if root := os.Getenv("COSCHEML_SLURM_HEADERS"); root != "" {
		ents, err := os.ReadDir(root)
		if err != nil {
			t.Fatalf("COSCHEML_SLURM_HEADERS: %v", err)
		}
		for _, e := range ents {
			dir := filepath.Join(root, e.Name())
			if _, err := os.Stat(filepath.Join(dir, "slurm", "slurm.h")); err == nil {
				sets[e.Name()] = dir
			}
		}
		if len(sets) == 0 {
			t.Fatalf("COSCHEML_SLURM_HEADERS=%s holds no <version>/slurm/slurm.h", root)
		}
		return sets
	}
	if _, err := os.Stat("/usr/include/slurm/slurm.h"); err == nil {
		sets["system"] = "/usr/include"
	}
	return sets
}

// TestCShim builds the job_submit shim against each Slurm header set with
// -Wall -Wextra -Werror and runs testdata/harness.c (built against the same
// headers, playing slurmctld) through it into the real library; then the
// version check against libraries of other builds, and once under
// AddressSanitizer.
func TestCShim(t *testing.T) {
	so := cLibrary(t)
	sets := headerSets(t)
	if len(sets) == 0 {
		t.Skip("SKIPPING the shim harness: no Slurm headers (/usr/include/slurm/slurm.h; Debian: apt-get install libslurm-dev)")
	}
	cfg := writeConfig(t, "")
	names := make([]string, 0, len(sets))
	for name := range sets {
		names = append(names, name)
	}
	slices.Sort(names)
	build := func(t *testing.T, inc, dir string, extra ...string) (shim, harness string) {
		shim, harness = filepath.Join(dir, "job_submit_coscheml.so"), filepath.Join(dir, "harness")
		cc(t, append([]string{"-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-std=gnu11",
			"-I" + inc, "-I../../plugin-c", "-o", shim, "../../plugin-c/job_submit_coscheml.c", "-ldl", "-lpthread"}, extra...)...)
		cc(t, append([]string{"-O1", "-g", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-rdynamic",
			"-I" + inc, "-I../../plugin-c", "-o", harness, "testdata/harness.c", "-ldl", "-lpthread"}, extra...)...)
		return shim, harness
	}
	wants := []string{
		"match=1",
		"init rc=0",
		"loaded " + so + " (interface 4",
		"untagged rc=0 tres=gres:gpu:1 nodes=NULL msg=NULL",
		"nulls rc=0 tres=NULL nodes=NULL msg=NULL",
		"badtag rc=1 tres=gres:gpu:1 nodes=NULL msg=coscheml: invalid tag",
		"long rc=1 tres=gres:gpu:1 nodes=NULL msg=coscheml: comment of 10000 characters",
		// A refused directive's code: sbatch prints its text under the plugin's
		// message, so it must not name another cause (a gres).
		"badtag code=SLURM_ERROR\n", "long code=SLURM_ERROR\n", "rawshard code=ESLURM_ACCESS_DENIED\n", "untagged code=SLURM_SUCCESS\n",
		"unknown rc=0 tres=gres:shard:4 nodes=NULL msg=coscheml: warning: unknown application profile 'nosuch'",
		// --gpus=1 moves to tres_per_node (tres_per_job freed), an array is not
		// pinned, -x is honoured, --exclusive passes unchanged.
		"fields-gpus rc=0 tres=gres/shard:", " job=NULL nodes=n1\n",
		"fields-array rc=0 tres=gres:shard:4 job=NULL nodes=NULL",
		" job=NULL nodes=n3\n",
		"fields-exclusive rc=0 tres=gres:gpu:1 job=NULL nodes=NULL",
		// Decision lines through Slurm's verbose logger (log_decisions'
		// default).
		"verbose: job_submit/coscheml: modify job=17 ",
		"verbose: job_submit/coscheml: modify job=18 ",
		"verbose: job_submit/coscheml: modify job=new ",
		"modify-untagged rc=0",
		"rawshard rc=1 tres=gres:shard:1 nodes=NULL msg=coscheml: this job asks for GPU shards directly",
		"rawshard-root rc=0 tres=gres:shard:1 nodes=NULL msg=NULL",
		"rawshard-slurmuser rc=0 tres=gres:shard:1 nodes=NULL msg=NULL",
		"modify-nodes-user rc=1",
		"modify-nodes-root rc=0",
		// Eight threads at once through the queue to the worker, each answer
		// its own.
		"concurrent calls=480 wrong=0 live=0",
		"loop done live=0",
		"afterfini rc=0 tres=gres:gpu:1 nodes=NULL msg=NULL",
		"reinit rc=1",
		"end live=0",
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			shim, harness := build(t, sets[name], t.TempDir())
			// A configuration of its own: the decision log of an earlier run
			// would rebuild reservations and move the pins the lines expect.
			got := runC(t, nil, harness, shim, so, writeConfig(t, ""))
			wantLines(t, "harness", got, wants)
			if strings.Contains(got, "error:") {
				t.Errorf("the shim logged an error:\n%s", got)
			}
		})
	}
	newest := sets[names[len(names)-1]]

	// A library of another build: refused before any other call (the fake's
	// other exports abort), every job passes through, and the log says why.
	t.Run("mismatch", func(t *testing.T) {
		dir := t.TempDir()
		shim, harness := build(t, newest, dir)
		for _, tc := range []struct {
			name, flag, want string
		}{
			{"abi1", "-DFAKE_ABI=1", "speaks interface 1, this plugin speaks 4"},
			{"abi99", "-DFAKE_ABI=99", "speaks interface 99, this plugin speaks 4"},
			{"old", "-DNO_ABI", "has no coscheml_abi_version"},
		} {
			fake := filepath.Join(dir, tc.name+".so")
			cc(t, "-shared", "-fPIC", tc.flag, "-o", fake, "testdata/fakelib.c")
			got := runC(t, nil, harness, shim, fake, cfg)
			wantLines(t, tc.name, got, []string{tc.want, "passing all jobs through unchanged",
				"badtag rc=0 tres=gres:gpu:1 nodes=NULL msg=NULL", "end live=0"})
		}
	})

	// The job's stored comment at job_modify, for each release: read from
	// slurmctld's record where the shim knows its layout, NULL elsewhere, at
	// submit, without a record and when the record's magic is wrong.
	t.Run("stored comment", func(t *testing.T) {
		known := map[string]bool{"23.11": true, "24.11": true, "25.11": true, "26.05": true}
		for _, name := range names {
			dir := t.TempDir()
			shim, harness := build(t, sets[name], dir)
			echo := filepath.Join(dir, "echo.so")
			cc(t, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-DECHO_STORED", "-I../../plugin-c", "-o", echo, "testdata/fakelib.c")
			got := runC(t, []string{"HARNESS_STORED=1"}, harness, shim, echo, cfg)
			series := name // "23.11.11": "23.11"; "system": unknown
			if p := strings.Split(name, "."); len(p) >= 2 {
				series = p[0] + "." + p[1]
			}
			want := map[bool]int{true: 1, false: 0}[known[series]]
			if n := strings.Count(got, "stored=as stored"); n != want {
				t.Errorf("%s: the stored comment reached the library %d times, want %d:\n%s", name, n, want, got)
			}
			if n := strings.Count(got, "stored=NULL"); n != 4-want {
				t.Errorf("%s: %d NULL stored comments:\n%s", name, n, got)
			}
			wantLines(t, name, got, []string{"stored-submit rc=0 msg=stored=NULL", "end live=0"})
		}
	})

	t.Run("asan", func(t *testing.T) {
		probe := filepath.Join(t.TempDir(), "probe")
		if out, err := exec.Command("sh", "-c", "echo 'int main(void){return 0;}' | gcc -fsanitize=address -x c -o "+probe+" -").CombinedOutput(); err != nil {
			t.Skipf("gcc cannot build with -fsanitize=address here: %s", out)
		}
		shim, harness := build(t, newest, t.TempDir(), "-fsanitize=address", "-fno-omit-frame-pointer")
		// The Go runtime's own allocations are not ours to judge (leak check off);
		// use-after-free, double free and overflows in the shim and harness are.
		got := runC(t, []string{"ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:exitcode=23"}, harness, shim, so, writeConfig(t, ""))
		wantLines(t, "asan harness", got, wants)
	})
}

// TestCQueue drives queue.c (the hand-off from slurmctld's threads to the Go
// worker) with a C worker on worker.go's protocol whose timing the test
// controls (testdata/queue.c): concurrent callers, the untagged pass window
// (jobs answered in C, the rest reaching the worker; the window's end, Go
// shutting it, cq_stop shutting it), the timeout (the job passes, the late
// answer is freed by the worker, later jobs pass at once until it ends), a
// caller leaving while the worker writes its answer, an answer larger than the
// request's buffer, a timeout in the queue, cq_stop with calls queued and in
// progress, cq_stop with abandoned requests held, a restart. Under AddressSanitizer
// with leak checks (no Go runtime in this program) and under ThreadSanitizer.
func TestCQueue(t *testing.T) {
	wants := []string{
		"noworker rc=0 log=direct direct=1",
		"concurrent calls=4000 wrong=0 direct=1",
		"pass plain rc=0 worker=0 log=NULL",
		"pass nocomment rc=0 worker=0 log=NULL",
		"pass tagged rc=1 worker=1",
		"pass tagcase rc=1 worker=1",
		"pass token rc=1 worker=1",
		"pass shard rc=1 worker=1",
		"pass shardjob rc=1 worker=1",
		"pass shardtask rc=1 worker=1",
		"pass shardsocket rc=1 worker=1",
		"pass modify rc=1 worker=1",
		"pass nearmiss rc=1 worker=1",
		"pass nearmiss10 rc=0 worker=0",
		"pass url rc=0 worker=0 log=NULL",
		"pass expired rc=1",
		"pass shut rc=1",
		"timeoutbounds lo=1 hi=10000",
		"shortanswer rc=0 untouched=1",
		"shortjob rc=0 log=worker: job of 8 bytes",
		"nulljob rc=0 log=worker: no job",
		"oldjob rc=1 tres=coscheml old-shim log=decided",
		"timeout rc=0 tres=NULL log=coscheml: no decision within 50 ms, job left unchanged; jobs pass through unchanged until the decision in progress ends fast=1",
		"stuck rc=0 tres=NULL log=NULL fast=1",
		"recovered rc=1 tres=after",
		"queued-timeout rc=0 tres=NULL slow rc=0",
		"halfway rc=0 tres=NULL fast=1",
		"after-halfway rc=1 tres=after-halfway",
		"big rc=1 tres=big-1 msglen=12287",
		"stop queued=3 unchanged=3 quick=3 inflight rc=1 tres=slow-3",
		"afterstop rc=0 log=direct direct=2",
		"restart rc=1 tres=again",
		"stopabandoned slow rc=0 late rc=0",
		"end",
	}
	for _, tc := range []struct{ name, san, env string }{
		{"plain", "", ""},
		{"asan", "-fsanitize=address,undefined", "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=23"},
		{"tsan", "-fsanitize=thread", "TSAN_OPTIONS=exitcode=66"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "queue")
			args := []string{"-O1", "-g", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-I../../plugin-c", "-o", bin, "testdata/queue.c", "-lpthread"}
			if tc.san != "" {
				probe := filepath.Join(t.TempDir(), "probe")
				if out, err := exec.Command("sh", "-c", "echo 'int main(void){return 0;}' | gcc "+tc.san+" -x c -o "+probe+" -").CombinedOutput(); err != nil {
					t.Skipf("gcc cannot build with %s here: %s", tc.san, out)
				}
				args = append([]string{tc.san, "-fno-omit-frame-pointer"}, args...)
			}
			cc(t, args...)
			var env []string
			if tc.env != "" {
				env = []string{tc.env}
			}
			got := runC(t, env, bin)
			wantLines(t, "queue", got, wants)
		})
	}
}

// TestSafeMode: a slurm.conf whose SelectTypeParameters make first-fit steering
// impossible puts the library in safe mode, said once at init; tagged jobs then
// get all shards of one GPU on any node (no node or GPU pinned), and bad tags are
// still refused. A plain slurm.conf, or none, keeps normal placement.
func TestSafeMode(t *testing.T) {
	t.Cleanup(func() {
		if e := engine.Swap(nil); e != nil {
			e.Close()
		}
	})
	cfgPath := writeConfig(t, "")
	dir := filepath.Dir(cfgPath)
	f, err := os.Open(filepath.Join("..", "..", "models", "data", "lucid-train", "solo_profiles.csv"))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := profile.ReadLucidSolo(f)
	f.Close()
	if err != nil || len(ps) == 0 {
		t.Fatalf("lucid profiles: %v", err)
	}
	store, err := profile.Open(filepath.Join(dir, "profiles"))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ps[0]); err != nil {
		t.Fatal(err)
	}
	confGres := func(params, gpus string) string {
		p := filepath.Join(t.TempDir(), "slurm.conf")
		text := "SelectType=select/cons_tres\nSelectTypeParameters=" + params +
			"\nGresTypes=gpu,shard\nNodeName=n[1-3] CPUs=8 Gres=" + gpus + ",shard:16\n"
		gres := "NodeName=n[1-3] Name=shard Count=16\n"
		if strings.Contains(gpus, "g0") { // per-GPU Types: each GPU's shards on their own line
			gres = ""
			for i := 0; i < 4; i++ {
				gres += fmt.Sprintf("NodeName=n[1-3] Name=shard Count=4 File=/dev/nvidia%d\n", i)
			}
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(p), "gres.conf"), []byte(gres), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	conf := func(params string) string { return confGres(params, "gpu:h200:4") }
	job := submit.JobFields{Comment: "coscheml:app=" + ps[0].Tag, TresPerNode: "gres/gpu:1", MinNodes: 1, JobID: submit.NoVal}
	perGPU := "gpu:g0:1,gpu:g1:1,gpu:g2:1,gpu:g3:1"
	for _, tc := range []struct {
		name, slurmConf string
		safe            bool
		typed           bool // shard_pinning auto (the default) resolves to typed
		note            string
	}{
		{"LL_SHARED_GRES", conf("CR_Core,LL_SHARED_GRES"), true, false, "SAFE MODE"},
		{"plain", conf("CR_Core"), false, false, "shard_pinning auto: first-fit, because NodeName=n[1-3]"},
		{"per-GPU types", confGres("CR_Core", perGPU), false, true, "shard_pinning auto: typed"},
		{"per-GPU types, LL_SHARED_GRES", confGres("CR_Core,LL_SHARED_GRES", perGPU), false, true, "shard_pinning auto: typed"},
		{"unknown slurm.conf", "", false, false, ""},
		{"unreadable slurm.conf", filepath.Join(t.TempDir(), "missing.conf"), false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, log := initGo(cfgPath, 0x190b07, tc.slurmConf)
			if rc != 0 {
				t.Fatalf("init rc %d: %v", rc, engine.Load().Problems())
			}
			if got := strings.Count(log, "SAFE MODE"); got != map[bool]int{true: 1, false: 0}[tc.safe] {
				t.Fatalf("init log says SAFE MODE %d times:\n%s", got, log)
			}
			if tc.note != "" && !strings.Contains(log, tc.note) || tc.note == "" && strings.Contains(log, "shard_pinning") {
				t.Fatalf("init log %q: want %q", log, tc.note)
			}
			// The engine reads the residency store in the background: wait for it.
			var r submit.Result
			for i := 0; i < 100; i++ {
				if r = decideGo(job); !strings.Contains(r.Log, "not loaded yet") {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if r.Code != submit.Rewrite {
				t.Fatalf("tagged job: %+v", r)
			}
			if tc.safe {
				if r.TresPerNode != "gres/shard:4" || r.ReqNodes != "" {
					t.Errorf("safe mode: want all 4 shards of one GPU on any node, got tres=%q nodes=%q (%s)", r.TresPerNode, r.ReqNodes, r.Log)
				}
			} else if r.ReqNodes == "" {
				t.Errorf("normal mode: the job should be pinned to a node: %+v", r)
			}
			if typed := strings.Contains(r.TresPerNode, "shard:g"); typed != tc.typed {
				t.Errorf("typed request %v (tres=%q), want %v", typed, r.TresPerNode, tc.typed)
			}
			if bad := decideGo(submit.JobFields{Comment: "coscheml:app=../x", TresPerNode: "gres/gpu:1", JobID: submit.NoVal}); bad.Code != submit.Reject {
				t.Errorf("a bad tag must still be refused: %+v", bad)
			}
		})
	}
	// Stop the engine (it writes the decision log) before the folders go.
	if e := engine.Swap(nil); e != nil {
		e.Close()
	}
}

// TestCallCostReport measures what one coscheml_decide costs the calling C
// thread (testdata/callcost.c): thread CPU and wall time of untagged (pure
// call) and tagged decisions, from one thread and from a new thread per call
// (slurmctld 22.05 serves each RPC on its own thread), and paced 5 ms apart
// (the process's CPU per call, Go's own threads included). It reports only (-v; see
// docs/performance-slurm.md); it checks that every call was made and answered.
func TestCallCostReport(t *testing.T) {
	if testing.Short() {
		t.Skip("report only")
	}
	so := cLibrary(t)
	bin := filepath.Join(t.TempDir(), "callcost")
	cc(t, "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/callcost.c", "-ldl", "-lpthread")
	got := runC(t, nil, bin, so, writeConfig(t, ""), "1000")
	t.Log("\n" + got)
	for _, way := range []string{"same", "thread"} {
		for _, job := range []string{"untagged", "tagged"} {
			re := regexp.MustCompile(`(?m)^` + way + ` ` + job + ` calls=1000 cpu_p50=\d+ .* unchanged=(\d+) rewrite=(\d+) other=(\d+)$`)
			m := re.FindAllStringSubmatch(got, -1)
			if len(m) != 2 {
				t.Errorf("%s %s: %d result lines, want 2", way, job, len(m))
				continue
			}
			if job == "untagged" && (m[0][1] != "1000" || m[1][1] != "1000") {
				t.Errorf("%s untagged: not every call answered unchanged: %v", way, m)
			}
		}
	}
	for _, job := range []string{"none", "untagged", "tagged"} {
		if n := len(regexp.MustCompile(`(?m)^paced `+job+` calls=200 proc_per_call_us=[0-9.]+ ctxsw_per_call=[0-9.]+ wall_p50_us=[0-9.]+ wall_p90_us=[0-9.]+$`).FindAllString(got, -1)); n != 2 {
			t.Errorf("paced %s: %d result lines, want 2", job, n)
		}
	}
}

// TestWakeCostReport measures the floor under the decision queue's hand-off
// on this machine, with no Go in it (testdata/wakecost.c): a futex round trip
// between two threads, back to back and 5 ms apart, on two CPUs and on one.
// It reports only (-v; docs/performance-slurm.md); it checks that every
// variant ran and printed its figures.
func TestWakeCostReport(t *testing.T) {
	if testing.Short() {
		t.Skip("report only")
	}
	bin := filepath.Join(t.TempDir(), "wakecost")
	cc(t, "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/wakecost.c", "-lpthread")
	var got strings.Builder
	for _, gap := range []string{"0", "5000"} {
		for _, env := range [][]string{nil, {"WAKECOST_SAME_CPU=1"}} {
			got.WriteString(runC(t, env, bin, "400", gap))
		}
	}
	t.Log("\n" + got.String())
	for _, way := range []string{"cross", "same"} {
		for _, gap := range []string{"0", "5000"} {
			re := regexp.MustCompile(`(?m)^` + way + ` gap_us=` + gap + ` trips=400 wall_p50_us=[0-9.]+ wall_p90_us=[0-9.]+ proc_cpu_per_trip_us=[0-9.]+$`)
			if !re.MatchString(got.String()) {
				t.Errorf("%s, gap %s us: no result line", way, gap)
			}
		}
	}
}

// FuzzMentions holds queue.c's cq_mentions, which lets untagged jobs pass in C,
// to what the Go side reads: it finds "coscheml" exactly where pkg/comment's
// test (strings.EqualFold on every window) does, and a comment it finds
// nothing in parses as no directive and no token.
func FuzzMentions(f *testing.F) {
	for _, s := range []string{"", "coscheml:app=a", "x CoScHeMl", "coſcheml", "cosche\xffml", "COSCHEMLcoscheml",
		"cosch", "coscheml-id=a-1:2", "\u212aoscheml", "c0scheml"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return // a C string ends there; Slurm's comments hold no NUL
		}
		want := false
		for i := 0; i+len("coscheml") <= len(s); i++ {
			if strings.EqualFold(s[i:i+len("coscheml")], "coscheml") {
				want = true
			}
		}
		if got := cqtest.Mentions(s, "coscheml"); got != want {
			t.Fatalf("cq_mentions(%q) = %v, Go finds %v", s, got, want)
		}
		// A near miss ("cosceml:") is no directive; the pass window sends those
		// comments to Go by cq_colon_word (FuzzColonWord), not by this test.
		d := comment.ParseComment(s)
		d.NearMiss = ""
		if !want && !reflect.DeepEqual(d, comment.Directive{}) {
			t.Fatalf("%q: no mention, but it parses as %+v", s, d)
		}
	})
}

// FuzzColonWord holds queue.c's cq_colon_word to pkg/comment's near-miss
// test: every untagged comment Go would warn about is sent to Go by the pass
// window (the C test may send more, never less).
func FuzzColonWord(f *testing.F) {
	for _, s := range []string{"", "cosceml:app=a", "run coschemel:app=x", "http://x", "ticket:42", "a\tcoscheemml:x", "COSCEHML:", ":::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return // a C string ends there; Slurm's comments hold no NUL
		}
		if d := comment.ParseComment(s); d.NearMiss != "" && !cqtest.ColonWord(s) {
			t.Fatalf("%q: Go warns about %q, but cq_colon_word lets it pass in C", s, d.NearMiss)
		}
	})
}

// TestWorkerHandoff drives the real Go worker (worker.go) through queue.c
// from this process's threads, with the decision replaced (testDecide): the
// answer's strings written into the request's buffer, at its boundary and
// beyond it (the fallback allocation), a panicking decision, a caller timing
// out while the worker decides (later calls pass at once until it ends, then
// the worker answers again), and coscheml_fini during a decision (the
// decision in progress answered, the queued calls "unchanged" at once, the
// calls after it decided on the calling thread).
func TestWorkerHandoff(t *testing.T) {
	// Comments start with "coscheml " (the pass window answers the others in C).
	slow := make(chan struct{}, 1) // a "slow" decision has begun
	waitSlow := func(t *testing.T) {
		t.Helper()
		select {
		case <-slow:
		case <-time.After(5 * time.Second):
			t.Fatal("the slow decision did not begin")
		}
	}
	decide := func(j submit.JobFields) submit.Result {
		name := strings.TrimPrefix(j.Comment, "coscheml ")
		switch {
		case strings.HasPrefix(name, "panic"):
			panic("test panic")
		case strings.HasPrefix(name, "slow"):
			slow <- struct{}{}
			time.Sleep(600 * time.Millisecond)
		}
		// The comment says how long the log line is: "len=N".
		n := 0
		if _, err := fmt.Sscanf(name, "len=%d", &n); err != nil {
			n = 3
		}
		return submit.Result{Code: submit.Rewrite, TresPerNode: "gres/shard:2", ReqNodes: "n1",
			Comment: "c " + j.Comment, Log: strings.Repeat("l", n), Line: "d", LineLevel: "debug", BeginTime: 42}
	}
	testDecide.Store(&decide)
	t.Cleanup(func() {
		coscheml_fini()
		testDecide.Store(nil)
	})
	if rc, _ := initGo(writeConfig(t, "decide_timeout: 200ms\n"), 0x160508, ""); rc != 0 {
		t.Fatalf("init: %d (%v)", rc, engine.Load().Problems())
	}
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	cur := 0
	applyTimeout(&cur)

	// The fixed strings of an answer take this much of the buffer.
	fixed := len("gres/shard:2") + 1 + len("n1") + 1 + 1 + len("c coscheml ") + len("d") + 1 // + the log's NUL
	for _, tc := range []struct {
		name string
		n    int // the log line's length
	}{
		{"short", 3},
		{"fills the buffer", cqtest.AnsBuf - fixed - len("len=0000") - 1},
		{"one byte over", cqtest.AnsBuf - fixed - len("len=0000")},
		{"three buffers", 3 * cqtest.AnsBuf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comment := fmt.Sprintf("coscheml len=%04d", tc.n)
			rc, strs, begin := cqtest.Decide(comment)
			want := [8]string{"gres/shard:2", "n1", "c " + comment, "", strings.Repeat("l", tc.n), "", "", "d"}
			if rc != int(submit.Rewrite) || strs != want || begin != 42 {
				t.Fatalf("rc=%d begin=%d strs=%.80q, want %.80q", rc, begin, strs, want)
			}
		})
	}
	t.Run("panic", func(t *testing.T) {
		rc, strs, _ := cqtest.Decide("coscheml panic")
		if rc != int(submit.Unchanged) || !strings.Contains(strs[4], "internal error in the bridge") || strs[0] != "" {
			t.Fatalf("rc=%d strs=%q", rc, strs)
		}
		if rc, _, _ := cqtest.Decide("coscheml after"); rc != int(submit.Rewrite) {
			t.Fatalf("the worker did not go on after a panic: rc=%d", rc)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		rc, strs, _ := cqtest.Decide("coscheml slow-1")
		if rc != int(submit.Unchanged) || !strings.Contains(strs[4], "no decision within 200 ms") || strs[0] != "" {
			t.Fatalf("rc=%d strs=%q", rc, strs)
		}
		waitSlow(t)
		if d := time.Since(start); d > 550*time.Millisecond {
			t.Errorf("the timed-out call took %v", d)
		}
		// The worker still decides: calls pass at once, unlogged.
		if rc, strs, _ := cqtest.Decide("coscheml during"); rc != int(submit.Unchanged) || strs != ([8]string{}) {
			t.Fatalf("during: rc=%d strs=%q", rc, strs)
		}
		var rc2 int
		for i := 0; i < 100; i++ {
			time.Sleep(20 * time.Millisecond)
			if rc2, _, _ = cqtest.Decide("coscheml after"); rc2 == int(submit.Rewrite) {
				break
			}
		}
		if rc2 != int(submit.Rewrite) {
			t.Fatalf("no answer after the slow decision ended: rc=%d", rc2)
		}
	})
	t.Run("fini during a decision", func(t *testing.T) {
		cqtest.SetTimeoutMS(5000)
		type out struct {
			rc  int
			d   time.Duration
			log string
		}
		call := func(comment string, res chan<- out) {
			start := time.Now()
			rc, strs, _ := cqtest.Decide(comment)
			res <- out{rc, time.Since(start), strs[4]}
		}
		inflight := make(chan out, 1)
		go call("coscheml slow-2", inflight)
		waitSlow(t)
		queued := make(chan out, 3)
		for i := 0; i < 3; i++ {
			go call(fmt.Sprintf("coscheml q%d", i), queued)
		}
		time.Sleep(100 * time.Millisecond) // queued behind the slow decision
		stopWorker()
		for i := 0; i < 3; i++ {
			if q := <-queued; q.rc != int(submit.Unchanged) || q.log != "" || q.d > 450*time.Millisecond {
				t.Errorf("queued call at fini: %+v, want unchanged at once", q)
			}
		}
		if r := <-inflight; r.rc != int(submit.Rewrite) {
			t.Errorf("the decision in progress at fini: %+v, want its answer", r)
		}
		// No worker now: decided on the calling thread.
		if rc, strs, _ := cqtest.Decide("coscheml direct"); rc != int(submit.Rewrite) || strs[2] != "c coscheml direct" {
			t.Errorf("after fini: rc=%d strs=%q", rc, strs)
		}
	})
}

// FuzzGoString: goString, which reads the job's strings in place in C memory
// one page at a time, returns exactly the bytes before the first NUL, wherever
// the string starts and however many page boundaries it crosses.
func FuzzGoString(f *testing.F) {
	for _, s := range []string{"", "a", "coscheml:app=x", strings.Repeat("p", 5000), "a\x00b", strings.Repeat("q", 9000) + "\x00z"} {
		f.Add(s, uint16(0))
		f.Add(s, uint16(4095))
	}
	f.Fuzz(func(t *testing.T, s string, off uint16) {
		want := s
		if i := strings.IndexByte(s, 0); i >= 0 {
			want = s[:i]
		}
		p, free := cqtest.CStringAt(s, int(off))
		got := goStringAt(p)
		free()
		if got != want {
			t.Fatalf("goString at offset %d: %d bytes, want %d", off, len(got), len(want))
		}
	})
}
