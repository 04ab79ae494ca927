//! `lock-stuck` (`liveness.rs`) made as the history is read, with the batch's stretches and
//! words.
//!
//! A `held` answer is judged against the leases that could be in force when it was given: those
//! set by acquires and renews invoked before it completed. Ops are walked in invoke order, so an
//! answer is judged as the walk passes its completion, before the op walked then adds its own
//! lease. One thing is not known until the end: how long a lease set by an op whose answer was
//! lost lasts, which the whole run's ttl policy says (the longest ttl the service granted for
//! what that op asked). The policy only grows, and a longer lease only ends later, so an answer
//! not stuck with the policy read so far is not stuck at the end either, and is let go. So is
//! one given while a fault that can hold a grant back has not ended (it ends after the answer).
//! Only those stuck so far wait for the end, with what they were judged against (per lock: the
//! latest lease of the ok answers, and per ttl asked for, the latest of the lost ones); they
//! are judged again then, with the final policy, and grouped into the batch's stretches.

use crate::faults::{Fault, FaultLog};
use crate::liveness::{stuck, Deadline, Source, Stretch, StuckView};
use crate::model::{ClientOp, Drift, Func, FxMap, NO_TARGET};
use history::{Outcome, Violation};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// The most `held` answers stuck so far that wait for the end of the history; past it the
/// earliest is judged with the ttl policy read so far and let go (counted in
/// [`StuckStream::cut_short`]). Only a lock stuck for good answers `held` this often.
pub(crate) const STUCK_WAITING_MAX: usize = 4096;

/// A lease an op could have set: what orders it among the others, as the batch's sweep does
/// (the latest deadline wins, ties to the later in (invoke, effect, ttl, position) order), and
/// the op, for the sentence that names it.
#[derive(Clone, Debug)]
struct Lease {
    /// When it could last have taken effect; `None`: never answered, so until the run's end.
    at_ns: Option<u64>,
    invoke_ns: u64,
    pos: usize,
    op: ClientOp,
}

impl Lease {
    fn at(&self, end_ns: u64) -> u64 {
        self.at_ns.unwrap_or(end_ns)
    }
}

/// One lock's leases read so far, as a held answer is judged against them.
#[derive(Clone, Default)]
struct Leases {
    /// The ok answers' lease with the latest deadline (its ttl is its own), and their
    /// longest ttl.
    ok: Option<(Lease, u64)>,
    ok_ttl_max_ms: Option<u64>,
    /// Per ttl asked for, the latest lease of the ops whose answer was lost (indeterminate or
    /// never answered): their ttl is the policy's.
    lost: BTreeMap<u64, Lease>,
    /// An op that set a lease of no known ttl.
    ttl_unknown: bool,
}

/// What the run's ttl policy says an op that asked for `r` ms could have been granted.
fn policy_ttl(policy: &FxMap<u64, (u64, u64)>, r: u64) -> u64 {
    policy.get(&r).map_or(r, |p| p.1.max(r))
}

impl Leases {
    /// When every lease read was surely dead, and why (`None`: one of unknown ttl), counting
    /// the fault `fault` (its end and place) as holding the longest back; the run's end at
    /// `end_ns` ends a lease never answered.
    fn deadline(
        &self,
        policy: &FxMap<u64, (u64, u64)>,
        fault: Option<(u64, usize)>,
        (drift, end_ns): (Drift, u64),
    ) -> Option<Deadline> {
        if self.ttl_unknown {
            return None;
        }
        // (deadline, the sweep's order: invoke, effect, ttl, position), and the deadline.
        type Best = ((u64, (u64, u64, u64, usize)), Deadline);
        let mut best: Option<Best> = None;
        let mut ttl_max = self.ok_ttl_max_ms;
        let ok = self.ok.iter().map(|(l, ttl)| (l, *ttl));
        let lost = self.lost.iter().map(|(&r, l)| (l, policy_ttl(policy, r)));
        for (l, ttl) in ok.chain(lost) {
            ttl_max = ttl_max.max(Some(ttl));
            let at = l.at(end_ns);
            let d = Deadline::new(at, ttl, drift, Source::Op(l.pos));
            let key = (d.dead_ns, (l.invoke_ns, at, ttl, l.pos));
            if best.is_none_or(|(b, _)| key > b) {
                best = Some((key, d));
            }
        }
        let mut deadline = best.map_or(Deadline::START, |(_, d)| d);
        if let (Some((end, at)), Some(t)) = (fault, ttl_max) {
            let d = Deadline::new(end, t, drift, Source::Fault(at));
            if d.dead_ns >= deadline.dead_ns {
                deadline = d;
            }
        }
        Some(deadline)
    }

