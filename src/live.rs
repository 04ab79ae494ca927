//! Live verdicts: a history still being written, checked again as it grows. What a run's
//! status line shows, what `--stop-on-violation` stops on, and what `lockpick check --follow`
//! prints.
//!
//! Each check reads the file up to a cut where time moves on: events of one instant may be
//! written in any order, and one not yet written can change what the others prove, so the
//! file's last instant waits for the next check. A safety violation proven on such a prefix
//! stays proven in the whole history (checkers/tests/prefix.rs), which is what lets a run stop
//! on it. Liveness findings are shown but never stop anything: an op pending in a prefix may
//! still be answered.
//!
//! Each check reads the prefix from its start (the checkers' model is built whole), so its cost
//! grows with the history; the next check waits at least three times as long as the last one
//! took, which keeps a live check under a quarter of one core whatever the length. A run's
//! checks each run in a process of their own (`lockpick live-check`, at nice 10): what one
//! allocates is given back when it ends, so the harness's memory stays flat however long the
//! run, and the check yields the CPU to the service and the clients it watches.

use history::{KindClass, Results, Violation};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How many bytes from the end of the file are searched for the cut: far more than the lines
/// of one instant.
const TAIL_BYTES_MAX: u64 = 1 << 20;

/// Past this much history a run's live checks stop, with a warning: each check reads the file
/// from its start and its memory grows with it (about 1 GB for the 1.3 GB of a 10M-event
/// history), which the machine must not spend beside the service: at this limit (about 4M
/// events) a check takes about 2 s and 400 MB. The end-of-run check still judges everything;
/// `--stop-on-violation` can no longer stop the run early.
pub const LIVE_CHECK_BYTES_MAX: u64 = 512 << 20;

/// A history file followed as it grows.
pub struct Follow {
    path: PathBuf,
    cfg: checkers::CheckConfig,
    /// The prefix the last check read (bytes).
    checked_bytes: u64,
}

impl Follow {
    pub fn new(path: &Path, cfg: &checkers::CheckConfig) -> Follow {
        Follow {
            path: path.to_path_buf(),
            cfg: cfg.clone(),
            checked_bytes: 0,
        }
    }

    /// Checks the file again if more of it can be judged since the last call; `None` when
    /// nothing new can be (nothing written, or only more of the last instant).
    pub fn poll(&mut self) -> Result<Option<Results>, checkers::CheckError> {
        let cut = time_closed_len(&self.path).map_err(|error| history::ReadError::Io {
            path: self.path.clone(),
            error,
        })?;
        if cut == self.checked_bytes {
            return Ok(None);
        }
        // A file cut shorter (rewritten) is followed from its new state.
        self.checked_bytes = cut;
        checkers::check_prefix(&self.path, cut, &self.cfg).map(Some)
    }
}

/// The length of the longest prefix of `path` that ends a line and after which time moves on
/// (every event after it is later than every event in it): the lines of the file's last
/// complete instant, and a last line still being written, are left out. A line whose time
/// cannot be read counts as the last instant's (left out too). 0 when no such cut is found
/// in the last [`TAIL_BYTES_MAX`] bytes.
pub fn time_closed_len(path: &Path) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let from = len.saturating_sub(TAIL_BYTES_MAX);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::with_capacity((len - from) as usize);
    file.take(len - from).read_to_end(&mut tail)?;
    Ok(from + time_closed_cut(&tail) as u64)
}

/// [`time_closed_len`] within `tail`, the end of the file: 0 when the cut is not in it.
fn time_closed_cut(tail: &[u8]) -> usize {
    // Only whole lines: a last line without its newline is still being written.
    let Some(end) = tail.iter().rposition(|&b| b == b'\n') else {
        return 0;
    };
    let mut last_time = None;
    let mut line_end = end;
    // Walks back line by line, bounded by the tail's lines.
    loop {
        let start = tail[..line_end].iter().rposition(|&b| b == b'\n');
        let line = &tail[start.map_or(0, |s| s + 1)..line_end];
        let time = time_ns(line);
        match (last_time, time) {
            // The last instant: the first time read from the end.
            (None, t) => last_time = t,
            // Time moved on between this line and the ones after it: the cut is here.
            (Some(last), Some(t)) if t < last => return line_end + 1,
            _ => {}
        }
        match start {
            Some(s) if s > 0 => line_end = s,
            // Before the tail's first line: the file's start, or out of reach.
            _ => return 0,
        }
    }
}

