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

/// How wide a span of totals the unanswered writes of transfers applied in part may leave the
/// accounts at (the sum of their amounts), followed as one bit per total: past it the total is
/// not judged. 4,194,304 totals, 512 KiB: some 40,000 unanswered writes of 100 each.
pub(crate) const MOVES_WIDTH_MAX: u64 = 1 << 22;

/// One transfer still open: its writes by outcome, and what its reads and writes moved.
#[derive(Default, Clone, Debug)]
pub(crate) struct Transfer {
    ok: u64,
    refused: u64,
    unanswered: u64,
    /// (key, balance) of its ok reads, the latest per key.
    read: Vec<(u32, i64)>,
    /// What its accepted writes moved (each the balance written less the one it read), and
    /// what each unanswered one would have.
    applied: i64,
    maybe: Vec<i64>,
    /// A write of a balance it did not read: its amount is not known.
    unmeasured: bool,
}

impl Transfer {
    /// Applied in part: a write unanswered, or one accepted and another refused.
    fn partial(&self) -> bool {
        self.unanswered > 0 || (self.ok > 0 && self.refused > 0)
    }
}

/// What the transfers counted moved the accounts' total by.
#[derive(Clone, Debug)]
struct Moves {
    /// Transfers with a write; those applied in part (a write unanswered, or one accepted and
    /// the other refused), and of them those whose amounts are not known (a write of a
    /// balance the transfer did not read).
    transfers: u64,
    partial: u64,
    unmeasured: u64,
    /// What the transfers applied in part moved the total by: `shift` for sure (their
    /// accepted writes), plus a sum of some of what their unanswered writes would have moved:
    /// `lo + i` for each bit `i` set in `could` (of `width` bits, at most
    /// [`MOVES_WIDTH_MAX`]; past it, `overflow`).
    shift: i64,
    lo: i64,
    could: Vec<u64>,
    width: u64,
    overflow: bool,
}

impl Default for Moves {
    fn default() -> Self {
        Moves {
            transfers: 0,
            partial: 0,
            unmeasured: 0,
            shift: 0,
            lo: 0,
            could: vec![1],
            width: 1,
            overflow: false,
        }
    }
}

impl Moves {
    /// Transfer `w` counted: whole (its moves cancel), or applied in part, what it moved
    /// added to what the total may show. One that wrote nothing is no transfer.
    fn count(&mut self, w: &Transfer) {
        if w.ok + w.refused + w.unanswered == 0 {
            return;
        }
        self.transfers += 1;
        if !w.partial() {
            return;
        }
        self.partial += 1;
        if w.unmeasured {
            self.unmeasured += 1;
            return;
        }
        self.shift = self.shift.saturating_add(w.applied);
        for &m in &w.maybe {
            self.perhaps(m);
        }
    }

    /// A move of `m` that may or may not have been made: every total reached so far, and each
    /// of them moved by `m`. Both directions widen the span by `|m|`; a move down also lowers
    /// its bottom, so the totals already there sit `|m|` higher in it.
    fn perhaps(&mut self, m: i64) {
        let by = m.unsigned_abs();
        if by == 0 || self.overflow {
            return;
        }
        if self.width.saturating_add(by) > MOVES_WIDTH_MAX {
            self.overflow = true;
            self.could = Vec::new();
            return;
        }
        self.width += by;
        self.could.resize(self.width.div_ceil(64) as usize, 0);
        or_shifted(&mut self.could, by as usize);
        if m < 0 {
            self.lo -= by as i64;
        }
    }

