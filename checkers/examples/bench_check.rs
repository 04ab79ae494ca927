//! Throughput of the checker path a `lockpick check` takes: JSONL parse, structure, checks.
//!
//! `cargo run --release -p checkers --example bench_check -- 1000000 [seed]`
//!
//! Generates a correct history of about that many events, serializes it to JSONL in memory,
//! then times `history::read_ops_from`, `History::new` and `checkers::check` separately.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this example would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::gen::{correct_history, GenParams};
use checkers::CheckConfig;
use history::{History, HistoryWriter};
use std::path::Path;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let events: usize = args
        .next()
        .map(|a| a.parse().expect("events: a number"))
        .unwrap_or(1_000_000);
    let seed: u64 = args
        .next()
        .map(|a| a.parse().expect("seed: a number"))
        .unwrap_or(1);
    let params = GenParams {
        clients: 8,
        locks: 4,
        events,
        ..GenParams::default()
    };

    let t = Instant::now();
    let ops = correct_history(seed, &params);
    let gen_s = t.elapsed().as_secs_f64();
    let mut w = HistoryWriter::new(Vec::with_capacity(ops.len() * 120));
    for op in &ops {
        w.write(op).expect("writing to memory");
    }
    let jsonl = w.into_inner().expect("flushing to memory");
    let n = ops.len() as f64;
    drop(ops);
    println!(
        "generated {} events ({:.1} MB of JSONL) in {gen_s:.2} s",
        n,
        jsonl.len() as f64 / 1e6
    );

    let t = Instant::now();
    let (ops, warnings) =
        history::read_ops_from(&jsonl[..], Path::new("memory")).expect("parse own output");
    let parse_s = t.elapsed().as_secs_f64();
    assert!(warnings.is_empty());

    let t = Instant::now();
    let h = History::new(ops).expect("generated histories are well formed");
    let structure_s = t.elapsed().as_secs_f64();
    let results = checkers::check(&h, &CheckConfig::default());
    let total_check_s = t.elapsed().as_secs_f64();

    println!(
        "parse:             {:>12.0} events/s ({parse_s:.3} s)",
        n / parse_s
    );
    println!(
        "structure+check:   {:>12.0} events/s ({total_check_s:.3} s; History::new {structure_s:.3} s)",
        n / total_check_s
    );
    println!(
        "total:             {:>12.0} events/s ({:.3} s)",
        n / (parse_s + total_check_s),
        parse_s + total_check_s
    );
    println!(
        "verdict: {} ({} violations, {} warnings, {} grants)",
        results.valid,
        results.violations.len(),
        results.warnings.len(),
        results.stats.grants
    );
    // Where the check time goes, one stage at a time.
    let cfg = CheckConfig::default();
    let t = Instant::now();
    let m = checkers::Model::new(&h, &cfg);
    println!("  model:             {:.3} s", t.elapsed().as_secs_f64());
    for c in checkers::all_checkers() {
        let t = Instant::now();
        let _ = c.check_model(&m, &cfg);
        println!("  {:<18} {:.3} s", c.name(), t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let _ = checkers::stats(&h);
    println!("  stats:             {:.3} s", t.elapsed().as_secs_f64());
    for v in results.violations.iter().take(5) {
        println!("  {}: {}", v.kind, v.explanation);
    }
}
