//! Multi-node lockd over real HTTP: three members in-process on loopback.

mod common;

use std::time::{Duration, Instant};

use common::{bind, bounded, get, start_cluster, start_lockd_on, Running};
use lockd::{
    primary_of, serve_lockd, LockOrder, LockdConfig, LockdError, UnsafeMode, NODE_HEADER,
    STATE_FILE_NAME,
};
use serde_json::{json, Value};

/// Status, body and the `X-Lockd-Node` header.
type Reply = (u16, Value, String);

async fn post_node(http: &reqwest::Client, url: &str, body: Value) -> Reply {
    let resp = http.post(url).body(body.to_string()).send().await.unwrap();
    let status = resp.status().as_u16();
    let node = resp
        .headers()
        .get(NODE_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, resp.json().await.unwrap(), node)
}

async fn acquire(
    http: &reqwest::Client,
    s: &Running,
    lock: &str,
    client: &str,
    ttl_ms: u64,
    wait_ms: u64,
) -> Reply {
    let url = s.url(&format!("/v1/locks/{lock}/acquire"));
    post_node(
        http,
        &url,
        json!({"client": client, "ttl_ms": ttl_ms, "wait_ms": wait_ms}),
    )
    .await
}

async fn renew(
    http: &reqwest::Client,
    s: &Running,
    lock: &str,
    client: &str,
    token: u64,
    ttl_ms: u64,
) -> Reply {
    let url = s.url(&format!("/v1/locks/{lock}/renew"));
    post_node(
        http,
        &url,
        json!({"client": client, "token": token, "ttl_ms": ttl_ms}),
    )
    .await
}

async fn release(
    http: &reqwest::Client,
    s: &Running,
    lock: &str,
    client: &str,
    token: u64,
) -> Reply {
    let url = s.url(&format!("/v1/locks/{lock}/release"));
    post_node(http, &url, json!({"client": client, "token": token})).await
}

/// The token of a grant decided by `node`.
fn token(resp: &Reply, node: &Running) -> u64 {
    assert_eq!(resp.0, 200, "expected a grant, got {resp:?}");
    assert_eq!(resp.2, node.addr, "granted by the wrong member: {resp:?}");
    resp.1["token"].as_u64().expect("token is a u64")
}

fn unreachable() -> (u16, Value) {
    (503, json!({"error": "primary-unreachable"}))
}

fn status_body(r: &Reply) -> (u16, Value) {
    (r.0, r.1.clone())
}

async fn stop_all(nodes: Vec<Running>) {
    for n in nodes {
        n.stop().await.unwrap();
    }
}

#[tokio::test]
async fn members_relay_to_the_primary() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let nodes = start_cluster(dir.path(), 3, None).await;
        let (p, a, b) = (&nodes[0], &nodes[1], &nodes[2]);
        assert_eq!(
            primary_of(nodes.iter().map(|n| n.addr.as_str())),
            Some(p.addr.as_str())
        );
        let http = reqwest::Client::new();

        // Granted through a member, from the primary's table and counter.
        let t1 = token(&acquire(&http, a, "L0", "p1", 5000, 0).await, p);
        assert_eq!(
            status_body(&acquire(&http, p, "L0", "p2", 5000, 0).await),
            (409, json!({"error": "held"}))
        );
        let held = acquire(&http, b, "L0", "p2", 5000, 0).await;
        assert_eq!(held, (409, json!({"error": "held"}), p.addr.clone()));
        // Renewed and released through the other member.
        assert_eq!(
            renew(&http, b, "L0", "p1", t1, 3000).await,
            (200, json!({"token": t1, "ttl_ms": 3000}), p.addr.clone())
        );
        assert_eq!(
            status_body(&renew(&http, b, "L0", "p1", t1 + 1, 3000).await),
            (409, json!({"error": "not-holder"}))
        );
        assert_eq!(
            release(&http, b, "L0", "p1", t1).await,
            (200, json!({}), p.addr.clone())
        );

        // The path is relayed as sent, still percent-encoded.
        let t = token(&acquire(&http, a, "a%2Fb", "p1", 1000, 0).await, p);
        assert_eq!(release(&http, b, "a%2Fb", "p1", t).await.0, 200);

        // One counter, whichever member is asked.
        let mut last = t1;
        for (i, via) in [p, a, b, a, b, p].into_iter().enumerate() {
            let lock = format!("L{i}");
            let t = token(&acquire(&http, via, &lock, "p1", 1000, 0).await, p);
            assert!(t > last, "token {t} after {last}");
            last = t;
        }

        // Bad requests, health and time are answered by the member itself.
        let bad = post_node(
            &http,
            &a.url("/v1/locks/L0/acquire"),
            json!({"client": "p1"}),
        )
        .await;
        assert_eq!((bad.0, bad.2.as_str()), (400, a.addr.as_str()));
        let resp = http.get(b.url("/v1/health")).send().await.unwrap();
        assert_eq!(resp.headers()[NODE_HEADER].to_str().unwrap(), b.addr);
        assert_eq!(get(&http, &a.url("/v1/time")).await.0, 200);

        // Only the primary keeps durable state.
        let with_state = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|d| d.as_ref().unwrap().path().join(STATE_FILE_NAME).is_file())
            .count();
        assert_eq!(with_state, 1);
        stop_all(nodes).await;
    })
    .await
}

