//! The token-ring lockd cluster: one token goes round the members, and a member grants to its
//! own clients only while it holds it, the textbook's third design beside the coordinator and
//! timestamp ordering.
//!
//! - The members, sorted by address, form the ring; each passes the token to the next
//!   (`POST /v1/peer/token`). At the first start the first member makes the token and marks its
//!   data dir, so a restarted member never makes a second one.
//! - An acquire waits for the token (at least [`TOKEN_WAIT_MS_MIN`], whatever its `wait_ms`:
//!   without the token a member cannot tell a free lock from one held elsewhere).
//! - A visit: when the token arrives, the member grants its clients' waiting acquires (each
//!   lock to one client) during the first `idle_ms` of the visit; then it grants no more, and
//!   passes the token on once every lease it granted has ended (released, or expired by its
//!   own monotonic clock). A member with nobody waiting passes it on after `idle_ms`, so an
//!   idle ring keeps the token going round, as the textbook's does.
//! - The token carries the highest fencing token granted under it: a grant takes one above,
//!   so tokens increase around the ring.
//! - A pass is acknowledged. One that is not (the next member is down, paused or cut off) is
//!   sent again, to the same member, with the same pass number, until it is: a member that
//!   took a pass already answers a copy without taking it twice. While a pass is unanswered
//!   the sender grants nothing (the next member may hold the token already).
//!
//! Like the textbook's ring it is not fault tolerant: a kill of the member holding the token
//! loses it, and nobody is granted anything again (every acquire waits out its `wait_ms` and
//! is answered `held`, naming how long the token has not been seen). The `ring-regenerate`
//! anti-pattern "repairs" that with a timeout: a member that has not seen the token for
//! [`REGENERATE_AFTER_MS`] makes a new one, without asking anyone. A pause or a partition
//! longer than that leaves two tokens, and two members grant the same lock at once.

use std::collections::{HashMap, VecDeque};
use std::path::Path as FsPath;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{watch, Notify};
use tracing::{debug, info, warn};

use crate::cluster::member_client;
use crate::error::LockdError;
use crate::http::{named_request, parse_body, ApiError};
use crate::service::{
    answer_granted, local_release_handler, local_renew_handler, AcquireReq, LocalLeases,
    ReleaseReq, RenewReq, WAIT_MS_MAX, WAIT_ROUNDS_MAX,
};

/// How the ring runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingOrder {
    /// How long a visit grants: the token's arrival plus this. A member with nobody waiting
    /// keeps the token this long before it passes it on.
    pub idle_ms: u64,
}

/// The visit of `ring` without a length: short, so an idle ring costs a few hundred small
/// messages a second, and a waiting client's acquire is answered within a round.
pub const DEFAULT_IDLE_MS: u64 = 5;
/// Longer visits would make a round of the ring longer than any wait a client asks for.
pub(crate) const IDLE_MS_MAX: u64 = 1_000;
/// The least an acquire waits for the token, whatever its `wait_ms`: many rounds of an idle
/// ring, and well inside a client's request timeout.
pub const TOKEN_WAIT_MS_MIN: u64 = 250;
/// A pass not acknowledged within this is sent again.
const PASS_TIMEOUT_MS: u64 = 500;
/// Between two sends of an unacknowledged pass.
const PASS_RETRY_MS: u64 = 50;
/// Sends of one pass before the sender gives up on it (about 40 minutes of an unreachable
/// next member): the token is then lost, as it is when its holder dies, and the log says so.
const PASS_ATTEMPTS_MAX: u32 = 5_000;
/// `ring-regenerate`: a member that has not seen the token this long makes a new one. A fixed
/// timeout, as the anti-pattern picks one: many idle rounds, and shorter than the pauses and
/// partitions a real cluster sees.
pub const REGENERATE_AFTER_MS: u64 = 2_000;
/// Passes remembered as taken, so a pass sent again is not taken twice.
const TAKEN_MAX: usize = 64;
/// Leases a member holds at once (one per lock).
const LEASES_MAX: usize = 10_000;
/// Backstop on the driver's sleep: it re-checks at least this often.
const DRIVE_SLICE_MS: u64 = 100;
/// Marks a data dir whose ring has started: its first member makes no token after a restart.
pub const RING_MARKER: &str = "ring-started";
/// The last pass a member took, written before it answers the pass: a member killed between
/// taking a pass and answering it is sent the same pass again, and after its restart it must
/// not take it a second time (its first incarnation may have granted under it).
const TAKEN_FILE: &str = "ring-taken";

