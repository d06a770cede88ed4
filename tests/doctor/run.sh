#!/usr/bin/env bash
# perfmapctl doctor against live processes: the test JIT (tests/agent/jitdoc.c)
# with named, unnamed, freed and memfd regions, in containers, as another user,
# and real runtimes where present (CPython 3.12+, Node), and a jitdump producer
# (tests/jitdump/jitprod.c). The doctor must work without an agent and says
# so; only the jitdump_agent and adjacent_mmaps scenarios start one, on a
# private map, run and archive directory under $WORK.
#
#   tests/doctor/run.sh BUILD_DIR [SCENARIO...]
#
# Every function named test_* below is a scenario. Root (namespaces, another
# uid, other processes' /proc). Runtimes' maps go to a private tmpfs /tmp in a
# mount namespace of their own; nothing is written to the real /tmp.
set -u
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SCENARIO...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-doctor.XXXXXX)
chmod 755 "$WORK"
. "$HERE/../agent/lib.sh"
. "$HERE/../jitdump/prod.sh"

CTL=$BUILD/perfmapctl
JITDOC=$BUILD/tests/jitdoc
JITPROD=$BUILD/tests/jitprod
PIDS=()      # every process started, killed at exit
cleanup() {
	kill_all "${PIDS[@]}" "${PROD_JOBS[@]}"
	cleanup_agent
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapctl doctor tests"
[ "$(id -u)" = 0 ] || { say "FAIL: $SUITE need root (namespaces, another uid)"; exit 1; }
command -v jq >/dev/null || { say "FAIL: $SUITE need jq (make deps)"; exit 1; }

# jq_is DESC FILE FILTER: FILTER (jq -e) holds on the JSON in FILE.
jq_is() {
	if jq -e "$3" "$2" >/dev/null; then
		pass "$1"
	else
		fail "$1: $3 does not hold on: $(jq -c . "$2" 2>&1 | head -c 3000)"
	fi
}

# The findings as "code:severity:count" in order, one string.
codes() {
	jq -r '[.findings[] | "\(.code):\(.severity):\(.count)"] | join(" ")' "$1"
}

# doctor OUT ARGS...: perfmapctl doctor --json into OUT; its exit status in RC.
doctor() {
	local out=$1
	shift
	"$CTL" doctor --json "$@" >"$out" 2>"$out.err"
	RC=$?
}

# jit OUT ARGS...: jitdoc in the background, its output in OUT; JIT its pid
# once it has said "ready" (at most 10 s).
jit() {
	local out=$1
	shift
	"$JITDOC" "$@" >"$out" 2>&1 &
	JIT=$!
	PIDS+=("$JIT")
	wait_for 10 grep -qx ready "$out" || { fail "jitdoc did not get ready: $(cat "$out")"; return 1; }
}

addr() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

stop() {
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

new_dir() {
	local d
	d=$(mktemp -d "$WORK/maps.XXXXXX")
	chmod 1777 "$d"
	echo "$d"
}

test_kinds() {
	local d out=$WORK/kinds.out j=$WORK/kinds.json named unnamed freed memfd
	d=$(new_dir)
	jit "$out" --dir "$d" --unnamed --freed --memfd --dup --overlap --hex || return
	named=$(addr named "$out") unnamed=$(addr unnamed "$out")
	freed=$(addr freed "$out") memfd=$(addr memfd "$out")
	doctor "$j" --map-dir "$d" "$JIT"
	check "findings: exit status 1 (got $RC)" [ "$RC" = 1 ]
	local want="consumer_misreads:error:3 memfd_code:warning:1 overlapping_entries:warning:3 memfd_entries:warning:1 stale_entries:info:1 duplicate_entries:info:1 unnamed_regions:info:1"
	check "the findings are exactly: $want (got $(codes "$j"))" [ "$(codes "$j")" = "$want" ]
	jq_is "the freed region's entry is stale, at its address" "$j" \
		".findings[] | select(.code == \"stale_entries\") | .addresses == [\"$freed\"]"
	jq_is "the memfd entry is named at its address" "$j" \
		".findings[] | select(.code == \"memfd_entries\") | .addresses == [\"$memfd\"]"
	jq_is "the unnamed region is named at its address" "$j" \
		".findings[] | select(.code == \"unnamed_regions\") | .addresses == [\"$unnamed\"]"
	jq_is "blazesym fails the whole file (the 0x line)" "$j" \
		'.findings[0].cause | test("is misread by perf, blazesym \\(whole file\\), bcc; ")'
	jq_is "mappings: 2 anon exec regions of 12 KiB, 1 memfd; 0x1040 bytes named, all below the top" "$j" \
		'.mappings | .exec_anon_regions == 2 and .exec_anon_bytes == 12288 and .exec_memfd_regions == 1 and .exec_memfd_bytes == 4096 and .named_bytes == 4160 and .used_bytes == 4160 and .unnamed_regions == 1'
	jq_is "map: 7 entries, 5 in anon code, 1 stale, 1 in memfd, 1 duplicate" "$j" \
		'.map | .entries == 7 and .entries_in_anon == 5 and .entries_stale == 1 and .entries_in_memfd == 1 and .entries_in_files == 0 and .duplicates == 1'
	jq_is "healthy is false; no agent, said so" "$j" '.healthy == false and .agent.running == false and .agent.why == "not running"'

	"$CTL" doctor --map-dir "$d" "$JIT" >"$WORK/kinds.txt"
	RC=$?
	check "table: exit status 1" [ "$RC" = 1 ]
	check "table: verdict line" grep -qx "verdict: NOT healthy" "$WORK/kinds.txt"
	check "table: the error comes first" sh -c "grep -m1 -E '^  (ERROR|WARNING|info) ' '$WORK/kinds.txt' | grep -q '^  ERROR    consumer_misreads: '"
	check "table: the stale entry's address" grep -qx "           at $freed" "$WORK/kinds.txt"
	check "table: agent not running" grep -qx "agent: not running" "$WORK/kinds.txt"
	check "table: named bytes" grep -q "^  named      4.1 KiB of 12.0 KiB (33.9%); 1 region unnamed$" "$WORK/kinds.txt"
	stop "$JIT"
}

test_healthy() {
	local d out=$WORK/healthy.out j=$WORK/healthy.json
	d=$(new_dir)
	jit "$out" --dir "$d" || return
	doctor "$j" --map-dir "$d" "$JIT"
	check "healthy: exit status 0 (got $RC)" [ "$RC" = 0 ]
	jq_is "healthy: no findings at all" "$j" '.healthy == true and .findings == []'
	jq_is "healthy: runtime generic, no perf option, comm jitdoc" "$j" \
		'.process.runtime == "generic" and .process.perf_option == null and .process.comm == "jitdoc"'
	stop "$JIT"
}

test_low_coverage() {
	local d out=$WORK/low.out j=$WORK/low.json
	d=$(new_dir)
	jit "$out" --dir "$d" --gap || return
	doctor "$j" --map-dir "$d" "$JIT"
	check "0x900 of 0x1000 named: above the default 50%: exit 0 (got $RC)" [ "$RC" = 0 ]
	doctor "$j" --map-dir "$d" --min-coverage 60 "$JIT"
	check "under --min-coverage 60: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "low_coverage alone (got $(codes "$j"))" [ "$(codes "$j")" = "low_coverage:warning:0" ]
	jq_is "56.2% named" "$j" '.findings[0].cause | test("\\(56\\.2%, under 60%\\)")'
	stop "$JIT"
}

test_no_map() {
	local d empty out=$WORK/nomap.out j=$WORK/nomap.json
	d=$(new_dir) empty=$(new_dir)
	jit "$out" --dir "$d" --unnamed || return
	doctor "$j" --map-dir "$empty" "$JIT"
	check "no map: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "no_map alone, an error, for 2 regions (got $(codes "$j"))" [ "$(codes "$j")" = "no_map:error:2" ]
	jq_is "the cause names the JIT code and the missing map" "$j" \
		".findings[0].cause == \"jitdoc $JIT runs 12.0 KiB of JIT code in 2 anonymous executable regions but has no $empty/perf-$JIT.map\""
	stop "$JIT"
}

test_not_writable() {
	local d locked out=$WORK/nw.out j=$WORK/nw.json
	d=$(new_dir)
	locked=$(mktemp -d "$WORK/locked.XXXXXX")
	chmod 755 "$locked"
	# As uid 65534, which cannot create a map in a root-owned 0755 directory.
	setpriv --reuid 65534 --regid 65534 --clear-groups "$JITDOC" --dir "$locked" >"$out" 2>&1 &
	JIT=$!
	PIDS+=("$JIT")
	wait_for 10 grep -qx ready "$out" || { fail "jitdoc as 65534 did not get ready: $(cat "$out")"; return; }
	doctor "$j" --map-dir "$locked" "$JIT"
	check "unwritable directory: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "map_not_writable alone (got $(codes "$j"))" [ "$(codes "$j")" = "map_not_writable:error:1" ]
	jq_is "the cause names the directory's owner and mode and the uid" "$j" \
		'.findings[0].cause | test("its directory \\(owner 0, mode 0755\\) is not writable by uid 65534")'
	stop "$JIT"

	# Its map, then taken from it: root's, 0600.
	setpriv --reuid 65534 --regid 65534 --clear-groups "$JITDOC" --dir "$d" >"$out" 2>&1 &
	JIT=$!
	PIDS+=("$JIT")
	wait_for 10 grep -qx ready "$out" || { fail "jitdoc as 65534 did not get ready: $(cat "$out")"; return; }
	chown 0:0 "$d/perf-$JIT.map"
	doctor "$j" --map-dir "$d" "$JIT"
	check "a map of another owner: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "map_not_writable alone (got $(codes "$j"))" [ "$(codes "$j")" = "map_not_writable:error:1" ]
	jq_is "the cause names the owner, mode and uid" "$j" \
		'.findings[0].cause | test("it belongs to uid 0 with mode 0600, and the process runs as uid 65534")'
	stop "$JIT"
}

test_usage() {
	"$CTL" doctor 4000000 >/dev/null 2>"$WORK/usage.err"
	RC=$?
	check "no such pid: exit 2 (got $RC)" [ "$RC" = 2 ]
	check "no such pid: said" grep -qx "perfmapctl: doctor: no process 4000000" "$WORK/usage.err"
	"$CTL" doctor >/dev/null 2>&1
	RC=$?
	check "no pid: exit 2 (got $RC)" [ "$RC" = 2 ]
	"$CTL" doctor 12x >/dev/null 2>&1
	RC=$?
	check "not a pid: exit 2 (got $RC)" [ "$RC" = 2 ]
	"$CTL" doctor --min-coverage 101 1 >/dev/null 2>&1
	RC=$?
	check "--min-coverage 101: exit 2 (got $RC)" [ "$RC" = 2 ]
	check "help lists doctor" sh -c "'$CTL' help | grep -q '^  doctor '"
}

# in_container OUT SETUP: jitdoc as pid 1 of a pid and mount namespace with
# its own tmpfs /tmp, after SETUP ran there; JIT its host pid.
in_container() {
	local out=$1 setup=$2 upid
	unshare -m -p --fork --mount-proc --propagation private \
		sh -c "mount -t tmpfs tmpfs /tmp && $setup exec '$JITDOC' --dir /tmp" >"$out" 2>&1 &
	upid=$!
	PIDS+=("$upid")
	wait_for 10 grep -qx ready "$out" || { fail "jitdoc in a container did not get ready: $(cat "$out")"; return 1; }
	JIT=$(awk '{ print $1 }' "/proc/$upid/task/$upid/children")
	PIDS+=("$JIT")
	CONTAINER=$upid
}

# stop_container: its init ignores SIGTERM (no handler), and unshare waits for it.
stop_container() {
	kill -9 "$JIT" 2>/dev/null
	wait "$CONTAINER" 2>/dev/null
}

test_container() {
	local d j=$WORK/ns.json
	d=$(new_dir)
	in_container "$WORK/ns.out" "" || return
	doctor "$j" --map-dir "$d" "$JIT"
	check "map only in the container: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "map_only_in_container alone (got $(codes "$j"))" [ "$(codes "$j")" = "map_only_in_container:warning:1" ]
	jq_is "its pid in the namespace is 1, in another mount namespace" "$j" \
		'.process.ns_pid == 1 and .process.other_mount_namespace == true'
	jq_is "the container's map was read through its root" "$j" \
		".map.container.path == \"/proc/$JIT/root/tmp/perf-1.map\" and .map.container.exists and .map.read == .map.container.path and .map.entries == 2 and .map.entries_in_anon == 2"
	jq_is "the fix names the host path" "$j" ".findings[0].fix | contains(\"$d/perf-$JIT.map\")"
	stop_container

	# A container whose map is a symlink to a host file: refused, never read.
	in_container "$WORK/ns2.out" "ln -s /etc/shadow /tmp/perf-1.map &&" || return
	doctor "$j" --map-dir "$d" "$JIT"
	check "a symlinked container map: exit 1 (got $RC)" [ "$RC" = 1 ]
	jq_is "map_refused: a symlink" "$j" \
		'[.findings[].code] == ["map_refused", "map_only_in_container"] and (.findings[0].cause | test("is a symlink, refused"))'
	stop_container
}

# Only a pid namespace: the map is in our directory, under the namespace's pid.
test_pid_namespace() {
	local d j=$WORK/pidns.json upid
	d=$(new_dir)
	unshare -p --fork "$JITDOC" --dir "$d" >"$WORK/pidns.out" 2>&1 &
	upid=$!
	PIDS+=("$upid")
	wait_for 10 grep -qx ready "$WORK/pidns.out" || { fail "jitdoc in a pid namespace did not get ready"; return; }
	JIT=$(awk '{ print $1 }' "/proc/$upid/task/$upid/children")
	PIDS+=("$JIT")
	CONTAINER=$upid
	doctor "$j" --map-dir "$d" "$JIT"
	check "pid namespace: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "map_only_in_container alone (got $(codes "$j"))" [ "$(codes "$j")" = "map_only_in_container:warning:1" ]
	jq_is "read under its namespace pid, in the same mount namespace" "$j" \
		".process.ns_pid == 1 and .process.other_mount_namespace == false and .map.read == \"$d/perf-1.map\" and .map.entries == 2"
	stop_container
}

# A name with an escape sequence in it is printed escaped, in the table and in JSON.
test_escaped_names() {
	local d out=$WORK/esc.out j=$WORK/esc.json name
	d=$(new_dir)
	name=$WORK/$'jit\033[31mdoc'
	cp "$JITDOC" "$name"
	"$name" --dir "$d" >"$out" 2>&1 &
	JIT=$!
	PIDS+=("$JIT")
	wait_for 10 grep -qx ready "$out" || { fail "the renamed jitdoc did not get ready"; return; }
	doctor "$j" --map-dir "$d" "$JIT"
	jq_is "comm and exe escaped in JSON" "$j" \
		'.process.comm == "jit\\x1b[31mdoc" and (.process.exe | endswith("/jit\\x1b[31mdoc"))'
	"$CTL" doctor --map-dir "$d" "$JIT" >"$WORK/esc.txt"
	check "no escape byte in the table" sh -c "! grep -q \$'\\033' '$WORK/esc.txt'"
	check "the table shows it escaped" grep -qF 'comm       jit\x1b[31mdoc' "$WORK/esc.txt"
	stop "$JIT"
}

# The runtime is told by its executable's name and its option by its
# arguments and environment: the test JIT under runtimes' names.
test_runtime_names() {
	local d empty j=$WORK/rt.json bin=$WORK/bin
	d=$(new_dir) empty=$(new_dir)
	mkdir -p "$bin"
	cp "$JITDOC" "$bin/dotnet"
	cp "$JITDOC" "$bin/java"
	cp "$JITDOC" "$bin/node"

	as_runtime() {
		local out=$WORK/rt.out
		env "$@" >"$out" 2>&1 &
		JIT=$!
		PIDS+=("$JIT")
		wait_for 10 grep -qx ready "$out" || { fail "$* did not get ready"; return 1; }
	}
	as_runtime "$bin/dotnet" --dir "$d" --memfd || return
	doctor "$j" --map-dir "$empty" "$JIT"
	check "dotnet without its option: no_map and memfd_code (got $(codes "$j"))" \
		[ "$(codes "$j")" = "no_map:error:2 memfd_code:warning:1" ]
	jq_is "dotnet: the fixes are DOTNET_PerfMapEnabled=1 and DOTNET_EnableWriteXorExecute=0" "$j" \
		'.process.runtime == "dotnet" and (.findings[0].fix | startswith("restart it with DOTNET_PerfMapEnabled=1")) and (.findings[1].fix | contains("DOTNET_EnableWriteXorExecute=0"))'
	stop "$JIT"

	as_runtime DOTNET_PerfMapEnabled=2 "$bin/dotnet" --dir "$d" || return
	doctor "$j" --map-dir "$empty" "$JIT"
	check "dotnet with PerfMapEnabled=2: a jitdump only, healthy (got $(codes "$j"))" \
		[ "$(codes "$j")" = "jitdump_only:info:1" ] && [ "$RC" = 0 ]
	stop "$JIT"

	as_runtime "$bin/java" --dir "$d" || return
	doctor "$j" --map-dir "$empty" "$JIT"
	jq_is "java: the fix is jcmd PID Compiler.perfmap" "$j" \
		".process.runtime == \"java\" and .findings[0].code == \"no_map\" and (.findings[0].fix | startswith(\"run \\u0060jcmd $JIT Compiler.perfmap\\u0060\"))"
	stop "$JIT"

	as_runtime NODE_OPTIONS="--max-old-space-size=100 --perf-basic-prof" "$bin/node" --dir "$d" || return
	doctor "$j" --map-dir "$empty" "$JIT"
	jq_is "node with NODE_OPTIONS=--perf-basic-prof but no map: said so" "$j" \
		".process.perf_option == \"NODE_OPTIONS=--perf-basic-prof\" and .findings[0].code == \"no_map\" and (.findings[0].cause | startswith(\"node $JIT was started with NODE_OPTIONS=--perf-basic-prof but has no $empty/perf-$JIT.map\"))"
	stop "$JIT"
}

# in_private_tmp SCRIPT: SCRIPT (bash) in a mount namespace with its own tmpfs /tmp.
in_private_tmp() {
	unshare -m --propagation private bash -c "mount -t tmpfs tmpfs /tmp && cd '$WORK' || exit 1; $1"
}

# runtime_doctor NAME JSON CMD...: CMD in a private /tmp, doctor on it once it
# printed "ready", its exit status in $JSON.rc; CMD killed after.
runtime_doctor() {
	local name=$1 j=$2
	shift 2
	in_private_tmp "
		$* >'$WORK/$name.out' 2>&1 & p=\$!
		for i in \$(seq 200); do grep -qx ready '$WORK/$name.out' && break; sleep 0.05; done
		sleep 0.5  # let its loop compile a while: coverage is measured on code it runs
		'$CTL' doctor --json \$p >'$j'; echo \$? >'$j.rc'
		kill \$p; wait \$p 2>/dev/null
	"
	RC=$(cat "$j.rc" 2>/dev/null)
}

PY_LOOP='
import time, json, re
def f(n):
    return sum(i * i for i in range(n))
def g():
    json.dumps({"a": [1, 2]}); re.match("a+", "aaa")
    return sum(f(1000) for _ in range(50))
print("ready", flush=True)
while True:
    g()
    time.sleep(0.01)
'

test_cpython() {
	local py j=$WORK/py.json
	py=$(find_python 12) || { skip "no CPython 3.12+ under pyenv"; return; }
	printf '%s' "$PY_LOOP" >"$WORK/loop.py"
	runtime_doctor py "$j" "'$py' -X perf '$WORK/loop.py'"
	check "CPython -X perf: healthy, exit 0 (got $RC; $(codes "$j"))" [ "$RC" = 0 ]
	jq_is "CPython -X perf: python 3.12+, its option seen, its map read, no no_map" "$j" \
		'.process.runtime == "python" and .process.python_minor >= 12 and .process.perf_option == "-X perf" and .map.entries > 0 and ([.findings[].code] | index("no_map") | not)'
	jq_is "CPython -X perf: coverage below the top entry at least the default 50%" "$j" '.mappings.used_coverage_pct >= 50'
	say "   measured: CPython -X perf: $(jq -c '{coverage_pct: .mappings.coverage_pct, used_coverage_pct: .mappings.used_coverage_pct, entries: .map.entries}' "$j")"

	runtime_doctor pyenv "$j" "PYTHONPERFSUPPORT=1 '$py' '$WORK/loop.py'"
	jq_is "CPython PYTHONPERFSUPPORT=1: the option seen, no no_map" "$j" \
		'.process.perf_option == "PYTHONPERFSUPPORT=1" and ([.findings[].code] | index("no_map") | not)'

	runtime_doctor pyoff "$j" "'$py' '$WORK/loop.py'"
	check "CPython without -X perf: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "CPython without -X perf: no_map alone (got $(codes "$j"))" [ "$(codes "$j")" = "no_map:warning:0" ]
	jq_is "CPython without -X perf: the fix is -X perf" "$j" '.findings[0].fix | startswith("restart it with -X perf")'
}

NODE_LOOP='
function f(n) { let s = 0; for (let i = 0; i < n; i++) s += i * i; return s; }
function g() { let s = 0; for (let k = 0; k < 50; k++) s += f(1000 + k); JSON.stringify({a: [1]}); return s; }
console.log("ready");
setInterval(() => { for (let i = 0; i < 20; i++) g(); }, 10);
'

test_node() {
	local node j=$WORK/node.json
	node=$(command -v node) || { skip "no node"; return; }
	printf '%s' "$NODE_LOOP" >"$WORK/loop.js"
	runtime_doctor node "$j" "'$node' --perf-basic-prof '$WORK/loop.js'"
	check "Node --perf-basic-prof: healthy, exit 0 (got $RC; $(codes "$j"))" [ "$RC" = 0 ]
	jq_is "Node --perf-basic-prof: node, its option seen, its map read, no no_map" "$j" \
		'.process.runtime == "node" and .process.perf_option == "--perf-basic-prof" and .map.entries > 0 and ([.findings[].code] | index("no_map") | not)'
	jq_is "Node: coverage below the top entry at least the default 50%" "$j" '.mappings.used_coverage_pct >= 50'
	say "   measured: Node --perf-basic-prof: $(jq -c '{coverage_pct: .mappings.coverage_pct, used_coverage_pct: .mappings.used_coverage_pct, entries: .map.entries, stale: .map.entries_stale, in_files: .map.entries_in_files}' "$j")"

	runtime_doctor nodeoff "$j" "'$node' '$WORK/loop.js'"
	check "Node without the flag: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "Node without the flag: no_map alone, an error (got $(codes "$j"))" \
		[ "$(codes "$j" | cut -d: -f1,2)" = "no_map:error" ]
	jq_is "Node without the flag: the cause names its JIT code, the fix --perf-basic-prof" "$j" \
		'(.findings[0].cause | test("^node [0-9]+ runs .* of JIT code in [0-9]+ anonymous executable regions? but has no /tmp/perf-[0-9]+\\.map$")) and (.findings[0].fix | startswith("restart it with --perf-basic-prof"))'
}

# A stand-in for the agent's status socket: what `perfmapctl status` reads,
# with the fields the doctor adds to its report when they are there.
test_agent_fields() {
	local d run=$WORK/run out=$WORK/agent.out j=$WORK/agent.json sock srv
	d=$(new_dir)
	mkdir -p "$run"
	jit "$out" --dir "$d" || return
	sock=$("$CTL" status --map-dir "$d" --run-dir "$run" 2>&1 | sed -n 's/.*nothing listens on \(.*\))$/\1/p')
	[ -n "$sock" ] || { fail "no socket path from perfmapctl status"; return; }
	python3 - "$sock" "$JIT" >"$WORK/srv.out" 2>&1 <<'PY' &
import os, socket, sys
path, pid = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(4)
print("listening", flush=True)
text = ("pid: 1\nmap_dir: x\nexec_mappings_source: perf_mmap2\nlost_symbol_processes: 3\n"
        "jit_%s: comm=x lost=no bytes=1 regions=4 bytes=16384 memfd_bytes=8192 lost=yes\nmirror_%s: ns_pid=7 container=abc\x1b bytes=10 behind=0\n"
        "jit_1: regions=9 bytes=9 lost=no\n" % (pid, pid))
while True:
    c, _ = s.accept()
    c.sendall(text.encode())
    c.close()
PY
	srv=$!
	PIDS+=("$srv")
	wait_for 10 grep -qx listening "$WORK/srv.out" || { fail "the stand-in did not listen: $(cat "$WORK/srv.out")"; return; }
	doctor "$j" --map-dir "$d" --run-dir "$run" "$JIT"
	check "with an agent: still healthy, exit 0 (got $RC)" [ "$RC" = 0 ]
	jq_is "the agent's fields for this process, its mirror escaped" "$j" \
		'.agent == {"running": true, "exec_mappings_source": "perf_mmap2", "lost_symbol_processes": 3, "jit": {"regions": 4, "bytes": 16384, "memfd_bytes": 8192, "lost": true}, "mirror": "ns_pid=7 container=abc\\x1b bytes=10 behind=0"}'
	"$CTL" doctor --map-dir "$d" --run-dir "$run" "$JIT" >"$WORK/agent.txt"
	check "table: the agent section" grep -qx "  this process        4 JIT regions, 16.0 KiB; names lost: yes" "$WORK/agent.txt"
	stop "$srv"
	rm -f "$sock"
	stop "$JIT"
}

# Three adjacent anonymous pages, each its own mmap, the map naming the first two: the
# kernel shows them as one mapping, so without the agent only low_coverage; the agent
# kept each mmap, and the doctor names the third page by its address and length.
mmaps_kept() {
	"$CTL" doctor --json --map-dir "$1" --run-dir "$2" "$3" 2>/dev/null | jq -e ".agent.mmaps.kept == $4" >/dev/null
}
test_adjacent_mmaps() {
	local d run=$WORK/mmaps-run out=$WORK/adj.out j=$WORK/adj.json t=$WORK/adj.txt first third sock
	d=$(new_dir)
	jit "$out" --dir "$d" --adjacent || return
	first=$(addr adjacent "$out") third=$(addr adjacent_unnamed "$out")
	check "the kernel merged the three pages into one mapping" \
		grep -q "^${first#0x}-$(printf '%x' $((third + 0x1000))) r-xp " "/proc/$JIT/maps"
	doctor "$j" --map-dir "$d" --run-dir "$WORK/no-run" "$JIT"
	check "no agent: low_coverage alone (got $(codes "$j"))" [ "$(codes "$j")" = "low_coverage:warning:0" ]
	jq_is "no agent: one mapping, no unnamed region, no mmaps" "$j" \
		'.mappings.exec_anon_regions == 1 and .mappings.unnamed_regions == 0 and (.agent | has("mmaps") | not)'
	stop "$JIT"

	mkdir -p "$run"
	if ! start_agent "$WORK/mmaps-agent.log" --map-dir "$d" --run-dir "$run" --archive-dir "$WORK/mmaps-archive"; then
		skip "perfmapd did not start here: $(grep -m1 -i 'error\|cannot' "$WORK/mmaps-agent.log")"
		return
	fi
	if ! "$CTL" status --all --map-dir "$d" --run-dir "$run" | grep -qx "exec_mappings_source: perf-mmap2"; then
		skip "no mmap reports here: $("$CTL" status --all --map-dir "$d" --run-dir "$run" | grep exec_mappings)"
		stop_agent
		return
	fi
	jit "$out" --dir "$d" --adjacent || return
	first=$(addr adjacent "$out") third=$(addr adjacent_unnamed "$out")
	check "the agent kept the three mmaps" wait_for 10 mmaps_kept "$d" "$run" "$JIT" 3
	doctor "$j" --map-dir "$d" --run-dir "$run" "$JIT"
	check "agent: low_coverage and unnamed_mmaps (got $(codes "$j"))" \
		[ "$(codes "$j")" = "low_coverage:warning:0 unnamed_mmaps:info:1" ]
	jq_is "unnamed_mmaps names the third page's address" "$j" \
		".findings[] | select(.code == \"unnamed_mmaps\") | .addresses == [\"$third\"]"
	jq_is "its cause gives its address and length" "$j" \
		".findings[] | select(.code == \"unnamed_mmaps\") | .cause | endswith(\"(so /proc/$JIT/maps shows no unnamed region): $third (4.0 KiB)\")"
	jq_is "the agent's mmaps, each a page as its mmap made it, the third unnamed" "$j" \
		".agent.mmaps == {\"kept\": 3, \"not_kept\": 0, \"regions\": [{\"address\": \"$first\", \"bytes\": 4096, \"mapped\": true, \"named\": true}, {\"address\": \"$(printf '0x%x' $((first + 0x1000)))\", \"bytes\": 4096, \"mapped\": true, \"named\": true}, {\"address\": \"$third\", \"bytes\": 4096, \"mapped\": true, \"named\": false}]}"
	"$CTL" doctor --map-dir "$d" --run-dir "$run" "$JIT" >"$t"
	check "table: the agent's mmaps" grep -qx "  mmaps seen          3 kept (0 more not kept); 3 still mapped, 1 of them named by no entry" "$t"
	check "table: the finding at the third page" grep -qx "           at $third" "$t"

	# The socket: nothing sent is the whole status, as before; a bound client's late line is
	# awaited; an unbound client's late line is not; a bound client sending nothing gets an error.
	check "status: the whole status, no region lines" \
		sh -c "'$CTL' status --all --map-dir '$d' --run-dir '$run' | grep -q '^jit_$JIT: comm=jitdoc ' && ! '$CTL' status --all --map-dir '$d' --run-dir '$run' | grep -q '^jit_region_[0-9]'"
	sock=$(ls "$run"/*.sock)
	python3 - "$sock" "$JIT" >"$WORK/adj-sock.out" 2>&1 <<'PY'
import socket, sys, time
path, pid = sys.argv[1], sys.argv[2]
def ask(bind, req, delay=0):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    if bind:
        s.bind("")
    s.connect(path)
    time.sleep(delay)
    try:
        if req:
            s.sendall(req)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out.decode()
            out += b
    except OSError as e:
        return "oserror"
req = b"pid %s\n" % pid.encode()
print("nothing:", ask(False, None).split("\n")[0].split(":")[0])
print("bound late:", ask(True, req, 0.3).split("\n")[0])
print("bound late regions:", ask(True, req, 0.2).count("jit_region_%s: " % pid))
print("unbound late:", ask(False, req, 0.3).split("\n")[0].split(":")[0])
t = time.time()
print("bound nothing:", ask(True, None).strip(), round(time.time() - t) <= 2)
print("bound bad:", ask(True, b"pid x\n").strip())
PY
	check "socket: nothing sent, the whole status" grep -qx "nothing: pid" "$WORK/adj-sock.out"
	check "socket: a bound client's late request answered" grep -qx "bound late: request: pid $JIT" "$WORK/adj-sock.out"
	check "socket: its 3 region lines" grep -qx "bound late regions: 3" "$WORK/adj-sock.out"
	check "socket: an unbound client's late request is not awaited (the whole status, or the agent gone by the send)" \
		grep -qE "^unbound late: (pid|oserror)\$" "$WORK/adj-sock.out"
	check "socket: a bound client sending nothing: an error line within 2 s" \
		grep -qx 'bound nothing: error: not a request: one line, "pid N" True' "$WORK/adj-sock.out"
	check "socket: a bad request: an error line" \
		grep -qx 'bound bad: error: not a request: one line, "pid N"' "$WORK/adj-sock.out"
	stop "$JIT"
	stop_agent || fail "perfmapd exited non-zero"
}

# ---- jitdumps (issue 22) ----

# The test producer, driven through a FIFO: prod_start, prod, prod_end (tests/jitdump/prod.sh).


# A dump and no map, no agent: the dump named with what it holds, and what perf
# needs without a map; the offline map the fix names then makes it healthy.
test_jitdump_no_agent() {
	local d dumps j=$WORK/jd.json t=$WORK/jd.txt
	d=$(new_dir) dumps=$(new_dir)
	prod_start jd "$JITPROD" "$dumps" || return
	prod jd load fn_alpha && prod jd load fn_beta && prod jd move fn_alpha && prod jd debug fn_beta || return
	doctor "$j" --map-dir "$d" --run-dir "$WORK/no-run" "$PROD"
	check "jitdump, no map, no agent: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "jitdump_no_map alone, a warning, for 2 functions; no generic no_map (got $(codes "$j"))" \
		[ "$(codes "$j")" = "jitdump_no_map:warning:2" ]
	jq_is "the dump found by its marker, and what it holds" "$j" \
		".jitdump | .path == \"$DUMP\" and .named_pid == $PROD and .header_pid == $PROD and .records == 4 and .functions == 2 and .loads == 2 and .moves == 1 and .moves_unmatched == 0 and .debug_info == 1 and .debug_entries == 3 and .torn_bytes == 0 and .malformed == null and .uid == 0 and .bytes > 0 and .map == \"no_agent\""
	jq_is "the cause names the dump, the missing map, and who reads a dump" "$j" \
		".findings[0].cause == \"jitprod $PROD describes its JIT code in the jitdump $DUMP (2 functions) and has no $d/perf-$PROD.map, and no perfmapd runs to write one: only perf reads a jitdump, after \u0060perf record -k mono\u0060 and \u0060perf inject -j\u0060; bcc, bpftrace, blazesym and perf without inject see hex\""
	jq_is "the fix: perf's record and inject, perfmapd, or perfmapctl jitdump -o the map" "$j" \
		".findings[0].fix == \"record with \u0060perf record -k mono\u0060, then \u0060perf inject -j -i perf.data -o jit.data\u0060 and report jit.data; or run perfmapd, which writes the map from the dump as it grows; or write a map now: perfmapctl jitdump $DUMP -o $d/perf-$PROD.map\""
	"$CTL" doctor --map-dir "$d" --run-dir "$WORK/no-run" "$PROD" >"$t"
	check "table: the dump's path, size and owner" grep -qE "^  path       $DUMP: [0-9]+ bytes, uid 0, mode 0600\$" "$t"
	check "table: what it holds" grep -qx "  holds      2 functions live: 2 loads, 1 move (0 unmatched), 1 debug info record (3 lines), 0 closes, 0 skipped" "$t"
	check "table: no map written, no agent" grep -qx "  perf map   no agent to write one; $d/perf-$PROD.map is not there" "$t"
	check "table: the finding" grep -q "^  WARNING  jitdump_no_map: jitprod $PROD describes its JIT code in the jitdump $DUMP" "$t"

	# The fix's offline map: the doctor then finds it, and the dump needs nothing more.
	"$CTL" jitdump "$DUMP" -o "$d/perf-$PROD.map" 2>/dev/null
	check "perfmapctl jitdump wrote the map the fix names" test -s "$d/perf-$PROD.map"
	doctor "$j" --map-dir "$d" --run-dir "$WORK/no-run" "$PROD"
	check "with the offline map: healthy, exit 0 (got $RC; $(codes "$j"))" [ "$RC" = 0 ]
	jq_is "with the offline map: its 2 entries name the producer's code" "$j" \
		'.map.entries == 2 and .map.entries_in_anon == 2 and .jitdump.map == "no_agent"'
	prod_end jd
}

# A torn last record, then a malformed one (a record of size 0): both said, with
# the offset and reason of the malformed one.
test_jitdump_torn_malformed() {
	local d dumps j=$WORK/jt.json t=$WORK/jt.txt size
	d=$(new_dir) dumps=$(new_dir)
	prod_start jt "$JITPROD" "$dumps" || return
	prod jt load fn_alpha && prod jt torn fn_torn || return
	doctor "$j" --map-dir "$d" --run-dir "$WORK/no-run" "$PROD"
	jq_is "torn: the whole function read, the torn bytes counted" "$j" \
		'.jitdump | .functions == 1 and .loads == 1 and .torn_bytes > 0 and .malformed == null'
	check "torn: jitdump_torn, an info, beside jitdump_no_map (got $(codes "$j"))" \
		[ "$(codes "$j")" = "jitdump_no_map:warning:1 jitdump_torn:info:$(jq .jitdump.torn_bytes "$j")" ]
	jq_is "torn: the cause names the dump and the bytes" "$j" \
		".findings[1].cause == \"the last record of $DUMP is incomplete ($(jq .jitdump.torn_bytes "$j") bytes at its end): the runtime is writing it, or stopped in the middle of it\""
	"$CTL" doctor --map-dir "$d" --run-dir "$WORK/no-run" "$PROD" >"$t"
	check "torn: the table says so" grep -qE "^  torn       [0-9]+ bytes at its end, not a whole record yet\$" "$t"

	prod jt finish || return
	size=$(stat -c %s "$DUMP")
	prod jt rawrec 0 0 || return
	doctor "$j" --map-dir "$d" --run-dir "$WORK/no-run" "$PROD"
	check "malformed: exit 1 (got $RC)" [ "$RC" = 1 ]
	check "malformed: jitdump_malformed and jitdump_no_map, no torn (got $(codes "$j"))" \
		[ "$(codes "$j")" = "jitdump_malformed:warning:1 jitdump_no_map:warning:2" ]
	jq_is "malformed: the reason and offset, the functions before it read" "$j" \
		".jitdump | .functions == 2 and .malformed == {\"reason\": \"record size below what its kind holds\", \"offset\": $size, \"in_header\": false}"
	jq_is "malformed: the cause" "$j" \
		".findings[0].cause == \"jitprod $PROD's jitdump $DUMP has a malformed record at offset $size: record size below what its kind holds; the 2 functions read before it are named, nothing after it is read (perfmapd stops there too)\""
	"$CTL" doctor --map-dir "$d" --run-dir "$WORK/no-run" "$PROD" >"$t"
	check "malformed: the table says where and why" \
		grep -qx "  stopped    a malformed record at offset $size: record size below what its kind holds" "$t"
	prod_end jt
}

# A dump with a second hard link (perhaps to another user's file): refused, never read, said.
test_jitdump_refused() {
	local d dumps j=$WORK/jr.json
	d=$(new_dir) dumps=$(new_dir)
	prod_start jr "$JITPROD" "$dumps" || return
	prod jr load fn_alpha || return
	ln "$DUMP" "$dumps/linked"
	doctor "$j" --map-dir "$d" --run-dir "$WORK/no-run" "$PROD"
	check "a hard-linked dump: jitdump_refused and jitdump_no_map (got $(codes "$j"))" \
		[ "$(codes "$j")" = "jitdump_refused:warning:1 jitdump_no_map:warning:0" ]
	jq_is "refused for its second link, nothing read" "$j" \
		'.jitdump | .refused == "has more than one hard link, refused" and (has("records") | not)'
	prod_end jr
}

# A producer in a container (its own pid and mount namespace, a tmpfs /tmp): its
# dump is reached through its root, and the offline map the fix names is written.
test_jitdump_container() {
	local d j=$WORK/jc.json fd upid host
	d=$(new_dir)
	rm -f "$WORK/jc.in"
	mkfifo -m 0600 "$WORK/jc.in"
	unshare -m -p --fork --mount-proc --propagation private \
		sh -c "mount -t tmpfs tmpfs /tmp && exec '$JITPROD' /tmp" <"$WORK/jc.in" >"$WORK/jc.out" 2>&1 &
	upid=$!
	PIDS+=("$upid")
	exec {fd}>"$WORK/jc.in"
	PFD[jc]=$fd
	PREPLIES[jc]=1
	wait_for 10 grep -q "^ready " "$WORK/jc.out" || { fail "jitprod in a container did not get ready: $(cat "$WORK/jc.out")"; return; }
	host=$(awk '{ print $1 }' "/proc/$upid/task/$upid/children")
	PIDS+=("$host")
	prod jc load fn_in_container || return
	doctor "$j" --map-dir "$d" --run-dir "$WORK/no-run" "$host"
	check "container: jitdump_no_map alone (got $(codes "$j"))" [ "$(codes "$j")" = "jitdump_no_map:warning:1" ]
	jq_is "container: the dump read through its root, named for its pid there" "$j" \
		".jitdump | .path == \"/proc/$host/root/tmp/jit-1.dump\" and .named_pid == 1 and .header_pid == 1 and .functions == 1"
	"$CTL" jitdump "/proc/$host/root/tmp/jit-1.dump" -o "$d/perf-$host.map" 2>/dev/null
	check "container: the fix's perfmapctl jitdump names its function" grep -q " fn_in_container\$" "$d/perf-$host.map"
	exec {PFD[jc]}>&-
	kill -9 "$host" 2>/dev/null
	wait "$upid" 2>/dev/null
}

# With the agent: the map it writes from the dump, and a producer's own map left alone.
test_jitdump_agent() {
	local d dumps run=$WORK/agent-run j=$WORK/ja.json t=$WORK/ja.txt m own
	d=$(new_dir) dumps=$(new_dir)
	mkdir -p "$run"
	if ! start_agent "$WORK/agent.log" --map-dir "$d" --run-dir "$run" --archive-dir "$WORK/archive"; then
		skip "perfmapd did not start here: $(grep -m1 -i 'error\|cannot' "$WORK/agent.log")"
		return
	fi
	prod_start ja "$JITPROD" "$dumps" || return
	m=$d/perf-$PROD.map
	prod ja load fn_alpha && prod ja load fn_beta || return
	check "the agent wrote $m from the dump" wait_for 10 grep -qs " fn_beta\$" "$m"
	doctor "$j" --map-dir "$d" --run-dir "$run" "$PROD"
	check "map written by perfmapd: healthy, exit 0 (got $RC; $(codes "$j"))" [ "$RC" = 0 ]
	jq_is "the dump's map is written by perfmapd, as its status says" "$j" \
		'.jitdump.map == "written" and .jitdump.functions == 2 and .agent.jitdump.map == "written" and .agent.jitdump.maps_written == 1 and .agent.jitdump.stopped == false and .map.entries == 2'
	"$CTL" doctor --map-dir "$d" --run-dir "$run" "$PROD" >"$t"
	check "table: written by perfmapd" grep -qx "  perf map   written by perfmapd: $m (1 map written from the dump)" "$t"
	check "table: the agent's line for the dump" grep -qE "^  this jitdump        [0-9]+ records, 2 functions; map written, 1 written; stopped: no\$" "$t"
	prod_end ja

	# A process writing its own map beside its dump keeps it: the doctor says which case.
	prod_start jo "$JITPROD" "$dumps" || return
	m=$d/perf-$PROD.map
	prod jo region || return
	own=$(awk '$1 == "region" { print $2 }' "$WORK/jo.out")
	printf '%x 100 own_fn\n' $((own + 0x80000)) >"$m"
	chmod 600 "$m"
	prod jo load fn_dumped || return
	check "the agent takes the map for the process's own" \
		wait_for 10 eval '"$CTL" status --all --map-dir "$d" --run-dir "$run" | grep -q "^jitdump_$PROD: .* map=own_map "'
	doctor "$j" --map-dir "$d" --run-dir "$run" "$PROD"
	jq_is "its own map: said so, left as it was" "$j" \
		'.jitdump.map == "own_map" and .agent.jitdump.map == "own_map" and .map.entries == 1 and ([.findings[].code] | index("jitdump_no_map") | not)'
	"$CTL" doctor --map-dir "$d" --run-dir "$run" "$PROD" >"$t"
	check "table: the process's own map" \
		grep -qx "  perf map   the process's own: it writes $m itself, and perfmapd leaves it untouched" "$t"
	check "its map untouched" grep -qx "$(printf '%x' $((own + 0x80000))) 100 own_fn" "$m"
	prod_end jo
	stop_agent || fail "perfmapd exited non-zero"
}

# A sanitized build (BUILD_DIR=build/asan-agent): a report from perfmapctl fails the scenario.
scenario_done() { sanitizer_check; }

pick_scenarios "$0" "$@"
run_scenarios "doctor"
