//! The etcd adapter against a real etcd (Debian's etcd-server), one member on loopback: tokens
//! are the lock key's create_revision, renew/release follow the lease, and the txn fence
//! refuses a stale holder's read and write.

use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workloads::{EtcdClient, Reply};

struct Etcd {
    child: Child,
    url: String,
    started: Instant,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    nemesis::free_port(std::net::Ipv4Addr::LOCALHOST.into()).unwrap()
}

/// Starts a one-member etcd, or None (with a visible skip) when it is not installed, unless
/// LOCKPICK_SYSTEM_TESTS=1, where that is a failure.
fn etcd() -> Option<Etcd> {
    let found = Command::new("etcd")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
            panic!("etcd is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install etcd-server)");
        }
        eprintln!("SKIPPED: etcd not found (apt-get install etcd-server)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (client, peer) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new("etcd")
        .args(["--name", "e1", "--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
        ])
        .args([
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
        ])
        .args(["--initial-cluster", &format!("e1={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let e = Etcd {
        child,
        url,
        started: Instant::now(),
        _dir: dir,
    };
    let start = Instant::now();
    // Ready once /health answers (bounded).
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "etcd did not start"
        );
        let ok = std::net::TcpStream::connect(("127.0.0.1", client)).is_ok();
        if ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(e)
}

/// Every client's history clock counts from the etcd's start, so their times compare.
fn client_of(e: &Etcd, timeout_ms: u64) -> EtcdClient {
    let start = e.started;
    let clock = Arc::new(move || start.elapsed().as_nanos() as u64);
    EtcdClient::new(&e.url, "/v3", Duration::from_millis(timeout_ms), clock).unwrap()
}

fn client(url: &str, timeout_ms: u64) -> EtcdClient {
    let start = Instant::now();
    let clock = Arc::new(move || start.elapsed().as_nanos() as u64);
    EtcdClient::new(url, "/v3", Duration::from_millis(timeout_ms), clock).unwrap()
}

fn now_ns(e: &Etcd) -> u64 {
    e.started.elapsed().as_nanos() as u64
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

fn ok(r: Reply) -> serde_json::Value {
    match r {
        Reply::Ok(v) => v,
        other => panic!("expected ok, got {other:?}"),
    }
}

#[tokio::test]
async fn locks_tokens_and_fenced_store_against_real_etcd() {
    let Some(e) = etcd() else { return };
    let c = client(&e.url, 1500);
    // etcd may answer 503 for a moment after start: retry the first grant, bounded.
    let mut first = c.acquire("p1", "L0", 2000, 0).await;
    for _ in 0..50 {
        if matches!(first, Reply::Ok(_)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        first = c.acquire("p1", "L0", 2000, 0).await;
    }
    let g1 = ok(first);
    let t1 = g1["token"].as_u64().unwrap();
    assert!(t1 > 0);
    assert!(g1["lease_last_ok_ns"].as_u64().is_some());
    assert!(g1["lease_ttl_ms"].as_u64().unwrap() >= 2000);

    // Held: a second client waits and gives up at its timeout (indeterminate, as it may have
    // been granted at the last moment; the adapter revokes its lease).
    let c2 = client(&e.url, 700);
    assert!(matches!(
        c2.acquire("p2", "L0", 2000, 0).await,
        Reply::Info(_)
    ));

    // Renew keeps the token; a stranger cannot renew.
    assert_eq!(ok(c.renew("p1", "L0", t1, 2000).await)["token"], t1);
    assert!(matches!(
        c.renew("p9", "L0", t1, 2000).await,
        Reply::Fail(_)
    ));

    // The fenced store: read, write value+1, read it back. `seq` is the key's own version,
    // which numbers its writes: 0 before the first, 1 after it.
    let r0 = ok(c.read("p1", "counter-L0", t1).await);
    assert_eq!((&r0["value"], &r0["seq"]), (&json!(0), &json!(0)), "{r0}");
    let w = ok(c.write("p1", "counter-L0", t1, 1).await);
    assert_eq!(w["seq"], json!(1), "{w}");
    let r1 = ok(c.read("p1", "counter-L0", t1).await);
    assert_eq!((&r1["value"], &r1["seq"]), (&json!(1), &json!(1)), "{r1}");

    // Release; the next grant carries a higher token.
    ok(c.release("p1", "L0", t1).await);
    let g2 = ok(c.acquire("p3", "L0", 2000, 0).await);
    let t2 = g2["token"].as_u64().unwrap();
    assert!(t2 > t1);

    // The old holder's token no longer passes the fence.
    assert!(
        matches!(c.write("p1", "counter-L0", t1, 7).await, Reply::Fail(ref e) if e == "stale-token")
    );
    assert!(matches!(c.release("p1", "L0", t1).await, Reply::Fail(_)));
    ok(c.write("p3", "counter-L0", t2, 2).await);
    assert_eq!(ok(c.inspect("counter-L0").await)["value"], 2);
    ok(c.release("p3", "L0", t2).await);
}

#[tokio::test]
async fn an_expired_lease_is_a_failed_renew() {
    let Some(e) = etcd() else { return };
    let c = client(&e.url, 1500);
    let mut g = c.acquire("p1", "L1", 1000, 0).await;
    for _ in 0..50 {
        if matches!(g, Reply::Ok(_)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        g = c.acquire("p1", "L1", 1000, 0).await;
    }
    let g = ok(g);
    let t = g["token"].as_u64().unwrap();
    let ttl_ms = g["ttl_ms"].as_u64().unwrap();
    // Past the granted TTL (etcd may have raised the 1 s asked for) the lease is gone.
    tokio::time::sleep(Duration::from_millis(ttl_ms + 1500)).await;
    assert!(matches!(c.renew("p1", "L1", t, 1000).await, Reply::Fail(_)));
    // And the lock is free again, with a higher token.
    let g2 = ok(c.acquire("p2", "L1", 1000, 0).await);
    assert!(g2["token"].as_u64().unwrap() > t);
}

/// Grants the first acquire of `lock` once etcd has settled (it may answer 503 just after
/// start): bounded retries.
async fn first_grant(c: &EtcdClient, client: &str, lock: &str, ttl_ms: u64) -> serde_json::Value {
    let mut g = c.acquire(client, lock, ttl_ms, 0).await;
    for _ in 0..50 {
        if matches!(g, Reply::Ok(_)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        g = c.acquire(client, lock, ttl_ms, 0).await;
    }
    ok(g)
}

/// etcd#11456 as the adapter records it: a client waits in lock/lock while stalled (its
/// keepalives stop, as a paused process's would) past its lease; etcd deletes its lock key with
/// the lease, and when the holder releases, answers the lock with 200 all the same. The grant is
/// recorded ok (never info), without a token, with the evidence that proves it from etcd's own
/// records: the lock key is absent at the revision the answer carries.
#[tokio::test]
async fn a_waiter_whose_lease_expired_is_granted_and_its_key_is_absent_at_the_revision() {
    let Some(e) = etcd() else { return };
    let holder = client_of(&e, 1500);
    let g1 = first_grant(&holder, "p1", "L2", 10_000).await;
    let t1 = g1["token"].as_u64().unwrap();
    assert_eq!(g1["key_at_revision"], "present", "{g1}");

    let waiter = Arc::new(client_of(&e, 1500));
    let pauses = Arc::new(workloads::PauseBoard::new());
    // p2 is stalled for longer than its 2 s lease: no keepalive goes out meanwhile.
    pauses.stall_client("p2", std::time::Instant::now() + Duration::from_secs(6));
    let w = {
        let (waiter, pauses) = (waiter.clone(), pauses.clone());
        tokio::spawn(async move {
            waiter
                .acquire_as("p2", "L2", 2000, 20_000, Some(&pauses))
                .await
        })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!w.is_finished(), "the waiter must still be waiting");
    ok(holder.release("p1", "L2", t1).await);
    let g2 = ok(w.await.unwrap());
    assert_eq!(g2["key_at_revision"], "absent", "{g2}");
    assert!(g2.get("token").is_none(), "{g2}");
    let rev = g2["answer_revision"].as_u64().unwrap();
    assert!(rev > t1, "{g2}");
    let key = g2["lock_key"].as_str().unwrap();
    assert!(key.starts_with("L2/"), "{g2}");
    assert!(g2["lease_id"].as_str().is_some(), "{g2}");
    assert_eq!(g2["lease_ttl_ms"], 2000, "{g2}");
    // No keepalive was sent: the lease was last kept alive by its grant, seconds before.
    assert!(
        g2["lease_last_ok_ns"].as_u64().unwrap() + 4_000_000_000 < now_ns(&e),
        "{g2}"
    );
    assert!(g2["lease_from_ns"].as_u64().unwrap() <= g2["lease_last_ok_ns"].as_u64().unwrap());

    // What an etcd engineer would run by hand: kv/range of the key at that revision.
    let http = reqwest::Client::new();
    let at = |rev: u64| {
        http.post(format!("{}/v3/kv/range", e.url))
            .json(&serde_json::json!({
                "key": base64_of(key), "revision": rev.to_string(),
            }))
            .send()
    };
    let r: serde_json::Value = at(rev).await.unwrap().json().await.unwrap();
    assert!(r.get("kvs").is_none(), "{r}");
    // ... and the key did exist while the client waited.
    let r: serde_json::Value = at(t1 + 1).await.unwrap().json().await.unwrap();
    assert!(r.get("kvs").is_some(), "{r}");
}

/// The near-miss: the same wait, but the waiter keeps its lease alive every third of its TTL
/// (it is not stalled): the grant comes with its key present at the answer's revision, its
/// create_revision as the token, and lease evidence from the keepalives. The wait (5 s) is far
/// longer than the op timeout (1.5 s): an acquire's request timeout covers --acquire-wait.
#[tokio::test]
async fn a_waiter_that_keeps_its_lease_alive_is_granted_with_its_key_present() {
    let Some(e) = etcd() else { return };
    let holder = client_of(&e, 1500);
    let g1 = first_grant(&holder, "p1", "L3", 10_000).await;
    let t1 = g1["token"].as_u64().unwrap();
    let waiter = Arc::new(client_of(&e, 1500));
    let pauses = Arc::new(workloads::PauseBoard::new());
    let w = {
        let (waiter, pauses) = (waiter.clone(), pauses.clone());
        tokio::spawn(async move {
            waiter
                .acquire_as("p2", "L3", 2000, 20_000, Some(&pauses))
                .await
        })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before_release = now_ns(&e);
    ok(holder.release("p1", "L3", t1).await);
    let g2 = ok(w.await.unwrap());
    assert_eq!(g2["key_at_revision"], "present", "{g2}");
    let t2 = g2["token"].as_u64().unwrap();
    assert!(
        t2 > t1 && t2 <= g2["answer_revision"].as_u64().unwrap(),
        "{g2}"
    );
    // Kept alive while it waited: the last keepalive is at most a third of the TTL (plus a
    // request) before the release that let it in.
    let last_ok = g2["lease_last_ok_ns"].as_u64().unwrap();
    assert!(last_ok + 1_500_000_000 > before_release, "{g2}");
    // ... and the lease surely lasts its TTL from the send of that keepalive, not before.
    let from = g2["lease_from_ns"].as_u64().unwrap();
    assert!(
        from <= last_ok && from + 1_500_000_000 > before_release,
        "{g2}"
    );
    // The grant is usable: its token passes etcd's fence.
    ok(waiter.write("p2", "counter-L3", t2, 1).await);
    ok(waiter.release("p2", "L3", t2).await);
}

/// The lock call's timeout is the acquire wait plus the op timeout: with no wait it gives up at
/// the op timeout (indeterminate), with a wait it is still waiting then.
#[tokio::test]
async fn the_acquire_wait_bounds_the_lock_call() {
    let Some(e) = etcd() else { return };
    let holder = client_of(&e, 1500);
    first_grant(&holder, "p1", "L4", 10_000).await;
    let c = client_of(&e, 500);
    let t = std::time::Instant::now();
    assert!(matches!(
        c.acquire("p2", "L4", 2000, 0).await,
        Reply::Info(_)
    ));
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    let t = std::time::Instant::now();
    assert!(matches!(
        c.acquire("p3", "L4", 2000, 2000).await,
        Reply::Info(_)
    ));
    assert!(
        t.elapsed() >= Duration::from_millis(2400),
        "{:?}",
        t.elapsed()
    );
}
