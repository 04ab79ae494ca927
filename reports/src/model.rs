//! What the report draws, computed from the history alone: hold bars with their lease bounds,
//! store ops, fault bands, per-process counts and per-time-bucket latency.
//!
//! This is a picture, not a proof: the checkers decide; these bars only show a reader where to
//! look. Bounds follow DESIGN.md's definitions so the picture agrees with the sentences.

use history::{History, Op, Outcome, Process, F};
use std::collections::{BTreeMap, HashMap};

/// One grant as the client saw it.
#[derive(Debug, Clone)]
pub struct Hold {
    pub process: u64,
    /// Position in [`Model::locks`].
    pub lock: u32,
    pub token: Option<u64>,
    /// The acquire's completion (or its invoke, for an indeterminate acquire).
    pub start_ns: u64,
    /// The lease is surely alive until here (last grant/renew invoke + ttl·(1−drift)).
    pub lease_lb_ns: u64,
    /// The lease is surely dead after here (last grant/renew completion + ttl·(1+drift)).
    pub dead_ns: u64,
    /// Until here the client believed it held the lock (its release's invoke, a failed renew,
    /// or its last event).
    pub end_ns: u64,
    /// The invoke of its release, if it released.
    pub release_ns: Option<u64>,
    /// The acquire was indeterminate: the grant may or may not exist.
    pub maybe: bool,
    /// History index of the acquire's completion (its invoke, when indeterminate): the op
    /// the checkers' sentences name.
    pub acquire_index: u64,
}

/// A fault, from its start event to its stop event (or the end of the history).
#[derive(Debug, Clone)]
pub struct Fault {
    /// `pause`, `kill`, `partition`, `clock`, `client-pause`, ...
    pub kind: String,
    pub label: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub index: u64,
}

/// A store read or write.
#[derive(Debug, Clone)]
pub struct StoreOp {
    pub process: u64,
    pub write: bool,
    pub key: String,
    pub token: Option<u64>,
    pub invoke_ns: u64,
    pub complete_ns: u64,
    pub outcome: Outcome,
    pub seq: Option<u64>,
    pub value: Option<i64>,
    pub error: Option<String>,
    pub index: u64,
}

/// Per-process counts for the fairness table.
#[derive(Debug, Clone, Default)]
pub struct ProcessStats {
    pub acquires: u64,
    pub granted: u64,
    pub refused: u64,
    pub indeterminate: u64,
    pub hold_ns: u64,
    pub writes_ok: u64,
}

/// Latency and throughput in one time bucket.
#[derive(Debug, Clone, Default)]
pub struct Bucket {
    pub start_ns: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub ok: u64,
    pub failed: u64,
}

/// An op's invoke and completion, looked up by history index.
#[derive(Debug, Clone)]
pub struct OpRow<'a> {
    pub invoke: &'a Op,
    pub complete: Option<&'a Op>,
    pub outcome: Option<Outcome>,
}

pub struct Model<'h> {
    pub h: &'h History,
    pub locks: Vec<String>,
    /// Sorted by start.
    pub holds: Vec<Hold>,
    pub faults: Vec<Fault>,
    /// Sorted by invoke.
    pub store_ops: Vec<StoreOp>,
    pub processes: BTreeMap<u64, ProcessStats>,
    pub buckets: Vec<Bucket>,
    pub bucket_ns: u64,
    pub end_ns: u64,
    /// Position in `h.ops` -> position in `h.operations()` (u32::MAX: none).
    op_of_pos: Vec<u32>,
}

/// Latency and throughput charts use this many time buckets: enough to see a fault's effect,
/// few enough that the SVG stays small for any history length.
pub const BUCKETS: usize = 150;

impl Hold {
    /// The end of the definite hold as DESIGN.md defines it: the earlier of the release's
    /// invoke and the lease's lower bound. A failed renew does not shorten it: the grant stands
    /// until the lease could have expired, whatever the service answered to the renew.
    pub fn definite_end_ns(&self) -> u64 {
        self.release_ns
            .unwrap_or(u64::MAX)
            .min(self.lease_lb_ns)
            .max(self.start_ns)
    }
}

