//! Deploy: the store and the lock service's nodes started, each on the runtime `--runtime`
//! names, from the service's own command (its [`workloads::Service`] descriptor) or the
//! user's template, and waited for until healthy; and torn down again at the end.

use crate::config::{RunConfig, Target};
use anyhow::{Context, Result};
use history::layout;
use nemesis::clock::NodeClock;
use nemesis::local::LocalRuntime;
use nemesis::runtime::{NodeSpec, Runtime, RuntimeSpec};
use nemesis::{Node, NodeCommand, NodeControl, Placeholders};
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What a run deployed: reached by clients, hurt by the nemesis, stopped at the end.
#[derive(Default)]
pub struct Deployment {
    /// The fenced store lockpick started (counter workload), if it started one.
    store: Option<Box<dyn NodeControl>>,
    pub store_url: Option<String>,
    /// The lock service's nodes (empty for a `--url` target).
    pub nodes: Vec<Node>,
    pub ids: Vec<String>,
    /// The base URL clients use, one per node (or the `--url`).
    pub urls: Vec<String>,
    /// Each node's `host:port` as its peers know it (none for a `--url` target).
    pub known_as: Vec<String>,
    /// Each node's peer port as the harness reaches it, `tcp://host:port` (none unless the
    /// service has a peer port).
    pub peer_urls: Vec<String>,
    /// Each node's clock, when clock faults are on.
    pub clocks: Vec<Option<NodeClock>>,
    /// Position of the node that holds the lock state: lockd's (the smallest address), the
    /// leader an ensemble elected (`Service::primary_check`), else the first node.
    pub primary: usize,
    /// Where the nodes run (none for a `--url` target).
    runtime: Option<Box<dyn Runtime>>,
    /// For a primary that moves as the service runs (`Service::moving_primary`), what finds
    /// it as each fault starts.
    pub moving_primary: Option<nemesis::Readiness>,
}

/// Starts the store (if lockpick runs it) and the lock service's nodes.
pub async fn deploy(cfg: &RunConfig, run_dir: &Path, startup: Duration) -> Result<Deployment> {
    let exe = std::env::current_exe().context("cannot locate the lockpick binary")?;
    let (store, store_url) = match &cfg.store {
        None => (None, None),
        Some(Target::Url { url }) => (None, Some(url.clone())),
        Some(t) => {
            let node = start_store(cfg, t, &exe, run_dir, startup).await?;
            let url = node.base_url();
            (Some(node), Some(url))
        }
    };
    let mut d = match &cfg.target {
        Target::Url { url } => Deployment {
            urls: vec![url.clone()],
            ..Deployment::default()
        },
        t => start_lock_nodes(cfg, t, &exe, run_dir, startup).await?,
    };
    d.store = store;
    d.store_url = store_url;
    Ok(d)
}

impl Deployment {
    /// The nemesis's network faults, if the runtime has them.
    pub fn network(&self) -> Option<Arc<dyn nemesis::runtime::NetworkFaults>> {
        self.runtime.as_ref().and_then(|r| r.network())
    }

    /// Counts each clock's rate changes from its node's current process.
    pub async fn rebase_clocks(&mut self) -> Result<()> {
        for (clock, node) in self.clocks.iter_mut().zip(&self.nodes) {
            if let (Some(c), Some(at)) = (clock.as_mut(), node.lock().await.started_at()) {
                c.rebase(at)?;
            }
        }
        Ok(())
    }

    /// Stops every node, then removes what the runtime set up.
    pub fn teardown(self) -> Result<()> {
        let Deployment {
            store,
            nodes,
            runtime,
            ..
        } = self;
        drop(nodes);
        drop(store);
        // Nodes first: a process still running inside a namespace keeps it alive after deletion.
        if let Some(r) = runtime {
            tokio::task::block_in_place(|| r.teardown())?;
        }
        Ok(())
    }
}