    /// Op `o` at `pos` could have set a lease: it joins (`drift`: how the leases' ends are
    /// reckoned).
    fn add(&mut self, pos: usize, o: &ClientOp, drift: Drift) {
        let lease = |at_ns| Lease {
            at_ns,
            invoke_ns: o.invoke_ns,
            pos,
            op: o.clone(),
        };
        match o.outcome {
            Outcome::Ok => match o.ttl_ms().or(o.requested_ttl_ms()) {
                Some(ttl) => {
                    self.ok_ttl_max_ms = self.ok_ttl_max_ms.max(Some(ttl));
                    // An ok lease keeps its own ttl, so the latest deadline is known now; ties
                    // as the batch's sweep breaks them.
                    let at = o.complete_ns().expect("an ok op completed");
                    let key = |at: u64, l: (u64, usize), ttl: u64| {
                        (at.saturating_add(drift.upper_ns(ttl)), l.0, at, ttl, l.1)
                    };
                    let new = key(at, (o.invoke_ns, pos), ttl);
                    let beats = self.ok.as_ref().is_none_or(|(b, bt)| {
                        let b_at = b.at_ns.expect("an ok lease was answered");
                        new >= key(b_at, (b.invoke_ns, b.pos), *bt)
                    });
                    if beats {
                        self.ok = Some((lease(Some(at)), ttl));
                    }
                }
                None => self.ttl_unknown = true,
            },
            Outcome::Info | Outcome::Pending => match o.requested_ttl_ms().or(o.ttl_ms()) {
                Some(r) => {
                    let at_ns = match o.outcome {
                        Outcome::Info => o.complete_ns(),
                        _ => None,
                    };
                    // One ttl for them all: the latest to take effect has the latest deadline.
                    let order =
                        |at: Option<u64>, invoke: u64, p: usize| (at.is_none(), at, invoke, p);
                    let new = order(at_ns, o.invoke_ns, pos);
                    let beats = (self.lost.get(&r))
                        .is_none_or(|b| new >= order(b.at_ns, b.invoke_ns, b.pos));
                    if beats {
                        self.lost.insert(r, lease(at_ns));
                    }
                }
                None => self.ttl_unknown = true,
            },
            Outcome::Fail => {}
        }
    }

    /// The ops its leases name.
    fn ops(&self) -> impl Iterator<Item = &Lease> + '_ {
        (self.ok.iter().map(|(l, _)| l)).chain(self.lost.values())
    }
}

/// A `held` answer stuck so far, waiting for the end with what it was judged against.
struct Waiting {
    lock: u32,
    pos: usize,
    op: ClientOp,
    leases: Leases,
    fault: Option<(u64, usize)>,
}

/// One lock's stretch of stuck answers being assembled, from the first (and what its deadline
/// rests on) to the last.
struct Open {
    stretch: Stretch,
    first: Waiting,
    last: ClientOp,
}

/// A `held` answer walked, waiting to be judged: ordered by its completion and position, with
/// its op (kept in the heap itself, where a map beside it cost a hash in and out per answer).
struct HeldAnswer {
    at: (u64, usize),
    op: ClientOp,
}

