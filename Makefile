# SPDX-License-Identifier: Apache-2.0
# coscheml: interference-aware GPU co-location for Slurm.
#
#   make build        programs into bin/, libcoscheml.so and the Slurm plugin into lib/
#   make test         go vet, the shim checks, unit tests, race, fuzz-short, and the Slurm integration suite (root)
#   make vet          go vet ./...
#   make unit         the unit tests alone (go test ./...)
#   make shim-check   the plugin against every Slurm header set + C harness (+ ASan)
#   make integration  the Slurm integration suite alone (real daemons, root; COSCHEML_SLURM_PREFIX)
#   make integration-matrix  the integration suite on every Slurm release (root)
#   make integration-repeat  the suite REPEAT times in a row on one Slurm, stops at the first failure (root)
#   make e2e          replay a trace on the real-daemon cluster: exclusive, blind, coscheml beside the simulator (root; E2E_JOBS, E2E_SEEDS, E2E_MAX_GPUS, E2E_COMPRESS, E2E_GUARD, E2E_GUARD_FLOOR, E2E_PREDICTOR; e2e-report/)
#   make e2e-parallel the same replay with its three setups side by side, one process each, reports merged (root; E2E_COMPRESS=100 in 45 min)
#   make e2e-sim      the simulator half of make e2e, no daemons: the same jobs under exclusive, blind, coscheml, oracle (E2E_JOBS, E2E_SEEDS)
#   make demo         the simulator on the shipped data: comparison table + report
#   make bench        benchmarks, short
#   make fuzz         every fuzz target for FUZZTIME each
#   make race         go test -race of the packages slurmctld runs (libcoscheml's closure)
#   make fuzz-short   every fuzz target briefly (FUZZTIME_SHORT each; part of make test)
#   make install      PREFIX/DESTDIR-aware install (see docs/install.md)
#   make check-slurm-release  is lib/job_submit_coscheml.so built for the installed slurmctld? (part of install)
#   make install-data the /var/lib/coscheml tree with its owners and modes (part of install)
#   make uninstall    removes what install put in place, keeps /etc/coscheml
#   make package      .deb and .rpm packages into dist/: programs, plugin, Lucid model (nfpm; docs/packaging.md)
#   make licenses     the Go dependencies' licence texts into build/licenses (go-licenses; docs/licensing.md)
#   make licenses-check  fails on a Go dependency with a forbidden, restricted or unknown licence (part of CI)
#   make test-deb-suite  install the .debs here, run the integration suite on them, purge (root)
#   make real-gpu-check  the guard against real PyTorch processes on GPU 0 (needs a GPU; REAL_GPU_OUT)
#   make clean
#   make help         this list
#
# GNU make. Needs Go (see go.mod) and gcc; the plugin also needs Slurm's headers
# (Debian: libslurm-dev) and is skipped with a message when they are missing.

PREFIX          ?= /usr/local
DESTDIR         ?=
BINDIR          ?= $(PREFIX)/bin
LIBDIR          ?= $(PREFIX)/lib
LIBEXECDIR      ?= $(PREFIX)/libexec
DATADIR         ?= $(PREFIX)/share
DOCDIR          ?= $(DATADIR)/doc/coscheml
SYSCONFDIR      ?= /etc
SLURM_PLUGINDIR ?= /usr/lib/x86_64-linux-gnu/slurm-wlm
SLURM_INCLUDE   ?= /usr/include
# Where libcoscheml.so is installed; compiled into the plugin as the library it
# dlopens, so the two must agree.
COSCHEML_LIBDIR ?= $(LIBDIR)/coscheml

GO        ?= go
# The release the programs report with --version and the packages carry.
VERSION   ?= 0.1.0
GOFLAGS_BUILD ?= -trimpath -ldflags "-X github.com/coscheml/coscheml/pkg/version.Version=$(VERSION)"
BENCHTIME ?= 200ms
FUZZTIME  ?= 10s
FUZZTIME_SHORT ?= 2s
# go-nvml's cgo preamble uses deprecated NVML declarations; Go's own default
# CGO_CFLAGS is "-O2 -g".
CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_CFLAGS

PROGRAMS := coscheml coscheml-train coscheml-node
BINS     := $(addprefix bin/,$(PROGRAMS))

