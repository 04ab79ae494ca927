//! The etcd v3 adapter, over etcd's JSON gateway (`/v3/...` from 3.4 on, `/v3beta/...` on 3.3).
//!
//! - acquire: `lease/grant` with the ttl (etcd may raise it to its minimum: the granted TTL is
//!   the one recorded), then `lock/lock` on that lease, kept alive while it waits, then
//!   `kv/range` of the lock key: its `create_revision` is the fencing token. The ok value carries
//!   the lease evidence (`lease_last_ok_ns`, `lease_ttl_ms`) that `grant-on-expired-lease` needs.
//! - renew: `lease/keepalive`; an answer without a TTL means the lease is gone.
//! - release: delete the lock key if it still carries the token's revision (a txn; etcd's
//!   `lock/unlock` succeeds on a key long gone), then `lease/revoke`.
//! - read / write: a `kv/txn` that compares the lock key's `create_revision` with the token, the
//!   fenced access in etcd's own terms; a write's `seq` is the revision it created (etcd's total
//!   order of writes).
//!
//! Gateway encodings: keys and values are base64, int64 fields are JSON strings, and fields at
//! their zero value are omitted (a missing `succeeded` is false).

use crate::api::{BoxFuture, FencedResource, LockClient};
use crate::client::{classify_error, snippet, Reply};
use crate::service::{on_path, Connect, ConnectError, Launch, Service, Settings};
use crate::Adapter;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::service::Clock;

/// What a client holds: etcd's handles for its lock.
#[derive(Debug, Clone)]
struct Held {
    lease_id: String,
    /// The lock key (base64), whose `create_revision` is the token.
    key_b64: String,
    token: u64,
}

/// Bounds the holders remembered: one per live client process; crashed processes' entries are
/// dropped past it (their leases lapse in etcd on their own).
const HELD_MAX: usize = 4096;

