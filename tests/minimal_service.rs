//! A service written from docs/protocol.md alone (tests/services/minimal_lockd.py, Python
//! standard library only) passes lockpick under faults: the document says enough to build a
//! conforming service. Skips visibly without python3, never under LOCKPICK_SYSTEM_TESTS=1.

mod common;

use common::{assert_aim_exercised, nemesis_ops, require_python, run, Aim, Run, FAST};
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
    // Two pauses of a lease and a half each, once holds have begun: each freezes the service
    // under a live lease.
    let aim = Aim::new(common::FAST_TTL_MS, 1)
        .starting_at_ms(1000)
        .pause_for("n1", 1500)
        .pause_for("n1", 1500);
    let schedule = aim.write(tmp.path());
    let duration = format!("{}ms", aim.duration_ms());
    let mut args = vec!["--node-cmd", &cmd];
    args.extend_from_slice(FAST);
    args.extend_from_slice(&["--workload", "mutex", "--seed", "1"]);
    args.extend_from_slice(&[
        "--schedule",
        schedule.to_str().unwrap(),
        "--duration",
        &duration,
    ]);
    let r = run(&tmp.path().join("runs"), &args, Duration::from_secs(90));
    assert_aim_exercised(&aim, &r.results(), &r.describe());
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
    // Aimed, so the verdict rests on faults that met their state: a 2 s lease outlives the
    // Python service's restart (a few hundred ms), so a kill's node is back while the lease
    // it granted lives; two kills, a boundary stall waking into a renew and a pause.
    let aim = Aim::new(2000, 1)
        .starting_at_ms(1000)
        .kill("n1")
        .stall("boundary", Some("renew"), Some(50))
        .kill("n1")
        .pause_for("n1", 3000);
    let schedule = aim.write(tmp.path());
    let duration = format!("{}ms", aim.duration_ms());
    let mut args = vec!["--node-cmd", &cmd, "--store-cmd", &cmd];
    args.extend_from_slice(FAST);
    args.extend_from_slice(&[
        "--workload",
        "counter",
        "--ttl",
        "2s",
        "--schedule",
        schedule.to_str().unwrap(),
        "--duration",
        &duration,
        "--seed",
        "2",
    ]);
    let r = run(&tmp.path().join("runs"), &args, Duration::from_secs(120));
    assert_aim_exercised(&aim, &r.results(), &r.describe());
    assert_valid_under(&r, &["kill", "restart", "start-client-pause"]);
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"error\":\"recovering\""),
        "the restarted service never answered recovering; {}",
        r.describe()
    );
}
