#!/bin/sh
# Every global symbol the static libraries define carries the library's prefix:
# linked statically into a program, an unprefixed internal (kallsyms_load,
# states_of) would clash with the program's own names, and the version scripts
# hide internals from the shared libraries only.
#
#   tests/install/symbols.sh BUILD_DIR
#
# libperfmap.a: perfmap_ (the API) and perfmap__ (its internals, perfmap_tools.h).
# libperfmap-profile.a: perfmap_profile_ and perfmap_symbolizer_ (the API) and
# perfmap_prof__ (its internals, profile/internal.h).
set -eu
build=${1:?usage: symbols.sh BUILD_DIR}
fail=0

# check ARCHIVE PREFIX_REGEX A_SYMBOL_IT_MUST_HAVE
check() {
	archive=$build/$1
	[ -r "$archive" ] || { echo "symbols-test: FAIL: $archive missing"; fail=1; return; }
	# "archive[object]: name type value size"; defined globals only (T D B R C W V ...).
	nm -A -P -g --defined-only "$archive" |
		awk '{ sub(/^.*\[/, "", $1); sub(/\]:$/, "", $1); print $1, $2 }' >"$tmp/syms"
	# An empty listing passes every prefix: the library's API must be in it.
	grep -q " $3\$" "$tmp/syms" || {
		echo "symbols-test: FAIL: $1: $3 not found: nm read no symbols?"; fail=1; return; }
	total=$(wc -l <"$tmp/syms")
	if grep -Ev " ($2)" "$tmp/syms" >"$tmp/bad"; then
		echo "symbols-test: FAIL: $1 defines globals without its prefix ($2):"
		sed 's/^/    /' "$tmp/bad"
		fail=1
		return
	fi
	echo "symbols-test: $1: ok, $total global symbols, all prefixed"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perfmap-symbols.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
check libperfmap.a 'perfmap_' perfmap_init
check libperfmap-profile.a 'perfmap_profile_|perfmap_symbolizer_|perfmap_prof__' perfmap_profile_start
exit $fail