pub struct EtcdClient {
    http: reqwest::Client,
    /// `http://host:port/v3`
    api: String,
    op_timeout: Duration,
    now_ns: Clock,
    held: Mutex<HashMap<String, Held>>,
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
            held: Mutex::new(HashMap::new()),
        })
    }

    /// One gateway call: Ok(body) on 200, else the Reply it amounts to. `effect` says whether a
    /// failure after sending may have changed etcd's state (then it is indeterminate).
    async fn call(&self, path: &str, body: Value, timeout: Duration) -> Result<Value, Reply> {
        let resp = self
            .http
            .post(format!("{}/{path}", self.api))
            .timeout(timeout)
            .json(&body)
            .send()
            .await
            .map_err(|e| classify_error(&e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| classify_error(&e))?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if status == 200 && v.is_object() => Ok(v),
            Ok(v) => {
                let msg = v
                    .get("message")
                    .or_else(|| v.get("error"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                Err(Reply::Info(format!("http-{status}: {msg}")))
            }
            Err(_) => Err(Reply::Info(format!("bad-response: {}", snippet(&bytes)))),
        }
    }

    fn remember(&self, client: &str, held: Held) {
        let mut h = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if h.len() >= HELD_MAX {
            h.clear();
        }
        h.insert(client.to_string(), held);
    }

    fn holding(&self, client: &str) -> Option<Held> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(client)
            .cloned()
    }

    fn forget(&self, client: &str) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(client);
    }

    /// Best effort: a lease we gave up on is revoked so its lock (if it was granted after all)
    /// is freed at once instead of at expiry. Its outcome changes nothing in the history.
    async fn abandon(&self, lease_id: &str) {
        let _ = self
            .call("lease/revoke", json!({ "ID": lease_id }), self.op_timeout)
            .await;
    }

    pub async fn acquire(&self, client: &str, lock: &str, ttl_ms: u64, _wait_ms: u64) -> Reply {
        let started = Instant::now();
        let ttl_s = ttl_ms.div_ceil(1000).max(1);
        let grant = match self
            .call("lease/grant", json!({ "TTL": ttl_s }), self.op_timeout)
            .await
        {
            Ok(v) => v,
            // No lock was asked for yet: whatever happened to the lease, no grant happened.
            Err(Reply::Info(e)) | Err(Reply::Fail(e)) => {
                return Reply::Fail(format!("lease-grant: {e}"))
            }
            Err(r) => return r,
        };
        let lease_id = match grant.get("ID") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Reply::Fail("lease-grant: no lease ID".into()),
        };
        let granted_ttl_s = int(&grant, "TTL").max(1);
        let mut last_ok_ns = (self.now_ns)();
        // lock/lock blocks while another client holds the lock; etcd does not renew the lease
        // meanwhile, so keep it alive ourselves, every third of its TTL, until the op timeout.
        let remaining = self.op_timeout.saturating_sub(started.elapsed());
        let lock_call = self.call(
            "lock/lock",
            json!({ "name": b64(lock), "lease": lease_id }),
            remaining,
        );
        tokio::pin!(lock_call);
        let mut tick = tokio::time::interval(Duration::from_millis(granted_ttl_s * 1000 / 3));
        tick.tick().await;
        let locked = loop {
            tokio::select! {
                r = &mut lock_call => break r,
                _ = tick.tick() => {
                    if let Ok(v) = self.call("lease/keepalive", json!({ "ID": lease_id }), self.op_timeout).await {
                        if int(v.get("result").unwrap_or(&Value::Null), "TTL") > 0 {
                            last_ok_ns = (self.now_ns)();
                        }
                    }
                }
            }
        };
        let key_b64 = match locked {
            Ok(v) => match v.get("key").and_then(Value::as_str) {
                Some(k) => k.to_string(),
                None => {
                    self.abandon(&lease_id).await;
                    return Reply::Info("lock: no key in the answer".into());
                }
            },
            // The lock may have been granted just as we gave up: indeterminate. Revoking the
            // lease frees it either way.
            Err(Reply::Info(e)) => {
                self.abandon(&lease_id).await;
                return Reply::Info(format!("lock: {e}"));
            }
            Err(Reply::Fail(e)) => {
                self.abandon(&lease_id).await;
                return Reply::Fail(format!("lock: {e}"));
            }
            Err(r) => return r,
        };
        let range = match self
            .call("kv/range", json!({ "key": key_b64 }), self.op_timeout)
            .await
        {
            Ok(v) => v,
            Err(Reply::Info(e)) | Err(Reply::Fail(e)) => {
                // Granted, but the token is unknown: nothing can be fenced with it.
                self.abandon(&lease_id).await;
                return Reply::Info(format!("range: {e}"));
            }
            Err(r) => return r,
        };
        let token = range
            .get("kvs")
            .and_then(|k| k.get(0))
            .map(|kv| int(kv, "create_revision"))
            .unwrap_or(0);
        if token == 0 {
            // The key is gone already: the lease expired between lock and range.
            self.abandon(&lease_id).await;
            return Reply::Info("range: lock key gone before its token was read".into());
        }
        self.remember(
            client,
            Held {
                lease_id,
                key_b64,
                token,
            },
        );
        Reply::Ok(json!({
            "token": token,
            "ttl_ms": granted_ttl_s * 1000,
            "lease_last_ok_ns": last_ok_ns,
            "lease_ttl_ms": granted_ttl_s * 1000,
        }))
    }

    pub async fn renew(&self, client: &str, _lock: &str, token: u64, _ttl_ms: u64) -> Reply {
        let Some(held) = self.holding(client).filter(|h| h.token == token) else {
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
                    self.forget(client);
                    Reply::Fail("not-holder".into())
                } else {
                    Reply::Ok(json!({ "token": token, "ttl_ms": ttl_s * 1000 }))
                }
            }
            Err(r) => r,
        }
    }

    pub async fn release(&self, client: &str, _lock: &str, token: u64) -> Reply {
        let Some(held) = self.holding(client).filter(|h| h.token == token) else {
            return Reply::Fail("not-holder".into());
        };
        // `lock/unlock` succeeds even when the key is long gone (the lease expired and someone
        // else holds the lock now), which would look like a stale release accepted. Deleting
        // the key only if it still carries our revision says truthfully whether we released.
        let op = json!({ "request_delete_range": { "key": held.key_b64 } });
        let r = self.fenced(client, token, op).await;
        self.forget(client);
        self.abandon(&held.lease_id).await;
        match r {
            Ok(_) => Reply::Ok(json!({})),
            Err(Reply::Fail(_)) => Reply::Fail("not-holder".into()),
            Err(r) => r,
        }
    }

    /// The fenced access: `op` runs only if the lock key still has the token's revision.
    async fn fenced(&self, client: &str, token: u64, op: Value) -> Result<Value, Reply> {
        let Some(held) = self.holding(client).filter(|h| h.token == token) else {
            // Without the lock key there is nothing to compare: refused before sending.
            return Err(Reply::Fail("stale-token".into()));
        };
        let txn = json!({
            "compare": [{
                "target": "CREATE", "result": "EQUAL",
                "key": held.key_b64, "create_revision": token.to_string(),
            }],
            "success": [op],
        });
        let v = self.call("kv/txn", txn, self.op_timeout).await?;
        if v.get("succeeded").and_then(Value::as_bool) == Some(true) {
            Ok(v)
        } else {
            Err(Reply::Fail("stale-token".into()))
        }
    }

    pub async fn read(&self, client: &str, key: &str, token: u64) -> Reply {
        let op = json!({ "request_range": { "key": b64(key) } });
        match self.fenced(client, token, op).await {
            Ok(v) => {
                let value = v
                    .pointer("/responses/0/response_range/kvs/0/value")
                    .and_then(Value::as_str)
                    .and_then(|s| B64.decode(s).ok())
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.parse::<i64>().ok())
                    .unwrap_or(0);
                Reply::Ok(json!({ "value": value, "fence": token }))
            }
            Err(r) => r,
        }
    }

    pub async fn write(&self, client: &str, key: &str, token: u64, value: i64) -> Reply {
        let op = json!({ "request_put": { "key": b64(key), "value": b64(&value.to_string()) } });
        match self.fenced(client, token, op).await {
            Ok(v) => {
                let seq = int(v.get("header").unwrap_or(&Value::Null), "revision");
                Reply::Ok(json!({ "seq": seq, "fence": token }))
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
    fn acquire<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(EtcdClient::acquire(self, client, lock, ttl_ms, wait_ms))
    }
    fn renew<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        token: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(EtcdClient::renew(self, client, lock, token, ttl_ms))
    }
    fn release<'a>(&'a self, client: &'a str, lock: &'a str, token: u64) -> BoxFuture<'a, Reply> {
        Box::pin(EtcdClient::release(self, client, lock, token))
    }
}

