//! Live verdicts: `--stop-on-violation` ends a run at its first proven safety violation, and
//! `lockpick check --follow` prints violations while another process still writes the history.

mod common;

use common::{run, BIN};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The latest client op's invoke time in a history, in ns.
fn last_client_invoke_ns(history: &str) -> u64 {
    history
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "invoke" && e["process"].is_u64())
        .filter_map(|e| e["time_ns"].as_u64())
        .max()
        .unwrap_or(0)
}

#[test]
fn stop_on_violation_ends_a_racy_run_soon_after_its_first_double_grant() {
    let tmp = tempfile::tempdir().unwrap();
    let began = Instant::now();
    // Racy grants under contention double-grant within the first few grants; 60 s is never
    // reached unless the run fails to stop.
    let r = run(
        tmp.path(),
        // Every fault this machine allows is asked for, and none is due before the stop.
        &[
            "--workload",
            "mutex",
            "--unsafe",
            "racy",
            "--seed",
            "7",
            "--ttl",
            "1s",
            "--hold",
            "50ms..600ms",
            "--duration",
            "60s",
            "--stop-on-violation",
        ],
        Duration::from_secs(90),
    );
    let took = began.elapsed();
    assert_eq!(r.code, 1, "expected invalid; {}", r.describe());
    let res = r.results();
    assert_eq!(res["valid"], false);
    assert_eq!(res["completeness"]["state"], "stopped", "{res}");
    let why = res["completeness"]["reason"].as_str().unwrap();
    assert!(why.contains("proven at"), "{why}");
    // The kind it stopped on is among the verdict's: the final check proves it again.
    let kind = why.split_whitespace().next().unwrap();
    // ... and recorded as data for the tools that pick it up (shrink).
    assert_eq!(res["completeness"]["stopped_on"], kind, "{res}");
    assert!(
        r.kinds("violations").iter().any(|k| k == kind),
        "{why}; {}",
        r.describe()
    );
    assert!(
        took < Duration::from_secs(30),
        "the run went on for {took:?}"
    );

    // The clients stopped soon after the first violation's ops: the live check runs every
    // 250 ms, and a check of a history this short takes milliseconds. Bounded loosely here
    // (the suite runs on two busy cores); BENCHMARKS.md measures it.
    let dir = r.run_dir();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let first_ns = res["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["window_ns"][1].as_u64())
        .min()
        .unwrap();
    let last_ns = last_client_invoke_ns(&history);
    assert!(
        last_ns < first_ns + 5_000_000_000,
        "clients went on {} ms past the first violation ({why})",
        (last_ns.saturating_sub(first_ns)) / 1_000_000
    );

    // Every artifact says it stopped, none calls it a harness error.
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let summary = read("summary.txt");
    assert!(
        summary.starts_with("run: STOPPED at the first proven violation: ")
            && summary.contains(why),
        "{summary}"
    );
    assert!(read("report.html").contains("Stopped at the first proven violation"));
    // What it asked for and never reached is no gap of the run: skipped in junit.xml, and the
    // note says why.
    assert!(
        summary.contains("not reached before the run stopped at its first proven violation: "),
        "{summary}"
    );
    assert!(!summary.contains("requested, not exercised"), "{summary}");
    let junit = read("junit.xml");
    assert!(
        junit.contains("errors=\"0\"") && !junit.contains("<error"),
        "{junit}"
    );
    assert!(
        junit.contains("name=\"run-completeness\"")
            && junit.contains("stopped at the first proven violation: ")
            && junit.contains("<skipped message=\"not reached before the run stopped")
            && !junit.contains("not-exercised"),
        "{junit}"
    );
    assert!(read("config.toml").contains("stop_on_violation = true"));
    // An offline check of the directory keeps how it ended.
    let o = Command::new(BIN)
        .args(["check", "--json", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let again: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(again["completeness"]["state"], "stopped");
    assert_eq!(again["valid"], false);
}

/// A child process killed when the test ends, whatever happens.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lockpick check --follow --idle IDLE PATH` with its stdout lines sent on a channel.
fn follow(path: &std::path::Path, idle: &str) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(["check", "--follow", "--idle", idle, path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (Child(child), rx)
}

/// Waits (at most `limit`) for a line containing `needle`; the lines read on the way.
fn wait_for_line(
    rx: &mpsc::Receiver<String>,
    needle: &str,
    limit: Duration,
) -> Result<String, Vec<String>> {
    let until = Instant::now() + limit;
    let mut seen = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(needle) => return Ok(l),
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    Err(seen)
}

/// Waits (at most `limit`) for the follow to end, panicking with `still` if it does not.
fn ended(child: &mut Child, limit: Duration, still: &str) -> std::process::ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < until, "{still}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const DOUBLE_GRANT: &str = concat!(
    r#"{"index":0,"time_ns":0,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":2000}}"#,
    "\n",
    r#"{"index":1,"time_ns":10000000,"process":1,"type":"ok","f":"acquire","lock":"L0","value":{"token":1,"ttl_ms":2000}}"#,
    "\n",
    r#"{"index":2,"time_ns":500000000,"process":2,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":2000}}"#,
    "\n",
    r#"{"index":3,"time_ns":510000000,"process":2,"type":"ok","f":"acquire","lock":"L0","value":{"token":2,"ttl_ms":2000}}"#,
    "\n",
    // A later instant: the one before it is then closed and judged.
    r#"{"index":4,"time_ns":600000000,"process":3,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":2000}}"#,
    "\n",
);

#[test]
fn check_follow_prints_a_violation_while_the_writer_still_writes_then_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    let mut writer = std::fs::File::create(&path).unwrap();
    // Idle for far longer than the test writes: only the writer's close can end it early.
    let (mut child, rx) = follow(&path, "2s");
    // Written a line at a time, as a run would.
    for line in DOUBLE_GRANT.lines() {
        writeln!(writer, "{line}").unwrap();
        writer.flush().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let line = wait_for_line(&rx, "double-grant on L0", Duration::from_secs(20))
        .unwrap_or_else(|seen| panic!("no violation printed while the file was open: {seen:?}"));
    assert!(line.contains("ops 1, 3"), "{line}");
    // Still following: the writer has the file open.
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "ended while the writer wrote"
    );
    drop(writer);
    let status = ended(
        &mut child,
        Duration::from_secs(20),
        "still following after the writer closed the file",
    );
    assert_eq!(status.code(), Some(1));
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter().any(|l| l == "verdict: INVALID"),
        "no verdict after the writer closed: {rest:?}"
    );
    // Printed once, not again at each check.
    assert!(!rest.iter().any(|l| l.starts_with("proven: ")), "{rest:?}");
}

/// Ctrl-C or SIGTERM (what `timeout` and supervisors send) while a process still writes the
/// history: the verdict of what was written, cut short, saying so, even in what looks like a
/// run directory (whose own reason, no results.json yet, is not why it was cut short).
#[test]
fn check_follow_stopped_by_a_signal_judges_what_was_written_as_cut_short() {
    use nix::sys::signal::Signal;
    for (signal, name) in [(Signal::SIGINT, "Ctrl-C"), (Signal::SIGTERM, "SIGTERM")] {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("history.jsonl");
        std::fs::write(tmp.path().join("lockpick.log"), "").unwrap();
        std::fs::write(tmp.path().join("config.toml"), "").unwrap();
        let mut writer = std::fs::File::create(&path).unwrap();
        // A correct start: one grant, nothing proven.
        for line in DOUBLE_GRANT.lines().take(2) {
            writeln!(writer, "{line}").unwrap();
        }
        writer.flush().unwrap();
        let (mut child, rx) = follow(&path, "10s");
        wait_for_line(&rx, "following", Duration::from_secs(20))
            .unwrap_or_else(|seen| panic!("never started following: {seen:?}"));
        std::thread::sleep(Duration::from_millis(700));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.0.id() as i32), signal).unwrap();
        let status = ended(
            &mut child,
            Duration::from_secs(20),
            &format!("{name} did not end the follow"),
        );
        // Unknown: the writer was still writing, what it had not written may hold a violation.
        assert_eq!(status.code(), Some(2), "{name}");
        let rest: Vec<String> = rx.try_iter().collect();
        let cut = format!("INCOMPLETE (interrupted): followed until {name}");
        assert!(rest.iter().any(|l| l.contains(&cut)), "{name}: {rest:?}");
        drop(writer);
    }
}

