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

use crate::model::{ClientOp, Func, Model, NO_TARGET};
use crate::stats::{Latencies, LATENCIES_EXACT_MAX};
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

/// The faults that meet `[start, end]` (ns), by start (the model's, or those a streaming
/// reader read again): each start's index and function are listed.
pub(crate) type Active<'a> = dyn Fn(u64, u64) -> Vec<history::ActiveFault> + 'a;

/// The waits of one listed client kept exactly; past it they go into a histogram of 3
/// significant digits (as the latencies of `stats.rs`): 128 KiB per client listed.
const CLIENT_WAITS_EXACT_MAX: usize = 1 << 14;
/// Clients not yet crashed kept one by one; past it the one not listed with the lowest number
/// is folded into the totals as if it had crashed (counted in `clients_folded_early`): its
/// later grants then count as another client's. Every op of a client comes from one worker,
/// so a history has as many at once as the run had workers.
pub(crate) const CLIENTS_KEPT_MAX: usize = 65_536;

fn percentiles_ms(waits: &Latencies) -> Value {
    match waits.percentiles() {
        Some(p) => {
            json!({"count": p.count, "p50_ms": p.p50_ms, "p95_ms": p.p95_ms, "p99_ms": p.p99_ms, "max_ms": p.max_ms})
        }
        None => json!({"count": 0}),
    }
}

struct Client {
    attempts: u64,
    grants: u64,
    waits_ns: Latencies,
    attempt_start_ns: Option<u64>,
    /// An `info` ended one of its ops: it runs no further op.
    crashed: bool,
}

impl Default for Client {
    fn default() -> Self {
        Client {
            attempts: 0,
            grants: 0,
            waits_ns: Latencies::new(CLIENT_WAITS_EXACT_MAX),
            attempt_start_ns: None,
            crashed: false,
        }
    }
}

/// The figures, keyed for `Stats.extra`: `fairness`, `unavailability`, `never_completed`.
pub fn liveness_stats(m: &Model) -> BTreeMap<String, Value> {
    let mut counts = LivenessCounts::default();
    for o in &m.ops {
        counts.push(o, &m.errors, m.end_time_ns);
    }
    counts.figures(&|s, e| m.faults.active(s, e), &m.locks)
}

/// One lock's windows of unavailability so far.
#[derive(Default)]
struct Down {
    /// The window still open to ops invoked before its end: (start, end, ops).
    open: Option<(u64, u64, u64)>,
    total_ns: u64,
    windows: u64,
    /// The longest windows closed, at most [`WINDOWS_LISTED`].
    longest: Vec<(u64, u64, u64)>,
}

impl Down {
    /// A lock op that found the service down, from `start_ns` to `end_ns`. Ops come in invoke
    /// order: one invoked within the open window joins it.
    fn push(&mut self, start_ns: u64, end_ns: u64) {
        match &mut self.open {
            Some((_, end, count)) if start_ns <= *end => {
                *end = (*end).max(end_ns);
                *count += 1;
            }
            _ => {
                self.close();
                self.open = Some((start_ns, end_ns, 1));
            }
        }
    }

    /// As it would stand if the history ended here: its open window closed.
    fn closed_copy(&self) -> Down {
        let mut d = Down {
            open: self.open,
            total_ns: self.total_ns,
            windows: self.windows,
            longest: self.longest.clone(),
        };
        d.close();
        d
    }

    fn close(&mut self) {
        let Some(w) = self.open.take() else { return };
        self.total_ns += w.1 - w.0;
        self.windows += 1;
        self.longest.push(w);
        if self.longest.len() > WINDOWS_LISTED {
            // The longest first, ties by start: the last of that order leaves.
            let key = |&(s, e, _): &(u64, u64, u64)| (std::cmp::Reverse(e - s), s);
            let worst = (0..self.longest.len())
                .max_by_key(|&i| key(&self.longest[i]))
                .expect("more than the limit");
            self.longest.swap_remove(worst);
        }
    }
}

