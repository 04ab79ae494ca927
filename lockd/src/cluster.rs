//! Multi-node lockd: membership, the primary rule, and forwarding to the primary.
//!
//! The correct multi-node mode is deliberately simple: one primary holds all lock state and
//! the other members only relay to it. That keeps every safety argument of the single node
//! (one token counter, leases on one monotonic clock, recovery after restart) and gives up
//! availability: a member that cannot reach the primary refuses with 503. The `split-brain`
//! unsafe mode is the same relay plus the anti-pattern of granting locally when the relay
//! fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use crate::error::LockdError;
use crate::http::{ApiError, BODY_BYTES_MAX};

/// A relayed op that takes longer is answered `primary-unreachable`. Short, because the
/// client is waiting on us and counts its lease from before it sent the request.
pub const FORWARD_TIMEOUT_MS: u64 = 500;
/// Relays in flight at once; more are refused with 503 `forward-busy` (not sent, so surely
/// not applied). Also bounds the connections to the primary.
const FORWARDS_IN_FLIGHT_MAX: usize = 512;
const FORWARD_POOL_IDLE_PER_HOST: usize = 64;
const FORWARD_POOL_IDLE_TIMEOUT_MS: u64 = 30_000;
/// A membership larger than this is a configuration mistake, not a test.
pub(crate) const MEMBERS_MAX: usize = 64;
const ADDR_BYTES_MAX: usize = 256;

/// On every response of a multi-node lockd: the member whose lock table decided the answer
/// (the primary for a relayed answer).
pub const NODE_HEADER: &str = "x-lockd-node";
/// On a relayed request: the member that relayed it.
const FORWARDED_BY_HEADER: &str = "x-lockd-forwarded-by";
/// On a relayed request: the sender's sorted member list, so that a primary can refuse
/// relays from a member configured with a different membership (two primaries otherwise).
const MEMBERS_HEADER: &str = "x-lockd-members";

/// The primary of a membership: the smallest address, compared as strings (byte order), so
/// every member computes the same answer from the same list. `None` for no members.
///
/// Addresses are compared as written, so every member must spell each address the same way
/// (`127.0.0.1:7001` and `localhost:7001` are different members).
pub fn primary_of<'a>(members: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    members.into_iter().min()
}

/// Checks a `host:port` as the peers would dial it.
fn check_addr(what: &str, addr: &str) -> Result<(), LockdError> {
    let bad = |why: &str| LockdError::InvalidCluster {
        reason: format!("{what} `{addr}`: {why}; expected host:port"),
    };
    if addr.is_empty() || addr.len() > ADDR_BYTES_MAX {
        return Err(bad("empty or too long"));
    }
    // Visible ASCII only: the address also goes into a response header.
    if !addr.bytes().all(|b| b.is_ascii_graphic()) || addr.contains(['/', '@', '?', '#', ',']) {
        return Err(bad("contains a character not allowed in host:port"));
    }
    let (host, port) = addr.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    if host.is_empty() {
        return Err(bad("no host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(bad("bad port")),
    }
}

/// This node's place in a fixed membership.
pub(crate) struct Cluster {
    pub(crate) me: String,
    pub(crate) primary: String,
    /// Sorted, deduplicated, comma-joined.
    members: HeaderValue,
    pub(crate) node: HeaderValue,
    /// `None` on the primary.
    pub(crate) forwarder: Option<Forwarder>,
}

impl Cluster {
    /// `peers` may contain `me` (it is ignored), so a runner can pass the same list to all.
    pub(crate) fn new(me: String, peers: &[String]) -> Result<Cluster, LockdError> {
        check_addr("advertise address", &me)?;
        for p in peers {
            check_addr("peer", p)?;
        }
        let mut members: Vec<&str> = peers.iter().map(String::as_str).collect();
        members.push(&me);
        members.sort_unstable();
        members.dedup();
        if members.len() > MEMBERS_MAX {
            return Err(LockdError::InvalidCluster {
                reason: format!("{} members, at most {MEMBERS_MAX} allowed", members.len()),
            });
        }
        let primary = primary_of(members.iter().copied())
            .expect("members holds at least me")
            .to_owned();
        let header = |v: &str| {
            HeaderValue::from_str(v).map_err(|e| LockdError::InvalidCluster {
                reason: format!("`{v}` cannot go into a header: {e}"),
            })
        };
        let members_header = header(&members.join(","))?;
        let node = header(&me)?;
        let forwarder = if primary == me {
            None
        } else {
            Some(Forwarder::new(
                &primary,
                node.clone(),
                members_header.clone(),
            )?)
        };
        Ok(Cluster {
            me,
            primary,
            members: members_header,
            node,
            forwarder,
        })
    }

    pub(crate) fn members(&self) -> &str {
        self.members.to_str().unwrap_or("?")
    }
}

/// Whether this node serves a request from its own lock table or relays it.
pub(crate) enum Route<'a> {
    Local,
    Forward(&'a Forwarder),
}

/// Decides who serves a request. A relayed request is never relayed again (no loops): it is
/// served here if this node is the primary of the sender's membership, refused otherwise.
pub(crate) fn route<'a>(
    cluster: Option<&'a Cluster>,
    headers: &HeaderMap,
) -> Result<Route<'a>, ApiError> {
    if headers.contains_key(FORWARDED_BY_HEADER) {
        let Some(c) = cluster else {
            return Err(ApiError::Unavailable("membership-mismatch"));
        };
        if headers.get(MEMBERS_HEADER) != Some(&c.members) {
            return Err(ApiError::Unavailable("membership-mismatch"));
        }
        if c.forwarder.is_some() {
            return Err(ApiError::Unavailable("not-primary"));
        }
        return Ok(Route::Local);
    }
    match cluster.and_then(|c| c.forwarder.as_ref()) {
        Some(f) => Ok(Route::Forward(f)),
        None => Ok(Route::Local),
    }
}

