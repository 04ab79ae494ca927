//! Liveness and fairness figures for `Stats.extra` (no verdict): per-client acquire attempts,
//! successes and wait times with Jain's fairness index, unavailability windows per lock with the
//! faults active then, and the ops that never completed.
//!
//! Definitions, since the model leaves them to the report:
//!
//! - A client is a process number (a crashed worker continues under a new one, so it counts as
//!   a new client).
//! - An acquire's wait runs from the invoke of the first acquire of the attempt (the first one
//!   after the process's previous grant) to the ok that ends it.
//! - Jain's index over the clients that tried at least once: `(Σx)² / (n·Σx²)` with `x` the
//!   grants each got; 1 is perfectly fair, `1/n` is one client getting everything.
//! - A lock op is unavailable when the service did not answer it definitely: `info` (timeout,
//!   lost connection), or `fail` with an error other than `held` / `not-holder` (5xx,
//!   `recovering`, ...). Overlapping `[invoke, complete]` windows of such ops on one lock merge
//!   into one unavailability window.

use crate::model::{Func, Model, NO_TARGET};
use history::Outcome;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// At most this many clients are listed one by one (a history with many crashes has many
/// process numbers); totals and the index cover all of them.
const CLIENTS_LISTED: usize = 64;
/// At most this many windows are listed per lock (the longest); the totals cover all.
const WINDOWS_LISTED: usize = 10;
/// At most this many never-completed ops are named.
const PENDING_LISTED: usize = 20;

