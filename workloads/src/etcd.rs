//! The etcd v3 adapter, over etcd's JSON gateway (`/v3/...` from 3.4 on, `/v3beta/...` on 3.3).
//!
//! - acquire: `lease/grant` with the ttl (etcd may raise it to its minimum: the granted TTL is
//!   the one recorded), then `lock/lock` on that lease, which waits up to the acquire wait while
//!   the lease is kept alive in the background (stopped while the client is stalled). A 200 is
//!   a grant, recorded `ok` always; with it go the answer's header revision, the lock key, and
//!   `kv/range` of the key *at that revision*: present (its `create_revision` is the fencing
//!   token), absent (etcd granted a lock whose key was already gone: `grant-without-key`),
//!   compacted, or unread. Also the lease evidence (`lease_last_ok_ns`, `lease_ttl_ms`), and
//!   `lease_from_ns`: the lease came before the grant, so it surely lasts its TTL only from the
//!   send of the last grant or keepalive etcd confirmed, not from the grant.
//! - renew: `lease/keepalive`; an answer without a TTL means the lease is gone.
//! - release: delete the lock key if it still carries the token's revision (a txn; etcd's
//!   `lock/unlock` succeeds on a key long gone), then `lease/revoke`.
//! - read / write: a `kv/txn` that compares the lock key's `create_revision` with the token, the
//!   fenced access in etcd's own terms; a write's `seq` is the revision it created (etcd's total
//!   order of writes).
//!
//! Gateway encodings: keys and values are base64, int64 fields are JSON strings, and fields at
//! their zero value are omitted (a missing `succeeded` is false).

use crate::api::{BoxFuture, FencedResource, Kept, LockClient, Wire};
use crate::client::{classify_error, snippet, Reply};
use crate::pause::PauseBoard;
use nemesis::Readiness;
use crate::service::{Connect, ConnectError, Launch, Service, ServiceOption, Settings};
use crate::Adapter;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use history::reason::with_detail;
use history::{Evidence, KeyState, LeaseEvidence, ReadBack};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::service::Clock;

/// What a client holds: etcd's handles for its lock.
#[derive(Debug, Clone)]
struct Held {
    lease_id: String,
    /// The lock key (base64), whose `create_revision` is the token.
    key_b64: String,
    token: u64,
}

/// Bounds the grants remembered: one per live grant of a client process; crashed processes' entries are
/// dropped past it (their leases lapse in etcd on their own).
const HELD_MAX: usize = 4096;

pub struct EtcdClient {
    http: reqwest::Client,
    /// `http://host:port/v3`
    api: String,
    op_timeout: Duration,
    now_ns: Clock,
    /// What each client holds, by client and token: a client may hold several locks at once
    /// (the bank's two accounts), each its own key and lease, and tokens (create revisions)
    /// are unique across keys.
    held: Kept<(String, u64), Held>,
}

