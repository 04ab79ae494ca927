//! The lock service: leases, fencing tokens, recovery after restart, and the unsafe modes.

use std::collections::HashMap;
use std::fs;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path as FsPath, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{middleware, Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::futures::OwnedNotified;
use tokio::sync::{watch, Notify};
use tracing::{debug, error, info, warn};

use crate::cluster::{route, Cluster, ForwardError, Forwarder, Route, FORWARD_TIMEOUT_MS};
use crate::error::LockdError;
use crate::http::{health, named_request, not_found, ApiError, ClientBody, BODY_BYTES_MAX};
use crate::mode::UnsafeMode;
use crate::order::LockOrder;
use crate::ordered::{Ordered, TimestampOrder};
use crate::persist::{self, DurableState};
use crate::ring::Ring;

/// A lease longer than this is a client bug, and it would stretch the post-restart
/// `recovering` window without bound.
pub(crate) const TTL_MS_MAX: u64 = 3_600_000;
/// Longer waits are silently shortened to this; the client sees `held` as usual.
pub(crate) const WAIT_MS_MAX: u64 = 60_000;
const LOCKS_MAX: usize = 100_000;
/// Tokens made durable per fsync. At 5,000 grants/s that is one fsync every 2 s. A restart
/// skips the unused rest of the block, which is harmless: tokens must only increase.
const TOKEN_BLOCK: u64 = 10_000;
/// Each round makes room for TOKEN_BLOCK more grants, so needing more than a few means
/// the disk cannot keep up; answer 503 rather than queue forever.
const PERSIST_ROUNDS_MAX: u32 = 4;
/// A waiter re-checks at least this often even without a release notification, which
/// covers expiry under the wall-clock mode, whose deadline can move.
const WAIT_SLICE_MS: u64 = 100;
/// Backstop on wake-ups per acquire; the wait deadline normally ends the loop first.
pub(crate) const WAIT_ROUNDS_MAX: u32 = 100_000;
/// Lapsed leases an entry remembers for `renew-grace` and `unchecked-release`.
const LAPSED_MAX: usize = 16;
/// Long enough that 5 concurrent clients hit the racy window within seconds.
const RACY_YIELD_MS: u64 = 2;

/// How to run lockd.
#[derive(Debug, Clone)]
pub struct LockdConfig {
    /// Created if missing. Holds [`crate::STATE_FILE_NAME`] on the primary (or the single
    /// node); the other members keep no state.
    pub data_dir: PathBuf,
    /// `None` is the correct service.
    pub unsafe_mode: Option<UnsafeMode>,
    /// `host:port` of the other members, as they are dialled. Empty: a single node, which
    /// serves everything itself. Otherwise the member with the smallest address (see
    /// [`crate::primary_of`]) holds all lock state and the others relay acquire, renew and
    /// release to it, answering 503 `primary-unreachable` when they cannot (safe, not
    /// highly available). This node's own address may appear here; it is ignored. The
    /// membership must be the same on every member and fixed for the life of the data dirs.
    pub peers: Vec<String>,
    /// This node's `host:port` as the peers know it; only used with `peers`. `None`: the
    /// listener's local address, which is refused if it is unspecified (`0.0.0.0`), since
    /// then every member would rank itself by an address nobody else uses.
    pub advertise: Option<String>,
    /// How the members decide: the primary scheme above; the timestamp-ordered cluster (see
    /// the `ordered` module), where every member grants to its own clients once the members
    /// agree its request has the smallest timestamp; or the token ring (the `ring` module),
    /// where a member grants only while it holds the one token. Neither of the last two has a
    /// primary or durable lock state.
    pub order: LockOrder,
}

/// Serves the lock protocol on `listener` until `shutdown` resolves.
///
/// # Errors
///
/// Before serving: the data dir cannot be created or written, or its state file is
/// unreadable or corrupt. While serving: the server itself fails.
pub async fn serve_lockd(
    listener: TcpListener,
    cfg: LockdConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LockdError> {
    let addr = listener.local_addr().map_err(LockdError::LocalAddr)?;
    let mode = cfg.unsafe_mode;
    check_mode_order(mode, cfg.order)?;
    let cluster = join_cluster(&cfg, addr)?;
    match cfg.order {
        LockOrder::Primary => serve_primary(listener, cfg, cluster, addr, shutdown).await,
        LockOrder::Timestamp(order) => {
            serve_ordered(listener, order, mode, cluster.as_ref(), addr, shutdown).await
        }
        LockOrder::Ring(order) => {
            let ring = RingStart {
                order,
                mode,
                data_dir: &cfg.data_dir,
            };
            serve_ring(listener, ring, cluster.as_ref(), addr, shutdown).await
        }
    }
}

/// The primary scheme: a single node, or the member that holds all lock state (see
/// [`LockdConfig::peers`]) and the members that relay to it. The primary loads (or starts)
/// the state file and answers `recovering` while an earlier run's leases may live.
async fn serve_primary(
    listener: TcpListener,
    cfg: LockdConfig,
    cluster: Option<Cluster>,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LockdError> {
    let mode = cfg.unsafe_mode;
    let dir = cfg.data_dir.clone();
    let primary = cluster.as_ref().is_none_or(|c| c.forwarder.is_none());
    let start = if primary {
        tokio::task::spawn_blocking(move || open_data_dir(&dir, mode))
            .await
            .map_err(|e| LockdError::StartupTask(e.to_string()))??
    } else {
        tokio::task::spawn_blocking(move || follower_start(&dir))
            .await
            .map_err(|e| LockdError::StartupTask(e.to_string()))??
    };
    // Measured from after loading: starting the window later only makes it safer.
    let recovering_until = start
        .recovery_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));

    info!(
        %addr,
        data_dir = %cfg.data_dir.display(),
        mode = mode.map_or("safe", UnsafeMode::name),
        next_token = start.next_token,
        "lockd listening"
    );
    warn_unsafe(mode);
    if let Some(c) = &cluster {
        log_role(c, mode);
    }
    if let Some(ms) = start.recovery_ms {
        info!(
            "state from an earlier run found; answering `recovering` to every acquire for \
             {ms} ms, until any lease it granted has surely expired"
        );
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let svc = Arc::new(Service {
        mode,
        data_dir: cfg.data_dir,
        state: Mutex::new(LockTable::new(start.next_token, start.durable, LOCKS_MAX)),
        persist_gate: tokio::sync::Mutex::new(()),
        recovering_until,
        stopping: stop_rx,
        node: cluster.as_ref().map(|c| c.node.clone()),
        cluster,
    });
    let app = primary_routes(svc.node.clone());
    serve_app(listener, app.with_state(svc), shutdown, stop_tx, addr).await
}

/// The lock protocol's routes, each answer marked with the member that gave it in a cluster.
fn primary_routes(node: Option<HeaderValue>) -> Router<Arc<Service>> {
    let mut app = Router::new()
        .route("/v1/locks/{lock}/acquire", post(acquire_handler))
        .route("/v1/locks/{lock}/renew", post(renew_handler))
        .route("/v1/locks/{lock}/release", post(release_handler))
        .route("/v1/health", get(health))
        .route("/v1/time", get(time_handler))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX));
    if let Some(node) = node {
        app = app.layer(middleware::map_response_with_state(node, add_node_header));
    }
    app
}

