//! `--adapter zookeeper` against a real ZooKeeper server (Debian's zookeeper package, run by
//! its OpenJDK): the lock recipe started, faulted and driven by lockpick with nothing but the
//! target given. These tests read the history, not the verdict: what a grant held by a
//! session means to the checkers is theirs to say.
//!
//! - a run without faults: every grant has the lock node's czxid as its token (increasing
//!   from grant to grant of a lock), is held by a session, names its node, and is released;
//! - a holder stalled past its session timeout hears, at its next renew, that its session
//!   was lost;
//! - a killed server is restarted and waited for, and its locks go on from the znodes it kept.

mod common;

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

fn history(run: &common::Run) -> Vec<Value> {
    let text = std::fs::read_to_string(run.run_dir().join("history.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn is(op: &Value, kind: &str, f: &str) -> bool {
    op["type"] == kind && op["f"] == f
}

/// The run went its whole way (whatever the verdict).
fn assert_complete(run: &common::Run) {
    assert_ne!(run.code, 3, "{}", run.describe());
    assert_eq!(
        run.results()["completeness"]["state"],
        "complete",
        "{}",
        run.describe()
    );
}

/// Every ok acquire's token, per lock, in the order granted: each larger than the one before.
fn assert_tokens_rise(ops: &[Value], context: &str) -> usize {
    let mut last: HashMap<String, u64> = HashMap::new();
    let mut grants = 0;
    for op in ops.iter().filter(|o| is(o, "ok", "acquire")) {
        let lock = op["lock"].as_str().unwrap().to_string();
        let v = &op["value"];
        let token = v["token"]
            .as_u64()
            .unwrap_or_else(|| panic!("no token: {op}"));
        assert_eq!(v["hold"], "session", "{op}");
        let node = v["zk_node"].as_str().unwrap();
        let grant = v["grant"].as_str().unwrap();
        assert!(
            grant.starts_with("lock-") && node == format!("/lockpick/{lock}/{grant}"),
            "{op}"
        );
        assert!(v["zk_session"].as_str().unwrap().starts_with("0x"), "{op}");
        assert!(v["zk_timeout_ms"].as_u64().is_some(), "{op}");
        if let Some(before) = last.insert(lock, token) {
            assert!(
                token > before,
                "czxid {token} after {before}: {op}\n{context}"
            );
        }
        grants += 1;
    }
    grants
}

const BASE: &[&str] = &[
    "--adapter",
    "zookeeper",
    "--clients",
    "3",
    "--locks",
    "2",
    "--op-timeout",
    "1s",
    "--seed",
    "1",
];

fn run(out: &Path, args: &[&str]) -> common::Run {
    let mut all = BASE.to_vec();
    all.extend_from_slice(args);
    common::run(out, &all, Duration::from_secs(120))
}

/// A run of `args` replaying `schedule` (written into `tmp`), gone its whole way.
fn run_scheduled(tmp: &Path, schedule: &str, args: &[&str]) -> (common::Run, Vec<Value>) {
    let file = tmp.join("schedule.json");
    std::fs::write(&file, schedule).unwrap();
    let mut all = args.to_vec();
    all.extend(["--schedule", file.to_str().unwrap()]);
    let r = run(&tmp.join("out"), &all);
    assert_complete(&r);
    let ops = history(&r);
    (r, ops)
}

/// Some grant came after the kill's restart.
fn assert_granted_after_restart(ops: &[Value], r: &common::Run) {
    let restarted = ops
        .iter()
        .position(|o| o["process"] == "nemesis" && o["f"] == "restart")
        .unwrap_or_else(|| panic!("the kill never ended\n{}", r.describe()));
    assert!(
        ops[restarted..].iter().any(|o| is(o, "ok", "acquire")),
        "no grant after the restart\n{}",
        r.describe()
    );
}

/// A server paused for 3 s under 500 ms op timeouts: every client whose op it left unanswered
/// crashed, the holder among them. Their sessions (5 s, outliving the pause) go with their
/// processes, as a dead client's would (the adapter drops a session whose lock op went
/// unanswered; `crashed` drops one whose store op did), so the lock is granted again soon
/// after the resume, not held by a dead process's session for the rest of the run; and the
/// holder's belief ends at its crash, so those grants are no double grant.
#[test]
fn a_crashed_holders_session_does_not_keep_the_lock() {
    if !common::require_zookeeper() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (r, ops) = run_scheduled(
        tmp.path(),
        r#"{"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": [
 {"id": "f1", "kind": "pause", "at_ms": 1000, "length_ms": 3000, "nodes": ["n1"]}
]}"#,
        &[
            "--workload",
            "mutex",
            "--clients",
            "4",
            "--ttl",
            "5s",
            "--hold",
            "1s..2s",
            "--op-timeout",
            "500ms",
            "--duration",
            "9s",
        ],
    );
    let crashed = ops
        .iter()
        .filter(|o| is(o, "info", "renew") || is(o, "info", "release"))
        .count();
    assert!(
        crashed >= 1,
        "no holder crashed in the pause\n{}",
        r.describe()
    );
    let resumed = ops
        .iter()
        .find(|o| o["process"] == "nemesis" && o["f"] == "stop-pause")
        .and_then(|o| o["time_ns"].as_u64())
        .unwrap_or_else(|| panic!("the pause never ended\n{}", r.describe()));
    let regranted = ops
        .iter()
        .filter(|o| is(o, "ok", "acquire"))
        .filter_map(|o| o["time_ns"].as_u64())
        .find(|&t| t > resumed);
    assert!(
        regranted.is_some_and(|t| t < resumed + 3_000_000_000),
        "no grant within 3 s of the resume at {resumed} ns\n{}",
        r.describe()
    );
    assert!(r.kinds("violations").is_empty(), "{}", r.describe());
}

