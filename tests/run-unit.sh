#!/bin/sh
# Runs each unit-test binary given, all of them even after a failure, and fails if any failed.
#
# Each runs with a TMPDIR of its own under one directory that is removed on
# every way out: the tests remove their directories themselves, even on an
# alarm or an abort, but a program killed by SIGKILL cannot.
root=$(mktemp -d "${TMPDIR:-/tmp}/perfmap-unit.XXXXXX") || exit 1
trap 'rm -rf "$root"' EXIT
# The EXIT trap runs on these exits too; the tests get the same signal.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

failed=""
for t in "$@"; do
	name=$(basename "$t")
	echo "== $t"
	tmp=$(mktemp -d "$root/$name.XXXXXX") || exit 1
	if ! TMPDIR=$tmp "$t"; then
		failed="$failed $name"
	fi
	if [ -n "$(ls -A "$tmp")" ]; then
		echo "unit: $name left files in its TMPDIR; removing them" >&2
	fi
	rm -rf "$tmp"
done
if [ -n "$failed" ]; then
	echo "unit: FAILED:$failed" >&2
	exit 1
fi
echo "unit: $# test programs passed"
