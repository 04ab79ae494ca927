//! The two throughput figures of BENCHMARKS.md, measured end to end with the release binary:
//!
//! 1. harness: lock ops/s the harness sustains against the embedded lockd with full history
//!    recording (mutex workload, no faults, zero hold so the service is never the bottleneck
//!    by design of the workload);
//! 2. check: history events/s of `lockpick check` on a generated correct history, parse
//!    included.
//!
//! Run: `cargo bench --bench throughput` (add `-- quick` for one short repetition of each).
//! Prints each repetition and the median; machines here are shared and noisy, so compare
//! medians from one run.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// the simulator names its faults' ops from them, and the checkers read them.
use nemesis as _;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

mod common;
use common::median;

const BIN: &str = env!("CARGO_BIN_EXE_lockpick");

fn harness_ops_per_s(out: &Path, duration_s: u64, seed: u64) -> (f64, u64) {
    let status = Command::new(BIN)
        .args([
            "run",
            "--out",
            out.to_str().unwrap(),
            "--workload",
            "mutex",
            "--clients",
            "10",
            "--locks",
            "10",
            "--hold",
            "0ms..0ms",
            "--nemesis",
            "none",
            "--duration",
            &format!("{duration_s}s"),
            "--seed",
            &seed.to_string(),
            "--name",
            "bench",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run lockpick");
    assert_eq!(status.code(), Some(0), "the bench run was not valid");
    let dir = out.join(std::fs::read_link(out.join("latest")).unwrap());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let mut lock_ops = 0u64;
    for f in ["acquire", "renew", "release"] {
        if let Some(by) = r["stats"]["ops"][f].as_object() {
            lock_ops += by.values().map(|v| v.as_u64().unwrap()).sum::<u64>();
        }
    }
    let secs = r["stats"]["duration_ns"].as_u64().unwrap() as f64 / 1e9;
    (
        lock_ops as f64 / secs,
        r["stats"]["events"].as_u64().unwrap(),
    )
}

fn check_events_per_s(history: &Path, events: u64) -> f64 {
    let t = Instant::now();
    let o = Command::new(BIN)
        .args(["check", history.to_str().unwrap()])
        .output()
        .expect("run lockpick check");
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    events as f64 / secs
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let reps = if quick { 1 } else { 3 };
    let tmp = tempfile::tempdir().unwrap();

    let duration_s = if quick { 3 } else { 10 };
    let mut rates = Vec::new();
    for rep in 0..reps {
        let (rate, events) = harness_ops_per_s(tmp.path(), duration_s, rep as u64 + 1);
        println!("harness rep {rep}: {rate:.0} lock ops/s ({events} events in {duration_s} s)");
        rates.push(rate);
    }
    println!(
        "harness median: {:.0} lock ops/s (target >= 5000)",
        median(rates)
    );

    let events_target = if quick { 200_000 } else { 1_000_000 };
    let params = checkers::gen::GenParams {
        clients: 8,
        locks: 4,
        events: events_target,
        ..Default::default()
    };
    let ops = checkers::gen::correct_history(42, &params);
    let path = tmp.path().join("history.jsonl");
    let mut w = history::HistoryWriter::create(&path).unwrap();
    for op in &ops {
        w.write(op).unwrap();
    }
    drop(w);
    let size_mb = std::fs::metadata(&path).unwrap().len() as f64 / 1e6;
    let mut rates = Vec::new();
    for rep in 0..reps {
        let rate = check_events_per_s(&path, ops.len() as u64);
        println!(
            "check rep {rep}: {rate:.0} events/s ({} events, {size_mb:.0} MB)",
            ops.len()
        );
        rates.push(rate);
    }
    println!(
        "check median: {:.0} events/s (target >= 1000000)",
        median(rates)
    );
}
