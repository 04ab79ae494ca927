//! A run cut short says so in every artifact: results.json's `completeness`, summary.txt's
//! first line, the top of report.html, runs/index.html and an `<error>` in junit.xml; its
//! verdict is at best `unknown`, and `check`/`report` of its directory keep that.

mod common;

use common::{run, run_with_limit, BIN};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Asserts that the run directory's artifacts all say the run is incomplete in `state`, with a
/// reason containing `reason`.
fn assert_incomplete(run_dir: &Path, state: &str, reason: &str) {
    let read = |f: &str| {
        std::fs::read_to_string(run_dir.join(f))
            .unwrap_or_else(|e| panic!("{}: {e}", run_dir.join(f).display()))
    };
    let res: Value = serde_json::from_str(&read("results.json")).unwrap();
    assert_eq!(res["completeness"]["state"], state, "{res}");
    let why = res["completeness"]["reason"].as_str().unwrap_or_default();
    assert!(why.contains(reason), "reason {why:?} lacks {reason:?}");
    assert_ne!(res["valid"], true, "an incomplete run passed: {res}");

    let summary = read("summary.txt");
    let first = summary.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("run: INCOMPLETE ({state})")) && first.contains(reason),
        "summary.txt does not open with the cut: {summary}"
    );
    let html = read("report.html");
    let at = html
        .find(&format!("Incomplete run ({state})"))
        .unwrap_or_else(|| panic!("report.html does not say the run is incomplete"));
    let checkers = html.find("id=\"checkers\"").expect("checkers table");
    assert!(
        at < checkers,
        "the completeness is not at the top of report.html"
    );
    let junit = read("junit.xml");
    assert!(
        junit.contains(&format!("<error type=\"{state}\"")) && junit.contains("errors=\"1\""),
        "{junit}"
    );
    let out = run_dir.parent().unwrap().parent().unwrap();
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        index.contains(&format!("incomplete run ({state}")),
        "index.html: {index}"
    );
}

/// `lockpick check` and `lockpick report` of the directory keep the completeness: it is read
/// from the run directory, not remembered by the process that ran it.
fn assert_check_and_report_keep_it(run_dir: &Path, state: &str) {
    let dir = run_dir.to_str().unwrap();
    // The directory and its history.jsonl are the same run, judged alike.
    let history = run_dir.join("history.jsonl");
    for path in [dir, history.to_str().unwrap()] {
        let o = run_with_limit(&["check", path], Duration::from_secs(30));
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(2), "check {path}: {stdout}");
        assert!(
            stdout.starts_with(&format!("run: INCOMPLETE ({state})")),
            "check {path}: {stdout}"
        );
    }
    std::fs::remove_file(run_dir.join("summary.txt")).unwrap();
    let o = run_with_limit(
        &["report", dir, "--fail-on", "safety"],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    assert!(summary.starts_with(&format!("run: INCOMPLETE ({state})")));
}

fn latest(out: &Path) -> Option<PathBuf> {
    std::fs::read_link(out.join("latest"))
        .ok()
        .map(|l| out.join(l))
}

