// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseTres(t *testing.T) {
	tests := []struct {
		in           string
		gpus, shards int
		typ          string
		shardsOut    string
		errHas       string
	}{
		{"", 0, 0, "", "", ""},
		{"gres:gpu:1", 1, 0, "", "gres:shard:3", ""},
		{"gres:gpu", 1, 0, "", "gres:shard:3", ""},
		{"gres:gpu:h200:2", 2, 0, "h200", "gres:shard:3", ""},
		{"gres:gpu:h200", 1, 0, "h200", "gres:shard:3", ""},
		{"gres/gpu:a100:1", 1, 0, "a100", "gres/shard:3", ""},
		{"gres/gpu:1", 1, 0, "", "gres/shard:3", ""},
		{"gres:shard:2", 0, 2, "", "gres:shard:3", ""},
		{"gres/shard:g1:2", 0, 2, "g1", "gres/shard:3", ""},
		{"cpu:2,gres:gpu:1,gres:nic:1", 1, 0, "", "cpu:2,gres:shard:3,gres:nic:1", ""},
		{"gres:nic:1", 0, 0, "", "", ""},
		{"gres:gpu:1,gres:shard:2", 0, 0, "", "", "more than one"},
		{"gres:gpu:a:b", 0, 0, "", "", "bad count"},
		{"gres:gpu:1:2:3", 0, 0, "", "", "too many"},
		{"gres:gpu:-1", 0, 0, "", "", "out of range"},
	}
	for _, tc := range tests {
		g, err := ParseTres(tc.in)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if g.GPUs != tc.gpus || g.Shards != tc.shards || g.Type != tc.typ {
			t.Errorf("%q: gpus=%d shards=%d type=%q", tc.in, g.GPUs, g.Shards, g.Type)
		}
		if tc.shardsOut != "" {
			if got := g.WithShards(3); got != tc.shardsOut {
				t.Errorf("%q: WithShards = %q, want %q", tc.in, got, tc.shardsOut)
			}
		}
	}
}

func FuzzParseTres(f *testing.F) {
	for _, s := range []string{"gres:gpu:1", "gres/gpu:h200:2", "cpu:1,gres:shard:4", "gres:gpu:1:2:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseTres(s)
		if err != nil || !g.HasGPU() {
			return
		}
		out := g.WithShards(2)
		g2, err := ParseTres(out)
		if err != nil || g2.Shards != 2 || g2.GPUs != 0 {
			t.Fatalf("%q -> %q -> %+v %v", s, out, g2, err)
		}
		if len(g.Types) > 1 {
			out = g.WithTypedShardsOn(g.Types, 3, 0)
			g3, err := ParseTres(out)
			if err != nil || g3.Shards != 3 || !slices.Equal(g3.Types, g.Types) {
				t.Fatalf("%q -> %q -> %+v %v", s, out, g3, err)
			}
		}
	})
}

// K shards on each of several typed GPUs: adjacent typed shard entries of one
// count are one request; anything else with two gpu/shard entries is not ours.
func TestParseTresSeveralTypes(t *testing.T) {
	for _, tc := range []struct {
		in    string
		types []string
		k     int
		err   bool
	}{
		{"gres/shard:g0:2,gres/shard:g3:2", []string{"g0", "g3"}, 2, false},
		{"cpu=2,gres:shard:g0:1,gres:shard:g1:1,gres:shard:g2:1,mem=4G", []string{"g0", "g1", "g2"}, 1, false},
		{"gres/shard:g0:2,gres/shard:g3:1", nil, 0, true},       // counts differ
		{"gres/shard:g0:2,gres/shard:2", nil, 0, true},          // one untyped
		{"gres/shard:g0:2,cpu=1,gres/shard:g3:2", nil, 0, true}, // not adjacent
		{"gres/gpu:g0:1,gres/gpu:g3:1", nil, 0, true},           // GPUs, not shards
		{"gres/shard:g0:2,gres:shard:g3:2", nil, 0, true},       // two syntaxes
	} {
		g, err := ParseTres(tc.in)
		if (err != nil) != tc.err || (!tc.err && (!slices.Equal(g.Types, tc.types) || g.Shards != tc.k)) {
			t.Errorf("ParseTres(%q) = %+v, %v", tc.in, g, err)
			continue
		}
		if !tc.err {
			if out := g.WithTypedShardsOn([]string{"g5", "g6"}, 3, 0); !strings.Contains(out, "shard:g5:3,") || strings.Contains(out, "g0") {
				t.Errorf("%q rewritten to %q", tc.in, out)
			}
		}
	}
}

