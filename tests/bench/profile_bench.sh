#!/usr/bin/env bash
# make bench-profile: perfmapctl profile's cost and naming, beside perf and bpftrace, in one run.
#
#  1. Overhead at 100 Hz on every CPU under a CPU-bound load: one splitjit per
#     CPU doing a fixed amount of work, timed with no profiler, with
#     `perfmapctl profile -a`, `perf record -F 100 -a -g` and a bpftrace
#     `profile:hz:100` stack count, the four interleaved round by round; each
#     profiler's median time as a ratio against none's median (goal: 1.01 at
#     most, and no worse than either other profiler), and its own CPU time.
#  2. JIT samples named: a JIT forks a child that runs the JIT code and
#     exits; perfmapd copies the parent's map to the child. perfmapctl
#     profile -a and perf record -a -g profile it at once; the share of the
#     JIT's samples (leaf in its anonymous code) each names, perf's from
#     `perf script` run as soon as the workload ends.
#  3. Memory for 10,000 distinct stacks: stackgen on every CPU, profiled at
#     1 ms: perfmapctl's peak RSS and the kernel memory of its maps.
#  4. The push's cost per period, at about 1,000 and 10,000 distinct stacks a
#     period (stackgen on every CPU, at 1000 Hz): three perfmapctl profile
#     --every 10s of the same processes at once, one writing -o FILE.pb.gz, one
#     pushing to a local sink (push_sink.py, standing for Pyroscope), one both;
#     each one's CPU time and peak RSS, the bytes written and sent.
#  5. Always on: perfmapd and perfmapctl profile -a --every 60s --push at the
#     continuous default rate (20 Hz) under JITs on every CPU and a build's
#     process churn (a loop per CPU running sh -c "cc -c splitjit.c"): their CPU and
#     their BPF programs' as a share of the host (goal: under 0.5 %, said PASS
#     or FAIL, not the exit status: a shared VM's noise is no test), the
#     profiler's RSS and its maps' memory for the distinct stacks seen.
#
# It fails, with the reason and no figures, when a program it runs is not built,
# a workload fails or runs under PROFILE_BENCH_MIN_MS (200 ms: 20 samples a CPU at
# 100 Hz) or ends before the periods measured, or a profiler takes under a quarter
# of the samples its rate gives.
#
#   tests/bench/profile_bench.sh BUILD_DIR   (root)
set -u
BUILD=$(cd "${1:?usage: profile_bench.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
# Part 2 (--named, below) works in part 1's directory.
if [ "${2:-}" = --named ]; then
	WORK=$3
else
	WORK=$(mktemp -d /var/tmp/perfmapd-pbench.XXXXXX)
	chmod 755 "$WORK"
fi
. "$HERE/../agent/lib.sh"
BENCH=bench-profile
CTL=$BUILD/perfmapctl
SPLIT=$BUILD/tests/splitjit
STACKGEN=$BUILD/bench/stackgen
ROUNDS=${PROFILE_BENCH_ROUNDS:-5}
WORKLOAD=${PROFILE_BENCH_WORK:-2000}   # splitjit rounds per CPU: some 2.5 s of work
MIN_MS=${PROFILE_BENCH_MIN_MS:-200}
NCPU=$(nproc)
BG=()
PROFS=()
SINKS=()
PROFILER=
TIMER=
cleanup() {
	local p
	# The loads, the profilers and sinks a failure left running; first, as cleanup_agent
	# waits for every child.
	[ -d "$WORK" ] && touch "$WORK/load.stop"
	for p in "${BG[@]}" "${PROFS[@]}" "${SINKS[@]}" $PROFILER $TIMER; do
		kill -INT "$p" 2>/dev/null
		sleep 0.2
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup_agent
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
trap 'sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"; cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_built perfmapd perfmapctl tests/splitjit bench/stackgen
[ "$(id -u)" = 0 ] || { echo "bench-profile: needs root"; exit 1; }
command -v python3 >/dev/null || bench_fail "python3 is missing: the push sink (tests/bench/push_sink.py) runs on it"

# Part 2, run by part 1 in a mount namespace where /tmp is $WORK/maps: the agent, the
# JIT and its child, perfmapctl profile of it and perf record -a, then both reports.
# perf_named DATA: of the JIT's samples in DATA whose leaf is in its anonymous code (a perf
# map's, or unknown), how many perf script names; fails when there are none.
perf_named() {
	perf script -i "$1" -F comm,ip,sym,dso --comm splitjit 2>/dev/null |
		awk 'NF == 0 { next } /^splitjit/ { leaf = 1; next }
			leaf { leaf = 0; if ($0 ~ /perf-[0-9]+\.map|\/\/anon/) { n++; if ($0 ~ /split_(hot|cold)/) named++ } }
			END { if (!n) exit 1
				printf "perf report:        %d of %d JIT samples named (%.1f%%)\n", named, n, 100 * named / n }' ||
		bench_fail "perf recorded no sample of the JIT's code in $1"
}
# perf_sampling PID: perf record PID has a perf event open on every CPU, or the benchmark fails.
perf_sampling() {
	local sampler=$1
	wait_for 10 eval '[ "$(ls -l /proc/$sampler/fd 2>/dev/null | grep -c "perf_event")" -ge "$(nproc)" ]' ||
		bench_fail "perf record did not start sampling within 10 s"
}

if [ "${2:-}" = --named ]; then
	W=$3
	PERF=
	PROF=
	# The profilers a failure left running go first: cleanup_agent waits for every child.
	trap '[ -n "$PERF" ] && kill -9 "$PERF" 2>/dev/null; [ -n "$PROF" ] && kill -9 "$PROF" 2>/dev/null; cleanup_agent' EXIT
	mount --bind "$W/maps" /tmp || exit 1
	start_agent "$W/agent.log" --map-dir /tmp --archive-dir "$W/archive" --run-dir "$W" --retention 600 ||
		{ echo "bench-profile: perfmapd did not start"; exit 1; }
	perf record -F 100 -a -g -o "$W/named.data" >/dev/null 2>&1 &
	PERF=$!
	perf_sampling "$PERF"
	"$CTL" profile -j vr -- "$SPLIT" --child --fork-delay-ms 200 --child-run-ms 3000 --wait-map-ms 2000 \
		>"$W/named.p" 2>"$W/named.err" ||
		bench_fail "perfmapctl profile -- splitjit failed: $(tail -3 "$W/named.err")"
	kill -INT "$PERF"
	wait "$PERF" 2>/dev/null
	PERF=
	awk '/ JIT code$/ && !/Unnamed/ { j = $1 } / Unnamed JIT code$/ { u = $1 }
		END { if (!(j + u)) exit 1
			printf "perfmapctl profile: %d of %d JIT samples named (%.1f%%)\n", j, j + u, 100 * j / (j + u) }' \
		"$W/named.p" || bench_fail "perfmapctl profile counted no sample of the JIT's code ($W/named.p)"
	perf_named "$W/named.data"
	stop_agent
	# The same, with the report made after the maps went to the archive (1 s retention): perf
	# reads /tmp only; perfmapctl reads the archive for a process gone.
	rm -f "$W"/maps/perf-*.map
	start_agent "$W/agent2.log" --map-dir /tmp --archive-dir "$W/archive2" --run-dir "$W" --retention 1 ||
		{ echo "bench-profile: perfmapd did not start"; exit 1; }
	perf record -F 100 -a -g -o "$W/late.data" >/dev/null 2>&1 &
	PERF=$!
	"$CTL" profile -a -d 9 -j zfrm0 --zone exe --archive-dir "$W/archive2" >"$W/late.p" 2>"$W/late.err" &
	PROF=$!
	perf_sampling "$PERF"
	"$SPLIT" --child --fork-delay-ms 200 --child-run-ms 3000 --wait-map-ms 2000 >/dev/null ||
		bench_fail "splitjit --child failed (status $?)"
	kill -INT "$PERF"
	wait "$PERF" 2>/dev/null
	PERF=
	wait_for 10 eval '! ls /tmp/perf-*.map >/dev/null 2>&1' ||
		bench_fail "perfmapd did not archive the JIT's maps within 10 s (1 s retention)"
	wait "$PROF" || bench_fail "perfmapctl profile -a failed: $(tail -3 "$W/late.err")"
	PROF=
	echo "   report made after perfmapd archived the maps (1 s retention):"
	awk '/^ *[0-9]+  / { z = ($2 == "splitjit"); next } z && /split_(hot|cold)$/ { j += $2 } z && /\[anon\]/ { u += $2 }
		END { if (!(j + u)) exit 1
			printf "perfmapctl profile: %d of %d JIT samples named (%.1f%%)\n", j, j + u, 100 * j / (j + u) }' \
		"$W/late.p" || bench_fail "perfmapctl profile counted no sample of the JIT's code ($W/late.p)"
	perf_named "$W/late.data"
	stop_agent
	exit 0
fi
for t in perf bpftrace; do
	command -v "$t" >/dev/null || { echo "bench-profile: $t is missing (make deps)"; exit 1; }
done
M=$WORK/maps
mkdir -p "$M"

now_ns() { date +%s%N; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# The workload: one splitjit per CPU, WORKLOAD rounds each; its wall time in ms.
# Fails when a splitjit did.
workload() {
	local t0 pids=() p rc=0
	t0=$(now_ns)
	for ((p = 0; p < NCPU; p++)); do
		"$SPLIT" --dir "$M" --rounds "$WORKLOAD" >/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || rc=$?
	done
	echo $((($(now_ns) - t0) / 1000000))
	return $rc
}

# start_profiler KIND: in the background, in PROFILER; returns once it samples, or fails.
start_profiler() {
	PROFILER=
	case $1 in
	none) return ;;
	perfmapctl)
		rm -f "$WORK/p.folded"
		"$CTL" profile -a -j G -o "$WORK/p.folded" --map-dir "$M" 2>"$WORK/p.err" &
		PROFILER=$!
		# Sampling once a perf event per CPU is open.
		wait_for 10 eval '[ "$(ls -l /proc/$PROFILER/fd 2>/dev/null | grep -c "perf_event")" -ge "$NCPU" ]' ||
			bench_fail "perfmapctl profile did not start sampling within 10 s: $(tail -3 "$WORK/p.err")"
		;;
	perf)
		rm -f "$WORK/perf.data"
		perf record -F 100 -a -g -o "$WORK/perf.data" >/dev/null 2>&1 &
		PROFILER=$!
		wait_for 10 eval '[ "$(ls -l /proc/$PROFILER/fd 2>/dev/null | grep -c "perf_event")" -ge "$NCPU" ]' ||
			bench_fail "perf record did not start sampling within 10 s"
		;;
	bpftrace)
		bpftrace -e 'profile:hz:100 { @[kstack, ustack] = count(); }' >"$WORK/bt.out" 2>&1 &
		PROFILER=$!
		wait_for 20 grep -q "Attaching" "$WORK/bt.out" ||
			bench_fail "bpftrace did not attach within 20 s: $(tail -3 "$WORK/bt.out")"
		sleep 0.5   # "Attaching" comes before the probes are attached: bpftrace says nothing after
		;;
	esac
}