impl<'h> Model<'h> {
    pub fn new(h: &'h History, drift: f64, default_ttl_ms: u64) -> Model<'h> {
        let end_ns = h.end_time_ns().max(1);
        let mut op_of_pos = vec![u32::MAX; h.ops.len()];
        let mut lock_ids: HashMap<&str, u32> = HashMap::new();
        let mut locks: Vec<String> = Vec::new();
        let mut holds: Vec<Hold> = Vec::new();
        // (process, lock) -> position in `holds` of the hold the process believes it has.
        let mut open: HashMap<(u64, u32), usize> = HashMap::new();
        let mut last_event_ns: HashMap<u64, u64> = HashMap::new();
        let mut store_ops = Vec::new();
        let mut processes: BTreeMap<u64, ProcessStats> = BTreeMap::new();
        let bucket_ns = end_ns.div_ceil(BUCKETS as u64).max(1);
        let mut lat: Vec<Vec<f32>> = vec![Vec::new(); BUCKETS];
        let mut buckets: Vec<Bucket> = (0..BUCKETS)
            .map(|i| Bucket {
                start_ns: i as u64 * bucket_ns,
                ..Default::default()
            })
            .collect();
        let lease = |ttl_ms: u64, factor: f64| (ttl_ms as f64 * 1e6 * factor) as u64;

        for (n, o) in h.operations().iter().enumerate() {
            op_of_pos[o.invoke] = n as u32;
            if let Some(c) = o.complete {
                op_of_pos[c] = n as u32;
            }
            let inv = h.invoke_of(o);
            let comp = h.complete_of(o);
            let Process::Client(p) = inv.process else {
                continue;
            };
            let t0 = inv.time_ns;
            let t1 = comp.map(|c| c.time_ns).unwrap_or(end_ns);
            last_event_ns.insert(p, t1);
            let stats = processes.entry(p).or_default();
            if comp.is_some() {
                let b = ((t1 / bucket_ns) as usize).min(BUCKETS - 1);
                lat[b].push(((t1 - t0) as f64 / 1e6) as f32);
                if o.outcome == Outcome::Ok {
                    buckets[b].ok += 1;
                } else {
                    buckets[b].failed += 1;
                }
            }
            if inv.f.is_store_op() {
                if inv.f == F::Write && o.outcome == Outcome::Ok {
                    stats.writes_ok += 1;
                }
                store_ops.push(StoreOp {
                    process: p,
                    write: inv.f == F::Write,
                    key: inv.key.clone().unwrap_or_default(),
                    token: inv.value.token,
                    invoke_ns: t0,
                    complete_ns: t1,
                    outcome: o.outcome,
                    seq: comp.and_then(|c| c.value.seq),
                    value: comp.and_then(|c| c.value.value).or(inv.value.value),
                    error: comp.and_then(|c| c.value.error.clone()),
                    index: inv.index,
                });
                continue;
            }
            let Some(lock_name) = inv.lock.as_deref() else {
                continue;
            };
            let lock = *lock_ids.entry(lock_name).or_insert_with(|| {
                locks.push(lock_name.to_string());
                (locks.len() - 1) as u32
            });
            let ttl_ms = comp
                .and_then(|c| c.value.ttl_ms)
                .or(inv.value.ttl_ms)
                .unwrap_or(default_ttl_ms);
            match (&inv.f, o.outcome) {
                (F::Acquire, outcome) => {
                    stats.acquires += 1;
                    match outcome {
                        Outcome::Ok => stats.granted += 1,
                        Outcome::Fail => stats.refused += 1,
                        _ => stats.indeterminate += 1,
                    }
                    if outcome == Outcome::Fail {
                        continue;
                    }
                    if let Some(prev) = open.remove(&(p, lock)) {
                        holds[prev].end_ns = t0;
                    }
                    let maybe = outcome != Outcome::Ok;
                    holds.push(Hold {
                        process: p,
                        lock,
                        token: comp.and_then(|c| c.value.token),
                        start_ns: if maybe { t0 } else { t1 },
                        lease_lb_ns: if maybe {
                            t0
                        } else {
                            t0 + lease(ttl_ms, 1.0 - drift)
                        },
                        dead_ns: t1 + lease(ttl_ms, 1.0 + drift),
                        end_ns: t1,
                        release_ns: None,
                        maybe,
                        acquire_index: comp.map(|c| c.index).unwrap_or(inv.index),
                    });
                    if !maybe {
                        open.insert((p, lock), holds.len() - 1);
                    }
                }
                (F::Renew, outcome) => {
                    let Some(&at) = open.get(&(p, lock)) else {
                        continue;
                    };
                    let hold = &mut holds[at];
                    match outcome {
                        Outcome::Ok => {
                            hold.lease_lb_ns =
                                hold.lease_lb_ns.max(t0 + lease(ttl_ms, 1.0 - drift));
                            hold.dead_ns = hold.dead_ns.max(t1 + lease(ttl_ms, 1.0 + drift));
                        }
                        // The client learns it lost the lock.
                        Outcome::Fail => {
                            hold.end_ns = t1;
                            open.remove(&(p, lock));
                        }
                        // It may have been extended; the process stops here either way.
                        _ => {
                            hold.dead_ns = hold.dead_ns.max(t1 + lease(ttl_ms, 1.0 + drift));
                            hold.end_ns = t1;
                            open.remove(&(p, lock));
                        }
                    }
                }
                (F::Release, _) => {
                    if let Some(at) = open.remove(&(p, lock)) {
                        holds[at].end_ns = t0;
                        holds[at].release_ns = Some(t0);
                    }
                }
                _ => {}
            }
        }
        for ((p, _), at) in open {
            holds[at].end_ns = last_event_ns
                .get(&p)
                .copied()
                .unwrap_or(end_ns)
                .max(holds[at].start_ns);
        }
        for hold in &mut holds {
            hold.end_ns = hold.end_ns.max(hold.start_ns);
            if !hold.maybe {
                if let Some(s) = processes.get_mut(&hold.process) {
                    s.hold_ns += hold.definite_end_ns() - hold.start_ns;
                }
            }
        }
        holds.sort_by_key(|x| (x.start_ns, x.acquire_index));
        store_ops.sort_by_key(|s: &StoreOp| (s.invoke_ns, s.index));
        for (b, l) in buckets.iter_mut().zip(lat.iter_mut()) {
            if l.is_empty() {
                continue;
            }
            l.sort_by(f32::total_cmp);
            let q = |x: f64| l[((l.len() - 1) as f64 * x).round() as usize] as f64;
            b.p50_ms = q(0.50);
            b.p95_ms = q(0.95);
            b.p99_ms = q(0.99);
            b.max_ms = q(1.0);
        }
        Model {
            h,
            locks,
            holds,
            faults: faults(h, end_ns),
            store_ops,
            processes,
            buckets,
            bucket_ns,
            end_ns,
            op_of_pos,
        }
    }

    /// The op with history index `index`: its invoke and completion.
    pub fn op(&self, index: u64) -> Option<OpRow<'h>> {
        let pos = self.h.ops.binary_search_by_key(&index, |o| o.index).ok()?;
        let n = self.op_of_pos[pos];
        if n == u32::MAX {
            return Some(OpRow {
                invoke: &self.h.ops[pos],
                complete: None,
                outcome: None,
            });
        }
        let o = &self.h.operations()[n as usize];
        Some(OpRow {
            invoke: self.h.invoke_of(o),
            complete: self.h.complete_of(o),
            outcome: Some(o.outcome),
        })
    }