/// Serves `app` until `shutdown`, then tells `stop_tx`.
pub(crate) async fn serve_app(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    stop_tx: watch::Sender<bool>,
    addr: SocketAddr,
) -> Result<(), LockdError> {
    let listener = listener.tap_io(|tcp| {
        // Small request/response pairs on keep-alive connections would otherwise stall on
        // Nagle + delayed ACK, capping throughput far below the harness's target.
        if let Err(e) = tcp.set_nodelay(true) {
            debug!("set_nodelay failed: {e}");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Wakes acquires parked in `wait_ms`, which would otherwise hold up the graceful
            // shutdown for up to WAIT_MS_MAX.
            let _ = stop_tx.send(true);
        })
        .await
        .map_err(LockdError::Serve)?;
    info!(%addr, "lockd stopped");
    Ok(())
}

/// This member's address and every member's (itself included, sorted): a single node is a
/// cluster of one.
fn members_of(cluster: Option<&Cluster>, addr: SocketAddr) -> (String, Vec<String>) {
    let me = cluster.map_or_else(|| addr.to_string(), |c| c.me.clone());
    let members = match cluster {
        Some(c) => c.members().split(',').map(str::to_owned).collect(),
        None => vec![me.clone()],
    };
    (me, members)
}

fn warn_unsafe(mode: Option<UnsafeMode>) {
    if let Some(m) = mode {
        warn!(
            "UNSAFE MODE `{m}` IS ON: {}. This lockd is broken on purpose, for testing the \
             harness; never protect anything with it.",
            m.consequence()
        );
    }
}

/// A member's lock routes with what every lockd serves beside them, its answers naming it.
fn member_app(routes: Router, me: &str) -> Result<Router, LockdError> {
    let node = HeaderValue::from_str(me).map_err(|e| LockdError::InvalidCluster {
        reason: format!("`{me}` cannot go into a header: {e}"),
    })?;
    Ok(routes
        .route("/v1/health", get(health))
        .route("/v1/time", get(time_handler))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .layer(middleware::map_response_with_state(node, add_node_header)))
}

/// The timestamp-ordered cluster: the same lock API, decided by the members together.
async fn serve_ordered(
    listener: TcpListener,
    order: TimestampOrder,
    mode: Option<UnsafeMode>,
    cluster: Option<&Cluster>,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LockdError> {
    // The only mode the timestamp order takes (check_mode_order refused the others).
    let order = TimestampOrder {
        tiebreak: mode != Some(UnsafeMode::NoTiebreak),
        ..order
    };
    let (me, members) = members_of(cluster, addr);
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let (stop_tx, stop_rx) = watch::channel(false);
    let ordered = Arc::new(Ordered::new(order, &me, &members, stop_rx)?);
    info!(
        %addr,
        me,
        members = members.join(","),
        granularity_ms = order.granularity_ms,
        tiebreak = order.tiebreak,
        "lockd listening: timestamp order"
    );
    warn_unsafe(mode);
    let app = member_app(Arc::clone(&ordered).routes(), &me)?;
    let served = serve_app(listener, app, shutdown, stop_tx, addr).await;
    ordered.log_counts();
    served
}

/// An unsafe mode is a bug of one order ([`UnsafeMode::order`]; the primary scheme's unless it
/// says otherwise), and only that order takes it.
fn check_mode_order(mode: Option<UnsafeMode>, order: LockOrder) -> Result<(), LockdError> {
    let Some(m) = mode else { return Ok(()) };
    let needs = m.order().map_or("primary", |(name, _)| name);
    if order.name() == needs {
        return Ok(());
    }
    let reason = match m.order() {
        Some((name, why)) => format!(
            "unsafe mode {m} needs the {name} order ({why}), not {}",
            order.name()
        ),
        None => format!(
            "unsafe mode {m} is a bug of the primary order, not of the {} order",
            order.name()
        ),
    };
    Err(LockdError::InvalidCluster { reason })
}

/// What a ring member starts from.
struct RingStart<'a> {
    order: crate::ring::RingOrder,
    mode: Option<UnsafeMode>,
    data_dir: &'a FsPath,
}

/// The token ring: the same lock API, granted by whichever member holds the token.
async fn serve_ring(
    listener: TcpListener,
    start: RingStart<'_>,
    cluster: Option<&Cluster>,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LockdError> {
    let (me, members) = members_of(cluster, addr);
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let (stop_tx, stop_rx) = watch::channel(false);
    let regenerate = start.mode == Some(UnsafeMode::RingRegenerate);
    let ring = Arc::new(Ring::new(
        start.order,
        regenerate,
        &me,
        &members,
        start.data_dir,
        stop_rx,
    )?);
    info!(
        %addr,
        me,
        members = members.join(","),
        idle_ms = start.order.idle_ms,
        made_token = ring.made_token(),
        "lockd listening: token ring"
    );
    warn_unsafe(start.mode);
    let driver = tokio::spawn(Arc::clone(&ring).drive());
    let app = member_app(ring.routes(), &me)?;
    let served = serve_app(listener, app, shutdown, stop_tx, addr).await;
    // The driver sees the stop and logs what this member did; a pass in flight ends with it.
    let _ = tokio::time::timeout(Duration::from_secs(2), driver).await;
    served
}

/// `None`: no peers, a single node.
fn join_cluster(cfg: &LockdConfig, addr: SocketAddr) -> Result<Option<Cluster>, LockdError> {
    if cfg.peers.is_empty() {
        if cfg.unsafe_mode == Some(UnsafeMode::SplitBrain) {
            return Err(LockdError::InvalidCluster {
                reason: "unsafe mode split-brain needs peers".into(),
            });
        }
        return Ok(None);
    }
    let me = match &cfg.advertise {
        Some(a) => a.clone(),
        None if addr.ip().is_unspecified() => {
            return Err(LockdError::InvalidCluster {
                reason: format!(
                    "listening on {addr}: give the address the peers use for this node \
                     (advertise)"
                ),
            })
        }
        None => addr.to_string(),
    };
    Cluster::new(me, &cfg.peers).map(Some)
}

fn log_role(c: &Cluster, mode: Option<UnsafeMode>) {
    let role = if c.forwarder.is_none() {
        "primary: serving all lock state"
    } else if mode == Some(UnsafeMode::SplitBrain) {
        "member: relaying to the primary, GRANTING LOCALLY when it is unreachable"
    } else {
        "member: relaying to the primary, refusing when it is unreachable"
    };
    info!(
        me = c.me,
        primary = c.primary,
        members = c.members(),
        "{role}"
    );
}

struct Startup {
    next_token: u64,
    durable: DurableState,
    /// `None`: nothing granted before (fresh dir, or no lease ever granted).
    recovery_ms: Option<u64>,
}

fn open_data_dir(dir: &FsPath, mode: Option<UnsafeMode>) -> Result<Startup, LockdError> {
    fs::create_dir_all(dir).map_err(|source| LockdError::CreateDataDir {
        path: dir.to_owned(),
        source,
    })?;
    let earlier = persist::load(dir, TTL_MS_MAX)?;
    let (next_token, durable) = match (mode, earlier) {
        // The anti-pattern: forget which tokens were used. The ttl is still honoured so the
        // only broken property is the tokens.
        (Some(UnsafeMode::ReuseTokens), earlier) => {
            (1, earlier.unwrap_or_else(DurableState::fresh))
        }
        (_, Some(e)) => {
            let reserved_token = e.reserved_token.checked_add(TOKEN_BLOCK).ok_or_else(|| {
                LockdError::CorruptState {
                    path: persist::state_path(dir),
                    reason: format!("reserved_token {} is implausibly large", e.reserved_token),
                }
            })?;
            (
                e.reserved_token,
                DurableState {
                    reserved_token,
                    ..e
                },
            )
        }
        (_, None) => (
            1,
            DurableState {
                reserved_token: 1 + TOKEN_BLOCK,
                ..DurableState::fresh()
            },
        ),
    };
    // Written even when unchanged so an unwritable dir fails at start, not at first grant.
    persist::store(dir, &durable)?;
    // The `volatile` anti-pattern: what the previous incarnation granted is forgotten, so
    // nothing holds back the first acquire after a restart.
    let forgets = mode == Some(UnsafeMode::Volatile);
    Ok(Startup {
        next_token,
        durable,
        recovery_ms: earlier
            .filter(|_| !forgets)
            .map(|e| recovery_ms(e.max_ttl_ms))
            .filter(|&ms| ms > 0),
    })
}

/// A non-primary member persists nothing: its table only ever serves the split-brain
/// anti-pattern, whose tokens are in memory on purpose, so they are never persist-bound.
fn follower_start(dir: &FsPath) -> Result<Startup, LockdError> {
    fs::create_dir_all(dir).map_err(|source| LockdError::CreateDataDir {
        path: dir.to_owned(),
        source,
    })?;
    Ok(Startup {
        next_token: 1,
        durable: DurableState {
            reserved_token: u64::MAX,
            max_ttl_ms: TTL_MS_MAX,
            ..DurableState::fresh()
        },
        recovery_ms: None,
    })
}

/// The margin covers the rate difference between our clock and a client's: a client counts
/// its lease from before it sent the acquire, so it should stop trusting the lease before
/// we would, but only if its clock does not run much slower than ours.
fn recovery_ms(max_ttl_ms: u64) -> u64 {
    max_ttl_ms + max_ttl_ms / 10
}

/// Rounded up so that a client slowly raising its ttl costs at most ~22 fsyncs in total,
/// at the price of a recovery window up to twice the longest ttl actually granted.
fn persisted_ttl_ms(ttl_ms: u64) -> u64 {
    assert!(
        ttl_ms <= TTL_MS_MAX,
        "ttl_ms is validated before it is persisted"
    );
    ttl_ms.next_power_of_two().min(TTL_MS_MAX)
}

struct Service {
    mode: Option<UnsafeMode>,
    data_dir: PathBuf,
    /// Never held across an `.await` (see the crate docs): `LockTable` methods are
    /// synchronous and every guard is a temporary or dropped before the next await.
    state: Mutex<LockTable>,
    /// Serializes state-file writes so two handlers never race on the temp file, and the
    /// second of two concurrent needs usually finds the first already covered it.
    persist_gate: tokio::sync::Mutex<()>,
    recovering_until: Option<Instant>,
    stopping: watch::Receiver<bool>,
    /// `None`: a single node.
    cluster: Option<Cluster>,
    /// For the `X-Lockd-Node` header; `None` on a single node, whose responses stay as
    /// they always were.
    node: Option<HeaderValue>,
}

impl Service {
    fn route(&self, headers: &HeaderMap) -> Result<Route<'_>, ApiError> {
        route(self.cluster.as_ref(), headers)
    }

    fn is_primary(&self) -> bool {
        self.cluster.as_ref().is_none_or(|c| c.forwarder.is_none())
    }

    /// Asserted before every use of the lock table by a handler.
    fn may_serve_locally(&self) -> bool {
        self.is_primary() || self.split_brain()
    }

    fn split_brain(&self) -> bool {
        self.mode == Some(UnsafeMode::SplitBrain)
    }

    /// Relays to the primary; gives up when the server stops, since a relayed acquire may
    /// wait up to `WAIT_MS_MAX` and would hold up the graceful shutdown.
    async fn forward(
        &self,
        fwd: &Forwarder,
        uri: &Uri,
        body: Bytes,
        wait_ms: u64,
    ) -> Result<Response, ForwardError> {
        let timeout = Duration::from_millis(FORWARD_TIMEOUT_MS + wait_ms.min(WAIT_MS_MAX));
        let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
        let mut stopping = self.stopping.clone();
        if *stopping.borrow_and_update() {
            return Err(ForwardError::ShuttingDown);
        }
        tokio::select! {
            r = fwd.forward(path, body, timeout) => r,
            _ = stopping.changed() => Err(ForwardError::ShuttingDown),
        }
    }

    fn table(&self) -> MutexGuard<'_, LockTable> {
        // A poisoned table means a handler panicked mid-update, likely on a broken
        // invariant; serving on from that state could hand out a lock twice.
        self.state.lock().expect("lock table mutex poisoned")
    }

    fn is_recovering(&self) -> bool {
        self.recovering_until
            .is_some_and(|until| Instant::now() < until)
    }

    async fn acquire(self: &Arc<Self>, lock: &str, req: &AcquireReq) -> Result<u64, ApiError> {
        // Recovery only ever ends, so one check up front is enough.
        if self.is_recovering() {
            return Err(ApiError::Conflict("recovering"));
        }
        let wait_deadline = Instant::now() + Duration::from_millis(req.wait_ms.min(WAIT_MS_MAX));
        let mut stopping = self.stopping.clone();
        let mut persist_rounds = 0;
        for _ in 0..WAIT_ROUNDS_MAX {
            let step = self
                .table()
                .try_acquire(self.mode, lock, &req.client, req.ttl_ms);
            match step {
                AcquireStep::Granted(token) => return Ok(token),
                AcquireStep::Blocked(GrantBlocked::TooManyLocks) => {
                    return Err(ApiError::Unavailable("too-many-locks"))
                }
                AcquireStep::Blocked(GrantBlocked::NeedPersist) => {
                    persist_rounds += 1;
                    if persist_rounds > PERSIST_ROUNDS_MAX {
                        return Err(ApiError::Unavailable("persist-busy"));
                    }
                    self.persist(req.ttl_ms).await?;
                }
                AcquireStep::RacyFree => return self.racy_grant(lock, req).await,
                AcquireStep::Held {
                    released,
                    expires_in,
                } => {
                    let slice = Duration::from_millis(WAIT_SLICE_MS);
                    let left = wait_deadline.saturating_duration_since(Instant::now());
                    let mut nap = if self.mode == Some(UnsafeMode::NoWaitTimeout) {
                        // The bug: the deadline is never looked at. Still bounded by
                        // WAIT_ROUNDS_MAX slices, and by the client hanging up.
                        slice
                    } else if left.is_zero() {
                        return Err(ApiError::Conflict("held"));
                    } else {
                        left.min(slice)
                    };
                    if let Some(expires_in) = expires_in {
                        nap = nap.min(expires_in + Duration::from_millis(1));
                    }
                    tokio::select! {
                        _ = released => {}
                        _ = tokio::time::sleep(nap) => {}
                        _ = stopping.changed() => return Err(ApiError::Unavailable("shutting-down")),
                    }
                }
            }
        }
        Err(ApiError::Conflict("held"))
    }

    /// The `racy` anti-pattern: the free-check (already done by the caller) and the grant are
    /// two critical sections with a yield in between, so concurrent acquirers all pass the
    /// check and each overwrites the previous grant.
    async fn racy_grant(self: &Arc<Self>, lock: &str, req: &AcquireReq) -> Result<u64, ApiError> {
        tokio::time::sleep(Duration::from_millis(RACY_YIELD_MS)).await;
        for _ in 0..=PERSIST_ROUNDS_MAX {
            let granted = self.table().grant(self.mode, lock, &req.client, req.ttl_ms);
            match granted {
                Ok(token) => return Ok(token),
                Err(GrantBlocked::TooManyLocks) => {
                    return Err(ApiError::Unavailable("too-many-locks"))
                }
                Err(GrantBlocked::NeedPersist) => self.persist(req.ttl_ms).await?,
            }
        }
        Err(ApiError::Unavailable("persist-busy"))
    }

    async fn renew(self: &Arc<Self>, lock: &str, req: &RenewReq) -> Result<u64, ApiError> {
        for _ in 0..=PERSIST_ROUNDS_MAX {
            let renewed = self
                .table()
                .renew(self.mode, lock, &req.client, req.token, req.ttl_ms);
            match renewed {
                Ok(token) => return Ok(token),
                Err(RenewBlocked::NotHolder) => return Err(ApiError::Conflict("not-holder")),
                Err(RenewBlocked::NeedPersist) => self.persist(req.ttl_ms).await?,
            }
        }
        Err(ApiError::Unavailable("persist-busy"))
    }

    /// Makes the table's durable state cover one more grant or renew of `ttl_ms`.
    ///
    /// Runs in its own task: if the client hangs up, axum drops the handler future, and a
    /// write abandoned half-way would let the next writer race it on the temp file.
    async fn persist(self: &Arc<Self>, ttl_ms: u64) -> Result<(), ApiError> {
        let svc = Arc::clone(self);
        tokio::spawn(async move { svc.persist_now(ttl_ms).await })
            .await
            .unwrap_or_else(|e| {
                error!("state persist task failed: {e}");
                Err(ApiError::Internal("persist-failed"))
            })
    }

    async fn persist_now(&self, ttl_ms: u64) -> Result<(), ApiError> {
        let _gate = self.persist_gate.lock().await;
        let target = {
            let table = self.table();
            let mut target = table.durable;
            if self.mode != Some(UnsafeMode::ReuseTokens)
                && table.next_token >= target.reserved_token
            {
                target.reserved_token = table.next_token + TOKEN_BLOCK;
            }
            if ttl_ms > target.max_ttl_ms {
                target.max_ttl_ms = persisted_ttl_ms(ttl_ms);
            }
            if target == table.durable {
                return Ok(());
            }
            target
        };
        let dir = self.data_dir.clone();
        match tokio::task::spawn_blocking(move || persist::store(&dir, &target)).await {
            Ok(Ok(())) => {
                // Only the gate holder changes `durable`, so nothing newer can be overwritten.
                self.table().durable = target;
                Ok(())
            }
            Ok(Err(e)) => {
                error!("{e}; refusing grants that need it");
                Err(ApiError::Internal("persist-failed"))
            }
            Err(e) => {
                error!("state write task failed: {e}");
                Err(ApiError::Internal("persist-failed"))
            }
        }
    }
}

