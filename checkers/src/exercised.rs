//! Which faults met the state they aim at (docs/checkers.md, "Exercised"): a fault that
//! happened while no lease was live tests nothing a lease-based service can get wrong, so a
//! verdict must not rest on it. Counted per cell (kind, variant, role) into
//! [`Coverage::cells`]; client stalls are placed by [`crate::coverage`], which knows their
//! grants, and counted there.
//!
//! Leases are intervals from an acquire's invoke (the earliest instant the service may have
//! set it) to the instant it is surely over (its release's invoke, or its upper bound). Each
//! aim asks whether some lease (or grant) stood somewhere against the fault, so a fault folds
//! in each lease as its grant closes ([`FaultAims`]), until every grant invoked before the
//! fault stopped is closed: what it keeps is a few instants per fault, never the leases.

use crate::faults::Fault;
use history::coverage::{Cell, Coverage};
use history::{Aim, FaultFamily};
use serde_json::Value;

/// A lease as an interval, with what the rules need of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    pub(crate) from_ns: u64,
    /// Surely over from here: the release's invoke, or the lease's upper bound (`u64::MAX`,
    /// the history's end, when an op that never completed may still set it).
    pub(crate) to_ns: u64,
    /// The lease may have ended from here on (its lower bound after the last renew).
    pub(crate) lb_ns: u64,
    /// Its grant's invoke.
    pub(crate) invoke_ns: u64,
}

/// What the leases met so far say of one fault that starts at `start`: each aim is a question
/// about some lease or grant, answered at the end from these (a lease met once is folded in,
/// never kept).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FaultAims {
    /// Among the leases live at `start`: whether any, the lowest lower bound and the latest
    /// end.
    live_at_start: bool,
    min_lb_ns: u64,
    max_to_ns: u64,
    /// The earliest start among the leases that reach `start`: live during `[start, e]` when
    /// it is at most `e`.
    min_from_ns: u64,
    /// The earliest grant invoked at or after `start`.
    first_grant_ns: u64,
}

impl Default for FaultAims {
    fn default() -> Self {
        FaultAims {
            live_at_start: false,
            min_lb_ns: u64::MAX,
            max_to_ns: 0,
            min_from_ns: u64::MAX,
            first_grant_ns: u64::MAX,
        }
    }
}

impl FaultAims {
    /// Folds in `lease`, for a fault that starts at `start_ns`.
    pub(crate) fn meet(&mut self, lease: &Lease, start_ns: u64) {
        if lease.to_ns >= start_ns {
            self.min_from_ns = self.min_from_ns.min(lease.from_ns);
            if lease.from_ns <= start_ns {
                self.live_at_start = true;
                self.min_lb_ns = self.min_lb_ns.min(lease.lb_ns);
                self.max_to_ns = self.max_to_ns.max(lease.to_ns);
            }
        }
        if lease.invoke_ns >= start_ns {
            self.first_grant_ns = self.first_grant_ns.min(lease.invoke_ns);
        }
    }

