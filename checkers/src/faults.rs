//! Nemesis events paired into fault intervals, so each violation can list the faults active
//! during its window, and liveness can tell when the last fault that could delay an effect ended.

use history::{ActiveFault, FaultFamily, FaultOp, History, Op};
use serde_json::Value;
use std::collections::BTreeMap;

/// One fault: from the nemesis op that started it to the one that stopped it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub start_index: u64,
    /// The starting op's function, e.g. `start-pause` or `kill`.
    pub f: String,
    pub value: Value,
    pub start_ns: u64,
    /// When it stopped; the history's end if it never did.
    pub end_ns: u64,
    /// The op that stopped it; `None` if the history ends with the fault still active.
    pub stop_index: Option<u64>,
}

/// All faults of a history, sorted by start.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    list: Vec<Fault>,
    /// `prefix_end[i]`: the latest effective end (`u64::MAX` for a fault never stopped) among
    /// `list[..=i]`, with the position of the fault holding it.
    prefix_end: Vec<(u64, usize)>,
}

/// The fault kind a nemesis op opens: `start-X` opens X, `kill` opens kill; a stop or an
/// instant (`clock-observed`, what a fault was seen to do) opens none.
pub(crate) fn opened_kind(f: &str) -> Option<&str> {
    match FaultOp::of(f) {
        FaultOp::Opens(kind) => Some(kind),
        FaultOp::Closes(_) | FaultOp::Instant => None,
    }
}

/// Whether a fault may delay when the service acts on a request. A client pause stalls a
/// client between its ops (it has nothing in flight), so the service has nothing to act on late;
/// counting its end would excuse the very lock-stuck a stalled holder reveals (a service that
/// never expires the stalled holder's lease).
fn holds_back_service_effects(start_f: &str) -> bool {
    !FaultOp::of(start_f)
        .opened_family()
        .is_some_and(FaultFamily::stalls_clients)
}

/// What a fault was done to, used to pair a stop with its own start when several faults of one
/// class overlap (two nodes paused at once).
fn target(op: &Op) -> Option<&Value> {
    ["nodes", "node", "process", "processes", "target"]
        .iter()
        .find_map(|k| op.value.extra.get(*k))
}

fn value_of(op: &Op) -> Value {
    if op.value.is_empty() {
        Value::Null
    } else {
        serde_json::to_value(&op.value).unwrap_or(Value::Null)
    }
}

impl Faults {
    pub fn build(h: &History) -> Faults {
        let nemesis: Vec<Op> = h.nemesis().cloned().collect();
        Faults::from_nemesis(&nemesis, h.end_time_ns())
    }

    /// The faults of a history's nemesis events (in history order) ending at `end_ns`.
    pub fn from_nemesis(nemesis: &[Op], end_ns: u64) -> Faults {
        // The one pairing, the log's, with nothing folded.
        let mut log = FaultLog::default();
        for op in nemesis {
            log.push(op);
        }
        Faults::from_log(log, end_ns)
    }

    /// The faults a log kept (none folded), the history ending at `end_ns`.
    pub(crate) fn from_log(mut log: FaultLog, end_ns: u64) -> Faults {
        log.finish(end_ns);
        let mut list: Vec<Fault> = std::mem::take(&mut log.kept).into_values().collect();
        // Nemesis events come in history order, but sort anyway: indices ascend, times need not.
        list.sort_by_key(|f| (f.start_ns, f.start_index));
        let mut prefix_end = Vec::with_capacity(list.len());
        let mut best: Option<(u64, usize)> = None;
        for (i, f) in list.iter().enumerate() {
            let end = effective_end(f);
            if later_end((end, i), best) {
                best = Some((end, i));
            }
            prefix_end.push(best.expect("just set"));
        }
        Faults { list, prefix_end }
    }

    pub fn list(&self) -> &[Fault] {
        &self.list
    }

    /// Faults whose interval meets `[start_ns, end_ns]`, by start.
    pub fn active(&self, start_ns: u64, end_ns: u64) -> Vec<ActiveFault> {
        let n = self.list.partition_point(|f| f.start_ns <= end_ns);
        self.list[..n]
            .iter()
            .filter(|f| f.end_ns >= start_ns)
            .map(|f| ActiveFault {
                index: f.start_index,
                f: f.f.clone(),
                value: f.value.clone(),
            })
            .collect()
    }

