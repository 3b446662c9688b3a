// SPDX-License-Identifier: Apache-2.0

package main

import (
	"sort"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// usesDefaultCatalog says whether `profile list` and `profile show` should read
// profiles the way predict and place do: with no --store and no configuration file
// in effect, the default profile_dir if it holds profiles, else the embedded Lucid
// catalog (loadCatalog says which on stderr). A store named by --store or by a
// configuration file is read as named, and its absence is an error: there it is a
// typo, not a fresh machine.
func usesDefaultCatalog(c *cli.Context) bool {
	return c.String("store") == "" && configPath(c) == ""
}

// defaultCatalogList is the profiles of loadCatalog, sorted by tag like the store's
// List.
func defaultCatalogList(c *cli.Context) ([]*profile.Profile, error) {
	cat, err := loadCatalog(c)
	if err != nil {
		return nil, err
	}
	ps := make([]*profile.Profile, 0, len(cat))
	for _, p := range cat {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Tag < ps[j].Tag })
	return ps, nil
}
