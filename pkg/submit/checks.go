// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/profile"
)

// A decision's checks, in the order they run. prepare (before placement):
//  1. no usable configuration, or a job_modify of fields placement does not
//     read: the job passes unchanged;
//  2. raw_requests on updates (guardUpdate): an update that would move a
//     pending job onto the shared nodes without its GPU request is refused;
//  3. a running job's coscheml directive cannot change (retagRunning);
//  4. untagged jobs follow the untagged rule;
//  5. a malformed directive meets invalid_tag (badInput);
//  6. a comment-only update to an unknown tag meets unknown_profile;
//  7. requests coscheml leaves to Slurm (several forms, types, no GPU, another
//     partition) pass unchanged;
//  8. an unknown tag meets unknown_profile;
//  9. a degraded snapshot (model, profiles) or view (residency) passes the job;
//
// then placement (decide.go), and after it:
//  10. raw_requests on what passes unchanged (guardRawShard): a raw shard
//      request would land wherever Slurm puts it.

// placeIn is a job ready to be placed on the cluster: tagged, valid, profiled.
type placeIn struct {
	dir   comment.Directive
	ask   gpuAsk
	prof  *profile.Profile
	class profile.Class
	rec   decisionlog.Record
	mc    modelAsk // the GPU model or node features the job asks for
}

