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
use crate::model::{Func, Model, NO_TARGET};
use crate::text::secs;
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};
use std::collections::BTreeMap;

pub struct Total;

/// Why the bank's rules judge nothing in a history of another workload.
pub(crate) const NO_TRANSFER: &str =
    "no transfer in the history: the bank workload's rule (--workload bank)";

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
        let mut out = CheckOutput::new();
        let accounts = m.transfer_keys();
        let transfers = accounts.iter().any(|&a| a);
        if transfers {
            judge(m, &accounts, &mut out);
        }
        verdict(m, cfg, &mut out);
        out.nothing_to_judge(transfers, || NO_TRANSFER.to_string());
        out
    }
}

fn judge(m: &Model, accounts: &[bool], out: &mut CheckOutput) {
    let (writes, last_write_ns) = transfer_writes(m);
    let half = writes
        .values()
        .filter(|w| w.2 > 0 || (w.0 > 0 && w.1 > 0))
        .count();
    if half > 0 {
        out.notes.push(format!(
            "{half} transfer(s) may have been applied halfway (a write unanswered, or one \
             accepted and the other refused): the accounts' total is not judged"
        ));
        return;
    }
    let (finals, fresh) = closing_reads(m, accounts);
    if let Some(note) = unjudged_total(m, accounts, &fresh, &finals, last_write_ns) {
        out.notes.push(note);
        return;
    }
    if let Some(v) = total_changed(m, &finals, writes.len()) {
        out.violations.push(v);
    }
}

/// transfer -> (ok writes, refused writes, unanswered writes), and when the last write was
/// answered (or `u64::MAX` if one never was).
fn transfer_writes(m: &Model) -> (BTreeMap<u64, (u64, u64, u64)>, u64) {
    let mut writes: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    let mut last_write_ns = 0u64;
    for &(pos, t) in &m.transfers {
        let o = &m.ops[pos];
        if o.func != Func::Write {
            continue;
        }
        let w = writes.entry(t).or_default();
        match o.outcome {
            Outcome::Ok => w.0 += 1,
            Outcome::Fail => w.1 += 1,
            Outcome::Info | Outcome::Pending => w.2 += 1,
        }
        last_write_ns = last_write_ns.max(o.complete_or_max());
    }
    (writes, last_write_ns)
}

/// The closing read of each account: the last ok one (account -> op position). And whether
/// each account surely started at 0: a read that saw it never written (seq 0), or the run's
/// own write that was its first (seq 1); a store used before the run starts its accounts
/// elsewhere.
fn closing_reads(m: &Model, accounts: &[bool]) -> (BTreeMap<u32, usize>, Vec<bool>) {
    let mut finals: BTreeMap<u32, usize> = BTreeMap::new();
    let mut fresh = vec![false; accounts.len()];
    for (pos, o) in m.ops.iter().enumerate() {
        // A lock op's target is a lock, not a register.
        if o.func.is_lock_op()
            || o.outcome != Outcome::Ok
            || o.target == NO_TARGET
            || !accounts[o.target as usize]
        {
            continue;
        }
        match (o.func, o.seq()) {
            (Func::Read, Some(0)) | (Func::Write, Some(1)) => fresh[o.target as usize] = true,
            _ => {}
        }
        if o.func == Func::Read && o.is_final {
            finals.insert(o.target, pos);
        }
    }
    (finals, fresh)
}

/// Why the accounts' total cannot be judged, if it cannot: a starting balance unknown, an
/// account without a closing read, or a closing read sent before every write was answered.
fn unjudged_total(
    m: &Model,
    accounts: &[bool],
    fresh: &[bool],
    finals: &BTreeMap<u32, usize>,
    last_write_ns: u64,
) -> Option<String> {
    debug_assert_eq!(accounts.len(), fresh.len(), "one flag per key");
    let unknown: Vec<&str> = (0..accounts.len())
        .filter(|&k| accounts[k] && !fresh[k])
        .map(|k| m.key_name(k as u32))
        .collect();
    if !unknown.is_empty() {
        return Some(format!(
            "the starting balance of {} is not known (no read saw it never written, seq 0, and \
             no write of the run was its first, seq 1: a store used before the run, or one that \
             does not number its writes): the accounts' total is not judged",
            unknown.join(", ")
        ));
    }
    let wanted = accounts.iter().filter(|&&a| a).count();
    if finals.len() < wanted {
        return Some(format!(
            "{} of {wanted} account(s) have no ok closing read: the accounts' total is not judged",
            wanted - finals.len()
        ));
    }
    if finals
        .values()
        .any(|&pos| m.ops[pos].invoke_ns <= last_write_ns)
    {
        return Some(
            "a closing read was sent before every write was answered: the accounts' total is \
             not judged"
                .to_string(),
        );
    }
    None
}

/// `total-changed`: the closing reads do not sum to 0, though every account started at 0 and
/// each of the `transfers` was applied whole.
fn total_changed(m: &Model, finals: &BTreeMap<u32, usize>, transfers: usize) -> Option<Violation> {
    let total: i64 = finals
        .values()
        .map(|&pos| m.ops[pos].value().unwrap_or(0))
        .sum();
    if total == 0 {
        return None;
    }
    let reads: Vec<&crate::model::ClientOp> = finals.values().map(|&pos| &m.ops[pos]).collect();
    let listed: Vec<String> = reads
        .iter()
        .map(|r| format!("{} {}", m.key_name(r.target), r.value().unwrap_or(0)))
        .collect();
    let from = reads.iter().map(|r| r.invoke_ns).min().unwrap_or(0);
    let to = reads.iter().map(|r| r.complete_or_max()).max().unwrap_or(0);
    // A closing read of a balance no write stored (nor the starting 0) is the store's own
    // answer, not transfers overwriting each other: say which cause the history shows.
    let unwritten: Vec<String> = reads
        .iter()
        .filter(|r| {
            let v = r.value().unwrap_or(0);
            v != 0
                && !m.ops.iter().any(|w| {
                    w.func == Func::Write
                        && w.target == r.target
                        && w.outcome != Outcome::Fail
                        && w.value() == Some(v)
                })
        })
        .map(|r| format!("{} ({})", m.key_name(r.target), r.value().unwrap_or(0)))
        .collect();
    let cause = if unwritten.is_empty() {
        "transfers overwrote each other's balances, or a closing read returned one no longer \
         current"
            .to_string()
    } else {
        format!(
            "the closing read of {} returned a balance no write stored",
            unwritten.join(" and of ")
        )
    };
    Some(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::TotalChanged,
        lock: Some(m.key_name(reads[0].target).to_string()),
        ops: reads.iter().map(|r| r.index).collect(),
        window_ns: [from, to],
        nemesis: Vec::new(),
        explanation: format!(
            "the closing reads of the {} accounts ({}) sum to {total} at {}, yet every account \
             started at 0 and each of the {transfers} transfer(s) was applied whole, moving \
             money between two accounts: {} {}: {cause}",
            reads.len(),
            listed.join(", "),
            secs(to),
            if total > 0 {
                "money was made,"
            } else {
                "money was lost,"
            },
            total.abs()
        ),
    })
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
