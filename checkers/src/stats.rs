//! Whole-history figures for the report: counts by function and outcome, latency percentiles.

use crate::model::{ClientOp, Func, FxMap, Model, NO_ERROR};
use crate::CheckConfig;
use hdrhistogram::Histogram;
use history::{History, Outcome, Percentiles, Stats};
use std::collections::BTreeMap;

/// Nearest-rank percentile of sorted latencies, in ms.
fn nearest_rank_ms(sorted_ns: &[u64], p: f64) -> f64 {
    let n = sorted_ns.len();
    if n == 0 {
        return 0.0;
    }
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    sorted_ns[rank - 1] as f64 / 1e6
}

const OUTCOMES: [&str; 4] = ["ok", "fail", "info", "pending"];

fn outcome_slot(o: Outcome) -> usize {
    match o {
        Outcome::Ok => 0,
        Outcome::Fail => 1,
        Outcome::Info => 2,
        Outcome::Pending => 3,
    }
}

/// Counts every client op by function and outcome; latency covers the ops that completed
/// (ok, fail or info), since a pending op has no latency to show.
pub fn stats(h: &History) -> Stats {
    stats_of(&Model::new(h, &CheckConfig::default()))
}

/// [`stats`] of a digested history: its ops counted one by one, as a streaming reader counts
/// them as it walks them.
pub fn stats_of(m: &Model) -> Stats {
    let mut counts = OpCounts::default();
    for o in &m.ops {
        counts.push(o);
    }
    for op in &m.nemesis {
        counts.nemesis(op.f.as_str());
    }
    counts.stats(Whole {
        events: m.events,
        duration_ns: m.end_time_ns,
        errors: &m.errors,
    })
}

/// Latencies kept exactly per function. Past it a function's latencies go into a histogram
/// of 3 significant digits: its percentiles are then the top of their bucket, at most 0.1%
/// above the nearest rank of the exact list (the count and the maximum stay exact), and what
/// it keeps no longer grows with the history (some 200 KiB). 2 MiB of latencies per function.
pub(crate) const LATENCIES_EXACT_MAX: usize = 1 << 18;

/// Records `ns`, growing the histogram's range to fit it; past the largest range it can have
/// (near `u64::MAX` ns, some 584 years), at its top.
fn record(histogram: &mut Histogram<u64>, ns: u64) {
    if histogram.record(ns).is_err() {
        histogram.saturating_record(ns);
    }
}

/// Latencies (or waits) in ns, kept exactly up to a limit and in a histogram of 3 significant
/// digits past it: its percentiles are then the top of their bucket, at most 0.1% above the
/// exact nearest rank, the count and the maximum exact.
pub(crate) struct Latencies {
    exact_max: usize,
    kept: Kept,
}

enum Kept {
    Exact(Vec<u64>),
    Binned {
        histogram: Box<Histogram<u64>>,
        max_ns: u64,
    },
}

impl Latencies {
    /// Exact up to `exact_max` values.
    pub(crate) fn new(exact_max: usize) -> Latencies {
        Latencies {
            exact_max,
            kept: Kept::Exact(Vec::new()),
        }
    }

    pub(crate) fn push(&mut self, ns: u64) {
        match &mut self.kept {
            Kept::Exact(list) if list.len() < self.exact_max => list.push(ns),
            Kept::Exact(list) => {
                // 3 significant digits, and it grows its range to fit what it is given.
                let mut histogram = Histogram::new(3).expect("3 significant digits are valid");
                let max_ns = list.iter().copied().max().unwrap_or(0).max(ns);
                for &v in list.iter().chain([&ns]) {
                    record(&mut histogram, v);
                }
                self.kept = Kept::Binned {
                    histogram: Box::new(histogram),
                    max_ns,
                };
            }
            Kept::Binned { histogram, max_ns } => {
                record(histogram, ns);
                *max_ns = (*max_ns).max(ns);
            }
        }
    }

