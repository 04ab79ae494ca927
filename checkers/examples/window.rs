//! What a streaming check would hold of a history file: the grants its walk keeps open and the
//! ops it has read and not yet walked, at most, with grants closed a horizon past their reach;
//! and how many closed grants something reached later (what such a check would judge without).
//!
//! `cargo run --release -p checkers --example window -- HISTORY [HORIZON_MS ...]`

// The fault families' entries (history::FAULT_FAMILIES), for the fault ops of the history.
use nemesis as _;

use checkers::CheckConfig;
use std::path::Path;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: window HISTORY [HORIZON_MS ...]");
    let mut horizons_ms: Vec<u64> = args.map(|a| a.parse().expect("a horizon in ms")).collect();
    if horizons_ms.is_empty() {
        horizons_ms = vec![1_000, 10_000, 60_000];
    }
    for horizon_ms in horizons_ms {
        let t = Instant::now();
        let w = checkers::window_of_path(
            Path::new(&path),
            &CheckConfig::default(),
            horizon_ms.saturating_mul(1_000_000),
        )
        .unwrap_or_else(|e| panic!("{path}: {e}"));
        println!(
            "horizon {horizon_ms} ms: {} events, {} ops, {} grants; {} closed before the end, \
             {} of them stale, {} reached after they were dropped; at most {} grants open, {} \
             ops unwalked, {} ops kept and {} holds waiting for the double-grant sweep ({} \
             swept early at its limit), which found {}; {} violations proven as read ({:?}), {} grants out of token order; stopped \
             waiting {} times for an op pending past {} ops, {} answers after; forced order \
             kept at most {} grants of a lock, let {} go at its limit; fencing tokens kept at \
             most {}, let {} go, forgot the first grant of {} tokens; store writes waiting at \
             most {}, {} out of seq order, {} counter values forgotten; {} stuck answers judged \
             at the limit; the model search kept at most {} ops of a lock and proved {} locks \
             impossible; the wait-for sweep kept at most {} acquires and proved {} deadlocks \
             ({:.1} s)",
            w.events,
            w.ops,
            w.grants,
            w.closed,
            w.stale,
            w.late,
            w.open_grants_max,
            w.unwalked_ops_max,
            w.ops_kept_max,
            w.holds_waiting_max,
            w.swept_early,
            w.double_grants,
            w.violations,
            w.violations_by_kind,
            w.out_of_order,
            w.stopped_waiting,
            checkers::UNWALKED_OPS_MAX,
            w.late_answers,
            w.forced_kept_most,
            w.forced_cut_short,
            w.fencing_kept_most,
            w.fencing_cut_short,
            w.fencing_forgotten,
            w.store_waiting_most,
            w.store_out_of_order,
            w.values_forgotten,
            w.stuck_cut_short,
            w.search_kept_most,
            w.searched_impossible,
            w.waits_kept_most,
            w.deadlocks,
            t.elapsed().as_secs_f64()
        );
    }
}
