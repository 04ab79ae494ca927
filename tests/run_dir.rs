//! What `check` and `report` make of a run directory whose results.json is missing or was
//! written for another history: a run without results never finished (unknown), `report`
//! re-judges a history that changed after its results (writing the new verdict whole, or
//! nothing), `check` writes nothing but says when the directory disagrees with it, and both
//! exit alike.

mod common;

use common::run_with_limit;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("checkers/tests/fixtures/{name}.jsonl"))
}

/// Exit code, stdout and stderr of one lockpick command.
fn lockpick(args: &[&str]) -> (Option<i32>, String, String) {
    let o = run_with_limit(args, Duration::from_secs(30));
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn results(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

/// Replaces the history, surely later than results.json on the file system's clock.
fn edit_history(dir: &Path, text: &[u8]) {
    let results = std::fs::metadata(dir.join("results.json"))
        .and_then(|m| m.modified())
        .unwrap();
    // Bounded: the clock the file system stamps with moves on within milliseconds.
    for _ in 0..200 {
        std::fs::write(dir.join("history.jsonl"), text).unwrap();
        let h = std::fs::metadata(dir.join("history.jsonl"))
            .and_then(|m| m.modified())
            .unwrap();
        if h > results {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("history.jsonl never got a later mtime than results.json");
}

#[test]
fn a_run_directory_without_results_is_unknown_for_check_and_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::copy(fixture("valid-basic"), dir.join("history.jsonl")).unwrap();
    let d = dir.to_str().unwrap();
    let (code, out, _) = lockpick(&["check", d]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.starts_with("run: INCOMPLETE (interrupted): the run never finished"),
        "{out}"
    );
    assert!(out.contains("verdict: UNKNOWN"), "{out}");
    // The history file on its own, in a folder the runner did not make, is a history.
    let (code, out, _) = lockpick(&["check", dir.join("history.jsonl").to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    // `report` judges it as `check` did, writes the verdict, and exits as `check` does.
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("the run never wrote its verdict"), "{err}");
    let r = results(dir);
    assert_eq!(r["valid"], "unknown", "{r}");
    assert_eq!(r["completeness"]["state"], "interrupted", "{r}");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(
        summary.starts_with("run: INCOMPLETE (interrupted)"),
        "{summary}"
    );
}

#[test]
fn report_rejudges_a_history_changed_after_its_results_and_check_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let d = dir.to_str().unwrap();
    let history = dir.join("history.jsonl");
    std::fs::copy(fixture("valid-basic"), &history).unwrap();
    let (code, json, _) = lockpick(&["check", "--json", history.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{json}");
    std::fs::write(dir.join("results.json"), &json).unwrap();
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(
        (code, err.as_str()),
        (Some(0), ""),
        "a fresh results.json is kept"
    );

    // The history changed by hand: a double grant.
    edit_history(dir, &std::fs::read(fixture("double-grant")).unwrap());
    let recorded = std::fs::read(dir.join("results.json")).unwrap();
    let (code, out, err) = lockpick(&["check", d]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("results.json is not this verdict (history.jsonl changed after results.json was written; this check: invalid)"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.join("results.json")).unwrap(),
        recorded,
        "check wrote results.json"
    );
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("history.jsonl changed after results.json was written; judged its history (invalid) and wrote it, which said valid"),
        "{err}"
    );
    let r = results(dir);
    assert_eq!(r["valid"], false, "{r}");
    assert_eq!(r["violations"][0]["kind"], "double-grant", "{r}");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(summary.starts_with("verdict: INVALID"), "{summary}");
    // Written whole: no temporary file is left behind, and the directory agrees with itself.
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("tmp")), "{names:?}");
    let (code, _, err) = lockpick(&["check", d]);
    assert_eq!(code, Some(1));
    assert!(!err.contains("note:"), "{err}");

    // A history that cannot be read changes nothing that was recorded.
    edit_history(dir, b"{\"index\":0,\"time_ns\":1}\n");
    let recorded = std::fs::read(dir.join("results.json")).unwrap();
    let report = std::fs::read(dir.join("report.html")).unwrap();
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("cannot be judged (results.json left as it was)")
            && err.contains("history.jsonl:1: missing field"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.join("results.json")).unwrap(), recorded);
    assert_eq!(std::fs::read(dir.join("report.html")).unwrap(), report);
}

/// `check` says when the verdict results.json records is not its own, even when the history
/// is not newer (a results.json copied in from elsewhere).
#[test]
fn check_says_when_results_json_records_another_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::copy(fixture("valid-basic"), dir.join("history.jsonl")).unwrap();
    let history = dir.join("history.jsonl");
    let (_, valid, _) = lockpick(&["check", "--json", history.to_str().unwrap()]);
    std::fs::copy(fixture("double-grant"), &history).unwrap();
    std::fs::write(dir.join("results.json"), valid).unwrap();
    let (code, _, err) = lockpick(&["check", dir.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("(it records valid; this check: invalid)"),
        "{err}"
    );
    // Judged with other settings, a different verdict is no disagreement.
    let (_, _, err) = lockpick(&["check", dir.to_str().unwrap(), "--drift", "0.1"]);
    assert!(!err.contains("note:"), "{err}");
}
