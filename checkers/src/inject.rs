//! Violations injected into a correct history (from [`crate::gen`]) at random points, for
//! `lockpick synth --inject`, the property tests and benchmarks. Each injection changes or adds
//! a few ops so the history shows exactly one more violation of its kind, and returns the
//! indices of the ops the violation's witness must name.

// Every mutation has one signature, and some insert ops, so they all take `&mut Vec<Op>`.
#![allow(clippy::ptr_arg)]

use history::{History, Op, OpType, OpValue, Outcome, Process, ViolationKind, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

/// A kind of violation `inject` can add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InjectKind {
    /// A later grant gets an earlier grant's token.
    TokenReused,
    /// A grant asked for after another completed gets a lower token.
    TokenRegressed,
    /// A grant whose order is forced only by exclusivity (not by real time) gets the higher
    /// token, though it came first.
    TokenRegressedInferred,
    /// A fresh process is granted the lock inside another's definite hold.
    DoubleGrant,
    /// A write later in store order than another carries a lower token.
    StaleWriteAccepted,
    /// Two acknowledged writes store the same value.
    LostUpdate,
    /// The final read misses an acknowledged write.
    LostUpdateFinalRead,
    StaleReleaseAccepted,
    StaleRenewAccepted,
    /// Long after everything, the service still answers held.
    LockStuck,
    /// The adapter's evidence shows the grant's lease long dead when it returned.
    GrantOnExpiredLease,
    /// The adapter read the lock key back at the grant's revision and found none.
    GrantWithoutKey,
    /// A fresh process is granted without a token inside another's hold, answered too late
    /// for a definite hold of its own: only the grant order (tokenless grants placed anywhere
    /// the model allows) can find it.
    DoubleGrantTokenless,
    /// A grant's lease was set before it (`lease_from_ns`), and a fresh process is granted
    /// while that lease, counted from there, surely lasts.
    DoubleGrantLeaseBeforeGrant,
    /// After the holder's accepted release, another process renews the released grant by its
    /// token and the service says ok: a released lease stays released.
    RenewAfterRelease,
    /// Three grants without a token on a lock of their own, asked at one instant and answered
    /// inside one lease's length: each pair could go either way, all three cannot. Only the
    /// search of the orders sees it (no definite holds overlap, nothing orders any pair).
    DoubleGrantUnordered,
    /// Two session grants (`hold: session`, model item 9) on a lock of their own: the second
    /// is granted while the first's holder, which has sent nothing since, still believes it
    /// holds the lock, long after the ttl it asked for. Read as leases, the history is legal.
    DoubleGrantSession,
    /// Two fresh processes on two locks of their own: each is granted one, then asks for the
    /// other's, and neither wait is answered until both give up 5 s later (longer than the
    /// default liveness grace), their long leases still running.
    Deadlock,
    /// A bank transfer on two accounts of their own, applied whole, and closing reads whose
    /// sum is not 0: one account's read misses the transfer's write.
    TotalChanged,
    NonSerializable,
}

impl InjectKind {
    pub const ALL: [InjectKind; 20] = [
        InjectKind::TokenReused,
        InjectKind::TokenRegressed,
        InjectKind::TokenRegressedInferred,
        InjectKind::DoubleGrant,
        InjectKind::StaleWriteAccepted,
        InjectKind::LostUpdate,
        InjectKind::LostUpdateFinalRead,
        InjectKind::StaleReleaseAccepted,
        InjectKind::StaleRenewAccepted,
        InjectKind::LockStuck,
        InjectKind::GrantOnExpiredLease,
        InjectKind::GrantWithoutKey,
        InjectKind::DoubleGrantLeaseBeforeGrant,
        InjectKind::DoubleGrantTokenless,
        InjectKind::RenewAfterRelease,
        InjectKind::DoubleGrantUnordered,
        InjectKind::DoubleGrantSession,
        InjectKind::Deadlock,
        InjectKind::TotalChanged,
        InjectKind::NonSerializable,
    ];

