//! `lock-stuck`: the service kept answering `held` long after every lease that could have been
//! in force was surely dead.
//!
//! Each `held` answer X is judged on its own, against the leases that could have been in force
//! when it was given: those set by an acquire or renew that could have taken effect before X
//! completed (ok, indeterminate or never completed, invoked before X completed; a refused
//! acquire grants nothing). Such a lease is surely dead by the latest instant its op could have
//! taken effect plus its own `ttl*(1+drift)`: an ok or indeterminate op takes effect by its
//! completion, one that never completed at any time until the end of the run. A fault
//! (pause, partition, kill until restart, clock, ...) started before X completed may hold an
//! effect back until it ends (one never stopped never ends), so its end counts as such an
//! instant too, with the longest of those leases. X is a violation when it was invoked after
//! the latest of these deadlines plus the grace. Later leases, longer or not, say nothing about
//! an earlier answer. Consecutive violations with the same deadline are one stuck stretch, one
//! violation. Unavailability (timeouts, `recovering`, 5xx) is not `held`, so it never counts.

use crate::faults::Fault;
use crate::inject::Injector;
use crate::model::{ClientOp, Func, Model, NO_TARGET};
use crate::text::secs;
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};

pub struct Liveness;

/// What fixed T_last for a held answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Nothing: the history's start.
    Start,
    /// A client op, by position in `Model::ops`.
    Op(usize),
    /// A fault, by position in the fault list.
    Fault(usize),
}

/// One stuck stretch being assembled.
pub(crate) struct Stretch {
    lock: u32,
    deadline: Deadline,
    first: usize,
    last: usize,
    count: u64,
}

impl Stretch {
    /// Its first and last held answers, by position.
    pub(crate) fn ends(&self) -> (usize, usize) {
        (self.first, self.last)
    }

    /// A stretch of held answer `pos` on lock `l`, stuck past `deadline`, alone.
    pub(crate) fn new(l: u32, deadline: Deadline, pos: usize) -> Stretch {
        Stretch {
            lock: l,
            deadline,
            first: pos,
            last: pos,
            count: 1,
        }
    }

    /// Whether held answer `pos` on lock `l`, stuck past `deadline` and later than this
    /// stretch's, joins it (stuck since the same instant): then it is its last.
    pub(crate) fn join(&mut self, l: u32, deadline: Deadline, pos: usize) -> bool {
        let joins = self.lock == l && self.deadline.source == deadline.source;
        if joins {
            self.last = pos;
            self.count += 1;
        }
        joins
    }
}

/// What a `lock-stuck` sentence reads: the batch's model, or what the streamed reading kept
/// (`stuck_stream.rs`). Ops by position, faults by their place in the fault list.
pub(crate) trait StuckView {
    fn lock_name(&self, l: u32) -> &str;
    fn op(&self, pos: usize) -> &ClientOp;
    fn fault(&self, i: usize) -> &Fault;
    /// The error an op reported.
    fn error_of(&self, op: &ClientOp) -> Option<&str>;
}

impl StuckView for Model {
    fn lock_name(&self, l: u32) -> &str {
        Model::lock_name(self, l)
    }
    fn op(&self, pos: usize) -> &ClientOp {
        &self.ops[pos]
    }
    fn fault(&self, i: usize) -> &Fault {
        &self.faults.list()[i]
    }
    fn error_of(&self, op: &ClientOp) -> Option<&str> {
        Model::error_of(self, op)
    }
}

/// Adds held answer `pos` on lock `l`, stuck past `deadline`, to the stretches, in (lock,
/// completion) order: one stuck since the same instant as the last joins its stretch.
pub(crate) fn join_stretch(stretches: &mut Vec<Stretch>, l: u32, deadline: Deadline, pos: usize) {
    if !(stretches.last_mut()).is_some_and(|s| s.join(l, deadline, pos)) {
        stretches.push(Stretch::new(l, deadline, pos));
    }
}

impl Checker for Liveness {
    fn injectors(&self) -> &'static [Injector] {
        injectors::LIVENESS
    }

    fn name(&self) -> &'static str {
        "liveness"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::LockStuck]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let (effects, held) = effects_and_held(m);
        let (stretches, unjudged) = stuck_stretches(m, cfg, &effects, &held);
        if unjudged > 0 {
            out.notes.push(unjudged_note(unjudged));
        }
        for s in stretches {
            out.violations.push(stuck(m, cfg.liveness_grace_ns, &s));
        }
        out.nothing_to_judge(!held.is_empty(), || NO_HELD.to_string());
        verdict(m, cfg, &mut out);
        out
    }
}

/// (lock, invoke, latest effect instant, ttl, op) of an acquire or renew that may have set a
/// lease.
type Effect = (u32, u64, u64, Option<u64>, usize);

/// The ops that may have set a lease, and the `held` answers as (lock, complete, op): both
/// sorted.
/// The note on `held` answers not judged.
pub(crate) fn unjudged_note(unjudged: u64) -> String {
    format!(
        "{unjudged} held answer(s) came while a lease of unknown ttl could be in force: \
         lock-stuck was not judged there"
    )
}

