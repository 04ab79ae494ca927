//! Coverage: what a history exercised, counted from the [`Model`] (docs/checkers.md,
//! "Coverage"). A verdict of `valid` says the rules found nothing; these counts say what the
//! rules had to look at: which client stalls ended where, whether waiters stalled, which faults
//! met client ops and grants.
//!
//! Streaming-friendly: one pass over the client ops in invoke order and one over the grants,
//! keeping per-stall records (stalls are nemesis events, at most a few per thousand events)
//! and per-fault-kind intervals, never a per-op vector.

use crate::model::{ClientOp, Func, Model, SpanEnd};
use crate::FxMap;
use history::coverage::{Cell, Coverage, FaultCoverage};
use history::{stall_fields, FaultFamily, FaultOp, Outcome};
use serde_json::Value;

/// One client stall and what the passes learn about it.
#[derive(Debug, Default)]
struct Stall {
    /// Its family's kind: one whose faults stall clients (`Aim::ClientStall`).
    kind: &'static str,
    process: u64,
    /// Interned lock the stall names, `None` when it names none or one the history never used.
    lock: Option<u32>,
    names_lock: bool,
    token: Option<u64>,
    /// What the stall was aimed at (`value.shape`: boundary, next-grant, long, waiter).
    shape: Option<String>,
    /// What the holder was to wake into (`value.wake`: renew, write, release, read).
    planned_wake: Option<String>,
    start_ns: u64,
    /// Its stop, or the history's end when it never stopped.
    end_ns: u64,
    ended: bool,
    /// Position in `Model::ops` of the acquire in flight when the stall began.
    waiting_on: Option<usize>,
    /// The holder's grant (position in `Model::grants`).
    grant: Option<usize>,
    /// The first op the process invoked at or after the stall's end.
    wake: Option<Func>,
    /// Grants of the lock to other processes between the holder's grant and the stall's end.
    others: u64,
    first_other_ns: u64,
}

/// Where a holder stall ended against its lease's lower bound.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Before,
    Between,
    JustPast,
    Past,
    Unknown,
}

/// Where a holder stall ended against other processes' grants of its lock.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Next {
    NoneYet,
    JustAfter,
    Later,
    Unknown,
}

/// Counts the coverage of a digested history. Requested kinds and shapes are those the history
/// shows (faults started, shapes recorded); the caller adds the run's schedule's.
pub fn coverage(m: &Model) -> Coverage {
    let mut cov = Coverage::default();
    let kinds = fault_kinds(m, &mut cov);
    let mut stalls = stalls_of(m);
    ops_pass(m, &kinds, &mut stalls, &mut cov);
    other_grants(m, &mut stalls);
    for s in &stalls {
        tally(m, s, &mut cov);
    }
    crate::exercised::count(m, &mut cov);
    let started: Vec<String> = cov
        .faults
        .iter()
        .filter(|(_, f)| f.started > 0)
        .map(|(k, _)| k.clone())
        .collect();
    for k in started {
        cov.request_fault(&k);
    }
    let shapes: Vec<String> = cov.shapes.keys().cloned().collect();
    for s in shapes {
        cov.request_shape(&s);
    }
    cov
}

/// A fault kind's intervals, merged and sorted, for the ops pass.
struct Kind {
    name: String,
    spans: Vec<(u64, u64)>,
}

/// The nodes a fault names: `nodes`, and the fields its family says name nodes (a partition's
/// `cut` pairs and `clients_cut_from`).
fn nodes_of(v: &Value, family: &FaultFamily) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |n: &Value| {
        if let Some(s) = n.as_str() {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_string());
            }
        }
    };
    let naming = family
        .fields
        .iter()
        .filter(|f| f.names_nodes)
        .map(|f| f.name);
    for key in std::iter::once("nodes").chain(naming) {
        // Strings, or pairs of them (a cut's links).
        for n in v.get(key).and_then(Value::as_array).into_iter().flatten() {
            match n.as_array() {
                Some(pair) => pair.iter().for_each(&mut add),
                None => add(n),
            }
        }
    }
    out
}

