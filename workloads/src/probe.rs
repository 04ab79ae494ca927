//! The conformance probe: a few requests through the same seams the workers use
//! ([`Adapter`]: the service's [`LockClient`](crate::LockClient) and
//! [`FencedResource`](crate::FencedResource)), made before a run's clock starts and by
//! `lockpick probe`, so a service the adapter does not understand is refused in one line
//! instead of giving a verdict over answers nobody read.
//!
//! In order: the node answers its readiness check (the health path answers 200); client
//! `probe-1` is granted the probe lock with a numeric token where the service gives tokens
//! (and a numeric `ttl_ms`, if the answer has one); client `probe-2` is not
//! granted it meanwhile; `probe-1` renews; when the run uses a fenced resource, `probe-1`
//! writes 1 with its token and reads 1 back; `probe-1` releases; `probe-2` is then granted
//! and releases; for an HTTP service, `GET /v1/time` is noted, answered or not (only clock
//! faults use it). None of it is recorded in the history.
//!
//! A service may answer a grant after the lease it granted could have run out (the lease
//! counts from the request): then `probe-2` may legally be granted, and `probe-1`'s renew
//! refused. When that happens after `probe-1`'s lease's lower bound (its request plus
//! `ttl * (1 - drift)`), the probe says the service answered slower than its lease (a warning
//! line, not a failure) and makes the held checks once more with a lease four times the
//! grant's answer time; slower again, it skips them. A service that waits for a held lock
//! whatever the wait asked (etcd) is listened to for half the lease (or twice the first
//! grant's answer time): no answer by then is no grant, so the probe never waits out the
//! lease nobody renews.

use crate::adapter::Adapter;
use crate::api::{Grant, Reply, Tokens, Wire, UNREAD};
use crate::client::{classify_error, snippet};
use history::reason::{detail_of, kind_of, reason_of, status_of, with_detail, ReasonKind};
use nemesis::Readiness;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The lock (and the store key) the probe uses: no workload's lock (`L<i>`) or key.
pub const PROBE_LOCK: &str = "lockpick-probe";
const FIRST: &str = "probe-1";
const SECOND: &str = "probe-2";

/// What the probe talks to.
pub struct ProbeTarget<'a> {
    /// One node's adapter, connected as the run's workers are.
    pub adapter: &'a Adapter,
    /// That node's base URL (`http://host:port`), for the readiness and time requests.
    pub url: &'a str,
    /// What answers once the node serves (its descriptor's).
    pub readiness: &'a Readiness,
    /// Whether the service's grants carry fencing tokens (its descriptor's).
    pub tokens: Tokens,
    /// The lease the probe asks for.
    pub ttl_ms: u64,
    /// The clock-rate error the service claims (`--drift`): a lease is sure to last
    /// `ttl * (1 - drift)` from its request.
    pub drift: f64,
    /// Bounds each request.
    pub op_timeout: Duration,
    /// Whether the run uses the fenced resource (the counter workload): then its round trip
    /// is probed too.
    pub store: bool,
}

/// A failed check: one line naming the request, the answer and what was expected, and the
/// transcript up to it.
#[derive(Debug, thiserror::Error)]
#[error("probe: {line}")]
pub struct ProbeError {
    pub line: String,
    pub transcript: Vec<String>,
}

/// How many times the held checks are made again with a longer lease when the service
/// answered slower than the lease it granted.
const SLOW_RETRIES: u32 = 1;

