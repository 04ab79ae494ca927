//! `serializability`: the bank's critical sections judged by what they read and wrote, so harm
//! is proven from the data even where a service hands out no tokens.
//!
//! A section is one transfer: the ops that share a `transfer` id. The store numbers the
//! accepted writes of each register (`seq`: 1 for the first), and an ok read says the number
//! of the write whose value it returned (0: none yet), so each register's versions have one
//! known order and every read names one of them. The dependency graph of the sections has an
//! edge
//! - `ww` from the writer of version v of a register to the writer of its version v+1;
//! - `wr` from the writer of version v to each other section that read v;
//! - `rw` from each section that read version v to the writer of v+1, which overwrote what the
//!   reader saw;
//! - `rt` from a section to one whose first store op was sent after the first's last store op
//!   was answered (real time: nothing of the second can come before anything of the first).
//!
//! Sections that each ran alone, one after another (what the locks promise), have an order
//! that puts every edge forward; a cycle proves there is none: `non-serializable`, with the
//! shortest cycle found in each strongly connected group of sections as its witness. The
//! classic lost update is a cycle of two: both sections read a balance at version v, and each
//! overwrote the other's view of it.
//!
//! Sound by construction: an edge joins only versions whose writers are both known. A write
//! that was never answered (`info`, pending) may have taken a number nobody saw, so it draws no
//! edge, and its section has no known end (no `rt` edge leaves it); a register on which two
//! accepted writes claim the same number is left out whole (its store does not number its
//! writes as the contract says). Reads without a `seq` (stores that do not say it) place
//! nothing. The `rt` edges are the frontier of real-time order (from the sections that ended
//! last before a section began, none of which ended before another of them began), so their
//! number grows with the clients' concurrency, not with the history's square.

use crate::inject::Injector;
use crate::model::{ClientOp, Func, Model, NO_TARGET};
use crate::text::secs;
use crate::{verdict, CheckConfig, CheckOutput, Checker, FxMap};
use history::{Outcome, Violation, ViolationKind};
use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::VecDeque;

pub struct Serializability;

/// The dependency graph: node i is section i.
type Deps = DiGraph<(), Dep>;

/// Sections judged per history: past it the rest are left out, with a note.
pub const SECTIONS_MAX: usize = 2_000_000;
/// Cycles reported per history (one per strongly connected group): past it the rest are
/// counted in a note.
pub const CYCLES_MAX: usize = 1_000;
/// Sections of one group a shortest cycle is searched from (a breadth-first search each): a
/// bigger group gets a short cycle, not surely the shortest.
const CYCLE_STARTS_MAX: usize = 32;

/// What an edge of the dependency graph says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dep {
    /// The writer of version `seq` of `key`, then the writer of `seq + 1`.
    Ww { key: u32, seq: u64 },
    /// The writer of version `seq` of `key`, then a reader of it.
    Wr { key: u32, seq: u64 },
    /// A reader of version `seq` of `key`, then the writer of `seq + 1`.
    Rw { key: u32, seq: u64 },
    /// The first section's last store op was answered before the second's first was sent.
    Rt,
}

#[derive(Debug)]
struct Section {
    transfer: u64,
    process: u64,
    /// The first store op's invoke.
    start_ns: u64,
    /// The last store op's completion; `u64::MAX` when a store op was never answered.
    end_ns: u64,
    /// The op indices naming its first and last store op.
    first_op: u64,
    last_op: u64,
    /// (key, version read, op index) of its ok reads that said their version.
    reads: Vec<(u32, u64, u64)>,
    /// (key, version written, op index) of its ok writes.
    writes: Vec<(u32, u64, u64)>,
    /// Its process moved on to another transfer: no op of it comes after.
    closed: bool,
    /// The latest invoke of its store ops.
    last_invoke_ns: u64,
}

impl Checker for Serializability {
    fn injectors(&self) -> &'static [Injector] {
        injectors::SERIALIZABILITY
    }

    fn name(&self) -> &'static str {
        "serializability"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::NonSerializable]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let mut sections = Sections::default();
        for &(pos, t) in &m.transfers {
            sections.add(&m.ops[pos], t);
        }
        let judged = sections.judge(&m.keys, &mut out);
        verdict(m, cfg, &mut out);
        sections.nothing_to_judge(judged, &mut out);
        out
    }
}