    /// Among faults started before `t_ns`, the one that ended last (`u64::MAX` if it never
    /// ended): until then an effect may have been held back.
    /// Returns the end and the fault's position in [`Faults::list`].
    pub fn latest_end_started_before(&self, t_ns: u64) -> Option<(u64, usize)> {
        let n = self.list.partition_point(|f| f.start_ns < t_ns);
        self.prefix_end.get(n.checked_sub(1)?).copied()
    }
}

/// A fault's end as it can hold back an effect: none for a client pause (0), the history's end
/// for one never stopped (`u64::MAX`), else its stop.
fn effective_end(f: &Fault) -> u64 {
    if !holds_back_service_effects(&f.f) {
        0
    } else if f.stop_index.is_some() {
        f.end_ns
    } else {
        u64::MAX
    }
}

/// Whether (end, place) `a` is the later end than `b`, ties to the earlier place: the fault
/// [`Faults::latest_end_started_before`] names.
fn later_end(a: (u64, usize), b: Option<(u64, usize)>) -> bool {
    b.is_none_or(|(e, i)| a.0 > e || (a.0 == e && a.1 < i))
}

/// The faults of a history as its nemesis events are read, paired as [`Faults::from_nemesis`]
/// pairs them, each at the place it has in that list (nemesis events come in time order), for
/// a reader that asks [`FaultLog::latest_end_started_before`] at instants that never go back.
/// What it keeps does not grow with the history: a fault stopped and started before every
/// instant still to be asked about is folded into the one such fault with the latest end.
#[derive(Debug, Default)]
pub(crate) struct FaultLog {
    /// The faults not folded, by place.
    kept: BTreeMap<usize, Fault>,
    /// Per class, the places of the faults still open, oldest first, with their targets.
    open: BTreeMap<String, Vec<(usize, Option<Value>)>>,
    /// The place of the next fault.
    next: usize,
    /// Of the faults folded, the one with the latest end (ties to the earliest), its end and
    /// place.
    folded: Option<(u64, usize, Fault)>,
    /// Faults kept for their words whatever is folded (those a finding names).
    named: BTreeMap<usize, Fault>,
    /// The most faults kept at once.
    pub(crate) kept_most: usize,
    /// [`FaultLog::asked_from`] folds nothing at an instant up to this one: every fault kept
    /// then either started at or after it, or was open and holds effects back (until a fault
    /// is added or stopped, which sets it to 0). It is asked at every acquire and renew
    /// walked, and most times nothing can fold.
    quiet_until_ns: u64,
}

impl FaultLog {
    /// Reads nemesis event `op`; returns the place of the fault it stopped, if it stopped one.
    pub(crate) fn push(&mut self, op: &Op) -> Option<usize> {
        let f = op.f.as_str();
        match FaultOp::of(f) {
            FaultOp::Opens(class) => {
                let at = self.next;
                self.open
                    .entry(class.to_string())
                    .or_default()
                    .push((at, target(op).cloned()));
                self.add(Fault {
                    start_index: op.index,
                    f: f.to_string(),
                    value: value_of(op),
                    start_ns: op.time_ns,
                    // The history's end, known at its end: `finish` sets it.
                    end_ns: u64::MAX,
                    stop_index: None,
                });
            }
            FaultOp::Closes(class) => {
                let queue = self.open.get_mut(class)?;
                let want = target(op);
                let at = want
                    .and_then(|w| queue.iter().position(|(_, t)| t.as_ref() == Some(w)))
                    .unwrap_or(0);
                if at < queue.len() {
                    let (i, _) = queue.remove(at);
                    let folded = (self.folded.as_mut())
                        .filter(|(_, j, _)| *j == i)
                        .map(|(_, _, f)| f);
                    let copies = [self.kept.get_mut(&i), self.named.get_mut(&i), folded];
                    for f in copies.into_iter().flatten() {
                        f.end_ns = op.time_ns;
                        f.stop_index = Some(op.index);
                    }
                    self.quiet_until_ns = 0;
                    return Some(i);
                }
            }
            FaultOp::Instant => self.add(Fault {
                start_index: op.index,
                f: f.to_string(),
                value: value_of(op),
                start_ns: op.time_ns,
                end_ns: op.time_ns,
                stop_index: Some(op.index),
            }),
        }
        None
    }