    /// The totals the accounts may show, in order.
    fn totals(&self) -> impl Iterator<Item = i64> + '_ {
        (self.could.iter().enumerate())
            .flat_map(|(w, &bits)| {
                (0..64)
                    .filter(move |b| bits >> b & 1 == 1)
                    .map(move |b| w * 64 + b)
            })
            .map(|i| self.lo + i as i64 + self.shift)
    }

    /// How many totals the accounts may show.
    fn count_totals(&self) -> u64 {
        self.could.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

/// `bits |= bits << by`, over a bitset of words (bit `i` in word `i / 64`), whose length has
/// room for the shifted bits. From the top down, so every word is read before it is written.
fn or_shifted(bits: &mut [u64], by: usize) {
    let (words, shift) = (by / 64, (by % 64) as u32);
    for i in (words..bits.len()).rev() {
        let from = i - words;
        let mut moved = bits[from] << shift;
        if shift > 0 && from > 0 {
            moved |= bits[from - 1] >> (64 - shift);
        }
        bits[i] |= moved;
    }
}

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
    /// Per transfer still open: its reads and writes so far.
    pub(crate) open: FxMap<u64, Transfer>,
    /// The transfer each process wrote for last, and the transfers in the order they opened.
    writing: FxMap<u64, u64>,
    opened: VecDeque<u64>,
    /// A transfer's lock op was read (a bank run, even if no transfer got further).
    locked: bool,
    /// The transfers closed, and what they moved.
    moves: Moves,
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
            moves: Moves::default(),
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
        self.walk(o, transfer);
        // An op never answered ends its process: its transfer is done, whatever it did.
        if let (Some(t), Outcome::Info | Outcome::Pending) = (transfer, o.outcome) {
            if self.writing.get(&o.process) == Some(&t) {
                self.writing.remove(&o.process);
            }
            self.close(t);
        }
    }

    fn walk(&mut self, o: &ClientOp, transfer: Option<u64>) {
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
        if o.func == Func::Read {
            // A transfer's read: the balance its write of the key moves from.
            let balance = o.value().or((o.seq() == Some(0)).then_some(0));
            if let (Some(t), Outcome::Ok, Some(b)) = (transfer, o.outcome, balance) {
                let open = self.open_transfer(t, o.process);
                open.read.retain(|&(k, _)| k != o.target);
                open.read.push((o.target, b));
            }
            return;
        }
        if o.func != Func::Write {
            return;
        }
        if let (Some(v), false) = (o.value(), o.outcome == Outcome::Fail) {
            self.remember(o.target, v);
        }
        let Some(t) = transfer else { return };
        let w = self.open_transfer(t, o.process);
        let read = (w.read.iter())
            .find(|&&(k, _)| k == o.target)
            .map(|&(_, b)| b);
        let moved = o.value().zip(read).map(|(v, b)| v.saturating_sub(b));
        match o.outcome {
            Outcome::Ok => w.ok += 1,
            Outcome::Fail => w.refused += 1,
            Outcome::Info | Outcome::Pending => w.unanswered += 1,
        }
        match (o.outcome, moved) {
            (Outcome::Fail, _) => {}
            (_, None) => w.unmeasured = true,
            (Outcome::Ok, Some(m)) => w.applied = w.applied.saturating_add(m),
            (_, Some(m)) => w.maybe.push(m),
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
        self.moves.count(&w);
        // The order list drops what was closed by its process when it comes to the front.
        while self
            .opened
            .front()
            .is_some_and(|f| !self.open.contains_key(f))
        {
            self.opened.pop_front();
        }
    }

    /// Transfer `t` of `process`, open: opened now by its first read or write (which closes
    /// the transfer `process` had open before, and past [`TRANSFERS_OPEN_MAX`] the earliest
    /// still open), else as it stands.
    fn open_transfer(&mut self, t: u64, process: u64) -> &mut Transfer {
        if let Some(prev) = self.writing.insert(process, t).filter(|&p| p != t) {
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
        self.open.entry(t).or_default()
    }

    /// Judges the accounts' total once every op is walked, naming keys by `keys`: a violation,
    /// or why the total is not judged in `out.not_judged`.
    pub(crate) fn judge(&self, keys: &[String], out: &mut CheckOutput) {
        if !self.transfers() {
            return;
        }
        let mut moves = self.moves.clone();
        for w in self.open.values() {
            moves.count(w);
        }
        let name = |k: usize| keys.get(k).map_or("?", |s| s.as_str());
        if moves.unmeasured > 0 {
            out.not_judged = Some(format!(
                "{} transfer(s) were applied in part (a write unanswered, or one accepted and \
                 the other refused) with a write of a balance the transfer did not read, so \
                 what they moved is not known: the accounts' total is not judged",
                moves.unmeasured
            ));
            return;
        }
        if moves.overflow {
            out.not_judged = Some(format!(
                "the unanswered writes of the {} transfer(s) applied in part could leave the \
                 total anywhere in a span wider than {MOVES_WIDTH_MAX}: the accounts' total is \
                 not judged",
                moves.partial
            ));
            return;
        }
        if self.closed_early > 0 {
            out.not_judged = Some(format!(
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
            out.not_judged = Some(format!(
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
            out.not_judged = Some(format!(
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
            out.not_judged = Some(
                "a closing read was sent before every write was answered: the accounts' total \
                 is not judged"
                    .to_string(),
            );
            return;
        }
        if let Some(v) = self.total_changed(keys, &finals, &moves) {
            out.violations.push(v);
        }
    }

    /// `total-changed`: the closing reads do not sum to 0 (nor to what the transfers applied
    /// in part may have moved: `moves`), though every account started at 0 and every other
    /// transfer was applied whole.
    fn total_changed(
        &self,
        keys: &[String],
        finals: &[(usize, Closing)],
        moves: &Moves,
    ) -> Option<Violation> {
        let total: i64 = finals.iter().map(|(_, c)| c.value).sum();
        if moves.totals().any(|t| t == total) {
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
            explanation: if moves.partial == 0 {
                format!(
                    "the closing reads of the {} accounts ({}) sum to {total} at {}, yet every \
                     account started at 0 and each of the {} transfer(s) was applied whole, \
                     moving money between two accounts, so {} was {}: {cause}",
                    finals.len(),
                    listed.join(", "),
                    secs(to),
                    moves.transfers,
                    total.abs(),
                    if total > 0 { "made" } else { "lost" },
                )
            } else {
                let off = match moves.totals().collect::<Vec<_>>()[..] {
                    [only] => format!(
                        "so {} was {}",
                        total.abs_diff(only),
                        if total > only { "made" } else { "lost" }
                    ),
                    _ => format!("not {total}"),
                };
                format!(
                    "the closing reads of the {} accounts ({}) sum to {total} at {}, yet every \
                     account started at 0, {} transfer(s) were applied whole, moving money \
                     between two accounts, and what the {} applied in part (a write refused \
                     or unanswered) moved, by the balances they read and wrote, puts the \
                     total at {}, {off}: {cause}",
                    finals.len(),
                    listed.join(", "),
                    secs(to),
                    moves.transfers - moves.partial,
                    moves.partial,
                    totals_text(moves),
                )
            },
        })
    }
}

/// The totals `moves` allows, as a sentence reads them: "-5", "-5 or 0", "one of -5, 0, 5
/// (...)", at most six named.
fn totals_text(moves: &Moves) -> String {
    const NAMED_MAX: usize = 6;
    let totals: Vec<String> = moves
        .totals()
        .take(NAMED_MAX)
        .map(|t| t.to_string())
        .collect();
    match (totals.len(), moves.count_totals()) {
        (1, _) => totals[0].clone(),
        (2, 2) => format!("{} or {}", totals[0], totals[1]),
        (_, n) if n <= NAMED_MAX as u64 => format!("one of {}", totals.join(", ")),
        (_, n) => format!("one of {}, ... ({n} values)", totals.join(", ")),
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

#[cfg(test)]
mod moves_tests {
    use super::*;

    /// A transfer with `ok`, `refused` and `unanswered` writes, its accepted writes having
    /// moved `applied` and its unanswered ones `maybe`.
    fn transfer(counts: (u64, u64, u64), applied: i64, maybe: &[i64]) -> Transfer {
        Transfer {
            ok: counts.0,
            refused: counts.1,
            unanswered: counts.2,
            read: Vec::new(),
            applied,
            maybe: maybe.to_vec(),
            unmeasured: false,
        }
    }

    /// What the total may be after transfers, and how a sentence reads it.
    #[test]
    fn the_totals_are_the_sure_moves_plus_some_of_the_unanswered() {
        let cases: &[(&str, Vec<Transfer>, &[i64], &str)] = &[
            ("whole", vec![transfer((2, 0, 0), 0, &[])], &[0], "0"),
            (
                "refused whole",
                vec![transfer((0, 2, 0), 0, &[])],
                &[0],
                "0",
            ),
            (
                "one refused",
                vec![transfer((1, 1, 0), -5, &[])],
                &[-5],
                "-5",
            ),
            (
                "one unanswered",
                vec![transfer((1, 0, 1), -5, &[5])],
                &[-5, 0],
                "-5 or 0",
            ),
            (
                "both unanswered",
                vec![transfer((0, 0, 2), 0, &[-5, 5])],
                &[-5, 0, 5],
                "one of -5, 0, 5",
            ),
            (
                "equal amounts repeat",
                vec![
                    transfer((1, 0, 1), -5, &[5]),
                    transfer((1, 0, 1), -5, &[5]),
                    transfer((1, 1, 0), 5, &[]),
                ],
                &[-5, 0, 5],
                "one of -5, 0, 5",
            ),
            (
                "many",
                (1..=3).map(|i| transfer((0, 0, 1), 0, &[i])).collect(),
                &[0, 1, 2, 3, 4, 5, 6],
                "one of 0, 1, 2, 3, 4, 5, ... (7 values)",
            ),
        ];
        for (what, transfers, totals, text) in cases {
            let mut moves = Moves::default();
            for t in transfers {
                moves.count(t);
            }
            assert_eq!(moves.totals().collect::<Vec<_>>(), *totals, "{what}");
            assert_eq!(totals_text(&moves), *text, "{what}");
            assert!(!moves.overflow, "{what}");
        }
    }

    /// Unanswered writes whose totals span more than [`MOVES_WIDTH_MAX`] stop being followed;
    /// one whose amount is not known is counted apart; a transfer that wrote nothing is none.
    #[test]
    fn what_cannot_be_followed_is_counted() {
        let mut moves = Moves::default();
        for i in 0..11 {
            moves.count(&transfer((0, 0, 1), 0, &[1 << i]));
        }
        assert_eq!(moves.count_totals(), 2048);
        assert!(!moves.overflow);
        moves.count(&transfer((0, 0, 1), 0, &[-(1 << 21)]));
        assert!(!moves.overflow);
        moves.count(&transfer((0, 0, 1), 0, &[1 << 21]));
        assert!(moves.overflow);
        let mut unknown = transfer((1, 1, 0), 0, &[]);
        unknown.unmeasured = true;
        let mut moves = Moves::default();
        moves.count(&unknown);
        moves.count(&transfer((0, 0, 0), 0, &[]));
        assert_eq!(
            (moves.transfers, moves.partial, moves.unmeasured),
            (1, 1, 1)
        );
    }

    /// The bitset's totals are the brute force's: every subset of the moves, summed.
    #[test]
    fn the_totals_are_every_subsets_sum() {
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for case in 0..300 {
            let n = next(8) as usize;
            let moves_made: Vec<i64> = (0..n).map(|_| next(301) as i64 - 150).collect();
            let sure = next(21) as i64 - 10;
            let mut moves = Moves::default();
            moves.count(&transfer((1, 1, n as u64), sure, &moves_made));
            let mut want = std::collections::BTreeSet::new();
            for mask in 0..1u32 << n {
                let picked = (0..n).filter(|i| mask >> i & 1 == 1);
                want.insert(sure + picked.map(|i| moves_made[i]).sum::<i64>());
            }
            let got: Vec<i64> = moves.totals().collect();
            assert_eq!(
                got,
                want.into_iter().collect::<Vec<_>>(),
                "case {case}: {moves_made:?}"
            );
        }
    }
}
