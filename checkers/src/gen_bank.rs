//! A seeded simulator of a correct bank run: clients transfer between accounts, each guarded by
//! its own lock, taking both locks in sorted order from a correct lock service, reading both
//! balances and writing both through a fenced store that numbers its writes, then releasing
//! both; transfers on disjoint accounts run at the same time. Some may be applied in part (a
//! second write refused, or unanswered and applied or not: `partial_pct`). Its histories are
//! serializable, keep the total but for what those moved, and never deadlock, so every checker
//! must find them valid; `lockpick synth
//! --workload bank` writes them for the graph checks' benchmarks. Same seed and parameters,
//! same history.

use history::{Op, OpType, OpValue, Process, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Where the processes that replace a crashed one (an unanswered write ends its process) are
/// numbered from: past the clients' and the closing reads'.
const REPLACEMENTS_FROM: u64 = 1 << 32;

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
    /// Percent of the transfers applied in part: the store refuses their second write (a
    /// definite `fail`), or leaves it unanswered (`info`), applied or not at a coin's toss.
    pub partial_pct: u32,
}

impl Default for BankParams {
    fn default() -> Self {
        BankParams {
            clients: 8,
            accounts: 16,
            events: 100_000,
            ttl_ms: 10_000,
            partial_pct: 0,
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
            // Nothing in flight and accounts held by crashed processes: on to their expiry.
            if bank.flight.iter().all(Option::is_none) {
                bank.lapse_all();
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
    bank.lapse_all();
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
    /// (when its lease surely ended, account) of the accounts a crashed process held.
    lapsing: Vec<(u64, usize)>,
    /// Per client, the process it records as (a new one after each crash).
    processes: Vec<u64>,
    next_process: u64,
    partial_pct: u32,
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
            lapsing: Vec::new(),
            processes: (0..p.clients as u64).collect(),
            next_process: REPLACEMENTS_FROM,
            partial_pct: p.partial_pct,
            tokens: vec![0; p.accounts],
            seqs: vec![0; p.accounts],
            balances: vec![0; p.accounts],
            flight: (0..p.clients).map(|_| None).collect(),
            next_id: 1,
        }
    }

    /// An op as its invoke at `at[0]` and its answer, `outcome`, at `at[1]`: a lock op names
    /// the lock, a store op the register.
    #[allow(clippy::too_many_arguments)]
    fn pair_as(
        &mut self,
        outcome: OpType,
        who: Process,
        f: F,
        target: &str,
        at: [u64; 2],
        asked: OpValue,
        answered: OpValue,
    ) {
        debug_assert!(at[0] <= at[1], "an op completes after its invoke");
        for (kind, time_ns, v) in [(OpType::Invoke, at[0], asked), (outcome, at[1], answered)] {
            let op = Op::new(self.index, time_ns, who, kind, f.clone());
            let op = match f {
                F::Acquire | F::Renew | F::Release => op.with_lock(target),
                _ => op.with_key(target),
            };
            self.ops.push(op.with_value(v));
            self.index += 1;
        }
    }

    /// The accounts of crashed processes whose leases have surely ended are free again.
    fn lapse(&mut self) {
        let now = self.t_ns;
        let held = &mut self.held;
        self.lapsing.retain(|&(until_ns, a)| {
            if until_ns <= now {
                held[a] = false;
            }
            until_ns > now
        });
    }

    /// Time moves on past every lease a crashed process left, freeing its accounts.
    fn lapse_all(&mut self) {
        if let Some(last) = self.lapsing.iter().map(|&(t, _)| t).max() {
            self.t_ns = self.t_ns.max(last);
        }
        self.lapse();
    }

    /// An idle client starts a transfer when two free accounts are left.
    fn start_transfer(&mut self, c: usize) {
        self.lapse();
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
            process: self.processes[c],
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
                self.pair_as(OpType::Ok, who, F::Acquire, &lock, at, asked, granted);
            }
            1 => {
                tr.read[k] = self.balances[acct];
                let v = tag.with_token(tr.tokens[k]);
                let read = v.clone().with_value(tr.read[k]).with_seq(self.seqs[acct]);
                self.pair_as(OpType::Ok, who, F::Read, &key, at, v, read);
            }
            2 => {
                let delta = if k == 0 { -tr.amount } else { tr.amount };
                let value = tr.read[k] + delta;
                let v = tag.with_token(tr.tokens[k]).with_value(value);
                // Drawn only when asked for, so a seed's history without them is as it was.
                let partial = k == 1
                    && self.partial_pct > 0
                    && self.rng.random_range(0..100) < self.partial_pct;
                let outcome = match partial && self.rng.random_bool(0.5) {
                    _ if !partial => OpType::Ok,
                    true => OpType::Fail,
                    false => OpType::Info,
                };
                // An unanswered write lands or not; a refused one never does.
                if outcome == OpType::Ok || (outcome == OpType::Info && self.rng.random_bool(0.5)) {
                    self.balances[acct] = value;
                    self.seqs[acct] += 1;
                }
                let answered = match outcome {
                    OpType::Ok => v.clone().with_seq(self.seqs[acct]),
                    OpType::Fail => v.clone().with_error("unavailable"),
                    _ => v.clone().with_error("timeout"),
                };
                self.pair_as(outcome, who, F::Write, &key, at, v, answered);
                if outcome == OpType::Info {
                    // The process crashed: it runs no further op, its locks lapse with their
                    // leases, and the client goes on as a new process.
                    let until_ns = at[1] + (ttl_ms + 1) * MS;
                    self.lapsing.extend(tr.accounts.map(|a| (until_ns, a)));
                    self.processes[c] = self.next_process;
                    self.next_process += 1;
                    self.t_ns = at[1];
                    return;
                }
            }
            _ => {
                let v = tag.with_token(tr.tokens[k]);
                self.pair_as(OpType::Ok, who, F::Release, &lock, at, v.clone(), v);
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
            self.pair_as(OpType::Ok, who, F::Read, &key, at, v, read);
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
    /// (the total and the transfers' order, also where transfers were applied in part), and
    /// the same seed gives the same history. A closing read off by more than the run moved is
    /// `total-changed`, whatever the unanswered writes did.
    #[test]
    fn a_generated_bank_is_valid_and_judged() {
        for seed in 0..20 {
            let p = BankParams {
                clients: 1 + seed as usize % 6,
                accounts: 2 + seed as usize % 5,
                events: 3_000,
                // Every other run has transfers applied in part, refused or unanswered.
                partial_pct: if seed % 2 == 1 { 20 } else { 0 },
                ..BankParams::default()
            };
            let mut ops = Vec::new();
            bank_history_into(seed, &p, &mut |o| ops.extend_from_slice(o));
            let mut again = Vec::new();
            bank_history_into(seed, &p, &mut |o| again.extend_from_slice(o));
            assert_eq!(ops, again, "seed {seed}");
            let partial = (ops.iter())
                .filter(|o| o.f == F::Write && o.kind != OpType::Ok && o.kind != OpType::Invoke)
                .count();
            assert_eq!(
                partial > 0,
                p.partial_pct > 0,
                "seed {seed}: {partial} partial"
            );
            // The same run with the last closing read off by more than every amount the run
            // moved: whatever the unanswered writes did, money was made.
            let mut made = ops.clone();
            let last = (made.iter_mut().rev())
                .find(|o| o.f == F::Read && o.kind == OpType::Ok)
                .expect("closing reads");
            last.value.value = last.value.value.map(|v| v + 1_000_000);
            let h = History::new(made).expect("a well-formed history");
            let r = crate::check(&h, &crate::CheckConfig::default());
            let kinds: Vec<_> = r.violations.iter().map(|v| v.kind.as_str()).collect();
            assert!(kinds.contains(&"total-changed"), "seed {seed}: {kinds:?}");
            let h = History::new(ops).expect("a well-formed history");
            let r = crate::check(&h, &crate::CheckConfig::default());
            assert_eq!(r.valid, Validity::Valid, "seed {seed}: {:#?}", r.violations);
            for name in ["bank-total", "serializability", "deadlock"] {
                let c = r.checkers.iter().find(|c| c.name == name).unwrap();
                assert!(
                    c.not_judged.is_none(),
                    "seed {seed}: {name} not judged: {:?}",
                    c.not_judged
                );
                assert!(c.notes.is_empty(), "seed {seed}: {name}: {:?}", c.notes);
            }
        }
    }
}