/// Why `liveness` judged nothing.
pub(crate) const NO_HELD: &str = "no acquire was answered held, so lock-stuck had nothing to \
    judge (every acquire was granted, timed out, or was cut by the run's end before its \
    --acquire-wait ran out; a lock stuck past its leases is answered held once that wait ends)";

fn effects_and_held(m: &Model) -> (Vec<Effect>, Vec<(u32, u64, usize)>) {
    let mut effects: Vec<Effect> = Vec::new();
    let mut held: Vec<(u32, u64, usize)> = Vec::new();
    for (i, o) in m.ops.iter().enumerate() {
        if o.target == NO_TARGET || !matches!(o.func, Func::Acquire | Func::Renew) {
            continue;
        }
        let ttl = m.upper_ttl_ms(o);
        match o.outcome {
            Outcome::Ok | Outcome::Info => effects.push((
                o.target,
                o.invoke_ns,
                o.complete_ns().expect("a completed op"),
                ttl,
                i,
            )),
            Outcome::Pending => effects.push((o.target, o.invoke_ns, m.end_time_ns, ttl, i)),
            Outcome::Fail => {
                if o.func == Func::Acquire && m.reason_of(o) == Some("held") {
                    held.push((o.target, o.complete_ns().expect("failed ops completed"), i));
                }
            }
        }
    }
    effects.sort_unstable();
    held.sort_unstable();
    (effects, held)
}

/// The `held` answers given after every lease that could be in force was surely dead, as
/// stretches; and how many answers could not be judged (a lease of unknown ttl).
fn stuck_stretches(
    m: &Model,
    cfg: &CheckConfig,
    effects: &[Effect],
    held: &[(u32, u64, usize)],
) -> (Vec<Stretch>, u64) {
    let grace_ns = cfg.liveness_grace_ns;
    let mut stretches: Vec<Stretch> = Vec::new();
    let mut unjudged = 0u64;
    let mut sweep = LeaseSweep::new(effects);
    for &(l, done_ns, pos) in held {
        sweep.advance(m, l, done_ns);
        if sweep.ttl_unknown {
            // A lease of unknown length may still be in force.
            unjudged += 1;
            continue;
        }
        let deadline = sweep.deadline(m, done_ns);
        let x = &m.ops[pos];
        if x.invoke_ns <= deadline.dead_ns.saturating_add(grace_ns) {
            continue;
        }
        join_stretch(&mut stretches, l, deadline, pos);
    }
    (stretches, unjudged)
}

/// The leases that could be in force at each `held` answer, swept in (lock, time) order.
struct LeaseSweep<'a> {
    effects: &'a [Effect],
    /// The first effect not yet read.
    next: usize,
    lock: Option<u32>,
    /// The latest deadline so far on the lock.
    best: Option<Deadline>,
    ttl_max_ms: Option<u64>,
    ttl_unknown: bool,
}

impl<'a> LeaseSweep<'a> {
    fn new(effects: &'a [Effect]) -> LeaseSweep<'a> {
        debug_assert!(
            effects.windows(2).all(|w| w[0] <= w[1]),
            "effects are sorted by lock and invoke"
        );
        LeaseSweep {
            effects,
            next: 0,
            lock: None,
            best: None,
            ttl_max_ms: None,
            ttl_unknown: false,
        }
    }

    /// Reads the effects on lock `l` invoked before `done_ns` (answers come in (lock,
    /// completion) order).
    fn advance(&mut self, m: &Model, l: u32, done_ns: u64) {
        let effects = self.effects;
        if self.lock != Some(l) {
            self.lock = Some(l);
            self.best = None;
            self.ttl_max_ms = None;
            self.ttl_unknown = false;
            self.next = effects.partition_point(|e| e.0 < l);
        }
        // Bounded by `effects.len()` over the sweep: `next` only moves forward.
        while self.next < effects.len()
            && effects[self.next].0 == l
            && effects[self.next].1 < done_ns
        {
            let (_, _, at_ns, ttl, op) = effects[self.next];
            match ttl {
                Some(t) => {
                    self.ttl_max_ms = self.ttl_max_ms.max(Some(t));
                    let d = Deadline::new(at_ns, t, m.drift, Source::Op(op));
                    if self.best.is_none_or(|b| d.dead_ns >= b.dead_ns) {
                        self.best = Some(d);
                    }
                }
                None => self.ttl_unknown = true,
            }
            self.next += 1;
        }
    }

    /// When every lease read so far was surely dead, counting a fault started before
    /// `done_ns` as holding the longest of them back until it ended.
    fn deadline(&self, m: &Model, done_ns: u64) -> Deadline {
        let mut deadline = self.best.unwrap_or(Deadline::START);
        if let (Some((end, at)), Some(t)) =
            (m.faults.latest_end_started_before(done_ns), self.ttl_max_ms)
        {
            let d = Deadline::new(end, t, m.drift, Source::Fault(at));
            if d.dead_ns >= deadline.dead_ns {
                deadline = d;
            }
        }
        deadline
    }
}

/// When every lease that could be in force was surely dead, and why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    pub(crate) dead_ns: u64,
    /// The latest instant the lease could have been set (or the fault ended).
    at_ns: u64,
    ttl_ms: u64,
    pub(crate) source: Source,
}

