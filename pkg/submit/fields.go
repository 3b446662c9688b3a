// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/profile"
)

// This file reads the job's fields that constrain a decision, the way Slurm would
// honour them (job_submit_lua's reference set): where the GPUs are asked for
// (--gres/--gpus-per-node, --gpus, --gpus-per-task, --gpus-per-socket), their
// Type, per-GPU memory and CPUs, --exclusive, job arrays, and the nodes the job
// may use (partition, -w, -x, nodes that cannot start jobs). A field coscheml cannot
// keep meaningful after a shard rewrite makes the job pass through unchanged.
// docs/slurm-integration.md has the table of options and behaviours.

// AnswerField is a bit set of answer fields that the shim replaces even when the
// answer's string is empty (Result.Replace; COSCHEML_ANS_* in coscheml_abi.h).
type AnswerField uint32

const (
	ReplaceTresPerJob  AnswerField = 1 << iota // tres_per_job := Result.TresPerJob (NULL when "")
	ReplaceTresPerTask                         // tres_per_task := Result.TresPerTask (NULL when "")
	ClearReqNodes                              // req_nodes := "" (job_modify: the job's node pin is dropped)
)

// gpuAsk is a job's GPU request, wherever the job put it.
type gpuAsk struct {
	gres GresRequest // as a tres_per_node rewrite writes it
	// from is the field the GPU entry came from when it was not tres_per_node
	// (ReplaceTresPerJob or ReplaceTresPerTask; 0 for tres_per_node), and rest is that
	// field without the entry: a rewrite moves the GPU to tres_per_node, so the
	// job never asks for it twice.
	from AnswerField
	rest string
	err  error  // tres_per_node not understood
	pass string // why the request is left to Slurm ("" when coscheml may rewrite it)
	// typedOnly: pass is only that the request names a GPU Type, which
	// cluster.groups may resolve to a model (modelConstraint).
	typedOnly bool
	// ownPin: an update carrying the plugin's own typed pin (a requeued job).
	ownPin bool
}

// readGPUs finds the job's GPU request. A single GPU is recognised in every form
// (--gres=gpu:1, --gpus-per-node=1, --gpus=1, --gpus-per-task=1 with one task);
// several GPUs through --gpus or --gpus-per-task, any --gpus-per-socket, a request
// in two forms at once, and a typed request are left to Slurm.
func readGPUs(j *JobFields) gpuAsk {
	node, err := ParseTres(j.TresPerNode)
	if err != nil {
		return gpuAsk{err: err}
	}
	a := gpuAsk{gres: node}
	var forms []string
	if node.HasGPU() {
		forms = append(forms, "--gres/--gpus-per-node")
	}
	for _, f := range []struct {
		opt, val string
		bit      AnswerField
	}{
		{"--gpus", j.TresPerJob, ReplaceTresPerJob},
		{"--gpus-per-task", j.TresPerTask, ReplaceTresPerTask},
		{"--gpus-per-socket", j.TresPerSocket, 0},
	} {
		if f.val == "" {
			continue
		}
		g, err := ParseTres(f.val)
		if err != nil {
			a.pass = fmt.Sprintf("%s request not understood (%v): left to Slurm", f.opt, err)
			continue
		}
		if !g.HasGPU() {
			continue
		}
		forms = append(forms, f.opt)
		switch {
		case f.bit == 0:
			a.pass = f.opt + ": GPUs per socket are left to Slurm"
		case g.Shards > 0:
			a.pass = "shards asked for through " + f.opt + ": left to Slurm"
		case g.GPUs != 1:
			a.pass = fmt.Sprintf("%s=%d: several GPUs through %s are left to Slurm", f.opt, g.GPUs, f.opt)
		case f.bit == ReplaceTresPerTask && j.NumTasks != 1:
			a.pass = f.opt + " with a task count other than one: several GPUs, left to Slurm"
		case j.Modify:
			a.pass = f.opt + " in an update: left to Slurm"
		default:
			a.gres, a.from, a.rest = node.adopt(g), f.bit, g.without()
		}
	}
	switch {
	case len(forms) > 1:
		a.pass = "GPUs asked for in more than one way (" + strings.Join(forms, ", ") + "): left to Slurm"
	case a.pass == "" && a.gres.Type != "":
		a.typedOnly = true
		a.pass = fmt.Sprintf("typed GPU request (type %s): shards carry no GPU type, so the job keeps its request and is left to Slurm", profile.Sanitize(a.gres.Type))
	}
	return a
}

// apply writes the moved field into a rewrite: the job's --gpus or
// --gpus-per-task without its GPU entry, now on tres_per_node.
func (a *gpuAsk) apply(res *Result) {
	switch a.from {
	case ReplaceTresPerJob:
		res.TresPerJob, res.Replace = a.rest, res.Replace|ReplaceTresPerJob
	case ReplaceTresPerTask:
		res.TresPerTask, res.Replace = a.rest, res.Replace|ReplaceTresPerTask
	}
}

