// SPDX-License-Identifier: Apache-2.0

// Package config loads etc/coscheml.yaml: every knob, with safe defaults.
//
// Loading is strict because a typo in a scheduler's configuration must not silently
// fall back to a default: unknown keys, values of the wrong type and out-of-range
// values are all rejected, and every error names the key (and its line).
package config

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/coscheml/coscheml/pkg/floors"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/policyname"
)

// Config is the whole configuration. Field docs live in etc/coscheml.yaml and
// docs/configuration.md.
type Config struct {
	ProfileDir     string `yaml:"profile_dir"`
	ModelPath      string `yaml:"model_path"` // empty: the embedded default model
	ResidencyDir   string `yaml:"residency_dir"`
	ObservationDir string `yaml:"observation_dir"`
	DecisionLog    string `yaml:"decision_log"`
	// DecisionKey: the controller's secret that signs decision ids (0600,
	// created at first start when missing; docs/install.md).
	DecisionKey string `yaml:"decision_key"`
	// MetricsFile: the plugin's decision counters, Prometheus text format ("" = off).
	MetricsFile string `yaml:"metrics_file"`
	// PairMemory: the plugin learns pairs from observation_dir (pkg/pairmem).
	PairMemory bool `yaml:"pair_memory"`

	Policy       string      `yaml:"policy"` // coscheml | exclusive | blind | least-loaded | utilsum | random
	SpeedFloor   SpeedFloors `yaml:"speed_floor"`
	SlotsPerGPU  int         `yaml:"slots_per_gpu"` // Slurm shards per GPU
	MaxCoRunners int         `yaml:"max_corunners"` // most jobs sharing one GPU

	// PreferShareSpeed: while idle GPUs exist, Co-scheML shares only when every
	// affected job keeps at least this predicted speed (placement.Options).
	PreferShareSpeed float64 `yaml:"prefer_share_speed"`
	// ShareMultiGPU: a job of several GPUs on one node may take GPUs shared with
	// compatible residents, each judged like a one-GPU share, where Slurm can
	// express it (typed pinning with a shard Type on every gres.conf shard line);
	// false keeps such jobs on whole idle GPUs.
	ShareMultiGPU bool `yaml:"share_multi_gpu"`
	// MemReserveMiB is kept free on a shared GPU beyond the profiles' memory.
	MemReserveMiB float64 `yaml:"mem_reserve_mib"`
	// UtilSumThreshold is the utilsum baseline's limit on summed solo GPU util (%).
	UtilSumThreshold float64 `yaml:"utilsum_threshold"`
	// FloorConfidence: the coverage level (0..1) at which a prediction, less the
	// model's calibrated margin, must clear the floor (0 = the model's default,
	// chosen by cross-validation at training; docs/model.md).
	FloorConfidence float64 `yaml:"floor_confidence"`

	Untagged       string `yaml:"untagged"`        // pass | exclusive
	UnknownProfile string `yaml:"unknown_profile"` // bootstrap | reject | exclusive
	InvalidTag     string `yaml:"invalid_tag"`     // reject | exclusive

	// RawRequests: what happens to a raw shard request (gres shard) or a node-list
	// change that would bypass placement, from a user who is not an admin
	// (refuse | allow).
	RawRequests string `yaml:"raw_requests"`
	// AdminUsers: users (names or uids, comma-separated) exempt from raw_requests,
	// beyond root and SlurmUser.
	AdminUsers string `yaml:"admin_users"`

	// ShardPinning is how the plugin makes Slurm use the GPU it chose: first-fit
	// (a shard count Slurm 22.05's first-fit allocator lands on the GPU with),
	// typed (every GPU has its own Slurm GPU Type, named in the request) or auto
	// (typed where slurm.conf gives every GPU its Type <prefix><i>, else first-fit).
	ShardPinning string `yaml:"shard_pinning"`
	// ShardTypePrefix: with typed pinning, GPU index i has the Slurm Type <prefix><i>.
	ShardTypePrefix string `yaml:"shard_type_prefix"`
	// WaitDefer: a tagged job answered "wait" gets begin_time now+WaitDefer, so
	// that `coscheml redecide --loop` can re-decide it (scontrol update) before it
	// falls back to its whole-GPU request (0 = off: a wait runs on a whole GPU).
	// Only while the loop runs (RedecideHeartbeat fresh): without it a deferral
	// would only delay the job.
	WaitDefer time.Duration `yaml:"wait_defer"`
	// RedecideHeartbeat: the file `coscheml redecide --loop` renews after each
	// pass and the plugin reads to know the loop runs ("": redecide.alive beside
	// decision_log; see HeartbeatPath).
	RedecideHeartbeat string `yaml:"redecide_heartbeat"`
	// DecideTimeout: how long slurmctld's submitting thread waits for a
	// decision before it passes the job through unchanged (fail open).
	DecideTimeout time.Duration `yaml:"decide_timeout"`
	// LogDecisions is the level of slurmctld's log at which the plugin writes
	// its one line per decision (LogInfo, LogVerbose or LogDebug). Problems,
	// refusals and removed tokens are always logged at info. Why not info by
	// default: the line costs a slurmctld thread about 30 us per submission
	// (a formatted write to the log file), 8% of a 26.05 submission, and the
	// decision log already records every decision.
	LogDecisions string `yaml:"log_decisions"`

	// MaxProfiles bounds the profile store: the most profiles slurmctld's
	// library (and every other reader of the store) loads, and the size beyond
	// which no job's runs create a new profile.
	MaxProfiles int `yaml:"max_profiles"`

	// Predictor is the speed predictor placement uses: "model" (model_path) or,
	// for evaluation only, "optimistic" (model.Optimistic: every pair at full
	// speed, the worst case of a wrong model, to measure the guard against).
	Predictor string `yaml:"predictor"`

	Cluster   ClusterSpec   `yaml:"cluster"`
	Profiling ProfilingSpec `yaml:"profiling"`
	Guard     GuardSpec     `yaml:"guard"`
}

