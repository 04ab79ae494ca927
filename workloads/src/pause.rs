//! [`PauseBoard`]: how the nemesis asks a lock-holding client to stall (the client-pause fault).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one outstanding stall request. The nemesis posts one; the next worker that holds a
/// lock takes it. A request nobody takes before its deadline lapses, so a fault never fires
/// long after it was scheduled.
#[derive(Debug, Default)]
pub struct PauseBoard {
    pending: Mutex<Option<(Stall, Instant)>>,
    /// Client processes stalled right now, by client id, with the end of their stall. A stalled
    /// process does nothing, in the foreground or in the background: adapters that keep a
    /// lease alive while an acquire waits send no keepalive while it lasts.
    stalled: Mutex<HashMap<String, Instant>>,
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

/// Bounds the stalls remembered (one per client slot at a time; ended ones are dropped).
const STALLED_MAX: usize = 4096;

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

    /// Marks client `client` stalled until `until`.
    pub fn stall_client(&self, client: &str, until: Instant) {
        let mut s = self.stalled.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        s.retain(|_, u| *u > now);
        if s.len() >= STALLED_MAX {
            s.clear();
        }
        s.insert(client.to_string(), until);
    }

    /// The end of `client`'s stall, if it is stalled now.
    pub fn stalled_until(&self, client: &str) -> Option<Instant> {
        let s = self.stalled.lock().unwrap_or_else(|p| p.into_inner());
        s.get(client).copied().filter(|u| *u > Instant::now())
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

    #[test]
    fn a_client_stall_ends() {
        let b = PauseBoard::new();
        assert_eq!(b.stalled_until("p1"), None);
        let until = Instant::now() + Duration::from_secs(60);
        b.stall_client("p1", until);
        assert_eq!(b.stalled_until("p1"), Some(until));
        assert_eq!(b.stalled_until("p2"), None);
        b.stall_client("p1", Instant::now());
        assert_eq!(b.stalled_until("p1"), None);
    }
}
