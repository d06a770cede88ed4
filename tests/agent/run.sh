#!/usr/bin/env bash
# Integration tests of perfmapd: the real agent, real BPF, real perf, real runtimes.
#
#   tests/agent/run.sh BUILD_DIR [TEST...]
#
# Needs root and a kernel that loads BPF tracepoint programs. Where that is
# missing the tests FAIL, unless PERFMAPD_SKIP_BPF=1, which skips them loudly.
set -u
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [TEST...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-test.XXXXXX)
. "$HERE/lib.sh"

FORKJIT=$BUILD/tests/forkjit
PIDAT=$BUILD/tests/pidat
trap 'cleanup_agent; [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT

skip_or_fail() {
	if [ "${PERFMAPD_SKIP_BPF:-}" = 1 ]; then
		say "################################################################"
		say "SKIPPED: perfmapd integration tests: $1 (PERFMAPD_SKIP_BPF=1)"
		say "################################################################"
		exit 0
	fi
	say "FAIL: perfmapd integration tests cannot run: $1"
	say "      (run as root on a kernel with BPF, or set PERFMAPD_SKIP_BPF=1 to skip)"
	exit 1
}

preflight() {
	[ "$(id -u)" = 0 ] || skip_or_fail "not root"
	[ -r /sys/kernel/btf/vmlinux ] || skip_or_fail "the kernel has no BTF"
	local d
	d=$(new_map_dir)
	start_agent "$WORK/preflight.log" --map-dir "$d" --archive-dir "$WORK/preflight-archive" ||
		skip_or_fail "perfmapd could not load its BPF program: $(grep -m1 'bpf' "$WORK/preflight.log")"
	stop_agent || fail "preflight: perfmapd exited non-zero after SIGTERM"
}

# Share of perf samples of PID, recorded for SECONDS after the fork, that
# resolve to the JIT's names (jit_fn_*), in percent.
perf_resolved_pct() {
	local pid=$1 secs=$2 data=$WORK/perf.$1.data
	perf record -q -e cpu-clock:u -p "$pid" -o "$data" -- sleep "$secs" >/dev/null 2>&1
	perf script -i "$data" -F ip,sym 2>/dev/null |
		awk '{ n++ } $2 ~ /^jit_fn_/ { j++ } END { if (n < 50) print -1; else printf "%d\n", 100 * j / n }'
}

# The test JIT forks; perf attaches to the child only after the fork.
test_fork_perf() {
	local out pid pct
	if ! command -v perf >/dev/null; then
		fail "fork_perf: perf is not installed (Debian: linux-perf)"
		return
	fi
	# Without the agent, first: the child's samples stay hex (this is the bug).
	out=$WORK/fj-noagent.out
	"$FORKJIT" --entries 64 --children 1 --run-ms 4000 --print-pids >"$out" &
	wait_for 5 grep -q child "$out"
	pid=$(awk '/child/ { print $2; exit }' "$out")
	pct=$(perf_resolved_pct "$pid" 2)
	wait
	rm -f /tmp/perf-$!.map
	say "  without perfmapd: ${pct}% of the child's samples resolve"
	[ "$pct" -lt 95 ] || fail "fork_perf: ${pct}% resolved even without perfmapd: the test cannot tell"

	start_agent "$WORK/fork_perf.log" --map-dir /tmp --archive-dir "$WORK/archive-perf" ||
		{ fail "fork_perf: perfmapd did not start on /tmp"; return; }
	out=$WORK/fj.out
	"$FORKJIT" --entries 64 --children 1 --run-ms 4000 --wait-map-ms 3000 --print-pids >"$out" &
	wait_for 5 grep -q child "$out"
	pid=$(awk '/child/ { print $2; exit }' "$out")
	pct=$(perf_resolved_pct "$pid" 2)
	wait $! || fail "fork_perf: the child did not find its map"
	rm -f /tmp/perf-$!.map
	if [ "$pct" -ge 95 ]; then
		pass "fork_perf: ${pct}% of the child's samples resolve to JIT names with perf record -p after the fork"
	else
		fail "fork_perf: only ${pct}% of the child's samples resolve (want >= 95%)"
	fi
	stop_agent || fail "fork_perf: perfmapd exited non-zero after SIGTERM"
	grep -q "stopping" "$AGENT_LOG" || fail "fork_perf: no 'stopping' line at SIGTERM"
	rm -f "/tmp/perf-$pid.map"
}

