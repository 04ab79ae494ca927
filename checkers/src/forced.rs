//! The third reading of `double-grant`, forced order (`mutex::forced_order`), made as the
//! history is read: each lock's closed grants wait until every grant their instant can depend
//! on is closed, and are judged then, with the batch's instants, pushes and words.
//!
//! A grant `b`'s instant depends on the grants completed before `forced_before(b)`, and on
//! theirs in turn: a prefix of its lock's grants in completion order, whose end (its reach) is
//! the latest `forced_before` along the way. No grant closed later completes before the walk's
//! watermark, so once the reach is at or before the watermark, `b`'s instant is final.
//!
//! A grant judged, and completed before every grant still waiting and before the watermark,
//! precedes every grant still to come: it leaves, and what later grants read of it (its span
//! end, instant and chain) is folded into one [`Top2`] per lock, as the batch's prefix would
//! fold it.

use crate::model::{span_end_until, Grant, View};
use crate::mutex::{
    chains_with_any, forced_violation, holds_overlap, Top2, FORCED_ORDER_PASSES_MAX,
};
use crate::tokens::forced_before;
use crate::window::Window;
use crate::FxMap;
use history::Violation;

/// A grant's place in its lock's completion order: (answer, number).
type Key = (u64, u32);

/// What the grants that left fold into: their latest span ends, each with (whether a grant
/// without a token is on its chain, its instant).
type Left = Top2<(bool, u64)>;

/// The most grants one lock keeps; past it the earliest are judged with what is known and let
/// go (a stated bound, counted in [`Forced::cut_short`]). A correct lock keeps a handful; a
/// grant open for good (an op pending forever, taken as pending) holds the watermark, and with
/// it every grant closed after.
pub(crate) const FORCED_KEPT_MAX: usize = 4096;

/// A kept grant, judged or not.
#[derive(Clone, Copy)]
struct Kept {
    key: Key,
    invoke_ns: u64,
    forced_before_ns: u64,
    /// Once judged: its final instant, and whether a grant without a token is on the chain
    /// that set it. Kept as judged: the grants that leave later are no predecessors of it.
    judged: Option<(u64, bool)>,
}

/// One lock's reading.
#[derive(Default)]
struct LockForced {
    /// The closed grants kept, by [`Key`].
    kept: Vec<Kept>,
    left: Left,
    /// Every grant waiting or still to come is invoked after this: a grant that left pushes
    /// none of them unless its span ends later.
    pushes_after_ns: u64,
    /// No grant waiting is final before the watermark reaches this (the least reach among
    /// them), unless a grant closed since it was computed (`dirty`).
    final_from_ns: u64,
    dirty: bool,
    /// A judgement on it was left unsettled.
    unsettled: bool,
}

/// The forced-order reading, per lock.
pub(crate) struct Forced {
    locks: FxMap<u32, LockForced>,
    /// Judgements whose instants [`FORCED_ORDER_PASSES_MAX`] left unsettled, and grants let go
    /// at `kept_max` whatever their chain: the reading is then not the batch's.
    pub(crate) unsettled: u64,
    pub(crate) cut_short: u64,
    /// The walk's watermark at the last judgement.
    watermark_ns: u64,
    /// The most grants a lock keeps ([`FORCED_KEPT_MAX`]; the tests set less), and the most it
    /// kept after a judgement.
    pub(crate) kept_max: usize,
    pub(crate) kept_most: usize,
}

impl Default for Forced {
    fn default() -> Forced {
        Forced {
            locks: FxMap::default(),
            unsettled: 0,
            cut_short: 0,
            watermark_ns: 0,
            kept_max: FORCED_KEPT_MAX,
            kept_most: 0,
        }
    }
}

impl Forced {
    /// Grant `g` closed.
    pub(crate) fn closed(&mut self, g: u32, grant: &Grant) {
        let lock = self.locks.entry(grant.lock).or_default();
        let key = (grant.complete_ns, g);
        let at = lock.kept.partition_point(|e| e.key < key);
        let kept = Kept {
            key,
            invoke_ns: grant.invoke_ns,
            forced_before_ns: forced_before(grant),
            judged: None,
        };
        lock.kept.insert(at, kept);
        lock.dirty = true;
    }

    /// Judges the grants whose instants are final with the walk at `watermark_ns` (`u64::MAX`:
    /// every grant is closed), and returns what they prove, each with its window's end.
    pub(crate) fn judge(
        &mut self,
        watermark_ns: u64,
        grants: &Window<Grant>,
        view: &impl View,
    ) -> Vec<(Violation, u64)> {
        let mut out = Vec::new();
        self.watermark_ns = watermark_ns;
        for lock in self.locks.values_mut() {
            let over = lock.kept.len().saturating_sub(self.kept_max);
            let settled = lock.judge(watermark_ns, over, grants, view, &mut out);
            self.unsettled += u64::from(!settled);
            lock.unsettled |= !settled;
            self.cut_short += over as u64;
            self.kept_most = self.kept_most.max(lock.kept.len());
        }
        out
    }

