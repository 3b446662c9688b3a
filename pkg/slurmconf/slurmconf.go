// SPDX-License-Identifier: Apache-2.0

// Package slurmconf reads the parts of slurm.conf that decide whether coscheml
// can steer Slurm's GPU choice: SelectTypeParameters and the GRES of each
// NodeName line. It reads, never writes, and takes the file as outside input:
// bounded sizes, no panics, errors that name the line.
package slurmconf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Limits on what is read: slurm.conf is an admin's file, but a broken or hostile
// one must not make slurmctld's plugin allocate without bound.
const (
	maxFileBytes = 16 << 20
	maxLineBytes = 1 << 20
	maxIncludes  = 16 // Include depth and files per Load
)

// Conf is what slurmconf knows of one slurm.conf.
type Conf struct {
	// SelectTypeParameters as written, upper-cased, in order.
	SelectTypeParameters []string
	GresTypes            []string
	Nodes                []Node
	// GPUAffinity says why gres.conf binds GPUs to cores ("" when it does
	// not): a Cores=/CPUs= on a gpu or shard line, or AutoDetect (which reads the
	// binding from the driver). Set by AddGresConf.
	GPUAffinity string
	// GresRead: a gres.conf was read (AddGresConf). SharedShards names the
	// first shard line without File= ("" when none): its shards are spread over
	// the node's GPUs instead of each GPU's being on its own line, so they are
	// not known to carry their GPU's Type.
	GresRead     bool
	SharedShards string
	// UntypedShards names the first gres.conf shard line without Type= ("" when
	// every one has it): a request naming several shard Types is then
	// misallocated by Slurm (MultiGPUShards).
	UntypedShards string
	// Keys holds the other KEY=VALUE lines that are a single pair (PluginDir,
	// JobSubmitPlugins, SlurmUser, ...), by lower-cased key; the last one wins.
	Keys map[string]string
	// Partitions are the PartitionName lines (PartitionName=DEFAULT's Nodes=
	// filled into lines without their own), NodeSets the NodeSet lines' Nodes=
	// by name ("" for a NodeSet defined by Feature= only).
	Partitions []Partition
	NodeSets   map[string]string

	partDefault string // PartitionName=DEFAULT's Nodes= (the parser's state)
}

// Partition is one PartitionName line: its node list as written (host
// expressions, NodeSet names or ALL) and whether it is the default partition.
type Partition struct {
	Name    string
	Nodes   string
	Default bool
	Line    int
}

// Get returns a single-pair setting (case-insensitive key), "" when absent.
func (c *Conf) Get(key string) string { return c.Keys[strings.ToLower(key)] }

// Node is one NodeName line's GRES.
type Node struct {
	Names string // the NodeName value, a hostlist such as n[1-4]
	Gres  []Gres
	// Features: its Features= (or AvailableFeatures=), as listed.
	Features []string
	Line     int // line number in its file
}

// Gres is one entry of a Gres= list: gpu:h200:4, shard:16, gpu:g0:1.
type Gres struct {
	Name  string
	Type  string // "" when untyped
	Count int64
}

// HasSelectParam reports whether SelectTypeParameters holds p (case-insensitive).
func (c *Conf) HasSelectParam(p string) bool {
	for _, q := range c.SelectTypeParameters {
		if strings.EqualFold(q, p) {
			return true
		}
	}
	return false
}

// LeastLoadedSharedGres is SelectTypeParameters=LL_SHARED_GRES (Slurm 23.11+):
// Slurm gives a shard request the least-loaded GPU of the node, whatever the
// request's size, so the shard count cannot steer it.
func (c *Conf) LeastLoadedSharedGres() bool { return c.HasSelectParam("LL_SHARED_GRES") }

// PerGPUTypes reports whether every node that has shards gives each of its GPUs
// its own Type (gpu:g0:1,gpu:g1:1,...), so that a shard request naming a type
// names one GPU. It returns the reason when not.
func (c *Conf) PerGPUTypes() (bool, string) { return c.perGPUTypes("") }

