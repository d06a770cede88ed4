#!/usr/bin/env python3
"""attack.py: the unprivileged attacker of the adversarial suite (tests/security/run.sh).

Run as uid 65534 against a map directory a running perfmapd manages. Each
command prints what it did (pids, counts) on stdout, one `key value` a line,
so that the suite can check the attack really ran.

  attack.py mapfork DIR [--lines N] [--long N:BYTES] [--sparse BYTES]
                        [--from FILE] [--children N] [--hold S] [--mtime EPOCH]
                        [--comm HEX]
      writes its own DIR/perf-<pid>.map, forks N children that sleep S
      seconds, waits for them and exits (the map then has no process).
  attack.py swapfork DIR SECRET SECONDS
      forks a child every 20 ms while its own map path is swapped between a
      symlink to SECRET and a regular file; swaps on after it exits.
  attack.py holders DIR N
      N processes that each write their map and exit at once.
  attack.py relist DIR SECONDS OTHERS TRAP_PID [RATE]
      OTHERS other files, a hard-linked perf-TRAP_PID.map, then creates and
      deletes perf-<pid>.map names of pids without a process (just below the
      last pid given out) for SECONDS.
  attack.py flood SOCKET SECONDS
      connects to SOCKET and reads its answer, as fast as it can.
  attack.py slowheaders [HOST:]PORT SECONDS CONNS SRC...
      keeps CONNS connections to HOST:PORT (HOST 127.0.0.1 by default) open,
      spread over the source addresses SRC..., each sending a request line
      and then one header line every 2 s, never ending its request; one the
      server closes is made again 0.1 s later. Says how many it made, how
      many the server closed, and how long the longest lived (from its
      connect to the close it saw, or to the end).
"""
import ctypes
import os
import socket
import sys
import time

PR_SET_NAME = 15


def say(key, value):
    print(key, value, flush=True)


def map_path(d, pid):
    return os.path.join(d, "perf-%d.map" % pid)


def valid_lines(n, prefix, base=0x10000000):
    return "".join("%x 10 %s_%d\n" % (base + i * 16, prefix, i) for i in range(n))


def write_own_map(d, args):
    path = map_path(d, os.getpid())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, valid_lines(args.get("lines", 10), "attacker").encode())
    if "long" in args:
        n, size = args["long"]
        for i in range(n):
            os.write(fd, ("%x 10 " % (0x20000000 + i * 16) + "L" * size + "\n").encode())
    if "from" in args:
        with open(args["from"], "rb") as src:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                os.write(fd, chunk)
    if "sparse" in args:
        os.ftruncate(fd, args["sparse"])
    os.close(fd)
    return path


def parse_opts(argv):
    args = {}
    i = 0
    while i < len(argv):
        key, val = argv[i].lstrip("-"), argv[i + 1]
        if key == "long":
            n, size = val.split(":")
            args[key] = (int(n), int(size))
        elif key in ("from", "comm"):
            args[key] = val
        elif key == "hold":
            args[key] = float(val)
        else:
            args[key] = int(val)
        i += 2
    return args


def children(n, hold):
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            time.sleep(hold)
            os._exit(0)
        pids.append(pid)
        say("child", pid)
    for pid in pids:
        os.waitpid(pid, 0)


def cmd_mapfork(d, *rest):
    args = parse_opts(list(rest))
    if "comm" in args:
        name = bytes.fromhex(args["comm"])
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
    path = write_own_map(d, args)
    say("parent", os.getpid())
    time.sleep(0.05)  # the map is long written before the first fork
    children(args.get("children", 0), args.get("hold", 0.5))
    if "mtime" in args:
        os.utime(path, (args["mtime"], args["mtime"]))


def swap_once(path, secret, regular):
    tmp = path + ".swap"
    os.symlink(secret, tmp)
    os.rename(tmp, path)
    with open(tmp, "w") as f:
        f.write(regular)
    os.rename(tmp, path)


