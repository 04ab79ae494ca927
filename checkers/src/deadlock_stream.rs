//! `deadlock` (deadlock.rs) made as the history is read. The batch builds every wait-for edge,
//! then sweeps them in start order; here each acquire is held until every hold that can fall
//! inside its wait is known (its end is before the walk's watermark: no grant closed later
//! holds before it), then its edges are built, and the sweep goes on to the invoke of the first
//! acquire not yet resolved, before which every edge is known. What is kept: the acquires not
//! yet resolved, the holds that can still fall inside one (those ending after the sweep), the
//! edges not yet swept and the cycles judged.
//!
//! Read to the end, it judges the batch's cycles in the batch's words, with one reading done
//! without: the batch builds no edge to a process that held nothing while it waited (such an
//! edge closes no cycle), which would need that process's later waits here. Stated limit: past
//! [`WAITS_KEPT_MAX`] acquires waiting to be resolved (one pending for good holds the others),
//! the earliest is resolved with the holds known, and counted.

use crate::deadlock::{edge, hull, Edge, Names, Seg, Sweep, Wait};
use crate::model::{ClientOp, Func, Grant, OpPos, NO_TARGET};
use crate::walk::Ops;
use crate::FxMap;
use std::collections::BTreeMap;

/// The most acquires kept waiting to be resolved: an acquire waits for every grant invoked
/// before its answer to close (its reach and the reader's horizon past it), so at the harness's
/// top rate and 10 s leases tens of thousands (4.5 MiB at this limit).
pub(crate) const WAITS_KEPT_MAX: usize = 1 << 16;

/// The wait-for graph's sweep, as the history is read.
pub(crate) struct DeadlockStream {
    /// Holds of closed grants that may still fall inside a wait, per process and per lock,
    /// each sorted by (start, grant).
    by_process: FxMap<u64, Vec<Seg>>,
    by_lock: FxMap<u32, Vec<Seg>>,
    /// Acquires walked whose edges are not built yet, by (end, position), and the same by
    /// (invoke, position) with their ends.
    waits: BTreeMap<(u64, usize), Wait>,
    left: crate::ascending::AscendingQueue<(u64, usize), u64>,
    /// The `wait_ms` of acquires not yet walked (the first an acquire gives).
    wait_ms: FxMap<OpPos, u64>,
    /// Per process, its grants walked and not yet closed.
    open_of: FxMap<u64, u32>,
    /// Edges built and not yet swept.
    ahead: Vec<Edge>,
    sweep: Sweep,
    /// Every edge starting before it has been swept.
    swept_to_ns: u64,
    /// Some client waited for a lock while it surely held another.
    pub(crate) waited: bool,
    /// The liveness grace a cycle's deadline counts (`CheckConfig::liveness_grace_ns`).
    pub(crate) grace_ns: u64,
    /// [`WAITS_KEPT_MAX`] unless the tests set less; acquires resolved at it, and the most
    /// acquires and holds kept at once.
    pub(crate) waits_max: usize,
    pub(crate) resolved_early: u64,
    pub(crate) waits_most: usize,
    pub(crate) holds_most: usize,
    /// The deadlocks proven so far, in the order their cycles were judged, and the cycles
    /// looked at for them.
    pub(crate) found: Vec<history::Violation>,
    looked: usize,
}

impl Default for DeadlockStream {
    fn default() -> DeadlockStream {
        DeadlockStream {
            by_process: FxMap::default(),
            by_lock: FxMap::default(),
            waits: BTreeMap::new(),
            left: Default::default(),
            wait_ms: FxMap::default(),
            open_of: FxMap::default(),
            ahead: Vec::new(),
            sweep: Sweep::default(),
            swept_to_ns: 0,
            waited: false,
            grace_ns: crate::CheckConfig::default().liveness_grace_ns,
            waits_max: WAITS_KEPT_MAX,
            resolved_early: 0,
            waits_most: 0,
            holds_most: 0,
            found: Vec::new(),
            looked: 0,
        }
    }
}

/// Inserts `s` into `list`, kept sorted by (start, grant).
fn insert(list: &mut Vec<Seg>, s: Seg) {
    let at = list.partition_point(|x| (x.start_ns, x.grant) <= (s.start_ns, s.grant));
    list.insert(at, s);
}

impl DeadlockStream {
    /// Acquire `pos` said it asks to wait `wait_ms` (its invoke's, else its completion's).
    pub(crate) fn asked(&mut self, pos: usize, wait_ms: u64) {
        self.wait_ms.entry(pos as OpPos).or_insert(wait_ms);
    }

    /// A grant of `process` was walked (after the acquire that made it).
    pub(crate) fn opened(&mut self, process: u64) {
        *self.open_of.entry(process).or_insert(0) += 1;
    }

    /// Grant number `g` closed: its definite holds are final.
    pub(crate) fn closed(&mut self, g: u32, grant: &Grant, ops: &Ops) {
        if let Some(n) = self.open_of.get_mut(&grant.process) {
            *n -= 1;
            if *n == 0 {
                self.open_of.remove(&grant.process);
            }
        }
        for s in Seg::of_grant(g as usize, grant, |pos| ops[pos].index) {
            insert(self.by_process.entry(s.process).or_default(), s);
            insert(self.by_lock.entry(s.lock).or_default(), s);
        }
    }

