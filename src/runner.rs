//! The runner: one test, start to verdict. Deploy the store and the lock service; start the
//! clients and the nemesis (the plan drawn or replayed before the first fault); when the time
//! is up, stop the clients, heal, make the final reads, stop the nodes; check the history read
//! back from disk and write the run directory's results. A library call: the caller makes the
//! run directory, sets up logging and watches through [`Progress`].

mod deploy;
mod plan;
mod probe;
mod signals;

use crate::config::RunConfig;
use anyhow::{bail, Context, Result};
use history::{layout, Completeness, HistoryWriter, Recorder, Results};
use nemesis::fault::{self, ActiveFaults, Healer};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use workloads::{
    Adapter, AnswerWatch, Budget, PauseBoard, WorkersDone, WorkloadConfig, WorkloadError,
};

pub use probe::probe_service;
pub use signals::Interrupted;

/// One test to run: its resolved configuration, and the (existing, empty) directory it writes.
pub struct RunSpec {
    pub cfg: RunConfig,
    pub run_dir: PathBuf,
    /// Probe the service's conformance after it is up and before the clock starts (false with
    /// `--no-probe`).
    pub probe: bool,
}

/// What a finished run hands back.
pub struct RunOutcome {
    pub run_dir: PathBuf,
    pub results: Results,
    /// A harness-side failure (e.g. a node that would not restart): the verdict was still
    /// computed from what was recorded, at best `unknown`, and the exit code is 3 unless a
    /// violation was proven. Also in `results.completeness`.
    pub error: Option<String>,
}

/// What a run shows while it goes on (the status line watches it).
pub struct Live {
    pub recorder: Arc<Recorder>,
    /// The faults in progress.
    pub active: ActiveFaults,
    /// How long the clients run.
    pub duration: Duration,
    /// What the live checks of the history found so far.
    pub verdict: watch::Receiver<crate::live::LiveVerdict>,
}

/// How a caller follows a run; every call has a do-nothing default.
pub trait Progress: Send + Sync {
    /// Clients and nemesis are running.
    fn started(&self, _live: Live) {}
    /// The run moved on (stopping clients and healing, the quiet period and final reads).
    fn phase(&self, _phase: &str) {}
    /// Nothing more happens to the service; checking comes next.
    fn finished(&self) {}
}

pub async fn run(spec: RunSpec, progress: &dyn Progress) -> Result<RunOutcome> {
    let RunSpec {
        cfg,
        run_dir,
        probe,
    } = spec;
    tracing::info!(dir = %run_dir.display(), seed = cfg.seed, "run starting");
    let config_path = run_dir.join(layout::CONFIG_FILE);
    std::fs::write(&config_path, cfg.file_text()?)
        .with_context(|| format!("cannot write {}", config_path.display()))?;
    let startup = Duration::from_millis(cfg.startup_timeout_ms);
    let mut signals = signals::Signals::listen(&run_dir);
    let dep = deploy::deploy(&cfg, &run_dir, startup).await?;
    let mut dep = service_ready(&cfg, dep, probe, &signals).await?;
    let mut running = Running::start(&cfg, &mut dep, &run_dir, startup, progress).await?;
    let end = running.wait_for_end(&cfg, &mut signals).await;
    tracing::info!(why = end.why, "stopping clients");
    progress.phase(if end.stopped.is_some() {
        "violation proven: stopping clients and healing"
    } else {
        "stopping clients and healing"
    });
    let (workers_done, mut error) = running.stop(&cfg, startup).await?;
    // The final heal: whatever the nemesis left, the service runs again before final reads.
    let healer = Healer {
        nodes: &dep.nodes,
        stalls: &*running.stalls,
    };
    fault::heal_all(&healer).await?;

    if running.wcfg.kind.uses_store() && error.is_none() {
        progress.phase("quiet period, then final reads");
        // Clients rest so every lease lapses and the service settles before the closing read.
        tokio::time::sleep(Duration::from_millis(cfg.lease_max_ms().clamp(200, 2_000))).await;
        let first = workers_done.max_process + 1;
        let (wcfg, recorder) = (&running.wcfg, &running.recorder);
        workloads::final_reads(wcfg, &running.clients[0], recorder, first).await?;
    }
    let events = running.recorder.events();
    progress.finished();
    // A teardown that fails (a host that stopped answering keeps what the run made there)
    // makes the run an error, after the fault that caused it if there was one; the history
    // is still checked and every artifact written.
    if let Err(e) = dep.teardown() {
        let why = format!("teardown: {}", crate::error_text(&e));
        tracing::error!("{why}");
        error.get_or_insert(why);
    }
    tracing::info!(events, "clients done; checking");

    if error.is_none() && events == 0 {
        error = Some("no event was recorded".into());
    }
    let completeness = match (&error, end.interrupted, end.stopped) {
        (Some(e), _, _) => Completeness::error(e.clone()),
        (None, Some(why), _) => Completeness::interrupted(why),
        (None, None, Some((kind, why))) => Completeness::stopped(kind, why),
        (None, None, None) => Completeness::complete(),
    };
    match completeness.state {
        history::RunState::Complete => {}
        history::RunState::Stopped => {
            tracing::info!(completeness = %completeness.headline(), "stopped at the first proven violation")
        }
        _ => tracing::error!(completeness = %completeness.headline(), "the run is incomplete"),
    }
    let mut results = crate::check_cmd::check_file(&running.history_path, &cfg.check_config())?;
    results.set_completeness(completeness);
    crate::report_cmd::write_results(&run_dir, &results)?;
    Ok(RunOutcome {
        run_dir,
        results,
        error,
    })
}

