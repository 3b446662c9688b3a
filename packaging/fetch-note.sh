#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Says what `make package` is about to fetch through the Go module proxy, before
# it does: the build tools nfpm and go-licenses (when run with `go run`, the
# default) and the modules the programs need that the module cache lacks. Reads GO,
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
  - nfpm $NFPM_VERSION (writes the .deb and .rpm files) and its dependencies: about 50 modules, over 100 MB" ;;
esac
case "${GO_LICENSES:-}" in
*" run "*) cached github.com/google/go-licenses "$GO_LICENSES_VERSION" ||
	need="$need
  - go-licenses $GO_LICENSES_VERSION (the dependencies' licence texts) and its dependencies: about 20 modules" ;;
esac
if ! GOFLAGS=-mod=readonly GOPROXY=off $go list -deps ./cmd/... >/dev/null 2>&1; then
	need="$need
  - the modules the programs are built from that are not yet in $modcache"
fi
if [ -n "$need" ]; then
	echo "make package: downloading through the Go module proxy ($proxy), then compiling, before building:$need"
	echo "make package: this takes a few minutes the first time (2 cores: 3-5); later runs use the module and build caches."
else
	echo "make package: nfpm $NFPM_VERSION, go-licenses $GO_LICENSES_VERSION and the modules the programs need are in $modcache: nothing to download."
fi