/// The `time_ns` of one JSON line, read without parsing the rest of it; `None` when the line
/// holds no such number (a blank line, another writer's shape).
fn time_ns(line: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"time_ns\"";
    let at = line.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = &line[at..];
    let rest = &rest[rest.iter().position(|b| !b.is_ascii_whitespace())?..];
    let rest = rest.strip_prefix(b":")?;
    let rest = &rest[rest.iter().position(|b| !b.is_ascii_whitespace())?..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// How often `check --follow` looks at the file.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// How a follow ended, and what it printed.
pub struct Followed {
    /// Why the history is cut short: Ctrl-C or SIGTERM while a process still wrote it.
    pub cut_short: Option<String>,
    /// The violations printed as they were first proven, as (kind, lock, sorted ops).
    pub printed: Vec<(history::ViolationKind, Option<String>, Vec<u64>)>,
}

/// `lockpick check --follow`: checks `path` as another process writes it and prints each
/// violation once, when first proven (on stderr with `to_stderr`: stdout is for the JSON).
/// Returns when no process on this machine has the file open for writing, or on Ctrl-C or
/// SIGTERM with why the history is cut short.
pub fn follow_until_closed(
    path: &Path,
    cfg: &checkers::CheckConfig,
    to_stderr: bool,
) -> anyhow::Result<Followed> {
    if !path.is_file() {
        anyhow::bail!("{}: no such history file to follow", path.display());
    }
    let say = move |line: String| {
        if to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    say(format!(
        "following {}: each violation is printed when first proven, the verdict once no process \
         writes the file (Ctrl-C: the verdict of what was written so far)",
        path.display()
    ));
    let rt = crate::runtime()?;
    rt.block_on(async {
        let began = Instant::now();
        let mut follow = Some(Follow::new(path, cfg));
        let mut shown = Shown::default();
        let mut failed = false;
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        // Bounded by the writer: ends when it closes the file, or on Ctrl-C.
        loop {
            // Asked before the check: a writer gone by now wrote everything the check reads.
            let writing = open_for_writing(path);
            let mut f = follow.take().expect("put back after each check");
            let check_began = Instant::now();
            let (f, checked) = tokio::task::spawn_blocking(move || {
                let r = f.poll();
                (f, r)
            })
            .await?;
            follow = Some(f);
            // As in a run: a check at most a third of the time.
            let wait = FOLLOW_EVERY.max(check_began.elapsed() * 3);
            match checked {
                Ok(Some(r)) => {
                    failed = false;
                    for v in shown.new_in(&r) {
                        say(one_line(v));
                    }
                }
                Ok(None) => {}
                // With no writer left, the final check's error says it (once): no "so far".
                Err(e) if !failed && writing => {
                    failed = true;
                    say(format!("the history cannot be checked so far: {e}"));
                }
                Err(_) => {}
            }
            if !writing {
                return Ok(Followed {
                    cut_short: None,
                    printed: shown.0,
                });
            }
            let signal = tokio::select! {
                _ = &mut ctrl_c => "Ctrl-C",
                _ = sigterm.recv() => "SIGTERM",
                () = tokio::time::sleep(wait) => continue,
            };
            return Ok(Followed {
                cut_short: Some(format!(
                    "followed until {signal} after {:.1} s, while a process was still writing it",
                    began.elapsed().as_secs_f64()
                )),
                printed: shown.0,
            });
        }
    })
}

/// `proven: double-grant on L0, ops 57, 61, from 0.800 s to 1.017 s: explanation` (instants
/// as the sentence writes them).
fn one_line(v: &Violation) -> String {
    let ops: Vec<String> = v.ops.iter().map(u64::to_string).collect();
    format!(
        "proven: {}{}, ops {}, from {} to {}: {}",
        v.kind,
        v.lock
            .as_ref()
            .map(|l| format!(" on {l}"))
            .unwrap_or_default(),
        ops.join(", "),
        reports::escape::secs(v.window_ns[0]),
        reports::escape::secs(v.window_ns[1]),
        v.explanation
    )
}

/// The violations printed so far, to print each once: one whose witness grew as the history
/// did (same kind and lock, ops a superset) is the one already printed.
#[derive(Default)]
struct Shown(Vec<(history::ViolationKind, Option<String>, Vec<u64>)>);

impl Shown {
    fn new_in<'a>(&mut self, r: &'a Results) -> Vec<&'a Violation> {
        let mut out = Vec::new();
        for v in &r.violations {
            let mut ops = v.ops.clone();
            ops.sort_unstable();
            let subset = |a: &[u64], b: &[u64]| a.iter().all(|x| b.binary_search(x).is_ok());
            let seen = self.0.iter().any(|(k, l, o)| {
                *k == v.kind && *l == v.lock && (subset(o, &ops) || subset(&ops, o))
            });
            if !seen {
                self.0.push((v.kind, v.lock.clone(), ops));
                out.push(v);
            }
        }
        out
    }
}

/// Whether a process on this machine (other than this one) has `path` open for writing, read
/// from /proc: each process's open files and their flags.
pub fn open_for_writing(path: &Path) -> bool {
    let Ok(target) = path.canonicalize() else {
        return false;
    };
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    // Bounded by the processes and their open files.
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).ok().as_deref() != Some(target.as_path()) {
                continue;
            }
            let info = std::fs::read_to_string(p.path().join("fdinfo").join(fd.file_name()))
                .unwrap_or_default();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok());
            // O_WRONLY or O_RDWR.
            if flags.is_some_and(|f| f & 3 != 0) {
                return true;
            }
        }
    }
    false
}

