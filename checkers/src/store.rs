//! The fenced store as the resource saw it: `stale-write-accepted` (in the store's own
//! acceptance order) and the counter workload's `lost-update`.

use crate::inject::Injector;
use crate::model::{ClientOp, Func, Model, NO_TARGET};
use crate::text::secs;
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};

/// `stale-write-accepted`.
pub struct StoreFencing;

/// `lost-update`.
pub struct Counter;

impl Checker for StoreFencing {
    fn injectors(&self) -> &'static [Injector] {
        injectors::STORE_FENCING
    }

    fn name(&self) -> &'static str {
        "store-fencing"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::StaleWriteAccepted]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let mut unordered = 0u64;
        // (key, seq, op)
        let mut writes: Vec<(u32, u64, usize)> = Vec::new();
        for (i, o) in m.ops.iter().enumerate() {
            if o.func != Func::Write || o.outcome != Outcome::Ok || o.target == NO_TARGET {
                continue;
            }
            match (o.seq(), o.token()) {
                (Some(seq), Some(_)) => writes.push((o.target, seq, i)),
                _ => unordered += 1,
            }
        }
        if unordered > 0 {
            out.notes.push(unordered_note(unordered));
        }
        writes.sort_unstable();
        let mut key = None;
        // The highest token among writes of strictly lower seq, and among the current seq.
        let mut best: Option<(u64, usize)> = None;
        let mut same_seq: Option<(u64, usize)> = None;
        let mut seq = 0;
        for &(k, s, pos) in &writes {
            if key != Some(k) {
                key = Some(k);
                best = None;
                same_seq = None;
            } else if s != seq {
                best = max_token(best, same_seq);
                same_seq = None;
            }
            seq = s;
            let b = StoreOp::of(pos, &m.ops[pos]);
            let tok = b.token.expect("filtered on token");
            if let Some((tok_a, pa)) = best {
                if tok < tok_a {
                    let a = StoreOp::of(pa, &m.ops[pa]);
                    out.violations.push(stale_write(m.key_name(k), &a, &b));
                }
            }
            same_seq = max_token(same_seq, Some((tok, pos)));
        }
        out.nothing_to_judge(!writes.is_empty(), || NO_FENCED_WRITE.to_string());
        verdict(m, cfg, &mut out);
        out
    }
}

fn max_token(a: Option<(u64, usize)>, b: Option<(u64, usize)>) -> Option<(u64, usize)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 > x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// What the store rules read of one op: enough to judge it and word a violation once the op
/// itself is gone (the streamed rules, `store_stream.rs`, keep only this).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct StoreOp {
    pub(crate) pos: usize,
    pub(crate) key: u32,
    pub(crate) process: u64,
    pub(crate) index: u64,
    pub(crate) invoke_ns: u64,
    /// `u64::MAX` when it never completed.
    pub(crate) complete_ns: u64,
    pub(crate) seq: Option<u64>,
    pub(crate) token: Option<u64>,
    pub(crate) value: Option<i64>,
}

impl StoreOp {
    pub(crate) fn of(pos: usize, o: &ClientOp) -> StoreOp {
        StoreOp {
            pos,
            key: o.target,
            process: o.process,
            index: o.index,
            invoke_ns: o.invoke_ns,
            complete_ns: o.complete_or_max(),
            seq: o.seq(),
            token: o.token(),
            value: o.value(),
        }
    }
}

/// `stale-write-accepted`: the store accepted `b` after `a` (a lower seq), with a lower token.
pub(crate) fn stale_write(name: &str, a: &StoreOp, b: &StoreOp) -> Violation {
    let (tok_a, tok) = (a.token.unwrap_or(0), b.token.unwrap_or(0));
    let (seq_a, s) = (a.seq.unwrap_or(0), b.seq.unwrap_or(0));
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::StaleWriteAccepted,
        lock: Some(name.to_string()),
        ops: vec![a.index, b.index],
        window_ns: [
            a.invoke_ns.min(b.invoke_ns),
            a.complete_ns.max(b.complete_ns),
        ],
        nemesis: Vec::new(),
        explanation: format!(
            "the store accepted p{}'s write to {name} with token {tok} as seq {s} (op {}, at {}), after it had accepted p{}'s write with the newer token {tok_a} as seq {seq_a} (op {}, at {})",
            b.process,
            b.index,
            secs(b.complete_ns),
            a.process,
            a.index,
            secs(a.complete_ns),
        ),
    }
}