.PHONY: e2e-parallel all build programs libcoscheml plugin test vet unit race fuzz-short integration integration-matrix integration-repeat \
        shim-check bench fuzz demo e2e e2e-sim install install-data uninstall package package-binaries licenses licenses-check test-deb-suite clean help

all: build

# Every "#   make TARGET" line of the header above.
help:
	@sed -n 's/^#   \(make .*\)/\1/p' Makefile

build: programs libcoscheml plugin

# go build decides what is stale, so these always run (and are quick when nothing
# changed).
programs:
	@mkdir -p bin
	@echo "make: building $(PROGRAMS) into bin/ (a first build also compiles the dependencies: a minute or two)"
	$(GO) build $(GOFLAGS_BUILD) -o bin/ $(addprefix ./cmd/,$(PROGRAMS))

libcoscheml:
	@mkdir -p lib
	$(GO) build $(GOFLAGS_BUILD) -buildmode=c-shared -o lib/libcoscheml.so ./cmd/libcoscheml

plugin:
	@if [ -f "$(SLURM_INCLUDE)/slurm/slurm.h" ]; then \
		$(MAKE) -C plugin-c SLURM_INCLUDE="$(SLURM_INCLUDE)" PREFIX="$(PREFIX)" COSCHEML_LIBDIR="$(COSCHEML_LIBDIR)"; \
	else \
		echo "make: SKIPPING the Slurm plugin (lib/job_submit_coscheml.so): $(SLURM_INCLUDE)/slurm/slurm.h not found."; \
		echo "make: install the headers (Debian/Ubuntu: apt-get install libslurm-dev) and run make build again."; \
	fi

# make test: static checks, the shim across Slurm releases, unit tests, the race
# detector on what runs inside slurmctld, every fuzz target briefly, then the Slurm
# integration suite.
test: vet shim-check unit race fuzz-short integration

vet:
	$(GO) vet ./...

# The C tests of cmd/libcoscheml (abi.c, harness.c) load the freshly built library.
# The NoLucid tests run built like the packaged programs (-tags nolucid).
unit: libcoscheml
	LIBCOSCHEML_SO=$(CURDIR)/lib/libcoscheml.so $(GO) test ./...
	$(GO) test -tags nolucid -run NoLucid ./cmd/coscheml ./cmd/coscheml-train

# The shim compiled with -Wall -Wextra -Werror against every Slurm release's public
# headers (../shared/slurm/headers/<version>/, developers and CI only), the C
# harness run through each build into lib/libcoscheml.so, then once under
# AddressSanitizer; and the library's C queue (queue.c) under ASan and TSan.
# Without that folder, make unit still checks the system's headers.
SLURM_HEADER_SETS ?= $(CURDIR)/../shared/slurm/headers
shim-check: libcoscheml
	@if [ ! -d "$(SLURM_HEADER_SETS)" ]; then \
		echo "make: SKIPPING shim-check: no Slurm header sets at $(SLURM_HEADER_SETS)."; \
		echo "make: skipped: building the plugin against the public headers of each Slurm release (22.05 to 26.05) and the C harness through each build."; \
		echo "make: the header sets are a developer resource, not part of this repository: point SLURM_HEADER_SETS at a folder of <version>/slurm/slurm.h"; \
		echo "make: (e.g. the include/ of each release's 'make install', or /usr/include of each distribution's libslurm-dev). make unit still checks the system's headers."; \
	else \
		echo "== shim against $$(ls $(SLURM_HEADER_SETS) | tr '\n' ' ')"; \
		LIBCOSCHEML_SO=$(CURDIR)/lib/libcoscheml.so COSCHEML_SLURM_HEADERS=$(SLURM_HEADER_SETS) \
			$(GO) test -count=1 -v -run '^TestC(ABI|Shim|Queue)$$' ./cmd/libcoscheml; \
	fi

# The packages linked into slurmctld (libcoscheml's dependency closure within this
# module) under the race detector: a data race there corrupts slurmctld's process.
race: libcoscheml
	LIBCOSCHEML_SO=$(CURDIR)/lib/libcoscheml.so $(GO) test -race $$($(GO) list -deps ./cmd/libcoscheml | grep '^github.com/coscheml/coscheml/')

