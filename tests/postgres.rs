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
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

/// Every run's settings but the lease, which [`run`] sets to 1 s.
const FAST: &[&str] = &[
    "--adapter",
    "postgres",
    "--hold",
    "20ms..200ms",
    "--op-timeout",
    "1s",
    "--seed",
    "3",
];

/// Where PostgreSQL keeps its dynamic shared memory: a file `PostgreSQL.<handle>` each, which
/// the server removes as it shuts down and nothing removes after a kill.
const SHM: &str = "/dev/shm";

/// The `PostgreSQL.*` segments in [`SHM`] now.
fn segments() -> BTreeSet<String> {
    let Ok(dir) = std::fs::read_dir(SHM) else {
        return BTreeSet::new();
    };
    (dir.flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("PostgreSQL."))
        .collect()
}

/// The segments mapped by processes working inside `dir` (a server's processes all work in its
/// data directory under the run's), gathered every 100 ms until `stop` is set: the segments of
/// this test's server, and no other test's or user's, whatever else runs on the machine.
fn watch_segments(dir: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<BTreeSet<String>> {
    // Past the run's own limit (120 s) the watch stops by itself.
    const POLLS_MAX: u32 = 1_500;
    let dir = dir.canonicalize().unwrap();
    std::thread::spawn(move || {
        let mut seen = BTreeSet::new();
        for _ in 0..POLLS_MAX {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let procs = std::fs::read_dir("/proc").into_iter().flatten().flatten();
            for p in procs.filter(|p| p.file_name().to_string_lossy().parse::<u32>().is_ok()) {
                if !std::fs::read_link(p.path().join("cwd")).is_ok_and(|c| c.starts_with(&dir)) {
                    continue;
                }
                let maps = std::fs::read_to_string(p.path().join("maps")).unwrap_or_default();
                seen.extend(
                    (maps.lines())
                        .filter_map(|l| l.split_once("/dev/shm/PostgreSQL.").map(|(_, h)| h))
                        .map(|h| format!("PostgreSQL.{}", h.trim())),
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        seen
    })
}

/// A run that completed (whatever its verdict), its history's lines. The server went with
/// the run, and left none of its shared memory segments behind.
fn run(out: &Path, args: &[&str]) -> (common::Run, Vec<Value>) {
    run_all(out, &[FAST, &["--ttl", "1s"], args].concat())
}

/// [`run`] with every argument given.
fn run_all(out: &Path, all: &[&str]) -> (common::Run, Vec<Value>) {
    let before = segments();
    let stop = Arc::new(AtomicBool::new(false));
    let watch = watch_segments(out, stop.clone());
    let r = common::run(out, all, Duration::from_secs(120));
    stop.store(true, Ordering::SeqCst);
    let ours = watch.join().unwrap();
    assert!(
        matches!(r.code, 0..=2),
        "the run did not complete\n{}",
        r.describe()
    );
    assert!(
        !ours.is_empty(),
        "no shared memory segment of the server was seen: the check below would check nothing"
    );
    let after = segments();
    let left: Vec<&String> = (after.difference(&before))
        .filter(|s| ours.contains(*s))
        .collect();
    assert!(
        left.is_empty(),
        "the server left {left:?} in {SHM}\n{}",
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

/// The server is stopped so that it removes its shared memory: at the end the workers'
/// sessions are still open, and stay so until their idle timeout (the 3 s lease) ends them.
/// PostgreSQL's smart shutdown (SIGTERM) waits for them, longer than it was given before the
/// kill, which then left its `/dev/shm` segments behind (the trial's run with the default
/// lease did). `run_all` checks that none of the server's segments is left.
#[test]
fn a_server_whose_sessions_outlive_the_run_leaves_no_shared_memory_behind() {
    if !common::require_postgres() {
        return;
    }
    let tmp = scratch();
    let args = ["--ttl", "3s", "--nemesis", "none", "--duration", "3s"];
    let (r, ops) = run_all(tmp.path(), &[FAST, &args].concat());
    assert!(oks(&ops, "acquire").count() >= 3, "{}", r.describe());
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
