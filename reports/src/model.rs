//! What the report draws: hold bars with their lease bounds, store ops, fault bands,
//! per-process counts and per-time-bucket latency.
//!
//! Holds and lease bounds are not reconstructed here: they are the checkers' own
//! [`checkers::Model`] of the same history, built with the drift the run was checked with, so
//! a bar drawn solid is a definite hold the checkers proved ([`checkers::Grant::holds`]), and
//! the lease marks are the bounds they judged by. What the report adds is only what the client
//! believed (from its own ops) and the indeterminate acquires, drawn as "maybe", never solid.

use checkers::{CheckConfig, ClientOp, Func, Grant, Segment, NO_TARGET};
use history::{History, Op, Outcome, Process, F};
use std::collections::{BTreeMap, HashMap};

/// One acquire that may have given its process a lock: a grant of the checkers' model, or an
/// indeterminate acquire.
#[derive(Debug, Clone)]
pub struct Hold {
    pub process: u64,
    /// The checkers' lock id: position in [`Model::locks`].
    pub lock: u32,
    pub token: Option<u64>,
    pub proof: Proof,
    /// The acquire's completion (its invoke, for an indeterminate acquire).
    pub start_ns: u64,
    /// Until here the client believed it held the lock: its release's invoke, a failed or
    /// indeterminate renew's completion, its next acquire of the lock, or its last event.
    pub end_ns: u64,
    /// History index of the acquire's completion (its invoke, when it never completed): the op
    /// the checkers' sentences name.
    pub acquire_index: u64,
}

/// What the history proves about a [`Hold`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// An ok acquire: position in the checkers' `grants`, whose definite holds and lease bounds
    /// are drawn.
    Grant(u32),
    /// An indeterminate acquire: the service may or may not have granted it, and nothing is
    /// proven. If it did, the lease is surely dead after `dead_ns` (`None`: the acquire never
    /// completed or named no ttl, so no bound).
    Maybe { dead_ns: Option<u64> },
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
    /// Acquires answered `fail`: refused, or surely not done.
    pub failed: u64,
    pub indeterminate: u64,
    /// The length of its definite holds, as the checkers have them.
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
    /// The checkers' model of `h`: the only source of definite holds and lease bounds.
    pub checks: checkers::Model,
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

impl StoreOp {
    /// Process `process`'s read or write from its invoke and completion (`None`: it never
    /// completed), over `span_ns` (invoke to completion, or to the history's end).
    fn of(
        process: u64,
        inv: &Op,
        comp: Option<&Op>,
        outcome: Outcome,
        span_ns: [u64; 2],
    ) -> StoreOp {
        debug_assert!(inv.f.is_store_op());
        StoreOp {
            process,
            write: inv.f == F::Write,
            key: inv.key.clone().unwrap_or_default(),
            token: inv.value.token,
            invoke_ns: span_ns[0],
            complete_ns: span_ns[1],
            outcome,
            seq: comp.and_then(|c| c.value.seq),
            value: comp.and_then(|c| c.value.value).or(inv.value.value),
            error: comp.and_then(|c| c.value.error.clone()),
            index: inv.index,
        }
    }
}

impl Hold {
    pub fn is_maybe(&self) -> bool {
        matches!(self.proof, Proof::Maybe { .. })
    }
}

