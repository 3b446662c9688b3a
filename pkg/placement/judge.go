// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"github.com/coscheml/coscheml/pkg/profile"
)

// JobBound is one job's prediction as Co-scheML tests it against its floor.
type JobBound struct {
	Class profile.Class // the effective class (the job's, else its profile's)
	Speed float64       // point prediction next to the other jobs
	// Lower is what must clear Floor: the predictor's calibrated lower bound at
	// the policy's coverage for that floor (the prediction itself for a
	// predictor without a bound).
	Lower float64
	Floor float64
}

// ShareVerdict is Co-scheML's answer to whether a set of jobs may share one GPU.
type ShareVerdict struct {
	Share  bool       // Place shares the GPU
	Reason string     // Place's reason (a wait's names the refused GPU)
	Jobs   []JobBound // one per job, in the order given
}

// JudgeShare asks Place itself whether jobs[0] may join jobs[1:] on one GPU of
// memMiB MiB and slots slots (each resident holding the share slots), the
// cluster's only GPU: the same filter (co-runner limit, slots, memory fit) and
// floor test (each affected job's lower bound at its class floor) a real
// decision applies, so a tool asking about a pair cannot disagree with the
// placement. Jobs' JobID, Profile and Class are read; each must have a profile.
func (p *CoScheML) JudgeShare(jobs []Resident, memMiB float64, slots int) ShareVerdict {
	var v ShareVerdict
	if len(jobs) == 0 {
		return v
	}
	c := NewCluster(1, 1, memMiB, slots)
	c.Reach = ReachTyped
	gpu := &c.Nodes[0].GPUs[0]
	share := min(int(p.opts.shareSlots(int32(gpu.Slots))), gpu.Slots)
	for _, j := range jobs[1:] {
		j.Slots, j.Kind = share, Running
		gpu.Residents = append(gpu.Residents, j)
	}
	c.Reindex()
	r := &Request{JobID: jobs[0].JobID, Tag: tagOfProfile(jobs[0].Profile), Profile: jobs[0].Profile, Class: jobs[0].Class, GPUs: 1}
	d := p.Place(c, r)
	v.Share, v.Reason = d.Action == ActionShare, d.Reason

	co := make([]*profile.Profile, 0, len(jobs))
	for i, j := range jobs {
		co = co[:0]
		for k, o := range jobs {
			if k != i {
				co = append(co, o.Profile)
			}
		}
		b := JobBound{Class: classOf(j.Class, j.Profile)}
		b.Floor = p.opts.Floors.For(b.Class)
		if j.Profile != nil {
			b.Speed, b.Lower = p.predict(j.Profile, co, b.Class, b.Floor)
		}
		v.Jobs = append(v.Jobs, b)
	}
	return v
}

func tagOfProfile(p *profile.Profile) string {
	if p == nil {
		return ""
	}
	return p.Tag
}
