//! Patching real processes: a Python program, a Rust program (`vclock read`) and a static Go
//! program read their clocks; the tests set offsets and rates through the page and check what
//! the programs print, then unpatch and check the programs run on with true clocks, never
//! left stopped or traced. Also: targets that exit mid-attach, and a tracer killed mid-attach.
//!
//! Each target is a child of the test (ptrace on one's own children needs no capability
//! beyond Yama's default). Python and Go are skipped with a message when missing, except under
//! LOCKPICK_SYSTEM_TESTS=1.

#![cfg(target_arch = "x86_64")]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;
use vclock::page::{now_ns, CLOCK_MONOTONIC, CLOCK_REALTIME};
use vclock::process::{state, tracer};
use vclock::{patch, unpatch, ClockScope, ControlPage, Patched};

const VCLOCK: &str = env!("CARGO_BIN_EXE_vclock");
const S: i64 = 1_000_000_000;
/// How long a target may take to answer one line.
const ANSWER_LIMIT: Duration = Duration::from_secs(5);

fn system_tests() -> bool {
    std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1")
}

fn have(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A running clock reader; killed and reaped when dropped.
struct Target {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Target {
    fn spawn(mut command: Command) -> Target {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn target");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut t = Target {
            child,
            stdin,
            lines,
        };
        t.read(); // up and reading its clocks
        t
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn ask(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").expect("target's stdin");
        self.lines
            .recv_timeout(ANSWER_LIMIT)
            .unwrap_or_else(|e| panic!("target {} did not answer {line:?}: {e}", self.pid()))
    }

    /// (wall ns, monotonic ns) as the target sees them.
    fn read(&mut self) -> (i64, i64) {
        let answer = self.ask("");
        let mut it = answer.split_whitespace().map(|w| w.parse::<i64>().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    }

    fn assert_free(&self) {
        let pid = self.pid();
        assert_eq!(tracer(pid), Some(0), "process {pid} is still traced");
        assert!(
            !matches!(state(pid), Some('T' | 't')),
            "process {pid} left stopped"
        );
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python_target() -> Option<Command> {
    if !have("python3", "--version") {
        assert!(
            !system_tests(),
            "python3 is required under LOCKPICK_SYSTEM_TESTS=1"
        );
        eprintln!("SKIP: python3 not installed");
        return None;
    }
    let mut c = Command::new("python3");
    c.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/targets/clock_target.py"
    ));
    Some(c)
}

fn rust_target() -> Command {
    let mut c = Command::new(VCLOCK);
    c.arg("read");
    c
}

/// Builds the Go reader statically (CGO_ENABLED=0) into `dir`.
fn go_target(dir: &Path) -> Option<Command> {
    if !have("go", "version") {
        assert!(
            !system_tests(),
            "go is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install golang-go)"
        );
        eprintln!("SKIP: go not installed (apt-get install golang-go)");
        return None;
    }
    let bin = dir.join("clock_target_go");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/targets/clock_target.go"
        ))
        .env("CGO_ENABLED", "0")
        .env("GO111MODULE", "off")
        .env("GOCACHE", dir.join("gocache"))
        .env("HOME", dir)
        .status()
        .expect("run go build");
    assert!(built.success(), "go build failed");
    Some(Command::new(bin))
}

fn near(got: i64, want: i64, slack_ns: i64, what: &str) {
    assert!(
        (got - want).abs() < slack_ns,
        "{what}: got {got}, want {want} (off by {} ms)",
        (got - want) / 1_000_000
    );
}

/// The whole life of one target: patch, +10 s on the wall clock only, +10 s on all clocks,
/// a rate of 4x, back to true, unpatch.
fn exercise(name: &str, command: Command, dir: &Path) {
    let mut t = Target::spawn(command);
    let page = ControlPage::create(&dir.join(format!("{name}.page"))).unwrap();
    let Patched::Now(p) = patch(t.pid(), &page).unwrap() else {
        panic!("{name}: a fresh process reported as already patched")
    };
    t.assert_free();
    assert!(matches!(patch(t.pid(), &page).unwrap(), Patched::Already));
    t.assert_free();
    // Patched, true page: true clocks.
    let (wall, mono0) = t.read();
    near(
        wall,
        now_ns(CLOCK_REALTIME),
        100_000_000,
        &format!("{name} true wall"),
    );

    // A +10 s bump of the wall clocks: seen on the next read; monotonic untouched.
    page.change(ClockScope::Wall, |off, _| (off + 10 * S, 1.0));
    let (wall, mono1) = t.read();
    near(
        wall,
        now_ns(CLOCK_REALTIME) + 10 * S,
        100_000_000,
        &format!("{name} wall +10 s"),
    );
    assert!(mono1 - mono0 < S, "{name}: monotonic moved with scope wall");
    assert!(
        page.applied_ns(CLOCK_REALTIME) > 9 * S,
        "{name}: the page saw no read"
    );

    // Scope all: the monotonic clock jumps 10 s too.
    page.change(ClockScope::All, |off, _| (off + 10 * S, 1.0));
    let (wall, mono2) = t.read();
    near(
        wall,
        now_ns(CLOCK_REALTIME) + 20 * S,
        100_000_000,
        &format!("{name} wall +20 s"),
    );
    near(
        mono2 - mono1,
        10 * S,
        100_000_000,
        &format!("{name} monotonic +10 s"),
    );

    // 4x: over 1 s of true time the target's clocks advance 4 s (within 5%).
    page.change(ClockScope::All, |off, _| (off, 4.0));
    let (w0, m0) = t.read();
    let true0 = now_ns(CLOCK_MONOTONIC);
    std::thread::sleep(Duration::from_millis(1000));
    let (w1, m1) = t.read();
    let elapsed = now_ns(CLOCK_MONOTONIC) - true0;
    for (what, d) in [("wall", w1 - w0), ("monotonic", m1 - m0)] {
        let rate = d as f64 / elapsed as f64;
        assert!(
            (rate - 4.0).abs() < 0.2,
            "{name} {what}: rate {rate:.3}, want 4"
        );
    }

    // Back to true, then unpatched: the target runs on with the host's clock.
    page.reset();
    let (wall, _) = t.read();
    near(
        wall,
        now_ns(CLOCK_REALTIME),
        50_000_000,
        &format!("{name} reset"),
    );
    unpatch(&p).unwrap();
    t.assert_free();
    page.change(ClockScope::All, |off, _| (off + 100 * S, 1.0));
    let (wall, _) = t.read();
    near(
        wall,
        now_ns(CLOCK_REALTIME),
        50_000_000,
        &format!("{name} unpatched"),
    );
    t.assert_free();
}

#[test]
fn python_follows_the_page() {
    let dir = tempfile::tempdir().unwrap();
    if let Some(c) = python_target() {
        exercise("python", c, dir.path());
    }
}

#[test]
fn rust_follows_the_page() {
    let dir = tempfile::tempdir().unwrap();
    exercise("rust", rust_target(), dir.path());
}

#[test]
fn static_go_follows_the_page() {
    let dir = tempfile::tempdir().unwrap();
    if let Some(c) = go_target(dir.path()) {
        exercise("go", c, dir.path());
    }
}

/// Targets that exit at every moment of an attach: each patch ends Ok or with the process
/// gone, within its bound, and never leaves a survivor traced.
#[test]
fn targets_exiting_mid_attach_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let page = ControlPage::create(&dir.path().join("exit.page")).unwrap();
    let mut outcomes = std::collections::BTreeMap::<String, u32>::new();
    for i in 0..40u64 {
        // Lives 0..8 ms: the attach (a few ms) races its exit.
        let mut child = Command::new(VCLOCK)
            .args(["sleep-ms", &(i % 9).to_string()])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let began = std::time::Instant::now();
        let outcome = match patch(pid, &page) {
            Ok(_) => "patched".to_string(),
            Err(vclock::Error::Exited { .. }) | Err(vclock::Error::NoVdso { .. }) => {
                "exited".to_string()
            }
            Err(e) => format!("other: {e}"),
        };
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "attach took {:?}",
            began.elapsed()
        );
        if let Some(tp) = tracer(pid) {
            assert!(
                tp == 0 || state(pid) == Some('Z'),
                "pid {pid} traced by {tp}"
            );
        }
        let status = child.wait().unwrap();
        // A patched short-lived process still exits normally.
        if outcome == "patched" {
            assert!(status.success(), "patched target ended with {status}");
        }
        *outcomes.entry(outcome).or_default() += 1;
    }
    eprintln!("outcomes: {outcomes:?}");
    assert!(
        outcomes.keys().all(|k| k == "patched" || k == "exited"),
        "{outcomes:?}"
    );
}

