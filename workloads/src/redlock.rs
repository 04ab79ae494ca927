//! `--adapter redlock`: the Redlock algorithm as redis.io's "Distributed Locks with Redis" page
//! publishes it, over `--nodes` independent Redis masters (each node a `redis-server` of its
//! own, no replication between them):
//!
//! - acquire: the same `SET key value NX PX ttl` on every master at once, each bounded by a
//!   small per-node timeout ([`node_wait`]: a tenth of the ttl); held when a majority said yes within
//!   the validity `ttl - elapsed - (ttl * 0.01 + 2 ms)`, and then the grant's lease is that
//!   validity; otherwise the value is deleted everywhere and, while the wait lasts, tried again
//!   after a poll. No per-node retries: a retry spends validity on a dead member.
//! - renew: the compare-and-`PEXPIRE` script on every master, held again on a majority (its
//!   validity counted the same way); release: the compare-and-`DEL` script on every master,
//!   each answer awaited for the op timeout (a release spends no validity). Either is `ok`
//!   only where a majority said yes and refused where no majority could have; in between it
//!   is indeterminate (a renew's lost answers may have extended it; a release's masters down
//!   or silent may have held the value).
//!
//! The grant is named by its value (no token: a Redlock grant fences nothing). Evidence on
//! each grant: which masters said yes and the validity the client computed.

