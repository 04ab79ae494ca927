//! The rules a check runs while the history is read, over the grants the walk closes
//! (`walk.rs`): what each keeps is bounded by the grants open at once, not by the history's
//! length. The batch rules are their oracle: a grant the walk did not call stale gives what
//! the whole history gives (`digest::walk_order_tests`).
//!
//! So far, the three readings of `double-grant` that compare grants:
//! - definite holds that overlap, swept in the batch's order from the holds of closed grants
//!   once no grant closed later can hold the lock before them;
//! - token order (`mutex::token_step`), each lock's closed grants with a token walked in
//!   (token, answer, number) order once no grant still open sorts before them;
//! - forced order (`forced.rs`), each lock's closed grants judged once every grant their
//!   earliest instant rests on is closed.
//!
//! And the `fencing-tokens` rules (`fencing.rs`): each lock's closed grants with a token judged
//! once every grant completed before the instants their rules read is closed; and the
//! `stale-lock-ops` rules (`stale.rs`): the renews and releases that act on a grant judged once
//! every grant completed before they were invoked is closed, those that name none once the walk
//! is past them.
//!
//! And the rules that read ops, not grants: the store rules (`store_stream.rs`,
//! `stale-write-accepted` and `lost-update`), each write judged once the walk is past its
//! answer; the lease rules, each answer as it is read; and `lock-stuck` (`stuck_stream.rs`),
//! each `held` answer once the walk is past it, those stuck so far again at the end.
//!
//! Each violation is rendered as found, in the batch's words ([`View`]). The grants a violation
//! found later may name are pinned ([`Streamed::pinned`]): the reader keeps them and their ops.

use crate::evidence::KeyEvidence;
use crate::fencing::Fencing;
use crate::forced::Forced;
use crate::model::{ClientOp, Drift, Grant, View};
use crate::mutex::{
    double_grant, overlapping_holds, token_step, window_end_by, Earlier, Hold, TokenPrev,
};
use crate::stale::Stale;
use crate::store_stream::StoreStream;
use crate::stuck_stream::StuckStream;
use crate::walk::Ops;
use crate::window::Window;
use crate::FxMap;
use history::Violation;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A hold waiting to be swept, ordered `(start, end, grant, segment, lock)`: each lock's holds
/// leave in the batch sweep's order.
type Waiting = Reverse<((u64, u64, u32, u32, u32), Earlier)>;

/// A grant's place in its lock's token order: (token, answer, number).
pub(crate) type TokenKey = (u64, u64, u32);

/// The token-order reading, per lock. A grant that closes sorting before one already walked
/// (a grant ahead of the walk with a lower token: a token regression) is counted out of order
/// and left out: the reading is then not the batch's, as with a stale grant.
#[derive(Default)]
struct TokenWalk {
    /// Closed grants with a token, per lock, earliest key first.
    waiting: FxMap<u32, BinaryHeap<Reverse<TokenKey>>>,
    prev: FxMap<u32, TokenPrev>,
    /// Per lock, the key walked last.
    last: FxMap<u32, TokenKey>,
    out_of_order: u64,
}

/// The violations the streaming rules proved, in the batch's words.
#[derive(Default)]
pub(crate) struct Proven {
    pub(crate) violations: Vec<Violation>,
    /// `(violation, end)` of those whose window reaches past the history read when they were
    /// found: a window ends by the history's end, known only once it is read
    /// ([`Proven::finish`]).
    open_windows: Vec<(usize, u64)>,
}

impl Proven {
    /// Violation `v`, whose window would end at `end_ns` were the history long enough; the
    /// history has been read to `read_to_ns`.
    fn push(&mut self, v: Violation, end_ns: u64, read_to_ns: u64) {
        if end_ns > read_to_ns {
            self.open_windows.push((self.violations.len(), end_ns));
        }
        self.violations.push(v);
    }

    /// The history was read to its end, at `end_time_ns`: the windows found open end there.
    fn finish(&mut self, end_time_ns: u64) {
        for &(i, end_ns) in &self.open_windows {
            let w = &mut self.violations[i].window_ns;
            w[1] = window_end_by(end_time_ns, w[0], end_ns);
        }
        self.open_windows.clear();
    }
}

/// The most holds of closed grants left waiting for the sweep; past it the earliest are swept
/// anyway (a stated bound, counted in [`Streamed::swept_early`]). A hold waits while the walk's
/// watermark is before its start: a grant open for good (an op pending forever, taken as
/// pending) holds it there.
pub(crate) const HOLDS_WAITING_MAX: usize = 4096;

