// SPDX-License-Identifier: Apache-2.0

package docblocks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	guide := strings.Join([]string{
		"# Guide",    // 1
		"",           // 2
		"## Install", // 3
		"<!-- doctest: skip: installs packages -->", // 4
		"```sh",                           // 5
		"apt install ./x.deb",             // 6
		"```",                             // 7
		"```yaml",                         // 8
		"a: 1",                            // 9
		"```",                             // 10
		"### Check",                       // 11
		"<!-- doctest: expect: shard -->", // 12
		"```sh",                           // 13
		"scontrol show job 1",             // 14
		"# ## not a heading",              // 15
		"```",                             // 16
		"## Other",                        // 17
		"```bash",                         // 18
		"echo other",                      // 19
		"```",                             // 20
	}, "\n")
	all := []Block{
		{Line: 5, Lang: "sh", Text: "apt install ./x.deb\n", Skip: "installs packages"},
		{Line: 8, Lang: "yaml", Text: "a: 1\n"},
		{Line: 13, Lang: "sh", Text: "scontrol show job 1\n# ## not a heading\n", Expect: "shard"},
		{Line: 18, Lang: "bash", Text: "echo other\n"},
	}
	for _, tc := range []struct {
		name, section string
		want          []Block
	}{
		{"whole file", "", all},
		{"a section and its subsections", "Install", all[:3]},
		{"a subsection", "Check", all[2:3]},
		{"the last section", "Other", all[3:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Extract(guide, tc.section)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Extract(%q):\n got %+v\nwant %+v", tc.section, got, tc.want)
			}
		})
	}
	run := map[int]bool{}
	for _, b := range all {
		run[b.Line] = b.Run()
	}
	if want := map[int]bool{5: false, 8: false, 13: true, 18: true}; !reflect.DeepEqual(run, want) {
		t.Errorf("Run() by line = %v, want %v", run, want)
	}
}

func TestExtractErrors(t *testing.T) {
	for _, tc := range []struct{ name, md, section, want string }{
		{"skip without a reason", "<!-- doctest: skip: -->\n```sh\nx\n```\n", "", "needs its text"},
		{"unknown marker", "<!-- doctest: maybe -->\n```sh\nx\n```\n", "", "want \"skip: REASON\""},
		{"marker above prose", "<!-- doctest: skip: r -->\ntext\n```sh\nx\n```\n", "", "not directly above a code fence"},
		{"marker at the end", "```sh\nx\n```\n<!-- doctest: skip: r -->", "", "not directly above a code fence"},
		{"unclosed fence", "# A\n```sh\nx\n", "", "line 2: code fence never closed"},
		{"missing section", "# A\n```sh\nx\n```\n", "Quick start", `no heading "Quick start"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Extract(tc.md, tc.section)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Extract: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestGuidesParse checks the files the docs test runs without starting a
// cluster: their markers parse, every skip gives its reason, and the blocks the
// docs test runs are there.
func TestGuidesParse(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, g := range Guides {
		b, err := os.ReadFile(filepath.Join(root, g.File))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Extract(string(b), g.Section)
		if err != nil {
			t.Fatalf("%s: %v", g.File, err)
		}
		runs := 0
		for _, bl := range blocks {
			if !bl.Run() {
				continue
			}
			runs++
			// Before substitution only commands count: paths are replaced
			// by the docs test.
			if why := HostChange(bl.Text); strings.HasPrefix(why, "runs ") {
				t.Errorf("%s:%d: the block %s: mark it skipped with the reason", g.File, bl.Line, why)
			}
		}
		if runs == 0 {
			t.Errorf("%s (section %q): no shell block is run: the docs test would test nothing", g.File, g.Section)
		}
		t.Logf("%s: %d blocks, %d run", g.File, len(blocks), runs)
	}
}

func TestHostChange(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{"coscheml profile list\n", ""},
		{"make programs\nbin/coscheml model info\n", ""},
		{"scontrol show config | grep PluginDir\n", ""},
		{"systemctl restart slurmctld\n", `runs "systemctl"`},
		{"x=1; sudo make install PREFIX=/usr/local\n", `runs "sudo"`},
		{"make install PREFIX=/opt\n", `runs "make install"`},
		{"make clean\n", `runs "make clean"`},
		{"apt install ./x.deb\n", `runs "apt"`},
		{"(dpkg -i x.deb)\n", `runs "(dpkg"`},
		{"grep x /var/log/slurm/slurmctld.log\n", "reaches /var/log/slurm of the host"},
		{"coscheml --config /etc/coscheml/coscheml.yaml model info\n", "reaches /etc/coscheml of the host"},
		{"install -m 0755 a /usr/local/bin\n", "reaches /usr/local/ of the host"},
		{"echo aptitude-free\n", ""},
	} {
		got := HostChange(tc.script)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("HostChange(%q) = %q, want %q", tc.script, got, tc.want)
		}
	}
}
