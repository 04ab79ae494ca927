//! The network-namespace runtime end to end, as root: three lockd members each in their own
//! namespace, partitions cut with iptables inside those namespaces, and the cleanup contract.

mod common;

use common::{run, run_with_limit, BIN};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(150);

fn our_namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// The run's namespace prefix, from its log.
fn prefix_of(run_dir: &Path) -> String {
    let log = std::fs::read_to_string(run_dir.join("lockpick.log")).unwrap();
    let at = log
        .find("prefix=")
        .expect("the log names the namespace prefix")
        + "prefix=".len();
    log[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_matches('"')
        .to_string()
}

fn three_in_namespaces<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "--nodes",
        "3",
        "--runtime",
        "netns",
        "--ttl",
        "1s",
        "--hold",
        "50ms..600ms",
        "--duration",
        "12s",
        "--op-timeout",
        "1s",
        "--nemesis-interval",
        "1s",
    ];
    a.extend_from_slice(extra);
    a
}

fn correct_cluster_is_valid_under_partitions(seed: &str) {
    if !common::require_netns() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = run(
        tmp.path(),
        &three_in_namespaces(&[
            "--seed",
            seed,
            "--nemesis",
            "partition,pause,kill,clock",
            "--clock-scope",
            "wall",
        ]),
        LIMIT,
    );
    // No violation; valid, or unknown naming what a 12 s draw left unexercised.
    r.assert_clean();
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(history.contains("\"start-partition\""), "no partition ran");
    assert!(history.contains("\"stop-partition\""));
    // Nothing of the run remains: namespaces (and with them links and rules) and state file.
    let prefix = prefix_of(&r.run_dir());
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
    assert!(!r.run_dir().join("state.json").exists());
}

#[test]
fn correct_cluster_in_namespaces_is_valid_seed_1() {
    correct_cluster_is_valid_under_partitions("1");
}

#[test]
fn correct_cluster_in_namespaces_is_valid_seed_2() {
    correct_cluster_is_valid_under_partitions("2");
}

#[test]
fn correct_cluster_in_namespaces_is_valid_seed_3() {
    correct_cluster_is_valid_under_partitions("3");
}

#[test]
fn split_brain_under_partitions_gives_double_grants() {
    if !common::require_netns() {
        return;
    }
    // Aimed, not drawn: the primary is cut from both other members for 4 leases while every
    // member has clients asking, so each side grants from its own table. (A drawn schedule
    // once met no contended grant across the cut under the suite's load.)
    let tmp = tempfile::tempdir().unwrap();
    let schedule = tmp.path().join("isolate-primary.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "seed": 1, "nodes": 3, "primary": 0, "faults": [
            {"id": "f1", "kind": "partition", "at_ms": 1000, "length_ms": 4000,
             "topology": "isolate", "cut": [["n1", "n2"], ["n1", "n3"]], "clients_cut_from": []}]}"#,
    )
    .unwrap();
    let out = tmp.path().join("runs");
    let r = run(
        &out,
        &three_in_namespaces(&[
            "--seed",
            "1",
            "--unsafe",
            "split-brain",
            "--workload",
            "mutex",
            "--schedule",
            schedule.to_str().unwrap(),
            "--duration",
            "7s",
            // A member cut from its primary grants alone once its forward has failed: a short
            // wait makes that happen within the cut, and holds of a lease or more overlap
            // across the members that grant alone.
            "--acquire-wait",
            "200ms",
            "--hold",
            "1s..1500ms",
        ]),
        LIMIT,
    );
    assert_eq!(r.code, 1, "{}", r.describe());
    // Either proves more than one authority: holders at once, or a member's own count reusing
    // the tokens the primary had handed out (each member's first grant alone is token 1).
    let kinds = r.kinds("violations");
    assert!(
        kinds
            .iter()
            .any(|k| k == "double-grant" || k == "token-reused"),
        "{kinds:?}\n{}",
        r.describe()
    );
    // What it rests on: the cut met live leases.
    let cells = r.results()["coverage"]["cells"].clone();
    assert!(
        cells
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "partition" && c["exercised"] == 1),
        "{cells}"
    );
}

