//! `lockpick test`: a suite of short, aimed scenarios that together exercise every fault the
//! target and this machine allow, and one verdict over all of them. The planner
//! ([`plan`]) lists the cells (each clock direction on each node role, each client-stall
//! shape x wake-up op, pause and kill of each role, each partition topology, contention on
//! each workload) and picks the next scenario from what the finished ones exercised; each
//! scenario is a real `lockpick run` of this binary with the target's settings and an aimed
//! schedule, in a run directory of its own. The suite stops at the first violation (unless
//! `--keep-going`), shrinks it with `lockpick shrink`, and says which command replays it.
//!
//! The verdict rests on what was exercised: `valid` only when no scenario found a violation
//! and every cell met its target state `--times` times; a cell tried [`plan::TRIES_MAX`]
//! times without that, or a budget that ran out first, makes it `unknown`, naming the cells.

pub mod plan;

use crate::cli::TestArgs;
use crate::config::RunConfig;
use crate::config_file::Origins;
use crate::flags::{self, RunArgs};
use anyhow::{Context, Result};
use history::{layout, ExitCode, Results, Validity};
use nemesis::oneshot::{run_to_end, Ended};
use plan::{PlanCell, Scenario, Tally};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `run`'s settings the suite does not use, each with what to use instead: it plans every
/// scenario's length and faults itself. `test --help` and `demo --help` say so of each
/// (cli.rs), and the suite warns of each one given ([`unused_settings`]) rather than ignore
/// it in silence. A warning, not a refusal: one lockpick.toml serves `run` and `test` alike.
pub const NOT_IN_SUITE: [(&flags::Flag, &str); 2] = [
    (
        &flags::DURATION,
        "each scenario's length comes from its plan; bound the whole suite with --budget",
    ),
    (
        &flags::NEMESIS_INTERVAL,
        "each scenario's faults come from its plan; --nemesis chooses their kinds",
    ),
];

/// Scenarios in one suite, whatever the budget: the plan has at most a few dozen cells, each
/// tried at most [`plan::TRIES_MAX`] times.
const SCENARIOS_MAX: usize = 500;

/// One finished scenario, as the index, JUnit and suite.json show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScenarioRun {
    pub id: String,
    /// The cells it aimed at.
    pub aims: Vec<String>,
    pub seed: u64,
    pub duration_ms: u64,
    pub run_dir: Option<PathBuf>,
    /// The run's verdict, or `error` when it ended without one.
    pub verdict: String,
    pub exit: Option<i32>,
    pub violations: Vec<String>,
    /// The earliest end of a violation's window in its history (the instant it was proven).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_violation_ns: Option<u64>,
    /// Wall time it took, start-up to report.
    pub elapsed_ms: u64,
    /// The command that reruns it exactly.
    pub replay: String,
    /// What went wrong, when it ended without a verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A cell and what the suite saw of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellRow {
    pub cell: String,
    pub tries: u32,
    pub started: u64,
    pub exercised: u64,
    pub needed: u64,
}

/// The suite's outcome: `suite.json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SuiteResults {
    pub valid: Validity,
    /// Why the verdict is what it is, in a line.
    pub why: String,
    /// Not interrupted and no harness error: the suite's own run, not what it exercised
    /// (`ended` says how it stopped, `not_exercised` what it left).
    pub complete: bool,
    /// `planned` (every cell exercised or given up on), `violation`, `budget` (ran out of
    /// `--budget`), `interrupted` or `error`.
    pub ended: Finish,
    pub budget_ms: u64,
    pub elapsed_ms: u64,
    /// When the first violation was proven: the scenarios before it, whole, plus the end of
    /// the violation's window in its own history (its start-up not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_violation_ms: Option<u64>,
    /// When the suite stopped for it: the failing scenario's end, from the suite's start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at_ms: Option<u64>,
    pub not_exercised: Vec<String>,
    /// Settings given that the suite does not use, each where it was given
    /// ([`NOT_IN_SUITE`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The workload the user named (`--workload`, or `workload` in the config file): the
    /// plan holds only the cells it exercises.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Cells of the service's other workloads that the named workload left out of the plan:
    /// the verdict does not rest on them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_planned: Vec<String>,
    pub scenarios: Vec<ScenarioRun>,
    pub cells: Vec<CellRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<serde_json::Value>,
}

/// `lockpick demo`: the suite on the embedded default, with 1 s leases and holds inside them
/// where the flags were left at their defaults, so a newcomer's first command is short and
/// shows every fault exercised.
/// The demo's own defaults, in place of `run`'s (clap's defaults of `demo`, so its `--help`
/// shows them): 1 s leases and short holds, so the suite takes a few minutes.
pub const DEMO_DEFAULTS: [(&flags::Flag, &str); 2] =
    [(&flags::TTL, "1s"), (&flags::HOLD, "50ms..600ms")];

pub fn demo(mut a: TestArgs, origins: &Origins) -> Result<ExitCode> {
    if a.run.text(&flags::NAME).is_none() {
        a.run.set_text(&flags::NAME, Some("demo"));
    }
    test(a, origins)
}

