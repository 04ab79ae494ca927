//! The timestamp-ordered lockd (`--lock-order timestamp`) over real HTTP: one holder at a time
//! with increasing tokens in the correct order, a member that cannot hear from a peer refuses,
//! and `no-tiebreak` only exists with the order. (The tie experiment itself, which needs many
//! timed rounds, is tests/textbook.rs at the workspace root.)

mod common;

use common::{bind, bounded, post, start_members, Running};
use lockd::{serve_lockd, LockOrder, LockdConfig, LockdError, TimestampOrder, UnsafeMode};
use serde_json::json;

const ORDER: TimestampOrder = TimestampOrder {
    granularity_ms: 10,
    tiebreak: true,
};

async fn start_ordered(root: &std::path::Path, n: usize) -> Vec<Running> {
    start_members(root, n, None, LockOrder::Timestamp(ORDER)).await
}

#[tokio::test]
async fn one_holder_at_a_time_with_increasing_tokens() {
    bounded(async {
        let tmp = tempfile::tempdir().unwrap();
        let nodes = start_ordered(tmp.path(), 3).await;
        let http = reqwest::Client::new();
        let acquire = |n: &Running, client: &str, wait_ms: u64| {
            let url = n.url("/v1/locks/L/acquire");
            let body = json!({"client": client, "ttl_ms": 5000, "wait_ms": wait_ms});
            let http = http.clone();
            async move { post(&http, &url, body).await }
        };
        let (s, a) = acquire(&nodes[0], "a", 0).await;
        assert_eq!(s, 200, "{a}");
        let t1 = a["token"].as_u64().unwrap();
        // Another member's client waits behind the holder, and gives up.
        let (s, b) = acquire(&nodes[1], "b", 200).await;
        assert_eq!((s, &b["error"]), (409, &json!("held")), "{b}");
        // Renew and release go to the member that granted; another member does not know it.
        common::renew_and_release_where_granted(&http, &nodes[0], &nodes[2], "a", t1).await;
        let (s, b) = acquire(&nodes[1], "b", 1000).await;
        assert_eq!(s, 200, "{b}");
        assert!(b["token"].as_u64().unwrap() > t1, "{b}");
        for n in nodes {
            n.stop().await.unwrap();
        }
    })
    .await;
}

#[tokio::test]
async fn a_member_that_cannot_hear_from_a_peer_refuses() {
    bounded(async {
        let tmp = tempfile::tempdir().unwrap();
        let mut nodes = start_ordered(tmp.path(), 2).await;
        nodes.pop().unwrap().stop().await.unwrap();
        let http = reqwest::Client::new();
        let body = json!({"client": "a", "ttl_ms": 1000, "wait_ms": 0});
        let (s, a) = post(&http, &nodes[0].url("/v1/locks/L/acquire"), body).await;
        assert_eq!((s, &a["error"]), (503, &json!("peer-unreachable")), "{a}");
        nodes.pop().unwrap().stop().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn no_tiebreak_needs_the_timestamp_order() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LockdConfig {
        data_dir: tmp.path().to_owned(),
        unsafe_mode: Some(UnsafeMode::NoTiebreak),
        peers: Vec::new(),
        advertise: None,
        order: LockOrder::Primary,
    };
    let err = serve_lockd(bind().await, cfg, std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LockdError::InvalidCluster { reason } if reason.contains("timestamp")),
        "{err}"
    );
}