// SpeedFloors is the lowest predicted speed each class may be pushed to by sharing;
// the type is pkg/floors', the one definition placement uses too.
type SpeedFloors = floors.Floors

// ClusterSpec describes the GPU nodes the plugin may place on (job_submit cannot ask
// slurmctld, so the inventory is configured).
//
// A homogeneous cluster is described flat (nodes, gpus_per_node, gpu_memory_mib);
// a cluster of several GPU models, counts or memories by groups, one per kind of
// node. The two forms exclude each other; NodeGroups gives either as groups.
type ClusterSpec struct {
	Nodes        string  `yaml:"nodes"` // Slurm hostlist, e.g. "n[1-4]"
	GPUsPerNode  int     `yaml:"gpus_per_node"`
	GPUMemoryMiB float64 `yaml:"gpu_memory_mib"`
	Partition    string  `yaml:"partition"` // only jobs of this partition are placed ("" = all)
	// Groups: nodes of one GPU model, count and memory each (instead of the flat keys).
	Groups []NodeGroup `yaml:"groups"`
}

// NodeGroup is a set of nodes alike in their GPUs.
type NodeGroup struct {
	Nodes        string  `yaml:"nodes"`
	GPUsPerNode  int     `yaml:"gpus_per_node"`
	GPUMemoryMiB float64 `yaml:"gpu_memory_mib"`
	// GPUModel is the GPUs' model as NVML names it ("NVIDIA A100-SXM4-80GB");
	// profiles measured on it serve these GPUs. "" = unnamed (one model cluster-wide).
	GPUModel string `yaml:"gpu_model"`
	// Feature is the Slurm node feature of these nodes that a job asks for
	// with --constraint; "" = none.
	Feature string `yaml:"feature"`
	// GresType is the Slurm GPU Type (gres.conf Type=) of these GPUs when it
	// names the model ("a100"), for --gres=gpu:<type>:N; "" = none (per-GPU
	// Types for pinning, or untyped GPUs).
	GresType string `yaml:"gres_type"`
}

// MaxGroups bounds cluster.groups.
const MaxGroups = 256

// NodeGroups is the inventory as groups: cluster.groups, or the flat keys as
// one group; nil when no node is configured.
func (s ClusterSpec) NodeGroups() []NodeGroup {
	if len(s.Groups) > 0 {
		return s.Groups
	}
	if s.Nodes == "" {
		return nil
	}
	return []NodeGroup{{Nodes: s.Nodes, GPUsPerNode: s.GPUsPerNode, GPUMemoryMiB: s.GPUMemoryMiB}}
}

// HostInfo is one configured node with its group's GPUs.
type HostInfo struct {
	Name  string
	Group int // index into NodeGroups()
}

