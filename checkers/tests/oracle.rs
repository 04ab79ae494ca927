//! The ground-truth oracle and the property that the fast checkers agree with it.
//!
//! The oracle is a brute-force reading of the model in docs/checkers.md, written without any of
//! the checkers' code: a history is possible for a correct lease-lock service when, lock by
//! lock, some order of effect points exists in which every op takes effect at one instant
//! inside its `[invoke, complete]` window (an indeterminate op up to its completion, one that
//! never completed at any time after its invoke, or neither of them at all; a failed op never),
//! every grant finds the lock free or its lease expired and carries a token above every earlier
//! known one, and every accepted renew or release names the current lease.
//!
//! Why searching orders is searching instants: for one order, every constraint says that a
//! later effect point comes no earlier than an earlier one (plus a lease's lower bound), so the
//! earliest instants that fit the windows are the best any service could pick; and expiring a
//! lease exactly at its lower bound only ever makes more grants legal. Trying every order
//! (with memo of the states already seen) with earliest instants is therefore exact.
//!
//! The property: on at least 20,000 small random histories per run (renewals with shorter and
//! longer ttls, gaps past the lease's bound, slow replies, indeterminate and never-completed
//! ops, releases with and without tokens, crashed clients, one or two locks, drift, and a
//! seeded service that is correct or has one bug), the fast checkers report a safety violation
//! exactly when the oracle finds the history impossible. A disagreement prints the smallest
//! history (ops removed one at a time while the disagreement stays) that still shows it.

use checkers::CheckConfig;
use history::{History, Op, OpType, OpValue, Outcome, Process, ViolationKind, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashSet};

/// The safety kinds the oracle's model decides (store kinds need store ops, which these
/// histories do not have; `grant-on-expired-lease` needs adapter evidence).
const LOCK_SAFETY: [ViolationKind; 5] = [
    ViolationKind::DoubleGrant,
    ViolationKind::TokenReused,
    ViolationKind::TokenRegressed,
    ViolationKind::StaleReleaseAccepted,
    ViolationKind::StaleRenewAccepted,
];

// ---------------------------------------------------------------------------------------------
// The oracle

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Acquire,
    Renew,
    Release,
}

/// What the history says of one name of a grant (its token, or the service's grant id): not
/// known (the acquire's answer was lost: it matches any name), or known, present or absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Known<T> {
    Unknown,
    Is(Option<T>),
}

