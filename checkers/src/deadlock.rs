//! `deadlock`: clients that each held a lock and waited for the next one's, in a cycle, with
//! nothing breaking the cycle.
//!
//! The wait-for graph at an instant `t` has an edge `p -> q`, labelled with lock `L`, when at
//! `t` process `p` *surely waits* for `L` (its acquire of `L` was invoked at or before `t` and
//! had not completed: a process has one op in flight, so it can neither release nor renew
//! meanwhile) and another process `q` *surely holds* `L` (`t` is inside one of the definite
//! hold segments the model proves for `q`'s grant of `L`: from its ok until its lease's lower
//! bound or the first release it sent). A cycle in that graph at `t` is a moment when every
//! client in it waits for the next; it stands until the first of its waits ends (answered or
//! given up) or the first of its holds stops being definite (a lease that may have lapsed).
//!
//! A cycle is a `deadlock` when it stood past its deadline: the liveness grace past the
//! latest of (the instant the cycle formed, and each of its waits' invoke plus the `wait_ms`
//! it asked for, when it recorded one). A correct service answers a wait within its
//! `wait_ms`; past that and the grace, no wait was answered and no lease lapsed, so nothing
//! the service did was breaking it. A cycle that ended before its deadline (a refusal, a grant
//! after a lease lapsed, a client that gave up, the end of the history) is no violation; the
//! checker's notes count them by how they ended.
//!
//! Bounded in memory: only acquires whose process surely held some lock while waiting can be
//! in a cycle (each member is waited for), so edges are built for those alone; the sweep keeps
//! only the edges live at the current instant, and the cycles it has judged (at most
//! [`CYCLES_MAX`]).

use crate::inject::Injector;
use crate::model::FxSet;
use crate::model::{ClientOp, Func, Grant, Model, SpanEnd, NO_TARGET};
use crate::text::secs;
use crate::{verdict, CheckConfig, CheckOutput, Checker, FxMap};
use history::{Outcome, Validity, Violation, ViolationKind};
use petgraph::algo::{all_simple_paths, tarjan_scc};
use petgraph::graphmap::DiGraphMap;

pub struct Deadlock;

/// Cycles judged per history (violations and broken ones): past it the rest are counted in a
/// note, not judged one by one.
pub const CYCLES_MAX: usize = 10_000;

/// A definite hold segment of a grant, with what a sentence says of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seg {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) process: u64,
    pub(crate) lock: u32,
    /// The grant's number (its place in `Model::grants`).
    pub(crate) grant: usize,
    /// The index of the grant's acquire.
    pub(crate) grant_index: u64,
    /// What ended it: a release (its op's index), else the lease's lower bound.
    pub(crate) released_by: Option<u64>,
}

impl Seg {
    /// The definite holds of grant number `g`; `index` gives an op's index by position.
    pub(crate) fn of_grant(g: usize, grant: &Grant, index: impl Fn(usize) -> u64) -> Vec<Seg> {
        (grant.holds.iter())
            .map(|s| {
                debug_assert!(s.start_ns < s.end_ns, "a definite hold is never empty");
                Seg {
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    process: grant.process,
                    lock: grant.lock,
                    grant: g,
                    grant_index: index(grant.op),
                    released_by: match s.end {
                        SpanEnd::Release(pos) => Some(index(pos as usize)),
                        SpanEnd::Lease(_) => None,
                    },
                }
            })
            .collect()
    }
}

/// An acquire, as the wait-for rules read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wait {
    /// Its position (what a cycle is told apart by).
    pub(crate) pos: usize,
    pub(crate) index: u64,
    pub(crate) process: u64,
    pub(crate) lock: u32,
    pub(crate) invoke_ns: u64,
    /// Its completion, or the history's end when it never completed.
    pub(crate) end_ns: u64,
    pub(crate) outcome: Outcome,
    /// Its error's id (`NO_ERROR` for none).
    pub(crate) error: u32,
    /// The `wait_ms` it asked for, if it said.
    pub(crate) wait_ms: Option<u64>,
}

impl Wait {
    /// Acquire `op` at `pos`, for a history that ends at `end_ns`.
    pub(crate) fn of(pos: usize, op: &ClientOp, wait_ms: Option<u64>, end_ns: u64) -> Wait {
        Wait {
            pos,
            index: op.index,
            process: op.process,
            lock: op.target,
            invoke_ns: op.invoke_ns,
            end_ns: op.complete_ns().unwrap_or(end_ns),
            outcome: op.outcome,
            error: op.error,
            wait_ms,
        }
    }
}

