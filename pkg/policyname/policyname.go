// SPDX-License-Identifier: Apache-2.0

// Package policyname is the registry of placement policy names: the one list the
// configuration validates against, the CLI offers and pkg/placement builds from. It
// holds names only, so the configuration can check a name without linking the
// policies (and pkg/placement never imports the configuration).
package policyname

// The policies, Co-scheML first.
const (
	CoScheML    = "coscheml"
	Exclusive   = "exclusive"
	Blind       = "blind"
	LeastLoaded = "least-loaded"
	UtilSum     = "utilsum"
	Random      = "random"
	Oracle      = "oracle"
	// The published peers (docs/peers.md), re-implemented for the simulator.
	Lucid   = "lucid"
	Gandiva = "gandiva"
	FGD     = "fgd"
)

// policy is one registry entry.
type policy struct {
	name string
	// simOnly: the policy needs measured truth, which exists only in the
	// simulator, or what only the simulator gives (the run's future
	// submissions, moving running jobs: the peers).
	simOnly bool
	// peer: a published system's policy, which runs its own queue (no Slurm
	// plugin, no guard).
	peer bool
}

var registry = []policy{
	{name: CoScheML}, {name: Exclusive}, {name: Blind}, {name: LeastLoaded},
	{name: UtilSum}, {name: Random}, {name: Oracle, simOnly: true},
	{name: Lucid, simOnly: true, peer: true}, {name: Gandiva, simOnly: true, peer: true}, {name: FGD, simOnly: true, peer: true},
}

// Peer reports whether name is a published peer's policy.
func Peer(name string) bool {
	for _, p := range registry {
		if p.name == name {
			return p.peer
		}
	}
	return false
}

// All lists every policy, Co-scheML first (the simulator's set).
func All() []string {
	out := make([]string, len(registry))
	for i, p := range registry {
		out[i] = p.name
	}
	return out
}

// Configurable lists the policies a configuration (and so slurmctld) may use: all
// but those needing measured truth.
func Configurable() []string {
	var out []string
	for _, p := range registry {
		if !p.simOnly {
			out = append(out, p.name)
		}
	}
	return out
}

// Known reports whether name is a policy of All.
func Known(name string) bool {
	for _, p := range registry {
		if p.name == name {
			return true
		}
	}
	return false
}
