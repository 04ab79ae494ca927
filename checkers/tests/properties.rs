//! Properties over generated histories: a correct system's history is always valid (no false
//! positives), and each kind of violation injected into one is always found, with the injected
//! op in its witness (no misses).

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::gen::{correct_history, GenParams};
use checkers::inject::{inject, InjectKind};
use checkers::CheckConfig;
use history::{History, Validity, ViolationKind};
use proptest::prelude::*;

fn params(clients: usize, locks: usize, info_rate: f64, events: usize) -> GenParams {
    GenParams {
        clients,
        locks,
        events,
        info_rate,
        client_pause_rate: 0.05,
        ..GenParams::default()
    }
}

proptest! {
    // A few hundred cases in all, small histories: the debug test run stays well under a minute.
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn correct_histories_are_valid(
        seed in any::<u64>(),
        clients in 1usize..=6,
        locks in 1usize..=3,
        info_rate in 0.0f64..0.2,
        pause_rate in 0.0f64..0.15,
        drift in prop_oneof![Just(0.0), 0.001f64..0.2],
        nemesis in any::<bool>(),
        evidence in any::<bool>(),
        events in 200usize..3_000,
    ) {
        let p = GenParams {
            client_pause_rate: pause_rate,
            nemesis,
            lease_evidence: evidence,
            ..params(clients, locks, info_rate, events)
        };
        let ops = correct_history(seed, &p);
        let h = History::new(ops).expect("generated histories obey the structure rules");
        let cfg = CheckConfig { drift, ..CheckConfig::default() };
        let r = checkers::check(&h, &cfg);
        prop_assert!(
            r.violations.is_empty(),
            "false positive on a correct history (seed {seed}, {p:?}): {:#?}",
            r.violations
        );
        let want = if r.stats.grants == 0 { Validity::Unknown } else { Validity::Valid };
        prop_assert_eq!(r.valid, want);
    }
}

#[test]
fn generator_is_deterministic() {
    let p = params(4, 2, 0.05, 1_500);
    assert_eq!(correct_history(42, &p), correct_history(42, &p));
    assert_ne!(correct_history(42, &p), correct_history(43, &p));
}

#[test]
fn generator_exercises_every_answer() {
    let p = GenParams {
        client_pause_rate: 0.1,
        ..params(5, 2, 0.05, 4_000)
    };
    let h = History::new(correct_history(3, &p)).unwrap();
    let errors: std::collections::BTreeSet<&str> = h
        .ops
        .iter()
        .filter_map(|o| o.value.error.as_deref())
        .collect();
    for e in ["held", "not-holder", "stale-token", "timeout"] {
        assert!(errors.contains(e), "no {e} answer in {errors:?}");
    }
    let fs: std::collections::BTreeSet<&str> = h.nemesis().map(|o| o.f.as_str()).collect();
    for f in [
        "start-pause",
        "stop-pause",
        "start-client-pause",
        "kill",
        "restart",
    ] {
        assert!(fs.contains(f), "no {f} in {fs:?}");
    }
    let s = checkers::stats(&h);
    assert!(s.ops["renew"]["ok"] > 0, "no renewals: {:?}", s.ops);
    assert!(h.ops.iter().any(|o| o.value.is_final));
}

#[test]
fn stalled_holders_give_unsafe_overlap_warnings_not_violations() {
    let (mut warned, mut refused) = (0, 0);
    for seed in 0..10 {
        let p = GenParams {
            client_pause_rate: 0.3,
            ..params(4, 1, 0.0, 800)
        };
        let h = History::new(correct_history(seed, &p)).unwrap();
        let r = checkers::check(&h, &CheckConfig::default());
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
        warned += r.warnings.len();
        refused += r
            .checkers
            .iter()
            .flat_map(|c| &c.notes)
            .filter(|n| n.contains("late op(s)") && n.contains("refused"))
            .count();
        for w in &r.warnings {
            // Only a late op that was accepted, or may have been, makes a warning: the
            // generator's noise (indeterminate renews) and a store that had not yet seen the
            // next holder's token.
            assert!(
                ["accepted it", "indeterminate", "never completed"]
                    .iter()
                    .any(|s| w.explanation.contains(s)),
                "{}",
                w.explanation
            );
            assert_eq!(w.kind, ViolationKind::UnsafeOverlap);
            assert!(
                w.nemesis.iter().any(|f| f.f == "start-client-pause"),
                "a stall caused it, so it must be listed: {w:#?}"
            );
        }
    }
    // A late op the fenced store or the service refused is a note, not a warning.
    assert!(refused > 0, "no stalled holder's late op was ever refused");
    assert!(warned > 0, "no stalled holder ever overlapped another");
}

// ---- mutation tests: `checkers::inject`, kind by kind ------------------------------------

/// Runs one mutation over many seeds: every injected violation must be found, with the
/// injected ops in its witness.
fn assert_found(inject_kind: InjectKind) {
    let kind = inject_kind.violation();
    let seeds = 50;
    let mut applied = 0;
    for seed in 0..seeds {
        let p = GenParams {
            nemesis: seed % 2 == 0,
            lease_evidence: seed % 3 != 0,
            ..params(
                1 + (seed as usize % 5),
                1 + (seed as usize % 3),
                0.05,
                1_000,
            )
        };
        let mut ops = correct_history(seed, &p);
        let Some(witness) = inject(&mut ops, inject_kind, seed ^ 0x5eed) else {
            continue;
        };
        applied += 1;
        let h = History::new(ops).expect("mutations keep the structure");
        let r = checkers::check(&h, &CheckConfig::default());
        assert_eq!(r.valid, Validity::Invalid, "{kind} not found (seed {seed})");
        let hit = r
            .violations
            .iter()
            .any(|v| v.kind == kind && witness.iter().all(|w| v.ops.contains(w)));
        assert!(
            hit,
            "{kind} with witness {witness:?} not found (seed {seed}); found: {:#?}",
            r.violations
                .iter()
                .map(|v| (v.kind, &v.ops))
                .collect::<Vec<_>>()
        );
    }
    assert!(
        applied >= seeds * 2 / 3,
        "{kind}: only {applied} of {seeds} histories could take the mutation"
    );
}

#[test]
fn finds_injected_token_reuse() {
    assert_found(InjectKind::named("token-reused"));
}

#[test]
fn finds_injected_token_regression() {
    assert_found(InjectKind::named("token-regressed"));
}

#[test]
fn finds_injected_double_grant() {
    assert_found(InjectKind::named("double-grant"));
}

#[test]
fn finds_injected_stale_write() {
    assert_found(InjectKind::named("stale-write-accepted"));
}

#[test]
fn finds_injected_duplicate_counter_value() {
    assert_found(InjectKind::named("lost-update"));
}

#[test]
fn finds_injected_low_final_read() {
    assert_found(InjectKind::named("lost-update-final-read"));
}

#[test]
fn finds_injected_stale_release() {
    assert_found(InjectKind::named("stale-release-accepted"));
}

#[test]
fn finds_injected_stale_renew() {
    assert_found(InjectKind::named("stale-renew-accepted"));
}

#[test]
fn finds_injected_stuck_lock() {
    assert_found(InjectKind::named("lock-stuck"));
}

#[test]
fn finds_injected_grant_on_expired_lease() {
    assert_found(InjectKind::named("grant-on-expired-lease"));
}
