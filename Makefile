# incoll: one plain GNU Makefile. `make`, `make test`, `make demo`,
# `make bench`, `make install PREFIX=...`, `make format`, `make clean`,
# `make deps`, `make fuzz` (and `make fuzz-run`: each parser harness for
# FUZZ_TIME s).
#
# What the build includes (libsodium, SimGrid, each MPI) is decided when
# make reads this file. So `make demo` and `make test`, a newcomer's first
# commands, install the missing packages first (scripts/install-deps.sh)
# and only then run a second make (demo-run, test-run) that reads this file
# again and sees them.

PREFIX   ?= /usr/local
CC       ?= cc
BUILD    := build
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter
# WERROR=1 (CI: .ci/run) makes every warning an error.
ifeq ($(WERROR),1)
WARN     += -Werror
endif
BASEFLAGS := -std=c11 -D_GNU_SOURCE -fvisibility=hidden -Iinclude -Isrc $(WARN)
LDLIBS   := -lm -lpthread

# The version of libincoll: libincoll.so.$(VERSION), soname
# libincoll.so.$(SOVERSION), incoll.pc. Major and minor come from
# include/incoll.h (INCOLL_VERSION_MAJOR/MINOR), so the two cannot drift.
VERSION   := $(shell sed -n 's/^\#define INCOLL_VERSION_MAJOR \([0-9]*\).*/\1/p' include/incoll.h).$(shell sed -n 's/^\#define INCOLL_VERSION_MINOR \([0-9]*\).*/\1/p' include/incoll.h).0
SOVERSION := $(firstword $(subst ., ,$(VERSION)))
SONAME    := libincoll.so.$(SOVERSION)

SIMGRID_OK := $(shell pkg-config --exists simgrid 2>/dev/null && echo 1)
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
# hwloc (libhwloc-dev) is optional: it finds the CPU socket of a rank for
# INCOLL_HIER=socket; without it socket mode runs as node mode.
HWLOC_OK := $(shell pkg-config --exists hwloc 2>/dev/null && echo 1)
ifeq ($(HWLOC_OK),1)
BASEFLAGS += -DINCOLL_HAVE_HWLOC=1
LDLIBS    += $(shell pkg-config --libs hwloc)
endif

# Objects depend on the flags they were built with (and so on whether
# libsodium and SimGrid were found): installing a package rebuilds them.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(BASEFLAGS) $(CFLAGS) $(LDLIBS) simgrid=$(SIMGRID_OK)
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
ASAN_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/asan/%.o) $(AGG_LIB_OBJS:$(BUILD)/obj/%.o=$(BUILD)/asan/%.o) \
              $(MGR_LIB_OBJS:$(BUILD)/obj/%.o=$(BUILD)/asan/%.o) $(TEST_SRCS:%.c=$(BUILD)/asan/%.o) \
              $(TEST_TOOL_SRCS:%.c=$(BUILD)/asan/%.o)

BINS := $(BUILD)/bin/incoll $(BUILD)/bin/incoll-agg
ifneq ($(MGR_SRCS),)
BINS += $(BUILD)/bin/incoll-mgr
endif
# The shared library as an installed tree has it: the real file, the
# soname link the dynamic loader looks for, and the link -lincoll finds.
SO_FILES := $(BUILD)/lib/libincoll.so $(BUILD)/lib/$(SONAME) $(BUILD)/lib/libincoll.so.$(VERSION)
LIBS := $(SO_FILES) $(BUILD)/lib/libincoll.a

.PHONY: all test test-run unit-test demo demo-run bench install install-sim install-mpi format format-check clean deps sim mpi check-sodium probe
all: $(LIBS) $(BINS)

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

# Every object waits for check-sodium (order-only: it does not make them
# out of date), so a missing libsodium stops the build before it starts.
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
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

$(BUILD)/lib/$(SONAME): $(BUILD)/lib/libincoll.so.$(VERSION)
	ln -sfn libincoll.so.$(VERSION) $@

$(BUILD)/lib/libincoll.so: $(BUILD)/lib/$(SONAME)
	ln -sfn $(SONAME) $@