    /// The locks on which a judgement was left unsettled.
    pub(crate) fn unsettled_locks(&self) -> usize {
        self.locks.values().filter(|l| l.unsettled).count()
    }

    /// The grants a later judgement may read: every grant kept, and those of the grants that
    /// left whose span may still push one: it ends past the watermark, or past the invoke of
    /// a grant waiting (a push lands past the invoke, and every grant still to come is invoked
    /// after the watermark).
    ///
    /// That bound only rises: a grant that joins the waiting was open, so invoked after the
    /// watermark of then. A grant let go once is never needed again.
    pub(crate) fn pinned(&mut self) -> impl Iterator<Item = u32> + '_ {
        let watermark_ns = self.watermark_ns;
        self.locks.values_mut().flat_map(move |l| {
            let waiting = (l.kept.iter())
                .filter(|e| e.judged.is_none())
                .map(|e| e.invoke_ns)
                .min()
                .unwrap_or(u64::MAX);
            l.pushes_after_ns = l.pushes_after_ns.max(waiting.min(watermark_ns));
            let bound = l.pushes_after_ns;
            let left = l.left.ends().filter(move |&(end_ns, _)| end_ns > bound);
            l.kept.iter().map(|e| e.key.1).chain(left.map(|(_, g)| g))
        })
    }
}

/// A grant's push: the end of the latest span among its predecessors, whose grant, that
/// grant's index among those kept (`None`: it left), and what it carried (chain, instant).
type Push = (u64, u32, Option<usize>, (bool, u64));

impl LockForced {
    /// How far the `k`th kept grant's chain can reach: the instant of `k` is final once every
    /// grant that completes before it is closed, which the watermark passing it says.
    fn reach_ns(&self, k: usize) -> u64 {
        let mut reach = self.kept[k].forced_before_ns;
        // Bounded by the grants kept.
        for e in &self.kept {
            if e.key.0 >= reach {
                break;
            }
            reach = reach.max(e.forced_before_ns);
        }
        reach
    }

    /// Judges the grants final at `watermark_ns`, and the first `over` kept whatever their
    /// chain; pushes what they prove on `out`, and lets go of those no later grant reads, and
    /// of the first `over`. False when the instants did not settle in the batch's passes.
    fn judge(
        &mut self,
        watermark_ns: u64,
        over: usize,
        grants: &Window<Grant>,
        view: &impl View,
        out: &mut Vec<(Violation, u64)>,
    ) -> bool {
        if over == 0 && !self.dirty && watermark_ns < self.final_from_ns {
            return true;
        }
        let fresh: Vec<usize> = (0..self.kept.len())
            .filter(|&k| self.kept[k].judged.is_none())
            .filter(|&k| k < over || self.reach_ns(k) <= watermark_ns)
            .collect();
        let settled = fresh.is_empty() || self.judge_fresh(&fresh, grants, view, out);
        self.let_go(watermark_ns, over, grants, view);
        self.waiting_from();
        settled
    }

    /// Judges the kept grants `fresh`, in the batch's words.
    fn judge_fresh(
        &mut self,
        fresh: &[usize],
        grants: &Window<Grant>,
        view: &impl View,
        out: &mut Vec<(Violation, u64)>,
    ) -> bool {
        let (at_ns, settled) = self.instants(grants, view);
        let push = self.pushes(&at_ns, grants, view);
        let grant = |k: usize| &grants[self.kept[k].key.1 as usize];
        // A push from a grant judged or gone ends the chain with what that grant carried.
        let next: Vec<Option<usize>> = (0..self.kept.len())
            .map(|k| {
                push[k]
                    .and_then(|p| p.2)
                    .filter(|&i| self.kept[i].judged.is_none())
            })
            .collect();
        let flag: Vec<bool> = (0..self.kept.len())
            .map(|k| {
                let carried = push[k].is_some_and(|p| match p.2 {
                    Some(i) => self.kept[i].judged.is_some_and(|j| j.1),
                    None => p.3 .0,
                });
                grant(k).token.is_none() || carried
            })
            .collect();
        let untokened = chains_with_any(&next, &flag);
        // The batch's found list over the grants judged now: (real time does not order the
        // pair, the pusher's key, the grant's key), with what renders it.
        let mut found: Vec<(bool, Key, Key, u32, u64, usize)> = Vec::new();
        for &k in fresh {
            let (b, Some((end_ns, ag, ai, (_, left_at)))) = (grant(k), push[k]) else {
                continue;
            };
            let a = &grants[ag as usize];
            if end_ns <= b.complete_ns || !untokened[k] || holds_overlap(a, b) {
                continue;
            }
            let a_at = ai.map_or(left_at, |i| at_ns[i]);
            let a_key = (a.complete_ns, ag);
            let real_time = a.complete_ns >= b.invoke_ns;
            found.push((real_time, a_key, self.kept[k].key, ag, a_at, k));
        }
        found.sort_unstable();
        let mut said: Vec<(Key, Key)> = Vec::new();
        for (_, a_key, b_key, ag, a_at, k) in found {
            let pair = (a_key.min(b_key), a_key.max(b_key));
            if said.contains(&pair) {
                continue;
            }
            said.push(pair);
            let a = &grants[ag as usize];
            let (cut_ns, cause) = span_end_until(view, a, a_at, u64::MAX);
            let v = forced_violation(view, (a, a_at), grant(k), cut_ns, cause);
            out.push((v, cut_ns));
        }
        for &k in fresh {
            self.kept[k].judged = Some((at_ns[k], untokened[k]));
        }
        settled
    }

