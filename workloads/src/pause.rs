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

/// A stall a holder takes: how long, and the planned fault it carries out (its id goes on the
/// stall's history ops).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    pub length: Duration,
    pub fault: Option<String>,
}

impl PauseBoard {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the next holder to stall for `stall`; the request lapses at `deadline`.
    pub fn request(&self, stall: Duration, deadline: Instant) {
        self.request_stall(
            Stall {
                length: stall,
                fault: None,
            },
            deadline,
        );
    }

    /// Asks the next holder to take `stall`; the request lapses at `deadline`.
    pub fn request_stall(&self, stall: Stall, deadline: Instant) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some((stall, deadline));
    }

    /// Takes the outstanding request, if it has not lapsed.
    pub fn take(&self) -> Option<Duration> {
        self.take_stall().map(|s| s.length)
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

    #[test]
    fn a_request_is_taken_once_and_lapses() {
        let b = PauseBoard::new();
        assert_eq!(b.take(), None);
        b.request(
            Duration::from_millis(5),
            Instant::now() + Duration::from_secs(60),
        );
        assert!(b.is_pending());
        assert_eq!(b.take(), Some(Duration::from_millis(5)));
        assert_eq!(b.take(), None);
        b.request(Duration::from_millis(5), Instant::now());
        assert_eq!(b.take(), None);
        b.request(
            Duration::from_millis(5),
            Instant::now() + Duration::from_secs(60),
        );
        b.cancel();
        assert!(!b.is_pending());
    }
}