$(BUILD)/bin/incoll-agg: $(AGG_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(AGG_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/bin/incoll-mgr: $(MGR_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(MGR_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/bin/incoll: $(TOOL_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(TOOL_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/tests/incoll-tests: $(TEST_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(TEST_TOOL_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(TEST_TOOL_OBJS) $(INTERNAL_A) $(LDLIBS)

$(BUILD)/tests/incoll-tests-asan: $(ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_FLAGS) -o $@ $(ASAN_OBJS) $(LDLIBS)

# Test programs run by the integration tests under `incoll run`.
TESTPROG_SRCS := $(sort $(wildcard tests/progs/*.c))
TESTPROGS := $(TESTPROG_SRCS:tests/progs/%.c=$(BUILD)/tests/%)
$(BUILD)/tests/%: tests/progs/%.c $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(INTERNAL_A) $(LDLIBS)

# The probes (tests/probe/*.c): long runs that check what `make test`
# checks at small scale, outside it (`make probe`, then run them).
PROBE_SRCS := $(sort $(wildcard tests/probe/*.c))
PROBES := $(PROBE_SRCS:tests/probe/%.c=$(BUILD)/tests/probe/%)
$(BUILD)/tests/probe/%: tests/probe/%.c $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(INTERNAL_A) $(LDLIBS)

probe: all $(BUILD)/tests/incoll-tests $(TESTPROGS) $(PROBES)

# `make test` and `make demo`: the packages first, then a make that sees
# them (see the top of this file). Without root, install-deps only lists
# what is missing and the demo stops; so do the tests when a required
# package is missing, while a missing optional one only makes the tests
# that need it skip.
test:
	@bash scripts/install-deps.sh --optional-ok
	@$(MAKE) --no-print-directory test-run

test-run: all $(BUILD)/tests/incoll-tests $(BUILD)/tests/incoll-tests-asan $(TESTPROGS)
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

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/lib/libincoll.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib/libincoll.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sfn libincoll.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(PREFIX)/lib/libincoll.so
	install -m 644 include/incoll.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@HWLOC_LIBS@|$(if $(filter 1,$(HWLOC_OK)),-lhwloc,)|' incoll.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/incoll.pc

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
# Each links libincoll's objects in whole (-fPIC, hidden visibility) and
# exports only the MPI entry points (src/mpi/exports.map). The MPI test
# programs of tests/mpi go to build/tests/mpi (default MPI) and
# build/tests/mpi-mpich. Everything here is skipped when the compilers are
# missing; tests/test_mpi.c then skips too.
MPICC        ?= mpicc
MPIF90       ?= mpif90
MPICC_MPICH  ?= mpicc.mpich
MPIF90_MPICH ?= mpif90.mpich
MPI_HAVE = $(shell command -v $(1) >/dev/null 2>&1 && echo 1)
MPI_SRCS    := $(sort $(wildcard src/mpi/*.c))
MPI_CFLAGS  := $(BASEFLAGS) $(CFLAGS) -fPIC
MPI_SOFLAGS := -shared -Wl,--version-script=src/mpi/exports.map -Wl,-z,defs
MPI_SOLIBS   = -Wl,--whole-archive $(INTERNAL_A) -Wl,--no-whole-archive $(LDLIBS) -ldl
MPI_TEST_CFLAGS := -std=c11 -D_GNU_SOURCE -Isrc $(WARN) $(CFLAGS)
MPI_TEST_FFLAGS := -Wall $(CFLAGS)
MPI_TEST_C  := $(sort $(wildcard tests/mpi/*.c))
MPI_TEST_F  := $(sort $(wildcard tests/mpi/*.f90))
MPI_TARGETS :=

# The remote shell through which `incoll mpirun --emulate` starts MPI's
# daemons inside the emulated hosts (tools/mpi/launch_agent.c). Plain C:
# built whether or not an MPI is installed.
MPI_TARGETS += $(BUILD)/bin/incoll-launch-agent
$(BUILD)/bin/incoll-launch-agent: tools/mpi/launch_agent.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $<

ifeq ($(call MPI_HAVE,$(MPICC)),1)
MPI_OBJS_DEF := $(MPI_SRCS:src/mpi/%.c=$(BUILD)/obj/mpi-default/%.o)
MPI_TARGETS  += $(BUILD)/lib/libincoll_mpi.so $(MPI_TEST_C:tests/mpi/%.c=$(BUILD)/tests/mpi/%)
$(BUILD)/obj/mpi-default/%.o: src/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/lib/libincoll_mpi.so: $(MPI_OBJS_DEF) $(INTERNAL_A) src/mpi/exports.map
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_SOFLAGS) -o $@ $(MPI_OBJS_DEF) $(MPI_SOLIBS)
# (they may include header-only helpers of src/common, e.g. netdev.h)
$(BUILD)/tests/mpi/%: tests/mpi/%.c src/common/netdev.h
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_TEST_CFLAGS) -o $@ $<
# The MPI worker of `incoll bench allreduce --algos ...,mpi`
# (tools/mpi/bench_worker.c): the benchmark's rank side with the MPI
# layer's bootstrap (mpi_layer.o, not its MPI_ wrappers), default MPI.
BENCH_MPI_OBJS := $(BUILD)/obj/mpi-tools/bench_worker.o $(BUILD)/obj/mpi-default/mpi_layer.o \
                  $(addprefix $(BUILD)/obj/tools/,bench_allreduce.o bench_allreduce_rank.o bench_allreduce_report.o) \
                  $(addprefix $(BUILD)/obj/tools/,bench_colls.o bench_common.o bench_hier.o bench_opts.o bench_plot.o) \
                  $(addprefix $(BUILD)/obj/tools/,bench_rank.o bench_report.o) \
                  $(FABRIC_OBJS) $(BUILD)/obj/src/mgr/topo.o
MPI_TARGETS  += $(BUILD)/bin/incoll-bench-mpi
$(BUILD)/obj/mpi-tools/%.o: tools/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(MPI_CFLAGS) -Itools -MMD -MP -c $< -o $@
$(BUILD)/bin/incoll-bench-mpi: $(BENCH_MPI_OBJS) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -o $@ $(BENCH_MPI_OBJS) $(INTERNAL_A) $(LDLIBS)
ifeq ($(call MPI_HAVE,$(MPIF90)),1)
MPI_TARGETS += $(MPI_TEST_F:tests/mpi/%.f90=$(BUILD)/tests/mpi/%)
$(BUILD)/tests/mpi/%: tests/mpi/%.f90
	@mkdir -p $(dir $@)
	$(MPIF90) $(MPI_TEST_FFLAGS) -o $@ $<
endif
endif

ifeq ($(call MPI_HAVE,$(MPICC_MPICH)),1)
MPI_OBJS_MPICH := $(MPI_SRCS:src/mpi/%.c=$(BUILD)/obj/mpi-mpich/%.o)
MPI_TARGETS    += $(BUILD)/lib/libincoll_mpi_mpich.so $(MPI_TEST_C:tests/mpi/%.c=$(BUILD)/tests/mpi-mpich/%)
$(BUILD)/obj/mpi-mpich/%.o: src/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/lib/libincoll_mpi_mpich.so: $(MPI_OBJS_MPICH) $(INTERNAL_A) src/mpi/exports.map
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(MPI_SOFLAGS) -o $@ $(MPI_OBJS_MPICH) $(MPI_SOLIBS)
$(BUILD)/tests/mpi-mpich/%: tests/mpi/%.c src/common/netdev.h
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(MPI_TEST_CFLAGS) -o $@ $<
ifeq ($(call MPI_HAVE,$(MPIF90_MPICH)),1)
MPI_TARGETS += $(MPI_TEST_F:tests/mpi/%.f90=$(BUILD)/tests/mpi-mpich/%)
$(BUILD)/tests/mpi-mpich/%: tests/mpi/%.f90
	@mkdir -p $(dir $@)
	$(MPIF90_MPICH) $(MPI_TEST_FFLAGS) -o $@ $<
endif
endif

.PHONY: mpi install-mpi
mpi: $(MPI_TARGETS)
all: $(MPI_TARGETS)
test-run: $(MPI_TARGETS)
install: install-mpi
install-mpi: $(filter %.so $(BUILD)/bin/%,$(MPI_TARGETS))
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin
	$(if $(filter %.so,$^),install -m 755 $(filter %.so,$^) $(DESTDIR)$(PREFIX)/lib/,@true)
	$(if $(filter $(BUILD)/bin/%,$^),install -m 755 $(filter $(BUILD)/bin/%,$^) $(DESTDIR)$(PREFIX)/bin/,@true)
# --- end MPI layer ---

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
	$(CC) $(CFLAGS) -o $@ $(SIM_OBJS) $(INTERNAL_A) $(SIM_LIBS) $(LDLIBS)
sim: $(BUILD)/bin/incoll-sim
all: $(BUILD)/bin/incoll-sim
install: install-sim
install-sim: $(BUILD)/bin/incoll-sim
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/bin/incoll-sim $(DESTDIR)$(PREFIX)/bin/
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
              src/mgr/topo.c
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
