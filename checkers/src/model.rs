//! The history digested once for every checker: client ops with their lock or key interned,
//! grants with their lease bounds and definite holds, and the nemesis faults.

use crate::faults::Faults;
use crate::{sort_violations, CheckOutput};
use history::{ActiveFault, Op, Outcome};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Index;

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
/// checkers read of them, so the events themselves need not be kept. Numbers are exactly what
/// the file says; whether the file said one at all is kept in presence bits (a 10M-event
/// history has five million of these, so no `Option` padding), read through the accessors.
#[derive(Debug, Clone)]
pub struct ClientOp {
    pub func: Func,
    pub outcome: Outcome,
    pub process: u64,
    /// Interned lock (lock ops) or key (store ops), or [`NO_TARGET`].
    pub target: u32,
    pub invoke_ns: u64,
    /// The index naming this op in violations: its completion's, else its invoke's.
    pub index: u64,
    /// Interned completion `error` (see [`Model::errors`]), or [`NO_ERROR`].
    pub error: u32,
    /// Either event is marked `final` (the counter workload's closing read).
    pub is_final: bool,
    /// Which of the fields below the file gave (`HAS_*`).
    present: u8,
    /// The completion's time; meaningful unless the op is pending.
    done_ns: u64,
    /// An acquire's token is the one granted (its ok value); other ops carry the token they use
    /// on their invoke (else their completion's).
    token: u64,
    /// Granted (ok value) else requested (invoke value).
    ttl_ms: u64,
    /// The invoke's `ttl_ms`.
    requested_ttl_ms: u64,
    /// The completion's `seq`.
    seq: u64,
    /// A write's value (its invoke's, else its completion's), any other op's completion value.
    value: i64,
}

const HAS_TOKEN: u8 = 1;
const HAS_TTL: u8 = 2;
const HAS_REQUESTED_TTL: u8 = 4;
const HAS_SEQ: u8 = 8;
const HAS_VALUE: u8 = 16;
/// A renew or release whose token no grant of its lock carries, while grants without a
/// readable token exist: it may name any of them, so its effect on each is indeterminate.
const AMBIGUOUS: u8 = 32;
/// A release, or a renew that did not answer ok, sent by the holder of a session grant (model
/// item 9): from its invoke the holder may know its session is over, so its belief may end
/// there (as if the op were a release that may take effect in its window).
const SESSION_END: u8 = 64;
/// The ttl was set by the grant that is no lease whose epoch the op is in (model item 9), and
/// the run's ttl policy does not replace it.
const HOLD_TTL: u8 = 128;

/// The ttl a session grant counts with (model item 9): its holder believes it holds the lock
/// until told otherwise, whatever the time. A million seconds (over eleven days) outlasts any
/// history, and stays far from overflowing the nanosecond bounds.
pub const SESSION_TTL_MS: u64 = 1_000_000_000;

impl ClientOp {
    /// An invoked op, pending until [`ClientOp::complete`] says how it ended.
    pub(crate) fn invoked(
        func: Func,
        process: u64,
        target: u32,
        invoke_ns: u64,
        index: u64,
        is_final: bool,
    ) -> ClientOp {
        ClientOp {
            func,
            outcome: Outcome::Pending,
            process,
            target,
            invoke_ns,
            index,
            error: NO_ERROR,
            is_final,
            present: 0,
            done_ns: 0,
            token: 0,
            ttl_ms: 0,
            requested_ttl_ms: 0,
            seq: 0,
            value: 0,
        }
    }

    pub(crate) fn complete(&mut self, outcome: Outcome, done_ns: u64) {
        debug_assert!(outcome != Outcome::Pending);
        self.outcome = outcome;
        self.done_ns = done_ns;
    }

    fn get<T: Copy>(&self, bit: u8, v: T) -> Option<T> {
        (self.present & bit != 0).then_some(v)
    }

    pub(crate) fn set_token(&mut self, t: Option<u64>) {
        self.set(HAS_TOKEN, t.is_some());
        self.token = t.unwrap_or(0);
    }
    pub(crate) fn set_ttl_ms(&mut self, t: Option<u64>) {
        self.set(HAS_TTL, t.is_some());
        self.ttl_ms = t.unwrap_or(0);
    }
    pub(crate) fn set_requested_ttl_ms(&mut self, t: Option<u64>) {
        self.set(HAS_REQUESTED_TTL, t.is_some());
        self.requested_ttl_ms = t.unwrap_or(0);
    }
    pub(crate) fn set_seq(&mut self, s: Option<u64>) {
        self.set(HAS_SEQ, s.is_some());
        self.seq = s.unwrap_or(0);
    }
    pub(crate) fn set_value(&mut self, v: Option<i64>) {
        self.set(HAS_VALUE, v.is_some());
        self.value = v.unwrap_or(0);
    }
    fn set(&mut self, bit: u8, on: bool) {
        if on {
            self.present |= bit;
        } else {
            self.present &= !bit;
        }
    }

