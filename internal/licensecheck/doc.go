// SPDX-License-Identifier: Apache-2.0

// Package licensecheck holds the repository's licence checks: every source file
// (Go, C and headers, Makefiles, scripts) starts with the SPDX-License-Identifier
// of its part (the slurmctld plugin in plugin-c/ is GPL-2.0-or-later, the rest
// Apache-2.0; docs/licensing.md), and the licence files it names are present.
// The checks are its tests; this file only names the package.
package licensecheck
