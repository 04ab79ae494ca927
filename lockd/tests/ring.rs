//! The token-ring lockd (`--lock-order ring`) over real HTTP: one holder at a time with
//! increasing tokens across the members, a stopped holder takes the token with it (everyone is
//! then refused, and told how long the token has not been seen), and `ring-regenerate` makes a
//! new token after its timeout. (What a kill or a pause of the holder does under the harness's
//! own faults is tests/ring.rs at the workspace root.)

mod common;

use common::{bind, bounded, post, start_members, Running};
use lockd::{
    serve_lockd, LockOrder, LockdConfig, LockdError, RingOrder, UnsafeMode, REGENERATE_AFTER_MS,
};
use serde_json::{json, Value};

const RING: LockOrder = LockOrder::Ring(RingOrder { idle_ms: 5 });

async fn acquire(http: &reqwest::Client, n: &Running, client: &str, wait_ms: u64) -> (u16, Value) {
    let body = json!({"client": client, "ttl_ms": 5000, "wait_ms": wait_ms});
    post(http, &n.url("/v1/locks/L/acquire"), body).await
}

/// The member holding the token now, asked of each in turn.
async fn holder(http: &reqwest::Client, nodes: &[Running]) -> Option<usize> {
    for (i, n) in nodes.iter().enumerate() {
        let r = http.get(n.url("/v1/ring/token")).send().await.unwrap();
        if r.status() == 200 {
            return Some(i);
        }
    }
    None
}

#[tokio::test]
async fn one_holder_at_a_time_with_tokens_increasing_round_the_ring() {
    bounded(async {
        let tmp = tempfile::tempdir().unwrap();
        let nodes = start_members(tmp.path(), 3, None, RING).await;
        let http = reqwest::Client::new();
        let (s, a) = acquire(&http, &nodes[0], "a", 2000).await;
        assert_eq!(s, 200, "{a}");
        let t1 = a["token"].as_u64().unwrap();
        // The token stays with the member whose client holds the lock.
        assert_eq!(holder(&http, &nodes).await, Some(0));
        let (s, b) = acquire(&http, &nodes[1], "b", 300).await;
        assert_eq!((s, &b["error"]), (409, &json!("held")), "{b}");
        assert!(b["detail"].as_str().unwrap().contains("last here"), "{b}");
        // Renew and release go to the member that granted; another member does not know it.
        common::renew_and_release_where_granted(&http, &nodes[0], &nodes[2], "a", t1).await;
        let mut last = t1;
        for (i, client) in [(1, "b"), (2, "c"), (0, "d")] {
            let (s, g) = acquire(&http, &nodes[i], client, 2000).await;
            assert_eq!(s, 200, "{client}: {g}");
            let t = g["token"].as_u64().unwrap();
            assert!(t > last, "{client}: {t} after {last}");
            last = t;
            let release = json!({"client": client, "token": t});
            let (s, _) = post(&http, &nodes[i].url("/v1/locks/L/release"), release).await;
            assert_eq!(s, 200);
        }
        let (_, ring) = common::get(&http, &nodes[1].url("/v1/ring")).await;
        assert!(ring["counts"]["passes"].as_u64().unwrap() > 0, "{ring}");
        for n in nodes {
            n.stop().await.unwrap();
        }
    })
    .await;
}

/// Stops the member holding the token while its client holds the lock: the token goes with it.
async fn stop_the_holder(
    mode: Option<UnsafeMode>,
) -> (Vec<Running>, reqwest::Client, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mut nodes = start_members(tmp.path(), 3, mode, RING).await;
    let http = reqwest::Client::new();
    let (s, a) = acquire(&http, &nodes[1], "a", 2000).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(holder(&http, &nodes).await, Some(1));
    nodes.remove(1).stop().await.unwrap();
    (nodes, http, tmp)
}

#[tokio::test]
async fn a_stopped_holder_takes_the_token_with_it() {
    bounded(async {
        let (nodes, http, _tmp) = stop_the_holder(None).await;
        for (i, n) in nodes.iter().enumerate() {
            let (s, b) = acquire(&http, n, &format!("w{i}"), 2500).await;
            assert_eq!((s, &b["error"]), (409, &json!("held")), "{b}");
        }
        assert_eq!(holder(&http, &nodes).await, None);
        for n in nodes {
            n.stop().await.unwrap();
        }
    })
    .await;
}

#[tokio::test]
async fn ring_regenerate_makes_a_new_token_after_its_timeout() {
    bounded(async {
        let (nodes, http, _tmp) = stop_the_holder(Some(UnsafeMode::RingRegenerate)).await;
        let (s, b) = acquire(&http, &nodes[0], "w", REGENERATE_AFTER_MS + 2000).await;
        assert_eq!(s, 200, "{b}");
        let mut made = 0;
        for n in &nodes {
            let (_, ring) = common::get(&http, &n.url("/v1/ring")).await;
            made += ring["counts"]["regenerated"].as_u64().unwrap();
        }
        assert!(made >= 1, "a member made a token");
        for n in nodes {
            n.stop().await.unwrap();
        }
    })
    .await;
}

#[tokio::test]
async fn the_rings_unsafe_mode_needs_the_ring_and_the_ring_refuses_the_others() {
    for (mode, order, says) in [
        (
            UnsafeMode::RingRegenerate,
            LockOrder::Primary,
            "needs the ring order",
        ),
        (UnsafeMode::NoTiebreak, RING, "needs the timestamp order"),
        (UnsafeMode::Racy, RING, "not of the ring order"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = LockdConfig {
            data_dir: tmp.path().to_owned(),
            unsafe_mode: Some(mode),
            peers: Vec::new(),
            advertise: None,
            order,
        };
        let err = serve_lockd(bind().await, cfg, std::future::pending())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LockdError::InvalidCluster { reason } if reason.contains(says)),
            "{mode}: {err}"
        );
    }
}

/// A pass taken before a restart is not taken again after it: the sender resends a pass whose
/// answer it did not get, and the member's first incarnation may have granted under it.
#[tokio::test]
async fn a_pass_taken_before_a_restart_is_answered_as_taken() {
    bounded(async {
        let tmp = tempfile::tempdir().unwrap();
        let start = || LockdConfig {
            data_dir: tmp.path().to_owned(),
            unsafe_mode: None,
            peers: Vec::new(),
            advertise: None,
            order: RING,
        };
        let http = reqwest::Client::new();
        let pass = json!({"origin": 0, "generation": 7, "pass": 99, "max_token": 5});
        let n = common::start_lockd_on(bind().await, start());
        let (s, a) = post(&http, &n.url("/v1/peer/token"), pass.clone()).await;
        assert_eq!((s, &a["taken_before"]), (200, &json!(false)), "{a}");
        let (_, a) = post(&http, &n.url("/v1/peer/token"), pass.clone()).await;
        assert_eq!(a["taken_before"], json!(true), "a copy is not taken twice");
        n.stop().await.unwrap();
        let n = common::start_lockd_on(bind().await, start());
        let (s, a) = post(&http, &n.url("/v1/peer/token"), pass).await;
        assert_eq!((s, &a["taken_before"]), (200, &json!(true)), "{a}");
        n.stop().await.unwrap();
    })
    .await;
}
