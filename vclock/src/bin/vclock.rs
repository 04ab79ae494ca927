//! `vclock`: a small tool around the library, for tests and by hand.
//!
//! - `vclock read`: a clock reader (Rust's std: `SystemTime`, `Instant`, both through the
//!   vDSO): for each line on stdin prints `wall_ns mono_ns`; the line `b` prints instead the
//!   median cost of one `clock_gettime` in ns (101 batches of 1000 calls); `q` ends it.
//! - `vclock patch PID PAGE`: patches process PID to follow the control file PAGE (created if
//!   missing).
//! - `vclock set PAGE OFFSET_S RATE wall|all`: sets the page's clocks.
//! - `vclock cycle PID PAGE N`: patches and unpatches PID N times (the tests kill it midway).
//! - `vclock sleep-ms MS`: a process that lives MS ms (the tests attach to it as it exits).

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use vclock::{ClockScope, ControlPage};

/// The most batches the cost measurement runs.
const BATCHES: usize = 101;
const CALLS_PER_BATCH: u32 = 1000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["read"] => read(),
        ["patch", pid, page] => parse_pid(pid).and_then(|pid| {
            let page = open_page(page)?;
            let how = vclock::patch(pid, &page).map_err(|e| e.to_string())?;
            println!("{how:?}");
            Ok(())
        }),
        ["sleep-ms", ms] => ms
            .parse()
            .map(|ms| std::thread::sleep(std::time::Duration::from_millis(ms)))
            .map_err(|_| format!("bad duration {ms:?}")),
        ["set", page, offset_s, rate, scope] => set(page, offset_s, rate, scope),
        ["cycle", pid, page, n] => parse_pid(pid).and_then(|pid| {
            let page = open_page(page)?;
            let n: u32 = n.parse().map_err(|_| format!("bad count {n:?}"))?;
            for _ in 0..n {
                if let vclock::Patched::Now(p) =
                    vclock::patch(pid, &page).map_err(|e| e.to_string())?
                {
                    vclock::unpatch(&p).map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        }),
        _ => Err(
            "usage: vclock read | patch PID PAGE | set PAGE OFFSET_S RATE wall|all | \
                  cycle PID PAGE N | sleep-ms MS"
                .into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vclock: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_pid(s: &str) -> Result<i32, String> {
    s.parse().map_err(|_| format!("bad pid {s:?}"))
}

fn open_page(path: &str) -> Result<ControlPage, String> {
    ControlPage::open_or_create(Path::new(path)).map_err(|e| e.to_string())
}

fn set(page: &str, offset_s: &str, rate: &str, scope: &str) -> Result<(), String> {
    let offset_s: f64 = offset_s
        .parse()
        .map_err(|_| format!("bad offset {offset_s:?}"))?;
    let rate: f64 = rate.parse().map_err(|_| format!("bad rate {rate:?}"))?;
    let scope = match scope {
        "wall" => ClockScope::Wall,
        "all" => ClockScope::All,
        other => return Err(format!("bad scope {other:?} (wall or all)")),
    };
    let page = open_page(page)?;
    page.change(scope, |_, _| ((offset_s * 1e9) as i64, rate));
    Ok(())
}

fn read() -> Result<(), String> {
    let start = Instant::now();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        match line.trim() {
            "q" => break,
            "b" => println!("{}", median_cost_ns()),
            _ => {
                let wall = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                println!("{wall} {}", start.elapsed().as_nanos());
            }
        }
    }
    Ok(())
}

/// The median over batches of the mean cost of one `Instant::now()` (clock_gettime of
/// CLOCK_MONOTONIC), in ns.
fn median_cost_ns() -> u64 {
    let mut costs: Vec<u64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..CALLS_PER_BATCH {
                std::hint::black_box(Instant::now());
            }
            (t.elapsed().as_nanos() / CALLS_PER_BATCH as u128) as u64
        })
        .collect();
    costs.sort_unstable();
    costs[costs.len() / 2]
}