# 10 JIT parents x 60 children at once: every child checks its own map byte for byte.
test_fork_storm() {
	local d pids=() rc=0 i created
	d=$(new_map_dir)
	start_agent "$WORK/storm.log" --map-dir "$d" --archive-dir "$WORK/archive-storm" || {
		fail "fork_storm: perfmapd did not start"; return; }
	SECONDS=0
	for i in $(seq 10); do
		"$FORKJIT" --dir "$d" --entries $((200 * i)) --children 60 --wait-map-ms 15000 \
			--prefix "storm${i}" >"$WORK/storm.$i.out" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	created=$(status_of "$d" copies_created)
	if [ $rc = 0 ] && [ "$created" -ge 600 ]; then
		pass "fork_storm: 600 children, each with a complete map ($SECONDS s, $created copies)"
	else
		fail "fork_storm: some children lack a complete map (copies: $created)"
		cat "$WORK"/storm.*.out | head -5
	fi
	stop_agent || fail "fork_storm: perfmapd exited non-zero"
}

# The child's runtime made its own map first (own entries), or copied the parent's itself.
test_runtime_races() {
	local d mode pid_fj key before after
	d=$(new_map_dir)
	start_agent "$WORK/races.log" --map-dir "$d" --archive-dir "$WORK/archive-races" || {
		fail "runtime_races: perfmapd did not start"; return; }
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
		wait_for 10 test -s "$d/perf-$(awk '/child/ { print $2 }' "$WORK/races.$mode.out").map"
		kill -CONT "$AGENT_PID"
		if wait $pid_fj; then
			after=$(status_of "$d" $key)
			if [ "$after" -gt "$before" ]; then
				pass "runtime_races: child wrote '$mode' first: its map holds the parent's entries exactly once"
			else
				fail "runtime_races ($mode): $key did not grow ($before -> $after)"
			fi
		else
			fail "runtime_races ($mode): the child's map is not what it should be"
			cat "$WORK/races.$mode.out"
		fi
	done
	stop_agent || fail "runtime_races: perfmapd exited non-zero"
}

# Traps in the map directory: a symlink and a FIFO where the child's map goes.
test_traps() {
	local d victim trap_kind base pid rc
	d=$(new_map_dir)
	victim=$WORK/victim
	echo "precious" >"$victim"
	start_agent "$WORK/traps.log" --map-dir "$d" --archive-dir "$WORK/archive-traps" || {
		fail "traps: perfmapd did not start"; return; }
	for trap_kind in symlink fifo; do
		# pidat runs forkjit as pid base; its first child is very likely base + 1.
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
		if ! grep -q "child $pid\$" "$WORK/traps.out"; then
			say "  traps: the child got another pid than $pid; not counted"
			continue
		fi
		[ $rc = 1 ] || fail "traps ($trap_kind): the child should have found no map (rc $rc)"
		[ "$(cat "$victim")" = precious ] || fail "traps: the symlink's target was written"
		if grep -q "copy $base -> $pid: .*perf-$pid.map .*refused" "$AGENT_LOG" &&
		   [ -n "$(status_of "$d" pid)" ]; then
			pass "traps: a $trap_kind at the child's map path is refused, nothing written, agent responsive"
		else
			fail "traps ($trap_kind): no refusal logged"
			tail -5 "$AGENT_LOG"
		fi
		rm -f "$d/perf-$pid.map"
	done
	stop_agent || fail "traps: perfmapd exited non-zero"
}

