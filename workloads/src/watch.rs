//! [`AnswerWatch`]: answers the adapter does not understand, counted while a run goes on, so a
//! service that starts answering something else (a 500 with an HTML page, a grant without a
//! token) stops the run in one line instead of filling it with indeterminate ops.
//!
//! An answer is unexpected when its reason is [`ReasonKind::Unexpected`] (a status the adapter
//! does not expect, a body it cannot read) or when the adapter could not read an ok acquire's
//! token (it says so with [`UNREAD`]).
//! Refusals, timeouts, refused connections and documented 503s are not: faults cause them.
//! The run stops once both hold: at least [`UNEXPECTED_MIN`] unexpected answers in all, and more
//! than half of one client slot's last [`WINDOW`] answers unexpected. The first keeps a few odd
//! answers during a fault from stopping a run; the second asks that they be what a client
//! mostly gets now, not a burst long past.

use crate::api::{Reply, UNREAD};
use crate::probe::answer_of;
use crate::Adapter;
use history::reason::{kind_of, reason_of, ReasonKind};
use history::F;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use tokio::sync::watch;

/// Unexpected answers in all before the run may stop.
pub const UNEXPECTED_MIN: u64 = 50;
/// How many of a client slot's latest answers are looked at.
pub const WINDOW: usize = 20;

/// Shared by the workers and the runner.
pub struct AnswerWatch {
    unexpected: AtomicU64,
    /// Why the run stopped, set once.
    why: OnceLock<String>,
    tripped: watch::Sender<bool>,
}

impl Default for AnswerWatch {
    fn default() -> Self {
        AnswerWatch {
            unexpected: AtomicU64::new(0),
            why: OnceLock::new(),
            tripped: watch::Sender::new(false),
        }
    }
}

/// One client slot's latest answers: whether each was unexpected.
#[derive(Default)]
pub struct Recent(VecDeque<bool>);

impl Recent {
    fn push(&mut self, unexpected: bool) -> usize {
        if self.0.len() == WINDOW {
            self.0.pop_front();
        }
        self.0.push_back(unexpected);
        self.0.iter().filter(|u| **u).count()
    }
}

/// One answer as the watch sees it.
pub struct Answer<'a> {
    pub slot: usize,
    pub process: u64,
    pub f: &'a F,
    /// The lock or key.
    pub target: &'a str,
    pub reply: &'a Reply,
}

impl AnswerWatch {
    /// Unexpected answers so far.
    pub fn unexpected(&self) -> u64 {
        self.unexpected.load(Ordering::Relaxed)
    }

    /// Why the run must stop, once it must.
    pub fn why(&self) -> Option<&str> {
        self.why.get().map(String::as_str)
    }

    /// Resolves once the run must stop.
    pub async fn wait(&self) {
        let mut rx = self.tripped.subscribe();
        // The sender lives in `self`, so the channel cannot close under us.
        let _ = rx.wait_for(|t| *t).await;
    }

    /// Counts one answer; past the threshold, records why the run must stop (naming the op,
    /// the status and the body of the answer that crossed it) and wakes [`AnswerWatch::wait`].
    pub fn observe(&self, recent: &mut Recent, adapter: &Adapter, a: Answer) {
        let unexpected = is_unexpected(a.f, a.reply);
        let in_window = recent.push(unexpected);
        if !unexpected {
            return;
        }
        let total = self.unexpected.fetch_add(1, Ordering::Relaxed) + 1;
        if total < UNEXPECTED_MIN || in_window * 2 <= WINDOW || self.why.get().is_some() {
            return;
        }
        let op = a.f.as_str();
        let wire = match a.f {
            F::Read | F::Write => adapter.resource_wire(op, a.target),
            _ => adapter.lock_wire(op, a.target),
        };
        let expected = match (a.f, a.reply) {
            (F::Acquire, Reply::Ok(_)) => format!("{} with a numeric \"token\"", wire.ok),
            _ => format!("{} or {}", wire.ok, wire.refused),
        };
        let why = format!(
            "stopped on answers the adapter does not understand ({total} in all, {in_window} of \
             client slot {}'s last {WINDOW}); the latest: {op} {} by p{}: {} answered {}; \
             expected {expected}",
            a.slot,
            a.target,
            a.process,
            wire.request,
            answer_of(a.reply, &wire)
        );
        if self.why.set(why).is_ok() {
            self.tripped.send_replace(true);
        }
    }
}

