//! The timestamp-ordered lockd cluster: every member decides for its own clients, and the
//! members agree on who enters by exchanging timestamped requests, the textbook's
//! "the request with the smallest timestamp enters".
//!
//! The scheme is Lamport's mutual exclusion with physical timestamps, in its simplest form:
//!
//! - A member stamps a client's acquire with its own realtime clock in ticks of
//!   `granularity_ms` (never going back: a tick below the last one is raised to it), queues it,
//!   and sends it to every peer.
//! - A peer queues the request and answers once its own clock has passed the request's tick,
//!   naming its own requests still queued for that lock. Every request the peer stamps after
//!   that answer carries a later tick, so when all peers have answered the requester knows
//!   every request that can come before its own.
//! - The request enters when no known request of the lock comes before it: by (tick, member,
//!   seq) in the correct mode, by tick alone in `no-tiebreak`, where requests of equal ticks
//!   all enter together. A holder leaves the queue on release or when its lease ends, and its
//!   member tells every peer.
//! - Tokens come from a counter: one above the highest token this member has granted or heard
//!   of in a peer's release or answer, which in the correct mode includes every earlier holder.
//!
//! Like the textbook algorithm it is not fault tolerant: a member that does not answer blocks
//! every acquire (answered 503 `peer-unreachable`), a lost release message blocks the lock, and
//! nothing survives a restart.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{watch, Notify};
use tracing::{debug, info, warn};

use crate::cluster::member_client;
use crate::error::LockdError;
use crate::http::{check_name, named_request, parse_body, ApiError};
// Waits are bounded as in the primary mode: the same longest wait and backstop on wake-ups.
use crate::service::{
    answer_granted, local_release_handler, local_renew_handler, AcquireReq, LocalLeases,
    ReleaseReq, RenewReq, WAIT_MS_MAX, WAIT_ROUNDS_MAX,
};

/// A peer that takes longer to answer a request or a release is counted unreachable. Above
/// the longest granularity, which a peer may wait before it answers.
const PEER_TIMEOUT_MS: u64 = 2_000;
/// Tick lengths allowed: below 1 ms the clock reads are the limit; above 1 s nobody waits.
pub(crate) const GRANULARITY_MS_MAX: u64 = 1_000;
/// Queued requests per lock; more are refused with 503 `queue-full`.
const QUEUE_MAX: usize = 1_024;
/// Locks with a queue at once.
const LOCKS_MAX: usize = 10_000;
/// Releases remembered, so a request that arrives after its own release is not queued.
const RELEASED_MAX: usize = 4_096;

/// How the timestamp-ordered cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOrder {
    /// The length of one tick of the members' timestamps.
    pub granularity_ms: u64,
    /// `false` is the `no-tiebreak` anti-pattern: requests of equal ticks all enter.
    pub tiebreak: bool,
}

/// The granularity of `timestamp` without one: the textbook experiment's.
pub const DEFAULT_GRANULARITY_MS: u64 = 10;

/// One request as every member knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct ReqId {
    tick: u64,
    member: usize,
    seq: u64,
}

impl ReqId {
    /// Whether `self` enters before `other`.
    fn before(self, other: ReqId, tiebreak: bool) -> bool {
        if tiebreak {
            (self.tick, self.member, self.seq) < (other.tick, other.member, other.seq)
        } else {
            self.tick < other.tick
        }
    }
}

#[derive(Debug)]
struct Lease {
    client: String,
    token: u64,
    expires: Instant,
}

#[derive(Debug, Default)]
struct Queue {
    reqs: Vec<ReqId>,
    /// This member's holders of the lock, by request.
    leases: Vec<(ReqId, Lease)>,
}

#[derive(Debug, Default)]
struct Table {
    locks: HashMap<String, Queue>,
    next_seq: u64,
    last_tick: u64,
    max_token: u64,
    released: VecDeque<ReqId>,
}

