// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"regexp"
	"strings"

	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
)

// modelAsk is the GPU model and node features a job asks for, resolved on
// cluster.groups: a Type of --gres=gpu:<type>:N that a group names (typed), and
// the features of its --constraint.
type modelAsk struct {
	model    string
	features []string
	typed    bool // asked through a GPU Type: the request keeps it unless pinned
}

func (m *modelAsk) any() bool { return m.model != "" || len(m.features) > 0 }

// maxConstraintFeatures bounds the features of one --constraint.
const maxConstraintFeatures = 16

// constraintFeatureRE is one feature of a plain --constraint (Slurm's feature
// alphabet): anything else (|, counts, brackets, !) is left to Slurm.
var constraintFeatureRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// modelConstraint resolves what the job asks of its GPUs' model (pass: why the
// job is left to Slurm, "" when it may be placed). Only where cluster.groups
// name models, features or gres Types: elsewhere a constraint is not read (as
// before groups existed) and a typed request stays left to Slurm. A job_modify
// that does not repeat the constraint keeps the one its placement had (the
// re-decide loop's updates carry only the comment and the GPU request).
func modelConstraint(q *query, ask *gpuAsk) (mc modelAsk, pass string) {
	if q.snap == nil || !q.snap.selectsModels {
		return mc, ""
	}
	cfg := q.snap.cfg
	if q.j.Modify && q.ctx != nil && q.j.Features == "" && (ask.gres.Type == "" || !ask.typedOnly) {
		return q.ctx.mc, ""
	}
	var feats []string
	if fs := q.j.Features; fs != "" {
		parts := strings.Split(fs, "&")
		if len(parts) > maxConstraintFeatures {
			return mc, "constraint with more than 16 features: left to Slurm"
		}
		for _, f := range parts {
			if !constraintFeatureRE.MatchString(f) {
				return mc, "constraint " + profile.Sanitize(fs) + " is not a plain feature list (f1&f2): left to Slurm"
			}
			feats = append(feats, f)
		}
	}
	typ := ""
	if ask.typedOnly {
		typ = ask.gres.Type
	}
	model, resolved, ok := placeconf.ModelOf(cfg, typ, feats)
	if !ok {
		if typ != "" && ask.pass != "" {
			return mc, "" // the typed request's own pass reason stands
		}
		return mc, "constraint " + profile.Sanitize(q.j.Features) + " names a feature no cluster.groups entry has: coscheml cannot tell its nodes, left to Slurm"
	}
	if typ != "" {
		ask.pass, ask.typedOnly = "", false
		mc.typed = true
	}
	mc.model, mc.features = model, resolved
	return mc, ""
}

// narrowMask is the job's node filter (nil: every node) less the nodes that do
// not meet its model and features; nil when the job asks for none.
func narrowMask(mask []bool, nodes []placement.Node, mc *modelAsk) []bool {
	if !mc.any() {
		return mask
	}
	out := make([]bool, len(nodes))
	for n := range nodes {
		out[n] = (mask == nil || (n < len(mask) && mask[n])) &&
			(mc.model == "" || nodes[n].Model == mc.model) && nodes[n].HasFeatures(mc.features)
	}
	return out
}
