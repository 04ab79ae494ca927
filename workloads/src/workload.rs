//! The `mutex`, `counter` and `bank` workloads: one worker task per client slot, each recording
//! every op it performs.

use crate::adapter::Adapter;
use crate::api::{Grant, UNREAD};
use crate::client::Reply;
use crate::pause::{PauseBoard, Stall, StallAim, Wake};
use crate::watch::{Answer, AnswerWatch, Recent};
use history::{
    Evidence, HoldEvidence, OpType, OpValue, Process, Recorder, WorkerEvidence, F, GRANT,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Which workload the clients run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Acquire; hold, renewing a third of the way into the lease in force; release.
    Mutex,
    /// Under the lock: read the register with the token, write value + 1 with the token.
    Counter,
    /// Transfers between accounts, each a register guarded by a lock of its own: take two
    /// accounts' locks in the `--lock-order-policy` order, read both balances, write both new
    /// ones with their tokens, release both. Many locks held at once, so waits can form cycles.
    Bank,
}

/// In which order a bank transfer takes its two accounts' locks (`--lock-order-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockOrderPolicy {
    /// By account number, whichever way the money moves: the discipline under which no cycle
    /// of waits can form.
    #[default]
    Sorted,
    /// Source account first, so two opposite transfers take the same two locks in opposite
    /// orders: a deadlock whenever the service lets their waits run on.
    Random,
}

impl std::str::FromStr for LockOrderPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let all = [LockOrderPolicy::Sorted, LockOrderPolicy::Random];
        all.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
            format!(
                "unknown lock order policy {s:?} (expected sorted or random){}",
                history::nearest::did_you_mean(s, all.map(LockOrderPolicy::as_str))
            )
        })
    }
}

impl LockOrderPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            LockOrderPolicy::Sorted => "sorted",
            LockOrderPolicy::Random => "random",
        }
    }
}

/// The most any one transfer moves; the amount is drawn from 1 to this.
const TRANSFER_MAX: i64 = 10;

impl std::str::FromStr for WorkloadKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let all = [
            WorkloadKind::Mutex,
            WorkloadKind::Counter,
            WorkloadKind::Bank,
        ];
        all.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            format!(
                "unknown workload {s:?} (expected mutex, counter or bank){}",
                history::nearest::did_you_mean(s, all.map(WorkloadKind::as_str))
            )
        })
    }
}

impl WorkloadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Mutex => "mutex",
            WorkloadKind::Counter => "counter",
            WorkloadKind::Bank => "bank",
        }
    }

    /// Whether the workload reads and writes the store (and closes with final reads).
    pub fn uses_store(self) -> bool {
        matches!(self, WorkloadKind::Counter | WorkloadKind::Bank)
    }
}

/// Rounds shorter or longer than this are refused: below, the clients' own scheduling is the
/// spread; above, a run holds too few rounds to count.
const ROUND_WINDOW_MS_MAX: u64 = 60_000;
/// A contention round lasts this many windows: the window in which its clients ask, then
/// room for their holds before the next round starts.
pub const ROUND_WINDOWS: u64 = 4;
/// How long before its time a client in a round stops sleeping and yields until then.
const ROUND_SPIN_US: u64 = 2_000;
/// Backstop on those yields.
const ROUND_SPIN_ROUNDS_MAX: u32 = 1_000_000;

fn realtime_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// When clients ask for a lock (`--arrivals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrivals {
    /// Each client asks again as soon as its last attempt ended.
    #[default]
    Steady,
    /// Contention rounds: a round starts every `ROUND_WINDOWS * window_ms` on the realtime
    /// clock (at a multiple of that period since the epoch, so a window that is a multiple of a
    /// timestamp granularity spans whole ticks), and every client asks once in it, at a time
    /// drawn uniformly from its first `window_ms`; its acquire records the round's number.
    Rounds { window_ms: u64 },
}

/// As `--arrivals` takes it: `steady` or `rounds:WINDOWms`.
impl std::fmt::Display for Arrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arrivals::Steady => f.write_str("steady"),
            Arrivals::Rounds { window_ms } => write!(f, "rounds:{window_ms}ms"),
        }
    }
}

