// SPDX-License-Identifier: Apache-2.0

package model

import "github.com/coscheml/coscheml/pkg/profile"

// Feature indices. The order is part of the model file format (a file lists the
// names and Load refuses a file whose list differs). Sums come before maxima on
// purpose: with one co-runner (all Lucid pairs) a sum equals its max, golearn keeps
// the first of equally good splits, and a sum is the aggregate that keeps growing,
// and so keeps predicting more interference, when a GPU has more than one co-runner.
const (
	fJobSM         = iota // job's mean SM (kernel) utilization, %
	fJobMemBW             // job's mean memory-bandwidth utilization, %
	fJobMemGiB            // job's device memory used, GiB
	fCoCount              // number of co-runners
	fCoSMSum              // sum over co-runners of mean SM utilization, %
	fCoMemBWSum           // sum over co-runners of mean memory-bandwidth utilization, %
	fCoMemGiBSum          // sum over co-runners of memory used, GiB
	fCoSMMax              // max over co-runners of mean SM utilization, %
	fCoMemBWMax           // max over co-runners of mean memory-bandwidth utilization, %
	fCoMemGiBMax          // max over co-runners of memory used, GiB
	fTotalSM              // job + co-runners: SM utilization demanded of the GPU, %
	fTotalMemBW           // job + co-runners: memory bandwidth demanded, %
	fTotalMemGiB          // job + co-runners: memory used, GiB
	fJobSMShare           // job SM / total SM (0..1): the job's share of kernel time demand
	fJobMemBWShare        // job memory BW / total memory BW (0..1)
	fSMOverlap            // % of time the job runs kernels while a co-runner does too (if independent)
	fMemBWOverlap         // the same for memory traffic
	numFeatures
)

// featureName is the name of feature i as stored in a model file and printed by
// Explain ("" when out of range). A switch, not a table: no package-level state.
func featureName(i int) string {
	switch i {
	case fJobSM:
		return "job_sm_util_mean"
	case fJobMemBW:
		return "job_membw_util_mean"
	case fJobMemGiB:
		return "job_mem_used_gib"
	case fCoCount:
		return "co_count"
	case fCoSMSum:
		return "co_sm_util_sum"
	case fCoMemBWSum:
		return "co_membw_util_sum"
	case fCoMemGiBSum:
		return "co_mem_used_gib_sum"
	case fCoSMMax:
		return "co_sm_util_max"
	case fCoMemBWMax:
		return "co_membw_util_max"
	case fCoMemGiBMax:
		return "co_mem_used_gib_max"
	case fTotalSM:
		return "total_sm_util"
	case fTotalMemBW:
		return "total_membw_util"
	case fTotalMemGiB:
		return "total_mem_used_gib"
	case fJobSMShare:
		return "job_sm_share"
	case fJobMemBWShare:
		return "job_membw_share"
	case fSMOverlap:
		return "sm_overlap"
	case fMemBWOverlap:
		return "membw_overlap"
	}
	return ""
}

// featureIndex is the index of the named feature, -1 if unknown.
func featureIndex(name string) int {
	for i := range numFeatures {
		if featureName(i) == name {
			return i
		}
	}
	return -1
}

// FeatureNames returns the names of the model's input features in order.
func FeatureNames() []string {
	out := make([]string, numFeatures)
	for i := range out {
		out[i] = featureName(i)
	}
	return out
}

// featureVec is one feature vector; an array so it lives on the stack.
type featureVec [numFeatures]float64

// computeFeatures fills x from the job's profile and its co-runners' profiles. It
// uses only means and memory used (all the Lucid data has) and never allocates.
// A nil job counts as an idle profile; nil co-runners are ignored.
func computeFeatures(job *profile.Profile, co []*profile.Profile, x *featureVec) {
	*x = featureVec{}
	if job != nil {
		x[fJobSM] = job.SMUtil.Mean
		x[fJobMemBW] = job.MemBWUtil.Mean
		x[fJobMemGiB] = job.MemUsedMiB / 1024
	}
	smIdle, bwIdle := 1.0, 1.0 // probability that no co-runner is busy
	for _, c := range co {
		if c == nil {
			continue
		}
		smIdle *= 1 - clamp01(c.SMUtil.Mean/100)
		bwIdle *= 1 - clamp01(c.MemBWUtil.Mean/100)
		x[fCoCount]++
		sm, bw, mem := c.SMUtil.Mean, c.MemBWUtil.Mean, c.MemUsedMiB/1024
		x[fCoSMSum] += sm
		x[fCoMemBWSum] += bw
		x[fCoMemGiBSum] += mem
		x[fCoSMMax] = max(x[fCoSMMax], sm)
		x[fCoMemBWMax] = max(x[fCoMemBWMax], bw)
		x[fCoMemGiBMax] = max(x[fCoMemGiBMax], mem)
	}
	x[fTotalSM] = x[fJobSM] + x[fCoSMSum]
	x[fTotalMemBW] = x[fJobMemBW] + x[fCoMemBWSum]
	x[fTotalMemGiB] = x[fJobMemGiB] + x[fCoMemGiBSum]
	x[fJobSMShare] = share(x[fJobSM], x[fTotalSM])
	x[fJobMemBWShare] = share(x[fJobMemBW], x[fTotalMemBW])
	x[fSMOverlap] = x[fJobSM] * (1 - smIdle)
	x[fMemBWOverlap] = x[fJobMemBW] * (1 - bwIdle)
}

func clamp01(v float64) float64 { return min(max(v, 0), 1) }

// share is part/total, 0 when nothing is demanded (an idle GPU has no contention).
func share(part, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return part / total
}

// NumFeatures is the length of a feature vector (FeatureNames).
const NumFeatures = numFeatures

// FeatureVec is one feature vector, indexed like FeatureNames.
type FeatureVec = featureVec

// TotalSMFeature indexes total_sm_util, the util-sum heuristic's score.
const TotalSMFeature = fTotalSM

// ComputeFeatures fills x for job next to co, exactly as prediction does; a
// trainer (package training) uses it to build its samples. It never allocates.
func ComputeFeatures(job *profile.Profile, co []*profile.Profile, x *FeatureVec) {
	computeFeatures(job, co, x)
}
