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
//!
//! The model follows issue 24's decisions (to be written into docs/checkers.md): a lease set
//! before its grant lasts surely until `lease_from_ns + lower(T)` (D1); a renew or release names
//! a lease by its token, else its grant id, else its own process, and any process may send it
//! (D2, D5); a released lease stays released (D3); equal `time_ns` are no order (D4); a lost
//! answer's ttl is the one answered requests for as long got (D6); grants without a token fit
//! anywhere in token order (D7); bounds are whole ppm of drift, in integers (D8). A lost grant's
//! token is unknown, not any: a renew naming one says which it is, and it is still above every
//! earlier grant's.
//!
//! A second property (`oracle_agrees_on_adapter_shapes`) draws the shapes the next adapters
//! produce (`generate_adapter`): tokenless and opaque grants, session leases set before the
//! acquire, other ttls than asked, renews and releases by other processes, of other grants or
//! after a release, non-binary drifts and replies aimed at a bound to the ns.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

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
    /// The process crashed (an op of its went unanswered, on any lock or key): on its own
    /// session's lease it ends the belief, as its release would (model item 9); nothing else.
    Crash,
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
    /// An ok acquire's `hold` (model item 9).
    hold: Hold,
    /// A release, or a renew that did not answer ok: on a session's lease held by its own
    /// process, the holder's word that may end its belief (model item 9).
    holder_word: bool,
    /// It failed: it changed nothing, unless it was the holder's word on its session.
    refused: bool,
}

/// How a grant holds (model item 9): a lease; a session's lock, believed by its holder until
/// its own release or a renew of its own that did not answer ok; a transaction's, no hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Hold {
    Lease,
    Session,
    Transaction,
}