func TestWithTypedShards(t *testing.T) {
	for _, tc := range []struct {
		in      string
		version uint32
		want    string
	}{
		{"gres:gpu:1", 0, "gres:shard:g2:3"},
		{"gres/gpu:1", 0, "gres/shard:g2:3"},               // the job's syntax wins
		{"gres:shard:2", 25<<16 | 5<<8, "gres:shard:g2:3"}, // also over the version
		{"cpu=2,gres/gpu:1,mem=4G", 0, "cpu=2,gres/shard:g2:3,mem=4G"},
		{"", 22<<16 | 5<<8, "gres:shard:g2:3"}, // no entry: the release's syntax
		{"", 23<<16 | 11<<8, "gres/shard:g2:3"},
		{"", 0, "gres:shard:g2:3"}, // unknown release: 22.05's
	} {
		g, err := ParseTres(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := g.WithTypedShards(TypeName("g", 2), 3, tc.version); got != tc.want {
			t.Errorf("%q (version %#x): %q, want %q", tc.in, tc.version, got, tc.want)
		}
	}
}

// FuzzTresFields holds the in-place reading of a gpu/shard entry's fields to
// the strings.Split reading it replaced.
func FuzzTresFields(f *testing.F) {
	for _, s := range []string{"gres:gpu:1", "gres/gpu:h200:2", "gres:shard:a:b", "gres:gpu::", "gres/gpu:1:2:3", "gres:gpu"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, ",") || len(s) > 1024 || !strings.HasPrefix(s, "gres:") && !strings.HasPrefix(s, "gres/") {
			return
		}
		parts := strings.Split(s[5:], ":")
		g, err := ParseTres(s)
		if parts[0] != "gpu" && parts[0] != "shard" {
			if err != nil || g.HasGPU() {
				t.Fatalf("%q: not a gpu/shard entry, got %+v %v", s, g, err)
			}
			return
		}
		count, typ, bad := 1, "", false
		switch len(parts) {
		case 1:
		case 2, 3:
			n, cerr := strconv.Atoi(parts[len(parts)-1])
			switch {
			case cerr == nil:
				count = n
				if len(parts) == 3 {
					typ = parts[1]
				}
			case len(parts) == 3:
				bad = true
			default:
				typ = parts[1]
			}
		default:
			bad = true
		}
		bad = bad || count < 0 || count > 1<<16
		if bad != (err != nil) {
			t.Fatalf("%q: error %v, want error %v", s, err, bad)
		}
		if !bad && (g.Type != typ || g.GPUs+g.Shards != count) {
			t.Fatalf("%q: %+v, want type %q count %d", s, g, typ, count)
		}
	})
}

// FuzzTresRewrite holds the in-place rewrites (with, without, adopt) to the
// split-and-join definitions they replaced.
func FuzzTresRewrite(f *testing.F) {
	for _, s := range [][2]string{{"cpu:1,gres:gpu:1,mem:2", "gres/gpu:2"}, {"gres:gpu:1", ""}, {"a,,gres/shard:2,", "x,gres:gpu:1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		g, err := ParseTres(s)
		if err != nil || g.gresAt < 0 {
			return
		}
		entries := strings.Split(s, ",")
		at := strings.Count(s[:g.gresAt], ",")
		repl := slices.Clone(entries)
		repl[at] = "NEW"
		if got, want := g.with("NEW"), strings.Join(repl, ","); got != want {
			t.Fatalf("%q: with = %q, want %q", s, got, want)
		}
		if got, want := g.without(), strings.Join(slices.Delete(slices.Clone(entries), at, at+1), ","); got != want {
			t.Fatalf("%q: without = %q, want %q", s, got, want)
		}
		o, err := ParseTres(other)
		if err != nil {
			return
		}
		var base []string
		if other != "" {
			base = strings.Split(other, ",")
		}
		n := o.adopt(g)
		if got, want := n.with("NEW"), strings.Join(append(base, "NEW"), ","); got != want {
			t.Fatalf("%q adopt %q: %q, want %q", other, s, got, want)
		}
	})
}
