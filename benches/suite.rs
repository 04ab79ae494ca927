//! The `lockpick test` campaign of BENCHMARKS.md (issue 19): the suite given nothing but a
//! target, on several seeds. First every known bug (each unsafe mode of the embedded lockd,
//! each broken store fence, a real Redis in its unsafe forms and Debian's etcd with every
//! fault where installed, each `--bug` of tests/services/flawed_lockd.py): how many seeds
//! found it, the median suite time to the first violation, the kinds. Then the correct
//! targets (the embedded lockd, tests/services/minimal_lockd.py, etcd and Redis under the
//! faults they are built to survive): how many seeds were `valid`, the median suite time, and
//! what was left unexercised when not.
//!
//! Each suite is `lockpick test --no-shrink --seed S --out <tmp> TARGET_FLAGS`: no workload
//! or lease flag, since the point is that the suite finds each bug on its own (a correct
//! target's row may name the faults it is judged under).
//!
//! Run: `cargo bench --bench suite` (5 seeds per bug, 3 per correct target, 2 suites at a
//! time: well over an hour on 2 cores), or `cargo bench --bench suite -- SEEDS JOBS
//! [bugs|correct] [only=SUBSTR] [keep] [write]`: SEEDS per bug (the correct targets take at
//! most [`CORRECT_SEEDS_MAX`]), `bugs` or `correct` runs only that table, `only=SUBSTR` only
//! the targets whose label contains SUBSTR (may be repeated), `keep` leaves the suites'
//! directories in place, and `write` rewrites the `suite-bench` section of BENCHMARKS.md
//! (whole campaign only). A suite that outlives [`LIMIT`] is stopped, then its process group
//! is killed.

#[path = "../tests/common/mod.rs"]
mod common;

use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lockpick");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One suite's hard limit. A bug's suite usually stops within a few minutes and a correct
/// target's full plan fits the default 6 min budget; past this something hangs.
const LIMIT: Duration = Duration::from_secs(15 * 60);
/// After the limit the suite gets SIGINT, its own stop (it ends the running scenario, which
/// stops its nodes); this long later its process group is killed.
const GRACE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);

const BEGIN: &str = "<!-- suite-bench:begin -->";
const END: &str = "<!-- suite-bench:end -->";
const DOC: &str = "BENCHMARKS.md";

/// The embedded lockd's unsafe modes, each with the topology it needs to exist at all
/// (split-brain and no-tiebreak are multi-node bugs, and no-tiebreak exists only in the
/// timestamp order). no-wait-timeout is met by the suite's bank contention cell (transfers
/// holding one account's lock while they wait for the other's).
const UNSAFE: &[(&str, &[&str])] = &[
    ("racy", &[]),
    ("reuse-tokens", &[]),
    ("no-ttl", &[]),
    ("skip-token-check", &[]),
    ("wall-clock", &[]),
    ("renew-grace", &[]),
    ("unchecked-release", &[]),
    ("volatile", &[]),
    ("no-wait-timeout", &[]),
    ("split-brain", &["--nodes", "3"]),
    (
        "no-tiebreak",
        &["--nodes", "3", "--lock-order", "timestamp"],
    ),
    ("ring-regenerate", &["--nodes", "3", "--lock-order", "ring"]),
];

/// The store's broken fences (`all` is the correct one).
const FENCES: &[&str] = &[
    "none",
    "write",
    "off-by-one",
    "check-then-put",
    "one-unfenced",
];

/// flawed_lockd.py's bugs, as its docstring lists them.
const FLAWED: &[&str] = &[
    "wall-clock-expiry",
    "volatile-tokens",
    "no-recovery",
    "renew-after-grant",
    "release-any",
    "grant-expired-wait",
    "clock-tokens",
    "ttl-unit",
];

/// A target: its label in the tables (what `only=` matches) and the flags that make it.
struct Target {
    label: String,
    args: Vec<String>,
}