/// A writer nobody here sees holding the file (a network mount, a copy appended in chunks by
/// one short process after another): the follow waits out its pauses, prints the violation
/// of a later chunk, and ends once the file has stayed the same for --idle. It used to end
/// at once, `valid` on the first chunk, since no process had the file open.
#[test]
fn check_follow_waits_out_a_writer_it_cannot_see_until_the_file_is_idle() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    let lines: Vec<&str> = DOUBLE_GRANT.lines().collect();
    // The first grant only: correct so far.
    let append = |part: &[&str]| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        for l in part {
            writeln!(f, "{l}").unwrap();
        }
        // Closed here: between chunks no process has the file open.
    };
    append(&lines[..2]);
    let (mut child, rx) = follow(&path, "5s");
    wait_for_line(&rx, "following", Duration::from_secs(20))
        .unwrap_or_else(|seen| panic!("never started following: {seen:?}"));
    // Pauses well under --idle, with nothing holding the file.
    for part in [&lines[2..3], &lines[3..4], &lines[4..]] {
        std::thread::sleep(Duration::from_millis(600));
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "ended during a pause of the writer"
        );
        append(part);
    }
    let line = wait_for_line(&rx, "double-grant on L0", Duration::from_secs(20))
        .unwrap_or_else(|seen| panic!("the later chunk's violation was not printed: {seen:?}"));
    assert!(line.contains("ops 1, 3"), "{line}");
    let status = ended(
        &mut child,
        Duration::from_secs(30),
        "still following a file idle past --idle",
    );
    assert_eq!(status.code(), Some(1));
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("has not grown for") && l.contains("taken as finished")),
        "{rest:?}"
    );
    assert!(rest.iter().any(|l| l == "verdict: INVALID"), "{rest:?}");
}

