#!/usr/bin/env bash
# Container tests of perfmapd (issue 10): real podman containers (runc, a root
# made here from a statically linked test JIT, no image registry) and unshare(1)
# namespaces, against the real agent.
#
#   tests/containers/run.sh BUILD_DIR [SCENARIO...]
#
# Every function named test_* below is a scenario; with no names, all run, in
# the order they are defined. Each check records a pass or a fail; a scenario
# that recorded nothing fails. Each agent has its own map, run and archive
# directories under one private directory in /var/tmp; the containers' roots
# are made there too. Every container, namespace and process a scenario starts
# is removed when it ends, and on any exit.
#
# Needs root, a kernel that loads BPF tracepoint programs, podman and runc
# (`make deps`). Where BPF cannot load it FAILS, unless PERFMAPD_SKIP_BPF=1;
# without podman or runc it FAILS, unless PERFMAPD_SKIP_CONTAINERS=1; either
# skips with a loud banner.
set -u
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SCENARIO...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/pmctr.XXXXXX)  # short: the socket path holds it
. "$HERE/../agent/lib.sh"

FORKJIT=$BUILD/tests/forkjit
FORKJIT_STATIC=$BUILD/tests/forkjit-static
PIDAT=$BUILD/tests/pidat
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
# A container whose root is a directory: rlimits within the hard ones, no network to set up.
PODMAN_RUN=(run -d --network none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000)
CTR_PREFIX=pmctr-${WORK##*.}  # this run's container names
CONTAINERS=()                 # names, removed at the scenario's end and at exit
BG_PIDS=()                    # namespaces' processes and helpers, killed likewise
HOLD_MS=600000                # a JIT that holds is killed by the test, not by time
# A JIT started by an exec (runc's, unshare's, pidat's) writes its map at once,
# often before the agent has handled that exec: the lines it wrote then must
# begin its new mirror (the race is the agent's to win). STARTUP_MS=300 gives
# the JITs a runtime's start-up instead, to look at one case at a time.
STARTUP_MS=${STARTUP_MS:-0}

kill_started() {
	local c
	for c in "${CONTAINERS[@]}"; do
		"${PODMAN[@]}" rm -f -t 0 "$c" >/dev/null 2>&1
	done
	CONTAINERS=()
	kill_all "${BG_PIDS[@]}"
	BG_PIDS=()
}
cleanup() {
	kill_started
	! declare -F rootless_done >/dev/null || rootless_done
	cleanup_agent
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapd container tests"  # what skip_or_fail() (lib.sh) names

# No podman or runc: a failure, or with PERFMAPD_SKIP_CONTAINERS=1 a loud skip.
skip_or_fail_containers() {
	if [ "${PERFMAPD_SKIP_CONTAINERS:-}" = 1 ]; then
		banner "SKIPPED: $SUITE: $1 (PERFMAPD_SKIP_CONTAINERS=1)"
		exit 0
	fi
	say "FAIL: $SUITE cannot run: $1"
	say "      (run 'make deps', or set PERFMAPD_SKIP_CONTAINERS=1 to skip)"
	exit 1
}

preflight() {
	local d log=$WORK/preflight.log r out
	[ "$(id -u)" = 0 ] || skip_or_fail "not root: BPF programs cannot be loaded"
	[ -r /sys/kernel/btf/vmlinux ] || skip_or_fail "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
	command -v podman >/dev/null || skip_or_fail_containers "podman is not installed"
	command -v runc >/dev/null || skip_or_fail_containers "runc is not installed"
	for b in "$FORKJIT" "$FORKJIT_STATIC" "$PIDAT"; do
		[ -x "$b" ] || { say "FAIL: $b is missing (make container-test builds it)"; exit 1; }
	done
	r=$WORK/rootfs-preflight
	"$HERE/mkrootfs.sh" "$r" "$FORKJIT_STATIC" || { say "FAIL: cannot build a container root"; exit 1; }
	out=$("${PODMAN[@]}" run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 \
		--rootfs "$r" /bin/forkjit --dir /tmp --entries 1 2>&1) ||
		{ say "FAIL: podman cannot run a container from a directory here: $out"; exit 1; }
	d=$(new_map_dir)
	RUN_DIR=$WORK/run-preflight
	if ! start_agent "$log" --map-dir "$d" --run-dir "$RUN_DIR" --archive-dir "$WORK/preflight-archive"; then
		grep -q "bpf: cannot load" "$log" &&
			skip_or_fail "perfmapd could not load its BPF program: $(grep -m1 'bpf: cannot load' "$log")"
		say "FAIL: perfmapd did not start, and not for BPF: $(grep -m1 error "$log")"
		exit 1
	fi
	stop_agent || { say "FAIL: preflight: perfmapd exited non-zero after SIGTERM"; exit 1; }
	[ $FAILS -eq 0 ] || exit 1
}

# ---- helpers ----

# agent_on NAME LABEL ARGS...: the agent on the caller's $d (made here unless
# set), its archive $a and run directory $RUN_DIR, logging to $WORK/NAME.log.
agent_on() {
	local name=$1 label=$2
	shift 2
	[ -n "${d:-}" ] || d=$(new_map_dir)
	a=$WORK/archive-$name
	RUN_DIR=$WORK/run-$name
	start_agent "$WORK/$name.log" --map-dir "$d" --run-dir "$RUN_DIR" --archive-dir "$a" "$@" ||
		{ fail "$label: perfmapd did not start: $(grep -m1 -i 'error\|usage\|unknown\|unrecognized' "$WORK/$name.log")"; return 1; }
}

# new_rootfs NAME: a container root with the static test JIT as /bin/forkjit; prints its path.
new_rootfs() {
	"$HERE/mkrootfs.sh" "$WORK/rootfs-$1" "$FORKJIT_STATIC" >&2 && echo "$WORK/rootfs-$1"
}

# ctr_run NAME ROOTFS [PODMAN OPTION...] -- CMD...: a detached container named
# $CTR_PREFIX-NAME (recorded for removal), started when this returns.
ctr_run() {
	local name=$CTR_PREFIX-$1 rootfs=$2 opts=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	CONTAINERS+=("$name")
	"${PODMAN[@]}" "${PODMAN_RUN[@]}" --name "$name" "${opts[@]}" --rootfs "$rootfs" "$@" \
		>"$WORK/ctr-$name.out" 2>&1 ||
		{ say "podman run $name failed: $(cat "$WORK/ctr-$name.out")"; return 1; }
}
ctr_pid() { "${PODMAN[@]}" inspect -f '{{.State.Pid}}' "$CTR_PREFIX-$1"; }
ctr_id() { "${PODMAN[@]}" inspect -f '{{.Id}}' "$CTR_PREFIX-$1"; }
ctr_logs() { "${PODMAN[@]}" logs "$CTR_PREFIX-$1" 2>&1; }
ctr_rm() {
	"${PODMAN[@]}" rm -f -t 0 "$CTR_PREFIX-$1" >/dev/null 2>&1
}
# ctr_exited NAME: podman has seen the container's process exit.
ctr_exited() { [ "$("${PODMAN[@]}" inspect -f '{{.State.Status}}' "$CTR_PREFIX-$1" 2>/dev/null)" = exited ]; }

# The archive's suffix for PID: -c and 12 hex when its cgroup names a
# container (64 hex), else nothing (contract: containers-spec "Exit").
ctr_suffix_of() {
	local id
	id=$(grep -oE '[0-9a-f]{64}' "/proc/$1/cgroup" 2>/dev/null | head -n1)
	[ -n "$id" ] && echo "-c${id:0:12}"
}

nspid_of() { awk '$1 == "NSpid:" { $1 = ""; print substr($0, 2) }' "/proc/$1/status" 2>/dev/null; }
inner_nspid_of() { awk '$1 == "NSpid:" { print $NF }' "/proc/$1/status" 2>/dev/null; }
uid_gid_of() { awk '$1 == "Uid:" { u = $2 } $1 == "Gid:" { g = $2 } END { print u ":" g }' "/proc/$1/status"; }
owner_of() { stat -c '%u:%g' "$1" 2>/dev/null; }
same_inode() { [ "$(stat -L -c '%d:%i' "$1")" = "$(stat -L -c '%d:%i' "$2")" ]; }
# same_map A B: both exist, non-empty, byte for byte equal.
same_map() { [ -s "$1" ] && cmp -s "$1" "$2"; }
# map_has FILE PREFIX N: FILE holds exactly N entries named PREFIX_*.
map_has() { [ "$(grep -c " $2_" "$1" 2>/dev/null)" = "$3" ]; }
# status_sum_gt MAP_DIR KEY1 KEY2 N: KEY1 + KEY2 > N.
status_sum_gt() {
	local x y
	x=$(status_of "$1" "$2")
	y=$(status_of "$1" "$3")
	[ $((${x:-0} + ${y:-0})) -gt "$4" ]
}
# status_line MAP_DIR KEY: the rest of KEY's line in `perfmapctl status --all`.
status_line() {
	"$BUILD/perfmapctl" status --all --map-dir "$1" ${RUN_DIR:+--run-dir "$RUN_DIR"} 2>/dev/null |
		awk -v k="$2:" '$1 == k { $1 = ""; print substr($0, 2) }'
}
status_line_has() { status_line "$1" "$2" | grep -q -- "$3"; }
# The names of a map's entries, sorted: an archive is compacted, not a byte copy.
names_of() { awk '{ print $3 }' "$1" 2>/dev/null | sort; }
same_names() { [ -s "$1" ] && [ "$(names_of "$1")" = "$(names_of "$2")" ]; }
# archive_of ARCHIVE PID SUFFIX: the archived map of PID (named perf-PID-TICKS<SUFFIX>.map).
archive_of() {
	local f
	for f in "$1"/perf-"$2"-*.map; do
		[[ ${f##*/} =~ ^perf-$2-[0-9]+$3\.map$ ]] && { echo "$f"; return 0; }
	done
	return 1
}
archived() { archive_of "$@" >/dev/null; }

# child_with_nspid PARENT NSPID: PARENT's child whose innermost pid is NSPID.
child_with_nspid() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		[ "$(inner_nspid_of "$c")" = "$2" ] && { echo "$c"; return 0; }
	done
	return 1
}
# descendant_named ROOT COMM: the first descendant of ROOT (or ROOT) running COMM.
descendant_named() {
	local p=$1 c
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && { echo "$p"; return 0; }
	for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
		descendant_named "$c" "$2" && return 0
	done
	return 1
}
# A process's pid, once it is there: find_pid VAR SECONDS FUNCTION ARGS...
find_pid() {
	local var=$1 secs=$2
	shift 2
	wait_for "$secs" eval "$var=\$($* 2>/dev/null)"'; [ -n "$'"$var"'" ]'
}
# The map directory's files that hold TOKEN (a canary's), none expected.
leaks() { grep -rls -- "$1" "$d" "$a" 2>/dev/null; }
fingerprint() { stat -c '%s %Y %h %u %a' "$1" && sha256sum <"$1"; }

# ---- scenarios ----

# A containerized JIT's map, mirrored to the host under its host pid while it
# runs and grows, kept after it exits (retention), then archived with the
# container's id, and still there after the container is removed.
test_podman_mirror() {
	local d='' a r pid id mapc mirror i addr arch
	agent_on mirror podman_mirror --retention 3 || return
	r=$(new_rootfs mirror) || { fail "podman_mirror: cannot build the container root"; return; }
	# The JIT writes its map as soon as runc has exec'd it (see STARTUP_MS).
	ctr_run mirror "$r" -- /bin/forkjit --dir /tmp --entries 40 --prefix ctr_mirror --hold-ms "$HOLD_MS" ||
		{ fail "podman_mirror: podman run failed"; return; }
	pid=$(ctr_pid mirror)
	id=$(ctr_id mirror)
	mapc=$r/tmp/perf-1.map
	mirror=$d/perf-$pid.map
	check "podman_mirror: the container's /tmp is its root's own directory, no tmpfs over it" \
		same_inode "$r/tmp" "/proc/$pid/root/tmp"
	check "podman_mirror: the JIT (host pid $pid, NSpid '$(nspid_of "$pid")') wrote 40 entries in its /tmp" \
		wait_for 5 map_has "$mapc" ctr_mirror 40
	check "podman_mirror: the host mirror perf-$pid.map holds exactly the container's map" \
		wait_for 5 same_map "$mirror" "$mapc" || { ls -l "$d"; tail -n 5 "$AGENT_LOG"; }
	check "podman_mirror: the mirror is owned by the process's uid:gid ($(owner_of "$mirror"))" \
		test "$(owner_of "$mirror")" = "$(uid_gid_of "$pid")"
	check "podman_mirror: status: one mirror at least, and mirror_$pid names ns pid 1 and container ${id:0:12}" \
		wait_for 5 eval 'status_ge "$d" mirrors 1 && status_line_has "$d" "mirror_$pid" "ns_pid=1 container=${id:0:12}"'
	check "podman_mirror: the log says 'mirror $pid (forkjit)'" \
		wait_for 5 grep -q "mirror $pid (" "$AGENT_LOG"

	# The JIT names more code later: 10 lines, then one in two writes (half a
	# line must not be mirrored on its own).
	addr=7f0000001000
	for i in $(seq 0 9); do
		printf '%x 20 ctr_mirror_late_%d\n' $((0x$addr + i * 32)) "$i" >>"/proc/$pid/root/tmp/perf-1.map"
	done
	printf '7f0000002000 20 ctr_mirror_split' >>"/proc/$pid/root/tmp/perf-1.map"
	check "podman_mirror: 10 entries appended later are mirrored" \
		wait_for 5 map_has "$mirror" ctr_mirror_late 10
	check "podman_mirror: the mirror holds complete lines only (no half line mirrored)" \
		eval '[ "$(tail -c 1 "$mirror" | od -An -c | tr -d " ")" = "\n" ] && ! grep -q "ctr_mirror_split$" "$mirror"'
	printf '_done\n' >>"/proc/$pid/root/tmp/perf-1.map"
	check "podman_mirror: the line, once complete, is mirrored whole; the mirror equals the map" \
		wait_for 5 same_map "$mirror" "$mapc"

	# Exit: the container's process dies; its root (a host directory) keeps the map.
	kill -KILL "$pid"
	wait_for 10 gone "$pid"
	check "podman_mirror: after the exit the mirror is still at its path, drained (retention 3 s)" \
		same_map "$mirror" "$mapc"
	check "podman_mirror: then archived as perf-$pid-<ticks>-c${id:0:12}.map with all 51 entries" \
		wait_for 10 eval 'arch=$(archive_of "$a" "$pid" "-c${id:0:12}") && same_names "$arch" "$mapc"' ||
		{ ls -l "$a" "$d"; }
	check "podman_mirror: and gone from the map directory" wait_for 5 test ! -e "$mirror"
	ctr_rm mirror
	check "podman_mirror: the container is removed (podman no longer knows it)" \
		eval '! "${PODMAN[@]}" container exists "$CTR_PREFIX-mirror"'
	check "podman_mirror: the agent still answers, and the archive still holds the map" \
		eval 'status_ge "$d" pid 1 && same_names "$(archive_of "$a" "$pid" "-c${id:0:12}")" "$mapc"'
	stop_agent || fail "podman_mirror: perfmapd exited non-zero"
}

# A JIT forks inside a container (as root, and as uid 1000): each child's copy
# lands in the container's /tmp under its namespace pid, owned by the child,
# and is mirrored to the host under the child's host pid.
test_podman_fork() {
	local d='' a r who pid nsc hostc copies=0 before
	agent_on fork podman_fork || return
	before=$(status_of "$d" ns_copies)
	local -A user=([root]=0:0 [user]=1000:1000)
	for who in root user; do
		r=$(new_rootfs "fork-$who") || { fail "podman_fork: cannot build the container root"; return; }
		ctr_run "fork-$who" "$r" --user "${user[$who]}" -- \
			/bin/forkjit --startup-ms "$STARTUP_MS" --dir /tmp --entries 25 --prefix "ctr_fork_$who" --children 2 --print-pids \
			--fork-delay-ms 300 --wait-map-ms 10000 --child-hold-ms "$HOLD_MS" ||
			{ fail "podman_fork: podman run ($who) failed"; return; }
	done
	for who in root user; do
		r=$WORK/rootfs-fork-$who
		pid=$(ctr_pid "fork-$who")
		check "podman_fork: $who: the parent (host pid $pid, uid $(uid_gid_of "$pid")) is mirrored" \
			wait_for 5 same_map "$d/perf-$pid.map" "$r/tmp/perf-1.map"
		if ! wait_for 10 eval '[ "$(ctr_logs "fork-$who" | grep -c "^child ")" = 2 ]'; then
			fail "podman_fork: $who: the JIT did not fork two children: $(ctr_logs "fork-$who")"
			continue
		fi
		for nsc in $(ctr_logs "fork-$who" | awk '/^child / { print $2 }'); do
			hostc=
			find_pid hostc 5 child_with_nspid "$pid" "$nsc"
			check "podman_fork: $who: child ns pid $nsc (host pid ${hostc:-?}): its copy /tmp/perf-$nsc.map in the container holds the parent's entries" \
				wait_for 10 same_map "$r/tmp/perf-$nsc.map" "$r/tmp/perf-1.map" && copies=$((copies + 1))
			[ -n "$hostc" ] || { fail "podman_fork: $who: no host pid for ns pid $nsc"; continue; }
			check "podman_fork: $who: the copy is owned by the child's uid:gid ($(owner_of "$r/tmp/perf-$nsc.map"), child $(uid_gid_of "$hostc"))" \
				test "$(owner_of "$r/tmp/perf-$nsc.map")" = "$(uid_gid_of "$hostc")"
			check "podman_fork: $who: the host mirror perf-$hostc.map holds the child's copy" \
				wait_for 10 same_map "$d/perf-$hostc.map" "$r/tmp/perf-$nsc.map"
			check "podman_fork: $who: the child's mirror is owned by its uid:gid ($(owner_of "$d/perf-$hostc.map"))" \
				test "$(owner_of "$d/perf-$hostc.map")" = "$(uid_gid_of "$hostc")"
		done
	done
	check "podman_fork: status: ns_copies grew by the $copies copies, none failed" \
		wait_for 5 eval 'status_ge "$d" ns_copies $((before + copies)) && [ "$(status_of "$d" ns_copies_failed)" = 0 ]'
	stop_agent || fail "podman_fork: perfmapd exited non-zero"
}

# Containers that plant traps at their map path, or a /tmp that is a link: the
# agent reads and writes nothing outside them, says why it refused, and goes on
# serving the host.
test_podman_hostile() {
	local d='' a r t pid token canary canary_hl decoy fp fp_hl fp_decoy out k n leaked rc
	local -A pids base
	agent_on hostile podman_hostile || return
	token=PERFMAPD_CANARY_$RANDOM$RANDOM
	canary=$WORK/canary
	canary_hl=$WORK/canary-hardlink
	decoy=$WORK/hostlike/perf-1.map   # where a /tmp -> $WORK/hostlike would lead, read on the host
	mkdir -p "$WORK/outside" "$WORK/hostlike"
	for f in "$canary" "$canary_hl" "$decoy"; do
		printf '7f0000000000 10 %s\nroot:secret:%s\n' "$token" "$token" >"$f"
		chmod 0600 "$f"
	done
	fp=$(fingerprint "$canary")
	fp_hl=$(fingerprint "$canary_hl")
	fp_decoy=$(fingerprint "$decoy")
	for k in containers_refused refused_symlink refused_not_regular refused_hard_linked refused_too_large \
		refused_sparse refused_tmp; do
		base[$k]=$(status_of "$d" "$k")
	done

	# Planted before the container starts.
	r=$(new_rootfs h-link) && mkdir -m 1777 "$r/jit" && ln -s "$canary" "$r/tmp/perf-1.map"
	r=$(new_rootfs h-fifo) && mkdir -m 1777 "$r/jit" && mkfifo "$r/tmp/perf-1.map"
	r=$(new_rootfs h-dir) && mkdir -m 1777 "$r/jit" && mkdir "$r/tmp/perf-1.map"
	r=$(new_rootfs h-hard) && mkdir -m 1777 "$r/jit"
	r=$(new_rootfs h-sparse)
	r=$(new_rootfs h-tmplink) && rmdir "$r/tmp" && ln -s "$WORK/hostlike" "$r/tmp" &&
		mkdir -p "$r$WORK/hostlike" && chmod 1777 "$r$WORK/hostlike"
	r=$(new_rootfs h-tmproot) && rmdir "$r/tmp" && ln -s / "$r/tmp"
	# Its children's map paths (whatever their ns pids) lead out of the container.
	r=$(new_rootfs h-fork) && for n in $(seq 2 60); do
		if [ $((n % 2)) = 0 ]; then
			ln -s "$WORK/outside/child-$n.map" "$r/tmp/perf-$n.map"
		else
			ln -s "$canary" "$r/tmp/perf-$n.map"
		fi
	done
	for t in h-link h-fifo h-dir h-hard; do
		ctr_run "$t" "$WORK/rootfs-$t" -- /bin/forkjit --dir /jit --entries 3 --prefix "$t" --hold-ms "$HOLD_MS" ||
			fail "podman_hostile: podman run $t failed"
	done
	ctr_run h-sparse "$WORK/rootfs-h-sparse" -- /bin/forkjit --dir /tmp --entries 3 --prefix h_sparse \
		--sparse-mb 10240 --hold-ms "$HOLD_MS" || fail "podman_hostile: podman run h-sparse failed"
	for t in h-tmplink h-tmproot; do
		ctr_run "$t" "$WORK/rootfs-$t" -- /bin/forkjit --dir /tmp --entries 3 --prefix "$t" --hold-ms "$HOLD_MS" ||
			fail "podman_hostile: podman run $t failed"
	done
	ctr_run h-fork "$WORK/rootfs-h-fork" -- /bin/forkjit --startup-ms "$STARTUP_MS" --dir /tmp --entries 10 --prefix h_fork --children 3 \
		--print-pids --fork-delay-ms 500 --child-hold-ms "$HOLD_MS" || fail "podman_hostile: podman run h-fork failed"
	for t in h-link h-fifo h-dir h-hard h-sparse h-tmplink h-tmproot h-fork; do
		pids[$t]=$(ctr_pid "$t" 2>/dev/null)
	done
	# Planted while it runs: a hard link to a root-owned file of the host.
	ln "$canary_hl" "$WORK/rootfs-h-hard/tmp/perf-1.map"

	check "podman_hostile: the sparse JIT made its map 10 GiB ($(stat -c %s "$WORK/rootfs-h-sparse/tmp/perf-1.map" 2>/dev/null) bytes)" \
		wait_for 5 eval '[ "$(stat -c %s "$WORK/rootfs-h-sparse/tmp/perf-1.map" 2>/dev/null)" = $((10240 << 20)) ]'
	check "podman_hostile: a map path that is a symlink is refused (refused_symlink ${base[refused_symlink]} -> ...)" \
		wait_for 10 status_ge "$d" refused_symlink $((base[refused_symlink] + 1))
	check "podman_hostile: a FIFO and a directory are refused (refused_not_regular ${base[refused_not_regular]} -> ...)" \
		wait_for 10 status_ge "$d" refused_not_regular $((base[refused_not_regular] + 2))
	check "podman_hostile: a hard link is refused (refused_hard_linked)" \
		wait_for 10 status_ge "$d" refused_hard_linked $((base[refused_hard_linked] + 1))
	check "podman_hostile: a 10 GiB sparse map is refused (refused_sparse or refused_too_large)" \
		wait_for 10 status_sum_gt "$d" refused_sparse refused_too_large $((${base[refused_sparse]:-0} + ${base[refused_too_large]:-0}))
	check "podman_hostile: a /tmp that is a symlink (to a host path, to /) is refused twice (refused_tmp)" \
		wait_for 10 status_ge "$d" refused_tmp $((base[refused_tmp] + 2))
	check "podman_hostile: containers_refused counts them ($(status_of "$d" containers_refused))" \
		wait_for 10 status_ge "$d" containers_refused $((base[containers_refused] + 7))
	n=0
	for t in h-link h-fifo h-dir h-hard h-sparse h-tmplink h-tmproot; do
		wait_for 5 grep -qE "^perfmapd: warning: mirror ${pids[$t]} \(.*, refused( \(.*\))?$" "$AGENT_LOG" ||
			{ n=$((n + 1)); say "    no refusal logged for $t (pid ${pids[$t]})"; }
	done
	check "podman_hostile: the log says why for each of the 7 ('mirror <pid> (<comm>): ..., refused')" test "$n" = 0
	for k in "${!base[@]}"; do
		say "    $k: ${base[$k]} -> $(status_of "$d" "$k")"
	done

	# The forks' children: the agent wrote through none of the planted links.
	if wait_for 10 eval '[ "$(ctr_logs h-fork | grep -c "^child ")" = 3 ]'; then
		check "podman_hostile: the forking JIT's parent is mirrored (host pid ${pids[h-fork]})" \
			wait_for 5 same_map "$d/perf-${pids[h-fork]}.map" "$WORK/rootfs-h-fork/tmp/perf-1.map"
		n=0
		for k in $(ctr_logs h-fork | awk '/^child / { print $2 }'); do
			[ -L "$WORK/rootfs-h-fork/tmp/perf-$k.map" ] && n=$((n + 1))
		done
		check "podman_hostile: its 3 children's planted links are still links ($n)" test "$n" = 3
		check "podman_hostile: and their copies were refused (refused_symlink, 'is a symlink, refused' in the log)" \
			wait_for 5 eval 'status_ge "$d" refused_symlink $((base[refused_symlink] + 4)) &&
				[ "$(grep -c "/tmp/perf-[0-9]*.map in container .* is a symlink, refused$" "$AGENT_LOG")" -ge 4 ]'
	else
		fail "podman_hostile: the forking JIT did not fork: $(ctr_logs h-fork)"
	fi

	# Responsive while they run: status answers, a host JIT's children get their copies.
	check "podman_hostile: perfmapctl status answers within 2 s" \
		eval 'timeout 2 "$BUILD/perfmapctl" status --map-dir "$d" --run-dir "$RUN_DIR" >/dev/null'
	"$FORKJIT" --dir "$d" --entries 50 --children 5 --wait-map-ms 10000 --prefix host_during \
		>"$WORK/hostile-host.out" 2>&1
	rc=$?
	check "podman_hostile: a host JIT's 5 children got their copies meanwhile" test "$rc" = 0 ||
		cat "$WORK/hostile-host.out"

	check "podman_hostile: the canary is unchanged" test "$(fingerprint "$canary")" = "$fp"
	check "podman_hostile: the hard-linked canary is unchanged (but for its link count)" \
		test "$(fingerprint "$canary_hl" | sed 's/ 2 / 1 /')" = "$fp_hl"
	check "podman_hostile: the host file a /tmp link names is unchanged" test "$(fingerprint "$decoy")" = "$fp_decoy"
	leaked=$(leaks "$token")
	check "podman_hostile: no file of the map directory or the archive holds the canary's content${leaked:+: $leaked}" \
		test -z "$leaked"
	check "podman_hostile: nothing was created outside the containers ($(ls "$WORK/outside" | wc -l) in the links' target directory, $(ls "$WORK/hostlike" | wc -l) beside the host decoy)" \
		eval '[ -z "$(ls -A "$WORK/outside")" ] && [ "$(ls -A "$WORK/hostlike")" = perf-1.map ]'
	n=0
	for t in h-link h-fifo h-dir h-hard h-sparse h-tmplink h-tmproot; do
		[ -n "${pids[$t]}" ] && [ -e "$d/perf-${pids[$t]}.map" ] && { n=$((n + 1)); say "    $t: $(ls -l "$d/perf-${pids[$t]}.map")"; }
	done
	check "podman_hostile: no refused container has a mirror ($n have)" test "$n" = 0
	out=$(du -sk "$d" | awk '{ print $1 }')
	check "podman_hostile: the map directory holds ${out} KiB (the sparse map was not copied)" test "$out" -lt 4096
	check "podman_hostile: the agent is alive" kill -0 "$AGENT_PID"
	stop_agent || fail "podman_hostile: perfmapd exited non-zero"
}

# The PrivateTmp= case: a private /tmp (a tmpfs in its own mount namespace), the
# host's pid namespace. Mirrored under the same pid; nothing in the host's view.
test_unshare_privatetmp() {
	local d='' a nsd pid inns sfx
	nsd=$(new_map_dir)  # the ns map dir as the host sees it: must stay empty
	agent_on privatetmp unshare_privatetmp --ns-map-dir "$nsd" --retention 2 || return
	unshare --mount --propagation private sh -c \
		'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" && exec "$1" --startup-ms "$3" --dir "$0" --entries 15 --prefix ptmp --hold-ms "$2"' \
		"$nsd" "$FORKJIT" "$HOLD_MS" "$STARTUP_MS" &
	pid=$!
	BG_PIDS+=("$pid")
	inns=/proc/$pid/root$nsd/perf-$pid.map
	check "unshare_privatetmp: the JIT (pid $pid, NSpid '$(nspid_of "$pid")') wrote 15 entries in its private $nsd" \
		wait_for 5 map_has "$inns" ptmp 15
	check "unshare_privatetmp: in its own mount namespace, the host's pid namespace" \
		eval '[ "$(readlink /proc/$pid/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ] && [ "$(nspid_of "$pid")" = "$pid" ]'
	check "unshare_privatetmp: mirrored to the host as perf-$pid.map, exactly" \
		wait_for 5 same_map "$d/perf-$pid.map" "$inns"
	check "unshare_privatetmp: status: mirror_$pid has ns_pid=$pid" \
		wait_for 5 status_line_has "$d" "mirror_$pid" "ns_pid=$pid "
	check "unshare_privatetmp: the host's view of $nsd is empty, and no /tmp/perf-$pid.map" \
		eval '[ -z "$(ls -A "$nsd")" ] && [ ! -e /tmp/perf-$pid.map ]'
	sfx=$(ctr_suffix_of "$pid")
	cp "$inns" "$WORK/privatetmp.map"
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	check "unshare_privatetmp: after its exit (and its tmpfs gone) the map is archived as perf-$pid-<ticks>$sfx.map" \
		wait_for 10 eval 'same_names "$(archive_of "$a" "$pid" "$sfx")" "$WORK/privatetmp.map"'
	stop_agent || fail "unshare_privatetmp: perfmapd exited non-zero"
}

# A pid namespace sharing the host's map directory (unshare --pid, no /tmp of
# its own): its perf-<ns pid>.map is mirrored under its host pid, and is never
# taken for the map of the host process that has that pid.
test_unshare_pidns_shared() {
	local d a u pid h q c ctl out
	d=$(new_map_dir)
	agent_on pidns unshare_pidns_shared --ns-map-dir "$d" --retention 2 || return
	unshare --pid --fork --kill-child "$FORKJIT" --startup-ms "$STARTUP_MS" --dir "$d" --entries 10 --prefix pidns --hold-ms "$HOLD_MS" &
	u=$!
	BG_PIDS+=("$u")
	pid=
	find_pid pid 5 descendant_named "$u" forkjit
	[ -n "$pid" ] || { fail "unshare_pidns_shared: no JIT under unshare $u"; return; }
	BG_PIDS+=("$pid")
	check "unshare_pidns_shared: the JIT (host pid $pid, NSpid '$(nspid_of "$pid")') wrote perf-1.map in the host map directory" \
		wait_for 5 map_has "$d/perf-1.map" pidns 10
	check "unshare_pidns_shared: mirrored as perf-$pid.map" wait_for 5 same_map "$d/perf-$pid.map" "$d/perf-1.map"
	check "unshare_pidns_shared: status: mirror_$pid has ns_pid=1 container=-" \
		wait_for 5 status_line_has "$d" "mirror_$pid" "ns_pid=1 container=- "

	# The collision: host process H (no map of its own), and a JIT in a pid
	# namespace (with its own /proc, so pidat can pick its pid) at ns pid H.
	python3 -c '
import os, signal, sys, time
os.kill(os.getpid(), signal.SIGSTOP)       # until the namespace JIT is mirrored
c = os.fork()
if c == 0:
    time.sleep(600)
    os._exit(0)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(c))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
os.kill(os.getpid(), signal.SIGSTOP)       # until the test lets it exit
os.kill(c, signal.SIGKILL)
os.waitpid(c, 0)
' "$WORK/h-child" &
	h=$!
	BG_PIDS+=("$h")
	wait_for 5 is_stopped "$h" || { fail "unshare_pidns_shared: H ($h) did not stop"; return; }
	unshare --pid --fork --mount --mount-proc --kill-child "$PIDAT" "$h" "$FORKJIT" --startup-ms "$STARTUP_MS" --dir "$d" --entries 10 \
		--prefix coll --hold-ms "$HOLD_MS" &
	u=$!
	BG_PIDS+=("$u")
	q=
	find_pid q 10 descendant_named "$u" forkjit
	[ -n "$q" ] || { fail "unshare_pidns_shared: no JIT at ns pid $h under unshare $u"; return; }
	BG_PIDS+=("$q")
	check "unshare_pidns_shared: a JIT at ns pid $h, the pid of live host process H (its host pid $q, NSpid '$(nspid_of "$q")')" \
		test "$(inner_nspid_of "$q")" = "$h"
	check "unshare_pidns_shared: it wrote perf-$h.map in the host map directory" \
		wait_for 5 map_has "$d/perf-$h.map" coll 10
	check "unshare_pidns_shared: mirrored as perf-$q.map" wait_for 5 same_map "$d/perf-$q.map" "$d/perf-$h.map"
	cp "$d/perf-$h.map" "$WORK/coll.map"
	# H forks: its child must not get the namespace JIT's entries.
	kill -CONT "$h"
	c=
	wait_for 5 eval 'c=$(cat "$WORK/h-child" 2>/dev/null); [ -n "$c" ]' || { fail "unshare_pidns_shared: H did not fork"; return; }
	BG_PIDS+=("$c")
	# A host fork after it: once its child has its copy, H's fork has been handled.
	"$FORKJIT" --dir "$d" --entries 5 --children 1 --wait-map-ms 10000 --prefix barrier >"$WORK/barrier.out" 2>&1 ||
		fail "unshare_pidns_shared: the barrier fork got no copy: $(cat "$WORK/barrier.out")"
	check "unshare_pidns_shared: H's child ($c) got no copy of perf-$h.map" \
		eval '[ ! -e "$d/perf-$c.map" ] && ! grep -q "coll_" "$d/perf-$c.map" 2>/dev/null'
	# H exits; a host JIT exits after it: once that one is archived, H's retention is over too.
	kill -CONT "$h"
	wait "$h"
	"$FORKJIT" --dir "$d" --entries 3 --prefix ctl &
	ctl=$!
	wait "$ctl"
	check "unshare_pidns_shared: a host JIT that exited after H was archived (barrier)" \
		wait_for 10 archived "$a" "$ctl" ""
	check "unshare_pidns_shared: perf-$h.map was not archived as H's" eval '! archived "$a" "$h" ".*"'
	check "unshare_pidns_shared: perf-$h.map is still in place, whole, while the namespace JIT lives" \
		eval 'alive "$q" && same_map "$d/perf-$h.map" "$WORK/coll.map"'
	check "unshare_pidns_shared: and its mirror perf-$q.map too" same_map "$d/perf-$q.map" "$WORK/coll.map"
	out=$(grep -E "\b($h|$c)\b" "$AGENT_LOG" | grep -iv "mirror $q" | head -n 5)
	[ -z "$out" ] || say "    the log about pids $h and $c: $out"
	stop_agent || fail "unshare_pidns_shared: perfmapd exited non-zero"
}

# Two nested pid namespaces, a private /tmp in the innermost mount namespace:
# the map is at the innermost NSpid, mirrored under the host pid.
test_unshare_nested() {
	local d='' a nsd u pid inner inns sfx
	nsd=$(new_map_dir)
	agent_on nested unshare_nested --ns-map-dir "$nsd" --retention 2 || return
	unshare --pid --fork --mount --mount-proc --kill-child \
		unshare --pid --fork --mount-proc --kill-child sh -c \
		'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" || exit 1; "$1" --startup-ms "$3" --dir "$0" --entries 12 --prefix nested --hold-ms "$2" & wait' \
		"$nsd" "$FORKJIT" "$HOLD_MS" "$STARTUP_MS" &
	u=$!
	BG_PIDS+=("$u")
	pid=
	find_pid pid 5 descendant_named "$u" forkjit
	[ -n "$pid" ] || { fail "unshare_nested: no JIT under unshare $u"; return; }
	BG_PIDS+=("$pid")
	inner=$(inner_nspid_of "$pid")
	check "unshare_nested: the JIT is two pid namespaces down (NSpid '$(nspid_of "$pid")')" \
		eval '[ "$(nspid_of "$pid" | wc -w)" = 3 ]'
	inns=/proc/$pid/root$nsd/perf-$inner.map
	check "unshare_nested: it wrote 12 entries in its private $nsd/perf-$inner.map" wait_for 5 map_has "$inns" nested 12
	check "unshare_nested: mirrored under its host pid as perf-$pid.map" \
		wait_for 5 same_map "$d/perf-$pid.map" "$inns"
	check "unshare_nested: status: mirror_$pid has ns_pid=$inner (the innermost)" \
		wait_for 5 status_line_has "$d" "mirror_$pid" "ns_pid=$inner "
	check "unshare_nested: the host's view of $nsd is empty" eval '[ -z "$(ls -A "$nsd")" ]'
	sfx=$(ctr_suffix_of "$pid")
	cp "$inns" "$WORK/nested.map"
	kill -KILL "$pid"
	check "unshare_nested: after its exit the map is archived as perf-$pid-<ticks>$sfx.map" \
		wait_for 10 eval 'same_names "$(archive_of "$a" "$pid" "$sfx")" "$WORK/nested.map"'
	stop_agent || fail "unshare_nested: perfmapd exited non-zero"
}

# Pid reuse inside a pid namespace with a private map directory: the map an
# ended process left at its pid there is never the next holder's. The first
# JIT (ns pid 50) writes and exits at once; its mirror keeps its entries and
# is archived. The next process at ns pid 50 waits before writing: the agent
# finds the old file unwritten since and removes it there, so the new holder's
# map, in the namespace and mirrored, holds only its own entries.
first_mirrored() {
	local f
	for f in "$1"/perf-*.map; do
		map_has "$f" first 5 && return 0
	done
	return 1
}
test_unshare_pid_reuse() {
	local d='' a nsd u p1='' p2='' inns
	nsd=$(new_map_dir)
	agent_on reuse unshare_pid_reuse --ns-map-dir "$nsd" --retention 30 || return
	mkfifo "$WORK/reuse.go"
	unshare --pid --fork --mount --mount-proc --kill-child sh -c \
		'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" || exit 1
		"$1" 50 "$2" --dir "$0" --entries 5 --prefix first || exit 1
		read -r go <"$4"
		exec "$1" 50 "$2" --startup-ms 500 --dir "$0" --entries 3 --prefix second --hold-ms "$3"' \
		"$nsd" "$PIDAT" "$FORKJIT" "$HOLD_MS" "$WORK/reuse.go" &
	u=$!
	BG_PIDS+=("$u")
	# The first JIT's mirror, made at its exit at the latest, holds its 5 entries.
	check "unshare_pid_reuse: the first JIT at ns pid 50 wrote and exited; its mirror holds its 5 entries" \
		wait_for 10 first_mirrored "$d"
	p1=$(grep -l " first_" "$d"/perf-*.map | head -1)
	p1=${p1##*/perf-}
	p1=${p1%.map}
	echo go >"$WORK/reuse.go"
	find_pid p2 5 descendant_named "$u" forkjit
	[ -n "$p2" ] || { fail "unshare_pid_reuse: no second JIT under unshare $u"; return; }
	BG_PIDS+=("$p2")
	inns=/proc/$p2/root$nsd/perf-50.map
	check "unshare_pid_reuse: the second JIT (host pid $p2, NSpid '$(nspid_of "$p2")') holds ns pid 50 too" \
		test "$(inner_nspid_of "$p2")" = 50
	check "unshare_pid_reuse: its map in the namespace holds its own 3 entries and none of the first's" \
		wait_for 10 eval 'map_has "$inns" second 3 && ! grep -q " first_" "$inns"'
	check "unshare_pid_reuse: mirrored as perf-$p2.map, exactly" wait_for 5 same_map "$d/perf-$p2.map" "$inns"
	check "unshare_pid_reuse: the old file was removed there, unwritten since its process ended (ns_stale_removed)" \
		status_ge "$d" ns_stale_removed 1
	check "unshare_pid_reuse: the first JIT's mirror perf-$p1.map still holds its 5 entries, retained" \
		map_has "$d/perf-$p1.map" first 5
	stop_agent || fail "unshare_pid_reuse: perfmapd exited non-zero"
}

# An attacker in a pid namespace sharing the map directory takes, as its own
# pid there, the host pid of another user's JIT (V, root's here; the attacker
# runs as uid 65534): perf-<V>.map is V's, not the attacker's. It is never
# mirrored to the attacker, never hidden from the host's rules (V's child
# still gets its copy), and never removed when a second attacker process
# takes the same pid there.
test_unshare_pidns_victim() {
	local d a v u1 u2 leaked
	d=$(new_map_dir)
	agent_on victim unshare_pidns_victim --ns-map-dir "$d" --retention 30 || return
	"$FORKJIT" --stop-first --dir "$d" --entries 10 --prefix victim --children 1 \
		--wait-map-ms 10000 --hold-ms 1000 &
	v=$!
	BG_PIDS+=("$v")
	wait_for 5 is_stopped "$v" || { fail "unshare_pidns_victim: V ($v) did not stop"; return; }
	unshare --pid --fork --mount --mount-proc --kill-child "$PIDAT" "$v" \
		setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600 &
	u1=$!
	BG_PIDS+=("$u1")
	check "unshare_pidns_victim: the attacker (uid 65534) holds ns pid $v, V's host pid" \
		wait_for 10 attacker_at "$u1" "$v"
	kill -CONT "$v"
	check "unshare_pidns_victim: V wrote its map, owned by root" wait_for 5 map_has "$d/perf-$v.map" victim 10
	check "unshare_pidns_victim: the attacker's claim is refused (refused_owner)" \
		wait_for 10 status_ge "$d" refused_owner 1
	check "unshare_pidns_victim: V's child got V's entries (its map is not hidden from the host's rules)" \
		wait "$v"
	leaked=$(find "$d" -name 'perf-*.map' -user 65534 -exec grep -l " victim_" {} + 2>/dev/null)
	check "unshare_pidns_victim: no map of uid 65534 holds V's entries${leaked:+: $leaked}" test -z "$leaked"
	kill -9 "$u1"  # --kill-child: its namespace goes with it
	wait "$u1" 2>/dev/null
	unshare --pid --fork --mount --mount-proc --kill-child "$PIDAT" "$v" \
		setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600 &
	u2=$!
	BG_PIDS+=("$u2")
	check "unshare_pidns_victim: a second attacker process takes ns pid $v" wait_for 10 attacker_at "$u2" "$v"
	check "unshare_pidns_victim: V's map, retained after its exit, is still there, whole" \
		wait_for 2 map_has "$d/perf-$v.map" victim 10
	check "unshare_pidns_victim: and was not removed as an earlier holder's (ns_stale_removed 0)" \
		test "$(status_of "$d" ns_stale_removed)" = 0
	kill -9 "$u2"
	wait "$u2" 2>/dev/null
	stop_agent || fail "unshare_pidns_victim: perfmapd exited non-zero"
}

# attacker_at UNSHARE NSPID: a sleep of uid 65534 under UNSHARE whose innermost pid is NSPID.
attacker_at() {
	local p
	p=$(descendant_named "$1" sleep) || return 1
	[ "$(uid_gid_of "$p")" = 65534:65534 ] && [ "$(inner_nspid_of "$p")" = "$2" ]
}

# A map rewritten in place (as a JVM's Compiler.perfmap does), cut short, and
# replaced by another file renamed over it: the mirror always ends up holding
# exactly the map, never the old entries beside the new nor a torn line.
test_unshare_rewrite() {
	local d='' a nsd pid inns i
	nsd=$(new_map_dir)
	agent_on rewrite unshare_rewrite --ns-map-dir "$nsd" --retention 30 || return
	unshare --mount --propagation private sh -c \
		'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" && exec "$1" --dir "$0" --entries 20 --prefix first --hold-ms "$2"' \
		"$nsd" "$FORKJIT" "$HOLD_MS" &
	pid=$!
	BG_PIDS+=("$pid")
	inns=/proc/$pid/root$nsd/perf-$pid.map
	check "unshare_rewrite: the JIT's 20 entries are mirrored" wait_for 5 same_map "$d/perf-$pid.map" "$inns"
	# Written anew in place: shorter, then longer than before, other names.
	for i in 0 1 2; do printf '7f0000%04x 10 again_%d\n' $((i * 16)) "$i"; done >"$inns"
	check "unshare_rewrite: rewritten in place with 3 entries: the mirror holds those 3 only" \
		wait_for 5 same_map "$d/perf-$pid.map" "$inns"
	for i in $(seq 0 39); do printf '7f0000%04x 10 third_%d\n' $((i * 16)) "$i"; done >"$inns"
	check "unshare_rewrite: rewritten again, 40 entries: the mirror holds those 40 only" \
		wait_for 5 same_map "$d/perf-$pid.map" "$inns"
	# Another file renamed over the name.
	for i in 0 1 2 3 4; do printf '7f0001%04x 10 renamed_%d\n' $((i * 16)) "$i"; done \
		>"/proc/$pid/root$nsd/new.tmp"
	mv "/proc/$pid/root$nsd/new.tmp" "$inns"
	check "unshare_rewrite: a new file renamed over it: the mirror holds its 5 entries only" \
		wait_for 5 same_map "$d/perf-$pid.map" "$inns"
	printf '7f0001ff00 10 appended_0\n' >>"$inns"
	check "unshare_rewrite: and what is appended to the new file follows" \
		wait_for 5 same_map "$d/perf-$pid.map" "$inns"
	check "unshare_rewrite: status: mirrors_rewritten counts the rewrites and the rename" \
		status_ge "$d" mirrors_rewritten 3
	stop_agent || fail "unshare_rewrite: perfmapd exited non-zero"
}

# Fork copies of a large map inside a namespace go a bounded part per tick:
# 8 children of a JIT with a map of about 2 MB (16 MB in all, past a tick's
# 8 MiB) each still get every entry, in the namespace and in their mirrors.
test_unshare_large_copy() {
	local d='' a nsd u pid rc c n=0 ok=0
	nsd=$(new_map_dir)
	agent_on large unshare_large_copy --ns-map-dir "$nsd" --retention 30 || return
	unshare --mount --propagation private sh -c \
		'mount -t tmpfs -o mode=1777,size=64m pmtmp "$0" && exec "$1" --dir "$0" --entries 60000 --prefix big --children 8 --wait-map-ms 20000 --print-pids --report' \
		"$nsd" "$FORKJIT" "$HOLD_MS" >"$WORK/large.out" 2>&1 &
	u=$!
	BG_PIDS+=("$u")
	pid=$u
	# It exits once its children reported (its report then reaches the file); mirrors stay 30 s.
	check "unshare_large_copy: the JIT's 60000 entries are mirrored" \
		wait_for 20 map_has "$d/perf-$pid.map" big 60000
	check "unshare_large_copy: its 8 children each found their whole copy in the namespace" \
		wait_for 40 grep -q "^complete 8/8" "$WORK/large.out"
	for c in $(awk '$1 == "child" { print $2 }' "$WORK/large.out"); do
		n=$((n + 1))
		wait_for 10 map_has "$d/perf-$c.map" big 60000 && ok=$((ok + 1))
	done
	check "unshare_large_copy: and each child's mirror, retained after its exit, holds all 60000 ($ok of $n)" \
		test "$ok" = 8 -a "$n" = 8
	check "unshare_large_copy: status: ns_copies counts 8" status_ge "$d" ns_copies 8
	stop_agent || fail "unshare_large_copy: perfmapd exited non-zero"
}

# perfmapctl doctor on a process in a real podman container: without an
# agent its map is only in the container's /tmp (nothing on the host finds
# it after the exit); with the agent it is mirrored and the process healthy.
doctor_json() {   # doctor_json PID FILE [ARGS...]: the JSON in FILE, the exit status returned
	local pid=$1 out=$2
	shift 2
	"$BUILD/perfmapctl" doctor --json --map-dir "$d" "$@" "$pid" >"$out" 2>"$out.err"
}
doctor_codes() { python3 -c 'import json, sys; print(" ".join(f["code"] for f in json.load(open(sys.argv[1]))["findings"]))' "$1"; }
test_podman_doctor() {
	local d a r pid rc codes
	d=$(new_map_dir)
	r=$(new_rootfs doctor) || { fail "podman_doctor: cannot build the container root"; return; }
	ctr_run doctor "$r" -- /bin/forkjit --dir /tmp --entries 30 --prefix ctr_doctor --hold-ms "$HOLD_MS" ||
		{ fail "podman_doctor: podman run failed"; return; }
	pid=$(ctr_pid doctor)
	wait_for 5 map_has "$r/tmp/perf-1.map" ctr_doctor 30
	doctor_json "$pid" "$WORK/doctor-none.json" --run-dir "$WORK/run-none"
	rc=$?
	codes=$(doctor_codes "$WORK/doctor-none.json")
	check "podman_doctor: without an agent, the map only in the container's /tmp is an error, exit 1 ($codes)" \
		eval '[ $rc = 1 ] && grep -qw map_only_in_container <<<"$codes"'
	agent_on doctor podman_doctor || return
	check "podman_doctor: the agent mirrors it" wait_for 5 map_has "$d/perf-$pid.map" ctr_doctor 30
	doctor_json "$pid" "$WORK/doctor-agent.json" --run-dir "$RUN_DIR"
	rc=$?
	codes=$(doctor_codes "$WORK/doctor-agent.json")
	check "podman_doctor: with the agent, healthy, exit 0 ($codes)" \
		eval '[ $rc = 0 ] && ! grep -qw map_only_in_container <<<"$codes"'
	check "podman_doctor: the agent section names its mirror" \
		python3 -c 'import json, sys; a = json.load(open(sys.argv[1]))["agent"]; assert a["running"] and "ns_pid=1" in a.get("mirror", ""), a' "$WORK/doctor-agent.json"
	stop_agent || fail "podman_doctor: perfmapd exited non-zero"
}

# children_copied LABEL NAME WHAT: forkjit's 3 children ($WORK/NAME.out, run
# with --children 3 --print-pids --report and --prefix NAME, 20 entries) each
# found WHAT in the namespace, and each one's mirror in $d holds 20; the
# JIT's output and the agent's copy lines ($WORK/NAME.log) said if not.
children_copied() {
	local label=$1 name=$2 what=$3 c n=0 ok=0
	check "$label: its 3 children each found $what in the namespace" \
		wait_for 30 grep -q "^complete 3/3" "$WORK/$name.out" ||
		{ sed 's/^/    /' "$WORK/$name.out"; grep -E 'copy|mirror' "$WORK/$name.log" | sed 's/^/    agent: /' | tail -n 20; }
	for c in $(awk '$1 == "child" { print $2 }' "$WORK/$name.out"); do
		n=$((n + 1))
		wait_for 10 map_has "$d/perf-$c.map" "$name" 20 && ok=$((ok + 1))
	done
	check "$label: each child's mirror holds the 20 ($ok of $n)" test "$ok" = 3 -a "$n" = 3
}

# Fork copies inside a container are exact too: entries naming memory the
# child did not inherit (freed, MADV_DONTFORK, a shared memfd) are left out.
test_unshare_exact_copy() {
	local d='' a nsd u pid
	nsd=$(new_map_dir)
	agent_on exact unshare_exact_copy --ns-map-dir "$nsd" --retention 30 || return
	unshare --mount --propagation private sh -c \
		'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" && exec "$1" --dir "$0" --entries 20 --prefix exact --children 3 --uninherited --wait-map-ms 15000 --print-pids --report' \
		"$nsd" "$FORKJIT" >"$WORK/exact.out" 2>&1 &
	u=$!
	BG_PIDS+=("$u")
	pid=$u
	check "unshare_exact_copy: the parent's 23 entries are mirrored (20 inherited, 3 not)" \
		wait_for 20 map_has "$d/perf-$pid.map" exact 23
	children_copied unshare_exact_copy exact "exactly the 20 inherited entries"
	check "unshare_exact_copy: status: 9 entries left out" status_is "$d" ns_copy_entries_left_out 9
	stop_agent || fail "unshare_exact_copy: perfmapd exited non-zero"
}

# The parent's map made and its children forked while the agent was held:
# it reads the forks (the BPF events, woken by its own map directory's
# watch) before the namespace's watch tells it the parent's map is there.
# The copies are made all the same, from the map as it is at the fork's
# turn. (CI lost all three copies this way once, on a loaded machine.)
test_unshare_fork_unnoticed() {
	local d='' a nsd u
	nsd=$(new_map_dir)
	agent_on unnoticed unshare_fork_unnoticed --ns-map-dir "$nsd" --retention 30 || return
	unshare --mount --propagation private sh -c \
		'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" && exec "$1" --stop-first --dir "$0" --entries 20 --prefix unnoticed --children 3 --wait-map-ms 15000 --print-pids --report' \
		"$nsd" "$FORKJIT" >"$WORK/unnoticed.out" 2>&1 &
	u=$!
	BG_PIDS+=("$u")
	wait_for 10 is_stopped "$u" && wait_for 10 status_is "$d" mirrors 1 ||
		{ fail "unshare_fork_unnoticed: the JIT did not stop, or was not mirrored ($(status_of "$d" mirrors))"; return; }
	kill -STOP "$AGENT_PID"
	: >"$d/wake"
	kill -CONT "$u"
	wait_for 10 eval '[ "$(grep -c "^child" "$WORK/unnoticed.out")" = 3 ]'
	kill -CONT "$AGENT_PID"
	children_copied unshare_fork_unnoticed unnoticed "the parent's 20 entries"
	check "unshare_fork_unnoticed: status: ns_copies counts 3 ($(status_of "$d" ns_copies))" status_is "$d" ns_copies 3
	rm -f "$d/wake"
	stop_agent || fail "unshare_fork_unnoticed: perfmapd exited non-zero"
}

# A child whose runtime writes its own map before the agent copies (the agent
# held with SIGSTOP): the parent's entries are appended to it, as on the host;
# a child whose runtime copied the parent's map itself gets nothing more.
test_unshare_own_map() {
	local d='' a nsd u kind rc
	nsd=$(new_map_dir)
	agent_on own unshare_own_map --ns-map-dir "$nsd" --retention 30 || return
	for kind in own copy; do
		kill -STOP "$AGENT_PID"
		unshare --mount --propagation private sh -c \
			'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" && exec "$1" --dir "$0" --entries 30 --prefix "own_$2" --children 2 --child-writes "$2" --wait-map-ms 15000 --print-pids' \
			"$nsd" "$FORKJIT" "$kind" >"$WORK/own-$kind.out" 2>&1 &
		u=$!
		BG_PIDS+=("$u")
		wait_for 10 eval '[ "$(grep -c "^child" "$WORK/own-$kind.out")" = 2 ]'
		kill -CONT "$AGENT_PID"
		wait "$u"
		rc=$?
		case $kind in
		own) check "unshare_own_map: children whose runtimes wrote first got the parent's 30 entries after their own" \
			test "$rc" = 0 ;;
		copy) check "unshare_own_map: children whose runtimes copied the parent's map themselves got nothing more" \
			test "$rc" = 0 ;;
		esac
		[ "$rc" = 0 ] || sed 's/^/    /' "$WORK/own-$kind.out"
	done
	check "unshare_own_map: status: ns_copies_appended counts the 2 appends ($(status_of "$d" ns_copies_appended))" \
		test "$(status_of "$d" ns_copies_appended)" = 2
	stop_agent || fail "unshare_own_map: perfmapd exited non-zero"
}

# Exec inside a container: the old image's mirror is archived, a new one
# continues for the new image. Both images stop themselves at once (so the
# JIT runs under --init: a namespace's init cannot stop itself): the old
# image's names are written, through the container's root, while it is
# stopped, and mirrored before the exec; the new image writes its own only
# once the agent has archived the old ones.
test_podman_exec() {
	local d='' a r pid nsp id arch i
	agent_on exec podman_exec --retention 2 || return
	r=$(new_rootfs exec) && mkdir -m 1777 "$r/jit" || { fail "podman_exec: cannot build the container root"; return; }
	ctr_run exec "$r" --init -- /bin/forkjit --stop-first --dir /jit --entries 1 --prefix old --exec \
		/bin/forkjit --stop-first --dir /tmp --entries 4 --prefix after --hold-ms "$HOLD_MS" ||
		{ fail "podman_exec: podman run failed"; return; }
	id=$(ctr_id exec)
	pid=
	find_pid pid 5 descendant_named "$(ctr_pid exec)" forkjit
	[ -n "$pid" ] && wait_for 5 is_stopped "$pid" || { fail "podman_exec: no stopped JIT in the container"; return; }
	nsp=$(inner_nspid_of "$pid")
	for i in 0 1 2 3 4 5; do
		printf '7f00000%02x000 20 before_%d\n' "$i" "$i" >>"/proc/$pid/root/tmp/perf-$nsp.map"
	done
	check "podman_exec: the old image's 6 entries (host pid $pid, NSpid '$(nspid_of "$pid")') are mirrored" \
		wait_for 5 map_has "$d/perf-$pid.map" before 6
	kill -CONT "$pid"
	check "podman_exec: the JIT exec'd, and the new image is stopped" \
		wait_for 5 eval 'grep -q after "/proc/$pid/cmdline" && is_stopped "$pid"'
	check "podman_exec: the old image's mirror is archived (perf-$pid-<ticks>...map, its 6 entries)" \
		wait_for 10 eval 'arch=$(archive_of "$a" "$pid" ".*") && map_has "$arch" before 6' ||
		{ ls -l "$a" "$d"; }
	check "podman_exec: the archive's name records the container (-c${id:0:12}): ${arch##*/}" \
		eval '[[ ${arch##*/} == *-c${id:0:12}* ]]'
	kill -CONT "$pid"
	check "podman_exec: a new mirror perf-$pid.map holds the new image's 4 entries" \
		wait_for 5 map_has "$d/perf-$pid.map" after 4
	check "podman_exec: and none of the old image's" eval '! grep -q " before_" "$d/perf-$pid.map"'
	stop_agent || fail "podman_exec: perfmapd exited non-zero"
}

# ---- user namespaces (issue 20, item 6) ----

# The test's programs where uid 65534 and a rootless user can run them.
user_bins() {
	chmod 711 "$WORK"
	mkdir -p -m 755 "$WORK/bin"
	cp "$FORKJIT" "$PIDAT" "$WORK/bin/" && chmod 755 "$WORK/bin/forkjit" "$WORK/bin/pidat"
}

# The children of PID, one line each: host pid, NSpid, state, seconds alive.
children_of() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		echo "$c NSpid '$(nspid_of "$c")' $(awk '$1 == "State:" { print $2 }' "/proc/$c/status" 2>/dev/null)" \
			"$(ps -o etimes= -p "$c" 2>/dev/null)s"
	done
}
continue_children() { kill -CONT $(cat /proc/"$1"/task/*/children 2>/dev/null) 2>/dev/null; :; }
# copies_in_ns LABEL NAME OUT FJ UID: forkjit FJ (host pid) runs with
# --children 3 --print-pids --report --child-stop --prefix NAME, 20 entries:
# each child's copy in the namespace is owned by UID on the host, its mirror in
# $d holds the 20, and each child found its copy there. The children stop
# once they found their maps (or gave up), and are continued here once looked at.
copies_in_ns() {
	local label=$1 name=$2 out=$3 fj=$4 uid=$5 c hp n=0 ok=0 owned=0 hps=()
	wait_for 10 eval '[ "$(grep -c "^child " "$out")" = 3 ]'
	# Their host pids first; then their copies, through the JIT's root (it waits
	# for them), and their mirrors.
	for c in $(awk '$1 == "child" { print $2 }' "$out"); do
		hp=
		find_pid hp 5 child_with_nspid "$fj" "$c" || {
			say "    $label: no child at namespace pid $c under $fj; its children:"
			children_of "$fj" | sed 's/^/      /'
		}
		hps+=("$c:${hp:-none}")
	done
	for c in "${hps[@]}"; do
		n=$((n + 1))
		hp=${c#*:}
		c=${c%%:*}
		wait_for 5 eval '[ "$(stat -c %u "/proc/$fj/root$NSD/perf-$c.map" 2>/dev/null)" = "$uid" ]' &&
			owned=$((owned + 1))
		wait_for 10 map_has "$d/perf-$hp.map" "$name" 20 && ok=$((ok + 1))
	done
	check "$label: the copies in the namespace are uid $uid's, as the children's own would be ($owned of $n)" \
		test "$owned" = 3 -a "$n" = 3
	check "$label: each child's mirror holds the 20 ($ok of $n)" test "$ok" = 3
	wait_for 15 eval '[ "$(children_of "$fj" | grep -c " T ")" = 3 ]' ||
		{ say "    $label: not all 3 children stopped after their look; its children:"; children_of "$fj" | sed 's/^/      /'; }
	# Continued at each look: one that stops only now is not left stopped, its parent waiting.
	check "$label: its 3 children each found the parent's entries in their own map in the namespace" \
		wait_for 30 eval 'continue_children "$fj"; grep -q "^complete 3/3" "$out"' ||
		{ sed 's/^/    /' "$out"; grep -E 'copy|mirror|refus' "$AGENT_LOG" | sed 's/^/    agent: /' | tail -n 20; }
	check "$label: no copy failed or was refused" eval 'status_is "$d" ns_copies_failed 0 &&
		status_is "$d" ns_writes_refused_unmapped 0 && status_is "$d" ns_writes_refused_denied 0'
}

# A JIT of uid 65534 in a user namespace of its own (unshare -Urpm: root
# there is uid 65534), with a tmpfs mounted there as its /tmp: that file
# system belongs to the namespace, where the host's root has no id. Each
# child's copy is made there as uid 65534 (before issue 20: EOVERFLOW, no
# copy at all).
test_unshare_userns_copy() {
	local d='' a u fj
	NSD=$(new_map_dir)
	user_bins
	agent_on userns unshare_userns_copy --ns-map-dir "$NSD" --retention 30 || return
	setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare -Urpm --fork --mount-proc --kill-child \
		sh -c 'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" && exec "$1" --dir "$0" --entries 20 --prefix userns --children 3 --wait-map-ms 15000 --child-stop --print-pids --report' \
		"$NSD" "$WORK/bin/forkjit" >"$WORK/userns.out" 2>&1 &
	u=$!
	BG_PIDS+=("$u")
	find_pid fj 5 descendant_named "$u" forkjit
	[ -n "$fj" ] || { fail "unshare_userns_copy: no JIT under unshare $u"; return; }
	copies_in_ns unshare_userns_copy userns "$WORK/userns.out" "$fj" 65534
	check "unshare_userns_copy: 3 copies made in the namespace" status_ge "$d" ns_copies 3
	stop_agent || fail "unshare_userns_copy: perfmapd exited non-zero"
}

# A process whose own uid has no name in its user namespace: root's, in a
# namespace that maps only 100000-165535 (written by hand, as an engine's
# uid_map could be), on a tmpfs of the host's. A copy made there would be
# owned by an id the namespace cannot name: refused, counted, said with the
# uid; the children's mirrors on the host get the parent's entries all the
# same, and nothing is created in the namespace's directory.
# ns_init_sh ROOT: the shell under ROOT that is pid 1 of its pid namespace.
ns_init_sh() {
	local c
	c=$(descendant_named "$1" sh) && [ "$(inner_nspid_of "$c")" = 1 ] && echo "$c"
}
test_unshare_userns_unmapped() {
	local d='' a u sh_pid fj c hp n=0 ok=0 hps=()
	NSD=$(new_map_dir)
	agent_on unmapped unshare_userns_unmapped --ns-map-dir "$NSD" --retention 30 || return
	mkfifo "$WORK/unmapped.go"
	# The inner shell waits for its maps, written from here, before the JIT starts.
	unshare --mount --propagation private sh -c \
		'mount -t tmpfs -o mode=1777,size=16m pmtmp "$0" && exec unshare -U -p -m --fork --mount-proc --kill-child sh -c "read -r go <\"\$0\" && exec \"\$@\"" "$1" "$2" --dir "$0" --entries 20 --prefix unmapped --children 3 --child-stop --print-pids' \
		"$NSD" "$WORK/unmapped.go" "$FORKJIT" >"$WORK/unmapped.out" 2>&1 &
	u=$!
	BG_PIDS+=("$u")
	find_pid sh_pid 5 ns_init_sh "$u"
	[ -n "$sh_pid" ] || { fail "unshare_userns_unmapped: no shell in the new namespaces under $u"; return; }
	echo "0 100000 65536" >"/proc/$sh_pid/uid_map" && echo "0 100000 65536" >"/proc/$sh_pid/gid_map" ||
		{ fail "unshare_userns_unmapped: cannot write the namespace's id maps"; return; }
	echo go >"$WORK/unmapped.go"
	fj=$sh_pid  # the shell execs the JIT
	check "unshare_userns_unmapped: its 3 children were forked" \
		wait_for 10 eval '[ "$(grep -c "^child " "$WORK/unmapped.out")" = 3 ]'
	check "unshare_userns_unmapped: the copies are refused: uid 0 has no id in the namespace (counted)" \
		wait_for 10 status_ge "$d" ns_writes_refused_unmapped 1
	check "unshare_userns_unmapped: and said so, with the uid and gid" \
		grep -q "would get ids its user namespace does not map (uid 0, gid 0)" "$AGENT_LOG"
	for c in $(awk '$1 == "child" { print $2 }' "$WORK/unmapped.out"); do
		hp=
		find_pid hp 5 child_with_nspid "$fj" "$c" || {
			say "    unshare_userns_unmapped: no child at namespace pid $c under $fj; its children:"
			children_of "$fj" | sed 's/^/      /'
		}
		hps+=("$hp")
	done
	for hp in "${hps[@]}"; do
		n=$((n + 1))
		[ -n "$hp" ] && wait_for 10 map_has "$d/perf-$hp.map" unmapped 20 && ok=$((ok + 1))
	done
	check "unshare_userns_unmapped: each child's mirror on the host holds the parent's 20 all the same ($ok of $n)" \
		test "$ok" = 3 -a "$n" = 3
	check "unshare_userns_unmapped: nothing was created in the namespace's directory but the JIT's own map" \
		eval '[ "$(ls "/proc/$fj/root$NSD")" = perf-1.map ]'
	continue_children "$fj"
	stop_agent || fail "unshare_userns_unmapped: perfmapd exited non-zero"
}

# Rootless podman: a user with a subordinate uid range (/etc/subuid) runs a
# container from a directory; root in it is that user, its other ids the
# range. The user, its ranges and its storage are made here and removed at
# the end. SKIPPED (counted) where rootless podman cannot run: no newuidmap
# (Debian: uidmap), or podman refuses.
RL_USER=
rootless_done() {
	[ -n "$RL_USER" ] || return 0
	pkill -9 -u "$RL_USER" 2>/dev/null
	wait_for 5 eval '! pgrep -u "$RL_USER" >/dev/null'
	userdel "$RL_USER" 2>/dev/null
	sed -i "/^$RL_USER:/d" /etc/subuid /etc/subgid
	RL_USER=
}
# as_rootless CMD...: CMD as the rootless user, with its own home and runtime directory.
as_rootless() {
	setpriv --reuid="$RL_USER" --regid="$RL_USER" --init-groups -- \
		env HOME="$WORK/rl-home" XDG_RUNTIME_DIR="$WORK/rl-run" "$@"
}
test_podman_rootless() {
	local d='' a r uid out=$WORK/rootless.out u fj
	command -v newuidmap >/dev/null ||
		{ skip "podman_rootless: no newuidmap (Debian: uidmap), rootless podman cannot run"; return; }
	user_bins
	RL_USER=pmrl${WORK##*.}
	RL_USER=${RL_USER,,}
	useradd -M -d "$WORK/rl-home" -s /bin/sh "$RL_USER" || { fail "podman_rootless: useradd failed"; return; }
	uid=$(id -u "$RL_USER")
	echo "$RL_USER:400000:65536" >>/etc/subuid
	echo "$RL_USER:400000:65536" >>/etc/subgid
	install -d -m 700 -o "$RL_USER" -g "$RL_USER" "$WORK/rl-home" "$WORK/rl-run"
	r=$WORK/rl-home/rootfs
	as_rootless "$HERE/mkrootfs.sh" "$r" "$FORKJIT_STATIC" 2>/dev/null ||
		{ fail "podman_rootless: cannot build the container root as $RL_USER"; return; }
	if ! as_rootless podman --runtime runc --cgroup-manager cgroupfs --events-backend file run --rm \
		--network none --rootfs "$r" /bin/forkjit --dir /tmp --entries 1 >"$WORK/rl-pre.out" 2>&1; then
		skip "podman_rootless: rootless podman does not run here: $(grep -v '^time=' "$WORK/rl-pre.out" | head -c 300)"
		return
	fi
	agent_on rootless podman_rootless --retention 30 || return
	as_rootless podman --runtime runc --cgroup-manager cgroupfs --events-backend file run --rm \
		--network none --rootfs "$r" /bin/forkjit --dir /tmp --entries 20 --prefix rootless --children 3 \
		--wait-map-ms 15000 --child-stop --print-pids --report >"$out" 2>&1 &
	u=$!
	BG_PIDS+=("$u")
	fj=
	find_pid fj 20 pgrep -o -u "$RL_USER" -x forkjit
	[ -n "$fj" ] || { fail "podman_rootless: no JIT of $RL_USER"; return; }
	NSD=/tmp
	copies_in_ns podman_rootless rootless "$out" "$fj" "$uid"
	check "podman_rootless: 3 copies made in the container" status_ge "$d" ns_copies 3
	# Bounded: a JIT that never ends would hold the suite here, before its cleanup.
	if wait_for 30 eval '! kill -0 "$u" 2>/dev/null'; then
		wait "$u"
	else
		fail "podman_rootless: podman run did not end within 30 s of its JIT's checks"
	fi
	stop_agent || fail "podman_rootless: perfmapd exited non-zero"
}

# ---- running them ----

scenario_done() {
	kill_started
	rootless_done
	cleanup_agent
	sanitizer_check
}

pick_scenarios "$0" "$@"
preflight
SECONDS=0
run_scenarios "container tests"
rc=$?
say "container tests: ${SECONDS}s"
exit $rc
