#!/bin/sh
# Runs libFuzzer targets one after the other, each on a copy of its seed corpus
# (the tree stays as committed), each for SECONDS; stops at the first finding.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...
set -u
O=${1:?usage: run.sh BUILD_DIR SECONDS TARGET...}
SECS=${2:?usage: run.sh BUILD_DIR SECONDS TARGET...}
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)

for t in "$@"; do
	corpus=$O/fuzz/corpus-$t
	log=$O/fuzz/fuzz_$t.log
	rm -rf "$corpus" && mkdir -p "$corpus" "$O/fuzz/artifacts"
	cp "$HERE/corpus/$t"/* "$corpus/"
	# The records the decoder reads are 72 bytes; the text parsers get pages.
	max_len=4096
	[ "$t" = evrecord ] && max_len=256
	start=$(date +%s)
	if ! "$O/fuzz/fuzz_$t" -max_total_time="$SECS" -max_len=$max_len -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$O/fuzz/artifacts/$t-" "$corpus" >"$log" 2>&1; then
		echo "FAIL: fuzz_$t found a crash or a broken invariant; its log ($log) ends:"
		tail -n 40 "$log" | sed 's/^/    /'
		echo "the input is in $O/fuzz/artifacts/$t-*; replay: $O/fuzz/fuzz_$t FILE"
		exit 1
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	echo "fuzz_$t: ok, ${runs:-?} inputs in $(( $(date +%s) - start )) s"
done
