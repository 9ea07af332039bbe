# heapline. `make` builds everything into bin/, `make test` runs every test,
# `make run` builds and runs the main job, `make docs` regenerates
# docs/cli.md. Debian packages the tests need are installed by `make deps`
# (called by `make test`), so a fresh machine needs nothing by hand.

# all is the goal of a plain `make`, whatever rules come first below.
.DEFAULT_GOAL := all

GO     ?= go
CC     ?= gcc
BIN    := bin
SCEN_CFLAGS ?= -O2 -g -pthread -Wall -Wextra
SCEN_CXXFLAGS ?= -O2 -g -pthread -Wall -Wextra -std=c++17

PRELOAD_SRC := $(wildcard preload/*.c preload/*.h preload/*.go)
GO_SRC      := $(shell find ctl bpf internal -name '*.go' -o -name '*.o' 2>/dev/null) go.mod go.sum
SCEN_BINS   := $(patsubst scenarios/%.c,$(BIN)/%,$(wildcard scenarios/*.c)) \
               $(patsubst scenarios/%.cc,$(BIN)/%,$(wildcard scenarios/*.cc))

# The Debian packages are listed in debian-packages.txt, one a line under
# the list that names it, with why; debs reads a list.
debs = $(shell sed -n '/^\[$(1)\]/,/^\[/{/^[a-z0-9]/s/[[:space:]].*//p;}' debian-packages.txt)
BUILD_DEBS := $(call debs,build)
BUILD_NEEDS = $(BUILD_DEBS)
OVERHEAD_DEBS := $(BUILD_DEBS) $(call debs,overhead)
DEBS := $(OVERHEAD_DEBS) $(call debs,test)

# ---- arm64 ------------------------------------------------------------
# `make ARCH=arm64` cross-builds libheap.so, heapctl and the helpers for
# linux/arm64 into bin/arm64/ (no scenarios: the C++ ones would need a
# cross g++). `make test-arm64` runs them under qemu-user
# (.ci/test-arm64.sh): Debian's cross gcc and libc, qemu-user-static, and
# binfmt-support for the binfmt_misc entry that lets heapctl exec arm64
# children.
DEBS_ARM64 := $(call debs,arm64)
ifeq ($(ARCH),arm64)
BIN := bin/arm64
CC := aarch64-linux-gnu-gcc
export CC
export GOARCH := arm64
SCEN_BINS :=
BUILD_NEEDS += $(DEBS_ARM64)
endif

.PHONY: FORCE all scenarios test run deps deps-overhead build-deps deps-arm64 test-arm64 generate docs bench clean

# all comes after the arm64 block: its prerequisites are expanded as it is
# read, with that block's BIN and SCEN_BINS.
all: $(BIN)/libheap.so $(BIN)/libfloor.so $(BIN)/heapline-rusage $(BIN)/heapctl scenarios

test-arm64: PKGS = $(DEBS_ARM64)
test-arm64: deps-arm64
	$(MAKE) ARCH=arm64 all
	.ci/test-arm64.sh

# preload/exports.map limits what the shim exports; cgo's own LDFLAGS may
# not name a version script, so it is passed to the external linker here.
# The go build cache does not know the version script: without the rm, a
# change to exports.map alone leaves the library as it was.
# build-deps only where it has packages to install (arm64's cross
# compiler): a plain make installs nothing.
# It is the one recipe of libheap.so: testkit, release/build.sh and bench/
# call it as `make BIN=DIR DIR/libheap.so`, a variant's C defines in
# LIB_CFLAGS (bench/sampling.sh's default HEAPLINE_SAMPLE), the release's
# go build flags in LIB_GOFLAGS.
LIB_CFLAGS ?=
LIB_GOFLAGS ?=
LIB_ENV = $(if $(strip $(LIB_CFLAGS)),CGO_CFLAGS="$${CGO_CFLAGS:--g -O2} $(LIB_CFLAGS)" )
LIB_BUILD = $(strip $(GO) build $(LIB_GOFLAGS))
$(BIN)/libheap.so: $(PRELOAD_SRC) preload/exports.map | $(if $(strip $(BUILD_NEEDS)),build-deps)
	@rm -f $@
	CGO_ENABLED=1 $(LIB_ENV)$(LIB_BUILD) -buildmode=c-shared -ldflags=-extldflags=-Wl,--version-script=$(CURDIR)/preload/exports.map -o $@ ./preload
	@rm -f $(BIN)/libheap.h

