#!/usr/bin/env bash
# make image-test: deploy/container/Containerfile built by Debian's podman from a
# build of this tree with no registry (FROM scratch, deploy/container/stage.sh
# copies the binaries and their shared libraries), run as deploy/README.md
# says (--pid=host, a /tmp from the host, only the documented capabilities,
# seccomp unconfined for bpf() and perf_event_open()), and a forking JIT on the
# host gets its children's copies from the agent in the container.
#
#   tests/deploy/image.sh BUILD_DIR
#
# The container's /tmp is a private map directory under /var/tmp, never the
# host's /tmp; the agent runs with --no-mirrors, its archive in that directory
# too. The container and the image are removed on every exit. Root, podman, runc.
set -u
BUILD=$(cd "${1:?usage: image.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d /var/tmp/pmimg.XXXXXX)
. "$HERE/../agent/lib.sh"
. "$HERE/caps.sh"

sfx=$(tr '[:upper:]' '[:lower:]' <<<"${WORK##*.}")
TAG=localhost/perfmapd-test-$sfx
CTR=pmimg-$sfx
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
# rlimits within the hard ones (docs/containers.md), no network to set up.
RUN=(run --network none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000)
FORKJIT=$BUILD/tests/forkjit
FJ_PID=
cleanup() {
	[ -n "$FJ_PID" ] && kill -9 "$FJ_PID" 2>/dev/null && wait "$FJ_PID" 2>/dev/null
	"${PODMAN[@]}" rm -f -t 0 "$CTR" >/dev/null 2>&1
	podman rmi -f "$TAG" >/dev/null 2>&1
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapd image test"
[ "$(id -u)" = 0 ] || skip_or_fail "not root: BPF programs cannot be loaded"
[ -r /sys/kernel/btf/vmlinux ] || skip_or_fail "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
command -v podman >/dev/null && command -v runc >/dev/null ||
	{ say "FAIL: $SUITE: podman and runc are needed (make deps)"; exit 1; }
[ -x "$FORKJIT" ] || { say "FAIL: $FORKJIT is missing (make image-test builds it)"; exit 1; }

# The capabilities the DaemonSet and the unit grant: docs/security.md 9, kept + load only.
caps=$(printf '%s\n%s\n' "$(caps_doc_kept "$TOP/docs/security.md")" "$(caps_doc_load "$TOP/docs/security.md")" |
	sort -u | sed 's/^CAP_//' | paste -sd, -)
[ -n "$caps" ] || { say "FAIL: no capability set parsed from docs/security.md"; exit 1; }

check "stage.sh makes the image's root from the build" \
	"$TOP/deploy/container/stage.sh" "$BUILD" "$WORK/root"
check "podman builds the Containerfile, no registry ($TAG)" \
	eval '"${PODMAN[@]}" build -q -f "$TOP/deploy/container/Containerfile" -t "$TAG" "$WORK/root" >"$WORK/build.log" 2>&1 ||
		{ sed "s/^/    /" "$WORK/build.log"; false; }'
check "the agent and perfmapctl run in the image: their libraries are all there" \
	eval '"${PODMAN[@]}" "${RUN[@]}" --rm "$TAG" --version >/dev/null &&
		"${PODMAN[@]}" "${RUN[@]}" --rm --entrypoint /usr/bin/perfmapctl "$TAG" --help >/dev/null'
check "the image holds nothing else: no shell (FROM scratch)" \
	eval '! "${PODMAN[@]}" "${RUN[@]}" --rm --entrypoint /bin/sh "$TAG" -c true >/dev/null 2>&1'

maps=$WORK/maps
mkdir -p "$maps" "$WORK/archive"
chmod 1777 "$maps"
# As deploy/README.md runs it, with the test's map and archive directories. The
# host's namespaces are this shell's: pid 1 of the machines this runs on (a
# sandbox's init) lets nobody read its namespaces, not even the host's root.
"${PODMAN[@]}" "${RUN[@]}" -d --name "$CTR" --pid=host \
	--cap-drop=all --cap-add="$caps" --security-opt seccomp=unconfined \
	-v "$maps:/tmp" -v "$WORK/archive:/var/lib/perfmapd" -v /sys/kernel/btf:/sys/kernel/btf:ro \
	"$TAG" --map-dir /tmp --host-namespaces $$ --no-mirrors >"$WORK/run.out" 2>&1 ||
	{ fail "podman run: $(cat "$WORK/run.out")"; exit 1; }
logs() { "${PODMAN[@]}" logs "$CTR" 2>&1; }
tracking() { logs | grep -q "perfmapd: tracking"; }
if ! check "the agent in the container starts tracking (--cap-add=$caps)" wait_for 30 tracking; then
	logs | sed 's/^/    /'
	exit 1
fi
apid=$("${PODMAN[@]}" inspect -f '{{.State.Pid}}' "$CTR")
capfield() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$apid/status"; }
check "the agent holds the kept set only: CapEff 000000001008000d, CapBnd 00000000100800cf (docs/security.md 9)" \
	eval '[ "$(capfield CapEff)" = 000000001008000d ] && [ "$(capfield CapBnd)" = 00000000100800cf ]'
check "no_new_privs is set" test "$(capfield NoNewPrivs)" = 1
check "it logs what it keeps" eval 'logs | grep -q "privileges: keeping chown, dac_read_search, fowner, sys_ptrace, lease"'

# A forking JIT on the host, its map in the container's /tmp.
"$FORKJIT" --dir "$maps" --entries 20 --children 2 --wait-map-ms 10000 --print-pids >"$WORK/fj.out" 2>&1 &
FJ_PID=$!
wait "$FJ_PID"
rc=$?
parent=$FJ_PID
FJ_PID=
check "forkjit: both children found their maps complete within 10 s (exit $rc)" test $rc = 0 ||
	sed 's/^/    /' "$WORK/fj.out"
children=$(awk '/^child/ { print $2 }' "$WORK/fj.out")
check "forkjit forked two children ($(echo $children))" test "$(echo $children | wc -w)" = 2
check "the parent's map holds its 20 entries" test "$(wc -l <"$maps/perf-$parent.map" 2>/dev/null)" = 20
for c in $children; do
	check "child $c: its map is a copy of the parent's entries" cmp -s "$maps/perf-$parent.map" "$maps/perf-$c.map"
done
check "the agent logs a copy for each child" \
	eval '[ "$(logs | grep -c "copy")" -ge 2 ] || { logs | tail -n 5 | sed "s/^/    /"; false; }'

"${PODMAN[@]}" stop -t 10 "$CTR" >/dev/null 2>&1
check "the agent exits 0 on podman stop" \
	test "$("${PODMAN[@]}" inspect -f '{{.State.ExitCode}}' "$CTR")" = 0

say "image-test: $PASSES passed, $FAILS failed"
[ $FAILS -eq 0 ]