/// A process patched right after spawn may still be a shell about to exec the real program
/// (a node's `sh -c "exec ..."`): the exec moves the vDSO, so the patch must read the mapping
/// only once the process is held. Every attempt either patches the shell or the program it
/// became; none fails reading a vDSO that moved (EIO).
#[test]
fn a_process_that_execs_during_the_attach_is_patched_or_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let page = ControlPage::create(&dir.path().join("exec.page")).unwrap();
    let mut patched = 0;
    for i in 0..60u64 {
        // The shell execs at once or after a short busy loop, so the attach lands before,
        // during or after the exec.
        let line = format!(
            "i=0; while [ $i -lt {} ]; do i=$((i+1)); done; exec {VCLOCK} sleep-ms 30",
            i % 20 * 20
        );
        let mut child = Command::new("sh").args(["-c", &line]).spawn().unwrap();
        let pid = child.id() as i32;
        match patch(pid, &page) {
            Ok(_) => patched += 1,
            Err(vclock::Error::Exited { .. }) | Err(vclock::Error::NoVdso { .. }) => {}
            Err(e) => panic!("attempt {i}: {e}"),
        }
        let status = child.wait().unwrap();
        assert!(status.success(), "attempt {i}: target ended with {status}");
    }
    assert!(patched > 0, "no attempt patched anything");
}

