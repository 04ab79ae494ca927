//! [`NodeControl`]: what the harness does to one node of the service under test (start, stop,
//! pause, resume, kill, restart, its logs), whatever runs it. A runtime
//! ([`Runtime`](crate::runtime::Runtime)) makes its nodes; [`LocalNode`](crate::LocalNode) is
//! the node of the local and namespace runtimes (a child process group on this machine).

use crate::NodeError;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A boxed future: node control and runtimes are called through `dyn`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a node's output goes (appended across restarts, a marker line per start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLogs {
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

/// How a node is asked to stop before what is left of it is killed: the signal its program
/// takes as "finish and exit", and how long it may take. A program that removes what it made
/// only on its way out (PostgreSQL's `/dev/shm` segments) needs its own, and the time for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shutdown {
    pub signal: StopSignal,
    /// How long the group leader may take to exit before the group is killed.
    pub grace: Duration,
}

impl Shutdown {
    /// Most services: SIGTERM, 2 s.
    pub const TERM: Shutdown = Shutdown {
        signal: StopSignal::Term,
        grace: Duration::from_secs(2),
    };
    /// The longest grace a node is given, whatever its service asks: a run's end must not
    /// wait on a node that ignores its signal.
    pub const GRACE_MAX: Duration = Duration::from_secs(60);

    /// The grace, held to [`Shutdown::GRACE_MAX`].
    pub fn grace(&self) -> Duration {
        self.grace.min(Self::GRACE_MAX)
    }
}

/// The signals a node may be asked to stop with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Term,
    Int,
}

impl StopSignal {
    /// Its name as `kill -NAME` takes it.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Term => "TERM",
            StopSignal::Int => "INT",
        }
    }

    pub(crate) fn signal(self) -> nix::sys::signal::Signal {
        match self {
            StopSignal::Term => nix::sys::signal::Signal::SIGTERM,
            StopSignal::Int => nix::sys::signal::Signal::SIGINT,
        }
    }
}

/// One node, as the harness controls it. A node stops when dropped.
pub trait NodeControl: Send + Sync {
    /// `n1`, `n2`, ... (or `store`).
    fn id(&self) -> &str;
    /// The URL the harness's clients reach the node at.
    fn base_url(&self) -> String;
    /// What the node was checked with before it counted as up, in words (`GET
    /// http://host:port/v1/health`, `PING on host:port`): the log names a node by it, since a
    /// node that does not speak HTTP has no URL a user could open.
    fn readiness_check(&self) -> String;
    /// Starts the node and waits, up to `startup`, until it answers its health path.
    fn start(&mut self, startup: Duration) -> BoxFuture<'_, Result<(), NodeError>>;
    /// Stops it if it runs (its [`Shutdown`], then kill); never fails, it is the cleanup path.
    fn stop(&mut self) -> BoxFuture<'_, ()>;
    /// Freezes every process of the node.
    fn pause(&self) -> BoxFuture<'_, Result<(), NodeError>>;
    /// Thaws a paused node.
    fn resume(&self) -> BoxFuture<'_, Result<(), NodeError>>;
    /// Kills every process of the node at once (no chance to clean up).
    fn kill(&mut self) -> BoxFuture<'_, Result<(), NodeError>>;
    /// Kills it if it runs, then starts it again with the same command and data dir.
    fn restart(&mut self, startup: Duration) -> BoxFuture<'_, Result<(), NodeError>>;
    fn logs(&self) -> NodeLogs;
    fn is_paused(&self) -> bool;
    /// When the running process started (clock rates count from there), if it runs.
    fn started_at(&self) -> Option<Instant>;
    /// The process id, for the log, where the runtime has one.
    fn pid(&self) -> Option<u32>;
    /// The node's clock when an agent on another host sets it (the ssh runtime); `None` where
    /// the harness writes the clock itself.
    fn remote_clock(&self) -> Option<Arc<dyn crate::clock::RemoteClock>> {
        None
    }
}

/// A node shared between the runner and the nemesis.
pub type Node = Arc<tokio::sync::Mutex<Box<dyn NodeControl>>>;