def cmd_swapfork(d, secret, seconds):
    seconds = float(seconds)
    path = map_path(d, os.getpid())
    regular = valid_lines(10, "attacker_swapped")
    with open(path, "w") as f:
        f.write(regular)
    say("parent", os.getpid())
    swapper = os.fork()
    if swapper == 0:
        n = 0
        end = time.monotonic() + seconds + 2.0
        while time.monotonic() < end:
            swap_once(path, secret, regular)
            n += 1
        say("swaps", n)
        os._exit(0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pid = os.fork()
        if pid == 0:
            time.sleep(0.3)
            os._exit(0)
        say("child", pid)
        time.sleep(0.02)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    # The swapper outlives this process: the archiver meets the race too.


def cmd_holders(d, n):
    for _ in range(int(n)):
        pid = os.fork()
        if pid == 0:
            fd = os.open(map_path(d, os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.write(fd, valid_lines(3, "holder").encode())
            os._exit(0)
        say("holder", pid)
        os.waitpid(pid, 0)


def dead_pids(count):
    """Pids without a process just below the last one given out: the kernel
    hands out pids upwards, so none of these is taken again before it wraps."""
    last = int(open("/proc/sys/kernel/ns_last_pid").read())
    out = []
    pid = last - 100
    while len(out) < count and pid > 300:
        if not os.path.exists("/proc/%d" % pid):
            out.append(pid)
        pid -= 1
    return out


def cmd_relist(d, seconds, others, trap_pid, rate="0"):
    for i in range(int(others)):
        open(os.path.join(d, "other.%d" % i), "w").close()
    own = os.path.join(d, "attacker-own")
    with open(own, "w") as f:
        f.write(valid_lines(5, "attacker_linked"))
    os.link(own, map_path(d, int(trap_pid)))
    pids = [p for p in dead_pids(500) if p != int(trap_pid)]
    say("others", others)
    n = i = 0
    start = time.monotonic()
    end = start + float(seconds)
    rate = float(rate)  # names a second; 0: as fast as it goes
    while time.monotonic() < end:
        if rate and n % 100 == 0:
            ahead = start + n / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        path = map_path(d, pids[i % len(pids)])
        i += 1
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except OSError:
            continue  # a process took the pid after all, and has its map there
        os.unlink(path)
        n += 1
    say("churn", n)


def cmd_flood(sock_path, seconds):
    ok = refused = 0
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock_path)
            s.recv(64)
            ok += 1
        except OSError:
            refused += 1
        finally:
            s.close()
    say("connected", ok)
    say("refused", refused)


def cmd_slowheaders(target, seconds, conns, *srcs):
    import select
    host, _, port = target.rpartition(":")
    host, port, conns = host or "127.0.0.1", int(port), int(conns)
    made = closed = 0
    longest = 0.0
    slots = [None] * conns          # [socket, connected at, next header at, n]
    again = [0.0] * conns           # when a closed slot connects again
    start = time.monotonic()
    end = start + float(seconds)

    def lost(i, now):
        nonlocal closed, longest
        s, t0 = slots[i][0], slots[i][1]
        longest = max(longest, now - t0)
        closed += 1
        s.close()
        slots[i] = None
        again[i] = now + 0.1

    while True:
        now = time.monotonic()
        if now >= end:
            break
        for i in range(conns):
            if slots[i] is None and now >= again[i]:
                s = socket.socket()
                try:
                    s.bind((srcs[i % len(srcs)], 0))
                    s.settimeout(2)
                    s.connect((host, port))
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                    s.setblocking(False)
                except OSError:
                    s.close()
                    again[i] = now + 0.1
                    continue
                made += 1
                slots[i] = [s, time.monotonic(), now + 2.0, 0]
        live = [i for i in range(conns) if slots[i] is not None]
        if live:
            ready = select.select([slots[i][0] for i in live], [], [], 0.05)[0]
        else:
            ready = []
            time.sleep(0.05)
        now = time.monotonic()
        for i in live:
            s = slots[i][0]
            if s in ready:
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    lost(i, now)
                    continue
            if now >= slots[i][2]:
                slots[i][3] += 1
                slots[i][2] = now + 2.0
                try:
                    s.send(b"X-Slow-%d: y\r\n" % slots[i][3])
                except OSError:
                    lost(i, now)
    now = time.monotonic()
    still = 0
    for i in range(conns):
        if slots[i] is not None:
            longest = max(longest, now - slots[i][1])
            still += 1
            slots[i][0].close()
    say("made", made)
    say("closed", closed)
    say("open_at_end", still)
    say("longest_s", "%.2f" % longest)


def main():
    cmds = {"mapfork": cmd_mapfork, "swapfork": cmd_swapfork, "holders": cmd_holders,
            "relist": cmd_relist, "flood": cmd_flood, "slowheaders": cmd_slowheaders}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
