# autopar build. Plain make, C11. Every target first runs scripts/deps.sh (through build/.deps), which
# installs the Debian packages that are missing, so a fresh machine needs nothing by hand.
#
#   make            library (static + shared) and bin/autopar
#   make test       the whole suite (unit tests + CLI tests)
#   make asan       the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz       each fuzz target for FUZZ_SECONDS (default 20) with clang's libFuzzer
#   make example    the main job on a built-in example: plan Llama-3-70B on 64 H100
#   make bench      benchmarks (not part of the test suite)

CC       ?= cc
PREFIX   ?= /usr/local
BUILD    ?= build
WARN     := -Wall -Wextra -Wshadow -Wconversion -Wmissing-prototypes -Wstrict-prototypes -Werror
OPT      ?= -O2 -g
CPPFLAGS += -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L
CFLAGS   += -std=c11 $(OPT) $(WARN) -fPIC -fvisibility=hidden
LDLIBS   += -ljansson -lm
FUZZ_SECONDS ?= 20

SRC_LIB  := $(sort $(shell find src -name '*.c' ! -path 'src/cli/*'))
SRC_CLI  := $(sort $(wildcard src/cli/*.c))
DATA     := $(sort $(shell find data -type f \( -name '*.json' -o -name '*.csv' \)))
GEN_DATA := $(BUILD)/gen/embedded_data.c
OBJ_LIB  := $(SRC_LIB:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/embedded_data.o
OBJ_CLI  := $(SRC_CLI:%.c=$(BUILD)/obj/%.o)
TESTS    := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TESTS:tests/%.c=$(BUILD)/tests/%)
FUZZERS  := $(sort $(wildcard fuzz/fuzz_*.c))
BENCHES  := $(sort $(wildcard bench/bench_*.c))

LIB_A    := $(BUILD)/lib/libautopar.a
LIB_SO   := $(BUILD)/lib/libautopar.so
BIN      := bin/autopar
DEPS     := $(BUILD)/.deps

.PHONY: all deps test asan fuzz example bench clean install calibrate
all: $(LIB_A) $(LIB_SO) $(BIN)

deps: $(DEPS)
$(DEPS): scripts/deps.sh
	@sh scripts/deps.sh
	@mkdir -p $(@D) && touch $@

$(BUILD)/tools/embed: tools/embed.c | $(DEPS)
	@mkdir -p $(@D)
	$(CC) -std=c11 -O1 $(WARN) -o $@ $<

$(GEN_DATA): $(BUILD)/tools/embed $(DATA)
	@mkdir -p $(@D)
	$(BUILD)/tools/embed $@.tmp $(DATA) && mv $@.tmp $@

$(BUILD)/obj/gen/embedded_data.o: $(GEN_DATA)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c | $(DEPS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIB_A): $(OBJ_LIB)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(OBJ_LIB)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BIN): $(OBJ_CLI) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(OBJ_CLI) $(LIB_A) $(LDFLAGS) $(LDLIBS)

# Tests reach module internals, so they link the static library and see src/.
$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-prototypes -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS) -lcmocka

test: $(TEST_BIN) $(BIN)
	@AUTOPAR_BIN=$(BIN) sh tests/run.sh $(BUILD) $(TEST_BIN)

asan:
	$(MAKE) BUILD=build/asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  LDFLAGS="-fsanitize=address,undefined" BIN=build/asan/bin/autopar test

# Fuzz targets: clang + libFuzzer + ASan/UBSan, each run for FUZZ_SECONDS from a seed corpus in fuzz/seeds/.
FUZZ_CFLAGS := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L
fuzz: | $(DEPS)
	$(MAKE) BUILD=build/fuzzlib CC=clang OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" build/fuzzlib/lib/libautopar.a
	@set -e; for f in $(FUZZERS); do n=$$(basename $$f .c); \
	  clang $(FUZZ_CFLAGS) -o build/fuzzlib/$$n $$f build/fuzzlib/lib/libautopar.a -ljansson -lm; \
	  mkdir -p fuzz/corpus-$$n; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS) s"; \
	  build/fuzzlib/$$n -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -print_final_stats=0 \
	    fuzz/corpus-$$n fuzz/seeds/$${n#fuzz_} 2>build/fuzzlib/$$n.log || { tail -40 build/fuzzlib/$$n.log; exit 1; }; \
	  grep -E '^(#[0-9]+\s+DONE|Done)' build/fuzzlib/$$n.log | tail -1; \
	done; echo "fuzz: all targets ran clean"

example: $(BIN)
	$(BIN) plan --model llama-3-70b --cluster dgx-h100:8x8 --gbs 1024 --seq 8192

bench: $(LIB_A)
	@mkdir -p $(BUILD)/bench
	@set -e; for b in $(BENCHES); do n=$$(basename $$b .c); \
	  $(CC) $(CPPFLAGS) $(CFLAGS) -O2 -o $(BUILD)/bench/$$n $$b $(LIB_A) $(LDLIBS); $(BUILD)/bench/$$n; done

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/
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