#[derive(Debug, Clone)]
struct LockOp {
    process: u64,
    kind: Kind,
    /// `Ok` must take effect; `Info` and `Pending` may.
    must: bool,
    invoke_ns: u64,
    /// The latest instant it can take effect: its completion, or never-ending when pending.
    latest_ns: u64,
    /// An acquire: the token its `ok` carried (`None` for a tokenless grant). A renew or
    /// release: the token it names.
    token: Option<u64>,
    /// The same for the service's grant id (`value.grant`), interned per lock.
    grant: Option<u32>,
    /// An acquire whose answer came: its token and grant id are known (present or absent).
    answered: bool,
    /// The ttl it set (D6: a lost answer's is the one answered requests for as long got).
    ttl_ms: Option<u64>,
    /// An ok acquire whose lease was set before it (`value.lease_from_ns`).
    lease_from_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Lease {
    process: u64,
    token: Known<u64>,
    grant: Known<u32>,
    /// The grant's ttl: a renew that names none renews for as long.
    ttl_ms: Option<u64>,
    /// The instant the lease is allowed to expire.
    expires_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct State {
    next: Vec<u8>,
    lease: Option<Lease>,
    max_token: Option<u64>,
    now_ns: u64,
}

/// D8: drift as whole parts per million, the way `CheckConfig`'s `f64` is read.
fn ppm(drift: f64) -> u64 {
    ((drift * 1e6).round() as u64).min(1_000_000)
}

/// `ttl*(1-drift)` in ns, exactly: the model's lower bound of a lease.
fn lower_ns(ttl_ms: Option<u64>, ppm: u64) -> u64 {
    ttl_ms.map_or(0, |t| t * (1_000_000 - ppm))
}

/// D6: for each requested ttl, the shortest ttl the service granted to an answered acquire or
/// renew that asked for it.
fn granted_ttls(h: &History) -> BTreeMap<u64, u64> {
    let mut out: BTreeMap<u64, u64> = BTreeMap::new();
    for o in h.operations() {
        let inv = h.invoke_of(o);
        if o.outcome != Outcome::Ok || !matches!(inv.f, F::Acquire | F::Renew) {
            continue;
        }
        let (Some(asked), Some(got)) = (
            inv.value.ttl_ms,
            h.complete_of(o).and_then(|d| d.value.ttl_ms),
        ) else {
            continue;
        };
        let e = out.entry(asked).or_insert(got);
        *e = (*e).min(got);
    }
    out
}

/// Whether some execution of a correct service produces `h`'s lock ops.
fn feasible(h: &History, drift: f64) -> bool {
    let granted = granted_ttls(h);
    let mut ids: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let mut by_lock: BTreeMap<&str, BTreeMap<u64, Vec<LockOp>>> = BTreeMap::new();
    for o in h.operations() {
        let inv = h.invoke_of(o);
        let done = h.complete_of(o);
        let kind = match inv.f {
            F::Acquire => Kind::Acquire,
            F::Renew => Kind::Renew,
            F::Release => Kind::Release,
            _ => continue,
        };
        // A refused op changed nothing.
        if o.outcome == Outcome::Fail {
            continue;
        }
        let Some(lock) = inv.lock.as_deref() else {
            continue;
        };
        let ok_value = done.filter(|_| o.outcome == Outcome::Ok).map(|d| &d.value);
        let (token, grant) = match kind {
            Kind::Acquire => (
                ok_value.and_then(|v| v.token),
                ok_value.and_then(|v| v.grant()),
            ),
            _ => (
                inv.value.token.or(done.and_then(|d| d.value.token)),
                inv.value.grant().or(done.and_then(|d| d.value.grant())),
            ),
        };
        let next_id = ids.len() as u32;
        let grant = grant.map(|g| *ids.entry((lock, g)).or_insert(next_id));
        let ttl_ms = match ok_value.and_then(|v| v.ttl_ms) {
            Some(t) => Some(t),
            None => inv
                .value
                .ttl_ms
                .map(|asked| granted.get(&asked).copied().unwrap_or(asked)),
        };
        let lease_from_ns = ok_value
            .and_then(|v| v.extra.get("lease_from_ns"))
            .and_then(serde_json::Value::as_u64);
        let p = inv.process.client().expect("client op");
        by_lock
            .entry(lock)
            .or_default()
            .entry(p)
            .or_default()
            .push(LockOp {
                process: p,
                kind,
                must: o.outcome == Outcome::Ok,
                invoke_ns: inv.time_ns,
                latest_ns: done.map_or(u64::MAX, |d| d.time_ns),
                token,
                grant,
                answered: ok_value.is_some(),
                ttl_ms,
                lease_from_ns,
            });
    }
    let ppm = ppm(drift);
    by_lock.values().all(|procs| {
        let procs: Vec<Vec<LockOp>> = procs.values().cloned().collect();
        let answered_ids = procs
            .iter()
            .flatten()
            .filter(|o| o.kind == Kind::Acquire && o.answered)
            .filter_map(|o| o.grant)
            .collect();
        let mut search = Search {
            procs: &procs,
            ppm,
            answered_ids,
            seen: HashSet::new(),
        };
        let start = State {
            next: vec![0; procs.len()],
            lease: None,
            max_token: None,
            now_ns: 0,
        };
        search.dfs(&start)
    })
}

struct Search<'a> {
    /// Each process's ops on this lock, in program order.
    procs: &'a [Vec<LockOp>],
    ppm: u64,
    /// The grant ids this lock's answered grants carry.
    answered_ids: HashSet<u32>,
    seen: HashSet<State>,
}

impl Search<'_> {
    fn dfs(&mut self, s: &State) -> bool {
        if s.next
            .iter()
            .zip(self.procs)
            .all(|(&n, ops)| n as usize == ops.len())
        {
            return true;
        }
        if !self.seen.insert(s.clone()) {
            return false;
        }
        // Time only moves forward: an op that must take effect and whose window has closed
        // can no longer be placed.
        for (i, ops) in self.procs.iter().enumerate() {
            if ops[s.next[i] as usize..]
                .iter()
                .any(|o| o.must && o.latest_ns < s.now_ns)
            {
                return false;
            }
        }
        for i in 0..self.procs.len() {
            let Some(op) = self.procs[i].get(s.next[i] as usize) else {
                continue;
            };
            if !op.must {
                let mut skip = s.clone();
                skip.next[i] += 1;
                if self.dfs(&skip) {
                    return true;
                }
            }
            if let Some(mut n) = self.apply(s, op) {
                n.next[i] += 1;
                if self.dfs(&n) {
                    return true;
                }
            }
        }
        false
    }

