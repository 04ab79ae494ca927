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

/// The checker `name`'s entry in a results.json.
pub fn checker<'a>(results: &'a Value, name: &str) -> &'a Value {
    results["checkers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no checker {name} in {results}"))
}

/// Each of `names` judged the run (not `not judged`) and found it valid.
pub fn assert_judged_valid(results: &Value, names: &[&str], context: &str) {
    for name in names {
        let c = checker(results, name);
        assert_eq!(c["valid"], true, "{name}: {c}\n{context}");
        assert!(c.get("not_judged").is_none(), "{name}: {c}\n{context}");
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
        (2, Some(_)) => assert_eq!(r["valid"], serde_json::Value::Null, "{context}"),
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

/// Skips (with a visible message) when `program` is missing, except under
/// LOCKPICK_SYSTEM_TESTS=1, where a missing tool is a failure naming the Debian `package`.
pub fn require_program(program: &str, package: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
            panic!(
                "{program} is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install {package})"
            );
        }
        eprintln!("SKIPPED: {program} not found (apt-get install {package})");
    }
    ok
}

/// [`require_program`] for python3 (the stand-in services).
pub fn require_python() -> bool {
    require_program("python3", "python3")
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

/// FAST's lease, in ms: what aimed faults are sized from.
pub const FAST_TTL_MS: u64 = 1000;

/// The bank contended: two accounts and six clients, so opposite transfers each take one lock
/// and wait for the other's within the first transfers; long leases (20 s) so no lease lapse
/// breaks a cycle of waits, and waits that end only when a client gives up (--acquire-wait
/// plus --op-timeout), well past a deadlock's deadline (wait_ms plus a 500 ms grace).
pub const BANK_CONTENDED: &[&str] = &[
    "--workload",
    "bank",
    "--accounts",
    "2",
    "--clients",
    "6",
    "--nemesis",
    "none",
    "--ttl",
    "20s",
    "--hold",
    "20ms..60ms",
    "--acquire-wait",
    "100ms",
    "--op-timeout",
    "2s",
    "--liveness-grace",
    "500ms",
    "--duration",
    "3s",
];

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
    /// The mode's flags and the faults a drawn run asks for (`--seed`, `--nemesis`): what the
    /// `classic` campaign of benches/shapes.rs draws from.
    pub args: &'static [&'static str],
    /// The faults the test replays instead of the draw (`--schedule`), for a lease of the given
    /// ttl: aimed at the state the bug needs, so it is caught every time. `None`: the bug
    /// needs no fault.
    pub aim: Option<fn(u64) -> Aim>,
    pub expect_any: &'static [&'static str],
    /// Needs clock faults (either backend: the vDSO one, else libfaketime).
    pub needs_clock: bool,
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
        // A kill once the first grants are made: the restarted node hands out tokens from 1
        // again, and after its recovery wait it grants. Twice: a kill meets its state only if
        // the lease in force when it lands outlasts it, and the holder may release just then
        // (one CI run in many: the kill landed after the holder's release was sent).
        aim: Some(|ttl| Aim::new(ttl, 1).starting_at_ms(ttl).kill("n1").kill("n1")),
        expect_any: &["token-regressed", "token-reused"],
        needs_clock: false,
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
        // Holders stalled past their lease and the liveness grace, while the others ask.
        aim: Some(|ttl| {
            Aim::new(ttl, 1)
                .liveness_grace(200)
                .stall("long", Some("release"), None)
                .stall("long", Some("release"), None)
        }),
        expect_any: &["lock-stuck"],
        needs_clock: false,
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
        // A holder wakes into its renew (then one into its release) just after the next
        // holder's grant: its old token is older than a grant that returned.
        aim: Some(|ttl| {
            Aim::new(ttl, 1)
                .stall("next-grant", Some("renew"), Some(50))
                .stall("next-grant", Some("release"), Some(50))
        }),
        expect_any: &["stale-release-accepted", "stale-renew-accepted"],
        needs_clock: false,
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
        // No fault: waiters woken by one release all pass the free check.
        aim: None,
        expect_any: &["double-grant"],
        needs_clock: false,
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
        // A holder stalled between its read and its write wakes into the write after later
        // holders wrote (long), or just after the next holder read (next-grant).
        aim: Some(|ttl| {
            Aim::new(ttl, 1).stall("long", Some("write"), None).stall(
                "next-grant",
                Some("write"),
                Some(50),
            )
        }),
        expect_any: &["stale-write-accepted", "lost-update"],
        needs_clock: false,
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
        // Steps forward of three leases under a live lease: it expires at once.
        aim: Some(|ttl| {
            Aim::new(ttl, 1)
                .clock_step("n1", 3 * ttl as i64)
                .clock_step("n1", 3 * ttl as i64)
        }),
        expect_any: &["double-grant"],
        needs_clock: true,
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
            // A member grants alone only once its forward has failed (some 700 ms into the
            // pause, each at its own moment): holds of a lease or more overlap across the two
            // members, where short ones could end before the other member's first grant.
            "--hold",
            "1s..1500ms",
        ],
        // The primary paused for three leases: each member, cut off from it, grants alone.
        aim: Some(|ttl| Aim::new(ttl, 3).pause_for("n1", 3 * ttl)),
        // Either proves two authorities: holders at once, or each member's own count reusing
        // the tokens the primary had handed out (every member's first local grant is token 1).
        expect_any: &["double-grant", "token-reused"],
        needs_clock: false,
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
    if s.needs_clock && !require_clock_faults() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = adapter.to_vec();
    args.extend_from_slice(FAST);
    args.extend_from_slice(s.args);
    // Later flags win: the aimed schedule and its length replace the draw.
    let aim = s.aim.map(|a| a(FAST_TTL_MS));
    let schedule = aim.as_ref().map(|a| a.write(tmp.path()));
    let duration = aim.as_ref().map(|a| format!("{}ms", a.duration_ms()));
    if let (Some(p), Some(d)) = (&schedule, &duration) {
        args.extend_from_slice(&["--schedule", p.to_str().unwrap(), "--duration", d]);
    }
    let r = run(&tmp.path().join("runs"), &args, Duration::from_secs(90));
    assert_eq!(r.code, 1, "{name}: expected invalid; {}", r.describe());
    if let Some(a) = &aim {
        assert_aim_exercised(a, &r.results(), &format!("{name}: {}", r.describe()));
    }
    let kinds = r.kinds("violations");
    assert!(
        s.expect_any.iter().any(|k| kinds.iter().any(|f| f == k)),
        "{name}: expected one of {:?}, found {kinds:?}; {}",
        s.expect_any,
        r.describe()
    );
    also(&r);
}

