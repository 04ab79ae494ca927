//! The command line, parsed into plain structs first; `config.rs` turns them into the runner's
//! resolved configuration.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

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
    /// Run a test against the embedded reference lock service for 30 s with every fault this
    /// machine supports, then print where to read the results.
    Demo(RunArgs),
    /// Run a test: start or reach the lock service, drive it under faults, check the history.
    Run(RunArgs),
    /// Check a history file or a run directory offline and print the verdict.
    Check(CheckArgs),
    /// Serve the reference lock protocol (the embedded default target).
    Lockd(LockdArgs),
    /// Serve the fenced store: the resource the lock protects.
    Store(StoreArgs),
}

#[derive(Debug, Clone, Args)]
#[command(after_help = RUN_AFTER)]
pub struct RunArgs {
    /// What the clients do: `counter` (under the lock, read the store register with the token
    /// and write value+1 with it; checks fencing and lost updates) or `mutex` (acquire, hold
    /// while renewing every ttl/3, release; checks mutual exclusion only).
    #[arg(long, default_value = "counter", value_name = "mutex|counter")]
    pub workload: String,
    /// Concurrent client workers.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub clients: usize,
    /// Locks the clients contend for (each counter lock guards its own register).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub locks: usize,
    /// Lease length requested with every acquire and renew.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub ttl: String,
    /// How long a client holds the lock once granted, drawn uniformly from MIN..MAX.
    #[arg(long, default_value = "50ms..1s", value_name = "MIN..MAX")]
    pub hold: String,
    /// How long clients run before the final heal (durations: 500ms, 2s, 1m).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub duration: String,
    /// Stop after this many client operations even if time remains.
    #[arg(long, value_name = "N")]
    pub ops_max: Option<u64>,
    /// Past this an operation is recorded as indeterminate (info).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub op_timeout: String,
    /// Seed for the workload and the fault schedule (default: drawn at random and recorded).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Faults, comma-separated: pause, kill, client-pause; `none` for a run without faults.
    /// Default: every fault the target allows (client-pause only with --url).
    #[arg(long, value_name = "LIST")]
    pub nemesis: Option<String>,
    /// Quiet time between faults (jittered ±50%).
    #[arg(long, default_value = "3s", value_name = "DURATION")]
    pub nemesis_interval: String,
    /// Start your lock service from a shell command instead of the embedded lockd. Placeholders:
    /// {host} {port} {data_dir} {id}. It must answer GET /v1/health once ready; `kill` restarts
    /// the same command with the same data dir.
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "url")]
    pub node_cmd: Option<String>,
    /// Use a lock service that is already running (only client-side faults are then possible).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Run the embedded lockd in an unsafe mode, to watch the checkers catch it:
    /// reuse-tokens, no-ttl, wall-clock, skip-token-check, racy.
    #[arg(long = "unsafe", value_name = "MODE", conflicts_with_all = ["url", "node_cmd"])]
    pub unsafe_mode: Option<String>,
    /// Start your fenced store from a shell command (placeholders as --node-cmd).
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "store_url")]
    pub store_cmd: Option<String>,
    /// Use a fenced store that is already running.
    #[arg(long, value_name = "URL")]
    pub store_url: Option<String>,
    /// Fencing mode of the embedded store: all (reads and writes move the fence), write (only
    /// writes do), none (no fencing: the anti-pattern).
    #[arg(long, default_value = "all", value_name = "MODE", conflicts_with_all = ["store_url", "store_cmd"])]
    pub store_fence: String,
    /// Where run directories go.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub out: PathBuf,
    /// Test name: the run directory is <out>/<name>/<UTC timestamp>/.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Clock-rate error the service claims to tolerate (0.01 = 1%); widens lease bounds.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub drift: f64,
    /// Extra time a lock may stay held after every lease surely expired before `lock-stuck`.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub liveness_grace: String,
    /// How long a started node may take to answer GET /v1/health.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub startup_timeout: String,
}

const RUN_AFTER: &str = "Examples:
  lockpick run --seed 7                               embedded lockd + store, every fault
  lockpick run --workload mutex --nemesis none --unsafe racy --duration 10s
  lockpick run --node-cmd './my-lockd --port {port} --dir {data_dir}' --nemesis pause,kill
  lockpick run --url http://127.0.0.1:7000 --store-url http://127.0.0.1:7001

Results go to <out>/<name>/<timestamp>/ (history.jsonl, results.json, summary.txt, config.toml,
lockpick.log, nodes/<id>/ logs) and <out>/latest points at the newest run.";

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// A history.jsonl file or a run directory.
    pub path: PathBuf,
    /// Print results.json to stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Clock-rate error the service claims to tolerate (0.01 = 1%).
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub drift: f64,
    /// Extra time before a lock that stays held counts as `lock-stuck`.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub liveness_grace: String,
}

#[derive(Debug, Clone, Args)]
pub struct LockdArgs {
    /// Address to listen on, e.g. 127.0.0.1:7000.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Where the token counter and the longest granted ttl are persisted.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Reproduce an anti-pattern: reuse-tokens, no-ttl, wall-clock, skip-token-check, racy.
    #[arg(long = "unsafe", value_name = "MODE")]
    pub unsafe_mode: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Address to listen on, e.g. 127.0.0.1:7001.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// all (reads and writes move the fence), write (only writes do), none (no fencing).
    #[arg(long, default_value = "all", value_name = "MODE")]
    pub fence: String,
}