/// An int64 field as the gateway sends it: a string, sometimes a number, omitted when zero.
fn int(v: &Value, field: &str) -> u64 {
    match v.get(field) {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

fn b64(s: &str) -> String {
    B64.encode(s.as_bytes())
}

/// The `message` (3.3: `error`) of an error answer.
/// An error status as a reason: etcd's own error (a JSON body with its `message` or `error`,
/// as the gateway answers while it has no leader or times out) is `unavailable: http-NNN`, an
/// answer etcd documents and faults cause; anything else is an unexpected `http-NNN`.
fn status_reason(status: u16, body: &[u8]) -> String {
    let own = serde_json::from_slice::<Value>(body).is_ok_and(|v| {
        v.get("message")
            .or_else(|| v.get("error"))
            .is_some_and(Value::is_string)
    });
    let code = if own {
        format!("unavailable: http-{status}")
    } else {
        format!("http-{status}")
    };
    with_detail(&code, &error_message(body))
}

fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .or_else(|| v.get("error"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| snippet(body))
}

/// What the keepalives sent while an acquire waits proved about its lease.
struct KeepAliveState {
    /// History time of the completion of the grant or the last keepalive etcd confirmed.
    confirmed_ns: AtomicU64,
    /// When that grant or keepalive was sent: it took effect no earlier, so the lease surely
    /// lasts its TTL from here (`lease_from_ns`).
    confirmed_from_ns: AtomicU64,
    /// A keepalive was sent and never answered: it may take effect whenever etcd gets to it.
    unresolved: AtomicBool,
    /// A keepalive is on its way right now.
    in_flight: AtomicBool,
    /// When a keepalive was first answered without a TTL (etcd no longer had the lease), or 0.
    gone_ns: AtomicU64,
}

impl KeepAliveState {
    fn new(sent_ns: u64, granted_ns: u64) -> Self {
        KeepAliveState {
            confirmed_ns: AtomicU64::new(granted_ns),
            confirmed_from_ns: AtomicU64::new(sent_ns),
            unresolved: AtomicBool::new(false),
            in_flight: AtomicBool::new(false),
            gone_ns: AtomicU64::new(0),
        }
    }

    /// `lease_last_ok_ns`: the latest instant a grant or keepalive of the lease could have
    /// taken effect before the acquire returned at `done_ns`. A keepalive still unanswered
    /// could have taken effect at any instant up to then.
    fn last_ok_ns(&self, done_ns: u64) -> u64 {
        if self.unresolved.load(Ordering::SeqCst) || self.in_flight.load(Ordering::SeqCst) {
            done_ns
        } else {
            self.confirmed_ns.load(Ordering::SeqCst)
        }
    }

    fn gone_ns(&self) -> Option<u64> {
        Some(self.gone_ns.load(Ordering::SeqCst)).filter(|g| *g > 0)
    }
}

impl EtcdClient {
    /// `base_url` is a member's client URL; `api_prefix` is `/v3` (3.4+) or `/v3beta` (3.3).
    pub fn new(
        base_url: &str,
        api_prefix: &str,
        op_timeout: Duration,
        now_ns: Clock,
    ) -> Result<EtcdClient, crate::ClientError> {
        let http = reqwest::Client::builder()
            .timeout(op_timeout)
            .connect_timeout(op_timeout)
            .no_proxy()
            .tcp_nodelay(true)
            .build()?;
        Ok(EtcdClient {
            http,
            api: format!("{}{}", base_url.trim_end_matches('/'), api_prefix),
            op_timeout,
            now_ns,
            held: Kept::new(HELD_MAX),
        })
    }

    /// The gateway's path prefix (`/v3`), as requests are named in the probe's transcript.
    fn api_path(&self) -> String {
        reqwest::Url::parse(&self.api)
            .map(|u| u.path().trim_end_matches('/').to_string())
            .unwrap_or_default()
    }

    /// One gateway request: the status and body once an answer arrived, else the Reply the
    /// transport error amounts to.
    async fn post(
        &self,
        path: &str,
        body: Value,
        timeout: Duration,
    ) -> Result<(u16, Vec<u8>), Reply> {
        let resp = self
            .http
            .post(format!("{}/{path}", self.api))
            .timeout(timeout)
            .json(&body)
            .send()
            .await
            .map_err(|e| classify_error(&e))?;
        let status = resp.status().as_u16();
        // The status arrived, so etcd acted (or refused); only the body was lost.
        let bytes = resp.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
        Ok((status, bytes))
    }

    /// One gateway call: Ok(body) on 200, else the Reply it amounts to (an error status is
    /// indeterminate, as is a 200 that cannot be read).
    async fn call(&self, path: &str, body: Value, timeout: Duration) -> Result<Value, Reply> {
        let (status, bytes) = self.post(path, body, timeout).await?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if status == 200 && v.is_object() => Ok(v),
            Ok(_) => Err(Reply::Info(status_reason(status, &bytes))),
            Err(_) => Err(Reply::Info(with_detail("bad-body", &snippet(&bytes)))),
        }
    }

    fn remember(&self, client: &str, held: Held) {
        self.held.keep((client.to_string(), held.token), held);
    }

    fn holding(&self, client: &str, token: u64) -> Option<Held> {
        self.held.get(&(client.to_string(), token))
    }

    fn forget(&self, client: &str, token: u64) {
        self.held.forget(&(client.to_string(), token));
    }

    /// Best effort: a lease we gave up on is revoked so its lock (if it was granted after all)
    /// is freed at once instead of at expiry. Its outcome changes nothing in the history.
    async fn abandon(&self, lease_id: &str) {
        let _ = self
            .call("lease/revoke", json!({ "ID": lease_id }), self.op_timeout)
            .await;
    }

    pub async fn acquire(&self, client: &str, lock: &str, ttl_ms: u64, wait_ms: u64) -> Reply {
        self.acquire_as(client, lock, ttl_ms, wait_ms, None).await
    }

    /// Acquire as client process `client`: `lease/grant`, then `lock/lock`, which waits for the
    /// lock until `wait_ms` after the acquire was sent (plus the call's own round trip: see
    /// [`EtcdClient::lock_call_timeout`]) while
    /// the lease is kept alive in the background every third of its TTL, as etcd's client
    /// library does. While `pauses` says this client is stalled (a client-pause), no keepalive
    /// is sent: a paused process's keepalives stop too.
    ///
    /// A 200 from `lock/lock` is a grant, recorded `ok` whatever is learnt afterwards. What is
    /// learnt is evidence about it: the lock key read at the revision the answer carries
    /// (`key_at_revision`: present, absent, compacted or unread; its `create_revision` is the
    /// token), the lease and its keepalives (`lease_last_ok_ns`, `lease_ttl_ms`).
    pub async fn acquire_as(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        let grant_sent_ns = (self.now_ns)();
        let (lease_id, granted_ttl_s) = match self.grant_lease(ttl_ms).await {
            Ok(lease) => lease,
            Err(r) => return r,
        };
        let keep = KeepAliveState::new(grant_sent_ns, (self.now_ns)());
        // lock/lock blocks while another client holds the lock; etcd does not renew the lease
        // meanwhile (its server-side session is orphaned at once), so the client does.
        let lock_call = self.post(
            "lock/lock",
            json!({ "name": b64(lock), "lease": lease_id }),
            self.lock_call_timeout(wait_ms, grant_sent_ns),
        );
        let keepalives = self.keep_alive(
            &lease_id,
            Duration::from_millis(granted_ttl_s * 1000 / 3),
            client,
            pauses,
            &keep,
        );
        let locked = tokio::select! {
            r = lock_call => r,
            never = keepalives => match never {},
        };
        let done_ns = (self.now_ns)();
        let body = match self.lock_answer(&lease_id, locked).await {
            Ok(body) => body,
            Err(r) => return r,
        };
        // Granted. From here on, nothing turns this answer into anything but ok.
        let lease_ttl_ms = granted_ttl_s * 1000;
        let mut value = Map::new();
        value.insert("ttl_ms".into(), json!(lease_ttl_ms));
        let lease = LeaseEvidence {
            lease_last_ok_ns: Some(keep.last_ok_ns(done_ns)),
            lease_ttl_ms: Some(lease_ttl_ms),
            // The lease came before the grant: it surely lasts its TTL from here, not from
            // the grant, which may find it about to lapse.
            lease_from_ns: Some(keep.confirmed_from_ns.load(Ordering::SeqCst)),
        };
        lease.write_into(&mut value);
        let lease_gone_ns = keep.gone_ns();
        EtcdEvidence { lease_gone_ns }.write_into(&mut value);
        self.read_back(client, lease_id, value, &body).await
    }

    /// How long `lock/lock` may run for an acquire sent at `sent_ns` that may wait `wait_ms`:
    /// etcd puts no bound of its own on the wait, so the client's deadline is the wait's
    /// bound, and it ends the wait when the acquire's `wait_ms` is over, as the history says
    /// it asked (`deadlock` owes a wait an answer by then, plus the liveness grace). Past it
    /// only the call's own round trip, at most [`LOCK_ROUND_TRIP_MAX`]: an op timeout of
    /// 3 s there let two waiters in a cycle stand past their deadline, a deadlock of the
    /// client's making.
    fn lock_call_timeout(&self, wait_ms: u64, sent_ns: u64) -> Duration {
        let spent = Duration::from_nanos((self.now_ns)().saturating_sub(sent_ns));
        Duration::from_millis(wait_ms).saturating_sub(spent) + self.op_timeout.min(LOCK_ROUND_TRIP_MAX)
    }

    /// `lease/grant` for a lease of `ttl_ms` (in whole seconds, at least one): its ID and the
    /// TTL etcd granted, in seconds. Any failure is a refusal: no lock was asked for yet, so
    /// whatever happened to the lease, no grant happened.
    async fn grant_lease(&self, ttl_ms: u64) -> Result<(String, u64), Reply> {
        let ttl_s = ttl_ms.div_ceil(1000).max(1);
        let grant = match self
            .call("lease/grant", json!({ "TTL": ttl_s }), self.op_timeout)
            .await
        {
            Ok(v) => v,
            Err(Reply::Info(e)) | Err(Reply::Fail(e)) => {
                return Err(Reply::Fail(format!("lease-grant: {e}")))
            }
            Err(r) => return Err(r),
        };
        let lease_id = match grant.get("ID") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(Reply::Fail("lease-grant: no lease ID".into())),
        };
        Ok((lease_id, int(&grant, "TTL").max(1)))
    }

    /// What `lock/lock` answered: its body when it granted the lock (a 200), else the reply
    /// for the acquire, with the lease revoked so nothing it may have been granted lingers.
    async fn lock_answer(
        &self,
        lease_id: &str,
        locked: Result<(u16, Vec<u8>), Reply>,
    ) -> Result<Vec<u8>, Reply> {
        let (status, body) = match locked {
            Ok(answer) => answer,
            // The lock may have been granted just as we gave up: indeterminate. Revoking the
            // lease frees it either way.
            Err(Reply::Info(e)) => {
                self.abandon(lease_id).await;
                return Err(Reply::Info(format!("lock: {e}")));
            }
            Err(Reply::Fail(e)) => {
                self.abandon(lease_id).await;
                return Err(Reply::Fail(format!("lock: {e}")));
            }
            Err(r) => return Err(r),
        };
        if status != 200 {
            self.abandon(lease_id).await;
            let why = format!("lock: {}", status_reason(status, &body));
            // The lock txn puts the key with the lease: on a lease etcd no longer has, nothing
            // was written, so nothing was granted.
            if why.contains("lease not found") {
                return Err(Reply::Fail(why));
            }
            return Err(Reply::Info(why));
        }
        Ok(body)
    }

    /// The evidence about a grant, added to its `value`: the lock key it names, the revision
    /// the answer carries and the key read at that revision, whose `create_revision` is the
    /// token. A grant with a token is remembered for its renew and release. Always `ok`.
    async fn read_back(
        &self,
        client: &str,
        lease_id: String,
        mut value: Map<String, Value>,
        body: &[u8],
    ) -> Reply {
        let mut read = ReadBack {
            lease_id: Some(lease_id.clone()),
            ..Default::default()
        };
        let answer = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
        let Some(key_b64) = answer
            .get("key")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            // A grant whose key we cannot name: nothing can be read back or fenced with it.
            tracing::warn!(answer = %snippet(body), "etcd lock/lock answered 200 without a key");
            read.write_into(&mut value);
            return Reply::Ok(Value::Object(value));
        };
        let revision = int(answer.get("header").unwrap_or(&Value::Null), "revision");
        let lock_key = B64
            .decode(&key_b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_else(|| key_b64.clone());
        let (state, token) = if revision == 0 {
            (KeyState::Unread, None)
        } else {
            self.key_at(&key_b64, revision).await
        };
        read.lock_key = Some(lock_key);
        read.answer_revision = Some(revision);
        read.key_at_revision = Some(state);
        read.write_into(&mut value);
        if let Some(token) = token {
            value.insert("token".into(), json!(token));
            self.remember(
                client,
                Held {
                    lease_id,
                    key_b64,
                    token,
                },
            );
        }
        // Without a token the grant is recorded all the same; the client cannot fence with it
        // and drops it, and its lease lapses on its own (revoking it here would end a grant
        // the history says is held, without a release in the history).
        Reply::Ok(Value::Object(value))
    }

    /// Keeps `lease_id` alive every `every` (etcd's client: a third of the TTL) until dropped,
    /// noting in `keep` what each keepalive proved. A stalled client sends nothing until its
    /// stall ends, then keeps alive at once, as an overdue timer fires after a pause.
    async fn keep_alive(
        &self,
        lease_id: &str,
        every: Duration,
        client: &str,
        pauses: Option<&PauseBoard>,
        keep: &KeepAliveState,
    ) -> std::convert::Infallible {
        let mut next = tokio::time::Instant::now() + every;
        // Bounded by the lock call it runs beside: dropped when that returns.
        loop {
            tokio::time::sleep_until(next).await;
            if let Some(until) = pauses.and_then(|p| p.stalled_until(client)) {
                tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
                continue;
            }
            keep.in_flight.store(true, Ordering::SeqCst);
            let sent = (self.now_ns)();
            let r = self
                .call(
                    "lease/keepalive",
                    json!({ "ID": lease_id }),
                    self.op_timeout,
                )
                .await;
            let now = (self.now_ns)();
            match r {
                Ok(v) if int(v.get("result").unwrap_or(&Value::Null), "TTL") > 0 => {
                    keep.confirmed_ns.store(now, Ordering::SeqCst);
                    keep.confirmed_from_ns.store(sent, Ordering::SeqCst);
                }
                // etcd answers 200 without a TTL for a lease it no longer has.
                Ok(_) => {
                    let _ =
                        keep.gone_ns
                            .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst);
                }
                // Refused before sending: it did nothing.
                Err(Reply::Fail(_)) => {}
                // It may take effect whenever etcd gets to it.
                Err(_) => keep.unresolved.store(true, Ordering::SeqCst),
            }
            keep.in_flight.store(false, Ordering::SeqCst);
            next = tokio::time::Instant::now() + every;
        }
    }

    /// Reads the lock key at `revision`: whether it existed there, and its create_revision
    /// (the token) if so.
    async fn key_at(&self, key_b64: &str, revision: u64) -> (KeyState, Option<u64>) {
        let created = |v: &Value| {
            v.get("kvs")
                .and_then(|k| k.get(0))
                .map(|kv| int(kv, "create_revision"))
                .filter(|c| *c > 0)
        };
        match self
            .call(
                "kv/range",
                json!({ "key": key_b64, "revision": revision.to_string() }),
                self.op_timeout,
            )
            .await
        {
            Ok(v) => match created(&v) {
                Some(c) => (KeyState::Present, Some(c)),
                None => (KeyState::Absent, None),
            },
            Err(Reply::Info(e)) if e.contains("compacted") => {
                // A key still there now, created at or before the revision, existed at it: a
                // key's create_revision changes only if it is deleted and put again.
                match self
                    .call("kv/range", json!({ "key": key_b64 }), self.op_timeout)
                    .await
                    .ok()
                    .as_ref()
                    .and_then(created)
                {
                    Some(c) if c <= revision => (KeyState::Present, Some(c)),
                    _ => (KeyState::Compacted, None),
                }
            }
            Err(_) => (KeyState::Unread, None),
        }
    }

    pub async fn renew(&self, client: &str, _lock: &str, token: u64, _ttl_ms: u64) -> Reply {
        let Some(held) = self.holding(client, token) else {
            return Reply::Fail("not-holder".into());
        };
        match self
            .call(
                "lease/keepalive",
                json!({ "ID": held.lease_id }),
                self.op_timeout,
            )
            .await
        {
            Ok(v) => {
                let ttl_s = int(v.get("result").unwrap_or(&Value::Null), "TTL");
                if ttl_s == 0 {
                    // etcd answers 200 without a TTL for a lease it no longer has.
                    self.forget(client, token);
                    Reply::Fail("not-holder".into())
                } else {
                    Reply::Ok(json!({ "token": token, "ttl_ms": ttl_s * 1000 }))
                }
            }
            Err(r) => r,
        }
    }

    pub async fn release(&self, client: &str, _lock: &str, token: u64) -> Reply {
        let Some(held) = self.holding(client, token) else {
            return Reply::Fail("not-holder".into());
        };
        // `lock/unlock` succeeds even when the key is long gone (the lease expired and someone
        // else holds the lock now), which would look like a stale release accepted. Deleting
        // the key only if it still carries our revision says truthfully whether we released.
        let op = json!({ "request_delete_range": { "key": held.key_b64 } });
        let r = self.fenced(client, token, json!([op])).await;
        self.forget(client, token);
        self.abandon(&held.lease_id).await;
        match r {
            Ok(_) => Reply::Ok(json!({})),
            Err(Reply::Fail(_)) => Reply::Fail("not-holder".into()),
            Err(r) => r,
        }
    }

    /// The fenced access: `ops` run only if the lock key still has the token's revision.
    async fn fenced(&self, client: &str, token: u64, ops: Value) -> Result<Value, Reply> {
        let Some(held) = self.holding(client, token) else {
            // Without the lock key there is nothing to compare: refused before sending.
            return Err(Reply::Fail("stale-token".into()));
        };
        let txn = json!({
            "compare": [{
                "target": "CREATE", "result": "EQUAL",
                "key": held.key_b64, "create_revision": token.to_string(),
            }],
            "success": ops,
        });
        let v = self.call("kv/txn", txn, self.op_timeout).await?;
        if v.get("succeeded").and_then(Value::as_bool) == Some(true) {
            Ok(v)
        } else {
            Err(Reply::Fail("stale-token".into()))
        }
    }

    pub async fn read(&self, client: &str, key: &str, token: u64) -> Reply {
        let ops = json!([{ "request_range": { "key": b64(key) } }]);
        match self.fenced(client, token, ops).await {
            Ok(v) => {
                let kv = v.pointer("/responses/0/response_range/kvs/0");
                let value = kv
                    .and_then(|kv| kv.get("value"))
                    .and_then(Value::as_str)
                    .and_then(|s| B64.decode(s).ok())
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.parse::<i64>().ok())
                    .unwrap_or(0);
                // The key's `version` numbers its writes 1, 2, ... (0: none, the key absent):
                // the number of the write this read returned.
                let seq = kv.map_or(0, |kv| int(kv, "version"));
                Reply::Ok(json!({ "value": value, "fence": token, "seq": seq }))
            }
            Err(r) => r,
        }
    }

    pub async fn write(&self, client: &str, key: &str, token: u64, value: i64) -> Reply {
        // The range after the put, in the same transaction, sees it: the key's new version is
        // this write's number.
        let ops = json!([
            { "request_put": { "key": b64(key), "value": b64(&value.to_string()) } },
            { "request_range": { "key": b64(key) } },
        ]);
        match self.fenced(client, token, ops).await {
            Ok(v) => {
                let mut body = json!({ "fence": token });
                let version = v
                    .pointer("/responses/1/response_range/kvs/0")
                    .map(|kv| int(kv, "version"))
                    .filter(|n| *n > 0);
                if let Some(n) = version {
                    body["seq"] = json!(n);
                }
                Reply::Ok(body)
            }
            Err(r) => r,
        }
    }

    /// The unfenced closing read.
    pub async fn inspect(&self, key: &str) -> Reply {
        match self
            .call("kv/range", json!({ "key": b64(key) }), self.op_timeout)
            .await
        {
            Ok(v) => {
                let value = v
                    .pointer("/kvs/0/value")
                    .and_then(Value::as_str)
                    .and_then(|s| B64.decode(s).ok())
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.parse::<i64>().ok())
                    .unwrap_or(0);
                Reply::Ok(json!({ "value": value }))
            }
            // A read changes nothing: a failed one is a plain failure.
            Err(Reply::Info(e)) => Reply::Fail(e),
            Err(r) => r,
        }
    }
}