/// [`require_program`] for etcd.
pub fn require_etcd() -> bool {
    require_program("etcd", "etcd-server")
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

/// An aimed fault plan, replayed with `--schedule`: the tests that assert a broken service is
/// caught must reach the state its bug needs every time, whatever the seed and the machine's
/// load, so they aim their faults instead of drawing them. Each fault is sized from the lease
/// as the suite's planner (src/suite/plan.rs) sizes its scenarios' faults: a stall that
/// outlives the lease (a long one also the liveness grace), a kill whose node is back while
/// the lease it granted is live and then has time to recover and grant, a pause longer than a
/// lease, a clock change lasting several leases. Faults follow each other with a gap in which
/// clients hold the lock again.
pub struct Aim {
    ttl_ms: u64,
    nodes: usize,
    grace_ms: u64,
    faults: Vec<Value>,
    /// When the next fault may start, in ms since the run's start.
    next_ms: u64,
    /// What the last fault needs after its end for its state to show (a kill's recovery).
    tail_ms: u64,
}

impl Aim {
    /// A plan for a run with leases of `ttl_ms` on `nodes` nodes.
    pub fn new(ttl_ms: u64, nodes: usize) -> Aim {
        Aim {
            ttl_ms,
            nodes,
            grace_ms: 0,
            faults: Vec::new(),
            next_ms: Self::gap(ttl_ms),
            tail_ms: 0,
        }
    }

    /// Between faults, time for the clients to hold the lock again (the planner's gap).
    fn gap(ttl_ms: u64) -> u64 {
        (ttl_ms / 2).max(300)
    }

    /// The run's `--liveness-grace`: a long stall outlasts it.
    pub fn liveness_grace(mut self, ms: u64) -> Aim {
        self.grace_ms = ms;
        self
    }

    /// The first fault starts no earlier than `ms` (e.g. once the first holds have begun).
    pub fn starting_at_ms(mut self, ms: u64) -> Aim {
        self.next_ms = self.next_ms.max(ms);
        self
    }

    fn push(mut self, mut fault: Value, tail_ms: u64) -> Aim {
        let length = fault["length_ms"].as_u64().expect("a length");
        fault["id"] = format!("f{}", self.faults.len() + 1).into();
        fault["at_ms"] = self.next_ms.into();
        self.next_ms += length + tail_ms + Self::gap(self.ttl_ms);
        self.tail_ms = tail_ms;
        self.faults.push(fault);
        self
    }

    /// A stall of the client holding the lock (any client's, for `waiter`), shaped `shape`,
    /// waking into `wake`, ending `after_ms` past its aim (boundary, next-grant). The request
    /// waits well past a lease for a holder, and the stall is bounded by two leases (a long
    /// one by two leases and the liveness grace), as the planner sizes them.
    pub fn stall(self, shape: &str, wake: Option<&str>, after_ms: Option<u64>) -> Aim {
        let ttl = self.ttl_ms;
        let length = if shape == "long" {
            ttl * 2 + self.grace_ms
        } else {
            ttl * 2
        };
        self.stall_for(shape, wake, after_ms, length)
    }

    /// [`Aim::stall`] bounded by `length_ms` instead.
    pub fn stall_for(
        self,
        shape: &str,
        wake: Option<&str>,
        after_ms: Option<u64>,
        length_ms: u64,
    ) -> Aim {
        let mut f = serde_json::json!({
            "kind": "client-pause", "length_ms": length_ms,
            "window_ms": self.ttl_ms.max(500), "shape": shape,
        });
        if let Some(w) = wake {
            f["wake"] = w.into();
        }
        if let Some(a) = after_ms {
            f["after_ms"] = a.into();
        }
        self.push(f, 0)
    }

    /// A kill of `node` (`n1`) with a short downtime, so it is back while the lease it granted
    /// is live; then the service's recovery wait (about two leases) and a grant.
    pub fn kill(self, node: &str) -> Aim {
        let ttl = self.ttl_ms;
        let f = serde_json::json!({
            "kind": "kill", "length_ms": (ttl / 4).max(100), "nodes": [node],
        });
        self.push(f, ttl * 2 + ttl / 2)
    }

    /// A kill of `node` down for `downtime_ms`, after which the run goes on `then_ms` before
    /// the next fault: a service that grants at once after a restart needs a lease, not the
    /// recovery wait of [`Aim::kill`].
    pub fn kill_for(self, node: &str, downtime_ms: u64, then_ms: u64) -> Aim {
        let f = serde_json::json!({"kind": "kill", "length_ms": downtime_ms, "nodes": [node]});
        self.push(f, then_ms)
    }

    /// A pause (SIGSTOP) of `node` for `length_ms`.
    pub fn pause_for(self, node: &str, length_ms: u64) -> Aim {
        let f = serde_json::json!({"kind": "pause", "length_ms": length_ms, "nodes": [node]});
        self.push(f, 0)
    }

    /// A clock step of `delta_ms` on `node` (`bump-forward` if positive, `bump-back` if
    /// negative), held for three leases: it lands under a live lease, and the leases granted
    /// while it lasts run on the stepped clock.
    pub fn clock_step(self, node: &str, delta_ms: i64) -> Aim {
        let mode = if delta_ms > 0 {
            "bump-forward"
        } else {
            "bump-back"
        };
        let f = serde_json::json!({
            "kind": "clock", "length_ms": self.ttl_ms * 3, "nodes": [node],
            "mode": mode, "delta_ms": delta_ms,
        });
        self.push(f, 0)
    }

    /// A clock of `node` running at `rate` (above 1: fast) for three leases, so grants are
    /// made and leases timed while it runs.
    pub fn clock_rate(self, node: &str, rate: f64) -> Aim {
        let mode = if rate > 1.0 { "fast" } else { "slow" };
        let f = serde_json::json!({
            "kind": "clock", "length_ms": self.ttl_ms * 3, "nodes": [node],
            "mode": mode, "rate": rate,
        });
        self.push(f, 0)
    }

    /// The run's `--duration`: past the last fault and what must follow it, a lease for its
    /// effects to show (the planner's length).
    pub fn duration_ms(&self) -> u64 {
        let end = self
            .faults
            .last()
            .map(|f| f["at_ms"].as_u64().unwrap() + f["length_ms"].as_u64().unwrap())
            .unwrap_or(0);
        end + self.tail_ms + self.ttl_ms
    }

    /// `--duration`'s value, in whole seconds rounded up (for helpers that take seconds).
    pub fn duration_s(&self) -> u64 {
        self.duration_ms().div_ceil(1000)
    }

    /// The schedule as the file format has it (nemesis/src/schedule/file.rs).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&serde_json::json!({
            "version": 1, "nodes": self.nodes, "primary": 0, "faults": self.faults,
        }))
        .unwrap()
    }

    /// Writes the schedule into `dir`; returns its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let p = dir.join("aimed-schedule.json");
        std::fs::write(&p, self.to_json()).unwrap();
        p
    }

    /// The fault kinds the plan holds, each once.
    pub fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self
            .faults
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_string())
            .collect();
        k.sort();
        k.dedup();
        k
    }
}

