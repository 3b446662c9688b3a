// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"time"

	"github.com/coscheml/coscheml/pkg/config"
)

// DecideTimeout is how long slurmctld's thread may wait for a decision
// (decide_timeout of the configuration in effect; the default before one
// loaded or when it failed to load). The library's C queue reads it.
func (e *Engine) DecideTimeout() time.Duration {
	if st := e.snap.Load(); st != nil && st.cfgErr == nil && st.cfg.DecideTimeout > 0 {
		return st.cfg.DecideTimeout
	}
	return config.Default().DecideTimeout
}
