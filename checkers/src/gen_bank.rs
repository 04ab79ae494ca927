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
    let mut bank = Bank::new(seed, p);
    // Past the events asked for no transfer starts, and those in flight finish (whole: a
    // transfer half applied would leave the total unjudged). Bounded: a round picks a client
    // at random, and at most this many rounds are run.
    let rounds_max = 64 * (p.events + p.clients * STEPS) + 1_000;
    for _ in 0..rounds_max {
        let winding_down = bank.emitted + bank.ops.len() >= p.events;
        if winding_down && bank.flight.iter().all(Option::is_none) {
            break;
        }
        let c = bank.rng.random_range(0..p.clients);
        bank.t_ns += bank.rng.random_range(1..=3) * MS / 4;
        if bank.flight[c].is_none() {
            if !winding_down {
                bank.start_transfer(c);
            }
            continue;
        }
        bank.step(c, p.ttl_ms);
        if bank.ops.len() >= BATCH {
            bank.emitted += bank.ops.len();
            sink(&bank.ops);
            bank.ops.clear();
        }
    }
    bank.closing_reads(p);
    sink(&bank.ops);
}

/// The simulated run: the service's locks and tokens, the store's registers, the clients'
/// transfers in flight, and the ops not yet handed on.
struct Bank {
    rng: ChaCha8Rng,
    t_ns: u64,
    ops: Vec<Op>,
    index: u64,
    /// Ops handed on so far.
    emitted: usize,
    held: Vec<bool>,
    tokens: Vec<u64>,
    seqs: Vec<u64>,
    balances: Vec<i64>,
    /// Per client, its transfer in flight.
    flight: Vec<Option<Transfer>>,
    next_id: u64,
}

impl Bank {
    fn new(seed: u64, p: &BankParams) -> Bank {
        Bank {
            rng: ChaCha8Rng::seed_from_u64(seed),
            t_ns: 0,
            ops: Vec::with_capacity(BATCH + 64),
            index: 0,
            emitted: 0,
            held: vec![false; p.accounts],
            tokens: vec![0; p.accounts],
            seqs: vec![0; p.accounts],
            balances: vec![0; p.accounts],
            flight: (0..p.clients).map(|_| None).collect(),
            next_id: 1,
        }
    }

    /// An op as its invoke at `at[0]` and its ok at `at[1]`: a lock op names the lock, a
    /// store op the register.
    fn pair(
        &mut self,
        who: Process,
        f: F,
        target: &str,
        at: [u64; 2],
        asked: OpValue,
        answered: OpValue,
    ) {
        debug_assert!(at[0] <= at[1], "an op completes after its invoke");
        for (kind, time_ns, v) in [
            (OpType::Invoke, at[0], asked),
            (OpType::Ok, at[1], answered),
        ] {
            let op = Op::new(self.index, time_ns, who, kind, f.clone());
            let op = match f {
                F::Acquire | F::Renew | F::Release => op.with_lock(target),
                _ => op.with_key(target),
            };
            self.ops.push(op.with_value(v));
            self.index += 1;
        }
    }

    /// An idle client starts a transfer when two free accounts are left.
    fn start_transfer(&mut self, c: usize) {
        let free: Vec<usize> = (0..self.held.len()).filter(|&a| !self.held[a]).collect();
        if free.len() < 2 {
            return;
        }
        let a = free[self.rng.random_range(0..free.len())];
        let b = loop {
            let b = free[self.rng.random_range(0..free.len())];
            if b != a {
                break b;
            }
        };
        self.held[a] = true;
        self.held[b] = true;
        self.flight[c] = Some(Transfer {
            id: self.next_id,
            process: c as u64,
            accounts: [a.min(b), a.max(b)],
            tokens: [0; 2],
            read: [0; 2],
            amount: self.rng.random_range(1..=100),
            step: 0,
        });
        self.next_id += 1;
    }

    /// The next step of client `c`'s transfer: acquire, read, write or release one account.
    fn step(&mut self, c: usize, ttl_ms: u64) {
        let mut tr = self.flight[c].take().expect("a transfer in flight");
        debug_assert!(tr.step < STEPS, "a finished transfer leaves the flight");
        let k = tr.step % 2;
        let acct = tr.accounts[k];
        let lock = format!("A{acct}");
        let key = format!("balance-A{acct}");
        let tag = OpValue::default().with_evidence(&history::WorkerEvidence {
            transfer: Some(tr.id),
            ..Default::default()
        });
        let who = Process::Client(tr.process);
        let at = [self.t_ns, self.t_ns + MS / 2];
        match tr.step / 2 {
            0 => {
                self.tokens[acct] += 1;
                tr.tokens[k] = self.tokens[acct];
                let asked = tag.with_ttl_ms(ttl_ms);
                let granted = asked.clone().with_token(tr.tokens[k]);
                self.pair(who, F::Acquire, &lock, at, asked, granted);
            }
            1 => {
                tr.read[k] = self.balances[acct];
                let v = tag.with_token(tr.tokens[k]);
                let read = v.clone().with_value(tr.read[k]).with_seq(self.seqs[acct]);
                self.pair(who, F::Read, &key, at, v, read);
            }
            2 => {
                let delta = if k == 0 { -tr.amount } else { tr.amount };
                self.balances[acct] = tr.read[k] + delta;
                self.seqs[acct] += 1;
                let v = tag.with_token(tr.tokens[k]).with_value(self.balances[acct]);
                let written = v.clone().with_seq(self.seqs[acct]);
                self.pair(who, F::Write, &key, at, v, written);
            }
            _ => {
                let v = tag.with_token(tr.tokens[k]);
                self.pair(who, F::Release, &lock, at, v.clone(), v);
                self.held[acct] = false;
            }
        }
        // Each op of a client ends before its next begins.
        self.t_ns = at[1];
        tr.step += 1;
        if tr.step < STEPS {
            self.flight[c] = Some(tr);
        }
    }

    /// Every account's closing read, once every lease has surely ended.
    fn closing_reads(&mut self, p: &BankParams) {
        self.t_ns += p.ttl_ms * MS;
        for acct in 0..p.accounts {
            let key = format!("balance-A{acct}");
            let who = Process::Client(p.clients as u64 + acct as u64);
            let v = OpValue {
                is_final: true,
                ..OpValue::default()
            };
            let at = [self.t_ns, self.t_ns + MS / 2];
            let read = v
                .clone()
                .with_value(self.balances[acct])
                .with_seq(self.seqs[acct]);
            self.pair(who, F::Read, &key, at, v, read);
            self.t_ns += MS;
        }
    }
}

/// Makes the last ok read of `ops` that returned a version after the first say the version
/// before it: its transfer then read what a transfer that ended before it had overwritten, a
/// cycle `non-serializable` must find. Whether `ops` held such a read.
pub fn stale_read_before(ops: &mut [Op]) -> bool {
    let read = (ops.iter_mut().rev())
        .filter(|o| o.kind == OpType::Ok && o.f == F::Read)
        .find(|o| o.value.seq.is_some_and(|v| v >= 2));
    let Some(o) = read else {
        return false;
    };
    o.value.seq = o.value.seq.map(|v| v - 1);
    true
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
