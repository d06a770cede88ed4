#!/bin/sh
# Makes the build context of deploy/container/Containerfile from a build of this
# repository: perfmapd and perfmapctl in /usr/bin, the shared libraries each
# needs (as ldd resolves them here: libcurl's too) and the dynamic loader at
# their paths, an empty sticky /tmp, /var/lib/perfmapd and /run/perfmapd, and
# for the profiler's pushes the CA bundle and an nsswitch.conf. No base image,
# no registry: the image is FROM scratch with these files alone.
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
# https:// pushes: Debian's libcurl (OpenSSL) trusts the bundle at this path,
# its built-in default; the build host's ca-certificates, as its libraries are.
ca=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca" ] || { echo "stage: $ca is missing (make deps: ca-certificates)" >&2; exit 1; }
mkdir -p "$out/etc/ssl/certs"
install -m 0644 "$ca" "$out$ca"
# The push's host name: the runtime's /etc/hosts, then DNS (its resolv.conf);
# glibc has both built in. Without this file it would ask DNS first.
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$out/etc/nsswitch.conf"