    /// Sets when the next grant waiting can be final.
    fn waiting_from(&mut self) {
        self.final_from_ns = (0..self.kept.len())
            .filter(|&k| self.kept[k].judged.is_none())
            .map(|k| self.reach_ns(k))
            .min()
            .unwrap_or(u64::MAX);
        self.dirty = false;
    }

    /// The batch's refinement of the instants over the grants kept, from each invoke, those
    /// judged held at theirs; and whether it settled.
    fn instants(&self, grants: &Window<Grant>, view: &impl View) -> (Vec<u64>, bool) {
        let grant = |k: usize| &grants[self.kept[k].key.1 as usize];
        let mut at_ns: Vec<u64> = (self.kept.iter())
            .map(|e| e.judged.map_or(grants[e.key.1 as usize].invoke_ns, |j| j.0))
            .collect();
        for _ in 0..FORCED_ORDER_PASSES_MAX {
            let push = self.pushes(&at_ns, grants, view);
            let mut moved = false;
            for (k, p) in push.iter().enumerate() {
                let Some(p) = p.filter(|_| self.kept[k].judged.is_none()) else {
                    continue;
                };
                let to = p.0.min(grant(k).complete_ns);
                if to > at_ns[k] {
                    at_ns[k] = to;
                    moved = true;
                }
            }
            if !moved {
                return (at_ns, true);
            }
        }
        (at_ns, false)
    }

    /// Each kept grant's push from the instants `at_ns`, if it lands past its invoke (none for
    /// a grant judged: its instant and chain are held).
    fn pushes(&self, at_ns: &[u64], grants: &Window<Grant>, view: &impl View) -> Vec<Option<Push>> {
        // Prefix top-2 of span ends in completion order, after what the grants gone left.
        let mut top = self.left;
        let prefix: Vec<Left> = (self.kept.iter().zip(at_ns))
            .map(|(e, &at)| {
                let g = &grants[e.key.1 as usize];
                let end_ns = span_end_until(view, g, at, u64::MAX).0;
                top.add_with(end_ns, e.key.1, 0, (false, at));
                top
            })
            .collect();
        (0..self.kept.len())
            .map(|k| {
                let e = &self.kept[k];
                let before = self.kept.partition_point(|o| o.key.0 < e.forced_before_ns);
                let top = before.checked_sub(1).map_or(&self.left, |i| &prefix[i]);
                let (end_ns, g, _, carried) = top.other_than(e.key.1)?;
                let invoke_ns = grants[e.key.1 as usize].invoke_ns;
                // Only a push past the invoke of a grant still waiting is read: the grant
                // behind it is pinned (`Forced::pinned`).
                if end_ns <= invoke_ns || e.judged.is_some() {
                    return None;
                }
                let key = (grants[g as usize].complete_ns, g);
                let index = self.kept.binary_search_by_key(&key, |o| o.key).ok();
                Some((end_ns, g, index, carried))
            })
            .collect()
    }

    /// Folds the judged grants that every grant still to come, and every one waiting, counts
    /// among its predecessors into `left`, in completion order, and the first `over` (judged)
    /// whatever the others count.
    fn let_go(&mut self, watermark_ns: u64, over: usize, grants: &Window<Grant>, view: &impl View) {
        let first_waiting = (self.kept.iter())
            .filter(|e| e.judged.is_none())
            .map(|e| e.forced_before_ns)
            .min()
            .unwrap_or(u64::MAX);
        let bound = first_waiting.min(watermark_ns);
        let gone = (self.kept.iter())
            .take_while(|e| e.judged.is_some() && e.key.0 < bound)
            .count()
            .max(over);
        for e in &self.kept[..gone] {
            let (at, untokened) = e.judged.expect("judged");
            let end_ns = span_end_until(view, &grants[e.key.1 as usize], at, u64::MAX).0;
            self.left.add_with(end_ns, e.key.1, 0, (untokened, at));
        }
        self.kept.drain(..gone);
    }
}
