// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// slurmctld's library loads at most max_profiles profiles: the rest are refused
// with one logged problem naming the bound, and the loaded ones keep working.
func TestCatalogLoadIsBounded(t *testing.T) {
	dir := t.TempDir()
	profiles := filepath.Join(dir, "profiles")
	st, err := profile.Open(profiles)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if err := st.Put(&profile.Profile{Tag: fmt.Sprintf("app%d", i), Class: profile.ClassTrain, CollectedAt: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	cat, bad, err := DefaultSources("").LoadCatalog(profiles, 4)
	if err != nil || len(cat) != 4 || cat["app3"] == nil || cat["app4"] != nil || len(bad) != 1 || !errors.Is(bad[0], profile.ErrTooMany) {
		t.Fatalf("loaded %d (%v), problems %v, err %v; want app0..app3 and one ErrTooMany", len(cat), cat, bad, err)
	}
	cfgPath := filepath.Join(dir, "coscheml.yaml")
	y := "profile_dir: " + profiles + "\nresidency_dir: " + filepath.Join(dir, "res") + "\ndecision_log: \"\"\nobservation_dir: \"\"\nmax_profiles: 4\nprofiling:\n  max_new_profiles_per_user: 4\n"
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	src := DefaultSources(cfgPath)
	src.LoadModel = func(string) (model.Predictor, error) { return smPredictor{}, nil }
	e := New(src, Options{})
	defer e.Close()
	p := strings.Join(e.Problems(), "\n")
	if !strings.Contains(p, "more than max_profiles (4)") || !strings.Contains(p, `the 2 from "app4.prof" on are not loaded`) || strings.Contains(p, "unreadable profiles") {
		t.Errorf("problems %q: want the bound named, not an unreadable profile", p)
	}
}