    pub fn lock_id(&self, name: &str) -> Option<u32> {
        self.locks.iter().position(|l| l == name).map(|i| i as u32)
    }

    /// Holds overlapping `[from, to]` (believed span or lease), in start order.
    pub fn holds_in(&self, from_ns: u64, to_ns: u64) -> impl Iterator<Item = &Hold> {
        self.holds
            .iter()
            .take_while(move |x| x.start_ns <= to_ns)
            .filter(move |x| x.end_ns.max(x.dead_ns) >= from_ns)
    }

    /// Store ops invoked in `[from, to]`.
    pub fn store_ops_in(&self, from_ns: u64, to_ns: u64) -> &[StoreOp] {
        let a = self.store_ops.partition_point(|s| s.invoke_ns < from_ns);
        let b = self.store_ops.partition_point(|s| s.invoke_ns <= to_ns);
        &self.store_ops[a..b.max(a)]
    }
}

/// Pairs fault start and stop events into bands.
fn faults(h: &History, end_ns: u64) -> Vec<Fault> {
    let mut out: Vec<Fault> = Vec::new();
    // (kind, what) -> position in `out` of the open band.
    let mut open: HashMap<(String, String), usize> = HashMap::new();
    for op in h.nemesis() {
        let f = op.f.as_str();
        let what = target_of(op);
        let (kind, starts) = if let Some(k) = f.strip_prefix("start-") {
            (k.to_string(), true)
        } else if let Some(k) = f.strip_prefix("stop-") {
            (k.to_string(), false)
        } else if f == "kill" {
            ("kill".to_string(), true)
        } else if f == "restart" {
            ("kill".to_string(), false)
        } else {
            (f.to_string(), true)
        };
        let key = (kind.clone(), what.clone());
        if starts {
            if let Some(prev) = open.remove(&key) {
                out[prev].end_ns = op.time_ns;
            }
            out.push(Fault {
                label: if what.is_empty() {
                    kind.clone()
                } else {
                    format!("{kind} {what}")
                },
                kind,
                start_ns: op.time_ns,
                end_ns,
                index: op.index,
            });
            // Events that are neither start- nor kill are instants.
            if f.starts_with("start-") || f == "kill" {
                open.insert(key, out.len() - 1);
            } else {
                let last = out.len() - 1;
                out[last].end_ns = op.time_ns;
            }
        } else if let Some(at) = open.remove(&key) {
            out[at].end_ns = op.time_ns;
        }
    }
    out
}

