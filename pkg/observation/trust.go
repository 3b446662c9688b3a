// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultMaxPerUser is how many observations of one pair one user may contribute
// to the evidence a model is trained on or a pair memory trusts. With 3, evidence
// of n observations comes from at least ceil(n/3) users: one user alone can never
// make up a pair's evidence once more than 3 observations are needed.
const DefaultMaxPerUser = 3

// PairKey is the evidence key of an observation: its tag, then its co-runner tags
// sorted and joined with '+' ("bert-bs32|resnet50-bs32"; alone: "bert-bs32|").
func PairKey(o Observation) string {
	co := slices.Clone(o.CoTags)
	slices.Sort(co)
	return o.Tag + "|" + strings.Join(co, "+")
}

// CapPerUser keeps, for each pair (PairKey) and each uid, at most maxPerUser
// observations, the newest by When (unknown times count as oldest; ties keep the
// later one in obs). Observations with an unknown uid ("") are one user together,
// so unattributed rows are capped too (fail closed). Pass only the site's
// accumulated observations: shipped or admin-curated data is not per user. The
// kept observations are returned in input order with the number dropped;
// maxPerUser < 1 means DefaultMaxPerUser.
func CapPerUser(obs []Observation, maxPerUser int) (kept []Observation, dropped int) {
	if maxPerUser < 1 {
		maxPerUser = DefaultMaxPerUser
	}
	type key struct{ pair, uid string }
	groups := map[key][]int{}
	for i, o := range obs {
		k := key{PairKey(o), o.UID}
		groups[k] = append(groups[k], i)
	}
	keep := make([]bool, len(obs))
	for _, idx := range groups {
		// Newest first; a stable sort keeps input order among equal times, so
		// reversing first makes the later row win a tie.
		slices.Reverse(idx)
		slices.SortStableFunc(idx, func(a, b int) int { return obs[b].When.Compare(obs[a].When) })
		for j, i := range idx {
			keep[i] = j < maxPerUser
		}
	}
	for i, o := range obs {
		if keep[i] {
			kept = append(kept, o)
		} else {
			dropped++
		}
	}
	return kept, dropped
}

// Evidence is how much a pair's observations rest on: their number and the
// number of distinct users (unknown uid counts as one).
type Evidence struct {
	N, Users int
}

// EvidenceByPair counts observations and distinct users per PairKey; apply
// CapPerUser first so that N already obeys the per-user cap.
func EvidenceByPair(obs []Observation) map[string]Evidence {
	users := map[string]map[string]bool{}
	out := map[string]Evidence{}
	for _, o := range obs {
		k := PairKey(o)
		if users[k] == nil {
			users[k] = map[string]bool{}
		}
		users[k][o.UID] = true
		e := out[k]
		e.N++
		e.Users = len(users[k])
		out[k] = e
	}
	return out
}

// ReadHeldOut reads the held-out set of retrain's guard from dir, a folder of
// observation CSVs that only an administrator can write: dir and every file in it
// must be owned by root or by the user running this (the admin's account), must
// not be group- or world-writable, and must not be symlinks; dir must not be the
// site's observation folder siteDir (where the root Epilog writes what users' jobs
// measured) nor lie inside it. A file that fails a check contributes nothing and is
// one problem; rows are read as ReadDir reads them. An error means the folder
// itself is unusable and nothing was read.
func ReadHeldOut(dir, siteDir string) ([]Observation, []error, error) {
	if dir == "" {
		return nil, nil, errors.New("held-out folder: no folder given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("held-out folder: %w", err)
	}
	if siteDir != "" {
		site, err := filepath.Abs(siteDir)
		if err != nil {
			return nil, nil, fmt.Errorf("held-out folder: %w", err)
		}
		if rel, err := filepath.Rel(site, abs); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
			return nil, nil, fmt.Errorf("held-out folder %s is the site observation folder %s or inside it: users' jobs write there", dir, siteDir)
		}
	}
	if err := adminOnly(abs, true); err != nil {
		return nil, nil, fmt.Errorf("held-out folder: %w", err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("held-out folder: %w", err)
	}
	var obs []Observation
	var problems []error
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".csv") {
			continue
		}
		path := filepath.Join(abs, n)
		if err := adminOnly(path, false); err != nil {
			problems = append(problems, fmt.Errorf("held-out file: %w", err))
			continue
		}
		o, err := ReadFileRows(path)
		if err != nil {
			problems = append(problems, err)
		}
		obs = append(obs, o...)
	}
	return obs, problems, nil
}

// adminOnly checks that path is not a symlink, is a folder (wantDir) or a regular
// file, is owned by root or the effective user, and is writable by its owner only.
func adminOnly(path string, wantDir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink", path)
	case wantDir && !fi.IsDir():
		return fmt.Errorf("%s is not a folder", path)
	case !wantDir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is group- or world-writable (mode %04o): users could write the held-out set", path, fi.Mode().Perm())
	}
	if uid, ok := ownerUID(fi); !ok || (uid != 0 && int(uid) != os.Geteuid()) {
		return fmt.Errorf("%s is owned by uid %d, not by root or the admin running this", path, uid)
	}
	return nil
}

// KeepMultiUser keeps the observations of the pairs (PairKey) that at least
// minUsers distinct users observed (an unknown uid counts as one user), so that
// one user's word never trains a pair, as the pair memory asks the same of a
// pair it trusts. The kept observations are returned in input order, with the
// numbers of observations and pairs left out. minUsers <= 1 keeps everything.
func KeepMultiUser(obs []Observation, minUsers int) (kept []Observation, droppedObs, droppedPairs int) {
	if minUsers <= 1 {
		return obs, 0, 0
	}
	ev := EvidenceByPair(obs)
	for _, e := range ev {
		if e.Users < minUsers {
			droppedPairs++
		}
	}
	for _, o := range obs {
		if ev[PairKey(o)].Users >= minUsers {
			kept = append(kept, o)
		} else {
			droppedObs++
		}
	}
	return kept, droppedObs, droppedPairs
}
