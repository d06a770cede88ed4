# Tests, fuzzing and benchmarks; included by the top-level Makefile.

UNIT_TESTS := writer copy reader compact check safe_open replace mapwatch
UNIT_BINS := $(UNIT_TESTS:%=$(O)/tests/test_%)
ASAN_BINS := $(UNIT_TESTS:%=$(O)/asan/test_%)
TESTUTIL := tests/unit/testutil.c tests/unit/testutil.h
# What the agent's tools share with each other, tested on its own too.
AGENT_SHARED := agent/replace.c agent/writers.c agent/compact.c
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_BIN := $(O)/fuzz/fuzz_reader
FUZZ_SECONDS ?= 300
FUZZ_SHORT_SECONDS ?= 30

# deps first, alone: the rest needs what it installs.
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory test-all

test-all: all unit unit-asan cli clang-build fuzz-short install-test agent-test
	@echo "test: all passed"

$(O)/tests/test_%: tests/unit/test_%.c $(TESTUTIL) $(AGENT_SHARED) $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -Itests/unit $(CFLAGS) -o $@ $< tests/unit/testutil.c \
		$(AGENT_SHARED) $(LIBA) -lcmocka

# The map index, with the agent pieces it reads (events and retention are stubbed in the test).
MAPWATCH_SRCS := agent/mapwatch.c agent/proctab.c agent/mapfile.c agent/log.c
$(O)/tests/test_mapwatch: $(MAPWATCH_SRCS)
$(O)/tests/test_mapwatch: AGENT_SHARED += $(MAPWATCH_SRCS)
$(O)/asan/test_mapwatch: $(MAPWATCH_SRCS)
$(O)/asan/test_mapwatch: AGENT_SHARED += $(MAPWATCH_SRCS)

# The library is compiled into each sanitized test, so it is checked too.
$(O)/asan/test_%: tests/unit/test_%.c $(TESTUTIL) $(AGENT_SHARED) $(LIB_SRCS) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) -Itests/unit -O1 -g -o $@ $< \
		tests/unit/testutil.c $(AGENT_SHARED) $(LIB_SRCS) -lcmocka

unit: $(UNIT_BINS)
	@sh tests/run-unit.sh $(UNIT_BINS)

unit-asan: $(ASAN_BINS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		sh tests/run-unit.sh $(ASAN_BINS)

cli: $(CTL)
	@bash tests/cli/perfmapctl.sh $(CTL)

# gcc builds by default; clang must build the same tree warning-free.
clang-build:
	@$(MAKE) --no-print-directory O=$(O)/clang CC=$(CLANG) all
	@echo "clang-build: ok"

$(FUZZ_BIN): tests/fuzz/fuzz_reader.c $(LIB_SRCS) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CLANG) $(BASE_CFLAGS) -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -o $@ $< $(LIB_SRCS)

# Runs on a copy of the seed corpus: the tree stays as committed.
define run_fuzz
	@rm -rf $(O)/fuzz/corpus && mkdir -p $(O)/fuzz/corpus $(O)/fuzz/artifacts
	@cp tests/fuzz/corpus/* $(O)/fuzz/corpus/
	$(FUZZ_BIN) -max_total_time=$(1) -max_len=4096 -timeout=10 \
		-artifact_prefix=$(O)/fuzz/artifacts/ $(O)/fuzz/corpus
endef

fuzz-short: $(FUZZ_BIN)
	$(call run_fuzz,$(FUZZ_SHORT_SECONDS))

fuzz: $(FUZZ_BIN)
	$(call run_fuzz,$(FUZZ_SECONDS))

install-test: all
	@sh tests/install/run.sh $(O)

BENCH_BIN := $(O)/bench/bench_writer

$(BENCH_BIN): tests/bench/bench_writer.c $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -O2 -g -o $@ $< $(LIBA) -ldl

LOADGEN := $(O)/loadgen

$(LOADGEN): tests/bench/loadgen.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 -o $@ $<

# The writer benchmark, then the agent's (root: BPF).
bench: $(BENCH_BIN) all $(AGENT_TEST_BINS) $(LOADGEN)
	$(BENCH_BIN)
	bash tests/bench/agent.sh $(O)

# The agent's integration tests: real BPF, perf and runtimes; root.
AGENT_TEST_BINS := $(O)/tests/forkjit $(O)/tests/pidat

$(O)/tests/%: tests/agent/%.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -o $@ $<

agent-test: all $(AGENT_TEST_BINS)
	@bash tests/agent/run.sh $(O) $(AGENT_TESTS)

.PHONY: test-all agent-test
