//! The command line, parsed into plain structs first; `config.rs` turns them into the runner's
//! resolved configuration.

use crate::flags::RunArgs;
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

/// The command line, with `--adapter`'s and `--runtime`'s long help written from the
/// registries: each service's sentence, options and node count, and each runtime's, come from
/// their own files, so a new one needs no line here.
pub fn command() -> clap::Command {
    let listings = [("adapter", services_help()), ("runtime", runtimes_help())];
    let mut cmd = Cli::command().mut_subcommand("demo", |c| {
        crate::suite::DEMO_DEFAULTS
            .iter()
            .fold(c, |c, (flag, value)| {
                c.mut_arg(flag.name, |a| a.default_value(*value))
            })
            .after_help(DEMO_AFTER)
    });
    // The suite plans each scenario's length and faults: these flags of `run` shape nothing
    // there (a config file may still hold them), and its help says so instead of a default,
    // with what to use instead; the suite warns of one given.
    for suite in ["test", "demo"] {
        cmd = cmd.mut_subcommand(suite, |c| {
            crate::suite::NOT_IN_SUITE
                .iter()
                .fold(c, |c, (flag, instead)| {
                    c.mut_arg(flag.name, |a| {
                        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                        a.help(format!(
                            "{help}. Not in the suite: {instead} (given here or in the \
                             --config file, it is warned about)"
                        ))
                        .hide_default_value(true)
                    })
                })
        });
    }
    for (arg, listing) in listings {
        let with_arg: Vec<String> = cmd
            .get_subcommands()
            .filter(|c| c.get_arguments().any(|a| a.get_id() == arg))
            .map(|c| c.get_name().to_string())
            .collect();
        for name in with_arg {
            cmd = cmd.mut_subcommand(&name, |c| {
                c.mut_arg(arg, |a| {
                    let short = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                    a.long_help(format!("{short}\n{listing}"))
                })
            });
        }
    }
    cmd
}

/// A flag that takes a value followed by another flag (`--clients --duration 2s`): its value
/// was left out. Values may start with `-` (`--drift -1`), so clap would take the next flag
/// for the value, or blame the word after it; this names the flag instead. `args` is the
/// whole command line; only long flags of the subcommand named first are looked at.
pub fn value_left_out(cmd: &clap::Command, args: &[std::ffi::OsString]) -> Option<String> {
    let sub = cmd.find_subcommand(args.get(1)?.to_str()?)?;
    let needs_value = |long: &str| {
        sub.get_arguments().any(|a| {
            a.get_long() == Some(long)
                && a.get_action().takes_values()
                && a.get_num_args().is_none_or(|n| n.min_values() > 0)
        })
    };
    let is_flag = |word: &str| {
        word.strip_prefix("--")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic()))
    };
    // Bounded by the argument list.
    for pair in args[2..].windows(2) {
        let (Some(flag), Some(next)) = (pair[0].to_str(), pair[1].to_str()) else {
            continue;
        };
        if let Some(long) = flag.strip_prefix("--").filter(|l| !l.contains('=')) {
            if needs_value(long) && is_flag(next) {
                return Some(format!(
                    "{flag}: a value is required, and {next} is a flag: was the value left out? \
                     (see `lockpick {} --help`)",
                    sub.get_name()
                ));
            }
        }
    }
    None
}

/// One entry per registered runtime: `name`: where it runs the nodes.
pub fn runtimes_help() -> String {
    nemesis::RUNTIMES
        .iter()
        .map(|r| format!("\n  {}: {}.", r.name(), r.about()))
        .collect()
}

/// One entry per registered service: `name`: what it is; its options (values, the default
/// first, and what each does); its node count where it is not one.
pub fn services_help() -> String {
    let mut out = String::new();
    for s in workloads::SERVICES {
        out.push_str(&format!("\n  {}: {}.", s.name(), s.about()));
        for o in s.options() {
            out.push_str(&format!(
                " --adapter-opt {}={}: {}.",
                o.name,
                o.values.join("|"),
                o.help
            ));
        }
        if s.nodes_default() != 1 {
            out.push_str(&format!(" --nodes {} unless given.", s.nodes_default()));
        }
    }
    out
}