impl<'h> Model<'h> {
    /// `cfg` must be what the run was checked with: its drift sets every lease bound.
    pub fn new(h: &'h History, cfg: &CheckConfig) -> Model<'h> {
        let checks = checkers::Model::new(h, cfg);
        let end_ns = h.end_time_ns().max(1);
        let mut op_of_pos = vec![u32::MAX; h.ops.len()];
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
                store_ops.push(StoreOp::of(p, inv, comp, o.outcome, [t0, t1]));
            }
        }
        let holds = holds(&checks, end_ns, &mut processes);
        store_ops.sort_by_key(|s: &StoreOp| (s.invoke_ns, s.index));
        percentiles(&mut buckets, &mut lat);
        Model {
            h,
            checks,
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

    /// Lock names, by the checkers' lock id.
    pub fn locks(&self) -> &[String] {
        &self.checks.locks
    }

    pub fn lock_id(&self, name: &str) -> Option<u32> {
        self.locks()
            .iter()
            .position(|l| l == name)
            .map(|i| i as u32)
    }

    /// The checkers' grant behind a hold; `None` for an indeterminate acquire.
    pub fn grant(&self, h: &Hold) -> Option<&Grant> {
        match h.proof {
            Proof::Grant(g) => self.checks.grants.get(g as usize),
            Proof::Maybe { .. } => None,
        }
    }

    /// The definite holds the checkers proved for a hold, in time order (none for an
    /// indeterminate acquire, and none for a grant the history proves nothing about).
    pub fn segments(&self, h: &Hold) -> &[Segment] {
        self.grant(h).map_or(&[], |g| g.holds.as_slice())
    }

    /// The parts of `[start_ns, end_ns]` where the client believed it held the lock but no
    /// definite hold is proven: after its lease's lower bound, or in a gap between segments.
    pub fn unproven_belief(&self, h: &Hold) -> Vec<(u64, u64)> {
        if h.is_maybe() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut t = h.start_ns;
        for s in self.segments(h) {
            if s.start_ns > t && t < h.end_ns {
                out.push((t, s.start_ns.min(h.end_ns)));
            }
            t = t.max(s.end_ns);
        }
        if t < h.end_ns {
            out.push((t, h.end_ns));
        }
        out
    }

    /// The latest time a hold's bar or marks reach: the client's belief, its definite holds,
    /// its lease's bounds.
    pub fn extent_end_ns(&self, h: &Hold) -> u64 {
        match (h.proof, self.grant(h)) {
            (_, Some(g)) => h
                .end_ns
                .max(g.hold_end_ns())
                .max(g.lease_lb_ns)
                .max(g.surely_dead_ns.unwrap_or(0)),
            (Proof::Maybe { dead_ns }, None) => dead_ns.unwrap_or(self.end_ns).max(h.end_ns),
            (Proof::Grant(_), None) => h.end_ns,
        }
    }

    /// Holds whose bar or marks overlap `[from, to]`, in start order.
    pub fn holds_in(&self, from_ns: u64, to_ns: u64) -> impl Iterator<Item = &Hold> {
        self.holds
            .iter()
            .take_while(move |x| x.start_ns <= to_ns)
            .filter(move |x| self.extent_end_ns(x) >= from_ns)
    }

    /// Store ops invoked in `[from, to]`.
    pub fn store_ops_in(&self, from_ns: u64, to_ns: u64) -> &[StoreOp] {
        let a = self.store_ops.partition_point(|s| s.invoke_ns < from_ns);
        let b = self.store_ops.partition_point(|s| s.invoke_ns <= to_ns);
        &self.store_ops[a..b.max(a)]
    }
}

/// Each bucket's latency percentiles, from the latencies (ms) of the ops it completed.
fn percentiles(buckets: &mut [Bucket], lat: &mut [Vec<f32>]) {
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
}

/// The holds, from the checkers' model: one per grant (its definite holds are the grant's) and
/// one per indeterminate acquire. Only the client's belief is read from the ops: it ends at
/// the first of its release's invoke, a failed or indeterminate renew's completion, its next
/// acquire of the lock, and its last event. Counts each process's acquires and definite holds.
fn holds(
    m: &checkers::Model,
    end_ns: u64,
    processes: &mut BTreeMap<u64, ProcessStats>,
) -> Vec<Hold> {
    let mut holds: Vec<Hold> = Vec::new();
    // (process, lock) -> position in `holds` of the hold the process believes it has.
    let mut open: HashMap<(u64, u32), usize> = HashMap::new();
    let mut last_event_ns: HashMap<u64, u64> = HashMap::new();
    // Grants are in op order: a cursor pairs each ok acquire with its grant.
    let mut next_grant = 0usize;
    for (pos, op) in m.ops.iter().enumerate() {
        let p = op.process;
        let done_ns = op.complete_ns().unwrap_or(end_ns);
        last_event_ns.insert(p, done_ns);
        if op.func != Func::Acquire || op.target == NO_TARGET {
            continue;
        }
        let stats = processes.entry(p).or_default();
        let Some(proof) = acquire_proof(m, op, pos, &mut next_grant, stats) else {
            continue;
        };
        // A new acquire ends the belief in the previous one, if nothing ended it before.
        if let Some(prev) = open.remove(&(p, op.target)) {
            holds[prev].end_ns = holds[prev].end_ns.min(op.invoke_ns);
        }
        let (start_ns, believed) = match proof {
            Proof::Grant(g) => {
                let g = &m.grants[g as usize];
                (g.complete_ns, belief_end(m, g, end_ns))
            }
            Proof::Maybe { .. } => (op.invoke_ns, Some(done_ns)),
        };
        holds.push(Hold {
            process: p,
            lock: op.target,
            token: if op.outcome == Outcome::Ok {
                op.token()
            } else {
                None
            },
            proof,
            start_ns,
            end_ns: believed.unwrap_or(u64::MAX),
            acquire_index: op.index,
        });
        if !holds[holds.len() - 1].is_maybe() {
            open.insert((p, op.target), holds.len() - 1);
        }
    }
    for hold in &mut holds {
        if hold.end_ns == u64::MAX {
            hold.end_ns = last_event_ns.get(&hold.process).copied().unwrap_or(end_ns);
        }
        hold.end_ns = hold.end_ns.max(hold.start_ns);
    }
    holds.sort_by_key(|x| (x.start_ns, x.acquire_index));
    holds
}

/// What an acquire proves, counted in its process's `stats`: an ok one is the next of the
/// checkers' grants (they are in op order; `next_grant` is the cursor), an indeterminate one
/// a hold that may be, and a refused one nothing (`None`).
fn acquire_proof(
    m: &checkers::Model,
    op: &ClientOp,
    pos: usize,
    next_grant: &mut usize,
    stats: &mut ProcessStats,
) -> Option<Proof> {
    stats.acquires += 1;
    match op.outcome {
        Outcome::Fail => {
            stats.failed += 1;
            None
        }
        Outcome::Ok => {
            stats.granted += 1;
            let g = *next_grant;
            debug_assert_eq!(m.grants.get(g).map(|g| g.op), Some(pos));
            *next_grant += 1;
            stats.hold_ns += m.grants[g]
                .holds
                .iter()
                .map(|s| s.end_ns - s.start_ns)
                .sum::<u64>();
            Some(Proof::Grant(g as u32))
        }
        Outcome::Info | Outcome::Pending => {
            stats.indeterminate += 1;
            Some(Proof::Maybe {
                dead_ns: m.surely_dead_if_applied(op),
            })
        }
    }
}

/// Where a grant's own ops end the client's belief that it holds the lock: its first release's
/// invoke, or the completion of a refused or indeterminate renew (it learns it lost the lock,
/// or stops). `None` when none of them does.
fn belief_end(m: &checkers::Model, g: &Grant, end_ns: u64) -> Option<u64> {
    for &pos in &g.epoch_ops {
        let op = &m.ops[pos as usize];
        match (op.func, op.outcome) {
            (Func::Release, _) => return Some(op.invoke_ns),
            (Func::Renew, Outcome::Ok) => {}
            (Func::Renew, _) => return Some(op.complete_ns().unwrap_or(end_ns)),
            _ => {}
        }
    }
    None
}

/// Pairs fault start and stop events into bands.
fn faults(h: &History, end_ns: u64) -> Vec<Fault> {
    let mut out: Vec<Fault> = Vec::new();
    // (kind, what) -> position in `out` of the open band.
    let mut open: HashMap<(String, String), usize> = HashMap::new();
    for op in h.nemesis() {
        let f = op.f.as_str();
        let what = target_of(op);
        let event = history::FaultOp::of(f);
        let (kind, starts) = match event {
            history::FaultOp::Opens(k) => (k.to_string(), true),
            history::FaultOp::Closes(k) => (k.to_string(), false),
            // An instant is a band of its own, of no width.
            history::FaultOp::Instant => (f.to_string(), true),
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
            if matches!(event, history::FaultOp::Opens(_)) {
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
    fn holds_are_the_checkers_grants() {
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
        let m = Model::new(&h, &CheckConfig::default());
        let ms = |x: u64| x * 1_000_000;
        let spans = |hold: &Hold| -> Vec<(u64, u64)> {
            m.segments(hold)
                .iter()
                .map(|s| (s.start_ns, s.end_ns))
                .collect()
        };
        assert_eq!(m.holds.len(), 3);
        let a = &m.holds[0];
        assert_eq!((a.process, a.token, a.start_ns), (1, Some(7), ms(10)));
        // The checkers' grant: the renew invoked at 300 ms replaces the lower bound with 1.3 s;
        // the refused renew ends the client's belief, not the definite hold.
        let g = m.grant(a).unwrap();
        assert_eq!(spans(a), vec![(ms(10), ms(1300))]);
        assert_eq!(
            (g.lease_lb_ns, g.surely_dead_ns),
            (ms(1300), Some(ms(1320)))
        );
        assert_eq!(a.end_ns, ms(510));
        assert!(m.unproven_belief(a).is_empty());
        assert_eq!(a.acquire_index, 1);
        let b = &m.holds[1];
        assert_eq!(
            spans(b),
            vec![(ms(2010), ms(2100))],
            "ends at the release's invoke"
        );
        assert_eq!(b.end_ns, ms(2100));
        let c = &m.holds[2];
        assert_eq!(
            c.proof,
            Proof::Maybe {
                dead_ns: Some(ms(3300))
            },
            "an indeterminate acquire may hold"
        );
        assert!(m.segments(c).is_empty() && m.grant(c).is_none());
        assert_eq!(m.processes[&1].granted, 1);
        assert_eq!(m.processes[&1].hold_ns, ms(1290));
        assert_eq!(m.processes[&3].indeterminate, 1);
        let row = m.op(3).unwrap();
        assert_eq!(row.invoke.index, 2);
        assert_eq!(row.outcome, Some(Outcome::Ok));
    }

    /// A renew after the lease's lower bound: the checkers prove two segments with a gap, and
    /// the client's belief through the gap and past the last bound is the unproven part.
    #[test]
    fn belief_outside_the_segments_is_unproven() {
        use OpType::*;
        let v = || OpValue::default().with_ttl_ms(100);
        let ops = vec![
            op(0, 0, 1, Invoke, F::Acquire, v()),
            op(1, 10, 1, Ok, F::Acquire, v().with_token(1)),
            op(2, 150, 1, Invoke, F::Renew, v().with_token(1)),
            op(3, 160, 1, Ok, F::Renew, v().with_token(1)),
            op(
                4,
                400,
                1,
                Invoke,
                F::Release,
                OpValue::default().with_token(1),
            ),
            op(5, 410, 1, Ok, F::Release, OpValue::default().with_token(1)),
        ];
        let h = History::new(ops).unwrap();
        let m = Model::new(&h, &CheckConfig::default());
        let ms = |x: u64| x * 1_000_000;
        let hold = &m.holds[0];
        let got: Vec<(u64, u64)> = m
            .segments(hold)
            .iter()
            .map(|s| (s.start_ns, s.end_ns))
            .collect();
        assert_eq!(got, vec![(ms(10), ms(100)), (ms(160), ms(250))]);
        assert_eq!(hold.end_ns, ms(400));
        assert_eq!(
            m.unproven_belief(hold),
            vec![(ms(100), ms(160)), (ms(250), ms(400))]
        );
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
        let m = Model::new(&h, &CheckConfig::default());
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