impl Checker for Counter {
    fn injectors(&self) -> &'static [Injector] {
        injectors::COUNTER
    }

    fn name(&self) -> &'static str {
        "counter"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[ViolationKind::LostUpdate]
    }

    /// Every key is taken as a counter register starting at 0 whose writes each store the
    /// value read + 1: the counter workload is the only one that writes.
    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let counters = Counters::of(m);
        same_value_twice(m, &counters.values, &mut out);
        for &pos in &counters.finals {
            if let Some(v) = short_final_read(m, &counters.per_key, pos) {
                out.violations.push(v);
            }
        }
        out.nothing_to_judge(
            counters
                .per_key
                .iter()
                .any(|k| !k.acked.is_empty() || !k.unsure.is_empty())
                || !counters.finals.is_empty(),
            || NO_COUNTER.to_string(),
        );
        verdict(m, cfg, &mut out);
        out
    }
}

/// The counters' writes and final reads, in one pass over the ops.
struct Counters {
    /// (key, value, completion, op) of the ok writes, sorted.
    values: Vec<(u32, i64, u64, usize)>,
    /// Per key.
    per_key: Vec<KeyWrites>,
    /// The ok final reads.
    finals: Vec<usize>,
}

/// One counter's writes.
#[derive(Clone, Default)]
struct KeyWrites {
    /// The ok writes as (completion, op), sorted.
    acked: Vec<(u64, usize)>,
    /// The positions of the indeterminate writes, in order.
    unsure: Vec<usize>,
}

/// Per key, the position of the first op of a named critical section (`transfer`) that read
/// or wrote it (`usize::MAX`: none): from there on the register is an account, not a counter.
/// From there, not before: the streamed rules judge each op as read.
pub(crate) fn accounts_from(m: &Model) -> Vec<usize> {
    let mut from = vec![usize::MAX; m.keys.len()];
    for &(pos, _) in &m.transfers {
        let o = &m.ops[pos];
        if !o.func.is_lock_op() && o.target != NO_TARGET {
            let f = &mut from[o.target as usize];
            *f = (*f).min(pos);
        }
    }
    from
}

/// The position of the first op of a named critical section (`transfer`), lock ops included
/// (`usize::MAX`: none): from there on the history is a bank run's, and a final read is its
/// closing read of an account, even of one no transfer touched, not a counter's.
pub(crate) fn bank_from(m: &Model) -> usize {
    m.transfers
        .iter()
        .map(|&(pos, _)| pos)
        .min()
        .unwrap_or(usize::MAX)
}

/// The note on writes left out of the store order.
pub(crate) fn unordered_note(unordered: u64) -> String {
    format!("{unordered} ok write(s) carry no seq or no token: left out of the store order")
}

/// Why `store-fencing` judged nothing.
pub(crate) const NO_FENCED_WRITE: &str =
    "no store write was accepted with its seq and token: the store's fencing was not exercised";

/// Why `counter` judged nothing.
pub(crate) const NO_COUNTER: &str =
    "no counter write and no final read: there was no counter to judge";

impl Counters {
    fn of(m: &Model) -> Counters {
        let mut c = Counters {
            values: Vec::new(),
            per_key: vec![KeyWrites::default(); m.keys.len()],
            finals: Vec::new(),
        };
        let accounts = accounts_from(m);
        let bank_from = bank_from(m);
        for (i, o) in m.ops.iter().enumerate() {
            if o.target == NO_TARGET || (!o.func.is_lock_op() && accounts[o.target as usize] <= i) {
                continue;
            }
            if o.func == Func::Read && o.is_final && bank_from <= i {
                continue;
            }
            match (o.func, o.outcome) {
                (Func::Write, Outcome::Ok) => {
                    (c.per_key[o.target as usize].acked).push((o.complete_or_max(), i));
                    if let Some(v) = o.value() {
                        c.values.push((o.target, v, o.complete_or_max(), i));
                    }
                }
                (Func::Write, Outcome::Info | Outcome::Pending) => {
                    c.per_key[o.target as usize].unsure.push(i)
                }
                (Func::Read, Outcome::Ok) if o.is_final => c.finals.push(i),
                _ => {}
            }
        }
        c.values.sort_unstable();
        for k in &mut c.per_key {
            k.acked.sort_unstable();
        }
        c
    }
}

