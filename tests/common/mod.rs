//! Shared helpers for the end-to-end tests: run the real `lockpick` binary with a bound on its
//! duration, and read what it wrote.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_lockpick");

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub out_dir: PathBuf,
}

impl Run {
    /// The run directory `runs/latest` points at.
    pub fn run_dir(&self) -> PathBuf {
        let latest = self.out_dir.join("latest");
        let target = std::fs::read_link(&latest).unwrap_or_else(|e| {
            panic!(
                "no latest link in {}: {e}\n{}",
                self.out_dir.display(),
                self.stderr
            )
        });
        self.out_dir.join(target)
    }

    /// A correct service's run: no violation proven, a complete run, and a verdict that is
    /// `valid` or `unknown` only because a fault the run asked for met no state to exercise
    /// (a short run's draw: the verdict then says so, and `lockpick test` is what covers every
    /// cell). Returns the notes' "requested, not exercised" line, if any.
    pub fn assert_clean(&self) -> Option<String> {
        let r = self.results();
        assert_clean_results(self.code, &r, &self.describe())
    }

    pub fn results(&self) -> Value {
        let p = self.run_dir().join("results.json");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\nstdout:\n{}\nstderr:\n{}",
                p.display(),
                self.stdout,
                self.stderr
            )
        });
        serde_json::from_str(&text).unwrap()
    }

    /// Violation kinds found, sorted and deduplicated.
    pub fn kinds(&self, field: &str) -> Vec<String> {
        let r = self.results();
        let mut k: Vec<String> = r[field]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["kind"].as_str().unwrap().to_string())
            .collect();
        k.sort();
        k.dedup();
        k
    }

    pub fn describe(&self) -> String {
        format!(
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `lockpick ARGS` and kills it if it outlives `limit` (then panics). Output is drained
/// while it runs: a child writing more than a pipe holds must not block on us.
pub fn run_with_limit(args: &[&str], limit: Duration) -> Output {
    let mut argv = vec![BIN];
    argv.extend_from_slice(args);
    run_argv_with_limit(&argv, limit)
}

/// Runs `argv` (a program that execs lockpick, such as `ip netns exec NS lockpick ...`, or
/// lockpick itself) with the same bound and draining as [`run_with_limit`].
pub fn run_argv_with_limit(argv: &[&str], limit: Duration) -> Output {
    let args = &argv[1..];
    // Under CI, `--fail-on` gains `coverage`: the tests decide their policy themselves.
    let child = Command::new(argv[0])
        .args(args)
        .env_remove("CI")
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lockpick");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for lockpick"),
        Err(_) => {
            // Our own child, by pid: it is not reaped until wait_with_output returns.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let out = rx
                .recv()
                .expect("the waiting thread answers")
                .expect("wait");
            panic!(
                "lockpick {args:?} ran past {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// [`Run::assert_clean`] for an exit code and a results.json read elsewhere.
pub fn assert_clean_results(code: i32, r: &Value, context: &str) -> Option<String> {
    assert!(
        r["violations"].as_array().is_some_and(Vec::is_empty),
        "a violation on a correct service: {}\n{context}",
        r["violations"]
    );
    assert_eq!(r["completeness"]["state"], "complete", "{context}");
    let gap = r["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|n| n.starts_with("requested, not exercised: "))
        .map(str::to_string);
    match (code, &gap) {
        (0, None) => assert_eq!(r["valid"], true, "{context}"),
        (2, Some(_)) => assert_eq!(r["valid"], "unknown", "{context}"),
        _ => panic!("exit {code} with {gap:?}: expected 0 (valid) or 2 with what was not exercised\n{context}"),
    }
    gap
}

/// `lockpick run --out <tmp> ARGS`.
pub fn run(out: &Path, args: &[&str], limit: Duration) -> Run {
    let mut all = vec!["run", "--out", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = run_with_limit(&all, limit);
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        out_dir: out.to_path_buf(),
    }
}

/// Processes whose command line mentions `needle`, with their state letter from /proc.
pub fn processes_mentioning(needle: &str) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmd).contains(needle) {
            continue;
        }
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let after = s.rsplit_once(')')?.1.trim_start().chars().next()?;
                Some(after)
            })
            .unwrap_or('?');
        if state != 'Z' {
            out.push((pid, state));
        }
    }
    out
}

/// Writes a stand-in service (Python) into `dir` and returns its path.
pub fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// Skips (with a visible message) when python3 is missing, except under
/// LOCKPICK_SYSTEM_TESTS=1, where a missing tool is a failure.
pub fn require_python() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
            panic!("python3 is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install python3)");
        }
        eprintln!("SKIPPED: python3 not found (apt-get install python3)");
    }
    ok
}

/// Skips (with a visible message) when libfaketime is missing, except under
/// LOCKPICK_SYSTEM_TESTS=1, where a missing library is a failure.
pub fn require_libfaketime() -> bool {
    let ok = nemesis::clock::find_libfaketime().is_some();
    if !ok {
        if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
            panic!("libfaketime is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install libfaketime)");
        }
        eprintln!("SKIPPED: libfaketime not found (apt-get install libfaketime)");
    }
    ok
}

/// Skips (with a visible message) when no clock backend runs here (neither the vDSO patch nor
/// libfaketime), except under LOCKPICK_SYSTEM_TESTS=1, where that is a failure.
pub fn require_clock_faults() -> bool {
    match nemesis::clock::Backend::detect() {
        Ok(_) => true,
        Err(why) => {
            if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
                panic!("clock faults are required under LOCKPICK_SYSTEM_TESTS=1: {why}");
            }
            eprintln!("SKIPPED: no clock backend: {why}");
            false
        }
    }
}

