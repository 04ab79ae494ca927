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
        let mut list: Vec<Fault> = Vec::new();
        // class -> positions in `list` of faults still open, oldest first
        let mut open: BTreeMap<&str, Vec<(usize, Option<&Value>)>> = BTreeMap::new();
        for op in nemesis {
            let f = op.f.as_str();
            match FaultOp::of(f) {
                FaultOp::Opens(class) => {
                    open.entry(class)
                        .or_default()
                        .push((list.len(), target(op)));
                    list.push(Fault {
                        start_index: op.index,
                        f: f.to_string(),
                        value: value_of(op),
                        start_ns: op.time_ns,
                        end_ns,
                        stop_index: None,
                    });
                }
                FaultOp::Closes(class) => {
                    let Some(queue) = open.get_mut(class) else {
                        continue; // a stop with nothing open heals nothing we know of
                    };
                    // Same target where the stop names one and an open fault matches, FIFO
                    // otherwise.
                    let want = target(op);
                    let at = want
                        .and_then(|w| queue.iter().position(|(_, t)| *t == Some(w)))
                        .unwrap_or(0);
                    if at < queue.len() {
                        let (i, _) = queue.remove(at);
                        list[i].end_ns = op.time_ns;
                        list[i].stop_index = Some(op.index);
                    }
                }
                FaultOp::Instant => list.push(Fault {
                    start_index: op.index,
                    f: f.to_string(),
                    value: value_of(op),
                    start_ns: op.time_ns,
                    end_ns: op.time_ns,
                    stop_index: Some(op.index),
                }),
            }
        }
        // Nemesis events come in history order, but sort anyway: indices ascend, times need not.
        list.sort_by_key(|f| (f.start_ns, f.start_index));
        let mut prefix_end = Vec::with_capacity(list.len());
        let mut best: Option<(u64, usize)> = None;
        for (i, f) in list.iter().enumerate() {
            let end = if !holds_back_service_effects(&f.f) {
                0
            } else if f.stop_index.is_some() {
                f.end_ns
            } else {
                u64::MAX
            };
            if best.is_none_or(|(e, _)| end > e) {
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
}
