//! A safety violation proven on a prefix of a history stays proven on the whole of it: what
//! `--stop-on-violation` and the live verdicts rest on (a run stopped at the first violation
//! the live check proves must end `invalid`, and a violation shown while the run goes on must
//! not vanish from its verdict).
//!
//! A prefix is what a live check reads: the file as written so far, ops invoked and not yet
//! answered, cut where time moves on: the events of the last instant read are left for the next
//! read, since events of one instant may be written in any order and one still unwritten can
//! change what the others prove (fixture `model-d4-release-and-grant-at-one-instant-valid`: a
//! grant written before the release that happened at the same nanosecond). Each prefix's safety violations are compared, by kind, lock and ops, with the
//! whole history's. Liveness findings are left out on purpose: an op still pending in a prefix
//! may be answered later, and a lock that looked stuck may be freed; they are never a reason
//! to stop a run.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::gen::{correct_history, GenParams};
use checkers::inject::{inject, InjectKind};
use checkers::{check, CheckConfig};
use history::{History, KindClass, Op, Results};
use std::path::Path;

/// The safety violations of a verdict, as (kind, lock, sorted ops). A cycle (non-serializable)
/// is reported as its shortest witness, which can move to another key as the history grows:
/// its lock is left out.
fn safety(r: &Results) -> Vec<(String, Option<String>, Vec<u64>)> {
    r.violations
        .iter()
        .filter(|v| v.kind.class() == KindClass::Safety)
        .map(|v| {
            let mut ops = v.ops.clone();
            ops.sort_unstable();
            let lock = v.cycle.is_empty().then(|| v.lock.clone()).flatten();
            (v.kind.as_str().to_string(), lock, ops)
        })
        .collect()
}

/// Checks every prefix in `cuts` (counts of events) against the whole; returns how many
/// prefixes proved a safety violation.
fn prefixes_agree(
    ops: &[Op],
    cuts: impl Iterator<Item = usize>,
    cfg: &CheckConfig,
    what: &str,
) -> usize {
    let whole = check(&History::new(ops.to_vec()).expect("a valid history"), cfg);
    let proven = safety(&whole);
    let mut invalid = 0;
    for cut in cuts {
        let prefix = check(
            &History::new(ops[..cut].to_vec()).expect("a prefix of a valid history"),
            cfg,
        );
        let found = safety(&prefix);
        for v in &found {
            // The same fact on the same lock; its witness may grow as the history does (a
            // later op can show the regressed grant lived longer), so the ops are not compared.
            assert!(
                proven.iter().any(|p| (&p.0, &p.1) == (&v.0, &v.1)),
                "{what}: the first {cut} events prove {v:?}, the whole history does not \
                 (it proves {proven:?})"
            );
        }
        invalid += !found.is_empty() as usize;
    }
    invalid
}

#[test]
fn a_violation_proven_on_a_prefix_is_proven_on_the_whole_generated_and_injected() {
    let mut invalid = 0;
    for seed in 0..16u64 {
        let params = GenParams {
            clients: 2 + (seed as usize % 5),
            locks: 1 + (seed as usize % 3),
            events: 400 + 30 * seed as usize,
            info_rate: 0.05,
            client_pause_rate: 0.05,
            nemesis: seed % 2 == 0,
            lease_evidence: seed % 3 != 0,
            ..GenParams::default()
        };
        let kinds = std::iter::once(None).chain(InjectKind::all().into_iter().map(Some));
        for kind in kinds {
            let mut ops = correct_history(seed, &params);
            if let Some(k) = kind {
                inject(&mut ops, k, seed);
            }
            let cfg = CheckConfig {
                drift: if seed % 4 == 0 { 0.01 } else { 0.0 },
                ..CheckConfig::default()
            };
            let n = ops.len();
            // Every 7th cut and the last few: the ends of prefixes fall on every kind of line.
            let cuts = (1..n).step_by(7).chain(n.saturating_sub(4)..n);
            invalid += prefixes_agree(&ops, cuts, &cfg, &format!("seed {seed}, {kind:?}"));
        }
    }
    // The comparison must have covered prefixes that prove something, not only clean ones.
    assert!(invalid > 500, "only {invalid} prefixes proved a violation");
}

#[test]
fn a_violation_proven_on_a_prefix_is_proven_on_the_whole_fixtures() {
    // The hand-written fixtures: the corners each rule was written for, cut at every line.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut checked = 0;
    let mut invalid = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let expected: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path.with_extension("expected.json")).unwrap())
                .unwrap();
        let mut cfg = CheckConfig::default();
        if let Some(c) = expected.get("config") {
            if let Some(d) = c.get("drift").and_then(|v| v.as_f64()) {
                cfg.drift = d;
            }
            if let Some(g) = c.get("liveness_grace_ns").and_then(|v| v.as_u64()) {
                cfg.liveness_grace_ns = g;
            }
            if let Some(m) = c.get("min_grants").and_then(|v| v.as_u64()) {
                cfg.min_grants = m;
            }
            if let Some(r) = c.get("monotonic_clock_reach_ns").and_then(|v| v.as_u64()) {
                cfg.monotonic_clock_reach_ns = Some(r);
            }
        }
        let (ops, _) = history::read_ops(&path).unwrap();
        // Only prefixes a live check reads: cut where time moves on (see the module's note).
        let cuts: Vec<usize> = (1..ops.len())
            .filter(|&i| ops[i].time_ns > ops[i - 1].time_ns)
            .collect();
        invalid += prefixes_agree(&ops, cuts.into_iter(), &cfg, &path.display().to_string());
        checked += 1;
    }
    assert!(checked > 100, "only {checked} fixtures");
    assert!(invalid > 40, "only {invalid} prefixes proved a violation");
}
