#!/usr/bin/env python3
"""A stand-in lock service whose API is not lockpick's reference protocol: leases on paths,
`fence` for the token, 201/423/412/204 for the answers, a query string for release.

lockpick drives it through its own native adapter (workloads/src/standin.rs, `--adapter
standin`), which is there to prove that a new service is one adapter file plus one registration
line (tests/standin.rs). The lock logic is minimal_lockd.py's (durable tokens, `recovering`
after a restart); only the HTTP surface differs:

    GET    /healthz                               200 ok
    PUT    /leases/{lock}            {"owner", "lease_ms", "wait_ms"}
                                     201 {"fence", "lease_ms"} | 423 {"reason"}
    POST   /leases/{lock}/keepalive  {"owner", "fence", "lease_ms"}
                                     200 {"fence", "lease_ms"} | 412 {"reason"}
    DELETE /leases/{lock}?owner=O&fence=F          204 | 412 {"reason"}

    python3 standin_lockd.py --port 7000 --data-dir /tmp/standin
"""

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minimal_lockd import TTL_MS_MAX, Locks  # noqa: E402

BODY_BYTES_MAX = 16 * 1024


def translate(status, body, ok_status):
    """minimal_lockd's (200 | 409, body) as this API's answer."""
    if status == 200:
        out = {}
        if "token" in body:
            out["fence"] = body["token"]
        if "ttl_ms" in body:
            out["lease_ms"] = body["ttl_ms"]
        return ok_status, out
    if status == 409:
        refused = 423 if ok_status == 201 else 412
        return refused, {"reason": body.get("error", "refused")}
    return status, body


def make_handler(locks):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def answer(self, status, body=None):
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def parts(self):
            return [unquote(p) for p in urlsplit(self.path).path.split("/")[1:]]

        def body(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > BODY_BYTES_MAX:
                raise ValueError("body too large")
            body = json.loads(self.rfile.read(length) or b"null")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            return body

        def do_GET(self):
            if self.parts() == ["healthz"]:
                return self.answer(200, "ok")
            self.answer(404, {"reason": "not-found"})

        def do_PUT(self):
            p = self.parts()
            try:
                b = self.body()
                if len(p) != 2 or p[0] != "leases":
                    return self.answer(404, {"reason": "not-found"})
                lease = min(int(b["lease_ms"]), TTL_MS_MAX)
                got = locks.acquire(p[1], str(b["owner"]), lease, int(b.get("wait_ms", 0)))
                self.answer(*translate(*got, 201))
            except (ValueError, KeyError, TypeError) as e:
                self.answer(400, {"reason": f"bad-request: {e}"})

        def do_POST(self):
            p = self.parts()
            try:
                b = self.body()
                if len(p) != 3 or p[0] != "leases" or p[2] != "keepalive":
                    return self.answer(404, {"reason": "not-found"})
                lease = min(int(b["lease_ms"]), TTL_MS_MAX)
                got = locks.renew(p[1], str(b["owner"]), int(b["fence"]), lease)
                self.answer(*translate(*got, 200))
            except (ValueError, KeyError, TypeError) as e:
                self.answer(400, {"reason": f"bad-request: {e}"})

        def do_DELETE(self):
            p = self.parts()
            q = parse_qs(urlsplit(self.path).query)
            try:
                if len(p) != 2 or p[0] != "leases":
                    return self.answer(404, {"reason": "not-found"})
                status, body = locks.release(p[1], q["owner"][0], int(q["fence"][0]))
                if status == 200:
                    return self.answer(204)
                self.answer(*translate(status, body, 204))
            except (ValueError, KeyError, IndexError) as e:
                self.answer(400, {"reason": f"bad-request: {e}"})

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data-dir", required=True)
    args = ap.parse_args()
    locks = Locks(args.data_dir)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(locks))
    server.daemon_threads = True
    print(f"standin_lockd listening on {args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
