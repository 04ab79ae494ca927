//! Whole-history figures for the report: counts by function and outcome, latency percentiles.

use crate::model::{Func, FxMap, Model, NO_ERROR};
use crate::CheckConfig;
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

/// [`stats`] of a digested history.
pub fn stats_of(m: &Model) -> Stats {
    // Counted by function name, in first-seen order (the maps below sort them anyway).
    let mut names: Vec<&str> = Vec::new();
    let mut counts: Vec<[u64; 4]> = Vec::new();
    let mut latencies: Vec<Vec<u64>> = Vec::new();
    let mut grants = 0;
    for o in &m.ops {
        let f = o.func.as_str();
        // Few distinct names: a linear scan beats hashing.
        let slot = match names.iter().position(|n| *n == f) {
            Some(i) => i,
            None => {
                names.push(f);
                counts.push([0; 4]);
                latencies.push(Vec::new());
                names.len() - 1
            }
        };
        counts[slot][outcome_slot(o.outcome)] += 1;
        if o.outcome == Outcome::Ok && o.func == Func::Acquire {
            grants += 1;
        }
        if let Some(done) = o.complete_ns() {
            latencies[slot].push(done.saturating_sub(o.invoke_ns));
        }
    }
    let mut ops = BTreeMap::new();
    let mut latency = BTreeMap::new();
    for ((name, c), mut l) in names.into_iter().zip(counts).zip(latencies) {
        let by_outcome = OUTCOMES
            .iter()
            .zip(c)
            .map(|(k, n)| (k.to_string(), n))
            .collect();
        ops.insert(name.to_string(), by_outcome);
        if l.is_empty() {
            continue;
        }
        l.sort_unstable();
        latency.insert(
            name.to_string(),
            Percentiles {
                count: l.len() as u64,
                p50_ms: nearest_rank_ms(&l, 0.50),
                p95_ms: nearest_rank_ms(&l, 0.95),
                p99_ms: nearest_rank_ms(&l, 0.99),
                max_ms: nearest_rank_ms(&l, 1.0),
            },
        );
    }
    Stats {
        events: m.events,
        duration_ns: m.end_time_ns,
        ops,
        latency,
        grants,
        nemesis_events: m.nemesis.len() as u64,
        faults: fault_counts(m),
        reasons: reason_counts(m),
        extra: BTreeMap::new(),
    }
}

/// Fail and info completions by function, outcome and reason code (history::reason): the
/// breakdown that tells a refusal (`held`) from an answer the adapter did not understand
/// (`http-423`) or a service that was never reached (`connect: refused`).
fn reason_counts(m: &Model) -> BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> {
    // Errors are interned: count by error id first (one hash lookup per fail or info op),
    // then fold the few distinct ids into reason codes.
    let mut by_error: FxMap<(Func, usize, u32), u64> = FxMap::default();
    for o in &m.ops {
        if matches!(o.outcome, Outcome::Fail | Outcome::Info) {
            *by_error
                .entry((o.func, outcome_slot(o.outcome), o.error))
                .or_insert(0) += 1;
        }
    }
    let mut out: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> = BTreeMap::new();
    for ((func, slot, error), n) in by_error {
        let reason = match m.errors.get(error as usize) {
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

/// Faults started, by kind (`start-pause` counts as `pause`, a `kill` as `kill`), by the rule
/// coverage counts them with: an observation (`clock-observed`) is none.
fn fault_counts(m: &Model) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for f in m.faults.list() {
        let Some(kind) = crate::faults::opened_kind(&f.f) else {
            continue;
        };
        *out.entry(kind.to_string()).or_insert(0) += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{nearest_rank_ms, stats};

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
