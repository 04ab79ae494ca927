//! The template adapter: any HTTP lock API described in a config file, with no code. For each
//! call (acquire, renew, release, and optionally read, write, inspect) the file gives a request
//! (method, path, headers, body with placeholders) and how to read the answer (which statuses
//! mean ok or fail, JSON pointers to the token, the granted ttl, the error, the value, the
//! write's sequence number). Any other status, or an unreadable answer, is indeterminate; the
//! `unavailable` statuses (503 unless the file says otherwise) are indeterminate too, but
//! recorded as the service saying it cannot decide now (`unavailable: ...`), which faults cause,
//! so they never count as answers the adapter does not understand.
//!
//! Placeholders: `{lock} {client} {ttl_ms} {ttl_s} {token} {key} {value}`; `{lock|base64}` (any
//! name with `|base64`) inserts the base64 of the value. Other braces (JSON) are literal.

use crate::api::UNREAD;
use crate::api::{FencedResource, LockClient, Reply, Wire};
use crate::client::{classify_error, lockd_argv, lockd_run_name, snippet};
use crate::service::{Connect, ConnectError, Launch, Service};
use crate::Adapter;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use history::reason::with_detail;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One call's request and answer mapping.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    #[serde(default = "post")]
    pub method: String,
    /// Path (and query) after the base URL, with placeholders.
    pub path: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body with placeholders; none when absent.
    #[serde(default)]
    pub body: Option<String>,
    /// Statuses that mean the call took effect.
    #[serde(default = "ok_statuses")]
    pub ok: Vec<u16>,
    /// Statuses that mean it surely did not.
    #[serde(default = "fail_statuses")]
    pub fail: Vec<u16>,
    /// Statuses with which the service says it cannot decide now (no quorum, no leader):
    /// indeterminate, recorded `unavailable: <error or http-STATUS>`, expected under faults.
    #[serde(default = "unavailable_statuses")]
    pub unavailable: Vec<u16>,
    /// JSON pointer to the fencing token in an ok answer (acquire).
    #[serde(default)]
    pub token: Option<String>,
    /// JSON pointer to the granted ttl in ms (acquire, renew).
    #[serde(default)]
    pub ttl_ms: Option<String>,
    /// JSON pointer to the reason in a failed answer.
    #[serde(default)]
    pub error: Option<String>,
    /// JSON pointer to the register's value (read, inspect).
    #[serde(default)]
    pub value: Option<String>,
    /// JSON pointer to the write's acceptance order (write), or to the order of the write a
    /// read returned (read: the bank's transfers are placed by it, `non-serializable`).
    #[serde(default)]
    pub seq: Option<String>,
}

fn post() -> String {
    "POST".into()
}
fn ok_statuses() -> Vec<u16> {
    vec![200]
}
fn fail_statuses() -> Vec<u16> {
    vec![409]
}
fn unavailable_statuses() -> Vec<u16> {
    vec![503]
}

/// The `[template]` section of a config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateSpec {
    pub acquire: CallSpec,
    pub renew: CallSpec,
    pub release: CallSpec,
    #[serde(default)]
    pub read: Option<CallSpec>,
    #[serde(default)]
    pub write: Option<CallSpec>,
    #[serde(default)]
    pub inspect: Option<CallSpec>,
}

/// Fills a template. A `{...}` holding a name (letters, digits, `_`, optionally `|filter`) is
/// a placeholder; any other brace is literal, so JSON bodies need no escaping. An unknown name
/// is an error naming it (checked once, up front, by [`TemplateClient::new`]).
fn fill(template: &str, vars: &[(&str, String)]) -> Result<String, String> {
    let is_name = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
    };
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    // Each pass consumes at least one character.
    while let Some(c) = rest.chars().next() {
        let spec = (c == '{')
            .then(|| rest[1..].find('}').map(|end| &rest[1..1 + end]))
            .flatten()
            .filter(|s| is_name(s));
        let Some(spec) = spec else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        };
        let (name, filter) = match spec.split_once('|') {
            Some((n, f)) => (n, Some(f)),
            None => (spec, None),
        };
        let value = vars
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| format!("unknown placeholder {{{name}}} in {template:?}"))?;
        match filter {
            None => out.push_str(value),
            Some("base64") => out.push_str(&B64.encode(value.as_bytes())),
            Some(other) => return Err(format!("unknown filter |{other} in {template:?}")),
        }
        rest = &rest[spec.len() + 2..];
    }
    Ok(out)
}