impl Table {
    fn forget(&mut self, lock: &str, id: ReqId) {
        if let Some(q) = self.locks.get_mut(lock) {
            q.reqs.retain(|r| *r != id);
            q.leases.retain(|(r, _)| *r != id);
            if q.reqs.is_empty() && q.leases.is_empty() {
                self.locks.remove(lock);
            }
        }
        if self.released.len() >= RELEASED_MAX {
            self.released.pop_front();
        }
        self.released.push_back(id);
    }

    fn insert(&mut self, lock: &str, id: ReqId) -> Result<(), ApiError> {
        if self.released.contains(&id) {
            return Ok(());
        }
        if !self.locks.contains_key(lock) && self.locks.len() >= LOCKS_MAX {
            return Err(ApiError::Unavailable("too-many-locks"));
        }
        let q = self.locks.entry(lock.to_owned()).or_default();
        if q.reqs.contains(&id) {
            return Ok(());
        }
        if q.reqs.len() >= QUEUE_MAX {
            return Err(ApiError::Unavailable("queue-full"));
        }
        q.reqs.push(id);
        Ok(())
    }

    /// Whether no known request of `lock` comes before `id`.
    fn first(&self, lock: &str, id: ReqId, tiebreak: bool) -> bool {
        self.locks
            .get(lock)
            .is_none_or(|q| !q.reqs.iter().any(|r| r.before(id, tiebreak)))
    }

    /// This member's live lease of `client` with `token`, dropping leases that ended.
    fn lease_mut(&mut self, lock: &str, client: &str, token: u64) -> Option<&mut (ReqId, Lease)> {
        let now = Instant::now();
        self.locks.get_mut(lock).and_then(|q| {
            q.leases
                .iter_mut()
                .find(|(_, l)| l.client == client && l.token == token && now < l.expires)
        })
    }
}

/// A timestamp-ordered member.
pub(crate) struct Ordered {
    order: TimestampOrder,
    me: usize,
    /// `http://host:port` of every other member.
    peers: Vec<String>,
    http: reqwest::Client,
    table: Mutex<Table>,
    changed: Notify,
    stopping: watch::Receiver<bool>,
    /// Peer messages this member sent (requests and releases), the answers it got to them,
    /// and its grants: logged when it stops, for the designs' message counts.
    sent: AtomicU64,
    answered: AtomicU64,
    grants: AtomicU64,
}

#[derive(Serialize, Deserialize)]
struct PeerRequest {
    lock: String,
    id: ReqId,
}

#[derive(Serialize, Deserialize)]
struct PeerAnswer {
    /// The answering member's own requests still queued for the lock.
    pending: Vec<ReqId>,
    max_token: u64,
}

#[derive(Serialize, Deserialize)]
struct PeerRelease {
    lock: String,
    id: ReqId,
    token: u64,
}