    /// The state after `op` takes effect as early as it can, if a correct service may do it.
    fn apply(&self, s: &State, op: &LockOp) -> Option<State> {
        let mut now_ns = s.now_ns.max(op.invoke_ns);
        let mut n = s.clone();
        match op.kind {
            Kind::Acquire => {
                if let Some(l) = s.lease {
                    // Wait until the holder's lease may have expired.
                    now_ns = now_ns.max(l.expires_ns);
                }
                // D7: a grant without a token fits anywhere in token order.
                if let (Some(t), Some(max)) = (op.token, s.max_token) {
                    if t <= max {
                        return None;
                    }
                }
                n.max_token = s.max_token.max(op.token);
                let lower = lower_ns(op.ttl_ms, self.ppm);
                // D1: a lease set before its grant surely lasts until `lease_from + lower`,
                // and no longer is certain (it may have lapsed by the grant's instant).
                let expires_ns = match op.lease_from_ns {
                    Some(from) => now_ns.max(from.saturating_add(lower)),
                    None => now_ns.saturating_add(lower),
                };
                let (token, grant) = if op.answered {
                    (Known::Is(op.token), Known::Is(op.grant))
                } else {
                    (Known::Unknown, Known::Unknown)
                };
                n.lease = Some(Lease {
                    process: op.process,
                    token,
                    grant,
                    ttl_ms: op.ttl_ms,
                    expires_ns,
                });
            }
            Kind::Renew | Kind::Release => {
                // D2, D5: it must name the current lease; D3: a released lease is gone.
                let mut l = s.lease?;
                match (op.token, op.grant) {
                    (Some(t), _) => match l.token {
                        Known::Is(own) if own != Some(t) => return None,
                        Known::Is(_) => {}
                        // A lost grant's token is unknown, not any: naming it says it is `t`,
                        // and a grant's token is above every earlier grant's (model rule 2).
                        Known::Unknown => {
                            if s.max_token.is_some_and(|m| t <= m) {
                                return None;
                            }
                            l.token = Known::Is(Some(t));
                            n.max_token = Some(t);
                        }
                    },
                    (None, Some(g)) => match l.grant {
                        Known::Is(own) if own != Some(g) => return None,
                        Known::Is(_) => {}
                        // A grant id names one grant: one an answered grant carries is not
                        // this lost grant's.
                        Known::Unknown => {
                            if self.answered_ids.contains(&g) {
                                return None;
                            }
                            l.grant = Known::Is(Some(g));
                        }
                    },
                    (None, None) if l.process != op.process => return None,
                    (None, None) => {}
                }
                n.lease = (op.kind == Kind::Renew).then(|| Lease {
                    expires_ns: now_ns
                        .saturating_add(lower_ns(op.ttl_ms.or(l.ttl_ms), self.ppm)),
                    ..l
                });
            }
        }
        if now_ns > op.latest_ns {
            return None;
        }
        n.now_ns = now_ns;
        Some(n)
    }
}

// ---------------------------------------------------------------------------------------------
// The generator: a seeded service, correct or with one bug, and clients that hold, renew with
// other ttls, stall, release with or without their token, lose replies and crash.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bug {
    GrantWhileHeld,
    ShortLease,
    AcceptStale,
    TokenReuse,
    TokenDown,
    RenewKeepsExpiry,
}

const BUGS: [Bug; 6] = [
    Bug::GrantWhileHeld,
    Bug::ShortLease,
    Bug::AcceptStale,
    Bug::TokenReuse,
    Bug::TokenDown,
    Bug::RenewKeepsExpiry,
];

const MS: u64 = 1_000_000;

#[derive(Debug, Clone)]
struct Held {
    lock: usize,
    token: u64,
    renews_left: u32,
}

