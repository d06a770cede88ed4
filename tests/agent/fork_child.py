"""CPython -X perf forks: the child's map must hold every entry the parent's had at the fork."""
import os
import sys
import time


def make_functions(n):
    fns = []
    for i in range(n):
        ns = {}
        exec(f"def py_func_{i}(x):\n    return x + {i}\n", ns)
        fns.append(ns[f"py_func_{i}"])
    return fns


def main():
    fns = make_functions(50)
    for f in fns:
        f(1)  # the perf trampoline is written at the first call
    parent_map = f"/tmp/perf-{os.getpid()}.map"
    with open(parent_map) as f:
        parent_lines = f.read().splitlines()
    pid = os.fork()
    if pid == 0:
        child_map = f"/tmp/perf-{os.getpid()}.map"
        deadline = time.monotonic() + 5
        missing = parent_lines
        while time.monotonic() < deadline:
            try:
                with open(child_map) as f:
                    have = set(f.read().splitlines())
            except FileNotFoundError:
                have = set()
            missing = [l for l in parent_lines if l not in have]
            if not missing:
                break
            time.sleep(0.02)
        for f in fns:
            f(2)  # the child goes on running the parent's code
        if missing:
            print(f"child {os.getpid()}: {len(missing)} of {len(parent_lines)} parent entries missing, "
                  f"e.g. {missing[0]!r}")
            os._exit(1)
        os._exit(0)
    print(f"pids {os.getpid()} {pid}", flush=True)  # for the harness to clean up after a failure
    _, status = os.waitpid(pid, 0)
    print(f"parent_lines {len(parent_lines)}")
    for path in (parent_map, f"/tmp/perf-{pid}.map"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    sys.exit(os.waitstatus_to_exitcode(status))


main()
