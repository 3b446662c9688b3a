// SPDX-License-Identifier: Apache-2.0

// Package observation is the training data of the interference model: measured
// speeds of jobs that shared a GPU with given co-runners.
package observation

import (
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Observation is one job's measured speed relative to running alone while it
// shared its GPU with CoTags.
type Observation struct {
	Tag    string        `json:"tag"`
	Class  profile.Class `json:"class,omitempty"`
	CoTags []string      `json:"co_tags"` // empty: ran alone
	Speed  float64       `json:"speed"`   // 1.0 = as fast as alone
	Source string        `json:"source,omitempty"`
	JobID  string        `json:"job_id,omitempty"`
	Node   string        `json:"node,omitempty"`
	When   time.Time     `json:"when,omitempty"`
	// UID is the numeric uid of the job's owner (SLURM_JOB_UID) as decimal
	// digits; "" = unknown (shipped or admin-curated data, or a file written
	// before the uid column existed). CapPerUser limits one uid's evidence.
	UID string `json:"uid,omitempty"`
}
