// SPDX-License-Identifier: Apache-2.0

package comment

import (
	"slices"
	"strings"
	"testing"
)

func TestParseComment(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		present bool
		tag     string
		class   string
		errHas  string
		id      string
		shards  int
	}{
		{"empty", "", false, "", "", "", "", 0},
		{"free text", "my run 3", false, "", "", "", "", 0},
		{"tag", "coscheml:app=resnet18-bs32", true, "resnet18-bs32", "", "", "", 0},
		{"tag class", "coscheml:app=lammps,class=hpc", true, "lammps", "hpc", "", "", 0},
		{"class first", "coscheml:class=infer,app=bert", true, "bert", "infer", "", "", 0},
		{"embedded", "nightly run coscheml:app=bert ticket-42", true, "bert", "", "", "", 0},
		{"with token", "coscheml:app=bert coscheml-id=abc-1:2", true, "bert", "", "", "abc-1", 2},
		{"token only", "coscheml-id=abc-1:4", false, "", "", "", "abc-1", 4},
		{"bad class", "coscheml:app=bert,class=gpu", true, "", "", "invalid class", "", 0},
		{"unknown key", "coscheml:app=bert,gpus=2", true, "", "", `unknown key "gpus"`, "", 0},
		{"dup key", "coscheml:app=a,app=b", true, "", "", "given twice", "", 0},
		{"no app", "coscheml:class=hpc", true, "", "", "app=<tag> missing", "", 0},
		{"no value", "coscheml:app", true, "", "", "not key=value", "", 0},
		{"dotdot", "coscheml:app=../etc/passwd", true, "", "", "invalid tag", "", 0},
		{"shell", "coscheml:app=x;rm", true, "", "", "invalid tag", "", 0},
		{"backtick", "coscheml:app=`id`", true, "", "", "invalid tag", "", 0},
		{"dollar", "coscheml:app=$(id)", true, "", "", "invalid tag", "", 0},
		{"upper", "coscheml:app=BERT", true, "", "", "invalid tag", "", 0},
		{"two", "coscheml:app=a coscheml:app=b", true, "", "", "more than one", "", 0},
		{"typo space", "coscheml app=a", true, "", "", "malformed coscheml directive", "", 0},
		{"typo case", "CoScheML:app=a", true, "", "", "malformed", "", 0},
		{"long", "coscheml:app=" + strings.Repeat("a", 10000), true, "", "", "longer than 1024", "", 0},
		{"long tag", "coscheml:app=" + strings.Repeat("a", 65), true, "", "", "longer than 64", "", 0},
		{"bad token", "coscheml:app=a coscheml-id=../x:1", true, "", "", "malformed coscheml-id", "", 0},
		{"empty tag", "coscheml:app=", true, "", "", "empty", "", 0},
		// The whole value a space cut short is quoted, not its first word.
		{"tag with space", "coscheml:app=ResNet 18!", true, "", "", `invalid tag "ResNet 18!": use a-z`, "", 0},
		{"tag with space, class first", "coscheml:class=train,app=My Model coscheml-id=a-1:2", true, "", "", `invalid tag "My Model"`, "", 0},
		{"bad tag, one word", "coscheml:app=ResNet18", true, "", "", `invalid tag "ResNet18"`, "", 0},
	}
	for _, tc := range tests {
		d := ParseComment(tc.in)
		if d.Present != tc.present {
			t.Errorf("%s: present = %v, want %v", tc.name, d.Present, tc.present)
		}
		if tc.errHas != "" {
			if d.Err == nil || !strings.Contains(d.Err.Error(), tc.errHas) {
				t.Errorf("%s: err = %v, want %q", tc.name, d.Err, tc.errHas)
			}
			continue
		}
		if d.Err != nil {
			t.Errorf("%s: unexpected error %v", tc.name, d.Err)
			continue
		}
		if d.Tag != tc.tag || string(d.Class) != tc.class || d.DecisionID != tc.id || d.Shards != tc.shards {
			t.Errorf("%s: got %+v", tc.name, d)
		}
	}
}

func TestErrorsAreSafeToPrint(t *testing.T) {
	for _, in := range []string{"coscheml:app=\x1b[31mred", "coscheml:app=a\x07b", "coscheml:ap\"p=x", "coscheml:app=" + strings.Repeat("é", 300)} {
		d := ParseComment(in)
		if d.Err == nil {
			t.Fatalf("%q: no error", in)
		}
		for _, c := range []byte(d.Err.Error()) {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("%q: error %q has unprintable byte %#x", in, d.Err, c)
			}
		}
	}
}

func TestWithToken(t *testing.T) {
	got := WithToken("run coscheml:app=a coscheml-id=old-1:2", FormatToken("new-2", 4))
	if want := "run coscheml:app=a coscheml-id=new-2:4"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	d := ParseComment(got)
	if d.Err != nil || d.DecisionID != "new-2" || d.Shards != 4 || d.Tag != "a" {
		t.Fatalf("re-parse: %+v", d)
	}
}