# CPython with -X perf and os.fork, where a 3.12+ exists.
find_python() {
	local v
	for v in python3.14 python3.13 python3.12; do
		command -v "$v" >/dev/null && "$v" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null &&
			{ command -v "$v"; return; }
	done
	if command -v pyenv >/dev/null; then
		for v in "$(pyenv root)"/versions/3.1[2-9]*/bin/python3; do
			[ -x "$v" ] && { echo "$v"; return; }
		done
	fi
}

test_cpython() {
	local py out
	py=$(find_python)
	if [ -z "$py" ]; then
		say "  cpython: no CPython 3.12+ on this machine; test not run"
		return
	fi
	start_agent "$WORK/cpython.log" --map-dir /tmp --archive-dir "$WORK/archive-py" || {
		fail "cpython: perfmapd did not start"; return; }
	out=$WORK/cpython.out
	if "$py" -X perf "$HERE/fork_child.py" >"$out" 2>&1; then
		pass "cpython: $("$py" -V) -X perf child holds all $(grep -o 'parent_lines [0-9]*' "$out" | cut -d' ' -f2) of its parent's entries"
	else
		fail "cpython: $(cat "$out")"
	fi
	stop_agent || fail "cpython: perfmapd exited non-zero"
}

# Exit: the map stays for --retention, then is compacted into the archive under the quota.
test_exit_archive() {
	local d a pid i pids=() n
	d=$(new_map_dir)
	a=$WORK/archive-exit
	start_agent "$WORK/exit.log" --map-dir "$d" --archive-dir "$a" --retention 2s \
		--archive-max-bytes 4K || { fail "exit_archive: perfmapd did not start"; return; }
	for i in 1 2 3 4 5 6; do
		"$FORKJIT" --dir "$d" --entries 40 --prefix "exit${i}" --print-pids >/dev/null &
		pids+=($!)
		wait $!
	done
	pid=${pids[5]}
	[ -f "$d/perf-$pid.map" ] || fail "exit_archive: the map was gone right after the exit"
	if wait_for 10 test ! -e "$d/perf-$pid.map"; then
		wait_for 5 test -n "$(ls "$a" | grep "^perf-$pid-")"
		n=$(ls "$a" | grep -c '^perf-')
		if [ -n "$(ls "$a" | grep "^perf-$pid-")" ] &&
		   [ "$(cat "$a"/perf-* | wc -c)" -le 4096 ] && [ "$n" -lt 6 ] &&
		   [ "$(status_of "$d" archive_evicted)" -ge 1 ] &&
		   [ "$(grep -c "exit6_" "$a/$(ls "$a" | grep "^perf-$pid-")")" = 40 ] &&
		   "$BUILD/perfmapctl" check "$a"/perf-* >/dev/null; then
			pass "exit_archive: kept 2 s after exit, then archived compacted; $n newest kept under the 4K quota"
		else
			fail "exit_archive: archive not as expected: $(ls -l "$a")"
		fi
	else
		fail "exit_archive: the map was not archived after the retention"
	fi
	ls -a "$d" | grep -q '^\.perfmapd\.' && fail "exit_archive: staged files left in the map directory"
	stop_agent || fail "exit_archive: perfmapd exited non-zero"
}

