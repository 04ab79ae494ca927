//! `synth --inject --inject-every N`: violations all along a history of any length, in bounded
//! memory. The correct history streams by; every N events the stretch gathered so far gets one
//! violation (the `--inject` kinds in turn) and is written, so at most one stretch is held.
//!
//! The injectors (`checkers::inject`) take a whole, structurally valid history. A stretch is not
//! one on its own: an op invoked in an earlier stretch may complete in it. So the injector sees
//! the stretch behind the invokes still open from before (the context, already written), and
//! a trial is kept only if the context comes back first and unchanged and nothing new lands
//! before what was already written; otherwise the next kind tries, with a seed of its own.

use super::OpWriter;
use anyhow::{Context, Result};
use checkers::inject::{fresh_process, inject, InjectKind};
use history::{History, Op, OpType, Process};
use std::collections::BTreeMap;

/// Injected processes are renumbered from here, one per stretch: the injector's fresh process
/// (one above the stretch's highest) could be a process the generator starts later.
const INJECTED_PROCESS_BASE: u64 = 1 << 40;

/// The injectors' mark on the ops they insert (checkers::inject writes it; the file keeps it).
const INJECTED: &str = "injected";

/// Rounds of the kinds tried on one stretch before it is written as it is.
const ROUNDS_PER_STRETCH: usize = 3;

/// The stretches of one history, and what went into them.
pub(super) struct Stretches<'a> {
    every: usize,
    kinds: &'a [InjectKind],
    seed: u64,
    /// The stretch being gathered.
    buf: Vec<Op>,
    /// Client invokes already written whose completion has not come yet, by process.
    open: BTreeMap<u64, Op>,
    /// Events written: the next event's index.
    written: u64,
    /// The time of the last event written.
    last_time_ns: u64,
    stretches: u64,
    /// The kind the next stretch tries first.
    next_kind: usize,
    /// Violations injected, by kind.
    pub(super) injected: BTreeMap<&'static str, u64>,
    /// Stretches no kind found a place in.
    pub(super) missed: u64,
}

impl<'a> Stretches<'a> {
    pub(super) fn new(every: usize, kinds: &'a [InjectKind], seed: u64) -> Stretches<'a> {
        assert!(every > 0 && !kinds.is_empty());
        Stretches {
            every,
            kinds,
            seed,
            buf: Vec::with_capacity(every + 8_192),
            open: BTreeMap::new(),
            written: 0,
            last_time_ns: 0,
            stretches: 0,
            next_kind: 0,
            injected: BTreeMap::new(),
            missed: 0,
        }
    }

    /// Takes the generator's next ops; writes a stretch each time one is full.
    pub(super) fn push(&mut self, ops: &[Op], out: &mut OpWriter) -> Result<()> {
        self.buf.extend_from_slice(ops);
        if self.buf.len() >= self.every {
            self.flush(out)?;
        }
        Ok(())
    }

    /// Injects into the stretch gathered so far and writes it.
    pub(super) fn flush(&mut self, out: &mut OpWriter) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        // Indices after the ones written: an earlier stretch's insertions moved them.
        let stretch = std::mem::take(&mut self.buf);
        let stretch = self.renumber(stretch);
        let end_ns = stretch.last().map_or(0, |o| o.time_ns);
        let mut context: Vec<Op> = self.open.values().cloned().collect();
        context.sort_by_key(|o| o.index);
        let mut view = context.clone();
        view.extend(stretch.iter().cloned());
        let rest = match self.inject_one(&context, view, end_ns) {
            Some(rest) => rest,
            None => {
                self.missed += 1;
                self.renumber(stretch)
            }
        };
        self.stretches += 1;
        for op in &rest {
            if let Process::Client(p) = op.process {
                match op.kind {
                    OpType::Invoke => self.open.insert(p, op.clone()),
                    _ => self.open.remove(&p),
                };
            }
        }
        self.last_time_ns = rest.last().map_or(self.last_time_ns, |o| o.time_ns);
        out.write(&rest).context("cannot write the history")?;
        self.written += rest.len() as u64;
        self.buf = Vec::with_capacity(self.every + 8_192);
        Ok(())
    }

    /// One violation in `view` (the context, then the stretch), the kinds tried in turn from
    /// the next one: the stretch's ops as they are to be written, or `None` if no kind found
    /// a place that keeps the history whole.
    fn inject_one(&mut self, context: &[Op], view: Vec<Op>, end_ns: u64) -> Option<Vec<Op>> {
        let n = self.kinds.len();
        for attempt in 0..n * ROUNDS_PER_STRETCH {
            let kind = self.kinds[(self.next_kind + attempt) % n];
            let mut trial = view.clone();
            let fresh = fresh_process(&trial);
            let seed = self.seed
                ^ 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(self.stretches + 1)
                ^ (attempt as u64).rotate_left(32);
            let Some(witness) = inject(&mut trial, kind, seed) else {
                continue;
            };
            let Some(rest) = self.keep(context, trial, (fresh, end_ns), kind, &witness) else {
                continue;
            };
            self.next_kind = (self.next_kind + attempt + 1) % n;
            *self.injected.entry(kind.as_str()).or_default() += 1;
            return Some(rest);
        }
        None
    }

    /// The trial's stretch, tagged and renumbered, if the trial left the context first and
    /// unchanged, put nothing before what was written nor after the stretch's end (`end_ns`),
    /// and reads as one valid history.
    fn keep(
        &self,
        context: &[Op],
        mut trial: Vec<Op>,
        (fresh, end_ns): (u64, u64),
        kind: InjectKind,
        witness: &[u64],
    ) -> Option<Vec<Op>> {
        let unchanged = context.iter().zip(&trial).all(|(c, t)| {
            !t.extra.contains_key(INJECTED)
                && Op {
                    index: c.index,
                    ..t.clone()
                } == *c
        });
        if !unchanged {
            return None;
        }
        // Witness indices are the trial's own (renumbered from 0 when the injector inserted).
        for op in trial.iter_mut().filter(|o| witness.contains(&o.index)) {
            super::tag_witness(op, kind);
        }
        let mut rest = trial.split_off(context.len());
        // The next stretch starts where this one ended: nothing may come after its end.
        if rest.first().is_some_and(|o| o.time_ns < self.last_time_ns)
            || rest.last().is_some_and(|o| o.time_ns > end_ns)
        {
            return None;
        }
        for op in &mut rest {
            if op.process == Process::Client(fresh) && op.extra.contains_key(INJECTED) {
                op.process = Process::Client(INJECTED_PROCESS_BASE + self.stretches);
            }
        }
        let rest = self.renumber(rest);
        // The stretch behind its context must pair (an injector may use a process that is
        // still in flight from an earlier stretch, which the view cannot show it).
        let mut whole = context.to_vec();
        whole.extend(rest.iter().cloned());
        History::new(whole).ok()?;
        Some(rest)
    }

    /// `ops` with the indices that follow the ones written.
    fn renumber(&self, mut ops: Vec<Op>) -> Vec<Op> {
        for (i, op) in ops.iter_mut().enumerate() {
            op.index = self.written + i as u64;
        }
        ops
    }

    /// Events written.
    pub(super) fn written(&self) -> u64 {
        self.written
    }
}