    /// The completion time, or "never" (`u64::MAX`) for an op the history leaves pending: for
    /// comparisons where a pending op's window reaches past every time.
    pub fn complete_or_max(&self) -> u64 {
        self.complete_ns().unwrap_or(u64::MAX)
    }
    pub fn complete_ns(&self) -> Option<u64> {
        (self.outcome != Outcome::Pending).then_some(self.done_ns)
    }
    pub fn token(&self) -> Option<u64> {
        self.get(HAS_TOKEN, self.token)
    }
    pub fn ttl_ms(&self) -> Option<u64> {
        self.get(HAS_TTL, self.ttl_ms)
    }
    pub fn requested_ttl_ms(&self) -> Option<u64> {
        self.get(HAS_REQUESTED_TTL, self.requested_ttl_ms)
    }
    pub fn seq(&self) -> Option<u64> {
        self.get(HAS_SEQ, self.seq)
    }
    pub fn value(&self) -> Option<i64> {
        self.get(HAS_VALUE, self.value)
    }

    /// Sets the ttl a grant that is no lease gives the ops of its epoch (model item 9): the
    /// run's ttl policy (model item 7) leaves it.
    pub(crate) fn set_ttl_by_hold(&mut self, t: Option<u64>) {
        self.set_ttl_ms(t);
        self.set(HOLD_TTL, true);
    }

    pub(crate) fn ttl_set_by_hold(&self) -> bool {
        self.present & HOLD_TTL != 0
    }

    pub(crate) fn set_ambiguous(&mut self) {
        self.set(AMBIGUOUS, true);
    }

    pub(crate) fn set_session_end(&mut self) {
        self.set(SESSION_END, true);
    }

    /// Whether this op may end its holder's belief in a session grant (see `SESSION_END`).
    pub fn session_end(&self) -> bool {
        self.present & SESSION_END != 0
    }

    /// The outcome as it bears on the leases this op acts on: an ok op whose name is ambiguous
    /// (see `AMBIGUOUS`) may have acted on any of its candidates, so on each it is
    /// indeterminate; a refused op that may end a session's belief (see `SESSION_END`) may
    /// have ended it.
    pub fn lease_outcome(&self) -> Outcome {
        let ambiguous = self.outcome == Outcome::Ok && self.present & AMBIGUOUS != 0;
        if ambiguous || (self.outcome == Outcome::Fail && self.session_end()) {
            Outcome::Info
        } else {
            self.outcome
        }
    }
}

/// A position in `Model::ops`, where a grant keeps many (its lease's ops, its holds): 32 bits
/// keep a 10M-event model small, and a history would need 4 billion client ops to outgrow it.
pub type OpPos = u32;

/// `[start_ns, end_ns)` during which a process surely held a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Position in `Model::ops` of the ok renew that opened this segment after a gap; `None`
    /// for the segment the grant itself opens.
    pub opened_by: Option<OpPos>,
    /// What ended it.
    pub end: SpanEnd,
}

/// What ends a lease's span: a release (position in `Model::ops`) or a lease lower bound set
/// by the grant itself (`None`) or by a renew (its position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanEnd {
    Release(OpPos),
    Lease(Option<OpPos>),
}

/// An ok acquire and what the history proves about its lease.
///
/// Every bound here is a reading of the ground-truth model (docs/checkers.md): a lease set at
/// instant `x` with ttl `T` lives at least until `x + T*(1-drift)`; an ok renew *replaces* that
/// bound from its own instant (shorter or longer); an indeterminate renew may or may not have
/// applied, so it can only shorten it; a release the process invoked may end it at its invoke.
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
    /// Positions in `Model::ops` of the renews and releases that act on this grant's lease, in
    /// invoke order: those that name it, from any process (by its token; else by the
    /// service's grant id; else, sent by its own process with neither, while it was that
    /// process's latest grant of the lock).
    pub epoch_ops: Vec<OpPos>,
    /// The definite holds, in time order: from the grant's ok until the first release invoked
    /// or the lease's lower bound; an ok renew invoked after the bound had passed opens a new
    /// segment at its completion.
    pub holds: Vec<Segment>,
    /// Position of the first release that names this grant, any outcome.
    pub release_op: Option<OpPos>,
    /// The lease's lower bound after the last renew, as the holds follow it.
    pub lease_lb_ns: u64,
    /// The lease is surely dead after this: the latest completion of an op that could have set
    /// it last, plus its `ttl*(1+drift)`; `None` when an op that never completed may set it at
    /// any time, or a ttl is unknown.
    pub surely_dead_ns: Option<u64>,
    /// Whenever the service granted it (somewhere in `[invoke_ns, complete_ns]`), no other grant
    /// of the lock could take effect from then until at least this time: the end of its span
    /// counted from its invoke ([`Model::span_end`]). It does not depend on the grant point, so
    /// it bounds every grant point of another grant that came after this one.
    pub alive_until_ns: u64,
}

