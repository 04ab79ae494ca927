#!/usr/bin/env python3
"""A reference-protocol lock service that is correct, or has one bug a real service has.

minimal_lockd.py's lock table with each decision a lock service gets wrong made switchable:
without `--bug` it follows docs/protocol.md (valid under every fault); `--bug NAME` makes
exactly that one mistake. A line each: the bug, the fault that exposes it, what lockpick finds
(all with --workload mutex --ttl 1s --hold 50ms..600ms --nemesis-interval 1s, 15 s runs):

  wall-clock-expiry   leases timed on time.time(): clock, bump-forward (double-grant)
  volatile-tokens     tokens counted in memory only, 1 again after a restart: kill (token-regressed)
  no-recovery         grants at once after a restart, no `recovering` window: kill (double-grant)
  renew-after-grant   renews a superseded lease found by its token: client-pause next-grant,renew
                      (stale-renew-accepted)
  release-any         a release frees the lock whoever holds it: client-pause long,release
                      (stale-release-accepted, double-grant)
  grant-expired-wait  a waited grant's lease counts from the request's arrival: contention alone,
                      --nemesis none (double-grant, by token order)
  clock-tokens        the token is the wall clock in ms since the epoch: clock, bump-back
                      (token-regressed; two grants in one ms also reuse a token)
  ttl-unit            the lease is ttl_ms // 1000 whole seconds (at least 1): --ttl 1900ms with
                      client-pause boundary (double-grant); whole-second ttls hide it

ttl-unit is the mistake of a service whose lease store takes seconds (Redis EXPIRE, an etcd
lease): the ms are floored to whole seconds, while the answer still promises the ttl asked.
grant-expired-wait is caught because a grant takes effect only once the lock is free
(docs/checkers.md, model rules 2 and 3), so its lease cannot begin before the previous holder's
span ended; with --acquire-wait 0 nothing waits and the bug is hidden.

    python3 flawed_lockd.py --port 7000 --data-dir /tmp/flawed --bug no-recovery

The store (`/v1/store/...`) is minimal_lockd.py's, always correct.
"""

import argparse
import os
import sys
import time
from http.server import ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minimal_lockd import WAIT_MS_MAX, Locks, Store, make_handler  # noqa: E402

BUGS = (
    "wall-clock-expiry",
    "volatile-tokens",
    "no-recovery",
    "renew-after-grant",
    "release-any",
    "grant-expired-wait",
    "clock-tokens",
    "ttl-unit",
)


class FlawedLocks(Locks):
    """minimal_lockd's Locks with one bug (or none). Holders are (client, token, expires_at),
    expires_at on `lease_clock()`; every method runs under `self.cond`'s mutex."""

    def __init__(self, data_dir, bug=None):
        self.bug = bug
        # renew-after-grant: every lease ever granted, (lock, token) -> client, never pruned.
        self.granted = {}
        super().__init__(data_dir)  # loads the state file, persists, sets the recovery window
        if bug == "volatile-tokens":
            self.next_token = 1  # the counter was never written down, so it starts over
        if bug == "no-recovery":
            self.recovering_until = 0.0

    def lease_clock(self):
        return time.time() if self.bug == "wall-clock-expiry" else time.monotonic()

    def lease_s(self, ttl_ms):
        if self.bug == "ttl-unit":
            return max(1, ttl_ms // 1000)  # the timer takes whole seconds
        return ttl_ms / 1000

    def make_durable(self, ttl_ms, new_token):
        # volatile-tokens and clock-tokens write no token down; the longest ttl still is.
        if self.bug in ("volatile-tokens", "clock-tokens"):
            new_token = False
        super().make_durable(ttl_ms, new_token)

    def take_token(self):
        if self.bug == "clock-tokens":
            return int(time.time() * 1000)
        token = self.next_token
        self.next_token += 1
        return token

    def live(self, lock, now):
        h = self.holders.get(lock)
        return h if h is not None and now < h[2] else None

    def acquire(self, lock, client, ttl_ms, wait_ms):
        with self.cond:
            arrived = self.lease_clock()
            if time.monotonic() < self.recovering_until:
                return 409, {"error": "recovering"}
            deadline = time.monotonic() + min(wait_ms, WAIT_MS_MAX) / 1000
            while True:
                holder = self.live(lock, self.lease_clock())
                if holder is None:
                    self.make_durable(ttl_ms, new_token=True)
                    token = self.take_token()
                    start = arrived if self.bug == "grant-expired-wait" else self.lease_clock()
                    self.holders[lock] = (client, token, start + self.lease_s(ttl_ms))
                    if self.bug == "renew-after-grant":
                        self.granted[(lock, token)] = client
                    return 200, {"token": token, "ttl_ms": ttl_ms}
                left = deadline - time.monotonic()
                if left <= 0:
                    return 409, {"error": "held"}
                # Woken by a release, or when the lease or the wait runs out.
                self.cond.wait(min(left, holder[2] - self.lease_clock()) + 0.001)

    def renew(self, lock, client, token, ttl_ms):
        with self.cond:
            holder = self.live(lock, self.lease_clock())
            if holder is None or holder[0] != client or holder[1] != token:
                if self.bug == "renew-after-grant" and self.granted.get((lock, token)) == client:
                    # The lease record is found and extended; nobody asks whether it is still
                    # the lock's current lease.
                    self.make_durable(ttl_ms, new_token=False)
                    return 200, {"token": token, "ttl_ms": ttl_ms}
                return 409, {"error": "not-holder"}
            self.make_durable(ttl_ms, new_token=False)
            self.holders[lock] = (client, token, self.lease_clock() + self.lease_s(ttl_ms))
            return 200, {"token": token, "ttl_ms": ttl_ms}

    def release(self, lock, client, token):
        with self.cond:
            holder = self.live(lock, self.lease_clock())
            if holder is None:
                return 409, {"error": "not-holder"}
            if self.bug != "release-any" and (holder[0] != client or holder[1] != token):
                return 409, {"error": "not-holder"}
            del self.holders[lock]
            self.cond.notify_all()
            return 200, {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data-dir", required=True, help="where the token counter survives restarts")
    ap.add_argument("--bug", metavar="NAME", help="one of: " + ", ".join(BUGS))
    args = ap.parse_args()
    if args.bug is not None and args.bug not in BUGS:
        print(f"flawed_lockd.py: unknown --bug {args.bug!r} (known: {', '.join(BUGS)})",
              file=sys.stderr)
        sys.exit(2)
    locks = FlawedLocks(args.data_dir, args.bug)  # load state before listening: health means ready
    server = ThreadingHTTPServer((args.host, args.port), make_handler(locks, Store()))
    server.daemon_threads = True
    left_s = max(0.0, locks.recovering_until - time.monotonic())
    print(f"flawed_lockd ({args.bug or 'correct'}) listening on {args.host}:{args.port}, "
          f"next token {locks.next_token}"
          + (f", recovering for {left_s:.1f} s" if left_s else ""), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