/// `lockpick store` (or `--store-cmd`), always a local process on loopback.
async fn start_store(
    cfg: &RunConfig,
    target: &Target,
    exe: &Path,
    run_dir: &Path,
    startup: Duration,
) -> Result<Box<dyn NodeControl>> {
    let argv = vec![
        exe.display().to_string(),
        "store".into(),
        "--listen".into(),
        "{host}:{port}".into(),
        "--fence".into(),
        cfg.store_fence.name().to_string(),
    ];
    let local = LocalRuntime;
    let (host, port) = nemesis::runtime::Runtime::addresses(&local, 1)?.remove(0);
    let ph = placeholders("store", run_dir, (host, port), String::new(), Vec::new());
    let spec = node_spec(
        target,
        &argv,
        ph,
        run_dir,
        nemesis::Readiness::http(nemesis::HEALTH_PATH),
    )?;
    let node = local.node(0, spec).await?;
    Ok(start_all(vec![node], startup).await?.remove(0))
}

/// Every node's addresses, picked before any node starts so each is started knowing all its
/// peers.
struct Addresses {
    hosts: Vec<String>,
    ports: Vec<u16>,
    /// Each node's `host:port`.
    addrs: Vec<String>,
    /// The first and second peer port sets (zeros when the service has none).
    peer_ports: Vec<u16>,
    peer_ports_2: Vec<u16>,
    /// `id=http://host:peer_port`, etcd's `--initial-cluster` entries.
    initial_cluster: Vec<String>,
    /// `host:peer_port:peer_port_2`, one per node.
    peer_list: Vec<String>,
}

impl Addresses {
    fn pick(
        runtime: &dyn Runtime,
        service: &dyn workloads::Service,
        ids: &[String],
    ) -> Result<Self> {
        let n = ids.len();
        let (hosts, ports): (Vec<String>, Vec<u16>) = runtime.addresses(n)?.into_iter().unzip();
        // Every node is indexed in these lists below.
        assert_eq!(
            hosts.len(),
            n,
            "the runtime gave {} addresses for {n} nodes",
            hosts.len()
        );
        let addrs: Vec<String> = (0..n)
            .map(|i| format!("{}:{}", hosts[i], ports[i]))
            .collect();
        let peer_ports = if service.peer_port() || service.second_peer_port() {
            runtime.peer_ports(n, 0)?
        } else {
            vec![0; n]
        };
        let peer_ports_2 = if service.second_peer_port() {
            runtime.peer_ports(n, 1)?
        } else {
            vec![0; n]
        };
        assert!(
            peer_ports.len() == n && peer_ports_2.len() == n,
            "the runtime gave peer ports for other than {n} nodes"
        );
        let initial_cluster: Vec<String> = (0..n)
            .map(|i| format!("{}=http://{}:{}", ids[i], hosts[i], peer_ports[i]))
            .collect();
        let peer_list: Vec<String> = (0..n)
            .map(|i| format!("{}:{}:{}", hosts[i], peer_ports[i], peer_ports_2[i]))
            .collect();
        Ok(Addresses {
            hosts,
            ports,
            addrs,
            peer_ports,
            peer_ports_2,
            initial_cluster,
            peer_list,
        })
    }

    /// The placeholders node `i`'s command may use besides its own address.
    fn extra(&self, i: usize) -> Vec<(String, String)> {
        vec![
            ("peer_port".to_string(), self.peer_ports[i].to_string()),
            ("peer_port_2".to_string(), self.peer_ports_2[i].to_string()),
            (
                "initial_cluster".to_string(),
                self.initial_cluster.join(","),
            ),
            ("peer_list".to_string(), self.peer_list.join(",")),
        ]
    }

    /// Every other node's `host:port`, comma-separated.
    fn peers_of(&self, i: usize) -> String {
        let peers: Vec<&str> = (0..self.addrs.len())
            .filter(|&j| j != i)
            .map(|j| self.addrs[j].as_str())
            .collect();
        peers.join(",")
    }
}