/// What the sentences read of a history beside the records: names.
pub(crate) trait Names {
    fn lock(&self, id: u32) -> &str;
    fn error(&self, id: u32) -> Option<&str>;
}

impl Names for Model {
    fn lock(&self, id: u32) -> &str {
        self.lock_name(id)
    }
    fn error(&self, id: u32) -> Option<&str> {
        self.errors.get(id as usize).map(String::as_str)
    }
}

/// Segments grouped by a key (a lock, a process), each group sorted by start, with the
/// running maximum of ends so an overlap query can stop early.
struct Groups {
    segs: Vec<Seg>,
    max_end: Vec<u64>,
    /// key -> range in `segs`.
    ranges: FxMap<u64, (usize, usize)>,
}

impl Groups {
    fn new(mut segs: Vec<Seg>, key: impl Fn(&Seg) -> u64) -> Groups {
        segs.sort_by_key(|s| (key(s), s.start_ns, s.grant));
        let mut max_end = Vec::with_capacity(segs.len());
        let mut ranges = FxMap::default();
        let mut i = 0;
        while i < segs.len() {
            let k = key(&segs[i]);
            let from = i;
            let mut run = 0;
            while i < segs.len() && key(&segs[i]) == k {
                run = run.max(segs[i].end_ns);
                max_end.push(run);
                i += 1;
            }
            ranges.insert(k, (from, i));
        }
        Groups {
            segs,
            max_end,
            ranges,
        }
    }

    /// The segments of group `k` that overlap `[from, to)`.
    fn overlapping(&self, k: u64, from: u64, to: u64) -> impl Iterator<Item = &Seg> {
        let (a, b) = self.ranges.get(&k).copied().unwrap_or((0, 0));
        let group = &self.segs[a..b];
        let end = group.partition_point(|s| s.start_ns < to);
        // Walking back from the last one starting before `to`: once no earlier segment ends
        // after `from`, none overlaps.
        let max_end = &self.max_end[a..b];
        (0..end)
            .rev()
            .take_while(move |&j| max_end[j] > from)
            .map(move |j| &group[j])
            .filter(move |s| s.end_ns > from)
    }
}

/// `p -> q`: `p`'s acquire `wait` of `lock` surely waits while `q`'s segment `seg` surely
/// holds it, over `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Edge {
    from: u64,
    to: u64,
    wait: Wait,
    lock: u32,
    seg: Seg,
    start_ns: u64,
    end_ns: u64,
}

impl Edge {
    /// The order the sweep takes edges in.
    pub(crate) fn key(&self) -> (u64, u64, usize, usize) {
        (self.start_ns, self.end_ns, self.wait.pos, self.seg.grant)
    }
}