impl PartialEq for HeldAnswer {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for HeldAnswer {}

impl PartialOrd for HeldAnswer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for HeldAnswer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

/// The `lock-stuck` reading's state.
pub(crate) struct StuckStream {
    /// Per lock id.
    locks: Vec<Leases>,
    /// `held` answers walked, earliest (completion, position) first, with their ops.
    held: BinaryHeap<Reverse<HeldAnswer>>,
    /// Those stuck so far, in the order judged (completion, position).
    stuck: std::collections::VecDeque<Waiting>,
    /// Per lock id, the stretch of the answers judged for good (at the limit, or at the end).
    open: Vec<Option<Open>>,
    /// Stretches closed and worded.
    found: Vec<Violation>,
    /// The faults as read so far.
    pub(crate) faults: FaultLog,
    pub(crate) grace_ns: u64,
    /// [`STUCK_WAITING_MAX`] unless the tests set another.
    pub(crate) waiting_max: usize,
    pub(crate) waiting_most: usize,
    pub(crate) cut_short: u64,
    /// `held` answers not judged: a lease of unknown ttl could be in force.
    pub(crate) unjudged: u64,
}

impl Default for StuckStream {
    fn default() -> Self {
        StuckStream {
            locks: Vec::new(),
            held: BinaryHeap::new(),
            stuck: Default::default(),
            open: Vec::new(),
            found: Vec::new(),
            faults: FaultLog::default(),
            grace_ns: crate::CheckConfig::default().liveness_grace_ns,
            waiting_max: STUCK_WAITING_MAX,
            waiting_most: 0,
            cut_short: 0,
            unjudged: 0,
        }
    }
}

/// What the reading keeps to word a stretch: the ops it names, by position.
struct Kept<'a> {
    locks: &'a [String],
    errors: &'a [String],
    ops: FxMap<usize, &'a ClientOp>,
    faults: &'a FaultLog,
}

impl StuckView for Kept<'_> {
    fn lock_name(&self, l: u32) -> &str {
        self.locks.get(l as usize).map_or("?", |s| s.as_str())
    }
    fn op(&self, pos: usize) -> &ClientOp {
        self.ops[&pos]
    }
    fn fault(&self, i: usize) -> &Fault {
        self.faults.get(i).expect("a fault a finding names is kept")
    }
    fn error_of(&self, op: &ClientOp) -> Option<&str> {
        self.errors.get(op.error as usize).map(|s| s.as_str())
    }
}

/// What the reading reads of the digest: the locks' names and the errors' texts, the ttl
/// policy so far, the drift, and the time read to.
pub(crate) struct Read<'a> {
    pub(crate) locks: &'a [String],
    pub(crate) errors: &'a [String],
    pub(crate) policy: &'a FxMap<u64, (u64, u64)>,
    pub(crate) drift: Drift,
    pub(crate) end_ns: u64,
}

impl StuckStream {
    /// Op `o` at `pos` was walked: the `held` answers completed by its invoke are judged
    /// first (it was invoked after they completed), then it joins.
    pub(crate) fn walked(&mut self, pos: usize, o: &ClientOp, read: &Read) {
        if o.target == NO_TARGET || !matches!(o.func, Func::Acquire | Func::Renew) {
            return;
        }
        self.judge(o.invoke_ns, read);
        if o.outcome == Outcome::Fail {
            let reason = (read.errors.get(o.error as usize)).map(|e| history::reason::reason_of(e));
            if o.func == Func::Acquire && reason == Some("held") {
                let done = o.complete_ns().expect("a refused op completed");
                self.held.push(Reverse(HeldAnswer {
                    at: (done, pos),
                    op: o.clone(),
                }));
            }
            return;
        }
        let l = o.target as usize;
        if self.locks.len() <= l {
            self.locks.resize_with(l + 1, Leases::default);
        }
        self.locks[l].add(pos, o, read.drift);
    }

    /// Judges the `held` answers completed by `walked_ns` (every op invoked before it has
    /// been walked; `u64::MAX`: the history is read): those not stuck with what is read so far
    /// are let go.
    pub(crate) fn judge(&mut self, walked_ns: u64, read: &Read) {
        self.judge_answers(walked_ns, read);
        // Every answer judged from now on was given after `walked_ns`.
        self.faults.asked_from(walked_ns);
    }

