package submit

import (
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
	})
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