impl LockClient for EtcdClient {
    crate::api::boxed_lock_ops!(EtcdClient);
    fn acquire_stallable<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: &'a PauseBoard,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(EtcdClient::acquire_as(
            self,
            client,
            lock,
            ttl_ms,
            wait_ms,
            Some(pauses),
        ))
    }
    fn lock_wire(&self, op: &str, _lock: &str) -> Wire {
        let api = self.api_path();
        let request = match op {
            "acquire" => format!("POST {api}/lease/grant + {api}/lock/lock"),
            "renew" => format!("POST {api}/lease/keepalive"),
            // Release deletes the lock key only if it is still ours (see `release`).
            _ => format!("POST {api}/kv/txn (delete the lock key)"),
        };
        Wire {
            request,
            ok: "200".into(),
            // lock/lock waits for a held lock: no grant within the wait is its refusal.
            refused: "no grant within the wait".into(),
        }
    }
}

/// The register lives in etcd itself, read and written by a txn fenced on the lock key.
impl FencedResource for EtcdClient {
    crate::api::boxed_resource_ops!(EtcdClient);
    fn resource_wire(&self, _op: &str, _key: &str) -> Wire {
        Wire {
            request: format!("POST {}/kv/txn", self.api_path()),
            ok: "200".into(),
            refused: "a failed fence compare".into(),
        }
    }
}