/// `lockpick test`. `origins`: where each flag from a `--config` file was set, so a setting
/// the suite does not use is named where the user wrote it.
pub fn test(mut a: TestArgs, origins: &Origins) -> Result<ExitCode> {
    // A scenario ends at its first proven safety violation: the suite stops there anyway, and
    // the shrink's replays (of the scenario's config.toml) end as soon as they reproduce it.
    // With --keep-going each scenario runs its whole length, to meet every kind it can.
    let stop = a.run.switch(&flags::STOP_ON_VIOLATION) || !a.keep_going;
    a.run.set_switch(&flags::STOP_ON_VIOLATION, stop);
    let (cfg, budget, shrink_budget) = test_settings(&a)?;
    let warnings = unused_settings(&a.run, origins, &a.budget);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let target = plan_target(&cfg, a.times);
    // A workload the user named is the one every scenario runs, so the plan is its cells.
    let named = a.run.text(&flags::WORKLOAD).map(|_| cfg.kind());
    let cells = plan::cells(&target, named);
    let not_planned = plan::not_planned(&target, named);
    let workload = named.map(|w| w.as_str().to_string());
    let (dir, base) = suite_dir(&a, &cfg)?;
    println!(
        "lockpick test: {} cell(s) to exercise {} time(s) each ({}{}), budget {}, seed {}",
        cells.len(),
        a.times,
        if cfg.faults.is_empty() {
            "contention only".to_string()
        } else {
            format!("faults: {}", cfg.fault_names())
        },
        scope(workload.as_deref(), &not_planned)
            .map(|s| format!("; {s}"))
            .unwrap_or_default(),
        humantime::format_duration(budget),
        cfg.seed
    );
    println!("suite directory: {}", dir.display());
    // The words of the lines below, once: a first-time reader meets them here.
    println!(
        "each scenario is a short run aimed at some cells (a cell: one kind of fault, its \
         variant and what it hits, or contention on a workload); a line says the scenario's \
         verdict, its planned and actual length, and how many of the cells it aimed at it \
         exercised (reached the state where their bugs live)"
    );
    let interrupted = Arc::new(AtomicBool::new(false));
    let replay_out = crate::flags::OUT.with(cfg.out.display()).join(" ");
    let mut suite = Suite {
        exe: std::env::current_exe().context("cannot locate the lockpick binary")?,
        dir: dir.clone(),
        replay_out: replay_out.clone(),
        base,
        target,
        cells,
        workload,
        not_planned,
        warnings,
        tallies: Vec::new(),
        runs: Vec::new(),
        started: Instant::now(),
        budget,
        overhead_ms: plan::OVERHEAD_MS_GUESS,
        did_not_fit: None,
        interrupted: interrupted.clone(),
        fail_on: reports::FailOn::given_or_default(crate::config::fail_on(&a.run)),
    };
    suite.tallies = vec![Tally::default(); suite.cells.len()];
    let rt = crate::runtime()?;
    let ended = rt.block_on(async {
        let flag = interrupted.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "lockpick: stopping the suite: the scenario in progress stops now, its history is checked"
                );
                flag.store(true, Ordering::SeqCst);
            }
        });
        suite.go(cfg.seed, a.keep_going).await
    });
    let mut results = suite.results(ended);
    if ended == Finish::Budget && suite.runs.is_empty() {
        // Said where a refusal would be too: the summary's reason is easy to miss below the
        // plan's lines.
        eprintln!("lockpick: {}", results.why);
    }
    if !a.no_shrink && !interrupted.load(Ordering::SeqCst) {
        if let Some(run_dir) = suite.first_invalid().and_then(|r| r.run_dir.clone()) {
            results.shrunk = shrink_first(run_dir, &a.shrink_budget, shrink_budget);
            if let Some(serde_json::Value::String(replay)) =
                results.shrunk.as_mut().and_then(|s| s.get_mut("replay"))
            {
                replay.push(' ');
                replay.push_str(&replay_out);
            }
        }
    }
    write_outputs(&dir, &results)?;
    print!("{}", summary_text(&results));
    println!("suite directory: {}", dir.display());
    println!("index: {}", dir.join(layout::INDEX_FILE).display());
    let code = match (results.valid, ended) {
        (Validity::Invalid, _) => ExitCode::Invalid,
        (_, Finish::Error) => ExitCode::Error,
        (Validity::Unknown, _) => ExitCode::Unknown,
        (Validity::Valid, _) => ExitCode::Valid,
    };
    Ok(code)
}

/// The target's settings and the suite's budgets, checked in the order the flags are refused.
fn test_settings(a: &TestArgs) -> Result<(RunConfig, Duration, Duration)> {
    if let Some(s) = a.run.path(&flags::SCHEDULE) {
        anyhow::bail!(
            "--schedule {}: lockpick test writes each scenario's schedule itself; replay one with \
             `lockpick run --schedule FILE`",
            s.display()
        );
    }
    let cfg = RunConfig::from_args(&a.run)?;
    let budget = crate::config::duration("budget", &a.budget)?;
    if budget.is_zero() {
        anyhow::bail!("--budget {}: must be at least 1s", a.budget);
    }
    if a.times == 0 {
        anyhow::bail!("--times 0: expected at least 1 (exercised instances per cell)");
    }
    let shrink_budget = crate::config::duration("shrink-budget", &a.shrink_budget)?;
    Ok((cfg, budget, shrink_budget))
}

/// A warning for each setting of [`NOT_IN_SUITE`] that was given: set in a config file (named
/// at its file, line and key: ``lockpick.toml:3: `workload.duration` = "20s"``) or on the
/// command line at a value other than its default (one typed at the default cannot be told
/// from no flag, and changes nothing either way). `budget`: `--budget` as given.
fn unused_settings(run: &RunArgs, origins: &Origins, budget: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (flag, instead) in NOT_IN_SUITE {
        let Some(value) = run.text(flag) else {
            continue;
        };
        let given = match origins.of(flag) {
            Some(at) => format!("{at} = {value:?}"),
            None if Some(value) != flag.default => format!("{flag} {value}"),
            None => continue,
        };
        // The duration's stand-in, the budget, with the value in force.
        let now = match flag.name == flags::DURATION.name {
            true => format!(" (now {budget})"),
            false => String::new(),
        };
        out.push(format!(
            "{given} does not apply to the suite: {instead}{now}"
        ));
    }
    out
}

/// What the planner knows of the target: its faults, nodes, workload and service.
fn plan_target(cfg: &RunConfig, times: u64) -> plan::Target {
    plan::Target {
        kinds: cfg.faults.clone(),
        nodes: cfg.nodes,
        // The bank's transfers read and write the store as the counter's ops do: a stall
        // may wake into either, between a transfer's reads and its writes too.
        counter: matches!(
            cfg.kind(),
            workloads::WorkloadKind::Counter | workloads::WorkloadKind::Bank
        ),
        fencing: cfg.service.tokens(&cfg.adapter_own) == workloads::Tokens::Fencing,
        bank: cfg.service.holds_several_locks(&cfg.adapter_own),
        write_ends_grant: cfg.service.grant_guards_resource(&cfg.adapter_own),
        lease_ms: cfg.lease_max_ms(),
        clock_bump_ms: cfg.clock_bump_ms,
        clock_rate: cfg.clock_rate,
        clock_modes: cfg.clock_modes.clone(),
        aims: cfg.client_shapes.aims.clone(),
        wakes: cfg.client_shapes.wakes.clone(),
        topologies: cfg.topologies.clone(),
        times,
        liveness_grace_ms: cfg.liveness_grace_ms,
    }
}