/// The deployed service, probed (unless `--no-probe`) and not interrupted while it started;
/// otherwise it is torn down again and the run ends before any op.
async fn service_ready(
    cfg: &RunConfig,
    dep: deploy::Deployment,
    probe: bool,
    signals: &signals::Signals,
) -> Result<deploy::Deployment> {
    if probe {
        // Conformance first: a service the adapter does not understand is refused in one
        // line, before the clock starts and before any op is recorded.
        match probe::conformance(cfg, &dep).await {
            Ok(lines) => tracing::info!("probe passed: {}", lines.join(" | ")),
            Err(e) => {
                tracing::error!("{e}");
                dep.teardown()?;
                bail!("{e}");
            }
        }
    }
    if let Some(s) = signals.received() {
        // Stopped while the service started: it is stopped again, nothing was recorded.
        dep.teardown()?;
        return Err(signals::Interrupted(format!(
            "stopped by {s} while the service was starting, before any op"
        ))
        .into());
    }
    Ok(dep)
}

/// The clients and the nemesis while they run, and what the run needs of them afterwards.
struct Running {
    start: Instant,
    clients: Vec<Adapter>,
    history_path: PathBuf,
    recorder: Arc<Recorder>,
    wcfg: Arc<WorkloadConfig>,
    stalls: Arc<plan::Stalls>,
    budget: Arc<Budget>,
    stop_tx: watch::Sender<bool>,
    answers: Arc<AnswerWatch>,
    workers: JoinHandle<Result<WorkersDone, WorkloadError>>,
    nemesis_task: JoinHandle<Result<(), nemesis::Error>>,
    /// Set when the nemesis fails; its sender is dropped when the nemesis ends well.
    nemesis_failed: watch::Receiver<bool>,
    /// The longest client stall the schedule holds: a stall ignores the stop signal.
    stall_max_ms: u64,
    /// Checks the history as it is written, until the clients stop.
    live: Option<crate::live::Watcher>,
    verdict: watch::Receiver<crate::live::LiveVerdict>,
}