/// When a lease ends.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    Monotonic(Instant),
    /// `wall-clock` mode only.
    Wall(SystemTime),
    /// `no-ttl` mode only.
    Never,
}

impl Expiry {
    fn after(mode: Option<UnsafeMode>, ttl_ms: u64) -> Expiry {
        let ttl = Duration::from_millis(ttl_ms);
        match mode {
            Some(UnsafeMode::NoTtl) => Expiry::Never,
            Some(UnsafeMode::WallClock) => Expiry::Wall(SystemTime::now() + ttl),
            _ => Expiry::Monotonic(Instant::now() + ttl),
        }
    }

    fn is_alive(self) -> bool {
        match self {
            Expiry::Monotonic(at) => Instant::now() < at,
            Expiry::Wall(at) => SystemTime::now() < at,
            Expiry::Never => true,
        }
    }

    /// Whether the lease ended less than `grace` ago (or has not ended).
    fn within(self, grace: Duration) -> bool {
        match self {
            Expiry::Monotonic(at) => Instant::now() < at + grace,
            Expiry::Wall(at) => SystemTime::now() < at + grace,
            Expiry::Never => true,
        }
    }

    /// `None`: never expires.
    fn expires_in(self) -> Option<Duration> {
        match self {
            Expiry::Monotonic(at) => Some(at.saturating_duration_since(Instant::now())),
            Expiry::Wall(at) => Some(at.duration_since(SystemTime::now()).unwrap_or_default()),
            Expiry::Never => None,
        }
    }
}