# Real slurmctld/slurmd/munge on loopback; needs root, installs the Debian packages
# slurm-wlm, munge and libslurm-dev when missing, builds what it needs itself, and
# skips with a message without root.
#
# COSCHEML_SLURM_PREFIX picks the Slurm installation (default /usr, Debian's
# packages; a source build from .ci/build-slurm VERSION lives in
# /var/cache/coscheml/slurm/VERSION). Only one suite may run at a time on a host.
integration:
	flock /tmp/coscheml-integration.lock $(GO) test -tags integration -count=1 -timeout 40m -v ./slurm/integration/...

# The trace replay benchmark (docs/evaluation.md, "On real Slurm: trace replay"):
# about 30 minutes with the defaults (200 jobs, 3 seeds, 3 setups). E2E_JOBS,
# E2E_SEEDS, E2E_COMPRESS, E2E_LOAD, E2E_MIN_WORK, E2E_MAX_GPUS, E2E_SETUPS, E2E_PINNING,
# E2E_TRACE (philly | generic:FILE | alibaba:FILE) and E2E_REPORT pass through;
# E2E_GUARD=on runs coscheml-node guard on every node over the emulated jobs'
# readings (E2E_GUARD_FLOOR=suspend|requeue|observe: its floor action for hpc and
# train), E2E_PREDICTOR=optimistic makes the plugin predict every pair at full
# speed (evaluation only; docs/guard.md).
e2e:
	E2E=1 flock /tmp/coscheml-integration.lock $(GO) test -tags integration -count=1 -timeout 120m -v -run '^TestE2E$$' ./slurm/integration/

# The same benchmark with its three setups side by side, one process each (each on
# its own cluster), then one merged report in E2E_REPORT (default e2e-report/):
# about 45 minutes at E2E_COMPRESS=100 (docs/evaluation.md). A short test first
# builds the library, plugin and programs for the Slurm under test, so the three
# processes share them.
E2E_PAR_DIR ?= $(CURDIR)/e2e-report-parts
e2e-parallel:
	flock /tmp/coscheml-integration.lock sh -c '\
	  $(GO) test -tags integration -count=1 -run "^TestTypedUpdate$$" ./slurm/integration/ >/dev/null || exit 1; \
	  for s in exclusive blind coscheml; do \
	    E2E=1 E2E_SETUPS=$$s E2E_REPORT=$(E2E_PAR_DIR)/$$s COSCHEML_INTEGRATION_NOBUILD=1 \
	      $(GO) test -tags integration -count=1 -timeout 180m -run "^TestE2E$$" ./slurm/integration/ > $(E2E_PAR_DIR).$$s.log 2>&1 & \
	  done; wait; \
	  E2E_MERGE=$(E2E_PAR_DIR)/exclusive,$(E2E_PAR_DIR)/blind,$(E2E_PAR_DIR)/coscheml E2E_REPORT=$${E2E_REPORT:-$(CURDIR)/e2e-report} \
	    $(GO) test -tags integration -count=1 -v -run "^TestE2EMerge$$" ./slurm/integration/'

# The simulator's figures for make e2e's jobs, without daemons (seconds; no root):
# where Co-scheML's decisions differ from the oracle's (docs/evaluation.md).
e2e-sim:
	E2E_SIM=1 $(GO) test -count=1 -v -run '^TestSimTwin$$' ./pkg/replay/

# The suite REPEAT times in a row against one Slurm (COSCHEML_SLURM_PREFIX, default
# Debian's /usr), stopping at the first failing run; prints "K of N passed".
# REPEAT_TESTS is a -run pattern (e.g. '^TestSlurm$$').
REPEAT ?= 10
REPEAT_TESTS ?= .
integration-repeat:
	COSCHEML_REPEAT_TESTS='$(REPEAT_TESTS)' .ci/integration-repeat $(REPEAT)

# The suite on Debian's Slurm and on every source release (built into
# /var/cache/coscheml/slurm when missing), MATRIX_RUNS times each.
MATRIX_RUNS ?= 1
integration-matrix:
	.ci/integration-matrix $(MATRIX_RUNS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./...

# Each fuzz target, one at a time (go test -fuzz takes one package and one target).
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd pkg | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | sed 's/^func //' | sort -u); do \
			echo "== fuzz ./$$dir $$f ($(FUZZTIME))"; \
			GO='$(GO)' .ci/fuzz-target $(FUZZTIME) $$dir $$f; \
		done; \
	done

