#!/usr/bin/env python3
"""No circle of #include between headers anywhere in the tree: agent, perfmap, profile, ctl.

Include guards hide such a circle from the compiler, and then which header's
declarations come first depends on who includes which. Each edge of a circle
found is named by the include that makes it; the circles of calls between
source files are calls.py's to find. Usage: includes.py TOP
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calls import circles  # noqa: E402

TREES = ["agent", "perfmap", "profile", "ctl"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def headers(top):
    """Header path as included -> its module, for each include directory the Makefile gives."""
    found = {}
    for tree in TREES:
        for dirpath, _, files in os.walk(os.path.join(top, tree)):
            for name in files:
                if not name.endswith(".h"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), top)
                module = path
                rel = os.path.relpath(path, tree)      # -Iagent: "policy/policy.h"; -Iperfmap
                found.setdefault((tree, rel), module)
                found.setdefault((tree, name), module)  # a sibling or -I<dir>/include
    return found


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else "."
    known = headers(top)
    graph, why = {}, {}
    files = 0
    for tree in TREES:
        for dirpath, _, names in os.walk(os.path.join(top, tree)):
            for name in sorted(names):
                if not name.endswith(".h"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), top)
                module = path
                files += 1
                graph.setdefault(module, set())
                with open(os.path.join(top, path)) as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    target = known.get((tree, inc)) or known.get((tree, os.path.basename(inc)))
                    if not target:
                        for other in TREES:  # another product's interface (perfmap_tools.h)
                            target = known.get((other, inc))
                            if target:
                                break
                    if not target or target == module:
                        continue
                    graph[module].add(target)
                    graph.setdefault(target, set())
                    why.setdefault((module, target), "%s includes \"%s\"" % (path, inc))
    if not files:
        print("includes: FAIL no source found under %s: nothing was checked" % top)
        return 1
    found = circles(graph)
    for comp in found:
        members = set(comp)
        print("includes: FAIL a circle of %d headers:" % len(comp))
        for a in comp:
            for b in sorted(graph[a] & members):
                print("    %s" % why[(a, b)])
    if found:
        return 1
    print("includes: ok, %d headers, %d includes between them, no circle" % (files, sum(len(v) for v in graph.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
