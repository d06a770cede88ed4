#!/usr/bin/env bash
# The adversarial suite: an unprivileged local user (uid 65534) against a
# running perfmapd, which the suite starts on private directories (a sticky,
# world-writable map directory like /tmp, a run and an archive directory).
#
#   tests/security/run.sh BUILD_DIR [SCENARIO...]
#
# Every function named test_* below is a scenario (docs/security.md, "The
# adversarial suite", says what each proves); with no names, all run. Each
# asserts what the attack must not achieve: nothing written through a trap,
# no entry leaked into a file of another uid, no other user's map lost, the
# agent neither hangs nor dies, well-behaved processes of another uid keep
# getting their copies (fork-to-map p99 under 5 ms where it is measured), and
# one clear log line per trap, with no forged or raw line in the log.
#
# Needs root and BPF: without them it FAILS with the reason, unless
# PERFMAPD_SKIP_BPF=1, which skips it with a loud banner.
set -u
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SCENARIO...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/pmsec.XXXXXX)  # short: the socket path holds it twice
. "$HERE/../agent/lib.sh"

FORKJIT=$BUILD/tests/forkjit
PIDAT=$BUILD/tests/pidat
BIN=$WORK/bin              # what the attacker runs, where uid 65534 can read it
ATTACK=$BIN/attack.py
PY=/usr/bin/python3         # the system one: uid 65534 cannot reach root's pyenv
LAT_MAX_US=10000           # the agent's fork-to-link p99 bound for a well-behaved process
CONTROL_P99=               # the same JIT's p99 beside a mere busy loop of uid 65534
HWM_MAX_KB=102400          # the agent's peak resident memory bound
BG_PIDS=()                 # attackers and victims in the background

cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	cleanup_agent
	# The attacker's detached processes (a swapper outliving its parent).
	kill_attackers
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
# Only processes of uid 65534 running this suite's own programs (attack.py,
# the namespaces made over its directories), by pid; a namespace's processes
# die with the unshare(1) that made it (--kill-child).
kill_attackers() {
	local p
	for p in $(pgrep -u 65534 -f "$WORK/" 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapd adversarial suite"  # what skip_or_fail() (lib.sh) names

preflight() {
	local log=$WORK/preflight.log
	[ "$(id -u)" = 0 ] || skip_or_fail "not root: BPF programs cannot be loaded, uid 65534 cannot be played"
	[ -r /sys/kernel/btf/vmlinux ] || skip_or_fail "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
	command -v setpriv >/dev/null || { say "FAIL: setpriv (util-linux) is missing"; exit 1; }
	mkdir -m 1777 "$WORK/pf-maps"
	if ! start_agent "$log" --map-dir "$WORK/pf-maps" --run-dir "$WORK/pf-run" \
		--archive-dir "$WORK/pf-archive"; then
		grep -q "bpf: cannot load" "$log" &&
			skip_or_fail "perfmapd could not load its BPF program: $(grep -m1 'bpf: cannot load' "$log")"
		say "FAIL: perfmapd did not start, and not for BPF: $(grep -m1 error "$log")"
		exit 1
	fi
	stop_agent || { say "FAIL: preflight: perfmapd exited non-zero after SIGTERM"; exit 1; }
}

# ---- the attacker, the victims, the agent ----

as_attacker() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

# A scenario's private directories: $S, the map directory $d (sticky, 1777),
# the archive $a and $RUN_DIR.
new_dirs() {
	S=$WORK/$1
	mkdir -m 711 "$S"
	d=$S/maps
	mkdir -m 1777 "$d"
	a=$S/archive
	RUN_DIR=$S/run
}

# start_in LOGNAME ARGS...: the agent on this scenario's directories.
start_in() {
	local log=$1
	shift
	# Writeback and deletions left by earlier scenarios and suites stall every
	# metadata operation in the directory, the agent's and the runtimes' alike,
	# for up to seconds (ext4 here is mounted with discard: a commit after
	# gigabytes were deleted waits for their discards). The latency checks
	# measure what the attacker causes: each scenario begins on a quiet disk.
	sync
	start_agent "$S/$log" --map-dir "$d" --archive-dir "$a" --run-dir "$RUN_DIR" "$@" ||
		{ fail "$SCENARIO: perfmapd did not start"; return 1; }
}

start_sec() { new_dirs "$1"; shift; start_in agent.log "$@"; }

answers() {
	[ "$(timeout 5 "$BUILD/perfmapctl" status --all --map-dir "$d" --run-dir "$RUN_DIR" 2>/dev/null |
		awk '$1 == "pid:" { print $2 }')" = "$AGENT_PID" ]
}
agent_ok() {
	check "$1: the agent is alive (pid $AGENT_PID) and its status answers within 5 s" \
		eval 'kill -0 "$AGENT_PID" 2>/dev/null && answers'
}

# Every line is the agent's own ("perfmapd: "), none is forged, and none
# carries a byte outside printable ASCII (a control byte or invalid UTF-8
# from a name the attacker chose).
log_clean() {
	local foreign forged raw
	foreign=$(LC_ALL=C grep -vc '^perfmapd: ' "$AGENT_LOG")
	forged=$(LC_ALL=C grep -c '^perfmapd: error: root ok' "$AGENT_LOG")
	raw=$(LC_ALL=C grep -c '[^[:print:]]' "$AGENT_LOG")
	check "$1: log: no line that is not the agent's ($foreign), none forged ($forged), no raw byte ($raw)" \
		test "$foreign$forged$raw" = 000
	[ "$foreign$forged$raw" = 000 ] ||
		LC_ALL=C grep -vn '^perfmapd: [[:print:]]*$' "$AGENT_LOG" | head -3 | cat -v | sed 's/^/    /'
}

# trap_lines NAME: warnings and errors naming NAME in the map directory.
trap_lines() {
	LC_ALL=C grep -E '^perfmapd: (error|warning): ' "$AGENT_LOG" | grep -cF "$d/$1"
}

# The agent's judgments of a process's copy or map: lines naming "PID -> " or its map.
judged() {
	[ "$(LC_ALL=C grep -cE "[ (]$1 -> |/perf-$1\.map" "$AGENT_LOG")" -ge "$2" ]
}

du_bytes() { du -s -B1 "$1" | cut -f1; }
vm_hwm_kb() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$AGENT_PID/status"; }
archived_pid() { ls "$a"/perf-"$1"-*.map >/dev/null 2>&1; }
archived_has() { grep -qs "$2" "$a"/perf-"$1"-*.map; }

# No file of uid 65534 in the map directory holds PATTERN.
no_leak() { ! find "$d" -user 65534 -type f -exec grep -l "$1" {} + 2>/dev/null | grep -q .; }

# A root JIT that forks N children one at a time, GAP ms apart, each waiting
# for its copy: victim_start runs it in the background while an attack runs,
# victim_check judges (the latency bound too, unless told "nolat"; a third
# argument is the agent's own bound in us, 10 ms by default).
victim_start() {
	VICTIM_N=$1
	VICTIM_OUT=$S/victim.$RANDOM.out
	"$FORKJIT" --dir "$d" --entries 100 --children "$1" --serial --gap-ms "${2:-0}" \
		--wait-map-ms 5000 --report --prefix victim >"$VICTIM_OUT" 2>&1 &
	VICTIM_PID=$!
	BG_PIDS+=("$VICTIM_PID")
}
victim_check() {
	local complete p99 bound n ap95 ap99 amax
	wait "$VICTIM_PID"
	complete=$(awk '$1 == "complete" { print $2 }' "$VICTIM_OUT")
	p99=$(awk '$1 == "latency_us" { print $5 }' "$VICTIM_OUT")
	check "$1: a root JIT's $VICTIM_N children all got their copies ($complete)" \
		test "$complete" = "$VICTIM_N/$VICTIM_N"
	[ "${2:-}" = nolat ] && return
	control_p99
	# The agent's part, fork to link by its own clocks (its "created" lines):
	# what the agent controls. The goal is 5 ms at p99 (met in most runs here:
	# docs/security.md); the test's bound is 10 ms, or three times the control
	# on a loaded host, because the agent waits for one of two CPUs beside the
	# attacker's loop like any process. It is judged at the 95th percentile:
	# one stall of the host's file system (ext4 here journals with discard: a
	# commit after a large deletion holds every operation on the directory,
	# the agent's and the runtimes' alike, for up to a second) falls on the
	# two or three serial copies around it, which is a p99 of 100 samples; an
	# attack that blocks the agent delays far more than five in a hundred.
	# Before issue 9 these attacks took 20 ms to 12 s.
	LC_ALL=C grep "copy $VICTIM_PID -> [0-9]* .* created with" "$AGENT_LOG" |
		sed -n 's/.*; \([0-9.]*\) ms after the fork.*/\1/p' | sort -n >"$VICTIM_OUT.agent"
	n=$(wc -l <"$VICTIM_OUT.agent")
	ap95=$(awk -v n="$n" 'NR == int((n * 95 + 99) / 100) { print; exit }' "$VICTIM_OUT.agent")
	ap99=$(awk -v n="$n" 'NR == int((n * 99 + 99) / 100) { print; exit }' "$VICTIM_OUT.agent")
	amax=$(tail -n 1 "$VICTIM_OUT.agent")
	bound=$(awk -v m="${3:-$LAT_MAX_US}" -v c="$CONTROL_P99" 'BEGIN { printf "%d", (3 * c > m ? 3 * c : m) }')
	check "$1: the agent's fork-to-link p95 ${ap95:-?} ms < $bound us ($((${3:-$LAT_MAX_US} / 1000)) ms, or three times the control's $CONTROL_P99 us; $n copies; p99 ${ap99:-?} ms, max ${amax:-?} ms)" \
		awk -v p="${ap95:-1e9}" -v n="$n" -v want="$VICTIM_N" -v m="$bound" \
			'BEGIN { exit !(n >= want * 9 / 10 && p * 1000 < m) }'
	# What each child sees also holds the host's scheduling (two vCPUs, one of
	# them the attacker's): said beside the control, not judged. One hiccup of
	# the host in 60 samples is its p99; the agent's part above is the bound.
	say "   ($1: as the children saw it, fork-to-map p99 ${p99:-?} us; beside a mere busy loop, $CONTROL_P99 us)"
}

# What this host gives without any attack on the agent: the victim beside a
# busy loop of uid 65534 as long (the attacks take a core too). On two busy
# cores that alone can pass 5 ms; the bound is then twice it, and says so.
control_p99() {
	local hog out=$S/control.out
	[ -n "$CONTROL_P99" ] && return
	as_attacker "$PY" -c 'import time
end = time.monotonic() + 3.5
while time.monotonic() < end:
    pass' &
	hog=$!
	"$FORKJIT" --dir "$d" --entries 100 --children 120 --serial --gap-ms 25 \
		--wait-map-ms 5000 --report --prefix control >"$out" 2>&1
	wait "$hog"
	CONTROL_P99=$(awk '$1 == "latency_us" { printf "%d", $5 }' "$out")
	say "   (control: fork-to-map p99 ${CONTROL_P99:-?} us beside a busy loop)"
	CONTROL_P99=${CONTROL_P99:-0}
}
# After an attack: the copies still come (the latency is judged during attacks).
victim_forks() { victim_start "$2" "${3:-0}"; victim_check "$1" nolat; }

# settle: a root process writes its map and exits; once the agent archived
# it (after a short --retention), it has worked through what came before.
settle() {
	local pid
	"$FORKJIT" --dir "$d" --entries 3 --prefix sentinel &
	pid=$!
	wait "$pid"
	wait_for 30 archived_pid "$pid" ||
		fail "$SCENARIO: a sentinel map was not archived within 30 s: the archiver is stuck"
}

# ---- scenarios ----

# plant KIND PATH: the attacker's trap at PATH.
plant() {
	local kind=$1 path=$2
	case $kind in
	symlink) as_attacker ln -s "$WORK/precious" "$path" ;;
	dotdot) as_attacker ln -s ../../precious "$path" ;;
	fifo) as_attacker mkfifo "$path" ;;
	dir) as_attacker mkdir "$path" ;;
	hardlink)
		as_attacker sh -c 'printf "1000 10 attacker_own\n" >"$1" && ln "$1" "$2"' _ "$path.own" "$path" ;;
	squat) as_attacker sh -c 'printf "1000 10 attacker_squat\n" >"$1"' _ "$path" ;;
	esac
}

