# Helpers for the agent integration tests: start and stop the real perfmapd, wait, assert.
# Sourced by run.sh; expects $BUILD (the build directory) and $WORK (a scratch directory).

AGENT_PID=
AGENT_LOG=
FAILS=0

say() { printf '%s\n' "$*"; }
fail() { say "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { say "ok: $*"; }

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
	local deadline=$(( $(date +%s%N) + $1 * 1000000000 ))
	shift
	until "$@"; do
		[ "$(date +%s%N)" -ge "$deadline" ] && return 1
		sleep 0.05
	done
}

# start_agent LOG ARGS...: perfmapd in the background, ready when it logs "tracking".
start_agent() {
	AGENT_LOG=$1
	shift
	"$BUILD/perfmapd" "$@" >"$AGENT_LOG" 2>&1 &
	AGENT_PID=$!
	if ! wait_for 20 grep -qs "perfmapd: tracking" "$AGENT_LOG"; then
		say "perfmapd did not start; its log:"
		sed 's/^/    /' "$AGENT_LOG"
		kill -9 "$AGENT_PID" 2>/dev/null
		wait "$AGENT_PID" 2>/dev/null
		AGENT_PID=
		return 1
	fi
}

# stop_agent: SIGTERM; the agent must exit 0 within 10 s.
stop_agent() {
	local rc
	[ -n "$AGENT_PID" ] || return 0
	kill -TERM "$AGENT_PID"
	for _ in $(seq 100); do
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$AGENT_PID" 2>/dev/null; then
		fail "perfmapd did not exit within 10 s of SIGTERM"
		kill -9 "$AGENT_PID"
	fi
	wait "$AGENT_PID"
	rc=$?
	AGENT_PID=
	return $rc
}

kill9_agent() {
	kill -9 "$AGENT_PID"
	wait "$AGENT_PID" 2>/dev/null
	AGENT_PID=
}

# status_of MAP_DIR KEY: one value from `perfmapctl status`.
status_of() {
	"$BUILD/perfmapctl" status --map-dir "$1" | awk -v k="$2:" '$1 == k { print $2 }'
}

# A fresh sticky, world-writable map directory, like /tmp.
new_map_dir() {
	local d
	d=$(mktemp -d "$WORK/maps.XXXXXX")
	chmod 1777 "$d"
	echo "$d"
}

cleanup_agent() {
	[ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null
	wait 2>/dev/null
}
