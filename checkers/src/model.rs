//! The history digested once for every checker: client ops with their lock or key interned,
//! grants with their lease bounds and definite holds, and the nemesis faults.

use crate::digest::Digest;
use crate::faults::Faults;
use crate::{sort_violations, CheckConfig, CheckOutput};
use history::{History, Op, Outcome};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// `ClientOp::target` of an op that names no lock (lock op) or no key (store op).
pub const NO_TARGET: u32 = u32::MAX;
/// `Model::grant_of` for an op that uses no known grant.
pub const NO_GRANT: u32 = u32::MAX;
/// `ClientOp::error` of an op whose completion reported no error (or that never completed).
pub const NO_ERROR: u32 = u32::MAX;

/// A client function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Func {
    Acquire,
    Renew,
    Release,
    Read,
    Write,
}

impl Func {
    pub fn as_str(self) -> &'static str {
        match self {
            Func::Acquire => "acquire",
            Func::Renew => "renew",
            Func::Release => "release",
            Func::Read => "read",
            Func::Write => "write",
        }
    }
    pub fn is_lock_op(self) -> bool {
        matches!(self, Func::Acquire | Func::Renew | Func::Release)
    }
}

/// A client operation, flattened from its invoke and completion events: everything the
/// checkers read of them, so the events themselves need not be kept. Absent numbers are
/// sentinels rather than `Option`s where that keeps the op small (a 10M-event history has
/// five million of these); read them through the accessors.
#[derive(Debug, Clone)]
pub struct ClientOp {
    pub func: Func,
    pub outcome: Outcome,
    pub process: u64,
    /// Interned lock (lock ops) or key (store ops), or [`NO_TARGET`].
    pub target: u32,
    pub invoke_ns: u64,
    /// The completion time, or `u64::MAX` for an op the history leaves pending: see
    /// [`ClientOp::complete_ns`].
    pub done_ns: u64,
    /// The index naming this op in violations: its completion's, else its invoke's.
    pub index: u64,
    /// An acquire's token is the one granted (its ok value); other ops carry the token they use
    /// on their invoke. `u64::MAX` when there is none (a token that large reads as none): see
    /// [`ClientOp::token`].
    pub token_raw: u64,
    /// Granted (ok value) else requested (invoke value), or `u64::MAX`: see
    /// [`ClientOp::ttl_ms`].
    pub ttl_raw: u64,
    /// The invoke's `ttl_ms`, or `u64::MAX`: see [`ClientOp::requested_ttl_ms`].
    pub requested_ttl_ms: u64,
    /// The completion's `seq`, or `u64::MAX`: see [`ClientOp::seq`].
    pub seq: u64,
    /// A write's value (its invoke's, else its completion's), any other op's completion value,
    /// or `i64::MIN`: see [`ClientOp::value`].
    pub value: i64,
    /// Interned completion `error` (see [`Model::errors`]), or [`NO_ERROR`].
    pub error: u32,
    /// Either event is marked `final` (the counter workload's closing read).
    pub is_final: bool,
}

impl ClientOp {
    /// The completion time, or "never" for an op the history leaves pending.
    pub fn complete_or_max(&self) -> u64 {
        self.done_ns
    }
    pub fn complete_ns(&self) -> Option<u64> {
        (self.done_ns != u64::MAX).then_some(self.done_ns)
    }
    pub fn token(&self) -> Option<u64> {
        (self.token_raw != u64::MAX).then_some(self.token_raw)
    }
    pub fn ttl_ms(&self) -> Option<u64> {
        (self.ttl_raw != u64::MAX).then_some(self.ttl_raw)
    }
    pub fn requested_ttl_ms(&self) -> Option<u64> {
        (self.requested_ttl_ms != u64::MAX).then_some(self.requested_ttl_ms)
    }
    pub fn seq(&self) -> Option<u64> {
        (self.seq != u64::MAX).then_some(self.seq)
    }
    pub fn value(&self) -> Option<i64> {
        (self.value != i64::MIN).then_some(self.value)
    }
}