/// Faults of `kind` (and `variant`, when not empty) that met the state they aim at, from a
/// results.json's coverage cells (history/src/coverage.rs, checkers/src/exercised.rs).
pub fn exercised(results: &Value, kind: &str, variant: &str) -> u64 {
    results["coverage"]["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] == kind && (variant.is_empty() || c["variant"] == variant))
        .map(|c| c["exercised"].as_u64().unwrap_or(0))
        .sum()
}

/// Asserts every fault kind of `aim` met its state at least once in the run of `results`:
/// what the verdict of a test that asserts a bug is found rests on.
pub fn assert_aim_exercised(aim: &Aim, results: &Value, context: &str) {
    let kinds = aim.kinds();
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    assert_kinds_exercised(aim, &kinds, results, context);
}

/// [`assert_aim_exercised`] for the fault kinds of `aim` a test's claim rests on only: the
/// others are there to be removed (a shrink's noise), and one that lands between two holds
/// changes nothing the test asserts.
pub fn assert_kinds_exercised(aim: &Aim, kinds: &[&str], results: &Value, context: &str) {
    // A long stall is exercised when several grants followed it; on a service whose leases
    // never lapse nobody is granted meanwhile (that is its bug), and what the stall needs is
    // only to outlast the lease.
    let long = aim.faults.iter().any(|f| f["shape"] == "long");
    let past = results["coverage"]["holder"]["lease_bound"]["past"]
        .as_u64()
        .unwrap_or(0);
    for &kind in kinds {
        assert!(aim.kinds().iter().any(|k| k == kind), "{kind} is not aimed");
        let stall_outlasted = kind == "client-pause" && long && past >= 1;
        assert!(
            exercised(results, kind, "") >= 1 || stall_outlasted,
            "no {kind} fault met its state: {}\n{context}",
            results["coverage"]["cells"]
        );
    }
}

/// A finished `lockpick test`: its exit code, what it printed and its suite directory.
pub struct Suite {
    pub code: i32,
    pub stdout: String,
    pub dir: PathBuf,
}

impl Suite {
    /// Its suite.json.
    pub fn json(&self) -> Value {
        let p = self.dir.join("suite.json");
        let text = std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", p.display(), self.stdout));
        serde_json::from_str(&text).unwrap()
    }

    /// The violation kinds of the scenario that stopped the suite.
    pub fn found(&self) -> Vec<String> {
        let j = self.json();
        let last = j["scenarios"].as_array().unwrap().last().unwrap().clone();
        last["violations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    }

    /// The suite ended `invalid` (exit 1), its stopping scenario having found `kind`.
    pub fn assert_found(&self, kind: &str) {
        assert_eq!(self.code, 1, "expected invalid\n{}", self.stdout);
        let found = self.found();
        assert!(
            found.iter().any(|k| k == kind),
            "{found:?}\n{}",
            self.stdout
        );
    }

    /// The suite's cell `name`: (started, exercised).
    pub fn cell(&self, name: &str) -> (u64, u64) {
        let j = self.json();
        let c = j["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cell"] == name)
            .unwrap_or_else(|| panic!("no cell {name}: {}", j["cells"]))
            .clone();
        (
            c["started"].as_u64().unwrap(),
            c["exercised"].as_u64().unwrap(),
        )
    }
}

/// `lockpick test --out <out> ARGS`, bounded by `limit`; the suite directory it printed.
pub fn suite(out: &Path, args: &[&str], limit: Duration) -> Suite {
    let mut all = vec!["test", "--out", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = run_with_limit(&all, limit);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let dir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("suite directory: "))
        .map(|d| PathBuf::from(d.trim()))
        .unwrap_or_else(|| {
            panic!(
                "no suite directory printed\nstdout:\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    Suite {
        code: o.status.code().unwrap_or(-1),
        stdout,
        dir,
    }
}

/// Root and the tools for network namespaces, or a visible skip (a failure under
/// LOCKPICK_SYSTEM_TESTS=1).
pub fn require_netns() -> bool {
    let missing: Vec<String> = nemesis::netns::capabilities()
        .into_iter()
        .filter(|c| !c.ok && ["root", "ip", "netns", "iptables"].contains(&c.name))
        .map(|c| format!("{}: {}", c.name, c.why))
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
        panic!("namespace tests must run under LOCKPICK_SYSTEM_TESTS=1: {missing:?}");
    }
    eprintln!("SKIPPED: {}", missing.join("; "));
    false
}

/// [`require_program`] for redis-server.
pub fn require_redis() -> bool {
    require_program("redis-server", "redis-server")
}

/// Where Debian's zookeeper package puts the server.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// java and the server's jar, or a visible skip (a failure under LOCKPICK_SYSTEM_TESTS=1).
pub fn require_zookeeper() -> bool {
    if !Path::new(ZOOKEEPER_JAR).is_file() {
        if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
            panic!("{ZOOKEEPER_JAR} is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install zookeeper)");
        }
        eprintln!("SKIPPED: {ZOOKEEPER_JAR} not found (apt-get install zookeeper)");
        return false;
    }
    require_program("java", "zookeeper")
}

/// Whether PostgreSQL's programs are here, where lockpick's start command looks: on `PATH`
/// or under /usr/lib/postgresql.
pub fn require_postgres() -> bool {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("postgres").is_file()));
    let packaged = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(Result::ok)
                .any(|e| e.path().join("bin/postgres").is_file())
        })
        .unwrap_or(false);
    if on_path || packaged {
        return true;
    }
    if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
        panic!("postgres is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install postgresql)");
    }
    eprintln!("skipped: postgres not found (apt-get install postgresql)");
    false
}

