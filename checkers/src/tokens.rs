//! Fencing tokens as the lock service hands them out (`token-reused`, `token-regressed`) and
//! as it accepts them back (`stale-release-accepted`, `stale-renew-accepted`).
//!
//! Real-time precedence is never materialised pairwise: grants sorted by completion form a
//! frontier (the highest token among grants completed so far), and the ops judged against it
//! are swept in invoke order.

use crate::inject::Injector;
use crate::model::{span_end_until, Func, Grant, Model, SpanEnd, View, NO_GRANT};
use crate::mutex::{granted_twice, holds_overlap};
use crate::text::{secs, token};
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};

/// `token-reused` and `token-regressed`.
pub struct FencingTokens;

/// `stale-release-accepted` and `stale-renew-accepted`.
pub struct StaleLockOps;

/// Sweeps `queries` (lock, time, payload), sorted by (lock, time), against the grants with a
/// token sorted by (lock, completion); calls `found` with the grant holding the highest token
/// among those of the same lock completed strictly before the query's time (ties: the first
/// to complete).
pub(crate) fn frontier_sweep<P: Copy>(
    m: &Model,
    queries: &[(u32, u64, P)],
    mut found: impl FnMut(P, Option<(u64, u32)>),
) {
    debug_assert!(
        queries
            .windows(2)
            .all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1)),
        "queries are sorted by (lock, time)"
    );
    let done = tokened_grants_by(m, |g| g.complete_ns);
    let mut next = 0;
    let mut lock = None;
    // (token, grant)
    let mut best: Option<(u64, u32)> = None;
    for &(q_lock, t, payload) in queries {
        if lock != Some(q_lock) {
            lock = Some(q_lock);
            best = None;
            next = done.partition_point(|d| d.0 < q_lock);
        }
        // Bounded by `done.len()` over the whole sweep: `next` only moves forward.
        while next < done.len() && done[next].0 == q_lock && done[next].1 < t {
            let g = done[next].2;
            let tok = m.grants[g as usize].token.expect("filtered on token");
            if best.is_none_or(|(b, _)| tok > b) {
                best = Some((tok, g));
            }
            next += 1;
        }
        found(payload, best);
    }
}

impl Checker for FencingTokens {
    fn injectors(&self) -> &'static [Injector] {
        injectors::FENCING_TOKENS
    }

    fn name(&self) -> &'static str {
        "fencing-tokens"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::TokenReused, ViolationKind::TokenRegressed]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let untokened = m.grants.iter().filter(|g| g.token.is_none()).count();
        if untokened > 0 {
            out.notes.push(untokened_note(untokened as u64));
        }
        reused(m, &mut out);
        regressed(m, &mut out);
        out.nothing_to_judge(granted_twice(m, |g| g.token.is_some()), || {
            NO_TOKEN_ORDER.to_string()
        });
        verdict(m, cfg, &mut out);
        out
    }
}

/// The note on grants whose token could not be judged.
pub(crate) fn untokened_note(untokened: u64) -> String {
    format!("{untokened} ok acquire(s) carry no token: their tokens could not be judged")
}

/// Why `fencing-tokens` judged nothing.
pub(crate) const NO_TOKEN_ORDER: &str =
    "no lock was granted twice with tokens: there was no token order to judge";

/// Why `stale-lock-ops` judged nothing.
pub(crate) const NO_STALE: &str =
    "no renew or release naming a grant succeeded: there was nothing stale to catch";

/// The `fencing-tokens` violations, unfinished: what a streaming reader must find.
#[cfg(test)]
pub(crate) fn streamed_readings(m: &Model) -> Vec<Violation> {
    let mut out = CheckOutput::new();
    reused(m, &mut out);
    regressed(m, &mut out);
    out.violations
}

/// The `stale-lock-ops` violations, unfinished: what a streaming reader must find.
#[cfg(test)]
pub(crate) fn stale_streamed_readings(m: &Model) -> Vec<Violation> {
    StaleLockOps
        .check_model(m, &CheckConfig::default())
        .violations
}

fn reused(m: &Model, out: &mut CheckOutput) {
    let mut by_token: Vec<(u32, u64, u64, u32)> = m
        .grants
        .iter()
        .enumerate()
        .filter_map(|(i, g)| g.token.map(|t| (g.lock, t, g.complete_ns, i as u32)))
        .collect();
    by_token.sort_unstable();
    // Each later grant is paired with the first grant of that token: one violation per reuse.
    let mut first = 0;
    for i in 1..by_token.len() {
        let (lock, tok, _, g) = by_token[i];
        if (by_token[first].0, by_token[first].1) != (lock, tok) {
            first = i;
            continue;
        }
        let a = Granted::of(m, &m.grants[by_token[first].3 as usize]);
        let b = Granted::of(m, &m.grants[g as usize]);
        out.violations.push(reused_violation(m, lock, tok, a, b));
    }
}