impl Deadline {
    /// Since the history's start: nothing was set.
    pub(crate) const START: Deadline = Deadline {
        dead_ns: 0,
        at_ns: 0,
        ttl_ms: 0,
        source: Source::Start,
    };

    pub(crate) fn new(
        at_ns: u64,
        ttl_ms: u64,
        drift: crate::model::Drift,
        source: Source,
    ) -> Deadline {
        Deadline {
            dead_ns: at_ns.saturating_add(drift.upper_ns(ttl_ms)),
            at_ns,
            ttl_ms,
            source,
        }
    }
}

pub(crate) fn stuck(m: &impl StuckView, grace_ns: u64, s: &Stretch) -> Violation {
    let name = m.lock_name(s.lock);
    let first = m.op(s.first);
    let last = m.op(s.last);
    let d = s.deadline;
    let mut ops = vec![first.index, last.index];
    let since = dead_since(m, name, d, &mut ops);
    let tail = if s.count > 1 {
        format!(
            "; {} such held answers in all, the last at {} (op {})",
            s.count,
            secs(last.complete_or_max()),
            last.index
        )
    } else {
        String::new()
    };
    // What the service said beside its `held` (the ring: how long since it saw its token).
    let said = m
        .error_of(last)
        .and_then(|e| e.split_once(history::reason::DETAIL_SEP))
        .map(|(_, detail)| format!(" (the service said: {detail})"))
        .unwrap_or_default();
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::LockStuck,
        lock: Some(name.to_string()),
        ops,
        window_ns: [d.dead_ns, last.complete_or_max()],
        nemesis: Vec::new(),
        explanation: format!(
            "{since}, yet the service answered held to p{}'s acquire invoked at {} (op {}), more than the {} grace later{tail}{said}",
            first.process,
            secs(first.invoke_ns),
            first.index,
            secs(grace_ns),
        ),
    }
}

/// Since when every lease that could be in force was surely dead, in a sentence: from the
/// history's start, the last lease set, or the last fault that could hold one back. The ops
/// it names are added to `ops`.
fn dead_since(m: &impl StuckView, name: &str, d: Deadline, ops: &mut Vec<u64>) -> String {
    debug_assert!(
        d.at_ns <= d.dead_ns,
        "a lease dies no earlier than it was set"
    );
    match d.source {
        Source::Start => format!("{name} was never granted or renewed since the history's start"),
        Source::Op(p) => {
            let o = m.op(p);
            ops.push(o.index);
            let how = match o.outcome {
                Outcome::Ok => "completed",
                Outcome::Info => "stayed indeterminate until",
                _ => "never completed, and the run ended",
            };
            format!(
                "the last lease of {name} that could be in force then was set by p{}'s {} with ttl {} ms (op {}), which {how} {}, so it was surely dead by {}",
                o.process,
                o.func.as_str(),
                d.ttl_ms,
                o.index,
                secs(d.at_ns),
                secs(d.dead_ns)
            )
        }
        Source::Fault(i) => {
            let f = m.fault(i);
            ops.push(f.start_index);
            if let Some(stop) = f.stop_index {
                ops.push(stop);
            }
            let on: Vec<&str> = f
                .value
                .get("nodes")
                .and_then(|n| n.as_array())
                .map(|n| n.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            let what = if on.is_empty() {
                f.f.clone()
            } else {
                format!("{} of {}", f.f, on.join(", "))
            };
            format!(
                "the last fault that could hold back a grant of {name} ({what}, op {}) ended at {}, so any lease it held back (ttl at most {} ms) was surely dead by {}",
                f.start_index,
                secs(d.at_ns),
                d.ttl_ms,
                secs(d.dead_ns)
            )
        }
    }
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// Liveness's injectors.
    pub(crate) const LIVENESS: &[Injector] = &[Injector {
        name: "lock-stuck",
        kind: ViolationKind::LockStuck,
        adapter_shape: false,
        mutate: held_long_after,
    }];

    /// Long after everything, the service still answers held.
    fn held_long_after(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs = grants(&h);
        let g = pick(rng, &gs)?;
        let end = ops.last()?.time_ns;
        let t = end
            + g.ttl_ms * 1_000_000
            + crate::CheckConfig::default().liveness_grace_ns
            + 1_000_000_000;
        let q = fresh_process(ops);
        let new = vec![
            lock_op(
                q,
                t,
                OpType::Invoke,
                F::Acquire,
                &g.lock,
                OpValue::default().with_ttl_ms(g.ttl_ms),
            ),
            lock_op(
                q,
                t + 1_000_000,
                OpType::Fail,
                F::Acquire,
                &g.lock,
                OpValue::default().with_error("held"),
            ),
        ];
        insert(ops, new).into_iter().next().map(|i| vec![i])
    }
}
