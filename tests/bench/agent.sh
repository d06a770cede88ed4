#!/usr/bin/env bash
# perfmapd benchmark: fork-to-child-map latency, and the agent's cost to the
# rest of the host, each measured with and without the agent in the same run.
#
#   tests/bench/agent.sh BUILD_DIR
#
# Needs root (BPF). Prints the figures docs/performance.md records; fails, with
# the reason and no figures, when a load fails or runs too briefly (loadgen_run).
set -u
BUILD=$(cd "${1:?usage: agent.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")/../agent" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-bench.XXXXXX)
. "$HERE/lib.sh"
trap 'cleanup_agent; rm -rf "$WORK" /tmp/perfmapd-bench.* /dev/shm/perfmapd-bench.*' EXIT
ROUNDS=${ROUNDS:-15}
BENCH=bench-agent BENCH_TARGET=bench

need_built perfmapd perfmapctl loadgen tests/forkjit
[ "$(id -u)" = 0 ] || { echo "bench-agent: needs root for BPF" >&2; exit 1; }
agent_on() {
	start_agent "$WORK/agent.log" --map-dir "$D" --archive-dir "$WORK/archive" \
		--retention 1h || exit 1
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "== machine: Linux $(uname -r), $(nproc) CPUs, /tmp on $(findmnt -n -o FSTYPE --target /tmp | tail -1)"

# The latency depends on the map directory's filesystem: on ext4 the copy's
# inode creation and link wait for the journal, so a busy disk shows in the
# tail. Measured where the host's /tmp is, and on tmpfs (/dev/shm).
latency_in() {   # latency_in PARENT_DIR
	local parent=$1 spec entries n line fs from
	D=$(mktemp -d "$parent/perfmapd-bench.XXXXXX")
	chmod 1777 "$D"
	fs=$(findmnt -n -o FSTYPE --target "$D" | tail -1)
	agent_on
	# 10000x: the parent also names 3 regions its children do not inherit (a
	# freed one, MADV_DONTFORK, a shared memfd): the exact copy leaves them out.
	for spec in 1000:200 10000:200 10000x:200 100000:40; do
		entries=${spec%:*}
		n=${spec#*:}
		exact=
		[ "${entries%x}" = "$entries" ] || { exact=--uninherited; entries=${entries%x}; }
		from=$(($(wc -l <"$AGENT_LOG") + 1))
		# forkjit fails unless every child found its complete map.
		line=$("$BUILD/tests/forkjit" --dir "$D" --entries "$entries" --children "$n" --serial \
			--wait-map-ms 5000 --report $exact) ||
			bench_fail "forkjit --entries $entries --children $n: a child's map did not come complete (status $?)"
		line=$(printf '%s\n' "$line" | tail -1)
		case $line in
		latency_us\ *) ;;
		*) bench_fail "forkjit --entries $entries --children $n reported no latency: $line" ;;
		esac
		printf '  %-6s %6d entries%s: %s (%d forks)\n' "$fs" "$entries" "${exact:+ (exact)}" "$line" "$n"
		# The agent's own part: the copy, as its log line times it.
		tail -n +"$from" "$AGENT_LOG" | sed -n 's/^perfmapd: copy .* (\([0-9.]*\) ms;.*/\1/p' |
			sort -g | awk -v fs="$fs" -v e="$entries${exact:+ (exact)}" '{ v[NR] = $1 } END {
				if (!NR) exit 1
				printf "  %-6s %6s entries: agent copy_ms p50 %.2f p99 %.2f max %.2f (%d copies, from its log)\n",
					fs, e, v[int(NR / 2) + 1], v[int(NR * 99 / 100) + 1], v[NR], NR }' ||
			bench_fail "perfmapd logged no copy for $n forks of $entries entries ($AGENT_LOG)"
		rm -f "$D"/perf-*.map
	done
	stop_agent
	rm -rf "$D"
}
echo "== fork-to-child-map latency (one fork at a time; the child waits for its complete map)"
latency_in /tmp
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ "$(stat -f -c %T /tmp)" != tmpfs ] &&
	latency_in /dev/shm
D=$(new_map_dir)

