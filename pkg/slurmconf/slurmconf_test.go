// SPDX-License-Identifier: Apache-2.0

package slurmconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const plain = `# test cluster
ClusterName=c1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
NodeName=DEFAULT CPUs=8
NodeName=n[1-4] NodeAddr=127.0.0.1 Port=[17001-17004] CPUs=8 Gres=gpu:h200:4,shard:16
PartitionName=p Nodes=ALL Default=YES
`

const typed = `SelectTypeParameters=CR_Core,LL_SHARED_GRES
GresTypes=gpu,shard
NodeName=n[1-2] CPUs=8 Gres=gpu:g0:1,gpu:g1:1,gpu:g2:1,gpu:g3:1,shard:16 # typed
`

func TestParse(t *testing.T) {
	cases := []struct {
		name      string
		text      string
		ll        bool
		typed     bool
		firstFit  bool // CheckSteering(FirstFit) == nil
		typedOK   bool // CheckSteering(Typed) == nil
		nodes     int
		firstGres []Gres
	}{
		{"plain", plain, false, false, true, false, 1, []Gres{{"gpu", "h200", 4}, {"shard", "", 16}}},
		{"typed LL", typed, true, true, false, true, 1, []Gres{{"gpu", "g0", 1}, {"gpu", "g1", 1}, {"gpu", "g2", 1}, {"gpu", "g3", 1}, {"shard", "", 16}}},
		{"lower case keys", "selecttypeparameters=cr_core,ll_shared_gres\nnodename=a gres=gpu:2,shard:8\n", true, false, false, false, 1, []Gres{{"gpu", "", 2}, {"shard", "", 8}}},
		{"no gres", "NodeName=a CPUs=4\n", false, false, true, false, 1, nil},
		{"socket binding and K", "NodeName=a Gres=gpu:a100:2(S:0-1),shard:1K\n", false, false, true, false, 1, []Gres{{"gpu", "a100", 2}, {"shard", "", 1024}}},
		{"typed count 2", "NodeName=a Gres=gpu:g0:2,shard:8\n", false, false, true, false, 1, []Gres{{"gpu", "g0", 2}, {"shard", "", 8}}},
		{"quoted", `NodeName=a Feature="x y" Gres=gpu:g0:1,gpu:g1:1,shard:8` + "\n", false, true, true, true, 1, []Gres{{"gpu", "g0", 1}, {"gpu", "g1", 1}, {"shard", "", 8}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.LeastLoadedSharedGres(); got != tc.ll {
				t.Errorf("LL_SHARED_GRES = %v, want %v", got, tc.ll)
			}
			if got, why := c.PerGPUTypes(); got != tc.typed {
				t.Errorf("PerGPUTypes = %v (%s), want %v", got, why, tc.typed)
			}
			if got := c.CheckSteering(FirstFit) == nil; got != tc.firstFit {
				t.Errorf("first-fit possible = %v, want %v", got, tc.firstFit)
			}
			if got := c.CheckSteering(Typed) == nil; got != tc.typedOK {
				t.Errorf("typed possible = %v, want %v", got, tc.typedOK)
			}
			if len(c.Nodes) != tc.nodes {
				t.Fatalf("%d nodes, want %d: %+v", len(c.Nodes), tc.nodes, c.Nodes)
			}
			got := c.Nodes[0].Gres
			if len(got) != len(tc.firstGres) {
				t.Fatalf("gres %+v, want %+v", got, tc.firstGres)
			}
			for i := range got {
				if got[i] != tc.firstGres[i] {
					t.Errorf("gres[%d] = %+v, want %+v", i, got[i], tc.firstGres[i])
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"bare word", "NodeName=a junk\n", "not KEY=VALUE"},
		{"bad count", "NodeName=a Gres=gpu:h200:x\n", "bad count"},
		{"too many fields", "NodeName=a Gres=gpu:a:b:1\n", "name[:type][:count]"},
		{"unterminated quote", `NodeName=a Feature="x` + "\n", "unterminated"},
		{"negative", "NodeName=a Gres=gpu:-1\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tc.text))
			if tc.want == "" {
				// "gpu:-1" reads as type "-1", count 1: odd but harmless.
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 1") {
				t.Fatalf("got %v (%+v), want an error with %q and the line", err, c, tc.want)
			}
		})
	}
	c, err := Parse(strings.NewReader("PluginDir=/a:/b\njobsubmitplugins=lua,coscheml\nPartitionName=p Nodes=ALL\n"))
	if err != nil || c.Get("PluginDir") != "/a:/b" || c.Get("JobSubmitPlugins") != "lua,coscheml" || c.Get("PartitionName") != "" {
		t.Errorf("single-pair keys: %+v %v", c, err)
	}
	if err := (&Conf{}).CheckSteering("sideways"); err == nil {
		t.Error("an unknown mode must be an error")
	}
}

// TestLoadInclude reads files written to disk, with an Include relative to the
// main file's folder.
func TestLoadInclude(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nodes.conf"), []byte("NodeName=b Gres=gpu:g0:1,gpu:g1:1,shard:8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(main, []byte("SelectTypeParameters=CR_Core,LL_SHARED_GRES\nInclude nodes.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if !c.LeastLoadedSharedGres() || len(c.Nodes) != 1 || c.Nodes[0].Names != "b" {
		t.Fatalf("loaded %+v", c)
	}
	if ok, why := c.PerGPUTypes(); !ok {
		t.Fatalf("typed node from the included file not seen: %s", why)
	}
	// An Include of itself ends at the bound, with an error.
	loop := filepath.Join(dir, "loop.conf")
	if err := os.WriteFile(loop, []byte("Include loop.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(loop); err == nil || !strings.Contains(err.Error(), "included files") {
		t.Fatalf("self-include: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.conf")); err == nil {
		t.Fatal("a missing file must be an error")
	}
}

func TestGresConf(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		affinity   bool
	}{
		{"even spread", "NodeName=n[1-4] Name=gpu Type=h200 File=/dev/nvidia[0-3]\nNodeName=n[1-4] Name=shard Count=16\n", false},
		{"cores", "NodeName=n1 Name=gpu Type=h200 File=/dev/nvidia0 Cores=0-3\n", true},
		{"old CPUs", "Name=gpu File=/dev/nvidia0 CPUs=0-7\n", true},
		{"autodetect", "AutoDetect=nvml\nName=shard Count=16\n", true},
		{"autodetect off", "AutoDetect=off\nName=gpu File=/dev/nvidia0\n", false},
		{"cores on another gres", "Name=nic File=/dev/ib0 Cores=0-3\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(plain))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.AddGresConf(strings.NewReader(tc.text), "gres.conf"); err != nil {
				t.Fatal(err)
			}
			if (c.GPUAffinity != "") != tc.affinity {
				t.Fatalf("GPUAffinity = %q, want affinity %v", c.GPUAffinity, tc.affinity)
			}
			// First-fit fails with core binding (measured from 22.05.8 to 26.05.3).
			if got := c.CheckSteering(FirstFit) == nil; got != !tc.affinity {
				t.Errorf("first-fit possible = %v", got)
			}
		})
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte(plain), 0o644)
	os.WriteFile(filepath.Join(dir, "gres.conf"), []byte("Name=gpu File=/dev/nvidia0 Cores=0-3\n"), 0o644)
	c, err := LoadWithGres(filepath.Join(dir, "slurm.conf"))
	if err != nil || !strings.Contains(c.GPUAffinity, "gres.conf line 1: Cores=0-3") {
		t.Fatalf("LoadWithGres: %+v %v", c, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{plain, typed, "NodeName=a Gres=gpu:a100:2(S:0-1),shard:1K\n", `A="b`, "Include x\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(strings.NewReader(s))
		if err != nil {
			return
		}
		// Whatever parsed answers every question without panicking.
		c.LeastLoadedSharedGres()
		c.PerGPUTypes()
		_ = c.AddGresConf(strings.NewReader(s), "gres.conf")
		_ = c.CheckSteering(FirstFit)
		_ = c.CheckSteering(Typed)
		for _, n := range c.Nodes {
			for _, g := range n.Gres {
				if g.Count < 0 {
					t.Fatalf("negative count %+v", g)
				}
			}
		}
	})
}

// TestAutoSteering: shard_pinning auto is typed only where every shard node names
// its GPUs <prefix><index>, else first-fit with the reason.
func TestAutoSteering(t *testing.T) {
	perGPUShards := "NodeName=a Name=shard Count=4 File=/dev/nvidia0\nNodeName=a Name=shard Count=4 File=/dev/nvidia1\n"
	for _, tc := range []struct {
		name, text, prefix, want, why string
		gres                          *string // gres.conf; nil: per-GPU shard lines
	}{
		{"install.md layout", "NodeName=n[1-4] Gres=gpu:g0:1,gpu:g1:1,gpu:g2:1,gpu:g3:1,shard:16\n", "g", Typed, "", nil},
		{"order in the line does not matter", "NodeName=a Gres=gpu:g1:1,gpu:g0:1,shard:8\n", "g", Typed, "", nil},
		{"another prefix", "NodeName=a Gres=gpu:h200_0:1,gpu:h200_1:1,shard:8\n", "h200_", Typed, "", nil},
		{"a node without shards is not looked at", "NodeName=a Gres=gpu:g0:1,shard:4\nNodeName=b Gres=gpu:a100:4\n", "g", Typed, "", nil},
		{"one model type", "NodeName=a Gres=gpu:h200:4,shard:16\n", "g", FirstFit, "counts 4 GPUs under one type", nil},
		{"untyped", "NodeName=a Gres=gpu:4,shard:16\n", "g", FirstFit, "untyped gpu entry", nil},
		{"per-GPU types, other names", "NodeName=a Gres=gpu:a:1,gpu:b:1,shard:8\n", "g", FirstFit, `GPU type "a" is not one of g0 to g1`, nil},
		{"per-GPU types, an index skipped", "NodeName=a Gres=gpu:g0:1,gpu:g2:1,shard:8\n", "g", FirstFit, `GPU type "g2" is not one of g0 to g1`, nil},
		{"prefix of another", "NodeName=a Gres=gpu:g0:1,gpu:g1:1,shard:8\n", "gpu", FirstFit, "is not one of gpu0 to gpu1", nil},
		{"no shards anywhere", "NodeName=a Gres=gpu:g0:1\n", "g", FirstFit, "no NodeName line has both GPUs and shards", nil},
		{"no gres.conf", "NodeName=a Gres=gpu:g0:1,gpu:g1:1,shard:8\n", "g", FirstFit, "no gres.conf", ptr("")},
		{"shards spread by Count alone", "NodeName=a Gres=gpu:g0:1,gpu:g1:1,shard:8\n", "g", FirstFit, "gres.conf line 2: a shard line without File=",
			ptr("NodeName=a Name=gpu Type=g0 File=/dev/nvidia0\nNodeName=a Name=shard Count=8\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			gres := perGPUShards
			if tc.gres != nil {
				gres = *tc.gres
			}
			if gres != "" {
				if err := c.AddGresConf(strings.NewReader(gres), "gres.conf"); err != nil {
					t.Fatal(err)
				}
			}
			mode, why := c.AutoSteering(tc.prefix)
			if mode != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Fatalf("AutoSteering(%q) = %s (%q), want %s (%q)", tc.prefix, mode, why, tc.want, tc.why)
			}
			if mode == Typed && c.CheckSteering(Typed) != nil {
				t.Fatalf("auto chose typed where CheckSteering refuses it: %v", c.CheckSteering(Typed))
			}
		})
	}
}

// TestShippedExampleIsTyped: the slurm.conf snippet the install guide points to
// gets exact pinning from the default shard_pinning (auto).
func TestShippedExampleIsTyped(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "slurm", "slurm.conf.example"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("..", "..", "slurm", "gres.conf.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.AddGresConf(f, "gres.conf.example"); err != nil {
		t.Fatal(err)
	}
	if mode, why := c.AutoSteering("g"); mode != Typed {
		t.Fatalf("slurm/*.example: auto resolves to %s (%s), want typed", mode, why)
	}
	if ok, why := c.MultiGPUShards("g"); !ok {
		t.Fatalf("slurm/*.example: several-GPU jobs cannot share: %s", why)
	}
}

// TestMultiGPUShards: several-GPU sharing needs the typed layout with the GPU's
// Type on every shard line of gres.conf and every shard entry of slurm.conf.
func TestMultiGPUShards(t *testing.T) {
	typedLines := "NodeName=a Name=shard Type=g0 Count=4 File=/dev/nvidia0\nNodeName=a Name=shard Type=g1 Count=4 File=/dev/nvidia1\n"
	untypedLines := "NodeName=a Name=shard Count=4 File=/dev/nvidia0\nNodeName=a Name=shard Count=4 File=/dev/nvidia1\n"
	for _, tc := range []struct {
		name, conf, gres string
		ok               bool
		why              string
	}{
		{"typed shard lines and entries", "NodeName=a Gres=gpu:g0:1,gpu:g1:1,shard:g0:4,shard:g1:4\n", typedLines, true, ""},
		{"untyped shard lines (the earlier layout)", "NodeName=a Gres=gpu:g0:1,gpu:g1:1,shard:8\n", untypedLines, false, "gres.conf line 1: a shard line without Type="},
		{"typed lines, untyped slurm.conf entry", "NodeName=a Gres=gpu:g0:1,gpu:g1:1,shard:8\n", typedLines, false, "untyped shard entry shard:8"},
		{"first-fit layout", "NodeName=a Gres=gpu:h200:2,shard:8\n", typedLines, false, "counts 2 GPUs under one type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.AddGresConf(strings.NewReader(tc.gres), "gres.conf"); err != nil {
				t.Fatal(err)
			}
			ok, why := c.MultiGPUShards("g")
			if ok != tc.ok || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Fatalf("MultiGPUShards = %v (%q), want %v (%q)", ok, why, tc.ok, tc.why)
			}
		})
	}
}

func ptr(s string) *string { return &s }