impl Grant {
    /// The end of the last definite hold, or the grant's completion when it proves none.
    pub fn hold_end_ns(&self) -> u64 {
        self.holds.last().map_or(self.complete_ns, |s| s.end_ns)
    }
}

/// The digested history. It owns everything the checkers read: the events are not kept.
#[derive(Debug)]
pub struct Model {
    pub drift: Drift,
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
    /// `(position in ops, evidence)` of every completion carrying the adapter's read of the
    /// grant's lock key at its answer's revision, by position.
    pub key_evidence: Vec<(usize, crate::evidence::KeyEvidence)>,
    /// `(position in ops, lease_from_ns)` of the ok acquires whose lease was set before the
    /// grant (etcd's session lease): that lease surely lasts until `lease_from_ns` plus its
    /// ttl, whenever the grant took effect. By position.
    pub lease_from: Vec<(usize, u64)>,
    /// `(position in ops, round)` of every acquire completion made in a contention round
    /// (`--arrivals rounds:...`), by position.
    pub rounds: Vec<(usize, u64)>,
    /// `(position in ops, wait_ms)` of the acquires that recorded how long they asked the
    /// service to wait (`value.wait_ms`), by position.
    pub waits: Vec<(usize, u64)>,
    /// `(position in ops, transfer)` of the ops that name the critical section they belong to
    /// (`value.transfer`, the bank workload's), by position.
    pub transfers: Vec<(usize, u64)>,
    /// Positions in `ops` of the ok acquires whose grant is a session's (`hold: session`,
    /// model item 9), sorted.
    pub sessions: Vec<usize>,
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
    /// requested ttl -> (shortest, longest) ttl granted to answered requests for it: the
    /// run's ttl policy, for leases whose answer was lost.
    pub(crate) ttl_policy: FxMap<u64, (u64, u64)>,
    /// `(position, interned grant id)` of the ops that carry a grant id (`value.grant`),
    /// sorted by position. Ids are interned across locks; equal ids are the same string.
    pub grant_named: Vec<(OpPos, u32)>,
    /// Grants without a token that fell out of the candidates an ambiguous token may name
    /// (more than `walk::UNTOKENED_CANDIDATES_MAX` of one lock).
    pub ambiguity_capped: u64,
}

/// The clock-rate error a service claims to tolerate, in whole parts per million: every bound
/// is integer arithmetic (`1 ms * (10^6 - ppm) = (10^6 - ppm) ns`), so no drift loses or gains
/// a nanosecond to floating point (0.07 and 0.1 are not binary fractions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Drift {
    ppm: u64,
}

/// One, in ppm.
const PPM_ONE: u64 = 1_000_000;

impl Drift {
    /// The nearest whole ppm of a fraction (`--drift 0.07` is 70,000 ppm exactly); a fraction
    /// that is not finite or below 0 is no drift, one at or above 1 is a lease with no lower
    /// bound.
    pub fn from_fraction(drift: f64) -> Drift {
        let ppm = if drift.is_finite() && drift > 0.0 {
            (drift * PPM_ONE as f64).round().min(PPM_ONE as f64) as u64
        } else {
            0
        };
        Drift { ppm }
    }

    pub fn from_ppm(ppm: u64) -> Drift {
        Drift {
            ppm: ppm.min(PPM_ONE),
        }
    }

    pub fn ppm(self) -> u64 {
        self.ppm
    }

    /// `ttl*(1-drift)` in ns, exact.
    pub fn lower_ns(self, ttl_ms: u64) -> u64 {
        ttl_ms.saturating_mul(PPM_ONE - self.ppm)
    }