/// Skips (with a visible message) where the vDSO clock backend cannot run (not x86_64, no
/// ptrace permission), except under LOCKPICK_SYSTEM_TESTS=1, where that is a failure.
pub fn require_vdso_clock() -> bool {
    match nemesis::clock::vdso_unavailable() {
        None => true,
        Some(why) => {
            if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
                panic!("the vDSO clock backend is required under LOCKPICK_SYSTEM_TESTS=1: {why}");
            }
            eprintln!("SKIPPED: vDSO clock backend unavailable: {why}");
            false
        }
    }
}

/// Short leases and frequent faults so a 10 s run holds several of each.
pub const FAST: &[&str] = &[
    "--ttl",
    "1s",
    "--hold",
    "50ms..600ms",
    "--duration",
    "10s",
    "--op-timeout",
    "500ms",
    "--nemesis-interval",
    "1s",
];

/// An unsafe mode (or store mode), the faults that provoke it, and the kinds that catch it: one
/// table, run once per adapter (native in tests/runs.rs, template in tests/template.rs).
pub struct Scenario {
    pub name: &'static str,
    pub args: &'static [&'static str],
    pub expect_any: &'static [&'static str],
    pub needs_libfaketime: bool,
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "reuse-tokens",
        args: &[
            "--seed",
            "4",
            "--unsafe",
            "reuse-tokens",
            "--nemesis",
            "kill",
        ],
        expect_any: &["token-regressed", "token-reused"],
        needs_libfaketime: false,
    },
    Scenario {
        // A stalled holder's lease never lapses: the lock stays held past ttl + grace.
        // `lock-stuck` is judged on `held` answers: a waiter that outwaits the stall (the
        // default wait is 5 x ttl, the stall 1.5-2.5 x ttl) is granted when the holder wakes
        // and releases, so here waits are shorter than the stall.
        name: "no-ttl",
        args: &[
            "--seed",
            "5",
            "--unsafe",
            "no-ttl",
            "--nemesis",
            "client-pause",
            "--liveness-grace",
            "200ms",
            "--acquire-wait",
            "500ms",
        ],
        expect_any: &["lock-stuck"],
        needs_libfaketime: false,
    },
    Scenario {
        name: "skip-token-check",
        args: &[
            "--seed",
            "6",
            "--unsafe",
            "skip-token-check",
            "--nemesis",
            "client-pause",
        ],
        expect_any: &["stale-release-accepted", "stale-renew-accepted"],
        needs_libfaketime: false,
    },
    Scenario {
        name: "racy",
        args: &[
            "--seed",
            "7",
            "--unsafe",
            "racy",
            "--nemesis",
            "none",
            "--workload",
            "mutex",
        ],
        expect_any: &["double-grant"],
        needs_libfaketime: false,
    },
    Scenario {
        name: "store-none",
        args: &[
            "--seed",
            "8",
            "--store-fence",
            "none",
            "--nemesis",
            "client-pause",
        ],
        expect_any: &["stale-write-accepted", "lost-update"],
        needs_libfaketime: false,
    },
    Scenario {
        // Forward bumps expire a wall-clock lease early.
        name: "wall-clock",
        args: &[
            "--seed",
            "1",
            "--workload",
            "mutex",
            "--unsafe",
            "wall-clock",
            "--nemesis",
            "clock",
            "--clock-faults",
            "bump-forward",
        ],
        expect_any: &["double-grant"],
        needs_libfaketime: true,
    },
    Scenario {
        // A paused primary is, to its members, a partitioned one.
        name: "split-brain",
        args: &[
            "--seed",
            "1",
            "--nodes",
            "3",
            "--unsafe",
            "split-brain",
            "--workload",
            "mutex",
            "--nemesis",
            "pause",
            "--nemesis-targets",
            "primary",
            "--op-timeout",
            "1s",
            // A member forwards an acquire to the primary for as long as it may wait: with
            // the default wait (5 x ttl) it outwaits the pause instead of granting on its own.
            "--acquire-wait",
            "200ms",
        ],
        expect_any: &["double-grant"],
        needs_libfaketime: false,
    },
];

/// Runs a scenario with `adapter` flags in front and asserts it is caught with a matching kind,
/// then runs `also` on the run while its folder still exists. Skips (visibly) for a missing
/// system package.
pub fn assert_caught(adapter: &[&str], name: &str, also: impl FnOnce(&Run)) {
    let s = SCENARIOS
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"));
    if s.needs_libfaketime && !require_libfaketime() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = adapter.to_vec();
    args.extend_from_slice(FAST);
    args.extend_from_slice(s.args);
    let r = run(tmp.path(), &args, Duration::from_secs(90));
    assert_eq!(r.code, 1, "{name}: expected invalid; {}", r.describe());
    let kinds = r.kinds("violations");
    assert!(
        s.expect_any.iter().any(|k| kinds.iter().any(|f| f == k)),
        "{name}: expected one of {:?}, found {kinds:?}; {}",
        s.expect_any,
        r.describe()
    );
    also(&r);
}

/// Skips (with a visible message) when etcd is missing, except under LOCKPICK_SYSTEM_TESTS=1,
/// where a missing etcd is a failure.
pub fn require_etcd() -> bool {
    let ok = Command::new("etcd")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
            panic!("etcd is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install etcd-server)");
        }
        eprintln!("SKIPPED: etcd not found (apt-get install etcd-server)");
    }
    ok
}

/// The nemesis ops of a run's history, in order.
pub fn nemesis_ops(run_dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|op| op["process"] == "nemesis")
        .collect()
}
