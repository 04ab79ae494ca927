//! The runner: sets up the nodes, runs clients and nemesis together, heals, makes the final
//! reads, then checks the recorded history and writes the run directory.

use crate::config::{RunConfig, Target};
use crate::status::{ActiveFaults, Status};
use anyhow::{anyhow, bail, Context, Result};
use history::layout;
use history::{HistoryWriter, OpValue, Recorder, Results};
use nemesis::clock::NodeClock;
use nemesis::netns::NetnsCluster;
use nemesis::schedule::{
    plan, ClockFault, ClockMode, FaultKind, PlannedFault, ScheduleConfig, SCHEDULE_FILE,
};
use nemesis::{LocalNode, NodeCommand, Placeholders};
use serde_json::json;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use workloads::{Budget, PauseBoard, Stall, WorkloadConfig};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Restart attempts after a kill before the run gives up on the node.
const RESTART_ATTEMPTS: u32 = 3;

/// What a finished run hands back to `main`.
pub struct Outcome {
    pub run_dir: PathBuf,
    pub results: Results,
    /// A harness-side failure (e.g. a node that would not restart): the verdict was still
    /// computed from what was recorded, but the exit code is 3.
    pub error: Option<String>,
}

pub async fn run(cfg: RunConfig) -> Result<Outcome> {
    let run_dir = create_run_dir(&cfg.out, &cfg.name)?;
    crate::logging::to_file(&run_dir.join(layout::LOG_FILE))?;
    tracing::info!(dir = %run_dir.display(), seed = cfg.seed, "run starting");
    fs::write(run_dir.join(layout::CONFIG_FILE), cfg.file_text()?).with_context(|| {
        format!(
            "cannot write {}",
            run_dir.join(layout::CONFIG_FILE).display()
        )
    })?;

    let startup = Duration::from_millis(cfg.startup_timeout_ms);
    let exe = std::env::current_exe().context("cannot locate the lockpick binary")?;
    let op_timeout = Duration::from_millis(cfg.op_timeout_ms);
    let mut store_node = None;
    let store_url = match &cfg.store {
        None => None,
        Some(Target::Url { url }) => Some(url.clone()),
        Some(t) => {
            let argv = vec![
                exe.display().to_string(),
                "store".into(),
                "--listen".into(),
                "{host}:{port}".into(),
                "--fence".into(),
                cfg.store_fence.clone(),
            ];
            let port = nemesis::free_port(LOOPBACK)?;
            let node = start_node(
                "store",
                t,
                argv,
                &run_dir,
                startup,
                (&LOOPBACK.to_string(), port),
                String::new(),
                Vec::new(),
                Vec::new(),
                Placement::Loopback,
                nemesis::HEALTH_PATH,
                true,
            )
            .await?;
            let url = node.base_url();
            store_node = Some(node);
            Some(url)
        }
    };
    let lock = match &cfg.target {
        Target::Url { url } => LockNodes {
            urls: vec![url.clone()],
            ..LockNodes::default()
        },
        t => start_lock_nodes(&cfg, t, &exe, &run_dir, startup).await?,
    };
    // The history's clock starts here: the etcd adapter stamps lease evidence on it.
    let start = Instant::now();
    let service = cfg.service();
    let options = cfg.adapter_options();
    let clients = lock
        .urls
        .iter()
        .map(|url| {
            service.connect(&workloads::Connect {
                url,
                store_url: store_url.as_deref(),
                op_timeout,
                clients: cfg.clients,
                clock: Arc::new(move || start.elapsed().as_nanos() as u64),
                options: &options,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let client = clients[0].clone();
    let history_path = run_dir.join(layout::HISTORY_FILE);
    let writer = HistoryWriter::create(&history_path)
        .with_context(|| format!("cannot create {}", history_path.display()))?;
    let recorder = Arc::new(Recorder::new(writer, start));
    let wcfg = Arc::new(WorkloadConfig {
        kind: cfg.kind(),
        clients: cfg.clients,
        locks: cfg.locks,
        ttl_ms: cfg.ttl_ms,
        renew_ttl_ms: cfg.renew_ttl_ms,
        hold_min_ms: cfg.hold_min_ms,
        hold_max_ms: cfg.hold_max_ms,
        ops_max: cfg.ops_max,
        seed: cfg.seed,
        backoff_max_ms: 20,
    });
    let pauses = Arc::new(PauseBoard::new());
    let budget = Arc::new(Budget::new(cfg.ops_max));
    let (stop_tx, stop_rx) = watch::channel(false);
    let active: ActiveFaults = Arc::default();

    let LockNodes {
        nodes: lock_nodes,
        ids,
        mut clocks,
        primary,
        netns,
        ..
    } = lock;
    let schedule = match &cfg.schedule {
        Some(s) => {
            if s.primary != primary && lock_nodes.len() > 1 {
                tracing::warn!(
                    planned = s.primary,
                    now = primary,
                    "the schedule was drawn with another primary; its targets are replayed as they are"
                );
            }
            s.clone()
        }
        None => plan(&ScheduleConfig {
            seed: cfg.seed,
            faults: cfg.faults.clone(),
            interval_ms: cfg.nemesis_interval_ms,
            duration_ms: cfg.duration_ms,
            // Stalls and pauses are sized to outlast the longest lease a client may hold.
            ttl_ms: cfg.lease_max_ms(),
            clock_modes: cfg.clock_modes.clone(),
            topologies: cfg.topologies.clone(),
            nodes: lock_nodes.len(),
            primary,
            targets: cfg
                .nemesis_targets
                .parse()
                .map_err(|e: String| anyhow!("--nemesis-targets: {e}"))?,
            clock_bump_ms: cfg.clock_bump_ms,
            clock_rate: cfg.clock_rate,
        }),
    };
    // The plan is on disk before its first fault: a run killed mid-way can still be replayed.
    let schedule_path = run_dir.join(SCHEDULE_FILE);
    fs::write(&schedule_path, schedule.to_json())
        .with_context(|| format!("cannot write {}", schedule_path.display()))?;
    tracing::info!(
        faults = schedule.faults.len(),
        replayed = cfg.schedule.is_some(),
        "fault schedule written"
    );
    for (clock, node) in clocks.iter_mut().zip(&lock_nodes) {
        if let (Some(c), Some(at)) = (clock.as_mut(), node.lock().await.spawned_at()) {
            c.rebase(at)?;
        }
    }
    let workers = tokio::spawn(workloads::run_workers(
        wcfg.clone(),
        clients.clone(),
        recorder.clone(),
        pauses.clone(),
        budget.clone(),
        stop_rx.clone(),
    ));
    // A stall ignores the stop signal (a paused program does not know the test is ending).
    let stall_max_ms = schedule
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::ClientPause)
        .map(|f| f.length_ms)
        .max()
        .unwrap_or(0);
    let nemesis_task = tokio::spawn(run_nemesis(Nemesis {
        schedule: schedule.faults,
        nodes: lock_nodes.clone(),
        ids,
        netns: netns.clone(),
        pauses: pauses.clone(),
        recorder: recorder.clone(),
        stop: stop_rx.clone(),
        start,
        startup,
        active: active.clone(),
        clocks,
    }));
    let status = Status::start(
        recorder.clone(),
        history_path.clone(),
        active.clone(),
        Duration::from_millis(cfg.duration_ms),
        cfg.check_config(),
    );

    let why = wait_for_end(&cfg, &budget, start).await;
    tracing::info!(why, "stopping clients");
    status.set_phase("stopping clients and healing");
    let _ = stop_tx.send(true);

    // Every op is bounded by the op timeout, a stall by the schedule: this bound only catches
    // harness bugs.
    let drain = Duration::from_millis(
        cfg.op_timeout_ms * 4 + (cfg.lease_max_ms() * 3).max(stall_max_ms) + 5_000,
    );
    let workers_done = match tokio::time::timeout(drain, workers).await {
        Ok(Ok(Ok(done))) => Some(done),
        Ok(Ok(Err(e))) => return Err(e.into()),
        Ok(Err(e)) => bail!("client workers crashed: {e}"),
        Err(_) => bail!("client workers did not stop within {drain:?}"),
    };
    let mut error =
        match tokio::time::timeout(drain + startup * RESTART_ATTEMPTS, nemesis_task).await {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) => Some(format!("{e:#}")),
            Ok(Err(e)) => Some(format!("nemesis crashed: {e}")),
            Err(_) => Some("nemesis did not heal in time".to_string()),
        };
    pauses.cancel();
    for node in &lock_nodes {
        // The final heal: whatever the nemesis left, the service runs again before final reads.
        let n = node.lock().await;
        if n.is_paused() {
            n.resume()?;
        }
    }

    if wcfg.kind == workloads::WorkloadKind::Counter && error.is_none() {
        status.set_phase("quiet period, then final reads");
        // Clients rest so every lease lapses and the service settles before the closing read.
        tokio::time::sleep(Duration::from_millis(cfg.lease_max_ms().clamp(200, 2_000))).await;
        let first = workers_done.map(|d| d.max_process + 1).unwrap_or(0);
        workloads::final_reads(&wcfg, &client, &recorder, first).await?;
    }
    let events = recorder.events();
    status.finish();
    drop(lock_nodes);
    drop(store_node);
    // Nodes first: a process still running inside a namespace keeps it alive after deletion.
    if let Some(cluster) = netns {
        match Arc::try_unwrap(cluster) {
            Ok(mut c) => tokio::task::block_in_place(|| c.teardown())
                .context("cannot remove the run's network namespaces")?,
            Err(_) => bail!("the network namespaces are still in use at the end of the run"),
        }
    }
    tracing::info!(events, "clients done; checking");

    let results = crate::check_cmd::check_file(&history_path, &cfg.check_config())?;
    crate::report_cmd::write_results(&run_dir, &results)?;
    if error.is_none() && events == 0 {
        error = Some("no event was recorded".into());
    }
    Ok(Outcome {
        run_dir,
        results,
        error,
    })
}

async fn wait_for_end(cfg: &RunConfig, budget: &Budget, start: Instant) -> &'static str {
    let end = start + Duration::from_millis(cfg.duration_ms);
    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let term = async {
        match sigterm.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    let budget_spent = async {
        // Polled: the budget is an atomic shared with the workers; 20 ms is far below any run.
        while !budget.exhausted() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = tokio::time::sleep_until(end.into()) => "duration reached",
        _ = budget_spent => "ops budget spent",
        _ = tokio::signal::ctrl_c() => {
            spawn_second_signal_exit();
            "interrupted (Ctrl-C): healing and checking what was recorded"
        }
        _ = term => {
            spawn_second_signal_exit();
            "terminated (SIGTERM): healing and checking what was recorded"
        }
    }
}

/// A second Ctrl-C means "now": exit at once. The nodes die with us (they were started with
/// PDEATHSIG), and the history is already on disk line by line.
fn spawn_second_signal_exit() {
    eprintln!("lockpick: stopping; press Ctrl-C again to abort at once");
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "lockpick: aborted; the history recorded so far is kept. If the run used \
                 network namespaces, `lockpick cleanup` removes what is left."
            );
            std::process::exit(history::ExitCode::Error.code() as i32);
        }
    });
}

