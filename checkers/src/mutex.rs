//! Mutual exclusion: `double-grant` and the `unsafe-overlap` warning (a process used a token
//! after its lease surely died while another process held the lock, and the op was accepted or
//! may have been: the paused-holder case only fencing makes safe; refused, it is a note).
//!
//! Two readings of the ground-truth model report `double-grant`:
//!
//! - **Definite holds overlap**: two grants' definite holds (see [`Grant::holds`]) share an
//!   instant. Real time alone proves it.
//! - **Token order**: a correct service grants in token order, and each grant only once the
//!   previous lease could have ended. Walking a lock's tokened grants in token order, each grant
//!   took effect no earlier than its invoke and the end of the previous grant's span
//!   ([`Model::span_end`], taken from that grant's own earliest instant); a grant that returned
//!   before that instant was granted while the previous lease was surely alive. Taking every
//!   instant as early as it can be is the best a correct service could have done, so this walk
//!   finds every history the model rules out through leases and token order; the cases another
//!   rule already reports (real-time token order, stale renews and releases, exclusivity-forced
//!   order, overlapping holds) are left to it: one fact, one violation.

use crate::inject::Injector;
use crate::model::{
    span_end_until, ClientOp, Func, Grant, Model, Segment, SpanEnd, View, NO_GRANT,
};
use crate::text::{op_list, secs, token};
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};
use std::collections::BTreeMap;

pub struct MutualExclusion;

/// At most this many late ops are listed in one warning; the sentence gives the total.
const LATE_OPS_LISTED: usize = 8;

/// One definite hold segment, for sweeping a lock's holds in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Hold {
    pub(crate) lock: u32,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) grant: u32,
    pub(crate) segment: u32,
}

impl Hold {
    /// The holds of grant `g`, numbered `grant`.
    pub(crate) fn of(grant: u32, g: &Grant) -> impl Iterator<Item = Hold> + '_ {
        g.holds.iter().enumerate().map(move |(k, s)| {
            debug_assert!(s.start_ns < s.end_ns, "a definite hold is never empty");
            Hold {
                lock: g.lock,
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                grant,
                segment: k as u32,
            }
        })
    }
}

/// The sweep of definite holds that finds overlapping ones (the first reading of
/// `double-grant`): fed each lock's holds in (start, end, grant, segment) order, it answers
/// each with the latest-ending hold of another grant seen before it, when that one is still
/// held at its start. What it keeps is two holds per lock, whatever the history's length: the
/// batch check feeds it every hold sorted, a streaming one each hold once no later one can
/// start before it.
#[derive(Default)]
pub(crate) struct HoldSweep {
    top: crate::FxMap<u32, Top2<Earlier>>,
}

/// What the sweep keeps of a hold it may pair with a later one: enough to tell a stale renew's
/// hold (`stale_renew_opened`) without reading its grant or ops, which the batch check and a
/// streaming reader keep in different places.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Earlier {
    token: Option<u64>,
    complete_ns: u64,
    /// The invoke of the ok renew that opened the hold after a gap, if one did.
    opened_ns: Option<u64>,
}

impl Earlier {
    pub(crate) fn of<O: std::ops::Index<usize, Output = ClientOp> + ?Sized>(
        ops: &O,
        g: &Grant,
        s: &Segment,
    ) -> Earlier {
        Earlier {
            token: g.token,
            complete_ns: g.complete_ns,
            opened_ns: s.opened_by.map(|r| ops[r as usize].invoke_ns),
        }
    }
}

impl HoldSweep {
    /// Forgets the holds that end by `watermark_ns`: every hold swept from now on starts no
    /// earlier, so none of them can meet it.
    pub(crate) fn forget_before(&mut self, watermark_ns: u64) {
        self.top.retain(|_, t| {
            if t.best.is_some_and(|b| b.0 <= watermark_ns) {
                // The other one ends no later than the best.
                *t = Top2::default();
            } else if t.other.is_some_and(|o| o.0 <= watermark_ns) {
                t.other = None;
            }
            t.best.is_some()
        });
    }

    /// The grant of the latest-ending hold of `lock` swept so far that is another grant than
    /// `grant`, if it ends after `from_ns` (`HoldIndex::other_hold_meeting`, as the sweep
    /// stands).
    pub(crate) fn other_meeting(&self, lock: u32, grant: u32, from_ns: u64) -> Option<u32> {
        let (end, g, _, _) = self.top.get(&lock)?.other_than(grant)?;
        (end > from_ns).then_some(g)
    }

    /// The grants of the holds a later hold may still meet.
    pub(crate) fn grants(&self) -> impl Iterator<Item = u32> + '_ {
        self.top
            .values()
            .flat_map(|t| t.best.into_iter().chain(t.other).map(|h| h.1))
    }

    /// The `(grant, segment)` of another grant whose hold `h` starts inside, and what the
    /// sweep kept of it; `h` is `e` of its grant.
    pub(crate) fn next(&mut self, h: &Hold, e: Earlier) -> Option<(u32, u32, Earlier)> {
        let top = self.top.entry(h.lock).or_default();
        let met = top
            .other_than(h.grant)
            .filter(|&(end, _, _, _)| end > h.start_ns)
            .map(|(_, g, s, e)| (g, s, e));
        top.add_with(h.end_ns, h.grant, h.segment, e);
        met
    }
}

/// The latest-ending hold seen so far, and the latest-ending one of any *other* grant, so "does
/// a hold of a grant other than g reach past t" is answered in O(1). Each keeps `P` beside it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Top2<P: Copy = ()> {
    /// (end, grant, segment, what is kept with it)
    best: Option<(u64, u32, u32, P)>,
    /// The best among grants other than `best`'s.
    other: Option<(u64, u32, u32, P)>,
}

impl Top2 {
    fn add(&mut self, end: u64, grant: u32, segment: u32) {
        self.add_with(end, grant, segment, ());
    }
}

impl<P: Copy> Top2<P> {
    pub(crate) fn add_with(&mut self, end: u64, grant: u32, segment: u32, kept: P) {
        let new = (end, grant, segment, kept);
        match self.best {
            None => self.best = Some(new),
            Some(b) if b.1 == grant => {
                if end > b.0 {
                    self.best = Some(new);
                }
            }
            Some(b) if end > b.0 => {
                self.other = Some(b);
                self.best = Some(new);
            }
            Some(_) => {
                if self.other.is_none_or(|o| end > o.0) {
                    self.other = Some(new);
                }
            }
        }
    }

    /// The (end, grant) it keeps, at most two.
    pub(crate) fn ends(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.best.iter().chain(&self.other).map(|e| (e.0, e.1))
    }

    /// The latest-ending hold of a grant other than `grant`.
    pub(crate) fn other_than(&self, grant: u32) -> Option<(u64, u32, u32, P)> {
        match self.best {
            Some(b) if b.1 != grant => Some(b),
            _ => self.other,
        }
    }
}

/// Definite holds sorted by (lock, start), with a per-position prefix of [`Top2`] within each
/// lock's run.
struct HoldIndex {
    holds: Vec<Hold>,
    prefix: Vec<Top2>,
}

