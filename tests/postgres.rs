//! `--adapter postgres` against a real PostgreSQL server (Debian's `postgresql` package, whose
//! programs live off `PATH` under /usr/lib/postgresql/<version>/bin), started, driven and
//! faulted by lockpick with nothing but the target given:
//!
//! - the session form: grants named `<backend pid>.<n>` with `hold: session`, released ok;
//! - the transaction form with the counter: every ok write commits (`committed: true`), no
//!   release follows a committed write, and the closing read counts the ok writes;
//! - a kill: the server restarts (crash recovery) and grants again.
//!
//! These tests read the history, not the verdicts: the checkers do not yet know what a
//! session or a transaction grant promises. Without the programs they skip visibly, except
//! under LOCKPICK_SYSTEM_TESTS=1, where that is a failure.

mod common;

use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Where the server's data goes: tmpfs where there is one (crash recovery fsyncs the whole data
/// directory, which on a shared disk costs seconds; the process kills here behave the same on
/// either). Its mode is 0700, as a run directory under a home directory may be: the server,
/// which runs as user `postgres`, must still reach its data.
fn scratch() -> tempfile::TempDir {
    match Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}

const FAST: &[&str] = &[
    "--adapter",
    "postgres",
    "--ttl",
    "1s",
    "--hold",
    "20ms..200ms",
    "--op-timeout",
    "1s",
    "--seed",
    "3",
];

/// A run that completed (whatever its verdict), its history's lines.
fn run(out: &Path, args: &[&str]) -> (common::Run, Vec<Value>) {
    let mut all = FAST.to_vec();
    all.extend_from_slice(args);
    let r = common::run(out, &all, Duration::from_secs(120));
    assert!(
        matches!(r.code, 0..=2),
        "the run did not complete\n{}",
        r.describe()
    );
    let text = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    let ops = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The server went with the run: no postmaster of this test's data is left.
    let left = common::processes_mentioning(out.to_str().unwrap());
    assert!(left.is_empty(), "left running: {left:?}");
    (r, ops)
}

fn oks<'a>(ops: &'a [Value], f: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    ops.iter()
        .filter(move |o| o["type"] == "ok" && o["f"] == f && o["process"].is_u64())
}

#[test]
fn the_session_form_grants_and_releases_without_faults() {
    if !common::require_postgres() {
        return;
    }
    let tmp = scratch();
    let (r, ops) = run(tmp.path(), &["--nemesis", "none", "--duration", "3s"]);
    let acquires: Vec<&Value> = oks(&ops, "acquire").collect();
    assert!(acquires.len() >= 3, "{}", r.describe());
    for a in &acquires {
        let v = &a["value"];
        assert_eq!(v["hold"], "session", "{a}");
        let pid = v["pg_backend_pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("{a}"));
        let grant = v["grant"].as_str().unwrap_or_else(|| panic!("{a}"));
        assert!(grant.starts_with(&format!("{pid}.")), "{a}");
        assert!(v.get("token").is_none(), "no token: {a}");
    }
    assert!(oks(&ops, "release").count() >= 3, "{}", r.describe());
    // The mutex workload: no register.
    assert_eq!(oks(&ops, "write").count(), 0);
}

#[test]
fn the_transaction_form_commits_each_write_and_sends_no_release_after_it() {
    if !common::require_postgres() {
        return;
    }
    let tmp = scratch();
    let (r, ops) = run(
        tmp.path(),
        &[
            "--adapter-opt",
            "form=xact",
            "--nemesis",
            "none",
            "--duration",
            "3s",
        ],
    );
    let writes: Vec<&Value> = oks(&ops, "write").collect();
    assert!(writes.len() >= 3, "{}", r.describe());
    for w in &writes {
        assert_eq!(w["value"]["committed"], true, "{w}");
    }
    for a in oks(&ops, "acquire") {
        assert_eq!(a["value"]["hold"], "transaction", "{a}");
    }
    // After its committed write a process's next op is a new acquire, never a release.
    for w in &writes {
        let p = &w["process"];
        let at = w["index"].as_u64().unwrap();
        let next = ops.iter().find(|o| {
            o["process"] == *p && o["type"] == "invoke" && o["index"].as_u64() > Some(at)
        });
        if let Some(n) = next {
            assert_ne!(n["f"], "release", "a release after {w}: {n}");
        }
    }
    let last = ops
        .iter()
        .rfind(|o| o["type"] == "ok" && o["f"] == "read" && o["value"]["final"] == true)
        .unwrap_or_else(|| panic!("no closing read\n{}", r.describe()));
    assert_eq!(
        last["value"]["value"].as_u64(),
        Some(writes.len() as u64),
        "the closing read counts the committed writes: {last}"
    );
}

#[test]
fn a_killed_server_restarts_and_grants_again() {
    if !common::require_postgres() {
        return;
    }
    let tmp = scratch();
    let (r, ops) = run(
        tmp.path(),
        &[
            "--nemesis",
            "kill",
            "--nemesis-interval",
            "2s",
            "--duration",
            "7s",
        ],
    );
    let restart = ops
        .iter()
        .find(|o| o["process"] == "nemesis" && o["f"] == "restart")
        .unwrap_or_else(|| panic!("no restart\n{}", r.describe()));
    let restarted_at = restart["index"].as_u64().unwrap();
    assert!(
        oks(&ops, "acquire").any(|a| a["index"].as_u64() > Some(restarted_at)),
        "granted after the restart\n{}",
        r.describe()
    );
    // The node was started again after the kill, from the same data directory.
    let stderr = std::fs::read_to_string(r.run_dir().join("nodes/n1/stderr.log")).unwrap();
    assert!(
        stderr.matches("--- lockpick: start #").count() >= 2,
        "{stderr}"
    );
}

/// What postgres cannot honour is refused in one line naming the flag, before anything starts.
#[test]
fn bad_postgres_settings_are_refused_in_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--nodes", "2"],
            "--nodes 2: --adapter postgres is one server",
        ),
        (
            &["--unsafe", "racy"],
            "--unsafe is a mode of the embedded lockd, not of postgres",
        ),
        (
            &["--workload", "counter"],
            "--workload counter: the counter's register is fenced by the lock's tokens, and the grants of --adapter postgres carry none as configured; use --workload mutex or bank, or --adapter-opt form=xact",
        ),
        (
            &["--adapter-opt", "form=advisory"],
            "--adapter-opt \"form=advisory\": expected form=session|xact",
        ),
    ];
    for (args, expected) in cases {
        common::assert_refused_in_one_line("postgres", args, expected);
    }
}