    /// Nearest-rank percentiles, none of no value.
    pub(crate) fn percentiles(&self) -> Option<Percentiles> {
        match &self.kept {
            Kept::Exact(l) if !l.is_empty() => {
                // Sorted in a copy: the counts may be asked again as more ops come.
                let mut l = l.clone();
                l.sort_unstable();
                Some(Percentiles {
                    count: l.len() as u64,
                    p50_ms: nearest_rank_ms(&l, 0.50),
                    p95_ms: nearest_rank_ms(&l, 0.95),
                    p99_ms: nearest_rank_ms(&l, 0.99),
                    max_ms: nearest_rank_ms(&l, 1.0),
                })
            }
            Kept::Exact(_) => None,
            Kept::Binned { histogram, max_ns } => {
                // The same nearest rank (`value_at_quantile` counts ceil(p * n), at least 1),
                // read at the top of the rank's bucket, never above the exact maximum.
                let at = |p: f64| histogram.value_at_quantile(p).min(*max_ns) as f64 / 1e6;
                Some(Percentiles {
                    count: histogram.len(),
                    p50_ms: at(0.50),
                    p95_ms: at(0.95),
                    p99_ms: at(0.99),
                    max_ms: *max_ns as f64 / 1e6,
                })
            }
        }
    }
}

/// The client ops counted so far, by function and outcome, with their latencies and the
/// errors of their fail and info answers, and the nemesis events: what [`Stats`] says of them.
pub(crate) struct OpCounts {
    /// Functions in first-seen order (the maps of [`Stats`] sort them anyway).
    funcs: Vec<Func>,
    counts: Vec<[u64; 4]>,
    latencies: Vec<Latencies>,
    grants: u64,
    /// Errors are interned: counted by error id (one hash lookup per fail or info op), and
    /// folded into reason codes at the end.
    by_error: FxMap<(Func, usize, u32), u64>,
    nemesis_events: u64,
    /// Faults started, by kind (`start-pause` counts as `pause`, a `kill` as `kill`), by the
    /// rule coverage counts them with: an observation (`clock-observed`) is none.
    faults: BTreeMap<String, u64>,
    /// [`LATENCIES_EXACT_MAX`] unless the tests set another.
    pub(crate) exact_max: usize,
}

impl Default for OpCounts {
    fn default() -> Self {
        OpCounts {
            funcs: Vec::new(),
            counts: Vec::new(),
            latencies: Vec::new(),
            grants: 0,
            by_error: FxMap::default(),
            nemesis_events: 0,
            faults: BTreeMap::new(),
            exact_max: LATENCIES_EXACT_MAX,
        }
    }
}

/// What [`Stats`] says of the history beside its client ops.
pub(crate) struct Whole<'a> {
    pub(crate) events: u64,
    pub(crate) duration_ns: u64,
    /// The errors' texts, by id.
    pub(crate) errors: &'a [String],
}

impl OpCounts {
    /// Counts client op `o`, as it finally stands.
    pub(crate) fn push(&mut self, o: &ClientOp) {
        // Few distinct functions: a linear scan beats hashing.
        let slot = match self.funcs.iter().position(|&f| f == o.func) {
            Some(i) => i,
            None => {
                self.funcs.push(o.func);
                self.counts.push([0; 4]);
                self.latencies.push(Latencies::new(self.exact_max));
                self.funcs.len() - 1
            }
        };
        self.counts[slot][outcome_slot(o.outcome)] += 1;
        if o.outcome == Outcome::Ok && o.func == Func::Acquire {
            self.grants += 1;
        }
        if let Some(done) = o.complete_ns() {
            let ns = done.saturating_sub(o.invoke_ns);
            self.latencies[slot].push(ns);
        }
        if matches!(o.outcome, Outcome::Fail | Outcome::Info) {
            let key = (o.func, outcome_slot(o.outcome), o.error);
            *self.by_error.entry(key).or_insert(0) += 1;
        }
    }

    /// Counts nemesis event `f` (its function).
    pub(crate) fn nemesis(&mut self, f: &str) {
        self.nemesis_events += 1;
        if let Some(kind) = crate::faults::opened_kind(f) {
            match self.faults.get_mut(kind) {
                Some(n) => *n += 1,
                None => {
                    self.faults.insert(kind.to_string(), 1);
                }
            }
        }
    }