impl HoldIndex {
    fn new(m: &Model) -> HoldIndex {
        let mut holds: Vec<Hold> = Vec::new();
        for (i, g) in m.grants.iter().enumerate() {
            holds.extend(Hold::of(i as u32, g));
        }
        holds.sort_unstable();
        let mut prefix = Vec::with_capacity(holds.len());
        let mut top = Top2::default();
        let mut lock = None;
        for h in &holds {
            if lock != Some(h.lock) {
                top = Top2::default();
                lock = Some(h.lock);
            }
            top.add(h.end_ns, h.grant, h.segment);
            prefix.push(top);
        }
        HoldIndex { holds, prefix }
    }

    /// A hold on `lock` of a process other than `process` that meets `(from_ns, to_ns)`: the
    /// latest-ending one among those starting before `to_ns`.
    fn other_hold_meeting(
        &self,
        m: &Model,
        lock: u32,
        grant: u32,
        from_ns: u64,
        to_ns: u64,
    ) -> Option<u32> {
        let lo = self.holds.partition_point(|h| h.lock < lock);
        let hi = self
            .holds
            .partition_point(|h| (h.lock, h.start_ns) < (lock, to_ns));
        if hi <= lo {
            return None;
        }
        let (end, g, _, _) = self.prefix[hi - 1].other_than(grant)?;
        let process = m.grants[grant as usize].process;
        (end > from_ns && m.grants[g as usize].process != process).then_some(g)
    }
}

impl Checker for MutualExclusion {
    fn injectors(&self) -> &'static [Injector] {
        injectors::MUTUAL_EXCLUSION
    }

    fn name(&self) -> &'static str {
        "mutual-exclusion"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::DoubleGrant, ViolationKind::UnsafeOverlap]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let index = HoldIndex::new(m);
        double_grants(m, &index, &mut out);
        token_order(m, &mut out);
        forced_order(m, &mut out);
        unsafe_overlaps(m, &index, &mut out);
        // A grant that carries no lease and no session (a transaction's lock, model item 9)
        // proves no hold: two of them are no pair of holders to compare.
        let proves_hold = |g: &Grant| g.ttl_ms.is_some() || !g.holds.is_empty();
        out.nothing_to_judge(granted_twice(m, proves_hold), || {
            no_pair(m.grants.len() as u64, granted_twice(m, |_| true))
        });
        verdict(m, cfg, &mut out);
        out
    }
}

/// Why no two holders were compared: of `grants`, none proves a hold (`twice`: some lock was
/// granted twice), or no lock was granted twice.
pub(crate) fn no_pair(grants: u64, twice: bool) -> String {
    if twice {
        format!(
            "none of the {grants} grant(s) proves a hold: they carry no lease and no session \
             (a transaction's lock is held only inside its transaction, which the history does \
             not show), so there was no pair of holders to compare"
        )
    } else {
        "no lock was granted twice: there was no pair of holders to compare".to_string()
    }
}

/// Whether some lock has two grants that `counts`.
pub(crate) fn granted_twice(m: &Model, counts: impl Fn(&Grant) -> bool) -> bool {
    let mut seen = vec![false; m.locks.len()];
    m.grants
        .iter()
        .filter(|g| counts(g))
        .any(|g| std::mem::replace(&mut seen[g.lock as usize], true))
}

/// Whether two grants' definite holds share an instant.
pub(crate) fn holds_overlap(a: &Grant, b: &Grant) -> bool {
    a.holds.iter().any(|x| {
        b.holds
            .iter()
            .any(|y| x.start_ns < y.end_ns && y.start_ns < x.end_ns)
    })
}

/// The readings of `double-grant` a streaming reader makes so far (overlapping holds, token
/// order, forced order), alone: what it must find.
#[cfg(test)]
pub(crate) fn streamed_readings(m: &Model) -> [Vec<Violation>; 3] {
    let mut out = [CheckOutput::new(), CheckOutput::new(), CheckOutput::new()];
    double_grants(m, &HoldIndex::new(m), &mut out[0]);
    token_order(m, &mut out[1]);
    forced_order(m, &mut out[2]);
    out.map(|o| o.violations)
}

fn double_grants(m: &Model, index: &HoldIndex, out: &mut CheckOutput) {
    let mut sweep = HoldSweep::default();
    let holds = index.holds.iter().map(|h| {
        let g = &m.grants[h.grant as usize];
        (*h, Earlier::of(&m.ops, g, &g.holds[h.segment as usize]))
    });
    for (a, sa, b, sb) in overlapping_holds(&mut sweep, holds) {
        let (a, b) = (&m.grants[a as usize], &m.grants[b as usize]);
        let (seg_a, seg_b) = (&a.holds[sa as usize], &b.holds[sb as usize]);
        out.violations.push(double_grant(m, (a, seg_a), (b, seg_b)));
    }
}

/// The pairs of overlapping holds that are `double-grant`s, `(grant, segment)` of the earlier
/// hold and of the later, over `holds` (each with what the sweep keeps of it) in each lock's
/// (start, end, grant, segment) order, the sweep going on from where `sweep` left it.
pub(crate) fn overlapping_holds<'a>(
    sweep: &'a mut HoldSweep,
    holds: impl Iterator<Item = (Hold, Earlier)> + 'a,
) -> impl Iterator<Item = (u32, u32, u32, u32)> + 'a {
    holds.filter_map(move |(h, eb)| {
        let (ga, sa, ea) = sweep.next(&h, eb)?;
        (!stale_renew_opened(&ea, &eb) && !stale_renew_opened(&eb, &ea))
            .then_some((ga, sa, h.grant, h.segment))
    })
}

/// Whether hold `h` was opened by an ok renew that is already `stale-renew-accepted` against
/// the grant of hold `other` (invoked after that grant returned, with a newer token): one fact,
/// one violation.
fn stale_renew_opened(h: &Earlier, other: &Earlier) -> bool {
    h.opened_ns.is_some_and(|at| {
        other.complete_ns < at && matches!((h.token, other.token), (Some(a), Some(b)) if a < b)
    })
}

/// How a hold segment began: `p1 held L0 with token 3 from 1.200 s (when its acquire returned,
/// op 7)`.
fn hold_start(m: &impl View, g: &Grant, s: &Segment, ops: &mut Vec<u64>) -> String {
    let lock = m.lock_name(g.lock);
    match s.opened_by {
        None if m.is_session(g) => format!(
            "p{} was granted {lock} in its session ({}) at {} (op {})",
            g.process,
            token(g.token),
            secs(s.start_ns),
            m.op(g.op).index
        ),
        None => format!(
            "p{} was granted {lock} with {} at {} (op {})",
            g.process,
            token(g.token),
            secs(s.start_ns),
            m.op(g.op).index
        ),
        Some(r) => {
            let r = m.op(r as usize);
            ops.push(r.index);
            // "Again" only after a hold of its own: a grant answered too late to prove one
            // (its lease's lower bound passed before its answer) is held first through the
            // renew.
            let again = g.holds.first().is_some_and(|h| h.start_ns < s.start_ns);
            format!(
                "p{} held {lock} with {} {}from {}, when the service accepted its renew (op {}, invoked after the lease's lower bound had passed{})",
                g.process,
                token(g.token),
                if again { "again " } else { "" },
                secs(s.start_ns),
                r.index,
                if again {
                    ""
                } else {
                    ": the renew, not the grant, proves this hold"
                }
            )
        }
    }
}