/// How far the readings that wait for the walk may judge (each `u64::MAX`, or
/// `usize::MAX`, at the end of the history).
pub(crate) struct Reach {
    /// No grant closed later holds or completes before it.
    pub(crate) watermark_ns: u64,
    /// No op of a grant still open was invoked before it.
    pub(crate) first_op_ns: u64,
    /// Every op completed before it has been walked.
    pub(crate) walked_ns: u64,
    /// No later step of the walk reads an op before this position.
    pub(crate) orphans_before: usize,
}

impl Reach {
    /// The history is read: everything may be judged.
    pub(crate) const END: Reach = Reach {
        watermark_ns: u64::MAX,
        first_op_ns: u64::MAX,
        walked_ns: u64::MAX,
        orphans_before: usize::MAX,
    };
}

/// The streaming rules' state.
#[derive(Default)]
pub(crate) struct Streamed {
    /// Holds of closed grants not yet swept, earliest first.
    pending: BinaryHeap<Waiting>,
    /// [`HOLDS_WAITING_MAX`] unless the tests set another.
    pub(crate) holds_waiting_max: Option<usize>,
    /// Holds swept before the watermark passed them, at that limit, and the latest start among
    /// them: a hold of a grant closed later that starts before it is left out of the sweep,
    /// and counted, never swept out of order.
    pub(crate) swept_early: u64,
    swept_to_ns: Option<u64>,
    pub(crate) left_out: u64,
    sweep: Vec<(Hold, Earlier)>,
    /// `(grant, segment)` of the earlier hold and of the later of each overlap found so far.
    pub(crate) double_grants: Vec<(u32, u32, u32, u32)>,
    /// Each of them as the batch check words it.
    pub(crate) proven: Proven,
    tokens: TokenWalk,
    pub(crate) forced: Forced,
    pub(crate) fencing: Fencing,
    pub(crate) stale: Stale,
    pub(crate) store: StoreStream,
    pub(crate) stuck: StuckStream,
    /// The most holds left waiting after a sweep.
    pub(crate) pending_max: usize,
    holds: crate::mutex::HoldSweep,
    /// The model search, fed the ops the walk has passed.
    pub(crate) search: crate::search_stream::SearchStream,
    /// The wait-for graph's sweep (`deadlock`).
    pub(crate) deadlock: crate::deadlock_stream::DeadlockStream,
    /// The ops walked, counted for the stats.
    pub(crate) counts: crate::stats::OpCounts,
    /// The ops walked, counted for the liveness and fairness figures.
    pub(crate) liveness: crate::fairness::LivenessCounts,
    /// The contention rounds, and the round of each acquire answered and not yet walked.
    pub(crate) rounds: crate::rounds::RoundCounts,
    pub(crate) round_of: FxMap<crate::model::OpPos, u64>,
    /// The transfer of each op read and not yet walked that names one (from its invoke, else
    /// its completion).
    pub(crate) transfer_of: FxMap<crate::model::OpPos, u64>,
    /// `total-changed`, judged once the history is read.
    pub(crate) bank: crate::bank::BankTotal,
    /// What the history exercised.
    pub(crate) coverage: crate::coverage::CoverageCounts,
    /// The notes of the accounts' total, once judged, and why it was not judged.
    pub(crate) bank_notes: Vec<String>,
    pub(crate) bank_not_judged: Option<String>,
    /// The transfers' critical sections (`non-serializable`), judged once the history is
    /// read: a section's order can be changed by any later read of an old version, so each
    /// is kept to the end (at most `serial::SECTIONS_MAX`, a stated limit).
    pub(crate) serial: crate::serial::Sections,
    /// The critical sections' notes, once judged, and whether a read said its version.
    pub(crate) serial_notes: Vec<String>,
    pub(crate) serial_judged: bool,
    /// `unsafe-overlap`, mutual-exclusion's warnings.
    pub(crate) late: crate::late_stream::LateStream,
    /// What each checker had to judge, for their notes.
    pub(crate) judged: crate::judged::Judged,
}

impl Streamed {
    /// Grant `g` closed: its holds are final (unless the walk later finds it stale). What
    /// the sweep reads of its ops is taken now: they may be dropped before it sweeps.
    pub(crate) fn closed(
        &mut self,
        g: u32,
        grant: &Grant,
        (ops, grant_of): (&Ops, &Window<u32>),
        drift: crate::model::Drift,
    ) {
        self.late.closed(g, grant, (ops, grant_of), drift);
        self.rounds.closed(g, &grant.holds);
        self.judged.closed(grant);
        self.forced.closed(g, grant);
        self.fencing.closed(g, grant, ops[grant.op].index);
        self.stale.closed(g, grant, ops, grant_of);
        if let Some(t) = grant.token {
            let key = (t, grant.complete_ns, g);
            let w = &mut self.tokens;
            if w.last.get(&grant.lock).is_some_and(|&last| key < last) {
                w.out_of_order += 1;
            } else {
                w.waiting.entry(grant.lock).or_default().push(Reverse(key));
            }
        }
        for h in Hold::of(g, grant) {
            // Equal starts too: such a hold may sort before the one swept.
            if self.swept_to_ns.is_some_and(|t| h.start_ns <= t) {
                self.left_out += 1;
                continue;
            }
            let kept = Earlier::of(ops, grant, &grant.holds[h.segment as usize]);
            self.pending.push(Reverse((
                (h.start_ns, h.end_ns, h.grant, h.segment, h.lock),
                kept,
            )));
        }
    }