impl Running {
    /// Starts the history's clock, the clients and the nemesis, and tells `progress`.
    async fn start(
        cfg: &RunConfig,
        dep: &mut deploy::Deployment,
        run_dir: &std::path::Path,
        startup: Duration,
        progress: &dyn Progress,
    ) -> Result<Running> {
        // The history's clock starts here: the etcd adapter stamps lease evidence on it.
        let start = Instant::now();
        let clients = connect(cfg, dep, start)?;
        let history_path = run_dir.join(layout::HISTORY_FILE);
        let writer = HistoryWriter::create(&history_path)
            .with_context(|| format!("cannot create {}", history_path.display()))?;
        let recorder = Arc::new(Recorder::new(writer, start));
        let wcfg = Arc::new(workload_config(cfg));
        let pauses = Arc::new(PauseBoard::new());
        let stalls = Arc::new(plan::Stalls(pauses.clone()));
        let budget = Arc::new(Budget::new(cfg.ops_max));
        let (stop_tx, stop_rx) = watch::channel(false);
        let answers = Arc::new(AnswerWatch::default());
        let active: ActiveFaults = Arc::default();

        let schedule = plan::schedule(cfg, dep.nodes.len(), dep.primary, run_dir)?;
        dep.rebase_clocks().await?;
        let workers = tokio::spawn(workloads::run_workers(
            wcfg.clone(),
            clients.clone(),
            recorder.clone(),
            pauses,
            budget.clone(),
            stop_rx.clone(),
            answers.clone(),
        ));
        // A stall ignores the stop signal (a paused program does not know the test is ending).
        let stall_max_ms = fault::longest_client_stall_ms(&schedule.faults);
        let ctx = fault::Ctx {
            nodes: dep.nodes.clone(),
            ids: dep.ids.clone(),
            network: dep.network(),
            clocks: std::mem::take(&mut dep.clocks),
            stalls: stalls.clone(),
            recorder: recorder.clone(),
            stop: stop_rx,
            start,
            startup,
            active: active.clone(),
            primary: dep.primary,
            clock_scope: cfg.clock_scope.as_str(),
            locate: locate(cfg, dep),
        };
        let (nemesis_task, nemesis_failed) = spawn_nemesis(ctx, schedule.faults);
        let (verdict_tx, verdict) = watch::channel(Default::default());
        let live = crate::live::Watcher::start(
            &history_path,
            &cfg.check_config(),
            start,
            live_every(cfg),
            verdict_tx,
        );
        progress.started(Live {
            recorder: recorder.clone(),
            active,
            duration: Duration::from_millis(cfg.duration_ms),
            verdict: verdict.clone(),
        });
        Ok(Running {
            start,
            clients,
            history_path,
            recorder,
            wcfg,
            stalls,
            budget,
            stop_tx,
            answers,
            workers,
            nemesis_task,
            nemesis_failed,
            stall_max_ms,
            live: Some(live),
            verdict,
        })
    }

    /// Waits for the end of the clients' time: the duration or the ops budget, a signal, a
    /// failed nemesis, answers the adapter does not understand past the watch's threshold, or
    /// (`--stop-on-violation`) a safety violation the live check proved.
    async fn wait_for_end(
        &mut self,
        cfg: &RunConfig,
        signals: &mut signals::Signals,
    ) -> signals::End {
        let nemesis_failed = &mut self.nemesis_failed;
        let verdict = &mut self.verdict;
        tokio::select! {
            proven = async {
                match verdict.wait_for(|v| v.first_safety.is_some()).await {
                    Ok(v) => v.first_safety.clone(),
                    Err(_) => std::future::pending().await,
                }
            }, if cfg.stop_on_violation => signals::End {
                why: "stopped: a safety violation was proven",
                interrupted: None,
                stopped: proven.map(|p| (p.violation.kind, p.headline())),
            },
            end = signals::wait_for_end(cfg, &self.budget, self.start, signals) => end,
            () = async {
                // A nemesis that ends well drops its sender: then this branch never fires.
                if nemesis_failed.wait_for(|f| *f).await.is_err() {
                    std::future::pending::<()>().await;
                }
            } => signals::End {
                why: "stopped: the nemesis failed",
                interrupted: None,
                stopped: None,
            },
            () = self.answers.wait() => signals::End {
                why: "stopped on answers the adapter does not understand",
                interrupted: None,
                stopped: None,
            },
        }
    }

