// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
)

// deferredPrefix starts the reason of a deferred wait (deferral), so that a
// restarted slurmctld can tell its own deferrals from the decision log.
const deferredPrefix = "deferred "

// deferralsFrom returns the deferrals still running at now (decision id ->
// begin time given): rewrites answered "wait" and deferred, younger than wait,
// not replaced by a later record. A restarted plugin then still sets a deferred
// job's begin time to now when the re-decide loop places it.
func deferralsFrom(recs []decisionlog.Record, now time.Time, wait time.Duration) map[string]time.Time {
	if wait <= 0 {
		return nil
	}
	replaced := map[string]bool{}
	for _, r := range recs {
		for _, id := range r.Replaces {
			replaced[id] = true
		}
	}
	out := map[string]time.Time{}
	for _, r := range recs {
		if r.Outcome != "rewrite" || r.Action != "wait" || r.ID == "" || replaced[r.ID] || !strings.HasPrefix(r.Reason, deferredPrefix) {
			continue
		}
		until := r.Time.Add(wait)
		if until.Before(now) || r.Time.After(now.Add(time.Minute)) {
			continue // begun already, or from a clock far ahead
		}
		out[r.ID] = until
	}
	return out
}
