//! Nodes in network namespaces: one namespace per node on a private bridge, and the network
//! faults made inside them (partitions, client cuts, netem). Needs root, `ip` (iproute2),
//! `iptables` and, for netem, `tc` with the kernel's `sch_netem`.
//!
//! Layout of one run (`P` is the run's unique prefix, `lp-<hint>-<pid>-<random>`):
//!
//! ```text
//!   host ns             P-hub ns                                      P-n<i> ns
//!   127.0.0.1:<port> ─► hub socket, br0 10.213.0.1/24 ─ lp<tag>h<i> ═ eth0 10.213.0.<11+i>
//! ```
//!
//! - [`NetnsCluster`]: creates the namespaces, the bridge, the veth pairs and the addresses;
//!   [`NetnsCluster::wrap`] runs a node's command inside its namespace; [`NetnsCluster::proxy`]
//!   gives the harness a loopback address for a node's port; [`NetnsCluster::partition`],
//!   [`NetnsCluster::cut_clients`], [`NetnsCluster::heal`], [`NetnsCluster::netem`] and
//!   [`NetnsCluster::clear_netem`] are the faults.
//! - [`topology`]: Jepsen's partition shapes as pairs of nodes to cut.
//! - [`cleanup_from_state`]: undoes what a SIGKILLed run left, from its state file.
//! - [`capabilities`]: what `lockpick doctor` reports (root, tools, netem).
//! - [`probe_tcp`] and [`tcp_listener_in`]: a TCP connect or listener inside a namespace.
//!
//! Invariants: nothing is ever created in the host's (initial) network namespace: every
//! link, address, rule and qdisc is made with `ip -n <ns>` / `ip netns exec <ns>` in a
//! namespace this run created, and the only host-side object is the proxy's loopback listener.
//! Every namespace is written to the state file before it is created, and removed on
//! teardown, on `Drop`, and when creation fails halfway. Nothing here kills a process; the
//! only processes started are the bounded `ip`/`iptables`/`tc` commands.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use nix::sched::CloneFlags;
use serde::{Deserialize, Serialize};

use crate::command::CommandError;
use crate::NodeCommand;

mod proxy;
mod runtime;
pub mod topology;

pub use runtime::{Netns, NetnsRuntime};

/// Every name this module gives a namespace starts with this; cleanup touches nothing else.
pub const NAME_PREFIX: &str = "lp-";
/// Where `ip netns add` mounts named namespaces.
const NETNS_DIR: &str = "/run/netns";
/// The bridge's address in the hub namespace, which is also the source address of every
/// proxied connection: cutting it cuts the clients.
pub const HUB_IP: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
const PREFIX_LEN: u8 = 24;
/// Node `i` gets `10.213.0.(11 + i)`.
const FIRST_NODE_HOST: u8 = 11;
/// A bound on the cluster size that also keeps every address inside the /24.
pub const NODES_MAX: usize = 200;
/// The node-side veth end, in every node namespace.
pub const NODE_DEV: &str = "eth0";
const BRIDGE_DEV: &str = "br0";
/// One `ip`/`iptables`/`tc` command never runs longer than this.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// iptables waits this long for the xtables lock (shared by all namespaces) before failing.
const XTABLES_WAIT_S: &str = "5";
const STATE_VERSION: u32 = 1;

/// Every failure of the namespace runtime; each names the command or object that failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespaces need root (running as uid {uid})")]
    NotRoot { uid: u32 },

    #[error("a namespace cluster has 1 to {max} nodes, not {nodes}")]
    NodeCount { nodes: usize, max: usize },

    #[error("no node {node}: the cluster has {nodes} nodes")]
    NoSuchNode { node: usize, nodes: usize },

    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: io::Error,
    },

    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },

    #[error("`{command}` did not finish within {timeout_ms} ms; killed it")]
    Timeout { command: String, timeout_ms: u128 },

    #[error(transparent)]
    StateFile(#[from] crate::state_file::StateFileError),

    #[error("cannot enter network namespace {ns}: {reason}")]
    Enter { ns: String, reason: String },

    #[error("proxy to node {node} port {port}: cannot {what}: {source}")]
    Proxy {
        node: usize,
        port: u16,
        what: &'static str,
        #[source]
        source: io::Error,
    },

    #[error("invalid netem spec: {reason}")]
    BadNetem { reason: String },

    #[error(
        "netem is not available: {reason} (the kernel needs sch_netem, CONFIG_NET_SCH_NETEM; \
         tc is in iproute2)"
    )]
    NetemUnavailable { reason: String },

    #[error("the namespace cluster {prefix} is torn down")]
    TornDown { prefix: String },

    #[error("teardown left {left:?}: {errors}")]
    Teardown { left: Vec<String>, errors: String },
}

// ---------------------------------------------------------------------------------------------
// Commands

/// Runs `argv` with a bounded wait ([`COMMAND_TIMEOUT`]) and returns its stdout; a non-zero
/// exit is an error that carries the command line and its stderr.
fn run(argv: &[&str]) -> Result<String, NetnsError> {
    let command = argv.join(" ");
    let owned: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    crate::command::run(&owned, None, COMMAND_TIMEOUT, &command).map_err(|e| match e {
        CommandError::Spawn { command, source } => NetnsError::Spawn { command, source },
        CommandError::Failed {
            command,
            status,
            stderr,
            ..
        } => NetnsError::Command {
            command,
            status,
            stderr,
        },
        CommandError::Timeout {
            command,
            timeout_ms,
        } => NetnsError::Timeout {
            command,
            timeout_ms,
        },
    })
}

