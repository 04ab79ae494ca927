//! The precedence inference (grant order forced by real time or by exclusivity, against token
//! order) and the injections behind `lockpick synth --inject`:
//!
//! - every injectable kind is found, with the right kind and the injected ops in its witness,
//!   on every seed that can take it;
//! - the O(n log n) sweep agrees with the pairwise definition: whenever some pair of grants of
//!   different processes is forced into an order their tokens contradict, the history is
//!   invalid, and every `token-regressed` witness is such a pair (soundness and completeness,
//!   checked against brute force on histories with shuffled tokens);
//! - generated correct histories are valid, over thousands of small cases.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::gen::{correct_history, GenParams};
use checkers::inject::{inject, InjectKind};
use checkers::{CheckConfig, Grant, Model};
use history::{History, Op, Validity, ViolationKind};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn params(seed: u64, events: usize) -> GenParams {
    GenParams::varied(seed, events)
}

/// Every violation kind can be made by the mutation injector (and so by `lockpick synth`), or
/// says here why not: a new kind cannot land guarded by its fixtures alone.
#[test]
fn every_violation_kind_has_an_injector() {
    // A warning, not a violation: it never fails a history, so there is nothing to catch.
    const NOT_INJECTED: [ViolationKind; 1] = [ViolationKind::UnsafeOverlap];
    for kind in ViolationKind::ALL {
        let injected = InjectKind::all().iter().any(|k| k.violation() == kind);
        assert!(
            injected || NOT_INJECTED.contains(&kind),
            "{} has no injector (its checker's `injectors`, beside its rule)",
            kind.as_str()
        );
    }
    // Each injector is listed by the checker that reports its kind: it lives beside the rule
    // that must find what it adds.
    for c in checkers::all_checkers() {
        for i in c.injectors() {
            assert!(
                c.kinds().contains(&i.kind),
                "{} lists the injector {}, whose kind {} it does not report",
                c.name(),
                i.name,
                i.kind.as_str()
            );
        }
    }
}

/// Every kind is reported by exactly one checker, which says so itself (`Checker::kinds`): the
/// reports and the gate group findings by it, and no second table names them.
#[test]
fn every_kind_has_one_checker() {
    let checkers = checkers::all_checkers();
    for kind in ViolationKind::ALL {
        let owners: Vec<&str> = checkers
            .iter()
            .filter(|c| c.kinds().contains(&kind))
            .map(|c| c.name())
            .collect();
        assert_eq!(
            owners.len(),
            1,
            "{} is reported by {owners:?}",
            kind.as_str()
        );
        assert_eq!(checkers::checker_of(kind), owners[0]);
    }
    for c in &checkers {
        assert!(!c.kinds().is_empty(), "{} reports no kind", c.name());
    }
}

#[test]
fn every_injected_kind_is_found_with_its_witness() {
    let seeds = 60;
    for kind in InjectKind::all() {
        let mut applied = 0;
        for seed in 0..seeds {
            let mut ops = correct_history(seed, &params(seed, 1_500));
            let Some(witness) = inject(&mut ops, kind, seed ^ 0xfeed) else {
                continue;
            };
            applied += 1;
            let h = History::new(ops).expect("injections keep the structure");
            let r = checkers::check(&h, &CheckConfig::default());
            assert_eq!(
                r.valid,
                Validity::Invalid,
                "{} not found (seed {seed})",
                kind.as_str()
            );
            let hit = r
                .violations
                .iter()
                .any(|v| v.kind == kind.violation() && witness.iter().all(|w| v.ops.contains(w)));
            assert!(
                hit,
                "{} with witness {witness:?} not found (seed {seed}); found {:?}",
                kind.as_str(),
                r.violations
                    .iter()
                    .map(|v| (v.kind, &v.ops))
                    .collect::<Vec<_>>()
            );
        }
        assert!(
            applied >= seeds * 2 / 3,
            "{}: only {applied} of {seeds} histories could take it",
            kind.as_str()
        );
    }
}

/// The grant order the history proves: `a` before `b`, by real time or by exclusivity.
fn forced(a: &Grant, b: &Grant) -> bool {
    a.complete_ns < b.invoke_ns.max(b.alive_until_ns)
}

fn holds_overlap(a: &Grant, b: &Grant) -> bool {
    a.process != b.process
        && a.holds.iter().any(|x| {
            b.holds
                .iter()
                .any(|y| x.start_ns < y.end_ns && y.start_ns < x.end_ns)
        })
}

/// Swaps the tokens of a few random pairs of grants of one lock: most swaps contradict some
/// forced order, some contradict none (concurrent grants whose order is ambiguous).
fn shuffle_tokens(ops: &mut [Op], rng: &mut ChaCha8Rng, swaps: usize) {
    let grants: Vec<usize> = {
        let h = History::new(ops.to_vec()).unwrap();
        h.operations()
            .iter()
            .filter(|o| {
                o.outcome == history::Outcome::Ok && h.invoke_of(o).f == history::F::Acquire
            })
            .map(|o| o.complete.unwrap())
            .collect()
    };
    if grants.len() < 2 {
        return;
    }
    for _ in 0..swaps {
        let i = grants[rng.random_range(0..grants.len())];
        // A nearby grant: far-apart grants are ordered in real time, which the old rule catches.
        let k = grants.iter().position(|&g| g == i).unwrap();
        let j = grants[(k + rng.random_range(1..4)).min(grants.len() - 1)];
        if i == j || ops[i].lock != ops[j].lock {
            continue;
        }
        let (ti, tj) = (ops[i].value.token, ops[j].value.token);
        ops[i].value.token = tj;
        ops[j].value.token = ti;
    }
}