    /// The adapter shapes of docs/checkers.md's model items 3, 6, 8 and 9 (checkers/tests/
    /// inject_adapter.rs asks for their witness ops too).
    pub const ADAPTER: [InjectKind; 5] = [
        InjectKind::DoubleGrantLeaseBeforeGrant,
        InjectKind::DoubleGrantTokenless,
        InjectKind::RenewAfterRelease,
        InjectKind::DoubleGrantUnordered,
        InjectKind::DoubleGrantSession,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InjectKind::TokenReused => "token-reused",
            InjectKind::TokenRegressed => "token-regressed",
            InjectKind::TokenRegressedInferred => "token-regressed-inferred",
            InjectKind::DoubleGrant => "double-grant",
            InjectKind::StaleWriteAccepted => "stale-write-accepted",
            InjectKind::LostUpdate => "lost-update",
            InjectKind::LostUpdateFinalRead => "lost-update-final-read",
            InjectKind::StaleReleaseAccepted => "stale-release-accepted",
            InjectKind::StaleRenewAccepted => "stale-renew-accepted",
            InjectKind::LockStuck => "lock-stuck",
            InjectKind::GrantOnExpiredLease => "grant-on-expired-lease",
            InjectKind::GrantWithoutKey => "grant-without-key",
            InjectKind::DoubleGrantTokenless => "double-grant-tokenless",
            InjectKind::DoubleGrantLeaseBeforeGrant => "double-grant-lease-before-grant",
            InjectKind::RenewAfterRelease => "renew-after-release",
            InjectKind::DoubleGrantUnordered => "double-grant-unordered",
            InjectKind::DoubleGrantSession => "double-grant-session",
            InjectKind::Deadlock => "deadlock",
            InjectKind::TotalChanged => "total-changed",
            InjectKind::NonSerializable => "non-serializable",
        }
    }

    pub fn parse(s: &str) -> Option<InjectKind> {
        InjectKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The violation kind the checkers must report for it.
    pub fn violation(self) -> ViolationKind {
        match self {
            InjectKind::TokenReused => ViolationKind::TokenReused,
            InjectKind::TokenRegressed | InjectKind::TokenRegressedInferred => {
                ViolationKind::TokenRegressed
            }
            InjectKind::DoubleGrant
            | InjectKind::DoubleGrantTokenless
            | InjectKind::DoubleGrantLeaseBeforeGrant
            | InjectKind::DoubleGrantUnordered
            | InjectKind::DoubleGrantSession => ViolationKind::DoubleGrant,
            InjectKind::StaleWriteAccepted => ViolationKind::StaleWriteAccepted,
            InjectKind::LostUpdate | InjectKind::LostUpdateFinalRead => ViolationKind::LostUpdate,
            InjectKind::StaleReleaseAccepted => ViolationKind::StaleReleaseAccepted,
            // Which kind the checkers will name a renew of a released lease is issue 24's to
            // decide; a renew of a lease that is no longer current is this one today.
            InjectKind::StaleRenewAccepted | InjectKind::RenewAfterRelease => {
                ViolationKind::StaleRenewAccepted
            }
            InjectKind::LockStuck => ViolationKind::LockStuck,
            InjectKind::GrantOnExpiredLease => ViolationKind::GrantOnExpiredLease,
            InjectKind::GrantWithoutKey => ViolationKind::GrantWithoutKey,
            InjectKind::Deadlock => ViolationKind::Deadlock,
            InjectKind::TotalChanged => ViolationKind::TotalChanged,
            InjectKind::NonSerializable => ViolationKind::NonSerializable,
        }
    }
}

/// Injects one violation of `kind` at a point chosen by `seed`. Returns the indices of the ops
/// its witness must name, or `None` when this history offers no place for it (too few grants,
/// writes, ...). `ops` must be a structurally valid history; it stays one (indices are
/// renumbered when ops are inserted).
pub fn inject(ops: &mut Vec<Op>, kind: InjectKind, seed: u64) -> Option<Vec<u64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let f: Mutation = match kind {
        InjectKind::TokenReused => reuse_token,
        InjectKind::TokenRegressed => regress_token,
        InjectKind::TokenRegressedInferred => regress_token_inferred,
        InjectKind::DoubleGrant => grant_inside_hold,
        InjectKind::StaleWriteAccepted => accept_stale_write,
        InjectKind::LostUpdate => duplicate_value,
        InjectKind::LostUpdateFinalRead => low_final_read,
        InjectKind::StaleReleaseAccepted => stale_release,
        InjectKind::StaleRenewAccepted => stale_renew,
        InjectKind::LockStuck => held_long_after,
        InjectKind::GrantOnExpiredLease => grant_on_dead_lease,
        InjectKind::GrantWithoutKey => grant_without_key,
        InjectKind::DoubleGrantTokenless => tokenless_grant_inside_hold,
        InjectKind::DoubleGrantLeaseBeforeGrant => grant_inside_earlier_lease,
        InjectKind::RenewAfterRelease => renew_after_release,
        InjectKind::DoubleGrantUnordered => unordered_grants,
        InjectKind::DoubleGrantSession => session_grants,
        InjectKind::Deadlock => wait_for_each_other,
        InjectKind::TotalChanged => unbalanced_accounts,
        InjectKind::NonSerializable => interleaved_transfers,
    };
    f(ops, &mut rng)
}

