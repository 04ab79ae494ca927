//! The textbook designs as targets (issue 15): a timestamp-ordered lockd with and without a
//! tie-break under the textbook's contention rounds, the fenced write as the textbook writes it
//! (check, then put), and a lock server that forgets its locks on restart. Fixed seeds, short
//! runs, the faults of a row that must be caught aimed at the state its bug needs (a drawn
//! run's faults are what the campaign measures); the 10-seed campaign with the time to the first violation is `cargo bench --bench
//! gallery` (docs/anti-patterns.md).

mod common;

#[path = "common/shapes.rs"]
mod shapes;
#[path = "common/textbook.rs"]
mod textbook;

use common::Aim;
use shapes::run_with;
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
            // 5/8 on an idle machine; under the suite's load a client that misses its tick
            // lands on a later one, ties get rarer, and the share falls (0.518 measured with
            // four builds beside the suite on 2 cores). Rarer ties are load, never a checker
            // that counts more holders than there were, so the bound above stays tight.
            assert!(
                (TIE_SHARE - 0.30..=TIE_SHARE + 0.10).contains(&share),
                "{id}: {multi} of {contended} contended rounds had more than one holder \
                 ({share:.3}), expected 0.625, -0.30 under load, +0.10"
            );
            assert!(row(id).met(&o), "{id}: exit {} {:?}", o.code, o.kinds);
        } else {
            assert_eq!(multi, 0, "{id}: {multi} rounds with two holders");
            assert_eq!(o.code, 0, "{id}: {:?}\n{}", o.kinds, o.stderr);
        }
    }
}

/// The stalls both rows replay: a holder stalled between its read and its write wakes into
/// the write 90 ms after the next holder's grant. With holds of 20-30 ms the next holder has
/// read, held and sent its own write by then, and the check-then-put store is inside that
/// write's 100 ms check-to-put gap: the stale write's check passes (the fence is still the old
/// token) and its put lands after the next holder's, a lower token accepted after a higher one.
/// A drawn offset (10-100 ms) with holds of up to 100 ms lands there only now and then.
fn next_grant_writes() -> (Aim, [&'static str; 2]) {
    let aim = Aim::new(1000, 1)
        .stall("next-grant", Some("write"), Some(90))
        .stall("next-grant", Some("write"), Some(90));
    (aim, ["--hold", "20ms..30ms"])
}

#[test]
fn check_then_put_lets_a_stale_write_in_and_the_atomic_fence_does_not() {
    let (aim, hold) = next_grant_writes();
    for seed in [1, 2] {
        for id in ["check-then-put", "fence-all"] {
            let tmp = tempfile::tempdir().unwrap();
            let schedule = aim.write(tmp.path());
            let mut extra = hold.to_vec();
            extra.extend_from_slice(&["--schedule", schedule.to_str().unwrap()]);
            let o = run_with(
                common::BIN,
                tmp.path(),
                &row(id).flags(),
                &extra,
                aim.duration_s(),
                seed,
            );
            let context = format!(
                "{id} seed {seed}: exit {} {:?} after {} stalls\n{}",
                o.code, o.kinds, o.stalls, o.stderr
            );
            assert!(row(id).met(&o), "{context}");
            assert!(o.stalls > 0, "{context}");
            if id == "check-then-put" {
                common::assert_aim_exercised(&aim, &o.results, &context);
            } else {
                // The same stale writes reached the atomic fence, and it refused them. (The
                // coverage cell may say not exercised: its writes are quick, so a second grant
                // often comes before the stall ends, which is no longer "just after" the next.)
                let dir = tmp
                    .path()
                    .join(std::fs::read_link(tmp.path().join("latest")).unwrap());
                let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
                let refused = history
                    .lines()
                    .filter(|l| {
                        l.contains("\"type\":\"fail\",\"f\":\"write\"")
                            && l.contains("\"error\":\"stale-token\"")
                    })
                    .count();
                assert!(refused >= 1, "no stale write was refused; {context}");
            }
        }
    }
}

/// Kills down for 100 ms: the holder's lease (renewed every third of it) is still live when
/// the node is back, and the forgetful node grants at once. Three kills, a lease apart: a
/// holder whose hold happens to end while its node is down releases, and its lease with it.
fn kills() -> Aim {
    Aim::new(1000, 1)
        .starting_at_ms(1000)
        .kill_for("n1", 100, 1000)
        .kill_for("n1", 100, 1000)
        .kill_for("n1", 100, 1000)
}

#[test]
fn a_lockd_that_forgets_its_locks_is_caught_by_kills_and_hidden_without_faults() {
    let aim = kills();
    for (id, seed) in [("volatile", 1), ("volatile", 2), ("happy-path", 1)] {
        let tmp = tempfile::tempdir().unwrap();
        let o = if id == "volatile" {
            let schedule = aim.write(tmp.path());
            let extra = ["--schedule", schedule.to_str().unwrap()];
            run_with(
                common::BIN,
                tmp.path(),
                &row(id).flags(),
                &extra,
                aim.duration_s(),
                seed,
            )
        } else {
            row(id).run_for(common::BIN, tmp.path(), seed, 10)
        };
        let context = format!(
            "{id} seed {seed}: exit {} {:?}\n{}",
            o.code, o.kinds, o.stderr
        );
        assert!(row(id).met(&o), "{context}");
        if id == "volatile" {
            common::assert_aim_exercised(&aim, &o.results, &context);
        }
    }
}