/// What a scenario's run asks for, as flags: the kinds of its schedule's faults
/// (`--nemesis`), and for each kind the values of its family's setting its faults ask
/// (`--clock-faults slow` for a slow clock). The run's own verdict then rests on the faults
/// the suite aimed, not on every kind and direction of the suite (a run that asked for clock
/// faults in their default directions and ran only a slow one would be `unknown`).
fn asked_of(schedule: &nemesis::schedule::Schedule) -> Vec<String> {
    let mut kinds: Vec<nemesis::schedule::FaultKind> = Vec::new();
    for f in &schedule.faults {
        if !kinds.contains(&f.kind()) {
            kinds.push(f.kind());
        }
    }
    let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    let mut args: Vec<String> = flags::NEMESIS.with(names.join(",")).into();
    for kind in kinds {
        let &[setting] = kind.settings() else {
            continue;
        };
        let mut values: Vec<&str> = Vec::new();
        for f in schedule.faults.iter().filter(|f| f.kind() == kind) {
            for v in f.payload.settings_asked() {
                if !values.contains(&v) {
                    values.push(v);
                }
            }
        }
        let flag = flags::RUN.iter().find(|f| f.key() == setting);
        if let (Some(flag), false) = (flag, values.is_empty()) {
            args.extend(flag.with(values.join(",")));
        }
    }
    args
}

/// The suite's directory, made with its `schedules` and `logs`, and its base config written.
fn suite_dir(a: &TestArgs, cfg: &RunConfig) -> Result<(PathBuf, PathBuf)> {
    // `--name` names the suite; each scenario's run gets the scenario's own name.
    let name = a
        .run
        .text(&flags::NAME)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}-test", cfg.name));
    let dir = crate::run_cmd::create_run_dir(&cfg.out, &name)?;
    let dir = std::fs::canonicalize(&dir)?;
    for sub in ["schedules", "logs"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
    }
    let base = dir.join(layout::SUITE_CONFIG_FILE);
    std::fs::write(&base, cfg.file_text()?)
        .with_context(|| format!("cannot write {}", base.display()))?;
    Ok((dir, base))
}