/// `lockpick run` of `workload` without faults under `out`, leases of `ttl`, its output piped,
/// once its clients have 10 grants (at most 20 s).
fn run_with_grants(out: &Path, workload: &str, ttl: &str) -> std::process::Child {
    let child = Command::new(BIN)
        .args(["run", "--out", out.to_str().unwrap()])
        .args(["--workload", workload, "--nemesis", "none", "--seed", "3"])
        .args(["--ttl", ttl, "--hold", "20ms..100ms", "--duration", "60s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Our own child, by pid, if the wait below panics.
    let guard = scopeguard(nix::unistd::Pid::from_raw(child.id() as i32));
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no grant in 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
        let Some(dir) = latest(out) else { continue };
        let h = std::fs::read_to_string(dir.join("history.jsonl")).unwrap_or_default();
        if h.matches("\"type\":\"ok\"").count() >= 10 {
            break;
        }
    }
    drop(guard);
    child
}

#[test]
fn a_run_interrupted_by_sigint_is_incomplete_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let child = run_with_grants(&out, "mutex", "1s");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Our own child, by pid, whatever happens below.
    let guard = scopeguard(pid);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let o = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("lockpick did not stop within 30 s of SIGINT")
        .unwrap();
    drop(guard);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an interrupted run is unknown (2)\n{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("run: INCOMPLETE (interrupted)"), "{stdout}");
    let dir = latest(&out).unwrap();
    assert_incomplete(&dir, "interrupted", "SIGINT");
    assert_check_and_report_keep_it(&dir, "interrupted");
    // A run directory whose harness died before results.json (kill -9) never finished.
    std::fs::remove_file(dir.join("results.json")).unwrap();
    let o = run_with_limit(&["check", dir.to_str().unwrap()], Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.starts_with("run: INCOMPLETE (interrupted): the run never finished"),
        "{stdout}"
    );
    // `report` of such a directory judges its history and writes the verdict it never wrote,
    // and exits as `check` does: unknown.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let o = run_with_limit(&["report", dir.to_str().unwrap()], Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("never wrote its verdict"), "{stderr}");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["completeness"]["state"], "interrupted", "{results}");
    assert_eq!(results["valid"], serde_json::Value::Null, "{results}");
    assert!(dir.join("report.html").is_file());
}

/// A second Ctrl-C aborts the run at once (exit 3); what it prints names the run's own
/// directory in the commands that judge it and clean up after it, and the one that judges it
/// works as printed.
#[test]
fn a_second_sigint_aborts_naming_the_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    // The counter's quiet period after the clients stop (a lease, 2 s) leaves time for the
    // second Ctrl-C before the run would end by itself.
    let mut child = run_with_grants(&out, "counter", "2s");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let guard = scopeguard(pid);
    let dir = latest(&out).unwrap();
    // Stdout drained (a full pipe would stall the run), stderr read line by line.
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || std::io::copy(&mut { stdout }, &mut std::io::sink()));
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let mut said = Vec::new();
    while !said
        .iter()
        .any(|l: &String| l.contains("press Ctrl-C again"))
    {
        said.push(
            rx.recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("no offer to abort in 10 s: {said:?}")),
        );
    }
    // At once, as the offer is read: the listener that took the first keeps the second (one
    // made after the offer was printed could miss it).
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a second SIGINT did not abort in 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(guard);
    // What is left of stderr (bounded: a child that kept the pipe open does not hold us).
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(2)) {
        said.push(line);
    }
    let said = said.join("\n");
    assert_eq!(status.code(), Some(3), "{said}");
    let dir_text = dir.to_str().unwrap();
    for command in ["report", "cleanup"] {
        let line = format!("`lockpick {command} {dir_text}`");
        assert!(said.contains(&line), "{line} not in: {said}");
    }
    // The command as printed judges what the aborted run recorded.
    let o = run_with_limit(&["report", dir_text], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(dir.join("report.html").is_file());
}

