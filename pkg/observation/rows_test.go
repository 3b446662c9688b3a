// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A torn or bad row costs only itself: the node's other rows still reach training.
func TestReadDirSkipsBadRowsOneByOne(t *testing.T) {
	good := []Observation{{Tag: "a", Speed: 0.9, UID: "1000"}, {Tag: "b", CoTags: []string{"a"}, Speed: 0.7}, {Tag: "c", Speed: 1}}
	tests := []struct {
		name    string
		insert  []string // bad lines written between the good rows
		wantBad int
		wantMsg string
	}{
		{"torn row", []string{"b,train,,0."}, 1, "line 3"},
		{"unbalanced quote", []string{`x,train,"a+b,0.5`}, 1, "line 3"},
		{"too many fields", []string{"x,,,0.5,,,,,,,,"}, 1, "line 3"},
		{"speed below the sane bound", []string{"x,,,0.0014,epilog,1,n1,,"}, 1, "sane bounds"},
		{"speed above the sane bound", []string{"x,,,1.9,epilog,1,n1,,"}, 1, "sane bounds"},
		{"bad uid", []string{"x,,,0.5,,,,,-1", "x,,,0.5,,,,,4294967295"}, 2, "uid"},
		{"overlong line", []string{strings.Repeat("x", maxLineBytes+10)}, 1, "longer than"},
		{"nothing bad", nil, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "n1.csv")
			if err := AppendFile(path, good[0]); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.insert {
				f.WriteString(l + "\n")
			}
			f.Close()
			if err := AppendFile(path, good[1:]...); err != nil {
				t.Fatal(err)
			}
			obs, problems := ReadDir(dir)
			if len(obs) != len(good) {
				t.Fatalf("%d observations read back, want the %d good ones (problems %v)", len(obs), len(good), problems)
			}
			for i := range good {
				if !equalObs(obs[i], good[i]) {
					t.Errorf("row %d: %+v, want %+v", i, obs[i], good[i])
				}
			}
			if tc.wantBad == 0 {
				if len(problems) != 0 {
					t.Errorf("problems %v", problems)
				}
				return
			}
			var bre *BadRowsError
			if len(problems) != 1 || !errors.As(problems[0], &bre) {
				t.Fatalf("problems %v, want one *BadRowsError", problems)
			}
			if bre.Count != tc.wantBad || bre.Path != path || !strings.Contains(bre.Error(), tc.wantMsg) {
				t.Errorf("bad rows: %v (count %d), want %d naming %q", bre, bre.Count, tc.wantBad, tc.wantMsg)
			}
		})
	}
}

// Files written before the uid column stay readable and appendable.
func TestAppendFileKeepsOldLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.csv")
	os.WriteFile(path, []byte("tag,class,co_tags,speed,source,job_id,node,when\na,,,1,,,,\n"), 0o644)
	if err := AppendFile(path, Observation{Tag: "b", Speed: 0.5, UID: "7"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "\nb,,,0.5,,,,\n") {
		t.Errorf("row not in the file's own layout:\n%s", b)
	}
	obs, err := ReadFileRows(path)
	if err != nil || len(obs) != 2 || obs[1].UID != "" {
		t.Errorf("read back %+v, %v", obs, err)
	}
}

func TestValidateUID(t *testing.T) {
	for _, tc := range []struct {
		uid string
		ok  bool
	}{{"", true}, {"0", true}, {"1000", true}, {"4294967294", true}, {"4294967295", false}, {"01", false},
		{"-1", false}, {"+1", false}, {"1e3", false}, {"alice", false}, {"99999999999", false}} {
		if err := ValidateUID(tc.uid); (err == nil) != tc.ok {
			t.Errorf("ValidateUID(%q) = %v, want ok %v", tc.uid, err, tc.ok)
		}
	}
}
