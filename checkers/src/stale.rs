//! The `stale-lock-ops` rules (`stale-release-accepted`, `stale-renew-accepted`, tokens.rs)
//! made as the history is read, for the renews and releases that act on a grant: each closed
//! grant waits until every grant of its lock completed before its ops were invoked is closed,
//! and its ops are judged then, with the batch's pairs and words.
//!
//! An op is judged against the grants of its lock completed before it was invoked: the first
//! with the highest token (a newer token was granted before it), and the first asked for
//! latest (a grant asked for after its own returned). No grant closed later completes before
//! the walk's watermark, so once every op of a grant was invoked before it, the grant is
//! judged.
//!
//! A renew or release that names no grant is judged once no later step of the walk reads it
//! (its grant can no longer change): by token, and against the acquires its sender and its
//! lock had seen by then (`named_nothing`).
//!
//! A grant judged, and completed before every op still to be judged was invoked, leaves: it is
//! folded, as the batch folds it, into the first grant of the highest token, kept as what a
//! violation names of it.

use crate::model::{Func, Grant, View, NO_TARGET};
use crate::model::{OpPos, NO_GRANT};
use crate::tokens::{epoch_violations, named_nothing_violation, stale_token_violation, Granted};
use crate::window::Window;
use crate::FxMap;
use history::{Outcome, Violation};
use std::collections::VecDeque;

/// A grant's place in its lock's completion order: (answer, number).
type Key = (u64, u32);

/// The most closed grants one lock keeps; past it the earliest are judged with what is known
/// and let go (a stated bound, counted in [`Stale::cut_short`]). A grant open for good (an op
/// pending forever, taken as pending) holds the watermark, and with it every grant after.
pub(crate) const STALE_KEPT_MAX: usize = 4096;

/// A closed grant kept, judged or not.
#[derive(Debug, Clone)]
struct Kept {
    key: Key,
    token: Option<u64>,
    invoke_ns: u64,
    /// Its ops that act on it (whose grant it is), in its epoch's order.
    ops: Vec<u32>,
    /// The earliest and the latest instant its ops are judged at (its invoke at the earliest).
    reads_from_ns: u64,
    reads_to_ns: u64,
    judged: bool,
}

/// One lock's reading.
#[derive(Default)]
struct LockStale {
    /// The closed grants kept, by [`Key`].
    kept: Vec<Kept>,
    /// Over the grants that left, in completion order: the first with the highest token.
    /// (Not the one asked for latest: a grant that left completed before a grant waiting was
    /// invoked, so was asked for before that grant returned, and never replaces it.)
    top_token: Option<(u64, Granted)>,
}

/// The `stale-lock-ops` reading of the ops that act on a grant, per lock.
pub(crate) struct Stale {
    locks: FxMap<u32, LockStale>,
    orphans: Orphans,
    /// The most grants a lock keeps ([`STALE_KEPT_MAX`]; the tests set less), how many it
    /// judged early and let go at that bound (the reading is then not the batch's), and the
    /// most it kept after a judgement.
    pub(crate) kept_max: usize,
    pub(crate) cut_short: u64,
    pub(crate) kept_most: usize,
}

/// The renews and releases that name no grant, and what judges them: per process the locks it
/// asked for (and where first), per lock the first acquire whose answer was lost.
#[derive(Default)]
struct Orphans {
    /// Walked and acting on no grant, in position order, each with whether it named a grant
    /// id; judged once no later step of the walk reads it.
    waiting: VecDeque<(OpPos, bool)>,
    /// Per process, `(lock, position)` of its first acquire of each lock not refused.
    asked: FxMap<u64, Vec<(u32, OpPos)>>,
    /// Per lock, the earliest invoke of an acquire whose answer was lost.
    lost: FxMap<u32, u64>,
    /// `(position, process)` of the lost answers: the process never acts again, and what it
    /// asked for is forgotten once its ops are judged.
    crashed: Vec<(OpPos, u64)>,
}

impl Default for Stale {
    fn default() -> Stale {
        Stale {
            locks: FxMap::default(),
            orphans: Orphans::default(),
            kept_max: STALE_KEPT_MAX,
            cut_short: 0,
            kept_most: 0,
        }
    }
}

