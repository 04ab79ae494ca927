//! Properties over generated histories: a correct system's history is always valid (no false
//! positives), and each kind of violation injected into one is always found, with the injected
//! op in its witness (no misses).

// Every mutation has one signature, and some insert ops, so they all take `&mut Vec<Op>`.
#![allow(clippy::ptr_arg)]

use checkers::gen::{correct_history, GenParams};
use checkers::CheckConfig;
use history::{History, Op, OpType, OpValue, Outcome, Process, Validity, ViolationKind, F};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

fn params(clients: usize, locks: usize, info_rate: f64, events: usize) -> GenParams {
    GenParams {
        clients,
        locks,
        events,
        info_rate,
        client_pause_rate: 0.05,
        ..GenParams::default()
    }
}

proptest! {
    // A few hundred cases in all, small histories: the debug test run stays well under a minute.
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn correct_histories_are_valid(
        seed in any::<u64>(),
        clients in 1usize..=6,
        locks in 1usize..=3,
        info_rate in 0.0f64..0.2,
        pause_rate in 0.0f64..0.15,
        drift in prop_oneof![Just(0.0), 0.001f64..0.2],
        nemesis in any::<bool>(),
        evidence in any::<bool>(),
        events in 200usize..3_000,
    ) {
        let p = GenParams {
            client_pause_rate: pause_rate,
            nemesis,
            lease_evidence: evidence,
            ..params(clients, locks, info_rate, events)
        };
        let ops = correct_history(seed, &p);
        let h = History::new(ops).expect("generated histories obey the structure rules");
        let cfg = CheckConfig { drift, ..CheckConfig::default() };
        let r = checkers::check(&h, &cfg);
        prop_assert!(
            r.violations.is_empty(),
            "false positive on a correct history (seed {seed}, {p:?}): {:#?}",
            r.violations
        );
        let want = if r.stats.grants == 0 { Validity::Unknown } else { Validity::Valid };
        prop_assert_eq!(r.valid, want);
    }
}

#[test]
fn generator_is_deterministic() {
    let p = params(4, 2, 0.05, 1_500);
    assert_eq!(correct_history(42, &p), correct_history(42, &p));
    assert_ne!(correct_history(42, &p), correct_history(43, &p));
}

#[test]
fn generator_exercises_every_answer() {
    let p = GenParams {
        client_pause_rate: 0.1,
        ..params(5, 2, 0.05, 4_000)
    };
    let h = History::new(correct_history(3, &p)).unwrap();
    let errors: std::collections::BTreeSet<&str> = h
        .ops
        .iter()
        .filter_map(|o| o.value.error.as_deref())
        .collect();
    for e in ["held", "not-holder", "stale-token", "timeout"] {
        assert!(errors.contains(e), "no {e} answer in {errors:?}");
    }
    let fs: std::collections::BTreeSet<&str> = h.nemesis().map(|o| o.f.as_str()).collect();
    for f in [
        "start-pause",
        "stop-pause",
        "start-client-pause",
        "kill",
        "restart",
    ] {
        assert!(fs.contains(f), "no {f} in {fs:?}");
    }
    let s = checkers::stats(&h);
    assert!(s.ops["renew"]["ok"] > 0, "no renewals: {:?}", s.ops);
    assert!(h.ops.iter().any(|o| o.value.is_final));
}

#[test]
fn stalled_holders_give_unsafe_overlap_warnings_not_violations() {
    let mut warned = 0;
    for seed in 0..10 {
        let p = GenParams {
            client_pause_rate: 0.3,
            ..params(4, 1, 0.0, 800)
        };
        let h = History::new(correct_history(seed, &p)).unwrap();
        let r = checkers::check(&h, &CheckConfig::default());
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
        warned += r.warnings.len();
        for w in &r.warnings {
            assert_eq!(w.kind, ViolationKind::UnsafeOverlap);
            assert!(
                w.nemesis.iter().any(|f| f.f == "start-client-pause"),
                "a stall caused it, so it must be listed: {w:#?}"
            );
        }
    }
    assert!(warned > 0, "no stalled holder ever overlapped another");
}

// ---- mutation tests ----------------------------------------------------------------------

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

/// Inserts ops (marked, so they can be found after renumbering) in time order and renumbers
/// every index; returns the new indices of the marked ops.
fn insert(ops: &mut Vec<Op>, new: Vec<Op>) -> Vec<u64> {
    for mut op in new {
        op.extra.insert(MARK.to_string(), json!(true));
        let at = ops.partition_point(|o| o.time_ns <= op.time_ns);
        ops.insert(at, op);
    }
    for (i, o) in ops.iter_mut().enumerate() {
        o.index = i as u64;
    }
    ops.iter()
        .filter(|o| o.extra.contains_key(MARK) && o.kind != OpType::Invoke)
        .map(|o| o.index)
        .collect()
}