#[test]
fn sweep_agrees_with_the_pairwise_precedence_graph() {
    let mut disordered_histories = 0;
    let mut inferred_only = 0;
    for seed in 0..300u64 {
        let mut ops = correct_history(seed, &params(seed, 400));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Generated grants rarely overlap in time (a held lock answers `held`): add a
        // concurrent one, then let the swaps move tokens between it and its neighbours.
        if seed % 2 == 0 {
            inject(
                &mut ops,
                InjectKind::named("token-regressed-inferred"),
                seed,
            );
        }
        shuffle_tokens(&mut ops, &mut rng, 1 + seed as usize % 3);
        let h = History::new(ops).unwrap();
        let cfg = CheckConfig::default();
        let m = Model::new(&h, &cfg);
        let r = checkers::check(&h, &cfg);
        let gs = &m.grants;
        let index_of = |g: &Grant| m.ops[g.op].index;
        // Brute force over every pair.
        let mut any = false;
        let mut any_inferred = false;
        for a in gs {
            for b in gs {
                let (Some(ta), Some(tb)) = (a.token, b.token) else {
                    continue;
                };
                if a.lock == b.lock && a.process != b.process && ta > tb && forced(a, b) {
                    if !holds_overlap(a, b) {
                        any = true;
                    }
                    if a.complete_ns >= b.invoke_ns && !holds_overlap(a, b) {
                        any_inferred = true;
                    }
                }
            }
        }
        if any {
            disordered_histories += 1;
            if any_inferred {
                inferred_only += 1;
            }
            assert_eq!(
                r.valid,
                Validity::Invalid,
                "seed {seed}: a forced order contradicts the tokens, yet the history passed"
            );
        }
        // Every token-regressed witness is a forced, contradicted pair.
        for v in r
            .violations
            .iter()
            .filter(|v| v.kind == ViolationKind::TokenRegressed)
        {
            let named: Vec<&Grant> = gs.iter().filter(|g| v.ops.contains(&index_of(g))).collect();
            let ok = named.iter().any(|a| {
                named.iter().any(|b| {
                    a.token > b.token
                        && (a.process != b.process || a.complete_ns < b.invoke_ns)
                        && forced(a, b)
                })
            });
            assert!(
                ok,
                "seed {seed}: witness {:?} proves no forced order",
                v.ops
            );
        }
    }
    assert!(
        disordered_histories > 50,
        "too few contradicted histories: {disordered_histories}"
    );
    assert!(
        inferred_only > 10,
        "too few histories needed the inference: {inferred_only}"
    );
}

#[test]
fn results_are_deterministic() {
    for seed in 0..5 {
        let mut ops = correct_history(seed, &params(seed, 3_000));
        inject(
            &mut ops,
            InjectKind::named("token-regressed-inferred"),
            seed,
        );
        let h = History::new(ops).unwrap();
        let a = serde_json::to_string(&checkers::check(&h, &CheckConfig::default())).unwrap();
        let b = serde_json::to_string(&checkers::check(&h, &CheckConfig::default())).unwrap();
        assert_eq!(a, b);
    }
}

proptest! {
    // Thousands of small histories: no false positive from the inference or anything else.
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn small_correct_histories_are_valid(
        seed in any::<u64>(),
        clients in 1usize..=8,
        locks in 1usize..=2,
        info_rate in 0.0f64..0.2,
        drift in prop_oneof![Just(0.0), 0.001f64..0.2],
        events in 50usize..400,
    ) {
        let p = GenParams {
            clients,
            locks,
            events,
            info_rate,
            nemesis: seed % 2 == 0,
            ..GenParams::default()
        };
        let h = History::new(correct_history(seed, &p)).unwrap();
        let cfg = CheckConfig { drift, ..CheckConfig::default() };
        let r = checkers::check(&h, &cfg);
        prop_assert!(r.violations.is_empty(), "false positive (seed {seed}, {p:?}): {:#?}", r.violations);
    }
}

#[test]
fn streamed_generator_matches_the_in_memory_one() {
    let p = params(7, 20_000);
    let mut streamed = Vec::new();
    checkers::gen::correct_history_into(7, &p, &mut |ops| streamed.extend_from_slice(ops));
    assert_eq!(streamed, correct_history(7, &p));
}

#[test]
fn fairness_figures_are_in_the_stats() {
    let h = History::new(correct_history(3, &params(3, 5_000))).unwrap();
    let r = checkers::check(&h, &CheckConfig::default());
    let f = &r.stats.extra["fairness"];
    let jain = f["jain_index"].as_f64().unwrap();
    assert!(jain > 0.0 && jain <= 1.0, "{f}");
    assert_eq!(f["acquire_ok"].as_u64().unwrap(), r.stats.grants);
    assert!(r.stats.extra["unavailability"].is_object());
    assert!(r.stats.extra["never_completed"]["count"].is_u64());
    // The extra figures survive a round trip through results.json.
    let back: history::Results = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
}
