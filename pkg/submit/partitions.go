// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"strings"

	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// Partitions are slurm.conf's partitions as far as a pin needs them: the nodes
// of each, and the default one. A pin never leaves the job's partitions.
type Partitions struct {
	nodes map[string]map[string]bool // by partition name; a nil set is Nodes=ALL
	bad   map[string]string          // partitions whose nodes cannot be told: why
	def   string                     // Default=YES ("" when none)
}

// PartitionsOf reads the partitions of a parsed slurm.conf. A partition whose node
// list names a NodeSet defined by features (or not parsable) cannot be told: a job
// in it passes through unchanged.
func PartitionsOf(c *slurmconf.Conf) *Partitions {
	p := &Partitions{nodes: map[string]map[string]bool{}, bad: map[string]string{}}
	for _, part := range c.Partitions {
		if part.Default && p.def == "" {
			p.def = part.Name
		}
		set, err := expandPartNodes(part.Nodes, c.NodeSets)
		if err != nil {
			p.bad[part.Name] = err.Error()
			continue
		}
		p.nodes[part.Name] = set
	}
	return p
}

// expandPartNodes expands a partition's Nodes= value (nil for ALL).
func expandPartNodes(list string, sets map[string]string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, tok := range hostlist.Split(list) {
		tok = strings.TrimSpace(tok)
		switch {
		case tok == "":
			continue
		case strings.EqualFold(tok, "ALL"):
			return nil, nil
		}
		expr := tok
		if nodes, ok := sets[tok]; ok {
			if nodes == "" {
				return nil, fmt.Errorf("NodeSet %s is defined by features, which coscheml cannot read", profile.Sanitize(tok))
			}
			if strings.EqualFold(strings.TrimSpace(nodes), "ALL") {
				return nil, nil
			}
			expr = nodes
		}
		hosts, err := hostlist.Expand(expr)
		if err != nil {
			return nil, err
		}
		for _, h := range hosts {
			out[h] = true
		}
	}
	return out, nil
}

// nodesOf is the union of the nodes of the job's partitions (a comma list; ""
// is the default partition); nil set with why "" means every node. A partition
// slurm.conf does not describe makes why non-empty: the job is left to Slurm.
func (p *Partitions) nodesOf(list string) (set map[string]bool, why string) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		if p.def == "" {
			return nil, "" // no default partition: Slurm refuses the job itself
		}
		names = []string{p.def}
	}
	set = map[string]bool{}
	for _, n := range names {
		if why, bad := p.bad[n]; bad {
			return nil, "partition " + profile.Sanitize(n) + ": " + why + "; left to Slurm"
		}
		nodes, ok := p.nodes[n]
		switch {
		case !ok:
			return nil, "partition " + profile.Sanitize(n) + " is not in slurm.conf: left to Slurm"
		case nodes == nil:
			return nil, "" // Nodes=ALL
		}
		for h := range nodes {
			set[h] = true
		}
	}
	return set, ""
}

// WithPartitions makes the engine read the partitions from slurmctld's slurm.conf
// at every (re)load, so that pins stay inside the job's partitions. With no path
// the partitions are unknown and not checked (fail open).
func WithPartitions(src Sources, slurmConfPath string) Sources {
	if slurmConfPath == "" {
		return src
	}
	src.LoadPartitions = func() (*Partitions, error) {
		c, err := slurmconf.Load(slurmConfPath)
		if err != nil {
			return nil, fmt.Errorf("partitions from %s: %w", slurmConfPath, err)
		}
		return PartitionsOf(c), nil
	}
	return src
}
