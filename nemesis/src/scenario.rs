//! What `lockpick test`'s plan asks of a fault family: the target it plans for, the cells each
//! family adds to the plan (`FaultKind::suite_cells`) and a fault aimed at one of them
//! (`FaultKind::aim`). The plan itself (which cells run together, the scenarios' flags) is the
//! binary's (src/suite/plan.rs); a family's cells and how its faults are sized for them are
//! in its own module.

use crate::schedule::{ClockMode, Payload, StallAim, Topology, WakeOp};
use history::coverage::Cell;

/// What the target allows and how it is driven: the suite's plan is drawn from this.
#[derive(Debug, Clone)]
pub struct Target {
    /// The faults the target and this machine allow (a run's default list, or `--nemesis`).
    pub kinds: Vec<crate::schedule::FaultKind>,
    pub nodes: usize,
    /// The fault scenarios run a workload that reads and writes the fenced store (counter or
    /// bank), so a stall may wake into a read or a write; false for mutex.
    pub counter: bool,
    /// Whether the service's grants carry fencing tokens: the counter workload needs them.
    pub fencing: bool,
    /// Whether a client can hold several locks at once (`Service::holds_several_locks`): the
    /// bank's contention cell needs it, and fencing tokens.
    pub bank: bool,
    /// Whether the counter's write ends the grant (it commits the lock's transaction:
    /// PostgreSQL's `form=xact`): no release follows it, so no holder wakes into one.
    pub write_ends_grant: bool,
    /// The longest lease a client may hold.
    pub lease_ms: u64,
    pub clock_bump_ms: u64,
    pub clock_rate: f64,
    /// `--clock-faults` (empty: every direction).
    pub clock_modes: Vec<ClockMode>,
    /// `--client-faults`'s aims and wake-up ops (empty lists: all).
    pub aims: Vec<StallAim>,
    pub wakes: Vec<WakeOp>,
    /// `--partition-topologies`, or every one that cuts something with this many nodes.
    pub topologies: Vec<Topology>,
    /// Exercised instances each cell needs (`--times`).
    pub times: u64,
    /// `--liveness-grace`: how long past every lease a lock may stay held before `lock-stuck`.
    pub liveness_grace_ms: u64,
}

impl Target {
    /// The node roles a fault that hits one node is planned for: the primary, and another
    /// node when there is one.
    pub fn roles(&self) -> &'static [&'static str] {
        if self.nodes > 1 {
            &["primary", "other"]
        } else {
            &["primary"]
        }
    }
}

/// The clients' settings a scenario needs beyond the target's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The target's own settings.
    Plain,
    /// Acquires wait at most half a lease, so a lock held past every lease (a stalled holder
    /// on a service that never expires it) is answered `held` while others ask, which is what
    /// proves `lock-stuck`.
    ShortWait,
    /// A lease that is not a whole number of seconds (nor of tenths): a service that keeps
    /// leases in coarser units (seconds, as Redis `EXPIRE` and etcd leases do) rounds it, and
    /// only such a ttl shows whether it rounds down.
    OddTtl,
    /// Every hold outlasts the scenario's faults (a rolling kill): the run's first grant is
    /// then live from before the first wave to past the second's restart, whatever the draw,
    /// where holds of a few hundred ms would span the downtimes only by luck.
    LongHold,
}

/// One of a family's cells in the suite's plan: what must be seen exercised, and how its
/// scenario runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPlan {
    /// The coverage cell it counts (kind, variant, wake-up op, role), as results.json has it.
    /// Its kind is the family's, or one of the family's own (`lease`, a stall under an odd
    /// lease), counted by any exercised cell of the family.
    pub cell: Cell,
    /// Lower runs first: cheap and likely to find something.
    pub rank: u32,
    /// How the clients behave in its scenario; a scenario packs cells of one profile.
    pub profile: Profile,
}

/// A cell of `kind` (`variant`, `wake`, `role`: empty when none).
pub fn cell(
    kind: &str,
    variant: &str,
    wake: &str,
    role: &str,
    rank: u32,
    profile: Profile,
) -> CellPlan {
    CellPlan {
        cell: Cell {
            kind: kind.into(),
            variant: variant.into(),
            wake: wake.into(),
            role: role.into(),
            ..Cell::default()
        },
        rank,
        profile,
    }
}

/// A fault aimed at a cell, before its place in the scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Aimed {
    pub length_ms: u64,
    pub nodes: Vec<usize>,
    pub payload: Payload,
    /// How long after it the scenario must go on for it to meet its state (a kill's
    /// recovery wait and a grant).
    pub after_ms: u64,
}