# Each fuzz target briefly: catches a parser that panics on its seeds or on what a
# few seconds of mutation find (31 targets: about two minutes on 2 cores).
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

# The guard on a real GPU: real NVML, two real PyTorch processes sharing GPU 0
# (docs/guard.md, "On a real GPU"). Never part of make test.
REAL_GPU_OUT ?= real-gpu-out
real-gpu-check:
	mkdir -p $(REAL_GPU_OUT)
	$(GO) test -c -o $(REAL_GPU_OUT)/guard.test ./pkg/guard
	cd pkg/guard && COSCHEML_REAL_NVML=1 COSCHEML_REAL_NVML_OUT=$(abspath $(REAL_GPU_OUT)) PYTHONUNBUFFERED=1 \
		$(abspath $(REAL_GPU_OUT))/guard.test -test.run 'TestRealNVML$$|TestRealNVMLShared' -test.v -test.timeout 10m

# The main job on the embedded default: no cluster, no GPU.
demo: programs
	bin/coscheml simulate --demo --report demo-report

install: build install-data
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 $(BINS) "$(DESTDIR)$(BINDIR)/"
	install -d "$(DESTDIR)$(COSCHEML_LIBDIR)"
	install -m 0755 lib/libcoscheml.so "$(DESTDIR)$(COSCHEML_LIBDIR)/"
	@if [ -f lib/job_submit_coscheml.so ]; then \
		$(MAKE) --no-print-directory check-slurm-release || exit 1; \
		echo "install -m 0755 lib/job_submit_coscheml.so $(DESTDIR)$(SLURM_PLUGINDIR)/"; \
		install -d "$(DESTDIR)$(SLURM_PLUGINDIR)" && \
		install -m 0755 lib/job_submit_coscheml.so "$(DESTDIR)$(SLURM_PLUGINDIR)/"; \
	else \
		echo "make: NOT installing the Slurm plugin: lib/job_submit_coscheml.so was not built (see make build)."; \
	fi
	install -d "$(DESTDIR)$(SYSCONFDIR)/coscheml" "$(DESTDIR)$(SYSCONFDIR)/coscheml/holdout"
	@# Never overwrite an admin's configuration; leave the new one beside it.
	@if [ -e "$(DESTDIR)$(SYSCONFDIR)/coscheml/coscheml.yaml" ]; then \
		echo "make: keeping $(DESTDIR)$(SYSCONFDIR)/coscheml/coscheml.yaml; the shipped one is coscheml.yaml.dist"; \
		install -m 0644 etc/coscheml.yaml "$(DESTDIR)$(SYSCONFDIR)/coscheml/coscheml.yaml.dist"; \
	else \
		echo "install -m 0644 etc/coscheml.yaml $(DESTDIR)$(SYSCONFDIR)/coscheml/coscheml.yaml"; \
		install -m 0644 etc/coscheml.yaml "$(DESTDIR)$(SYSCONFDIR)/coscheml/coscheml.yaml"; \
	fi
	@# slurm/: executables (Prolog/Epilog entry points) go to libexec, the rest
	@# (configuration snippets) to the docs.
	install -d "$(DESTDIR)$(LIBEXECDIR)/coscheml" "$(DESTDIR)$(DOCDIR)/slurm" "$(DESTDIR)$(DOCDIR)/examples"
	@for f in slurm/*; do \
		[ -f "$$f" ] || continue; \
		if [ -x "$$f" ]; then \
			echo "install -m 0755 $$f $(DESTDIR)$(LIBEXECDIR)/coscheml/"; \
			install -m 0755 "$$f" "$(DESTDIR)$(LIBEXECDIR)/coscheml/"; \
		else \
			install -m 0644 "$$f" "$(DESTDIR)$(DOCDIR)/slurm/"; \
		fi; \
	done
	install -m 0644 README.md CHANGELOG.md LICENSE NOTICE "$(DESTDIR)$(DOCDIR)/"
	@for f in docs/*.md models/README.md models/data/*/LICENSE*; do \
		[ -f "$$f" ] || continue; \
		d="$(DESTDIR)$(DOCDIR)/$$(dirname $$f)"; install -d "$$d"; install -m 0644 "$$f" "$$d/"; \
	done
	install -m 0644 etc/examples/*.yaml "$(DESTDIR)$(DOCDIR)/examples/"

# slurmctld loads a job_submit plugin only if it was built for exactly its release
# (major.minor.micro), and a refused plugin stops slurmctld at start. So install
# refuses a plugin built for another release than the installed slurmctld's.
# SLURMCTLD names the daemon (default: on PATH, /usr/sbin, /usr/local/sbin);
# SLURM_RELEASE_CHECK=no skips the check (packaging for another machine).
SLURMCTLD ?= $(firstword $(shell command -v slurmctld 2>/dev/null) $(wildcard /usr/sbin/slurmctld /usr/local/sbin/slurmctld))
SLURM_RELEASE_CHECK ?= yes
.PHONY: check-slurm-release
check-slurm-release: programs
	@if [ "$(SLURM_RELEASE_CHECK)" = no ]; then \
		echo "make: SLURM_RELEASE_CHECK=no: not checking the plugin against the installed slurmctld"; \
	elif [ -z "$(SLURMCTLD)" ]; then \
		echo "make: no slurmctld found (PATH, /usr/sbin, /usr/local/sbin): cannot check the plugin's Slurm release." >&2; \
		echo "make: name it with SLURMCTLD=/path/to/slurmctld, or SLURM_RELEASE_CHECK=no when installing for another machine." >&2; \
		exit 1; \
	elif ! bin/coscheml preflight --plugin-only --plugin lib/job_submit_coscheml.so --slurmctld "$(SLURMCTLD)"; then \
		echo "make: NOT installing: lib/job_submit_coscheml.so was built with the headers in $(SLURM_INCLUDE) for another Slurm release than $(SLURMCTLD)." >&2; \
		echo "make: slurmctld would refuse the plugin and not start. Rebuild against the headers of the installed release:" >&2; \
		echo "make:     make clean && make SLURM_INCLUDE=<that release's prefix>/include build && make install" >&2; \
		exit 1; \
	fi

# The data tree the plugin and the node hooks need (docs/install.md, "Files and
# folders"): slurmctld (SLURM_USER) creates and rotates the decision log in
# STATEDIR and removes the Epilog's done markers; root (the Prolog/Epilog, the
# admin) writes the rest. No folder is group- or world-writable: the node hooks
# refuse to write in one as root. Owners are set only when run as root and
# SLURM_USER exists (a DESTDIR staged by a user gets the modes alone); existing
# folders keep their contents.
SLURM_USER ?= slurm
STATEDIR   ?= /var/lib/coscheml
install-data:
	install -d -m 0755 "$(DESTDIR)$(STATEDIR)" "$(DESTDIR)$(STATEDIR)/profiles" \
		"$(DESTDIR)$(STATEDIR)/residency" "$(DESTDIR)$(STATEDIR)/residency/active" \
		"$(DESTDIR)$(STATEDIR)/residency/done" "$(DESTDIR)$(STATEDIR)/observations" \
		"$(DESTDIR)$(STATEDIR)/run" "$(DESTDIR)$(STATEDIR)/run/profiling"
	@# The decision key (docs/install.md): 32 random bytes, 0600, never replaced.
	@[ -e "$(DESTDIR)$(STATEDIR)/decision.key" ] || (umask 077; head -c 32 /dev/urandom > "$(DESTDIR)$(STATEDIR)/decision.key")
	@if [ "$$(id -u)" = 0 ] && id -u "$(SLURM_USER)" >/dev/null 2>&1; then \
		echo "chown $(SLURM_USER): $(DESTDIR)$(STATEDIR) $(DESTDIR)$(STATEDIR)/residency/done $(DESTDIR)$(STATEDIR)/decision.key"; \
		chown "$(SLURM_USER):" "$(DESTDIR)$(STATEDIR)" "$(DESTDIR)$(STATEDIR)/residency/done" "$(DESTDIR)$(STATEDIR)/decision.key"; \
	else \
		echo "make: NOT setting owners (needs root and the user $(SLURM_USER), SLURM_USER=...): chown $(SLURM_USER): $(STATEDIR) $(STATEDIR)/residency/done"; \
	fi

# Removes what install put in place except the configuration and the data under
# STATEDIR (profiles, observations and logs are the site's).
uninstall:
	rm -f $(addprefix "$(DESTDIR)$(BINDIR)"/,$(PROGRAMS))
	rm -f "$(DESTDIR)$(COSCHEML_LIBDIR)/libcoscheml.so"
	-rmdir "$(DESTDIR)$(COSCHEML_LIBDIR)" 2>/dev/null
	rm -f "$(DESTDIR)$(SLURM_PLUGINDIR)/job_submit_coscheml.so"
	rm -rf "$(DESTDIR)$(LIBEXECDIR)/coscheml" "$(DESTDIR)$(DOCDIR)"
	@echo "make: kept $(DESTDIR)$(SYSCONFDIR)/coscheml/ (remove it by hand if you want)"

# Packages: the programs, library and plugin are built again with the packages'
# paths (/usr, the distribution's Slurm plugin folder) into build/package, then
# nfpm (a build tool, fetched through the Go module proxy at a pinned version;
# NFPM=nfpm uses one on PATH) writes dist/*.deb and dist/*.rpm: coscheml (the
# programs, without the Lucid data: PKG_TAGS), coscheml-slurm-plugin (for one
# Slurm release, depending on it) and coscheml-model-lucid (the Lucid data and
# default model under their non-commercial licence; docs/licensing.md).
NFPM_VERSION  ?= v2.45.2
NFPM          ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
PKG_ARCH      ?= $(shell $(GO) env GOARCH)
DEB_PLUGINDIR ?= /usr/lib/$(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/slurm-wlm
RPM_PLUGINDIR ?= /usr/lib64/slurm
PKGBUILD      := build/package
# The packaged programs leave the Lucid data out and read it from LUCID_DIR,
# where coscheml-model-lucid installs it.
PKG_TAGS      ?= nolucid
LUCID_DIR     ?= /usr/share/coscheml/lucid
PKG_GOFLAGS   ?= -trimpath -tags $(PKG_TAGS) -ldflags "-X github.com/coscheml/coscheml/pkg/version.Version=$(VERSION) -X github.com/coscheml/coscheml/models.LucidDir=$(LUCID_DIR)"
# The distribution package of slurmctld the plugin depends on (the plugin only
# loads into the release it was built for); SLURM_DEPENDS=no for a Slurm that
# was not installed from packages.
DEB_SLURM_PACKAGE ?= slurmctld
RPM_SLURM_PACKAGE ?= slurm-slurmctld
SLURM_DEPENDS     ?= yes

# The programs and the library as the packages ship them, into $(PKGBUILD)
# (packaging/packaging_test.go checks them for Lucid data).
package-binaries:
	@mkdir -p $(PKGBUILD)/bin $(PKGBUILD)/lib
	$(GO) build $(PKG_GOFLAGS) -o $(PKGBUILD)/bin/ $(addprefix ./cmd/,$(PROGRAMS))
	$(GO) build $(PKG_GOFLAGS) -buildmode=c-shared -o $(PKGBUILD)/lib/libcoscheml.so ./cmd/libcoscheml

package:
	@release=$$(packaging/slurm-release.sh "$(SLURM_INCLUDE)") || exit 1; \
	set -e; \
	echo "make package: coscheml $(VERSION), plugin for Slurm $$release"; \
	GO='$(GO)' NFPM='$(NFPM)' NFPM_VERSION=$(NFPM_VERSION) GO_LICENSES='$(GO_LICENSES)' GO_LICENSES_VERSION=$(GO_LICENSES_VERSION) \
		packaging/fetch-note.sh; \
	rm -rf $(PKGBUILD) && mkdir -p $(PKGBUILD)/plugin dist; \
	$(MAKE) --no-print-directory package-binaries; \
	$(MAKE) -C plugin-c SLURM_INCLUDE="$(SLURM_INCLUDE)" COSCHEML_LIBDIR=/usr/lib/coscheml \
		OUT="$(abspath $(PKGBUILD))/plugin/job_submit_coscheml.so" STAMP="$(abspath $(PKGBUILD))/plugin/.flags"; \
	packaging/stage.sh $(PKGBUILD)/stage $(PKGBUILD)/bin; \
	$(MAKE) --no-print-directory licenses LICENSES_OUT=$(PKGBUILD)/licenses; \
	packaging/plugin-config.sh "$$release" "$(SLURM_DEPENDS)" >$(PKGBUILD)/nfpm-slurm-plugin.yaml; \
	export PKG_VERSION="$(VERSION)" PKG_ARCH="$(PKG_ARCH)" SLURM_RELEASE="$$release" \
		DEB_PLUGINDIR="$(DEB_PLUGINDIR)" RPM_PLUGINDIR="$(RPM_PLUGINDIR)" \
		DEB_SLURM_PACKAGE="$(DEB_SLURM_PACKAGE)" RPM_SLURM_PACKAGE="$(RPM_SLURM_PACKAGE)"; \
	for fmt in deb rpm; do \
		$(NFPM) package --config packaging/nfpm-coscheml.yaml --packager $$fmt --target dist/; \
		$(NFPM) package --config $(PKGBUILD)/nfpm-slurm-plugin.yaml --packager $$fmt --target dist/; \
		$(NFPM) package --config packaging/nfpm-model-lucid.yaml --packager $$fmt --target dist/; \
	done; \
	ls -l dist/

# The licences of the Go modules in the programs and the library, checked and
# written by google/go-licenses (fetched through the Go module proxy at a pinned
# version like nfpm; GO_LICENSES=go-licenses uses one on PATH). licenses-check
# fails on a licence go-licenses classes as forbidden or restricted (e.g. GPL:
# the Go code is Apache-2.0) or cannot classify; CI runs it (.ci/run).
GO_LICENSES_VERSION  ?= v1.6.0
GO_LICENSES          ?= $(GO) run github.com/google/go-licenses@$(GO_LICENSES_VERSION)
LICENSES_DISALLOWED  ?= forbidden,restricted,unknown
LICENSE_PKGS         := $(addprefix ./cmd/,$(PROGRAMS)) ./cmd/libcoscheml
LICENSES_OUT         ?= build/licenses
# go-licenses' warnings (non-Go code it cannot inspect, licence URLs it cannot
# look up offline) go to this log; errors still reach the terminal.
LICENSES_LOG         ?= build/go-licenses.log
GO_LICENSES_FLAGS    = --logtostderr=false --stderrthreshold=ERROR --log_file=$(LICENSES_LOG)

licenses-check:
	@echo "make licenses-check: go-licenses $(GO_LICENSES_VERSION) on $(LICENSE_PKGS) (disallowed: $(LICENSES_DISALLOWED))"
	@mkdir -p $(dir $(LICENSES_LOG))
	$(GO_LICENSES) check $(GO_LICENSES_FLAGS) --disallowed_types=$(LICENSES_DISALLOWED) $(LICENSE_PKGS)

# Each dependency's licence texts (and notices) under LICENSES_OUT/<module>/,
# the Go distribution's LICENSE (the runtime and standard library are linked in)
# and dependencies.csv (package, licence URL, licence).
licenses: licenses-check
	rm -rf $(LICENSES_OUT)
	$(GO_LICENSES) save $(GO_LICENSES_FLAGS) --save_path $(LICENSES_OUT) --ignore github.com/coscheml/coscheml $(LICENSE_PKGS)
	$(GO_LICENSES) report $(GO_LICENSES_FLAGS) --ignore github.com/coscheml/coscheml $(LICENSE_PKGS) >$(LICENSES_OUT)/dependencies.csv
	install -d $(LICENSES_OUT)/go.dev/go && install -m 0644 "$$($(GO) env GOROOT)/LICENSE" $(LICENSES_OUT)/go.dev/go/LICENSE
	@echo "make licenses: $$(find $(LICENSES_OUT) -type f | wc -l) files in $(LICENSES_OUT)"

# The packages installed here (root, Debian's slurm-wlm) and the integration suite
# run against them (COSCHEML_INSTALLED=/usr), under the suite's lock; purged after.
test-deb-suite:
	GO=$(GO) packaging/test-deb-suite.sh

clean:
	rm -rf bin demo-report build dist lib/libcoscheml.so lib/libcoscheml.h lib/slurm-*
	-$(MAKE) -C plugin-c clean