#[test]
fn a_run_without_faults_grants_by_czxid_and_releases() {
    if !common::require_zookeeper() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = run(
        tmp.path(),
        &[
            "--nemesis",
            "none",
            "--ttl",
            "1s",
            "--hold",
            "20ms..300ms",
            "--duration",
            "5s",
        ],
    );
    assert_complete(&r);
    let ops = history(&r);
    let grants = assert_tokens_rise(&ops, &r.describe());
    assert!(grants >= 5, "{grants} grants\n{}", r.describe());
    let releases = ops.iter().filter(|o| is(o, "ok", "release")).count();
    assert!(releases >= grants / 2, "{releases} releases of {grants}");
    // The counter's register is the fenced store beside the service, fenced by czxid.
    assert!(ops.iter().any(|o| is(o, "ok", "write")), "{}", r.describe());
    // A node's log is the server's own: it ran as QuorumPeerMain from the package's jar.
    let log = std::fs::read_to_string(r.run_dir().join("nodes/n1/stderr.log")).unwrap_or_default();
    assert!(
        log.contains("QuorumPeerMain") || log.contains("ZooKeeperServer"),
        "{log}"
    );
}

#[test]
fn a_holder_stalled_past_its_session_timeout_hears_its_session_was_lost() {
    if !common::require_zookeeper() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let schedule = tmp.path().join("stall.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": [
 {"id": "f1", "kind": "client-pause", "at_ms": 800, "length_ms": 2000, "window_ms": 2000,
  "shape": "long", "wake": "renew"}
]}"#,
    )
    .unwrap();
    let r = run(
        &tmp.path().join("out"),
        &[
            "--workload",
            "mutex",
            "--ttl",
            "500ms",
            "--hold",
            "1s..2s",
            "--duration",
            "5s",
            "--schedule",
            schedule.to_str().unwrap(),
        ],
    );
    assert_complete(&r);
    let ops = history(&r);
    let stop = ops
        .iter()
        .position(|o| o["process"] == "nemesis" && o["f"] == "stop-client-pause")
        .unwrap_or_else(|| panic!("no stall ended\n{}", r.describe()));
    let stalled = ops[stop]["value"]["process"].as_u64().unwrap();
    let renew = ops[stop..]
        .iter()
        .find(|o| o["process"] == stalled && o["f"] == "renew" && o["type"] != "invoke")
        .unwrap_or_else(|| panic!("p{stalled} never renewed after its stall\n{}", r.describe()));
    assert_eq!(renew["type"], "fail", "{renew}");
    let error = renew["value"]["error"].as_str().unwrap();
    assert!(error.starts_with("session-lost; "), "{renew}");
    // When the listener heard it: after the stall began, on the history's clock.
    let at: u64 = error
        .rsplit(" at ")
        .next()
        .and_then(|t| t.strip_suffix(" ns"))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no time in {error}"));
    let start = ops.iter().find(|o| o["f"] == "start-client-pause").unwrap();
    assert!(at >= start["time_ns"].as_u64().unwrap(), "{renew}\n{start}");
    assert_tokens_rise(&ops, &r.describe());
}

#[test]
fn a_killed_server_is_restarted_and_its_locks_go_on() {
    if !common::require_zookeeper() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (r, ops) = run_scheduled(
        tmp.path(),
        r#"{"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": [
 {"id": "f1", "kind": "kill", "at_ms": 1500, "length_ms": 300, "nodes": ["n1"]}
]}"#,
        &[
            "--workload",
            "mutex",
            "--ttl",
            "1s",
            "--hold",
            "20ms..300ms",
            "--duration",
            "6s",
        ],
    );
    assert_granted_after_restart(&ops, &r);
    // The znodes (and the zxid) survive the restart: tokens still rise across it.
    assert_tokens_rise(&ops, &r.describe());
}

