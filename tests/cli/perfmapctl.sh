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
EXPECTED=47

cleanup() {
	local p
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
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
