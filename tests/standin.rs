//! A new service is one adapter file plus one registration line: `workloads/src/standin.rs`
//! (its lock client and its descriptor) and `standin::StandIn` in the `services!` list of
//! workloads/src/lib.rs are all the code `--adapter standin` has. Here it drives a stand-in
//! service whose API is not the reference protocol (tests/services/standin_lockd.py) end to
//! end, with lockpick's store as its fenced resource, under pauses, kills and client stalls.
//! Skips visibly without python3, never under LOCKPICK_SYSTEM_TESTS=1.

mod common;

use common::{nemesis_ops, require_python, run, run_with_limit, FAST};
use std::path::Path;
use std::time::Duration;

fn command() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/standin_lockd.py");
    assert!(script.is_file(), "{} is missing", script.display());
    format!(
        "python3 '{}' --host {{host}} --port {{port}} --data-dir '{{data_dir}}'",
        script.display()
    )
}

#[test]
fn a_new_native_adapter_drives_its_service_end_to_end_and_is_valid() {
    if !require_python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cmd = command();
    let mut args = vec!["--adapter", "standin", "--node-cmd", &cmd];
    args.extend_from_slice(FAST);
    args.extend_from_slice(&[
        "--workload",
        "counter",
        "--nemesis",
        "pause,kill,client-pause",
        "--seed",
        "3",
        // Waits shorter than most holds, so the stand-in also answers `held` (its wait_ms).
        "--acquire-wait",
        "200ms",
    ]);
    let r = run(&tmp.path().join("runs"), &args, Duration::from_secs(90));
    r.assert_clean();
    let res = r.results();
    let grants = res["stats"]["ops"]["acquire"]["ok"].as_u64().unwrap_or(0);
    assert!(grants >= 5, "only {grants} grants; {res}");
    let writes = res["stats"]["ops"]["write"]["ok"].as_u64().unwrap_or(0);
    assert!(writes >= 3, "only {writes} fenced writes; {res}");
    let kinds: Vec<String> = nemesis_ops(&r.run_dir())
        .iter()
        .map(|op| op["f"].as_str().unwrap_or_default().to_string())
        .collect();
    for f in ["start-pause", "kill", "restart", "start-client-pause"] {
        assert!(kinds.iter().any(|k| k == f), "no {f} in {kinds:?}");
    }
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    // The stand-in's own refusals reach the history as fails, in its words.
    assert!(history.contains("\"error\":\"held\""), "{}", r.describe());
    let config = std::fs::read_to_string(r.run_dir().join("config.toml")).unwrap();
    assert!(config.contains("adapter = \"standin\""), "{config}");
}

/// The descriptor says lockpick has no command of its own for the service: refused up front.
#[test]
fn a_service_without_a_command_of_its_own_needs_node_cmd() {
    let o = run_with_limit(
        &["run", "--adapter", "standin", "--nemesis", "none"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--adapter standin") && err.contains("--node-cmd"),
        "{err}"
    );
}
