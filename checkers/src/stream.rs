//! The rules a check runs while the history is read, over the grants the walk closes
//! (`walk.rs`): what each keeps is bounded by the grants open at once, not by the history's
//! length. The batch rules are their oracle: a grant the walk did not call stale gives what
//! the whole history gives (`digest::walk_order_tests`).
//!
//! So far: the first reading of `double-grant` (definite holds that overlap), swept in the
//! batch's order from the holds of closed grants once no grant closed later can hold the lock
//! before them, and rendered as found, in the batch's words ([`View`]). The grants a violation
//! found later may name are pinned ([`Streamed::pinned`]): the reader keeps them and their ops.

use crate::model::{Grant, View};
use crate::mutex::{double_grant, overlapping_holds, Earlier, Hold};
use crate::walk::Ops;
use crate::window::Window;
use history::Violation;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A hold waiting to be swept, ordered `(start, end, grant, segment, lock)`: each lock's holds
/// leave in the batch sweep's order.
type Waiting = Reverse<((u64, u64, u32, u32, u32), Earlier)>;

/// The streaming rules' state.
#[derive(Default)]
pub(crate) struct Streamed {
    /// Holds of closed grants not yet swept, earliest first.
    pending: BinaryHeap<Waiting>,
    sweep: Vec<(Hold, Earlier)>,
    /// `(grant, segment)` of the earlier hold and of the later of each overlap found so far.
    pub(crate) double_grants: Vec<(u32, u32, u32, u32)>,
    /// Each of them as the batch check words it.
    pub(crate) violations: Vec<Violation>,
    /// `(violation, end)` of those whose window reaches past the history read when they were
    /// found: a window ends by the history's end, known only once it is read ([`Streamed::finish`]).
    open_windows: Vec<(usize, u64)>,
    /// The most holds left waiting after a sweep.
    pub(crate) pending_max: usize,
    holds: crate::mutex::HoldSweep,
}

impl Streamed {
    /// Grant `g` closed: its holds are final (unless the walk later finds it stale). What
    /// the sweep reads of its ops is taken now: they may be dropped before it sweeps.
    pub(crate) fn closed(&mut self, g: u32, grant: &Grant, ops: &Ops) {
        for h in Hold::of(g, grant) {
            let kept = Earlier::of(ops, grant, &grant.holds[h.segment as usize]);
            self.pending.push(Reverse((
                (h.start_ns, h.end_ns, h.grant, h.segment, h.lock),
                kept,
            )));
        }
    }

    /// Sweeps the holds that start before `watermark_ns` (no grant closed later holds the
    /// lock before it), and renders what it finds from `grants` and `view`.
    pub(crate) fn sweep(&mut self, watermark_ns: u64, grants: &Window<Grant>, view: &impl View) {
        self.sweep.clear();
        // Bounded by the holds waiting.
        while let Some(&Reverse(((start_ns, end_ns, grant, segment, lock), kept))) =
            self.pending.peek()
        {
            if start_ns >= watermark_ns {
                break;
            }
            self.pending.pop();
            let h = Hold {
                lock,
                start_ns,
                end_ns,
                grant,
                segment,
            };
            self.sweep.push((h, kept));
        }
        let sweep = std::mem::take(&mut self.sweep);
        let mut holds = std::mem::take(&mut self.holds);
        for found in overlapping_holds(&mut holds, sweep.iter().copied()) {
            let (ga, sa, gb, sb) = found;
            let (a, b) = (&grants[ga as usize], &grants[gb as usize]);
            let (sa, sb) = (&a.holds[sa as usize], &b.holds[sb as usize]);
            let end_ns = sa.end_ns.min(sb.end_ns);
            if end_ns > view.end_time_ns() {
                self.open_windows.push((self.violations.len(), end_ns));
            }
            self.violations.push(double_grant(view, (a, sa), (b, sb)));
            self.double_grants.push(found);
        }
        holds.forget_before(watermark_ns);
        self.holds = holds;
        self.sweep = sweep;
        self.pending_max = self.pending_max.max(self.pending.len());
    }

    /// The history was read to its end, at `end_time_ns`: the windows found open end there.
    pub(crate) fn finish(&mut self, end_time_ns: u64) {
        for &(i, end_ns) in &self.open_windows {
            let w = &mut self.violations[i].window_ns;
            w[1] = end_ns.min(end_time_ns.max(w[0]));
        }
        self.open_windows.clear();
    }

    /// The grants a violation found later may name, which the reader must keep with their ops:
    /// those of the holds waiting, and of the holds the sweep may still pair.
    pub(crate) fn pinned(&self) -> Vec<u32> {
        let waiting = self.pending.iter().map(|Reverse((h, _))| h.2);
        waiting.chain(self.holds.grants()).collect()
    }
}
