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

/// Sets a file's modification time, as `touch -d` or `cp -p` does.
fn set_mtime(path: &Path, t: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(t))
        .unwrap();
}

fn mtime(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).and_then(|m| m.modified()).unwrap()
}

/// A run directory whose results.json is `check --json`'s verdict of the fixture `name`, with
/// the history's modification time well before the results'.
fn judged_run_dir(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let history = tmp.path().join("history.jsonl");
    std::fs::copy(fixture(name), &history).unwrap();
    let (code, json, _) = lockpick(&["check", "--json", history.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{json}");
    std::fs::write(tmp.path().join("results.json"), &json).unwrap();
    let hour_before = mtime(&tmp.path().join("results.json")) - Duration::from_secs(3600);
    set_mtime(&history, hour_before);
    tmp
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
    assert_eq!(r["valid"], serde_json::Value::Null, "{r}");
    assert_eq!(r["completeness"]["state"], "interrupted", "{r}");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(
        summary.starts_with("run: INCOMPLETE (interrupted)"),
        "{summary}"
    );
    // The reason stays true beside the results.json `report` wrote: it does not claim there
    // is none.
    assert!(!summary.contains("no results.json"), "{summary}");
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(2), "{err}");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(
        summary.contains("it wrote its history but not its verdict"),
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
        err.contains("results.json is not this verdict (history.jsonl is not what results.json was judged from: it is now "),
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
        err.contains(" when judged; judged its history (invalid) and wrote it, which said valid"),
        "{err}"
    );
    let r = results(dir);
    assert_eq!(r["valid"], false, "{r}");
    assert_eq!(r["violations"][0]["kind"], "double-grant", "{r}");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    // Shorter than the run's history: the run's completeness no longer vouches for it.
    assert!(
        summary.starts_with("run: INCOMPLETE (interrupted): history.jsonl is ")
            && summary.contains("\nverdict: INVALID"),
        "{summary}"
    );
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
    // Without a results.json, none is written, and the error does not claim one was kept.
    std::fs::remove_file(dir.join("results.json")).unwrap();
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("cannot be judged (no results.json written)"),
        "{err}"
    );
    assert!(!dir.join("results.json").exists());
    // A history file named on its own is pointed to `check`.
    let h = dir.join("history.jsonl");
    let (code, _, err) = lockpick(&["report", h.to_str().unwrap()]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("not a run directory (expected a folder with history.jsonl or results.json)")
            && err.contains("lockpick check"),
        "{err}"
    );
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
    // Judged from this history, as far as results.json says (its `judged_from` left out, as a
    // results.json from before it was recorded, and written after the history).
    let mut valid: Value = serde_json::from_str(&valid).unwrap();
    valid.as_object_mut().unwrap().remove("judged_from");
    std::fs::write(dir.join("results.json"), valid.to_string()).unwrap();
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

/// results.json records what it was judged from (the history's length and BLAKE3), and
/// staleness is judged by that: a history edited in place with its modification time put back
/// (an editor that keeps it, `cp -p`, `touch -r`) is stale; one whose time alone moved is not.
#[test]
fn staleness_is_judged_by_content_not_by_modification_time() {
    let tmp = judged_run_dir("valid-basic");
    let dir = tmp.path();
    let d = dir.to_str().unwrap();
    let history = dir.join("history.jsonl");
    let text = std::fs::read(&history).unwrap();
    let r = results(dir);
    assert_eq!(r["judged_from"]["bytes"], text.len() as u64, "{r}");
    let digest = r["judged_from"]["blake3"].as_str().unwrap();
    assert_eq!(digest.len(), 64, "{digest}");
    assert!(digest
        .bytes()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert!(r["judged_from"].get("sha256").is_none(), "{r}");

    // `touch`: the history newer by its time only. Nothing is stale, nothing rewritten.
    set_mtime(
        &history,
        std::time::SystemTime::now() + Duration::from_secs(60),
    );
    let recorded = std::fs::read(dir.join("results.json")).unwrap();
    let (code, _, err) = lockpick(&["check", d]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("note:"), "{err}");
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(std::fs::read(dir.join("results.json")).unwrap(), recorded);

    // A double grant written over it in place, its old modification time put back (older than
    // results.json): by time, results.json would look current.
    let old = mtime(&dir.join("results.json")) - Duration::from_secs(3600);
    std::fs::write(&history, std::fs::read(fixture("double-grant")).unwrap()).unwrap();
    set_mtime(&history, old);
    assert!(mtime(&history) < mtime(&dir.join("results.json")));
    let (code, _, err) = lockpick(&["check", d]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("results.json is not this verdict (history.jsonl is not what results.json was judged from: it is now ")
            && err.contains("this check: invalid)"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.join("results.json")).unwrap(), recorded);
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("judged its history (invalid) and wrote it, which said valid"),
        "{err}"
    );
    let r = results(dir);
    assert_eq!(r["valid"], false, "{r}");
    let now = std::fs::read(&history).unwrap();
    assert_eq!(r["judged_from"]["bytes"], now.len() as u64, "{r}");
    // Re-judged, the directory agrees with itself.
    let (_, _, err) = lockpick(&["check", d]);
    assert!(!err.contains("note:"), "{err}");

    // An edit of the same length, time put back: the length alone cannot tell, the digest
    // does. (A later closing-read instant: the verdict stays invalid.)
    delay_last_event_in_place(&history);
    let (code, _, err) = lockpick(&["check", d]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("(history.jsonl is not what results.json was judged from: its BLAKE3 differs; this check: invalid)"),
        "{err}"
    );
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("its BLAKE3 differs; judged its history (invalid) and wrote it"),
        "{err}"
    );
}

