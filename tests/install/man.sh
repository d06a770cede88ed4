#!/bin/sh
# The man pages: man -l renders them without a warning, and they name every option of
# `perfmapd --help` and every command and option of `perfmapctl help`, so that they cannot drift.
#
#   tests/install/man.sh BUILD_DIR
set -eu
build=${1:?usage: man.sh BUILD_DIR}
fail() { echo "man-test: FAIL: $*" >&2; exit 1; }

for page in man/perfmapd.8 man/perfmapctl.8; do
	# man's own warnings (--warnings: groff -w all) and groff's stricter -ww, both on stderr.
	warn=$(MANWIDTH=80 man --warnings -l -Tutf8 "$page" 2>&1 >/dev/null) || fail "$page: man -l failed: $warn"
	[ -z "$warn" ] || fail "$page: man -l warns: $warn"
	warn=$(groff -ww -man -z "$page" 2>&1) || fail "$page: groff failed: $warn"
	[ -z "$warn" ] || fail "$page: groff warns: $warn"
done

# The pages' text as written, fonts and escaped dashes undone: rendering may break a long option.
text() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$1"; }
has() { text "$1" | grep -qe "$2"; }

for opt in $("$build/perfmapd" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
	has man/perfmapd.8 "$opt\b" || fail "perfmapd.8 does not name $opt"
done
for cmd in $("$build/perfmapctl" help | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p'); do
	has man/perfmapctl.8 "^\.B perfmapctl $cmd\b" || fail "perfmapctl.8's synopsis lacks $cmd"
	has man/perfmapctl.8 "^$cmd\b" || fail "perfmapctl.8 does not describe $cmd under COMMANDS"
done
for opt in $("$build/perfmapctl" help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
	has man/perfmapctl.8 "$opt\b" || fail "perfmapctl.8 does not name $opt"
done
echo "man-test: perfmapd.8 and perfmapctl.8 render without warnings and name every option and command"