/// Why a segment lasts until its end, naming the ops that prove it.
fn hold_end(m: &impl View, g: &Grant, s: &Segment, ops: &mut Vec<u64>) -> String {
    if m.is_session(g) {
        return format!("as far as it knew, {}", session_end(m, s.end, ops));
    }
    match s.end {
        SpanEnd::Release(r) => {
            let r = m.op(r as usize);
            ops.push(r.index);
            format!("until it invoked its release at {} (op {})", secs(r.invoke_ns), r.index)
        }
        SpanEnd::Lease(None) => match m.lease_set_before(g) {
            Some(from) => format!(
                "until at least {}: its lease, set before the grant and surely kept alive from {} by the adapter's evidence with ttl {} ms, cannot expire sooner",
                secs(s.end_ns),
                secs(from),
                ttl_text(g.ttl_ms)
            ),
            None => format!(
                "until at least {}: its lease, counted from the acquire's invoke at {} with ttl {} ms, cannot expire sooner",
                secs(s.end_ns),
                secs(g.invoke_ns),
                ttl_text(g.ttl_ms)
            ),
        },
        SpanEnd::Lease(Some(r)) => {
            let op = m.op(r as usize);
            // The ok renews that carried the lease from the segment's start to this one are
            // part of the proof.
            let from_ns = s.opened_by.map_or(g.invoke_ns, |o| m.op(o as usize).invoke_ns);
            ops.extend(
                g.epoch_ops
                    .iter()
                    .map(|&e| m.op(e as usize))
                    .filter(|e| {
                        e.func == Func::Renew
                            && e.lease_outcome() == Outcome::Ok
                            && (from_ns..=op.invoke_ns).contains(&e.invoke_ns)
                    })
                    .map(|e| e.index),
            );
            ops.push(op.index);
            let how = if op.lease_outcome() == Outcome::Ok {
                "renewed"
            } else {
                "perhaps renewed (indeterminate)"
            };
            format!(
                "until at least {}: its lease, {how} by op {} invoked at {} with ttl {} ms, cannot expire sooner",
                secs(s.end_ns),
                op.index,
                secs(op.invoke_ns),
                ttl_text(op.ttl_ms().or(g.ttl_ms))
            )
        }
    }
}

/// Why the holder of a session grant believed it held the lock until its end (model item 9).
pub(crate) fn session_end(m: &impl View, end: SpanEnd, ops: &mut Vec<u64>) -> String {
    match end {
        SpanEnd::Release(r) => {
            let r = m.op(r as usize);
            ops.push(r.index);
            if r.func == Func::Release {
                format!(
                    "until it invoked its release at {} (op {})",
                    secs(r.invoke_ns),
                    r.index
                )
            } else if r.func != Func::Renew {
                format!(
                    "until its {} at {} (op {}) went unanswered and its process \
                     crashed: a crashed process acts on nothing more",
                    r.func.as_str(),
                    secs(r.invoke_ns),
                    r.index
                )
            } else {
                format!(
                    "until its {} at {} (op {}) did not answer ok: only \
                     from then could it know its session was over",
                    r.func.as_str(),
                    secs(r.invoke_ns),
                    r.index
                )
            }
        }
        SpanEnd::Lease(_) => format!(
            "to the end of the history at {}: the holder of a session lock \
             is not told when its session ends, and no op on the lock told it",
            secs(m.end_time_ns())
        ),
    }
}

/// What surely lasted while another grant came: a lease, or a session holder's belief.
pub(crate) fn alive_words(m: &impl View, g: &Grant) -> &'static str {
    if m.is_session(g) {
        "while its holder still believed it held the lock"
    } else {
        "while that lease was surely alive"
    }
}

/// A window's end for a hold that may reach past the history (a session's): its last event.
pub(crate) fn window_end(m: &impl View, start_ns: u64, end_ns: u64) -> u64 {
    window_end_by(m.end_time_ns(), start_ns, end_ns)
}

/// [`window_end`] for a history that ends at `history_end_ns`.
pub(crate) fn window_end_by(history_end_ns: u64, start_ns: u64, end_ns: u64) -> u64 {
    end_ns.min(history_end_ns.max(start_ns))
}

fn ttl_text(t: Option<u64>) -> String {
    t.map_or_else(|| "unknown".to_string(), |t| t.to_string())
}

pub(crate) fn double_grant(
    m: &impl View,
    (a, sa): (&Grant, &Segment),
    (b, sb): (&Grant, &Segment),
) -> Violation {
    let lock = m.lock_name(a.lock);
    let mut ops = vec![m.op(a.op).index, m.op(b.op).index];
    let a_start = hold_start(m, a, sa, &mut ops);
    let a_end = hold_end(m, a, sa, &mut ops);
    // `b`'s hold starts no earlier than `a`'s (the sweep's order), so its start inside `a`'s
    // hold is the whole overlap: how long it lasted proves nothing more.
    let b_start = hold_start(m, b, sb, &mut ops);
    // Real time proves who came first only when one grant returned before the other was asked.
    // Two grants of one process are told apart by their ops.
    let first = |g: &Grant| match a.process == b.process {
        true => format!(
            "; p{}'s grant of op {} came first",
            g.process,
            m.op(g.op).index
        ),
        false => format!("; p{} was granted first", g.process),
    };
    let order = if a.complete_ns < b.invoke_ns {
        first(a)
    } else if b.complete_ns < a.invoke_ns {
        first(b)
    } else {
        String::new()
    };
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::DoubleGrant,
        lock: Some(lock.to_string()),
        ops,
        window_ns: [
            sb.start_ns,
            window_end(m, sb.start_ns, sa.end_ns.min(sb.end_ns)),
        ],
        nemesis: Vec::new(),
        explanation: format!(
            "{a_start} and held it {a_end}, yet {b_start}, while that hold lasted{order}"
        ),
    }
}

/// The token-order reading (module doc): each tokened grant of a lock, in token order, took
/// effect no earlier than the end of the previous one's span.
fn token_order(m: &Model, out: &mut CheckOutput) {
    let mut order: Vec<(u32, u64, u64, u32)> = m
        .grants
        .iter()
        .enumerate()
        .filter_map(|(i, g)| g.token.map(|t| (g.lock, t, g.complete_ns, i as u32)))
        .collect();
    order.sort_unstable();
    let mut prev: Option<TokenPrev> = None;
    for &(lock, tok, _, gi) in &order {
        let same = prev.filter(|p| m.grants[p.0 as usize].lock == lock);
        let (next, found) = token_step(m, &m.grants, same, gi, tok);
        prev = Some(next);
        out.violations.extend(found.map(|(v, _)| v));
    }
}

/// Where the token walk stands on a lock: the grant walked last, the earliest instant it took
/// effect, and the grant before it whose span pushed that instant.
pub(crate) type TokenPrev = (u32, u64, Option<u32>);

