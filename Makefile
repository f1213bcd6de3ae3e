# autopar build. Plain make, C11. Every make first runs scripts/deps.sh (while it reads this file, below), which
# installs the Debian packages that are missing, so a fresh machine needs nothing by hand.
#
#   make            library (static + shared) and bin/autopar
#   make test       the whole suite (unit tests + CLI tests)
#   make asan       the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz       each fuzz target for FUZZ_SECONDS (default 20) with clang's libFuzzer
#   make fuzz-long  each fuzz target for FUZZ_LONG_SECONDS (or FUZZ_LONG_RUNS runs), corpus kept in fuzz/corpus/
#   make tsan       the API from several threads under ThreadSanitizer
#   make failing-allocator  every allocation along each command's path failed in turn, under ASan
#   make example    the main job on a built-in example: plan Llama-3-70B on 64 H100
#   make bench      benchmarks (not part of the test suite)
#   make readme-counts  README's counts and figures rewritten from their sources (make test checks them)
#   make CORE_ONLY=1 ...   the same without the optional parts (below)
#   make V=1 ...    every command line in full (by default one short line per step, as the Linux kernel's
#                   Kbuild and automake's silent rules print: "  CC      src/cost/comm.c")

CC       ?= cc
PREFIX   ?= /usr/local
BUILD    ?= build
# A core-only build has its own objects and binary, so that it never mixes with the full build's.
ifeq ($(CORE_ONLY),1)
BUILD    := build/core
BIN      := build/core/bin/autopar
endif
WARN     := -Wall -Wextra -Wshadow -Wconversion -Wmissing-prototypes -Wstrict-prototypes -Werror $(WARN_EXTRA)
OPT      ?= -O2 -g
CPPFLAGS += -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L
CFLAGS   += -std=c11 $(OPT) $(WARN) -fPIC -fvisibility=hidden
LDLIBS   += -ljansson -lm
FUZZ_SECONDS ?= 20

# Quiet by default: $(call say,CC,file) prints one short line, $(Q) hides the command; V=1 shows the commands.
V ?= 0
ifeq ($(V),1)
Q   :=
say  = :
else
Q   := @
say  = printf '  %-7s %s\n' '$(1)' '$(2)'
MAKEFLAGS += --no-print-directory
endif

# The first build on a bare machine (issue 19, class 10): scripts/deps.sh installs the missing Debian packages
# before anything below asks for them. mk/*.mk run pkg-config (MPI, OpenBLAS, protobuf-c, CBC) when make reads
# them, and onnx.proto (libonnx-dev) is a prerequisite, so a rule that ran deps.sh (as build/.deps did) came
# too late: on a machine without those packages the first `make -j` stopped on mpi.h or on "No rule to make
# target '/usr/include/onnx/onnx.proto'". So deps.sh runs here, while make parses, before mk/*.mk are read,
# once per top-level make (the sub-makes of asan, fuzz-build, tsan inherit AUTOPAR_DEPS_DONE); `make clean`
# skips it. DEPS_SCRIPT, PKG_CONFIG and ONNX_PROTO can be pointed elsewhere (tests/sh_first_build.sh runs the
# build with the packages' files hidden behind a stand-in deps step).
DEPS_SCRIPT ?= scripts/deps.sh
PKG_CONFIG  ?= pkg-config
ifeq ($(AUTOPAR_DEPS_DONE),)
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),all)),)
ifneq ($(shell sh $(DEPS_SCRIPT) >&2 && echo ok),ok)
$(error $(DEPS_SCRIPT) failed (see above): install the Debian packages it names, or run make as root)
endif
export AUTOPAR_DEPS_DONE := 1
endif
endif

