#!/bin/sh
# Runs each unit-test binary given, all of them even after a failure, and fails if any failed.
failed=""
for t in "$@"; do
	echo "== $t"
	if ! "$t"; then
		failed="$failed $(basename "$t")"
	fi
done
if [ -n "$failed" ]; then
	echo "unit: FAILED:$failed" >&2
	exit 1
fi
echo "unit: $# test programs passed"