// perGPUTypes is PerGPUTypes; with a prefix, each such node's Types must also be
// prefix followed by the GPU's index (prefix0 .. prefix<n-1>).
func (c *Conf) perGPUTypes(prefix string) (bool, string) {
	seen := false
	for _, n := range c.Nodes {
		var gpus, shards int64
		why := ""
		types := map[string]bool{}
		for _, g := range n.Gres {
			switch g.Name {
			case "gpu":
				gpus += g.Count
				switch {
				case why != "":
				case g.Type == "":
					why = fmt.Sprintf("NodeName=%s (line %d): untyped gpu entry", n.Names, n.Line)
				case g.Count != 1:
					why = fmt.Sprintf("NodeName=%s (line %d): gpu:%s:%d counts %d GPUs under one type", n.Names, n.Line, g.Type, g.Count, g.Count)
				case types[g.Type]:
					why = fmt.Sprintf("NodeName=%s (line %d): gpu type %s named twice", n.Names, n.Line, g.Type)
				}
				types[g.Type] = true
			case "shard":
				shards += g.Count
			}
		}
		if shards == 0 {
			continue // no shards: never placed by type, whatever its GPUs are called
		}
		if why != "" {
			return false, why
		}
		if gpus == 0 {
			return false, fmt.Sprintf("NodeName=%s (line %d): shards without gpu entries", n.Names, n.Line)
		}
		for _, g := range n.Gres {
			if prefix == "" || g.Name != "gpu" {
				continue
			}
			t := g.Type
			if i, err := strconv.Atoi(strings.TrimPrefix(t, prefix)); !strings.HasPrefix(t, prefix) || err != nil ||
				i < 0 || int64(i) >= gpus || prefix+strconv.Itoa(i) != t {
				return false, fmt.Sprintf("NodeName=%s (line %d): GPU type %s is not one of %s0 to %s%d (shard_type_prefix, then the GPU's index)",
					n.Names, n.Line, cut(t), prefix, prefix, gpus-1)
			}
		}
		seen = true
	}
	if !seen {
		return false, "no NodeName line has both GPUs and shards"
	}
	return true, ""
}

// AutoSteering is what shard_pinning auto resolves to on this configuration:
// Typed when every node with shards gives each of its GPUs its own Type, named
// prefix followed by the GPU's index (g0, g1, ...), and gres.conf puts each GPU's
// shards on a line of their own (File=): the layout docs/install.md sets up.
// Else FirstFit, with why typed was ruled out: a typed request Slurm cannot match
// would never start, where first-fit works on any gres.conf.
func (c *Conf) AutoSteering(prefix string) (mode, why string) {
	if ok, why := c.perGPUTypes(prefix); !ok {
		return FirstFit, why
	}
	if !c.GresRead {
		return FirstFit, "no gres.conf beside slurm.conf to check that each GPU's shards have a line of their own (File=)"
	}
	if c.SharedShards != "" {
		return FirstFit, c.SharedShards + " (each GPU's shards need their own line, File=/dev/nvidia<i>, to carry its Type)"
	}
	return Typed, ""
}

// MultiGPUShards says whether a job may take K shards on each of several named
// GPUs of a node (gres/shard:g0:K,gres/shard:g3:K): the typed layout
// (AutoSteering) with every gres.conf shard line carrying its GPU's Type
// (Name=shard Type=g0 Count=4 File=/dev/nvidia0) and every shard entry of
// slurm.conf typed (shard:g0:4,...). Measured on 22.05.8, 23.11.11 and 26.05.3:
// with untyped shard lines Slurm takes the types from the GPUs for single-type
// requests, but silently misallocates a request naming several (all its shards
// on one GPU) and later typed requests pend on idle GPUs. why says what rules
// it out.
func (c *Conf) MultiGPUShards(prefix string) (ok bool, why string) {
	if mode, why := c.AutoSteering(prefix); mode != Typed {
		return false, why
	}
	if c.UntypedShards != "" {
		return false, c.UntypedShards + " (several-GPU sharing needs Type=" + prefix + "<i> on every shard line: docs/install.md)"
	}
	for _, n := range c.Nodes {
		for _, g := range n.Gres {
			if g.Name == "shard" && g.Type == "" {
				return false, fmt.Sprintf("NodeName=%s (line %d): untyped shard entry shard:%d (several-GPU sharing needs shard:%s<i>:<count> per GPU)", n.Names, n.Line, g.Count, prefix)
			}
		}
	}
	return true, ""
}

