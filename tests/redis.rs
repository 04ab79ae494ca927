//! `--adapter redis` against a real `redis-server` (Debian's redis-server package): the lock as
//! redis-py's `Lock` takes it, started, faulted and checked by lockpick with nothing but the
//! target given, and the known unsafe behaviours found where they are and not elsewhere:
//!
//! - without persistence, a restart forgets every lock: the suite's aimed kill (a lease live
//!   across the restart, then a grant) proves two holders;
//! - with `appendfsync always`, the same kills prove nothing: the lock and its expiry survive;
//! - the optional counter token lives on the same server: without persistence it restarts
//!   from zero after a kill, and the token order shows it;
//! - lock expiry is wall-clock time on the server: a clock stepped back and restored expires
//!   the leases granted meanwhile at once (through vclock: libfaketime hangs redis-server).
//!
//! Leases of 500 ms keep each scenario a few seconds long; every fault is aimed by the plan.

mod common;

use std::path::Path;
use std::time::Duration;

use common::require_redis;

/// Where a test's runs (and so each server's data dir) go: on tmpfs where there is one. An
/// append-only file synced on every write would otherwise fsync hundreds of times a second
/// onto the disk every other test shares; under SIGKILL, which is the fault here, the page
/// cache keeps what was written either way, so the server behaves the same.
fn scratch() -> tempfile::TempDir {
    match std::path::Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}

const FAST: &[&str] = &[
    "--adapter",
    "redis",
    "--ttl",
    "500ms",
    "--hold",
    "20ms..200ms",
    "--op-timeout",
    "500ms",
    "--seed",
    "1",
    "--no-shrink",
];

fn suite(out: &Path, args: &[&str]) -> common::Suite {
    let mut all = FAST.to_vec();
    all.extend_from_slice(args);
    common::suite(out, &all, Duration::from_secs(240))
}

#[test]
fn a_restart_without_persistence_forgets_the_lock_and_the_suite_proves_two_holders() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let s = suite(tmp.path(), &["--nemesis", "kill"]);
    s.assert_found("double-grant");
    let (_, exercised) = s.cell("kill on primary");
    assert!(exercised >= 1, "found by the kill it aimed\n{}", s.stdout);
}

#[test]
fn an_fsync_on_every_write_keeps_the_lock_across_kills() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let s = suite(
        tmp.path(),
        &[
            "--nemesis",
            "kill",
            "--adapter-opt",
            "persistence=aof-always",
        ],
    );
    let j = s.json();
    for sc in j["scenarios"].as_array().unwrap() {
        assert_eq!(
            sc["violations"].as_array().map(Vec::len),
            Some(0),
            "a violation on a lock that survives restarts: {sc}\n{}",
            s.stdout
        );
    }
    assert_eq!(
        s.code, 0,
        "every cell exercised, none violated\n{}",
        s.stdout
    );
    let (_, exercised) = s.cell("kill on primary");
    assert!(exercised >= 1, "{}", s.stdout);
}

#[test]
fn the_counter_token_starts_again_after_a_restart_without_persistence() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let s = suite(
        tmp.path(),
        &["--nemesis", "kill", "--adapter-opt", "fence=counter"],
    );
    assert_eq!(s.code, 1, "expected invalid\n{}", s.stdout);
    let found = s.found();
    assert!(
        found
            .iter()
            .any(|k| k == "token-reused" || k == "token-regressed"),
        "the token repeats after the restart: {found:?}\n{}",
        s.stdout
    );
}

#[test]
fn a_clock_stepped_back_and_restored_expires_leases_at_once() {
    if !require_redis() || !common::require_vdso_clock() {
        return;
    }
    let tmp = scratch();
    let s = suite(
        tmp.path(),
        &[
            "--nemesis",
            "clock",
            "--clock-faults",
            "bump-back",
            "--adapter-opt",
            "persistence=aof-always",
        ],
    );
    s.assert_found("double-grant");
}

