//! Data-driven checker tests: every `tests/fixtures/<name>.jsonl` is checked and compared with
//! its `<name>.expected.json`:
//!
//! ```json
//! {"description": "...", "valid": false, "config": {"drift": 0.2},
//!  "violations": [{"kind": "double-grant", "ops": [3, 7], "nemesis": [2]}], "warnings": []}
//! ```
//!
//! Kinds and op-index sets must match exactly (as multisets); `nemesis`, where given, lists the
//! start indices of the faults the violation must report active; `explanation_contains`, where
//! given, lists phrases its sentence must hold. `config` is optional; `not_judged`, where given,
//! lists exactly the checkers that had nothing to judge; `checker_notes_contain`, where given,
//! maps a checker's name to phrases its notes (or why it judged nothing) must hold.
//!
//! A history the reader must refuse is in `tests/fixtures/refused/`, its expected file holding
//! `"refused": {"line": N, "contains": "..."}` instead of a verdict: both paths
//! (`read_history`, and the streaming `check_path`) refuse it, in the same words, naming
//! `<file>:N:`. Each is a verdict fixture made malformed in one place, and says which.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::CheckConfig;
use history::{History, Results, Validity, Violation};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn config(expected: &Value) -> CheckConfig {
    let mut cfg = CheckConfig::default();
    if let Some(c) = expected.get("config") {
        if let Some(d) = c.get("drift").and_then(Value::as_f64) {
            cfg.drift = d;
        }
        if let Some(g) = c.get("liveness_grace_ns").and_then(Value::as_u64) {
            cfg.liveness_grace_ns = g;
        }
        if let Some(m) = c.get("min_grants").and_then(Value::as_u64) {
            cfg.min_grants = m;
        }
        if let Some(r) = c.get("monotonic_clock_reach_ns").and_then(Value::as_u64) {
            cfg.monotonic_clock_reach_ns = Some(r);
        }
    }
    cfg
}

/// (kind, sorted ops) for each entry, sorted.
fn expected_set(list: &Value) -> Vec<(String, Vec<u64>)> {
    let mut out: Vec<(String, Vec<u64>)> = list
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| {
            let kind = v["kind"].as_str().expect("kind").to_string();
            let mut ops: Vec<u64> = v["ops"]
                .as_array()
                .expect("ops")
                .iter()
                .map(|o| o.as_u64().expect("op index"))
                .collect();
            ops.sort_unstable();
            (kind, ops)
        })
        .collect();
    out.sort();
    out
}

fn actual_set(list: &[Violation]) -> Vec<(String, Vec<u64>)> {
    let mut out: Vec<(String, Vec<u64>)> = list
        .iter()
        .map(|v| {
            let mut ops = v.ops.clone();
            ops.sort_unstable();
            (v.kind.as_str().to_string(), ops)
        })
        .collect();
    out.sort();
    out
}

fn describe(r: &Results) -> String {
    let mut s = format!("valid: {}\n", r.valid);
    for v in r.violations.iter().chain(&r.warnings) {
        s.push_str(&format!(
            "  {} ops {:?} window {:?} nemesis {:?}\n    {}\n",
            v.kind,
            v.ops,
            v.window_ns,
            v.nemesis.iter().map(|f| f.index).collect::<Vec<_>>(),
            v.explanation
        ));
    }
    for c in &r.checkers {
        for n in &c.notes {
            s.push_str(&format!("  note ({}): {n}\n", c.name));
        }
    }
    s
}

