#!/usr/bin/env python3
"""Write a small perf.data file, as `perf record` lays one out, for perfmapctl restore's tests.

  mkperfdata.py OUT [--comm PID NAME] [--mmap2 PID START LEN PROT NAME] [--mmap PID START LEN NAME]
                    [--fork CHILD PARENT] [--sample PID IP] [--clock WALL_NS] [--compressed]
                    [--data-size-zero]

Repeatable options become records in the order given. --clock adds HEADER_CLOCK_DATA;
--compressed a PERF_RECORD_COMPRESSED; --data-size-zero leaves the header's data size 0, as a
perf record that was not stopped cleanly does. Layout: tools/perf/Documentation/perf.data-file-format.txt.
"""
import struct
import sys

MAGIC = 0x32454C4946524550  # "PERFILE2"
HEADER_SIZE = 104
ATTR_SIZE = 128
SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME, SAMPLE_PERIOD = 1, 2, 4, 256
HEADER_CLOCK_DATA = 29


def rec(rtype, body, misc=0):
    body += b"\0" * (-len(body) % 8)
    return struct.pack("<IHH", rtype, misc, 8 + len(body)) + body


def cstr(s):
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 8)


def main(argv):
    out, args = argv[1], argv[2:]
    records, clock, size_zero = [], None, False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--comm":
            pid, name = int(args[i + 1]), args[i + 2]
            records.append(rec(3, struct.pack("<II", pid, pid) + cstr(name)))
            i += 3
        elif a == "--mmap2":
            pid, start, length, prot, name = (int(args[i + 1]), int(args[i + 2], 0),
                                              int(args[i + 3], 0), int(args[i + 4]), args[i + 5])
            body = struct.pack("<IIQQQIIQQII", pid, pid, start, length, 0, 0, 0, 0, 0, prot, 0x22)
            records.append(rec(10, body + cstr(name), misc=2))
            i += 6
        elif a == "--mmap":
            pid, start, length, name = int(args[i + 1]), int(args[i + 2], 0), int(args[i + 3], 0), args[i + 4]
            records.append(rec(1, struct.pack("<IIQQQ", pid, pid, start, length, 0) + cstr(name), misc=2))
            i += 5
        elif a == "--fork":
            child, parent = int(args[i + 1]), int(args[i + 2])
            records.append(rec(7, struct.pack("<IIIIQ", child, parent, child, parent, 0)))
            i += 3
        elif a == "--sample":
            pid, ip = int(args[i + 1]), int(args[i + 2], 0)
            # sample_type IP|TID|TIME|PERIOD: ip, pid, tid, time, period
            records.append(rec(9, struct.pack("<QIIQQ", ip, pid, pid, 0, 1), misc=2))
            i += 3
        elif a == "--clock":
            clock = int(args[i + 1])
            i += 2
        elif a == "--compressed":
            records.append(rec(81, b"\x28\xb5\x2f\xfd" + b"\0" * 12))
            i += 1
        elif a == "--data-size-zero":
            size_zero = True
            i += 1
        else:
            sys.exit("mkperfdata.py: unknown option " + a)

    # One attribute: cpu-clock:u, sample_type IP|TID|TIME|PERIOD, no ids.
    attr = struct.pack("<IIQQQQQ", 1, ATTR_SIZE - 16, 0, 4000,
                       SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_PERIOD, 0, (1 << 8) | (1 << 9))
    attr += b"\0" * (ATTR_SIZE - 16 - len(attr))
    attrs_off = HEADER_SIZE
    ids_section = struct.pack("<QQ", 0, 0)
    attrs = attr + ids_section
    data_off = attrs_off + len(attrs)
    data = b"".join(records)
    feat_off = data_off + len(data)
    features = [0, 0, 0, 0]
    feat_sections, feat_data = b"", b""
    if clock is not None:
        features[HEADER_CLOCK_DATA // 64] |= 1 << (HEADER_CLOCK_DATA % 64)
        payload = struct.pack("<IIQQ", 1, 1, clock, 0)
        feat_sections = struct.pack("<QQ", feat_off + 16, len(payload))
        feat_data = payload
    header = struct.pack("<QQQQQQQQQ", MAGIC, HEADER_SIZE, ATTR_SIZE, attrs_off, len(attrs),
                         data_off, 0 if size_zero else len(data), 0, 0)
    header += struct.pack("<4Q", *features)
    with open(out, "wb") as f:
        f.write(header + attrs + data + (b"" if size_zero else feat_sections + feat_data))


if __name__ == "__main__":
    main(sys.argv)
