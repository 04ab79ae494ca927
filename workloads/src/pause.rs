//! [`PauseBoard`]: how the nemesis asks a client to stall (the client-pause fault), and what a
//! stalled client may learn while it stalls: when another client was granted the lock it held
//! (the `next-grant` stall ends there).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

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
    /// The latest grant of each lock the workers saw: its number and when it was answered.
    grants: Mutex<HashMap<String, (u64, Instant)>>,
    /// Numbers grants in the order workers saw them: a grant is known by its number, not its
    /// token, since not every service's grants carry one.
    grants_seen: std::sync::atomic::AtomicU64,
    /// Wakes stalls waiting for the next grant.
    granted: Notify,
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
    /// When the stall ends; `length` bounds every aim.
    pub aim: StallAim,
    /// What a stalled holder does first when it wakes (`None`: the workload's next op, as
    /// stalls did before they had shapes; always `None` for a waiter).
    pub wake: Option<Wake>,
}

/// When a stall ends (the nemesis's `StallAim`, with its offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallAim {
    /// `after` past the end of the holder's lease as the holder knows it: its last ok grant
    /// or renew's answer plus the ttl.
    Boundary { after: Duration },
    /// `after` past the next grant of the held lock to another client.
    NextGrant { after: Duration },
    /// The stall's whole length.
    Long,
    /// The stall's whole length, taken by a client whose acquire is outstanding.
    Waiter,
}

/// What a stalled holder does first when it wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    Renew,
    Write,
    Release,
    Read,
}

impl StallAim {
    /// The name on the stall's history ops (`"shape"`), as `--client-faults` spells it.
    pub fn name(self) -> &'static str {
        match self {
            StallAim::Boundary { .. } => "boundary",
            StallAim::NextGrant { .. } => "next-grant",
            StallAim::Long => "long",
            StallAim::Waiter => "waiter",
        }
    }
}

impl Wake {
    /// The name on the stall's history ops (`"wake"`).
    pub fn name(self) -> &'static str {
        match self {
            Wake::Renew => "renew",
            Wake::Write => "write",
            Wake::Release => "release",
            Wake::Read => "read",
        }
    }
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

    /// Takes the outstanding request with its fault id, if it has not lapsed and `fits` says
    /// the caller is where the stall strikes (a holder before its read, a waiter, ...);
    /// otherwise leaves it for another client.
    pub fn take_stall_if(&self, fits: impl FnOnce(&Stall) -> bool) -> Option<Stall> {
        let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        match p.take() {
            Some((stall, deadline)) if Instant::now() < deadline => {
                if fits(&stall) {
                    Some(stall)
                } else {
                    *p = Some((stall, deadline));
                    None
                }
            }
            _ => None,
        }
    }

    /// Takes the outstanding request, whatever its shape.
    pub fn take_stall(&self) -> Option<Stall> {
        self.take_stall_if(|_| true)
    }

    /// A worker was granted `lock` just now; the grant's number (ascending from 1).
    pub fn granted(&self, lock: &str) -> u64 {
        let no = 1 + self
            .grants_seen
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut g = self.grants.lock().unwrap_or_else(|p| p.into_inner());
        // One entry per lock of the workload: bounded by --locks.
        g.insert(lock.to_string(), (no, Instant::now()));
        drop(g);
        self.granted.notify_waiters();
        no
    }

    /// Waits until `lock` is granted again (a grant other than number `grant_no`), or
    /// `deadline`; the instant the grant was answered, if it came. A grant seen before the call
    /// counts only if it was answered after `since`.
    pub async fn next_grant(
        &self,
        lock: &str,
        grant_no: u64,
        since: Instant,
        deadline: Instant,
    ) -> Option<Instant> {
        let seen = || {
            let g = self.grants.lock().unwrap_or_else(|p| p.into_inner());
            g.get(lock)
                .filter(|(n, at)| *n != grant_no && *at >= since)
                .map(|(_, at)| *at)
        };
        // Bounded by the deadline: each pass waits for a grant or the deadline.
        loop {
            let notified = self.granted.notified();
            tokio::pin!(notified);
            // Registered before the check, so a grant between the check and the wait wakes it.
            notified.as_mut().enable();
            if let Some(at) = seen() {
                return Some(at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline.into()) => return seen(),
            }
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

/// How a client that polls for a lock asks until granted (redis-py's `Lock`, a
/// `pg_try_advisory_lock` loop): `try_once` every `poll_ms` until `wait_ms` is over, trying
/// nothing while `pauses` says the client is stalled (the paused program polls nothing). Ends
/// at the first grant (`Ok(Some(answer))`) or error, else `held`.
pub(crate) async fn poll_for_grant<E, F, Fut>(
    client: &str,
    wait_ms: u64,
    poll_ms: u64,
    pauses: Option<&PauseBoard>,
    mut try_once: F,
) -> crate::Reply
where
    E: Into<crate::Reply>,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<serde_json::Value>, E>>,
{
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    // Bounded: each pass tries once and sleeps a poll, until the deadline; a stall is bounded
    // by the nemesis.
    for _ in 0..wait_ms / poll_ms.max(1) + 2 {
        if let Some(until) = pauses.and_then(|p| p.stalled_until(client)) {
            tokio::time::sleep_until(until.into()).await;
        }
        match try_once().await {
            Ok(Some(body)) => return crate::Reply::Ok(body),
            Ok(None) => {}
            Err(e) => return e.into(),
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(poll_ms).min(deadline - now)).await;
    }
    crate::Reply::Fail("held".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stall() -> Stall {
        Stall {
            length: Duration::from_millis(5),
            fault: Some("f1".into()),
            ops: ["start-client-pause", "stop-client-pause"],
            aim: StallAim::Long,
            wake: Some(Wake::Read),
        }
    }

    #[test]
    fn a_request_waits_for_a_client_it_fits() {
        let b = PauseBoard::new();
        b.request_stall(stall(), Instant::now() + Duration::from_secs(60));
        assert_eq!(b.take_stall_if(|s| s.wake == Some(Wake::Renew)), None);
        assert!(b.is_pending());
        assert_eq!(
            b.take_stall_if(|s| s.wake == Some(Wake::Read)),
            Some(stall())
        );
        assert!(!b.is_pending());
    }

    #[tokio::test]
    async fn a_stall_learns_of_the_next_grant() {
        let b = std::sync::Arc::new(PauseBoard::new());
        let since = Instant::now();
        let mine = b.granted("L0");
        let soon = Instant::now() + Duration::from_millis(30);
        // Its own grant, or one of another lock, is not the next grant.
        assert!(b.granted("L1") > mine, "numbers ascend");
        assert_eq!(b.next_grant("L0", mine, since, soon).await, None);
        let b2 = b.clone();
        let grant = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            b2.granted("L0");
        });
        let far = Instant::now() + Duration::from_secs(10);
        let at = b
            .next_grant("L0", mine, since, far)
            .await
            .expect("the grant came");
        assert!(
            at < far - Duration::from_secs(9),
            "woken by the grant, not the deadline"
        );
        grant.await.unwrap();
        // A grant before `since` does not count.
        let later = Instant::now() + Duration::from_millis(1);
        assert_eq!(b.next_grant("L0", mine, later, later).await, None);
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
