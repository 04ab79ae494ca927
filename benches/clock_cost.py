#!/usr/bin/env python3
"""What a clock backend costs the service under test: p50 request latency of the Python
stand-in lock service (tests/services/standin_lockd.py, a ThreadingHTTPServer) under 5
concurrent clients, with its clocks true (plain), patched through the vDSO with a +10 s wall
offset set (vdso), and under libfaketime as lockpick preloads it for --clock-scope wall
(faketime: FAKETIME_NO_CACHE=1, FAKETIME_DONT_FAKE_MONOTONIC=1, control file "+10").

    python3 benches/clock_cost.py [--vclock target/debug/vclock] [--rounds 3] [--seconds 5]
                                  [--request health|lease] [--modes plain,vdso,faketime]

Modes run interleaved, round after round, each against a fresh service; each client is its
own process (GET /healthz in a loop, or acquire then release of its own lock). Prints one line per run and
the median p50 per mode.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICE = os.path.join(ROOT, "tests", "services", "standin_lockd.py")
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
CLIENTS = 5
STARTUP_S = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(port, lock, seconds, request, out):
    """Acquire and release `lock` (request "lease"), or GET /healthz (request "health"), in a
    loop for `seconds`; the latencies (ms) go to `out`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    lat = []
    end = time.monotonic() + seconds
    owner = "c%d" % lock
    while request == "health" and time.monotonic() < end:
        # A connection per request: the service writes headers and body apart, and on a kept
        # connection Nagle's algorithm then waits out the client's delayed ACK (40 ms).
        t = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/healthz", headers={"Connection": "close"})
        c.getresponse().read()
        c.close()
        lat.append((time.perf_counter() - t) * 1000)
    while request == "lease" and time.monotonic() < end:
        body = json.dumps({"owner": owner, "lease_ms": 5000, "wait_ms": 0})
        t = time.perf_counter()
        conn.request("PUT", "/leases/L%d" % lock, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        answer = json.loads(r.read() or b"{}")
        lat.append((time.perf_counter() - t) * 1000)
        fence = answer.get("fence")
        t = time.perf_counter()
        conn.request("DELETE", "/leases/L%d?owner=%s&fence=%s" % (lock, owner, fence))
        conn.getresponse().read()
        lat.append((time.perf_counter() - t) * 1000)
    out.put(lat)


def run(mode, vclock, seconds, request):
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if mode == "faketime":
            ctl = os.path.join(tmp, "faketime.ctl")
            with open(ctl, "w") as f:
                f.write("+10\n")
            env.update(LD_PRELOAD=LIBFAKETIME, FAKETIME_TIMESTAMP_FILE=ctl,
                       FAKETIME_NO_CACHE="1", FAKETIME_DONT_FAKE_MONOTONIC="1")
        svc = subprocess.Popen([sys.executable, SERVICE, "--port", str(port),
                                "--data-dir", os.path.join(tmp, "data")], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + STARTUP_S
            while True:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                    c.request("GET", "/healthz")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the stand-in service did not start")
                time.sleep(0.05)
            if mode == "vdso":
                page = os.path.join(tmp, "clock.page")
                subprocess.run([vclock, "patch", str(svc.pid), page], check=True,
                               stdout=subprocess.DEVNULL)
                subprocess.run([vclock, "set", page, "10", "1", "wall"], check=True)
            out = multiprocessing.Queue()
            procs = [multiprocessing.Process(target=client, args=(port, i, seconds, request, out))
                     for i in range(CLIENTS)]
            for p in procs:
                p.start()
            lat = []
            for _ in procs:
                lat.extend(out.get(timeout=seconds + 30))
            for p in procs:
                p.join(timeout=10)
        finally:
            svc.kill()
            svc.wait()
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.95)], len(lat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vclock", default=os.path.join(ROOT, "target", "debug", "vclock"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--modes", default="plain,vdso,faketime")
    ap.add_argument("--request", choices=["health", "lease"], default="health",
                    help="health: GET /healthz (no disk); lease: acquire + release (each "
                         "grant fsyncs its token, which dominates)")
    a = ap.parse_args()
    modes = a.modes.split(",")
    p50s = {m: [] for m in modes}
    for r in range(a.rounds):
        for m in modes:
            p50, p95, n = run(m, a.vclock, a.seconds, a.request)
            p50s[m].append(p50)
            print("round %d %-8s p50 %7.3f ms  p95 %7.3f ms  requests %d" % (r + 1, m, p50, p95, n),
                  flush=True)
    for m in modes:
        print("%-8s median p50 %.3f ms" % (m, statistics.median(p50s[m])))


if __name__ == "__main__":
    main()
