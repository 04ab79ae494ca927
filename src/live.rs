//! Live verdicts: a history still being written, checked as it grows. What a run's status
//! line shows, what `--stop-on-violation` stops on, and what `lockpick check --follow` prints.
//!
//! Two readings run side by side ([`LiveCheck`]):
//! - the streaming rules (`checkers::Follower`) over each new stretch of the file: what one
//!   read costs is what the new lines cost, so a verdict at any length is at most a poll
//!   behind the file (a violation is proven once the file is read past what can still reach
//!   the grants it rests on, a few leases after them);
//! - while the history is under [`LIVE_CHECK_BYTES_MAX`], the whole prefix checked again on a
//!   thread of its own, every rule (`total-changed` and the liveness rules are judged only
//!   there and at the end), waiting three times as long as the last such check took, which
//!   keeps it under a quarter of one core whatever the length.
//!
//! Each reads the file up to a cut where time moves on: events of one instant may be written
//! in any order, and one not yet written can change what the others prove, so the file's last
//! instant waits for the next read. A safety violation proven on such a prefix stays proven in
//! the whole history (checkers/tests/prefix.rs, checkers/tests/follow.rs), which is what lets a
//! run stop on it. Liveness findings are shown but never stop anything: an op pending in a
//! prefix may still be answered.
//!
//! A run's live check is a process of its own (`lockpick live-check`, at nice 10), started once
//! and ended with the run: what it allocates never lands in the harness beside the service, and
//! it yields the CPU to the service and the clients it watches.

use history::{KindClass, Results, Violation};
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How many bytes from the end of the file are searched for the cut: far more than the lines
/// of one instant.
const TAIL_BYTES_MAX: u64 = 1 << 20;

/// Past this much history the whole-prefix checks stop, with a warning: each reads the file
/// from its start and its memory grows with it (about 1 GB for the 1.3 GB of a 10M-event
/// history); at this limit (about 4M events) one takes about 2 s and 400 MB. The streaming
/// rules go on; the end-of-run check judges everything.
pub const LIVE_CHECK_BYTES_MAX: u64 = 512 << 20;

/// How much of a followed file one read hands the streaming rules: a backlog (a file followed
/// long after its writer started) is read in steps this long, never held whole.
const FOLLOW_STEP_BYTES: u64 = 1 << 20;

/// What a live check has found since its last [`LiveCheck::poll`].
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Update {
    /// The violations first proven since the last poll, each once (safety and liveness).
    pub new: Vec<Violation>,
    /// Safety violations proven so far (they stay proven), plus the liveness findings of the
    /// last whole-prefix check.
    pub violations: usize,
    /// Events read, and the time of the latest (ns from the run's start).
    pub events: u64,
    pub through_ns: u64,
    /// Why the history cannot be checked so far (a line refused), if it cannot.
    pub error: Option<String>,
    /// Set once the whole-prefix checks stopped at [`LIVE_CHECK_BYTES_MAX`]: the events read
    /// then. The streaming rules go on.
    pub whole_stopped_at_events: Option<u64>,
}

/// A whole-prefix check running on its own thread: what it finds.
type WholeCheck = std::thread::JoinHandle<Result<Results, checkers::CheckError>>;

/// A history file followed as it grows: see the module's note.
pub struct LiveCheck {
    path: PathBuf,
    cfg: checkers::CheckConfig,
    follower: checkers::Follower,
    /// The bytes handed to the follower: a prefix ending at a line's end.
    fed_bytes: u64,
    /// What the follower or the last whole check refused.
    error: Option<String>,
    /// The whole-prefix check running, if one is, its prefix, and when it began.
    whole: Option<(WholeCheck, u64, Instant)>,
    /// The prefix the last whole check read, what it took, and when the next may begin.
    whole_bytes: u64,
    whole_took: Duration,
    whole_next: Instant,
    /// At least this long between whole checks.
    every: Duration,
    whole_stopped_at_events: Option<u64>,
    /// [`LIVE_CHECK_BYTES_MAX`] and [`FOLLOW_STEP_BYTES`] (the tests set less).
    whole_bytes_max: u64,
    step_bytes: u64,
    /// Liveness findings of the last whole check, and those the streaming reader proved (a
    /// deadlock): each a lower bound of what the run holds, the larger one counted.
    liveness: usize,
    streamed_liveness: usize,
    shown: Shown,
    events: u64,
    through_ns: u64,
}