/// Every placeholder name, with a sample value: used to validate templates up front.
const SAMPLE: [(&str, &str); 9] = [
    ("lock", "L0"),
    ("client", "p1"),
    ("ttl_ms", "2000"),
    ("ttl_s", "2"),
    ("wait_ms", "10000"),
    ("wait_s", "10"),
    ("token", "1"),
    ("key", "k"),
    ("value", "0"),
];

pub struct TemplateClient {
    http: reqwest::Client,
    op_timeout: Duration,
    base: String,
    spec: TemplateSpec,
}

/// A JSON value as an integer: numbers, or strings holding one (int64 as string is common).
fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl TemplateClient {
    /// Checks every template against the placeholder set before any traffic.
    pub fn new(
        base_url: &str,
        spec: TemplateSpec,
        op_timeout: Duration,
    ) -> Result<TemplateClient, String> {
        let sample: Vec<(&str, String)> = SAMPLE.iter().map(|(k, v)| (*k, v.to_string())).collect();
        let calls = [
            ("acquire", Some(&spec.acquire)),
            ("renew", Some(&spec.renew)),
            ("release", Some(&spec.release)),
            ("read", spec.read.as_ref()),
            ("write", spec.write.as_ref()),
            ("inspect", spec.inspect.as_ref()),
        ];
        for (name, call) in calls {
            let Some(call) = call else { continue };
            let check = |t: &str| fill(t, &sample).map_err(|e| format!("template.{name}: {e}"));
            check(&call.path)?;
            if let Some(b) = &call.body {
                check(b)?;
            }
            for v in call.headers.values() {
                check(v)?;
            }
            reqwest::Method::from_bytes(call.method.as_bytes()).map_err(|_| {
                format!(
                    "template.{name}.method: {:?} is not an HTTP method",
                    call.method
                )
            })?;
        }
        if spec.acquire.token.is_none() {
            return Err(
                "template.acquire.token: a JSON pointer to the fencing token is required".into(),
            );
        }
        let http = reqwest::Client::builder()
            .timeout(op_timeout)
            .connect_timeout(op_timeout)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(TemplateClient {
            http,
            op_timeout,
            base: base_url.trim_end_matches('/').to_string(),
            spec,
        })
    }

    pub fn has_store(&self) -> bool {
        self.spec.read.is_some() && self.spec.write.is_some()
    }

    async fn call(&self, call: &CallSpec, vars: &[(&str, String)], shape: Shape) -> Reply {
        self.call_within(call, vars, shape, self.op_timeout).await
    }

    async fn call_within(
        &self,
        call: &CallSpec,
        vars: &[(&str, String)],
        shape: Shape,
        timeout: Duration,
    ) -> Reply {
        let req = self.request(call, vars, timeout);
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return classify_error(&e),
        };
        let status = resp.status().as_u16();
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) if call.fail.contains(&status) => {
                return Reply::Fail(with_detail(&format!("http-{status}"), &e.to_string()))
            }
            Err(e) => return classify_error(&e),
        };
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let at = |p: &Option<String>| p.as_deref().and_then(|p| body.pointer(p));
        // The service's own reason when the file points at one, else the status.
        let said = || {
            at(&call.error)
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("http-{status}"))
        };
        if call.fail.contains(&status) {
            return Reply::Fail(said());
        }
        if call.unavailable.contains(&status) && !call.ok.contains(&status) {
            return Reply::Info(format!("unavailable: {}", said()));
        }
        if !call.ok.contains(&status) {
            return Reply::Info(with_detail(&format!("http-{status}"), &snippet(&bytes)));
        }
        Reply::Ok(Value::Object(answer_fields(call, shape, &body, &bytes)))
    }

    /// The HTTP request `call` describes, its path, headers and body filled from `vars` (a
    /// template that does not fill is sent as written).
    fn request(
        &self,
        call: &CallSpec,
        vars: &[(&str, String)],
        timeout: Duration,
    ) -> reqwest::RequestBuilder {
        let fill_or = |t: &str| fill(t, vars).unwrap_or_else(|_| t.to_string());
        let method =
            reqwest::Method::from_bytes(call.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let mut req = self
            .http
            .request(method, format!("{}{}", self.base, fill_or(&call.path)))
            .timeout(timeout);
        for (k, v) in &call.headers {
            req = req.header(k, fill_or(v));
        }
        if let Some(b) = &call.body {
            req = req
                .header("content-type", "application/json")
                .body(fill_or(b));
        }
        req
    }

    /// `{wait_ms}` / `{wait_s}` carry how long the service may wait for a held lock; the
    /// request's timeout is that wait plus the op timeout.
    pub async fn acquire(&self, client: &str, lock: &str, ttl_ms: u64, wait_ms: u64) -> Reply {
        let mut vars = vars(client, lock, ttl_ms, 0, "", 0);
        for (k, v) in vars.iter_mut() {
            match *k {
                "wait_ms" => *v = wait_ms.to_string(),
                "wait_s" => *v = wait_ms.div_ceil(1000).to_string(),
                _ => {}
            }
        }
        self.call_within(
            &self.spec.acquire,
            &vars,
            Shape::Grant { token: None },
            self.op_timeout + Duration::from_millis(wait_ms),
        )
        .await
    }
    pub async fn renew(&self, client: &str, lock: &str, token: u64, ttl_ms: u64) -> Reply {
        let vars = vars(client, lock, ttl_ms, token, "", 0);
        self.call(&self.spec.renew, &vars, Shape::Grant { token: Some(token) })
            .await
    }
    pub async fn release(&self, client: &str, lock: &str, token: u64) -> Reply {
        let vars = vars(client, lock, 0, token, "", 0);
        self.call(&self.spec.release, &vars, Shape::Plain).await
    }
    pub async fn read(&self, client: &str, key: &str, token: u64) -> Reply {
        let Some(call) = &self.spec.read else {
            return Reply::Fail("the template has no read".into());
        };
        self.call(call, &vars(client, "", 0, token, key, 0), Shape::Read)
            .await
    }
    pub async fn write(&self, client: &str, key: &str, token: u64, value: i64) -> Reply {
        let Some(call) = &self.spec.write else {
            return Reply::Fail("the template has no write".into());
        };
        self.call(call, &vars(client, "", 0, token, key, value), Shape::Write)
            .await
    }
    pub async fn inspect(&self, key: &str) -> Reply {
        let Some(call) = &self.spec.inspect else {
            return Reply::Fail("the template has no inspect".into());
        };
        match self
            .call(call, &vars("", "", 0, 0, key, 0), Shape::Read)
            .await
        {
            // A read changes nothing: a failed one is a plain failure.
            Reply::Info(e) => Reply::Fail(e),
            r => r,
        }
    }
}

