#!/usr/bin/env bash
# perfmapd benchmark: jitdumps (issue 22). Four figures, each side by side in
# one run, from the producer tests/bench/jitdump_gen.c:
#   1. the offline converter, perfmapctl jitdump, against perf inject -j on the
#      same dump of $FUNCS functions (perf record -k mono of the producer);
#   2. the agent's CPU per 10,000 records while it tails a dump growing at a
#      steady pace;
#   3. the lag from a record appended to its line in the agent's map;
#   4. a null syscall's and a fork+exit's CPU time with the agent and a
#      producer running, against the producer alone.
#
#   tests/bench/jitdump_bench.sh BUILD_DIR
#
# Needs root (BPF, perf) and perf. The agent it starts has a private map,
# run and archive directory, all under one directory in /var/tmp that is
# removed on every exit; perf inject's ELF files and build-id cache go there
# too (HOME points into it). Fails, with the reason and no figures, when a
# workload fails or its result is incomplete.
set -u
BUILD=$(cd "${1:?usage: jitdump_bench.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")/../agent" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-bench.XXXXXX)
. "$HERE/lib.sh"
GEN_IN='' GEN_PID='' GEN_PROC=''
cleanup() {
	[ -n "$GEN_IN" ] && exec {GEN_IN}>&-
	[ -n "$GEN_PROC" ] && kill -9 "$GEN_PROC" 2>/dev/null
	cleanup_agent
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
BENCH=bench-jitdump
FUNCS=${FUNCS:-100000}           # functions in the dump converted and injected
INJECT_TIMEOUT=${INJECT_TIMEOUT:-900}
TAIL_RECORDS=${TAIL_RECORDS:-200000}
TAIL_RATE=${TAIL_RATE:-20000}    # records a second
SLOW_RECORDS=${SLOW_RECORDS:-20000}
SLOW_RATE=${SLOW_RATE:-1000}
BIG_DUMP=${BIG_DUMP:-200000}     # functions a dump holds before SLOW_RECORDS more come
LAGS=${LAGS:-300}
ROUNDS=${ROUNDS:-6}
STEADY_RATE=${STEADY_RATE:-1000} # the producer's records a second while the loads run
SYSCALLS=${SYSCALLS:-3000000}
FORKS=${FORKS:-1000}
PIN="taskset -c $(($(nproc) - 1))"

need_built perfmapd perfmapctl loadgen bench/jitdump_gen
[ "$(id -u)" = 0 ] || bench_fail "needs root (BPF, perf record)"
command -v perf >/dev/null || bench_fail "perf is not installed: perf inject -j is what the converter is measured against"
D=$(new_map_dir)
RUN_DIR=$WORK/run
DUMPS=$WORK/dumps
mkdir -p "$RUN_DIR" "$DUMPS"
echo "== machine: Linux $(uname -r), $(nproc) CPUs, /var/tmp on $(findmnt -n -o FSTYPE --target "$WORK" | tail -1), $(perf version)"

# ms between two $EPOCHREALTIME readings, to the µs.
ms_since() { awk -v a="${1/[.,]/}" -v b="${EPOCHREALTIME/[.,]/}" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# ---- 1. perfmapctl jitdump against perf inject -j ----
echo "== 1. one dump of $FUNCS functions: perfmapctl jitdump -o MAP against perf inject -j"
P1=$WORK/inject
mkdir -p "$P1/dumps" "$P1/home"
# The producer maps its dump (the marker), loads $FUNCS functions and runs them for a second.
out=$(cd "$P1" && HOME=$P1/home perf record -q -k mono -o "$P1/perf.data" -- \
	"$BUILD/bench/jitdump_gen" dump "$P1/dumps" "$FUNCS" 1000 2>"$P1/record.log") ||
	bench_fail "perf record -k mono of jitdump_gen dump failed: $(tail -3 "$P1/record.log")"
read -r _ dump n <<<"$out"
[ "$n" = "$FUNCS" ] && [ -s "$dump" ] || bench_fail "jitdump_gen wrote no dump of $FUNCS functions: '$out'"
printf '  dump: %s MiB, perf.data: %s MiB\n' $(($(stat -c %s "$dump") >> 20)) $(($(stat -c %s "$P1/perf.data") >> 20))
# Both read the same dump from the page cache: a first read is not either's.
cat "$dump" >/dev/null
TIMEFORMAT='%R %U %S'
conv=()
for i in 1 2 3 4 5; do
	rm -f "$P1/map"
	t=$( { time "$BUILD/perfmapctl" jitdump "$dump" -o "$P1/map" 2>>"$P1/conv.log"; } 2>&1) ||
		bench_fail "perfmapctl jitdump $dump failed: $(tail -3 "$P1/conv.log")"
	conv+=("$t")
done
lines=$(wc -l <"$P1/map")
[ "$lines" = "$FUNCS" ] || bench_fail "perfmapctl jitdump wrote $lines lines for $FUNCS functions"
conv_s=$(printf '%s\n' "${conv[@]}" | awk '{ print $1 }' | median)
conv_cpu=$(printf '%s\n' "${conv[@]}" | awk '{ print $2 + $3 }' | median)
# inject writes an ELF per function beside the dump and caches each in $HOME/.debug.
t=$( { time (cd "$P1" && HOME=$P1/home timeout "$INJECT_TIMEOUT" perf inject -j \
	-i "$P1/perf.data" -o "$P1/injected.data" 2>"$P1/inject.log"); } 2>&1)
rc=$?
[ $rc = 124 ] && bench_fail "perf inject -j took over $INJECT_TIMEOUT s on $FUNCS functions: run with FUNCS=<fewer>"
[ $rc = 0 ] || bench_fail "perf inject -j failed (status $rc): $(tail -3 "$P1/inject.log")"
read -r inj_s inj_u inj_k <<<"$t"
elfs=$(find "$P1/dumps" -name 'jitted-*.so' | wc -l)
[ "$elfs" = "$FUNCS" ] || bench_fail "perf inject -j wrote $elfs ELF files for $FUNCS functions"
# The two agree on what the samples ran: perf report of the injected data against the map.
named=$(HOME=$P1/home perf report -i "$P1/injected.data" --stdio --sort sym 2>/dev/null |
	awk '$NF ~ /^fn_[0-9]+$/ { print $NF }' | sort -u)
agree=0 nnamed=0
for f in $named; do
	nnamed=$((nnamed + 1))
	grep -q " $f\$" "$P1/map" && agree=$((agree + 1))
done
[ "$nnamed" -gt 0 ] && [ "$agree" = "$nnamed" ] ||
	bench_fail "perf report after inject named $nnamed functions, $agree of them in perfmapctl's map"
printf '  %-34s %9s s wall, %9s s CPU (median of 5)\n' "perfmapctl jitdump -o MAP" "$conv_s" "$conv_cpu"
printf '  %-34s %9s s wall, %9.2f s CPU; %d ELF files, %s MiB of them and %s MiB in ~/.debug\n' \
	"perf inject -j" "$inj_s" "$(awk -v u="$inj_u" -v k="$inj_k" 'BEGIN { print u + k }')" "$elfs" \
	"$(du -sm "$P1/dumps" | awk '{ print $1 }')" "$(du -sm "$P1/home" | awk '{ print $1 }')"
awk -v a="$inj_s" -v b="$conv_s" -v n="$FUNCS" 'BEGIN {
	printf "  perf inject -j / perfmapctl jitdump, wall: %.0fx (%d functions)\n", a / b, n }'
printf '  both name the same functions: the %d perf report names after inject are all in the map\n' "$nnamed"
rm -rf "$P1"

# ---- the agent, for 2 to 4 ----
agent_on() {
	start_agent "$WORK/agent.log" --map-dir "$D" --run-dir "$RUN_DIR" --archive-dir "$WORK/archive" \
		--no-mirrors || bench_fail "perfmapd did not start"
}
# CPU time of every thread of the agent, in ns (schedstat excludes steal).
agent_cpu_ns() { cat /proc/"$AGENT_PID"/task/*/schedstat | awk '{ s += $1 } END { print s }'; }
# utime + stime of the agent, in ms, from /proc/PID/stat (clock ticks).
agent_stat_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13) * 1000 / hz }' "/proc/$AGENT_PID/stat"
}
# gen_start OUT ARGS...: jitdump_gen ARGS (as $PRODUCER_PREFIX ...) in the background,
# its stdin on fd GEN_IN, its stdout in OUT; its pid and dump from its "ready" line.
gen_start() {
	local out=$1 ready
	shift
	# shellcheck disable=SC2086 # words of a command
	exec {GEN_IN}> >(exec ${PRODUCER_PREFIX:-} "$BUILD/bench/jitdump_gen" "$@" >"$out")
	GEN_PID=$!
	wait_for 10 grep -qs '^ready ' "$out" || bench_fail "jitdump_gen $* did not start"
	ready=$(grep '^ready ' "$out")
	read -r _ GEN_PROC GEN_DUMP <<<"$ready"
}
gen_stop() {
	exec {GEN_IN}>&-
	GEN_IN=
	wait "$GEN_PID"
	GEN_PROC=
}
# found PID: the agent reads PID's dump (its log says so).
found() { grep -qs "perfmapd: jitdump $1 (.*): reading" "$AGENT_LOG"; }
map_lines() { [ -e "$D/perf-$1.map" ] && wc -l <"$D/perf-$1.map" || echo 0; }
has_lines() { [ "$(map_lines "$1")" -ge "$2" ]; }

# dump_status PID: the agent's status line for PID's dump (records=R ... stopped=no).
dump_status() {
	"$BUILD/perfmapctl" status --all --map-dir "$D" --run-dir "$RUN_DIR" |
		awk -v k="jitdump_$1:" '$1 == k { $1 = ""; print substr($0, 2) }'
}
# tail_cost N RATE PRELOAD: the agent's CPU while a dump that holds PRELOAD
# functions (read and written before the measurement) grows by N records at
# RATE a second.
tail_cost() {
	local n=$1 rate=$2 pre=$3 idle_s=3 c0 c1 s0 s1 t0 wall st out=$WORK/pace.out
	gen_start "$out" pace "$DUMPS" "$n" "$rate" "$pre"
	wait_for 10 found "$GEN_PROC" || bench_fail "perfmapd did not find jitdump_gen $GEN_PROC's dump (its marker)"
	wait_for 60 has_lines "$GEN_PROC" "$pre" ||
		bench_fail "the agent's map of $GEN_PROC has $(map_lines "$GEN_PROC") lines of the $pre preloaded"
	# The agent's CPU with the producer idle: what it spends anyway, taken off below.
	sleep 1
	c0=$(agent_cpu_ns)
	sleep "$idle_s"
	idle_ns=$((($(agent_cpu_ns) - c0) / idle_s))
	c0=$(agent_cpu_ns) s0=$(agent_stat_ms) t0=$EPOCHREALTIME
	echo go >&"$GEN_IN"
	wait_for $((n / rate + 30)) grep -qs '^appended ' "$out" || bench_fail "jitdump_gen did not append $n records"
	wait_for 30 has_lines "$GEN_PROC" $((pre + n)) ||
		bench_fail "the agent's map of $GEN_PROC has $(map_lines "$GEN_PROC") lines of $((pre + n)), 30 s after the last record"
	c1=$(agent_cpu_ns) s1=$(agent_stat_ms) wall=$(ms_since "$t0")
	# Every record read, the dump not stopped (its own line: other producers on the host count too).
	st=$(dump_status "$GEN_PROC")
	[[ " $st " == *" records=$((pre + n)) "* && " $st " == *" stopped=no "* ]] ||
		bench_fail "perfmapctl status for the dump of $GEN_PROC: '$st' (want records=$((pre + n)) stopped=no)"
	gen_stop
	rm -f "$DUMPS"/jit-*.dump
	awk -v n="$n" -v r="$rate" -v p="$pre" -v c="$((c1 - c0))" -v s="$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" \
		-v w="$wall" -v i="$idle_ns" -v a="$(awk '$1 == "appended" { print $3 }' "$out")" 'BEGIN {
		net = c - i * w / 1000
		printf "  %7d records at %5d/s onto %6d (appended in %.1f s, all in the map after %.1f s): agent CPU %.1f ms (stat: %.0f ms), %.1f ms idle over the same time\n",
			n, r, p, a / 1000, w / 1000, c / 1e6, s, i * w / 1e9
		printf "  %7d records at %5d/s onto %6d: agent CPU per 10k records %.2f ms, %.2f ms net of idle\n",
			n, r, p, c / 1e6 / (n / 1e4), net / 1e6 / (n / 1e4) }'
}
agent_on
echo "== 2. the agent's CPU while a dump grows (schedstat of all its threads; /proc/PID/stat utime+stime beside)"
tail_cost "$TAIL_RECORDS" "$TAIL_RATE" 0
tail_cost "$SLOW_RECORDS" "$SLOW_RATE" 0
tail_cost "$SLOW_RECORDS" "$SLOW_RATE" "$BIG_DUMP"

# ---- 3. lag ----
# The pause between records is 0..one tick, so that appends fall at every phase of it alike.
TICK_MS=$(awk '$1 == "#define" && $2 == "TICK_MS" { print $3; exit }' "$HERE/../../agent/daemon/loop.c")
[ -n "$TICK_MS" ] || bench_fail "no #define TICK_MS in agent/daemon/loop.c: the agent's tick is unknown"
echo "== 3. lag from a record appended to its line in the map ($LAGS records, one at a time, 0..$TICK_MS ms apart)"
out=$WORK/lag.out
gen_start "$out" lag "$DUMPS" "$D" "$LAGS" "$TICK_MS"
wait_for 10 found "$GEN_PROC" || bench_fail "perfmapd did not find jitdump_gen $GEN_PROC's dump (its marker)"
echo go >&"$GEN_IN"
wait_for $((LAGS * TICK_MS * 3 / 1000 + 60)) grep -qs '^done' "$out" ||
	bench_fail "jitdump_gen lag did not finish: $(grep -c '^lag_us' "$out") of $LAGS lines came"
gen_stop || bench_fail "jitdump_gen lag failed: a record's line did not come within 10 s"
awk '$1 == "lag_us" { print $2 / 1000 }' "$out" | sort -g | awk -v t="$TICK_MS" '{ v[NR] = $1 } END {
	printf "  lag p50 %.1f ms, p99 %.1f ms, max %.1f ms, min %.1f ms (%d records; the agent reads dumps at its %s ms tick)\n",
		v[int(NR / 2) + 1], v[int(NR * 99 / 100) + 1], v[NR], v[1], NR, t }'
stop_agent

# ---- 4. cost to the host with a producer running ----
# Each side runs a fresh producer appending $STEADY_RATE records a second,
# pinned to CPU 0, the loads pinned to the last CPU; the sides alternate
# which goes first, so that a drift of the machine's speed falls on both.
echo "== 4. cost to the host: $ROUNDS rounds of $SYSCALLS getppid and $FORKS fork+exit, a producer appending $STEADY_RATE records/s; without and with the agent"
PRODUCER_PREFIX="taskset -c 0"
side() {   # side W: the two loads, CPU ns per operation, into s_W f_W
	local s f
	gen_start "$WORK/steady.out" steady "$DUMPS" "$STEADY_RATE"
	[ "$1" = 0 ] || wait_for 10 found "$GEN_PROC" || bench_fail "perfmapd did not find jitdump_gen $GEN_PROC's dump"
	loadgen_run syscall "$SYSCALLS"; read -r _ s <<<"$LOAD"
	loadgen_run fork "$FORKS"; read -r _ f <<<"$LOAD"
	eval "s_$1+=($s) f_$1+=($f)"
	side_pid=$GEN_PROC
	gen_stop
	rm -f "$DUMPS"/jit-*.dump
}
with_agent() {
	local c0 t0
	agent_on
	sleep 1   # the start's own kernel work (text patching, RCU) is not the running agent's
	c0=$(agent_cpu_ns) t0=$EPOCHREALTIME
	side 1
	g+=("$(awk -v c=$(($(agent_cpu_ns) - c0)) -v w="$(ms_since "$t0")" 'BEGIN { printf "%.1f", c / 1e3 / w }')")
	lines=$(map_lines "$side_pid")
	[ "$lines" -gt 0 ] || bench_fail "the agent wrote no map for the producer $side_pid"
	stop_agent
	sleep 1
}
s_0=() f_0=() s_1=() f_1=() g=()
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then with_agent; side 0; else side 0; with_agent; fi
	i=$((r - 1))
	printf '  round %2d: getppid %s / %s ns; fork+exit %d / %d us; agent %s ms CPU/s, %d functions in its map (without / with)\n' \
		"$r" "${s_0[i]}" "${s_1[i]}" $((f_0[i] / 1000)) $((f_1[i] / 1000)) "${g[i]}" "$lines"
done
# ratio_summary LABEL GOAL A[] B[]: the median and middle half of B[i]/A[i].
ratio_summary() {
	local label=$1 goal=$2 i
	local -n a=$3 b=$4
	local -a r=()
	for i in "${!a[@]}"; do
		r+=("$(awk -v x="${a[i]}" -v y="${b[i]}" 'BEGIN { printf "%.4f", y / x }')")
	done
	printf '%s\n' "${r[@]}" | sort -g | awk -v l="$label" -v g="$goal" '{ v[NR] = $1 } END {
		printf "  %-50s median %.3f, middle half %.3f..%.3f (goal %s)\n", l, v[int((NR + 1) / 2)],
			v[int((NR + 3) / 4)], v[int((3 * NR + 3) / 4)], g }'
}
ratio_summary "null syscall cost, CPU time, with/without:" "<= 1.02" s_0 s_1
# As agent.sh has it: throughput, the CPU time per fork+exit without over with.
ratio_summary "fork+exit throughput, CPU time, with/without:" ">= 0.95" f_1 f_0
printf '  agent CPU with the producer running: median %s ms per second\n' "$(printf '%s\n' "${g[@]}" | median)"
