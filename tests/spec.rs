//! One test specification: a run's config.toml is the `--config` file's schema, so feeding it
//! back reruns the run with the same settings; `check RUN_DIR` judges with the run's own
//! settings; a bad value in a config file is named at its file and line.

mod common;

use common::{run, run_with_limit};
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Not a field of config.toml differs between a run and its rerun: the file holds no run id,
/// time or folder of its own (those are the run directory's name), so the two are compared
/// whole, byte for byte.
#[test]
fn a_rerun_from_config_toml_writes_the_same_config_toml() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let first = run(
        &out,
        &[
            "--workload",
            "mutex",
            "--nemesis",
            "client-pause",
            "--duration",
            "2s",
            "--ttl",
            "700ms",
            "--renew-ttl",
            "500ms",
            "--hold",
            "10ms..200ms",
            "--seed",
            "41",
            "--drift",
            "0.02",
            "--liveness-grace",
            "1500ms",
            "--clients",
            "3",
            "--fail-on",
            "safety",
            "--name",
            "spec",
        ],
        LIMIT,
    );
    // A 2 s run may draw no stall: its verdict is then unknown, which is not what this tests.
    first.assert_clean();
    let dir = first.run_dir();
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    let copy = tmp.path().join("config.toml");
    std::fs::write(&copy, &config).unwrap();
    let again = run(&out, &["--config", copy.to_str().unwrap()], LIMIT);
    again.assert_clean();
    let dir2 = again.run_dir();
    assert_ne!(dir, dir2, "the rerun has a run directory of its own");
    let config2 = std::fs::read_to_string(dir2.join("config.toml")).unwrap();
    assert_eq!(config2, config, "a rerun's config.toml differs");
    // The settings given are there, in the schema's words.
    for line in [
        "ttl = \"700ms\"",
        "renew_ttl = \"500ms\"",
        "drift = 0.02",
        "liveness_grace = \"1500ms\"",
        "fail_on = [\"safety\"]",
        "seed = 41",
    ] {
        assert!(config.contains(line), "{line} missing: {config}");
    }
}

/// A history in which client 2 is answered `held` for 3.5 s after client 1's 1 s lease, with
/// nobody releasing: `lock-stuck` under the default 2 s liveness grace, nothing under 5 s.
fn stuck_history(dir: &Path) {
    let ms = 1_000_000u64;
    let mut lines = vec![
        r#"{"index":0,"time_ns":0,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#.to_string(),
        format!(r#"{{"index":1,"time_ns":{},"process":1,"type":"ok","f":"acquire","lock":"L0","value":{{"ttl_ms":1000,"token":1}}}}"#, 5 * ms),
    ];
    let mut t = 100 * ms;
    // Bounded: 18 attempts, one every 250 ms.
    while t < 4_500 * ms {
        let i = lines.len();
        lines.push(format!(r#"{{"index":{i},"time_ns":{t},"process":2,"type":"invoke","f":"acquire","lock":"L0","value":{{"ttl_ms":1000}}}}"#));
        lines.push(format!(
            r#"{{"index":{},"time_ns":{},"process":2,"type":"fail","f":"acquire","lock":"L0","value":{{"ttl_ms":1000,"error":"held"}}}}"#,
            i + 1,
            t + 2 * ms
        ));
        t += 250 * ms;
    }
    std::fs::write(dir.join("history.jsonl"), lines.join("\n") + "\n").unwrap();
}

fn check(args: &[&str]) -> (i32, String) {
    let o = run_with_limit(args, Duration::from_secs(30));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// A run made with a non-default --liveness-grace and --drift: `check RUN_DIR` judges it with
/// them, as the run did, where the defaults would flip the verdict; a flag still overrides.
#[test]
fn check_uses_the_runs_own_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let r = run(
        &out,
        &[
            "--workload",
            "mutex",
            "--nemesis",
            "none",
            "--duration",
            "1s",
            "--liveness-grace",
            "5s",
            "--drift",
            "0.05",
            "--seed",
            "3",
        ],
        LIMIT,
    );
    r.assert_clean();
    let dir = r.run_dir();
    // The run's recorded history, replaced by one whose verdict the grace decides.
    stuck_history(&dir);
    let d = dir.to_str().unwrap();
    let (code, own) = check(&["check", d]);
    assert_eq!(code, 0, "judged with the run's 5 s grace: {own}");
    assert!(own.starts_with("verdict: VALID"), "{own}");
    let (code, default) = check(&["check", d, "--liveness-grace", "2s", "--drift", "0"]);
    assert_eq!(code, 1, "the defaults find lock-stuck: {default}");
    assert!(default.contains("lock-stuck"), "{default}");
    // A lone history file beside the run's config.toml is the same run.
    let (code, _) = check(&["check", dir.join("history.jsonl").to_str().unwrap()]);
    assert_eq!(code, 0);
}

#[test]
fn a_bad_value_in_a_config_file_names_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("lockpick.toml");
    std::fs::write(
        &cfg,
        "[workload]\nclients = 3\nttl = \"soon\"\n\n[nemesis]\nnemesis = \"none\"\n",
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let o = run_with_limit(&["run", "--config", c], Duration::from_secs(20));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("error: {c}:3: `workload.ttl` \"soon\"")),
        "{err}"
    );
    // Overridden on the command line, the flag is what is named.
    let o = run_with_limit(
        &["run", "--config", c, "--ttl", "later"],
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: --ttl \"later\""), "{err}");
}
