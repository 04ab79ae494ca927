#!/usr/bin/env python3
"""A minimal lock service (and fenced store) that speaks lockpick's reference protocol.

Written from docs/protocol.md alone, with the Python standard library only, to show what a
conforming service needs and to keep that document honest (tests/minimal_service.rs runs
lockpick against it and requires a `valid` verdict).

    python3 minimal_lockd.py --port 7000 --data-dir /tmp/minimal-lockd
    lockpick run --node-cmd 'python3 minimal_lockd.py --port {port} --data-dir {data_dir}' \
        --workload mutex --nemesis pause,kill

What makes it correct (each point is a section of docs/protocol.md):
- One lock table behind one mutex; a lease ends `ttl_ms` after the grant (or the last renew)
  on the monotonic clock.
- Tokens come from one counter, made durable (write, fsync, rename) before any grant uses
  them, in blocks, so they keep increasing across `kill -9`.
- Leases live only in memory. The longest ttl ever granted is durable too, and a restart that
  finds earlier state refuses every acquire with 409 `recovering` until any earlier lease is
  surely over.
- Every 200 is a JSON object, every refusal a 409 with `error`, bad input a 400.

The same process also serves the fenced store (`/v1/store/...`, fence mode `all`, in memory),
so it can be given to `--store-cmd` as well.
"""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

TTL_MS_MAX = 3_600_000
WAIT_MS_MAX = 60_000
NAME_BYTES_MAX = 256
BODY_BYTES_MAX = 16 * 1024
TOKEN_BLOCK = 1000  # tokens made durable per state-file write
STATE_FILE = "minimal-lockd-state.json"


class BadRequest(Exception):
    pass


class Locks:
    """The lock table. Every method runs under `self.cond`'s mutex."""

    def __init__(self, data_dir):
        self.cond = threading.Condition()
        self.path = os.path.join(data_dir, STATE_FILE)
        self.holders = {}  # lock -> (client, token, expires_at on time.monotonic())
        os.makedirs(data_dir, exist_ok=True)
        try:
            with open(self.path) as f:
                state = json.load(f)
            self.reserved = int(state["reserved_token"])
            self.max_ttl_ms = int(state["max_ttl_ms"])
            earlier = True
        except FileNotFoundError:
            self.reserved, self.max_ttl_ms, earlier = 1, 0, False
        # A state file we cannot read raises here: better not to start than to reuse tokens.
        self.next_token = self.reserved
        # Every lease an earlier incarnation granted is over once its longest ttl has passed;
        # 10% more covers a client whose clock runs a little slower than ours.
        wait_s = self.max_ttl_ms * 1.1 / 1000 if earlier else 0
        self.recovering_until = time.monotonic() + wait_s
        self.persist()  # fails now, not at the first grant, if the dir is not writable

    def persist(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"reserved_token": self.reserved, "max_ttl_ms": self.max_ttl_ms}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def make_durable(self, ttl_ms, new_token):
        """Before answering: the token about to be used and the ttl about to be promised."""
        changed = False
        if new_token and self.next_token >= self.reserved:
            self.reserved = self.next_token + TOKEN_BLOCK
            changed = True
        if ttl_ms > self.max_ttl_ms:
            self.max_ttl_ms = ttl_ms
            changed = True
        if changed:
            self.persist()

    def live(self, lock, now):
        h = self.holders.get(lock)
        return h if h is not None and now < h[2] else None

    def acquire(self, lock, client, ttl_ms, wait_ms):
        with self.cond:
            if time.monotonic() < self.recovering_until:
                return 409, {"error": "recovering"}
            deadline = time.monotonic() + min(wait_ms, WAIT_MS_MAX) / 1000
            while True:
                now = time.monotonic()
                holder = self.live(lock, now)
                if holder is None:
                    self.make_durable(ttl_ms, new_token=True)
                    token = self.next_token
                    self.next_token += 1
                    # The lease counts from now, after the request arrived.
                    self.holders[lock] = (client, token, time.monotonic() + ttl_ms / 1000)
                    return 200, {"token": token, "ttl_ms": ttl_ms}
                if now >= deadline:
                    return 409, {"error": "held"}
                # Woken by a release, or when the lease or the wait runs out.
                self.cond.wait(min(deadline, holder[2]) - now + 0.001)

    def renew(self, lock, client, token, ttl_ms):
        with self.cond:
            holder = self.live(lock, time.monotonic())
            if holder is None or holder[0] != client or holder[1] != token:
                return 409, {"error": "not-holder"}
            self.make_durable(ttl_ms, new_token=False)
            # Shorter or longer than before: the lease now ends ttl_ms from this renew.
            self.holders[lock] = (client, token, time.monotonic() + ttl_ms / 1000)
            return 200, {"token": token, "ttl_ms": ttl_ms}

    def release(self, lock, client, token):
        with self.cond:
            holder = self.live(lock, time.monotonic())
            if holder is None or holder[0] != client or holder[1] != token:
                return 409, {"error": "not-holder"}
            del self.holders[lock]
            self.cond.notify_all()
            return 200, {}


