#!/usr/bin/env bash
# Jitdumps (issue 22): the real agent writing perf maps for live jitdump
# producers: a test producer (tests/jitdump/jitprod.c) driven step by step,
# CPython 3.13 -X perf_jit with a multiprocessing fork pool, Node 20
# --perf-prof; perf report/script without inject against perf inject -j,
# bpftrace ustack; hostile dumps from uid 65534.
#
#   tests/jitdump/run.sh BUILD_DIR [SCENARIO...]
#
# Every test_* function is a scenario; each check records a pass or a fail,
# a scenario that cannot run here says SKIPPED, and one that asserted
# nothing fails. Producers are driven through a FIFO and answer one line per
# command: every wait is for the condition checked, with a deadline.
#
# Needs root and BPF: without them it FAILS with the reason, unless
# PERFMAPD_SKIP_BPF=1, which skips it with a loud banner.
set -u
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SCENARIO...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/pmjd.XXXXXX)
. "$HERE/../agent/lib.sh"
. "$HERE/prod.sh"
if [ -z "${RUN_DIR:-}" ]; then
	RUN_DIR=$WORK/run
	PERFMAPD_TEST_AGENT_ARGS="--run-dir $RUN_DIR ${PERFMAPD_TEST_AGENT_ARGS:-}"
fi

JITPROD=$WORK/bin/jitprod   # where uid 65534 can run it
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
TMP_FILES=()  # what a scenario made in the real /tmp, removed at exit
CONTAINERS=() # podman containers, removed at exit

