//! `--runtime ssh`: every node on a host of its own, reached through the system's OpenSSH
//! client (so `~/.ssh/config`, agents and known_hosts work as they do for the user), one
//! multiplexed connection per host (`ControlMaster`, a socket in a directory of the run's own,
//! `ControlPersist` bounded so a master left by a killed harness goes away by itself).
//!
//! On each host, for run `R` (a short random id):
//!
//! - `/tmp/lockpick-R/`: the run's directory: the `lockpick` binary copied there (checked by
//!   SHA-256; the service command and the clock agent), and per node `<id>/` with `pid`,
//!   `stdout.log`, `stderr.log` and `data/`.
//! - iptables chain `LP-R`, jumped to from INPUT (one rule, inserted first): partitions and
//!   client cuts are rules in it; heal flushes it. No other chain or rule is touched.
//! - a netem qdisc with handle `4c50:` on the interface that carries the harness's traffic,
//!   while a netem fault holds; removed only when it has that handle.
//!
//! [`Ssh`] is the runtime kind; [`SshRuntime`] sets a run up (connects, checks, copies, makes
//! the chain) and tears it down; [`SshNode`] is node control: the service started detached
//! with `setsid` (its own process group, whose id goes to the pid file), SIGSTOP/SIGCONT/SIGKILL
//! to that group, logs fetched into the local node directory when it stops.
//! [`cleanup_from_state`] undoes a killed run from its state file.
//!
//! Invariants: every `ssh` call is bounded (`ConnectTimeout`, `ServerAliveInterval`, and a
//! deadline on the process, which is then killed); the state file lists each host, its chain
//! and its run directory before they are created, and each pid as it is known; a signal goes
//! only to a process group whose leader has the pid and the start time the pid file recorded,
//! and to processes surely the node's (its descendants, its directory, its `LOCKPICK_RUN=R/<node>`
//! tag), so a pid reused on the host is never hit; a host that stops answering is an error of the run
//! ([`SshError::Unreachable`]), never a verdict.

use crate::command::{self, CommandError};
use crate::netns::NetemSpec;
use crate::node::{BoxFuture, NodeControl, NodeLogs, Shutdown};
use crate::runtime::{NetworkFaults, NodeSpec, Runtime, RuntimeKind, RuntimeSpec};
use crate::{Error, NodeCommand, NodeError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The port a node's service listens on unless its `[[nodes]]` entry says otherwise.
pub const SERVICE_PORT: u16 = 7000;
/// Its second (peer) port.
pub const PEER_PORT: u16 = 7001;
/// How long ssh waits for a host's TCP connection.
const CONNECT_TIMEOUT_S: u32 = 5;
/// A keepalive every 2 s, and the connection given up after 3 missed: a host that stops
/// answering fails its calls within about 6 s instead of hanging.
const ALIVE_INTERVAL_S: u32 = 2;
const ALIVE_COUNT_MAX: u32 = 3;
/// A master connection left idle this long exits by itself (after a SIGKILLed harness).
const CONTROL_PERSIST_S: u32 = 60;
/// One remote command (a signal, a rule, a pid file) never takes longer than this.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Copying the binary to a host.
const COPY_TIMEOUT: Duration = Duration::from_secs(120);
/// iptables waits this long for the xtables lock.
const XTABLES_WAIT_S: u32 = 5;
/// The netem qdisc's handle (`LP`): a qdisc with another handle is not ours.
const NETEM_HANDLE: &str = "4c50:";
/// The environment variable that marks a node's processes as the run's.
const RUN_TAG_VAR: &str = "LOCKPICK_RUN";
/// The most of a node's log fetched into the run directory (its end).
const LOG_FETCH_BYTES_MAX: u64 = 32 << 20;
// The fetched end of a log, and the line before it, fit in what a command's output keeps.
const _: () = assert!(LOG_FETCH_BYTES_MAX + 4096 < command::OUTPUT_BYTES_MAX);
/// A node's health is polled this often while it starts.
const HEALTH_POLL_INTERVAL: Duration = Duration::from_millis(50);
const HEALTH_PROBE_TIMEOUT_MAX: Duration = Duration::from_secs(1);
const STATE_VERSION: u32 = 1;
/// The most hosts one run drives (a bound on the threads that set them up).
pub const HOSTS_MAX: usize = 64;

/// One host, as a `[[nodes]]` entry of lockpick.toml gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Host name or address: where ssh connects, and where the harness's clients and the
    /// other nodes reach the service.
    pub address: String,
    #[serde(default = "default_user")]
    pub user: String,
    /// The ssh port.
    #[serde(default = "default_ssh_port")]
    pub port: u16,
    /// `ssh -i`: a key for this host (else ssh's own configuration decides).
    #[serde(default)]
    pub identity_file: Option<PathBuf>,
    /// This node's service command (a shell line; `{id} {host} {port} {data_dir}` filled in),
    /// instead of the run's.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default = "default_service_port")]
    pub service_port: u16,
    #[serde(default = "default_peer_port")]
    pub peer_port: u16,
}

fn default_user() -> String {
    "root".into()
}
fn default_ssh_port() -> u16 {
    22
}
fn default_service_port() -> u16 {
    SERVICE_PORT
}
fn default_peer_port() -> u16 {
    PEER_PORT
}

/// The hosts of a run and the ssh configuration to use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hosts {
    pub nodes: Vec<HostSpec>,
    /// `ssh -F`: a client configuration instead of `~/.ssh/config`.
    #[serde(default)]
    pub ssh_config: Option<PathBuf>,
}

/// The config file's sections that list the hosts: `[[nodes]]` and `[ssh]`.
pub const CONFIG_SECTIONS: [&str; 2] = ["nodes", "ssh"];

/// A config file's hosts that do not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostsError {
    #[error("--runtime ssh needs the hosts as [[nodes]] (address, user, port)")]
    Missing,
    /// `[[nodes]]` or `[ssh]` as toml reads it: where, and what toml said.
    #[error("{section}: {message}")]
    Bad {
        /// The line the toml reader placed the error on (1-based; 0 when it gave none).
        line: usize,
        /// `[[nodes]]` or `[ssh]`.
        section: &'static str,
        message: String,
    },
}

impl HostsError {
    /// The line the error is on, when toml gave one.
    pub fn line(&self) -> Option<usize> {
        match self {
            HostsError::Bad { line, .. } if *line > 0 => Some(*line),
            _ => None,
        }
    }
}

impl Hosts {
    /// The hosts a config file's `[[nodes]]` and `[ssh]` give, read from the file's text so
    /// an error keeps its place: a typo inside `[[nodes]]` (`adress = ...`) is named at its
    /// line, as every other key of the file is. Relative paths (identity files, the ssh
    /// config) are taken from `dir`, the file's directory.
    pub fn from_config(text: &str, dir: &Path) -> Result<Hosts, HostsError> {
        // Each section read alone, the rest of the file ignored: an error then belongs to
        // the section that was being read.
        #[derive(Deserialize)]
        struct NodesOnly {
            nodes: Option<Vec<HostSpec>>,
        }
        #[derive(Deserialize)]
        struct SshSection {
            config: Option<PathBuf>,
        }
        #[derive(Deserialize)]
        struct SshOnly {
            ssh: Option<SshSection>,
        }
        let bad = |section: &'static str, e: toml::de::Error| HostsError::Bad {
            line: e.span().map_or(0, |s| line_at(text, s.start)),
            section,
            message: e.message().trim().to_string(),
        };
        let nodes = toml::from_str::<NodesOnly>(text)
            .map_err(|e| bad("[[nodes]]", e))?
            .nodes
            .ok_or(HostsError::Missing)?;
        let ssh = toml::from_str::<SshOnly>(text)
            .map_err(|e| bad("[ssh]", e))?
            .ssh;
        let nodes = nodes
            .into_iter()
            .map(|mut h| {
                h.identity_file = h.identity_file.map(|p| dir.join(p));
                h
            })
            .collect();
        Ok(Hosts {
            nodes,
            ssh_config: ssh.and_then(|s| s.config).map(|p| dir.join(p)),
        })
    }
}

