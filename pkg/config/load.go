// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/safeopen"
	"github.com/coscheml/coscheml/pkg/safetext"
	"gopkg.in/yaml.v3"
)

// MaxFileSize bounds a configuration file; anything larger is a mistake (or an
// attack) and is refused before parsing.
const MaxFileSize = 1 << 20

// Load reads the YAML file at path over the defaults: keys the file leaves out keep
// their Default() value. Unknown keys, wrong types and out-of-range values are
// errors that name the file, the key and (when known) its line.
func Load(path string) (Config, error) {
	// Regular files only, opened without blocking: a FIFO here would stall
	// slurmctld's start. The path is the admin's, so a symlink is followed.
	f, err := safeopen.Regular(path, safeopen.FollowLinks)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return Config{}, fmt.Errorf("config %s: larger than %d bytes", path, MaxFileSize)
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML over the defaults and validates the result (see Load).
// An empty document yields Default().
func Parse(data []byte) (Config, error) {
	c := Default()
	if len(data) > MaxFileSize {
		return Config{}, fmt.Errorf("larger than %d bytes", MaxFileSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, c.Validate()
		}
		return Config{}, fmt.Errorf("YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, errors.New("more than one YAML document (remove the '---' separator)")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return c, c.Validate()
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return c, c.Validate() // a file of only comments
	}
	// The schema walk gives errors the dotted key and line that yaml.v3's own
	// messages lack, and rejects what yaml.v3 would silently coerce (2.5 into an int).
	if err := checkNode(root, reflect.TypeOf(c), "", 0); err != nil {
		return Config{}, err
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("YAML: %w", err)
	}
	if len(c.Cluster.Groups) == 0 {
		c.Cluster.Groups = nil // "groups: []" is the default, not a different value
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// maxDepth bounds the schema walk; the configuration is four levels deep
// (cluster.groups[i].nodes).
const maxDepth = 8

// maxListLen bounds a list of the configuration (cluster.groups).
const maxListLen = MaxGroups

// checkNode verifies that n fits the Go type t: known keys only, scalars of the
// right YAML type. path is the dotted key of n.
func checkNode(n *yaml.Node, t reflect.Type, path string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s (line %d): nested too deeply", keyName(path), n.Line)
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return fmt.Errorf("%s (line %d): dangling alias", keyName(path), n.Line)
		}
		return checkNode(n.Alias, t, path, depth+1)
	}
	if t.Kind() == reflect.Struct && t != durationType {
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			return fmt.Errorf("%s (line %d): empty section: remove the key or give its values", keyName(path), n.Line)
		}
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s (line %d): want a mapping of keys, got %s", keyName(path), n.Line, describe(n))
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s (line %d): keys must be plain names", keyName(path), k.Line)
			}
			name := k.Value
			full := name
			if path != "" {
				full = path + "." + name
			}
			if k.Tag == "!!merge" || name == "<<" {
				return fmt.Errorf("%s (line %d): merge keys are not supported", keyName(full), k.Line)
			}
			if prev, dup := seen[name]; dup {
				return fmt.Errorf("%s (line %d): defined twice (first at line %d)", keyName(full), k.Line, prev)
			}
			seen[name] = k.Line
			f, ok := fieldByTag(t, name)
			if !ok {
				return fmt.Errorf("unknown key %q (line %d)%s", Sanitize(full), k.Line, suggest(t, name))
			}
			if err := checkNode(v, f.Type, full, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if t.Kind() == reflect.Slice {
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s (line %d): want a list, got %s", keyName(path), n.Line, describe(n))
		}
		if len(n.Content) > maxListLen {
			return fmt.Errorf("%s (line %d): %d entries, at most %d", keyName(path), n.Line, len(n.Content), maxListLen)
		}
		for i, e := range n.Content {
			if err := checkNode(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s (line %d): want a single value, got %s", keyName(path), n.Line, describe(n))
	}
	tag := n.ShortTag()
	switch {
	case t == durationType:
		if tag != "!!str" {
			return fmt.Errorf("%s (line %d): want a duration such as \"500ms\" or \"720h\", got %s", keyName(path), n.Line, describe(n))
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			return fmt.Errorf("%s (line %d): bad duration %q: use units ns, us, ms, s, m, h (e.g. \"500ms\", \"720h\")", keyName(path), n.Line, Sanitize(n.Value))
		}
	case t.Kind() == reflect.String:
		// Numbers and booleans are refused: "policy: 1" or "partition: yes" is
		// surely a mistake. A bare "key:" is refused too (yaml.v3 would keep the
		// default, which is not what "empty" suggests): write "" for empty.
		if tag == "!!null" {
			return fmt.Errorf("%s (line %d): empty value: write \"\" for an empty string, or remove the key for its default", keyName(path), n.Line)
		}
		if tag != "!!str" {
			return fmt.Errorf("%s (line %d): want a string, got %s (quote it if you mean the text)", keyName(path), n.Line, describe(n))
		}
	case t.Kind() == reflect.Int:
		if tag != "!!int" {
			return fmt.Errorf("%s (line %d): want a whole number, got %s", keyName(path), n.Line, describe(n))
		}
		if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 32); err != nil {
			return fmt.Errorf("%s (line %d): number %q out of range", keyName(path), n.Line, Sanitize(n.Value))
		}
	case t.Kind() == reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			return fmt.Errorf("%s (line %d): want a number, got %s", keyName(path), n.Line, describe(n))
		}
	case t.Kind() == reflect.Bool:
		if tag != "!!bool" {
			return fmt.Errorf("%s (line %d): want true or false, got %s", keyName(path), n.Line, describe(n))
		}
	default:
		return fmt.Errorf("%s: unsupported field type %s", keyName(path), t) // programming error
	}
	return nil
}

func keyName(path string) string {
	if path == "" {
		return "top level"
	}
	return "key " + strconv.Quote(path)
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "an empty value"
		case "!!str":
			return fmt.Sprintf("the string %q", Sanitize(n.Value))
		case "!!int":
			return "the whole number " + Sanitize(n.Value)
		case "!!float":
			return "the number " + Sanitize(n.Value)
		case "!!bool":
			return "the boolean " + Sanitize(n.Value)
		}
		return fmt.Sprintf("%q", Sanitize(n.Value))
	}
	return "something else"
}