cleanup() {
	local p
	for p in "${PROD_JOBS[@]}"; do
		pkill -9 -P "$p" 2>/dev/null
		kill -9 "$p" 2>/dev/null
	done
	for p in "${CONTAINERS[@]}"; do
		podman rm -f -t 0 "$p" >/dev/null 2>&1
	done
	cleanup_agent
	for p in $(pgrep -u 65534 -f "$WORK/" 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done
	[ ${#TMP_FILES[@]} -eq 0 ] || rm -f "${TMP_FILES[@]}"
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapd jitdump tests"

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
	grep -q "exec maps: from perf-mmap2" "$log" ||
		{ say "FAIL: the agent reads no mmap reports here: $(grep -m1 'exec maps' "$log")"; exit 1; }
	stop_agent || { say "FAIL: preflight: perfmapd exited non-zero after SIGTERM"; exit 1; }
	sanitizer_check
	[ $FAILS -eq 0 ] || exit 1
}

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
# lacks FILE WORD: FILE has no line with WORD.
lacks() { ! grep -qs "$2" "$1"; }
# archived ARCHIVE PID PATTERN: an archived map of PID holds PATTERN.
archived() { grep -qs "$3" "$1"/perf-"$2"-*.map; }

# ---- producers, driven through a FIFO (tests/jitdump/prod.sh) ----

addr_of() { awk -v n="$2" '$2 == n { sub(/^0x/, "", $3); print $3 }' "$WORK/$1.out" | tail -1; }
# line_is MAP ADDR NAME: MAP has exactly the line "ADDR 100 NAME" (jitprod's slots are 256 bytes).
line_is() { grep -qx "$2 100 $3" "$1" 2>/dev/null; }
names_are() { [ "$(awk '{ print $3 }' "$1" 2>/dev/null | sort | tr '\n' ' ')" = "$2" ]; }
status_line() { "$BUILD/perfmapctl" status --all --map-dir "$1" --run-dir "$RUN_DIR" | grep "^jitdump_$2: "; }
status_has() { status_line "$1" "$2" | grep -q "$3"; }

# The agent answers a status request at all (within the caller's timeout).
answers() { timeout 5 "$BUILD/perfmapctl" status --map-dir "$d" --run-dir "$RUN_DIR" >/dev/null; }

# ---- scenarios ----

# A producer's map, as the dump grows: loads, a move, a reload over a live
# range, a torn record, debug info, a child writing into the parent's dump;
# its ownership, its form, and its life after the exit.
test_producer() {
	local d a m a_addr b_addr t_addr child cm mode before
	start_scenario producer producer --retention 2s || return
	prod_start p "${NOBODY[@]}" "$JITPROD" "$WORK/dumps-nobody" || return
	m=$d/perf-$PROD.map
	prod p load fn_alpha
	prod p load fn_beta
	a_addr=$(addr_of p fn_alpha)
	b_addr=$(addr_of p fn_beta)
	check "producer: the agent wrote $m with both loads" \
		wait_for 10 eval 'line_is "$m" "$a_addr" fn_alpha && line_is "$m" "$b_addr" fn_beta'
	mode=$(stat -c '%U %a' "$m" 2>/dev/null)
	check "producer: the map is the producer's, 0600 ($mode)" test "$mode" = "nobody 600"
	check "producer: perfmapctl check says every consumer reads it" "$BUILD/perfmapctl" check "$m"
	prod p move fn_alpha
	check "producer: a move names the new range and no longer the old" \
		wait_for 10 eval 'line_is "$m" "$(addr_of p fn_alpha)" fn_alpha && ! grep -q "^$a_addr " "$m"'
	prod p reload fn_beta fn_gamma
	check "producer: a load over a live range replaces its name" \
		wait_for 10 eval 'line_is "$m" "$b_addr" fn_gamma && ! grep -q " fn_beta$" "$m"'
	check "producer: both counted as rewrites" status_ge "$d" jitdump_maps_rewritten 1
	prod p debug fn_gamma
	prod p torn fn_torn
	check "producer: a torn last record waits (torn_bytes shown, not in the map)" \
		wait_for 10 eval 'status_line "$d" "$PROD" | grep -q "torn_bytes=[1-9]" && ! grep -q fn_torn "$m"'
	check "producer: debug info counted" status_has "$d" "$PROD" "debug_info=1"
	prod p finish
	t_addr=$(addr_of p fn_torn)
	check "producer: once whole, it is named" wait_for 10 line_is "$m" "$t_addr" fn_torn
	prod p fork 2
	child=$(prod_reply p | awk '{ print $2 }')
	cm=$d/perf-$child.map
	check "producer: the forked child's map has its parent's entries, then its own from the parent's dump" \
		wait_for 10 eval 'names_are "$cm" "child_fn_0 child_fn_1 fn_alpha fn_gamma fn_torn "'
	check "producer: the child's records are not in the parent's map" lacks "$m" child_fn_
	check "producer: the child's map is its own too" test "$(stat -c %U "$cm")" = nobody
	check "producer: status says the map is written for it" status_has "$d" "$PROD" "map=written"
	check "producer: the written maps read clean" "$BUILD/perfmapctl" check "$m" "$cm"
	before=$(cat "$m")
	prod_end p
	check "producer: after the exit the map stays for the retention, whole" \
		wait_for 10 eval '! alive "$PROD" && [ "$(cat "$m" 2>/dev/null)" = "$before" ]'
	check "producer: then it is archived with its entries" \
		wait_for 20 eval '[ ! -e "$m" ] && archived "$a" "$PROD" fn_torn'
	check "producer: the dump itself, outside the map directory, is left where it is" test -s "$DUMP"
	stop_agent || fail "producer: perfmapd exited non-zero"
}

# An exec ends the image that wrote the dump: what it wrote last is in its
# map, which goes to the archive as the old image's; nothing more is written.
test_exec() {
	local d a m
	start_scenario exec exec || return
	prod_start x "$JITPROD" "$WORK/dumps" || return
	m=$d/perf-$PROD.map
	prod x load before_exec_1
	check "exec: the map is written" wait_for 10 grep -qs " before_exec_1$" "$m"
	prod x load before_exec_2
	prod x exec /bin/sleep 30
	check "exec: the old image's map goes to the archive with everything it loaded" \
		wait_for 10 eval '[ ! -e "$m" ] && grep -qs " before_exec_2$" "$a"/perf-"$PROD"-*exec*.map'
	check "exec: its dump is read no more (no line for it in the status)" \
		eval '! status_line "$d" "$PROD"'
	check "exec: the new image has no map written for it" test ! -e "$m"
	stop_agent || fail "exec: perfmapd exited non-zero"
}

# A producer that writes its own perf map too keeps it untouched.
test_own_map() {
	local d a m sum
	start_scenario own own_map || return
	prod_start o "$JITPROD" "$WORK/dumps" || return
	m=$d/perf-$PROD.map
	# Its own entry names its own JIT code: a map of the running image's.
	printf '%x 100 own_fn\n' $(( $(prod o region && prod_reply o | awk '{ print $2 }') + 0x80000 )) >"$m"
	chmod 600 "$m"
	sum=$(md5sum <"$m")
	prod o load fn_dumped
	check "own_map: counted as the process's own" wait_for 10 status_ge "$d" jitdump_own_maps 1
	check "own_map: status says so for it" status_has "$d" "$PROD" "map=own_map"
	prod o load fn_dumped2
	check "own_map: and its map is untouched" \
		wait_for 10 eval 'status_has "$d" "$PROD" "records=2" && [ "$(md5sum <"$m")" = "$sum" ]'
	prod_end o
	stop_agent || fail "own_map: perfmapd exited non-zero"
}

# An exited process's map some consumer misreads (overlapping entries perf's
# lookup misses, 0x-padded lines blazesym refuses whole) is rewritten in
# canonical form at its path for the retention; one still open for writing
# (the test holds it, as a forked child appending would) is left, whole.
test_retained_canonical() {
	local d a m base pid2 m2 wfd
	start_scenario canon retained_canonical --retention 60s || return
	prod_start k "$JITPROD" "$WORK/dumps" || return
	m=$d/perf-$PROD.map
	base=$(( $(prod k region && prod_reply k | awk '{ print $2 }') ))
	printf '0x%016x 0x100 canon_outer\n%x 10 canon_inner\n%x 40 canon_b\n' \
		"$base" $((base + 0x10)) $((base + 0x200)) >"$m"
	chmod 600 "$m"
	check "retained_canonical: the map as written is misread by some consumer" \
		eval '! "$BUILD/perfmapctl" check "$m" >/dev/null 2>&1'
	prod_end k
	check "retained_canonical: after the exit it is rewritten (counted)" \
		wait_for 10 status_ge "$d" retained_canonical 1
	check "retained_canonical: every consumer reads it now, at its path" "$BUILD/perfmapctl" check "$m"
	check "retained_canonical: every name is still in it" \
		eval 'grep -q " canon_outer$" "$m" && grep -q " canon_inner$" "$m" && grep -q " canon_b$" "$m"'
	check "retained_canonical: still the producer's, 0600" test "$(stat -c %a "$m")" = 600
	# The same, held open for writing by another process meanwhile.
	prod_start k2 "$JITPROD" "$WORK/dumps" || return
	pid2=$PROD
	m2=$d/perf-$pid2.map
	base=$(( $(prod k2 region && prod_reply k2 | awk '{ print $2 }') ))
	printf '0x%016x 0x100 held_outer\n%x 10 held_inner\n' "$base" $((base + 0x10)) >"$m2"
	exec {wfd}>>"$m2"
	prod_end k2
	check "retained_canonical: a map open for writing is left (counted)" \
		wait_for 10 status_ge "$d" retained_canonical_busy 1
	printf '%x 20 held_later\n' $((base + 0x400)) >&"$wfd"
	exec {wfd}>&-
	check "retained_canonical: and its later writer's lines land in it, at its path" \
		eval 'grep -q " held_later$" "$m2" && grep -q "^0x" "$m2"'
	stop_agent || fail "retained_canonical: perfmapd exited non-zero"
}

# A dump its runtime wrote in the map directory itself (as CPython's /tmp/jit-<pid>.dump
# with /tmp the map directory): retained with its map, then archived with it, as it
# was, beside the map's archived name; perfmapctl restore brings both back, and the
# agent deletes the restored pair after their retention rather than archive it twice.
test_dump_archived() {
	local d a pid m dump sum mname dname out=$WORK/dump_archived.out
	start_scenario dumparch dump_archived --retention 2s || return
	prod_start da "$JITPROD" "$d" || return
	pid=$PROD
	m=$d/perf-$pid.map
	dump=$d/jit-$pid.dump
	check "dump_archived: jitprod writes its dump in the map directory ($DUMP)" test "$DUMP" = "$dump"
	prod da load fn_kept
	prod da load fn_kept2
	check "dump_archived: the agent wrote the map" \
		wait_for 10 eval 'line_is "$m" "$(addr_of da fn_kept)" fn_kept && line_is "$m" "$(addr_of da fn_kept2)" fn_kept2'
	prod_end da
	check "dump_archived: the producer exited" wait_for 10 gone "$pid"
	sum=$(md5sum <"$dump")
	check "dump_archived: for the retention the dump stays beside its map" test -s "$dump" -a -s "$m"
	check "dump_archived: then both are archived" \
		wait_for 20 eval '[ ! -e "$m" ] && [ ! -e "$dump" ] && archived "$a" "$pid" fn_kept2 && ls "$a"/jit-"$pid"-*.dump >/dev/null 2>&1'
	mname=$(cd "$a" && ls perf-"$pid"-*.map 2>/dev/null | head -1)
	dname=$(cd "$a" && ls jit-"$pid"-*.dump 2>/dev/null | head -1)
	check "dump_archived: the dump beside the map's archived name ($mname, $dname)" \
		test "jit-${mname#perf-}" = "${dname%.dump}.map"
	check "dump_archived: stored as it was, byte for byte" test "$(md5sum <"$a/$dname")" = "$sum"
	check "dump_archived: counted" status_ge "$d" archive_jitdumps_stored 1
	check "dump_archived: nothing left staged" eval '[ -z "$(ls -A "$d" | grep "^\.perfmapd\.")" ]'
	"$BUILD/perfmapctl" restore --archive-dir "$a" --map-dir "$d" "$pid" >"$out" 2>&1
	check "dump_archived: perfmapctl restore brings the map back" grep -qs " fn_kept2$" "$m"
	check "dump_archived: and the dump beside it, byte for byte" test "$(md5sum <"$dump" 2>/dev/null)" = "$sum"
	check "dump_archived: said so ($(tr '\n' ' ' <"$out"))" grep -q "wrote $dump from $dname" "$out"
	check "dump_archived: the dump is the map owner's, 0600" \
		test "$(stat -c '%u %a' "$dump" 2>/dev/null)" = "$(stat -c %u "$m" 2>/dev/null) 600"
	# Marked as restored (not where the file system keeps no user.* attributes): deleted, not archived.
	if python3 -c 'import os, sys; os.getxattr(sys.argv[1], "user.perfmapd.restored")' "$dump" 2>/dev/null; then
		check "dump_archived: after their retention the restored pair is deleted, not archived again" \
			wait_for 20 eval '[ ! -e "$m" ] && [ ! -e "$dump" ] && status_ge "$d" archive_jitdumps_restored_dropped 1'
		check "dump_archived: the archive still holds one of each" \
			test "$(ls "$a" | grep -c "^perf-$pid-\|^jit-$pid-")" = 2
	fi
	stop_agent || fail "dump_archived: perfmapd exited non-zero"
}

# The share of samples in PERF_DATA (perf script) named NAME_RE; -1 under 50 samples.
named_pct() {
	perf script -i "$1" -F ip,sym 2>/dev/null |
		awk -v re="$2" '{ n++ } $2 ~ re { j++ } END { if (n < 50) print -1; else printf "%d\n", 100 * j / n }'
}
# The names perf script gives the samples of PERF_DATA matching NAME_RE, sorted, once each.
sample_names() { perf script -i "$1" -F sym 2>/dev/null | awk -v re="$2" '$1 ~ re { print $1 }' | sort -u | tr '\n' ' '; }

# perf without inject names a producer's samples from the agent's map, as
# perf inject -j names them; bpftrace's ustack too. On /tmp: perf and bcc
# look there.
test_consumers() {
	local d a i pct ipct names inames data=$WORK/perf.data out
	command -v perf >/dev/null || { fail "consumers: perf is not installed (Debian: linux-perf)"; return; }
	start_agent "$WORK/consumers.log" --map-dir /tmp --archive-dir "$WORK/archive-consumers" ||
		{ fail "consumers: perfmapd did not start on /tmp"; return; }
	d=/tmp
	prod_start c "$JITPROD" "$WORK/dumps" || return
	TMP_FILES+=("/tmp/perf-$PROD.map")
	for i in 1 2 3 4; do
		prod c load "jd_hot_$i"
	done
	check "consumers: the agent wrote the map" wait_for 10 eval '[ "$(grep -c " jd_hot_" "/tmp/perf-$PROD.map" 2>/dev/null)" = 4 ]'
	perf record -q -k mono -F 499 -e cpu-clock -p "$PROD" -o "$data" >/dev/null 2>&1 &
	local rec=$!
	wait_for 5 test -s "$data"
	prod c run 2000
	kill -INT "$rec"
	wait "$rec"
	pct=$(named_pct "$data" '^jd_hot_')
	check "consumers: perf script without inject names ${pct}% of the samples jd_hot_* (>= 90)" \
		test "$pct" -ge 90
	names=$(sample_names "$data" '^jd_hot_')
	out=$(HOME=$WORK/home perf inject -j -i "$data" -o "$WORK/injected.data" 2>&1)
	ipct=$(HOME=$WORK/home named_pct "$WORK/injected.data" '^jd_hot_')
	inames=$(HOME=$WORK/home sample_names "$WORK/injected.data" '^jd_hot_')
	say "  perf inject -j: ${ipct}% named; names: $inames; without inject: $names"
	check "consumers: perf inject -j names them too (${ipct}%): the dump is right" test "$ipct" -ge 90
	check "consumers: and the same functions, by the same names" test "$names" = "$inames"
	perf report -i "$data" --stdio --sort sym 2>/dev/null >"$WORK/report.txt"
	check "consumers: perf report without inject lists them" grep -q "jd_hot_1" "$WORK/report.txt"
	if command -v bpftrace >/dev/null; then
		timeout 20 bpftrace -q -e "profile:hz:199 /pid == $PROD/ { @[ustack(1)] = count(); } interval:s:2 { exit(); }" \
			>"$WORK/bpftrace.out" 2>&1 &
		local bt=$!
		prod c run 3000
		wait "$bt"
		check "consumers: bpftrace ustack names them" grep -q "jd_hot_" "$WORK/bpftrace.out" ||
			head -20 "$WORK/bpftrace.out"
	else
		fail "consumers: bpftrace is not installed (Debian: bpftrace)"
	fi
	prod_end c
	stop_agent || fail "consumers: perfmapd exited non-zero"
}

# CPython 3.13+ -X perf_jit: the parent's map, and a fork pool's workers
# running functions compiled in the parent named in theirs.
test_cpython() {
	local d a py parent w workers=() ok
	py=$(find_python 13)
	[ -n "$py" ] || { skip "no CPython 3.13+ on this machine (-X perf_jit)"; return; }
	start_scenario cpython cpython || return
	prod_start py "$py" -X perf_jit "$HERE/fork_pool.py" || return
	parent=$PROD
	wait_for 30 grep -q "^workers " "$WORK/py.out" || { fail "cpython: no workers: $(tail -3 "$WORK/py.out")"; return; }
	read -r -a workers <<<"$(awk '$1 == "workers" { $1 = ""; print }' "$WORK/py.out")"
	# CPython writes its dumps in /tmp, whatever the directory.
	TMP_FILES+=("/tmp/jit-$parent.dump")
	for w in $(awk '$1 == "pool" { $1 = ""; print }' "$WORK/py.out"); do TMP_FILES+=("/tmp/jit-$w.dump"); done
	check "cpython: $("$py" -V 2>&1) -X perf_jit: the parent's map names its functions" \
		wait_for 10 grep -qs "py::parent_hot:" "$d/perf-$parent.map"
	for w in "${workers[@]}"; do
		check "cpython: worker $w's map names the functions compiled in the parent" \
			wait_for 10 grep -qs "py::parent_hot:" "$d/perf-$w.map"
		check "cpython: and the function only it compiled" \
			wait_for 10 grep -qs "py::child_only_$w:" "$d/perf-$w.map"
	done
	# CPython writes its dump through stdio's buffer: the parent's functions may reach
	# the dump (and its map) only after the fork, and each worker names them in its own
	# dump again. Either way perfmapd wrote every map: a fork copy adopted, or made.
	local adopted created
	adopted=$(status_of "$d" jitdump_maps_adopted) created=$(status_of "$d" jitdump_maps_created)
	check "cpython: the parent's and the workers' maps written from their dumps ($adopted fork copies adopted, $created made)" \
		test $((adopted + created)) -ge $((${#workers[@]} + 1))
	check "cpython: every written map reads clean" "$BUILD/perfmapctl" check "$d/perf-$parent.map"
	prod_end py
	stop_agent || fail "cpython: perfmapd exited non-zero"
}

# Node 20 --perf-prof: its dump is in its working directory; with
# --perf-basic-prof too, it writes its own map, which stays its own.
test_node() {
	local d a m pid
	command -v node >/dev/null || { skip "no node on this machine"; return; }
	start_scenario node node || return
	mkdir -p "$WORK/node"
	(cd "$WORK/node" && exec node --perf-prof --interpreted-frames-native-stack "$HERE/hot.js" 4000 >"$WORK/node.out" 2>&1) &
	PROD_JOBS+=($!)
	pid=$!
	m=$d/perf-$pid.map
	check "node: $(node --version) --perf-prof: the agent wrote a map for its dump in its working directory" \
		wait_for 15 grep -qs "hotLoop" "$m"
	check "node: the map reads clean" "$BUILD/perfmapctl" check "$m"
	wait "$pid"
	check "node: the agent said where it found the dump" grep -q "jitdump $pid (node): reading $WORK/node/jit-$pid.dump" "$AGENT_LOG"
	stop_agent || fail "node: perfmapd exited non-zero"
	# Both flags: its own map in /tmp (Node writes there whatever the agent's directory).
	start_agent "$WORK/node2.log" --map-dir /tmp --archive-dir "$WORK/archive-node2" ||
		{ fail "node: perfmapd did not start on /tmp"; return; }
	(cd "$WORK/node" && exec node --perf-prof --perf-basic-prof "$HERE/hot.js" 3000 >"$WORK/node2.out" 2>&1) &
	PROD_JOBS+=($!)
	pid=$!
	TMP_FILES+=("/tmp/perf-$pid.map")
	check "node: with --perf-basic-prof too, its own map is left to it (said)" \
		wait_for 15 eval 'grep -q "jitdump $pid: /tmp/perf-$pid.map is the process'"'"'s own map" "$AGENT_LOG"'
	check "node: status says so" status_has /tmp "$pid" "map=own_map"
	wait "$pid"
	stop_agent || fail "node: perfmapd exited non-zero"
}

# A producer in a podman container: its dump in the container's own /tmp,
# its pid 1 there; the map written at its host pid's path.
test_container() {
	local d a root hp ctr=pmjd-$$
	command -v podman >/dev/null || { fail "container: podman is not installed"; return; }
	start_scenario container container || return
	root=$WORK/rootfs
	"$HERE/../containers/mkrootfs.sh" "$root" "$BUILD/tests/jitprod-static" || { fail "container: no root file system"; return; }
	CONTAINERS+=("$ctr")
	prod_start ctr podman --runtime runc --cgroup-manager cgroupfs run -i --rm --network none \
		--ulimit nofile=1024:1024 --ulimit nproc=1000:1000 --name "$ctr" --rootfs "$root" /bin/jitprod /tmp ||
		{ fail "container: podman run failed: $(head -c 300 "$WORK/ctr.out")"; return; }
	hp=$(podman inspect -f '{{.State.Pid}}' "$ctr")
	check "container: the producer is pid $PROD in its container ($DUMP), $hp on the host" \
		test "$PROD" != "$hp"
	prod ctr load ctr_fn
	prod ctr load ctr_fn2
	check "container: its map is written at its host pid's path" \
		wait_for 10 eval 'names_are "$d/perf-$hp.map" "ctr_fn ctr_fn2 "'
	check "container: the dump was found in the container's root" \
		grep -q "jitdump $hp (jitprod): reading /tmp/jit-$PROD.dump (in its own namespaces)" "$AGENT_LOG"
	check "container: the dump in its /tmp is left where it is" test -s "$root/tmp/jit-$PROD.dump"
	prod_end ctr
	stop_agent || fail "container: perfmapd exited non-zero"
}

# hostile NAME PRODUCER_ARGS -- COMMANDS...: a dump of uid 65534's; waits for
# COUNTER to move; no map is written for it, and the agent answers.
hostile() {
	local name=$1 counter=$2 before
	shift 2
	local args=() cmds=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	cmds=("$@")
	before=$(status_of "$d" "$counter")
	prod_start "$name" "${NOBODY[@]}" "$JITPROD" "$WORK/hostile" "${args[@]}" ||
		{ fail "hostile: $name: jitprod did not start"; return; }
	local c
	for c in "${cmds[@]}"; do
		prod "$name" "$c"
	done
	check "hostile: $name: refused and counted ($counter)" wait_for 10 status_ge "$d" "$counter" $((before + 1))
	check "hostile: $name: no map written for it" test ! -e "$d/perf-$PROD.map"
	check "hostile: $name: the agent answers" answers
	prod_end "$name"
}

test_hostile() {
	local d a hwm0 hwm1 i t0 slow=0
	start_scenario hostile hostile || return
	mkdir -p "$WORK/hostile" && chown 65534:65534 "$WORK/hostile"
	hostile size0 jitdump_malformed -- "rawrec 0 0"
	hostile size4g jitdump_malformed -- "rawrec 0 0xffffffff"
	hostile nonul jitdump_malformed -- nonul
	hostile hugecode jitdump_malformed -- hugecode
	hostile header_pid jitdump_malformed --header-pid 1 -- "load fn_lie"
	hostile symlink jitdump_refused --swap symlink --
	hostile fifo jitdump_refused --swap fifo --
	hostile_other
	check "hostile: each malformed dump counted by its reason in the status" \
		eval '"$BUILD/perfmapctl" status --all --map-dir "$d" --run-dir "$RUN_DIR" | grep "^jitdump_stops: " |
			grep -q "record_too_small=1 record_too_large=1 name_unterminated=1 code_size=1 pid_mismatch=1"'
	hostile_userns
	# A dump growing without end: records the agent reads a bounded share of a tick,
	# answering all the while, its memory bounded.
	prod_start flood "${NOBODY[@]}" "$JITPROD" "$WORK/hostile" || return
	hwm0=$(awk '/^VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
	for i in 1 2 3 4 5; do
		prod flood "flood 2000000"
		t0=$(date +%s%N)
		answers || slow=$((slow + 1))
		[ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 2000 ] || slow=$((slow + 1))
	done
	hwm1=$(awk '/^VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
	check "hostile: flood: the agent answered within 2 s each time ($slow slow)" test "$slow" = 0
	check "hostile: flood: its records are read, a bounded share a tick ($(status_of "$d" jitdump_records))" \
		wait_for 20 status_ge "$d" jitdump_records 500000 || status_line "$d" "$PROD"
	check "hostile: flood: its memory stayed bounded (RSS ${hwm0} -> ${hwm1} KiB)" test $((hwm1 - hwm0)) -lt 20480
	check "hostile: flood: no map" test ! -e "$d/perf-$PROD.map"
	prod_end flood
	check "hostile: every refusal said in the log, no raw control byte in it" \
		eval 'grep -q "jitdump .*is a symlink, refused" "$AGENT_LOG" && ! grep -qP "[\x00-\x08\x0b-\x1f]" "$AGENT_LOG"'
	stop_agent || fail "hostile: perfmapd exited non-zero"
}

# uid 65534 in its own user, mount and pid namespaces (unshare -Urpm), where
# it may mount: root's readable file bind-mounted at the name its producer
# (pid 1 there) maps. Refused, never read, nothing written.
hostile_userns() {
	local before pid dir=$WORK/hostile-userns
	before=$(status_of "$d" jitdump_refused)
	mkdir -p "$dir" && chown 65534:65534 "$dir"
	prod_start userns "${NOBODY[@]}" unshare -Urpm --fork --kill-child sh -c \
		'touch "$1/jit-1.dump" && mount --bind /etc/hostname "$1/jit-1.dump" && exec "$0" "$1" --existing' \
		"$JITPROD" "$dir" || return
	pid=$(pgrep -u 65534 -f -n "^$JITPROD $dir --existing")
	check "hostile: userns bind mount: the producer is pid $PROD in its namespace ($DUMP), ${pid:-none} on the host" \
		eval '[ "$PROD" = 1 ] && [ -n "$pid" ]'
	check "hostile: userns bind mount: refused and counted" wait_for 10 status_ge "$d" jitdump_refused $((before + 1))
	check "hostile: userns bind mount: said, and nothing written for it" \
		eval 'grep -q "jitdump $pid: .*jit-1.dump" "$AGENT_LOG" && [ ! -e "$d/perf-$pid.map" ]'
	prod_end userns
}

# Another user's (root's) dump, world-readable, at the name uid 65534's
# producer maps: its pid is known first (the shell that execs it), then the
# file is made, then it maps it.
hostile_other() {
	local before fd pid dir=$WORK/hostile-other
	before=$(status_of "$d" jitdump_refused)
	mkdir -p "$dir" && chmod 755 "$dir"
	mkfifo -m 0644 "$WORK/other.in"
	"${NOBODY[@]}" bash -c 'echo "pid $$"; read -r _; exec "$0" "$1" --existing' "$JITPROD" "$dir" \
		<"$WORK/other.in" >"$WORK/other.out" 2>&1 &
	PROD_JOBS+=($!)
	exec {fd}>"$WORK/other.in"
	wait_for 10 grep -q "^pid " "$WORK/other.out" || return
	pid=$(awk '$1 == "pid" { print $2 }' "$WORK/other.out")
	python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40, 62, 0, int(sys.argv[2]), 1, 0))' \
		"$dir/jit-$pid.dump" "$pid"
	chmod 644 "$dir/jit-$pid.dump"
	echo go >&"$fd"
	wait_for 10 grep -q "^ready" "$WORK/other.out" || { fail "hostile: other: jitprod did not map it: $(cat "$WORK/other.out")"; return; }
	check "hostile: another user's file: refused and counted" wait_for 10 status_ge "$d" jitdump_refused $((before + 1))
	check "hostile: another user's file: no map written for it" test ! -e "$d/perf-$pid.map"
	check "hostile: another user's file: said" grep -q "jitdump $pid: .*is owned by another uid" "$AGENT_LOG"
	echo exit >&"$fd"
	exec {fd}>&-
}

# ---- running them ----

scenario_done() {
	local p
	for p in "${PROD_JOBS[@]}"; do
		pkill -9 -P "$p" 2>/dev/null
		kill -9 "$p" 2>/dev/null
	done
	PROD_JOBS=()
	cleanup_agent
	sanitizer_check
}

pick_scenarios "$0" "$@"
mkdir -p "$WORK/bin" "$WORK/dumps" "$WORK/dumps-nobody" "$WORK/home"
cp "$BUILD/tests/jitprod" "$JITPROD"
chmod 755 "$WORK/bin" "$JITPROD"
chmod 711 "$WORK"
chown 65534:65534 "$WORK/dumps-nobody"
preflight
run_scenarios "jitdump tests"
