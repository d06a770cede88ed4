#!/bin/sh
# make install into a staging root; build and run the README example against it through pkg-config.
set -eu
stage=$(mktemp -d "${TMPDIR:-/tmp}/perfmap-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
fail() { echo "install-test: FAIL: $*" >&2; exit 1; }

# The build dir make install-test was given (its O=), not the default build/.
make --no-print-directory O="${1:-build}" install DESTDIR="$stage" PREFIX=/opt/perfmap >/dev/null
prefix=$stage/opt/perfmap
for f in bin/perfmapctl include/perfmap.h lib/libperfmap.a lib/libperfmap.so \
	lib/libperfmap.so.0 lib/pkgconfig/perfmap.pc share/man/man8/perfmapd.8 \
	share/man/man8/perfmapctl.8 include/perfmap_profile.h lib/libperfmap-profile.a \
	lib/libperfmap-profile.so lib/libperfmap-profile.so.0 lib/pkgconfig/perfmap-profile.pc; do
	[ -e "$prefix/$f" ] || fail "$f not installed"
done
grep -qx 'prefix=/opt/perfmap' "$prefix/lib/pkgconfig/perfmap.pc" || fail "perfmap.pc ignores PREFIX"
# The systemd units, beside each other, running the binaries BINDIR installed.
for u in perfmapd:perfmapd perfmapd-profile:perfmapctl; do
	f=$prefix/lib/systemd/system/${u%%:*}.service
	[ -e "$f" ] || fail "${f#$stage} not installed"
	grep -q "^ExecStart=/opt/perfmap/bin/${u#*:} " "$f" || fail "${f#$stage}: ExecStart= is not /opt/perfmap/bin/${u#*:}"
done

soname=$(readelf -d "$prefix/lib/libperfmap.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libperfmap.so.0 ] || fail "soname is '$soname'"
# Exactly the version script's functions leave the library, and the header
# declares none that the version script forgets.
nm -D --defined-only "$prefix/lib/libperfmap.so" |
	awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort >"$stage/exported"
sed -n 's/^[[:space:]]*\(perfmap_[a-z_]*\);$/\1/p' perfmap/libperfmap.map | sort >"$stage/declared"
cmp -s "$stage/exported" "$stage/declared" ||
	fail "exports differ from perfmap/libperfmap.map: $(diff "$stage/declared" "$stage/exported" | grep '^[<>]' | tr '\n' ' ')"
for f in $(grep -oE '\bperfmap_[a-z_]+\(' "$prefix/include/perfmap.h" | tr -d '(' | sort -u); do
	grep -qx "$f" "$stage/declared" || fail "$f is in perfmap.h but not exported"
done

flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" \
	pkg-config --cflags --libs perfmap)
${CC:-cc} -Wall -Wextra -Werror tests/install/example.c $flags -o "$stage/example"
PERFMAP_DIR=$stage LD_LIBRARY_PATH="$prefix/lib" "$stage/example"
map=$(ls "$stage"/perf-*.map)
[ "$(wc -l <"$map")" -eq 3 ] || fail "example map has $(wc -l <"$map") lines"
grep -q ' 1 jit::hello$' "$map" || fail "jit::hello missing"
"$prefix/bin/perfmapctl" check "$map" >/dev/null || fail "the example's map does not check clean"
# libperfmap-profile: only its own API leaves the library, and the header's example program,
# built through pkg-config against the installed library, profiles a child and names its code.
nm -D --defined-only "$prefix/lib/libperfmap-profile.so" |
	awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort >"$stage/prof-exported"
grep -oE '\bperfmap_(profile|symbolizer)_[a-z_]+\(' "$prefix/include/perfmap_profile.h" | tr -d '(' |
	sort -u >"$stage/prof-declared"
cmp -s "$stage/prof-exported" "$stage/prof-declared" ||
	fail "libperfmap-profile.so's exports differ from perfmap_profile.h: $(diff "$stage/prof-declared" "$stage/prof-exported" | grep '^[<>]' | tr '\n' ' ')"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" \
	pkg-config --cflags --libs perfmap-profile)
${CC:-cc} -Wall -Wextra -Werror -g -fno-omit-frame-pointer tests/install/profile_example.c $flags \
	-o "$stage/profile_example"
if [ "$(id -u)" = 0 ]; then
	LD_LIBRARY_PATH="$prefix/lib" "$stage/profile_example" >"$stage/profile.out" 2>&1 ||
		fail "profile_example failed: $(head -c 500 "$stage/profile.out")"
	grep -q ';spin [0-9]*$' "$stage/profile.out" ||
		fail "profile_example's stacks do not end in spin: $(head -c 500 "$stage/profile.out")"
	grep -q '  leaf: spin in .*/profile_example, state C$' "$stage/profile.out" ||
		fail "profile_example's symbolizer did not name spin: $(head -c 500 "$stage/profile.out")"
else
	echo "install-test: SKIPPED: profile_example built, not run: it loads BPF (root)"
fi
# The installed pages are found by man through the prefix, as on a host.
MANWIDTH=80 man -M "$prefix/share/man" 8 perfmapd 2>/dev/null | grep -q -- '--config FILE' ||
	fail "man -M PREFIX/share/man 8 perfmapd does not show the page"
echo "install-test: installed libraries, headers, pkg-config, perfmapctl, the profile API's example and man pages work"
