//! Faults as data: a run's `schedule.json` replayed with `lockpick run --config RUN/config.toml
//! --schedule RUN/schedule.json` injects the same faults (kinds, targets, ids, order) at the
//! same offsets from the run's start, against the embedded lockd and against etcd; a schedule
//! the run cannot take is refused up front with one line naming the file and the fault.

mod common;

use common::{nemesis_ops, require_etcd, run, run_with_limit, FAST};
use nemesis::schedule::{FaultKind, Schedule};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);
/// How far a replayed fault may start from the original's start (and from its planned offset).
const TOLERANCE_MS: u64 = 300;

fn schedule_of(run_dir: &Path) -> Schedule {
    let text = std::fs::read_to_string(run_dir.join("schedule.json")).unwrap();
    Schedule::parse(&text).unwrap()
}

/// What must be the same in both runs: the op, its fault id and the nodes it names.
fn key(op: &Value) -> (String, String, String) {
    let v = &op["value"];
    let nodes = [&v["nodes"], &v["cut"], &v["clients_cut_from"]]
        .iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    (
        op["f"].as_str().unwrap().to_string(),
        v["fault"].as_str().unwrap_or("<none>").to_string(),
        nodes,
    )
}

fn ms(op: &Value) -> u64 {
    op["time_ns"].as_u64().unwrap() / 1_000_000
}