/// The longest `lock/lock` may take past its acquire's wait, for the call itself (etcd
/// commits the waiter's key even for a free lock): well inside the default liveness grace
/// (2 s), which `deadlock` allows past a wait.
const LOCK_ROUND_TRIP_MAX: Duration = Duration::from_millis(500);

/// The embedded etcd member: Debian's etcd-server, one member per node, a fresh cluster.
const ETCD_ARGV: [&str; 17] = [
    "etcd",
    "--name",
    "{id}",
    "--data-dir",
    "{data_dir}",
    "--listen-client-urls",
    "http://{host}:{port}",
    "--advertise-client-urls",
    "http://{host}:{port}",
    "--listen-peer-urls",
    "http://{host}:{peer_port}",
    "--initial-advertise-peer-urls",
    "http://{host}:{peer_port}",
    "--initial-cluster",
    "{initial_cluster}",
    "--initial-cluster-state",
    "new",
];

/// What an ok acquire records beside the grant (docs/history.md): the lease evidence
/// `grant-on-expired-lease` is judged on, the lock key read back at the answer's revision
/// with the lease's id (`grant-without-key`), and the lease's fate while the client waited.
const EVIDENCE: &[&[history::Field]] = &[LeaseEvidence::FIELDS, ReadBack::FIELDS, EtcdEvidence::FIELDS];

