//! One check of a history file, by a chosen path, for BENCHMARKS.md's paired timings:
//!
//! `cargo run --release -p checkers --example check_file -- FILE [WHOLE_READ_BYTES_MAX] [--json]`
//!
//! With no limit, `checkers::check_path` (what `lockpick check` runs); with one, the check
//! reads a file of more bytes than that with violations by the streaming reader, grouping
//! its incidents from a second streamed reading (`0`: whatever the file's size). Prints the
//! verdict, the counts and whether any note says the violations went ungrouped; with `--json`,
//! results.json's text instead (to hold the two paths' results equal).

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES).
use nemesis as _;

use checkers::CheckConfig;
use std::path::Path;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.last().is_some_and(|a| a == "--json");
    if json {
        args.pop();
    }
    let mut args = args.into_iter();
    let path = args
        .next()
        .expect("usage: check_file FILE [WHOLE_READ_BYTES_MAX] [--json]");
    let limit: Option<u64> = args
        .next()
        .map(|a| a.parse().expect("WHOLE_READ_BYTES_MAX: a number of bytes"));
    let cfg = CheckConfig::default();
    let path = Path::new(&path);
    let (results, _) = match limit {
        None => checkers::check_path(path, &cfg),
        Some(limit) => checkers::check_path_within(path, &cfg, limit),
    }
    .expect("checked");
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).expect("serializes")
        );
        return;
    }
    let ungrouped = (results.notes.iter()).any(|n| n.contains("not grouped into incidents"));
    println!(
        "verdict {}, {} violations, {} incidents, ungrouped {ungrouped}",
        results.valid,
        results.violations.len(),
        results.incidents.len()
    );
}