/// An ok acquire, as the mutations see it.
#[derive(Debug, Clone)]
struct G {
    invoke: usize,
    complete: usize,
    process: u64,
    lock: String,
    token: u64,
    ttl_ms: u64,
}

fn grants(h: &History) -> Vec<G> {
    h.operations()
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && h.invoke_of(o).f == F::Acquire)
        .map(|o| {
            let done = h.complete_of(o).unwrap();
            G {
                invoke: o.invoke,
                complete: o.complete.unwrap(),
                process: done.process.client().unwrap(),
                lock: done.lock.clone().unwrap(),
                token: done.value.token.unwrap(),
                ttl_ms: done.value.ttl_ms.unwrap(),
            }
        })
        .collect()
}

/// Ok writes as (invoke, complete) positions.
fn ok_writes(h: &History) -> Vec<(usize, usize)> {
    h.operations()
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && h.invoke_of(o).f == F::Write)
        .map(|o| (o.invoke, o.complete.unwrap()))
        .collect()
}

const MARK: &str = "injected";
/// Marks the ops being inserted by the current injection.
const INSERTING: &str = "injecting";
/// Marks an existing op of the witness while ops are inserted.
const WITNESS: &str = "witness";

/// Inserts ops (marked, so they can be found after renumbering) in time order and renumbers
/// every index; returns the new indices of the marked ops.
fn insert(ops: &mut Vec<Op>, new: Vec<Op>) -> Vec<u64> {
    for mut op in new {
        op.extra.insert(INSERTING.to_string(), json!(true));
        let at = ops.partition_point(|o| o.time_ns <= op.time_ns);
        ops.insert(at, op);
    }
    let mut out = Vec::new();
    for (i, o) in ops.iter_mut().enumerate() {
        o.index = i as u64;
        // Ops inserted by an earlier injection keep only `MARK`: they are not this one's.
        if o.extra.remove(INSERTING).is_some() {
            o.extra.insert(MARK.to_string(), json!(true));
            if o.kind != OpType::Invoke {
                out.push(o.index);
            }
        }
    }
    out
}

/// The process an injection that adds a client uses: one above the highest in `ops`.
pub fn fresh_process(ops: &[Op]) -> u64 {
    ops.iter()
        .filter_map(|o| o.process.client())
        .max()
        .unwrap_or(0)
        + 1
}

fn lock_op(process: u64, time_ns: u64, kind: OpType, f: F, lock: &str, v: OpValue) -> Op {
    Op::new(0, time_ns, Process::Client(process), kind, f)
        .with_lock(lock)
        .with_value(v)
}

/// A mutation: changes a correct history so it shows one violation; returns the indices that
/// the violation's witness must include, or `None` when this history offers no place for it.
type Mutation = fn(&mut Vec<Op>, &mut ChaCha8Rng) -> Option<Vec<u64>>;

fn pick<T: Clone>(rng: &mut ChaCha8Rng, v: &[T]) -> Option<T> {
    (!v.is_empty()).then(|| v[rng.random_range(0..v.len())].clone())
}

/// A later grant gets an earlier grant's token.
fn reuse_token(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs = grants(&h);
    let pairs: Vec<(G, G)> = gs
        .iter()
        .flat_map(|b| {
            gs.iter()
                .filter(move |a| a.lock == b.lock && a.complete < b.complete)
                .map(move |a| (a.clone(), b.clone()))
        })
        .take(500)
        .collect();
    let (a, b) = pick(rng, &pairs)?;
    ops[b.complete].value.token = Some(a.token);
    Some(vec![ops[a.complete].index, ops[b.complete].index])
}

/// A grant asked for after another completed gets a lower token.
fn regress_token(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs = grants(&h);
    let later: Vec<G> = gs
        .iter()
        .filter(|b| {
            gs.iter()
                .any(|a| a.lock == b.lock && ops[a.complete].time_ns < ops[b.invoke].time_ns)
        })
        .cloned()
        .collect();
    let b = pick(rng, &later)?;
    ops[b.complete].value.token = Some(0);
    Some(vec![ops[b.complete].index])
}

