//! `unsafe-overlap` (mutual-exclusion's warnings, `mutex::unsafe_overlaps`) made as the history
//! is read: each grant's late uses (ops acting with its token after its lease was surely dead,
//! while another process held the lock), worded as the batch words them.
//!
//! A grant's uses are gathered while it is open: its store ops as they are walked, its renews
//! and releases from its epoch when it closes. Only then are its ttl and answer final, so only
//! then is its surely-dead bound followed through the uses, in position order, and each use
//! invoked past it becomes a candidate. A candidate at `to_ns` asks the double-grant sweep for
//! the latest-ending hold of another grant among those starting before `to_ns`: the sweep
//! answers it when it has passed every such hold and none after (`Streamed::sweep`). While the
//! grant was open the watermark stayed at or before its invoke, and every candidate is invoked
//! after its answer, so no candidate comes too late for the sweep (unless the sweep ran ahead
//! at its limit: counted in [`LateStream::unsure`]).
//!
//! Whether a late store op was fenced (accepted before any newer token reached its register)
//! reads the ok store ops with a token completed before an instant: its invoke for an ok op,
//! which the walk has passed when it walks the op (every op completed before it was invoked
//! was invoked earlier, so walked); its completion for an indeterminate one, decided once the
//! walk is past it; a pending one's at the end, against every such op.

use crate::model::{ClientOp, Drift, Grant, View, NO_GRANT};
use crate::mutex::{
    fenced_by, fenced_note, renewed_dead, shows_token, unsafe_overlap, GrantWords, HoldSweep,
    LateList, LateWords, TargetNames,
};
use crate::walk::Ops;
use crate::window::Window;
use crate::FxMap;
use history::Outcome;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// The most store ops of one open grant kept; past it the grant's late uses are not judged
/// (counted in [`LateStream::cut`], and said in the checker's notes). A grant's store ops are
/// those of one critical section: a few, unless a session lasts the whole run.
pub(crate) const USES_KEPT_MAX: usize = 4096;

/// A use of a grant, as kept until the grant is judged.
#[derive(Clone)]
struct Use {
    pos: usize,
    op: ClientOp,
    /// Whether a store op was fenced (`None`: not decided yet). Never for a lock op.
    fenced: Option<bool>,
}

/// A use invoked past the grant's surely-dead bound, `dead_ns`.
struct Candidate {
    used: Use,
    dead_ns: u64,
    /// The sweep's answer: the other holder, if one held the lock then (`None`: not answered).
    other: Option<Option<GrantWords>>,
}

/// A closed grant: its surely-dead bound, final, and its late uses so far.
struct Judging {
    lock: u32,
    words: GrantWords,
    dead_ns: Option<u64>,
    candidates: Vec<Candidate>,
}

/// Per register: the ok store ops with a token, by completion, those before the instants still
/// to be asked about folded into the highest of them.
#[derive(Default)]
struct Shown {
    folded: Option<u64>,
    recent: BTreeMap<(u64, usize), u64>,
    highest: Option<u64>,
}

impl Shown {
    /// The highest token of an ok store op completed before `by_ns`.
    fn before(&self, by_ns: u64) -> Option<u64> {
        // Mostly every op kept completed before: the highest of all, folded or kept, with no
        // pass over them.
        if (self.recent.last_key_value()).is_none_or(|(k, _)| *k < (by_ns, 0)) {
            return self.highest;
        }
        let recent = self.recent.range(..(by_ns, 0)).map(|(_, &t)| t).max();
        self.folded.max(recent)
    }

    fn fold_before(&mut self, at_ns: u64) {
        // Bounded by the ops kept.
        while let Some(entry) = self.recent.first_entry() {
            if entry.key().0 >= at_ns {
                break;
            }
            let t = entry.remove();
            self.folded = self.folded.max(Some(t));
        }
    }
}

/// The reading's state.
#[derive(Default)]
pub(crate) struct LateStream {
    /// Per open grant, its store ops walked so far (position order).
    uses: FxMap<u32, Vec<Use>>,
    /// Open grants past [`USES_KEPT_MAX`] store ops.
    cut_grants: crate::model::FxSet<u32>,
    /// The closed grants a store op may still name (those the walk keeps): a store op changes
    /// no grant, so it may act on one long closed, and is judged as it is walked.
    judging: BTreeMap<u32, Judging>,
    /// Candidates waiting for the sweep: `(to_ns, grant, candidate)`.
    queries: BinaryHeap<Reverse<(u64, u32, usize)>>,
    /// Per key id.
    shown: FxMap<u32, Shown>,
    /// The instants of the indeterminate store ops whose fencing is not decided yet, counted.
    undecided: BTreeMap<u64, usize>,
    pub(crate) warnings: crate::FirstWarnings,
    pub(crate) fenced_grants: usize,
    pub(crate) fenced_ops: usize,
    /// Grants a warning was made of (the fenced note says its holders are others).
    pub(crate) warned_grants: usize,
    /// Grants whose late uses were not judged (past [`USES_KEPT_MAX`]), and candidates the
    /// sweep answered after it had run past them at its limit.
    pub(crate) cut: u64,
    pub(crate) unsure: u64,
    /// The most grants waiting to be judged at once.
    pub(crate) judging_most: usize,
}

