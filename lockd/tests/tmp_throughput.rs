mod common;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_lockd(dir.path(), None).await;
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut set = tokio::task::JoinSet::new();
    for p in 0..16 {
        let http = http.clone();
        let base = s.base.clone();
        set.spawn(async move {
            let mut n = 0u64;
            let lock = format!("L{}", p % 8);
            while Instant::now() < deadline {
                let (st, v) = post(&http, &format!("{base}/v1/locks/{lock}/acquire"), json!({"client": format!("p{p}"), "ttl_ms": 2000})).await;
                n += 1;
                if st == 200 {
                    let t = v["token"].as_u64().unwrap();
                    post(&http, &format!("{base}/v1/locks/{lock}/release"), json!({"client": format!("p{p}"), "token": t})).await;
                    n += 1;
                }
            }
            n
        });
    }
    let mut total = 0;
    while let Some(n) = set.join_next().await { total += n.unwrap(); }
    eprintln!("ops/s = {}", total / 3);
    s.stop().await.unwrap();
}
