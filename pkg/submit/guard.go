package submit

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/profile"
)

// The raw_requests rules: requests that would put a job on a GPU the placement
// did not choose. job_modify hands the plugin only the fields an update changes
// (the job record is private to slurmctld), so an update that moves a pending
// job without naming its GPU request cannot be placed again: it is refused, and
// the message says which fields to repeat.

// bypassRule is a raw_requests rule that refused a request, for the metrics
// (fixed words, never user text).
const (
	ruleRawShard   = "raw_shard"
	ruleNodeUpdate = "node_update"
	rulePartUpdate = "partition_update"
)

// isAdmin says whether the submitter is exempt from raw_requests: root and
// SlurmUser (the shim's flag) or a user of admin_users.
func (q *query) isAdmin() bool {
	return q.admin || q.j.Admin || (q.snap != nil && q.snap.admins[q.j.SubmitUID])
}

// appendGPURequests appends the job's GPU request fields it carries to out:
// tres_per_node when present, and --gpus, --gpus-per-task, --gpus-per-socket
// (--tres-per-task=) when set. out is on the caller's stack: the guard runs
// for every job.
func appendGPURequests(out []string, j *JobFields) []string {
	if j.has(FieldTres) {
		out = append(out, j.TresPerNode)
	}
	for _, v := range [...]string{j.TresPerJob, j.TresPerTask, j.TresPerSocket} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// rawShards returns the first request in reqs that asks for shards ("" when
// none). An unreadable request counts when it names shards: Slurm may read it.
func rawShards(reqs []string) string {
	for _, r := range reqs {
		g, err := ParseTres(r)
		if err == nil && g.Shards > 0 || err != nil && strings.Contains(r, "shard") {
			return r
		}
	}
	return ""
}

// guardUpdate refuses an update of a pending job that would move it onto shared
// nodes without its GPU request (so it cannot be placed again). ok=false: no
// rule applies.
func guardUpdate(q *query) (out outcome, ok bool) {
	j, cfg := &q.j, q.snap.cfg
	if !j.Modify || cfg.RawRequests != config.RawRefuse || q.isAdmin() || len(appendGPURequests(make([]string, 0, 4), j)) > 0 {
		return outcome{}, false
	}
	what, rule := "", ""
	switch {
	case j.has(FieldReqNodes) && q.snap.onSharedNodes(j.ReqNodes):
		what, rule = "node list", ruleNodeUpdate
		if j.ReqNodes == "" {
			what = "node list (clearing it)"
		}
	case j.has(FieldPartition) && cfg.Cluster.Partition != "" && inPartition(cfg.Cluster.Partition, j.Partition):
		what, rule = "partition (into "+profile.Sanitize(cfg.Cluster.Partition)+", whose GPUs are shared)", rulePartUpdate
	default:
		return outcome{}, false
	}
	msg := fmt.Sprintf("this update changes the %s of a pending job but not its GPU request. "+
		"Slurm shows coscheml only the fields an update changes, so coscheml cannot place the job again, "+
		"and the job could land on a GPU next to another user's job. Repeat the job's GPU request in the same update, "+
		"e.g. scontrol update JobId=%s TresPerNode=%sgpu:1 ... (and Comment=<its comment> for a job tagged coscheml:app=), "+
		"or ask an administrator", what, jobLabel(j), tresPrefix(q.version))
	return deny(q, rule, msg), true
}

// guardRawShard refuses a shard request that leaves the plugin unchanged (an
// untagged job under untagged: pass, or a tagged one coscheml could not place)
// when it may run on the shared nodes. ok=false: no rule applies.
func guardRawShard(q *query) (out outcome, ok bool) {
	j, cfg := &q.j, q.snap.cfg
	if cfg.RawRequests != config.RawRefuse || q.isAdmin() {
		return outcome{}, false
	}
	var reqs [4]string
	raw := rawShards(appendGPURequests(reqs[:0], j))
	if raw == "" {
		return outcome{}, false
	}
	if cfg.Cluster.Partition != "" && !inPartition(cfg.Cluster.Partition, j.Partition) {
		return outcome{}, false // another partition: not coscheml's GPUs
	}
	if j.has(FieldReqNodes) && j.ReqNodes != "" && !q.snap.onSharedNodes(j.ReqNodes) {
		return outcome{}, false // pinned to nodes coscheml does not share
	}
	verb := "asks"
	if j.Modify {
		verb = "update asks"
	}
	msg := fmt.Sprintf("this job %s for GPU shards directly (%s). Raw shard requests are reserved for administrators "+
		"on the shared GPU nodes: they bypass coscheml's placement and could put the job on a GPU next to another user's job. "+
		"Ask for whole GPUs instead (--gres=gpu:1), and add --comment=coscheml:app=<tag> to share a GPU where coscheml "+
		"predicts it is safe (coscheml profile list shows the tags)", verb, profile.Sanitize(raw))
	return deny(q, ruleRawShard, msg), true
}

// deny is the outcome of a raw_requests rule: refused, logged, counted.
func deny(q *query, rule, msg string) outcome {
	r := decisionlog.Record{Time: q.now, Op: "submit", UserID: q.j.UserID, GPU: -1, TresIn: q.j.TresPerNode}
	if q.j.Modify {
		r.Op = "modify"
	}
	if q.j.JobID != 0 && q.j.JobID != NoVal {
		r.JobID = strconv.FormatUint(uint64(q.j.JobID), 10)
	}
	out := finish(Result{Code: Deny, UserMsg: "coscheml: " + msg}, r, "reject", "pass",
		"raw_requests=refuse ("+rule+"): "+msg)
	out.rejectWhy = rule
	return out
}

func jobLabel(j *JobFields) string {
	if j.JobID != 0 && j.JobID != NoVal {
		return strconv.FormatUint(uint64(j.JobID), 10)
	}
	return "<id>"
}

// onSharedNodes says whether a node list may put the job on a node coscheml
// shares: an empty list (anywhere), an unreadable one, or one naming a node of
// cluster.nodes (every node, when the inventory is not configured).
func (l *Snapshot) onSharedNodes(list string) bool {
	if list == "" || len(l.nodeIdx) == 0 {
		return true
	}
	hosts, err := hostlist.Expand(list)
	if err != nil {
		return true
	}
	for _, h := range hosts {
		if _, ok := l.nodeIdx[h]; ok {
			return true
		}
	}
	return false
}

// inPartition says whether a job's partition list (sbatch -p a,b; "" is the
// default partition, which may be the managed one) includes managed.
func inPartition(managed, parts string) bool {
	if parts == "" {
		return true
	}
	for _, p := range strings.Split(parts, ",") {
		if strings.TrimSpace(p) == managed {
			return true
		}
	}
	return false
}

// resolveAdmins turns admin_users into uids; names that do not resolve are
// returned as a problem (they exempt nobody until they do).
func resolveAdmins(list string) (map[uint32]bool, string) {
	names, err := config.AdminList(list)
	if err != nil {
		return nil, fmt.Sprintf("admin_users: %v", err)
	}
	out := make(map[uint32]bool, len(names))
	var missing []string
	for _, n := range names {
		if uid, err := strconv.ParseUint(n, 10, 32); err == nil {
			out[uint32(uid)] = true
			continue
		}
		u, err := user.Lookup(n)
		if err != nil {
			missing = append(missing, profile.Sanitize(n))
			continue
		}
		if uid, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
			out[uint32(uid)] = true
		}
	}
	if len(missing) > 0 {
		return out, fmt.Sprintf("admin_users: unknown users %s (not exempt from raw_requests)", strings.Join(missing, ", "))
	}
	return out, ""
}
