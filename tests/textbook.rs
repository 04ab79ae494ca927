//! The textbook designs as targets (issue 15): a timestamp-ordered lockd with and without a
//! tie-break under the textbook's contention rounds, the fenced write as the textbook writes it
//! (check, then put), and a lock server that forgets its locks on restart. Fixed seeds, short
//! runs; the 10-seed campaign with the time to the first violation is `cargo bench --bench
//! gallery` (docs/anti-patterns.md).

mod common;

#[path = "common/shapes.rs"]
mod shapes;
#[path = "common/textbook.rs"]
mod textbook;

use textbook::{rounds, row};

/// 625 rounds of 80 ms: at least 500 contended ones even when a loaded machine makes a client
/// miss a round now and then (the other tests of this file run beside it).
const ROUNDS_S: u64 = 50;
/// The chance that the smallest of 3 timestamps, each uniform over two ticks, is tied: 5/8.
const TIE_SHARE: f64 = 0.625;

#[test]
fn timestamps_without_a_tiebreak_double_grant_in_five_eighths_of_contended_rounds() {
    // Both orders side by side, each on its own seed's rounds.
    let runs: Vec<_> = ["no-tiebreak", "tiebreak"]
        .into_iter()
        .map(|id| {
            std::thread::spawn(move || {
                let tmp = tempfile::tempdir().unwrap();
                let o = row(id).run_for(common::BIN, tmp.path(), 1, ROUNDS_S);
                (id, o)
            })
        })
        .collect();
    for r in runs {
        let (id, o) = r.join().unwrap();
        let (contended, multi) = rounds(&o)
            .unwrap_or_else(|| panic!("{id}: no rounds in results, exit {}\n{}", o.code, o.stderr));
        assert!(contended >= 500, "{id}: only {contended} contended rounds");
        let share = multi as f64 / contended as f64;
        eprintln!("{id}: more than one holder in {multi} of {contended} contended rounds");
        if id == "no-tiebreak" {
            assert!(
                (share - TIE_SHARE).abs() <= 0.10,
                "{id}: {multi} of {contended} contended rounds had more than one holder \
                 ({share:.3}), expected 0.625 +- 0.10"
            );
            assert!(row(id).met(&o), "{id}: exit {} {:?}", o.code, o.kinds);
        } else {
            assert_eq!(multi, 0, "{id}: {multi} rounds with two holders");
            assert_eq!(o.code, 0, "{id}: {:?}\n{}", o.kinds, o.stderr);
        }
    }
}

#[test]
fn check_then_put_lets_a_stale_write_in_and_the_atomic_fence_does_not() {
    for seed in [1, 2] {
        for id in ["check-then-put", "fence-all"] {
            let tmp = tempfile::tempdir().unwrap();
            let o = row(id).run_for(common::BIN, tmp.path(), seed, 10);
            assert!(
                row(id).met(&o),
                "{id} seed {seed}: exit {} {:?} after {} stalls\n{}",
                o.code,
                o.kinds,
                o.stalls,
                o.stderr
            );
            assert!(o.stalls > 0, "{id} seed {seed}: no stall");
        }
    }
}

#[test]
fn a_lockd_that_forgets_its_locks_is_caught_by_kills_and_hidden_without_faults() {
    for (id, seed) in [("volatile", 1), ("volatile", 2), ("happy-path", 1)] {
        let tmp = tempfile::tempdir().unwrap();
        let o = row(id).run_for(common::BIN, tmp.path(), seed, 10);
        assert!(
            row(id).met(&o),
            "{id} seed {seed}: exit {} {:?}\n{}",
            o.code,
            o.kinds,
            o.stderr
        );
    }
}