/// Counts faults started and nodes hit by kind, and merges each kind's intervals.
fn fault_kinds(m: &Model, cov: &mut Coverage) -> Vec<Kind> {
    let mut kinds: Vec<Kind> = Vec::new();
    // Faults come sorted by start: each kind's spans are appended in order and merged on the go.
    for f in m.faults.list() {
        let Some(name) = crate::faults::opened_kind(&f.f) else {
            continue;
        };
        let c: &mut FaultCoverage = cov.faults.entry(name.to_string()).or_default();
        c.started += 1;
        let family = FaultOp::of(&f.f)
            .opened_family()
            .unwrap_or(&FaultFamily::UNKNOWN);
        for n in nodes_of(&f.value, family) {
            *c.nodes.entry(n).or_insert(0) += 1;
        }
        let k = match kinds.iter().position(|k| k.name == name) {
            Some(i) => &mut kinds[i],
            None => {
                kinds.push(Kind {
                    name: name.to_string(),
                    spans: Vec::new(),
                });
                kinds.last_mut().expect("just pushed")
            }
        };
        match k.spans.last_mut() {
            Some(last) if f.start_ns <= last.1 => last.1 = last.1.max(f.end_ns),
            _ => k.spans.push((f.start_ns, f.end_ns)),
        }
    }
    kinds
}

fn stalls_of(m: &Model) -> Vec<Stall> {
    let lock_ids: FxMap<&str, u32> = m
        .locks
        .iter()
        .enumerate()
        .map(|(i, l)| (l.as_str(), i as u32))
        .collect();
    let mut out = Vec::new();
    for (f, family) in m.faults.list().iter().filter_map(|f| {
        let family = FaultOp::of(&f.f).opened_family()?;
        family.stalls_clients().then_some((f, family))
    }) {
        // A stall that names no client process cannot be placed: it is not counted.
        let Some(process) = f.value.get("process").and_then(Value::as_u64) else {
            continue;
        };
        let lock_name = f.value.get(stall_fields::LOCK).and_then(Value::as_str);
        let text = |k: &str| f.value.get(k).and_then(Value::as_str).map(str::to_string);
        out.push(Stall {
            kind: family.kind,
            process,
            lock: lock_name.and_then(|l| lock_ids.get(l).copied()),
            names_lock: lock_name.is_some(),
            token: f.value.get("token").and_then(Value::as_u64),
            shape: text(stall_fields::SHAPE),
            planned_wake: text(stall_fields::WAKE),
            start_ns: f.start_ns,
            end_ns: f.end_ns,
            ended: f.stop_index.is_some(),
            ..Stall::default()
        });
    }
    out
}

/// What the ops pass keeps per stalled process.
#[derive(Default)]
struct Track {
    last_op: Option<usize>,
    /// The process's latest grant of each lock it was granted, latest last: a client may hold
    /// several locks at once (the bank's two accounts), and a stall names the one it is about.
    /// At most [`TRACKED_LOCKS_MAX`], the oldest dropped first.
    last_grants: Vec<usize>,
    /// Stalls of this process that ended and await the process's next invoke.
    waking: Vec<usize>,
}

/// The most locks whose latest grant is kept per process: far more than a client holds at
/// once (a transfer holds two), and a bound on what one process's track can grow to.
const TRACKED_LOCKS_MAX: usize = 64;

/// One pass over the client ops in invoke order: ops and grants during each fault kind, long
/// waits, and for each stall the op in flight when it began, the holder's grant and the op it
/// woke into.
fn ops_pass(m: &Model, kinds: &[Kind], stalls: &mut [Stall], cov: &mut Coverage) {
    let mut tracks: FxMap<u64, Track> = FxMap::default();
    for s in stalls.iter() {
        tracks.entry(s.process).or_default();
    }
    // Stalls come sorted by start (the fault list is); by end for the wake-ups.
    let mut by_end: Vec<usize> = (0..stalls.len()).filter(|&i| stalls[i].ended).collect();
    by_end.sort_by_key(|&i| (stalls[i].end_ns, i));
    let (mut next_start, mut next_end) = (0, 0);
    // The first span of each kind that ends at or after the current invoke: invokes ascend, so
    // it only moves forward.
    let mut cursor = vec![0usize; kinds.len()];
    let mut during = vec![(0u64, 0u64); kinds.len()];
    let mut grant = 0usize;
    for (pos, op) in m.ops.iter().enumerate() {
        while next_start < stalls.len() && stalls[next_start].start_ns < op.invoke_ns {
            began(m, &tracks, &mut stalls[next_start]);
            next_start += 1;
        }
        while next_end < by_end.len() && stalls[by_end[next_end]].end_ns <= op.invoke_ns {
            let i = by_end[next_end];
            if let Some(t) = tracks.get_mut(&stalls[i].process) {
                t.waking.push(i);
            }
            next_end += 1;
        }
        let is_grant =
            op.func == Func::Acquire && op.outcome == Outcome::Ok && op.target != crate::NO_TARGET;
        if !tracks.is_empty() {
            if let Some(t) = tracks.get_mut(&op.process) {
                for i in t.waking.drain(..) {
                    stalls[i].wake = Some(op.func);
                }
                t.last_op = Some(pos);
                if is_grant {
                    let lock = m.grants[grant].lock;
                    t.last_grants.retain(|&g| m.grants[g].lock != lock);
                    if t.last_grants.len() == TRACKED_LOCKS_MAX {
                        t.last_grants.remove(0);
                    }
                    t.last_grants.push(grant);
                }
            }
        }
        let done_ns = op.complete_ns().unwrap_or(m.end_time_ns);
        for (k, kind) in kinds.iter().enumerate() {
            let c = &mut cursor[k];
            while *c < kind.spans.len() && kind.spans[*c].1 < op.invoke_ns {
                *c += 1;
            }
            if *c < kind.spans.len() && kind.spans[*c].0 <= done_ns {
                during[k].0 += 1;
                during[k].1 += u64::from(is_grant);
            }
        }
        if op.func == Func::Acquire {
            long_wait(op, cov);
        }
        grant += usize::from(is_grant);
    }
    for s in &mut stalls[next_start..] {
        began(m, &tracks, s);
    }
    for (kind, (ops, grants)) in kinds.iter().zip(during) {
        let c = cov.faults.entry(kind.name.clone()).or_default();
        c.ops_during = ops;
        c.grants_during = grants;
    }
}