/// What a violation names of a grant: its holder, its answer and the index of that answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Granted {
    pub(crate) process: u64,
    pub(crate) complete_ns: u64,
    pub(crate) op_index: u64,
}

impl Granted {
    /// Grant `g`, its op kept by `view`.
    pub(crate) fn of(view: &impl View, g: &Grant) -> Granted {
        Granted {
            process: g.process,
            complete_ns: g.complete_ns,
            op_index: view.op(g.op).index,
        }
    }
}

/// `token-reused`: `b` was granted lock `lock` with token `tok`, which `a`, the first grant
/// of it, already carried.
pub(crate) fn reused_violation(
    view: &impl View,
    lock: u32,
    tok: u64,
    a: Granted,
    b: Granted,
) -> Violation {
    let name = view.lock_name(lock);
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::TokenReused,
        lock: Some(name.to_string()),
        ops: vec![a.op_index, b.op_index],
        window_ns: [a.complete_ns, b.complete_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{} was granted {name} with token {tok} at {} (op {}), and p{} was granted {name} with the same token {tok} at {} (op {})",
            a.process,
            secs(a.complete_ns),
            a.op_index,
            b.process,
            secs(b.complete_ns),
            b.op_index,
        ),
    }
}

/// The grants that carry a token, as `(lock, time, grant)` sorted by lock then by `time_of`:
/// the order every sweep here walks them in.
pub(crate) fn tokened_grants_by(
    m: &Model,
    time_of: impl Fn(&Grant) -> u64,
) -> Vec<(u32, u64, u32)> {
    let mut v: Vec<(u32, u64, u32)> = m
        .grants
        .iter()
        .enumerate()
        .filter(|(_, g)| g.token.is_some())
        .map(|(i, g)| (g.lock, time_of(g), i as u32))
        .collect();
    v.sort_unstable();
    v
}

/// Equal tokens are `token-reused`'s to report: one fact, one violation. This rule takes the
/// strict case only, first in real time (A completed before B was invoked), then in the order
/// exclusivity forces (see [`forced_before`]).
fn regressed(m: &Model, out: &mut CheckOutput) {
    let queries = tokened_grants_by(m, |g| g.invoke_ns);
    let mut reported = vec![false; m.grants.len()];
    frontier_sweep(m, &queries, |gb, best| {
        let b = &m.grants[gb as usize];
        let Some((tok_a, ga)) = best else { return };
        let a = Granted::of(m, &m.grants[ga as usize]);
        if let Some(v) = regressed_violation(m, (a, tok_a), b) {
            reported[gb as usize] = true;
            out.violations.push(v);
        }
    });
    inferred_regressed(m, &reported, out);
}

/// `token-regressed` in real time: `a`, with token `tok_a`, the highest among the grants of
/// `b`'s lock completed before `b` was invoked, if it is higher than `b`'s.
pub(crate) fn regressed_violation(
    view: &impl View,
    (a, tok_a): (Granted, u64),
    b: &Grant,
) -> Option<Violation> {
    let tok_b = b.token.expect("a grant with a token");
    if tok_a <= tok_b {
        return None;
    }
    let name = view.lock_name(b.lock);
    let ib = view.op(b.op).index;
    Some(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::TokenRegressed,
        lock: Some(name.to_string()),
        ops: vec![a.op_index, ib],
        window_ns: [a.complete_ns, b.complete_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{} was granted {name} with token {tok_a} at {} (op {}), before p{} invoked the acquire at {} that was granted {name} with the lower token {tok_b} at {} (op {ib})",
            a.process,
            secs(a.complete_ns),
            a.op_index,
            b.process,
            secs(b.invoke_ns),
            secs(b.complete_ns),
        ),
    })
}