/// One step of the token-order reading: grant `gi`, with token `tok`, follows `prev` (of the
/// same lock) in its lock's token order. Returns where the walk stands after it, and what it
/// proves, if anything: the violation, and the end of its window before it is cut at the end
/// of the history.
pub(crate) fn token_step<G: std::ops::Index<usize, Output = Grant> + ?Sized>(
    m: &impl View,
    grants: &G,
    prev: Option<TokenPrev>,
    gi: u32,
    tok: u64,
) -> (TokenPrev, Option<(Violation, u64)>) {
    let s = &grants[gi as usize];
    let Some((pi, p_at, p_pushed_by)) = prev else {
        return ((gi, s.invoke_ns, None), None);
    };
    let p = &grants[pi as usize];
    let (end, cause) = span_end_until(m, p, p_at, u64::MAX);
    let at = s.invoke_ns.max(end);
    if at <= s.complete_ns {
        return ((gi, at, (end > s.invoke_ns).then_some(pi)), None);
    }
    // The service granted S while P's span surely lasted: unless another rule already tells
    // this fact, say it here.
    let found = (!covered_elsewhere(m, (p, p_at), s, tok)).then(|| {
        let q = p_pushed_by.map(|q| &grants[q as usize]);
        (order_violation(m, (p, p_at, q), s, end, cause), end)
    });
    // Judge the grants after S from the latest instant it could have taken effect.
    ((gi, s.complete_ns, Some(pi)), found)
}

/// The order reading for grants without a token (Redis's lock value, PostgreSQL's advisory
/// locks, a grant whose token could not be read), which the token walk cannot place: they fit
/// anywhere in token order, so only real time and exclusivity order them. Grant `a` surely came
/// before grant `b` when `a` returned before `forced_before(b)` (before `b` was asked, or
/// while `b`, counted from its own invoke, was surely alive: had `b` come first, `a` would have
/// been granted inside it). Then `b` took effect no earlier than the end of `a`'s span, taken
/// from `a`'s own earliest instant, and a `b` that returned before that was granted while `a`'s
/// lease surely lasted.
///
/// Each grant is judged against the grants forced before it, those completed before its
/// `forced_before` (a prefix of its lock's grants in completion order, by binary search),
/// through the latest span end among them. The instants start at each invoke and only rise
/// until none moves, so none comes out later than the model's: the reading claims nothing the
/// model allows. The grant whose span pushed an instant, and whether a grant without a token
/// is on that chain, are read from the final instants. Chains of tokened
/// grants only are the token walk's; overlapping holds and spans that last only through ops
/// sent after `b` returned (stale renews) are other rules': one fact, one violation.
fn forced_order(m: &Model, out: &mut CheckOutput) {
    if m.grants.iter().all(|g| g.token.is_some()) {
        return;
    }
    let mut order: Vec<(u32, u64, u32)> = m
        .grants
        .iter()
        .enumerate()
        .map(|(i, g)| (g.lock, g.complete_ns, i as u32))
        .collect();
    order.sort_unstable();
    let mut start = 0;
    let mut unsettled = 0;
    // Bounded by the grants: each lock's run is visited once.
    while start < order.len() {
        let lock = order[start].0;
        let end = start + order[start..].partition_point(|o| o.0 == lock);
        if !forced_order_of_lock(m, &order[start..end], out) {
            unsettled += 1;
        }
        start = end;
    }
    if unsettled > 0 {
        out.notes.push(unsettled_note(unsettled));
    }
}

/// The note on locks whose forced order was left unsettled.
pub(crate) fn unsettled_note(locks: usize) -> String {
    format!(
        "the order of grants without a token was refined for {FORCED_ORDER_PASSES_MAX} passes \
         on {locks} lock(s) and then left as it stood: a double grant found only by refining \
         further is not reported by that reading"
    )
}

/// Passes over one lock's grants before the reading stops refining their instants. Each pass
/// carries every chain one more step back against completion order; two grants forced before
/// each other push each other by a lease a pass, until one reaches its answer. Stopping early
/// leaves instants earlier than they could be (sound) and is said in the checker's notes. Over
/// the whole checkers suite (some 49,000 lock runs with a grant without a token) no run took
/// more than 5.
pub(crate) const FORCED_ORDER_PASSES_MAX: usize = 64;

/// One lock's grants, sorted by completion: see [`forced_order`]. A grant can be forced before
/// one that completed earlier (the later one was surely alive past the other's completion), so
/// the earliest instants are refined pass by pass until none moves: the least instants the
/// model allows. Returns false when [`FORCED_ORDER_PASSES_MAX`] cut that short.
fn forced_order_of_lock(m: &Model, run: &[(u32, u64, u32)], out: &mut CheckOutput) -> bool {
    let grant = |k: usize| &m.grants[run[k].2 as usize];
    // Per grant of `run`: how many grants completed strictly before its `forced_before` (equal
    // instants are not ordered): its predecessors are that prefix, itself left out.
    let before: Vec<usize> = (0..run.len())
        .map(|k| run.partition_point(|o| o.1 < crate::tokens::forced_before(grant(k))))
        .collect();
    // Prefix top-2 of span ends in completion order, from the instants as they stand.
    let prefix_of = |at_ns: &[u64]| -> Vec<Top2> {
        let mut top = Top2::default();
        (0..run.len())
            .map(|k| {
                top.add(m.span_end(grant(k), at_ns[k]).0, k as u32, 0);
                top
            })
            .collect()
    };
    let pushed = |prefix: &[Top2], k: usize| {
        before[k]
            .checked_sub(1)
            .and_then(|i| prefix[i].other_than(k as u32))
            .map(|(end_ns, ai, _, _)| (end_ns, ai as usize))
    };
    let mut at_ns: Vec<u64> = (0..run.len()).map(|k| grant(k).invoke_ns).collect();
    let mut settled = false;
    for _ in 0..FORCED_ORDER_PASSES_MAX {
        let prefix = prefix_of(&at_ns);
        let mut moved = false;
        for (k, at) in at_ns.iter_mut().enumerate() {
            if let Some((end_ns, _)) = pushed(&prefix, k) {
                let to = end_ns.min(grant(k).complete_ns);
                if to > *at {
                    *at = to;
                    moved = true;
                }
            }
        }
        if !moved {
            settled = true;
            break;
        }
    }
    // From the final instants: the grant whose span pushed each one past its invoke.
    let prefix = prefix_of(&at_ns);
    let pushed_by: Vec<Option<usize>> = (0..run.len())
        .map(|k| {
            pushed(&prefix, k)
                .filter(|&(end_ns, _)| end_ns > grant(k).invoke_ns)
                .map(|(_, ai)| ai)
        })
        .collect();
    let tokenless: Vec<bool> = (0..run.len()).map(|k| grant(k).token.is_none()).collect();
    let untokened = chains_with_any(&pushed_by, &tokenless);
    // (real time does not order the pair, a's position, b's position): a grant pushed past its
    // own answer. Two grants forced before each other are one fact: the pair is said once,
    // in the real-time direction when there is one.
    let mut found: Vec<(bool, usize, usize)> = Vec::new();
    for k in 0..run.len() {
        let (b, Some(ai)) = (grant(k), pushed_by[k]) else {
            continue;
        };
        let a = grant(ai);
        if m.span_end(a, at_ns[ai]).0 <= b.complete_ns || !untokened[k] || holds_overlap(a, b) {
            continue;
        }
        // A span or an edge may rest on renews or releases accepted after the other grant
        // returned: without tokens no other rule proves those stale, so it is said here, and
        // the sentence names them.
        found.push((a.complete_ns >= b.invoke_ns, ai, k));
    }
    found.sort_unstable();
    let mut said: Vec<(usize, usize)> = Vec::new();
    for (_, ai, k) in found {
        let pair = (ai.min(k), ai.max(k));
        if said.contains(&pair) {
            continue;
        }
        said.push(pair);
        let (a, b) = (grant(ai), grant(k));
        let (cut_ns, cause) = m.span_end(a, at_ns[ai]);
        out.violations
            .push(forced_violation(m, (a, at_ns[ai]), b, cut_ns, cause));
    }
    settled
}