/// The hull of `wait`'s process's holds inside the wait (`holds`: that process's, overlapping
/// it), if it held anything meanwhile: only such a wait can be waited for in a cycle.
pub(crate) fn hull<'a>(wait: &Wait, holds: impl Iterator<Item = &'a Seg>) -> Option<(u64, u64)> {
    let (from, to) = (wait.invoke_ns, wait.end_ns);
    let mut hull: Option<(u64, u64)> = None;
    for s in holds {
        let (a, b) = (s.start_ns.max(from), s.end_ns.min(to));
        hull = Some(hull.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
    }
    hull
}

/// The edge from `wait` to the other process's hold `seg` of its lock, if they overlap.
pub(crate) fn edge(wait: &Wait, seg: &Seg) -> Option<Edge> {
    // The hull only picks the holds worth an edge; the edge itself spans the whole time `p`
    // waits while `q` holds (a cycle's other edges cut it to when `p` held too).
    let (from, to) = (
        seg.start_ns.max(wait.invoke_ns),
        seg.end_ns.min(wait.end_ns),
    );
    (seg.process != wait.process && from < to).then_some(Edge {
        from: wait.process,
        to: seg.process,
        wait: *wait,
        lock: wait.lock,
        seg: *seg,
        start_ns: from,
        end_ns: to,
    })
}

/// The wait-for edges that can be part of a cycle, and whether any client waited for a lock
/// while it surely held another (without which there is no edge to look for).
fn edges(m: &Model) -> (Vec<Edge>, bool) {
    let mut segs = Vec::new();
    for (gi, g) in m.grants.iter().enumerate() {
        segs.extend(Seg::of_grant(gi, g, |pos| m.ops[pos].index));
    }
    // One copy of the segments at a time: a history of single-lock holders (every other
    // workload) has no holding waiter, and stops before the second grouping.
    let by_process = Groups::new(segs, |s| s.process);
    // Acquires whose process surely held some lock while they waited, with the hull of those
    // holds inside the wait: only they can be waited for in a cycle.
    let mut waiters: Vec<(Wait, u64, u64)> = Vec::new();
    for (pos, o) in m.ops.iter().enumerate() {
        if o.func != Func::Acquire || o.target == NO_TARGET {
            continue;
        }
        let w = Wait::of(pos, o, m.wait_ms_of(pos), m.end_time_ns);
        // Another lock: a process's hold of the lock it asks for again (its lease still
        // standing) is no lock it keeps from the others; with one lock, only a double grant
        // makes an edge of it, and a cycle of such edges is that violation, not a deadlock.
        let held = by_process.overlapping(o.process, w.invoke_ns, w.end_ns);
        if let Some((a, b)) = hull(&w, held.filter(|s| s.lock != w.lock)) {
            waiters.push((w, a, b));
        }
    }
    if waiters.is_empty() {
        return (Vec::new(), false);
    }
    let by_lock = Groups::new(by_process.segs, |s| u64::from(s.lock));
    // process -> hulls of its holding waits, for the filter on an edge's far end.
    let mut holding: FxMap<u64, Vec<(u64, u64)>> = FxMap::default();
    for &(w, a, b) in &waiters {
        holding.entry(w.process).or_default().push((a, b));
    }
    let mut out = Vec::new();
    for (w, a, b) in &waiters {
        for s in by_lock.overlapping(u64::from(w.lock), *a, *b) {
            let Some(e) = edge(w, s) else { continue };
            // An edge to a process that held no lock while it waited cannot close a cycle
            // (a reading the streamed sweep does without: it changes no cycle).
            let waits_too = holding
                .get(&s.process)
                .is_some_and(|hs| hs.iter().any(|&(x, y)| x < e.end_ns && y > e.start_ns));
            if waits_too {
                out.push(e);
            }
        }
    }
    out.sort_by_key(Edge::key);
    (out, true)
}

/// A cycle of the wait-for graph: its edges in order (each edge's `to` is the next's `from`).
struct Cycle {
    edges: Vec<Edge>,
    formed_ns: u64,
    ended_ns: u64,
    /// The edge whose end ended the cycle.
    ender: Edge,
    deadline_ns: u64,
}

impl Cycle {
    fn of(grace_ns: u64, mut edges: Vec<Edge>) -> Cycle {
        // Told from the wait that began first, so the sentence reads in time order.
        if let Some(first) = (0..edges.len()).min_by_key(|&k| (edges[k].wait.invoke_ns, k)) {
            edges.rotate_left(first);
        }
        let formed_ns = edges.iter().map(|e| e.start_ns).max().unwrap_or(0);
        let ender = *edges
            .iter()
            .min_by_key(|e| (e.end_ns, e.wait.pos))
            .expect("a cycle has edges");
        let answered_by = edges
            .iter()
            .map(|e| {
                (e.wait.invoke_ns)
                    .saturating_add(e.wait.wait_ms.unwrap_or(0).saturating_mul(1_000_000))
            })
            .max()
            .unwrap_or(0);
        Cycle {
            formed_ns,
            ended_ns: ender.end_ns,
            ender,
            deadline_ns: formed_ns.max(answered_by).saturating_add(grace_ns),
            edges,
        }
    }

    fn is_deadlock(&self) -> bool {
        self.ended_ns >= self.deadline_ns
    }

    /// The cycle's identity: each wait in it and whom it waited for (judged once, however
    /// the holds are cut into segments).
    fn key(&self) -> Vec<(usize, u64)> {
        let mut k: Vec<(usize, u64)> = self.edges.iter().map(|e| (e.wait.pos, e.to)).collect();
        k.sort_unstable();
        k
    }
}

/// How a cycle ended, for its sentence and the notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ending {
    Refused,
    Granted,
    LeaseMayLapse,
    HolderMayRelease,
    GaveUp,
    HistoryEnded,
}

