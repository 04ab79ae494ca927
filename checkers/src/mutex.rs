//! Mutual exclusion: `double-grant` (two processes' definite holds of one lock overlap) and the
//! `unsafe-overlap` warning (a process used a token after its lease surely died while another
//! process held the lock: the paused-holder case only fencing makes safe).

use crate::model::{ttl_lower_ns, ClientOp, Func, Grant, Model, NO_GRANT};
use crate::text::{op_list, secs, token};
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};
use std::collections::BTreeMap;

pub struct MutualExclusion;

/// At most this many late ops are listed in one warning; the sentence gives the total.
const LATE_OPS_LISTED: usize = 8;

/// One definite hold, for sweeping a lock's holds in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Hold {
    lock: u32,
    start_ns: u64,
    end_ns: u64,
    grant: u32,
}

/// The latest-ending hold seen so far, and the latest-ending one of any *other* process, so
/// "does a hold of a process other than p reach past t" is answered in O(1).
#[derive(Debug, Clone, Copy, Default)]
struct Top2 {
    /// (end, process, grant)
    best: Option<(u64, u64, u32)>,
    /// The best among processes other than `best`'s.
    other: Option<(u64, u64, u32)>,
}

impl Top2 {
    fn add(&mut self, end: u64, process: u64, grant: u32) {
        let new = (end, process, grant);
        match self.best {
            None => self.best = Some(new),
            Some(b) if b.1 == process => {
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

    /// The latest-ending hold of a process other than `process`.
    fn other_than(&self, process: u64) -> Option<(u64, u64, u32)> {
        match self.best {
            Some(b) if b.1 != process => Some(b),
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
        let mut holds: Vec<Hold> = m
            .grants
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                g.hold.map(|(start_ns, end_ns)| Hold {
                    lock: g.lock,
                    start_ns,
                    end_ns,
                    grant: i as u32,
                })
            })
            .collect();
        holds.sort_unstable();
        let mut prefix = Vec::with_capacity(holds.len());
        let mut top = Top2::default();
        let mut lock = None;
        for h in &holds {
            if lock != Some(h.lock) {
                top = Top2::default();
                lock = Some(h.lock);
            }
            top.add(h.end_ns, m.grants[h.grant as usize].process, h.grant);
            prefix.push(top);
        }
        HoldIndex { holds, prefix }
    }

    /// A hold on `lock` by a process other than `process` that meets `(from_ns, to_ns)`: the
    /// latest-ending one among those starting before `to_ns`.
    fn other_hold_meeting(&self, lock: u32, process: u64, from_ns: u64, to_ns: u64) -> Option<u32> {
        let lo = self.holds.partition_point(|h| h.lock < lock);
        let hi = self
            .holds
            .partition_point(|h| (h.lock, h.start_ns) < (lock, to_ns));
        if hi <= lo {
            return None;
        }
        let (end, _, g) = self.prefix[hi - 1].other_than(process)?;
        (end > from_ns).then_some(g)
    }
}

impl Checker for MutualExclusion {
    fn name(&self) -> &'static str {
        "mutual-exclusion"
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let index = HoldIndex::new(m);
        double_grants(m, &index, &mut out);
        unsafe_overlaps(m, &index, &mut out);
        verdict(m, cfg, &mut out);
        out
    }
}

fn double_grants(m: &Model, index: &HoldIndex, out: &mut CheckOutput) {
    let mut top = Top2::default();
    let mut lock = None;
    for h in &index.holds {
        if lock != Some(h.lock) {
            top = Top2::default();
            lock = Some(h.lock);
        }
        let b = &m.grants[h.grant as usize];
        if let Some((end, _, ga)) = top.other_than(b.process) {
            if end > h.start_ns {
                let a = &m.grants[ga as usize];
                out.violations
                    .push(double_grant(m, a, b, h.start_ns, end.min(h.end_ns)));
            }
        }
        top.add(h.end_ns, b.process, h.grant);
    }
}

fn double_grant(m: &Model, a: &Grant, b: &Grant, from_ns: u64, to_ns: u64) -> Violation {
    let lock = m.lock_name(a.lock);
    let a_op = &m.ops[a.op];
    let b_op = &m.ops[b.op];
    let mut ops = vec![a_op.index, b_op.index];
    let (a_end, a_why) = hold_end(m, a, from_ns, &mut ops);
    Violation {
        kind: ViolationKind::DoubleGrant,
        lock: Some(lock.to_string()),
        ops,
        window_ns: [from_ns, to_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{} held {lock} with {} from {} (op {}) until at least {} ({a_why}), yet p{} was granted {lock} with {} at {} (op {}) and held it until at least {}",
            a.process,
            token(a.token),
            secs(a.complete_ns),
            a_op.index,
            secs(a_end),
            b.process,
            token(b.token),
            secs(b.complete_ns),
            b_op.index,
            secs(b.hold.map_or(b.complete_ns, |h| h.1)),
        ),
    }
}

/// Why a hold lasts until its end. When the first lease alone does not reach `needed_ns`, the
/// renews that carry it there are part of the proof and join `ops`.
fn hold_end(m: &Model, g: &Grant, needed_ns: u64, ops: &mut Vec<u64>) -> (u64, String) {
    let end = g.hold.map_or(g.complete_ns, |h| h.1);
    if let Some(r) = g.release_op {
        let r = &m.ops[r];
        if r.invoke_ns == end {
            return (end, format!("when it invoked its release, op {}", r.index));
        }
    }
    let ttl = g.ttl_ms.unwrap_or(0);
    let mut lb = g.invoke_ns.saturating_add(ttl_lower_ns(ttl, m.drift));
    let mut chain = Vec::new();
    for &r in &g.lease_chain {
        if lb > needed_ns {
            break;
        }
        let r = &m.ops[r];
        chain.push(r.index);
        lb = r
            .invoke_ns
            .saturating_add(ttl_lower_ns(r.ttl_ms().or(g.ttl_ms).unwrap_or(0), m.drift));
    }
    let why = match chain.last() {
        None => format!(
            "its lease, counted from its invoke at {} with ttl {ttl} ms, cannot expire sooner",
            secs(g.invoke_ns)
        ),
        Some(_) => format!(
            "its lease, renewed without a gap by {}, cannot expire sooner",
            op_list(&chain)
        ),
    };
    ops.extend(chain);
    (end, why)
}

/// A late use of a grant's token, while another process held the lock.
struct Late {
    op: usize,
    /// The grant's surely-dead bound as of that op.
    dead_ns: u64,
    other: u32,
}

fn unsafe_overlaps(m: &Model, index: &HoldIndex, out: &mut CheckOutput) {
    // The surely-dead bound as the history unfolds: a renew can only revive a lease from its
    // invoke on, so an op is judged against the renews invoked before it.
    let mut dead: Vec<Option<u64>> = m
        .grants
        .iter()
        .map(|g| {
            g.ttl_ms.map(|t| {
                g.complete_ns
                    .saturating_add(crate::model::ttl_upper_ns(t, m.drift))
            })
        })
        .collect();
    let mut late: BTreeMap<u32, (Vec<Late>, usize)> = BTreeMap::new();
    for (pos, op) in m.ops.iter().enumerate() {
        let g = m.grant_of[pos];
        if g == NO_GRANT {
            continue;
        }
        let grant = &m.grants[g as usize];
        if let Some(dead_ns) = dead[g as usize] {
            if op.invoke_ns > dead_ns {
                if let Some(other) =
                    index.other_hold_meeting(grant.lock, op.process, dead_ns, op.invoke_ns)
                {
                    let (list, total) = late.entry(g).or_default();
                    *total += 1;
                    if list.len() < LATE_OPS_LISTED {
                        list.push(Late {
                            op: pos,
                            dead_ns,
                            other,
                        });
                    }
                }
            }
        }
        if op.func == Func::Renew {
            let d = &mut dead[g as usize];
            *d = match op.outcome {
                Outcome::Ok => match (*d, op.ttl_ms().or(grant.ttl_ms), op.complete_ns()) {
                    (Some(x), Some(t), Some(c)) => {
                        Some(x.max(c.saturating_add(crate::model::ttl_upper_ns(t, m.drift))))
                    }
                    _ => None,
                },
                Outcome::Info | Outcome::Pending => None,
                Outcome::Fail => *d,
            };
        }
    }
    for (g, (list, total)) in late {
        out.warnings
            .push(unsafe_overlap(m, &m.grants[g as usize], &list, total));
    }
}

fn unsafe_overlap(m: &Model, g: &Grant, late: &[Late], total: usize) -> Violation {
    let lock = m.lock_name(g.lock);
    // The store's answer is what fencing is about, so lead with a late store op if there is one.
    let primary = late
        .iter()
        .find(|l| !m.ops[l.op].func.is_lock_op())
        .unwrap_or(&late[0]);
    let op = &m.ops[primary.op];
    let other = &m.grants[primary.other as usize];
    let other_op = &m.ops[other.op];
    let mut ops = vec![m.ops[g.op].index, other_op.index];
    ops.extend(late.iter().map(|l| m.ops[l.op].index));
    let more: Vec<u64> = late
        .iter()
        .filter(|l| l.op != primary.op)
        .map(|l| m.ops[l.op].index)
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
            m.ops[g.op].index,
            secs(primary.dead_ns),
            op.process,
            describe(m, op),
            secs(op.invoke_ns),
            op.index,
            other.process,
            token(other.token),
            secs(other.complete_ns),
            other_op.index,
            answer(m, op),
        ),
    }
}

/// `write to k0` / `renew of L0`.
fn describe(m: &Model, op: &ClientOp) -> String {
    let name = m.target_name(op);
    match op.func {
        Func::Read => format!("read of {name}"),
        Func::Write => format!("write to {name}"),
        f => format!("{} of {name}", f.as_str()),
    }
}

/// What the store (or the lock service) did with a late op.
fn answer(m: &Model, op: &ClientOp) -> String {
    let who = if op.func.is_lock_op() {
        "the lock service"
    } else {
        "the store"
    };
    match op.outcome {
        Outcome::Ok => format!("{who} accepted it"),
        Outcome::Fail => match m.error_of(op) {
            Some(e) => format!("{who} rejected it ({e})"),
            None => format!("{who} rejected it"),
        },
        Outcome::Info => format!("whether {who} applied it is indeterminate"),
        Outcome::Pending => "it never completed".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::Top2;

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