/// The token as it goes round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Token {
    /// The member that made it: the first member, or (in `ring-regenerate`) one that made a
    /// new one.
    origin: usize,
    /// How many tokens `origin` has made before this one.
    generation: u64,
    /// Passes so far; a pass sent again carries the same number.
    pass: u64,
    /// The highest fencing token granted under it.
    max_token: u64,
}

impl Token {
    fn key(self) -> (usize, u64, u64) {
        (self.origin, self.generation, self.pass)
    }
}

#[derive(Debug)]
struct Lease {
    client: String,
    token: u64,
    expires: Instant,
}

/// Counts since start, for the log at shutdown and `GET /v1/ring`.
#[derive(Debug, Default, Clone, Copy, Serialize)]
struct Counts {
    /// Passes the next member acknowledged.
    passes: u64,
    /// Sends of a pass, the acknowledged ones and the rest.
    pass_sends: u64,
    grants: u64,
    /// Tokens made by `ring-regenerate`.
    regenerated: u64,
    /// Tokens that arrived while this member held one (only after a regeneration).
    merged: u64,
}

#[derive(Debug)]
struct RingState {
    token: Option<Token>,
    /// The token's arrival; grants end `idle_ms` later.
    visit_from: Instant,
    leases: HashMap<String, Lease>,
    /// The token's last arrival here (or making, or this member's start).
    seen_at: Instant,
    /// The pass being sent, until the next member acknowledges it.
    passing: bool,
    taken: VecDeque<(usize, u64, u64)>,
    /// Tokens this member has made.
    made: u64,
    /// The highest fencing token this member has seen in a token.
    max_token: u64,
    counts: Counts,
}

impl RingState {
    /// Drops the leases that ended; whether any is still live.
    fn live_leases(&mut self, now: Instant) -> bool {
        self.leases.retain(|_, l| now < l.expires);
        !self.leases.is_empty()
    }

    fn take(&mut self, t: Token, now: Instant) {
        if self.taken.len() >= TAKEN_MAX {
            self.taken.pop_front();
        }
        self.taken.push_back(t.key());
        self.max_token = self.max_token.max(t.max_token);
        match &mut self.token {
            Some(held) => {
                // Only after a regeneration: two tokens meet here and go on as one.
                held.max_token = held.max_token.max(t.max_token);
                self.counts.merged += 1;
            }
            None => {
                self.token = Some(t);
                self.visit_from = now;
            }
        }
        self.seen_at = now;
    }
}

/// A member of the ring.
pub(crate) struct Ring {
    order: RingOrder,
    /// `ring-regenerate`.
    regenerate: bool,
    me: usize,
    /// `http://host:port` of the next member; `None` alone in the ring.
    next: Option<String>,
    http: reqwest::Client,
    state: Mutex<RingState>,
    changed: Notify,
    stopping: watch::Receiver<bool>,
    /// Where the last pass taken is written.
    taken_path: std::path::PathBuf,
}

impl Ring {
    /// `me` is this member's address, `members` every member's (itself included), sorted:
    /// the ring goes round in that order. The first member makes the token unless `data_dir`
    /// says the ring started before (a restart).
    pub(crate) fn new(
        order: RingOrder,
        regenerate: bool,
        me: &str,
        members: &[&str],
        data_dir: &FsPath,
        stopping: watch::Receiver<bool>,
    ) -> Result<Ring, LockdError> {
        if order.idle_ms == 0 || order.idle_ms > IDLE_MS_MAX {
            return Err(LockdError::InvalidCluster {
                reason: format!("ring idle {} ms, expected 1..={IDLE_MS_MAX}", order.idle_ms),
            });
        }
        let me_id = members
            .iter()
            .position(|m| *m == me)
            .expect("members holds me");
        let next = (members.len() > 1).then(|| {
            let n = members[(me_id + 1) % members.len()];
            format!("http://{n}")
        });
        std::fs::create_dir_all(data_dir).map_err(|source| LockdError::CreateDataDir {
            path: data_dir.to_owned(),
            source,
        })?;
        let first_start = me_id == 0 && first_start(data_dir)?;
        let taken_path = data_dir.join(TAKEN_FILE);
        let taken: VecDeque<(usize, u64, u64)> = last_taken(&taken_path).into_iter().collect();
        let now = Instant::now();
        let token = first_start.then_some(Token {
            origin: 0,
            generation: 0,
            pass: 0,
            max_token: 0,
        });
        Ok(Ring {
            order,
            regenerate,
            me: me_id,
            next,
            http: member_client(PASS_TIMEOUT_MS, "ring")?,
            state: Mutex::new(RingState {
                token,
                visit_from: now,
                leases: HashMap::new(),
                seen_at: now,
                passing: false,
                taken,
                made: u64::from(first_start),
                max_token: 0,
                counts: Counts::default(),
            }),
            changed: Notify::new(),
            stopping,
            taken_path,
        })
    }