#[derive(Debug)]
struct Holder {
    client: String,
    token: u64,
    expiry: Expiry,
    /// The ttl its expiry was last set with (`renew-grace` grants a quarter of it).
    ttl_ms: u64,
}

impl Holder {
    /// `renew-grace`: whether a late renew of this lease is still inside the grace period.
    fn in_grace(&self, client: &str, token: u64) -> bool {
        self.client == client
            && self.token == token
            && self.expiry.within(Duration::from_millis(self.ttl_ms / 4))
    }
}

#[derive(Debug)]
struct LockEntry {
    holder: Option<Holder>,
    /// `renew-grace` and `unchecked-release` only: the leases later grants replaced, newest
    /// last (at most [`LAPSED_MAX`]), which a late renew can still "renew" for a while, and a
    /// late release still "releases".
    lapsed: Vec<Holder>,
    /// Waiters hold clones, so a strong count above 1 means someone is waiting.
    released: Arc<Notify>,
}

impl LockEntry {
    fn new() -> Self {
        LockEntry {
            holder: None,
            lapsed: Vec::new(),
            released: Arc::new(Notify::new()),
        }
    }

    fn live_holder(&self) -> Option<&Holder> {
        self.holder.as_ref().filter(|h| h.expiry.is_alive())
    }

    /// Nothing to keep: no live lease, nobody waiting, no lapsed lease an unsafe mode recalls.
    fn is_idle(&self) -> bool {
        self.live_holder().is_none()
            && self.lapsed.is_empty()
            && Arc::strong_count(&self.released) == 1
    }
}