/// Each grant's definite hold, as `[start, end)`: from its ok to its release's invoke or its
/// lease's lower bound (counted from `lease_from_ns` when the grant carries it, else from its
/// invoke; drift 0), when longer than `room_ns`.
fn holds(ops: &[Op], gs: &[G], room_ns: u64) -> Vec<(G, u64, u64)> {
    gs.iter()
        .filter_map(|g| {
            let start = ops[g.complete].time_ns;
            let from = ops[g.complete]
                .value
                .extra
                .get("lease_from_ns")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(ops[g.invoke].time_ns);
            let lease_end = from + g.ttl_ms * 1_000_000;
            // Only up to the lease's end: past it the release no longer bounds the hold (and
            // scanning to the history's end for every unreleased grant is quadratic).
            let release = ops[g.complete..]
                .iter()
                .take_while(|o| o.time_ns <= lease_end)
                .find(|o| {
                    o.kind == OpType::Invoke
                        && o.f == F::Release
                        && o.process == Process::Client(g.process)
                        && o.value.token == Some(g.token)
                })
                .map_or(u64::MAX, |o| o.time_ns);
            let end = lease_end.min(release);
            (end > start + room_ns).then(|| (g.clone(), start, end))
        })
        .collect()
}

/// A fresh process's acquire of `lock` invoked at `t`, answered `ok` with `answer` at `done`.
fn fresh_grant(q: u64, lock: &str, t: u64, done: u64, ttl_ms: u64, answer: OpValue) -> Vec<Op> {
    vec![
        lock_op(
            q,
            t,
            OpType::Invoke,
            F::Acquire,
            lock,
            OpValue::default().with_ttl_ms(ttl_ms),
        ),
        lock_op(q, done, OpType::Ok, F::Acquire, lock, answer),
    ]
}

/// A fresh process is granted the lock inside another's definite hold.
fn grant_inside_hold(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let (g, start, end) = pick(rng, &holds(ops, &grants(&h), 4_000_000))?;
    let token = make_room(ops, &g.lock, g.token);
    let q = fresh_process(ops);
    let t = start + (end - start) / 4;
    let ttl = g.ttl_ms;
    let answer = OpValue::default().with_token(token).with_ttl_ms(ttl);
    let new = fresh_grant(q, &g.lock, t, t + 1_000_000, ttl, answer);
    insert(ops, new).into_iter().next().map(|i| vec![i])
}

/// A fresh process is granted without a token inside another's definite hold, with a 1 ms
/// lease answered after 2 ms: its own definite hold is empty, so the holds cannot overlap, and
/// only placing the tokenless grant in the grant order finds it (it was asked for after the
/// holder's grant returned, and answered before that grant's lease could end).
fn tokenless_grant_inside_hold(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let (g, start, end) = pick(rng, &holds(ops, &grants(&h), 4_000_000))?;
    let q = fresh_process(ops);
    let t = start + (end - start) / 4;
    let answer = OpValue::default().with_ttl_ms(1);
    let new = fresh_grant(q, &g.lock, t, t + 2_000_000, 1, answer);
    insert(ops, new).into_iter().next().map(|i| vec![i])
}

/// Three fresh processes ask for a lock no other op uses, at one instant drawn from the
/// history's span, each with ttl 10 ms, and all are granted without a token 15 ms later: any
/// order needs 20 ms (each grant after the previous lease could end).
fn unordered_grants(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let end = ops.last()?.time_ns;
    let t = rng.random_range(0..=end);
    let lock = (0..)
        .map(|i| format!("Lunordered{i}"))
        .find(|l| !ops.iter().any(|o| o.lock.as_deref() == Some(l.as_str())))?;
    let q = fresh_process(ops);
    let answer = OpValue::default().with_ttl_ms(10);
    let new: Vec<Op> = (0..3)
        .flat_map(|i| fresh_grant(q + i, &lock, t, t + 15_000_000, 10, answer.clone()))
        .collect();
    // The three answers: `insert` returns the completions it placed.
    Some(insert(ops, new))
}

