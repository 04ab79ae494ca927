#!/usr/bin/env python3
"""A reference-protocol lock service that deviates from docs/protocol.md in one chosen way:
minimal_lockd.py's lock logic and store, with its lock answers changed on the way out.
tests/probe.rs runs `lockpick probe` and `lockpick run` against each deviation and expects
exit 3 with one line naming the request and the answer.

    --deviation string-token   the token as a JSON string: {"token": "5"}
    --deviation token-field    the token under another name: {"fence_token": 5}
    --deviation refuse-423     refusals answered 423 instead of 409
    --deviation grant-201      grants answered 201 instead of 200
    --deviation late-500       conforming for the first --after lock requests, then every
                               lock request answered 500 with an HTML page, unprocessed
    --deviation slow-grant     not a deviation: every 200 to an acquire sent --delay-ms after
                               the grant was made (legal: the lease counts from the request);
                               the probe must say the service answered slower than its lease

    python3 deviant_lockd.py --port 7000 --data-dir /tmp/d --deviation refuse-423
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minimal_lockd import Locks, Store, make_handler  # noqa: E402

DEVIATIONS = ("string-token", "token-field", "refuse-423", "grant-201", "late-500", "slow-grant")
HTML_500 = b"<html>\n<head><title>500 Internal Server Error</title></head>\n<body>oops</body>\n</html>\n"


def deviant_handler(locks, store, deviation, after, delay_ms=0):
    base = make_handler(locks, store)
    seen = {"lock_requests": 0}
    seen_lock = threading.Lock()

    class Handler(base):
        def do_POST(self):
            if deviation == "late-500" and "/v1/locks/" in self.path:
                with seen_lock:
                    seen["lock_requests"] += 1
                    broken = seen["lock_requests"] > after
                if broken:
                    # As a failing proxy in front of the service would: the request is read
                    # (so the connection stays usable) and never reaches the lock table.
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self.send_response(500)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(HTML_500)))
                    self.end_headers()
                    self.wfile.write(HTML_500)
                    return None
            return super().do_POST()

        def answer(self, status, body):
            if "/v1/locks/" not in self.path:
                return super().answer(status, body)
            if status == 200 and isinstance(body, dict) and "token" in body:
                if deviation == "string-token":
                    body = dict(body, token=str(body["token"]))
                elif deviation == "token-field":
                    body = dict(body)
                    body["fence_token"] = body.pop("token")
            if deviation == "refuse-423" and status == 409:
                status = 423
            if deviation == "grant-201" and status == 200 and self.path.endswith("/acquire"):
                status = 201
            if deviation == "slow-grant" and status == 200 and self.path.endswith("/acquire"):
                time.sleep(delay_ms / 1000.0)
            return super().answer(status, body)

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--deviation", choices=DEVIATIONS, required=True)
    ap.add_argument("--after", type=int, default=200,
                    help="late-500: lock requests answered well before the 500s start")
    ap.add_argument("--delay-ms", type=int, default=0,
                    help="slow-grant: how late each grant is answered")
    args = ap.parse_args()
    locks = Locks(args.data_dir)
    handler = deviant_handler(locks, Store(), args.deviation, args.after, args.delay_ms)
    server = ThreadingHTTPServer((args.host, args.port), handler)
    server.daemon_threads = True
    print(f"deviant_lockd ({args.deviation}) listening on {args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
