#!/usr/bin/env python3
"""No circle of calls between source files: from the objects' symbol tables (nm).

File A calls file B when A's object has a symbol undefined that B's defines.
Every strongly connected group of two files or more is a circle, named with
one symbol for each edge of it. Usage: calls.py OBJ|DIR... (a directory: the .o files under it).
"""
import os
import subprocess
import sys


def objects(args):
    for d in args:
        if d.endswith(".o"):
            yield d
            continue
        for dirpath, _, files in os.walk(d):
            for name in sorted(files):
                if name.endswith(".o"):
                    yield os.path.join(dirpath, name)


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() and kind not in "N":
            defined.add(name)
    return defined, undefined


def circles(graph):
    """Tarjan's strongly connected components, iteratively; those of two nodes or more."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def main():
    objs = list(objects(sys.argv[1:]))
    if not objs:
        print("calls: FAIL no object found under %s: nothing was checked" % " ".join(sys.argv[1:]))
        return 1
    owner, needs = {}, {}
    dup = False
    for o in objs:
        defined, undefined = symbols(o)
        needs[o] = undefined
        for s in defined:
            if s in owner and owner[s] != o:
                print("calls: FAIL %s is defined in %s and in %s" % (s, owner[s], o))
                dup = True
            owner.setdefault(s, o)
    graph = {o: {} for o in objs}
    for o in objs:
        for s in sorted(needs[o]):
            t = owner.get(s)
            if t and t != o:
                graph[o].setdefault(t, s)
    edges = sum(len(v) for v in graph.values())
    found = circles({o: set(v) for o, v in graph.items()})
    for comp in found:
        members = set(comp)
        print("calls: FAIL a circle of %d files:" % len(comp))
        for a in comp:
            for b, s in sorted(graph[a].items()):
                if b in members:
                    print("    %s -> %s (%s)" % (a, b, s))
    if found or dup:
        return 1
    print("calls: ok, %d objects, %d calls between files, no circle" % (len(objs), edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