/// `--idle` is a duration, and only with `--follow`; a negative value of check's flags is
/// refused by the flag's own check, naming it (clap used to read `-1s` as another flag).
#[test]
fn check_flags_refuse_bad_values_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    std::fs::write(&path, DOUBLE_GRANT).unwrap();
    let p = path.to_str().unwrap();
    for (args, says) in [
        (vec!["check", "--idle", "5s", p], "--follow"),
        (
            vec!["check", "--follow", "--idle", "5", p],
            "--idle \"5\": expected a duration",
        ),
        (
            vec!["check", "--follow", "--idle", "-1s", p],
            "never negative",
        ),
        (
            vec!["check", "--liveness-grace", "-1s", p],
            "--liveness-grace \"-1s\"",
        ),
        (
            vec!["check", "--drift", "-0.1", p],
            "--drift -0.1: expected a fraction",
        ),
    ] {
        let o = common::run_with_limit(&args, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A file in a folder that does not exist is a wrong path: refused at once. One in a folder
/// that exists is waited for, as long as --idle, and refused in one line if it never comes.
#[test]
fn check_follow_of_a_missing_file_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let never = tmp.path().join("never.jsonl");
    let cases: [(&[&str], &str); 2] = [
        (
            &["check", "--follow", "/nonexistent/history.jsonl"],
            "/nonexistent/history.jsonl: no such history file to follow (nor its folder /nonexistent)",
        ),
        (
            &["check", "--follow", never.to_str().unwrap(), "--idle", "300ms"],
            "never.jsonl: no such history file to follow (none was created within --idle 300ms)",
        ),
    ];
    for (args, says) in cases {
        let o = common::run_with_limit(args, Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(3), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A follow started before its writer creates the file waits for it and follows it: the
/// history written a moment later is judged as it would be had it been there first.
#[test]
fn check_follow_waits_for_a_file_created_after_it_started() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    let mut child = Command::new(BIN)
        .args(["check", "--follow", path.to_str().unwrap(), "--idle", "1s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let lines = [
        r#"{"index":0,"time_ns":1000000,"process":0,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#,
        r#"{"index":1,"time_ns":2000000,"process":0,"type":"ok","f":"acquire","lock":"L0","value":{"ttl_ms":1000,"token":1}}"#,
        r#"{"index":2,"time_ns":3000000,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#,
        r#"{"index":3,"time_ns":4000000,"process":1,"type":"ok","f":"acquire","lock":"L0","value":{"ttl_ms":1000,"token":2}}"#,
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // Bounded by the deadline.
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the follow did not end");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("to be created"), "{out}");
    assert!(out.contains("double-grant"), "{out}");
}

/// A history nobody writes any more that cannot be read: its error is said once, as `check`
/// says it, with no "so far" before it.
#[test]
fn check_follow_of_a_closed_unreadable_file_says_its_error_once() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"index\":0,\"time_ns\":1,\"process\":1,\"type\":\"invoke\",\"f\":\"acquire\",\"lock\":\"L\"}\n\
         {\"index\":1,\"time_ns\":2,\"process\":1,\"type\":\"bogus\",\"f\":\"acquire\",\"lock\":\"L\"}\n\
         {\"index\":2,\"time_ns\":3,\"process\":1,\"type\":\"ok\",\"f\":\"acquire\",\"lock\":\"L\"}\n",
    )
    .unwrap();
    let o = common::run_with_limit(
        &["check", "--follow", path.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    assert!(!out.contains("cannot be checked so far"), "{out}");
    assert_eq!(
        err.matches("bad.jsonl:2: unknown variant").count(),
        1,
        "{err}"
    );
}