/// The first safety violation a live check proved, and when.
#[derive(Debug, Clone)]
pub struct Proven {
    pub violation: Violation,
    /// Seconds from the run's start to the check that proved it.
    pub proven_at_s: f64,
}

impl Proven {
    /// `double-grant on L0 proven at 1.23 s (ops 57, 61, from 0.800 s to 1.017 s)`: the
    /// proof's moment on the harness's clock, the window's instants as the sentence writes them.
    pub fn headline(&self) -> String {
        let v = &self.violation;
        let ops: Vec<String> = v.ops.iter().map(u64::to_string).collect();
        format!(
            "{}{} proven at {:.2} s (ops {}, from {} to {})",
            v.kind,
            v.lock
                .as_ref()
                .map(|l| format!(" on {l}"))
                .unwrap_or_default(),
            self.proven_at_s,
            ops.join(", "),
            reports::escape::secs(v.window_ns[0]),
            reports::escape::secs(v.window_ns[1])
        )
    }
}

/// What the live checks found so far.
#[derive(Debug, Clone, Default)]
pub struct LiveVerdict {
    /// Violations the last check proved (safety and liveness); `None` before the first check
    /// or when the last one failed.
    pub violations: Option<usize>,
    /// The first safety violation any check proved (it stays proven).
    pub first_safety: Option<Proven>,
    /// The events the last check read.
    pub checked_events: u64,
    /// The history time the last check read up to (its last event's), in ns from the run's
    /// start: how far behind the run the live verdict is.
    pub checked_through_ns: u64,
    /// Set when the live checks stopped at [`LIVE_CHECK_BYTES_MAX`]: the events checked last.
    pub gave_up_at_events: Option<u64>,
}

/// The first counted safety violation of a verdict, in the verdict's own order (the one its
/// report then lists first).
pub fn first_safety(r: &Results) -> Option<&Violation> {
    r.violations
        .iter()
        .find(|v| v.kind.class() == KindClass::Safety)
}

