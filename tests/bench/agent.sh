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
ROUNDS=${ROUNDS:-5}

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

echo "== cost to the host: with perfmapd / without, same run, $ROUNDS interleaved rounds"
fr=() sr=()
for r in $(seq "$ROUNDS"); do
	f0=$("$BUILD/loadgen" fork 3000)
	s0=$("$BUILD/loadgen" syscall 20000000)
	agent_on
	f1=$("$BUILD/loadgen" fork 3000)
	s1=$("$BUILD/loadgen" syscall 20000000)
	stop_agent
	fr+=("$(awk -v a="$f1" -v b="$f0" 'BEGIN { printf "%.3f", a / b }')")
	sr+=("$(awk -v a="$s1" -v b="$s0" 'BEGIN { printf "%.3f", a / b }')")
	printf '  round %d: fork+exit %s/s without, %s/s with; getppid %s ns without, %s ns with\n' \
		"$r" "$f0" "$f1" "$s0" "$s1"
done
printf '  fork+exit throughput with/without: median %s (goal >= 0.95)\n' \
	"$(printf '%s\n' "${fr[@]}" | median)"
printf '  null syscall cost with/without:    median %s (goal <= 1.02)\n' \
	"$(printf '%s\n' "${sr[@]}" | median)"

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