/// The transfers' critical sections, in order of their first op, gathered op by op: the batch
/// adds its model's transfers, the streaming reader each op as it walks it (in the same order),
/// so both judge the same sections. What a section keeps is its few store ops' versions, not
/// the ops. The batch keeps every section to the end, at most [`SECTIONS_MAX`]; the streaming
/// reader's ([`Sections::windowed`]) judges them in rounds and lets go of those that are done.
#[derive(Default)]
pub(crate) struct Sections {
    of: FxMap<u64, usize>,
    list: Vec<Section>,
    /// The index of `list[0]` among every section gathered (the ones before were let go).
    base: usize,
    left_out: u64,
    /// An op named a transfer (a lock op too): the history is a bank run.
    transfers: bool,
    /// A transfer's op read or wrote a register (went past its locks).
    reached_store: bool,
    /// An ok read said the version it read: the order can be rebuilt.
    versioned_read: bool,
    /// Per process, the transfer its latest op named: an op of another closes its section.
    open_of: FxMap<u64, u64>,
    window: Option<Box<SerialWindow>>,
}

/// Sections kept before the streaming reader's first round; later rounds wait for twice what
/// the last one kept.
pub(crate) const ROUND_SECTIONS_MIN: usize = 4_096;
/// History time between two rounds while any section is kept, whatever their number: a cycle
/// among sections done is reported within about this long of their last op.
pub(crate) const ROUND_EVERY_NS: u64 = 1_000_000_000;
/// Ranges of transfer ids let go, past which the reader stops letting go (ids that never run
/// together: a history whose transfer ids are not the workload's).
const LET_GO_RANGES_MAX: usize = 65_536;

/// What the streaming reader's rounds need to let sections go and still judge as the batch.
///
/// A round builds the dependency graph of the sections kept, exactly as the batch builds the
/// whole one, and lets go of the longest prefix of them (in order of their first op) that are
/// done (their process moved on to another transfer, or ended with an op never answered, or
/// their last op is older than `close_after_ns`) and that no edge enters from a section after it: every strongly
/// connected group among them is then final, and is reported as the batch reports it. What
/// could still enter them later is a later op naming one of their transfers, or a write, read
/// or end that would draw an edge into them; each is recognised from what is kept of them (the
/// ids, and per key the highest version written and read, the latest start) and makes the
/// reading inexact (`inexact`): the check then reads the file whole. In a run whose store and
/// locks work, none happens: every edge points forward in time.
pub(crate) struct SerialWindow {
    /// Sections kept before the next round.
    round_at: usize,
    round_min: usize,
    close_after_ns: u64,
    /// Transfer ids let go, as ranges `start -> end` (exclusive).
    let_go: std::collections::BTreeMap<u64, u64>,
    /// Per key, the highest version written, and read, by a section let go.
    wrote_upto: FxMap<u32, u64>,
    read_upto: FxMap<u32, u64>,
    /// The latest start of a section let go.
    started_upto: u64,
    /// The groups reported by the rounds (violations, before [`CYCLES_MAX`]) and found, and
    /// how many of those reported were handed out as proven ([`Sections::newly_proven`]).
    reported: Vec<Violation>,
    groups: usize,
    handed: usize,
    /// The instant of the latest round.
    round_ns: u64,
    pub(crate) let_go_count: u64,
    /// Why the reading stopped being the batch's, if it did.
    pub(crate) inexact: Option<&'static str>,
}

impl Sections {
    /// The streaming reader's sections: judged in rounds once `round_min` are kept, a section
    /// whose process never moves on taken as done `close_after_ns` after its last op.
    pub(crate) fn windowed(round_min: usize, close_after_ns: u64) -> Sections {
        Sections {
            window: Some(Box::new(SerialWindow {
                round_at: round_min,
                round_min,
                close_after_ns,
                let_go: Default::default(),
                wrote_upto: FxMap::default(),
                read_upto: FxMap::default(),
                started_upto: 0,
                reported: Vec::new(),
                groups: 0,
                handed: 0,
                round_ns: 0,
                let_go_count: 0,
                inexact: None,
            })),
            ..Sections::default()
        }
    }

    /// The streaming reader's rounds, if it has them.
    pub(crate) fn window(&self) -> Option<&SerialWindow> {
        self.window.as_deref()
    }

    /// Rounds from `n` sections kept on, for the tests (which read short histories).
    #[cfg(test)]
    pub(crate) fn rounds_from(&mut self, n: usize) {
        if let Some(w) = self.window.as_deref_mut() {
            (w.round_min, w.round_at) = (n, n);
        }
    }