    /// `ttl*(1+drift)` in ns, exact.
    pub fn upper_ns(self, ttl_ms: u64) -> u64 {
        ttl_ms.saturating_mul(PPM_ONE + self.ppm)
    }
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

/// What the sentences of a violation read of the history: the whole [`Model`], or the part a
/// streaming reader keeps (`digest::Live`), so that a rule renders what it finds the same way
/// whichever found it.
pub(crate) trait View {
    /// The op at a position (one the reader keeps).
    fn op(&self, pos: usize) -> &ClientOp;
    fn lock_name(&self, id: u32) -> &str;
    fn is_session(&self, g: &Grant) -> bool;
    /// See [`Model::lease_set_before`].
    fn lease_set_before(&self, g: &Grant) -> Option<u64>;
    /// The time of the last event read.
    fn end_time_ns(&self) -> u64;
    fn drift(&self) -> Drift;
}

impl View for Model {
    fn op(&self, pos: usize) -> &ClientOp {
        &self.ops[pos]
    }
    fn lock_name(&self, id: u32) -> &str {
        Model::lock_name(self, id)
    }
    fn is_session(&self, g: &Grant) -> bool {
        Model::is_session(self, g)
    }
    fn lease_set_before(&self, g: &Grant) -> Option<u64> {
        Model::lease_set_before(self, g)
    }
    fn end_time_ns(&self) -> u64 {
        self.end_time_ns
    }
    fn drift(&self) -> Drift {
        self.drift
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
pub(crate) type FxSet<K> = std::collections::HashSet<K, BuildHasherDefault<FxHasher>>;

/// `map.remove(key)`, with no hash taken when the map is empty: the maps by op position that
/// the reader empties as it walks (grant names, transfers, rounds, waits) are asked at every
/// op, and on most histories hold nothing.
#[inline]
pub(crate) fn take<V>(map: &mut FxMap<OpPos, V>, key: OpPos) -> Option<V> {
    if map.is_empty() {
        None
    } else {
        map.remove(&key)
    }
}

impl Model {
    /// The end of grant `g`'s span if the service granted it at instant `grant_ns`: the
    /// earliest time from which another grant of the lock could legally take effect, and what
    /// sets it. Each op of the epoch is taken at its earliest instant (its invoke), which gives
    /// the earliest end: an ok renew replaces the bound from its invoke, an indeterminate renew
    /// may apply (so it can shorten the bound, never lengthen it), an ok or indeterminate
    /// release may free the lock from its invoke. A failed op changed nothing. An ok renew
    /// after a gap still counts: the service accepted it, so its lease was still the current
    /// one and nobody else had been granted in between.
    ///
    /// A grant whose lease was set before it (the adapter's `lease_from_ns`, etcd's session
    /// lease) has that lease counted from the evidence instead of from `grant_ns`.
    ///
    /// The end never decreases when `grant_ns` grows: the chain sweep in `mutex` relies on it.
    pub fn span_end(&self, g: &Grant, grant_ns: u64) -> (u64, SpanEnd) {
        self.span_end_until(g, grant_ns, u64::MAX)
    }

    /// [`Model::span_end`] counting only the ops invoked by `cutoff_ns`: what the span was
    /// sure to be up to then (an op takes effect no earlier than its invoke, so later ones
    /// cannot have changed it before).
    pub fn span_end_until(&self, g: &Grant, grant_ns: u64, cutoff_ns: u64) -> (u64, SpanEnd) {
        span_end_until(self, g, grant_ns, cutoff_ns)
    }

    /// The longest ttl acquire or renew `op` may have set: the granted one when answered;
    /// when its answer was lost, the longest the run granted to the same request (model item
    /// 7) or the requested one, whichever is longer (a lock that is not stuck is never called
    /// stuck on a guess), else the requested one.
    pub fn upper_ttl_ms(&self, op: &ClientOp) -> Option<u64> {
        upper_ttl_ms(&self.ttl_policy, op)
    }

    /// Whether op `pos` named its grant by the service's grant id (`value.grant`).
    pub fn names_grant(&self, pos: usize) -> bool {
        self.grant_id_of(pos).is_some()
    }

    /// The interned grant id op `pos` carries (`value.grant`), if any.
    pub fn grant_id_of(&self, pos: usize) -> Option<u32> {
        self.grant_named
            .binary_search_by_key(&(pos as OpPos), |e| e.0)
            .ok()
            .map(|i| self.grant_named[i].1)
    }

    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// The `wait_ms` acquire `pos` asked for, if it recorded one.
    pub fn wait_ms_of(&self, pos: usize) -> Option<u64> {
        lease_from_of(&self.waits, pos)
    }

    /// The critical section (`transfer`) op `pos` belongs to, if it names one.
    pub fn transfer_of(&self, pos: usize) -> Option<u64> {
        lease_from_of(&self.transfers, pos)
    }

    /// Per key, whether an op of a named critical section (`transfer`) touched it: such a
    /// register is an account, not a counter.
    pub fn transfer_keys(&self) -> Vec<bool> {
        let mut keys = vec![false; self.keys.len()];
        for &(pos, _) in &self.transfers {
            let o = &self.ops[pos];
            if !o.func.is_lock_op() && o.target != NO_TARGET {
                keys[o.target as usize] = true;
            }
        }
        keys
    }

    /// The adapter's `lease_from_ns` for grant `g`, when its lease was set before the grant.
    pub fn lease_set_before(&self, g: &Grant) -> Option<u64> {
        lease_from_of(&self.lease_from, g.op)
    }

    /// Whether grant `g` is a session's (`hold: session`, model item 9): believed by its
    /// holder until something tells it otherwise.
    pub fn is_session(&self, g: &Grant) -> bool {
        self.sessions.binary_search(&g.op).is_ok()
    }

    /// If acquire or renew `op` took effect (an indeterminate one may have), the lease it set
    /// is surely dead after this: the latest instant it could have taken effect, its
    /// completion, plus `ttl*(1+drift)` (granted ttl, else requested), as `lock-stuck` counts
    /// it. `None` when it never completed (it may take effect at any time) or names no ttl.
    /// Not a grant: the holds of [`Grant`] are what the history proves.
    pub fn surely_dead_if_applied(&self, op: &ClientOp) -> Option<u64> {
        let ttl = self.upper_ttl_ms(op)?;
        Some(op.complete_ns()?.saturating_add(self.drift.upper_ns(ttl)))
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

    /// The reason code of that error, without its detail (`held; by p3` is `held`).
    pub fn reason_of(&self, op: &ClientOp) -> Option<&str> {
        self.error_of(op).map(history::reason::reason_of)
    }

    /// Fills each violation's active faults and sorts, so every checker's output is final
    /// whether it ran alone or with the others.
    pub fn finish(&self, out: &mut CheckOutput) {
        finish_output(out, &|from, to| self.faults.active(from, to));
    }
}

/// [`Model::finish`] with the faults active in a window from `active` (the model's, or what a
/// streaming reader gives): each finding's ops sorted once, its faults filled, the lists sorted.
pub(crate) fn finish_output(out: &mut CheckOutput, active: &dyn Fn(u64, u64) -> Vec<ActiveFault>) {
    for v in out.violations.iter_mut().chain(out.warnings.iter_mut()) {
        v.ops.sort_unstable();
        v.ops.dedup();
        if v.nemesis.is_empty() {
            v.nemesis = active(v.window_ns[0], v.window_ns[1]);
        }
    }
    sort_violations(&mut out.violations);
    sort_violations(&mut out.warnings);
}

/// The `lease_from_ns` of the acquire at position `op`, in `(position, lease_from_ns)` sorted
/// by position (`Model::lease_from`).
pub(crate) fn lease_from_of(lease_from: &[(usize, u64)], op: usize) -> Option<u64> {
    lease_from
        .binary_search_by_key(&op, |e| e.0)
        .ok()
        .map(|i| lease_from[i].1)
}

/// The ok ops that may have set a lease last, for its upper bound (when it is surely over):
/// the grant, then its ok renews. Ops of one process follow its program order; ops of two
/// processes (a renew sent by another process naming the token) are ordered only by real time,
/// so a renew replaces the upper bound only when it surely took effect after every op that may
/// have set it before (the lower bound follows `Unsettled`).
struct Setters {
    /// (process, completion) of the ops that may have set the lease last. Bounded by the
    /// grant's epoch ops.
    last: Vec<(u64, u64)>,
}

impl Setters {
    fn new(g: &Grant) -> Setters {
        Setters {
            last: vec![(g.process, g.complete_ns)],
        }
    }

    /// Adds an ok renew; whether it surely took effect after all of them (it then replaces
    /// the upper bound; otherwise either may be the last, and it takes the later of both).
    fn add(&mut self, op: &ClientOp) -> bool {
        let after = self
            .last
            .iter()
            .all(|&(p, done)| p == op.process || op.invoke_ns > done);
        if after {
            self.last.clear();
        }
        self.last.push((op.process, op.complete_or_max()));
        after
    }
}

/// [`Model::upper_ttl_ms`] under ttl policy `policy` (per requested ttl, the shortest and
/// longest granted): the whole run's, or what a streaming reader has read so far.
pub(crate) fn upper_ttl_ms(policy: &FxMap<u64, (u64, u64)>, op: &ClientOp) -> Option<u64> {
    if op.outcome == Outcome::Ok {
        return op.ttl_ms().or(op.requested_ttl_ms());
    }
    let r = op.requested_ttl_ms().or(op.ttl_ms())?;
    Some(policy.get(&r).map_or(r, |p| p.1.max(r)))
}

/// [`Model::span_end_until`] over what a [`View`] keeps.
pub(crate) fn span_end_until(
    m: &impl View,
    g: &Grant,
    grant_ns: u64,
    cutoff_ns: u64,
) -> (u64, SpanEnd) {
    let of = SpanOf {
        drift: m.drift(),
        lease_from_ns: m.lease_set_before(g),
        session: m.is_session(g),
    };
    span_end_of(&ViewOps(m), g, (grant_ns, cutoff_ns), of)
}

/// What a grant's span depends on besides its ops: the drift, the adapter's evidence that its
/// lease was set before it, and whether it is a session's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpanOf {
    pub(crate) drift: Drift,
    pub(crate) lease_from_ns: Option<u64>,
    pub(crate) session: bool,
}

/// [`span_end_until`] over the ops by position, from `grant_ns` and counting the ops invoked by
/// `cutoff_ns`.
pub(crate) fn span_end_of<O: Index<usize, Output = ClientOp> + ?Sized>(
    ops: &O,
    g: &Grant,
    (grant_ns, cutoff_ns): (u64, u64),
    of: SpanOf,
) -> (u64, SpanEnd) {
    let lease = match of.lease_from_ns {
        // A lease set before the grant (etcd's session lease) counts from the adapter's
        // evidence, not from the grant, which may find it about to lapse; the span still
        // ends no earlier than the grant itself.
        Some(from) => lease_lb(from, g.ttl_ms, of.drift).max(grant_ns),
        None => lease_lb(grant_ns, g.ttl_ms, of.drift),
    };
    let mut end = (lease, SpanEnd::Lease(None));
    let session = of.session;
    let mut unsettled = Unsettled::new();
    for (i, &pos) in g.epoch_ops.iter().enumerate() {
        let op = &ops[pos as usize];
        if op.invoke_ns > cutoff_ns {
            break;
        }
        if session && op.session_end() {
            // The holder of a session may learn from here that it is over (model item 9).
            if op.invoke_ns < end.0 {
                end = (op.invoke_ns, SpanEnd::Release(pos));
            }
            break;
        }
        match (op.func, op.lease_outcome()) {
            (_, Outcome::Fail) => {}
            (Func::Release, _) if release_refuted(ops, &g.epoch_ops, i) => {}
            (Func::Renew, Outcome::Ok) => {
                // Taken last: every renew that may still follow it is in `unsettled`.
                let lower = op.ttl_ms().or(g.ttl_ms).map_or(0, |t| of.drift.lower_ns(t));
                end = (
                    op.invoke_ns.saturating_add(lower),
                    SpanEnd::Lease(Some(pos)),
                );
                if let Some((lb, by)) = unsettled.after(op) {
                    if lb < end.0 {
                        end = (lb, SpanEnd::Lease(Some(by)));
                    }
                }
                unsettled.add(op, lower, pos);
            }
            (Func::Renew, _) => {
                let lower = op.ttl_ms().or(g.ttl_ms).map_or(0, |t| of.drift.lower_ns(t));
                let lb = op.invoke_ns.saturating_add(lower);
                if lb < end.0 {
                    end = (lb, SpanEnd::Lease(Some(pos)));
                }
                unsettled.add(op, lower, pos);
            }
            (_, outcome) => {
                if outcome == Outcome::Ok || op.invoke_ns < end.0 {
                    end = (op.invoke_ns, SpanEnd::Release(pos));
                }
                // The lock is free from here: later ops of this lease are not its own.
                break;
            }
        }
    }
    end
}

/// The ops of a [`View`], by position.
struct ViewOps<'a, V: View>(&'a V);

impl<V: View> Index<usize> for ViewOps<'_, V> {
    type Output = ClientOp;
    fn index(&self, pos: usize) -> &ClientOp {
        self.0.op(pos)
    }
}

/// Whether the release at `epoch[i]` surely did not take effect: it may not have (its answer
/// was lost), and the service accepted a renew of the same lease invoked after its window
/// closed, which a released lease would have refused (model item 5).
fn release_refuted<O: Index<usize, Output = ClientOp> + ?Sized>(
    ops: &O,
    epoch: &[OpPos],
    i: usize,
) -> bool {
    let rel = &ops[epoch[i] as usize];
    if rel.lease_outcome() == Outcome::Ok || rel.outcome == Outcome::Pending {
        return false;
    }
    let closed = rel.complete_or_max();
    epoch[i + 1..].iter().any(|&p| {
        let op = &ops[p as usize];
        op.func == Func::Renew && op.lease_outcome() == Outcome::Ok && op.invoke_ns > closed
    })
}

/// The renews of a lease seen so far whose window is still open: each may have taken effect at
/// any instant of its window, so also *after* a renew invoked later than it (an `info` renew by
/// a process that timed out, taken last with a short ttl; an ok renew by another process that
/// overlaps the next one), setting the bound from there. Program order keeps one process's ops
/// in order.
struct Unsettled {
    /// (process, invoke, latest instant it may take effect, ttl's lower bound in ns, position).
    /// Bounded by the grant's epoch ops; those whose window closed are dropped as time passes.
    list: Vec<(u64, u64, u64, u64, OpPos)>,
}

impl Unsettled {
    fn new() -> Unsettled {
        Unsettled { list: Vec::new() }
    }