fn realtime_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Ordered {
    /// `me` is this member's address, `members` every member's (itself included), sorted: a
    /// member's id is its place in that order.
    pub(crate) fn new(
        order: TimestampOrder,
        me: &str,
        members: &[&str],
        stopping: watch::Receiver<bool>,
    ) -> Result<Ordered, LockdError> {
        if order.granularity_ms == 0 || order.granularity_ms > GRANULARITY_MS_MAX {
            return Err(LockdError::InvalidCluster {
                reason: format!(
                    "timestamp granularity {} ms, expected 1..={GRANULARITY_MS_MAX}",
                    order.granularity_ms
                ),
            });
        }
        let me_id = members
            .iter()
            .position(|m| *m == me)
            .expect("members holds me");
        let http = member_client(PEER_TIMEOUT_MS, "peer")?;
        Ok(Ordered {
            order,
            me: me_id,
            peers: members
                .iter()
                .filter(|m| **m != me)
                .map(|m| format!("http://{m}"))
                .collect(),
            http,
            table: Mutex::new(Table::default()),
            changed: Notify::new(),
            stopping,
            sent: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            grants: AtomicU64::new(0),
        })
    }

    /// What this member did, for the log when it stops.
    pub(crate) fn log_counts(&self) {
        info!(
            peer_messages_sent = self.sent.load(Ordering::Relaxed),
            answers_received = self.answered.load(Ordering::Relaxed),
            grants = self.grants.load(Ordering::Relaxed),
            "timestamp member stopped"
        );
    }

    pub(crate) fn routes(self: Arc<Self>) -> Router {
        Router::new()
            .route("/v1/locks/{lock}/acquire", post(acquire_handler))
            .route(
                "/v1/locks/{lock}/renew",
                post(local_renew_handler::<Ordered>),
            )
            .route(
                "/v1/locks/{lock}/release",
                post(local_release_handler::<Ordered>),
            )
            .route("/v1/peer/request", post(peer_request_handler))
            .route("/v1/peer/release", post(peer_release_handler))
            .with_state(self)
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().expect("ordered table mutex poisoned")
    }

    fn now_tick(&self) -> u64 {
        realtime_ms() / self.order.granularity_ms
    }

    async fn post<T: Serialize>(&self, base: &str, path: &str, body: &T) -> Result<Bytes, String> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let resp = self
            .http
            .post(format!("{base}{path}"))
            .timeout(Duration::from_millis(PEER_TIMEOUT_MS))
            .json(body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("status {}", resp.status()));
        }
        self.answered.fetch_add(1, Ordering::Relaxed);
        resp.bytes().await.map_err(|e| e.to_string())
    }

    /// Tells every peer that `id` left the queue of `lock`; one attempt each, in the
    /// background (a lost release blocks the lock: the scheme is not fault tolerant).
    fn broadcast_release(self: &Arc<Self>, lock: &str, id: ReqId, token: u64) {
        let msg = Arc::new(PeerRelease {
            lock: lock.to_owned(),
            id,
            token,
        });
        for base in self.peers.clone() {
            let me = Arc::clone(self);
            let msg = Arc::clone(&msg);
            tokio::spawn(async move {
                if let Err(e) = me.post(&base, "/v1/peer/release", &*msg).await {
                    warn!(peer = base, "release not delivered: {e}");
                }
            });
        }
    }

    /// Leaves the queue: forgets `id` here and tells the peers.
    fn leave(self: &Arc<Self>, lock: &str, id: ReqId, token: u64) {
        self.table().forget(lock, id);
        self.changed.notify_waiters();
        self.broadcast_release(lock, id, token);
    }

    async fn acquire(self: &Arc<Self>, lock: &str, req: &AcquireReq) -> Result<u64, ApiError> {
        let deadline = Instant::now() + Duration::from_millis(req.wait_ms.min(WAIT_MS_MAX));
        let id = self.stamp(lock)?;
        self.ask_peers(lock, id).await?;
        let mut stopping = self.stopping.clone();
        for _ in 0..WAIT_ROUNDS_MAX {
            let changed = self.changed.notified();
            if let Some(token) = self.enter(lock, id, req) {
                return Ok(token);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.leave(lock, id, 0);
                return Err(ApiError::Conflict("held"));
            }
            tokio::select! {
                _ = changed => {}
                // Leases of other members end by their release message; this is a backstop.
                _ = tokio::time::sleep(left.min(Duration::from_millis(100))) => {}
                _ = stopping.changed() => {
                    self.leave(lock, id, 0);
                    return Err(ApiError::Unavailable("shutting-down"));
                }
            }
        }
        self.leave(lock, id, 0);
        Err(ApiError::Conflict("held"))
    }

    /// A new request for `lock`, stamped with this member's clock (never behind the last
    /// stamp) and queued here.
    fn stamp(&self, lock: &str) -> Result<ReqId, ApiError> {
        let mut t = self.table();
        let tick = self.now_tick().max(t.last_tick);
        t.last_tick = tick;
        t.next_seq += 1;
        let id = ReqId {
            tick,
            member: self.me,
            seq: t.next_seq,
        };
        t.insert(lock, id)?;
        Ok(id)
    }

    /// Every peer queues request `id` and answers once its clock passed the tick, with the
    /// requests it has pending and its highest token, which are merged here. A peer that does
    /// not answer withdraws the request: it could not be ordered.
    async fn ask_peers(self: &Arc<Self>, lock: &str, id: ReqId) -> Result<(), ApiError> {
        let msg = Arc::new(PeerRequest {
            lock: lock.to_owned(),
            id,
        });
        let mut asked = tokio::task::JoinSet::new();
        for base in self.peers.clone() {
            let me = Arc::clone(self);
            let msg = Arc::clone(&msg);
            asked.spawn(async move { me.post(&base, "/v1/peer/request", &*msg).await });
        }
        // One answer per peer: bounded by the number of peers.
        while let Some(joined) = asked.join_next().await {
            let answer = joined
                .map_err(|e| e.to_string())
                .and_then(|a| a)
                .and_then(|b| serde_json::from_slice::<PeerAnswer>(&b).map_err(|e| e.to_string()));
            match answer {
                Ok(ans) => {
                    let mut t = self.table();
                    t.max_token = t.max_token.max(ans.max_token);
                    for r in ans.pending {
                        // A full queue here only means the peer's request is not seen.
                        let _ = t.insert(lock, r);
                    }
                }
                Err(e) => {
                    warn!(lock, "a peer did not answer a request: {e}");
                    self.leave(lock, id, 0);
                    return Err(ApiError::Unavailable("peer-unreachable"));
                }
            }
        }
        Ok(())
    }

    /// Grants `lock` to request `id` if it is first in the order: the next token, and a lease
    /// of the request's ttl watched for its expiry. `None` while another request is first.
    fn enter(self: &Arc<Self>, lock: &str, id: ReqId, req: &AcquireReq) -> Option<u64> {
        let mut t = self.table();
        if !t.first(lock, id, self.order.tiebreak) {
            return None;
        }
        self.grants.fetch_add(1, Ordering::Relaxed);
        t.max_token += 1;
        let token = t.max_token;
        let lease = Lease {
            client: req.client.clone(),
            token,
            expires: Instant::now() + Duration::from_millis(req.ttl_ms),
        };
        t.locks
            .entry(lock.to_owned())
            .or_default()
            .leases
            .push((id, lease));
        drop(t);
        self.watch_lease(lock, id, token);
        Some(token)
    }

    /// Ends the lease of `id` when it expires unrenewed, so a crashed holder frees the lock.
    fn watch_lease(self: &Arc<Self>, lock: &str, id: ReqId, token: u64) {
        let me = Arc::clone(self);
        let lock = lock.to_owned();
        tokio::spawn(async move {
            // Each pass sleeps until the lease's current end; renewals move it, bounded by
            // the life of the lease (TTL_MS_MAX per renew) and ended by release.
            loop {
                let expires = {
                    let t = me.table();
                    let lease = t
                        .locks
                        .get(&lock)
                        .and_then(|q| q.leases.iter().find(|(r, _)| *r == id));
                    match lease {
                        None => return,
                        Some((_, l)) => l.expires,
                    }
                };
                if Instant::now() >= expires {
                    debug!(lock, token, "lease expired");
                    me.leave(&lock, id, token);
                    return;
                }
                tokio::time::sleep_until(expires.into()).await;
            }
        });
    }
}

