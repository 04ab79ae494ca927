//! Live verdicts (issue 22), two figures for BENCHMARKS.md:
//!
//! 1. `--stop-on-violation` against `--unsafe racy` (no faults: it double-grants at once) and
//!    `--unsafe reuse-tokens` (every fault: it goes wrong after a kill, seconds in): how long
//!    after the violation it stopped on became provable (the last event of its ops) the live
//!    check proved it, and how long after that the clients' last op was sent (the run's end of
//!    traffic), on several seeds; with the whole run's wall time (start, stop, heal, check,
//!    report).
//! 2. What one live check costs as the history grows: `checkers::check_prefix` over a generated
//!    correct history of 100k, 1M and 10M events (median of 3), with the byte floor (reading
//!    the same bytes) measured beside it. A run waits three times a check's cost before the
//!    next, so a live verdict is at most about four checks old.
//!
//! 3. What the streaming rules cost as the history grows: the same files handed to a
//!    `checkers::Follower` a second of a run at a time, the first reads' cost beside the last's.
//!
//! Run: `cargo bench --bench live` (5 seeds, 100k/1M/10M), or
//! `cargo bench --bench live -- SEEDS [EVENTS...]` (`0` for no history sizes).

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// the simulator names its faults' ops from them, and the checkers read them.
use nemesis as _;

use serde_json::Value;
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::median;

const BIN: &str = env!("CARGO_BIN_EXE_lockpick");

/// The targets stopped: a label and `lockpick run`'s flags (each run gets `--stop-on-violation
/// --seed S` too).
const TARGETS: [(&str, &[&str]); 2] = [
    (
        "racy, no faults",
        &[
            "--workload",
            "mutex",
            "--nemesis",
            "none",
            "--unsafe",
            "racy",
            "--ttl",
            "1s",
            "--hold",
            "50ms..600ms",
            "--duration",
            "60s",
        ],
    ),
    (
        "reuse-tokens, every fault",
        &[
            "--unsafe",
            "reuse-tokens",
            "--ttl",
            "1s",
            "--duration",
            "60s",
        ],
    ),
];