# Exec: the old image's entries leave the path; the new image's own map is its alone.
test_exec() {
	local d a out pid
	d=$(new_map_dir)
	a=$WORK/archive-exec
	start_agent "$WORK/exec.log" --map-dir "$d" --archive-dir "$a" || {
		fail "exec: perfmapd did not start"; return; }
	# A JIT execs a new JIT image, which starts up (20 ms) and writes its own map.
	"$FORKJIT" --dir "$d" --entries 30 --prefix oldimage --exec \
		"$FORKJIT" --dir "$d" --entries 5 --prefix newimage --startup-ms 20 --hold-ms 1500 &
	pid=$!
	sleep 0.8
	if [ "$(grep -c newimage "$d/perf-$pid.map")" = 5 ] && ! grep -q oldimage "$d/perf-$pid.map" &&
	   wait_for 5 grep -qs oldimage_29 "$a"/perf-$pid-*-exec*.map; then
		pass "exec: the new image's map holds only its own 5 entries; the old 30 are archived"
	else
		fail "exec: $(cat "$d/perf-$pid.map" 2>&1 | head -3)"
	fi
	wait $pid
	# A JIT execs a program that writes no map: the map leaves the path.
	"$FORKJIT" --dir "$d" --entries 30 --prefix beforesleep --exec sleep 1 &
	pid=$!
	sleep 0.5
	if [ ! -e "$d/perf-$pid.map" ]; then
		pass "exec: a JIT exec'ing a non-JIT program leaves no map at its pid"
	else
		fail "exec: /perf-$pid.map still there after exec of sleep"
	fi
	wait $pid
	stop_agent || fail "exec: perfmapd exited non-zero"
}

# Pid reuse through ns_last_pid: the new holder never appends to the dead one's map.
test_pid_reuse() {
	local d a pid out
	d=$(new_map_dir)
	a=$WORK/archive-reuse
	start_agent "$WORK/reuse.log" --map-dir "$d" --archive-dir "$a" || {
		fail "pid_reuse: perfmapd did not start"; return; }
	"$FORKJIT" --dir "$d" --entries 8 --prefix deadproc &
	pid=$!
	wait $pid
	wait_for 5 grep -q "exit $pid " "$AGENT_LOG"
	# The new process at the same pid starts like a runtime (20 ms) and writes its map.
	"$PIDAT" "$pid" "$FORKJIT" --dir "$d" --entries 4 --prefix newproc --startup-ms 20
	case $? in
	0) ;;
	3) say "  pid_reuse: pid $pid could not be had again; not counted"; stop_agent; return ;;
	*) fail "pid_reuse: the new process failed" ;;
	esac
	if [ "$(grep -c newproc "$d/perf-$pid.map")" = 4 ] && ! grep -q deadproc "$d/perf-$pid.map" &&
	   grep -qs deadproc_7 "$a"/perf-$pid-*.map; then
		pass "pid_reuse: pid $pid reused: its map holds only the new process's entries; the dead one's are archived"
	else
		fail "pid_reuse: $(head -3 "$d/perf-$pid.map")"
	fi
	stop_agent || fail "pid_reuse: perfmapd exited non-zero"
}

