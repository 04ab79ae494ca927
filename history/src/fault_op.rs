//! The nemesis's ops as a history names them: which open a fault and which close one, and the
//! kind each is about. One reading of the op names, for every crate that pairs a fault's start
//! with its end (the checkers' fault windows, the report's fault bands, coverage): each fault
//! family's names are in its [`FaultFamily`] entry, which the family's own module in the
//! nemesis (nemesis/src/fault/<name>.rs) declares and registers in [`FAULT_FAMILIES`], so the
//! readers here, in the checkers and in the reports learn every family of the binary they are
//! linked into without depending on the nemesis or naming a family. An op of a family this
//! build does not know reads by the convention the families follow, `start-<kind>` and
//! `stop-<kind>`; anything else the nemesis writes (`clock-observed`) is an instant, what a
//! fault was seen to do.

use crate::fields::Field;
use linkme::distributed_slice;
use std::sync::OnceLock;

/// A fault family as a history names it: its kind, the ops that open and close its faults,
/// the colour the report draws them in, and how its faults are counted as exercised
/// (docs/checkers.md, "Exercised"): what every reader of a history needs to know of a family,
/// so that none of them matches on its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultFamily {
    /// The kind, as `--nemesis` and `schedule.json` name it.
    pub kind: &'static str,
    /// The op that opens a fault of it.
    pub opens: &'static str,
    /// The op that closes it (after a kill: its nodes were started again and answered).
    pub closes: &'static str,
    /// Its faults' colour in the report's timelines (CSS).
    pub colour: &'static str,
    /// The state its faults aim at: whether one met it decides if it exercised anything.
    pub aim: Aim,
    /// The field of its opening op's value that names a fault's variant (a clock fault's
    /// `mode`, a partition's `topology`): one coverage cell per variant. Empty: none.
    pub variant_field: &'static str,
    /// Whether its cells are per node role (`roles`, else `nodes`, of the opening op): false
    /// for faults that cut links rather than hit a node.
    pub per_role: bool,
    /// Whether its faults may come in waves (`then_nodes`): such a rolling fault is one cell
    /// of its own (variant [`crate::coverage::KILL_ROLLING`]), whatever the waves hit.
    pub rolls: bool,
    /// Whether its cells record the fault's `scope` when it is `all` (a clock fault that moved
    /// the monotonic clock too).
    pub scoped: bool,
    /// The fields its ops' `value` carries beyond the ones every fault's do (`nodes`, `roles`,
    /// `length_ms`, `fault`, `process`), with their types: the reader holds them to these on
    /// every nemesis event (docs/history.md, "Nemesis events").
    pub fields: &'static [Field],
}

/// Every fault family linked into the binary, each registered by its module in the nemesis
/// (the `families!` line of its module emits its [`Registered`]). Read it through
/// [`FaultFamily::all`], which puts it in order: a linker gathers the entries in no order it
/// promises.
///
/// A binary that reads histories must link the nemesis for its families to be here (the
/// lockpick binary does; a test or an example of the checkers or the reports says
/// `use nemesis as _;`): without them every op reads by the `start-`/`stop-` convention, as an
/// op of a family the build does not know.
#[distributed_slice]
pub static FAULT_FAMILIES: [Registered];

/// One family's registration: its entry, and its place in every list of the families (its
/// line's place in the nemesis's `families!`, the order `--nemesis` lists them in).
#[derive(Debug)]
pub struct Registered {
    pub place: u32,
    pub family: &'static FaultFamily,
}

/// The state a family's faults aim at (docs/checkers.md, "Exercised"): a fault that met none
/// tests nothing a lease-based service can get wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aim {
    /// The service frozen while a lease it granted may run out (a pause).
    FrozenPastLeaseBound,
    /// A node that dies while a lease is live, is back before that lease is surely over, and is
    /// asked for grants after (a kill).
    BackBeforeLeaseEnds,
    /// A clock moved under a live lease (a step, a strobe), or a rate changed while a lease is
    /// set (fast, slow): the variant says which. Its faults may move clocks the checkers then
    /// excuse violations under (`--clock-scope all`).
    ClockUnderLease,
    /// A lease live at some time during the fault (a partition, a lossy link).
    LeaseLiveDuring,
    /// A client's own stall, placed against its grants by the coverage pass: it stalls a
    /// client between ops, so it holds back nothing the service does. Its opening op carries
    /// the stalled client's `process` and the fields of [`stall_fields`].
    ClientStall,
}

/// The fields a family whose faults stall clients ([`Aim::ClientStall`]) records on a
/// fault's opening op, beside `process`: what the coverage pass places the stall by. The
/// family declares them among its [`FaultFamily::fields`] under these names.
pub mod stall_fields {
    /// The lock whose holder was stalled.
    pub const LOCK: &str = "lock";
    /// What the stall was aimed at (boundary, next-grant, long, waiter).
    pub const SHAPE: &str = "shape";
    /// What the holder was to wake into (renew, write, release, read).
    pub const WAKE: &str = "wake";
}