/// `lost-update`: two acknowledged writes of the same value to one counter (`values` sorted).
fn same_value_twice(m: &Model, values: &[(u32, i64, u64, usize)], out: &mut CheckOutput) {
    debug_assert!(values.windows(2).all(|w| w[0] <= w[1]), "values are sorted");
    let mut first = 0;
    for i in 1..values.len() {
        let (k, v, _, pos) = values[i];
        if (values[first].0, values[first].1) != (k, v) {
            first = i;
            continue;
        }
        let a = StoreOp::of(values[first].3, &m.ops[values[first].3]);
        let b = StoreOp::of(pos, &m.ops[pos]);
        out.violations.push(same_value(m.key_name(k), &a, &b));
    }
}

/// `lost-update`: `a` and `b`, acknowledged in that order, stored the same value.
pub(crate) fn same_value(name: &str, a: &StoreOp, b: &StoreOp) -> Violation {
    let v = b.value.unwrap_or(0);
    Violation {
        cycle: Vec::new(),
        kind: ViolationKind::LostUpdate,
        lock: Some(name.to_string()),
        ops: vec![a.index, b.index],
        window_ns: [a.invoke_ns, b.complete_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{}'s write of {v} to {name} was acknowledged at {} (op {}), and p{}'s write of the same value {v} was acknowledged at {} (op {}): one increment was lost",
            a.process,
            secs(a.complete_ns),
            a.index,
            b.process,
            secs(b.complete_ns),
            b.index,
        ),
    }
}

/// `lost-update`: a final read below the writes acknowledged before it was sent.
fn short_final_read(m: &Model, per_key: &[KeyWrites], pos: usize) -> Option<Violation> {
    let r = StoreOp::of(pos, &m.ops[pos]);
    // Only writes acknowledged before the read was sent must show in it.
    let KeyWrites {
        acked: writes,
        unsure,
    } = &per_key[r.key as usize];
    debug_assert!(writes.windows(2).all(|w| w[0] <= w[1]), "writes are sorted");
    let n = writes.partition_point(|w| w.0 < r.invoke_ns);
    let last = n
        .checked_sub(1)
        .map(|i| StoreOp::of(writes[i].1, &m.ops[writes[i].1]));
    let unsure = unsure.partition_point(|&p| p < pos) as u64;
    short_final(m.key_name(r.key), &r, (n as u64, unsure), last.as_ref())
}

/// `lost-update` when final read `r` returned less than the `acked` writes acknowledged
/// before it was sent (the last of them `last`); `unsure` more were sent before it and never
/// answered. `None` when it did not (or returned no value).
pub(crate) fn short_final(
    name: &str,
    r: &StoreOp,
    (acked, unsure): (u64, u64),
    last: Option<&StoreOp>,
) -> Option<Violation> {
    let v = r.value?;
    if v >= 0 && v as u64 >= acked {
        return None;
    }
    let done_ns = r.complete_ns;
    let mut ops = vec![r.index];
    let mut start_ns = r.invoke_ns;
    let mut last_text = String::new();
    if let Some(l) = last {
        ops.push(l.index);
        start_ns = start_ns.min(l.complete_ns);
        last_text = format!(", the last at {} (op {})", secs(l.complete_ns), l.index);
    }
    let unsure_text = match unsure {
        0 => String::new(),
        n => format!(" ({n} more sent before it were never answered: they may or may not show)"),
    };
    Some(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::LostUpdate,
        lock: Some(name.to_string()),
        ops,
        window_ns: [start_ns, done_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "the final read of {name} by p{} returned {v} at {} (op {}), yet {acked} writes to {name} were acknowledged before it was sent{last_text}: it had to return at least {acked}{unsure_text}",
            r.process,
            secs(done_ns),
            r.index,
        ),
    })
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// StoreFencing's injectors.
    pub(crate) const STORE_FENCING: &[Injector] = &[Injector {
        name: "stale-write-accepted",
        kind: ViolationKind::StaleWriteAccepted,
        adapter_shape: false,
        mutate: accept_stale_write,
    }];
    /// Counter's injectors.
    pub(crate) const COUNTER: &[Injector] = &[
        Injector {
            name: "lost-update",
            kind: ViolationKind::LostUpdate,
            adapter_shape: false,
            mutate: duplicate_value,
        },
        Injector {
            name: "lost-update-final-read",
            kind: ViolationKind::LostUpdate,
            adapter_shape: false,
            mutate: low_final_read,
        },
    ];

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
}