/// The register lives in etcd itself, read and written by a txn fenced on the lock key.
impl FencedResource for EtcdClient {
    fn read<'a>(&'a self, client: &'a str, key: &'a str, token: u64) -> BoxFuture<'a, Reply> {
        Box::pin(EtcdClient::read(self, client, key, token))
    }
    fn write<'a>(
        &'a self,
        client: &'a str,
        key: &'a str,
        token: u64,
        value: i64,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(EtcdClient::write(self, client, key, token, value))
    }
    fn inspect<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Reply> {
        Box::pin(EtcdClient::inspect(self, key))
    }
}

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

/// etcd v3 (`--adapter etcd`): Debian's `etcd` unless `--node-cmd` starts it, members talking
/// on a peer port, health at `/health`. It is its own fenced resource.
pub struct Etcd;

impl Service for Etcd {
    fn name(&self) -> &'static str {
        "etcd"
    }
    fn launch(&self, _launch: &Launch) -> Option<Vec<String>> {
        Some(ETCD_ARGV.iter().map(|a| a.to_string()).collect())
    }
    fn health_path(&self) -> &'static str {
        "/health"
    }
    fn peer_port(&self) -> bool {
        true
    }
    fn clock_faults(&self) -> Result<(), &'static str> {
        Err("libfaketime does not reach Go programs (the Go runtime reads the clock without libc)")
    }
    fn own_resource(&self) -> bool {
        true
    }
    fn check(&self, s: &Settings) -> Result<(), String> {
        if let Some(r) = s.renew_ttl_apart {
            return Err(format!(
                "--renew-ttl {r}: not with --adapter etcd: a keepalive renews an etcd lease for \
                 the ttl it was granted with, so no other renew ttl can be asked for"
            ));
        }
        if s.unsafe_mode.is_some() {
            return Err("--unsafe is a mode of the embedded lockd, not of etcd".into());
        }
        if s.store_given {
            return Err("--adapter etcd keeps the counter's register in etcd itself (fenced by a txn): no --store-cmd or --store-url".into());
        }
        if s.launched && !on_path("etcd") {
            return Err("--adapter etcd: `etcd` is not installed here (apt-get install etcd-server), or give --node-cmd".into());
        }
        Ok(())
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let client = Arc::new(EtcdClient::new(
            c.url,
            &c.options.etcd_api,
            c.op_timeout,
            c.clock.clone(),
        )?);
        Ok(Adapter::new(client.clone(), Some(client)))
    }
}