// Load reads path and the files it Includes (relative names are taken from
// path's folder, as slurmctld does).
func Load(path string) (*Conf, error) {
	c := &Conf{}
	files := 0
	if err := c.load(path, 0, &files); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Conf) load(path string, depth int, files *int) error {
	*files++
	if depth > maxIncludes || *files > maxIncludes {
		return fmt.Errorf("%s: more than %d included files", path, maxIncludes)
	}
	f, err := safeopen.Regular(path, safeopen.FollowLinks) // read in slurmctld: never block on a FIFO
	if err != nil {
		return fmt.Errorf("reading slurm.conf: %w", err)
	}
	defer f.Close()
	includes, err := c.parse(io.LimitReader(f, maxFileBytes+1), path)
	if err != nil {
		return err
	}
	for _, inc := range includes {
		if !filepath.IsAbs(inc) {
			inc = filepath.Join(filepath.Dir(path), inc)
		}
		matches, err := filepath.Glob(inc)
		if err != nil || len(matches) == 0 {
			return fmt.Errorf("%s: Include %s: no such file", path, inc)
		}
		for _, m := range matches {
			if err := c.load(m, depth+1, files); err != nil {
				return err
			}
		}
	}
	return nil
}

// Parse reads one slurm.conf text (Include lines are not followed: see Load).
func Parse(r io.Reader) (*Conf, error) {
	c := &Conf{}
	if _, err := c.parse(io.LimitReader(r, maxFileBytes+1), "slurm.conf"); err != nil {
		return nil, err
	}
	return c, nil
}

// parse adds what name holds to c and returns its Include targets.
func (c *Conf) parse(r io.Reader, name string) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var includes []string
	total, lineNo := 0, 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		total += len(line) + 1
		if total > maxFileBytes {
			return nil, fmt.Errorf("%s: larger than %d bytes", name, maxFileBytes)
		}
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if k, v, ok := strings.Cut(line, " "); ok && strings.EqualFold(k, "include") {
			includes = append(includes, strings.TrimSpace(v))
			continue
		}
		kvs, err := splitPairs(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, lineNo, err)
		}
		if len(kvs) == 0 {
			continue
		}
		switch strings.ToLower(kvs[0][0]) {
		case "selecttypeparameters":
			c.SelectTypeParameters = nil
			for _, p := range strings.Split(kvs[0][1], ",") {
				if p = strings.TrimSpace(p); p != "" {
					c.SelectTypeParameters = append(c.SelectTypeParameters, strings.ToUpper(p))
				}
			}
		case "grestypes":
			c.GresTypes = nil
			for _, p := range strings.Split(kvs[0][1], ",") {
				if p = strings.TrimSpace(p); p != "" {
					c.GresTypes = append(c.GresTypes, strings.ToLower(p))
				}
			}
		default:
			if len(kvs) == 1 {
				if c.Keys == nil {
					c.Keys = map[string]string{}
				}
				c.Keys[strings.ToLower(kvs[0][0])] = kvs[0][1]
			}
		case "partitionname":
			c.addPartition(kvs, lineNo)
		case "nodeset":
			if c.NodeSets == nil {
				c.NodeSets = map[string]string{}
			}
			nodes := ""
			for _, kv := range kvs[1:] {
				if strings.EqualFold(kv[0], "nodes") {
					nodes = kv[1]
				}
			}
			c.NodeSets[kvs[0][1]] = nodes
		case "nodename":
			n := Node{Names: kvs[0][1], Line: lineNo}
			for _, kv := range kvs[1:] {
				if strings.EqualFold(kv[0], "features") || strings.EqualFold(kv[0], "availablefeatures") {
					n.Features = nil
					for _, f := range strings.Split(kv[1], ",") {
						if f = strings.TrimSpace(f); f != "" {
							n.Features = append(n.Features, f)
						}
					}
					continue
				}
				if !strings.EqualFold(kv[0], "gres") {
					continue
				}
				g, err := ParseGres(kv[1])
				if err != nil {
					return nil, fmt.Errorf("%s line %d: NodeName=%s: %w", name, lineNo, n.Names, err)
				}
				n.Gres = g
			}
			if strings.EqualFold(n.Names, "DEFAULT") {
				continue // defaults for later lines: not a node
			}
			c.Nodes = append(c.Nodes, n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s line %d: %w", name, lineNo+1, err)
	}
	return includes, nil
}