    fn add(&mut self, op: &ClientOp, lower_ns: u64, pos: OpPos) {
        self.list.push((
            op.process,
            op.invoke_ns,
            op.complete_or_max(),
            lower_ns,
            pos,
        ));
    }

    /// The earliest bound one of them sets if it takes effect after `op`, taken at its invoke
    /// (its earliest instant), and which one.
    fn after(&mut self, op: &ClientOp) -> Option<(u64, OpPos)> {
        let at = op.invoke_ns;
        self.list.retain(|e| e.2 >= at);
        self.list
            .iter()
            .filter(|e| e.0 != op.process)
            .map(|e| (e.1.max(at).saturating_add(e.3), e.4))
            .min()
    }
}

/// A lease set at `at_ns` with `ttl_ms` lives at least until this. No ttl, no lower bound: the
/// lease may have ended at once.
pub(crate) fn lease_lb(at_ns: u64, ttl_ms: Option<u64>, drift: Drift) -> u64 {
    match ttl_ms {
        Some(t) => at_ns.saturating_add(drift.lower_ns(t)),
        None => at_ns,
    }
}

/// Follows `g`'s lease through its epoch's ops: definite holds, lower and upper bounds.
/// `lease_from_ns`: the adapter's evidence that the lease was set before the grant (a session
/// lease): it is certain only from there, whenever the grant took effect.
pub(crate) fn follow_lease<O: Index<usize, Output = ClientOp> + ?Sized>(
    g: &mut Grant,
    ops: &O,
    drift: Drift,
    lease_from_ns: Option<u64>,
    session: bool,
) {
    debug_assert!(
        g.epoch_ops.windows(2).all(|w| w[0] < w[1]),
        "a grant's epoch is sorted by position, each op once"
    );
    let mut f = LeaseFollow::new(g, drift, lease_from_ns);
    let mut released = None;
    for (i, &pos) in g.epoch_ops.iter().enumerate() {
        let op = &ops[pos as usize];
        if session && op.session_end() {
            // The holder of a session may learn from here that it is over (model item 9): its
            // release, or a renew that did not confirm the session, whatever came of it.
            released = Some(pos);
            break;
        }
        if op.func == Func::Release {
            // A refused release surely did not take effect (the model): the lease goes on, and
            // a grant to another inside it is a double grant (a restart that forgot the lock
            // refuses the holder's release as not-holder); so does a lost one that a later
            // accepted renew refutes. Any other release ends the definite hold: it may have
            // freed the lock from its invoke on.
            if op.outcome == Outcome::Fail || release_refuted(ops, &g.epoch_ops, i) {
                continue;
            }
            released = Some(pos);
            break;
        }
        let ttl = op.ttl_ms().or(g.ttl_ms);
        match op.lease_outcome() {
            Outcome::Ok => f.renewed(op, pos, ttl),
            Outcome::Info | Outcome::Pending => f.maybe_renewed(op, pos, ttl),
            Outcome::Fail => {}
        }
    }
    let mut end = f.lb;
    if let Some(r) = released {
        if ops[r as usize].invoke_ns < end {
            end = ops[r as usize].invoke_ns;
            f.end_by = SpanEnd::Release(r);
        }
    }
    if f.start < end {
        f.holds.push(Segment {
            start_ns: f.start,
            end_ns: end,
            opened_by: f.opened_by,
            end: f.end_by,
        });
    }
    g.holds = f.holds;
    g.lease_lb_ns = f.lb;
    g.surely_dead_ns = f.dead;
}

/// What [`follow_lease`] knows of a lease as it reads its epoch's renews in order.
struct LeaseFollow {
    drift: Drift,
    /// The lower bound: the lease surely lives until then.
    lb: u64,
    /// The upper bound: the lease is surely dead after then (`None`: no bound).
    dead: Option<u64>,
    /// Where the definite hold now open began, and the renew that opened it (none: the grant).
    start: u64,
    opened_by: Option<OpPos>,
    /// What sets the lower bound.
    end_by: SpanEnd,
    holds: Vec<Segment>,
    setters: Setters,
    unsettled: Unsettled,
}

impl LeaseFollow {
    fn new(g: &Grant, drift: Drift, lease_from_ns: Option<u64>) -> LeaseFollow {
        LeaseFollow {
            drift,
            lb: lease_lb(lease_from_ns.unwrap_or(g.invoke_ns), g.ttl_ms, drift),
            dead: g
                .ttl_ms
                .map(|t| g.complete_ns.saturating_add(drift.upper_ns(t))),
            start: g.complete_ns,
            opened_by: None,
            end_by: SpanEnd::Lease(None),
            holds: Vec::new(),
            setters: Setters::new(g),
            unsettled: Unsettled::new(),
        }
    }