    /// Whether this member made the ring's token at start.
    pub(crate) fn made_token(&self) -> bool {
        self.state().token.is_some()
    }

    pub(crate) fn routes(self: Arc<Self>) -> Router {
        Router::new()
            .route("/v1/locks/{lock}/acquire", post(acquire_handler))
            .route("/v1/locks/{lock}/renew", post(local_renew_handler::<Ring>))
            .route(
                "/v1/locks/{lock}/release",
                post(local_release_handler::<Ring>),
            )
            .route("/v1/peer/token", post(peer_token_handler))
            .route("/v1/ring", get(ring_handler))
            .route("/v1/ring/token", get(token_handler))
            .with_state(self)
    }

    fn state(&self) -> MutexGuard<'_, RingState> {
        self.state.lock().expect("ring state mutex poisoned")
    }

    fn visit_end(&self, s: &RingState) -> Instant {
        s.visit_from + Duration::from_millis(self.order.idle_ms)
    }

    /// Passes the token on when its visit is over, and (`ring-regenerate`) makes one when it
    /// has not been seen for too long; until the server stops.
    pub(crate) async fn drive(self: Arc<Self>) {
        let mut stopping = self.stopping.clone();
        // Ends with the server: each round sleeps until the next thing to do or the backstop.
        while !*stopping.borrow() {
            let changed = self.changed.notified();
            let now = Instant::now();
            let (pass, wake) = {
                let mut s = self.state();
                let live = s.live_leases(now);
                self.regenerate_if_lost(&mut s, now);
                self.next_step(&mut s, live, now)
            };
            if let Some(t) = pass {
                self.pass(t).await;
                continue;
            }
            let slice = Duration::from_millis(DRIVE_SLICE_MS);
            let sleep = wake.saturating_duration_since(Instant::now()).min(slice);
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep(sleep) => {}
                _ = stopping.changed() => {}
            }
        }
        let c = self.state().counts;
        info!(
            passes = c.passes,
            pass_sends = c.pass_sends,
            grants = c.grants,
            regenerated = c.regenerated,
            merged = c.merged,
            "ring member stopped"
        );
    }

    /// `ring-regenerate` only: makes a new token when none has been seen here for
    /// [`REGENERATE_AFTER_MS`] and none is on its way out.
    fn regenerate_if_lost(&self, s: &mut RingState, now: Instant) {
        if s.token.is_none() && !s.passing && self.regenerate {
            let since = now.duration_since(s.seen_at);
            if since >= Duration::from_millis(REGENERATE_AFTER_MS) {
                let t = Token {
                    origin: self.me,
                    generation: s.made,
                    pass: 0,
                    max_token: s.max_token,
                };
                warn!(
                    generation = s.made,
                    "ring-regenerate: no token for {} ms; making a new one",
                    since.as_millis()
                );
                s.made += 1;
                s.counts.regenerated += 1;
                s.token = Some(t);
                s.visit_from = now;
                s.seen_at = now;
                self.changed.notify_waiters();
            }
        }
    }

    /// What the driver does next: pass the token on now (taken out of `s`: the visit is over
    /// and no lease is `live`), or wake at the end of the leases, the visit or the wait for a
    /// lost token.
    fn next_step(&self, s: &mut RingState, live: bool, now: Instant) -> (Option<Token>, Instant) {
        match s.token {
            Some(t) if !live && now >= self.visit_end(s) => {
                s.token = None;
                s.passing = true;
                (Some(t), now)
            }
            Some(_) => {
                let lease_end = s.leases.values().map(|l| l.expires).min();
                let at = if live {
                    lease_end.unwrap_or(now)
                } else {
                    self.visit_end(s)
                };
                (None, at)
            }
            None => (None, s.seen_at + Duration::from_millis(REGENERATE_AFTER_MS)),
        }
    }

    /// Hands `t` to the next member, sending again until it acknowledges.
    async fn pass(&self, mut t: Token) {
        t.pass += 1;
        let Some(next) = &self.next else {
            // Alone in the ring: the token comes straight back.
            let mut s = self.state();
            s.passing = false;
            s.counts.passes += 1;
            s.take(t, Instant::now());
            drop(s);
            self.changed.notify_waiters();
            return;
        };
        let url = format!("{next}/v1/peer/token");
        for attempt in 0..PASS_ATTEMPTS_MAX {
            if *self.stopping.borrow() {
                // Stopping: the token goes with this member, as it would in a crash.
                self.state().passing = false;
                return;
            }
            self.state().counts.pass_sends += 1;
            let sent = self
                .http
                .post(&url)
                .timeout(Duration::from_millis(PASS_TIMEOUT_MS))
                .json(&t)
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => {
                    let mut s = self.state();
                    s.passing = false;
                    s.counts.passes += 1;
                    s.max_token = s.max_token.max(t.max_token);
                    return;
                }
                Ok(r) => warn!(next, attempt, "the token was refused: {}", r.status()),
                Err(e) if attempt == 0 || attempt % 100 == 0 => {
                    warn!(next, attempt, "the token was not acknowledged: {e}");
                }
                Err(e) => debug!(next, attempt, "the token was not acknowledged: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(PASS_RETRY_MS)).await;
        }
        warn!(next, "gave up passing the token: it is lost");
        self.state().passing = false;
    }

    async fn acquire(&self, lock: &str, req: &AcquireReq) -> Result<u64, ApiError> {
        // Without the token a member cannot tell a free lock from one held at another member:
        // every acquire waits for the token a little, even one that asked not to wait.
        let wait_ms = req.wait_ms.clamp(TOKEN_WAIT_MS_MIN, WAIT_MS_MAX);
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let mut stopping = self.stopping.clone();
        for _ in 0..WAIT_ROUNDS_MAX {
            let changed = self.changed.notified();
            let now = Instant::now();
            let unseen_ms = {
                let mut s = self.state();
                s.live_leases(now);
                let open = now < self.visit_end(&s) && !s.leases.contains_key(lock);
                if open && s.token.is_some() {
                    if s.leases.len() >= LEASES_MAX {
                        return Err(ApiError::Unavailable("too-many-locks"));
                    }
                    let token = s.token.as_ref().map_or(0, |t| t.max_token) + 1;
                    if let Some(t) = s.token.as_mut() {
                        t.max_token = token;
                    }
                    s.max_token = s.max_token.max(token);
                    s.counts.grants += 1;
                    s.leases.insert(
                        lock.to_owned(),
                        Lease {
                            client: req.client.clone(),
                            token,
                            expires: now + Duration::from_millis(req.ttl_ms),
                        },
                    );
                    return Ok(token);
                }
                if s.token.is_some() {
                    None
                } else {
                    Some(
                        u64::try_from(now.duration_since(s.seen_at).as_millis())
                            .unwrap_or(u64::MAX),
                    )
                }
            };
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                let detail = match unseen_ms {
                    Some(ms) => format!("the ring's token was last here {ms} ms ago"),
                    None => "the token is here and the lock is held by a client of this member"
                        .to_string(),
                };
                return Err(ApiError::ConflictWith {
                    code: "held",
                    detail,
                });
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep(left.min(Duration::from_millis(DRIVE_SLICE_MS))) => {}
                _ = stopping.changed() => return Err(ApiError::Unavailable("shutting-down")),
            }
        }
        Err(ApiError::Conflict("held"))
    }
}