// addPartition records a PartitionName line; PartitionName=DEFAULT only sets the
// Nodes= of later lines that have none.
func (c *Conf) addPartition(kvs [][2]string, line int) {
	p := Partition{Name: kvs[0][1], Line: line}
	hasNodes := false
	for _, kv := range kvs[1:] {
		switch strings.ToLower(kv[0]) {
		case "nodes":
			p.Nodes, hasNodes = kv[1], true
		case "default":
			p.Default = strings.EqualFold(kv[1], "yes")
		}
	}
	if strings.EqualFold(p.Name, "DEFAULT") {
		if hasNodes {
			c.partDefault = p.Nodes
		}
		return
	}
	if !hasNodes {
		p.Nodes = c.partDefault
	}
	c.Partitions = append(c.Partitions, p)
}

// splitPairs splits "A=b C=d" into pairs; values may be double-quoted.
func splitPairs(line string) ([][2]string, error) {
	var out [][2]string
	for line != "" {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			break
		}
		eq := strings.IndexByte(line, '=')
		sp := strings.IndexAny(line, " \t")
		if eq < 0 || (sp >= 0 && sp < eq) {
			return nil, fmt.Errorf("%s is not KEY=VALUE", cut(line))
		}
		key, rest := line[:eq], line[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote after %s=", cut(key))
			}
			val, line = rest[1:1+end], rest[2+end:]
		} else {
			end := strings.IndexAny(rest, " \t")
			if end < 0 {
				end = len(rest)
			}
			val, line = rest[:end], rest[end:]
		}
		out = append(out, [2]string{key, val})
	}
	return out, nil
}

// ParseGres reads a Gres= list: "gpu:h200:4,shard:16", "gpu:g0:1,gpu:g1:1",
// "gpu:2(S:0-1)". A count may carry K, M or G.
func ParseGres(s string) ([]Gres, error) {
	if s == "" || strings.EqualFold(s, "(null)") {
		return nil, nil
	}
	var out []Gres
	for _, e := range splitTopLevel(s) {
		// A socket binding such as (S:0-1) says nothing about counts or types.
		if i := strings.IndexByte(e, '('); i >= 0 {
			e = e[:i]
		}
		parts := strings.Split(e, ":")
		if len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("gres entry %s: want name[:type][:count]", cut(e))
		}
		g := Gres{Name: strings.ToLower(parts[0]), Count: 1}
		switch len(parts) {
		case 2:
			if n, err := parseCount(parts[1]); err == nil {
				g.Count = n
			} else {
				g.Type = parts[1]
			}
		case 3:
			g.Type = parts[1]
			n, err := parseCount(parts[2])
			if err != nil {
				return nil, fmt.Errorf("gres entry %s: %w", cut(e), err)
			}
			g.Count = n
		}
		out = append(out, g)
	}
	return out, nil
}

// splitTopLevel splits on commas outside parentheses.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

var errCount = errors.New("bad count")

func parseCount(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K") || strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M") || strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G") || strings.HasSuffix(s, "g"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%w %s", errCount, cut(s))
	}
	return n * mult, nil
}

// cut bounds a piece of input quoted in an error.
func cut(s string) string {
	if len(s) > 60 {
		return strconv.Quote(s[:60]) + "..."
	}
	return strconv.Quote(s)
}