/// Per node of a graph where each node points at most at one other (`next`), whether a node
/// with `flag` is on its path: itself, or any node it leads to, around a cycle included.
pub(crate) fn chains_with_any(next: &[Option<usize>], flag: &[bool]) -> Vec<bool> {
    // 0: not visited, 1: on the path being walked, 2: known.
    let mut state = vec![0u8; next.len()];
    let mut out = vec![false; next.len()];
    let mut path = Vec::new();
    for k0 in 0..next.len() {
        path.clear();
        let mut k = Some(k0);
        // Bounded by the nodes: each is put on a path once.
        while let Some(n) = k.filter(|&n| state[n] == 0) {
            state[n] = 1;
            path.push(n);
            k = next[n];
        }
        // What the path's last node leads to: nothing, a node known, or a node of this path
        // (a cycle, whose nodes all reach each other).
        let mut tail = match k {
            Some(n) if state[n] == 2 => out[n],
            Some(n) => {
                let from = path.iter().position(|&p| p == n).expect("on the path");
                let any = path[from..].iter().any(|&p| flag[p]);
                for &p in &path[from..] {
                    out[p] = any;
                    state[p] = 2;
                }
                path.truncate(from);
                any
            }
            None => false,
        };
        for &p in path.iter().rev() {
            tail = flag[p] || tail;
            out[p] = tail;
            state[p] = 2;
        }
    }
    out
}

/// Why grant `g`'s span, taken from `at_ns`, lasts until `end_ns` (ended by `cause`), naming
/// the ops that prove it.
fn span_until(
    m: &impl View,
    g: &Grant,
    (at_ns, end_ns): (u64, u64),
    cause: SpanEnd,
    ops: &mut Vec<u64>,
) -> String {
    if m.is_session(g) {
        return format!(
            "while p{} believed it held it, {}",
            g.process,
            session_end(m, cause, ops)
        );
    }
    match cause {
        SpanEnd::Lease(None) => match m.lease_set_before(g) {
            Some(from) => format!(
                "until at least {}: its lease, surely kept alive from {} by the adapter's evidence with ttl {} ms, cannot expire sooner",
                secs(end_ns),
                secs(from),
                ttl_text(g.ttl_ms)
            ),
            None => format!(
                "until at least {}: its lease, counted from then with ttl {} ms, cannot expire sooner",
                secs(end_ns),
                ttl_text(g.ttl_ms)
            ),
        },
        _ => {
            let seg = Segment {
                start_ns: at_ns,
                end_ns,
                opened_by: None,
                end: cause,
            };
            hold_end(m, g, &seg, ops)
        }
    }
}

pub(crate) fn forced_violation(
    m: &impl View,
    (a, a_at): (&Grant, u64),
    b: &Grant,
    end_ns: u64,
    cause: SpanEnd,
) -> Violation {
    let lock = m.lock_name(a.lock);
    let (ai, bi) = (m.op(a.op).index, m.op(b.op).index);
    let mut ops = vec![ai, bi];
    let until = span_until(m, a, (a_at, end_ns), cause, &mut ops);
    let why = if a.complete_ns < b.invoke_ns {
        format!(
            "it was asked for at {}, after that grant returned",
            secs(b.invoke_ns)
        )
    } else {
        format!(
            "had it come first, p{}'s grant (returned at {}) would have come inside its lease, which lasted until at least {} counted from its own invoke",
            a.process,
            secs(a.complete_ns),
            secs(b.alive_until_ns)
        )
    };
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::DoubleGrant,
        lock: Some(lock.to_string()),
        ops,
        window_ns: [
            b.complete_ns.min(end_ns),
            window_end(m, b.complete_ns.min(end_ns), end_ns),
        ],
        nemesis: Vec::new(),
        explanation: format!(
            "p{} was granted {lock} with {} (op {ai}) no earlier than {}, and no other grant could take effect {until}; p{}'s grant with {} (op {bi}) came after it ({why}), yet it returned at {}, {}",
            a.process,
            token(a.token),
            secs(a_at),
            b.process,
            token(b.token),
            secs(b.complete_ns),
            alive_words(m, a),
        ),
    }
}

/// Whether the failure of `s` to wait for `p`'s span is already another rule's violation.
fn covered_elsewhere(m: &impl View, (p, p_at): (&Grant, u64), s: &Grant, s_token: u64) -> bool {
    // Equal tokens: token-reused.
    if p.token == Some(s_token) {
        return true;
    }
    // S returned before P was asked: token-regressed in real time.
    if s.complete_ns < p.invoke_ns {
        return true;
    }
    // P's span reached past S only through ok renews or releases invoked after S returned:
    // stale-renew-accepted / stale-release-accepted, against S.
    if span_end_until(m, p, p_at, s.complete_ns).0 <= s.complete_ns {
        return true;
    }
    // Overlapping definite holds: double-grant by real time.
    if holds_overlap(p, s) {
        return true;
    }
    // S returned while P, counted from P's invoke, was surely alive, and they are different
    // processes: token-regressed by the order exclusivity forces (see `tokens`).
    // Unless real time proves P came first (then S was granted inside P's span: ours to say).
    p.process != s.process && s.complete_ns < p.alive_until_ns && p.complete_ns >= s.invoke_ns
}

fn order_violation(
    m: &impl View,
    (p, p_at, pushed_by): (&Grant, u64, Option<&Grant>),
    s: &Grant,
    end_ns: u64,
    cause: SpanEnd,
) -> Violation {
    let lock = m.lock_name(p.lock);
    let (pi, si) = (m.op(p.op).index, m.op(s.op).index);
    let mut ops = vec![pi, si];
    let since = match pushed_by {
        Some(q) if p_at > p.invoke_ns => {
            ops.push(m.op(q.op).index);
            format!(
                "no earlier than {}, since its token is above p{}'s {} (op {}) whose span lasted until then",
                secs(p_at),
                q.process,
                token(q.token),
                m.op(q.op).index
            )
        }
        _ => format!("no earlier than its invoke at {}", secs(p_at)),
    };
    let until = span_until(m, p, (p_at, end_ns), cause, &mut ops);
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::DoubleGrant,
        lock: Some(lock.to_string()),
        ops,
        window_ns: [
            s.complete_ns.min(end_ns),
            window_end(m, s.complete_ns.min(end_ns), end_ns),
        ],
        nemesis: Vec::new(),
        explanation: format!(
            "p{} was granted {lock} with {} (op {pi}) {since}, and no other grant could take effect {until}; p{}'s grant with the higher {} (op {si}) must come after it in a correct service, yet it returned at {}, {}",
            p.process,
            token(p.token),
            s.process,
            token(s.token),
            secs(s.complete_ns),
            alive_words(m, p),
        ),
    }
}

/// A late use of a grant's token, while another process held the lock.
struct Late {
    op: usize,
    /// The grant's surely-dead bound as of that op.
    dead_ns: u64,
    other: u32,
}