impl LocalLeases for Ring {
    fn renew(&self, lock: &str, req: &RenewReq) -> Result<u64, ApiError> {
        let now = Instant::now();
        let mut s = self.state();
        match s.leases.get_mut(lock) {
            Some(l) if l.client == req.client && l.token == req.token && now < l.expires => {
                l.expires = now + Duration::from_millis(req.ttl_ms);
                Ok(req.token)
            }
            _ => Err(ApiError::Conflict("not-holder")),
        }
    }

    fn release(self: &Arc<Self>, lock: &str, req: &ReleaseReq) -> Result<(), ApiError> {
        let now = Instant::now();
        let mut s = self.state();
        match s.leases.get(lock) {
            Some(l) if l.client == req.client && l.token == req.token && now < l.expires => {
                s.leases.remove(lock);
                drop(s);
                self.changed.notify_waiters();
                Ok(())
            }
            _ => Err(ApiError::Conflict("not-holder")),
        }
    }
}

/// Whether the ring starts here for the first time (no marker yet); writes the marker.
fn first_start(data_dir: &FsPath) -> Result<bool, LockdError> {
    let marker = data_dir.join(RING_MARKER);
    if marker.exists() {
        return Ok(false);
    }
    std::fs::write(&marker, b"the ring's token was made here\n").map_err(|source| {
        LockdError::CreateDataDir {
            path: marker.clone(),
            source,
        }
    })?;
    Ok(true)
}