impl LateStream {
    /// Op `o` at `pos` was walked, acting on grant `g` ([`NO_GRANT`]: none).
    pub(crate) fn walked(&mut self, pos: usize, o: &ClientOp, g: u32) {
        if let Some((done_ns, token)) = shows_token(o) {
            let s = self.shown.entry(o.target).or_default();
            s.recent.insert((done_ns, pos), token);
            s.highest = s.highest.max(Some(token));
        }
        if g == NO_GRANT || o.func.is_lock_op() || self.cut_grants.contains(&g) {
            return;
        }
        let closed = self.judging.contains_key(&g);
        let fenced = match fenced_by(o) {
            None => Some(false),
            Some((token, by_ns)) if o.outcome == Outcome::Ok => {
                // Its invoke: every op completed before it has been walked.
                let highest = self.shown.get(&o.target).and_then(|s| s.before(by_ns));
                Some(highest.is_none_or(|h| h <= token))
            }
            Some((_, by_ns)) => {
                *self.undecided.entry(by_ns).or_default() += 1;
                None
            }
        };
        let used = Use {
            pos,
            op: o.clone(),
            fenced,
        };
        if closed {
            self.candidate(g, used);
            return;
        }
        let list = self.uses.entry(g).or_default();
        if list.len() >= USES_KEPT_MAX {
            self.uses.remove(&g);
            self.cut_grants.insert(g);
            self.cut += 1;
            return;
        }
        list.push(used);
    }

    /// Closed grant `g`'s use `u`, walked after it closed: a candidate if invoked past the
    /// grant's final surely-dead bound.
    fn candidate(&mut self, g: u32, u: Use) {
        let j = self.judging.get_mut(&g).expect("a closed grant");
        match j.dead_ns {
            Some(dead_ns) if u.op.invoke_ns > dead_ns => {
                let i = j.candidates.len();
                self.queries.push(Reverse((u.op.invoke_ns, g, i)));
                j.candidates.push(Candidate {
                    used: u,
                    dead_ns,
                    other: None,
                });
            }
            _ => self.forget(&u),
        }
    }

    /// Grant `g` closed: its surely-dead bound is followed through its uses (its store ops and
    /// the renews and releases of its epoch that name it, `grant_of`), and those invoked past
    /// it wait for the sweep.
    pub(crate) fn closed(
        &mut self,
        g: u32,
        grant: &Grant,
        (ops, grant_of): (&Ops, &Window<u32>),
        drift: Drift,
    ) {
        let stored = self.uses.remove(&g).unwrap_or_default();
        if self.cut_grants.remove(&g) {
            return;
        }
        let epoch = (grant.epoch_ops.iter())
            .map(|&e| e as usize)
            .filter(|&e| grant_of.get(e) == Some(&g))
            .map(|e| Use {
                pos: e,
                op: ops[e].clone(),
                fenced: Some(false),
            });
        let mut uses: Vec<Use> = stored.into_iter().chain(epoch).collect();
        uses.sort_by_key(|u| u.pos);
        let mut dead = grant
            .ttl_ms
            .map(|t| grant.complete_ns.saturating_add(drift.upper_ns(t)));
        let mut candidates = Vec::new();
        for u in uses {
            let renew = u.op.func == crate::model::Func::Renew;
            let next = renew.then(|| renewed_dead(dead, &u.op, grant.ttl_ms, drift));
            match dead {
                Some(dead_ns) if u.op.invoke_ns > dead_ns => candidates.push(Candidate {
                    used: u,
                    dead_ns,
                    other: None,
                }),
                _ => self.forget(&u),
            }
            if let Some(d) = next {
                dead = d;
            }
        }
        for (i, c) in candidates.iter().enumerate() {
            self.queries.push(Reverse((c.used.op.invoke_ns, g, i)));
        }
        let words = GrantWords::of(grant, ops[grant.op].index);
        let judging = Judging {
            lock: grant.lock,
            words,
            dead_ns: dead,
            candidates,
        };
        self.judging.insert(g, judging);
        self.judging_most = self.judging_most.max(self.judging.len());
    }

    /// A use that is no candidate: its fencing need not be decided.
    fn forget(&mut self, u: &Use) {
        if u.fenced.is_none() {
            self.decided(&u.op);
        }
    }

    fn decided(&mut self, o: &ClientOp) {
        if let Some((_, by_ns)) = fenced_by(o) {
            if let Some(n) = self.undecided.get_mut(&by_ns) {
                *n -= 1;
                if *n == 0 {
                    self.undecided.remove(&by_ns);
                }
            }
        }
    }