/// An ok acquire and what the history proves about its lease.
#[derive(Debug, Clone)]
pub struct Grant {
    /// Position in `Model::ops`.
    pub op: usize,
    pub lock: u32,
    pub process: u64,
    pub token: Option<u64>,
    pub ttl_ms: Option<u64>,
    pub invoke_ns: u64,
    pub complete_ns: u64,
    /// The lease is alive at least until then: the grant's invoke plus `ttl*(1-drift)`, pushed
    /// on by each ok renew invoked before it ran out.
    pub lease_lb_ns: u64,
    /// The lease is surely dead after this (the latest ok grant/renew completion plus
    /// `ttl*(1+drift)`); `None` when an indeterminate renew may take effect at any time, or the
    /// ttl is unknown.
    pub surely_dead_ns: Option<u64>,
    /// Position in `Model::ops` of the process's first release of this grant.
    pub release_op: Option<usize>,
    /// Positions in `Model::ops` of the ok renews that extended `lease_lb_ns`, in order: each
    /// was invoked before the bound the previous ones proved, so together they prove it.
    pub lease_chain: Vec<usize>,
    /// `[start, end)` during which the process surely held the lock; `None` if empty.
    pub hold: Option<(u64, u64)>,
    /// Whenever the service granted it (somewhere in `[invoke_ns, complete_ns]`), the grant
    /// stayed alive until at least this time: the earliest of its release's invoke and
    /// `lease_lb_ns`. It does not depend on the grant point, so it bounds every grant point
    /// of another grant that came after this one (the precedence inference in `tokens`).
    pub alive_until_ns: u64,
}

/// The digested history. It owns everything the checkers read: the events are not kept.
#[derive(Debug)]
pub struct Model {
    pub drift: f64,
    /// Events in the history (client and nemesis).
    pub events: u64,
    /// The time of the last event (the length of the test as recorded).
    pub end_time_ns: u64,
    pub locks: Vec<String>,
    pub keys: Vec<String>,
    /// Interned completion errors ([`ClientOp::error`]).
    pub errors: Vec<String>,
    /// Nemesis events, in history order.
    pub nemesis: Vec<Op>,
    /// `(position in ops, lease_last_ok_ns, lease_ttl_ms)` of every completion carrying the
    /// adapter's lease evidence, by position.
    pub lease_evidence: Vec<(usize, u64, u64)>,
    /// Client lock and store ops, in invoke order.
    pub ops: Vec<ClientOp>,
    pub grants: Vec<Grant>,
    /// For each op in `ops`, the grant whose token it uses (renew, release, read, write), or
    /// [`NO_GRANT`]. A lock op uses its process's latest grant of that lock with that token; a
    /// store op names a key, not a lock, so it uses its process's latest grant with that token.
    pub grant_of: Vec<u32>,
    pub faults: Faults,
    pub ok_acquires: u64,
    /// Client ops the model could not place: a lock op without a lock, a store op without a key.
    pub unplaced: u64,
}

/// `ttl*(1-drift)` in ns, rounded down: a lower bound must not be overstated.
pub fn ttl_lower_ns(ttl_ms: u64, drift: f64) -> u64 {
    let f = (ttl_ms as f64) * 1e6 * (1.0 - drift).max(0.0);
    f.floor() as u64
}

/// `ttl*(1+drift)` in ns, rounded up: an upper bound must not be understated.
pub fn ttl_upper_ns(ttl_ms: u64, drift: f64) -> u64 {
    let f = (ttl_ms as f64) * 1e6 * (1.0 + drift.max(0.0));
    f.ceil() as u64
}

/// FxHash, as in rustc: the model's maps are only looked up, never iterated, so a fast hash
/// that resists no adversary is fine and the output stays deterministic.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

impl Model {
    /// Digests an in-memory history: the front end of the same pass a history file goes
    /// through ([`crate::check_path`]).
    pub fn new(h: &History, cfg: &CheckConfig) -> Model {
        let digest = Digest::of_history(h);
        assert!(
            digest.error.is_none(),
            "a History is validated by History::new: {:?}",
            digest.error
        );
        Model::from_digest(digest, cfg)
    }