# The musl build of the shim (docs/shim.md, musl): the same C, built with
# musl-gcc as a plain shared library. A Go c-shared library built against
# musl crashes at load (golang/go#13492), and the shim's Go part is empty,
# so there is nothing of Go to keep: goruntime.c, which tames that Go
# runtime, is left out. HL_MUSL marks what musl does differently
# (preload/musl.h). The installed layout puts it under a directory
# literally named $$LIB (docs/containers.md: one LD_PRELOAD for both libcs).
# musl-gcc's specs drop gcc's --eh-frame-hdr, which the shim's unwinder
# finds each object's unwind tables by: given back here.
MUSL_CC ?= musl-gcc
MUSL_CFLAGS := -O2 -g -std=gnu11 -D_GNU_SOURCE -DHL_MUSL -fPIC -ftls-model=initial-exec -fvisibility=hidden \
	-fno-strict-aliasing -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free \
	-Wall -Wextra -Wno-unused-parameter
MUSL_SRC := $(filter-out preload/goruntime.c,$(wildcard preload/*.c))
$(BIN)/musl/libheap.so: $(MUSL_SRC) $(wildcard preload/*.h) preload/exports.map
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(MUSL_CFLAGS) -shared -Wl,--version-script=$(CURDIR)/preload/exports.map -Wl,-z,defs -Wl,--eh-frame-hdr -o $@ $(MUSL_SRC)

# The floor of `heapctl overhead --floor`: bench/floor/packed.c, the
# shim's counting with nothing around it, one slot per thread.
$(BIN)/libfloor.so: bench/floor/packed.c
	@mkdir -p $(BIN)
	$(CC) -O2 -shared -fPIC -fvisibility=hidden -DPER_THREAD -o $@ $< -ldl

# The runner of `heapctl allocators`' timed runs: a real fork, so that a
# run's ru_maxrss is its own (helpers/rusage.c says why).
$(BIN)/heapline-rusage: helpers/rusage.c
	@mkdir -p $(BIN)
	$(CC) -O2 -Wall -Wextra -o $@ $<

# -buildvcs=auto: GOFLAGS may say false (this machine's go env does), and
# then `heapctl --version` could not name its commit. VERSION_LDFLAGS
# stamps the release's version (the release block below).
# go build decides whether heapctl is stale (FORCE: the recipe runs on
# every make): it knows every file ctl imports, where a list of make's
# misses some. GO_SRC keeps make's own view for make -q.
$(BIN)/heapctl: $(GO_SRC) FORCE
	$(GO) build -buildvcs=auto -ldflags="$(VERSION_LDFLAGS)" -o $@ ./ctl

scenarios: $(SCEN_BINS)

$(BIN)/%: scenarios/%.c scenarios/scenario.h
	@mkdir -p $(BIN)
	$(CC) $(SCEN_CFLAGS) -o $@ $<

$(BIN)/%: scenarios/%.cc scenarios/scenario.h
	@mkdir -p $(BIN)
	$(CXX) $(SCEN_CXXFLAGS) -o $@ $<

# Each deps target installs the packages of its list that are missing,
# and never upgrades one the host has: only the missing ones are named,
# with --no-upgrade besides. apt still upgrades an installed package when
# a new one needs a newer version of it (a -dev package and its library,
# perl and perl-base): that is the one way to install the new one, so
# make names those upgrades first (from apt-get -s) and goes on.
deps: PKGS = $(DEBS)
deps-overhead: PKGS = $(OVERHEAD_DEBS)
build-deps: PKGS = $(BUILD_NEEDS)
deps-arm64: PKGS = $(DEBS_ARM64)
deps deps-overhead build-deps deps-arm64 deps-release deps-containers deps-musl:
	@set -- $(sort $(PKGS)); n="$$# package"; [ $$# = 1 ] || n="$${n}s"; missing=""; \
	for p in "$$@"; do [ "$$(dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null)" = installed ] || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "make $@: $$n, all installed"; exit 0; fi; \
	set -- $$missing; echo "make $@: $$n, $$# missing, installing:$$missing"; \
	SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	$$SUDO apt-get update -qq || exit 1; \
	up=$$(apt-get install -s -qq --no-upgrade $$missing | sed -n 's/^Inst \([^ ]*\) \[.*/ \1/p' | tr -d '\n'); \
	[ -z "$$up" ] || echo "make $@: they need newer versions of installed packages, which apt upgrades:$$up"; \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-upgrade $$missing

# The go build cache does not see preload/region.h from ctl's cdefs package,
# nor summary_line.[ch] from report's cline (cgo tracks the files of the
# package's own directory only), so an edit to them alone left the tests
# checking the old C. Their hash in CGO_CFLAGS is part of every cgo build's
# key.
LAYOUT_SUM = CGO_CFLAGS="$${CGO_CFLAGS:--g -O2} -DHL_REGION_H_SUM=$$(cat preload/region.h preload/summary_line.h preload/summary_line.c | sha256sum | cut -c1-16)"

# go test -json through ctl/internal/testprogress: each package is named
# as its tests start, each result shown as it ends, a failed test's
# output in full (ctl's tests alone take minutes). bash for pipefail:
# go test's own status is the target's.
test: deps all
	$(LAYOUT_SUM) $(GO) vet ./...
	$(GO) build -o $(BIN)/testprogress ./ctl/internal/testprogress
	$(LAYOUT_SUM) bash -o pipefail -c '$(GO) test -json -count=1 -timeout 45m ./... 2>&1 | $(BIN)/testprogress'

run: all
	$(BIN)/heapctl overhead churn-4t -n 10

# bpf/heap.c -> bpf/heap_x86_bpfel.{o,go} (committed: `make` needs no clang;
# bpf's TestGeneratedMatchSources fails when they drift from the source).
generate:
	$(GO) generate ./bpf/...

# docs/cli.md (every heapctl command, flag and exit status) is rendered
# from heapctl's own commands by ctl/clidoc_test.go; its TestCLIDocCurrent
# fails when the page drifts from them, and writes the fresh page beside
# it as docs/cli.md.new.
docs:
	$(GO) test ./ctl -run TestCLIDocCurrent -count=1 -update

# docs/profiling-flamegraph.png is a real screenshot: sites.c's flame graph
# in heapctl view, as headless Chromium draws it in TestViewBrowserFlameGraph.
.PHONY: screenshots
screenshots:
	HEAPLINE_SCREENSHOT=$(CURDIR)/docs/profiling-flamegraph.png $(GO) test ./ctl -run TestViewBrowserFlameGraph -count=1

clean:
	rm -rf $(BIN) $(DIST)

FORCE:

# --- release: make dist, make test-dist (docs/releasing.md) ---
# VERSION is release/version.sh's: git describe, spelled as a Debian
# version (0.0.0~git<commits>.<hash> before the first tag), stamped into
# heapctl (`heapctl --version`) and naming the .deb and the tarball.
VERSION ?= $(shell release/version.sh)
VERSION_LDFLAGS := -X github.com/heapline/heapline/ctl/internal/version.release=$(VERSION)
DIST ?= dist
# DIST_ARCHS are the release's architectures, each its own tarball and
# .deb, all in one SHA256SUMS: release/build.sh maps each to GOARCH and
# the host's C compiler (gcc, arm64's gcc-aarch64-linux-gnu) that builds
# libheap.so against the Debian 11 chroot as a sysroot (release/chroot.sh,
# cached under /var/cache/heapline/). debootstrap makes the chroots;
# systemd-analyze (systemd) verifies the .deb's unit;
# release's TestSymbolVersions reads arm64 files with aarch64's objdump.
# make test-dist checks TEST_DIST_ARCH's (amd64) in the chroots: not ARCH,
# which is the cross-build's (arm64 block).
TEST_DIST_ARCH ?= amd64
DIST_ARCHS ?= amd64 arm64
RELEASE_DEBS := $(call debs,release)
DEBS += $(RELEASE_DEBS)

.PHONY: dist test-dist deps-release
deps-release: PKGS = $(RELEASE_DEBS)
dist: deps-release
	for a in $(DIST_ARCHS); do release/dist.sh $(DIST) $(VERSION) $$a || exit 1; done
# The release on Debian 11 and 13 (chroots cached beside the build's):
# .ci/run calls it after make test.
test-dist: dist
	release/test-dist.sh $(DIST) $(TEST_DIST_ARCH)
# --- end of release ---

# ---- musl ---------------------------------------------------------------
# The musl build of the shim on musl-gcc programs (ctl/musl_test.go,
# MUSL_TESTS=1): known-answer counts, the sampled profile, fork, exec and
# threads, heapctl run's choice of library, and one LD_PRELOAD for both
# libcs. musl-tools is Debian's musl-gcc (musl 1.2.3).
MUSL_DEBS := $(call debs,musl)
DEBS += $(MUSL_DEBS)
.PHONY: test-musl deps-musl
deps-musl: PKGS = $(MUSL_DEBS)
test-musl: deps-musl
	MUSL_TESTS=1 $(GO) test -count=1 -run 'TestMusl' ./ctl

# ---- containers ------------------------------------------------------
# The node's view of real containers (ctl/containers_podman_test.go,
# ctl/containers_node_test.go): podman with runc (crun fails on hybrid
# cgroups), its image imported from release/chroot.sh's chroot
# (debootstrap, cached). The unshare(1) tests of the same read path run
# in make test as well.
CONTAINER_DEBS := $(call debs,containers)
.PHONY: test-containers deps-containers
deps-containers: PKGS = $(CONTAINER_DEBS)
test-containers: deps-containers all
	CONTAINER_TESTS=1 $(GO) test -count=1 -run 'TestContainer|TestPodman' ./ctl

# ---- python -----------------------------------------------------------
# The newest CPythons (python3.14, python3.15) of a Debian sid chroot
# (release/chroot.sh sid, cached beside the release's), with this tree's
# bin/ inside: the TestSid* tests built with -tags sidpython
# (.ci/test-python.sh, internal/testkit/sid.go). deps-release installs
# debootstrap, which release/chroot.sh makes the chroot with.
.PHONY: test-python
test-python: deps-release all
	.ci/test-python.sh