/// Runs every check; the transcript (one line per request and answer) on success.
pub async fn probe(t: &ProbeTarget<'_>) -> Result<Vec<String>, ProbeError> {
    let mut p = Probe {
        t,
        lines: Vec::new(),
        ttl_ms: t.ttl_ms,
        waited: false,
    };
    p.health().await?;
    // Bounded: at most SLOW_RETRIES + 1 passes.
    for attempt in 0..=SLOW_RETRIES {
        let asked = Instant::now();
        let grant = p.acquire(FIRST).await?;
        let answered = asked.elapsed();
        // From here a failed check gives the lock back, so the next probe finds it free.
        match p.while_held(&grant, asked).await {
            Ok(()) => {
                p.release(FIRST, &grant).await?;
                break;
            }
            Err(Held::Deviation(e)) => {
                let _ = t.adapter.release(FIRST, PROBE_LOCK, &grant).await;
                return Err(e);
            }
            // Legal: the lease may have run out before the checks were made. Not a deviation;
            // said, and checked again with a lease the service's slowness fits in.
            Err(Held::Slow(what)) => {
                let _ = t.adapter.release(FIRST, PROBE_LOCK, &grant).await;
                let longer = (p.ttl_ms * 2).max(answered.as_millis() as u64 * 4);
                // After an unanswered wait, the lock may go to that wait once released, and a
                // new pass would wait behind it: no pass more.
                let again = attempt < SLOW_RETRIES && !p.waited;
                let next = if again {
                    format!("checking again with a {longer} ms lease")
                } else {
                    "the held checks are skipped: exclusivity is left to the run's checkers".into()
                };
                p.lines.push(format!(
                    "warning: the service answered slower than its lease: the grant to {FIRST} took {} ms to answer, and {what} after its {} ms lease could have ended; that is legal (the lease counts from the request), not a protocol deviation; {next}",
                    answered.as_millis(),
                    p.ttl_ms,
                ));
                p.ttl_ms = longer;
                if !again {
                    break;
                }
            }
        }
    }
    if p.waited {
        p.lines.push(format!(
            "note: the service did not answer {SECOND}'s acquire while {FIRST} held the lock (it waits for a held lock, whatever the wait asked); that wait may still be granted once the lock is free, so whether another client is granted after a release is left to the run's checkers"
        ));
    } else {
        let second = p.acquire(SECOND).await?;
        p.release(SECOND, &second).await?;
    }
    if matches!(t.readiness, Readiness::Http { .. }) {
        p.time().await;
    }
    Ok(p.lines)
}

struct Probe<'a, 'b> {
    t: &'a ProbeTarget<'b>,
    lines: Vec<String>,
    /// The lease asked for now: the target's, longer after a grant answered slower than it.
    ttl_ms: u64,
    /// The acquire sent while `probe-1` held the lock was not answered (the service waits
    /// for a held lock): it may still be granted once the lock is free, to a request nobody
    /// reads, so the lock's later grants prove nothing about the service.
    waited: bool,
}

/// Why the checks made while `probe-1` holds the lock stopped.
enum Held {
    /// What the service did is not what lockpick expects.
    Deviation(ProbeError),
    /// What it did is legal because `probe-1`'s lease may have ended first (what happened).
    Slow(String),
}

impl From<ProbeError> for Held {
    fn from(e: ProbeError) -> Held {
        Held::Deviation(e)
    }
}

impl Probe<'_, '_> {
    fn http(&self) -> Result<reqwest::Client, ProbeError> {
        reqwest::Client::builder()
            .timeout(self.t.op_timeout)
            .connect_timeout(self.t.op_timeout)
            .no_proxy()
            .build()
            .map_err(|e| self.failed(format!("cannot build an HTTP client: {e}")))
    }

    fn failed(&self, line: String) -> ProbeError {
        ProbeError {
            line,
            transcript: self.lines.clone(),
        }
    }

    /// `request answered answer; expected expected`, with the transcript so far.
    fn unexpected(&self, request: &str, answer: &str, expected: &str) -> ProbeError {
        self.failed(format!("{request} answered {answer}; expected {expected}"))
    }

    fn note(&mut self, request: &str, answer: &str) {
        self.lines.push(format!("{request} -> {answer}"));
    }

