#!/bin/bash
# perfmapctl as a user runs it: check verdicts and exit codes, compact beside and in place, refusals.
set -u
CTL=$(realpath "$1")
T=$(mktemp -d "${TMPDIR:-/tmp}/perfmapctl-test.XXXXXX")
BG=()
failures=0

cleanup() {
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# run EXPECTED_STATUS CMD...: output in $T/out, status checked.
run() {
	local want=$1 got
	shift
	timeout 20 "$@" >"$T/out" 2>&1
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "'$*' exited $got, want $want"
		sed 's/^/    /' "$T/out" >&2
		return 1
	fi
	return 0
}

expect_out() {
	grep -qF -- "$1" "$T/out" && return 0
	fail "output lacks '$1'"
	sed 's/^/    /' "$T/out" >&2
	return 1
}

sum() { sha256sum "$1" | cut -d' ' -f1; }

canon="$T/perf-100.map"
printf '7f0000001000 40 py::alpha:/app.py\n7f0000001040 20 py::beta:/app.py\n' >"$canon"
run 0 "$CTL" check "$canon" && expect_out "perf      ok" && expect_out "bcc       ok" &&
	pass "check: canonical map reads everywhere (exit 0)"

messy="$T/perf-200.map"
printf '7f0000001000 40 py::alpha\r\n0x7f0000001040 20 py::beta\n7f0000001000 40 py::alpha\r\n7f0000001010 8 py::inner\ngarbage\n7f0000001100 10 py::to' >"$messy"
run 1 "$CTL" check "$messy" &&
	expect_out "rejected lines: 1 garbage" &&
	expect_out "incomplete last line" &&
	expect_out 'perf      MISREADS' &&
	expect_out 'reads the name as "py::alpha\r" (CRLF)' &&
	expect_out 'blazesym  FAILS' &&
	pass "check: misread map named, per consumer and line (exit 1)"

run 0 "$CTL" check - <"$canon" && pass "check: standard input"
run 1 "$CTL" check "$canon" "$messy" && pass "check: worst status of several files"

ln -s "$canon" "$T/perf-300.map"
run 2 "$CTL" check "$T/perf-300.map" && expect_out "is a symlink, refused" &&
	pass "check: symlink refused (exit 2)"
mkfifo "$T/perf-301.map"
run 2 "$CTL" check "$T/perf-301.map" && expect_out "is not a regular file, refused" &&
	pass "check: FIFO refused without hanging"
ln "$canon" "$T/hardlink" && run 2 "$CTL" check "$canon" && expect_out "hard link" &&
	pass "check: hard-linked map refused"
rm -f "$T/hardlink"
run 2 "$CTL" check "$T/missing.map" && expect_out "No such file" && pass "check: missing file"
run 2 "$CTL" check && pass "check: no file is a usage error"
run 2 "$CTL" frobnicate && expect_out "unknown command" && pass "unknown command"

# compact -o: a canonical copy, the original untouched.
before=$(sum "$messy")
run 0 "$CTL" compact "$messy" -o "$T/out.map" &&
	expect_out "4 entries -> 4 lines (1 duplicates, 2 overlapping, 0 names under 3 bytes, 2 other lines dropped)" &&
	[ "$(sum "$messy")" = "$before" ] &&
	run 0 "$CTL" check "$T/out.map" && pass "compact -o: canonical copy, original untouched"
cat >"$T/want" <<'EOF'
7f0000001000 10 py::alpha
7f0000001010 8 py::inner
7f0000001018 28 py::alpha
7f0000001040 20 py::beta
EOF
cmp -s "$T/want" "$T/out.map" && pass "compact: later lines win, nested split, junk dropped" ||
	{ fail "compact output differs"; diff "$T/want" "$T/out.map" >&2; }
run 0 "$CTL" compact "$messy" -o - && expect_out "py::inner" && pass "compact -o -: stdout"

# compact in place: refused while a process holds the map open for writing.
victim="$T/perf-400.map"
cp "$messy" "$victim"
before=$(sum "$victim")
sleep 60 >>"$victim" &
BG+=($!)
writer=$!
sleep 0.2
run 1 "$CTL" compact "$victim" &&
	expect_out "open for writing by $writer (sleep)" &&
	expect_out "nothing changed" &&
	[ "$(sum "$victim")" = "$before" ] &&
	[ -z "$(ls -A "$T" | grep '^\.')" ] &&
	pass "compact in place: refused with a live writer, file and directory untouched"
kill "$writer"
wait "$writer" 2>/dev/null

# A reader (perf reading the map) does not stand in the way.
sleep 60 <"$victim" &
BG+=($!)
reader=$!
sleep 0.2
if [ "$(id -u)" -eq 0 ]; then
	chown 65534:65534 "$victim"
	owner=65534
else
	owner=$(id -u)
fi
chmod 0640 "$victim"
ino=$(stat -c %i "$victim")
run 0 "$CTL" compact "$victim" &&
	cmp -s "$T/want" "$victim" &&
	[ "$(stat -c '%u %a' "$victim")" = "$owner 640" ] &&
	[ "$(stat -c %i "$victim")" != "$ino" ] &&
	[ -z "$(ls -A "$T" | grep '^\.')" ] &&
	pass "compact in place: new inode, same owner and mode, no temporary left"
kill "$reader"
wait "$reader" 2>/dev/null

target="$T/target.map"
cp "$messy" "$target"
ln -s "$target" "$T/perf-500.map"
before=$(sum "$target")
run 2 "$CTL" compact "$T/perf-500.map" && expect_out "is a symlink, refused" &&
	[ "$(sum "$target")" = "$before" ] && pass "compact: symlink refused, target untouched"

big="$T/perf-600.map"
for i in $(seq 1 200); do printf '%x 10 py::function_%d\n' $((0x10000 + i * 16)) "$i"; done >"$big"
before=$(sum "$big")
run 2 "$CTL" compact --max-bytes 1K "$big" && expect_out "larger than --max-bytes" &&
	[ "$(sum "$big")" = "$before" ] && pass "compact: over --max-bytes refused, nothing written"

if [ "$failures" -ne 0 ]; then
	echo "cli: $failures FAILED" >&2
	exit 1
fi
echo "cli: all perfmapctl tests passed"