history::evidence! {
    /// What a grant carries beyond its lease and read-back (docs/history.md). Kept.
    pub(crate) struct EtcdEvidence for "etcd" {
        /// When a keepalive sent while waiting was answered without a TTL: the lease was gone.
        lease_gone_ns: u64,
    }
}

/// etcd v3 (`--adapter etcd`): Debian's `etcd` unless `--node-cmd` starts it, members talking
/// on a peer port, health at `/health`. It is its own fenced resource.
pub struct Etcd;

/// The option that names the JSON gateway's prefix.
const API: &str = "api";

const OPTIONS: &[ServiceOption] = &[ServiceOption {
    name: API,
    values: &["/v3", "/v3beta"],
    help: "the JSON gateway's prefix: /v3 for etcd 3.4 and later, /v3beta for etcd 3.3",
}];

impl Service for Etcd {
    fn name(&self) -> &'static str {
        "etcd"
    }
    fn about(&self) -> &'static str {
        "etcd v3 over its JSON gateway: a lease and a lock, the lock key's create_revision as the token, the counter's register in etcd itself, fenced by a txn; lockpick starts Debian's `etcd`"
    }
    fn launch(&self, _launch: &Launch) -> Option<Vec<String>> {
        Some(ETCD_ARGV.iter().map(|a| a.to_string()).collect())
    }
    fn readiness(&self) -> Readiness {
        Readiness::http("/health")
    }
    fn peer_port(&self) -> bool {
        true
    }
    fn options(&self) -> &'static [ServiceOption] {
        OPTIONS
    }
    fn former_flags(&self) -> &'static [(&'static str, &'static str)] {
        &[("etcd-api", API)]
    }
    fn program(&self) -> Option<(&'static str, &'static str)> {
        Some(("etcd", "etcd-server"))
    }
    fn clock_faults(&self) -> Result<(), &'static str> {
        Err("libfaketime does not reach Go programs (the Go runtime reads the clock without libc)")
    }
    fn own_resource(&self, _options: &crate::ServiceOptions) -> bool {
        true
    }
    fn holds_several_locks(&self, _options: &crate::ServiceOptions) -> bool {
        // Each grant is its own key and lease, remembered by client and token.
        true
    }
    fn check(&self, s: &Settings) -> Result<(), String> {
        if let Some(r) = s.renew_ttl_apart {
            return Err(format!(
                "--renew-ttl {r}: not with --adapter etcd: a keepalive renews an etcd lease for \
                 the ttl it was granted with, so no other renew ttl can be asked for"
            ));
        }
        if s.store_given {
            return Err("--adapter etcd keeps the counter's register in etcd itself (fenced by a txn): no --store-cmd or --store-url".into());
        }
        Ok(())
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let client = Arc::new(EtcdClient::new(
            c.url,
            c.options.own.get(API),
            c.op_timeout,
            c.clock.clone(),
        )?);
        Ok(Adapter::new(client.clone(), Some(client)).with_evidence(EVIDENCE))
    }
}

#[cfg(test)]
mod tests {
    use super::status_reason;
    use history::reason::{kind_of, reason_of, ReasonKind};

    /// etcd's own errors are answers faults cause; anything else is not understood.
    #[test]
    fn etcd_errors_are_unavailable_and_other_bodies_unexpected() {
        let cases = [
            (
                503,
                r#"{"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"}"#,
                "unavailable: http-503",
                ReasonKind::Unavailable,
            ),
            (500, "<html>oops</html>", "http-500", ReasonKind::Unexpected),
            (
                404,
                "404 page not found",
                "http-404",
                ReasonKind::Unexpected,
            ),
        ];
        for (status, body, reason, kind) in cases {
            let e = status_reason(status, body.as_bytes());
            assert_eq!(reason_of(&e), reason, "{e}");
            assert_eq!(kind_of(reason_of(&e)), kind, "{e}");
        }
    }
}
