//! The `fencing-tokens` rules (`token-reused`, `token-regressed`, tokens.rs) made as the
//! history is read: each lock's closed grants with a token wait until every grant their rules
//! compare them with is closed, and are judged then, with the batch's pairs and words.
//!
//! Grant `b`'s rules read the grants of its lock that completed before `b` was invoked (real
//! time), before `forced_before(b)` (the order exclusivity forces), and before `b` itself
//! (the first grant of its token). No grant closed later completes before the walk's
//! watermark, so once the latest of those instants is before it, `b` is judged.
//!
//! A grant judged, and completed before the watermark and before every grant still waiting
//! was invoked, is among the grants every later judgement reads in real time: it leaves,
//! folded, as the batch's sweep folds it, into the first grant of the highest token seen,
//! kept as a copy of what a violation names of it (not pinned: it can be old). The order
//! exclusivity forces needs nothing of the grants that left: one of them above a later
//! grant's token was before that grant's invoke, and real time reports that grant first.

use crate::incidents::EraMark;
use crate::model::{Grant, View};
use crate::tokens::{
    forced_before, inferred_violation, regressed_violation, reused_violation, Granted, TopByProcess,
};
use crate::window::Window;
use crate::FxMap;
use history::Violation;
use std::collections::VecDeque;

/// A grant's place in its lock's completion order: (answer, number).
type Key = (u64, u32);

/// The most grants with a token one lock keeps; past it the earliest are judged with what is
/// known and let go (a stated bound, counted in [`Fencing::cut_short`]). A correct lock keeps
/// a handful; a grant open for good (an op pending forever, taken as pending) holds the
/// watermark, and with it every grant closed after.
pub(crate) const FENCING_KEPT_MAX: usize = 4096;

/// The most tokens whose first grant the reader remembers, over all locks; past it the
/// earliest remembered, of grants that left, are forgotten (a stated bound, counted in
/// [`Fencing::forgotten`]). A later grant with a forgotten token is not named `token-reused`;
/// a token below the highest one granted before it still shows as `token-regressed`.
pub(crate) const TOKENS_REMEMBERED_MAX: usize = 1 << 16;

/// A closed grant kept, judged or not.
#[derive(Debug, Clone, Copy)]
struct Kept {
    key: Key,
    token: u64,
    process: u64,
    invoke_ns: u64,
    forced_before_ns: u64,
    judged: bool,
}

impl Kept {
    /// Its rules read the grants completed before this (and at it, for the ties of its key).
    fn reads_to_ns(&self) -> u64 {
        self.forced_before_ns.max(self.key.0)
    }
}

/// One lock's reading.
#[derive(Default)]
struct LockFencing {
    /// The closed grants with a token kept, by [`Key`].
    kept: Vec<Kept>,
    /// Over the grants that left, in completion order: the first with the highest token,
    /// and what a violation names of it.
    top: Option<(u64, Granted)>,
    /// Per token, the first grant closed with it by [`Key`].
    firsts: FxMap<u64, (Key, Granted)>,
}

/// The `fencing-tokens` reading, per lock.
pub(crate) struct Fencing {
    locks: FxMap<u32, LockFencing>,
    /// `(lock, token, key)` of each first grant remembered, in the order they closed.
    remembered: VecDeque<(u32, u64, Key)>,
    /// [`TOKENS_REMEMBERED_MAX`] unless the tests set less, the first grants forgotten, and
    /// the most remembered after a judgement.
    pub(crate) remembered_max: usize,
    pub(crate) forgotten: u64,
    pub(crate) remembered_most: usize,
    /// The most grants a lock keeps ([`FENCING_KEPT_MAX`]; the tests set less), how many it
    /// judged early and let go at that bound (the reading is then not the batch's), and the
    /// most it kept after a judgement.
    pub(crate) kept_max: usize,
    pub(crate) cut_short: u64,
    pub(crate) kept_most: usize,
    /// The grants behind their lock's frontier, for the incidents' token resets: as many as
    /// the `token-regressed` and `token-reused` violations that name them.
    pub(crate) era_marks: Vec<EraMark>,
}

impl Default for Fencing {
    fn default() -> Fencing {
        Fencing {
            locks: FxMap::default(),
            remembered: VecDeque::new(),
            remembered_max: TOKENS_REMEMBERED_MAX,
            forgotten: 0,
            remembered_most: 0,
            kept_max: FENCING_KEPT_MAX,
            cut_short: 0,
            kept_most: 0,
            era_marks: Vec::new(),
        }
    }
}

impl Fencing {
    /// Grant `g` closed; its answer is the event numbered `op_index`.
    pub(crate) fn closed(&mut self, g: u32, grant: &Grant, op_index: u64) {
        let Some(token) = grant.token else { return };
        let lock = self.locks.entry(grant.lock).or_default();
        let key = (grant.complete_ns, g);
        let at = lock.kept.partition_point(|e| e.key < key);
        lock.kept.insert(
            at,
            Kept {
                key,
                token,
                process: grant.process,
                invoke_ns: grant.invoke_ns,
                forced_before_ns: forced_before(grant),
                judged: false,
            },
        );
        let granted = Granted {
            process: grant.process,
            complete_ns: grant.complete_ns,
            op_index,
        };
        let first = lock.firsts.entry(token).or_insert((key, granted));
        if key <= first.0 {
            *first = (key, granted);
            self.remembered.push_back((grant.lock, token, key));
        }
    }