    /// An ok renew at `pos`, with the ttl it set.
    fn renewed(&mut self, op: &ClientOp, pos: OpPos, ttl: Option<u64>) {
        let drift = self.drift;
        let op_lb = lease_lb(op.invoke_ns, ttl, drift);
        let done = op.complete_ns().expect("an ok op has completed");
        if op.invoke_ns > self.lb {
            // A gap: the lease may have lapsed before the service took the renew, so the hold
            // resumes only once the renew surely took effect.
            if self.start < self.lb {
                self.holds.push(Segment {
                    start_ns: self.start,
                    end_ns: self.lb,
                    opened_by: self.opened_by,
                    end: self.end_by,
                });
            }
            self.start = done;
            self.opened_by = Some(pos);
        }
        let op_dead = ttl.map(|t| done.saturating_add(drift.upper_ns(t)));
        // The lower bound takes it as the last to take effect, and then each op that may still
        // follow it (`unsettled`) at its own earliest instant after it.
        self.lb = op_lb;
        self.end_by = SpanEnd::Lease(Some(pos));
        if let Some((after_lb, by)) = self.unsettled.after(op) {
            if after_lb < self.lb {
                self.lb = after_lb;
                self.end_by = SpanEnd::Lease(Some(by));
            }
        }
        self.unsettled.add(op, op_lb - op.invoke_ns, pos);
        // The upper bound: the latest of those that may have taken effect last.
        self.dead = if self.setters.add(op) {
            op_dead
        } else {
            match (self.dead, op_dead) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            }
        };
    }