/// One token counter for all locks: unique and increasing per lock follows, and an idle
/// entry can be dropped without losing anything, which keeps the table bounded.
#[derive(Debug)]
struct LockTable {
    locks: HashMap<String, LockEntry>,
    next_token: u64,
    /// What the state file says. Safe modes only grant tokens below
    /// `durable.reserved_token` and ttls up to `durable.max_ttl_ms`.
    durable: DurableState,
    locks_max: usize,
}

enum AcquireStep {
    Granted(u64),
    Blocked(GrantBlocked),
    /// Wait for `released` or for `expires_in`, then try again.
    Held {
        released: Pin<Box<OwnedNotified>>,
        expires_in: Option<Duration>,
    },
    /// `racy` mode: the lock looked free; the caller yields, then grants regardless.
    RacyFree,
}

#[derive(Debug, PartialEq, Eq)]
enum GrantBlocked {
    NeedPersist,
    TooManyLocks,
}

#[derive(Debug, PartialEq, Eq)]
enum RenewBlocked {
    NotHolder,
    NeedPersist,
}

impl LockTable {
    fn new(next_token: u64, durable: DurableState, locks_max: usize) -> Self {
        assert!(next_token >= 1, "tokens are positive");
        LockTable {
            locks: HashMap::new(),
            next_token,
            durable,
            locks_max,
        }
    }

