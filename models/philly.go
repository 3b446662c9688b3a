// SPDX-License-Identifier: Apache-2.0

package models

import _ "embed"

// PhillyCSV is data/philly/philly.csv: 82,247 jobs of Microsoft's Philly trace
// (Apache-2.0 file from the Pollux artifact, derived from CC BY 4.0 traces), the
// simulator's default trace. It is no Lucid data, so every build embeds it.
//
//go:embed data/philly/philly.csv
var PhillyCSV []byte