/// Two session grants on a lock of their own (model item 9), each asking for a 10 ms ttl: the
/// first's holder sends nothing for 50 ms and then releases; the second is granted 20 ms in,
/// while the first still believes it holds the lock (its ttl long past: leases would allow it).
fn session_grants(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let end = ops.last()?.time_ns;
    let t = rng.random_range(0..=end);
    let lock = (0..)
        .map(|i| format!("Lsession{i}"))
        .find(|l| !ops.iter().any(|o| o.lock.as_deref() == Some(l.as_str())))?;
    let q = fresh_process(ops);
    const MS: u64 = 1_000_000;
    let grant = |id: &str| {
        OpValue::default()
            .with_extra("grant", json!(id))
            .with_extra("hold", json!("session"))
    };
    let named = |id: &str| OpValue::default().with_extra("grant", json!(id));
    let mut new = fresh_grant(q, &lock, t, t + MS, 10, grant("session-a"));
    new.extend(fresh_grant(
        q + 1,
        &lock,
        t + 20 * MS,
        t + 21 * MS,
        10,
        grant("session-b"),
    ));
    for (p, at, id) in [
        (q, t + 50 * MS, "session-a"),
        (q + 1, t + 60 * MS, "session-b"),
    ] {
        new.push(lock_op(p, at, OpType::Invoke, F::Release, &lock, named(id)));
        new.push(lock_op(
            p,
            at + MS,
            OpType::Ok,
            F::Release,
            &lock,
            OpValue::default(),
        ));
    }
    // The completions in time order: the first grant, the second, the two releases.
    insert(ops, new).get(1).map(|&i| vec![i])
}

/// Two fresh processes, two locks of their own (leases of a minute): `q` is granted A and
/// `q+1` B, then each asks for the other's lock; both waits go unanswered until the clients
/// give up (`info`, timeout) 5 s later, past the default liveness grace.
fn wait_for_each_other(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let end = ops.last()?.time_ns;
    let t = rng.random_range(0..=end);
    let free = |l: &String| !ops.iter().any(|o| o.lock.as_deref() == Some(l.as_str()));
    let i = (0..).find(|i| free(&format!("Ldeadlock{i}a")) && free(&format!("Ldeadlock{i}b")))?;
    let (a, b) = (format!("Ldeadlock{i}a"), format!("Ldeadlock{i}b"));
    let q = fresh_process(ops);
    const MS: u64 = 1_000_000;
    const TTL_MS: u64 = 60_000;
    let answer = |token| OpValue::default().with_token(token).with_ttl_ms(TTL_MS);
    let mut new = fresh_grant(q, &a, t, t + MS, TTL_MS, answer(1));
    new.extend(fresh_grant(q + 1, &b, t, t + 2 * MS, TTL_MS, answer(1)));
    for (p, lock, at) in [(q, &b, t + 3 * MS), (q + 1, &a, t + 4 * MS)] {
        let asked = OpValue::default().with_ttl_ms(TTL_MS);
        new.push(lock_op(
            p,
            at,
            OpType::Invoke,
            F::Acquire,
            lock,
            asked.clone(),
        ));
        new.push(lock_op(
            p,
            at + 5_000 * MS,
            OpType::Info,
            F::Acquire,
            lock,
            asked.with_error("timeout"),
        ));
    }
    // The completions: both grants, then both waits given up.
    Some(insert(ops, new))
}

