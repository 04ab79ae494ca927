//! The etcd adapter against a real etcd (Debian's etcd-server), one member on loopback: tokens
//! are the lock key's create_revision, renew/release follow the lease, and the txn fence
//! refuses a stale holder's read and write.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workloads::{EtcdClient, Reply};

struct Etcd {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

fn client(url: &str, timeout_ms: u64) -> EtcdClient {
    let start = Instant::now();
    let clock = Arc::new(move || start.elapsed().as_nanos() as u64);
    EtcdClient::new(url, "/v3", Duration::from_millis(timeout_ms), clock).unwrap()
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

    // The fenced store: read, write value+1, read it back.
    assert_eq!(ok(c.read("p1", "counter-L0", t1).await)["value"], 0);
    let w = ok(c.write("p1", "counter-L0", t1, 1).await);
    assert!(w["seq"].as_u64().unwrap() > t1, "{w}");
    assert_eq!(ok(c.read("p1", "counter-L0", t1).await)["value"], 1);

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