    fn try_acquire(
        &mut self,
        mode: Option<UnsafeMode>,
        lock: &str,
        client: &str,
        ttl_ms: u64,
    ) -> AcquireStep {
        if let Some(entry) = self.locks.get(lock) {
            if let Some(holder) = entry.live_holder() {
                // Created under the mutex: `notify_waiters` reaches a `Notified` from the
                // moment it exists, so a release right after we unlock is not missed.
                let released = Box::pin(Arc::clone(&entry.released).notified_owned());
                return AcquireStep::Held {
                    released,
                    expires_in: holder.expiry.expires_in(),
                };
            }
        }
        if mode == Some(UnsafeMode::Racy) {
            return AcquireStep::RacyFree;
        }
        match self.grant(mode, lock, client, ttl_ms) {
            Ok(token) => AcquireStep::Granted(token),
            Err(blocked) => AcquireStep::Blocked(blocked),
        }
    }

    /// Grants `lock` to `client`, replacing any holder: callers check it is free, except
    /// in `racy` mode.
    fn grant(
        &mut self,
        mode: Option<UnsafeMode>,
        lock: &str,
        client: &str,
        ttl_ms: u64,
    ) -> Result<u64, GrantBlocked> {
        if !self.locks.contains_key(lock) && !self.make_room() {
            return Err(GrantBlocked::TooManyLocks);
        }
        let tokens_durable =
            mode == Some(UnsafeMode::ReuseTokens) || self.next_token < self.durable.reserved_token;
        if !tokens_durable || ttl_ms > self.durable.max_ttl_ms {
            return Err(GrantBlocked::NeedPersist);
        }
        let token = self.next_token;
        self.next_token = token.checked_add(1).expect("u64 tokens do not run out");
        let entry = self
            .locks
            .entry(lock.to_owned())
            .or_insert_with(LockEntry::new);
        assert!(
            mode == Some(UnsafeMode::Racy) || entry.live_holder().is_none(),
            "granting a lock that is still held"
        );
        let replaced = entry.holder.replace(Holder {
            client: client.to_owned(),
            token,
            expiry: Expiry::after(mode, ttl_ms),
            ttl_ms,
        });
        if let (Some(UnsafeMode::RenewGrace | UnsafeMode::UncheckedRelease), Some(old)) =
            (mode, replaced)
        {
            if entry.lapsed.len() >= LAPSED_MAX {
                entry.lapsed.remove(0);
            }
            entry.lapsed.push(old);
        }
        Ok(token)
    }

    /// Returns the token to report.
    fn renew(
        &mut self,
        mode: Option<UnsafeMode>,
        lock: &str,
        client: &str,
        token: u64,
        ttl_ms: u64,
    ) -> Result<u64, RenewBlocked> {
        let skip_check = mode == Some(UnsafeMode::SkipTokenCheck);
        let ttl_durable = ttl_ms <= self.durable.max_ttl_ms;
        if mode == Some(UnsafeMode::RenewGrace) {
            if let Some(entry) = self.locks.get_mut(lock) {
                // The anti-pattern: a late renew inside the grace revives its own lapsed lease,
                // and one whose lock was granted meanwhile is answered from the lapsed record,
                // as if it still held the lock.
                if let Some(h) = entry.holder.as_mut().filter(|h| h.in_grace(client, token)) {
                    if !ttl_durable {
                        return Err(RenewBlocked::NeedPersist);
                    }
                    h.expiry = Expiry::after(mode, ttl_ms);
                    h.ttl_ms = ttl_ms;
                    return Ok(token);
                }
                if entry.lapsed.iter().any(|h| h.in_grace(client, token)) {
                    return Ok(token);
                }
            }
        }
        let holder = self
            .locks
            .get_mut(lock)
            .and_then(|e| e.holder.as_mut())
            .filter(|h| h.expiry.is_alive());
        let Some(holder) = holder else {
            // skip-token-check: anyone may "renew" a free lock; it stays free.
            return if skip_check {
                Ok(token)
            } else {
                Err(RenewBlocked::NotHolder)
            };
        };
        if !skip_check && (holder.client != client || holder.token != token) {
            return Err(RenewBlocked::NotHolder);
        }
        if !ttl_durable {
            return Err(RenewBlocked::NeedPersist);
        }
        holder.expiry = Expiry::after(mode, ttl_ms);
        holder.ttl_ms = ttl_ms;
        Ok(token)
    }

    /// Whether `client` holds a live lease on `lock` with `token`.
    fn holds(&self, lock: &str, client: &str, token: u64) -> bool {
        self.locks
            .get(lock)
            .and_then(LockEntry::live_holder)
            .is_some_and(|h| h.client == client && h.token == token)
    }

    /// `Err(())`: not the live holder.
    fn release(
        &mut self,
        mode: Option<UnsafeMode>,
        lock: &str,
        client: &str,
        token: u64,
    ) -> Result<(), ()> {
        let skip_check = mode == Some(UnsafeMode::SkipTokenCheck);
        let not_holder = if skip_check { Ok(()) } else { Err(()) };
        let Some(entry) = self.locks.get_mut(lock) else {
            return not_holder;
        };
        let holds = entry
            .live_holder()
            .is_some_and(|h| skip_check || (h.client == client && h.token == token));
        // The anti-pattern: the lapsed holder's release deletes the lock by name.
        let lapsed = entry
            .lapsed
            .iter()
            .position(|h| h.client == client && h.token == token)
            .filter(|_| mode == Some(UnsafeMode::UncheckedRelease));
        if !holds && lapsed.is_none() {
            return not_holder;
        }
        if let Some(i) = lapsed {
            entry.lapsed.remove(i);
        }
        entry.holder = None;
        entry.released.notify_waiters();
        if entry.is_idle() {
            self.locks.remove(lock);
        }
        Ok(())
    }

