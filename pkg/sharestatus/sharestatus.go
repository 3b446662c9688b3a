// SPDX-License-Identifier: Apache-2.0

// Package sharestatus builds a view of GPU sharing now, from the files coscheml
// keeps: the residency store (which jobs hold which GPUs), the decision log (the
// plugin's decisions, including those whose jobs have not started: reservations)
// and the observations (measured speeds of earlier co-located runs). It reads only
// through those packages' public APIs and changes nothing. `coscheml status` prints
// it; pkg/metrics turns it into Prometheus metrics.
package sharestatus

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// Sources says where to read. Empty paths and nil catalog/model leave that part
// of the view empty.
type Sources struct {
	ResidencyDir   string
	DecisionLog    string
	ObservationDir string
	Catalog        profile.Catalog // profiles of the tags, for predictions
	Model          *model.Model
	Floors         config.SpeedFloors
	SlotsPerGPU    int
	// Grace: residency entries past their expiry by more than this are stale
	// (reconcile's default is 10 minutes).
	Grace time.Duration
	// ReservationTTL: how long the plugin holds a decision whose job has not
	// started (libcoscheml's default is 15 minutes).
	ReservationTTL time.Duration
	// Nodes and GPUsPerNode are the configured inventory (cluster.nodes): their
	// gauges are exported at 0 while no job holds them.
	Nodes       []string
	GPUsPerNode int
}

// FromConfig fills Sources from a configuration with the plugin's defaults.
func FromConfig(cfg config.Config, cat profile.Catalog, m *model.Model) Sources {
	return Sources{
		ResidencyDir: cfg.ResidencyDir, DecisionLog: cfg.DecisionLog, ObservationDir: cfg.ObservationDir,
		Catalog: cat, Model: m, Floors: cfg.SpeedFloor, SlotsPerGPU: cfg.SlotsPerGPU,
		Grace: 10 * time.Minute, ReservationTTL: 15 * time.Minute,
		// An unreadable hostlist is the configuration's problem (config load
		// reports it); status then exports only nodes with jobs.
		Nodes: nodesOf(cfg.Cluster.Nodes), GPUsPerNode: cfg.Cluster.GPUsPerNode,
	}
}

func nodesOf(list string) []string {
	nodes, err := hostlist.Expand(list)
	if err != nil {
		return nil
	}
	return nodes
}

// Job is one job on a GPU.
type Job struct {
	JobID      string    `json:"job_id"`
	Tag        string    `json:"tag,omitempty"` // "" = untagged
	Class      string    `json:"class,omitempty"`
	User       string    `json:"user,omitempty"`
	Shards     int       `json:"shards"` // 0 = the whole GPU
	Start      time.Time `json:"start"`
	DecisionID string    `json:"decision_id,omitempty"`
	Floor      float64   `json:"floor,omitempty"`
	// PredictedSpeed is the model's speed for the job next to the GPU's other jobs
	// now (nil: untagged, no profile or no model; 1 when alone).
	PredictedSpeed *float64 `json:"predicted_speed"`
	// DecisionSpeed is what the plugin predicted when it placed the job.
	DecisionSpeed *float64 `json:"decision_speed"`
	// MeasuredSpeed is the newest observation of this tag next to exactly these
	// co-runner tags (an earlier run: a running job has no measurement of its own).
	MeasuredSpeed *float64  `json:"measured_speed"`
	MeasuredAt    time.Time `json:"measured_at,omitzero"`
	// BelowFloor: the prediction now is under the class's floor.
	BelowFloor bool `json:"below_floor"`
}

// GPU is one GPU with at least one job.
type GPU struct {
	Node   string `json:"node"`
	Index  int    `json:"gpu"`
	Shared bool   `json:"shared"` // two or more jobs
	Jobs   []Job  `json:"jobs"`
}

// Reservation is a decision to place a job on a GPU whose job has not started yet.
type Reservation struct {
	DecisionID     string    `json:"decision_id"`
	Time           time.Time `json:"time"`
	Tag            string    `json:"tag,omitempty"`
	Class          string    `json:"class,omitempty"`
	Action         string    `json:"action"` // share | exclusive
	Node           string    `json:"node"`
	GPU            int       `json:"gpu"`
	Shards         int       `json:"shards,omitempty"`
	PredictedSpeed float64   `json:"predicted_speed,omitempty"`
	UserID         uint32    `json:"user_id"` // the job's uid (status hides other users' from non-admins)
}

// Snapshot is the view at one time.
type Snapshot struct {
	Time         time.Time     `json:"time"`
	GPUs         []GPU         `json:"gpus"` // GPUs with jobs, by node then index
	Reservations []Reservation `json:"reservations"`
	StaleEntries int           `json:"stale_entries"` // residency entries past expiry + grace
	// Problems are the parts that could not be read; the rest is still shown.
	Problems []string `json:"problems,omitempty"`

	// inventory is Sources' Nodes and GPUsPerNode, for Metrics' zeros.
	nodes       []string
	gpusPerNode int
}

// SharedGPUs counts GPUs with two or more jobs.
func (s *Snapshot) SharedGPUs() int {
	n := 0
	for _, g := range s.GPUs {
		if g.Shared {
			n++
		}
	}
	return n
}