    /// The earliest surely-dead bound among the candidates waiting: the sweep keeps every
    /// hold that ends after it.
    pub(crate) fn first_dead_ns(&self) -> Option<u64> {
        (self.queries.iter())
            .filter_map(|Reverse((_, g, i))| {
                let j = self.judging.get(g)?;
                Some(j.candidates[*i].dead_ns)
            })
            .min()
    }

    /// Answers the candidates invoked by `to_ns` from the sweep's `holds`, which has passed
    /// every hold starting before `to_ns` (`swept_to_ns`: it ran ahead to there at its limit).
    pub(crate) fn answer(
        &mut self,
        to_ns: u64,
        holds: &HoldSweep,
        (grants, view): (&Window<Grant>, &impl View),
        swept_to_ns: Option<u64>,
    ) {
        // Bounded by the candidates waiting.
        while let Some(&Reverse((at_ns, g, i))) = self.queries.peek() {
            if at_ns > to_ns {
                break;
            }
            self.queries.pop();
            let Some(j) = self.judging.get_mut(&g) else {
                continue;
            };
            if swept_to_ns.is_some_and(|t| t >= at_ns) {
                self.unsure += 1;
            }
            let c = &mut j.candidates[i];
            let other = holds
                .other_meeting(j.lock, g, c.dead_ns)
                .and_then(|o| grants.get(o as usize))
                .filter(|o| o.process != j.words.process)
                .map(|o| GrantWords::of(o, view.op(o.op).index));
            c.other = Some(other);
        }
    }

    /// Decides the fencing of the indeterminate store ops completed by `walked_ns` (every op
    /// completed before it walked; `u64::MAX`: the history is read, pending ones too), then
    /// judges every closed grant before `kept_from` (the first the walk keeps: no op can name
    /// the others any more; `u32::MAX` at the end) whose candidates are all answered and
    /// decided, worded with `names`.
    pub(crate) fn judge(&mut self, (walked_ns, kept_from): (u64, u32), names: &TargetNames) {
        let shown = &self.shown;
        let mut decided = Vec::new();
        for j in self.judging.values_mut() {
            for c in &mut j.candidates {
                if c.used.fenced.is_some() {
                    continue;
                }
                let Some((token, by_ns)) = fenced_by(&c.used.op) else {
                    continue;
                };
                if by_ns > walked_ns {
                    continue;
                }
                let s = shown.get(&c.used.op.target);
                let highest = if by_ns == u64::MAX {
                    s.and_then(|s| s.highest)
                } else {
                    s.and_then(|s| s.before(by_ns))
                };
                c.used.fenced = Some(highest.is_none_or(|h| h <= token));
                decided.push(c.used.op.clone());
            }
        }
        for o in &decided {
            self.decided(o);
        }
        let done: Vec<u32> = (self.judging.range(..kept_from))
            .filter(|(_, j)| {
                (j.candidates.iter()).all(|c| c.other.is_some() && c.used.fenced.is_some())
            })
            .map(|(&g, _)| g)
            .collect();
        for g in done {
            let j = self.judging.remove(&g).expect("listed above");
            self.word(j, names);
        }
        // Every instant still to be asked about is at or after the walk, or an undecided one.
        let keep_from = (self.undecided.keys().next().copied())
            .unwrap_or(walked_ns)
            .min(walked_ns);
        if keep_from != u64::MAX {
            for s in self.shown.values_mut() {
                s.fold_before(keep_from);
            }
        }
    }

    /// Grant `j`'s late uses, judged: a warning if one is suspect, else counted as fenced.
    fn word(&mut self, j: Judging, names: &TargetNames) {
        let mut list: LateList<&Candidate> = LateList::default();
        for c in &j.candidates {
            if c.other.flatten().is_some() {
                let fenced = c.used.fenced.unwrap_or(false);
                let suspect = c.used.op.outcome != Outcome::Fail && !fenced;
                list.push(c, suspect);
            }
        }
        if list.total == 0 {
            return;
        }
        if !list.unrefused {
            self.fenced_grants += 1;
            self.fenced_ops += list.total;
            return;
        }
        let listed: Vec<(LateWords, bool)> = (list.listed.iter())
            .map(|(c, suspect)| {
                let words = LateWords {
                    op: &c.used.op,
                    dead_ns: c.dead_ns,
                    other: c.other.flatten().expect("listed only with another holder"),
                };
                (words, *suspect)
            })
            .collect();
        let lock = names.locks.get(j.lock as usize).map_or("?", |s| s.as_str());
        let v = unsafe_overlap((lock, names), j.words, &listed, list.total);
        self.warnings.push(v);
        self.warned_grants += 1;
    }

    /// The mutual-exclusion notes this reading adds.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.fenced_grants > 0 {
            notes.push(fenced_note(
                self.fenced_ops,
                self.fenced_grants,
                self.warned_grants,
            ));
        }
        if self.cut > 0 {
            notes.push(format!(
                "{} holder(s) made more than {USES_KEPT_MAX} store ops while their grant was \
                 open: their late uses were not judged for unsafe-overlap",
                self.cut
            ));
        }
        notes
    }
}