    fn add(&mut self, f: Fault) {
        self.quiet_until_ns = 0;
        self.kept.insert(self.next, f);
        self.next += 1;
        self.kept_most = self.kept_most.max(self.kept.len());
    }

    /// [`Faults::latest_end_started_before`] over the faults read so far.
    pub(crate) fn latest_end_started_before(&self, t_ns: u64) -> Option<(u64, usize)> {
        let mut best = self.folded.as_ref().map(|(e, i, _)| (*e, *i));
        // Bounded by the faults kept.
        for (&i, f) in &self.kept {
            if f.start_ns < t_ns && later_end((effective_end(f), i), best) {
                best = Some((effective_end(f), i));
            }
        }
        best
    }

    /// No instant before `t_ns` will be asked about again: the faults stopped (or that hold
    /// nothing back) and started before it are folded.
    pub(crate) fn asked_from(&mut self, t_ns: u64) {
        if t_ns <= self.quiet_until_ns {
            return;
        }
        // Its end as it holds an effect back is final: stopped, or holding nothing back.
        let done: Vec<usize> = (self.kept.iter())
            .filter(|(_, f)| {
                f.start_ns < t_ns && (f.stop_index.is_some() || !holds_back_service_effects(&f.f))
            })
            .map(|(&i, _)| i)
            .collect();
        for i in done {
            let f = self.kept.remove(&i).expect("listed above");
            let end = effective_end(&f);
            if later_end((end, i), self.folded.as_ref().map(|(e, j, _)| (*e, *j))) {
                self.folded = Some((end, i, f));
            }
        }
        // What is left folds once asked past its start, or once stopped.
        self.quiet_until_ns = (self.kept.values())
            .filter(|f| f.start_ns >= t_ns)
            .map(|f| f.start_ns)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// How many faults kept [`FaultLog::asked_from`] at `t_ns` would fold: none once it was
    /// asked, whatever it skipped.
    #[cfg(test)]
    fn foldable(&self, t_ns: u64) -> usize {
        (self.kept.values())
            .filter(|f| {
                f.start_ns < t_ns && (f.stop_index.is_some() || !holds_back_service_effects(&f.f))
            })
            .count()
    }

    /// Forgets the faults stopped (or instants) that `keep` does not want: the pairing reads
    /// only those still open.
    pub(crate) fn forget_stopped(&mut self, keep: impl Fn(&Fault) -> bool) {
        self.kept.retain(|_, f| f.stop_index.is_none() || keep(f));
    }

    /// Keeps fault `i` for the words of a finding that names it.
    pub(crate) fn name(&mut self, i: usize) {
        let f = match (self.kept.get(&i), &self.folded) {
            (Some(f), _) => f.clone(),
            (None, Some((_, j, f))) if *j == i => f.clone(),
            _ => return,
        };
        self.named.entry(i).or_insert(f);
    }

    /// Forgets fault `i`'s value (what it was done to), once what is needed of it was read:
    /// its name, start and end stay.
    pub(crate) fn strip(&mut self, i: usize) {
        if let Some(f) = self.kept.get_mut(&i) {
            f.value = Value::Null;
        }
    }

    /// How many faults are kept (not folded or forgotten, or named).
    pub(crate) fn kept(&self) -> usize {
        self.kept.len() + self.named.len()
    }

    /// How many faults were read (the place the next one will have).
    pub(crate) fn len(&self) -> usize {
        self.next
    }

    /// Fault `i`, if kept (named, or not folded).
    pub(crate) fn get(&self, i: usize) -> Option<&Fault> {
        (self.named.get(&i))
            .or_else(|| self.kept.get(&i))
            .or_else(|| {
                self.folded
                    .as_ref()
                    .filter(|(_, j, _)| *j == i)
                    .map(|(_, _, f)| f)
            })
    }

    /// The history ends at `end_ns`: the faults never stopped end there.
    pub(crate) fn finish(&mut self, end_ns: u64) {
        let folded = self.folded.as_mut().map(|(_, _, f)| f);
        for f in (self.kept.values_mut().chain(self.named.values_mut())).chain(folded) {
            if f.stop_index.is_none() {
                f.end_ns = end_ns;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use history::{OpType, OpValue, Process, F};

    fn nem(index: u64, time_ms: u64, f: &str, value: Value) -> Op {
        let mut v = OpValue::default();
        if let Value::Object(m) = value {
            v.extra = m;
        }
        Op::new(
            index,
            time_ms * 1_000_000,
            Process::Nemesis,
            OpType::Info,
            F::from(f),
        )
        .with_value(v)
    }

    fn history(ops: Vec<Op>) -> History {
        History::new(ops).unwrap()
    }

    #[test]
    fn pairs_by_target_then_fifo_and_kill_with_restart() {
        let h = history(vec![
            nem(0, 10, "start-pause", serde_json::json!({"nodes": ["n1"]})),
            nem(1, 20, "start-pause", serde_json::json!({"nodes": ["n2"]})),
            nem(2, 30, "stop-pause", serde_json::json!({"nodes": ["n2"]})),
            nem(3, 40, "kill", serde_json::json!({"nodes": ["n3"]})),
            nem(4, 50, "start-partition", Value::Null),
            nem(5, 60, "start-partition", Value::Null),
            // no target: the oldest open partition
            nem(6, 70, "stop-partition", Value::Null),
            nem(7, 80, "restart", serde_json::json!({"nodes": ["n3"]})),
            nem(8, 90, "bump-clock", serde_json::json!({"delta_ms": 5})),
            nem(9, 100, "stop-pause", serde_json::json!({"nodes": ["n1"]})),
        ]);
        let f = Faults::build(&h);
        let spans: Vec<(u64, u64, Option<u64>)> = f
            .list()
            .iter()
            .map(|x| (x.start_index, x.end_ns / 1_000_000, x.stop_index))
            .collect();
        assert_eq!(
            spans,
            vec![
                (0, 100, Some(9)),
                (1, 30, Some(2)),
                (3, 80, Some(7)),
                (4, 70, Some(6)),
                // never stopped: lasts to the history's end
                (5, 100, None),
                (8, 90, Some(8)),
            ]
        );
        let active: Vec<u64> = f
            .active(31_000_000, 45_000_000)
            .iter()
            .map(|a| a.index)
            .collect();
        assert_eq!(active, vec![0, 3]);
        // The unstopped partition (started at 60 ms) never ends.
        assert_eq!(f.latest_end_started_before(61_000_000).unwrap().0, u64::MAX);
        assert_eq!(
            f.latest_end_started_before(45_000_000).unwrap().0,
            100_000_000
        );
        assert_eq!(f.latest_end_started_before(10_000_000), None);
    }

    /// The log read a nemesis event at a time, asked at instants that never go back and
    /// folding what those can no longer need, answers what the list of the events read so far
    /// answers, and names the same fault in the same words; what it keeps stays small.
    #[test]
    fn the_log_answers_as_the_list_of_what_was_read() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let event = (0..8u8, 0..3u8, 0..40u64);
        let events = proptest::collection::vec(event, 1..120);
        let asks = proptest::collection::vec(0..60u64, 120);
        let mut runner = TestRunner::new(Config::with_cases(400));
        runner
            .run(&(events, asks), |(events, asks)| {
                let (mut time_ms, mut ops) = (0, Vec::new());
                for (i, (what, node, gap)) in events.into_iter().enumerate() {
                    time_ms += gap;
                    let nodes = serde_json::json!({"nodes": [format!("n{node}")]});
                    let (f, v) = match what {
                        0 => ("start-pause", nodes),
                        1 => ("stop-pause", nodes),
                        2 => ("kill", nodes),
                        3 => ("restart", nodes),
                        4 => ("start-partition", Value::Null),
                        5 => ("stop-partition", Value::Null),
                        6 => ("bump-clock", serde_json::json!({"delta_ms": 5})),
                        _ => ("start-client-pause", serde_json::json!({"process": node})),
                    };
                    ops.push(nem(i as u64, time_ms, f, v));
                }
                let mut log = FaultLog::default();
                let (mut asked_ms, mut t) = (0, 0);
                for (read, op) in ops.iter().enumerate() {
                    log.push(op);
                    let now_ms = op.time_ns / 1_000_000;
                    let list = Faults::from_nemesis(&ops[..=read], op.time_ns);
                    // Asked at an instant not before the last, not after the time read to.
                    asked_ms = (asked_ms + asks[read] % 7).min(now_ms).max(asked_ms);
                    // At a fault's start, or just after; never back.
                    t = (asked_ms * 1_000_000 + asks[read] % 2).max(t);
                    let (got, want) = (
                        log.latest_end_started_before(t),
                        list.latest_end_started_before(t),
                    );
                    prop_assert_eq!(got, want, "asked at {} ns after {:?}", t, &ops[..=read]);
                    if let Some((_, i)) = got {
                        log.name(i);
                        let (a, b) = (log.get(i).unwrap(), &list.list()[i]);
                        prop_assert_eq!(
                            (a.start_index, &a.f, a.stop_index),
                            (b.start_index, &b.f, b.stop_index)
                        );
                    }
                    log.asked_from(t);
                    prop_assert_eq!(log.foldable(t), 0, "left foldable at {} ns", t);
                }
                Ok(())
            })
            .unwrap();
    }

    /// Thousands of faults stopped one after another: the log keeps a handful.
    #[test]
    fn the_log_keeps_what_can_still_be_asked_about() {
        let mut log = FaultLog::default();
        for k in 0..5_000u64 {
            let nodes = serde_json::json!({"nodes": ["n1"]});
            log.push(&nem(2 * k, 10 * k, "start-pause", nodes.clone()));
            log.push(&nem(2 * k + 1, 10 * k + 5, "stop-pause", nodes));
            assert!(log
                .latest_end_started_before(10 * k * 1_000_000 + 1)
                .is_some());
            log.asked_from(10 * k * 1_000_000 + 1);
        }
        assert!(log.kept_most <= 3, "kept {} at once", log.kept_most);
    }

    /// Two corners the log must answer as the list does once faults are folded: a tie of ends
    /// (the earlier place wins, whichever was folded), and a client pause folded while open
    /// whose stop comes after (named with it).
    #[test]
    fn the_log_names_what_the_list_names_after_folding() {
        let ms = 1_000_000;
        let (n1, n2) = (
            serde_json::json!({"nodes": ["n1"]}),
            serde_json::json!({"nodes": ["n2"]}),
        );
        let ops = [
            nem(0, 10, "start-pause", n1.clone()),
            nem(1, 20, "start-pause", n2.clone()),
            nem(2, 50, "stop-pause", n2),
            nem(3, 50, "stop-pause", n1),
        ];
        let mut log = FaultLog::default();
        for op in &ops[..3] {
            log.push(op);
        }
        // The second pause is folded, the first still open; then it stops at the same instant.
        log.asked_from(50 * ms + 1);
        log.push(&ops[3]);
        let want = Faults::from_nemesis(&ops, 50 * ms).latest_end_started_before(60 * ms);
        assert_eq!(want, Some((50 * ms, 0)));
        assert_eq!(log.latest_end_started_before(60 * ms), want);

        let pause = serde_json::json!({"process": 3});
        let ops = [
            nem(0, 10, "start-client-pause", pause.clone()),
            nem(1, 30, "stop-client-pause", pause),
        ];
        let mut log = FaultLog::default();
        log.push(&ops[0]);
        assert_eq!(log.latest_end_started_before(20 * ms), Some((0, 0)));
        log.asked_from(20 * ms);
        log.push(&ops[1]);
        log.name(0);
        let list = Faults::from_nemesis(&ops, 30 * ms);
        assert_eq!(log.get(0).unwrap().stop_index, list.list()[0].stop_index);
        assert_eq!(log.get(0).unwrap().stop_index, Some(1));
    }
}