/// The line (1-based) the byte at `at` of `text` is on.
fn line_at(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Every failure of the ssh runtime; each names the host.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// ssh itself failed (exit 255) or the call ran past its deadline: the host does not
    /// answer. A harness error, never a verdict.
    #[error("host {host}: not answering over ssh ({what}, at {at_unix_ms} ms since the epoch): {reason}")]
    Unreachable {
        host: String,
        what: String,
        at_unix_ms: u128,
        reason: String,
    },
    /// The remote command ran and failed.
    #[error("host {host}: {what} failed: {reason}")]
    Failed {
        host: String,
        what: String,
        reason: String,
    },
    #[error("--runtime ssh: {0}")]
    Config(String),
    #[error(transparent)]
    StateFile(#[from] crate::state_file::StateFileError),
}

impl From<SshError> for Error {
    fn from(e: SshError) -> Error {
        Error::msg(e.to_string())
    }
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// `'text'` for a POSIX shell, with every `'` closed, escaped and reopened.
pub fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

// ---------------------------------------------------------------------------------------------
// One host's connection

/// How to reach one host: the ssh command line, multiplexed through the run's control
/// directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Conn {
    host: HostSpec,
    ssh_config: Option<PathBuf>,
    /// Holds the master sockets (`%C`, a hash: short whatever the host's name).
    control_dir: PathBuf,
}

impl Conn {
    fn label(&self) -> String {
        format!(
            "{}@{}:{}",
            self.host.user, self.host.address, self.host.port
        )
    }

    /// `ssh` and its options, up to the destination.
    fn ssh_argv(&self) -> Vec<String> {
        let mut argv = vec!["ssh".to_string()];
        if let Some(f) = &self.ssh_config {
            argv.extend(["-F".into(), f.display().to_string()]);
        }
        if let Some(i) = &self.host.identity_file {
            argv.extend(["-i".into(), i.display().to_string()]);
        }
        for option in [
            "BatchMode=yes".to_string(),
            format!("ConnectTimeout={CONNECT_TIMEOUT_S}"),
            format!("ServerAliveInterval={ALIVE_INTERVAL_S}"),
            format!("ServerAliveCountMax={ALIVE_COUNT_MAX}"),
            "ControlMaster=auto".into(),
            format!("ControlPath={}", self.control_dir.join("%C").display()),
            format!("ControlPersist={CONTROL_PERSIST_S}"),
            "LogLevel=ERROR".into(),
        ] {
            argv.extend(["-o".into(), option]);
        }
        argv.extend([
            "-p".into(),
            self.host.port.to_string(),
            "-l".into(),
            self.host.user.clone(),
            self.host.address.clone(),
        ]);
        argv
    }

    /// Runs `script` (POSIX sh) on the host, as root (through `sudo -n` for another user),
    /// with `stdin`, within `timeout`. `what` names the step in errors.
    fn exec(
        &self,
        what: &str,
        script: &str,
        stdin: Option<File>,
        timeout: Duration,
    ) -> Result<String, SshError> {
        let script = if self.host.user == "root" {
            format!("sh -c {}", sh_quote(script))
        } else {
            format!("sudo -n sh -c {}", sh_quote(script))
        };
        let mut argv = self.ssh_argv();
        argv.push("--".into());
        argv.push(script);
        let shown = format!("ssh {} ({what})", self.label());
        command::run(&argv, stdin, timeout, &shown).map_err(|e| self.classify(what, e))
    }

    fn classify(&self, what: &str, e: CommandError) -> SshError {
        let host = self.label();
        let what = what.to_string();
        match e {
            // 255 is ssh's own failure: no connection, authentication, a dead master.
            CommandError::Failed {
                code: Some(255),
                stderr,
                ..
            } => SshError::Unreachable {
                host,
                what,
                at_unix_ms: unix_ms(),
                reason: stderr,
            },
            CommandError::Timeout { timeout_ms, .. } => SshError::Unreachable {
                host,
                what,
                at_unix_ms: unix_ms(),
                reason: format!("no answer within {timeout_ms} ms"),
            },
            CommandError::Failed { stderr, status, .. } => SshError::Failed {
                host,
                what,
                reason: format!("{status}: {stderr}"),
            },
            CommandError::Spawn { source, .. } => SshError::Failed {
                host,
                what,
                reason: format!("cannot run ssh: {source} (apt-get install openssh-client)"),
            },
        }
    }

    /// Closes the master connection, if one runs (best effort: it also exits by itself).
    fn close(&self) {
        let mut argv = self.ssh_argv();
        let dest = argv.pop().unwrap_or_default();
        argv.extend(["-O".into(), "exit".into(), dest]);
        let _ = command::run(&argv, None, Duration::from_secs(5), "ssh -O exit");
    }
}

// ---------------------------------------------------------------------------------------------
// Remote scripts: each one idempotent, each loop bounded.

/// The run's directory on every host.
fn base_dir(run_id: &str) -> String {
    format!("/tmp/lockpick-{run_id}")
}

/// Node `node`'s directory on its host: the binary, the pid file, the logs, `data/`. One
/// per node, so hosts that share a file system (the test bed's) never share a file.
fn node_dir(run_id: &str, node: &str) -> String {
    format!("{}/{node}", base_dir(run_id))
}

fn chain_name(run_id: &str) -> String {
    format!("LP-{run_id}")
}

fn ipt() -> String {
    format!("iptables -w {XTABLES_WAIT_S}")
}

/// Kills, by process group, every node of the run whose pid file names a live process that
/// carries the run's tag; then removes the chain (its jump from INPUT first), our netem qdisc
/// on `dev`, and the run's directory. The same script ends a run and cleans up after a
/// killed one.
fn cleanup_script(run_id: &str, node: &str, dev: Option<&str>) -> String {
    let base = base_dir(run_id);
    let dir = node_dir(run_id, node);
    let chain = chain_name(run_id);
    let ipt = ipt();
    let netem = match dev {
        Some(dev) => format!(
            "if tc qdisc show dev {dev} 2>/dev/null | grep -q 'qdisc netem {NETEM_HANDLE} root'; \
             then tc qdisc del dev {dev} root; fi\n",
            dev = sh_quote(dev)
        ),
        None => String::new(),
    };
    format!(
        "{kill_all}\n\
         if {ipt} -n -L {chain} >/dev/null 2>&1; then\n\
           i=0; while [ $i -lt 20 ] && {ipt} -D INPUT -j {chain} 2>/dev/null; do i=$((i+1)); done\n\
           {ipt} -F {chain} && {ipt} -X {chain}\n\
         fi\n\
         {netem}\
         rm -rf {dir}\n\
         rmdir {base} 2>/dev/null || true\n",
        kill_all = signal_node_script(run_id, node, &["CONT", "KILL"], false),
    )
}

/// The start time of the process whose `/proc/PID/stat` is read, in clock ticks since boot
/// (field 22; the fields after the command name, which may hold spaces, counted from the last
/// `) `). With the pid it names one process for good: a pid reused later has another.
const START_TIME_OF: &str = "sed 's/.*) //' /proc/PID/stat 2>/dev/null | cut -d' ' -f20";

/// Whether process group PGID still has a member that is not a zombie. A killed service
/// stays a zombie until its parent reaps it, and on a host whose init reaps only now and then
/// (a container's) that is seconds: counted as gone, it frees its ports at once. Without
/// `ps`, any member counts.
const GROUP_LIVES: &str = "{ if command -v ps >/dev/null 2>&1; then \
     ps -e -o pgid= -o stat= | awk -v g=PGID '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'; \
     else kill -0 -PGID 2>/dev/null; fi; }";

/// Sends `signals` in turn to `node`'s processes if its pid file still names the group the
/// run started: its leader's pid and start time (the second line) match a live process. A
/// pid file that names anything else is stale: it is removed and nothing is signalled
/// through it. A last KILL is waited for (bounded) and the pid file removed; a TERM is given
/// 2 s ([`stop_node_script`] gives a node's own stop signal its own grace). With `strict` the script exits 3 when no such group runs (pause and resume must reach
/// the node); else it exits 0 whatever it found, and a KILL still reaches the node's other
/// processes (cleanup after a leader that died first).
///
/// The node's processes are its group and those outside it that are surely its own: the
/// leader's descendants (PostgreSQL's backends lead groups of their own), those whose working
/// directory is inside the node's directory (a server that re-parents itself keeps it), and
/// those carrying the run's tag in their environment. The tag alone is not enough: Redis and
/// PostgreSQL write their process titles over the memory `/proc/PID/environ` reads.
fn signal_node_script(run_id: &str, node: &str, signals: &[&str], strict: bool) -> String {
    signal_script(run_id, node, signals, strict, Shutdown::TERM.grace())
}

/// The script that stops `node` at the end: CONT (a paused node takes no other signal), its
/// service's stop signal with the grace it asked for, then KILL.
fn stop_node_script(run_id: &str, node: &str, shutdown: Shutdown) -> String {
    let signals = ["CONT", shutdown.signal.name(), "KILL"];
    signal_script(run_id, node, &signals, false, shutdown.grace())
}

/// [`signal_node_script`], a stop signal (TERM, INT) waited for up to `grace`.
fn signal_script(
    run_id: &str,
    node: &str,
    signals: &[&str],
    strict: bool,
    grace: Duration,
) -> String {
    let dir = node_dir(run_id, node);
    let tag = sh_quote(&format!("{RUN_TAG_VAR}={run_id}/{node}"));
    let (send, missing) = signal_steps(signals, strict, grace);
    // `node_procs` is one pass over /proc for each way a process is known as the node's; the
    // script's own shell is never one of them (it is not the leader's descendant, and its
    // directory is not the node's when this runs). The values put in hold no `@`.
    let script = SIGNAL_NODE_SH
        .replace("@TAG@", &tag)
        .replace("@DIR_QUOTED@", &sh_quote(&dir))
        .replace("@DIR@", &dir)
        .replace("@START_TIME@", &START_TIME_OF.replace("PID", "\"$p\""))
        .replace("@SEND@", &send)
        .replace("@MISSING@", &missing);
    debug_assert!(
        !script.contains("@TAG@") && !script.contains("@DIR") && !script.contains("@SEND@"),
        "a placeholder of signal_node.sh was left unfilled"
    );
    script
}

/// The script [`signal_node_script`] fills in: `node_procs`, the pid file's check, then the
/// signals sent (`@SEND@`) or what is done when no group of the run's runs (`@MISSING@`).
const SIGNAL_NODE_SH: &str = include_str!("ssh/signal_node.sh");

/// The shell that sends `signals` in turn to the group `$p` and the node's other processes
/// `$m` (each signal's wait after it included: `grace` after a stop signal), and the shell run
/// when the pid file names no live group of the run's.
fn signal_steps(signals: &[&str], strict: bool, grace: Duration) -> (String, String) {
    // The group is looked for every 20 ms.
    let grace_polls = grace.as_millis().div_ceil(20).to_string();
    let gone = format!(
        "i=0; while {} && [ $i -lt LIMIT ]; do sleep 0.02; i=$((i+1)); done",
        GROUP_LIVES.replace("PGID", "\"$p\"")
    );
    let members = "m=$(node_procs)";
    // The same search, added to what was found before (a killed leader's children are
    // re-parented: only the first search finds them as its descendants).
    let more = "m=\"$m $(node_procs)\"";
    let mut send = String::new();
    let mut sweep = String::new();
    for signal in signals {
        send.push_str(&format!(
            "kill -{signal} -\"$p\" 2>/dev/null{};",
            // Without `strict` a group that died meanwhile is no error (the start script runs
            // under `set -e`).
            if strict { " || exit 3" } else { " || :" }
        ));
        let each = format!("for q in $m; do kill -{signal} \"$q\" 2>/dev/null || :; done;");
        // Found again once the group has the signal: a stopped leader forks no more, so a
        // child it forked while the signal was on its way is found now.
        send.push_str(&format!("{more}; {each}"));
        sweep.push_str(&each);
        match *signal {
            "TERM" | "INT" => send.push_str(&gone.replace("LIMIT", &grace_polls)),
            "KILL" => send.push_str(&format!("{}; rm -f \"$f\"", gone.replace("LIMIT", "250"))),
            _ => send.push(':'),
        }
        send.push_str("; ");
    }
    let missing = match (strict, signals.contains(&"KILL")) {
        (true, _) => "exit 3".to_string(),
        (false, true) => format!("{members}; {sweep} :"),
        (false, false) => ":".to_string(),
    };
    (send, missing)
}

// ---------------------------------------------------------------------------------------------
// State file

/// What a run has set up on its hosts, written before each step so a SIGKILLed run can be
/// undone by `lockpick cleanup`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    version: u32,
    /// Always `ssh`: tells this state file from the namespace runtime's.
    runtime: String,
    run_id: String,
    pid: i32,
    pid_start_ticks: Option<u64>,
    hosts: Vec<HostState>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct HostState {
    node: String,
    conn: Conn,
    /// The run's iptables chain there.
    chain: String,
    /// The node's directory there (the binary, the pid file, logs).
    dir: String,
    /// The agent: lockpick's binary copied into `dir` (removed with it).
    #[serde(default)]
    agent: String,
    /// The interface netem goes on, once known.
    dev: Option<String>,
    /// The process group of the node's service, while it runs.
    pid: Option<i32>,
}

struct StateFile {
    path: PathBuf,
    state: Mutex<State>,
}

impl StateFile {
    /// The run's state: every host listed, with its node's chain, directory and agent,
    /// before anything is made on it.
    fn listing(path: &Path, run_id: &str, conns: &[Arc<Conn>]) -> StateFile {
        let pid = std::process::id() as i32;
        StateFile {
            path: path.to_path_buf(),
            state: Mutex::new(State {
                version: STATE_VERSION,
                runtime: "ssh".into(),
                run_id: run_id.to_string(),
                pid,
                pid_start_ticks: crate::process::start_ticks(pid),
                hosts: conns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| HostState {
                        node: format!("n{}", i + 1),
                        conn: (**c).clone(),
                        chain: chain_name(run_id),
                        dir: node_dir(run_id, &format!("n{}", i + 1)),
                        agent: format!("{}/lockpick", node_dir(run_id, &format!("n{}", i + 1))),
                        dev: None,
                        pid: None,
                    })
                    .collect(),
            }),
        }
    }

    fn write(&self) -> Result<(), SshError> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        write_json(&self.path, &state)
    }

    fn update(&self, f: impl FnOnce(&mut State)) -> Result<(), SshError> {
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut state);
        }
        self.write()
    }
}