/// `ip -n <ns> <args>`: an `ip` command inside namespace `ns`.
fn ip_in(ns: &str, args: &[&str]) -> Result<String, NetnsError> {
    assert_ours(ns);
    let mut argv = vec!["ip", "-n", ns];
    argv.extend_from_slice(args);
    run(&argv)
}

/// `ip netns exec <ns> <argv>`: any command inside namespace `ns`.
fn exec_in(ns: &str, args: &[&str]) -> Result<String, NetnsError> {
    assert_ours(ns);
    let mut argv = vec!["ip", "netns", "exec", ns];
    argv.extend_from_slice(args);
    run(&argv)
}

fn iptables_in(ns: &str, action: &str, spec: &[String]) -> Result<(), NetnsError> {
    let mut args = vec!["iptables", "-w", XTABLES_WAIT_S, action];
    args.extend(spec.iter().map(String::as_str));
    exec_in(ns, &args).map(drop)
}

/// Only names we generate reach a command: a bug cannot aim `ip -n` at the host (an empty
/// name) or at someone else's namespace.
fn assert_ours(ns: &str) {
    assert!(
        is_our_name(ns),
        "refusing to touch namespace {ns:?}: not one of ours"
    );
}

fn is_our_name(name: &str) -> bool {
    name.len() > NAME_PREFIX.len()
        && name.len() <= 64
        && name.starts_with(NAME_PREFIX)
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The named namespaces that exist now.
fn list_namespaces() -> Result<BTreeSet<String>, NetnsError> {
    let out = run(&["ip", "netns", "list"])?;
    // Lines look like `name (id: 3)` or just `name`.
    Ok(out
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

fn delete_namespace(ns: &str) -> Result<(), NetnsError> {
    assert_ours(ns);
    run(&["ip", "netns", "del", ns]).map(drop)
}

/// Moves the calling thread into namespace `ns` (only this thread: network namespaces are
/// per thread).
fn enter_netns(ns: &str, path: &Path) -> Result<(), NetnsError> {
    let enter_err = |reason: String| NetnsError::Enter {
        ns: ns.to_string(),
        reason,
    };
    let file = File::open(path).map_err(|e| enter_err(format!("open {}: {e}", path.display())))?;
    nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| enter_err(format!("setns: {e}")))
}

/// Runs `f` on a fresh thread inside namespace `ns` and returns its result. `ns` may be any
/// named namespace (this only reads).
fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NetnsError> {
    let enter_err = |reason: String| NetnsError::Enter {
        ns: ns.to_string(),
        reason,
    };
    if ns.is_empty() || ns.contains('/') || ns.starts_with('.') {
        return Err(enter_err("not a namespace name".into()));
    }
    let path = Path::new(NETNS_DIR).join(ns);
    let ns_owned = ns.to_string();
    std::thread::Builder::new()
        .name("netns-probe".into())
        .spawn(move || {
            enter_netns(&ns_owned, &path)?;
            Ok(f())
        })
        .map_err(|e| enter_err(format!("cannot start a thread: {e}")))?
        .join()
        .map_err(|_| enter_err("the thread panicked".into()))?
}

/// Whether a TCP connection to `addr`, made from inside namespace `ns`, opens within
/// `timeout`. `Ok(false)` is "refused or timed out"; an error means the probe itself could
/// not run (no such namespace, not root), which must not be mistaken for a cut.
pub fn probe_tcp(ns: &str, addr: SocketAddrV4, timeout: Duration) -> Result<bool, NetnsError> {
    in_netns(ns, move || {
        std::net::TcpStream::connect_timeout(&addr.into(), timeout).is_ok()
    })
}

/// A TCP listener bound to `addr` inside namespace `ns`. The socket stays in `ns` whichever
/// thread uses it later, so tests (and `doctor`) can serve from a namespace without a helper
/// process.
pub fn tcp_listener_in(ns: &str, addr: SocketAddrV4) -> Result<std::net::TcpListener, NetnsError> {
    in_netns(ns, move || std::net::TcpListener::bind(addr))?.map_err(|e| NetnsError::Enter {
        ns: ns.to_string(),
        reason: format!("bind {addr}: {e}"),
    })
}

// ---------------------------------------------------------------------------------------------
// State file

/// What a run has created, written before each creation so a SIGKILLed run can be undone.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct State {
    version: u32,
    /// Every namespace of the run starts with this.
    prefix: String,
    /// The harness process, which also runs the proxy (a thread of it, not a child process).
    pid: i32,
    /// Its start time (field 22 of /proc/<pid>/stat), so a reused pid is not taken for it.
    pid_start_ticks: Option<u64>,
    /// Namespaces created or about to be created, hub first.
    namespaces: Vec<String>,
}

fn state_err(path: &Path, what: &'static str, reason: impl ToString) -> NetnsError {
    crate::state_file::StateFileError::io(path, what, reason).into()
}

fn write_state(path: &Path, state: &State) -> Result<(), NetnsError> {
    Ok(crate::state_file::write_json(path, state)?)
}

fn read_state(path: &Path) -> Result<State, NetnsError> {
    let bytes = std::fs::read(path).map_err(|e| state_err(path, "read", e))?;
    let state: State = serde_json::from_slice(&bytes).map_err(|e| state_err(path, "parse", e))?;
    if state.version != STATE_VERSION {
        return Err(state_err(
            path,
            "use",
            format!("version {} (expected {STATE_VERSION})", state.version),
        ));
    }
    if !is_our_name(&state.prefix) {
        return Err(state_err(
            path,
            "use",
            format!("prefix {:?} is not a lockpick prefix", state.prefix),
        ));
    }
    Ok(state)
}

fn remove_state(path: &Path) -> Result<(), NetnsError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(state_err(path, "remove", e)),
        _ => Ok(()),
    }
}

