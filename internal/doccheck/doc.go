// SPDX-License-Identifier: Apache-2.0

// Package doccheck holds the repository-wide checks of the documentation and
// of what comments may say: no line names the project's history by number
// (numbered issues, passes or sessions; CHANGELOG.md describes changes
// instead), every intra-repository Markdown link and anchor resolves, and the
// map of packages by where they run in docs/architecture.md covers everything
// linked into slurmctld. The checks are its tests; this file only names the
// package.
package doccheck