impl LiveCheck {
    /// A live check of `path`, its whole-prefix checks at least `every` apart.
    pub fn new(path: &Path, cfg: &checkers::CheckConfig, every: Duration) -> LiveCheck {
        LiveCheck {
            path: path.to_path_buf(),
            cfg: cfg.clone(),
            follower: checkers::Follower::new(path, cfg),
            fed_bytes: 0,
            error: None,
            whole: None,
            whole_bytes: 0,
            whole_took: Duration::ZERO,
            whole_next: Instant::now(),
            every,
            whole_stopped_at_events: None,
            whole_bytes_max: LIVE_CHECK_BYTES_MAX,
            step_bytes: FOLLOW_STEP_BYTES,
            liveness: 0,
            streamed_liveness: 0,
            shown: Shown::default(),
            events: 0,
            through_ns: 0,
        }
    }

    /// Reads what was written since the last poll (up to the last instant that is closed) and
    /// collects what the whole-prefix check found if it is done; starts the next one if due.
    pub fn poll(&mut self) -> Update {
        let (mut new, mut unreadable) = (Vec::new(), None);
        let mut cut = time_closed_len(&self.path, self.fed_bytes);
        if cut.as_ref().is_ok_and(|&c| c < self.fed_bytes) {
            // Shorter than what was read: rewritten, followed from its start.
            let limits = (self.whole_bytes_max, self.step_bytes);
            *self = LiveCheck::new(&self.path, &self.cfg, self.every);
            (self.whole_bytes_max, self.step_bytes) = limits;
            cut = time_closed_len(&self.path, 0);
        }
        match cut {
            Ok(cut) => {
                // Reading the file may work at the next poll; a line refused never will.
                if let Err(e) = self.read_to(cut, &mut new) {
                    unreadable = Some(e);
                }
                self.whole_check(cut, &mut new);
            }
            // Not kept: the file may be readable at the next poll.
            Err(e) => unreadable = Some(format!("{}: {e}", self.path.display())),
        }
        Update {
            new,
            violations: self.shown.safety() + self.liveness.max(self.streamed_liveness),
            events: self.events,
            through_ns: self.through_ns,
            error: self.error.clone().or(unreadable),
            whole_stopped_at_events: self.whole_stopped_at_events,
        }
    }

    /// Hands the follower the file's bytes up to `cut`, in steps; the violations it proves
    /// go to `new`. A line it refuses is kept in `error` (nothing after it can be read); an
    /// error reading the file is returned.
    fn read_to(&mut self, cut: u64, new: &mut Vec<Violation>) -> Result<(), String> {
        if self.fed_bytes >= cut || self.error.is_some() {
            return Ok(());
        }
        let say = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let mut file = std::fs::File::open(&self.path).map_err(say)?;
        file.seek(SeekFrom::Start(self.fed_bytes)).map_err(say)?;
        let mut step = Vec::new();
        // Bounded by the bytes to `cut`: each pass hands at least one line.
        while self.fed_bytes < cut {
            let want = (cut - self.fed_bytes).min(self.step_bytes);
            step.clear();
            (&mut file).take(want).read_to_end(&mut step).map_err(say)?;
            // Whole lines only: the cut ends one, a step short of it ends at its last newline.
            let end = if self.fed_bytes + step.len() as u64 == cut {
                step.len()
            } else {
                match step.iter().rposition(|&c| c == b'\n') {
                    Some(p) => p + 1,
                    None => {
                        return Err(format!(
                            "{}: a line longer than {} bytes",
                            self.path.display(),
                            self.step_bytes
                        ))
                    }
                }
            };
            let read = match self.follower.read(&step[..end]) {
                Ok(read) => read,
                Err(e) => {
                    self.error = Some(e.to_string());
                    return Ok(());
                }
            };
            self.fed_bytes += end as u64;
            file.seek(SeekFrom::Start(self.fed_bytes)).map_err(say)?;
            self.events = self.events.max(read.events);
            self.through_ns = self.through_ns.max(read.through_ns);
            let shown = &mut self.shown;
            for v in read.proven.into_iter().filter(|v| shown.first_time(v)) {
                self.streamed_liveness += (v.kind.class() != KindClass::Safety) as usize;
                new.push(v);
            }
        }
        Ok(())
    }