/// Why a relay produced no answer from the primary.
#[derive(Debug)]
pub(crate) enum ForwardError {
    /// Not sent: too many relays in flight.
    Busy,
    /// This server is stopping; the relay, if sent, was abandoned.
    ShuttingDown,
    /// Connect, send, timeout or body error. The primary may have applied the op.
    Unreachable(String),
    /// The primary answered something no lockd sends.
    BadResponse(String),
}

impl ForwardError {
    pub(crate) fn to_api(&self) -> ApiError {
        match self {
            ForwardError::Busy => ApiError::Unavailable("forward-busy"),
            ForwardError::ShuttingDown => ApiError::Unavailable("shutting-down"),
            ForwardError::Unreachable(_) => ApiError::Unavailable("primary-unreachable"),
            ForwardError::BadResponse(_) => ApiError::Unavailable("primary-bad-response"),
        }
    }
}

/// Relays requests to the primary: at most one attempt each, bounded in time, size and
/// concurrency.
pub(crate) struct Forwarder {
    http: reqwest::Client,
    /// `http://<primary>`
    base: String,
    by: HeaderValue,
    members: HeaderValue,
    slots: Semaphore,
    /// For logging transitions only, so a long partition logs once, not once per request.
    reachable: AtomicBool,
}

/// The HTTP client one member talks to others with (`what` names it in the error).
pub(crate) fn member_client(connect_ms: u64, what: &str) -> Result<reqwest::Client, LockdError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(connect_ms))
        .pool_max_idle_per_host(FORWARD_POOL_IDLE_PER_HOST)
        .pool_idle_timeout(Duration::from_millis(FORWARD_POOL_IDLE_TIMEOUT_MS))
        .tcp_nodelay(true)
        // One attempt only: a retried acquire could be granted twice, and a retried peer
        // message would hide a lost peer.
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        // An HTTP_PROXY in the node's environment must not reroute lock traffic.
        .no_proxy()
        .build()
        .map_err(|e| LockdError::InvalidCluster {
            reason: format!("cannot build the {what} client: {e}"),
        })
}

impl Forwarder {
    fn new(primary: &str, by: HeaderValue, members: HeaderValue) -> Result<Forwarder, LockdError> {
        let http = member_client(FORWARD_TIMEOUT_MS, "relay")?;
        Ok(Forwarder {
            http,
            base: format!("http://{primary}"),
            by,
            members,
            slots: Semaphore::new(FORWARDS_IN_FLIGHT_MAX),
            reachable: AtomicBool::new(true),
        })
    }