/// A tracer killed with SIGKILL at random moments while it patches and unpatches: the target
/// is never left stopped or traced (the kernel detaches a dead tracer's tracees).
#[test]
fn a_tracer_killed_mid_attach_leaves_no_process_stopped_or_traced() {
    let dir = tempfile::tempdir().unwrap();
    let page_path: PathBuf = dir.path().join("kill.page");
    ControlPage::create(&page_path).unwrap();
    let mut survived = 0;
    for round in 0..12u64 {
        let t = Target::spawn(rust_target());
        let mut tracer_child = Command::new(VCLOCK)
            .args(["cycle", &t.pid().to_string()])
            .arg(&page_path)
            .arg("100000")
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Fixed, varied delays: the kill lands in different phases of the cycle.
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        tracer_child.kill().unwrap();
        tracer_child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let pid = t.pid();
        match state(pid) {
            Some('T' | 't') => panic!("round {round}: target {pid} left stopped"),
            Some('Z') | None => {} // killed by a half-done injection: not stopped, not traced
            Some(_) => {
                assert_eq!(
                    tracer(pid),
                    Some(0),
                    "round {round}: target {pid} still traced"
                );
                survived += 1;
            }
        }
    }
    eprintln!("targets that ran on after their tracer was killed: {survived} of 12");
}

/// Refusals up front, each naming its reason: a stopped (paused) target is never attached,
/// and a tracer without permission over the target says so. The target runs on untouched.
#[test]
fn refuses_a_stopped_target_and_one_it_may_not_trace() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let dir = tempfile::tempdir().unwrap();
    let page = ControlPage::create(&dir.path().join("refuse.page")).unwrap();
    let mut t = Target::spawn(rust_target());
    let pid = Pid::from_raw(t.pid());
    kill(pid, Signal::SIGSTOP).unwrap();
    // Bounded: the stop is reported in /proc within milliseconds.
    for _ in 0..500 {
        if state(t.pid()) == Some('T') {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    match patch(t.pid(), &page) {
        Err(e @ vclock::Error::TargetStopped { .. }) => {
            assert!(e.to_string().contains("paused"), "{e}")
        }
        other => panic!("a stopped target was not refused: {other:?}"),
    }
    kill(pid, Signal::SIGCONT).unwrap();
    t.read();
    t.assert_free();
    // Another user: run the tool as nobody against our (root's) target.
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP: the permission refusal needs root (to run the tracer as nobody)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new(VCLOCK)
        .args(["patch", &t.pid().to_string()])
        .arg(dir.path().join("nobody.page"))
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("cannot trace process"), "{err}");
    t.read();
    t.assert_free();
}

/// The cost of one clock read in the target, before and after patching (BENCHMARKS.md).
#[test]
fn cost_per_clock_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Target::spawn(rust_target());
    let before: u64 = t.ask("b").parse().unwrap();
    let page = ControlPage::create(&dir.path().join("cost.page")).unwrap();
    let Patched::Now(p) = patch(t.pid(), &page).unwrap() else {
        panic!("a fresh process reported as already patched")
    };
    page.change(ClockScope::All, |_, _| (3600 * S, 1.0));
    let after: u64 = t.ask("b").parse().unwrap();
    eprintln!(
        "clock_gettime(CLOCK_MONOTONIC) median: {before} ns vDSO, {after} ns patched \
         (through the vDSO's own function: {})",
        p.fast
    );
    assert!(after < 10_000, "a patched read costs {after} ns");
}
