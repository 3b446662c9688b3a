// SPDX-License-Identifier: Apache-2.0

//go:build nolucid

// Package models: this build (tag nolucid, the packaged programs) carries no
// Lucid data and no default model; lucid.go reads them from LucidDir when the
// coscheml-model-lucid package installed them.
package models

// Embedded says whether this binary carries the Lucid data and the default model.
const Embedded = false

// The Lucid files are not in this build: nil.
var (
	DefaultModel    []byte
	DefaultSoloCSV  []byte
	DefaultPairsCSV []byte
)