// prepare is the first stage: everything decided from the job and the snapshot
// alone. ok means the job is to be placed on the cluster (stage place); otherwise
// out is the decision.
func prepare(q *query) (in placeIn, out outcome, ok bool) {
	st, j := q.snap, q.j
	if st == nil || st.cfgErr != nil {
		return in, outcome{}, false
	}
	if j.Modify && !j.has(placementFields) {
		return in, outcome{}, false // job_modify of fields placement does not read
	}
	if out, deny := guardUpdate(q); deny {
		return in, out, false
	}
	cfg := st.cfg
	dir := comment.ParseComment(j.Comment)
	ask := readGPUs(&j)
	if j.Modify && q.isAdmin() && ask.typedOnly && ask.gres.Shards > 0 && len(ask.gres.Types) > 1 && allPinTypes(cfg.ShardTypePrefix, ask.gres.Types) {
		// The plugin's own pin of a several-GPU job (K shards of each of
		// several GPU Types), sent back by the loop after a requeue: placed
		// again as a job of that many GPUs.
		ask.pass, ask.typedOnly, ask.gres.Type, ask.ownPin = "", false, "", true
		ask.gres.GPUs, ask.gres.Shards, ask.gres.Types = len(ask.gres.Types), 0, nil
	} else if j.Modify && q.isAdmin() && ask.typedOnly && ask.gres.Shards > 0 && isPinType(cfg.ShardTypePrefix, ask.gres.Type) {
		// The plugin's own earlier pin (a job requeued after it started, which
		// the re-decide loop sends back with the request it ran with): decided
		// again like first-fit pinning's untyped shards, not left to Slurm as
		// a typed request, which would keep it on the node it was requeued from.
		// Only an administrator's update (the loop's) takes this path: Slurm
		// 22.05 honours a typed update of a requeued job only, so a user's
		// typed update of a pending job would start it wherever first fit puts
		// it; a user's meets raw_requests like any raw shard request.
		ask.pass, ask.typedOnly, ask.gres.Type, ask.ownPin = "", false, "", true
	}
	mc, mcPass := modelConstraint(q, &ask)
	gres, gresErr := ask.gres, ask.err
	pass := ask.pass
	if pass == "" {
		pass = mcPass
	}
	if pass == "" {
		pass = fieldsPass(&j)
	}
	r := decisionlog.Record{Time: q.now, Op: "submit", UserID: j.UserID, GPU: -1, TresIn: j.TresPerNode}
	if j.Modify {
		r.Op = "modify"
	}
	if j.JobID != 0 && j.JobID != NoVal {
		r.JobID = strconv.FormatUint(uint64(j.JobID), 10)
	}
	partOK := cfg.Cluster.Partition == "" || j.Partition == "" || j.Partition == cfg.Cluster.Partition
	var was comment.Directive // the job's directive before the update
	if j.Modify && j.has(FieldComment) {
		was = comment.ParseComment(j.StoredComment)
		if r.JobID != "" && q.view != nil && q.view.running[r.JobID] && !q.isAdmin() && !sameDirective(was, dir) {
			r.Tag, r.Class = dir.Tag, string(dir.Class)
			return in, retagRunning(q, was, r), false
		}
	}

	if !dir.Present {
		if cfg.Untagged != "exclusive" || gresErr != nil || !gres.HasGPU() || !partOK || gres.GPUs > 1 || j.Modify && j.TresPerNode == "" || pass != "" {
			return in, outcome{res: Result{UserMsg: nearMissWarning(dir)}}, false
		}
		r.Action, r.Reason = "exclusive", "untagged job: untagged=exclusive routes it to a whole GPU through shards"
		out := exclusiveUnpinned(q, &ask, r)
		if w := nearMissWarning(dir); w != "" {
			out.res.UserMsg = joinMsg(out.res.UserMsg, w)
		}
		return in, out, false
	}
	if dir.Err != nil {
		return in, badInput(q, "invalid_tag", cfg.InvalidTag, dir.Err.Error(), &ask, pass, r), false
	}
	r.Tag, r.Class = dir.Tag, string(dir.Class)
	// A comment-only update sets a tag as much as a submission does: an
	// unknown one meets the same rule (unless the job had that tag already).
	if j.Modify && j.TresPerNode == "" && st.catErr == nil && !st.known(dir.Tag) && !(was.Err == nil && was.Tag == dir.Tag) {
		msg := fmt.Sprintf("unknown application profile '%s'; see `coscheml profile list`", profile.Sanitize(dir.Tag))
		return in, badInput(q, "unknown_profile", cfg.UnknownProfile, msg, &ask, pass, r), false
	}
	switch {
	case j.Modify && j.TresPerNode == "":
		return in, finish(Result{}, r, "unchanged", "pass", "comment changed by job_modify; the GPU request is not part of the update, placement kept"), false
	case gresErr != nil:
		return in, finish(Result{}, r, "unchanged", "pass", "GPU request not understood: "+gresErr.Error()), false
	case ask.pass != "": // a GPU request left to Slurm (--gpus=2, a type, ...)
		return in, finish(Result{}, r, "unchanged", "pass", ask.pass), false
	case !gres.HasGPU():
		return in, finish(Result{}, r, "unchanged", "pass", "no GPU requested"), false
	case pass != "":
		return in, finish(Result{}, r, "unchanged", "pass", pass), false
	case !partOK:
		return in, finish(Result{}, r, "unchanged", "pass", "partition "+profile.Sanitize(j.Partition)+" is not managed by coscheml"), false
	}
	// The tag is checked against the profiles whenever they loaded, so a user gets
	// the same answer whether or not the model is healthy.
	prof := st.catalog[dir.Tag]
	if st.catErr == nil && !st.known(dir.Tag) {
		msg := fmt.Sprintf("unknown application profile '%s'; see `coscheml profile list`", profile.Sanitize(dir.Tag))
		return in, badInput(q, "unknown_profile", cfg.UnknownProfile, msg, &ask, pass, r), false
	}
	if what := st.degraded(); what != "" {
		return in, finish(Result{}, r, "unchanged", "pass", "degraded ("+what+" unusable, logged when it happened): left unchanged"), false
	}
	class := dir.Class
	if class == "" {
		class = prof.Class
	}
	r.Class = string(class)
	if why := q.view.blocker(st, r.JobID); why != "" {
		return in, finish(Result{}, r, "unchanged", "pass", why), false
	}
	return placeIn{dir: dir, ask: ask, prof: prof, class: class, rec: r, mc: mc}, outcome{}, true
}

// checkPassThrough is the last check (10): a job left as submitted keeps its
// request, so a raw shard request in it would land wherever Slurm puts it.
func checkPassThrough(q *query, out outcome) outcome {
	if out.res.Code != Unchanged || q.snap == nil || q.snap.cfgErr != nil {
		return out
	}
	if d, deny := guardRawShard(q); deny {
		return d
	}
	return out
}

