// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCapPerUser(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 12, 1, 0, m, 0, 0, time.UTC) }
	ob := func(uid string, m int, co ...string) Observation {
		return Observation{Tag: "a", CoTags: co, Speed: 0.5 + float64(m)/100, UID: uid, When: at(m)}
	}
	tests := []struct {
		name    string
		in      []Observation
		max     int
		want    []int // indices of in kept
		dropped int
	}{
		{"one user flooding a pair keeps only its newest", []Observation{ob("7", 1, "b"), ob("7", 5, "b"), ob("7", 3, "b"), ob("7", 4, "b"), ob("8", 2, "b")}, 2, []int{1, 3, 4}, 2},
		{"co-runner order does not make a new pair", []Observation{ob("7", 1, "b", "c"), ob("7", 2, "c", "b")}, 1, []int{1}, 1},
		{"pairs are capped apart", []Observation{ob("7", 1, "b"), ob("7", 2, "c"), ob("7", 3)}, 1, []int{0, 1, 2}, 0},
		{"unknown uids are one user", []Observation{ob("", 1, "b"), ob("", 2, "b"), ob("", 3, "b")}, 2, []int{1, 2}, 1},
		{"ties keep the later row", []Observation{ob("7", 1, "b"), ob("7", 1, "b")}, 1, []int{1}, 1},
		{"default cap", []Observation{ob("7", 1), ob("7", 2), ob("7", 3), ob("7", 4)}, 0, []int{1, 2, 3}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kept, dropped := CapPerUser(tc.in, tc.max)
			if dropped != tc.dropped || len(kept) != len(tc.want) {
				t.Fatalf("kept %d dropped %d, want %d and %d", len(kept), dropped, len(tc.want), tc.dropped)
			}
			for i, j := range tc.want {
				if !equalObs(kept[i], tc.in[j]) {
					t.Errorf("kept[%d] = %+v, want in[%d] %+v", i, kept[i], j, tc.in[j])
				}
			}
		})
	}
}

func TestEvidenceByPair(t *testing.T) {
	in := []Observation{
		{Tag: "a", CoTags: []string{"b"}, Speed: 0.5, UID: "1"}, {Tag: "a", CoTags: []string{"b"}, Speed: 0.6, UID: "1"},
		{Tag: "a", CoTags: []string{"b"}, Speed: 0.6, UID: "2"}, {Tag: "b", CoTags: []string{"a"}, Speed: 0.6, UID: "2"},
	}
	ev := EvidenceByPair(in)
	if got := ev["a|b"]; got != (Evidence{N: 3, Users: 2}) {
		t.Errorf("a|b: %+v", got)
	}
	if got := ev["b|a"]; got != (Evidence{N: 1, Users: 1}) {
		t.Errorf("b|a: %+v", got)
	}
}

func TestKeepMultiUser(t *testing.T) {
	ab := func(uid string) Observation {
		return Observation{Tag: "a", CoTags: []string{"b"}, Speed: 0.5, UID: uid}
	}
	ba := func(uid string) Observation {
		return Observation{Tag: "b", CoTags: []string{"a"}, Speed: 0.5, UID: uid}
	}
	for _, tc := range []struct {
		name       string
		in         []Observation
		min        int
		kept       int
		obs, pairs int
	}{
		{"two users keep a pair", []Observation{ab("1"), ab("2")}, 2, 2, 0, 0},
		{"one user's three reports do not", []Observation{ab("1"), ab("1"), ab("1")}, 2, 0, 3, 1},
		{"per ordered pair", []Observation{ab("1"), ab("2"), ba("1")}, 2, 2, 1, 1},
		{"unknown uids are one user", []Observation{ab(""), ab("")}, 2, 0, 2, 1},
		{"min 1 keeps all", []Observation{ab("1"), ba("1")}, 1, 2, 0, 0},
		{"three users asked", []Observation{ab("1"), ab("2"), ba("1"), ba("2"), ba("3")}, 3, 3, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, obs, pairs := KeepMultiUser(tc.in, tc.min)
			if len(kept) != tc.kept || obs != tc.obs || pairs != tc.pairs {
				t.Errorf("kept %d, left out %d observations of %d pairs; want %d, %d, %d", len(kept), obs, pairs, tc.kept, tc.obs, tc.pairs)
			}
		})
	}
}

// The held-out set of retrain's guard comes only from a folder users cannot write.
func TestReadHeldOut(t *testing.T) {
	write := func(dir, name string, mode os.FileMode) {
		t.Helper()
		if err := AppendFile(filepath.Join(dir, name), Observation{Tag: "a", CoTags: []string{"b"}, Speed: 0.7}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	site := filepath.Join(root, "observations")
	admin := filepath.Join(root, "heldout")
	for _, d := range []string{site, admin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(admin, "curated.csv", 0o644)
	write(admin, "open.csv", 0o666)
	os.Symlink(filepath.Join(site, "n1.csv"), filepath.Join(admin, "link.csv"))
	write(site, "n1.csv", 0o644)

	obs, problems, err := ReadHeldOut(admin, site)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 {
		t.Errorf("%d held-out observations, want the 1 of curated.csv", len(obs))
	}
	msgs := ""
	for _, p := range problems {
		msgs += p.Error() + "\n"
	}
	if len(problems) != 2 || !strings.Contains(msgs, "open.csv is group- or world-writable") || !strings.Contains(msgs, "link.csv is a symlink") {
		t.Errorf("problems:\n%s", msgs)
	}

	for _, tc := range []struct {
		name, dir, want string
		prep            func()
	}{
		{"the site folder itself", site, "site observation folder", nil},
		{"inside the site folder", filepath.Join(site, "sub"), "site observation folder", func() { os.Mkdir(filepath.Join(site, "sub"), 0o755) }},
		{"world-writable folder", admin, "world-writable", func() { os.Chmod(admin, 0o777) }},
		{"missing folder", filepath.Join(root, "none"), "no such file", nil},
		{"no folder", "", "no folder given", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prep != nil {
				tc.prep()
			}
			_, _, err := ReadHeldOut(tc.dir, site)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
