//! Fencing tokens as the lock service hands them out (`token-reused`, `token-regressed`) and
//! as it accepts them back (`stale-release-accepted`, `stale-renew-accepted`).
//!
//! Real-time precedence is never materialised pairwise: grants sorted by completion form a
//! frontier (the highest token among grants completed so far), and the ops judged against it
//! are swept in invoke order.

use crate::model::{Func, Model};
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
fn frontier_sweep<P: Copy>(
    m: &Model,
    queries: &[(u32, u64, P)],
    mut found: impl FnMut(P, Option<(u64, u32)>),
) {
    let mut done: Vec<(u32, u64, u32)> = m
        .grants
        .iter()
        .enumerate()
        .filter(|(_, g)| g.token.is_some())
        .map(|(i, g)| (g.lock, g.complete_ns, i as u32))
        .collect();
    done.sort_unstable();
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
    fn name(&self) -> &'static str {
        "fencing-tokens"
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let untokened = m.grants.iter().filter(|g| g.token.is_none()).count();
        if untokened > 0 {
            out.notes.push(format!(
                "{untokened} ok acquire(s) carry no token: their tokens could not be judged"
            ));
        }
        reused(m, &mut out);
        regressed(m, &mut out);
        verdict(m, cfg, &mut out);
        out
    }
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
        let a = &m.grants[by_token[first].3 as usize];
        let b = &m.grants[g as usize];
        let name = m.lock_name(lock);
        out.violations.push(Violation {
            kind: ViolationKind::TokenReused,
            lock: Some(name.to_string()),
            ops: vec![m.ops[a.op].index, m.ops[b.op].index],
            window_ns: [a.complete_ns, b.complete_ns],
            nemesis: Vec::new(),
            explanation: format!(
                "p{} was granted {name} with token {tok} at {} (op {}), and p{} was granted {name} with the same token {tok} at {} (op {})",
                a.process,
                secs(a.complete_ns),
                m.ops[a.op].index,
                b.process,
                secs(b.complete_ns),
                m.ops[b.op].index,
            ),
        });
    }
}

/// Equal tokens are `token-reused`'s to report: one fact, one violation. This rule takes the
/// strict case only.
fn regressed(m: &Model, out: &mut CheckOutput) {
    let mut queries: Vec<(u32, u64, u32)> = m
        .grants
        .iter()
        .enumerate()
        .filter(|(_, g)| g.token.is_some())
        .map(|(i, g)| (g.lock, g.invoke_ns, i as u32))
        .collect();
    queries.sort_unstable();
    frontier_sweep(m, &queries, |gb, best| {
        let b = &m.grants[gb as usize];
        let Some((tok_a, ga)) = best else { return };
        let tok_b = b.token.expect("filtered on token");
        if tok_a <= tok_b {
            return;
        }
        let a = &m.grants[ga as usize];
        let name = m.lock_name(b.lock);
        out.violations.push(Violation {
            kind: ViolationKind::TokenRegressed,
            lock: Some(name.to_string()),
            ops: vec![m.ops[a.op].index, m.ops[b.op].index],
            window_ns: [a.complete_ns, b.complete_ns],
            nemesis: Vec::new(),
            explanation: format!(
                "p{} was granted {name} with token {tok_a} at {} (op {}), before p{} invoked the acquire at {} that was granted {name} with the lower token {tok_b} at {} (op {})",
                a.process,
                secs(a.complete_ns),
                m.ops[a.op].index,
                b.process,
                secs(b.invoke_ns),
                secs(b.complete_ns),
                m.ops[b.op].index,
            ),
        });
    });
}

impl Checker for StaleLockOps {
    fn name(&self) -> &'static str {
        "stale-lock-ops"
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let mut queries: Vec<(u32, u64, usize)> = m
            .ops
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                matches!(o.func, Func::Release | Func::Renew)
                    && o.outcome == Outcome::Ok
                    && o.token.is_some()
                    && o.target != crate::model::NO_TARGET
            })
            .map(|(i, o)| (o.target, o.invoke_ns, i))
            .collect();
        queries.sort_unstable();
        frontier_sweep(m, &queries, |pos, best| {
            let op = &m.ops[pos];
            let Some((tok_a, ga)) = best else { return };
            let tok = op.token.expect("filtered on token");
            if tok >= tok_a {
                return;
            }
            let a = &m.grants[ga as usize];
            let name = m.lock_name(op.target);
            let (kind, what) = if op.func == Func::Release {
                (ViolationKind::StaleReleaseAccepted, "release")
            } else {
                (ViolationKind::StaleRenewAccepted, "renew")
            };
            let complete_ns = op.complete_ns.expect("an ok op has completed");
            out.violations.push(Violation {
                kind,
                lock: Some(name.to_string()),
                ops: vec![m.ops[a.op].index, op.index],
                window_ns: [a.complete_ns, complete_ns],
                nemesis: Vec::new(),
                explanation: format!(
                    "p{}'s {what} of {name} with token {tok}, invoked at {}, succeeded at {} (op {}), yet p{} had been granted {name} with the newer {} at {} (op {}), before that {what} was invoked",
                    op.process,
                    secs(op.invoke_ns),
                    secs(complete_ns),
                    op.index,
                    a.process,
                    token(Some(tok_a)),
                    secs(a.complete_ns),
                    m.ops[a.op].index,
                ),
            });
        });
        verdict(m, cfg, &mut out);
        out
    }
}