    /// Op `o`, of transfer `t`.
    pub(crate) fn add(&mut self, o: &ClientOp, t: u64) {
        self.transfers = true;
        if let Some(was) = self.open_of.insert(o.process, t) {
            if was != t {
                if let Some(&at) = self.of.get(&was) {
                    self.list[at - self.base].closed = true;
                }
            }
        }
        if o.func.is_lock_op() || o.target == NO_TARGET {
            return;
        }
        self.reached_store = true;
        let at = match self.of.get(&t) {
            Some(&at) => at - self.base,
            None if self.list.len() < SECTIONS_MAX => {
                if let Some(w) = self.window.as_deref_mut() {
                    if w.was_let_go(t) {
                        w.inexact = w.inexact.or(Some("an op of a transfer already judged"));
                    }
                }
                self.of.insert(t, self.base + self.list.len());
                self.list.push(Section {
                    transfer: t,
                    process: o.process,
                    start_ns: o.invoke_ns,
                    end_ns: 0,
                    first_op: o.index,
                    last_op: o.index,
                    reads: Vec::new(),
                    writes: Vec::new(),
                    closed: false,
                    last_invoke_ns: o.invoke_ns,
                });
                self.list.len() - 1
            }
            None => {
                self.left_out += 1;
                return;
            }
        };
        let s = &mut self.list[at];
        s.last_invoke_ns = s.last_invoke_ns.max(o.invoke_ns);
        if o.invoke_ns < s.start_ns {
            s.start_ns = o.invoke_ns;
            s.first_op = o.index;
        }
        let end = match o.outcome {
            Outcome::Ok | Outcome::Fail => o.complete_or_max(),
            Outcome::Info | Outcome::Pending => u64::MAX,
        };
        // An op never answered ends its process: no op of its section is still to come, so
        // a round need not wait out the section's quiet time before judging it.
        s.closed |= matches!(o.outcome, Outcome::Info | Outcome::Pending);
        if end >= s.end_ns {
            s.end_ns = end;
            s.last_op = o.index;
        }
        if o.outcome == Outcome::Ok {
            match (o.func, o.seq()) {
                (Func::Read, Some(v)) => {
                    s.reads.push((o.target, v, o.index));
                    self.versioned_read = true;
                }
                (Func::Write, Some(v)) => s.writes.push((o.target, v, o.index)),
                _ => {}
            }
        }
        if let Some(w) = self.window.as_deref_mut() {
            w.check(&self.list[at]);
        }
    }

    /// A streaming reader's round, at `now_ns` (the invoke of the op just walked: every later
    /// op is invoked no earlier), once enough sections are kept or a second after the last:
    /// the done prefix no edge enters is judged (its groups reported, named by `keys`) and let
    /// go.
    pub(crate) fn round(&mut self, now_ns: u64, keys: &[String]) {
        let Some(w) = self.window.as_deref_mut() else {
            return;
        };
        let due = now_ns >= w.round_ns.saturating_add(ROUND_EVERY_NS) && self.list.len() > 1;
        if (self.list.len() < w.round_at && !due) || w.inexact.is_some() {
            return;
        }
        w.round_ns = now_ns;
        let done = (self.list.iter())
            .take_while(|s| s.closed || s.last_invoke_ns.saturating_add(w.close_after_ns) < now_ns)
            .count();
        let cut = if done == 0 {
            0
        } else {
            let (writer, broken) = writers(&self.list);
            let g = dependency_graph(&self.list, &writer, &broken);
            // The longest done prefix that no edge from after it enters.
            let mut from_most = vec![0usize; self.list.len()];
            for e in g.raw_edges() {
                let (a, b) = (e.source().index(), e.target().index());
                from_most[b] = from_most[b].max(a);
            }
            let (mut cut, mut reach) = (0, 0);
            for (b, &from) in from_most.iter().enumerate().take(done) {
                reach = reach.max(from);
                if reach <= b {
                    cut = b + 1;
                }
            }
            if cut > 0 && !broken.is_empty() {
                // The batch leaves such a key out of the whole graph, the cycles through it
                // reported here too.
                w.inexact = Some("two accepted writes said the same version");
                return;
            }
            if cut > 0 {
                let mut out = CheckOutput::new();
                let groups: Vec<Vec<NodeIndex>> = (groups_of(&g).into_iter())
                    .filter(|c| c[0].index() < cut)
                    .collect();
                report(
                    Keys(keys),
                    (&self.list, &writer, &g),
                    &groups,
                    &mut w.groups,
                    &mut out,
                );
                w.reported.extend(out.violations);
            }
            cut
        };
        for s in self.list.drain(..cut) {
            self.of.remove(&s.transfer);
            if self.open_of.get(&s.process) == Some(&s.transfer) {
                self.open_of.remove(&s.process);
            }
            w.let_go(&s);
        }
        self.base += cut;
        w.let_go_count += cut as u64;
        for s in &self.list {
            w.check(s);
        }
        w.round_at = w.round_min.max(2 * self.list.len());
    }

    /// The groups the rounds reported since last asked, once the whole history's judgement is
    /// sure to report them too (a read said its version: the batch judges only then). They are
    /// the first of [`Sections::judge`]'s violations, in its order.
    pub(crate) fn newly_proven(&mut self) -> &[Violation] {
        match self.window.as_deref_mut() {
            Some(w) if self.versioned_read && w.inexact.is_none() => {
                let from = std::mem::replace(&mut w.handed, w.reported.len());
                &w.reported[from..]
            }
            _ => &[],
        }
    }