/// A fixture's `<name>.expected.json`.
fn read_expected(jsonl: &Path) -> Result<Value, String> {
    let path = jsonl.with_extension("expected.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The `.jsonl` histories in `dir`, sorted.
fn histories_in(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    paths
}

/// Checks one fixture; returns why it failed.
fn run_fixture(jsonl: &Path) -> Result<(), String> {
    let expected = read_expected(jsonl)?;
    let (ops, warnings) = history::read_ops(jsonl).map_err(|e| e.to_string())?;
    if !warnings.is_empty() {
        return Err(format!("reader warnings: {warnings:?}"));
    }
    let h = History::new(ops).map_err(|e| format!("structure: {e}"))?;
    let cfg = config(&expected);
    let r = checkers::check(&h, &cfg);

    let want_valid: Validity =
        serde_json::from_value(expected["valid"].clone()).map_err(|e| e.to_string())?;
    let mut errors = Vec::new();
    if r.valid != want_valid {
        errors.push(format!("valid: expected {want_valid}, got {}", r.valid));
    }
    let fields = [
        ("violations", &r.violations),
        ("warnings", &r.warnings),
        ("expected", &r.expected),
    ];
    for (field, actual) in fields {
        // A fixture that lists nothing as expected expects nothing set apart.
        let none = Value::Array(Vec::new());
        let want = expected_set(expected.get(field).unwrap_or(&none));
        let got = actual_set(actual);
        if want != got {
            errors.push(format!("{field}: expected {want:?}, got {got:?}"));
        }
        for e in expected
            .get(field)
            .unwrap_or(&none)
            .as_array()
            .into_iter()
            .flatten()
        {
            let want_ops = expected_set(&Value::Array(vec![e.clone()])).remove(0);
            let found = actual
                .iter()
                .find(|v| actual_set(std::slice::from_ref(*v))[0] == want_ops);
            // Sentences are for people checking by hand: the fixture may pin what they say.
            for text in e["explanation_contains"].as_array().into_iter().flatten() {
                let text = text.as_str().expect("explanation_contains holds strings");
                if !found.is_some_and(|v| v.explanation.contains(text)) {
                    errors.push(format!(
                        "{} {:?}: explanation does not say {text:?}",
                        want_ops.0, want_ops.1
                    ));
                }
            }
            let Some(nem) = e.get("nemesis") else {
                continue;
            };
            let mut want_nem: Vec<u64> = nem
                .as_array()
                .expect("nemesis list")
                .iter()
                .filter_map(Value::as_u64)
                .collect();
            want_nem.sort_unstable();
            if let Some(v) = found {
                let mut got_nem: Vec<u64> = v.nemesis.iter().map(|f| f.index).collect();
                got_nem.sort_unstable();
                if got_nem != want_nem {
                    errors.push(format!(
                        "{} {:?}: expected active faults {want_nem:?}, got {got_nem:?}",
                        want_ops.0, want_ops.1
                    ));
                }
            }
        }
    }
    // Checkers that looked at nothing say so, never pass silently.
    if let Some(list) = expected.get("not_judged") {
        let mut want: Vec<&str> = list
            .as_array()
            .expect("not_judged lists checker names")
            .iter()
            .map(|n| n.as_str().expect("a checker name"))
            .collect();
        want.sort_unstable();
        let mut got: Vec<&str> = r
            .checkers
            .iter()
            .filter(|c| c.status() == "not-judged")
            .map(|c| c.name.as_str())
            .collect();
        got.sort_unstable();
        if want != got {
            errors.push(format!("not judged: expected {want:?}, got {got:?}"));
        }
    }
    // Why a checker judged what it did, where the fixture pins it: a phrase of its notes.
    if let Some(map) = expected.get("checker_notes_contain") {
        for (name, phrases) in map.as_object().expect("checker_notes_contain maps names") {
            let notes = (r.checkers.iter().find(|c| &c.name == name))
                .map(|c| {
                    c.notes
                        .iter()
                        .chain(&c.not_judged)
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
                .join(" | ");
            for p in phrases.as_array().expect("a list of phrases") {
                let p = p.as_str().expect("a phrase");
                if !notes.contains(p) {
                    errors.push(format!("{name}'s notes do not say {p:?}: {notes}"));
                }
            }
        }
    }
    // What every violation must carry, whatever the fixture.
    for v in r.violations.iter().chain(&r.warnings) {
        if v.ops.is_empty()
            || v.explanation.is_empty()
            || v.window_ns[0] > v.window_ns[1]
            || v.lock.is_none()
        {
            errors.push(format!("incomplete violation: {v:?}"));
        }
        if v.explanation.contains('\n') {
            errors.push(format!("explanation is not one line: {}", v.explanation));
        }
    }
    // Deterministic, and the serialized form reads back the same.
    if checkers::check(&h, &cfg) != r {
        errors.push("two runs disagree".to_string());
    }
    let json = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    let back: Results = serde_json::from_str(&json).map_err(|e| e.to_string())?;
    if back != r {
        errors.push("results do not round-trip through JSON".to_string());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n{}", errors.join("\n"), describe(&r)))
    }
}

/// A fixture both paths must refuse, naming its file and line, in the same words.
fn run_refused(jsonl: &Path) -> Result<(), String> {
    let expected = read_expected(jsonl)?;
    let (refused, cfg) = (&expected["refused"], &config(&expected));
    let line = refused["line"].as_u64().expect("refused.line");
    let words = refused["contains"].as_str().expect("refused.contains");
    let in_memory = match history::read_history(jsonl) {
        Ok(_) => return Err("read_history accepted it".into()),
        Err(e) => e.to_string(),
    };
    let streamed = match checkers::check_path(jsonl, cfg) {
        Ok(_) => return Err("check_path accepted it".into()),
        Err(e) => e.to_string(),
    };
    let at = format!("{}:{line}: ", jsonl.display());
    if in_memory != streamed {
        Err(format!(
            "the paths word it differently:\n  {in_memory}\n  {streamed}"
        ))
    } else if !streamed.starts_with(&at) || !streamed.contains(words) {
        Err(format!("expected {at}...{words}..., got {streamed}"))
    } else {
        Ok(())
    }
}

#[test]
fn fixtures_match_expected_results() {
    let paths = histories_in(&fixtures_dir());
    assert!(paths.len() >= 20, "fixtures missing: {paths:?}");
    let mut failures = Vec::new();
    for p in &paths {
        if let Err(e) = run_fixture(p) {
            failures.push(format!(
                "fixture {}:\n{e}",
                p.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n\n")
    );
}

/// Every fixture checked as a history too long to read whole for its incidents (the limit at
/// 0): the streaming rules prove its violations, each with its faults and evidence, and a
/// second streamed reading groups them into incidents, field for field the whole check's. The
/// deadlocks' faults among them (`deadlock-three-way-across-a-pause`), and the token resets.
#[test]
fn every_fixture_past_the_whole_read_limit_lists_what_the_whole_check_lists() {
    let (mut grouped, mut deadlocks_with_faults, mut resets) = (0, 0, 0);
    for p in histories_in(&fixtures_dir()) {
        let cfg = config(&read_expected(&p).expect("expected"));
        let (whole, _) = checkers::check_path(&p, &cfg).expect("checked");
        let (alone, _) = checkers::check_path_within(&p, &cfg, 0).expect("checked");
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            !(alone.notes.iter()).any(|n| n.contains("not grouped into incidents")),
            "{name}: {:?}",
            alone.notes
        );
        let streamed = checkers::check_path_streamed(&p, &cfg).expect("checked");
        if let (false, Some((streamed, _))) = (alone.incidents.is_empty(), streamed) {
            assert_eq!(
                serde_json::to_value(&streamed).unwrap(),
                serde_json::to_value(&alone).unwrap(),
                "{name}"
            );
            grouped += 1;
            deadlocks_with_faults += (alone.violations.iter())
                .filter(|v| v.kind == history::ViolationKind::Deadlock && !v.nemesis.is_empty())
                .count();
            resets += (alone.incidents.iter())
                .filter(|i| i.token_reset.is_some())
                .count();
        }
        assert_eq!(
            serde_json::to_value(&alone).unwrap(),
            serde_json::to_value(&whole).unwrap(),
            "{name}"
        );
    }
    assert!(
        grouped >= 20,
        "{grouped} fixtures grouped from a streamed reading"
    );
    assert!(
        resets >= 1,
        "no token reset grouped from a streamed reading"
    );
    assert!(
        deadlocks_with_faults >= 1,
        "no deadlock with faults read past the limit"
    );
}

#[test]
fn refused_fixtures_are_refused_by_both_paths() {
    let paths = histories_in(&fixtures_dir().join("refused"));
    assert!(paths.len() >= 4, "refused fixtures missing: {paths:?}");
    let failures: Vec<String> = paths
        .iter()
        .filter_map(|p| {
            run_refused(p)
                .err()
                .map(|e| format!("{}: {e}", p.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every kind has a fixture that proves it, so no rule goes untested.
#[test]
fn every_kind_has_a_violating_fixture() {
    let mut seen = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(fixtures_dir()).expect("fixtures dir") {
        let p = e.expect("dir entry").path();
        if !p.to_string_lossy().ends_with(".expected.json") {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        for field in ["violations", "warnings"] {
            for (kind, _) in expected_set(&v[field]) {
                seen.insert(kind);
            }
        }
    }
    for k in history::ViolationKind::ALL {
        assert!(seen.contains(k.as_str()), "no fixture shows {k}");
    }
}

/// A checker run on its own gives the same violations as within `check`.
#[test]
fn single_checker_agrees_with_check() {
    let path = fixtures_dir().join("stale-release-accepted.jsonl");
    let (ops, _) = history::read_ops(&path).unwrap();
    let h = History::new(ops).unwrap();
    let cfg = CheckConfig::default();
    let all = checkers::check(&h, &cfg);
    let mut merged = Vec::new();
    for c in checkers::all_checkers() {
        let out = c.check(&h, &cfg);
        merged.extend(out.violations);
    }
    merged.sort_by(|a, b| (a.window_ns[0], a.kind, &a.ops).cmp(&(b.window_ns[0], b.kind, &b.ops)));
    assert_eq!(merged, all.violations);
}

/// The service's own evidence on the ops a violation names (`Results::evidence`) is read the
/// same on both paths: the fields of each op's line that are no field of lockpick's own.
#[test]
fn violations_carry_the_services_evidence_on_both_paths() {
    let path = fixtures_dir().join("session-stalled-holder-double-grant.jsonl");
    let cfg = CheckConfig::default();
    let (streamed, _) = checkers::check_path(&path, &cfg).expect("checked");
    let (h, _) = history::read_history(&path).expect("read");
    let in_memory = checkers::check(&h, &cfg);
    assert_eq!(streamed.evidence, in_memory.evidence);
    let grant = &streamed.evidence[&1];
    assert_eq!(grant["pg_backend_pid"], 100);
    assert_eq!(grant["hold"], "session");
    assert_eq!(streamed.evidence[&5]["grant"], "101.2");
    // Only ops the violations name.
    assert!(streamed
        .evidence
        .keys()
        .all(|i| streamed.violations.iter().any(|v| v.ops.contains(i))));
    // A valid history keeps none.
    let valid = fixtures_dir().join("session-released-then-granted-valid.jsonl");
    assert!(checkers::check_path(&valid, &cfg)
        .unwrap()
        .0
        .evidence
        .is_empty());
}