# intact KIND PATH: the trap is as the attacker made it.
intact() {
	local kind=$1 path=$2
	case $kind in
	symlink | dotdot) [ -L "$path" ] && cmp -s "$path" <(printf '1000 10 precious_root_entry\n') ;;
	fifo) [ -p "$path" ] ;;
	dir) [ -d "$path" ] && [ -z "$(ls -A "$path")" ] ;;
	hardlink)
		[ "$(stat -c %h:%u "$path")" = 2:65534 ] && cmp -s "$path" <(printf '1000 10 attacker_own\n') ;;
	squat) [ "$(stat -c %u "$path")" = 65534 ] && cmp -s "$path" <(printf '1000 10 attacker_squat\n') ;;
	esac
}

# Traps at a root child's map path, the child forced onto a known pid
# (ns_last_pid): refused today; the archiver meets them too (--retention 2s).
test_traps() {
	local kind base pid rc attempt trapped=() t n
	printf '1000 10 precious_root_entry\n' >"$WORK/precious"
	chmod 644 "$WORK/precious"
	start_sec traps --retention 2s || return
	for kind in symlink dotdot fifo dir hardlink squat; do
		for attempt in 1 2 3 4 5 6; do
			base=$(( ($(cat /proc/sys/kernel/ns_last_pid) + 300) % 30000 + 1000 ))
			pid=$((base + 1))
			rm -rf "$d/perf-$pid.map" "$d/perf-$pid.map.own"
			plant "$kind" "$d/perf-$pid.map"
			"$PIDAT" "$base" "$FORKJIT" --dir "$d" --entries 10 --children 1 --wait-map-ms 1000 \
				--print-pids --prefix "victim_$kind" >"$S/$kind.out" 2>&1
			rc=$?
			grep -q "child $pid\$" "$S/$kind.out" && break
		done
		if ! grep -q "child $pid\$" "$S/$kind.out"; then
			skip "$kind: six times the child got another pid than the trap's (a busy host)"
			continue
		fi
		trapped+=("$kind:$pid")
		if [ "$kind" = squat ] && [ "$rc" = 0 ]; then
			# Seen first as a map without a process: moved aside as stale, the child got its copy.
			check "traps (squat): the child's copy is exactly its parent's; the squatted file went aside as stale" \
				grep -qs attacker_squat "$a/perf-$pid-stale"*.map
		else
			check "traps ($kind): the child got nothing through the trap (forkjit rc $rc)" test "$rc" = 1
			check "traps ($kind): the trap is as the attacker left it" intact "$kind" "$d/perf-$pid.map"
		fi
		agent_ok "traps ($kind)"
	done
	check "traps: the root-owned file the symlinks point to is unchanged" \
		cmp -s "$WORK/precious" <(printf '1000 10 precious_root_entry\n')
	check "traps: no victim entry in any file of uid 65534" no_leak victim_
	settle
	for t in "${trapped[@]}"; do
		kind=${t%%:*}
		pid=${t#*:}
		n=$(trap_lines "perf-$pid.map")
		if [ "$kind" = squat ]; then
			check "traps (squat): at most one warning for it ($n)" test "$n" -le 1
			check "traps (squat): its lines are in no archive named for the root child" \
				eval "! grep -ls attacker_squat '$a'/perf-$pid-*.map | grep -qv -- '-stale'"
			continue
		fi
		check "traps ($kind): one clear log line for it ($n)" test "$n" = 1
		check "traps ($kind): after the archiver's turn, still as left" intact "$kind" "$d/perf-$pid.map"
	done
	victim_forks traps 20
	agent_ok traps
	log_clean traps
	stop_agent || fail "traps: perfmapd exited non-zero"
}

# The attacker's own map path swapped between a symlink to a root-only file
# and a regular file, thousands of times a second, while it forks (the
# copier) and after it exits (the archiver, --retention 1s).
test_swap_race() {
	local secret=$WORK/secret out swaps kids
	printf '1000 10 secret_root_entry\n' >"$secret"
	chmod 600 "$secret"
	start_sec swap --retention 1s || return
	victim_start 100 30
	out=$S/swap.out
	as_attacker "$PY" "$ATTACK" swapfork "$d" "$secret" 3 >"$out" 2>&1
	victim_check swap_race
	wait_for 10 grep -q '^swaps' "$out"
	swaps=$(awk '$1 == "swaps" { print $2 }' "$out")
	kids=$(grep -c '^child' "$out")
	check "swap_race: the race ran ($swaps swaps, $kids forks)" eval '[ "${swaps:-0}" -ge 1000 ] && [ "$kids" -ge 50 ]'
	settle
	check "swap_race: the symlinks' root-only target is unchanged" \
		cmp -s "$secret" <(printf '1000 10 secret_root_entry\n')
	check "swap_race: its entry is in no copy and no archive" eval "! grep -rqs secret_root_entry '$d' '$a'"
	agent_ok swap_race
	log_clean swap_race
	stop_agent || fail "swap_race: perfmapd exited non-zero"
}

hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }

# Names with control bytes and invalid UTF-8: a comm set by prctl, the name
# of an exec'd file, files in the map directory (seen at start).
test_names() {
	local name out parent n
	new_dirs names
	as_attacker sh -c 'for f; do printf "1000 10 attacker\n" >"$f"; done' _ \
		"$d/.perfmapd.perf-1-1.map"$'\nperfmapd: error: root ok' \
		"$d/perf-1.map"$'\nperfmapd: error: root ok' \
		"$d/.perfmapd.perf-2-2"$'\xff\xfe\x1b[2J.map'
	start_in agent.log --retention 1s || return
	n=0
	for name in $'\nerror: root ok' $'\xff\xfe\x1b[2J\x07bad\xc3'; do
		n=$((n + 1))
		out=$S/comm.$n.out
		as_attacker "$PY" "$ATTACK" mapfork "$d" --comm "$(hex "$name")" --children 2 --hold 0.3 >"$out"
		parent=$(awk '$1 == "parent" { print $2 }' "$out")
		check "names: the agent judged the copies to comm $(printf %q "$name")'s children" \
			wait_for 10 judged "$parent" 2
		# The same name on an executable: the comm an exec gives.
		cp "$FORKJIT" "$BIN/$name"
		check "names: the children of the exec'd file $(printf %q "$name") got their copies" \
			as_attacker "$BIN/$name" --dir "$d" --entries 5 --children 2 --wait-map-ms 2000 --prefix "exe$n"
	done
	settle
	victim_forks names 10
	agent_ok names
	log_clean names
	stop_agent || fail "names: perfmapd exited non-zero"
}

# 100 KB lines in a parent's map, five forks.
test_long_lines() {
	local out parent pbytes biggest
	start_sec long --retention 1s || return
	out=$S/long.out
	victim_start 60 20
	as_attacker "$PY" "$ATTACK" mapfork "$d" --long 20:102400 --children 5 --hold 1 >"$out"
	victim_check long_lines
	parent=$(awk '$1 == "parent" { print $2 }' "$out")
	check "long_lines: the agent judged the 5 children" wait_for 15 judged "$parent" 5
	pbytes=$(cat "$d/perf-$parent.map" 2>/dev/null | wc -c)
	biggest=$(for c in $(awk '$1 == "child" { print $2 }' "$out"); do
		stat -c %s "$d/perf-$c.map" 2>/dev/null || echo 0; done | sort -n | tail -1)
	check "long_lines: no child's copy larger than the parent's map ($biggest <= $pbytes)" test "${biggest:-0}" -le "$pbytes"
	check "long_lines: every log line is at most 1024 bytes" \
		awk 'length($0) > 1024 { exit 1 }' "$AGENT_LOG"
	check "long_lines: the agent's peak memory $(vm_hwm_kb) kB < $HWM_MAX_KB kB" test "$(vm_hwm_kb)" -lt "$HWM_MAX_KB"
	settle
	agent_ok long_lines
	log_clean long_lines
	stop_agent || fail "long_lines: perfmapd exited non-zero"
}

# Sparse maps: 10 GB apparent (truncate) then forks; 250 MB apparent with 10
# forks while a root JIT forks (issue 9, item 1). What the agent writes is
# bounded by what the parent really wrote, not by its apparent size.
test_sparse() {
	local out parent before after
	# The default bound, said: an agent that copied holes would write at most 256 MiB a child.
	start_sec sparse --max-map-bytes 256M || return
	before=$(du_bytes "$d")
	out=$S/sparse10g.out
	as_attacker "$PY" "$ATTACK" mapfork "$d" --sparse $((10 << 30)) --children 5 --hold 0.5 >"$out"
	parent=$(awk '$1 == "parent" { print $2 }' "$out")
	check "sparse: 10 GB: the agent judged the 5 children" wait_for 30 judged "$parent" 5
	after=$(du_bytes "$d")
	check "sparse: 10 GB: the map directory grew by $((after - before)) bytes on disk (< 64 MiB)" \
		test $((after - before)) -lt $((64 << 20))
	before=$after
	out=$S/sparse250m.out
	victim_start 100 20
	as_attacker "$PY" "$ATTACK" mapfork "$d" --sparse $((250 << 20)) --children 10 --hold 1 >"$out"
	victim_check "sparse (250 MB, 10 forks)"
	parent=$(awk '$1 == "parent" { print $2 }' "$out")
	check "sparse: 250 MB: the agent judged the 10 children" wait_for 60 judged "$parent" 10
	after=$(du_bytes "$d")
	check "sparse: 250 MB: the map directory grew by $((after - before)) bytes on disk (< 64 MiB)" \
		test $((after - before)) -lt $((64 << 20))
	check "sparse: the copy_bytes counter agrees ($(status_of "$d" copy_bytes) < 64 MiB)" \
		eval '[ -n "$(status_of "$d" copy_bytes)" ] && [ "$(status_of "$d" copy_bytes)" -lt $((64 << 20)) ]'
	agent_ok sparse
	log_clean sparse
	stop_agent || fail "sparse: perfmapd exited non-zero"
	rm -f "$d"/perf-*.map   # up to gigabytes on an agent that copies holes
}

# Archive quota: the attacker's two maps nearly fill it, their mtimes set to
# 2035; then three root maps arrive (issue 9, item 2).
test_archive_quota() {
	local data=$WORK/quota.map size quota p i v n=0
	python3 -c 'import sys; sys.stdout.write("".join("%x 10 quota_attacker_%d\n" % (0x30000000 + 16 * i, i) for i in range(40000)))' \
		>"$WORK/quota.raw"
	"$BUILD/perfmapctl" compact "$WORK/quota.raw" -o "$data" >/dev/null 2>&1
	chmod 644 "$data"
	size=$(stat -c %s "$data")
	quota=$((2 * size + 8000))
	start_sec quota --retention 1s --archive-max-bytes "$quota" || return
	for i in 1 2; do
		as_attacker "$PY" "$ATTACK" mapfork "$d" --lines 0 --from "$data" --mtime 2051222400 \
			>"$S/attacker.$i.out"
	done
	check "archive_quota: the attacker's two maps ($size bytes each, quota $quota) were archived" \
		wait_for 20 status_ge "$d" archived 2
	for i in 1 2 3; do
		"$FORKJIT" --dir "$d" --entries 400 --prefix "quota_v$i" --print-pids >"$S/victim.$i.out" &
		v[$i]=$!
		n=$(status_of "$d" archived)
		wait "${v[$i]}"
		wait_for 20 status_ge "$d" archived $((n + 1))
	done
	settle
	n=0
	for i in 1 2 3; do
		archived_has "${v[$i]}" "quota_v${i}_399" && n=$((n + 1))
	done
	check "archive_quota: all 3 root maps are in the archive after the attacker's 2035 maps ($n)" test "$n" = 3
	check "archive_quota: the archive is within its quota" \
		test "$(cat "$a"/perf-*.map 2>/dev/null | wc -c)" -le "$quota"
	check "archive_quota: the quota was under pressure (evictions $(status_of "$d" archive_evicted))" \
		status_ge "$d" archive_evicted 1
	agent_ok archive_quota
	log_clean archive_quota
	stop_agent || fail "archive_quota: perfmapd exited non-zero"
}

