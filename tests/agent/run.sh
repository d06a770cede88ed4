#!/usr/bin/env bash
# Integration tests of perfmapd: the real agent, real BPF, real perf, real runtimes.
#
#   tests/agent/run.sh BUILD_DIR [SCENARIO...]
#
# Every function named test_* below is a scenario; with no names, all run, in
# the order they are defined. Each check records a pass or a fail; a check
# or scenario that cannot run here records SKIPPED, and all of those are
# listed again at the end; a scenario that recorded nothing fails. BUILD_DIR
# may hold a sanitized build (make agent-test-asan): a sanitizer report from
# any of its programs, at any time up to the agent's exit, fails the scenario.
#
# Needs root and a kernel that loads BPF tracepoint programs. Where BPF cannot
# load the tests FAIL, unless PERFMAPD_SKIP_BPF=1, which skips them loudly;
# any other reason the agent does not start is a failure either way.
set -u
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SCENARIO...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-test.XXXXXX)
. "$HERE/lib.sh"
# Every agent's lock and sockets in a run directory of this run's own, removed
# with $WORK (an agent's lock file outlives it by design: in /run/perfmapd, one
# was left per map directory of every run), unless the caller chose one.
if [ -z "${RUN_DIR:-}" ]; then
	RUN_DIR=$WORK/run
	PERFMAPD_TEST_AGENT_ARGS="--run-dir $RUN_DIR ${PERFMAPD_TEST_AGENT_ARGS:-}"
fi