// nearMissWarning tells the user of an untagged job whose comment has a word
// like a misspelt directive that the job runs untagged ("" when none).
func nearMissWarning(dir comment.Directive) string {
	if dir.NearMiss == "" {
		return ""
	}
	return fmt.Sprintf("coscheml: warning: %q in the comment is not a coscheml directive (they start with \"coscheml:\"); "+
		"the job runs untagged, without placement. To tag it: --comment=coscheml:app=<tag>[,class=hpc|train|infer]",
		profile.Sanitize(dir.NearMiss))
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

// known says whether tag has a profile in the snapshot's catalog.
func (l *Snapshot) known(tag string) bool {
	p, ok := l.catalog[tag]
	return ok && p != nil
}

// sameDirective says whether two comments say the same to coscheml: both
// untagged, or the same tag and class (two malformed directives count as the
// same: neither is placed).
func sameDirective(a, b comment.Directive) bool {
	if (a.Err != nil) != (b.Err != nil) {
		return false
	}
	return a.Err != nil || a.Present == b.Present && a.Tag == b.Tag && a.Class == b.Class
}

// retagRunning refuses an update that changes the coscheml directive of a
// running job. The job's GPU, its neighbours and the node's profiling of it
// were decided for the directive it started with; a new tag would describe it
// to nothing that still decides (and would let a heavy job's measurements be
// filed under a light tag). Admins may (the node side keeps the tag recorded
// at start).
func retagRunning(q *query, was comment.Directive, r decisionlog.Record) outcome {
	keep := "no coscheml directive"
	if was.Present && was.Err == nil {
		keep = "coscheml:app=" + profile.Sanitize(was.Tag)
		if was.Class != "" {
			keep += ",class=" + profile.Sanitize(string(was.Class))
		}
	}
	msg := fmt.Sprintf("job %s is running: its coscheml directive cannot change until it ends "+
		"(its GPU and its profiling were decided for the directive it started with). "+
		"Keep %s in the comment (other words may change), or ask an administrator", jobLabel(&q.j), keep)
	out := finish(Result{Code: Reject, UserMsg: "coscheml: " + msg}, r, "reject", "pass", msg)
	out.rejectWhy = "running_retag"
	return out
}

// badInput applies rule invalid_tag / unknown_profile: "reject" refuses the job
// with msg; "exclusive" accepts it on a whole GPU and warns; "bootstrap"
// (unknown_profile only) accepts it on a whole GPU, where the node Prolog/Epilog
// profile it, and says so.
func badInput(q *query, rule, mode, msg string, ask *gpuAsk, pass string, r decisionlog.Record) outcome {
	if mode != config.UnknownExclusive && mode != config.UnknownBootstrap {
		res := Result{Code: Reject, UserMsg: "coscheml: " + msg}
		out := finish(res, r, "reject", "pass", msg)
		out.rejectWhy = rule
		return out
	}
	r.Action = "exclusive"
	r.Reason = msg + "; accepted on a whole GPU (" + rule + ": " + mode + ")"
	alone := "; the job runs on a GPU of its own"
	if mode == config.UnknownBootstrap {
		switch {
		case q.snap.cfg.Profiling.Enabled && r.Class == "":
			// The Epilog writes a new profile only with a class (it sets the
			// application's floor), which only the directive can give.
			alone = "; bootstrap: the job runs alone on a whole GPU, but its profile is written only " +
				"with a class: add class=hpc, train or infer to the comment (coscheml:app=TAG,class=train)"
		case q.snap.cfg.Profiling.Enabled:
			alone = "; bootstrap: the job runs alone on a whole GPU and is profiled there, " +
				"so later jobs of this application can share a GPU once the profile is in place"
		default:
			alone = "; bootstrap: the job runs alone on a whole GPU (profiling is disabled here: " +
				"ask an administrator to add a profile with coscheml profile run or import)"
		}
	}
	if ask.err != nil || !ask.gres.HasGPU() || ask.gres.GPUs > 1 || q.j.Modify && q.j.TresPerNode == "" || pass != "" {
		res := Result{UserMsg: "coscheml: warning: " + msg + "; the job is not shared"}
		return finish(res, r, "unchanged", "pass", r.Reason)
	}
	out := exclusiveUnpinned(q, ask, r)
	out.res.UserMsg = "coscheml: warning: " + msg + alone
	return out
}

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
