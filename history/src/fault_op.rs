//! The nemesis's ops as a history names them: which open a fault and which close one, and the
//! kind each is about. One reading of the op names, for every crate that pairs a fault's start
//! with its end (the checkers' fault windows, the report's fault bands, coverage): the nemesis
//! writes `start-<kind>` and `stop-<kind>`, except for a kill, whose ops are `kill` and
//! `restart`; anything else it writes (`clock-observed`) is an instant, what a fault was seen
//! to do. Each fault family's names are checked against this reading by a test of the nemesis.

/// The op that opens a kill fault.
pub const KILL: &str = "kill";
/// The op that closes a kill fault (its nodes were started again and answered).
pub const RESTART: &str = "restart";

/// What one nemesis op does to the faults in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp<'a> {
    /// Opens a fault of this kind (`start-pause` opens `pause`, `kill` opens `kill`).
    Opens(&'a str),
    /// Closes a fault of this kind (`stop-pause`, `restart`).
    Closes(&'a str),
    /// Neither: an event of no duration.
    Instant,
}

impl<'a> FaultOp<'a> {
    /// How the history names the nemesis op `f`.
    pub fn of(f: &'a str) -> FaultOp<'a> {
        if let Some(kind) = f.strip_prefix("start-") {
            FaultOp::Opens(kind)
        } else if let Some(kind) = f.strip_prefix("stop-") {
            FaultOp::Closes(kind)
        } else if f == KILL {
            FaultOp::Opens(KILL)
        } else if f == RESTART {
            FaultOp::Closes(KILL)
        } else {
            FaultOp::Instant
        }
    }

    /// The kind this op opens or closes, if it does either.
    pub fn kind(self) -> Option<&'a str> {
        match self {
            FaultOp::Opens(k) | FaultOp::Closes(k) => Some(k),
            FaultOp::Instant => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_op_name_reads_as_what_it_does() {
        for (f, want) in [
            ("start-pause", FaultOp::Opens("pause")),
            ("stop-pause", FaultOp::Closes("pause")),
            ("start-client-pause", FaultOp::Opens("client-pause")),
            ("kill", FaultOp::Opens("kill")),
            ("restart", FaultOp::Closes("kill")),
            ("clock-observed", FaultOp::Instant),
            ("start", FaultOp::Instant),
            ("killed", FaultOp::Instant),
        ] {
            assert_eq!(FaultOp::of(f), want, "{f}");
        }
        assert_eq!(FaultOp::of("restart").kind(), Some("kill"));
        assert_eq!(FaultOp::of("clock-observed").kind(), None);
    }
}