const ABOUT: &str = "Jepsen-style fault-injection harness for distributed lock services.

lockpick drives a lock service's HTTP API with concurrent clients while a nemesis pauses and
kills the service and stalls clients past their leases; it records every operation in
history.jsonl and proves from that history whether mutual exclusion and fencing held.";

const AFTER: &str =
    "Exit codes: 0 valid, 1 invalid (a violation was proven), 2 unknown (the history \
proves nothing either way), 3 error (bad flag or config, setup failure, harness crash).

Start with `lockpick demo`, then `lockpick run --help`.";

#[derive(Debug, Parser)]
#[command(name = "lockpick", version, about = ABOUT, after_help = AFTER)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the suite (`test`) against the embedded reference lock service and fenced store, with
    /// 1 s leases so it takes a minute or two (2 s leases: about three minutes): every fault of the local runtime this machine
    /// supports (pause, kill, client stalls, clock skew; partitions need `--runtime netns`),
    /// aimed until each was exercised; then print the verdict and where to read it.
    #[command(mut_arg("schedule", |a| a.hide(true)))]
    Demo(TestArgs),
    /// The suite CI gates on: short scenarios aimed at every fault the target and this machine
    /// allow (each clock direction, client-stall shape, pause and kill role, partition
    /// topology, contention), until each was exercised; stops at the first violation and
    /// shrinks it. The same target flags as `run`.
    // Each scenario's schedule is the suite's own: `--schedule` is refused, so not shown.
    #[command(long_about = TEST_ABOUT, after_help = TEST_AFTER, mut_arg("schedule", |a| a.hide(true)))]
    Test(TestArgs),
    /// Run one test: start or reach the lock service, drive it under faults drawn from the
    /// seed (or replayed), check the history. For hand-shaped runs; `test` is the suite.
    Run(RunArgs),
    /// Check that a lock service speaks what its adapter expects, in a few requests, without
    /// running a test: the same target flags as `run`.
    #[command(long_about = PROBE_ABOUT, after_help = PROBE_AFTER)]
    Probe(RunArgs),
    /// Write a run's history in another tool's format (jepsen: EDN ops, one map per line).
    Export(ExportArgs),
    /// Write a commented starter config (lockpick.toml) to run with `run --config`.
    Init(InitArgs),
    /// Tell, for each fault, whether this machine can run it, and what is missing if not. Exit
    /// 0 when the required faults (pause, kill, client-pause: what every run may draw) can run,
    /// with a warning naming any optional one (clock, partition, netem) that cannot; exit 3
    /// when a required one cannot. With --config, first the file's settings as `run` reads them (exit
    /// 3 naming the line of a bad one), then each host of its [[nodes]] (--runtime
    /// ssh): reachable, root or passwordless sudo, architecture, free disk, iptables, netem,
    /// ptrace; exit 3 when a host lacks what every run needs.
    Doctor(DoctorArgs),
    /// Undo what a killed run left behind (network namespaces, links, rules; on ssh hosts the
    /// run's processes, chain, qdisc and directory), from the state files of the run
    /// directories under PATH.
    Cleanup(CleanupArgs),
    /// Check a history file or a run directory offline and print the verdict.
    Check(CheckArgs),
    /// Regenerate a run directory's report.html, junit.xml and summary.txt from its files.
    Report(ReportArgs),
    /// Write a synthetic history, correct by construction or with violations injected, for
    /// tests and benchmarks.
    Synth(SynthArgs),
    /// From a failing run, find the smallest fault schedule that still fails with the same
    /// violation kind: rerun it without faults, with fewer faults (delta debugging), shorter
    /// faults and a shorter run, each candidate a real run of this binary.
    Shrink(ShrinkArgs),
    /// Serve the reference lock protocol (the embedded default target).
    Lockd(LockdArgs),
    /// Serve the fenced store: the resource the lock protects.
    Store(StoreArgs),
    /// The ssh runtime's clock agent, run on a node's host by the copy of this binary there.
    #[command(hide = true)]
    ClockAgent(crate::agent_cmd::ClockAgentArgs),
    /// A run's live check of its history so far, in a process of its own (src/live.rs).
    #[command(hide = true)]
    LiveCheck(crate::live::LiveCheckArgs),
}