// Take reads the sources once. It fails only when the residency store, the core
// of the view, cannot be read; other sources that fail are listed in Problems.
func Take(src Sources, now time.Time) (Snapshot, error) {
	snap := Snapshot{Time: now, GPUs: []GPU{}, Reservations: []Reservation{}, nodes: src.Nodes, gpusPerNode: src.GPUsPerNode}
	if src.ResidencyDir == "" {
		return snap, errors.New("status: no residency_dir configured")
	}
	st, err := residency.Open(src.ResidencyDir)
	if err != nil {
		return snap, fmt.Errorf("status: %w", err)
	}
	res, err := st.List(now, src.Grace)
	if err != nil {
		return snap, fmt.Errorf("status: %w", err)
	}
	snap.StaleEntries = res.Stale
	for _, p := range res.NewProblems {
		snap.Problems = append(snap.Problems, p.Error())
	}

	decisions, started := map[string]decisionlog.Record{}, map[string]bool{}
	var recent []decisionlog.Record
	if src.DecisionLog != "" {
		// Decisions of running jobs can be older than the reservation window.
		oldest := now.Add(-src.ReservationTTL)
		for _, e := range res.Entries {
			if e.Start.Before(oldest) {
				oldest = e.Start
			}
		}
		recs, err := decisionlog.Since(src.DecisionLog, oldest.Add(-time.Hour))
		if err != nil {
			snap.Problems = append(snap.Problems, err.Error())
		}
		for _, r := range recs {
			decisions[r.ID] = r
			if !r.Time.Before(now.Add(-src.ReservationTTL)) {
				recent = append(recent, r)
			}
		}
	}
	measured := measurements(src.ObservationDir, &snap)

	byGPU := map[gpuKey]*GPU{}
	for _, e := range res.Entries {
		started[e.DecisionID] = true
		for _, g := range e.GPUs {
			k := gpuKey{e.Node, g}
			if byGPU[k] == nil {
				byGPU[k] = &GPU{Node: e.Node, Index: g}
			}
			j := Job{JobID: e.JobID, Tag: e.Tag, Class: string(e.Class), User: e.User, Shards: e.Shards, Start: e.Start, DecisionID: e.DecisionID}
			if d, ok := decisions[e.DecisionID]; ok && e.DecisionID != "" && d.PredictedSpeed > 0 {
				j.DecisionSpeed = ptr(d.PredictedSpeed)
			}
			byGPU[k].Jobs = append(byGPU[k].Jobs, j)
		}
	}
	for _, id := range res.Done {
		started[id] = true
	}
	for _, g := range byGPU {
		sort.Slice(g.Jobs, func(a, b int) bool { return g.Jobs[a].JobID < g.Jobs[b].JobID })
		g.Shared = len(g.Jobs) > 1
		for i := range g.Jobs {
			src.predict(g, i, measured)
		}
		snap.GPUs = append(snap.GPUs, *g)
	}
	sort.Slice(snap.GPUs, func(a, b int) bool {
		if snap.GPUs[a].Node != snap.GPUs[b].Node {
			return snap.GPUs[a].Node < snap.GPUs[b].Node
		}
		return snap.GPUs[a].Index < snap.GPUs[b].Index
	})

	for _, r := range recent {
		if started[r.ID] || r.Node == "" || r.GPU < 0 || (r.Action != "share" && r.Action != "exclusive") || r.Outcome == "reject" {
			continue
		}
		// A decision over several nodes holds its GPUs on each: one row per node.
		nodes := r.Nodes
		if len(nodes) == 0 {
			nodes = []string{r.Node}
		}
		for _, node := range nodes {
			snap.Reservations = append(snap.Reservations, Reservation{DecisionID: r.ID, Time: r.Time, Tag: r.Tag, Class: r.Class,
				Action: r.Action, Node: node, GPU: r.GPU, Shards: r.Shards, PredictedSpeed: r.PredictedSpeed, UserID: r.UserID})
		}
	}
	return snap, nil
}

type gpuKey struct {
	node string
	gpu  int
}

// predict fills the model's speed of job i next to the GPU's other jobs, its floor
// and the newest measurement of the same tags.
func (src Sources) predict(g *GPU, i int, measured map[string]observation.Observation) {
	j := &g.Jobs[i]
	if j.Tag == "" {
		return
	}
	j.Floor = src.Floors.Floor(j.Class)
	var coTags []string
	for k, o := range g.Jobs {
		if k != i {
			coTags = append(coTags, o.Tag)
		}
	}
	if o, ok := measured[pairKey(j.Tag, coTags)]; ok {
		j.MeasuredSpeed, j.MeasuredAt = ptr(o.Speed), o.When
	}
	if src.Model == nil || src.Catalog == nil {
		return
	}
	p, err := src.Catalog.Get(j.Tag)
	if err != nil {
		return
	}
	var co []*profile.Profile
	for _, t := range coTags {
		q, err := src.Catalog.Get(t)
		if t == "" || err != nil {
			return // an untagged or unknown co-runner: no honest prediction
		}
		co = append(co, q)
	}
	s := 1.0
	if len(co) > 0 {
		s = src.Model.PredictSpeed(p, co)
	}
	j.PredictedSpeed = ptr(s)
	j.BelowFloor = s < j.Floor
}

// measurements indexes the newest observation per tag and co-runner tags.
func measurements(dir string, snap *Snapshot) map[string]observation.Observation {
	out := map[string]observation.Observation{}
	if dir == "" {
		return out
	}
	obs, problems := observation.ReadDir(dir)
	for _, p := range problems {
		if !errors.Is(p, fs.ErrNotExist) { // no observations yet is normal
			snap.Problems = append(snap.Problems, p.Error())
		}
	}
	for _, o := range obs {
		k := pairKey(o.Tag, o.CoTags)
		if old, ok := out[k]; !ok || !o.When.Before(old.When) {
			out[k] = o
		}
	}
	return out
}

func pairKey(tag string, co []string) string {
	c := slices.Clone(co)
	sort.Strings(c)
	return tag + "|" + strings.Join(c, ",")
}

func ptr(v float64) *float64 { return &v }