// Hosts expands every group's hostlist, in group then hostlist order; a node in
// two groups is an error (its GPUs would be described twice).
func (s ClusterSpec) Hosts() ([]HostInfo, error) {
	var out []HostInfo
	seen := map[string]int{}
	for gi, g := range s.NodeGroups() {
		hosts, err := hostlist.Expand(g.Nodes)
		if err != nil {
			return nil, fmt.Errorf("%s.nodes: %w", groupKey(s, gi), err)
		}
		if len(hosts) == 0 {
			return nil, fmt.Errorf("%s.nodes: %q names no host", groupKey(s, gi), Sanitize(g.Nodes))
		}
		for _, h := range hosts {
			if prev, dup := seen[h]; dup {
				return nil, fmt.Errorf("%s.nodes: node %s is also in group %d", groupKey(s, gi), Sanitize(h), prev)
			}
			seen[h] = gi
			out = append(out, HostInfo{Name: h, Group: gi})
		}
	}
	return out, nil
}

// Models reports whether any group names its GPU model.
func (s ClusterSpec) Models() bool {
	for _, g := range s.Groups {
		if g.GPUModel != "" {
			return true
		}
	}
	return false
}

// MaxGPUsPerNode is the most GPUs of any configured node (0: none configured).
func (s ClusterSpec) MaxGPUsPerNode() int {
	m := 0
	for _, g := range s.NodeGroups() {
		m = max(m, g.GPUsPerNode)
	}
	return m
}

// groupKey names group gi in errors: "cluster.groups[gi]", or "cluster" for the flat form.
func groupKey(s ClusterSpec, gi int) string {
	if len(s.Groups) == 0 {
		return "cluster"
	}
	return fmt.Sprintf("cluster.groups[%d]", gi)
}

// ProfilingSpec controls the node-side NVML sampler.
type ProfilingSpec struct {
	Enabled    bool          `yaml:"enabled"`
	Backend    string        `yaml:"backend"` // nvml | mock
	Interval   time.Duration `yaml:"interval"`
	StaleAfter time.Duration `yaml:"stale_after"`
	// The evidence a profile's metrics need (docs/profiling.md): MinRuns sampled
	// runs of at least MinRunTime each, by at least MinUsers distinct users,
	// whose per-user medians agree.
	MinRuns    int           `yaml:"min_runs"`
	MinUsers   int           `yaml:"min_users"`
	MinRunTime time.Duration `yaml:"min_run_time"`
	// MaxNewProfilesPerUser bounds the tags without a profile that one user's
	// runs may start or create profiles for (0: jobs never create profiles).
	MaxNewProfilesPerUser int `yaml:"max_new_profiles_per_user"`
}

// GuardSpec configures the node's runtime guard, `coscheml-node guard`
// (docs/guard.md). Its thresholds are pkg/guard's defaults but for the window
// and sustain time; what a site sets here is whether it runs, how often, how long it waits on the driver and on
// Slurm's commands, where its events and metrics go and what it does per class.
type GuardSpec struct {
	Enabled bool `yaml:"enabled"`
	// DryRun: log and record what the guard would do, never run Slurm's commands.
	DryRun bool          `yaml:"dry_run"`
	Period time.Duration `yaml:"period"`
	// NVMLTimeout bounds each NVML call (a hung driver must not hang the guard).
	NVMLTimeout time.Duration `yaml:"nvml_timeout"`
	// CommandTimeout bounds each scontrol or scancel the guard runs.
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// EventDir holds one event log per node (<node>.log, decision-log records
	// with op "guard") that `coscheml explain` reads; "" = no events written.
	EventDir string `yaml:"event_dir"`
	// StateDir holds what the guard must remember across a restart: the jobs
	// it holds suspended and the job whose end resumes each (<node>.suspended);
	// "" = kept in memory only.
	StateDir string `yaml:"state_dir"`
	// MetricsFile: the guard's action counters, Prometheus text format ("" = off).
	MetricsFile string       `yaml:"metrics_file"`
	Actions     GuardActions `yaml:"actions"`
	// Window is the smoothing window in rounds; SustainFor how long a speed
	// breach must hold before it is acted on (guard.Config's fields).
	Window     int           `yaml:"window"`
	SustainFor time.Duration `yaml:"sustain_for"`
	// EmulatedMetricsDir, for evaluation only: read the per-process readings the
	// replay's emulated jobs write there (nvml.DirBackend) instead of NVML. It
	// must be owned by root (or the guard's user) and writable by no one else.
	EmulatedMetricsDir string `yaml:"emulated_metrics_dir"`
}

// The predictor names.
const (
	PredictorModel      = "model"
	PredictorOptimistic = "optimistic"
)

