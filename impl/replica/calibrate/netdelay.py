#!/usr/bin/env python3
"""One-way delay between two processes over loopback TCP on this machine
(half the round trip of a 32-byte ping-pong, TCP_NODELAY, one exchange per
0.5 ms), as the simulator's network delay stands for it: a minimum plus an
exponential part. Prints one JSON line.

  impl/replica/calibrate/netdelay.py [--port 7790] [--n 3000]
"""

import argparse
import json
import os
import socket
import statistics
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=7790)
    ap.add_argument("--n", type=int, default=3000)
    a = ap.parse_args()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", a.port))
    srv.listen(1)
    pid = os.fork()
    if pid == 0:
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            d = c.recv(64)
            if not d:
                os._exit(0)
            c.sendall(d)
    s = socket.create_connection(("127.0.0.1", a.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    one_way = []
    for _ in range(a.n):
        t = time.perf_counter_ns()
        s.sendall(b"x" * 32)
        s.recv(64)
        one_way.append((time.perf_counter_ns() - t) / 2e3)
        time.sleep(0.0005)
    s.close()
    os.waitpid(pid, 0)
    one_way.sort()
    q = lambda p: one_way[int(p * (len(one_way) - 1))]
    mean = statistics.mean(one_way)
    with open("/proc/loadavg") as f:
        load = float(f.read().split()[0])
    print(json.dumps({"min_us": round(q(0), 1), "p50_us": round(q(0.5), 1), "mean_us": round(mean, 1),
                      "p99_us": round(q(0.99), 1), "net_min_us": int(q(0)), "net_extra_us": round(mean - q(0), 1),
                      "loadavg": load}))


if __name__ == "__main__":
    main()
