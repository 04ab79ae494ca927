#!/usr/bin/env python3
"""A correct reference-protocol lock service that answers grants slowly: minimal_lockd.py's
lock logic and store, with every 200 to an acquire held back --grant-delay-ms after the grant
was made. Legal (the lease counts from the request, so it may be over by the time the answer
arrives); tests/probe.rs expects `lockpick probe` to say the service answered slower than its
lease, not to refuse it as a protocol deviation.

    python3 slow_lockd.py --port 7000 --data-dir /tmp/d --grant-delay-ms 700
"""

import argparse
import os
import sys
import time
from http.server import ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minimal_lockd import Locks, Store, make_handler  # noqa: E402


def slow_handler(locks, store, delay_s):
    base = make_handler(locks, store)

    class Handler(base):
        def answer(self, status, body):
            if status == 200 and self.path.startswith("/v1/locks/") and self.path.endswith("/acquire"):
                time.sleep(delay_s)
            return super().answer(status, body)

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--grant-delay-ms", type=int, required=True)
    args = ap.parse_args()
    handler = slow_handler(Locks(args.data_dir), Store(), args.grant_delay_ms / 1000.0)
    server = ThreadingHTTPServer((args.host, args.port), handler)
    server.daemon_threads = True
    print(f"slow_lockd (grants answered {args.grant_delay_ms} ms late) listening on "
          f"{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