/// The time before which any grant that completed must have been granted before `b`: the
/// later of `b`'s invoke (real time) and `b.alive_until_ns` (exclusivity).
///
/// Why exclusivity forces an order: `b` was granted at some point `g_b` in its window and
/// stayed alive until at least `alive_until_ns`, whatever `g_b` was. A grant `a` that completed
/// before `alive_until_ns` was granted at `g_a < alive_until_ns`. Had `b` been granted first
/// (`g_b < g_a`), `a` would have been granted while `b` was alive. So, unless the service
/// granted the lock twice, `a` came first and its token must be the lower one.
///
/// This is the precedence graph over one lock's grants, with real-time and exclusivity edges
/// (`a -> b` iff `a.complete_ns < forced_before(b)`) and token edges (lower token -> higher),
/// decided without building it: tokens order all grants totally, so any cycle contains a
/// forced edge `a -> b` with `token(a) > token(b)`, whose shortest witness is that pair (plus
/// the ops that prove how long `b` stayed alive). The frontier sweep finds, for every `b`,
/// the highest token among the grants with an edge into it: O(n log n), never pairwise.
///
/// Accepted store writes add nothing to it: a write is invoked after its own grant completed,
/// so a real-time path through writes (grant, ..., write completed before a grant was invoked)
/// implies the direct real-time edge between the grants; and a store-order edge between writes
/// whose tokens disagree is exactly `stale-write-accepted`, the store checker's fact.
pub(crate) fn forced_before(b: &Grant) -> u64 {
    b.invoke_ns.max(b.alive_until_ns)
}

/// The ops that prove `b` stayed alive until `alive_until_ns`: what ended its span counted
/// from its invoke (its release, or the renew that set the bound; its grant is named anyway).
fn alive_proof(m: &impl View, b: &Grant) -> (Vec<u64>, String) {
    let (end, cause) = span_end_until(m, b, b.invoke_ns, u64::MAX);
    if m.is_session(b) {
        let mut ops = Vec::new();
        let why = format!(
            "while p{} believed it held it, {}",
            b.process,
            crate::mutex::session_end(m, cause, &mut ops)
        );
        return (ops, why);
    }
    match cause {
        SpanEnd::Release(r) => {
            let rel = m.op(r as usize);
            (
                vec![rel.index],
                format!(
                    "until its release was invoked at {} (op {})",
                    secs(rel.invoke_ns),
                    rel.index
                ),
            )
        }
        SpanEnd::Lease(None) => (
            Vec::new(),
            format!(
                "until {}, its lease's lower bound ({}, ttl {} ms)",
                secs(end),
                match m.lease_set_before(b) {
                    Some(from) => format!("surely kept alive from {}", secs(from)),
                    None => format!("invoked at {}", secs(b.invoke_ns)),
                },
                b.ttl_ms.unwrap_or(0)
            ),
        ),
        SpanEnd::Lease(Some(r)) => {
            let r = m.op(r as usize);
            (
                vec![r.index],
                format!(
                    "until {}, its lease's lower bound as set by the renew invoked at {} (op {})",
                    secs(end),
                    secs(r.invoke_ns),
                    r.index
                ),
            )
        }
    }
}

fn inferred_regressed(m: &Model, reported: &[bool], out: &mut CheckOutput) {
    let mut queries: Vec<(u32, u64, u32)> = m
        .grants
        .iter()
        .enumerate()
        .filter(|(i, g)| g.token.is_some() && !reported[*i] && forced_before(g) > g.invoke_ns)
        .map(|(i, g)| (g.lock, forced_before(g), i as u32))
        .collect();
    queries.sort_unstable();
    let done = tokened_grants_by(m, |g| g.complete_ns);
    let mut next = 0;
    let mut lock = None;
    let mut top = TopByProcess::default();
    for &(q_lock, t, gb) in &queries {
        if lock != Some(q_lock) {
            lock = Some(q_lock);
            top = TopByProcess::default();
            next = done.partition_point(|d| d.0 < q_lock);
        }
        // Bounded by `done.len()` over the whole sweep: `next` only moves forward.
        while next < done.len() && done[next].0 == q_lock && done[next].1 < t {
            let g = &m.grants[done[next].2 as usize];
            top.add(g.token.expect("filtered on token"), g.process, done[next].2);
            next += 1;
        }
        let b = &m.grants[gb as usize];
        // A process's own grants are ordered by real time (one op in flight), and a service
        // may re-grant to its holder: exclusivity says nothing about them.
        let Some((_, _, ga)) = top.other_than(b.process) else {
            continue;
        };
        let a = &m.grants[ga as usize];
        out.violations
            .extend(inferred_violation(m, (a, m.ops[a.op].index), b));
    }
}

