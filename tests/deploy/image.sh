#!/usr/bin/env bash
# make image-test: deploy/container/Containerfile built by Debian's podman from a
# build of this tree with no registry (FROM scratch, deploy/container/stage.sh
# copies the binaries and their shared libraries), run as deploy/README.md
# says (--pid=host, a /tmp from the host, only the documented capabilities,
# seccomp unconfined for bpf() and perf_event_open()), and a forking JIT on the
# host gets its children's copies from the agent in the container. Then the
# continuous profiler runs from the same image beside it as the DaemonSet's
# second container does (the agent's /tmp and run directory read-only, the
# capabilities deploy/README.md lists): it holds on the agent's socket and
# names a JIT of another uid whose map is 0600, its native frames and the
# kernel's; without each of three of those capabilities, what it names less.
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
SPLITJIT=$BUILD/tests/splitjit
FJ_PID= SJ_PID= DD_PID=
cleanup() {
	for p in $FJ_PID $SJ_PID $DD_PID; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
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
[ -x "$FORKJIT" ] && [ -x "$SPLITJIT" ] || { say "FAIL: $FORKJIT or $SPLITJIT is missing (make image-test builds them)"; exit 1; }

# The capabilities the DaemonSet and the unit grant: docs/security.md 9, kept + load only.
caps=$(printf '%s\n%s\n' "$(caps_doc_kept "$TOP/docs/security.md")" "$(caps_doc_load "$TOP/docs/security.md")" |
	sort -u | sed 's/^CAP_//' | paste -sd, -)
[ -n "$caps" ] || { say "FAIL: no capability set parsed from docs/security.md"; exit 1; }

check "stage.sh makes the image's root from the build" \
	"$TOP/deploy/container/stage.sh" "$BUILD" "$WORK/root"
# https:// pushes from FROM scratch: the CA bundle where the staged libcurl looks by default.
curl_so=$(ls "$WORK"/root/{usr/,}lib/*/libcurl.so.4 2>/dev/null | head -n 1)
check "the image carries libcurl ($curl_so) and the CA bundle at its built-in path, and an nsswitch.conf" \
	eval '[ -n "$curl_so" ] && grep -qa /etc/ssl/certs/ca-certificates.crt "$curl_so" &&
		cmp -s /etc/ssl/certs/ca-certificates.crt "$WORK/root/etc/ssl/certs/ca-certificates.crt" &&
		grep -q "^hosts: files dns$" "$WORK/root/etc/nsswitch.conf"'
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
# The run directory on the host, for the profiler's container to share (the DaemonSet's run volume).
mkdir -m 0700 "$WORK/run"
# As deploy/README.md runs it, with the test's map and archive directories. The
# host's namespaces are this shell's: pid 1 of the machines this runs on (a
# sandbox's init) lets nobody read its namespaces, not even the host's root.
"${PODMAN[@]}" "${RUN[@]}" -d --name "$CTR" --pid=host \
	--cap-drop=all --cap-add="$caps" --security-opt seccomp=unconfined \
	-v "$maps:/tmp" -v "$WORK/archive:/var/lib/perfmapd" -v "$WORK/run:/run/perfmapd" \
	-v /sys/kernel/btf:/sys/kernel/btf:ro \
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

# The continuous profiler beside it, as the DaemonSet's second container
# (deploy/README.md, "The profiler"): a JIT of another uid, its map 0600, and
# a process in system calls, profiled from a container of the image.
pcaps=$(caps_doc_profile "$TOP/deploy/README.md" | sed 's/^CAP_//')
[ -n "$pcaps" ] || { fail "no profiler capability set parsed from deploy/README.md"; exit 1; }
# Its map directory is reached through $WORK, which mktemp made 0700: others may pass now.
chmod 0711 "$WORK"
(umask 077; exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$SPLITJIT" --dir "$maps" --run-ms 60000) \
	>"$WORK/sj.out" 2>&1 &
SJ_PID=$!
(exec setpriv --reuid=65534 --regid=65534 --clear-groups -- dd if=/dev/zero of=/dev/null bs=1) 2>/dev/null &
DD_PID=$!
sj_ready() { [ -s "$maps/perf-$SJ_PID.map" ]; }
check "splitjit (uid 65534) runs, its map 0600" \
	eval 'wait_for 10 sj_ready && [ "$(stat -c %a:%u "$maps/perf-$SJ_PID.map")" = 600:65534 ]'
# profile_in_image OUT CAP...: perfmapctl profile of both for 2 s, folded stacks to OUT.
profile_in_image() {
	local out=$1
	shift
	"${PODMAN[@]}" "${RUN[@]}" --rm --pid=host --cap-drop=all --cap-add="$(echo "$@" | tr ' ' ,)" \
		--security-opt seccomp=unconfined --security-opt no-new-privileges --read-only \
		-v "$maps:/tmp:ro" -v "$WORK/archive:/var/lib/perfmapd:ro" -v "$WORK/run:/run/perfmapd:ro" \
		-v /sys/kernel/btf:/sys/kernel/btf:ro --entrypoint /usr/bin/perfmapctl "$TAG" \
		profile -p "$SJ_PID,$DD_PID" -d 2 -j G --no-keep-maps --map-dir /tmp \
		--archive-dir /var/lib/perfmapd/archive --run-dir /run/perfmapd >"$out" 2>"$out.err"
}
held() { "${PODMAN[@]}" exec "$CTR" /usr/bin/perfmapctl status --all --map-dir /tmp --run-dir /run/perfmapd |
	awk '$1 == "holds:" { print $2 }'; }
holds_before=$(held)
check "the profiler in the image samples them (--cap-add=$(echo $pcaps | tr ' ' ,), --read-only)" \
	eval 'profile_in_image "$WORK/prof" $pcaps || { sed "s/^/    /" "$WORK/prof.err"; false; }'
sed 's/^/    /' "$WORK/prof" | sort -k2 -nr | head -n 4 | cut -c1-160
check "it holds on the agent's socket through the read-only run directory (holds ${holds_before:-?} -> $(held))" \
	eval '! grep -q "hold socket" "$WORK/prof.err" && [ "$(held)" -gt "${holds_before:-0}" ]'
check "CAP_DAC_READ_SEARCH: the JIT's 0600 map names its code (split_hot)" grep -q ';split_hot ' "$WORK/prof"
check "CAP_SYS_PTRACE: its native frames are named through /proc/<pid>/root (main)" grep -q ';main;split_' "$WORK/prof"
check "CAP_SYSLOG: kernel frames are named (do_syscall_64)" grep -q ';do_syscall_64' "$WORK/prof"
# Each of the three taken away, what it gave is lost (and nothing else fails).
without() { for c in $pcaps; do [ "$c" = "$1" ] || echo "$c"; done; }
check "without CAP_DAC_READ_SEARCH: it samples, but the JIT's code is not named" \
	eval 'profile_in_image "$WORK/prof-dac" $(without DAC_READ_SEARCH) && [ -s "$WORK/prof-dac" ] &&
		! grep -q ";split_hot " "$WORK/prof-dac"'
check "without CAP_SYS_PTRACE: it samples, but its native frames are not named" \
	eval 'profile_in_image "$WORK/prof-ptrace" $(without SYS_PTRACE) && [ -s "$WORK/prof-ptrace" ] &&
		! grep -q ";main;" "$WORK/prof-ptrace"'
check "without CAP_SYSLOG: it samples, but kernel frames are addresses" \
	eval 'profile_in_image "$WORK/prof-syslog" $(without SYSLOG) &&
		grep -q "\[kernel\]+0x" "$WORK/prof-syslog" && ! grep -q ";do_syscall_64" "$WORK/prof-syslog"'
for p in $SJ_PID $DD_PID; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
SJ_PID= DD_PID=

"${PODMAN[@]}" stop -t 10 "$CTR" >/dev/null 2>&1
check "the agent exits 0 on podman stop" \
	test "$("${PODMAN[@]}" inspect -f '{{.State.ExitCode}}' "$CTR")" = 0

say "image-test: $PASSES passed, $FAILS failed"
[ $FAILS -eq 0 ]
