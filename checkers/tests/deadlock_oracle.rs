//! The `deadlock` rule against brute force: on thousands of small generated histories (two to
//! four clients, each taking one lock and then asking for a second, whose wait ends in a
//! grant, a refusal, a client giving up or never), every cycle of waits is enumerated by
//! trying every sequence of processes, waits and holds, and its standing interval computed
//! by intersecting them; a cycle is a deadlock when it stood until its deadline (the liveness
//! grace past the latest of its forming and each wait's invoke plus its wait_ms). The checker,
//! which sweeps the wait-for graph of each instant, must report exactly those cycles (sound:
//! nothing else; complete: all of them), named by their waits' and grants' ops.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::{CheckConfig, Func, Model};
use history::{History, Op, OpType, OpValue, Process, ViolationKind, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

const MS: u64 = 1_000_000;
const LOCKS: [&str; 3] = ["A", "B", "C"];

/// One client's ops: an acquire granted, a second acquire of another lock and how it ended,
/// then the releases of whatever it holds (none after it crashed or while it still waits).
fn client(rng: &mut ChaCha8Rng, p: u64, locks: usize, out: &mut Vec<Op>) {
    let first = rng.random_range(0..locks);
    let second = (first + rng.random_range(1..locks)) % locks;
    let ttl_ms = [200, 1000, 5000][rng.random_range(0..3)];
    let wait_ms = [None, Some(100), Some(500)][rng.random_range(0..3)];
    let asked = || {
        let v = OpValue::default().with_ttl_ms(ttl_ms);
        match wait_ms {
            Some(w) => v.with_extra("wait_ms", serde_json::json!(w)),
            None => v,
        }
    };
    let op = |t: u64, kind: OpType, f: F, lock: usize, v: OpValue| {
        Op::new(0, t, Process::Client(p), kind, f)
            .with_lock(LOCKS[lock])
            .with_value(v)
    };
    let mut t = rng.random_range(0..500) * MS;
    out.push(op(t, OpType::Invoke, F::Acquire, first, asked()));
    t += rng.random_range(1..50) * MS;
    out.push(op(
        t,
        OpType::Ok,
        F::Acquire,
        first,
        asked().with_token(p + 1),
    ));
    t += rng.random_range(1..200) * MS;
    out.push(op(t, OpType::Invoke, F::Acquire, second, asked()));
    t += rng.random_range(1..3000) * MS;
    let mut held = vec![first];
    match rng.random_range(0..4) {
        0 => {
            out.push(op(
                t,
                OpType::Ok,
                F::Acquire,
                second,
                asked().with_token(p + 100),
            ));
            held.push(second);
        }
        1 => out.push(op(
            t,
            OpType::Fail,
            F::Acquire,
            second,
            asked().with_error("held"),
        )),
        2 => {
            out.push(op(
                t,
                OpType::Info,
                F::Acquire,
                second,
                asked().with_error("timeout"),
            ));
            return;
        }
        _ => return,
    }
    for lock in held.into_iter().rev() {
        let token = if lock == first { p + 1 } else { p + 100 };
        let v = OpValue::default().with_token(token);
        t += MS;
        out.push(op(t, OpType::Invoke, F::Release, lock, v.clone()));
        t += MS;
        out.push(op(t, OpType::Ok, F::Release, lock, v));
    }
}

fn history(seed: u64) -> History {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let clients = rng.random_range(2..=4);
    let locks = rng.random_range(2..=3);
    let mut ops = Vec::new();
    for p in 0..clients {
        client(&mut rng, p, locks, &mut ops);
    }
    // A stable sort keeps each process's ops in its own order.
    ops.sort_by_key(|o| o.time_ns);
    for (i, o) in ops.iter_mut().enumerate() {
        o.index = i as u64;
    }
    History::new(ops).expect("generated histories are well formed")
}

/// Every deadlock by brute force: each cycle as the sorted op indices of its waits and of the
/// grants that held what they waited for.
fn oracle(m: &Model, cfg: &CheckConfig) -> BTreeSet<Vec<u64>> {
    // (process, lock, position, from, to)
    let waits: Vec<(u64, u32, usize, u64, u64)> = m
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.func == Func::Acquire)
        .map(|(i, o)| {
            let end = o.complete_ns().unwrap_or(m.end_time_ns);
            (o.process, o.target, i, o.invoke_ns, end)
        })
        .collect();
    // (process, lock, grant's op position, from, to)
    let holds: Vec<(u64, u32, usize, u64, u64)> = m
        .grants
        .iter()
        .flat_map(|g| {
            g.holds
                .iter()
                .map(move |s| (g.process, g.lock, g.op, s.start_ns, s.end_ns))
        })
        .collect();
    let procs: Vec<u64> = {
        let mut p: Vec<u64> = waits.iter().map(|w| w.0).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    let mut found = BTreeSet::new();
    // Every sequence of distinct processes starting at its smallest (one per rotation).
    let mut seqs: Vec<Vec<u64>> = procs.iter().map(|&p| vec![p]).collect();
    while let Some(seq) = seqs.pop() {
        if seq.len() >= 2 {
            judge(m, cfg, &seq, &waits, &holds, &mut found);
        }
        for &p in &procs {
            if p > seq[0] && !seq.contains(&p) {
                let mut next = seq.clone();
                next.push(p);
                seqs.push(next);
            }
        }
    }
    found
}

/// The waits and holds of one history, and the cycles found so far.
struct Search<'a> {
    m: &'a Model,
    cfg: &'a CheckConfig,
    /// (process, lock, position, from, to)
    waits: &'a [(u64, u32, usize, u64, u64)],
    /// (process, lock, grant's op position, from, to)
    holds: &'a [(u64, u32, usize, u64, u64)],
    found: &'a mut BTreeSet<Vec<u64>>,
}