/// The clients' figures gathered op by op, in position order (invoke order): what the batch
/// reads of its ops, and the streaming reader of the ops it walks. What it keeps is bounded
/// by the clients listed, the clients not yet crashed and the locks, not by the history.
pub(crate) struct LivenessCounts {
    /// The [`CLIENTS_LISTED`] lowest-numbered clients, crashed or not.
    listed: BTreeMap<u64, Client>,
    /// The others not yet crashed.
    live: BTreeMap<u64, Client>,
    /// The others, crashed: how many, their attempts, grants and grants squared (Jain's sums,
    /// exact in integers).
    folded: (u64, u64, u64, u128),
    pub(crate) clients_folded_early: u64,
    /// [`CLIENTS_KEPT_MAX`] unless the tests set another.
    pub(crate) clients_kept_max: usize,
    all_waits: Latencies,
    down: BTreeMap<u32, Down>,
    pending: u64,
    /// The indices of the first [`PENDING_LISTED`] ops never answered.
    pending_listed: Vec<u64>,
}

impl Default for LivenessCounts {
    fn default() -> Self {
        LivenessCounts {
            listed: BTreeMap::new(),
            live: BTreeMap::new(),
            folded: (0, 0, 0, 0),
            clients_folded_early: 0,
            clients_kept_max: CLIENTS_KEPT_MAX,
            all_waits: Latencies::new(LATENCIES_EXACT_MAX),
            down: BTreeMap::new(),
            pending: 0,
            pending_listed: Vec::new(),
        }
    }
}

impl LivenessCounts {
    /// Op `o` as it finally stands (`errors`: the errors' texts by id; `end_ns`: the
    /// history's end, which a pending op's window reaches).
    pub(crate) fn push(&mut self, o: &ClientOp, errors: &[String], end_ns: u64) {
        if o.outcome == Outcome::Pending {
            self.pending += 1;
            if self.pending_listed.len() < PENDING_LISTED {
                self.pending_listed.push(o.index);
            }
        }
        if o.func == Func::Acquire {
            let c = self.client(o.process);
            c.attempts += 1;
            let start = *c.attempt_start_ns.get_or_insert(o.invoke_ns);
            if o.outcome == Outcome::Ok {
                c.grants += 1;
                let wait_ns = o.complete_or_max().min(end_ns).saturating_sub(start);
                c.waits_ns.push(wait_ns);
                c.attempt_start_ns = None;
                self.all_waits.push(wait_ns);
            }
        }
        if o.outcome == Outcome::Info {
            // A crashed process runs no further op: unless listed, it is folded.
            if let Some(c) = self.live.remove(&o.process) {
                self.fold(c);
            } else if let Some(c) = self.listed.get_mut(&o.process) {
                c.crashed = true;
            }
        }
        if o.func.is_lock_op() && o.target != NO_TARGET {
            let reason = || {
                errors
                    .get(o.error as usize)
                    .map(|e| history::reason::reason_of(e))
            };
            let down = match o.outcome {
                Outcome::Info | Outcome::Pending => true,
                Outcome::Fail => !matches!(reason(), Some("held") | Some("not-holder")),
                Outcome::Ok => false,
            };
            if down {
                let end = o.complete_ns().unwrap_or(end_ns).max(o.invoke_ns);
                self.down
                    .entry(o.target)
                    .or_default()
                    .push(o.invoke_ns, end);
            }
        }
    }

    fn fold(&mut self, c: Client) {
        let f = &mut self.folded;
        f.0 += 1;
        f.1 += c.attempts;
        f.2 += c.grants;
        f.3 += (c.grants as u128) * (c.grants as u128);
    }

    /// Client `p`'s figures, listed if its number is among the lowest.
    fn client(&mut self, p: u64) -> &mut Client {
        // Most ops are a live client's: one look each.
        if self.live.contains_key(&p) {
            return self.live.get_mut(&p).expect("just seen");
        }
        if !self.listed.contains_key(&p) {
            let last = self.listed.last_key_value().map(|(&q, _)| q);
            if self.listed.len() < CLIENTS_LISTED || last.is_some_and(|q| p < q) {
                self.listed.insert(p, Client::default());
                if self.listed.len() > CLIENTS_LISTED {
                    // Process numbers mostly grow: rarely, a listed one goes back to the rest
                    // (its waits, which only the listing shows, are no longer needed).
                    let (q, c) = self.listed.pop_last().expect("over the limit");
                    if c.crashed {
                        self.fold(c);
                    } else {
                        self.live.insert(q, c);
                    }
                }
            } else {
                if self.live.len() >= self.clients_kept_max {
                    let (_, c) = self.live.pop_first().expect("at the limit");
                    self.fold(c);
                    self.clients_folded_early += 1;
                }
                self.live.insert(p, Client::default());
            }
        }
        match self.listed.get_mut(&p) {
            Some(c) => c,
            None => self.live.get_mut(&p).expect("inserted above"),
        }
    }