/// Shrinks the first failing scenario's run; its `shrink.json`, if it wrote one (a shrink
/// that fails is said and the suite goes on).
fn shrink_first(
    run_dir: PathBuf,
    budget_text: &str,
    budget: Duration,
) -> Option<serde_json::Value> {
    println!();
    println!(
        "shrinking the first failing scenario (budget {})",
        humantime::format_duration(budget)
    );
    let args = crate::cli::ShrinkArgs {
        run_dir: run_dir.clone(),
        runs_per_candidate: 2,
        budget: budget_text.to_string(),
        kind: None,
        out: None,
    };
    match crate::shrink::shrink(args) {
        Ok(_) => std::fs::read_to_string(run_dir.join("shrink").join("shrink.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok()),
        Err(e) => {
            println!("shrink failed: {}", crate::error_text(&e));
            None
        }
    }
}

/// Why a scenario's run ended without results: its exit and the log's last line, how it
/// ended otherwise, or why it could not run.
fn no_verdict(ended: &std::io::Result<Ended>, log_text: &str) -> String {
    let last = log_text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string();
    match ended {
        Ok(Ended::Exited(c)) => format!("exit {c}: {last}"),
        Ok(other) => format!("{other:?}").to_lowercase(),
        Err(e) => format!("cannot run: {e}"),
    }
}

/// A scenario the budget left no room for: its planned length and what a run was expected to
/// take beyond it (start-up, heal, check: the guess, or the most a run of this suite took).
#[derive(Debug, Clone, Copy)]
struct DidNotFit {
    planned_ms: u64,
    overhead_ms: u64,
    /// What was left of the budget when it did not fit.
    left_ms: u64,
}

impl DidNotFit {
    /// Why a suite of `budget` ran nothing, with the budget that would run this, the first
    /// scenario: the next whole second past what it costs, as the scenario loop admits a
    /// scenario only while the time spent plus its cost is within the budget.
    fn first_scenario(&self, budget: Duration) -> String {
        let cost_ms = self.planned_ms + self.overhead_ms;
        format!(
            "nothing was run: --budget {} is too small for the first scenario, planned for \
             {:.1} s plus about {:.1} s to start and check a run; give --budget {}s or more",
            humantime::format_duration(budget),
            self.planned_ms as f64 / 1000.0,
            self.overhead_ms as f64 / 1000.0,
            cost_ms / 1000 + 1
        )
    }

    /// Why a suite that ran some scenarios stopped on its budget: the next one's cost against
    /// what was left (the budget ends a suite early when that is the case, with time left).
    fn next_scenario(&self) -> String {
        format!(
            "the budget ran out: the next scenario, planned for {:.1} s plus about {:.1} s to \
             start and check it, did not fit the {:.1} s left",
            self.planned_ms as f64 / 1000.0,
            self.overhead_ms as f64 / 1000.0,
            self.left_ms as f64 / 1000.0
        )
    }
}

/// The width of a scenario's id in the suite's progress lines.
const ID_COLUMN: usize = 44;

/// How the scenario loop ended: suite.json's `ended`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Finish {
    /// Every cell exercised or given up on.
    Planned,
    Violation,
    Budget,
    Interrupted,
    /// A scenario ended without a verdict (the target would not start, a harness error).
    Error,
}

struct Suite {
    exe: PathBuf,
    dir: PathBuf,
    /// What a replay of a scenario adds: `--out` the suite's own (the user's) folder of runs.
    /// A scenario's config.toml pins its run's folder, inside this suite: a replay that went
    /// there would land in the archived suite and move what it says.
    replay_out: String,
    base: PathBuf,
    target: plan::Target,
    cells: Vec<PlanCell>,
    /// The workload the user named, and the cells of other workloads it left out.
    workload: Option<String>,
    not_planned: Vec<String>,
    warnings: Vec<String>,
    tallies: Vec<Tally>,
    runs: Vec<ScenarioRun>,
    started: Instant,
    budget: Duration,
    /// The largest cost of a run beyond its planned duration seen so far.
    overhead_ms: u64,
    /// The scenario the budget had no room for, when that ended the suite.
    did_not_fit: Option<DidNotFit>,
    interrupted: Arc<AtomicBool>,
    fail_on: reports::FailOn,
}

impl Suite {
    async fn go(&mut self, seed: u64, keep_going: bool) -> Finish {
        let mut ended = Finish::Planned;
        let mut previous = None;
        for i in 0..SCENARIOS_MAX {
            if self.interrupted.load(Ordering::SeqCst) {
                return Finish::Interrupted;
            }
            let s_seed = seed.wrapping_add(i as u64 * 7919) & ((1 << 53) - 1);
            let Some(s) = plan::next(&self.target, &self.cells, &self.tallies, s_seed, previous)
            else {
                return ended;
            };
            previous = Some(s.profile);
            let cost = Duration::from_millis(s.duration_ms + self.overhead_ms);
            if self.started.elapsed() + cost > self.budget {
                self.did_not_fit = Some(DidNotFit {
                    planned_ms: s.duration_ms,
                    overhead_ms: self.overhead_ms,
                    left_ms: self
                        .budget
                        .saturating_sub(self.started.elapsed())
                        .as_millis() as u64,
                });
                return if ended == Finish::Violation {
                    ended
                } else {
                    Finish::Budget
                };
            }
            let run = self.run_scenario(i + 1, &s).await;
            let verdict = run.verdict.clone();
            let failed = run.exit.is_none_or(|c| c == 3) && run.violations.is_empty();
            self.runs.push(run);
            // The scenario in progress was stopped: what it recorded was checked and counts,
            // but the suite ends here, whatever the scenario's exit.
            if self.interrupted.load(Ordering::SeqCst) {
                return if verdict == "invalid" {
                    Finish::Violation
                } else {
                    Finish::Interrupted
                };
            }
            if verdict == "invalid" {
                ended = Finish::Violation;
                if !keep_going {
                    return ended;
                }
            } else if failed {
                return Finish::Error;
            }
        }
        ended
    }

    async fn run_scenario(&mut self, index: usize, s: &Scenario) -> ScenarioRun {
        let id = s.slug(index, &self.cells);
        let args = match self.scenario_args(&id, s) {
            Ok(args) => args,
            Err(why) => return self.failed(id, s, why),
        };
        let aims: Vec<String> = s.aims.iter().map(|&i| self.cells[i].label()).collect();
        // An id longer than its column takes a line of its own, so that the columns after it
        // stay under each other.
        let column = if id.chars().count() > ID_COLUMN {
            format!("{id}\n  {:ID_COLUMN$}", "")
        } else {
            id.clone()
        };
        print!(
            "  {column:<ID_COLUMN$} planned {:>5.1} s  ",
            s.duration_ms as f64 / 1000.0
        );
        let _ = std::io::Write::flush(&mut std::io::stdout());
        for &i in &s.aims {
            self.tallies[i].tries += 1;
        }
        let log = self.dir.join("logs").join(format!("{id}.log"));
        let began = Instant::now();
        let limit = Duration::from_millis(s.duration_ms * 3) + Duration::from_secs(120);
        let flag = self.interrupted.clone();
        let ended = run_to_end(&self.exe, &args, &log, limit, move || {
            flag.load(Ordering::SeqCst)
        })
        .await;
        let elapsed = began.elapsed();
        self.overhead_ms = self
            .overhead_ms
            .max((elapsed.as_millis() as u64).saturating_sub(s.duration_ms));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let run_dir = crate::shrink::child_run_dir(&text);
        let exit = match ended {
            Ok(Ended::Exited(c)) => Some(c),
            _ => None,
        };
        let results: Option<Results> = run_dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join(layout::RESULTS_FILE)).ok())
            .and_then(|t| serde_json::from_str(&t).ok());
        let replay = match &run_dir {
            Some(d) => format!(
                "lockpick run --config {} {}",
                d.join(layout::CONFIG_FILE).display(),
                self.replay_out
            ),
            None => format!("lockpick {}", args.join(" ")),
        };
        let mut run = ScenarioRun {
            id,
            aims,
            seed: s.seed,
            duration_ms: s.duration_ms,
            run_dir: run_dir.clone(),
            verdict: "error".into(),
            exit,
            violations: Vec::new(),
            first_violation_ns: None,
            elapsed_ms: elapsed.as_millis() as u64,
            replay,
            error: None,
        };
        let stopped = results.as_ref().is_some_and(|r| {
            r.incomplete()
                .is_some_and(|c| c.state == history::RunState::Stopped)
        });
        match results {
            Some(r) => self.judge(s, &r, &mut run),
            None => run.error = Some(no_verdict(&ended, &text)),
        }
        self.print_done(s, &run, elapsed, stopped);
        run
    }

    /// `lockpick run`'s arguments for scenario `id`, its schedule written first (the error
    /// says why it could not be).
    fn scenario_args(&self, id: &str, s: &Scenario) -> Result<Vec<String>, String> {
        let mut args: Vec<String> = vec!["run".into()];
        args.extend(flags::CONFIG.with(self.base.display()));
        args.extend(s.flags.iter().cloned());
        if let Some(schedule) = &s.schedule {
            let path = self.dir.join("schedules").join(format!("{id}.json"));
            if let Err(e) = std::fs::write(&path, schedule.to_json()) {
                return Err(format!("cannot write {}: {e}", path.display()));
            }
            args.extend(flags::SCHEDULE.with(path.display()));
            args.extend(asked_of(schedule));
        }
        args.extend(
            [
                flags::DURATION.with(format!("{}ms", s.duration_ms)),
                flags::SEED.with(s.seed),
                flags::OUT.with(self.dir.join(layout::SCENARIOS_DIR).display()),
                flags::NAME.with(id),
            ]
            .concat(),
        );
        Ok(args)
    }

    /// Counts what the scenario's run exercised and sets its verdict and violations from its
    /// results, as the `--fail-on` policy reads them.
    fn judge(&mut self, s: &Scenario, r: &Results, run: &mut ScenarioRun) {
        self.count(s, r);
        run.verdict = r.valid.as_str().to_string();
        // Only what the policy counts stops the suite (as it fails a run).
        if self.fail_on.exit_code(r) == ExitCode::Invalid {
            run.verdict = "invalid".into();
        } else if r.valid == Validity::Invalid {
            run.verdict = "valid".into();
        }
        let mut kinds: Vec<String> = r
            .violations
            .iter()
            .map(|v| v.kind.as_str().to_string())
            .collect();
        kinds.sort();
        kinds.dedup();
        run.violations = kinds;
        run.first_violation_ns = r.violations.iter().map(|v| v.window_ns[1]).min();
        if run.exit == Some(3) {
            run.error = r.incomplete().map(|c| c.headline());
        }
    }

    /// The scenario's line, after its id: verdict, time, cells exercised, error or kinds.
    /// `stopped`: the scenario ended at its first proven violation (`--stop-on-violation`).
    fn print_done(&self, s: &Scenario, run: &ScenarioRun, elapsed: Duration, stopped: bool) {
        let exercised: Vec<String> = s
            .aims
            .iter()
            .filter(|&&i| self.tallies[i].exercised >= self.target.times)
            .map(|&i| self.cells[i].label())
            .collect();
        println!(
            "{:<8} took {:>5.1} s{}  exercised {}/{}{}",
            run.verdict,
            elapsed.as_secs_f64(),
            if stopped {
                " (stopped at its first violation)"
            } else {
                ""
            },
            exercised.len(),
            s.aims.len(),
            match (&run.error, run.violations.is_empty()) {
                (Some(e), _) => format!("  ({e})"),
                (None, false) => format!("  {}", run.violations.join(", ")),
                _ => String::new(),
            }
        );
    }

    fn failed(&self, id: String, s: &Scenario, why: String) -> ScenarioRun {
        ScenarioRun {
            id,
            aims: s.aims.iter().map(|&i| self.cells[i].label()).collect(),
            seed: s.seed,
            duration_ms: s.duration_ms,
            run_dir: None,
            verdict: "error".into(),
            exit: None,
            violations: Vec::new(),
            first_violation_ns: None,
            elapsed_ms: 0,
            replay: String::new(),
            error: Some(why),
        }
    }

    /// Adds what a scenario's run exercised to every plan cell it counts for (a scenario may
    /// exercise cells it did not aim at: those count too).
    fn count(&mut self, s: &Scenario, r: &Results) {
        if let Some(cov) = &r.coverage {
            for c in &cov.cells {
                for (i, p) in self.cells.iter().enumerate() {
                    if p.counts(c) {
                        self.tallies[i].started += c.started;
                        self.tallies[i].exercised += c.exercised;
                    }
                }
            }
        }
        // A family's cell of a kind of its own (the odd-ttl cell, a stall) is exercised by its
        // faults: any cell of the family the run exercised.
        for &i in &s.aims {
            let Some(family) = self.cells[i].family else {
                continue;
            };
            if self.cells[i].cell.kind != family.as_str() {
                let stalls = r
                    .coverage
                    .iter()
                    .flat_map(|c| &c.cells)
                    .filter(|c| c.kind == family.as_str());
                for c in stalls {
                    self.tallies[i].started += c.started;
                    self.tallies[i].exercised += c.exercised;
                }
            }
        }
        // A contention scenario is exercised by a contended round (two or more clients asked
        // for the lock in one round, so their grants raced); the bank's by a wait-for cycle that
        // formed (a moment the service had to break, or a deadlock).
        for &i in &s.aims {
            let cell = &self.cells[i].cell;
            if cell.kind != plan::CONTENTION {
                continue;
            }
            let (stat, field) = if cell.variant == plan::BANK {
                ("cycles", "formed")
            } else {
                ("rounds", "contended")
            };
            let seen = r
                .stats
                .extra
                .get(stat)
                .and_then(|v| v.get(field))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            self.tallies[i].started += 1;
            self.tallies[i].exercised += u64::from(seen > 0);
        }
    }

    fn first_invalid(&self) -> Option<&ScenarioRun> {
        self.runs.iter().find(|r| r.verdict == "invalid")
    }

    fn results(&self, ended: Finish) -> SuiteResults {
        let cells: Vec<CellRow> = self
            .cells
            .iter()
            .zip(&self.tallies)
            .map(|(c, t)| CellRow {
                cell: c.label(),
                tries: t.tries,
                started: t.started,
                exercised: t.exercised,
                needed: self.target.times,
            })
            .collect();
        let not_exercised: Vec<String> = cells
            .iter()
            .filter(|c| c.exercised < c.needed)
            .map(|c| {
                if c.tries == 0 {
                    format!("{} (not tried)", c.cell)
                } else {
                    c.cell.clone()
                }
            })
            .collect();
        let first = self.first_invalid();
        let before_ms = |f: &ScenarioRun| -> u64 {
            self.runs
                .iter()
                .take_while(|r| !std::ptr::eq(*r, f))
                .map(|r| r.elapsed_ms)
                .sum()
        };
        let first_violation_ms =
            first.map(|f| before_ms(f) + f.first_violation_ns.unwrap_or(0) / 1_000_000);
        let stopped_at_ms = first.map(|f| before_ms(f) + f.elapsed_ms);
        let (valid, why) = self.verdict(first, ended, &not_exercised);
        SuiteResults {
            valid,
            why,
            complete: !matches!(ended, Finish::Interrupted | Finish::Error),
            ended,
            budget_ms: self.budget.as_millis() as u64,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            first_violation_ms,
            stopped_at_ms,
            not_exercised,
            warnings: self.warnings.clone(),
            workload: self.workload.clone(),
            not_planned: self.not_planned.clone(),
            scenarios: self.runs.clone(),
            cells,
            shrunk: None,
        }
    }

    /// The suite's verdict and why: a violation, a stop, a scenario without a verdict, cells
    /// not exercised, or every cell exercised.
    fn verdict(
        &self,
        first: Option<&ScenarioRun>,
        ended: Finish,
        not_exercised: &[String],
    ) -> (Validity, String) {
        match (first, ended) {
            (Some(f), _) => (
                Validity::Invalid,
                format!("scenario {} found {}", f.id, f.violations.join(", ")),
            ),
            (None, Finish::Interrupted) => (
                Validity::Unknown,
                "stopped by Ctrl-C before every cell was exercised".into(),
            ),
            (None, Finish::Error) => (
                Validity::Unknown,
                format!(
                    "a scenario ended without a verdict: {}",
                    self.runs
                        .last()
                        .and_then(|r| r.error.clone())
                        .unwrap_or_default()
                ),
            ),
            // Nothing ran: the cells' list would hide the one reason, the budget.
            (None, Finish::Budget) if self.runs.is_empty() => (
                Validity::Unknown,
                self.did_not_fit
                    .map(|d| d.first_scenario(self.budget))
                    .unwrap_or_else(|| "the budget ran out before the first scenario".into()),
            ),
            (None, _) if !not_exercised.is_empty() => (
                Validity::Unknown,
                format!(
                    "requested, not exercised: {}{}",
                    not_exercised.join(", "),
                    match (ended, self.did_not_fit) {
                        (Finish::Budget, Some(d)) => format!(" ({})", d.next_scenario()),
                        (Finish::Budget, None) => " (the budget ran out)".to_string(),
                        _ => String::new(),
                    }
                ),
            ),
            (None, _) => (
                Validity::Valid,
                format!(
                    "every cell exercised {} time(s), no violation{}",
                    self.target.times,
                    scope(self.workload.as_deref(), &self.not_planned)
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default()
                ),
            ),
        }
    }
}

