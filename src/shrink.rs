//! `lockpick shrink RUN_DIR`: from a failing run, the smallest schedule that still fails with
//! the same violation kind. Every candidate is a real run: this binary rerun as a child
//! (`lockpick run --config RUN_DIR/config.toml --schedule CANDIDATE --duration D --out DIR`),
//! so shrinking works for any target a run can start. Timing is not deterministic, so a
//! candidate runs up to K times and is kept if the kind recurs in at least one.
//!
//! Order: the schedule without any fault first (a bug that needs none), then delta debugging
//! over the fault list (ddmin: halves, then complements, then finer chunks), then each kept
//! fault's length halved while it still fails, then the run's duration cut to just after the
//! last fault plus a quiet period. A candidate's run ends a quiet period after its last fault
//! (never later than the run it shrinks), which is what keeps most candidates short.

mod search;

use crate::cli::ShrinkArgs;
use anyhow::{bail, Context, Result};
use history::{layout, ExitCode, ViolationKind};
use nemesis::oneshot::{run_to_end, Ended};
use nemesis::schedule::{PlannedFault, Schedule, SCHEDULE_FILE};
use serde::Deserialize as _;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// No fault is shortened below this.
const LENGTH_MIN_MS: u64 = 50;
/// A run without faults is not cut below this.
const DURATION_MIN_MS: u64 = 2_000;

/// The smallest failing schedule found so far, with the run that proved it.
#[derive(Clone)]
struct Best {
    schedule: Schedule,
    duration_ms: u64,
    run_dir: PathBuf,
    /// Which of its runs showed the kind (1: the first): past 1, it did not every time.
    try_no: u32,
}

enum Verdict {
    /// The kind recurred, on the given try; the run directory that shows it.
    Reproduced(PathBuf, u32),
    NotReproduced,
    /// The budget is spent or the user pressed Ctrl-C: stop, keep the best so far.
    Stopped(&'static str),
}

struct Shrinker {
    exe: PathBuf,
    config: PathBuf,
    dir: PathBuf,
    kind: String,
    tries: u32,
    started: Instant,
    budget: Duration,
    /// What a run costs beyond its duration (start-up, heal, quiet period, final reads,
    /// check, report): the largest seen so far.
    overhead: Duration,
    lease_max_ms: u64,
    candidates: usize,
    runs: usize,
    /// Candidates that had at least one run (the last may be stopped before its first).
    ran: usize,
    /// Candidates that failed as the run did, each kept as the new best: smaller, by the
    /// search's construction. None kept: the schedule is the failing run's.
    kept: usize,
    /// Fault lists already run without reproducing (delta debugging revisits some).
    failed: std::collections::HashSet<Vec<String>>,
    interrupted: Arc<AtomicBool>,
    best: Best,
}

pub fn shrink(a: ShrinkArgs) -> Result<ExitCode> {
    let run_dir = std::fs::canonicalize(&a.run_dir)
        .with_context(|| format!("{}: no such run directory", a.run_dir.display()))?;
    if !run_dir.join(layout::HISTORY_FILE).is_file() {
        // A suite's directory, or a folder of runs (`runs/latest` after a `lockpick test`):
        // say which run below it is meant.
        bail!("{}", crate::check_cmd::not_a_run_dir(&run_dir));
    }
    let results_path = run_dir.join(layout::RESULTS_FILE);
    let results = invalid_results(&run_dir, &results_path)?;
    let kind = pick_kind(a.kind.as_deref(), &results, &results_path)?;
    let schedule = read_schedule(&run_dir)?;
    // The run's own settings, read as `run --config` reads them.
    let config = run_dir.join(layout::CONFIG_FILE);
    let (duration_ms, lease_max_ms) = run_lengths(&config)?;
    let (schedule, duration_ms, cut) = as_it_ran(&results, schedule, duration_ms, lease_max_ms);
    if let Some(line) = cut {
        println!("{line}");
    }
    let budget = crate::config::duration("budget", &a.budget)?;
    if a.runs_per_candidate == 0 {
        bail!("--runs-per-candidate 0: expected at least 1");
    }
    let dir = shrink_dir(a.out.as_ref(), &run_dir)?;
    println!(
        "shrinking {}: {kind}, {} fault(s), {:.1} s run; up to {} run(s) per candidate, budget {}",
        run_dir.display(),
        schedule.faults.len(),
        duration_ms as f64 / 1000.0,
        a.runs_per_candidate,
        humantime::format_duration(budget),
    );
    println!("candidates and their runs: {}", dir.display());
    let interrupted = Arc::new(AtomicBool::new(false));
    let mut s = Shrinker {
        exe: std::env::current_exe().context("cannot locate the lockpick binary")?,
        config,
        dir,
        kind,
        tries: a.runs_per_candidate,
        started: Instant::now(),
        budget,
        overhead: Duration::from_secs(5),
        lease_max_ms,
        candidates: 0,
        runs: 0,
        ran: 0,
        kept: 0,
        failed: Default::default(),
        interrupted: interrupted.clone(),
        best: Best {
            schedule,
            duration_ms,
            run_dir: run_dir.clone(),
            // The failing run itself.
            try_no: 1,
        },
    };
    let rt = crate::runtime()?;
    let stopped = rt.block_on(async {
        let flag = interrupted.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("lockpick: stopping after this run; the best schedule so far is kept");
                flag.store(true, Ordering::SeqCst);
            }
        });
        s.search().await
    });
    s.finish(&run_dir, stopped)
}