const PROBE_ABOUT: &str = "Check that a lock service speaks what its adapter expects, in a few \
requests, without running a test. The target flags are `run`'s (--url, --node-cmd, --adapter, \
--config, --store-url, --store-cmd, --nodes ...): the probe starts what `run` would start, \
without preparing any fault (--nemesis and --schedule are ignored), probes it and stops it. \
`run` makes the same checks once the service is up, before its clock starts.

Through the adapter, in order:
  1. the health path answers 200 (GET /v1/health for the reference protocol);
  2. client probe-1 acquires the lock `lockpick-probe` and is granted it with a numeric
     \"token\" (and a numeric \"ttl_ms\", if the answer has one);
  3. client probe-2 is not granted that lock while probe-1 holds it (409 `held`);
  4. probe-1 renews it;
  5. with a store (the counter workload), probe-1 writes 1 to the key `lockpick-probe` with
     its token and reads 1 back;
  6. probe-1 releases it, then probe-2 is granted it and releases it;
  7. GET /v1/time is noted: answered, or absent (not a failure; only clock faults use it).

On success it prints each request and answer, one line each, and exits 0. The first check
that fails ends it with exit 3 and one line naming the request, the answer (status and
abridged body) and what was expected, e.g.
  probe: POST /v1/locks/lockpick-probe/acquire (probe-1) answered 201 {\"token\":5}; expected
  200 with a numeric \"token\"
Nothing is recorded in a history. docs/protocol.md describes the reference protocol.";

const PROBE_AFTER: &str = "Examples:
  lockpick probe                                           the embedded lockd and store
  lockpick probe --url http://127.0.0.1:7000 --workload mutex
  lockpick probe --node-cmd 'python3 my_lockd.py {port}' --store-url http://127.0.0.1:7001
  lockpick probe --adapter etcd

Exit codes: 0 the service passed, 3 it failed a check (or could not be started).";

#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Stop planning scenarios when the next one would end past this, from the suite's start;
    /// cells not exercised by then make the verdict unknown. The default fits every cell of a
    /// single-node target with the default 2 s ttl (24 cells for the embedded lockd, 3-4 minutes) with room for
    /// a retry of the few that miss their state. One too short for the first scenario runs
    /// nothing and says so, naming the budget that would run it (the suite's plan is still
    /// written: `--budget 1s` shows the plan alone).
    #[arg(long, default_value = "6m", value_name = "DURATION")]
    pub budget: String,
    /// Exercised instances every cell needs before the suite counts it covered.
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub times: u64,
    /// Go on after a scenario found a violation (every cell is still planned): the suite
    /// then lists every violation kind it met.
    #[arg(long)]
    pub keep_going: bool,
    /// Do not shrink the first failing scenario.
    #[arg(long)]
    pub no_shrink: bool,
    /// How long shrinking the first failing scenario may take.
    #[arg(long, default_value = "2m", value_name = "DURATION")]
    pub shrink_budget: String,
}

const TEST_ABOUT: &str = "Run the suite CI gates on: short scenarios, each a real `lockpick run` \
with an aimed fault schedule, that together exercise every fault the target and this machine allow, \
until each has met the state it aims at (docs/checkers.md, \"Exercised\").