fn percentiles_ms(mut v: Vec<u64>) -> Value {
    if v.is_empty() {
        return json!({"count": 0});
    }
    v.sort_unstable();
    let at = |p: f64| {
        let n = v.len();
        let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
        v[rank - 1] as f64 / 1e6
    };
    json!({"count": v.len(), "p50_ms": at(0.5), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": at(1.0)})
}

#[derive(Default)]
struct Client {
    attempts: u64,
    grants: u64,
    waits_ns: Vec<u64>,
    attempt_start_ns: Option<u64>,
}

/// The figures, keyed for `Stats.extra`: `fairness`, `unavailability`, `never_completed`.
pub fn liveness_stats(m: &Model) -> BTreeMap<String, Value> {
    let Scan {
        clients,
        unavailable,
        mut pending,
    } = scan(m);
    let mut extra = BTreeMap::new();
    extra.insert("fairness".to_string(), fairness(&clients));
    extra.insert("unavailability".to_string(), unavailability(m, unavailable));
    let n_pending = pending.len();
    pending.truncate(PENDING_LISTED);
    extra.insert(
        "never_completed".to_string(),
        json!({"count": n_pending, "ops": pending}),
    );
    extra
}

/// What one pass over the ops gathers.
struct Scan {
    clients: BTreeMap<u64, Client>,
    /// (lock, invoke, end, position) of the lock ops that found the service down.
    unavailable: Vec<(u32, u64, u64, usize)>,
    /// Indices of the ops never answered.
    pending: Vec<u64>,
}

fn scan(m: &Model) -> Scan {
    let mut s = Scan {
        clients: BTreeMap::new(),
        unavailable: Vec::new(),
        pending: Vec::new(),
    };
    let end_ns = m.end_time_ns;
    for (i, o) in m.ops.iter().enumerate() {
        if o.outcome == Outcome::Pending {
            s.pending.push(o.index);
        }
        if o.func == Func::Acquire {
            let c = s.clients.entry(o.process).or_default();
            c.attempts += 1;
            let start = *c.attempt_start_ns.get_or_insert(o.invoke_ns);
            if o.outcome == Outcome::Ok {
                c.grants += 1;
                c.waits_ns
                    .push(o.complete_or_max().min(end_ns).saturating_sub(start));
                c.attempt_start_ns = None;
            }
        }
        if o.func.is_lock_op() && o.target != NO_TARGET {
            let down = match o.outcome {
                Outcome::Info | Outcome::Pending => true,
                Outcome::Fail => !matches!(m.reason_of(o), Some("held") | Some("not-holder")),
                Outcome::Ok => false,
            };
            if down {
                let end = o.complete_ns().unwrap_or(end_ns).max(o.invoke_ns);
                s.unavailable.push((o.target, o.invoke_ns, end, i));
            }
        }
    }
    s
}

/// `fairness`: grants per client (Jain's index) and how long acquiring took.
fn fairness(clients: &BTreeMap<u64, Client>) -> Value {
    let xs: Vec<f64> = clients.values().map(|c| c.grants as f64).collect();
    let sum: f64 = xs.iter().sum();
    let sum_sq: f64 = xs.iter().map(|x| x * x).sum();
    let jain = if sum_sq > 0.0 {
        Some(sum * sum / (xs.len() as f64 * sum_sq))
    } else {
        None
    };
    let mut listed = Map::new();
    for (p, c) in clients.iter().take(CLIENTS_LISTED) {
        listed.insert(
            format!("p{p}"),
            json!({
                "acquire_attempts": c.attempts,
                "acquire_ok": c.grants,
                "wait": percentiles_ms(c.waits_ns.clone()),
            }),
        );
    }
    let all_waits: Vec<u64> = clients
        .values()
        .flat_map(|c| c.waits_ns.iter().copied())
        .collect();
    json!({
        "clients": clients.len(),
        "jain_index": jain,
        "acquire_attempts": clients.values().map(|c| c.attempts).sum::<u64>(),
        "acquire_ok": clients.values().map(|c| c.grants).sum::<u64>(),
        "wait": percentiles_ms(all_waits),
        "per_client": listed,
        "per_client_omitted": clients.len().saturating_sub(CLIENTS_LISTED),
    })
}

/// `unavailability`: per lock, the windows its ops found the service down (overlapping ones
/// merged), their total, and the longest with the faults active in them.
fn unavailability(m: &Model, mut unavailable: Vec<(u32, u64, u64, usize)>) -> Value {
    unavailable.sort_unstable();
    // lock -> (total ns, windows as (start, end, ops))
    type Windows = (u64, Vec<(u64, u64, u64)>);
    let mut by_lock: BTreeMap<&str, Windows> = BTreeMap::new();
    let mut k = 0;
    // Bounded by `unavailable.len()`: each pass consumes at least one op.
    while k < unavailable.len() {
        let (lock, start, mut end, _) = unavailable[k];
        debug_assert!(start <= end, "a window ends no earlier than its invoke");
        let mut count = 0;
        while k < unavailable.len() && unavailable[k].0 == lock && unavailable[k].1 <= end {
            end = end.max(unavailable[k].2);
            count += 1;
            k += 1;
        }
        let e = by_lock.entry(m.lock_name(lock)).or_default();
        e.0 += end - start;
        e.1.push((start, end, count));
    }
    let mut locks = Map::new();
    for (name, (total_ns, mut windows)) in by_lock {
        let n = windows.len();
        // The longest first, ties by start: deterministic.
        windows.sort_by_key(|&(s, e, _)| (std::cmp::Reverse(e - s), s));
        windows.truncate(WINDOWS_LISTED);
        windows.sort_unstable();
        let listed: Vec<Value> = windows
            .iter()
            .map(|&(s, e, count)| {
                let faults: Vec<Value> = m
                    .faults
                    .active(s, e)
                    .into_iter()
                    .map(|f| json!({"index": f.index, "f": f.f}))
                    .collect();
                json!({"start_ms": s as f64 / 1e6, "end_ms": e as f64 / 1e6, "ops": count, "faults": faults})
            })
            .collect();
        locks.insert(
            name.to_string(),
            json!({"total_ms": total_ns as f64 / 1e6, "windows": n, "longest": listed}),
        );
    }
    Value::Object(locks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CheckConfig;
    use history::{History, Op, OpType, OpValue, Process, F};

    fn op(i: u64, ms: u64, p: u64, kind: OpType, f: F, v: OpValue) -> Op {
        Op::new(i, ms * 1_000_000, Process::Client(p), kind, f)
            .with_lock("L0")
            .with_value(v)
    }

    #[test]
    fn waits_jain_and_unavailability() {
        use OpType::*;
        let ttl = || OpValue::default().with_ttl_ms(1000);
        let h = History::new(vec![
            // p1: held, then granted: one attempt of two acquires, waited 0..30 ms
            op(0, 0, 1, Invoke, F::Acquire, ttl()),
            op(
                1,
                10,
                1,
                Fail,
                F::Acquire,
                OpValue::default().with_error("held"),
            ),
            op(2, 20, 1, Invoke, F::Acquire, ttl()),
            op(3, 30, 1, Ok, F::Acquire, ttl().with_token(1)),
            // p2: two timeouts overlapping in time on L0 (one window), the second crashes it
            op(4, 40, 2, Invoke, F::Acquire, ttl()),
            op(5, 50, 3, Invoke, F::Acquire, ttl()),
            op(
                6,
                60,
                2,
                Fail,
                F::Acquire,
                OpValue::default().with_error("recovering"),
            ),
            op(
                7,
                90,
                3,
                Info,
                F::Acquire,
                OpValue::default().with_error("timeout"),
            ),
            // p4 never completes
            op(8, 95, 4, Invoke, F::Acquire, ttl()),
        ])
        .unwrap();
        let m = Model::new(&h, &CheckConfig::default());
        let x = liveness_stats(&m);
        let f = &x["fairness"];
        assert_eq!(f["clients"], 4);
        assert_eq!(f["acquire_attempts"], 5);
        assert_eq!(f["acquire_ok"], 1);
        // grants (1, 0, 0, 0): (1)^2 / (4 * 1)
        assert_eq!(f["jain_index"], 0.25);
        assert_eq!(f["per_client"]["p1"]["wait"]["max_ms"], 30.0);
        let u = &x["unavailability"]["L0"];
        assert_eq!(u["windows"], 2, "{u}");
        // [40, 90] merged from two overlapping ops, then p4's [95, end=95]
        assert_eq!(u["longest"][0]["start_ms"], 40.0);
        assert_eq!(u["longest"][0]["end_ms"], 90.0);
        assert_eq!(u["longest"][0]["ops"], 2);
        assert_eq!(x["never_completed"]["count"], 1);
        assert_eq!(x["never_completed"]["ops"][0], 8);
    }
}
