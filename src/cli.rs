//! The command line, parsed into plain structs first; `config.rs` turns them into the runner's
//! resolved configuration.

use clap::{Args, CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

/// The command line, with `--adapter`'s and `--runtime`'s long help written from the
/// registries: each service's sentence, options and node count, and each runtime's, come from
/// their own files, so a new one needs no line here.
pub fn command() -> clap::Command {
    let listings = [("adapter", services_help()), ("runtime", runtimes_help())];
    let mut cmd = Cli::command();
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
    /// 1 s leases so it takes a few minutes (2 s leases: about three): every fault of the local runtime this machine
    /// supports (pause, kill, client stalls, clock skew; partitions need `--runtime netns`),
    /// aimed until each was exercised; then print the verdict and where to read it.
    Demo(TestArgs),
    /// The suite CI gates on: short scenarios aimed at every fault the target and this machine
    /// allow (each clock direction, client-stall shape, pause and kill role, partition
    /// topology, contention), until each was exercised; stops at the first violation and
    /// shrinks it. The same target flags as `run`.
    #[command(long_about = TEST_ABOUT, after_help = TEST_AFTER)]
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
    /// when a required one cannot. With --config, also each host of its [[nodes]] (--runtime
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

#[derive(Debug, Clone, Args)]
// A later flag overrides an earlier one: that is how a flag overrides `--config`'s file.
// Values may start with `-`, so `--duration -1s` or `--drift -1` is judged as that flag's
// value and refused naming the flag, not taken for a flag of its own.
#[command(
    after_help = RUN_AFTER,
    args_override_self = true,
    allow_hyphen_values = true
)]
pub struct RunArgs {
    /// Read the test from a TOML file (see `lockpick init`); flags given here override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What the clients do: `counter` (under the lock, read the store register with the token
    /// and write value+1 with it; checks fencing and lost updates), `mutex` (acquire, hold
    /// while renewing a third of the way into each lease, release; checks mutual exclusion
    /// only) or `bank` (transfers between --accounts accounts, each a store register guarded
    /// by a lock of its own, A0, A1, ...: take both accounts' locks in the
    /// --lock-order-policy order, read both balances, write both new ones with their tokens,
    /// release both; two locks held at once, so it can deadlock, and checks `deadlock`,
    /// fencing, the accounts' total and the transfers' serializability; where grants carry no
    /// token, each transfer writes only while its leases have a quarter left by its clock,
    /// and the data checks alone prove a late write).
    /// Default: counter, or mutex for a service whose grants carry no fencing token (a Redis
    /// lock value fences nothing).
    #[arg(long, value_name = "mutex|counter|bank")]
    pub workload: Option<String>,
    /// Concurrent client workers.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub clients: usize,
    /// Locks the clients contend for (each counter lock guards its own register).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub locks: usize,
    /// Accounts of the bank workload (2 or more), each with its lock: fewer accounts than
    /// clients make transfers wait for each other's locks.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub accounts: usize,
    /// The order a bank transfer takes its two locks in: `sorted` (by account number: no
    /// cycle of waits can form, the safe discipline) or `random` (the paying account first,
    /// so opposite transfers take the same locks in opposite orders and each may hold one
    /// while waiting for the other: a deadlock unless the service refuses a wait once its
    /// --acquire-wait is over; `--unsafe no-wait-timeout` never does).
    #[arg(long, default_value = "sorted", value_name = "sorted|random")]
    pub lock_order_policy: String,
    /// Lease length requested with every acquire (and every renew, unless --renew-ttl).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub ttl: String,
    /// Lease length requested with every renew (default: the same as --ttl), 10ms to 1h. A
    /// service must set a renewed lease's expiry to now + the renew's ttl, whether shorter or
    /// longer than the acquire's: a shorter one tests that the lease really ends sooner (the
    /// next holder may be granted then), a longer one that it really lasts longer. Holders
    /// renew a third of the way into the lease in force: ttl/3 after the grant, then
    /// renew-ttl/3 after each renew. Not with --adapter etcd (a keepalive renews for the
    /// granted ttl).
    #[arg(long, value_name = "DURATION")]
    pub renew_ttl: Option<String>,
    /// How long a client holds the lock once granted, drawn uniformly from MIN..MAX.
    #[arg(long, default_value = "50ms..1s", value_name = "MIN..MAX")]
    pub hold: String,
    /// When clients ask for the lock: steady (again as soon as the last hold ended), or
    /// rounds:WINDOW (contention rounds: every client asks once a round, at a time drawn
    /// uniformly from the round's first WINDOW; a round lasts 4 x WINDOW and starts on a
    /// multiple of it on the realtime clock). Results then count the contended rounds and
    /// those that ended with more than one holder.
    #[arg(long, default_value = "steady", value_name = "SHAPE")]
    pub arrivals: String,
    /// How long clients run before the final heal (durations: 500ms, 2s, 1m).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub duration: String,
    /// Stop after this many lock cycles even if time remains: acquire attempts, each with the
    /// renewals, store ops and release that follow a grant.
    #[arg(long, value_name = "N")]
    pub ops_max: Option<u64>,
    /// Past this an operation is recorded as indeterminate (info): the timeout of each request
    /// (an acquire's is --acquire-wait plus this).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub op_timeout: String,
    /// How long an acquire may wait for a held lock, as real clients do (default: 5 x --ttl,
    /// several leases). The reference protocol sends it as `wait_ms` (lockd answers `held` once
    /// it has waited that long); with --adapter etcd, `lock/lock` waits that long while the
    /// client keeps its lease alive every ttl/3 (not while it is stalled by a client-pause). An
    /// acquire's request timeout is this wait plus --op-timeout; 0 asks without waiting.
    #[arg(long, value_name = "DURATION")]
    pub acquire_wait: Option<String>,
    /// Seed for the workload and the fault schedule (default: drawn at random and recorded).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Faults, comma-separated: pause, kill, client-pause, clock, partition, netem; `none` for a
    /// run without faults. Default: every fault the target and this machine allow (client-pause only with
    /// --url; clock only where a clock backend runs; partition and netem only with
    /// --runtime netns).
    #[arg(long, value_name = "LIST")]
    pub nemesis: Option<String>,
    /// Replay this fault schedule (a run directory's schedule.json) instead of drawing one:
    /// the same faults on the same nodes at the same offsets from the run's start. The
    /// schedule decides the faults; --nemesis, --nemesis-interval, --nemesis-targets,
    /// --clock-faults, --clock-bump, --clock-rate and --partition-topologies, which shape a
    /// drawn plan, do nothing then. Every other setting comes from the flags and --config.
    #[arg(long, value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Clock faults to draw from: bump-forward, bump-back, strobe, fast, slow (default: all).
    #[arg(long, value_name = "LIST")]
    pub clock_faults: Option<String>,
    /// Client-pause shapes to draw from, comma-separated. What a stall is aimed at: `boundary`
    /// (a holder wakes a few ms after its lease surely ended), `next-grant` (a holder wakes a
    /// few ms after another client was granted its lock), `long` (a holder stalls 1.5-2.5
    /// leases, several grants), `waiter` (a client stalls while its acquire waits, its
    /// keepalives stopped, longer than its lease, then goes on waiting). What a holder wakes
    /// into: `renew`, `write`, `release`, `read` (the counter workload; a mutex holder releases
    /// instead of reading or writing). Default: all of them.
    #[arg(long, value_name = "LIST")]
    pub client_faults: Option<String>,
    /// Which clocks a clock fault moves: `wall` (realtime only) or `all` (monotonic too, which
    /// is what lease timers run on).
    #[arg(long, default_value = "wall", value_name = "wall|all")]
    pub clock_scope: String,
    /// How far a clock bump or strobe jumps (default: 3 x the longer of ttl and renew ttl).
    #[arg(long, value_name = "DURATION")]
    pub clock_bump: Option<String>,
    /// How much faster (fast) or slower (slow: 1/FACTOR) a clock runs.
    #[arg(long, default_value_t = 4.0, value_name = "FACTOR")]
    pub clock_rate: f64,
    /// The lock service and how lockpick drives it (default: reference, lockd's own protocol).
    /// `--help` lists every service lockpick knows, with its options and node count.
    #[arg(long, default_value = "reference", value_name = "NAME")]
    pub adapter: String,
    /// etcd's JSON gateway prefix: /v3 (etcd 3.4 and later) or /v3beta (etcd 3.3).
    #[arg(long, default_value = "/v3", value_name = "PREFIX")]
    pub etcd_api: String,
    /// A setting of the --adapter's own, NAME=VALUE (repeat the flag, or join with commas):
    /// each service's options and their values are listed under --adapter in `--help` (the
    /// first value is the default), and an unknown one is refused with the list.
    #[arg(long, value_name = "NAME=VALUE", value_delimiter = ',')]
    pub adapter_opt: Vec<String>,
    /// The file whose [template] section describes the API (set by --config).
    #[arg(long, value_name = "FILE", hide = true)]
    pub template_file: Option<PathBuf>,
    /// The file whose `[[nodes]]` (and `[ssh]`) list the hosts of --runtime ssh (set by
    /// --config).
    #[arg(long, value_name = "FILE", hide = true)]
    pub hosts_file: Option<PathBuf>,
    /// Nodes of the lock service (embedded lockd: one primary, the others forward to it).
    /// Client i talks to node i mod N. Templates get the other nodes as {peers}. Default 1,
    /// or what the --adapter needs to be itself (listed under --adapter in `--help`).
    #[arg(long, value_name = "N")]
    pub nodes: Option<usize>,
    /// Which nodes a pause, kill or clock fault hits: one, minority, majority, all, primary.
    #[arg(long, default_value = "one", value_name = "TARGET")]
    pub nemesis_targets: String,
    /// Where nodes run (default: the first listed in `--help`, or the first that makes
    /// network faults and needs no hosts when the run asks for partition or netem faults).
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// Partition topologies to draw from: isolate, halves, majorities-ring, bridge, clients
    /// (default: all that cut something with this many nodes).
    #[arg(long, value_name = "LIST")]
    pub partition_topologies: Option<String>,
    /// Quiet time between faults (jittered ±50%).
    #[arg(long, default_value = "3s", value_name = "DURATION")]
    pub nemesis_interval: String,
    /// Start your lock service from a shell command instead of the embedded lockd. Placeholders:
    /// {host} {port} {data_dir} {id} {peers}. It must answer GET /v1/health once ready; `kill` restarts
    /// the same command with the same data dir.
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "url")]
    pub node_cmd: Option<String>,
    /// Use a lock service that is already running (only client-side faults are then possible).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Run the embedded lockd in an unsafe mode, to watch the checkers catch it:
    /// reuse-tokens, no-ttl, wall-clock, skip-token-check, racy, split-brain (needs --nodes),
    /// renew-grace (a late renew is accepted after another client was granted; the
    /// client-pause `boundary,renew` shape exposes it), unchecked-release (a lapsed holder's
    /// release frees whoever holds the lock; `long,release` exposes it), volatile (a single
    /// lockd that forgets its locks on restart; kill faults expose it), no-tiebreak (with
    /// --lock-order timestamp: equal timestamps all enter), no-wait-timeout (a waiting acquire
    /// is never refused; `--workload bank --lock-order-policy random` deadlocks on it),
    /// ring-regenerate (with --lock-order ring: a member that has not seen the token for 2 s
    /// makes a new one; a pause or partition leaves two tokens).
    #[arg(long = "unsafe", value_name = "MODE", conflicts_with_all = ["url", "node_cmd"])]
    pub unsafe_mode: Option<String>,
    /// How the embedded lockd's members decide who enters: primary (one member holds all lock
    /// state), timestamp[:GRANULARITY] (each member stamps its clients' requests with its own
    /// clock in ticks of GRANULARITY, default 10ms, the members exchange them and the smallest
    /// (timestamp, member) enters; `--unsafe no-tiebreak` orders by timestamp alone), or
    /// ring[:IDLE] (one token goes round the members and only its holder grants, for IDLE,
    /// default 5ms, after it arrives; a kill of the holder loses it, `--unsafe
    /// ring-regenerate` makes a new one after 2 s without it).
    #[arg(long, value_name = "ORDER", conflicts_with_all = ["url", "node_cmd"])]
    pub lock_order: Option<String>,
    /// Start your fenced store from a shell command (placeholders as --node-cmd).
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "store_url")]
    pub store_cmd: Option<String>,
    /// Use a fenced store that is already running.
    #[arg(long, value_name = "URL")]
    pub store_url: Option<String>,
    /// Fencing mode of the embedded store: all (reads and writes move the fence), write (only
    /// writes do), none (no fencing: the anti-pattern), off-by-one (a token one below the
    /// fence passes; the client-pause `next-grant,write` shape exposes it), check-then-put
    /// (the textbook's write as written: check the last token, then put, not atomically;
    /// `next-grant,write` exposes it), one-unfenced (every register fenced as `all` but the
    /// one named ...0, balance-A0 or counter-L0, which is not: a bank transfer's stale write
    /// lands on one account).
    #[arg(long, default_value = "all", value_name = "MODE", conflicts_with_all = ["store_url", "store_cmd"])]
    pub store_fence: String,
    /// Where run directories go.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub out: PathBuf,
    /// Test name: the run directory is <out>/<name>/<UTC timestamp>/.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Clock-rate error the service claims to tolerate (0.01 = 1%, at most six decimals: the
    /// checkers count it in whole ppm); widens lease bounds.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub drift: f64,
    /// Extra time a lock may stay held after every lease surely expired before `lock-stuck`.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub liveness_grace: String,
    /// How long a started node may take to answer GET /v1/health.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub startup_timeout: String,
    /// Skip the conformance probe `run` makes once the service is up and before its clock
    /// starts (see `lockpick probe --help`). For a service that cannot take the probe's extra
    /// lock and clients (a shared production-like instance where the lock `lockpick-probe`
    /// is not yours to take), or to compare with a run made before the probe existed. The
    /// run still stops on answers the adapter does not understand.
    #[arg(long)]
    pub no_probe: bool,
    /// Which findings make the exit code 1, comma-separated: safety, liveness, warnings,
    /// coverage (a fault kind or client-fault shape the run's schedule asked for that the run
    /// exercised nowhere: the summary's coverage table marks it). An unknown verdict exits 2
    /// whatever this says. Default: safety,liveness, and coverage too under CI (CI or
    /// GITHUB_ACTIONS set).
    #[arg(long, value_name = "LIST", value_parser = parse_fail_on)]
    pub fail_on: Option<reports::FailOn>,
    /// End the clients at the first safety violation the live check proves (the history is
    /// checked while it is written, every 250 ms or so), then heal, check and report as usual:
    /// the verdict is invalid, and the completeness says `stopped:` with the violation and
    /// when it was proven. Liveness findings never stop a run. On by default inside `lockpick
    /// test` unless --keep-going (given with --keep-going, each scenario still stops at its
    /// first violation while the suite goes on).
    #[arg(long)]
    pub stop_on_violation: bool,
}

