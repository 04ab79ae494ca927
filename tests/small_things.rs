//! The small things of issue 10, item 8, each pinned by a test that fails without its fix:
//! contradicting flags, suggestions for misspelt flags, `export --out -`, node logs without
//! colour codes, an absolute `{data_dir}`, `doctor`'s exit code, a live violation count that
//! keeps up with the history, and error chains that name each cause once.

mod common;

use common::{run_with_limit, BIN};
use std::process::{Command, Stdio};
use std::time::Duration;

fn stderr_of(args: &[&str]) -> (i32, String) {
    let o = run_with_limit(args, Duration::from_secs(20));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn none_with_other_faults_is_refused_as_contradictory() {
    for list in ["none,pause", "pause,none"] {
        let (code, err) = stderr_of(&["run", "--nemesis", list]);
        assert_eq!(code, 3, "{list}: {err}");
        assert!(
            err.contains("--nemesis") && err.contains("contradicts itself"),
            "{list}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// (arguments, the guess the one-line error must carry)
#[test]
fn misspelt_flags_and_subcommands_get_a_suggestion() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--client", "3"], "did you mean `--clients`?"),
        (
            &["check", "--driftt", "0.1", "x"],
            "did you mean `--drift`?",
        ),
        (
            &["report", "--fail-onn", "safety", "x"],
            "did you mean `--fail-on`?",
        ),
        (&["chek", "x"], "did you mean `check`?"),
        (
            &["export", "--format", "jepsn", "x"],
            "did you mean `jepsen`?",
        ),
    ];
    for (args, guess) in cases {
        let (code, err) = stderr_of(args);
        assert_eq!(code, 3, "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(guess), "{args:?}: {err}");
    }
}

/// A flag whose value was left out names itself, never the flag after it (values may start
/// with `-`, so the next flag would be taken for the value, or the word after it blamed); a
/// value starting with `-` is still a value.
#[test]
fn a_flag_whose_value_is_left_out_says_so() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "--name", "--no-probe", "--duration", "1s"],
            "--name: a value is required, and --no-probe is a flag",
        ),
        (
            &["run", "--clients", "--duration", "2s"],
            "--clients: a value is required, and --duration is a flag",
        ),
        (
            &["check", "--drift", "--json", "x"],
            "--drift: a value is required, and --json is a flag",
        ),
        (
            &["test", "--budget", "--seed", "3"],
            "--budget: a value is required, and --seed is a flag",
        ),
        (&["run", "--drift", "-1"], "--drift -1: expected a fraction"),
    ];
    for (args, said) in cases {
        let (code, err) = stderr_of(args);
        assert_eq!(code, 3, "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(said), "{args:?}: {err}");
    }
}

const HISTORY: &str = r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}
{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","lock":"L0","value":{"ttl_ms":1000,"token":1}}
"#;

#[test]
fn export_out_dash_writes_to_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("history.jsonl"), HISTORY).unwrap();
    let o = Command::new(BIN)
        .args(["export", tmp.path().to_str().unwrap(), "--out", "-"])
        .current_dir(tmp.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        out.starts_with("{:index 0, :time 10, :type :invoke"),
        "{out}"
    );
    assert!(!out.contains("wrote"), "{out}");
    assert!(!tmp.path().join("-").exists(), "a file named - was written");
}