/// What [`cleanup_from_state`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Namespaces deleted now.
    pub removed: Vec<String>,
    /// Listed in the state file but already gone.
    pub already_gone: Vec<String>,
    /// Listed but not carrying the run's prefix: left alone.
    pub refused: Vec<String>,
}

/// Removes what a killed run left behind, from its state file: every listed namespace that
/// still exists and carries the run's prefix (deleting a namespace takes its links, rules and
/// qdiscs along). Then removes the state file. Refuses while the run's process is alive (a
/// live run tears down itself), unless that process is the caller. Kills nothing.
pub fn cleanup_from_state(path: &Path) -> Result<CleanupReport, NetnsError> {
    let state = read_state(path)?;
    crate::state_file::refuse_if_alive(path, state.pid, state.pid_start_ticks)?;
    let existing = list_namespaces()?;
    let mut report = CleanupReport::default();
    let mut first_error = None;
    // Nodes before the hub: reverse creation order.
    for ns in state.namespaces.iter().rev() {
        if !is_our_name(ns) || !ns.starts_with(&format!("{}-", state.prefix)) {
            report.refused.push(ns.clone());
        } else if !existing.contains(ns) {
            report.already_gone.push(ns.clone());
        } else {
            match delete_namespace(ns) {
                Ok(()) => report.removed.push(ns.clone()),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    remove_state(path)?;
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// Netem

/// A netem qdisc on a node's `eth0`: applies to everything the node sends (to peers and
/// back to clients).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetemSpec {
    pub delay_ms: u32,
    /// Uniform ± variation around `delay_ms`.
    pub jitter_ms: u32,
    pub loss_pct: f64,
    pub duplicate_pct: f64,
    /// Share of packets sent at once instead of delayed; needs `delay_ms > 0`.
    pub reorder_pct: f64,
}

/// Longest delay accepted: a bound, and a guard against seconds taken for milliseconds.
const NETEM_DELAY_MS_MAX: u32 = 60_000;

impl NetemSpec {
    /// The netem arguments after `tc qdisc replace dev eth0 root`, validated.
    pub fn tc_args(&self) -> Result<Vec<String>, NetnsError> {
        let bad = |reason: String| Err(NetnsError::BadNetem { reason });
        if self.delay_ms > NETEM_DELAY_MS_MAX || self.jitter_ms > NETEM_DELAY_MS_MAX {
            return bad(format!(
                "delay and jitter are at most {NETEM_DELAY_MS_MAX} ms"
            ));
        }
        for (name, pct) in [
            ("loss", self.loss_pct),
            ("duplicate", self.duplicate_pct),
            ("reorder", self.reorder_pct),
        ] {
            if !(0.0..=100.0).contains(&pct) {
                return bad(format!("{name} {pct}% is not within 0..=100"));
            }
        }
        if self.reorder_pct > 0.0 && self.delay_ms == 0 {
            return bad("reorder needs a delay (reordered packets are the undelayed ones)".into());
        }
        let mut args = vec!["netem".to_string()];
        if self.delay_ms > 0 || self.jitter_ms > 0 {
            args.extend(["delay".into(), format!("{}ms", self.delay_ms)]);
            if self.jitter_ms > 0 {
                args.push(format!("{}ms", self.jitter_ms));
            }
        }
        for (name, pct) in [
            ("loss", self.loss_pct),
            ("duplicate", self.duplicate_pct),
            ("reorder", self.reorder_pct),
        ] {
            if pct > 0.0 {
                args.extend([name.to_string(), format!("{pct}%")]);
            }
        }
        Ok(args)
    }
}

// ---------------------------------------------------------------------------------------------
// The cluster

/// Running proxies by (node, port): the loopback address and the accept task.
type Proxies = HashMap<(usize, u16), (SocketAddr, tokio::task::JoinHandle<()>)>;

/// One iptables rule this run added, kept so heal deletes exactly it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    node: usize,
    /// After `-A`/`-D`: chain and match, e.g. `INPUT -s 10.213.0.12 -j DROP`.
    spec: Vec<String>,
}

#[derive(Default)]
struct Faults {
    /// In the order added.
    rules: Vec<Rule>,
    netem: BTreeSet<usize>,
}

/// A run's namespaces: a hub holding the bridge, and one namespace per node linked to it.
///
/// The fault methods take `&self` (a cluster can be shared behind an `Arc`) and block for a
/// few milliseconds per `ip`/`iptables`/`tc` command; call them from `spawn_blocking` in hot
/// async code. Dropping the cluster tears it down; stop the nodes' processes first (a process
/// keeps its namespace alive, unnamed, until it exits).
pub struct NetnsCluster {
    prefix: String,
    state_file: PathBuf,
    state: State,
    nodes: usize,
    /// `<prefix>-n<i>` for every node.
    node_names: Vec<String>,
    /// Created so far (hub first), exactly as recorded in the state file.
    created: Vec<String>,
    hub: Option<proxy::HubSockets>,
    proxies: Mutex<Proxies>,
    faults: Mutex<Faults>,
    torn_down: bool,
}

impl std::fmt::Debug for NetnsCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetnsCluster")
            .field("prefix", &self.prefix)
            .field("nodes", &self.nodes)
            .field("created", &self.created)
            .field("torn_down", &self.torn_down)
            .finish_non_exhaustive()
    }
}

