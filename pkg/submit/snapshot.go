// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Sources are the loaders the engine uses; tests replace them.
type Sources struct {
	ConfigPath  string // "" = config.Default()
	LoadConfig  func(path string) (config.Config, error)
	LoadModel   func(path string) (model.Predictor, error)                                // "" = the embedded default
	LoadCatalog func(dir string, limit int) (cat profile.Catalog, bad []error, err error) // at most limit profiles; err: the store is unusable
	NewPolicy   func(cfg config.Config, pred model.Predictor) (placement.Policy, error)
	// LoadPartitions reads slurm.conf's partitions (nil: unknown, not checked).
	LoadPartitions func() (*Partitions, error)
	// NodeStates lists the nodes that cannot start jobs now (drained, down, ...),
	// polled in the background (nil: not polled). See nodestate.go.
	NodeStates func(ctx context.Context) (map[string]bool, error)
	// QueueIDs lists the decision ids the queue's jobs carry, with their job
	// ids (nil: reservations
	// of jobs that leave the queue unstarted last their TTL).
	QueueIDs func(ctx context.Context) (QueueListing, error)
}

// DefaultSources loads from the real files with the project's packages.
func DefaultSources(configPath string) Sources {
	return Sources{
		ConfigPath: configPath,
		LoadConfig: func(p string) (config.Config, error) {
			if p == "" {
				return config.Default(), nil
			}
			return config.Load(p)
		},
		LoadModel: func(p string) (model.Predictor, error) {
			m, _, err := model.Current(p)
			if err != nil {
				return nil, err // no typed nil in the interface
			}
			return m, nil
		},
		LoadCatalog: func(dir string, limit int) (profile.Catalog, []error, error) {
			if fi, err := os.Stat(dir); err != nil {
				return nil, nil, fmt.Errorf("profile store: %w", err)
			} else if !fi.IsDir() {
				return nil, nil, fmt.Errorf("profile store %s: not a folder", dir)
			}
			s, err := profile.Open(dir)
			if err != nil {
				return nil, nil, err
			}
			cat, bad := s.CatalogMax(limit)
			return cat, bad, nil
		},
		NewPolicy: func(cfg config.Config, pred model.Predictor) (placement.Policy, error) {
			return placeconf.Policy(cfg, pred)
		},
	}
}

// Snapshot is one consistent set of configuration, model, profiles, policy and the
// problems found loading them. A loader builds it whole and the engine swaps it in
// as one value, so a decision never sees a new configuration with an old model.
// It is immutable once published (the policy excepted: its scratch is used only
// by decisions, under the cluster view's lock).
type Snapshot struct {
	cfg    config.Config
	cfgErr error // the configuration is unusable: pass every job through

	pred     model.Predictor // the model, wrapped by the pair memory when there is one
	bare     model.Predictor // the model as loaded
	mem      memLoad
	modelErr error
	catalog  profile.Catalog
	catErr   error
	badProfs []error
	policy   placement.Policy
	polErr   error

	// admins are the uids of admin_users (root and SlurmUser come from the shim).
	admins map[uint32]bool

	nodes  []string
	shapes []placement.Node // by node: its GPUs (count, memory), model and features, no residents
	// selectsModels: some group names a GPU model, feature or gres Type, so jobs'
	// --constraint and typed GPU requests are read (modelConstraint).
	selectsModels bool
	nodeIdx       map[string]int
	clusterErr    error
	reach         placement.Reach // how Slurm reaches a GPU (shard_pinning)
	parts         *Partitions     // slurm.conf's partitions (nil: unknown, not checked)
	key           []byte          // signs decision ids (nil: the engine's own)
	// interner is shared by every cluster built for this snapshot, so the
	// policy's prediction memo survives the rebuild after each residency change.
	interner *placement.Interner

	// notes are the problems this load found (and the ones it solved, as ""),
	// keyed for the engine's once-per-problem log.
	notes  []note
	stamps stamps
	at     time.Time
}

// note is a problem under a key; "" marks the problem solved.
type note struct{ key, msg string }