/// What the plan was narrowed to, when the user named a workload: `workload mutex only; not
/// planned: contention counter, contention bank`. The cell count and a valid verdict say it,
/// so neither reads as every workload's.
fn scope(workload: Option<&str>, not_planned: &[String]) -> Option<String> {
    let w = workload?;
    Some(match not_planned {
        [] => format!("workload {w} only"),
        left => format!("workload {w} only; not planned: {}", left.join(", ")),
    })
}

/// The cells exercised of each kind (a cell's first word: `contention`, `client-pause`,
/// `clock`, ...), in the plan's order: `contention 3/3, client-pause 13/13, kill 0/1`.
fn cells_by_kind(cells: &[CellRow]) -> String {
    let mut kinds: Vec<(&str, usize, usize)> = Vec::new();
    for c in cells {
        let kind = c.cell.split(' ').next().unwrap_or_default();
        let met = usize::from(c.exercised >= c.needed);
        match kinds.iter_mut().find(|(k, ..)| *k == kind) {
            Some((_, done, all)) => {
                *done += met;
                *all += 1;
            }
            None => kinds.push((kind, met, 1)),
        }
    }
    kinds
        .iter()
        .map(|(k, done, all)| format!("{k} {done}/{all}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The suite's verdict as text: the summary printed at the end and written to summary.txt.
pub fn summary_text(r: &SuiteResults) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(s, "suite verdict: {}", r.valid.as_str().to_uppercase());
    let _ = writeln!(s, "  {}", r.why);
    let _ = writeln!(
        s,
        "  {} scenario(s) in {:.1} s (budget {:.0} s){}",
        r.scenarios.len(),
        r.elapsed_ms as f64 / 1000.0,
        r.budget_ms as f64 / 1000.0,
        if r.complete { "" } else { "; incomplete" }
    );
    s.push_str(&summary_details(r));
    s
}

/// The summary past its verdict, why and count of scenarios: the cells exercised (all, and by
/// kind), the first violation with its report and replay, and the shrunk schedule's replay.
/// index.html shows these lines too.
fn summary_details(r: &SuiteResults) -> String {
    let mut s = String::new();
    for w in &r.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    let exercised = r.cells.iter().filter(|c| c.exercised >= c.needed).count();
    let _ = writeln!(
        s,
        "  cells exercised: {exercised} of {}{}",
        r.cells.len(),
        scope(r.workload.as_deref(), &r.not_planned)
            .map(|s| format!(" ({s})"))
            .unwrap_or_default()
    );
    if !r.cells.is_empty() {
        let _ = writeln!(s, "  by kind: {}", cells_by_kind(&r.cells));
    }
    if let Some(f) = r.scenarios.iter().find(|x| x.verdict == "invalid") {
        let _ = writeln!(
            s,
            "  first violation: {} ({})",
            f.violations.join(", "),
            f.id
        );
        if let Some(ms) = r.first_violation_ms {
            let _ = writeln!(s, "  proven {:.1} s into the suite", ms as f64 / 1000.0);
        }
        if let Some(d) = &f.run_dir {
            let _ = writeln!(s, "  report: {}", d.join(layout::REPORT_FILE).display());
        }
        let _ = writeln!(s, "  replay: {}", f.replay);
    }
    if let Some(sh) = &r.shrunk {
        let text = |k: &str| {
            sh.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_string()
        };
        let faults = sh
            .get("faults")
            .and_then(|v| v.as_array())
            .map_or(0, Vec::len);
        // A shrink that ran no candidate learned nothing: its schedule is the failing run's,
        // and the shrink said why (stopped, or nothing to try).
        if let Some(why) = sh.get("not_shrunk").and_then(|v| v.as_str()) {
            let _ = writeln!(
                s,
                "  not shrunk: {why}; the replay above is the smallest known"
            );
        } else {
            let _ = writeln!(s, "  minimal: {faults} fault(s), {}", text("kind"));
            let _ = writeln!(s, "  minimal replay: {}", text("replay"));
        }
    }
    s
}

fn write_outputs(dir: &Path, r: &SuiteResults) -> Result<()> {
    let write = |name: &str, text: String| -> Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write(layout::SUITE_FILE, serde_json::to_string_pretty(r)? + "\n")?;
    // The blank line separates it from the scenario lines on the terminal, not in the file.
    write(
        layout::SUMMARY_FILE,
        summary_text(r).trim_start().to_string(),
    )?;
    write(layout::INDEX_FILE, index_html(dir, r))?;
    write(layout::JUNIT_FILE, junit_xml(r))?;
    // The output folder's index lists the suite beside the runs: its scenarios' runs are
    // listed in their own folder's index, not this one.
    crate::report_cmd::rewrite_index(dir);
    Ok(())
}

fn index_html(dir: &Path, r: &SuiteResults) -> String {
    use reports::escape::html as e;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>lockpick test: {}</title>\
         <style>body{{font:14px sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}\
         .invalid{{background:#fdd}}.valid{{background:#dfd}}.unknown,.error{{background:#ffd}}</style>\
         </head><body><h1>lockpick test: <span class=\"{}\">{}</span></h1><p>{}</p>",
        r.valid.as_str(),
        r.valid.as_str(),
        r.valid.as_str().to_uppercase(),
        e(&r.why)
    );
    let _ = write!(
        h,
        "<p>{} scenario(s) in {:.1} s (budget {:.0} s)</p>",
        r.scenarios.len(),
        r.elapsed_ms as f64 / 1000.0,
        r.budget_ms as f64 / 1000.0
    );
    // What summary.txt says past the verdict, as the terminal showed it.
    let details = summary_details(r);
    let said: Vec<&str> = details.lines().map(str::trim).collect();
    let _ = write!(h, "<pre>{}</pre>", e(&said.join("\n")));
    h.push_str(
        "<h2>Scenarios</h2><table><tr><th>scenario</th><th>aims at</th><th>verdict</th>\
         <th>violations</th><th>time</th><th>replay</th></tr>",
    );
    for s in &r.scenarios {
        let link = s
            .run_dir
            .as_ref()
            .map(|d| {
                let rel = d.strip_prefix(dir).unwrap_or(d).join(layout::REPORT_FILE);
                format!(
                    "<a href=\"{}\">{}</a>",
                    e(&rel.display().to_string()),
                    e(&s.id)
                )
            })
            .unwrap_or_else(|| e(&s.id));
        let _ = write!(
            h,
            "<tr class=\"{}\"><td>{link}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} s</td><td><code>{}</code></td></tr>",
            e(&s.verdict),
            e(&s.aims.join(", ")),
            e(&s.verdict),
            e(&s.error.clone().unwrap_or_else(|| s.violations.join(", "))),
            s.elapsed_ms as f64 / 1000.0,
            e(&s.replay)
        );
    }
    h.push_str("</table><h2>Cells</h2><table><tr><th>cell</th><th>scenarios</th><th>faults started</th><th>exercised</th><th>needed</th></tr>");
    for c in &r.cells {
        let class = if c.exercised >= c.needed {
            "valid"
        } else {
            "unknown"
        };
        let _ = write!(
            h,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e(&c.cell),
            c.tries,
            c.started,
            c.exercised,
            c.needed
        );
    }
    h.push_str("</table></body></html>\n");
    h
}

fn junit_xml(r: &SuiteResults) -> String {
    use reports::escape::xml as x;
    // Beside a violation, the cells not exercised are no second failure (the suite stops at
    // its first, or went on past it with --keep-going): the coverage case is then skipped, as
    // a run's junit.xml skips what it did not reach before its stop.
    let stopped = r.valid == Validity::Invalid;
    let coverage_fails = !r.not_exercised.is_empty() && !stopped;
    let failures = r
        .scenarios
        .iter()
        .filter(|s| s.verdict == "invalid")
        .count()
        + usize::from(coverage_fails);
    let skipped = usize::from(!r.not_exercised.is_empty() && stopped);
    let errors = r.scenarios.iter().filter(|s| s.verdict == "error").count();
    let mut j = String::new();
    let _ = writeln!(j, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        j,
        "<testsuite name=\"lockpick test\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\">",
        r.scenarios.len() + 1,
        r.elapsed_ms as f64 / 1000.0
    );
    for s in &r.scenarios {
        let _ = write!(
            j,
            "  <testcase classname=\"lockpick.test\" name=\"{}\" time=\"{:.3}\">",
            x(&s.id),
            s.elapsed_ms as f64 / 1000.0
        );
        match s.verdict.as_str() {
            "invalid" => {
                let _ = write!(
                    j,
                    "<failure message=\"{}\">{}</failure>",
                    x(&s.violations.join(", ")),
                    x(&s.replay)
                );
            }
            "error" => {
                let _ = write!(
                    j,
                    "<error message=\"{}\"/>",
                    x(&s.error.clone().unwrap_or_default())
                );
            }
            _ => {}
        }
        let _ = writeln!(j, "</testcase>");
    }
    // The coverage gate as a test case of its own: a suite that exercised less than it asked
    // for must not read green.
    let _ = write!(
        j,
        "  <testcase classname=\"lockpick.test\" name=\"coverage\">"
    );
    if coverage_fails {
        let _ = write!(
            j,
            "<failure message=\"requested, not exercised\">{}</failure>",
            x(&r.not_exercised.join(", "))
        );
    } else if skipped > 0 {
        let _ = write!(
            j,
            "<skipped message=\"not exercised beside the violation found\">{}</skipped>",
            x(&r.not_exercised.join(", "))
        );
    }
    let _ = writeln!(j, "</testcase>");
    let _ = writeln!(j, "</testsuite>");
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario's run asks for its schedule's kinds, and for the directions and shapes its
    /// faults have, each once, in the order they first come: a slow clock asks for
    /// `--clock-faults slow`, a stall for its aim and wake-up op; a pause has no setting.
    #[test]
    fn a_scenarios_run_asks_for_what_its_schedule_holds() {
        let schedule = nemesis::schedule::Schedule::parse(
            r#"{"version": 1, "nodes": 1, "faults": [
                {"id": "f1", "kind": "clock", "at_ms": 100, "length_ms": 900, "nodes": ["n1"],
                 "mode": "slow", "rate": 0.5},
                {"id": "f2", "kind": "pause", "at_ms": 2000, "length_ms": 500, "nodes": ["n1"]},
                {"id": "f3", "kind": "client-pause", "at_ms": 3000, "length_ms": 900,
                 "shape": "boundary", "wake": "renew", "after_ms": 30},
                {"id": "f4", "kind": "clock", "at_ms": 5000, "length_ms": 900, "nodes": ["n1"],
                 "mode": "bump-forward", "delta_ms": 2000},
                {"id": "f5", "kind": "clock", "at_ms": 7000, "length_ms": 900, "nodes": ["n1"],
                 "mode": "slow", "rate": 0.5}]}"#,
        )
        .unwrap();
        assert_eq!(
            asked_of(&schedule),
            [
                "--nemesis",
                "clock,pause,client-pause",
                "--clock-faults",
                "slow,bump-forward",
                "--client-faults",
                "boundary,renew"
            ]
        );
    }

    /// A duration or nemesis interval set in the config file is named at its file, line and
    /// key, with what to use instead; one typed on the command line as the flag, unless at
    /// its default; a command-line flag over the file's key is the flag's. Nothing given,
    /// nothing said.
    #[test]
    fn settings_the_suite_does_not_use_are_named_where_they_were_given() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lockpick.toml");
        std::fs::write(
            &file,
            "[workload]\nclients = 3\nduration = \"20s\"\n\n[nemesis]\nnemesis_interval = \"1s\"\n",
        )
        .unwrap();
        let path = file.display().to_string();
        let bare = dir.path().join("bare.toml");
        std::fs::write(&bare, "[workload]\nclients = 3\n").unwrap();
        let bare = bare.display().to_string();
        let budget = "--budget (now 6m)";
        let cases: [(&[&str], &[&str]); 5] = [
            (
                &["--config", &path],
                &[
                    ":3: `workload.duration` = \"20s\" does not apply to the suite: each \
                     scenario's length comes from its plan; bound the whole suite with --budget \
                     (now 6m)",
                    ":6: `nemesis.nemesis_interval` = \"1s\" does not apply to the suite",
                ],
            ),
            (
                &["--config", &path, "--duration", "5s"],
                &[
                    "--duration 5s does not apply",
                    ":6: `nemesis.nemesis_interval`",
                ],
            ),
            (&["--duration", "5s"], &["--duration 5s does not apply"]),
            (&["--config", &bare, "--duration", "30s"], &[]),
            (&[], &[]),
        ];
        for (args, said) in cases {
            let mut argv: Vec<std::ffi::OsString> = vec!["lockpick".into(), "test".into()];
            argv.extend(args.iter().map(Into::into));
            let (argv, origins) = crate::config_file::expand(argv).unwrap();
            let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
            let crate::cli::Command::Test(a) = cli.command else {
                unreachable!("parsed as `test`")
            };
            let warnings = unused_settings(&a.run, &origins, &a.budget);
            assert_eq!(warnings.len(), said.len(), "{args:?}: {warnings:?}");
            for (w, s) in warnings.iter().zip(said) {
                assert!(w.contains(s), "{args:?}: {w}");
                if s.starts_with(':') {
                    assert!(w.starts_with(&format!("{path}{s}")), "{args:?}: {w}");
                }
                assert_eq!(w.contains(budget), w.contains("duration"), "{args:?}: {w}");
            }
        }
    }

    /// A suite whose budget has no room for its first scenario says so, with the numbers the
    /// scenario loop compared and a budget that runs it.
    #[test]
    fn a_budget_too_small_for_the_first_scenario_names_both_lengths() {
        // (--budget, the first scenario's planned length, a run's cost beyond it, said)
        for (budget_s, planned_ms, overhead_ms, said) in [
            (
                5,
                2_000,
                plan::OVERHEAD_MS_GUESS,
                "nothing was run: --budget 5s is too small for the first scenario, planned for \
                 2.0 s plus about 4.0 s to start and check a run; give --budget 7s or more",
            ),
            (
                1,
                4_000,
                4_000,
                "--budget 1s is too small for the first scenario, planned for 4.0 s plus about \
                 4.0 s to start and check a run; give --budget 9s or more",
            ),
            // A length of whole seconds still needs the next one: time passes before it.
            (70, 68_000, 4_000, "--budget 1m 10s is too small"),
            (70, 68_000, 4_000, "give --budget 73s or more"),
            (10, 6_500, 3_700, "give --budget 11s or more"),
        ] {
            let d = DidNotFit {
                planned_ms,
                overhead_ms,
                left_ms: budget_s * 1000,
            };
            let got = d.first_scenario(Duration::from_secs(budget_s));
            assert!(got.contains(said), "{got}");
        }
    }

    /// A suite that ran some scenarios and stopped with time left says why it stopped then.
    #[test]
    fn a_budget_that_ends_a_suite_early_says_what_did_not_fit() {
        let d = DidNotFit {
            planned_ms: 4_000,
            overhead_ms: 3_600,
            left_ms: 7_540,
        };
        assert_eq!(
            d.next_scenario(),
            "the budget ran out: the next scenario, planned for 4.0 s plus about 3.6 s to start \
             and check it, did not fit the 7.5 s left"
        );
    }

    /// The summary's line of kinds counts each kind's cells met, in the plan's order.
    #[test]
    fn cells_are_counted_by_their_kind() {
        let row = |cell: &str, exercised: u64| CellRow {
            cell: cell.to_string(),
            tries: 1,
            started: 1,
            exercised,
            needed: 1,
        };
        let cells = [
            row("contention mutex", 1),
            row("client-pause boundary/renew", 1),
            row("contention counter", 1),
            row("kill on primary", 0),
            row("client-pause waiter", 0),
        ];
        assert_eq!(
            cells_by_kind(&cells),
            "contention 2/2, client-pause 1/2, kill 0/1"
        );
    }
}
