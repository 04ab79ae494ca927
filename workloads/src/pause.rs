//! [`PauseBoard`]: how the nemesis asks a lock-holding client to stall (the client-pause fault).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one outstanding stall request. The nemesis posts one; the next worker that holds a
/// lock takes it. A request nobody takes before its deadline lapses, so a fault never fires
/// long after it was scheduled.
#[derive(Debug, Default)]
pub struct PauseBoard {
    pending: Mutex<Option<(Stall, Instant)>>,
}

/// A stall a holder takes: how long, the planned fault it carries out (its id goes on the
/// stall's history ops) and the names of those ops (the nemesis's client-pause family owns
/// them: `start-client-pause`, `stop-client-pause`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    pub length: Duration,
    pub fault: Option<String>,
    /// The ops recorded when the stall starts and when it ends.
    pub ops: [&'static str; 2],
}

impl PauseBoard {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the next holder to take `stall`; the request lapses at `deadline`.
    pub fn request_stall(&self, stall: Stall, deadline: Instant) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some((stall, deadline));
    }

    /// Takes the outstanding request with its fault id, if it has not lapsed.
    pub fn take_stall(&self) -> Option<Stall> {
        let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        match p.take() {
            Some((stall, deadline)) if Instant::now() < deadline => Some(stall),
            _ => None,
        }
    }

    /// Withdraws any outstanding request (the final heal).
    pub fn cancel(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    pub fn is_pending(&self) -> bool {
        matches!(*self.pending.lock().unwrap_or_else(|p| p.into_inner()), Some((_, d)) if Instant::now() < d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stall() -> Stall {
        Stall {
            length: Duration::from_millis(5),
            fault: Some("f1".into()),
            ops: ["start-client-pause", "stop-client-pause"],
        }
    }

    #[test]
    fn a_request_is_taken_once_and_lapses() {
        let b = PauseBoard::new();
        assert_eq!(b.take_stall(), None);
        b.request_stall(stall(), Instant::now() + Duration::from_secs(60));
        assert!(b.is_pending());
        assert_eq!(b.take_stall(), Some(stall()));
        assert_eq!(b.take_stall(), None);
        b.request_stall(stall(), Instant::now());
        assert_eq!(b.take_stall(), None);
        b.request_stall(stall(), Instant::now() + Duration::from_secs(60));
        b.cancel();
        assert!(!b.is_pending());
    }
}