    /// Whether a fault aiming at `aim` over `[start_ns, end_ns]` met it, in a history that
    /// ended at `history_end_ns` with its last grant invoked at `last_grant_ns`. A family this
    /// build does not know is taken as [`Aim::LeaseLiveDuring`].
    fn met(
        &self,
        aim: Aim,
        variant: &str,
        (start_ns, end_ns): (u64, u64),
        (last_grant_ns, history_end_ns): (Option<u64>, u64),
    ) -> bool {
        let _ = start_ns;
        let live_during = self.min_from_ns <= end_ns;
        match aim {
            // The service is frozen while a lease it granted may run out: when it wakes, it
            // must not act as if no time had passed.
            Aim::FrozenPastLeaseBound => self.live_at_start && self.min_lb_ns <= end_ns,
            // A node holding a live lease dies and is back before that lease is surely over,
            // and is asked for grants: what it remembers (tokens, leases) is put to use while
            // it still matters.
            Aim::BackBeforeLeaseEnds => {
                // A lease still open to an unanswered op ends with the history.
                let max_to_ns = match self.max_to_ns {
                    u64::MAX => history_end_ns,
                    t => t,
                };
                self.live_at_start
                    && max_to_ns > end_ns
                    && last_grant_ns.is_some_and(|t| t >= end_ns)
            }
            // A step moves the clock under a live lease; a rate change applies while one is
            // set (the clock modes, docs/history.md).
            Aim::ClockUnderLease => match variant {
                "fast" | "slow" => self.first_grant_ns <= end_ns,
                "strobe" => live_during,
                _ => self.live_at_start,
            },
            // A cut (or a lossy link) while a lease is live: its holder, or the service's view
            // of it, is on one side.
            Aim::LeaseLiveDuring | Aim::ClientStall => live_during,
        }
    }
}

/// The roles a fault names (`roles`), else its node ids (`nodes`), else none.
fn roles_of(v: &Value) -> Vec<String> {
    let list = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect()
    };
    let mut roles = list("roles");
    if roles.is_empty() {
        roles = list("nodes");
    }
    roles.sort();
    roles.dedup();
    roles
}

/// Counts fault `f` into `cov.cells` (client stalls are counted by the coverage pass), by
/// what the leases told `aims`, in a history that ended at `end_ns` with its last grant
/// invoked at `last_grant_ns`.
pub(crate) fn count(
    cells: &Cells,
    aims: &FaultAims,
    span: (u64, u64),
    (last_grant_ns, end_ns): (Option<u64>, u64),
    cov: &mut Coverage,
) {
    let exercised = aims.met(cells.aim, &cells.variant, span, (last_grant_ns, end_ns));
    for cell in &cells.cells {
        cov.count_cell(cell.clone(), exercised);
    }
}

/// What a fault aimed at leases counts into: its aim and variant, and its cells.
#[derive(Debug, Clone)]
pub(crate) struct Cells {
    aim: Aim,
    variant: String,
    cells: Vec<Cell>,
}

/// The cells fault `f` counts into, read from its value; none for a client stall (placed and
/// counted by the coverage pass) or an op that opens no fault.
pub(crate) fn cells_of(f: &Fault) -> Option<Cells> {
    let kind = crate::faults::opened_kind(&f.f)?;
    let family = FaultFamily::named(kind).unwrap_or(&FaultFamily::UNKNOWN);
    // Client stalls are placed and counted by the coverage pass.
    if family.stalls_clients() {
        return None;
    }
    let text = |k: &str| f.value.get(k).and_then(Value::as_str).unwrap_or_default();
    let rolling = family.rolls
        && f.value
            .get(FaultFamily::THEN_NODES)
            .and_then(Value::as_array)
            .is_some_and(|w| !w.is_empty());
    let variant = if rolling {
        history::coverage::KILL_ROLLING
    } else if family.variant_field.is_empty() {
        ""
    } else {
        text(family.variant_field)
    };
    let mut roles = roles_of(&f.value);
    // A partition cuts links, not a node's role: one cell per topology. A rolling kill is one
    // cell whatever its waves hit.
    if !family.per_role || rolling || roles.is_empty() {
        roles = vec![String::new()];
    }
    // Only a clock fault that moved the monotonic clock says so: the wall clock alone is the
    // default, and the cell of every run before scopes were recorded.
    let scope = match text(FaultFamily::SCOPE) {
        "all" if family.scoped => "all",
        _ => "",
    };
    let cells = (roles.into_iter())
        .map(|role| Cell {
            kind: kind.to_string(),
            variant: variant.to_string(),
            role,
            scope: scope.to_string(),
            ..Cell::default()
        })
        .collect();
    Some(Cells {
        aim: family.aim,
        variant: variant.to_string(),
        cells,
    })
}