/// The probe speaks Redis: readiness by PING, a grant named by its value, a second client
/// refused, renew and release by compare scripts.
#[test]
fn the_probe_passes_a_real_redis_and_names_the_grant() {
    if !require_redis() {
        return;
    }
    let o = common::run_with_limit(
        &["probe", "--adapter", "redis", "--ttl", "1s"],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for expected in [
        "PING on ",
        "SET lockpick:lock:lockpick-probe <value> NX PX <ttl> (probe-1)",
        "(probe-2, while probe-1 holds it) -> nil",
        "EVAL <compare-and-del> lockpick:lock:lockpick-probe (probe-1, grant ",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in\n{stdout}");
    }
    assert!(
        !stdout.contains("/v1/time"),
        "no HTTP asked of Redis\n{stdout}"
    );
}

/// Settings redis cannot honour are refused in one line naming the flag, before anything
/// starts.
#[test]
fn bad_redis_settings_are_refused_in_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--adapter-opt", "persistence=sometimes"],
            "--adapter-opt \"persistence=sometimes\": expected persistence=none|rdb|aof-everysec|aof-always",
        ),
        (
            &["--adapter-opt", "colour=red"],
            "--adapter-opt \"colour=red\": --adapter redis has no option \"colour\"; its options: persistence (none|rdb|aof-everysec|aof-always), fence (none|counter)",
        ),
        (
            &["--adapter-opt", "fence"],
            "--adapter-opt \"fence\": expected NAME=VALUE",
        ),
        (
            &["--adapter-opt", "fence=counter,fence=none"],
            "--adapter-opt \"fence=none\": fence is given twice",
        ),
        (
            &["--workload", "counter"],
            "--workload counter: the counter's register is fenced by the lock's tokens, and the grants of --adapter redis carry none as configured; use --workload mutex or bank, or --adapter-opt fence=counter",
        ),
        (
            &["--nodes", "3"],
            "--nodes 3: --adapter redis is one server",
        ),
        (&["--unsafe", "racy"], "--unsafe is a mode of the embedded lockd, not of redis"),
    ];
    for (args, expected) in cases {
        common::assert_refused_in_one_line("redis", args, expected);
    }
    // A service without options of its own says so.
    let o = common::run_with_limit(
        &["run", "--adapter-opt", "fence=counter", "--duration", "1s"],
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--adapter reference has no options of its own"),
        "{stderr}"
    );
}

/// Redlock over five masters as published, with two crashes one after the other, each
/// harmless alone: n4 and n5 restart (the holder keeps its majority n1-n3), then n3 restarts.
/// Without persistence n3 has forgotten the holder's key, so another client wins n3, n4, n5
/// inside the holder's validity: two holders. With an fsync on every write the same schedule
/// is valid. The kills are aimed by the schedule: the first grant comes within the first
/// 100 ms, holds last 5 s and leases 3 s, so a lease is live across both.
/// The bank on one Redis with its counter token: each transfer holds two accounts' locks at
/// once (two keys, two values, two counters). A restart without persistence forgets both in
/// the middle of a two-second hold, and the next transfer is granted them while the first
/// still holds them, with counters started again; with `appendfsync always` the same kill
/// proves nothing, and the balances are judged by the data checks.
#[test]
fn the_bank_on_redis_loses_its_locks_to_a_restart_without_persistence() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let schedule = tmp.path().join("restart.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": [
 {"id": "f1", "kind": "kill", "at_ms": 1500, "length_ms": 100, "nodes": ["n1"]}
]}"#,
    )
    .unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "fence=counter,persistence=none",
            &["double-grant", "token-reused", "token-regressed"],
        ),
        ("fence=counter,persistence=aof-always", &[]),
    ];
    for (i, &(opts, found)) in cases.iter().enumerate() {
        let out = tmp.path().join(format!("case-{i}"));
        let r = common::run(
            &out,
            &[
                "--adapter",
                "redis",
                "--adapter-opt",
                opts,
                "--workload",
                "bank",
                "--accounts",
                "2",
                "--clients",
                "3",
                "--ttl",
                "3s",
                "--hold",
                "2s..2s",
                "--acquire-wait",
                "500ms",
                "--duration",
                "6s",
                "--schedule",
                schedule.to_str().unwrap(),
            ],
            Duration::from_secs(120),
        );
        if !found.is_empty() {
            assert_eq!(r.code, 1, "{opts}: {}", r.describe());
            let kinds = r.kinds("violations");
            assert!(
                kinds.iter().any(|k| found.contains(&k.as_str())),
                "{opts}: {kinds:?}\n{}",
                r.describe()
            );
            continue;
        }
        r.assert_clean();
        common::assert_judged_valid(
            &r.results(),
            &["serializability", "bank-total"],
            &r.describe(),
        );
    }
}

#[test]
fn redlock_loses_its_majority_to_restarts_without_persistence() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let schedule = tmp.path().join("two-restarts.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "seed": 1, "nodes": 5, "primary": 0, "faults": [
 {"id": "f1", "kind": "kill", "at_ms": 1000, "length_ms": 100, "nodes": ["n4", "n5"]},
 {"id": "f2", "kind": "kill", "at_ms": 1500, "length_ms": 100, "nodes": ["n3"]}
]}"#,
    )
    .unwrap();
    for (persistence, invalid) in [("none", true), ("aof-always", false)] {
        let out = tmp.path().join(persistence);
        let opt = format!("persistence={persistence}");
        let r = common::run(
            &out,
            &[
                "--adapter",
                "redlock",
                "--nodes",
                "5",
                "--clients",
                "3",
                "--ttl",
                "3s",
                "--hold",
                "5s..5s",
                "--duration",
                "6s",
                "--adapter-opt",
                &opt,
                "--schedule",
                schedule.to_str().unwrap(),
            ],
            Duration::from_secs(120),
        );
        if invalid {
            assert_eq!(r.code, 1, "{persistence}: {}", r.describe());
            assert!(
                r.kinds("violations").iter().any(|k| k == "double-grant"),
                "{persistence}: {}",
                r.describe()
            );
        } else {
            r.assert_clean();
        }
        // Each grant names the masters that said yes and the validity it was held for.
        let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
        assert!(
            history.contains("\"redlock_nodes\":[") && history.contains("\"redlock_validity_ms\":"),
            "{persistence}"
        );
    }
}

