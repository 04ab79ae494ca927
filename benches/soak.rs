//! A soak (issue 22, item 6): `lockpick run --duration D` on the embedded default with every
//! fault, the harness's RSS (VmRSS of the `lockpick run` process, not its nodes) and its live
//! check's (the child `lockpick live-check` that follows the history) sampled every `EVERY`,
//! beside what its status line says at that time: the ops so far and how far behind the run
//! the live verdict is. Prints a table for BENCHMARKS.md.
//!
//! Run: `cargo bench --bench soak -- [DURATION_S] [EVERY_S] [BINARY]` (default 600 s, every
//! 60 s, this build's binary). For a long soak, give a copy of the binary: a rebuild meanwhile
//! replaces the file the run started from.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::status_kb;

const BIN: &str = env!("CARGO_BIN_EXE_lockpick");

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let duration_s: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(600);
    let every_s: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    let bin = args.next().unwrap_or_else(|| BIN.to_string());
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(&bin)
        .args(["run", "--out", tmp.path().to_str().unwrap()])
        .args(["--duration", &format!("{duration_s}s"), "--seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("lockpick runs");
    let pid = child.id();
    let last_status = Arc::new(Mutex::new(String::new()));
    let out = child.stdout.take().unwrap();
    let seen = last_status.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains("violations so far") {
                *seen.lock().unwrap() = line;
            }
        }
    });
    let began = Instant::now();
    println!("| minute | harness RSS | live check RSS | ops so far | live verdict |");
    println!("|---|---|---|---|---|");
    let (mut peak, mut check_peak) = (0, 0);
    // Bounded by the run's duration plus its end (the child exits).
    loop {
        std::thread::sleep(Duration::from_secs(every_s));
        if child.try_wait().unwrap().is_some() {
            break;
        }
        let Some(rss) = status_kb(pid, "VmRSS:") else {
            break;
        };
        peak = peak.max(rss);
        let check_rss = live_check_pid(pid).and_then(|c| status_kb(c, "VmRSS:"));
        check_peak = check_peak.max(check_rss.unwrap_or(0));
        let status = last_status.lock().unwrap().clone();
        let ops = status
            .split("ops ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        let verdict = status
            .split("violations so far: ")
            .nth(1)
            .unwrap_or("?")
            .to_string();
        println!(
            "| {:.1} | {} MB | {} | {ops} | {verdict} |",
            began.elapsed().as_secs_f64() / 60.0,
            rss / 1024,
            check_rss.map_or("-".to_string(), |kb| format!("{} MB", kb / 1024))
        );
    }
    let status = child.wait().unwrap();
    let _ = reader.join();
    println!(
        "\nexit {:?} after {:.1} min; peak sampled harness RSS {} MB, live check {} MB",
        status.code(),
        began.elapsed().as_secs_f64() / 60.0,
        peak / 1024,
        check_peak / 1024
    );
}

/// The pid of the `lockpick live-check` child of `parent`, if it runs (a child is listed
/// under the thread that started it).
fn live_check_pid(parent: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{parent}/task")).ok()?;
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .find(|&c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|cmd| cmd.split(|&b| b == 0).any(|a| a == b"live-check"))
        })
}