/// Ctrl-C while the service is still starting: the run stops once it is up (nothing recorded),
/// and says it was interrupted, not that it failed.
#[test]
fn a_run_interrupted_while_the_service_starts_is_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let cmd =
        format!("sleep 2; exec {BIN} lockd --listen {{host}}:{{port}} --data-dir {{data_dir}}");
    let child = Command::new(BIN)
        .args(["run", "--out", out.to_str().unwrap(), "--node-cmd", &cmd])
        .args([
            "--workload",
            "mutex",
            "--nemesis",
            "none",
            "--duration",
            "30s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let guard = scopeguard(pid);
    let start = Instant::now();
    while latest(&out).is_none_or(|d| !d.join("lockpick.log").exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no run directory"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let o = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("lockpick did not stop within 30 s of SIGINT")
        .unwrap();
    drop(guard);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let dir = latest(&out).unwrap();
    assert_incomplete(&dir, "interrupted", "while the service was starting");
}

/// Kills the child (our own, by pid) if the test panics before it exits.
fn scopeguard(pid: nix::unistd::Pid) -> impl Drop {
    struct Kill(nix::unistd::Pid);
    impl Drop for Kill {
        fn drop(&mut self) {
            if std::thread::panicking() {
                let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
    Kill(pid)
}

#[test]
fn a_node_that_does_not_come_back_makes_the_run_an_error_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    // Starts once; every later start (the restarts after a kill) exits at once.
    let cmd = format!(
        "test -e {{data_dir}}/started && exit 1; touch {{data_dir}}/started; \
         exec {BIN} lockd --listen {{host}}:{{port}} --data-dir {{data_dir}}"
    );
    let r = run(
        &out,
        &[
            "--node-cmd",
            &cmd,
            "--workload",
            "mutex",
            "--nemesis",
            "kill",
            "--nemesis-interval",
            "500ms",
            // Far longer than the kill, its three failed restarts and the clients' way out
            // take even on two busy cores (about 4 s seen): the bound below tells a run the
            // failure ended from one that went its whole length.
            "--duration",
            "20s",
            "--ttl",
            "1s",
            "--startup-timeout",
            "1s",
            "--seed",
            "2",
        ],
        Duration::from_secs(90),
    );
    assert_eq!(r.code, 3, "{}", r.describe());
    assert!(
        r.stderr
            .contains("node n1 did not come back after 3 restarts"),
        "{}",
        r.describe()
    );
    let dir = r.run_dir();
    assert_incomplete(&dir, "error", "node n1 did not come back after 3 restarts");
    // The clients stop when the nemesis fails, not at the end of their 20 s.
    let took_ns = r.results()["stats"]["duration_ns"].as_u64().unwrap();
    assert!(took_ns < 12_000_000_000, "ran on for {took_ns} ns");
    let log = std::fs::read_to_string(dir.join("lockpick.log")).unwrap();
    assert!(log.contains("did not come back"), "{log}");
    assert_check_and_report_keep_it(&dir, "error");
}

/// A history whose last line was cut off mid-write (its writer killed) is a cut-short run
/// wherever it lies: alone, or in a run directory whose results.json says the run completed.
/// A valid history becomes unknown; nothing of it is lost.
#[test]
fn a_history_cut_off_mid_line_is_judged_as_a_cut_short_run() {
    let tmp = tempfile::tempdir().unwrap();
    let r = common::run(
        tmp.path(),
        &[
            "--seed",
            "1",
            "--duration",
            "3s",
            "--workload",
            "mutex",
            "--nemesis",
            "none",
        ],
        Duration::from_secs(60),
    );
    r.assert_clean();
    let run_dir = r.run_dir();
    let history = std::fs::read(run_dir.join("history.jsonl")).unwrap();
    // Half the file, ending inside an object: what a writer killed mid-line leaves.
    let mut cut = history.len() / 2;
    while history[cut - 1] == b'\n' || history[cut] == b'\n' {
        cut += 1;
    }
    let lone = tmp.path().join("lone.jsonl");
    std::fs::write(&lone, &history[..cut]).unwrap();
    std::fs::write(run_dir.join("history.jsonl"), &history[..cut]).unwrap();
    for path in [lone.clone(), run_dir.clone(), run_dir.join("history.jsonl")] {
        let o = run_with_limit(&["check", path.to_str().unwrap()], Duration::from_secs(30));
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(2),
            "check {}: {stdout}",
            path.display()
        );
        assert!(
            stdout.starts_with("run: INCOMPLETE (interrupted)")
                && stdout.contains("cut off mid-write"),
            "check {}: {stdout}",
            path.display()
        );
        assert!(stdout.contains("verdict: UNKNOWN"), "{stdout}");
    }
    // The uncut history is still valid: the cut, not the run, made it unknown.
    std::fs::write(&lone, &history).unwrap();
    let o = run_with_limit(&["check", lone.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}