The plan's cells: contention on the mutex, counter and bank workloads (no fault, ten clients \
asking in rounds; counter and bank where grants carry tokens; only the --workload named); a holder stalled just past a \
lease of an odd length (odd-ttl); each client-stall aim (boundary, next-grant, long) with each wake-up op (renew, \
release, and write, read on the counter workload), and waiter; kill and pause of the primary \
(and of another node, with --nodes 2+); each clock direction (bump-forward, bump-back, strobe, \
fast, slow) on each node role; each partition topology (--runtime netns); netem. Cheapest and \
most likely first. After each scenario the suite reads what it exercised and plans the next \
from what is still open; a cell that missed its state is tried again (at most 3 times; a kill \
alone, with leases twice as long each time, for a node slower to restart than a lease).

The suite stops at the first violation (unless --keep-going; the scenario's clients stop as soon as \
a live check of its history proves a safety violation: --stop-on-violation), shrinks it (lockpick shrink) and \
prints the command that replays it. Its verdict is valid only when no scenario found a \
violation and every cell was exercised --times times; otherwise unknown, naming what was not \
exercised. --duration, --nemesis-interval and --seed's single schedule do not apply: each \
scenario's length comes from the plan and --budget bounds the whole suite (a --duration or \
--nemesis-interval given, on the command line or in the --config file, is named in a warning, \
with the file and line it was set on); --nemesis limits the kinds planned. --workload, given \
(or set in the config file), is every scenario's workload: only its own contention cell is \
planned and counted, and the cell count and the verdict name the other workloads' cells left \
out; not given, the fault scenarios run the default workload and the contention cells each \
workload the service can.";

const DEMO_AFTER: &str = "Examples:
  lockpick demo                                      the embedded lockd and store, 1 s leases
  lockpick demo --unsafe racy                        watch it find a double grant
  lockpick demo --ttl 2s --hold 50ms..1s             run's lease and holds (about three minutes)

Results go to <out>/demo/<timestamp>/, as `lockpick test` writes them: index.html (a row per
scenario, each linking its report), summary.txt, suite.json, junit.xml, scenarios/<id>/<timestamp>/
(each scenario's run directory) and schedules/. Exit codes as run's: 0 valid, 1 invalid,
2 unknown, 3 error.";

const TEST_AFTER: &str = "Examples:
  lockpick test                                      the embedded lockd and store
  lockpick test --node-cmd 'python3 my_lockd.py --host {host} --port {port} --data-dir {data_dir}'
  lockpick test --adapter etcd --workload mutex
  lockpick test --unsafe renew-grace                 watch it find a bug

Results go to <out>/<name>/<timestamp>/: index.html (a row per scenario, each linking its
report), summary.txt, suite.json, junit.xml (a test case per scenario, and one for coverage),
scenarios/<id>/<timestamp>/ (each scenario's run directory), schedules/ (each scenario's
faults). Exit codes as run's: 0 valid, 1 invalid, 2 unknown, 3 error.";

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// A history.jsonl file or a run directory.
    pub path: PathBuf,
    /// Print results.json to stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Clock-rate error the service claims to tolerate (0.01 = 1%, at most six decimals).
    /// Default: what the run's config.toml says (beside the history), else 0.
    #[arg(long, value_name = "FRACTION", allow_negative_numbers = true)]
    pub drift: Option<f64>,
    /// Extra time before a lock that stays held counts as `lock-stuck`. Default: what the
    /// run's config.toml says (beside the history), else 2s.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub liveness_grace: Option<String>,
    /// Which findings make the exit code 1, comma-separated: safety, liveness, warnings,
    /// coverage (a fault kind or client-fault shape the schedule beside the history, or the
    /// history itself, asked for and the run exercised nowhere). Default: safety,liveness, and
    /// coverage too under CI (CI or GITHUB_ACTIONS set).
    #[arg(long, value_name = "LIST", value_parser = parse_fail_on)]
    pub fail_on: Option<reports::FailOn>,
    /// Follow a history another process is still writing (a run elsewhere, a soak): print
    /// each violation as soon as what was written so far proves it (read every 250 ms by the
    /// rules that stream, at any length; checked whole by every rule while under 512 MiB),
    /// then the verdict once the file has stopped growing for --idle with no process on this
    /// machine holding it open for writing, or on Ctrl-C (the verdict of what was written by
    /// then, at best unknown). A writer elsewhere (a network mount, a copy appended in
    /// chunks) cannot be seen holding the file: --idle is what tells its pauses from its end.
    /// A file not there yet, in a folder that is, is waited for as long as --idle.
    #[arg(long)]
    pub follow: bool,
    /// With --follow: how long the file must go without growing, and without a process on
    /// this machine holding it open for writing, before the follow takes it as finished and
    /// gives its verdict. Longer for a writer that pauses or a mount that shows writes late.
    #[arg(
        long,
        value_name = "DURATION",
        requires = "follow",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    pub idle: String,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A run directory (holding results.json, history.jsonl, config.toml).
    pub run_dir: PathBuf,
    /// Which findings make the exit code 1, as for `check` (safety, liveness, warnings,
    /// coverage; comma-separated; coverage as results.json counted it). Default:
    /// safety,liveness, and coverage too under CI. Unknown exits 2, as `check` does; GitHub
    /// annotations are printed when GITHUB_ACTIONS=true.
    #[arg(long, value_name = "LIST", value_parser = parse_fail_on)]
    pub fail_on: Option<reports::FailOn>,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = SHRINK_AFTER)]