/// The pass written by the previous incarnation, if any (and readable).
fn last_taken(path: &FsPath) -> Option<(usize, u64, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut it = text.split_whitespace().map(str::parse::<u64>);
    let (Some(Ok(o)), Some(Ok(g)), Some(Ok(p))) = (it.next(), it.next(), it.next()) else {
        return None;
    };
    Some((usize::try_from(o).ok()?, g, p))
}

async fn acquire_handler(
    State(r): State<Arc<Ring>>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (lock, req): (String, AcquireReq) = named_request("lock", path, &body)?;
    let token = r.acquire(&lock, &req).await?;
    debug!(lock, client = req.client, token, "granted");
    Ok(answer_granted(token, req.ttl_ms))
}

/// The previous member hands the token on; a pass taken already is acknowledged again.
async fn peer_token_handler(
    State(r): State<Arc<Ring>>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let t: Token = parse_body(&body)?;
    let taken = {
        let mut s = r.state();
        if s.taken.contains(&t.key()) {
            true
        } else {
            // Written before the answer, so a restart remembers it (a plain write: what a
            // kill -9 leaves in the page cache survives it).
            let (origin, generation, pass) = t.key();
            let line = format!("{origin} {generation} {pass}\n");
            if let Err(e) = std::fs::write(&r.taken_path, line) {
                warn!("cannot record the pass taken: {e}; refusing it");
                return Err(ApiError::Unavailable("persist-failed"));
            }
            s.take(t, Instant::now());
            false
        }
    };
    if !taken {
        r.changed.notify_waiters();
    }
    Ok(Json(json!({ "taken_before": taken })))
}

/// What this member has done, and whether it holds the token now.
async fn ring_handler(State(r): State<Arc<Ring>>) -> Json<serde_json::Value> {
    let s = r.state();
    Json(json!({
        "member": r.me,
        "holds_token": s.token.is_some(),
        "counts": s.counts,
    }))
}

/// 200 while this member holds the token, 404 `no-token` otherwise: where a fault aimed at the
/// token's holder finds it.
async fn token_handler(State(r): State<Arc<Ring>>) -> Result<Json<serde_json::Value>, ApiError> {
    let s = r.state();
    match s.token {
        Some(t) => Ok(Json(json!({ "pass": t.pass, "max_token": t.max_token }))),
        None => Err(ApiError::NotFoundCode("no-token")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> RingState {
        let now = Instant::now();
        RingState {
            token: None,
            visit_from: now,
            leases: HashMap::new(),
            seen_at: now,
            passing: false,
            taken: VecDeque::new(),
            made: 0,
            max_token: 0,
            counts: Counts::default(),
        }
    }

    #[test]
    fn two_tokens_that_meet_go_on_as_one_above_both() {
        let mut s = state();
        let now = Instant::now();
        let a = Token {
            origin: 0,
            generation: 0,
            pass: 4,
            max_token: 9,
        };
        let b = Token {
            origin: 2,
            generation: 0,
            pass: 1,
            max_token: 12,
        };
        s.take(a, now);
        s.take(b, now);
        assert_eq!(s.token.map(|t| t.max_token), Some(12));
        assert_eq!(s.counts.merged, 1);
        assert!(s.taken.contains(&a.key()) && s.taken.contains(&b.key()));
    }

    #[test]
    fn the_last_pass_taken_is_read_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TAKEN_FILE);
        assert_eq!(last_taken(&path), None);
        std::fs::write(&path, "2 1 812\n").unwrap();
        assert_eq!(last_taken(&path), Some((2, 1, 812)));
        std::fs::write(&path, "2 x").unwrap();
        assert_eq!(last_taken(&path), None, "a torn file is no pass");
    }

    #[test]
    fn the_first_member_makes_the_token_only_on_its_first_start() {
        let dir = tempfile::tempdir().unwrap();
        assert!(first_start(dir.path()).unwrap());
        assert!(!first_start(dir.path()).unwrap(), "a restart makes none");
    }
}
