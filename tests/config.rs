//! `lockpick init` and `run --config`: the starter runs as is against the embedded default,
//! flags override the file, and a typo is refused with its key path and line.

mod common;

use common::run_with_limit;
use std::time::Duration;

#[test]
fn the_starter_config_runs_as_is_and_flags_override_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("lockpick.toml");
    let o = run_with_limit(&["init", cfg.to_str().unwrap()], Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(0));
    // A second init does not clobber the team's file.
    let o = run_with_limit(&["init", cfg.to_str().unwrap()], Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(3));

    // As is: the embedded lockd, 30 s, every fault of the starter.
    let out = tmp.path().join("runs");
    let o = run_with_limit(
        &[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let latest = out.join(std::fs::read_link(out.join("latest")).unwrap());
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(latest.join("results.json")).unwrap()).unwrap();
    common::assert_clean_results(
        o.status.code().unwrap_or(-1),
        &results,
        &format!("{stdout}\n{}", String::from_utf8_lossy(&o.stderr)),
    );
    assert!(
        stdout.contains("counter workload, 5 client(s), 1 lock(s), ttl 2000 ms, 30 s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("faults: pause,kill,client-pause"),
        "{stdout}"
    );

    // A flag after --config wins over the file.
    let o = run_with_limit(
        &[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--clients",
            "2",
            "--duration",
            "2s",
            "--nemesis",
            "none",
        ],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("2 client(s)") && stdout.contains("2 s, faults: none"),
        "{stdout}"
    );
}

#[test]
fn a_typo_in_a_key_is_refused_with_its_path_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("bad.toml");
    std::fs::write(&cfg, "[workload]\nclients = 3\nclinets = 5\n").unwrap();
    let o = run_with_limit(
        &["run", "--config", cfg.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.toml:3: unknown key `workload.clinets`"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