/// `token-regressed` in the order exclusivity forces: `a` (its op's index beside it), of
/// another process, has the highest token among the grants of `b`'s lock completed before
/// `forced_before(b)`; it is a violation if that token is higher than `b`'s and neither real
/// time nor a double grant says it otherwise.
pub(crate) fn inferred_violation(
    m: &impl View,
    (a, ia): (&Grant, u64),
    b: &Grant,
) -> Option<Violation> {
    let tok_a = a.token.expect("a grant with a token");
    let tok_b = b.token.expect("a grant with a token");
    // Only what `b`'s span was sure to be when `a` returned counts: ok renews or releases
    // of `b` invoked later are stale-renew/release-accepted against `a`, their own fact.
    let sure_ns = span_end_until(m, b, b.invoke_ns, a.complete_ns).0;
    // When real time proves `b` came first, `a` was granted inside `b`'s span: that is the
    // double-grant's fact (the token-order reading in `mutex`), not a token out of order.
    if tok_a <= tok_b
        || holds_overlap(a, b)
        || a.complete_ns >= sure_ns.max(b.invoke_ns)
        || b.complete_ns < a.invoke_ns
    {
        return None;
    }
    let name = m.lock_name(b.lock);
    let (proof, how) = alive_proof(m, b);
    let ib = m.op(b.op).index;
    let mut ops = vec![ia, ib];
    ops.extend(proof);
    Some(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::TokenRegressed,
        lock: Some(name.to_string()),
        ops,
        window_ns: [
            a.complete_ns.min(b.complete_ns),
            a.complete_ns.max(b.complete_ns),
        ],
        nemesis: Vec::new(),
        explanation: format!(
            "p{pb}'s grant of {name} with token {tok_b} (op {ib}, asked at {}) stayed alive {how}, and p{pa}'s grant with token {tok_a} completed before that, at {} (op {ia}): had p{pb} been granted first, p{pa} would have been granted while p{pb} held {name}, so p{pa} was granted first, yet it got the higher token",
            secs(b.invoke_ns),
            secs(a.complete_ns),
            pa = a.process,
            pb = b.process,
        ),
    })
}

/// The highest token seen, and the highest of any process other than its holder's; ties go
/// to the first seen (the first to complete).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TopByProcess {
    /// (token, process, grant)
    best: Option<(u64, u64, u32)>,
    other: Option<(u64, u64, u32)>,
}

impl TopByProcess {
    pub(crate) fn add(&mut self, token: u64, process: u64, grant: u32) {
        let new = (token, process, grant);
        match self.best {
            None => self.best = Some(new),
            Some(b) if b.1 == process => {
                if token > b.0 {
                    self.best = Some(new);
                }
            }
            Some(b) if token > b.0 => {
                self.other = Some(b);
                self.best = Some(new);
            }
            Some(_) => {
                if self.other.is_none_or(|o| token > o.0) {
                    self.other = Some(new);
                }
            }
        }
    }

    pub(crate) fn other_than(&self, process: u64) -> Option<(u64, u64, u32)> {
        match self.best {
            Some(b) if b.1 != process => Some(b),
            _ => self.other,
        }
    }
}

impl Checker for StaleLockOps {
    fn injectors(&self) -> &'static [Injector] {
        injectors::STALE_LOCK_OPS
    }

    fn name(&self) -> &'static str {
        "stale-lock-ops"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[
            ViolationKind::StaleReleaseAccepted,
            ViolationKind::StaleRenewAccepted,
        ]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let mut queries: Vec<(u32, u64, usize)> = m
            .ops
            .iter()
            .enumerate()
            .filter(|(i, o)| {
                matches!(o.func, Func::Release | Func::Renew)
                    && o.outcome == Outcome::Ok
                    && o.target != crate::model::NO_TARGET
                    && op_token(m, *i).is_some()
            })
            .map(|(i, o)| (o.target, o.invoke_ns, i))
            .collect();
        queries.sort_unstable();
        let named = m.ops.iter().enumerate().any(|(i, o)| {
            o.outcome == Outcome::Ok
                && m.grant_of[i] != NO_GRANT
                && o.func.is_lock_op()
                && o.func != Func::Acquire
        });
        let mut reported = vec![false; m.ops.len()];
        frontier_sweep(m, &queries, |pos, best| {
            let Some((tok_a, ga)) = best else { return };
            let tok = op_token(m, pos).expect("filtered on token");
            let a = Granted::of(m, &m.grants[ga as usize]);
            if let Some(v) = stale_token_violation(m, pos, tok, (a, tok_a)) {
                reported[pos] = true;
                out.violations.push(v);
            }
        });
        released_or_replaced(m, &reported, &mut out);
        named_nothing(m, &mut out);
        // After every reading: an op that names no grant can be stale too.
        out.nothing_to_judge(!queries.is_empty() || named, || NO_STALE.to_string());
        verdict(m, cfg, &mut out);
        out
    }
}

