#!/usr/bin/env python3
"""N idle keep-alive clients of a running `gputune serve`, then a new client's request, timed.

Each of the N connections sends one GET and reads its answer, then stays open (idle, as a
browser's are between requests). Before web/connection_pool.h, 8 of them (the daemon's request
threads) held back every new client for up to the keep-alive timeout (5 s).
Usage: bench/idle_clients.py PORT N [PATH]   (PATH: /api/runs by default)
"""
import http.client
import socket
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    port, n = int(sys.argv[1]), int(sys.argv[2])
    path = sys.argv[3] if len(sys.argv) > 3 else "/api/runs"
    idle = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        s.recv(65536)
        idle.append(s)
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    print(f"{n} idle keep-alive connections; a new client's request took "
          f"{time.monotonic() - t:.3f} s ({r.status})")


if __name__ == "__main__":
    main()