/// Starts `cfg.nodes` lock-service nodes. Every address is picked first, so each node is
/// started knowing all its peers.
async fn start_lock_nodes(
    cfg: &RunConfig,
    target: &Target,
    exe: &Path,
    run_dir: &Path,
    startup: Duration,
) -> Result<Deployment> {
    let n = cfg.nodes;
    let ids: Vec<String> = (1..=n).map(|i| format!("n{i}")).collect();
    let kind = cfg.runtime;
    let state_file = run_dir.join(layout::STATE_FILE);
    let spec = RuntimeSpec {
        nodes: n,
        state_file: &state_file,
        hosts: cfg.hosts.as_ref(),
        faults: &cfg.faults,
    };
    let runtime = tokio::task::block_in_place(|| kind.open(&spec))?;
    let service = cfg.service;
    let at = Addresses::pick(&*runtime, service, &ids)?;
    let primary = lockd::primary_of(at.addrs.iter().map(String::as_str))
        .and_then(|p| at.addrs.iter().position(|a| a == p))
        .unwrap_or(0);
    // The embedded lockd's modes, as its command line takes them.
    let unsafe_mode = cfg.unsafe_mode.map(|m| m.to_string());
    let lock_order = cfg.lock_order.map(|o| o.to_string());
    let launch = workloads::Launch {
        exe,
        nodes: n,
        unsafe_mode: unsafe_mode.as_deref(),
        lock_order: lock_order.as_deref(),
        options: &cfg.adapter_own,
    };
    let argv = service.launch(&launch).unwrap_or_default();
    let moving_primary = service.moving_primary(&launch).filter(|_| n > 1);
    let mut clocks = Vec::with_capacity(n);
    let mut unstarted = Vec::with_capacity(n);
    let recipe = Recipe {
        cfg,
        target,
        argv: &argv,
        run_dir,
        at: &at,
    };
    for (i, id) in ids.iter().enumerate() {
        let (node, clock) = recipe.node(&*runtime, i, id).await?;
        unstarted.push(node);
        clocks.push(clock);
    }
    let mut peer_urls = Vec::new();
    if service.peer_port() {
        for (i, &port) in at.peer_ports.iter().enumerate() {
            let (host, port) = runtime.reach(i, port).await?;
            peer_urls.push(format!("tcp://{}", host_port_text(&host, port)));
        }
    }
    let mut out = Deployment {
        ids,
        primary,
        moving_primary,
        clocks,
        known_as: at.addrs.clone(),
        peer_urls,
        ..Deployment::default()
    };
    for node in start_all(unstarted, startup).await? {
        out.urls.push(node.base_url());
        out.nodes.push(Arc::new(tokio::sync::Mutex::new(node)));
    }
    out.runtime = Some(runtime);
    settle(out, service, &at.addrs, startup).await
}

/// What every lock-service node is made from.
struct Recipe<'a> {
    cfg: &'a RunConfig,
    target: &'a Target,
    /// The service's command (empty for a user's template).
    argv: &'a [String],
    run_dir: &'a Path,
    at: &'a Addresses,
}

impl Recipe<'_> {
    /// Node `i` (`id`) made on the runtime, not started yet, and its clock when clock faults
    /// are on.
    async fn node(
        &self,
        runtime: &dyn Runtime,
        i: usize,
        id: &str,
    ) -> Result<(Box<dyn NodeControl>, Option<NodeClock>)> {
        let Recipe {
            cfg,
            target,
            argv,
            run_dir,
            at,
        } = *self;
        let node_dir = layout::node_dir(run_dir, id);
        // The clock's control page (or libfaketime's file) exists before the node starts: the
        // node's processes are patched to read it as they start (or libfaketime reads it from
        // the first clock call on).
        let (clock, hookup) = if cfg.faults.iter().any(|f| f.moves_clocks()) {
            let (c, hookup) =
                nemesis::clock::prepare_node(&node_dir, &cfg.clock_backend()?, cfg.clock_scope)?;
            (Some(c), Some(hookup))
        } else {
            (None, None)
        };
        let address = (at.hosts[i].clone(), at.ports[i]);
        let ph = placeholders(id, run_dir, address, at.peers_of(i), at.extra(i));
        let mut spec = node_spec(target, argv, ph, run_dir, cfg.service.readiness())?;
        spec.shutdown = cfg.service.shutdown();
        if let Some(h) = hookup {
            spec.env = h.env;
            spec.clock_page = h.page;
        }
        let node = runtime.node(i, spec).await?;
        // A node on another host has its clock set there, by the runtime's agent.
        let clock = match (clock, node.remote_clock()) {
            (Some(_), Some(remote)) => Some(NodeClock::remote(remote, cfg.clock_scope)),
            (clock, _) => clock,
        };
        Ok((node, clock))
    }
}

