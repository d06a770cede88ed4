# Helpers for the agent integration tests and benchmarks: the real perfmapd,
# waiting on conditions, and checks that each record a pass or a fail.
# Sourced; expects $BUILD (the build directory) and $WORK (a scratch directory).

AGENT_PID=
AGENT_LOG=
FAILS=0
PASSES=0
SKIPS=0
SKIPPED=()          # "scenario: why" for the banner at the end
SCENARIO=
SCENARIO_CHECKS=0   # checks the running scenario recorded, skips included
LOAD_PIDS=()
POLL_S=0.02         # how often wait_for looks again
AGENT_LOGS=()       # every agent's log since the last sanitizer_check

# A sanitized build (make agent-test-asan): a report aborts the process and is
# written to $SAN_LOG.<pid>, where sanitizer_check finds it; options given in
# the environment come last and win. Plain builds ignore both variables.
SAN_LOG=$WORK/sanitizer
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:log_path=$SAN_LOG${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$SAN_LOG${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

say() { printf '%s\n' "$*"; }
fail() { say "FAIL: $*"; FAILS=$((FAILS + 1)); SCENARIO_CHECKS=$((SCENARIO_CHECKS + 1)); }
pass() { say "ok: $*"; PASSES=$((PASSES + 1)); SCENARIO_CHECKS=$((SCENARIO_CHECKS + 1)); }
# skip WHY: a check or scenario that could not run; counted and shown at the end.
skip() {
	say "SKIPPED: ${SCENARIO:+$SCENARIO: }$*"
	SKIPS=$((SKIPS + 1))
	SKIPPED+=("${SCENARIO:-?}: $*")
	SCENARIO_CHECKS=$((SCENARIO_CHECKS + 1))
}

# check DESCRIPTION COMMAND...: records ok or FAIL by COMMAND's status.
check() {
	local desc=$1
	shift
	if "$@"; then
		pass "$desc"
	else
		fail "$desc"
		return 1
	fi
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds; 1 at the deadline.
wait_for() {
	local deadline=$(( $(date +%s%N) + $1 * 1000000000 ))
	shift
	until "$@"; do
		[ "$(date +%s%N)" -ge "$deadline" ] && return 1
		sleep "$POLL_S"
	done
}

# Is PID stopped (SIGSTOP), as a test holds a process until the agent has acted?
is_stopped() {
	[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]
}

banner() {
	say "################################################################"
	say "$@"
	say "################################################################"
}

# Benchmarks print a figure only when the workload behind it ran, long enough to
# mean something; otherwise they fail and say why. $BENCH names the benchmark.
# bench_fail WHY: stop here, with no figures. Call it from the script's own shell,
# not from inside $(...), where exit would leave the subshell only.
bench_fail() {
	say "${BENCH:-bench}: FAILED: $*" >&2
	exit 1
}

# need_built FILE...: every program the benchmark runs (under $BUILD) is built;
# $BENCH_TARGET (or $BENCH) is the make target that builds them.
need_built() {
	local f
	for f in "$@"; do
		[ -x "$BUILD/$f" ] ||
			bench_fail "$BUILD/$f is not built (make O=... ${BENCH_TARGET:-${BENCH:-bench}} builds what it runs)"
	done
}

# loadgen_run KIND N: $BUILD/loadgen KIND N (under $PIN, e.g. taskset), its two
# figures in LOAD. Fails when loadgen does, prints no two figures above zero, or
# runs under LOAD_MIN_MS (20 ms; an exec of nothing takes a few). Builtins only
# around it: a fork or an exec here would be load the agent's CPU is charged with.
loadgen_run() {
	local t0 ms a b
	t0=${EPOCHREALTIME/[.,]/}
	# shellcheck disable=SC2086 # PIN: words of a command
	LOAD=$(${PIN:-} "$BUILD/loadgen" "$@") || bench_fail "loadgen $* failed (status $?)"
	ms=$(((${EPOCHREALTIME/[.,]/} - t0) / 1000))
	read -r a b <<<"$LOAD"
	[[ $a =~ ^[0-9]+(\.[0-9]+)?$ && $b =~ ^[0-9]+(\.[0-9]+)?$ && -n ${a//[0.]/} && -n ${b//[0.]/} ]] ||
		bench_fail "loadgen $* printed no two figures above zero: '$LOAD'"
	[ "$ms" -ge "${LOAD_MIN_MS:-20}" ] ||
		bench_fail "loadgen $* ran $ms ms, under ${LOAD_MIN_MS:-20} ms: too brief to mean anything"
}

# The suite cannot run here ($1 says why): it fails, unless PERFMAPD_SKIP_BPF=1
# asks for a loud SKIPPED banner instead. $SUITE names the suite.
skip_or_fail() {
	if [ "${PERFMAPD_SKIP_BPF:-}" = 1 ]; then
		banner "SKIPPED: $SUITE: $1 (PERFMAPD_SKIP_BPF=1)"
		exit 0
	fi
	say "FAIL: $SUITE cannot run: $1"
	say "      (run as root on a kernel with BPF, or set PERFMAPD_SKIP_BPF=1 to skip)"
	exit 1
}

# pick_scenarios SCRIPT [NAME...]: WANT, the scenarios named (SCRIPT's test_*
# functions), or all of them in the order SCRIPT defines them.
pick_scenarios() {
	local script=$1 all t
	shift
	all=$(grep -o '^test_[a-z0-9_]*()' "$script" | sed 's/^test_//; s/()$//')
	WANT=${*:-$all}
	for t in $WANT; do
		declare -F "test_$t" >/dev/null || { say "FAIL: no scenario '$t'; there are: $(echo $all)"; exit 1; }
	done
}

# run_scenarios WHAT: each scenario of WANT, then the suite's scenario_done
# NAME (its own cleanup); one that asserted nothing fails. Then the counts.
run_scenarios() {
	local t
	for t in $WANT; do
		say "== $t"
		SCENARIO=$t
		SCENARIO_CHECKS=0
		"test_$t"
		scenario_done "$t"
		[ "$SCENARIO_CHECKS" -gt 0 ] || fail "$t: the scenario asserted nothing"
	done
	SCENARIO=
	if [ $SKIPS -gt 0 ]; then
		banner "SKIPPED: $SKIPS check(s) or scenario(s) could not run here:" "$(printf '  %s\n' "${SKIPPED[@]}")"
	fi
	say "$1: $PASSES passed, $FAILS failed, $SKIPS skipped"
	[ $FAILS -eq 0 ]
}

# start_agent LOG ARGS...: perfmapd in the background, ready when it logs "tracking".
start_agent() {
	AGENT_LOG=$1
	AGENT_LOGS+=("$1")
	shift
	# PERFMAPD_TEST_AGENT_ARGS: options for every agent a suite starts, first (on a
	# shared host: "--no-mirrors --run-dir DIR", with RUN_DIR=DIR for status_of).
	# shellcheck disable=SC2086 # words of options
	"$BUILD/perfmapd" ${PERFMAPD_TEST_AGENT_ARGS:-} "$@" >"$AGENT_LOG" 2>&1 &
	AGENT_PID=$!
	if ! wait_for 20 grep -qs "perfmapd: tracking" "$AGENT_LOG"; then
		say "perfmapd did not start; its log:"
		sed 's/^/    /' "$AGENT_LOG"
		kill -9 "$AGENT_PID" 2>/dev/null
		wait "$AGENT_PID" 2>/dev/null
		AGENT_PID=
		return 1
	fi
}

# stop_agent: SIGTERM; the agent must exit 0 within 10 s.
stop_agent() {
	local rc
	[ -n "$AGENT_PID" ] || return 0
	kill -CONT "$AGENT_PID" 2>/dev/null
	kill -TERM "$AGENT_PID"
	if ! wait_for 10 agent_gone; then
		fail "perfmapd did not exit within 10 s of SIGTERM"
		kill -9 "$AGENT_PID"
	fi
	wait "$AGENT_PID"
	rc=$?
	AGENT_PID=
	return $rc
}
agent_gone() { ! kill -0 "$AGENT_PID" 2>/dev/null; }

kill9_agent() {
	kill -9 "$AGENT_PID"
	wait "$AGENT_PID" 2>/dev/null
	AGENT_PID=
}

# status_of MAP_DIR KEY: one value from `perfmapctl status --all` (of the agent
# on $RUN_DIR when that is set, as the security suite's private ones).
status_of() {
	"$BUILD/perfmapctl" status --all --map-dir "$1" ${RUN_DIR:+--run-dir "$RUN_DIR"} |
		awk -v k="$2:" '$1 == k { print $2 }'
}
# ge A B: A (empty: 0) >= B. status_is / status_ge MAP_DIR KEY VALUE: read afresh at each poll of wait_for.
ge() { [ "${1:-0}" -ge "$2" ]; }
status_is() { [ "$(status_of "$1" "$2")" = "$3" ]; }
status_ge() { ge "$(status_of "$1" "$2")" "$3"; }
# kill_all PID...: each killed with -9, then reaped: a suite's own background processes at its end.
kill_all() {
	local p
	for p in "$@"; do
		kill -9 "$p" 2>/dev/null
	done
	for p in "$@"; do
		wait "$p" 2>/dev/null
	done
}
# alive PID: there and not a zombie; gone PID: not.
alive() { [ -e "/proc/$1" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
gone() { ! alive "$1"; }

# A fresh sticky, world-writable map directory, like /tmp.
new_map_dir() {
	local d
	d=$(mktemp -d "$WORK/maps.XXXXXX")
	chmod 1777 "$d"
	echo "$d"
}

# Two busy loops, as a loaded host; stopped by load_stop or at exit.
load_start() {
	local i
	for i in 1 2; do
		sh -c 'while :; do :; done' &
		LOAD_PIDS+=($!)
	done
}

load_stop() {
	local p
	for p in "${LOAD_PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	LOAD_PIDS=()
POLL_S=0.02         # how often wait_for looks again
}

# sanitizer_check: a fail for every sanitizer report since the last call, from
# any program of the build (perfmapd, perfmapctl), in a report file or in an
# agent's log (where a report goes if ASAN_OPTIONS sent it to stderr).
sanitizer_check() {
	local f
	mkdir -p "$WORK/sanitizer-seen"
	for f in "$SAN_LOG".*; do
		[ -e "$f" ] || continue
		fail "${SCENARIO:-preflight}: a sanitizer reported (${f##*/}; pid of the program that died):"
		sed 's/^/    /' "$f" | head -n 60
		mv "$f" "$WORK/sanitizer-seen/"
	done
	for f in "${AGENT_LOGS[@]}"; do
		# Sanitizers' own lines; the agent's all start with "perfmapd: ".
		grep -qE '^==[0-9]+==ERROR: |^[^ ]+:[0-9]+:[0-9]+: runtime error: ' "$f" 2>/dev/null || continue
		fail "${SCENARIO:-preflight}: a sanitizer reported in the agent's log $f:"
		grep -m 20 -A 20 -E '^==[0-9]+==ERROR: |^[^ ]+:[0-9]+:[0-9]+: runtime error: ' "$f" | sed 's/^/    /'
	done
	AGENT_LOGS=()
}

cleanup_agent() {
	load_stop
	[ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null
	wait 2>/dev/null
	AGENT_PID=
}

# find_python MINOR: the path of a CPython 3.MINOR or later (3.12 for -X perf, 3.13
# for -X perf_jit): on the PATH, else under pyenv (root's, where the suites run);
# nothing, and 1, when there is none.
find_python() {
	local want="import sys; sys.exit(sys.version_info < (3, $1))" v root
	for v in python3.14 python3.13 python3.12; do
		command -v "$v" >/dev/null && "$v" -c "$want" 2>/dev/null && { command -v "$v"; return 0; }
	done
	root=$(pyenv root 2>/dev/null) || root=$HOME/.pyenv
	for v in "$root"/versions/3.*/bin/python3; do
		[ -x "$v" ] && "$v" -c "$want" 2>/dev/null && { echo "$v"; return 0; }
	done
	return 1
}
