use std::io;
use std::path::PathBuf;

/// Why a lockd or store server could not start, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum LockdError {
    #[error("cannot create data dir {path}: {source}")]
    CreateDataDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read state file {path}: {source}")]
    ReadState {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Starting anyway could hand out tokens an earlier incarnation already used, so the
    /// operator has to decide.
    #[error(
        "corrupt state file {path}: {reason}; refusing to start (remove it only if no lease or \
         token from the previous run matters any more)"
    )]
    CorruptState { path: PathBuf, reason: String },
    #[error("cannot write state file {path}: {source}")]
    WriteState {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the listener's local address: {0}")]
    LocalAddr(#[source] io::Error),
    #[error("server failed: {0}")]
    Serve(#[source] io::Error),
    #[error("blocking start-up task failed: {0}")]
    StartupTask(String),
    /// Bad `peers` or `advertise`, or a mode that needs peers without any.
    #[error("invalid cluster config: {reason}")]
    InvalidCluster { reason: String },
}

/// An unknown mode name; the message lists the valid names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{given}`; valid names: {valid}", valid = .valid.join(", "))]
pub struct ParseModeError {
    pub(crate) kind: &'static str,
    pub(crate) given: String,
    pub(crate) valid: &'static [&'static str],
}

/// A `--lock-order` that is not `primary`, `timestamp[:GRANULARITY]` or `ring[:IDLE]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "lock order `{given}`: {why}; expected primary, timestamp[:GRANULARITY] or ring[:IDLE] \
     (each 1ms..=1s, e.g. timestamp:10ms, ring:5ms)"
)]
pub struct ParseOrderError {
    pub(crate) given: String,
    pub(crate) why: &'static str,
}