impl FaultFamily {
    /// Every family this binary was linked with ([`FAULT_FAMILIES`]), in the order of their
    /// places (of their lines in the nemesis's `families!`), so lists, legends and tables
    /// come out the same in every build; two entries in one place (none should be) are put in
    /// the order of their kinds.
    pub fn all() -> &'static [&'static FaultFamily] {
        static SORTED: OnceLock<Vec<&'static FaultFamily>> = OnceLock::new();
        SORTED.get_or_init(|| {
            let mut registered: Vec<&Registered> = FAULT_FAMILIES.iter().collect();
            registered.sort_by_key(|r| (r.place, r.family.kind));
            registered.into_iter().map(|r| r.family).collect()
        })
    }

    /// The field of a rolling fault's opening op that names its second wave's nodes
    /// ([`FaultFamily::rolls`]); a family that rolls declares it among its `fields`.
    pub const THEN_NODES: &'static str = "then_nodes";

    /// The field of a fault's opening op that says which clocks it moved, `all` when the
    /// monotonic clock too ([`FaultFamily::scoped`]); a scoped family declares it.
    pub const SCOPE: &'static str = "scope";

    /// The colour of a fault the report does not know the family of.
    pub const UNKNOWN_COLOUR: &'static str = "#868e96";

    /// How a family this build does not know (a history from a newer nemesis) is read: its
    /// faults grey, counted as exercised by a lease live during one, one cell per node it
    /// names. Its kind and ops are blank: an op of it reads by the convention.
    pub const UNKNOWN: FaultFamily = FaultFamily {
        kind: "",
        opens: "",
        closes: "",
        colour: FaultFamily::UNKNOWN_COLOUR,
        aim: Aim::LeaseLiveDuring,
        variant_field: "",
        per_role: true,
        rolls: false,
        scoped: false,
        fields: &[],
    };

    /// The family of `kind`, if this build knows it.
    pub fn named(kind: &str) -> Option<&'static FaultFamily> {
        FaultFamily::all().iter().copied().find(|f| f.kind == kind)
    }

    /// Whether its faults are client stalls ([`Aim::ClientStall`]).
    pub fn stalls_clients(&self) -> bool {
        self.aim == Aim::ClientStall
    }

    /// Whether its faults move clocks ([`Aim::ClockUnderLease`]).
    pub fn moves_clocks(&self) -> bool {
        self.aim == Aim::ClockUnderLease
    }

    /// The colour of `kind`'s faults in the report (grey for a kind this build does not know).
    pub fn colour_of(kind: &str) -> &'static str {
        FaultFamily::named(kind).map_or(FaultFamily::UNKNOWN_COLOUR, |f| f.colour)
    }
}

/// What one nemesis op does to the faults in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp<'a> {
    /// Opens a fault of this kind (`start-pause` opens `pause`, `kill` opens `kill`).
    Opens(&'a str),
    /// Closes a fault of this kind (`stop-pause`, `restart`).
    Closes(&'a str),
    /// Neither: an event of no duration.
    Instant,
}

impl<'a> FaultOp<'a> {
    /// How the history names the nemesis op `f`.
    pub fn of(f: &'a str) -> FaultOp<'a> {
        for family in FaultFamily::all() {
            if f == family.opens {
                return FaultOp::Opens(family.kind);
            }
            if f == family.closes {
                return FaultOp::Closes(family.kind);
            }
        }
        // A family this build does not know (a history from a newer nemesis): the convention.
        if let Some(kind) = f.strip_prefix("start-") {
            FaultOp::Opens(kind)
        } else if let Some(kind) = f.strip_prefix("stop-") {
            FaultOp::Closes(kind)
        } else {
            FaultOp::Instant
        }
    }

    /// The family of the fault this op opens, if it opens one of a family this build knows.
    pub fn opened_family(self) -> Option<&'static FaultFamily> {
        match self {
            FaultOp::Opens(kind) => FaultFamily::named(kind),
            _ => None,
        }
    }

    /// The kind this op opens or closes, if it does either.
    pub fn kind(self) -> Option<&'a str> {
        match self {
            FaultOp::Opens(k) | FaultOp::Closes(k) => Some(k),
            FaultOp::Instant => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an op of no family this build knows reads as (this crate's unit tests link no
    /// family of the nemesis, only coverage.rs's fixture: history/tests/families.rs reads the
    /// real ones).
    #[test]
    fn an_op_of_a_family_not_linked_reads_by_the_convention() {
        assert!(FaultFamily::named("flood").is_none());
        for (f, want) in [
            ("start-flood", FaultOp::Opens("flood")),
            ("stop-flood", FaultOp::Closes("flood")),
            ("clock-observed", FaultOp::Instant),
            ("start", FaultOp::Instant),
            ("killed", FaultOp::Instant),
        ] {
            assert_eq!(FaultOp::of(f), want, "{f}");
        }
        assert_eq!(FaultOp::of("stop-flood").kind(), Some("flood"));
        assert_eq!(FaultOp::of("clock-observed").kind(), None);
        assert_eq!(FaultOp::of("start-flood").opened_family(), None);
        assert_eq!(FaultFamily::colour_of("flood"), FaultFamily::UNKNOWN_COLOUR);
    }
}