#[test]
fn a_sigkilled_run_is_undone_by_lockpick_cleanup() {
    if !common::require_netns() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let args: Vec<&str> = three_in_namespaces(&["--seed", "5", "--nemesis", "partition"])
        .into_iter()
        .map(|a| if a == "12s" { "60s" } else { a })
        .collect();
    let mut child = Harness::start("run", &out, &args);
    // Wait until the namespaces are up and traffic flows.
    let run_dir = started_run(&out, &[]);
    let prefix = prefix_of(&run_dir);
    assert!(
        !our_namespaces(&prefix).is_empty(),
        "no namespaces while running"
    );
    child.sigkill(); // no teardown ran
    assert!(
        run_dir.join("state.json").exists(),
        "a killed run must leave its state file"
    );
    assert_cleanup_undoes(&out, &prefix);
    // The history of the killed run is still readable.
    let o = run_with_limit(
        &["check", run_dir.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!((0..=2).contains(&o.status.code().unwrap()));
}

/// Without root a run asking for partitions is refused before any traffic, naming what is
/// missing, and `lockpick doctor` says the same.
#[test]
fn without_root_partitions_are_refused_up_front() {
    use std::os::unix::process::CommandExt;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: this test drops from root to nobody, so it needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let nobody = 65534;
    let o = Command::new(BIN)
        .args([
            "run",
            "--out",
            out.to_str().unwrap(),
            "--nemesis",
            "partition",
            "--nodes",
            "3",
        ])
        .uid(nobody)
        .gid(nobody)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("root"), "{err}");
    assert!(
        std::fs::read_dir(&out).unwrap().next().is_none(),
        "a refused run wrote files"
    );
    let o = Command::new(BIN)
        .arg("doctor")
        .uid(nobody)
        .gid(nobody)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    let line = table.lines().find(|l| l.starts_with("partition")).unwrap();
    assert!(line.contains("missing") && line.contains("root"), "{table}");
}

/// The run `latest` leads to under `out`, through each folder of `via` and its own `latest`
/// (a suite's `scenarios`), once the namespaces are up and its clients have recorded ops.
/// Panics after 60 s.
fn started_run(out: &Path, via: &[&str]) -> std::path::PathBuf {
    let follow = || -> Option<std::path::PathBuf> {
        let mut dir = out.join(std::fs::read_link(out.join("latest")).ok()?);
        for sub in via {
            let below = dir.join(sub);
            dir = below.join(std::fs::read_link(below.join("latest")).ok()?);
        }
        Some(dir)
    };
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(100));
        let Some(dir) = follow() else { continue };
        if std::fs::metadata(dir.join("history.jsonl")).is_ok_and(|m| m.len() > 0) {
            return dir;
        }
    }
}

/// A suite's scenario runs lie five folders below its output folder
/// (`runs/NAME/TIME/scenarios/ID/TIME`): `lockpick cleanup` of the output folder finds the
/// state file of the one a SIGKILL left, and removes its namespaces.
#[test]
fn a_sigkilled_suite_is_undone_by_lockpick_cleanup_of_its_output_folder() {
    if !common::require_netns() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let mut suite = Harness::start(
        "test",
        &out,
        &[
            "--no-shrink",
            "--budget",
            "3m",
            "--nemesis",
            "partition",
            "--seed",
            "5",
            "--nodes",
            "3",
            "--runtime",
            "netns",
            "--ttl",
            "1s",
        ],
    );
    let run_dir = started_run(&out, &["scenarios"]);
    let prefix = prefix_of(&run_dir);
    assert!(
        !our_namespaces(&prefix).is_empty(),
        "no namespaces while running"
    );
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("state.json")).unwrap())
            .unwrap();
    let run_pid = state["pid"].as_i64().unwrap();
    suite.sigkill(); // neither the suite nor its scenario's run tears down
                     // The scenario's run dies with the suite (PDEATHSIG); cleanup refuses while it lives.
    let start = Instant::now();
    while Path::new(&format!("/proc/{run_pid}")).exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the scenario's run outlived its suite"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(state_files(&out), vec![run_dir.join("state.json")]);
    assert_cleanup_undoes(&out, &prefix);
}

/// `lockpick cleanup OUT` succeeds, and leaves no namespace of `prefix` and no state file.
fn assert_cleanup_undoes(out: &Path, prefix: &str) {
    let o = run_with_limit(&["cleanup", out.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("removed"), "{said}");
    assert_eq!(our_namespaces(prefix), Vec::<String>::new());
    assert_eq!(state_files(out), Vec::<std::path::PathBuf>::new());
}

/// A `lockpick` command of the test's, silent, writing under `out`: killed if the test ends
/// first, and then every state file it left is cleaned up by name (which needs no search), so
/// a failing test leaves no namespace either.
struct Harness {
    child: std::process::Child,
    out: std::path::PathBuf,
}

impl Harness {
    fn start(command: &str, out: &Path, args: &[&str]) -> Harness {
        let child = Command::new(BIN)
            .args([command, "--out", out.to_str().unwrap()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Harness {
            child,
            out: out.to_path_buf(),
        }
    }

    fn sigkill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for state in state_files(&self.out) {
            let _ = run_with_limit(
                &["cleanup", state.to_str().unwrap()],
                Duration::from_secs(30),
            );
        }
    }
}

/// The state files below `dir`, to 8 folders down, links not followed.
fn state_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() && depth < 8 => dirs.push((e.path(), depth + 1)),
                Ok(t) if t.is_file() && e.file_name() == "state.json" => found.push(e.path()),
                _ => {}
            }
        }
    }
    found
}