/// Three servers from the same package, an ensemble lockpick configures (`server.N` lines,
/// `myid`) and waits for: clients on every member are granted, by czxid, and the leader
/// killed and restarted (whichever member the election chose, usually n3 when all start
/// together: the largest id wins; the schedule aims the kill at the primary by role) leaves
/// the others granting, each session moving to the next server when its connection breaks.
#[test]
fn an_ensemble_grants_on_every_member_and_outlives_a_killed_leader() {
    if !common::require_zookeeper() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (r, ops) = run_scheduled(
        tmp.path(),
        r#"{"version": 1, "seed": 1, "nodes": 3, "primary": 0, "by_role": true, "faults": [
 {"id": "f1", "kind": "kill", "at_ms": 2000, "length_ms": 300, "nodes": ["n1"]}
]}"#,
        &[
            "--nodes",
            "3",
            "--ttl",
            "1s",
            "--hold",
            "20ms..300ms",
            "--duration",
            "7s",
        ],
    );
    let servers: std::collections::BTreeSet<&str> = ops
        .iter()
        .filter(|o| is(o, "ok", "acquire"))
        .filter_map(|o| o["value"]["zk_server"].as_str())
        .collect();
    assert!(
        servers.len() >= 2,
        "grants from {servers:?}\n{}",
        r.describe()
    );
    assert_granted_after_restart(&ops, &r);
    // The harness asked each member who leads, and the kill aimed at the primary hit it.
    let log = std::fs::read_to_string(r.run_dir().join("lockpick.log")).unwrap();
    let leader = log
        .split("primary: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no primary found in the log\n{log}"));
    let kill = ops
        .iter()
        .find(|o| o["process"] == "nemesis" && o["f"] == "kill")
        .unwrap_or_else(|| panic!("no kill\n{}", r.describe()));
    assert_eq!(
        kill["value"]["nodes"],
        serde_json::json!([leader]),
        "{kill}"
    );
    assert_eq!(
        kill["value"]["roles"],
        serde_json::json!(["primary"]),
        "{kill}"
    );
    let schedule = std::fs::read_to_string(r.run_dir().join("schedule.json")).unwrap();
    assert!(schedule.contains(&format!("\"{leader}\"")), "{schedule}");
    // One zxid order across the ensemble: tokens rise from grant to grant whoever answers.
    assert_tokens_rise(&ops, &r.describe());
    let cfg = std::fs::read_to_string(r.run_dir().join("nodes/n2/data/zoo.cfg")).unwrap();
    assert_eq!(cfg.matches("\nserver.").count(), 3, "{cfg}");
    let myid = std::fs::read_to_string(r.run_dir().join("nodes/n2/data/myid")).unwrap();
    assert_eq!(myid.trim(), "2");
}

/// Settings one standalone server with session-held grants cannot honour are refused in one
/// line naming the flag, before anything starts (no server is needed to refuse them).
#[test]
fn bad_zookeeper_settings_are_refused_in_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--nodes", "2"],
            "--nodes 2: a ZooKeeper ensemble of two stops at the loss of either member",
        ),
        (
            &["--unsafe", "racy"],
            "--unsafe is a mode of the embedded lockd, not of zookeeper",
        ),
        (
            &["--ttl", "1s", "--renew-ttl", "600ms"],
            "--renew-ttl 600ms: a ZooKeeper session's timeout is fixed",
        ),
    ];
    for (args, expected) in cases {
        common::assert_refused_in_one_line("zookeeper", args, expected);
    }
}

/// The bank on ZooKeeper: a transfer holds two accounts' lock nodes in its session. A holder
/// stalled between its reads and its writes past its session timeout loses both nodes, and
/// another transfer is granted them while the first still believes it holds them (two holders
/// of the belief); its late writes carry czxids below the store's fence and are refused, so
/// the balances stay serializable and their total kept: on one run, the belief broken beside
/// the data kept safe.
#[test]
fn the_bank_on_zookeeper_keeps_its_data_when_a_stalled_holder_loses_its_session() {
    if !common::require_zookeeper() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let schedule = tmp.path().join("stall.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": [
 {"id": "f1", "kind": "client-pause", "at_ms": 800, "length_ms": 2500, "window_ms": 2000,
  "shape": "long", "wake": "write"}
]}"#,
    )
    .unwrap();
    let r = common::run(
        &tmp.path().join("out"),
        &[
            "--adapter",
            "zookeeper",
            "--workload",
            "bank",
            "--accounts",
            "2",
            "--clients",
            "3",
            "--op-timeout",
            "1s",
            "--ttl",
            "500ms",
            "--hold",
            "300ms..600ms",
            "--duration",
            "6s",
            "--seed",
            "1",
            "--schedule",
            schedule.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert_complete(&r);
    assert_eq!(r.code, 1, "{}", r.describe());
    let kinds = r.kinds("violations");
    assert!(
        kinds.iter().any(|k| k == "double-grant"),
        "{kinds:?}\n{}",
        r.describe()
    );
    common::assert_judged_valid(
        &r.results(),
        &["serializability", "bank-total", "store-fencing"],
        &r.describe(),
    );
}
