#!/usr/bin/env python3
"""fault_maps: is every map visible at a perf-<pid>.map path whole?

  fault_maps.py once DIR...            every map in the DIRs (archives too:
                                       perf-<pid>-*.map) ends in a newline and
                                       every line parses; prints each bad one
  fault_maps.py watch STOPFILE OUT DIR...
                                       until STOPFILE is gone, looks at every
                                       map's last byte again and again; a map
                                       that does not end in a newline is looked
                                       at again 200 ms later (a writer's line
                                       that spans two pages shows for an instant)
                                       and written to OUT if it still does not

Exit status of "once": 0 all whole, 1 otherwise. "watch" prints the number of
looks it took and always exits 0; OUT holds the torn maps it saw.
"""
import os
import re
import sys
import time

NAME = re.compile(r"^perf-\d+(-[0-9a-z]+)*\.map$")
LINE = re.compile(rb"^(0[xX])?[0-9a-fA-F]+[ \t]+(0[xX])?[0-9a-fA-F]+[ \t]+\S.*$")


def maps(dirs):
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if NAME.match(n):
                yield os.path.join(d, n)


def last_byte(path):
    """(inode, size, last byte) of the file at path, or None when it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        b = os.pread(fd, 1, st.st_size - 1) if st.st_size else b"\n"
        return st.st_ino, st.st_size, b
    finally:
        os.close(fd)


def whole(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None  # gone: nothing visible
    if data and not data.endswith(b"\n"):
        return "does not end in a newline (%d bytes)" % len(data)
    for i, line in enumerate(data.split(b"\n")[:-1]):
        if not LINE.match(line.rstrip(b"\r")):
            return "line %d does not parse: %r" % (i + 1, line[:80])
    return None


def once(dirs):
    bad = 0
    for p in maps(dirs):
        why = whole(p)
        if why:
            print("%s: %s" % (p, why))
            bad += 1
    return 1 if bad else 0


def watch(stop, out, dirs):
    looks = 0
    suspects = {}
    said = set()
    with open(out, "a") as o:
        while os.path.exists(stop):
            now = time.monotonic()
            for p in maps(dirs):
                r = last_byte(p)
                looks += 1
                if r is None or r[2] == b"\n":
                    suspects.pop(p, None)
                    continue
                first = suspects.setdefault(p, (now, r))
                if now - first[0] >= 0.2 and first[1][:2] == r[:2] and (p, r[:2]) not in said:
                    said.add((p, r[:2]))
                    o.write("%s: torn: %d bytes, no newline at the end for %.0f ms\n"
                            % (p, r[1], (now - first[0]) * 1000))
                    o.flush()
                    suspects.pop(p)
            time.sleep(0.005)
    print(looks)
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "once":
        return once(argv[2:])
    if len(argv) >= 5 and argv[1] == "watch":
        return watch(argv[2], argv[3], argv[4:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