fn stale_kind(func: Func) -> (ViolationKind, &'static str) {
    if func == Func::Release {
        (ViolationKind::StaleReleaseAccepted, "release")
    } else {
        (ViolationKind::StaleRenewAccepted, "renew")
    }
}

/// `stale-release-accepted` or `stale-renew-accepted` by token: the ok renew or release at
/// `pos`, which named token `tok`, against `a`, with token `tok_a`, the highest among the
/// grants of its lock completed before it was invoked, if that token is newer.
pub(crate) fn stale_token_violation(
    m: &impl View,
    pos: usize,
    tok: u64,
    (a, tok_a): (Granted, u64),
) -> Option<Violation> {
    if tok >= tok_a {
        return None;
    }
    let op = m.op(pos);
    let name = m.lock_name(op.target);
    let (kind, what) = stale_kind(op.func);
    let complete_ns = op.complete_ns().expect("an ok op has completed");
    Some(Violation {
        cycle: Vec::new(),
        kind,
        lock: Some(name.to_string()),
        ops: vec![a.op_index, op.index],
        window_ns: [a.complete_ns, complete_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{}'s {what} of {name} {}, invoked at {}, succeeded at {} (op {}), yet p{} had been granted {name} with the newer {} at {} (op {}), before that {what} was invoked",
            op.process,
            sent_with(op.token(), tok),
            secs(op.invoke_ns),
            secs(complete_ns),
            op.index,
            a.process,
            token(Some(tok_a)),
            secs(a.complete_ns),
            a.op_index,
        ),
    })
}

/// How a renew or release named its grant's token: its own, or none (it named the grant).
fn sent_with(own: Option<u64>, tok: u64) -> String {
    match own {
        Some(t) => format!("with token {t}"),
        None => format!("sent without a token for its grant of token {tok}"),
    }
}

/// An accepted renew or release that names no lease the service can have granted (model item
/// 6): sent without token or grant id by a process that had not asked for the lock (not
/// counting refused acquires), or naming a token or id that no grant carries while no acquire
/// whose answer was lost (info or pending: its token and id are unknown) could be it. Ops whose
/// name is ambiguous between grants without a readable token are not judged.
fn named_nothing(m: &Model, out: &mut CheckOutput) {
    // (process, lock) -> the position of its first acquire that may have granted it (a
    // process's ops are in program order in `ops`, ties included); lock -> the first acquire
    // invoke whose answer was lost.
    let mut asked: crate::FxMap<(u64, u32), usize> = crate::FxMap::default();
    let mut lost: crate::FxMap<u32, u64> = crate::FxMap::default();
    for (pos, op) in m.ops.iter().enumerate() {
        if op.func != Func::Acquire || op.outcome == Outcome::Fail {
            continue;
        }
        asked.entry((op.process, op.target)).or_insert(pos);
        if op.outcome != Outcome::Ok {
            lost.entry(op.target).or_insert(op.invoke_ns);
        }
    }
    for (pos, op) in m.ops.iter().enumerate() {
        if m.grant_of[pos] != NO_GRANT || !matches!(op.func, Func::Renew | Func::Release) {
            continue;
        }
        let by_name = op.token().is_some() || m.names_grant(pos);
        let asked_before = (asked.get(&(op.process, op.target))).is_some_and(|&a| a < pos);
        let lost_from = lost.get(&op.target).copied();
        out.violations.extend(named_nothing_violation(
            m,
            pos,
            by_name,
            asked_before,
            lost_from,
        ));
    }
}

/// [`named_nothing`] for the op at `pos`, which acts on no grant: named by token or grant id
/// (`by_name`), sent by a process that had asked for its lock before (`asked_before`), the
/// first acquire of that lock whose answer was lost invoked at `lost_from_ns`.
pub(crate) fn named_nothing_violation(
    m: &impl View,
    pos: usize,
    by_name: bool,
    asked_before: bool,
    lost_from_ns: Option<u64>,
) -> Option<Violation> {
    let op = m.op(pos);
    if !matches!(op.func, Func::Renew | Func::Release)
        || op.lease_outcome() != Outcome::Ok
        || op.target == crate::model::NO_TARGET
    {
        return None;
    }
    let done = op.complete_ns().expect("an ok op has completed");
    // Tokens are positive: token 0 is no lease's.
    let could = if by_name {
        op.token() != Some(0) && lost_from_ns.is_some_and(|t| t <= done)
    } else {
        asked_before
    };
    if could {
        return None;
    }
    let (kind, what) = stale_kind(op.func);
    let name = m.lock_name(op.target);
    let why = match op.token() {
        Some(t) => format!("names token {t}, which no grant of {name} carries"),
        None if by_name => format!("names a grant id no grant of {name} carries"),
        None => format!(
            "was sent without a token or grant id by p{}, which had not asked for {name}",
            op.process
        ),
    };
    Some(Violation {
        cycle: Vec::new(),
        kind,
        lock: Some(name.to_string()),
        ops: vec![op.index],
        window_ns: [op.invoke_ns, done],
        nemesis: Vec::new(),
        explanation: format!(
            "p{}'s {what} of {name}, invoked at {}, succeeded at {} (op {}), yet it {why} (and no acquire whose answer was lost could be it): it named no lease the service had granted",
            op.process,
            secs(op.invoke_ns),
            secs(done),
            op.index,
        ),
    })
}

