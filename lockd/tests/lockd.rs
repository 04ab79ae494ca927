//! lockd over real HTTP: the correct service and each unsafe mode.

mod common;

use std::time::{Duration, Instant};

use common::{bounded, get, post, post_raw, start_lockd, Running};
use lockd::{serve_lockd, LockOrder, LockdConfig, LockdError, UnsafeMode, STATE_FILE_NAME};
use serde_json::{json, Value};

async fn acquire(
    http: &reqwest::Client,
    s: &Running,
    lock: &str,
    client: &str,
    ttl_ms: u64,
) -> (u16, Value) {
    let url = s.url(&format!("/v1/locks/{lock}/acquire"));
    post(
        http,
        &url,
        json!({"client": client, "ttl_ms": ttl_ms, "wait_ms": 0}),
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
) -> (u16, Value) {
    let url = s.url(&format!("/v1/locks/{lock}/renew"));
    post(
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
) -> (u16, Value) {
    let url = s.url(&format!("/v1/locks/{lock}/release"));
    post(http, &url, json!({"client": client, "token": token})).await
}

fn token(resp: &(u16, Value)) -> u64 {
    assert_eq!(resp.0, 200, "expected a grant, got {resp:?}");
    resp.1["token"].as_u64().expect("token is a u64")
}

fn error(code: &str) -> (u16, Value) {
    (409, json!({ "error": code }))
}

/// Polls until acquire stops answering `recovering`; returns the granted token.
async fn acquire_after_recovery(
    http: &reqwest::Client,
    s: &Running,
    lock: &str,
    ttl_ms: u64,
) -> u64 {
    for _ in 0..200 {
        let resp = acquire(http, s, lock, "p9", ttl_ms).await;
        if resp != error("recovering") {
            return token(&resp);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("still recovering after 200 polls");
}

#[tokio::test]
async fn grant_renew_release() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        let resp = acquire(&http, &s, "L0", "p1", 2000).await;
        let t1 = token(&resp);
        assert!(t1 > 0);
        assert_eq!(resp.1["ttl_ms"], 2000);
        assert_eq!(
            renew(&http, &s, "L0", "p1", t1, 3000).await,
            (200, json!({"token": t1, "ttl_ms": 3000}))
        );
        assert_eq!(release(&http, &s, "L0", "p1", t1).await, (200, json!({})));
        let t2 = token(&acquire(&http, &s, "L0", "p2", 2000).await);
        assert!(t2 > t1);
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn held_lock_is_refused_even_to_its_holder() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        token(&acquire(&http, &s, "L0", "p1", 5000).await);
        assert_eq!(acquire(&http, &s, "L0", "p2", 5000).await, error("held"));
        assert_eq!(acquire(&http, &s, "L0", "p1", 5000).await, error("held"));
        // Other locks are independent.
        token(&acquire(&http, &s, "L1", "p2", 5000).await);
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn lease_expires_after_ttl() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        let t1 = token(&acquire(&http, &s, "L0", "p1", 200).await);
        assert_eq!(acquire(&http, &s, "L0", "p2", 200).await, error("held"));
        tokio::time::sleep(Duration::from_millis(260)).await;
        // The expired holder can neither renew nor release.
        assert_eq!(
            renew(&http, &s, "L0", "p1", t1, 200).await,
            error("not-holder")
        );
        assert_eq!(
            release(&http, &s, "L0", "p1", t1).await,
            error("not-holder")
        );
        let t2 = token(&acquire(&http, &s, "L0", "p2", 200).await);
        assert!(t2 > t1);
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn renew_and_release_check_client_and_token() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        let t = token(&acquire(&http, &s, "L0", "p1", 5000).await);
        assert_eq!(
            renew(&http, &s, "L0", "p1", t + 1, 5000).await,
            error("not-holder")
        );
        assert_eq!(
            renew(&http, &s, "L0", "p2", t, 5000).await,
            error("not-holder")
        );
        assert_eq!(
            release(&http, &s, "L0", "p1", t - 1).await,
            error("not-holder")
        );
        assert_eq!(release(&http, &s, "L0", "p2", t).await, error("not-holder"));
        assert_eq!(
            renew(&http, &s, "other", "p1", t, 5000).await,
            error("not-holder")
        );
        // None of that disturbed the real holder.
        assert_eq!(acquire(&http, &s, "L0", "p2", 5000).await, error("held"));
        assert_eq!(release(&http, &s, "L0", "p1", t).await, (200, json!({})));
        assert_eq!(release(&http, &s, "L0", "p1", t).await, error("not-holder"));
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn tokens_strictly_increase() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        let mut last = 0;
        for i in 0..50 {
            let lock = if i % 2 == 0 { "even" } else { "odd" };
            let t = token(&acquire(&http, &s, lock, "p1", 1000).await);
            assert!(t > last, "token {t} after {last}");
            last = t;
            assert_eq!(release(&http, &s, lock, "p1", t).await.0, 200);
        }
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn wait_ms_waits_for_release_and_expiry() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        let acquire_url = s.url("/v1/locks/L0/acquire");

        // Freed by a release.
        let t1 = token(&acquire(&http, &s, "L0", "p1", 10_000).await);
        let waiter = {
            let (http, url) = (http.clone(), acquire_url.clone());
            tokio::spawn(async move {
                let started = Instant::now();
                let resp = post(
                    &http,
                    &url,
                    json!({"client":"p2","ttl_ms":300,"wait_ms":5000}),
                )
                .await;
                (resp, started.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(release(&http, &s, "L0", "p1", t1).await.0, 200);
        let (resp, waited) = waiter.await.unwrap();
        let t2 = token(&resp);
        assert!(t2 > t1);
        assert!(waited < Duration::from_secs(2), "waited {waited:?}");

        // Freed by expiry of p2's 300 ms lease.
        let started = Instant::now();
        let resp = post(
            &http,
            &acquire_url,
            json!({"client":"p3","ttl_ms":1000,"wait_ms":5000}),
        )
        .await;
        assert!(token(&resp) > t2);
        assert!(started.elapsed() < Duration::from_secs(2));

        // Not freed in time.
        let started = Instant::now();
        let resp = post(
            &http,
            &acquire_url,
            json!({"client":"p4","ttl_ms":1000,"wait_ms":100}),
        )
        .await;
        assert_eq!(resp, error("held"));
        assert!(started.elapsed() >= Duration::from_millis(100));
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn shutdown_wakes_parked_waiters() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        token(&acquire(&http, &s, "L0", "p1", 60_000).await);
        let waiter = {
            let (http, url) = (http.clone(), s.url("/v1/locks/L0/acquire"));
            tokio::spawn(async move {
                post(
                    &http,
                    &url,
                    json!({"client":"p2","ttl_ms":1000,"wait_ms":60_000}),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        s.stop().await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(
            waiter.await.unwrap(),
            (503, json!({"error":"shutting-down"}))
        );
    })
    .await
}

#[tokio::test]
async fn tokens_survive_restart_and_recovery_waits_out_old_leases() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let http = reqwest::Client::new();
        let s = start_lockd(dir.path(), None).await;
        let t1 = token(&acquire(&http, &s, "L0", "p1", 300).await);
        s.stop().await.unwrap();

        let state: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(STATE_FILE_NAME)).unwrap())
                .unwrap();
        assert!(state["reserved_token"].as_u64().unwrap() > t1, "{state}");
        assert!(state["max_ttl_ms"].as_u64().unwrap() >= 300, "{state}");

        let restarted = Instant::now();
        let s = start_lockd(dir.path(), None).await;
        assert_eq!(
            acquire(&http, &s, "L0", "p2", 300).await,
            error("recovering")
        );
        assert_eq!(
            acquire(&http, &s, "fresh", "p2", 300).await,
            error("recovering")
        );
        // The lease from the previous run is unknown now.
        assert_eq!(
            renew(&http, &s, "L0", "p1", t1, 300).await,
            error("not-holder")
        );
        assert_eq!(
            release(&http, &s, "L0", "p1", t1).await,
            error("not-holder")
        );
        let t2 = acquire_after_recovery(&http, &s, "L0", 300).await;
        assert!(
            restarted.elapsed() >= Duration::from_millis(300),
            "{:?}",
            restarted.elapsed()
        );
        assert!(t2 > t1, "token {t2} after restart, {t1} before");
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn fresh_data_dir_does_not_recover_and_is_created() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("a/b");
        let http = reqwest::Client::new();
        let s = start_lockd(&data_dir, None).await;
        token(&acquire(&http, &s, "L0", "p1", 1000).await);
        assert!(data_dir.join(STATE_FILE_NAME).is_file());
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn restart_without_grants_does_not_recover() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let http = reqwest::Client::new();
        start_lockd(dir.path(), None).await.stop().await.unwrap();
        let s = start_lockd(dir.path(), None).await;
        token(&acquire(&http, &s, "L0", "p1", 1000).await);
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn corrupt_state_refuses_to_start() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(STATE_FILE_NAME), "{\"version\":1,").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cfg = LockdConfig {
            data_dir: dir.path().to_owned(),
            unsafe_mode: None,
            peers: Vec::new(),
            advertise: None,
            order: LockOrder::Primary,
        };
        let err = serve_lockd(listener, cfg, std::future::pending())
            .await
            .unwrap_err();
        assert!(matches!(err, LockdError::CorruptState { .. }), "{err}");
        assert!(err.to_string().contains(STATE_FILE_NAME), "{err}");
    })
    .await
}

#[tokio::test]
async fn bad_requests_get_400() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        let url = s.url("/v1/locks/L0/acquire");
        let bodies = [
            "{not json".to_owned(),
            json!({"ttl_ms": 1000}).to_string(),
            json!({"client": "p1"}).to_string(),
            json!({"client": "p1", "ttl_ms": 0}).to_string(),
            json!({"client": "p1", "ttl_ms": 3_600_001}).to_string(),
            json!({"client": "p1", "ttl_ms": -5}).to_string(),
            json!({"client": "", "ttl_ms": 1000}).to_string(),
        ];
        for body in bodies {
            let (status, resp) = post_raw(&http, &url, body.clone()).await;
            assert_eq!(status, 400, "{body}: {resp}");
            let msg = resp["error"].as_str().unwrap();
            assert!(msg.starts_with("bad-request: "), "{msg}");
        }
        let (status, resp) = post_raw(&http, &s.url("/v1/locks/L0/renew"), "{}".to_owned()).await;
        assert_eq!(status, 400, "{resp}");

        let long = "x".repeat(300);
        let resp = acquire(&http, &s, &long, "p1", 1000).await;
        assert_eq!(resp.0, 400, "{resp:?}");

        // Names are percent-decoded path segments, so a slash can be part of one.
        let t = token(&acquire(&http, &s, "a%2Fb", "p1", 1000).await);
        assert_eq!(release(&http, &s, "a%2Fb", "p1", t).await.0, 200);

        assert_eq!(
            get(&http, &s.url("/v1/nope")).await,
            (404, json!({"error":"not-found"}))
        );
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn health_and_time() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), None).await;
        let http = reqwest::Client::new();
        assert_eq!(
            get(&http, &s.url("/v1/health")).await,
            (200, json!({"ok": true}))
        );
        let (status, first) = get(&http, &s.url("/v1/time")).await;
        assert_eq!(status, 200);
        let (_, second) = get(&http, &s.url("/v1/time")).await;
        let mono = |v: &Value| v["monotonic_ms"].as_u64().expect("monotonic_ms");
        assert!(mono(&second) >= mono(&first));
        // After 2020-01-01: a real unix time in ms, not seconds or a monotonic value.
        assert!(first["realtime_ms"].as_u64().expect("realtime_ms") > 1_577_836_800_000);
        s.stop().await.unwrap();
    })
    .await
}

