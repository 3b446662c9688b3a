// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// profileCommand is `coscheml profile`: import, list and show the profiles of the
// store (docs/profiles.md); `profile run` (profile_run.go) measures new ones.
func profileCommand() *cli.Command {
	// Each command gets its own flag values: urfave/cli flags keep state.
	storeFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "store", Usage: "profile store `DIR` (default: the config's profile_dir)"}
	}
	jsonFlag := func() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON"} }
	return &cli.Command{
		Name:  "profile",
		Usage: "manage application profiles (solo GPU metric summaries)",
		Description: "A profile summarises how one application uses a GPU when it runs alone; tags name\n" +
			"applications (a-z, 0-9, inner '-', '_', '.'; at most 64 characters). See docs/profiles.md.",
		Subcommands: []*cli.Command{
			{
				Name:      "import",
				Usage:     "import profiles from a CSV file into the store",
				ArgsUsage: "FILE",
				UsageText: "coscheml profile import --format lucid|generic [--store DIR] FILE",
				Description: "lucid:   the Lucid artifact's solo_profiles.csv (model,dataset,batchsize,amp,speed,\n" +
					"         gpu_util,gmem_util,gmem,...); each setup becomes the tag <model>-bs<batch>[-amp],\n" +
					"         class train.\n" +
					"generic: columns tag,class,sm_mean,membw_mean,mem_used_mib and optional ones\n" +
					"         (docs/profiles.md).\n" +
					"The whole file is checked before anything is written; a profile with an existing\n" +
					"tag is replaced.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "format", Usage: "`FORMAT` of FILE: lucid or generic (required)"},
					storeFlag(),
				},
				Action: profileImport,
			},
			{
				Name:      "list",
				Usage:     "list the profiles in the store",
				UsageText: "coscheml profile list [--store DIR] [--json]",
				Flags:     []cli.Flag{storeFlag(), jsonFlag()},
				Action:    profileList,
			},
			{
				Name:      "show",
				Usage:     "show one profile",
				ArgsUsage: "TAG",
				UsageText: "coscheml profile show [--store DIR] [--json] TAG",
				Flags:     []cli.Flag{storeFlag(), jsonFlag()},
				Action:    profileShow,
			},
			profileRunCommand(),
		},
	}
}

// storeDir is --store, else the config's profile_dir.
func storeDir(c *cli.Context) (string, error) {
	if d := c.String("store"); d != "" {
		return d, nil
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return "", err
	}
	if cfg.ProfileDir == "" {
		return "", usageErrorf("no profile store: set profile_dir in the configuration or pass --store")
	}
	return cfg.ProfileDir, nil
}

// openExistingStore opens the store for reading without creating its folder: a
// read-only command must not leave an empty store behind a typo.
func openExistingStore(c *cli.Context) (*profile.Store, error) {
	dir, err := storeDir(c)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("profile store: %w", err)
	}
	return profile.Open(dir)
}

func profileImport(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErrorf("profile import: want exactly one FILE, got %d arguments", c.NArg())
	}
	var read func(io.Reader) ([]*profile.Profile, error)
	switch f := c.String("format"); f {
	case "":
		return usageErrorf("profile import: --format lucid|generic is required")
	case "lucid":
		read = profile.ReadLucidSolo
	case "generic":
		read = profile.ReadGenericCSV
	default:
		return usageErrorf("profile import: unknown --format %q: want lucid or generic", sanitize(f))
	}
	path := c.Args().First()
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("profile import: %w", err)
	}
	defer f.Close()
	ps, err := read(f)
	if err != nil {
		return fmt.Errorf("profile import %s: %w", sanitize(path), err)
	}
	dir, err := storeDir(c)
	if err != nil {
		return err
	}
	st, err := profile.Open(dir)
	if err != nil {
		return err
	}
	replaced := 0
	for _, p := range ps {
		if _, err := st.Get(p.Tag); err == nil {
			replaced++
		}
		if err := st.Put(p); err != nil {
			return fmt.Errorf("profile import %s: %w", sanitize(path), err)
		}
	}
	fmt.Fprintf(c.App.Writer, "imported %d profiles from %s into %s (%d new, %d replaced)\n",
		len(ps), sanitize(path), st.Dir(), len(ps)-replaced, replaced)
	return nil
}