impl RunArgs {
    /// `--nodes`, or 1 where it was not given (a resolved RunArgs has the service's own).
    pub fn nodes(&self) -> usize {
        self.nodes.unwrap_or(1)
    }
}

const RUN_AFTER: &str = "Examples:
  lockpick run --seed 7                               embedded lockd + store, every fault
  lockpick run --workload mutex --nemesis none --unsafe racy --duration 10s
  lockpick run --node-cmd './my-lockd --port {port} --dir {data_dir}' --nemesis pause,kill
  lockpick run --url http://127.0.0.1:7000 --store-url http://127.0.0.1:7001

Results go to <out>/<name>/<timestamp>/ (history.jsonl, results.json, report.html, junit.xml,
summary.txt, config.toml, lockpick.log, nodes/<id>/ logs); <out>/latest points at the newest run
and <out>/index.html lists every run.";

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
    /// single-node target with the default 2 s ttl (about 25 cells, 3-4 minutes) with room for
    /// a retry of the few that miss their state.
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

The plan's cells: contention on the mutex and counter workloads (no fault, ten clients asking \
in rounds); each client-stall aim (boundary, next-grant, long) with each wake-up op (renew, \
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
scenario's length comes from the plan; --nemesis limits the kinds planned.";

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
    #[arg(long, value_name = "FRACTION")]
    pub drift: Option<f64>,
    /// Extra time before a lock that stays held counts as `lock-stuck`. Default: what the
    /// run's config.toml says (beside the history), else 2s.
    #[arg(long, value_name = "DURATION")]
    pub liveness_grace: Option<String>,
    /// Which findings make the exit code 1, comma-separated: safety, liveness, warnings,
    /// coverage (a fault kind or client-fault shape the schedule beside the history, or the
    /// history itself, asked for and the run exercised nowhere). Default: safety,liveness, and
    /// coverage too under CI (CI or GITHUB_ACTIONS set).
    #[arg(long, value_name = "LIST", value_parser = parse_fail_on)]
    pub fail_on: Option<reports::FailOn>,
    /// Follow a history another process is still writing (a run elsewhere, a soak): print
    /// each violation as soon as a check of what was written so far proves it, then the
    /// verdict once no process on this machine has the file open for writing any more, or on
    /// Ctrl-C (the verdict of what was written by then, at best unknown). For a file a remote
    /// writer appends to, end it with Ctrl-C.
    #[arg(long)]
    pub follow: bool,
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
    /// The violation kind to keep (default: the run's first safety violation).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Where candidates and their runs go (default: RUN_DIR/shrink).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

const SHRINK_AFTER: &str = "Each candidate reruns `lockpick run --config RUN_DIR/config.toml \
--schedule CANDIDATE --duration D`, so any target the run could start (embedded lockd, \
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
    /// A config file whose [[nodes]] are checked over ssh too.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct CleanupArgs {
    /// A run directory, a state.json, or a folder of runs (searched two levels deep).
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
    /// built in memory.
    #[arg(long, value_name = "KIND", value_parser = inject_kinds())]
    pub inject: Vec<String>,
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
        checkers::inject::InjectKind::ALL.map(checkers::inject::InjectKind::as_str),
    )
}
