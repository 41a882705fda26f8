# incoll: one plain GNU Makefile. `make`, `make test`, `make check`,
# `make demo`, `make bench`, `make install`, `make uninstall`, `make format`,
# `make clean`, `make deps`, `make tests`, `make fuzz` (and `make fuzz-run`:
# each parser harness for FUZZ_TIME s).
#
# What the build includes (libsodium, SimGrid, hwloc, each MPI) is decided
# when make reads this file. So `make demo` and `make test`, a newcomer's
# first commands, install the missing packages first
# (scripts/install-deps.sh) and only then run a second make (demo-run,
# check) that reads this file again and sees them. `make check` is the
# test run alone, without apt-get: what a package build runs.
#
# For packagers: CC, CPPFLAGS, CFLAGS and LDFLAGS are honoured (the
# project's own flags come on top of them), the GNU installation
# directories below can each be set, and DESTDIR is prefixed to every
# installed path. WITH_HWLOC, WITH_SIMGRID and WITH_MPI are each `auto`
# (the default: built when found), `yes` (the build stops when it is
# missing) or `no` (never built, even when installed).

# Installation directories (PREFIX is the older spelling of prefix).
PREFIX       ?= /usr/local
prefix       ?= $(PREFIX)
# A system install (prefix /usr or /usr/local) puts the units, the Slurm
# plugin and the Open MPI component where systemd, Slurm and Open MPI look;
# any other prefix is a private tree and keeps them under it.
SYSTEM_PREFIX = $(filter /usr /usr/local,$(patsubst %/,%,$(prefix)))
exec_prefix  ?= $(prefix)
bindir       ?= $(exec_prefix)/bin
libdir       ?= $(exec_prefix)/lib
libexecdir   ?= $(exec_prefix)/libexec
includedir   ?= $(prefix)/include
pkgconfigdir ?= $(libdir)/pkgconfig

CC       ?= cc
BUILD    := build
CFLAGS   ?= -O2 -g
CPPFLAGS ?=
LDFLAGS  ?=
WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter
# WERROR=1 (CI: .ci/run) makes every warning an error.
ifeq ($(WERROR),1)
WARN     += -Werror
endif
BASEFLAGS := -std=c11 -D_GNU_SOURCE -fvisibility=hidden -Iinclude -Isrc $(WARN) $(CPPFLAGS)
LDLIBS   := -lm -lpthread

WITH_HWLOC   ?= auto
WITH_SIMGRID ?= auto
WITH_MPI     ?= auto
# $(call with_found,WITH,found): found unless WITH is no.
with_found = $(if $(filter no,$(1)),,$(2))

# The version of libincoll: libincoll.so.$(VERSION), soname
# libincoll.so.$(SOVERSION), incoll.pc. Major and minor come from
# include/incoll.h (INCOLL_VERSION_MAJOR/MINOR), so the two cannot drift.
VERSION   := $(shell sed -n 's/^\#define INCOLL_VERSION_MAJOR \([0-9]*\).*/\1/p' include/incoll.h).$(shell sed -n 's/^\#define INCOLL_VERSION_MINOR \([0-9]*\).*/\1/p' include/incoll.h).0
SOVERSION := $(firstword $(subst ., ,$(VERSION)))
SONAME    := libincoll.so.$(SOVERSION)

SIMGRID_OK := $(call with_found,$(WITH_SIMGRID),$(shell pkg-config --exists simgrid 2>/dev/null && echo 1))
SODIUM_OK  := $(shell pkg-config --exists libsodium 2>/dev/null && echo 1)
# libsodium is required: without it the manager's control channel has no
# authentication, so `incoll fabric up` cannot make the fabric's secret
# and neither the demo nor most tests can run. Building anything then stops
# with a message naming `make deps` (check-sodium, below), rather than
# giving a tree that fails later. NO_SODIUM=1 builds without it anyway
# (fabrics without a manager only: `incoll fabric up --no-mgr`).
ifeq ($(SODIUM_OK),1)
BASEFLAGS += -DINCOLL_HAVE_SODIUM=1
LDLIBS    += -lsodium
endif
# OpenSSL's libcrypto (libssl-dev) is optional: with it the poly1305 and
# gmac data-path MACs (the default is poly1305) take their payload digests
# from its vectorized code, several times libsodium's speed on 8 KiB
# packets; without it libsodium computes the same bits.
OPENSSL_OK := $(shell pkg-config --exists libcrypto 2>/dev/null && echo 1)
ifeq ($(OPENSSL_OK),1)
BASEFLAGS += -DINCOLL_HAVE_OPENSSL=1
LDLIBS    += $(shell pkg-config --libs libcrypto)
endif
# hwloc (libhwloc-dev) is optional: it finds the CPU socket of a rank for
# INCOLL_HIER=socket; without it socket mode runs as node mode.
HWLOC_OK := $(call with_found,$(WITH_HWLOC),$(shell pkg-config --exists hwloc 2>/dev/null && echo 1))
ifeq ($(HWLOC_OK),1)
BASEFLAGS += -DINCOLL_HAVE_HWLOC=1
LDLIBS    += $(shell pkg-config --libs hwloc)
endif

# Objects depend on the flags they were built with (and so on whether
# libsodium and SimGrid were found): installing a package rebuilds them.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) $(LDLIBS) simgrid=$(SIMGRID_OK) mpi=$(WITH_MPI)
$(shell mkdir -p $(BUILD) && echo '$(FLAGS_NOW)' | cmp -s - $(FLAGS_STAMP) || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))