fn state_err(path: &Path, what: &'static str, reason: impl ToString) -> SshError {
    crate::state_file::StateFileError::io(path, what, reason).into()
}

fn write_json(path: &Path, state: &State) -> Result<(), SshError> {
    Ok(crate::state_file::write_json(path, state)?)
}

/// What [`cleanup_from_state`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Hosts cleaned now.
    pub cleaned: Vec<String>,
    /// Hosts that could not be cleaned, with why (the state file is kept for them).
    pub failed: Vec<(String, String)>,
}

/// Undoes what a killed run left on its hosts, from its state file: on every host, the run's
/// processes (by the tag in their environment), its chain, its netem qdisc and its directory.
/// Refuses while the run's own process is alive. The state file is removed when every host was
/// cleaned, else rewritten with the hosts left.
pub fn cleanup_from_state(path: &Path) -> Result<CleanupReport, SshError> {
    let bytes = std::fs::read(path).map_err(|e| state_err(path, "read", e))?;
    let mut state: State =
        serde_json::from_slice(&bytes).map_err(|e| state_err(path, "parse", e))?;
    if state.version != STATE_VERSION || state.runtime != "ssh" {
        return Err(state_err(path, "use", "not an ssh runtime state file"));
    }
    if !state
        .run_id
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        || state.run_id.is_empty()
    {
        return Err(state_err(
            path,
            "use",
            format!("bad run id {:?}", state.run_id),
        ));
    }
    crate::state_file::refuse_if_alive(path, state.pid, state.pid_start_ticks)?;
    let mut report = CleanupReport::default();
    let run_id = state.run_id.clone();
    let results = clean_hosts(&run_id, &state.hosts);
    let control_dirs: BTreeSet<PathBuf> = state
        .hosts
        .iter()
        .map(|h| h.conn.control_dir.clone())
        .collect();
    let mut left = Vec::new();
    for (h, r) in state.hosts.drain(..).zip(results) {
        match r {
            Ok(()) => report.cleaned.push(h.conn.label()),
            Err(e) => {
                report.failed.push((h.conn.label(), e.to_string()));
                left.push(h);
            }
        }
    }
    if left.is_empty() {
        // Every master was closed (or had exited): the run's control directory is empty.
        for dir in control_dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
        std::fs::remove_file(path).map_err(|e| state_err(path, "remove", e))?;
    } else {
        state.hosts = left;
        write_json(path, &state)?;
    }
    Ok(report)
}

/// The cleanup script on every host at once; one result per host.
fn clean_hosts(run_id: &str, hosts: &[HostState]) -> Vec<Result<(), SshError>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|h| {
                s.spawn(move || {
                    std::fs::create_dir_all(&h.conn.control_dir).ok();
                    let r = h
                        .conn
                        .exec(
                            "clean up the run",
                            &cleanup_script(run_id, &h.node, h.dev.as_deref()),
                            None,
                            CALL_TIMEOUT,
                        )
                        .map(drop);
                    h.conn.close();
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(SshError::Config("a cleanup thread panicked".into())))
            })
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Host checks (`lockpick doctor --config`, and every run before it sets anything up)

/// One thing a host offers, or lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostCheck {
    /// `reachable`, `root`, `arch`, `disk`, `iptables`, `netem`, `ptrace`.
    pub name: String,
    pub ok: bool,
    /// What was found, or why it is missing.
    pub why: String,
}

/// Free space a node's directory needs: lockpick's binary and the logs.
const DISK_FREE_KIB_MIN: u64 = 512 * 1024;

/// Prints one `name<TAB>ok|no<TAB>why` line per check. Reads only, except the netem check,
/// which (when sch_netem is not loaded) tries a netem qdisc in a throwaway namespace of its
/// own and deletes the namespace again.
fn check_script(probe_ns: &str) -> String {
    format!(
        r#"ok() {{ printf '%s\tok\t%s\n' "$1" "$2"; }}
no() {{ printf '%s\tno\t%s\n' "$1" "$2"; }}
u=$(id -u); if [ "$u" = 0 ]; then ok root "uid 0"; else no root "uid $u"; fi
m=$(uname -m); if [ "$m" = {arch} ]; then ok arch "$m"; else no arch "$m: lockpick's binary here is {arch}"; fi
k=$(df -Pk /tmp | awk 'NR==2 {{print $4}}'); k=${{k:-0}}
if [ "$k" -ge {disk} ]; then ok disk "$((k / 1024)) MiB free in /tmp"; else no disk "$((k / 1024)) MiB free in /tmp (lockpick's binary and the logs need $(({disk} / 1024)))"; fi
if ! command -v iptables >/dev/null 2>&1; then no iptables "not installed (apt-get install iptables)"
elif iptables -w 5 -S >/dev/null 2>&1; then ok iptables "$(iptables --version 2>&1 | head -n 1)"
else no iptables "iptables -S fails: $(iptables -w 5 -S 2>&1 | head -n 1)"; fi
if ! command -v tc >/dev/null 2>&1; then no netem "tc not installed (apt-get install iproute2)"
elif [ -d /sys/module/sch_netem ]; then ok netem "sch_netem loaded"
elif ip netns add {probe_ns} 2>/dev/null; then
  if e=$(ip netns exec {probe_ns} tc qdisc add dev lo root netem delay 1ms 2>&1); then ok netem "tc qdisc netem works"; else no netem "the kernel has no netem: $e (CONFIG_NET_SCH_NETEM)"; fi
  ip netns del {probe_ns}
else no netem "cannot tell: sch_netem is not loaded and no namespace could be made to try it"; fi
sc=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
if [ "$m" != x86_64 ]; then no ptrace "vDSO clock control is x86_64 only, not $m"
elif [ "$sc" -ge 3 ]; then no ptrace "kernel.yama.ptrace_scope is 3: no process may be traced"
else ok ptrace "ptrace_scope $sc, as root"; fi
"#,
        arch = std::env::consts::ARCH,
        disk = DISK_FREE_KIB_MIN,
    )
}