#[derive(Debug)]
struct Worker {
    pid: u64,
    held: Option<Held>,
    /// When its next request is invoked.
    ready_ns: u64,
    done: bool,
}

#[derive(Debug, Clone, Copy)]
struct Holder {
    pid: u64,
    token: u64,
    expires_ns: u64,
}

struct Sim {
    rng: ChaCha8Rng,
    drift: f64,
    bug: Option<Bug>,
    locks: usize,
    holders: Vec<Option<Holder>>,
    last_token: Vec<u64>,
    next_pid: u64,
    /// (time, creation order, op without its index)
    events: Vec<(u64, u64, Op)>,
    created: u64,
    /// Whether tokens may be left out of ok acquires (the soundness-only space).
    drop_tokens: bool,
}

/// One request: what the client sends and when.
struct Req {
    f: F,
    lock: usize,
    token: Option<u64>,
    ttl_ms: Option<u64>,
}

impl Sim {
    fn event(&mut self, time_ns: u64, pid: u64, kind: OpType, f: F, lock: usize, v: OpValue) {
        let op = Op::new(0, time_ns, Process::Client(pid), kind, f)
            .with_lock(format!("L{lock}"))
            .with_value(v);
        self.events.push((time_ns, self.created, op));
        self.created += 1;
    }

    fn delay(&mut self) -> u64 {
        if self.rng.random_bool(0.15) {
            self.rng.random_range(5..=15) * MS
        } else {
            self.rng.random_range(0..=3) * MS
        }
    }

    /// The service's lease for a grant or renew at `at_ns`: never below the model's lower
    /// bound unless the bug is a short lease; sometimes lazily longer.
    fn expiry(&mut self, at_ns: u64, ttl_ms: u64) -> u64 {
        if self.bug == Some(Bug::ShortLease) && self.rng.random_bool(0.6) {
            return at_ns + ttl_ms * MS / 2;
        }
        let u: f64 = self.rng.random_range(0.0..=1.0);
        let mut e = at_ns + ((ttl_ms as f64) * 1e6 * (1.0 - u * self.drift)).ceil() as u64;
        if self.rng.random_bool(0.3) {
            e += self.rng.random_range(0..=5) * MS;
        }
        e
    }

    fn buggy(&mut self, bug: Bug, p: f64) -> bool {
        self.bug == Some(bug) && self.rng.random_bool(p)
    }

    /// Applies a request at `at_ns`: ok with its value, or refused with a reason.
    fn serve(&mut self, pid: u64, r: &Req, at_ns: u64) -> Result<OpValue, &'static str> {
        let holder = self.holders[r.lock];
        match r.f {
            F::Acquire => {
                let ttl = r.ttl_ms.expect("acquires name a ttl");
                if holder.is_some_and(|h| at_ns < h.expires_ns)
                    && !self.buggy(Bug::GrantWhileHeld, 0.8)
                {
                    return Err("held");
                }
                let last = self.last_token[r.lock];
                let token = if last > 0 && self.buggy(Bug::TokenReuse, 0.6) {
                    last
                } else if last > 1 && self.buggy(Bug::TokenDown, 0.6) {
                    last - 1
                } else {
                    last + 1
                };
                self.last_token[r.lock] = last.max(token);
                let expires_ns = self.expiry(at_ns, ttl);
                self.holders[r.lock] = Some(Holder {
                    pid,
                    token,
                    expires_ns,
                });
                Ok(OpValue::default().with_token(token).with_ttl_ms(ttl))
            }
            F::Renew | F::Release => {
                let matches =
                    holder.is_some_and(|h| h.pid == pid && r.token.is_none_or(|t| t == h.token));
                if !matches {
                    if self.buggy(Bug::AcceptStale, 0.7) {
                        return Ok(self.answer(pid, r, holder));
                    }
                    return Err("not-holder");
                }
                let h = holder.expect("matched");
                if r.f == F::Release {
                    self.holders[r.lock] = None;
                } else if !self.buggy(Bug::RenewKeepsExpiry, 0.7) {
                    let ttl = r.ttl_ms.expect("renews name a ttl");
                    let expires_ns = self.expiry(at_ns, ttl);
                    self.holders[r.lock] = Some(Holder { expires_ns, ..h });
                }
                Ok(self.answer(pid, r, holder))
            }
            _ => unreachable!("lock ops only"),
        }
    }

    /// The ok value: the token the client named, else its own lease's token (a service does not
    /// hand a client another holder's token).
    fn answer(&self, pid: u64, r: &Req, holder: Option<Holder>) -> OpValue {
        let mut v = OpValue::default();
        let own = holder.filter(|h| h.pid == pid).map(|h| h.token);
        if let Some(t) = r.token.or(own) {
            v = v.with_token(t);
        }
        if r.f == F::Renew {
            v = v.with_ttl_ms(r.ttl_ms.expect("renews name a ttl"));
        }
        v
    }

    fn next_request(&mut self, w: &Worker) -> Req {
        let lock = self.rng.random_range(0..self.locks);
        match &w.held {
            None => Req {
                f: F::Acquire,
                lock,
                token: None,
                ttl_ms: Some(self.rng.random_range(2..=12)),
            },
            Some(h) if h.renews_left > 0 => Req {
                f: F::Renew,
                lock: h.lock,
                token: self.rng.random_bool(0.8).then_some(h.token),
                ttl_ms: Some(self.rng.random_range(1..=15)),
            },
            Some(h) => Req {
                f: F::Release,
                lock: h.lock,
                token: self.rng.random_bool(0.7).then_some(h.token),
                ttl_ms: None,
            },
        }
    }
}