    /// A plain GET: the status and the abridged body, or the transport's reason.
    async fn get(&self, path: &str) -> Result<(u16, String), String> {
        let http = self.http().map_err(|e| e.line)?;
        let url = format!("{}{path}", self.t.url.trim_end_matches('/'));
        match http.get(&url).send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let body = r.bytes().await.map(|b| snippet(&b)).unwrap_or_default();
                Ok((status, body))
            }
            Err(e) => Err(match classify_error(&e) {
                Reply::Fail(e) | Reply::Info(e) => answer_of_error(&e),
                Reply::Ok(_) => String::new(),
            }),
        }
    }

    async fn health(&mut self) -> Result<(), ProbeError> {
        let path = match self.t.readiness {
            Readiness::Http { path } => path,
            r => return self.ready(r).await,
        };
        let request = format!("GET {}{path}", self.t.url.trim_end_matches('/'));
        match self.get(path).await {
            Ok((200, body)) => {
                self.note(&request, &format!("200 {body}"));
                Ok(())
            }
            Ok((status, body)) => {
                Err(self.unexpected(&request, &format!("{status} {body}"), "200"))
            }
            Err(why) => Err(self.unexpected(&request, &why, "200")),
        }
    }

    /// A readiness check that is not HTTP: the service's own exchange.
    async fn ready(&mut self, r: &Readiness) -> Result<(), ProbeError> {
        let Some((host, port)) = crate::service::host_port(self.t.url) else {
            return Err(self.failed(format!("{} names no host and port", self.t.url)));
        };
        let request = r.target(&host, port);
        match r.check(&host, port, self.t.op_timeout).await {
            Ok(()) => {
                self.note(&request, "ready");
                Ok(())
            }
            // `why` says what came back and what was expected, or that nothing did.
            Err(why) => Err(self.failed(format!("{request}: {why}"))),
        }
    }

    /// An acquire that must be granted, with a numeric token where the service gives them.
    async fn acquire(&mut self, client: &str) -> Result<Grant, ProbeError> {
        let wire = self.t.adapter.lock_wire("acquire", PROBE_LOCK);
        let request = format!("{} ({client})", wire.request);
        let reply = self
            .t
            .adapter
            .acquire(client, PROBE_LOCK, self.ttl_ms, 0, None)
            .await;
        let answer = answer_of(&reply, &wire);
        let fencing = self.t.tokens == Tokens::Fencing;
        let expected = match fencing {
            true => format!("{} with a numeric \"token\"", wire.ok),
            false => wire.ok.clone(),
        };
        let Reply::Ok(body) = &reply else {
            return Err(self.unexpected(&request, &answer, &expected));
        };
        let grant = Grant::from_answer(body);
        if body.get(UNREAD).is_some() || (fencing && grant.token.is_none()) {
            return Err(self.unexpected(&request, &answer, &expected));
        }
        self.ttl_is_numeric(&request, &answer, body, &wire)?;
        self.note(&request, &answer);
        Ok(grant)
    }

    /// A `ttl_ms` the adapter read must be a number of ms.
    fn ttl_is_numeric(
        &self,
        request: &str,
        answer: &str,
        body: &Value,
        wire: &Wire,
    ) -> Result<(), ProbeError> {
        match body.get("ttl_ms") {
            Some(t) if t.as_u64().is_none() => Err(self.unexpected(
                request,
                answer,
                &format!("{} with a numeric \"ttl_ms\" (or none)", wire.ok),
            )),
            _ => Ok(()),
        }
    }

    /// While `probe-1` holds the lock: `probe-2` is not granted it, `probe-1` renews, and the
    /// fenced resource takes a write with the token and reads it back. `asked`: when
    /// `probe-1`'s acquire was sent, from which its lease surely lasts `ttl * (1 - drift)`;
    /// past that, a grant to `probe-2` or a refused renew is legal ([`Held::Slow`]).
    async fn while_held(&mut self, grant: &Grant, asked: Instant) -> Result<(), Held> {
        let lease_ms = self.ttl_ms as f64 * (1.0 - self.t.drift.max(0.0));
        let surely_until = asked + Duration::from_secs_f64(lease_ms.max(0.0) / 1000.0);
        let a = self.t.adapter;
        let wire = a.lock_wire("acquire", PROBE_LOCK);
        let request = format!("{} ({SECOND}, while {FIRST} holds it)", wire.request);
        // A service that waits for a held lock whatever the wait asked (etcd's lock/lock) would
        // wait out probe-1's lease, which nothing renews here, and then grant it legally: the
        // probe stops listening at half that lease (or twice what the grant took, for a
        // service slow to answer anything), and no answer by then is no grant (the request is
        // dropped; the wait it started is the run's checkers' to judge, below).
        let half_lease = Duration::from_secs_f64(lease_ms.max(0.0) / 2000.0);
        let listen = half_lease.max(asked.elapsed() * 2).min(self.t.op_timeout);
        let asking = a.acquire(SECOND, PROBE_LOCK, self.ttl_ms, 0, None);
        let reply = tokio::time::timeout(listen, asking)
            .await
            .unwrap_or_else(|_| {
                Reply::Info(with_detail(
                    "timeout",
                    &format!("no answer within {} ms", listen.as_millis()),
                ))
            });
        // The grant took effect at some instant before its answer: legal if that may be
        // after the first lease ended (a service that waited for it, whatever the wait asked).
        let answered_at = Instant::now();
        let answer = answer_of(&reply, &wire);
        let expected = format!("{} (the lock is held)", wire.refused);
        self.waited |= matches!(reply, Reply::Info(_));
        match &reply {
            Reply::Ok(body) => {
                let _ = a
                    .release(SECOND, PROBE_LOCK, &Grant::from_answer(body))
                    .await;
                if answered_at >= surely_until {
                    self.note(&request, &answer);
                    return Err(Held::Slow(format!("{SECOND} was granted the lock")));
                }
                return Err(self.unexpected(&request, &answer, &expected).into());
            }
            // A refusal in the service's words, or (a service that waits for a held lock, as
            // etcd does) no answer within the wait: either way not granted.
            Reply::Fail(e) | Reply::Info(e)
                if matches!(
                    kind_of(reason_of(e)),
                    ReasonKind::Refused | ReasonKind::Lost
                ) => {}
            _ => return Err(self.unexpected(&request, &answer, &expected).into()),
        }
        self.note(&request, &answer);

        let wire = a.lock_wire("renew", PROBE_LOCK);
        let request = format!("{} ({FIRST}, {})", wire.request, named(grant));
        let renew_at = Instant::now();
        let reply = a.renew(FIRST, PROBE_LOCK, grant, self.ttl_ms).await;
        let answer = answer_of(&reply, &wire);
        let Reply::Ok(body) = &reply else {
            let refused =
                matches!(&reply, Reply::Fail(e) if kind_of(reason_of(e)) == ReasonKind::Refused);
            if refused && renew_at >= surely_until {
                self.note(&request, &answer);
                return Err(Held::Slow("its renew was refused".into()));
            }
            return Err(self.unexpected(&request, &answer, &wire.ok).into());
        };
        if body.get("token").is_some_and(|t| t.as_u64().is_none()) {
            let expected = format!("{} with a numeric \"token\" (or none)", wire.ok);
            return Err(self.unexpected(&request, &answer, &expected).into());
        }
        self.ttl_is_numeric(&request, &answer, body, &wire)?;
        self.note(&request, &answer);

        if let (true, true, Some(token)) = (self.t.store, a.has_resource(), grant.token) {
            self.store_round_trip(token).await?;
        }
        Ok(())
    }

    async fn store_round_trip(&mut self, token: u64) -> Result<(), ProbeError> {
        let a = self.t.adapter;
        let wire = a.resource_wire("write", PROBE_LOCK);
        let request = format!("{} ({FIRST}, token {token}, value 1)", wire.request);
        let reply = a.write(FIRST, PROBE_LOCK, token, 1).await;
        let answer = answer_of(&reply, &wire);
        if !matches!(reply, Reply::Ok(_)) {
            return Err(self.unexpected(&request, &answer, &wire.ok));
        }
        self.note(&request, &answer);
        let wire = a.resource_wire("read", PROBE_LOCK);
        let request = format!("{} ({FIRST}, token {token})", wire.request);
        let reply = a.read(FIRST, PROBE_LOCK, token).await;
        let answer = answer_of(&reply, &wire);
        match &reply {
            Reply::Ok(body) if body.get("value").and_then(Value::as_i64) == Some(1) => {
                self.note(&request, &answer);
                Ok(())
            }
            _ => Err(self.unexpected(
                &request,
                &answer,
                &format!("{} with \"value\": 1 (the value just written)", wire.ok),
            )),
        }
    }

    async fn release(&mut self, client: &str, grant: &Grant) -> Result<(), ProbeError> {
        let wire = self.t.adapter.lock_wire("release", PROBE_LOCK);
        let request = format!("{} ({client}, {})", wire.request, named(grant));
        let reply = self.t.adapter.release(client, PROBE_LOCK, grant).await;
        let answer = answer_of(&reply, &wire);
        if !matches!(reply, Reply::Ok(_)) {
            return Err(self.unexpected(&request, &answer, &wire.ok));
        }
        self.note(&request, &answer);
        Ok(())
    }

    /// Only noted: a service without `/v1/time` is tested all the same, but the offsets clock
    /// faults cause cannot be observed on it.
    async fn time(&mut self) {
        let answer = match self.get("/v1/time").await {
            Ok((200, body)) => format!("200 {body}"),
            Ok((status, body)) => {
                // A body that starts with its status (`404 page not found`) is not said twice.
                let code = status.to_string();
                let body = body.strip_prefix(&code).map_or(&body[..], str::trim_start);
                format!(
                    "{status} {body} (noted, not a failure: a run then observes clock faults' \
                     offsets only on nodes whose clock it controls through the vdso backend, \
                     not through the service)"
                )
            }
            Err(why) => format!("{why} (noted, not a failure)"),
        };
        self.note("GET /v1/time", &answer);
    }
}