    /// Collects the whole-prefix check if it is done, and starts the next one if it is due.
    fn whole_check(&mut self, cut: u64, new: &mut Vec<Violation>) {
        self.collect_whole(new);
        if self.whole.is_some()
            || self.whole_stopped_at_events.is_some()
            || self.error.is_some()
            || cut == self.whole_bytes
            || Instant::now() < self.whole_next
        {
            return;
        }
        if cut >= self.whole_bytes_max {
            self.whole_stopped_at_events = Some(self.events);
            return;
        }
        let (path, cfg) = (self.path.clone(), self.cfg.clone());
        let check = std::thread::Builder::new()
            .name("whole-check".into())
            .spawn(move || checkers::check_prefix(&path, cut, &cfg));
        match check {
            Ok(check) => self.whole = Some((check, cut, Instant::now())),
            Err(e) => {
                self.error
                    .get_or_insert(format!("a live check could not start: {e}"));
                return;
            }
        }
        // A check of a short history takes milliseconds: waited for, so that what it proves
        // is shown by this poll, not the next (a run stopping on it stops a poll sooner).
        if self.whole_took < WHOLE_WAITED_MAX {
            let until = Instant::now() + WHOLE_WAITED_MAX * 2;
            // Bounded by `until`.
            while self.whole.as_ref().is_some_and(|w| !w.0.is_finished()) && Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.collect_whole(new);
        }
    }

    /// Takes in what the whole-prefix check found, if it is done.
    fn collect_whole(&mut self, new: &mut Vec<Violation>) {
        if self.whole.as_ref().is_none_or(|w| !w.0.is_finished()) {
            return;
        }
        let Some((check, bytes, began)) = self.whole.take() else {
            return;
        };
        self.whole_took = began.elapsed();
        self.whole_next = Instant::now() + self.every.max(self.whole_took * 3);
        match check.join() {
            Ok(Ok(r)) => {
                self.whole_bytes = bytes;
                self.events = self.events.max(r.stats.events);
                self.liveness = (r.violations.iter())
                    .filter(|v| v.kind.class() != KindClass::Safety)
                    .count();
                let shown = &mut self.shown;
                new.extend((r.violations.into_iter()).filter(|v| shown.first_time(v)));
            }
            Ok(Err(e)) => {
                self.error.get_or_insert(e.to_string());
            }
            Err(_) => {
                self.error
                    .get_or_insert_with(|| "a live check panicked".to_string());
            }
        }
        give_back_memory();
    }
}

/// A whole-prefix check whose last one took less than this is waited for in the poll that
/// starts it.
const WHOLE_WAITED_MAX: Duration = Duration::from_millis(50);

impl Drop for LiveCheck {
    fn drop(&mut self) {
        // A whole check still running is waited for: it ends by itself, reading a prefix.
        if let Some((check, _, _)) = self.whole.take() {
            let _ = check.join();
        }
    }
}

/// Hands the memory a whole check freed back to the system: the allocator keeps freed pages
/// for reuse otherwise, and a long-lived live check must not hold a big check's peak.
fn give_back_memory() {
    // SAFETY: malloc_trim only walks glibc's own free lists.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The length of the longest prefix of `path` that ends a line and after which time moves on
/// (every event after it is later than every event in it): the lines of the file's last
/// complete instant, and a last line still being written, are left out. A line whose time
/// cannot be read counts as the last instant's (left out too). `after` is such a cut already
/// found (0 at first): only what follows it is read, at most its last [`TAIL_BYTES_MAX`]
/// bytes, and `after` is returned when no later cut is found there; a file now shorter than
/// `after` gives its length (less than `after`: it was rewritten).
pub fn time_closed_len(path: &Path, after: u64) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len <= after {
        return Ok(len.min(after));
    }
    let from = len.saturating_sub(TAIL_BYTES_MAX).max(after);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::with_capacity((len - from) as usize);
    file.take(len - from).read_to_end(&mut tail)?;
    Ok(match time_closed_cut(&tail) {
        0 => after,
        cut => from + cut as u64,
    })
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

/// How often a live check reads what was written (and for `check --follow`, at least how long
/// between two whole-prefix checks): each read costs what was written since the last.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// How a follow ended, and what it printed.
pub struct Followed {
    /// Why the history is cut short: Ctrl-C or SIGTERM while a process still wrote it.
    pub cut_short: Option<String>,
    /// The violations printed as they were first proven, as (kind, lock, sorted ops).
    pub printed: Vec<(history::ViolationKind, Option<String>, Vec<u64>)>,
}

/// How often a follow started before its file looks for it.
const CREATION_POLL: Duration = Duration::from_millis(100);

/// A follow may start before the writer creates its file (a run started just after it): in a
/// folder that exists, the file is waited for as long as a writer's pause (`idle`). A missing
/// folder is a wrong path, refused at once.
fn wait_for_creation(path: &Path, idle: Duration, say: impl Fn(String)) -> anyhow::Result<()> {
    if path.is_file() {
        return Ok(());
    }
    let folder = match path.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => Path::new("/"),
    };
    if !folder.is_dir() {
        anyhow::bail!(
            "{}: no such history file to follow (nor its folder {})",
            path.display(),
            folder.display()
        );
    }
    say(format!(
        "waiting up to {} (--idle) for {} to be created",
        humantime::format_duration(idle),
        path.display()
    ));
    let began = Instant::now();
    // Bounded by --idle.
    while began.elapsed() < idle {
        std::thread::sleep(CREATION_POLL);
        if path.is_file() {
            return Ok(());
        }
    }
    anyhow::bail!(
        "{}: no such history file to follow (none was created within --idle {})",
        path.display(),
        humantime::format_duration(idle)
    )
}

