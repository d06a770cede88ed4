# Tests, fuzzing and benchmarks; included by the top-level Makefile.

UNIT_TESTS := writer copy reader compact check safe_open replace runpaths \
	mapwatch policy retention archive
UNIT_BINS := $(UNIT_TESTS:%=$(O)/tests/test_%)
ASAN_BINS := $(UNIT_TESTS:%=$(O)/asan/test_%)
TESTUTIL := tests/unit/testutil.c tests/unit/testutil.h
TEST_INCLUDES := -Iperfmap/include -Itests/unit -Iagent
# A test is compiled and linked in one go: its headers are named here, not by -MMD.
TEST_CFLAGS := $(filter-out -MMD -MP,$(BASE_CFLAGS))
TEST_HDRS := $(wildcard perfmap/include/*.h perfmap/*.h agent/*.h tests/unit/*.h)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_BIN := $(O)/fuzz/fuzz_reader
FUZZ_SECONDS ?= 300
FUZZ_SHORT_SECONDS ?= 30

# The agent's pieces a unit test drives, without root or BPF: what each links.
TEST_AGENT_mapwatch := agent/mapwatch.c agent/pidmap.c agent/clock.c agent/log.c
TEST_AGENT_policy := agent/policy.c agent/retention.c agent/proctab.c agent/pidmap.c agent/log.c
TEST_AGENT_retention := agent/retention.c agent/pidmap.c
TEST_AGENT_archive := agent/archive.c agent/archive_file.c agent/archive_journal.c \
	agent/archive_quota.c agent/clock.c agent/log.c

# deps first, alone: the rest needs what it installs.
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory test-all

test-all: all unit unit-asan cli clang-build fuzz-short install-test agent-test
	@echo "test: all passed"

.SECONDEXPANSION:
$(O)/tests/test_%: tests/unit/test_%.c $(TESTUTIL) $$(TEST_AGENT_$$*) $(LIBA) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $(TEST_INCLUDES) $(CFLAGS) -o $@ $< tests/unit/testutil.c \
		$(TEST_AGENT_$*) $(LIBA) -lcmocka

# The library is compiled into each sanitized test, so it is checked too.
$(O)/asan/test_%: tests/unit/test_%.c $(TESTUTIL) $$(TEST_AGENT_$$*) $(LIB_SRCS) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $(SAN_FLAGS) $(TEST_INCLUDES) -Iperfmap -O1 -g -o $@ $< \
		tests/unit/testutil.c $(TEST_AGENT_$*) $(LIB_SRCS) -lcmocka

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

$(FUZZ_BIN): tests/fuzz/fuzz_reader.c $(LIB_SRCS)
	@mkdir -p $(@D)
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(TEST_CFLAGS) $(LIB_INCLUDES) -g -O1 -fsanitize=fuzzer,address,undefined \
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
# The agent's test programs; defined before `bench`, whose prerequisites expand at once.
AGENT_TEST_BINS := $(O)/tests/forkjit $(O)/tests/pidat

$(BENCH_BIN): tests/bench/bench_writer.c $(LIBA)
	@mkdir -p $(@D)
	$(Q)$(CC) $(TEST_CFLAGS) $(LIB_INCLUDES) -O2 -g -o $@ $< $(LIBA) -ldl

LOADGEN := $(O)/loadgen

$(LOADGEN): tests/bench/loadgen.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 -o $@ $<

# The writer benchmark, then the agent's (root: BPF).
bench: $(BENCH_BIN) all $(AGENT_TEST_BINS) $(LOADGEN)
	$(BENCH_BIN)
	bash tests/bench/agent.sh $(O)

# The agent's integration tests: real BPF, perf and runtimes; root.

$(O)/tests/%: tests/agent/%.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -o $@ $<

agent-test: all $(AGENT_TEST_BINS)
	@bash tests/agent/run.sh $(O) $(AGENT_TESTS)

.PHONY: test-all agent-test