/// A thread checking a run's history as it is written, publishing what it found. Stopped
/// (and joined) when dropped.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    /// Checks `path` every `every` (or three times as long as the last check took, if longer)
    /// and sends each verdict on `tx`. `start` is the run's start, for the time a violation
    /// was proven.
    pub fn start(
        path: &Path,
        cfg: &checkers::CheckConfig,
        start: Instant,
        every: Duration,
        tx: watch::Sender<LiveVerdict>,
    ) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (path, cfg) = (path.to_path_buf(), cfg.clone());
        let thread = std::thread::Builder::new()
            .name("live-check".into())
            .spawn(move || {
                let mut wait = every;
                let mut checked_bytes = 0;
                // Ends when the watcher is dropped, or at a limit; each pass sleeps at least
                // `every`.
                while sleep_unless(&flag, wait) {
                    let cut = match time_closed_len(&path) {
                        Ok(cut) if cut != checked_bytes => cut,
                        _ => continue,
                    };
                    if cut >= LIVE_CHECK_BYTES_MAX {
                        let events = tx.borrow().checked_events;
                        tracing::warn!(
                            "the history passed {} MiB ({events} events): live checks stop here \
                             (each reads the whole file); the end of the run checks all of it, \
                             and --stop-on-violation can no longer end it early",
                            LIVE_CHECK_BYTES_MAX >> 20
                        );
                        tx.send_modify(|v| v.gave_up_at_events = Some(events));
                        return;
                    }
                    checked_bytes = cut;
                    let began = Instant::now();
                    let found = match check_in_child(&path, cut, &cfg, &flag) {
                        Ok(Some(found)) => Some(found),
                        // Stopped meanwhile.
                        Ok(None) => return,
                        Err(e) => {
                            tracing::debug!("live check: {e}");
                            None
                        }
                    };
                    wait = every.max(began.elapsed() * 3);
                    tx.send_modify(|v| {
                        v.violations = found.as_ref().map(|f| f.violations);
                        if let Some(f) = &found {
                            v.checked_events = f.events;
                            v.checked_through_ns = f.through_ns;
                        }
                        if v.first_safety.is_none() {
                            v.first_safety =
                                found.and_then(|f| f.first_safety).map(|violation| Proven {
                                    violation,
                                    proven_at_s: start.elapsed().as_secs_f64(),
                                });
                        }
                    });
                }
            })
            .expect("a thread can be started");
        Watcher {
            stop,
            thread: Some(thread),
        }
    }
}

/// What a live check found, as its process prints it: one JSON line.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Found {
    violations: usize,
    events: u64,
    /// The time of the last event read, in ns.
    through_ns: u64,
    first_safety: Option<Violation>,
}

/// `lockpick live-check` (hidden): checks the first `--bytes` of a history and prints what it
/// found as one JSON line. A run's live checks run in a process of their own, so that what a
/// check allocates (in proportion to the history) is given back when it ends, and never stays
/// in the harness beside the service.
#[derive(Debug, Clone, clap::Args)]
pub struct LiveCheckArgs {
    pub path: PathBuf,
    #[arg(long)]
    pub bytes: u64,
    #[arg(long)]
    pub drift: f64,
    #[arg(long)]
    pub liveness_grace_ns: u64,
    #[arg(long)]
    pub min_grants: u64,
    #[arg(long)]
    pub monotonic_clock_reach_ns: Option<u64>,
}

pub fn live_check(a: LiveCheckArgs) -> anyhow::Result<history::ExitCode> {
    let cfg = checkers::CheckConfig {
        drift: a.drift,
        liveness_grace_ns: a.liveness_grace_ns,
        min_grants: a.min_grants,
        monotonic_clock_reach_ns: a.monotonic_clock_reach_ns,
    };
    let r = checkers::check_prefix(&a.path, a.bytes, &cfg)?;
    let found = Found {
        violations: r.violations.len(),
        events: r.stats.events,
        through_ns: r.stats.duration_ns,
        first_safety: first_safety(&r).cloned(),
    };
    println!("{}", serde_json::to_string(&found)?);
    Ok(history::ExitCode::Valid)
}

/// How long one live check may take before it is given up (a history far past any run's).
const LIVE_CHECK_TIME_MAX: Duration = Duration::from_secs(120);