# Optional parts (docs/build.md): each mk/<part>.mk names its sources (PART_SRC_<part>), the compiler flags and
# libraries its third-party dependency needs (PART_CFLAGS_<part>, PART_LIBS_<part>), its tests (PART_TESTS_<part>)
# and, where it has them, generated sources and extra programs (PART_BINS; a program's own sources, PART_PROG_SRC_<part>,
# are in neither libautopar nor the part's library). A part is compiled into its own static library
# build/lib/libautopar-<part>.a, never into libautopar; the CLI and the tests link every part that is built and
# define AP_PART_<PART> so that the CLI adds it to its contexts. CORE_ONLY=1 builds none of them.
.DEFAULT_GOAL := all
PARTS_ALL := $(sort $(patsubst mk/%.mk,%,$(wildcard mk/*.mk)))
include $(wildcard mk/*.mk)
ifeq ($(CORE_ONLY),1)
PARTS    :=
else
PARTS    ?= $(PARTS_ALL)
endif
PART_SRC_ALL   := $(foreach p,$(PARTS_ALL),$(PART_SRC_$(p)) $(PART_PROG_SRC_$(p)))
PART_TESTS_ALL := $(foreach p,$(PARTS_ALL),$(PART_TESTS_$(p)))
PART_LIBS_A    := $(foreach p,$(PARTS),$(BUILD)/lib/libautopar-$(p).a)
PART_LDLIBS    := $(foreach p,$(PARTS),$(PART_LIBS_$(p)))
PART_DEFS      := $(foreach p,$(PARTS),-DAP_PART_$(shell echo $(p) | tr a-z- A-Z_))

SRC_LIB  := $(filter-out $(PART_SRC_ALL),$(sort $(shell find src -name '*.c' ! -path 'src/cli/*')))
SRC_CLI  := $(sort $(wildcard src/cli/*.c))
DATA     := $(sort $(shell find data -type f \( -name '*.json' -o -name '*.csv' \)))
GEN_DATA := $(BUILD)/gen/embedded_data.c
OBJ_LIB  := $(SRC_LIB:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/embedded_data.o
OBJ_CLI  := $(SRC_CLI:%.c=$(BUILD)/obj/%.o)
TESTS    := $(filter-out $(PART_TESTS_ALL),$(sort $(wildcard tests/test_*.c))) $(foreach p,$(PARTS),$(PART_TESTS_$(p)))
TEST_BIN := $(TESTS:tests/%.c=$(BUILD)/tests/%)
FUZZERS  := $(sort $(wildcard fuzz/fuzz_*.c))
BENCHES  := $(sort $(wildcard bench/bench_*.c))

LIB_A    := $(BUILD)/lib/libautopar.a
LIB_SO   := $(BUILD)/lib/libautopar.so
LIB_FULL_SO := $(BUILD)/lib/libautopar-full.so
BIN      ?= bin/autopar
DEPS     := $(BUILD)/.deps

.PHONY: all deps test asan fuzz example bench clean install calibrate validate-loso man
all: $(LIB_A) $(LIB_SO) $(PART_LIBS_A) $(LIB_FULL_SO) $(BIN) $(PART_BINS)

# The packages were installed while make parsed this file (above); the stamp orders the first compile after it.
deps: $(DEPS)
$(DEPS): $(DEPS_SCRIPT)
	@mkdir -p $(@D) && touch $@

$(BUILD)/tools/embed: tools/embed.c | $(DEPS)
	@mkdir -p $(@D)
	@$(call say,CC,$<)
	$(Q)$(CC) -std=c11 -O1 $(WARN) -o $@ $<

$(GEN_DATA): $(BUILD)/tools/embed $(DATA)
	@mkdir -p $(@D)
	@$(call say,EMBED,$@)
	$(Q)$(BUILD)/tools/embed $@.tmp $(DATA) && mv $@.tmp $@

$(BUILD)/obj/gen/embedded_data.o: $(GEN_DATA)
	@mkdir -p $(@D)
	@$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c | $(DEPS)
	@mkdir -p $(@D)
	@$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIB_A): $(OBJ_LIB)
	@mkdir -p $(@D)
	@$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(OBJ_LIB)
	@mkdir -p $(@D)
	@$(call say,LD,$@)
	$(Q)$(CC) -shared -o $@ $^ $(LDFLAGS) $(LDLIBS)

# A part's objects: its own flags on top of the library's; one static library per part.
define PART_RULES
$(1:%.c=$(BUILD)/obj/%.o): CPPFLAGS += $(2)
endef
$(foreach p,$(PARTS),$(eval $(call PART_RULES,$(PART_SRC_$(p)),$(PART_CFLAGS_$(p)))))
$(BUILD)/lib/libautopar-%.a: $(LIB_A)
	@mkdir -p $(@D)
	@$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $(PART_OBJ_$*)
$(foreach p,$(PARTS),$(eval PART_OBJ_$(p) := $(patsubst %.c,$(BUILD)/obj/%.o,$(PART_SRC_$(p)))))
$(foreach p,$(PARTS),$(eval $(BUILD)/lib/libautopar-$(p).a: $(PART_OBJ_$(p))))

# The core with every built part in one shared library, for hosts that load one file (the Python module).
$(LIB_FULL_SO): $(OBJ_LIB) $(foreach p,$(PARTS),$(PART_OBJ_$(p)))
	@mkdir -p $(@D)
	@$(call say,LD,$@)
	$(Q)$(CC) -shared -o $@ $^ $(LDFLAGS) $(PART_LDLIBS) $(LDLIBS)

$(BUILD)/obj/src/cli/parts.o: CPPFLAGS += $(PART_DEFS)
$(BUILD)/obj/src/cli/parts.o: Makefile

$(BIN): $(OBJ_CLI) $(LIB_A) $(PART_LIBS_A)
	@mkdir -p $(@D)
	@$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(OBJ_CLI) $(PART_LIBS_A) $(LIB_A) $(LDFLAGS) $(PART_LDLIBS) $(LDLIBS)

# Tests reach module internals, so they link the static library and see src/.
$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(LIB_A) $(PART_LIBS_A)
	@mkdir -p $(@D)
	@$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(PART_DEFS) $(foreach p,$(PARTS),$(PART_CFLAGS_$(p))) $(CFLAGS) -Wno-missing-prototypes -o $@ $< \
	  $(PART_LIBS_A) $(LIB_A) $(LDFLAGS) $(PART_LDLIBS) $(LDLIBS) -lcmocka

test: $(TEST_BIN) $(BIN) $(LIB_FULL_SO)
	@AUTOPAR_BIN=$(BIN) sh tests/run.sh $(BUILD) $(TEST_BIN)

asan:
	$(MAKE) BUILD=build/asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  LDFLAGS="-fsanitize=address,undefined" BIN=build/asan/bin/autopar test

# Fuzz targets: clang + libFuzzer + ASan/UBSan. The library itself is built with -fno-sanitize-recover=all, so
# undefined behaviour anywhere (not only in the target's own file) stops the fuzzer with a failure. Targets link
# every built part (fuzz_onnx needs libautopar-onnx.a and protobuf-c); a part's target needs its part. A target
# whose header names "FUZZ_LINK: FILE…" links those sources too (the CLI parser). Each target starts from its
# seeds (fuzz/seeds/NAME/) and the committed corpus (fuzz/corpus/NAME/).
FUZZ_PART_A := $(foreach p,$(PARTS),build/fuzzlib/lib/libautopar-$(p).a)
FUZZERS     := $(filter-out $(foreach p,$(filter-out $(PARTS),$(PARTS_ALL)),fuzz/fuzz_$(p).c),$(FUZZERS))
FUZZ_CFLAGS := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L
FUZZ_LIB    := build/fuzzlib/lib/libautopar.a
FUZZ_LONG_SECONDS ?= 300
FUZZ_LONG_RUNS    ?= 0
FUZZ_LONG_MAX_LEN ?= 8192
# libFuzzer's -timeout is wall-clock seconds per input: on a machine shared with other jobs a target under nice can
# be starved past 10 s on an input that runs in 0.1 s alone (the cluster target did, at 816k runs); raise it there.
FUZZ_LONG_TIMEOUT ?= 10
# The fuzz build is clang's, whose warnings differ from gcc's (a table row leaving trailing fields zero in
# src/plan/stack.c, an unsigned-to-double conversion in html_timeline.c): they stay warnings there, not errors;
# the gcc build (make, make test) keeps -Werror.
.PHONY: fuzz-build fuzz-long tsan failing-allocator
fuzz-build: | $(DEPS)
	$(MAKE) BUILD=build/fuzzlib CC=clang OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" WARN_EXTRA=-Wno-error $(FUZZ_LIB) $(FUZZ_PART_A)
	@set -e; for f in $(FUZZERS); do n=$$(basename $$f .c); \
	  extra=$$(sed -n 's/^.*FUZZ_LINK: \([^*]*\).*$$/\1/p' $$f); \
	  clang $(FUZZ_CFLAGS) -o build/fuzzlib/$$n $$f $$extra $(FUZZ_PART_A) $(FUZZ_LIB) $(PART_LDLIBS) -ljansson -lm; done

fuzz: fuzz-build
	@set -e; for f in $(FUZZERS); do n=$$(basename $$f .c); t=$${n#fuzz_}; \
	  mkdir -p build/fuzzlib/corpus-$$t fuzz/corpus/$$t; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS) s"; \
	  len=$$(sed -n 's/^.*FUZZ_MAX_LEN: \([0-9]*\).*$$/\1/p' $$f); len=$${len:-65536}; \
	  build/fuzzlib/$$n -max_total_time=$(FUZZ_SECONDS) -max_len=$$len -timeout=10 -print_final_stats=0 -artifact_prefix=build/fuzzlib/$$t- \
	    build/fuzzlib/corpus-$$t fuzz/corpus/$$t fuzz/seeds/$$t 2>build/fuzzlib/$$n.log || { tail -40 build/fuzzlib/$$n.log; exit 1; }; \
	  grep -E '^(#[0-9]+\s+DONE|Done)' build/fuzzlib/$$n.log | tail -1; \
	done; echo "fuzz: all targets ran clean"

# The long campaign: every target (or those in FUZZ_TARGETS, names without fuzz_) for FUZZ_LONG_SECONDS, or
# until FUZZ_LONG_RUNS executions when that is set, one at a time under nice, inputs up to FUZZ_LONG_MAX_LEN
# bytes (or the "FUZZ_MAX_LEN: N" a target's header names, for slow readers); new inputs go to
# fuzz/corpus/NAME/, which is then minimised (libFuzzer -merge=1) so the committed corpus stays small. One
# line per target (executions, coverage, corpus files and bytes) goes to build/fuzzlib/fuzz-long.txt.
FUZZ_TARGETS ?= $(patsubst fuzz/fuzz_%.c,%,$(FUZZERS))
# Seeds too big to commit, for the campaign only (build/fuzzlib/big-NAME/, read by fuzz-long beside the
# committed ones when present): ONNX files of about 1 MB (a 34,000-node chain) and the 3,000-deep nested If,
# so that fuzz_onnx's mutations start at the sizes issue 19 asks the reader to be fuzzed at.
.PHONY: fuzz-big-seeds
fuzz-big-seeds:
	mkdir -p build/fuzzlib/big-onnx
	python3 tools/gen_onnx.py chain 34000 build/fuzzlib/big-onnx/chain-34000.onnx
	python3 tools/gen_onnx.py nested-if 3000 build/fuzzlib/big-onnx/nested-if-3000.onnx
fuzz-long: fuzz-build
	@set -e; failed=""; : >build/fuzzlib/fuzz-long.txt; for t in $(FUZZ_TARGETS); do n=fuzz_$$t; \
	  mkdir -p fuzz/corpus/$$t build/fuzzlib/min-$$t; rm -rf build/fuzzlib/min-$$t/*; \
	  echo "fuzz-long: $$n for $(FUZZ_LONG_SECONDS) s (runs cap $(FUZZ_LONG_RUNS))"; \
	  len=$$(sed -n 's/^.*FUZZ_MAX_LEN: \([0-9]*\).*$$/\1/p' fuzz/$$n.c); len=$${len:-$(FUZZ_LONG_MAX_LEN)}; \
	  nice -n 10 build/fuzzlib/$$n -max_total_time=$(FUZZ_LONG_SECONDS) -runs=$$( [ $(FUZZ_LONG_RUNS) -gt 0 ] && echo $(FUZZ_LONG_RUNS) || echo -1) \
	    -max_len=$$len -timeout=$(FUZZ_LONG_TIMEOUT) -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=build/fuzzlib/$$t- \
	    fuzz/corpus/$$t fuzz/seeds/$$t $$( [ -d build/fuzzlib/big-$$t ] && echo build/fuzzlib/big-$$t ) \
	    >build/fuzzlib/$$n.long.log 2>&1 || { tail -40 build/fuzzlib/$$n.long.log; failed="$$failed $$t"; }; \
	  if nice -n 10 build/fuzzlib/$$n -merge=1 -max_len=$$len build/fuzzlib/min-$$t fuzz/corpus/$$t >build/fuzzlib/$$n.merge.log 2>&1; \
	  then rm -rf fuzz/corpus/$$t && mv build/fuzzlib/min-$$t fuzz/corpus/$$t; else failed="$$failed $$t(merge)"; fi; \
	  execs=$$(sed -n 's/^stat::number_of_executed_units: *//p' build/fuzzlib/$$n.long.log); \
	  cov=$$(grep -E '^#[0-9]+' build/fuzzlib/$$n.long.log | tail -1 | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/\1 \2/p'); \
	  files=$$(ls fuzz/corpus/$$t | wc -l); bytes=$$(cat fuzz/corpus/$$t/* 2>/dev/null | wc -c); \
	  echo "$$t execs=$$execs cov_ft=\"$$cov\" corpus_files=$$files corpus_bytes=$$bytes" | tee -a build/fuzzlib/fuzz-long.txt; \
	done; [ -z "$$failed" ] || { echo "fuzz-long: FAILED:$$failed (logs in build/fuzzlib/)"; exit 1; }; \
	echo "fuzz-long: all targets ran clean"

# ThreadSanitizer: the library and tests/test_threads.c (the API from several threads, one context each)
# built with clang -fsanitize=thread. A separate build (about a minute), so not part of `make test`.
TSAN_FLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
tsan: | $(DEPS)
	$(MAKE) BUILD=build/tsan CC=clang OPT="$(TSAN_FLAGS)" build/tsan/lib/libautopar.a
	clang $(CPPFLAGS) -std=c11 $(TSAN_FLAGS) $(WARN) -Wno-missing-prototypes -o build/tsan/test_threads tests/test_threads.c \
	  build/tsan/lib/libautopar.a -ljansson -lm -lcmocka -lpthread
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" build/tsan/test_threads

# The failing-allocator run: tests/test_nomem.c under ASan fails the n-th allocation for every n along each
# command's path (sampled above 10,000 allocations), checking AP_NOMEM, no leak and no partial file.
failing-allocator:
	$(MAKE) BUILD=build/asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  LDFLAGS="-fsanitize=address,undefined" build/asan/tests/test_nomem
	AUTOPAR_NOMEM_FULL=1 build/asan/tests/test_nomem

# Everything `all` builds (the shared libraries too), so that README's Python lines work after it alone. The
# build's lines go to $(BUILD)/example-build.log (shown when it fails; V=1 prints them), so that the plan is what
# the command shows.
# With other goals beside it (make -j8 example test), `all` is a prerequisite, built by this make once, so that
# the sub-make below finds it done and no two makes write one library at the same time (tests/sh_first_build.sh).
ifneq ($(filter-out example,$(MAKECMDGOALS)),)
example: all
endif
example: | $(DEPS)
ifeq ($(V),1)
	$(MAKE) all
else
	@mkdir -p $(BUILD); printf 'make example: building (log: %s) ... ' $(BUILD)/example-build.log; \
	  if $(MAKE) all >$(BUILD)/example-build.log 2>&1; then echo done; \
	  else echo failed; tail -n 30 $(BUILD)/example-build.log; exit 1; fi
endif
	@echo '$$ $(BIN) plan --model llama-3-70b --cluster dgx-h100:8x8 --gbs 1024 --seq 8192'
	@$(BIN) plan --model llama-3-70b --cluster dgx-h100:8x8 --gbs 1024 --seq 8192

bench: $(LIB_A) $(PART_LIBS_A)
	@mkdir -p $(BUILD)/bench
	@set -e; for b in $(BENCHES); do n=$$(basename $$b .c); \
	  $(CC) $(CPPFLAGS) $(PART_DEFS) $(CFLAGS) -O2 -o $(BUILD)/bench/$$n $$b $(PART_LIBS_A) $(LIB_A) $(PART_LDLIBS) $(LDLIBS); \
	  $(BUILD)/bench/$$n; done
	@sh bench/plan_instr.sh $(BUILD)/bench/bench_plan
	@sh bench/estimate_instr.sh $(BUILD)/bench/bench_estimate

# README's counts and figures, written from what produces them (tools/readme_counts.py; make test checks them).
.PHONY: readme-counts
readme-counts: $(BIN)
	python3 tools/readme_counts.py --write $(BIN)

# The manual page, generated from the binary's own help texts (tools/mkman.sh).
man: $(BUILD)/autopar.1
$(BUILD)/autopar.1: $(BIN) tools/mkman.sh
	sh tools/mkman.sh $(BIN) > $@.tmp && mv $@.tmp $@

install: all $(BUILD)/autopar.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 $(BUILD)/autopar.1 $(DESTDIR)$(PREFIX)/share/man/man1/autopar.1
	install -m 644 scripts/autopar-completion.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/autopar
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/autopar
	install -m 644 python/autopar/__init__.py python/autopar/__main__.py $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/autopar/
	install -m 644 $(LIB_FULL_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(LIB_A) $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/autopar.h $(DESTDIR)$(PREFIX)/include/
	sed 's|@PREFIX@|$(PREFIX)|' autopar.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/autopar.pc

clean:
	rm -rf build bin

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# The shipped calibration: the cost model's constants fitted to the reference runs, reproducibly (the fit
# starts from the documented defaults, not from the file it replaces).
REFERENCE ?= ../shared/reference
calibrate: $(BIN)
	$(BIN) calibrate $(REFERENCE)/runs.csv -o data/calibration/default.json

# The figures README reports: the same fit written to a scratch file (the shipped one is left alone), printing
# the in-sample and leave-one-source-out MAPE, then validate with the shipped calibration.
validate-loso: $(BIN)
	$(BIN) calibrate $(REFERENCE)/runs.csv -o $(BUILD)/loso-calibration.json
	$(BIN) validate $(REFERENCE)/runs.csv | tail -n 12 | head -n 6