/// A small random history: at most `max_ops` client ops.
fn generate(seed: u64, max_ops: usize, drop_tokens: bool) -> (Vec<Op>, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let drift = [0.0, 0.0, 0.1, 0.25][rng.random_range(0..4)];
    let bug = rng
        .random_bool(0.85)
        .then(|| BUGS[rng.random_range(0..BUGS.len())]);
    let locks = rng.random_range(1..=2);
    let workers = rng.random_range(2..=3);
    let mut sim = Sim {
        rng,
        drift,
        bug,
        locks,
        holders: vec![None; locks],
        last_token: vec![0; locks],
        next_pid: workers as u64 + 1,
        events: Vec::new(),
        created: 0,
        drop_tokens,
    };
    let mut ws: Vec<Worker> = (0..workers)
        .map(|i| Worker {
            pid: i as u64 + 1,
            held: None,
            ready_ns: sim.rng.random_range(0..=4) * MS,
            done: false,
        })
        .collect();
    // (worker, request, invoke, effect or None when it never reaches the service)
    let mut queued: Vec<Option<(Req, u64, Option<u64>)>> = Vec::new();
    for w in &ws {
        let r = sim.next_request(w);
        let at = w.ready_ns + sim.delay();
        queued.push(Some((r, w.ready_ns, Some(at))));
    }
    // Bounded: every pass completes one request, and at most `max_ops` are made.
    for _ in 0..max_ops {
        // The request the service meets next (a lost one "meets" it at its invoke).
        let Some(i) = (0..ws.len())
            .filter(|&i| queued[i].is_some())
            .min_by_key(|&i| {
                let (_, inv, at) = queued[i].as_ref().expect("filtered");
                (at.unwrap_or(*inv), i)
            })
        else {
            break;
        };
        let (req, invoke_ns, effect_ns) = queued[i].take().expect("chosen");
        let pid = ws[i].pid;
        let mut inv_value = OpValue::default();
        if let Some(t) = req.token {
            inv_value = inv_value.with_token(t);
        }
        if let Some(t) = req.ttl_ms {
            inv_value = inv_value.with_ttl_ms(t);
        }
        sim.event(
            invoke_ns,
            pid,
            OpType::Invoke,
            req.f.clone(),
            req.lock,
            inv_value,
        );
        let answer = effect_ns.map(|at| (at, sim.serve(pid, &req, at)));
        let roll: f64 = sim.rng.random_range(0.0..1.0);
        let w = &mut ws[i];
        if roll < 0.05 {
            // Never completes within the history.
            w.done = true;
            continue;
        }
        let lost = effect_ns.is_none() || roll < 0.17;
        let done_ns = if lost {
            // The client gives up after its timeout, no earlier than the effect.
            effect_ns.unwrap_or(invoke_ns).max(invoke_ns + 8 * MS)
        } else {
            let at = effect_ns.expect("not lost");
            at + sim.delay()
        };
        match (lost, answer) {
            (true, _) | (false, None) => {
                sim.event(
                    done_ns,
                    pid,
                    OpType::Info,
                    req.f.clone(),
                    req.lock,
                    OpValue::default(),
                );
                // Crashed: the worker goes on as a new process, knowing nothing.
                w.pid = sim.next_pid;
                sim.next_pid += 1;
                w.held = None;
            }
            (false, Some((_, Ok(mut v)))) => {
                if req.f == F::Acquire {
                    w.held = Some(Held {
                        lock: req.lock,
                        token: v.token.expect("grants carry tokens"),
                        renews_left: sim.rng.random_range(0..=2),
                    });
                    if sim.drop_tokens && sim.rng.random_bool(0.3) {
                        v.token = None;
                    }
                } else if req.f == F::Renew {
                    if let Some(h) = &mut w.held {
                        h.renews_left = h.renews_left.saturating_sub(1);
                    }
                } else {
                    w.held = None;
                }
                sim.event(done_ns, pid, OpType::Ok, req.f.clone(), req.lock, v);
            }
            (false, Some((_, Err(e)))) => {
                if req.f != F::Acquire {
                    w.held = None;
                }
                sim.event(
                    done_ns,
                    pid,
                    OpType::Fail,
                    req.f.clone(),
                    req.lock,
                    OpValue::default().with_error(e),
                );
            }
        }
        // Sometimes the holder walks away without releasing (a crash it survives, a bug).
        if w.held.is_some() && sim.rng.random_bool(0.1) {
            w.held = None;
        }
        let ttl_hint = req.ttl_ms.unwrap_or(5);
        // Think or hold: up to one and a half leases, so renewals land before and after the
        // lease's lower bound.
        let pause = sim.rng.random_range(0..=(ttl_hint * 3 / 2)) * MS;
        w.ready_ns = done_ns + pause;
        let next = sim.next_request(w);
        let reaches = sim.rng.random_bool(0.95);
        let at = w.ready_ns + sim.delay();
        queued[i] = Some((next, w.ready_ns, reaches.then_some(at)));
    }
    sim.events.sort_by_key(|(t, c, _)| (*t, *c));
    let ops = sim
        .events
        .into_iter()
        .enumerate()
        .map(|(i, (_, _, mut op))| {
            op.index = i as u64;
            op
        })
        .collect();
    (ops, drift)
}