fn unique_prefix(hint: &str) -> String {
    let hint: String = hint
        .chars()
        .filter_map(|c| {
            let c = c.to_ascii_lowercase();
            (c.is_ascii_lowercase() || c.is_ascii_digit()).then_some(c)
        })
        .take(12)
        .collect();
    let tag: u32 = rand::random::<u32>() & 0x00ff_ffff;
    let pid = std::process::id();
    if hint.is_empty() {
        format!("{NAME_PREFIX}{pid}-{tag:06x}")
    } else {
        format!("{NAME_PREFIX}{hint}-{pid}-{tag:06x}")
    }
}

impl NetnsCluster {
    /// Creates the hub namespace with bridge `br0` (10.213.0.1/24) and `nodes` node
    /// namespaces `<prefix>-n<i>`, each with `eth0` = 10.213.0.(11+i)/24 (a veth pair made
    /// inside the hub, its other end on the bridge) and `lo` up. `state_file` is written before
    /// anything is created and kept current; it is removed by a clean teardown. On any error
    /// everything created so far is removed again.
    pub fn create(
        prefix_hint: &str,
        nodes: usize,
        state_file: &Path,
    ) -> Result<NetnsCluster, NetnsError> {
        if !(1..=NODES_MAX).contains(&nodes) {
            return Err(NetnsError::NodeCount {
                nodes,
                max: NODES_MAX,
            });
        }
        let uid = nix::unistd::geteuid().as_raw();
        if uid != 0 {
            return Err(NetnsError::NotRoot { uid });
        }
        let prefix = unique_prefix(prefix_hint);
        let pid = std::process::id() as i32;
        let state = State {
            version: STATE_VERSION,
            prefix: prefix.clone(),
            pid,
            pid_start_ticks: crate::process::start_ticks(pid),
            namespaces: Vec::new(),
        };
        write_state(state_file, &state)?;
        let mut cluster = NetnsCluster {
            prefix: prefix.clone(),
            state_file: state_file.to_path_buf(),
            state,
            nodes,
            node_names: (0..nodes).map(|i| format!("{prefix}-n{i}")).collect(),
            created: Vec::new(),
            hub: None,
            proxies: Mutex::new(HashMap::new()),
            faults: Mutex::new(Faults::default()),
            torn_down: false,
        };
        // On error `cluster` is dropped here, which tears down whatever exists.
        cluster.build()?;
        Ok(cluster)
    }

    fn build(&mut self) -> Result<(), NetnsError> {
        let hub = self.hub_ns();
        self.add_namespace(&hub)?;
        ip_in(&hub, &["link", "set", "lo", "up"])?;
        ip_in(&hub, &["link", "add", BRIDGE_DEV, "type", "bridge"])?;
        let hub_cidr = format!("{HUB_IP}/{PREFIX_LEN}");
        ip_in(&hub, &["addr", "add", &hub_cidr, "dev", BRIDGE_DEV])?;
        ip_in(&hub, &["link", "set", BRIDGE_DEV, "up"])?;
        // The veth names live only inside the hub namespace, but carry the run's tag anyway so
        // they are recognisable; `lp` + 6 hex + `h` + up to 3 digits stays within 15 bytes.
        let tag = self.prefix[self.prefix.len() - 6..].to_string();
        for i in 0..self.nodes {
            let ns = self.node_ns_name(i).to_string();
            self.add_namespace(&ns)?;
            let hub_end = format!("lp{tag}h{i}");
            debug_assert!(hub_end.len() <= 15);
            ip_in(
                &hub,
                &[
                    "link", "add", &hub_end, "type", "veth", "peer", "name", NODE_DEV, "netns", &ns,
                ],
            )?;
            ip_in(&hub, &["link", "set", &hub_end, "master", BRIDGE_DEV])?;
            ip_in(&hub, &["link", "set", &hub_end, "up"])?;
            let cidr = format!("{}/{PREFIX_LEN}", node_ip(i));
            ip_in(&ns, &["addr", "add", &cidr, "dev", NODE_DEV])?;
            ip_in(&ns, &["link", "set", NODE_DEV, "up"])?;
            ip_in(&ns, &["link", "set", "lo", "up"])?;
        }
        self.hub = Some(proxy::HubSockets::start(
            &hub,
            Path::new(NETNS_DIR).join(&hub),
        )?);
        Ok(())
    }