/// The other readings of "an accepted renew or release names the current lease" (model items
/// 4 and 5), for grants with or without tokens: the lease it named had been released (an ok
/// release of it returned before it was invoked: a released lease stays released), or another
/// grant of the lock, asked for after the named one returned, had returned before it was
/// invoked (so the named lease was no longer current, whatever the tokens). Ops whose name is
/// ambiguous are not judged; those the token sweep reported are not reported again.
fn released_or_replaced(m: &Model, reported: &[bool], out: &mut CheckOutput) {
    let by_done = GrantsByDone::new(m);
    for (gi, g) in m.grants.iter().enumerate() {
        let judged = |pos: usize| !reported[pos] && m.grant_of[pos] == gi as u32;
        let replaced = |at_ns: u64| {
            let b = &m.grants[by_done.replaced(g, at_ns)?];
            Some((Granted::of(m, b), b.invoke_ns))
        };
        epoch_violations(m, g, judged, replaced, &mut out.violations);
    }
}

/// [`released_or_replaced`] over one grant `g`'s epoch: of its ops those `judged` says (the
/// ops that act on it, not reported by token), and `replaced`, the grant of its lock asked
/// for latest among those completed before an instant (with its invoke), if it was asked for
/// after `g` returned.
pub(crate) fn epoch_violations(
    m: &impl View,
    g: &Grant,
    judged: impl Fn(usize) -> bool,
    replaced: impl Fn(u64) -> Option<(Granted, u64)>,
    out: &mut Vec<Violation>,
) {
    let mut released: Option<&crate::ClientOp> = None;
    for &pos in &g.epoch_ops {
        let pos = pos as usize;
        let op = m.op(pos);
        if op.lease_outcome() != Outcome::Ok || !judged(pos) {
            continue;
        }
        let (kind, what) = stale_kind(op.func);
        let name = m.lock_name(op.target);
        let done = op.complete_ns().expect("an ok op has completed");
        let how = match (op.token(), g.token) {
            (Some(t), _) => format!("with token {t}"),
            (None, Some(t)) => format!("sent without a token for its grant of token {t}"),
            (None, None) => format!("for its grant (op {})", m.op(g.op).index),
        };
        // Surely before: by real time, or by the sender's own program order.
        let before =
            |r: &&crate::ClientOp| r.complete_or_max() < op.invoke_ns || r.process == op.process;
        // Two accepted releases of one lease cannot both have found it current, whatever
        // their timing; a renew concurrent with the release may have come first.
        if let Some(r) = released.filter(|r| op.func == Func::Release || before(r)) {
            out.push(Violation {
                cycle: Vec::new(),
                kind,
                lock: Some(name.to_string()),
                ops: vec![m.op(g.op).index, r.index, op.index],
                window_ns: [r.complete_or_max(), done],
                nemesis: Vec::new(),
                explanation: format!(
                    "p{}'s {what} of {name} {how}, invoked at {}, succeeded at {} (op {}), yet that grant's release (op {}, answered at {}) was accepted too{}: a released lease is no longer the current one",
                    op.process,
                    secs(op.invoke_ns),
                    secs(done),
                    op.index,
                    r.index,
                    secs(r.complete_or_max()),
                    if before(&r) { ", before it was invoked" } else { "" },
                ),
            });
            continue;
        }
        if let Some((b, b_invoke_ns)) = replaced(op.invoke_ns) {
            out.push(Violation {
                cycle: Vec::new(),
                kind,
                lock: Some(name.to_string()),
                ops: vec![m.op(g.op).index, b.op_index, op.index],
                window_ns: [b.complete_ns, done],
                nemesis: Vec::new(),
                explanation: format!(
                    "p{}'s {what} of {name} {how}, invoked at {}, succeeded at {} (op {}), yet p{} had asked for {name} at {}, after that grant returned, and been granted it at {} (op {}), before that {what} was invoked: the lease it named was no longer the current one",
                    op.process,
                    secs(op.invoke_ns),
                    secs(done),
                    op.index,
                    b.process,
                    secs(b_invoke_ns),
                    secs(b.complete_ns),
                    b.op_index,
                ),
            });
            continue;
        }
        if op.func == Func::Release && released.is_none() {
            released = Some(op);
        }
    }
}