func profileList(c *cli.Context) error {
	if c.NArg() != 0 {
		return usageErrorf("profile list: unexpected argument %q", sanitize(c.Args().First()))
	}
	if usesDefaultCatalog(c) {
		ps, err := defaultCatalogList(c)
		if err != nil {
			return err
		}
		return printProfileList(c, ps)
	}
	st, err := openExistingStore(c)
	if err != nil {
		return err
	}
	ps, problems := st.List()
	for _, p := range problems {
		fmt.Fprintln(c.App.ErrWriter, "coscheml: profile list:", p)
	}
	if err := printProfileList(c, ps); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("profile list: %d unreadable profile files in %s (listed above)", len(problems), st.Dir())
	}
	return nil
}

func printProfileList(c *cli.Context, ps []*profile.Profile) error {
	w := c.App.Writer
	if c.Bool("json") {
		if ps == nil {
			ps = []*profile.Profile{}
		}
		if err := writeJSON(w, ps); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TAG\tCLASS\tSM%\tMEMBW%\tMEM_MIB\tSAMPLES\tGPU\tNOTE")
		for _, p := range ps {
			note := ""
			if p.Partial {
				note = "partial"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.0f\t%d\t%s\t%s\n", p.Tag, p.Class,
				p.SMUtil.Mean, p.MemBWUtil.Mean, p.MemUsedMiB, p.Samples, p.GPUModel, note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func profileShow(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErrorf("profile show: want exactly one TAG, got %d arguments", c.NArg())
	}
	tag := c.Args().First()
	if err := profile.ValidateTag(tag); err != nil {
		return &usageError{msg: "profile show: " + err.Error()}
	}
	if usesDefaultCatalog(c) {
		cat, err := loadCatalog(c)
		if err != nil {
			return err
		}
		p, err := lookupTag(cat, tag)
		if err != nil {
			return fmt.Errorf("profile show: %w", err)
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, p)
		}
		return printProfile(c.App.Writer, p)
	}
	st, err := openExistingStore(c)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("profile show: tag %q: %w (%v)", tag, profile.ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	p, err := st.Get(tag)
	if err != nil {
		return fmt.Errorf("profile show: %w", err)
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, p)
	}
	return printProfile(c.App.Writer, p)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printProfile writes p as aligned "key: value" lines. Every text field of a
// stored profile is validated printable ASCII, so nothing needs escaping.
func printProfile(w io.Writer, p *profile.Profile) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	line := func(k, format string, a ...any) {
		fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(format, a...))
	}
	stat := func(k string, s profile.Stat, unit string) {
		if s == (profile.Stat{}) {
			return
		}
		line(k, "mean %.4g%s, p95 %.4g%s, max %.4g%s", s.Mean, unit, s.P95, unit, s.Max, unit)
	}
	line("tag", "%s", p.Tag)
	line("class", "%s", p.Class)
	line("gpu model", "%s", orDash(p.GPUModel))
	line("sm util", "mean %.4g%%, p95 %.4g%%, max %.4g%%", p.SMUtil.Mean, p.SMUtil.P95, p.SMUtil.Max)
	line("mem bw util", "mean %.4g%%, p95 %.4g%%, max %.4g%%", p.MemBWUtil.Mean, p.MemBWUtil.P95, p.MemBWUtil.Max)
	line("memory used", "%.0f MiB", p.MemUsedMiB)
	stat("pcie tx", p.PCIeTxMBps, " MB/s")
	stat("pcie rx", p.PCIeRxMBps, " MB/s")
	stat("power", p.PowerW, " W")
	stat("sm clock", p.SMClockMHz, " MHz")
	if p.SoloRuntimeS > 0 {
		line("solo runtime", "%.4g s", p.SoloRuntimeS)
	}
	if p.SoloThroughput > 0 {
		line("solo throughput", "%.6g /s", p.SoloThroughput)
	}
	if p.Samples > 0 || p.DurationS > 0 {
		line("samples", "%d over %.4g s", p.Samples, p.DurationS)
	} else {
		line("samples", "- (not recorded)")
	}
	if p.Partial {
		line("partial", "%s", orDash(p.PartialNote))
	}
	when := "-"
	if !p.CollectedAt.IsZero() {
		when = p.CollectedAt.UTC().Format(time.RFC3339)
	}
	line("collected", "%s on %s", when, orDash(p.CollectedOn))
	line("source", "%s", orDash(p.Source))
	return tw.Flush()
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