impl Target {
    fn new(label: impl Into<String>, args: &[&str]) -> Target {
        Target {
            label: label.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// `--node-cmd` for one of tests/services' Python services, by absolute path (the nodes run
/// in their own directories).
fn service_cmd(script: &str, extra: &str) -> String {
    let path = Path::new(ROOT).join("tests/services").join(script);
    format!(
        "python3 '{}' --host {{host}} --port {{port}} --data-dir '{{data_dir}}'{extra}",
        path.display()
    )
}

fn bug_targets(python: bool, etcd: bool) -> Vec<Target> {
    let mut out = Vec::new();
    for (mode, extra) in UNSAFE {
        let mut args: Vec<&str> = extra.to_vec();
        args.extend(["--unsafe", mode]);
        out.push(Target::new(format!("lockd {}", args.join(" ")), &args));
    }
    // The correct token ring is the bug under kills: the member killed while it holds the
    // token takes it along, and nobody is granted anything again.
    out.push(Target::new(
        "lockd --nodes 3 --lock-order ring (a kill loses the token)",
        &["--nodes", "3", "--lock-order", "ring"],
    ));
    for fence in FENCES {
        out.push(Target::new(
            format!("store --store-fence {fence}"),
            &["--store-fence", fence],
        ));
    }
    if have("redis-server", "--version") {
        // A real Redis is the bug: no persistence forgets the lock on a restart; the counter
        // token restarts with it; expiry in unix time jumps with the wall clock, so even an
        // fsync on every write is not safe under the defaults' clock faults.
        for (label, opts) in [
            ("redis (no options)", None),
            ("redis fence=counter", Some("fence=counter")),
            (
                "redis persistence=aof-always",
                Some("persistence=aof-always"),
            ),
        ] {
            let mut args = vec!["--adapter", "redis"];
            args.extend(opts.map(|o| ["--adapter-opt", o]).into_iter().flatten());
            out.push(Target::new(label, &args));
        }
        // Redlock as published, over 5 masters without persistence: the rolling kill leaves
        // the holder's grant on a minority that remembers it, and another client wins the rest.
        out.push(Target::new(
            "redlock over 5 (no options)",
            &["--adapter", "redlock", "--nodes", "5"],
        ));
    }
    if have("redis-server", "--version") {
        // Redis under Sentinel, three boxes: a master paused past down-after-milliseconds is
        // replaced, and the clients still polling it (their sentinel named it before the
        // failover) are granted there while the promoted replica grants the same lock; a
        // master restarted without persistence comes back empty.
        out.push(Target::new(
            "redis-sentinel (no options)",
            &["--adapter", "redis-sentinel"],
        ));
        // The counter token lives on the master too: the promoted replica's counter lags.
        out.push(Target::new(
            "redis-sentinel fence=counter",
            &[
                "--adapter",
                "redis-sentinel",
                "--adapter-opt",
                "fence=counter",
            ],
        ));
    }
    if Path::new(POSTGRES_BIN_ROOT).is_dir() {
        // A session advisory lock: the server ends a quiet session (idle_session_timeout, a
        // kill) and grants the lock to another while the first client, told nothing, still
        // believes it holds it.
        out.push(Target::new(
            "postgres (form=session)",
            &["--adapter", "postgres"],
        ));
    }
    if Path::new(ZOOKEEPER_JAR).is_file() {
        // The lock recipe: a holder stalled past its session timeout loses its node, and
        // another client is granted before the stalled one can hear of it (czxid fencing
        // keeps the store safe; the belief is what breaks).
        out.push(Target::new(
            "zookeeper (the lock recipe)",
            &["--adapter", "zookeeper"],
        ));
    }
    if etcd {
        // Debian's etcd 3.4 with every fault: lock/lock answers a waiter whose own key went
        // with its lease (a stalled waiter, or a paused server whose leases lapsed meanwhile),
        // which is etcd-io/etcd#11456, a bug of etcd's own.
        out.push(Target::new(ETCD, &["--adapter", "etcd"]));
    }
    if python {
        for bug in FLAWED {
            let cmd = service_cmd("flawed_lockd.py", &format!(" --bug {bug}"));
            out.push(Target::new(
                format!("flawed_lockd.py --bug {bug}"),
                &["--node-cmd", &cmd],
            ));
        }
    }
    out
}

const ETCD: &str = "etcd (--adapter etcd)";
/// Where Debian's postgresql package puts its programs (off PATH; lockpick looks there).
const POSTGRES_BIN_ROOT: &str = "/usr/lib/postgresql";
/// Debian's zookeeper package's server jar, which --adapter zookeeper starts.
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
const ETCD_SCOPED: &str = "etcd, --nemesis kill,client-pause,clock, holder stalls only";
/// The holder stalls: every client-pause aim but `waiter`, with every wake-up op.
const HOLDER_STALLS: &str = "boundary,next-grant,long,renew,write,release,read";
/// The correct targets run on at most this many seeds (issue 19: valid on 3 seeds each); each
/// suite runs every cell, some 3 min, against the bugs' usual stop within a minute.
const CORRECT_SEEDS_MAX: u64 = 3;

fn correct_targets(python: bool, etcd: bool) -> Vec<Target> {
    let mut out = vec![
        Target::new("lockd (no flags)", &[]),
        // The ring survives what does not kill the member holding its token.
        Target::new(
            "lockd --nodes 3 --lock-order ring, --nemesis pause,partition,client-pause,clock",
            &[
                "--nodes",
                "3",
                "--lock-order",
                "ring",
                "--nemesis",
                "pause,partition,client-pause,clock",
            ],
        ),
    ];
    if python {
        let cmd = service_cmd("minimal_lockd.py", "");
        out.push(Target::new("minimal_lockd.py", &["--node-cmd", &cmd]));
    }
    if etcd {
        // What etcd's lock survives: restarts, clock steps and holders that stall past their
        // lease (the revision fences them). A lease lapsing under a waiter (its own stall, or
        // a server paused past the ttl) is etcd#11456, the bugs table's etcd row.
        out.push(Target::new(
            ETCD_SCOPED,
            &[
                "--adapter",
                "etcd",
                "--nemesis",
                "kill,client-pause,clock",
                "--client-faults",
                HOLDER_STALLS,
            ],
        ));
    }
    if Path::new(POSTGRES_BIN_ROOT).is_dir() {
        // The safe form: the lock is the transaction's and the counter's write commits inside
        // it, so a holder whose session was ended cannot write.
        out.push(Target::new(
            "postgres form=xact",
            &["--adapter", "postgres", "--adapter-opt", "form=xact"],
        ));
    }
    if have("redis-server", "--version") {
        // Safe for what it promises: a lock that survives kills, judged without clock faults.
        out.push(Target::new(
            "redis persistence=aof-always, --nemesis pause,kill,client-pause",
            &[
                "--adapter",
                "redis",
                "--adapter-opt",
                "persistence=aof-always",
                "--nemesis",
                "pause,kill,client-pause",
            ],
        ));
        // The same promise over 5 masters: every member remembers its keys across a restart.
        out.push(Target::new(
            "redlock over 5 persistence=aof-always, --nemesis pause,kill,client-pause",
            &[
                "--adapter",
                "redlock",
                "--nodes",
                "5",
                "--adapter-opt",
                "persistence=aof-always",
                "--nemesis",
                "pause,kill,client-pause",
            ],
        ));
    }
    out
}

fn have(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What one suite ended with.
struct Outcome {
    seed: u64,
    /// `lockpick test`'s exit code; `None` when it was stopped past the limit or died of a
    /// signal.
    code: Option<i32>,
    timed_out: bool,
    /// Its suite.json (`Null` when it wrote none).
    suite: Value,
    /// What went wrong besides the verdict (no suite.json, an exit code that disagrees with
    /// it, processes left behind).
    notes: Vec<String>,
}

impl Outcome {
    /// suite.json's `valid`, as a word. It is written as results.json writes it (`true`,
    /// `false` or `null`, unknown); the words themselves are taken too.
    fn field(&self) -> Option<&str> {
        match self.suite.get("valid")? {
            Value::Bool(true) => Some("valid"),
            Value::Bool(false) => Some("invalid"),
            Value::Null => Some("unknown"),
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// `invalid`, `valid`, `unknown`, `error` (exit 3 or no suite.json) or `timed out`.
    fn verdict(&self) -> &str {
        if self.timed_out {
            return "timed out";
        }
        match (self.code, self.field()) {
            (Some(3), _) | (_, None) => "error",
            (_, Some(v)) => v,
        }
    }

    /// The bug was found: exit 1 and an invalid verdict, as the suite's contract has it.
    fn found(&self) -> bool {
        self.code == Some(1) && self.field() == Some("invalid")
    }

    fn valid(&self) -> bool {
        self.code == Some(0) && self.field() == Some("valid")
    }

    /// The kinds of the scenarios that failed the suite, sorted and deduplicated. A scenario
    /// whose violations the policy did not count (verdict `valid`) is left out, as the suite
    /// leaves it out of its verdict.
    fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self.suite["scenarios"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["verdict"] == "invalid")
            .flat_map(|s| s["violations"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        k.sort();
        k.dedup();
        k
    }

    fn first_violation_s(&self) -> Option<f64> {
        self.suite["first_violation_ms"]
            .as_u64()
            .map(|ms| ms as f64 / 1000.0)
    }

    fn elapsed_s(&self) -> Option<f64> {
        self.suite["elapsed_ms"]
            .as_u64()
            .map(|ms| ms as f64 / 1000.0)
    }

    fn not_exercised(&self) -> Vec<String> {
        self.suite["not_exercised"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }

    fn why(&self) -> String {
        let why = self.suite["why"].as_str().unwrap_or("");
        let mut parts: Vec<String> = Vec::new();
        if !why.is_empty() {
            parts.push(why.to_string());
        }
        parts.extend(self.notes.iter().cloned());
        parts.join("; ")
    }
}

/// Whether `pid` has exited, without reaping it: while it is a zombie its pid, and so its
/// process group id, cannot be reused, so killing the group afterwards reaches only ours.
fn exited(pid: Pid) -> bool {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    !matches!(waitid(Id::Pid(pid), flags), Ok(WaitStatus::StillAlive))
}

/// The last non-empty line of a file, for a note when a suite wrote no verdict.
fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Runs one suite into `dir` (made here) and reads what it wrote. Never panics: a suite that
/// cannot start is an outcome of its own.
fn run_suite(t: &Target, seed: u64, dir: &Path) -> Outcome {
    let mut o = Outcome {
        seed,
        code: None,
        timed_out: false,
        suite: Value::Null,
        notes: Vec::new(),
    };
    let stdout_path = dir.join("stdout.txt");
    let stderr_path = dir.join("stderr.txt");
    let files = std::fs::create_dir_all(dir).and_then(|_| {
        Ok((
            std::fs::File::create(&stdout_path)?,
            std::fs::File::create(&stderr_path)?,
        ))
    });
    let (out, err) = match files {
        Ok(f) => f,
        Err(e) => {
            o.notes
                .push(format!("cannot prepare {}: {e}", dir.display()));
            return o;
        }
    };
    let mut cmd = Command::new(BIN);
    cmd.args(["test", "--no-shrink", "--seed", &seed.to_string(), "--out"])
        .arg(dir.join("runs"))
        .args(&t.args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Its own group, so the limit can take the suite down as a whole.
        .process_group(0);
    let parent = nix::unistd::getpid();
    // SAFETY: runs between fork and exec, so only async-signal-safe calls: two syscalls and an
    // io::Error made from an errno. The death signal takes the suite down (and, through its
    // own children's death signals, its scenarios and nodes) if this bench dies; it fires when
    // the forking thread ends, and this worker thread outlives the child: it reaps it below.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            if nix::unistd::getppid() != parent {
                return Err(nix::errno::Errno::ESRCH.into());
            }
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            o.notes.push(format!("cannot start {BIN}: {e}"));
            return o;
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    let started = Instant::now();
    let mut interrupted: Option<Instant> = None;
    // Bounded: by LIMIT, then GRACE after the interrupt, when the group is killed.
    while !exited(pid) {
        match interrupted {
            None if started.elapsed() > LIMIT => {
                o.timed_out = true;
                let _ = killpg(pid, Signal::SIGINT);
                interrupted = Some(Instant::now());
            }
            Some(at) if at.elapsed() > GRACE => {
                let _ = killpg(pid, Signal::SIGKILL);
                break;
            }
            _ => {}
        }
        std::thread::sleep(POLL);
    }
    // Not reaped yet, so the group is still ours: whatever the suite left in it goes too.
    let _ = killpg(pid, Signal::SIGKILL);
    match child.wait() {
        Ok(s) => o.code = s.code(),
        Err(e) => o.notes.push(format!("cannot wait for the suite: {e}")),
    }
    if o.timed_out {
        o.notes
            .push(format!("stopped past the {} s limit", LIMIT.as_secs()));
    }
    // The contract: the second line of stdout names the suite directory.
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let suite_dir = stdout
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("suite directory: "))
        .map(|d| PathBuf::from(d.trim()));
    match suite_dir {
        Some(d) => match std::fs::read_to_string(d.join("suite.json")) {
            Ok(text) => match serde_json::from_str(&text) {
                Ok(v) => o.suite = v,
                Err(e) => o.notes.push(format!("suite.json unreadable: {e}")),
            },
            Err(e) => o.notes.push(format!("no suite.json: {e}")),
        },
        None => o.notes.push(format!(
            "no `suite directory:` line (exit {:?}): {}",
            o.code,
            last_line(&stderr_path)
        )),
    }
    // Exit 1 = invalid, 0 = valid, 2 = unknown; 3 = error goes with any field.
    let agrees = match (o.code, o.field()) {
        (Some(1), Some(v)) => v == "invalid",
        (Some(0), Some(v)) => v == "valid",
        (Some(2), Some(v)) => v == "unknown",
        _ => true,
    };
    if !agrees {
        o.notes.push(format!(
            "exit {:?} but suite.json says {:?}",
            o.code,
            o.field()
        ));
    }
    // Nothing the suite started should outlive it; anything still naming its directory was
    // started by it (the directory is ours alone), so it is ended here, by pid. Processes that
    // got their death signal a moment ago may still be exiting: looked at again a second later.
    let dir_text = dir.display().to_string();
    if !common::processes_mentioning(&dir_text).is_empty() {
        std::thread::sleep(Duration::from_secs(1));
        let left = common::processes_mentioning(&dir_text);
        for (p, _) in &left {
            let _ = kill(Pid::from_raw(*p as i32), Signal::SIGKILL);
        }
        if !left.is_empty() {
            o.notes.push(format!(
                "{} process(es) outlived the suite, killed",
                left.len()
            ));
        }
    }
    o
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Some(v[v.len() / 2])
}

fn secs(s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{s:.1} s"))
}

/// `2 unknown, 1 timed out`: the verdicts of `runs`, counted.
fn verdict_counts(runs: &[&Outcome]) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for o in runs {
        *by.entry(o.verdict()).or_default() += 1;
    }
    by.iter()
        .map(|(v, n)| format!("{n} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Markdown table cells must not hold `|`.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn bugs_table(targets: &[Target], done: &[(usize, Outcome)]) -> String {
    let mut t = String::from(
        "| target | found | median time to first violation | violation kinds | when not found |\n\
         |---|---|---|---|---|\n",
    );
    for (i, target) in targets.iter().enumerate() {
        let runs: Vec<&Outcome> = done.iter().filter(|d| d.0 == i).map(|d| &d.1).collect();
        let found: Vec<&Outcome> = runs.iter().copied().filter(|o| o.found()).collect();
        let missed: Vec<&Outcome> = runs.iter().copied().filter(|o| !o.found()).collect();
        let mut kinds: Vec<String> = found.iter().flat_map(|o| o.kinds()).collect();
        kinds.sort();
        kinds.dedup();
        t.push_str(&format!(
            "| `{}` | {}/{} | {} | {} | {} |\n",
            target.label,
            found.len(),
            runs.len(),
            secs(median(
                found.iter().filter_map(|o| o.first_violation_s()).collect()
            )),
            if kinds.is_empty() {
                "-".into()
            } else {
                kinds.join(", ")
            },
            if missed.is_empty() {
                "-".into()
            } else {
                cell(&verdict_counts(&missed))
            },
        ));
    }
    t
}

fn correct_table(targets: &[Target], done: &[(usize, Outcome)]) -> String {
    let mut t = String::from(
        "| target | valid | median suite time | not exercised (unknown runs); other outcomes |\n\
         |---|---|---|---|\n",
    );
    for (i, target) in targets.iter().enumerate() {
        let runs: Vec<&Outcome> = done.iter().filter(|d| d.0 == i).map(|d| &d.1).collect();
        let valid = runs.iter().filter(|o| o.valid()).count();
        // Each cell left unexercised, with the number of unknown runs that left it.
        let mut cells: BTreeMap<String, usize> = BTreeMap::new();
        let mut unknown = 0;
        let mut others: Vec<String> = Vec::new();
        for o in &runs {
            match o.verdict() {
                "valid" => {}
                "unknown" => {
                    unknown += 1;
                    for c in o.not_exercised() {
                        *cells.entry(c).or_default() += 1;
                    }
                }
                "invalid" => {
                    others.push(format!("seed {} invalid: {}", o.seed, o.kinds().join(", ")))
                }
                v => others.push(format!("seed {} {v}: {}", o.seed, o.why())),
            }
        }
        let mut notes: Vec<String> = cells
            .iter()
            .map(|(c, n)| format!("{c} ({n} of {unknown})"))
            .collect();
        notes.extend(others);
        t.push_str(&format!(
            "| `{}` | {valid}/{} | {} | {} |\n",
            target.label,
            runs.len(),
            secs(median(runs.iter().filter_map(|o| o.elapsed_s()).collect())),
            if notes.is_empty() {
                "-".into()
            } else {
                cell(&notes.join("; "))
            },
        ));
    }
    t
}

/// Replaces what lies between the markers of BENCHMARKS.md with `body`.
fn write_section(body: &str) {
    let path = Path::new(ROOT).join(DOC);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else {
        panic!("{DOC}: no section markers ({BEGIN} ... {END})");
    };
    assert!(a < b, "{DOC}: {END} comes before {BEGIN}");
    let new = format!("{}{BEGIN}\n{body}{}", &text[..a], &text[b..]);
    std::fs::write(&path, new).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    eprintln!("wrote the tables into {DOC}");
}

struct Args {
    seeds: u64,
    jobs: usize,
    bugs: bool,
    correct: bool,
    only: Vec<String>,
    keep: bool,
    write: bool,
}

fn parse_args() -> Args {
    let mut nums: Vec<u64> = Vec::new();
    let mut a = Args {
        seeds: 5,
        jobs: 2,
        bugs: false,
        correct: false,
        only: Vec::new(),
        keep: false,
        write: false,
    };
    for arg in std::env::args().skip(1) {
        if let Ok(n) = arg.parse() {
            nums.push(n);
            continue;
        }
        match arg.as_str() {
            // `cargo bench` passes it.
            "--bench" => {}
            "bugs" => a.bugs = true,
            "correct" => a.correct = true,
            "keep" => a.keep = true,
            "write" => a.write = true,
            s if s.starts_with("only=") => a.only.push(s["only=".len()..].to_string()),
            other => {
                eprintln!(
                    "unknown argument {other:?}; expected: SEEDS JOBS [bugs|correct] \
                     [only=SUBSTR] [keep] [write]"
                );
                std::process::exit(2);
            }
        }
    }
    if let Some(&s) = nums.first() {
        a.seeds = s.max(1);
    }
    if let Some(&j) = nums.get(1) {
        a.jobs = j.max(1) as usize;
    }
    // Neither named: both tables.
    if !a.bugs && !a.correct {
        a.bugs = true;
        a.correct = true;
    }
    if a.write && (!a.bugs || !a.correct || !a.only.is_empty()) {
        eprintln!("`write` records the whole campaign: give it without bugs, correct or only=");
        std::process::exit(2);
    }
    a
}

fn main() {
    let args = parse_args();
    let python = have("python3", "--version");
    let etcd = have("etcd", "--version");
    let mut skipped: Vec<String> = Vec::new();
    if !python {
        skipped.push(
            "python3 not found: the flawed_lockd.py and minimal_lockd.py rows are left out".into(),
        );
    }
    let keep = |t: &Target| args.only.is_empty() || args.only.iter().any(|s| t.label.contains(s));
    // Said only where its row would have been in the table.
    if !etcd && (keep(&Target::new(ETCD, &[])) || keep(&Target::new(ETCD_SCOPED, &[]))) {
        skipped.push("etcd not installed (`etcd --version` failed): its row is left out".into());
    }
    let bugs: Vec<Target> = if args.bugs {
        bug_targets(python, etcd)
    } else {
        Vec::new()
    };
    let correct: Vec<Target> = if args.correct {
        correct_targets(python, etcd)
    } else {
        Vec::new()
    };
    let bugs: Vec<Target> = bugs.into_iter().filter(|t| keep(t)).collect();
    let correct: Vec<Target> = correct.into_iter().filter(|t| keep(t)).collect();
    // One index over both lists: bugs first, then the correct targets.
    let n_bugs = bugs.len();
    let all: Arc<Vec<Target>> = Arc::new(bugs.into_iter().chain(correct).collect());
    if all.is_empty() {
        eprintln!("no target left by the filters");
        std::process::exit(2);
    }
    // Correct targets run every cell and take longest: started first, so the slow suites do
    // not trail at the end on one worker.
    let correct_seeds = args.seeds.min(CORRECT_SEEDS_MAX);
    let mut order: Vec<(usize, u64)> = (n_bugs..all.len())
        .flat_map(|i| (1..=correct_seeds).map(move |seed| (i, seed)))
        .chain((0..n_bugs).flat_map(|i| (1..=args.seeds).map(move |seed| (i, seed))))
        .collect();
    // Workers pop from the end.
    order.reverse();
    let total = order.len();
    eprintln!(
        "{total} suite(s) ({n_bugs} bug target(s) x {} seed(s), {} correct x {correct_seeds}), \
         {} at a time, {} min limit each",
        args.seeds,
        all.len() - n_bugs,
        args.jobs,
        LIMIT.as_secs() / 60
    );
    let tmp = tempfile::Builder::new()
        .prefix("lockpick-suite-bench-")
        .tempdir()
        .expect("a temporary directory");
    let queue = Arc::new(Mutex::new(order));
    let done: Arc<Mutex<Vec<(usize, Outcome)>>> = Arc::default();
    let began = Instant::now();
    let workers: Vec<_> = (0..args.jobs.min(total))
        .map(|w| {
            let queue = queue.clone();
            let done = done.clone();
            let all = all.clone();
            let base = tmp.path().to_path_buf();
            let keep_dirs = args.keep;
            std::thread::spawn(move || {
                // Bounded by the queue's length.
                loop {
                    let Some((i, seed)) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let target = &all[i];
                    let label = &target.label;
                    let dir = base.join(format!("t{i}-s{seed}"));
                    let o = run_suite(target, seed, &dir);
                    let mut d = done.lock().unwrap();
                    eprintln!(
                        "[{}/{total}] w{w} {label} seed {seed}: {} ({}, exit {:?}){}{}",
                        d.len() + 1,
                        o.verdict(),
                        secs(o.elapsed_s()),
                        o.code,
                        o.first_violation_s()
                            .map_or(String::new(), |s| format!(", first violation at {s:.1} s")),
                        {
                            let k = o.kinds();
                            let why = o.why();
                            match (k.is_empty(), why.is_empty()) {
                                (false, _) => format!(": {}", k.join(", ")),
                                (true, false) => format!(": {why}"),
                                _ => String::new(),
                            }
                        }
                    );
                    d.push((i, o));
                    drop(d);
                    if !keep_dirs {
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker thread");
    }
    let mut done = std::mem::take(&mut *done.lock().unwrap());
    done.sort_by_key(|d| (d.0, d.1.seed));
    eprintln!(
        "all done in {:.1} min",
        began.elapsed().as_secs_f64() / 60.0
    );
    let mut out = String::new();
    if n_bugs > 0 {
        out.push_str(&bugs_table(&all[..n_bugs], &done));
    }
    if all.len() > n_bugs {
        if !out.is_empty() {
            out.push('\n');
        }
        let shifted: Vec<(usize, Outcome)> = done
            .into_iter()
            .filter(|d| d.0 >= n_bugs)
            .map(|(i, o)| (i - n_bugs, o))
            .collect();
        out.push_str(&correct_table(&all[n_bugs..], &shifted));
    }
    for s in &skipped {
        out.push_str(&format!("\n{s}.\n"));
    }
    print!("{out}");
    if args.write {
        let date = chrono::Utc::now().format("%Y-%m-%d");
        let body = format!(
            "Measured {date} on the project VM (2 cores, shared: other sessions' builds and \
             tests ran), release build, seeds 1-{} for each bug and 1-{} for each correct \
             target, {} suites at a time, {} min limit each:\n\n\
             ```sh\ncargo bench --bench suite -- {} {} write\n```\n\n{out}",
            args.seeds,
            args.seeds.min(CORRECT_SEEDS_MAX),
            args.jobs,
            LIMIT.as_secs() / 60,
            args.seeds,
            args.jobs
        );
        write_section(&body);
    }
    if args.keep {
        let path = tmp.keep();
        eprintln!("kept the suites' directories in {}", path.display());
    }
}
