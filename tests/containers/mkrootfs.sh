#!/bin/sh
# Builds a container's root file system for the container tests: a directory
# holding the given statically linked programs in /bin and an empty sticky /tmp,
# as a runtime in an image finds it. Nothing else: podman run --rootfs adds
# /dev, /proc, /sys, /run and /etc (hosts, passwd) itself, and no image
# registry is involved.
#
#   mkrootfs.sh DIR STATIC_PROGRAM...
#
# A program's name in /bin drops a "-static" suffix (forkjit-static: /bin/forkjit).
# A dynamically linked program is refused: its libraries are not in the root.
set -eu
dir=${1:?usage: mkrootfs.sh DIR STATIC_PROGRAM...}
shift
mkdir -p "$dir/bin" "$dir/tmp"
chmod 755 "$dir" "$dir/bin"
chmod 1777 "$dir/tmp"
for prog; do
	if readelf -l "$prog" 2>/dev/null | grep -q 'Requesting program interpreter'; then
		echo "mkrootfs: $prog is dynamically linked; the container has no libraries" >&2
		exit 1
	fi
	name=$(basename "$prog")
	cp "$prog" "$dir/bin/${name%-static}"
	chmod 755 "$dir/bin/${name%-static}"
done
