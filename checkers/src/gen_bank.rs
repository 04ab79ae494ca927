//! A seeded simulator of a correct bank run: clients transfer between accounts, each guarded by
//! its own lock, taking both locks in sorted order from a correct lock service, reading both
//! balances and writing both through a fenced store that numbers its writes, then releasing
//! both; transfers on disjoint accounts run at the same time. Its histories are serializable,
//! keep the total and never deadlock, so every checker must find them valid; `lockpick synth
//! --workload bank` writes them for the graph checks' benchmarks. Same seed and parameters,
//! same history.

use history::{Op, OpType, OpValue, Process, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct BankParams {
    /// Concurrent clients, each with at most one transfer in flight.
    pub clients: usize,
    /// Accounts (2 or more); account `i` is register `balance-A<i>` under lock `A<i>`.
    pub accounts: usize,
    /// Roughly how many events to record before the closing reads.
    pub events: usize,
    /// The lease every acquire asks for: far longer than a transfer takes here.
    pub ttl_ms: u64,
}

impl Default for BankParams {
    fn default() -> Self {
        BankParams {
            clients: 8,
            accounts: 16,
            events: 100_000,
            ttl_ms: 10_000,
        }
    }
}

const MS: u64 = 1_000_000;
/// Ops kept before they are handed on.
const BATCH: usize = 4_096;
/// The steps of a transfer, in order: acquire both, read both, write both, release both.
const STEPS: usize = 8;

struct Transfer {
    id: u64,
    process: u64,
    accounts: [usize; 2],
    tokens: [u64; 2],
    read: [i64; 2],
    amount: i64,
    step: usize,
}

/// A correct bank history, handed to `sink` in order a few thousand ops at a time (bounded
/// memory whatever its length).
///
/// # Panics
///
/// With fewer than two accounts or no client.
pub fn bank_history_into(seed: u64, p: &BankParams, sink: &mut dyn FnMut(&[Op])) {
    assert!(
        p.accounts >= 2 && p.clients >= 1,
        "two accounts and a client"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t_ns = 0u64;
    let mut ops: Vec<Op> = Vec::with_capacity(BATCH + 64);
    let mut index = 0u64;
    let mut emitted = 0usize;
    let mut held = vec![false; p.accounts];
    let mut tokens = vec![0u64; p.accounts];
    let mut seqs = vec![0u64; p.accounts];
    let mut balances = vec![0i64; p.accounts];
    let mut flight: Vec<Option<Transfer>> = (0..p.clients).map(|_| None).collect();
    let mut next_id = 1u64;
    // An op as its invoke at `at[0]` and its ok at `at[1]`: a lock op names the lock, a
    // store op the register.
    let mut pair = |ops: &mut Vec<Op>,
                    who: Process,
                    f: F,
                    target: &str,
                    at: [u64; 2],
                    asked: OpValue,
                    answered: OpValue| {
        for (kind, time_ns, v) in [
            (OpType::Invoke, at[0], asked),
            (OpType::Ok, at[1], answered),
        ] {
            let op = Op::new(index, time_ns, who, kind, f.clone());
            let op = match f {
                F::Acquire | F::Renew | F::Release => op.with_lock(target),
                _ => op.with_key(target),
            };
            ops.push(op.with_value(v));
            index += 1;
        }
    };
    // Past the events asked for no transfer starts, and those in flight finish (whole: a
    // transfer half applied would leave the total unjudged). Bounded: a round picks a client
    // at random, and at most this many rounds are run.
    let rounds_max = 64 * (p.events + p.clients * STEPS) + 1_000;
    for _ in 0..rounds_max {
        let winding_down = emitted + ops.len() >= p.events;
        if winding_down && flight.iter().all(Option::is_none) {
            break;
        }
        let c = rng.random_range(0..p.clients);
        t_ns += rng.random_range(1..=3) * MS / 4;
        let Some(tr) = flight[c].as_mut() else {
            if winding_down {
                continue;
            }
            // An idle client starts a transfer when two free accounts are left.
            let free: Vec<usize> = (0..p.accounts).filter(|&a| !held[a]).collect();
            if free.len() < 2 {
                continue;
            }
            let a = free[rng.random_range(0..free.len())];
            let b = loop {
                let b = free[rng.random_range(0..free.len())];
                if b != a {
                    break b;
                }
            };
            held[a] = true;
            held[b] = true;
            flight[c] = Some(Transfer {
                id: next_id,
                process: c as u64,
                accounts: [a.min(b), a.max(b)],
                tokens: [0; 2],
                read: [0; 2],
                amount: rng.random_range(1..=100),
                step: 0,
            });
            next_id += 1;
            continue;
        };
        let k = tr.step % 2;
        let acct = tr.accounts[k];
        let lock = format!("A{acct}");
        let key = format!("balance-A{acct}");
        let tag = OpValue::default().with_extra("transfer", json!(tr.id));
        let who = Process::Client(tr.process);
        let done_ns = t_ns + MS / 2;
        match tr.step / 2 {
            0 => {
                tokens[acct] += 1;
                tr.tokens[k] = tokens[acct];
                let asked = tag.with_ttl_ms(p.ttl_ms);
                pair(
                    &mut ops,
                    who,
                    F::Acquire,
                    &lock,
                    [t_ns, done_ns],
                    asked.clone(),
                    asked.with_token(tr.tokens[k]),
                );
            }
            1 => {
                tr.read[k] = balances[acct];
                let v = tag.with_token(tr.tokens[k]);
                pair(
                    &mut ops,
                    who,
                    F::Read,
                    &key,
                    [t_ns, done_ns],
                    v.clone(),
                    v.with_value(tr.read[k]).with_seq(seqs[acct]),
                );
            }
            2 => {
                let delta = if k == 0 { -tr.amount } else { tr.amount };
                balances[acct] = tr.read[k] + delta;
                seqs[acct] += 1;
                let v = tag.with_token(tr.tokens[k]).with_value(balances[acct]);
                pair(
                    &mut ops,
                    who,
                    F::Write,
                    &key,
                    [t_ns, done_ns],
                    v.clone(),
                    v.with_seq(seqs[acct]),
                );
            }
            _ => {
                let v = tag.with_token(tr.tokens[k]);
                pair(
                    &mut ops,
                    who,
                    F::Release,
                    &lock,
                    [t_ns, done_ns],
                    v.clone(),
                    v,
                );
                held[acct] = false;
            }
        }
        // Each op of a client ends before its next begins.
        t_ns = done_ns;
        tr.step += 1;
        if tr.step == STEPS {
            flight[c] = None;
        }
        if ops.len() >= BATCH {
            emitted += ops.len();
            sink(&ops);
            ops.clear();
        }
    }
    // Every account's closing read, once every lease has surely ended.
    t_ns += p.ttl_ms * MS;
    for acct in 0..p.accounts {
        let key = format!("balance-A{acct}");
        let who = Process::Client(p.clients as u64 + acct as u64);
        let v = OpValue {
            is_final: true,
            ..OpValue::default()
        };
        pair(
            &mut ops,
            who,
            F::Read,
            &key,
            [t_ns, t_ns + MS / 2],
            v.clone(),
            v.with_value(balances[acct]).with_seq(seqs[acct]),
        );
        t_ns += MS;
    }
    sink(&ops);
}

#[cfg(test)]
mod tests {
    use super::*;
    use history::{History, Validity};

    /// Correct by construction: every checker finds it valid, with the graph checks judged
    /// (the total and the transfers' order), and the same seed gives the same history.
    #[test]
    fn a_generated_bank_is_valid_and_judged() {
        for seed in 0..20 {
            let p = BankParams {
                clients: 1 + seed as usize % 6,
                accounts: 2 + seed as usize % 5,
                events: 3_000,
                ..BankParams::default()
            };
            let mut ops = Vec::new();
            bank_history_into(seed, &p, &mut |o| ops.extend_from_slice(o));
            let mut again = Vec::new();
            bank_history_into(seed, &p, &mut |o| again.extend_from_slice(o));
            assert_eq!(ops, again, "seed {seed}");
            let h = History::new(ops).expect("a well-formed history");
            let r = crate::check(&h, &crate::CheckConfig::default());
            assert_eq!(r.valid, Validity::Valid, "seed {seed}: {:#?}", r.violations);
            for name in ["bank-total", "serializability", "deadlock"] {
                let c = r.checkers.iter().find(|c| c.name == name).unwrap();
                assert!(c.not_judged.is_none(), "seed {seed}: {name} not judged");
                assert!(c.notes.is_empty(), "seed {seed}: {name}: {:?}", c.notes);
            }
        }
    }
}