// ---- unsafe modes: each must show its anti-pattern, or the harness cannot prove it catches it.

#[tokio::test]
async fn reuse_tokens_restarts_at_one() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let http = reqwest::Client::new();
        let mode = Some(UnsafeMode::ReuseTokens);
        let s = start_lockd(dir.path(), mode).await;
        assert_eq!(token(&acquire(&http, &s, "L0", "p1", 100).await), 1);
        assert_eq!(token(&acquire(&http, &s, "L1", "p1", 100).await), 2);
        s.stop().await.unwrap();
        let s = start_lockd(dir.path(), mode).await;
        // Recovery still applies; only the tokens are broken.
        assert_eq!(
            acquire(&http, &s, "L0", "p2", 100).await,
            error("recovering")
        );
        assert_eq!(acquire_after_recovery(&http, &s, "L0", 100).await, 1);
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn no_ttl_never_expires() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), Some(UnsafeMode::NoTtl)).await;
        let http = reqwest::Client::new();
        let t = token(&acquire(&http, &s, "L0", "p1", 100).await);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(acquire(&http, &s, "L0", "p2", 100).await, error("held"));
        assert_eq!(renew(&http, &s, "L0", "p1", t, 100).await.0, 200);
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn skip_token_check_accepts_stale_renew_and_release() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), Some(UnsafeMode::SkipTokenCheck)).await;
        let http = reqwest::Client::new();
        let t = token(&acquire(&http, &s, "L0", "p1", 5000).await);
        assert_eq!(
            renew(&http, &s, "L0", "p2", 999, 5000).await,
            (200, json!({"token": 999, "ttl_ms": 5000}))
        );
        assert_eq!(
            release(&http, &s, "L0", "p2", t - 1).await,
            (200, json!({}))
        );
        // p2's stale release freed p1's lock.
        token(&acquire(&http, &s, "L0", "p3", 5000).await);
        s.stop().await.unwrap();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racy_grants_one_lock_twice() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), Some(UnsafeMode::Racy)).await;
        let http = reqwest::Client::new();
        // Bounded retries in case one burst happens to be serialized.
        for round in 0..5 {
            let url = s.url(&format!("/v1/locks/race{round}/acquire"));
            let mut racers = tokio::task::JoinSet::new();
            for p in 0..20 {
                let (http, url) = (http.clone(), url.clone());
                racers.spawn(async move {
                    post(
                        &http,
                        &url,
                        json!({"client": format!("p{p}"), "ttl_ms": 5000}),
                    )
                    .await
                });
            }
            let mut tokens = Vec::new();
            while let Some(resp) = racers.join_next().await {
                let resp = resp.unwrap();
                if resp.0 == 200 {
                    tokens.push(token(&resp));
                }
            }
            if tokens.len() >= 2 {
                tokens.sort_unstable();
                tokens.dedup();
                assert!(tokens.len() >= 2, "granted tokens are distinct");
                s.stop().await.unwrap();
                return;
            }
        }
        panic!("racy mode never granted a lock twice in 5 bursts of 20");
    })
    .await
}

// A wall-clock jump cannot be faked in-process (it needs libfaketime or root), so this only
// shows that wall-clock leases grant and expire like monotonic ones when the clock is sane.
#[tokio::test]
async fn wall_clock_grants_and_expires() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let s = start_lockd(dir.path(), Some(UnsafeMode::WallClock)).await;
        let http = reqwest::Client::new();
        let t1 = token(&acquire(&http, &s, "L0", "p1", 200).await);
        assert_eq!(acquire(&http, &s, "L0", "p2", 200).await, error("held"));
        tokio::time::sleep(Duration::from_millis(260)).await;
        assert!(token(&acquire(&http, &s, "L0", "p2", 200).await) > t1);
        s.stop().await.unwrap();
    })
    .await
}