# CPU time of every thread of the agent, in ns (schedstat excludes steal).
agent_cpu_ns() { cat /proc/"$AGENT_PID"/task/*/schedstat | awk '{ s += $1 } END { print s }'; }
quartiles() { sort -g | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 3) / 4)], v[int((NR + 1) / 2)], v[int((3 * NR + 3) / 4)] }'; }

# Two runs without and two with perfmapd per round; odd rounds start with,
# even rounds without, so that a drift of the machine's speed falls on both
# sides alike. Each switch is followed by a second's rest: attaching and
# detaching BPF programs leaves the kernel work (text patching, RCU) that is
# the cost of a start or a stop, not of a running agent.
#
# Besides the clock, every run reports its CPU time (loadgen's, its
# children's, and the agent's threads'). CPU time leaves out what the
# hypervisor steals, which on a shared VM moves the clock by tens of percent.
#
# loadgen runs pinned to the last CPU: a fork whose child lands on another
# CPU pays a cross-CPU wake-up, which on a VM is an exit to the hypervisor and
# varies more than the whole effect measured here. The agent runs where the
# scheduler puts it; its CPU time is counted apart.
FORKS=${FORKS:-1000}
SYSCALLS=${SYSCALLS:-5000000}
PIN="taskset -c $(($(nproc) - 1))"
run_side() {   # run_side W: two fork and two syscall runs, into f$W c$W s$W
	local rf1 rc1 rf2 rc2 rs1 rsc1 rs2 rsc2
	loadgen_run fork "$FORKS"; read -r rf1 rc1 <<<"$LOAD"
	loadgen_run syscall "$SYSCALLS"; read -r rs1 rsc1 <<<"$LOAD"
	loadgen_run fork "$FORKS"; read -r rf2 rc2 <<<"$LOAD"
	loadgen_run syscall "$SYSCALLS"; read -r rs2 rsc2 <<<"$LOAD"
	if [ "$1" = 0 ]; then rate0+=("$rf1" "$rf2"); else rate1+=("$rf1" "$rf2"); fi
	printf -v "f$1" '%s' $(((rf1 + rf2) / 2))      # fork+exit per s
	printf -v "c$1" '%s' $(((rc1 + rc2) / 2))      # CPU ns per fork+exit
	printf -v "s$1" '%s' "$(awk -v a="$rsc1" -v b="$rsc2" 'BEGIN { print (a + b) / 2 }')"
}
with_agent() {
	local a0
	agent_on
	sleep 1
	a0=$(agent_cpu_ns)
	run_side 1
	g1=$((($(agent_cpu_ns) - a0) / (2 * FORKS)))  # agent CPU ns per fork+exit
	stop_agent
	sleep 1
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
summary() {   # summary LABEL GOAL VALUES...: median and middle half
	local label=$1 goal=$2 q1 q2 q3
	shift 2
	read -r q1 q2 q3 < <(printf '%s\n' "$@" | quartiles)
	printf '  %-46s median %s, middle half %s..%s (goal %s)\n' "$label" "$q2" "$q1" "$q3" "$goal"
}
echo "== cost to the host: $ROUNDS rounds, each 2 x $FORKS fork+exit and 2 x $SYSCALLS getppid without and with perfmapd"
fw=() fc=() sc=() cw=() gw=() rate0=() rate1=()
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		with_agent
		run_side 0
	else
		run_side 0
		with_agent
	fi
	fw+=("$(ratio "$f1" "$f0")")
	fc+=("$(ratio "$c0" $((c1 + g1)))")
	sc+=("$(ratio "$s1" "$s0")")
	cw+=("$c0") gw+=("$g1")
	printf '  round %2d: fork+exit %4d/s, %4d/s with; CPU %3d us, %3d + %.2f us with; getppid %.1f ns, %.1f ns with\n' \
		"$r" "$f0" "$f1" $((c0 / 1000)) $((c1 / 1000)) "$(awk -v g="$g1" 'BEGIN { print g / 1000 }')" "$s0" "$s1"
done
summary "fork+exit throughput with/without, clock:" ">= 0.95" "${fw[@]}"
summary "fork+exit throughput with/without, CPU time:" ">= 0.95" "${fc[@]}"
summary "null syscall cost with/without, CPU time:" "<= 1.02" "${sc[@]}"
spread() { sort -g | awk '{ v[NR] = $1 } END { printf "%d..%d/s, median %d/s", v[1], v[NR], v[int((NR + 1) / 2)] }'; }
printf '  fork+exit per single run (pinned), without: %s; with: %s\n' \
	"$(printf '%s\n' "${rate0[@]}" | spread)" "$(printf '%s\n' "${rate1[@]}" | spread)"
cpu_without=$(printf '%s\n' "${cw[@]}" | median)

# Every exec wakes the agent (bpf/perfmapd.bpf.c, on_exec): what that costs a
# fork+exec+exit, side by side in the same rounds, and the agent's own CPU.
EXECS=${EXECS:-500}
echo "== fork+exec+exit: $((ROUNDS / 3 + 1)) rounds of $EXECS without and with perfmapd"
xr=() xg=()
for r in $(seq $((ROUNDS / 3 + 1))); do
	loadgen_run exec "$EXECS"; read -r _ xc0 <<<"$LOAD"
	agent_on
	sleep 1
	a0=$(agent_cpu_ns)
	loadgen_run exec "$EXECS"; read -r _ xc1 <<<"$LOAD"
	xg1=$((($(agent_cpu_ns) - a0) / EXECS))
	stop_agent
	sleep 1
	xr+=("$(ratio "$xc0" $((xc1 + xg1)))") xg+=("$xg1")
	printf '  round %2d: CPU %4d us without, %4d + %.1f us with\n' "$r" $((xc0 / 1000)) \
		$((xc1 / 1000)) "$(awk -v g="$xg1" 'BEGIN { print g / 1000 }')"
done
summary "fork+exec+exit throughput with/without, CPU time:" "(none set)" "${xr[@]}"
printf '  agent CPU per exec: median %s ns\n' "$(printf '%s\n' "${xg[@]}" | median)"
agent_per_fork=$(printf '%s\n' "${gw[@]}" | median)

# In-kernel cost of the BPF programs per run (fork, exec or exit), from the
# kernel's own accounting: kernel.bpf_stats_enabled, on only for this.
TICK_MS=$(cat "$HERE"/../../agent/*.c "$HERE"/../../agent/*/*.c |
	awk '$1 == "#define" && $2 == "TICK_MS" { print $3; exit }')
