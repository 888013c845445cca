# heaptrail -- plain GNU Makefile.
#
#   make demo    install missing dependencies, build, run the bundled example
#   make test    install missing dependencies, build, run every test
#   make bench   benchmarks side by side with the peers (docs/BENCHMARKS.md)
#   make         just build (build/libheaptrail.so, ...)
#   make windows cross-build the Windows x64 library with mingw-w64
#                (build/windows/heaptrail.dll, libheaptrail.dll.a, libheaptrail.a)
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
LDLIBS_CLI   := -ldw -lelf -lzstd -lz

.PHONY: all deps deps-test deps-bench test demo bench clean windows
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
	$(CC) -shared -o $@ $^ -Wl,-soname,libheaptrail.so -Wl,-z,defs -Wl,-z,nodelete $(LDLIBS_CORE)

$(LIBA): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The agent: everything the traced process loads, in one library.
$(PRELOAD): $(AGENT_OBJ) $(CORE_OBJ) $(FORMAT_OBJ)
	$(CC) -shared -o $@ $^ -Wl,-soname,libheaptrail-preload.so -Wl,-z,defs $(LDLIBS_AGENT) $(LDLIBS_CORE)

$(CLI): $(CLI_OBJ) $(FORMAT_OBJ) $(LIBA)
	$(CC) -o $@ $(CLI_OBJ) $(FORMAT_OBJ) $(LIBA) $(LDLIBS_CLI) $(LDLIBS_CORE)

# ---- tests ---------------------------------------------------------------
TEST_CFLAGS = $(OPT) -std=gnu11 $(WARN) -Iinclude -Isrc -Itests -D_GNU_SOURCE -pthread

UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit_%,$(wildcard tests/unit/*.c))
$(BUILD)/tests/unit_%: tests/unit/%.c tests/check.h $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(LIBA) $(LDLIBS_CORE)

# Differential capture tests: one call-chain program (and a shared library
# it calls through the PLT) per compiler, optimisation and frame-pointer
# setting, each checked frame for frame against libunwind.
CAPTURE_VARIANTS := gcc-O0 gcc-O2 gcc-O2-fp clang-O0 clang-O2 clang-O2-fp gcc-O2-nopie
CAPTURE_BIN := $(CAPTURE_VARIANTS:%=$(BUILD)/tests/capture_%)
v_cc  = $(if $(filter clang,$(word 1,$(subst -, ,$1))),$(CLANG),$(CC))
v_opt = -$(word 2,$(subst -, ,$1)) -g $(if $(filter fp,$(word 3,$(subst -, ,$1))),-fno-omit-frame-pointer,-fomit-frame-pointer)
# a non-PIE executable (node is one): its ELF header is not where
# _dl_find_object's span starts
v_exe = $(if $(filter nopie,$(word 3,$(subst -, ,$1))),-fno-pie -no-pie,)
$(BUILD)/tests/libchain_%.so: tests/capture/chainlib.c tests/capture/chain.h
	@mkdir -p $(dir $@)
	$(call v_cc,$*) $(call v_opt,$*) -fPIC -shared -Wall -Werror -Iinclude -o $@ $<
$(BUILD)/tests/capture_%: tests/capture/chain.c tests/capture/shapes.inc tests/capture/varied.inc tests/capture/chain.h tests/check.h $(BUILD)/tests/libchain_%.so $(LIB)
	$(call v_cc,$*) $(call v_opt,$*) $(call v_exe,$*) -Wall -Werror -Wno-unused-parameter -Iinclude -Itests -pthread -o $@ $< \
	    -L$(BUILD)/tests -lchain_$* -L$(BUILD) -lheaptrail -lunwind -Wl,-rpath,'$$ORIGIN:$$ORIGIN/..'

# Programs that test scripts run (under the agent, the CLI, gdb, ...):
# tests/progs/X.c -> build/tests/progs/X, built -O1 -g, never run directly.
PROG_BIN := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(wildcard tests/progs/*.c))
$(BUILD)/tests/progs/%: tests/progs/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -Wno-unused-parameter -Iinclude -Itests -pthread -o $@ $< \
	    -L$(BUILD) -lheaptrail -ldl -Wl,-rpath,'$$ORIGIN/../..'

# freeptr without PIE: taking free's address makes a canonical PLT entry
# (tests/agent/foreign.sh)
$(BUILD)/tests/progs/freeptr_nopie: tests/progs/freeptr.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -fno-pie -no-pie -o $@ $<

# ownmalloc linked with a library whose constructor allocates before the
# agent's runs (tests/agent/foreign.sh)
$(BUILD)/tests/progs/ownmalloc_early: tests/progs/ownmalloc.c $(BUILD)/tests/libs/libearlyinit.so
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -o $@ $< -Wl,--no-as-needed -L$(BUILD)/tests/libs -learlyinit \
	    -Wl,-rpath,'$$ORIGIN/../libs'

# stalelink without PIE: the heap lies low, where glibc's safe-linked
# free-list words look like pointers into nearby blocks (tests/agent/reach.sh)
$(BUILD)/tests/progs/stalelink: tests/progs/stalelink.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -fno-pie -no-pie -o $@ $<

# takenaddr without PIE, taking libc functions' addresses in its code
# (canonical PLT entries; tests/agent/leaks.sh)
$(BUILD)/tests/progs/takenaddr: tests/progs/takenaddr.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -fno-pie -no-pie -o $@ $<

# attachee without PIE and with every slot bound at start and read-only
# (full RELRO): heaptrail attach must write through the protection
# (tests/agent/attach.sh)
$(BUILD)/tests/progs/attachee_now: tests/progs/attachee.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -fno-pie -no-pie -Wl,-z,relro,-z,now -pthread -o $@ $< -ldl

# C++ test programs: tests/progs/X.cc -> build/tests/progs/X
PROGXX_BIN := $(patsubst tests/progs/%.cc,$(BUILD)/tests/progs/%,$(wildcard tests/progs/*.cc))
$(BUILD)/tests/progs/%: tests/progs/%.cc $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) -O1 -g -Wall -Werror -Wno-unused-parameter -Iinclude -Itests -pthread -o $@ $< \
	    -L$(BUILD) -lheaptrail -ldl -Wl,-rpath,'$$ORIGIN/../..'

# Libraries test programs dlopen or preload: tests/libs/X.c -> build/tests/libs/libX.so
TESTLIB_BIN := $(patsubst tests/libs/%.c,$(BUILD)/tests/libs/lib%.so,$(wildcard tests/libs/*.c))
$(BUILD)/tests/libs/lib%.so: tests/libs/%.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fPIC -shared -Wall -Werror -o $@ $<

# Test tools that read traces: tests/tools/X.c -> build/tests/tools/X
TOOL_BIN := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(wildcard tests/tools/*.c))
$(BUILD)/tests/tools/%: tests/tools/%.c $(FORMAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(FORMAT_OBJ) $(LDLIBS_CLI)

# LD_PRELOAD agent comparing ht_capture with libunwind inside real programs
AGREE_LIB := $(BUILD)/tests/libagree.so
$(AGREE_LIB): tests/capture/agree_agent.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -Wall -Werror -Iinclude -o $@ $< -L$(BUILD) -lheaptrail -lunwind -ldl \
	    -Wl,-rpath,'$$ORIGIN/..'

# dlclose must invalidate cached rules: two libraries reloaded in turn
$(BUILD)/tests/libdlreuse%.so: tests/capture/dlreuse_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -Wall -Werror -DVARIANT=$* -o $@ $<
$(BUILD)/tests/capture_dlreuse: tests/capture/dlreuse.c tests/check.h $(LIB) $(BUILD)/tests/libdlreuse1.so $(BUILD)/tests/libdlreuse2.so
	$(CC) -O2 -g -Wall -Werror -Iinclude -Itests -pthread -o $@ $< -L$(BUILD) -lheaptrail -lunwind -ldl \
	    -Wl,-rpath,'$$ORIGIN/..'
CAPTURE_BIN += $(BUILD)/tests/capture_dlreuse
# module reads against a concurrent dlclose (loads libdlreuse1.so)
$(BUILD)/tests/unit_dlclose_race: $(BUILD)/tests/libdlreuse1.so
# unit_live includes the agent's live.c itself
$(BUILD)/tests/unit_live: src/agent/live.c src/agent/agent.h

# stacks through JIT-compiled code (a mini JIT emitting x86-64)
$(BUILD)/tests/capture_jit: tests/capture/jit.c tests/check.h tests/jitcode.h $(LIB)
	$(CC) -O2 -g -Wall -Werror -Iinclude -Itests -rdynamic -o $@ $< -L$(BUILD) -lheaptrail -ldl \
	    -Wl,-rpath,'$$ORIGIN/..'
CAPTURE_BIN += $(BUILD)/tests/capture_jit

# through module code no FDE covers (hand-written assembly, frame pointer)
$(BUILD)/tests/capture_nocfi: tests/capture/nocfi.c tests/capture/nocfi.S tests/check.h $(LIB)
	$(CC) -O2 -g -Wall -Werror -fomit-frame-pointer -Iinclude -Itests -o $@ $< tests/capture/nocfi.S \
	    -L$(BUILD) -lheaptrail -lunwind -Wl,-rpath,'$$ORIGIN/..'
CAPTURE_BIN += $(BUILD)/tests/capture_nocfi

# through a signal frame: a pc at a function's first instruction, a CFA in
# rbx further out (the agree agent's SIGPROF sampling in real programs)
$(BUILD)/tests/capture_sigentry: tests/capture/sigentry.c tests/capture/sigentry.S tests/check.h $(LIB)
	$(CC) -O2 -g -Wall -Werror -fomit-frame-pointer -Iinclude -Itests -o $@ $< tests/capture/sigentry.S \
	    -L$(BUILD) -lheaptrail -lunwind -Wl,-rpath,'$$ORIGIN/..'
CAPTURE_BIN += $(BUILD)/tests/capture_sigentry

# inside IFUNC resolvers that dlopen's relocation runs, before
# _dl_find_object knows their library (with and without frame pointers;
# leaves keep a frame only where -DFRAMED asks for it)
$(BUILD)/tests/libifunc_fp.so: tests/capture/ifunc_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fno-omit-frame-pointer -DFRAMED -fPIC -shared -Wall -Werror -o $@ $<
$(BUILD)/tests/libifunc_nofp.so: tests/capture/ifunc_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -fPIC -shared -Wall -Werror -o $@ $<
$(BUILD)/tests/capture_ifunc: tests/capture/ifunc.c tests/check.h $(LIB) $(BUILD)/tests/libifunc_fp.so $(BUILD)/tests/libifunc_nofp.so
	$(CC) -O2 -g -Wall -Werror -Iinclude -Itests -o $@ $< -L$(BUILD) -lheaptrail -lunwind -ldl \
	    -Wl,-rpath,'$$ORIGIN/..'
CAPTURE_BIN += $(BUILD)/tests/capture_ifunc

# inside a PLT stub (lazy binding keeps GOT slots pointing into the stubs)
$(BUILD)/tests/capture_plt: tests/capture/plt.c tests/check.h $(LIB)
	$(CC) -O2 -g -Wall -Werror -Iinclude -Itests -Wl,-z,lazy -o $@ $< -L$(BUILD) -lheaptrail \
	    -Wl,-rpath,'$$ORIGIN/..'
CAPTURE_BIN += $(BUILD)/tests/capture_plt


# Analyzer tests (tests/analyze): unit tests t_X.c -> build/tests/analyze_X,
# linked with the CLI's objects minus main.c; htdrive runs the CLI commands
# on fixture traces written by real test programs (see fixwriter.h).
CLI_LIB_OBJ := $(filter-out $(BUILD)/obj/src/analyze/main.o,$(CLI_OBJ))
ADIR := $(BUILD)/tests/analyze
ANALYZE_BIN := $(patsubst tests/analyze/t_%.c,$(BUILD)/tests/analyze_%,$(wildcard tests/analyze/t_*.c))
ANALYZE_DEPS := $(ADIR)/htdrive $(ADIR)/fixht $(ADIR)/symfix.fix $(ADIR)/symfix2.fix $(ADIR)/cxxfix.fix \
    $(ADIR)/stripped/symfix
$(ADIR)/fixture.o: tests/analyze/fixture.c tests/analyze/fixture.h src/format/trace.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -Isrc -c -o $@ $<
$(ADIR)/htdrive: tests/analyze/driver.c $(ADIR)/fixture.o $(CLI_LIB_OBJ) $(FORMAT_OBJ) $(LIBA)
	$(CC) $(TEST_CFLAGS) -Isrc -Itests -o $@ $< $(ADIR)/fixture.o $(CLI_LIB_OBJ) $(FORMAT_OBJ) $(LIBA) $(LDLIBS_CLI) $(LDLIBS_CORE)
# fixht: a fixture as a binary trace file (what reads real traces, on known truths)
$(ADIR)/fixht: tests/analyze/fixht.c $(ADIR)/fixture.o src/format/wire.h
	$(CC) $(TEST_CFLAGS) -Isrc -Itests -o $@ $< $(ADIR)/fixture.o
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
$(BUILD)/tests/progs/minijit: tests/jitcode.h tests/noreadv.h
$(BUILD)/tests/progs/reach: tests/noreadv.h
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

# The injector of `heaptrail attach` (src/analyze/inject.c) alone, and the
# programs and libraries tests/attach/inject.sh joins: inject_tool is built
# with HT_INJECT_TESTING (the test forces the injector's fallbacks through
# the environment); target without PIE too; libneedsgone.so needs a library
# deleted once it is linked.
AT := $(BUILD)/tests/attach
ATTACH_BIN := $(AT)/inject_tool $(AT)/target $(AT)/target_nopie $(AT)/tracer $(AT)/idle_static $(AT)/idle_go \
    $(AT)/libentry.so $(AT)/libunresolved.so $(AT)/libneedsgone.so
$(AT)/inject_tool: tests/attach/inject_tool.c src/analyze/inject.c src/analyze/inject.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -DHT_INJECT_TESTING -o $@ $< src/analyze/inject.c
$(AT)/target: tests/attach/target.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -pthread -o $@ $<
$(AT)/target_nopie: tests/attach/target.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -fno-pie -no-pie -pthread -o $@ $<
$(AT)/tracer: tests/attach/tracer.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -o $@ $<
$(AT)/idle_static: tests/attach/idle.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -static -o $@ $<
$(AT)/idle_go: tests/attach/idle.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Werror -DFAKE_GO -o $@ $<
$(AT)/libentry.so: tests/attach/entry.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fPIC -shared -Wall -Werror -o $@ $<
$(AT)/libunresolved.so: tests/attach/entry.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fPIC -shared -Wall -Werror -DUNRESOLVED -o $@ $<
$(AT)/libneedsgone.so: tests/attach/entry.c tests/attach/gone.c
	@mkdir -p $(AT)/gone
	$(CC) -O1 -g -fPIC -shared -Wall -Werror -o $(AT)/gone/libattach_gone.so tests/attach/gone.c
	$(CC) -O1 -g -fPIC -shared -Wall -Werror -DNEEDS_GONE -o $@ $< -L$(AT)/gone -Wl,--no-as-needed -lattach_gone
	rm -r $(AT)/gone
all-tests: $(ATTACH_BIN)

TEST_BIN := $(UNIT_BIN) $(CAPTURE_BIN) $(ANALYZE_BIN)
TEST_SCRIPTS := $(sort $(wildcard tests/*/*.sh))