    /// Stops the clients and waits for them and the nemesis; the error is the run's harness
    /// failure, if any (the nemesis's, or the adapter's answers').
    async fn stop(
        &mut self,
        cfg: &RunConfig,
        startup: Duration,
    ) -> Result<(WorkersDone, Option<String>)> {
        let _ = self.stop_tx.send(true);
        // The clients' time is over: the end of the run is checked whole.
        self.live = None;
        // Every op is bounded by the op timeout, a stall by the schedule: this bound only
        // catches harness bugs.
        let drain = Duration::from_millis(
            cfg.op_timeout_ms * 4
                + cfg.acquire_wait_ms
                + (cfg.lease_max_ms() * 3).max(self.stall_max_ms)
                + 5_000,
        );
        let workers_done = match tokio::time::timeout(drain, &mut self.workers).await {
            Ok(Ok(Ok(done))) => done,
            Ok(Ok(Err(e))) => return Err(e.into()),
            Ok(Err(e)) => bail!("client workers crashed: {e}"),
            Err(_) => bail!("client workers did not stop within {drain:?}"),
        };
        // The startups a heal may wait for, by the family that waits for the most.
        let startups = nemesis::schedule::FaultKind::ALL
            .iter()
            .map(|f| f.heal_startups())
            .max();
        let restarts = startup * startups.unwrap_or(0);
        let mut error = match tokio::time::timeout(drain + restarts, &mut self.nemesis_task).await {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) => Some(crate::error_text(&anyhow::Error::from(e))),
            Ok(Err(e)) => Some(format!("nemesis crashed: {e}")),
            Err(_) => Some("nemesis did not heal in time".to_string()),
        };
        if let Some(why) = self.answers.why() {
            error = Some(why.to_string());
        }
        Ok((workers_done, error))
    }
}

/// The nemesis playing `faults`, and what says it failed. A nemesis that fails (a node that
/// does not come back) ends the clients' time at once: what they would do after it tests
/// nothing the run asked for. One that ends well drops its sender.
fn spawn_nemesis(
    ctx: fault::Ctx<std::fs::File>,
    faults: Vec<nemesis::schedule::PlannedFault>,
) -> (
    JoinHandle<Result<(), nemesis::Error>>,
    watch::Receiver<bool>,
) {
    let (failed_tx, failed) = watch::channel(false);
    let task = tokio::spawn(async move {
        let r = fault::run_plan(ctx, faults).await;
        if r.is_err() {
            let _ = failed_tx.send(true);
        }
        r
    });
    (task, failed)
}

/// Where the moving primary is looked up, unless a schedule names its nodes (not by role):
/// then it hits those nodes.
fn locate(cfg: &RunConfig, dep: &deploy::Deployment) -> Option<fault::Locate> {
    dep.moving_primary
        .clone()
        .filter(|_| cfg.schedule.as_ref().is_none_or(|s| s.by_role))
        .map(|check| fault::Locate {
            check,
            addrs: dep
                .urls
                .iter()
                .map(|u| workloads::host_port(u).unwrap_or_default())
                .collect(),
        })
}

/// One adapter per node (client slot `i` uses node `i mod N`), from the service's descriptor.
pub(crate) fn connect(
    cfg: &RunConfig,
    dep: &deploy::Deployment,
    start: Instant,
) -> Result<Vec<Adapter>> {
    let service = cfg.service;
    let options = cfg.adapter_options();
    let clock: workloads::Clock = Arc::new(move || start.elapsed().as_nanos() as u64);
    dep.urls
        .iter()
        .map(|url| {
            let c = workloads::Connect {
                url,
                peers: &dep.urls,
                known_as: &dep.known_as,
                peer_urls: &dep.peer_urls,
                store_url: dep.store_url.as_deref(),
                op_timeout: Duration::from_millis(cfg.op_timeout_ms),
                clients: cfg.clients,
                clock: clock.clone(),
                options: &options,
            };
            Ok(service.connect(&c)?)
        })
        .collect()
}

/// How often the whole history written so far is checked again (the streaming rules read what
/// was written every 250 ms whatever this is): often enough to stop within a second of a
/// violation only the whole check proves when asked to, else once a second.
fn live_every(cfg: &RunConfig) -> Duration {
    if cfg.stop_on_violation {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(1)
    }
}

fn workload_config(cfg: &RunConfig) -> WorkloadConfig {
    WorkloadConfig {
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
        acquire_wait_ms: cfg.acquire_wait_ms,
        arrivals: cfg.arrivals,
        accounts: cfg.accounts,
        lock_order: cfg.lock_order_policy,
    }
}