/// The run's results, which must show a violation (`valid: false`).
fn invalid_results(run_dir: &Path, results_path: &Path) -> Result<serde_json::Value> {
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results_path)
            .with_context(|| format!("{}: cannot read it", results_path.display()))?,
    )
    .with_context(|| format!("{}: not JSON", results_path.display()))?;
    // Read as every reader of results.json reads a verdict (`true`, `false`, `null`, the words).
    let valid = history::Validity::deserialize(&results["valid"]);
    if !matches!(valid, Ok(history::Validity::Invalid)) {
        let verdict = valid.map_or_else(|_| results["valid"].to_string(), |v| v.to_string());
        bail!(
            "{}: the run is not invalid (it is {verdict}); shrink needs a run that found a violation",
            run_dir.display()
        );
    }
    Ok(results)
}

/// What a run that stopped on its violation (`--stop-on-violation`, the suite's default)
/// played: its history's length and a lease more, and the faults that started by then (the
/// later ones never did). Shrinking starts from that, not from the planned length, which the
/// suite's scenarios seldom reach: replaying the whole plan would spend the budget on time the
/// failing run never ran. A run that went its whole way is taken as it was planned. With the
/// schedule and length to shrink from, the line that says so when they are cut.
fn as_it_ran(
    results: &serde_json::Value,
    mut schedule: Schedule,
    duration_ms: u64,
    lease_max_ms: u64,
) -> (Schedule, u64, Option<String>) {
    if results["completeness"]["stopped_on"].is_null() {
        return (schedule, duration_ms, None);
    }
    let Some(ran_ns) = results["stats"]["duration_ns"].as_u64() else {
        return (schedule, duration_ms, None);
    };
    let ran_ms = ran_ns.div_ceil(1_000_000);
    // Whole tenths of a second read better on the replay line; no candidate is shorter than
    // DURATION_MIN_MS, so neither is the length it starts from (nor the one it states).
    let cut_ms = ((ran_ms + lease_max_ms).div_ceil(100) * 100).max(DURATION_MIN_MS);
    if cut_ms >= duration_ms {
        return (schedule, duration_ms, None);
    }
    let planned = schedule.faults.len();
    schedule.faults.retain(|f| f.at_ms < ran_ms);
    let line = format!(
        "the run stopped on its violation {:.1} s in: shrinking what it ran ({} of {planned} \
         fault(s), {:.1} s with a lease to spare) instead of its planned {:.1} s",
        ran_ms as f64 / 1000.0,
        schedule.faults.len(),
        cut_ms as f64 / 1000.0,
        duration_ms as f64 / 1000.0
    );
    (schedule, cut_ms, Some(line))
}

