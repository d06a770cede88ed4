# The test jitdump producer (tests/jitdump/jitprod.c) driven through a FIFO,
# one command a line, one reply a line: what tests/jitdump/run.sh and
# tests/doctor/run.sh share. Sourced after tests/agent/lib.sh (wait_for,
# fail) with $WORK set; the suite kills "${PROD_JOBS[@]}" at exit.
declare -A PFD PREPLIES
PROD_JOBS=()   # producers started (background jobs)

# prod_start NAME COMMAND...: COMMAND reading NAME's FIFO, replying to
# $WORK/NAME.out; waits for its "ready PID PATH" line and sets $PROD and
# $DUMP. 1, with a failure recorded, when it did not get ready.
prod_start() {
	local name=$1 fd
	shift
	rm -f "$WORK/$name.in" "$WORK/$name.out"
	mkfifo -m 0644 "$WORK/$name.in"
	"$@" <"$WORK/$name.in" >"$WORK/$name.out" 2>&1 &
	PROD_JOBS+=($!)
	exec {fd}>"$WORK/$name.in"
	PFD[$name]=$fd
	PREPLIES[$name]=1
	wait_for 10 grep -q "^ready " "$WORK/$name.out" ||
		{ fail "$name: jitprod did not get ready: $(head -c 300 "$WORK/$name.out")"; return 1; }
	read -r _ PROD DUMP <"$WORK/$name.out"
}
prod_replies_ge() { [ "$(wc -l <"$WORK/$1.out")" -ge "$2" ]; }
# prod NAME COMMAND: one command, and its reply awaited (prod_reply prints it).
prod() {
	local name=$1
	shift
	echo "$*" >&"${PFD[$name]}"
	PREPLIES[$name]=$((PREPLIES[$name] + 1))
	wait_for 20 prod_replies_ge "$name" "${PREPLIES[$name]}" ||
		{ fail "$name: jitprod: no reply to '$*'"; return 1; }
}
prod_reply() { sed -n "${PREPLIES[$1]}p" "$WORK/$1.out"; }
# prod_end NAME: it exits (its last reply is not awaited: an exit has none).
prod_end() {
	echo exit >&"${PFD[$1]}" 2>/dev/null
	exec {PFD[$1]}>&-
}