fn fresh_process(ops: &[Op]) -> u64 {
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

/// A fresh process is granted the lock inside another's definite hold.
fn grant_inside_hold(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
    let h = History::new(ops.clone()).unwrap();
    let gs = grants(&h);
    // The hold: from the grant's ok to its release's invoke or its lease's lower bound.
    let holds: Vec<(G, u64, u64)> = gs
        .iter()
        .filter_map(|g| {
            let start = ops[g.complete].time_ns;
            let lease_end = ops[g.invoke].time_ns + g.ttl_ms * 1_000_000;
            let release = ops[g.complete..]
                .iter()
                .find(|o| {
                    o.kind == OpType::Invoke
                        && o.f == F::Release
                        && o.process == Process::Client(g.process)
                        && o.value.token == Some(g.token)
                })
                .map_or(u64::MAX, |o| o.time_ns);
            let end = lease_end.min(release);
            (end > start + 4_000_000).then(|| (g.clone(), start, end))
        })
        .collect();
    let (g, start, end) = pick(rng, &holds)?;
    let q = fresh_process(ops);
    let t = start + (end - start) / 4;
    let ttl = g.ttl_ms;
    let new = vec![
        lock_op(
            q,
            t,
            OpType::Invoke,
            F::Acquire,
            &g.lock,
            OpValue::default().with_ttl_ms(ttl),
        ),
        lock_op(
            q,
            t + 1_000_000,
            OpType::Ok,
            F::Acquire,
            &g.lock,
            OpValue::default()
                .with_token(1_000_000_000)
                .with_ttl_ms(ttl),
        ),
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
    let t = end + g.ttl_ms * 1_000_000 + CheckConfig::default().liveness_grace_ns + 1_000_000_000;
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

/// Runs one mutation over many seeds: every injected violation must be found, with the
/// injected ops in its witness.
fn assert_found(kind: ViolationKind, mutate: Mutation) {
    let seeds = 50;
    let mut applied = 0;
    for seed in 0..seeds {
        let p = GenParams {
            nemesis: seed % 2 == 0,
            lease_evidence: seed % 3 != 0,
            ..params(
                1 + (seed as usize % 5),
                1 + (seed as usize % 3),
                0.05,
                1_000,
            )
        };
        let mut ops = correct_history(seed, &p);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
        let Some(witness) = mutate(&mut ops, &mut rng) else {
            continue;
        };
        applied += 1;
        let h = History::new(ops).expect("mutations keep the structure");
        let r = checkers::check(&h, &CheckConfig::default());
        assert_eq!(r.valid, Validity::Invalid, "{kind} not found (seed {seed})");
        let hit = r
            .violations
            .iter()
            .any(|v| v.kind == kind && witness.iter().all(|w| v.ops.contains(w)));
        assert!(
            hit,
            "{kind} with witness {witness:?} not found (seed {seed}); found: {:#?}",
            r.violations
                .iter()
                .map(|v| (v.kind, &v.ops))
                .collect::<Vec<_>>()
        );
    }
    assert!(
        applied >= seeds * 2 / 3,
        "{kind}: only {applied} of {seeds} histories could take the mutation"
    );
}

#[test]
fn finds_injected_token_reuse() {
    assert_found(ViolationKind::TokenReused, reuse_token);
}

#[test]
fn finds_injected_token_regression() {
    assert_found(ViolationKind::TokenRegressed, regress_token);
}

#[test]
fn finds_injected_double_grant() {
    assert_found(ViolationKind::DoubleGrant, grant_inside_hold);
}

#[test]
fn finds_injected_stale_write() {
    assert_found(ViolationKind::StaleWriteAccepted, accept_stale_write);
}

#[test]
fn finds_injected_duplicate_counter_value() {
    assert_found(ViolationKind::LostUpdate, duplicate_value);
}

#[test]
fn finds_injected_low_final_read() {
    assert_found(ViolationKind::LostUpdate, low_final_read);
}

#[test]
fn finds_injected_stale_release() {
    assert_found(ViolationKind::StaleReleaseAccepted, stale_release);
}

#[test]
fn finds_injected_stale_renew() {
    assert_found(ViolationKind::StaleRenewAccepted, stale_renew);
}

#[test]
fn finds_injected_stuck_lock() {
    assert_found(ViolationKind::LockStuck, held_long_after);
}

#[test]
fn finds_injected_grant_on_expired_lease() {
    assert_found(ViolationKind::GrantOnExpiredLease, grant_on_dead_lease);
}
