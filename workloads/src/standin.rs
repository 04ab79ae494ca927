//! `--adapter standin`: the native adapter of a stand-in service whose API is not the reference
//! protocol (tests/services/standin_lockd.py: leases on `/leases/{lock}`, the token called
//! `fence`, 201 / 423 / 412 / 204). It is the smallest complete adapter, kept as the example to
//! copy: a [`LockClient`], a [`Service`] descriptor, and one line in `SERVICES` (lib.rs). Its
//! fenced resource is lockpick's store, spoken to through the reference protocol.

use crate::api::UNREAD;
use crate::api::{BoxFuture, Grant, LockClient, Reply, Wire};
use crate::client::{classify_error, snippet, ClientError};
use nemesis::Readiness;
use crate::service::{Connect, ConnectError, Launch, Service};
use crate::Adapter;
use history::reason::with_detail;
use serde_json::{json, Value};
use std::sync::Arc;

pub struct StandInClient {
    http: reqwest::Client,
    op_timeout: std::time::Duration,
    /// `http://host:port`
    base: String,
}

impl StandInClient {
    pub fn new(base: &str, op_timeout: std::time::Duration) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(op_timeout)
            .connect_timeout(op_timeout)
            .no_proxy()
            .build()?;
        Ok(StandInClient {
            http,
            op_timeout,
            base: base.trim_end_matches('/').to_string(),
        })
    }

    /// Sends `req`; `ok` is the status that means it took effect. Its refusals (423, 412) are
    /// definite; any other answer is indeterminate.
    async fn send(&self, req: reqwest::RequestBuilder, ok: u16) -> Reply {
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return classify_error(&e),
        };
        let status = resp.status().as_u16();
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => return classify_error(&e),
        };
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        match status {
            _ if status == ok => {
                // This API calls the token `fence` and the lease `lease_ms`.
                let mut out = serde_json::Map::new();
                if let Some(t) = body.get("fence") {
                    out.insert("token".into(), t.clone());
                }
                if let Some(l) = body.get("lease_ms") {
                    out.insert("ttl_ms".into(), l.clone());
                }
                if !out.contains_key("token") && ok == 201 {
                    // A grant whose token cannot be read stays a grant; the answer goes
                    // along so the probe and the run's watch can say what came instead.
                    out.insert(UNREAD.into(), Value::from(snippet(&bytes)));
                }
                Reply::Ok(Value::Object(out))
            }
            423 | 412 => Reply::Fail(
                body.get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("refused")
                    .to_string(),
            ),
            _ => Reply::Info(with_detail(&format!("http-{status}"), &snippet(&bytes))),
        }
    }

    fn lease_url(&self, lock: &str) -> String {
        // Lock names are `L<i>`: nothing to escape.
        format!("{}/leases/{lock}", self.base)
    }
}

impl LockClient for StandInClient {
    fn acquire<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> BoxFuture<'a, Reply> {
        let body = json!({"owner": client, "lease_ms": ttl_ms, "wait_ms": wait_ms});
        // The service may wait `wait_ms` before answering: the request's timeout covers it.
        let timeout = self.op_timeout + std::time::Duration::from_millis(wait_ms);
        let req = self
            .http
            .put(self.lease_url(lock))
            .timeout(timeout)
            .json(&body);
        Box::pin(self.send(req, 201))
    }
    fn renew<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Reply> {
        let url = format!("{}/keepalive", self.lease_url(lock));
        let body = json!({"owner": client, "fence": grant.fence(), "lease_ms": ttl_ms});
        Box::pin(self.send(self.http.post(url).json(&body), 200))
    }
    fn release<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
    ) -> BoxFuture<'a, Reply> {
        // Client ids are `p<N>`: nothing to escape. Its grants always carry the fence.
        let fence = grant.fence();
        let url = format!("{}?owner={client}&fence={fence}", self.lease_url(lock));
        Box::pin(self.send(self.http.delete(url), 204))
    }
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        let (request, ok) = match op {
            "acquire" => (format!("PUT /leases/{lock}"), "201"),
            "renew" => (format!("POST /leases/{lock}/keepalive"), "200"),
            _ => (format!("DELETE /leases/{lock}"), "204"),
        };
        Wire {
            request,
            ok: ok.into(),
            refused: "423 or 412".into(),
        }
    }
}

/// The stand-in service: lockpick has no command for it (give `--node-cmd`); ready when
/// `/healthz` answers; every fault reaches it.
pub struct StandIn;

impl Service for StandIn {
    fn holds_several_locks(&self, _options: &crate::ServiceOptions) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "standin"
    }
    fn about(&self) -> &'static str {
        "tests/services/standin_lockd.py, a lock service written from docs/protocol.md alone, with bugs on flags"
    }
    fn launch(&self, _launch: &Launch) -> Option<Vec<String>> {
        None
    }
    fn readiness(&self) -> Readiness {
        Readiness::http("/healthz")
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let lock = Arc::new(StandInClient::new(c.url, c.op_timeout)?);
        c.beside_store(lock, &[])
    }
}
