//! Whole-history figures for the report: counts by function and outcome, latency percentiles.

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

/// Counts every client op by function and outcome; latency covers the ops that completed
/// (ok, fail or info), since a pending op has no latency to show.
pub fn stats(h: &History) -> Stats {
    let mut ops: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut latencies: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut grants = 0;
    for o in h.operations() {
        let inv = h.invoke_of(o);
        let f = inv.f.as_str();
        if !ops.contains_key(f) {
            let zeros = ["ok", "fail", "info", "pending"]
                .into_iter()
                .map(|k| (k.to_string(), 0))
                .collect();
            ops.insert(f.to_string(), zeros);
        }
        *ops.get_mut(f)
            .expect("inserted above")
            .get_mut(o.outcome.as_str())
            .expect("every outcome has a slot") += 1;
        if o.outcome == Outcome::Ok && inv.f == history::F::Acquire {
            grants += 1;
        }
        if let Some(done) = h.complete_of(o) {
            latencies
                .entry(f)
                .or_default()
                .push(done.time_ns.saturating_sub(inv.time_ns));
        }
    }
    let latency = latencies
        .into_iter()
        .map(|(f, mut l)| {
            l.sort_unstable();
            let p = Percentiles {
                count: l.len() as u64,
                p50_ms: nearest_rank_ms(&l, 0.50),
                p95_ms: nearest_rank_ms(&l, 0.95),
                p99_ms: nearest_rank_ms(&l, 0.99),
                max_ms: nearest_rank_ms(&l, 1.0),
            };
            (f.to_string(), p)
        })
        .collect();
    Stats {
        events: h.ops.len() as u64,
        duration_ns: h.end_time_ns(),
        ops,
        latency,
        grants,
        nemesis_events: h.nemesis().count() as u64,
        extra: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::nearest_rank_ms;

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
