// SPDX-License-Identifier: Apache-2.0

//go:build !race

// Package racebuild says whether the race detector is compiled in: it adds
// allocations of its own (shadow memory, sync bookkeeping), so tests that count
// allocations skip that assertion under -race and keep it everywhere else.
package racebuild

// Enabled is true in binaries built with -race.
const Enabled = false