    /// Op `pos` was walked (before the grant it makes, if any, is [`DeadlockStream::opened`]).
    pub(crate) fn walked(&mut self, pos: usize, op: &ClientOp) {
        if op.func != Func::Acquire {
            return;
        }
        let wait_ms = crate::model::take(&mut self.wait_ms, pos as OpPos);
        if op.target == NO_TARGET {
            return;
        }
        // An acquire never answered waits until the history's end, known only then.
        let w = Wait::of(pos, op, wait_ms, u64::MAX);
        // What its process held while it waited came from grants asked for before it (a
        // process has one op in flight), walked before it: when all are closed, whether it
        // held anything is known now, and most acquires (one lock at a time) end here.
        let holder_open = self.open_of.contains_key(&op.process);
        if !holder_open && w.end_ns != u64::MAX && self.held(&w).is_none() {
            return;
        }
        self.waits.insert((w.end_ns, pos), w);
        self.left.push((w.invoke_ns, pos), w.end_ns);
        self.waits_most = self.waits_most.max(self.waits.len());
    }

    /// The hull of what `w`'s process surely held while it waited, among the holds known: of
    /// another lock than the one it waits for, as the batch reads it.
    fn held(&self, w: &Wait) -> Option<(u64, u64)> {
        let within = |s: &&Seg| s.start_ns < w.end_ns && s.end_ns > w.invoke_ns && s.lock != w.lock;
        let held = self.by_process.get(&w.process).into_iter().flatten();
        hull(w, held.filter(within))
    }

    /// Builds the edges of every acquire whose wait ends by `watermark_ns`, and sweeps every
    /// instant before the first acquire left (or `walked_ns`, before which every acquire was
    /// walked).
    pub(crate) fn judge(&mut self, watermark_ns: u64, walked_ns: u64, names: &NamesOf<'_>) {
        // Bounded by the acquires kept.
        while let Some(entry) = self.waits.first_entry() {
            if entry.key().0 > watermark_ns {
                break;
            }
            let w = entry.remove();
            self.left.remove((w.invoke_ns, w.pos));
            self.resolve(&w);
        }
        // Bounded by the acquires kept past the limit: the earliest asked first.
        while self.waits.len() > self.waits_max {
            let ((_, pos), end) = self.left.pop_first().expect("as many as the acquires");
            let w = self.waits.remove(&(end, pos)).expect("kept under its end");
            self.resolved_early += 1;
            self.resolve(&w);
        }
        let first_left = self.left.first().map_or(u64::MAX, |(k, _)| k.0);
        self.sweep_to(first_left.min(walked_ns));
        self.look(names);
    }

    /// Renders the deadlocks among the cycles judged since the last look.
    fn look(&mut self, names: &NamesOf<'_>) {
        let (found, judged) = self.sweep.deadlocks_from(self.looked, names);
        self.found.extend(found);
        self.looked = judged;
    }

    /// The history was read to its end, at `end_ns`: every acquire resolved, every edge swept.
    pub(crate) fn finish(&mut self, end_ns: u64, names: &NamesOf<'_>) {
        self.left.clear();
        for (_, mut w) in std::mem::take(&mut self.waits) {
            if w.end_ns == u64::MAX {
                w.end_ns = end_ns;
            }
            self.resolve(&w);
        }
        self.sweep_to(u64::MAX);
        self.look(names);
    }

    /// The edges of acquire `w`, if its process held a lock while it waited.
    fn resolve(&mut self, w: &Wait) {
        let Some((a, b)) = self.held(w) else {
            return;
        };
        self.waited = true;
        let holders = self.by_lock.get(&w.lock).into_iter().flatten();
        for s in holders.filter(|s| s.start_ns < b && s.end_ns > a) {
            self.ahead.extend(edge(w, s));
        }
    }

    /// Sweeps every edge starting before `to_ns`, then forgets the holds ending by then (no
    /// acquire left began before it).
    fn sweep_to(&mut self, to_ns: u64) {
        if to_ns <= self.swept_to_ns && to_ns != u64::MAX {
            return;
        }
        self.ahead.sort_by_key(Edge::key);
        let n = self.ahead.partition_point(|e| e.key().0 < to_ns);
        let now: Vec<Edge> = self.ahead.drain(..n).collect();
        self.sweep.all(self.grace_ns, &now);
        self.swept_to_ns = to_ns;
        let kept = |list: &mut Vec<Seg>| {
            list.retain(|s| s.end_ns > to_ns);
            !list.is_empty()
        };
        self.by_process.retain(|_, list| kept(list));
        self.by_lock.retain(|_, list| kept(list));
        let holds: usize = self.by_lock.values().map(Vec::len).sum();
        self.holds_most = self.holds_most.max(holds);
    }

    /// What the sweep judged, in the checker's words (before its verdict).
    pub(crate) fn output(&self, names: &impl Names) -> crate::CheckOutput {
        self.sweep.output(names)
    }

    /// Cycles past the limit, not judged.
    pub(crate) fn unjudged(&self) -> u64 {
        self.sweep.unjudged
    }
}

/// The names a streaming reader keeps, as the deadlock sentences read them.
pub(crate) struct NamesOf<'a> {
    pub(crate) locks: &'a [String],
    pub(crate) errors: &'a [String],
}

impl Names for NamesOf<'_> {
    fn lock(&self, id: u32) -> &str {
        self.locks.get(id as usize).map_or("?", String::as_str)
    }
    fn error(&self, id: u32) -> Option<&str> {
        self.errors.get(id as usize).map(String::as_str)
    }
}
