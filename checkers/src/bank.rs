//! `total-changed`: the bank's money invariant. A transfer moves an amount from one account to
//! another, so it never changes the total; every account starts at 0 (a fresh store's
//! registers do, as the counter's), so the closing reads of all the accounts must sum to 0.
//!
//! Judged only when the total is determined by what the history shows: every account surely
//! started at 0 (a read saw it unwritten, `seq` 0, or the run's own write was its first, `seq`
//! 1), every account has an `ok` closing read, sent after every write was answered, and every
//! transfer was applied whole
//! or not at all (its writes all `ok`, or all refused). A transfer with a write that was never
//! answered (`info`, pending), or with one write accepted and the other refused (a fence that
//! caught a stale holder halfway), may have moved money out of one account and into none, which
//! is the client's broken critical section, not a lost update: the checker then says so in a
//! note and judges nothing. So a total that changed when every transfer was whole proves that
//! two transfers overwrote each other's balances (each read a balance the other was about to
//! change), whatever the timing, unless a closing read returned a balance no write stored:
//! then the store's answer is the cause, and the sentence names that read instead.

use crate::inject::Injector;
use crate::model::{ClientOp, Func, FxSet, Model, NO_TARGET};
use crate::text::secs;
use crate::{verdict, CheckConfig, CheckOutput, Checker, FxMap};
use history::{Outcome, Violation, ViolationKind};
use std::collections::VecDeque;

pub struct Total;

/// Why the bank's rules judge nothing in a history of another workload.
pub(crate) const NO_TRANSFER: &str =
    "no transfer in the history: the bank workload's rule (--workload bank)";

/// Why the bank's rules judge nothing in a bank run whose transfers never got past their
/// locks (each one waited, deadlocked or gave up before its reads).
pub(crate) const NO_ACCOUNT_REACHED: &str =
    "no transfer got past its locks to read or write an account: no balance moved to judge";

impl Checker for Total {
    fn injectors(&self) -> &'static [Injector] {
        injectors::TOTAL
    }

    fn name(&self) -> &'static str {
        "bank-total"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::TotalChanged]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut bank = BankTotal::default();
        for (pos, o) in m.ops.iter().enumerate() {
            bank.walked(o, m.transfer_of(pos));
        }
        let mut out = CheckOutput::new();
        bank.judge(&m.keys, &mut out);
        verdict(m, cfg, &mut out);
        out.nothing_to_judge(bank.transfers(), || bank.no_transfer().to_string());
        out
    }
}

/// The most (key, value) pairs written that the sentence of a `total-changed` remembers, to
/// tell a closing read of a balance no write stored; past it the earliest are forgotten
/// (counted), and a closing read of a value not remembered is worded as not known to be
/// stored or not. A balance moves on, so a closing read returns one written lately. 4 MiB.
pub(crate) const WRITTEN_REMEMBERED_MAX: usize = 57_344;

/// The most transfers whose writes are counted one by one at once; past it the earliest is
/// closed as it stands (counted), and the total is then not judged (a write of it still to
/// come may make it half applied). A transfer's writes come from one process, one after the
/// other, so one is done once its process writes for another: a history has about as many
/// open as the run had clients.
pub(crate) const TRANSFERS_OPEN_MAX: usize = 65_536;

/// What a `total-changed` says of a closing read.
#[derive(Debug, Clone, Copy)]
struct Closing {
    index: u64,
    invoke_ns: u64,
    complete_ns: u64,
    value: i64,
}

/// One key's reading.
#[derive(Default, Clone, Copy)]
struct Account {
    /// A transfer's op touched it: an account.
    account: bool,
    /// It surely started at 0: a read saw it never written (seq 0), or the run's own write
    /// was its first (seq 1).
    fresh: bool,
    /// Its last ok closing read.
    closing: Option<Closing>,
}

/// `total-changed` read op by op in position order: what the batch reads of every op and the
/// streaming reader of each op it walks. What it keeps is bounded by the keys, the transfers
/// still open and the values remembered, not by the history.
pub(crate) struct BankTotal {
    keys: Vec<Account>,
    /// Per transfer still open: its writes (ok, refused, unanswered).
    pub(crate) open: FxMap<u64, (u64, u64, u64)>,
    /// The transfer each process wrote for last, and the transfers in the order they opened.
    writing: FxMap<u64, u64>,
    opened: VecDeque<u64>,
    /// A transfer's lock op was read (a bank run, even if no transfer got further).
    locked: bool,
    /// Transfers with a write, and those applied halfway (a write unanswered, or one accepted
    /// and the other refused).
    transfers: u64,
    half: u64,
    /// When the last transfer write was answered (`u64::MAX` if one never was).
    last_write_ns: u64,
    /// (key, value) of the writes not refused, and the order they were remembered in.
    written: FxSet<(u32, i64)>,
    pub(crate) remembered: VecDeque<(u32, i64)>,
    /// [`WRITTEN_REMEMBERED_MAX`] and [`TRANSFERS_OPEN_MAX`] unless the tests set others.
    pub(crate) remembered_max: usize,
    pub(crate) open_max: usize,
    pub(crate) forgotten: u64,
    pub(crate) closed_early: u64,
}