    /// Sweeps the holds that start before `watermark_ns` (no grant closed later holds the
    /// lock before it), and renders what it finds from `grants` and `view`.
    pub(crate) fn sweep(&mut self, watermark_ns: u64, grants: &Window<Grant>, view: &impl View) {
        self.sweep.clear();
        let waiting_max = self.holds_waiting_max.unwrap_or(HOLDS_WAITING_MAX);
        // Bounded by the holds waiting.
        while let Some(&Reverse(((start_ns, end_ns, grant, segment, lock), kept))) =
            self.pending.peek()
        {
            if start_ns >= watermark_ns {
                if self.pending.len() <= waiting_max {
                    break;
                }
                self.swept_early += 1;
                self.swept_to_ns = self.swept_to_ns.max(Some(start_ns));
            }
            self.pending.pop();
            let h = Hold {
                lock,
                start_ns,
                end_ns,
                grant,
                segment,
            };
            self.sweep.push((h, kept));
        }
        let sweep = std::mem::take(&mut self.sweep);
        let mut holds = std::mem::take(&mut self.holds);
        let mut found = Vec::new();
        // The late uses waiting ask the sweep between its holds: each once every hold that
        // starts before its invoke, and none after, has been swept.
        for &(h, kept) in &sweep {
            let at = (grants, view);
            (self.late).answer(h.start_ns, &holds, at, self.swept_to_ns);
            found.extend(overlapping_holds(&mut holds, std::iter::once((h, kept))));
        }
        (self.late).answer(watermark_ns, &holds, (grants, view), self.swept_to_ns);
        for found in found {
            let (ga, sa, gb, sb) = found;
            let (a, b) = (&grants[ga as usize], &grants[gb as usize]);
            let (sa, sb) = (&a.holds[sa as usize], &b.holds[sb as usize]);
            let v = double_grant(view, (a, sa), (b, sb));
            let end_ns = sa.end_ns.min(sb.end_ns);
            self.proven.push(v, end_ns, view.end_time_ns());
            self.double_grants.push(found);
        }
        // A late use still waiting asks for holds that end after its surely-dead bound.
        let forget_ns = watermark_ns.min(self.late.first_dead_ns().unwrap_or(u64::MAX));
        holds.forget_before(forget_ns);
        self.holds = holds;
        self.sweep = sweep;
        self.pending_max = self.pending_max.max(self.pending.len());
    }

    /// Walks each lock's closed grants in token order as far as no grant still open sorts
    /// before them (`open`: the open grants with a token, as `(lock, key)`; at the end of
    /// the history, none), and renders what it proves.
    pub(crate) fn walk_tokens(
        &mut self,
        open: &[(u32, TokenKey)],
        grants: &Window<Grant>,
        view: &impl View,
    ) {
        let w = &mut self.tokens;
        for (&lock, heap) in w.waiting.iter_mut() {
            let first_open = open
                .iter()
                .filter(|(l, _)| *l == lock)
                .map(|&(_, k)| k)
                .min();
            // Bounded by the grants waiting.
            while let Some(&Reverse(key)) = heap.peek() {
                if first_open.is_some_and(|o| o < key) {
                    break;
                }
                heap.pop();
                let prev = w.prev.get(&lock).copied();
                let (next, found) = token_step(view, grants, prev, key.2, key.0);
                w.prev.insert(lock, next);
                w.last.insert(lock, key);
                if let Some((v, end_ns)) = found {
                    self.proven.push(v, end_ns, view.end_time_ns());
                }
            }
        }
    }