// degraded names the unusable parts ("" when none).
func (l *Snapshot) degraded() string {
	var parts []string
	for _, p := range []struct {
		name string
		err  error
	}{{"model", l.modelErr}, {"profiles", l.catErr}, {"policy", l.polErr}, {"cluster inventory", l.clusterErr}} {
		if p.err != nil {
			parts = append(parts, p.name)
		}
	}
	return strings.Join(parts, ", ")
}

type stamp struct {
	mod  time.Time
	size int64
	n    int // files, for a folder of observations
	ok   bool
}

// stamps tell the background loop that a file changed (mtime and size). The
// observations' stamp is checked less often (Options.MemoryEvery).
type stamps struct{ config, model, profiles, observations stamp }

func statStamp(path string) stamp {
	if path == "" {
		return stamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
}

func currentStamps(src *Sources, cfg config.Config) stamps {
	return stamps{
		config:   statStamp(src.ConfigPath),
		model:    statStamp(cfg.ModelPath),
		profiles: statStamp(cfg.ProfileDir),
	}
}

// loadSnapshot reads everything once. prev (may be nil) is the snapshot in effect:
// a model that fails to reload is replaced by prev's when its path did not change.
// It touches nothing but the files it reads. The pair memory's co-located runs
// measured at or after runsSince are kept for the metrics (Engine.countRuns).
func loadSnapshot(src *Sources, prev *Snapshot, now, runsSince time.Time) *Snapshot {
	l := &Snapshot{at: now}
	cfg, err := src.LoadConfig(src.ConfigPath)
	if err != nil {
		l.cfgErr = fmt.Errorf("configuration unusable, every job passes through unchanged: %w", err)
		l.stamps = currentStamps(src, config.Config{})
		l.notes = append(l.notes, note{"config", l.cfgErr.Error()})
		return l
	}
	l.cfg = cfg
	l.stamps = currentStamps(src, cfg)
	if cfg.DecisionKey != "" {
		var kerr error
		if l.key, kerr = loadKey(cfg.DecisionKey); kerr != nil {
			l.notes = append(l.notes, note{"info-decisionkey", fmt.Sprintf("decision ids signed with a key of this start only "+
				"(ids of queued jobs are not recognised after a restart): %v", kerr)})
		} else {
			l.notes = append(l.notes, note{"info-decisionkey", ""})
		}
	}
	l.reach = placeconf.Reach(cfg)
	l.interner = placement.NewInterner()

	l.bare, err = src.LoadModel(cfg.ModelPath)
	if err != nil {
		if prev != nil && prev.bare != nil && prev.cfg.ModelPath == cfg.ModelPath {
			l.bare = prev.bare
			l.notes = append(l.notes, note{"model", fmt.Sprintf("model reload failed, keeping the previous model: %v", err)})
		} else {
			l.modelErr = fmt.Errorf("model unusable, tagged jobs pass through unchanged: %w", err)
		}
	} else {
		l.notes = append(l.notes, note{"model", ""})
	}
	predictorNote := ""
	if cfg.Predictor == config.PredictorOptimistic {
		// Evaluation only: placement then ignores the model entirely, so it is
		// said as a problem, at every load, not as an info line.
		l.bare, l.modelErr = model.Optimistic{}, nil
		predictorNote = "predictor: optimistic is set (EVALUATION ONLY): every pair is predicted at full speed, the model is ignored; set predictor: model for production"
	}
	l.notes = append(l.notes, note{"predictor", predictorNote})
	l.catalog, l.badProfs, err = src.LoadCatalog(cfg.ProfileDir, cfg.MaxProfiles)
	if err != nil {
		l.catErr = fmt.Errorf("profiles unusable, tagged jobs pass through unchanged: %w", err)
	}
	l.pred = l.bare
	if memoryOn(cfg) {
		l.stamps.observations = obsStamp(cfg.ObservationDir)
		if l.bare != nil && l.catErr == nil {
			l.mem = loadMemory(cfg.ObservationDir, l.bare, l.catalog, time.Now, runsSince, nodeModels(cfg))
			if l.mem.pred != nil {
				l.pred = l.mem.pred
			}
		}
	}
	l.notes = append(l.notes, note{"info-pairmemory", l.mem.problem})
	if l.pred != nil {
		if l.policy, err = src.NewPolicy(cfg, l.pred); err != nil {
			l.polErr = fmt.Errorf("placement policy: %w", err)
		}
	}
	var adminNote string
	l.admins, adminNote = resolveAdmins(cfg.AdminUsers)
	l.notes = append(l.notes, note{"info-admins", adminNote})
	for _, g := range cfg.Cluster.Groups {
		l.selectsModels = l.selectsModels || g.GPUModel != "" || g.Feature != "" || g.GresType != ""
	}
	l.shapes, err = placeconf.Nodes(cfg)
	l.nodes = make([]string, len(l.shapes))
	for i := range l.shapes {
		l.nodes[i] = l.shapes[i].Name
	}
	switch {
	case err != nil:
		l.clusterErr = err
	case len(l.nodes) == 0:
		l.clusterErr = errors.New("cluster.nodes is empty: no node to place on")
	case badGPUCount(l.shapes):
		l.clusterErr = fmt.Errorf("cluster.gpus_per_node: want 1..64 on every node")
	case cfg.SlotsPerGPU < 1:
		l.clusterErr = fmt.Errorf("slots_per_gpu = %d: want >= 1", cfg.SlotsPerGPU)
	}
	partNote := ""
	if src.LoadPartitions != nil {
		// Unreadable, like GuardPinning's slurm.conf: nothing is known, so the
		// partitions are not checked (logged; it degrades nothing else).
		var err error
		if l.parts, err = src.LoadPartitions(); err != nil {
			l.parts, partNote = nil, fmt.Sprintf("slurm.conf partitions unknown, pins are not checked against them: %v", err)
		}
	}
	l.nodeIdx = make(map[string]int, len(l.nodes))
	for i, n := range l.nodes {
		l.nodeIdx[n] = i
	}

	l.notes = append(l.notes, note{"config", ""})
	if l.modelErr != nil {
		l.notes = append(l.notes, note{"model", l.modelErr.Error()})
	}
	l.notes = append(l.notes, note{"profiles", errString(l.catErr)})
	var unreadable, beyond []error
	for _, err := range l.badProfs {
		if errors.Is(err, profile.ErrTooMany) {
			beyond = append(beyond, err)
		} else {
			unreadable = append(unreadable, err)
		}
	}
	if len(unreadable) > 0 {
		l.notes = append(l.notes, note{"badprofiles", fmt.Sprintf("%d unreadable profiles skipped: %v", len(unreadable), errors.Join(unreadable...))})
	} else {
		l.notes = append(l.notes, note{"badprofiles", ""})
	}
	l.notes = append(l.notes, note{"profilebound", errString(errors.Join(beyond...))})
	l.notes = append(l.notes, note{"policy", errString(l.polErr)}, note{"cluster", errString(l.clusterErr)}, note{"info-partitions", partNote})
	return l
}

// memoryOn says whether the configuration asks for a pair memory.
func memoryOn(cfg config.Config) bool { return cfg.PairMemory && cfg.ObservationDir != "" }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// badGPUCount reports a node with no GPU or more than 64 (the configuration
// validates this; a Snapshot built otherwise must not index out of range).
func badGPUCount(nodes []placement.Node) bool {
	for i := range nodes {
		if n := len(nodes[i].GPUs); n < 1 || n > 64 {
			return true
		}
	}
	return false
}

// nodeModels maps a configured node to its group's GPU model; nil when no
// group names one (the pair memory then learns from every run).
func nodeModels(cfg config.Config) func(string) string {
	models := map[string]string{}
	groups := cfg.Cluster.NodeGroups()
	hosts, err := cfg.Cluster.Hosts()
	if err != nil {
		return nil
	}
	for _, h := range hosts {
		if m := groups[h.Group].GPUModel; m != "" {
			models[h.Name] = m
		}
	}
	if len(models) == 0 {
		return nil
	}
	return func(node string) string { return models[node] }
}
