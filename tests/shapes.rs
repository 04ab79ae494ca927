//! Client-pause shapes end to end: each unsafe mode is caught, with a violation of the right
//! kind, when the run's stalls have the shape that exposes it, and the correct lockd stays
//! `valid` under every shape. CI runs 2 seeds per mode with 10 s runs (the etcd row 1 seed of
//! 20 s: its leases are 2 s long); the 10-seed campaign, with the time to the first violation,
//! is `cargo bench --bench shapes` (BENCHMARKS.md records it).

mod common;

#[path = "common/shapes.rs"]
mod shapes;

use shapes::{run_shape, ShapeMode, ALL_SHAPES, MODES, SHORT};

const DURATION_S: u64 = 10;

fn mode(name_starts: &str) -> &'static ShapeMode {
    MODES
        .iter()
        .find(|m| m.name.starts_with(name_starts))
        .unwrap_or_else(|| panic!("no mode {name_starts}"))
}

/// Runs `m` on `seeds` and asserts every run caught it, and that its stalls had the shape.
fn assert_caught(m: &ShapeMode, seeds: &[u64], duration_s: u64) {
    for &seed in seeds {
        let tmp = tempfile::tempdir().unwrap();
        let mut args: Vec<&str> = m.args.to_vec();
        args.extend_from_slice(&["--client-faults", m.shape]);
        let o = run_shape(common::BIN, tmp.path(), &args, duration_s, seed);
        assert!(
            o.caught(m),
            "{} with {} (seed {seed}): expected one of {:?}, exit {} with {:?} after {} stalls\n{}",
            m.name,
            m.shape,
            m.expect_any,
            o.code,
            o.kinds,
            o.stalls,
            o.stderr
        );
        assert!(o.stalls > 0);
        // Every stall took the asked shape.
        let dir = tmp
            .path()
            .join(std::fs::read_link(tmp.path().join("latest")).unwrap());
        let aim = m.shape.split(',').next().unwrap();
        for op in common::nemesis_ops(&dir) {
            if op["f"] == "start-client-pause" {
                assert_eq!(op["value"]["shape"], aim, "{op}");
            }
        }
    }
}

#[test]
fn renew_grace_is_caught_by_boundary_stalls_waking_into_a_renew() {
    assert_caught(mode("lockd --unsafe renew-grace"), &[1, 2], DURATION_S);
}

#[test]
fn an_off_by_one_fence_is_caught_by_next_grant_stalls_waking_into_a_write() {
    assert_caught(mode("store --store-fence off-by-one"), &[1, 2], DURATION_S);
}

#[test]
fn unchecked_release_is_caught_by_long_stalls_waking_into_a_release() {
    assert_caught(
        mode("lockd --unsafe unchecked-release"),
        &[1, 2],
        DURATION_S,
    );
}

#[test]
fn unfenced_reads_are_caught_by_next_grant_stalls_waking_into_a_read() {
    assert_caught(mode("store --store-fence write"), &[1, 2], DURATION_S);
}

#[test]
fn etcd_grants_a_waiter_whose_lease_lapsed_while_it_stalled() {
    if !common::require_etcd() {
        return;
    }
    assert_caught(mode("etcd"), &[3], 20);
}

#[test]
fn the_correct_lockd_is_valid_under_every_shape() {
    for seed in [1, 2, 3] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args: Vec<&str> = SHORT.to_vec();
        // Every shape and wake-up op (the default), in the workload that has all four.
        args.extend_from_slice(&["--workload", "counter"]);
        let o = run_shape(common::BIN, tmp.path(), &args, DURATION_S, seed);
        common::assert_clean_results(
            o.code,
            &o.results,
            &format!(
                "seed {seed}: {:?} after {} stalls\n{}",
                o.kinds, o.stalls, o.stderr
            ),
        );
        assert!(o.stalls >= 2, "seed {seed}: only {} stalls", o.stalls);
    }
    // Each shape on its own too (one seed each: the campaign runs three).
    for shape in ALL_SHAPES {
        let tmp = tempfile::tempdir().unwrap();
        let mut args: Vec<&str> = SHORT.to_vec();
        args.extend_from_slice(&["--workload", "counter", "--client-faults", shape]);
        let o = run_shape(common::BIN, tmp.path(), &args, DURATION_S, 4);
        common::assert_clean_results(
            o.code,
            &o.results,
            &format!("{shape}: {:?}\n{}", o.kinds, o.stderr),
        );
    }
}