/// A status or body the adapter does not understand, or a grant without a numeric token.
fn is_unexpected(f: &F, reply: &Reply) -> bool {
    match reply {
        Reply::Ok(body) => {
            // The adapter says when a grant's token could not be read; a grant it records
            // without a token for reasons of its own (etcd's lock key unread) is no deviation.
            *f == F::Acquire && body.get(UNREAD).is_some()
        }
        Reply::Fail(e) | Reply::Info(e) => kind_of(reason_of(e)) == ReasonKind::Unexpected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BoxFuture, Grant, LockClient};
    use serde_json::json;
    use std::sync::Arc;

    struct Nothing;
    impl LockClient for Nothing {
        fn acquire<'a>(&'a self, _: &'a str, _: &'a str, _: u64, _: u64) -> BoxFuture<'a, Reply> {
            Box::pin(async { Reply::Fail("held".into()) })
        }
        fn renew<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a Grant,
            _: u64,
        ) -> BoxFuture<'a, Reply> {
            Box::pin(async { Reply::Fail("held".into()) })
        }
        fn release<'a>(&'a self, _: &'a str, _: &'a str, _: &'a Grant) -> BoxFuture<'a, Reply> {
            Box::pin(async { Reply::Fail("held".into()) })
        }
    }

    fn feed(w: &AnswerWatch, recent: &mut Recent, reply: &Reply, n: usize) {
        let adapter = Adapter::new(Arc::new(Nothing), None);
        for _ in 0..n {
            let a = Answer {
                slot: 0,
                process: 7,
                f: &F::Acquire,
                target: "L0",
                reply,
            };
            w.observe(recent, &adapter, a);
        }
    }

    #[test]
    fn refusals_timeouts_and_grants_the_adapter_understood_never_stop_a_run() {
        let w = AnswerWatch::default();
        let mut r = Recent::default();
        for reply in [
            Reply::Fail("held".into()),
            Reply::Info("timeout".into()),
            Reply::Fail("connect: refused; os error 111".into()),
            Reply::Info("unavailable: primary-unreachable".into()),
            Reply::Ok(json!({"token": 3})),
            // A grant etcd's adapter records without a token (its lock key was unread).
            Reply::Ok(json!({"key_at_revision": "unread"})),
        ] {
            feed(&w, &mut r, &reply, 500);
        }
        assert_eq!(w.unexpected(), 0);
        assert!(w.why().is_none());
    }

    #[test]
    fn a_run_stops_at_the_threshold_naming_status_body_and_op() {
        let w = AnswerWatch::default();
        let mut r = Recent::default();
        let bad = Reply::Info("http-500; <html>oops</html>".into());
        feed(&w, &mut r, &bad, (UNEXPECTED_MIN - 1) as usize);
        assert!(w.why().is_none(), "stopped before {UNEXPECTED_MIN}");
        feed(&w, &mut r, &bad, 1);
        let why = w.why().expect("stopped at the threshold");
        assert!(why.contains("acquire L0 by p7"), "{why}");
        assert!(why.contains("answered 500 <html>oops</html>"), "{why}");
    }

    #[test]
    fn old_bursts_do_not_stop_a_client_that_gets_good_answers_now() {
        let w = AnswerWatch::default();
        let mut r = Recent::default();
        feed(&w, &mut r, &Reply::Info("http-423; {}".into()), 100);
        // A fresh slot whose answers are mostly fine crosses the total, not its window.
        let mut fresh = Recent::default();
        let w2 = AnswerWatch::default();
        w2.unexpected.store(200, Ordering::Relaxed);
        for _ in 0..10 {
            feed(&w2, &mut fresh, &Reply::Fail("held".into()), 2);
            feed(
                &w2,
                &mut fresh,
                &Reply::Ok(json!({UNREAD: "{\"token\":\"5\"}"})),
                1,
            );
        }
        assert!(w.why().is_some());
        assert!(w2.why().is_none(), "{:?}", w2.why());
    }
}