/// Every choice of a wait for each process of `seq` and a hold of the next one on its lock.
fn judge(
    m: &Model,
    cfg: &CheckConfig,
    seq: &[u64],
    waits: &[(u64, u32, usize, u64, u64)],
    holds: &[(u64, u32, usize, u64, u64)],
    found: &mut BTreeSet<Vec<u64>>,
) {
    let mut s = Search {
        m,
        cfg,
        waits,
        holds,
        found,
    };
    s.go(seq, &mut Vec::new());
}

impl Search<'_> {
    /// `choice`: a (wait, hold) per link of `seq` so far, chosen depth-first.
    fn go(&mut self, seq: &[u64], choice: &mut Vec<(usize, usize)>) {
        let k = choice.len();
        if k == seq.len() {
            self.close(choice);
            return;
        }
        let (p, next) = (seq[k], seq[(k + 1) % seq.len()]);
        for wi in 0..self.waits.len() {
            let w = self.waits[wi];
            if w.0 != p {
                continue;
            }
            for hi in 0..self.holds.len() {
                let h = self.holds[hi];
                if h.0 == next && h.1 == w.1 {
                    choice.push((wi, hi));
                    self.go(seq, choice);
                    choice.pop();
                }
            }
        }
    }

    /// The cycle `choice` makes: its interval, and whether it stood until its deadline.
    fn close(&mut self, choice: &[(usize, usize)]) {
        let (mut from, mut to) = (0u64, u64::MAX);
        let mut answered_by = 0u64;
        for &(w, h) in choice {
            let w = self.waits[w];
            let h = self.holds[h];
            from = from.max(w.3).max(h.3);
            to = to.min(w.4).min(h.4);
            let wait_ns = self.m.wait_ms_of(w.2).unwrap_or(0) * MS;
            answered_by = answered_by.max(w.3 + wait_ns);
        }
        if from < to && to >= from.max(answered_by) + self.cfg.liveness_grace_ns {
            let mut ops: Vec<u64> = choice
                .iter()
                .flat_map(|&(w, h)| {
                    [
                        self.m.ops[self.waits[w].2].index,
                        self.m.ops[self.holds[h].2].index,
                    ]
                })
                .collect();
            ops.sort_unstable();
            ops.dedup();
            self.found.insert(ops);
        }
    }
}

#[test]
fn deadlock_agrees_with_brute_force() {
    let cfg = CheckConfig {
        liveness_grace_ns: 500 * MS,
        ..CheckConfig::default()
    };
    let (mut deadlocks, mut cases) = (0, 0);
    for seed in 0..3_000 {
        let h = history(seed);
        let m = Model::new(&h, &cfg);
        let want = oracle(&m, &cfg);
        let r = checkers::check(&h, &cfg);
        let got: BTreeSet<Vec<u64>> = r
            .violations
            .iter()
            .filter(|v| v.kind == ViolationKind::Deadlock)
            .map(|v| v.ops.clone())
            .collect();
        assert_eq!(
            got,
            want,
            "seed {seed}: checker {got:?}, brute force {want:?}\n{}",
            r.violations
                .iter()
                .map(|v| v.explanation.clone())
                .collect::<Vec<_>>()
                .join("\n")
        );
        cases += 1;
        deadlocks += usize::from(!want.is_empty());
    }
    // The generator must exercise both sides of the rule.
    assert!(
        deadlocks > cases / 20 && deadlocks < cases * 19 / 20,
        "{deadlocks} of {cases} histories deadlocked"
    );
}