/// Runs `lockpick live-check` on the first `bytes` of `path`, at a lower priority than the
/// service and the clients it watches. `None` when `stop` was set meanwhile (the check is
/// ended, by its pid).
fn check_in_child(
    path: &Path,
    bytes: u64,
    cfg: &checkers::CheckConfig,
    stop: &AtomicBool,
) -> anyhow::Result<Option<Found>> {
    use std::os::unix::process::CommandExt;
    // This very binary, even if the file was replaced while the run goes on (an upgrade during
    // a soak): /proc/self/exe still names the running one.
    let proc_exe = Path::new("/proc/self/exe");
    let exe = if proc_exe.exists() {
        proc_exe.to_path_buf()
    } else {
        std::env::current_exe()?
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("live-check")
        .arg(path)
        .args(["--bytes", &bytes.to_string()])
        .args(["--drift", &cfg.drift.to_string()])
        .args(["--liveness-grace-ns", &cfg.liveness_grace_ns.to_string()])
        .args(["--min-grants", &cfg.min_grants.to_string()]);
    if let Some(r) = cfg.monotonic_clock_reach_ns {
        cmd.args(["--monotonic-clock-reach-ns", &r.to_string()]);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: between fork and exec only setpriority, a plain system call, runs.
    unsafe {
        cmd.pre_exec(|| {
            // The check yields to the service and the clients: it must not change what it
            // watches. A failure leaves the default priority.
            libc::setpriority(libc::PRIO_PROCESS, 0, 10);
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let (mut out, mut err) = (
        child.stdout.take().expect("piped"),
        child.stderr.take().expect("piped"),
    );
    // Read aside: a child blocked on a full pipe would never end.
    let reader = std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        let _ = out.read_to_string(&mut o);
        let _ = err.read_to_string(&mut e);
        (o, e)
    });
    let began = Instant::now();
    // Bounded by LIVE_CHECK_TIME_MAX.
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if stop.load(Ordering::Relaxed) || began.elapsed() > LIVE_CHECK_TIME_MAX {
            let _ = child.kill();
            let _ = child.wait();
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            anyhow::bail!("a live check took over {LIVE_CHECK_TIME_MAX:?}: ended");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (out, err) = reader.join().unwrap_or_default();
    if !status.success() {
        anyhow::bail!("{}", err.trim());
    }
    Ok(Some(serde_json::from_str(out.trim())?))
}

/// Sleeps `d` in short steps; false as soon as `stop` is set.
fn sleep_unless(stop: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    // Bounded by `d` in steps of at most 20 ms.
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(20)));
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(time: u64) -> String {
        format!("{{\"index\":0,\"time_ns\":{time},\"process\":1,\"type\":\"invoke\",\"f\":\"acquire\"}}\n")
    }

    /// (lines as times, a last partial line, the cut as a count of whole lines kept)
    #[test]
    fn the_cut_falls_where_time_moves_on() {
        let cases: &[(&[u64], bool, usize)] = &[
            (&[], false, 0),
            (&[5], false, 0),
            (&[5, 6], false, 1),
            (&[5, 6, 6], false, 1),
            (&[5, 6, 7], true, 2),
            (&[5, 5, 5], false, 0),
            (&[1, 2, 3, 3, 3], false, 2),
            (&[1, 2, 3, 4], true, 3),
        ];
        for &(times, partial, kept) in cases {
            let mut text: String = times.iter().map(|&t| line(t)).collect();
            if partial {
                text.push_str("{\"index\":9,\"time_ns\":99");
            }
            let want: usize = times[..kept].iter().map(|&t| line(t).len()).sum();
            assert_eq!(
                time_closed_cut(text.as_bytes()),
                want,
                "{times:?} partial {partial}"
            );
        }
    }

    #[test]
    fn a_line_without_a_readable_time_waits_with_the_last_instant() {
        let text = format!("{}{}\n{}", line(1), "{\"odd\":true}", line(2));
        assert_eq!(time_closed_cut(text.as_bytes()), line(1).len());
        let odd_last = format!("{}{}{}", line(1), line(2), "{\"odd\":true}\n");
        assert_eq!(time_closed_cut(odd_last.as_bytes()), line(1).len());
        assert_eq!(time_ns(b"{ \"time_ns\" : 42 ,"), Some(42));
        assert_eq!(time_ns(b"{\"time_ns\":\"x\"}"), None);
    }
}