test: deps-test
	@$(MAKE) --no-print-directory all-tests
	@tests/run.sh $(TEST_BIN) $(TEST_SCRIPTS)

.PHONY: all-tests windows-tests

# ---- Windows x64 ---------------------------------------------------------
# The same core (src/core) over src/platform/windows-x86_64, cross-built
# with mingw-w64. Objects are built twice: with HT_BUILDING (dllexport) for
# the DLL, without for the static library.
WIN_CC     ?= x86_64-w64-mingw32-gcc
WIN_AR     ?= x86_64-w64-mingw32-ar
WIN_BUILD  := $(BUILD)/windows
WIN_CFLAGS  = $(OPT) -std=gnu11 $(WARN) -Iinclude -MMD -MP
WIN_LDLIBS := -lntdll
WIN_C      := $(wildcard src/core/*.c) $(wildcard src/platform/windows-x86_64/*.c)
WIN_S      := $(wildcard src/platform/windows-x86_64/*.S)
WIN_SRC    := $(WIN_C) $(WIN_S)
WIN_DLL_OBJ := $(patsubst %,$(WIN_BUILD)/obj/dll/%.o,$(basename $(WIN_SRC)))
WIN_LIB_OBJ := $(patsubst %,$(WIN_BUILD)/obj/static/%.o,$(basename $(WIN_SRC)))
WIN_DLL    := $(WIN_BUILD)/heaptrail.dll
WIN_IMPLIB := $(WIN_BUILD)/libheaptrail.dll.a
WIN_LIBA   := $(WIN_BUILD)/libheaptrail.a

windows: $(WIN_DLL) $(WIN_IMPLIB) $(WIN_LIBA)

$(WIN_BUILD)/obj/dll/%.o: %.c
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -DHT_BUILDING -c -o $@ $<
$(WIN_BUILD)/obj/dll/%.o: %.S
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -DHT_BUILDING -c -o $@ $<
$(WIN_BUILD)/obj/static/%.o: %.c
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -c -o $@ $<
$(WIN_BUILD)/obj/static/%.o: %.S
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -c -o $@ $<

$(WIN_DLL): $(WIN_DLL_OBJ)
	$(WIN_CC) -shared -static-libgcc -o $@ $^ -Wl,--out-implib,$(WIN_IMPLIB) $(WIN_LDLIBS)
$(WIN_IMPLIB): $(WIN_DLL)
$(WIN_LIBA): $(WIN_LIB_OBJ)
	@rm -f $@
	$(WIN_AR) rcs $@ $^

# Windows test programs, run under Wine by tests/windows/*.sh. The chain
# program and its DLL (tests/capture/chainlib.c) are built per
# optimisation and frame-pointer setting, against heaptrail.dll; the same
# chain program is built for Linux too, for the function-sequence check.
WIN_TBUILD   := $(WIN_BUILD)/tests
WIN_VARIANTS := gcc-O0 gcc-O2 gcc-O2-fp
WIN_TFLAGS    = -Wall -Wextra -Werror -Wno-unused-parameter -Iinclude -Itests
WIN_CHAINS   := $(WIN_VARIANTS:%=$(WIN_TBUILD)/chains_%.exe)
LINUX_CHAINS := $(WIN_VARIANTS:%=$(BUILD)/tests/windows/chains_%)
WIN_TESTS    := $(WIN_CHAINS) $(WIN_TBUILD)/jit.exe $(WIN_TBUILD)/unload.exe $(WIN_TBUILD)/hash.exe \
                $(WIN_TBUILD)/stackdb.exe $(WIN_TBUILD)/sample.exe $(WIN_VARIANTS:%=$(WIN_TBUILD)/step_%.exe) \
                $(WIN_TBUILD)/unload_a.dll $(WIN_TBUILD)/unload_b.dll

windows-tests: windows $(WIN_TESTS) $(LINUX_CHAINS)

$(WIN_TBUILD)/genchains.c: tests/windows/genchains.py
	@mkdir -p $(dir $@)
	python3 $< $@
$(WIN_TBUILD)/heaptrail.dll: $(WIN_DLL)
	cp $< $@
$(WIN_TBUILD)/chain_%.dll: tests/capture/chainlib.c tests/capture/chain.h
	@mkdir -p $(dir $@)
	$(WIN_CC) $(call v_opt,$*) -shared $(WIN_TFLAGS) -o $@ $<
$(WIN_TBUILD)/chains_%.exe: tests/windows/chains.c tests/capture/shapes.inc $(WIN_TBUILD)/genchains.c tests/windows/genchains.h \
		tests/windows/refwalk.h tests/check.h $(WIN_TBUILD)/chain_%.dll $(WIN_TBUILD)/heaptrail.dll $(WIN_IMPLIB)
	$(WIN_CC) $(call v_opt,$*) $(WIN_TFLAGS) -o $@ $< $(WIN_TBUILD)/genchains.c \
	    $(WIN_TBUILD)/chain_$*.dll -L$(WIN_BUILD) -lheaptrail
$(BUILD)/tests/windows/chains_%: tests/windows/chains.c tests/capture/shapes.inc $(WIN_TBUILD)/genchains.c tests/windows/genchains.h \
		tests/check.h $(BUILD)/tests/libchain_%.so $(LIB)
	@mkdir -p $(dir $@)
	$(call v_cc,$*) $(call v_opt,$*) $(WIN_TFLAGS) -D_GNU_SOURCE -o $@ $< $(WIN_TBUILD)/genchains.c \
	    -L$(BUILD)/tests -lchain_$* -L$(BUILD) -lheaptrail -ldl -Wl,-rpath,'$$ORIGIN/..:$$ORIGIN/../..'
$(WIN_TBUILD)/jit.exe: tests/windows/jit.c tests/windows/refwalk.h tests/check.h $(WIN_LIBA)
	$(WIN_CC) -O2 -g $(WIN_TFLAGS) -o $@ $< $(WIN_LIBA) $(WIN_LDLIBS)
$(WIN_TBUILD)/unload_%.dll: tests/windows/unload.S
	@mkdir -p $(dir $@)
	$(WIN_CC) -shared -DVARIANT_$* -o $@ $< -Wl,--image-base,0x6f400000
$(WIN_TBUILD)/stackdb.exe: tests/windows/stackdb.c tests/check.h src/core/stackdb.h $(WIN_LIBA)
	$(WIN_CC) -O2 -g $(WIN_TFLAGS) -Isrc -o $@ $< $(WIN_LIBA) $(WIN_LDLIBS)
$(WIN_TBUILD)/sample.exe: tests/windows/sample.c $(WIN_TBUILD)/genchains.c tests/windows/refwalk.h \
		tests/check.h $(WIN_LIBA)
	$(WIN_CC) -O2 -g -fomit-frame-pointer $(WIN_TFLAGS) -o $@ $< $(WIN_TBUILD)/genchains.c $(WIN_LIBA) $(WIN_LDLIBS)
$(WIN_TBUILD)/step_%.exe: tests/windows/step.c $(WIN_TBUILD)/genchains.c tests/windows/refwalk.h \
		tests/check.h $(WIN_LIBA)
	$(WIN_CC) $(call v_opt,$*) $(WIN_TFLAGS) -o $@ $< $(WIN_TBUILD)/genchains.c $(WIN_LIBA) $(WIN_LDLIBS)
$(WIN_TBUILD)/hash.exe: tests/windows/hash.c tests/check.h $(WIN_LIBA)
	$(WIN_CC) -O2 -g $(WIN_TFLAGS) -o $@ $< $(WIN_LIBA) $(WIN_LDLIBS)
$(WIN_TBUILD)/unload.exe: tests/windows/unload.c tests/windows/refwalk.h tests/check.h $(WIN_LIBA) \
		$(WIN_TBUILD)/heaptrail.dll
	$(WIN_CC) -O2 -g $(WIN_TFLAGS) -o $@ $< $(WIN_LIBA) $(WIN_LDLIBS)
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

# leak checks back to back on the reference workloads (bench/soak.sh)
SOAK_RUNS ?= 3
SOAK_BUSY ?= 0
.PHONY: soak
soak: deps-test
	@$(MAKE) --no-print-directory all
	@SOAK_RUNS=$(SOAK_RUNS) SOAK_BUSY=$(SOAK_BUSY) sh bench/soak.sh

all-tests: all $(TEST_BIN) $(BUILD)/tests/progs/freeptr_nopie $(BUILD)/tests/progs/attachee_now $(BUILD)/tests/progs/ownmalloc_early $(BUILD)/bench/allocbench $(BUILD)/bench/stackrec.so $(BUILD)/bench/livesim $(BUILD)/bench/churn $(BUILD)/bench/custombench $(BUILD)/bench/threadstart $(BUILD)/bench/forkexit $(BUILD)/examples/leaky $(PROG_BIN) $(PROGXX_BIN) $(TESTLIB_BIN) $(TOOL_BIN) $(FUZZ_BIN) $(AGREE_LIB) \
	    $(ANALYZE_DEPS) windows-tests

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
	@echo '$$ heaptrail run ./leaky    (known truth: 5,456 bytes in 16 blocks from 3 sites; unreachable: 1,280 bytes in 5 blocks)'
	@cd $(BUILD)/examples && rm -f heaptrail.leaky.*.ht && ../heaptrail run ./leaky

# ---- benchmarks ----------------------------------------------------------
.PHONY: bench-capture bench-stackdb bench-agent bench-analyzer
bench: deps-bench
	@$(MAKE) --no-print-directory bench-capture bench-stackdb bench-agent bench-analyzer bench-windows bench-attach

CAPTURE_BENCH := $(BUILD)/bench/capture_bench_nofp $(BUILD)/bench/capture_bench_fp
$(BUILD)/bench/capture_bench_%: bench/capture_bench.c tests/capture/varied.inc $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror $(if $(filter fp,$*),-fno-omit-frame-pointer,-fomit-frame-pointer) -Iinclude \
	    -o $@ $< -L$(BUILD) -lheaptrail -lunwind -ldl -Wl,-rpath,'$$ORIGIN/..'
# ht_capture through registered JIT code vs native frames (bench/jit_bench.c);
# also run by bench-capture. `make bench-jit` runs it alone. (Defined before
# bench-capture's rule: a prerequisite list is expanded where it is read.)
JIT_BENCH := $(BUILD)/bench/jit_bench
bench-capture: all $(CAPTURE_BENCH) $(JIT_BENCH) $(AGREE_LIB)
	@bench/capture.sh
$(JIT_BENCH): bench/jit_bench.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -fomit-frame-pointer -Iinclude \
	    -o $@ $< -L$(BUILD) -lheaptrail -lunwind -ldl -Wl,-rpath,'$$ORIGIN/..'
.PHONY: bench-jit
bench-jit: all $(JIT_BENCH)
	@$(JIT_BENCH) $${ROUNDS:-9}

# A leak check in an attached process vs the same program under run
# (bench/attach-leaks.sh), and the speed a detach gives back
# (bench/detach-rate.sh); docs/BENCHMARKS.md "Leak checks after heaptrail attach".
$(BUILD)/bench/attachleaks: bench/attachleaks.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -o $@ $<
$(BUILD)/bench/detachrate: bench/detachrate.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -pthread -o $@ $<
.PHONY: bench-attach
bench-attach: all $(BUILD)/bench/attachleaks $(BUILD)/bench/detachrate
	@bench/attach-leaks.sh
	@bench/detach-rate.sh

# Stack database vs a flat table, on synthetic stacks and on stacks recorded
# from the workloads (bench/record-stacks.sh); results in docs/BENCHMARKS.md.
WORKLOADS ?= ../shared/workloads
BENCH_CFLAGS = -O2 -g -std=gnu11 $(WARN) -Iinclude -Isrc -D_GNU_SOURCE -pthread
$(BUILD)/bench/stackrec.so: bench/stackrec.c $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -fPIC -shared -o $@ $< $(LIBA) $(LDLIBS_CORE)
$(BUILD)/bench/stackdb_bench: bench/stackdb_bench.c $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(LIBA) $(LDLIBS_CORE)
$(BUILD)/bench/allocbench: $(WORKLOADS)/allocbench.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -o $@ $<
# the live table's layouts replayed on a program's heap calls, recorded by
# stackrec.so (by hand: docs/BENCHMARKS.md, "Large live sets"); built with
# the tests so they keep compiling
$(BUILD)/bench/livesim: bench/livesim.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<
# a large live set churned at random (by hand: docs/BENCHMARKS.md, "What
# `heaptrail run` adds over the bare agent"); built with the tests
$(BUILD)/bench/churn: bench/churn.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BUILD)/bench/custombench: bench/custombench.c $(BUILD)/libheaptrail.so
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -Iinclude -o $@ $< -L$(BUILD) -lheaptrail -Wl,-rpath,'$$ORIGIN/..'
# threads started in a process with many mappings (by hand:
# docs/BENCHMARKS.md, "New threads in a process with many mappings")
$(BUILD)/bench/threadstart: bench/threadstart.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -pthread
# short-lived fork children (by hand: docs/BENCHMARKS.md, "Processes that
# fork"); built with the tests
$(BUILD)/bench/forkexit: bench/forkexit.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<
bench-stackdb: $(BUILD)/bench/stackrec.so $(BUILD)/bench/stackdb_bench $(BUILD)/bench/allocbench
	@bench/record-stacks.sh $(BUILD)/bench $(WORKLOADS)
	@$(BUILD)/bench/stackdb_bench $(foreach s,sqlite3 python3 python3-malloc allocbench,$(s)=$(BUILD)/bench/stacks/$(s)) \
	    | tee $(BUILD)/bench/stackdb.md

# Windows x64 stack capture under Wine (docs/BENCHMARKS.md)
.PHONY: bench-windows
bench-windows: $(WIN_BUILD)/bench/capture_bench.exe
	@. tests/windows/wine-env && ht_wine $<
$(WIN_BUILD)/bench/capture_bench.exe: bench/windows/capture_bench.c $(WIN_TBUILD)/genchains.c $(WIN_LIBA)
	@mkdir -p $(dir $@)
	$(WIN_CC) -O2 -g -fomit-frame-pointer $(WIN_TFLAGS) -o $@ $< $(WIN_TBUILD)/genchains.c \
	    $(WIN_LIBA) $(WIN_LDLIBS) -ldbghelp

# Allocation tracking overhead side by side with heaptrack, memcheck and
# LSan on ../shared/workloads (docs/BENCHMARKS.md). BENCH_RUNS=N.
.PHONY: bench-agent
bench-agent: deps-bench
	@$(MAKE) --no-print-directory all $(TOOL_BIN)
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

-include $(shell find $(BUILD)/obj $(WIN_BUILD)/obj -name '*.d' 2>/dev/null)
