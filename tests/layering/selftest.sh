#!/bin/bash
# The layering checks fail where they must: each is run on a small tree made to break its rule.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}
T=$(mktemp -d /var/tmp/perfmapd-layering.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT INT TERM
pass=0 fail=0

expect_fail() {  # NAME WANT(grep) COMMAND...
	local name=$1 want=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		echo "layering self-test: FAIL $name: passed on a broken tree"; fail=$((fail + 1))
	elif ! grep -q -- "$want" <<<"$out"; then
		echo "layering self-test: FAIL $name: failed without naming \"$want\": $out"; fail=$((fail + 1))
	else
		pass=$((pass + 1))
	fi
}

mkdir -p "$T/agent/lib" "$T/agent/policy" "$T/agent/store" "$T/perfmap" "$T/obj"
printf '#include "policy/policy.h"\n' > "$T/agent/lib/up.h"
printf '#include "store/store.h"\n' > "$T/agent/policy/policy.h"
printf '#include "policy/policy_internal.h"\n' > "$T/agent/store/store.c"
: > "$T/agent/store/store.h"
: > "$T/agent/policy/policy_internal.h"
expect_fail "lib/ includes the agent" 'lib/ includes nothing of the agent' python3 "$HERE/rooms.py" "$T"
expect_fail "a room includes one above it" 'room policy includes "store/store.h" of room store, above it' \
	python3 "$HERE/rooms.py" "$T"
expect_fail "a private header of another room" '"policy/policy_internal.h", private to room policy' \
	python3 "$HERE/rooms.py" "$T"

printf '#include "b.h"\n' > "$T/perfmap/a.h"
printf '#include "a.h"\n' > "$T/perfmap/b.h"
expect_fail "two headers include each other" 'a circle of 2 headers' python3 "$HERE/includes.py" "$T"

printf 'int b(int);\nint a(int x) { return x ? b(x - 1) : 0; }\n' > "$T/a.c"
printf 'int a(int);\nint b(int x) { return a(x); }\n' > "$T/b.c"
$CC -c "$T/a.c" -o "$T/obj/a.o" && $CC -c "$T/b.c" -o "$T/obj/b.o" || { echo "layering self-test: FAIL cannot compile"; exit 1; }
expect_fail "two files call each other" 'a circle of 2 files' python3 "$HERE/calls.py" "$T/obj"
expect_fail "no object" 'nothing was checked' python3 "$HERE/calls.py" "$T/agent"

echo "layering self-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -eq 6 ]