/// `lockpick check --follow`: checks `path` as another process writes it and prints each
/// violation once, when first proven (on stderr with `to_stderr`: stdout is for the JSON).
/// Returns once the file has not grown for `idle` while no process on this machine held it
/// open for writing, or on Ctrl-C or SIGTERM with why the history is cut short.
///
/// Both are asked for because neither is enough alone: a run on this machine holds its
/// history open through pauses of any length, and a writer elsewhere (a network mount, a copy
/// appended in chunks by one short process after another) is never seen holding it, so its
/// pauses and its end look alike but for how long the file stays the same.
pub fn follow_until_closed(
    path: &Path,
    cfg: &checkers::CheckConfig,
    idle: Duration,
    to_stderr: bool,
) -> anyhow::Result<Followed> {
    let say = move |line: String| {
        if to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    wait_for_creation(path, idle, say)?;
    say(format!(
        "following {}: each violation is printed when first proven, the verdict once the file \
         has not grown for {} with no process here writing it (--idle; Ctrl-C: the verdict of \
         what was written so far)",
        path.display(),
        humantime::format_duration(idle)
    ));
    let rt = crate::runtime()?;
    rt.block_on(async {
        let began = Instant::now();
        let mut live = Some(LiveCheck::new(path, cfg, FOLLOW_EVERY));
        let mut printed = Vec::new();
        let (mut failed, mut said_stopped) = (false, false);
        // The file's length when last asked, and since when it has been that long.
        let (mut length, mut same_since) = (None, Instant::now());
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        // Bounded by the writer: ends once the file is idle and nobody here writes it, or on
        // Ctrl-C.
        loop {
            // Asked before the read: a writer gone by now, and a length that has not moved
            // since, mean the read sees everything written.
            let writing = open_for_writing(path);
            let now_length = std::fs::metadata(path).map(|m| m.len()).ok();
            if now_length != length {
                (length, same_since) = (now_length, Instant::now());
            }
            let mut l = live.take().expect("put back after each poll");
            let (l, update) = tokio::task::spawn_blocking(move || {
                let u = l.poll();
                (l, u)
            })
            .await?;
            live = Some(l);
            for v in &update.new {
                say(one_line(v));
                let mut ops = v.ops.clone();
                ops.sort_unstable();
                printed.push((v.kind, v.lock.clone(), ops));
            }
            if let (Some(events), false) = (update.whole_stopped_at_events, said_stopped) {
                said_stopped = true;
                say(format!(
                    "past {} MiB ({events} events), only the rules that stream run as the file \
                     grows (a whole check reads it from its start); the verdict checks all of it",
                    LIVE_CHECK_BYTES_MAX >> 20
                ));
            }
            match update.error {
                // With no writer left, the final check's error says it (once): no "so far".
                // A refused line stays refused whatever is appended after it.
                Some(_) if !writing => {
                    return Ok(Followed {
                        cut_short: None,
                        printed,
                    })
                }
                Some(e) if !failed => {
                    failed = true;
                    say(format!("the history cannot be checked so far: {e}"));
                }
                _ => {}
            }
            if !writing && same_since.elapsed() >= idle {
                say(format!(
                    "{} has not grown for {} and no process here writes it: taken as finished",
                    path.display(),
                    humantime::format_duration(Duration::from_secs(same_since.elapsed().as_secs()))
                ));
                return Ok(Followed {
                    cut_short: None,
                    printed,
                });
            }
            let signal = tokio::select! {
                _ = &mut ctrl_c => "Ctrl-C",
                _ = sigterm.recv() => "SIGTERM",
                () = tokio::time::sleep(FOLLOW_EVERY) => continue,
            };
            let whom = if writing {
                "while a process was still writing it"
            } else {
                "before the file had been idle for --idle"
            };
            return Ok(Followed {
                cut_short: Some(format!(
                    "followed until {signal} after {:.1} s, {whom}",
                    began.elapsed().as_secs_f64()
                )),
                printed,
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

/// The violations shown so far, to show each once: one whose witness grew as the history
/// did (same kind and lock, ops a superset or a subset) is the one already shown.
#[derive(Default)]
struct Shown(Vec<(history::ViolationKind, Option<String>, Vec<u64>)>);

impl Shown {
    /// Whether `v` is shown for the first time (and from now on, shown).
    fn first_time(&mut self, v: &Violation) -> bool {
        let mut ops = v.ops.clone();
        ops.sort_unstable();
        let subset = |a: &[u64], b: &[u64]| a.iter().all(|x| b.binary_search(x).is_ok());
        let seen = self
            .0
            .iter()
            .any(|(k, l, o)| *k == v.kind && *l == v.lock && (subset(o, &ops) || subset(&ops, o)));
        if !seen {
            self.0.push((v.kind, v.lock.clone(), ops));
        }
        !seen
    }

    /// The safety violations shown.
    fn safety(&self) -> usize {
        (self.0.iter())
            .filter(|(k, _, _)| k.class() == KindClass::Safety)
            .count()
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

/// What the live check found so far.
#[derive(Debug, Clone, Default)]
pub struct LiveVerdict {
    /// Safety violations proven so far and the liveness findings of the last whole-prefix
    /// check; `None` before the first read, or when the history cannot be checked.
    pub violations: Option<usize>,
    /// The first safety violation proven (it stays proven).
    pub first_safety: Option<Proven>,
    /// The events read.
    pub checked_events: u64,
    /// The history time read up to (its last event's), in ns from the run's start: how far
    /// behind the run the live verdict is.
    pub checked_through_ns: u64,
    /// Set once the whole-prefix checks stopped at [`LIVE_CHECK_BYTES_MAX`]: the events read
    /// then (the streaming rules go on).
    pub whole_stopped_at_events: Option<u64>,
}

impl LiveVerdict {
    /// Takes in what the live check sent; `at_s`: seconds since the run's start.
    fn update(&mut self, u: &Update, at_s: f64) {
        self.violations = u.error.is_none().then_some(u.violations);
        self.checked_events = u.events;
        self.checked_through_ns = u.through_ns;
        self.whole_stopped_at_events = u.whole_stopped_at_events;
        if self.first_safety.is_none() {
            let first = u.new.iter().find(|v| v.kind.class() == KindClass::Safety);
            self.first_safety = first.map(|v| Proven {
                violation: v.clone(),
                proven_at_s: at_s,
            });
        }
    }
}

/// A run's live check: a child `lockpick live-check` following the history, started by a
/// thread of the watcher's own that publishes what it sends. Ended (the child by its pid, the
/// thread joined) when dropped.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    /// The child, once started; taken by whoever ends it.
    child: Arc<std::sync::Mutex<Option<std::process::Child>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    /// Follows `path`, reading what was written every 250 ms and checking the whole prefix at
    /// most every `every`, and sends what is found on `tx`. `start` is the run's start, for the
    /// time a violation was proven.
    pub fn start(
        path: &Path,
        cfg: &checkers::CheckConfig,
        start: Instant,
        every: Duration,
        tx: watch::Sender<LiveVerdict>,
    ) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let child: Arc<std::sync::Mutex<Option<std::process::Child>>> = Arc::default();
        let (path, cfg) = (path.to_path_buf(), cfg.clone());
        let (flag, slot) = (stop.clone(), child.clone());
        // The child is started by this thread, which lives as long as the watcher: the child's
        // parent-death signal follows the thread that started it.
        let thread = std::thread::Builder::new()
            .name("live-check".into())
            .spawn(move || {
                let out = {
                    let mut c = match spawn_live_check(&path, &cfg, every) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!("the live check could not start ({e}): the end of the run still checks everything");
                            return;
                        }
                    };
                    let out = c.stdout.take().expect("piped");
                    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                    if flag.load(Ordering::Relaxed) {
                        // Dropped meanwhile: ended here, ours by its pid.
                        let _ = c.kill();
                        let _ = c.wait();
                        return;
                    }
                    *slot = Some(c);
                    out
                };
                publish(out, start, &tx);
            })
            .expect("a thread can be started");
        Watcher {
            stop,
            child,
            thread: Some(thread),
        }
    }
}

/// Reads the live check's lines from `out` until it ends, and sends what each says on `tx`.
fn publish(out: std::process::ChildStdout, start: Instant, tx: &watch::Sender<LiveVerdict>) {
    let mut warned = false;
    // Bounded by the child's output: ends when it ends (with the run, or killed).
    for line in std::io::BufReader::new(out).lines() {
        let Ok(line) = line else { return };
        let update: Update = match serde_json::from_str(&line) {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!("live check: {e}: {line}");
                continue;
            }
        };
        if let (Some(events), false) = (update.whole_stopped_at_events, warned) {
            warned = true;
            tracing::warn!(
                "the history passed {} MiB ({events} events): from here only the rules that \
                 stream run live (a whole check reads the file from its start); the end of the \
                 run checks all of it",
                LIVE_CHECK_BYTES_MAX >> 20
            );
        }
        if let Some(e) = &update.error {
            tracing::debug!("live check: {e}");
        }
        let at_s = start.elapsed().as_secs_f64();
        tx.send_modify(|v| v.update(&update, at_s));
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut child) = child {
            // Ours, by its pid, still unreaped (so the pid is still its own).
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `lockpick live-check` (hidden): follows a history as it is written ([`LiveCheck`]) and
/// prints what it finds as one JSON line ([`Update`]) each time something changed, until its
/// standard input closes (the harness ended it, or ended). A run's live check is a process of
/// its own so that what it allocates never stays in the harness beside the service.
#[derive(Debug, Clone, clap::Args)]
pub struct LiveCheckArgs {
    pub path: PathBuf,
    /// At least this long between two whole-prefix checks, in ms (what was written is read
    /// every 250 ms).
    #[arg(long)]
    pub every_ms: u64,
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
    use std::io::Write;
    let cfg = checkers::CheckConfig {
        drift: a.drift,
        liveness_grace_ns: a.liveness_grace_ns,
        min_grants: a.min_grants,
        monotonic_clock_reach_ns: a.monotonic_clock_reach_ns,
    };
    let every = Duration::from_millis(a.every_ms.max(10));
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // The harness holds the other end of stdin: it closes when the harness ends us or ends.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        flag.store(true, Ordering::Relaxed);
    });
    let mut live = LiveCheck::new(&a.path, &cfg, every);
    let mut out = std::io::stdout().lock();
    let mut last = (u64::MAX, None, None);
    // Bounded by the harness: ends when stdin closes (or stdout does).
    loop {
        let u = live.poll();
        let now = (u.events, u.error.clone(), u.whole_stopped_at_events);
        if !u.new.is_empty() || now != last {
            last = now;
            let sent = writeln!(out, "{}", serde_json::to_string(&u)?).and_then(|()| out.flush());
            if sent.is_err() {
                break;
            }
        }
        if !sleep_unless(&stop, FOLLOW_EVERY) {
            break;
        }
    }
    Ok(history::ExitCode::Valid)
}

/// Starts `lockpick live-check` on `path`, at a lower priority than the service and the clients
/// it watches, ended with the harness even if the harness is killed.
fn spawn_live_check(
    path: &Path,
    cfg: &checkers::CheckConfig,
    every: Duration,
) -> std::io::Result<std::process::Child> {
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
        .args(["--every-ms", &every.as_millis().to_string()])
        .args(["--drift", &cfg.drift.to_string()])
        .args(["--liveness-grace-ns", &cfg.liveness_grace_ns.to_string()])
        .args(["--min-grants", &cfg.min_grants.to_string()]);
    if let Some(r) = cfg.monotonic_clock_reach_ns {
        cmd.args(["--monotonic-clock-reach-ns", &r.to_string()]);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    // SAFETY: between fork and exec only setpriority and prctl, plain system calls, run.
    unsafe {
        cmd.pre_exec(|| {
            // The check yields to the service and the clients: it must not change what it
            // watches. A failure leaves the default priority.
            libc::setpriority(libc::PRIO_PROCESS, 0, 10);
            // Ended with the harness, whatever ends it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A history with a double grant written a stretch at a time, polled after each: the
    /// streaming rules prove it while the file grows with no whole-prefix check at all (as past
    /// the limit), read in steps far shorter than the stretches.
    #[test]
    fn past_the_whole_checks_limit_the_streaming_rules_prove_a_double_grant_as_written() {
        use checkers::gen::{correct_history, GenParams};
        use checkers::inject::{inject, InjectKind};
        let params = GenParams {
            clients: 4,
            locks: 2,
            events: 6_000,
            ..GenParams::default()
        };
        let mut ops = correct_history(3, &params);
        inject(&mut ops, InjectKind::named("double-grant"), 3);
        let text = jsonl(&ops);
        let stretches = 20;
        let (_dir, path, mut live, updates) =
            written_past_the_limit(&text, text.len() / stretches + 1);
        assert_eq!(live.whole_bytes, 0);
        let mut proven_at = None;
        for (i, u) in updates.iter().enumerate() {
            assert!(u.whole_stopped_at_events.is_some());
            if let Some(v) = u.new.iter().find(|v| v.kind.as_str() == "double-grant") {
                proven_at.get_or_insert((i, v.clone()));
                assert!(u.violations >= 1);
            }
        }
        let (at, v) = proven_at.expect("the double grant was never proven");
        assert!(
            at + 1 < stretches,
            "proven only once all was written ({at})"
        );
        let cfg = checkers::CheckConfig::default();
        let (whole, _) = checkers::check_path(&path, &cfg).unwrap();
        assert!(
            (whole.violations.iter()).any(|w| w.kind == v.kind && w.lock == v.lock),
            "{v:?} is not the whole history's"
        );
        // Rewritten shorter: followed again from its start.
        let half = &text[..text.len() / 2];
        std::fs::write(&path, half).unwrap();
        let u = live.poll();
        let lines = half.iter().filter(|&&b| b == b'\n').count() as u64;
        assert!(
            u.events > 0 && u.events <= lines,
            "{} events of {lines}",
            u.events
        );
    }

    /// Three grants without a token that only the search of the orders proves wrong (no two
    /// definite holds overlap, nothing orders any pair): past the whole checks' limit the live
    /// check proves it as written, and the whole check lists it too.
    #[test]
    fn past_the_whole_checks_limit_the_search_proves_a_tokenless_double_grant_as_written() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("checkers/tests/fixtures/search-three-tokenless-double-grant.jsonl");
        let mut text = std::fs::read_to_string(fixture).unwrap();
        // Then another lock taken and given back every 100 ms for three seconds: time moves on
        // past the grants' reach and the reader's horizon.
        let index = text.lines().count();
        text.push_str(&lock_cycles(index, 0, 100_000_000, 30, (9, "L1")));
        let (_dir, path, _, updates) = written_past_the_limit(text.as_bytes(), 600);
        let proven: Vec<Violation> = updates.into_iter().flat_map(|u| u.new).collect();
        let cfg = checkers::CheckConfig::default();
        let v = (proven.iter())
            .find(|v| v.kind.as_str() == "double-grant")
            .unwrap_or_else(|| panic!("no double grant proven: {proven:?}"));
        assert_eq!(v.lock.as_deref(), Some("L0"));
        assert!(v.explanation.contains("no order of L0's grants"), "{v:?}");
        let (whole, _) = checkers::check_path(&path, &cfg).unwrap();
        assert!(
            (whole.violations.iter()).any(|w| w.kind == v.kind && w.lock == v.lock),
            "{v:?} is not the whole history's"
        );
    }

    /// A bank run with two clients that wait for each other's lock past every deadline:
    /// past the whole checks' limit the wait-for sweep proves the deadlock as the file is
    /// written (counted, never a reason to stop), and the whole check lists it too.
    #[test]
    fn past_the_whole_checks_limit_a_deadlock_is_proven_as_written() {
        use checkers::inject::{inject, InjectKind};
        let mut ops = bank_run(5, 3_000, 300);
        inject(&mut ops, InjectKind::named("deadlock"), 5);
        let mut text = jsonl(&ops);
        // Then another lock taken and given back every second for two minutes and more: the
        // deadlocked grants (leases of a minute) are read past their reach.
        let end_ns = ops.last().map_or(0, |o| o.time_ns);
        let after = lock_cycles(ops.len(), end_ns, 1_000_000_000, 130, (99, "Lafter"));
        text.extend_from_slice(after.as_bytes());
        let (_dir, path, _, updates) = written_past_the_limit(&text, text.len() / 20 + 1);
        let cfg = checkers::CheckConfig::default();
        let mut found = None;
        for u in &updates {
            if let Some(v) = u.new.iter().find(|v| v.kind.as_str() == "deadlock") {
                assert!(u.violations >= 1, "a deadlock shown is counted");
                found.get_or_insert(v.clone());
            }
        }
        let v = found.expect("the deadlock was never proven");
        let (whole, _) = checkers::check_path(&path, &cfg).unwrap();
        assert!(
            (whole.violations.iter()).any(|w| w.kind == v.kind && w.ops == v.ops),
            "{v:?} is not the whole history's: {:?}",
            whole.violations
        );
    }

    /// A bank run where one read, a third of the way in, says the version before the one it
    /// returned (its section read what a section that ended before it had overwritten): past
    /// the whole checks' limit the critical sections' rounds prove the cycle while most of the
    /// file is still to be written, and the whole check lists it too.
    #[test]
    fn past_the_whole_checks_limit_a_non_serializable_is_proven_as_written() {
        let mut ops = bank_run(3, 12_000, 10_000);
        let third = ops.len() / 3;
        assert!(checkers::gen_bank::stale_read_before(&mut ops[..third]));
        let text = jsonl(&ops);
        let stretches = 20;
        let (_dir, path, _, updates) = written_past_the_limit(&text, text.len() / stretches + 1);
        let proven_at = (updates.iter().enumerate()).find_map(|(at, u)| {
            (u.new.iter().find(|v| v.kind.as_str() == "non-serializable")).map(|v| (at, v.clone()))
        });
        let (at, v) = proven_at.expect("the cycle was never proven");
        assert!(
            at < stretches / 2,
            "proven only after {at} of {stretches} stretches"
        );
        let (whole, _) = checkers::check_path(&path, &checkers::CheckConfig::default()).unwrap();
        assert!(
            (whole.violations.iter()).any(|w| w.kind == v.kind && w.ops == v.ops),
            "{v:?} is not the whole history's: {:?}",
            whole.violations
        );
    }

    /// A generated bank run of four clients over three accounts: `events`, leases of `ttl_ms`.
    fn bank_run(seed: u64, events: usize, ttl_ms: u64) -> Vec<history::Op> {
        let params = checkers::gen_bank::BankParams {
            clients: 4,
            accounts: 3,
            events,
            ttl_ms,
            partial_pct: 0,
        };
        let mut ops = Vec::new();
        checkers::gen_bank::bank_history_into(seed, &params, &mut |chunk| {
            ops.extend_from_slice(chunk)
        });
        ops
    }

    /// `ops` as history lines.
    fn jsonl(ops: &[history::Op]) -> Vec<u8> {
        let mut text = Vec::new();
        for op in ops {
            serde_json::to_writer(&mut text, op).unwrap();
            text.push(b'\n');
        }
        text
    }

    /// `text` written to a fresh file `stretch` bytes at a time, with a live check that runs
    /// no whole check (as past its limit) polled after each, reading in 4 KiB steps: every
    /// poll's update (none with an error), the check, and the file in its directory.
    fn written_past_the_limit(
        text: &[u8],
        stretch: usize,
    ) -> (tempfile::TempDir, PathBuf, LiveCheck, Vec<Update>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let mut live = LiveCheck::new(&path, &checkers::CheckConfig::default(), Duration::ZERO);
        (live.whole_bytes_max, live.step_bytes) = (0, 4096);
        let mut file = std::fs::File::create(&path).unwrap();
        let updates = (text.chunks(stretch))
            .map(|s| {
                std::io::Write::write_all(&mut file, s).unwrap();
                let u = live.poll();
                assert_eq!(u.error, None);
                u
            })
            .collect();
        (dir, path, live, updates)
    }

    /// `count` times, every `every_ns` from `from_ns` on, process `p` takes lock `lock` and
    /// gives it back: lines numbered from `index`, time moving on.
    fn lock_cycles(
        index: usize,
        from_ns: u64,
        every_ns: u64,
        count: u64,
        (p, lock): (u64, &str),
    ) -> String {
        let steps = [
            (0, "invoke", "acquire"),
            (1, "ok", "acquire"),
            (2, "invoke", "release"),
            (3, "ok", "release"),
        ];
        let mut out = String::new();
        for i in 1..=count {
            for (k, (dt, kind, f)) in steps.iter().enumerate() {
                let n = index + 4 * (i as usize - 1) + k;
                out.push_str(&format!(
                    "{{\"index\":{n},\"time_ns\":{},\"process\":{p},\"type\":\"{kind}\",\"f\":\"{f}\",\"lock\":\"{lock}\",\"value\":{{\"ttl_ms\":10}}}}\n",
                    from_ns + i * every_ns + dt * 1_000_000
                ));
            }
        }
        out
    }

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

    /// A cut already found is where the next search starts: only what follows it is read.
    #[test]
    fn the_cut_after_one_found_reads_only_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let lens = |times: &[u64]| times.iter().map(|&t| line(t).len() as u64).sum::<u64>();
        let text: String = [1, 2, 3, 3].iter().map(|&t| line(t)).collect();
        std::fs::write(&path, &text).unwrap();
        let cut = time_closed_len(&path, 0).unwrap();
        assert_eq!(cut, lens(&[1, 2]));
        // Nothing new closed: the same cut.
        assert_eq!(time_closed_len(&path, cut).unwrap(), cut);
        std::fs::write(&path, format!("{text}{}", line(4))).unwrap();
        assert_eq!(time_closed_len(&path, cut).unwrap(), lens(&[1, 2, 3, 3]));
        // Nothing past the cut at all, or a file now shorter than it.
        assert_eq!(
            time_closed_len(&path, lens(&[1, 2, 3, 3, 4])).unwrap(),
            lens(&[1, 2, 3, 3, 4])
        );
        std::fs::write(&path, line(1)).unwrap();
        assert_eq!(time_closed_len(&path, cut).unwrap(), lens(&[1]));
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
