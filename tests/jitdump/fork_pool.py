# CPython 3.13+ -X perf_jit: functions compiled (and run, so named in the
# dump) in the parent, then a fork pool whose workers run them and compile
# one more of their own. Prints "ready PID DUMP", then "pool PID..." (every
# worker) and "workers PID..." (those that ran a task);
# exits at "exit" on stdin.
import multiprocessing as mp
import os
import sys


def parent_hot(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def task(_):
    name = "child_only_%d" % os.getpid()
    ns = {}
    exec("def %s(n):\n    return sum(i for i in range(n))\n" % name, ns)
    ns[name](1000)
    parent_hot(1000)
    return os.getpid()


def main():
    parent_hot(1000)
    print("ready %d /tmp/jit-%d.dump" % (os.getpid(), os.getpid()), flush=True)
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        pids = sorted(set(pool.map(task, range(8), chunksize=1)))
        # Every worker writes a dump of its own, those that ran no task too.
        print("pool " + " ".join(str(p.pid) for p in pool._pool), flush=True)
        print("workers " + " ".join(str(p) for p in pids), flush=True)
        for line in sys.stdin:
            if line.strip() == "exit":
                break
            print("ok", flush=True)


if __name__ == "__main__":
    main()
