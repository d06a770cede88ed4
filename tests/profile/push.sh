#!/usr/bin/env bash
# perfmapctl profile --push against the stand-in for Pyroscope and Parca
# (tests/profile/receiver/: the servers' own .proto files, their checks, and
# go tool pprof -raw on every profile), with real BPF sampling of real
# processes in real cgroups: a systemd service's and a Kubernetes pod's
# container's, made here in the cgroup2 hierarchy. Every protocol; every
# sample the kernel took arrives, in its workload's series; a server down
# for three periods, 429 and 500 retried, 400 said once and not retried, a
# server that never answers does not stall sampling, the spool stays within
# its bound and is sent at the next start, credentials sent and never
# printed.
#
#   tests/profile/push.sh BUILD_DIR NPM_DIR [SCENARIO...]
#
# NPM_DIR: the receiver's node_modules (make receiver-deps). Root and BPF
# (PERFMAPD_SKIP_BPF=1 skips loudly). Maps go to private directories under
# $WORK, never /tmp; the cgroups made are removed at exit.
set -u
BUILD=$(cd "${1:?usage: push.sh BUILD_DIR NPM_DIR [SCENARIO...]}" && pwd)
NPM_DIR=$(cd "${2:?usage: push.sh BUILD_DIR NPM_DIR [SCENARIO...]}" && pwd)
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-push.XXXXXX)
chmod 755 "$WORK"
. "$HERE/../agent/lib.sh"

