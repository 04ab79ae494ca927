//! The client-pause shape campaign of BENCHMARKS.md: each unsafe mode run with the shape that
//! exposes it on N seeds (how many were caught, and the median time to the first violation),
//! then the correct lockd under every shape on 3 seeds (how many were `valid`).
//!
//! Run: `cargo bench --bench shapes` (10 seeds, 20 s runs, 2 at a time), or
//! `cargo bench --bench shapes -- SEEDS DURATION_S JOBS`. Modes that need etcd are left out
//! (with a note) where `etcd` is not installed. Prints the tables, in markdown.
//! `cargo bench --bench shapes -- baseline` runs each lockd mode with the one shape stalls
//! had before shapes (`long,write`) instead: what the harness found of them then.
//! `cargo bench --bench shapes -- classic` runs the unsafe modes that came before shapes, each
//! with its own faults (tests/common/mod.rs's SCENARIOS), for their time to first violation.

#[path = "../tests/common/shapes.rs"]
mod shapes;

#[path = "../tests/common/mod.rs"]
mod common;

use shapes::{run_shape, Outcome, ShapeMode, ALL_SHAPES, MODES, SHORT};
use std::sync::{Arc, Mutex};

const BIN: &str = env!("CARGO_BIN_EXE_lockpick");

/// One run to make: a label for its row, its flags, its seed.
struct Job {
    row: usize,
    args: Vec<String>,
    seed: u64,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Some(v[v.len() / 2])
}

