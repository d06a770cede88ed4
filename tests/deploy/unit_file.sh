#!/usr/bin/env bash
# make unit-file-test: deploy/systemd/perfmapd.service is a unit systemd accepts
# (systemd-analyze verify, on a copy whose ExecStart= is the built agent, as the
# installed path need not exist here), it hides neither /tmp nor /proc from the
# agent, it confines its writes, and its CapabilityBoundingSet= is exactly the
# set docs/security.md section 9 documents and agent/lib/privs.c keeps, plus the
# load-only ones. No root needed; nothing is started.
#
#   tests/deploy/unit_file.sh BUILD_DIR
set -u
BUILD=$(cd "${1:?usage: unit_file.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d /var/tmp/pmunit.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
. "$HERE/../agent/lib.sh"
. "$HERE/caps.sh"

UNIT=$TOP/deploy/systemd/perfmapd.service
DOC=$TOP/docs/security.md
PRIVS=$TOP/agent/lib/privs.c

command -v systemd-analyze >/dev/null || { say "FAIL: systemd-analyze is missing (make deps: systemd)"; exit 1; }
[ -x "$BUILD/perfmapd" ] || { say "FAIL: $BUILD/perfmapd is missing (make builds it)"; exit 1; }

# The unit's value of KEY (its last assignment, as systemd reads it).
unit_value() { sed -n "s/^$1=//p" "$UNIT" | tail -n 1; }

verify() {
	local copy=$WORK/perfmapd.service out
	grep -q '^ExecStart=/usr/local/bin/perfmapd ' "$UNIT" || { say "    ExecStart= is not /usr/local/bin/perfmapd"; return 1; }
	sed "s|^ExecStart=/usr/local/bin/perfmapd |ExecStart=$BUILD/perfmapd |" "$UNIT" >"$copy"
	out=$(systemd-analyze verify "$copy" 2>&1)
	local rc=$?
	[ -n "$out" ] && say "    systemd-analyze: $out"
	# A warning (an unknown key, a bad value ignored) is a failure too.
	[ $rc -eq 0 ] && [ -z "$out" ]
}
check "systemd-analyze verify accepts the unit, with no warning" verify

for key in PrivateTmp ProtectProc ProcSubset PrivateUsers; do
	check "the unit does not set $key= (it would hide /tmp, /proc or uids from the agent)" \
		eval "! grep -q '^[[:space:]]*$key[[:space:]]*=' '$UNIT'"
done
check "Restart=on-failure" test "$(unit_value Restart)" = on-failure
check "ProtectSystem=strict" test "$(unit_value ProtectSystem)" = strict
check "ProtectHome= is set (read-only or yes)" eval '[ "$(unit_value ProtectHome)" = read-only ] || [ "$(unit_value ProtectHome)" = yes ]'
rw=" $(unit_value ReadWritePaths) "
for p in /tmp /var/lib/perfmapd /run/perfmapd; do
	check "ReadWritePaths= holds $p" eval '[[ "$rw" == *" $p "* ]]'
done
check "ReadWritePaths= holds nothing else" test "$(echo $rw | wc -w)" = 3
exec_start=$(unit_value ExecStart)
check "ExecStart= runs the agent on /tmp, the archive and run directories the sandbox allows" \
	eval '[[ "$exec_start" == *"--map-dir /tmp"* && "$exec_start" == *"--archive-dir /var/lib/perfmapd/"* && "$exec_start" == *"--run-dir /run/perfmapd"* ]]'

unit_caps=$(caps_unit "$UNIT")
doc_kept=$(caps_doc_kept "$DOC")
doc_load=$(caps_doc_load "$DOC")
documented=$(printf '%s\n%s\n' "$doc_kept" "$doc_load" | sort -u)
code=$(printf '%s\n%s\n' "$(caps_privs "$PRIVS")" "$doc_load" | sort -u)
say "    unit: $(echo $unit_caps)"
say "    docs/security.md 9: kept $(echo $doc_kept); load only $(echo $doc_load)"
check "the load-only set is documented (CAP_BPF, CAP_PERFMON, CAP_SETPCAP)" \
	same_set "load only" "$doc_load" "$(printf 'CAP_BPF\nCAP_PERFMON\nCAP_SETPCAP\n')"
check "agent/lib/privs.c keeps exactly what docs/security.md 9's table lists" \
	same_set "privs.c / docs" "$(caps_privs "$PRIVS")" "$doc_kept"
check "agent/lib/privs.c still needs CAP_SETPCAP (it checks for it before the bounding set)" \
	grep -q 'CAP_SETPCAP' "$PRIVS"
check "the unit's CapabilityBoundingSet= equals the documented kept + load-only set" \
	same_set "unit / docs" "$unit_caps" "$documented"
check "the unit's CapabilityBoundingSet= equals privs.c's kept set + the load-only set" \
	same_set "unit / privs.c" "$unit_caps" "$code"
check "docs/security.md 9 quotes the unit's CapabilityBoundingSet= as it is" \
	same_set "unit / quoted" "$unit_caps" "$(caps_doc_unit "$DOC")"
check "docs/security.md names the unit at deploy/systemd/perfmapd.service" \
	grep -q 'deploy/systemd/perfmapd.service' "$DOC"

say "unit-file-test: $PASSES passed, $FAILS failed"
[ $FAILS -eq 0 ]