/// Counts an acquire that waited longer than the lease it asked for.
fn long_wait(op: &ClientOp, cov: &mut Coverage) {
    let (Some(done), Some(ttl_ms)) = (op.complete_ns(), op.requested_ttl_ms().or(op.ttl_ms()))
    else {
        return;
    };
    if done - op.invoke_ns <= ttl_ms.saturating_mul(1_000_000) {
        return;
    }
    if op.outcome == Outcome::Ok {
        cov.waits.granted += 1;
    } else {
        cov.waits.not_granted += 1;
    }
}

/// Places a stall when its start is reached: a waiter stall if its process's last op is an
/// acquire still in flight then, else a holder stall on its process's latest grant (which must
/// be of the lock and token the stall names, when it names them).
fn began(m: &Model, tracks: &FxMap<u64, Track>, s: &mut Stall) {
    let Some(t) = tracks.get(&s.process) else {
        return;
    };
    if let Some(pos) = t.last_op {
        let op = &m.ops[pos];
        if op.func == Func::Acquire && op.complete_ns().is_none_or(|c| c > s.start_ns) {
            s.waiting_on = Some(pos);
            return;
        }
    }
    // The latest grant of the lock the stall names, else the latest of any lock.
    let latest = match s.names_lock {
        true => t
            .last_grants
            .iter()
            .rev()
            .find(|&&g| s.lock == Some(m.grants[g].lock)),
        false => t.last_grants.last(),
    };
    s.grant = latest
        .copied()
        .filter(|&g| s.token.is_none_or(|t| m.grants[g].token == Some(t)));
}

/// Counts, for each holder stall with a known grant, the grants of its lock to other processes
/// that completed after the holder's grant and no later than the stall's end. One pass over the
/// grants; each lock's windows sorted by start with a running maximum of their ends, so a grant
/// looks only at the windows that can contain it.
fn other_grants(m: &Model, stalls: &mut [Stall]) {
    // lock -> (from, to, stall), sorted by from; and the running max of `to`
    let mut windows: Vec<Vec<(u64, u64, usize)>> = vec![Vec::new(); m.locks.len()];
    for (i, s) in stalls.iter().enumerate() {
        if let (Some(g), None) = (s.grant, s.waiting_on) {
            let g = &m.grants[g];
            windows[g.lock as usize].push((g.complete_ns, s.end_ns, i));
        }
    }
    if windows.iter().all(Vec::is_empty) {
        return;
    }
    let reach: Vec<Vec<u64>> = windows
        .iter_mut()
        .map(|w| {
            w.sort_unstable();
            w.iter()
                .scan(0u64, |max, &(_, to, _)| {
                    *max = (*max).max(to);
                    Some(*max)
                })
                .collect()
        })
        .collect();
    for g in &m.grants {
        let (w, reach) = (&windows[g.lock as usize], &reach[g.lock as usize]);
        let c = g.complete_ns;
        let mut j = w.partition_point(|x| x.0 < c);
        // Bounded by the windows of the lock that start before `c`.
        while j > 0 && reach[j - 1] >= c {
            j -= 1;
            let (_, to, i) = w[j];
            let s = &mut stalls[i];
            if c <= to && g.process != s.process {
                if s.others == 0 || c < s.first_other_ns {
                    s.first_other_ns = c;
                }
                s.others += 1;
            }
        }
    }
}

