//! Data-driven coverage tests: every `tests/coverage/<name>.jsonl` is checked, by the file path
//! and the in-memory path, and its `coverage` compared with `<name>.expected.json`:
//!
//! ```json
//! {"description": "...", "config": {"drift": 0.1},
//!  "coverage": {"holder": {"lease_bound": {"just_past": 1}}}}
//! ```
//!
//! The expected `coverage` is a subset: every key it gives must be in the results with the same
//! value (objects compared key by key, anything else exactly), so a fixture names the rows it
//! is about, zeros included, and the near misses beside them.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::CheckConfig;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/coverage")
}

/// Where `actual` differs from the subset `expected`, as `path: expected X, got Y` lines.
fn mismatches(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => mismatches(&p, ev, av, out),
                    None => out.push(format!("{p}: expected {ev}, missing")),
                }
            }
        }
        _ if expected != actual => out.push(format!("{path}: expected {expected}, got {actual}")),
        _ => {}
    }
}

#[test]
fn every_coverage_fixture_counts_what_it_expects_on_both_paths() {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/coverage")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    names.sort();
    assert!(names.len() >= 7, "fixtures missing: {names:?}");
    let mut failures = Vec::new();
    for path in &names {
        let expected_path = path.with_extension("expected.json");
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(&expected_path).expect("expected file"))
                .expect("expected json");
        let mut cfg = CheckConfig::default();
        if let Some(d) = expected.pointer("/config/drift").and_then(Value::as_f64) {
            cfg.drift = d;
        }
        let (from_file, _) = checkers::check_path(path, &cfg).expect("check_path");
        let (h, _) = history::read_history(path).expect("read_history");
        let in_memory = checkers::check(&h, &cfg);
        assert_eq!(
            from_file.coverage,
            in_memory.coverage,
            "{}: the file and in-memory paths disagree",
            path.display()
        );
        // A coverage fixture is a correct history: coverage is about what it exercised.
        assert!(
            from_file.violations.is_empty(),
            "{}: {:?}",
            path.display(),
            from_file.violations
        );
        let actual = serde_json::to_value(&from_file.coverage).expect("serialize");
        let mut out = Vec::new();
        mismatches("coverage", &expected["coverage"], &actual, &mut out);
        if !out.is_empty() {
            failures.push(format!(
                "{} ({}):\n  {}",
                path.file_name().unwrap().to_string_lossy(),
                expected["description"].as_str().unwrap_or(""),
                out.join("\n  ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_history_without_stalls_or_faults_has_every_row_at_zero() {
    let (h, _) = history::read_history(&dir().join("holder-just-before-bound.jsonl")).unwrap();
    let plain: Vec<_> = h
        .ops
        .iter()
        .filter(|o| o.process != history::Process::Nemesis)
        .cloned()
        .collect();
    let r = checkers::check(
        &history::History::new(plain).unwrap(),
        &CheckConfig::default(),
    );
    let c = r.coverage.expect("coverage is always counted");
    assert_eq!(c.stalls, 0);
    assert!(c.faults.is_empty() && c.shapes.is_empty());
    assert!(c.requested.faults.is_empty() && c.missing().is_empty());
    assert!(c.rows().iter().all(|row| row.count == 0));
}