#[tokio::test]
async fn wait_ms_is_relayed_beyond_the_forward_timeout() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let nodes = start_cluster(dir.path(), 3, None).await;
        let (p, a) = (&nodes[0], &nodes[1]);
        let http = reqwest::Client::new();
        let ttl_ms = lockd::FORWARD_TIMEOUT_MS + 300;
        let t1 = token(&acquire(&http, p, "L0", "p1", ttl_ms, 0).await, p);
        let started = Instant::now();
        let t2 = token(&acquire(&http, a, "L0", "p2", 1000, 3000).await, p);
        assert!(t2 > t1);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(lockd::FORWARD_TIMEOUT_MS),
            "{waited:?}"
        );
        stop_all(nodes).await;
    })
    .await
}

#[tokio::test]
async fn members_refuse_and_never_grant_without_the_primary() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = start_cluster(dir.path(), 3, None).await;
        let http = reqwest::Client::new();
        let t1 = token(
            &acquire(&http, &nodes[1], "L0", "p1", 5000, 0).await,
            &nodes[0],
        );
        nodes.remove(0).stop().await.unwrap();

        for via in &nodes {
            for lock in ["L0", "L1"] {
                let resp = acquire(&http, via, lock, "p2", 1000, 0).await;
                assert_eq!(status_body(&resp), unreachable(), "{resp:?}");
                assert_eq!(resp.2, via.addr);
            }
            let resp = acquire(&http, via, "L2", "p2", 1000, 200).await;
            assert_eq!(status_body(&resp), unreachable());
            assert_eq!(
                status_body(&renew(&http, via, "L0", "p1", t1, 1000).await),
                unreachable()
            );
            assert_eq!(
                status_body(&release(&http, via, "L0", "p1", t1).await),
                unreachable()
            );
            assert_eq!(get(&http, &via.url("/v1/health")).await.0, 200);
        }
        stop_all(nodes).await;
    })
    .await
}

#[tokio::test]
async fn relayed_requests_are_checked_and_never_relayed_again() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let nodes = start_cluster(dir.path(), 3, None).await;
        let members = nodes
            .iter()
            .map(|n| n.addr.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let http = reqwest::Client::new();
        let body = json!({"client": "p1", "ttl_ms": 1000}).to_string();
        let send = |node: &Running, members: String| {
            http.post(node.url("/v1/locks/L0/acquire"))
                .header("x-lockd-forwarded-by", "10.0.0.1:1")
                .header("x-lockd-members", members)
                .body(body.clone())
                .send()
        };
        let resp = send(&nodes[1], members.clone()).await.unwrap();
        assert_eq!(resp.status().as_u16(), 503);
        assert_eq!(
            resp.json::<Value>().await.unwrap(),
            json!({"error": "not-primary"})
        );
        let resp = send(&nodes[0], format!("{members},10.0.0.1:1"))
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 503);
        assert_eq!(
            resp.json::<Value>().await.unwrap(),
            json!({"error": "membership-mismatch"})
        );
        let resp = send(&nodes[0], members).await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        stop_all(nodes).await;
    })
    .await
}

/// A member whose primary accepts connections but never answers (paused, or cut off after
/// the handshake). The listener must stay alive for the test.
async fn member_of_silent_primary(
    dir: &std::path::Path,
    mode: Option<UnsafeMode>,
) -> (tokio::net::TcpListener, Running) {
    let silent = bind().await;
    let cfg = LockdConfig {
        data_dir: dir.to_owned(),
        unsafe_mode: mode,
        peers: vec![silent.local_addr().unwrap().to_string()],
        // Ranks after 127.0.0.1:*, so the silent listener is the primary; nobody dials it.
        advertise: Some("127.0.0.9:1".into()),
        order: LockOrder::Primary,
    };
    (silent, start_lockd_on(bind().await, cfg))
}