/// Waits for the started nodes to settle and, for a service that elects one, finds the
/// primary; on failure the nodes stop and what the runtime set up goes.
async fn settle(
    mut out: Deployment,
    service: &dyn workloads::Service,
    addrs: &[String],
    startup: Duration,
) -> Result<Deployment> {
    let n = out.ids.len();
    let settled = match service.settled(addrs) {
        Some(settled) => wait_settled(&settled, &out.ids, &out.peer_urls, startup).await,
        None => Ok(()),
    };
    let led = match (settled, service.primary_check()) {
        (Ok(()), Some(check)) if n > 1 => find_primary(&check, &out.ids, &out.urls, startup)
            .await
            .map(|p| out.primary = p),
        (settled, _) => settled,
    };
    if let Err(e) = led {
        // The nodes stop, then what the runtime set up goes; the settle error is the one
        // worth reporting.
        if let Err(t) = out.teardown() {
            tracing::warn!(error = %t, "teardown after a failed settle");
        }
        return Err(e);
    }
    Ok(out)
}

/// The position of the node on which `check` holds (the one that leads), asked of every node
/// in turn every 100 ms until one answers so, within `startup` and [`SETTLE_EXTRA`] (an
/// ensemble's first election takes a few seconds past its members' start).
async fn find_primary(
    check: &nemesis::Readiness,
    ids: &[String],
    urls: &[String],
    startup: Duration,
) -> Result<usize> {
    let began = std::time::Instant::now();
    let bound = startup + SETTLE_EXTRA;
    let deadline = tokio::time::Instant::now() + bound;
    let mut last = String::new();
    // Bounded by the deadline: each pass asks every node once, then sleeps.
    loop {
        for (i, url) in urls.iter().enumerate() {
            let (host, port) =
                workloads::host_port(url).with_context(|| format!("{url}: no host and port"))?;
            match check.check(&host, port, Duration::from_secs(1)).await {
                Ok(()) => {
                    tracing::info!(
                        "primary: {} ({} held there after {} ms)",
                        ids[i],
                        check.name(),
                        began.elapsed().as_millis()
                    );
                    return Ok(i);
                }
                Err(why) => last = format!("{}: {}: {why}", ids[i], check.target(&host, port)),
            }
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "no node showed it leads within {} ms (--startup-timeout and 10 s): {last}",
                bound.as_millis()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `host:port`, an IPv6 host in brackets.
fn host_port_text(host: &str, port: u16) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

/// Beyond `--startup-timeout`, how long the nodes may take to settle once they all serve:
/// Sentinel's INFO period, the longest a sentinel takes to learn anew what an instance is.
const SETTLE_EXTRA: Duration = Duration::from_secs(10);

/// Checks `settled` on every node's peer port until it holds on all of them, each node
/// checked again every 100 ms while it does not; an error past `startup` and
/// [`SETTLE_EXTRA`], naming a node that never showed it and why.
async fn wait_settled(
    settled: &nemesis::Readiness,
    ids: &[String],
    peer_urls: &[String],
    startup: Duration,
) -> Result<()> {
    let began = std::time::Instant::now();
    let bound = startup + SETTLE_EXTRA;
    let deadline = tokio::time::Instant::now() + bound;
    let mut pending: Vec<usize> = (0..peer_urls.len()).collect();
    let mut last = String::new();
    // Bounded by the deadline: each pass checks the nodes still pending, then sleeps.
    while !pending.is_empty() {
        let mut still = Vec::new();
        for &i in &pending {
            let (host, port) = workloads::host_port(&peer_urls[i])
                .with_context(|| format!("{}: no host and port", peer_urls[i]))?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let each = left
                .min(Duration::from_secs(1))
                .max(Duration::from_millis(10));
            if let Err(why) = settled.check(&host, port, each).await {
                last = format!("{}: {}: {why}", ids[i], settled.target(&host, port));
                still.push(i);
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "the nodes did not settle within {} ms (--startup-timeout and 10 s): {last}",
                bound.as_millis()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waited_on = match last.is_empty() {
        true => String::new(),
        false => format!(" (the last wait: {last})"),
    };
    tracing::info!(
        "nodes settled: {} held on the peer port of all {} nodes after {} ms{waited_on}",
        settled.name(),
        peer_urls.len(),
        began.elapsed().as_millis()
    );
    Ok(())
}

fn placeholders(
    id: &str,
    run_dir: &Path,
    (host, port): (String, u16),
    peers: String,
    extra: Vec<(String, String)>,
) -> Placeholders {
    Placeholders {
        id: id.to_string(),
        host,
        port,
        // Absolute: a node command may change directory before it opens its data dir.
        data_dir: std::path::absolute(layout::node_dir(run_dir, id).join("data"))
            .unwrap_or_else(|_| layout::node_dir(run_dir, id).join("data")),
        peers,
        extra,
    }
}

/// The node's command, filled in: the service's own (`argv`) or the user's template.
fn node_spec(
    target: &Target,
    argv: &[String],
    ph: Placeholders,
    run_dir: &Path,
    readiness: nemesis::Readiness,
) -> Result<NodeSpec> {
    let node_dir = layout::node_dir(run_dir, &ph.id);
    fs::create_dir_all(node_dir.join("data"))
        .with_context(|| format!("cannot create {}", node_dir.display()))?;
    let command = match target {
        Target::Embedded => NodeCommand::Argv(
            argv.iter()
                .map(|a| nemesis::substitute(a, &ph).map_err(anyhow::Error::from))
                .collect::<Result<_>>()?,
        ),
        Target::Command { template } => NodeCommand::Shell(nemesis::substitute(template, &ph)?),
        Target::Url { .. } => unreachable!("a URL target has no node to start"),
    };
    Ok(NodeSpec {
        id: ph.id,
        command,
        port: ph.port,
        node_dir,
        env: Vec::new(),
        clock_page: None,
        readiness,
        shutdown: nemesis::Shutdown::TERM,
    })
}

/// Starts nodes all at once and waits for each to be healthy. Together, because a member of a
/// replicated service (etcd) is not healthy until a quorum of its peers runs.
async fn start_all(
    nodes: Vec<Box<dyn NodeControl>>,
    startup: Duration,
) -> Result<Vec<Box<dyn NodeControl>>> {
    let mut set = tokio::task::JoinSet::new();
    let n = nodes.len();
    for (i, mut node) in nodes.into_iter().enumerate() {
        set.spawn(async move {
            let r = node.start(startup).await;
            (i, node, r)
        });
    }
    let mut started: Vec<Option<Box<dyn NodeControl>>> = (0..n).map(|_| None).collect();
    let mut first_err = None;
    while let Some(joined) = set.join_next().await {
        let (i, node, r) = joined.context("a node start task failed")?;
        match r {
            Ok(()) => {
                tracing::info!(
                    node = node.id(),
                    checked = %node.readiness_check(),
                    pid = ?node.pid(),
                    "node up"
                );
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
        started[i] = Some(node);
    }
    if let Some(e) = first_err {
        // Every node is dropped (and so stopped) on the way out.
        return Err(e.into());
    }
    Ok(started
        .into_iter()
        .map(|n| n.expect("every task returned its node"))
        .collect())
}