    /// How many of [`Sections::judge`]'s first violations [`Sections::newly_proven`] handed out.
    pub(crate) fn handed(&self) -> usize {
        self.window.as_deref().map_or(0, |w| w.handed)
    }

    /// Judges the sections gathered, naming registers by `keys`: their cycles as violations,
    /// what was left out as notes. Whether any read said its version (else the order cannot
    /// be rebuilt and nothing was judged).
    pub(crate) fn judge(&mut self, keys: &[String], out: &mut CheckOutput) -> bool {
        if self.left_out > 0 {
            out.notes.push(format!(
                "{} store op(s) of transfers past the first {SECTIONS_MAX} were not judged",
                self.left_out
            ));
        }
        if !self.versioned_read {
            return false;
        }
        let (mut groups, let_go) = match self.window.as_deref_mut() {
            Some(w) => {
                out.violations.append(&mut w.reported);
                (w.groups, w.let_go_count > 0)
            }
            None => (0, false),
        };
        let (writer, broken) = writers(&self.list);
        if let_go && !broken.is_empty() {
            if let Some(w) = self.window.as_deref_mut() {
                w.inexact = Some("two accepted writes said the same version");
            }
        }
        for &key in &broken {
            out.notes.push(format!(
                "{}: two accepted writes say the same version, so its versions have no known \
                 order; it is left out of the dependency graph",
                Keys(keys).name(key)
            ));
        }
        let g = dependency_graph(&self.list, &writer, &broken);
        let found = groups_of(&g);
        report(
            Keys(keys),
            (&self.list, &writer, &g),
            &found,
            &mut groups,
            out,
        );
        if groups > CYCLES_MAX {
            out.notes.push(format!(
                "{} more group(s) of sections in a cycle were not reported one by one",
                groups - CYCLES_MAX
            ));
        }
        true
    }

    /// The rule's note when it judged nothing (`judged`, from [`Sections::judge`]).
    pub(crate) fn nothing_to_judge(&self, judged: bool, out: &mut CheckOutput) {
        // Outside the bank there is nothing this rule could judge, as for bank-total.
        if !self.transfers {
            out.nothing_to_judge(false, || crate::bank::NO_TRANSFER.to_string());
        } else if !self.reached_store {
            out.nothing_to_judge(false, || crate::bank::NO_ACCOUNT_REACHED.to_string());
        } else {
            out.nothing_to_judge(judged, || {
                "no transfer's read said the version it read (a store that answers reads \
                 without `seq`): the critical sections' order cannot be rebuilt"
                    .to_string()
            });
        }
    }
}

impl SerialWindow {
    fn was_let_go(&self, t: u64) -> bool {
        (self.let_go.range(..=t).next_back()).is_some_and(|(_, &end)| t < end)
    }

    /// Section `s` is let go: what could draw an edge into it later is kept.
    fn let_go(&mut self, s: &Section) {
        let t = s.transfer;
        let before = (self.let_go.range(..=t).next_back()).map(|(&a, &b)| (a, b));
        let after = self.let_go.get(&(t + 1)).copied();
        match (before, after) {
            (Some((_, end)), _) if t < end => {}
            (Some((start, end)), Some(next)) if end == t => {
                self.let_go.remove(&(t + 1));
                self.let_go.insert(start, next);
            }
            (Some((start, end)), None) if end == t => {
                self.let_go.insert(start, t + 1);
            }
            (_, Some(next)) => {
                self.let_go.remove(&(t + 1));
                self.let_go.insert(t, next);
            }
            _ => {
                self.let_go.insert(t, t + 1);
            }
        }
        if self.let_go.len() > LET_GO_RANGES_MAX {
            self.inexact = self.inexact.or(Some("too many transfer ids apart let go"));
        }
        for &(key, v, _) in &s.writes {
            let upto = self.wrote_upto.entry(key).or_insert(0);
            *upto = (*upto).max(v);
        }
        for &(key, v, _) in &s.reads {
            let upto = self.read_upto.entry(key).or_insert(0);
            *upto = (*upto).max(v);
        }
        self.started_upto = self.started_upto.max(s.start_ns);
    }

    /// Whether kept section `s` could draw an edge into a section let go: a write of a version
    /// no later than one written (`ww`) or read (`wr`) there, a read of a version whose next was
    /// written there (`rw`), an end no later than a start there (`rt`).
    fn check(&mut self, s: &Section) {
        if self.let_go_count == 0 || self.inexact.is_some() {
            return;
        }
        let upto = |m: &FxMap<u32, u64>, key: u32| m.get(&key).copied();
        let into = s.writes.iter().any(|&(key, v, _)| {
            upto(&self.wrote_upto, key).is_some_and(|u| v <= u)
                || upto(&self.read_upto, key).is_some_and(|u| v <= u)
        }) || (s.reads.iter())
            .any(|&(key, v, _)| upto(&self.wrote_upto, key).is_some_and(|u| v < u))
            || s.end_ns <= self.started_upto;
        if into {
            self.inexact = Some("an edge into a section already judged");
        }
    }
}