/// One stopped run: (wall s, proven - when the violation it stopped on became provable s,
/// the clients' last invoke - that s, what it stopped on).
fn stop_once(seed: u64, flags: &[&str], out: &Path) -> (f64, f64, f64, String) {
    let began = Instant::now();
    let o = Command::new(BIN)
        .args(["run", "--out", out.to_str().unwrap()])
        .args(flags)
        .args(["--stop-on-violation", "--seed", &seed.to_string()])
        .output()
        .expect("lockpick runs");
    let wall = began.elapsed().as_secs_f64();
    assert_eq!(
        o.status.code(),
        Some(1),
        "seed {seed} {flags:?}: not invalid"
    );
    let dir = out.join(std::fs::read_link(out.join("latest")).unwrap());
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let events: Vec<Value> = history
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    // When a violation became provable: the time of the last event among its ops (an op is
    // named by its completion's index).
    let time_of = |index: u64| {
        events
            .iter()
            .find(|e| e["index"] == index)
            .and_then(|e| e["time_ns"].as_u64())
            .unwrap()
    };
    let reason = r["completeness"]["reason"].as_str().unwrap();
    // `double-grant on L0 proven at 0.27 s (ops 5, 6, from 0.02 s to 0.25 s)`.
    let ops: Vec<u64> = reason
        .split("(ops ")
        .nth(1)
        .and_then(|s| s.split(", from").next())
        .unwrap_or_else(|| panic!("seed {seed}: {reason}"))
        .split(", ")
        .map(|o| o.parse().unwrap())
        .collect();
    let provable_s = ops.iter().map(|&o| time_of(o)).max().unwrap() as f64 / 1e9;
    let proven_s: f64 = reason
        .split("proven at ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("seed {seed}: {reason}"));
    let last_invoke_ns = events
        .iter()
        .filter(|e| e["type"] == "invoke" && e["process"].is_u64())
        .filter_map(|e| e["time_ns"].as_u64())
        .max()
        .unwrap();
    let what = reason.split(" (").next().unwrap_or_default().to_string();
    (
        wall,
        proven_s - provable_s,
        last_invoke_ns as f64 / 1e9 - provable_s,
        what,
    )
}

fn write_history(path: &Path, events: usize) {
    let params = checkers::gen::GenParams {
        clients: 8,
        locks: 4,
        events,
        ..checkers::gen::GenParams::default()
    };
    let mut w = history::HistoryWriter::create(path).unwrap();
    checkers::gen::correct_history_into(1, &params, &mut |ops| {
        for op in ops {
            w.write(op).unwrap();
        }
    });
}

fn read_all(path: &Path) -> Duration {
    let began = Instant::now();
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    // Bounded by the file.
    while f.read(&mut buf).unwrap() > 0 {}
    began.elapsed()
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let seeds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let mut sizes: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![100_000, 1_000_000, 10_000_000];
    }
    let tmp = tempfile::tempdir().unwrap();
    // `0` as the only size: the stop figures alone.
    sizes.retain(|&n| n > 0);

    for (label, flags) in TARGETS {
        println!("{label}:\n");
        println!("| seed | stopped on | run wall | proven after it was provable | clients' last op after it |");
        println!("|---|---|---|---|---|");
        let (mut proven, mut stopped, mut walls) = (Vec::new(), Vec::new(), Vec::new());
        for seed in 1..=seeds {
            let out = tmp.path().join(format!("runs-{}-{seed}", label.len()));
            let (wall, p, s, what) = stop_once(seed, flags, &out);
            println!("| {seed} | {what} | {wall:.2} s | {p:.3} s | {s:.3} s |");
            proven.push(p);
            stopped.push(s);
            walls.push(wall);
        }
        println!(
            "| median | | {:.2} s | {:.3} s | {:.3} s |\n",
            median(walls),
            median(proven),
            median(stopped)
        );
    }

    println!(
        "| events | bytes | read (floor) | one live check (check_prefix) | ratio | checks of 3 |"
    );
    println!("|---|---|---|---|---|---|");
    let cfg = checkers::CheckConfig::default();
    let mut follows = Vec::new();
    for events in sizes {
        let path = tmp.path().join(format!("h{events}.jsonl"));
        write_history(&path, events);
        let bytes = std::fs::metadata(&path).unwrap().len();
        let floor = median((0..3).map(|_| read_all(&path).as_secs_f64()).collect());
        let runs: Vec<f64> = (0..3)
            .map(|_| {
                let began = Instant::now();
                let r = checkers::check_prefix(&path, bytes, &cfg).unwrap();
                assert_eq!(r.valid, history::Validity::Valid);
                began.elapsed().as_secs_f64()
            })
            .collect();
        let shown: Vec<String> = runs.iter().map(|r| format!("{r:.2}")).collect();
        let m = median(runs);
        println!(
            "| {events} | {bytes} | {floor:.3} s | {m:.3} s | {:.0}x | {} |",
            m / floor,
            shown.join(" / ")
        );
        follows.push((events, follow_in_stretches(&path, &cfg)));
        let _ = std::fs::remove_file(&path);
    }
    println!(
        "\nThe streaming rules (checkers::Follower) handed the same file a second of a run at its \
         top rate at a time ({STRETCH_EVENTS} events):\n"
    );
    println!("| events | first three reads (median) | last three reads (median) | whole follow | events/s |");
    println!("|---|---|---|---|---|");
    for (events, (first, last, whole)) in follows {
        println!(
            "| {events} | {:.1} ms | {:.1} ms | {whole:.2} s | {:.2}M |",
            first * 1e3,
            last * 1e3,
            events as f64 / whole / 1e6
        );
    }
}

/// A second of a run at the harness's top rate (21k ops a second, two events each).
const STRETCH_EVENTS: usize = 42_000;

/// Hands a follower `path` in stretches of [`STRETCH_EVENTS`] lines, as a live check reads a
/// run's history: the median time of its first three reads and of its last three, and the
/// whole follow's, in seconds. Each read should cost what its lines cost, whatever came before.
fn follow_in_stretches(path: &Path, cfg: &checkers::CheckConfig) -> (f64, f64, f64) {
    use std::io::BufRead;
    let mut f = checkers::Follower::new(path, cfg);
    let mut input = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path).unwrap());
    let mut stretch = Vec::new();
    let mut reads = Vec::new();
    // Bounded by the file's lines.
    loop {
        stretch.clear();
        for _ in 0..STRETCH_EVENTS {
            if input.read_until(b'\n', &mut stretch).unwrap() == 0 {
                break;
            }
        }
        if stretch.is_empty() {
            break;
        }
        let began = Instant::now();
        let read = f.read(&stretch).unwrap();
        reads.push(began.elapsed().as_secs_f64());
        assert!(
            read.proven.is_empty(),
            "a correct history: {:?}",
            read.proven
        );
    }
    let whole = reads.iter().sum();
    let n = reads.len();
    let first = median(reads[..n.min(3)].to_vec());
    let last = median(reads[n.saturating_sub(3)..].to_vec());
    (first, last, whole)
}
