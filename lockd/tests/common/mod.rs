//! Starts lockd and the store in-process on loopback and talks to them over real HTTP.

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use lockd::{
    serve_lockd, serve_store, FenceMode, LockOrder, LockdConfig, LockdError, StoreConfig,
    UnsafeMode,
};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// No test should come close; a hang fails fast instead of stalling the suite.
pub const TEST_BOUND: Duration = Duration::from_secs(15);
const STOP_BOUND: Duration = Duration::from_secs(5);

pub async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("test exceeded its time bound")
}

pub struct Running {
    /// `host:port`
    pub addr: String,
    pub base: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), LockdError>>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Graceful stop; in-memory leases die with the server, like after a crash.
    pub async fn stop(self) -> Result<(), LockdError> {
        let _ = self.stop.send(());
        tokio::time::timeout(STOP_BOUND, self.task)
            .await
            .expect("server did not stop in time")
            .expect("server task panicked")
    }
}

async fn spawn<F>(serve: impl FnOnce(TcpListener, oneshot::Receiver<()>) -> F) -> Running
where
    F: Future<Output = Result<(), LockdError>> + Send + 'static,
{
    spawn_on(bind().await, serve)
}

pub async fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

fn spawn_on<F>(
    listener: TcpListener,
    serve: impl FnOnce(TcpListener, oneshot::Receiver<()>) -> F,
) -> Running
where
    F: Future<Output = Result<(), LockdError>> + Send + 'static,
{
    let addr = listener.local_addr().unwrap().to_string();
    let base = format!("http://{addr}");
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(serve(listener, stopped));
    Running {
        addr,
        base,
        stop,
        task,
    }
}

pub fn start_lockd_on(listener: TcpListener, cfg: LockdConfig) -> Running {
    spawn_on(listener, |listener, stopped| {
        serve_lockd(listener, cfg, async move {
            let _ = stopped.await;
        })
    })
}

pub async fn start_lockd(data_dir: &Path, unsafe_mode: Option<UnsafeMode>) -> Running {
    let cfg = LockdConfig {
        data_dir: data_dir.to_owned(),
        unsafe_mode,
        peers: Vec::new(),
        advertise: None,
        order: LockOrder::Primary,
    };
    start_lockd_on(bind().await, cfg)
}

/// `n` members on loopback, each with its own data dir under `root`. Every listener is bound
/// before any member starts, so each knows its peers' addresses. Sorted by address, so the
/// primary comes first. Every other member relies on the default advertise address.
pub async fn start_cluster(root: &Path, n: usize, unsafe_mode: Option<UnsafeMode>) -> Vec<Running> {
    start_members(root, n, unsafe_mode, LockOrder::Primary).await
}

/// As `start_cluster`, deciding by `order`.
pub async fn start_members(
    root: &Path,
    n: usize,
    unsafe_mode: Option<UnsafeMode>,
    order: LockOrder,
) -> Vec<Running> {
    let mut listeners = Vec::new();
    for _ in 0..n {
        listeners.push(bind().await);
    }
    let addrs: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    let mut nodes: Vec<Running> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let cfg = LockdConfig {
                data_dir: root.join(format!("n{i}")),
                unsafe_mode,
                peers: addrs.iter().filter(|a| **a != addrs[i]).cloned().collect(),
                advertise: (i % 2 == 1).then(|| addrs[i].clone()),
                order,
            };
            start_lockd_on(listener, cfg)
        })
        .collect();
    nodes.sort_by(|a, b| a.addr.cmp(&b.addr));
    nodes
}

pub async fn start_store(fence: FenceMode) -> Running {
    spawn(|listener, stopped| {
        serve_store(listener, StoreConfig { fence }, async move {
            let _ = stopped.await;
        })
    })
    .await
}

pub async fn post(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    post_raw(http, url, body.to_string()).await
}

pub async fn post_raw(http: &reqwest::Client, url: &str, body: String) -> (u16, Value) {
    let resp = http.post(url).body(body).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

pub async fn get(http: &reqwest::Client, url: &str) -> (u16, Value) {
    let resp = http.get(url).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// A member-decided lockd's lease lives at the member that granted it: `client`'s renew is
/// answered there and refused at `other`, its release is answered there once.
pub async fn renew_and_release_where_granted(
    http: &reqwest::Client,
    granted: &Running,
    other: &Running,
    client: &str,
    token: u64,
) {
    let renew = serde_json::json!({"client": client, "token": token, "ttl_ms": 5000});
    let (s, _) = post(http, &granted.url("/v1/locks/L/renew"), renew.clone()).await;
    assert_eq!(s, 200);
    let (s, _) = post(http, &other.url("/v1/locks/L/renew"), renew).await;
    assert_eq!(s, 409);
    let release = serde_json::json!({"client": client, "token": token});
    let (s, _) = post(http, &granted.url("/v1/locks/L/release"), release.clone()).await;
    assert_eq!(s, 200);
    let (s, _) = post(http, &granted.url("/v1/locks/L/release"), release).await;
    assert_eq!(s, 409, "a second release is refused");
}