[ -n "$TICK_MS" ] || bench_fail "no #define TICK_MS in agent/: the agent's tick is unknown"
echo "== agent CPU while idle (a second's rest after the start, then 2 s with no load)"
agent_on
sleep 1
a0=$(agent_cpu_ns)
sleep 2
awk -v d=$(($(agent_cpu_ns) - a0)) -v t="$TICK_MS" 'BEGIN {
	printf "  %.0f us per second, %.1f us per %d ms tick\n", d / 2e3, d / 2e3 * t / 1000, t }'
echo "== BPF program run time (kernel.bpf_stats_enabled, via perfmapctl status)"
old_stats=$(cat /proc/sys/kernel/bpf_stats_enabled)
echo 1 >/proc/sys/kernel/bpf_stats_enabled
loadgen_run fork 2000
bpf_ns=$(status_of "$D" bpf_run_time_ns)
bpf_runs=$(status_of "$D" bpf_runs)
echo "$old_stats" >/proc/sys/kernel/bpf_stats_enabled
stop_agent
# 2000 fork+exit run the programs 2000 times at least: fewer, and the kernel did not count them.
[ "${bpf_runs:-0}" -ge 2000 ] && [ "${bpf_ns:-0}" -gt 0 ] ||
	bench_fail "perfmapctl status counted ${bpf_runs:-no} BPF runs (${bpf_ns:-no} ns) over 2000 fork+exit (kernel.bpf_stats_enabled?)"
awk -v t="$bpf_ns" -v n="$bpf_runs" 'BEGIN { printf "  %d runs, %.0f ns per run (a fork+exit runs two)\n", n, t / n }'

# The agent's cost counted part by part rather than read off the difference
# of two noisy totals: each part is measured directly, so the figure holds
# still while the machine's speed does not.
echo "== fork+exit cost, accounted part by part"
awk -v t="$bpf_ns" -v n="$bpf_runs" -v ag="$agent_per_fork" -v base="$cpu_without" 'BEGIN {
	bpf = n > 0 ? 2 * t / n : 0
	printf "  %.1f us per fork+exit without; with: + %.2f us in BPF + %.2f us in perfmapd\n", base / 1e3, bpf / 1e3, ag / 1e3
	printf "  fork+exit throughput with/without, accounted: %.3f (goal >= 0.95)\n", base / (base + bpf + ag) }'

echo "== agent memory"
agent_on
base=$(awk '/VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
base_procs=$(status_of "$D" processes)
coproc HOLD { "$BUILD/loadgen" hold 10000; }
read -r ready <&"${HOLD[0]}" && [ "$ready" = ready ] || bench_fail "loadgen hold 10000 did not start its children"
# On a failure, loadgen's stdin closes first: cleanup_agent waits for every child.
wait_for 60 eval '[ "$(status_of "$D" processes)" -ge 10000 ]' || {
	exec {HOLD[1]}>&-
	bench_fail "perfmapd tracks $(status_of "$D" processes) processes 60 s after loadgen forked 10000"
}
tracked=$(status_of "$D" processes)
rss=$(awk '/VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
printf '  RSS %d KiB tracking %d processes (%d KiB at start, tracking %d)\n' "$rss" "$tracked" "$base" "$base_procs"
exec {HOLD[1]}>&-
wait "$HOLD_PID" 2>/dev/null
stop_agent