// adopt is tres_per_node g with the GPU entry of o (from another field) added.
func (g GresRequest) adopt(o GresRequest) GresRequest {
	n := g
	entry := o.tres[o.gresAt:o.gresEnd]
	if g.tres == "" {
		n.tres, n.gresAt = entry, 0
	} else {
		n.tres, n.gresAt = g.tres+","+entry, len(g.tres)+1
	}
	n.gresEnd, n.prefix = len(n.tres), o.prefix
	n.GPUs, n.Shards, n.Type = o.GPUs, o.Shards, o.Type
	return n
}

// without is the request's entries other than its gpu/shard entry.
func (g GresRequest) without() string {
	if g.gresAt < 0 {
		return g.tres
	}
	before, after := g.tres[:g.gresAt], g.tres[g.gresEnd:]
	switch {
	case after != "": // ",rest": drop the comma that followed the entry
		return before + after[1:]
	case before != "": // "rest,": drop the comma that preceded it
		return before[:len(before)-1]
	}
	return ""
}

// fieldsPass says why the job's other options leave it to Slurm ("" when none).
func fieldsPass(j *JobFields) string {
	switch {
	case j.Exclusive:
		return "--exclusive: the job wants nodes of its own; left to Slurm"
	case namesGPU(j.MemPerTres):
		return "--mem-per-gpu: per-GPU memory means nothing once the request is shards; left to Slurm"
	case namesGPU(j.CpusPerTres):
		return "--cpus-per-gpu: per-GPU CPUs mean nothing once the request is shards; left to Slurm"
	}
	return ""
}

// namesGPU reports whether a per-TRES list (mem_per_tres, cpus_per_tres) has a
// gpu entry: "gres/gpu:4096", "gres:gpu:a100:8".
func namesGPU(list string) bool {
	for more := true; more; {
		var e string
		e, list, more = strings.Cut(list, ",")
		e = strings.TrimSpace(e)
		for _, p := range []string{"gres/", "gres:"} {
			if rest, ok := strings.CutPrefix(e, p); ok && (rest == "gpu" || strings.HasPrefix(rest, "gpu:") || strings.HasPrefix(rest, "gpu=")) {
				return true
			}
		}
	}
	return false
}

// nodeMask is the nodes (indexes of the snapshot's nodes) a pinned decision may
// use: the job's partitions, its -w (all of its nodes), minus its -x and the nodes that
// cannot start jobs now. nil with pass "" means every node; a non-empty pass
// means the job's node options cannot be honoured by a pin, so it is left to Slurm.
func nodeMask(q *query, nodes int) (mask []bool, pass string) {
	st, j := q.snap, &q.j
	names := st.nodes
	keep := func(ok func(i int, name string) bool) {
		if mask == nil {
			mask = make([]bool, len(names))
			for i := range mask {
				mask[i] = true
			}
		}
		for i, n := range names {
			if mask[i] && !ok(i, n) {
				mask[i] = false
			}
		}
	}
	// An update without a partition, of a job the engine knows nothing of (a
	// restart), names no partition: not checked rather than the default one.
	if st.parts != nil && !(j.Modify && q.ctx == nil && !j.has(FieldPartition)) {
		in, why := st.parts.nodesOf(q.partition())
		if why != "" {
			return nil, why
		}
		if in != nil {
			keep(func(_ int, n string) bool { return in[n] })
		}
	}
	if req := q.reqNodes(); req != "" { // the user's -w (never the plugin's own pin)
		hosts, err := hostlist.Expand(req)
		switch {
		case err != nil:
			return nil, fmt.Sprintf("-w %s not understood (%v): left to Slurm", profile.Sanitize(req), err)
		case len(hosts) != nodes:
			// Slurm gives the job every node -w names: a placement must be all of them.
			return nil, fmt.Sprintf("-w names %d nodes for a job of %d: the job's own node list is left to Slurm", len(hosts), nodes)
		}
		for _, h := range hosts {
			if _, ok := st.nodeIdx[h]; !ok {
				return nil, "-w " + profile.Sanitize(h) + " is not a node coscheml manages: left to Slurm"
			}
		}
		keep(func(_ int, name string) bool { return slices.Contains(hosts, name) })
	}
	if exc := q.excNodes(); exc != "" {
		hosts, err := hostlist.Expand(exc)
		if err != nil {
			return nil, fmt.Sprintf("-x %s not understood (%v): left to Slurm", profile.Sanitize(exc), err)
		}
		out := make(map[string]bool, len(hosts))
		for _, h := range hosts {
			out[h] = true
		}
		keep(func(_ int, n string) bool { return !out[n] })
	}
	if down := q.down; len(down) > 0 {
		keep(func(_ int, n string) bool { return !down[n] })
	}
	return mask, ""
}