/// The registers' names, by id.
#[derive(Clone, Copy)]
struct Keys<'a>(&'a [String]);

impl Keys<'_> {
    fn name(&self, id: u32) -> &str {
        self.0.get(id as usize).map_or("?", |s| s.as_str())
    }
}

/// The strongly connected groups of more than one section, each sorted, in history order.
fn groups_of(g: &Deps) -> Vec<Vec<NodeIndex>> {
    // Kosaraju's, not Tarjan's: petgraph's Tarjan recurses once per node of a path, and a
    // long run's transfers, one after another, are a path of millions (a stack overflow at
    // 10M events); Kosaraju walks with an explicit stack. Its order is the graph's; the
    // groups are reported in history order.
    let mut groups: Vec<Vec<NodeIndex>> = kosaraju_scc(g)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    for c in &mut groups {
        c.sort_unstable();
    }
    groups.sort_unstable_by_key(|c| c[0]);
    groups
}

/// Reports `groups` of the graph `g` of `sections` as violations while fewer than
/// [`CYCLES_MAX`] were reported before, counting each in `found`.
#[allow(clippy::type_complexity)]
fn report(
    keys: Keys<'_>,
    (sections, writer, g): (&[Section], &FxMap<(u32, u64), (usize, u64)>, &Deps),
    groups: &[Vec<NodeIndex>],
    found: &mut usize,
    out: &mut CheckOutput,
) {
    debug_assert!(
        sections.iter().all(|s| s.start_ns <= s.end_ns),
        "a section ends no earlier than it starts"
    );
    for c in groups {
        *found += 1;
        if *found <= CYCLES_MAX {
            let cycle = lost_update_pair(g, sections, shortest_cycle(g, c));
            out.violations
                .push(violation(keys, sections, writer, g, &cycle, c.len()));
        }
    }
}

/// (key, version) -> (writing section, op index); and the keys whose numbering is broken (two
/// sections' accepted writes say the same version).
#[allow(clippy::type_complexity)]
fn writers(sections: &[Section]) -> (FxMap<(u32, u64), (usize, u64)>, Vec<u32>) {
    let mut writer: FxMap<(u32, u64), (usize, u64)> = FxMap::default();
    let mut broken: Vec<u32> = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        for &(key, seq, op) in &s.writes {
            if let Some(&(j, _)) = writer.get(&(key, seq)) {
                if j != i && !broken.contains(&key) {
                    broken.push(key);
                }
            } else {
                writer.insert((key, seq), (i, op));
            }
        }
    }
    (writer, broken)
}

/// The dependency graph: node i is section i; an edge holds only what it says (its witness
/// ops are found again for the cycles reported): a long run has tens of millions of edges.
fn dependency_graph(
    sections: &[Section],
    writer: &FxMap<(u32, u64), (usize, u64)>,
    broken: &[u32],
) -> Deps {
    let mut g: Deps = DiGraph::with_capacity(sections.len(), sections.len() * 4);
    for _ in sections {
        g.add_node(());
    }
    let edge = |g: &mut Deps, a: usize, b: usize, d| {
        if a != b {
            g.add_edge(NodeIndex::new(a), NodeIndex::new(b), d);
        }
    };
    for (i, s) in sections.iter().enumerate() {
        for &(key, seq, _) in &s.writes {
            if broken.contains(&key) {
                continue;
            }
            if let Some(&(j, _)) = writer.get(&(key, seq + 1)) {
                edge(&mut g, i, j, Dep::Ww { key, seq });
            }
        }
        for &(key, seq, _) in &s.reads {
            if broken.contains(&key) {
                continue;
            }
            if let Some(&(j, _)) = writer.get(&(key, seq)) {
                edge(&mut g, j, i, Dep::Wr { key, seq });
            }
            if let Some(&(j, _)) = writer.get(&(key, seq + 1)) {
                edge(&mut g, i, j, Dep::Rw { key, seq });
            }
        }
    }
    for (a, b) in real_time_frontier(sections) {
        edge(&mut g, a, b, Dep::Rt);
    }
    g
}

