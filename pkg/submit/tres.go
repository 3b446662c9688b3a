// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// GresRequest is the GPU part of a job's tres_per_node.
//
// Slurm 22.05 writes GRES in tres_per_node as "gres:gpu:2" (typed: "gres:gpu:h200:2");
// 23.11 and later as "gres/gpu:2". Both are read, and a rewrite keeps the form the
// job came with, so the Go side needs no knowledge of the Slurm version.
type GresRequest struct {
	GPUs    int    // whole GPUs asked for (gpu entries)
	Shards  int    // shards asked for (shard entries)
	Type    string // the GPU or shard Type asked for (gpu:a100:1), "" when untyped
	tres    string // the request as read
	gresAt  int    // byte offset of the gpu/shard entry in tres (-1: none)
	gresEnd int    // and of its end
	prefix  string // "gres:" or "gres/"
	// Types are the shard Types of a request of K shards on each of several
	// typed GPUs, written as adjacent entries (gres/shard:g0:2,gres/shard:g3:2:
	// the plugin's own pin of a several-GPU job); Shards is then K, Type the
	// first, and gresAt..gresEnd spans them all.
	Types []string
}

// ParseTres reads tres_per_node. Entries other than gpu and shard are kept as they
// are. More than one gpu/shard entry, or both kinds, is an error (not ours to
// untangle: the job is left unchanged).
func ParseTres(tres string) (GresRequest, error) {
	g := GresRequest{gresAt: -1}
	if tres == "" {
		return g, nil
	}
	if len(tres) > 1024 {
		return g, fmt.Errorf("tres_per_node of %d characters", len(tres))
	}
	// Entry by entry in place (no split: this runs for every job on
	// slurmctld's submit path).
	g.tres = tres
	for at, more := 0, true; more; {
		var e string
		e, _, more = strings.Cut(tres[at:], ",")
		i := at
		at += len(e) + 1
		var prefix, rest string
		switch {
		case strings.HasPrefix(e, "gres:"):
			prefix, rest = "gres:", e[5:]
		case strings.HasPrefix(e, "gres/"):
			prefix, rest = "gres/", e[5:]
		default:
			continue
		}
		// name[:type][:count], read in place (no split: this runs in every
		// decision on slurmctld's submit path).
		fields := strings.Count(rest, ":") + 1
		name, _, _ := strings.Cut(rest, ":")
		if name != "gpu" && name != "shard" {
			continue
		}
		count, typ := 1, ""
		switch fields {
		case 1:
		case 2, 3:
			lastAt := strings.LastIndexByte(rest, ':')
			last := rest[lastAt+1:]
			n, err := strconv.Atoi(last)
			switch {
			case err == nil:
				count = n
				if fields == 3 {
					typ = rest[len(name)+1 : lastAt]
				}
			case fields == 3:
				return g, fmt.Errorf("tres_per_node entry %q: bad count", profile.Sanitize(e))
			default:
				typ = last // gpu:a100 is one GPU of Type a100
			}
		default:
			return g, fmt.Errorf("tres_per_node entry %q: too many fields", profile.Sanitize(e))
		}
		if count < 0 || count > 1<<16 {
			return g, fmt.Errorf("tres_per_node entry %q: count out of range", profile.Sanitize(e))
		}
		if g.gresAt >= 0 {
			// Several typed shard entries of one count, each next to the last:
			// K shards on each of several GPUs. Anything else is not ours.
			if name != "shard" || g.Shards == 0 || typ == "" || g.Type == "" || count != g.Shards || prefix != g.prefix || i != g.gresEnd+1 {
				return g, fmt.Errorf("tres_per_node %q: more than one gpu/shard entry", profile.Sanitize(tres))
			}
			if len(g.Types) == 0 {
				g.Types = []string{g.Type}
			}
			g.Types = append(g.Types, typ)
			g.gresEnd = i + len(e)
			continue
		}
		g.gresAt, g.gresEnd, g.prefix, g.Type = i, i+len(e), prefix, typ
		if name == "gpu" {
			g.GPUs = count
		} else {
			g.Shards = count
		}
	}
	return g, nil
}

// HasGPU reports whether the job asks for any GPU or shard.
func (g GresRequest) HasGPU() bool { return g.GPUs > 0 || g.Shards > 0 }

// WithShards returns tres_per_node with the gpu/shard entry replaced by a request
// for n shards (an untyped request: shards have no type in gres.conf).
func (g GresRequest) WithShards(n int) string {
	return g.with(g.prefix + "shard:" + strconv.Itoa(n))
}

// WithGPUs returns tres_per_node with the gpu/shard entry replaced by n whole GPUs.
func (g GresRequest) WithGPUs(n int) string {
	return g.with(g.prefix + "gpu:" + strconv.Itoa(n))
}

func (g GresRequest) with(entry string) string {
	if g.gresAt < 0 {
		return entry
	}
	return g.tres[:g.gresAt] + entry + g.tres[g.gresEnd:]
}

// WithTypedShards is the request with its GPU entry replaced by n shards of the
// GPU Type typ (shard_pinning: typed, where every GPU of a node has its own Type).
// The syntax follows the job's own entry ("gres:" from 22.05, "gres/" from 23.11),
// which Slurm wrote for the running release; without one it follows version, the
// running Slurm's SLURM_VERSION_NUMBER (0: unknown, the 22.05 form).
func (g GresRequest) WithTypedShards(typ string, n int, version uint32) string {
	prefix := g.prefix
	if prefix == "" {
		prefix = tresPrefix(version)
	}
	return g.with(prefix + "shard:" + typ + ":" + strconv.Itoa(n))
}

// WithTypedShardsOn is the request with its GPU entry replaced by n shards of
// each GPU Type in types: "gres/shard:g0:2,gres/shard:g3:2" (23.11 and later;
// "gres:" on 22.05), K shards on each named GPU of the node (measured on real
// daemons of 22.05.8, 23.11.11 and 26.05.3 with a shard Type on every gres.conf
// shard line).
func (g GresRequest) WithTypedShardsOn(types []string, n int, version uint32) string {
	prefix := g.prefix
	if prefix == "" {
		prefix = tresPrefix(version)
	}
	var b strings.Builder
	for i, typ := range types {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(prefix)
		b.WriteString("shard:")
		b.WriteString(typ)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(n))
	}
	return g.with(b.String())
}

// slurm2311 is SLURM_VERSION_NUMBER of 23.11.0: TRES strings read "gres/" from it on.
const slurm2311 = 23<<16 | 11<<8

// tresPrefix is the gres prefix of TRES strings of Slurm version v.
func tresPrefix(v uint32) string {
	if v >= slurm2311 {
		return "gres/"
	}
	return "gres:"
}

// TypeName is the Slurm GPU Type of GPU index i under shard_pinning: typed.
func TypeName(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// allPinTypes says whether every one of types is a per-GPU Type (isPinType),
// each named once.
func allPinTypes(prefix string, types []string) bool {
	for i, t := range types {
		if !isPinType(prefix, t) || slices.Contains(types[:i], t) {
			return false
		}
	}
	return true
}

// isPinType says whether typ is a per-GPU Type TypeName makes: the prefix and a
// GPU index. Such Types exist only for exact pinning, and a shard request of one
// is a placement the plugin wrote.
func isPinType(prefix, typ string) bool {
	idx, ok := strings.CutPrefix(typ, prefix)
	if !ok || idx == "" || len(idx) > 4 {
		return false
	}
	for _, c := range idx {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