use crate::api::{BoxFuture, Failure, Grant, LockClient, Reply, Tokens, Wire};
use crate::pause::PauseBoard;
use crate::redis::{Redis, RedisLock, RELEASE, RENEW};
use crate::service::{
    Connect, ConnectError, Launch, Service, ServiceOption, ServiceOptions, Settings,
};
use crate::Adapter;
use history::Evidence;
use nemesis::Readiness;
use rand::Rng;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The least a master is given to answer an acquire or a renew (the published algorithm: a
/// per-node timeout "small compared to the auto-release time", which [`node_wait`] makes a
/// tenth of the ttl): on a loaded machine a loopback answer can take tens of ms.
const NODE_TIMEOUT_MS_MIN: u64 = 50;

/// How long an acquire or renew of a `ttl_ms` lease waits for each master: a tenth of the
/// ttl, at least [`NODE_TIMEOUT_MS_MIN`], at most the op timeout. The validity counts the time
/// spent either way; a wait this small keeps a dead master from spending most of it.
fn node_wait(ttl_ms: u64, op_timeout: Duration) -> Duration {
    Duration::from_millis((ttl_ms / 10).max(NODE_TIMEOUT_MS_MIN)).min(op_timeout)
}
/// Between tries of a waiting acquire.
const POLL_MS: u64 = 100;

/// One client's view of every master.
pub struct Redlock {
    /// In node order; `names[i]` is how the evidence names master `i` (`n1`...).
    masters: Vec<Arc<RedisLock>>,
    names: Vec<String>,
    /// The op timeout: how long a release waits for each master, and the bound of every other
    /// wait. The small per-node timeout is the acquire's and the renew's ([`node_wait`]: it
    /// must not spend the validity on a dead master); a release spends no validity, and a
    /// master that answers late would otherwise leave it indeterminate.
    op_timeout: Duration,
}

/// What one master answered to one step: yes, no, or nothing certain.
type Answers = Vec<Result<bool, Failure>>;

/// Which answers leave a master's yes unknown (see [`Redlock::count`]).
#[derive(Clone, Copy)]
enum Unknown {
    Lost,
    NotNo,
}

/// A step's yes answers against the majority.
enum Count {
    Majority,
    Maybe,
    Minority,
}

impl Redlock {
    fn majority(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    /// The validity left of a `ttl_ms` lease taken at `started`: the published clock-drift
    /// allowance (1% of the ttl plus 2 ms) taken off. Negative as zero.
    fn validity_ms(ttl_ms: u64, started: Instant) -> u64 {
        let elapsed = started.elapsed().as_millis() as u64;
        ttl_ms.saturating_sub(elapsed + ttl_ms / 100 + 2)
    }

    /// `step` on every master at once, each answer in node order; a master that has not
    /// answered within `wait` counts as a lost answer.
    async fn on_all<F, Fut>(&self, wait: Duration, step: F) -> Answers
    where
        F: Fn(Arc<RedisLock>) -> Fut,
        Fut: std::future::Future<Output = Result<bool, Failure>> + Send + 'static,
    {
        let mut set = tokio::task::JoinSet::new();
        for (i, m) in self.masters.iter().enumerate() {
            let fut = step(m.clone());
            set.spawn(async move {
                let answer = tokio::time::timeout(wait, fut)
                    .await
                    .unwrap_or_else(|_| Err(Failure::Indefinite("timeout".into())));
                (i, answer)
            });
        }
        let mut out: Vec<Option<Result<bool, Failure>>> =
            (0..self.masters.len()).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Failure::Indefinite("transport; a task ended".into()))))
            .collect()
    }

    /// Deletes `value` everywhere, each master's answer awaited for `wait`.
    async fn unlock_all(&self, client: &str, lock: &str, value: &str, wait: Duration) -> Answers {
        let grant = Grant {
            token: None,
            id: Some(value.to_string()),
        };
        let (client, lock) = (client.to_string(), lock.to_string());
        self.on_all(wait, move |m| {
            let (client, lock, grant) = (client.clone(), lock.clone(), grant.clone());
            async move {
                m.compare(&client, &lock, &grant, RELEASE, None).await
            }
        })
        .await
    }

    /// Whether the masters that said yes are a majority, may be one (counting those whose
    /// yes is unknown), or surely are not. What is unknown depends on the question:
    /// [`Unknown::Lost`] for what a step did (a refusal, a refused connection or `READONLY`,
    /// surely did nothing; a lost answer may have), [`Unknown::NotNo`] for what a master held
    /// (one that is down may still hold the value, and hold it again once restarted).
    fn count(&self, answers: &Answers, unknown: Unknown) -> Count {
        let yes = answers.iter().filter(|a| matches!(a, Ok(true))).count();
        let unanswered = answers
            .iter()
            .filter(|a| {
                matches!(
                    (a, unknown),
                    (Err(Failure::Indefinite(_)), _) | (Err(Failure::Definite(_)), Unknown::NotNo)
                )
            })
            .count();
        if yes >= self.majority() {
            Count::Majority
        } else if yes + unanswered >= self.majority() {
            Count::Maybe
        } else {
            Count::Minority
        }
    }

    fn yes(&self, answers: &Answers) -> Vec<String> {
        answers
            .iter()
            .zip(&self.names)
            .filter(|(a, _)| matches!(a, Ok(true)))
            .map(|(_, n)| n.clone())
            .collect()
    }

    async fn acquire_waiting(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let mut last_refusal = String::from("held");
        // Bounded: each pass tries once and sleeps a poll, until the deadline; a stall is
        // bounded by the nemesis.
        for _ in 0..wait_ms / POLL_MS + 2 {
            if let Some(until) = pauses.and_then(|p| p.stalled_until(client)) {
                tokio::time::sleep_until(until.into()).await;
            }
            let value = format!("{:032x}", rand::rng().random::<u128>());
            let started = Instant::now();
            let (c, l, v) = (client.to_string(), lock.to_string(), value.clone());
            let wait = node_wait(ttl_ms, self.op_timeout);
            let answers = self
                .on_all(wait, move |m| {
                    let (c, l, v) = (c.clone(), l.clone(), v.clone());
                    async move { Ok(m.try_acquire(&c, &l, &v, ttl_ms).await?.is_some()) }
                })
                .await;
            let validity = Self::validity_ms(ttl_ms, started);
            let yes = self.yes(&answers);
            if yes.len() >= self.majority() && validity > 0 {
                let mut body = json!({ history::GRANT: value, "ttl_ms": validity });
                if let Value::Object(m) = &mut body {
                    let evidence = RedlockEvidence {
                        redlock_nodes: Some(yes),
                        redlock_validity_ms: Some(validity),
                    };
                    evidence.write_into(m);
                }
                return Reply::Ok(body);
            }
            // Not held: give back what was taken, as the algorithm says.
            self.unlock_all(client, lock, &value, wait).await;
            last_refusal = match yes.len() >= self.majority() {
                true => "held; validity spent".into(),
                false if answers.iter().any(|a| matches!(a, Ok(false))) => "held".into(),
                false => "unavailable: no majority answered".into(),
            };
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS).min(deadline - now)).await;
        }
        Reply::Fail(last_refusal)
    }
}