#[tokio::test]
async fn a_silent_primary_times_out_into_primary_unreachable() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let (_silent, m) = member_of_silent_primary(dir.path(), None).await;
        let http = reqwest::Client::new();
        let forward = Duration::from_millis(lockd::FORWARD_TIMEOUT_MS);
        for wait_ms in [0, 300] {
            let started = Instant::now();
            let resp = acquire(&http, &m, "L0", "p1", 1000, wait_ms).await;
            let took = started.elapsed();
            assert_eq!(status_body(&resp), unreachable());
            let bound = forward + Duration::from_millis(wait_ms);
            assert!(
                took >= bound && took < bound + Duration::from_secs(1),
                "{took:?}"
            );
        }
        let started = Instant::now();
        assert_eq!(
            status_body(&release(&http, &m, "L0", "p1", 1).await),
            unreachable()
        );
        assert!(started.elapsed() < forward + Duration::from_secs(1));
        m.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn stopping_a_member_ends_its_parked_relays() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = start_cluster(dir.path(), 3, None).await;
        let http = reqwest::Client::new();
        token(
            &acquire(&http, &nodes[0], "L0", "p1", 60_000, 0).await,
            &nodes[0],
        );
        let waiter = {
            let (http, url) = (http.clone(), nodes[1].url("/v1/locks/L0/acquire"));
            tokio::spawn(async move {
                post_node(
                    &http,
                    &url,
                    json!({"client": "p2", "ttl_ms": 1000, "wait_ms": 10_000}),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        nodes.remove(1).stop().await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        let resp = waiter.await.unwrap();
        assert_eq!(status_body(&resp), (503, json!({"error": "shutting-down"})));
        stop_all(nodes).await;
    })
    .await
}

// ---- split-brain: the anti-pattern the harness must catch as a double grant.

#[tokio::test]
async fn split_brain_members_grant_one_lock_twice_without_the_primary() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = start_cluster(dir.path(), 3, Some(UnsafeMode::SplitBrain)).await;
        let http = reqwest::Client::new();
        // While the primary is reachable, members relay like the correct mode.
        let t0 = token(
            &acquire(&http, &nodes[1], "L9", "p0", 5000, 0).await,
            &nodes[0],
        );
        nodes.remove(0).stop().await.unwrap();
        let (a, b) = (&nodes[0], &nodes[1]);

        let ta = token(&acquire(&http, a, "L0", "p1", 5000, 0).await, a);
        let tb = token(&acquire(&http, b, "L0", "p2", 5000, 0).await, b);
        // Each member's own counter: tokens repeat and go back below the primary's.
        assert_eq!((ta, tb), (1, 1));
        assert!(ta <= t0);
        // Locally granted leases are renewed and released locally; a member still refuses
        // what it does not know about.
        assert_eq!(
            renew(&http, a, "L0", "p1", ta, 5000).await,
            (200, json!({"token": ta, "ttl_ms": 5000}), a.addr.clone())
        );
        assert_eq!(
            status_body(&acquire(&http, a, "L0", "p3", 5000, 0).await),
            (409, json!({"error": "held"}))
        );
        assert_eq!(
            status_body(&renew(&http, a, "L0", "p2", tb, 5000).await),
            unreachable()
        );
        assert_eq!(
            status_body(&renew(&http, a, "L9", "p0", t0, 5000).await),
            unreachable()
        );
        assert_eq!(
            release(&http, a, "L0", "p1", ta).await,
            (200, json!({}), a.addr.clone())
        );
        token(&acquire(&http, a, "L0", "p3", 5000, 0).await, a);
        stop_all(nodes).await;
    })
    .await
}

#[tokio::test]
async fn split_brain_grants_locally_when_the_primary_is_silent() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let (_silent, m) = member_of_silent_primary(dir.path(), Some(UnsafeMode::SplitBrain)).await;
        let http = reqwest::Client::new();
        let started = Instant::now();
        let resp = acquire(&http, &m, "L0", "p1", 5000, 0).await;
        // Named by its advertise address, not the one it listens on.
        assert_eq!(
            resp,
            (
                200,
                json!({"token": 1, "ttl_ms": 5000}),
                "127.0.0.9:1".into()
            )
        );
        assert!(started.elapsed() >= Duration::from_millis(lockd::FORWARD_TIMEOUT_MS));
        m.stop().await.unwrap();
    })
    .await
}

// ---- configuration refused up front.

async fn start_err(cfg: LockdConfig, listener: tokio::net::TcpListener) -> LockdError {
    serve_lockd(listener, cfg, std::future::pending())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn bad_cluster_configs_refuse_to_start() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let cfg = |mode, peers: &[&str], advertise: Option<&str>| LockdConfig {
            data_dir: dir.path().to_owned(),
            unsafe_mode: mode,
            peers: peers.iter().map(|p| (*p).to_owned()).collect(),
            advertise: advertise.map(str::to_owned),
            order: LockOrder::Primary,
        };
        let cases = [
            (cfg(Some(UnsafeMode::SplitBrain), &[], None), "needs peers"),
            (cfg(None, &["127.0.0.1"], None), "127.0.0.1"),
            (
                cfg(None, &["127.0.0.1:1"], Some("http://x:1")),
                "http://x:1",
            ),
        ];
        for (cfg, needle) in cases {
            let err = start_err(cfg, bind().await).await;
            assert!(matches!(err, LockdError::InvalidCluster { .. }), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
        // Bound to every interface: the peers know this node by some other address.
        let any = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
        let err = start_err(cfg(None, &["127.0.0.1:1"], None), any).await;
        assert!(err.to_string().contains("advertise"), "{err}");
        // No peers: the single node, advertise or not, without the node header.
        let s = start_lockd_on(bind().await, cfg(None, &[], Some("127.0.0.1:1")));
        let resp = reqwest::get(s.url("/v1/health")).await.unwrap();
        assert!(resp.headers().get(NODE_HEADER).is_none());
        s.stop().await.unwrap();
    })
    .await
}
