//! A service written from docs/protocol.md alone (tests/services/minimal_lockd.py, Python
//! standard library only) passes lockpick under faults: the document says enough to build a
//! conforming service. Skips visibly without python3, never under LOCKPICK_SYSTEM_TESTS=1.

mod common;

use common::{nemesis_ops, require_python, run, Run, FAST};
use std::path::Path;
use std::time::Duration;

/// `python3 .../minimal_lockd.py --port {port} --data-dir {data_dir}`, as a `--node-cmd` (or
/// `--store-cmd`) template.
fn command() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/minimal_lockd.py");
    assert!(script.is_file(), "{} is missing", script.display());
    format!(
        "python3 '{}' --host {{host}} --port {{port}} --data-dir '{{data_dir}}'",
        script.display()
    )
}

/// Valid, exit 0, with grants and with the faults it was run under really recorded.
fn assert_valid_under(r: &Run, faults: &[&str]) {
    r.assert_clean();
    let res = r.results();
    assert_eq!(res["valid"], true, "{res}");
    let grants = res["stats"]["ops"]["acquire"]["ok"].as_u64().unwrap_or(0);
    assert!(
        grants >= 5,
        "only {grants} grants: the run tested little; {res}"
    );
    let nemesis = nemesis_ops(&r.run_dir());
    for f in faults {
        assert!(
            nemesis.iter().any(|op| op["f"] == *f),
            "no {f} event in the history: {nemesis:?}"
        );
    }
}

#[test]
fn minimal_python_service_is_valid_under_pause() {
    if !require_python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cmd = command();
    let mut args = vec!["--node-cmd", &cmd];
    args.extend_from_slice(FAST);
    args.extend_from_slice(&["--workload", "mutex", "--nemesis", "pause", "--seed", "1"]);
    let r = run(&tmp.path().join("runs"), &args, Duration::from_secs(90));
    assert_valid_under(&r, &["start-pause", "stop-pause"]);
}

/// The same program as the fenced store too, and a kill: tokens must survive the restart and
/// the restarted service must wait out earlier leases (`recovering`).
#[test]
fn minimal_python_service_and_store_are_valid_under_kill_and_client_pause() {
    if !require_python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cmd = command();
    let mut args = vec!["--node-cmd", &cmd, "--store-cmd", &cmd];
    args.extend_from_slice(FAST);
    args.extend_from_slice(&[
        "--workload",
        "counter",
        "--nemesis",
        "kill,client-pause,pause",
        "--seed",
        "2",
    ]);
    let r = run(&tmp.path().join("runs"), &args, Duration::from_secs(90));
    assert_valid_under(&r, &["kill", "restart", "start-client-pause"]);
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"error\":\"recovering\""),
        "the restarted service never answered recovering; {}",
        r.describe()
    );
}