// AddGresConf reads gres.conf for what matters to pinning: whether GPUs are bound
// to cores.
func (c *Conf) AddGresConf(r io.Reader, name string) error {
	sc := bufio.NewScanner(io.LimitReader(r, maxFileBytes))
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		kvs, err := splitPairs(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", name, lineNo, err)
		}
		gpuLine, shardLine, file, typed := false, false, false, false
		for _, kv := range kvs {
			if strings.EqualFold(kv[0], "name") && (strings.EqualFold(kv[1], "gpu") || strings.EqualFold(kv[1], "shard")) {
				gpuLine = true
				shardLine = strings.EqualFold(kv[1], "shard")
			}
			if strings.EqualFold(kv[0], "file") {
				file = true
			}
			if strings.EqualFold(kv[0], "type") && kv[1] != "" {
				typed = true
			}
		}
		if shardLine && !file && c.SharedShards == "" {
			c.SharedShards = fmt.Sprintf("%s line %d: a shard line without File=", name, lineNo)
		}
		if shardLine && !typed && c.UntypedShards == "" {
			c.UntypedShards = fmt.Sprintf("%s line %d: a shard line without Type=", name, lineNo)
		}
		for _, kv := range kvs {
			k := strings.ToLower(kv[0])
			switch {
			case k == "autodetect" && !strings.EqualFold(kv[1], "off") && c.GPUAffinity == "":
				c.GPUAffinity = fmt.Sprintf("%s line %d: AutoDetect=%s (the driver's core binding)", name, lineNo, kv[1])
			case gpuLine && (k == "cores" || k == "cpus") && c.GPUAffinity == "":
				c.GPUAffinity = fmt.Sprintf("%s line %d: %s=%s", name, lineNo, kv[0], kv[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s line %d: %w", name, lineNo+1, err)
	}
	c.GresRead = true
	return nil
}

// LoadWithGres is Load plus gres.conf from slurm.conf's folder, when it exists.
func LoadWithGres(path string) (*Conf, error) {
	c, err := Load(path)
	if err != nil {
		return nil, err
	}
	gres := filepath.Join(filepath.Dir(path), "gres.conf")
	f, err := safeopen.Regular(gres, safeopen.FollowLinks)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading gres.conf: %w", err)
	}
	defer f.Close()
	if err := c.AddGresConf(f, gres); err != nil {
		return nil, err
	}
	return c, nil
}

// Steering modes: how a placement is made to land on the chosen GPU.
const (
	// FirstFit sizes a shard request so that Slurm's first-fit pick lands on
	// the chosen GPU (works without Cores= affinity and without LL_SHARED_GRES).
	FirstFit = "first-fit"
	// Typed names the GPU in the request (--gres=shard:g<i>:K); needs per-GPU
	// types in slurm.conf and gres.conf.
	Typed = "typed"
)

// CheckSteering returns nil when mode can pin placements on this configuration,
// else why not (one sentence for slurmctld's log and `coscheml preflight`).
// Measured on real daemons of 22.05.8 to 26.05.3 (docs/compatibility.md).
func (c *Conf) CheckSteering(mode string) error {
	switch mode {
	case FirstFit:
		if c.LeastLoadedSharedGres() {
			return errors.New("SelectTypeParameters=LL_SHARED_GRES makes Slurm give a shard request the least-loaded GPU, " +
				"so first-fit steering cannot choose the GPU (per-GPU types and the typed mode can)")
		}
		if c.GPUAffinity != "" {
			return fmt.Errorf("GPUs are bound to cores (%s) and Slurm picks a shard's GPU by the job's cores, "+
				"so first-fit steering cannot choose the GPU (per-GPU types and the typed mode can)", c.GPUAffinity)
		}
		return nil
	case Typed:
		if ok, why := c.PerGPUTypes(); !ok {
			return fmt.Errorf("the typed mode needs every GPU of a node to have its own Type (Gres=gpu:g0:1,gpu:g1:1,...,shard:N): %s", why)
		}
		return nil
	default:
		return fmt.Errorf("unknown steering mode %s", cut(mode))
	}
}
