// SPDX-License-Identifier: Apache-2.0

// Package version reports the release of the coscheml programs. The build sets
// it with -ldflags "-X github.com/coscheml/coscheml/pkg/version.Version=1.2.3"
// (make does); a plain `go build` or `go install pkg@v1.2.3` falls back to the
// module version Go records, else "dev".
package version

import "runtime/debug"

// Version is set at link time; empty means "ask the build info".
var Version = ""

// String returns the release this binary was built as.
func String() string {
	if Version != "" {
		return Version
	}
	return fromBuildInfo(debug.ReadBuildInfo())
}

// fromBuildInfo is String's fallback, apart so tests can feed it build infos.
func fromBuildInfo(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "dev"
	}
	// "(devel)" is what go build in a checkout records; it says nothing useful.
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return "dev"
}
