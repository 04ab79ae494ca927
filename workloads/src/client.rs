//! The reference protocol (docs/protocol.md): lock ops against lockd's HTTP API and store ops
//! against the fenced store, each classified as ok, fail or info; and [`Reference`], the
//! descriptor of the service that speaks it (by default the embedded `lockpick lockd`).

pub(crate) use crate::api::Reply;
use crate::api::{FencedResource, LockClient, Wire, UNREAD};
use crate::service::{Connect, ConnectError, Launch, Service};
use crate::Adapter;
use history::reason::with_detail;
use nemesis::Readiness;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot build the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
    #[error("bad service URL {url:?}: {reason}")]
    Url { url: String, reason: String },
}

/// One shared HTTP client (connection pool) for the lock service and the store.
#[derive(Clone)]
pub struct RefClient {
    http: reqwest::Client,
    op_timeout: Duration,
    lock_url: String,
    store_url: Option<String>,
}

fn check_url(url: &str) -> Result<String, ClientError> {
    let trimmed = url.trim_end_matches('/');
    match reqwest::Url::parse(trimmed) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Ok(trimmed.to_string()),
        Ok(u) => Err(ClientError::Url {
            url: url.to_string(),
            reason: format!("scheme {:?} is not http or https", u.scheme()),
        }),
        Err(e) => Err(ClientError::Url {
            url: url.to_string(),
            reason: e.to_string(),
        }),
    }
}