/// Per lock, grants by completion with the running maximum of their invokes: "a grant asked
/// after instant x returned before y" is max-invoke-before-y > x.
struct GrantsByDone {
    /// (lock, completion, invoke, grant), sorted.
    by_done: Vec<(u32, u64, u64, usize)>,
    /// Per entry of `by_done`: the latest invoke among the lock's grants completed so far, and
    /// that grant.
    max_invoke: Vec<(u64, usize)>,
}

impl GrantsByDone {
    fn new(m: &Model) -> GrantsByDone {
        let mut by_done: Vec<(u32, u64, u64, usize)> = m
            .grants
            .iter()
            .enumerate()
            .map(|(i, g)| (g.lock, g.complete_ns, g.invoke_ns, i))
            .collect();
        by_done.sort_unstable();
        let mut max_invoke: Vec<(u64, usize)> = Vec::with_capacity(by_done.len());
        for (k, &(lock, _, inv, gi)) in by_done.iter().enumerate() {
            let prev = (k > 0 && by_done[k - 1].0 == lock).then(|| max_invoke[k - 1]);
            max_invoke.push(match prev {
                Some(p) if p.0 >= inv => p,
                _ => (inv, gi),
            });
        }
        debug_assert_eq!(max_invoke.len(), by_done.len(), "one maximum per grant");
        GrantsByDone {
            by_done,
            max_invoke,
        }
    }

    /// A grant of `g`'s lock asked for after `g` returned and returned itself before `at_ns`
    /// (the one asked for latest), if there is one.
    fn replaced(&self, g: &Grant, at_ns: u64) -> Option<usize> {
        let lo = self.by_done.partition_point(|d| d.0 < g.lock);
        let hi = self
            .by_done
            .partition_point(|d| (d.0, d.1) < (g.lock, at_ns));
        if hi <= lo {
            return None;
        }
        let (inv, bi) = self.max_invoke[hi - 1];
        (inv > g.complete_ns).then_some(bi)
    }
}

