//! `--runtime netns`: every node a local process in its own network namespace
//! ([`NetnsCluster`]), reached by the harness through a loopback proxy; partitions and netem
//! are its network faults.

use super::{NetemSpec, NetnsCluster};
use crate::node::{BoxFuture, NodeControl};
use crate::runtime::{NetworkFaults, NodeSpec, Runtime, RuntimeKind, RuntimeSpec};
use crate::{Error, LocalNode};
use std::sync::Arc;

/// The port every node listens on inside its own namespace (each has its own port space).
const NETNS_PORT: u16 = 7000;
/// The second port (peer traffic) in every namespace.
const NETNS_PEER_PORT: u16 = NETNS_PORT + 1;

pub struct Netns;

impl RuntimeKind for Netns {
    fn name(&self) -> &'static str {
        "netns"
    }
    fn about(&self) -> &'static str {
        "each node in its own network namespace on a private bridge; needs root; makes partition and netem faults"
    }
    fn network_faults(&self) -> bool {
        true
    }
    fn refuses_url(&self) -> Option<&'static str> {
        Some("cannot be put in a namespace")
    }
    fn cleanup(&self, state: &std::path::Path) -> Option<Result<String, Vec<String>>> {
        // Its state files name no runtime (they are older than the field), or this one.
        if crate::runtime::state_runtime(state).is_some_and(|r| r != self.name()) {
            return None;
        }
        Some(match crate::netns::cleanup_from_state(state) {
            Ok(r) => Ok(format!(
                "removed {} namespace(s){}{}",
                r.removed.len(),
                if r.already_gone.is_empty() {
                    String::new()
                } else {
                    format!(", {} already gone", r.already_gone.len())
                },
                if r.refused.is_empty() {
                    String::new()
                } else {
                    format!(", left alone (not ours): {}", r.refused.join(", "))
                }
            )),
            Err(e) => Err(vec![e.to_string()]),
        })
    }
    fn missing_here(&self, faults: &[crate::schedule::FaultKind]) -> Vec<String> {
        // A feature a fault family names as its tool is needed by that family's faults only;
        // the others (the namespaces themselves) by every run here.
        let used = |name: &str| faults.iter().any(|f| f.tools().contains(&name));
        let some_family_uses = |name: &str| {
            crate::schedule::FaultKind::ALL
                .into_iter()
                .any(|f| f.tools().contains(&name))
        };
        crate::netns::capabilities()
            .into_iter()
            .filter(|c| !c.ok && (!some_family_uses(c.name) || used(c.name)))
            .map(|c| match c.package {
                // A missing kernel feature is not fixed by a package.
                Some(p) if !c.why.contains("kernel") => {
                    format!("{}: {} (apt-get install {p})", c.name, c.why)
                }
                _ => format!("{}: {}", c.name, c.why),
            })
            .collect()
    }
    fn open(&self, spec: &RuntimeSpec) -> Result<Box<dyn Runtime>, Error> {
        let cluster = NetnsCluster::create("run", spec.nodes, spec.state_file)
            .map_err(|e| Error::context("cannot set up the network namespaces", e))?;
        tracing::info!(prefix = cluster.prefix(), "network namespaces up");
        Ok(Box::new(NetnsRuntime {
            cluster: Arc::new(cluster),
        }))
    }
}

pub struct NetnsRuntime {
    cluster: Arc<NetnsCluster>,
}

impl Runtime for NetnsRuntime {
    fn addresses(&self, n: usize) -> Result<Vec<(String, u16)>, Error> {
        // Addresses ascend with the node's position: n1's is the smallest.
        Ok((0..n)
            .map(|i| (self.cluster.node_ip(i).to_string(), NETNS_PORT))
            .collect())
    }
    fn peer_ports(&self, n: usize, set: u16) -> Result<Vec<u16>, Error> {
        Ok(vec![NETNS_PEER_PORT + set; n])
    }
    /// Through a loopback proxy of its own, as the service port: opened from the hub, so a
    /// `clients` cut (packets from the hub dropped) cuts it too.
    fn reach(&self, i: usize, port: u16) -> BoxFuture<'_, Result<(String, u16), Error>> {
        Box::pin(async move {
            let proxy = self.cluster.proxy(i, port).await?;
            Ok((proxy.ip().to_string(), proxy.port()))
        })
    }
    /// The command runs inside node `i`'s namespace; health checks and clients reach it
    /// through its loopback proxy.
    fn node(&self, i: usize, s: NodeSpec) -> BoxFuture<'_, Result<Box<dyn NodeControl>, Error>> {
        Box::pin(async move {
            let proxy = self.cluster.proxy(i, s.port).await?;
            let command = self.cluster.wrap(i, s.command);
            let node = LocalNode::new(&s.id, command, proxy.ip(), proxy.port(), s.node_dir)
                .with_env(s.env)
                .with_clock_page(s.clock_page)
                .with_readiness(s.readiness.clone())
                .with_shutdown(s.shutdown);
            Ok(Box::new(node) as Box<dyn NodeControl>)
        })
    }
    fn network(&self) -> Option<Arc<dyn NetworkFaults>> {
        Some(self.cluster.clone())
    }
    /// Nodes first: a process still running inside a namespace keeps it alive after deletion.
    fn teardown(self: Box<Self>) -> Result<(), Error> {
        match Arc::try_unwrap(self.cluster) {
            Ok(mut c) => c
                .teardown()
                .map_err(|e| Error::context("cannot remove the run's network namespaces", e)),
            Err(_) => Err(Error::msg(
                "the network namespaces are still in use at the end of the run",
            )),
        }
    }
}

impl NetworkFaults for NetnsCluster {
    fn partition(&self, cut: &[(usize, usize)]) -> Result<(), Error> {
        Ok(NetnsCluster::partition(self, cut)?)
    }
    fn cut_clients(&self, nodes: &[usize]) -> Result<(), Error> {
        Ok(NetnsCluster::cut_clients(self, nodes)?)
    }
    fn heal(&self) -> Result<(), Error> {
        Ok(NetnsCluster::heal(self)?)
    }
    fn netem(&self, nodes: &[usize], spec: &NetemSpec) -> Result<(), Error> {
        Ok(NetnsCluster::netem(self, nodes, spec)?)
    }
    fn clear_netem(&self, nodes: &[usize]) -> Result<(), Error> {
        Ok(NetnsCluster::clear_netem(self, nodes)?)
    }
}