/// What a nemesis op acted on: its nodes, or the paused client process.
fn target_of(op: &Op) -> String {
    let x = &op.value.extra;
    if let Some(nodes) = x.get("nodes").and_then(|n| n.as_array()) {
        let names: Vec<String> = nodes
            .iter()
            .map(|n| {
                n.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| n.to_string())
            })
            .collect();
        return names.join(",");
    }
    if let Some(p) = x.get("process") {
        return format!("p{p}");
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use history::{OpType, OpValue};

    fn op(index: u64, ms: u64, p: u64, kind: OpType, f: F, v: OpValue) -> Op {
        Op::new(index, ms * 1_000_000, Process::Client(p), kind, f)
            .with_lock("L0")
            .with_value(v)
    }

    #[test]
    fn holds_follow_design_definitions() {
        use OpType::*;
        let v = OpValue::default;
        let ops = vec![
            op(0, 0, 1, Invoke, F::Acquire, v().with_ttl_ms(1000)),
            op(
                1,
                10,
                1,
                Ok,
                F::Acquire,
                v().with_token(7).with_ttl_ms(1000),
            ),
            op(
                2,
                300,
                1,
                Invoke,
                F::Renew,
                v().with_token(7).with_ttl_ms(1000),
            ),
            op(3, 320, 1, Ok, F::Renew, v().with_token(7).with_ttl_ms(1000)),
            op(
                4,
                500,
                1,
                Invoke,
                F::Renew,
                v().with_token(7).with_ttl_ms(1000),
            ),
            op(5, 510, 1, Fail, F::Renew, v().with_error("not-holder")),
            op(6, 2000, 2, Invoke, F::Acquire, v().with_ttl_ms(1000)),
            op(
                7,
                2010,
                2,
                Ok,
                F::Acquire,
                v().with_token(8).with_ttl_ms(1000),
            ),
            op(8, 2100, 2, Invoke, F::Release, v().with_token(8)),
            op(9, 2110, 2, Ok, F::Release, v().with_token(8)),
            op(10, 2200, 3, Invoke, F::Acquire, v().with_ttl_ms(1000)),
            op(11, 2300, 3, Info, F::Acquire, v().with_error("timeout")),
        ];
        let h = History::new(ops).unwrap();
        let m = Model::new(&h, 0.0, 2000);
        assert_eq!(m.holds.len(), 3);
        let a = &m.holds[0];
        assert_eq!((a.process, a.token, a.start_ns), (1, Some(7), 10_000_000));
        // The renew invoked at 300 ms extends the lower bound to 1.3 s; the failed renew ends
        // the client's belief but not the definite hold.
        assert_eq!(a.lease_lb_ns, 1_300_000_000);
        assert_eq!(a.dead_ns, 1_320_000_000);
        assert_eq!(a.end_ns, 510_000_000);
        assert_eq!(a.definite_end_ns(), 1_300_000_000);
        assert_eq!(a.acquire_index, 1);
        let b = &m.holds[1];
        assert_eq!(
            b.definite_end_ns(),
            2_100_000_000,
            "ends at the release's invoke"
        );
        let c = &m.holds[2];
        assert!(c.maybe, "an indeterminate acquire may hold");
        assert_eq!(c.dead_ns, 3_300_000_000);
        assert_eq!(m.processes[&1].granted, 1);
        assert_eq!(m.processes[&3].indeterminate, 1);
        let row = m.op(3).unwrap();
        assert_eq!(row.invoke.index, 2);
        assert_eq!(row.outcome, Some(Outcome::Ok));
    }

    #[test]
    fn faults_pair_start_and_stop() {
        let n = |i: u64, ms: u64, f: &str| {
            Op::new(
                i,
                ms * 1_000_000,
                Process::Nemesis,
                OpType::Info,
                F::from(f),
            )
            .with_value(OpValue::default().with_extra("nodes", serde_json::json!(["n1"])))
        };
        let h = History::new(vec![
            n(0, 100, "start-pause"),
            n(1, 200, "kill"),
            n(2, 300, "stop-pause"),
            n(3, 400, "restart"),
            n(4, 500, "start-partition"),
        ])
        .unwrap();
        let m = Model::new(&h, 0.0, 1000);
        let got: Vec<(&str, u64, u64)> = m
            .faults
            .iter()
            .map(|f| {
                (
                    f.label.as_str(),
                    f.start_ns / 1_000_000,
                    f.end_ns / 1_000_000,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("pause n1", 100, 300),
                ("kill n1", 200, 400),
                ("partition n1", 500, 500)
            ]
        );
    }
}