    /// The figures of the ops counted, in a history of which `whole` says the rest.
    pub(crate) fn stats(&self, whole: Whole<'_>) -> Stats {
        let mut ops = BTreeMap::new();
        let mut latency = BTreeMap::new();
        let counted = self.funcs.iter().zip(&self.counts);
        for ((func, &c), l) in counted.zip(&self.latencies) {
            let by_outcome = OUTCOMES
                .iter()
                .zip(c)
                .map(|(k, n)| (k.to_string(), n))
                .collect();
            ops.insert(func.as_str().to_string(), by_outcome);
            if let Some(p) = l.percentiles() {
                latency.insert(func.as_str().to_string(), p);
            }
        }
        Stats {
            events: whole.events,
            duration_ns: whole.duration_ns,
            ops,
            latency,
            grants: self.grants,
            nemesis_events: self.nemesis_events,
            faults: self.faults.clone(),
            reasons: reason_counts(&self.by_error, whole.errors),
            extra: BTreeMap::new(),
        }
    }
}

/// Fail and info completions by function, outcome and reason code (history::reason): the
/// breakdown that tells a refusal (`held`) from an answer the adapter did not understand
/// (`http-423`) or a service that was never reached (`connect: refused`).
fn reason_counts(
    by_error: &FxMap<(Func, usize, u32), u64>,
    errors: &[String],
) -> BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> = BTreeMap::new();
    for (&(func, slot, error), &n) in by_error {
        let reason = match errors.get(error as usize) {
            Some(e) if error != NO_ERROR => history::reason::reason_of(e),
            _ => "unstated",
        };
        *out.entry(func.as_str().to_string())
            .or_default()
            .entry(OUTCOMES[slot].to_string())
            .or_default()
            .entry(reason.to_string())
            .or_insert(0) += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{nearest_rank_ms, stats, Latencies};

    /// Past the exact limit, each percentile is the exact list's nearest rank or at most a
    /// thousandth above it, and the count and maximum are exact: on spreads from constant to
    /// a heavy tail, zeros and hours included.
    #[test]
    fn past_the_exact_limit_percentiles_are_within_a_thousandth_above() {
        let ms = 1_000_000u64;
        let cases: Vec<(&str, Vec<u64>)> = vec![
            ("constant", vec![3 * ms; 5_000]),
            ("uniform", (0..20_000u64).map(|i| i * 997).collect()),
            (
                "heavy tail",
                (1..=10_000u64)
                    .map(|i| (i * i * i) % (3_600_000 * ms))
                    .collect(),
            ),
            ("zeros and an hour", {
                let mut v = vec![0; 9_000];
                v.extend([3_600_000 * ms; 1_000]);
                v
            }),
            (
                "one past the limit",
                (0..101u64).map(|i| 7 + i * 13 * ms).collect(),
            ),
        ];
        for (what, list) in cases {
            let mut exact = Latencies::new(usize::MAX);
            let mut binned = Latencies::new(100);
            for &ns in &list {
                exact.push(ns);
                binned.push(ns);
            }
            assert!(
                matches!(binned.kept, super::Kept::Binned { .. }),
                "{what}: binned"
            );
            let (e, b) = (exact.percentiles().unwrap(), binned.percentiles().unwrap());
            assert_eq!(
                (e.count, e.max_ms),
                (b.count, b.max_ms),
                "{what}: count, max"
            );
            for (p, x, y) in [
                (50, e.p50_ms, b.p50_ms),
                (95, e.p95_ms, b.p95_ms),
                (99, e.p99_ms, b.p99_ms),
            ] {
                // Within a thousandth above, and one ns for rounding below 1 µs.
                assert!(
                    x <= y && y <= x * 1.001 + 1e-6,
                    "{what}: p{p} {y} against {x}"
                );
            }
        }
    }

    /// Faults are counted by kind when they start; what a fault was observed to do
    /// (`clock-observed`) and how it ended are no faults of their own.
    #[test]
    fn faults_count_starts_not_observations() {
        let text = [
            r#"{"index":0,"time_ns":1,"process":"nemesis","type":"info","f":"start-pause","value":{"nodes":["n1"]}}"#,
            r#"{"index":1,"time_ns":2,"process":"nemesis","type":"info","f":"stop-pause","value":{"nodes":["n1"]}}"#,
            r#"{"index":2,"time_ns":3,"process":"nemesis","type":"info","f":"start-clock","value":{"nodes":["n1"],"offset_ms":6000}}"#,
            r#"{"index":3,"time_ns":4,"process":"nemesis","type":"info","f":"clock-observed","value":{"node":"n1","offset_ms":6001}}"#,
            r#"{"index":4,"time_ns":5,"process":"nemesis","type":"info","f":"stop-clock","value":{"nodes":["n1"]}}"#,
            r#"{"index":5,"time_ns":6,"process":"nemesis","type":"info","f":"clock-observed","value":{"node":"n1","offset_ms":0}}"#,
        ]
        .join("\n")
            + "\n";
        let (ops, _) =
            history::read_ops_from(text.as_bytes(), std::path::Path::new("t.jsonl")).unwrap();
        let h = history::History::new(ops).unwrap();
        let got = serde_json::to_value(stats(&h).faults).unwrap();
        assert_eq!(got, serde_json::json!({"pause": 1, "clock": 1}));
    }

    /// Fail and info completions by op, outcome and reason code, read from the errors as
    /// written (new `reason; detail` and older `http-500: body` alike); ok and pending ops
    /// have none.
    #[test]
    fn reasons_are_counted_by_code() {
        let lines = [
            (0, "invoke", "acquire", r#"{}"#),
            (0, "fail", "acquire", r#"{"error":"held"}"#),
            (1, "invoke", "acquire", r#"{}"#),
            (
                1,
                "info",
                "acquire",
                r#"{"error":"http-423; {\"error\":\"held\"}"}"#,
            ),
            (2, "invoke", "acquire", r#"{}"#),
            (2, "info", "acquire", r#"{"error":"http-423: older form"}"#),
            (3, "invoke", "acquire", r#"{}"#),
            (
                3,
                "fail",
                "acquire",
                r#"{"error":"connect: refused; os error 111"}"#,
            ),
            (4, "invoke", "acquire", r#"{}"#),
            (4, "ok", "acquire", r#"{"token":1}"#),
            (4, "invoke", "release", r#"{"token":1}"#),
            (4, "fail", "release", r#"{}"#),
            (5, "invoke", "acquire", r#"{}"#),
        ];
        let text: String = lines
            .iter()
            .enumerate()
            .map(|(i, (p, t, f, v))| {
                format!(
                    "{{\"index\":{i},\"time_ns\":{i},\"process\":{p},\"type\":\"{t}\",\"f\":\"{f}\",\"lock\":\"L0\",\"value\":{v}}}\n"
                )
            })
            .collect();
        let (ops, _) =
            history::read_ops_from(text.as_bytes(), std::path::Path::new("t.jsonl")).unwrap();
        let h = history::History::new(ops).unwrap();
        let got = serde_json::to_value(stats(&h).reasons).unwrap();
        let want = serde_json::json!({
            "acquire": {
                "fail": {"held": 1, "connect: refused": 1},
                "info": {"http-423": 2}
            },
            "release": {"fail": {"unstated": 1}}
        });
        assert_eq!(got, want);
    }

    #[test]
    fn nearest_rank() {
        let v: Vec<u64> = (1..=100).map(|i| i * 1_000_000).collect();
        assert_eq!(nearest_rank_ms(&v, 0.5), 50.0);
        assert_eq!(nearest_rank_ms(&v, 0.95), 95.0);
        assert_eq!(nearest_rank_ms(&v, 0.99), 99.0);
        assert_eq!(nearest_rank_ms(&v, 1.0), 100.0);
        assert_eq!(nearest_rank_ms(&[7_000_000], 0.5), 7.0);
        assert_eq!(nearest_rank_ms(&[], 0.5), 0.0);
    }
}
