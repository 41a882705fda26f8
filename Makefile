# incoll: one plain GNU Makefile. `make`, `make test`, `make demo`,
# `make bench`, `make install PREFIX=...`, `make format`, `make clean`.

PREFIX   ?= /usr/local
CC       ?= cc
BUILD    := build
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter
BASEFLAGS := -std=c11 -D_GNU_SOURCE -fvisibility=hidden -Iinclude -Isrc $(WARN)
LDLIBS   := -lm -lpthread

SIMGRID_OK := $(shell pkg-config --exists simgrid 2>/dev/null && echo 1)
SODIUM_OK  := $(shell pkg-config --exists libsodium 2>/dev/null && echo 1)
ifeq ($(SODIUM_OK),1)
BASEFLAGS += -DINCOLL_HAVE_SODIUM=1
LDLIBS    += -lsodium
endif

LIB_SRCS  := $(sort $(wildcard src/common/*.c src/core/*.c src/host/*.c))
AGG_SRCS  := $(sort $(wildcard src/agg/*.c))
MGR_SRCS  := $(sort $(wildcard src/mgr/*.c))
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TEST_SRCS := $(sort $(wildcard tests/*.c))
SIM_SRCS  := $(sort $(wildcard src/sim/*.c))

LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
AGG_OBJS  := $(AGG_SRCS:%.c=$(BUILD)/obj/%.o)
MGR_OBJS  := $(MGR_SRCS:%.c=$(BUILD)/obj/%.o)
TOOL_OBJS := $(TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/obj/%.o)
# Tools and daemons share code in src/agg and src/mgr that is not main().
AGG_LIB_OBJS := $(filter-out %/agg_main.o,$(AGG_OBJS))
MGR_LIB_OBJS := $(filter-out %/mgr_main.o,$(MGR_OBJS))

ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/asan/%.o) $(AGG_LIB_OBJS:$(BUILD)/obj/%.o=$(BUILD)/asan/%.o) \
              $(MGR_LIB_OBJS:$(BUILD)/obj/%.o=$(BUILD)/asan/%.o) $(TEST_SRCS:%.c=$(BUILD)/asan/%.o)

BINS := $(BUILD)/bin/incoll $(BUILD)/bin/incoll-agg
ifneq ($(MGR_SRCS),)
BINS += $(BUILD)/bin/incoll-mgr
endif
LIBS := $(BUILD)/lib/libincoll.so $(BUILD)/lib/libincoll.a

.PHONY: all test unit-test demo bench install format clean deps sim
all: $(LIBS) $(BINS)

deps:
	@bash scripts/install-deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/lib/libincoll.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libincoll.so: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libincoll.so.0 -o $@ $^ $(LDLIBS)

$(BUILD)/bin/incoll-agg: $(AGG_OBJS) $(BUILD)/lib/libincoll.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(AGG_OBJS) $(BUILD)/lib/libincoll.a $(LDLIBS)

$(BUILD)/bin/incoll-mgr: $(MGR_OBJS) $(BUILD)/lib/libincoll.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(MGR_OBJS) $(BUILD)/lib/libincoll.a $(LDLIBS)

$(BUILD)/bin/incoll: $(TOOL_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(BUILD)/lib/libincoll.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(TOOL_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(BUILD)/lib/libincoll.a $(LDLIBS)

$(BUILD)/tests/incoll-tests: $(TEST_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(BUILD)/lib/libincoll.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJS) $(AGG_LIB_OBJS) $(MGR_LIB_OBJS) $(BUILD)/lib/libincoll.a $(LDLIBS)

$(BUILD)/tests/incoll-tests-asan: $(ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_FLAGS) -o $@ $(ASAN_OBJS) $(LDLIBS)

# Test programs run by the integration tests under `incoll run`.
TESTPROG_SRCS := $(sort $(wildcard tests/progs/*.c))
TESTPROGS := $(TESTPROG_SRCS:tests/progs/%.c=$(BUILD)/tests/%)
$(BUILD)/tests/%: tests/progs/%.c $(BUILD)/lib/libincoll.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/lib/libincoll.a $(LDLIBS)

test: all $(BUILD)/tests/incoll-tests $(BUILD)/tests/incoll-tests-asan $(TESTPROGS)
	@bash scripts/run-tests.sh

unit-test: $(BUILD)/tests/incoll-tests
	$(BUILD)/tests/incoll-tests --unit

demo: deps all
	@bash scripts/demo.sh

bench: all
	$(BUILD)/bin/incoll bench kernel

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/lib/libincoll.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib/libincoll.so $(DESTDIR)$(PREFIX)/lib/libincoll.so.0
	ln -sf libincoll.so.0 $(DESTDIR)$(PREFIX)/lib/libincoll.so
	install -m 644 include/incoll.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' incoll.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/incoll.pc

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