// fieldByTag finds the struct field whose yaml tag is name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

// suggest names the valid keys of a section, so a typo is fixed in one round.
func suggest(t reflect.Type, name string) string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if k := yamlName(t.Field(i)); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	lower := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	for _, k := range keys {
		if k == lower {
			return fmt.Sprintf("; did you mean %q?", k)
		}
	}
	return "; valid keys here: " + strings.Join(keys, ", ")
}

// Sanitize makes text from a configuration file safe to print in an error:
// printable ASCII only, at most 80 characters.
func Sanitize(s string) string { return safetext.Sanitize(s) }

// adminRE is one admin_users entry: a uid or a POSIX-ish user name.
var adminRE = regexp.MustCompile(`^([0-9]{1,10}|[A-Za-z_][A-Za-z0-9_.-]{0,63}\$?)$`)

// AdminList splits admin_users into its entries (names or uids); an entry that is
// neither is an error naming it.
func AdminList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !adminRE.MatchString(f) {
			return nil, fmt.Errorf("%q is not a user name or uid", Sanitize(f))
		}
		out = append(out, f)
	}
	if len(out) > 256 {
		return nil, fmt.Errorf("%d users: at most 256", len(out))
	}
	return out, nil
}

// typePrefixRE: the prefix becomes part of a Slurm GPU Type and of a TRES string,
// so it must not carry Slurm's separators (':', ',', '/', '=').
var typePrefixRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,31}$`)

// Upper bounds of the profile store's limits: MaxMaxProfiles keeps slurmctld's
// load of the store to seconds; MaxMinUsers is the number of users whose
// samples a profile's evidence keeps (profile.MaxCandidateUsers).
const (
	MaxMaxProfiles = 1_000_000
	MaxMinUsers    = 16
)

// partitionRE is Slurm's practical partition-name alphabet.
var partitionRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Validate checks every value's range; all problems are reported together, each
// naming its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key string, format string, a ...any) {
		errs = append(errs, fmt.Errorf("key %q: "+format, append([]any{key}, a...)...))
	}
	for _, p := range []struct{ key, val string }{
		{"profile_dir", c.ProfileDir},
		{"model_path", c.ModelPath},
		{"residency_dir", c.ResidencyDir},
		{"observation_dir", c.ObservationDir},
		{"decision_log", c.DecisionLog},
		{"decision_key", c.DecisionKey},
		{"metrics_file", c.MetricsFile},
		{"redecide_heartbeat", c.RedecideHeartbeat},
		{"guard.event_dir", c.Guard.EventDir},
		{"guard.state_dir", c.Guard.StateDir},
		{"guard.metrics_file", c.Guard.MetricsFile},
		{"guard.emulated_metrics_dir", c.Guard.EmulatedMetricsDir},
	} {
		switch {
		case p.val == "":
		case strings.ContainsRune(p.val, 0) || strings.ContainsAny(p.val, "\n\r"):
			bad(p.key, "path contains a control character")
		case !strings.HasPrefix(p.val, "/"):
			bad(p.key, "path %q must be absolute (start with /)", Sanitize(p.val))
		}
	}
	if !contains(Policies, c.Policy) {
		bad("policy", "%q is not a policy; want one of %s", Sanitize(c.Policy), strings.Join(Policies, ", "))
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"speed_floor.hpc", c.SpeedFloor.HPC}, {"speed_floor.train", c.SpeedFloor.Train}, {"speed_floor.infer", c.SpeedFloor.Infer}} {
		if !(f.v > 0 && f.v <= 1) { // also catches NaN
			bad(f.key, "%v is out of range: want a speed in (0, 1], e.g. 0.75", f.v)
		}
	}
	if c.SlotsPerGPU < 1 || c.SlotsPerGPU > 1024 {
		bad("slots_per_gpu", "%d is out of range: want 1..1024", c.SlotsPerGPU)
	}
	if c.MaxCoRunners < 1 || c.MaxCoRunners > max(c.SlotsPerGPU, 1) {
		bad("max_corunners", "%d is out of range: want 1..slots_per_gpu (%d)", c.MaxCoRunners, c.SlotsPerGPU)
	}
	if !(c.PreferShareSpeed > 0 && c.PreferShareSpeed <= 1) {
		bad("prefer_share_speed", "%v is out of range: want a speed in (0, 1]", c.PreferShareSpeed)
	}
	if !(c.MemReserveMiB >= 0 && c.MemReserveMiB <= 16<<20) {
		bad("mem_reserve_mib", "%v is out of range: want 0..16777216 MiB", c.MemReserveMiB)
	}
	if !(c.FloorConfidence >= 0 && c.FloorConfidence < 1) {
		bad("floor_confidence", "%v is out of range: want a coverage level in [0, 1) (0: the model's default)", c.FloorConfidence)
	}
	if !(c.UtilSumThreshold > 0 && c.UtilSumThreshold <= 400) {
		bad("utilsum_threshold", "%v is out of range: want a percentage in (0, 400]", c.UtilSumThreshold)
	}
	for _, e := range []struct {
		key, val string
		allowed  []string
	}{
		{"untagged", c.Untagged, []string{"pass", "exclusive"}},
		{"unknown_profile", c.UnknownProfile, []string{UnknownBootstrap, UnknownReject, UnknownExclusive}},
		{"raw_requests", c.RawRequests, []string{RawRefuse, RawAllow}},
		{"invalid_tag", c.InvalidTag, []string{"reject", "exclusive"}},
		{"profiling.backend", c.Profiling.Backend, []string{"nvml", "mock"}},
		{"shard_pinning", c.ShardPinning, []string{PinAuto, PinFirstFit, PinTyped}},
		{"log_decisions", c.LogDecisions, []string{LogInfo, LogVerbose, LogDebug}},
		{"guard.actions.hpc.memory", c.Guard.Actions.HPC.Memory, GuardMemoryActions},
		{"guard.actions.train.memory", c.Guard.Actions.Train.Memory, GuardMemoryActions},
		{"guard.actions.infer.memory", c.Guard.Actions.Infer.Memory, GuardMemoryActions},
		{"guard.actions.hpc.floor", c.Guard.Actions.HPC.Floor, GuardFloorActions},
		{"guard.actions.train.floor", c.Guard.Actions.Train.Floor, GuardFloorActions},
		{"guard.actions.infer.floor", c.Guard.Actions.Infer.Floor, GuardFloorActions},
	} {
		if !contains(e.allowed, e.val) {
			bad(e.key, "%q is not allowed; want %s", Sanitize(e.val), strings.Join(e.allowed, " or "))
		}
	}
	if _, err := AdminList(c.AdminUsers); err != nil {
		bad("admin_users", "%v", err)
	}
	if !typePrefixRE.MatchString(c.ShardTypePrefix) {
		bad("shard_type_prefix", "%q is not a GPU type prefix: want a letter, then up to 31 letters, digits or '_'", Sanitize(c.ShardTypePrefix))
	}
	c.validateCluster(bad)
	if c.Cluster.Partition != "" && !partitionRE.MatchString(c.Cluster.Partition) {
		bad("cluster.partition", "%q is not a partition name (letters, digits, '_', '.', '-')", Sanitize(c.Cluster.Partition))
	}
	if c.WaitDefer != 0 && (c.WaitDefer < time.Second || c.WaitDefer > time.Hour) {
		bad("wait_defer", "%s is out of range: want 0 (off) or 1s..1h", c.WaitDefer)
	}
	if c.DecideTimeout < time.Millisecond || c.DecideTimeout > 10*time.Second {
		bad("decide_timeout", "%s is out of range: want 1ms..10s", c.DecideTimeout)
	}
	if c.Profiling.Interval < 10*time.Millisecond || c.Profiling.Interval > time.Hour {
		bad("profiling.interval", "%s is out of range: want 10ms..1h", c.Profiling.Interval)
	}
	if c.Predictor != PredictorModel && c.Predictor != PredictorOptimistic {
		bad("predictor", "%q is not a predictor; want %s or %s (evaluation only)", Sanitize(c.Predictor), PredictorModel, PredictorOptimistic)
	}
	if c.Guard.Window < 1 || c.Guard.Window > 100 {
		bad("guard.window", "%d is out of range: want 1..100 rounds", c.Guard.Window)
	}
	if c.Guard.SustainFor < 0 || c.Guard.SustainFor > time.Hour {
		bad("guard.sustain_for", "%s is out of range: want 0s..1h", c.Guard.SustainFor)
	}
	// Under a second only a time-compressed replay needs (its jobs last seconds).
	if c.Guard.Period < 250*time.Millisecond || c.Guard.Period > 10*time.Minute {
		bad("guard.period", "%s is out of range: want 250ms..10m", c.Guard.Period)
	}
	if c.Guard.NVMLTimeout < 100*time.Millisecond || c.Guard.NVMLTimeout > time.Minute {
		bad("guard.nvml_timeout", "%s is out of range: want 100ms..1m", c.Guard.NVMLTimeout)
	}
	if c.Guard.CommandTimeout < time.Second || c.Guard.CommandTimeout > 5*time.Minute {
		bad("guard.command_timeout", "%s is out of range: want 1s..5m", c.Guard.CommandTimeout)
	}
	if c.Profiling.StaleAfter < 0 {
		bad("profiling.stale_after", "%s is negative: want 0 (never stale) or more", c.Profiling.StaleAfter)
	}
	if c.MaxProfiles < 1 || c.MaxProfiles > MaxMaxProfiles {
		bad("max_profiles", "%d is out of range: want 1..%d", c.MaxProfiles, MaxMaxProfiles)
	}
	if c.Profiling.MinRuns < 1 || c.Profiling.MinRuns > 50 {
		bad("profiling.min_runs", "%d is out of range: want 1..50", c.Profiling.MinRuns)
	}
	if c.Profiling.MinUsers < 1 || c.Profiling.MinUsers > MaxMinUsers || c.Profiling.MinUsers > max(c.Profiling.MinRuns, 1) {
		bad("profiling.min_users", "%d is out of range: want 1..min(profiling.min_runs (%d), %d)", c.Profiling.MinUsers, c.Profiling.MinRuns, MaxMinUsers)
	}
	if c.Profiling.MinRunTime < time.Second || c.Profiling.MinRunTime > 24*time.Hour {
		bad("profiling.min_run_time", "%s is out of range: want 1s..24h", c.Profiling.MinRunTime)
	}
	if c.Profiling.MaxNewProfilesPerUser < 0 || c.Profiling.MaxNewProfilesPerUser > c.MaxProfiles {
		bad("profiling.max_new_profiles_per_user", "%d is out of range: want 0..max_profiles (%d)", c.Profiling.MaxNewProfilesPerUser, c.MaxProfiles)
	}
	return errors.Join(errs...)
}

// featureRE: a Slurm node feature or GPU Type as users write it in
// --constraint and --gres (no separators of either syntax).
var featureRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// validateCluster checks the inventory, flat or in groups.
func (c Config) validateCluster(bad func(key, format string, a ...any)) {
	cs := c.Cluster
	if len(cs.Groups) > 0 && (cs.Nodes != "" || cs.GPUsPerNode != 0 || cs.GPUMemoryMiB != 0) {
		bad("cluster.groups", "set together with cluster.nodes, gpus_per_node or gpu_memory_mib: describe the nodes either flat or in groups, not both")
		return
	}
	if len(cs.Groups) > MaxGroups {
		bad("cluster.groups", "%d groups: at most %d", len(cs.Groups), MaxGroups)
		return
	}
	flat := len(cs.Groups) == 0
	models := map[string]int{}
	for gi, g := range cs.NodeGroups() {
		key := groupKey(cs, gi)
		if !flat && g.Nodes == "" {
			bad(key+".nodes", "must be set: a group without nodes describes nothing")
		}
		if g.GPUsPerNode < 0 || g.GPUsPerNode > 64 {
			bad(key+".gpus_per_node", "%d is out of range: want 1..64", g.GPUsPerNode)
		} else if g.GPUsPerNode == 0 {
			bad(key+".gpus_per_node", "must be set (1..64) when %s.nodes is", key)
		}
		if !(g.GPUMemoryMiB >= 0 && g.GPUMemoryMiB <= 16<<20) {
			bad(key+".gpu_memory_mib", "%v is out of range: want 0..16777216 MiB", g.GPUMemoryMiB)
		} else if g.GPUMemoryMiB == 0 {
			bad(key+".gpu_memory_mib", "must be set (> 0) when %s.nodes is: sharing needs to know that jobs fit", key)
		}
		if g.GPUModel != "" {
			if len(g.GPUModel) > 96 || safetext.Sanitize(g.GPUModel) != g.GPUModel || strings.TrimSpace(g.GPUModel) != g.GPUModel {
				bad(key+".gpu_model", "%q is not a GPU model name: printable characters, at most 96, no leading or trailing space", Sanitize(g.GPUModel))
			}
			if prev, dup := models[g.GPUModel]; dup && (cs.Groups[prev].Feature != g.Feature || cs.Groups[prev].GresType != g.GresType) {
				bad(key+".gpu_model", "%q is also group %d's model with another feature or gres_type: one model, one way to ask for it", Sanitize(g.GPUModel), prev)
			}
			models[g.GPUModel] = gi
		}
		if g.Feature != "" && !featureRE.MatchString(g.Feature) {
			bad(key+".feature", "%q is not a Slurm node feature (letters, digits, '_', '.', '-')", Sanitize(g.Feature))
		}
		if g.GresType != "" && !featureRE.MatchString(g.GresType) {
			bad(key+".gres_type", "%q is not a Slurm GPU Type (letters, digits, '_', '.', '-')", Sanitize(g.GresType))
		}
	}
	if flat && cs.Nodes == "" {
		// Nothing listed: the ranges alone.
		if cs.GPUsPerNode < 0 || cs.GPUsPerNode > 64 {
			bad("cluster.gpus_per_node", "%d is out of range: want 0..64 (0 = not configured)", cs.GPUsPerNode)
		}
		if !(cs.GPUMemoryMiB >= 0 && cs.GPUMemoryMiB <= 16<<20) {
			bad("cluster.gpu_memory_mib", "%v is out of range: want 0..16777216 MiB", cs.GPUMemoryMiB)
		}
		return
	}
	// The same expansion the plugin uses, so what validates here is what it sees.
	if _, err := cs.Hosts(); err != nil {
		errKey, msg, _ := strings.Cut(err.Error(), ": ")
		bad(errKey, "%s", msg)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