fn hold_of(v: &OpValue) -> Hold {
    match v.extra.get("hold").and_then(serde_json::Value::as_str) {
        Some("session") => Hold::Session,
        Some("transaction") => Hold::Transaction,
        _ => Hold::Lease,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Lease {
    process: u64,
    token: Known<u64>,
    grant: Known<u32>,
    /// The grant's ttl: a renew that names none renews for as long.
    ttl_ms: Option<u64>,
    hold: Hold,
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

/// Which of issue 24's decisions the oracle reads the old way: only to say which decision a
/// disagreement of the checkers concerns (`survey_adapter_disagreements`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Before {
    /// D1: a grant's lease is counted from its instant, whatever `lease_from_ns` says.
    d1: bool,
    /// D2: a renew or release names a lease of its own process (and its token, if it names
    /// one); grant ids name nothing, and a lost grant's token matches none.
    d2: bool,
    /// D6: a lost answer's ttl is the one requested.
    d6: bool,
    /// D8: the lower bound is `ttl*(1-drift)` in floating point, rounded down.
    d8: bool,
}

/// Whether some execution of a correct service produces `h`'s lock ops.
fn feasible(h: &History, drift: f64) -> bool {
    feasible_as(h, drift, Before::default())
}

fn feasible_as(h: &History, drift: f64, before: Before) -> bool {
    let granted = if before.d6 {
        BTreeMap::new()
    } else {
        granted_ttls(h)
    };
    let mut ids: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let mut by_lock: BTreeMap<&str, BTreeMap<u64, Vec<LockOp>>> = BTreeMap::new();
    // (process, lock) -> the process's own grants, in program order: token, grant id, hold.
    type Own<'a> = Vec<(Option<u64>, Option<&'a str>, Hold)>;
    let mut own: BTreeMap<(u64, &str), Own> = BTreeMap::new();
    // (process, invoke, completion) of each crash: an op that went unanswered.
    let mut crashes: Vec<(u64, u64, u64)> = Vec::new();
    for o in h.operations() {
        let inv = h.invoke_of(o);
        let done = h.complete_of(o);
        if o.outcome == Outcome::Info {
            if let Some(p) = inv.process.client() {
                crashes.push((p, inv.time_ns, done.map_or(u64::MAX, |d| d.time_ns)));
            }
        }
        let kind = match inv.f {
            F::Acquire => Kind::Acquire,
            F::Renew => Kind::Renew,
            F::Release => Kind::Release,
            _ => continue,
        };
        let Some(lock) = inv.lock.as_deref() else {
            continue;
        };
        let p = inv.process.client().expect("client op");
        // Model item 9: the holder's own release, or its own renew that did not answer ok,
        // of its session's grant may end its belief from its invoke: a release that may take
        // effect (even a refused one: it is the holder's word, not the service's). Which lease
        // it names is decided where it is placed; a refused op is kept only where its process
        // holds a session's grant of the lock.
        let holder_word =
            kind == Kind::Release || (kind == Kind::Renew && o.outcome != Outcome::Ok);
        let has_session = own
            .get(&(p, lock))
            .is_some_and(|list| list.iter().any(|e| e.2 == Hold::Session));
        // A refused op changed nothing.
        if o.outcome == Outcome::Fail && !(holder_word && has_session) {
            continue;
        }
        let ok_value = done.filter(|_| o.outcome == Outcome::Ok).map(|d| &d.value);
        let hold = ok_value.map_or(Hold::Lease, hold_of);
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
            _ if kind == Kind::Acquire && hold == Hold::Transaction => None,
            Some(t) => Some(t),
            None => inv
                .value
                .ttl_ms
                .map(|asked| granted.get(&asked).copied().unwrap_or(asked)),
        };
        if kind == Kind::Acquire && ok_value.is_some() {
            own.entry((p, lock))
                .or_default()
                .push((token, ok_value.and_then(|v| v.grant()), hold));
        }
        let lease_from_ns = ok_value
            .filter(|_| !before.d1)
            .and_then(|v| v.extra.get("lease_from_ns"))
            .and_then(serde_json::Value::as_u64);
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
                hold,
                holder_word,
                refused: o.outcome == Outcome::Fail,
            });
    }
    // A crash is its process's last op: after all of its own on each lock it held a session's
    // grant of.
    for (p, invoke_ns, latest_ns) in crashes {
        for ((q, lock), list) in &own {
            if *q != p || !list.iter().any(|e| e.2 == Hold::Session) {
                continue;
            }
            by_lock
                .entry(lock)
                .or_default()
                .entry(p)
                .or_default()
                .push(LockOp {
                    process: p,
                    kind: Kind::Crash,
                    must: false,
                    invoke_ns,
                    latest_ns,
                    token: None,
                    grant: None,
                    answered: false,
                    ttl_ms: None,
                    lease_from_ns: None,
                    hold: Hold::Lease,
                    holder_word: true,
                    refused: false,
                });
        }
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
            drift,
            before,
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
    drift: f64,
    before: Before,
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

    fn lower(&self, ttl_ms: Option<u64>) -> u64 {
        if self.before.d8 {
            ttl_ms.map_or(0, |t| {
                ((t as f64) * 1e6 * (1.0 - self.drift)).floor() as u64
            })
        } else {
            lower_ns(ttl_ms, self.ppm)
        }
    }

    /// The state after `op` takes effect as early as it can, if a correct service may do it.
    fn apply(&self, s: &State, op: &LockOp) -> Option<State> {
        let mut now_ns = s.now_ns.max(op.invoke_ns);
        let mut n = s.clone();
        match op.kind {
            Kind::Crash => match s.lease {
                Some(l) if l.hold == Hold::Session && l.process == op.process => n.lease = None,
                _ => return None,
            },
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
                let lower = self.lower(op.ttl_ms);
                // D1: a lease set before its grant surely lasts until `lease_from + lower`,
                // and no longer is certain (it may have lapsed by the grant's instant).
                let expires_ns = match (op.hold, op.lease_from_ns) {
                    // A session's lock is held, as far as its holder knows, until it is told.
                    (Hold::Session, _) => u64::MAX,
                    (_, Some(from)) => now_ns.max(from.saturating_add(lower)),
                    (_, None) => now_ns.saturating_add(lower),
                };
                // A grant answered without a token may have had one the answer did not show:
                // its token is unknown, as a lost grant's (model item 6); an answer without a
                // grant id had none.
                let (token, grant) = if op.answered {
                    (
                        op.token.map_or(Known::Unknown, |t| Known::Is(Some(t))),
                        Known::Is(op.grant),
                    )
                } else {
                    (Known::Unknown, Known::Unknown)
                };
                n.lease = Some(Lease {
                    process: op.process,
                    token,
                    grant,
                    ttl_ms: op.ttl_ms,
                    hold: op.hold,
                    expires_ns,
                });
            }
            Kind::Renew | Kind::Release => {
                // D2, D5: it must name the current lease; D3: a released lease is gone.
                let mut l = s.lease?;
                let old = |t: Known<u64>| match t {
                    Known::Is(t) => t,
                    Known::Unknown => None,
                };
                match (op.token, op.grant) {
                    _ if self.before.d2 => {
                        if l.process != op.process || op.token.is_some() && op.token != old(l.token)
                        {
                            return None;
                        }
                    }
                    (Some(t), _) => match l.token {
                        Known::Is(own) if own != Some(t) => return None,
                        Known::Is(_) => {}
                        // A lost grant's token is unknown, not any: naming it says it is `t`,
                        // and a grant's token is above every earlier grant's (model rule 2).
                        Known::Unknown => {
                            // Tokens are positive: 0 is no grant's.
                            if t == 0 || s.max_token.is_some_and(|m| t <= m) {
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
                if op.holder_word && l.hold == Hold::Session && l.process == op.process {
                    // The holder's word on its own session: its belief ends here.
                    n.lease = None;
                    if now_ns > op.latest_ns {
                        return None;
                    }
                    n.now_ns = now_ns;
                    return Some(n);
                }
                if op.refused {
                    return None;
                }
                n.lease = (op.kind == Kind::Renew).then(|| Lease {
                    expires_ns: match l.hold {
                        // A renew of a session's grant confirms the session, or may have.
                        Hold::Session => u64::MAX,
                        // A transaction's lock sets no lease.
                        Hold::Transaction => now_ns,
                        Hold::Lease => now_ns.saturating_add(self.lower(op.ttl_ms.or(l.ttl_ms))),
                    },
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
//
// The adapter shapes (`generate_adapter`) add what the next adapters produce: grants with a
// token, a grant id, both or neither (Redis, PostgreSQL); a ttl policy that grants another ttl
// than asked; session leases set before the acquire (etcd), some about to lapse; renews and
// releases sent by a restarted holder, by another client, naming another grant, or after the
// client's own release; drifts that are not binary fractions, exact leases and replies aimed at
// a lease's bound to the nanosecond; and equal timestamps written in either order.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bug {
    GrantWhileHeld,
    ShortLease,
    AcceptStale,
    TokenReuse,
    TokenDown,
    RenewKeepsExpiry,
    /// A session lease the service lets run short: it lasts half its ttl from `lease_from`, and
    /// the service grants on it whether or not it has lapsed.
    SessionShort,
    /// A release answered ok that leaves the lease in place, so a later renew of it succeeds.
    RenewAfterRelease,
}

const BUGS: [Bug; 6] = [
    Bug::GrantWhileHeld,
    Bug::ShortLease,
    Bug::AcceptStale,
    Bug::TokenReuse,
    Bug::TokenDown,
    Bug::RenewKeepsExpiry,
];

/// The adapter shapes' service may also have these, beside `BUGS`.
const ADAPTER_BUGS: [Bug; 2] = [Bug::SessionShort, Bug::RenewAfterRelease];

/// Drifts whose `1 - drift` is not a binary fraction, where floating point loses a nanosecond.
const DRIFTS: [f64; 8] = [0.0, 0.01, 0.07, 0.1, 0.33, 0.55, 0.8, 0.9];

const MS: u64 = 1_000_000;

/// What names a service's grants (D7).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Style {
    /// Fencing tokens only (the reference protocol, etcd).
    Tokens,
    /// A random grant id, no token (a Redis lock value).
    Ids,
    /// Neither (a PostgreSQL advisory lock, held by its session).
    Neither,
    /// Both (Redis with a fencing counter).
    Both,
    /// Each grant one of the above.
    Mixed,
}

/// The service's fixed ttl policy (D6): a request for `r` ms is granted `grant(r)`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    Same,
    AtLeast(u64),
    Half,
    Double,
}

impl Policy {
    fn grant(self, asked: u64) -> u64 {
        match self {
            Policy::Same => asked,
            Policy::AtLeast(m) => asked.max(m),
            Policy::Half => (asked / 2).max(1),
            Policy::Double => 2 * asked,
        }
    }
}

/// The adapter shapes, fixed per history.
#[derive(Debug, Clone)]
struct Adapter {
    style: Style,
    policy: Policy,
    /// The chance an acquire runs under a session lease set before it.
    sessions: f64,
    /// The chance a holder goes on as a new process (a restarted worker keeping its token).
    successor: f64,
    /// The chance an idle client renews or releases another client's grant.
    meddle: f64,
    /// The chance a renew or release names another grant of the lock than its own.
    misname: f64,
    /// The chance a client renews the grant it has just released.
    zombie: f64,
    /// Leases last exactly their lower bound, and some replies take no time.
    exact: bool,
    /// The chance an acquire is aimed at the holder's lease end, to the nanosecond.
    probe: f64,
    /// Orders events of different processes at one instant (D4).
    salt: u64,
}

#[derive(Debug, Clone)]
struct Held {
    lock: usize,
    token: Option<u64>,
    grant: Option<String>,
    renews_left: u32,
    /// Released already: its next op renews it anyway (D3).
    zombie: bool,
}

#[derive(Debug)]
struct Worker {
    pid: u64,
    held: Option<Held>,
    /// When its next request is invoked.
    ready_ns: u64,
    done: bool,
}

#[derive(Debug, Clone)]
struct Holder {
    pid: u64,
    token: Option<u64>,
    grant: Option<String>,
    expires_ns: u64,
    /// Where the model's lower bound of the grant's lease lies, counted from its invoke (or
    /// its session lease).
    bound_ns: u64,
}

struct Sim {
    rng: ChaCha8Rng,
    drift: f64,
    bug: Option<Bug>,
    locks: usize,
    holders: Vec<Option<Holder>>,
    last_token: Vec<u64>,
    /// Every grant's (token, grant id), per lock: what a misnamed op names.
    past: Vec<Vec<(Option<u64>, Option<String>)>>,
    next_pid: u64,
    /// (time, creation order, op without its index)
    events: Vec<(u64, u64, Op)>,
    created: u64,
    /// Whether tokens may be left out of ok acquires (the soundness-only space).
    drop_tokens: bool,
    adapter: Option<Adapter>,
}

/// One request: what the client sends and when.
struct Req {
    f: F,
    lock: usize,
    token: Option<u64>,
    grant: Option<String>,
    ttl_ms: Option<u64>,
    /// An acquire under a session lease confirmed as sent at this instant.
    lease_from_ns: Option<u64>,
    /// Its reply takes no time.
    quick: bool,
    invoke_ns: u64,
}

impl Req {
    fn new(f: F, lock: usize, token: Option<u64>, ttl_ms: Option<u64>) -> Req {
        Req {
            f,
            lock,
            token,
            grant: None,
            ttl_ms,
            lease_from_ns: None,
            quick: false,
            invoke_ns: 0,
        }
    }
}

impl Sim {
    fn new(mut rng: ChaCha8Rng, drift: f64, bug: Option<Bug>, adapter: Option<Adapter>) -> Sim {
        let locks = rng.random_range(1..=2);
        Sim {
            rng,
            drift,
            bug,
            locks,
            holders: vec![None; locks],
            last_token: vec![0; locks],
            past: vec![Vec::new(); locks],
            next_pid: 0,
            events: Vec::new(),
            created: 0,
            drop_tokens: false,
            adapter,
        }
    }

    fn event(&mut self, time_ns: u64, pid: u64, kind: OpType, f: F, lock: usize, v: OpValue) {
        let op = Op::new(0, time_ns, Process::Client(pid), kind, f)
            .with_lock(format!("L{lock}"))
            .with_value(v);
        self.events.push((time_ns, self.created, op));
        self.created += 1;
    }

    fn delay(&mut self) -> u64 {
        if self.adapter.as_ref().is_some_and(|a| a.exact) && self.rng.random_bool(0.3) {
            return 0;
        }
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
        if let Some(a) = &self.adapter {
            // Whole ppm, as the model counts: exactly the lower bound, or up to the ttl.
            let ppm = ppm(self.drift);
            if a.exact {
                return at_ns + lower_ns(Some(ttl_ms), ppm);
            }
            let cut = self.rng.random_range(0..=ppm);
            let mut e = at_ns + ttl_ms * (1_000_000 - cut);
            if self.rng.random_bool(0.3) {
                e += self.rng.random_range(0..=5) * MS;
            }
            return e;
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

    fn policy(&self) -> Policy {
        self.adapter.as_ref().map_or(Policy::Same, |a| a.policy)
    }

    /// The next token, or a reused or lower one under those bugs.
    fn token(&mut self, lock: usize) -> u64 {
        let last = self.last_token[lock];
        let token = if last > 0 && self.buggy(Bug::TokenReuse, 0.6) {
            last
        } else if last > 1 && self.buggy(Bug::TokenDown, 0.6) {
            last - 1
        } else {
            last + 1
        };
        self.last_token[lock] = last.max(token);
        token
    }

    /// Whether a grant carries a token and a grant id.
    fn names(&mut self) -> (bool, bool) {
        let style = self.adapter.as_ref().map_or(Style::Tokens, |a| a.style);
        let style = match style {
            Style::Mixed => [Style::Tokens, Style::Ids, Style::Neither, Style::Both]
                [self.rng.random_range(0..4)],
            s => s,
        };
        match style {
            Style::Tokens => (true, false),
            Style::Ids => (false, true),
            Style::Neither => (false, false),
            _ => (true, true),
        }
    }

    /// Applies a request at `at_ns`: ok with its value, or refused with a reason.
    fn serve(&mut self, pid: u64, r: &Req, at_ns: u64) -> Result<OpValue, &'static str> {
        let holder = self.holders[r.lock].clone();
        match r.f {
            F::Acquire => {
                let ttl = self.policy().grant(r.ttl_ms.expect("acquires name a ttl"));
                if holder.as_ref().is_some_and(|h| at_ns < h.expires_ns)
                    && !self.buggy(Bug::GrantWhileHeld, 0.8)
                {
                    return Err("held");
                }
                // The classic service numbers the grant before it sets the lease.
                let (tokened, named) = self.names();
                let token = tokened.then(|| self.token(r.lock));
                let grant = named.then(|| format!("{:08x}", self.rng.random::<u32>()));
                let expires_ns = match r.lease_from_ns {
                    Some(from) if self.buggy(Bug::SessionShort, 0.7) => from + ttl * MS / 2,
                    Some(from) => {
                        let end = self.expiry(from, ttl);
                        if at_ns >= end {
                            // The session lease lapsed while the client waited.
                            return Err("lease-expired");
                        }
                        end
                    }
                    None => self.expiry(at_ns, ttl),
                };
                let bound_ns =
                    r.lease_from_ns.unwrap_or(r.invoke_ns) + lower_ns(Some(ttl), ppm(self.drift));
                self.holders[r.lock] = Some(Holder {
                    pid,
                    token,
                    grant: grant.clone(),
                    expires_ns,
                    bound_ns,
                });
                let mut v = OpValue::default();
                if let Some(t) = token {
                    v = v.with_token(t);
                }
                v = v.with_ttl_ms(ttl);
                if let Some(g) = &grant {
                    v = v.with_grant(g);
                }
                if let Some(from) = r.lease_from_ns {
                    v = v.with_extra("lease_from_ns", from.into());
                }
                self.past[r.lock].push((token, grant));
                Ok(v)
            }
            F::Renew | F::Release => {
                // D2: by token, else by grant id, else the client's own lease.
                let classic = self.adapter.is_none();
                let matches = holder.as_ref().is_some_and(|h| match (r.token, &r.grant) {
                    // The classic service ties a lease to its process as well.
                    _ if classic => h.pid == pid && r.token.is_none_or(|t| h.token == Some(t)),
                    (Some(t), _) => h.token == Some(t),
                    (None, Some(g)) => h.grant.as_ref() == Some(g),
                    (None, None) => h.pid == pid,
                });
                if !matches {
                    if self.buggy(Bug::AcceptStale, 0.7) {
                        return Ok(self.answer(pid, r, holder.as_ref()));
                    }
                    return Err("not-holder");
                }
                let h = holder.clone().expect("matched");
                if r.f == F::Release {
                    if !self.buggy(Bug::RenewAfterRelease, 0.7) {
                        self.holders[r.lock] = None;
                    }
                } else if !self.buggy(Bug::RenewKeepsExpiry, 0.7) {
                    let ttl = self.policy().grant(r.ttl_ms.expect("renews name a ttl"));
                    let expires_ns = self.expiry(at_ns, ttl);
                    self.holders[r.lock] = Some(Holder { expires_ns, ..h });
                }
                Ok(self.answer(pid, r, holder.as_ref()))
            }
            _ => unreachable!("lock ops only"),
        }
    }

    /// The ok value: the names the client sent (the classic service adds its own lease's token:
    /// a service does not hand a client another holder's token).
    fn answer(&self, pid: u64, r: &Req, holder: Option<&Holder>) -> OpValue {
        let mut v = OpValue::default();
        let own = holder
            .filter(|h| h.pid == pid && self.adapter.is_none())
            .and_then(|h| h.token);
        if let Some(t) = r.token.or(own) {
            v = v.with_token(t);
        }
        if r.f == F::Renew {
            let ttl = self.policy().grant(r.ttl_ms.expect("renews name a ttl"));
            v = v.with_ttl_ms(ttl);
        }
        if let Some(g) = &r.grant {
            v = v.with_grant(g);
        }
        v
    }

    fn next_request(&mut self, w: &Worker) -> Req {
        let lock = self.rng.random_range(0..self.locks);
        let adapter = self.adapter.is_some();
        match &w.held {
            None => Req::new(F::Acquire, lock, None, Some(self.rng.random_range(2..=12))),
            Some(h) if h.renews_left > 0 || h.zombie => {
                let mut r = Req::new(
                    F::Renew,
                    h.lock,
                    self.rng.random_bool(0.8).then_some(h.token).flatten(),
                    Some(self.rng.random_range(1..=15)),
                );
                if adapter && self.rng.random_bool(0.8) {
                    r.grant = h.grant.clone();
                }
                r
            }
            Some(h) => {
                let mut r = Req::new(
                    F::Release,
                    h.lock,
                    self.rng.random_bool(0.7).then_some(h.token).flatten(),
                    None,
                );
                if adapter && self.rng.random_bool(0.7) {
                    r.grant = h.grant.clone();
                }
                r
            }
        }
    }

    /// The adapter shapes of one request about to be invoked by worker `i` at `invoke_ns`.
    fn adapt(&mut self, ws: &[Worker], i: usize, r: &mut Req, invoke_ns: &mut u64, at: &mut u64) {
        let Some(a) = self.adapter.clone() else {
            return;
        };
        if r.f == F::Acquire && self.rng.random_bool(a.meddle) {
            // Another client renews or releases a holder's grant by its token or grant id.
            let others: Vec<Held> = ws
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .filter_map(|(_, w)| w.held.clone())
                .filter(|h| h.token.is_some() || h.grant.is_some())
                .collect();
            if !others.is_empty() {
                let h = others[self.rng.random_range(0..others.len())].clone();
                let renew = self.rng.random_bool(0.5);
                let by_token =
                    h.token.is_some() && (h.grant.is_none() || self.rng.random_bool(0.5));
                *r = Req::new(
                    if renew { F::Renew } else { F::Release },
                    h.lock,
                    h.token.filter(|_| by_token),
                    renew.then(|| self.rng.random_range(1..=15)),
                );
                if !by_token {
                    r.grant = h.grant;
                }
            }
        }
        if r.f != F::Acquire && self.rng.random_bool(a.misname) && !self.past[r.lock].is_empty() {
            // It names another grant of the lock (D5).
            let k = self.rng.random_range(0..self.past[r.lock].len());
            let (token, grant) = self.past[r.lock][k].clone();
            r.token = token.filter(|_| r.token.is_some() || grant.is_none());
            r.grant = grant.filter(|_| r.token.is_none());
        }
        if r.f == F::Acquire && self.rng.random_bool(a.sessions) {
            // The session lease was last confirmed a while before: sometimes just now,
            // sometimes a whole lease before, sometimes to the ns of its bound.
            let ttl = self.policy().grant(r.ttl_ms.expect("acquires name a ttl"));
            let gap = match self.rng.random_range(0..3) {
                0 => self.rng.random_range(0..=2) * MS,
                1 => self.rng.random_range(0..=ttl) * MS,
                _ => lower_ns(Some(ttl), ppm(self.drift)).saturating_sub(
                    self.rng.random_range(0..=2) * MS + self.rng.random_range(0..=1),
                ),
            };
            r.lease_from_ns = Some(invoke_ns.saturating_sub(gap));
        }
        if a.exact && r.f != F::Release && self.rng.random_bool(0.7) {
            // It takes effect as it is sent: the service's lease ends where the model's lower
            // bound lies, to the ns.
            *at = *invoke_ns;
        }
        if self.rng.random_bool(0.1) {
            // Invoked at the very instant another process's op completed (D4).
            let same: Vec<u64> = self
                .events
                .iter()
                .filter(|(t, _, o)| {
                    *t >= *invoke_ns
                        && o.kind != OpType::Invoke
                        && o.process != Process::Client(ws[i].pid)
                })
                .map(|(t, _, _)| *t)
                .collect();
            if let Some(&t) = same.first() {
                *at = *at - *invoke_ns + t;
                *invoke_ns = t;
            }
        }
    }

    /// Aims other clients' acquires of the lock just granted at that grant's lease end, or
    /// where the model says it may be: a ns before, at, or after it.
    fn probe(&mut self, lock: usize, from_ns: u64, queued: &mut [Option<(Req, u64, Option<u64>)>]) {
        let (Some(a), Some(h)) = (self.adapter.clone(), self.holders[lock].clone()) else {
            return;
        };
        for (r, invoke_ns, at) in queued.iter_mut().flatten() {
            if r.f != F::Acquire || r.lock != lock || at.is_none() || !self.rng.random_bool(a.probe)
            {
                continue;
            }
            let end = if self.rng.random_bool(0.5) {
                h.expires_ns
            } else {
                h.bound_ns
            };
            let target = (end + self.rng.random_range(0..=2)).saturating_sub(1);
            if target >= *invoke_ns && target >= from_ns {
                *at = Some(target);
                r.quick = true;
            }
        }
    }

    /// Runs `workers` clients until `max_ops` requests were made; the history, in time order.
    fn run(mut self, workers: usize, max_ops: usize) -> Vec<Op> {
        self.next_pid = workers as u64 + 1;
        let mut ws: Vec<Worker> = (0..workers)
            .map(|i| Worker {
                pid: i as u64 + 1,
                held: None,
                ready_ns: self.rng.random_range(0..=4) * MS,
                done: false,
            })
            .collect();
        // (worker, request, invoke, effect or None when it never reaches the service)
        let mut queued: Vec<Option<(Req, u64, Option<u64>)>> = Vec::new();
        for i in 0..ws.len() {
            let mut r = self.next_request(&ws[i]);
            let mut invoke = ws[i].ready_ns;
            let mut at = invoke + self.delay();
            self.adapt(&ws, i, &mut r, &mut invoke, &mut at);
            r.invoke_ns = invoke;
            queued.push(Some((r, invoke, Some(at))));
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
            if let Some(g) = &req.grant {
                inv_value = inv_value.with_grant(g);
            }
            self.event(
                invoke_ns,
                pid,
                OpType::Invoke,
                req.f.clone(),
                req.lock,
                inv_value,
            );
            let answer = effect_ns.map(|at| (at, self.serve(pid, &req, at)));
            if let Some((at, Ok(_))) = &answer {
                if req.f == F::Acquire {
                    self.probe(req.lock, *at, &mut queued);
                }
            }
            let roll: f64 = self.rng.random_range(0.0..1.0);
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
                if req.quick {
                    at
                } else {
                    at + self.delay()
                }
            };
            let w = &mut ws[i];
            match (lost, answer) {
                (true, _) | (false, None) => {
                    self.event(
                        done_ns,
                        pid,
                        OpType::Info,
                        req.f.clone(),
                        req.lock,
                        OpValue::default(),
                    );
                    // Crashed: the worker goes on as a new process, knowing nothing.
                    w.pid = self.next_pid;
                    self.next_pid += 1;
                    w.held = None;
                }
                (false, Some((_, Ok(mut v)))) => {
                    if req.f == F::Acquire {
                        assert!(
                            self.adapter.is_some() || v.token.is_some(),
                            "grants carry tokens"
                        );
                        w.held = Some(Held {
                            lock: req.lock,
                            token: v.token,
                            grant: v.grant().map(str::to_string),
                            renews_left: self.rng.random_range(0..=2),
                            zombie: false,
                        });
                        if self.drop_tokens && self.rng.random_bool(0.3) {
                            v.token = None;
                        }
                    } else if req.f == F::Renew {
                        if w.held.as_ref().is_some_and(|h| h.zombie) {
                            w.held = None;
                        } else if let Some(h) = &mut w.held {
                            h.renews_left = h.renews_left.saturating_sub(1);
                        }
                    } else {
                        let zombie = self.adapter.as_ref().map_or(0.0, |a| a.zombie);
                        w.held = w
                            .held
                            .take()
                            .filter(|_| zombie > 0.0 && self.rng.random_bool(zombie))
                            .map(|h| Held { zombie: true, ..h });
                    }
                    self.event(done_ns, pid, OpType::Ok, req.f.clone(), req.lock, v);
                }
                (false, Some((_, Err(e)))) => {
                    if req.f != F::Acquire {
                        w.held = None;
                    }
                    self.event(
                        done_ns,
                        pid,
                        OpType::Fail,
                        req.f.clone(),
                        req.lock,
                        OpValue::default().with_error(e),
                    );
                }
            }
            let w = &mut ws[i];
            // Sometimes the holder walks away without releasing (a crash it survives, a bug).
            if w.held.is_some() && self.rng.random_bool(0.1) {
                w.held = None;
            }
            if let Some(a) = &self.adapter {
                // A restarted worker goes on with the grant it held, as a new process (D2).
                if w.held.is_some() && self.rng.random_bool(a.successor) {
                    w.pid = self.next_pid;
                    self.next_pid += 1;
                }
            }
            let ttl_hint = req.ttl_ms.unwrap_or(5);
            // Think or hold: up to one and a half leases, so renewals land before and after the
            // lease's lower bound.
            let pause = self.rng.random_range(0..=(ttl_hint * 3 / 2)) * MS;
            w.ready_ns = done_ns + pause;
            let mut next = self.next_request(&ws[i]);
            let reaches = self.rng.random_bool(0.95);
            let mut invoke = ws[i].ready_ns;
            let mut at = invoke + self.delay();
            self.adapt(&ws, i, &mut next, &mut invoke, &mut at);
            next.invoke_ns = invoke;
            queued[i] = Some((next, invoke, reaches.then_some(at)));
        }
        let salt = self.adapter.as_ref().map(|a| a.salt);
        // At one instant, events of different processes are written in an order of the
        // history's choosing (D4: file order is not real order); a process's own stay in order.
        let order = |o: &Op| {
            salt.map_or(0, |s| {
                o.process
                    .client()
                    .unwrap_or(0)
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    ^ s
            })
        };
        self.events.sort_by_key(|(t, c, o)| (*t, order(o), *c));
        self.events
            .into_iter()
            .enumerate()
            .map(|(i, (_, _, mut op))| {
                op.index = i as u64;
                op
            })
            .collect()
    }
}

/// A small random history: at most `max_ops` client ops.
fn generate(seed: u64, max_ops: usize, drop_tokens: bool) -> (Vec<Op>, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let drift = [0.0, 0.0, 0.1, 0.25][rng.random_range(0..4)];
    let bug = rng
        .random_bool(0.85)
        .then(|| BUGS[rng.random_range(0..BUGS.len())]);
    let mut sim = Sim::new(rng, drift, bug, None);
    sim.drop_tokens = drop_tokens;
    let workers = sim.rng.random_range(2..=3);
    (sim.run(workers, max_ops), drift)
}

/// A small random history of the adapter shapes: at most `max_ops` client ops.
fn generate_adapter(seed: u64, max_ops: usize) -> (Vec<Op>, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xada9_7e85);
    let drift = DRIFTS[rng.random_range(0..DRIFTS.len())];
    let style = [
        Style::Tokens,
        Style::Ids,
        Style::Neither,
        Style::Both,
        Style::Mixed,
        Style::Mixed,
    ][rng.random_range(0..6)];
    // Token bugs need tokens.
    let tokens = !matches!(style, Style::Ids | Style::Neither);
    let bugs: Vec<Bug> = BUGS
        .into_iter()
        .chain(ADAPTER_BUGS)
        .filter(|b| tokens || !matches!(b, Bug::TokenReuse | Bug::TokenDown))
        .collect();
    let bug = rng
        .random_bool(0.9)
        .then(|| bugs[rng.random_range(0..bugs.len())]);
    let policy = match rng.random_range(0..6) {
        0 => Policy::AtLeast(rng.random_range(4..=8)),
        1 => Policy::Half,
        2 => Policy::Double,
        _ => Policy::Same,
    };
    let exact = rng.random_bool(0.5);
    let adapter = Adapter {
        style,
        policy,
        sessions: [0.0, 0.5, 1.0][rng.random_range(0..3)],
        successor: [0.0, 0.2][rng.random_range(0..2)],
        meddle: [0.0, 0.15][rng.random_range(0..2)],
        misname: [0.0, 0.1][rng.random_range(0..2)],
        zombie: [0.0, 0.4][rng.random_range(0..2)],
        exact,
        // Aiming at a bound to the ns pays where leases end exactly there.
        probe: if exact {
            0.7
        } else {
            [0.0, 0.3][rng.random_range(0..2)]
        },
        salt: rng.random(),
    };
    let mut sim = Sim::new(rng, drift, bug, Some(adapter));
    let workers = sim.rng.random_range(2..=3);
    (sim.run(workers, max_ops), drift)
}

/// An adapter-shapes history whose grants are, some or all, no lease (model item 9): ok
/// acquires marked `hold: session` or `hold: transaction`, their answers without a ttl (a
/// session's or a transaction's lock sets none). The service behind it was a lease service, so
/// these histories are a test of the readings, not of a service: the checkers and the oracle
/// must agree on every one.
fn generate_holds(seed: u64, max_ops: usize) -> (Vec<Op>, f64) {
    let (mut ops, drift) = generate_adapter(seed, max_ops);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5e55_1075);
    // All sessions, all transactions, or each grant drawn.
    let mode = rng.random_range(0..4);
    for o in &mut ops {
        if o.f != F::Acquire || o.kind != OpType::Ok {
            continue;
        }
        let hold = match mode {
            0 => "session",
            1 => "transaction",
            _ => ["session", "transaction", "lease"][rng.random_range(0..3)],
        };
        if hold == "lease" {
            continue;
        }
        o.value.ttl_ms = None;
        o.value
            .extra
            .insert("hold".into(), serde_json::Value::from(hold));
    }
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
fn shrink(mut ops: Vec<Op>, in_space: fn(&[Op]) -> bool, bad: impl Fn(&[Op]) -> bool) -> Vec<Op> {
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

/// What a grant is named by: its lock, token and grant id.
type Names<'a> = (Option<&'a str>, Option<u64>, Option<&'a str>);

/// Whether a shrunk adapter-shape history stays meaningful: a renew or release names a grant
/// some acquire of its lock before it could be (a token or grant id an ok acquire carried, or
/// anything once an acquire whose answer is lost or never came was sent), and one naming
/// neither comes from a process that asked for the lock before.
fn in_adapter_space(ops: &[Op]) -> bool {
    let Ok(h) = History::new(ops.to_vec()) else {
        return false;
    };
    // (lock, invoke time) of the acquires whose answer is lost or never came.
    let lost: Vec<(Option<&str>, u64)> = h
        .operations()
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Info | Outcome::Pending))
        .map(|o| h.invoke_of(o))
        .filter(|i| i.f == F::Acquire)
        .map(|i| (i.lock.as_deref(), i.time_ns))
        .collect();
    let mut asked: HashSet<(Process, Option<&str>)> = HashSet::new();
    let mut names: HashSet<Names> = HashSet::new();
    ops.iter().all(|o| {
        let lock = o.lock.as_deref();
        match (&o.f, o.kind) {
            (F::Acquire, OpType::Invoke) => {
                asked.insert((o.process, lock));
                true
            }
            (F::Acquire, OpType::Ok) => {
                names.insert((lock, o.value.token, None));
                names.insert((lock, None, o.value.grant()));
                true
            }
            (F::Renew | F::Release, OpType::Invoke) => {
                let unknown = lost.iter().any(|&(l, t)| l == lock && t <= o.time_ns);
                match (o.value.token, o.value.grant()) {
                    (None, None) => asked.contains(&(o.process, lock)),
                    (Some(t), _) => unknown || names.contains(&(lock, Some(t), None)),
                    (None, g) => unknown || names.contains(&(lock, None, g)),
                }
            }
            _ => true,
        }
    })
}

/// Which histories a property draws, and which shrunk ones stay in its space.
struct Space {
    generate: fn(u64) -> (Vec<Op>, f64),
    in_space: fn(&[Op]) -> bool,
}

const CLASSIC: Space = Space {
    generate: |seed| generate(seed, 10, false),
    in_space,
};

const UNTOKENED: Space = Space {
    generate: |seed| generate(seed, 10, true),
    in_space,
};

const ADAPTER: Space = Space {
    generate: |seed| generate_adapter(seed, 10),
    in_space: in_adapter_space,
};

const HOLDS: Space = Space {
    generate: |seed| generate_holds(seed, 10),
    in_space: in_adapter_space,
};

/// One disagreement, shrunk.
struct Disagreement {
    seed: u64,
    fast: bool,
    truth: bool,
    ops: Vec<Op>,
    drift: f64,
}

impl Disagreement {
    fn show(&self) -> String {
        format!(
            "seed {}: checkers say {}, the oracle says {}\n{}",
            self.seed,
            if self.fast { "impossible" } else { "possible" },
            if self.truth { "impossible" } else { "possible" },
            describe(&self.ops, self.drift)
        )
    }
}

/// Runs the property over `cases` seeds: the first `keep` disagreements (shrunk), and how many
/// histories the oracle found impossible.
fn disagreements(
    cases: u64,
    seed0: u64,
    space: &Space,
    completeness: bool,
    keep: usize,
) -> (Vec<Disagreement>, u64) {
    let mut bad = Vec::new();
    let mut impossible = 0;
    for seed in seed0..seed0 + cases {
        let (ops, drift) = (space.generate)(seed);
        let h = History::new(ops.clone()).expect("the generator keeps the structure");
        let fast = fast_says_impossible(&h, drift);
        let truth = !feasible(&h, drift);
        impossible += u64::from(truth);
        let wrong = if completeness {
            fast != truth
        } else {
            fast && !truth
        };
        if wrong && bad.len() < keep {
            let disagree = |ops: &[Op]| {
                let h = History::new(ops.to_vec()).expect("checked");
                let (f, t) = (fast_says_impossible(&h, drift), !feasible(&h, drift));
                f == fast && t == truth
            };
            let ops = shrink(ops, space.in_space, disagree);
            bad.push(Disagreement {
                seed,
                fast,
                truth,
                ops,
                drift,
            });
        }
    }
    (bad, impossible)
}

/// Runs the property over `cases` seeds; returns the disagreements found (shrunk).
fn agree(cases: u64, seed0: u64, space: &Space, completeness: bool) -> (Vec<String>, u64) {
    let (bad, impossible) = disagreements(cases, seed0, space, completeness, 3);
    (bad.iter().map(Disagreement::show).collect(), impossible)
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

/// The property on 20,000 histories of `space`: no disagreement, and more than one in
/// `min_share` of them impossible (and fewer than four in five): the generator must produce
/// both kinds in earnest, or agreement means little.
fn assert_agree(space: &Space, min_share: u64) {
    let cases = 20_000;
    let (bad, impossible) = agree(cases, 0, space, true);
    assert!(bad.is_empty(), "disagreements:\n{}", bad.join("\n"));
    assert!(
        impossible > cases / min_share && impossible < cases * 4 / 5,
        "{impossible} of {cases} histories impossible: the generator is lopsided"
    );
}

#[test]
fn fast_checkers_agree_with_the_oracle() {
    assert_agree(&CLASSIC, 5);
}

/// Grants without tokens leave the grant order open: the fast rules must never report what the
/// model allows, and the search of the orders (checkers/src/search.rs) finds what they miss.
#[test]
fn fast_checkers_agree_on_untokened_grants() {
    let (bad, _) = agree(5_000, 1_000_000, &UNTOKENED, true);
    assert!(bad.is_empty(), "disagreements:\n{}", bad.join("\n"));
}

/// The adapter shapes a history shows, by name.
fn adapter_shapes(h: &History, drift: f64) -> HashSet<&'static str> {
    let ppm = ppm(drift);
    let mut seen = HashSet::new();
    if ppm != 0 && (drift * 1024.0).fract() != 0.0 {
        seen.insert("drift_not_a_binary_fraction");
    }
    // (lock, process, invoke, completion, lease start, lower bound, token, grant)
    let mut grants = Vec::new();
    // (lock, token, grant id) of each ok release, and when it returned.
    let mut released: Vec<(Names, u64)> = Vec::new();
    let mut tokened = false;
    let mut untokened = false;
    let mut policy = false;
    let mut lost_ttl = false;
    for o in h.operations() {
        let inv = h.invoke_of(o);
        let done = h.complete_of(o);
        let lock = inv.lock.as_deref();
        let (token, grant) = (inv.value.token, inv.value.grant());
        match (&inv.f, o.outcome) {
            (F::Acquire, Outcome::Info) => seen.insert("info_acquire"),
            (F::Renew, Outcome::Info) => seen.insert("info_renew"),
            (F::Release, Outcome::Info) => seen.insert("info_release"),
            (_, Outcome::Pending) => seen.insert("pending"),
            _ => false,
        };
        if matches!(o.outcome, Outcome::Info | Outcome::Pending) && inv.f != F::Release {
            lost_ttl = true;
        }
        if o.outcome == Outcome::Ok {
            let d = done.expect("ok");
            policy |= d.value.ttl_ms.is_some() && d.value.ttl_ms != inv.value.ttl_ms;
        }
        match (&inv.f, o.outcome) {
            (F::Acquire, Outcome::Ok) => {
                let v = &done.expect("ok").value;
                let from = v.extra.get("lease_from_ns").and_then(|f| f.as_u64());
                let lower = lower_ns(v.ttl_ms, ppm);
                let done_ns = done.expect("ok").time_ns;
                if let Some(from) = from {
                    if from < inv.time_ns {
                        seen.insert("lease_set_before_grant");
                    }
                    if from + lower <= done_ns {
                        seen.insert("lease_may_have_lapsed_by_the_answer");
                    }
                }
                match (v.token, v.grant()) {
                    (None, Some(_)) => seen.insert("opaque_grant"),
                    (None, None) => seen.insert("grant_with_no_name"),
                    _ => false,
                };
                tokened |= v.token.is_some();
                untokened |= v.token.is_none();
                for &(l, p, _, _, _, bound, _, _) in &grants {
                    if l == lock && p != inv.process && done_ns.abs_diff(bound) <= 1 {
                        seen.insert("answer_within_1ns_of_a_bound");
                    }
                }
                let start = from.unwrap_or(inv.time_ns);
                grants.push((
                    lock,
                    inv.process,
                    inv.time_ns,
                    done_ns,
                    start,
                    start + lower,
                    v.token,
                    v.grant(),
                ));
            }
            (F::Renew | F::Release, _) => {
                let names = |t: Option<u64>, g: Option<&str>| {
                    token.is_some() && token == t
                        || token.is_none() && grant.is_some() && grant == g
                };
                if grants
                    .iter()
                    .any(|&(l, p, .., t, g)| l == lock && p != inv.process && names(t, g))
                {
                    seen.insert("named_by_another_process");
                }
                if inv.f == F::Renew
                    && released
                        .iter()
                        .any(|&((l, t, g), at)| l == lock && at <= inv.time_ns && names(t, g))
                {
                    seen.insert("renew_after_release");
                }
                if inv.f == F::Release && o.outcome == Outcome::Ok {
                    released.push(((lock, token, grant), done.expect("ok").time_ns));
                }
            }
            _ => {}
        }
    }
    if tokened && untokened {
        seen.insert("tokened_and_tokenless_grants");
    }
    if policy {
        seen.insert("ttl_granted_other_than_asked");
        if lost_ttl {
            seen.insert("lost_answer_under_a_ttl_policy");
        }
    }
    // A completion and another process's invoke at one instant.
    let ops = &h.ops;
    for (k, a) in ops.iter().enumerate() {
        let same = ops[k + 1..]
            .iter()
            .take_while(|b| b.time_ns == a.time_ns)
            .chain(ops[..k].iter().rev().take_while(|b| b.time_ns == a.time_ns));
        if a.kind != OpType::Invoke
            && a.process.client().is_some()
            && same
                .clone()
                .any(|b| b.kind == OpType::Invoke && b.process != a.process)
        {
            seen.insert("completion_and_invoke_at_one_instant");
        }
    }
    seen
}

const ADAPTER_SHAPES: [&str; 20] = [
    "drift_not_a_binary_fraction",
    "info_acquire",
    "info_renew",
    "info_release",
    "pending",
    "lease_set_before_grant",
    "lease_may_have_lapsed_by_the_answer",
    "opaque_grant",
    "grant_with_no_name",
    "tokened_and_tokenless_grants",
    "answer_within_1ns_of_a_bound",
    "named_by_another_process",
    "renew_after_release",
    "ttl_granted_other_than_asked",
    "lost_answer_under_a_ttl_policy",
    "completion_and_invoke_at_one_instant",
    "info_acquire",
    "info_renew",
    "info_release",
    "pending",
];

#[test]
fn adapter_histories_cover_the_shapes() {
    let cases = 2_000;
    let mut counts: BTreeMap<&str, u64> = ADAPTER_SHAPES.iter().map(|s| (*s, 0)).collect();
    for seed in 0..cases {
        let (ops, drift) = generate_adapter(seed, 10);
        for s in adapter_shapes(&History::new(ops).expect("valid"), drift) {
            *counts.get_mut(s).expect("a listed shape") += 1;
        }
    }
    for (name, n) in &counts {
        assert!(
            *n >= cases / 20,
            "only {n} of {cases} histories have {name}: {counts:?}"
        );
    }
}

/// The adapter shapes: the checkers report a safety violation exactly when the model finds
/// the history impossible. Before the search of the orders (checkers/src/search.rs) the rules
/// alone missed 8 of 20,000 (three grants without tokens inside one lease's length, more
/// distinct unknown names than lost acquires), and over 100,000 they also raised 3 false
/// alarms (a renew whose answer was lost may take effect after a later accepted one).
#[test]
fn oracle_agrees_on_adapter_shapes() {
    let cases = 20_000;
    let (bad, impossible) = disagreements(cases, 0, &ADAPTER, true, usize::MAX);
    let shown: Vec<String> = bad.iter().map(|d| d.show()).collect();
    assert!(shown.is_empty(), "disagreements:\n{}", shown.join("\n"));
    // Fewer are impossible than in the classic space (about 16%): a correct service refuses
    // more of what these clients send (other grants' names, renews after a release, lapsed
    // sessions).
    assert!(
        impossible > cases / 8 && impossible < cases * 4 / 5,
        "{impossible} of {cases} histories impossible: the generator is lopsided"
    );
}

/// Grants that are no lease (model item 9: a session's lock, believed by its holder until its
/// own release or a renew of its own that did not answer ok; a transaction's, no hold): the
/// fast rules, the search and the oracle read them alike.
#[test]
fn oracle_agrees_on_session_and_transaction_holds() {
    let cases = 20_000;
    let (bad, impossible) = disagreements(cases, 0, &HOLDS, true, 3);
    let shown: Vec<String> = bad.iter().map(|d| d.show()).collect();
    assert!(shown.is_empty(), "disagreements:\n{}", shown.join("\n"));
    assert!(
        impossible > cases / 10 && impossible < cases * 4 / 5,
        "{impossible} of {cases} histories impossible: the generator is lopsided"
    );
}

/// Not a check: prints every disagreement of the adapter shapes (up to `SURVEY_CASES`
/// histories, default 20,000), shrunk, for sorting into classes.
#[test]
#[ignore = "a survey for people: prints every disagreement, asserts nothing"]
fn survey_adapter_disagreements() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(d)
    };
    let (cases, seed0) = (env("SURVEY_CASES", 20_000), env("SURVEY_SEED0", 0));
    // SURVEY_SPACE: adapter (the default), classic or untokened.
    let space = match std::env::var("SURVEY_SPACE").as_deref() {
        Ok("classic") => &CLASSIC,
        Ok("untokened") => &UNTOKENED,
        Ok("holds") => &HOLDS,
        _ => &ADAPTER,
    };
    let start = std::time::Instant::now();
    let (bad, impossible) = disagreements(cases, seed0, space, true, usize::MAX);
    let readings = [
        (
            "D1",
            Before {
                d1: true,
                ..Before::default()
            },
        ),
        (
            "D2",
            Before {
                d2: true,
                ..Before::default()
            },
        ),
        (
            "D6",
            Before {
                d6: true,
                ..Before::default()
            },
        ),
        (
            "D8",
            Before {
                d8: true,
                ..Before::default()
            },
        ),
    ];
    let mut classes: BTreeMap<String, u64> = BTreeMap::new();
    for d in &bad {
        let h = History::new(d.ops.clone()).expect("shrunk");
        // The decisions whose old reading alone would agree with the checkers.
        let agree: Vec<&str> = readings
            .iter()
            .filter(|(_, b)| feasible_as(&h, d.drift, *b) != d.fast)
            .map(|(n, _)| *n)
            .collect();
        let kinds: std::collections::BTreeSet<&str> = checkers::check(
            &h,
            &CheckConfig {
                drift: d.drift,
                ..CheckConfig::default()
            },
        )
        .violations
        .iter()
        .filter(|v| LOCK_SAFETY.contains(&v.kind))
        .map(|v| v.kind.as_str())
        .collect();
        let class = format!(
            "{} | old reading agrees: {} | checkers: {}",
            if d.fast { "false alarm" } else { "missed" },
            if agree.is_empty() {
                "none".to_string()
            } else {
                agree.join(",")
            },
            kinds.into_iter().collect::<Vec<_>>().join(",")
        );
        println!("CLASS {class}\n{}", d.show());
        *classes.entry(class).or_default() += 1;
    }
    for (c, n) in &classes {
        println!("{n:6} {c}");
    }
    println!(
        "{} disagreements, {impossible} impossible, of {cases} histories in {:.1} s",
        bad.len(),
        start.elapsed().as_secs_f64()
    );
}

/// The oracle itself, on the hand-written fixtures: every fixture of lock ops only is possible
/// exactly when its expected results hold no lock safety violation (the near misses of the
/// model's decisions, `model-d*`, among them).
#[test]
fn oracle_agrees_with_the_lock_fixtures() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        paths.push(entry.expect("entry").path());
    }
    paths.sort();
    let mut checked = 0;
    for path in paths {
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
        // Lease evidence (`lease_last_ok_ns`, `key_at_revision`) judges kinds outside the
        // model (`grant-on-expired-lease`, `grant-without-key`): those fixtures are possible
        // by the model unless a lock safety violation is expected too. `lease_from_ns` is in it.
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
    assert!(checked >= 40, "only {checked} lock fixtures checked");
}
