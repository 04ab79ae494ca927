//! Renders a run directory's report files and prints how long it took and how big they are:
//! the "Report" benchmark of BENCHMARKS.md.
//!
//! `cargo run --release -p reports --example render -- RUN_DIR`

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this example would read every fault op by the start-/stop- convention.
use nemesis as _;

use std::time::Instant;

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: render RUN_DIR");
        std::process::exit(3);
    };
    let start = Instant::now();
    match reports::write_run_reports(std::path::Path::new(&dir)) {
        Ok(w) => {
            let size = std::fs::metadata(&w.report).map(|m| m.len()).unwrap_or(0);
            println!(
                "report.html: {size} bytes, rendered in {:.2} s",
                start.elapsed().as_secs_f64()
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(3);
        }
    }
}