    /// Records `ns` in the state file, then creates it.
    fn add_namespace(&mut self, ns: &str) -> Result<(), NetnsError> {
        assert_ours(ns);
        self.state.namespaces.push(ns.to_string());
        write_state(&self.state_file, &self.state)?;
        run(&["ip", "netns", "add", ns])?;
        self.created.push(ns.to_string());
        Ok(())
    }

    fn hub_ns(&self) -> String {
        format!("{}-hub", self.prefix)
    }

    fn node_ns_name(&self, i: usize) -> &str {
        &self.node_names[i]
    }

    fn check_node(&self, node: usize) -> Result<(), NetnsError> {
        if self.torn_down {
            return Err(NetnsError::TornDown {
                prefix: self.prefix.clone(),
            });
        }
        if node >= self.nodes {
            return Err(NetnsError::NoSuchNode {
                node,
                nodes: self.nodes,
            });
        }
        Ok(())
    }

    /// The run's unique prefix; every namespace of the run starts with it.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The hub namespace (the bridge, and the proxy's side of every connection).
    pub fn hub_ns_name(&self) -> String {
        self.hub_ns()
    }

    /// Node `i`'s address, which exists only inside the run's namespaces. Panics if `i` is
    /// not a node.
    pub fn node_ip(&self, i: usize) -> Ipv4Addr {
        assert!(
            i < self.nodes,
            "no node {i}: the cluster has {} nodes",
            self.nodes
        );
        node_ip(i)
    }

    /// Node `i`'s namespace name. Panics if `i` is not a node.
    pub fn node_ns(&self, i: usize) -> &str {
        assert!(
            i < self.nodes,
            "no node {i}: the cluster has {} nodes",
            self.nodes
        );
        self.node_ns_name(i)
    }

    /// `cmd` run inside node `i`'s namespace: `ip netns exec <ns> argv...`, or for a shell
    /// line `ip netns exec <ns> sh -c <line>` (with [`NodeCommand::shell_line`]'s `exec`
    /// prefix). `ip netns exec` execs the command, so the process the spawner forked, with
    /// its process group and `PR_SET_PDEATHSIG`, becomes the service itself. Panics if `i` is
    /// not a node.
    pub fn wrap(&self, i: usize, cmd: NodeCommand) -> NodeCommand {
        let mut argv = vec![
            "ip".to_string(),
            "netns".into(),
            "exec".into(),
            self.node_ns(i).to_string(),
        ];
        match cmd {
            NodeCommand::Argv(rest) => argv.extend(rest),
            NodeCommand::Shell(line) => {
                argv.extend(["sh".into(), "-c".into(), NodeCommand::shell_line(&line)])
            }
        }
        NodeCommand::Argv(argv)
    }

    /// A loopback address in the host namespace that reaches `node_ip(i):port`: every
    /// connection accepted there is opened anew from the hub namespace (source address
    /// [`HUB_IP`]) and copied both ways. At most 512 forwarded connections at a time; a
    /// connection that cannot be opened within 5 s is closed. Asking twice for the same
    /// node and port returns the same address. Needs a tokio runtime; the proxy runs on it
    /// until teardown.
    pub async fn proxy(&self, i: usize, port: u16) -> Result<SocketAddr, NetnsError> {
        self.check_node(i)?;
        if let Some((addr, _)) = self.lock_proxies().get(&(i, port)) {
            return Ok(*addr);
        }
        let Some(sockets) = self.hub.as_ref().and_then(|hub| hub.handle()) else {
            return Err(NetnsError::TornDown {
                prefix: self.prefix.clone(),
            });
        };
        let target = SocketAddrV4::new(node_ip(i), port);
        let (addr, task) = proxy::start(i, target, sockets).await?;
        let mut proxies = self.lock_proxies();
        if let Some((existing, _)) = proxies.get(&(i, port)) {
            // Lost a race with a concurrent call for the same target: keep the first.
            task.abort();
            return Ok(*existing);
        }
        proxies.insert((i, port), (addr, task));
        Ok(addr)
    }

    fn lock_proxies(&self) -> std::sync::MutexGuard<'_, Proxies> {
        self.proxies.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a DROP rule for packets from `source` inside node `node`'s namespace, unless this
    /// cluster already added the same rule.
    fn drop_from(
        &self,
        faults: &mut Faults,
        node: usize,
        source: Ipv4Addr,
    ) -> Result<(), NetnsError> {
        self.drop_rule(faults, node, ["INPUT", "-s", &source.to_string()])
    }

    /// Adds a DROP rule for packets of `chain` matching one address (`["OUTPUT", "-d",
    /// "10.213.0.1"]`) inside node `node`'s namespace, unless this cluster already added it.
    fn drop_rule(
        &self,
        faults: &mut Faults,
        node: usize,
        [chain, flag, address]: [&str; 3],
    ) -> Result<(), NetnsError> {
        let rule = Rule {
            node,
            spec: [chain, flag, address, "-j", "DROP"]
                .map(String::from)
                .to_vec(),
        };
        if faults.rules.contains(&rule) {
            return Ok(());
        }
        iptables_in(self.node_ns_name(node), "-A", &rule.spec)?;
        faults.rules.push(rule);
        Ok(())
    }