    /// Sends `body` to the same path on the primary and returns its answer unchanged
    /// (status, body, content type and node header).
    pub(crate) async fn forward(
        &self,
        path_and_query: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Response, ForwardError> {
        let Ok(_slot) = self.slots.try_acquire() else {
            return Err(ForwardError::Busy);
        };
        let sent = self.send(path_and_query, body, timeout).await;
        match &sent {
            Err(ForwardError::Unreachable(e)) => {
                if self.reachable.swap(false, Ordering::Relaxed) {
                    warn!(primary = %self.base, "primary unreachable: {e}");
                } else {
                    debug!(primary = %self.base, "primary unreachable: {e}");
                }
            }
            Err(ForwardError::BadResponse(e)) => {
                warn!(primary = %self.base, "primary sent a response no lockd sends: {e}");
            }
            Ok(_) if !self.reachable.swap(true, Ordering::Relaxed) => {
                info!(primary = %self.base, "primary reachable again");
            }
            _ => {}
        }
        sent
    }

    async fn send(
        &self,
        path_and_query: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Response, ForwardError> {
        let url = format!("{}{path_and_query}", self.base);
        let unreachable = |e: reqwest::Error| ForwardError::Unreachable(e.to_string());
        // The timeout covers connect, send and reading the whole body.
        let mut resp = self
            .http
            .post(&url)
            .timeout(timeout)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(FORWARDED_BY_HEADER, self.by.clone())
            .header(MEMBERS_HEADER, self.members.clone())
            .body(body)
            .send()
            .await
            .map_err(unreachable)?;
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(unreachable)? {
            if bytes.len() + chunk.len() > BODY_BYTES_MAX {
                return Err(ForwardError::BadResponse(format!(
                    "body over {BODY_BYTES_MAX} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let status = StatusCode::from_u16(resp.status().as_u16())
            .map_err(|e| ForwardError::BadResponse(e.to_string()))?;
        let mut out = Response::new(Body::from(bytes));
        *out.status_mut() = status;
        for name in [CONTENT_TYPE, HeaderName::from_static(NODE_HEADER)] {
            if let Some(v) = resp.headers().get(&name) {
                out.headers_mut().insert(name, v.clone());
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary_is_the_smallest_address_as_a_string() {
        let m = ["127.0.0.1:9000", "127.0.0.1:10000", "127.0.0.2:1"];
        assert_eq!(primary_of(m), Some("127.0.0.1:10000"));
        assert_eq!(primary_of([]), None);
    }

    #[test]
    fn every_member_agrees_on_the_primary() {
        let all = ["n3:7000", "n1:7000", "n2:7000"];
        for me in all {
            let peers: Vec<String> = all.iter().map(|s| (*s).to_owned()).collect();
            let c = Cluster::new(me.to_owned(), &peers).unwrap();
            assert_eq!(c.primary, "n1:7000");
            assert_eq!(c.members(), "n1:7000,n2:7000,n3:7000");
            assert_eq!(c.forwarder.is_none(), me == "n1:7000");
        }
    }

    #[test]
    fn bad_addresses_are_refused() {
        for bad in [
            "",
            "n1",
            "n1:",
            ":7000",
            "n1:0",
            "n1:70000",
            "http://n1:7000",
            "n 1:7",
        ] {
            let err = Cluster::new("n0:7000".into(), &[bad.to_owned()]);
            assert!(
                matches!(err, Err(LockdError::InvalidCluster { .. })),
                "{bad} accepted"
            );
        }
        assert!(Cluster::new("[::1]:7000".into(), &["n1:7000".to_owned()]).is_ok());
    }

    #[test]
    fn relayed_requests_are_never_relayed_again() {
        let peers = vec!["n1:7000".to_owned(), "n2:7000".to_owned()];
        let primary = Cluster::new("n0:7000".into(), &peers).unwrap();
        let follower =
            Cluster::new("n2:7000".into(), &["n0:7000".into(), "n1:7000".into()]).unwrap();
        let mut relayed = HeaderMap::new();
        relayed.insert(FORWARDED_BY_HEADER, HeaderValue::from_static("n1:7000"));
        relayed.insert(MEMBERS_HEADER, primary.members.clone());
        assert!(matches!(route(Some(&primary), &relayed), Ok(Route::Local)));
        assert_eq!(
            route(Some(&follower), &relayed).err(),
            Some(ApiError::Unavailable("not-primary"))
        );
        assert_eq!(
            route(None, &relayed).err(),
            Some(ApiError::Unavailable("membership-mismatch"))
        );
        relayed.insert(MEMBERS_HEADER, HeaderValue::from_static("n0:7000,n1:7000"));
        assert_eq!(
            route(Some(&primary), &relayed).err(),
            Some(ApiError::Unavailable("membership-mismatch"))
        );
        let plain = HeaderMap::new();
        assert!(matches!(
            route(Some(&follower), &plain),
            Ok(Route::Forward(_))
        ));
        assert!(matches!(route(Some(&primary), &plain), Ok(Route::Local)));
        assert!(matches!(route(None, &plain), Ok(Route::Local)));
    }
}
