#!/bin/sh
# Makes the build context of deploy/container/Containerfile from a build of this
# repository: perfmapd and perfmapctl in /usr/bin, the shared libraries each
# needs (as ldd resolves them here) and the dynamic loader at their paths, an
# empty sticky /tmp, /var/lib/perfmapd and /run/perfmapd. No base image, no
# registry: the image is FROM scratch with these files alone.
#
#   deploy/container/stage.sh BUILD_DIR OUT_DIR     (make image runs it)
set -eu
build=${1:?usage: stage.sh BUILD_DIR OUT_DIR}
out=${2:?usage: stage.sh BUILD_DIR OUT_DIR}
rm -rf "$out"
mkdir -p "$out/usr/bin" "$out/tmp" "$out/var/lib/perfmapd" "$out/run/perfmapd" "$out/etc"
chmod 1777 "$out/tmp"
chmod 700 "$out/var/lib/perfmapd" "$out/run/perfmapd"
for bin in perfmapd perfmapctl; do
	[ -x "$build/$bin" ] || { echo "stage: $build/$bin is missing (make)" >&2; exit 1; }
	install -m 0755 "$build/$bin" "$out/usr/bin/$bin"
	# "name => /path (addr)" and the loader's "/path (addr)"; vdso has no file.
	ldd "$build/$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
	while read -r lib; do
		mkdir -p "$out$(dirname "$lib")"
		cp -L "$lib" "$out$lib"
	done
done
# perfmapctl names uids and groups; root alone is known in the image.
echo 'root:x:0:0:root:/:/usr/bin/perfmapd' >"$out/etc/passwd"
echo 'root:x:0:' >"$out/etc/group"
