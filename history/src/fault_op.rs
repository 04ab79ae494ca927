//! The nemesis's ops as a history names them: which open a fault and which close one, and the
//! kind each is about. One reading of the op names, for every crate that pairs a fault's start
//! with its end (the checkers' fault windows, the report's fault bands, coverage): each fault
//! family's names are in [`FaultFamily::ALL`], where the nemesis's families take them from (a
//! test of the nemesis checks that every family it has is there, under its kind). An op of a
//! family this build does not know reads by the convention the families follow, `start-<kind>`
//! and `stop-<kind>`; anything else the nemesis writes (`clock-observed`) is an instant, what a
//! fault was seen to do.

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
    /// client between ops, so it holds back nothing the service does.
    ClientStall,
}

impl FaultFamily {
    pub const PAUSE: FaultFamily = FaultFamily {
        kind: "pause",
        opens: "start-pause",
        closes: "stop-pause",
        colour: "#f08c00",
        aim: Aim::FrozenPastLeaseBound,
        variant_field: "",
        per_role: true,
        rolls: false,
        scoped: false,
    };
    pub const KILL: FaultFamily = FaultFamily {
        kind: "kill",
        opens: "kill",
        closes: "restart",
        colour: "#e03131",
        aim: Aim::BackBeforeLeaseEnds,
        variant_field: "",
        per_role: true,
        rolls: true,
        scoped: false,
    };
    pub const CLIENT_PAUSE: FaultFamily = FaultFamily {
        kind: "client-pause",
        opens: "start-client-pause",
        closes: "stop-client-pause",
        colour: "#d6a400",
        aim: Aim::ClientStall,
        variant_field: "",
        per_role: true,
        rolls: false,
        scoped: false,
    };
    pub const CLOCK: FaultFamily = FaultFamily {
        kind: "clock",
        opens: "start-clock",
        closes: "stop-clock",
        colour: "#1c7ed6",
        aim: Aim::ClockUnderLease,
        variant_field: "mode",
        per_role: true,
        rolls: false,
        scoped: true,
    };
    pub const PARTITION: FaultFamily = FaultFamily {
        kind: "partition",
        opens: "start-partition",
        closes: "stop-partition",
        colour: "#7048e8",
        aim: Aim::LeaseLiveDuring,
        variant_field: "topology",
        per_role: false,
        rolls: false,
        scoped: false,
    };
    pub const NETEM: FaultFamily = FaultFamily {
        kind: "netem",
        opens: "start-netem",
        closes: "stop-netem",
        colour: "#0ca678",
        aim: Aim::LeaseLiveDuring,
        variant_field: "",
        per_role: false,
        rolls: false,
        scoped: false,
    };

    /// Every family a history of this build may hold.
    pub const ALL: [FaultFamily; 6] = [
        FaultFamily::PAUSE,
        FaultFamily::KILL,
        FaultFamily::CLIENT_PAUSE,
        FaultFamily::CLOCK,
        FaultFamily::PARTITION,
        FaultFamily::NETEM,
    ];

    /// The colour of a fault the report does not know the family of.
    pub const UNKNOWN_COLOUR: &'static str = "#868e96";

    /// The family of `kind`, if this build knows it.
    pub fn named(kind: &str) -> Option<&'static FaultFamily> {
        FaultFamily::ALL.iter().find(|f| f.kind == kind)
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
        for family in &FaultFamily::ALL {
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

    #[test]
    fn each_op_name_reads_as_what_it_does() {
        for (f, want) in [
            ("start-pause", FaultOp::Opens("pause")),
            ("stop-pause", FaultOp::Closes("pause")),
            ("start-client-pause", FaultOp::Opens("client-pause")),
            ("kill", FaultOp::Opens("kill")),
            ("restart", FaultOp::Closes("kill")),
            ("clock-observed", FaultOp::Instant),
            ("start", FaultOp::Instant),
            ("killed", FaultOp::Instant),
        ] {
            assert_eq!(FaultOp::of(f), want, "{f}");
        }
        assert_eq!(FaultOp::of("restart").kind(), Some("kill"));
        assert_eq!(FaultOp::of("clock-observed").kind(), None);
        // A family this build does not know reads by the convention.
        assert_eq!(FaultOp::of("start-flood"), FaultOp::Opens("flood"));
        assert_eq!(FaultOp::of("stop-flood"), FaultOp::Closes("flood"));
    }

    /// Every family but kill follows the convention, no op name is another's, and each
    /// family has its own colour.
    #[test]
    fn the_families_names_are_apart() {
        let mut names = std::collections::BTreeSet::new();
        let mut colours = std::collections::BTreeSet::new();
        for f in FaultFamily::ALL {
            if f != FaultFamily::KILL {
                assert_eq!(f.opens, format!("start-{}", f.kind));
                assert_eq!(f.closes, format!("stop-{}", f.kind));
            }
            assert!(names.insert(f.kind), "{f:?}");
            assert!(names.insert(f.opens) || f.opens == f.kind, "{f:?}");
            assert!(names.insert(f.closes), "{f:?}");
            assert!(colours.insert(f.colour), "{f:?}");
            assert_eq!(FaultFamily::named(f.kind), Some(&f));
            assert_eq!(FaultFamily::colour_of(f.kind), f.colour);
        }
        assert!(!colours.contains(FaultFamily::UNKNOWN_COLOUR));
        assert_eq!(FaultFamily::colour_of("flood"), FaultFamily::UNKNOWN_COLOUR);
    }
}
