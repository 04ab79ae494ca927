//! Checking at scale (issue 4): events/s and peak RSS of `lockpick check` on synthetic
//! histories written by `lockpick synth`, correct and with injected violations, 1% of client
//! ops indeterminate, and correct bank transfers (the graph checks' cost, issue 23).
//!
//! Run: `cargo bench --bench scale` (1M and 10M events), or name the sizes:
//! `cargo bench --bench scale -- 1000000 3000000`. Each size writes one history at a time into
//! a temporary directory (about 130 bytes an event) and deletes it before the next.
//! Peak RSS comes from `/usr/bin/time -f %M` around the check.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_lockpick");

/// The violations the injected histories carry: one of each family.
const INJECT: [&str; 5] = [
    "token-regressed-inferred",
    "double-grant",
    "stale-write-accepted",
    "lost-update",
    "stale-release-accepted",
];

/// Which synthetic history a row checks.
#[derive(Debug, Clone, Copy, PartialEq)]
enum History {
    /// The counter workload, correct.
    Correct,
    /// The same with [`INJECT`]'s violations.
    Injected,
    /// Bank transfers (8 clients, 16 accounts, two locks held at once), correct: the cost of
    /// the graph checks (deadlock's wait-for graph, the transfers' dependency graph).
    Bank,
}

fn synth(path: &Path, events: u64, history: History) {
    let inject = history == History::Injected;
    let mut cmd = Command::new(BIN);
    cmd.args([
        "synth",
        "--events",
        &events.to_string(),
        "--clients",
        "8",
        "--locks",
        "4",
        "--seed",
        "42",
        "--info-rate",
        "0.01",
        "--out",
        path.to_str().unwrap(),
    ]);
    if inject {
        for k in INJECT {
            cmd.args(["--inject", k]);
        }
    }
    if history == History::Bank {
        cmd.args(["--workload", "bank", "--accounts", "16"]);
    }
    let o = cmd.output().expect("run lockpick synth");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// (events in the file, seconds, peak RSS in MB, exit code)
fn check(path: &Path) -> (u64, f64, f64, i32) {
    let t = Instant::now();
    let o = Command::new("/usr/bin/time")
        .args(["-f", "%M", BIN, "check", "--json", path.to_str().unwrap()])
        .output()
        .expect("run /usr/bin/time lockpick check");
    let secs = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let rss_kb: f64 = stderr
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no RSS from /usr/bin/time: {stderr}"));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("results json");
    let events = r["stats"]["events"].as_u64().unwrap();
    (events, secs, rss_kb / 1024.0, o.status.code().unwrap_or(-1))
}

fn main() {
    let mut sizes: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.replace('_', "").parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = vec![1_000_000, 10_000_000];
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    println!("| events | history | check wall s | events/s | peak RSS MB | verdict |");
    println!("|---|---|---|---|---|---|");
    for &n in &sizes {
        for history in [History::Correct, History::Injected, History::Bank] {
            synth(&path, n, history);
            let (events, secs, rss_mb, code) = check(&path);
            let want = if history == History::Injected { 1 } else { 0 };
            assert_eq!(code, want, "unexpected verdict for {n} events, {history:?}");
            println!(
                "| {events} | {} | {secs:.2} | {:.0} | {rss_mb:.0} | {} |",
                match history {
                    History::Correct => "correct",
                    History::Injected => "injected (5 kinds)",
                    History::Bank => "bank (correct)",
                },
                events as f64 / secs,
                if want == 1 { "invalid" } else { "valid" },
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}