    /// The figures so far, keyed for `Stats.extra`, with the faults active in the longest
    /// windows (`active`: the index and function of those that meet an interval, by start)
    /// and the locks' names (`locks`, by id).
    pub(crate) fn figures(&self, active: &Active<'_>, locks: &[String]) -> BTreeMap<String, Value> {
        let mut extra = BTreeMap::new();
        extra.insert("fairness".to_string(), self.fairness());
        extra.insert(
            "unavailability".to_string(),
            self.unavailability(active, locks),
        );
        extra.insert(
            "never_completed".to_string(),
            json!({"count": self.pending, "ops": self.pending_listed}),
        );
        extra
    }

    /// `fairness`: grants per client (Jain's index) and how long acquiring took.
    fn fairness(&self) -> Value {
        let (mut n, mut attempts, mut sum, mut sum_sq) = self.folded;
        for c in self.listed.values().chain(self.live.values()) {
            n += 1;
            attempts += c.attempts;
            sum += c.grants;
            sum_sq += (c.grants as u128) * (c.grants as u128);
        }
        let jain = if sum_sq > 0 {
            let sum = sum as f64;
            Some(sum * sum / (n as f64 * sum_sq as f64))
        } else {
            None
        };
        let mut listed = Map::new();
        for (p, c) in &self.listed {
            listed.insert(
                format!("p{p}"),
                json!({
                    "acquire_attempts": c.attempts,
                    "acquire_ok": c.grants,
                    "wait": percentiles_ms(&c.waits_ns),
                }),
            );
        }
        let mut out = json!({
            "clients": n,
            "jain_index": jain,
            "acquire_attempts": attempts,
            "acquire_ok": sum,
            "wait": percentiles_ms(&self.all_waits),
            "per_client": listed,
            "per_client_omitted": n.saturating_sub(CLIENTS_LISTED as u64),
        });
        if self.clients_folded_early > 0 {
            out["clients_folded_early"] = json!(self.clients_folded_early);
        }
        out
    }

    /// The windows `unavailability` lists (the longest of each lock, as if the history ended
    /// here): what the faults active in them are read for.
    pub(crate) fn listed_windows(&self) -> Vec<[u64; 2]> {
        let mut out = Vec::new();
        for d in self.down.values() {
            let d = d.closed_copy();
            out.extend(d.longest.iter().map(|&(s, e, _)| [s, e]));
        }
        out
    }