LIB_SRCS  := $(sort $(wildcard src/common/*.c src/core/*.c src/host/*.c))
AGG_SRCS  := $(sort $(wildcard src/agg/*.c))
MGR_SRCS  := $(sort $(wildcard src/mgr/*.c))
FABRIC_SRCS := $(sort $(wildcard src/fabric/*.c))
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TEST_SRCS := $(sort $(wildcard tests/*.c))
SIM_SRCS  := $(sort $(wildcard src/sim/*.c))

LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
AGG_OBJS  := $(AGG_SRCS:%.c=$(BUILD)/obj/%.o)
MGR_OBJS  := $(MGR_SRCS:%.c=$(BUILD)/obj/%.o)
FABRIC_OBJS := $(FABRIC_SRCS:%.c=$(BUILD)/obj/%.o)
TOOL_OBJS := $(TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/obj/%.o)
# Tools and daemons share code in src/agg and src/mgr that is not main().
# src/fabric (the fabric lifecycle, the emulated network, talking to a
# fabric's manager and ANs) is the CLI's and the tests', never linked into
# the daemons.
AGG_LIB_OBJS := $(filter-out %/agg_main.o,$(AGG_OBJS))
MGR_LIB_OBJS := $(filter-out %/mgr_main.o,$(MGR_OBJS)) $(FABRIC_OBJS)

# The benchmarks' option parser is unit tested (tests/test_bench.c), so
# the test binaries link it too.
TEST_TOOL_SRCS := tools/bench_opts.c tools/bench_rank.c
TEST_TOOL_OBJS := $(TEST_TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
# At -O1 gcc cannot see that emu.c's namespace names fit their buffers
# (they are checked where they are made) and warns of truncation.
$(BUILD)/asan/src/fabric/emu.o: ASAN_FLAGS += -Wno-format-truncation

ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The ASan+UBSan binary runs the unit tests alone (--unit), so it is built
# from the test files that register one (and the helpers beside them), not
# from those with integration tests only.
ASAN_TEST_SRCS := $(filter-out $(shell grep -L TEST_UNIT tests/test_*.c),$(TEST_SRCS))
ASAN_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/asan/%.o) $(AGG_LIB_OBJS:$(BUILD)/obj/%.o=$(BUILD)/asan/%.o) \
              $(MGR_LIB_OBJS:$(BUILD)/obj/%.o=$(BUILD)/asan/%.o) $(ASAN_TEST_SRCS:%.c=$(BUILD)/asan/%.o) \
              $(TEST_TOOL_SRCS:%.c=$(BUILD)/asan/%.o)

BINS := $(BUILD)/bin/incoll $(BUILD)/bin/incoll-agg
ifneq ($(MGR_SRCS),)
BINS += $(BUILD)/bin/incoll-mgr
endif
# The shared library as an installed tree has it: the real file, the
# soname link the dynamic loader looks for, and the link -lincoll finds.
SO_FILES := $(BUILD)/lib/libincoll.so $(BUILD)/lib/$(SONAME) $(BUILD)/lib/libincoll.so.$(VERSION)
LIBS := $(SO_FILES) $(BUILD)/lib/libincoll.a

.PHONY: all test test-run check tests unit-test demo demo-run bench install uninstall install-sim install-mpi format format-check clean deps sim mpi check-sodium probe
all: $(LIBS) $(BINS)

# tools/paths.c finds the installed libraries and helper programs there:
# it alone is rebuilt when the directories change (DIRS_STAMP).
DIRS_STAMP := $(BUILD)/.dirs
DIRS_NOW   := libdir=$(libdir) libexecdir=$(libexecdir)
$(shell mkdir -p $(BUILD) && echo '$(DIRS_NOW)' | cmp -s - $(DIRS_STAMP) || echo '$(DIRS_NOW)' > $(DIRS_STAMP))
$(BUILD)/obj/tools/paths.o: $(DIRS_STAMP)
$(BUILD)/obj/tools/paths.o: BASEFLAGS += -DINCOLL_LIBDIR='"$(libdir)"' -DINCOLL_LIBEXECDIR='"$(libexecdir)"'

deps:
	@bash scripts/install-deps.sh

check-sodium:
ifneq ($(SODIUM_OK),1)
ifneq ($(NO_SODIUM),1)
	@echo "make: libsodium-dev is not installed; incoll needs it (the manager's authentication)." >&2
	@echo "make: \`make deps\` installs it and the other packages (as root; else it prints the apt-get line)," >&2
	@echo "make: or: apt-get install libsodium-dev. (NO_SODIUM=1 builds without it: fabrics without a manager only.)" >&2
	@exit 1
endif
endif
ifeq ($(WITH_HWLOC)-$(HWLOC_OK),yes-)
	@echo "make: WITH_HWLOC=yes but pkg-config finds no hwloc (libhwloc-dev; make deps)" >&2; exit 1
endif
ifeq ($(WITH_SIMGRID)-$(SIMGRID_OK),yes-)
	@echo "make: WITH_SIMGRID=yes but pkg-config finds no simgrid (libsimgrid-dev; make deps)" >&2; exit 1
endif
ifeq ($(WITH_MPI),yes)
	@command -v $(MPICC) >/dev/null 2>&1 || { echo "make: WITH_MPI=yes but there is no $(MPICC) (libopenmpi-dev; make deps)" >&2; exit 1; }
endif

# Every object waits for check-sodium (order-only: it does not make them
# out of date), so a missing libsodium, or a missing part that WITH_...=yes
# asks for, stops the build before it starts.
$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | check-sodium
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/asan/%.o: %.c $(FLAGS_STAMP) | check-sodium
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -MMD -MP -c $< -o $@

# Two archives of the library's objects. The programs of this tree link
# libincoll-internal.a, whose internal functions (log_emit, wire_*, ...)
# they call. The installed build/lib/libincoll.a is one relocatable object
# whose hidden symbols (everything the code does not mark INCOLL_API:
# it is built with -fvisibility=hidden) are made local, so only the public
# API is global and an application linking it statically cannot clash
# with an internal name (tests/test_settings.c: lib_static_symbols).
INTERNAL_A := $(BUILD)/obj/libincoll-internal.a

$(INTERNAL_A): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libincoll.a: $(LIB_OBJS)
	@mkdir -p $(dir $@) $(BUILD)/obj
	$(LD) -r -o $(BUILD)/obj/libincoll-all.o $^
	objcopy --localize-hidden $(BUILD)/obj/libincoll-all.o
	rm -f $@ && ar rcs $@ $(BUILD)/obj/libincoll-all.o

$(BUILD)/lib/libincoll.so.$(VERSION): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

$(BUILD)/lib/$(SONAME): $(BUILD)/lib/libincoll.so.$(VERSION)
	ln -sfn libincoll.so.$(VERSION) $@

$(BUILD)/lib/libincoll.so: $(BUILD)/lib/$(SONAME)
	ln -sfn $(SONAME) $@

$(BUILD)/bin/incoll-agg: $(AGG_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(AGG_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/bin/incoll-mgr: $(MGR_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(MGR_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/bin/incoll: $(TOOL_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TOOL_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/tests/incoll-tests: $(TEST_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(TEST_TOOL_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TEST_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(TEST_TOOL_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/tests/incoll-tests-asan: $(ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_FLAGS) -o $@ $(ASAN_OBJS) $(LDLIBS)

# Test programs run by the integration tests under `incoll run`.
TESTPROG_SRCS := $(sort $(wildcard tests/progs/*.c))
TESTPROGS := $(TESTPROG_SRCS:tests/progs/%.c=$(BUILD)/tests/%)
$(BUILD)/tests/%: tests/progs/%.c $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(INTERNAL_A) $(LDLIBS)

# The probes (tests/probe/*.c): long runs that check what `make test`
# checks at small scale, outside it (`make probe`, then run them).
PROBE_SRCS := $(sort $(wildcard tests/probe/*.c))
PROBES := $(PROBE_SRCS:tests/probe/%.c=$(BUILD)/tests/probe/%)
$(BUILD)/tests/probe/%: tests/probe/%.c $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(INTERNAL_A) $(LDLIBS)

probe: all $(BUILD)/tests/incoll-tests $(TESTPROGS) $(PROBES)

# `make test` and `make demo`: the packages first, then a make that sees
# them (see the top of this file). Without root, install-deps only lists
# what is missing and the demo stops; so do the tests when a required
# package is missing, while a missing optional one only makes the tests
# that need it skip. `make check` runs the tests without installing
# anything (a package build's test step); test-run is its older name.
# Its build runs one compiler per core unless make was given -j.
NPROC    := $(shell nproc 2>/dev/null || echo 1)
AUTO_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))
test:
	@bash scripts/install-deps.sh --optional-ok
	@$(MAKE) --no-print-directory $(AUTO_JOBS) check

TEST_BINS := $(BUILD)/tests/incoll-tests $(BUILD)/tests/incoll-tests-asan $(TESTPROGS)
# Every test binary and test program, built and not run.
tests: all $(TEST_BINS)

check test-run: all $(TEST_BINS)
	@bash scripts/run-tests.sh

unit-test: $(BUILD)/tests/incoll-tests
	$(BUILD)/tests/incoll-tests --unit

demo:
	@bash scripts/install-deps.sh
	@$(MAKE) --no-print-directory demo-run

demo-run: all
	@bash scripts/demo.sh

bench: all
	$(BUILD)/bin/incoll bench kernel

# What `make install` puts where (each under DESTDIR): the programs in
# bindir, the libraries in libdir, the programs only incoll itself runs
# in libexecdir/incoll, the header in includedir, incoll.pc in
# pkgconfigdir. The programs find the libraries and helpers there when
# they are not beside them as in the build tree (tools/paths.c).
INSTALL_PC_REQUIRES := $(if $(filter 1,$(SODIUM_OK)),libsodium) $(if $(filter 1,$(HWLOC_OK)),hwloc) $(if $(filter 1,$(OPENSSL_OK)),libcrypto)
install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(libdir) $(DESTDIR)$(includedir) $(DESTDIR)$(pkgconfigdir)
	install -m 755 $(BINS) $(DESTDIR)$(bindir)/
	install -m 644 $(BUILD)/lib/libincoll.a $(DESTDIR)$(libdir)/
	install -m 755 $(BUILD)/lib/libincoll.so.$(VERSION) $(DESTDIR)$(libdir)/
	ln -sfn libincoll.so.$(VERSION) $(DESTDIR)$(libdir)/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(libdir)/libincoll.so
	install -m 644 include/incoll.h $(DESTDIR)$(includedir)/
	sed -e 's|@PREFIX@|$(prefix)|' -e 's|@LIBDIR@|$(libdir)|' -e 's|@INCLUDEDIR@|$(includedir)|' \
	    -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES_PRIVATE@|$(strip $(INSTALL_PC_REQUIRES))|' \
	    incoll.pc.in > $(DESTDIR)$(pkgconfigdir)/incoll.pc

# Removes what install put there (the same variables must be given).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(notdir $(BINS)) incoll-sim)
	rm -f $(addprefix $(DESTDIR)$(libdir)/,libincoll.a libincoll.so $(SONAME) libincoll.so.$(VERSION) libincoll_mpi.so libincoll_mpi_mpich.so)
	rm -f $(addprefix $(DESTDIR)$(libexecdir)/incoll/,incoll-launch-agent incoll-bench-mpi incoll-tune-mpi)
	-rmdir $(DESTDIR)$(libexecdir)/incoll 2>/dev/null
	rm -f $(DESTDIR)$(includedir)/incoll.h $(DESTDIR)$(pkgconfigdir)/incoll.pc

# One clang-format version, so that the check gives the same answer on
# every machine (CI runs format-check; install-deps installs it).
CLANG_FORMAT ?= clang-format-14
format:
	$(CLANG_FORMAT) -i $$(git ls-files '*.c' '*.h')

format-check:
	@$(CLANG_FORMAT) --dry-run --Werror $$(git ls-files '*.c' '*.h') && \
	    echo "format-check: every C file is formatted ($(CLANG_FORMAT))"

clean:
	rm -rf $(BUILD)

# --- MPI layer (src/mpi) ---
# libincoll_mpi, the PMPI interposer (docs/mpi.md). One build per MPI ABI,
# since a wrapper built for one MPI aborts under the other:
#   build/lib/libincoll_mpi.so        the default `mpicc` (Open MPI on Debian)
#   build/lib/libincoll_mpi_mpich.so  `mpicc.mpich`, when installed
# Each uses libincoll through its public API only (include/incoll.h; the
# check in tests/test_ompi.c, front_ends_public_api): it links the shared
# libincoll.so.$(SOVERSION) (found next to it: RUNPATH $$ORIGIN, in
# build/lib and in libdir alike) and exports only the MPI entry points
# (src/mpi/exports.map). The MPI test
# programs of tests/mpi go to build/tests/mpi (default MPI) and
# build/tests/mpi-mpich. Everything here is skipped when the compilers are
# missing; tests/test_mpi.c then skips too.
MPICC        ?= mpicc
MPIF90       ?= mpif90
MPICC_MPICH  ?= mpicc.mpich
MPIF90_MPICH ?= mpif90.mpich
MPI_HAVE = $(call with_found,$(WITH_MPI),$(shell command -v $(1) >/dev/null 2>&1 && echo 1))
MPI_SRCS    := $(sort $(wildcard src/mpi/*.c))
# The one source of src/common built into the layer: its communicator
# table, a leaf of the C library alone (no libincoll code or symbol).
MPI_LEAF    := hashtab
MPI_CFLAGS  := $(BASEFLAGS) $(CFLAGS) -fPIC
MPI_SOFLAGS := -shared -Wl,--version-script=src/mpi/exports.map -Wl,-z,defs
MPI_SOLIBS   = -L$(BUILD)/lib -lincoll -Wl,-rpath,'$$ORIGIN' -lpthread -ldl
MPI_TEST_CFLAGS := -std=c11 -D_GNU_SOURCE -Isrc $(WARN) $(CFLAGS)
MPI_TEST_FFLAGS := -Wall $(CFLAGS)
MPI_TEST_C  := $(sort $(wildcard tests/mpi/*.c))
MPI_TEST_F  := $(sort $(wildcard tests/mpi/*.f90))
MPI_TARGETS :=
# The MPI test programs: built by `make tests` and the test run, not `all`.
MPI_TEST_TARGETS :=

# The remote shell through which `incoll mpirun --emulate` starts MPI's
# daemons inside the emulated hosts (tools/mpi/launch_agent.c). Plain C:
# built whether or not an MPI is installed.
MPI_TARGETS += $(BUILD)/bin/incoll-launch-agent
$(BUILD)/bin/incoll-launch-agent: tools/mpi/launch_agent.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<

ifeq ($(call MPI_HAVE,$(MPICC)),1)
MPI_OBJS_DEF := $(MPI_SRCS:src/mpi/%.c=$(BUILD)/obj/mpi-default/%.o) $(MPI_LEAF:%=$(BUILD)/obj/mpi-default/%.o)
MPI_TARGETS  += $(BUILD)/lib/libincoll_mpi.so
MPI_TEST_TARGETS += $(MPI_TEST_C:tests/mpi/%.c=$(BUILD)/tests/mpi/%)
$(BUILD)/obj/mpi-default/%.o: src/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(MPI_LEAF:%=$(BUILD)/obj/mpi-default/%.o): $(BUILD)/obj/mpi-default/%.o: src/common/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/lib/libincoll_mpi.so: $(MPI_OBJS_DEF) $(SO_FILES) src/mpi/exports.map
	@mkdir -p $(dir $@)
	$(MPICC) $(LDFLAGS) $(MPI_SOFLAGS) -o $@ $(MPI_OBJS_DEF) $(MPI_SOLIBS)
# (they may include header-only helpers of src/common, e.g. netdev.h)
$(BUILD)/tests/mpi/%: tests/mpi/%.c src/common/netdev.h tests/mpi/coll_loop.h
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_TEST_CFLAGS) -o $@ $<
# The MPI worker of `incoll bench allreduce --algos ...,mpi`
# (tools/mpi/bench_worker.c): the benchmark's rank side with the MPI
# layer's bootstrap (its objects but the MPI_ wrappers), default MPI.
BENCH_MPI_OBJS := $(BUILD)/obj/mpi-tools/bench_worker.o \
                  $(addprefix $(BUILD)/obj/mpi-default/,mpi_boot.o mpi_comm.o mpi_commstate.o mpi_agree.o mpi_fit.o mpi_layer.o mpi_stats.o mpi_dtype.o) \
                  $(addprefix $(BUILD)/obj/tools/,bench_allreduce.o bench_allreduce_rank.o bench_allreduce_report.o) \
                  $(addprefix $(BUILD)/obj/tools/,bench_colls.o bench_common.o bench_hier.o bench_opts.o bench_plot.o) \
                  $(addprefix $(BUILD)/obj/tools/,bench_rank.o bench_report.o paths.o) \
                  $(FABRIC_OBJS) $(BUILD)/obj/src/mgr/topo.o
MPI_TARGETS  += $(BUILD)/bin/incoll-bench-mpi
$(BUILD)/obj/mpi-tools/%.o: tools/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_CFLAGS) -Itools -MMD -MP -c $< -o $@
$(BUILD)/bin/incoll-bench-mpi: $(BENCH_MPI_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) $(LDFLAGS) -o $@ $(BENCH_MPI_OBJS) $(INTERNAL_A) $(LDLIBS)
# The ranks of `incoll tune` (tools/mpi/tune_worker.c): a plain MPI
# program, run with the layer preloaded.
MPI_TARGETS  += $(BUILD)/bin/incoll-tune-mpi
$(BUILD)/bin/incoll-tune-mpi: $(BUILD)/obj/mpi-tools/tune_worker.o
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) $(LDFLAGS) -o $@ $<
ifeq ($(call MPI_HAVE,$(MPIF90)),1)
MPI_TEST_TARGETS += $(MPI_TEST_F:tests/mpi/%.f90=$(BUILD)/tests/mpi/%)
$(BUILD)/tests/mpi/%: tests/mpi/%.f90
	@mkdir -p $(dir $@)
	$(MPIF90) $(MPI_TEST_FFLAGS) -o $@ $<
endif
endif

ifeq ($(call MPI_HAVE,$(MPICC_MPICH)),1)
MPI_OBJS_MPICH := $(MPI_SRCS:src/mpi/%.c=$(BUILD)/obj/mpi-mpich/%.o) $(MPI_LEAF:%=$(BUILD)/obj/mpi-mpich/%.o)
MPI_TARGETS    += $(BUILD)/lib/libincoll_mpi_mpich.so
MPI_TEST_TARGETS += $(MPI_TEST_C:tests/mpi/%.c=$(BUILD)/tests/mpi-mpich/%)
$(BUILD)/obj/mpi-mpich/%.o: src/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(MPI_LEAF:%=$(BUILD)/obj/mpi-mpich/%.o): $(BUILD)/obj/mpi-mpich/%.o: src/common/%.c
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/lib/libincoll_mpi_mpich.so: $(MPI_OBJS_MPICH) $(SO_FILES) src/mpi/exports.map
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(LDFLAGS) $(MPI_SOFLAGS) -o $@ $(MPI_OBJS_MPICH) $(MPI_SOLIBS)
$(BUILD)/tests/mpi-mpich/%: tests/mpi/%.c src/common/netdev.h tests/mpi/coll_loop.h
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(MPI_TEST_CFLAGS) -o $@ $<
ifeq ($(call MPI_HAVE,$(MPIF90_MPICH)),1)
MPI_TEST_TARGETS += $(MPI_TEST_F:tests/mpi/%.f90=$(BUILD)/tests/mpi-mpich/%)
$(BUILD)/tests/mpi-mpich/%: tests/mpi/%.f90
	@mkdir -p $(dir $@)
	$(MPIF90_MPICH) $(MPI_TEST_FFLAGS) -o $@ $<
endif
endif

.PHONY: mpi install-mpi
mpi: $(MPI_TARGETS)
all: $(MPI_TARGETS)
tests: $(MPI_TARGETS) $(MPI_TEST_TARGETS)
check test-run: $(MPI_TARGETS) $(MPI_TEST_TARGETS)
install: install-mpi
install-mpi: $(filter %.so $(BUILD)/bin/%,$(MPI_TARGETS))
	install -d $(DESTDIR)$(libdir) $(DESTDIR)$(libexecdir)/incoll
	$(if $(filter %.so,$^),install -m 755 $(filter %.so,$^) $(DESTDIR)$(libdir)/,@true)
	$(if $(filter $(BUILD)/bin/%,$^),install -m 755 $(filter $(BUILD)/bin/%,$^) $(DESTDIR)$(libexecdir)/incoll/,@true)
# --- end MPI layer ---

# --- Open MPI component (src/ompi) ---
# build/lib/openmpi/mca_coll_incoll.so, the native Open MPI collective
# component coll/incoll (docs/ompi.md), when the default `mpicc` is Open
# MPI and its development headers (ompi/mca/coll/coll.h, libopenmpi-dev)
# are there. Built against those headers and libincoll's public API only
# (include/incoll.h), linked with the shared libincoll.so.$(SOVERSION)
# (RUNPATH $$ORIGIN/.. for build/lib, and libdir unless the loader looks
# there anyway), only the component's symbol exported
# (src/ompi/exports.map); it
# shares the MPI layer's datatype tables (src/mpi/mpi_dtype.c) and its
# communicator set-up (src/mpi/mpi_commstate.c). `make
# install` puts it in Open MPI's component directory (OMPI_COMPDIR, from
# `ompi_info --path pkglibdir`). WITH_OMPI_COMPONENT=auto|yes|no.
WITH_OMPI_COMPONENT ?= auto
OMPI_INCDIRS := $(if $(filter 1,$(call MPI_HAVE,$(MPICC))),$(shell $(MPICC) --showme:incdirs 2>/dev/null))
OMPI_INCDIR  := $(firstword $(foreach d,$(OMPI_INCDIRS),$(if $(wildcard $(d)/ompi/mca/coll/coll.h),$(d))))
OMPI_COMP_OK := $(call with_found,$(WITH_OMPI_COMPONENT),$(if $(OMPI_INCDIR),1))
OMPI_COMPONENT := $(BUILD)/lib/openmpi/mca_coll_incoll.so
OMPI_COMP_SRCS := $(sort $(wildcard src/ompi/*.c))
.PHONY: ompi install-ompi check-ompi
check-ompi:
ifeq ($(WITH_OMPI_COMPONENT)-$(OMPI_COMP_OK),yes-)
	@echo "make: WITH_OMPI_COMPONENT=yes but no Open MPI development headers (ompi/mca/coll/coll.h; libopenmpi-dev)" >&2; exit 1
endif
ifeq ($(OMPI_COMP_OK),1)
OMPI_COMPDIR ?= $(if $(SYSTEM_PREFIX),$(shell ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p'),$(prefix)/lib/openmpi)
OMPI_COMP_CFLAGS := $(filter-out -std=c11,$(BASEFLAGS)) -std=gnu11 $(CFLAGS) -fPIC \
                    $(addprefix -isystem ,$(OMPI_INCDIRS))
OMPI_COMP_LIBS := $(shell $(MPICC) --showme:link) -lopen-pal
OMPI_SHARED_OBJS := $(addprefix $(BUILD)/obj/ompi/,mpi_dtype.o mpi_commstate.o mpi_agree.o mpi_fit.o)
OMPI_COMP_OBJS := $(OMPI_COMP_SRCS:src/ompi/%.c=$(BUILD)/obj/ompi/%.o) $(OMPI_SHARED_OBJS)
$(BUILD)/obj/ompi/%.o: src/ompi/%.c $(FLAGS_STAMP) | check-ompi
	@mkdir -p $(dir $@)
	$(CC) $(OMPI_COMP_CFLAGS) -MMD -MP -c $< -o $@
$(OMPI_SHARED_OBJS): $(BUILD)/obj/ompi/%.o: src/mpi/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(OMPI_COMP_CFLAGS) -MMD -MP -c $< -o $@
OMPI_COMP_RUNPATH := $$ORIGIN/..$(addprefix :,$(filter-out /lib /usr/lib /usr/lib/%-linux-gnu,$(patsubst %/,%,$(libdir))))
$(OMPI_COMPONENT): $(OMPI_COMP_OBJS) $(SO_FILES) src/ompi/exports.map $(DIRS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,--version-script=src/ompi/exports.map -Wl,-z,defs -o $@ \
	    $(OMPI_COMP_OBJS) -L$(BUILD)/lib -lincoll -Wl,-rpath,'$(OMPI_COMP_RUNPATH)' -lpthread $(OMPI_COMP_LIBS)
# Its test programs (tests/ompi, tests/test_ompi.c): ocolls, and liboprof.so,
# a PMPI profiler preloaded beside the component; osu_coll, the benchmark
# of docs/ompi.md; othreads, the thread levels; obarrier, MPI_Barrier
# against a point-to-point barrier in one job.
OMPI_TEST_TARGETS := $(BUILD)/tests/ompi/ocolls $(BUILD)/tests/ompi/osu_coll $(BUILD)/tests/ompi/othreads $(BUILD)/tests/ompi/liboprof.so \
                     $(BUILD)/tests/ompi/obarrier
$(BUILD)/tests/ompi/%: tests/ompi/%.c tests/ompi/ocounts.h
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_TEST_CFLAGS) -o $@ $<
$(BUILD)/tests/ompi/liboprof.so: tests/ompi/oprof.c
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_TEST_CFLAGS) -fPIC -shared -o $@ $<
ompi: $(OMPI_COMPONENT)
all: $(OMPI_COMPONENT)
tests check test-run: $(OMPI_COMPONENT) $(OMPI_TEST_TARGETS)
install: install-ompi
install-ompi: $(OMPI_COMPONENT)
	install -d $(DESTDIR)$(OMPI_COMPDIR)
	install -m 755 $(OMPI_COMPONENT) $(DESTDIR)$(OMPI_COMPDIR)/
uninstall: uninstall-ompi
uninstall-ompi:
	rm -f $(DESTDIR)$(OMPI_COMPDIR)/mca_coll_incoll.so
else
ompi: check-ompi
	@echo "make ompi: no Open MPI development headers (ompi/mca/coll/coll.h, libopenmpi-dev): coll/incoll not built" >&2
endif
# `incoll mpirun --layer auto` (tools/mpirun_layer.c) takes the component
# under the Open MPI major.minor it was built against (OMPI_BUILT) and
# finds it in the build tree or OMPI_COMPDIR; without it, the PMPI layer.
ifeq ($(OMPI_COMP_OK),1)
OMPI_BUILT := $(shell $(MPICC) --showme:version 2>/dev/null | sed -n 's/.*Open MPI \([0-9]*\.[0-9]*\).*/\1/p')
$(BUILD)/obj/tools/mpirun_layer.o: BASEFLAGS += -DINCOLL_OMPI_BUILT='"$(OMPI_BUILT)"' -DINCOLL_OMPI_COMPDIR='"$(OMPI_COMPDIR)"'
endif
OMPI_STAMP := $(BUILD)/.ompi
OMPI_NOW   := ompi=$(OMPI_COMP_OK) built=$(OMPI_BUILT) compdir=$(if $(filter 1,$(OMPI_COMP_OK)),$(OMPI_COMPDIR))
$(shell mkdir -p $(BUILD) && echo '$(OMPI_NOW)' | cmp -s - $(OMPI_STAMP) || echo '$(OMPI_NOW)' > $(OMPI_STAMP))
$(BUILD)/obj/tools/mpirun_layer.o: $(OMPI_STAMP)
# --- end Open MPI component ---

# --- simulator (src/sim) ---
# build/bin/incoll-sim (docs/simulator.md): the AN and host cores on
# SimGrid, built from src/sim/*.c and libincoll's objects (src/sim is not
# part of libincoll). Only when pkg-config finds SimGrid (libsimgrid-dev,
# see scripts/install-deps.sh); then `all` includes it. SimGrid's C headers
# compile as C11.
ifeq ($(SIMGRID_OK),1)
SIM_CFLAGS := $(shell pkg-config --cflags simgrid)
SIM_LIBS   := $(shell pkg-config --libs simgrid)
# The plot writer is the benchmarks' (tools/bench_plot.c).
SIM_OBJS   := $(SIM_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tools/bench_plot.o
$(BUILD)/obj/src/sim/%.o: src/sim/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -Itools $(SIM_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/bin/incoll-sim: $(SIM_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(SIM_OBJS) $(INTERNAL_A) $(SIM_LIBS) $(LDLIBS)
sim: $(BUILD)/bin/incoll-sim
all: $(BUILD)/bin/incoll-sim
install: install-sim
install-sim: $(BUILD)/bin/incoll-sim
	install -d $(DESTDIR)$(bindir)
	install -m 755 $(BUILD)/bin/incoll-sim $(DESTDIR)$(bindir)/
else
sim:
	@echo "make sim: SimGrid not found by pkg-config; install libsimgrid-dev and simgrid (scripts/install-deps.sh)" >&2; exit 1
endif
# --- end simulator ---

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# --- fuzzing (docs/fuzzing.md) ---
# libFuzzer harnesses of the parsers (tests/fuzz), built with clang; the
# unit tests of tests/test_fuzz.c run the same checks in `make test`.
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 60
FUZZ_NAMES := wire mgr_proto fabric_conf topo
FUZZ_LIB   := src/common/wire.c src/common/wire_mac.c src/common/dtype.c src/common/mgr_codec.c src/common/mgr_auth.c src/common/mgr_stream.c \
              src/common/fabric_conf.c src/common/kvline.c src/common/log.c src/common/settings.c src/common/status.c \
              src/common/hashtab.c src/mgr/topo.c
FUZZ_FLAGS := -g -O1 -fno-omit-frame-pointer \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
.PHONY: fuzz fuzz-run
fuzz: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_check.h tests/fuzz/fuzz_text_file.h $(FUZZ_LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(BASEFLAGS) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIB) $(LDLIBS)
fuzz-run: fuzz
	@set -e; for h in $(FUZZ_NAMES); do \
	  mkdir -p $(BUILD)/fuzz/corpus/$$h; \
	  dict=; if [ -f tests/fuzz/$$h.dict ]; then dict=-dict=$(CURDIR)/tests/fuzz/$$h.dict; fi; \
	  (cd $(BUILD)/fuzz && ./fuzz_$$h -jobs=1 -max_total_time=$(FUZZ_TIME) $$dict corpus/$$h); \
	done
# --- end fuzzing ---

# --- operations (docs/deployment.md) ---
# The manager's metrics endpoint (src/mgr/mgr_http.c) uses libmicrohttpd
# (libmicrohttpd-dev, optional: without it `incoll-mgr --metrics` says so
# and its tests skip). WITH_MHD is auto, yes or no like the others. Only
# the programs that hold a manager link it, never libincoll.
WITH_MHD ?= auto
MHD_OK := $(call with_found,$(WITH_MHD),$(shell pkg-config --exists libmicrohttpd 2>/dev/null && echo 1))
MHD_STAMP := $(BUILD)/.mhd
$(shell mkdir -p $(BUILD) && echo 'mhd=$(MHD_OK)' | cmp -s - $(MHD_STAMP) || echo 'mhd=$(MHD_OK)' > $(MHD_STAMP))
ifeq ($(MHD_OK),1)
MHD_CFLAGS := -DINCOLL_HAVE_MHD=1 $(shell pkg-config --cflags libmicrohttpd)
MHD_LIBS   := $(shell pkg-config --libs libmicrohttpd)
endif
.PHONY: check-mhd
check-mhd:
ifeq ($(WITH_MHD)-$(MHD_OK),yes-)
	@echo "make: WITH_MHD=yes but pkg-config finds no libmicrohttpd (libmicrohttpd-dev; make deps)" >&2; exit 1
endif
$(BUILD)/obj/src/mgr/mgr_http.o $(BUILD)/asan/src/mgr/mgr_http.o: $(MHD_STAMP) | check-mhd
$(BUILD)/obj/src/mgr/mgr_http.o $(BUILD)/asan/src/mgr/mgr_http.o: BASEFLAGS += $(MHD_CFLAGS)
$(BUILD)/bin/incoll-mgr $(BUILD)/bin/incoll $(BUILD)/tests/incoll-tests $(BUILD)/tests/incoll-tests-asan: LDLIBS += $(MHD_LIBS)

# The Slurm plugin (contrib/slurm/spank_incoll.c), when slurm/spank.h is
# there (libslurm-dev, optional): build/lib/spank_incoll.so, libincoll's
# protocol and the admin client linked in whole, only the plugin's entry
# points exported (contrib/slurm/spank.map). WITH_SLURM=auto|yes|no.
WITH_SLURM ?= auto
SLURM_OK := $(call with_found,$(WITH_SLURM),$(shell test -f /usr/include/slurm/spank.h && echo 1))
SPANK_SO := $(BUILD)/lib/spank_incoll.so
.PHONY: check-slurm
check-slurm:
ifeq ($(WITH_SLURM)-$(SLURM_OK),yes-)
	@echo "make: WITH_SLURM=yes but there is no slurm/spank.h (libslurm-dev; make deps)" >&2; exit 1
endif
ifeq ($(SLURM_OK),1)
all: $(SPANK_SO)
$(SPANK_SO): contrib/slurm/spank_incoll.c contrib/slurm/spank.map $(BUILD)/obj/src/fabric/mgr_tool.o $(INTERNAL_A) | check-slurm
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -fPIC -shared -Wl,--version-script=contrib/slurm/spank.map \
	    -o $@ $< $(BUILD)/obj/src/fabric/mgr_tool.o $(INTERNAL_A) $(LDLIBS)
endif

# Installed for a deployment (docs/deployment.md), each under DESTDIR:
# the systemd units in systemdunitdir, the configuration examples in
# sysconfdir/incoll (never over a file that is there; uninstall removes
# only those nobody changed), the Slurm plugin where Debian's Slurm looks
# for plugins and its plugstack.conf example beside Slurm's, the docs.
sysconfdir     ?= $(if $(filter /usr,$(prefix)),/etc,$(prefix)/etc)
systemdunitdir ?= $(if $(SYSTEM_PREFIX),/lib/systemd/system,$(prefix)/lib/systemd/system)
slurmplugindir ?= $(if $(SYSTEM_PREFIX),/usr/lib/$(shell $(CC) -print-multiarch)/slurm-wlm,$(prefix)/lib/slurm-wlm)
slurmconfdir   ?= $(if $(SYSTEM_PREFIX),/etc/slurm,$(prefix)/etc/slurm)
docdir         ?= $(prefix)/share/doc/incoll
OPS_UNITS  := contrib/systemd/incoll-mgr.service contrib/systemd/incoll-agg@.service
OPS_CONFIG := $(sort $(wildcard contrib/etc/*))
OPS_DOCS   := docs/deployment.md docs/manager.md docs/security.md
# contrib/*: @VARS@ replaced by where things were installed.
OPS_SUBST = sed -e 's|@BINDIR@|$(bindir)|g' -e 's|@SYSCONFDIR@|$(sysconfdir)|g' -e 's|@LIBDIR@|$(libdir)|g' \
                -e 's|@DOCDIR@|$(docdir)|g' -e 's|@SLURMPLUGINDIR@|$(slurmplugindir)|g'
# $(call ops_conf,SOURCE,TARGET): TARGET from SOURCE unless it exists.
ops_conf = t='$(DESTDIR)$(2)'; if [ -e "$$t" ]; then echo "install: keeping $$t"; else $(OPS_SUBST) $(1) > "$$t" && chmod 644 "$$t"; fi
# $(call ops_unconf,SOURCE,TARGET): TARGET removed if it is what install made.
ops_unconf = t='$(DESTDIR)$(2)'; if [ -e "$$t" ] && $(OPS_SUBST) $(1) | cmp -s - "$$t"; then rm -f "$$t"; elif [ -e "$$t" ]; then echo "uninstall: keeping $$t (changed)"; fi
install: install-ops
.PHONY: install-ops uninstall-ops
install-ops: all
	install -d $(DESTDIR)$(systemdunitdir) $(DESTDIR)$(sysconfdir)/incoll $(DESTDIR)$(docdir)
	$(foreach u,$(OPS_UNITS),$(OPS_SUBST) $(u) > $(DESTDIR)$(systemdunitdir)/$(notdir $(u)) && chmod 644 $(DESTDIR)$(systemdunitdir)/$(notdir $(u));)
	@$(foreach f,$(OPS_CONFIG),$(call ops_conf,$(f),$(sysconfdir)/incoll/$(notdir $(f)));)
	install -m 644 $(OPS_DOCS) $(DESTDIR)$(docdir)/
ifeq ($(SLURM_OK),1)
	install -d $(DESTDIR)$(slurmplugindir) $(DESTDIR)$(slurmconfdir)/plugstack.conf.d
	install -m 755 $(SPANK_SO) $(DESTDIR)$(slurmplugindir)/
	@$(call ops_conf,contrib/slurm/plugstack.conf,$(slurmconfdir)/plugstack.conf.d/incoll.conf.example)
endif
uninstall: uninstall-ops
uninstall-ops:
	rm -f $(addprefix $(DESTDIR)$(systemdunitdir)/,$(notdir $(OPS_UNITS))) $(DESTDIR)$(slurmplugindir)/spank_incoll.so
	rm -f $(addprefix $(DESTDIR)$(docdir)/,$(notdir $(OPS_DOCS)))
	@$(foreach f,$(OPS_CONFIG),$(call ops_unconf,$(f),$(sysconfdir)/incoll/$(notdir $(f)));)
	@$(call ops_unconf,contrib/slurm/plugstack.conf,$(slurmconfdir)/plugstack.conf.d/incoll.conf.example)
	-rmdir $(DESTDIR)$(docdir) $(DESTDIR)$(sysconfdir)/incoll $(DESTDIR)$(slurmconfdir)/plugstack.conf.d 2>/dev/null

# The manager's probe (tests/probe/mgr_flood.c): long, not in `make test`.
PROBE_MGR := $(BUILD)/tests/probe/mgr_flood
.PHONY: probe-mgr
probe-mgr: all $(TEST_BINS) $(PROBE_MGR)
$(PROBE_MGR): tests/probe/mgr_flood.c $(BUILD)/obj/tests/flood.o $(MGR_LIB_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/flood.o $(MGR_LIB_OBJS) $(INTERNAL_A) $(LDLIBS) $(MHD_LIBS)
# --- end operations ---
