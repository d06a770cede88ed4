#!/usr/bin/env bash
# perfmapd benchmark: how far the host mirrors of containers' perf maps lag
# their writers, with 100 podman containers writing at once, and the agent's
# CPU for it beside the same containers' run without the agent.
#
#   tests/bench/mirror_bench.sh BUILD_DIR
#
# Needs root (BPF, podman). CONTAINERS, RATE (lines/s each) and WRITE_S
# (seconds of writing) change the load. Prints the figures docs/performance.md
# records; the last line is the summary. Fails if a line is missing at the end,
# and, with the reason and no figures, when the containers, their writers or the
# meter did not run.
set -u
BUILD=$(cd "${1:?usage: mirror_bench.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")/../agent" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-mbench.XXXXXX)
. "$HERE/lib.sh"
BENCH=bench-mirror
N=${CONTAINERS:-100}
RATE=${RATE:-20}
WRITE_S=${WRITE_S:-20}
LINGER=2          # seconds a writer stays after its last line, then exits
LAUNCH_JOBS=4     # podman runs at a time
TAG=perfmapd-mbench-$$
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
METER_PID=
LAUNCHER_PID=

# Only this run's containers, found by their label: others on the host stay.
remove_containers() {
	local ids
	ids=$("${PODMAN[@]}" ps -aq --filter "label=$TAG" 2>/dev/null)
	[ -z "$ids" ] || "${PODMAN[@]}" rm -f -t 0 $ids >/dev/null 2>&1
}
cleanup() {
	[ -n "$METER_PID" ] && kill "$METER_PID" 2>/dev/null
	if [ -n "$LAUNCHER_PID" ]; then
		kill -TERM -- -"$LAUNCHER_PID" 2>/dev/null
		wait "$LAUNCHER_PID"
	fi
	remove_containers
	cleanup_agent
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

[ "$(id -u)" = 0 ] || { echo "bench-mirror: needs root (BPF, podman)" >&2; exit 1; }
command -v podman >/dev/null && command -v runc >/dev/null ||
	{ echo "bench-mirror: needs podman and runc (make deps)" >&2; exit 1; }
need_built perfmapd perfmapctl bench/mirror_writer bench/mirror_meter
# Every container's root links the one writer: they must share a filesystem.
cp "$BUILD/bench/mirror_writer" "$WORK/writer"
LINES=$((RATE * WRITE_S))

now_ns() { date +%s%N; }
# utime + stime of a process, in clock ticks (all its threads).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# Busy and total jiffies of the whole host, from /proc/stat's cpu line.
host_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
pct() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" -v ns="$2" 'BEGIN { printf "%.1f", 100 * t / hz / (ns / 1e9) }'; }

# launch I: container I, its own root ($WORK/c/I, so its /tmp is its own:
# podman mounts no tmpfs at /tmp for a --rootfs), its host pid in $WORK/c/I.pid.
launch() {
	local i=$1 root=$WORK/c/$1
	mkdir -p "$root"/{tmp,proc,dev,sys,etc}
	chmod 1777 "$root/tmp"
	ln "$WORK/writer" "$root/writer"
	"${PODMAN[@]}" run -d --rm --name "$TAG-$i" --label "$TAG" \
		--ulimit nofile=1024:1024 --ulimit nproc=1000:1000 \
		--rootfs "$root" /writer "$i" "$RATE" "$WRITE_S" "$LINGER" >/dev/null &&
		"${PODMAN[@]}" inspect -f '{{.State.Pid}}' "$TAG-$i" >"$root.pid"
}

# run_side agent|none: N containers, all told to write at once, and the meter
# on the host mirrors (agent) or on the writers' own files (none: the
# meter's own floor, and the writers' CPU without the agent). Sets
# R_<key> from the meter's line, and R_agent, R_writers, R_host (% of a core).
run_side() {
	local side=$1 i t0 t1 launch_s pids=() files=() a0 a1 h0 h1 w0 w1 out
	rm -rf "$WORK/c"
	mkdir -p "$WORK/c"
	t0=$(now_ns)
	# In a subshell, where the agent is no job to wait for, and in a process
	# group of its own (set -m), which cleanup stops with the podman runs
	# under way: a run left going would start a container after cleanup.
	set -m
	(
		for i in $(seq "$N"); do
			launch "$i" &
			[ "$(jobs -rp | wc -l)" -lt "$LAUNCH_JOBS" ] || wait -n
		done
		wait
	) &
	LAUNCHER_PID=$!
	set +m
	wait "$LAUNCHER_PID"
	LAUNCHER_PID=
	launch_s=$(awk -v d=$(($(now_ns) - t0)) 'BEGIN { printf "%.1f", d / 1e9 }')
	for i in $(seq "$N"); do
		[ -s "$WORK/c/$i.pid" ] || { echo "bench-mirror: container $i did not start" >&2; exit 1; }
		pids+=("$(cat "$WORK/c/$i.pid")")
		if [ "$side" = agent ]; then
			files+=("$MAPD/perf-${pids[-1]}.map")
		else
			files+=("$WORK/c/$i/tmp/perf-1.map")
		fi
	done
	echo "  $side: $N containers started in $launch_s s"

	out=$WORK/meter.$side
	"$BUILD/bench/mirror_meter" --expect "$LINES" --deadline $((WRITE_S + 30)) "${files[@]}" >"$out" &
	METER_PID=$!
	wait_for 10 grep -q '^ready' "$out" || { echo "bench-mirror: the meter did not start" >&2; exit 1; }
	a0=$([ "$side" = agent ] && cpu_ticks "$AGENT_PID" || echo 0)
	read -r h0 w0 < <(host_ticks)
	t0=$(now_ns)
	kill -USR1 "${pids[@]}" || bench_fail "$side: a writer was gone before it was told to write"
	wait "$METER_PID" || bench_fail "$side: mirror_meter failed (status $?): $(tail -1 "$out")"
	METER_PID=
	t1=$(now_ns)
	a1=$([ "$side" = agent ] && cpu_ticks "$AGENT_PID" || echo 0)
	read -r h1 w1 < <(host_ticks)
	R_lines= R_lag_ms_p99=
	eval "$(tail -1 "$out" | tr ' ' '\n' | sed -n 's/^\([a-z0-9_]*\)=\([0-9.]*\)$/R_\1=\2/p')"
	[ "${R_lines:-0}" -gt 0 ] && [ -n "$R_lag_ms_p99" ] ||
		bench_fail "$side: the meter saw no line of the $N writers: $(tail -1 "$out")"
	R_agent=$(pct $((a1 - a0)) $((t1 - t0)))
	# The host's busy time over both CPUs, as % of one core: the lead's
	# jobs and podman's share it, so it is printed, not judged.
	R_host=$(pct $((h1 - h0)) $((t1 - t0)))
	echo "  $side: meter: $(tail -1 "$out")"
	[ "$side" = agent ] && echo "  $side: agent status: $("$BUILD/perfmapctl" status --all --map-dir "$MAPD" --run-dir "$RUND" |
		awk '$1 ~ /^(mirrors|mirrors_started|mirror_lines|mirror_bytes|mirror_lag_p99_ms|mirror_lag_max_ms|mirror_behind_bytes|mirrors_over_size|mirrors_over_limit|mirror_dest_taken|containers_refused):$/ { printf "%s %s ", $1, $2 }')"

	# Every writer says how much CPU it used; they have all written by now.
	wait_for 30 eval '[ "$(ls "$WORK"/c/*/tmp/cbench.done 2>/dev/null | wc -l)" -ge "$N" ]' ||
		bench_fail "$side: only $(ls "$WORK"/c/*/tmp/cbench.done 2>/dev/null | wc -l) of $N writers reported their CPU"
	R_writers=$(cat "$WORK"/c/*/tmp/cbench.done 2>/dev/null |
		awk -v ns=$((t1 - t0)) '{ s += $4 } END { printf "%.1f", 100 * s / ns }')
	echo "  $side: CPU over $(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1e9 }') s, % of one core:" \
		"agent $R_agent, the $N writers $R_writers, whole host $R_host"

	# The containers leave after LINGER s; then what the mirrors hold.
	wait_for 60 eval '[ -z "$("${PODMAN[@]}" ps -aq --filter "label=$TAG")" ]' ||
		{ echo "  $side: containers still there after 60 s; removed"; remove_containers; }
	if [ "$side" = agent ]; then
		R_end=$("$BUILD/bench/mirror_meter" --once --expect "$LINES" "${files[@]}")
		echo "  $side: after the containers exited, the mirrors hold: $R_end"
	fi
	rm -rf "$WORK/c"
}

echo "== mirror lag: $N containers (podman, runc), each appending $RATE lines/s for $WRITE_S s to its own /tmp/perf-1.map"
echo "== without the agent: the meter on the writers' own files"
run_side none
floor_p99=$R_lag_ms_p99 writers0=$R_writers host0=$R_host
[ "$R_missing" = 0 ] || { echo "bench-mirror: the meter missed lines of the writers' own files" >&2; exit 1; }

echo "== with perfmapd: the meter on the host mirrors <map-dir>/perf-<host pid>.map"
# Every agent on the host mirrors every container and makes fork copies in
# them, whatever its --map-dir: another agent's containers cost ours too,
# and ours writes into theirs (their ns_copies_existing counts it).
others=$(pgrep -x perfmapd | wc -l)
[ "$others" = 0 ] || echo "  note: $others other perfmapd running on this host; both mirror all containers"
MAPD=$WORK/maps RUND=$WORK/run
mkdir -p "$MAPD" "$RUND"
chmod 1777 "$MAPD"
start_agent "$WORK/agent.log" --map-dir "$MAPD" --run-dir "$RUND" --archive-dir "$WORK/archive" \
	--retention 10m || exit 1
if ! "$BUILD/perfmapctl" status --all --map-dir "$MAPD" --run-dir "$RUND" | grep -q '^mirrors_started:'; then
	echo "bench-mirror: this perfmapd mirrors nothing (no mirrors_started in its status)" >&2
	exit 1
fi
run_side agent
stop_agent || echo "  perfmapd exited with an error; its log: $WORK/agent.log"
grep -E ', refused$|error' "$WORK/agent.log" | head -5 | sed 's/^/  agent log: /'
missing_end=$(printf '%s\n' "$R_end" | tr ' ' '\n' | sed -n 's/^missing=//p')

printf 'mirror lag, %d containers x %d lines/s for %d s: p50 %s ms, p99 %s ms (goal <= 1000), max %s ms; first line %s ms median, %s ms max; missing at the end %s of %d; agent CPU %s%% of a core (writers %s%% with, %s%% without; meter floor p99 %s ms)\n' \
	"$N" "$RATE" "$WRITE_S" "$R_lag_ms_p50" "$R_lag_ms_p99" "$R_lag_ms_max" "$R_first_ms_p50" "$R_first_ms_max" \
	"${missing_end:-?}" $((N * LINES)) "$R_agent" "$R_writers" "$writers0" "$floor_p99"
[ "${missing_end:-x}" = 0 ]