/// Runs `args` (a 12 s run), replays its schedule, and compares the two histories' nemesis
/// ops.
fn replay_matches(args: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let first = run(&tmp.path().join("first"), args, LIMIT);
    assert!(matches!(first.code, 0..=2), "{}", first.describe());
    let dir = first.run_dir();
    let planned = schedule_of(&dir);
    assert!(planned.faults.len() >= 3, "{planned:?}");
    let config = dir.join("config.toml");
    let schedule = dir.join("schedule.json");
    let second = run(
        &tmp.path().join("second"),
        &[
            "--config",
            config.to_str().unwrap(),
            "--schedule",
            schedule.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(matches!(second.code, 0..=2), "{}", second.describe());
    let again = second.run_dir();
    assert_eq!(schedule_of(&again), planned, "the replay's schedule.json");
    let recorded = std::fs::read_to_string(again.join("config.toml")).unwrap();
    assert!(
        recorded.contains(&format!(
            "schedule = \"{}\"",
            std::fs::canonicalize(&schedule).unwrap().display()
        )),
        "{recorded}"
    );

    // A stall request nobody takes lapses; one posted in the run's last second may or may not
    // be taken before the clients stop, and a fault due in the last moments may or may not
    // start before the run ends: such faults are left out of the comparison.
    let duration_ms = 12_000;
    let may_lapse: Vec<&str> = planned
        .faults
        .iter()
        .filter(|f| {
            f.at_ms + TOLERANCE_MS > duration_ms
                || (f.kind() == FaultKind::ClientPause
                    && f.at_ms + f.window_ms().unwrap() + 1_000 > duration_ms)
        })
        .map(|f| f.id.as_str())
        .collect();
    // A stall strikes only a client holding a lock while the request is open: under load
    // (etcd, a kill just before) none may hold one, in either run. Such a stall is left out of
    // the comparison when one of the two runs shows it lapsed.
    let (run_a, run_b) = (nemesis_ops(&dir), nemesis_ops(&again));
    let took = |ops: &[Value], id: &str| ops.iter().any(|op| op["value"]["fault"] == id);
    let lapsed: Vec<&str> = planned
        .faults
        .iter()
        .filter(|f| f.kind() == FaultKind::ClientPause)
        .filter(|f| !took(&run_a, &f.id) || !took(&run_b, &f.id))
        .map(|f| f.id.as_str())
        .collect();
    let may_lapse: Vec<&str> = may_lapse.into_iter().chain(lapsed).collect();
    let kept = |ops: Vec<Value>| -> Vec<Value> {
        ops.into_iter()
            .filter(|op| !may_lapse.contains(&op["value"]["fault"].as_str().unwrap_or("")))
            .collect()
    };
    let (a, b) = (kept(run_a), kept(run_b));
    let (ka, kb): (Vec<_>, Vec<_>) = (a.iter().map(key).collect(), b.iter().map(key).collect());
    assert_eq!(ka, kb, "nemesis ops differ between the run and its replay");
    // Every op belongs to a planned fault, and every node fault happened.
    for (_, id, _) in &ka {
        assert!(planned.faults.iter().any(|f| &f.id == id), "{id}");
    }
    for f in planned
        .faults
        .iter()
        .filter(|f| f.kind() != FaultKind::ClientPause && !may_lapse.contains(&f.id.as_str()))
    {
        assert!(
            ka.iter().any(|(_, id, _)| id == &f.id),
            "{} never ran",
            f.id
        );
    }
    for (x, y) in a.iter().zip(&b) {
        let f = x["f"].as_str().unwrap();
        if !(f.starts_with("start-") || f == "kill") {
            continue;
        }
        let id = x["value"]["fault"].as_str().unwrap();
        let p = planned.faults.iter().find(|p| p.id == id).unwrap();
        if f == "start-client-pause" {
            // The stall starts when a holder takes the request: within its window.
            let latest = p.at_ms + p.window_ms().unwrap() + TOLERANCE_MS;
            for t in [ms(x), ms(y)] {
                assert!(
                    (p.at_ms..=latest).contains(&t),
                    "{id}: {t} ms, planned {p:?}"
                );
            }
        } else {
            assert!(ms(x).abs_diff(ms(y)) <= TOLERANCE_MS, "{id}: {x} vs {y}");
            assert!(
                ms(y).abs_diff(p.at_ms) <= TOLERANCE_MS,
                "{id}: {y} vs {p:?}"
            );
        }
    }
    println!(
        "{} faults, {} nemesis ops replayed alike",
        planned.faults.len(),
        a.len()
    );
}

#[test]
fn embedded_lockd_replays_its_schedule() {
    let mut args = FAST.to_vec();
    args.extend([
        "--seed",
        "2",
        "--nodes",
        "3",
        "--nemesis",
        "pause,kill,client-pause",
        "--duration",
        "12s",
    ]);
    replay_matches(&args);
}

#[test]
fn etcd_replays_its_schedule() {
    if !require_etcd() {
        return;
    }
    let mut args = FAST.to_vec();
    args.extend([
        "--adapter",
        "etcd",
        "--nodes",
        "3",
        "--ttl",
        "2s",
        "--seed",
        "3",
        "--nemesis",
        "pause,kill,client-pause",
        "--duration",
        "12s",
    ]);
    replay_matches(&args);
}

/// Each bad schedule exits 3 before any traffic, with one line naming the file and the fault.
#[test]
fn a_bad_schedule_is_refused_naming_the_file_and_the_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let fault = |f: &str| format!(r#"{{"version": 1, "nodes": 1, "primary": 0, "faults": [{f}]}}"#);
    let pause =
        r#"{"id": "f1", "kind": "pause", "at_ms": 1000, "length_ms": 500, "nodes": ["n1"]}"#;
    let cases: Vec<(&str, String, &[&str], &str)> = vec![
        (
            "kind.json",
            fault(r#"{"id": "f2", "kind": "pauze", "at_ms": 1, "length_ms": 5, "nodes": ["n1"]}"#),
            &[],
            "fault f2: unknown fault kind \"pauze\"",
        ),
        (
            "target.json",
            fault(r#"{"id": "f4", "kind": "kill", "at_ms": 1, "length_ms": 5, "nodes": ["n3"]}"#),
            &["--nodes", "2"],
            "fault f4: names node n3, but the run has 2 node(s)",
        ),
        (
            "netns.json",
            fault(
                r#"{"id": "f5", "kind": "partition", "at_ms": 1, "length_ms": 5, "topology": "clients", "clients_cut_from": ["n1"]}"#,
            ),
            &["--runtime", "local"],
            "fault f5: partition needs --runtime netns",
        ),
        (
            "overlap.json",
            fault(&format!(
                r#"{pause}, {{"id": "f2", "kind": "kill", "at_ms": 1200, "length_ms": 100, "nodes": ["n1"]}}"#
            )),
            &[],
            "fault f2: starts at 1200 ms, before fault f1 ends (1500 ms)",
        ),
        (
            "version.json",
            r#"{"version": 9, "nodes": 1, "faults": []}"#.to_string(),
            &[],
            "version 9 is not one this lockpick reads",
        ),
        (
            "url.json",
            fault(pause),
            &["--url", "http://127.0.0.1:9"],
            "fault f1: pause needs nodes the harness started",
        ),
    ];
    for (name, text, flags, expect) in cases {
        let file = tmp.path().join(name);
        std::fs::write(&file, text).unwrap();
        let mut args = vec![
            "run",
            "--out",
            tmp.path().to_str().unwrap(),
            "--schedule",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(flags);
        let o = run_with_limit(&args, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        assert!(
            err.contains(&format!("{}: {expect}", file.display())),
            "{name}: wanted {expect:?} after the file name, got {err}"
        );
        assert!(!tmp.path().join("latest").exists(), "{name}: a run started");
    }
}