# samples_of KIND: the samples the profiler just stopped took, from its output.
samples_of() {
	case $1 in
	perfmapctl) awk '{ n += $NF } END { print n + 0 }' "$WORK/p.folded" 2>/dev/null || echo 0 ;;
	perf) perf script -i "$WORK/perf.data" -F comm 2>/dev/null | grep -c . ;;
	bpftrace) awk '/\]: [0-9]+$/ { n += $NF } END { print n + 0 }' "$WORK/bt.out" ;;
	esac
}

# The run time of the BPF programs PID holds, in ns: their fds' fdinfo has it while
# kernel.bpf_stats_enabled is on (it is, meanwhile).
bpf_ns_of() {
	cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^run_time_ns:/ { s += $2 } END { printf "%d", s }'
}

# stop_profiler KIND: stops it; fails when it exited before, or failed (perfmapctl).
stop_profiler() {
	local rc=0
	[ -n "$PROFILER" ] || return 0
	kill -0 "$PROFILER" 2>/dev/null || bench_fail "$1 exited while the workload ran"
	PROF_CPU=$(cpu_ticks "$PROFILER")
	PROF_BPF=$(bpf_ns_of "$PROFILER")
	kill -INT "$PROFILER" 2>/dev/null
	wait "$PROFILER" 2>/dev/null || rc=$?
	PROFILER=
	[ "$1" != perfmapctl ] || [ "$rc" = 0 ] ||
		bench_fail "perfmapctl profile exited with status $rc: $(tail -3 "$WORK/p.err")"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "== perfmapctl profile: overhead at 100 Hz on $NCPU CPUs under $NCPU CPU-bound JITs ($ROUNDS rounds, interleaved)"
declare -A times cpu bpf
KINDS="none perfmapctl perf bpftrace"
sysctl -qw kernel.bpf_stats_enabled=1
"$SPLIT" --dir "$M" --rounds 5 >/dev/null ||   # page cache warm
	bench_fail "$SPLIT --dir $M --rounds 5 failed (status $?)"
for ((r = 1; r <= ROUNDS; r++)); do
	for k in $KINDS; do
		start_profiler "$k"
		t=$(workload) || bench_fail "round $r ($k): a splitjit of the workload failed (status $?)"
		[ "$t" -ge "$MIN_MS" ] ||
			bench_fail "round $r ($k): the workload ran $t ms, under $MIN_MS ms: too brief to time a 100 Hz profiler (PROFILE_BENCH_WORK=$WORKLOAD rounds)"
		PROF_CPU=0
		PROF_BPF=0
		stop_profiler "$k"
		# At 100 Hz on NCPU busy CPUs: t / 10 samples a CPU; a quarter of that at least.
		if [ "$k" != none ]; then
			n=$(samples_of "$k")
			[ "$n" -ge $((t * NCPU / 40)) ] ||
				bench_fail "round $r: $k took $n samples over $t ms on $NCPU CPUs, under a quarter of 100 Hz's $((t * NCPU / 10))"
		fi
		times[$k]="${times[$k]:-} $t"
		cpu[$k]="${cpu[$k]:-} $PROF_CPU"
		bpf[$k]="${bpf[$k]:-} $PROF_BPF"
	done
done
for k in $KINDS; do
	echo "   $k: ${times[$k]} ms"
done
base=$(echo ${times[none]} | tr ' ' '\n' | median)
hz=$(getconf CLK_TCK)
printf '%-12s %10s %8s %14s %10s %12s\n' profiler "median ms" ratio "its CPU (ms)" "BPF (ms)" "accounted"
for k in $KINDS; do
	m=$(echo ${times[$k]} | tr ' ' '\n' | median)
	c=$(echo ${cpu[$k]} | tr ' ' '\n' | median)
	b=$(echo ${bpf[$k]} | tr ' ' '\n' | median)
	printf '%-12s %10s %8s %14s %10s %11s%%\n' "$k" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.3f", a / b }')" \
		"$(awk -v c="$c" -v h="$hz" 'BEGIN { printf "%.0f", c * 1000 / h }')" \
		"$(awk -v b="$b" 'BEGIN { printf "%.1f", b / 1e6 }')" \
		"$(awk -v c="$c" -v h="$hz" -v b="$b" -v m="$m" -v n="$NCPU" 'BEGIN { printf "%.2f", m ? 100 * (c * 1000 / h + b / 1e6) / (m * n) : 0 }')"
done
echo "   (ratio: each median wall time against no profiler's, same run, interleaved; this VM's noise is"
echo "    several percent from run to run, so a 1 % goal is judged on 'accounted': the profiler's own CPU"
echo "    time and its BPF programs' run time as a share of the CPUs over the workload. perf's kernel"
echo "    work writing samples, and every profiler's timer interrupts, are in neither.)"

echo "== JIT samples named: a JIT's forked child runs its code and exits; perfmapd copies the map"
# perf reads maps in /tmp only: this part runs in a mount namespace of its own, $M bound at /tmp.
unshare -m --propagation private bash "$0" "$BUILD" --named "$WORK" 2>&1 ||
	bench_fail "the JIT samples named part failed (above)"
echo "== memory for 10,000 distinct stacks: stackgen on $NCPU CPUs, 1 ms interval, 12 s"
for ((p = 0; p < NCPU; p++)); do
	"$STACKGEN" 14 &
	BG+=($!)
done
/usr/bin/time -f %M -o "$WORK/mem.rss" "$CTL" profile -a -d 12 -j Gi1 --max-stacks 65536 --map-dir "$M" \
	>"$WORK/mem.folded" 2>"$WORK/mem.err" &
TIMER=$!
wait_for 5 pgrep -P "$TIMER" >/dev/null || bench_fail "perfmapctl profile -d 12 did not start"
PROFILER=$(pgrep -P "$TIMER")
kmem=0
while kill -0 "$PROFILER" 2>/dev/null; do
	# The kernel memory of its maps as the kernel accounts it (memlock; a map that is not
	# preallocated counts what it holds), at its largest: read while it samples.
	k=$(cat /proc/$PROFILER/fdinfo/* 2>/dev/null | awk '/^memlock:/ { s += $2 } END { print s + 0 }')
	[ "$k" -gt "$kmem" ] && kmem=$k
	sleep 0.5
done
wait "$TIMER" || bench_fail "perfmapctl profile -d 12 failed: $(grep -v '^Command' "$WORK/mem.err" | tail -3)"
PROFILER=
TIMER=
# The load ran throughout: each stackgen (14 s) outlives the profile (12 s) and exits 0.
for p in "${BG[@]}"; do
	wait "$p" || bench_fail "stackgen $p failed or ended early (status $?)"
done
BG=()
stacks=$(wc -l <"$WORK/mem.folded")
rss=$(cat "$WORK/mem.rss" 2>/dev/null)
[ "$stacks" -ge 1000 ] || bench_fail "perfmapctl counted $stacks distinct stacks of stackgen, under 1000"
[ "${rss:-0}" -gt 0 ] || bench_fail "no peak RSS of perfmapctl from /usr/bin/time"
[ "$kmem" -gt 0 ] || bench_fail "the kernel memory of perfmapctl's BPF maps was never read while it sampled"
printf 'distinct stacks %d; perfmapctl peak RSS %d KiB; its BPF maps %d KiB (memlock, largest seen)\n' \
	"$stacks" "$rss" "$((kmem / 1024))"

# Parts 4 and 5: periods, as a profiler that runs for days makes them.
SINK=$HERE/push_sink.py
EVERY=${PROFILE_BENCH_EVERY:-10}                  # part 4's period, in s
PERIODS=${PROFILE_BENCH_PERIODS:-4}               # periods measured, after the first (the naming's warm-up)
ALWAYS_EVERY=${PROFILE_BENCH_ALWAYS_EVERY:-60}    # part 5's: the DaemonSet's
ALWAYS_PERIODS=${PROFILE_BENCH_ALWAYS_PERIODS:-2}
# Part 5's stand-in for others' builds: a compile, then this pause, in a loop per CPU ("off": none).
CHURN_PAUSE=${PROFILE_BENCH_CHURN_PAUSE:-0.02}
[ -r "$SINK" ] || bench_fail "$SINK is missing"

# start_sink NAME: push_sink.py on a port of its own, its URL in SINK_URL; a line per request in $WORK/NAME.sink.
start_sink() {
	rm -f "$WORK/$1.port"
	: >"$WORK/$1.sink"
	python3 "$SINK" serve "$WORK/$1.port" "$WORK/$1.sink" 2>"$WORK/$1.sink.err" &
	SINKS+=($!)
	wait_for 10 test -s "$WORK/$1.port" || bench_fail "the push sink did not start: $(tail -3 "$WORK/$1.sink.err")"
	SINK_URL=http://127.0.0.1:$(cat "$WORK/$1.port")
}
# The CPU time of PID's threads, in ns (user and system: their schedstat's run time, which
# /proc/PID/stat's ticks are rounded from); the largest RSS it had (VmHWM), in KiB; the kernel
# memory of its BPF maps (memlock), in bytes.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d", s }'; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' /proc/"$1"/status 2>/dev/null; }
memlock_of() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^memlock:/ { s += $2 } END { printf "%d", s }'; }
# marks FILE KIND: the periods perfmapctl has finished, from its stderr: the push's line (the
# last of a period's work) when it pushes, else the file's.
marks() {
	if [ "$2" = file ]; then
		grep -c ' samples; [0-9]* processes followed now' "$1"
	else
		grep -c '^perfmapctl: profile: push: [0-9]* series' "$1"
	fi
}
# The figures of periods 2 .. PERIODS+1, one a line: period_samples the samples of the file or
# period lines, push_bytes the push lines' bytes, sink_col N the sink's column N.
period_samples() { sed -n 's/.* \([0-9][0-9]*\) samples; [0-9]* processes followed now.*/\1/p' "$1" | sed -n "2,$(($2 + 1))p"; }
push_bytes() { sed -n 's/^perfmapctl: profile: push: [0-9]* series, \([0-9]*\) bytes;.*/\1/p' "$1" | sed -n "2,$(($2 + 1))p"; }
sink_col() { awk -v c="$2" '{ print $c }' "$1" | sed -n "2,$(($3 + 1))p"; }
mean() { awk '{ s += $1; n++ } END { printf "%.0f", n ? s / n : 0 }'; }
imedian() { median | awk '{ printf "%.0f", $1 }'; }
# final_pushed FILE: "REQUESTS BYTES" from perfmapctl's final push line.
final_pushed() { sed -n 's/.*; pushed \([0-9]*\) requests ([0-9]* samples, \([0-9]*\) bytes).*/\1 \2/p' "$1" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
# The host's load besides the bench's (others share this machine): forks since boot, and the load average.
forks() { awk '/^processes / { print $2 }' /proc/stat; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

echo "== push cost per period: $NCPU stackgen, 1000 Hz (-j i1), --every ${EVERY}s, the median of periods 2-$((PERIODS + 1));"
echo "   three perfmapctl profile -p of the same processes at once: -o FILE.pb.gz, --push to a local sink, both"
for c in 1k:150 10k:0; do
	name=${c%%:*}
	paths=${c#*:}
	D=$WORK/push-$name
	mkdir -p "$D"
	start_sink "$name-push"
	url_push=$SINK_URL
	start_sink "$name-both"
	url_both=$SINK_URL
	# stackgen's paths: 150 give some 1,000 distinct stacks as perfmapctl counts them (by address,
	# a process's own: each path's leaf at several instructions, in each stackgen); all of them
	# (0) one a sample or so: 1000 Hz gives 10,000 even when others take half of the CPUs.
	gen=()
	for ((p = 0; p < NCPU; p++)); do
		"$STACKGEN" $(((PERIODS + 1) * EVERY + 40)) wall "$paths" &
		BG+=($!)
		gen+=($!)
	done
	targets=$(IFS=,; echo "${gen[*]}")
	declare -A pp=() at=() got=() hwm=() cpu_ms=()
	for k in file push both; do
		case $k in
		file) out=(-o "$D/file.pb.gz") ;;
		push) out=(--push "$url_push") ;;
		both) out=(-o "$D/both.pb.gz" --push "$url_both") ;;
		esac
		"$CTL" profile -p "$targets" --every "${EVERY}s" -j i1 "${out[@]}" 2>"$D/$k.err" &
		pp[$k]=$!
		PROFS+=($!)
	done
	deadline=$(($(now_ns) + ((PERIODS + 1) * EVERY + 30) * 1000000000))
	f0=$(forks)
	ft0=$(now_ns)
	while :; do
		left=0
		for k in file push both; do
			kill -0 "${pp[$k]}" 2>/dev/null ||
				bench_fail "perfmapctl profile ($k, $name) exited: $(tail -3 "$D/$k.err")"
			# Its CPU time as each period's work ends (read within 0.1 s).
			n=$(marks "$D/$k.err" "$k")
			while [ "${got[$k]:-0}" -lt "$n" ] && [ "${got[$k]:-0}" -le "$PERIODS" ]; do
				got[$k]=$((${got[$k]:-0} + 1))
				at[$k.${got[$k]}]=$(cpu_ns "${pp[$k]}")
			done
			if [ "${got[$k]:-0}" -gt "$PERIODS" ]; then
				[ -n "${hwm[$k]:-}" ] || hwm[$k]=$(hwm_kib "${pp[$k]}")
			else
				left=1
			fi
		done
		[ "$left" = 0 ] && break
		[ "$(now_ns)" -lt "$deadline" ] ||
			bench_fail "$name: the profilers did not finish $((PERIODS + 1)) periods of ${EVERY}s in time"
		sleep 0.1
	done
	for p in "${gen[@]}"; do
		kill -0 "$p" 2>/dev/null || bench_fail "$name: a stackgen ended before the periods measured did (too brief)"
	done
	host="load average $(loadavg), $(awk -v f="$(($(forks) - f0))" -v t="$(($(now_ns) - ft0))" 'BEGIN { printf "%.0f", f * 1e9 / t }') forks/s on the host meanwhile"
	for k in file push both; do
		kill -INT "${pp[$k]}"
	done
	for k in file push both; do
		wait "${pp[$k]}" || bench_fail "perfmapctl profile ($k, $name) exited with status $?: $(tail -3 "$D/$k.err")"
	done
	kill "${gen[@]}" 2>/dev/null
	wait "${gen[@]}" 2>/dev/null
	BG=()
	PROFS=()
	kill "${SINKS[@]}" 2>/dev/null
	wait "${SINKS[@]}" 2>/dev/null
	SINKS=()
	# The periods measured: what each took, wrote and sent; a quarter of 1000 Hz's samples at least.
	for k in file push both; do
		n=$(period_samples "$D/$k.err" "$PERIODS" | awk 'NR == 1 || $1 < m { m = $1 } END { print m + 0 }')
		[ "$n" -ge $((1000 * NCPU * EVERY / 4)) ] ||
			bench_fail "$name ($k): a period of $n samples, under a quarter of 1000 Hz's $((1000 * NCPU * EVERY)) on $NCPU CPUs"
	done
	files=$(ls "$D"/file-*.pb.gz | sed -n "2,$((PERIODS + 1))p")
	[ "$(echo "$files" | grep -c .)" = "$PERIODS" ] || bench_fail "$name: not $PERIODS period files of -o ($D)"
	stacks_file=$(python3 "$SINK" count $files | imedian)
	stacks_push=$(sink_col "$WORK/$name-push.sink" 3 "$PERIODS" | imedian)
	stacks_both=$(sink_col "$WORK/$name-both.sink" 3 "$PERIODS" | imedian)
	[ "$stacks_file" -ge $((${name%k} * 1000 / 2)) ] ||
		bench_fail "$name: $stacks_file distinct stacks a period, under half of ${name%k},000 (stackgen had too little CPU?)"
	fsize=$(stat -c %s $files | imedian)
	files_both=$(ls "$D"/both-*.pb.gz | sed -n "2,$((PERIODS + 1))p")
	fsize_both=$(stat -c %s $files_both | imedian)
	sent_push=$(push_bytes "$D/push.err" "$PERIODS" | imedian)
	sent_both=$(push_bytes "$D/both.err" "$PERIODS" | imedian)
	echo "   ~$name distinct stacks a period (pprof samples: $stacks_file written, $stacks_push and $stacks_both pushed; stackgen paths: $([ "$paths" = 0 ] && echo all || echo "$paths"));"
	echo "   $host"
	printf '   %-26s %14s %14s %16s %16s\n' profiler "CPU ms/period" "peak RSS KiB" "file B/period" "pushed B/period"
	for k in file push both; do
		cpu_ms[$k]=$(for ((i = 2; i <= PERIODS + 1; i++)); do
			echo $((${at[$k.$i]} - ${at[$k.$((i - 1))]}))
		done | median | awk '{ printf "%.1f", $1 / 1e6 }')
	done
	printf '   %-26s %14s %14s %16s %16s\n' "-o FILE.pb.gz" "${cpu_ms[file]}" "${hwm[file]}" "$fsize" -
	printf '   %-26s %14s %14s %16s %16s\n' "--push" "${cpu_ms[push]}" "${hwm[push]}" - "$sent_push"
	printf '   %-26s %14s %14s %16s %16s\n' "-o FILE.pb.gz --push" "${cpu_ms[both]}" "${hwm[both]}" "$fsize_both" "$sent_both"
	echo "   push/file: CPU $(ratio "${cpu_ms[push]}" "${cpu_ms[file]}"), RSS $(ratio "${hwm[push]}" "${hwm[file]}"), bytes $(ratio "$sent_push" "$fsize");" \
		"both/file: CPU $(ratio "${cpu_ms[both]}" "${cpu_ms[file]}"), RSS $(ratio "${hwm[both]}" "${hwm[file]}")"
	for k in push both; do
		read -r nreq nbytes <<<"$(final_pushed "$D/$k.err")"
		sreq=$(grep -c . "$WORK/$name-$k.sink")
		sbytes=$(awk '{ s += $1 } END { printf "%d", s }' "$WORK/$name-$k.sink")
		[ "${nreq:-0}" -gt 0 ] || bench_fail "$name ($k): perfmapctl pushed nothing: $(tail -2 "$D/$k.err")"
		echo "   $k: perfmapctl says it pushed $nreq requests, $nbytes bytes; the sink took $sreq, $sbytes bytes$([ "$nbytes" = "$sbytes" ] && [ "$nreq" = "$sreq" ] || echo ' (NOT THE SAME)')"
	done
done

echo "== always on: perfmapd and perfmapctl profile -a --every ${ALWAYS_EVERY}s --push at the continuous default"
echo "   rate (20 Hz), under one JIT after another on each of $NCPU CPUs (splitjit --rounds $WORKLOAD, a perf map each)"
if [ "$CHURN_PAUSE" = off ]; then
	echo "   and no build churn of its own (PROFILE_BENCH_CHURN_PAUSE=off);"
else
	echo "   and, standing for others' builds, a loop per CPU of sh -c \"cc -O2 -c splitjit.c\" then a ${CHURN_PAUSE} s pause;"
fi
echo "   periods 2-$((ALWAYS_PERIODS + 1)) measured"
start_sink always
rm -f "$WORK/load.stop"
mkdir -p "$WORK/run"
# The agent as deployed but for retention (30 s, not 10 min): maps of exited JITs are archived within the window.
start_agent "$WORK/always-agent.log" --map-dir "$M" --archive-dir "$WORK/always-archive" --run-dir "$WORK/run" \
	--retention 30 || bench_fail "perfmapd did not start"
for ((p = 0; p < NCPU; p++)); do
	(
		n=0
		until [ -e "$WORK/load.stop" ]; do
			"$SPLIT" --dir "$M" --rounds "$WORKLOAD" >/dev/null || exit 1
			n=$((n + 1))
		done
		[ "$n" -gt 0 ]
	) &
	BG+=($!)
	[ "$CHURN_PAUSE" = off ] && continue
	(
		exec 3<> <(:)   # read -t on it: a pause that forks nothing
		until [ -e "$WORK/load.stop" ]; do
			sh -c 'exec "$1" -O2 -c "$2" -o "$3"' _ "${CC:-cc}" "$HERE/../profile/splitjit.c" "$WORK/churn$p.o" ||
				exit 1
			read -rt "$CHURN_PAUSE" -u 3
		done
		exit 0
	) &
	BG+=($!)
done
"$CTL" profile -a --every "${ALWAYS_EVERY}s" --push "$SINK_URL" --map-dir "$M" --run-dir "$WORK/run" \
	2>"$WORK/always.err" &
PROFILER=$!
wait_for 10 eval '[ "$(ls -l /proc/$PROFILER/fd 2>/dev/null | grep -c "perf_event")" -ge "$NCPU" ]' ||
	bench_fail "perfmapctl profile -a did not start sampling within 10 s: $(tail -3 "$WORK/always.err")"
deadline=$(($(now_ns) + ((ALWAYS_PERIODS + 1) * ALWAYS_EVERY + 30) * 1000000000))
t0=
kmem=0
while :; do
	kill -0 "$PROFILER" 2>/dev/null || bench_fail "perfmapctl profile -a exited: $(tail -3 "$WORK/always.err")"
	kill -0 "$AGENT_PID" 2>/dev/null || bench_fail "perfmapd exited: $(tail -3 "$WORK/always-agent.log")"
	n=$(marks "$WORK/always.err" push)
	if [ -z "$t0" ] && [ "$n" -ge 1 ]; then
		t0=$(now_ns)
		f0=$(forks)
		start_cpu=$(cpu_ns "$PROFILER")
		a_cpu0=$(cpu_ns "$AGENT_PID")
		a_bpf0=$(bpf_ns_of "$AGENT_PID")
		p_cpu0=$start_cpu
		p_bpf0=$(bpf_ns_of "$PROFILER")
	fi
	if [ -n "$t0" ] && [ "$n" -ge $((ALWAYS_PERIODS + 1)) ]; then
		t1=$(now_ns)
		f1=$(forks)
		la=$(loadavg)
		a_cpu1=$(cpu_ns "$AGENT_PID")
		a_bpf1=$(bpf_ns_of "$AGENT_PID")
		p_cpu1=$(cpu_ns "$PROFILER")
		p_bpf1=$(bpf_ns_of "$PROFILER")
		p_hwm=$(hwm_kib "$PROFILER")
		a_hwm=$(hwm_kib "$AGENT_PID")
		break
	fi
	k=$(memlock_of "$PROFILER")
	[ "$k" -gt "$kmem" ] && kmem=$k
	[ "$(now_ns)" -lt "$deadline" ] ||
		bench_fail "perfmapctl profile -a did not finish $((ALWAYS_PERIODS + 1)) periods of ${ALWAYS_EVERY}s in time"
	sleep 0.5
done
# The load ran throughout: every loop is still running, then each ends well.
for p in "${BG[@]}"; do
	kill -0 "$p" 2>/dev/null || bench_fail "a loop of the load (a JIT's or a compile's) ended before the periods measured did"
done
kill -INT "$PROFILER"
wait "$PROFILER" || bench_fail "perfmapctl profile -a exited with status $?: $(tail -3 "$WORK/always.err")"
PROFILER=
touch "$WORK/load.stop"
for p in "${BG[@]}"; do
	wait "$p" || bench_fail "a loop of the load failed (a splitjit or a cc exited with an error, or no splitjit ran)"
done
BG=()
stop_agent || bench_fail "perfmapd did not stop well: $(tail -3 "$WORK/always-agent.log")"
n=$(period_samples "$WORK/always.err" "$ALWAYS_PERIODS" | awk 'NR == 1 || $1 < m { m = $1 } END { print m + 0 }')
[ "$n" -ge $((20 * NCPU * ALWAYS_EVERY / 4)) ] ||
	bench_fail "a period of $n samples, under a quarter of 20 Hz's $((20 * NCPU * ALWAYS_EVERY)) on $NCPU CPUs"
read -r nreq nbytes <<<"$(final_pushed "$WORK/always.err")"
[ "${nreq:-0}" -gt 0 ] || bench_fail "perfmapctl pushed nothing: $(tail -2 "$WORK/always.err")"
stacks=$(sink_col "$WORK/always.sink" 3 "$ALWAYS_PERIODS" | awk '$1 > m { m = $1 } END { print m + 0 }')
series=$(sink_col "$WORK/always.sink" 2 "$ALWAYS_PERIODS" | mean)
sent=$(sink_col "$WORK/always.sink" 1 "$ALWAYS_PERIODS" | mean)
# The processes it came to know in the window (each named anew): what its CPU grows with.
procs=$(sed -n 's/.* processes followed now, \([0-9]*\) since the start.*/\1/p' "$WORK/always.err" |
	sed -n "1p;$((ALWAYS_PERIODS + 1))p" | awk 'NR == 1 { a = $1 } END { print $1 - a }')
[ "$kmem" -gt 0 ] || bench_fail "the kernel memory of perfmapctl's BPF maps was never read while it sampled"
awk -v w="$((t1 - t0))" -v n="$NCPU" -v ac="$((a_cpu1 - a_cpu0))" -v ab="$((a_bpf1 - a_bpf0))" \
	-v pc="$((p_cpu1 - p_cpu0))" -v pb="$((p_bpf1 - p_bpf0))" -v first="$start_cpu" -v f="$((f1 - f0))" 'BEGIN {
	h = w * n / 100
	printf "   over %.0f s: perfmapd %.1f ms CPU + %.1f ms BPF (%.3f %%), perfmapctl %.1f ms CPU + %.1f ms BPF (%.3f %%)\n",
		w / 1e9, ac / 1e6, ab / 1e6, (ac + ab) / h, pc / 1e6, pb / 1e6, (pc + pb) / h
	t = (ac + ab + pc + pb) / h
	printf "   together: %.3f %% of the host (%d CPUs): %s against 0.5 %%\n", t, n, t < 0.5 ? "PASS" : "FAIL"
	# perfmapd follows every process, perfmapctl -a those it samples: per fork, for scale.
	if (f)
		printf "   all of it per fork on the host (%d forks): perfmapd %.1f us, perfmapctl %.1f us\n", f,
			(ac + ab) / f / 1e3, (pc + pb) / f / 1e3
	printf "   (perfmapctl'"'"'s first period, its start and the naming'"'"'s warm-up, not in it: %.1f ms CPU)\n", first / 1e6
}'
echo "   the host meanwhile: load average $la, $(awk -v f="$((f1 - f0))" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f", f * 1e9 / t }') forks/s (the JITs' and others'); perfmapctl came to follow $procs processes more"
printf '   memory: perfmapctl peak RSS %d KiB, its BPF maps %d KiB (memlock, largest seen), for up to %d distinct stacks a period\n' \
	"$p_hwm" "$((kmem / 1024))" "$stacks"
printf '   (pprof samples, %d series a period, %d bytes pushed a period); perfmapd peak RSS %d KiB\n' "$series" "$sent" "$a_hwm"
echo "   pushed: perfmapctl says $nreq requests, $nbytes bytes; the sink took $(grep -c . "$WORK/always.sink"), $(awk '{ s += $1 } END { printf "%d", s }' "$WORK/always.sink") bytes"
