//! Contention rounds for `Stats.extra` (no verdict): with `--arrivals rounds:...` every client
//! asks once a round, and each acquire carries its round's number. A round is contended when
//! two or more acquires of one lock were made in it; it ended with more than one holder when
//! two of its grants' definite holds overlap (the mutex checker reports each such overlap as
//! a violation; this counts the rounds, the figure the textbook's experiment gives).

use crate::model::{Func, Model};
use history::Outcome;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `rounds` for `Stats.extra`, when the history has tagged acquires.
pub fn round_stats(m: &Model) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if m.rounds.is_empty() {
        return out;
    }
    let grant_of: BTreeMap<usize, usize> = m
        .grants
        .iter()
        .enumerate()
        .map(|(g, gr)| (gr.op, g))
        .collect();
    // (lock, round) -> (acquires, grants)
    let mut rounds: BTreeMap<(u32, u64), (u64, Vec<usize>)> = BTreeMap::new();
    for &(pos, round) in &m.rounds {
        let o = &m.ops[pos];
        if o.func != Func::Acquire {
            continue;
        }
        let r = rounds.entry((o.target, round)).or_default();
        r.0 += 1;
        if o.outcome == Outcome::Ok {
            if let Some(&g) = grant_of.get(&pos) {
                r.1.push(g);
            }
        }
    }
    let overlap = |a: usize, b: usize| {
        m.grants[a].holds.iter().any(|x| {
            m.grants[b]
                .holds
                .iter()
                .any(|y| x.start_ns < y.end_ns && y.start_ns < x.end_ns)
        })
    };
    let contended: Vec<&Vec<usize>> = rounds
        .values()
        .filter(|(asked, _)| *asked >= 2)
        .map(|(_, g)| g)
        .collect();
    let multi = contended
        .iter()
        .filter(|g| {
            g.iter()
                .enumerate()
                .any(|(i, &a)| g[i + 1..].iter().any(|&b| overlap(a, b)))
        })
        .count();
    let share = if contended.is_empty() {
        Value::Null
    } else {
        json!(multi as f64 / contended.len() as f64)
    };
    out.insert(
        "rounds".to_string(),
        json!({
            "rounds": rounds.len(),
            "contended": contended.len(),
            "more_than_one_holder": multi,
            "more_than_one_holder_share": share,
        }),
    );
    out
}