fn have_etcd() -> bool {
    std::process::Command::new("etcd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn main() {
    // `cargo bench` passes `--bench`; numbers are ours.
    let nums: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seeds = nums.first().copied().unwrap_or(10);
    let duration_s = nums.get(1).copied().unwrap_or(20);
    let jobs = nums.get(2).copied().unwrap_or(2).max(1) as usize;
    let baseline = std::env::args().any(|a| a == "baseline");
    if std::env::args().any(|a| a == "classic") {
        classic(seeds, duration_s, jobs);
        return;
    }
    let etcd = have_etcd() && !baseline;
    let modes: Vec<&ShapeMode> = MODES.iter().filter(|m| etcd || !m.etcd).collect();
    if !etcd {
        eprintln!("etcd not installed: its row is left out");
    }
    let mut rows: Vec<String> = Vec::new();
    let mut queue: Vec<Job> = Vec::new();
    for m in &modes {
        let row = rows.len();
        rows.push(m.name.to_string());
        for seed in 1..=seeds {
            let mut args: Vec<String> = m.args.iter().map(|s| s.to_string()).collect();
            let shape = if baseline { "long,write" } else { m.shape };
            args.extend(["--client-faults".into(), shape.into()]);
            queue.push(Job { row, args, seed });
        }
    }
    // The baseline has no correct rows: the correct lockd's are the campaign's.
    let correct: &[&str] = if baseline { &[] } else { &ALL_SHAPES };
    for &shape in correct {
        let row = rows.len();
        rows.push(format!("correct lockd, {shape}"));
        for seed in 1..=3 {
            let mut args: Vec<String> = SHORT.iter().map(|s| s.to_string()).collect();
            args.extend(["--workload".into(), "counter".into()]);
            args.extend(["--client-faults".into(), shape.into()]);
            queue.push(Job { row, args, seed });
        }
    }
    let done = run_all(queue, duration_s, jobs);
    println!(
        "| service (bug) | --client-faults | caught | median time to first violation | kinds |"
    );
    println!("|---|---|---|---|---|");
    for (row, m) in modes.iter().enumerate() {
        let runs: Vec<&Outcome> = done.iter().filter(|d| d.0 == row).map(|d| &d.2).collect();
        let caught: Vec<&&Outcome> = runs.iter().filter(|o| o.caught(m)).collect();
        let firsts: Vec<f64> = caught.iter().filter_map(|o| o.first_violation_s).collect();
        let mut kinds: Vec<String> = caught.iter().flat_map(|o| o.kinds.clone()).collect();
        kinds.sort();
        kinds.dedup();
        println!(
            "| {} | `{}` | {}/{} | {} | {} |",
            m.name,
            if baseline { "long,write" } else { m.shape },
            caught.len(),
            runs.len(),
            median(firsts).map_or("-".into(), |s| format!("{s:.1} s")),
            kinds.join(", ")
        );
    }
    if baseline {
        return;
    }
    println!();
    println!("| correct lockd (counter), --client-faults | valid | stalls per run (median) |");
    println!("|---|---|---|");
    for (i, shape) in ALL_SHAPES.iter().enumerate() {
        let row = modes.len() + i;
        let runs: Vec<&Outcome> = done.iter().filter(|d| d.0 == row).map(|d| &d.2).collect();
        let valid = runs.iter().filter(|o| o.code == 0).count();
        let stalls = median(runs.iter().map(|o| o.stalls as f64).collect());
        println!(
            "| `{shape}` | {valid}/{} | {} |",
            runs.len(),
            stalls.map_or("-".into(), |s| format!("{s}"))
        );
    }
}

/// Runs every job, `jobs` at a time; what each found, by row and seed.
fn run_all(queue: Vec<Job>, duration_s: u64, jobs: usize) -> Vec<(usize, u64, Outcome)> {
    let total = queue.len();
    eprintln!("{total} runs of {duration_s} s, {jobs} at a time");
    let queue = Arc::new(Mutex::new(queue));
    let done: Arc<Mutex<Vec<(usize, u64, Outcome)>>> = Arc::default();
    let tmp = tempfile::tempdir().unwrap();
    let workers: Vec<_> = (0..jobs)
        .map(|w| {
            let queue = queue.clone();
            let done = done.clone();
            let base = tmp.path().join(format!("w{w}"));
            std::thread::spawn(move || {
                // Bounded by the queue's length.
                while let Some(job) = queue.lock().unwrap().pop() {
                    let out = base.join(format!("r{}-{}", job.row, job.seed));
                    let args: Vec<&str> = job.args.iter().map(String::as_str).collect();
                    let o = run_shape(BIN, &out, &args, duration_s, job.seed);
                    eprintln!(
                        "row {} seed {}: exit {} {:?} first {:?} stalls {}",
                        job.row, job.seed, o.code, o.kinds, o.first_violation_s, o.stalls
                    );
                    let _ = std::fs::remove_dir_all(&out);
                    done.lock().unwrap().push((job.row, job.seed, o));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let done = std::mem::take(&mut *done.lock().unwrap());
    done
}

/// The unsafe modes from before shapes, each with the faults its scenario names.
fn classic(seeds: u64, duration_s: u64, jobs: usize) {
    let scenarios: Vec<&common::Scenario> = common::SCENARIOS
        .iter()
        .filter(|s| !s.needs_clock || common::require_clock_faults())
        .collect();
    let mut queue = Vec::new();
    for (row, s) in scenarios.iter().enumerate() {
        for seed in 1..=seeds {
            let mut args: Vec<String> = common::FAST.iter().map(|a| a.to_string()).collect();
            args.extend(s.args.iter().map(|a| a.to_string()));
            queue.push(Job { row, args, seed });
        }
    }
    let done = run_all(queue, duration_s, jobs);
    println!("| unsafe mode (scenario) | caught | median time to first violation | kinds |");
    println!("|---|---|---|---|");
    for (row, s) in scenarios.iter().enumerate() {
        let runs: Vec<&Outcome> = done.iter().filter(|d| d.0 == row).map(|d| &d.2).collect();
        let caught: Vec<&&Outcome> = runs
            .iter()
            .filter(|o| o.code == 1 && s.expect_any.iter().any(|k| o.kinds.iter().any(|f| f == k)))
            .collect();
        let mut kinds: Vec<String> = caught.iter().flat_map(|o| o.kinds.clone()).collect();
        kinds.sort();
        kinds.dedup();
        println!(
            "| {} | {}/{} | {} | {} |",
            s.name,
            caught.len(),
            runs.len(),
            median(caught.iter().filter_map(|o| o.first_violation_s).collect())
                .map_or("-".into(), |t| format!("{t:.1} s")),
            kinds.join(", ")
        );
    }
}
