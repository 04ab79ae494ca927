//! The fenced store over real HTTP, in each fence mode.

mod common;

use common::{bounded, get, post, post_raw, start_store, Running};
use lockd::FenceMode;
use serde_json::{json, Value};

async fn read(http: &reqwest::Client, s: &Running, key: &str, token: u64) -> (u16, Value) {
    let url = s.url(&format!("/v1/store/{key}/read"));
    post(http, &url, json!({"client": "p1", "token": token})).await
}

async fn write(
    http: &reqwest::Client,
    s: &Running,
    key: &str,
    token: u64,
    value: i64,
) -> (u16, Value) {
    let url = s.url(&format!("/v1/store/{key}/write"));
    post(
        http,
        &url,
        json!({"client": "p1", "token": token, "value": value}),
    )
    .await
}

fn stale(fence: u64) -> (u16, Value) {
    (409, json!({"error": "stale-token", "fence": fence}))
}

#[tokio::test]
async fn fence_all_rejects_stale_reads_and_writes() {
    bounded(async {
        let s = start_store(FenceMode::All).await;
        let http = reqwest::Client::new();
        assert_eq!(
            get(&http, &s.url("/v1/store/k")).await,
            (200, json!({"value":0,"fence":0,"seq":0}))
        );
        assert_eq!(
            write(&http, &s, "k", 5, 16).await,
            (200, json!({"seq":1,"fence":5}))
        );
        assert_eq!(read(&http, &s, "k", 4).await, stale(5));
        assert_eq!(
            read(&http, &s, "k", 7).await,
            (200, json!({"value":16,"fence":7,"seq":1}))
        );
        // The read by 7 fenced out 6's read-modify-write.
        assert_eq!(write(&http, &s, "k", 6, 17).await, stale(7));
        assert_eq!(
            write(&http, &s, "k", 7, -3).await,
            (200, json!({"seq":2,"fence":7}))
        );
        assert_eq!(
            get(&http, &s.url("/v1/store/k")).await,
            (200, json!({"value":-3,"fence":7,"seq":2}))
        );
        // Keys are independent.
        assert_eq!(
            read(&http, &s, "other", 1).await,
            (200, json!({"value":0,"fence":1,"seq":0}))
        );
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn fence_write_checks_only_writes() {
    bounded(async {
        let s = start_store(FenceMode::Write).await;
        let http = reqwest::Client::new();
        assert_eq!(
            write(&http, &s, "k", 5, 16).await,
            (200, json!({"seq":1,"fence":5}))
        );
        assert_eq!(
            read(&http, &s, "k", 1).await,
            (200, json!({"value":16,"fence":5,"seq":1}))
        );
        assert_eq!(
            read(&http, &s, "k", 9).await,
            (200, json!({"value":16,"fence":5,"seq":1}))
        );
        assert_eq!(write(&http, &s, "k", 4, 17).await, stale(5));
        // The read by 9 did not move the fence, so 6's write still lands.
        assert_eq!(
            write(&http, &s, "k", 6, 17).await,
            (200, json!({"seq":2,"fence":6}))
        );
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn fence_none_accepts_everything_but_tracks_the_fence() {
    bounded(async {
        let s = start_store(FenceMode::None).await;
        let http = reqwest::Client::new();
        assert_eq!(
            write(&http, &s, "k", 5, 16).await,
            (200, json!({"seq":1,"fence":5}))
        );
        assert_eq!(
            write(&http, &s, "k", 3, 17).await,
            (200, json!({"seq":2,"fence":5}))
        );
        assert_eq!(
            read(&http, &s, "k", 1).await,
            (200, json!({"value":17,"fence":5,"seq":2}))
        );
        assert_eq!(
            read(&http, &s, "k", 8).await,
            (200, json!({"value":17,"fence":8,"seq":2}))
        );
        s.stop().await.unwrap();
    })
    .await
}

/// `one-unfenced`: the register named ...0 takes any token (as `none`), every other refuses a
/// stale one (as `all`), whichever is created first.
#[tokio::test]
async fn fence_one_unfenced_leaves_only_the_first_register_open() {
    bounded(async {
        let s = start_store(FenceMode::OneUnfenced).await;
        let http = reqwest::Client::new();
        for key in ["balance-A1", "balance-A0", "balance-A10"] {
            assert_eq!(
                write(&http, &s, key, 5, 16).await,
                (200, json!({"seq":1,"fence":5}))
            );
        }
        // The register numbered 0: a stale read and write land.
        assert_eq!(
            read(&http, &s, "balance-A0", 3).await,
            (200, json!({"value":16,"fence":5,"seq":1}))
        );
        assert_eq!(
            write(&http, &s, "balance-A0", 3, 9).await,
            (200, json!({"seq":2,"fence":5}))
        );
        // Every other, the first created and one numbered 10 included: refused as in `all`.
        for key in ["balance-A1", "balance-A10"] {
            assert_eq!(read(&http, &s, key, 3).await, stale(5));
            assert_eq!(write(&http, &s, key, 3, 9).await, stale(5));
        }
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn store_bad_requests_get_400() {
    bounded(async {
        let s = start_store(FenceMode::All).await;
        let http = reqwest::Client::new();
        let url = s.url("/v1/store/k/write");
        let bodies = [
            "nope".to_owned(),
            json!({"client":"p1","token":1}).to_string(),
            json!({"client":"p1","token":1,"value":"17"}).to_string(),
            json!({"client":"p1","token":-1,"value":17}).to_string(),
        ];
        for body in bodies {
            let (status, resp) = post_raw(&http, &url, body.clone()).await;
            assert_eq!(status, 400, "{body}: {resp}");
            assert!(
                resp["error"].as_str().unwrap().starts_with("bad-request: "),
                "{resp}"
            );
        }
        let long = "k".repeat(300);
        assert_eq!(read(&http, &s, &long, 1).await.0, 400);
        assert_eq!(
            get(&http, &s.url("/v1/health")).await,
            (200, json!({"ok": true}))
        );
        // Rejected requests left no trace.
        assert_eq!(
            get(&http, &s.url("/v1/store/k")).await,
            (200, json!({"value":0,"fence":0,"seq":0}))
        );
        s.stop().await.unwrap();
    })
    .await
}
