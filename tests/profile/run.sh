#!/usr/bin/env bash
# perfmapctl profile against real processes with real BPF: the test JIT
# (tests/profile/splitjit.c) splits its time 3 to 1 between two named
# functions; its forked child's frames named through the copy perfmapd made,
# after the child is gone (from retention, and from the archive); a command
# run under the profiler with its children; the letters on real samples;
# folded stacks; what -j a opens for an unprivileged JIT, and what it must
# not; a jitdump producer named from its dump alone, its source lines too;
# CPython -X perf where present; a C++ and a Rust program's names demangled,
# their pprof carrying the mangled symbols, build ids and the files' own
# addresses; and the errors.
#
#   tests/profile/run.sh BUILD_DIR [SCENARIO...]
#
# Every function named test_* is a scenario. Root and BPF (PERFMAPD_SKIP_BPF=1
# skips loudly). Maps go to private directories under $WORK, never /tmp.
set -u
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SCENARIO...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /var/tmp/perfmapd-profile.XXXXXX)
chmod 755 "$WORK"
. "$HERE/../agent/lib.sh"

CTL=$BUILD/perfmapctl
SPLIT=$BUILD/tests/splitjit
STACKGEN=$BUILD/bench/stackgen
JITPROD=$BUILD/tests/jitprod
PIDS=()
cleanup() {
	cleanup_agent
	kill_all "${PIDS[@]}"
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE="perfmapctl profile tests"
[ "$(id -u)" = 0 ] || skip_or_fail "not root: the BPF sampler cannot be loaded"
[ -r /sys/kernel/btf/vmlinux ] || skip_or_fail "no kernel BTF (/sys/kernel/btf/vmlinux)"
# The sampler must load here at all: said once, with the reason, rather than in every scenario.
if ! "$CTL" profile -d 1 -p $$ >"$WORK/preflight.out" 2>&1; then
	skip_or_fail "perfmapctl profile does not run here: $(head -c 300 "$WORK/preflight.out")"
fi

# share FILE NAME: the percentage the default view gives NAME's line, or nothing.
share() { awk -v n="$2" '$2 == n { sub("%", "", $1); print $1; exit }' "$1"; }
# within VALUE WANT TOL: VALUE is WANT +- TOL.
within() { [ -n "$1" ] && [ "$1" -ge $(($2 - $3)) ] && [ "$1" -le $(($2 + $3)) ]; }
# profile OUT ARGS...: perfmapctl profile's report in OUT, what it said in OUT.err, its status in RC.
profile() {
	local out=$1
	shift
	"$CTL" profile "$@" >"$out" 2>"$out.err"
	RC=$?
}
new_maps() { mktemp -d "$WORK/maps.XXXXXX"; }
# jit_named_ge / jit_unnamed_ge FILE PCT: of the JIT samples a -j v report
# counts (named and unnamed), at least PCT % are named / unnamed. Of the JIT
# samples, not of all: a loaded machine gives the JIT's start-up (exec, the
# loader, the kernel) a larger share of the whole (fork_child saw 78 %).
jit_shares() {
	awk '/Unnamed JIT code$/ { sub("%", "", $1); u = $1 } /JIT code$/ && !/Unnamed/ { sub("%", "", $1); n = $1 }
		END { print n + 0, u + 0 }' "$1"
}
jit_named_ge() {
	local n u
	read -r n u < <(jit_shares "$1")
	[ "$n" -ge 10 ] && [ $((100 * n)) -ge $(($2 * (n + u))) ]
}
jit_unnamed_ge() {
	local n u
	read -r n u < <(jit_shares "$1")
	[ "$u" -ge 10 ] && [ $((100 * u)) -ge $(($2 * (n + u))) ]
}
# agent_on MAPS ARGS...: perfmapd on MAPS, its archive in $WORK/archive-<name of MAPS>.
agent_on() {
	local maps=$1
	shift
	ARCH=$WORK/archive-${maps##*/}
	mkdir -p "$WORK/run"
	start_agent "$WORK/agent-${maps##*/}.log" --map-dir "$maps" --archive-dir "$ARCH" \
		--run-dir "$WORK/run" "$@"
}

# 75/25 by instructions between two named JIT functions: the profile says 75 +- 5 and 25 +- 5
# (1 ms interval, 3 s: some 3000 samples, whose 75 % has a standard error under 1 %).
test_split() {
	local m out=$WORK/split.out hot cold
	m=$(new_maps)
	profile "$out" -j i1 --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 3000
	check "split: the profile of a command exits 0" test "$RC" = 0
	hot=$(share "$out" split_hot)
	cold=$(share "$out" split_cold)
	check "split: split_hot has 75 +- 5 % of the samples (${hot:-none})" within "$hot" 75 5
	check "split: split_cold has 25 +- 5 % (${cold:-none})" within "$cold" 25 5
	check "split: nothing said about unnamed samples ($(cat "$out.err"))" test ! -s "$out.err"
	[ "$RC" = 0 ] || sed 's/^/    /' "$out" "$out.err"
}

# The letters on real samples: states, module:name with full paths, depth, raw counts.
test_letters() {
	local m out=$WORK/letters
	m=$(new_maps)
	profile "$out.v" -j v --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 800
	check "letters: v says the time is in JIT code ($(grep -v ^pid "$out.v" | head -1))" \
		grep -Eq '^ ?[0-9]+%  JIT code$' "$out.v"
	profile "$out.pF" -j pF --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 800
	check "letters: pF names the map with its path" grep -Eq "^ ?[0-9]+%  $m/perf-[0-9]+\.map:split_hot$" "$out.pF"
	profile "$out.2" -j 2 --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 800
	check "letters: 2 gives the caller, named from the ELF file (split_hot < main)" \
		grep -Eq '^ ?[0-9]+%  split_hot < main$' "$out.2"
	profile "$out.2l" -j 2l --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 800
	check "letters: 2l gives the caller's file and line from DWARF ($(grep -m1 split_hot "$out.2l"))" \
		grep -Eq '^ ?[0-9]+%  split_hot < splitjit\.c:[0-9]+$' "$out.2l"
	profile "$out.a" -j a -- "$STACKGEN" 1
	check "letters: a annotates the source of native code with DWARF lines, share by share" \
		eval 'grep -q "^====== /.*/tests/bench/stackgen.c ======$" "$out.a" && grep -Eq "^ +[0-9]+% \| .*sink \+=" "$out.a"'
	profile "$out.r" -j r --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 800
	check "letters: r gives counts ($(grep -v ^pid "$out.r" | head -1))" grep -Eq '^ +[0-9]+  split_hot$' "$out.r"
	profile "$out.bad" -j fq --map-dir "$m" -- true
	check "letters: a bad letter is an error naming it (exit 2)" \
		eval '[ "$RC" = 2 ] && grep -q "'"'"'q'"'"' is not a letter of -j" "$out.bad.err"'
}

# G: folded stacks, caller first: what flamegraph.pl and speedscope read.
test_folded() {
	local m out=$WORK/folded.out bad total
	m=$(new_maps)
	profile "$out" -j G --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 1000
	bad=$(grep -cvE '^[^ ]([^;]*;)*[^;]* [0-9]+$' "$out")
	total=$(awk '{ n += $NF } END { print n + 0 }' "$out")
	check "folded: every line is 'frame;frame;... count' ($bad not)" test "$bad" = 0
	check "folded: the hot stack ends in split_hot, caller first" grep -Eq '(^|;)main;split_hot [0-9]+$' "$out"
	check "folded: counts add up to some 100 samples of 1 s ($total)" test "$total" -ge 50
}

# pprof for fleets: read back by go tool pprof (Debian's golang), and one profile per period.
test_pprof() {
	local m out=$WORK/pprof flat n f
	command -v go >/dev/null || { fail "pprof: go is missing (make deps: golang-go)"; return; }
	m=$(new_maps)
	profile "$out.run" -j i1 -o "$out.pb.gz" --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 2000
	check "pprof: -o FILE.pb.gz writes a gzipped profile" eval 'gzip -t "$out.pb.gz"'
	HOME=$WORK GOCACHE=$WORK/gocache GOFLAGS= timeout 120 go tool pprof -top "$out.pb.gz" >"$out.top" 2>&1
	# Of the two functions' samples: the JIT's start-up (exec, the loader) takes more of a loaded machine's.
	flat=$(awk '$NF == "split_hot" { sub("%", "", $2); h = $2 } $NF == "split_cold" { sub("%", "", $2); c = $2 }
		END { if (h + c > 0) printf "%d", 100 * h / (h + c) + 0.5 }' "$out.top")
	check "pprof: go tool pprof -top reads it: split_hot has 75 +- 5 % of the two functions' flat samples (${flat:-none})" \
		within "$flat" 75 5 || sed 's/^/    /' "$out.top" | head -20
	check "pprof: its samples are CPU time at the interval (Type: cpu)" grep -q "^Type: cpu" "$out.top"
	m=$(new_maps)
	profile "$out.every" --every 1 -o "$out-e.pb.gz" --map-dir "$m" -- "$SPLIT" --dir "$m" --run-ms 2600
	n=0
	for f in "$out"-e-*.pb.gz; do
		[ -e "$f" ] || continue
		HOME=$WORK GOCACHE=$WORK/gocache timeout 120 go tool pprof -top "$f" 2>/dev/null | grep -q "split_hot$" &&
			n=$((n + 1))
	done
	check "pprof: --every 1 writes a profile a second, each naming split_hot ($n of $(ls "$out"-e-*.pb.gz 2>/dev/null | wc -l))" \
		test "$n" -ge 2
}

# go tool pprof -raw of pprof FILE into FILE.raw; its status.
pprof_raw() { HOME=$WORK GOCACHE=$WORK/gocache GOFLAGS= timeout 120 go tool pprof -raw "$1" >"$1.raw" 2>&1; }
# in_symbol BINARY SYMBOL ADDR: ADDR (hex) lies within SYMBOL's bytes, as nm -S gives them.
in_symbol() {
	local start size
	read -r start size < <(nm -S "$1" | awk -v s="$2" '$4 == s { print $1, $2; exit }')
	[ -n "$start" ] && [ -n "$3" ] && (( 16#$3 >= 16#$start && 16#$3 < 16#$start + 16#$size ))
}

# C++ and Rust names as perf shows them (libiberty's demangler) in the views, the
# folded stacks and pprof, where the mangled symbol stays the function's
# system_name and the mapping carries the file's build id, the address the
# file's own: what a store needs to name native frames itself.
test_demangle() {
	local m out=$WORK/demangle cxx=$WORK/hotcxx rs=$WORK/hotrs rs0=$WORK/hotrs0 rustc bid line addr
	command -v g++ >/dev/null || { fail "demangle: g++ is missing (make deps)"; return; }
	command -v go >/dev/null || { fail "demangle: go is missing (make deps: golang-go)"; return; }
	rustc=$(command -v rustc || echo "${HOME:-/root}/.cargo/bin/rustc")
	[ -x "$rustc" ] || { fail "demangle: rustc is missing (make deps: rustc)"; return; }
	# Frame pointers: the samples' stacks are walked by them.
	g++ -O1 -g -fno-omit-frame-pointer -o "$cxx" "$HERE/hotcxx.cc" &&
		"$rustc" -O -g -C force-frame-pointers=yes --crate-name hot -o "$rs" "$HERE/hotrs.rs" &&
		"$rustc" -O -g -C force-frame-pointers=yes -C symbol-mangling-version=v0 --crate-name hot \
			-o "$rs0" "$HERE/hotrs.rs" || { fail "demangle: the test programs do not build"; return; }
	check "demangle: the C++ program's symbol is mangled in its file" eval 'nm "$cxx" | grep -q " _ZN6shapes4Grid4lremEll$"'
	m=$(new_maps)
	profile "$out.f" -j f --map-dir "$m" -- "$cxx" 1500
	check "demangle: C++: -j f names shapes::Grid::lrem(long, long) ($(head -1 "$out.f"))" \
		grep -Eq '^ ?[0-9]+%  shapes::Grid::lrem\(long, long\)$' "$out.f"
	profile "$out.F" -j F --map-dir "$m" -- "$cxx" 800
	check "demangle: C++: -j F, module:name" grep -Eq '^ ?[0-9]+%  hotcxx:shapes::Grid::lrem\(long, long\)$' "$out.F"
	profile "$out.v" -j vf --map-dir "$m" -- "$cxx" 800
	check "demangle: C++: -j vf, under C code" grep -Eq '^  -- +[0-9]+%  shapes::Grid::lrem\(long, long\)$' "$out.v"
	profile "$out.G" -j G --map-dir "$m" -- "$cxx" 800
	check "demangle: C++: folded stacks end in the demangled name" \
		grep -Eq '(^|;)shapes::Grid::lrem\(long, long\) [0-9]+$' "$out.G"
	check "demangle: C++: no view shows the mangled name" eval '! grep -q _ZN6shapes "$out".[fFvG]'
	# pprof: the name demangled, the symbol mangled, the file's build id, the file's own address.
	profile "$out.run" -o "$out.pb.gz" --map-dir "$m" -- "$cxx" 1000
	pprof_raw "$out.pb.gz"
	check "demangle: pprof: go tool pprof -raw reads it" grep -q '^Locations' "$out.pb.gz.raw" ||
		sed 's/^/    /' "$out.pb.gz.raw" | head -20
	line=$(grep -m1 -F ' shapes::Grid::lrem(long, long) ' "$out.pb.gz.raw")
	check "demangle: pprof: Function.name demangled, system_name mangled ($line)" \
		eval '[[ "$line" == *"(_ZN6shapes4Grid4lremEll)" ]]'
	bid=$(readelf -n "$cxx" | sed -n 's/^ *Build ID: *//p')
	check "demangle: pprof: the program's Mapping carries its build id, as readelf -n says ($bid)" \
		eval '[ -n "$bid" ] && grep -Eq "^ *[0-9]+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ $cxx $bid" "$out.pb.gz.raw"'
	addr=$(sed -n 's/^ *[0-9]*: 0x\([0-9a-f]*\) M=.* shapes::Grid::lrem(long, long) .*/\1/p' "$out.pb.gz.raw" | head -1)
	check "demangle: pprof: its Location.address is the file's own, within the symbol nm gives (0x$addr)" \
		in_symbol "$cxx" _ZN6shapes4Grid4lremEll "$addr"
	# Rust: legacy (rustc's default) loses its ::h<hash>; v0 reads as perf shows it.
	if nm "$rs" | grep -q ' _ZN3hot8spin_hot17h[0-9a-f]\{16\}E$'; then
		profile "$out.rs" -j f --map-dir "$m" -- "$rs" 1000
		check "demangle: Rust legacy: hot::spin_hot, no hash ($(head -1 "$out.rs"))" \
			grep -Eq '^ ?[0-9]+%  hot::spin_hot$' "$out.rs"
	else
		skip "this rustc ($("$rustc" --version)) mangles no legacy symbol by default"
	fi
	profile "$out.rs0" -j 3f --map-dir "$m" -- "$rs0" 1000
	check "demangle: Rust v0: hot::spin_hot < <hot::Grid<u32>>::walk ($(head -1 "$out.rs0"))" \
		grep -Eq '^ ?[0-9]+%  hot::spin_hot < <hot::Grid<u32>>::walk < hot::main$' "$out.rs0"
	profile "$out.rs0.run" -o "$out.rs0.pb.gz" --map-dir "$m" -- "$rs0" 800
	pprof_raw "$out.rs0.pb.gz"
	check "demangle: Rust v0: pprof's system_name is the v0 symbol" \
		grep -q ' hot::spin_hot .*(_RNvCs[0-9A-Za-z]*_3hot8spin_hot)$' "$out.rs0.pb.gz.raw"
}

# A JIT forks; its child runs the code and exits before the report. With the
# agent its copy names the child's frames (from retention, the child gone);
# without it, the same frames are unnamed, and the profiler says how many.
test_fork_child() {
	local m out=$WORK/fork hot
	m=$(new_maps)
	agent_on "$m" --retention 60 || { fail "fork_child: perfmapd did not start"; return; }
	profile "$out.agent" -j v --map-dir "$m" --archive-dir "$ARCH" -- \
		"$SPLIT" --dir "$m" --child --child-run-ms 1500 --after-ms 300 --wait-map-ms 5000
	check "fork_child: the child found the agent's copy of the map" grep -q "child_map found" "$out.agent"
	check "fork_child: with perfmapd, the child's samples are named JIT code ($(grep JIT "$out.agent" | head -2 | tr '\n' ' '))" \
		jit_named_ge "$out.agent" 90
	check "fork_child: the child was gone when the report was written, its map retained" \
		eval 'c=$(awk "/^child / { print \$2 }" "$out.agent"); [ -n "$c" ] && [ ! -e /proc/$c ] && [ -e "$m/perf-$c.map" ]'
	stop_agent || fail "fork_child: perfmapd exited non-zero"
	m=$(new_maps)
	profile "$out.none" -j v --map-dir "$m" -- \
		"$SPLIT" --dir "$m" --child --child-run-ms 1500 --after-ms 300 --wait-map-ms 300
	check "fork_child: without perfmapd, the child has no map" grep -q "child_map missing" "$out.none"
	check "fork_child: ...its samples are unnamed JIT code ($(grep JIT "$out.none" | head -1))" \
		jit_unnamed_ge "$out.none" 90
	check "fork_child: ...and the profiler says how many it could not name" \
		grep -q "samples ([0-9]*%) are in JIT code no perf map names" "$out.none.err"
}

# -p with a duration: the child exits, its map leaves its path for the archive
# after a 3 s retention, and the report comes later. Three profiles of the same
# JIT at once: one keeps the child's map from its exit (the default) and is
# shown no archive; one does not keep it and reads the archive; one does
# neither, and cannot name the child (the test can tell).
test_archived_child() {
	local m out=$WORK/archived pid c p1 p2 p3
	m=$(new_maps)
	agent_on "$m" --retention 3 || { fail "archived_child: perfmapd did not start"; return; }
	"$SPLIT" --dir "$m" --child --fork-delay-ms 1000 --child-run-ms 1500 --after-ms 9000 \
		--wait-map-ms 5000 >"$WORK/archived.jit" &
	pid=$!
	PIDS+=("$pid")
	wait_for 5 grep -q "^pid " "$WORK/archived.jit"
	"$CTL" profile -j v -d 8 -p "$pid" --map-dir "$m" --archive-dir "$WORK/nowhere" >"$out.kept" 2>&1 &
	p1=$!
	"$CTL" profile -j v -d 8 -p "$pid" --map-dir "$m" --archive-dir "$ARCH" --no-keep-maps >"$out.arch" 2>&1 &
	p2=$!
	"$CTL" profile -j v -d 8 -p "$pid" --map-dir "$m" --archive-dir "$WORK/nowhere" --no-keep-maps \
		>"$out.none" 2>&1 &
	p3=$!
	PIDS+=("$p1" "$p2" "$p3")
	wait "$p1" "$p2" "$p3"
	c=$(awk '/^child / { print $2 }' "$WORK/archived.jit")
	check "archived_child: the child's map was archived before the reports (perf-$c-*.map)" \
		eval '[ -n "$c" ] && ls "$ARCH"/perf-"$c"-*.map >/dev/null 2>&1 && [ ! -e "$m/perf-$c.map" ]'
	check "archived_child: the map read at the child's exit names its samples, no archive in sight ($(grep JIT "$out.kept" | head -1))" \
		jit_named_ge "$out.kept" 90
	check "archived_child: with --no-keep-maps, the archive names them ($(grep JIT "$out.arch" | head -1))" \
		jit_named_ge "$out.arch" 90
	check "archived_child: with neither, they are unnamed ($(grep JIT "$out.none" | head -1))" \
		jit_unnamed_ge "$out.none" 90
	stop_agent || fail "archived_child: perfmapd exited non-zero"
}

# With the agent at the profiler's --run-dir, the profiler holds each process
# it samples: the child's map stays at its path past its 1 s retention until
# the report names it, though the profiler neither keeps maps nor reads the
# archive; then it goes to the archive. A profiler killed with -9 holds
# nothing; no one but root may hold.
test_held_child() {
	local m out=$WORK/held pid c p1 ok
	m=$(new_maps)
	agent_on "$m" --retention 1 || { fail "held_child: perfmapd did not start"; return; }
	RUN_DIR=$WORK/run
	"$SPLIT" --dir "$m" --child --fork-delay-ms 500 --child-run-ms 1500 --after-ms 9000 \
		--wait-map-ms 5000 >"$WORK/held.jit" &
	pid=$!
	PIDS+=("$pid")
	wait_for 5 grep -q "^pid " "$WORK/held.jit"
	"$CTL" profile -j v -d 7 -p "$pid" --map-dir "$m" --run-dir "$WORK/run" --archive-dir "$WORK/nowhere" \
		--no-keep-maps >"$out" 2>"$out.err" &
	p1=$!
	PIDS+=("$p1")
	check "held_child: the agent has a holder" wait_for 5 status_is "$m" holders 1
	wait_for 10 grep -q "^child " "$WORK/held.jit"
	c=$(awk '/^child / { print $2 }' "$WORK/held.jit")
	wait_for 10 gone "$c"
	check "held_child: the child's map is kept past its 1 s retention for the profiler (status: held_past_retention)" \
		eval 'wait_for 10 status_ge "$m" held_past_retention 1 && [ -e "$m/perf-$c.map" ] && ! ls "$ARCH"/perf-"$c"-*.map >/dev/null 2>&1'
	check "held_child: the parent and the child are held ($(status_of "$m" held_processes))" status_ge "$m" held_processes 2
	wait "$p1"
	check "held_child: the report names the child's samples from its path, no archive read ($(grep JIT "$out" | head -1))" \
		jit_named_ge "$out" 90 ||
		sed 's/^/    /' "$out.err"
	check "held_child: the report written, the child's map goes to the archive" \
		wait_for 10 eval 'ls "$ARCH"/perf-"$c"-*.map >/dev/null 2>&1 && [ ! -e "$m/perf-$c.map" ]'
	check "held_child: and nothing is held ($(status_of "$m" holders) holders, $(status_of "$m" held_processes) held)" \
		eval 'status_is "$m" holders 0 && status_is "$m" held_processes 0'
	"$CTL" profile -d 60 -p "$pid" --map-dir "$m" --run-dir "$WORK/run" >/dev/null 2>&1 &
	p1=$!
	PIDS+=("$p1")
	wait_for 5 status_ge "$m" held_processes 2
	kill -9 "$p1"
	wait "$p1" 2>/dev/null
	check "held_child: a profiler killed with -9 holds nothing" \
		wait_for 5 eval 'status_is "$m" holders 0 && status_is "$m" held_processes 0'
	ok=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- /usr/bin/python3 -c '
import glob, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(glob.glob(sys.argv[1] + "/*.hold")[0])
    print("connected")
except OSError as e:
    print(e.strerror)' "$WORK/run" 2>&1)
	check "held_child: uid 65534 cannot reach the hold socket ($ok)" test "$ok" = "Permission denied"
	ok=$(/usr/bin/python3 -c '
import glob, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(glob.glob(sys.argv[1] + "/*.hold")[0])
s.settimeout(5)
s.sendall(b"hold 1 2 3 4\n")
print("closed" if s.recv(1) == b"" else "open")' "$WORK/run" 2>&1)
	check "held_child: a line that is no request closes its connection ($ok), counted" \
		eval '[ "$ok" = closed ] && status_is "$m" hold_bad_requests 1'
	check "held_child: the agent said it kept the child's map for the profiler" \
		grep -q "exit $c: .*stays past its retention: a profiler holds it" "$AGENT_LOG"
	wait "$pid"
	stop_agent || fail "held_child: perfmapd exited non-zero"
}

# --every for days must not grow with every process it ever saw: a command
# runs 300 short processes, then a JIT for 3 s; once a period has named the
# short ones' stacks they are forgotten (and their holds released), and the
# last periods follow only what lives.
test_every_forgets() {
	local dir=$WORK/forget last now since
	mkdir -p "$dir"
	profile "$dir/out" --every 1 -o "$dir/p.folded" -j G --map-dir "$dir" -- sh -c \
		'i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i + 1)); done; exec "$0" --dir "$1" --run-ms 3000' \
		"$SPLIT" "$dir"
	last=$(grep "processes followed now" "$dir/out.err" | tail -n 1)
	now=$(sed -n 's/.* \([0-9]*\) processes followed now.*/\1/p' <<<"$last")
	since=$(sed -n 's/.*now, \([0-9]*\) since the start.*/\1/p' <<<"$last")
	check "every_forgets: a line per period says what it follows ($(grep -c "processes followed now" "$dir/out.err") lines)" \
		test "$(grep -c "processes followed now" "$dir/out.err")" -ge 2
	check "every_forgets: the last period follows the JIT alone, not the 300 gone ($last)" \
		eval '[ -n "$now" ] && [ "$now" -le 2 ] && [ "${since:-0}" -ge 301 ]'
	check "every_forgets: and still names the JIT (split_hot in its last period's file)" \
		eval 'grep -l split_hot "$dir"/p-*.folded >/dev/null'
}

# --every loses no sample at its periods' turns: stackgen (a new stack at
# nearly every sample, slow to name) profiled at 1 ms, a file a second. The
# files hold every sample the kernel took (it counts them apart, in .bss),
# but those past --max-stacks. Before the two count maps, a period's naming
# lost what was counted meanwhile (some 8 % here).
test_every_keeps_all() {
	local dir=$WORK/keep files took lost line
	mkdir -p "$dir"
	profile "$dir/part.out" -j Gi1 --every 1 -o "$dir/part.folded" -- "$STACKGEN" 4
	files=$(cat "$dir"/part-*.folded 2>/dev/null | awk '{ s += $NF } END { print s + 0 }')
	line=$(grep "samples in .* files; the kernel took" "$dir/part.out.err")
	took=$(sed -n 's/.*the kernel took \([0-9]*\) .*/\1/p' <<<"$line")
	lost=$(sed -n 's/.*took [0-9]* (\([0-9]*\) past.*/\1/p' <<<"$line")
	check "every_keeps_all: the files hold every sample the kernel took ($files in $(ls "$dir"/part-*.folded | wc -l) files; $line)" \
		eval '[ "${took:-0}" -ge 1000 ] && [ $((files + lost)) = "$took" ]'
}

# Any user can make /tmp/perf-<pid>.map for another user's JIT: the profiler,
# root, names that code with no map of another owner (it reads what the
# process's own uid owns, as perfmapd and its doctor do).
test_planted() {
	local m other out=$WORK/planted pid
	m=$(new_maps)
	chmod 1777 "$m"
	other=$WORK/planted-own
	mkdir -p "$other"
	"$SPLIT" --dir "$other" --run-ms 4000 >"$WORK/planted.jit" &
	pid=$!
	PIDS+=("$pid")
	wait_for 5 grep -q "^pid " "$WORK/planted.jit"
	wait_for 5 test -s "$other/perf-$pid.map"
	sed 's/split_/planted_/' "$other/perf-$pid.map" |
		setpriv --reuid=65534 --regid=65534 --clear-groups -- sh -c 'cat >"$1"' _ "$m/perf-$pid.map"
	check "planted: uid 65534 made $m/perf-$pid.map for root's JIT" \
		eval '[ "$(stat -c %u "$m/perf-$pid.map")" = 65534 ]'
	profile "$out" -j f -d 2 -p "$pid" --map-dir "$m"
	check "planted: its names are not taken for root's code ($(grep -v ^pid "$out" | head -1))" \
		eval '! grep -q planted_ "$out" && grep -q "Unnamed\|\[anon\]" "$out"'
	wait "$pid"
}

# -j a opens the files that JIT names (and DWARF lines) carry, and perfmapctl
# is root: a JIT of uid 65534 names a 0644 file in a directory only root may
# search (a canary), /proc/kallsyms (root sees its addresses), /proc again by
# "..", through a symlink and through a magic link (/proc/self/root), a FIFO,
# and a file it can read (the control). Root's report must show the
# control's line and nothing of the others, say why once per file, and not
# wait on the FIFO. Then the same JIT as root of its own user, pid and mount
# namespace (unshare -Urpm): its map is perf-<ns pid>.map in its own map
# directory, which the profiler does not read; perfmapd's mirror makes it
# <map-dir>/perf-<host pid>.map. That agent mirrors (PERFMAPD_TEST_AGENT_ARGS'
# --no-mirrors left out), but no other namespace on a shared host: its
# --ns-map-dir, $WORK/nsroot/maps, is there in the JIT's namespace alone,
# which mounts $WORK/nsbox (with maps/ in it) over the empty $WORK/nsroot.
test_annotate_secrets() {
	local d=$WORK/anno m ns nsdir out=$WORK/anno.out canary names refused RUN_DIR=$WORK/run
	canary="TOP-SECRET-$RANDOM$RANDOM"
	mkdir -p "$d/secretdir"
	chmod 755 "$d"
	chmod 700 "$d/secretdir"
	printf 'line1\n%s line2\n%s line3\n' "$canary" "$canary" >"$d/secretdir/notes.txt"
	printf 'first\nCONTROL-LINE readable by 65534\nthird\n' >"$d/control.js"
	chmod 644 "$d/secretdir/notes.txt" "$d/control.js"
	mkfifo -m 666 "$d/fifo"
	ln -s /proc "$d/proc-link"
	names=(
		--name "JS:*secret $d/secretdir/notes.txt:2:1"
		--name "JS:*secret3 $d/secretdir/notes.txt:3:1"
		--name "JS:*kallsyms /proc/kallsyms:2:1"
		--name "JS:*dotdot $d/../../../../../../../proc/kallsyms:3:1"
		--name "JS:*symlink $d/proc-link/kallsyms:4:1"
		--name "JS:*magic $d/proc-link/self/root$d/secretdir/notes.txt:2:1"
		--name "JS:*fifo $d/fifo:1:1"
		--name "JS:*control $d/control.js:2:1"
	)
	refused=(
		"$d/secretdir/notes.txt" /proc/kallsyms "$d/../../../../../../../proc/kallsyms"
		"$d/proc-link/kallsyms" "$d/proc-link/self/root$d/secretdir/notes.txt" "$d/fifo"
	)
	m=$(new_map_dir)
	timeout 120 "$CTL" profile -j a --map-dir "$m" -- \
		setpriv --reuid=65534 --regid=65534 --clear-groups -- "$SPLIT" --dir "$m" --run-ms 2000 "${names[@]}" \
		>"$out" 2>"$out.err"
	RC=$?
	annotate_checks "annotate_secrets" "$out" "$canary" shown

	if ! setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare -Urpm --fork true 2>"$WORK/unshare.err"; then
		skip "no unprivileged user namespaces here: $(head -c 200 "$WORK/unshare.err")"
		return
	fi
	m=$(new_map_dir)
	mkdir -m 755 "$WORK/nsroot" "$WORK/nsbox"
	mkdir -m 1777 "$WORK/nsbox/maps"
	ns=$WORK/nsbox/maps
	nsdir=$WORK/nsroot/maps
	# This agent mirrors: PERFMAPD_TEST_AGENT_ARGS without its --no-mirrors, for it alone.
	local args=${PERFMAPD_TEST_AGENT_ARGS:-}
	PERFMAPD_TEST_AGENT_ARGS=${args//--no-mirrors/} agent_on "$m" --retention 60 --ns-map-dir "$nsdir" ||
		{ fail "annotate_secrets: perfmapd did not start"; return; }
	# shellcheck disable=SC2016 # expanded by the namespace's sh
	timeout 120 "$CTL" profile -j a --map-dir "$m" --archive-dir "$ARCH" --run-dir "$WORK/run" -- \
		setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare -Urpm --fork sh -c \
		'box=$1 root=$2 dir=$3 jit=$4; shift 4; mount --bind "$box" "$root" && exec "$jit" --dir "$dir" "$@"' \
		_ "$WORK/nsbox" "$WORK/nsroot" "$nsdir" "$SPLIT" --run-ms 2000 "${names[@]}" >"$out.ns" 2>"$out.ns.err"
	RC=$?
	check "annotate_secrets (unshare -Urpm): the JIT ran as pid 1 of its own namespace, its map perf-1.map in its own $nsdir" \
		eval 'grep -q "^pid 1$" "$out.ns" && [ -s "$ns/perf-1.map" ] && [ ! -e "$nsdir" ]'
	check "annotate_secrets (unshare -Urpm): perfmapd mirrored it to $m/perf-<host pid>.map (mirrors_started $(status_of "$m" mirrors_started))" \
		eval 'grep -qs "JS:\*control " "$m"/perf-*.map'
	# In a mount namespace of its own, its paths are not the host's: the control is not shown either.
	annotate_checks "annotate_secrets (unshare -Urpm)" "$out.ns" "$canary" refused
	stop_agent || fail "annotate_secrets: perfmapd exited non-zero"
}

# annotate_checks WHAT OUT CANARY CONTROL: a -j a report of the names test_annotate_secrets
# gives (RC its status); CONTROL: whether the control file is shown, or refused as all the rest.
annotate_checks() {
	local what=$1 out=$2 canary=$3 control=$4 f n
	check "$what: the profile ends, the FIFO not waited on (exit $RC)" test "$RC" = 0
	if [ "$control" = shown ]; then
		check "$what: the control, a file uid 65534 can read, is annotated ($(grep -m1 CONTROL-LINE "$out"))" \
			grep -Eq '^ +[0-9]+% \| CONTROL-LINE readable by 65534$' "$out"
	else
		check "$what: the control is not shown either: the process's paths are in its own mount namespace" \
			eval '! grep -q CONTROL-LINE "$out" && grep -q "annotate: $d/control.js: not shown: .*another mount namespace" "$out.err"'
	fi
	check "$what: no line of the file in root's 0700 directory (the canary) in the report" \
		eval '! grep -q "$canary" "$out" "$out.err"'
	check "$what: no kernel address from /proc/kallsyms ($(grep -Em1 '[0-9a-f]{16} [A-Za-z] ' "$out"))" \
		eval '! grep -Eq "[0-9a-f]{16} [A-Za-z] " "$out"'
	check "$what: the secret's lines are shown with their shares and no text" \
		eval 'grep -A1 -F "====== $d/secretdir/notes.txt ======" "$out" | grep -q "^\[Source not shown\]$"'
	for f in "${refused[@]}"; do
		n=$(grep -cF "perfmapctl: profile: annotate: $f: not shown: " "$out.err")
		check "$what: why $f is not shown is said once ($n: $(grep -m1 -F "annotate: $f: " "$out.err" | sed 's/.*not shown: //'))" \
			test "$n" = 1
	done
	[ "$RC" = 0 ] || sed 's/^/    /' "$out" "$out.err" | head -60
}

# jp_start DIR: the test jitdump producer (tests/jitdump/jitprod.c), its dump
# in DIR, driven through a FIFO, one reply line per command in $WORK/jp.out;
# sets JP_PID and JP_DUMP once it is ready. jp COMMAND: a command, its reply
# awaited; jp_send COMMAND and jp_wait: a command whose reply comes later.
jp_start() {
	rm -f "$WORK/jp.in" "$WORK/jp.out"
	mkfifo -m 600 "$WORK/jp.in"
	"$JITPROD" "$1" <"$WORK/jp.in" >"$WORK/jp.out" 2>&1 &
	PIDS+=($!)
	exec {JP_FD}>"$WORK/jp.in"
	JP_N=1
	wait_for 10 grep -q "^ready " "$WORK/jp.out" || return 1
	read -r _ JP_PID JP_DUMP <"$WORK/jp.out"
}
jp_replies() { [ "$(wc -l <"$WORK/jp.out")" -ge "$JP_N" ]; }
jp_send() { echo "$*" >&"$JP_FD"; JP_N=$((JP_N + 1)); }
jp_wait() { wait_for 30 jp_replies; }
jp() { jp_send "$@" && jp_wait; }
jp_end() { echo exit >&"$JP_FD"; exec {JP_FD}>&-; wait_for 10 gone "$JP_PID"; }
# jp_profile OUT ARGS...: the producer runs its functions while perfmapctl profile samples it for 2 s.
jp_profile() {
	local out=$1
	shift
	jp_send run 3000
	profile "$out" -d 2 -p "$JP_PID" "$@"
	jp_wait
}
# dump_named FILE NAME: -j F names NAME from the dump (jit-PID.dump:NAME), with 10 % or more.
share_of() { awk -v k="$2" '$2 == k { sub("%", "", $1); print $1; exit }' "$1"; }
named_ge() { local n; n=$(share_of "$1" "$2"); [ "${n:-0}" -ge "$3" ]; }
# lines_ge FILE PCT: the samples l puts on /app/jitprod.js's lines 10 to 12 (jitprod's debug info).
lines_ge() {
	[ "$(awk '$2 ~ /^\/app\/jitprod\.js:1[0-2]$/ { sub("%", "", $1); n += $1 } END { print n + 0 }' "$1")" -ge "$2" ]
}

# A jitdump producer without perfmapd and without a perf map: the profiler
# finds its dump by its marker (the dump mapped executable), reads it inside
# the process's root, and names jd_hot and jd_cold from it; l gives the
# lines of their debug info (/app/jitprod.js:10 to 12), which no name
# carries. Then with perfmapd, whose map names them the same: the map
# names them, l still gives the dump's lines. Last, the dump chowned to
# another uid under the running producer: not its own file, it names nothing.
test_jitdump() {
	local m dir=$WORK/jd out=$WORK/jitdump
	[ -x "$JITPROD" ] || { fail "jitdump: $JITPROD is missing (make $JITPROD)"; return; }
	mkdir -p "$dir"
	m=$(new_maps)
	jp_start "$dir" || { fail "jitdump: the producer did not start ($(head -c 200 "$WORK/jp.out"))"; return; }
	jp load jd_hot && jp debug jd_hot && jp load jd_cold && jp debug jd_cold ||
		{ fail "jitdump: the producer did not answer ($(tail -c 200 "$WORK/jp.out"))"; return; }
	check "jitdump: no perfmapd, no perf map of the producer" test ! -e "$m/perf-$JP_PID.map"
	jp_profile "$out.F" -j F --map-dir "$m" --archive-dir "$WORK/nowhere"
	check "jitdump: F names jd_hot from the dump alone ($(grep -m1 jd_hot "$out.F"))" \
		named_ge "$out.F" "jit-$JP_PID.dump:jd_hot" 10
	check "jitdump: ...and jd_cold ($(grep -m1 jd_cold "$out.F"))" \
		named_ge "$out.F" "jit-$JP_PID.dump:jd_cold" 10
	check "jitdump: nothing said about unnamed samples ($(head -c 300 "$out.F.err"))" test ! -s "$out.F.err"
	jp_profile "$out.v" -j v --map-dir "$m" --archive-dir "$WORK/nowhere"
	check "jitdump: v counts them as JIT code ($(grep JIT "$out.v" | head -2 | tr '\n' ' '))" \
		jit_named_ge "$out.v" 90
	jp_profile "$out.pl" -j pl --map-dir "$m" --archive-dir "$WORK/nowhere"
	check "jitdump: pl gives the dump's source lines, /app/jitprod.js:10 to 12 ($(head -2 "$out.pl" | tr '\n' ' '))" \
		lines_ge "$out.pl" 80
	jp_profile "$out.fl" -j fl --map-dir "$m" --archive-dir "$WORK/nowhere"
	check "jitdump: fl gives each function its lines (jd_hot -- jitprod.js:1x)" \
		eval 'grep -A1 "  jd_hot$" "$out.fl" | grep -Eq "^  -- +[0-9]+%  jitprod\.js:1[0-2]$"'
	chown 65534 "$JP_DUMP"
	jp_profile "$out.own" -j v --map-dir "$m" --archive-dir "$WORK/nowhere"
	check "jitdump: the dump chowned to another uid names nothing ($(grep JIT "$out.own" | head -1))" \
		jit_unnamed_ge "$out.own" 90
	jp_end

	# With perfmapd: its map names the producer's code, the dump still gives the lines.
	m=$(new_maps)
	agent_on "$m" || { fail "jitdump: perfmapd did not start"; return; }
	jp_start "$dir" || { fail "jitdump: the producer did not start with perfmapd"; return; }
	jp load jd_hot && jp debug jd_hot && jp load jd_cold && jp debug jd_cold
	check "jitdump: perfmapd wrote the producer's map from its dump" \
		wait_for 10 grep -qs " jd_cold$" "$m/perf-$JP_PID.map"
	jp_profile "$out.mF" -j F --map-dir "$m" --archive-dir "$ARCH"
	check "jitdump: with perfmapd's map, the map names them ($(grep -m1 jd_hot "$out.mF"))" \
		eval 'named_ge "$out.mF" "perf-$JP_PID.map:jd_hot" 10 && named_ge "$out.mF" "perf-$JP_PID.map:jd_cold" 10'
	jp_profile "$out.mpl" -j pl --map-dir "$m" --archive-dir "$ARCH"
	check "jitdump: ...and pl the dump's lines ($(head -1 "$out.mpl"))" lines_ge "$out.mpl" 80
	jp_end
	stop_agent || fail "jitdump: perfmapd exited non-zero"
}

# The whole host: the JIT among every other process.
test_all() {
	local m out=$WORK/all.out pid
	m=$(new_maps)
	"$SPLIT" --dir "$m" --run-ms 4000 >/dev/null &
	pid=$!
	PIDS+=("$pid")
	profile "$out" -a -d 2 -j m1 --map-dir "$m"
	check "all: -a exits 0" test "$RC" = 0
	check "all: -a names the JIT's functions among the host's" grep -q "split_hot$" "$out"
	wait "$pid"
}

# The whole host as the DaemonSet profiles it (--every, 20 Hz) while a shell forks and execs
# as fast as it can: a process is followed (read, held) only once it is sampled, so the
# processes followed are bounded by the samples, not by the host's churn; the JIT started
# after the profile (its exec told of by its first sample) is named.
test_all_churn() {
	local m out=$WORK/allchurn prof pid f0 f1 churned followed took
	m=$(new_maps)
	mkdir -p "$out"
	"$CTL" profile -a --every 1s -d 5 -j G -o "$out/p.folded" --map-dir "$m" 2>"$out.err" &
	prof=$!
	PIDS+=("$prof")
	if ! wait_for 10 eval '[ "$(ls -l /proc/$prof/fd 2>/dev/null | grep -c perf_event)" -ge 1 ]'; then
		fail "all_churn: perfmapctl profile -a did not start sampling within 10 s: $(tail -3 "$out.err")"
		return
	fi
	"$SPLIT" --dir "$m" --run-ms 3000 >/dev/null &
	pid=$!
	PIDS+=("$pid")
	f0=$(awk '/^processes / { print $2 }' /proc/stat)
	while kill -0 "$prof" 2>/dev/null; do /bin/true; done
	f1=$(awk '/^processes / { print $2 }' /proc/stat)
	wait "$prof"
	RC=$?
	wait "$pid"
	churned=$((f1 - f0))
	followed=$(awk '/processes followed now/ { n = $(NF - 3) } END { print n + 0 }' "$out.err")
	took=$(awk '/samples in .* the kernel took/ { for (i = 1; i < NF; i++) if ($i == "took") print $(i + 1) }' "$out.err")
	check "all_churn: -a --every exits 0" test "$RC" = 0
	check "all_churn: the JIT started after the profile is named ($(cat "$out"/p-*.folded | grep -c split_hot) stacks)" \
		eval 'cat "$out"/p-*.folded | grep -q "split_hot "'
	check "all_churn: the host forked $churned processes meanwhile (at least 200, for the next checks to mean something)" \
		test "$churned" -ge 200
	check "all_churn: processes followed ($followed) are under half of those forked ($churned)" \
		test "$((2 * followed))" -lt "$churned"
	check "all_churn: ...and at most the samples the kernel took (${took:-none}), a sampled child's parent each besides" \
		test -n "$took" -a "$followed" -le "$((2 * ${took:-0}))"
	[ "$RC" = 0 ] || sed 's/^/    /' "$out.err" | tail -5
}

# Real runtimes, their maps in a private /tmp (a mount namespace with $m bound
# there): Node's --perf-basic-prof names its optimized code "JS:*f file:line",
# whose file l gives; its --perf-prof (a jitdump in its working directory, no
# map) the same from the dump, l giving the lines of the dump's debug info;
# CPython's -X perf trampolines are a sliver of its time
# (it has no frame pointers to walk through), its interpreter loop is I.
test_runtimes() {
	local py m out=$WORK/runtimes
	m=$(new_maps)
	chmod 1777 "$m"
	if command -v node >/dev/null; then
		cat >"$WORK/busy.js" <<'JS'
function hot(n) { let s = 0; for (let i = 0; i < n; i++) s += i * i % 7; return s; }
const end = Date.now() + 2000; let t = 0;
while (Date.now() < end) t += hot(100000);
JS
		profile "$out.node" -j F --map-dir "$m" -- unshare -m sh -c \
			'mount --bind "$1" /tmp && cd "$3" && exec node --perf-basic-prof "$2"' _ "$m" "$WORK/busy.js" "$WORK"
		check "runtimes: node --perf-basic-prof: its hot function named from its map ($(grep -m1 hot "$out.node"))" \
			eval 'n=$(awk '"'"'/:JS:\*hot / { sub("%", "", $1); print $1 }'"'"' "$out.node"); [ "${n:-0}" -ge 50 ]'
		profile "$out.nodel" -j l --map-dir "$m" -- unshare -m sh -c \
			'mount --bind "$1" /tmp && cd "$3" && exec node --perf-basic-prof "$2"' _ "$m" "$WORK/busy.js" "$WORK"
		check "runtimes: node: l gives the script's file and line for its JIT frames ($(head -1 "$out.nodel"))" \
			grep -Eq '^ ?[0-9]+%  busy\.js:1$' "$out.nodel"
		# --perf-prof: a jitdump in its working directory, no map: named from the dump, and
		# l gives the lines of its debug info inside hot's body, which its name (line 1) does not.
		mkdir -p "$WORK/nodejd"
		cat >"$WORK/nodejd/busy.js" <<'JS'
function hot(n) {
  let s = 0;
  for (let i = 0; i < n; i++)
    s += i * i % 7;
  return s;
}
const end = Date.now() + 2000; let t = 0;
while (Date.now() < end) t += hot(100000);
JS
		profile "$out.nodejd" -j F --map-dir "$m" --archive-dir "$WORK/nowhere" -- \
			sh -c 'cd "$1" && exec node --perf-prof busy.js' _ "$WORK/nodejd"
		check "runtimes: node --perf-prof, no map: hot named from its jitdump ($(grep -m1 hot "$out.nodejd"))" \
			eval 'n=$(awk '"'"'/jit-[0-9]+\.dump:JS:\*hot / { sub("%", "", $1); print $1 }'"'"' "$out.nodejd"); [ "${n:-0}" -ge 50 ]'
		profile "$out.nodejdl" -j l --map-dir "$m" --archive-dir "$WORK/nowhere" -- \
			sh -c 'cd "$1" && exec node --perf-prof busy.js' _ "$WORK/nodejd"
		check "runtimes: node --perf-prof: l gives lines of hot's body from the dump's debug info ($(head -1 "$out.nodejdl"))" \
			grep -Eq '^ ?[0-9]+%  busy\.js:[2-5]$' "$out.nodejdl"
	else
		skip "no node here"
	fi
	py=$(find_python 12)
	if [ -n "$py" ]; then
		cat >"$WORK/busy.py" <<'PY'
import time
def hot(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
end = time.time() + 2
while time.time() < end:
    hot(20000)
PY
		profile "$out.py" -j v --map-dir "$m" -- unshare -m sh -c \
			'mount --bind "$1" /tmp && exec "$2" -X perf "$3"' _ "$m" "$py" "$WORK/busy.py"
		check "runtimes: $("$py" -V 2>&1) -X perf: its interpreter loop is I ($(grep Interpreted "$out.py"))" \
			grep -Eq '^ ?[0-9]+%  Interpreted$' "$out.py"
		check "runtimes: CPython wrote its map, with py:: names" grep -qs "py::hot:$WORK/busy.py" "$m"/perf-*.map
	else
		skip "no CPython 3.12+ here"
	fi
}

# What the user gets wrong: a pid that does not exist, an unprivileged user, no target.
test_errors() {
	local out=$WORK/errors pid
	profile "$out.nopid" -p 4194300 -d 1
	check "errors: a pid that does not exist: exit 2, said ($(cat "$out.nopid.err"))" \
		eval '[ "$RC" = 2 ] && grep -q "no such process" "$out.nopid.err"'
	setpriv --reuid=65534 --regid=65534 --clear-groups -- "$CTL" profile -d 1 -p $$ >"$out.perm" 2>"$out.perm.err"
	RC=$?
	check "errors: without privilege: exit 2, and it says what is needed ($(cat "$out.perm.err"))" \
		eval '[ "$RC" = 2 ] && grep -q "cannot load the BPF sampler: Operation not permitted (root, or CAP_BPF and CAP_PERFMON, is needed)" "$out.perm.err"'
	profile "$out.none" -d 1
	check "errors: no target: exit 2, said" \
		eval '[ "$RC" = 2 ] && grep -q "give one of -p PID, -a or -- COMMAND" "$out.none.err"'
}

# The profiler started before the agent (a DaemonSet's containers start in
# any order), and the agent restarted under it: it connects once the agent
# is there and holds again every process it follows, so a child exiting
# then keeps its map for the report.
test_agent_later() {
	local m out=$WORK/later pid c p1
	m=$(new_maps)
	RUN_DIR=$WORK/run-later
	mkdir -p "$RUN_DIR"
	"$SPLIT" --dir "$m" --child --fork-delay-ms 9000 --child-run-ms 1500 --after-ms 4000 \
		--wait-map-ms 5000 >"$WORK/later.jit" &
	pid=$!
	PIDS+=("$pid")
	wait_for 5 grep -qs "^pid " "$WORK/later.jit"
	"$CTL" profile -j v -d 16 -p "$pid" --map-dir "$m" --run-dir "$RUN_DIR" --archive-dir "$WORK/nowhere" \
		--no-keep-maps >"$out" 2>"$out.err" &
	p1=$!
	PIDS+=("$p1")
	check "agent_later: without the agent the profiler says it will try again" \
		wait_for 5 grep -qs "tried again every second" "$out.err"
	ARCH=$WORK/archive-later
	start_agent "$WORK/agent-later.log" --map-dir "$m" --archive-dir "$ARCH" --run-dir "$RUN_DIR" \
		--retention 1 || { fail "agent_later: perfmapd did not start"; return; }
	check "agent_later: the profiler connects to the agent started after it, and holds the JIT" \
		wait_for 5 eval 'status_is "$m" holders 1 && status_ge "$m" held_processes 1'
	stop_agent || fail "agent_later: perfmapd exited non-zero"
	start_agent "$WORK/agent-later2.log" --map-dir "$m" --archive-dir "$ARCH" --run-dir "$RUN_DIR" \
		--retention 1 || { fail "agent_later: perfmapd did not start again"; return; }
	check "agent_later: and again to the agent restarted, holding the JIT again" \
		wait_for 5 eval 'status_is "$m" holders 1 && status_ge "$m" held_processes 1'
	wait_for 15 grep -q "^child " "$WORK/later.jit"
	c=$(awk '/^child / { print $2 }' "$WORK/later.jit")
	wait_for 10 gone "$c"
	check "agent_later: the child's map is kept past its 1 s retention for the profiler" \
		eval 'wait_for 10 status_ge "$m" held_past_retention 1 && [ -e "$m/perf-$c.map" ]'
	wait "$p1"
	check "agent_later: the report names the child's samples ($(grep JIT "$out" | head -1))" \
		jit_named_ge "$out" 90 || sed 's/^/    /' "$out.err"
	wait "$pid"
	stop_agent || fail "agent_later: perfmapd exited non-zero"
}

# A sanitized perfmapctl (make profile-test-asan) writes any report to $SAN_LOG.<pid>: each fails the scenario.
scenario_done() {
	local f
	cleanup_agent
	for f in "$SAN_LOG".*; do
		[ -e "$f" ] || continue
		fail "$1: a sanitizer report ($f):"
		sed 's/^/    /' "$f" | head -40
		rm -f "$f"
	done
}
pick_scenarios "$0" "$@"
run_scenarios "profile tests"