/// After the history's last op, a fresh process makes one bank transfer on two accounts of
/// their own (locks and registers no op used): both locks, both writes (5 out of one, 5 into
/// the other) accepted, both releases; then the closing reads, of which the second sees 3.
fn unbalanced_accounts(ops: &mut Vec<Op>, _rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let end = ops.last()?.time_ns;
    let used = |k: &String| {
        ops.iter()
            .any(|o| o.lock.as_deref() == Some(k.as_str()) || o.key.as_deref() == Some(k.as_str()))
    };
    let i = (0..).find(|i| !used(&format!("Lbank{i}a")) && !used(&format!("balance-bank{i}a")))?;
    let q = fresh_process(ops);
    const MS: u64 = 1_000_000;
    let mut t = end + MS;
    let mut new = Vec::new();
    let tag = |v: OpValue| v.with_extra("transfer", json!(1));
    let mut step = |new: &mut Vec<Op>, op: Op| {
        t += MS;
        new.push(Op { time_ns: t, ..op });
    };
    for side in ["a", "b"] {
        let lock = format!("Lbank{i}{side}");
        let key = format!("balance-bank{i}{side}");
        let asked = tag(OpValue::default().with_ttl_ms(1000));
        step(
            &mut new,
            lock_op(q, 0, OpType::Invoke, F::Acquire, &lock, asked.clone()),
        );
        step(
            &mut new,
            lock_op(q, 0, OpType::Ok, F::Acquire, &lock, asked.with_token(1)),
        );
        let delta = if side == "a" { -5 } else { 5 };
        let w = tag(OpValue::default().with_token(1).with_value(delta));
        // The account's first write (seq 1): it surely started at 0.
        for (kind, v) in [(OpType::Invoke, w.clone()), (OpType::Ok, w.with_seq(1))] {
            step(
                &mut new,
                Op::new(0, 0, Process::Client(q), kind, F::Write)
                    .with_key(&key)
                    .with_value(v),
            );
        }
        let r = tag(OpValue::default().with_token(1));
        step(
            &mut new,
            lock_op(q, 0, OpType::Invoke, F::Release, &lock, r.clone()),
        );
        step(&mut new, lock_op(q, 0, OpType::Ok, F::Release, &lock, r));
    }
    for (n, (side, seen)) in [("a", -5), ("b", 3)].into_iter().enumerate() {
        let key = format!("balance-bank{i}{side}");
        let p = Process::Client(q + 1 + n as u64);
        let asked = OpValue {
            is_final: true,
            ..OpValue::default()
        };
        step(
            &mut new,
            Op::new(0, 0, p, OpType::Invoke, F::Read)
                .with_key(&key)
                .with_value(asked.clone()),
        );
        step(
            &mut new,
            Op::new(0, 0, p, OpType::Ok, F::Read)
                .with_key(&key)
                .with_value(asked.with_value(seen)),
        );
    }
    // The completions are the grants, writes and releases, then the two closing reads.
    let done = insert(ops, new);
    Some(done[done.len() - 2..].to_vec())
}

/// Two transfers on a fresh account after the history's end, each from a fresh process: both
/// read version 0, then the second writes version 1 and the first version 2 from its stale
/// read (a lost update; no lock op, so nothing else is proven of them). The witness is the
/// first's read, the second's write and the first's write: the cycle's two edges.
fn interleaved_transfers(ops: &mut Vec<Op>, _rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let end = ops.last()?.time_ns;
    let used = |k: &String| ops.iter().any(|o| o.key.as_deref() == Some(k.as_str()));
    let key = (0..)
        .map(|i| format!("balance-serial{i}"))
        .find(|k| !used(k))?;
    let last_transfer = ops
        .iter()
        .filter_map(|o| o.value.extra.get("transfer").and_then(|t| t.as_u64()))
        .max()
        .unwrap_or(0);
    let q = fresh_process(ops);
    const MS: u64 = 1_000_000;
    let mut t = end + MS;
    let mut new = Vec::new();
    // (transfer, write, seq)
    for (n, write, seq) in [(0, false, 0), (1, false, 0), (1, true, 1), (0, true, 2)] {
        let p = Process::Client(q + n);
        let tag = OpValue::default().with_extra("transfer", json!(last_transfer + 1 + n));
        let f = if write { F::Write } else { F::Read };
        let asked = if write {
            tag.clone().with_value(seq as i64 * 10)
        } else {
            tag.clone()
        };
        t += MS;
        new.push(
            Op::new(0, t, p, OpType::Invoke, f.clone())
                .with_key(&key)
                .with_value(asked.clone()),
        );
        t += MS;
        let answer = if write {
            asked.with_seq(seq)
        } else {
            asked.with_value(0).with_seq(seq)
        };
        new.push(
            Op::new(0, t, p, OpType::Ok, f)
                .with_key(&key)
                .with_value(answer),
        );
    }
    let done = insert(ops, new);
    Some(vec![done[0], done[2], done[3]])
}

/// A grant's lease is recorded as set before it (`lease_from_ns`: a session lease confirmed a
/// quarter ttl before the acquire was sent, which only shortens what the model guarantees),
/// and a fresh process is granted while that lease, counted from there, surely lasts.
fn grant_inside_earlier_lease(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs: Vec<G> = grants(&h)
        .into_iter()
        .filter(|g| ops[g.invoke].time_ns >= g.ttl_ms * 250_000)
        .collect();
    let g = pick(rng, &gs)?;
    let from = ops[g.invoke].time_ns - g.ttl_ms * 250_000;
    ops[g.complete]
        .value
        .extra
        .insert("lease_from_ns".into(), json!(from));
    let (_, start, end) = holds(ops, std::slice::from_ref(&g), 4_000_000).pop()?;
    let token = make_room(ops, &g.lock, g.token);
    let q = fresh_process(ops);
    let t = start + (end - start) / 2;
    let answer = OpValue::default().with_token(token).with_ttl_ms(g.ttl_ms);
    let new = fresh_grant(q, &g.lock, t, t + 1_000_000, g.ttl_ms, answer);
    insert(ops, new).into_iter().next().map(|i| vec![i])
}