impl std::str::FromStr for Arrivals {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "steady" {
            return Ok(Arrivals::Steady);
        }
        let Some(w) = s.strip_prefix("rounds:") else {
            return Err("expected steady or rounds:WINDOW (e.g. rounds:20ms)".to_string());
        };
        let (num, scale) = match (w.strip_suffix("ms"), w.strip_suffix('s')) {
            (Some(n), _) => (n, 1),
            (None, Some(n)) => (n, 1000),
            _ => return Err(format!("window {w:?} needs a unit, ms or s")),
        };
        match num.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
            Some(ms) if (1..=ROUND_WINDOW_MS_MAX).contains(&ms) => {
                Ok(Arrivals::Rounds { window_ms: ms })
            }
            _ => Err(format!("window {w:?}: expected 1ms..=60s")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    pub kind: WorkloadKind,
    pub clients: usize,
    pub locks: usize,
    /// The lease asked for with every acquire.
    pub ttl_ms: u64,
    /// The lease asked for with every renew (the same as `ttl_ms` unless set apart).
    pub renew_ttl_ms: u64,
    pub hold_min_ms: u64,
    pub hold_max_ms: u64,
    /// Upper bound on client invokes; holders still release once it is reached.
    pub ops_max: Option<u64>,
    pub seed: u64,
    /// Longest pause between a failed acquire and the next try.
    pub backoff_max_ms: u64,
    /// How long an acquire may wait for a held lock (`--acquire-wait`): the reference
    /// protocol's `wait_ms`, etcd's `lock/lock` wait.
    pub acquire_wait_ms: u64,
    pub arrivals: Arrivals,
    /// The bank workload's accounts (`--accounts`).
    pub accounts: usize,
    /// The bank workload's lock order (`--lock-order-policy`).
    pub lock_order: LockOrderPolicy,
}

impl WorkloadConfig {
    /// The lock guarding bank account `i`.
    pub fn account_lock(i: usize) -> String {
        format!("A{i}")
    }
    /// The register holding bank account `i`'s balance.
    pub fn account_key(i: usize) -> String {
        format!("balance-A{i}")
    }
    /// The registers the final reads close the run with: the counter's, or the accounts.
    pub fn final_keys(&self) -> Vec<String> {
        match self.kind {
            WorkloadKind::Bank => (0..self.accounts).map(Self::account_key).collect(),
            _ => self.lock_names().iter().map(|l| Self::key_for(l)).collect(),
        }
    }
    pub fn lock_name(i: usize) -> String {
        format!("L{i}")
    }
    /// The store register guarded by a lock.
    pub fn key_for(lock: &str) -> String {
        format!("counter-{lock}")
    }
    pub fn lock_names(&self) -> Vec<String> {
        (0..self.locks).map(Self::lock_name).collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("cannot write the history: {0}")]
    History(#[from] std::io::Error),
    #[error("a client worker panicked: {0}")]
    Worker(String),
}

/// Shared by the runner and the workers: the op budget.
#[derive(Debug)]
pub struct Budget {
    left: Option<AtomicU64>,
}

impl Budget {
    pub fn new(ops_max: Option<u64>) -> Self {
        Budget {
            left: ops_max.map(AtomicU64::new),
        }
    }
    /// Takes one op from the budget; false once it is spent.
    fn take(&self) -> bool {
        match &self.left {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }
    pub fn exhausted(&self) -> bool {
        matches!(&self.left, Some(l) if l.load(Ordering::Relaxed) == 0)
    }
}

/// What the workers leave behind for the closing reads.
#[derive(Debug, Clone, Default)]
pub struct WorkersDone {
    /// The highest process number any worker used.
    pub max_process: u64,
}

/// The client side of one run. `stop` turning true ends the workers: each finishes its op in
/// flight and releases a lock it holds. Client slot `i` talks to `clients[i % clients.len()]`
/// (one per node of a multi-node service).
pub async fn run_workers<W: Write + Send + 'static>(
    cfg: Arc<WorkloadConfig>,
    clients: Vec<Adapter>,
    recorder: Arc<Recorder<W>>,
    pauses: Arc<PauseBoard>,
    budget: Arc<Budget>,
    stop: watch::Receiver<bool>,
    answers: Arc<AnswerWatch>,
) -> Result<WorkersDone, WorkloadError> {
    assert!(!clients.is_empty(), "run_workers needs at least one client");
    for c in &clients {
        c.watch_stalls(&pauses);
    }
    let mut tasks = Vec::with_capacity(cfg.clients);
    for slot in 0..cfg.clients {
        let client = &clients[slot % clients.len()];
        let w = Worker {
            slot,
            process: slot as u64,
            cfg: cfg.clone(),
            client: client.clone(),
            recorder: recorder.clone(),
            pauses: pauses.clone(),
            budget: budget.clone(),
            stop: stop.clone(),
            answers: answers.clone(),
            recent: Recent::default(),
            unreachable: Unreachable::default(),
            last_round: 0,
            transfers: 0,
            rng: ChaCha8Rng::seed_from_u64(
                cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ slot as u64,
            ),
        };
        tasks.push(tokio::spawn(w.run()));
    }
    let mut done = WorkersDone::default();
    let mut first_err = None;
    for t in tasks {
        match t.await {
            Ok(Ok(p)) => done.max_process = done.max_process.max(p),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(WorkloadError::Worker(e.to_string()));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// The counter workload's closing reads, one per register, marked `"final": true`. Run after
/// every fault is healed; `first_process` must be above every worker's process number.
pub async fn final_reads<W: Write + Send>(
    cfg: &WorkloadConfig,
    client: &Adapter,
    recorder: &Recorder<W>,
    first_process: u64,
) -> Result<(), WorkloadError> {
    if !cfg.kind.uses_store() {
        return Ok(());
    }
    for (i, key) in cfg.final_keys().into_iter().enumerate() {
        let p = Process::Client(first_process + i as u64);
        let v = OpValue {
            is_final: true,
            ..OpValue::default()
        };
        recorder.record(p, OpType::Invoke, F::Read, None, Some(&key), v.clone())?;
        let (kind, value) = match client.inspect(&key).await {
            Reply::Ok(body) => {
                let mut v = v.clone();
                v.value = body.get("value").and_then(Value::as_i64);
                if let Some(f) = body.get("fence") {
                    v.extra.insert("fence".into(), f.clone());
                }
                if v.value.is_some() {
                    (OpType::Ok, v)
                } else {
                    (OpType::Fail, v.with_error("bad-body; no value"))
                }
            }
            Reply::Fail(e) => (OpType::Fail, v.clone().with_error(e)),
            Reply::Info(e) => (OpType::Info, v.clone().with_error(e)),
        };
        recorder.record(p, kind, F::Read, None, Some(&key), value)?;
    }
    Ok(())
}

struct Worker<W: Write + Send> {
    slot: usize,
    process: u64,
    cfg: Arc<WorkloadConfig>,
    client: Adapter,
    recorder: Arc<Recorder<W>>,
    pauses: Arc<PauseBoard>,
    budget: Arc<Budget>,
    stop: watch::Receiver<bool>,
    /// Counts the answers the adapter does not understand (the run stops past a threshold).
    answers: Arc<AnswerWatch>,
    recent: Recent,
    /// Consecutive acquires nothing answered (`connect: refused`: a killed node): how long to
    /// wait before the next.
    unreachable: Unreachable,
    rng: ChaCha8Rng,
    /// The last contention round this client asked in (`--arrivals rounds:...`).
    last_round: u64,
    /// Bank transfers this slot began: with the slot, each transfer's id.
    transfers: u64,
}

/// How an op ended, as the worker acts on it.
enum Done {
    Ok(Value),
    Fail,
    /// The process crashed: its worker continues under a new number.
    Crashed,
}

/// How a hold ended.
#[derive(Clone, Copy)]
enum HoldEnd {
    /// Held until the end, as far as the client knows.
    Held,
    /// The client was stalled by the client-pause fault; it still believes it holds the lock.
    Stalled,
    /// A renew failed: the client knows the lock is gone.
    Lost,
    Crashed,
    /// The write committed the grant's transaction and the lock with it (an answer whose
    /// `committed` is true): there is nothing left to release.
    Committed,
}

struct Held {
    lock: String,
    grant: Grant,
    /// The grant's number among all grants the workers saw ([`PauseBoard::granted`]).
    grant_no: u64,
    /// The lease in force: the ttl of the last grant or renew (as the service answered it, else
    /// as asked for).
    ttl_ms: u64,
    /// When the last grant or renew was invoked: the lease counts from there.
    lease_from: Instant,
    /// When the last ok grant or renew was answered: the service's lease surely ended `ttl_ms`
    /// after this (where a `boundary` stall aims).
    answered: Instant,
}

/// Where in its hold a holder is, for which stall shapes strike there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Point {
    /// The counter holder, between its grant and its read.
    BeforeRead,
    /// The hold loop (the counter's between its read and its write).
    Holding,
    /// The counter holder, between its write and its release.
    BeforeRelease,
}

/// The first wait after an acquire nothing answered (`connect: refused`).
const UNREACHABLE_FIRST_MS: u64 = 10;
/// The longest, whatever the ttl: a restarted service is reached at most this late.
const UNREACHABLE_CAP_MS: u64 = 200;

/// Bounded exponential backoff with jitter while a node answers nothing: a killed node refuses
/// every connection at once, and a client that retried every few milliseconds wrote hundreds of
/// `connect: refused` lines per kill. The wait doubles from [`UNREACHABLE_FIRST_MS`] with each
/// consecutive refusal, up to the cap (the smaller of [`UNREACHABLE_CAP_MS`] and a quarter of
/// the ttl), drawn in its upper half; any answer ends the streak.
#[derive(Debug, Default)]
struct Unreachable {
    streak: u32,
}

impl Unreachable {
    fn saw(&mut self, reply: &Reply) {
        use history::reason::{kind_of, reason_of, ReasonKind};
        match reply {
            Reply::Fail(e) | Reply::Info(e) if kind_of(reason_of(e)) == ReasonKind::Unreachable => {
                self.streak = self.streak.saturating_add(1)
            }
            _ => self.streak = 0,
        }
    }

    /// The wait before the next acquire, while the streak lasts.
    fn delay_ms(&self, rng: &mut impl Rng, ttl_ms: u64) -> Option<u64> {
        if self.streak == 0 {
            return None;
        }
        let cap = UNREACHABLE_CAP_MS.min(ttl_ms / 4).max(UNREACHABLE_FIRST_MS);
        let exp = (self.streak - 1).min(16);
        let full = UNREACHABLE_FIRST_MS.saturating_mul(1 << exp).min(cap);
        Some(rng.random_range(full / 2..=full))
    }
}

/// How often a waiting acquire looks for a waiter stall to take.
const WAITER_POLL: Duration = Duration::from_millis(10);

impl<W: Write + Send> Worker<W> {
    fn stopping(&self) -> bool {
        *self.stop.borrow() || self.budget.exhausted()
    }

    fn client_id(&self) -> String {
        format!("p{}", self.process)
    }

    fn crash(&mut self) {
        // What the dead process's library held (a session and its locks) goes with it.
        self.client.crashed(&self.client_id());
        // Jepsen's convention: a crashed process never returns; the slot gets a fresh number.
        self.process += self.cfg.clients as u64;
    }

    async fn run(mut self) -> Result<u64, WorkloadError> {
        // Bounded by the stop signal and the budget: every pass invokes at least one op or sleeps.
        while !self.stopping() {
            self.cycle().await?;
        }
        Ok(self.process)
    }

    async fn sleep(&mut self, d: Duration) {
        if d.is_zero() {
            return;
        }
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
    }

    async fn backoff(&mut self) {
        let ms = match self.unreachable.delay_ms(&mut self.rng, self.cfg.ttl_ms) {
            Some(ms) => ms,
            None => self.rng.random_range(1..=self.cfg.backoff_max_ms.max(1)),
        };
        self.sleep(Duration::from_millis(ms)).await;
    }

    /// Invokes one op, records it and its completion.
    async fn op(
        &mut self,
        f: F,
        lock: Option<&str>,
        key: Option<&str>,
        invoke: OpValue,
    ) -> Result<Done, WorkloadError> {
        let p = Process::Client(self.process);
        let rec = self.recorder.clone();
        let invoked = rec.record(p, OpType::Invoke, f.clone(), lock, key, invoke.clone())?;
        let reply = self.send(&f, lock, key, &invoke, invoked.index).await?;
        let answer = Answer {
            slot: self.slot,
            process: self.process,
            f: &f,
            target: lock.or(key).unwrap_or_default(),
            reply: &reply,
        };
        self.answers.observe(&mut self.recent, &self.client, answer);
        self.unreachable.saw(&reply);
        let (kind, value, done) = match reply {
            Reply::Ok(body) => {
                let mut v = invoke;
                absorb(&f, &body, self.client.evidence(), &mut v);
                (OpType::Ok, v, Done::Ok(body))
            }
            Reply::Fail(e) => (OpType::Fail, invoke.with_error(e), Done::Fail),
            Reply::Info(e) => (OpType::Info, invoke.with_error(e), Done::Crashed),
        };
        rec.record(p, kind, f, lock, key, value)?;
        if matches!(done, Done::Crashed) {
            self.crash();
        }
        Ok(done)
    }

    /// Sends op `f` (on `lock`, or on the store's `key`) to the service: its reply. An acquire
    /// waits for its answer under watch (see [`WaiterCtx`]), as op `acquire_index`.
    async fn send(
        &self,
        f: &F,
        lock: Option<&str>,
        key: Option<&str>,
        invoke: &OpValue,
        acquire_index: u64,
    ) -> Result<Reply, WorkloadError> {
        let id = self.client_id();
        let reply = match (f, lock, key) {
            (F::Acquire, Some(l), _) => {
                let acquire = self.client.acquire(
                    &id,
                    l,
                    invoke.ttl_ms.unwrap_or(self.cfg.ttl_ms),
                    self.cfg.acquire_wait_ms,
                    Some(&self.pauses),
                );
                let waiter = WaiterCtx {
                    process: self.process,
                    client: &id,
                    lock: l,
                    acquire_index,
                    recorder: &self.recorder,
                    pauses: &self.pauses,
                };
                waiter.wait(acquire).await?
            }
            (F::Renew, Some(l), _) => {
                let grant = grant_of(invoke);
                let ttl_ms = invoke.ttl_ms.unwrap_or(self.cfg.renew_ttl_ms);
                self.client.renew(&id, l, &grant, ttl_ms).await
            }
            (F::Release, Some(l), _) => self.client.release(&id, l, &grant_of(invoke)).await,
            (F::Read, _, Some(k)) => self.client.read(&id, k, invoke.token.unwrap_or(0)).await,
            (F::Write, _, Some(k)) => {
                self.client
                    .write(&id, k, invoke.token.unwrap_or(0), invoke.value.unwrap_or(0))
                    .await
            }
            _ => unreachable!("worker built an op without its lock or key"),
        };
        Ok(reply)
    }

    /// Sleeps until this client's time in its next contention round; its number. The time
    /// is drawn first: a client whose last attempt ran into the current round still asks in it
    /// if its time there has not come yet, so a slow round does not thin out the next one.
    async fn next_round(&mut self, window_ms: u64) -> u64 {
        let period_us = window_ms * ROUND_WINDOWS * 1000;
        let offset_us = self.rng.random_range(0..window_ms * 1000);
        let now_us = realtime_us();
        let mut round = now_us / period_us;
        if round <= self.last_round || round * period_us + offset_us <= now_us {
            round += 1;
        }
        round = round.max(self.last_round + 1);
        self.last_round = round;
        let at_us = round * period_us + offset_us;
        // The timer wakes up to a millisecond late, which would shift every ask past the tick
        // boundaries the window is aligned to: sleep to just before, then yield until the time.
        let early_us = ROUND_SPIN_US.min(at_us.saturating_sub(now_us));
        self.sleep(Duration::from_micros(at_us - now_us - early_us))
            .await;
        // Bounded: the realtime clock passes `at_us` within about `early_us`; a clock stepped
        // back stops the loop at the cap.
        for _ in 0..ROUND_SPIN_ROUNDS_MAX {
            if realtime_us() >= at_us || self.stopping() {
                break;
            }
            tokio::task::yield_now().await;
        }
        round
    }

    async fn cycle(&mut self) -> Result<(), WorkloadError> {
        if self.cfg.kind == WorkloadKind::Bank {
            return self.transfer().await;
        }
        let round = match self.cfg.arrivals {
            Arrivals::Steady => None,
            Arrivals::Rounds { window_ms } => Some(self.next_round(window_ms).await),
        };
        let lock = WorkloadConfig::lock_name(self.rng.random_range(0..self.cfg.locks));
        if self.stopping() || !self.budget.take() {
            return Ok(());
        }
        let ttl_ms = self.cfg.ttl_ms;
        let invoked_at = Instant::now();
        let mut v = OpValue::default().with_ttl_ms(ttl_ms);
        v = v.with_evidence(&WorkerEvidence {
            round,
            ..Default::default()
        });
        let body = match self.op(F::Acquire, Some(&lock), None, v).await? {
            Done::Ok(body) => body,
            Done::Fail => {
                self.backoff().await;
                return Ok(());
            }
            Done::Crashed => return Ok(()),
        };
        if body.get(UNREAD).is_some() {
            // The adapter could not read the token its service always gives: the grant is
            // recorded as ok, but nothing could be renewed, released or fenced with it, so
            // drop it and let the lease lapse.
            return Ok(());
        }
        let grant = Grant::from_answer(&body);
        let grant_no = self.pauses.granted(&lock);
        let mut held = Held {
            lock,
            grant,
            grant_no,
            ttl_ms: body.get("ttl_ms").and_then(Value::as_u64).unwrap_or(ttl_ms),
            lease_from: invoked_at,
            answered: Instant::now(),
        };
        let hold =
            Duration::from_millis(self.rng.random_range(
                self.cfg.hold_min_ms..=self.cfg.hold_max_ms.max(self.cfg.hold_min_ms),
            ));
        let end = match self.cfg.kind {
            WorkloadKind::Mutex => self.hold(&mut held, hold).await?,
            WorkloadKind::Counter => self.counter_body(&mut held, hold).await?,
            WorkloadKind::Bank => unreachable!("a bank cycle is a transfer"),
        };
        if matches!(end, HoldEnd::Held | HoldEnd::Stalled) {
            let v = held.names(OpValue::default());
            self.op(F::Release, Some(&held.lock), None, v).await?;
        }
        Ok(())
    }

    /// One bank transfer: two accounts' locks taken in the policy's order, both balances read,
    /// both new balances written with their tokens, both locks released (the last taken
    /// first). Every op names the transfer, and each acquire how long it asks to wait, so the
    /// checkers can tie the critical section together and know when a wait was due an answer.
    /// A holder stall strikes where its wake-up op says (before the reads, before the writes,
    /// before the releases; one that wakes into a renew renews both locks first). Otherwise
    /// the transfer does not renew: it holds both locks for the drawn hold, at most a third of
    /// the lease, between its reads and its writes.
    async fn transfer(&mut self) -> Result<(), WorkloadError> {
        let n = self.cfg.accounts;
        assert!(
            n >= 2,
            "the bank needs two accounts (checked by the config)"
        );
        if self.stopping() || !self.budget.take() {
            return Ok(());
        }
        let from = self.rng.random_range(0..n);
        let to = (from + self.rng.random_range(1..n)) % n;
        let order = match self.cfg.lock_order {
            LockOrderPolicy::Sorted => [from.min(to), from.max(to)],
            LockOrderPolicy::Random => [from, to],
        };
        self.transfers += 1;
        // Unique across slots, and small: the slots' counts interleaved.
        let id = self.transfers * self.cfg.clients as u64 + self.slot as u64;
        let tag = |v: OpValue| {
            v.with_evidence(&WorkerEvidence {
                transfer: Some(id),
                ..Default::default()
            })
        };
        let Some(mut held) = self.take_accounts(order, &tag).await? else {
            return Ok(());
        };
        // A holder stalled before its reads wakes into them, then writes at once.
        let stalled = match self.take_stall_at(Point::BeforeRead) {
            Some(stall) => {
                self.stall(&held[0].1, stall).await?;
                true
            }
            None => false,
        };
        let Some(balances) = self.read_accounts(&held, &tag).await? else {
            return Ok(());
        };
        let hold_ms = self
            .rng
            .random_range(self.cfg.hold_min_ms..=self.cfg.hold_max_ms.max(self.cfg.hold_min_ms))
            .min(self.cfg.ttl_ms / 3);
        if !self
            .hold_accounts(&mut held, &tag, stalled, hold_ms)
            .await?
        {
            return Ok(());
        }
        let amount = self.rng.random_range(1..=TRANSFER_MAX);
        for (k, (acct, h)) in held.iter().enumerate() {
            let delta = if *acct == from { -amount } else { amount };
            let key = WorkloadConfig::account_key(*acct);
            let v = tag(h.names(OpValue::default().with_value(balances[k] + delta)));
            if let Done::Crashed = self.op(F::Write, None, Some(&key), v).await? {
                return Ok(());
            }
        }
        if !stalled {
            if let Some(stall) = self.take_stall_at(Point::BeforeRelease) {
                self.stall(&held[0].1, stall).await?;
            }
        }
        self.release_all(&held, &tag).await
    }

    /// Takes the accounts' locks in `order`; `None` when the transfer is over without them
    /// (refused: what was taken is released, after a backoff; or the process crashed).
    async fn take_accounts(
        &mut self,
        order: [usize; 2],
        tag: &impl Fn(OpValue) -> OpValue,
    ) -> Result<Option<Vec<(usize, Held)>>, WorkloadError> {
        let ttl_ms = self.cfg.ttl_ms;
        let hold_cap_ms = self
            .cfg
            .hold_max_ms
            .max(self.cfg.hold_min_ms)
            .min(ttl_ms / 3);
        let mut held: Vec<(usize, Held)> = Vec::with_capacity(2);
        for acct in order {
            let lock = WorkloadConfig::account_lock(acct);
            // A grant without a token fences nothing, so a careful client keeps its section
            // inside its leases by its own clock: the second lock's wait leaves the first
            // lease room for the hold and the writes (a wait past it, with nothing renewed,
            // writes after the lease: a lost update of the client's own making).
            let wait_ms = match held.first() {
                Some((_, first)) if first.grant.token.is_none() => self.cfg.acquire_wait_ms.min(
                    first
                        .left_ms()
                        .saturating_sub(hold_cap_ms + write_margin_ms(ttl_ms)),
                ),
                _ => self.cfg.acquire_wait_ms,
            };
            let v = tag(OpValue::default().with_ttl_ms(ttl_ms)).with_evidence(&WorkerEvidence {
                wait_ms: Some(wait_ms),
                ..Default::default()
            });
            let invoked_at = Instant::now();
            match self.op(F::Acquire, Some(&lock), None, v).await? {
                Done::Ok(body) if body.get(UNREAD).is_none() => {
                    let grant_no = self.pauses.granted(&lock);
                    held.push((
                        acct,
                        Held {
                            lock,
                            grant: Grant::from_answer(&body),
                            grant_no,
                            ttl_ms: body.get("ttl_ms").and_then(Value::as_u64).unwrap_or(ttl_ms),
                            lease_from: invoked_at,
                            answered: Instant::now(),
                        },
                    ));
                }
                // A grant whose token could not be read fences nothing: let it lapse, and
                // give up the transfer as after a refusal.
                Done::Ok(_) | Done::Fail => {
                    self.release_all(&held, tag).await?;
                    self.backoff().await;
                    return Ok(None);
                }
                Done::Crashed => return Ok(None),
            }
        }
        Ok(Some(held))
    }

    /// Reads both balances, in the order the locks were taken; `None` when the transfer is
    /// over (a read refused or unreadable: the locks are released; or the process crashed).
    async fn read_accounts(
        &mut self,
        held: &[(usize, Held)],
        tag: &impl Fn(OpValue) -> OpValue,
    ) -> Result<Option<[i64; 2]>, WorkloadError> {
        let mut balances = [0i64; 2];
        for (k, (acct, h)) in held.iter().enumerate() {
            let key = WorkloadConfig::account_key(*acct);
            let v = tag(h.names(OpValue::default()));
            match self.op(F::Read, None, Some(&key), v).await? {
                Done::Ok(body) => match body.get("value").and_then(Value::as_i64) {
                    Some(b) => balances[k] = b,
                    None => return self.release_all(held, tag).await.map(|()| None),
                },
                Done::Fail => return self.release_all(held, tag).await.map(|()| None),
                Done::Crashed => return Ok(None),
            }
        }
        Ok(Some(balances))
    }

    /// Between the reads and the writes: `hold_ms`, or a stall that wakes into a write (the
    /// stalled client then writes with its old tokens), or into a renew, as a renew timer that
    /// fired during the stall would: the renews go first, and a client told it lost a lock
    /// writes nothing. Then the careful client's last look. Whether to write: `false` when
    /// the transfer is over (its locks released, or the process crashed).
    async fn hold_accounts(
        &mut self,
        held: &mut [(usize, Held)],
        tag: &impl Fn(OpValue) -> OpValue,
        stalled: bool,
        hold_ms: u64,
    ) -> Result<bool, WorkloadError> {
        let mut woke_into_write = stalled;
        if !stalled {
            match self.take_stall_at(Point::Holding) {
                Some(stall) => {
                    let wake = stall.wake;
                    self.stall(&held[0].1, stall).await?;
                    if wake == Some(Wake::Renew) {
                        match self.renew_all(held, tag).await? {
                            HoldEnd::Crashed => return Ok(false),
                            HoldEnd::Lost => {
                                return self.release_all(held, tag).await.map(|()| false)
                            }
                            _ => {}
                        }
                    } else {
                        woke_into_write = true;
                    }
                }
                None => self.sleep(Duration::from_millis(hold_ms)).await,
            }
        }
        // The careful client's last look before writing without a token: a lease with too
        // little left writes nothing. A stall that wakes into the writes comes after this
        // look, as a pause between a check and its write does.
        let margin_ms = write_margin_ms(self.cfg.ttl_ms);
        if !woke_into_write
            && held
                .iter()
                .any(|(_, h)| h.grant.token.is_none() && h.left_ms() < margin_ms)
        {
            return self.release_all(held, tag).await.map(|()| false);
        }
        Ok(true)
    }

    /// Renews every lock of a transfer, in the order taken: `Held` when all answered ok, else
    /// `Lost` (the client was told it lost one: it writes nothing) or `Crashed`.
    async fn renew_all(
        &mut self,
        held: &mut [(usize, Held)],
        tag: &impl Fn(OpValue) -> OpValue,
    ) -> Result<HoldEnd, WorkloadError> {
        let renew_ttl_ms = self.cfg.renew_ttl_ms;
        for (_, h) in held.iter_mut() {
            let invoked = Instant::now();
            let v = tag(h.names(OpValue::default().with_ttl_ms(renew_ttl_ms)));
            match self.op(F::Renew, Some(&h.lock), None, v).await? {
                Done::Ok(body) => h.renewed(&body, invoked, renew_ttl_ms),
                Done::Fail => return Ok(HoldEnd::Lost),
                Done::Crashed => return Ok(HoldEnd::Crashed),
            }
        }
        Ok(HoldEnd::Held)
    }

    /// Releases a transfer's locks, the last taken first. A release that crashes the process
    /// leaves the rest to their leases (the new process number holds nothing).
    async fn release_all(
        &mut self,
        held: &[(usize, Held)],
        tag: &impl Fn(OpValue) -> OpValue,
    ) -> Result<(), WorkloadError> {
        for (_, h) in held.iter().rev() {
            let v = tag(h.names(OpValue::default()));
            if let Done::Crashed = self.op(F::Release, Some(&h.lock), None, v).await? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Holds the lock for `hold`, renewing a third of the way into the lease in force: ttl/3
    /// after the grant, then R/3 after each renew that asked for (and got) ttl R, so a renew ttl
    /// shorter than the acquire's is renewed more often. The client-pause fault strikes here:
    /// the holder stalls past its lease without renewing, then carries on as the paused program
    /// would, with its old token.
    async fn hold(&mut self, held: &mut Held, hold: Duration) -> Result<HoldEnd, WorkloadError> {
        let until = Instant::now() + hold;
        // A holder woken into a renew renews first, as its renew timer would.
        let mut renew_now = false;
        // Bounded: each pass sleeps until the next renewal or the end, or renews, or ends;
        // a stall is taken at most once (the next pass renews or ends).
        loop {
            if !renew_now {
                if let Some(stall) = self.take_stall_at(Point::Holding) {
                    let wake = stall.wake;
                    self.stall(held, stall).await?;
                    if wake != Some(Wake::Renew) {
                        return Ok(HoldEnd::Stalled);
                    }
                    renew_now = true;
                }
            }
            let now = Instant::now();
            if !renew_now && (now >= until || self.stopping()) {
                return Ok(HoldEnd::Held);
            }
            let renew_every = Duration::from_millis((held.ttl_ms / 3).max(1));
            let renew_due = held.lease_from + renew_every;
            if !renew_now && now < renew_due {
                self.sleep(renew_due.min(until) - now).await;
                continue;
            }
            let invoked = Instant::now();
            let renew_ttl_ms = self.cfg.renew_ttl_ms;
            let v = held.names(OpValue::default().with_ttl_ms(renew_ttl_ms));
            let lock = held.lock.clone();
            match self.op(F::Renew, Some(&lock), None, v).await? {
                Done::Ok(body) => {
                    held.renewed(&body, invoked, renew_ttl_ms);
                    renew_now = false;
                }
                Done::Fail => return Ok(HoldEnd::Lost),
                Done::Crashed => return Ok(HoldEnd::Crashed),
            }
        }
    }

    async fn counter_body(
        &mut self,
        held: &mut Held,
        hold: Duration,
    ) -> Result<HoldEnd, WorkloadError> {
        let key = WorkloadConfig::key_for(&held.lock);
        // A holder stalled before its read wakes into the rest of its critical section: the
        // read, then the write at once.
        let woke = match self.take_stall_at(Point::BeforeRead) {
            Some(stall) => {
                self.stall(held, stall).await?;
                true
            }
            None => false,
        };
        let v = held.names(OpValue::default());
        let read = match self.op(F::Read, None, Some(&key), v).await? {
            Done::Ok(body) => body.get("value").and_then(Value::as_i64),
            Done::Fail => return Ok(HoldEnd::Held),
            Done::Crashed => return Ok(HoldEnd::Crashed),
        };
        let Some(read) = read else {
            return Ok(HoldEnd::Held);
        };
        // The critical section: the gap between read and write is where a stale holder loses
        // another holder's update unless the store fences it.
        let end = if woke {
            HoldEnd::Stalled
        } else {
            self.hold(held, hold).await?
        };
        match end {
            // A client that learnt it lost the lease does not write: the well-behaved client.
            HoldEnd::Lost | HoldEnd::Crashed | HoldEnd::Committed => return Ok(end),
            // The stalled client does not know it was stalled, so it writes.
            HoldEnd::Held | HoldEnd::Stalled => {}
        }
        let v = held.names(OpValue::default().with_value(read + 1));
        match self.op(F::Write, None, Some(&key), v).await? {
            Done::Crashed => return Ok(HoldEnd::Crashed),
            // The grant ended with the commit: a release sent now would speak for a lock
            // another client may already hold.
            Done::Ok(body) if ended_by_commit(&body) => return Ok(HoldEnd::Committed),
            Done::Ok(_) | Done::Fail => {}
        }
        if let Some(stall) = self.take_stall_at(Point::BeforeRelease) {
            self.stall(held, stall).await?;
            return Ok(HoldEnd::Stalled);
        }
        Ok(end)
    }

    /// Takes the outstanding holder stall if it strikes at `point` of this workload: a mutex
    /// holder has only its hold loop, where every wake-up op but a renew ends in its release;
    /// a counter holder stalls where its wake-up op comes next.
    fn take_stall_at(&self, point: Point) -> Option<Stall> {
        // The bank's critical section has the counter's shape (read, write, release), and
        // its stalls strike at the same points.
        let counter = matches!(self.cfg.kind, WorkloadKind::Counter | WorkloadKind::Bank);
        self.pauses.take_stall_if(|s| {
            s.aim != StallAim::Waiter
                && match (counter, s.wake) {
                    (false, _) => point == Point::Holding,
                    (true, None | Some(Wake::Renew | Wake::Write)) => point == Point::Holding,
                    (true, Some(Wake::Read)) => point == Point::BeforeRead,
                    (true, Some(Wake::Release)) => point == Point::BeforeRelease,
                }
        })
    }

    /// A holder's stall: it sends nothing (not even in the background) until the stall's aim,
    /// bounded by its length, then goes on as the paused program would, with its old token.
    /// Its start and stop ops carry the shape, so coverage can tell what the run exercised.
    async fn stall(&mut self, held: &Held, stall: Stall) -> Result<(), WorkloadError> {
        let started = Instant::now();
        let cap = started + stall.length;
        let ns = |at: Instant| {
            at.saturating_duration_since(self.recorder.start())
                .as_nanos() as u64
        };
        let lease_end = held.answered + Duration::from_millis(held.ttl_ms);
        let mut detail = stall_detail(self.process, &held.lock, &stall);
        if let Some(t) = held.grant.token {
            detail = detail.with_extra("token", Value::from(t));
        }
        if let Some(id) = &held.grant.id {
            detail = detail.with_grant(id);
        }
        let mut detail = detail
            .with_extra("ttl_ms", Value::from(held.ttl_ms))
            .with_extra("lease_end_ns", Value::from(ns(lease_end)));
        self.recorder.nemesis(stall.ops[0], detail.clone())?;
        let client = self.client_id();
        self.pauses.stall_client(&client, cap);
        // The stall ignores the stop signal on purpose: a GC pause does not end because the test
        // is ending, and the runner waits for it (it is bounded by the nemesis).
        let (end, aimed) = match stall.aim {
            StallAim::Boundary { after } => {
                // A lease already over when the stall began: stall `after` past now.
                (lease_end.max(started) + after, true)
            }
            StallAim::NextGrant { after } => {
                match self
                    .pauses
                    .next_grant(&held.lock, held.grant_no, started, cap)
                    .await
                {
                    Some(at) => {
                        detail = detail.with_extra("next_grant_ns", Value::from(ns(at)));
                        (at + after, true)
                    }
                    None => (cap, false),
                }
            }
            StallAim::Long | StallAim::Waiter => (cap, false),
        };
        let end = end.min(cap);
        tokio::time::sleep_until(end.into()).await;
        self.pauses.stall_client(&client, Instant::now());
        let detail = detail
            .with_extra(
                "ended_by",
                Value::from(if aimed && end < cap { "aim" } else { "length" }),
            )
            .with_extra(
                "stalled_ms",
                Value::from(started.elapsed().as_millis() as u64),
            );
        self.recorder.nemesis(stall.ops[1], detail)?;
        tracing::debug!(
            slot = self.slot,
            process = self.process,
            shape = stall.aim.name(),
            "client pause over"
        );
        Ok(())
    }
}

/// What a stall's start and stop ops say about it, whoever stalls.
fn stall_detail(process: u64, lock: &str, stall: &Stall) -> OpValue {
    let mut v = OpValue::default()
        .with_extra("process", Value::from(process))
        .with_extra("lock", Value::from(lock.to_string()))
        .with_extra("stall_ms", Value::from(stall.length.as_millis() as u64))
        .with_extra("shape", Value::from(stall.aim.name()));
    if let Some(w) = stall.wake {
        v = v.with_extra("wake", Value::from(w.name()));
    }
    if let StallAim::Boundary { after } | StallAim::NextGrant { after } = stall.aim {
        v = v.with_extra("after_ms", Value::from(after.as_millis() as u64));
    }
    match &stall.fault {
        Some(id) => v.with_extra("fault", Value::from(id.clone())),
        None => v,
    }
}

/// A client whose acquire is outstanding, which a `waiter` stall may strike.
struct WaiterCtx<'a, W: Write + Send> {
    process: u64,
    client: &'a str,
    lock: &'a str,
    /// The acquire's invoke, named on the stall's ops.
    acquire_index: u64,
    recorder: &'a Recorder<W>,
    pauses: &'a PauseBoard,
}

impl<W: Write + Send> WaiterCtx<'_, W> {
    /// Awaits the acquire. While it is outstanding the client may take a waiter stall: then it
    /// stops reading its answer and, through the board, its background keepalives, for the
    /// stall's length, and goes on waiting after it (the answer is read, and recorded, then).
    async fn wait(
        &self,
        acquire: impl std::future::Future<Output = Reply>,
    ) -> Result<Reply, WorkloadError> {
        tokio::pin!(acquire);
        let mut stalled = false;
        // Bounded by the acquire's own request timeout (--acquire-wait plus --op-timeout).
        loop {
            tokio::select! {
                reply = &mut acquire => return Ok(reply),
                _ = tokio::time::sleep(WAITER_POLL), if !stalled => {
                    let Some(stall) = self.pauses.take_stall_if(|s| s.aim == StallAim::Waiter) else {
                        continue;
                    };
                    stalled = true;
                    let detail = stall_detail(self.process, self.lock, &stall)
                        .with_extra("acquire", Value::from(self.acquire_index));
                    self.recorder.nemesis(stall.ops[0], detail.clone())?;
                    let started = Instant::now();
                    self.pauses.stall_client(self.client, started + stall.length);
                    tokio::time::sleep(stall.length).await;
                    let detail = detail
                        .with_extra("ended_by", Value::from("length"))
                        .with_extra("stalled_ms", Value::from(started.elapsed().as_millis() as u64));
                    self.recorder.nemesis(stall.ops[1], detail)?;
                }
            }
        }
    }
}

/// Copies what the service answered into the completion's value.
/// The grant an op's invoke names (its token, its grant id).
fn grant_of(v: &OpValue) -> Grant {
    Grant {
        token: v.token,
        id: v.grant().map(str::to_string),
    }
}

impl Held {
    /// An ok renew invoked at `invoked` that asked for `asked_ms`: from here the lease is the
    /// renew's (the ttl it answered, else the one asked for), whatever the acquire's was.
    fn renewed(&mut self, body: &Value, invoked: Instant, asked_ms: u64) {
        self.ttl_ms = body
            .get("ttl_ms")
            .and_then(Value::as_u64)
            .unwrap_or(asked_ms);
        self.lease_from = invoked;
        self.answered = Instant::now();
    }

    /// What is left of the lease by the client's clock, counted from the invoke (the
    /// service's lease began later, so this is never more than it has left).
    fn left_ms(&self) -> u64 {
        let since_ms = u64::try_from(self.lease_from.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.ttl_ms.saturating_sub(since_ms)
    }

    /// `v` naming this grant, as every op made under it does in the history.
    fn names(&self, mut v: OpValue) -> OpValue {
        v.token = self.grant.token;
        match &self.grant.id {
            Some(id) => v.with_grant(id),
            None => v,
        }
    }
}

/// How much of a lease a transfer without tokens keeps for its two writes: a quarter, room
/// for a loaded machine's store round trips (milliseconds on loopback).
fn write_margin_ms(ttl_ms: u64) -> u64 {
    ttl_ms / 4
}

/// Whether an ok write's answer says it committed the grant's transaction, ending the grant.
fn ended_by_commit(body: &Value) -> bool {
    let committed = body
        .as_object()
        .and_then(|b| HoldEvidence::read(b).committed);
    committed == Some(true)
}

fn absorb(f: &F, body: &Value, evidence: &[&[history::Field]], v: &mut OpValue) {
    let u = |k: &str| body.get(k).and_then(Value::as_u64);
    // What the service's adapter knows about the op beyond the answer (etcd: when the lease
    // underneath was last surely alive, the key read back at the answer's revision; postgres:
    // that a write committed the grant's transaction), under the keys its service declares.
    if matches!(f, F::Acquire | F::Renew | F::Write) {
        for k in evidence.iter().flat_map(|set| set.iter()) {
            if let Some(e) = body.get(k.name) {
                v.extra.insert(k.name.into(), e.clone());
            }
        }
    }
    match f {
        F::Acquire | F::Renew => {
            if let Some(t) = u("token") {
                v.token = Some(t);
            }
            if let Some(t) = u("ttl_ms") {
                v.ttl_ms = Some(t);
            }
            if let (F::Acquire, Some(id)) = (f, body.get(GRANT).and_then(Value::as_str)) {
                v.extra.insert(GRANT.into(), Value::from(id));
            }
        }
        F::Read => {
            v.value = body.get("value").and_then(Value::as_i64);
            v.seq = u("seq");
            if let Some(f) = body.get("fence") {
                v.extra.insert("fence".into(), f.clone());
            }
        }
        F::Write => {
            v.seq = u("seq");
            if let Some(f) = body.get("fence") {
                v.extra.insert("fence".into(), f.clone());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After consecutive `connect: refused`, the wait doubles from 10 ms up to the cap (200 ms,
    /// or ttl/4 when shorter), never above it, and any answer resets it.
    #[test]
    fn unreachable_backoff_doubles_to_its_cap_and_resets_on_an_answer() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let refused = Reply::Fail("connect: refused; Connection refused (os error 111)".into());
        let mut u = Unreachable::default();
        assert_eq!(
            u.delay_ms(&mut rng, 2000),
            None,
            "no streak, the usual backoff"
        );
        let mut highs = Vec::new();
        for _ in 0..8 {
            u.saw(&refused);
            let d = u.delay_ms(&mut rng, 2000).unwrap();
            let full = (10u64 << (u.streak - 1)).min(200);
            assert!(
                (full / 2..=full).contains(&d),
                "streak {}: {d} ms",
                u.streak
            );
            highs.push(full);
        }
        assert_eq!(highs, [10, 20, 40, 80, 160, 200, 200, 200]);
        // A short lease caps it at a quarter of the ttl.
        assert!(u.delay_ms(&mut rng, 400).unwrap() <= 100);
        u.saw(&Reply::Fail("recovering".into()));
        assert_eq!(
            u.delay_ms(&mut rng, 2000),
            None,
            "an answer ends the streak"
        );
    }

    /// A write that committed the grant's transaction ends the grant (no release follows),
    /// and its `committed` is recorded as the service's evidence, as an acquire's is.
    #[test]
    fn a_committed_write_ends_the_grant_and_is_recorded() {
        let body = serde_json::json!({ "committed": true });
        assert!(ended_by_commit(&body));
        assert!(!ended_by_commit(&serde_json::json!({ "seq": 3 })));
        assert!(!ended_by_commit(&serde_json::json!({ "committed": false })));
        let mut v = OpValue::default();
        absorb(&F::Write, &body, &[HoldEvidence::FIELDS], &mut v);
        assert_eq!(v.extra.get("committed"), Some(&Value::Bool(true)));
        assert!(
            !v.extra.contains_key("hold"),
            "only what the answer carries"
        );
        let mut read = OpValue::default();
        absorb(&F::Read, &body, &[HoldEvidence::FIELDS], &mut read);
        assert!(read.extra.is_empty(), "a read records no evidence");
    }

    #[test]
    fn arrivals_parse() {
        assert_eq!("steady".parse(), Ok(Arrivals::Steady));
        assert_eq!(
            "rounds:20ms".parse(),
            Ok(Arrivals::Rounds { window_ms: 20 })
        );
        assert_eq!(
            "rounds:2s".parse(),
            Ok(Arrivals::Rounds { window_ms: 2000 })
        );
        for bad in [
            "rounds",
            "rounds:20",
            "rounds:0ms",
            "rounds:61s",
            "burst:20ms",
        ] {
            assert!(bad.parse::<Arrivals>().is_err(), "{bad}");
        }
    }
}
