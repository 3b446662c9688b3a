// SPDX-License-Identifier: Apache-2.0

package placement

import "fmt"

// Untyped shard counts: a request that cannot name its GPU's type (a job update
// on Slurm before 23.11, which does not honour typed shard requests there) asks its node
// for K untyped shards, and Slurm's allocator puts them where they fit when the
// job starts. slurmctld's plugin and the simulator both choose K here.

// UntypedSlots is the untyped shard count, at least want, for a single-GPU
// request pinned to node that is to land on its GPU g. Unique: only g can hold
// it now (more than every other GPU's free shards, within g's own), so any
// allocator lands it on g; else the count Slurm's first fit lands on g (more
// than every lower GPU's free shards). Other GPUs' free shards count only
// started jobs (queued decisions hold nothing in Slurm's eyes until their jobs
// start, and Slurm may start this job first); g's own count every resident. ok
// is false when no count lands on g now.
func UntypedSlots(node *Node, g, want int) (k int, unique, ok bool) {
	if k, ok := uniqueFit(node, g, want); ok {
		return k, true, true
	}
	k, ok = firstFitSlots(node, g, want)
	return k, false, ok
}

// uniqueFit is the count, at least want, that only GPU g of node can hold now.
func uniqueFit(node *Node, g, want int) (int, bool) {
	k := want
	for j := range node.GPUs {
		if j != g {
			k = max(k, node.GPUs[j].Slots-runningSlots(&node.GPUs[j])+1)
		}
	}
	return k, k <= node.GPUs[g].Slots-usedSlots(&node.GPUs[g])
}

// firstFitSlots is the count, at least want, that first fit lands on GPU g.
func firstFitSlots(node *Node, g, want int) (int, bool) {
	k := want
	for j := 0; j < g; j++ {
		k = max(k, node.GPUs[j].Slots-runningSlots(&node.GPUs[j])+1)
	}
	return k, k <= node.GPUs[g].Slots-usedSlots(&node.GPUs[g])
}

// FirstFitGPU is Slurm 22.05's shard allocator: the lowest GPU of node whose
// started jobs leave at least k shards free (-1: none now). Queued decisions
// (Reserved) hold nothing until their jobs start.
func FirstFitGPU(node *Node, k int) int {
	for g := range node.GPUs {
		if node.GPUs[g].Slots-runningSlots(&node.GPUs[g]) >= k {
			return g
		}
	}
	return -1
}

// runningSlots is the shards a GPU's started jobs hold.
func runningSlots(g *GPU) int {
	used := 0
	for _, r := range g.Residents {
		if r.Kind != Reserved {
			used += r.Slots
		}
	}
	return used
}

// usedSlots is the shards a GPU's residents hold, queued decisions included.
func usedSlots(g *GPU) int {
	used := 0
	for _, r := range g.Residents {
		used += r.Slots
	}
	return used
}

// PlaceUntypedUpdate is the re-decision of a single-GPU job whose update cannot
// name a GPU's Type (Slurm before 23.11 refuses a typed shard request in an
// update of a pending job): p chooses among the GPUs an untyped count reaches,
// and the placement's slot count becomes one that lands on the chosen GPU
// (UntypedSlots). It waits when no count lands there now: a whole GPU instead
// would hold shards nothing can join. Unique says only that GPU can hold the
// count. slurmctld's plugin and the simulator's re-decide loop both decide such
// updates here, so they cannot drift apart.
func PlaceUntypedUpdate(p Policy, c *Cluster, req *Request) (d Decision, unique bool) {
	d = p.Place(c.WithReach(ReachFirstFit), req)
	if d.Action == ActionWait || len(d.Placement) == 0 {
		return d, false
	}
	s := &d.Placement[0]
	k, unique, ok := UntypedSlots(&c.Nodes[s.Node], s.GPU, s.Slots)
	if !ok {
		d.Action = ActionWait
		d.Reason += "; an update cannot name the GPU's type and no untyped shard count lands on it now"
		return d, false
	}
	if !unique {
		d.Reason += fmt.Sprintf("; %d untyped shards, which Slurm's first fit lands on this GPU (an update cannot name its type)", k)
	}
	s.Slots = k
	return d, unique
}
