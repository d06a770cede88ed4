#!/usr/bin/env python3
# bench-profile's stand-in for a Pyroscope server: takes every POST, answers 200, counts what came.
#
#   push_sink.py serve PORTFILE LOG   listen on 127.0.0.1, an ephemeral port (written to PORTFILE
#                                     once listening); a line per request to LOG:
#                                     "<body bytes> <series> <pprof samples>"
#   push_sink.py count FILE.pb.gz...  the pprof samples (distinct stacks) in each file, one a line
#
# It decodes only what the counts need: a PushRequest's series, each RawSample's gzipped pprof,
# the pprof's top-level samples. It is not what the benchmark measures, and checks nothing a
# real server does (tests/profile/receiver/ does).
import gzip
import http.server
import os
import sys


def fields(buf):
    """(field number, wire type, value) of each top-level field of a protobuf message."""
    i, n = 0, len(buf)

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < n:
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            yield num, wt, varint()
        elif wt == 1:
            i += 8
        elif wt == 2:
            ln = varint()
            yield num, wt, buf[i:i + ln]
            i += ln
        elif wt == 5:
            i += 4
        else:
            raise ValueError("wire type %d" % wt)


def pprof_samples(raw):
    """Profile.sample (field 2) entries: one per distinct stack perfmapctl wrote."""
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return sum(1 for num, wt, _ in fields(raw) if num == 2 and wt == 2)


def push_counts(body):
    """PushRequest: series (1) of RawProfileSeries, their samples (2) of RawSample, raw_profile (1)."""
    series = samples = 0
    for num, wt, s in fields(body):
        if num != 1 or wt != 2:
            continue
        series += 1
        for snum, swt, raw in fields(s):
            if snum == 2 and swt == 2:
                for rnum, rwt, prof in fields(raw):
                    if rnum == 1 and rwt == 2:
                        samples += pprof_samples(prof)
    return series, samples


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as a server libcurl reuses its connection to
    log_path = None

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            series, samples = push_counts(body)
        except (ValueError, IndexError, OSError, EOFError):
            series, samples = -1, -1   # not a PushRequest: said in the log, answered all the same
        with open(self.log_path, "a") as f:
            f.write("%d %d %d\n" % (len(body), series, samples))
        # Connect's unary answer: an empty PushResponse.
        self.send_response(200)
        self.send_header("Content-Type", "application/proto")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "count":
        for path in sys.argv[2:]:
            with open(path, "rb") as f:
                print(pprof_samples(f.read()))
        return
    if len(sys.argv) != 4 or sys.argv[1] != "serve":
        sys.exit("usage: push_sink.py serve PORTFILE LOG | count FILE.pb.gz...")
    Sink.log_path = sys.argv[3]
    srv = http.server.HTTPServer(("127.0.0.1", 0), Sink)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    srv.serve_forever()


if __name__ == "__main__":
    main()