impl Stale {
    /// Grant `g` closed; `grant_of` gives each op's grant.
    pub(crate) fn closed(
        &mut self,
        g: u32,
        grant: &Grant,
        ops: &Window<crate::ClientOp>,
        grant_of: &Window<u32>,
    ) {
        let lock = self.locks.entry(grant.lock).or_default();
        let key = (grant.complete_ns, g);
        let mine: Vec<u32> = (grant.epoch_ops.iter().copied())
            .filter(|&pos| grant_of.get(pos as usize) == Some(&g))
            .collect();
        let invokes = mine.iter().map(|&pos| ops[pos as usize].invoke_ns);
        let kept = Kept {
            key,
            token: grant.token,
            invoke_ns: grant.invoke_ns,
            reads_from_ns: invokes.clone().fold(grant.invoke_ns, u64::min),
            reads_to_ns: invokes.fold(0, u64::max),
            ops: mine,
            judged: false,
        };
        let at = lock.kept.partition_point(|e| e.key < key);
        lock.kept.insert(at, kept);
    }

    /// Judges the grants whose ops read only closed grants with the walk at `watermark_ns`
    /// (`u64::MAX`: every grant is closed); `first_op_ns`: no op of a grant still open, or not
    /// walked yet, was invoked before it. Returns what they prove, each with its window's end.
    pub(crate) fn judge(
        &mut self,
        (watermark_ns, first_op_ns): (u64, u64),
        grants: &Window<Grant>,
        view: &impl View,
    ) -> Vec<(Violation, u64)> {
        let mut out = Vec::new();
        for state in self.locks.values_mut() {
            let over = state.kept.len().saturating_sub(self.kept_max);
            // Bounded by the grants kept.
            for k in 0..state.kept.len() {
                let e = &state.kept[k];
                let ready = watermark_ns == u64::MAX || e.reads_to_ns < watermark_ns;
                if !e.judged && (k < over || ready) {
                    state.judge_one(k, grants, view, &mut out);
                    state.kept[k].judged = true;
                }
            }
            state.let_go(watermark_ns.min(first_op_ns), over, grants, view);
            self.cut_short += over as u64;
            self.kept_most = self.kept_most.max(state.kept.len());
        }
        out
    }

    /// The grants a later judgement may read: every grant kept.
    pub(crate) fn pinned(&self) -> impl Iterator<Item = u32> + '_ {
        (self.locks.values()).flat_map(|l| l.kept.iter().map(|e| e.key.1))
    }

    /// The acquire at `pos` of `process` on `lock`, invoked at `invoke_ns`, answered
    /// `outcome` (pending: at the end of the history).
    pub(crate) fn acquire_answered(
        &mut self,
        (pos, process, lock): (OpPos, u64, u32),
        invoke_ns: u64,
        outcome: Outcome,
    ) {
        if outcome == Outcome::Fail {
            return;
        }
        let asked = self.orphans.asked.entry(process).or_default();
        if asked.iter().all(|&(l, _)| l != lock) {
            asked.push((lock, pos));
        }
        if outcome != Outcome::Ok {
            let lost = self.orphans.lost.entry(lock).or_insert(invoke_ns);
            *lost = (*lost).min(invoke_ns);
        }
    }

    /// The op at `pos` of `process` got no answer: the process never acts again.
    pub(crate) fn crashed(&mut self, pos: OpPos, process: u64) {
        self.orphans.crashed.push((pos, process));
    }

    /// The renew or release at `pos`, just walked, acts on no grant (so far); `named_id`: it
    /// named a grant id.
    pub(crate) fn orphan(&mut self, pos: OpPos, named_id: bool) {
        self.orphans.waiting.push_back((pos, named_id));
    }

    /// Judges the ops naming no grant before position `before` (no later step of the walk
    /// reads them): every grant completed before they were invoked is closed.
    pub(crate) fn judge_orphans(
        &mut self,
        before: usize,
        grant_of: &Window<u32>,
        grants: &Window<Grant>,
        view: &impl View,
    ) -> Vec<(Violation, u64)> {
        let mut out = Vec::new();
        let o = &mut self.orphans;
        // Bounded by the ops waiting.
        while let Some(&(pos, named_id)) = o.waiting.front().filter(|w| (w.0 as usize) < before) {
            o.waiting.pop_front();
            let p = pos as usize;
            if grant_of.get(p).is_some_and(|&g| g != NO_GRANT) {
                continue;
            }
            let op = view.op(p);
            let queried = op.outcome == Outcome::Ok && op.target != NO_TARGET;
            if let (Some(tok), true) = (op.token(), queried) {
                let newest = (self.locks.get(&op.target))
                    .and_then(|l| l.newest_token(op.invoke_ns, grants, view));
                if let Some((tok_a, a)) = newest {
                    out.extend(stale_token_violation(view, p, tok, (a, tok_a)));
                }
            }
            let by_name = op.token().is_some() || named_id;
            let asked_before = (o.asked.get(&op.process))
                .and_then(|list| list.iter().find(|&&(l, _)| l == op.target))
                .is_some_and(|&(_, at)| at < pos);
            let lost_from = o.lost.get(&op.target).copied();
            out.extend(named_nothing_violation(
                view,
                p,
                by_name,
                asked_before,
                lost_from,
            ));
        }
        // A crashed process's ops before its crash are judged once the ops waiting are past it.
        let judged_to = o
            .waiting
            .front()
            .map_or(before, |w| (w.0 as usize).min(before));
        let asked = &mut o.asked;
        o.crashed.retain(|&(at, process)| {
            let done = (at as usize) < judged_to;
            if done {
                asked.remove(&process);
            }
            !done
        });
        out.into_iter()
            .map(|v| {
                let end_ns = v.window_ns[1];
                (v, end_ns)
            })
            .collect()
    }
}