/// The `rt` edges: from each section to the sections that began after it ended, reduced to
/// the frontier (no section ended between them).
fn real_time_frontier(sections: &[Section]) -> Vec<(usize, usize)> {
    // (instant, 0 = start before 1 = end at the same instant, section): a section that ends at
    // the instant another starts does not precede it (the order needs ended-before-sent).
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(sections.len() * 2);
    for (i, s) in sections.iter().enumerate() {
        events.push((s.start_ns, 0, i));
        if s.end_ns != u64::MAX {
            events.push((s.end_ns, 1, i));
        }
    }
    events.sort_unstable();
    let mut frontier: Vec<usize> = Vec::new();
    let mut preds: FxMap<usize, Vec<usize>> = FxMap::default();
    let mut edges = Vec::new();
    for (_, what, i) in events {
        if what == 0 {
            edges.extend(frontier.iter().map(|&p| (p, i)));
            if sections[i].end_ns != u64::MAX {
                preds.insert(i, frontier.clone());
            }
        } else {
            // Whatever ended before this section began now comes before it as well.
            let before = preds.remove(&i).unwrap_or_default();
            frontier.retain(|p| !before.contains(p));
            frontier.push(i);
        }
    }
    edges
}

/// The shortest cycle through one of the group's first sections, as its edges in order.
fn shortest_cycle(g: &Deps, group: &[NodeIndex]) -> Vec<petgraph::graph::EdgeIndex> {
    let inside: std::collections::HashSet<NodeIndex> = group.iter().copied().collect();
    let mut best: Vec<petgraph::graph::EdgeIndex> = Vec::new();
    for &start in group.iter().take(CYCLE_STARTS_MAX) {
        // Breadth first from `start` inside the group, until an edge leads back to it.
        let mut came: FxMap<NodeIndex, petgraph::graph::EdgeIndex> = FxMap::default();
        let mut queue = VecDeque::from([start]);
        let mut closing = None;
        'search: while let Some(n) = queue.pop_front() {
            for e in g.edges(n) {
                use petgraph::visit::EdgeRef;
                let t = e.target();
                if !inside.contains(&t) {
                    continue;
                }
                if t == start {
                    closing = Some((n, e.id()));
                    break 'search;
                }
                if let std::collections::hash_map::Entry::Vacant(v) = came.entry(t) {
                    v.insert(e.id());
                    queue.push_back(t);
                }
            }
        }
        let Some((mut n, last)) = closing else {
            continue;
        };
        let mut path = vec![last];
        while n != start {
            let e = came[&n];
            path.push(e);
            n = g.edge_endpoints(e).expect("an edge of the graph").0;
        }
        path.reverse();
        if best.is_empty() || path.len() < best.len() {
            best = path;
        }
        if best.len() == 2 {
            break;
        }
    }
    best
}

/// For a cycle of two sections, the pair of edges between them that is a lost update on one
/// register (one read version v, the other wrote v+1, the first v+2 over it; best when both
/// read v), when there is one: the witness a reader knows at sight. Any other cycle as found.
fn lost_update_pair(
    g: &Deps,
    sections: &[Section],
    cycle: Vec<petgraph::graph::EdgeIndex>,
) -> Vec<petgraph::graph::EdgeIndex> {
    use petgraph::visit::EdgeRef;
    let [first, _] = cycle[..] else {
        return cycle;
    };
    let (a, b) = g.edge_endpoints(first).expect("an edge of the graph");
    // The classic shape (both read the version) first, else any lost update on one register.
    let mut fallback = None;
    for there in g.edges_connecting(a, b).chain(g.edges_connecting(b, a)) {
        let Dep::Rw { key, seq } = *there.weight() else {
            continue;
        };
        let (reader, writer) = (there.source(), there.target());
        let back = g
            .edges_connecting(writer, reader)
            .find(|e| *e.weight() == Dep::Ww { key, seq: seq + 1 });
        let both_read = sections[writer.index()]
            .reads
            .iter()
            .any(|r| r.0 == key && r.1 == seq);
        match back {
            Some(back) if both_read => return vec![there.id(), back.id()],
            Some(back) if fallback.is_none() => fallback = Some(vec![there.id(), back.id()]),
            _ => {}
        }
    }
    fallback.unwrap_or(cycle)
}

/// The ops that prove edge `dep` from section `a` to `b`.
fn witness(
    sections: &[Section],
    writer: &FxMap<(u32, u64), (usize, u64)>,
    a: usize,
    b: usize,
    dep: Dep,
) -> [u64; 2] {
    let read = |s: usize, key: u32, seq: u64| {
        let r = sections[s].reads.iter().find(|r| r.0 == key && r.1 == seq);
        r.map_or(sections[s].first_op, |r| r.2)
    };
    let wrote = |key: u32, seq: u64| writer[&(key, seq)].1;
    match dep {
        Dep::Ww { key, seq } => [wrote(key, seq), wrote(key, seq + 1)],
        Dep::Wr { key, seq } => [wrote(key, seq), read(b, key, seq)],
        Dep::Rw { key, seq } => [read(a, key, seq), wrote(key, seq + 1)],
        Dep::Rt => [sections[a].last_op, sections[b].first_op],
    }
}

