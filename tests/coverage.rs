//! `--fail-on coverage` through the binary: `lockpick check` reads the schedule beside a
//! history for what the run asked for, and fails the run for a requested fault kind or
//! client-fault shape it exercised nowhere.

mod common;

use common::run_with_limit;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// A run directory: a correct history with one holder stall that ended just past its lease's
/// bound, just after another grant, and woke into a renew (boundary, renew reached); and a
/// schedule with the faults given.
fn run_dir(dir: &Path, faults: Value) {
    let history = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("checkers/tests/coverage/holder-just-past-bound-just-after-next-grant.jsonl");
    std::fs::copy(history, dir.join("history.jsonl")).unwrap();
    let schedule = json!({"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": faults});
    std::fs::write(dir.join("schedule.json"), schedule.to_string()).unwrap();
}

/// `lockpick check` of the history file (a run directory without results.json would be an
/// interrupted run; the schedule is found beside the file all the same).
fn check(dir: &Path, fail_on: &str) -> (Option<i32>, String) {
    let history = dir.join("history.jsonl");
    let o = run_with_limit(
        &["check", "--fail-on", fail_on, history.to_str().unwrap()],
        Duration::from_secs(60),
    );
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// A stall at `at_ms` (faults of a schedule come in start order and do not overlap).
fn stall(id: &str, at_ms: u64, shape: &str, wake: Option<&str>) -> Value {
    let mut f = json!({"id": id, "kind": "client-pause", "at_ms": at_ms, "length_ms": 1500,
                       "shape": shape});
    if let Some(w) = wake {
        f["wake"] = json!(w);
        f["after_ms"] = json!(30);
    }
    f
}

#[test]
fn a_schedule_whose_every_kind_and_shape_was_exercised_passes_the_coverage_gate() {
    let tmp = tempfile::tempdir().unwrap();
    run_dir(
        tmp.path(),
        json!([stall("f1", 100, "boundary", Some("renew"))]),
    );
    let (code, out) = check(tmp.path(), "safety,liveness,coverage");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("coverage (what this run exercised"), "{out}");
    assert!(!out.contains("not exercised:"), "{out}");
}

#[test]
fn a_requested_shape_or_kind_the_run_never_reached_fails_the_coverage_gate_only() {
    let tmp = tempfile::tempdir().unwrap();
    let pause = json!({"id": "f3", "kind": "pause", "at_ms": 5000, "length_ms": 500,
                       "nodes": ["n1"]});
    run_dir(
        tmp.path(),
        json!([
            stall("f1", 100, "boundary", Some("renew")),
            stall("f2", 2000, "waiter", None),
            pause
        ]),
    );
    let (code, out) = check(tmp.path(), "safety,liveness,coverage");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("not exercised: fault pause: no client op overlapped one"),
        "{out}"
    );
    assert!(
        out.contains("not exercised: client-fault shape waiter: no stall reached its condition"),
        "{out}"
    );
    // The verdict itself is valid: without `coverage` in the policy, the run passes.
    let (code, _) = check(tmp.path(), "safety,liveness");
    assert_eq!(code, Some(0));
    let o = run_with_limit(
        &[
            "check",
            "--json",
            tmp.path().join("history.jsonl").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        r["coverage"]["requested"],
        json!({"faults": ["client-pause", "pause"], "shapes": ["boundary", "renew", "waiter"]})
    );
    assert_eq!(r["coverage"]["faults"]["pause"]["started"], 0);
}

#[test]
fn an_unreadable_schedule_is_a_note_and_the_history_s_own_requests_stand() {
    let tmp = tempfile::tempdir().unwrap();
    run_dir(tmp.path(), json!([]));
    std::fs::write(tmp.path().join("schedule.json"), "{not json").unwrap();
    let (code, out) = check(tmp.path(), "coverage");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("schedule.json: not read (") && out.contains("coverage asks only for"),
        "{out}"
    );
}
