#!/usr/bin/env bash
# make receiver-test: the Pyroscope and Parca stand-in (receiver.mjs) driven with
# curl and a hand-made pprof (mkpprof.go): a profile through each of its four
# protocols (Pyroscope's Connect Push, its legacy /ingest raw and multipart,
# Parca's WriteRaw over gRPC-web and over h2c gRPC), each mode answered as
# promised on each, and a profile or label set that each of the servers' checks
# must refuse. Requests are encoded by protoc from the servers' own .proto files.
# No root; loopback only.
#
#   tests/profile/receiver/selftest.sh NPM_DIR [SCENARIO...]
#
# NPM_DIR holds the node_modules make receiver-deps installs. Every function
# named test_* is a scenario.
set -u
NPM_DIR=$(cd "${1:?usage: selftest.sh NPM_DIR [SCENARIO...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/pmreceiver.XXXXXX)
# shellcheck disable=SC2034 # lib.sh wants BUILD; nothing of the build is used here
BUILD=$WORK
. "$HERE/../../agent/lib.sh"

RECEIVER_PIDS=()
cleanup() {
	local p
	for p in "${RECEIVER_PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for t in node protoc go curl python3; do
	command -v "$t" >/dev/null || { say "FAIL: $t is missing (make deps)"; exit 1; }
done
[ -d "$NPM_DIR/node_modules/@connectrpc/connect-node" ] ||
	{ say "FAIL: $NPM_DIR has no @connectrpc/connect-node (make receiver-deps)"; exit 1; }
# go build needs a cache; an environment without HOME has none.
case "$(go env GOCACHE 2>/dev/null)" in "" | off) export GOCACHE=$WORK/gocache ;; esac
go build -o "$WORK/mkpprof" "$HERE/mkpprof.go" || { say "FAIL: mkpprof.go does not build"; exit 1; }
PROTO=$HERE/proto
LOOP=127.0.0.1

# start_receiver NAME [ARGS...]: a receiver writing to $WORK/NAME; its ports in
# HP (HTTP/1.1), CP (h2c) and AP (admin), its directory in OUT.
start_receiver() {
	local name=$1
	shift
	OUT=$WORK/$name
	(cd "$NPM_DIR" && exec node "$HERE/receiver.mjs" --dir "$OUT" "$@" >"$WORK/$name.out" 2>"$WORK/$name.log") &
	RECEIVER_PIDS+=($!)
	if ! wait_for 20 grep -qs '^listening ' "$WORK/$name.out"; then
		say "receiver $name did not start; its log:"
		sed 's/^/    /' "$WORK/$name.log"
		return 1
	fi
	read -r _ HP CP AP <"$WORK/$name.out"
	HP=${HP#http=} CP=${CP#h2c=} AP=${AP#admin=}
}

set_mode() { curl -sS -o /dev/null -w '%{http_code}' -X POST -d "$1" "http://$LOOP:$AP/mode"; }
summary() { curl -sS "http://$LOOP:$AP/summary" >"$WORK/summary.json"; }
# py EXPR: EXPR evaluated in Python over the receiver's records: R (received.jsonl),
# Q (requests.jsonl), S (the last summary()).
py() {
	python3 - "$OUT" "$WORK/summary.json" "$1" <<'EOF'
import json, os, sys
out, summ, expr = sys.argv[1:]
def lines(f):
    p = os.path.join(out, f)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
R, Q = lines("received.jsonl"), lines("requests.jsonl")
S = json.load(open(summ)) if os.path.exists(summ) else {}
v = eval(expr)
print(json.dumps(v) if not isinstance(v, str) else v)
EOF
}

# A profile: mkpprof ARGS..., into a new file whose name is printed (called in $(...): no counter).
profile() {
	local f
	f=$(mktemp "$WORK/p.XXXXXX") && "$WORK/mkpprof" -o "$f" "$@" && echo "$f"
}
hexesc() { od -An -v -tx1 "$1" | tr -d ' \n' | sed 's/../\\x&/g'; }
# Text-format labels from K=V words.
labels_pairs() {
	local kv
	for kv in "$@"; do printf 'labels { name: "%s" value: "%s" } ' "${kv%%=*}" "${kv#*=}"; done
}
# pyroscope_req PROFILE K=V...: a push.v1.PushRequest of one series, on stdout.
pyroscope_req() {
	local prof=$1
	shift
	printf 'series { %s samples { raw_profile: "%s" } }' "$(labels_pairs "$@")" "$(hexesc "$prof")" |
		protoc -I "$PROTO/pyroscope" --encode=push.v1.PushRequest push/v1/push.proto
}
# parca_req PROFILE K=V...: a WriteRawRequest of one series, framed for gRPC (no compression).
parca_req() {
	local prof=$1
	shift
	printf 'series { labels { %s } samples { raw_profile: "%s" } }' "$(labels_pairs "$@")" "$(hexesc "$prof")" |
		protoc -I "$PROTO/parca" --encode=parca.profilestore.v1alpha1.WriteRawRequest \
			parca/profilestore/v1alpha1/profilestore.proto >"$WORK/msg.bin" || return 1
	frame "$WORK/msg.bin"
}
frame() { python3 -c 'import sys, struct; d = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(b"\0" + struct.pack(">I", len(d)) + d)' "$1"; }

# Each send leaves the HTTP status in CODE, the answer's headers in $WORK/h, its body in $WORK/b.
CREDS=(-H 'Authorization: Bearer s3cret-token' -H 'X-Scope-OrgID: tenant-a' -H 'X-Perfmapd-Test: yes')
curl_to() {
	CODE=$(curl -sS -m "${TIMEOUT:-10}" -D "$WORK/h" -o "$WORK/b" -w '%{http_code}' "$@" 2>"$WORK/curl.err")
	CURL_RC=$?
}
# send_connect REQFILE [CURL ARGS...]: Pyroscope's Connect Push.
send_connect() {
	local req=$1
	shift
	curl_to "${CREDS[@]}" -H 'Content-Type: application/proto' "$@" --data-binary "@$req" \
		"http://$LOOP:$HP/push.v1.PusherService/Push"
}
# send_ingest PROFILE QUERY: /ingest?QUERY with the profile as the body.
send_ingest() { curl_to "${CREDS[@]}" --data-binary "@$1" "http://$LOOP:$HP/ingest?$2"; }
# send_grpcweb FRAMEFILE / send_grpc FRAMEFILE: Parca's WriteRaw; GRPC, the grpc-status seen.
send_grpcweb() {
	curl_to "${CREDS[@]}" -H 'Content-Type: application/grpc-web+proto' -H 'X-Grpc-Web: 1' --data-binary "@$1" \
		"http://$LOOP:$HP/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
	GRPC=$(cat "$WORK/h" "$WORK/b" 2>/dev/null | grep -a -o 'grpc-status: *[0-9]*' | tail -1 | tr -dc 0-9)
}
send_grpc() {
	curl_to "${CREDS[@]}" --http2-prior-knowledge -H 'Content-Type: application/grpc' -H 'TE: trailers' \
		--data-binary "@$1" "http://$LOOP:$CP/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
	GRPC=$(grep -a -o 'grpc-status: *[0-9]*' "$WORK/h" 2>/dev/null | tail -1 | tr -dc 0-9)
}
grpc_message() { cat "$WORK/h" "$WORK/b" 2>/dev/null | grep -a -o 'grpc-message: [^[:cntrl:]]*' | tail -1 | sed 's/^grpc-message: //' | python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.stdin.read().strip()))'; }
body_has() { grep -a -q -- "$1" "$WORK/b"; }
header_is() { grep -i -q "^$1: *$2"$'\r'"\?$" "$WORK/h"; }

GOOD_LABELS=(__name__=process_cpu service_name=app hostname=node-1)

test_protocols() {
	local t0 p plain req n
	start_receiver protocols || { fail "the receiver starts"; return; }
	t0=$(date +%s%N)
	p=$(profile -stacks 4 -time "$t0")
	plain=$(profile -stacks 4 -time "$t0" -plain)
	pyroscope_req "$p" "${GOOD_LABELS[@]}" >"$WORK/push.bin"
	send_connect "$WORK/push.bin"
	check "Connect Push of a gzipped pprof: 200 (got $CODE)" test "$CODE" = 200
	pyroscope_req "$plain" "${GOOD_LABELS[@]}" >"$WORK/push-plain.bin"
	gzip -c "$WORK/push-plain.bin" >"$WORK/push-plain.bin.gz"
	send_connect "$WORK/push-plain.bin.gz" -H 'Content-Encoding: gzip'
	check "Connect Push of a plain pprof, the request gzip-encoded: 200 (got $CODE)" test "$CODE" = 200
	send_ingest "$p" "format=pprof&name=app%7Bhostname%3Dnode-1%7D&from=$((t0 / 1000000000))&spyName=perfmapd"
	check "/ingest?format=pprof with the pprof as the body: 200 (got $CODE)" test "$CODE" = 200
	curl_to "${CREDS[@]}" -F "profile=@$p;filename=profile.pprof" "http://$LOOP:$HP/ingest?name=app&spyName=perfmapd"
	check "/ingest with a multipart form's profile part: 200 (got $CODE)" test "$CODE" = 200
	parca_req "$p" "${GOOD_LABELS[@]}" >"$WORK/wr.frame"
	send_grpcweb "$WORK/wr.frame"
	check "WriteRaw over gRPC-web: HTTP 200, grpc-status 0 (got $CODE, $GRPC)" test "$CODE/$GRPC" = 200/0
	send_grpc "$WORK/wr.frame"
	check "WriteRaw over h2c gRPC: HTTP 200, grpc-status 0 (got $CODE, $GRPC)" test "$CODE/$GRPC" = 200/0

	summary
	check "six profiles accepted, none refused ($(py 'S["profiles"], S["refused"]'))" \
		test "$(py 'S["profiles"] == 6 and S["refused"] == [] and len(R) == 6')" = true
	check "received.jsonl: the protocols in order" \
		test "$(py '",".join(r["protocol"] for r in R)')" = connect,connect,ingest,ingest,grpc-web,grpc
	check "every profile: 10 samples, 0.5 s of CPU, both sample types, the period, two mappings" \
		test "$(py 'all(r["samples"] == 10 and r["cpu_ns"] == 500000000 and r["sample_types"] == ["samples/count", "cpu/nanoseconds"] and r["period"] == 50000000 and r["period_type"] == "cpu/nanoseconds" and r["n_mappings"] == 2 for r in R)')" = true
	check "every profile read by go tool pprof -raw, which counts the same samples" \
		test "$(py 'all(r["pprof_raw_ok"] and r["pprof_samples"] == 10 for r in R)')" = true
	check "the executable's build id, the demangled name and its mangled system_name arrive" \
		test "$(py 'all(r["build_ids"] == ["4e2f9a0c1b7d3e5f"] and "SharedRuntime::lrem(long, long)" in r["functions"] and "_ZN13SharedRuntime4lremEll" in r["system_names"] for r in R)')" = true
	check "time_nanos arrives to the nanosecond ($t0), duration 10 s" \
		test "$(py "all(r['time_nanos'] == $t0 and r['duration_nanos'] == 10000000000 for r in R)")" = true
	check "credentials, tenant and x-* headers recorded" \
		test "$(py 'all(r["headers"].get("authorization") == "Bearer s3cret-token" and r["headers"].get("x-scope-orgid") == "tenant-a" and r["headers"].get("x-perfmapd-test") == "yes" for r in R)')" = true
	check "Connect, gRPC-web and gRPC keep the labels as sent (one series)" \
		test "$(py '[r["series"] for r in R if r["protocol"] != "ingest"] == ["{__name__=\"process_cpu\", hostname=\"node-1\", service_name=\"app\"}"] * 4')" = true
	check "/ingest labels as Pyroscope makes them (__name__ from the sample types, __delta__, pyroscope_spy)" \
		test "$(py 'R[2]["labels"]')" = '{"__delta__": "false", "__name__": "process_cpu", "hostname": "node-1", "pyroscope_spy": "perfmapd", "service_name": "app"}'
	check "summary: the series and their samples" \
		test "$(py 'S["series"]["{__name__=\"process_cpu\", hostname=\"node-1\", service_name=\"app\"}"]')" = '{"profiles": 4, "samples": 40, "cpu_ns": 2000000000}'
	n=$(ls "$OUT"/[0-9][0-9][0-9][0-9].pb.gz 2>/dev/null | wc -l)
	check "six NNNN.pb.gz files ($n), each gzip (the plain one compressed)" \
		eval '[ "$n" = 6 ] && for f in "$OUT"/0*.pb.gz; do gzip -t "$f" || exit 1; done'
	check "received.jsonl says which came gzipped (all but the plain one)" \
		test "$(py '[r["gzipped"] for r in R]')" = '[true, false, true, true, true, true]'
	check "the stored plain profile is the one sent" eval 'gzip -dc "$OUT/0002.pb.gz" | cmp -s - "$plain"'
	check "requests.jsonl: six requests, by protocol and status" \
		test "$(py '[(q["protocol"], q["status"]) for q in Q]')" = '[["connect", "200"], ["connect", "200"], ["ingest", "200"], ["ingest", "200"], ["grpc-web", "OK"], ["grpc", "OK"]]'
}

# expect_all WHAT CONNECT_STATUS CONNECT_CODE INGEST_STATUS INGEST_CODE GRPC_CODE: the
# mode set answers each protocol so; nothing is stored. /ingest's code is the one
# Pyroscope's ErrorWithStatus derives from the status (500: unknown).
expect_all() {
	local what=$1 cs=$2 cc=$3 is=$4 ic=$5 gc=$6 before
	summary
	before=$(py 'S["profiles"]')
	send_connect "$WORK/push.bin"
	check "$what: Connect answers $cs $cc (got $CODE $(head -c 120 "$WORK/b"))" \
		eval '[ "$CODE" = "$cs" ] && body_has "\"code\":\"$cc\""'
	[ "$cs" = 429 ] && check "$what: Connect sends Retry-After: 7" header_is retry-after 7
	send_ingest "$P" "format=pprof&name=app"
	check "$what: /ingest answers $is $ic (got $CODE $(head -c 120 "$WORK/b"))" eval '[ "$CODE" = "$is" ] && body_has "\"code\":\"$ic\""'
	[ "$cs" = 429 ] && check "$what: /ingest sends Retry-After: 7" header_is retry-after 7
	send_grpcweb "$WORK/wr.frame"
	check "$what: gRPC-web answers grpc-status $gc (got $CODE, $GRPC)" test "$CODE/$GRPC" = "200/$gc"
	send_grpc "$WORK/wr.frame"
	check "$what: gRPC answers grpc-status $gc (got $CODE, $GRPC)" test "$CODE/$GRPC" = "200/$gc"
	[ "$cs" = 429 ] && check "$what: gRPC sends retry-after: 7" header_is retry-after 7
	summary
	check "$what: nothing stored" test "$(py 'S["profiles"]')" = "$before"
}

test_modes() {
	start_receiver modes || { fail "the receiver starts"; return; }
	P=$(profile)
	pyroscope_req "$P" "${GOOD_LABELS[@]}" >"$WORK/push.bin"
	parca_req "$P" "${GOOD_LABELS[@]}" >"$WORK/wr.frame"
	check "mode 429 with retry_after set" test "$(set_mode '{"mode":"429","retry_after":7}')" = 200
	expect_all "429" 429 resource_exhausted 429 resource_exhausted 8
	check "mode 500 set" test "$(set_mode '{"mode":"500"}')" = 200
	expect_all "500" 500 internal 500 unknown 13
	check "mode 503 set" test "$(set_mode '{"mode":"503"}')" = 200
	expect_all "503" 503 unavailable 503 unavailable 14
	check "mode 400 with a message set" test "$(set_mode '{"mode":"400","message":"quota for tenant-a is spent"}')" = 200
	expect_all "400" 400 invalid_argument 400 invalid_argument 3
	send_grpc "$WORK/wr.frame"
	check "400: gRPC carries the message ($(grpc_message))" test "$(grpc_message)" = "quota for tenant-a is spent"
	check "an unknown mode is refused" test "$(set_mode '{"mode":"teapot"}')" = 400
	check "mode 500 for 2 requests" test "$(set_mode '{"mode":"500","count":2}')" = 200
	send_connect "$WORK/push.bin"
	local a=$CODE
	send_grpc "$WORK/wr.frame"
	local b=$GRPC
	send_connect "$WORK/push.bin"
	check "count: two answered 500 (Connect $a, gRPC $b), the third 200 ($CODE)" test "$a/$b/$CODE" = 500/13/200
	check "back to ok" test "$(curl -sS "http://$LOOP:$AP/mode")" = '{"mode":"ok","retry_after":null,"message":null,"count":null}'
	send_grpcweb "$WORK/wr.frame"
	check "ok again: gRPC-web accepted ($GRPC)" test "$GRPC" = 0
	summary
	check "by_status counts every answer ($(py 'S["by_status"]'))" \
		test "$(py 'S["by_status"] == {"429": 2, "RESOURCE_EXHAUSTED": 2, "500": 3, "INTERNAL": 3, "503": 2, "UNAVAILABLE": 2, "400": 2, "INVALID_ARGUMENT": 3, "200": 1, "OK": 1}')" = true
}

test_hang() {
	local t0 el
	start_receiver hang || { fail "the receiver starts"; return; }
	P=$(profile)
	pyroscope_req "$P" "${GOOD_LABELS[@]}" >"$WORK/push.bin"
	parca_req "$P" "${GOOD_LABELS[@]}" >"$WORK/wr.frame"
	check "mode hang set" test "$(set_mode '{"mode":"hang"}')" = 200
	TIMEOUT=2
	t0=$(date +%s)
	send_connect "$WORK/push.bin"
	check "hang: Connect gets no answer (curl timed out: rc $CURL_RC, status $CODE)" test "$CURL_RC/$CODE" = 28/000
	send_ingest "$P" "format=pprof&name=app"
	check "hang: /ingest gets no answer (rc $CURL_RC)" test "$CURL_RC/$CODE" = 28/000
	send_grpcweb "$WORK/wr.frame"
	check "hang: gRPC-web gets no answer (rc $CURL_RC)" test "$CURL_RC/$CODE" = 28/000
	send_grpc "$WORK/wr.frame"
	check "hang: gRPC gets no answer (rc $CURL_RC)" test "$CURL_RC/$CODE" = 28/000
	el=$(($(date +%s) - t0))
	TIMEOUT=10
	check "hang: the connections were accepted (requests.jsonl has four hung requests)" \
		test "$(py '[q["status"] for q in Q]')" = '["hang", "hang", "hang", "hang"]'
	check "hang: the four waits took their 2 s each ($el s)" test "$el" -ge 7
	check "back to ok" test "$(set_mode '{"mode":"ok"}')" = 200
	send_connect "$WORK/push.bin"
	check "ok again: Connect accepted ($CODE)" test "$CODE" = 200
}

test_down() {
	local hp cp
	start_receiver down || { fail "the receiver starts"; return; }
	hp=$HP cp=$CP
	P=$(profile)
	pyroscope_req "$P" "${GOOD_LABELS[@]}" >"$WORK/push.bin"
	parca_req "$P" "${GOOD_LABELS[@]}" >"$WORK/wr.frame"
	send_connect "$WORK/push.bin"
	check "up: Connect accepted ($CODE)" test "$CODE" = 200
	check "mode down set" test "$(set_mode '{"mode":"down"}')" = 200
	send_connect "$WORK/push.bin"
	check "down: HTTP/1.1 port refuses the connection (curl rc $CURL_RC)" test "$CURL_RC" = 7
	send_grpc "$WORK/wr.frame"
	check "down: h2c port refuses the connection (curl rc $CURL_RC)" test "$CURL_RC" = 7
	summary
	check "down: the admin port still answers" test "$(py 'S["requests"]')" = 1
	check "mode ok set" test "$(set_mode '{"mode":"ok"}')" = 200
	send_connect "$WORK/push.bin"
	check "up again: Connect accepted on port $hp ($CODE)" test "$CODE" = 200
	send_grpc "$WORK/wr.frame"
	check "up again: gRPC accepted on port $cp ($GRPC)" test "$GRPC" = 0
	check "down twice, then 429: listeners reopen for an error mode too" \
		eval '[ "$(set_mode "{\"mode\":\"down\"}")" = 200 ] && [ "$(set_mode "{\"mode\":\"down\"}")" = 200 ] && [ "$(set_mode "{\"mode\":\"429\"}")" = 200 ]'
	send_connect "$WORK/push.bin"
	check "429 after down: answered 429 ($CODE)" test "$CODE" = 429
}

# refuse_both KIND CONNECT_STATUS CONNECT_TEXT GRPC_CODE GRPC_TEXT: a profile broken
# as mkpprof -break KIND is refused through Connect and through gRPC-web, with these words.
refuse_both() {
	local kind=$1 cs=$2 ctext=$3 gc=$4 gtext=$5 p
	p=$(profile -break "$kind")
	pyroscope_req "$p" "${GOOD_LABELS[@]}" >"$WORK/bad.bin"
	send_connect "$WORK/bad.bin"
	check "$kind: Pyroscope answers $cs '$ctext' (got $CODE $(head -c 160 "$WORK/b"))" \
		eval '[ "$CODE" = "$cs" ] && body_has "$ctext"'
	parca_req "$p" "${GOOD_LABELS[@]}" >"$WORK/bad.frame"
	send_grpcweb "$WORK/bad.frame"
	check "$kind: Parca answers grpc-status $gc '$gtext' (got $GRPC $(grpc_message | cut -c1-160))" \
		eval '[ "$GRPC" = "$gc" ] && grpc_message | grep -q -- "$gtext"'
}

test_refusals() {
	local p long
	start_receiver refusals || { fail "the receiver starts"; return; }
	# The pprof checks (Pyroscope pkg/validation/validate.go; Parca pkg/normalizer/validate.go).
	refuse_both string0 400 "string 0 should be empty string" 3 "first item in string table is expected to be empty string"
	refuse_both mapping-ids 400 "mapping id is not sequential" 3 "mapping id is not sequential"
	refuse_both location-ids 400 "location id is not sequential" 3 "location id is not sequential"
	refuse_both function-ids 400 "function id is not sequential" 3 "function id is not sequential"
	refuse_both location-zero 400 "location id is 0" 3 "location id is not sequential"
	refuse_both function-zero 400 "function id is 0" 3 "function id is not sequential"
	refuse_both values 400 "sample value length mismatch" 3 "mismatch: sample has 1 values vs. 2 types"
	refuse_both sampletype-dash 400 "sample type contains -" 3 "sample type contains -"
	refuse_both no-sampletypes 400 "empty profile" 3 "missing sample type information"
	refuse_both old-time 400 "is outside of ingestion window" 3 "is outside of ingestion window"
	refuse_both invalid-utf8 400 "invalid utf8 string hex" 3 "invalid utf8 string hex"
	refuse_both too-many-samples 400 "exceeds the samples count limit" 3 "exceeds the samples count limit"
	refuse_both dangling-location 400 "sample 0 location number 0 (99) is out of range" 3 "is out of range"
	# Not a profile: Pyroscope's decoding errors carry no code (Connect: unknown, HTTP 500).
	refuse_both garbage 500 '"code":"unknown"' 3 "failed to parse profile"
	refuse_both bad-gzip 500 '"code":"unknown"' 2 "decompressing profile"

	# The labels (Pyroscope ValidateLabels; Parca NormalizeWriteRawRequest, writeSeries).
	p=$(profile)
	pyroscope_req "$p" service_name=app >"$WORK/l.bin"
	send_connect "$WORK/l.bin"
	check "no __name__: Pyroscope 400 invalid metric name ($CODE)" eval '[ "$CODE" = 400 ] && body_has "invalid metric name"'
	parca_req "$p" service_name=app >"$WORK/l.frame"
	send_grpcweb "$WORK/l.frame"
	check "no __name__: Parca INVALID_ARGUMENT missing __name__ label ($GRPC)" eval '[ "$GRPC" = 3 ] && grpc_message | grep -q "missing __name__ label"'
	pyroscope_req "$p" "${GOOD_LABELS[@]}" hostname=node-2 >"$WORK/l.bin"
	send_connect "$WORK/l.bin"
	check "a name twice: Pyroscope 400 duplicate label name ($CODE)" eval '[ "$CODE" = 400 ] && body_has "has duplicate label name: .hostname."'
	parca_req "$p" "${GOOD_LABELS[@]}" hostname=node-2 >"$WORK/l.frame"
	send_grpc "$WORK/l.frame"
	check "a name twice: Parca INVALID_ARGUMENT duplicate label name ($GRPC)" eval '[ "$GRPC" = 3 ] && grpc_message | grep -q "duplicate label name: hostname"'
	pyroscope_req "$p" "${GOOD_LABELS[@]}" =x >"$WORK/l.bin"
	send_connect "$WORK/l.bin"
	check "an empty name: Pyroscope 400 invalid label name ($CODE)" eval '[ "$CODE" = 400 ] && body_has "invalid label name"'
	parca_req "$p" "${GOOD_LABELS[@]}" =x >"$WORK/l.frame"
	send_grpcweb "$WORK/l.frame"
	check "an empty name: Parca INVALID_ARGUMENT invalid label name ($GRPC)" eval '[ "$GRPC" = 3 ] && grpc_message | grep -q "invalid label name"'
	local many=() i
	for i in $(seq 1 28); do many+=("l$i=v"); done
	pyroscope_req "$p" "${GOOD_LABELS[@]}" "${many[@]}" >"$WORK/l.bin"
	send_connect "$WORK/l.bin"
	check "31 label names: Pyroscope 400 limit 30 ($CODE)" eval '[ "$CODE" = 400 ] && body_has "has 31 label names; limit 30"'
	long=$(printf 'x%.0s' $(seq 1 2049))
	pyroscope_req "$p" "${GOOD_LABELS[@]}" "pod=$long" >"$WORK/l.bin"
	send_connect "$WORK/l.bin"
	check "a 2049-byte value: Pyroscope 400 label value too long ($CODE)" eval '[ "$CODE" = 400 ] && body_has "has label value too long"'
	parca_req "$p" __name__=process-cpu service_name=app >"$WORK/l.frame"
	send_grpcweb "$WORK/l.frame"
	check "__name__ not a PromQL name: Parca UNKNOWN invalid profile type ($GRPC)" eval '[ "$GRPC" = 2 ] && grpc_message | grep -q "invalid profile type at row 0 (process-cpu:samples:count:cpu:nanoseconds:delta)"'
	summary
	local before
	before=$(py 'S["profiles"]')
	pyroscope_req "$p" __name__=process_cpu >"$WORK/l.bin"
	send_connect "$WORK/l.bin"
	summary
	check "no service_name: Pyroscope accepts it as unknown_service ($CODE), as pushSeries does" \
		test "$CODE/$(py 'R[-1]["labels"]["service_name"]')" = 200/unknown_service

	# /ingest (api/model/labelset, pkg/ingester/pyroscope/ingest_handler.go).
	send_ingest "$p" "format=pprof"
	check "/ingest without name: 400 service name is required ($CODE)" eval '[ "$CODE" = 400 ] && body_has "name: service name is required"'
	send_ingest "$p" "format=pprof&name=my%20app"
	check "/ingest name with a space: 400 invalid service name ($CODE)" eval '[ "$CODE" = 400 ] && body_has "invalid service name"'
	send_ingest "$p" "format=pprof&name=app%7Bpod-name%3Dx%7D"
	check "/ingest label name with '-': 400 invalid label name ($CODE)" eval '[ "$CODE" = 400 ] && body_has "invalid label name"'
	send_ingest "$(profile -break string0)" "format=pprof&name=app"
	check "/ingest of a broken profile: 422 ($CODE), as the handler answers a push error" \
		eval '[ "$CODE" = 422 ] && body_has "string 0 should be empty string"'
	curl_to -F "profile=@$p;filename=p.pprof" -F "prev_profile=@$p;filename=q.pprof" "http://$LOOP:$HP/ingest?name=app"
	check "/ingest multipart with a prev_profile: 422 unsupported client version ($CODE)" eval '[ "$CODE" = 422 ] && body_has "unsupported client version"'
	curl_to -F "other=@$p;filename=p.pprof" "http://$LOOP:$HP/ingest?name=app"
	check "/ingest multipart without a profile part: 200, nothing stored, as the server does ($CODE)" test "$CODE" = 200
	summary
	check "only the service_name-less profile was stored ($(py 'S["profiles"]') after $before)" test "$(py 'S["profiles"]')" = $((before + 1))
	check "every refusal is in the summary's refused list ($(py 'len(S["refused"])'))" test "$(py 'len(S["refused"])')" = 44
}

test_partial() {
	local good bad
	start_receiver partial || { fail "the receiver starts"; return; }
	good=$(profile)
	bad=$(profile -break string0)
	printf 'series { %s samples { raw_profile: "%s" } } series { %s samples { raw_profile: "%s" } }' \
		"$(labels_pairs __name__=process_cpu service_name=good)" "$(hexesc "$good")" \
		"$(labels_pairs __name__=process_cpu service_name=bad)" "$(hexesc "$bad")" |
		protoc -I "$PROTO/pyroscope" --encode=push.v1.PushRequest push/v1/push.proto >"$WORK/two.bin"
	send_connect "$WORK/two.bin"
	summary
	check "Pyroscope, one good series and one bad: 400 ($CODE), and the good one kept (as PushBatch does)" \
		test "$CODE/$(py 'list(S["series"]) == ["{__name__=\"process_cpu\", service_name=\"good\"}"]')" = 400/true
	printf 'series { labels { %s } samples { raw_profile: "%s" } } series { labels { %s } samples { raw_profile: "%s" } }' \
		"$(labels_pairs __name__=process_cpu service_name=good2)" "$(hexesc "$good")" \
		"$(labels_pairs __name__=process_cpu service_name=bad2)" "$(hexesc "$bad")" |
		protoc -I "$PROTO/parca" --encode=parca.profilestore.v1alpha1.WriteRawRequest \
			parca/profilestore/v1alpha1/profilestore.proto >"$WORK/two.msg"
	frame "$WORK/two.msg" >"$WORK/two.frame"
	send_grpc "$WORK/two.frame"
	summary
	check "Parca, one good series and one bad: INVALID_ARGUMENT ($GRPC), nothing kept (as NormalizeWriteRawRequest does)" \
		test "$GRPC/$(py 'S["profiles"]')" = 3/1
}

test_pprof_refused() {
	local p
	start_receiver server-checks --checks server || { fail "the receiver starts"; return; }
	p=$(profile -break dangling-location)
	pyroscope_req "$p" "${GOOD_LABELS[@]}" >"$WORK/d.bin"
	send_connect "$WORK/d.bin"
	check "--checks server: a sample naming a missing location passes Pyroscope's own checks ($CODE)" test "$CODE" = 200
	summary
	check "go tool pprof -raw refuses it: recorded, refused, counted in no series ($(py 'S["refused"]'))" \
		test "$(py 'R[0]["pprof_raw_ok"] is False and S["series"] == {} and S["refused"][0].startswith("pprof: 0001.pb.gz: go tool pprof -raw refused it:") and "malformed profile" in S["refused"][0]')" = true
}

test_legacy_names() {
	local p
	start_receiver legacy --label-names legacy || { fail "the receiver starts"; return; }
	p=$(profile)
	pyroscope_req "$p" "${GOOD_LABELS[@]}" k8s.pod.name=web-1 >"$WORK/n.bin"
	send_connect "$WORK/n.bin"
	summary
	check "legacy names: Pyroscope takes a dotted name as k8s_pod_name ($CODE), as with sanitization on" \
		test "$CODE/$(py 'R[0]["labels"].get("k8s_pod_name")')" = 200/web-1
	parca_req "$p" "${GOOD_LABELS[@]}" k8s.pod.name=web-1 >"$WORK/n.frame"
	send_grpc "$WORK/n.frame"
	check "legacy names: Parca refuses a dotted name ($GRPC)" eval '[ "$GRPC" = 3 ] && grpc_message | grep -q "invalid label name: k8s.pod.name"'
}

scenario_done() {
	local p
	for p in "${RECEIVER_PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	RECEIVER_PIDS=()
	[ -s "$WORK/summary.json" ] && rm -f "$WORK/summary.json"
	return 0
}

pick_scenarios "$0" "$@"
run_scenarios receiver-test
