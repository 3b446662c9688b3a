// SPDX-License-Identifier: Apache-2.0

package sharestatus

import (
	"sort"
	"strconv"

	"github.com/coscheml/coscheml/pkg/metrics"
)

// Metrics returns the snapshot as gauges (docs/monitoring.md): per node the GPUs in
// use and shared, the jobs sharing and the reservations; per GPU its job count;
// per job on a shared GPU its predicted and last measured speed.
func (s *Snapshot) Metrics() []metrics.Family {
	type nodeStat struct{ inUse, shared, sharing, reservations, belowFloor float64 }
	nodes := map[string]*nodeStat{}
	node := func(n string) *nodeStat {
		if nodes[n] == nil {
			nodes[n] = &nodeStat{}
		}
		return nodes[n]
	}
	gpuJobs := metrics.Family{Name: "coscheml_gpu_jobs", Type: metrics.Gauge, Help: "Jobs holding the GPU now (residency store)."}
	pred := metrics.Family{Name: "coscheml_job_speed_predicted_ratio", Type: metrics.Gauge,
		Help: "Predicted speed (1.0 = as fast as alone) of a job on a shared GPU next to the GPU's other jobs now."}
	meas := metrics.Family{Name: "coscheml_job_speed_measured_ratio", Type: metrics.Gauge,
		Help: "Newest measured speed of the job's tag next to the same co-runner tags (an earlier run)."}
	// The configured nodes and their GPUs are exported at 0 while idle, so a
	// dashboard shows 0 rather than "No data" on a healthy idle cluster.
	used := map[string]bool{}
	for _, g := range s.GPUs {
		used[g.Node+"/"+strconv.Itoa(g.Index)] = true
	}
	for _, n := range s.nodes {
		node(n)
		for i := 0; i < s.gpusPerNode; i++ {
			if !used[n+"/"+strconv.Itoa(i)] {
				gpuJobs.Samples = append(gpuJobs.Samples, metrics.Sample{Labels: []metrics.Label{{Name: "node", Value: n}, {Name: "gpu", Value: strconv.Itoa(i)}}})
			}
		}
	}
	for _, g := range s.GPUs {
		ns := node(g.Node)
		ns.inUse++
		gl := []metrics.Label{{Name: "node", Value: g.Node}, {Name: "gpu", Value: strconv.Itoa(g.Index)}}
		gpuJobs.Samples = append(gpuJobs.Samples, metrics.Sample{Labels: gl, Value: float64(len(g.Jobs))})
		if !g.Shared {
			continue
		}
		ns.shared++
		ns.sharing += float64(len(g.Jobs))
		for _, j := range g.Jobs {
			jl := append(append([]metrics.Label(nil), gl...),
				metrics.Label{Name: "job_id", Value: j.JobID}, metrics.Label{Name: "tag", Value: j.Tag}, metrics.Label{Name: "class", Value: j.Class})
			if j.PredictedSpeed != nil {
				pred.Samples = append(pred.Samples, metrics.Sample{Labels: jl, Value: *j.PredictedSpeed})
			}
			if j.MeasuredSpeed != nil {
				meas.Samples = append(meas.Samples, metrics.Sample{Labels: jl, Value: *j.MeasuredSpeed})
			}
			if j.BelowFloor {
				ns.belowFloor++
			}
		}
	}
	for _, r := range s.Reservations {
		node(r.Node).reservations++
	}
	sort.SliceStable(gpuJobs.Samples, func(a, b int) bool {
		la, lb := gpuJobs.Samples[a].Labels, gpuJobs.Samples[b].Labels
		if la[0].Value != lb[0].Value {
			return la[0].Value < lb[0].Value
		}
		ia, _ := strconv.Atoi(la[1].Value)
		ib, _ := strconv.Atoi(lb[1].Value)
		return ia < ib
	})
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	perNode := func(name, help string, v func(*nodeStat) float64) metrics.Family {
		f := metrics.Family{Name: name, Type: metrics.Gauge, Help: help}
		for _, n := range names {
			f.Samples = append(f.Samples, metrics.Sample{Labels: []metrics.Label{{Name: "node", Value: n}}, Value: v(nodes[n])})
		}
		return f
	}
	return []metrics.Family{
		perNode("coscheml_gpus_in_use", "GPUs with at least one job in the residency store.", func(n *nodeStat) float64 { return n.inUse }),
		perNode("coscheml_gpus_shared", "GPUs with two or more jobs.", func(n *nodeStat) float64 { return n.shared }),
		perNode("coscheml_jobs_sharing", "Jobs on shared GPUs.", func(n *nodeStat) float64 { return n.sharing }),
		perNode("coscheml_jobs_predicted_below_floor", "Jobs on shared GPUs whose predicted speed now is under their class's floor.", func(n *nodeStat) float64 { return n.belowFloor }),
		perNode("coscheml_reservations", "Decisions of the plugin whose jobs have not started yet.", func(n *nodeStat) float64 { return n.reservations }),
		gpuJobs, pred, meas,
		{Name: "coscheml_residency_stale_entries", Type: metrics.Gauge, Help: "Residency entries past their expiry (coscheml-node reconcile removes them).",
			Samples: []metrics.Sample{{Value: float64(s.StaleEntries)}}},
		{Name: "coscheml_status_time_seconds", Type: metrics.Gauge, Help: "When this view was taken (Unix time).",
			Samples: []metrics.Sample{{Value: float64(s.Time.Unix())}}},
	}
}