    /// A renew at `pos` whose answer was lost or never came: it may have set the lease.
    fn maybe_renewed(&mut self, op: &ClientOp, pos: OpPos, ttl: Option<u64>) {
        let drift = self.drift;
        let op_lb = lease_lb(op.invoke_ns, ttl, drift);
        if op_lb < self.lb {
            self.lb = op_lb;
            self.end_by = SpanEnd::Lease(Some(pos));
        }
        self.unsettled.add(op, op_lb - op.invoke_ns, pos);
        // It may have applied last, up to its completion (or at any time, if it never
        // completed): the lease may live until the later of the two bounds.
        self.dead = match (self.dead, ttl, op.complete_ns()) {
            (Some(d), Some(t), Some(c)) => Some(d.max(c.saturating_add(drift.upper_ns(t)))),
            _ => None,
        };
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// A 10M-event history holds five million client ops: their size is the check's memory.
    #[test]
    fn client_op_stays_small() {
        assert!(
            std::mem::size_of::<ClientOp>() <= 88,
            "{}",
            std::mem::size_of::<ClientOp>()
        );
        // A grant keeps its segments and lease ops; both stay compact (positions are u32).
        assert!(std::mem::size_of::<Segment>() <= 32);
        assert!(std::mem::size_of::<Grant>() <= 160);
    }
}