/// The violation kind to keep: `--kind` if the run found it, else the kind a stopped run
/// stopped on (`completeness.stopped_on`: the live check proved it first, though results.json,
/// which lists by checker, may list another kind first), else the first safety kind listed,
/// else the first kind.
fn pick_kind(
    asked: Option<&str>,
    results: &serde_json::Value,
    results_path: &Path,
) -> Result<String> {
    // Each kind the run found, once, in the order found.
    let mut found: Vec<String> = Vec::new();
    for v in results["violations"].as_array().into_iter().flatten() {
        if let Some(k) = v["kind"].as_str() {
            if !found.iter().any(|f| f == k) {
                found.push(k.to_string());
            }
        }
    }
    let class = |k: &str| {
        ViolationKind::ALL
            .into_iter()
            .find(|v| v.as_str() == k)
            .map(ViolationKind::class)
    };
    match asked {
        Some(k) => {
            if class(k).is_none() {
                bail!("--kind {k}: not a violation kind (see docs/checkers.md)");
            }
            if !found.iter().any(|f| f == k) {
                bail!(
                    "--kind {k}: {} has no {k} violation (it has {})",
                    results_path.display(),
                    found.join(", ")
                );
            }
            Ok(k.to_string())
        }
        None => {
            let stopped_on = results["completeness"]["stopped_on"].as_str();
            found
                .iter()
                .find(|k| Some(k.as_str()) == stopped_on)
                .or_else(|| {
                    found
                        .iter()
                        .find(|k| class(k) == Some(history::KindClass::Safety))
                })
                .or(found.first())
                .cloned()
                .with_context(|| format!("{}: no violation listed", results_path.display()))
        }
    }
}

/// The schedule the run played.
fn read_schedule(run_dir: &Path) -> Result<Schedule> {
    let schedule_path = run_dir.join(SCHEDULE_FILE);
    let text = std::fs::read_to_string(&schedule_path).with_context(|| {
        format!(
            "{}: cannot read it (runs recorded before schedules were written have none; rerun it)",
            schedule_path.display()
        )
    })?;
    Schedule::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", schedule_path.display()))
}

/// The run's duration and its longest lease (`--ttl`, or `--renew-ttl` if longer), in ms,
/// from its config file.
fn run_lengths(config: &Path) -> Result<(u64, u64)> {
    use crate::flags;
    let settings = crate::config_file::run_args(config)?;
    let ms = |flag: &str, v: &str| -> Result<u64> {
        Ok(crate::config::duration(flag, v)?.as_millis() as u64)
    };
    let given = |flag: &crate::flags::Flag| ms(flag.name, settings.value(flag));
    let duration_ms = given(&flags::DURATION)?;
    let ttl_ms = given(&flags::TTL)?;
    let lease_max_ms = match settings.text(&flags::RENEW_TTL) {
        Some(_) => ttl_ms.max(given(&flags::RENEW_TTL)?),
        None => ttl_ms,
    };
    Ok((duration_ms, lease_max_ms))
}

/// The folder candidates and their runs go to (`--out`, else the run's first free
/// `shrink`, `shrink-2`, ...), made with its `candidates` and `logs`.
fn shrink_dir(out: Option<&PathBuf>, run_dir: &Path) -> Result<PathBuf> {
    let dir = match out {
        Some(d) => d.clone(),
        None => (1..1000)
            .map(|i| {
                run_dir.join(if i == 1 {
                    "shrink".into()
                } else {
                    format!("shrink-{i}")
                })
            })
            .find(|d| !d.exists())
            .context("no free shrink folder name")?,
    };
    for sub in ["candidates", "logs"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
    }
    Ok(std::fs::canonicalize(&dir)?)
}

