// SPDX-License-Identifier: Apache-2.0

package policyname

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	all, conf := All(), Configurable()
	if all[0] != CoScheML || conf[0] != CoScheML {
		t.Fatalf("Co-scheML must come first: %v / %v", all, conf)
	}
	if slices.Contains(conf, Oracle) || !slices.Contains(all, Oracle) {
		t.Fatalf("the oracle is simulator-only: all %v, configurable %v", all, conf)
	}
	seen := map[string]bool{}
	for _, n := range all {
		if seen[n] || !Known(n) {
			t.Fatalf("name %q listed twice or not known", n)
		}
		seen[n] = true
	}
	for _, n := range conf {
		if !seen[n] {
			t.Fatalf("configurable %q not in All", n)
		}
	}
	for _, n := range []string{"", "CoScheML", "oracle2", "least_loaded"} {
		if Known(n) {
			t.Errorf("Known(%q) = true", n)
		}
	}
}