# Staged names (issue 9, item 3): the victim's predictable staged name taken
# first; a staged file planted under an existing archive's name, then a restart.
test_staged() {
	local vp ticks arch planted
	start_sec staged --retention 1s || return
	"$FORKJIT" --dir "$d" --entries 20 --prefix staged_v1 --hold-ms 1500 &
	vp=$!
	wait_for 5 test -s "$d/perf-$vp.map"
	ticks=$(awk '{ print $22 }' "/proc/$vp/stat")
	as_attacker sh -c 'printf "1000 10 attacker_staged\n" >"$1"' _ "$d/.perfmapd.perf-$vp-$ticks.map"
	wait "$vp"
	check "staged: the root map is archived though its staged name was taken" \
		wait_for 10 archived_has "$vp" staged_v1_19
	check "staged: nothing of the squatted name went to the archive" eval "! grep -rqs attacker_ '$a'"
	"$FORKJIT" --dir "$d" --entries 20 --prefix staged_v2 &
	vp=$!
	wait "$vp"
	if ! wait_for 10 archived_pid "$vp"; then
		fail "staged: a plain root map was not archived"
		stop_agent
		return
	fi
	arch=$(cd "$a" && ls perf-"$vp"-*.map | head -1)
	planted=.perfmapd.$arch
	as_attacker sh -c 'printf "1000 10 attacker_planted\n" >"$1"' _ "$d/$planted"
	stop_agent || fail "staged: perfmapd exited non-zero"
	start_in agent2.log --retention 1s || return
	settle
	check "staged: after a restart, the archived $arch still holds root's 20 entries" \
		test "$(grep -c staged_v2_ "$a/$arch")" = 20
	check "staged: and none of the planted staged file's" eval "! grep -rqs attacker_planted '$a'"
	check "staged: one clear log line for the planted file ($(trap_lines "$planted"))" \
		test "$(trap_lines "$planted")" = 1
	check "staged: counted in archive_staged_refused ($(status_of "$d" archive_staged_refused))" \
		status_ge "$d" archive_staged_refused 1
	agent_ok staged
	log_clean staged
	stop_agent || fail "staged: perfmapd exited non-zero"
}

# 2,900 short-lived map holders against the agent's 1024 descriptors, soft and
# hard (issue 9, item 4): no EMFILE flood, and every map archived or left in place.
test_fd_holders() {
	local out n lost staged emfile last=-1 now stable=0 i
	start_sec fds --retention 1s || return
	# 1024 hard as well, once it runs: an agent raises its soft limit to the hard one at start.
	check "fd_holders: the agent's fd limit set to 1024, soft and hard" \
		prlimit --pid "$AGENT_PID" --nofile=1024:1024
	out=$S/holders.out
	as_attacker "$PY" "$ATTACK" holders "$d" 2900 >"$out"
	n=$(grep -c '^holder' "$out")
	check "fd_holders: 2900 holders wrote their maps and exited ($n)" test "$n" = 2900
	# Until no map is staged (the archive's worker links each, then removes its
	# staged name; none may be left, checked below), and no holder's map is left
	# at its path or that number stood still 3 s; 60 s at most.
	for i in $(seq 60); do
		inflight=$(ls -A "$d" | grep -c '^\.perfmapd\.')
		now=$(ls -A "$d" | grep -c '^perf-')
		if [ "$now" = "$last" ]; then
			stable=$((stable + 1))
		else
			stable=0
		fi
		[ "$inflight" = 0 ] && { [ "$now" = 0 ] || [ $stable -ge 3 ]; } && break
		last=$now
		sleep 1
	done
	# A staged name (.perfmapd.<random>.map) does not tell its pid: a map still
	# staged counts as lost here, and none may be (checked next).
	lost=$(comm -23 <(awk '$1 == "holder" { print $2 }' "$out" | sort -u) \
		<( { ls -A "$d" | sed -n 's/^perf-\([0-9]*\)\.map$/\1/p'
		     ls "$a" | sed -n 's/^perf-\([0-9]*\)-.*/\1/p'; } | sort -u) | wc -l)
	staged=$(ls -A "$d" | grep -c '^\.perfmapd\.')
	check "fd_holders: no map lost: each archived or at its path ($lost lost)" test "$lost" = 0
	check "fd_holders: none left half-way, staged until a restart ($staged)" test "$staged" = 0 ||
		{ ls -lA "$d" | grep '\.perfmapd\.' | head -5; grep -E 'archive|staged' "$AGENT_LOG" | tail -5; } | sed 's/^/  | /'
	emfile=$(grep -c 'Too many open files' "$AGENT_LOG")
	check "fd_holders: no EMFILE flood in the log ($emfile lines)" test "$emfile" -le 1
	victim_forks fd_holders 20
	agent_ok fd_holders
	log_clean fd_holders
	stop_agent || fail "fd_holders: perfmapd exited non-zero"
}