/// Segments of our paths are lock and key names; escape them so any name is one segment.
fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl RefClient {
    /// `op_timeout` bounds each request end to end: past it the op is recorded as `info`.
    pub fn new(
        lock_url: &str,
        store_url: Option<&str>,
        op_timeout: Duration,
        pool_size: usize,
    ) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(op_timeout)
            .connect_timeout(op_timeout)
            .pool_max_idle_per_host(pool_size)
            .tcp_nodelay(true)
            .build()?;
        Ok(RefClient {
            http,
            op_timeout,
            lock_url: check_url(lock_url)?,
            store_url: store_url.map(check_url).transpose()?,
        })
    }

    /// A client of the fenced store alone: the resource beside a lock service of another
    /// protocol.
    pub fn store_only(
        store_url: &str,
        op_timeout: Duration,
        pool_size: usize,
    ) -> Result<Self, ClientError> {
        Self::new(store_url, Some(store_url), op_timeout, pool_size)
    }

    async fn post(&self, url: String, body: Value) -> Reply {
        self.post_within(url, body, self.op_timeout).await
    }

    async fn post_within(&self, url: String, body: Value, timeout: Duration) -> Reply {
        let resp = match self
            .http
            .post(&url)
            .timeout(timeout)
            .json(&body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return classify_error(&e),
        };
        let status = resp.status();
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            // The status arrived, so the service acted (or refused); only the body was lost.
            Err(e) if status.as_u16() == 409 => {
                return Reply::Fail(with_detail("conflict", &e.to_string()))
            }
            Err(e) => return classify_error(&e),
        };
        let parsed: Result<Value, _> = serde_json::from_slice(&bytes);
        let word = |v: &Value| v.get("error").and_then(Value::as_str).map(str::to_string);
        match (status.as_u16(), parsed) {
            (200, Ok(v)) if v.is_object() => Reply::Ok(v),
            // A 200 we cannot read: the service may well have acted on it.
            (200, _) => Reply::Info(with_detail("bad-body", &snippet(&bytes))),
            // The refusal in the service's own word (`held`, `stale-token`), and what it
            // says about it (the ring: how long its token has not been seen).
            (409, Ok(v)) => {
                let w = word(&v).unwrap_or_else(|| "conflict".to_string());
                let detail = v.get("detail").and_then(Value::as_str).unwrap_or_default();
                Reply::Fail(with_detail(&w, detail))
            }
            (409, Err(_)) => Reply::Fail("conflict".to_string()),
            // The documented 503s of a multi-node lockd (docs/protocol.md): it cannot decide
            // now, expected while faults are on.
            (503, Ok(v)) if word(&v).is_some() => {
                Reply::Info(format!("unavailable: {}", word(&v).unwrap_or_default()))
            }
            (code, _) => Reply::Info(with_detail(&format!("http-{code}"), &snippet(&bytes))),
        }
    }

    /// The service may wait up to `wait_ms` for a held lock before answering: the request's
    /// timeout is that wait plus the op timeout.
    pub async fn acquire(&self, client: &str, lock: &str, ttl_ms: u64, wait_ms: u64) -> Reply {
        let url = format!("{}/v1/locks/{}/acquire", self.lock_url, segment(lock));
        let reply = self
            .post_within(
                url,
                json!({"client": client, "ttl_ms": ttl_ms, "wait_ms": wait_ms}),
                self.op_timeout + Duration::from_millis(wait_ms),
            )
            .await;
        match reply {
            // A grant stays a grant; that its token could not be read is said beside it.
            Reply::Ok(mut body) if body.get("token").and_then(Value::as_u64).is_none() => {
                let raw = snippet(body.to_string().as_bytes());
                body[UNREAD] = Value::from(raw);
                Reply::Ok(body)
            }
            r => r,
        }
    }

    pub async fn renew(&self, client: &str, lock: &str, token: u64, ttl_ms: u64) -> Reply {
        let url = format!("{}/v1/locks/{}/renew", self.lock_url, segment(lock));
        self.post(
            url,
            json!({"client": client, "token": token, "ttl_ms": ttl_ms}),
        )
        .await
    }

    pub async fn release(&self, client: &str, lock: &str, token: u64) -> Reply {
        let url = format!("{}/v1/locks/{}/release", self.lock_url, segment(lock));
        self.post(url, json!({"client": client, "token": token}))
            .await
    }

    fn store(&self) -> &str {
        // The runner only builds counter workloads with a store URL.
        self.store_url
            .as_deref()
            .expect("store op on a client built without a store URL")
    }

    pub async fn read(&self, client: &str, key: &str, token: u64) -> Reply {
        let url = format!("{}/v1/store/{}/read", self.store(), segment(key));
        self.post(url, json!({"client": client, "token": token}))
            .await
    }

    pub async fn write(&self, client: &str, key: &str, token: u64, value: i64) -> Reply {
        let url = format!("{}/v1/store/{}/write", self.store(), segment(key));
        self.post(
            url,
            json!({"client": client, "token": token, "value": value}),
        )
        .await
    }

    /// The unfenced inspection read (`GET /v1/store/{key}`), used for the closing read: after
    /// the run no client holds a token the fence would accept, and this read must not move it.
    pub async fn inspect(&self, key: &str) -> Reply {
        let url = format!("{}/v1/store/{}", self.store(), segment(key));
        match self.http.get(&url).send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                match r.bytes().await {
                    Ok(b) => match (status, serde_json::from_slice::<Value>(&b)) {
                        (200, Ok(v)) if v.is_object() => Reply::Ok(v),
                        // A read changes nothing, so a bad answer is a plain failure.
                        _ => Reply::Fail(with_detail(&format!("http-{status}"), &snippet(&b))),
                    },
                    Err(e) => classify_error(&e),
                }
            }
            Err(e) => classify_error(&e),
        }
    }
}

impl LockClient for RefClient {
    crate::api::boxed_lock_ops!(RefClient);
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        reference_wire(format!("POST /v1/locks/{}/{op}", segment(lock)))
    }
}

/// The reference protocol's answers: 200 took effect, 409 refused.
fn reference_wire(request: String) -> Wire {
    Wire {
        request,
        ok: "200".into(),
        refused: "409".into(),
    }
}

impl FencedResource for RefClient {
    crate::api::boxed_resource_ops!(RefClient);
    fn resource_wire(&self, op: &str, key: &str) -> Wire {
        reference_wire(format!("POST /v1/store/{}/{op}", segment(key)))
    }
}

/// The reference lock service: `lockpick lockd` unless `--node-cmd` starts another one. Its
/// fenced resource is the store (`lockpick store`, `--store-cmd` or `--store-url`), spoken to
/// through the same pooled client.
pub struct Reference;