// TestNearMiss: a misspelt prefix is found in an untagged comment (the job runs
// untagged, with a warning), free text with colons is not.
func TestNearMiss(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"cosceml:app=resnet18", "cosceml:app=resnet18"},
		{"coschemel:app=resnet18,class=train", "coschemel:app=resnet18,class=train"},
		{"nightly cosheml:app=x ticket", "cosheml:app=x"},
		{"COSCEHML:app=x", "COSCEHML:app=x"}, // two letters swapped, upper case
		{"costume:app=x", ""},
		{"run 3: see ticket:42 http://x", ""},
		{"schema:app=x", ""},
		{"scheml:app=x", "scheml:app=x"}, // two letters dropped
		{"xcoscheml2:app", ""},
		{"", ""},
		{"coscheml:app=x", ""}, // a directive, not a near miss
	} {
		if got := ParseComment(tc.in).NearMiss; got != tc.want {
			t.Errorf("%q: NearMiss %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzParseComment(f *testing.F) {
	for _, s := range []string{"coscheml:app=a,class=hpc", "x coscheml:app=b coscheml-id=a-1:2", "coscheml:app=../x", "CoScheML", "coscheml-id=:", "coscheml:app=c coscheml-id=a-1:2:0.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := ParseComment(s)
		if d.NearMiss != "" && (d.Present || !strings.Contains(s, d.NearMiss) || strings.ContainsAny(d.NearMiss, " \t\n")) {
			t.Fatalf("%q: near miss %q", s, d.NearMiss)
		}
		if d.Err != nil {
			for _, c := range []byte(d.Err.Error()) {
				if c < 0x20 || c > 0x7e {
					t.Fatalf("unprintable error for %q: %q", s, d.Err)
				}
			}
			return
		}
		if d.Present && d.Tag == "" {
			t.Fatalf("%q: present without tag", s)
		}
		if d.Tag != "" && (strings.Contains(d.Tag, "..") || strings.ContainsAny(d.Tag, "/;$` \t")) {
			t.Fatalf("%q: unsafe tag %q accepted", s, d.Tag)
		}
		if d.GPUs != nil {
			seen := map[int]bool{}
			for _, g := range d.GPUs {
				if g < 0 || g >= maxTokenGPUIndex || seen[g] {
					t.Fatalf("%q: GPU list %v accepted", s, d.GPUs)
				}
				seen[g] = true
			}
			if len(d.GPUs) < 2 || len(d.GPUs) > maxTokenGPUs || d.DecisionID == "" {
				t.Fatalf("%q: GPU list %v accepted", s, d.GPUs)
			}
		}
	})
}

// FuzzWords holds the allocation-free word walk to strings.Fields, and
// WithToken to its definition (the words but old tokens, then tok, joined by
// single spaces).
func FuzzWords(f *testing.F) {
	for _, s := range []string{"", " a  b ", "x\u00a0y\u2003z", "a\tcoscheml-id=x-1:2 b", "\xff \x85\xc2\x85 q", "coscheml:app=a,class=hpc coscheml-id=a-1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got []string
		for rest := s; ; {
			var w string
			if w, rest = nextWord(rest); w == "" {
				break
			}
			got = append(got, w)
		}
		want := strings.Fields(s)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: words %q, strings.Fields %q", s, got, want)
		}
		var kept []string
		for _, w := range want {
			if !strings.HasPrefix(w, tokenPrefix) {
				kept = append(kept, w)
			}
		}
		tok := FormatToken("a-1", 2)
		if got, want := WithToken(s, tok), strings.Join(append(kept, tok), " "); got != want {
			t.Fatalf("WithToken(%q) = %q, want %q", s, got, want)
		}
	})
}

// FuzzContainsFold: the scan that jumps between the first letter's bytes finds
// exactly what strings.EqualFold at every offset finds.
func FuzzContainsFold(f *testing.F) {
	for _, s := range []string{"", "coscheml", "xCOSCHEML", "cccoscheml", "coschem", "Coſcheml", "c\xffoscheml", "ccccccc", strings.Repeat("Cx", 50) + "cOsChEmL"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := false
		for i := 0; i+len("coscheml") <= len(s); i++ {
			if strings.EqualFold(s[i:i+len("coscheml")], "coscheml") {
				want = true
				break
			}
		}
		if got := containsFold(s, "coscheml"); got != want {
			t.Fatalf("containsFold(%q) = %v, want %v", s, got, want)
		}
	})
}

// BenchmarkParseLongUntagged: a 1 MiB comment that does not mention coscheml
// (the scan for the word runs at every job_modify that sets a comment).
func BenchmarkParseLongUntagged(b *testing.B) {
	c := strings.Repeat("a comment ", 1<<20/10)
	b.SetBytes(int64(len(c)))
	for i := 0; i < b.N; i++ {
		if ParseComment(c).Present {
			b.Fatal("untagged comment read as tagged")
		}
	}
}

// A decision of several GPUs names them in its token; the list is strict.
func TestTokenGPUs(t *testing.T) {
	for _, tc := range []struct {
		tok    string
		shards int
		gpus   []int
		bad    bool
	}{
		{FormatTokenOn("ab-1", 2, []int{0, 3}), 2, []int{0, 3}, false},
		{FormatTokenOn("ab-1", 2, []int{5}), 2, nil, false}, // one GPU: no list
		{"coscheml-id=ab-1:2:0.1.2.3", 2, []int{0, 1, 2, 3}, false},
		{"coscheml-id=ab-1:2:0", 0, nil, true},   // a list of one
		{"coscheml-id=ab-1:2:0.0", 0, nil, true}, // twice
		{"coscheml-id=ab-1:2:0.", 0, nil, true},
		{"coscheml-id=ab-1:2:00.1", 0, nil, true},
		{"coscheml-id=ab-1:2:0.-1", 0, nil, true},
		{"coscheml-id=ab-1:2:0.1:3", 0, nil, true},
		{"coscheml-id=ab-1:02", 0, nil, true},
	} {
		d := ParseComment("coscheml:app=a " + tc.tok)
		if (d.Err != nil) != tc.bad || (!tc.bad && (d.Shards != tc.shards || !slices.Equal(d.GPUs, tc.gpus))) {
			t.Errorf("%s: %+v", tc.tok, d)
		}
	}
}