fn violation(
    keys: Keys<'_>,
    sections: &[Section],
    writer: &FxMap<(u32, u64), (usize, u64)>,
    g: &Deps,
    cycle: &[petgraph::graph::EdgeIndex],
    group_len: usize,
) -> Violation {
    let name = |i: usize| section_name(sections, i);
    let mut ops: Vec<u64> = Vec::new();
    let mut steps: Vec<String> = Vec::new();
    let mut key_named = None;
    let (mut from_ns, mut to_ns) = (u64::MAX, 0u64);
    let ends: Vec<(usize, usize, Dep)> = cycle
        .iter()
        .map(|&e| {
            let (a, b) = g.edge_endpoints(e).expect("an edge of the graph");
            let (a, b, dep) = (a.index(), b.index(), g[e]);
            ops.extend(witness(sections, writer, a, b, dep));
            (a, b, dep)
        })
        .collect();
    debug_assert!(!ends.is_empty(), "a cycle has an edge");
    for &(a, b, dep) in &ends {
        for s in [a, b] {
            from_ns = from_ns.min(sections[s].start_ns);
            if sections[s].end_ns != u64::MAX {
                to_ns = to_ns.max(sections[s].end_ns);
            }
        }
        if let Dep::Ww { key, .. } | Dep::Wr { key, .. } | Dep::Rw { key, .. } = dep {
            key_named.get_or_insert(key);
        }
        steps.push(step(keys, sections, a, b, dep, &name));
    }
    ops.sort_unstable();
    ops.dedup();
    let mut explanation = match lost_update(&ends) {
        Some((a, b, key, v)) => lost_update_sentence(keys, sections, a, b, key, v),
        None => format!(
            "the critical sections of {} form a cycle that no order of them, each run alone, \
             can give: {}",
            ends.iter()
                .map(|e| name(e.0))
                .collect::<Vec<_>>()
                .join(", "),
            steps.join("; ")
        ),
    };
    if group_len > ends.len() {
        explanation.push_str(&format!(
            " ({group_len} sections are caught in cycles with these)"
        ));
    }
    let to_ns = if to_ns == 0 { from_ns } else { to_ns };
    Violation {
        kind: ViolationKind::NonSerializable,
        lock: key_named.map(|k| keys.name(k).to_string()),
        ops,
        window_ns: [from_ns, to_ns.max(from_ns)],
        nemesis: Vec::new(),
        explanation,
        cycle: ends
            .iter()
            .map(|&(a, b, dep)| history::CycleEdge {
                from: name(a),
                to: name(b),
                label: label(keys, dep),
            })
            .collect(),
    }
}

/// A section in a sentence: its transfer and process.
fn section_name(sections: &[Section], i: usize) -> String {
    let s = &sections[i];
    format!("transfer {} (p{})", s.transfer, s.process)
}

/// A lost update on one register: `a` read version v, `b` wrote v+1, and `a` wrote v+2 over it
/// without having read it. `(a, b, key, v)`, when the cycle is one.
fn lost_update(ends: &[(usize, usize, Dep)]) -> Option<(usize, usize, u32, u64)> {
    match ends {
        [(a, b, Dep::Rw { key: k1, seq: v1 }), (_, _, Dep::Ww { key: k2, seq: v2 })]
        | [(_, _, Dep::Ww { key: k2, seq: v2 }), (a, b, Dep::Rw { key: k1, seq: v1 })]
            if k1 == k2 && *v2 == v1 + 1 =>
        {
            Some((*a, *b, *k1, *v1))
        }
        _ => None,
    }
}

/// The sentence of a lost update (see [`lost_update`]).
fn lost_update_sentence(
    keys: Keys<'_>,
    sections: &[Section],
    a: usize,
    b: usize,
    key: u32,
    v: u64,
) -> String {
    let name = |i: usize| section_name(sections, i);
    let both_read = sections[b].reads.iter().any(|r| r.0 == key && r.1 == v);
    let how = if both_read {
        format!(
            "{} and {} both read {} at version {v} and both wrote it: {} version {}, \
             then {} version {} over it",
            name(b),
            name(a),
            keys.name(key),
            name(b),
            v + 1,
            name(a),
            v + 2
        )
    } else {
        format!(
            "{} read {} at version {v}; {} then wrote version {}, and {} wrote \
             version {} over it from its read of version {v}",
            name(a),
            keys.name(key),
            name(b),
            v + 1,
            name(a),
            v + 2
        )
    };
    format!(
        "{how}, so {}'s update was lost (no order of the two critical sections, each \
         run alone, gives what the store recorded)",
        name(b)
    )
}

