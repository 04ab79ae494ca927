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

impl FaultAims {
    /// [`FaultAims::met`] as every later grant and end of the history would answer it, or
    /// `None` while they could answer differently. Only a node back before a lease ends reads
    /// them: a grant invoked at or after the fault's end, and, for a lease an unanswered op
    /// keeps open, a history that ends after the fault (it does once anything is read past
    /// the fault's end, such as that grant's invoke).
    fn met_final(
        &self,
        aim: Aim,
        variant: &str,
        (start_ns, end_ns): (u64, u64),
        last_grant_ns: Option<u64>,
    ) -> Option<bool> {
        match aim {
            Aim::BackBeforeLeaseEnds => {
                if !self.live_at_start || (self.max_to_ns != u64::MAX && self.max_to_ns <= end_ns) {
                    return Some(false);
                }
                let grant_ns = last_grant_ns.filter(|&t| t >= end_ns)?;
                (self.max_to_ns != u64::MAX || grant_ns > end_ns).then_some(true)
            }
            Aim::FrozenPastLeaseBound
            | Aim::ClockUnderLease
            | Aim::LeaseLiveDuring
            | Aim::ClientStall => Some(self.met(aim, variant, (start_ns, end_ns), (None, 0))),
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
    cells.count(exercised, cov);
}

/// [`count`] before the history ends, for a fault that met every lease it can: counts it and
/// returns true when no grant walked later (grants come in invoke order, so `last_grant_ns`
/// only grows) and no end of the history can change what [`count`] would say; false, counting
/// nothing, while one still can.
pub(crate) fn count_final(
    cells: &Cells,
    aims: &FaultAims,
    span: (u64, u64),
    last_grant_ns: Option<u64>,
    cov: &mut Coverage,
) -> bool {
    let Some(exercised) = aims.met_final(cells.aim, &cells.variant, span, last_grant_ns) else {
        return false;
    };
    cells.count(exercised, cov);
    true
}

/// What a fault aimed at leases counts into: its aim and variant, and its cells.
#[derive(Debug, Clone)]
pub(crate) struct Cells {
    aim: Aim,
    variant: String,
    cells: Vec<Cell>,
}

impl Cells {
    /// Counts each of its cells, `exercised` or not.
    fn count(&self, exercised: bool, cov: &mut Coverage) {
        for cell in &self.cells {
            cov.count_cell(cell.clone(), exercised);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `met_final` against `met` over every future a stream can meet: grants walked later are
    /// invoked no earlier than the last one walked, and the history ends no earlier than the
    /// fault and the last grant. What it answers is what every such future answers (sound),
    /// and where it waits, two futures disagree (it waits no longer than it must).
    #[test]
    fn met_final_answers_what_every_later_grant_and_end_would() {
        let end_ns = 100;
        let instants = [0, 50, 99, 100, 101, 150, 200, u64::MAX];
        let aims_all = [
            Aim::FrozenPastLeaseBound,
            Aim::BackBeforeLeaseEnds,
            Aim::ClockUnderLease,
            Aim::LeaseLiveDuring,
            Aim::ClientStall,
        ];
        let (mut answered, mut waited) = (0, 0);
        for aim in aims_all {
            for variant in ["", "fast", "strobe", "bump-forward"] {
                for live_at_start in [false, true] {
                    for (max_to_ns, min_lb_ns, min_from_ns, first_grant_ns) in
                        (instants.iter().copied())
                            .flat_map(|a| (instants.iter().copied()).map(move |b| (a, b, b, a)))
                    {
                        let aims = FaultAims {
                            live_at_start,
                            min_lb_ns,
                            max_to_ns,
                            min_from_ns,
                            first_grant_ns,
                        };
                        let lasts = std::iter::once(None).chain(
                            (instants.iter().copied())
                                .filter(|&t| t != u64::MAX)
                                .map(Some),
                        );
                        for last in lasts {
                            let span = (10, end_ns);
                            // Every future: a later last grant (or none more) and an end.
                            let mut futures = Vec::new();
                            let laters = std::iter::once(last).chain(
                                (instants.iter().copied())
                                    .filter(|&t| t != u64::MAX && last.is_none_or(|l| t >= l))
                                    .map(Some),
                            );
                            for later in laters {
                                let floor = later.unwrap_or(0).max(end_ns);
                                for h_end in instants.iter().copied().filter(|&e| e >= floor) {
                                    futures.push(aims.met(aim, variant, span, (later, h_end)));
                                }
                            }
                            match aims.met_final(aim, variant, span, last) {
                                Some(met) => {
                                    answered += 1;
                                    assert!(
                                        futures.iter().all(|&f| f == met),
                                        "{aim:?} {aims:?} last {last:?}: answered {met}"
                                    );
                                }
                                None => {
                                    waited += 1;
                                    assert!(
                                        futures.contains(&true) && futures.contains(&false),
                                        "{aim:?} {aims:?} last {last:?}: waited for nothing"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(answered > 1000 && waited > 50, "{answered} {waited}");
    }
}