    /// Cuts every pair in `cut` in both directions: inside a's namespace packets from b are
    /// dropped, and inside b's those from a. Adds to any cut already in place; rules already
    /// present are not added twice. On error the rules added so far stay recorded, so
    /// [`heal`](Self::heal) removes them.
    pub fn partition(&self, cut: &[(usize, usize)]) -> Result<(), NetnsError> {
        for &(a, b) in cut {
            self.check_node(a)?;
            self.check_node(b)?;
            assert!(a != b, "a node cannot be cut from itself");
        }
        let mut faults = self.lock_faults();
        for &(a, b) in cut {
            self.drop_from(&mut faults, a, node_ip(b))?;
            self.drop_from(&mut faults, b, node_ip(a))?;
        }
        Ok(())
    }

    /// Cuts the clients off `nodes`, both ways: inside those nodes' namespaces, drops packets
    /// from the hub (the proxy's source address) and packets to it, so an answer the node
    /// sends during the cut (a grant it was already deciding) reaches no client until the
    /// heal either. Peers still reach them.
    pub fn cut_clients(&self, nodes: &[usize]) -> Result<(), NetnsError> {
        for &node in nodes {
            self.check_node(node)?;
        }
        let mut faults = self.lock_faults();
        for &node in nodes {
            self.drop_from(&mut faults, node, HUB_IP)?;
            self.drop_rule(&mut faults, node, ["OUTPUT", "-d", &HUB_IP.to_string()])?;
        }
        Ok(())
    }

    /// Deletes exactly the rules [`partition`](Self::partition) and
    /// [`cut_clients`](Self::cut_clients) added (`iptables -D` with the same spec), newest
    /// first. A rule that cannot be deleted stays recorded and the first error is returned
    /// after trying all.
    pub fn heal(&self) -> Result<(), NetnsError> {
        let mut faults = self.lock_faults();
        let mut first_error = None;
        let mut kept = Vec::new();
        while let Some(rule) = faults.rules.pop() {
            if let Err(e) = iptables_in(self.node_ns_name(rule.node), "-D", &rule.spec) {
                first_error.get_or_insert(e);
                kept.push(rule);
            }
        }
        kept.reverse();
        faults.rules = kept;
        first_error.map_or(Ok(()), Err)
    }

    /// Whether any partition or client-cut rule is in place.
    pub fn is_partitioned(&self) -> bool {
        !self.lock_faults().rules.is_empty()
    }

