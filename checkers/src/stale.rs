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
//! A grant judged, and completed before every op still to be judged was invoked, leaves: it is
//! folded, as the batch folds it, into the first grant of the highest token, kept as what a
//! violation names of it.

use crate::model::{Func, Grant, View, NO_TARGET};
use crate::tokens::{epoch_violations, stale_token_violation, Granted};
use crate::window::Window;
use crate::FxMap;
use history::{Outcome, Violation};

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
    /// The most grants a lock keeps ([`STALE_KEPT_MAX`]; the tests set less), how many it
    /// judged early and let go at that bound (the reading is then not the batch's), and the
    /// most it kept after a judgement.
    pub(crate) kept_max: usize,
    pub(crate) cut_short: u64,
    pub(crate) kept_most: usize,
}

impl Default for Stale {
    fn default() -> Stale {
        Stale {
            locks: FxMap::default(),
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
