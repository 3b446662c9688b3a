// SPDX-License-Identifier: Apache-2.0

// Package profile describes how one GPU application behaves when it runs alone on
// one GPU (its NVML metric summary), and validates the tags that name applications.
package profile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/safetext"
)

// Class is the kind of GPU application; each class has its own speed floor.
type Class string

const (
	ClassHPC   Class = "hpc"
	ClassTrain Class = "train"
	ClassInfer Class = "infer"
)

// ParseClass accepts exactly "hpc", "train" or "infer".
func ParseClass(s string) (Class, error) {
	switch Class(s) {
	case ClassHPC, ClassTrain, ClassInfer:
		return Class(s), nil
	}
	return "", fmt.Errorf("invalid class %q: want hpc, train or infer", Sanitize(s))
}

// Stat summarises one NVML metric over a profiling run.
type Stat struct {
	Mean float64 `codec:"mean" json:"mean"`
	P95  float64 `codec:"p95" json:"p95"`
	Max  float64 `codec:"max" json:"max"`
}

// Profile is one application's resource use running alone on one GPU.
// Utilizations are percentages (0-100) as NVML reports them.
type Profile struct {
	Tag      string `codec:"tag" json:"tag"`
	Class    Class  `codec:"class" json:"class"`
	GPUModel string `codec:"gpu_model" json:"gpu_model"`

	SMUtil     Stat    `codec:"sm_util" json:"sm_util"`           // NVML utilization.gpu (kernel time %)
	MemBWUtil  Stat    `codec:"membw_util" json:"membw_util"`     // NVML utilization.memory (%)
	MemUsedMiB float64 `codec:"mem_used_mib" json:"mem_used_mib"` // max device memory used
	PCIeTxMBps Stat    `codec:"pcie_tx_mbps" json:"pcie_tx_mbps"`
	PCIeRxMBps Stat    `codec:"pcie_rx_mbps" json:"pcie_rx_mbps"`
	PowerW     Stat    `codec:"power_w" json:"power_w"`
	SMClockMHz Stat    `codec:"sm_clock_mhz" json:"sm_clock_mhz"`

	SoloRuntimeS   float64 `codec:"solo_runtime_s" json:"solo_runtime_s,omitempty"`
	SoloThroughput float64 `codec:"solo_throughput" json:"solo_throughput,omitempty"` // e.g. samples/s

	Samples     int       `codec:"samples" json:"samples"`
	DurationS   float64   `codec:"duration_s" json:"duration_s"`
	Partial     bool      `codec:"partial" json:"partial,omitempty"` // some metrics were unavailable
	PartialNote string    `codec:"partial_note" json:"partial_note,omitempty"`
	CollectedAt time.Time `codec:"collected_at" json:"collected_at"`
	CollectedOn string    `codec:"collected_on" json:"collected_on"` // host name
	Source      string    `codec:"source" json:"source"`             // e.g. "nvml", "lucid-train csv"
}

// MaxTagLen bounds a tag; tags become file names and log fields.
const MaxTagLen = 64

// Tag grammar: lower-case ASCII letters and digits, with '-', '_' and '.' allowed
// inside; starts and ends with a letter or digit; no "..". 1..64 characters.
// See docs/profiles.md.

// tagShape says whether s matches ^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$, without a
// regexp engine: every submission's comment is checked inside slurmctld
// (FuzzTagShape holds it to the regexp).
func tagShape(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidateTag reports whether s is a well-formed tag. The error never echoes the raw
// input: it is sanitized so it is safe in a log line or a user's terminal.
func ValidateTag(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("invalid tag: empty")
	case len(s) > MaxTagLen:
		return fmt.Errorf("invalid tag %q: longer than %d characters", Sanitize(s), MaxTagLen)
	case !tagShape(s):
		return fmt.Errorf("invalid tag %q: use a-z, 0-9 and inner '-', '_', '.' (start and end with a-z or 0-9)", Sanitize(s))
	case strings.Contains(s, ".."):
		return fmt.Errorf("invalid tag %q: contains \"..\"", Sanitize(s))
	}
	return nil
}

// Sanitize makes untrusted text safe to print: printable ASCII only (others become
// '?'), at most 80 characters.
func Sanitize(s string) string { return safetext.Sanitize(s) }

// LucidTag is the tag of a Lucid-train setup (model, batch size, mixed precision):
// lower-cased model, "-bs<batch>", and "-amp" when mixed precision is on,
// e.g. ResNet18,32,1 -> "resnet18-bs32-amp".
func LucidTag(model string, batch int, amp bool) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(model)) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("lucid model name %q has no letters or digits", Sanitize(model))
	}
	b.WriteString("-bs")
	b.WriteString(strconv.Itoa(batch))
	if amp {
		b.WriteString("-amp")
	}
	tag := b.String()
	return tag, ValidateTag(tag)
}

// ErrNotFound is returned (wrapped) when no profile exists for a tag.
var ErrNotFound = errors.New("profile not found")

// Catalog is an immutable set of profiles by tag, as loaded at one moment.
type Catalog map[string]*Profile

// Get returns the profile for tag or an error wrapping ErrNotFound.
func (c Catalog) Get(tag string) (*Profile, error) {
	if p, ok := c[tag]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("tag %q: %w", Sanitize(tag), ErrNotFound)
}

// CatalogOf indexes ps by tag (a later profile with the same tag wins).
func CatalogOf(ps []*Profile) Catalog {
	cat := make(Catalog, len(ps))
	for _, p := range ps {
		cat[p.Tag] = p
	}
	return cat
}

// MeasuredOn is the GPU model the profile was measured on, "" when unknown (no
// gpu_model, or one that says it is unknown, as imported Lucid profiles do):
// placement lets a profile of unknown model serve every model.
func (p *Profile) MeasuredOn() string {
	if p == nil || strings.HasPrefix(p.GPUModel, "unknown") {
		return ""
	}
	return p.GPUModel
}