# A map of 10 million lines, its process gone (issue 9, item 5): archived in
# bounded memory, or left in place with a clear line; never lost.
test_memory() {
	local data=$WORK/10m.map out parent arch hwm
	python3 -c '
import sys
w = sys.stdout.write
for b in range(0, 10000000, 200000):
    w("".join("%x 1 jit\n" % (0x30000000 + 16 * i) for i in range(b, b + 200000)))' >"$data"
	chmod 644 "$data"
	start_sec memory --retention 1s || return
	out=$S/memory.out
	as_attacker "$PY" "$ATTACK" mapfork "$d" --lines 0 --from "$data" >"$out"
	parent=$(awk '$1 == "parent" { print $2 }' "$out")
	rm -f "$data"
	# Done: archived (and no staged file left), or a warning or error about it.
	check "memory: the agent dealt with the 10M-line map within 90 s" wait_for 90 eval \
		"{ archived_pid $parent && ! ls -a '$d' | grep -q '^\.perfmapd\.'; } ||
		 [ \$(trap_lines perf-$parent.map) -ge 1 ]"
	hwm=$(vm_hwm_kb)
	check "memory: the agent's peak memory ${hwm:-?} kB < $HWM_MAX_KB kB" test "${hwm:-999999999}" -lt "$HWM_MAX_KB"
	arch=$(ls "$a"/perf-"$parent"-*.map 2>/dev/null | head -1)
	check "memory: the map is not lost: archived whole or at its path" eval \
		"[ -n '$arch' ] && [ \$(wc -l <'$arch') = 10000000 ] || [ -f '$d/perf-$parent.map' ]"
	victim_forks memory 10
	agent_ok memory
	log_clean memory
	stop_agent || fail "memory: perfmapd exited non-zero"
	rm -f "$d"/perf-*.map "$a"/perf-*.map
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$AGENT_PID/stat"; }

# A relist storm (issue 9, item 6): 30,000 other files, a hard-linked trap,
# then names of pids without a process created and deleted fast.
test_relist() {
	local out t c0 c1 t0 ms pct churn attacker
	start_sec relist --retention 2s || return
	# The trap's pid: one without a process below the last given out (pids go upwards).
	t=$(( $(cat /proc/sys/kernel/ns_last_pid) - 50 ))
	while [ -e "/proc/$t" ]; do t=$((t - 1)); done
	out=$S/relist.out
	# 2,250 names a second: the issue's storm (45,000 in 20 s). At 10,000 and 55,000 a
	# second the directory's lock and ext4's inode allocator slow every create in it,
	# the agent's copies too (docs/security.md, 6).
	as_attacker "$PY" "$ATTACK" relist "$d" 4 30000 "$t" 2250 >"$out" &
	attacker=$!
	BG_PIDS+=("$attacker")
	wait_for 30 grep -q '^others' "$out"
	# The agent's CPU time over the churn alone, beside a root JIT's forks.
	c0=$(cpu_ticks)
	t0=$(date +%s%N)
	victim_start 120 25
	wait "$attacker"
	c1=$(cpu_ticks)
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	# 4.6 to 8.3 ms here at p99 (11 ms with two busy loops beside): not the
	# agent's work (2% of a core at this rate, by perf) nor the directory (an
	# O_TMPFILE and linkat() in it take 0.14 ms at p99 during the storm);
	# docs/security.md, 6. Bound at 15 ms; before issue 9, 16 to 44 ms.
	victim_check relist lat 15000
	churn=$(awk '$1 == "churn" { print $2 }' "$out")
	check "relist: the storm ran (${churn:-0} names created and deleted)" test "${churn:-0}" -ge 1000
	pct=$(( (c1 - c0) * 1000 * 100 / $(getconf CLK_TCK) / (ms > 0 ? ms : 1) ))
	check "relist: the agent used $pct% of a core during the storm (< 50%)" test "$pct" -lt 50
	check "relist: the hard-linked trap perf-$t.map warned about once ($(trap_lines "perf-$t.map"))" \
		test "$(trap_lines "perf-$t.map")" = 1
	check "relist: and left as it is" test "$(stat -c %h "$d/perf-$t.map" 2>/dev/null)" = 2
	check "relist: at most one listing a second ($(status_of "$d" rescans) rescans in $((ms / 1000)) s)" \
		eval '[ -n "$(status_of "$d" rescans)" ] && [ "$(status_of "$d" rescans)" -le $((ms / 1000 + 2)) ]'
	check "relist: at most 3 lines name it in all ($(grep -cF "$d/perf-$t.map" "$AGENT_LOG"))" \
		test "$(grep -cF "$d/perf-$t.map" "$AGENT_LOG")" -le 3
	agent_ok relist
	log_clean relist
	stop_agent || fail "relist: perfmapd exited non-zero"
}

# A flood of executable mappings (issue 11): every mmap of an executable
# page is a record in the agent's perf rings. The attacker pays a system call
# per record; the agent reads them at its ticks, a pass over /proc when the
# rings overflow, never more than one at a time; the victim's copies go on.
test_exec_flood() {
	local out t c0 c1 t0 ms pct attacker seen
	start_sec exec_flood --retention 2s || return
	check "exec_flood: executable mappings come from the perf rings" \
		eval '[ "$(status_of "$d" exec_mappings_source)" = perf-mmap2 ]'
	out=$S/flood.out
	c0=$(cpu_ticks)
	t0=$(date +%s%N)
	as_attacker "$BUILD/loadgen" mmapx 3000000 >"$out" &
	attacker=$!
	BG_PIDS+=("$attacker")
	victim_start 60 25
	wait "$attacker"
	c1=$(cpu_ticks)
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	victim_check exec_flood lat 15000
	seen=$(status_of "$d" exec_mappings_seen)
	check "exec_flood: the flood was seen (${seen:-0} executable mappings reported, $(status_of "$d" exec_mappings_lost) lost)" \
		test "${seen:-0}" -ge 100000
	pct=$(( (c1 - c0) * 1000 * 100 / $(getconf CLK_TCK) / (ms > 0 ? ms : 1) ))
	check "exec_flood: the agent used $pct% of a core during the flood (< 50%)" test "$pct" -lt 50
	check "exec_flood: the attacker's JIT code without a map is said once at most" \
		test "$(grep -c "lost symbols: $attacker " "$AGENT_LOG")" -le 1
	check "exec_flood: at most one /proc pass runs at a time ($(status_of "$d" exec_mappings_proc_passes) passes)" \
		eval '[ "$(status_of "$d" exec_mappings_proc_passes)" -le $((ms / 100 + 2)) ]'
	agent_ok exec_flood
	log_clean exec_flood
	stop_agent || fail "exec_flood: perfmapd exited non-zero"
}

# The status socket (issue 9, item 8): root only; a flood of connections
# from root does not stop copies.
test_status_socket() {
	local sock out flooder
	start_sec socket || return
	sock=$(ls "$RUN_DIR"/*.sock 2>/dev/null | head -1)
	check "status_socket: the socket is mode 0600 ($(stat -c %a "$sock"))" test "$(stat -c %a "$sock")" = 600
	check "status_socket: uid 65534 cannot read the status" eval \
		"! as_attacker '$BIN/perfmapctl' status --map-dir '$d' --run-dir '$RUN_DIR' >/dev/null 2>&1"
	out=$S/flood.out
	python3 "$ATTACK" flood "$sock" 4 >"$out" &
	flooder=$!
	BG_PIDS+=("$flooder")
	victim_start 120 25
	agent_ok "status_socket (during a flood)"
	victim_check status_socket
	wait "$flooder"
	# An agent may answer only so many a second (100, say): 200 in 4 s still kept it busy.
	check "status_socket: the flood ran ($(awk '$1 == "connected" { print $2 }' "$out") connections answered)" \
		test "$(awk '$1 == "connected" { print $2 }' "$out")" -ge 200
	agent_ok status_socket
	log_clean status_socket
	stop_agent || fail "status_socket: perfmapd exited non-zero"
}

# ---- user namespaces: a root the attacker makes itself (issue 20) ----
#
# uid 65534 makes its own user, pid and mount namespaces (unshare -Urpm),
# where it is root and may bind-mount any directory it can search over its
# /tmp. The agent must act for its processes only with what uid 65534 may do
# on the host: read no file of root's as its map, create nothing in and
# remove nothing from a directory it could not write. A canary of root's in
# each case stays unread (in no file of the map or archive directory),
# unchanged and undeleted.

# The attacker's programs, where uid 65534 can run them.
ns_bins() {
	cp "$FORKJIT" "$PIDAT" "$BIN/" && chmod 755 "$BIN/forkjit" "$BIN/pidat"
}

# ns_attacker OUT CMD...: CMD as uid 65534 in namespaces of its own (user,
# pid, mount), as root there, its /proc that of its pid namespace, output to
# OUT, in the background: ATK is the unshare(1) that made them (its
# namespace dies with it), recorded for the cleanup. OVER=DIR: DIR
# bind-mounted over its /tmp first, its pid namespace made after the mount
# (its pid 1 never saw the host's /tmp). SHARE=1: no mount namespace at all.
ns_attacker() {
	local out=$1
	shift
	if [ -n "${OVER:-}" ]; then
		setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare -Urm --kill-child sh -c \
			'mount --bind "$0" /tmp && exec unshare -p --fork --mount-proc --kill-child "$@"' \
			"$OVER" "$@" >>"$out" 2>&1 &
	elif [ -n "${SHARE:-}" ]; then
		setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare -Urp --fork --kill-child \
			"$@" >>"$out" 2>&1 &
	else
		setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare -Urpm --fork --mount-proc \
			--kill-child "$@" >>"$out" 2>&1 &
	fi
	ATK=$!
	BG_PIDS+=("$ATK")
}

# A directory of root's (0755) under the scenario's, holding root's 0600
# canary maps at perf-N.map for each N given: canary_dir DIR N...
canary_dir() {
	local dir=$1 n
	shift
	mkdir -m 755 "$dir"
	for n in "$@"; do
		printf '%x 10 canary_%s_%d\nTOP-SECRET text line %s %d\n' $((0x1000 * n)) "$CANARY" "$n" \
			"$CANARY" "$n" >"$dir/perf-$n.map"
		chmod 600 "$dir/perf-$n.map"
	done
	CANARY_SUM=$(cd "$dir" && ls -la --time-style=+ . | sha1sum)$(cat "$dir"/* | sha1sum)
}
# canary_intact DIR: exactly as canary_dir left it: names, owners, modes, bytes.
canary_intact() {
	[ "$(cd "$1" && ls -la --time-style=+ . | sha1sum)$(cat "$1"/* | sha1sum)" = "$CANARY_SUM" ]
}
# No file in the map or archive directory (any owner) holds the canary.
canary_unread() { ! grep -rqs -e "$CANARY" -e "TOP-SECRET" "$d" "$a"; }

# The host pid of the process in namespaces under ROOT whose innermost pid is NSPID.
ns_pid_of() {
	local p=$1 c
	[ "$(awk '$1 == "NSpid:" { print $NF }' "/proc/$p/status" 2>/dev/null)" = "$2" ] &&
		{ echo "$p"; return 0; }
	for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
		ns_pid_of "$c" "$2" && return 0
	done
	return 1
}

# Item 1: the attacker binds a root directory (0755, root's 0600 perf-1.map
# and perf-2.map) over its /tmp; its processes at namespace pids 1 and 2
# would have those as their maps. Refused as root's files in a namespace
# whose root is uid 65534: nothing mirrored, nothing archived.
test_userns_bind_read() {
	local atk held
	CANARY=bindread$RANDOM
	start_sec userns_bind_read --retention 1 || return
	ns_bins
	canary_dir "$S/rootdir" 1 2
	chmod 711 "$S"
	# Namespace pid 1 (pidat) puts a shell at pid 2, which stops itself.
	OVER=$S/rootdir ns_attacker "$S/attacker.out" "$BIN/pidat" 2 sh -c 'kill -STOP $$'
	atk=$ATK
	check "userns_bind_read: the attacker holds namespace pids 1 and 2 over root's directory" \
		wait_for 10 eval 'held=$(ns_pid_of "$atk" 2) && is_stopped "$held"'
	check "userns_bind_read: both refused as root's files, not the attacker's maps (refused_owner)" \
		wait_for 10 status_ge "$d" refused_owner 2
	kill -CONT "$held" 2>/dev/null
	wait "$atk" 2>/dev/null
	settle
	check "userns_bind_read: the canary is in no map or archive (read by nobody)" canary_unread
	check "userns_bind_read: root's directory and maps are as they were" canary_intact "$S/rootdir"
	agent_ok userns_bind_read
	log_clean userns_bind_read
	stop_agent || fail "userns_bind_read: perfmapd exited non-zero"
}

# Item 2: root's directory (0755) bound over the attacker's /tmp holds the
# attacker's own map (uid 65534's perf-1.map, which root made for it, as a
# service's data directory would) and root's canary; its JIT at namespace pid
# 1 forks three children. The agent must not make their copies there (uid
# 65534 cannot create a file in it): they go to the children's mirrors on
# the host alone, whole. Then the same with the agent in a mount namespace
# of its own where that directory is read-only (ProtectSystem=strict): still
# nothing is created, whatever the agent's own view.
test_userns_bind_write() {
	local atk p n=0 round
	CANARY=bindwrite$RANDOM
	ns_bins
	new_dirs userns_bind_write
	chmod 711 "$S"
	canary_dir "$S/rootdir" 9
	for round in plain readonly; do
		rm -f "$S/rootdir/perf-1.map" "$S"/fj.*.out
		: >"$S/rootdir/perf-1.map"
		chown 65534:65534 "$S/rootdir/perf-1.map"
		chmod 600 "$S/rootdir/perf-1.map"
		if [ "$round" = plain ]; then
			start_in agent.$round.log --retention 30 || return
		else
			# The agent's own view of the directory read-only; the attacker's, through its root, not.
			sync
			AGENT_LOG=$S/agent.$round.log
			AGENT_LOGS+=("$AGENT_LOG")
			unshare -m --propagation private sh -c 'mount --bind -o ro "$0" "$0" && exec "$@"' \
				"$S/rootdir" "$BUILD/perfmapd" ${PERFMAPD_TEST_AGENT_ARGS:-} --map-dir "$d" \
				--archive-dir "$a" --run-dir "$RUN_DIR" --retention 30 >"$AGENT_LOG" 2>&1 &
			AGENT_PID=$!
			wait_for 20 grep -qs "perfmapd: tracking" "$AGENT_LOG" ||
				{ fail "userns_bind_write: perfmapd did not start in its own mount namespace"; return; }
		fi
		OVER=$S/rootdir ns_attacker "$S/fj.$round.out" "$BIN/forkjit" --dir /tmp --entries 5 \
			--prefix atk --children 3 --child-hold-ms 3000 --print-pids
		atk=$ATK
		wait_for 10 eval '[ "$(grep -c "^child " "$S/fj.$round.out")" -ge 3 ]'
		# Their pids as forkjit sees them are its namespace's: the mirrors are at the host's.
		n=0
		for p in $(awk '$1 == "child" { print $2 }' "$S/fj.$round.out"); do
			p=$(ns_pid_of "$atk" "$p") &&
				wait_for 10 eval "[ \"\$(grep -c atk_ '$d/perf-$p.map' 2>/dev/null)\" = 5 ]" &&
				n=$((n + 1))
		done
		check "userns_bind_write ($round): the 3 children's mirrors on the host hold the parent's 5 entries ($n)" \
			test "$n" = 3
		check "userns_bind_write ($round): nothing was created in root's directory (uid 65534 cannot)" \
			eval '[ "$(ls "$S/rootdir")" = "$(printf "perf-1.map\nperf-9.map")" ]'
		check "userns_bind_write ($round): refused as not the namespace's own directory, counted" \
			status_ge "$d" ns_writes_refused_not_its_dir 1
		check "userns_bind_write ($round): said once, naming the uid" \
			eval '[ "$(grep -c "is owned by a uid its user namespace does not map.*(uid 65534, gid 65534)" "$AGENT_LOG")" = 1 ]'
		wait "$atk" 2>/dev/null
		check "userns_bind_write ($round): root's canary is unchanged, unread" \
			eval 'canary_unread && [ "$(cat "$S/rootdir/perf-9.map" | sha1sum)" = "$(printf "%x 10 canary_%s_%d\nTOP-SECRET text line %s %d\n" $((0x9000)) "$CANARY" 9 "$CANARY" 9 | sha1sum)" ]'
		agent_ok "userns_bind_write ($round)"
		log_clean "userns_bind_write ($round)"
		stop_agent || fail "userns_bind_write ($round): perfmapd exited non-zero"
	done
}

# Item 3: two namespaces of the attacker one after the other at namespace pid
# 1 (with two forked children each) over the same bind of root's directory
# holding root's 0600 perf-1.map and perf-2.map: nothing there is removed as
# an earlier holder's map. Then a directory of root's holding the attacker's
# own perf-1.map: written by the first namespace's pid 1, it is not removed
# when the second takes pid 1 (uid 65534 could not remove it itself).
test_userns_bind_delete() {
	local atk round p p1 p2
	CANARY=binddel$RANDOM
	start_sec userns_bind_delete --retention 1 || return
	ns_bins
	chmod 711 "$S"
	canary_dir "$S/rootdir" 1 2
	for round in 1 2; do
		OVER=$S/rootdir ns_attacker "$S/attacker.out" sh -c 'sleep 30 & sleep 30 & wait'
		atk=$ATK
		# Held until the agent has placed its pids 1 and 2 (refused as root's files; an
		# agent that took them for the attacker's says so too), then ended.
		wait_for 10 eval 'p1=$(ns_pid_of "$atk" 1) && p2=$(ns_pid_of "$atk" 2)'
		wait_for 10 eval 'status_ge "$d" refused_owner $((2 * round)) ||
			{ grep -q "mirror $p1 (" "$AGENT_LOG" && grep -q "mirror $p2 (" "$AGENT_LOG"; }'
		kill -9 "$atk" 2>/dev/null
		wait "$atk" 2>/dev/null
		wait_for 10 eval 'gone "$p1" && gone "$p2"'
	done
	settle
	check "userns_bind_delete: root's maps are still there, unchanged" canary_intact "$S/rootdir"
	check "userns_bind_delete: the canary is in no map or archive" canary_unread
	check "userns_bind_delete: nothing removed as an earlier holder's (ns_stale_removed 0)" \
		status_is "$d" ns_stale_removed 0
	mkdir -m 755 "$S/owndir"
	: >"$S/owndir/perf-1.map"
	chown 65534:65534 "$S/owndir/perf-1.map"
	chmod 600 "$S/owndir/perf-1.map"
	# Its pid 1 lives until the agent mirrored its map, then is killed: an ended process's map.
	OVER=$S/owndir ns_attacker "$S/attacker.out" "$BIN/forkjit" --dir /tmp --entries 4 --prefix first \
		--hold-ms 30000
	atk=$ATK
	check "userns_bind_delete: the first namespace's pid 1 wrote its 4 entries, mirrored" \
		wait_for 10 eval 'p=$(ns_pid_of "$atk" 1) && [ "$(grep -c first_ "$d/perf-$p.map" 2>/dev/null)" = 4 ]'
	kill -9 "$atk" 2>/dev/null
	wait "$atk" 2>/dev/null
	wait_for 10 gone "$p"
	# The second holder of pid 1 lives until the agent has looked at the file (or 30 s).
	OVER=$S/owndir ns_attacker "$S/attacker.out" sleep 30
	atk=$ATK
	check "userns_bind_delete: the second holder of pid 1 was refused the removal (not its namespace's directory)" \
		wait_for 10 status_ge "$d" ns_writes_refused_not_its_dir 1
	kill -9 "$atk" 2>/dev/null
	wait "$atk" 2>/dev/null
	check "userns_bind_delete: the attacker's map in root's directory was not removed" \
		test "$(grep -c first_ "$S/owndir/perf-1.map" 2>/dev/null)" = 4
	agent_ok userns_bind_delete
	log_clean userns_bind_delete
	stop_agent || fail "userns_bind_delete: perfmapd exited non-zero"
}

# Item 1, without a mount: root's JIT V writes its 0600 map in the host's
# directory for namespaces (H, standing for the host's /tmp); the attacker,
# sharing H, takes V's host pid as its own namespace pid (ns_last_pid in its
# pid namespace), so that H/perf-V.map is at "its" name. With a map directory
# other than H (round "apart"), and with H the map directory itself (round
# "shared", the attacker with no mount namespace at all): V's map is never
# mirrored to the attacker, and stays V's, whole.
test_userns_victim_pid() {
	local h v atk u round sum leaked
	CANARY=victim$RANDOM
	ns_bins
	new_dirs userns_victim_pid
	chmod 711 "$S"
	for round in apart shared; do
		if [ "$round" = apart ]; then
			h=$S/host-tmp
			mkdir -m 1777 "$h"
			start_in agent.$round.log --ns-map-dir "$h" --retention 30 || return
		else
			h=$d
			start_in agent.$round.log --ns-map-dir "$h" --retention 30 || return
		fi
		"$FORKJIT" --stop-first --dir "$h" --entries 10 --prefix "canary_${CANARY}_$round" --hold-ms 60000 &
		v=$!
		BG_PIDS+=("$v")
		wait_for 5 is_stopped "$v" || { fail "userns_victim_pid ($round): V ($v) did not stop"; return; }
		kill -CONT "$v"
		wait_for 5 eval "[ \"\$(grep -c canary_ '$h/perf-$v.map' 2>/dev/null)\" = 10 ]"
		sum=$(sha1sum <"$h/perf-$v.map")
		# Apart: a mount namespace of its own that still shows H; shared: none at all.
		if [ "$round" = apart ]; then
			ns_attacker "$S/attacker.out" "$BIN/pidat" "$v" sleep 600
		else
			SHARE=1 ns_attacker "$S/attacker.out" "$BIN/pidat" "$v" sleep 600
		fi
		atk=$ATK
		check "userns_victim_pid ($round): the attacker (uid 65534) holds namespace pid $v, V's host pid" \
			wait_for 10 eval 'u=$(ns_pid_of "$atk" "$v") && [ "$u" != "$v" ]'
		check "userns_victim_pid ($round): V's map is refused as the attacker's (refused_owner)" \
			wait_for 10 status_ge "$d" refused_owner 1
		leaked=$(find "$d" "$a" -user 65534 -type f -exec grep -l "canary_$CANARY" {} + 2>/dev/null)
		check "userns_victim_pid ($round): no file of uid 65534 holds V's entries${leaked:+: $leaked}" \
			test -z "$leaked"
		check "userns_victim_pid ($round): V's map is whole and V's" \
			eval '[ "$(sha1sum <"$h/perf-$v.map")" = "$sum" ] && [ "$(stat -c %u "$h/perf-$v.map")" = 0 ]'
		kill -9 "$atk" "$v" 2>/dev/null
		wait "$atk" "$v" 2>/dev/null
		agent_ok "userns_victim_pid ($round)"
		log_clean "userns_victim_pid ($round)"
		stop_agent || fail "userns_victim_pid ($round): perfmapd exited non-zero"
	done
}

# ---- the metrics endpoint held down (issue 20, item 5) ----

# flood_probe TARGET SECONDS EVERY: a GET /metrics at TARGET (PORT, or
# HOST:PORT) each EVERY seconds for SECONDS, each with 2 s to be answered
# whole: one "scrape ok|fail SECONDS" line each. TARGET value NAME: the
# value of the sample NAME (as written, labels and all), or nothing.
FLOOD_PROBE='
import socket, sys, time
host, _, port = sys.argv[1].rpartition(":")
addr = (host or "127.0.0.1", int(port))
def scrape(limit):
    t0 = time.monotonic()
    data = b""
    try:
        s = socket.create_connection(addr, timeout=limit)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: perfmapd\r\n\r\n")
        while True:
            s.settimeout(max(0.001, limit - (time.monotonic() - t0)))
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
    except OSError as e:
        return None, time.monotonic() - t0, type(e).__name__
    ok = data.startswith(b"HTTP/1.1 200") and b"\nperfmapd_build_info{" in data
    return (data if ok else None), time.monotonic() - t0, "bad answer"
if sys.argv[2] == "value":
    data = scrape(5)[0] or b""
    for line in data.decode().splitlines():
        if line.startswith(sys.argv[3] + " "):
            print(line.split()[-1])
    sys.exit(0)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    data, took, why = scrape(2.0)
    print("scrape %s %.3f%s" % ("ok" if data else "fail", took, "" if data else " " + why), flush=True)
    time.sleep(max(0.0, float(sys.argv[3]) - took))
'
flood_value() { "$PY" -c "$FLOOD_PROBE" "$1" value "$2"; }
flood_is() { [ "$(flood_value "$1" "$2")" = "$3" ]; }
flood_ge() { local v; v=$(flood_value "$1" "$2"); [ -n "$v" ] && [ "$v" -ge "$3" ]; }

# flood_answered WHO OUT MIN: every scrape in OUT answered within its 2 s, and MIN at least.
flood_answered() {
	local n ok slowest min=$3
	n=$(grep -c '^scrape ' "$2")
	ok=$(grep -c '^scrape ok ' "$2")
	slowest=$(awk '$1 == "scrape" { print $3 }' "$2" | sort -n | tail -1)
	check "metrics_flood: $1: its $n scrapes during the attack were all answered within 2 s ($ok were; the slowest took ${slowest:-?} s)" \
		eval '[ "$n" -ge "$min" ] && [ "$ok" = "$n" ]'
	[ "$ok" = "$n" ] || grep -m3 '^scrape fail' "$2" | sed 's/^/    /'
}

# flood_closed OUT WHO: the attacker made its connections again and again,
# and none lived past the request deadline (3 s from its accept; 1 s more
# for the attacker to see it on a busy host).
flood_closed() {
	local made longest
	made=$(awk '$1 == "made" { print $2 }' "$1")
	longest=$(awk '$1 == "longest_s" { print $2 }' "$1")
	check "metrics_flood: $2: made ${made:-0} connections; the longest lived ${longest:-?} s (< 4 s: closed by the 3 s request deadline)" \
		awk -v m="${made:-0}" -v l="${longest:-99}" 'BEGIN { exit !(m >= 16 && l < 4) }'
}

# The issue's attack on --metrics-listen 127.0.0.1: uid 65534's 32
# connections across 127.0.0.2-5, each trickling a header line every 2 s
# (it held all 16 connections for as long as it went on, and root's scrape
# went unanswered), beside 8 connections each of six other uids and of
# uid 65534 again as root of its own user namespace: 88 connections kept
# open, remade as soon as closed, for 22 s. Root's scrape, and a system
# uid's, every 0.5 s for 18 s of it, are each answered within 2 s; a root
# JIT's 100 children get their copies as fast as beside a busy loop; no
# attacker's connection lives past the request deadline; users' slots are
# all the attackers hold, and all of them are free again after. Then the
# same from another network namespace, as from a pod network, where the
# kernel knows no uid: one address holds 4 of remote peers' 8 slots, three
# hold the 8, and root's scrape is answered beside them.
test_metrics_flood() {
	local port uid i pids=() sys out ns h remote
	port=${PERFMAPD_TEST_METRICS_PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
	start_sec metrics_flood --metrics-listen "127.0.0.1:$port" || return
	check "metrics_flood: root's scrape is answered before the attack" \
		eval '"$PY" -c "$FLOOD_PROBE" "$port" 1 1 | grep -q "^scrape ok "'
	as_attacker "$PY" "$ATTACK" slowheaders "$port" 22 32 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 \
		>"$S/slow.65534.out" 2>&1 &
	pids+=("$!")
	i=0
	for uid in 60001 60002 60003 60004 60005 60006; do
		i=$((i + 1))
		setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
			"$PY" "$ATTACK" slowheaders "$port" 22 8 "127.0.1.$i" >"$S/slow.$uid.out" 2>&1 &
		pids+=("$!")
	done
	# uid 0 in its own user namespace is uid 65534 to the kernel: users' slots, not root's.
	if as_attacker unshare -Urpm --fork --kill-child true 2>/dev/null; then
		as_attacker unshare -Urpm --fork --kill-child "$PY" "$ATTACK" slowheaders "$port" 22 8 \
			127.0.2.1 127.0.2.2 >"$S/slow.userns.out" 2>&1 &
		pids+=("$!")
	else
		skip "metrics_flood: no user namespace for uid 65534 here: its root there is not played"
	fi
	BG_PIDS+=("${pids[@]}")
	check "metrics_flood: the attackers hold all of users' 8 slots" \
		wait_for 10 flood_is "$port" 'perfmapd_http_connections{peer="user"}' 8
	victim_start 100 100
	setpriv --reuid=998 --regid=998 --clear-groups -- "$PY" -c "$FLOOD_PROBE" "$port" 18 0.5 \
		>"$S/probe.998.out" 2>&1 &
	sys=$!
	BG_PIDS+=("$sys")
	"$PY" -c "$FLOOD_PROBE" "$port" 18 0.5 >"$S/probe.root.out" 2>&1
	wait "$sys"
	victim_check metrics_flood
	wait "${pids[@]}"
	flood_answered "root" "$S/probe.root.out" 30
	flood_answered "uid 998 (a system uid's slots)" "$S/probe.998.out" 30
	for out in "$S"/slow.*.out; do
		uid=${out##*/slow.}
		flood_closed "$out" "the attacker ${uid%.out}"
	done
	check "metrics_flood: connections closed at the request deadline are counted" \
		flood_ge "$port" 'perfmapd_http_connections_expired_total{phase="request"}' 8
	check "metrics_flood: connections over users' slots were refused at their accept, and counted" \
		flood_ge "$port" 'perfmapd_http_connections_refused_total{peer="user"}' 100
	check "metrics_flood: none of root's was refused" \
		flood_is "$port" 'perfmapd_http_connections_refused_total{peer="root"}' 0
	check "metrics_flood: once the attackers are gone, no connection of theirs is left" \
		wait_for 10 flood_is "$port" 'perfmapd_http_connections{peer="user"}' 0
	agent_ok metrics_flood
	log_clean metrics_flood
	stop_agent || fail "metrics_flood: perfmapd exited non-zero"

	if ! command -v ip >/dev/null || ! command -v nsenter >/dev/null; then
		skip "metrics_flood: no ip(8) or nsenter(1): peers in another network namespace not played"
		return
	fi
	# A network namespace held by a sleep, joined to the host by a veth pair
	# (198.18.205.0/29, a benchmarking range), which dies with it.
	unshare --net sleep 120 &
	ns=$!
	BG_PIDS+=("$ns")
	h=pmf${ns}h
	wait_for 5 eval '[ "$(readlink /proc/$ns/ns/net)" != "$(readlink /proc/self/ns/net)" ]' &&
		ip link add "$h" type veth peer name eth0 netns "$ns" &&
		ip addr add 198.18.205.1/29 dev "$h" && ip link set "$h" up &&
		nsenter --net="/proc/$ns/ns/net" sh -c 'for a in 2 3 4; do
			ip addr add 198.18.205.$a/29 dev eth0 || exit; done
			ip link set eth0 up && ip link set lo up' ||
		{ fail "metrics_flood: the network namespace of the remote peers could not be made"; return; }
	remote=198.18.205.1:$port
	start_in agent.remote.log --metrics-listen "$remote" || return
	nsenter --net="/proc/$ns/ns/net" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$PY" "$ATTACK" slowheaders "$remote" 16 10 198.18.205.2 >"$S/remote.1.out" 2>&1 &
	pids=("$!")
	BG_PIDS+=("$!")
	check "metrics_flood (remote): one address holds 4 slots; its other connections are refused" \
		wait_for 10 eval 'flood_is "$remote" "perfmapd_http_connections{peer=\"remote\"}" 4 &&
			flood_ge "$remote" "perfmapd_http_connections_refused_total{peer=\"remote\"}" 6'
	nsenter --net="/proc/$ns/ns/net" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$PY" "$ATTACK" slowheaders "$remote" 12 20 198.18.205.3 198.18.205.4 >"$S/remote.2.out" 2>&1 &
	pids+=("$!")
	BG_PIDS+=("$!")
	check "metrics_flood (remote): three addresses hold remote peers' 8 slots, no more" \
		wait_for 10 flood_is "$remote" 'perfmapd_http_connections{peer="remote"}' 8
	"$PY" -c "$FLOOD_PROBE" "$remote" 8 0.5 >"$S/probe.remote.out" 2>&1
	wait "${pids[@]}"
	flood_answered "root, beside remote peers" "$S/probe.remote.out" 12
	flood_closed "$S/remote.1.out" "a remote attacker"
	flood_closed "$S/remote.2.out" "another remote attacker"
	agent_ok "metrics_flood (remote)"
	log_clean "metrics_flood (remote)"
	stop_agent || fail "metrics_flood (remote): perfmapd exited non-zero"
	kill -9 "$ns" 2>/dev/null
	wait "$ns" 2>/dev/null
}

# ---- running them ----

scenario_done() {
	cleanup_agent
	kill_attackers
	say "   ($1: $((SECONDS - SCENARIO_T0)) s)"
	SCENARIO_T0=$SECONDS
}

pick_scenarios "$0" "$@"
chmod 711 "$WORK"
mkdir -m 755 "$BIN"
cp "$HERE/attack.py" "$BUILD/perfmapctl" "$BIN/" && chmod 755 "$BIN"/*
preflight
SCENARIO_T0=$SECONDS
run_scenarios "security tests"