    /// Drops idle entries (free or expired, nobody waiting) once the table is full, so the
    /// bound only refuses clients when that many leases are really live.
    fn make_room(&mut self) -> bool {
        if self.locks.len() >= self.locks_max {
            self.locks.retain(|_, e| !e.is_idle());
        }
        self.locks.len() < self.locks_max
    }
}

#[derive(Deserialize)]
pub(crate) struct AcquireReq {
    pub(crate) client: String,
    pub(crate) ttl_ms: u64,
    #[serde(default)]
    pub(crate) wait_ms: u64,
}

#[derive(Deserialize)]
pub(crate) struct RenewReq {
    pub(crate) client: String,
    pub(crate) token: u64,
    pub(crate) ttl_ms: u64,
}

#[derive(Deserialize)]
pub(crate) struct ReleaseReq {
    pub(crate) client: String,
    pub(crate) token: u64,
}

/// An ok acquire's or renew's answer (docs/protocol.md): the grant's token and its lease.
pub(crate) fn answer_granted(token: u64, ttl_ms: u64) -> Response {
    Json(json!({ "token": token, "ttl_ms": ttl_ms })).into_response()
}

/// An ok release's answer: `{}`.
pub(crate) fn answer_released() -> Response {
    Json(json!({})).into_response()
}

/// A scheme whose member renews and releases in its own table, with no primary to relay to
/// (timestamp-ordered, ring): its renew and release routes are [`local_renew_handler`] and
/// [`local_release_handler`].
pub(crate) trait LocalLeases: Send + Sync + 'static {
    /// Extends the lease `req` names; the grant's token, or why not (`not-holder`).
    fn renew(&self, lock: &str, req: &RenewReq) -> Result<u64, ApiError>;
    /// Ends the lease `req` names, or says why not (`not-holder`).
    fn release(self: &Arc<Self>, lock: &str, req: &ReleaseReq) -> Result<(), ApiError>;
}

pub(crate) async fn local_renew_handler<L: LocalLeases>(
    State(leases): State<Arc<L>>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (lock, req): (String, RenewReq) = named_request("lock", path, &body)?;
    let token = leases.renew(&lock, &req)?;
    Ok(answer_granted(token, req.ttl_ms))
}

pub(crate) async fn local_release_handler<L: LocalLeases>(
    State(leases): State<Arc<L>>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (lock, req): (String, ReleaseReq) = named_request("lock", path, &body)?;
    leases.release(&lock, &req)?;
    Ok(answer_released())
}

impl ClientBody for AcquireReq {
    fn client(&self) -> &str {
        &self.client
    }
    fn ttl_ms(&self) -> Option<u64> {
        Some(self.ttl_ms)
    }
}

impl ClientBody for RenewReq {
    fn client(&self) -> &str {
        &self.client
    }
    fn ttl_ms(&self) -> Option<u64> {
        Some(self.ttl_ms)
    }
}

impl ClientBody for ReleaseReq {
    fn client(&self) -> &str {
        &self.client
    }
}

pub(crate) fn check_ttl(ttl_ms: u64) -> Result<(), ApiError> {
    if ttl_ms == 0 || ttl_ms > TTL_MS_MAX {
        return Err(ApiError::BadRequest(format!(
            "ttl_ms must be in 1..={TTL_MS_MAX}, got {ttl_ms}"
        )));
    }
    Ok(())
}

async fn acquire_handler(
    State(svc): State<Arc<Service>>,
    headers: HeaderMap,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (lock, mut req): (String, AcquireReq) = named_request("lock", path, &body)?;
    if let Route::Forward(fwd) = svc.route(&headers)? {
        let started = Instant::now();
        match svc.forward(fwd, &uri, body, req.wait_ms).await {
            Ok(resp) => return Ok(resp),
            Err(ForwardError::Unreachable(e)) if svc.split_brain() => {
                // The anti-pattern: the primary may be alive on the other side of a
                // partition, granting the same lock.
                warn!(
                    lock,
                    client = req.client,
                    "split-brain: primary unreachable ({e}); granting locally"
                );
                let waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                req.wait_ms = req.wait_ms.min(WAIT_MS_MAX).saturating_sub(waited_ms);
            }
            Err(e) => return Err(e.to_api()),
        }
    }
    assert!(
        svc.may_serve_locally(),
        "a correct non-primary never grants"
    );
    let token = svc.acquire(&lock, &req).await?;
    debug!(
        lock,
        client = req.client,
        token,
        ttl_ms = req.ttl_ms,
        "granted"
    );
    Ok(answer_granted(token, req.ttl_ms))
}

/// Relays renew and release unless this member granted the lease itself (split-brain only).
/// `Ok(None)`: serve locally.
async fn relay_unless_local(
    svc: &Service,
    headers: &HeaderMap,
    uri: &Uri,
    body: Bytes,
    (lock, client, token): (&str, &str, u64),
) -> Result<Option<Response>, ApiError> {
    let Route::Forward(fwd) = svc.route(headers)? else {
        assert!(
            svc.may_serve_locally(),
            "a correct non-primary never serves locally"
        );
        return Ok(None);
    };
    if svc.split_brain() && svc.table().holds(lock, client, token) {
        return Ok(None);
    }
    svc.forward(fwd, uri, body, 0)
        .await
        .map(Some)
        .map_err(|e| e.to_api())
}

async fn renew_handler(
    State(svc): State<Arc<Service>>,
    headers: HeaderMap,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (lock, req): (String, RenewReq) = named_request("lock", path, &body)?;
    let key = (lock.as_str(), req.client.as_str(), req.token);
    if let Some(relayed) = relay_unless_local(&svc, &headers, &uri, body, key).await? {
        return Ok(relayed);
    }
    let token = svc.renew(&lock, &req).await?;
    Ok(answer_granted(token, req.ttl_ms))
}