/// Checks each host (all at once): reachable, root (or passwordless sudo), the architecture
/// of lockpick's binary, free disk, iptables, netem, ptrace. One list per host, in order.
pub fn check_hosts(hosts: &Hosts) -> Vec<(String, Vec<HostCheck>)> {
    let tag = format!("{:06x}", rand::random::<u32>() & 0x00ff_ffff);
    let control_dir = PathBuf::from(format!("/tmp/lp-ssh-chk-{tag}"));
    let _ = std::fs::create_dir_all(&control_dir);
    let conns: Vec<Conn> = hosts
        .nodes
        .iter()
        .take(HOSTS_MAX)
        .map(|h| Conn {
            host: h.clone(),
            ssh_config: hosts.ssh_config.clone(),
            control_dir: control_dir.clone(),
        })
        .collect();
    let script = check_script(&format!("lp-chk-{tag}"));
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .iter()
            .map(|c| {
                let script = &script;
                s.spawn(move || {
                    let r = check_host(c, script);
                    c.close();
                    (c.label(), r)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let _ = std::fs::remove_dir_all(&control_dir);
    out
}

fn check_host(c: &Conn, script: &str) -> Vec<HostCheck> {
    let check = |name: &str, ok: bool, why: String| HostCheck {
        name: name.into(),
        ok,
        why,
    };
    match c.exec("check the host", script, None, CALL_TIMEOUT) {
        Ok(out) => {
            let mut checks = vec![check("reachable", true, "ssh works".into())];
            checks.extend(out.lines().filter_map(|line| {
                let mut f = line.splitn(3, '\t');
                let (name, ok) = (f.next()?, f.next()? == "ok");
                Some(check(name, ok, f.next().unwrap_or("").into()))
            }));
            checks
        }
        Err(e @ SshError::Unreachable { .. }) => vec![check("reachable", false, e.to_string())],
        // ssh worked, the script did not run: sudo wanted a password, most likely.
        Err(e) => vec![
            check("reachable", true, "ssh works".into()),
            check(
                "root",
                false,
                format!("{e} (log in as root, or give the user passwordless sudo)"),
            ),
        ],
    }
}

/// The checks a run with `faults` needs on every host: always reachable, root, arch and
/// disk; and the tools its fault families use (iptables for partitions, netem, ptrace for
/// clock faults: each family's `FACTS.tools`).
pub fn required_checks(faults: &[crate::schedule::FaultKind]) -> Vec<&'static str> {
    let mut needs = vec!["reachable", "root", "arch", "disk"];
    for tool in faults.iter().flat_map(|f| f.tools()) {
        if !needs.contains(tool) {
            needs.push(tool);
        }
    }
    needs
}

// ---------------------------------------------------------------------------------------------
// The runtime

pub struct Ssh;

impl RuntimeKind for Ssh {
    fn name(&self) -> &'static str {
        "ssh"
    }
    fn about(&self) -> &'static str {
        "each node on a host of the --config file's [[nodes]], over ssh; makes partition and netem faults"
    }
    fn network_faults(&self) -> bool {
        true
    }
    fn refuses_url(&self) -> Option<&'static str> {
        Some("has no host to run on")
    }
    fn cleanup(&self, state: &Path) -> Option<Result<String, Vec<String>>> {
        if crate::runtime::state_runtime(state).as_deref() != Some(self.name()) {
            return None;
        }
        Some(match cleanup_from_state(state) {
            Ok(r) if r.failed.is_empty() => Ok(format!(
                "cleaned {} host(s): {}",
                r.cleaned.len(),
                r.cleaned.join(", ")
            )),
            Ok(r) => Err(r
                .failed
                .iter()
                .map(|(host, why)| format!("{host}: {why}"))
                .collect()),
            Err(e) => Err(vec![e.to_string()]),
        })
    }
    fn needs_hosts(&self) -> Option<&'static str> {
        Some("list the hosts as [[nodes]] (address, user, port) in the --config file")
    }
    fn open(&self, spec: &RuntimeSpec) -> Result<Box<dyn Runtime>, Error> {
        let hosts = spec.hosts.ok_or_else(|| {
            SshError::Config(
                "no hosts: list them as [[nodes]] in the --config file (address, user, port)"
                    .into(),
            )
        })?;
        Ok(Box::new(SshRuntime::open(
            hosts,
            spec.nodes,
            spec.state_file,
            spec.faults,
        )?))
    }
}

/// A run's hosts, set up.
pub struct SshRuntime {
    run_id: String,
    net: Arc<SshNet>,
    state: Arc<StateFile>,
    /// The local binary copied to each node's directory.
    local_exe: PathBuf,
    /// The master connections' sockets (`ControlPath`), removed with the last host cleaned.
    control_dir: PathBuf,
    torn_down: bool,
}

/// The hosts as the network faults reach them (shared with the nemesis).
pub struct SshNet {
    run_id: String,
    hosts: Vec<Arc<Conn>>,
    /// The harness's address as each host sees it (from `SSH_CONNECTION`).
    harness_ip: Vec<String>,
    /// The interface of each host that carries the harness's traffic (netem goes there).
    devs: Vec<String>,
    faults: Mutex<Faults>,
}

#[derive(Default)]
struct Faults {
    /// (host, rule after `-A CHAIN`) in place.
    rules: BTreeSet<(usize, Vec<String>)>,
    netem: BTreeSet<usize>,
}

/// The node's command line on its host: the host's own `command` template filled in, else
/// the run's command with this machine's paths mapped (`map`) to the host's.
fn remote_line(
    conn: &Conn,
    id: &str,
    port: u16,
    command: NodeCommand,
    remote_dir: &str,
    map: &dyn Fn(&str) -> String,
) -> Result<String, Error> {
    Ok(match (&conn.host.command, command) {
        (Some(template), _) => {
            let ph = crate::Placeholders {
                id: id.to_string(),
                host: conn.host.address.clone(),
                port,
                data_dir: PathBuf::from(format!("{remote_dir}/data")),
                peers: String::new(),
                extra: Vec::new(),
            };
            NodeCommand::shell_line(&crate::substitute(template, &ph)?)
        }
        (None, NodeCommand::Argv(argv)) => {
            let quoted: Vec<String> = argv.iter().map(|a| sh_quote(&map(a))).collect();
            format!("exec {}", quoted.join(" "))
        }
        (None, NodeCommand::Shell(line)) => NodeCommand::shell_line(&map(&line)),
    })
}

impl SshNet {
    /// The hosts, before any is set up (no address or interface known yet).
    fn new(run_id: String, hosts: Vec<Arc<Conn>>) -> SshNet {
        SshNet {
            run_id,
            hosts,
            harness_ip: Vec::new(),
            devs: Vec::new(),
            faults: Mutex::new(Faults::default()),
        }
    }
}

/// Refuses `n` nodes the config's hosts cannot run this test's faults on, up front, before
/// anything is made on any host, naming the host and why.
fn refuse_unfit(
    hosts: &Hosts,
    n: usize,
    faults: &[crate::schedule::FaultKind],
) -> Result<(), SshError> {
    if n == 0 || n > hosts.nodes.len() || n > HOSTS_MAX {
        return Err(SshError::Config(format!(
            "--nodes {n} needs {n} [[nodes]] entries in the config file; it lists {}",
            hosts.nodes.len()
        )));
    }
    let needs = required_checks(faults);
    let wanted = Hosts {
        nodes: hosts.nodes[..n].to_vec(),
        ssh_config: hosts.ssh_config.clone(),
    };
    let mut refusals = Vec::new();
    for (host, checks) in check_hosts(&wanted) {
        for c in checks
            .iter()
            .filter(|c| !c.ok && needs.contains(&c.name.as_str()))
        {
            refusals.push(format!("{host}: {}: {}", c.name, c.why));
        }
    }
    if !refusals.is_empty() {
        return Err(SshError::Config(format!(
            "the hosts cannot run this test: {}",
            refusals.join("; ")
        )));
    }
    Ok(())
}

/// [`set_up_host`] on every host at once (node `n1` on the first); one result per host.
fn set_up_hosts(
    conns: &[Arc<Conn>],
    run_id: &str,
    exe: &Path,
    hash: &str,
) -> Vec<Result<(String, String), SshError>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let node = format!("n{}", i + 1);
                s.spawn(move || set_up_host(c, run_id, &node, exe, hash))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(SshError::Config("a setup thread panicked".into())))
            })
            .collect()
    })
}

impl SshRuntime {
    /// Connects to the first `n` hosts of `hosts`, checks each (root or passwordless sudo),
    /// copies lockpick's binary there and makes the run's chain, all hosts at once. The state
    /// file lists each host before anything is made there; on any error everything made so
    /// far is removed again.
    pub fn open(
        hosts: &Hosts,
        n: usize,
        state_file: &Path,
        faults: &[crate::schedule::FaultKind],
    ) -> Result<SshRuntime, SshError> {
        refuse_unfit(hosts, n, faults)?;
        let run_id = format!("{:08x}", rand::random::<u32>());
        let control_dir = PathBuf::from(format!("/tmp/lp-ssh-{run_id}"));
        std::fs::create_dir_all(&control_dir)
            .map_err(|e| SshError::Config(format!("{}: {e}", control_dir.display())))?;
        let conns: Vec<Arc<Conn>> = hosts.nodes[..n]
            .iter()
            .map(|h| {
                Arc::new(Conn {
                    host: h.clone(),
                    ssh_config: hosts.ssh_config.clone(),
                    control_dir: control_dir.clone(),
                })
            })
            .collect();
        let state = Arc::new(StateFile::listing(state_file, &run_id, &conns));
        state.write()?;
        let local_exe = std::env::current_exe()
            .map_err(|e| SshError::Config(format!("cannot locate the lockpick binary: {e}")))?;
        let mut net = SshNet::new(run_id.clone(), conns);
        let mut rt = SshRuntime {
            run_id,
            net: Arc::new(SshNet::new(String::new(), Vec::new())),
            state,
            local_exe,
            control_dir: control_dir.clone(),
            torn_down: false,
        };
        // On error `rt` is dropped, which cleans every host up.
        let hash = local_sha256(&rt.local_exe)?;
        for r in set_up_hosts(&net.hosts, &rt.run_id, &rt.local_exe, &hash) {
            let (ip, dev) = r?;
            net.harness_ip.push(ip);
            net.devs.push(dev);
        }
        // Host `i`'s address and interface are at `i` in both lists.
        debug_assert!(net.harness_ip.len() == n && net.devs.len() == n);
        let devs = net.devs.clone();
        rt.net = Arc::new(net);
        tracing::info!(run_id = %rt.run_id, hosts = n, "ssh hosts ready");
        rt.state.update(|s| {
            for (h, d) in s.hosts.iter_mut().zip(devs) {
                h.dev = Some(d);
            }
        })?;
        Ok(rt)
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    fn host(&self, i: usize) -> Result<&Arc<Conn>, SshError> {
        self.net.host(i)
    }

    fn do_teardown(&mut self) -> Result<(), SshError> {
        self.torn_down = true;
        let hosts: Vec<HostState> = self
            .state
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .hosts
            .clone();
        let results = clean_hosts(&self.run_id, &hosts);
        let mut errors = Vec::new();
        let mut left = Vec::new();
        for (h, r) in hosts.into_iter().zip(results) {
            if let Err(e) = r {
                errors.push(e.to_string());
                left.push(h);
            }
        }
        if errors.is_empty() {
            let _ = std::fs::remove_dir_all(&self.control_dir);
            let _ = std::fs::remove_file(&self.state.path);
            Ok(())
        } else {
            self.state.update(|s| s.hosts = left)?;
            Err(SshError::Config(format!(
                "teardown left hosts uncleaned (run `lockpick cleanup` on the run directory): {}",
                errors.join("; ")
            )))
        }
    }
}

impl SshNet {
    fn host(&self, i: usize) -> Result<&Arc<Conn>, SshError> {
        self.hosts
            .get(i)
            .ok_or_else(|| SshError::Config(format!("no node {i}: {} hosts", self.hosts.len())))
    }

