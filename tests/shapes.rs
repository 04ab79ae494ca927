//! Client-pause shapes end to end: each unsafe mode is caught, with a violation of the right
//! kind, when the run's stalls have the shape that exposes it, and the correct lockd stays
//! `valid` under every shape. A test that asserts a mode is caught replays stalls aimed at the
//! state the mode's bug needs (2 seeds per mode, runs as long as the stalls; the etcd row 1
//! seed), so it is caught every time; the correct lockd runs drawn stalls of every shape. The
//! 10-seed campaign of drawn stalls, with the time to the first violation, is `cargo bench
//! --bench shapes` (BENCHMARKS.md records it).

mod common;

#[path = "common/shapes.rs"]
mod shapes;

use common::Aim;
use shapes::{run_shape, ShapeMode, ALL_SHAPES, MODES, SHORT};

const DURATION_S: u64 = 10;
/// An aimed run is as long as its stalls need, at least this (a few holds after the last).
const AIMED_MIN_S: u64 = 6;

fn mode(name_starts: &str) -> &'static ShapeMode {
    MODES
        .iter()
        .find(|m| m.name.starts_with(name_starts))
        .unwrap_or_else(|| panic!("no mode {name_starts}"))
}

/// The stalls a test of `m` replays, aimed at the state its bug needs, and the flags that
/// shape the workload for them; a drawn run (the campaign's, benches/shapes.rs) would hope
/// some stall lands there.
fn aim(m: &ShapeMode) -> (Aim, &'static [&'static str]) {
    let ttl = 1000;
    match m.shape {
        // Woken 50 ms past its lease (the planner's widest boundary offset): after the waiting
        // clients were granted the lock (they wake at the service's expiry of the lease, which
        // is before ours), well inside the ttl/4 grace the broken lockd still answers from,
        // and within the tenth of a lease that counts as just past it.
        "boundary,renew" => (
            Aim::new(ttl, 1)
                .stall("boundary", Some("renew"), Some(ttl / 20))
                .stall("boundary", Some("renew"), Some(ttl / 20))
                .stall("boundary", Some("renew"), Some(ttl / 20)),
            &[],
        ),
        // Woken into the write 50 ms after the next grant: the next holder has read (the fence
        // is one past the stale token), and with holds of 200 ms or more nobody has been
        // granted since (which would put the fence two past).
        "next-grant,write" => (
            Aim::new(ttl, 1)
                .stall("next-grant", Some("write"), Some(50))
                .stall("next-grant", Some("write"), Some(50)),
            &["--hold", "200ms..600ms"],
        ),
        // Woken into the release after two leases, several grants later: someone holds the
        // lock then, and the broken lockd frees it.
        "long,release" => (
            Aim::new(ttl, 1).stall("long", Some("release"), None).stall(
                "long",
                Some("release"),
                None,
            ),
            &[],
        ),
        // Woken into the read 50 ms after the next grant: its read and write land before the
        // next holder's write, which holds of 200 ms or more keep at least that far off.
        "next-grant,read" => (
            Aim::new(ttl, 1)
                .stall("next-grant", Some("read"), Some(50))
                .stall("next-grant", Some("read"), Some(50)),
            &["--hold", "200ms..600ms"],
        ),
        // One holder and one waiter: the waiter stalls half a second in, while the first
        // holder has 3.5 s or more of its 4-6 s hold left, so its session lease (2 s) lapses
        // before that holder releases, and it is next in line.
        "waiter" => (
            Aim::new(2000, 1)
                .starting_at_ms(500)
                .stall("waiter", None, None),
            &["--clients", "2"],
        ),
        other => panic!("no aim for {other}"),
    }
}

/// Runs `m` on `seeds` with its aimed stalls and asserts every run caught it, that its stalls
/// had the shape, and that one met the state the shape aims at.
fn assert_caught(m: &ShapeMode, seeds: &[u64], min_duration_s: u64) {
    let (aim, extra) = aim(m);
    for &seed in seeds {
        let tmp = tempfile::tempdir().unwrap();
        let schedule = aim.write(tmp.path());
        let mut args: Vec<&str> = m.args.to_vec();
        args.extend_from_slice(&["--client-faults", m.shape]);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--schedule", schedule.to_str().unwrap()]);
        let duration_s = aim.duration_s().max(min_duration_s);
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
        common::assert_aim_exercised(&aim, &o.results, &format!("{} seed {seed}", m.name));
        // Every stall took the asked shape.
        let dir = tmp
            .path()
            .join(std::fs::read_link(tmp.path().join("latest")).unwrap());
        let shape = m.shape.split(',').next().unwrap();
        for op in common::nemesis_ops(&dir) {
            if op["f"] == "start-client-pause" {
                assert_eq!(op["value"]["shape"], shape, "{op}");
            }
        }
    }
}

#[test]
fn renew_grace_is_caught_by_boundary_stalls_waking_into_a_renew() {
    assert_caught(mode("lockd --unsafe renew-grace"), &[1, 2], AIMED_MIN_S);
}

#[test]
fn an_off_by_one_fence_is_caught_by_next_grant_stalls_waking_into_a_write() {
    assert_caught(mode("store --store-fence off-by-one"), &[1, 2], AIMED_MIN_S);
}

#[test]
fn unchecked_release_is_caught_by_long_stalls_waking_into_a_release() {
    assert_caught(
        mode("lockd --unsafe unchecked-release"),
        &[1, 2],
        AIMED_MIN_S,
    );
}

#[test]
fn unfenced_reads_are_caught_by_next_grant_stalls_waking_into_a_read() {
    assert_caught(mode("store --store-fence write"), &[1, 2], AIMED_MIN_S);
}

#[test]
fn etcd_grants_a_waiter_whose_lease_lapsed_while_it_stalled() {
    if !common::require_etcd() {
        return;
    }
    assert_caught(mode("etcd"), &[3], 10);
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