/// The token a renew or release names: its own, else (sent without one) the token of the
/// process's grant it acts on.
fn op_token(m: &Model, pos: usize) -> Option<u64> {
    m.ops[pos].token().or_else(|| match m.grant_of[pos] {
        NO_GRANT => None,
        g => m.grants[g as usize].token,
    })
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// FencingTokens's injectors.
    pub(crate) const FENCING_TOKENS: &[Injector] = &[
        Injector {
            name: "token-reused",
            kind: ViolationKind::TokenReused,
            adapter_shape: false,
            mutate: reuse_token,
        },
        Injector {
            name: "token-regressed",
            kind: ViolationKind::TokenRegressed,
            adapter_shape: false,
            mutate: regress_token,
        },
        Injector {
            name: "token-regressed-inferred",
            kind: ViolationKind::TokenRegressed,
            adapter_shape: false,
            mutate: regress_token_inferred,
        },
    ];

    /// StaleLockOps's injectors.
    pub(crate) const STALE_LOCK_OPS: &[Injector] = &[
        Injector {
            name: "stale-release-accepted",
            kind: ViolationKind::StaleReleaseAccepted,
            adapter_shape: false,
            mutate: stale_release,
        },
        Injector {
            name: "stale-renew-accepted",
            kind: ViolationKind::StaleRenewAccepted,
            adapter_shape: false,
            mutate: stale_renew,
        },
        Injector {
            name: "renew-after-release",
            kind: ViolationKind::StaleRenewAccepted,
            adapter_shape: true,
            mutate: renew_after_release,
        },
    ];

    /// A later grant gets an earlier grant's token.
    fn reuse_token(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs = grants(&h);
        let pairs: Vec<(G, G)> = gs
            .iter()
            .flat_map(|b| {
                gs.iter()
                    .filter(move |a| a.lock == b.lock && a.complete < b.complete)
                    .map(move |a| (a.clone(), b.clone()))
            })
            .take(500)
            .collect();
        let (a, b) = pick(rng, &pairs)?;
        ops[b.complete].value.token = Some(a.token);
        Some(vec![ops[a.complete].index, ops[b.complete].index])
    }

    /// A grant asked for after another completed gets a lower token.
    fn regress_token(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs = grants(&h);
        let later: Vec<G> = gs
            .iter()
            .filter(|b| {
                gs.iter()
                    .any(|a| a.lock == b.lock && ops[a.complete].time_ns < ops[b.invoke].time_ns)
            })
            .cloned()
            .collect();
        let b = pick(rng, &later)?;
        ops[b.complete].value.token = Some(0);
        Some(vec![ops[b.complete].index])
    }

    /// A fresh process's grant completes inside another grant B's acquire window, with a lease
    /// too short to give it a definite hold, and before B's grant can have ended (B's release or
    /// lease bound): exclusivity forces it before B, yet it carries a higher token than B.
    fn regress_token_inferred(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs = grants(&h);
        // B's window must leave room for the injected acquire, and B's hold must be sure past it.
        let windows: Vec<G> = gs
            .iter()
            .filter(|g| ops[g.complete].time_ns - ops[g.invoke].time_ns > 4_000_000)
            .cloned()
            .collect();
        let b = pick(rng, &windows)?;
        let token = make_room(ops, &b.lock, b.token);
        let q = fresh_process(ops);
        let t = ops[b.invoke].time_ns + 1;
        let new = vec![
            lock_op(
                q,
                t,
                OpType::Invoke,
                F::Acquire,
                &b.lock,
                OpValue::default().with_ttl_ms(1),
            ),
            lock_op(
                q,
                t + 2_000_000,
                OpType::Ok,
                F::Acquire,
                &b.lock,
                OpValue::default().with_token(token).with_ttl_ms(1),
            ),
        ];
        let b_index_marker = b.complete;
        ops[b_index_marker]
            .extra
            .insert(WITNESS.to_string(), json!(true));
        let mut out = insert(ops, new);
        let at = ops.iter().position(|o| o.extra.contains_key(WITNESS))?;
        ops[at].extra.remove(WITNESS);
        out.push(ops[at].index);
        Some(out)
    }

    fn stale_release(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        stale_lock_op(ops, rng, F::Release)
    }

    fn stale_renew(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        stale_lock_op(ops, rng, F::Renew)
    }

    /// After a holder's accepted release, a fresh process (a restarted worker) renews the
    /// released grant by its token, and the service says ok, before any later grant of the lock
    /// returned: no stale token is involved, only a lease that no longer exists.
    fn renew_after_release(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs = grants(&h);
        // (the released grant, the release's completion)
        let released: Vec<(G, u64)> = h
            .operations()
            .iter()
            .filter(|o| o.outcome == Outcome::Ok && h.invoke_of(o).f == F::Release)
            .filter_map(|o| {
                let inv = h.invoke_of(o);
                let g = gs.iter().find(|g| {
                    Some(&g.lock) == inv.lock.as_ref()
                        && Process::Client(g.process) == inv.process
                        && Some(g.token) == inv.value.token
                })?;
                let done = h.complete_of(o)?.time_ns;
                let next = gs
                    .iter()
                    .filter(|n| n.lock == g.lock && ops[n.complete].time_ns > done)
                    .map(|n| ops[n.complete].time_ns)
                    .min()
                    .unwrap_or(u64::MAX);
                (next > done + 2_000_000).then(|| (g.clone(), done))
            })
            .collect();
        let (g, done) = pick(rng, &released)?;
        let q = fresh_process(ops);
        let v = OpValue::default().with_token(g.token).with_ttl_ms(g.ttl_ms);
        let new = vec![
            lock_op(q, done + 1, OpType::Invoke, F::Renew, &g.lock, v.clone()),
            lock_op(q, done + 1_000_001, OpType::Ok, F::Renew, &g.lock, v),
        ];
        insert(ops, new).into_iter().next().map(|i| vec![i])
    }

    /// A fresh process releases (or renews) with a token older than a completed grant, and the
    /// service says ok.
    fn stale_lock_op(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng, f: F) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs: Vec<G> = grants(&h).into_iter().filter(|g| g.token >= 2).collect();
        let g = pick(rng, &gs)?;
        let q = fresh_process(ops);
        let t = ops[g.complete].time_ns + 1;
        let mut v = OpValue::default().with_token(g.token - 1);
        if f == F::Renew {
            v.ttl_ms = Some(g.ttl_ms);
        }
        let new = vec![
            lock_op(q, t, OpType::Invoke, f.clone(), &g.lock, v.clone()),
            lock_op(q, t + 1_000_000, OpType::Ok, f, &g.lock, v),
        ];
        insert(ops, new).into_iter().next().map(|i| vec![i])
    }
}