impl Ending {
    fn words(self) -> &'static str {
        match self {
            Ending::Refused => "a refusal",
            Ending::Granted => "a grant",
            Ending::LeaseMayLapse => "a lease that may have lapsed",
            Ending::HolderMayRelease => "a release",
            Ending::GaveUp => "a client that gave up",
            Ending::HistoryEnded => "the end of the history",
        }
    }
}

fn ending(names: &impl Names, e: &Edge) -> (Ending, String) {
    let o = &e.wait;
    let lock = names.lock(e.lock);
    if e.end_ns == o.end_ns {
        let err = names.error(o.error).unwrap_or("no error given");
        return match o.outcome {
            Outcome::Ok => (
                Ending::Granted,
                format!(
                    "the service granted {lock} to p{} at {} (op {})",
                    o.process,
                    secs(e.end_ns),
                    o.index
                ),
            ),
            Outcome::Fail => (
                Ending::Refused,
                format!(
                    "the service refused p{}'s acquire of {lock} at {} (op {}: {err})",
                    o.process,
                    secs(e.end_ns),
                    o.index
                ),
            ),
            Outcome::Info => (
                Ending::GaveUp,
                format!(
                    "p{} gave up waiting for {lock} at {} (op {}: {err})",
                    o.process,
                    secs(e.end_ns),
                    o.index
                ),
            ),
            Outcome::Pending => (
                Ending::HistoryEnded,
                format!(
                    "the history ended at {} with p{} still waiting for {lock}",
                    secs(e.end_ns),
                    o.process
                ),
            ),
        };
    }
    match e.seg.released_by {
        Some(index) => (
            Ending::HolderMayRelease,
            format!(
                "p{} may have released {lock} from {} (op {index})",
                e.to,
                secs(e.end_ns),
            ),
        ),
        None => (
            Ending::LeaseMayLapse,
            format!(
                "p{}'s lease on {lock} may have lapsed from {} (its lower bound)",
                e.to,
                secs(e.end_ns)
            ),
        ),
    }
}

/// Simple cycles looked for through each edge that just became live: past it, the rest are
/// left (a wait-for graph of a few clients has a handful).
const CYCLES_PER_EDGE_MAX: usize = 64;

/// Finds, among the edges live at one instant, the simple cycles through the edges that just
/// became live (a cycle that forms now has one): for each such edge `u -> v`, every simple
/// path back from `v` to `u` inside their strongly connected component.
fn cycles_at(live: &[Edge], fresh_from: usize) -> Vec<Vec<Edge>> {
    // Between two processes, the edge that lasts longest: `p` waits for `q` while any of
    // them stands.
    let mut g: DiGraphMap<u64, usize> = DiGraphMap::new();
    for (i, e) in live.iter().enumerate() {
        match g.edge_weight(e.from, e.to).copied() {
            Some(j) if live[j].end_ns >= e.end_ns => {}
            _ => {
                g.add_edge(e.from, e.to, i);
            }
        }
    }
    let mut out = Vec::new();
    for scc in tarjan_scc(&g) {
        if scc.len() < 2 {
            continue;
        }
        let members: FxSet<u64> = scc.iter().copied().collect();
        for e in live.iter().skip(fresh_from) {
            if !members.contains(&e.from) || !members.contains(&e.to) {
                continue;
            }
            let Some(&first) = g.edge_weight(e.from, e.to) else {
                continue;
            };
            let paths =
                all_simple_paths::<Vec<u64>, _, std::hash::RandomState>(&g, e.to, e.from, 0, None);
            for path in paths.take(CYCLES_PER_EDGE_MAX) {
                let mut cycle = vec![live[first]];
                cycle.extend(path.windows(2).map(|w| live[g[(w[0], w[1])]]));
                out.push(cycle);
            }
        }
    }
    out
}

/// The sweep over the edges in start order: the edges live at the current instant, and the
/// cycles judged so far (each once, by its waits), in the order they formed.
#[derive(Default)]
pub(crate) struct Sweep {
    live: Vec<Edge>,
    seen: FxSet<Vec<(usize, u64)>>,
    cycles: Vec<Cycle>,
    pub(crate) unjudged: u64,
}