// ---------------------------------------------------------------------------------------------
// The property

fn fast_says_impossible(h: &History, drift: f64) -> bool {
    let cfg = CheckConfig {
        drift,
        ..CheckConfig::default()
    };
    checkers::check(h, &cfg)
        .violations
        .iter()
        .any(|v| LOCK_SAFETY.contains(&v.kind))
}

fn describe(ops: &[Op], drift: f64) -> String {
    let h = History::new(ops.to_vec()).expect("valid");
    let cfg = CheckConfig {
        drift,
        ..CheckConfig::default()
    };
    let r = checkers::check(&h, &cfg);
    let mut s = format!("drift {drift}\n");
    let mut buf = Vec::new();
    {
        let mut w = history::HistoryWriter::new(&mut buf);
        for op in ops {
            w.write(op).expect("in memory");
        }
    }
    s.push_str(&String::from_utf8_lossy(&buf));
    for v in &r.violations {
        s.push_str(&format!("  {} {:?}: {}\n", v.kind, v.ops, v.explanation));
    }
    s
}

/// Removes client ops (invoke and completion together) while `bad` still holds, then renumbers.
fn shrink(mut ops: Vec<Op>, bad: impl Fn(&[Op]) -> bool) -> Vec<Op> {
    // Bounded: each pass removes an op or stops.
    for _ in 0..ops.len() {
        let mut removed = false;
        for i in 0..ops.len() {
            if ops[i].kind != OpType::Invoke {
                continue;
            }
            let p = ops[i].process;
            let end = ops[i + 1..]
                .iter()
                .position(|o| o.process == p)
                .map(|k| i + 1 + k);
            let mut cand: Vec<Op> = ops
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != i && Some(*k) != end)
                .map(|(_, o)| o.clone())
                .collect();
            for (k, o) in cand.iter_mut().enumerate() {
                o.index = k as u64;
            }
            if History::new(cand.clone()).is_ok() && in_space(&cand) && bad(&cand) {
                ops = cand;
                removed = true;
                break;
            }
        }
        if !removed {
            break;
        }
    }
    ops
}