    fn judge_answers(&mut self, walked_ns: u64, read: &Read) {
        if self.held.peek().is_none_or(|Reverse(h)| h.at.0 > walked_ns) {
            return;
        }
        let none = Leases::default();
        // Bounded by the answers waiting.
        while let Some(Reverse(HeldAnswer {
            at: (done_ns, pos), ..
        })) = self.held.peek()
        {
            let (done_ns, pos) = (*done_ns, *pos);
            if done_ns > walked_ns {
                break;
            }
            let Reverse(HeldAnswer { op, .. }) = self.held.pop().expect("peeked");
            let lock = op.target;
            let leases = self.locks.get(lock as usize).unwrap_or(&none);
            if leases.ttl_unknown {
                self.unjudged += 1;
                continue;
            }
            let at = (read.drift, read.end_ns);
            // A fault only moves the deadline later: most answers are let go without it. Of
            // unknown ttl: not judged.
            let stuck = |d: Deadline| op.invoke_ns > d.dead_ns.saturating_add(self.grace_ns);
            if !leases.deadline(read.policy, None, at).is_some_and(stuck) {
                continue;
            }
            let fault = self.faults.latest_end_started_before(done_ns);
            // The policy can only lengthen a lease, and a fault not ended yet ends after this
            // answer: not stuck now is never stuck.
            if !leases.deadline(read.policy, fault, at).is_some_and(stuck) {
                continue;
            }
            let leases = leases.clone();
            if let Some((_, i)) = fault {
                self.faults.name(i);
            }
            self.stuck.push_back(Waiting {
                lock,
                pos,
                op,
                leases,
                fault,
            });
            if self.stuck.len() > self.waiting_max {
                // Judged with what was read: the policy may still lengthen its leases.
                let w = self.stuck.pop_front().expect("over the limit");
                let at = (read.drift, read.end_ns);
                let d = w.leases.deadline(read.policy, w.fault, at);
                if let Some(d) =
                    d.filter(|d| w.op.invoke_ns > d.dead_ns.saturating_add(self.grace_ns))
                {
                    self.fold(w, d, read);
                }
                self.cut_short += 1;
            }
            self.waiting_most = self.waiting_most.max(self.stuck.len());
        }
    }

    /// Stuck answer `w`, judged for good as stuck since `d`, joins its lock's stretch (or ends
    /// it and begins the next: the one ended is worded).
    fn fold(&mut self, w: Waiting, d: Deadline, read: &Read) {
        let l = w.lock as usize;
        if self.open.len() <= l {
            self.open.resize_with(l + 1, || None);
        }
        if let Some(o) = self.open[l].as_mut() {
            if o.stretch.join(w.lock, d, w.pos) {
                o.last = w.op;
                return;
            }
        }
        let next = Open {
            stretch: Stretch::new(w.lock, d, w.pos),
            last: w.op.clone(),
            first: w,
        };
        if let Some(done) = self.open[l].replace(next) {
            let v = self.word(done, read);
            self.found.push(v);
        }
    }

    /// The stretch `o`, in the batch's words.
    fn word(&self, o: Open, read: &Read) -> Violation {
        let mut ops: FxMap<usize, &ClientOp> = FxMap::default();
        let (first, last) = o.stretch.ends();
        ops.insert(first, &o.first.op);
        ops.insert(last, &o.last);
        for l in o.first.leases.ops() {
            ops.insert(l.pos, &l.op);
        }
        let kept = Kept {
            locks: read.locks,
            errors: read.errors,
            ops,
            faults: &self.faults,
        };
        stuck(&kept, self.grace_ns, &o.stretch)
    }

    /// The history was read to its end: the answers stuck so far are judged again with the
    /// whole run's ttl policy, and every stretch is worded.
    pub(crate) fn finish(&mut self, read: &Read) -> Vec<Violation> {
        self.judge(u64::MAX, read);
        self.faults.finish(read.end_ns);
        let at = (read.drift, read.end_ns);
        // Bounded by the answers waiting.
        while let Some(w) = self.stuck.pop_front() {
            let Some(d) = w.leases.deadline(read.policy, w.fault, at) else {
                continue;
            };
            if w.op.invoke_ns > d.dead_ns.saturating_add(self.grace_ns) {
                self.fold(w, d, read);
            }
        }
        let open: Vec<Open> = self.open.iter_mut().filter_map(Option::take).collect();
        for o in open {
            let v = self.word(o, read);
            self.found.push(v);
        }
        std::mem::take(&mut self.found)
    }
}