    pub(crate) fn from_digest(d: Digest, cfg: &CheckConfig) -> Model {
        let drift = if cfg.drift.is_finite() {
            cfg.drift.max(0.0)
        } else {
            0.0
        };
        let mut ops = d.ops;
        let mut grants: Vec<Grant> = Vec::new();
        let mut grant_of = Vec::with_capacity(ops.len());
        // (process, lock, token) -> grant; (process, token) -> grant
        let mut by_lock_token: FxMap<(u64, u32, u64), u32> = FxMap::default();
        let mut by_token: FxMap<(u64, u64), u32> = FxMap::default();
        let mut ok_acquires = 0;
        let mut unplaced = 0;
        // Bounded by the ops.
        for (pos, op) in ops.iter().enumerate() {
            let (func, p, target, token, ttl_ms) =
                (op.func, op.process, op.target, op.token(), op.ttl_ms());
            if target == NO_TARGET {
                unplaced += 1;
            }
            let mut uses = NO_GRANT;
            if target != NO_TARGET {
                match func {
                    Func::Acquire if op.outcome == Outcome::Ok => {
                        ok_acquires += 1;
                        let g = grants.len() as u32;
                        if let Some(t) = token {
                            by_lock_token.insert((p, target, t), g);
                            by_token.insert((p, t), g);
                        }
                        let complete_ns = op.complete_ns().expect("an ok op has completed");
                        grants.push(Grant {
                            op: pos,
                            lock: target,
                            process: p,
                            token,
                            ttl_ms,
                            invoke_ns: op.invoke_ns,
                            complete_ns,
                            lease_lb_ns: match ttl_ms {
                                Some(t) => op.invoke_ns.saturating_add(ttl_lower_ns(t, drift)),
                                // No ttl, no lower bound: the grant proves no hold.
                                None => op.invoke_ns,
                            },
                            surely_dead_ns: ttl_ms
                                .map(|t| complete_ns.saturating_add(ttl_upper_ns(t, drift))),
                            release_op: None,
                            lease_chain: Vec::new(),
                            hold: None,
                            alive_until_ns: 0,
                        });
                    }
                    Func::Acquire => {}
                    Func::Renew | Func::Release => {
                        if let Some(&g) = token.and_then(|t| by_lock_token.get(&(p, target, t))) {
                            uses = g;
                        }
                    }
                    Func::Read | Func::Write => {
                        if let Some(&g) = token.and_then(|t| by_token.get(&(p, t))) {
                            uses = g;
                        }
                    }
                }
            }
            if uses != NO_GRANT {
                let g = &mut grants[uses as usize];
                match func {
                    Func::Renew => extend_lease(g, op, pos, drift),
                    Func::Release if g.release_op.is_none() => g.release_op = Some(pos),
                    _ => {}
                }
            }
            grant_of.push(uses);
        }
        for g in &mut grants {
            let mut end = g.lease_lb_ns;
            if let Some(r) = g.release_op {
                end = end.min(ops[r].invoke_ns);
            }
            g.alive_until_ns = end;
            g.hold = (g.complete_ns < end).then_some((g.complete_ns, end));
        }
        ops.shrink_to_fit();
        let mut lease_evidence = d.lease_evidence;
        lease_evidence.sort_unstable();
        Model {
            drift,
            events: d.events,
            end_time_ns: d.end_time_ns,
            faults: Faults::from_nemesis(&d.nemesis, d.end_time_ns),
            locks: d.locks,
            keys: d.keys,
            errors: d.errors,
            nemesis: d.nemesis,
            lease_evidence,
            ops,
            grants,
            grant_of,
            ok_acquires,
            unplaced,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    pub fn lock_name(&self, id: u32) -> &str {
        self.locks.get(id as usize).map_or("?", |s| s.as_str())
    }

    pub fn key_name(&self, id: u32) -> &str {
        self.keys.get(id as usize).map_or("?", |s| s.as_str())
    }

    /// The name of an op's lock or key.
    pub fn target_name(&self, op: &ClientOp) -> &str {
        if op.func.is_lock_op() {
            self.lock_name(op.target)
        } else {
            self.key_name(op.target)
        }
    }

    /// The error a failed or indeterminate op reported.
    pub fn error_of(&self, op: &ClientOp) -> Option<&str> {
        self.errors.get(op.error as usize).map(|s| s.as_str())
    }

    /// Fills each violation's active faults and sorts, so every checker's output is final
    /// whether it ran alone or with the others.
    pub fn finish(&self, out: &mut CheckOutput) {
        for v in out.violations.iter_mut().chain(out.warnings.iter_mut()) {
            v.ops.sort_unstable();
            v.ops.dedup();
            if v.nemesis.is_empty() {
                v.nemesis = self.faults.active(v.window_ns[0], v.window_ns[1]);
            }
        }
        sort_violations(&mut out.violations);
        sort_violations(&mut out.warnings);
    }
}

/// Applies one renew of `g`, met in invoke order.
fn extend_lease(g: &mut Grant, renew: &ClientOp, pos: usize, drift: f64) {
    let ttl = renew.ttl_ms().or(g.ttl_ms);
    match renew.outcome {
        Outcome::Ok => {
            // Continuity: a renew invoked after the lower bound may have found the lease gone,
            // so it proves nothing about the time in between; later renews are later still.
            if let Some(t) = ttl {
                if renew.invoke_ns <= g.lease_lb_ns {
                    let lb = renew.invoke_ns.saturating_add(ttl_lower_ns(t, drift));
                    if lb > g.lease_lb_ns {
                        g.lease_lb_ns = lb;
                        g.lease_chain.push(pos);
                    }
                }
            }
            let done = renew.complete_ns().expect("an ok op has completed");
            g.surely_dead_ns = match (g.surely_dead_ns, ttl) {
                (Some(sd), Some(t)) => Some(sd.max(done.saturating_add(ttl_upper_ns(t, drift)))),
                _ => None,
            };
        }
        // It may take effect late, and then the lease lives on: no bound is sure.
        Outcome::Info | Outcome::Pending => g.surely_dead_ns = None,
        Outcome::Fail => {}
    }
}