    fn lock_faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one script per host, the hosts at once (a fault on three hosts costs one ssh
    /// round trip, not three). One result per entry, in order.
    fn on_hosts(&self, what: &str, scripts: &[(usize, String)]) -> Vec<Result<(), SshError>> {
        std::thread::scope(|s| {
            let handles: Vec<_> = scripts
                .iter()
                .map(|(i, script)| {
                    s.spawn(move || {
                        self.host(*i)?
                            .exec(what, script, None, CALL_TIMEOUT)
                            .map(drop)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(SshError::Config("an ssh thread panicked".into())))
                })
                .collect()
        })
    }

    /// Appends each `(host, rule)` not in place yet to the run's chain on its host: one call
    /// per host, the hosts at once. The rules of a host whose call failed are not recorded
    /// (its script stops at the first failure; heal flushes the chain whatever it holds).
    fn add_rules(
        &self,
        faults: &mut Faults,
        rules: Vec<(usize, Vec<String>)>,
    ) -> Result<(), SshError> {
        let mut by_host: std::collections::BTreeMap<usize, Vec<Vec<String>>> = Default::default();
        for (i, rule) in rules {
            self.host(i)?;
            if !faults.rules.contains(&(i, rule.clone())) {
                let list = by_host.entry(i).or_default();
                if !list.contains(&rule) {
                    list.push(rule);
                }
            }
        }
        let chain = chain_name(&self.run_id);
        let scripts: Vec<(usize, String)> = by_host
            .iter()
            .map(|(i, rules)| {
                let lines: Vec<String> = rules
                    .iter()
                    .map(|rule| {
                        let quoted: Vec<String> = rule.iter().map(|r| sh_quote(r)).collect();
                        format!("{} -A {chain} {}", ipt(), quoted.join(" "))
                    })
                    .collect();
                (*i, format!("set -e\n{}\n", lines.join("\n")))
            })
            .collect();
        let mut first = None;
        for ((i, rules), r) in by_host
            .into_iter()
            .zip(self.on_hosts("add partition rules", &scripts))
        {
            match r {
                Ok(()) => faults.rules.extend(rules.into_iter().map(|rule| (i, rule))),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for SshRuntime {
    fn drop(&mut self) {
        if !self.torn_down {
            if let Err(e) = self.do_teardown() {
                tracing::warn!(error = %e, "ssh teardown failed");
            }
        }
    }
}

/// The SHA-256 of the local binary, by the system's `sha256sum` (coreutils, present on every
/// host we copy to as well).
fn local_sha256(exe: &Path) -> Result<String, SshError> {
    let argv = vec!["sha256sum".to_string(), exe.display().to_string()];
    let out = command::run(&argv, None, Duration::from_secs(60), "sha256sum")
        .map_err(|e| SshError::Config(format!("cannot hash {}: {e}", exe.display())))?;
    out.split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| SshError::Config(format!("sha256sum printed nothing for {}", exe.display())))
}

/// Checks a host, makes the run's directory and chain there and copies the binary (when the
/// hash there differs). Returns the harness's address as the host sees it and the interface
/// that carries it.
fn set_up_host(
    c: &Conn,
    run_id: &str,
    node: &str,
    exe: &Path,
    hash: &str,
) -> Result<(String, String), SshError> {
    let dir = node_dir(run_id, node);
    let chain = chain_name(run_id);
    let ipt = ipt();
    let probe = format!(
        "set -e\n\
         ip=${{SSH_CONNECTION%% *}}\n\
         dev=$(ip -o route get \"$ip\" 2>/dev/null | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')\n\
         mkdir -p {dir}\n\
         if command -v iptables >/dev/null 2>&1; then\n\
           {ipt} -N {chain}\n\
           {ipt} -I INPUT 1 -j {chain}\n\
         fi\n\
         echo \"$ip $dev\"\n"
    );
    let out = c.exec("set the run up", &probe, None, CALL_TIMEOUT)?;
    let mut words = out.split_whitespace();
    let (ip, dev) = match (words.next(), words.next()) {
        (Some(ip), Some(dev)) => (ip.to_string(), dev.to_string()),
        _ => {
            return Err(SshError::Failed {
                host: c.label(),
                what: "find the harness's address and interface".into(),
                reason: format!("got {out:?}"),
            })
        }
    };
    let agent = format!("{dir}/lockpick");
    let check = format!("sha256sum {agent} 2>/dev/null | cut -d' ' -f1");
    // Hashing the binary (a debug build is over 200 MB) is bounded as the copy is: on a host
    // busy with other runs' copies it takes longer than one command's bound.
    let have = c.exec("hash the binary", &check, None, COPY_TIMEOUT)?;
    if have.trim() != hash {
        let file =
            File::open(exe).map_err(|e| SshError::Config(format!("{}: {e}", exe.display())))?;
        let copy = format!("cat > {agent}.tmp && chmod 755 {agent}.tmp && mv {agent}.tmp {agent}");
        c.exec("copy the binary", &copy, Some(file), COPY_TIMEOUT)?;
        let have = c.exec("hash the binary", &check, None, COPY_TIMEOUT)?;
        if have.trim() != hash {
            return Err(SshError::Failed {
                host: c.label(),
                what: "copy the binary".into(),
                reason: format!("sha256 {} after the copy, expected {hash}", have.trim()),
            });
        }
    }
    Ok((ip, dev))
}

impl Runtime for SshRuntime {
    /// Node `i` listens on host `i`'s address. The primary of a multi-node lockd is the
    /// smallest address as text, as everywhere.
    fn addresses(&self, n: usize) -> Result<Vec<(String, u16)>, Error> {
        (0..n)
            .map(|i| {
                let c = self.host(i)?;
                Ok((c.host.address.clone(), c.host.service_port))
            })
            .collect()
    }
    /// The host's `peer_port`, and the port after it for a second set.
    fn peer_ports(&self, n: usize, set: u16) -> Result<Vec<u16>, Error> {
        (0..n)
            .map(|i| Ok(self.host(i)?.host.peer_port.saturating_add(set)))
            .collect()
    }
    /// The host's own address: the harness reaches every host directly.
    fn reach(&self, i: usize, port: u16) -> BoxFuture<'_, Result<(String, u16), Error>> {
        Box::pin(async move { Ok((self.host(i)?.host.address.clone(), port)) })
    }
    fn node(&self, i: usize, s: NodeSpec) -> BoxFuture<'_, Result<Box<dyn NodeControl>, Error>> {
        Box::pin(async move {
            let conn = self.host(i)?.clone();
            let remote_dir = node_dir(&self.run_id, &format!("n{}", i + 1));
            let agent = format!("{remote_dir}/lockpick");
            let local_dir = std::path::absolute(&s.node_dir).unwrap_or(s.node_dir.clone());
            // Paths of this machine in the command become the node's own on the host: the
            // binary its copy, the node's directory its directory there.
            let exe = self.local_exe.display().to_string();
            let local = local_dir.display().to_string();
            let map = |a: &str| a.replace(&exe, &agent).replace(&local, &remote_dir);
            let line = remote_line(&conn, &s.id, s.port, s.command, &remote_dir, &map)?;
            // Clock faults asked for: a control page (vDSO backend here) or libfaketime's
            // environment (its backend here). On the host the agent patches the service to
            // read its page either way, so libfaketime's variables are not passed on.
            let clock_on =
                s.clock_page.is_some() || s.env.iter().any(|(k, _)| k == "FAKETIME_TIMESTAMP_FILE");
            let env: Vec<String> = s
                .env
                .iter()
                .filter(|(k, _)| !k.starts_with("FAKETIME") && k != "LD_PRELOAD")
                .map(|(k, v)| format!("{k}={}", sh_quote(&map(v))))
                .collect();
            std::fs::create_dir_all(&local_dir).map_err(|source| NodeError::Io {
                node: s.id.clone(),
                what: "create",
                path: local_dir.clone(),
                source,
            })?;
            // The node's own page is made on its host by the agent.
            let clock = clock_on.then(|| {
                Arc::new(SshClock {
                    conn: conn.clone(),
                    agent: agent.clone(),
                    page: format!("{remote_dir}/clock.page"),
                })
            });
            Ok(Box::new(SshNode {
                id: s.id,
                name: format!("n{}", i + 1),
                index: i,
                conn,
                run_id: self.run_id.clone(),
                remote_dir,
                local_dir,
                line,
                env,
                port: s.port,
                readiness: s.readiness,
                shutdown: s.shutdown,
                state: self.state.clone(),
                pgid: None,
                paused: AtomicBool::new(false),
                started_at: None,
                // A control page asked for: the run has clock faults. The node's own page is
                // made on its host by the agent.
                clock,
            }) as Box<dyn NodeControl>)
        })
    }
    fn network(&self) -> Option<Arc<dyn NetworkFaults>> {
        Some(self.net.clone())
    }
    fn teardown(mut self: Box<Self>) -> Result<(), Error> {
        Ok(self.do_teardown()?)
    }
}

impl NetworkFaults for SshNet {
    /// On host a, packets from b are dropped, and on b those from a.
    fn partition(&self, cut: &[(usize, usize)]) -> Result<(), Error> {
        let mut faults = self.lock_faults();
        let mut rules = Vec::with_capacity(cut.len() * 2);
        for &(a, b) in cut {
            let (ha, hb) = (self.host(a)?, self.host(b)?);
            let from = |h: &Conn| {
                vec![
                    "-s".to_string(),
                    h.host.address.clone(),
                    "-j".into(),
                    "DROP".into(),
                ]
            };
            rules.push((a, from(hb)));
            rules.push((b, from(ha)));
        }
        Ok(self.add_rules(&mut faults, rules)?)
    }
    /// Drops the harness's packets to the service's port only: ssh keeps working.
    fn cut_clients(&self, nodes: &[usize]) -> Result<(), Error> {
        let mut faults = self.lock_faults();
        let mut rules = Vec::with_capacity(nodes.len());
        for &i in nodes {
            let h = self.host(i)?;
            let rule = vec![
                "-s".to_string(),
                self.harness_ip[i].clone(),
                "-p".into(),
                "tcp".into(),
                "--dport".into(),
                h.host.service_port.to_string(),
                "-j".into(),
                "DROP".into(),
            ];
            rules.push((i, rule));
        }
        Ok(self.add_rules(&mut faults, rules)?)
    }
    /// Flushes the run's chain on every host that has a rule in it.
    fn heal(&self) -> Result<(), Error> {
        let mut faults = self.lock_faults();
        let hosts: BTreeSet<usize> = faults.rules.iter().map(|(i, _)| *i).collect();
        let script = format!("{} -F {}", ipt(), chain_name(&self.run_id));
        let scripts: Vec<(usize, String)> = hosts.iter().map(|&i| (i, script.clone())).collect();
        let mut first = None;
        for (i, r) in hosts.into_iter().zip(self.on_hosts("heal", &scripts)) {
            match r {
                Ok(()) => faults.rules.retain(|(h, _)| *h != i),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), |e| Err(e.into()))
    }
    /// Puts netem on each node's interface, the hosts at once. A root qdisc that is neither
    /// lockpick's nor a kernel default (an administrator's shaping, say) is never replaced:
    /// netem is refused on that host.
    fn netem(&self, nodes: &[usize], spec: &NetemSpec) -> Result<(), Error> {
        let args = spec.tc_args()?.join(" ");
        let mut faults = self.lock_faults();
        let mut scripts = Vec::with_capacity(nodes.len());
        for &i in nodes {
            self.host(i)?;
            scripts.push((i, netem_script(&self.devs[i], &args)));
        }
        let mut first = None;
        for ((i, _), r) in scripts.iter().zip(self.on_hosts("add netem", &scripts)) {
            match r {
                Ok(()) => {
                    faults.netem.insert(*i);
                }
                Err(SshError::Failed { reason, host, .. })
                    if reason.contains("kind is unknown") =>
                {
                    first.get_or_insert(Error::msg(format!(
                        "host {host}: netem is not available (the kernel needs sch_netem): {reason}"
                    )));
                }
                Err(e) => {
                    first.get_or_insert(e.into());
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
    fn clear_netem(&self, nodes: &[usize]) -> Result<(), Error> {
        let mut faults = self.lock_faults();
        let scripts: Vec<(usize, String)> = nodes
            .iter()
            .filter(|i| faults.netem.contains(i))
            .map(|&i| {
                let dev = sh_quote(&self.devs[i]);
                (
                    i,
                    format!(
                        "if tc qdisc show dev {dev} | grep -q 'qdisc netem {NETEM_HANDLE} root'; \
                         then tc qdisc del dev {dev} root; fi"
                    ),
                )
            })
            .collect();
        let mut first = None;
        for ((i, _), r) in scripts.iter().zip(self.on_hosts("remove netem", &scripts)) {
            match r {
                Ok(()) => {
                    faults.netem.remove(i);
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), |e| Err(e.into()))
    }
}

/// Puts netem with lockpick's handle on `dev`, replacing only lockpick's own netem or a
/// kernel default root qdisc; any other root qdisc is left alone and the script exits 4.
fn netem_script(dev: &str, args: &str) -> String {
    let dev = sh_quote(dev);
    format!(
        "cur=$(tc qdisc show dev {dev} | awk '/ root / {{print $2\" \"$3; exit}}')\n\
         case \"$cur\" in\n\
           \"netem {NETEM_HANDLE}\"*|noqueue*|pfifo_fast*|fq_codel*|\"mq \"*|\"fq \"*|\"\") ;;\n\
           *) echo \"the root qdisc on {dev} is $cur, not lockpick's: left alone\" >&2; exit 4 ;;\n\
         esac\n\
         tc qdisc replace dev {dev} root handle {NETEM_HANDLE} {args}\n"
    )
}

// ---------------------------------------------------------------------------------------------
// A node

/// One node on a host: its service started detached in a process group of its own.
pub struct SshNode {
    id: String,
    /// Its host's node name (`n<i>`): its directory there and its processes' tag.
    name: String,
    index: usize,
    conn: Arc<Conn>,
    run_id: String,
    /// `/tmp/lockpick-R/<id>` on the host.
    remote_dir: String,
    /// Where its logs are fetched to.
    local_dir: PathBuf,
    /// The shell line that execs the service (already quoted).
    line: String,
    /// `NAME='value'` words for `env`.
    env: Vec<String>,
    port: u16,
    readiness: crate::Readiness,
    /// How `stop` asks the service to exit.
    shutdown: Shutdown,
    state: Arc<StateFile>,
    pgid: Option<i32>,
    paused: AtomicBool,
    started_at: Option<Instant>,
    /// The node's clock, when clock faults are on.
    clock: Option<Arc<SshClock>>,
}

impl SshNode {
    fn node_err(&self, action: &str, e: SshError) -> NodeError {
        NodeError::Unhealthy {
            node: self.id.clone(),
            check: format!("ssh {}", self.conn.label()),
            reason: format!("{action}: {e}"),
        }
    }

    /// Runs `script` on the host off the async threads.
    async fn exec(&self, what: &'static str, script: String) -> Result<String, SshError> {
        let conn = self.conn.clone();
        let started = Instant::now();
        let out = tokio::task::spawn_blocking(move || conn.exec(what, &script, None, CALL_TIMEOUT))
            .await
            .unwrap_or_else(|_| Err(SshError::Config("an ssh task panicked".into())));
        // What each fault's remote step costs, for a run whose faults landed late.
        tracing::debug!(node = %self.id, what, elapsed_ms = started.elapsed().as_millis() as u64, "ssh call");
        out
    }

    fn start_script(&self) -> String {
        let d = &self.remote_dir;
        let tag = format!("{RUN_TAG_VAR}={}/{}", self.run_id, self.name);
        let kill_old = signal_node_script(&self.run_id, &self.name, &["CONT", "KILL"], false);
        // `setsid` makes the shell the leader of a new session and process group; it writes
        // its pid (= the group id) and execs the service, so the pid file names the group.
        let inner = format!(
            "{{ echo $$; {}; }} > {d}/pid.new && mv {d}/pid.new {d}/pid && {}",
            START_TIME_OF.replace("PID", "$$"),
            self.line
        );
        format!(
            "set -e\n\
             {kill_old}\
             mkdir -p {d}/data\n\
             cd {d}\n\
             echo \"--- start $(date +%s%3N)\" >> {d}/stdout.log\n\
             echo \"--- start $(date +%s%3N)\" >> {d}/stderr.log\n\
             env {tag} {env} setsid sh -c {inner} < /dev/null >> {d}/stdout.log 2>> {d}/stderr.log &\n\
             i=0; while [ ! -s {d}/pid ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done\n\
             p=$(sed -n 1p {d}/pid)\n\
             {wait_exec}\
             echo \"$p\"\n",
            env = self.env.join(" "),
            inner = sh_quote(&inner),
            // A clock patch must land on the service, not on the shell about to exec it (an
            // exec maps a fresh vDSO): wait (bounded) until the group leader is no longer `sh`.
            wait_exec = if self.line.starts_with("exec ") {
                "i=0; while [ \"$(readlink /proc/$p/exe)\" = \"$(readlink /proc/$$/exe)\" ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done\n"
            } else {
                ""
            },
        )
    }

    fn readiness_check(&self) -> String {
        self.readiness.described(&self.conn.host.address, self.port)
    }

    /// Waits until the node answers its readiness check, or the service dies, or `startup`
    /// passes.
    async fn wait_healthy(&mut self, startup: Duration) -> Result<(), NodeError> {
        let check = self.readiness_check();
        let deadline = Instant::now() + startup;
        let max_attempts = startup.as_millis() / HEALTH_POLL_INTERVAL.as_millis() + 2;
        let mut last_error = None;
        for attempt in 0..max_attempts {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let timeout = (deadline - now).min(HEALTH_PROBE_TIMEOUT_MAX);
            match self
                .readiness
                .check(&self.conn.host.address, self.port, timeout)
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) => last_error = Some(e.after(last_error.take())),
            }
            // Every second, whether the service still runs (a crash should not wait out the
            // whole start-up time).
            if attempt % 20 == 19 && !self.alive().await {
                break;
            }
            tokio::time::sleep(HEALTH_POLL_INTERVAL).await;
        }
        let tail = self
            .exec(
                "read stderr",
                format!(
                    "tail -n 5 {}/stderr.log 2>/dev/null || true",
                    self.remote_dir
                ),
            )
            .await
            .unwrap_or_default();
        let _ = self.kill_group().await;
        Err(NodeError::HealthTimeout {
            node: self.id.clone(),
            check,
            timeout_ms: startup.as_millis(),
            hint: crate::ready::not_ready_hint(last_error.as_ref()),
            last_error: format!(
                "{}; stderr: {}",
                crate::ready::last_said(last_error.as_ref()),
                tail.trim().replace('\n', " | ")
            ),
        })
    }

    async fn alive(&self) -> bool {
        let Some(p) = self.pgid else { return false };
        self.exec("check the service", GROUP_LIVES.replace("PGID", &p.to_string()))
            .await
            .is_ok()
    }

    async fn signal(&self, signal: &'static str) -> Result<(), NodeError> {
        if self.pgid.is_none() {
            return Err(NodeError::NotRunning {
                node: self.id.clone(),
                action: signal,
            });
        }
        self.exec(
            "signal the service",
            signal_node_script(&self.run_id, &self.name, &[signal], signal != "KILL"),
        )
        .await
        .map(drop)
        .map_err(|e| self.node_err(signal, e))
    }

    async fn kill_group(&mut self) -> Result<(), NodeError> {
        let r = self.signal("KILL").await;
        self.pgid = None;
        self.paused.store(false, Ordering::SeqCst);
        self.started_at = None;
        self.record_pid(None);
        r
    }

    /// Patches the service (or every process of its group) to read the node's control page,
    /// through the agent on its host; nothing when clock faults are off.
    async fn patch_clock(&self, pid: i32, group: bool) -> Result<(), NodeError> {
        let Some(clock) = &self.clock else {
            return Ok(());
        };
        let script = format!(
            "{} clock-agent attach --page {} --pid {pid}{}",
            clock.agent,
            clock.page,
            if group { " --group" } else { "" }
        );
        let out = self
            .exec("patch the clock", script)
            .await
            .map_err(|e| self.node_err("patch its clock", e))?;
        tracing::info!(node = %self.id, pid, patched = out.trim(), "clock patched");
        Ok(())
    }

    fn record_pid(&self, pid: Option<i32>) {
        let index = self.index;
        if let Err(e) = self.state.update(|s| {
            if let Some(h) = s.hosts.get_mut(index) {
                h.pid = pid;
            }
        }) {
            tracing::warn!(node = %self.id, error = %e, "cannot record the pid");
        }
    }

    /// Appends the host's logs of this node to the local ones (the host's are complete: they
    /// are read whole once, at the end).
    fn fetch_logs(&self) {
        for name in ["stdout.log", "stderr.log"] {
            // The end of a long log matters most: at most its last LOG_FETCH_BYTES_MAX bytes,
            // after a line that says how much was left out.
            let script = format!(
                "f={d}/{name}; [ -f $f ] || exit 0\n\
                 s=$(stat -c %s $f); if [ $s -gt {max} ]; then echo \"--- (the first $((s - {max})) bytes of this log are on the host only)\"; fi\n\
                 tail -c {max} $f\n",
                d = self.remote_dir,
                max = LOG_FETCH_BYTES_MAX,
            );
            match self
                .conn
                .exec("fetch the logs", &script, None, COPY_TIMEOUT)
            {
                Ok(text) => {
                    if let Err(e) = std::fs::write(self.local_dir.join(name), text) {
                        tracing::warn!(node = %self.id, error = %e, "cannot write the fetched log");
                    }
                }
                Err(e) => tracing::warn!(node = %self.id, error = %e, "cannot fetch the log"),
            }
        }
    }

    /// Stops the group with its shutdown (kill after its grace), then fetches the logs.
    /// Blocking.
    fn stop_blocking(&mut self) {
        if self.pgid.take().is_some() {
            let script = stop_node_script(&self.run_id, &self.name, self.shutdown);
            // The call's own bound, plus the time the node is given to exit.
            let limit = CALL_TIMEOUT + self.shutdown.grace();
            if let Err(e) = self.conn.exec("stop the service", &script, None, limit) {
                tracing::warn!(node = %self.id, error = %e, "cannot stop the service");
            }
            self.record_pid(None);
            self.paused.store(false, Ordering::SeqCst);
            self.started_at = None;
        }
        self.fetch_logs();
    }
}

impl Drop for SshNode {
    fn drop(&mut self) {
        if self.pgid.is_some() || self.started_at.is_some() {
            self.stop_blocking();
        } else {
            self.fetch_logs();
        }
    }
}

impl NodeControl for SshNode {
    fn id(&self) -> &str {
        &self.id
    }
    fn base_url(&self) -> String {
        format!("http://{}:{}", self.conn.host.address, self.port)
    }
    fn readiness_check(&self) -> String {
        SshNode::readiness_check(self)
    }
    fn start(&mut self, startup: Duration) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move {
            if let Some(pid) = self.pgid {
                return Err(NodeError::AlreadyRunning {
                    node: self.id.clone(),
                    action: "start",
                    pid,
                });
            }
            let out = self
                .exec("start the service", self.start_script())
                .await
                .map_err(|e| self.node_err("start", e))?;
            let pid: i32 = out.trim().parse().map_err(|_| NodeError::Unhealthy {
                node: self.id.clone(),
                check: format!("ssh {}", self.conn.label()),
                reason: format!("start: no pid file after 5 s (got {:?})", out.trim()),
            })?;
            self.pgid = Some(pid);
            self.started_at = Some(Instant::now());
            self.record_pid(Some(pid));
            // As a local node: the service's clock patched as it starts, then every process of
            // its group once it serves.
            if let Err(e) = self.patch_clock(pid, false).await {
                let _ = self.kill_group().await;
                return Err(e);
            }
            self.wait_healthy(startup).await?;
            if let Err(e) = self.patch_clock(pid, true).await {
                let _ = self.kill_group().await;
                return Err(e);
            }
            tracing::info!(node = %self.id, host = %self.conn.label(), pid, "node healthy");
            Ok(())
        })
    }
    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move { tokio::task::block_in_place(|| self.stop_blocking()) })
    }
    fn pause(&self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move {
            self.signal("STOP").await?;
            self.paused.store(true, Ordering::SeqCst);
            Ok(())
        })
    }
    fn resume(&self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move {
            self.signal("CONT").await?;
            self.paused.store(false, Ordering::SeqCst);
            Ok(())
        })
    }
    fn kill(&mut self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move { self.kill_group().await })
    }
    fn restart(&mut self, startup: Duration) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move {
            if self.pgid.is_some() {
                self.kill_group().await?;
            }
            self.start(startup).await
        })
    }
    fn logs(&self) -> NodeLogs {
        NodeLogs {
            stdout: self.local_dir.join("stdout.log"),
            stderr: self.local_dir.join("stderr.log"),
        }
    }
    fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }
    fn started_at(&self) -> Option<Instant> {
        self.started_at
    }
    fn pid(&self) -> Option<u32> {
        self.pgid.map(|p| p as u32)
    }
    fn remote_clock(&self) -> Option<Arc<dyn crate::clock::RemoteClock>> {
        self.clock
            .clone()
            .map(|c| c as Arc<dyn crate::clock::RemoteClock>)
    }
}

