// SPDX-License-Identifier: Apache-2.0

// Package placement decides on which GPU a job runs and whether it shares it.
// One code path serves slurmctld (through libcoscheml) and the simulator.
package placement

import "github.com/coscheml/coscheml/pkg/profile"

// Resident is a job currently holding slots on one GPU.
type Resident struct {
	JobID   string // Slurm job ID, or the decision ID of a Reserved resident
	Profile *profile.Profile
	Class   profile.Class
	Slots   int // sharing slots (Slurm shards) it holds on this GPU
	Kind    ResidentKind
	// GPUs is how many GPUs the job holds in all (0 or 1: this one). A job
	// of several GPUs runs at its slowest GPU's pace, so slowing it on this GPU
	// costs the work of all of them.
	GPUs int
}

// ResidentKind says what holds a GPU's slots, for reasons and callers that tell
// them apart; placement treats both kinds alike.
type ResidentKind uint8

const (
	Running  ResidentKind = iota // a job that runs there (the residency store's view)
	Reserved                     // a decision whose job has not started yet
)

// GPU is one device of a node.
type GPU struct {
	Index     int
	MemMiB    float64
	Slots     int // sharing slots of this GPU (shards per GPU in Slurm)
	Residents []Resident
}

// Node is one host with its GPUs.
type Node struct {
	Name string
	GPUs []GPU
	// Model is the GPU model of the node's GPUs ("" = unnamed); a request
	// naming a model is placed only on nodes of that model.
	Model string
	// Features are the names a job selects this node by (its Slurm node
	// features, its GPUs' model-named Type); a request naming features is
	// placed only on nodes that have them all.
	Features []string
}

// HasFeatures reports whether the node has every one of fs.
func (n *Node) HasFeatures(fs []string) bool {
	for _, f := range fs {
		found := false
		for _, have := range n.Features {
			if have == f {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// admits reports whether the node meets r's model and feature constraints.
func (n *Node) admits(r *Request) bool {
	return (r.Model == "" || n.Model == r.Model) && n.HasFeatures(r.Features)
}

// Cluster is the state a decision is made on.
//
// Build it with NewCluster, or as a literal followed by Reindex; change residents only
// through Apply and Remove (or call Reindex after editing Nodes by hand), so that the
// per-GPU caches stay equal to the residents. A Cluster holds a pointer to its caches:
// copy it with Clone, not by assignment.
type Cluster struct {
	Nodes []Node
	// Reach is how Slurm reaches a GPU with a single-GPU shard request on this
	// cluster: GPUs it cannot reach are filtered out for every policy (several-GPU
	// requests are whole GPUs in Slurm and are not filtered). The caches serve
	// every reach: it may change without a Reindex.
	Reach Reach
	// Interner, when set, gives resident sets signatures that stay the same
	// across Reindex and across clusters sharing it, so a policy's prediction
	// memo survives a rebuild of the cluster (slurmctld rebuilds it on every
	// residency change). nil: a private table per Reindex.
	Interner *Interner

	ix *index // caches; nil until Reindex, Apply or Remove builds them
}

// Request is a job asking for GPUs.
type Request struct {
	JobID   string
	Tag     string
	Profile *profile.Profile
	Class   profile.Class
	GPUs    int // GPUs wanted
	// Kind is what the job becomes on the GPUs when a decision for it is applied.
	Kind ResidentKind
	// Nodes, when not nil, says which nodes the job may run on (Nodes[n] for
	// Cluster.Nodes[n]; missing entries are false): the job's partition, its
	// -w and -x, and the nodes able to start jobs. nil allows every node.
	Nodes []bool
	// Model, when set, is the GPU model the job must run on (Node.Model), and
	// Features the node features it asks for (Node.Features, all of them): a
	// job's --gres=gpu:<type>:N and --constraint. They narrow Nodes.
	Model    string
	Features []string
	// EstDuration is the job's expected run time alone, in seconds (0:
	// unknown); the Lucid peer orders its queue by it.
	EstDuration float64
	// OneNode keeps a several-GPU request on one node (a Slurm job without
	// -N: its GPUs are per node); false lets the placement spread it over
	// nodes (the simulator's jobs, which name no node count).
	OneNode bool
	// SpanNodes > 1 asks for exactly SpanNodes nodes with GPUs/SpanNodes GPUs
	// on each, at the same GPU indices on every node: a Slurm job of -N m with
	// a per-node GRES, whose typed shard request names the same GPU Types on
	// each of its nodes. Without a span over shared GPUs (a policy that keeps
	// several-GPU jobs whole, too few alike nodes), whole idle GPUs.
	SpanNodes int
}

// constrained reports whether r names a model or features.
func (r *Request) constrained() bool { return r.Model != "" || len(r.Features) > 0 }

// allows reports whether the request may use node n.
func (r *Request) allows(n int32) bool {
	return r.Nodes == nil || (int(n) < len(r.Nodes) && r.Nodes[n])
}

// Action is what a decision tells the scheduler to do.
type Action int

const (
	ActionWait      Action = iota // no acceptable GPU now
	ActionExclusive               // whole idle GPU(s)
	ActionShare                   // co-locate on GPU(s) already in use
)

func (a Action) String() string {
	switch a {
	case ActionExclusive:
		return "exclusive"
	case ActionShare:
		return "share"
	}
	return "wait"
}

// Slot is one GPU a decision uses.
type Slot struct {
	Node  int // index into Cluster.Nodes
	GPU   int // index into Node.GPUs
	Slots int // slots taken on that GPU
}

// Decision is a placement with its reason.
type Decision struct {
	Action           Action
	Placement        []Slot
	PredictedSpeed   float64 // predicted speed of the new job (1 when alone)
	MinResidentSpeed float64 // lowest predicted speed among affected residents (1 if none)
	Reason           string
}

// Policy chooses a placement. Implementations must not modify the cluster.
type Policy interface {
	Name() string
	Place(c *Cluster, r *Request) Decision
}

// Reach says which GPUs Slurm can hand a single-GPU shard request to, so that a
// decision only chooses GPUs the rewritten request really lands on.
type Reach uint8

const (
	// ReachTyped: every GPU with enough free slots can be reached, with the slots the
	// policy wants (Slurm with one GPU Type per GPU index: the request names the GPU;
	// also the simulator's idealized cluster). The zero value.
	ReachTyped Reach = iota
	// ReachFirstFit: Slurm 22.05's shard allocator gives a request for K shards to the
	// lowest-index GPU of the node with K free shards. GPU g is reachable only if some
	// K fits in g's free slots and exceeds the free slots of every lower GPU; the
	// decision then takes the K closest to the wanted slots (see steerSlots).
	ReachFirstFit
)

func (r Reach) String() string {
	if r == ReachFirstFit {
		return "first-fit"
	}
	return "typed"
}