impl Shrinker {
    /// One child run; the violation kinds it found (or what went wrong) and its directory.
    async fn run_once(
        &mut self,
        name: &str,
        schedule: &Path,
        duration_ms: u64,
        t: u32,
    ) -> (Vec<String>, Option<PathBuf>) {
        self.runs += 1;
        use crate::flags;
        let args: Vec<String> = [
            vec!["run".to_string()],
            flags::CONFIG.with(self.config.display()).to_vec(),
            flags::SCHEDULE.with(schedule.display()).to_vec(),
            flags::DURATION.with(format!("{duration_ms}ms")).to_vec(),
            flags::OUT.with(self.dir.display()).to_vec(),
            flags::NAME.with(name).to_vec(),
            // A candidate has shown what it is asked to once its first safety violation is
            // proven: the rest of its run would only spend the budget (a 30 s run's candidates
            // each took 30 s).
            vec![flags::STOP_ON_VIOLATION.to_string()],
        ]
        .concat();
        let log = self.dir.join("logs").join(format!("{name}-{t}.log"));
        let limit = Duration::from_millis(duration_ms * 2) + Duration::from_secs(120);
        let began = Instant::now();
        let flag = self.interrupted.clone();
        let ended = run_to_end(&self.exe, &args, &log, limit, move || {
            flag.load(Ordering::SeqCst)
        })
        .await;
        let spent = began.elapsed();
        self.overhead = self
            .overhead
            .max(spent.saturating_sub(Duration::from_millis(duration_ms)));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let run_dir = child_run_dir(&text);
        let code = match ended {
            Ok(Ended::Exited(c)) => c,
            Ok(other) => return (vec![format!("{other:?}").to_lowercase()], None),
            Err(e) => return (vec![format!("cannot run: {e}")], None),
        };
        kinds_found(run_dir, code, &text)
    }