    /// Forgets the earliest first grants remembered past [`Fencing::remembered_max`], those
    /// that left: a grant kept is still to be judged against its own.
    fn forget(&mut self) {
        // Bounded by the grants remembered.
        while self.remembered.len() > self.remembered_max {
            let (lock, token, key) = self.remembered[0];
            let state = self.locks.get_mut(&lock).expect("a lock remembered");
            if state.kept.first().is_some_and(|k| k.key <= key) {
                break;
            }
            self.remembered.pop_front();
            if state.firsts.get(&token).is_some_and(|f| f.0 == key) {
                state.firsts.remove(&token);
                self.forgotten += 1;
            }
        }
    }

    /// Judges the grants whose rules read only closed grants with the walk at `watermark_ns`
    /// (`u64::MAX`: every grant is closed), and returns what they prove, each with its
    /// window's end.
    pub(crate) fn judge(
        &mut self,
        watermark_ns: u64,
        grants: &Window<Grant>,
        view: &impl View,
    ) -> Vec<(Violation, u64)> {
        let mut out = Vec::new();
        for (&lock, state) in self.locks.iter_mut() {
            let over = state.kept.len().saturating_sub(self.kept_max);
            // Bounded by the grants kept.
            for k in 0..state.kept.len() {
                let e = state.kept[k];
                let ready = watermark_ns == u64::MAX || e.reads_to_ns() < watermark_ns;
                if !e.judged && (k < over || ready) {
                    let marks = &mut self.era_marks;
                    state.judge_one(lock, k, grants, view, (&mut out, marks));
                    state.kept[k].judged = true;
                }
            }
            state.let_go(watermark_ns, over, grants, view);
            self.cut_short += over as u64;
            self.kept_most = self.kept_most.max(state.kept.len());
        }
        self.forget();
        self.remembered_most = self.remembered_most.max(self.remembered.len());
        out
    }

    /// The grants a later judgement may read: every grant kept.
    pub(crate) fn pinned(&self) -> impl Iterator<Item = u32> + '_ {
        (self.locks.values()).flat_map(|l| l.kept.iter().map(|e| e.key.1))
    }
}

impl LockFencing {
    /// Judges the `k`th kept grant, in the batch's words: a reuse of its token, then a token
    /// regressed in real time, else in the order exclusivity forces.
    fn judge_one(
        &self,
        lock: u32,
        k: usize,
        grants: &Window<Grant>,
        view: &impl View,
        (out, marks): (&mut Vec<(Violation, u64)>, &mut Vec<EraMark>),
    ) {
        let e = self.kept[k];
        let b = &grants[e.key.1 as usize];
        if let Some(&(first_key, first)) = self.firsts.get(&e.token) {
            if first_key != e.key {
                let v = reused_violation(view, lock, e.token, first, Granted::of(view, b));
                out.push((v, b.complete_ns));
            }
        }
        // The first grant of the highest token completed before `b` was invoked. One let go
        // at the bound may have completed later: not that one then.
        let top = self.top.filter(|(_, a)| a.complete_ns < e.invoke_ns);
        let mut best = top.map(|(t, a)| (t, Some(a), 0));
        for o in self.kept.iter().take_while(|o| o.key.0 < e.invoke_ns) {
            if best.is_none_or(|(t, _, _)| o.token > t) {
                best = Some((o.token, None, o.key.1));
            }
        }
        if let Some((tok_a, left, ga)) = best {
            let a = left.unwrap_or_else(|| Granted::of(view, &grants[ga as usize]));
            // Behind the frontier: a token reset's grant (`incidents.rs`'s eras).
            if tok_a >= e.token {
                marks.push(EraMark {
                    lock,
                    invoke_ns: e.invoke_ns,
                    grant: e.key.1,
                    member: view.op(b.op).index,
                    frontier: a.op_index,
                });
            }
            if let Some(v) = regressed_violation(view, (a, tok_a), b) {
                out.push((v, b.complete_ns));
                return;
            }
        }
        if e.forced_before_ns <= e.invoke_ns {
            return;
        }
        // Only the grants kept: one that left completed before `b` was invoked, and had its
        // token been above `b`'s, real time would have reported `b` above.
        let mut top = TopByProcess::default();
        for o in (self.kept.iter()).take_while(|o| o.key.0 < e.forced_before_ns) {
            top.add(o.token, o.process, o.key.1);
        }
        let Some((_, _, ga)) = top.other_than(e.process) else {
            return;
        };
        let a = &grants[ga as usize];
        if let Some(v) = inferred_violation(view, (a, view.op(a.op).index), b) {
            let end_ns = v.window_ns[1];
            out.push((v, end_ns));
        }
    }

    /// Folds the judged grants that every later judgement reads into the top, in completion
    /// order, and the first `over` (judged) whatever the others read.
    fn let_go(&mut self, watermark_ns: u64, over: usize, grants: &Window<Grant>, view: &impl View) {
        let first_waiting = (self.kept.iter())
            .filter(|e| !e.judged)
            .map(|e| e.invoke_ns)
            .min()
            .unwrap_or(u64::MAX);
        // A grant waiting completed after its invoke: only judged grants are before this.
        let bound = first_waiting.min(watermark_ns);
        let gone = (self.kept.iter())
            .take_while(|e| e.key.0 < bound)
            .count()
            .max(over);
        for e in &self.kept[..gone] {
            if self.top.is_none_or(|(t, _)| e.token > t) {
                let a = Granted::of(view, &grants[e.key.1 as usize]);
                self.top = Some((e.token, a));
            }
        }
        self.kept.drain(..gone);
    }
}