impl LocalLeases for Ordered {
    fn renew(&self, lock: &str, req: &RenewReq) -> Result<u64, ApiError> {
        let mut t = self.table();
        let (_, lease) = t
            .lease_mut(lock, &req.client, req.token)
            .ok_or(ApiError::Conflict("not-holder"))?;
        lease.expires = Instant::now() + Duration::from_millis(req.ttl_ms);
        Ok(req.token)
    }

    fn release(self: &Arc<Self>, lock: &str, req: &ReleaseReq) -> Result<(), ApiError> {
        let id = {
            let mut t = self.table();
            let (id, _) = t
                .lease_mut(lock, &req.client, req.token)
                .ok_or(ApiError::Conflict("not-holder"))?;
            *id
        };
        self.leave(lock, id, req.token);
        Ok(())
    }
}

async fn acquire_handler(
    State(o): State<Arc<Ordered>>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (lock, req): (String, AcquireReq) = named_request("lock", path, &body)?;
    // In a task of its own: a client that hangs up (its timeout) drops this handler, and an
    // acquire abandoned mid-wait would stay queued at every member, blocking the lock for good.
    // Run to its end, it either withdraws at its deadline or is granted a lease that expires.
    let ttl_ms = req.ttl_ms;
    let (lock2, client) = (lock.clone(), req.client.clone());
    let token = tokio::spawn(async move { o.acquire(&lock2, &req).await })
        .await
        .map_err(|_| ApiError::Internal("acquire-task-failed"))??;
    debug!(lock, client, token, "granted");
    Ok(answer_granted(token, ttl_ms))
}