impl LockStale {
    /// The first grant of the highest token completed before `at_ns`. One let go at the bound
    /// may have completed later: not that one then.
    fn newest_token(
        &self,
        at_ns: u64,
        grants: &Window<Grant>,
        view: &impl View,
    ) -> Option<(u64, Granted)> {
        let mut best = self
            .top_token
            .filter(|(_, a)| a.complete_ns < at_ns)
            .map(|(t, a)| (t, Some(a), 0));
        for o in self.kept.iter().take_while(|o| o.key.0 < at_ns) {
            if let Some(t) = o.token.filter(|&t| best.is_none_or(|b| t > b.0)) {
                best = Some((t, None, o.key.1));
            }
        }
        let (t, left, g) = best?;
        Some((
            t,
            left.unwrap_or_else(|| Granted::of(view, &grants[g as usize])),
        ))
    }

    /// The first grant asked for latest among those kept completed before `at_ns`, with its
    /// invoke.
    fn asked_latest(
        &self,
        at_ns: u64,
        grants: &Window<Grant>,
        view: &impl View,
    ) -> Option<(u64, Granted)> {
        let mut best: Option<(u64, u32)> = None;
        for o in self.kept.iter().take_while(|o| o.key.0 < at_ns) {
            if best.is_none_or(|b| o.invoke_ns > b.0) {
                best = Some((o.invoke_ns, o.key.1));
            }
        }
        let (i, g) = best?;
        Some((i, Granted::of(view, &grants[g as usize])))
    }

    /// Judges the ops of the `k`th kept grant, in the batch's words: by token first, then as
    /// the batch's epoch reading does.
    fn judge_one(
        &self,
        k: usize,
        grants: &Window<Grant>,
        view: &impl View,
        out: &mut Vec<(Violation, u64)>,
    ) {
        let e = &self.kept[k];
        let g = &grants[e.key.1 as usize];
        let mut found = Vec::new();
        let mut reported = Vec::new();
        for &pos in &e.ops {
            let op = view.op(pos as usize);
            let queried = matches!(op.func, Func::Release | Func::Renew)
                && op.outcome == Outcome::Ok
                && op.target != NO_TARGET;
            let Some(tok) = op.token().or(g.token).filter(|_| queried) else {
                continue;
            };
            let Some(a) = self.newest_token(op.invoke_ns, grants, view) else {
                continue;
            };
            if let Some(v) = stale_token_violation(view, pos as usize, tok, (a.1, a.0)) {
                reported.push(pos);
                found.push(v);
            }
        }
        let judged =
            |pos: usize| e.ops.contains(&(pos as u32)) && !reported.contains(&(pos as u32));
        let replaced = |at_ns: u64| {
            let (invoke_ns, b) = self.asked_latest(at_ns, grants, view)?;
            (invoke_ns > g.complete_ns).then_some((b, invoke_ns))
        };
        epoch_violations(view, g, judged, replaced, &mut found);
        out.extend(found.into_iter().map(|v| {
            let end_ns = v.window_ns[1];
            (v, end_ns)
        }));
    }

    /// Folds the judged grants that every later judgement reads into the tops, in completion
    /// order, and the first `over` (judged) whatever the others read. `bound_ns`: no op still
    /// to be judged, of a grant not kept, was invoked before it.
    fn let_go(&mut self, bound_ns: u64, over: usize, grants: &Window<Grant>, view: &impl View) {
        let first_waiting = (self.kept.iter())
            .filter(|e| !e.judged)
            .map(|e| e.reads_from_ns)
            .min()
            .unwrap_or(u64::MAX);
        // A grant waiting completed after its first op was invoked: only judged grants are
        // before this.
        let bound = first_waiting.min(bound_ns);
        let gone = (self.kept.iter())
            .take_while(|e| e.key.0 < bound)
            .count()
            .max(over);
        for e in &self.kept[..gone] {
            if let Some(t) = e.token.filter(|&t| self.top_token.is_none_or(|b| t > b.0)) {
                self.top_token = Some((t, Granted::of(view, &grants[e.key.1 as usize])));
            }
        }
        self.kept.drain(..gone);
    }
}
