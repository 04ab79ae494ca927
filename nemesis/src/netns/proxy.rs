//! The loopback proxy: how the harness, which stays in the host's network namespace, reaches
//! services that listen on addresses that exist only inside the run's namespaces.
//!
//! A socket belongs to the network namespace of the thread that created it, for its whole
//! life. So one dedicated thread enters the hub namespace once and does nothing but create
//! unconnected sockets there; the tokio tasks connect and copy with them like with any other
//! socket. The listeners are created by the caller's (host namespace) threads.

use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinSet;

use super::{enter_netns, NetnsError};

/// Open forwarded connections per proxy; the next client waits in the listen backlog.
pub(super) const CONNECTIONS_MAX: usize = 512;
/// How long a forwarded connection may take to open. Past it (a cut node, SYNs dropped) the
/// client's connection is closed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// After one direction ends, how long the other may still run. Bounds connections whose
/// peer went silent behind a partition (TCP would otherwise retransmit for ~15 minutes).
const HALF_CLOSE_GRACE: Duration = Duration::from_secs(30);
/// Socket requests waiting for the hub thread; it answers in microseconds.
const QUEUE_LEN: usize = 256;

type Request = oneshot::Sender<io::Result<TcpSocket>>;

/// How often the hub thread looks at its stop flag while idle.
const STOP_POLL: Duration = Duration::from_millis(50);

/// The thread that lives in the hub namespace and makes sockets there.
pub(super) struct HubSockets {
    tx: Option<SyncSender<Request>>,
    /// Set by `stop`. The thread cannot wait for the channel to close instead: proxy tasks
    /// hold senders, and an aborted task is only dropped when its runtime next runs, which
    /// may be the very thread blocked in `stop` (a current-thread runtime).
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HubSockets {
    /// Starts the thread and waits until it is inside `ns` (or failed to get there).
    pub(super) fn start(ns: &str, ns_path: PathBuf) -> Result<HubSockets, NetnsError> {
        let (tx, rx) = mpsc::sync_channel::<Request>(QUEUE_LEN);
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), NetnsError>>();
        let ns_owned = ns.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("netns-hub-sockets".into())
            .spawn(move || {
                // Entered once; this thread never returns to the host namespace.
                let entered = enter_netns(&ns_owned, &ns_path);
                let ok = entered.is_ok();
                let _ = ready_tx.send(entered);
                if !ok {
                    return;
                }
                while !stop_flag.load(Ordering::Relaxed) {
                    match rx.recv_timeout(STOP_POLL) {
                        Ok(reply) => {
                            let _ = reply.send(TcpSocket::new_v4());
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .map_err(|e| NetnsError::Enter {
                ns: ns.to_string(),
                reason: format!("cannot start the hub thread: {e}"),
            })?;
        let hub = HubSockets {
            tx: Some(tx),
            stop,
            thread: Some(thread),
        };
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => Ok(hub),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(NetnsError::Enter {
                ns: ns.to_string(),
                reason: "the hub thread did not report within 5 s".into(),
            }),
        }
    }

    pub(super) fn handle(&self) -> Option<SocketSource> {
        self.tx.clone().map(SocketSource)
    }

    /// Stops the thread; it notices within [`STOP_POLL`].
    pub(super) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for HubSockets {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Asks the hub thread for a socket.
#[derive(Clone)]
pub(super) struct SocketSource(SyncSender<Request>);

impl SocketSource {
    async fn socket(&self) -> io::Result<TcpSocket> {
        let (reply, answer) = oneshot::channel();
        self.0.try_send(reply).map_err(|e| match e {
            TrySendError::Full(_) => io::Error::other("hub socket queue full"),
            TrySendError::Disconnected(_) => io::Error::other("hub thread is gone"),
        })?;
        answer
            .await
            .map_err(|_| io::Error::other("hub thread dropped the request"))?
    }
}

/// Binds `127.0.0.1:0` in the caller's (host) namespace and forwards every connection to
/// `target` from the hub namespace. Returns the listening address and the accept task; aborting
/// the task closes the listener and every forwarded connection.
pub(super) async fn start(
    node: usize,
    target: SocketAddrV4,
    sockets: SocketSource,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), NetnsError> {
    let port = target.port();
    let err = |what, source| NetnsError::Proxy {
        node,
        port,
        what,
        source,
    };
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(|e| err("bind 127.0.0.1:0", e))?;
    let local = listener
        .local_addr()
        .map_err(|e| err("read listener address", e))?;
    let task = tokio::spawn(accept_loop(listener, target, sockets));
    Ok((local, task))
}

async fn accept_loop(listener: TcpListener, target: SocketAddrV4, sockets: SocketSource) {
    let limit = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    // Owned here, so aborting this task aborts every connection task too.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((inbound, _)) => {
                let sockets = sockets.clone();
                connections.spawn(async move {
                    let _permit = permit;
                    if let Err(e) = forward(inbound, target, &sockets).await {
                        tracing::debug!(%target, error = %e, "proxied connection ended");
                    }
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(%target, error = %e, "proxy accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn forward(
    mut inbound: TcpStream,
    target: SocketAddrV4,
    sockets: &SocketSource,
) -> io::Result<()> {
    let socket = sockets.socket().await?;
    let mut outbound = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(target.into()))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (mut in_read, mut in_write) = inbound.split();
    let (mut out_read, mut out_write) = outbound.split();
    let up = async {
        let copied = tokio::io::copy(&mut in_read, &mut out_write).await;
        let _ = out_write.shutdown().await;
        copied
    };
    let down = async {
        let copied = tokio::io::copy(&mut out_read, &mut in_write).await;
        let _ = in_write.shutdown().await;
        copied
    };
    tokio::pin!(up, down);
    // An error on either side ends both (returning drops and closes both sockets); a clean
    // end of one direction leaves the other a bounded time to finish.
    tokio::select! {
        copied = &mut up => {
            copied?;
            let _ = tokio::time::timeout(HALF_CLOSE_GRACE, &mut down).await;
        }
        copied = &mut down => {
            copied?;
            let _ = tokio::time::timeout(HALF_CLOSE_GRACE, &mut up).await;
        }
    }
    Ok(())
}