async fn release_handler(
    State(svc): State<Arc<Service>>,
    headers: HeaderMap,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (lock, req): (String, ReleaseReq) = named_request("lock", path, &body)?;
    let key = (lock.as_str(), req.client.as_str(), req.token);
    if let Some(relayed) = relay_unless_local(&svc, &headers, &uri, body, key).await? {
        return Ok(relayed);
    }
    let released = svc.table().release(svc.mode, &lock, &req.client, req.token);
    match released {
        Ok(()) => {
            debug!(lock, client = req.client, token = req.token, "released");
            Ok(answer_released())
        }
        Err(()) => Err(ApiError::Conflict("not-holder")),
    }
}

/// Names the member whose table decided; a relayed answer already carries the primary's.
async fn add_node_header(State(node): State<HeaderValue>, mut resp: Response) -> Response {
    resp.headers_mut()
        .entry(crate::cluster::NODE_HEADER)
        .or_insert(node);
    resp
}

/// Lets the harness estimate this node's clock offset and rate against its own.
async fn time_handler() -> Result<Json<Value>, ApiError> {
    // Before-epoch (a clock set far back on purpose) reports 0 rather than failing.
    let realtime_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_err(|e| {
        error!("clock_gettime(CLOCK_MONOTONIC) failed: {e}");
        ApiError::Internal("clock-failed")
    })?;
    let monotonic_ms = u64::try_from(mono.tv_sec()).unwrap_or(0) * 1000
        + u64::try_from(mono.tv_nsec()).unwrap_or(0) / 1_000_000;
    Ok(Json(
        json!({ "realtime_ms": realtime_ms, "monotonic_ms": monotonic_ms }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(locks_max: usize) -> LockTable {
        let durable = DurableState {
            reserved_token: 1 + TOKEN_BLOCK,
            max_ttl_ms: 1024,
            ..DurableState::fresh()
        };
        LockTable::new(1, durable, locks_max)
    }

    fn granted(step: AcquireStep) -> u64 {
        match step {
            AcquireStep::Granted(t) => t,
            _ => panic!("expected a grant"),
        }
    }

    #[test]
    fn full_table_drops_idle_entries_before_refusing() {
        let mut t = table(2);
        granted(t.try_acquire(None, "a", "p1", 1000));
        granted(t.try_acquire(None, "b", "p1", 1000));
        assert_eq!(
            t.grant(None, "c", "p1", 1000),
            Err(GrantBlocked::TooManyLocks)
        );
        assert_eq!(t.release(None, "a", "p1", 1), Ok(()));
        // The release removed the idle entry, so there is room again.
        assert_eq!(t.grant(None, "c", "p1", 1000), Ok(3));
        assert_eq!(t.locks.len(), 2);
    }

    #[test]
    fn grants_stop_at_the_durable_marks() {
        let mut t = table(10);
        t.durable.reserved_token = 3;
        assert_eq!(t.grant(None, "a", "p1", 1000), Ok(1));
        assert_eq!(t.grant(None, "b", "p1", 1000), Ok(2));
        assert_eq!(
            t.grant(None, "c", "p1", 1000),
            Err(GrantBlocked::NeedPersist)
        );
        t.durable.reserved_token = 100;
        assert_eq!(
            t.grant(None, "c", "p1", 2000),
            Err(GrantBlocked::NeedPersist)
        );
        assert_eq!(
            t.renew(None, "a", "p1", 1, 2000),
            Err(RenewBlocked::NeedPersist)
        );
        // reuse-tokens ignores the token mark but not the ttl mark.
        t.durable.reserved_token = 1;
        assert_eq!(
            t.grant(Some(UnsafeMode::ReuseTokens), "c", "p1", 1000),
            Ok(3)
        );
    }

    #[test]
    fn renew_grace_answers_a_late_renew_after_the_next_grant() {
        let grace = Some(UnsafeMode::RenewGrace);
        for mode in [None, grace] {
            let mut t = table(10);
            assert_eq!(t.grant(mode, "a", "p1", 200), Ok(1));
            std::thread::sleep(Duration::from_millis(210));
            // Lapsed, nobody else granted: only the grace revives it.
            assert_eq!(t.renew(mode, "a", "p1", 1, 200).is_ok(), mode == grace);
            std::thread::sleep(Duration::from_millis(210));
            assert_eq!(granted(t.try_acquire(mode, "a", "p2", 1000)), 2);
            // Granted to p2 just now: the late renew is refused, except by the anti-pattern.
            let late = t.renew(mode, "a", "p1", 1, 200);
            assert_eq!(late.is_ok(), mode == grace, "{mode:?}");
            assert!(t.holds("a", "p2", 2), "the new holder keeps the lock");
            // Past the grace, refused either way.
            std::thread::sleep(Duration::from_millis(60));
            assert_eq!(
                t.renew(mode, "a", "p1", 1, 200),
                Err(RenewBlocked::NotHolder)
            );
        }
    }

    #[test]
    fn unchecked_release_frees_the_next_holders_lock() {
        let unchecked = Some(UnsafeMode::UncheckedRelease);
        for mode in [None, unchecked] {
            let mut t = table(10);
            assert_eq!(t.grant(mode, "a", "p1", 20), Ok(1));
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!(granted(t.try_acquire(mode, "a", "p2", 1000)), 2);
            let late = t.release(mode, "a", "p1", 1);
            assert_eq!(late.is_ok(), mode == unchecked, "{mode:?}");
            assert_eq!(t.holds("a", "p2", 2), mode.is_none(), "{mode:?}");
            // Once only, and never for a client that held no lease here.
            assert_eq!(t.release(mode, "a", "p1", 1), Err(()));
            assert_eq!(t.release(mode, "a", "p9", 1), Err(()));
        }
    }

    #[test]
    fn persisted_ttl_rounds_up_within_the_limit() {
        assert_eq!(persisted_ttl_ms(1), 1);
        assert_eq!(persisted_ttl_ms(300), 512);
        assert_eq!(persisted_ttl_ms(2048), 2048);
        assert_eq!(persisted_ttl_ms(TTL_MS_MAX), TTL_MS_MAX);
    }
}
