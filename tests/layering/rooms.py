#!/usr/bin/env python3
"""The agent's rooms and their one direction (docs/hacking.md), checked from the #include lines.

A file may include a header of its own room, and of a room below it only the
room's public header, <room>/<room>.h (and PUBLIC_TOO's two);
lib/ is a toolbox of leaf modules, each header of it public. It fails on a header of a room above, a private header of
another room, or a room it does not know.
"""
import os
import re
import sys

# Lowest first: each room may use those before it.
ROOMS = ["lib", "policy", "archive", "mirror", "in", "store", "report", "daemon", "main"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    """agent/policy/policy.c -> policy; agent/main.c -> main."""
    parts = path.split("/")
    if len(parts) == 2:
        return "main"
    return parts[1]


# Besides <room>/<room>.h: the policy's port, the interface the store implements for
# it; and the types the agent's config chooses of in/, so the config need not include the room.
PUBLIC_TOO = {"policy/mapstore.h", "in/in_config.h"}


def public(room, header):
    return room == "lib" or header == "%s/%s.h" % (room, room) or header in PUBLIC_TOO


def check(top):
    problems = []
    checked = 0
    for dirpath, _, files in os.walk(os.path.join(top, "agent")):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.relpath(os.path.join(dirpath, name), top)
            room = room_of(path)
            if room not in ROOMS:
                problems.append("%s: in agent/%s/, which is not a room (docs/hacking.md)" % (path, room))
                continue
            with open(os.path.join(top, path)) as f:
                text = f.read()
            for header in INCLUDE.findall(text):
                if "/" not in header:
                    if os.path.exists(os.path.join(top, "agent", header)):
                        problems.append("%s: includes \"%s\": name agent headers by room" % (path, header))
                    continue  # another product's interface, a BPF header or the skeleton
                target = header.split("/")[0]
                if target not in ROOMS:
                    problems.append("%s: includes \"%s\": no room %s" % (path, header, target))
                    continue
                checked += 1
                if target == room:
                    continue
                if room == "lib":
                    problems.append("%s: lib/ includes nothing of the agent, and it includes \"%s\"" % (path, header))
                elif ROOMS.index(target) > ROOMS.index(room):
                    problems.append("%s: room %s includes \"%s\" of room %s, above it" % (path, room, header, target))
                elif not public(target, header):
                    problems.append("%s: includes \"%s\", private to room %s (its public header is %s/%s.h)"
                                    % (path, header, target, target, target))
    return checked, problems


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else "."
    checked, problems = check(top)
    for p in problems:
        print("layering: FAIL %s" % p)
    if checked == 0:
        print("layering: FAIL no include of a room found: nothing was checked")
        return 1
    if problems:
        return 1
    print("layering: ok, %d includes between rooms checked" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
