//! The one error type of node control. Every message names the node (or the template or
//! host) and the step that failed, so a run's one-line error reason is enough to act on.

use std::io;
use std::net::IpAddr;
use std::path::PathBuf;

use nix::errno::Errno;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(
        "unknown placeholder {{{name}}} in command template `{template}` (known: {{id}} \
         {{host}} {{port}} {{data_dir}} {{peers}}; write {{{{ or }}}} for a literal brace)"
    )]
    UnknownPlaceholder { name: String, template: String },

    #[error("malformed command template `{template}`: {reason}")]
    MalformedTemplate { template: String, reason: String },

    #[error("cannot find a free port on {host}: {source}")]
    FreePort {
        host: IpAddr,
        #[source]
        source: io::Error,
    },

    #[error("node {node}: cannot patch its clock: {source}")]
    Clock {
        node: String,
        #[source]
        source: vclock::Error,
    },

    #[error("node {node}: empty command (Argv needs at least the program)")]
    EmptyCommand { node: String },

    #[error("node {node}: {what} {path}: {source}")]
    Io {
        node: String,
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("node {node}: cannot spawn `{command}`: {source}")]
    Spawn {
        node: String,
        command: String,
        #[source]
        source: io::Error,
    },

    #[error("node {node}: {status} before answering {check}; stderr ({log}): {stderr_tail}")]
    ExitedBeforeHealthy {
        node: String,
        status: String,
        check: String,
        log: PathBuf,
        stderr_tail: String,
    },

    #[error(
        "node {node}: not ready within {timeout_ms} ms: {check} \
         ({last_error}); killed it. {hint}"
    )]
    HealthTimeout {
        node: String,
        /// The readiness check, in words (`GET http://...`, `PING on host:port`).
        check: String,
        timeout_ms: u128,
        /// `last answer: ...` once the node answered (wrongly), else `last attempt: ...`.
        last_error: String,
        /// What to look at, from how the last attempt failed.
        hint: &'static str,
    },

    #[error("node {node}: {check} failed: {reason}")]
    Unhealthy {
        node: String,
        /// What failed, in words (`GET http://...`, `PING on host:port`, `ssh host`).
        check: String,
        reason: String,
    },

    #[error("node {node}: cannot {action}: not running")]
    NotRunning { node: String, action: &'static str },

    #[error("node {node}: cannot {action}: already running as pid {pid}")]
    AlreadyRunning {
        node: String,
        action: &'static str,
        pid: i32,
    },

    #[error("node {node}: cannot {action}: process {pid} {status}")]
    Exited {
        node: String,
        action: &'static str,
        pid: i32,
        status: String,
    },

    #[error("node {node}: sending {signal} to process group {pgid} failed: {source}")]
    Signal {
        node: String,
        signal: &'static str,
        pgid: i32,
        #[source]
        source: Errno,
    },

    #[error("node {node}: waiting for process {pid} failed: {source}")]
    Wait {
        node: String,
        pid: i32,
        #[source]
        source: Errno,
    },

    #[error("node {node}: process {pid} was not reaped within {waited_ms} ms after {signal}")]
    ReapTimeout {
        node: String,
        pid: i32,
        signal: &'static str,
        waited_ms: u128,
    },
}

/// Any failure of the nemesis side of a run: node control, a runtime, a fault. Each wraps the
/// error that says what failed, with its own message and sources unchanged.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Boxed: node and namespace errors are large, and `Result<_, Error>` is returned often.
    #[error(transparent)]
    Node(Box<NodeError>),
    #[error(transparent)]
    Netns(Box<crate::netns::NetnsError>),
    /// Writing the history, or a clock's control file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Msg(String),
    /// What was being done when `source` failed (`cannot set up the network namespaces`).
    #[error("{what}")]
    Context {
        what: String,
        #[source]
        source: Box<Error>,
    },
}

impl From<NodeError> for Error {
    fn from(e: NodeError) -> Error {
        Error::Node(Box::new(e))
    }
}

impl From<crate::netns::NetnsError> for Error {
    fn from(e: crate::netns::NetnsError) -> Error {
        Error::Netns(Box::new(e))
    }
}

impl Error {
    pub fn msg(what: impl Into<String>) -> Error {
        Error::Msg(what.into())
    }

    /// `source`, explained by what was being done.
    pub fn context(what: impl Into<String>, source: impl Into<Error>) -> Error {
        Error::Context {
            what: what.into(),
            source: Box::new(source.into()),
        }
    }
}