/// The port every node listens on inside its own namespace.
const NETNS_PORT: u16 = 7000;

/// Where a node runs.
enum Placement {
    Loopback,
    Netns {
        cluster: Arc<NetnsCluster>,
        index: usize,
        /// The loopback address that reaches the node.
        proxy: SocketAddr,
    },
}

/// The lock service's nodes as the runner drives them.
#[derive(Default)]
struct LockNodes {
    /// Empty for a `--url` target.
    nodes: Vec<Arc<tokio::sync::Mutex<LocalNode>>>,
    ids: Vec<String>,
    /// Base URL clients use, one per node (or the `--url`).
    urls: Vec<String>,
    /// Each node's clock, when clock faults are on.
    clocks: Vec<Option<NodeClock>>,
    /// Position of the node that holds the lock state (the smallest address).
    primary: usize,
    /// The namespaces, links and rules of a `--runtime netns` run.
    netns: Option<Arc<NetnsCluster>>,
}

/// Starts `cfg.nodes` lock-service nodes on loopback. Every port is picked first, so each node
/// is started knowing all its peers.
async fn start_lock_nodes(
    cfg: &RunConfig,
    target: &Target,
    exe: &Path,
    run_dir: &Path,
    startup: Duration,
) -> Result<LockNodes> {
    let n = cfg.nodes;
    let ids: Vec<String> = (1..=n).map(|i| format!("n{i}")).collect();
    let netns = if cfg.runtime == "netns" {
        let state = run_dir.join(layout::STATE_FILE);
        let cluster = tokio::task::block_in_place(|| NetnsCluster::create("run", n, &state))
            .context("cannot set up the network namespaces")?;
        tracing::info!(prefix = cluster.prefix(), "network namespaces up");
        Some(Arc::new(cluster))
    } else {
        None
    };
    // In namespaces every node has its own port space: one well-known port serves all.
    let (hosts, mut ports): (Vec<String>, Vec<u16>) = match &netns {
        Some(c) => (0..n)
            .map(|i| (c.node_ip(i).to_string(), NETNS_PORT))
            .unzip(),
        None => (0..n)
            .map(|_| Ok((LOOPBACK.to_string(), nemesis::free_port(LOOPBACK)?)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip(),
    };
    // Node n1 gets the smallest address (lockd's primary is the member with the smallest
    // `host:port` as text), so the primary is the same node in every run and a schedule's
    // targets mean the same nodes when it is replayed.
    ports.sort_by_key(|p| p.to_string());
    let addrs: Vec<String> = (0..n)
        .map(|i| format!("{}:{}", hosts[i], ports[i]))
        .collect();
    let service = cfg.service();
    // Members of some services (etcd) also talk to each other on a peer port.
    let peer_ports: Vec<u16> = match (&netns, service.peer_port()) {
        (_, false) => vec![0; n],
        (Some(_), true) => vec![NETNS_PORT + 1; n],
        (None, true) => (0..n)
            .map(|_| nemesis::free_port(LOOPBACK).map_err(anyhow::Error::from))
            .collect::<Result<_>>()?,
    };
    let initial_cluster: Vec<String> = (0..n)
        .map(|i| format!("{}=http://{}:{}", ids[i], hosts[i], peer_ports[i]))
        .collect();
    let primary = lockd::primary_of(addrs.iter().map(String::as_str))
        .and_then(|p| addrs.iter().position(|a| a == p))
        .unwrap_or(0);
    let mut out = LockNodes {
        ids: ids.clone(),
        primary,
        netns: netns.clone(),
        ..LockNodes::default()
    };
    let mut unstarted = Vec::with_capacity(n);
    for i in 0..n {
        let argv = service
            .launch(&workloads::Launch {
                exe,
                nodes: n,
                unsafe_mode: cfg.unsafe_mode.as_deref(),
            })
            .unwrap_or_default();
        let extra = vec![
            ("peer_port".to_string(), peer_ports[i].to_string()),
            ("initial_cluster".to_string(), initial_cluster.join(",")),
        ];
        let peers: Vec<&str> = (0..n)
            .filter(|&j| j != i)
            .map(|j| addrs[j].as_str())
            .collect();
        // The clock control file exists before the node starts: libfaketime reads it from the
        // first clock call on.
        let (clock, env) = if cfg.faults.contains(&FaultKind::Clock) {
            let control = layout::node_dir(run_dir, &ids[i]).join("faketime.ctl");
            fs::create_dir_all(control.parent().expect("a node dir"))?;
            let clock = NodeClock::create(control.clone(), Instant::now())?;
            let env =
                nemesis::clock::faketime_env(&cfg.libfaketime()?, &control, cfg.clock_scope());
            (Some(clock), env)
        } else {
            (None, Vec::new())
        };
        let placement = match &netns {
            Some(c) => {
                let proxy = c.proxy(i, ports[i]).await?;
                Placement::Netns {
                    cluster: c.clone(),
                    index: i,
                    proxy,
                }
            }
            None => Placement::Loopback,
        };
        let node = start_node(
            &ids[i],
            target,
            argv,
            run_dir,
            startup,
            (&hosts[i], ports[i]),
            peers.join(","),
            extra,
            env,
            placement,
            service.health_path(),
            false,
        )
        .await?;
        unstarted.push(node);
        out.clocks.push(clock);
    }
    for node in start_all(unstarted, startup).await? {
        out.urls.push(node.base_url());
        out.nodes.push(Arc::new(tokio::sync::Mutex::new(node)));
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn start_node(
    id: &str,
    target: &Target,
    embedded_argv: Vec<String>,
    run_dir: &Path,
    startup: Duration,
    (host, port): (&str, u16),
    peers: String,
    extra: Vec<(String, String)>,
    env: Vec<(String, String)>,
    placement: Placement,
    health_path: &str,
    start_now: bool,
) -> Result<LocalNode> {
    let node_dir = layout::node_dir(run_dir, id);
    fs::create_dir_all(node_dir.join("data"))
        .with_context(|| format!("cannot create {}", node_dir.display()))?;
    let ph = Placeholders {
        id: id.to_string(),
        host: host.to_string(),
        port,
        data_dir: node_dir.join("data"),
        peers,
        extra,
    };
    let command = match target {
        Target::Embedded => NodeCommand::Argv(
            embedded_argv
                .iter()
                .map(|a| nemesis::substitute(a, &ph).map_err(anyhow::Error::from))
                .collect::<Result<_>>()?,
        ),
        Target::Command { template } => NodeCommand::Shell(nemesis::substitute(template, &ph)?),
        Target::Url { .. } => unreachable!("a URL target has no node to start"),
    };
    // A node in a namespace is reached (health checks, clients) through its loopback proxy.
    let (command, reach) = match placement {
        Placement::Loopback => (command, SocketAddr::new(LOOPBACK, port)),
        Placement::Netns {
            cluster,
            index,
            proxy,
        } => (cluster.wrap(index, command), proxy),
    };
    let node = LocalNode::new(id, command, reach.ip(), reach.port(), node_dir)
        .with_env(env)
        .with_health_path(health_path);
    if start_now {
        return start_all(vec![node], startup)
            .await
            .map(|mut v| v.remove(0));
    }
    Ok(node)
}

/// Starts nodes all at once and waits for each to be healthy. Together, because a member of a
/// replicated service (etcd) is not healthy until a quorum of its peers runs.
async fn start_all(nodes: Vec<LocalNode>, startup: Duration) -> Result<Vec<LocalNode>> {
    let mut set = tokio::task::JoinSet::new();
    let n = nodes.len();
    for (i, mut node) in nodes.into_iter().enumerate() {
        set.spawn(async move {
            let r = node.start(startup).await;
            (i, node, r)
        });
    }
    let mut started: Vec<Option<LocalNode>> = (0..n).map(|_| None).collect();
    let mut first_err = None;
    while let Some(joined) = set.join_next().await {
        let (i, node, r) = joined.context("a node start task failed")?;
        match r {
            Ok(()) => {
                tracing::info!(node = node.id(), url = %node.base_url(), pid = ?node.pid(), "node up");
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

struct Nemesis<W: std::io::Write + Send> {
    /// The plan, interpreted as it is: nothing about a fault is drawn here.
    schedule: Vec<PlannedFault>,
    netns: Option<Arc<NetnsCluster>>,
    /// The lock service's nodes (empty for a `--url` target).
    nodes: Vec<Arc<tokio::sync::Mutex<LocalNode>>>,
    ids: Vec<String>,
    pauses: Arc<PauseBoard>,
    recorder: Arc<Recorder<W>>,
    stop: watch::Receiver<bool>,
    start: Instant,
    startup: Duration,
    active: ActiveFaults,
    /// Each node's clock, when clock faults are on.
    clocks: Vec<Option<NodeClock>>,
}

/// Sleeps until `until` or the stop signal; true if stopped.
async fn sleep_or_stop(until: Instant, stop: &mut watch::Receiver<bool>) -> bool {
    let stopped = tokio::select! {
        _ = tokio::time::sleep_until(until.into()) => false,
        _ = stop.wait_for(|s| *s) => true,
    };
    stopped || *stop.borrow()
}

fn set_active(active: &ActiveFaults, what: Option<String>) {
    let mut a = active.lock().unwrap_or_else(|p| p.into_inner());
    a.clear();
    a.extend(what);
}

async fn run_nemesis<W: std::io::Write + Send>(mut n: Nemesis<W>) -> Result<()> {
    for fault in std::mem::take(&mut n.schedule) {
        let at = n.start + Duration::from_millis(fault.at_ms);
        if sleep_or_stop(at, &mut n.stop).await {
            break;
        }
        let length = Duration::from_millis(fault.length_ms);
        let picked = &fault.nodes;
        if fault.kind.is_server_side() && n.nodes.is_empty() {
            bail!("{} needs nodes the harness started", fault.kind);
        }
        if let Some(&i) = fault.nodes_named().iter().find(|&&i| i >= n.nodes.len()) {
            bail!(
                "fault {} names node n{}, but the run has {} node(s)",
                fault.id,
                i + 1,
                n.nodes.len()
            );
        }
        let names: Vec<&str> = picked.iter().map(|&i| n.ids[i].as_str()).collect();
        let nodes = json!(names);
        let label = format!("{} {}", fault.kind, names.join(","));
        let id = json!(fault.id);
        let value = || {
            OpValue::default()
                .with_extra("nodes", nodes.clone())
                .with_extra("length_ms", json!(fault.length_ms))
                .with_extra("fault", id.clone())
        };
        match fault.kind {
            FaultKind::Pause => {
                n.recorder.nemesis("start-pause", value())?;
                for &i in picked {
                    n.nodes[i].lock().await.pause()?;
                }
                set_active(&n.active, Some(label));
                // Heal on stop too: the fault's end always runs.
                sleep_or_stop(Instant::now() + length, &mut n.stop).await;
                for &i in picked {
                    n.nodes[i].lock().await.resume()?;
                }
                n.recorder.nemesis("stop-pause", value())?;
            }
            FaultKind::Kill => {
                n.recorder.nemesis("kill", value())?;
                for &i in picked {
                    n.nodes[i].lock().await.kill()?;
                }
                set_active(&n.active, Some(label));
                sleep_or_stop(Instant::now() + length, &mut n.stop).await;
                for &i in picked {
                    restart(&n.nodes[i], &n.ids[i], n.startup).await?;
                    let spawned = n.nodes[i].lock().await.spawned_at();
                    if let (Some(clock), Some(at)) = (n.clocks[i].as_mut(), spawned) {
                        // A new process: libfaketime counts rates from its start.
                        clock.rebase(at)?;
                    }
                }
                n.recorder.nemesis(
                    "restart",
                    OpValue::default()
                        .with_extra("nodes", nodes.clone())
                        .with_extra("fault", id.clone()),
                )?;
            }
            FaultKind::ClientPause => {
                // The holder that takes the request records the stall itself, with its process
                // and this fault's id.
                let window = Duration::from_millis(fault.window_ms.unwrap_or(fault.length_ms));
                n.pauses.request_stall(
                    Stall {
                        length,
                        fault: Some(fault.id.clone()),
                    },
                    Instant::now() + window,
                );
                set_active(&n.active, Some("client-pause".into()));
                sleep_or_stop(Instant::now() + length.min(window), &mut n.stop).await;
            }
            FaultKind::Partition => {
                let cluster = n.netns.clone().context("partitions need --runtime netns")?;
                let p = fault
                    .partition
                    .as_ref()
                    .with_context(|| format!("fault {}: a partition without a cut", fault.id))?;
                let links: Vec<[&str; 2]> = p
                    .cut
                    .iter()
                    .map(|&(a, b)| [n.ids[a].as_str(), n.ids[b].as_str()])
                    .collect();
                let cut_from_clients: Vec<&str> = p
                    .clients_cut_from
                    .iter()
                    .map(|&i| n.ids[i].as_str())
                    .collect();
                let v = OpValue::default()
                    .with_extra("topology", json!(p.topology.as_str()))
                    .with_extra("cut", json!(links))
                    .with_extra("clients_cut_from", json!(cut_from_clients))
                    .with_extra("length_ms", json!(fault.length_ms))
                    .with_extra("fault", id.clone());
                n.recorder.nemesis("start-partition", v.clone())?;
                tokio::task::block_in_place(|| {
                    cluster.partition(&p.cut)?;
                    cluster.cut_clients(&p.clients_cut_from)
                })?;
                set_active(&n.active, Some(format!("partition {}", p.topology)));
                sleep_or_stop(Instant::now() + length, &mut n.stop).await;
                tokio::task::block_in_place(|| cluster.heal())?;
                n.recorder.nemesis("stop-partition", v)?;
            }
            FaultKind::Netem => {
                let cluster = n.netns.clone().context("netem needs --runtime netns")?;
                let spec = fault.netem.clone().unwrap_or(nemesis::schedule::NETEM);
                let v = value().with_extra(
                    "netem",
                    json!({"delay_ms": spec.delay_ms, "jitter_ms": spec.jitter_ms,
                           "loss_pct": spec.loss_pct, "duplicate_pct": spec.duplicate_pct,
                           "reorder_pct": spec.reorder_pct}),
                );
                n.recorder.nemesis("start-netem", v.clone())?;
                tokio::task::block_in_place(|| cluster.netem(picked, &spec))?;
                set_active(&n.active, Some(label));
                sleep_or_stop(Instant::now() + length, &mut n.stop).await;
                tokio::task::block_in_place(|| cluster.clear_netem(picked))?;
                n.recorder.nemesis("stop-netem", v)?;
            }
            FaultKind::Clock => {
                let change = fault
                    .clock
                    .with_context(|| format!("fault {}: a clock fault without a mode", fault.id))?;
                set_active(
                    &n.active,
                    Some(format!("clock {} {}", change.mode, names.join(","))),
                );
                clock_fault(&mut n, &fault, change, length).await?;
            }
        }
        set_active(&n.active, None);
    }
    Ok(())
}

/// One clock fault on its nodes: skew, hold it for `length`, then heal. After each change
/// every node's `/v1/time` is read and the offset it shows is recorded, so the history says
/// what the service's clocks really did, not only what was asked.
async fn clock_fault<W: std::io::Write + Send>(
    n: &mut Nemesis<W>,
    fault: &PlannedFault,
    change: ClockFault,
    length: Duration,
) -> Result<()> {
    let picked = &fault.nodes;
    let mode = change.mode;
    let delta_s = change.delta_ms.unwrap_or(0) as f64 / 1000.0;
    let rate = change.rate.unwrap_or(1.0);
    let names: Vec<&str> = picked.iter().map(|&i| n.ids[i].as_str()).collect();
    let mut value = OpValue::default()
        .with_extra("nodes", json!(names))
        .with_extra("mode", json!(mode.as_str()))
        .with_extra("length_ms", json!(length.as_millis() as u64))
        .with_extra("fault", json!(fault.id));
    value = match (change.delta_ms, change.rate) {
        (Some(d), _) => value.with_extra("delta_ms", json!(d)),
        (None, Some(r)) => value.with_extra("rate", json!(r)),
        (None, None) => value,
    };
    let mut before_s = Vec::with_capacity(picked.len());
    for &i in picked {
        let clock = n.clocks[i]
            .as_ref()
            .context("clock faults need the nodes started under libfaketime")?;
        before_s.push(clock.offset_s(Instant::now()));
    }
    n.recorder.nemesis("start-clock", value.clone())?;
    for (k, &i) in picked.iter().enumerate() {
        let clock = n.clocks[i].as_mut().expect("checked above");
        match mode {
            ClockMode::BumpForward | ClockMode::BumpBack => clock.bump(delta_s)?,
            ClockMode::Strobe => clock.set_offset(before_s[k] + delta_s)?,
            ClockMode::Fast | ClockMode::Slow => clock.set_rate(rate)?,
        }
    }
    observe_clocks(n, picked, &fault.id).await?;
    let until = Instant::now() + length;
    if mode == ClockMode::Strobe {
        // Flip between the skew and the true time; bounded by the fault's length.
        let mut skewed = true;
        while !sleep_or_stop((Instant::now() + STROBE_PERIOD).min(until), &mut n.stop).await
            && Instant::now() < until
        {
            skewed = !skewed;
            for (k, &i) in picked.iter().enumerate() {
                let clock = n.clocks[i].as_mut().expect("checked above");
                clock.set_offset(before_s[k] + if skewed { delta_s } else { 0.0 })?;
            }
        }
    } else {
        sleep_or_stop(until, &mut n.stop).await;
    }
    for (k, &i) in picked.iter().enumerate() {
        let clock = n.clocks[i].as_mut().expect("checked above");
        match mode {
            // A clock that ran fast or slow gets the true rate back without stepping back: a
            // monotonic clock never goes backwards, and a wall clock being disciplined slews.
            ClockMode::Fast | ClockMode::Slow => clock.set_rate(1.0)?,
            _ => clock.set_offset(before_s[k])?,
        }
    }
    observe_clocks(n, picked, &fault.id).await?;
    n.recorder.nemesis("stop-clock", value)?;
    Ok(())
}

async fn observe_clocks<W: std::io::Write + Send>(
    n: &Nemesis<W>,
    picked: &[usize],
    fault: &str,
) -> Result<()> {
    for &i in picked {
        let url = n.nodes[i].lock().await.base_url();
        observe_clock(&n.recorder, &n.ids[i], &url, fault).await?;
    }
    Ok(())
}

/// How often a strobing clock flips.
const STROBE_PERIOD: Duration = Duration::from_millis(200);

/// Reads the node's `/v1/time` and records the offset of its realtime clock from the
/// harness's (midpoint of the request), and its raw monotonic reading.
async fn observe_clock<W: std::io::Write + Send>(
    recorder: &Recorder<W>,
    id: &str,
    url: &str,
    fault: &str,
) -> Result<()> {
    let unix_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    };
    let before = unix_ms();
    let answer = async {
        let body: serde_json::Value = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .no_proxy()
            .build()?
            .get(format!("{url}/v1/time"))
            .send()
            .await?
            .json()
            .await?;
        Ok::<_, reqwest::Error>(body)
    }
    .await;
    let after = unix_ms();
    let mut v = OpValue::default()
        .with_extra("nodes", json!([id]))
        .with_extra("fault", json!(fault));
    match answer {
        Ok(body) => {
            if let Some(rt) = body.get("realtime_ms").and_then(serde_json::Value::as_i64) {
                v = v.with_extra("realtime_offset_ms", json!(rt - (before + after) / 2));
            }
            if let Some(m) = body.get("monotonic_ms") {
                v = v.with_extra("monotonic_ms", m.clone());
            }
        }
        // The service may not answer /v1/time (it is optional): say so, carry on.
        Err(e) => v = v.with_error(format!("no /v1/time: {e}")),
    }
    recorder.nemesis("clock-observed", v)?;
    Ok(())
}

async fn restart(node: &tokio::sync::Mutex<LocalNode>, id: &str, startup: Duration) -> Result<()> {
    let mut last = None;
    for attempt in 1..=RESTART_ATTEMPTS {
        match node.lock().await.restart(startup).await {
            Ok(()) => return Ok(()),
            Err(e) => {
                tracing::warn!(attempt, error = %e, "restart failed");
                last = Some(e);
            }
        }
    }
    Err(anyhow!(
        "node {id} did not come back after {RESTART_ATTEMPTS} restarts: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}

/// Makes `<out>/<name>/<UTC timestamp>/` and points `<out>/latest` at it.
fn create_run_dir(out: &Path, name: &str) -> Result<PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let parent = out.join(name);
    fs::create_dir_all(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let mut dir = parent.join(&stamp);
    // Two runs in the same millisecond (tests in parallel) get distinct folders.
    for i in 2..100 {
        match fs::create_dir(&dir) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                dir = parent.join(format!("{stamp}-{i}"));
            }
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    if !dir.is_dir() {
        bail!(
            "cannot create a fresh run directory under {}",
            parent.display()
        );
    }
    let link = out.join(layout::LATEST_LINK);
    let target = Path::new(name).join(dir.file_name().unwrap_or_default());
    let tmp = out.join(format!(".latest-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    // Best effort: a missing `latest` link loses nothing.
    if std::os::unix::fs::symlink(&target, &tmp).is_ok() && fs::rename(&tmp, &link).is_err() {
        let _ = fs::remove_file(&tmp);
    }
    Ok(dir)
}
