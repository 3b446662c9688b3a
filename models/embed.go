// SPDX-License-Identifier: Apache-2.0

//go:build !nolucid

// Package models ships the default interference model and the Lucid training data
// it was trained on, so the CLIs and the demo work with no files. See README.md
// here for provenance and the data's license (S-Lab License 1.0: non-commercial
// use only). A build with the tag nolucid (the packaged programs) leaves them out
// and reads them from LucidDir, where the coscheml-model-lucid package installs
// them (lucid.go).
package models

import _ "embed"

// Embedded says whether this binary carries the Lucid data and the default model.
const Embedded = true

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
