//! Starts lockd and the store in-process on loopback and talks to them over real HTTP.

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use lockd::{
    serve_lockd, serve_store, FenceMode, LockdConfig, LockdError, StoreConfig, UnsafeMode,
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
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(serve(listener, stopped));
    Running { base, stop, task }
}

pub async fn start_lockd(data_dir: &Path, unsafe_mode: Option<UnsafeMode>) -> Running {
    let cfg = LockdConfig {
        data_dir: data_dir.to_owned(),
        unsafe_mode,
    };
    spawn(|listener, stopped| {
        serve_lockd(listener, cfg, async move {
            let _ = stopped.await;
        })
    })
    .await
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