impl LockClient for TemplateClient {
    crate::api::boxed_lock_ops!(TemplateClient);
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        let call = match op {
            "acquire" => &self.spec.acquire,
            "renew" => &self.spec.renew,
            _ => &self.spec.release,
        };
        template_wire(call, &vars("probe", lock, 0, 0, "", 0))
    }
}

/// A call as its spec describes it: method, path, and the statuses it reads.
fn template_wire(call: &CallSpec, vars: &[(&str, String)]) -> Wire {
    let statuses = |s: &[u16]| {
        s.iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" or ")
    };
    Wire {
        request: format!(
            "{} {}",
            call.method,
            fill(&call.path, vars).unwrap_or_else(|_| call.path.clone())
        ),
        ok: statuses(&call.ok),
        refused: statuses(&call.fail),
    }
}

impl FencedResource for TemplateClient {
    crate::api::boxed_resource_ops!(TemplateClient);
    fn resource_wire(&self, op: &str, key: &str) -> Wire {
        let call = match op {
            "read" => self.spec.read.as_ref(),
            _ => self.spec.write.as_ref(),
        };
        match call {
            Some(c) => template_wire(c, &vars("probe", "", 0, 0, key, 0)),
            None => Wire::plain(op, key),
        }
    }
}

/// Any HTTP lock API a config file's `[template]` section describes (`--adapter template`).
/// Without `--node-cmd` lockpick starts the embedded lockd (examples/lockd.toml describes it).
/// Store calls go to the store's own URL when it has one, described by the same file, else to
/// the lock service's.
pub struct Template;