/// A peer's request: queued here, answered once this member's clock passed its tick, with
/// this member's own requests for the lock.
async fn peer_request_handler(
    State(o): State<Arc<Ordered>>,
    body: Bytes,
) -> Result<Json<PeerAnswer>, ApiError> {
    let msg: PeerRequest = parse_body(&body)?;
    check_name("lock", &msg.lock)?;
    o.table().insert(&msg.lock, msg.id)?;
    o.changed.notify_waiters();
    // Bounded: the tick is at most one granularity ahead of a clock like ours; a peer whose
    // clock runs far ahead is waited for at most GRANULARITY_MS_MAX + one tick.
    let wait_until_ms = (msg.id.tick + 1).saturating_mul(o.order.granularity_ms);
    let wait_ms = wait_until_ms
        .saturating_sub(realtime_ms())
        .min(GRANULARITY_MS_MAX + o.order.granularity_ms);
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    let mut t = o.table();
    // Later stamps of ours must come after the tick we now answer for.
    let tick = o.now_tick().max(t.last_tick).max(msg.id.tick + 1);
    t.last_tick = tick;
    let pending = t
        .locks
        .get(&msg.lock)
        .map(|q| {
            q.reqs
                .iter()
                .filter(|r| r.member == o.me)
                .copied()
                .collect()
        })
        .unwrap_or_default();
    Ok(Json(PeerAnswer {
        pending,
        max_token: t.max_token,
    }))
}

async fn peer_release_handler(
    State(o): State<Arc<Ordered>>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let msg: PeerRelease = parse_body(&body)?;
    check_name("lock", &msg.lock)?;
    {
        let mut t = o.table();
        t.max_token = t.max_token.max(msg.token);
        t.forget(&msg.lock, msg.id);
    }
    o.changed.notify_waiters();
    Ok(Json(json!({})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_enter_together_only_without_the_tiebreak() {
        let a = ReqId {
            tick: 7,
            member: 0,
            seq: 1,
        };
        let b = ReqId {
            tick: 7,
            member: 1,
            seq: 1,
        };
        let c = ReqId {
            tick: 8,
            member: 0,
            seq: 2,
        };
        let mut t = Table::default();
        for r in [a, b, c] {
            t.insert("L", r).unwrap();
        }
        assert!(t.first("L", a, true) && !t.first("L", b, true) && !t.first("L", c, true));
        assert!(t.first("L", a, false) && t.first("L", b, false) && !t.first("L", c, false));
        // A release that overtook its request keeps the request out.
        t.forget("L", a);
        t.insert("L", a).unwrap();
        assert!(t.first("L", b, true));
    }
}
