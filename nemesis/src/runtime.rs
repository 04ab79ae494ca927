//! [`Runtime`]: where a run's nodes live. It gives each node its address, makes its
//! [`NodeControl`], offers the network faults it can make ([`NetworkFaults`]) and removes what
//! it set up. [`RuntimeKind`] is what `--runtime NAME` names: [`crate::RUNTIMES`] lists them
//! (local processes on loopback, `local.rs`; processes in network namespaces, `netns`), and a
//! new runtime (remote hosts over ssh, say) is one file implementing both traits plus its line
//! there.

use crate::netns::NetemSpec;
use crate::node::{BoxFuture, NodeControl};
use crate::{Error, NodeCommand};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a runtime is set up for.
pub struct RuntimeSpec<'a> {
    /// The lock service's nodes.
    pub nodes: usize,
    /// Where the runtime lists what it creates before creating it (`lockpick cleanup` reads
    /// it after a killed run).
    pub state_file: &'a Path,
    /// The hosts of `--runtime ssh` (the config file's `[[nodes]]`); other runtimes ignore it.
    pub hosts: Option<&'a crate::ssh::Hosts>,
    /// The faults the run performs: a runtime refuses up front what it cannot make.
    pub faults: &'a [crate::schedule::FaultKind],
}

/// A runtime shows as its name (a resolved run's configuration holds the kind itself).
impl std::fmt::Debug for dyn RuntimeKind + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A kind of runtime, as `--runtime` names it.
pub trait RuntimeKind: Sync {
    fn name(&self) -> &'static str;
    /// Where it runs the nodes, in a few words for `--runtime`'s help.
    fn about(&self) -> &'static str;
    /// Whether its nodes can be cut off from each other and from the clients (partition and
    /// netem faults): the runtime gives each node a network of its own.
    fn network_faults(&self) -> bool {
        false
    }
    /// Why a `--url` target (a service the harness did not start) cannot run on it, if it
    /// cannot: the words after "so it".
    fn refuses_url(&self) -> Option<&'static str> {
        None
    }
    /// What the config file must list for it (ssh: its hosts), as the refusal when it is
    /// missing; `None` for a runtime that needs nothing there.
    fn needs_hosts(&self) -> Option<&'static str> {
        None
    }
    /// What this machine lacks to run it with `faults`, each "name: why (apt-get install
    /// package)", checked before anything starts; empty when nothing is missing, or when what
    /// it needs is elsewhere and checked as it opens (ssh's hosts).
    fn missing_here(&self, _faults: &[crate::schedule::FaultKind]) -> Vec<String> {
        Vec::new()
    }
    /// Undoes what a killed run of this runtime left, from its state file (`lockpick
    /// cleanup`): `None` when the file is not this runtime's; else what was done, in one line,
    /// or each failure in one line.
    fn cleanup(&self, _state: &Path) -> Option<Result<String, Vec<String>>> {
        None
    }
    /// Sets the runtime up. May block for a while (it may run commands): call it off the
    /// async threads.
    fn open(&self, spec: &RuntimeSpec) -> Result<Box<dyn Runtime>, Error>;
}

/// One node to make: its command is filled in already.
pub struct NodeSpec {
    pub id: String,
    pub command: NodeCommand,
    /// The port the node listens on (as [`Runtime::addresses`] gave it).
    pub port: u16,
    /// Its logs and `data/`.
    pub node_dir: PathBuf,
    /// Extra environment for every start (libfaketime's, for clock faults).
    pub env: Vec<(String, String)>,
    /// The clock control page the node's processes are patched to read (vDSO clock faults).
    pub clock_page: Option<Arc<vclock::ControlPage>>,
    /// How the node shows it serves.
    pub readiness: crate::Readiness,
    /// How it is asked to stop at the end.
    pub shutdown: crate::Shutdown,
}

/// A runtime set up for a run.
pub trait Runtime: Send + Sync {
    /// Where each of `n` nodes listens, as its peers reach it (`host`, `port`). Node `n1` gets
    /// the smallest address as text: a multi-node lockd's primary is the member with the
    /// smallest address, so the primary is the same node in every run and a schedule's
    /// targets mean the same nodes when it is replayed.
    fn addresses(&self, n: usize) -> Result<Vec<(String, u16)>, Error>;
    /// Another port for each of `n` nodes, for services whose members talk to each other:
    /// `set` 0 is the first such port, 1 a second (ZooKeeper's quorum and election ports),
    /// each distinct from the node's other ports.
    fn peer_ports(&self, n: usize, set: u16) -> Result<Vec<u16>, Error>;
    /// Where the harness reaches node `i`'s `port` (a [`Runtime::peer_ports`] port: the
    /// service port is reached through the node's own [`NodeControl`]): the node's address
    /// where the harness routes to it, a loopback proxy where it cannot (netns).
    fn reach(&self, i: usize, port: u16) -> BoxFuture<'_, Result<(String, u16), Error>>;
    /// Node `i`, not started yet.
    fn node(&self, i: usize, spec: NodeSpec) -> BoxFuture<'_, Result<Box<dyn NodeControl>, Error>>;
    /// The network faults this runtime can make, if any.
    fn network(&self) -> Option<Arc<dyn NetworkFaults>>;
    /// Removes what the runtime set up. Call it after every node stopped.
    fn teardown(self: Box<Self>) -> Result<(), Error>;
}

/// Network faults between a runtime's nodes (and between them and the harness's clients).
/// The calls block for a few milliseconds per command.
pub trait NetworkFaults: Send + Sync {
    /// Cuts every pair in `cut` (node positions), both ways, on top of any cut in place.
    fn partition(&self, cut: &[(usize, usize)]) -> Result<(), Error>;
    /// Cuts the harness's clients off `nodes`; the nodes still reach each other.
    fn cut_clients(&self, nodes: &[usize]) -> Result<(), Error>;
    /// Removes every cut.
    fn heal(&self) -> Result<(), Error>;
    /// Delays, drops, duplicates and reorders the packets of `nodes`.
    fn netem(&self, nodes: &[usize], spec: &NetemSpec) -> Result<(), Error>;
    /// Removes netem from `nodes`.
    fn clear_netem(&self, nodes: &[usize]) -> Result<(), Error>;
}

/// The runtime `--runtime NAME` names.
pub fn runtime(name: &str) -> Option<&'static dyn RuntimeKind> {
    crate::RUNTIMES.iter().copied().find(|r| r.name() == name)
}

/// The `runtime` a state file names (the ssh runtime's do; the namespace runtime's, older
/// than the field, do not).
pub fn state_runtime(state: &Path) -> Option<String> {
    let bytes = std::fs::read(state).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("runtime")?.as_str().map(str::to_string)
}

/// The runtime of a run that names none: the first registered, or, for a run whose faults
/// cut the network, the first that can and needs nothing from the config file.
pub fn default_runtime(network: bool) -> &'static dyn RuntimeKind {
    let fits = |r: &&'static dyn RuntimeKind| {
        !network || (r.network_faults() && r.needs_hosts().is_none())
    };
    crate::RUNTIMES
        .iter()
        .copied()
        .find(fits)
        .unwrap_or(crate::RUNTIMES[0])
}

/// The runtimes that make network faults, as `a or b` for messages.
pub fn network_runtime_names() -> String {
    let names: Vec<String> = crate::RUNTIMES
        .iter()
        .filter(|r| r.network_faults())
        .map(|r| format!("--runtime {}", r.name()))
        .collect();
    names.join(" or ")
}
