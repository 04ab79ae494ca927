//! `--adapter redis-sentinel` against real servers and sentinels (Debian's redis-server
//! package: `redis-server`, and `redis-server --sentinel` for each sentinel): three boxes, a
//! server and a sentinel each, started, faulted and checked by lockpick, and the publicly known
//! unsafe behaviour of a Redis lock under Sentinel found where it is:
//!
//! - a master cut off from the other boxes (not from its clients) keeps granting while the
//!   other sentinels promote a replica, which grants the same lock: two holders, each grant
//!   naming the server that made it and the sentinel that named that server;
//! - a master paused past `down-after-milliseconds` is replaced, and resumed it still grants
//!   the clients that were polling it, until the sentinels demote it: two holders again;
//! - a master killed and restarted without persistence before the sentinels count it down
//!   comes back empty, and its replicas resync to its empty data set: the lock is granted
//!   again inside the holder's lease, and the counter token starts again.
//!
//! Each fault is aimed by a schedule, never drawn: the runs are short, and what they prove
//! does not depend on the luck of a plan.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{require_redis, run, Run};

const LIMIT: Duration = Duration::from_secs(90);

/// Where a test's runs go: on tmpfs where there is one (as tests/redis.rs).
fn scratch() -> tempfile::TempDir {
    match Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}

fn write_schedule(dir: &Path, name: &str, faults: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(r#"{{"version": 1, "seed": 1, "nodes": 3, "primary": 0, "faults": [{faults}]}}"#),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

/// The service's evidence on the ops the violations name, as results.json has it.
fn evidence(r: &Run) -> Vec<serde_json::Value> {
    let results = r.results();
    results["evidence"]
        .as_object()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

/// The harness waited for the sentinels to agree before anything else, and said so.
fn assert_settled_first(r: &Run) {
    let log = std::fs::read_to_string(r.run_dir().join("lockpick.log")).unwrap();
    let settled = log
        .find("nodes settled: SENTINEL")
        .unwrap_or_else(|| panic!("no settle line in lockpick.log:\n{log}"));
    assert!(
        log.find("probe passed").is_none_or(|p| p > settled),
        "settled before the probe\n{log}"
    );
}

/// The textbook split brain: n1 is cut off from n2 and n3 (its clients still reach it) for
/// 7 s. Its own sentinel keeps naming it and it keeps granting; the sentinels of n2 and n3
/// count it down after 1.5 s, agree and promote a replica a second or two later, and the
/// clients whose sentinel is n2's or n3's are granted the same lock there. Two clients per
/// box, short holds: the lock is asked for on both sides all the time.
#[test]
fn a_master_cut_off_from_the_sentinels_keeps_granting_while_a_replica_is_promoted() {
    if !require_redis() || !common::require_netns() {
        return;
    }
    let tmp = scratch();
    let schedule = write_schedule(
        tmp.path(),
        "isolate-n1.json",
        r#"{"id": "f1", "kind": "partition", "at_ms": 1000, "length_ms": 7000,
            "topology": "isolate", "cut": [["n1", "n2"], ["n1", "n3"]], "clients_cut_from": []}"#,
    );
    let r = run(
        &tmp.path().join("runs"),
        &[
            "--adapter",
            "redis-sentinel",
            "--runtime",
            "netns",
            "--clients",
            "6",
            "--ttl",
            "1s",
            "--hold",
            "50ms..300ms",
            "--op-timeout",
            "500ms",
            "--duration",
            "10s",
            "--seed",
            "1",
            "--schedule",
            &schedule,
        ],
        LIMIT,
    );
    assert_eq!(r.code, 1, "{}", r.describe());
    assert!(
        r.kinds("violations").iter().any(|k| k == "double-grant"),
        "{}",
        r.describe()
    );
    assert_settled_first(&r);
    // The grants the violations rest on name the servers that made them, the cut-off n1 and
    // the promoted replica, each with the node whose sentinel named it (n1's own, or, while
    // the failover's news spreads, another that had not heard it yet).
    let ev = evidence(&r);
    assert!(
        granted_by_both_masters(&ev),
        "evidence: {ev:?}\n{}",
        r.describe()
    );
    assert!(
        ev.iter()
            .any(|e| e["redis_role"] == "master" && e["redis_offset"].is_u64()),
        "{ev:?}"
    );
}

/// Whether the evidence of the violations' ops holds a grant by the old master `n1` and one
/// by a promoted replica, each naming the node whose sentinel named its server.
fn granted_by_both_masters(ev: &[serde_json::Value]) -> bool {
    let granted_by = |servers: &[&str]| {
        ev.iter().any(|e| {
            let node = e["redis_node"].as_str().unwrap_or_default();
            let sentinel = e["sentinel"].as_str().unwrap_or_default();
            servers.contains(&node) && ["n1", "n2", "n3"].contains(&sentinel)
        })
    };
    granted_by(&["n1"]) && granted_by(&["n2", "n3"])
}

/// The failover on one machine: n1 (its server and its sentinel) is paused for 3 s, past
/// `down-after-milliseconds` (1.5 s); the other sentinels promote a replica, which grants the
/// lock once the holder's key expires there. The clients whose acquire began while the
/// sentinels still named n1 keep polling it, as redis-py's pool keeps its connection; resumed,
/// n1 is a master until the sentinels demote it, and once its own copy of the key expires it
/// grants one of them: two holders, on two masters. Six clients on one lock with short holds
/// keep both kinds of client there (measured: every run of four at once).
#[test]
fn a_paused_master_is_replaced_and_resumed_still_grants_its_pollers() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let schedule = write_schedule(
        tmp.path(),
        "pause-n1.json",
        r#"{"id": "f1", "kind": "pause", "at_ms": 1000, "length_ms": 3000, "nodes": ["n1"]}"#,
    );
    let r = run(
        &tmp.path().join("runs"),
        &[
            "--adapter",
            "redis-sentinel",
            "--clients",
            "6",
            "--ttl",
            "2s",
            "--hold",
            "50ms..300ms",
            "--duration",
            "12s",
            "--seed",
            "1",
            "--schedule",
            &schedule,
        ],
        LIMIT,
    );
    assert_eq!(r.code, 1, "{}", r.describe());
    assert!(
        r.kinds("violations").iter().any(|k| k == "double-grant"),
        "{}",
        r.describe()
    );
    let ev = evidence(&r);
    assert!(
        granted_by_both_masters(&ev),
        "evidence: {ev:?}\n{}",
        r.describe()
    );
}

/// The kill is shorter than `down-after-milliseconds` (1.5 s), so no sentinel counts n1 down:
/// it comes back an empty master, its replicas resync to it and lose the key too, and the
/// clients (every sentinel still names n1) are granted the lock inside the holder's lease.
/// The holder takes the lock in the first 100 ms and holds it 4 s on 3 s leases, so a lease
/// is live across the kill at 1 s.
fn restart_run(out: &Path, extra: &[&str]) -> Run {
    let tmp_schedule = write_schedule(
        out,
        "kill-n1.json",
        r#"{"id": "f1", "kind": "kill", "at_ms": 1000, "length_ms": 300, "nodes": ["n1"]}"#,
    );
    let mut args = vec![
        "--adapter",
        "redis-sentinel",
        "--clients",
        "3",
        "--ttl",
        "3s",
        "--hold",
        "4s..4s",
        "--duration",
        "5s",
        "--seed",
        "1",
        "--schedule",
        &tmp_schedule,
    ];
    args.extend_from_slice(extra);
    run(&out.join("runs"), &args, LIMIT)
}

#[test]
fn a_master_restarted_without_persistence_empties_its_replicas_and_grants_again() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let r = restart_run(tmp.path(), &[]);
    assert_eq!(r.code, 1, "{}", r.describe());
    assert!(
        r.kinds("violations").iter().any(|k| k == "double-grant"),
        "{}",
        r.describe()
    );
    assert_settled_first(&r);
    let ev = evidence(&r);
    assert!(
        ev.iter()
            .any(|e| e["redis_node"] == "n1" && e["sentinel"].is_string()),
        "{ev:?}"
    );
}