/// Where holder stall `s` ended against its lease as the lease model had it when the stall
/// began (only the ops invoked by then count): before the lower bound, between the bounds, or
/// past the upper bound, and the ttl of that lease.
fn bound_of(m: &Model, s: &Stall) -> (Bound, Option<u64>) {
    let Some(g) = s.grant.map(|g| &m.grants[g]) else {
        return (Bound::Unknown, None);
    };
    // A session's grant, or a transaction's (no ttl at all): no lease its holder counts.
    if m.is_session(g) || g.ttl_ms.is_none() {
        return session_bound_of(m, g, s);
    }
    let (lb, set_by) = m.span_end_until(g, g.invoke_ns, s.start_ns);
    let ttl_ms = match set_by {
        SpanEnd::Lease(Some(pos)) => m.ops[pos as usize].ttl_ms().or(g.ttl_ms),
        _ => g.ttl_ms,
    };
    let Some(ttl_ms) = ttl_ms else {
        return (Bound::Unknown, None);
    };
    let bound = match surely_dead_by(m, g, s.start_ns) {
        _ if s.end_ns < lb => Bound::Before,
        Some(ub) if s.end_ns >= ub => {
            // a tenth of the ttl, in ns
            if s.end_ns - ub <= ttl_ms.saturating_mul(100_000) {
                Bound::JustPast
            } else {
                Bound::Past
            }
        }
        // Past the lower bound, short of the upper (or the upper is unknown: an op that never
        // completed may set the lease at any time).
        _ => Bound::Between,
    };
    (bound, Some(ttl_ms))
}

/// [`bound_of`] for a grant that is no lease (model item 9: a session's or a transaction's):
/// its holder counts no lease, so what a stall must outlast to reach the state where bugs live
/// is the server's timeout of the session (or of the idle transaction), the ttl the client
/// asked for, counted from its last op the service confirmed before the stall (its acquire,
/// or an ok renew: the check of a live session). Without a requested ttl, unknown.
fn session_bound_of(m: &Model, g: &crate::Grant, s: &Stall) -> (Bound, Option<u64>) {
    let mut last = &m.ops[g.op];
    for &pos in &g.epoch_ops {
        let op = &m.ops[pos as usize];
        if op.invoke_ns > s.start_ns {
            break;
        }
        if op.func == Func::Renew && op.outcome == Outcome::Ok {
            last = op;
        }
    }
    let (Some(ttl_ms), Some(done_ns)) = (last.requested_ttl_ms(), last.complete_ns()) else {
        return (Bound::Unknown, None);
    };
    let lb = last.invoke_ns.saturating_add(m.drift.lower_ns(ttl_ms));
    let ub = done_ns.saturating_add(m.drift.upper_ns(ttl_ms));
    let bound = if s.end_ns < lb {
        Bound::Before
    } else if s.end_ns < ub {
        Bound::Between
    } else if s.end_ns - ub <= ttl_ms.saturating_mul(100_000) {
        Bound::JustPast
    } else {
        Bound::Past
    };
    (bound, Some(ttl_ms))
}

/// When grant `g`'s lease was surely over, counting the ops invoked by `cutoff_ns`: the
/// completion plus `ttl*(1+drift)` of the last op that could have set it (the acquire, an ok
/// renew, which replaces it; an indeterminate renew may have applied, so the later of the two),
/// as `Grant::surely_dead_ns` counts it for the whole epoch. A release may end it sooner, never
/// later, so it does not count.
fn surely_dead_by(m: &Model, g: &crate::Grant, cutoff_ns: u64) -> Option<u64> {
    let mut dead = m.surely_dead_if_applied(&m.ops[g.op]);
    for &pos in &g.epoch_ops {
        let op = &m.ops[pos as usize];
        if op.invoke_ns > cutoff_ns {
            break;
        }
        if op.func != Func::Renew {
            continue;
        }
        let ttl = op.ttl_ms().or(op.requested_ttl_ms()).or(g.ttl_ms);
        let set = match (op.complete_ns(), ttl) {
            (Some(c), Some(t)) => Some(c.saturating_add(m.drift.upper_ns(t))),
            _ => None,
        };
        dead = match op.lease_outcome() {
            Outcome::Ok => set,
            Outcome::Fail => dead,
            Outcome::Info | Outcome::Pending => dead.zip(set).map(|(a, b)| a.max(b)),
        };
    }
    dead
}