impl Default for BankTotal {
    fn default() -> Self {
        BankTotal {
            keys: Vec::new(),
            open: FxMap::default(),
            writing: FxMap::default(),
            opened: VecDeque::new(),
            locked: false,
            transfers: 0,
            half: 0,
            last_write_ns: 0,
            written: FxSet::default(),
            remembered: VecDeque::new(),
            remembered_max: WRITTEN_REMEMBERED_MAX,
            open_max: TRANSFERS_OPEN_MAX,
            forgotten: 0,
            closed_early: 0,
        }
    }
}

impl BankTotal {
    /// Whether an op of a transfer touched a register: the bank's rule has something to judge.
    pub(crate) fn transfers(&self) -> bool {
        self.keys.iter().any(|k| k.account)
    }

    /// Why nothing was judged when no account was touched: no transfer at all, or transfers
    /// that never got past their locks.
    pub(crate) fn no_transfer(&self) -> &'static str {
        if self.locked {
            NO_ACCOUNT_REACHED
        } else {
            NO_TRANSFER
        }
    }

    fn key(&mut self, key: u32) -> &mut Account {
        let k = key as usize;
        if self.keys.len() <= k {
            self.keys.resize(k + 1, Account::default());
        }
        &mut self.keys[k]
    }

    /// Op `o` as it finally stands, of transfer `transfer` if it names one.
    pub(crate) fn walked(&mut self, o: &ClientOp, transfer: Option<u64>) {
        // A lock op's target is a lock, not a register.
        if o.func.is_lock_op() || o.target == NO_TARGET {
            self.locked |= transfer.is_some();
            return;
        }
        let k = self.key(o.target);
        k.account |= transfer.is_some();
        if o.outcome == Outcome::Ok {
            match (o.func, o.seq()) {
                (Func::Read, Some(0)) | (Func::Write, Some(1)) => k.fresh = true,
                _ => {}
            }
            if o.func == Func::Read && o.is_final {
                k.closing = Some(Closing {
                    index: o.index,
                    invoke_ns: o.invoke_ns,
                    complete_ns: o.complete_or_max(),
                    value: o.value().unwrap_or(0),
                });
            }
        }
        if o.func != Func::Write {
            return;
        }
        if let (Some(v), false) = (o.value(), o.outcome == Outcome::Fail) {
            self.remember(o.target, v);
        }
        let Some(t) = transfer else { return };
        if let Some(prev) = self.writing.insert(o.process, t).filter(|&p| p != t) {
            self.close(prev);
        }
        if !self.open.contains_key(&t) {
            if self.open.len() >= self.open_max {
                if let Some(first) = self.opened.pop_front() {
                    self.closed_early += u64::from(self.open.contains_key(&first));
                    self.close(first);
                }
            }
            self.opened.push_back(t);
        }
        let w = self.open.entry(t).or_default();
        match o.outcome {
            Outcome::Ok => w.0 += 1,
            Outcome::Fail => w.1 += 1,
            Outcome::Info | Outcome::Pending => w.2 += 1,
        }
        self.last_write_ns = self.last_write_ns.max(o.complete_or_max());
    }

    fn remember(&mut self, key: u32, value: i64) {
        if !self.written.insert((key, value)) {
            return;
        }
        if self.remembered.len() >= self.remembered_max {
            let old = self.remembered.pop_front().expect("at the limit");
            self.written.remove(&old);
            self.forgotten += 1;
        }
        self.remembered.push_back((key, value));
    }

    /// Transfer `t` is done: its writes are counted.
    fn close(&mut self, t: u64) {
        let Some(w) = self.open.remove(&t) else {
            return;
        };
        self.transfers += 1;
        self.half += u64::from(w.2 > 0 || (w.0 > 0 && w.1 > 0));
        // The order list drops what was closed by its process when it comes to the front.
        while self
            .opened
            .front()
            .is_some_and(|f| !self.open.contains_key(f))
        {
            self.opened.pop_front();
        }
    }

    /// Judges the accounts' total once every op is walked, naming keys by `keys`.
    pub(crate) fn judge(&self, keys: &[String], out: &mut CheckOutput) {
        if !self.transfers() {
            return;
        }
        let (mut transfers, mut half) = (self.transfers, self.half);
        for w in self.open.values() {
            transfers += 1;
            half += u64::from(w.2 > 0 || (w.0 > 0 && w.1 > 0));
        }
        let name = |k: usize| keys.get(k).map_or("?", |s| s.as_str());
        if half > 0 {
            out.notes.push(format!(
                "{half} transfer(s) may have been applied halfway (a write unanswered, or one \
                 accepted and the other refused): the accounts' total is not judged"
            ));
            return;
        }
        if self.closed_early > 0 {
            out.notes.push(format!(
                "{} transfer(s) were counted before their process moved on, past the {} \
                 transfers followed at once: whether each was applied whole is not known, and \
                 the accounts' total is not judged",
                self.closed_early, self.open_max
            ));
            return;
        }
        let accounts: Vec<(usize, &Account)> = (self.keys.iter().enumerate())
            .filter(|(_, a)| a.account)
            .collect();
        let unknown: Vec<&str> = (accounts.iter())
            .filter(|(_, a)| !a.fresh)
            .map(|&(k, _)| name(k))
            .collect();
        if !unknown.is_empty() {
            out.notes.push(format!(
                "the starting balance of {} is not known (no read saw it never written, seq 0, \
                 and no write of the run was its first, seq 1: a store used before the run, or \
                 one that does not number its writes): the accounts' total is not judged",
                unknown.join(", ")
            ));
            return;
        }
        let finals: Vec<(usize, Closing)> = (accounts.iter())
            .filter_map(|&(k, a)| a.closing.map(|c| (k, c)))
            .collect();
        if finals.len() < accounts.len() {
            out.notes.push(format!(
                "{} of {} account(s) have no ok closing read: the accounts' total is not judged",
                accounts.len() - finals.len(),
                accounts.len()
            ));
            return;
        }
        if finals
            .iter()
            .any(|(_, c)| c.invoke_ns <= self.last_write_ns)
        {
            out.notes.push(
                "a closing read was sent before every write was answered: the accounts' total \
                 is not judged"
                    .to_string(),
            );
            return;
        }
        if let Some(v) = self.total_changed(keys, &finals, transfers) {
            out.violations.push(v);
        }
    }

    /// `total-changed`: the closing reads do not sum to 0, though every account started at 0
    /// and each of the `transfers` was applied whole.
    fn total_changed(
        &self,
        keys: &[String],
        finals: &[(usize, Closing)],
        transfers: u64,
    ) -> Option<Violation> {
        let total: i64 = finals.iter().map(|(_, c)| c.value).sum();
        if total == 0 {
            return None;
        }
        let name = |k: usize| keys.get(k).map_or("?", |s| s.as_str());
        let listed: Vec<String> = (finals.iter())
            .map(|&(k, c)| format!("{} {}", name(k), c.value))
            .collect();
        let from = finals.iter().map(|(_, c)| c.invoke_ns).min().unwrap_or(0);
        let to = finals.iter().map(|(_, c)| c.complete_ns).max().unwrap_or(0);
        // A closing read of a balance no write stored (nor the starting 0) is the store's own
        // answer, not transfers overwriting each other: say which cause the history shows.
        let unwritten = |(k, c): &&(usize, Closing)| {
            c.value != 0 && !self.written.contains(&(*k as u32, c.value))
        };
        let unwritten: Vec<String> = (finals.iter().filter(unwritten))
            .map(|&(k, c)| format!("{} ({})", name(k), c.value))
            .collect();
        let cause = if unwritten.is_empty() {
            "transfers overwrote each other's balances, or a closing read returned one no longer \
             current"
                .to_string()
        } else if self.forgotten > 0 {
            format!(
                "the closing read of {} returned a balance none of the latest {} writes \
                 remembered stored (whether an earlier one did is not known), or transfers \
                 overwrote each other's balances",
                unwritten.join(" and of "),
                self.remembered_max
            )
        } else {
            format!(
                "the closing read of {} returned a balance no write stored",
                unwritten.join(" and of ")
            )
        };
        Some(Violation {
            cycle: Vec::new(),
            kind: ViolationKind::TotalChanged,
            lock: Some(name(finals[0].0).to_string()),
            ops: finals.iter().map(|(_, c)| c.index).collect(),
            window_ns: [from, to],
            nemesis: Vec::new(),
            explanation: format!(
                "the closing reads of the {} accounts ({}) sum to {total} at {}, yet every \
                 account started at 0 and each of the {transfers} transfer(s) was applied \
                 whole, moving money between two accounts, so {} was {}: {cause}",
                finals.len(),
                listed.join(", "),
                secs(to),
                total.abs(),
                if total > 0 { "made" } else { "lost" },
            ),
        })
    }
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// Total's injectors.
    pub(crate) const TOTAL: &[Injector] = &[Injector {
        name: "total-changed",
        kind: ViolationKind::TotalChanged,
        adapter_shape: false,
        mutate: unbalanced_accounts,
    }];

    /// After the history's last op, a fresh process makes one bank transfer on two accounts of
    /// their own (locks and registers no op used): both locks, both writes (5 out of one, 5 into
    /// the other) accepted, both releases; then the closing reads, of which the second sees 3.
    fn unbalanced_accounts(ops: &mut Vec<Op>, _rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let end = ops.last()?.time_ns;
        let used = |k: &String| {
            ops.iter().any(|o| {
                o.lock.as_deref() == Some(k.as_str()) || o.key.as_deref() == Some(k.as_str())
            })
        };
        let i =
            (0..).find(|i| !used(&format!("Lbank{i}a")) && !used(&format!("balance-bank{i}a")))?;
        let q = fresh_process(ops);
        const MS: u64 = 1_000_000;
        let mut t = end + MS;
        let mut new = Vec::new();
        let tag = |v: OpValue| {
            v.with_evidence(&history::WorkerEvidence {
                transfer: Some(1),
                ..Default::default()
            })
        };
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
}