class Store:
    """The fenced store, mode `all`: reads and writes below the fence are refused."""

    def __init__(self):
        self.mutex = threading.Lock()
        self.registers = {}  # key -> [value, fence, seq]

    def read(self, key, token):
        with self.mutex:
            reg = self.registers.setdefault(key, [0, 0, 0])
            if token < reg[1]:
                return 409, {"error": "stale-token", "fence": reg[1]}
            reg[1] = token
            return 200, {"value": reg[0], "fence": reg[1]}

    def write(self, key, token, value):
        with self.mutex:
            reg = self.registers.setdefault(key, [0, 0, 0])
            if token < reg[1]:
                return 409, {"error": "stale-token", "fence": reg[1]}
            reg[1] = max(reg[1], token)
            reg[0] = value
            reg[2] += 1
            return 200, {"seq": reg[2], "fence": reg[1]}

    def inspect(self, key):
        with self.mutex:
            value, fence, seq = self.registers.get(key, [0, 0, 0])
            return 200, {"value": value, "fence": fence, "seq": seq}


def name(raw, what):
    n = unquote(raw)
    if not n or len(n.encode()) > NAME_BYTES_MAX:
        raise BadRequest(f"{what} name must be 1 to {NAME_BYTES_MAX} bytes")
    return n


def integer(body, field, lo, hi, default=None):
    v = body.get(field, default)
    # bool is an int in Python; JSON true is not a number.
    if v is None or isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise BadRequest(f"{field} must be an integer in {lo}..={hi}")
    return v


def client_of(body):
    c = body.get("client")
    if not isinstance(c, str) or not c or len(c.encode()) > NAME_BYTES_MAX:
        raise BadRequest(f"client must be a string of 1 to {NAME_BYTES_MAX} bytes")
    return c


U64 = 2**64 - 1
I64 = 2**63


def make_handler(locks, store):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: lockpick reuses its connections

        def log_message(self, fmt, *args):
            pass  # one line per request would flood the node's log

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def route(self):
            parts = self.path.split("?", 1)[0].split("/")
            # ['', 'v1', 'locks', '{lock}', 'acquire'] and the like.
            return parts[1:] if len(parts) > 1 and parts[0] == "" else []

        def do_GET(self):
            p = self.route()
            if p == ["v1", "health"]:
                return self.answer(200, {"ok": True})
            if p == ["v1", "time"]:
                return self.answer(200, {
                    "realtime_ms": int(time.time() * 1000),
                    "monotonic_ms": int(time.monotonic() * 1000),
                })
            if len(p) == 3 and p[:2] == ["v1", "store"]:
                try:
                    return self.answer(*store.inspect(name(p[2], "key")))
                except BadRequest as e:
                    return self.answer(400, {"error": f"bad-request: {e}"})
            self.answer(404, {"error": "not-found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > BODY_BYTES_MAX:
                self.close_connection = True
                return self.answer(413, {"error": "bad-request: body too large"})
            raw = self.rfile.read(length)  # read it all, so the next request on the connection parses
            p = self.route()
            if len(p) != 4 or p[0] != "v1" or (p[1], p[3]) not in OPS:
                return self.answer(404, {"error": "not-found"})
            try:
                body = json.loads(raw or b"null")
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
                self.answer(*OPS[(p[1], p[3])](body, p[2]))
            except (BadRequest, ValueError) as e:
                self.answer(400, {"error": f"bad-request: {e}"})

    def acquire(b, n):
        return locks.acquire(name(n, "lock"), client_of(b), integer(b, "ttl_ms", 1, TTL_MS_MAX),
                             integer(b, "wait_ms", 0, U64, default=0))

    def renew(b, n):
        return locks.renew(name(n, "lock"), client_of(b), integer(b, "token", 0, U64),
                           integer(b, "ttl_ms", 1, TTL_MS_MAX))

    def release(b, n):
        return locks.release(name(n, "lock"), client_of(b), integer(b, "token", 0, U64))

    def read(b, n):
        client_of(b)
        return store.read(name(n, "key"), integer(b, "token", 0, U64))

    def write(b, n):
        client_of(b)
        return store.write(name(n, "key"), integer(b, "token", 0, U64),
                           integer(b, "value", -I64, I64 - 1))

    OPS = {
        ("locks", "acquire"): acquire,
        ("locks", "renew"): renew,
        ("locks", "release"): release,
        ("store", "read"): read,
        ("store", "write"): write,
    }
    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data-dir", required=True, help="where the token counter survives restarts")
    args = ap.parse_args()
    locks = Locks(args.data_dir)  # load state before listening: health means ready
    server = ThreadingHTTPServer((args.host, args.port), make_handler(locks, Store()))
    server.daemon_threads = True
    left_s = max(0.0, locks.recovering_until - time.monotonic())
    print(f"minimal_lockd listening on {args.host}:{args.port}, next token {locks.next_token}"
          + (f", recovering for {left_s:.1f} s" if left_s else ""), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
