// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestInterfaceVersionInDocs keeps the interface number the docs show equal to
// the one plugin-c/coscheml_abi.h defines: the header's #define as quoted in the
// C API section, and the plugin's load line in the install and troubleshooting
// guides (which an admin compares with slurmctld's log).
func TestInterfaceVersionInDocs(t *testing.T) {
	root := repoRoot(t)
	header, err := os.ReadFile(filepath.Join(root, "plugin-c", "coscheml_abi.h"))
	if err != nil {
		t.Fatal(err)
	}
	define := regexp.MustCompile(`(?m)^#define COSCHEML_ABI_VERSION (\d+)u`)
	m := define.FindSubmatch(header)
	if m == nil {
		t.Fatal("plugin-c/coscheml_abi.h defines no COSCHEML_ABI_VERSION")
	}
	want := string(m[1])
	for _, tc := range []struct {
		file string
		re   *regexp.Regexp
	}{
		{"docs/slurm-integration.md", define},
		{"docs/install.md", regexp.MustCompile(`job_submit/coscheml: loaded \S+ \(interface (\d+),`)},
		{"docs/troubleshooting.md", regexp.MustCompile(`speaks interface (\d+), as the plugin does`)},
	} {
		b, err := os.ReadFile(filepath.Join(root, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		all := tc.re.FindAllSubmatch(b, -1)
		if len(all) == 0 {
			t.Errorf("%s: no line matching %s", tc.file, tc.re)
		}
		for _, got := range all {
			if string(got[1]) != want {
				t.Errorf("%s: %q shows interface %s, plugin-c/coscheml_abi.h defines %s", tc.file, got[0], got[1], want)
			}
		}
	}
}
