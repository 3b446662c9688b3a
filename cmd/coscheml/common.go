// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// systemConfig is read when neither --config nor $COSCHEML_CONFIG names a file.
const systemConfig = "/etc/coscheml/coscheml.yaml"

// configPath returns the configuration file in effect ("" = built-in defaults).
func configPath(c *cli.Context) string {
	if p := c.String("config"); p != "" {
		return p
	}
	if _, err := os.Stat(systemConfig); err == nil {
		return systemConfig
	}
	return ""
}

// loadConfig returns the configuration named by the global --config flag (or
// $COSCHEML_CONFIG), else /etc/coscheml/coscheml.yaml when it exists, else the
// built-in defaults. A named file that is missing is an error (exit 3): a typo in
// a path must not silently mean "defaults".
func loadConfig(c *cli.Context) (config.Config, error) {
	path := configPath(c)
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

// modelPath returns the model file in effect: --model (or $COSCHEML_MODEL), else the
// config's model_path; "" means the embedded default model.
func modelPath(c *cli.Context, cfg config.Config) string {
	if p := c.String("model"); p != "" {
		return p
	}
	return cfg.ModelPath
}

// loadModel loads the model named by --model, else the config's model_path, else
// the embedded default model.
func loadModel(c *cli.Context) (*model.Model, error) {
	cfg, err := loadConfig(c)
	if err != nil {
		return nil, err
	}
	m, _, err := model.Current(modelPath(c, cfg))
	return m, err
}

// loadCatalog returns the profiles of the config's profile_dir. When that folder
// does not exist or holds no readable profile, it falls back to the embedded Lucid
// catalog (53 training setups) and says so on stderr, so the CLI is useful on a
// machine with nothing installed. Unreadable files are reported and skipped.
func loadCatalog(c *cli.Context) (profile.Catalog, error) {
	cfg, err := loadConfig(c)
	if err != nil {
		return nil, err
	}
	stderr := c.App.ErrWriter
	dir := cfg.ProfileDir
	if dir != "" {
		// Stat first: profile.Open would create the folder, and a read-only
		// command must not.
		switch fi, err := os.Stat(dir); {
		case err == nil && fi.IsDir():
			st, err := profile.Open(dir)
			if err != nil {
				return nil, err
			}
			cat, problems := st.CatalogMax(cfg.MaxProfiles)
			for _, p := range problems {
				fmt.Fprintln(stderr, "coscheml: warning: skipped:", p)
			}
			if len(cat) > 0 {
				return cat, nil
			}
			fmt.Fprintf(stderr, "coscheml: profile store %s has no profiles; using %s\n", dir, lucidCatalogName())
		case err == nil:
			return nil, fmt.Errorf("profile_dir %s: not a folder", dir)
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(stderr, "coscheml: profile store %s does not exist; using %s\n", dir, lucidCatalogName())
		default:
			return nil, fmt.Errorf("profile_dir: %w", err)
		}
	} else {
		fmt.Fprintln(stderr, "coscheml: no profile_dir configured; using", lucidCatalogName())
	}
	return embeddedCatalog()
}

// lucidCatalogName names the fallback catalog in messages.
func lucidCatalogName() string {
	if models.Embedded {
		return "the embedded Lucid catalog"
	}
	return "the Lucid catalog of " + models.LucidDir
}

// embeddedCatalog decodes the Lucid solo profiles: built into the binary, or
// installed by the coscheml-model-lucid package.
func embeddedCatalog() (profile.Catalog, error) {
	b, err := models.Solo()
	if err != nil {
		return nil, fmt.Errorf("no profiles of your own, and no Lucid catalog to fall back on: %w; "+
			"import or record profiles (coscheml profile import, or the bootstrap of new applications)", err)
	}
	ps, err := profile.ReadLucidSolo(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("Lucid catalog (%s): %w", models.Source(), err)
	}
	return profile.CatalogOf(ps), nil
}

// lookupTag validates a tag given on the command line and finds its profile. An
// invalid tag is a usage error; a valid one without a profile is "not found"
// (exit 3) and the message lists a few known tags.
func lookupTag(cat profile.Catalog, tag string) (*profile.Profile, error) {
	if err := profile.ValidateTag(tag); err != nil {
		return nil, &usageError{msg: err.Error()}
	}
	p, err := cat.Get(tag)
	if err != nil {
		return nil, fmt.Errorf("%w (known tags include %s; see coscheml profile list)", err, someTags(cat, 5))
	}
	return p, nil
}

// someTags lists up to n tags of cat, sorted, for error messages.
func someTags(cat profile.Catalog, n int) string {
	tags := make([]string, 0, len(cat))
	for t := range cat {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	if len(tags) > n {
		tags = append(tags[:n], "...")
	}
	s := ""
	for i, t := range tags {
		if i > 0 {
			s += ", "
		}
		s += t
	}
	return s
}
