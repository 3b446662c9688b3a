// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// groupFinding is one result of checkGroups: fail, or ok.
type groupFinding struct {
	fail bool
	msg  string
}

// maxGroupFindings bounds the failures reported per group (a group of 1,000
// nodes missing from slurm.conf is one mistake, not 1,000).
const maxGroupFindings = 3

// checkGroups checks the configured inventory against slurm.conf (and the
// gres.conf beside it): every node of a group is a NodeName of slurm.conf with
// the group's GPU count, its feature (Features=) and, with gres_type, GPUs of
// that Type. The plugin would otherwise pin jobs to nodes that cannot run them.
func checkGroups(sc *slurmconf.Conf, spec config.ClusterSpec) []groupFinding {
	hosts, err := spec.Hosts()
	if err != nil {
		return []groupFinding{{true, err.Error()}}
	}
	if len(hosts) == 0 {
		return nil
	}
	byName := map[string]*slurmconf.Node{}
	for i := range sc.Nodes {
		names, err := hostlist.Expand(sc.Nodes[i].Names)
		if err != nil {
			continue
		}
		for _, n := range names {
			byName[n] = &sc.Nodes[i]
		}
	}
	groups := spec.NodeGroups()
	fails := make([]int, len(groups))
	var out []groupFinding
	bad := func(gi int, format string, a ...any) {
		if fails[gi]++; fails[gi] <= maxGroupFindings {
			out = append(out, groupFinding{true, fmt.Sprintf("%s: ", groupName(spec, gi)) + fmt.Sprintf(format, a...)})
		}
	}
	count := make([]int, len(groups))
	for _, h := range hosts {
		g := groups[h.Group]
		count[h.Group]++
		n := byName[h.Name]
		if n == nil {
			bad(h.Group, "node %s is not a NodeName of slurm.conf", sanitize(h.Name))
			continue
		}
		gpus, typed := int64(0), false
		for _, gr := range n.Gres {
			if !strings.EqualFold(gr.Name, "gpu") {
				continue
			}
			gpus += gr.Count
			typed = typed || (g.GresType != "" && strings.EqualFold(gr.Type, g.GresType))
		}
		if gpus != int64(g.GPUsPerNode) {
			bad(h.Group, "node %s has %d GPUs in slurm.conf (line %d), the group says %d", sanitize(h.Name), gpus, n.Line, g.GPUsPerNode)
		}
		if g.Feature != "" && !slices.Contains(n.Features, g.Feature) {
			bad(h.Group, "node %s lacks the feature %s (slurm.conf line %d: Features=%s): jobs asking --constraint=%s could never run there", sanitize(h.Name),
				sanitize(g.Feature), n.Line, sanitize(strings.Join(n.Features, ",")), sanitize(g.Feature))
		}
		if g.GresType != "" && !typed {
			bad(h.Group, "node %s has no GPU of Type %s (slurm.conf line %d): --gres=gpu:%s jobs could never run there", sanitize(h.Name), sanitize(g.GresType), n.Line, sanitize(g.GresType))
		}
	}
	for gi, g := range groups {
		if fails[gi] > maxGroupFindings {
			out = append(out, groupFinding{true, fmt.Sprintf("%s: %d more problems", groupName(spec, gi), fails[gi]-maxGroupFindings)})
		}
		if fails[gi] == 0 {
			what := fmt.Sprintf("%s: %d nodes of %d GPUs match slurm.conf", groupName(spec, gi), count[gi], g.GPUsPerNode)
			if g.Feature != "" {
				what += ", feature " + sanitize(g.Feature)
			}
			if g.GresType != "" {
				what += ", Type " + sanitize(g.GresType)
			}
			out = append(out, groupFinding{false, what})
		}
	}
	return out
}

// groupName names group gi for preflight: "cluster.groups[1] (Tesla T4)".
func groupName(spec config.ClusterSpec, gi int) string {
	if len(spec.Groups) == 0 {
		return "cluster"
	}
	name := fmt.Sprintf("cluster.groups[%d]", gi)
	if m := spec.Groups[gi].GPUModel; m != "" {
		name += " (" + sanitize(m) + ")"
	}
	return name
}