CTL=$BUILD/perfmapctl
SPLIT=$BUILD/tests/splitjit
STACKGEN=$BUILD/bench/stackgen
RECEIVER=$HERE/receiver/receiver.mjs
PIDS=()
RECEIVER_PID=
CGROUPS=()   # made here, removed at exit (deepest first)
cleanup() {
	local cg pid
	kill_all "${PIDS[@]}"
	[ -z "$RECEIVER_PID" ] || { kill "$RECEIVER_PID" 2>/dev/null; wait "$RECEIVER_PID" 2>/dev/null; }
	for ((i = ${#CGROUPS[@]} - 1; i >= 0; i--)); do
		cg=${CGROUPS[i]}
		[ -d "$cg" ] || continue
		for pid in $(cat "$cg/cgroup.procs" 2>/dev/null); do
			kill -9 "$pid" 2>/dev/null
		done
		wait_for 5 eval "[ ! -s '$cg/cgroup.procs' ]"
		rmdir "$cg" 2>/dev/null
	done
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapctl profile --push tests"
for t in node protoc go python3; do
	command -v "$t" >/dev/null || { say "FAIL: $SUITE: $t is missing (make deps)"; exit 1; }
done
[ -d "$NPM_DIR/node_modules/@connectrpc/connect-node" ] ||
	{ say "FAIL: $SUITE: $NPM_DIR has no @connectrpc/connect-node (make receiver-deps)"; exit 1; }
[ "$(id -u)" = 0 ] || skip_or_fail "not root: the BPF sampler cannot be loaded"
[ -r /sys/kernel/btf/vmlinux ] || skip_or_fail "no kernel BTF (/sys/kernel/btf/vmlinux)"
if ! "$CTL" profile -d 1 -p $$ >"$WORK/preflight.out" 2>&1; then
	skip_or_fail "perfmapctl profile does not run here: $(head -c 300 "$WORK/preflight.out")"
fi
case "$(go env GOCACHE 2>/dev/null)" in "" | off) export GOCACHE=$WORK/gocache ;; esac
# The cgroup2 hierarchy, whose path the profiler takes for a process's workload.
CG2=$(findmnt -n -o TARGET -t cgroup2 | head -1)
TOKEN=tok-$RANDOM$RANDOM-secret
printf '%s\n' "$TOKEN" >"$WORK/token"
chmod 600 "$WORK/token"
POD_UID=0f3c2a9e-5b1d-4c7e-9a2b-$(printf '%012x' $((RANDOM * 32768 + RANDOM)))
CID=$(printf '%064x' $$)
UNIT=pmpush-$$.service

# receiver_start: the stand-in, fresh, its ports in HP, CP and AP, its files in OUT.
receiver_start() {
	OUT=$WORK/receiver.$((++RECEIVERS))
	(cd "$NPM_DIR" && exec node "$RECEIVER" --dir "$OUT" >"$OUT.out" 2>"$OUT.log") &
	RECEIVER_PID=$!
	if ! wait_for 30 grep -qs '^listening ' "$OUT.out"; then
		say "    the receiver did not start; its log:"
		sed 's/^/    /' "$OUT.log" | tail -20
		return 1
	fi
	read -r _ HP CP AP <"$OUT.out"
	HP=${HP#http=} CP=${CP#h2c=} AP=${AP#admin=}
}
RECEIVERS=0
receiver_stop() {
	[ -z "$RECEIVER_PID" ] || { kill "$RECEIVER_PID" 2>/dev/null; wait "$RECEIVER_PID" 2>/dev/null; }
	RECEIVER_PID=
}
# set_mode JSON: how the receiver answers from now on (POST /mode answers once it holds).
set_mode() { [ "$(curl -sS -o /dev/null -w '%{http_code}' -X POST -d "$1" "http://127.0.0.1:$AP/mode")" = 200 ]; }
# summary: the receiver's summary, once every profile has been through go tool pprof.
summary() { curl -sS --max-time 60 "http://127.0.0.1:$AP/summary" >"$OUT.summary.json"; }
# py EXPR: EXPR in Python over R (received.jsonl), Q (requests.jsonl), S (the summary), E (perfmapctl's stderr).
py() {
	python3 - "$OUT" "$1" "${ERR:-/dev/null}" <<'EOF'
import json, os, re, sys
out, expr, err = sys.argv[1:]
def lines(f):
    p = os.path.join(out, f)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
R, Q = lines("received.jsonl"), lines("requests.jsonl")
S = json.load(open(out + ".summary.json")) if os.path.exists(out + ".summary.json") else {}
E = open(err, errors="replace").read()
def final(key):
    m = re.search(r"push: \d+ samples in \d+ periods; .*", E)
    if not m: return None
    line = m.group(0)
    pats = {"pushed_samples": r"pushed \d+ requests \((\d+) samples", "pushed": r"pushed (\d+) requests",
            "retried": r"retried (\d+)", "rejected": r"rejected (\d+)", "dropped": r"dropped (\d+)",
            "kept": r"kept in the spool (\d+)", "taken": r"the kernel took (\d+)",
            "lost": r"\((\d+) past --max-stacks\)", "unencoded": r"not encoded (\d+)",
            "dropped_samples": r"dropped \d+ \((\d+) samples"}
    m = re.search(pats[key], line)
    return int(m.group(1)) if m else None
def svc(r): return r["labels"].get("service_name")
def t(q):
    import datetime
    return datetime.datetime.fromisoformat(q["time"].replace("Z", "+00:00")).timestamp()
def fns(name): return set(f for r in R if svc(r) == name for f in r["functions"])
v = eval(expr)
print(json.dumps(v) if not isinstance(v, str) else v)
EOF
}
# is_true EXPR: py's EXPR is true.
is_true() { [ "$(py "$1")" = true ]; }

# cg_make PATH: a cgroup at PATH under the cgroup2 hierarchy, removed at exit.
cg_make() {
	local d=$CG2 part
	local IFS=/
	for part in $1; do
		[ -n "$part" ] || continue
		d=$d/$part
		[ -d "$d" ] && continue
		mkdir "$d" || return 1
		CGROUPS+=("$d")
	done
}
# workload CGPATH PREFIX SECONDS: splitjit (PREFIX_hot, PREFIX_cold) in the
# cgroup CGPATH before its exec, its map in $MAPS; its pid in WPID.
workload() {
	local out=$WORK/w.$2.out
	cg_make "$1" || return 1
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG2/$1" \
		"$SPLIT" --dir "$MAPS" --prefix "$2" --run-ms $(($3 * 1000)) >"$out" 2>&1 &
	PIDS+=($!)
	WPID=$!
	wait_for 10 grep -qs '^pid ' "$out"
}
# Two workloads: a systemd service's (A) and a Kubernetes pod's container's (B).
SVC_CG=system.slice/$UNIT
POD_CG=kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${POD_UID//-/_}.slice/cri-containerd-$CID.scope
two_workloads() {
	MAPS=$(mktemp -d "$WORK/maps.XXXXXX")
	workload "$SVC_CG" svca "$1" && A=$WPID &&
		workload "$POD_CG" poda "$1" && B=$WPID
}
# push NAME ARGS...: perfmapctl profile ARGS in the foreground; its stderr in ERR, its status in RC.
push() {
	ERR=$WORK/$1.err
	shift
	"$CTL" profile "$@" >"$WORK/push.stdout" 2>"$ERR"
	RC=$?
}
# arrives NAME: every sample the kernel took (less those past --max-stacks) was pushed, and the receiver kept each.
arrives() {
	summary
	check "$1: every sample the kernel took was pushed ($(py 'final("pushed_samples")') of $(py 'final("taken")') less $(py 'final("lost")'); none dropped, rejected or left unencoded)" \
		is_true 'final("pushed_samples") == final("taken") - final("lost") > 0 and final("dropped") == final("rejected") == final("unencoded") == 0'
	check "$1: and the receiver kept them all ($(py 'sum(r["samples"] for r in R)') samples in $(py 'len(R)') profiles; refused: $(py 'S.get("refused")'))" \
		is_true 'sum(r["samples"] for r in R) == final("pushed_samples") and not S.get("refused")'
	check "$1: go tool pprof -raw read every profile received, the same samples" \
		is_true 'len(R) > 0 and all(r["pprof_raw_ok"] for r in R)'
}
needs_cgroup2() {
	[ -n "$CG2" ] && [ -w "$CG2" ] && return 0
	skip "no writable cgroup2 hierarchy here: no workload's cgroup can be made"
	return 1
}

# Each protocol: two workloads in two series, labelled as the servers want;
# every sample arrives; the JIT names perfmapd's maps give; the credentials
# sent, never printed.
test_protocols() {
	local proto url hostname
	needs_cgroup2 protocols || return
	hostname=$(hostname)
	for proto in pyroscope pyroscope-ingest parca parca-grpc; do
		receiver_start || { fail "protocols: $proto: the receiver did not start"; return; }
		url=http://127.0.0.1:$HP
		[ "$proto" != parca-grpc ] || url=http://127.0.0.1:$CP
		two_workloads 10 || { fail "protocols: $proto: the workloads did not start"; return; }
		push "protocols-$proto" -p "$A,$B" -d 4 --every 1s --map-dir "$MAPS" --push "$url" \
			--push-protocol "$proto" --push-token-file "$WORK/token" --push-tenant team-a \
			--label cluster=ci
		check "protocols: $proto: perfmapctl exits 0" test "$RC" = 0
		arrives "protocols: $proto"
		check "protocols: $proto: a series for the service ($UNIT), the pod's another, nothing else: $(py 'sorted(set(svc(r) for r in R))')" \
			is_true "sorted(set(svc(r) for r in R)) == sorted(['$UNIT', 'pod$([ $proto = pyroscope-ingest ] && echo _ || echo :)$POD_UID'])"
		check "protocols: $proto: the service's series names its JIT functions and none of the pod's" \
			is_true "{'svca_hot', 'svca_cold'} <= fns('$UNIT') and not any(f.startswith('poda_') for f in fns('$UNIT'))"
		check "protocols: $proto: the pod's series names its JIT functions and none of the service's" \
			is_true "{'poda_hot', 'poda_cold'} <= set(f for r in R if svc(r) != '$UNIT' for f in r['functions']) and not any(f.startswith('svca_') for r in R if svc(r) != '$UNIT' for f in r['functions'])"
		check "protocols: $proto: labels: hostname, cluster, the unit, the container and pod, no pid" \
			is_true "all(r['labels'].get('hostname') == '$hostname' and r['labels'].get('cluster') == 'ci' and not any('pid' in k for k in r['labels']) for r in R) and all(r['labels'].get('systemd_unit') == '$UNIT' for r in R if svc(r) == '$UNIT') and all(r['labels'].get('container_id') == '${CID:0:12}' and r['labels'].get('pod_uid') == '$POD_UID' for r in R if svc(r) != '$UNIT')"
		check "protocols: $proto: profiles of cpu at 20 Hz: samples/count and cpu/nanoseconds, period 50 ms" \
			is_true "all(r['sample_types'] == ['samples/count', 'cpu/nanoseconds'] and r['period'] == 50000000 and r['cpu_ns'] == 50000000 * r['samples'] for r in R)"
		check "protocols: $proto: __name__ process_cpu" \
			is_true "all(r['labels'].get('__name__') == 'process_cpu' for r in R)"
		check "protocols: $proto: the bearer token and the tenant sent with each request" \
			is_true "all(q['headers'].get('authorization') == 'Bearer $TOKEN' and q['headers'].get('x-scope-orgid') == 'team-a' for q in Q) and len(Q) > 0"
		check "protocols: $proto: the token printed nowhere" eval "! grep -q '$TOKEN' '$ERR' '$WORK/push.stdout'"
		[ "$RC" = 0 ] || sed 's/^/    /' "$ERR" | tail -5
		kill_all "$A" "$B"
		receiver_stop
	done
}

# One workload with its map, in its own cgroup: its pid in A.
one_workload() {
	MAPS=$(mktemp -d "$WORK/maps.XXXXXX")
	workload "$SVC_CG" svca "$1" && A=$WPID
}

# The server down (connections refused) for three periods, then back: every sample arrives.
test_server_down() {
	local n
	needs_cgroup2 server_down || return
	receiver_start || { fail "server_down: the receiver did not start"; return; }
	set_mode '{"mode":"down"}' || fail "server_down: the receiver did not go down"
	one_workload 20 || { fail "server_down: the workload did not start"; return; }
	ERR=$WORK/down.err
	"$CTL" profile -p "$A" -d 7 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP" \
		>/dev/null 2>"$ERR" &
	PIDS+=($!)
	local prof=$!
	wait_for 30 eval "[ \$(grep -c 'push: 1 series' '$ERR') -ge 3 ]"
	n=$(grep -c 'push: 1 series' "$ERR")
	check "server_down: three periods pushed to a server that refuses connections ($n)" test "$n" -ge 3
	set_mode '{"mode":"ok"}' || fail "server_down: the receiver did not come back"
	wait "$prof"
	RC=$?
	check "server_down: perfmapctl exits 0" test "$RC" = 0
	check "server_down: the refused connections were retried ($(py 'final("retried")'))" is_true 'final("retried") >= 1'
	arrives server_down
	kill_all "$A"
	receiver_stop
}

# 429 with Retry-After is waited for; 500 and gRPC's UNAVAILABLE retried; all arrives.
test_retry() {
	local proto
	needs_cgroup2 retry || return
	for proto in pyroscope parca; do
		receiver_start || { fail "retry: the receiver did not start"; return; }
		set_mode '{"mode":"429","retry_after":3,"count":1}' || fail "retry: $proto: mode 429"
		one_workload 20 || { fail "retry: the workload did not start"; return; }
		ERR=$WORK/retry-$proto.err
		"$CTL" profile -p "$A" -d 6 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP" \
			--push-protocol "$proto" >/dev/null 2>"$ERR" &
		PIDS+=($!)
		local prof=$!
		wait_for 30 is_true 'len(Q) >= 1'
		set_mode '{"mode":"500","count":2}' || fail "retry: $proto: mode 500"
		wait "$prof"
		RC=$?
		check "retry: $proto: perfmapctl exits 0" test "$RC" = 0
		check "retry: $proto: answered 429, then 500 twice, then taken: $(py '[q["status"] for q in Q][:5]')" \
			is_true '[str(q["status"]) for q in Q][:1] in (["429"], ["RESOURCE_EXHAUSTED"]) and len([q for q in Q if str(q["status"]) in ("500", "INTERNAL")]) == 2'
			check "retry: $proto: the request after the 429 waited its Retry-After of 3 s ($(py 'round(t(Q[1]) - t(Q[0]), 2)') s)" \
			is_true 't(Q[1]) - t(Q[0]) >= 2.9'
		check "retry: $proto: counted retried ($(py 'final("retried")'))" is_true 'final("retried") >= 3'
		arrives "retry: $proto"
		kill_all "$A"
		receiver_stop
	done
}

# A 400 will never succeed: said once with the server's message, counted rejected, not retried.
test_rejected() {
	needs_cgroup2 rejected || return
	receiver_start || { fail "rejected: the receiver did not start"; return; }
	set_mode '{"mode":"400","message":"perfmapd-test: label value refused"}' || fail "rejected: mode 400"
	one_workload 20 || { fail "rejected: the workload did not start"; return; }
	push rejected -p "$A" -d 4 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP"
	check "rejected: perfmapctl exits 0 (a server's refusal is no error of the profile's)" test "$RC" = 0
	check "rejected: said once, with the server's message ($(grep -c 'not retried' "$ERR") times)" \
		eval "[ \$(grep -c 'not retried' '$ERR') = 1 ] && grep 'not retried' '$ERR' | grep -q 'perfmapd-test: label value refused'"
	check "rejected: each request sent once, none retried ($(py 'len(Q)') requests, $(py 'final("rejected")') rejected, $(py 'final("retried")') retried)" \
		is_true 'len(Q) == final("rejected") >= 4 and final("retried") == 0 and final("pushed") == 0'
	kill_all "$A"
	receiver_stop
}

# A server that accepts and never answers: every period is still sampled and
# written (-o beside), the pushes time out, and the end is not held past the drain.
test_hang() {
	local t0 t1 files
	needs_cgroup2 hang || return
	receiver_start || { fail "hang: the receiver did not start"; return; }
	set_mode '{"mode":"hang"}' || fail "hang: mode hang"
	one_workload 30 || { fail "hang: the workload did not start"; return; }
	t0=$(date +%s)
	push hang -p "$A" -d 6 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP" \
		--push-timeout 2s -o "$WORK/hang.pb.gz"
	t1=$(date +%s)
	files=$(ls "$WORK"/hang-*.pb.gz 2>/dev/null | wc -l)
	check "hang: perfmapctl exits 0" test "$RC" = 0
	check "hang: every period written beside the pushes that hung ($files files for 6 s)" test "$files" -ge 6
	check "hang: the files hold every sample the kernel took" \
		eval "grep -Eq 'profile: ([0-9]+) samples in [0-9]+ files; the kernel took \\1 \\(0 past' '$ERR'"
	check "hang: the pushes timed out and were retried ($(py 'final("retried")'))" is_true 'final("retried") >= 1 and final("pushed") == 0'
	check "hang: what never went is counted dropped, not lost silently ($(py 'final("dropped_samples")') samples)" \
		is_true 'final("dropped_samples") == final("taken") - final("lost")'
	check "hang: the end waited one timeout and the drain, no more ($((t1 - t0)) s for -d 6)" test $((t1 - t0)) -le 20
	kill_all "$A"
	receiver_stop
}

# The spool's bound (4K, memory and directory together) held at every look
# while the server is down; the oldest dropped, counted; what was kept is
# sent first at the next start.
test_spool() {
	local spool=$WORK/spool max=0 size kept prof
	needs_cgroup2 spool || return
	receiver_start || { fail "spool: the receiver did not start"; return; }
	set_mode '{"mode":"down"}' || fail "spool: mode down"
	one_workload 30 || { fail "spool: the workload did not start"; return; }
	ERR=$WORK/spool.err
	"$CTL" profile -p "$A" -d 8 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP" \
		--push-spool "$spool" --push-spool-max 4K >/dev/null 2>"$ERR" &
	prof=$!
	PIDS+=($prof)
	while alive "$prof"; do
		size=$(find "$spool" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
		[ "$size" -le "$max" ] || max=$size
		sleep 0.05
	done
	wait "$prof"
	RC=$?
	check "spool: perfmapctl exits 0" test "$RC" = 0
	check "spool: the directory never held more than its bound of 4096 bytes (at most $max)" \
		test "$max" -gt 0 -a "$max" -le 4096
	check "spool: the oldest past it dropped and counted ($(py 'final("dropped")') requests, $(py 'final("dropped_samples")') samples)" \
		is_true 'final("dropped") >= 1'
	kept=$(py 'final("kept")')
	check "spool: what waits at the end is kept there ($kept requests; $(ls "$spool" | wc -l) files)" \
		test "${kept:-0}" -ge 1 -a "$(ls "$spool" | wc -l)" = "${kept:-x}"
	# What the kept requests carry: the kernel's samples less those dropped (none pushed).
	local want
	want=$(py 'final("taken") - final("lost") - final("dropped_samples") if final("pushed") == 0 else -1')
	set_mode '{"mode":"ok"}' || fail "spool: mode ok"
	push spool2 -p "$A" -d 1 --map-dir "$MAPS" --push "http://127.0.0.1:$HP" --push-spool "$spool"
	check "spool: the next start sent the $kept kept first, then its own ($(py 'len(Q)') requests)" \
		is_true "len(Q) == $kept + 1 and final('pushed') == $kept + 1"
	check "spool: the kept requests held every sample the kernel took but the dropped ($(py "sum(r['samples'] for r in R if r['request'] <= $kept)") of $want)" \
		is_true "$want > 0 and sum(r['samples'] for r in R if r['request'] <= $kept) == $want"
	check "spool: and the directory is empty" test -z "$(ls -A "$spool")"
	kill_all "$A"
	receiver_stop
}

# Basic auth from a file: sent, never printed, nor on the command line; a
# server that echoes the password has it starred out; a spool directory
# others can write is refused.
test_credentials() {
	local pw=pw-$RANDOM$RANDOM-secret prof cmdline
	needs_cgroup2 credentials || return
	receiver_start || { fail "credentials: the receiver did not start"; return; }
	printf 'alice:%s\n' "$pw" >"$WORK/basic"
	set_mode "{\"mode\":\"400\",\"message\":\"bad credentials alice:$pw\"}" || fail "credentials: mode 400"
	one_workload 20 || { fail "credentials: the workload did not start"; return; }
	ERR=$WORK/cred.err
	"$CTL" profile -p "$A" -d 3 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP" \
		--push-basic-auth-file "$WORK/basic" >/dev/null 2>"$ERR" &
	prof=$!
	PIDS+=($prof)
	wait_for 10 eval "grep -q profile /proc/$prof/cmdline"
	cmdline=$(tr '\0' ' ' <"/proc/$prof/cmdline" 2>/dev/null)
	[ -n "$cmdline" ] || fail "credentials: perfmapctl's command line could not be read"
	wait "$prof"
	check "credentials: basic auth sent: alice and the password" \
		is_true "len(Q) > 0 and all(q['headers'].get('authorization') == 'Basic ' + __import__('base64').b64encode(b'alice:$pw').decode() for q in Q)"
	check "credentials: the password is not on the command line ($cmdline)" eval "! grep -q -- '$pw' <<<'$cmdline'"
	check "credentials: the server's message echoing it is printed starred out" \
		eval "grep -q 'bad credentials alice:\\*\\*\\*' '$ERR' && ! grep -q -- '$pw' '$ERR'"
	receiver_stop
	receiver_start || { fail "credentials: the receiver did not start again"; return; }
	push absent -p "$A" -d 2 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP" \
		--push-token-file "$WORK/no-such-token"
	check "credentials: a token file that does not exist (an optional Secret not made): said once, pushed without ($(grep -c 'does not exist' "$ERR") times)" \
		eval "[ \$(grep -c 'does not exist: pushing without it' '$ERR') = 1 ] && [ '$RC' = 0 ]"
	check "credentials: and its requests went with no authorization ($(py 'len(Q)') requests)" \
		is_true "len(Q) >= 2 and all(not q['headers'].get('authorization') for q in Q) and final('pushed_samples') == final('taken') - final('lost')"
	mkdir -p "$WORK/openspool" && chmod 1777 "$WORK/openspool"
	push openspool -p "$A" -d 1 --push "http://127.0.0.1:$HP" --push-spool "$WORK/openspool"
	check "credentials: a spool directory others can write is refused: exit 2, said ($(head -c 200 "$ERR"))" \
		eval "[ '$RC' = 2 ] && grep -q 'only we can write' '$ERR'"
	push badheader -p "$A" -d 1 --push "http://127.0.0.1:$HP" --push-header "$(printf 'X-A: b\r\nX-B: c')"
	check "credentials: a header smuggling a line break is refused: exit 2" test "$RC" = 2
	push badlabel -p "$A" -d 1 --push "http://127.0.0.1:$HP" --label "__name__=x"
	check "credentials: a label naming __name__ is refused: exit 2" test "$RC" = 2
	kill_all "$A"
	receiver_stop
}

# A local user (uid 65534) names its executable with bytes that are no
# UTF-8, a newline, the ingest key's ',={}' and a terminal escape: its
# series and profile still go through each protocol (a server refuses a
# whole push over one string that is not UTF-8), and nothing raw is printed.
test_hostile_names() {
	local proto exe
	receiver_start || { fail "hostile_names: the receiver did not start"; return; }
	MAPS=$(mktemp -d "$WORK/maps.XXXXXX")
	chmod 1777 "$MAPS"
	exe=$WORK/$(printf 'evil\xff\xfe\nname{a=b,c}\x1b[31m')
	cp "$SPLIT" "$exe"
	setpriv --reuid=65534 --regid=65534 --clear-groups -- "$exe" --dir "$MAPS" --run-ms 30000 \
		>"$WORK/hostile.out" 2>&1 &
	PIDS+=($!)
	A=$!
	wait_for 10 grep -qs '^pid ' "$WORK/hostile.out" || { fail "hostile_names: the workload did not start"; return; }
	for proto in pyroscope pyroscope-ingest parca; do
		push "hostile-$proto" -p "$A" -d 3 --every 1s --map-dir "$MAPS" --push "http://127.0.0.1:$HP" \
			--push-protocol "$proto"
		check "hostile_names: $proto: nothing rejected, every sample pushed ($(py 'final("pushed_samples")') of $(py 'final("taken")'); $(grep -m1 'not retried' "$ERR" | cut -c1-160))" \
			is_true 'final("rejected") == 0 and final("pushed_samples") == final("taken") - final("lost") > 0'
		check "hostile_names: $proto: no raw escape or invalid byte in perfmapctl's output" \
			eval "! LC_ALL=C grep -q \$'[\\x1b\\xff]' '$ERR'"
	done
	summary
	check "hostile_names: the receiver kept them, named from the JIT's map ($(py 'sorted(set(svc(r) for r in R))'))" \
		is_true "len(R) > 0 and not S.get('refused') and all('split_hot' in r['functions'] for r in R)"
	kill_all "$A"
	receiver_stop
}

# A sanitized perfmapctl (make push-test-asan) writes any report to $SAN_LOG.<pid>: each fails the scenario.
scenario_done() {
	receiver_stop
	sanitizer_check
}
pick_scenarios "$0" "$@"
run_scenarios "profile push tests"