/// How the transcript names a grant: `token 7`, `grant 3f9a…`, `the session`.
fn named(g: &Grant) -> String {
    match (&g.token, &g.id) {
        (Some(t), _) => format!("token {t}"),
        (None, Some(id)) => format!("grant {id}"),
        (None, None) => "its session".into(),
    }
}

/// An answer as one line: `200 {"token":1}`, `409 held` (a refusal), `423 {"error":"held"}`,
/// `connect: refused (Connection refused (os error 111))`.
pub(crate) fn answer_of(reply: &Reply, wire: &Wire) -> String {
    match reply {
        Reply::Ok(body) => match body.get(UNREAD) {
            // The adapter could not read the token: show what came.
            Some(Value::String(raw)) => format!("{} {raw}", wire.ok),
            _ => format!("{} {}", wire.ok, snippet(body.to_string().as_bytes())),
        },
        Reply::Fail(e) | Reply::Info(e) => {
            let reason = reason_of(e);
            match kind_of(reason) {
                ReasonKind::Refused => format!("{} {reason}", wire.refused),
                _ => answer_of_error(e),
            }
        }
    }
}

/// A recorded error as an answer: `423 <body>` for a status, else `reason (detail)`.
fn answer_of_error(e: &str) -> String {
    let reason = reason_of(e);
    let detail = detail_of(e);
    match (status_of(reason), detail.is_empty()) {
        (Some(s), _) => format!("{s} {detail}").trim_end().to_string(),
        (None, true) => reason.to_string(),
        (None, false) => format!("{reason} ({detail})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_read_as_one_line() {
        let wire = Wire {
            request: "POST /v1/locks/x/acquire".into(),
            ok: "200".into(),
            refused: "409".into(),
        };
        let cases = [
            (Reply::Ok(json!({"token": "5"})), r#"200 {"token":"5"}"#),
            (Reply::Ok(json!({UNREAD: "<b>hi</b>"})), "200 <b>hi</b>"),
            (Reply::Fail("held".into()), "409 held"),
            (
                Reply::Info("http-423; {\"error\":\"held\"}".into()),
                r#"423 {"error":"held"}"#,
            ),
            (Reply::Info("http-201".into()), "201"),
            (
                Reply::Fail("connect: refused; Connection refused (os error 111)".into()),
                "connect: refused (Connection refused (os error 111))",
            ),
            (Reply::Info("timeout".into()), "timeout"),
        ];
        for (reply, want) in cases {
            assert_eq!(answer_of(&reply, &wire), want, "{reply:?}");
        }
    }
}
