#!/bin/bash
# perfmapctl as a user runs it: check verdicts and exit codes, compact beside and in place, refusals.
set -u
if [ $# -ne 1 ]; then
	echo "usage: $0 PATH/TO/perfmapctl" >&2
	exit 2
fi
CTL=$(realpath "$1")
T=$(mktemp -d "${TMPDIR:-/tmp}/perfmapctl-test.XXXXXX") || exit 2
BG=()
checks=0
failures=0
# Every check below is counted; a scenario whose checks stopped running must not look green.
EXPECTED=208

R=  # restore's hand-built archive and map directory, in /var/tmp
JITPIDS=()  # CPython's -X perf_jit runs: each leaves /tmp/jit-<pid>.dump (and perf's jitted-<pid>-*.so)
cleanup() {
	local p
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
	[ -z "$R" ] || rm -rf "$R"
	for p in "${JITPIDS[@]}"; do rm -f "/tmp/jit-$p.dump" /tmp/jitted-"$p"-*.so; done
}
trap cleanup EXIT
# SIGTERM or SIGINT landing while a command runs kills bash without the EXIT trap;
# exiting from a handler runs it.
trap 'exit 130' INT
trap 'exit 143' TERM

# check DESCRIPTION CMD...: run the condition CMD and record ok or FAIL; what CMD says on
# stderr explains a failure and is shown only then.
check() {
	local desc=$1
	shift
	checks=$((checks + 1))
	if "$@" 2>"$T/why"; then
		echo "ok: $desc"
	else
		failures=$((failures + 1))
		echo "FAIL: $desc" >&2
		sed 's/^/    /' "$T/why" >&2
	fi
}

# exits WANT CMD...: CMD exits WANT; its output stays in $T/out for out_has.
exits() {
	local want=$1 got
	shift
	timeout 20 "$@" >"$T/out" 2>&1
	got=$?
	[ "$got" -eq "$want" ] && return 0
	echo "'$*' exited $got, want $want; its output:" >&2
	cat "$T/out" >&2
	return 1
}

# out_has TEXT: the last command's output holds TEXT.
out_has() {
	grep -qF -- "$1" "$T/out" && return 0
	echo "output lacks '$1'; it was:" >&2
	cat "$T/out" >&2
	return 1
}

is() {
	[ "$1" = "$2" ] && return 0
	echo "got '$1', want '$2'" >&2
	return 1
}

is_not() {
	[ "$1" != "$2" ] && return 0
	echo "got '$1', want anything else" >&2
	return 1
}

sum() { sha256sum "$1" | cut -d' ' -f1; }

# unchanged FILE SHA256: the file's content is what it was.
unchanged() { is "$(sum "$1")" "$2"; }

# same_content WANT FILE
same_content() { cmp -s "$1" "$2" || { diff "$1" "$2" >&2; return 1; }; }

# no_temporary DIR: compact leaves no hidden temporary beside the map.
no_temporary() {
	local left
	# shellcheck disable=SC2010 # plain names; any hidden entry is a leftover
	left=$(ls -A "$1" | grep '^\.')
	[ -z "$left" ] && return 0
	echo "left behind in $1: $left" >&2
	return 1
}

# wait_for SECONDS CMD...: poll until CMD succeeds, so a loaded host is no failure.
wait_for() {
	local deadline=$(($(date +%s%N) + $1 * 1000000000))
	shift
	until "$@"; do
		if [ "$(date +%s%N)" -ge "$deadline" ]; then
			echo "'$*' still false after the deadline" >&2
			return 1
		fi
		sleep 0.05
	done
}

# holds_open PID COMM FILE: PID runs COMM and has FILE open. The shell opens a
# redirection before it execs, so the fd alone could still be named "bash".
holds_open() {
	local fd
	[ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] || return 1
	for fd in /proc/"$1"/fd/*; do
		[ "$fd" -ef "$3" ] && return 0
	done
	return 1
}

# stop PID: end a background helper and forget it, so cleanup kills no reused pid.
stop() {
	local p keep=()
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	for p in "${BG[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	BG=("${keep[@]}")
}

S="check: canonical map"
canon="$T/perf-100.map"
printf '7f0000001000 40 py::alpha:/app.py\n7f0000001040 20 py::beta:/app.py\n' >"$canon"
check "$S: exit 0" exits 0 "$CTL" check "$canon"
check "$S: perf reads it" out_has "perf      ok"
check "$S: bcc reads it" out_has "bcc       ok"

S="check: misread map"
messy="$T/perf-200.map"
printf '7f0000001000 40 py::alpha\r\n0x7f0000001040 20 py::beta\n7f0000001000 40 py::alpha\r\n7f0000001010 8 py::inner\ngarbage\n7f0000001100 10 py::to' >"$messy"
check "$S: exit 1" exits 1 "$CTL" check "$messy"
check "$S: rejected line named" out_has "rejected lines: 1 garbage"
check "$S: incomplete last line named" out_has "incomplete last line"
check "$S: perf misreads" out_has 'perf      MISREADS'
check "$S: CRLF name shown" out_has 'reads the name as "py::alpha\r" (CRLF)'
check "$S: blazesym fails" out_has 'blazesym  FAILS'

check "check: standard input (exit 0)" exits 0 "$CTL" check - <"$canon"
check "check: worst status of several files (exit 1)" exits 1 "$CTL" check "$canon" "$messy"

S="check: symlink"
ln -s "$canon" "$T/perf-300.map"
check "$S: exit 2" exits 2 "$CTL" check "$T/perf-300.map"
check "$S: refused" out_has "is a symlink, refused"

S="check: FIFO"
mkfifo "$T/perf-301.map"
check "$S: exit 2 without hanging" exits 2 "$CTL" check "$T/perf-301.map"
check "$S: refused" out_has "is not a regular file, refused"

S="check: hard-linked map"
ln "$canon" "$T/hardlink"
check "$S: exit 2" exits 2 "$CTL" check "$canon"
check "$S: refused" out_has "hard link"
rm -f "$T/hardlink"

check "check: missing file: exit 2" exits 2 "$CTL" check "$T/missing.map"
check "check: missing file: named" out_has "No such file"
check "check: no file is a usage error (exit 2)" exits 2 "$CTL" check
check "unknown command: exit 2" exits 2 "$CTL" frobnicate
check "unknown command: named" out_has "unknown command"

# compact -o: a canonical copy, the original untouched.
S="compact -o"
before=$(sum "$messy")
check "$S: exit 0" exits 0 "$CTL" compact "$messy" -o "$T/out.map"
check "$S: counts reported" out_has "4 entries -> 4 lines (1 duplicates, 2 overlapping, 0 names under 3 bytes, 2 other lines dropped)"
check "$S: original untouched" unchanged "$messy" "$before"
check "$S: copy checks clean (exit 0)" exits 0 "$CTL" check "$T/out.map"
cat >"$T/want" <<'EOF'
7f0000001000 10 py::alpha
7f0000001010 8 py::inner
7f0000001018 28 py::alpha
7f0000001040 20 py::beta
EOF
check "compact: later lines win, nested split, junk dropped" same_content "$T/want" "$T/out.map"
check "compact -o -: exit 0" exits 0 "$CTL" compact "$messy" -o -
check "compact -o -: map on stdout" out_has "py::inner"

# compact in place: refused while a process holds the map open for writing.
S="compact in place, live writer"
victim="$T/perf-400.map"
cp "$messy" "$victim"
before=$(sum "$victim")
sleep 60 >>"$victim" &
BG+=($!)
writer=$!
check "$S: writer has the map open" wait_for 20 holds_open "$writer" sleep "$victim"
check "$S: exit 1" exits 1 "$CTL" compact "$victim"
check "$S: writer named" out_has "open for writing by $writer (sleep)"
check "$S: says nothing changed" out_has "nothing changed"
check "$S: file untouched" unchanged "$victim" "$before"
check "$S: no temporary left" no_temporary "$T"
stop "$writer"

# A reader (perf reading the map) does not stand in the way.
S="compact in place, live reader"
# shellcheck disable=SC2217 # sleep never reads: the open descriptor is the point
sleep 60 <"$victim" &
BG+=($!)
reader=$!
check "$S: reader has the map open" wait_for 20 holds_open "$reader" sleep "$victim"
if [ "$(id -u)" -eq 0 ]; then
	chown 65534:65534 "$victim"
	owner=65534
else
	owner=$(id -u)
fi
chmod 0640 "$victim"
ino=$(stat -c %i "$victim")
check "$S: exit 0" exits 0 "$CTL" compact "$victim"
check "$S: compacted" same_content "$T/want" "$victim"
check "$S: same owner and mode" is "$(stat -c '%u %a' "$victim")" "$owner 640"
check "$S: new inode" is_not "$(stat -c %i "$victim")" "$ino"
check "$S: no temporary left" no_temporary "$T"
stop "$reader"

S="compact: symlink"
target="$T/target.map"
cp "$messy" "$target"
ln -s "$target" "$T/perf-500.map"
before=$(sum "$target")
check "$S: exit 2" exits 2 "$CTL" compact "$T/perf-500.map"
check "$S: refused" out_has "is a symlink, refused"
check "$S: target untouched" unchanged "$target" "$before"

S="compact: over --max-bytes"
big="$T/perf-600.map"
for i in $(seq 1 200); do printf '%x 10 py::function_%d\n' $((0x10000 + i * 16)) "$i"; done >"$big"
before=$(sum "$big")
check "$S: exit 2" exits 2 "$CTL" compact --max-bytes 1K "$big"
check "$S: refused" out_has "larger than --max-bytes"
check "$S: nothing written" unchanged "$big" "$before"

# ---- restore: archived maps back where perf looks ----

R=$(mktemp -d /var/tmp/perfmapctl-restore.XXXXXX) || exit 2
A=$R/archive
M=$R/maps
mkdir -m 700 "$A" && mkdir -m 1777 "$M"
HZ=$(getconf CLK_TCK)
NOW=$(date +%s)
UP=$(cut -d. -f1 /proc/uptime)
BOOT=$((NOW - UP))
MKPD="python3 $(dirname "$0")/mkperfdata.py"

# archive NAME MTIME ENTRY...: an archived map, dated MTIME (unix seconds).
archive() {
	local name=$1 when=$2
	shift 2
	printf '%s\n' "$@" >"$A/$name"
	touch -d "@$when" "$A/$name"
}
# restored PID WORD: the map restored at PID's path holds WORD (which archived map it came from).
restored() { grep -qs "$2" "$M/perf-$1.map" || { echo "$M/perf-$1.map lacks $2" >&2; return 1; }; }
absent() { [ ! -e "$M/perf-$1.map" ] && [ ! -L "$M/perf-$1.map" ] || { echo "$M/perf-$1.map exists" >&2; return 1; }; }
RST=("$CTL" restore --archive-dir "$A" --map-dir "$M")

# Pid P1, three archived maps: a first process (A), then another at the pid that
# exec'd (B, its old image's) and exited (C). Times are fractions of the uptime.
P1=2000000001
S2=$((UP / 2 * HZ))
archive "perf-$P1-$HZ.map" $((BOOT + UP / 4)) "7f0000001000 10 a_first_fn"
archive "perf-$P1-$S2-exec12345.map" $((BOOT + UP * 5 / 8)) "7f0000002000 10 b_old_image_fn"
archive "perf-$P1-$S2.map" $((BOOT + UP * 3 / 4)) "7f0000003000 10 c_last_fn"
# The agent's own files in the archive are no maps to restore.
mkdir "$A/.staged-1" && printf '1000 10 staged_fn\n' >"$A/.staged-1/perf-2000000003-5.map"
printf '1000 10 tmp_fn\n' >"$A/.tmp.perf-2000000003-5.map"
ln -s "$A/perf-$P1-$HZ.map" "$A/perf-2000000004-5.map"

S="restore: by pid"
check "$S: exit 0" exits 0 "${RST[@]}" "$P1"
check "$S: the newest chosen" restored "$P1" c_last_fn
check "$S: and said so, naming the others" out_has "the newest (3 archived maps of pid $P1; the others:"
check "$S: mode 0600" is "$(stat -c %a "$M/perf-$P1.map")" 600
check "$S: the archived map's owner" is "$(stat -c %u "$M/perf-$P1.map")" "$(stat -c %u "$A/perf-$P1-$S2.map")"
check "$S: its contents, byte for byte" same_content "$A/perf-$P1-$S2.map" "$M/perf-$P1.map"

S="restore: no agent and no --archive-dir"
# fails CMD...: CMD exits 1 or 2 (which depends on the host here); its output in $T/out.
fails() {
	local rc
	timeout 20 "$@" >"$T/out" 2>&1
	rc=$?
	[ $rc -eq 1 ] || [ $rc -eq 2 ] || { echo "'$*' exited $rc, want 1 or 2" >&2; return 1; }
}
check "$S: the default archive, and why it is the one read" \
	eval 'fails "$CTL" restore --map-dir "$M" --run-dir "$T/no-run" 2000000009 && grep -qF "/var/lib/perfmapd/archive (the default: no perfmapd runs for $M)" "$T/out"'
check "$S: nothing written" absent 2000000009
check "$S: --run-dir without its DIR: exit 2" exits 2 "$CTL" restore --map-dir "$M" 2000000009 --run-dir
check "$S: --help names --run-dir and the archive's choice" \
	eval '"$CTL" restore --help | grep -q -- "--run-dir DIR" && "$CTL" restore --help | grep -q "the perfmapd running for"'

S="restore: a file at the path"
echo "7f0000009000 10 runtime_own_fn" >"$M/perf-$P1.map"
before=$(sum "$M/perf-$P1.map")
check "$S: exit 1" exits 1 "${RST[@]}" "$P1"
check "$S: refused, naming pid, path and cause" out_has "restore $P1: $M/perf-$P1.map: a file is there; refused, nothing written"
check "$S: the file untouched" unchanged "$M/perf-$P1.map" "$before"
rm -f "$M/perf-$P1.map"

S="restore: --start-ticks"
check "$S: exit 0" exits 0 "${RST[@]}" "$P1" --start-ticks "$HZ"
check "$S: the map of the process started then" restored "$P1" a_first_fn
rm -f "$M/perf-$P1.map"
check "$S: two maps of that start: exit 0" exits 0 "${RST[@]}" "$P1" --start-ticks "$S2"
check "$S: the newest of them" restored "$P1" c_last_fn
check "$S: and said so" out_has "the newest of 2 that started at tick $S2"
rm -f "$M/perf-$P1.map"
check "$S: none started then: exit 1" exits 1 "${RST[@]}" "$P1" --start-ticks 7
check "$S: none started then: said" out_has "none of its 3 archived maps started at tick 7"
check "$S: none started then: nothing written" absent "$P1"

S="restore: --at"
check "$S: in the first process's life: exit 0" exits 0 "${RST[@]}" "$P1" --at "@$((BOOT + UP / 8))"
check "$S: in the first process's life: its map" restored "$P1" a_first_fn
rm -f "$M/perf-$P1.map"
check "$S: before the exec: exit 0" exits 0 "${RST[@]}" "$P1" --at "@$((BOOT + UP * 9 / 16))"
check "$S: before the exec: the old image's map" restored "$P1" b_old_image_fn
rm -f "$M/perf-$P1.map"
check "$S: after the exec: exit 0" exits 0 "${RST[@]}" "$P1" --at "@$((BOOT + UP * 11 / 16))"
check "$S: after the exec: the new image's map" restored "$P1" c_last_fn
rm -f "$M/perf-$P1.map"
check "$S: as a local date: exit 0" exits 0 "${RST[@]}" "$P1" --at "$(date -d "@$((BOOT + UP / 8))" +%Y-%m-%dT%H:%M:%S)"
check "$S: as a local date: the first process's map" restored "$P1" a_first_fn
rm -f "$M/perf-$P1.map"
check "$S: before any started: exit 1" exits 1 "${RST[@]}" "$P1" --at "@$((BOOT - 60))"
check "$S: before any started: nothing written" absent "$P1"
check "$S: not a time: exit 2" exits 2 "${RST[@]}" "$P1" --at yesterday
check "$S: without a pid: exit 2" exits 2 "${RST[@]}" --at -10m

S="restore: --dry-run"
check "$S: exit 0" exits 0 "${RST[@]}" --dry-run "$P1"
check "$S: says what it would do" out_has "would write $M/perf-$P1.map from perf-$P1-$S2.map"
check "$S: writes nothing" absent "$P1"

S="restore: a symlink at the path"
echo "precious" >"$R/target"
ln -s "$R/target" "$M/perf-$P1.map"
check "$S: exit 1" exits 1 "${RST[@]}" "$P1"
check "$S: refused" out_has "$M/perf-$P1.map: a symlink is there; refused"
check "$S: its target untouched" is "$(cat "$R/target")" precious
rm -f "$M/perf-$P1.map"

S="restore: what is not an archived map"
check "$S: staged, temporary and linked files: exit 1" exits 1 "${RST[@]}" 2000000003 2000000004
check "$S: none found" out_has "restore 2000000004: $M/perf-2000000004.map: no archived map in $A"
check "$S: nothing written" eval 'absent 2000000003 && absent 2000000004'

S="restore: a live process at the pid"
sleep 300 &
L=$!
BG+=("$L")
LT=$(sed 's/.*) //' "/proc/$L/stat" | cut -d' ' -f20)
archive "perf-$L-$((LT + 1)).map" "$NOW" "7f0000004000 10 other_process_fn"
check "$S: started at another time: exit 1" exits 1 "${RST[@]}" "$L"
check "$S: refused, naming the live process" out_has "pid $L is held by a live process started at tick $LT"
check "$S: nothing written" absent "$L"
rm -f "$A/perf-$L-$((LT + 1)).map"
archive "perf-$L-$LT-exec99.map" "$NOW" "7f0000006000 10 old_image_fn"
check "$S: its earlier image's map: exit 1" exits 1 "${RST[@]}" "$L" --start-ticks "$LT"
check "$S: its earlier image's map: refused, the process exec'd since" out_has "exec'd since an earlier image of it wrote perf-$L-$LT-exec99.map"
check "$S: its earlier image's map: nothing written" absent "$L"
rm -f "$A/perf-$L-$LT-exec99.map"
archive "perf-$L-$LT.map" "$NOW" "7f0000005000 10 same_process_fn"
check "$S: the very process, no map at its path: exit 0" exits 0 "${RST[@]}" "$L"
check "$S: the very process: restored" restored "$L" same_process_fn
stop "$L"

S="restore: several pids"
rm -f "$M"/perf-*.map
check "$S: one restored, one not found: exit 1" exits 1 "${RST[@]}" "$P1" 2000000009
check "$S: one line each" eval '[ "$(grep -c "restore $P1: wrote\|restore 2000000009: .*no archived map" "$T/out")" = 2 ]'

S="restore: the jitdump beside the map"
PJ=2000000011
archive "perf-$PJ-$HZ.map" "$NOW" "7f0000007000 10 jitdumped_fn"
printf 'DTiJ\0\0\0binary\n\0' >"$A/jit-$PJ-$HZ.dump"
JB=$(stat -c %s "$A/jit-$PJ-$HZ.dump")
check "$S: exit 0" exits 0 "${RST[@]}" "$PJ"
check "$S: the map restored" restored "$PJ" jitdumped_fn
check "$S: the dump beside it, byte for byte" same_content "$A/jit-$PJ-$HZ.dump" "$M/jit-$PJ.dump"
check "$S: said on a line of its own" out_has "restore $PJ: wrote $M/jit-$PJ.dump from jit-$PJ-$HZ.dump (its jitdump, $JB bytes)"
check "$S: mode 0600, the archived dump's owner" \
	is "$(stat -c '%a %u' "$M/jit-$PJ.dump")" "600 $(stat -c %u "$A/jit-$PJ-$HZ.dump")"
rm -f "$M/perf-$PJ.map"
echo "a runtime's own dump" >"$M/jit-$PJ.dump"
before=$(sum "$M/jit-$PJ.dump")
check "$S: a file at the dump's path: exit 1" exits 1 "${RST[@]}" "$PJ"
check "$S: a file at the dump's path: the map restored all the same" restored "$PJ" jitdumped_fn
check "$S: a file at the dump's path: refused, said" \
	out_has "restore $PJ: $M/jit-$PJ.dump: a file is there; the jitdump jit-$PJ-$HZ.dump not restored, nothing written there"
check "$S: a file at the dump's path: untouched" unchanged "$M/jit-$PJ.dump" "$before"
rm -f "$M/perf-$PJ.map" "$M/jit-$PJ.dump"
check "$S: --dry-run: exit 0" exits 0 "${RST[@]}" --dry-run "$PJ"
check "$S: --dry-run: says it would write the dump" out_has "would write $M/jit-$PJ.dump from jit-$PJ-$HZ.dump"
check "$S: --dry-run: writes nothing" eval 'absent "$PJ" && [ ! -e "$M/jit-$PJ.dump" ]'
rm -f "$A/perf-$PJ-$HZ.map" "$A/jit-$PJ-$HZ.dump"

S="restore --perf-data"
rm -f "$M"/perf-*.map
P5=2000000005
P6=2000000006
P7=2000000007
# P5 ran JIT code in [0x7f5000000000, +0x1000); the map whose entries lie there is the one,
# though another was archived later and lived when perf recorded.
archive "perf-$P5-$HZ.map" $((BOOT + UP / 4)) "7f5000000000 20 jit_evidence_fn" "7f5000000020 20 jit_evidence2_fn"
archive "perf-$P5-$S2.map" $((NOW - 1)) "7f9000000000 20 wrong_fn"
# P6 recorded no regions: time decides, by HEADER_CLOCK_DATA (in its second process's life).
archive "perf-$P6-$HZ.map" $((BOOT + UP / 4)) "7f6000000000 20 p6_first_fn"
archive "perf-$P6-$S2.map" $((NOW - 1)) "7f6000001000 20 p6_second_fn"
$MKPD "$R/rec.data" --comm "$P5" jit --mmap2 "$P5" 0x7f5000000000 0x1000 7 //anon \
	--mmap2 "$P5" 0x400000 0x1000 5 /usr/bin/jit --fork "$P7" "$P5" --sample "$P7" 0x7f5000000010 \
	--comm "$P6" other --sample "$P6" 0x401000 --comm 2000000010 sh \
	--clock "$(( (BOOT + UP * 7 / 8) * 1000000000 ))"
check "$S: exit 0" exits 0 "${RST[@]}" --perf-data "$R/rec.data"
check "$S: the map its entries prove" restored "$P5" jit_evidence_fn
check "$S: said it chose by evidence" out_has "chosen by evidence: 2 of its 2 entries lie in the anonymous executable regions perf recorded"
check "$S: without evidence, by the recording's time" restored "$P6" p6_second_fn
check "$S: said it chose by time, from HEADER_CLOCK_DATA" out_has "chosen by time: recorded"
check "$S: a forked child without a map of its own is no failure" absent "$P7"
check "$S: counts the rest" out_has "4 processes recorded; 2 mapped no anonymous executable code"
rm -f "$M"/perf-*.map
check "$S: --dry-run: exit 0" exits 0 "${RST[@]}" --dry-run --perf-data "$R/rec.data"
check "$S: --dry-run: writes nothing" eval 'absent "$P5" && absent "$P6"'
$MKPD "$R/nomap.data" --comm 2000000008 jit --mmap2 2000000008 0x7f8000000000 0x1000 5 //anon
check "$S: JIT code but no archived map: exit 1" exits 1 "${RST[@]}" --perf-data "$R/nomap.data"
check "$S: JIT code but no archived map: said, naming the archive" out_has "restore 2000000008: $M/perf-2000000008.map: perf recorded anonymous executable code, but the archive $A has no map of this pid"
$MKPD "$R/z.data" --comm "$P5" jit --compressed
check "$S: compressed records: exit 2" exits 2 "${RST[@]}" --perf-data "$R/z.data"
check "$S: compressed records: how to read them" out_has "perf inject"
check "$S: a directory: exit 2" exits 2 "${RST[@]}" --perf-data "$R"
check "$S: a directory: refused" out_has "not a regular file, refused"
printf 'not perf data at all' >"$R/junk.data"
check "$S: not a perf.data file: exit 2" exits 2 "${RST[@]}" --perf-data "$R/junk.data"
check "$S: nothing written by the refusals" eval '! ls "$M" | grep -q perf-'
check "$S: PIDs and --perf-data together: exit 2" exits 2 "${RST[@]}" "$P1" --perf-data "$R/rec.data"

# ---- status: the agent's lines, from a stand-in for its socket, laid out for a person ----
S=status
SD=$T/status-maps
SR=$T/status-run
mkdir -p "$SD" "$SR"
check "$S: no agent: exit 2" exits 2 "$CTL" status --map-dir "$SD" --run-dir "$SR"
check "$S: no agent: said so" out_has "status: no perfmapd is running for $SD"
SOCK=$(sed -n 's/.*nothing listens on \(.*\))$/\1/p' "$T/out")
# What the agent sends: tests/cli/status_sample.txt, a key of a newer agent added.
SAMPLE=$(dirname "$0")/status_sample.txt
{ cat "$SAMPLE"; echo "new_key_of_a_newer_agent: 5"; } >"$T/status.txt"
python3 - "$SOCK" "$T/status.txt" <<'PY' >"$T/status-srv.out" 2>&1 &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(open(sys.argv[2], "rb").read())
    c.close()
PY
BG+=($!)
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
STATUS=("$CTL" status --map-dir "$SD" --run-dir "$SR")
check "$S: summary: exit 0" exits 0 "${STATUS[@]}"
check "$S: summary: what, since when, which process" out_has "perfmapd for /tmp: running for 1h 1min, pid 21986"
check "$S: summary: what it manages, in units" out_has "Manages: 412 processes tracked, 9 with maps"
check "$S: summary: bytes for a person" out_has "1.2 MiB in the archive"
check "$S: summary: what it did" out_has "Did: 18211 forks, 9120 execs, 18190 exits, 311 maps copied to children"
check "$S: summary: each problem counter not 0, with what it means" \
	eval 'grep -q "Problems: events_dropped: 12 (process events lost" "$T/out" && grep -q "^ *refused_symlink: 2 (" "$T/out"'
check "$S: summary: no problem at 0, no other counter's line" \
	eval '! grep -qE "^ *(copies_failed|copies_deferred|archive_failed|events_fork): " "$T/out"'
check "$S: summary: the process without symbols, and who says why" \
	out_has "jit_4242: comm=node regions=12 bytes=2203648 memfd_bytes=0 lost=yes ('perfmapctl doctor 4242' says why)"
check "$S: summary: a few lines, not every counter" eval '[ "$(wc -l <"$T/out")" -lt 16 ]'
grep -vE '^(events_dropped|refused_symlink|containers_refused|lost_symbol_processes): ' "$SAMPLE" >"$T/status.txt"
check "$S: summary: nothing wrong: exit 0" exits 0 "${STATUS[@]}"
check "$S: summary: nothing wrong: says none" out_has "Problems: none"
{ cat "$SAMPLE"; echo "new_key_of_a_newer_agent: 5"; } >"$T/status.txt"
check "$S: --all: exit 0" exits 0 "${STATUS[@]}" --all
check "$S: --all: every line the agent sent, as it sent it" \
	eval 'diff <(sort "$T/status.txt") <(grep ": " "$T/out" | sort) >&2'
check "$S: --all: under their groups' titles, in the table's order" \
	eval '[ "$(grep -v ": " "$T/out" | grep . | tr "\n" "|")" = "The agent:|Process events and the map index:|Fork copies:|Exec and pid-reuse decisions:|Maps at their paths (retention, orphans, other users'"'"' maps):|Profilers'"'"' holds:|The archive:|Processes in other namespaces (mirrors, copies in containers, refusals):|Executable mappings, JIT code and lost symbols:|Other:|" ]'
check "$S: --all: a list under its group, a key the table lacks last" \
	eval 'awk "/^Processes in other/,/^Executable/" "$T/out" | grep -q "^mirror_30211: " && [ "$(tail -1 "$T/out")" = "new_key_of_a_newer_agent: 5" ]'
check "$S: --json: exit 0" exits 0 "${STATUS[@]}" --json
check "$S: --json: every line a key, numbers numbers, yes/no booleans" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().splitlines()
assert len(j) == len(lines), (len(j), len(lines))
assert j["events_fork"] == 18211 and j["mirroring"] is True and j["dry_run"] is False
assert j["map_dir"] == "/tmp" and j["jit_4242"].startswith("comm=node")
' "$T/out" "$T/status.txt"
check "$S: --all --json: the JSON, whole" eval '"${STATUS[@]}" --all --json | python3 -c "import json, sys; assert len(json.load(sys.stdin)) > 130"'
check "$S: --help names --all" eval '"$CTL" status --help | grep -q -- "--all"'

# ---- restore and doctor: the archive of the agent running for the map directory (the stand-in) ----
S="restore: the agent's archive"
rm -f "$SD"/perf-*.map
# A pid doctor takes (under pid_max) and no process holds, with two archived maps.
GP=4194300
while [ -e "/proc/$GP" ]; do GP=$((GP - 1)); done
archive "perf-$GP-$HZ.map" $((BOOT + UP / 4)) "7f0000001000 10 gone_first_fn"
archive "perf-$GP-$S2.map" $((BOOT + UP / 2)) "7f0000002000 10 gone_last_fn"
agent_archive() { { grep -v '^archive_dir: ' "$SAMPLE"; [ -z "$1" ] || echo "archive_dir: $1"; } >"$T/status.txt"; }
agent_archive "$A"
RSA=("$CTL" restore --map-dir "$SD" --run-dir "$SR")
check "$S: without --archive-dir: exit 0" exits 0 "${RSA[@]}" "$P1"
check "$S: without --archive-dir: the agent's archive read" eval 'grep -qs c_last_fn "$SD/perf-$P1.map"'
rm -f "$SD/perf-$P1.map"
check "$S: a pid it lacks: exit 1" exits 1 "${RSA[@]}" 2000000009
check "$S: a pid it lacks: the archive named, and whose it is" \
	out_has "restore 2000000009: $SD/perf-2000000009.map: no archived map in $A (perfmapd's, for $SD); nothing written"
check "$S: --perf-data: exit 0" exits 0 "${RSA[@]}" --perf-data "$R/rec.data"
check "$S: --perf-data: the agent's archive read" eval 'grep -qs jit_evidence_fn "$SD/perf-$P5.map"'
check "$S: --perf-data, a pid it lacks: exit 1" exits 1 "${RSA[@]}" --perf-data "$R/nomap.data"
check "$S: --perf-data, a pid it lacks: the archive named, and whose it is" \
	out_has "but the archive $A (perfmapd's, for $SD) has no map of this pid"
rm -f "$SD"/perf-*.map
mkdir -m 700 "$R/other-archive"
check "$S: --archive-dir wins: exit 1" exits 1 "${RSA[@]}" --archive-dir "$R/other-archive" "$P1"
check "$S: --archive-dir wins: read, and said as given" out_has "no archived map in $R/other-archive; nothing written"
agent_archive "$R/gone"
check "$S: the agent's archive missing: exit 2" exits 2 "${RSA[@]}" "$P1"
check "$S: the agent's archive missing: said, and whose" \
	out_has "restore: archive $R/gone (perfmapd's, for $SD): No such file or directory"
agent_archive ""
check "$S: an agent that does not say its archive: the default, and why" \
	eval 'fails "${RSA[@]}" 2000000009 && grep -qF "/var/lib/perfmapd/archive (the default: perfmapd for $SD did not say its archive)" "$T/out"'
check "$S: nothing written by the refusals" eval '! ls "$SD" | grep -q perf-'

S="doctor: a pid gone"
agent_archive "$A"
check "$S: exit 2" exits 2 "$CTL" doctor --map-dir "$SD" --run-dir "$SR" "$GP"
check "$S: no process, said" out_has "doctor: no process $GP"
check "$S: the agent's archive holds its maps: the newest, and the restore that puts it back" \
	out_has "doctor: the archive $A (perfmapd's, for $SD) holds 2 maps of pid $GP, the newest perf-$GP-$S2.map (archived "
check "$S: the restore names the options it needs" \
	out_has "'perfmapctl restore --map-dir $SD --run-dir $SR $GP' puts it back at $SD/perf-$GP.map"
check "$S: that restore puts the newest back" \
	eval '"$CTL" restore --map-dir "$SD" --run-dir "$SR" "$GP" >/dev/null && grep -qs gone_last_fn "$SD/perf-$GP.map"'
rm -f "$SD/perf-$GP.map"
GN=$((GP - 1))
while [ -e "/proc/$GN" ]; do GN=$((GN - 1)); done
check "$S: none archived: exit 2" exits 2 "$CTL" doctor --map-dir "$SD" --run-dir "$SR" "$GN"
check "$S: none archived: said" out_has "doctor: the archive $A (perfmapd's, for $SD) holds no map of pid $GN either"
check "$S: no agent, --archive-dir: exit 2" exits 2 "$CTL" doctor --map-dir "$M" --run-dir "$T/no-run" --archive-dir "$A" "$GP"
check "$S: no agent, --archive-dir: read, and the restore names it" \
	out_has "holds 2 maps of pid $GP, the newest perf-$GP-$S2.map"
check "$S: no agent, --archive-dir: the restore names it" out_has "'perfmapctl restore --map-dir $M --archive-dir $A $GP'"
check "$S: no agent: the default, and why" \
	eval '"$CTL" doctor --map-dir "$M" --run-dir "$T/no-run" "$GP" >"$T/out" 2>&1; grep -qF "/var/lib/perfmapd/archive (the default: no perfmapd runs for $M)" "$T/out"'

# ---- perfmapctl jitdump: a jitdump converted into a perf map ----
JW=${JITDUMP_WRITER:-$(dirname "$CTL")/tests/jitdump_writer}
S="jitdump: test producer, every record kind"
check "$S: the producer ran" eval '"$JW" "$T/jit-all.dump" all >"$T/jw-pids"'
read -r JP JC <"$T/jw-pids"
check "$S: exit 0" exits 0 "$CTL" jitdump "$T/jit-all.dump" -o "$T/perf-all.map"
check "$S: summary counts every kind" out_has "pid $JP: 3 functions written, 4 live in the dump; 5 loads, 1 moves (0 unmatched), 1 debug-info records (3 entries), 1 closes, 2 skipped, 0 torn tail bytes"
printf '7f0000010000 100 jd::alpha /app/jd_alpha.js:1\n7f0000010100 80 jd::beta /app/jd_alpha.js:20\n7f0000020000 40 jd::gamma /app/jd_alpha.js:40\n' >"$T/want-all.map"
check "$S: the header pid's functions, gamma at its new address only" same_content "$T/want-all.map" "$T/perf-all.map"
check "$S: the map is readable by every consumer (check: exit 0)" exits 0 "$CTL" check "$T/perf-all.map"
check "$S: without -o: the same map on stdout" eval '"$CTL" jitdump "$T/jit-all.dump" 2>/dev/null | cmp -s - "$T/perf-all.map"'
check "$S: --pid the child: its record at its parent's address" \
	eval '[ "$("$CTL" jitdump "$T/jit-all.dump" --pid "$JC" 2>/dev/null)" = "7f0000010000 100 jd::delta_in_child" ]'
before=$(sum "$T/perf-all.map")
check "$S: -o an existing file: exit 2" exits 2 "$CTL" jitdump "$T/jit-all.dump" -o "$T/perf-all.map"
check "$S: -o an existing file: said" out_has "File exists (never written over)"
check "$S: -o an existing file: untouched" unchanged "$T/perf-all.map" "$before"
ln -s "$T/elsewhere.map" "$T/link.map"
check "$S: -o a symlink: exit 2" exits 2 "$CTL" jitdump "$T/jit-all.dump" -o "$T/link.map"
check "$S: -o a symlink: nothing made through it" eval '[ ! -e "$T/elsewhere.map" ]'

S="jitdump: a torn last record"
check "$S: the producer ran" eval '"$JW" "$T/jit-torn.dump" torn >/dev/null'
check "$S: exit 0" exits 0 "$CTL" jitdump "$T/jit-torn.dump" -o "$T/perf-torn.map"
check "$S: torn bytes said" out_has ", 0 closes, 2 skipped, 79 torn tail bytes"
check "$S: the whole records' functions" same_content "$T/want-all.map" "$T/perf-torn.map"

S="jitdump: a malformed record"
check "$S: the producer ran" eval '"$JW" "$T/jit-bad.dump" bad >/dev/null'
check "$S: exit 1" exits 1 "$CTL" jitdump "$T/jit-bad.dump" -o "$T/perf-bad.map"
check "$S: reason and offset said" out_has "malformed record at offset 695: record size below what its kind holds"
printf '7f0000010000 100 jd::alpha /app/jd_alpha.js:1\n7f0000010100 80 jd::beta /app/jd_alpha.js:20\n' >"$T/want-bad.map"
check "$S: what came before it is written" same_content "$T/want-bad.map" "$T/perf-bad.map"
printf 'not a jitdump at all, but long enough for a header\n' >"$T/jit-text.dump"
check "$S: a file that is no dump: exit 1" exits 1 "$CTL" jitdump "$T/jit-text.dump" -o "$T/perf-text.map"
check "$S: a file that is no dump: said" out_has "bad header: not a jitdump (bad magic); nothing written"
check "$S: a file that is no dump: no map made" eval '[ ! -e "$T/perf-text.map" ]'

S="jitdump: usage"
check "$S: no FILE: exit 2" exits 2 "$CTL" jitdump
check "$S: a bad --pid: exit 2" exits 2 "$CTL" jitdump "$T/jit-all.dump" --pid 12x
check "$S: a missing FILE: exit 2" exits 2 "$CTL" jitdump "$T/missing.dump"
check "$S: help names it" eval '"$CTL" help | grep -q "jitdump FILE \[-o MAP\] \[--pid PID\]"'

# A real producer: CPython 3.13's -X perf_jit writes /tmp/jit-<pid>.dump.
S="jitdump: CPython 3.13 -X perf_jit"
PY313=$(command -v python3.13 2>/dev/null)
if [ -z "$PY313" ] || ! "$PY313" -c 'import sys' 2>/dev/null; then
	PY313=
	for v in "$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3.13; do [ -x "$v" ] && PY313=$v; done
fi
cat >"$T/jd.py" <<'EOF'
def jd_alpha(n):
    return sum(i * i for i in range(n))
def jd_beta(n):
    return [jd_alpha(i) for i in range(n)]
def jd_gamma():
    return len(jd_beta(300))
for _ in range(5):
    jd_gamma()
EOF
mkdir -m 0700 "$T/pymaps"
"${PY313:-false}" -X perf_jit "$T/jd.py" &
pypid=$!
JITPIDS+=("$pypid")
wait "$pypid"
pyrc=$?
check "$S: python3.13 found and ran (${PY313:-none})" is "$pyrc" 0
check "$S: exit 0" exits 0 "$CTL" jitdump "/tmp/jit-$pypid.dump" -o "$T/pymaps/perf-$pypid.map"
check "$S: functions written, none malformed" out_has "pid $pypid: "
check "$S: the Python functions named" eval 'grep -q " py::jd_alpha:" "$T/pymaps/perf-$pypid.map" && grep -q " py::jd_beta:" "$T/pymaps/perf-$pypid.map" && grep -q " py::jd_gamma:" "$T/pymaps/perf-$pypid.map"'
check "$S: readable by every consumer (check: exit 0)" exits 0 "$CTL" check "$T/pymaps/perf-$pypid.map"
check "$S: check says perf reads it" out_has "perf      ok"
rm -f "/tmp/jit-$pypid.dump" /tmp/jitted-"$pypid"-*.so

echo "cli: $((checks - failures)) passed, $failures failed, $checks of $EXPECTED checks ran"
if [ "$failures" -ne 0 ]; then
	echo "cli: $failures FAILED" >&2
	exit 1
fi
# Fewer checks than expected means one was skipped; more means EXPECTED is stale.
if [ "$checks" -ne "$EXPECTED" ]; then
	echo "cli: $checks checks ran, expected $EXPECTED" >&2
	exit 1
fi
echo "cli: all perfmapctl tests passed"