# Lost events: a tiny ring buffer, the agent stopped while 100 children fork.
test_lost_events() {
	local d fj dropped
	d=$(new_map_dir)
	start_agent "$WORK/lost.log" --map-dir "$d" --archive-dir "$WORK/archive-lost" \
		--ringbuf-size 4K || { fail "lost_events: perfmapd did not start"; return; }
	kill -STOP "$AGENT_PID"
	"$FORKJIT" --dir "$d" --entries 100 --children 100 --wait-map-ms 15000 >"$WORK/lost.out" 2>&1 &
	fj=$!
	sleep 1.5
	kill -CONT "$AGENT_PID"
	if wait $fj; then
		dropped=$(status_of "$d" events_dropped)
		if [ "$dropped" -gt 0 ] && [ "$(status_of "$d" resyncs)" -ge 1 ]; then
			pass "lost_events: $dropped events dropped; the resync from /proc gave all 100 children their maps"
		else
			fail "lost_events: no drop was provoked (dropped $dropped); the test proves nothing"
		fi
	else
		fail "lost_events: children left without maps: $(head -3 "$WORK/lost.out")"
	fi
	stop_agent || fail "lost_events: perfmapd exited non-zero"
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
		[ "$(status_of "$d" bpf)" = "$kind" ] ||
			fail "bpf_kinds: asked for $kind, status says '$(status_of "$d" bpf)'"
		if "$FORKJIT" --dir "$d" --entries 100 --children 10 --wait-map-ms 5000 \
			--prefix "kind_$kind" >"$WORK/kind-$kind.out" 2>&1; then
			pass "bpf_kinds: $kind: 10 children got their parent's entries"
		else
			fail "bpf_kinds: $kind: children without maps: $(head -3 "$WORK/kind-$kind.out")"
		fi
		# A JIT in its own pid namespace (pid 1 there) with 3 children: only
		# the pid namespace, read from struct pid, tells it apart.
		foreign=$(status_of "$d" foreign_namespace_processes)
		maps=$(cd "$d" && ls perf-*.map | wc -l)
		unshare --pid --fork "$FORKJIT" --dir "$d" --entries 10 --children 3 \
			--prefix "ns_$kind" >"$WORK/kind-ns-$kind.out" 2>&1
		wait_for 2 test "$(status_of "$d" foreign_namespace_processes)" -ge $((foreign + 4))
		n=$(status_of "$d" foreign_namespace_processes)
		if [ "$n" -ge $((foreign + 4)) ] && [ "$(status_of "$d" copies_created)" = 10 ] &&
			[ "$(cd "$d" && ls perf-*.map | grep -cv '^perf-1\.map$')" = "$maps" ]; then
			pass "bpf_kinds: $kind: $((n - foreign)) processes in another pid namespace seen and left alone"
		else
			fail "bpf_kinds: $kind: namespaced JIT: foreign $foreign -> $n, copies $(status_of "$d" copies_created), maps $maps -> $(cd "$d" && ls | tr '\n' ' ')"
		fi
		stop_agent || fail "bpf_kinds: $kind: perfmapd exited non-zero"
	done
}

# The index of which pids have a map (agent/mapwatch.c): lost inotify events
# must cost only a directory listing, never a child's map.
test_map_index() {
	local d fj q old
	d=$(new_map_dir)
	# A queue of 16 events, set only while this agent creates its watch.
	q=/proc/sys/fs/inotify/max_queued_events
	old=$(cat $q)
	echo 16 >$q
	start_agent "$WORK/index.log" --map-dir "$d" --archive-dir "$WORK/archive-index"
	fj=$?
	echo "$old" >$q
	[ $fj = 0 ] || { fail "map_index: perfmapd did not start"; return; }
	[ "$(status_of "$d" map_index)" = exact ] ||
		fail "map_index: status says '$(status_of "$d" map_index)' after start, not exact"
	# While the agent is stopped, the queue fills up, then a JIT writes its
	# map (a change the queue loses) and forks only after the agent is back.
	kill -STOP "$AGENT_PID"
	for q in $(seq 24); do : >"$d/junk.$q"; done
	"$FORKJIT" --dir "$d" --entries 50 --children 20 --fork-delay-ms 2500 \
		--wait-map-ms 10000 --prefix idx1 >"$WORK/index1.out" 2>&1 &
	fj=$!
	sleep 1
	kill -CONT "$AGENT_PID"
	if ! wait $fj; then
		fail "map_index: the parent's map was made during an inotify overflow; children without its entries: $(head -3 "$WORK/index1.out")"
	elif [ "$(status_of "$d" map_index_overflows)" -lt 1 ]; then
		fail "map_index: no inotify overflow was provoked; the test proves nothing"
	else
		pass "map_index: a map made while the inotify queue overflowed still reached all 20 children"
	fi
	# Listed again, the index is exact and children are served from it.
	wait_for 5 test "$(status_of "$d" map_index)" = exact ||
		fail "map_index: the index stays '$(status_of "$d" map_index)' after the overflow"
	if "$FORKJIT" --dir "$d" --entries 50 --children 20 --wait-map-ms 5000 \
		--prefix idx2 >"$WORK/index2.out" 2>&1; then
		pass "map_index: exact again after the listing; 20 more children got their maps"
	else
		fail "map_index: after the listing, children without maps: $(head -3 "$WORK/index2.out")"
	fi
	stop_agent || fail "map_index: perfmapd exited non-zero"
}

