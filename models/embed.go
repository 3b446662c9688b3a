// Package models ships the default interference model and the Lucid training data
// it was trained on inside the binaries, so the CLIs and the demo work with no
// files. See README.md here for provenance and the data's license (S-Lab License
// 1.0: non-commercial use only).
package models

import _ "embed"

// DefaultModel is models/default.model: the interference model trained on the
// Lucid data below (decode with model.Default).
//
//go:embed default.model
var DefaultModel []byte

// DefaultSoloCSV is data/lucid-train/solo_profiles.csv (one row per setup run alone).
//
//go:embed data/lucid-train/solo_profiles.csv
var DefaultSoloCSV []byte

// DefaultPairsCSV is data/lucid-train/colocate_pairs.csv (one row per co-located pair).
//
//go:embed data/lucid-train/colocate_pairs.csv
var DefaultPairsCSV []byte

// PhillyCSV is data/philly/philly.csv: 82,247 jobs of Microsoft's Philly trace
// (Apache-2.0 file from the Pollux artifact, derived from CC BY 4.0 traces), the
// simulator's default trace.
//
//go:embed data/philly/philly.csv
var PhillyCSV []byte