/// After a holder's accepted release, a fresh process (a restarted worker) renews the
/// released grant by its token, and the service says ok, before any later grant of the lock
/// returned: no stale token is involved, only a lease that no longer exists.
fn renew_after_release(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs = grants(&h);
    // (the released grant, the release's completion)
    let released: Vec<(G, u64)> = h
        .operations()
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && h.invoke_of(o).f == F::Release)
        .filter_map(|o| {
            let inv = h.invoke_of(o);
            let g = gs.iter().find(|g| {
                Some(&g.lock) == inv.lock.as_ref()
                    && Process::Client(g.process) == inv.process
                    && Some(g.token) == inv.value.token
            })?;
            let done = h.complete_of(o)?.time_ns;
            let next = gs
                .iter()
                .filter(|n| n.lock == g.lock && ops[n.complete].time_ns > done)
                .map(|n| ops[n.complete].time_ns)
                .min()
                .unwrap_or(u64::MAX);
            (next > done + 2_000_000).then(|| (g.clone(), done))
        })
        .collect();
    let (g, done) = pick(rng, &released)?;
    let q = fresh_process(ops);
    let v = OpValue::default().with_token(g.token).with_ttl_ms(g.ttl_ms);
    let new = vec![
        lock_op(q, done + 1, OpType::Invoke, F::Renew, &g.lock, v.clone()),
        lock_op(q, done + 1_000_001, OpType::Ok, F::Renew, &g.lock, v),
    ];
    insert(ops, new).into_iter().next().map(|i| vec![i])
}

/// A write later in store order than another carries a lower token.
fn accept_stale_write(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let ws = ok_writes(&h);
    let later: Vec<(usize, usize)> = ws
        .iter()
        .filter(|(_, c)| {
            let (key, seq) = (&ops[*c].key, ops[*c].value.seq);
            ws.iter()
                .any(|(_, c2)| &ops[*c2].key == key && ops[*c2].value.seq < seq)
        })
        .copied()
        .collect();
    let (i, c) = pick(rng, &later)?;
    ops[i].value.token = Some(0);
    ops[c].value.token = Some(0);
    Some(vec![ops[c].index])
}

/// Two acknowledged writes store the same value.
fn duplicate_value(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let ws = ok_writes(&h);
    let all: &[Op] = ops;
    let pairs: Vec<((usize, usize), (usize, usize))> = ws
        .iter()
        .flat_map(|a| {
            ws.iter()
                .filter(move |b| all[b.1].key == all[a.1].key && b.1 > a.1)
                .map(move |b| (*a, *b))
        })
        .take(500)
        .collect();
    let (a, b) = pick(rng, &pairs)?;
    let v = ops[a.0].value.value;
    ops[b.0].value.value = v;
    ops[b.1].value.value = v;
    Some(vec![ops[a.1].index, ops[b.1].index])
}

/// The final read misses an acknowledged write.
fn low_final_read(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let ws = ok_writes(&h);
    let finals: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].kind == OpType::Ok && ops[i].value.is_final)
        .filter(|&i| ws.iter().any(|w| ops[w.1].key == ops[i].key))
        .collect();
    let r = pick(rng, &finals)?;
    let n = ws.iter().filter(|w| ops[w.1].key == ops[r].key).count() as i64;
    ops[r].value.value = Some(n - 1);
    Some(vec![ops[r].index])
}

/// A fresh process releases (or renews) with a token older than a completed grant, and the
/// service says ok.
fn stale_lock_op(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng, f: F) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs: Vec<G> = grants(&h).into_iter().filter(|g| g.token >= 2).collect();
    let g = pick(rng, &gs)?;
    let q = fresh_process(ops);
    let t = ops[g.complete].time_ns + 1;
    let mut v = OpValue::default().with_token(g.token - 1);
    if f == F::Renew {
        v.ttl_ms = Some(g.ttl_ms);
    }
    let new = vec![
        lock_op(q, t, OpType::Invoke, f.clone(), &g.lock, v.clone()),
        lock_op(q, t + 1_000_000, OpType::Ok, f, &g.lock, v),
    ];
    insert(ops, new).into_iter().next().map(|i| vec![i])
}

fn stale_release(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    stale_lock_op(ops, rng, F::Release)
}

fn stale_renew(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    stale_lock_op(ops, rng, F::Renew)
}

