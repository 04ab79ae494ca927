//! `lock-stuck`: the service kept answering `held` long after every lease it could have granted
//! was surely dead.
//!
//! Each `held` answer X is judged on its own. T_last(X) is the last moment before X's answer
//! that a grant or renew of the lock could have taken effect: the completion of any ok
//! acquire/renew invoked before X completed, the invoke of any indeterminate one, and the end of
//! any fault (pause, partition, kill until restart, clock, ...) started before X completed,
//! since a fault may hold an effect back until it ends (a fault never stopped never ends).
//! X is a violation when it was invoked later than T_last(X) + ttl_max*(1+drift) + grace.
//! Consecutive violations sharing one T_last are one stuck stretch, one violation.
//! Unavailability (timeouts, `recovering`, 5xx) is not `held`, so it never counts.

use crate::model::{ttl_upper_ns, Func, Model, NO_TARGET};
use crate::text::{secs, token};
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};

pub struct Liveness;

/// What fixed T_last for a held answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Nothing: the history's start.
    Start,
    /// A client op, by position in `Model::ops`.
    Op(usize),
    /// A fault, by position in the fault list.
    Fault(usize),
}

/// One stuck stretch being assembled.
struct Stretch {
    lock: u32,
    source: Source,
    t_last_ns: u64,
    first: usize,
    last: usize,
    count: u64,
}

impl Checker for Liveness {
    fn name(&self) -> &'static str {
        "liveness"
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        // per lock: the longest ttl requested or granted anywhere on it
        let mut ttl_max_ms: Vec<Option<u64>> = vec![None; m.locks.len()];
        // (lock, counts from: invoke, T_last candidate, op)
        let mut effects: Vec<(u32, u64, u64, usize)> = Vec::new();
        // (lock, complete, op)
        let mut held: Vec<(u32, u64, usize)> = Vec::new();
        for (i, o) in m.ops.iter().enumerate() {
            if o.target == NO_TARGET || !matches!(o.func, Func::Acquire | Func::Renew) {
                continue;
            }
            let requested = o.requested_ttl_ms();
            let t = &mut ttl_max_ms[o.target as usize];
            *t = (*t).max(o.ttl_ms()).max(requested);
            match o.outcome {
                Outcome::Ok => effects.push((
                    o.target,
                    o.invoke_ns,
                    o.complete_ns().expect("an ok op has completed"),
                    i,
                )),
                Outcome::Info | Outcome::Pending => {
                    effects.push((o.target, o.invoke_ns, o.invoke_ns, i))
                }
                Outcome::Fail => {
                    if o.func == Func::Acquire && m.error_of(o) == Some("held") {
                        held.push((o.target, o.complete_ns().expect("failed ops completed"), i));
                    }
                }
            }
        }
        effects.sort_unstable();
        held.sort_unstable();
        let grace_ns = cfg.liveness_grace_ns;
        let mut stretches: Vec<Stretch> = Vec::new();
        let mut unjudged_locks = 0u64;
        let mut next = 0;
        let mut lock = None;
        let mut best: (u64, Source) = (0, Source::Start);
        for &(l, done_ns, pos) in &held {
            if lock != Some(l) {
                lock = Some(l);
                best = (0, Source::Start);
                next = effects.partition_point(|e| e.0 < l);
                if ttl_max_ms[l as usize].is_none() {
                    unjudged_locks += 1;
                }
            }
            let Some(ttl_ms) = ttl_max_ms[l as usize] else {
                continue;
            };
            // Bounded by `effects.len()` over the sweep: `next` only moves forward.
            while next < effects.len() && effects[next].0 == l && effects[next].1 < done_ns {
                if effects[next].2 >= best.0 {
                    best = (effects[next].2, Source::Op(effects[next].3));
                }
                next += 1;
            }
            let mut t_last = best;
            if let Some((end, at)) = m.faults.latest_end_started_before(done_ns) {
                if end >= t_last.0 {
                    t_last = (end, Source::Fault(at));
                }
            }
            let allowance_ns = ttl_upper_ns(ttl_ms, m.drift).saturating_add(grace_ns);
            let x = &m.ops[pos];
            if x.invoke_ns <= t_last.0.saturating_add(allowance_ns) {
                continue;
            }
            match stretches.last_mut() {
                Some(s) if s.lock == l && s.source == t_last.1 => {
                    s.last = pos;
                    s.count += 1;
                }
                _ => stretches.push(Stretch {
                    lock: l,
                    source: t_last.1,
                    t_last_ns: t_last.0,
                    first: pos,
                    last: pos,
                    count: 1,
                }),
            }
        }
        if unjudged_locks > 0 {
            out.notes.push(format!(
                "{unjudged_locks} lock(s) answered held but no op on them names a ttl: lock-stuck was not judged there"
            ));
        }
        for s in stretches {
            let ttl_ms = ttl_max_ms[s.lock as usize].unwrap_or(0);
            out.violations.push(stuck(m, cfg, &s, ttl_ms));
        }
        verdict(m, cfg, &mut out);
        out
    }
}

fn stuck(m: &Model, cfg: &CheckConfig, s: &Stretch, ttl_ms: u64) -> Violation {
    let name = m.lock_name(s.lock);
    let first = &m.ops[s.first];
    let last = &m.ops[s.last];
    let mut ops = vec![first.index, last.index];
    let since = match s.source {
        Source::Start => format!(
            "{name} was never granted or renewed since the history's start at {}",
            secs(0)
        ),
        Source::Op(p) => {
            let o = &m.ops[p];
            ops.push(o.index);
            if o.outcome == Outcome::Ok {
                format!(
                    "a grant or renew of {name} could last take effect at {}, when p{}'s {} with {} completed (op {})",
                    secs(s.t_last_ns),
                    o.process,
                    o.func.as_str(),
                    token(o.token()),
                    o.index
                )
            } else {
                format!(
                    "a grant or renew of {name} could last take effect from {}, when p{} invoked an {} that stayed indeterminate (op {})",
                    secs(s.t_last_ns),
                    o.process,
                    o.func.as_str(),
                    o.index
                )
            }
        }
        Source::Fault(i) => {
            let f = &m.faults.list()[i];
            ops.push(f.start_index);
            if let Some(stop) = f.stop_index {
                ops.push(stop);
            }
            format!(
                "the last fault that could hold back a grant of {name} ({}, op {}) ended at {}",
                f.f,
                f.start_index,
                secs(s.t_last_ns)
            )
        }
    };
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
    Violation {
        kind: ViolationKind::LockStuck,
        lock: Some(name.to_string()),
        ops,
        window_ns: [s.t_last_ns, last.complete_or_max()],
        nemesis: Vec::new(),
        explanation: format!(
            "{since}, yet the service answered held to p{}'s acquire invoked at {} (op {}), more than the longest ttl {ttl_ms} ms plus {} grace later{tail}",
            first.process,
            secs(first.invoke_ns),
            first.index,
            secs(cfg.liveness_grace_ns),
        ),
    }
}