/// `lockpick run --adapter ADAPTER ARGS` is refused before any traffic: exit 3, one line of
/// stderr starting `error: EXPECTED`, and nothing created under a fresh `--out`.
pub fn assert_refused_in_one_line(adapter: &str, args: &[&str], expected: &str) {
    let tmp = tempfile::tempdir().expect("a scratch directory");
    let mut all = vec![
        "run",
        "--adapter",
        adapter,
        "--out",
        tmp.path().to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = run_with_limit(&all, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line: {stderr}");
    assert!(
        lines[0].starts_with(&format!("error: {expected}")),
        "{args:?}: {stderr}"
    );
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "{args:?}: nothing created"
    );
}

/// A schedule (written into `dir`) of one holder stall at 0.5 s that outlasts a 500 ms lease
/// five times and wakes into the holder's writes: the bank tests' stale writer.
pub fn stall_into_write_schedule(dir: &Path) -> PathBuf {
    let schedule = dir.join("stall-into-write.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "nodes": 1, "primary": 0, "faults": [{"id": "f1",
            "kind": "client-pause", "at_ms": 500, "length_ms": 2500, "window_ms": 1000,
            "shape": "long", "wake": "write"}]}"#,
    )
    .unwrap();
    schedule
}

/// The bank where grants carry no token, against `adapter`: without faults, under contention
/// on three accounts (second locks waited for while the first lease runs), a careful client
/// keeps every section inside its leases and both data checks judge the run valid; a holder
/// stalled between its reads and its writes, past its leases, while the others transfer
/// between the same two accounts, wakes and writes over their balances, and the versions
/// alone prove it (`non-serializable`): nothing fences a tokenless write. `stall_harms` is
/// false for a setting that fences it after all (a counter token), which must stay valid.
pub fn assert_tokenless_bank(adapter: &[&str], stall_harms: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let label = adapter.join(" ");
    let mut calm: Vec<&str> = adapter.to_vec();
    calm.extend_from_slice(&[
        "--workload",
        "bank",
        "--accounts",
        "3",
        "--clients",
        "4",
        "--ttl",
        "600ms",
        "--hold",
        "200ms..200ms",
        "--duration",
        "5s",
        "--nemesis",
        "none",
    ]);
    let r = run(&tmp.path().join("calm"), &calm, Duration::from_secs(120));
    r.assert_clean();
    assert_judged_valid(
        &r.results(),
        &["serializability", "bank-total"],
        &format!("{label}: {}", r.describe()),
    );
    let schedule = stall_into_write_schedule(tmp.path());
    let mut stalled: Vec<&str> = adapter.to_vec();
    stalled.extend_from_slice(&[
        "--workload",
        "bank",
        "--accounts",
        "2",
        "--clients",
        "3",
        "--ttl",
        "500ms",
        "--duration",
        "5s",
        "--nemesis",
        "client-pause",
        "--schedule",
        schedule.to_str().unwrap(),
        "--seed",
        "1",
    ]);
    let r = run(
        &tmp.path().join("stalled"),
        &stalled,
        Duration::from_secs(120),
    );
    let results = r.results();
    let context = format!("{label}: {}", r.describe());
    let woke_into_write = results["coverage"]["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["kind"] == "client-pause" && c["variant"] == "long" && c["wake"] == "write")
        .map(|c| c["exercised"].clone());
    assert_eq!(woke_into_write, Some(Value::from(1)), "{context}");
    if stall_harms {
        assert_eq!(r.code, 1, "{context}");
        assert!(
            r.kinds("violations")
                .iter()
                .any(|k| k == "non-serializable"),
            "{context}"
        );
        assert_eq!(
            checker(&results, "serializability")["valid"],
            false,
            "{context}"
        );
    } else {
        r.assert_clean();
        assert_judged_valid(&results, &["serializability", "bank-total"], &context);
    }
}