/// One grant's late uses as its warning lists them: the first [`LATE_OPS_LISTED`], the first
/// suspect one (not refused, not fenced) always among them; how many in all, and whether one
/// was suspect. `L` is what each reader keeps of a late use.
pub(crate) struct LateList<L> {
    pub(crate) listed: Vec<(L, bool)>,
    pub(crate) total: usize,
    pub(crate) unrefused: bool,
}

impl<L> Default for LateList<L> {
    fn default() -> Self {
        LateList {
            listed: Vec::new(),
            total: 0,
            unrefused: false,
        }
    }
}

impl<L> LateList<L> {
    /// The next late use, in position order; `suspect`: not refused, and not fenced.
    pub(crate) fn push(&mut self, l: L, suspect: bool) {
        self.total += 1;
        let first_unrefused = suspect && !self.unrefused;
        self.unrefused |= suspect;
        if self.listed.len() < LATE_OPS_LISTED {
            self.listed.push((l, suspect));
        } else if first_unrefused {
            // The op that makes it a warning is listed, whatever came before.
            *self.listed.last_mut().expect("the list is full") = (l, suspect);
        }
    }
}

/// What a late use's warning says of a grant: its holder, token, answer and acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GrantWords {
    pub(crate) process: u64,
    pub(crate) token: Option<u64>,
    pub(crate) complete_ns: u64,
    /// The index of its acquire.
    pub(crate) index: u64,
}

impl GrantWords {
    pub(crate) fn of(g: &Grant, index: u64) -> GrantWords {
        GrantWords {
            process: g.process,
            token: g.token,
            complete_ns: g.complete_ns,
            index,
        }
    }
}

/// A late use as its warning words it: the op, the grant's surely-dead bound then, and the
/// other holder.
pub(crate) struct LateWords<'a> {
    pub(crate) op: &'a ClientOp,
    pub(crate) dead_ns: u64,
    pub(crate) other: GrantWords,
}

/// The names a late use's warning reads: a lock op's lock, a store op's key, an error.
pub(crate) struct TargetNames<'a> {
    pub(crate) locks: &'a [String],
    pub(crate) keys: &'a [String],
    pub(crate) errors: &'a [String],
}

impl TargetNames<'_> {
    fn target(&self, op: &ClientOp) -> &str {
        let names = if op.func.is_lock_op() {
            self.locks
        } else {
            self.keys
        };
        names.get(op.target as usize).map_or("?", |s| s.as_str())
    }

    fn error(&self, op: &ClientOp) -> Option<&str> {
        self.errors.get(op.error as usize).map(|s| s.as_str())
    }
}

/// The note on the grants whose late uses were all refused or fenced. `warned_grants`: the
/// holders the same checker warned of. The note sits beside the checker's warning count, so
/// when there are warnings it says first that its holders are others: read alone, "not a
/// warning" beside "1 warning(s)" looked like a contradiction.
pub(crate) fn fenced_note(fenced_ops: usize, fenced_grants: usize, warned_grants: usize) -> String {
    let (besides, other) = match warned_grants {
        0 => (String::new(), ""),
        w => (format!("besides the {w} holder(s) warned of, "), "other "),
    };
    format!(
        "{besides}{fenced_ops} late op(s) of {fenced_grants} {other}holder(s) whose lease had surely ended (stalled past it) acted on that lease while another client held the lock, and every one was refused by the lock service or the store, or accepted by the store before any newer token had reached it, so none of them could undo a newer holder's work and none is a warning"
    )
}

fn unsafe_overlaps(m: &Model, index: &HoldIndex, out: &mut CheckOutput) {
    let shown = NewerTokenShown::new(m);
    let late = late_uses(m, index, &shown);
    // A late op the service or the store refused is fencing at work: what a correct service
    // always does with a paused holder, so no warning; so is a store op the store accepted
    // (or may have) before any newer token had reached its register, as a fenced store must.
    // Only a lock op that was accepted, or may have been (indeterminate, pending), or a store
    // op that was or may have been after a newer token reached the store, is suspicious.
    let (mut fenced_grants, mut fenced_ops, mut warned_grants) = (0, 0, 0);
    let names = TargetNames {
        locks: &m.locks,
        keys: &m.keys,
        errors: &m.errors,
    };
    let grant_words = |g: u32| {
        let grant = &m.grants[g as usize];
        GrantWords::of(grant, m.ops[grant.op].index)
    };
    for (g, list) in late {
        if list.unrefused {
            let words = |l: &Late| LateWords {
                op: &m.ops[l.op],
                dead_ns: l.dead_ns,
                other: grant_words(l.other),
            };
            let listed: Vec<(LateWords, bool)> =
                list.listed.iter().map(|(l, s)| (words(l), *s)).collect();
            out.warnings.push(unsafe_overlap(
                (m.lock_name(m.grants[g as usize].lock), &names),
                grant_words(g),
                &listed,
                list.total,
            ));
            warned_grants += 1;
        } else {
            fenced_grants += 1;
            fenced_ops += list.total;
        }
    }
    if fenced_grants > 0 {
        out.notes
            .push(fenced_note(fenced_ops, fenced_grants, warned_grants));
    }
}

/// grant -> its late uses
type LateUses = BTreeMap<u32, LateList<Late>>;

/// The uses of each grant's token after its lease was surely dead, while another process held
/// the lock.
fn late_uses(m: &Model, index: &HoldIndex, shown: &NewerTokenShown) -> LateUses {
    // The surely-dead bound as the history unfolds: a renew can only revive a lease from its
    // invoke on, so an op is judged against the renews invoked before it.
    let mut dead: Vec<Option<u64>> = m
        .grants
        .iter()
        .map(|g| {
            g.ttl_ms
                .map(|t| g.complete_ns.saturating_add(m.drift.upper_ns(t)))
        })
        .collect();
    let mut late: LateUses = BTreeMap::new();
    for (pos, op) in m.ops.iter().enumerate() {
        let g = m.grant_of[pos];
        if g == NO_GRANT {
            continue;
        }
        let grant = &m.grants[g as usize];
        if let Some(dead_ns) = dead[g as usize] {
            if op.invoke_ns > dead_ns {
                if let Some(other) =
                    index.other_hold_meeting(m, grant.lock, g, dead_ns, op.invoke_ns)
                {
                    let suspect = op.outcome != Outcome::Fail && !shown.fenced_yes(op);
                    let l = Late {
                        op: pos,
                        dead_ns,
                        other,
                    };
                    late.entry(g).or_default().push(l, suspect);
                }
            }
        }
        if op.func == Func::Renew {
            let d = &mut dead[g as usize];
            *d = renewed_dead(*d, op, grant.ttl_ms, m.drift);
        }
    }
    late
}

/// A grant's surely-dead bound `dead` after renew `op` (the grant's ttl `ttl_ms`), as
/// `Grant::surely_dead_ns` follows it: an ok renew replaces the bound, an indeterminate one
/// may have applied last.
pub(crate) fn renewed_dead(
    dead: Option<u64>,
    op: &ClientOp,
    ttl_ms: Option<u64>,
    drift: crate::model::Drift,
) -> Option<u64> {
    let bound = match (op.ttl_ms().or(ttl_ms), op.complete_ns()) {
        (Some(t), Some(c)) => Some(c.saturating_add(drift.upper_ns(t))),
        _ => None,
    };
    match op.outcome {
        Outcome::Ok => bound,
        Outcome::Info | Outcome::Pending => dead.zip(bound).map(|(x, y)| x.max(y)),
        Outcome::Fail => dead,
    }
}