FORKJIT=$BUILD/tests/forkjit
PIDAT=$BUILD/tests/pidat
TMP_MAPS=()   # maps made in the real /tmp, removed at exit
OUT_DIRS=()   # directories made outside $WORK, removed at exit
PROM_PID=     # the Prometheus server of the metrics scenario (prom_start), stopped at exit
PROM_DIR=     # its config, log and TSDB; the TSDB is removed with it
cleanup() {
	prom_stop   # first: cleanup_agent waits for every child
	cleanup_agent
	local pid
	for pid in "${TMP_MAPS[@]}"; do
		rm -f "/tmp/perf-$pid.map"
	done
	[ ${#OUT_DIRS[@]} -eq 0 ] || rm -rf "${OUT_DIRS[@]}"
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapd integration tests"  # what skip_or_fail() (lib.sh) names

# BPF's absence may be skipped; any other start-up failure is a failure.
preflight() {
	local d log=$WORK/preflight.log
	[ "$(id -u)" = 0 ] || skip_or_fail "not root: BPF programs cannot be loaded"
	[ -r /sys/kernel/btf/vmlinux ] || skip_or_fail "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
	d=$(new_map_dir)
	if ! start_agent "$log" --map-dir "$d" --archive-dir "$WORK/preflight-archive"; then
		grep -q "bpf: cannot load" "$log" &&
			skip_or_fail "perfmapd could not load its BPF program: $(grep -m1 'bpf: cannot load' "$log")"
		say "FAIL: perfmapd did not start, and not for BPF: $(grep -m1 error "$log")"
		exit 1
	fi
	stop_agent || { say "FAIL: preflight: perfmapd exited non-zero after SIGTERM"; sanitizer_check; exit 1; }
	sanitizer_check
	[ $FAILS -eq 0 ] || exit 1
}

# map_has FILE PREFIX N: FILE holds exactly N entries named PREFIX_*.
map_has() { [ "$(grep -c " $2_" "$1" 2>/dev/null)" = "$3" ]; }
# lacks FILE WORD: FILE has no line with WORD.
lacks() { ! grep -qs "$2" "$1"; }
# archived ARCHIVE PID PATTERN: an archived map of PID holds PATTERN.
archived() { grep -qs "$3" "$1"/perf-"$2"-*.map; }
# Processes the agent at MAP_DIR placed in another namespace: mirrored, or left alone.
ns_seen() { echo $(( $(status_of "$1" ns_mirrored_processes) + $(status_of "$1" foreign_namespace_processes) )); }
ns_seen_ge() { ge "$(ns_seen "$1")" "$2"; }
# Conditions read afresh at each poll of wait_for (status_is, status_ge: lib.sh).
lines_are() { [ "$(grep -c "$2" "$1")" = "$3" ]; }

# start_scenario NAME LABEL [ARGS...]: a fresh map directory in the caller's $d, its
# archive in $a, and the agent on them, logging to $WORK/NAME.log.
start_scenario() {
	local name=$1 label=$2
	shift 2
	d=$(new_map_dir)
	a=$WORK/archive-$name
	start_agent "$WORK/$name.log" --map-dir "$d" --archive-dir "$a" "$@" || {
		fail "$label: perfmapd did not start"; return 1; }
}

# ---- scenarios ----

# One agent per map directory; perfmapctl status without one, and as JSON.
test_instance() {
	local d out rc
	d=$(new_map_dir)
	out=$("$BUILD/perfmapctl" status --map-dir "$d" --run-dir "$RUN_DIR" 2>&1)
	rc=$?
	check "instance: perfmapctl status without an agent exits 2 and says so" \
		eval '[ $rc = 2 ] && grep -q "no perfmapd is running for $d" <<<"$out"'
	start_agent "$WORK/inst1.log" --map-dir "$d" --archive-dir "$WORK/archive-inst" || {
		fail "instance: perfmapd did not start"; return; }
	# shellcheck disable=SC2086 # words of options
	out=$(timeout 10 "$BUILD/perfmapd" ${PERFMAPD_TEST_AGENT_ARGS:-} --map-dir "$d" --archive-dir "$WORK/archive-inst" 2>&1)
	rc=$?
	check "instance: a second agent on the same directory refuses: '$out'" \
		eval '[ $rc = 1 ] && grep -q "another perfmapd (pid $AGENT_PID) already manages" <<<"$out"'
	check "instance: status comes from the running agent" \
		test "$(status_of "$d" pid)" = "$AGENT_PID"
	out=$("$BUILD/perfmapctl" status --map-dir "$d" --run-dir "$RUN_DIR")
	check "instance: status's summary names the directory and the agent, and no counter at 0: '$(head -1 <<<"$out")'" \
		eval 'grep -q "^perfmapd for $d: running for .*, pid $AGENT_PID\$" <<<"$out" && grep -q "^ *Problems: " <<<"$out" && ! grep -qE "^[a-z_]+: 0\$" <<<"$out"'
	out=$("$BUILD/perfmapctl" status --map-dir "$d" --run-dir "$RUN_DIR" --json)
	check "instance: status --json is one object with numbers, booleans and strings" \
		python3 -c 'import json,sys; o = json.loads(sys.argv[1]); sys.exit(not (o["pid"] == int(sys.argv[2]) and o["dry_run"] is False and o["map_index"] == "exact" and isinstance(o["ambiguous_kept"], int)))' \
		"$out" "$AGENT_PID"
	stop_agent || fail "instance: perfmapd exited non-zero"
}

# The status socket is root's (or a group's, when asked), says who may read
# it, and a flood of connections neither stops copies nor gets every answer.
status_flood() {   # status_flood SOCKET SECONDS: connect as fast as possible; prints how many
	python3 - "$1" "$2" <<'PY'
import socket, sys, time
end, n = time.time() + float(sys.argv[2]), 0
while time.time() < end:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(1)
    try:
        s.connect(sys.argv[1])
        n += 1
    except OSError:
        pass
    s.close()
print(n)
PY
}

test_status_socket() {
	local d a r sock out rc fj n served
	r=$WORK/run-status
	start_scenario status status_socket --run-dir "$r" || return
	sock=$(ls "$r"/*.sock)
	check "status_socket: the socket is root's, mode 0600 ($(stat -c '%a %U' "$sock"))" \
		test "$(stat -c '%a %u' "$sock")" = "600 0"
	cp "$BUILD/perfmapctl" "$WORK/bin/perfmapctl" && chmod 755 "$WORK/bin/perfmapctl"
	out=$(run_as nobody "$WORK/bin/perfmapctl" status --map-dir "$d" --run-dir "$r" 2>&1)
	rc=$?
	check "status_socket: as uid 65534, refused (rc $rc) and told who may read it: '$out'" \
		eval '[ $rc = 2 ] && grep -q "permission denied: only root may read perfmapd.s status" <<<"$out"'
	# Root's flood, 3 s, while a JIT forks: the copies keep coming.
	status_flood "$sock" 3 >"$WORK/status-flood.out" &
	n=$!
	"$FORKJIT" --dir "$d" --entries 200 --children 30 --fork-delay-ms 50 --wait-map-ms 5000 \
		--prefix flood >"$WORK/status-fj.out" 2>&1
	rc=$?
	wait "$n"
	check "status_socket: 30 children got their maps during a flood of $(cat "$WORK/status-flood.out") connections" \
		test "$rc" = 0
	out=$("$BUILD/perfmapctl" status --all --map-dir "$d" --run-dir "$r")
	served=$(awk '$1 == "status_served:" { print $2 }' <<<"$out")
	check "status_socket: the flood was answered within the budget (served $served, throttled $(awk '$1 == "status_throttled:" { print $2 }' <<<"$out"))" \
		eval '[ "$(awk '"'"'$1 == "status_throttled:" { print $2 }'"'"' <<<"$out")" -ge 1 ] && [ "$served" -le $((100 * 5 + 8)) ]'
	stop_agent || fail "status_socket: perfmapd exited non-zero"
	# Given to a group: that group reads it, others are told which group may.
	start_agent "$WORK/status2.log" --map-dir "$d" --archive-dir "$a" --run-dir "$r" \
		--status-group nogroup || { fail "status_socket: perfmapd --status-group did not start"; return; }
	check "status_socket: --status-group: root:nogroup, mode 0660 ($(stat -c '%a %U:%G' "$sock"))" \
		test "$(stat -c '%a %u:%G' "$sock")" = "660 0:nogroup"
	check "status_socket: the group reads it" \
		eval 'run_as nobody "$WORK/bin/perfmapctl" status --all --map-dir "$d" --run-dir "$r" | grep -q "^pid: $AGENT_PID\$"'
	out=$(setpriv --reuid=65534 --regid=65533 --clear-groups -- "$WORK/bin/perfmapctl" status \
		--map-dir "$d" --run-dir "$r" 2>&1)
	check "status_socket: another group is told which may: '$out'" \
		grep -q "only root and the group nogroup may read" <<<"$out"
	stop_agent || fail "status_socket: perfmapd exited non-zero"
}

# Both program kinds (tp_btf reads kernel memory directly, raw_tp through
# probe reads) see host forks, and tell processes in another pid and mount
# namespace apart, whose maps are not the map directory's to copy.
test_bpf_kinds() {
	local d kind n foreign maps
	for kind in tp_btf raw_tp; do
		d=$(new_map_dir)
		start_agent "$WORK/kind-$kind.log" --map-dir "$d" --archive-dir "$WORK/archive-kind-$kind" \
			--bpf-programs "$kind" || { fail "bpf_kinds: perfmapd --bpf-programs $kind did not start"; continue; }
		check "bpf_kinds: asked for $kind, status says $kind" test "$(status_of "$d" bpf)" = "$kind"
		check "bpf_kinds: $kind: 10 children got their parent's entries" \
			"$FORKJIT" --dir "$d" --entries 100 --children 10 --wait-map-ms 10000 --prefix "kind_$kind"
		# A JIT in its own pid namespace (pid 1 there) with 3 children: only
		# the pid namespace, read from struct pid, tells it apart. Its maps
		# are where its /tmp is (not in $d): placed as mirrored, never copied.
		foreign=$(ns_seen "$d")
		maps=$(cd "$d" && ls perf-*.map | wc -l)
		unshare --pid --fork "$FORKJIT" --dir "$d" --entries 10 --children 3 \
			--prefix "ns_$kind" >"$WORK/kind-ns-$kind.out" 2>&1
		wait_for 5 ns_seen_ge "$d" $((foreign + 4))
		n=$(ns_seen "$d")
		check "bpf_kinds: $kind: $((n - foreign)) processes in another pid namespace seen" ge "$n" $((foreign + 4))
		check "bpf_kinds: $kind: and left alone (no copy, no map for them)" eval \
			'[ "$(status_of "$d" copies_created)" = 10 ] && [ "$(cd "$d" && ls perf-*.map | grep -cv "^perf-1\.map$")" = "$maps" ]'
		stop_agent || fail "bpf_kinds: $kind: perfmapd exited non-zero"
	done
}

# Share of perf samples of PID, recorded for SECONDS after the fork, that
# resolve to the JIT's names (jit_fn_*), in percent.
perf_resolved_pct() {
	local pid=$1 secs=$2 data=$WORK/perf.$1.data
	perf record -q -e cpu-clock:u -p "$pid" -o "$data" -- sleep "$secs" >/dev/null 2>&1
	perf script -i "$data" -F ip,sym 2>/dev/null |
		awk '{ n++ } $2 ~ /^jit_fn_/ { j++ } END { if (n < 50) print -1; else printf "%d\n", 100 * j / n }'
}

# perf_jit_child OUT FORKJIT_ARGS...: forkjit in /tmp forks a child; perf
# attaches to the child only after the fork. Sets $pct (perf_resolved_pct)
# and $fj, forkjit's pid, still to be waited for.
perf_jit_child() {
	local out=$1 pid
	shift
	"$FORKJIT" --entries 64 --children 1 --run-ms 4000 --print-pids "$@" >"$out" &
	fj=$!
	TMP_MAPS+=("$fj")
	wait_for 5 grep -q child "$out"
	pid=$(awk '/child/ { print $2; exit }' "$out")
	TMP_MAPS+=("$pid")
	pct=$(perf_resolved_pct "$pid" 2)
}

test_fork_perf() {
	local pct fj
	command -v perf >/dev/null || { fail "fork_perf: perf is not installed (Debian: linux-perf)"; return; }
	# Without the agent, first: the child's samples stay hex (this is the bug).
	perf_jit_child "$WORK/fj-noagent.out"
	wait "$fj"
	say "  without perfmapd: ${pct}% of the child's samples resolve"
	check "fork_perf: without the agent the child's samples do not resolve (${pct}%): the test can tell" \
		test "$pct" -lt 95

	start_agent "$WORK/fork_perf.log" --map-dir /tmp --archive-dir "$WORK/archive-perf" ||
		{ fail "fork_perf: perfmapd did not start on /tmp"; return; }
	perf_jit_child "$WORK/fj.out" --wait-map-ms 3000
	check "fork_perf: the child found its map" wait "$fj"
	check "fork_perf: ${pct}% of the child's samples resolve to JIT names with perf record -p after the fork" \
		test "$pct" -ge 95
	stop_agent || fail "fork_perf: perfmapd exited non-zero after SIGTERM"
	check "fork_perf: a 'stopping' line at SIGTERM" grep -q "stopping" "$AGENT_LOG"
}

# 10 JIT parents x 60 children at once: every child checks its own map byte for byte.
test_fork_storm() {
	local d a pids=() rc=0 i created
	start_scenario storm fork_storm || return
	for i in $(seq 10); do
		"$FORKJIT" --dir "$d" --entries $((200 * i)) --children 60 --wait-map-ms 20000 \
			--prefix "storm${i}" >"$WORK/storm.$i.out" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	created=$(status_of "$d" copies_created)
	check "fork_storm: 600 children, each with a complete map ($created copies)" \
		eval '[ $rc = 0 ] && [ "$created" -ge 600 ]' || head -5 "$WORK"/storm.*.out
	stop_agent || fail "fork_storm: perfmapd exited non-zero"
}

# Ten JITs started at once from a shell, each writing its map within a
# millisecond of its exec, then forking 60 children: every parent keeps its
# own map, and every child holds exactly its parent's entries.
exec_storm() {
	local label=$1 user=$2 d a out complete rc i owner bad
	out=$(mktemp -d "$WORK/out.XXXXXX")
	chmod 1777 "$out"
	start_scenario "$label" "$label" || return
	# One shell starts them all, as a user would; each writes its map at once.
	run_as "$user" sh -c 'pids=
		for i in 1 2 3 4 5 6 7 8 9 10; do
			"$0" --dir "$1" --entries $((100 * i)) --children 60 --wait-map-ms 30000 \
				--check-own --child-append --print-pids --report --prefix "$2$i" >"$3/$i.out" 2>&1 &
			pids="$pids $!"
		done
		rc=0
		for p in $pids; do wait $p || rc=1; done
		exit $rc' "$JITBIN" "$d" "$label" "$out"
	rc=$?
	complete=$(cat "$out"/*.out | awk '/^complete/ { split($2, v, "/"); n += v[1] } END { print n + 0 }')
	check "$label: all ten parents kept their own map and saw every child complete" test "$rc" = 0 ||
		grep -h forkjit "$out"/*.out | head -3
	check "$label: $complete of 600 children hold exactly their parent's entries" test "$complete" = 600
	check "$label: no parent's map was moved (exec_maps_archived $(status_of "$d" exec_maps_archived))" \
		test "$(status_of "$d" exec_maps_archived)" = 0
	check "$label: no map judged an earlier process's" lacks "$AGENT_LOG" "is not this process's\|is the old image's"
	if [ "$user" != root ]; then
		bad=0
		for i in $(cat "$out"/*.out | awk '/^child/ { print $2 }'); do
			owner=$(stat -c '%u %a' "$d/perf-$i.map" 2>/dev/null)
			[ "$owner" = "65534 600" ] || { bad=$((bad + 1)); say "  perf-$i.map: '$owner'"; }
		done
		check "$label: every child's copy is owned by uid 65534, mode 0600 (and each child appended to it)" \
			test "$bad" = 0
	fi
	stop_agent || fail "$label: perfmapd exited non-zero"
}

# run_as USER CMD...: as root, or as nobody (uid 65534) with no groups.
run_as() {
	local user=$1
	shift
	if [ "$user" = root ]; then
		"$@"
	else
		setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
	fi
}

test_exec_storm() { exec_storm exec_storm root; }

test_exec_storm_loaded() {
	load_start
	exec_storm exec_storm_loaded root
	load_stop
}

# The same JITs as an unprivileged user: su nobody lost maps before.
test_exec_storm_nobody() { exec_storm exec_storm_nobody nobody; }

# An old image writes its map and execs within a millisecond. The new image
# is held (SIGSTOP) before its first write until the agent has acted: the
# old entries are in the archive, and the new image's map is its own alone.
exec_old_image() {
	local label=$1 d a pid
	start_scenario "$label" "$label" || return
	"$FORKJIT" --dir "$d" --entries 30 --prefix oldimage --exec \
		"$FORKJIT" --dir "$d" --entries 5 --prefix newimage --stop-first --hold-ms 100 &
	pid=$!
	check "$label: the new image is held before its first map write" wait_for 10 is_stopped "$pid"
	check "$label: the old image's map left its path" wait_for 10 test ! -e "$d/perf-$pid.map"
	check "$label: the old image's 30 entries are in the archive" \
		wait_for 10 archived "$a" "$pid" oldimage_29
	kill -CONT "$pid"
	check "$label: the new image's map holds its own 5 entries" \
		wait_for 10 map_has "$d/perf-$pid.map" newimage 5
	check "$label: and none of the old image's" lacks "$d/perf-$pid.map" oldimage
	wait "$pid"
	# A JIT exec'ing a program that writes no map.
	"$FORKJIT" --dir "$d" --entries 30 --prefix beforesleep --exec sleep 60 &
	pid=$!
	check "$label: a JIT exec'ing a non-JIT program leaves no map at its pid" \
		wait_for 10 test ! -e "$d/perf-$pid.map"
	check "$label: its entries are in the archive, not just gone" \
		wait_for 10 archived "$a" "$pid" beforesleep_29
	kill "$pid"
	wait "$pid" 2>/dev/null
	stop_agent || fail "$label: perfmapd exited non-zero"
}

test_exec() { exec_old_image exec; }

test_exec_loaded() {
	load_start
	exec_old_image exec_loaded
	load_stop
}

# The agent is held while an old image execs and the new one appends its own
# entries to the old file: the agent must not take that map away.
test_exec_agent_late() {
	local d a pid
	start_scenario late exec_agent_late || return
	kill -STOP "$AGENT_PID"
	"$FORKJIT" --dir "$d" --entries 30 --prefix oldimage --exec \
		"$FORKJIT" --dir "$d" --entries 5 --prefix newimage --hold-ms 60000 &
	pid=$!
	check "exec_agent_late: the new image appended to the old image's file" \
		wait_for 10 map_has "$d/perf-$pid.map" newimage 5
	kill -CONT "$AGENT_PID"
	check "exec_agent_late: the agent judged the exec" wait_for 10 grep -q "exec $pid .*kept" "$AGENT_LOG"
	check "exec_agent_late: the map stays at its path with the new image's entries" \
		map_has "$d/perf-$pid.map" newimage 5
	check "exec_agent_late: nothing of it went to the archive" eval "! ls '$a'/perf-$pid-* >/dev/null 2>&1"
	check "exec_agent_late: counted as ambiguous" ge "$(status_of "$d" ambiguous_kept)" 1
	kill "$pid"
	wait "$pid" 2>/dev/null
	stop_agent || fail "exec_agent_late: perfmapd exited non-zero"
}

# pidat PID CMD... in the background as $REUSE_PID (pidat's pid); 0 once PID
# runs CMD, 1 when PID could not be had (pidat gave up).
start_at_pid() {
	local want=$1
	shift
	"$PIDAT" "$want" "$@" &
	REUSE_PID=$!
	wait_for 20 eval "[ /proc/$want/exe -ef '$FORKJIT' ] || ! kill -0 $REUSE_PID 2>/dev/null"
	[ "/proc/$want/exe" -ef "$FORKJIT" ]
}

# A process writes its map and exits within a millisecond; a new process
# gets its pid and is held before its first write until the agent has acted.
pid_reuse() {
	local label=$1 d a pid
	start_scenario "$label" "$label" || return
	"$FORKJIT" --dir "$d" --entries 8 --prefix deadproc &
	pid=$!
	wait "$pid"
	check "$label: the agent saw the exit" wait_for 10 grep -q "exit $pid " "$AGENT_LOG"
	if ! start_at_pid "$pid" "$FORKJIT" --dir "$d" --entries 4 --prefix newproc --stop-first; then
		skip "pid $pid could not be had again (another process took it)"
		wait "$REUSE_PID" 2>/dev/null
		stop_agent
		return
	fi
	check "$label: the new process is held before its first map write" wait_for 10 is_stopped "$pid"
	check "$label: the dead process's map left the path" wait_for 10 test ! -e "$d/perf-$pid.map"
	check "$label: its entries are in the archive" wait_for 10 archived "$a" "$pid" deadproc_7
	kill -CONT "$pid"
	check "$label: the new process's map holds its own 4 entries" wait_for 10 map_has "$d/perf-$pid.map" newproc 4
	check "$label: and none of the dead one's" lacks "$d/perf-$pid.map" deadproc
	wait "$REUSE_PID"
	stop_agent || fail "$label: perfmapd exited non-zero"
}

test_pid_reuse() { pid_reuse pid_reuse; }

test_pid_reuse_loaded() {
	load_start
	pid_reuse pid_reuse_loaded
	load_stop
}

# The agent is held while a process exits and a new one at its pid appends
# its own entries to the dead one's file: the agent must not take that map away.
test_pid_reuse_agent_late() {
	local d a pid
	start_scenario reuse-late pid_reuse_agent_late || return
	"$FORKJIT" --dir "$d" --entries 8 --prefix deadproc &
	pid=$!
	wait "$pid"
	check "pid_reuse_agent_late: the agent saw the exit" wait_for 10 grep -q "exit $pid " "$AGENT_LOG"
	kill -STOP "$AGENT_PID"
	if ! start_at_pid "$pid" "$FORKJIT" --dir "$d" --entries 4 --prefix newproc --hold-ms 60000; then
		skip "pid $pid could not be had again (another process took it)"
		kill -CONT "$AGENT_PID"
		wait "$REUSE_PID" 2>/dev/null
		stop_agent
		return
	fi
	check "pid_reuse_agent_late: the new process appended to the dead one's file" \
		wait_for 10 map_has "$d/perf-$pid.map" newproc 4
	kill -CONT "$AGENT_PID"
	check "pid_reuse_agent_late: the agent judged the new process's path" \
		wait_for 10 grep -q "fork $pid .*kept" "$AGENT_LOG"
	check "pid_reuse_agent_late: the map stays at its path with the new process's entries" \
		map_has "$d/perf-$pid.map" newproc 4
	check "pid_reuse_agent_late: nothing of it went to the archive" eval "! ls '$a'/perf-$pid-* >/dev/null 2>&1"
	kill "$pid"
	wait "$REUSE_PID" 2>/dev/null
	stop_agent || fail "pid_reuse_agent_late: perfmapd exited non-zero"
}

# The child's runtime made its own map first (own entries), or copied the parent's itself.
test_runtime_races() {
	local d a mode pid_fj key before after child
	start_scenario races runtime_races || return
	for mode in own copy; do
		key=copies_appended
		[ $mode = copy ] && key=copies_by_runtime
		before=$(status_of "$d" $key)
		# Hold the agent so the runtime is first, as it may be on a loaded host.
		kill -STOP "$AGENT_PID"
		"$FORKJIT" --dir "$d" --entries 50 --children 1 --child-writes $mode \
			--wait-map-ms 10000 --print-pids >"$WORK/races.$mode.out" 2>&1 &
		pid_fj=$!
		wait_for 10 grep -q child "$WORK/races.$mode.out"
		child=$(awk '/child/ { print $2 }' "$WORK/races.$mode.out")
		check "runtime_races ($mode): the child's runtime wrote first" wait_for 10 test -s "$d/perf-$child.map"
		kill -CONT "$AGENT_PID"
		check "runtime_races: child wrote '$mode' first: its map holds the parent's entries exactly once" \
			wait "$pid_fj" || cat "$WORK/races.$mode.out"
		after=$(status_of "$d" $key)
		check "runtime_races ($mode): $key grew ($before -> $after)" test "$after" -gt "$before"
	done
	stop_agent || fail "runtime_races: perfmapd exited non-zero"
}

# Traps in the map directory: a symlink and a FIFO where the child's map goes.
test_traps() {
	local d a victim trap_kind base pid rc attempt
	victim=$WORK/victim
	echo "precious" >"$victim"
	start_scenario traps traps || return
	for trap_kind in symlink fifo; do
		# pidat runs forkjit as pid base; its first child is base + 1 unless
		# another process forks in between: then again, three times at most.
		for attempt in 1 2 3; do
			base=$(( ($(cat /proc/sys/kernel/ns_last_pid) + 500) % 30000 + 1000 ))
			pid=$((base + 1))
			rm -f "$d/perf-$pid.map"
			if [ $trap_kind = symlink ]; then
				ln -s "$victim" "$d/perf-$pid.map"
			else
				mkfifo "$d/perf-$pid.map"
			fi
			"$PIDAT" "$base" "$FORKJIT" --dir "$d" --entries 10 --children 1 --wait-map-ms 1500 \
				--print-pids >"$WORK/traps.out" 2>&1
			rc=$?
			grep -q "child $pid\$" "$WORK/traps.out" && break
			rm -f "$d/perf-$pid.map"
		done
		if ! grep -q "child $pid\$" "$WORK/traps.out"; then
			skip "traps ($trap_kind): three times the child got another pid than the trap's"
			continue
		fi
		check "traps ($trap_kind): the child found no map (rc $rc)" test "$rc" = 1
		check "traps ($trap_kind): the symlink's target was not written" test "$(cat "$victim")" = precious
		# Said once, by whichever met it first: the listing (no process yet), the fork, the copy.
		check "traps ($trap_kind): refused, and said why, once" \
			test "$(grep -c "perf-$pid.map .*refused" "$AGENT_LOG")" = 1
		check "traps ($trap_kind): the agent still answers" test -n "$(status_of "$d" pid)"
		rm -f "$d/perf-$pid.map"
	done
	stop_agent || fail "traps: perfmapd exited non-zero"
}

# A process named to forge a log line: its name stays inside its own line,
# escaped so that the bytes can be read back.
test_log_names() {
	local d a name
	start_scenario log_names log_names || return
	name=$'x\nerror: root ok'
	cp "$FORKJIT" "$WORK/bin/$name"
	check "log_names: the JIT named with a newline forked 2 children that got their maps" \
		"$WORK/bin/$name" --dir "$d" --entries 10 --children 2 --wait-map-ms 5000
	check "log_names: its name is in the copy lines, escaped (x\\nerror: root o)" \
		wait_for 5 grep -q 'copy [0-9]* -> [0-9]* (x\\nerror: root o): ' "$AGENT_LOG"
	check "log_names: no line of the log begins with the forged 'error: root ok'" \
		lacks "$AGENT_LOG" '^error: root'
	rm -f "$WORK/bin/$name"
	stop_agent || fail "log_names: perfmapd exited non-zero"
}

# CPython with -X perf and os.fork, where a 3.12+ exists.
test_cpython() {
	local py out rc version
	py=$(find_python 12)
	[ -n "$py" ] || { skip "no CPython 3.12+ on this machine"; return; }
	version=$("$py" -V 2>&1)
	start_agent "$WORK/cpython.log" --map-dir /tmp --archive-dir "$WORK/archive-py" || {
		fail "cpython: perfmapd did not start"; return; }
	out=$WORK/cpython.out
	"$py" -X perf "$HERE/fork_child.py" >"$out" 2>&1
	rc=$?
	TMP_MAPS+=($(awk '$1 == "pids" { print $2, $3 }' "$out"))
	check "cpython: $version -X perf child holds all $(awk '$1 == "parent_lines" { print $2 }' "$out") of its parent's entries" \
		test "$rc" = 0 || cat "$out"
	stop_agent || fail "cpython: perfmapd exited non-zero"
}

# Exit: the map stays for --retention (not a moment less), then is compacted
# into the archive under the quota.
test_exit_archive() {
	local d a pid i n t0 ms archive_file
	start_scenario exit exit_archive --retention 3s --archive-max-bytes 4K || return
	for i in 1 2 3 4 5 6; do
		"$FORKJIT" --dir "$d" --entries 40 --prefix "exit${i}" &
		pid=$!
		wait "$pid"
	done
	t0=$(date +%s%N)
	check "exit_archive: the map is at its path after the exit" test -f "$d/perf-$pid.map"
	if ! wait_for 20 test ! -e "$d/perf-$pid.map"; then
		fail "exit_archive: the map was not archived after the retention"
		stop_agent
		return
	fi
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	check "exit_archive: it stayed the whole retention (gone after $ms ms, retention 3000)" test "$ms" -ge 3000
	check "exit_archive: and left within 10 s after it" test "$ms" -le 13000
	wait_for 10 archived "$a" "$pid" exit6_
	archive_file=$(ls "$a" | grep "^perf-$pid-")
	n=$(ls "$a" | grep -c '^perf-')
	check "exit_archive: archived compacted, all 40 entries" test "$(grep -c "exit6_" "$a/$archive_file")" = 40
	check "exit_archive: under the 4K quota ($n kept)" eval '[ "$(cat "$a"/perf-* | wc -c)" -le 4096 ] && [ "$n" -lt 6 ]'
	check "exit_archive: eviction counted" ge "$(status_of "$d" archive_evicted)" 1
	check "exit_archive: every archived map reads clean" "$BUILD/perfmapctl" check "$a"/perf-*
	check "exit_archive: no staged file left in the map directory" eval "! ls -a '$d' | grep -q '^\.perfmapd\.'"
	stop_agent || fail "exit_archive: perfmapd exited non-zero"
}

# The config file (--config): its options under the command line's; SIGHUP
# reads it again and changes what may change at once (retention, quota,
# budget, log level), says what needs a restart, and keeps everything when
# the file is bad; a file others may write is refused at start.
config_sighup() {   # config_sighup PATTERN: SIGHUP, then wait for PATTERN in the agent's log
	local before
	before=$(grep -c "SIGHUP: " "$AGENT_LOG")
	kill -HUP "$AGENT_PID"
	wait_for 10 eval '[ "$(grep -c "SIGHUP: " "$AGENT_LOG")" -gt "$before" ]' &&
		grep "SIGHUP: " "$AGENT_LOG" | tail -n 2 | grep -qF -- "$1"
}

test_config() {
	local d a conf=$WORK/perfmapd.conf pid t0 ms out rc
	printf '# the agent of test_config\nretention = 1h\n\narchive-max-bytes = 1M\nlog-level = info\n' >"$conf"
	chmod 644 "$conf"
	start_scenario config config --config "$conf" --archive-max-bytes 2M || return
	check "config: retention from the file (retention_s $(status_of "$d" retention_s))" \
		status_is "$d" retention_s 3600
	check "config: the command line beats the file (archive_max_bytes $(status_of "$d" archive_max_bytes))" \
		status_is "$d" archive_max_bytes 2097152

	printf 'retention = 2s\nlog-level = debug\narchive-max-bytes = 8M\nringbuf-size = 2M\n' >"$conf"
	check "config: SIGHUP says what changed" \
		config_sighup "SIGHUP: $conf: retention 3600s -> 2s, log-level info -> debug"
	check "config: ...and what needs a restart" \
		grep -qF "SIGHUP: $conf: ringbuf-size needs a restart (kept 1M, not 2M)" "$AGENT_LOG"
	check "config: retention_s is 2 after SIGHUP ($(status_of "$d" retention_s))" status_is "$d" retention_s 2
	check "config: the command line still beats the file ($(status_of "$d" archive_max_bytes))" \
		status_is "$d" archive_max_bytes 2097152
	"$FORKJIT" --dir "$d" --entries 10 --prefix cfgexit &
	pid=$!
	wait "$pid"
	t0=$(date +%s%N)
	check "config: an exit after the reload is kept 2 s" \
		wait_for 10 grep -q "exit $pid .* stays for 2s" "$AGENT_LOG"
	if wait_for 15 test ! -e "$d/perf-$pid.map"; then
		ms=$(( ($(date +%s%N) - t0) / 1000000 ))
		check "config: ...and archived after about 2 s (gone after $ms ms)" \
			eval '[ "$ms" -ge 1500 ] && [ "$ms" -le 12000 ]'
		check "config: its entries are in the archive" wait_for 10 archived "$a" "$pid" cfgexit_9
	else
		fail "config: the map was not archived within 15 s of a 2 s retention"
	fi
	check "config: debug lines (each event) after log-level debug, none before" \
		eval '[ "$(sed -n "/SIGHUP: /q; /perfmapd: event /p" "$AGENT_LOG" | wc -l)" = 0 ] &&
			grep -q "perfmapd: event exit $pid " "$AGENT_LOG"'

	printf 'retention = 5s\nretentoin = 1s\n' >"$conf"
	check "config: a bad file on SIGHUP changes nothing and says why" \
		config_sighup "SIGHUP: $conf:2: unknown key \"retentoin\"; nothing changed"
	check "config: retention_s still 2 ($(status_of "$d" retention_s))" status_is "$d" retention_s 2
	printf 'retention = 5s\n' >"$conf"
	chmod 664 "$conf"
	check "config: a group-writable file on SIGHUP is refused, nothing changed" \
		config_sighup "writable by its group (mode 0664); refused: the agent runs as root; nothing changed"
	check "config: retention_s still 2 ($(status_of "$d" retention_s))" status_is "$d" retention_s 2
	check "config: the agent keeps running" kill -0 "$AGENT_PID"
	stop_agent || fail "config: perfmapd exited non-zero"

	# shellcheck disable=SC2086 # words of options
	out=$(timeout 10 "$BUILD/perfmapd" ${PERFMAPD_TEST_AGENT_ARGS:-} --config "$conf" \
		--map-dir "$d" --archive-dir "$a" 2>&1)
	rc=$?
	check "config: a group-writable file is refused at start (rc $rc): '$out'" \
		eval '[ $rc = 2 ] && grep -qF "$conf: writable by its group (mode 0664); refused: the agent runs as root" <<<"$out"'
	out=$(timeout 10 "$BUILD/perfmapd" ${PERFMAPD_TEST_AGENT_ARGS:-} --config "$WORK/none.conf" \
		--map-dir "$d" --archive-dir "$a" 2>&1)
	rc=$?
	check "config: a missing --config is an error (rc $rc): '$out'" \
		eval '[ $rc = 2 ] && grep -qF "$WORK/none.conf: No such file or directory" <<<"$out"'
}

# JITs that write their map and exit at once, their exec read late: each map
# stays for the retention. An exiting process's mappings are going away and
# prove nothing (an early version archived such maps as an old image's).
test_exit_fast() {
	local d a pids=() pid kept=0 i
	start_scenario exit-fast exit_fast || return
	for i in $(seq 20); do
		"$FORKJIT" --dir "$d" --entries 8 --prefix "fast$i" &
		pid=$!
		wait "$pid"
		pids+=("$pid")
	done
	for pid in "${pids[@]}"; do
		wait_for 10 grep -q "exit $pid " "$AGENT_LOG" && [ -f "$d/perf-$pid.map" ] && kept=$((kept + 1))
	done
	check "exit_fast: all 20 maps stay at their paths after their exits ($kept)" test "$kept" = 20
	check "exit_fast: none was taken for an old image's" test "$(status_of "$d" exec_maps_archived)" = 0
	stop_agent || fail "exit_fast: perfmapd exited non-zero"
}

# percentile FILE P: the P-th percentile of the numbers in FILE, one a line.
percentile() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { i = int(NR * p / 100) + 1; if (i > NR) i = NR; print v[i] + 0 }'; }
# allocated FILE: bytes on disk.
allocated() { echo $(( $(stat -c %b "$1") * $(stat -c %B "$1") )); }

# Issue 9 item 1: an unprivileged user's parent map of one page on disk and
# 250 MB apparent size, forked 10 times. Before, each copy wrote 250 MB as
# root in the event loop and other users' children waited seconds for their
# maps. Now each copy writes what the parent wrote, and the agent links a
# well-behaved JIT's children's maps (another uid) within 5 ms of their fork
# at p99 meanwhile.
test_copy_sparse() {
	local d a out evil pids rc p99 agent_p99 bad=0 lost=0 pid big bytes n i goods=()
	out=$(mktemp -d "$WORK/out.XXXXXX")
	chmod 1777 "$out"
	start_scenario copy-sparse copy_sparse || return
	# Its children live until the checks are done (killed then): an exit, and a
	# new process at the pid on a busy host, would rightly move their maps.
	run_as nobody "$JITBIN" --dir "$d" --entries 50 --sparse-mb 250 --children 10 \
		--child-hold-ms 60000 --print-pids --prefix evil >"$out/evil.out" 2>&1 &
	evil=$!
	# Two JITs, 100 children each, one fork at a time: 200 samples, so that
	# p99 is the second worst, and a loop blocked once for each fails it.
	for i in 1 2; do
		"$FORKJIT" --dir "$d" --entries 200 --children 100 --serial --wait-map-ms 10000 \
			--report --latencies --prefix "good$i" >"$out/good$i.out" 2>&1 &
		goods+=($!)
	done
	rc=0
	for pid in "${goods[@]}"; do
		wait "$pid" || rc=1
	done
	check "copy_sparse: 200 children of two well-behaved JITs (root) got complete maps during the attack" \
		test "$rc" = 0 || head -3 "$out"/good*.out
	cat "$out"/good*.out | awk '/^lat_us/ { print $2 }' >"$out/lat"
	p99=$(percentile "$out/lat" 99)
	say "  well-behaved fork-to-map latency: p50 $(percentile "$out/lat" 50) us, p99 $p99 us, max $(percentile "$out/lat" 100) us"
	# The agent's part of it (fork to link, by its own clocks), to tell it from the host's load.
	grep "(forkjit): .* created with" "$AGENT_LOG" | sed -n 's/.*; \([0-9.]*\) ms after the fork.*/\1/p' >"$out/agent_ms"
	say "  the agent's part (fork to link): p50 $(percentile "$out/agent_ms" 50) ms, p99 $(percentile "$out/agent_ms" 99) ms, max $(percentile "$out/agent_ms" 100) ms; load average $(cut -d' ' -f1 /proc/loadavg)"
	# The sparse copies are off the loop: the agent links the others' maps in
	# milliseconds (1 to 2 ms at p99 here), where it took 0.5 to 12.6 s when it
	# wrote 250 MB per copy in the loop. The 5 ms goal itself is weighed against
	# the host's own scheduling by the adversarial suite (tests/security/run.sh
	# sparse); here, under ASan or two busy loops, 50 ms tells the two apart.
	agent_p99=$(percentile "$out/agent_ms" 99)
	check "copy_sparse: the agent's fork-to-link p99 ${agent_p99} ms < 50 ms while uid 65534 forks its sparse map" \
		awk -v v="$agent_p99" -v n="$(wc -l <"$out/agent_ms")" 'BEGIN { exit !(n >= 150 && v < 50) }'
	pids=$(awk '/^child/ { print $2 }' "$out/evil.out")
	n=$(wc -w <<<"$pids")
	check "copy_sparse: the attacker forked 10 children ($n)" test "$n" = 10
	# Each child's copy: the parent's apparent size, a page or two on disk, the child's own.
	for pid in $pids; do
		wait_for 10 test -f "$d/perf-$pid.map" || { bad=$((bad + 1)); say "  perf-$pid.map: none"; continue; }
		big=$(allocated "$d/perf-$pid.map")
		if [ "$big" -gt $((1 << 20)) ] || [ "$(stat -c '%s %u %a' "$d/perf-$pid.map")" != "262144000 65534 600" ]; then
			bad=$((bad + 1))
			say "  perf-$pid.map: $big bytes on disk, $(stat -c '%s bytes, uid %u, mode %a' "$d/perf-$pid.map")"
		fi
		grep -aq "evil_49" "$d/perf-$pid.map" && grep -aq sparse_tail "$d/perf-$pid.map" ||
			lost=$((lost + 1))
	done
	check "copy_sparse: every copy is 250 MB apparent, under 1 MiB on disk, uid 65534, mode 0600" test "$bad" = 0
	check "copy_sparse: the copies hold the parent's entries and its last line past the hole" \
		test "$lost" = 0
	kill $pids 2>/dev/null
	bytes=$(status_of "$d" copy_bytes)
	check "copy_sparse: copy_bytes counts what was written, not holes ($bytes < 16 MiB)" \
		eval '[ -n "$bytes" ] && [ "$bytes" -lt $((16 << 20)) ]'
	wait "$evil"
	stop_agent || fail "copy_sparse: perfmapd exited non-zero"
}

# The per-uid copy budget refuses a uid's copies past it, with one line naming
# the uid, while another uid's copies go on; and copies too large for the
# event loop are made by the workers, byte for byte.
test_copy_budget() {
	local d a out rc over
	out=$(mktemp -d "$WORK/out.XXXXXX")
	chmod 1777 "$out"
	# About 700 KB of entries: one copy fits in the 1 MB burst, the next two do not,
	# however slowly a loaded host forks them: 64 KB a second refill the rest in 6 s.
	start_scenario copy-budget copy_budget --copy-budget 64K --copy-burst 1M || return
	run_as nobody "$JITBIN" --dir "$d" --entries 20000 --children 3 --serial \
		--child-hold-ms 1000 --print-pids --prefix poor >"$out/poor.out" 2>&1
	check "copy_budget: uid 65534's copies past its budget refused, counted" \
		wait_for 10 status_ge "$d" copies_over_budget 2
	over=$(grep -m1 "over its copy budget" "$AGENT_LOG")
	check "copy_budget: one line names the uid and the budget: '$over'" \
		grep -Eq "copy [0-9]+ -> [0-9]+: uid 65534 over its copy budget \(.*65536 a second, 1048576 at most\); not copied" <<<"$over"
	check "copy_budget: another uid's children still get their maps" \
		"$FORKJIT" --dir "$d" --entries 200 --children 20 --serial --wait-map-ms 10000 --prefix rich
	stop_agent || fail "copy_budget: perfmapd exited non-zero"

	# A 6 MB map: over the 1 MiB the loop copies itself, so the workers make each copy.
	start_scenario copy-worker copy_budget || return
	"$FORKJIT" --dir "$d" --entries 200000 --children 8 --wait-map-ms 20000 --prefix large \
		>"$out/large.out" 2>&1
	rc=$?
	check "copy_budget: 8 children of a 6 MB map got complete maps, byte for byte" test "$rc" = 0 ||
		head -3 "$out/large.out"
	check "copy_budget: the workers made them (copies_deferred $(status_of "$d" copies_deferred))" \
		status_ge "$d" copies_deferred 8
	stop_agent || fail "copy_budget: perfmapd exited non-zero"
}

# --dry-run decides and says so, and changes no file.
test_dry_run() {
	local d a out pid child made=0
	start_scenario dry dry_run --dry-run || return
	out=$WORK/dry.out
	"$FORKJIT" --dir "$d" --entries 20 --children 2 --print-pids --prefix dry >"$out" 2>&1
	check "dry_run: the copies were only said" wait_for 10 eval \
		'[ "$(grep -c "dry-run: would copy" "$AGENT_LOG")" = 2 ]'
	for child in $(awk '/^child/ { print $2 }' "$out"); do
		[ -e "$d/perf-$child.map" ] && made=$((made + 1))
	done
	check "dry_run: no child has a map ($made made)" test "$made" = 0
	"$FORKJIT" --dir "$d" --entries 30 --prefix beforesleep --exec sleep 60 &
	pid=$!
	check "dry_run: the exec's move was only said" wait_for 10 grep -q "dry-run: would move .*perf-$pid.map" "$AGENT_LOG"
	check "dry_run: the map stays" test -f "$d/perf-$pid.map"
	kill "$pid"
	wait "$pid" 2>/dev/null
	stop_agent || fail "dry_run: perfmapd exited non-zero"
}

# Lost events: a tiny ring buffer, the agent stopped while 100 children fork.
test_lost_events() {
	local d a fj dropped
	start_scenario lost lost_events --ringbuf-size 4K || return
	kill -STOP "$AGENT_PID"
	"$FORKJIT" --dir "$d" --entries 100 --children 100 --wait-map-ms 20000 --print-pids \
		>"$WORK/lost.out" 2>"$WORK/lost.err" &
	fj=$!
	check "lost_events: 100 children forked while the agent was stopped" \
		wait_for 20 lines_are "$WORK/lost.out" child 100
	kill -CONT "$AGENT_PID"
	check "lost_events: the resync from /proc gave all 100 children their maps" wait "$fj" ||
		head -3 "$WORK/lost.err"
	dropped=$(status_of "$d" events_dropped)
	check "lost_events: events were dropped ($dropped), so the test proves something" ge "$dropped" 1
	check "lost_events: a resync ran" ge "$(status_of "$d" resyncs)" 1
	stop_agent || fail "lost_events: perfmapd exited non-zero"
}

# The index of which pids have a map (agent/in/mapwatch.c): lost inotify events
# must cost only a directory listing, never a child's map.
test_map_index() {
	local d fj q old rc
	d=$(new_map_dir)
	# A queue of 16 events, set only while this agent creates its watch.
	q=/proc/sys/fs/inotify/max_queued_events
	old=$(cat $q)
	echo 16 >$q
	start_agent "$WORK/index.log" --map-dir "$d" --archive-dir "$WORK/archive-index"
	rc=$?
	echo "$old" >$q
	[ $rc = 0 ] || { fail "map_index: perfmapd did not start"; return; }
	check "map_index: exact after start" test "$(status_of "$d" map_index)" = exact
	# While the agent is stopped, the queue fills up, then a JIT writes its
	# map (a change the queue loses) and forks only after the agent is back.
	kill -STOP "$AGENT_PID"
	for q in $(seq 24); do : >"$d/junk.$q"; done
	"$FORKJIT" --dir "$d" --entries 50 --children 20 --fork-delay-ms 2500 \
		--wait-map-ms 10000 --prefix idx1 >"$WORK/index1.out" 2>&1 &
	fj=$!
	check "map_index: the parent wrote its map during the overflow" wait_for 10 test -s "$d/perf-$fj.map"
	kill -CONT "$AGENT_PID"
	check "map_index: a map made while the inotify queue overflowed still reached all 20 children" \
		wait "$fj" || head -3 "$WORK/index1.out"
	check "map_index: an overflow was provoked, so the test proves something" \
		ge "$(status_of "$d" map_index_overflows)" 1
	# Listed again, the index is exact and children are served from it.
	check "map_index: exact again after the listing" wait_for 5 status_is "$d" map_index exact
	check "map_index: the overflow cost one listing ($(status_of "$d" rescans), $(status_of "$d" rescans_deferred) coalesced)" \
		test "$(status_of "$d" rescans)" -ge 1
	check "map_index: 20 more children got their maps" \
		"$FORKJIT" --dir "$d" --entries 50 --children 20 --wait-map-ms 10000 --prefix idx2
	stop_agent || fail "map_index: perfmapd exited non-zero"
}

# kill -9 in the middle of forks; the restart catches up and corrupts nothing.
test_restart() {
	local d a pids=() i rc=0 sl
	start_scenario restart1 restart || return
	sleep 60 &
	sl=$!
	for i in $(seq 8); do
		"$FORKJIT" --dir "$d" --entries 500 --children 10 --wait-map-ms 30000 \
			--fork-delay-ms 200 --prefix "restart${i}" >"$WORK/restart.$i.out" 2>&1 &
		pids+=($!)
		# Each JIT under way (its map written) before the next; the agent dies in the middle.
		wait_for 10 test -s "$d/perf-$!.map"
		if [ $i = 3 ]; then
			kill9_agent
			# While no agent watches: a map at a live pid, written long
			# before that process started (put in place whole, by rename).
			printf '1000 10 stale_entry_from_before\n' >"$WORK/stale.map"
			mv "$WORK/stale.map" "$d/perf-$sl.map"
		fi
	done
	start_agent "$WORK/restart2.log" --map-dir "$d" --archive-dir "$a" ||
		{ fail "restart: perfmapd did not start again"; return; }
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	check "restart: kill -9 during a fork burst; after the restart all 80 children have complete maps" \
		test $rc = 0 || cat "$WORK"/restart.*.out | head -3
	check "restart: a map naming none of the process's memory was archived at start" \
		wait_for 10 eval "[ ! -e '$d/perf-$sl.map' ] && archived '$a' '$sl' stale_entry"
	check "restart: every map reads clean" "$BUILD/perfmapctl" check "$d"/perf-*.map
	kill "$sl" 2>/dev/null
	wait "$sl" 2>/dev/null
	stop_agent || fail "restart: perfmapd exited non-zero"
}

# The capability set docs/security.md (item 9) documents, as /proc/<pid>/status shows it.
CAP_CHOWN=0 CAP_DAC_OVERRIDE=1 CAP_DAC_READ_SEARCH=2 CAP_FOWNER=3 CAP_SETGID=6 CAP_SETUID=7 CAP_SYS_PTRACE=19 CAP_LEASE=28
CAPS_EFF=$(printf '%016x' $(( 1 << CAP_CHOWN | 1 << CAP_DAC_READ_SEARCH | 1 << CAP_FOWNER |
	1 << CAP_SYS_PTRACE | 1 << CAP_LEASE )))
CAPS_PRM=$(printf '%016x' $(( 0x$CAPS_EFF | 1 << CAP_DAC_OVERRIDE | 1 << CAP_SETGID | 1 << CAP_SETUID )))

# task_caps_are STATUS_FILE: every capability line and NoNewPrivs as documented.
task_caps_are() {
	awk -v eff="$CAPS_EFF" -v prm="$CAPS_PRM" '
		$1 == "CapInh:" { ok += $2 == "0000000000000000" }
		$1 == "CapPrm:" { ok += $2 == prm }
		$1 == "CapEff:" { ok += $2 == eff }
		$1 == "CapBnd:" { ok += $2 == prm }
		$1 == "CapAmb:" { ok += $2 == "0000000000000000" }
		$1 == "NoNewPrivs:" { ok += $2 == "1" }
		END { exit ok == 6 ? 0 : 1 }' "$1"
}

# Once BPF is attached the agent keeps only the documented capabilities, in
# every thread, with no_new_privs; copies for another uid's children (one
# made by the agent, one the child's runtime made first) still work.
test_privileges() {
	local d a t bad=0 out child pid_fj before owner
	start_scenario privileges privileges || return
	for t in /proc/"$AGENT_PID"/task/*; do
		task_caps_are "$t/status" || { bad=$((bad + 1)); grep -E '^Cap|^NoNewPrivs' "$t/status"; }
	done
	check "privileges: every thread has CapEff $CAPS_EFF, CapPrm and CapBnd $CAPS_PRM, no inheritable or ambient, NoNewPrivs 1 ($(ls /proc/"$AGENT_PID"/task | wc -l) threads)" \
		test "$bad" = 0
	check "privileges: the log says what is kept" \
		grep -q "privileges: keeping chown, dac_read_search, fowner, sys_ptrace, lease (dac_override permitted" "$AGENT_LOG"

	# The agent makes the copies: O_TMPFILE, given to uid 65534, linked in.
	out=$WORK/privileges.create.out
	run_as nobody "$JITBIN" --dir "$d" --entries 100 --children 3 --wait-map-ms 10000 \
		--print-pids --report >"$out" 2>&1
	check "privileges: three children of uid 65534 got complete copies" grep -q "^complete 3/3" "$out" ||
		cat "$out"
	bad=0
	for child in $(awk '/^child/ { print $2 }' "$out"); do
		owner=$(stat -c '%u %a' "$d/perf-$child.map" 2>/dev/null)
		[ "$owner" = "65534 600" ] || { bad=$((bad + 1)); say "  perf-$child.map: '$owner'"; }
	done
	check "privileges: each copy is owned by uid 65534, mode 0600" test "$bad" = 0

	# The child's runtime writes first (the agent held): the agent appends to a file of uid 65534.
	before=$(status_of "$d" copies_appended)
	out=$WORK/privileges.append.out
	kill -STOP "$AGENT_PID"
	run_as nobody "$JITBIN" --dir "$d" --entries 50 --children 1 --child-writes own \
		--wait-map-ms 10000 --print-pids >"$out" 2>&1 &
	pid_fj=$!
	wait_for 10 grep -q child "$out"
	child=$(awk '/^child/ { print $2 }' "$out")
	check "privileges: the child's runtime (uid 65534) made its own map first" \
		wait_for 10 test -s "$d/perf-$child.map"
	kill -CONT "$AGENT_PID"
	check "privileges: the parent's entries were appended to the child's own map" wait "$pid_fj" ||
		cat "$out"
	check "privileges: copies_appended grew ($before -> $(status_of "$d" copies_appended))" \
		status_ge "$d" copies_appended $((before + 1))
	check "privileges: no copy failed and nothing was refused for want of a capability" \
		eval '[ "$(status_of "$d" copies_failed)" = 0 ] && lacks "$AGENT_LOG" "Permission denied\|Operation not permitted\|cannot raise\|cannot lower"'
	stop_agent || fail "privileges: perfmapd exited non-zero"
}

# Fork copies are exact: entries naming memory the child did not inherit
# (a freed region, MADV_DONTFORK, a shared memfd) are left out.
test_exact_copy() {
	local d a
	start_scenario exact exact_copy || return
	check "exact_copy: each of 3 children's maps holds exactly the 16 entries it inherited, not the 3 it did not" \
		"$FORKJIT" --dir "$d" --entries 16 --children 3 --wait-map-ms 5000 --uninherited
	check "exact_copy: 9 entries left out, counted" wait_for 5 status_is "$d" copy_entries_left_out 9
	check "exact_copy: every child's mappings were read" status_is "$d" copies_unfiltered 0
	check "exact_copy: said for each child" lines_are "$AGENT_LOG" "3 entries name memory the child did not inherit" 3
	stop_agent || fail "exact_copy: perfmapd exited non-zero"
}

# ---- the metrics endpoint ----

# A TCP port free on 127.0.0.1 now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# free_pid: a pid no process holds now, below pid_max.
free_pid() {
	local p max
	max=$(cat /proc/sys/kernel/pid_max)
	for p in $((max - 7)) $((max - 11)) $((max - 13)) $((max - 17)); do
		[ -e "/proc/$p" ] || { echo "$p"; return; }
	done
	echo $((max - 19))
}

# scrape PORT [PATH] > FILE: the body of GET http://127.0.0.1:PORT/PATH; 1 unless a 200 within 5 s.
scrape() {
	python3 - "$1" "${2:-/metrics}" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=5) as r:
        sys.stdout.write(r.read().decode())
except Exception as e:
    sys.stderr.write("scrape: %s\n" % e)
    sys.exit(1)
PY
}

# http_code PORT METHOD PATH: the status code of that request.
http_code() {
	python3 - "$@" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
c.request(sys.argv[2], sys.argv[3])
print(c.getresponse().status)
PY
}

# metric PORT SAMPLE: SAMPLE's value (its name and labels as written), or nothing.
metric() {
	scrape "$1" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}
metric_ge() { ge "$(metric "$1" "$2")" "$3"; }

# rules_name_scraped SCRAPE: every perfmapd_ or process_ metric the alert rules
# name (a histogram's by its _bucket series) is a family of SCRAPE.
rules_name_scraped() {
	local name missing=0 n=0
	for name in $(grep -oE '(perfmapd|process)_[a-z_]+' "$HERE/../../deploy/prometheus/perfmapd.rules.yml" | sort -u); do
		n=$((n + 1))
		grep -qE "^${name}(\{| )" "$1" || { say "    $name: in the rules, not in the scrape"; missing=1; }
	done
	[ "$n" -ge 5 ] && [ "$missing" = 0 ]
}

# Prometheus's own parser (promtool, Debian's prometheus package) accepts FILE.
promtool_ok() {
	if ! promtool check metrics <"$1" >"$1.promtool" 2>&1; then
		sed 's/^/    /' "$1.promtool"
		return 1
	fi
}

# ---- a real Prometheus server scraping the agent ----

PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}   # Debian's prometheus package
PROM_RULES=$(cd "$HERE/../../deploy/prometheus" && pwd)/perfmapd.rules.yml
PROM_PORT=

# prom_api PATH: the JSON body of Prometheus's GET PATH, when it answers 200.
prom_api() {
	python3 - "$PROM_PORT" "$1" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=5) as r:
        sys.stdout.write(r.read().decode())
except Exception as e:
    sys.stderr.write("prometheus: GET %s: %s\n" % (sys.argv[2], e))
    sys.exit(1)
PY
}

# prom_ours: the server on PROM_PORT is ready and is the one prom_start ran, its
# TSDB ours (not another program that took the port between free_port and it).
prom_ours() {
	prom_api /api/v1/status/flags 2>/dev/null |
		python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["data"]["storage.tsdb.path"] != sys.argv[1])' "$PROM_DIR/data" 2>/dev/null
}
prom_ready_or_gone() { prom_ours || gone "$PROM_PID"; }

# prom_start TARGET_PORT: Prometheus on 127.0.0.1 only (PROM_PORT, a free port), its TSDB
# under $WORK, scraping the agent at 127.0.0.1:TARGET_PORT every second as job "perfmapd",
# evaluating the alert rules every second; 0 once it is ready. A port taken between
# free_port and its bind is tried again with another. Neither its admin API nor its
# lifecycle endpoints are enabled.
prom_start() {
	local try
	PROM_DIR=$WORK/prometheus
	mkdir -p "$PROM_DIR"
	cat >"$PROM_DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $PROM_RULES
scrape_configs:
  - job_name: perfmapd
    static_configs:
      - targets: ["127.0.0.1:$1"]
EOF
	for try in 1 2 3; do
		PROM_PORT=$(free_port)
		# setpriv --pdeathsig: a suite killed with SIGKILL, whose trap cannot
		# run, takes its server with it (the setting survives the exec).
		(cd "$PROM_DIR" && exec setpriv --pdeathsig TERM "$PROMETHEUS" \
			--config.file="$PROM_DIR/prometheus.yml" --storage.tsdb.path="$PROM_DIR/data" \
			--web.listen-address="127.0.0.1:$PROM_PORT") >"$PROM_DIR/prometheus.$try.log" 2>&1 &
		PROM_PID=$!
		wait_for 30 prom_ready_or_gone
		alive "$PROM_PID" && prom_ours && return 0
		prom_stop
		grep -q "address already in use" "$PROM_DIR/prometheus.$try.log" || break
	done
	say "    prometheus did not start on 127.0.0.1:$PROM_PORT; its log:"
	sed 's/^/    /' "$PROM_DIR/prometheus.$try.log"
	return 1
}

# prom_stop: the server stopped (SIGTERM; SIGKILL past 10 s) and its TSDB removed;
# 1 when it did not exit 0 of SIGTERM. Nothing to do without one.
prom_stop() {
	local rc=0
	if [ -n "$PROM_PID" ]; then
		kill -TERM "$PROM_PID" 2>/dev/null
		wait_for 10 gone "$PROM_PID" || { kill -9 "$PROM_PID" 2>/dev/null; rc=1; }
		wait "$PROM_PID" 2>/dev/null || rc=1
		PROM_PID=
	fi
	[ -z "$PROM_DIR" ] || rm -rf "$PROM_DIR/data"
	return $rc
}

# prom_target_up AGENT_PORT: Prometheus's one target is the agent there, its last scrape healthy.
prom_target_up() {
	prom_api /api/v1/targets 2>/dev/null | python3 -c '
import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"]
sys.exit(not (len(t) == 1 and t[0]["scrapeUrl"] == "http://127.0.0.1:%s/metrics" % sys.argv[1]
              and t[0]["labels"]["job"] == "perfmapd" and t[0]["health"] == "up" and not t[0]["lastError"]))' "$1" 2>/dev/null
}

# prom_query EXPR: the value Prometheus answers for the instant query EXPR, a single
# sample of job "perfmapd"; nothing when there is none (yet).
prom_query() {
	local q
	q=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1")
	prom_api "/api/v1/query?query=$q" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
if len(r) == 1 and r[0]["metric"].get("job") == "perfmapd":
    print(r[0]["value"][1])' 2>/dev/null
}
prom_query_ge() { awk -v v="$(prom_query "$1")" -v min="$2" 'BEGIN { exit !(v != "" && v + 0 >= min) }'; }

# prom_rules_loaded: Prometheus holds every group and rule of the rules file, each
# from that file, evaluated, its health ok; what differs is said.
prom_rules_loaded() {
	prom_api /api/v1/rules 2>/dev/null | python3 -c '
import json, re, sys
want, group = set(), None
for line in open(sys.argv[1]):
    m = re.match(r"\s*- name:\s*(\S+)", line)
    if m:
        group = m.group(1)
    m = re.match(r"\s*- (?:alert|record):\s*(\S+)", line)
    if m:
        want.add((group, m.group(1)))
got, bad = set(), []
for g in json.load(sys.stdin)["data"]["groups"]:
    for r in g["rules"]:
        got.add((g["name"], r["name"]))
        if g["file"] != sys.argv[1] or r["health"] != "ok":
            bad.append("%s/%s: from %s, health %s %s" % (g["name"], r["name"], g["file"], r["health"], r.get("lastError", "")))
if len(want) < 5 or got != want or bad:
    if sys.argv[2] == "say":
        for x in sorted(want - got): print("    %s/%s: in the file, not loaded" % x)
        for x in sorted(got - want): print("    %s/%s: loaded, not in the file" % x)
        for x in bad: print("    " + x)
    sys.exit(1)' "$PROM_RULES" "${1:-quiet}" 2>/dev/null
}

# prom_rule_state RULE STATE: the alerting rule RULE is in STATE (inactive, pending, firing).
prom_rule_state() {
	prom_api /api/v1/rules 2>/dev/null | python3 -c '
import json, sys
s = [r["state"] for g in json.load(sys.stdin)["data"]["groups"] for r in g["rules"] if r["name"] == sys.argv[1]]
sys.exit(s != [sys.argv[2]])' "$1" "$2" 2>/dev/null
}

# metrics_prometheus AGENT_PORT MAP_DIR: Prometheus scrapes the agent on AGENT_PORT
# for real: its target is up, a counter the agent moves (fork copies in MAP_DIR)
# moves in its queries, and the alert rules load and evaluate there. The server
# is stopped before the scenario goes on to hold the endpoint's connections.
metrics_prometheus() {
	local port=$1 d=$2 p0=
	[ -x "$PROMETHEUS" ] ||
		{ fail "metrics: Prometheus's server $PROMETHEUS is not installed (Debian: prometheus; make deps): nothing scraped the agent for real"; return; }
	check "metrics: Prometheus ($("$PROMETHEUS" --version 2>&1 | head -1)) starts on 127.0.0.1, its TSDB under $WORK" \
		prom_start "$port" || { prom_stop; return; }
	check "metrics: Prometheus (127.0.0.1:$PROM_PORT) scrapes the agent on 127.0.0.1:$port: its target is up" \
		wait_for 30 prom_target_up "$port" ||
		{ prom_api /api/v1/targets | sed 's/^/    /'; prom_stop; return; }
	check "metrics: Prometheus's query answers perfmapd_fork_copies_total{kind=\"created\"} as it scraped it" \
		wait_for 15 eval 'p0=$(prom_query "perfmapd_fork_copies_total{job=\"perfmapd\",kind=\"created\"}") && [ -n "$p0" ]' ||
		{ prom_stop; return; }
	check "metrics: each of 2 more children finds its copy" \
		"$FORKJIT" --dir "$d" --entries 16 --children 2 --wait-map-ms 5000
	check "metrics: ...and Prometheus's query of perfmapd_fork_copies_total{kind=\"created\"} grows by 2 (from $p0)" \
		wait_for 20 prom_query_ge 'perfmapd_fork_copies_total{job="perfmapd",kind="created"}' $((${p0%.*} + 2))
	check "metrics: Prometheus loaded every group and rule of deploy/prometheus/perfmapd.rules.yml, evaluated, health ok" \
		wait_for 20 prom_rules_loaded || prom_rules_loaded say
	check "metrics: ...and there PerfmapdDown is inactive: up{job=\"perfmapd\"} is 1" \
		wait_for 10 prom_rule_state PerfmapdDown inactive
	check "metrics: Prometheus exits 0 of SIGTERM, and its TSDB is removed" \
		eval 'prom_stop && [ ! -e "$PROM_DIR/data" ]'
}

# Metrics on --metrics-listen, off the event loop: the text parses with
# Prometheus's own parser, the counters move with the forks the test makes,
# a real Prometheus server scrapes them and loads the alert rules,
# a connection that trickles its request is closed 3 s after its accept
# (the request deadline), and a client that never reads beside 200 idle
# connections neither stops a JIT's fork copies nor keeps the endpoint from
# answering past that deadline. PERFMAPD_TEST_METRICS_PORT picks the port.
test_metrics() {
	local d a port m=$WORK/metrics c0 h0 f0 holder conf pid v0 other life
	command -v promtool >/dev/null ||
		{ fail "metrics: promtool is not installed (Debian: prometheus; make deps)"; return; }
	check "metrics: a --metrics-listen that is not a numeric HOST:PORT is refused at the command line" \
		eval "! '$BUILD/perfmapd' --metrics-listen localhost:9848 --help >/dev/null 2>&1 && ! '$BUILD/perfmapd' --metrics-listen 127.0.0.1:0 --help >/dev/null 2>&1"
	port=${PERFMAPD_TEST_METRICS_PORT:-$(free_port)}
	conf=$WORK/metrics.conf
	printf 'retention = 3s\n' >"$conf"
	chmod 600 "$conf"
	start_scenario metrics metrics --metrics-listen "127.0.0.1:$port" --config "$conf" || return
	check "metrics: the agent says where it serves" grep -q "metrics: http://127.0.0.1:$port/metrics" "$AGENT_LOG"
	check "metrics: GET /metrics answers" eval "scrape $port >'$m.1'"
	check "metrics: promtool check metrics accepts the scrape" promtool_ok "$m.1"
	check "metrics: the BPF program kind and the version in perfmapd_build_info" \
		grep -Eq '^perfmapd_build_info\{version="[0-9.]+",bpf="(tp_btf|raw_tp)",exec_maps="[a-z0-9-]+"\} 1$' "$m.1"
	check "metrics: no pid in any label" lacks "$m.1" 'pid="'
	check "metrics: another path is 404" test "$(http_code "$port" GET /other)" = 404
	check "metrics: POST is 405" test "$(http_code "$port" POST /metrics)" = 405

	c0=$(metric "$port" 'perfmapd_fork_copies_total{kind="created"}')
	h0=$(metric "$port" perfmapd_fork_copy_seconds_count)
	f0=$(metric "$port" 'perfmapd_events_total{kind="fork"}')
	check "metrics: each of 3 children finds its copy" \
		"$FORKJIT" --dir "$d" --entries 16 --children 3 --wait-map-ms 5000
	check "metrics: perfmapd_fork_copies_total{kind=\"created\"} grew by 3 (from $c0)" \
		wait_for 5 metric_ge "$port" 'perfmapd_fork_copies_total{kind="created"}' $((c0 + 3))
	check "metrics: perfmapd_fork_copy_seconds_count grew by 3 (from $h0)" \
		wait_for 5 metric_ge "$port" perfmapd_fork_copy_seconds_count $((h0 + 3))
	check "metrics: perfmapd_events_total{kind=\"fork\"} grew by 4 at least (from $f0)" \
		wait_for 5 metric_ge "$port" 'perfmapd_events_total{kind="fork"}' $((f0 + 4))
	check "metrics: perfmapd_fork_copy_bytes_total counts them" \
		wait_for 5 metric_ge "$port" perfmapd_fork_copy_bytes_total 1
	# An exec: the old image's map archived, a decision by kind.
	v0=$(metric "$port" 'perfmapd_decisions_total{kind="exec_archived"}')
	"$FORKJIT" --dir "$d" --entries 10 --prefix mold --exec \
		"$FORKJIT" --dir "$d" --entries 3 --prefix mnew --stop-first --hold-ms 100 &
	pid=$!
	check "metrics: an exec moves perfmapd_decisions_total{kind=\"exec_archived\"} (from $v0)" \
		wait_for 10 metric_ge "$port" 'perfmapd_decisions_total{kind="exec_archived"}' $((v0 + 1))
	kill -CONT "$pid" 2>/dev/null
	wait "$pid"
	# Its exit: retained for the config file's 3 s, then archived.
	v0=$(metric "$port" perfmapd_archived_maps_total)
	check "metrics: perfmapd_retention_seconds is the config file's 3" \
		test "$(metric "$port" perfmapd_retention_seconds)" = 3
	check "metrics: the exited JIT's map is counted in perfmapd_retained_maps" \
		wait_for 5 metric_ge "$port" perfmapd_retained_maps 1
	check "metrics: ...then perfmapd_archived_maps_total grows (from $v0)" \
		wait_for 15 metric_ge "$port" perfmapd_archived_maps_total $((v0 + 1))
	check "metrics: perfmapd_archive_bytes counts it" wait_for 5 metric_ge "$port" perfmapd_archive_bytes 1
	# A trap at a pid no process holds: left alone, counted.
	v0=$(metric "$port" 'perfmapd_host_maps_refused_total{reason="trap"}')
	ln -s /etc/hostname "$d/perf-$(free_pid).map"
	check "metrics: a symlinked map moves perfmapd_host_maps_refused_total{reason=\"trap\"} (from $v0)" \
		wait_for 10 metric_ge "$port" 'perfmapd_host_maps_refused_total{reason="trap"}' $((v0 + 1))
	# JIT code with no map where profilers look: a process with lost symbols.
	other=$WORK/metrics-elsewhere
	mkdir -p "$other"
	"$FORKJIT" --dir "$other" --entries 8 --hold-ms 8000 &
	pid=$!
	check "metrics: a JIT whose map is elsewhere shows in perfmapd_lost_symbol_processes" \
		wait_for 10 metric_ge "$port" perfmapd_lost_symbol_processes 1
	check "metrics: ...and in perfmapd_lost_symbols_total" \
		metric_ge "$port" perfmapd_lost_symbols_total 1
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	# SIGHUP: the new retention shows.
	printf 'retention = 7s\n' >"$conf"
	kill -HUP "$AGENT_PID"
	check "metrics: after SIGHUP perfmapd_retention_seconds is the file's new 7" \
		wait_for 10 eval 'test "$(metric "$port" perfmapd_retention_seconds)" = 7'
	check "metrics: the process_* metrics name the agent (its open fds, its memory)" \
		eval 'metric_ge "$port" process_open_fds 3 && metric_ge "$port" process_resident_memory_bytes 1000000'
	scrape "$port" >"$m.2"
	check "metrics: promtool check metrics accepts the scrape after all that" promtool_ok "$m.2"
	check "metrics: promtool check rules accepts deploy/prometheus/perfmapd.rules.yml" \
		eval 'promtool check rules "$HERE/../../deploy/prometheus/perfmapd.rules.yml" >"$m.rules" 2>&1 || { sed "s/^/    /" "$m.rules"; false; }'
	check "metrics: every metric the rules name is in the scrape" rules_name_scraped "$m.2"
	metrics_prometheus "$port" "$d"

	# One request a connection; a request trickled a header line every 0.5 s,
	# which an idle timeout never ends, is closed at the request deadline.
	v0=$(metric "$port" 'perfmapd_http_connections_expired_total{phase="request"}')
	life=$(python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
if not data.startswith(b"HTTP/1.1 200") or b"\r\nConnection: close\r\n" not in data:
    sys.exit("an answer without Connection: close, or not whole")
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
t0 = time.monotonic()
s.sendall(b"GET /metrics HTTP/1.1\r\n")
s.settimeout(0.5)
n = 0
while time.monotonic() - t0 < 10:
    try:
        if not s.recv(65536):
            break
    except socket.timeout:
        n += 1
        s.sendall(b"X-Slow-%d: y\r\n" % n)
    except OSError:
        break
print("%.2f" % (time.monotonic() - t0))
PY
)
	check "metrics: a whole answer says Connection: close; a trickled request is closed ${life:-?} s after its accept (3 s)" \
		awk -v l="${life:-99}" 'BEGIN { exit !(l >= 2.5 && l < 4.5) }'
	check "metrics: ...counted in perfmapd_http_connections_expired_total{phase=\"request\"} (from $v0)" \
		wait_for 5 metric_ge "$port" 'perfmapd_http_connections_expired_total{phase="request"}' $((v0 + 1))

	# One client that asks and never reads, 200 that connect and say nothing.
	python3 - "$port" "$WORK/metrics-holder.ready" <<'PY' &
import socket, sys, time
port, ready = int(sys.argv[1]), sys.argv[2]
socks = []
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
s.connect(("127.0.0.1", port))
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
socks.append(s)
for _ in range(200):
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    socks.append(c)
open(ready, "w").close()
time.sleep(60)
PY
	holder=$!
	wait_for 10 test -e "$WORK/metrics-holder.ready"
	check "metrics: with 201 connections held, each of 20 children still finds its copy" \
		"$FORKJIT" --dir "$d" --entries 16 --children 20 --wait-map-ms 5000
	check "metrics: ...and the status socket answers" status_ge "$d" copies_created 23
	# They are root's: they fill root's 4 slots, the rest are refused, and the 4 last until the deadline.
	check "metrics: while they are held, the endpoint answers again past the request deadline" \
		wait_for 10 eval "scrape $port >'$m.3' 2>/dev/null"
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	check "metrics: the endpoint answers again once they are gone" wait_for 15 eval "scrape $port >'$m.3'"
	check "metrics: perfmapd_fork_copies_total{kind=\"created\"} counted the 20" \
		metric_ge "$port" 'perfmapd_fork_copies_total{kind="created"}' $((c0 + 23))
	stop_agent || fail "metrics: perfmapd exited non-zero"
}

jit_line() { "$BUILD/perfmapctl" status --all --map-dir "$1" --run-dir "$RUN_DIR" | grep "^jit_$2: "; }
jit_lost() { jit_line "$1" "$2" | grep -q " lost=$3\$"; }

# Processes running JIT code with no map: counted and said once each, from
# the kernel's mmap reports. Real runtimes with and without their perf flag.
test_lost_symbols() {
	local d=/tmp other=$WORK/lost-elsewhere lost named py py_plain= node_on= node_off= n rc
	mkdir -p "$other"
	start_agent "$WORK/lost.log" --map-dir /tmp --archive-dir "$WORK/archive-lost" || {
		fail "lost_symbols: perfmapd did not start on /tmp"; return; }
	check "lost_symbols: executable mappings come from perf's mmap reports" \
		status_is "$d" exec_mappings_source perf-mmap2
	check "lost_symbols: the probe of other sources is reported" \
		grep -q "^perfmapd: exec maps: from perf-mmap2, /proc/<pid>/maps for the gaps (this kernel: bpf-lsm=[A-Za-z]* fentry=[A-Za-z]* kprobe=[a-z]* perf-mmap2=ok)" "$AGENT_LOG"
	# A JIT writing its map where no profiler looks, and one writing it in /tmp.
	"$FORKJIT" --dir "$other" --entries 8 --hold-ms 8000 & lost=$!
	"$FORKJIT" --dir /tmp --entries 8 --hold-ms 8000 & named=$!
	TMP_MAPS+=("$named")
	py=$(find_python 12)
	if [ -n "$py" ]; then
		"$py" -c 'import time; time.sleep(8)' & py_plain=$!
	fi
	if command -v node >/dev/null; then
		# From $WORK: V8 may leave a log file in its working directory.
		(cd "$WORK" && exec node -e 'const e = Date.now() + 8000; let s = 0; while (Date.now() < e) s += Math.sqrt(s % 7)') & node_off=$!
		(cd "$WORK" && exec node --perf-basic-prof -e 'const e = Date.now() + 8000; let s = 0; while (Date.now() < e) s += Math.sqrt(s % 7)') & node_on=$!
		TMP_MAPS+=("$node_on" "$node_off")
	fi
	check "lost_symbols: a JIT whose map is not in /tmp is said to lose its symbols" \
		wait_for 10 grep -q "lost symbols: $lost (forkjit) runs 4 KiB of JIT code in 1 executable regions and has no /tmp/perf-$lost.map" "$AGENT_LOG"
	check "lost_symbols: status lists it lost" jit_lost "$d" "$lost" yes
	"$BUILD/perfmapctl" doctor --json --run-dir "$RUN_DIR" "$lost" >"$WORK/lost-doctor.json"
	rc=$?
	check "lost_symbols: perfmapctl doctor, with the agent, exits 1 and says no_map, the agent's lost=yes and its source" \
		eval '[ $rc = 1 ] && python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
a = d[\"agent\"]
assert a[\"running\"] and a[\"exec_mappings_source\"] == \"perf-mmap2\" and a[\"jit\"][\"lost\"] is True, a
assert \"no_map\" in [f[\"code\"] for f in d[\"findings\"]], d[\"findings\"]
" "$WORK/lost-doctor.json"'
	check "lost_symbols: the JIT with its map in /tmp is not lost" jit_lost "$d" "$named" no
	if [ -n "$py" ]; then
		check "lost_symbols: $("$py" -V 2>&1) without -X perf runs no JIT code: not listed" \
			eval '! jit_line "$d" "$py_plain"'
	else
		skip "lost_symbols: no CPython 3.12+ here"
	fi
	if [ -n "$node_off" ]; then
		check "lost_symbols: node without --perf-basic-prof is said to lose its symbols" \
			wait_for 10 grep -q "lost symbols: $node_off (node)" "$AGENT_LOG"
		check "lost_symbols: node with --perf-basic-prof is not lost" \
			wait_for 10 jit_lost "$d" "$node_on" no
	else
		skip "lost_symbols: node is not installed"
	fi
	n=$(status_of "$d" lost_symbol_processes)
	check "lost_symbols: status counts them ($n now)" ge "$n" 1
	wait "$lost" "$named" ${py_plain:+"$py_plain"} ${node_on:+"$node_on" "$node_off"} 2>/dev/null
	check "lost_symbols: said once per process" lines_are "$AGENT_LOG" "lost symbols: $lost " 1
	stop_agent || fail "lost_symbols: perfmapd exited non-zero"
}

# jit_share DATA: of the samples in DATA whose leaf is JIT code (perf's dso for
# anonymous code is /tmp/perf-<pid>.map), the percent perf resolves to jit_fn_*
# names; -1 when there are fewer than 50 of them to judge by.
jit_share() {
	perf script -i "$1" -F ip,sym,dso 2>/dev/null |
		awk '/\(\/tmp\/perf-[0-9]+\.map\)$/ { n++; if ($2 ~ /^jit_fn_/) j++ }
		     END { if (n < 50) print -1; else printf "%d\n", 100 * j / n }'
}

# late_run DATA PIDFILE: forkjit in /tmp under perf record (following its
# child, which runs the JIT code), its pid in PIDFILE.
late_run() {
	perf record -q -e cpu-clock:u -o "$1" -- sh -c 'echo $$ >"$1"; exec "$2" --entries 64 --children 1 --run-ms 2000' \
		late "$2" "$FORKJIT" >/dev/null 2>&1
}

# gone_to_archive ARCHIVE PID: PID's map left /tmp for the archive, jit_fn_ names and all.
gone_to_archive() { [ ! -e "/tmp/perf-$2.map" ] && archived "$1" "$2" jit_fn_; }

# The inside of late_report, in a mount namespace whose /tmp is a tmpfs of its own.
late_report_inside() {
	local a r=$WORK/run-late data1=$WORK/late1.data data2=$WORK/late2.data pid1 pid2 pct n
	local RUN_DIR=$r  # status_of asks this agent
	a=$(mktemp -d /var/tmp/restore-XXXXXX) && OUT_DIRS+=("$a") && mkdir -p "$r" ||
		{ fail "late_report: no scratch directories"; return; }
	check "late_report: /tmp is this scenario's own tmpfs" eval '[ "$(stat -f -c %T /tmp)" = tmpfs ] && [ -z "$(ls -A /tmp)" ]' || return
	start_agent "$WORK/late_report.log" --map-dir /tmp --retention 1s --no-mirrors --run-dir "$r" \
		--archive-dir "$a" || { fail "late_report: perfmapd did not start on /tmp"; return; }

	# Run 1: the JIT exits; its map stays for the retention, then goes to the archive.
	late_run "$data1" "$WORK/late1.pid"
	pid1=$(cat "$WORK/late1.pid")
	check "late_report: the JIT's map went to the archive after the retention" \
		wait_for 30 gone_to_archive "$a" "$pid1" || return
	stop_agent || fail "late_report: perfmapd exited non-zero after SIGTERM"
	pct=$(jit_share "$data1")
	say "  before restore: ${pct}% of the JIT samples resolve"
	check "late_report: before restore the late report does not resolve the JIT samples (${pct}%, at least 50 of them)" \
		eval "[ $pct -ge 0 ] && [ $pct -lt 10 ]"
	"$BUILD/perfmapctl" restore --archive-dir "$a" --perf-data "$data1" >"$WORK/late1.restore" 2>&1
	check "late_report: perfmapctl restore --perf-data exits 0" test $? = 0
	sed 's/^/    /' "$WORK/late1.restore"
	check "late_report: it restored the JIT's map" grep -q "^restore $pid1: wrote /tmp/perf-$pid1.map" "$WORK/late1.restore"
	pct=$(jit_share "$data1")
	say "  after restore: ${pct}% of the JIT samples resolve"
	check "late_report: after restore ${pct}% of the JIT samples resolve to jit_fn_* names (want 90)" \
		test "$pct" -ge 90

	# The agent, back, deletes the restored maps after their retention: the archive holds them.
	n=$(ls "$a" | grep -c '^perf-')
	start_agent "$WORK/late_report2.log" --map-dir /tmp --retention 1s --no-mirrors --run-dir "$r" \
		--archive-dir "$a" || { fail "late_report: perfmapd did not start again"; return; }
	check "late_report: the restored maps (the JIT's and its child's) are deleted after their retention, not archived again" \
		wait_for 30 status_ge /tmp restored_dropped 2
	check "late_report: they left /tmp" wait_for 10 eval '! ls /tmp | grep -q "^perf-"'
	check "late_report: the archive holds what it held ($n maps)" eval "[ \"\$(ls '$a' | grep -c '^perf-')\" = $n ]"

	# Run 2: by pid.
	late_run "$data2" "$WORK/late2.pid"
	pid2=$(cat "$WORK/late2.pid")
	check "late_report: run 2: the map went to the archive" wait_for 30 gone_to_archive "$a" "$pid2" || return
	stop_agent || fail "late_report: perfmapd exited non-zero after SIGTERM"
	pct=$(jit_share "$data2")
	check "late_report: run 2: before restore ${pct}% resolve" eval "[ $pct -ge 0 ] && [ $pct -lt 10 ]"
	check "late_report: run 2: perfmapctl restore $pid2 exits 0" \
		"$BUILD/perfmapctl" restore --archive-dir "$a" "$pid2"
	pct=$(jit_share "$data2")
	check "late_report: run 2: after restore by pid ${pct}% resolve (want 90)" test "$pct" -ge 90
	check "late_report: run 2: a second restore refuses, the map being there" \
		eval "! '$BUILD/perfmapctl' restore --archive-dir '$a' '$pid2' 2>/dev/null"
}

# A late perf report: the JIT has exited and the agent archived its map
# before the report is made; `perfmapctl restore` puts the map back, and the
# report resolves the JIT's samples after it and not before. perf reads maps
# only at /tmp, so the scenario runs this script again in a mount namespace of
# its own with a tmpfs at /tmp, and records the checks it made there.
test_late_report() {
	local line
	command -v perf >/dev/null || { fail "late_report: perf is not installed (Debian: linux-perf)"; return; }
	if [ -n "${PERFMAPD_LATE_REPORT_INSIDE:-}" ]; then
		late_report_inside
		return
	fi
	command -v unshare >/dev/null || { fail "late_report: unshare is not installed (util-linux)"; return; }
	PERFMAPD_LATE_REPORT_INSIDE=1 unshare -m --propagation private \
		bash -c 'mount -t tmpfs -o mode=1777 tmpfs /tmp && exec bash "$@"' late \
		"$HERE/run.sh" "$BUILD" late_report >"$WORK/late_report.out" 2>&1
	echo "rc $?" >>"$WORK/late_report.out"
	while IFS= read -r line; do
		case $line in
		"ok: "*) pass "${line#ok: }" ;;
		"FAIL: "*) fail "${line#FAIL: }" ;;
		"SKIPPED: late_report: "*) skip "${line#SKIPPED: late_report: }" ;;
		"rc 0") ;;
		"rc "*) fail "late_report: the run in its namespace exited ${line#rc }" ;;
		*) say "  | $line" ;;
		esac
	done <"$WORK/late_report.out"
}

# perfmapctl restore and doctor ask the running agent for its archive: an
# agent started with --archive-dir needs it said only once. A JIT's map goes
# to that archive after a short retention; restore by pid and by a
# perf.data's records, and doctor of the pid gone, find it with no
# --archive-dir (before, restore looked in the default archive and said
# "the archive has no map of this pid").
test_restore_agent_archive() {
	local d a r=$WORK/ra pid out rc data=$WORK/restore-agent.data  # r: short, the socket name holds d
	local RUN_DIR=$r  # status_of asks this agent
	local label=restore_agent_archive ctl=("$BUILD/perfmapctl")
	start_scenario restore_agent "$label" --retention 1s --run-dir "$r" || return
	"$FORKJIT" --dir "$d" --entries 20 --prefix restorable &
	pid=$!
	wait "$pid"
	check "$label: the JIT's map went to the agent's archive ($a) after the retention" \
		wait_for 20 eval "[ ! -e '$d/perf-$pid.map' ] && archived '$a' '$pid' restorable_" ||
		{ stop_agent; return; }

	out=$("${ctl[@]}" restore --map-dir "$d" --run-dir "$r" "$pid" 2>&1)
	rc=$?
	check "$label: restore PID without --archive-dir exits 0: '$out'" test "$rc" = 0
	check "$label: it wrote the archived map back, all 20 entries" \
		eval "grep -q '^restore $pid: wrote $d/perf-$pid.map from perf-$pid-' <<<\"\$out\" && map_has '$d/perf-$pid.map' restorable 20"
	if grep -q "not marked as restored" <<<"$out"; then  # a file system without user. xattrs
		check "$label: the agent archives the restored map again after its retention" \
			wait_for 20 test ! -e "$d/perf-$pid.map"
	else
		check "$label: the agent deletes the restored map after its retention, not archiving it again" \
			wait_for 20 eval "[ ! -e '$d/perf-$pid.map' ] && status_ge '$d' restored_dropped 1"
	fi

	python3 "$HERE/../cli/mkperfdata.py" "$data" --comm "$pid" forkjit \
		--mmap2 "$pid" 0x7f5000000000 0x1000 7 //anon
	out=$("${ctl[@]}" restore --map-dir "$d" --run-dir "$r" --perf-data "$data" 2>&1)
	rc=$?
	check "$label: restore --perf-data without --archive-dir exits 0: '$out'" test "$rc" = 0
	check "$label: it restored the recorded pid's map from the agent's archive" \
		eval "grep -q '^restore $pid: wrote $d/perf-$pid.map' <<<\"\$out\" && map_has '$d/perf-$pid.map' restorable 20"
	wait_for 20 test ! -e "$d/perf-$pid.map"
	python3 "$HERE/../cli/mkperfdata.py" "$data" --comm 2000000011 jit \
		--mmap2 2000000011 0x7f5000000000 0x1000 7 //anon
	out=$("${ctl[@]}" restore --map-dir "$d" --run-dir "$r" --perf-data "$data" 2>&1)
	check "$label: a recorded pid the archive lacks: the agent's archive named, and whose: '$out'" \
		grep -qF "but the archive $a (perfmapd's, for $d) has no map of this pid" <<<"$out"

	out=$("${ctl[@]}" doctor --map-dir "$d" --run-dir "$r" "$pid" 2>&1)
	rc=$?
	check "$label: doctor of the pid gone exits 2 and finds its map in the agent's archive: '$out'" \
		eval "[ $rc = 2 ] && grep -qF \"the archive $a (perfmapd's, for $d) holds \" <<<\"\$out\" && grep -qF \"of pid $pid, the newest perf-$pid-\" <<<\"\$out\""
	stop_agent || fail "$label: perfmapd exited non-zero"
}

# ---- running them ----

scenario_done() {
	prom_stop   # first: cleanup_agent waits for every child
	cleanup_agent
	sanitizer_check
}

pick_scenarios "$0" "$@"
# The unprivileged scenarios run the JIT as nobody: from a place nobody can read.
JITBIN=$WORK/bin/forkjit
mkdir -p "$WORK/bin" && cp "$FORKJIT" "$JITBIN" && chmod 755 "$WORK/bin" "$JITBIN" && chmod 711 "$WORK"
# Inside late_report's namespace the suite's preflight has run already, outside.
[ -n "${PERFMAPD_LATE_REPORT_INSIDE:-}" ] || preflight
run_scenarios "agent tests"