/// Whether a history stays inside the generated space: a client renews or releases only a lock
/// it was granted (removing the grant alone would leave a renew of a lease that never existed).
fn in_space(ops: &[Op]) -> bool {
    let mut granted: HashSet<(Process, Option<String>)> = HashSet::new();
    let mut tokens: HashSet<(Process, Option<String>, u64)> = HashSet::new();
    ops.iter().all(|o| {
        let key = (o.process, o.lock.clone());
        match (&o.f, o.kind) {
            (F::Acquire, OpType::Ok) => {
                if let Some(t) = o.value.token {
                    tokens.insert((o.process, o.lock.clone(), t));
                }
                granted.insert(key);
                true
            }
            (F::Renew | F::Release, OpType::Invoke) => granted.contains(&key),
            // A renew or release names only tokens its process was granted.
            (F::Renew | F::Release, _) => o
                .value
                .token
                .is_none_or(|t| tokens.contains(&(o.process, o.lock.clone(), t))),
            _ => true,
        }
    })
}

/// Runs the property over `cases` seeds; returns the disagreements found (shrunk).
fn agree(cases: u64, seed0: u64, drop_tokens: bool, completeness: bool) -> (Vec<String>, u64) {
    let mut bad = Vec::new();
    let mut impossible = 0;
    for seed in seed0..seed0 + cases {
        let (ops, drift) = generate(seed, 10, drop_tokens);
        let h = History::new(ops.clone()).expect("the generator keeps the structure");
        let fast = fast_says_impossible(&h, drift);
        let truth = !feasible(&h, drift);
        impossible += u64::from(truth);
        let wrong = if completeness {
            fast != truth
        } else {
            fast && !truth
        };
        if wrong && bad.len() < 3 {
            let disagree = |ops: &[Op]| {
                let h = History::new(ops.to_vec()).expect("checked");
                let (f, t) = (fast_says_impossible(&h, drift), !feasible(&h, drift));
                f == fast && t == truth
            };
            let small = shrink(ops, disagree);
            bad.push(format!(
                "seed {seed}: checkers say {}, the oracle says {}\n{}",
                if fast { "impossible" } else { "possible" },
                if truth { "impossible" } else { "possible" },
                describe(&small, drift)
            ));
        }
    }
    (bad, impossible)
}

/// What the generated histories contain, so agreement is known to rest on the shapes that
/// matter.
#[derive(Debug, Default)]
struct Shapes {
    shorter_renew: u64,
    longer_renew: u64,
    renew_after_bound: u64,
    slow_reply_past_bound: u64,
    indeterminate: u64,
    never_completed: u64,
    tokenless_release: u64,
    crashed: u64,
    two_locks: u64,
    drift: u64,
}

impl Shapes {
    fn add(&mut self, h: &History, drift: f64) {
        let mut seen = [false; 10];
        let mut grant_ttl: BTreeMap<(Process, Option<String>), (u64, u64)> = BTreeMap::new();
        let mut locks = HashSet::new();
        for o in h.operations() {
            let inv = h.invoke_of(o);
            locks.insert(inv.lock.clone());
            let done = h.complete_of(o);
            match o.outcome {
                Outcome::Info => {
                    seen[4] = true;
                    seen[7] = true;
                }
                Outcome::Pending => seen[5] = true,
                _ => {}
            }
            let key = (inv.process, inv.lock.clone());
            let ttl = inv.value.ttl_ms.unwrap_or(0);
            match (&inv.f, o.outcome) {
                (F::Acquire, Outcome::Ok) => {
                    let bound = inv.time_ns + lower_ns(Some(ttl), ppm(drift));
                    grant_ttl.insert(key, (ttl, bound));
                }
                (F::Renew, Outcome::Ok) => {
                    if let Some((g, bound)) = grant_ttl.get_mut(&key) {
                        seen[0] |= ttl < *g;
                        seen[1] |= ttl > *g;
                        seen[2] |= inv.time_ns > *bound;
                        seen[3] |=
                            inv.time_ns <= *bound && done.is_some_and(|d| d.time_ns > *bound);
                        *bound = inv.time_ns + lower_ns(Some(ttl), ppm(drift));
                    }
                }
                (F::Release, _) => seen[6] |= inv.value.token.is_none(),
                _ => {}
            }
        }
        seen[8] = locks.len() > 1;
        seen[9] = drift > 0.0;
        let counts = [
            &mut self.shorter_renew,
            &mut self.longer_renew,
            &mut self.renew_after_bound,
            &mut self.slow_reply_past_bound,
            &mut self.indeterminate,
            &mut self.never_completed,
            &mut self.tokenless_release,
            &mut self.crashed,
            &mut self.two_locks,
            &mut self.drift,
        ];
        for (c, s) in counts.into_iter().zip(seen) {
            *c += u64::from(s);
        }
    }
}

