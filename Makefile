# heaptrail -- plain GNU Makefile.
#
#   make demo    install missing dependencies, build, run the bundled example
#   make test    install missing dependencies, build, run every test
#   make bench   benchmarks side by side with the peers (docs/BENCHMARKS.md)
#   make         just build (build/libheaptrail.so, ...)
#
# Sources are found by directory: a new file in src/core or src/platform/*
# joins libheaptrail.so, a new tests/unit/X.c becomes the test unit_X.

CC       ?= gcc
CLANG    ?= clang
BUILD    := build
PLATFORM := linux-x86_64
OPT      ?= -O2 -g
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
HT_CFLAGS = $(OPT) -std=gnu11 -fPIC -fvisibility=hidden $(WARN) -Iinclude -D_GNU_SOURCE -MMD -MP
LDLIBS_CORE := -ldl -lpthread

CORE_C   := $(wildcard src/core/*.c) $(wildcard src/platform/$(PLATFORM)/*.c)
CORE_S   := $(wildcard src/platform/$(PLATFORM)/*.S)
CORE_OBJ := $(CORE_C:%.c=$(BUILD)/obj/%.o) $(CORE_S:%.S=$(BUILD)/obj/%.o)

LIB      := $(BUILD)/libheaptrail.so
LIBA     := $(BUILD)/libheaptrail.a
PRELOAD  := $(BUILD)/libheaptrail-preload.so
CLI      := $(BUILD)/heaptrail

# the trace format is shared by the in-process writer and the CLI's reader
FORMAT_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/format/*.c))
AGENT_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/agent/*.c))
CLI_OBJ    := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/analyze/*.c))
LDLIBS_AGENT := -lzstd
LDLIBS_CLI   := -ldw -lelf -lzstd -lz -lstdc++

.PHONY: all deps deps-test deps-bench test demo bench clean
.SECONDARY:
all: $(LIB) $(LIBA) $(CLI) $(if $(AGENT_OBJ),$(PRELOAD))

deps:
	@scripts/install-deps.sh build
deps-test:
	@scripts/install-deps.sh test
deps-bench:
	@scripts/install-deps.sh bench

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(HT_CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(HT_CFLAGS) -c -o $@ $<

$(LIB): $(CORE_OBJ)
	$(CC) -shared -o $@ $^ -Wl,-soname,libheaptrail.so -Wl,-z,defs $(LDLIBS_CORE)

$(LIBA): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The agent: everything the traced process loads, in one library.
$(PRELOAD): $(AGENT_OBJ) $(CORE_OBJ) $(FORMAT_OBJ)
	$(CC) -shared -o $@ $^ -Wl,-soname,libheaptrail-preload.so -Wl,-z,defs $(LDLIBS_AGENT) $(LDLIBS_CORE)

$(CLI): $(CLI_OBJ) $(FORMAT_OBJ) $(LIBA)
	$(CC) -o $@ $(CLI_OBJ) $(FORMAT_OBJ) $(LIBA) $(LDLIBS_CLI) $(LDLIBS_CORE)

# ---- tests ---------------------------------------------------------------
TEST_CFLAGS = $(OPT) -std=gnu11 $(WARN) -Iinclude -Isrc -D_GNU_SOURCE -pthread

UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit_%,$(wildcard tests/unit/*.c))
$(BUILD)/tests/unit_%: tests/unit/%.c tests/check.h $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(LIBA) $(LDLIBS_CORE)

# Differential capture tests: one call-chain program (and a shared library
# it calls through the PLT) per compiler, optimisation and frame-pointer
# setting, each checked frame for frame against libunwind.
CAPTURE_VARIANTS := gcc-O0 gcc-O2 gcc-O2-fp clang-O0 clang-O2 clang-O2-fp
CAPTURE_BIN := $(CAPTURE_VARIANTS:%=$(BUILD)/tests/capture_%)
v_cc  = $(if $(filter clang,$(word 1,$(subst -, ,$1))),$(CLANG),$(CC))
v_opt = -$(word 2,$(subst -, ,$1)) -g $(if $(filter fp,$(word 3,$(subst -, ,$1))),-fno-omit-frame-pointer,-fomit-frame-pointer)
$(BUILD)/tests/libchain_%.so: tests/capture/chainlib.c tests/capture/chain.h
	@mkdir -p $(dir $@)
	$(call v_cc,$*) $(call v_opt,$*) -fPIC -shared -Wall -Werror -Iinclude -o $@ $<
$(BUILD)/tests/capture_%: tests/capture/chain.c tests/capture/chain.h tests/check.h $(BUILD)/tests/libchain_%.so $(LIB)
	$(call v_cc,$*) $(call v_opt,$*) -Wall -Werror -Wno-unused-parameter -Iinclude -Itests -pthread -o $@ $< \
	    -L$(BUILD)/tests -lchain_$* -L$(BUILD) -lheaptrail -lunwind -Wl,-rpath,'$$ORIGIN:$$ORIGIN/..'

# Programs that test scripts run (under the agent, the CLI, gdb, ...):
# tests/progs/X.c -> build/tests/progs/X, built -O1 -g, never run directly.
PROG_BIN := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(wildcard tests/progs/*.c))
$(BUILD)/tests/progs/%: tests/progs/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -Wno-unused-parameter -Iinclude -Itests -pthread -o $@ $< \
	    -L$(BUILD) -lheaptrail -ldl -Wl,-rpath,'$$ORIGIN/../..'

# C++ test programs: tests/progs/X.cc -> build/tests/progs/X
PROGXX_BIN := $(patsubst tests/progs/%.cc,$(BUILD)/tests/progs/%,$(wildcard tests/progs/*.cc))
$(BUILD)/tests/progs/%: tests/progs/%.cc $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) -O1 -g -Wall -Werror -Wno-unused-parameter -Iinclude -Itests -pthread -o $@ $< \
	    -L$(BUILD) -lheaptrail -ldl -Wl,-rpath,'$$ORIGIN/../..'

# Libraries test programs dlopen: tests/libs/X.c -> build/tests/libs/libX.so
TESTLIB_BIN := $(patsubst tests/libs/%.c,$(BUILD)/tests/libs/lib%.so,$(wildcard tests/libs/*.c))
$(BUILD)/tests/libs/lib%.so: tests/libs/%.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fPIC -shared -Wall -Werror -o $@ $<

# Test tools that read traces: tests/tools/X.c -> build/tests/tools/X
TOOL_BIN := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(wildcard tests/tools/*.c))
$(BUILD)/tests/tools/%: tests/tools/%.c $(FORMAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(FORMAT_OBJ) $(LDLIBS_CLI)


# Analyzer tests (tests/analyze): unit tests t_X.c -> build/tests/analyze_X,
# linked with the CLI's objects minus main.c; htdrive runs the CLI commands
# on fixture traces written by real test programs (see fixwriter.h).
CLI_LIB_OBJ := $(filter-out $(BUILD)/obj/src/analyze/main.o,$(CLI_OBJ))
ADIR := $(BUILD)/tests/analyze
ANALYZE_BIN := $(patsubst tests/analyze/t_%.c,$(BUILD)/tests/analyze_%,$(wildcard tests/analyze/t_*.c))
ANALYZE_DEPS := $(ADIR)/htdrive $(ADIR)/symfix.fix $(ADIR)/symfix2.fix $(ADIR)/cxxfix.fix \
    $(ADIR)/stripped/symfix
$(ADIR)/fixture.o: tests/analyze/fixture.c tests/analyze/fixture.h src/format/trace.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -Isrc -c -o $@ $<
$(ADIR)/htdrive: tests/analyze/driver.c $(ADIR)/fixture.o $(CLI_LIB_OBJ) $(FORMAT_OBJ) $(LIBA)
	$(CC) $(TEST_CFLAGS) -Isrc -Itests -o $@ $< $(ADIR)/fixture.o $(CLI_LIB_OBJ) $(FORMAT_OBJ) $(LIBA) $(LDLIBS_CLI) $(LDLIBS_CORE)
$(BUILD)/tests/analyze_%: tests/analyze/t_%.c tests/check.h $(ADIR)/fixture.o $(CLI_LIB_OBJ) $(FORMAT_OBJ) $(LIBA) $(ANALYZE_DEPS)
	$(CC) $(TEST_CFLAGS) -Isrc -Itests -o $@ $< $(ADIR)/fixture.o $(CLI_LIB_OBJ) $(FORMAT_OBJ) $(LIBA) $(LDLIBS_CLI) $(LDLIBS_CORE)
$(ADIR)/libplugin_%.so: tests/analyze/plugin.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fPIC -shared -Wall -Werror -DPLUGIN_FN=plugin_$*_alloc -o $@ $<
$(ADIR)/cxxfix: tests/analyze/cxxfix.cc tests/analyze/fixwriter.h $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) -O1 -g -Wall -Werror -Wno-unused-parameter -Iinclude -Itests -o $@ $< \
	    -L$(BUILD) -lheaptrail -ldl -Wl,-rpath,'$$ORIGIN/../..'
$(BUILD)/tests/progs/symfix: tests/analyze/fixwriter.h
$(ADIR)/symfix.fix: $(BUILD)/tests/progs/symfix $(ADIR)/libplugin_a.so $(ADIR)/libplugin_b.so
	$< >$@.tmp && mv $@.tmp $@
$(ADIR)/symfix2.fix: $(ADIR)/symfix.fix
	$(BUILD)/tests/progs/symfix >$@.tmp && mv $@.tmp $@
$(ADIR)/cxxfix.fix: $(ADIR)/cxxfix
	$< >$@.tmp && mv $@.tmp $@
# symfix stripped of everything, its debug info under debug/.build-id/
$(ADIR)/stripped/symfix: $(BUILD)/tests/progs/symfix
	@mkdir -p $(dir $@)
	bid=$$(readelf -n $< | sed -n 's/.*Build ID: *//p'); \
	d=$(ADIR)/debug/.build-id/$$(echo $$bid | cut -c1-2); mkdir -p $$d; \
	objcopy --only-keep-debug $< $$d/$$(echo $$bid | cut -c3-).debug && \
	strip --strip-all -o $@ $<

TEST_BIN := $(UNIT_BIN) $(CAPTURE_BIN) $(ANALYZE_BIN)
TEST_SCRIPTS := $(sort $(wildcard tests/*/*.sh))

test: deps-test
	@$(MAKE) --no-print-directory all-tests
	@tests/run.sh $(TEST_BIN) $(TEST_SCRIPTS)

.PHONY: all-tests
# The trace reader's fuzz target (libFuzzer; checksums off so mutations
# reach the decoders). `make test` runs it for 30 s, `make fuzz` longer.
FUZZ_BIN := $(BUILD)/fuzz/fuzz_reader
$(FUZZ_BIN): tests/fuzz/fuzz_reader.c src/format/read.c src/format/trace.h src/format/wire.h
	@mkdir -p $(dir $@)
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -D_GNU_SOURCE -Isrc -Iinclude \
	    -o $@ tests/fuzz/fuzz_reader.c src/format/read.c -lzstd

FUZZ_TIME ?= 600
.PHONY: fuzz
fuzz: deps-test
	@$(MAKE) --no-print-directory all-tests
	@FUZZ_TIME=$(FUZZ_TIME) sh tests/fuzz/reader.sh

all-tests: all $(TEST_BIN) $(PROG_BIN) $(PROGXX_BIN) $(TESTLIB_BIN) $(TOOL_BIN) $(FUZZ_BIN) $(ANALYZE_DEPS)

# ---- demo ----------------------------------------------------------------
$(BUILD)/examples/stack_demo: examples/stack_demo.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -Iinclude -o $@ $< -L$(BUILD) -lheaptrail -ldw -Wl,-rpath,'$$ORIGIN/..'

# leaky: a program with known leaks (see its header) run under heaptrail
$(BUILD)/examples/leaky: examples/leaky.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -o $@ $<

demo: deps
	@$(MAKE) --no-print-directory all $(BUILD)/examples/stack_demo $(BUILD)/examples/leaky
	@$(BUILD)/examples/stack_demo
	@echo
	@echo '$$ heaptrail run ./leaky    (known truth: 5,456 bytes in 16 blocks from 3 sites)'
	@cd $(BUILD)/examples && rm -f heaptrail.leaky.*.ht && ../heaptrail run ./leaky

# ---- benchmarks ----------------------------------------------------------
bench: deps-bench bench-agent bench-analyzer

# Allocation tracking overhead side by side with heaptrack, memcheck and
# LSan on ../shared/workloads (docs/BENCHMARKS.md). BENCH_RUNS=N.
.PHONY: bench-agent
bench-agent: deps-bench
	@$(MAKE) --no-print-directory all
	@sh bench/agent.sh

# The analyzer against heaptrack_print, and symbolization speed
# (bench/analyzer/run.sh; results in build/bench/analyzer.md).
.PHONY: bench-analyzer
$(BUILD)/bench/symbench: bench/analyzer/symbench.c $(CLI_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -Isrc -o $@ $< $(CLI_LIB_OBJ) $(FORMAT_OBJ) $(LIBA) $(LDLIBS_CLI) $(LDLIBS_CORE)
$(BUILD)/bench/stackgen: bench/analyzer/stackgen.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -o $@ $<
bench-analyzer: all $(BUILD)/bench/symbench $(BUILD)/bench/stackgen $(TOOL_BIN)
	@sh bench/analyzer/run.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