impl LockClient for Redlock {
    crate::api::waiting_acquire_ops!();
    fn renew<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            let started = Instant::now();
            let (c, l, g) = (client.to_string(), lock.to_string(), grant.clone());
            let answers = self
                .on_all(node_wait(ttl_ms, self.op_timeout), move |m| {
                    let (c, l, g) = (c.clone(), l.clone(), g.clone());
                    async move { m.compare(&c, &l, &g, RENEW, Some(ttl_ms)).await }
                })
                .await;
            let validity = Self::validity_ms(ttl_ms, started);
            match self.count(&answers, Unknown::Lost) {
                Count::Majority if validity > 0 => Reply::Ok(json!({ "ttl_ms": validity })),
                // Unanswered masters may have extended it: a majority may hold it longer.
                Count::Maybe if validity > 0 => {
                    Reply::Info("timeout; no majority answered the renew".into())
                }
                // A minority extended holds nothing: the lease in force stays what it was.
                _ => Reply::Fail("not-holder".into()),
            }
        })
    }
    fn release<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            let Some(value) = &grant.id else {
                return Reply::Fail("not-holder; no grant value".into());
            };
            let answers = self.unlock_all(client, lock, value, self.op_timeout).await;
            match self.count(&answers, Unknown::NotNo) {
                // Deleted from a majority: the grant held the lock, and no longer does.
                Count::Majority => Reply::Ok(json!({})),
                // Masters down or silent may hold the value (a restart with persistence
                // brings it back): whether the grant held the lock until now is unknown, and
                // it surely holds it no longer.
                Count::Maybe => Reply::Info(
                    "unknown; masters down or silent may have held the value: no majority \
                     answered the release"
                        .into(),
                ),
                // On no majority even counting those (its lease ran out, or a master forgot
                // it): the grant held nothing to release, and an ok here would say it held
                // the lock until now.
                Count::Minority => Reply::Fail(format!(
                    "not-holder; the value was on {} of {} masters",
                    self.yes(&answers).len(),
                    self.masters.len()
                )),
            }
        })
    }
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        let key = RedisLock::key(lock);
        let n = self.masters.len();
        let (request, ok, refused) = match op {
            "acquire" => (
                format!("SET {key} <value> NX PX <ttl> on {n} masters"),
                "OK from a majority",
                "held",
            ),
            "renew" => (
                format!("EVAL <compare-and-pexpire> {key} on {n} masters"),
                "1 from a majority",
                "not-holder",
            ),
            _ => (
                format!("EVAL <compare-and-del> {key} on {n} masters"),
                "answers from a majority",
                "not-holder",
            ),
        };
        Wire {
            request,
            ok: ok.into(),
            refused: refused.into(),
        }
    }
}

const EVIDENCE: &[&[history::Field]] = &[RedlockEvidence::FIELDS];

history::evidence! {
    /// What a Redlock grant carries (docs/history.md). Kept.
    pub(crate) struct RedlockEvidence for "redlock" {
        /// The masters that said yes (`n1`...).
        redlock_nodes: Vec<String>,
        /// The validity the client computed (also the grant's `ttl_ms`).
        redlock_validity_ms: u64,
    }
}

const OPTIONS: &[ServiceOption] = &[ServiceOption {
    name: "persistence",
    values: &["none", "rdb", "aof-everysec", "aof-always"],
    help: "how each master keeps keys across a restart (as --adapter redis)",
}];

/// Redlock over `--nodes` independent `redis-server`s, each started as `--adapter redis`
/// starts its one.
pub struct RedlockService;

impl Service for RedlockService {
    fn name(&self) -> &'static str {
        "redlock"
    }
    fn about(&self) -> &'static str {
        "Redlock over --nodes independent Redis masters (a majority within the validity, release on all); lockpick starts Debian's `redis-server` for each"
    }
    /// Five masters, as the algorithm is published: `--adapter redlock` alone is Redlock.
    fn nodes_default(&self) -> usize {
        5
    }
    fn launch(&self, l: &Launch) -> Option<Vec<String>> {
        Redis.launch(l)
    }
    fn url_schemes(&self) -> &'static [&'static str] {
        Redis.url_schemes()
    }
    fn readiness(&self) -> Readiness {
        Redis.readiness()
    }
    fn clock_faults(&self) -> Result<(), &'static str> {
        Redis.clock_faults()
    }
    fn tokens(&self, _options: &ServiceOptions) -> Tokens {
        Tokens::None
    }
    fn options(&self) -> &'static [ServiceOption] {
        OPTIONS
    }
    fn holds_several_locks(&self, _options: &ServiceOptions) -> bool {
        // Each grant is its own value on every master; renew and release name it.
        true
    }
    fn program(&self) -> Option<(&'static str, &'static str)> {
        Redis.program()
    }
    fn check(&self, s: &Settings) -> Result<(), String> {
        if s.nodes < 3 {
            return Err(format!(
                "--nodes {}: --adapter redlock needs 3 or more independent masters (5 as \
                 published: --nodes 5)",
                s.nodes
            ));
        }
        Ok(())
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let refused = ConnectError::refused_by(self.name());
        let masters = c
            .peers
            .iter()
            .map(|url| {
                // Each call is bounded here by its own wait (`node_wait`, or the op timeout
                // for a release), inside the op timeout the server's client keeps.
                RedisLock::at(url, c.op_timeout, false).map(Arc::new)
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(refused)?;
        let names = (1..=masters.len()).map(|i| format!("n{i}")).collect();
        let lock = Arc::new(Redlock {
            masters,
            names,
            op_timeout: c.op_timeout,
        });
        c.beside_store(lock, EVIDENCE)
    }
}
