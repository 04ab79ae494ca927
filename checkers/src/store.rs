//! The fenced store as the resource saw it: `stale-write-accepted` (in the store's own
//! acceptance order) and the counter workload's `lost-update`.

use crate::inject::Injector;
use crate::model::{Func, Model, NO_TARGET};
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
            out.notes.push(format!(
                "{unordered} ok write(s) carry no seq or no token: left out of the store order"
            ));
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
            let b = &m.ops[pos];
            let tok = b.token().expect("filtered on token");
            if let Some((tok_a, pa)) = best {
                if tok < tok_a {
                    let a = &m.ops[pa];
                    let seq_a = a.seq().unwrap_or(0);
                    let name = m.key_name(k);
                    out.violations.push(Violation {
                        cycle: Vec::new(),
                        kind: ViolationKind::StaleWriteAccepted,
                        lock: Some(name.to_string()),
                        ops: vec![a.index, b.index],
                        window_ns: [
                            a.invoke_ns.min(b.invoke_ns),
                            a.complete_or_max().max(b.complete_or_max()),
                        ],
                        nemesis: Vec::new(),
                        explanation: format!(
                            "the store accepted p{}'s write to {name} with token {tok} as seq {s} (op {}, at {}), after it had accepted p{}'s write with the newer token {tok_a} as seq {seq_a} (op {}, at {})",
                            b.process,
                            b.index,
                            secs(b.complete_or_max()),
                            a.process,
                            a.index,
                            secs(a.complete_or_max()),
                        ),
                    });
                }
            }
            same_seq = max_token(same_seq, Some((tok, pos)));
        }
        out.nothing_to_judge(!writes.is_empty(), || {
            "no store write was accepted with its seq and token: the store's fencing was not exercised"
                .to_string()
        });
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
                .any(|(w, unsure)| !w.is_empty() || *unsure > 0)
                || !counters.finals.is_empty(),
            || "no counter write and no final read: there was no counter to judge".to_string(),
        );
        verdict(m, cfg, &mut out);
        out
    }
}

/// The counters' writes and final reads, in one pass over the ops.
struct Counters {
    /// (key, value, completion, op) of the ok writes, sorted.
    values: Vec<(u32, i64, u64, usize)>,
    /// Per key: ok writes as (completion, op), sorted, and the count of indeterminate writes.
    per_key: Vec<(Vec<(u64, usize)>, u64)>,
    /// The ok final reads.
    finals: Vec<usize>,
}

impl Counters {
    fn of(m: &Model) -> Counters {
        let mut c = Counters {
            values: Vec::new(),
            per_key: vec![(Vec::new(), 0); m.keys.len()],
            finals: Vec::new(),
        };
        // An account (a register a transfer wrote) holds a balance, not a count.
        let accounts = m.transfer_keys();
        for (i, o) in m.ops.iter().enumerate() {
            if o.target == NO_TARGET || (!o.func.is_lock_op() && accounts[o.target as usize]) {
                continue;
            }
            match (o.func, o.outcome) {
                (Func::Write, Outcome::Ok) => {
                    c.per_key[o.target as usize]
                        .0
                        .push((o.complete_or_max(), i));
                    if let Some(v) = o.value() {
                        c.values.push((o.target, v, o.complete_or_max(), i));
                    }
                }
                (Func::Write, Outcome::Info | Outcome::Pending) => {
                    c.per_key[o.target as usize].1 += 1
                }
                (Func::Read, Outcome::Ok) if o.is_final => c.finals.push(i),
                _ => {}
            }
        }
        c.values.sort_unstable();
        for k in &mut c.per_key {
            k.0.sort_unstable();
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
        let a = &m.ops[values[first].3];
        let b = &m.ops[pos];
        let name = m.key_name(k);
        out.violations.push(Violation {
            cycle: Vec::new(),
            kind: ViolationKind::LostUpdate,
            lock: Some(name.to_string()),
            ops: vec![a.index, b.index],
            window_ns: [a.invoke_ns, b.complete_or_max()],
            nemesis: Vec::new(),
            explanation: format!(
                "p{}'s write of {v} to {name} was acknowledged at {} (op {}), and p{}'s write of the same value {v} was acknowledged at {} (op {}): one increment was lost",
                a.process,
                secs(a.complete_or_max()),
                a.index,
                b.process,
                secs(b.complete_or_max()),
                b.index,
            ),
        });
    }
}

/// `lost-update`: a final read below the writes acknowledged before it was sent.
fn short_final_read(
    m: &Model,
    per_key: &[(Vec<(u64, usize)>, u64)],
    pos: usize,
) -> Option<Violation> {
    let r = &m.ops[pos];
    let v = r.value()?;
    // Only writes acknowledged before the read was sent must show in it.
    let (writes, unsure) = &per_key[r.target as usize];
    debug_assert!(writes.windows(2).all(|w| w[0] <= w[1]), "writes are sorted");
    let n = writes.partition_point(|w| w.0 < r.invoke_ns);
    let (acked, unsure, last) = (n as u64, *unsure, n.checked_sub(1).map(|i| writes[i].1));
    if v >= 0 && v as u64 >= acked {
        return None;
    }
    let name = m.key_name(r.target);
    let done_ns = r.complete_or_max();
    let mut ops = vec![r.index];
    let mut start_ns = r.invoke_ns;
    let mut last_text = String::new();
    if let Some(l) = last {
        let l = &m.ops[l];
        ops.push(l.index);
        start_ns = start_ns.min(l.complete_or_max());
        last_text = format!(
            ", the last at {} (op {})",
            secs(l.complete_or_max()),
            l.index
        );
    }
    Some(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::LostUpdate,
        lock: Some(name.to_string()),
        ops,
        window_ns: [start_ns, done_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "the final read of {name} by p{} returned {v} at {} (op {}), yet {acked} writes to {name} were acknowledged before it was sent{last_text}; counting {unsure} indeterminate write(s), the value had to be between {acked} and {}",
            r.process,
            secs(done_ns),
            r.index,
            acked + unsure,
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