fn next_of(s: &Stall, ttl_ms: Option<u64>) -> Next {
    if s.grant.is_none() {
        return Next::Unknown;
    }
    match (s.others, ttl_ms) {
        (0, _) => Next::NoneYet,
        (1, Some(t)) if s.end_ns - s.first_other_ns < t.saturating_mul(1_000_000) => {
            Next::JustAfter
        }
        (1, None) => Next::Unknown,
        _ => Next::Later,
    }
}

/// Whether a stall recorded with `shape` (an aim or a wake-up op, as `--client-faults` names
/// them) reached what the shape aims at; any other name counts every stall recorded with it.
fn reached(shape: &str, s: &Stall, bound: Bound, next: Next, lapsed: bool) -> bool {
    // The lease may have ended (past its lower bound) when the holder woke.
    let past = matches!(bound, Bound::Between | Bound::JustPast | Bound::Past);
    let holder = s.waiting_on.is_none();
    match shape {
        "boundary" => holder && bound == Bound::JustPast,
        "next-grant" => holder && next == Next::JustAfter,
        "long" => holder && next == Next::Later,
        "renew" => holder && past && s.wake == Some(Func::Renew),
        "write" => holder && past && s.wake == Some(Func::Write),
        "release" => holder && past && s.wake == Some(Func::Release),
        "read" => holder && past && s.wake == Some(Func::Read),
        "waiter" => !holder && lapsed,
        _ => true,
    }
}

fn tally(m: &Model, s: &Stall, cov: &mut Coverage) {
    cov.stalls += 1;
    let (mut bound, mut next, mut lapsed) = (Bound::Unknown, Next::Unknown, false);
    if let Some(pos) = s.waiting_on {
        let op = &m.ops[pos];
        let w = &mut cov.waiter;
        w.count += 1;
        let ttl = op.requested_ttl_ms().or(op.ttl_ms());
        lapsed = ttl.is_some_and(|t| s.end_ns - s.start_ns > m.drift.upper_ns(t));
        if lapsed {
            w.lease_lapsed += 1;
            if op.outcome == Outcome::Ok {
                w.granted_after_lapse += 1;
            }
        } else {
            w.lease_outlived += 1;
        }
    } else {
        let h = &mut cov.holder;
        h.count += 1;
        let w = &mut h.wake_up;
        *match s.wake.filter(|_| s.ended) {
            Some(Func::Renew) => &mut w.renew,
            Some(Func::Write) => &mut w.write,
            Some(Func::Release) => &mut w.release,
            Some(Func::Read) => &mut w.read,
            Some(Func::Acquire) => &mut w.acquire,
            None => &mut w.none,
        } += 1;
        let ttl;
        (bound, ttl) = bound_of(m, s);
        next = next_of(s, ttl);
        let b = &mut h.lease_bound;
        *match bound {
            Bound::Before => &mut b.before,
            Bound::Between => &mut b.between,
            Bound::JustPast => &mut b.just_past,
            Bound::Past => &mut b.past,
            Bound::Unknown => &mut b.unknown,
        } += 1;
        let n = &mut h.next_grant;
        *match next {
            Next::NoneYet => &mut n.none_yet,
            Next::JustAfter => &mut n.just_after,
            Next::Later => &mut n.later,
            Next::Unknown => &mut n.unknown,
        } += 1;
    }
    for shape in [&s.shape, &s.planned_wake].into_iter().flatten() {
        let c = cov.shapes.entry(shape.clone()).or_default();
        c.stalls += 1;
        c.reached += u64::from(reached(shape, s, bound, next, lapsed));
    }
    // The stall's cell: its aim and wake-up op together, exercised when both reached what
    // they aim at (a waiter has no wake-up op). A stall recorded before shapes has no cell.
    if let Some(aim) = &s.shape {
        let wake = s.planned_wake.clone().filter(|_| aim != "waiter");
        let exercised = reached(aim, s, bound, next, lapsed)
            && wake
                .as_deref()
                .is_none_or(|w| reached(w, s, bound, next, lapsed));
        cov.count_cell(
            Cell {
                kind: s.kind.to_string(),
                variant: aim.clone(),
                wake: wake.unwrap_or_default(),
                ..Cell::default()
            },
            exercised,
        );
    }
}