#[test]
fn the_counter_token_repeats_after_a_restart_without_persistence() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let r = restart_run(tmp.path(), &["--adapter-opt", "fence=counter"]);
    assert_eq!(r.code, 1, "{}", r.describe());
    let found = r.kinds("violations");
    assert!(
        found
            .iter()
            .any(|k| k == "token-reused" || k == "token-regressed"),
        "{found:?}\n{}",
        r.describe()
    );
    // The tokens guard a register (lockpick's fenced store): writes went through them.
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"type\":\"ok\",\"f\":\"write\""),
        "no write was accepted\n{}",
        r.describe()
    );
}

/// Settings a Sentinel deployment cannot honour are refused in one line naming the flag,
/// before anything starts.
#[test]
fn bad_sentinel_settings_are_refused_in_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--nodes", "1"],
            "--nodes 1: --adapter redis-sentinel needs 3 or more nodes",
        ),
        (
            &["--nodes", "2"],
            "--nodes 2: --adapter redis-sentinel needs 3 or more nodes",
        ),
        (
            &["--unsafe", "racy"],
            "--unsafe is a mode of the embedded lockd, not of redis-sentinel",
        ),
        (
            &["--adapter-opt", "quorum=1"],
            "--adapter-opt \"quorum=1\": --adapter redis-sentinel has no option \"quorum\"; its options: persistence (none|rdb|aof-everysec|aof-always), fence (none|counter)",
        ),
        (
            &["--url", "redis://127.0.0.1:6379"],
            "--url: --adapter redis-sentinel finds the master through the sentinels",
        ),
        (
            &["--workload", "counter"],
            "--workload counter: the counter's register is fenced by the lock's tokens, and the grants of --adapter redis-sentinel carry none as configured; use --workload mutex or bank, or --adapter-opt fence=counter",
        ),
    ];
    for (args, expected) in cases {
        common::assert_refused_in_one_line("redis-sentinel", args, expected);
    }
}

/// The bank under Sentinel, the same restart: a transfer holds both accounts' locks on n1
/// across its restart, and another is granted them on the emptied master while the first still
/// holds them (each grant its own key and value, the pair taken and lost together).
#[test]
fn the_bank_under_sentinel_grants_both_accounts_again_after_a_restart_without_persistence() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let r = restart_run(
        tmp.path(),
        &[
            "--workload",
            "bank",
            "--accounts",
            "2",
            "--adapter-opt",
            "fence=counter",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.describe());
    let kinds = r.kinds("violations");
    assert!(
        kinds.iter().any(|k| k == "double-grant"),
        "{kinds:?}\n{}",
        r.describe()
    );
    assert_settled_first(&r);
}