/// One edge of a cycle, in a few words for the report's drawing.
fn label(keys: Keys<'_>, dep: Dep) -> String {
    match dep {
        Dep::Ww { key, seq } => format!("ww {} v{seq}→v{}", keys.name(key), seq + 1),
        Dep::Wr { key, seq } => format!("wr {} v{seq}", keys.name(key)),
        Dep::Rw { key, seq } => format!("rw {} v{seq}→v{}", keys.name(key), seq + 1),
        Dep::Rt => "rt: ended before it began".to_string(),
    }
}

/// One edge of a cycle, as a sentence.
fn step(
    keys: Keys<'_>,
    sections: &[Section],
    a: usize,
    b: usize,
    dep: Dep,
    name: &impl Fn(usize) -> String,
) -> String {
    match dep {
        Dep::Ww { key, seq } => format!(
            "{} wrote {} version {seq}, which {} overwrote (version {})",
            name(a),
            keys.name(key),
            name(b),
            seq + 1
        ),
        Dep::Wr { key, seq } => format!(
            "{} wrote {} version {seq}, which {} read",
            name(a),
            keys.name(key),
            name(b)
        ),
        Dep::Rw { key, seq } => format!(
            "{} read {} at version {seq}, the one {}'s write (version {}) replaced",
            name(a),
            keys.name(key),
            name(b),
            seq + 1
        ),
        Dep::Rt => format!(
            "{}'s last store op was answered at {}, before {} sent its first at {}",
            name(a),
            secs(sections[a].end_ns),
            name(b),
            secs(sections[b].start_ns)
        ),
    }
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// Serializability's injectors.
    pub(crate) const SERIALIZABILITY: &[Injector] = &[Injector {
        name: "non-serializable",
        kind: ViolationKind::NonSerializable,
        adapter_shape: false,
        mutate: interleaved_transfers,
    }];

    /// Two transfers on a fresh account after the history's end, each from a fresh process: both
    /// read version 0, then the second writes version 1 and the first version 2 from its stale
    /// read (a lost update; no lock op, so nothing else is proven of them). The witness is the
    /// first's read, the second's write and the first's write: the cycle's two edges.
    fn interleaved_transfers(ops: &mut Vec<Op>, _rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let end = ops.last()?.time_ns;
        let used = |k: &String| ops.iter().any(|o| o.key.as_deref() == Some(k.as_str()));
        let key = (0..)
            .map(|i| format!("balance-serial{i}"))
            .find(|k| !used(k))?;
        let last_transfer = ops
            .iter()
            .filter_map(|o| history::WorkerEvidence::read(&o.value.extra).transfer)
            .max()
            .unwrap_or(0);
        let q = fresh_process(ops);
        const MS: u64 = 1_000_000;
        let mut t = end + MS;
        let mut new = Vec::new();
        // (transfer, write, seq)
        for (n, write, seq) in [(0, false, 0), (1, false, 0), (1, true, 1), (0, true, 2)] {
            let p = Process::Client(q + n);
            let tag = OpValue::default().with_evidence(&history::WorkerEvidence {
                transfer: Some(last_transfer + 1 + n),
                ..Default::default()
            });
            let f = if write { F::Write } else { F::Read };
            let asked = if write {
                tag.clone().with_value(seq as i64 * 10)
            } else {
                tag.clone()
            };
            t += MS;
            new.push(
                Op::new(0, t, p, OpType::Invoke, f.clone())
                    .with_key(&key)
                    .with_value(asked.clone()),
            );
            t += MS;
            let answer = if write {
                asked.with_seq(seq)
            } else {
                asked.with_value(0).with_seq(seq)
            };
            new.push(
                Op::new(0, t, p, OpType::Ok, f)
                    .with_key(&key)
                    .with_value(answer),
            );
        }
        let done = insert(ops, new);
        Some(vec![done[0], done[2], done[3]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long run's transfers one after another are a path through the graph as long as the
    /// run: judged without recursing once per transfer (petgraph's Tarjan overflowed the
    /// stack on 1.25M of them).
    #[test]
    fn a_path_of_many_transfers_is_judged_without_deep_recursion() {
        let n = 300_000u64;
        let sections: Vec<Section> = (0..n)
            .map(|i| Section {
                transfer: i + 1,
                process: i % 4,
                start_ns: i * 10,
                end_ns: i * 10 + 5,
                first_op: i * 4,
                last_op: i * 4 + 3,
                reads: vec![(0, i, i * 4)],
                writes: vec![(0, i + 1, i * 4 + 2)],
                closed: true,
                last_invoke_ns: i * 10,
            })
            .collect();
        let mut out = CheckOutput::new();
        let mut all = Sections {
            list: sections,
            versioned_read: true,
            ..Sections::default()
        };
        assert!(all.judge(&[], &mut out));
        assert!(out.violations.is_empty(), "{:?}", out.violations);
        assert!(out.notes.is_empty(), "{:?}", out.notes);
    }
}