/// When the fenced store had surely been shown a token newer than a late op's: per register,
/// the ok store ops that carry a token, by completion, with the highest token completed by
/// then. A late store op the store accepted (or may have) before any of them is what a correct
/// fenced store does: it cannot refuse a token it has seen no successor of.
struct NewerTokenShown {
    /// key -> (completion, highest token among ok store ops completed by then), ascending
    by_key: BTreeMap<u32, Vec<(u64, u64)>>,
}

impl NewerTokenShown {
    fn new(m: &Model) -> NewerTokenShown {
        let mut by_key: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
        for op in &m.ops {
            if let Some((c, t)) = shows_token(op) {
                by_key.entry(op.target).or_default().push((c, t));
            }
        }
        for list in by_key.values_mut() {
            list.sort_unstable();
            let mut top = 0;
            for e in list.iter_mut() {
                top = top.max(e.1);
                e.1 = top;
            }
        }
        NewerTokenShown { by_key }
    }

    /// Whether `op`, a late store op not refused, was applied (or may have been) only while no
    /// newer token than its own had surely reached its register: an ok op's effect is no
    /// earlier than its invoke, an indeterminate one's as late as its completion (a pending
    /// one's, any time).
    fn fenced_yes(&self, op: &ClientOp) -> bool {
        let Some((token, by)) = fenced_by(op) else {
            return false;
        };
        let Some(list) = self.by_key.get(&op.target) else {
            return true;
        };
        // The highest token of an ok store op completed before `by`.
        let n = list.partition_point(|&(c, _)| c < by);
        n == 0 || list[n - 1].1 <= token
    }
}

/// The (completion, token) an ok store op with a token shows its register.
pub(crate) fn shows_token(op: &ClientOp) -> Option<(u64, u64)> {
    if op.func.is_lock_op() || op.outcome != Outcome::Ok {
        return None;
    }
    op.token().zip(op.complete_ns()).map(|(t, c)| (c, t))
}

/// For a store op with a token: its token, and the instant by which a newer one reaching its
/// register makes it suspect (see `NewerTokenShown::fenced_yes`; `u64::MAX`: never answered).
pub(crate) fn fenced_by(op: &ClientOp) -> Option<(u64, u64)> {
    if op.func.is_lock_op() {
        return None;
    }
    let token = op.token()?;
    let by = match op.outcome {
        Outcome::Ok => op.invoke_ns,
        _ => op.complete_ns().unwrap_or(u64::MAX),
    };
    Some((token, by))
}

/// The warning of a grant `g` of lock `lock` whose `late` uses (listed, each with whether it is
/// suspect) number `total` in all.
pub(crate) fn unsafe_overlap(
    (lock, names): (&str, &TargetNames),
    g: GrantWords,
    late: &[(LateWords, bool)],
    total: usize,
) -> Violation {
    // The store's answer is what fencing is about, so lead with a late store op if there is
    // one, and with one that is suspect (what makes this a warning).
    let unrefused = |l: &&(LateWords, bool)| l.1;
    let store = |l: &&(LateWords, bool)| !l.0.op.func.is_lock_op();
    let (primary, _) = late
        .iter()
        .find(|l| unrefused(l) && store(l))
        .or_else(|| late.iter().find(unrefused))
        .or_else(|| late.iter().find(store))
        .unwrap_or(&late[0]);
    let op = primary.op;
    let other = primary.other;
    let mut ops = vec![g.index, other.index];
    ops.extend(late.iter().map(|(l, _)| l.op.index));
    let more: Vec<u64> = late
        .iter()
        .filter(|(l, _)| l.op.index != op.index)
        .map(|(l, _)| l.op.index)
        .collect();
    let more = match total - 1 {
        0 => String::new(),
        n if n == more.len() => {
            format!("; {n} other late op(s) with that token: {}", op_list(&more))
        }
        n => format!(
            "; {n} other late op(s) with that token, among them {}",
            op_list(&more)
        ),
    };
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::UnsafeOverlap,
        lock: Some(lock.to_string()),
        ops,
        window_ns: [primary.dead_ns, op.invoke_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{}'s lease on {lock} ({}, granted at {}, op {}) was surely dead after {}, yet p{} invoked a {} with that token at {} (op {}) while p{} held {lock} with {} from {} (op {}); {}{more}",
            g.process,
            token(g.token),
            secs(g.complete_ns),
            g.index,
            secs(primary.dead_ns),
            op.process,
            describe(names, op),
            secs(op.invoke_ns),
            op.index,
            other.process,
            token(other.token),
            secs(other.complete_ns),
            other.index,
            answer(names, op),
        ),
    }
}

/// `write to k0` / `renew of L0`.
fn describe(names: &TargetNames, op: &ClientOp) -> String {
    let name = names.target(op);
    match op.func {
        Func::Read => format!("read of {name}"),
        Func::Write => format!("write to {name}"),
        f => format!("{} of {name}", f.as_str()),
    }
}