impl Service for Reference {
    fn holds_several_locks(&self, _options: &crate::ServiceOptions) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "reference"
    }
    fn about(&self) -> &'static str {
        "lockd's reference protocol (docs/protocol.md): the embedded lockd, or any service that speaks it (--node-cmd, --url)"
    }
    fn launch(&self, launch: &Launch) -> Option<Vec<String>> {
        Some(lockd_argv(launch))
    }
    fn run_name(&self, unsafe_mode: Option<&str>) -> String {
        lockd_run_name(unsafe_mode)
    }
    fn takes_unsafe(&self) -> bool {
        true
    }
    fn lockd_modes(&self) -> bool {
        true
    }
    fn moving_primary(&self, launch: &Launch) -> Option<Readiness> {
        // The ring's member that holds the token answers 200 there, the others 404.
        let ring = launch.lock_order.is_some_and(|o| o == "ring" || o.starts_with("ring:"));
        ring.then(|| Readiness::http("/v1/ring/token"))
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let client = RefClient::new(c.url, c.store_url, c.op_timeout, c.clients)?;
        let resource = c
            .store_url
            .is_some()
            .then(|| Arc::new(client.clone()) as Arc<dyn FencedResource>);
        Ok(Adapter::new(Arc::new(client), resource))
    }
}

/// `lockpick lockd` for one node of `launch.nodes` (the others are its `--peers`).
pub(crate) fn lockd_argv(launch: &Launch) -> Vec<String> {
    let mut argv = vec![
        launch.exe.display().to_string(),
        "lockd".into(),
        "--listen".into(),
        "{host}:{port}".into(),
        "--data-dir".into(),
        "{data_dir}".into(),
    ];
    if launch.nodes > 1 {
        argv.extend(["--peers", "{peers}", "--advertise", "{host}:{port}"].map(String::from));
    }
    if let Some(m) = launch.unsafe_mode {
        argv.extend(["--unsafe".to_string(), m.to_string()]);
    }
    if let Some(o) = launch.lock_order {
        argv.extend(["--lock-order".to_string(), o.to_string()]);
    }
    argv
}

/// `lockd`, or `lockd-<mode>` for an unsafe mode.
pub(crate) fn lockd_run_name(unsafe_mode: Option<&str>) -> String {
    match unsafe_mode {
        Some(m) => format!("lockd-{m}"),
        None => "lockd".to_string(),
    }
}

/// A refused connection never carried the request: a definite failure. Anything after the
/// request may have left (timeout, reset) is indeterminate. The reason names which
/// (`connect: refused`, `timeout`, `transport`), the detail the transport's own words.
pub(crate) fn classify_error(e: &reqwest::Error) -> Reply {
    let cause = root_cause(e);
    if e.is_timeout() {
        Reply::Info("timeout".to_string())
    } else if e.is_connect() {
        let lower = cause.to_ascii_lowercase();
        let why = if lower.contains("refused") {
            "connect: refused"
        } else if lower.contains("timed out") {
            "connect: timeout"
        } else {
            "connect: failed"
        };
        Reply::Fail(with_detail(why, &cause))
    } else {
        Reply::Info(with_detail("transport", &cause))
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: &(dyn std::error::Error + 'static) = e;
    // Error chains are short; the bound only guards against a cyclic source().
    for _ in 0..16 {
        match cur.source() {
            Some(s) => cur = s,
            None => break,
        }
    }
    cur.to_string()
}

/// An answer's body abridged to one line of at most 80 characters (an HTML error page
/// becomes its first words), for an op's error and the probe's transcript.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_one_segment() {
        assert_eq!(segment("L0"), "L0");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn rejects_bad_urls() {
        assert!(RefClient::new("ftp://x", None, Duration::from_secs(1), 1).is_err());
        assert!(RefClient::new("not a url", None, Duration::from_secs(1), 1).is_err());
        assert!(RefClient::new("http://127.0.0.1:1/", None, Duration::from_secs(1), 1).is_ok());
    }
}