impl Service for Template {
    fn holds_several_locks(&self, _options: &crate::ServiceOptions) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "template"
    }
    fn about(&self) -> &'static str {
        "any HTTP lock API described in the config file's [template] section (see examples/lockd.toml)"
    }
    fn launch(&self, launch: &Launch) -> Option<Vec<String>> {
        Some(lockd_argv(launch))
    }
    fn config_section(&self) -> Option<&'static str> {
        Some("template")
    }
    fn run_name(&self, unsafe_mode: Option<&str>) -> String {
        lockd_run_name(unsafe_mode)
    }
    fn takes_unsafe(&self) -> bool {
        true
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let refused = ConnectError::refused_by(self.name());
        let spec = c
            .options
            .template
            .clone()
            .ok_or_else(|| refused("no [template] section".into()))?;
        let lock =
            Arc::new(TemplateClient::new(c.url, spec.clone(), c.op_timeout).map_err(refused)?);
        let resource = match c.store_url {
            Some(s) => Arc::new(TemplateClient::new(s, spec, c.op_timeout).map_err(refused)?),
            None => lock.clone(),
        };
        Ok(Adapter::new(lock, Some(resource)))
    }
}

/// The fields of an ok answer, by what the call was: a grant's token (the one sent for a
/// renew, unless the answer names one) and TTL, a read's value and sequence number, a write's
/// sequence number, read through the file's JSON pointers.
fn answer_fields(
    call: &CallSpec,
    shape: Shape,
    body: &Value,
    bytes: &[u8],
) -> serde_json::Map<String, Value> {
    let at = |p: &Option<String>| p.as_deref().and_then(|p| body.pointer(p));
    let mut out = serde_json::Map::new();
    match shape {
        Shape::Grant { token } => {
            match token {
                // Renew: the token is the one sent, unless the answer names one.
                Some(t) => {
                    out.insert(
                        "token".into(),
                        json!(at(&call.token).and_then(as_i64).unwrap_or(t as i64)),
                    );
                }
                // The service said yes: an ok, with a token if one can be read. An ok status
                // without a readable token is still a grant (never turned into info); the
                // client cannot fence with it and lets its lease lapse.
                None => {
                    match at(&call.token).and_then(as_i64) {
                        Some(t) => {
                            out.insert("token".into(), json!(t));
                        }
                        // The answer goes along so the probe and the run's watch can say
                        // what came instead of a token.
                        None => {
                            out.insert(UNREAD.into(), json!(snippet(bytes)));
                        }
                    }
                }
            }
            if let Some(ttl) = at(&call.ttl_ms).and_then(as_i64) {
                out.insert("ttl_ms".into(), json!(ttl));
            }
        }
        Shape::Plain => {}
        Shape::Read => {
            match at(&call.value).and_then(as_i64) {
                Some(v) => {
                    out.insert("value".into(), json!(v));
                }
                // No value at the pointer: the register is empty (a store starts at 0).
                None => {
                    out.insert("value".into(), json!(0));
                }
            }
            if let Some(seq) = at(&call.seq).and_then(as_i64) {
                out.insert("seq".into(), json!(seq));
            }
        }
        Shape::Write => {
            if let Some(seq) = at(&call.seq).and_then(as_i64) {
                out.insert("seq".into(), json!(seq));
            }
        }
    }
    out
}

#[derive(Clone, Copy)]
enum Shape {
    /// An acquire (`token: None`) or renew (the token sent).
    Grant {
        token: Option<u64>,
    },
    Plain,
    Read,
    Write,
}

fn vars(
    client: &str,
    lock: &str,
    ttl_ms: u64,
    token: u64,
    key: &str,
    value: i64,
) -> Vec<(&'static str, String)> {
    vec![
        ("lock", lock.to_string()),
        ("client", client.to_string()),
        ("ttl_ms", ttl_ms.to_string()),
        ("ttl_s", ttl_ms.div_ceil(1000).max(1).to_string()),
        // Set by acquire; 0 (no wait) for every other call.
        ("wait_ms", "0".to_string()),
        ("wait_s", "0".to_string()),
        ("token", token.to_string()),
        ("key", key.to_string()),
        ("value", value.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_and_filters() {
        let v = vars("p3", "L 0", 1500, 41, "k", 7);
        assert_eq!(
            fill("/v1/locks/{lock}/acquire", &v).unwrap(),
            "/v1/locks/L 0/acquire"
        );
        assert_eq!(fill("{\"ttl\":{ttl_s}}", &v).unwrap(), "{\"ttl\":2}");
        assert_eq!(fill("{lock|base64}", &v).unwrap(), "TCAw");
        assert_eq!(
            fill(r#"{"client":"{client}","ttl_ms":{ttl_ms}}"#, &v).unwrap(),
            r#"{"client":"p3","ttl_ms":1500}"#
        );
        assert!(fill("{nope}", &v).unwrap_err().contains("nope"));
        assert!(fill("{lock|rot13}", &v).unwrap_err().contains("rot13"));
    }
}