/// Redlock over five masters under the suite's kills, nothing else given: the rolling kill (n4
/// and n5 restarted, then n3, under one live grant) leaves every majority's grant on at most
/// two masters that remember it, and another client wins n3, n4 and n5 while the first still
/// holds its validity. Found every time by construction (whatever majority the grant was
/// on), if a single kill of a bare majority's member did not find it first.
#[test]
fn the_suite_finds_redlock_losing_its_majority_to_a_rolling_restart() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let s = common::suite(tmp.path(), REDLOCK_KILLS, Duration::from_secs(300));
    s.assert_found("double-grant");
}

/// The same suite with an fsync on every write: each master remembers its keys across the
/// restart, the rolling kill included, and every kill cell is met without a violation.
#[test]
fn redlock_with_an_fsync_on_every_write_survives_the_rolling_restart() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let args = [REDLOCK_KILLS, &["--adapter-opt", "persistence=aof-always"]].concat();
    let s = common::suite(tmp.path(), &args, Duration::from_secs(300));
    assert_eq!(
        s.code, 0,
        "every cell exercised, none violated\n{}",
        s.stdout
    );
    let (started, exercised) = s.cell("kill rolling");
    assert!(started >= 1 && exercised >= 1, "{}", s.stdout);
}

/// `lockpick test` against Redlock over five masters, kills only, leases of a second.
const REDLOCK_KILLS: &[&str] = &[
    "--adapter",
    "redlock",
    "--nodes",
    "5",
    "--nemesis",
    "kill",
    "--ttl",
    "1s",
    "--seed",
    "1",
    "--no-shrink",
];

/// A Redis the team already runs, reached by `--url redis://HOST:PORT` (here one this test
/// starts and stops by pid): client stalls are the faults that reach it, and a correct single
/// server is clean under them. An HTTP URL is refused for it in one line.
#[test]
fn a_running_redis_is_reached_by_its_url() {
    if !require_redis() {
        return;
    }
    let tmp = scratch();
    let port = nemesis::free_port("127.0.0.1".parse().unwrap()).unwrap();
    let port_text = port.to_string();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let server = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port_text,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Ends the server this test started, by its pid, whatever the assertions do.
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _stop = Stop(server);
    // Up once it answers PING (a few tens of ms); bounded.
    let ready = (0..250).any(|_| {
        use std::io::{Read, Write};
        let answered = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut c| {
            c.set_read_timeout(Some(Duration::from_millis(200)))?;
            c.write_all(b"PING\r\n")?;
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf)?;
            Ok(&buf == b"+PONG")
        });
        let up = answered.unwrap_or(false);
        if !up {
            std::thread::sleep(Duration::from_millis(20));
        }
        up
    });
    assert!(ready, "redis-server on {port} never answered PING");
    let url = format!("redis://127.0.0.1:{port}");
    let r = common::run(
        &tmp.path().join("out"),
        &[
            "--adapter",
            "redis",
            "--url",
            &url,
            "--nemesis",
            "client-pause",
            "--ttl",
            "500ms",
            "--hold",
            "20ms..200ms",
            "--duration",
            "6s",
            "--nemesis-interval",
            "1s",
        ],
        Duration::from_secs(60),
    );
    r.assert_clean();
    let o = common::run_with_limit(
        &[
            "run",
            "--adapter",
            "redis",
            "--url",
            &format!("http://127.0.0.1:{port}"),
        ],
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: --url \"http://127.0.0.1:{port}\": expected a redis:// URL with a host"
        )),
        "{stderr}"
    );
}

/// The bank on one Redis without a token (redis-py's `Lock`, a random value per grant): the
/// data checks judge it, and a holder stall that wakes into its writes proves the harm no
/// token fenced; with the counter token the same stall is fenced and valid.
#[test]
fn the_bank_on_redis_without_a_token_is_judged_by_its_data() {
    if !require_redis() {
        return;
    }
    common::assert_tokenless_bank(&["--adapter", "redis"], true);
    common::assert_tokenless_bank(
        &["--adapter", "redis", "--adapter-opt", "fence=counter"],
        false,
    );
}

/// Redlock has no token either: its grants' validity bounds the careful client's sections,
/// and a stall past it writes over the next holders' balances.
#[test]
fn the_bank_on_redlock_is_judged_by_its_data() {
    if !require_redis() {
        return;
    }
    common::assert_tokenless_bank(&["--adapter", "redlock"], true);
}