/// What the store (or the lock service) did with a late op.
fn answer(names: &TargetNames, op: &ClientOp) -> String {
    let who = if op.func.is_lock_op() {
        "the lock service"
    } else {
        "the store"
    };
    match op.outcome {
        Outcome::Ok => format!("{who} accepted it"),
        Outcome::Fail => match names.error(op) {
            Some(e) => format!("{who} rejected it ({e})"),
            None => format!("{who} rejected it"),
        },
        Outcome::Info => format!("whether {who} applied it is indeterminate"),
        Outcome::Pending => "it never completed".to_string(),
    }
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// MutualExclusion's injectors.
    pub(crate) const MUTUAL_EXCLUSION: &[Injector] = &[
        Injector {
            name: "double-grant",
            kind: ViolationKind::DoubleGrant,
            adapter_shape: false,
            mutate: grant_inside_hold,
        },
        Injector {
            name: "double-grant-tokenless",
            kind: ViolationKind::DoubleGrant,
            adapter_shape: true,
            mutate: tokenless_grant_inside_hold,
        },
        Injector {
            name: "double-grant-lease-before-grant",
            kind: ViolationKind::DoubleGrant,
            adapter_shape: true,
            mutate: grant_inside_earlier_lease,
        },
        Injector {
            name: "double-grant-unordered",
            kind: ViolationKind::DoubleGrant,
            adapter_shape: true,
            mutate: unordered_grants,
        },
        Injector {
            name: "double-grant-session",
            kind: ViolationKind::DoubleGrant,
            adapter_shape: true,
            mutate: session_grants,
        },
    ];

    /// A fresh process is granted the lock inside another's definite hold.
    fn grant_inside_hold(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let (g, start, end) = pick(rng, &holds(ops, &grants(&h), 4_000_000))?;
        let token = make_room(ops, &g.lock, g.token);
        let q = fresh_process(ops);
        let t = start + (end - start) / 4;
        let ttl = g.ttl_ms;
        let answer = OpValue::default().with_token(token).with_ttl_ms(ttl);
        let new = fresh_grant(q, &g.lock, t, t + 1_000_000, ttl, answer);
        insert(ops, new).into_iter().next().map(|i| vec![i])
    }

    /// A fresh process is granted without a token inside another's definite hold, with a 1 ms
    /// lease answered after 2 ms: its own definite hold is empty, so the holds cannot overlap, and
    /// only placing the tokenless grant in the grant order finds it (it was asked for after the
    /// holder's grant returned, and answered before that grant's lease could end).
    fn tokenless_grant_inside_hold(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let (g, start, end) = pick(rng, &holds(ops, &grants(&h), 4_000_000))?;
        let q = fresh_process(ops);
        let t = start + (end - start) / 4;
        let answer = OpValue::default().with_ttl_ms(1);
        let new = fresh_grant(q, &g.lock, t, t + 2_000_000, 1, answer);
        insert(ops, new).into_iter().next().map(|i| vec![i])
    }

    /// A grant's lease is recorded as set before it (`lease_from_ns`: a session lease confirmed a
    /// quarter ttl before the acquire was sent, which only shortens what the model guarantees),
    /// and a fresh process is granted while that lease, counted from there, surely lasts.
    fn grant_inside_earlier_lease(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs: Vec<G> = grants(&h)
            .into_iter()
            .filter(|g| ops[g.invoke].time_ns >= g.ttl_ms * 250_000)
            .collect();
        let g = pick(rng, &gs)?;
        let from = ops[g.invoke].time_ns - g.ttl_ms * 250_000;
        let lease = history::LeaseEvidence {
            lease_from_ns: Some(from),
            ..Default::default()
        };
        lease.write_into(&mut ops[g.complete].value.extra);
        let (_, start, end) = holds(ops, std::slice::from_ref(&g), 4_000_000).pop()?;
        let token = make_room(ops, &g.lock, g.token);
        let q = fresh_process(ops);
        let t = start + (end - start) / 2;
        let answer = OpValue::default().with_token(token).with_ttl_ms(g.ttl_ms);
        let new = fresh_grant(q, &g.lock, t, t + 1_000_000, g.ttl_ms, answer);
        insert(ops, new).into_iter().next().map(|i| vec![i])
    }

    /// Three fresh processes ask for a lock no other op uses, at one instant drawn from the
    /// history's span, each with ttl 10 ms, and all are granted without a token 15 ms later: any
    /// order needs 20 ms (each grant after the previous lease could end).
    fn unordered_grants(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let end = ops.last()?.time_ns;
        let t = rng.random_range(0..=end);
        let lock = (0..)
            .map(|i| format!("Lunordered{i}"))
            .find(|l| !ops.iter().any(|o| o.lock.as_deref() == Some(l.as_str())))?;
        let q = fresh_process(ops);
        let answer = OpValue::default().with_ttl_ms(10);
        let new: Vec<Op> = (0..3)
            .flat_map(|i| fresh_grant(q + i, &lock, t, t + 15_000_000, 10, answer.clone()))
            .collect();
        // The three answers: `insert` returns the completions it placed.
        Some(insert(ops, new))
    }

    /// Two session grants on a lock of their own (model item 9), each asking for a 10 ms ttl: the
    /// first's holder sends nothing for 50 ms and then releases; the second is granted 20 ms in,
    /// while the first still believes it holds the lock (its ttl long past: leases would allow it).
    fn session_grants(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let end = ops.last()?.time_ns;
        let t = rng.random_range(0..=end);
        let lock = (0..)
            .map(|i| format!("Lsession{i}"))
            .find(|l| !ops.iter().any(|o| o.lock.as_deref() == Some(l.as_str())))?;
        let q = fresh_process(ops);
        const MS: u64 = 1_000_000;
        let grant = |id: &str| {
            OpValue::default()
                .with_grant(id)
                .with_evidence(&history::HoldEvidence {
                    hold: Some(history::Hold::Session),
                    committed: None,
                })
        };
        let named = |id: &str| OpValue::default().with_grant(id);
        let mut new = fresh_grant(q, &lock, t, t + MS, 10, grant("session-a"));
        new.extend(fresh_grant(
            q + 1,
            &lock,
            t + 20 * MS,
            t + 21 * MS,
            10,
            grant("session-b"),
        ));
        for (p, at, id) in [
            (q, t + 50 * MS, "session-a"),
            (q + 1, t + 60 * MS, "session-b"),
        ] {
            new.push(lock_op(p, at, OpType::Invoke, F::Release, &lock, named(id)));
            new.push(lock_op(
                p,
                at + MS,
                OpType::Ok,
                F::Release,
                &lock,
                OpValue::default(),
            ));
        }
        // The completions in time order: the first grant, the second, the two releases.
        insert(ops, new).get(1).map(|&i| vec![i])
    }
}

#[cfg(test)]
mod tests {
    use super::{chains_with_any, Top2};

    /// Each node's next, the nodes flagged, and what each node's path holds.
    type ChainCase<'a> = (&'a [Option<usize>], &'a [usize], &'a [bool]);

    #[test]
    fn a_chain_holds_a_flag_when_any_node_it_leads_to_has_one() {
        let n = None;
        let cases: &[ChainCase] = &[
            (&[], &[], &[]),
            (&[n], &[], &[false]),
            (&[n], &[0], &[true]),
            // 2 -> 1 -> 0: the flag at the end reaches back to the start.
            (&[n, Some(0), Some(1)], &[0], &[true, true, true]),
            // ... and one at the start reaches nothing it leads to.
            (&[n, Some(0), Some(1)], &[2], &[false, false, true]),
            // A cycle 0 <-> 1 with a flag on it, and 2 leading into it.
            (&[Some(1), Some(0), Some(0)], &[1], &[true, true, true]),
            // The same cycle without one: only the flagged tail has it.
            (&[Some(1), Some(0), Some(0)], &[2], &[false, false, true]),
            // A node pointing at itself.
            (&[Some(0), Some(0)], &[0], &[true, true]),
            // A path walked after another reaches the known part of it.
            (
                &[n, Some(0), Some(1), Some(1), Some(3)],
                &[3],
                &[false, false, false, true, true],
            ),
        ];
        for &(next, flagged, want) in cases {
            let flag: Vec<bool> = (0..next.len()).map(|k| flagged.contains(&k)).collect();
            assert_eq!(
                chains_with_any(next, &flag),
                want,
                "next {next:?}, flagged {flagged:?}"
            );
        }
    }

    #[test]
    fn top2_answers_for_other_processes() {
        let mut t = Top2::default();
        t.add(10, 1, 0);
        assert_eq!(t.other_than(1), None);
        assert_eq!(t.other_than(2).map(|x| x.0), Some(10));
        t.add(20, 1, 1);
        assert_eq!(t.other_than(1), None);
        t.add(15, 2, 2);
        assert_eq!(t.other_than(1).map(|x| x.0), Some(15));
        assert_eq!(t.other_than(2).map(|x| x.0), Some(20));
        t.add(30, 2, 3);
        assert_eq!(t.other_than(2).map(|x| x.0), Some(20));
        assert_eq!(t.other_than(1).map(|x| x.0), Some(30));
        t.add(12, 3, 4);
        assert_eq!(t.other_than(2).map(|x| x.0), Some(20));
    }
}
