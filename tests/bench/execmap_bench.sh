#!/usr/bin/env bash
# perfmapd benchmark: what learning of executable mappings costs the host
# (issue 11's rule: a null syscall and fork+exit within 2% of their cost
# without the agent). Three sides in every round, in an order that rotates so
# that a drift of the machine's speed falls on all alike: no agent, the agent
# with --exec-maps off, and with --exec-maps perf (PERF_RECORD_MMAP2). The
# loads run pinned to the last CPU; figures are CPU time (steal left out). It
# fails, with the reason and no figures, when a load fails or runs too briefly
# (loadgen_run), or the agent with --exec-maps perf learned no mapping.
#
#   tests/bench/execmap_bench.sh BUILD_DIR
set -u
BUILD=$(cd "${1:?usage: execmap_bench.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")/../agent" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-bench.XXXXXX)
. "$HERE/lib.sh"
trap 'cleanup_agent; rm -rf "$WORK"' EXIT
BENCH=bench-execmap
ROUNDS=${ROUNDS:-10}
SYSCALLS=${SYSCALLS:-3000000}
FORKS=${FORKS:-1000}
MMAPS=${MMAPS:-100000}
EXECS=${EXECS:-300}
PIN="taskset -c $(($(nproc) - 1))"

need_built perfmapd perfmapctl loadgen
[ "$(id -u)" = 0 ] || { echo "bench-execmap: needs root for BPF and perf events" >&2; exit 1; }
D=$(new_map_dir)

# side NAME: the four loads, CPU ns per operation, into NAME_s NAME_f NAME_m NAME_x arrays.
side() {
	local name=$1 s f m x
	loadgen_run syscall "$SYSCALLS"; read -r _ s <<<"$LOAD"
	loadgen_run fork "$FORKS"; read -r _ f <<<"$LOAD"
	loadgen_run mmapx "$MMAPS"; read -r _ m <<<"$LOAD"
	loadgen_run exec "$EXECS"; read -r _ x <<<"$LOAD"
	eval "${name}_s+=($s) ${name}_f+=($f) ${name}_m+=($m) ${name}_x+=($x)"
}
with_agent() {   # with_agent NAME EXEC_MAPS
	start_agent "$WORK/agent.log" --map-dir "$D" --archive-dir "$WORK/archive" \
		--exec-maps "$2" --no-mirrors || exit 1
	sleep 1   # the start's own kernel work (text patching, RCU) is not the running agent's
	side "$1"
	[ "$2" = off ] || seen=$(status_of "$D" exec_mappings_seen)
	stop_agent
	# $MMAPS executable pages mapped: an agent that learned none measured nothing.
	[ "$2" = off ] || [ "${seen:-0}" -gt 0 ] ||
		bench_fail "the agent with --exec-maps $2 learned no executable mapping of $MMAPS (exec_mappings_seen '${seen}')"
	sleep 1
}
seen=0
none_s=() none_f=() none_m=() none_x=() off_s=() off_f=() off_m=() off_x=() on_s=() on_f=() on_m=() on_x=()
echo "== executable mappings: $ROUNDS rounds of $SYSCALLS getppid, $FORKS fork+exit, $MMAPS mmap+munmap of an executable page, $EXECS fork+exec+exit; no agent, --exec-maps off, --exec-maps perf"
for r in $(seq "$ROUNDS"); do
	case $((r % 3)) in
	1) side none; with_agent off off; with_agent on perf ;;
	2) with_agent off off; with_agent on perf; side none ;;
	0) with_agent on perf; side none; with_agent off off ;;
	esac
	i=$((r - 1))
	printf '  round %2d: getppid %s / %s / %s ns; fork+exit %s / %s / %s us; mmap+munmap %s / %s / %s ns; exec %s / %s / %s us (none / off / perf; %s mmap reports)\n' "$r" \
		"${none_s[i]}" "${off_s[i]}" "${on_s[i]}" \
		$((none_f[i] / 1000)) $((off_f[i] / 1000)) $((on_f[i] / 1000)) \
		"${none_m[i]}" "${off_m[i]}" "${on_m[i]}" \
		$((none_x[i] / 1000)) $((off_x[i] / 1000)) $((on_x[i] / 1000)) "$seen"
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
		printf "  %-52s median %.3f, middle half %.3f..%.3f (goal %s)\n", l, v[int((NR + 1) / 2)],
			v[int((NR + 3) / 4)], v[int((3 * NR + 3) / 4)], g }'
}
echo "== cost ratios (CPU time per operation, with/without)"
ratio_summary "null syscall, agent with exec maps / no agent:" "<= 1.02" none_s on_s
ratio_summary "fork+exit, agent with exec maps / no agent:" "<= 1.02" none_f on_f
ratio_summary "null syscall, exec maps perf / off:" "<= 1.02" off_s on_s
ratio_summary "fork+exit, exec maps perf / off:" "<= 1.02" off_f on_f
ratio_summary "mmap+munmap of an exec page, perf / off:" "(none set)" off_m on_m
ratio_summary "fork+exec+exit, perf / off:" "(none set)" off_x on_x