/// A node's clock on its host: the node's control page there, written by lockpick's binary
/// copied next to it (`lockpick clock-agent`), one ssh call a change.
#[derive(Debug)]
pub struct SshClock {
    conn: Arc<Conn>,
    /// The copied binary.
    agent: String,
    page: String,
}

impl crate::clock::RemoteClock for SshClock {
    fn set(
        &self,
        scope: crate::clock::ClockScope,
        offset_ns: i64,
        rate: f64,
    ) -> std::io::Result<()> {
        assert!(
            rate > 0.0 && rate.is_finite(),
            "a clock rate must be positive"
        );
        let script = format!(
            "{} clock-agent set --page {} --scope {scope} --offset-ns {offset_ns} --rate {rate}",
            self.agent, self.page
        );
        self.conn
            .exec("set the clock", &script, None, CALL_TIMEOUT)
            .map(drop)
            .map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {}", sh_quote("x'y \"$HOME\""))])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "x'y \"$HOME\"");
    }

    #[test]
    fn hosts_parse_with_defaults_and_refuse_unknown_keys() {
        let h: HostSpec = serde_json::from_str(r#"{"address": "10.0.0.1"}"#).unwrap();
        assert_eq!(
            (h.user.as_str(), h.port, h.service_port),
            ("root", 22, SERVICE_PORT)
        );
        let err = serde_json::from_str::<HostSpec>(r#"{"address": "a", "prot": 2}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("prot"), "{err}");
    }

    /// Each `[[nodes]]` or `[ssh]` mistake is placed at the line of what is wrong: a key
    /// misspelt, a value of the wrong type, a host without its address (at its table's
    /// header). The rest of the file is not the hosts' to judge.
    #[test]
    fn a_mistake_in_the_hosts_names_its_line() {
        let head = "[workload]\nclients = 3\nttl = \"2s\"\n\n[[nodes]]\naddress = \"10.0.0.1\"\n\n";
        let cases: [(&str, usize, &str, &str); 4] = [
            // A typo: the key's own line.
            (
                "[[nodes]]\nadress = \"10.0.0.2\"\nuser = \"root\"\n",
                9,
                "[[nodes]]",
                "unknown field `adress`",
            ),
            // A port written as a string: the value's line.
            (
                "[[nodes]]\naddress = \"10.0.0.2\"\nport = \"22\"\n",
                10,
                "[[nodes]]",
                "invalid type",
            ),
            // No address: the table that lacks it.
            (
                "[[nodes]]\nuser = \"root\"\n",
                8,
                "[[nodes]]",
                "missing field `address`",
            ),
            // [ssh]'s config must be a path.
            ("[ssh]\nconfig = 3\n", 9, "[ssh]", "invalid type"),
        ];
        for (tail, line, section, says) in cases {
            let text = format!("{head}{tail}");
            let e = Hosts::from_config(&text, Path::new("/etc")).unwrap_err();
            assert_eq!(e.line(), Some(line), "{tail:?}: {e}");
            let shown = e.to_string();
            assert!(
                shown.starts_with(&format!("{section}: ")) && shown.contains(says),
                "{tail:?}: {shown}"
            );
        }
        let ok = Hosts::from_config(&format!("{head}[ssh]\nconfig = \"c\"\n"), Path::new("/etc"))
            .unwrap();
        assert_eq!(ok.nodes.len(), 1);
        assert_eq!(ok.ssh_config, Some(PathBuf::from("/etc/c")));
        assert_eq!(
            Hosts::from_config("[workload]\n", Path::new(".")),
            Err(HostsError::Missing)
        );
    }

    /// A group whose only member is a zombie is gone (its parent, like a container's init,
    /// has not reaped it yet); a group with a live member is not.
    #[test]
    fn a_zombie_group_counts_as_gone() {
        // The child leads a group of its own and exits once its parent is `sleep` (a shell
        // would reap it), which never reaps it. Bounded: 5 s at most.
        let mut parent = std::process::Command::new("sh")
            .args([
                "-c",
                "setsid sh -c 'i=0; while [ \"$(cat /proc/$PPID/comm)\" != sleep ] && [ $i -lt 500 ]; \
                 do sleep 0.01; i=$((i+1)); done' & echo $!; exec sleep 10",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let zombie: u32 = line.trim().parse().unwrap();
        let lives = |pgid: u32| {
            std::process::Command::new("sh")
                .args(["-c", &GROUP_LIVES.replace("PGID", &pgid.to_string())])
                .status()
                .unwrap()
                .success()
        };
        let became_zombie = (0..2500).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            crate::process_state(zombie) == Some('Z')
        });
        assert!(became_zombie, "the child never exited");
        assert!(!lives(zombie), "a zombie group counted as live");
        let sleeps_group =
            nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(parent.id() as i32))).unwrap();
        assert!(
            lives(sleeps_group.as_raw() as u32),
            "the group of a live sleep counted as gone"
        );
        let _ = parent.kill();
        let _ = parent.wait();
    }

    /// A run's directory on a host (here: this machine), removed when dropped, also when an
    /// assertion fails.
    struct RemoveOnDrop(String);
    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A new run's id and its node `n1`'s directory, made, with the guard that removes it.
    fn scratch_node() -> (String, String, RemoveOnDrop) {
        let run_id = format!("{:08x}", rand::random::<u32>());
        let dir = node_dir(&run_id, "n1");
        std::fs::create_dir_all(&dir).unwrap();
        let base = RemoveOnDrop(base_dir(&run_id));
        (run_id, dir, base)
    }

    /// The stop script sends the service's own stop signal and gives it its grace: a service
    /// that cleans up for 1.5 s on SIGINT (as PostgreSQL's fast shutdown does) finishes when
    /// given 10 s, is killed in its cleanup when given 0.5 s, and SIGTERM, which it leaves to
    /// the default, ends it at once.
    #[test]
    fn the_stop_script_gives_the_services_signal_its_grace() {
        let (run_id, dir, _base) = scratch_node();
        // Says when its trap is set; sleeps in short steps, so the trap runs within 0.1 s of
        // the signal; 60 s at most. The trap ignores INT first: the script sends it to the
        // node's processes it finds again, the trap's own `sleep` among them, which inherits
        // the ignoring.
        let script = format!("{dir}/service.sh");
        std::fs::write(
            &script,
            "trap 'trap \"\" INT; sleep 1.5; touch \"$0.done\"; exit 0' INT\ntouch \"$0.ready\"\n\
             i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n",
        )
        .unwrap();
        let (ready, done) = (format!("{script}.ready"), format!("{script}.done"));
        let int = |ms| Shutdown {
            signal: crate::StopSignal::Int,
            grace: Duration::from_millis(ms),
        };
        // Too short a grace: killed in its cleanup.
        let cases = [(int(10_000), true), (int(500), false), (Shutdown::TERM, false)];
        for (shutdown, cleans_up) in cases {
            let _ = std::fs::remove_file(&done);
            let _ = std::fs::remove_file(&ready);
            // Spawned from here, not through a shell's `&`: a non-interactive shell starts its
            // background jobs with SIGINT ignored, which no trap can undo.
            let mut service = std::process::Command::new("setsid")
                .args(["sh", &script])
                .spawn()
                .unwrap();
            let pid = service.id();
            let set = (0..500).any(|_| {
                std::thread::sleep(Duration::from_millis(10));
                Path::new(&ready).exists()
            });
            assert!(set, "the service never set its trap");
            std::fs::write(format!("{dir}/pid"), pid_file(pid)).unwrap();
            let started = Instant::now();
            let stopped = std::process::Command::new("sh")
                .args(["-c", &stop_node_script(&run_id, "n1", shutdown)])
                .status()
                .unwrap();
            assert!(stopped.success(), "{shutdown:?}");
            assert_eq!(Path::new(&done).exists(), cleans_up, "{shutdown:?}");
            // Gone (a zombie counts: the script's wait ends there); reaped here.
            assert!(
                !matches!(crate::process_state(pid), Some(s) if s != 'Z'),
                "{shutdown:?}: the service outlived its stop"
            );
            let _ = service.wait();
            assert!(started.elapsed() < Duration::from_secs(8), "{shutdown:?}");
        }
    }

    /// What the start script writes into a node's pid file for `pid`: the pid and its start
    /// time.
    fn pid_file(pid: u32) -> String {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = &stat[stat.rfind(") ").unwrap() + 2..];
        let start = after.split(' ').nth(19).unwrap();
        format!("{pid}\n{start}\n")
    }

    /// The kill script on this machine: a process whose pid file names its pid with another
    /// start time (a reused pid) is left alone and its stale pid file dropped; the run's own
    /// process group is killed, whether its environment still shows the tag or not (Redis
    /// writes its title over it); with `strict`, a missing group is an error.
    #[test]
    fn only_the_runs_own_processes_are_signalled() {
        let (run_id, dir, _base) = scratch_node();
        // Started through a shell that exits, so init reaps them as it would a node's.
        let spawn = |tag: &str| -> u32 {
            let out = std::process::Command::new("sh")
                .args([
                    "-c",
                    &format!("env {tag} setsid sleep 30 >/dev/null 2>&1 & echo $!"),
                ])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let sh = |script: &str| {
            std::process::Command::new("sh")
                .args(["-c", script])
                .status()
                .unwrap()
                .code()
        };
        let alive = |pid: u32| !matches!(crate::process_state(pid), None | Some('Z'));
        let stranger = spawn("OTHER=1");
        // Its pid, with a start time it does not have: a pid reused since the file was written.
        std::fs::write(format!("{dir}/pid"), format!("{stranger}\n1\n")).unwrap();
        assert_eq!(
            sh(&signal_node_script(&run_id, "n1", &["KILL"], false)),
            Some(0)
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(alive(stranger), "an untagged process was killed");
        assert!(
            !Path::new(&format!("{dir}/pid")).exists(),
            "the stale pid file stays"
        );
        assert_eq!(
            sh(&signal_node_script(&run_id, "n1", &["STOP"], true)),
            Some(3)
        );
        // Started by this test, by pid.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(stranger as i32),
            nix::sys::signal::Signal::SIGKILL,
        );

        // The group leader as the pid file names it, without the tag: a service that wrote
        // its title over its environment.
        let ours = spawn("OTHER=2");
        // A descendant that leads a group of its own (a PostgreSQL backend): it has the tag.
        let stray = spawn(&format!("{RUN_TAG_VAR}={run_id}/n1"));
        let tagged = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            std::fs::read(format!("/proc/{stray}/environ"))
                .is_ok_and(|e| String::from_utf8_lossy(&e).contains(&run_id))
        });
        assert!(tagged, "the stray never carried its tag");
        // One more outside the group, untagged, working inside the node's directory.
        let out = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 >/dev/null 2>&1 & echo $!"])
            .current_dir(&dir)
            .output()
            .unwrap();
        let inside: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        std::fs::write(format!("{dir}/pid"), pid_file(ours)).unwrap();
        assert_eq!(
            sh(&signal_node_script(&run_id, "n1", &["STOP"], true)),
            Some(0)
        );
        let stopped = |pid: u32| {
            (0..500).any(|_| {
                std::thread::sleep(Duration::from_millis(2));
                crate::process_state(pid) == Some('T')
            })
        };
        assert!(stopped(ours), "STOP did not reach the run's group");
        assert!(stopped(stray), "STOP did not reach the node's process outside its group");
        assert!(stopped(inside), "STOP did not reach the process in the node's directory");
        assert_eq!(
            sh(&signal_node_script(&run_id, "n1", &["KILL"], true)),
            Some(0)
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(!alive(stray), "KILL did not reach the node's process outside its group");
        assert!(!alive(inside), "KILL did not reach the process in the node's directory");
        assert_eq!(sh(&cleanup_script(&run_id, "n1", None)), Some(0));
        assert!(!alive(ours), "the run's own group survived cleanup");
        assert!(!Path::new(&dir).exists());
    }

    /// netem replaces a kernel default root qdisc or lockpick's own, never another: a fake
    /// `tc` on PATH shows the root qdisc and records what the script asks of it.
    #[test]
    fn netem_leaves_a_foreign_root_qdisc_alone() {
        let dir = tempfile::tempdir().unwrap();
        let calls = dir.path().join("calls");
        let tc = dir.path().join("tc");
        std::fs::write(
            &tc,
            format!(
                "#!/bin/sh\nif [ \"$2\" = show ]; then cat {}/root; else echo \"$@\" >> {}; fi\n",
                dir.path().display(),
                calls.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&tc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let script = netem_script("eth0", "netem delay 100ms");
        let run = |root: &str| {
            std::fs::write(dir.path().join("root"), root).unwrap();
            let _ = std::fs::remove_file(&calls);
            let path = format!(
                "{}:{}",
                dir.path().display(),
                std::env::var("PATH").unwrap()
            );
            let code = std::process::Command::new("sh")
                .args(["-c", &script])
                .env("PATH", path)
                .status()
                .unwrap()
                .code();
            (code, std::fs::read_to_string(&calls).unwrap_or_default())
        };
        for ours in [
            "qdisc noqueue 0: root refcnt 2\n",
            "qdisc fq_codel 0: root refcnt 2 limit 10240p\n",
            "qdisc netem 4c50: root refcnt 2 limit 1000 delay 5ms\n",
            "",
        ] {
            let (code, calls) = run(ours);
            assert_eq!(code, Some(0), "{ours:?}");
            assert!(calls.contains("qdisc replace dev eth0 root handle 4c50: netem delay 100ms"));
        }
        let (code, calls) = run("qdisc htb 1: root refcnt 2 r2q 10 default 0x10\n");
        assert_eq!(code, Some(4));
        assert!(calls.is_empty(), "{calls}");
    }

    #[test]
    fn cleanup_touches_only_the_runs_chain_and_tagged_processes() {
        let s = cleanup_script("0badcafe", "n1", Some("eth0"));
        assert!(s.contains("-D INPUT -j LP-0badcafe"));
        assert!(s.contains("-F LP-0badcafe") && s.contains("-X LP-0badcafe"));
        assert!(!s.contains("-F INPUT") && !s.contains("iptables -w 5 -F\n"));

        assert!(s.contains("qdisc netem 4c50: root"));
        assert!(s.contains("rm -rf /tmp/lockpick-0badcafe/n1"));
        assert!(s.contains("LOCKPICK_RUN=0badcafe/n1"));
        assert!(!s.contains(" -- -"), "dash's kill takes no --");
        // The script is valid sh.
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", &s])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
