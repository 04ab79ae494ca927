//! Which faults met the state they aim at (docs/checkers.md, "Exercised"): a fault that
//! happened while no lease was live tests nothing a lease-based service can get wrong, so a
//! verdict must not rest on it. Counted per cell (kind, variant, role) into
//! [`Coverage::cells`]; client stalls are placed by [`crate::coverage`], which knows their
//! grants, and counted there.
//!
//! Leases are intervals from an acquire's invoke (the earliest instant the service may have
//! set it) to the instant it is surely over (its release's invoke, or its upper bound); the
//! intervals are sorted by start with a running maximum of their ends, so each fault asks
//! "was any lease live at t / during [a, b]" in a binary search and a walk over the leases
//! that can overlap it.

use crate::model::{Grant, Model};
use history::coverage::{Cell, Coverage};
use history::{Aim, FaultFamily};
use serde_json::Value;

/// A lease as an interval, with what the rules need of it.
#[derive(Debug, Clone, Copy)]
struct Lease {
    from_ns: u64,
    /// Surely over from here: the release's invoke, or the lease's upper bound (the history's
    /// end when an op that never completed may still set it).
    to_ns: u64,
    /// The lease may have ended from here on (its lower bound after the last renew).
    lb_ns: u64,
}

struct Leases {
    by_start: Vec<Lease>,
    /// `reach[i]`: the largest `to_ns` among `by_start[..=i]`.
    reach: Vec<u64>,
    /// Grant invokes, sorted: "a grant after t" and "a grant during [a, b]".
    grant_invokes: Vec<u64>,
}

impl Leases {
    fn of(m: &Model) -> Leases {
        let mut by_start: Vec<Lease> = m.grants.iter().map(|g| lease_of(m, g)).collect();
        by_start.sort_unstable_by_key(|l| (l.from_ns, l.to_ns));
        let reach = by_start
            .iter()
            .scan(0u64, |max, l| {
                *max = (*max).max(l.to_ns);
                Some(*max)
            })
            .collect();
        let mut grant_invokes: Vec<u64> = m.grants.iter().map(|g| g.invoke_ns).collect();
        grant_invokes.sort_unstable();
        Leases {
            by_start,
            reach,
            grant_invokes,
        }
    }

    /// The leases live at some instant of `[a_ns, b_ns]`, latest start first. Bounded by the
    /// leases that start by `b_ns` and reach `a_ns`.
    fn live_during(&self, a_ns: u64, b_ns: u64) -> impl Iterator<Item = &Lease> + '_ {
        let mut j = self.by_start.partition_point(|l| l.from_ns <= b_ns);
        std::iter::from_fn(move || {
            while j > 0 && self.reach[j - 1] >= a_ns {
                j -= 1;
                let l = &self.by_start[j];
                if l.to_ns >= a_ns {
                    return Some(l);
                }
            }
            None
        })
    }

    fn grant_invoked_in(&self, a_ns: u64, b_ns: u64) -> bool {
        let i = self.grant_invokes.partition_point(|&t| t < a_ns);
        self.grant_invokes.get(i).is_some_and(|&t| t <= b_ns)
    }
}

fn lease_of(m: &Model, g: &Grant) -> Lease {
    let upper = g.surely_dead_ns.unwrap_or(m.end_time_ns);
    // A release the service refused (or never got: a refused connection) leaves the lease in
    // force; any other may have ended it at its invoke.
    let released = g
        .epoch_ops
        .iter()
        .map(|&pos| &m.ops[pos as usize])
        .find(|op| op.func == crate::model::Func::Release && op.outcome != history::Outcome::Fail)
        .map_or(u64::MAX, |op| op.invoke_ns);
    Lease {
        from_ns: g.invoke_ns,
        to_ns: upper.min(released).max(g.invoke_ns),
        lb_ns: g.lease_lb_ns,
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

/// Whether a fault aiming at `aim` over `[start_ns, end_ns]` met it. A family this build does
/// not know is taken as [`Aim::LeaseLiveDuring`].
fn met(leases: &Leases, aim: Aim, variant: &str, start_ns: u64, end_ns: u64) -> bool {
    match aim {
        // The service is frozen while a lease it granted may run out: when it wakes, it must
        // not act as if no time had passed.
        Aim::FrozenPastLeaseBound => leases
            .live_during(start_ns, start_ns)
            .any(|l| l.lb_ns <= end_ns),
        // A node holding a live lease dies and is back before that lease is surely over, and
        // is asked for grants: what it remembers (tokens, leases) is put to use while it
        // still matters.
        Aim::BackBeforeLeaseEnds => {
            leases
                .live_during(start_ns, start_ns)
                .any(|l| l.to_ns > end_ns)
                && leases.grant_invoked_in(end_ns, u64::MAX)
        }
        // A step moves the clock under a live lease; a rate change applies while one is set
        // (the clock modes, docs/history.md).
        Aim::ClockUnderLease => match variant {
            "fast" | "slow" => leases.grant_invoked_in(start_ns, end_ns),
            "strobe" => leases.live_during(start_ns, end_ns).next().is_some(),
            _ => leases.live_during(start_ns, start_ns).next().is_some(),
        },
        // A cut (or a lossy link) while a lease is live: its holder, or the service's view of
        // it, is on one side.
        Aim::LeaseLiveDuring | Aim::ClientStall => {
            leases.live_during(start_ns, end_ns).next().is_some()
        }
    }
}

/// Counts every fault but client stalls into `cov.cells`.
pub(crate) fn count(m: &Model, cov: &mut Coverage) {
    let leases = Leases::of(m);
    for f in m.faults.list() {
        let Some(kind) = crate::faults::opened_kind(&f.f) else {
            continue;
        };
        let family = FaultFamily::named(kind).unwrap_or(&FaultFamily::UNKNOWN);
        // Client stalls are placed and counted by the coverage pass.
        if family.stalls_clients() {
            continue;
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
        let exercised = met(&leases, family.aim, variant, f.start_ns, f.end_ns);
        let mut roles = roles_of(&f.value);
        // A partition cuts links, not a node's role: one cell per topology. A rolling kill is
        // one cell whatever its waves hit.
        if !family.per_role || rolling || roles.is_empty() {
            roles = vec![String::new()];
        }
        // Only a clock fault that moved the monotonic clock says so: the wall clock alone is
        // the default, and the cell of every run before scopes were recorded.
        let scope = match text(FaultFamily::SCOPE) {
            "all" if family.scoped => "all",
            _ => "",
        };
        for role in roles {
            cov.count_cell(
                Cell {
                    kind: kind.to_string(),
                    variant: variant.to_string(),
                    role,
                    scope: scope.to_string(),
                    ..Cell::default()
                },
                exercised,
            );
        }
    }
}
