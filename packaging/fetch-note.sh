#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Says what `make package` is about to fetch through the Go module proxy, before
# it does: the build tools nfpm and go-licenses (when run with `go run`, the
# default) and the modules of go.mod missing from the module cache. Reads GO,
# NFPM, NFPM_VERSION, GO_LICENSES, GO_LICENSES_VERSION from the environment.
set -u
go=${GO:-go}
modcache=$($go env GOMODCACHE)
proxy=$($go env GOPROXY)
cached() { [ -f "$modcache/cache/download/$1/@v/$2.zip" ]; }
need=
case "${NFPM:-}" in
*" run "*) cached github.com/goreleaser/nfpm/v2 "$NFPM_VERSION" ||
	need="$need
  - nfpm $NFPM_VERSION (writes the .deb and .rpm files) and its dependencies, about 40 MB" ;;
esac
case "${GO_LICENSES:-}" in
*" run "*) cached github.com/google/go-licenses "$GO_LICENSES_VERSION" ||
	need="$need
  - go-licenses $GO_LICENSES_VERSION (the dependencies' licence texts) and its dependencies, about 20 MB" ;;
esac
if ! GOFLAGS=-mod=readonly GOPROXY=off $go list -m all >/dev/null 2>&1; then
	need="$need
  - the modules of go.mod not yet in $modcache"
fi
if [ -n "$need" ]; then
	echo "make package: downloading through the Go module proxy ($proxy), then compiling, before building:$need"
	echo "make package: this takes a few minutes the first time (2 cores: 3-5); later runs use the module and build caches."
else
	echo "make package: nfpm $NFPM_VERSION, go-licenses $GO_LICENSES_VERSION and the modules of go.mod are in $modcache: nothing to download."
fi