    /// Judges what every reading that waits for the walk may judge now, as far as `reach`
    /// says, and renders it from `grants`, `view` and the keys' names `keys`. The renews and
    /// releases naming no grant come first: every grant they read is kept until then.
    pub(crate) fn judge(
        &mut self,
        reach: &Reach,
        (grant_of, grants): (&Window<u32>, &Window<Grant>),
        view: &impl View,
        keys: &[String],
    ) {
        let read_to_ns = view.end_time_ns();
        let orphans = (self.stale).judge_orphans(reach.orphans_before, grant_of, grants, view);
        let forced = self.forced.judge(reach.watermark_ns, grants, view);
        let fencing = self.fencing.judge(reach.watermark_ns, grants, view);
        let at = (reach.watermark_ns, reach.first_op_ns);
        let stale = self.stale.judge(at, grants, view);
        // A store violation lies between two completions, both read.
        let store = (self.store.judge(reach.walked_ns, keys).into_iter())
            .map(|v| (v.window_ns[1], v))
            .map(|(end_ns, v)| (v, end_ns));
        let found = orphans
            .into_iter()
            .chain(forced)
            .chain(fencing)
            .chain(stale);
        for (v, end_ns) in found.chain(store) {
            self.proven.push(v, end_ns, read_to_ns);
        }
    }

    /// The history was read: the `held` answers stuck so far are judged with the whole run's
    /// ttl policy (`read`) and their stretches worded.
    pub(crate) fn finish_stuck(&mut self, read: &crate::stuck_stream::Read) {
        for v in self.stuck.finish(read) {
            // Its last answer was read.
            let end_ns = v.window_ns[1];
            self.proven.push(v, end_ns, read.end_ns);
        }
    }

    /// Op `o` was just answered with `lease` and `key` evidence (`lease.rs`): the lease
    /// rules, which rest on that one answer, judge it now. `locks`: the locks' names.
    pub(crate) fn answered(
        &mut self,
        o: &ClientOp,
        (lease, key): (Option<(u64, u64)>, Option<&KeyEvidence>),
        locks: &[String],
        drift: Drift,
    ) {
        self.judged.answered(o, lease.is_some(), key);
        let name = locks.get(o.target as usize).map_or("?", |s| s.as_str());
        if let Some(v) = crate::lease::answered(o, name, lease, key, drift) {
            let end_ns = v.window_ns[1];
            self.proven.push(v, end_ns, end_ns);
        }
    }

    /// Closed grants the token-order reading left out, sorting before one it had walked.
    pub(crate) fn out_of_order(&self) -> u64 {
        self.tokens.out_of_order
    }

    /// The history was read: the accounts' total is judged, naming keys by `keys`.
    pub(crate) fn finish_bank(&mut self, keys: &[String]) {
        let mut out = crate::CheckOutput::new();
        self.bank.judge(keys, &mut out);
        self.bank_notes = out.notes;
        self.bank_not_judged = out.not_judged;
        for v in out.violations {
            // Its closing reads were read.
            let end_ns = v.window_ns[1];
            self.proven.push(v, end_ns, end_ns);
        }
    }

    /// The critical sections' round at `now_ns` (`serial::Sections::round`): what it proves
    /// is proven now.
    pub(crate) fn serial_round(&mut self, now_ns: u64, keys: &[String]) {
        self.serial.round(now_ns, keys);
        for v in self.serial.newly_proven() {
            // Every store op of its sections was read.
            let end_ns = v.window_ns[1];
            self.proven.push(v.clone(), end_ns, end_ns);
        }
    }

    /// The history was read: the critical sections' order is judged, naming keys by `keys`.
    pub(crate) fn finish_serial(&mut self, keys: &[String]) {
        let mut out = crate::CheckOutput::new();
        let handed = self.serial.handed();
        self.serial_judged = self.serial.judge(keys, &mut out);
        self.serial_notes = out.notes;
        // The first `handed` were proven by the rounds.
        for v in out.violations.into_iter().skip(handed) {
            // Every store op of its sections was read.
            let end_ns = v.window_ns[1];
            self.proven.push(v, end_ns, end_ns);
        }
    }

    /// The history was read to its end, at `end_time_ns`.
    pub(crate) fn finish(&mut self, end_time_ns: u64) {
        self.proven.finish(end_time_ns);
    }

    /// The grants a violation found later may name, which the reader must keep with their ops:
    /// those of the holds waiting, of the holds the sweep may still pair, of the grants waiting
    /// for the token walk, and the token walk's last grant of each lock (and the one that
    /// pushed its instant).
    pub(crate) fn pinned(&mut self) -> Vec<u32> {
        let waiting = self.pending.iter().map(|Reverse((h, _))| h.2);
        let tokens = &self.tokens;
        let in_order = tokens.waiting.values().flatten().map(|Reverse(k)| k.2);
        let walked = tokens
            .prev
            .values()
            .flat_map(|&(p, _, pushed_by)| std::iter::once(p).chain(pushed_by));
        waiting
            .chain(self.holds.grants())
            .chain(in_order)
            .chain(walked)
            .chain(self.forced.pinned())
            .chain(self.fencing.pinned())
            .chain(self.stale.pinned())
            .collect()
    }
}
