//! The client-pause shapes and the unsafe modes each one exposes: one table for the
//! end-to-end test (tests/shapes.rs, a few seeds) and the campaign bench (benches/shapes.rs,
//! 10 seeds, time to first violation), so both run the same thing.

#![allow(dead_code)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A broken service (or store), the client-pause shape that exposes it, and the kinds that
/// catch it.
pub struct ShapeMode {
    /// The name in the table (the unsafe mode, or the service with its bug).
    pub name: &'static str,
    /// The shape, as `--client-faults` takes it.
    pub shape: &'static str,
    /// Flags besides the common ones: the broken mode, the workload, the lease and holds.
    pub args: &'static [&'static str],
    pub expect_any: &'static [&'static str],
    /// Needs Debian's etcd (`etcd` on the PATH).
    pub etcd: bool,
}

/// Frequent stalls, so a short run holds several of them.
pub const COMMON: &[&str] = &[
    "--op-timeout",
    "500ms",
    "--nemesis-interval",
    "1s",
    "--nemesis",
    "client-pause",
];

/// Short leases and holds, for lockd.
pub const SHORT: &[&str] = &["--ttl", "1s", "--hold", "50ms..600ms"];

pub const MODES: &[ShapeMode] = &[
    ShapeMode {
        // A holder wakes into its renew a few ms after its lease ended and the next waiter
        // was granted: inside the grace the broken lockd still says yes.
        name: "lockd --unsafe renew-grace",
        shape: "boundary,renew",
        args: &[
            "--ttl",
            "1s",
            "--hold",
            "50ms..600ms",
            "--workload",
            "mutex",
            "--unsafe",
            "renew-grace",
        ],
        expect_any: &["stale-renew-accepted", "double-grant"],
        etcd: false,
    },
    ShapeMode {
        // A holder wakes into its write right after the next holder's grant and first read:
        // the fence is then exactly one past the stale token.
        name: "store --store-fence off-by-one",
        shape: "next-grant,write",
        args: &[
            "--ttl",
            "1s",
            "--hold",
            "50ms..600ms",
            "--workload",
            "counter",
            "--store-fence",
            "off-by-one",
        ],
        expect_any: &["lost-update", "stale-write-accepted"],
        etcd: false,
    },
    ShapeMode {
        // A holder wakes into its release several grants later: the broken lockd frees
        // whoever holds the lock now.
        name: "lockd --unsafe unchecked-release",
        shape: "long,release",
        args: &[
            "--ttl",
            "1s",
            "--hold",
            "50ms..600ms",
            "--workload",
            "mutex",
            "--unsafe",
            "unchecked-release",
        ],
        expect_any: &["stale-release-accepted", "double-grant"],
        etcd: false,
    },
    ShapeMode {
        // A holder wakes into its read (then its write) right after the next holder's grant
        // and read: a store that does not fence reads lets the stale read-modify-write in
        // before the next holder's write.
        name: "store --store-fence write",
        shape: "next-grant,read",
        args: &[
            "--ttl",
            "1s",
            "--hold",
            "50ms..600ms",
            "--workload",
            "counter",
            "--store-fence",
            "write",
        ],
        expect_any: &["lost-update", "stale-write-accepted"],
        etcd: false,
    },
    ShapeMode {
        // A waiter stalls while the holder holds on: its session lease lapses while it waits,
        // and etcd 3.4's lock/lock still answers 200 once the holder releases (the lock key
        // is gone at the revision it answered at: etcd#11456). Leases of 2 s (etcd's
        // granularity is a second) and holds longer than the stall.
        name: "etcd 3.4 (Debian), lock/lock",
        shape: "waiter",
        args: &[
            "--adapter",
            "etcd",
            "--workload",
            "mutex",
            "--ttl",
            "2s",
            "--hold",
            "4s..6s",
        ],
        expect_any: &["grant-without-key", "grant-on-expired-lease"],
        etcd: true,
    },
];

/// Every shape, for the correct lockd.
pub const ALL_SHAPES: [&str; 4] = ["boundary", "next-grant", "long", "waiter"];

/// What one run found.
pub struct Outcome {
    /// `lockpick run`'s exit code.
    pub code: i32,
    /// Violation kinds, sorted, deduplicated.
    pub kinds: Vec<String>,
    /// When the first violation became visible (the end of its window), in s since the start.
    pub first_violation_s: Option<f64>,
    /// Stalls the run took, by shape (from the history's `start-client-pause` ops).
    pub stalls: usize,
    pub stderr: String,
    /// The run's results.json (`Null` when it wrote none).
    pub results: Value,
}

impl Outcome {
    pub fn caught(&self, mode: &ShapeMode) -> bool {
        self.code == 1
            && mode
                .expect_any
                .iter()
                .any(|k| self.kinds.iter().any(|f| f == k))
    }
}

/// Runs `lockpick run` with `args` (after COMMON) for `duration_s` into `out`; kills it past
/// `limit`.
pub fn run_shape(bin: &str, out: &Path, args: &[&str], duration_s: u64, seed: u64) -> Outcome {
    run_with(bin, out, COMMON, args, duration_s, seed)
}

/// Runs `lockpick run` with `common` then `args` for `duration_s` into `out`; kills it past
/// `limit`.
pub fn run_with(
    bin: &str,
    out: &Path,
    common: &[&str],
    args: &[&str],
    duration_s: u64,
    seed: u64,
) -> Outcome {
    let duration = format!("{duration_s}s");
    let seed = seed.to_string();
    let mut all: Vec<&str> = vec!["run", "--out", out.to_str().unwrap()];
    all.extend_from_slice(common);
    all.extend_from_slice(args);
    all.extend_from_slice(&["--duration", &duration, "--seed", &seed]);
    // Under CI, `--fail-on` gains `coverage`: the callers decide their policy themselves.
    let mut child = Command::new(bin)
        .args(&all)
        .env_remove("CI")
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lockpick");
    // Read while it runs: a child that writes more than a pipe holds would otherwise block.
    let mut pipe = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    });
    let limit = Duration::from_secs(duration_s * 3 + 60);
    let started = Instant::now();
    // Bounded by `limit`: then our own child is killed, by pid.
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for lockpick") {
            break s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lockpick {all:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = reader.join().unwrap_or_default();
    let dir = std::fs::read_link(out.join("latest"))
        .map(|l| out.join(l))
        .unwrap_or_else(|e| panic!("no run directory in {}: {e}\n{stderr}", out.display()));
    let results: Value = std::fs::read_to_string(dir.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let violations = results["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut kinds: Vec<String> = violations
        .iter()
        .filter_map(|v| v["kind"].as_str().map(str::to_string))
        .collect();
    kinds.sort();
    kinds.dedup();
    let first_violation_s = violations
        .iter()
        .filter_map(|v| v["window_ns"][1].as_u64())
        .min()
        .map(|ns| ns as f64 / 1e9);
    let stalls = std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"f\":\"start-client-pause\""))
        .count();
    Outcome {
        code: status.code().unwrap_or(-1),
        kinds,
        first_violation_s,
        stalls,
        stderr,
        results,
    }
}