#[test]
fn generated_histories_cover_the_shapes() {
    let cases = 2_000;
    let mut shapes = Shapes::default();
    for seed in 0..cases {
        let (ops, drift) = generate(seed, 10, false);
        shapes.add(&History::new(ops).expect("valid"), drift);
    }
    let Shapes {
        shorter_renew,
        longer_renew,
        renew_after_bound,
        slow_reply_past_bound,
        indeterminate,
        never_completed,
        tokenless_release,
        crashed,
        two_locks,
        drift,
    } = shapes;
    for (name, n) in [
        ("shorter_renew", shorter_renew),
        ("longer_renew", longer_renew),
        ("renew_after_bound", renew_after_bound),
        ("slow_reply_past_bound", slow_reply_past_bound),
        ("indeterminate", indeterminate),
        ("never_completed", never_completed),
        ("tokenless_release", tokenless_release),
        ("crashed", crashed),
        ("two_locks", two_locks),
        ("drift", drift),
    ] {
        assert!(
            n >= cases / 20,
            "only {n} of {cases} histories have {name}: {shapes:?}"
        );
    }
}

#[test]
fn fast_checkers_agree_with_the_oracle() {
    let cases = 20_000;
    let (bad, impossible) = agree(cases, 0, false, true);
    assert!(bad.is_empty(), "disagreements:\n{}", bad.join("\n"));
    // The generator must produce both kinds in earnest, or agreement means little.
    assert!(
        impossible > cases / 5 && impossible < cases * 4 / 5,
        "{impossible} of {cases} histories impossible: the generator is lopsided"
    );
}

/// Grants without tokens leave the grant order open, which the fast rules do not search; they
/// must still never report what the model allows.
#[test]
fn fast_checkers_are_sound_on_untokened_grants() {
    let (bad, _) = agree(5_000, 1_000_000, true, false);
    assert!(bad.is_empty(), "false alarms:\n{}", bad.join("\n"));
}

/// The oracle itself, on the hand-written fixtures: every fixture of lock ops only is possible
/// exactly when its expected results hold no lock safety violation.
#[test]
fn oracle_agrees_with_the_lock_fixtures() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let (ops, _) = history::read_ops(&path).expect("fixture reads");
        if ops.iter().any(|o| o.f.is_store_op()) {
            continue;
        }
        let expected_path = path.with_extension("expected.json");
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&expected_path).expect("expected"))
                .expect("json");
        let drift = expected["config"]["drift"].as_f64().unwrap_or(0.0);
        let has_lease_evidence = ops
            .iter()
            .any(|o| o.value.extra.contains_key("lease_last_ok_ns"));
        if has_lease_evidence {
            continue;
        }
        // A violation set apart as expected (a moved monotonic clock) is still one the model
        // rules out: the history is impossible for a correct service all the same.
        let none = serde_json::Value::Array(Vec::new());
        let violating = expected["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .chain(
                expected
                    .get("expected")
                    .unwrap_or(&none)
                    .as_array()
                    .expect("expected"),
            )
            .any(|v| {
                LOCK_SAFETY
                    .iter()
                    .any(|k| Some(k.as_str()) == v["kind"].as_str())
            });
        let h = History::new(ops).expect("fixture structure");
        assert_eq!(
            !feasible(&h, drift),
            violating,
            "{}: the oracle disagrees with the fixture",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} lock fixtures checked");
}