/// A results.json written before BLAKE3 records the history's SHA-256 (what `sha256sum`
/// prints): it is compared by that, current while the history is the same, stale after a
/// same-length edit; written again, it records BLAKE3.
#[test]
fn a_results_json_with_a_sha256_is_compared_by_it() {
    let tmp = judged_run_dir("valid-basic");
    let dir = tmp.path();
    let d = dir.to_str().unwrap();
    let history = dir.join("history.jsonl");
    let sha256 = |path: &Path| {
        let out = std::process::Command::new("sha256sum")
            .arg(path)
            .output()
            .expect("sha256sum (coreutils) runs");
        String::from_utf8(out.stdout).unwrap()[..64].to_string()
    };
    let mut r = results(dir);
    let bytes = r["judged_from"]["bytes"].clone();
    r["judged_from"] = serde_json::json!({"bytes": bytes, "sha256": sha256(&history)});
    std::fs::write(dir.join("results.json"), r.to_string()).unwrap();
    let recorded = std::fs::read(dir.join("results.json")).unwrap();
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(std::fs::read(dir.join("results.json")).unwrap(), recorded);
    // The same length and time: the SHA-256 tells.
    delay_last_event_in_place(&history);
    let (_, _, err) = lockpick(&["report", d]);
    assert!(
        err.contains("history.jsonl is not what results.json was judged from: its SHA-256 differs; judged its history"),
        "{err}"
    );
    let r = results(dir);
    assert!(r["judged_from"]["blake3"].is_string(), "{r}");
    assert!(r["judged_from"].get("sha256").is_none(), "{r}");
}

/// A run directory whose history lost its last lines (cut at a line's end, so no line is
/// malformed) after its run judged it is no longer a complete run: `check` and `report` say
/// so, and judge it `unknown`, not `valid`; `report` records that, so it stays said.
#[test]
fn a_history_shorter_than_its_run_judged_is_not_a_complete_run() {
    let tmp = judged_run_dir("valid-basic");
    let dir = tmp.path();
    let d = dir.to_str().unwrap();
    let history = dir.join("history.jsonl");
    let text = std::fs::read_to_string(&history).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let half = lines[..lines.len() / 2].join("\n") + "\n";
    std::fs::write(&history, &half).unwrap();
    let want = format!(
        "history.jsonl is {} bytes, {} when its run judged it: lines the run wrote are missing",
        half.len(),
        text.len()
    );
    let (code, out, _) = lockpick(&["check", d]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("verdict: UNKNOWN") && out.contains(&want),
        "{out}"
    );
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(2), "{err}");
    let r = results(dir);
    assert_eq!(r["valid"], serde_json::Value::Null, "{r}");
    assert_eq!(r["completeness"]["state"], "interrupted", "{r}");
    // Judged again from what it wrote: still not a complete run.
    let (code, out, _) = lockpick(&["check", d]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains(&want), "{out}");
}

/// An edit that neither the length nor the modification time shows: the first digit of the
/// last event's `time_ns` one higher (a later closing-read instant), the time put back.
fn delay_last_event_in_place(history: &Path) {
    let text = String::from_utf8(std::fs::read(history).unwrap()).unwrap();
    let at = text.rfind("\"time_ns\":").unwrap() + "\"time_ns\":".len();
    let mut bytes = text.into_bytes();
    assert!(bytes[at].is_ascii_digit() && bytes[at] != b'9');
    bytes[at] += 1;
    let old = mtime(history);
    std::fs::write(history, &bytes).unwrap();
    set_mtime(history, old);
}

/// A results.json written before `judged_from` existed is judged stale by modification time,
/// as it always was.
#[test]
fn a_results_json_without_judged_from_falls_back_to_modification_times() {
    let tmp = judged_run_dir("valid-basic");
    let dir = tmp.path();
    let d = dir.to_str().unwrap();
    let mut r = results(dir);
    r.as_object_mut().unwrap().remove("judged_from").unwrap();
    std::fs::write(dir.join("results.json"), r.to_string()).unwrap();
    // Older history: current, by time.
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // Newer history: stale, by time.
    edit_history(dir, &std::fs::read(fixture("double-grant")).unwrap());
    let (code, _, err) = lockpick(&["report", d]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("history.jsonl changed after results.json was written; judged its history (invalid) and wrote it, which said valid"),
        "{err}"
    );
    // Written again, it records what it was judged from.
    assert!(results(dir)["judged_from"]["blake3"].is_string());
}

/// A suite's directory named where one of its runs was meant (`runs/latest` after a `lockpick
/// test`): `check` and `shrink` name its first failing scenario's run, the one most often meant.
#[test]
fn a_suite_directory_names_its_first_failing_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path();
    let run = |id: &str| {
        let d = suite
            .join("scenarios")
            .join(id)
            .join("20261207T000000.000Z");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(fixture("valid-basic"), d.join("history.jsonl")).unwrap();
        d
    };
    let (passing, failing) = (run("01-a"), run("02-b"));
    let suite_json = serde_json::json!({"scenarios": [
        {"verdict": "valid", "run_dir": passing},
        {"verdict": "invalid", "run_dir": failing},
    ]});
    std::fs::write(suite.join("suite.json"), suite_json.to_string()).unwrap();
    let want = format!(
        "a suite directory (`lockpick test`), not a run directory; its first failing scenario: {}",
        failing.display()
    );
    for cmd in ["check", "shrink"] {
        let (code, _, err) = lockpick(&[cmd, suite.to_str().unwrap()]);
        assert_eq!(code, Some(3), "{cmd}: {err}");
        assert!(err.contains(&want), "{cmd}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{cmd}: {err}");
    }
}