impl Sweep {
    /// The edges that start at instant `t`, in [`Edge::key`] order: every edge that starts
    /// before `t` was given before.
    pub(crate) fn instant(&mut self, grace_ns: u64, t: u64, starting: &[Edge]) {
        self.live.retain(|e| e.end_ns > t);
        let fresh_from = self.live.len();
        self.live.extend_from_slice(starting);
        for c in cycles_at(&self.live, fresh_from) {
            let c = Cycle::of(grace_ns, c);
            if c.ended_ns <= c.formed_ns {
                continue;
            }
            let key = c.key();
            if self.seen.contains(&key) {
                continue;
            }
            if self.seen.len() >= CYCLES_MAX {
                self.unjudged += 1;
                continue;
            }
            self.seen.insert(key);
            self.cycles.push(c);
        }
    }

    /// Sweeps `edges`, sorted by [`Edge::key`], every edge starting before the first of them
    /// having been swept.
    pub(crate) fn all(&mut self, grace_ns: u64, edges: &[Edge]) {
        // Bounded by the edges: each pass takes at least one.
        let mut i = 0;
        while i < edges.len() {
            let t = edges[i].start_ns;
            let n = edges[i..].partition_point(|e| e.start_ns == t);
            self.instant(grace_ns, t, &edges[i..i + n]);
            i += n;
        }
    }

    /// The deadlocks among the cycles judged from the `from`th on, and how many were judged.
    pub(crate) fn deadlocks_from(
        &self,
        from: usize,
        names: &impl Names,
    ) -> (Vec<Violation>, usize) {
        let found = (self.cycles.get(from..).into_iter().flatten())
            .filter(|c| c.is_deadlock())
            .map(|c| violation(names, c))
            .collect();
        (found, self.cycles.len())
    }

    /// The checker's violations, notes and figures from the cycles judged, before its verdict.
    pub(crate) fn output(&self, names: &impl Names) -> CheckOutput {
        output(names, &self.cycles, self.unjudged)
    }
}

/// The `deadlock` of cycle `c`, one that stood past its deadline.
fn violation(names: &impl Names, c: &Cycle) -> Violation {
    let mut ops: Vec<u64> = Vec::new();
    for e in &c.edges {
        ops.push(e.wait.index);
        ops.push(e.seg.grant_index);
    }
    // Named by the lock the first waiter waited for.
    Violation {
        kind: ViolationKind::Deadlock,
        lock: Some(names.lock(c.edges[0].lock).to_string()),
        ops,
        window_ns: [c.formed_ns, c.ended_ns],
        nemesis: Vec::new(),
        explanation: sentence(names, c),
        cycle: c
            .edges
            .iter()
            .map(|e| history::CycleEdge {
                from: format!("p{}", e.from),
                to: format!("p{}", e.to),
                label: format!("waits for {}", names.lock(e.lock)),
            })
            .collect(),
    }
}

/// The witness sentence: who held what and waited for what, from when, and how it ended.
fn sentence(names: &impl Names, c: &Cycle) -> String {
    let n = c.edges.len();
    let mut parts = Vec::new();
    for (k, e) in c.edges.iter().enumerate() {
        // What `e.from` held: the lock the previous edge waits for.
        let before = &c.edges[(k + n - 1) % n];
        let w = &e.wait;
        parts.push(format!(
            "p{} held {} (op {}) and waited for {} from {} (op {})",
            e.from,
            names.lock(before.lock),
            before.seg.grant_index,
            names.lock(e.lock),
            secs(w.invoke_ns),
            w.index
        ));
    }
    let (_, how) = ending(names, &c.ender);
    format!(
        "{}; no wait ended and no hold lapsed from {} until {}, past {} (every wait's wait_ms \
         plus the liveness grace): the cycle ended when {how}",
        parts.join("; "),
        secs(c.formed_ns),
        secs(c.ended_ns),
        secs(c.deadline_ns)
    )
}

/// The batch's sweep of a whole model, and whether any client waited for a lock while it held
/// another: what [`Deadlock`] judges, for the tests to compare the streamed sweep with.
#[cfg(test)]
pub(crate) fn batch_sweep(m: &Model, grace_ns: u64) -> (CheckOutput, bool) {
    let (edges, waited) = edges(m);
    let mut sweep = Sweep::default();
    sweep.all(grace_ns, &edges);
    (sweep.output(m), waited)
}

