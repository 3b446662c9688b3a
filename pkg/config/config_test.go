// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The shipped etc/coscheml.yaml must say exactly what the built-in defaults are, so
// that an admin who edits it starts from the truth.
func TestShippedFileIsDefault(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "etc", "coscheml.yaml"))
	if err != nil {
		t.Fatalf("Load shipped config: %v", err)
	}
	if want := Default(); !reflect.DeepEqual(c, want) {
		t.Fatalf("shipped config differs from Default():\n got %+v\nwant %+v", c, want)
	}
}

// Every key of Config appears (uncommented) in the shipped file, so every knob is
// documented there.
func TestShippedFileHasEveryKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "etc", "coscheml.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, indent string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := yamlName(f)
			if !strings.Contains(string(data), "\n"+indent+key+":") {
				t.Errorf("etc/coscheml.yaml lacks key %q", key)
			}
			if f.Type.Kind() == reflect.Struct && f.Type != durationType {
				walk(f.Type, indent+"  ")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

// docs/configuration.md documents every key (as `dotted.key`).
func TestDocsHaveEveryKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, prefix string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := prefix + yamlName(f)
			if f.Type.Kind() == reflect.Struct && f.Type != durationType {
				walk(f.Type, key+".")
				continue
			}
			if !strings.Contains(string(data), "`"+key+"`") {
				t.Errorf("docs/configuration.md lacks key `%s`", key)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

func TestDefaultValidates(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

// The shipped guard example changes the floor action of hpc and train only.
func TestGuardSuspendExample(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "etc", "examples", "guard-suspend.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Guard.Actions.HPC.Floor, want.Guard.Actions.Train.Floor = "suspend", "suspend"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got guard %+v\nwant %+v", c.Guard, want.Guard)
	}
	if c.Guard.Actions.Infer.Floor == "suspend" {
		t.Fatal("the example suspends inference servers")
	}
}

func TestLoadOverridesOnlyGivenKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	body := "policy: blind\nspeed_floor:\n  infer: 0.95\nprofiling:\n  interval: 2s\ncluster:\n  nodes: gpu[01-03]\n  gpus_per_node: 8\n  gpu_memory_mib: 81920\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Policy = "blind"
	want.SpeedFloor.Infer = 0.95
	want.Profiling.Interval = 2 * time.Second
	want.Cluster.Nodes = "gpu[01-03]"
	want.Cluster.GPUsPerNode = 8
	want.Cluster.GPUMemoryMiB = 81920
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string // substrings of the error; nil = must succeed
		check   func(Config) bool
	}{
		{name: "empty", yaml: "", check: func(c Config) bool { return reflect.DeepEqual(c, Default()) }},
		{name: "only comments", yaml: "# nothing\n", check: func(c Config) bool { return reflect.DeepEqual(c, Default()) }},
		{name: "model path", yaml: "model_path: /opt/m.model\n", check: func(c Config) bool { return c.ModelPath == "/opt/m.model" }},
		{name: "empty string", yaml: "decision_log: \"\"\n", check: func(c Config) bool { return c.DecisionLog == "" }},
		{name: "metrics file", yaml: "metrics_file: /var/lib/prometheus/node-exporter/coscheml-ctld.prom\n", check: func(c Config) bool {
			return c.MetricsFile == "/var/lib/prometheus/node-exporter/coscheml-ctld.prom" && Default().MetricsFile == ""
		}},
		{name: "pair memory off", yaml: "pair_memory: false\n", check: func(c Config) bool { return !c.PairMemory && Default().PairMemory }},
		{name: "wait defer", yaml: "wait_defer: 30s\n", check: func(c Config) bool { return c.WaitDefer == 30*time.Second }},
		{name: "decide timeout", yaml: "decide_timeout: 50ms\n", check: func(c Config) bool { return c.DecideTimeout == 50*time.Millisecond }},
		{name: "decide timeout default", yaml: "", check: func(c Config) bool { return c.DecideTimeout == 500*time.Millisecond }},
		{name: "decision lines at info", yaml: "log_decisions: info\n", check: func(c Config) bool { return c.LogDecisions == LogInfo }},
		{name: "decision lines by default at verbose", yaml: "policy: coscheml\n", check: func(c Config) bool { return c.LogDecisions == LogVerbose }},
		{name: "typed pinning", yaml: "shard_pinning: typed\nshard_type_prefix: gpu_\n", check: func(c Config) bool { return c.ShardPinning == PinTyped && c.ShardTypePrefix == "gpu_" }},
		{name: "bare key refused", yaml: "decision_log:\n", wantErr: []string{`"decision_log"`, "empty value"}},
		{name: "float floor from int", yaml: "speed_floor:\n  hpc: 1\n", check: func(c Config) bool { return c.SpeedFloor.HPC == 1 }},
		{name: "stale zero", yaml: "profiling:\n  stale_after: 0s\n", check: func(c Config) bool { return c.Profiling.StaleAfter == 0 }},
		{name: "mock backend", yaml: "profiling:\n  backend: mock\n  enabled: false\n", check: func(c Config) bool { return c.Profiling.Backend == "mock" && !c.Profiling.Enabled }},
		{name: "trusted single-user site", yaml: "max_profiles: 100\nprofiling:\n  min_runs: 1\n  min_users: 1\n  min_run_time: 10s\n  max_new_profiles_per_user: 0\n", check: func(c Config) bool {
			return c.MaxProfiles == 100 && c.Profiling.MinRuns == 1 && c.Profiling.MinUsers == 1 && c.Profiling.MinRunTime == 10*time.Second && c.Profiling.MaxNewProfilesPerUser == 0
		}},
		{name: "max corunners up to slots", yaml: "slots_per_gpu: 8\nmax_corunners: 8\n", check: func(c Config) bool { return c.MaxCoRunners == 8 }},

		{name: "unknown top key", yaml: "polcy: coscheml\n", wantErr: []string{`"polcy"`, "line 1", "valid keys"}},
		{name: "unknown nested key", yaml: "speed_floor:\n  hpc: 0.8\n  gpu: 0.5\n", wantErr: []string{`"speed_floor.gpu"`, "line 3"}},
		{name: "dash spelling hint", yaml: "slots-per-gpu: 4\n", wantErr: []string{`did you mean "slots_per_gpu"`}},
		{name: "duplicate key", yaml: "policy: blind\npolicy: random\n", wantErr: []string{`"policy"`, "defined twice", "line 2"}},
		{name: "floor zero", yaml: "speed_floor:\n  infer: 0\n", wantErr: []string{`"speed_floor.infer"`, "(0, 1]"}},
		{name: "floor above one", yaml: "speed_floor:\n  hpc: 1.5\n", wantErr: []string{`"speed_floor.hpc"`}},
		{name: "floor NaN", yaml: "speed_floor:\n  train: .nan\n", wantErr: []string{`"speed_floor.train"`}},
		{name: "floor string", yaml: "speed_floor:\n  train: fast\n", wantErr: []string{`"speed_floor.train"`, "want a number"}},
		{name: "slots zero", yaml: "slots_per_gpu: 0\nmax_corunners: 1\n", wantErr: []string{`"slots_per_gpu"`}},
		{name: "slots fractional", yaml: "slots_per_gpu: 2.5\n", wantErr: []string{`"slots_per_gpu"`, "whole number"}},
		{name: "slots huge", yaml: "slots_per_gpu: 99999999999999\n", wantErr: []string{`"slots_per_gpu"`}},
		{name: "corunners above slots", yaml: "slots_per_gpu: 2\nmax_corunners: 3\n", wantErr: []string{`"max_corunners"`, "1..slots_per_gpu (2)"}},
		{name: "corunners zero", yaml: "max_corunners: 0\n", wantErr: []string{`"max_corunners"`}},
		{name: "bad policy", yaml: "policy: magic\n", wantErr: []string{`"policy"`, "magic", "coscheml"}},
		{name: "policy number", yaml: "policy: 3\n", wantErr: []string{`"policy"`, "want a string"}},
		{name: "bad untagged", yaml: "untagged: reject\n", wantErr: []string{`"untagged"`, "pass or exclusive"}},
		{name: "bad unknown_profile", yaml: "unknown_profile: pass\n", wantErr: []string{`"unknown_profile"`}},
		{name: "bad invalid_tag", yaml: "invalid_tag: accept\n", wantErr: []string{`"invalid_tag"`}},
		{name: "bad raw_requests", yaml: "raw_requests: maybe\n", wantErr: []string{`"raw_requests"`, "refuse or allow"}},
		{name: "bad admin_users", yaml: "admin_users: \"alice, bob smith\"\n", wantErr: []string{`"admin_users"`, "bob smith"}},
		{name: "wait defer too short", yaml: "wait_defer: 10ms\n", wantErr: []string{`"wait_defer"`, "1s..1h"}},
		{name: "wait defer negative", yaml: "wait_defer: -5s\n", wantErr: []string{`"wait_defer"`}},
		{name: "wait defer not a duration", yaml: "wait_defer: soon\n", wantErr: []string{`"wait_defer"`}},
		{name: "decide timeout zero", yaml: "decide_timeout: 0s\n", wantErr: []string{`"decide_timeout"`, "1ms..10s"}},
		{name: "decide timeout too long", yaml: "decide_timeout: 1m\n", wantErr: []string{`"decide_timeout"`, "1ms..10s"}},
		{name: "decide timeout not a duration", yaml: "decide_timeout: 500\n", wantErr: []string{`"decide_timeout"`}},
		{name: "bad log_decisions", yaml: "log_decisions: warning\n", wantErr: []string{`"log_decisions"`, "info or verbose or debug"}},
		{name: "bad shard_pinning", yaml: "shard_pinning: exact\n", wantErr: []string{`"shard_pinning"`, "first-fit or typed"}},
		{name: "shard_pinning number", yaml: "shard_pinning: 1\n", wantErr: []string{`"shard_pinning"`, "want a string"}},
		{name: "type prefix with colon", yaml: "shard_type_prefix: \"g:\"\n", wantErr: []string{`"shard_type_prefix"`}},
		{name: "type prefix empty", yaml: "shard_type_prefix: \"\"\n", wantErr: []string{`"shard_type_prefix"`}},
		{name: "type prefix digit first", yaml: "shard_type_prefix: 0g\n", wantErr: []string{`"shard_type_prefix"`}},
		{name: "bad backend", yaml: "profiling:\n  backend: dcgm\n", wantErr: []string{`"profiling.backend"`, "nvml or mock"}},
		{name: "bad duration", yaml: "profiling:\n  interval: 5 parsecs\n", wantErr: []string{`"profiling.interval"`, "line 2", "bad duration"}},
		{name: "duration as int", yaml: "profiling:\n  interval: 500\n", wantErr: []string{`"profiling.interval"`, "want a duration"}},
		{name: "interval too small", yaml: "profiling:\n  interval: 1ms\n", wantErr: []string{`"profiling.interval"`, "10ms..1h"}},
		{name: "max profiles zero", yaml: "max_profiles: 0\n", wantErr: []string{`"max_profiles"`, "1..1000000"}},
		{name: "max profiles huge", yaml: "max_profiles: 2000000\n", wantErr: []string{`"max_profiles"`}},
		{name: "min runs zero", yaml: "profiling:\n  min_runs: 0\n  min_users: 1\n", wantErr: []string{`"profiling.min_runs"`, "1..50"}},
		{name: "min users above min runs", yaml: "profiling:\n  min_runs: 2\n  min_users: 3\n", wantErr: []string{`"profiling.min_users"`, "min_runs (2)"}},
		{name: "min users above kept users", yaml: "profiling:\n  min_runs: 40\n  min_users: 17\n", wantErr: []string{`"profiling.min_users"`, "16"}},
		{name: "min users zero", yaml: "profiling:\n  min_users: 0\n", wantErr: []string{`"profiling.min_users"`}},
		{name: "min run time too short", yaml: "profiling:\n  min_run_time: 500ms\n", wantErr: []string{`"profiling.min_run_time"`, "1s..24h"}},
		{name: "new profiles per user negative", yaml: "profiling:\n  max_new_profiles_per_user: -1\n", wantErr: []string{`"profiling.max_new_profiles_per_user"`}},
		{name: "new profiles per user above max profiles", yaml: "max_profiles: 5\nprofiling:\n  max_new_profiles_per_user: 6\n", wantErr: []string{`"profiling.max_new_profiles_per_user"`, "max_profiles (5)"}},
		{name: "stale negative", yaml: "profiling:\n  stale_after: -1h\n", wantErr: []string{`"profiling.stale_after"`}},
		{name: "enabled not bool", yaml: "profiling:\n  enabled: maybe\n", wantErr: []string{`"profiling.enabled"`, "true or false"}},
		{name: "relative path", yaml: "profile_dir: var/lib/x\n", wantErr: []string{`"profile_dir"`, "absolute"}},
		{name: "relative model", yaml: "model_path: ./m.model\n", wantErr: []string{`"model_path"`, "absolute"}},
		{name: "section as scalar", yaml: "speed_floor: 0.8\n", wantErr: []string{`"speed_floor"`, "mapping"}},
		{name: "empty section", yaml: "profiling:\n", wantErr: []string{`"profiling"`, "empty section"}},
		{name: "list value", yaml: "policy: [a, b]\n", wantErr: []string{`"policy"`, "a list"}},
		{name: "top level list", yaml: "- a\n", wantErr: []string{"top level"}},
		{name: "two documents", yaml: "policy: blind\n---\npolicy: random\n", wantErr: []string{"more than one YAML document"}},
		{name: "syntax error", yaml: "policy: [\n", wantErr: []string{"YAML"}},
		{name: "bad hostlist", yaml: "cluster:\n  nodes: n[1-\n  gpus_per_node: 4\n", wantErr: []string{`"cluster.nodes"`}},
		{name: "hostlist of nothing", yaml: "cluster:\n  nodes: \",\"\n  gpus_per_node: 4\n", wantErr: []string{`"cluster.nodes"`, "no host"}},
		{name: "nodes without memory", yaml: "cluster:\n  nodes: n[1-2]\n  gpus_per_node: 4\n", wantErr: []string{`"cluster.gpu_memory_mib"`, "must be set"}},
		{name: "prefer share zero", yaml: "prefer_share_speed: 0\n", wantErr: []string{`"prefer_share_speed"`}},
		{name: "reserve negative", yaml: "mem_reserve_mib: -5\n", wantErr: []string{`"mem_reserve_mib"`}},
		{name: "utilsum too big", yaml: "utilsum_threshold: 1000\n", wantErr: []string{`"utilsum_threshold"`}},
		{name: "placement knobs", yaml: "prefer_share_speed: 0.8\nmem_reserve_mib: 512\nutilsum_threshold: 120\n", check: func(c Config) bool {
			return c.PreferShareSpeed == 0.8 && c.MemReserveMiB == 512 && c.UtilSumThreshold == 120
		}},
		{name: "nodes without gpus", yaml: "cluster:\n  nodes: n[1-2]\n", wantErr: []string{`"cluster.gpus_per_node"`}},
		{name: "negative memory", yaml: "cluster:\n  gpu_memory_mib: -1\n", wantErr: []string{`"cluster.gpu_memory_mib"`}},
		{name: "bad partition", yaml: "cluster:\n  partition: \"a b\"\n", wantErr: []string{`"cluster.partition"`}},
		{name: "merge key", yaml: "base: &b\n  hpc: 0.5\nspeed_floor:\n  <<: *b\n", wantErr: []string{`"base"`}},
		{name: "all errors reported", yaml: "policy: x\nslots_per_gpu: 0\n", wantErr: []string{`"policy"`, `"slots_per_gpu"`}},
		{name: "guard defaults", yaml: "", check: func(c Config) bool {
			g := c.Guard
			return g.Enabled && !g.DryRun && g.Period == 5*time.Second && g.NVMLTimeout == 2*time.Second && g.CommandTimeout == 10*time.Second &&
				g.Actions.HPC == GuardClassActions{Memory: "requeue", Floor: "requeue"} && g.Actions.Infer == GuardClassActions{Memory: "requeue", Floor: "requeue"}
		}},
		{name: "guard overrides", yaml: "guard:\n  enabled: false\n  dry_run: true\n  period: 30s\n  event_dir: \"\"\n  actions:\n    train:\n      memory: cancel\n      floor: observe\n", check: func(c Config) bool {
			g := c.Guard
			return !g.Enabled && g.DryRun && g.Period == 30*time.Second && g.EventDir == "" &&
				g.Actions.Train == GuardClassActions{Memory: "cancel", Floor: "observe"} && g.Actions.HPC.Memory == "requeue"
		}},
		{name: "guard floor never cancels", yaml: "guard:\n  actions:\n    hpc:\n      floor: cancel\n", wantErr: []string{`"guard.actions.hpc.floor"`, "observe or suspend or requeue"}},
		{name: "guard memory never suspends", yaml: "guard:\n  actions:\n    infer:\n      memory: suspend\n", wantErr: []string{`"guard.actions.infer.memory"`}},
		{name: "guard period too short", yaml: "guard:\n  period: 100ms\n", wantErr: []string{`"guard.period"`, "250ms..10m"}},
		{name: "optimistic predictor", yaml: "predictor: optimistic\n", check: func(c Config) bool {
			return c.Predictor == PredictorOptimistic && Default().Predictor == PredictorModel
		}},
		{name: "unknown predictor", yaml: "predictor: oracle\n", wantErr: []string{`"predictor"`, "evaluation only"}},
		{name: "guard window and sustain", yaml: "guard:\n  window: 2\n  sustain_for: 2s\n", check: func(c Config) bool { return c.Guard.Window == 2 && c.Guard.SustainFor == 2*time.Second }},
		{name: "guard window zero", yaml: "guard:\n  window: 0\n", wantErr: []string{`"guard.window"`, "1..100"}},
		{name: "guard sustain too long", yaml: "guard:\n  sustain_for: 2h\n", wantErr: []string{`"guard.sustain_for"`, "0s..1h"}},
		{name: "emulated metrics dir relative", yaml: "guard:\n  emulated_metrics_dir: tmp/m\n", wantErr: []string{`"guard.emulated_metrics_dir"`, "absolute"}},
		{name: "guard nvml timeout zero", yaml: "guard:\n  nvml_timeout: 0s\n", wantErr: []string{`"guard.nvml_timeout"`}},
		{name: "guard command timeout too long", yaml: "guard:\n  command_timeout: 1h\n", wantErr: []string{`"guard.command_timeout"`}},
		{name: "guard relative event dir", yaml: "guard:\n  event_dir: guard\n", wantErr: []string{`"guard.event_dir"`, "absolute"}},
		{name: "guard unknown key", yaml: "guard:\n  perod: 5s\n", wantErr: []string{`"guard.perod"`}},
		{name: "hostile key sanitized", yaml: "\"a\\x1b[31mb\": 1\n", wantErr: []string{`"a?[31mb"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !tt.check(c) {
					t.Fatalf("unexpected config %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q, got config %+v", tt.wantErr, c)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.ContainsRune(err.Error(), 0x1b) {
				t.Errorf("error carries a raw escape character: %q", err)
			}
		})
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("nope: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("error %v should name %s and the key", err, path)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("missing file: want a not-exist error, got %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: got %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestFloor(t *testing.T) {
	f := SpeedFloors{HPC: 0.6, Train: 0.7, Infer: 0.95}
	for class, want := range map[string]float64{"hpc": 0.6, "train": 0.7, "infer": 0.95, "": 0.95, "bogus": 0.95} {
		if got := f.Floor(class); got != want {
			t.Errorf("Floor(%q) = %v, want %v", class, got, want)
		}
	}
}

// FuzzParse: arbitrary bytes never panic, and whatever parses is valid.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "..", "etc", "coscheml.yaml")); err == nil {
		f.Add(data)
	}
	for _, s := range []string{"", "policy: blind\n", "speed_floor:\n  hpc: 2\n", "a: &x [*x]\n", "profiling:\n  interval: 1h\n",
		"cluster:\n  nodes: n[1-4]\n  gpus_per_node: 2\n  gpu_memory_mib: 1000\n", "cluster:\n  nodes: \",\"\n  gpus_per_node: 2\n", "- 1\n", "{", "x: !!binary AAAA\n", "slots_per_gpu: 0x10\n", "admin_users: \"root, 1002,bad user\"\n", "raw_requests: allow\nunknown_profile: bootstrap\n",
		"cluster:\n  groups:\n    - nodes: a[1-2]\n      gpus_per_node: 4\n      gpu_memory_mib: 40960\n      gpu_model: M\n      feature: f\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted an invalid config: %v", verr)
			}
		}
	})
}

// The inventory in groups and flat, and what each rejects.
func TestClusterGroups(t *testing.T) {
	const two = "cluster:\n  groups:\n    - nodes: a[1-2]\n      gpus_per_node: 4\n      gpu_memory_mib: 40960\n      gpu_model: \"NVIDIA A100-SXM4-40GB\"\n      feature: a100\n      gres_type: a100\n" +
		"    - nodes: h1\n      gpus_per_node: 8\n      gpu_memory_mib: 81559\n      gpu_model: \"NVIDIA H100 80GB HBM3\"\n"
	for _, tc := range []struct {
		name      string
		yaml      string
		wantErr   []string
		wantHosts []HostInfo
		wantMax   int
		models    bool
	}{
		{name: "flat form is one group", yaml: "cluster:\n  nodes: n[1-2]\n  gpus_per_node: 2\n  gpu_memory_mib: 1000\n",
			wantHosts: []HostInfo{{"n1", 0}, {"n2", 0}}, wantMax: 2},
		{name: "two groups", yaml: two, wantHosts: []HostInfo{{"a1", 0}, {"a2", 0}, {"h1", 1}}, wantMax: 8, models: true},
		{name: "empty list is the default", yaml: "cluster:\n  groups: []\n"},
		{name: "groups and flat keys", yaml: "cluster:\n  nodes: n1\n  groups:\n    - nodes: a1\n      gpus_per_node: 1\n      gpu_memory_mib: 1\n",
			wantErr: []string{`"cluster.groups"`, "not both"}},
		{name: "node in two groups", yaml: "cluster:\n  groups:\n    - nodes: a[1-2]\n      gpus_per_node: 1\n      gpu_memory_mib: 1\n    - nodes: a2\n      gpus_per_node: 2\n      gpu_memory_mib: 1\n",
			wantErr: []string{`"cluster.groups[1].nodes"`, "also in group 0"}},
		{name: "group without gpus", yaml: "cluster:\n  groups:\n    - nodes: a1\n      gpu_memory_mib: 1\n", wantErr: []string{`"cluster.groups[0].gpus_per_node"`}},
		{name: "group without memory", yaml: "cluster:\n  groups:\n    - nodes: a1\n      gpus_per_node: 1\n", wantErr: []string{`"cluster.groups[0].gpu_memory_mib"`}},
		{name: "group without nodes", yaml: "cluster:\n  groups:\n    - gpus_per_node: 1\n      gpu_memory_mib: 1\n", wantErr: []string{`"cluster.groups[0].nodes"`}},
		{name: "unknown group key", yaml: "cluster:\n  groups:\n    - nodes: a1\n      gpus: 1\n", wantErr: []string{"cluster.groups[0].gpus", "valid keys"}},
		{name: "bad feature", yaml: "cluster:\n  groups:\n    - nodes: a1\n      gpus_per_node: 1\n      gpu_memory_mib: 1\n      feature: \"a&b\"\n", wantErr: []string{`"cluster.groups[0].feature"`}},
		{name: "bad gres type", yaml: "cluster:\n  groups:\n    - nodes: a1\n      gpus_per_node: 1\n      gpu_memory_mib: 1\n      gres_type: \"a:1\"\n", wantErr: []string{`"cluster.groups[0].gres_type"`}},
		{name: "control character in model", yaml: "cluster:\n  groups:\n    - nodes: a1\n      gpus_per_node: 1\n      gpu_memory_mib: 1\n      gpu_model: \"A\\x01\"\n", wantErr: []string{`"cluster.groups[0].gpu_model"`}},
		{name: "one model two features", yaml: "cluster:\n  groups:\n    - nodes: a1\n      gpus_per_node: 1\n      gpu_memory_mib: 1\n      gpu_model: M\n      feature: x\n    - nodes: a2\n      gpus_per_node: 1\n      gpu_memory_mib: 1\n      gpu_model: M\n      feature: y\n",
			wantErr: []string{`"cluster.groups[1].gpu_model"`}},
		{name: "groups not a list", yaml: "cluster:\n  groups:\n    nodes: a1\n", wantErr: []string{`"cluster.groups"`, "want a list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %v", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			hosts, err := c.Cluster.Hosts()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(hosts, tc.wantHosts) {
				t.Errorf("hosts %v, want %v", hosts, tc.wantHosts)
			}
			if m := c.Cluster.MaxGPUsPerNode(); m != tc.wantMax {
				t.Errorf("max GPUs per node %d, want %d", m, tc.wantMax)
			}
			if c.Cluster.Models() != tc.models {
				t.Errorf("Models() = %v, want %v", c.Cluster.Models(), tc.models)
			}
		})
	}
}