/// One run covers three fixes: `{data_dir}` is absolute (the node command refuses a relative
/// one, with `--out` relative to the working directory), the embedded lockd's log in the node
/// folder has no colour codes, and the status line printed at 5 s counts the violations the
/// racy lockd made by then (it printed the count of the check before, 0, before the fix; the
/// live check now runs every second beside it).
#[test]
fn node_commands_logs_and_the_live_count() {
    let tmp = tempfile::tempdir().unwrap();
    let cmd = format!(
        "case {{data_dir}} in /*) exec {BIN} lockd --listen {{host}}:{{port}} \
         --data-dir {{data_dir}} --unsafe racy;; *) echo relative data dir >&2; exit 9;; esac"
    );
    let o = Command::new(BIN)
        .args(["run", "--out", "runs", "--node-cmd", &cmd])
        .args(["--workload", "mutex", "--nemesis", "none", "--seed", "7"])
        .args(["--ttl", "1s", "--hold", "50ms..600ms", "--duration", "6s"])
        .current_dir(tmp.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    let run_dir = tmp
        .path()
        .join("runs")
        .join(std::fs::read_link(tmp.path().join("runs/latest")).unwrap());
    let log = std::fs::read_to_string(run_dir.join("nodes/n1/stderr.log")).unwrap();
    assert!(!log.is_empty(), "lockd logged nothing");
    assert!(
        !log.contains('\x1b'),
        "colour codes in the node log: {log:?}"
    );
    let status = stdout
        .lines()
        .find(|l| l.contains("violations so far:"))
        .unwrap_or_else(|| panic!("no status line: {stdout}"));
    let n: i64 = status
        .rsplit("violations so far: ")
        .next()
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{status}: {e}"));
    assert!(n > 0, "the status line lags the history: {status}");
}

/// Required faults (pause, kill, client-pause) decide the exit code; a missing optional one
/// (clock, partition, netem) is a warning with exit 0.
#[test]
fn doctor_fails_only_for_a_missing_required_fault() {
    let o = run_with_limit(&["doctor"], Duration::from_secs(60));
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let missing: Vec<&str> = out
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("missing"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let required_missing = missing
        .iter()
        .any(|f| ["pause", "kill", "client-pause"].contains(f));
    let want = if required_missing { 3 } else { 0 };
    assert_eq!(o.status.code(), Some(want), "{out}\n{err}");
    for f in &missing {
        assert!(
            err.contains(f),
            "{f} missing but not named on stderr: {err}"
        );
    }
    // Which services lockpick can start here, each named with what it lacks.
    for service in [
        "reference",
        "etcd",
        "template",
        "standin",
        "redis",
        "redlock",
        "zookeeper",
        "postgres",
    ] {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("--adapter {service} ")))
            .unwrap_or_else(|| panic!("no row for {service}: {out}"));
        assert!(
            row.contains(" ok ") || row.contains("apt-get install"),
            "{row}"
        );
    }
    let help = run_with_limit(&["doctor", "--help"], Duration::from_secs(10));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("required") && help.contains("optional"),
        "{help}"
    );
    // The starter `lockpick init` writes names no hosts: doctor of it checks this machine
    // alone and exits as doctor does, instead of asking for the ssh runtime's [[nodes]].
    let tmp = tempfile::tempdir().unwrap();
    let starter = tmp.path().join("lockpick.toml");
    let o = run_with_limit(
        &["init", starter.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run_with_limit(
        &["doctor", "--config", starter.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(want),
        "{said}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(said.contains("no hosts ([[nodes]]"), "{said}");
    assert!(said.contains("every key known"), "{said}");
    // Its settings are read as a run reads them: a typo'd key or a bad value is named at its
    // line, in run's words, exit 3.
    let bad = tmp.path().join("bad.toml");
    for (text, said) in [
        (
            "[workload]\nclinets = 3\n",
            "bad.toml:2: unknown key `workload.clinets`",
        ),
        (
            "[workload]\nttl = \"soon\"\n",
            "bad.toml:2: `workload.ttl` \"soon\": expected a duration",
        ),
        (
            "[check]\nfail_on = [\"bogus\"]\n",
            "bad.toml:2: `check.fail_on`: invalid value 'bogus' for '--fail-on <LIST>'",
        ),
    ] {
        std::fs::write(&bad, text).unwrap();
        let o = run_with_limit(
            &["doctor", "--config", bad.to_str().unwrap()],
            Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(err.contains(said), "{err}");
    }
}

#[test]
fn an_error_chain_names_each_cause_once() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("gone").join("history.jsonl");
    let (code, err) = stderr_of(&["check", missing.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let (code, err) = stderr_of(&[
        "lockd",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        "/proc/lockpick-no-such-dir",
    ]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
}

/// `check` and `report` given a suite's directory or an output folder, where one of its runs
/// was meant, say what they were given and where the runs below it are.
#[test]
fn a_folder_of_runs_named_for_a_run_points_to_its_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    for run in ["a/20260101T000000.000Z", "b/20260102T000000.000Z"] {
        let dir = suite.join("scenarios").join(run);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("history.jsonl"), HISTORY).unwrap();
    }
    std::fs::write(suite.join("suite.json"), "{}").unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let newest = suite.join("scenarios/b/20260102T000000.000Z");
    let cases = [
        (
            vec!["check", suite.to_str().unwrap()],
            format!(
                "a suite directory (`lockpick test`), not a run directory; 2 runs below it, the newest {}",
                newest.display()
            ),
        ),
        (
            vec!["report", suite.to_str().unwrap()],
            "a suite directory".to_string(),
        ),
        (
            vec!["check", empty.to_str().unwrap()],
            "not a run directory (it holds no history.jsonl)".to_string(),
        ),
    ];
    for (args, said) in cases {
        let (code, err) = stderr_of(&args);
        assert_eq!(code, 3, "{args:?}: {err}");
        assert!(
            err.lines().next().unwrap_or_default().contains(&said),
            "{args:?}: {err}"
        );
    }
}