    fn finish(&self, run_dir: &Path, stopped: Option<&'static str>) -> Result<ExitCode> {
        let b = &self.best;
        let minimal = self.dir.join("minimal.json");
        std::fs::write(&minimal, b.schedule.to_json())
            .with_context(|| format!("cannot write {}", minimal.display()))?;
        let replay = format!(
            "lockpick run --config {} --schedule {} --duration {}ms",
            run_dir.join(layout::CONFIG_FILE).display(),
            minimal.display(),
            b.duration_ms
        );
        let report = b.run_dir.join(layout::REPORT_FILE);
        let tried = Tried {
            ran: self.ran,
            kept: self.kept,
        };
        let not_shrunk = not_shrunk(tried, stopped, &b.schedule, b.duration_ms);
        println!();
        match (&not_shrunk, stopped) {
            // No smaller candidate failed: the schedule is the failing run's.
            (Some(why), _) => println!("not shrunk: {why}; the failing schedule as it ran:"),
            (None, Some(why)) => {
                println!("stopped early ({why}); the smallest failing schedule so far:")
            }
            (None, None) => println!("smallest failing schedule:"),
        }
        println!(
            "  {} fault(s), {:.1} s run, {}",
            b.schedule.faults.len(),
            b.duration_ms as f64 / 1000.0,
            self.kind
        );
        for f in &b.schedule.faults {
            println!("  {}", describe(f));
        }
        println!("  schedule: {}", minimal.display());
        println!("  run directory: {}", b.run_dir.display());
        println!("  report: {}", report.display());
        println!("  replay: {replay}");
        if b.try_no > 1 {
            println!(
                "  it failed on its run {} of up to {}, not on the ones before: a replay may need more than one run to fail",
                b.try_no, self.tries
            );
        }
        println!(
            "{} candidate(s), {} run(s) in {}",
            self.candidates,
            self.runs,
            humantime::format_duration(Duration::from_secs(self.started.elapsed().as_secs()))
        );
        let summary = serde_json::json!({
            "kind": self.kind,
            "faults": b.schedule.faults.iter().map(|f| f.id.clone()).collect::<Vec<_>>(),
            "duration_ms": b.duration_ms,
            "failed_on_run": b.try_no,
            "schedule": minimal,
            "run_dir": b.run_dir,
            "report": report,
            "replay": replay,
            "candidates": self.candidates,
            "runs": self.runs,
            "shrunk": self.kept > 0,
            "not_shrunk": not_shrunk,
            "elapsed_ms": self.started.elapsed().as_millis() as u64,
            "stopped": stopped,
        });
        let path = self.dir.join("shrink.json");
        std::fs::write(&path, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(ExitCode::Valid)
    }
}

/// What a shrink tried: the candidates that ran, and how many of them failed and were kept.
#[derive(Debug, Clone, Copy)]
struct Tried {
    ran: usize,
    kept: usize,
}

/// Why a shrink that kept no candidate kept the failing run's `schedule` and `duration_ms`,
/// in words: none ran (what stopped it, or that there was nothing to try), or none that ran
/// failed (before the search stopped, or all it had to try). `None` once a candidate was kept.
fn not_shrunk(
    tried: Tried,
    stopped: Option<&str>,
    schedule: &Schedule,
    duration_ms: u64,
) -> Option<String> {
    if tried.kept > 0 {
        return None;
    }
    if tried.ran > 0 {
        let n = tried.ran;
        return Some(match stopped {
            Some(why) => format!(
                "none of the {n} smaller candidate(s) tried failed before the search stopped \
                 ({why})"
            ),
            None => format!(
                "none of the {n} smaller candidate(s) failed: the failing schedule is minimal"
            ),
        });
    }
    Some(match stopped {
        Some(why) => format!("no candidate ran ({why})"),
        // The search tries the schedule without faults first whenever it has any, and cuts a
        // run without faults only while it is longer than DURATION_MIN_MS.
        None if schedule.faults.is_empty() && duration_ms <= DURATION_MIN_MS => format!(
            "already minimal: no faults to remove, and its {:.1} s run is no longer than the \
             shortest a shrink tries ({:.1} s)",
            duration_ms as f64 / 1000.0,
            DURATION_MIN_MS as f64 / 1000.0
        ),
        None => "no candidate was tried".into(),
    })
}

/// The run directory a child `lockpick run` printed (its `run directory: PATH` line) in its
/// log `text`: where its results are. Shared by `shrink` and `test`, which both rerun it.
pub(crate) fn child_run_dir(text: &str) -> Option<PathBuf> {
    text.lines()
        .find_map(|l| l.strip_prefix("run directory: "))
        .map(|d| PathBuf::from(d.trim()))
}

/// The violation kinds a child run's results list (with `error (exit 3)` when it also
/// failed), and its directory; without results, the exit code and the log's last line.
fn kinds_found(
    run_dir: Option<PathBuf>,
    code: i32,
    log_text: &str,
) -> (Vec<String>, Option<PathBuf>) {
    let results = run_dir
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join(layout::RESULTS_FILE)).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    match results {
        Some(r) => {
            let mut kinds: Vec<String> = r["violations"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter_map(|x| x["kind"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            kinds.sort();
            kinds.dedup();
            if code == ExitCode::Error.code() as i32 {
                kinds.push("error (exit 3)".into());
            }
            (kinds, run_dir)
        }
        None => {
            let last = log_text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            (vec![format!("error (exit {code}): {last}")], None)
        }
    }
}

/// One line for a fault: `f5 clock bump-forward on n1 at 14.2 s for 3.1 s`.
fn describe(f: &PlannedFault) -> String {
    let mut s = format!("{} {}", f.id, f.kind());
    if let Some(c) = f.clock() {
        let _ = write!(s, " {}", c.mode);
    }
    if let Some(p) = f.partition() {
        let _ = write!(s, " {}", p.topology);
    }
    if !f.nodes.is_empty() {
        let ids: Vec<String> = f
            .nodes
            .iter()
            .map(|&i| nemesis::schedule::node_id(i))
            .collect();
        let _ = write!(s, " on {}", ids.join(","));
    }
    let _ = write!(
        s,
        " at {:.1} s for {:.1} s",
        f.at_ms as f64 / 1000.0,
        f.length_ms as f64 / 1000.0
    );
    s
}

#[cfg(test)]
mod tests {
    use super::{as_it_ran, pick_kind};
    use serde_json::json;
    use std::path::Path;

    /// results.json with these violation kinds (listed by checker, as the run writes them)
    /// and, for a stopped run, the kind it stopped on.
    fn results(kinds: &[&str], stopped_on: Option<&str>) -> serde_json::Value {
        let v: Vec<_> = kinds.iter().map(|k| json!({ "kind": k })).collect();
        match stopped_on {
            Some(k) => json!({"violations": v,
                "completeness": {"state": "stopped", "reason": "..", "stopped_on": k}}),
            None => json!({ "violations": v }),
        }
    }

    #[test]
    fn the_kind_kept_is_the_one_the_run_stopped_on_else_the_first_safety_kind() {
        let p = Path::new("results.json");
        let dg_then_renew = &["double-grant", "stale-renew-accepted"][..];
        for (listed, stopped_on, asked, want) in [
            // Listed second, but the live check proved it first and the run stopped on it.
            (
                dg_then_renew,
                Some("stale-renew-accepted"),
                None,
                Ok("stale-renew-accepted"),
            ),
            (dg_then_renew, None, None, Ok("double-grant")),
            // A stopped-on kind the final check did not list (cannot be re-proven): the rule.
            (
                dg_then_renew,
                Some("token-reused"),
                None,
                Ok("double-grant"),
            ),
            // A liveness violation listed first does not win over a safety one.
            (
                &["lock-stuck", "double-grant"][..],
                None,
                None,
                Ok("double-grant"),
            ),
            // No safety violation: the first listed.
            (
                &["lock-stuck", "deadlock"][..],
                None,
                None,
                Ok("lock-stuck"),
            ),
            // --kind wins over what the run stopped on.
            (
                dg_then_renew,
                Some("stale-renew-accepted"),
                Some("double-grant"),
                Ok("double-grant"),
            ),
            (
                &["double-grant"][..],
                None,
                Some("token-reused"),
                Err("has no token-reused"),
            ),
            (
                &["double-grant"][..],
                None,
                Some("nonsense"),
                Err("not a violation kind"),
            ),
            (&[][..], None, None, Err("no violation listed")),
        ] {
            let r = results(listed, stopped_on);
            let got = pick_kind(asked, &r, p).map_err(|e| e.to_string());
            match want {
                Ok(k) => assert_eq!(got.as_deref(), Ok(k), "{r} {asked:?}"),
                Err(says) => {
                    let e = got.expect_err("refused");
                    assert!(e.contains(says), "{r} {asked:?}: {e}");
                }
            }
        }
    }

    #[test]
    fn a_run_stopped_on_its_violation_is_shrunk_from_what_it_ran() {
        let schedule = nemesis::schedule::Schedule::parse(
            r#"{"version": 1, "nodes": 1, "faults": [
                {"id": "f1", "kind": "pause", "at_ms": 1000, "length_ms": 500, "nodes": ["n1"]},
                {"id": "f2", "kind": "pause", "at_ms": 4000, "length_ms": 500, "nodes": ["n1"]},
                {"id": "f3", "kind": "pause", "at_ms": 9000, "length_ms": 500, "nodes": ["n1"]}]}"#,
        )
        .unwrap();
        let none = nemesis::schedule::Schedule {
            faults: Vec::new(),
            ..schedule.clone()
        };
        let stopped = |ran_ns: u64| {
            json!({"completeness": {"state": "stopped", "reason": "..",
                "stopped_on": "double-grant"}, "stats": {"duration_ns": ran_ns}})
        };
        let whole = json!({"completeness": {"state": "complete"},
            "stats": {"duration_ns": 4_200_000_000u64}});
        // (results, schedule, planned ms, faults kept, length to shrink from, what the line
        // says if it is cut); the lease is 1 s.
        let all = &["f1", "f2", "f3"][..];
        let cases = [
            // Stopped 4.2 s into a 20 s plan: f3 never started; a 1 s lease to spare.
            (
                stopped(4_200_000_001),
                &schedule,
                20_000,
                &["f1", "f2"][..],
                5_300,
                Some("5.3 s with a lease to spare"),
            ),
            // A run that went its whole way, or one stopped near its end: as planned.
            (whole, &schedule, 20_000, all, 20_000, None),
            (
                stopped(19_500_000_000),
                &schedule,
                20_000,
                all,
                20_000,
                None,
            ),
            // The racy demo: stopped 0.3 s into a 2 s run without faults. Its length and a
            // lease (1.4 s) is below the shortest run a shrink tries: it stays at 2 s, and
            // no line says 1.4 s.
            (stopped(300_000_000), &none, 2_000, &[], 2_000, None),
            // Stopped 0.3 s into a 5 s plan: cut, but to the shortest run, and said so.
            (
                stopped(300_000_000),
                &none,
                5_000,
                &[],
                2_000,
                Some("2.0 s with a lease to spare) instead of its planned 5.0 s"),
            ),
        ];
        for (results, schedule, planned_ms, kept, want_ms, said) in cases {
            let (s, ms, line) = as_it_ran(&results, schedule.clone(), planned_ms, 1_000);
            let ids: Vec<&str> = s.faults.iter().map(|f| f.id.as_str()).collect();
            assert_eq!((ids.as_slice(), ms), (kept, want_ms), "{results}");
            match (said, line) {
                (Some(said), Some(line)) => assert!(line.contains(said), "{line}"),
                (None, None) => {}
                (said, line) => panic!("{results}: said {line:?}, wanted {said:?}"),
            }
        }
    }

    /// A shrink that kept no candidate says why in words: what stopped it, or, for a run without
    /// faults already at the shortest length, that there was nothing to try, or that none of
    /// the candidates that ran failed.
    #[test]
    fn a_shrink_that_kept_nothing_says_why() {
        let none =
            nemesis::schedule::Schedule::parse(r#"{"version": 1, "nodes": 1, "faults": []}"#)
                .unwrap();
        let one = nemesis::schedule::Schedule::parse(
            r#"{"version": 1, "nodes": 1, "faults": [
                {"id": "f1", "kind": "pause", "at_ms": 1000, "length_ms": 500, "nodes": ["n1"]}]}"#,
        )
        .unwrap();
        // (candidates that ran, stopped, schedule, length, said)
        for (ran, stopped, schedule, ms, said) in [
            (
                0,
                None,
                &none,
                2_000,
                Some(
                    "already minimal: no faults to remove, and its 2.0 s run is no longer \
                     than the shortest a shrink tries (2.0 s)",
                ),
            ),
            (
                0,
                None,
                &none,
                1_500,
                Some("its 1.5 s run is no longer than"),
            ),
            (
                0,
                Some("budget spent"),
                &one,
                9_000,
                Some("no candidate ran (budget spent)"),
            ),
            (
                0,
                Some("budget spent"),
                &none,
                2_000,
                Some("no candidate ran (budget spent)"),
            ),
            (
                1,
                Some("budget spent"),
                &one,
                9_000,
                Some("none of the 1 smaller candidate(s) tried failed before the search stopped (budget spent)"),
            ),
            (
                3,
                None,
                &one,
                9_000,
                Some("none of the 3 smaller candidate(s) failed: the failing schedule is minimal"),
            ),
        ] {
            let tried = super::Tried {
                ran,
                kept: 0,
            };
            let got = super::not_shrunk(tried, stopped, schedule, ms);
            match (said, &got) {
                (Some(said), Some(got)) => assert!(got.contains(said), "{got}"),
                (None, None) => {}
                _ => panic!("{ran} {stopped:?} {ms}: {got:?}, wanted {said:?}"),
            }
        }
        // Once a candidate was kept, whatever stopped the search: shrunk.
        for stopped in [None, Some("interrupted"), Some("budget spent")] {
            let tried = super::Tried { ran: 3, kept: 1 };
            assert_eq!(super::not_shrunk(tried, stopped, &one, 9_000), None);
        }
    }
}