// GuardActions says what the guard does to a job of each class.
type GuardActions struct {
	HPC   GuardClassActions `yaml:"hpc"`
	Train GuardClassActions `yaml:"train"`
	Infer GuardClassActions `yaml:"infer"`
}

// GuardClassActions: Memory when the job is over its own memory budget on a
// GPU near full (observe | requeue | cancel), Floor when the job holds a
// co-runner below its speed floor (observe | suspend | requeue).
type GuardClassActions struct {
	Memory string `yaml:"memory"`
	Floor  string `yaml:"floor"`
}

// The guard's action words.
var (
	GuardMemoryActions = []string{"observe", "requeue", "cancel"}
	// A floor breach never cancels: the job acted on was placed badly, it did nothing wrong.
	GuardFloorActions = []string{"observe", "suspend", "requeue"}
)

// The unknown_profile modes.
const (
	UnknownBootstrap = "bootstrap" // alone on a whole GPU, profiled there by the node Prolog/Epilog
	UnknownReject    = "reject"
	UnknownExclusive = "exclusive"
)

// The raw_requests modes.
const (
	RawRefuse = "refuse"
	RawAllow  = "allow"
)

// The shard_pinning modes.
const (
	PinFirstFit = "first-fit"
	PinTyped    = "typed"
	// PinAuto: typed where slurm.conf gives every GPU of every shard node its own
	// Type <shard_type_prefix><index>, else first-fit (resolved by the plugin and
	// `coscheml preflight` from slurm.conf; the simulator models a cluster set up
	// as docs/install.md says, i.e. typed).
	PinAuto = "auto"
)

// log_decisions: the slurmctld log level of the plugin's decision lines (Slurm's
// info, verbose and debug; SlurmctldDebug decides what reaches the file).
const (
	LogInfo    = "info"
	LogVerbose = "verbose"
	LogDebug   = "debug"
)

// Policies are the placement policy names the configuration accepts (the
// registry's configurable ones: the oracle needs measured truth and exists only in
// the simulator).
var Policies = policyname.Configurable()

// Default returns the safe defaults.
func Default() Config {
	return Config{
		ProfileDir:       "/var/lib/coscheml/profiles",
		ResidencyDir:     "/var/lib/coscheml/residency",
		ObservationDir:   "/var/lib/coscheml/observations",
		DecisionLog:      "/var/lib/coscheml/decisions.log",
		DecisionKey:      "/var/lib/coscheml/decision.key",
		PairMemory:       true,
		Policy:           "coscheml",
		SpeedFloor:       floors.Default(),
		SlotsPerGPU:      4,
		MaxCoRunners:     2,
		PreferShareSpeed: 0.85, ShareMultiGPU: true,
		UtilSumThreshold: 100,
		Untagged:         "pass",
		UnknownProfile:   UnknownBootstrap,
		InvalidTag:       "reject",
		RawRequests:      RawRefuse,
		ShardPinning:     PinAuto,
		ShardTypePrefix:  "g",
		WaitDefer:        20 * time.Second,
		DecideTimeout:    500 * time.Millisecond,
		LogDecisions:     LogVerbose,
		MaxProfiles:      5000,
		Predictor:        PredictorModel,
		Profiling: ProfilingSpec{Enabled: true, Backend: "nvml", Interval: 500 * time.Millisecond, StaleAfter: 30 * 24 * time.Hour,
			MinRuns: 3, MinUsers: 2, MinRunTime: time.Minute, MaxNewProfilesPerUser: 10},
		Guard: GuardSpec{Enabled: true, Period: 5 * time.Second, NVMLTimeout: 2 * time.Second, CommandTimeout: 10 * time.Second,
			EventDir: "/var/lib/coscheml/guard", StateDir: "/var/lib/coscheml/guard", Window: 6, SustainFor: time.Minute,
			Actions: GuardActions{
				HPC:   GuardClassActions{Memory: "requeue", Floor: "requeue"},
				Train: GuardClassActions{Memory: "requeue", Floor: "requeue"},
				Infer: GuardClassActions{Memory: "requeue", Floor: "requeue"},
			}},
	}
}

// HeartbeatPath is where the re-decide loop's heartbeat lives: redecide_heartbeat,
// else redecide.alive in decision_log's folder (both the loop and slurmctld can
// write and read there); "" when neither is set: no loop is ever seen running.
func (c Config) HeartbeatPath() string {
	switch {
	case c.RedecideHeartbeat != "":
		return c.RedecideHeartbeat
	case c.DecisionLog != "":
		return filepath.Join(filepath.Dir(c.DecisionLog), "redecide.alive")
	}
	return ""
}
