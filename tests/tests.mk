# Tests, fuzzing and benchmarks; included by the top-level Makefile.

UNIT_TESTS := writer copy reader compact check safe_open replace runpaths \
	mapwatch policy retention archive copier log nsroot creds subids procmaps correlate metrics config \
	profile_report procstat strtab report jitdump push demangle pprof symbolizer symindex
UNIT_BINS := $(UNIT_TESTS:%=$(O)/tests/test_%)
ASAN_BINS := $(UNIT_TESTS:%=$(O)/asan/test_%)
TESTUTIL := tests/unit/testutil.c tests/unit/testutil.h
TEST_INCLUDES := -Iperfmap/include -Itests/unit -Iagent -Ibpf -Ictl -I$(O)/proto -Iprofile/include -Iprofile
# A test is compiled and linked in one go: its headers are named here, not by -MMD.
TEST_CFLAGS := $(filter-out -MMD -MP,$(BASE_CFLAGS))
TEST_HDRS := $(wildcard perfmap/include/*.h perfmap/include/*.def perfmap/*.h agent/*/*.h ctl/*.h tests/unit/*.h \
	profile/*.h profile/include/*.h)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
# The agent's and the profiler's test programs; defined before the rules whose
# prerequisites expand at once (bench and bench-profile come before the tests').
AGENT_TEST_BINS := $(O)/tests/forkjit $(O)/tests/pidat $(O)/tests/jitdoc
# splitjit, the profiler's test JIT, and stackgen, many distinct stacks.
PROFILE_TEST_BINS := $(O)/tests/splitjit $(O)/bench/stackgen
# libFuzzer targets (tests/fuzz/fuzz_<name>.c, seeds in tests/fuzz/corpus/<name>/):
# the map reader, the /proc parsers, a map's tail reader, the maps parser,
# the BPF event decoder, the perf mmap record decoder,
# perfmapctl's perf.data reader, the jitdump reader.
FUZZ_TARGETS := reader procfs mappings procmaps evrecord execmap perfdata jitdump
FUZZ_BINS := $(FUZZ_TARGETS:%=$(O)/fuzz/fuzz_%)
# Seconds per target: fuzz-short runs in `make test`, fuzz is the longer run.
FUZZ_SECONDS ?= 300
FUZZ_SHORT_SECONDS ?= 10

# The agent's rooms (docs/hacking.md) as static archives, highest first: a unit
# test links them all and the linker takes the objects it calls, which are the
# rooms below the one it drives, since calls go down only.
AGENT_ROOMS_DOWN := daemon report store in mirror archive policy lib
AGENT_ROOM_LIBS := $(AGENT_ROOMS_DOWN:%=$(O)/agent/lib%.a)
ASAN_AGENT_ROOM_LIBS := $(AGENT_ROOMS_DOWN:%=$(O)/asan-agent/agent/lib%.a)
# Kept: they are rebuilt only when a room's object changes.
.SECONDARY: $(AGENT_ROOM_LIBS) $(ASAN_AGENT_ROOM_LIBS)
UNIT_LIBS := $(BPF_LIBS) $(CAPNG_LIBS) $(MHD_LIBS) $(PROTOBUF_LIBS) -lz $(IBERTY_LIBS) $(DW_LIBS)
TEST_AGENT_profile_report := ctl/profile_report.c ctl/profile_annotate.c ctl/profile_view.c
# The push's pure parts, with the protobuf-c code of the messages they encode.
TEST_AGENT_push := ctl/profile_series.c ctl/profile_push_encode.c ctl/profile_pprof.c $(PROTO_C)
# libperfmap-profile's demangler (libiberty), and pprof's names, build ids and addresses.
TEST_AGENT_demangle := profile/demangle.c
TEST_AGENT_pprof := ctl/profile_pprof.c $(PROTO_C)
# The symbol index against libdwfl's own lookup, on real files.
TEST_AGENT_symindex := profile/symindex.c
# The symbolizer on the test's own process: the library but its BPF sampler.
TEST_AGENT_symbolizer := $(filter-out profile/sampler.c,$(PROF_SRCS))
# The other tests link no extra sources; defined, so that their rules' $(TEST_AGENT_$*) is.
$(foreach t,$(UNIT_TESTS),$(eval TEST_AGENT_$(t) ?=))

# deps first, alone: the rest needs what it installs.
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory test-all

test-all: all layering-test unit unit-asan cli clang-build fuzz-short install-test man-test doctor-test agent-test \
	jitdump-test security-test container-test agent-test-asan container-test-asan faults-test \
	unit-file-test k8s-test image-test profile-test profile-test-asan make-warnings-test symbols-test \
	receiver-test push-test push-test-asan
	@echo "test: all passed"

# make expands a rule's targets and prerequisites as it reads it: a variable named
# before it is defined is empty there, and what it names is silently not built
# (bench-profile once ran without its workload). make -n over the test and bench
# targets, in an O= that holds nothing (so every rule's recipe is expanded), must
# not warn of an undefined variable. The inner run leaves this check out: -n runs
# every line that names $(MAKE), and test-all names it.
MAKE_WARNINGS_GOALS := test bench fuzz install uninstall image run
MAKE_WARNINGS_INNER ?=
make-warnings-test:
ifeq ($(MAKE_WARNINGS_INNER),)
	@d=$(O)/make-warnings; rm -rf "$$d"; mkdir -p "$$d"; \
	$(MAKE) --no-print-directory -n --warn-undefined-variables O="$$d/o" MAKE_WARNINGS_INNER=1 \
		$(MAKE_WARNINGS_GOALS) >"$$d/log" 2>&1 || \
		{ tail -20 "$$d/log"; echo "make-warnings-test: make -n $(MAKE_WARNINGS_GOALS) failed"; exit 1; }; \
	if grep 'warning: undefined variable' "$$d/log" | sort -u | grep .; then \
		echo "make-warnings-test: a variable is used before it is defined (give it a default with ?=, or move it up)"; \
		exit 1; \
	fi; \
	echo "make-warnings-test: ok, $$(wc -l <"$$d/log") lines of make -n $(MAKE_WARNINGS_GOALS), no undefined variable"
endif

.SECONDEXPANSION:
$(O)/agent/lib%.a: $$(addprefix $(O)/obj/,$$(addsuffix .o,$$(basename $$(wildcard agent/$$*/*.c))))
	@mkdir -p $(@D); rm -f $@
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(O)/asan-agent/agent/lib%.a: $$(addprefix $(O)/asan-agent/obj/,$$(addsuffix .o,$$(basename $$(wildcard agent/$$*/*.c))))
	@mkdir -p $(@D); rm -f $@
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(O)/tests/test_%: tests/unit/test_%.c $(TESTUTIL) $$(TEST_AGENT_$$*) $(AGENT_ROOM_LIBS) $(LIBA) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $(TEST_INCLUDES) $(CFLAGS) -o $@ $< tests/unit/testutil.c \
		$(TEST_AGENT_$*) $(AGENT_ROOM_LIBS) $(LIBA) -lcmocka $(UNIT_LIBS)

# The library is compiled into each sanitized test, so it is checked too.
$(O)/asan/test_%: tests/unit/test_%.c $(TESTUTIL) $$(TEST_AGENT_$$*) $(ASAN_AGENT_ROOM_LIBS) $(LIB_SRCS) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $(SAN_FLAGS) $(TEST_INCLUDES) -Iperfmap -O1 -g -o $@ $< \
		tests/unit/testutil.c $(TEST_AGENT_$*) $(ASAN_AGENT_ROOM_LIBS) $(LIB_SRCS) -lcmocka $(UNIT_LIBS)

unit: $(UNIT_BINS)
	@sh tests/run-unit.sh $(UNIT_BINS)

unit-asan: $(ASAN_BINS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		sh tests/run-unit.sh $(ASAN_BINS)

# jitdump_writer: a jitdump producer writing every record kind, for perfmapctl jitdump.
$(O)/tests/jitdump_writer: tests/cli/jitdump_writer.c tests/unit/jdbuild.h
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -Itests/unit $(CFLAGS) -o $@ $<

cli: $(CTL) $(O)/tests/jitdump_writer
	@JITDUMP_WRITER=$(O)/tests/jitdump_writer bash tests/cli/perfmapctl.sh $(CTL)

# gcc builds by default; clang must build the same tree warning-free.
clang-build:
	@$(MAKE) --no-print-directory O=$(O)/clang CC=$(CLANG) all
	@echo "clang-build: ok"

# What each fuzz target links besides itself: the pure parsers, no system calls driven.
FUZZ_LINK_reader := $(LIB_SRCS)
FUZZ_LINK_procfs := agent/lib/procfs.c agent/mirror/container.c agent/lib/creds.c agent/lib/subids.c agent/lib/log.c \
	perfmap/fsids.c perfmap/procstat.c
FUZZ_LINK_mappings := agent/in/mappings.c agent/lib/procfs.c $(LIB_SRCS)
FUZZ_LINK_procmaps := $(LIB_SRCS)
FUZZ_LINK_evrecord := agent/in/evrecord.c agent/lib/log.c
FUZZ_LINK_execmap := agent/in/execmap.c $(LIB_SRCS)
FUZZ_LINK_perfdata := ctl/perfdata.c
FUZZ_LINK_jitdump := $(LIB_SRCS)
FUZZ_INCLUDES := $(LIB_INCLUDES) -Iagent -Ibpf -Ictl -Itests/fuzz

$(O)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $$(FUZZ_LINK_$$*) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(TEST_CFLAGS) $(FUZZ_INCLUDES) -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -o $@ $< $(FUZZ_LINK_$*)

fuzz-short: $(FUZZ_BINS)
	@sh tests/fuzz/run.sh $(O) $(FUZZ_SHORT_SECONDS) $(FUZZ_TARGETS)

fuzz: $(FUZZ_BINS)
	@sh tests/fuzz/run.sh $(O) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The agent and perfmapctl under ASan+UBSan, the library compiled in, the BPF
# skeleton shared with the plain build; the agent's integration tests run on it.
ASAN_AGENT := $(O)/asan-agent
ASAN_AGENT_OBJS := $(patsubst %.c,$(ASAN_AGENT)/obj/%.o,$(AGENTD_SRCS) $(LIB_SRCS))
ASAN_CTL_OBJS := $(patsubst %.c,$(ASAN_AGENT)/obj/%.o,$(CTL_SRCS) $(PROF_SRCS) $(LIB_SRCS))
ASAN_AGENT_BINS := $(ASAN_AGENT)/perfmapd $(ASAN_AGENT)/perfmapctl \
	$(AGENT_TEST_BINS:$(O)/tests/%=$(ASAN_AGENT)/tests/%) $(PROFILE_TEST_BINS:$(O)/%=$(ASAN_AGENT)/%)
ASAN_AGENT_CFLAGS := $(BASE_CFLAGS) $(SAN_FLAGS) -O1 -g

$(ASAN_AGENT)/obj/agent/%.o: agent/%.c $(BPF_SKEL)
	@mkdir -p $(@D)
	$(call msg,CC-ASAN,$@)
	$(Q)$(CC) $(ASAN_AGENT_CFLAGS) $(AGENT_INCLUDES) $(MHD_CFLAGS) -c $< -o $@

$(ASAN_AGENT)/obj/perfmap/%.o: perfmap/%.c
	@mkdir -p $(@D)
	$(call msg,CC-ASAN,$@)
	$(Q)$(CC) $(ASAN_AGENT_CFLAGS) $(LIB_INCLUDES) -c $< -o $@

$(ASAN_AGENT)/obj/profile/%.o: profile/%.c $(PROF_SKEL)
	@mkdir -p $(@D)
	$(call msg,CC-ASAN,$@)
	$(Q)$(CC) $(ASAN_AGENT_CFLAGS) $(PROF_INCLUDES) -c $< -o $@

$(ASAN_AGENT)/obj/ctl/profile_pprof.o $(ASAN_AGENT)/obj/ctl/profile_push.o \
	$(ASAN_AGENT)/obj/ctl/profile_push_encode.o: $(PROTO_H)

$(ASAN_AGENT)/obj/ctl/%.o: ctl/%.c
	@mkdir -p $(@D)
	$(call msg,CC-ASAN,$@)
	$(Q)$(CC) $(ASAN_AGENT_CFLAGS) $(CTL_INCLUDES) $(JSON_CFLAGS) $(CURL_CFLAGS) -c $< -o $@

-include $(ASAN_AGENT_OBJS:.o=.d) $(ASAN_CTL_OBJS:.o=.d)

$(ASAN_AGENT)/perfmapd: $(ASAN_AGENT_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) -pthread $(SAN_FLAGS) $(LDFLAGS) -o $@ $^ $(AGENTD_LIBS)

$(ASAN_AGENT)/perfmapctl: $(ASAN_CTL_OBJS) $(PROTO_OBJ)
	$(call msg,LINK,$@)
	$(Q)$(CC) -pthread $(SAN_FLAGS) $(LDFLAGS) -o $@ $^ $(CTL_LIBS)

# The test programs are not the agent: the plain ones serve.
$(ASAN_AGENT)/tests/%: $(O)/tests/%
	@mkdir -p $(@D)
	cp $< $@

$(ASAN_AGENT)/bench/%: $(O)/bench/%
	@mkdir -p $(@D)
	cp $< $@

asan-agent: $(ASAN_AGENT_BINS)

install-test: all
	@sh tests/install/run.sh $(O)

# Every global symbol of libperfmap.a and libperfmap-profile.a carries its library's prefix (nm).
.PHONY: symbols-test
symbols-test: lib
	@sh tests/install/symbols.sh $(O)

# The man pages: rendered by man -l without a warning, naming every option and command,
# and every status key (counters-test).
man-test: all counters-test
	@sh tests/install/man.sh $(O)

# The counter table (perfmap/include/perfmapd_counters.def) in the docs: docs-counters writes
# docs/agent.md's tables and perfmapctl.8's list from it; counters-test fails when they are
# stale, or when the docs, the man pages or deploy/ name a status key or metric it lacks.
docs-counters:
	@python3 scripts/counters_doc.py .

counters-test:
	@python3 scripts/counters_doc.py --check .

.PHONY: docs-counters counters-test

BENCH_BIN := $(O)/bench/bench_writer

$(BENCH_BIN): tests/bench/bench_writer.c $(LIBA)
	@mkdir -p $(@D)
	$(Q)$(CC) $(TEST_CFLAGS) $(LIB_INCLUDES) -O2 -g -o $@ $< $(LIBA) -ldl

LOADGEN := $(O)/loadgen

$(LOADGEN): tests/bench/loadgen.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 -o $@ $<

# The writer benchmark, then the agent's and its containers' (root: BPF, podman).
bench: $(BENCH_BIN) all $(AGENT_TEST_BINS) $(LOADGEN)
	$(BENCH_BIN)
	bash tests/bench/agent.sh $(O)
	@$(MAKE) --no-print-directory bench-mirror
	@$(MAKE) --no-print-directory bench-execmap
	@$(MAKE) --no-print-directory bench-parts
	@$(MAKE) --no-print-directory bench-profile
	@$(MAKE) --no-print-directory bench-jitdump

# perfmapctl profile beside perf and bpftrace: overhead at 100 Hz, JIT samples named,
# memory for 10,000 stacks, the push's cost per period and the always-on share at
# 20 Hz with perfmapd (root; push_sink.py on python3); docs/performance.md.
$(O)/bench/stackgen: tests/bench/stackgen.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -fno-omit-frame-pointer -o $@ $<

bench-profile: all $(PROFILE_TEST_BINS)
	bash tests/bench/profile_bench.sh $(O)

# Containers' maps mirrored to the host (issue 10): the writer runs alone in a
# container's root, so it is linked statically.
MIRROR_BENCH_BINS := $(O)/bench/mirror_writer $(O)/bench/mirror_meter

$(O)/bench/mirror_writer: tests/bench/mirror_writer.c $(LIBA)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 -Iperfmap/include -static -o $@ $< $(LIBA)

$(O)/bench/mirror_meter: tests/bench/mirror_meter.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 -o $@ $<

# 100 podman containers writing, the lag of their host mirrors and the
# agent's CPU; docs/performance.md, docs/containers.md. Root.
bench-mirror: all $(MIRROR_BENCH_BINS)
	bash tests/bench/mirror_bench.sh $(O)

# What learning of executable mappings costs (issue 11): no agent, the agent
# without and with PERF_RECORD_MMAP2, side by side in every round.
bench-execmap: all $(LOADGEN)
	bash tests/bench/execmap_bench.sh $(O)

# Jitdumps (issue 22): perfmapctl jitdump against perf inject -j on one dump, the
# agent's CPU and lag while it tails a growing dump, and the host's cost with a
# producer running; root and perf; docs/performance.md.
$(O)/bench/jitdump_gen: tests/bench/jitdump_gen.c tests/unit/jdbuild.h tests/agent/jitloop.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 -o $@ $<

bench-jitdump: all $(LOADGEN) $(O)/bench/jitdump_gen
	bash tests/bench/jitdump_bench.sh $(O)

# The agent's integration tests: real BPF, perf and runtimes; root.
# Each suite's scenarios, all when empty: AGENT_TESTS="fork_perf fork_storm" picks some.
AGENT_TESTS ?=
JITDUMP_TESTS ?=
AGENT_TESTS_ASAN ?=
DOCTOR_TESTS ?=
SECURITY_TESTS ?=
CONTAINER_TESTS ?=
PROFILE_TESTS ?=
FAULT_TESTS ?=

$(O)/tests/%: tests/agent/%.c tests/agent/jitloop.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -o $@ $<

agent-test: all $(AGENT_TEST_BINS)
	@bash tests/agent/run.sh $(O) $(AGENT_TESTS)

# Jitdumps (issue 22): the agent writing maps for live producers (a test one, CPython
# 3.13 -X perf_jit, Node --perf-prof), perf without inject against perf inject -j,
# bpftrace, hostile dumps from uid 65534; root.
$(O)/tests/jitprod: tests/jitdump/jitprod.c tests/unit/jdbuild.h tests/agent/jitloop.h
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -o $@ $<

$(O)/tests/jitprod-static: tests/jitdump/jitprod.c tests/unit/jdbuild.h tests/agent/jitloop.h
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -static -o $@ $<

jitdump-test: all $(O)/tests/jitprod $(O)/tests/jitprod-static
	@bash tests/jitdump/run.sh $(O) $(JITDUMP_TESTS)

# perfmapctl doctor on live processes: the test JIT's kinds of regions, containers,
# another uid, CPython and Node where present, a jitdump producer with and without the
# agent (DOCTOR_TESTS="kinds node" picks some); root.
doctor-test: all $(O)/tests/jitdoc $(O)/tests/jitprod
	@bash tests/doctor/run.sh $(O) $(DOCTOR_TESTS)

# The adversarial suite: uid 65534 against the running agent; root.
security-test: all $(AGENT_TEST_BINS) $(LOADGEN)
	@bash tests/security/run.sh $(O) $(SECURITY_TESTS)

# Containers (issue 10): real podman (runc) containers whose root is a
# directory holding a statically linked test JIT, and unshare(1) namespaces; root.
CONTAINER_TEST_BINS := $(O)/tests/forkjit-static

# perfmapctl profile against real processes (root, BPF): the test JIT splitjit
# (PROFILE_TEST_BINS, above), built with frame pointers, as a profiled program's
# native frames need.
$(O)/tests/splitjit: tests/profile/splitjit.c tests/agent/jitloop.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -fno-omit-frame-pointer -o $@ $<

profile-test: all $(AGENT_TEST_BINS) $(PROFILE_TEST_BINS) $(O)/tests/jitprod
	@bash tests/profile/run.sh $(O) $(PROFILE_TESTS)

# The library's paths again, under ASan+UBSan (build/asan-agent's perfmapctl); a report fails them.
PROFILE_TESTS_ASAN ?= split letters fork_child archived_child held_child every_forgets all_churn pprof demangle errors
profile-test-asan: $(ASAN_AGENT_BINS)
	@bash tests/profile/run.sh $(ASAN_AGENT) $(PROFILE_TESTS_ASAN)

$(O)/tests/forkjit-static: tests/agent/forkjit.c tests/agent/jitloop.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -static -o $@ $<

container-test: all $(AGENT_TEST_BINS) $(CONTAINER_TEST_BINS)
	@bash tests/containers/run.sh $(O) $(CONTAINER_TESTS)

# The container suite against the sanitized agent; the JIT in the containers stays the static one.
$(ASAN_AGENT)/tests/forkjit-static: $(O)/tests/forkjit-static
	@mkdir -p $(@D)
	cp $< $@

container-test-asan: $(ASAN_AGENT_BINS) $(ASAN_AGENT)/tests/forkjit-static
	@bash tests/containers/run.sh $(ASAN_AGENT) $(CONTAINER_TESTS)

# The same scenarios against the sanitized agent: run.sh fails any that leaves a report.
agent-test-asan: $(ASAN_AGENT_BINS)
	@bash tests/agent/run.sh $(ASAN_AGENT) $(AGENT_TESTS_ASAN)


# Faults the agent must survive (root): a full disk, no fds, a lost ring
# buffer, kill -9; and the fork rate it holds. FAULT_TESTS="enospc" picks some.
FAULT_TEST_BINS := $(O)/tests/fault_forkrate

$(O)/tests/fault_%: tests/security/fault_%.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE $(CFLAGS) -o $@ $<

faults-test: all $(AGENT_TEST_BINS) $(LOADGEN) $(FAULT_TEST_BINS)
	@bash tests/security/faults.sh $(O) $(FAULT_TESTS)

.PHONY: unit-file-test k8s-test image-test npm-deps make-warnings-test receiver-deps receiver-test push-test push-test-asan
.PHONY: test-all man-test doctor-test profile-test profile-test-asan agent-test jitdump-test security-test container-test container-test-asan asan-agent agent-test-asan faults-test \
	bench-parts bench-mirror bench-execmap bench-profile bench-jitdump

# The retention list's tick and the archive's store and usage with many
# entries (issue 9, M3 and M1): numbers, not pass/fail; docs/security.md 2, 6.
$(O)/bench/retention_bench: tests/bench/retention_bench.c $(O)/agent/libpolicy.a $(O)/agent/liblib.a $(LIBA)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 -Iagent -Iperfmap/include -o $@ $^ $(UNIT_LIBS)

$(O)/bench/archive_bench: tests/bench/archive_bench.c $(O)/agent/libarchive.a $(O)/agent/libpolicy.a $(O)/agent/liblib.a $(LIBA)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -O2 $(TEST_INCLUDES) -o $@ $^ -lpthread $(UNIT_LIBS)

bench-parts: $(O)/bench/retention_bench $(O)/bench/archive_bench
	$(O)/bench/retention_bench
	@d=$$(mktemp -d /var/tmp/perfmapd-bench.XXXXXX) && \
		for n in 0 20000 100000; do rm -rf "$$d/b"; $(O)/bench/archive_bench "$$d/b" $$n; done; \
		rm -rf "$$d"

# deploy/ (issue 12): the systemd unit (systemd-analyze verify, the options that
# would hide /tmp or /proc, its bounding set against docs/security.md 9 and
# agent/lib/privs.c), and the profiler's unit beside it (issue 23); no root.
unit-file-test: $(AGENTD) $(CTL)
	@bash tests/deploy/unit_file.sh $(O)

# The Kubernetes manifests against the API schema (npm kubernetes-models, installed
# from tests/deploy/package-lock.json into $(O)/npm), and the DaemonSet's capabilities;
# the profiler container's args against the built perfmapctl profile's --help.
NPM_DIR := $(O)/npm
$(NPM_DIR)/node_modules/.package-lock.json: tests/deploy/package.json tests/deploy/package-lock.json
	@mkdir -p $(NPM_DIR)
	cp tests/deploy/package.json tests/deploy/package-lock.json $(NPM_DIR)/
	cd $(NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error
npm-deps: $(NPM_DIR)/node_modules/.package-lock.json

k8s-test: npm-deps $(CTL)
	@bash tests/deploy/k8s.sh $(NPM_DIR) $(O)

# The stand-in for Pyroscope and Parca servers that the push tests send to
# (tests/profile/receiver/README.md): npm @connectrpc/connect-node, installed from
# its package-lock.json into $(O)/npm-receiver. receiver-test drives it with curl
# through its four protocols, its modes and the servers' checks; no root.
RECEIVER_NPM_DIR := $(O)/npm-receiver
$(RECEIVER_NPM_DIR)/node_modules/.package-lock.json: tests/profile/receiver/package.json tests/profile/receiver/package-lock.json
	@mkdir -p $(RECEIVER_NPM_DIR)
	cp tests/profile/receiver/package.json tests/profile/receiver/package-lock.json $(RECEIVER_NPM_DIR)/
	cd $(RECEIVER_NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error
receiver-deps: $(RECEIVER_NPM_DIR)/node_modules/.package-lock.json

receiver-test: receiver-deps
	@bash tests/profile/receiver/selftest.sh $(RECEIVER_NPM_DIR)

# perfmapctl profile --push against that receiver, real BPF sampling of real
# processes in cgroups made for them (tests/profile/push.sh); root.
push-test: all $(O)/tests/splitjit receiver-deps
	@bash tests/profile/push.sh $(O) $(RECEIVER_NPM_DIR) $(PUSH_TESTS)
PUSH_TESTS ?=
# The pusher's thread, spool and curl paths again under ASan+UBSan; a report fails them.
PUSH_TESTS_ASAN := protocols spool credentials
push-test-asan: $(ASAN_AGENT_BINS) $(ASAN_AGENT)/tests/splitjit receiver-deps
	@bash tests/profile/push.sh $(ASAN_AGENT) $(RECEIVER_NPM_DIR) $(PUSH_TESTS_ASAN)

# deploy/container/Containerfile built by podman from this tree, no registry, run
# with --pid=host on a private map directory, and a fork copy checked; the
# profiler beside it with its capabilities, and without each; root.
image-test: all $(O)/tests/forkjit $(O)/tests/splitjit
	@bash tests/deploy/image.sh $(O)

# The agent's image, localhost/perfmapd:latest, FROM scratch (deploy/container/).
image: all
	deploy/container/stage.sh $(O) $(O)/image-root
	podman build -f deploy/container/Containerfile -t localhost/perfmapd:latest $(O)/image-root
.PHONY: image

include tests/layering/layering.mk