    /// `unavailability`: per lock, the windows its ops found the service down (overlapping ones
    /// merged), their total, and the longest with the faults active in them.
    fn unavailability(&self, active: &Active<'_>, locks: &[String]) -> Value {
        let mut by_name: BTreeMap<&str, Down> = BTreeMap::new();
        for (&lock, d) in &self.down {
            let d = d.closed_copy();
            let name = locks.get(lock as usize).map_or("?", |s| s.as_str());
            by_name.insert(name, d);
        }
        let mut out = Map::new();
        for (name, mut d) in by_name {
            d.longest.sort_unstable();
            let listed: Vec<Value> = d
                .longest
                .iter()
                .map(|&(s, e, count)| {
                    let faults: Vec<Value> = (active(s, e).into_iter())
                        .map(|f| json!({"index": f.index, "f": f.f}))
                        .collect();
                    json!({"start_ms": s as f64 / 1e6, "end_ms": e as f64 / 1e6, "ops": count, "faults": faults})
                })
                .collect();
            out.insert(
                name.to_string(),
                json!({"total_ms": d.total_ns as f64 / 1e6, "windows": d.windows, "longest": listed}),
            );
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An acquire of lock 0 by `p` from `at_ms` to `at_ms + took_ms`, ended `outcome`.
    fn acquire(p: u64, at_ms: u64, took_ms: u64, outcome: Outcome) -> ClientOp {
        let ms = 1_000_000;
        let mut o = ClientOp::invoked(Func::Acquire, p, 0, at_ms * ms, at_ms, false);
        o.complete(outcome, (at_ms + took_ms) * ms);
        o
    }

    /// Clients that come in any number order, more than are listed and more than are kept
    /// alive at once: the listing is the lowest numbers', the totals and Jain's index are the
    /// whole run's while every client is kept, and a client folded early is counted, its
    /// attempts and grants still in the totals.
    #[test]
    fn the_clients_figures_hold_past_the_listing_and_the_kept_limit() {
        // 150 clients, numbers shuffled (37 is prime to 150); client p gets p % 4 + 1 grants,
        // the odd ones crash after them. Each client's ops come together, so one folded early
        // has no op left: every figure is still the whole run's.
        let order: Vec<u64> = (0..150u64).map(|i| (i * 37) % 150 + 1).collect();
        let mut ops = Vec::new();
        let mut t = 0;
        for &p in &order {
            for _ in 0..p % 4 + 1 {
                ops.push(acquire(p, t, 2, Outcome::Ok));
                t += 3;
            }
            if p % 2 == 1 {
                ops.push(acquire(p, t, 1, Outcome::Info));
                t += 3;
            }
        }
        let grants: Vec<u64> = order.iter().map(|p| p % 4 + 1).collect();
        let sum: u64 = grants.iter().sum();
        let sum_sq: u64 = grants.iter().map(|x| x * x).sum();
        let jain = (sum * sum) as f64 / (150.0 * sum_sq as f64);
        let errors: Vec<String> = Vec::new();
        for kept_max in [CLIENTS_KEPT_MAX, 10] {
            let mut c = LivenessCounts {
                clients_kept_max: kept_max,
                ..LivenessCounts::default()
            };
            for o in &ops {
                c.push(o, &errors, t * 1_000_000);
            }
            let f = c.fairness();
            if kept_max == CLIENTS_KEPT_MAX {
                // Kept one by one: only the clients above the listing that never crashed
                // (the even numbers from 66 to 150).
                assert_eq!(c.live.len(), 43);
            }
            let mut want: Vec<String> = (1..=64).map(|p| format!("p{p}")).collect();
            want.sort();
            let got: Vec<String> = f["per_client"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            assert_eq!(got, want, "the 64 lowest numbers are listed");
            assert_eq!(f["per_client"]["p7"]["acquire_ok"], 4);
            assert_eq!(f["per_client"]["p7"]["wait"]["count"], 4);
            assert_eq!(f["acquire_ok"], sum);
            assert_eq!(f["wait"]["count"], sum);
            assert_eq!(f["wait"]["max_ms"], 2.0);
            let attempts = sum + 75;
            assert_eq!(f["acquire_attempts"], attempts);
            assert_eq!(f["clients"], 150);
            assert_eq!(f["per_client_omitted"], 150 - 64);
            assert_eq!(f["jain_index"], jain);
            // The even clients never crash: past 10 alive, the lowest are folded early.
            let early = f.get("clients_folded_early").and_then(|n| n.as_u64());
            assert_eq!(early.is_some(), kept_max == 10, "{f}");
        }
    }

    /// One lock down in 30 separate windows, each longer than the last but one: the ten
    /// longest are listed (in time order), the total and the count cover all 30.
    #[test]
    fn the_longest_windows_are_listed_and_the_total_counts_all() {
        let ms = 1_000_000;
        let mut c = LivenessCounts::default();
        let mut want = Vec::new();
        let mut total_ms = 0;
        for i in 0..30u64 {
            // Lengths 1..30 ms, but window 20 is 100 ms; each starts 1 s after the last.
            let len = if i == 20 { 100 } else { i + 1 };
            let start = i * 1000;
            let mut o = ClientOp::invoked(Func::Release, 1, 0, start * ms, i, false);
            o.complete(Outcome::Info, (start + len) * ms);
            c.push(&o, &[], 40_000 * ms);
            total_ms += len;
            want.push((len, start));
        }
        want.sort_by_key(|&(len, start)| (std::cmp::Reverse(len), start));
        want.truncate(10);
        let mut starts: Vec<f64> = want.iter().map(|&(_, s)| s as f64).collect();
        starts.sort_by(f64::total_cmp);
        let u = c.unavailability(&|_, _| Vec::new(), &["L0".to_string()]);
        let l = &u["L0"];
        assert_eq!(l["windows"], 30);
        assert_eq!(l["total_ms"], total_ms as f64);
        let got: Vec<f64> = (l["longest"].as_array().unwrap().iter())
            .map(|w| w["start_ms"].as_f64().unwrap())
            .collect();
        assert_eq!(got, starts);
    }
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