/// Long after everything, the service still answers held.
fn held_long_after(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs = grants(&h);
    let g = pick(rng, &gs)?;
    let end = ops.last()?.time_ns;
    let t = end
        + g.ttl_ms * 1_000_000
        + crate::CheckConfig::default().liveness_grace_ns
        + 1_000_000_000;
    let q = fresh_process(ops);
    let new = vec![
        lock_op(
            q,
            t,
            OpType::Invoke,
            F::Acquire,
            &g.lock,
            OpValue::default().with_ttl_ms(g.ttl_ms),
        ),
        lock_op(
            q,
            t + 1_000_000,
            OpType::Fail,
            F::Acquire,
            &g.lock,
            OpValue::default().with_error("held"),
        ),
    ];
    insert(ops, new).into_iter().next().map(|i| vec![i])
}

/// The adapter's evidence shows the grant's lease long dead when it returned.
fn grant_on_dead_lease(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs: Vec<G> = grants(&h)
        .into_iter()
        .filter(|g| ops[g.complete].time_ns > 3 * g.ttl_ms * 1_000_000)
        .collect();
    let g = pick(rng, &gs)?;
    let done = ops[g.complete].time_ns;
    let v = &mut ops[g.complete].value;
    v.extra.insert(
        "lease_last_ok_ns".into(),
        json!(done - 2 * g.ttl_ms * 1_000_000),
    );
    v.extra.insert("lease_ttl_ms".into(), json!(g.ttl_ms));
    Some(vec![ops[g.complete].index])
}

/// A grant whose adapter read its lock key back at the answer's revision and found none (as
/// etcd's adapter records it): the service answered a grant it held no key for. The token
/// stays, so nothing else in the history changes.
fn grant_without_key(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs = grants(&h);
    let g = pick(rng, &gs)?;
    let v = &mut ops[g.complete].value;
    v.extra
        .insert("lock_key".into(), json!(format!("{}/694d", g.lock)));
    v.extra
        .insert("answer_revision".into(), json!(1000 + g.token));
    v.extra.insert("key_at_revision".into(), json!("absent"));
    Some(vec![ops[g.complete].index])
}

/// Frees token `after + 1` on `lock` by raising every larger token of that lock, and of the
/// register it guards (the generator's lock `L<i>` guards `k<i>`), by one: an order-preserving
/// renumbering, so the history stays correct and an injected grant can take `after + 1`
/// without a cascade of further violations against every later grant.
fn make_room(ops: &mut [Op], lock: &str, after: u64) -> u64 {
    let key = lock.strip_prefix('L').map(|i| format!("k{i}"));
    for o in ops.iter_mut() {
        let mine = o.lock.as_deref() == Some(lock)
            || (o.key.is_some() && o.key.as_deref() == key.as_deref());
        if let (true, Some(t)) = (mine, o.value.token) {
            if t > after {
                o.value.token = Some(t + 1);
            }
        }
    }
    after + 1
}

/// A fresh process's grant completes inside another grant B's acquire window, with a lease
/// too short to give it a definite hold, and before B's grant can have ended (B's release or
/// lease bound): exclusivity forces it before B, yet it carries a higher token than B.
fn regress_token_inferred(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs = grants(&h);
    // B's window must leave room for the injected acquire, and B's hold must be sure past it.
    let windows: Vec<G> = gs
        .iter()
        .filter(|g| ops[g.complete].time_ns - ops[g.invoke].time_ns > 4_000_000)
        .cloned()
        .collect();
    let b = pick(rng, &windows)?;
    let token = make_room(ops, &b.lock, b.token);
    let q = fresh_process(ops);
    let t = ops[b.invoke].time_ns + 1;
    let new = vec![
        lock_op(
            q,
            t,
            OpType::Invoke,
            F::Acquire,
            &b.lock,
            OpValue::default().with_ttl_ms(1),
        ),
        lock_op(
            q,
            t + 2_000_000,
            OpType::Ok,
            F::Acquire,
            &b.lock,
            OpValue::default().with_token(token).with_ttl_ms(1),
        ),
    ];
    let b_index_marker = b.complete;
    ops[b_index_marker]
        .extra
        .insert(WITNESS.to_string(), json!(true));
    let mut out = insert(ops, new);
    let at = ops.iter().position(|o| o.extra.contains_key(WITNESS))?;
    ops[at].extra.remove(WITNESS);
    out.push(ops[at].index);
    Some(out)
}