impl Checker for Deadlock {
    fn injectors(&self) -> &'static [Injector] {
        injectors::DEADLOCK
    }

    fn name(&self) -> &'static str {
        "deadlock"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::Deadlock]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let (edges, waited) = edges(m);
        let mut sweep = Sweep::default();
        sweep.all(cfg.liveness_grace_ns, &edges);
        let mut out = sweep.output(m);
        let unjudged = sweep.unjudged;
        verdict(m, cfg, &mut out);
        out.nothing_to_judge(waited, || NO_WAIT.to_string());
        if unjudged > 0 && out.valid == Validity::Valid {
            // A cycle not judged may be the deadlock.
            out.valid = Validity::Unknown;
        }
        out
    }
}

/// Why `deadlock` judged nothing.
pub(crate) const NO_WAIT: &str =
    "no client waited for a lock while it held another: one lock at a time cannot deadlock";

/// The violations, notes and figures of the cycles judged, `unjudged` more past the limit.
fn output(names: &impl Names, cycles: &[Cycle], unjudged: u64) -> CheckOutput {
    let mut out = CheckOutput::new();
    // How the cycles that were no deadlock ended, and the first of each kind.
    let mut broken: Vec<(Ending, u64, String)> = Vec::new();
    for c in cycles {
        if c.is_deadlock() {
            out.violations.push(violation(names, c));
            continue;
        }
        let (how, words) = ending(names, &c.ender);
        match broken.iter_mut().find(|b| b.0 == how) {
            Some(b) => b.1 += 1,
            None => broken.push((how, 1, words)),
        }
    }
    if !broken.is_empty() {
        broken.sort();
        let total: u64 = broken.iter().map(|b| b.1).sum();
        let list: Vec<String> = broken
            .iter()
            .map(|(how, n, first)| format!("{n} by {} (first: {first})", how.words()))
            .collect();
        out.notes.push(format!(
            "{total} wait-for cycle(s) ended before their deadline, so none is a deadlock: {}",
            list.join("; ")
        ));
    }
    if unjudged > 0 {
        out.notes.push(format!(
            "{unjudged} wait-for cycle(s) past the first {CYCLES_MAX} were not judged"
        ));
    }
    // What the run exercised: a cycle that formed is a moment the service had to break
    // (`lockpick test`'s bank contention cell counts it).
    if !cycles.is_empty() || unjudged > 0 {
        let deadlocks = cycles.iter().filter(|c| c.is_deadlock()).count();
        out.extra.insert(
            "cycles".into(),
            serde_json::json!({
                "formed": cycles.len() as u64 + unjudged,
                "deadlocks": deadlocks,
            }),
        );
    }
    out
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// Deadlock's injectors.
    pub(crate) const DEADLOCK: &[Injector] = &[Injector {
        name: "deadlock",
        kind: ViolationKind::Deadlock,
        adapter_shape: false,
        mutate: wait_for_each_other,
    }];

    /// Two fresh processes, two locks of their own (leases of a minute): `q` is granted A and
    /// `q+1` B, then each asks for the other's lock; both waits go unanswered until the clients
    /// give up (`info`, timeout) 5 s later, past the default liveness grace.
    fn wait_for_each_other(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let end = ops.last()?.time_ns;
        let t = rng.random_range(0..=end);
        let free = |l: &String| !ops.iter().any(|o| o.lock.as_deref() == Some(l.as_str()));
        let i =
            (0..).find(|i| free(&format!("Ldeadlock{i}a")) && free(&format!("Ldeadlock{i}b")))?;
        let (a, b) = (format!("Ldeadlock{i}a"), format!("Ldeadlock{i}b"));
        let q = fresh_process(ops);
        const MS: u64 = 1_000_000;
        const TTL_MS: u64 = 60_000;
        let answer = |token| OpValue::default().with_token(token).with_ttl_ms(TTL_MS);
        let mut new = fresh_grant(q, &a, t, t + MS, TTL_MS, answer(1));
        new.extend(fresh_grant(q + 1, &b, t, t + 2 * MS, TTL_MS, answer(1)));
        for (p, lock, at) in [(q, &b, t + 3 * MS), (q + 1, &a, t + 4 * MS)] {
            let asked = OpValue::default().with_ttl_ms(TTL_MS);
            new.push(lock_op(
                p,
                at,
                OpType::Invoke,
                F::Acquire,
                lock,
                asked.clone(),
            ));
            new.push(lock_op(
                p,
                at + 5_000 * MS,
                OpType::Info,
                F::Acquire,
                lock,
                asked.with_error("timeout"),
            ));
        }
        // The completions: both grants, then both waits given up.
        Some(insert(ops, new))
    }
}
