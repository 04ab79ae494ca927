//! Writes a generated correct history to a file, for profiling `lockpick check` by hand:
//! `cargo run --release -p checkers --example write_history -- EVENTS PATH [SEED]`.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this example would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::gen::{correct_history, GenParams};

fn main() {
    let mut args = std::env::args().skip(1);
    let events: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let path = args.next().unwrap_or_else(|| "history.jsonl".into());
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let params = GenParams {
        clients: 8,
        locks: 4,
        events,
        ..GenParams::default()
    };
    let mut w = history::HistoryWriter::create(std::path::Path::new(&path)).expect("create file");
    for op in correct_history(seed, &params) {
        w.write(&op).expect("write");
    }
}
