//! Contention rounds for `Stats.extra` (no verdict): with `--arrivals rounds:...` every client
//! asks once a round, and each acquire carries its round's number. A round is contended when
//! two or more acquires of one lock were made in it; it ended with more than one holder when
//! two of its grants' definite holds overlap (the mutex checker reports each such overlap as
//! a violation; this counts the rounds, the figure the textbook's experiment gives).

use crate::model::{Func, Model, Segment};
use crate::FxMap;
use history::Outcome;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `rounds` for `Stats.extra`, when the history has tagged acquires.
pub fn round_stats(m: &Model) -> BTreeMap<String, Value> {
    let grant_of: BTreeMap<usize, u32> = m
        .grants
        .iter()
        .enumerate()
        .map(|(g, gr)| (gr.op, g as u32))
        .collect();
    let mut counts = RoundCounts {
        tagged: !m.rounds.is_empty(),
        ..RoundCounts::default()
    };
    for &(pos, round) in &m.rounds {
        let o = &m.ops[pos];
        if o.func != Func::Acquire {
            continue;
        }
        let grant = grant_of.get(&pos).filter(|_| o.outcome == Outcome::Ok);
        counts.asked(o.target, round, grant.copied());
    }
    for (g, grant) in m.grants.iter().enumerate() {
        counts.closed(g as u32, &grant.holds);
    }
    counts.figures()
}

/// One (lock, round) so far.
#[derive(Default)]
struct Round {
    asked: u64,
    /// Its grants not yet closed.
    open: u32,
    /// The definite holds of its closed grants: (start, end, grant).
    holds: Vec<(u64, u64, u32)>,
}

impl Round {
    /// Two of its grants' definite holds overlap.
    fn more_than_one_holder(&self) -> bool {
        let h = &self.holds;
        (0..h.len()).any(|i| {
            h[i + 1..]
                .iter()
                .any(|y| y.2 != h[i].2 && h[i].0 < y.1 && y.0 < h[i].1)
        })
    }
}

/// The rounds counted as their acquires are walked (in invoke order) and their grants closed:
/// a round is counted once every acquire of it has surely been walked (one of two rounds on
/// was: a client asks a round at its start, and rounds follow each other) and its grants are
/// closed. What it keeps is the rounds still open, not the history's.
#[derive(Default)]
pub(crate) struct RoundCounts {
    open: BTreeMap<(u64, u32), Round>,
    /// The round of each grant not yet closed, with its lock.
    grant_round: FxMap<u32, (u64, u32)>,
    /// The latest round an acquire was walked in.
    latest: u64,
    rounds: u64,
    contended: u64,
    multi: u64,
    /// Acquires of a round already counted (clocks that go back): counted as a round again.
    pub(crate) late: u64,
    /// An op carried a round: the figures are given, if only zeros.
    pub(crate) tagged: bool,
    /// The most rounds open at once.
    pub(crate) open_most: usize,
}

impl RoundCounts {
    /// An acquire of `lock` in `round` was walked; `grant`, the grant it made, if any.
    pub(crate) fn asked(&mut self, lock: u32, round: u64, grant: Option<u32>) {
        if round + 2 <= self.latest && !self.open.contains_key(&(round, lock)) {
            self.late += 1;
        }
        let r = self.open.entry((round, lock)).or_default();
        r.asked += 1;
        if let Some(g) = grant {
            r.open += 1;
            self.grant_round.insert(g, (round, lock));
        }
        self.open_most = self.open_most.max(self.open.len());
        if round > self.latest {
            self.latest = round;
            self.count_done();
        }
    }

    /// Grant `g` closed with its definite `holds`.
    pub(crate) fn closed(&mut self, g: u32, holds: &[Segment]) {
        let Some(key) = self.grant_round.remove(&g) else {
            return;
        };
        let r = self.open.get_mut(&key).expect("a grant's round is open");
        r.open -= 1;
        r.holds
            .extend(holds.iter().map(|s| (s.start_ns, s.end_ns, g)));
        if r.open == 0 && key.0 + 2 <= self.latest {
            let r = self.open.remove(&key).expect("just read");
            self.count(&r);
        }
    }

    /// Counts the rounds two before the latest whose grants are all closed.
    fn count_done(&mut self) {
        let done: Vec<(u64, u32)> = (self.open.iter())
            .take_while(|(k, _)| k.0 + 2 <= self.latest)
            .filter(|(_, r)| r.open == 0)
            .map(|(&k, _)| k)
            .collect();
        for k in done {
            let r = self.open.remove(&k).expect("just listed");
            self.count(&r);
        }
    }

    fn count(&mut self, r: &Round) {
        self.rounds += 1;
        if r.asked >= 2 {
            self.contended += 1;
            self.multi += u64::from(r.more_than_one_holder());
        }
    }

    /// The figures, keyed for `Stats.extra`: none when no acquire carried a round. Rounds still
    /// open are counted as they stand (at the history's end, every grant is closed).
    pub(crate) fn figures(&self) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        let mut all = RoundCounts {
            rounds: self.rounds,
            contended: self.contended,
            multi: self.multi,
            ..RoundCounts::default()
        };
        for r in self.open.values() {
            all.count(r);
        }
        if !self.tagged {
            return out;
        }
        let share = if all.contended == 0 {
            Value::Null
        } else {
            json!(all.multi as f64 / all.contended as f64)
        };
        let mut figures = json!({
            "rounds": all.rounds,
            "contended": all.contended,
            "more_than_one_holder": all.multi,
            "more_than_one_holder_share": share,
        });
        if self.late > 0 {
            figures["late"] = json!(self.late);
        }
        out.insert("rounds".to_string(), figures);
        out
    }
}