pub struct ShrinkArgs {
    /// A failing run's directory: results.json says invalid, schedule.json and config.toml are
    /// beside it.
    pub run_dir: PathBuf,
    /// Runs of each candidate schedule (timing is not deterministic): it is kept if the kind
    /// recurs in at least one.
    #[arg(long, default_value_t = 3, value_name = "K")]
    pub runs_per_candidate: u32,
    /// Stop when the next run would end past this (from the start of the shrink), and report
    /// the smallest failing schedule found so far.
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    pub budget: String,
    /// The violation kind to keep (default: the kind a run with --stop-on-violation stopped
    /// on, else the run's first safety violation).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Where candidates and their runs go (default: RUN_DIR/shrink).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

const SHRINK_AFTER: &str = "Each candidate reruns `lockpick run --config RUN_DIR/config.toml \
--schedule CANDIDATE --duration D --stop-on-violation` (it ends at its first proven safety \
violation), so any target the run could start (embedded lockd, \
--node-cmd, etcd) shrinks the same way. The end names the smallest schedule (minimal.json), the \
run directory and report that show its violation, and the command that replays it; shrink.json \
says the same for scripts.

Example:
  lockpick run --workload mutex --unsafe wall-clock --nemesis clock,pause,kill --seed 3
  lockpick shrink runs/latest --budget 5m";

#[derive(Debug, Clone, Args)]
pub struct InitArgs {
    /// Where to write it.
    #[arg(default_value = "lockpick.toml")]
    pub path: PathBuf,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// A run directory or a history.jsonl file.
    pub path: PathBuf,
    /// The format to write; `jepsen` is the one there is.
    #[arg(long, default_value = "jepsen", value_parser = ["jepsen"])]
    pub format: String,
    /// Where to write (default: history.edn beside the history); `-` writes to standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// A config file: its settings read as `lockpick run --config` reads them (a bad key or
    /// value named at its line), and its [[nodes]] checked over ssh.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct CleanupArgs {
    /// A run directory, a state.json, or a folder of runs: state files are found at any depth
    /// below it (a suite's scenario runs too; up to 12 folders down, symlinks not followed).
    #[arg(default_value = "runs")]
    pub path: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct LockdArgs {
    /// Address to listen on, e.g. 127.0.0.1:7000.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Where the token counter and the longest granted ttl are persisted.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Reproduce an anti-pattern: reuse-tokens, no-ttl, wall-clock, skip-token-check, racy,
    /// split-brain, renew-grace, unchecked-release, volatile, no-tiebreak (needs --lock-order
    /// timestamp), no-wait-timeout (a waiting acquire is never refused when its wait_ms is
    /// over), ring-regenerate (needs --lock-order ring: a member that has not seen the token
    /// for 2 s makes a new one).
    #[arg(long = "unsafe", value_name = "MODE")]
    pub unsafe_mode: Option<String>,
    /// The other members of a multi-node lockd, comma-separated HOST:PORT. The member with the
    /// smallest address holds all lock state; the others forward to it.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub peers: Vec<String>,
    /// This node's own HOST:PORT as its peers dial it (default: the --listen address).
    #[arg(long, value_name = "ADDR")]
    pub advertise: Option<String>,
    /// primary (one member holds all lock state), timestamp[:GRANULARITY] (every member
    /// stamps its clients' requests with its own clock in ticks of GRANULARITY, default 10ms,
    /// and the members exchange them: the smallest (timestamp, member) enters), or ring[:IDLE]
    /// (one token goes round the members in address order; a member grants only while it
    /// holds it, during the first IDLE of its visit, default 5ms).
    #[arg(long, default_value = "primary", value_name = "ORDER")]
    pub lock_order: String,
}

#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Address to listen on, e.g. 127.0.0.1:7001.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// all (reads and writes move the fence), write (only writes do), none (no fencing),
    /// off-by-one (a token one below the fence passes: a bug, on purpose), check-then-put
    /// (a write checks, waits 100 ms, then puts: not atomic, on purpose), one-unfenced (the
    /// register named ...0, balance-A0 or counter-L0, is not fenced, every other is as in all:
    /// on purpose).
    #[arg(long, default_value = "all", value_name = "MODE")]
    pub fence: String,
}

#[derive(Debug, Clone, Args)]
pub struct SynthArgs {
    /// Roughly how many events to write (the wind-down adds a few).
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub events: usize,
    /// Concurrent simulated clients.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub clients: usize,
    /// Locks (lock `L<i>` guards counter register `k<i>`).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub locks: usize,
    /// What the simulated clients do: counter (one lock at a time, the counter's read and
    /// write under it; the nemesis and lost answers as configured), or bank (transfers between
    /// --accounts accounts, both locks held, sorted order, every answer kept; no nemesis, no
    /// --inject): the graph checks' benchmark.
    #[arg(long, default_value = "counter", value_name = "counter|bank")]
    pub workload: String,
    /// Accounts of the bank workload (2 or more).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub accounts: usize,
    /// Seed: same seed and flags, same history.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// The chance that a client op's answer is lost (an indeterminate `info` op).
    #[arg(long, default_value_t = 0.01, value_name = "P")]
    pub info_rate: f64,
    /// Inject one violation of this kind at a random point (repeatable). The history is then
    /// built in memory, unless --inject-every streams it.
    #[arg(long, value_name = "KIND", value_parser = inject_kinds())]
    pub inject: Vec<String>,
    /// With --inject: stream the history and inject one violation in every stretch of N
    /// events, the --inject kinds in turn, so a history of any length has violations all
    /// along it in bounded memory (a kind that finds no place in a stretch tries the next).
    #[arg(long, value_name = "N", requires = "inject")]
    pub inject_every: Option<usize>,
    /// No nemesis ops (pauses, partitions, kills, clock faults of the simulated service).
    #[arg(long)]
    pub no_nemesis: bool,
    /// Where to write the history (`-`: standard output).
    #[arg(long, short, default_value = "-", value_name = "PATH")]
    pub out: String,
}

/// The `--fail-on` value parser.
fn parse_fail_on(s: &str) -> Result<reports::FailOn, reports::FailOnError> {
    s.parse()
}

/// `synth --inject`: every kind the injector makes, named by the injector itself, so `--help`
/// lists them all and a new one cannot be left out.
fn inject_kinds() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        checkers::inject::InjectKind::all()
            .into_iter()
            .map(checkers::inject::InjectKind::as_str),
    )
}
