//! The injections of the adapter shapes (`InjectKind::adapter()`): a double grant inside a lease
//! set before its grant, a tokenless double grant answered too late for a definite hold, and a
//! renew of a released lease by another process. Each must be found with the injected op in its
//! witness; they are in `InjectKind::all()` too, whose mutation test (precedence.rs) covers every
//! kind.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::gen::{correct_history, GenParams};
use checkers::inject::{inject, InjectKind};
use checkers::CheckConfig;
use history::History;

/// `lockpick synth --inject NAME` takes every kind, the adapter shapes' included.
#[test]
fn every_injection_parses_by_its_name() {
    for k in InjectKind::all().into_iter() {
        assert_eq!(InjectKind::parse(k.as_str()), Some(k), "{}", k.as_str());
    }
}

/// Seeds where `kind` could be injected, and those where the checkers missed it (or named
/// other ops), with what they found instead.
fn misses(kind: InjectKind, seeds: u64) -> (u64, Vec<String>) {
    let mut applied = 0;
    let mut missed = Vec::new();
    for seed in 0..seeds {
        let p = GenParams {
            clients: 1 + (seed as usize % 5),
            locks: 1 + (seed as usize % 3),
            events: 1_200,
            info_rate: 0.05,
            nemesis: seed % 2 == 0,
            lease_evidence: seed % 3 != 0,
            ..GenParams::default()
        };
        let mut ops = correct_history(seed, &p);
        let Some(witness) = inject(&mut ops, kind, seed ^ 0xada9) else {
            continue;
        };
        applied += 1;
        let h = History::new(ops).expect("injections keep the structure");
        let r = checkers::check(&h, &CheckConfig::default());
        let found = r
            .violations
            .iter()
            .any(|v| v.kind == kind.violation() && witness.iter().all(|w| v.ops.contains(w)));
        if !found {
            let got: Vec<_> = r.violations.iter().map(|v| (v.kind, &v.ops)).collect();
            missed.push(format!("seed {seed}: witness {witness:?}, found {got:?}"));
        }
    }
    (applied, missed)
}

#[test]
fn adapter_injections_are_found_with_their_witness() {
    let seeds = 40;
    let mut report = Vec::new();
    for kind in InjectKind::adapter() {
        let (applied, missed) = misses(kind, seeds);
        assert!(
            applied >= seeds * 2 / 3,
            "{}: only {applied} of {seeds} histories could take it",
            kind.as_str()
        );
        if !missed.is_empty() {
            report.push(format!(
                "{}: {} of {applied} missed\n  {}",
                kind.as_str(),
                missed.len(),
                missed.join("\n  ")
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
