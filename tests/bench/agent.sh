#!/usr/bin/env bash
# perfmapd benchmark: fork-to-child-map latency, and the agent's cost to the
# rest of the host, each measured with and without the agent in the same run.
#
#   tests/bench/agent.sh BUILD_DIR
#
# Needs root (BPF). Prints the figures docs/performance.md records.
set -u
BUILD=$(cd "${1:?usage: agent.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")/../agent" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-bench.XXXXXX)
. "$HERE/lib.sh"
trap 'cleanup_agent; rm -rf "$WORK"' EXIT
ROUNDS=${ROUNDS:-15}

[ "$(id -u)" = 0 ] || { echo "bench-agent: needs root for BPF" >&2; exit 1; }
D=$(new_map_dir)
agent_on() {
	start_agent "$WORK/agent.log" --map-dir "$D" --archive-dir "$WORK/archive" \
		--retention 1h || exit 1
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "== fork-to-child-map latency (one fork at a time; the child waits for its complete map)"
agent_on
for spec in 1000:200 10000:200 100000:40; do
	entries=${spec%:*}
	n=${spec#*:}
	line=$("$BUILD/tests/forkjit" --dir "$D" --entries "$entries" --children "$n" --serial \
		--wait-map-ms 5000 --report | tail -1)
	printf '  %6d entries: %s (%d forks)\n' "$entries" "$line" "$n"
	rm -f "$D"/perf-*.map
done
stop_agent

# CPU time of every thread of the agent, in ns (schedstat excludes steal).
agent_cpu_ns() { cat /proc/"$AGENT_PID"/task/*/schedstat | awk '{ s += $1 } END { print s }'; }
quartiles() { sort -g | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 3) / 4)], v[int((NR + 1) / 2)], v[int((3 * NR + 3) / 4)] }'; }

# Two runs without and two with perfmapd per round; odd rounds start with,
# even rounds without, so that a drift of the machine's speed falls on both
# sides alike. Each switch is followed by a second's rest: attaching and
# detaching BPF programs leaves the kernel work (text patching, RCU) that is
# the cost of a start or a stop, not of a running agent.
FORKS=${FORKS:-1000}
SYSCALLS=${SYSCALLS:-5000000}
run_pair() {   # run_pair W: two fork and two syscall runs, into f$W c$W s$W
	local rf1 rc1 rf2 rc2 rs1 rs2
	read -r rf1 rc1 < <("$BUILD/loadgen" fork "$FORKS")
	rs1=$("$BUILD/loadgen" syscall "$SYSCALLS")
	read -r rf2 rc2 < <("$BUILD/loadgen" fork "$FORKS")
	rs2=$("$BUILD/loadgen" syscall "$SYSCALLS")
	printf -v "f$1" '%s' $((rf1 + rf2))
	printf -v "c$1" '%s' $((rc1 + rc2))
	printf -v "s$1" '%s' "$(awk -v a="$rs1" -v b="$rs2" 'BEGIN { print a + b }')"
}
with_agent() {
	agent_on
	sleep 1
	local a0
	a0=$(agent_cpu_ns)
	run_pair 1
	ag=$((ag + $(agent_cpu_ns) - a0))
	stop_agent
	sleep 1
}
echo "== cost to the host: $ROUNDS rounds, each 2 x $FORKS fork+exit and 2 x $SYSCALLS getppid with and without perfmapd"
fr=() sr=() lg0=0 lg1=0 ag=0
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		with_agent
		run_pair 0
	else
		run_pair 0
		with_agent
	fi
	fr+=("$(awk -v w="$f1" -v wo="$f0" 'BEGIN { printf "%.3f", w / wo }')")
	sr+=("$(awk -v w="$s1" -v wo="$s0" 'BEGIN { printf "%.3f", w / wo }')")
	lg0=$((lg0 + c0)) lg1=$((lg1 + c1))
	printf '  round %2d: fork+exit %5d/s without, %5d/s with (%s); getppid %s\n' \
		"$r" $((f0 / 2)) $((f1 / 2)) "${fr[-1]}" "${sr[-1]}"
done
read -r q1 q2 q3 < <(printf '%s\n' "${fr[@]}" | quartiles)
printf '  fork+exit throughput with/without: median %s, middle half %s..%s (goal >= 0.95)\n' "$q2" "$q1" "$q3"
read -r q1 q2 q3 < <(printf '%s\n' "${sr[@]}" | quartiles)
printf '  null syscall cost with/without:    median %s, middle half %s..%s (goal <= 1.02)\n' "$q2" "$q1" "$q3"
# The same cost in CPU time, which steal and the neighbours' bursts touch far
# less than the clock: what a fork+exit takes from a busy host's CPUs.
awk -v runs=$((ROUNDS * 2)) -v forks=$((ROUNDS * 2 * FORKS)) -v l0="$lg0" -v l1="$lg1" -v ag="$ag" 'BEGIN {
	l0 /= runs; l1 /= runs; ag /= forks
	printf "  CPU per fork+exit: %.1f us without; with: %.1f us forking + %.2f us in perfmapd\n", l0 / 1e3, l1 / 1e3, ag / 1e3
	printf "  fork+exit capacity with/without (CPU time): %.3f\n", l0 / (l1 + ag) }'

# In-kernel cost of the BPF programs per run (fork, exec or exit), from the
# kernel's own accounting: kernel.bpf_stats_enabled, on only for this.
echo "== BPF program run time (kernel.bpf_stats_enabled, via perfmapctl status)"
agent_on
old_stats=$(cat /proc/sys/kernel/bpf_stats_enabled)
echo 1 >/proc/sys/kernel/bpf_stats_enabled
"$BUILD/loadgen" fork 2000 >/dev/null
bpf_ns=$(status_of "$D" bpf_run_time_ns)
bpf_runs=$(status_of "$D" bpf_runs)
echo "$old_stats" >/proc/sys/kernel/bpf_stats_enabled
stop_agent
awk -v t="$bpf_ns" -v n="$bpf_runs" 'BEGIN { if (n > 0) printf "  %d runs, %.0f ns per run (a fork+exit runs two)\n", n, t / n
	else print "  no runs counted" }'

echo "== agent memory"
agent_on
base=$(awk '/VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
coproc HOLD { "$BUILD/loadgen" hold 10000; }
read -r _ <&"${HOLD[0]}"
wait_for 60 test "$(status_of "$D" processes)" -ge 10000
tracked=$(status_of "$D" processes)
rss=$(awk '/VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
printf '  RSS %d KiB tracking %d processes (%d KiB at start)\n' "$rss" "$tracked" "$base"
exec {HOLD[1]}>&-
wait "$HOLD_PID" 2>/dev/null
stop_agent