/// A paused server answers nothing, on new sessions or open ones: every backend leads a
/// session of its own, out of the postmaster's process group, and the pause reaches them too.
/// No client op completes ok inside a pause, away from its edges: the nemesis records the
/// pause's start before it signals the server's processes and its end after it resumed them,
/// and an answer already on its way is recorded when the client's task runs, so on a loaded
/// machine either edge can be late by more than a few ms (a CI run had an answer 50 ms in).
/// The interior is what a paused server must keep quiet.
#[test]
fn a_paused_server_answers_nothing_on_its_open_sessions() {
    if !common::require_postgres() {
        return;
    }
    let tmp = scratch();
    let (r, ops) = run(
        tmp.path(),
        &[
            "--nemesis",
            "pause",
            "--nemesis-interval",
            "2s",
            "--duration",
            "6s",
        ],
    );
    let at = |o: &Value| o["time_ns"].as_u64().unwrap();
    let mut windows = Vec::new();
    let mut start = None;
    for o in ops.iter().filter(|o| o["process"] == "nemesis") {
        match o["f"].as_str() {
            Some("start-pause") => start = Some(at(o)),
            Some("stop-pause") => windows.extend(start.take().map(|s| (s, at(o)))),
            _ => {}
        }
    }
    const EDGE_NS: u64 = 250_000_000;
    let interiors: Vec<(u64, u64)> = windows
        .iter()
        .filter(|&&(s, e)| e > s + 2 * EDGE_NS)
        .map(|&(s, e)| (s + EDGE_NS, e - EDGE_NS))
        .collect();
    assert!(
        !interiors.is_empty(),
        "no pause longer than its edges: {windows:?}\n{}",
        r.describe()
    );
    for o in ops
        .iter()
        .filter(|o| o["type"] == "ok" && o["process"].is_u64())
    {
        let t = at(o);
        assert!(
            !interiors.iter().any(|&(s, e)| s < t && t < e),
            "answered while paused: {o} (pauses {windows:?})"
        );
    }
}

/// A session-scoped advisory lock guarding lockpick's store beside it (as a team's lock
/// connection guards what its pool writes): the bank is judged by its data, and a holder
/// stalled past its session's idle timeout (the lease) writes after its session ended and
/// another took the locks.
#[test]
fn the_bank_on_session_locks_is_judged_by_its_data() {
    if !common::require_postgres() {
        return;
    }
    common::assert_tokenless_bank(&["--adapter", "postgres"], true);
}