    /// Puts `spec` on `eth0` of each of `nodes` (`tc qdisc replace ... root netem ...`,
    /// replacing an earlier netem there).
    pub fn netem(&self, nodes: &[usize], spec: &NetemSpec) -> Result<(), NetnsError> {
        let args = spec.tc_args()?;
        for &node in nodes {
            self.check_node(node)?;
        }
        let mut faults = self.lock_faults();
        for &node in nodes {
            let mut argv = vec!["tc", "qdisc", "replace", "dev", NODE_DEV, "root"];
            argv.extend(args.iter().map(String::as_str));
            match exec_in(self.node_ns_name(node), &argv) {
                Ok(_) => {
                    faults.netem.insert(node);
                }
                Err(NetnsError::Command {
                    stderr, command, ..
                }) if stderr.contains("kind is unknown") => {
                    return Err(NetnsError::NetemUnavailable {
                        reason: format!("`{command}`: {stderr}"),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Removes the netem qdisc from each of `nodes` that has one (others are left alone).
    pub fn clear_netem(&self, nodes: &[usize]) -> Result<(), NetnsError> {
        for &node in nodes {
            self.check_node(node)?;
        }
        let mut faults = self.lock_faults();
        for &node in nodes {
            if faults.netem.contains(&node) {
                exec_in(
                    self.node_ns_name(node),
                    &["tc", "qdisc", "del", "dev", NODE_DEV, "root"],
                )?;
                faults.netem.remove(&node);
            }
        }
        Ok(())
    }

    /// Stops the proxies and the hub thread, deletes every namespace this cluster created
    /// (which takes their links, addresses, rules and qdiscs along) and removes the state file.
    /// Idempotent; tries every namespace even when one fails.
    pub fn teardown(&mut self) -> Result<(), NetnsError> {
        self.torn_down = true;
        for (_, (_, task)) in self.lock_proxies().drain() {
            task.abort();
        }
        if let Some(mut hub) = self.hub.take() {
            hub.stop();
        }
        {
            let mut faults = self.lock_faults();
            faults.rules.clear();
            faults.netem.clear();
        }
        let mut errors = Vec::new();
        // Nodes before the hub.
        while let Some(ns) = self.created.pop() {
            match delete_namespace(&ns) {
                Ok(()) => self.state.namespaces.retain(|n| n != &ns),
                Err(e) => {
                    // Gone already (someone ran cleanup): nothing left to do for it.
                    if Path::new(NETNS_DIR).join(&ns).exists() {
                        errors.push((ns, e));
                    } else {
                        self.state.namespaces.retain(|n| n != &ns);
                    }
                }
            }
        }
        // A namespace recorded but whose creation failed may still exist (created, then the
        // command timed out): delete it if so.
        for ns in self.state.namespaces.clone() {
            if Path::new(NETNS_DIR).join(&ns).exists() {
                if let Err(e) = delete_namespace(&ns) {
                    errors.push((ns, e));
                    continue;
                }
            }
            self.state.namespaces.retain(|n| n != &ns);
        }
        if errors.is_empty() {
            remove_state(&self.state_file)
        } else {
            let left: Vec<String> = errors.iter().map(|(ns, _)| ns.clone()).collect();
            self.created = left.clone();
            let _ = write_state(&self.state_file, &self.state);
            Err(NetnsError::Teardown {
                left,
                errors: errors
                    .iter()
                    .map(|(_, e)| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            })
        }
    }
}

impl Drop for NetnsCluster {
    fn drop(&mut self) {
        if self.torn_down && self.created.is_empty() && self.state.namespaces.is_empty() {
            return;
        }
        if let Err(e) = self.teardown() {
            tracing::warn!(prefix = %self.prefix, error = %e, "namespace teardown failed");
        }
    }
}

fn node_ip(i: usize) -> Ipv4Addr {
    assert!(i < NODES_MAX);
    Ipv4Addr::new(10, 213, 0, FIRST_NODE_HOST + i as u8)
}

// ---------------------------------------------------------------------------------------------
// Capabilities

/// One thing the namespace runtime needs, checked on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    /// `root`, `ip`, `netns`, `iptables`, `netem`.
    pub name: &'static str,
    pub ok: bool,
    /// What was found, or why it is missing.
    pub why: String,
    /// The Debian package that provides it, when a package does.
    pub package: Option<&'static str>,
}

/// Checks root, `ip`, namespaces with a bridge and a veth pair, `iptables` inside a namespace
/// and netem, the last three in a throwaway namespace that is deleted again. A check that
/// depends on a failed one is reported as not ok with that reason.
pub fn capabilities() -> Vec<Capability> {
    let uid = nix::unistd::geteuid().as_raw();
    let root = uid == 0;
    let mut caps = vec![cap(
        "root",
        root,
        if root {
            "running as root".into()
        } else {
            format!("running as uid {uid}; namespaces, iptables and tc need root")
        },
        None,
    )];
    let ip = run(&["ip", "-V"]);
    caps.push(cap(
        "ip",
        ip.is_ok(),
        match &ip {
            Ok(v) => v.trim().to_string(),
            Err(e) => e.to_string(),
        },
        Some("iproute2"),
    ));
    let iptables = run(&["iptables", "--version"]);
    let iptables_found = match &iptables {
        Ok(v) => Ok(v.trim().to_string()),
        Err(e) => Err(e.to_string()),
    };
    if !root || ip.is_err() {
        caps.extend(unprobed(iptables_found));
    } else {
        caps.extend(probed(iptables_found));
    }
    caps
}

fn cap(
    name: &'static str,
    ok: bool,
    why: String,
    package: Option<&'static str>,
) -> Capability {
    Capability {
        name,
        ok,
        why,
        package,
    }
}

/// Without root or `ip` nothing is tried in a namespace: netns, iptables and netem are not
/// ok, for that reason (iptables's with its version when it is installed).
fn unprobed(iptables_found: Result<String, String>) -> Vec<Capability> {
    let why = "needs root and ip".to_string();
    vec![
        cap("netns", false, why.clone(), Some("iproute2")),
        cap(
            "iptables",
            false,
            iptables_found.map_or_else(|e| e, |v| format!("{v}; {why}")),
            Some("iptables"),
        ),
        cap("netem", false, why, Some("iproute2")),
    ]
}

/// Namespaces with a bridge and a veth pair, iptables inside one, and netem, tried in a
/// throwaway namespace that is deleted again.
fn probed(iptables_found: Result<String, String>) -> Vec<Capability> {
    let ns = format!("{}-doctor", unique_prefix(""));
    let checks = probe_in_throwaway(&ns, iptables_found.is_ok());
    if let Err(e) = delete_namespace(&ns) {
        if Path::new(NETNS_DIR).join(&ns).exists() {
            tracing::warn!(%ns, error = %e, "cannot delete the doctor's throwaway namespace");
        }
    }
    let (netns, iptables_check, netem) = checks;
    let iptables_why = match (&iptables_found, iptables_check) {
        (Err(e), _) => Err(e.clone()),
        (Ok(v), Ok(())) => Ok(format!("{v}; works inside a namespace")),
        (Ok(v), Err(e)) => Err(format!("{v}; but inside a namespace: {e}")),
    };
    vec![
        cap("netns", netns.is_ok(), describe(netns), Some("iproute2")),
        cap(
            "iptables",
            iptables_why.is_ok(),
            iptables_why.unwrap_or_else(|e| e),
            Some("iptables"),
        ),
        cap(
            "netem",
            netem.is_ok(),
            match netem {
                Ok(()) => "tc qdisc netem works".into(),
                Err(e) => format!("{e} (kernel module sch_netem, CONFIG_NET_SCH_NETEM)"),
            },
            Some("iproute2"),
        ),
    ]
}

fn describe(result: Result<(), String>) -> String {
    match result {
        Ok(()) => "namespace, bridge and veth pair work".into(),
        Err(e) => e,
    }
}

type Check = Result<(), String>;

/// Runs the netns, iptables and netem checks inside `ns`, which the caller deletes.
fn probe_in_throwaway(ns: &str, iptables_present: bool) -> (Check, Check, Check) {
    let text = |e: NetnsError| e.to_string();
    let netns: Check = (|| {
        run(&["ip", "netns", "add", ns])?;
        ip_in(ns, &["link", "set", "lo", "up"])?;
        ip_in(ns, &["link", "add", "lpdbr0", "type", "bridge"])?;
        ip_in(
            ns,
            &[
                "link", "add", "lpdv0", "type", "veth", "peer", "name", "lpdv1",
            ],
        )?;
        ip_in(ns, &["link", "set", "lpdv0", "master", "lpdbr0"])?;
        Ok(())
    })()
    .map_err(text);
    if let Err(e) = &netns {
        let dep = format!("needs a working namespace: {e}");
        return (netns.clone(), Err(dep.clone()), Err(dep));
    }
    let iptables = if iptables_present {
        exec_in(ns, &["iptables", "-w", XTABLES_WAIT_S, "-S"])
            .map(drop)
            .map_err(text)
    } else {
        Err("iptables not found".into())
    };
    let netem = exec_in(
        ns,
        &[
            "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
        ],
    )
    .map(drop)
    .map_err(text);
    (netns, iptables, netem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_ours_unique_and_short() {
        let a = unique_prefix("Jepsen Test!");
        let b = unique_prefix("Jepsen Test!");
        assert_ne!(a, b);
        assert!(a.starts_with("lp-jepsentest-"), "{a}");
        assert!(is_our_name(&a) && is_our_name(&format!("{a}-hub")), "{a}");
        assert!(is_our_name(&unique_prefix("")));
        assert!(unique_prefix(&"x".repeat(100)).len() < 40);
        assert!(!is_our_name("lp-"));
        assert!(!is_our_name("other-ns"));
        assert!(!is_our_name("lp-../x"));
        assert!(!is_our_name(""));
    }

    #[test]
    fn node_addresses_stay_in_the_private_range() {
        assert_eq!(node_ip(0), Ipv4Addr::new(10, 213, 0, 11));
        assert_eq!(node_ip(NODES_MAX - 1), Ipv4Addr::new(10, 213, 0, 210));
    }

    #[test]
    fn netem_args() {
        let spec = NetemSpec {
            delay_ms: 200,
            jitter_ms: 20,
            loss_pct: 1.5,
            duplicate_pct: 0.0,
            reorder_pct: 25.0,
        };
        assert_eq!(
            spec.tc_args().unwrap(),
            ["netem", "delay", "200ms", "20ms", "loss", "1.5%", "reorder", "25%"]
        );
        let dup = NetemSpec {
            duplicate_pct: 3.0,
            ..NetemSpec::default()
        };
        assert_eq!(dup.tc_args().unwrap(), ["netem", "duplicate", "3%"]);
        let bad = |spec: NetemSpec| spec.tc_args().unwrap_err().to_string();
        assert!(bad(NetemSpec {
            loss_pct: 101.0,
            ..NetemSpec::default()
        })
        .contains("loss 101%"));
        assert!(bad(NetemSpec {
            loss_pct: f64::NAN,
            ..NetemSpec::default()
        })
        .contains("loss"));
        assert!(bad(NetemSpec {
            reorder_pct: 5.0,
            ..NetemSpec::default()
        })
        .contains("reorder needs a delay"));
        assert!(bad(NetemSpec {
            delay_ms: 600_000,
            ..NetemSpec::default()
        })
        .contains("at most"));
    }

    #[test]
    fn state_round_trips_and_rejects_foreign_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("netns.json");
        let state = State {
            version: STATE_VERSION,
            prefix: "lp-x-1-abcdef".into(),
            pid: 1,
            pid_start_ticks: Some(5),
            namespaces: vec!["lp-x-1-abcdef-hub".into()],
        };
        write_state(&path, &state).unwrap();
        assert_eq!(read_state(&path).unwrap(), state);
        let foreign = State {
            prefix: "docker".into(),
            ..state
        };
        write_state(&path, &foreign).unwrap();
        let err = read_state(&path).unwrap_err().to_string();
        assert!(err.contains("not a lockpick prefix"), "{err}");
    }

    #[test]
    fn own_start_ticks_are_readable() {
        assert!(crate::process::start_ticks(std::process::id() as i32).is_some());
    }

    #[test]
    fn command_errors_name_the_command_and_stderr() {
        let err = run(&["sh", "-c", "echo boom >&2; exit 3"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("sh -c echo boom >&2; exit 3"), "{err}");
        assert!(err.contains("boom"), "{err}");
        let missing = run(&["lockpick-no-such-tool"]).unwrap_err().to_string();
        assert!(
            missing.contains("cannot run `lockpick-no-such-tool`"),
            "{missing}"
        );
    }
}