# kill -9 in the middle of forks; the restart catches up and corrupts nothing.
test_restart() {
	local d a pids=() i rc=0 sl stale_pid
	d=$(new_map_dir)
	a=$WORK/archive-restart
	start_agent "$WORK/restart1.log" --map-dir "$d" --archive-dir "$a" || {
		fail "restart: perfmapd did not start"; return; }
	sleep 30 &
	sl=$!
	for i in $(seq 8); do
		"$FORKJIT" --dir "$d" --entries 500 --children 10 --wait-map-ms 20000 \
			--prefix "restart${i}" >"$WORK/restart.$i.out" 2>&1 &
		pids+=($!)
		if [ $i = 3 ]; then
			kill9_agent
			# While no agent watches: a map at a live pid, written long
			# before that process started (put in place whole, by rename).
			printf '1000 10 stale_entry_from_before\n' >"$WORK/stale.map"
			touch -d '10 minutes ago' "$WORK/stale.map"
			mv "$WORK/stale.map" "$d/perf-$sl.map"
		fi
		sleep 0.25
	done
	start_agent "$WORK/restart2.log" --map-dir "$d" --archive-dir "$a" ||
		{ fail "restart: perfmapd did not start again"; return; }
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	if [ $rc = 0 ]; then
		pass "restart: kill -9 during a fork burst; after the restart all 80 children have complete maps"
	else
		fail "restart: children without complete maps: $(cat "$WORK"/restart.*.out | head -3)"
	fi
	if [ ! -e "$d/perf-$sl.map" ] && wait_for 5 grep -qs stale_entry "$a"/perf-$sl-stale*.map; then
		pass "restart: a map older than the process at its pid was archived at start"
	else
		fail "restart: the stale map of pid $sl was not moved"
	fi
	"$BUILD/perfmapctl" check "$d"/perf-*.map >/dev/null || fail "restart: a map is not clean"
	kill $sl 2>/dev/null
	wait $sl 2>/dev/null
	stop_agent || fail "restart: perfmapd exited non-zero"
}

# One agent per map directory; perfmapctl status without one.
test_instance() {
	local d out
	d=$(new_map_dir)
	out=$("$BUILD/perfmapctl" status --map-dir "$d" 2>&1)
	if [ $? -ne 0 ] && grep -q "no perfmapd is running for $d" <<<"$out"; then
		pass "instance: perfmapctl status without an agent: '$out'"
	else
		fail "instance: perfmapctl status without an agent said: $out"
	fi
	start_agent "$WORK/inst1.log" --map-dir "$d" --archive-dir "$WORK/archive-inst" || {
		fail "instance: perfmapd did not start"; return; }
	out=$(timeout 10 "$BUILD/perfmapd" --map-dir "$d" --archive-dir "$WORK/archive-inst" 2>&1)
	if [ $? -ne 0 ] && grep -q "another perfmapd (pid $AGENT_PID) already manages" <<<"$out"; then
		pass "instance: a second agent on $d refuses: '$out'"
	else
		fail "instance: second agent: $out"
	fi
	[ "$("$BUILD/perfmapctl" status --map-dir "$d" | awk '$1 == "pid:" { print $2 }')" = "$AGENT_PID" ] ||
		fail "instance: status does not come from the running agent"
	stop_agent || fail "instance: perfmapd exited non-zero"
}

ALL="instance bpf_kinds fork_perf fork_storm runtime_races traps cpython exit_archive exec pid_reuse lost_events map_index restart"
preflight
for t in ${*:-$ALL}; do
	say "== $t"
	"test_$t"
	cleanup_agent
	AGENT_PID=
done
if [ $FAILS -gt 0 ]; then
	say "agent tests: $FAILS FAILED"
	exit 1
fi
say "agent tests: all passed"
