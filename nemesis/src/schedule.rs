//! The fault schedule as data: which fault starts when, how long it lasts, which nodes it hits
//! and how (cuts, clock changes, stall lengths). [`plan`] draws all of it from the seed before
//! the run; the runner only interprets it. `schedule.json` in a run directory is the plan
//! (see [`file`] for the format), and `lockpick run --schedule FILE` replays one.
//!
//! What is common to every fault is here (its kind, id, start, length, nodes, the targets,
//! the rounds); what is a family's own (its [`Payload`] and types, what the plan draws for it,
//! its keys in the file) is in its module of [`crate::fault`], re-exported here.

pub(crate) mod file;

pub use crate::fault::client_pause::{
    parse_client_faults, ClientFault, ClientFaults, StallAim, WakeOp,
};
pub use crate::fault::clock::{parse_clock_modes, ClockFault, ClockMode};
pub use crate::fault::partition::{parse_topologies, PartitionFault, Topology};
pub use crate::fault::{FaultKind, Payload};
pub use file::{node_id, Capabilities, ScheduleError, SCHEDULE_VERSION};

/// The plan's file in a run directory.
pub const SCHEDULE_FILE: &str = "schedule.json";

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::str::FromStr;

/// Which nodes a node fault hits, as Jepsen's nemesis targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Targets {
    One,
    /// Fewer than half (at least one).
    Minority,
    /// More than half.
    Majority,
    All,
    /// The node holding the lock state.
    Primary,
}

impl FromStr for Targets {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "one" => Ok(Targets::One),
            "minority" => Ok(Targets::Minority),
            "majority" => Ok(Targets::Majority),
            "all" => Ok(Targets::All),
            "primary" => Ok(Targets::Primary),
            _ => Err(format!(
                "unknown target {s:?} (expected one, minority, majority, all, primary)"
            )),
        }
    }
}

/// As `--nemesis-targets` takes it.
impl fmt::Display for Targets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Targets::One => "one",
            Targets::Minority => "minority",
            Targets::Majority => "majority",
            Targets::All => "all",
            Targets::Primary => "primary",
        })
    }
}

impl Targets {
    /// Picks the node positions (0-based, sorted) for one fault among `n` nodes; `primary` is
    /// the primary's position. Seeded by the caller's rng, so a schedule replays exactly.
    pub fn pick(self, n: usize, primary: usize, rng: &mut impl Rng) -> Vec<usize> {
        assert!(
            n > 0 && primary < n,
            "targets among {n} nodes, primary {primary}"
        );
        let count = match self {
            Targets::One => 1,
            Targets::Minority => ((n - 1) / 2).max(1),
            Targets::Majority => n / 2 + 1,
            Targets::All => n,
            Targets::Primary => return vec![primary],
        };
        let mut all: Vec<usize> = (0..n).collect();
        all.shuffle(rng);
        let mut picked: Vec<usize> = all.into_iter().take(count).collect();
        picked.sort_unstable();
        picked
    }
}

impl FaultKind {
    /// Every kind's name, in `--nemesis` order, for messages: `pause, kill, ...`.
    pub fn names() -> String {
        FaultKind::ALL.map(FaultKind::as_str).join(", ")
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FaultKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown fault {s:?} (expected {}, or none)",
                    FaultKind::names()
                )
            })
    }
}

/// Parses `--nemesis`: a comma-separated list of faults, or `none`. Duplicates collapse.
pub fn parse_fault_list(s: &str) -> Result<Vec<FaultKind>, String> {
    let s = s.trim();
    if s == "none" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        if part.trim() == "none" {
            return Err(format!(
                "{s:?} contradicts itself: `none` means a run without faults, alone; list \
                 faults without it"
            ));
        }
        let k: FaultKind = part.trim().parse()?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err("empty fault list (use `none` for a run without faults)".into());
    }
    Ok(out)
}

#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    pub seed: u64,
    pub faults: Vec<FaultKind>,
    /// Quiet time between one fault's end and the next one's start (jittered ±50%). Also how
    /// long a client-pause request waits for a holder before it lapses.
    pub interval_ms: u64,
    /// No fault starts after this; the last one is cut at this point by the final heal.
    pub duration_ms: u64,
    /// The lease length: fault lengths are chosen around it, because a fault shorter than a
    /// lease tests little and one far longer only idles the run.
    pub ttl_ms: u64,
    /// The clock faults to draw from (empty: every mode).
    pub clock_modes: Vec<ClockMode>,
    /// The partition topologies to draw from (empty: every one).
    pub topologies: Vec<Topology>,
    /// The lock service's nodes (0 for a service the harness did not start: then only
    /// client-side faults can be planned).
    pub nodes: usize,
    /// The position of the node holding the lock state (for `--nemesis-targets primary`).
    pub primary: usize,
    /// Which nodes a node fault hits.
    pub targets: Targets,
    /// How far a clock bump or strobe jumps.
    pub clock_bump_ms: u64,
    /// How much faster (fast) or slower (slow: 1/rate) a skewed clock runs.
    pub clock_rate: f64,
    /// The client-pause shapes to draw from (`--client-faults`; empty lists: all).
    pub client_faults: ClientFaults,
}

/// One planned fault: everything about it, drawn before the run. Node positions are 0-based
/// here and written as node ids (`n1` is position 0) in `schedule.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFault {
    /// Stable within a schedule (`f1`, `f2`, ...): every history op of the fault carries it.
    pub id: String,
    /// Start, in ms since the test started.
    pub at_ms: u64,
    /// How long it lasts: the pause, the stall, the skew, the cut, or the downtime before the
    /// restart.
    pub length_ms: u64,
    /// The nodes a pause, kill, clock or netem fault hits (empty for a partition, whose cut
    /// names its nodes, and for a client-pause).
    pub nodes: Vec<usize>,
    /// Its family's own part: which family it is and what that family needs.
    pub payload: Payload,
}

impl PlannedFault {
    pub fn kind(&self) -> FaultKind {
        self.payload.kind()
    }

    /// The fault with the positions `was` and `now` traded in every target (paused, killed,
    /// stepped, cut off): planned when `was` was the primary, carried out when `now` is.
    #[must_use]
    pub fn with_primary(&self, was: usize, now: usize) -> PlannedFault {
        let swap = |i: usize| match i {
            i if i == was => now,
            i if i == now => was,
            i => i,
        };
        let mut f = self.clone();
        for i in &mut f.nodes {
            *i = swap(*i);
        }
        f.payload.renumber(&swap);
        f
    }
}

/// A plan: the faults, and the cluster they were drawn for. `schedule.json` in a run
/// directory is this, written by [`Schedule::to_json`] and read by [`Schedule::parse`].
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The seed the plan was drawn from (a note: a replay takes the faults as they are).
    pub seed: Option<u64>,
    /// How many nodes it was drawn for.
    pub nodes: usize,
    /// The primary's position when it was drawn.
    pub primary: usize,
    /// Whether the faults were aimed at roles: a run whose primary is elsewhere moves them
    /// there ([`Schedule::with_primary`]) instead of hitting the nodes named.
    pub by_role: bool,
    pub faults: Vec<PlannedFault>,
}

/// A bound on the plan's size, whatever the flags: a schedule is for humans to read, too.
pub const MAX_FAULTS: usize = 10_000;

impl Schedule {
    /// The same faults for a deployment whose primary is at `primary`, for a plan aimed at
    /// roles (`by_role`; else the plan itself): the positions of the primary the plan was
    /// drawn for and of the deployed one trade places in every target
    /// (paused, killed, stepped, cut off), so each fault keeps the role it was planned for.
    /// A service that elects its leader (a ZooKeeper ensemble) has it wherever the election
    /// put it; a fault planned for "the primary" is about the node that leads.
    pub fn with_primary(&self, primary: usize) -> Schedule {
        let was = self.primary;
        if !self.by_role || was == primary || primary >= self.nodes || was >= self.nodes {
            return self.clone();
        }
        let mut out = self.clone();
        out.primary = primary;
        for f in &mut out.faults {
            *f = f.with_primary(was, primary);
        }
        out
    }
}

/// A stream of its own for targets and cuts, drawn fault by fault in plan order: the same
/// draws the nemesis made while it ran when targets were picked during execution, so a seed
/// still gives the faults it gave then.
const TARGET_STREAM: u64 = 0x7461_7267_6574_7321;

/// A stream of its own for client-pause shapes, so adding them changed no other fault a seed
/// draws.
const CLIENT_STREAM: u64 = 0x636C_6965_6E74_7321;

/// The seeded plan's random streams, and what each family's draw reads from its config.
pub(crate) struct Draws<'a> {
    pub(crate) cfg: &'a ScheduleConfig,
    /// The main stream: the rounds' order, each fault's length then its family's choices (a
    /// clock's mode, a partition's topology), and the quiet intervals.
    pub(crate) rng: ChaCha8Rng,
    /// Targets and cuts, fault by fault in plan order.
    pub(crate) targets_rng: ChaCha8Rng,
    /// Client-pause shapes.
    pub(crate) client_rng: ChaCha8Rng,
    /// The lease (at least 1 ms): fault lengths are drawn around it.
    pub(crate) ttl_ms: u64,
    /// The quiet interval (at least 1 ms).
    pub(crate) interval_ms: u64,
}

/// What a family draws for one fault of a seeded plan.
pub(crate) struct Drawn {
    pub(crate) length_ms: u64,
    pub(crate) nodes: Vec<usize>,
    pub(crate) payload: Payload,
    /// How long the service needs after the fault, before the next one's quiet interval.
    pub(crate) recovery_ms: u64,
}

/// The seeded plan: faults one at a time, each followed by a quiet interval (and, after a
/// kill, time for the service's recovery), with every target, cut, clock change and stall
/// length drawn here: the targets here, the rest by each fault's family
/// (`crate::fault::draw`). The same config always yields the same plan.
pub fn plan(cfg: &ScheduleConfig) -> Schedule {
    let mut out = Schedule {
        seed: Some(cfg.seed),
        nodes: cfg.nodes,
        primary: cfg.primary,
        by_role: false,
        faults: Vec::new(),
    };
    if cfg.faults.is_empty() {
        return out;
    }
    let mut d = Draws {
        cfg,
        rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x6E65_6D65_7369_7321),
        targets_rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ TARGET_STREAM),
        client_rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ CLIENT_STREAM),
        ttl_ms: cfg.ttl_ms.max(1),
        interval_ms: cfg.interval_ms.max(1),
    };
    let mut t = jitter(&mut d.rng, d.interval_ms);
    // Faults come in rounds, each a random order of every chosen fault, so a short run still
    // exercises each of them and no kind is starved by chance.
    let mut round: Vec<FaultKind> = Vec::new();
    while t < cfg.duration_ms && out.faults.len() < MAX_FAULTS {
        if round.is_empty() {
            round = cfg.faults.clone();
            round.shuffle(&mut d.rng);
        }
        let kind = round.pop().expect("refilled above");
        // The targets are the first draw of their own stream for the fault, so the family's
        // draws from the other streams may come after them.
        let picked = if kind.is_server_side() && cfg.nodes > 0 {
            cfg.targets.pick(
                cfg.nodes,
                cfg.primary.min(cfg.nodes - 1),
                &mut d.targets_rng,
            )
        } else {
            Vec::new()
        };
        let drawn = kind.draw(&mut d, picked);
        debug_assert_eq!(drawn.payload.kind(), kind);
        out.faults.push(PlannedFault {
            id: format!("f{}", out.faults.len() + 1),
            at_ms: t,
            length_ms: drawn.length_ms,
            nodes: drawn.nodes,
            payload: drawn.payload,
        });
        t += drawn.length_ms + drawn.recovery_ms + jitter(&mut d.rng, d.interval_ms);
    }
    out
}

fn jitter(rng: &mut ChaCha8Rng, ms: u64) -> u64 {
    rng.random_range(ms / 2..=ms + ms / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(seed: u64) -> ScheduleConfig {
        ScheduleConfig {
            seed,
            faults: FaultKind::ALL.to_vec(),
            interval_ms: 3000,
            duration_ms: 30_000,
            ttl_ms: 2000,
            clock_modes: vec![],
            topologies: vec![],
            nodes: 3,
            primary: 0,
            targets: Targets::One,
            clock_bump_ms: 6000,
            clock_rate: 4.0,
            client_faults: ClientFaults::default(),
        }
    }

    #[test]
    fn a_plan_moved_to_another_primary_keeps_each_faults_role() {
        for seed in 0..20 {
            let drawn = Schedule {
                by_role: true,
                ..plan(&cfg(seed))
            };
            let moved = drawn.with_primary(2);
            assert_eq!(moved.primary, 2);
            assert_eq!(moved.with_primary(0), drawn, "seed {seed}");
            for (d, m) in drawn.faults.iter().zip(&moved.faults) {
                let role = |nodes: &[usize], primary: usize| {
                    nodes.iter().map(|&i| i == primary).collect::<Vec<_>>()
                };
                assert_eq!(role(&d.nodes, 0), role(&m.nodes, 2), "{d:?} {m:?}");
                assert_eq!(d.nodes.contains(&1), m.nodes.contains(&1));
                if let (Some(dp), Some(mp)) = (d.partition(), m.partition()) {
                    let cut_off = |p: &PartitionFault, i: usize| {
                        p.cut.iter().filter(|(a, b)| *a == i || *b == i).count()
                    };
                    assert_eq!(cut_off(dp, 0), cut_off(mp, 2));
                    assert_eq!(cut_off(dp, 2), cut_off(mp, 0));
                    assert!(mp.cut.iter().all(|(a, b)| a < b), "{mp:?}");
                }
            }
        }
        // Nothing to move: faults aimed at nodes, the same primary, or one beyond the nodes.
        let drawn = plan(&cfg(1));
        assert_eq!(drawn.with_primary(2), drawn);
        let drawn = Schedule {
            by_role: true,
            ..drawn
        };
        assert_eq!(drawn.with_primary(0), drawn);
        assert_eq!(drawn.with_primary(7), drawn);
    }

    #[test]
    fn same_seed_same_plan_other_seed_other_plan() {
        assert_eq!(plan(&cfg(7)), plan(&cfg(7)));
        assert_ne!(plan(&cfg(7)), plan(&cfg(8)));
    }

    #[test]
    fn faults_do_not_overlap_and_start_within_the_run() {
        for seed in 0..50 {
            let p = plan(&cfg(seed)).faults;
            assert!(!p.is_empty());
            for w in p.windows(2) {
                assert!(w[0].at_ms + w[0].length_ms < w[1].at_ms, "{w:?}");
                if w[0].kind() == FaultKind::Kill {
                    assert!(w[0].at_ms + w[0].length_ms + 4000 <= w[1].at_ms, "{w:?}");
                }
            }
            assert!(p.iter().all(|f| f.at_ms < 30_000));
            let stalls = p.iter().filter(|f| f.kind() == FaultKind::ClientPause);
            assert!(stalls.clone().all(|f| f.length_ms > 2000));
            assert!(p
                .iter()
                .all(|f| f.clock().is_some() == (f.kind() == FaultKind::Clock)));
        }
    }

    #[test]
    fn every_fault_is_data_before_the_run() {
        for seed in 0..50 {
            let p = plan(&cfg(seed));
            assert_eq!((p.nodes, p.primary, p.seed), (3, 0, Some(seed)));
            for (i, f) in p.faults.iter().enumerate() {
                assert_eq!(f.id, format!("f{}", i + 1));
                match f.kind() {
                    FaultKind::Pause | FaultKind::Kill | FaultKind::Netem => {
                        assert_eq!(f.nodes.len(), 1, "{f:?}")
                    }
                    FaultKind::Clock => {
                        let c = f.clock().unwrap();
                        assert_eq!(f.nodes.len(), 1);
                        match c.mode {
                            ClockMode::BumpBack => assert_eq!(c.delta_ms, Some(-6000)),
                            ClockMode::Slow => assert_eq!(c.rate, Some(0.25)),
                            ClockMode::Fast => assert_eq!(c.rate, Some(4.0)),
                            _ => assert_eq!(c.delta_ms, Some(6000)),
                        }
                    }
                    FaultKind::Partition => {
                        let c = f.partition().unwrap();
                        assert!(f.nodes.is_empty());
                        assert!(!c.cut.is_empty() || !c.clients_cut_from.is_empty(), "{f:?}");
                    }
                    FaultKind::ClientPause => {
                        assert!(f.nodes.is_empty());
                        assert_eq!(f.window_ms(), Some(3000));
                    }
                }
                assert_eq!(f.netem().is_some(), f.kind() == FaultKind::Netem);
            }
        }
        // Without nodes (a --url target) only client-side faults plan targets: none.
        let p = plan(&ScheduleConfig {
            nodes: 0,
            faults: vec![FaultKind::ClientPause],
            ..cfg(1)
        });
        assert!(p.faults.iter().all(|f| f.nodes.is_empty()));
    }

    #[test]
    fn client_pauses_draw_their_shape_from_the_chosen_ones() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..40 {
            let all = plan(&cfg(seed));
            for f in all
                .faults
                .iter()
                .filter(|f| f.kind() == FaultKind::ClientPause)
            {
                let c = f.client().expect("every drawn client-pause has a shape");
                assert_eq!(c.wake.is_none(), c.aim == StallAim::Waiter, "{f:?}");
                let aimed = matches!(c.aim, StallAim::Boundary | StallAim::NextGrant);
                assert_eq!(aimed, c.after_ms > 0, "{f:?}");
                assert!(c.after_ms <= 200 && c.after_ms < f.length_ms, "{f:?}");
                seen.insert((c.aim, c.wake));
            }
            assert!(all
                .faults
                .iter()
                .all(|f| f.client().is_some() == (f.kind() == FaultKind::ClientPause)));
            // Choosing shapes changes no other fault of the seed.
            let chosen = ScheduleConfig {
                client_faults: parse_client_faults("boundary,renew").unwrap(),
                ..cfg(seed)
            };
            let only = plan(&chosen);
            assert_eq!(only.faults.len(), all.faults.len());
            for (a, b) in all.faults.iter().zip(&only.faults) {
                assert_eq!(
                    (a.kind(), a.at_ms, a.length_ms, &a.nodes),
                    (b.kind(), b.at_ms, b.length_ms, &b.nodes)
                );
                if let Some(c) = b.client() {
                    assert_eq!((c.aim, c.wake), (StallAim::Boundary, Some(WakeOp::Renew)));
                }
            }
        }
        // Over 40 seeds every aim and every wake-up op comes up.
        for aim in StallAim::ALL {
            assert!(seen.iter().any(|(a, _)| *a == aim), "{aim} never drawn");
        }
        for wake in WakeOp::ALL {
            assert!(
                seen.iter().any(|(_, w)| *w == Some(wake)),
                "{wake} never drawn"
            );
        }
    }

    #[test]
    fn parses_client_fault_lists() {
        let c = parse_client_faults("waiter, renew,boundary,renew").unwrap();
        assert_eq!(c.aims, vec![StallAim::Waiter, StallAim::Boundary]);
        assert_eq!(c.wakes, vec![WakeOp::Renew]);
        assert_eq!(c.names(), vec!["waiter", "boundary", "renew"]);
        let e = parse_client_faults("boundary,nap").unwrap_err();
        assert!(
            e.starts_with("unknown client fault \"nap\" (expected boundary, next-grant"),
            "{e}"
        );
    }

    /// What a mutex holder wakes into: every wake-up op (an empty list) is a renew or a
    /// release, and a read or a write is the release it does instead.
    #[test]
    fn a_holder_without_data_wakes_into_renews_and_releases() {
        let cases: [(&str, &[WakeOp]); 4] = [
            ("long", &[WakeOp::Renew, WakeOp::Release]),
            ("write,read", &[WakeOp::Release]),
            ("read,renew,release", &[WakeOp::Release, WakeOp::Renew]),
            ("renew", &[WakeOp::Renew]),
        ];
        for (asked, want) in cases {
            let c = parse_client_faults(asked).unwrap();
            let got = c.without_data();
            assert_eq!(got.wakes, want, "{asked}");
            assert_eq!(got.aims, c.aims, "{asked}");
            assert!(!got.names_data_ops(), "{asked}");
        }
    }

    #[test]
    fn every_chosen_fault_appears_once_per_round() {
        for seed in 0..50 {
            let p = plan(&cfg(seed)).faults;
            for round in p.chunks(6).filter(|r| r.len() == 6) {
                let mut kinds: Vec<_> = round.iter().map(|f| f.kind()).collect();
                kinds.sort();
                assert_eq!(kinds, FaultKind::ALL.to_vec(), "seed {seed}");
            }
        }
    }

    #[test]
    fn targets_pick_the_right_counts() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for n in 1..=7 {
            assert_eq!(Targets::One.pick(n, 0, &mut rng).len(), 1);
            assert_eq!(
                Targets::All.pick(n, 0, &mut rng),
                (0..n).collect::<Vec<_>>()
            );
            let min = Targets::Minority.pick(n, 0, &mut rng);
            assert!(
                !min.is_empty() && (n == 1 || min.len() * 2 < n + 1),
                "{n}: {min:?}"
            );
            assert!(Targets::Majority.pick(n, 0, &mut rng).len() * 2 > n);
            assert_eq!(Targets::Primary.pick(n, n - 1, &mut rng), vec![n - 1]);
        }
        assert!("most".parse::<Targets>().is_err());
    }

    /// Each family says what it needs: every fault but a client's stall acts on the service's
    /// processes, and only the network faults need namespaces.
    #[test]
    fn what_each_kind_needs() {
        for k in FaultKind::ALL {
            assert_eq!(k.is_server_side(), k != FaultKind::ClientPause, "{k}");
            assert_eq!(
                k.needs_netns(),
                matches!(k, FaultKind::Partition | FaultKind::Netem),
                "{k}"
            );
        }
    }

    /// A family's facts agree with history's table of it, and the families that need nothing
    /// of this machine are the ones every run may draw.
    #[test]
    fn each_kinds_facts_agree_with_its_history_entry() {
        for k in FaultKind::ALL {
            assert_eq!(k.as_str(), k.family().kind);
            assert_eq!(k.moves_clocks(), k.family().moves_clocks(), "{k}");
            assert_eq!(k.as_str().parse::<FaultKind>(), Ok(k));
        }
        let plain: Vec<&str> = FaultKind::ALL
            .into_iter()
            .filter(|k| k.needs_nothing_here())
            .map(FaultKind::as_str)
            .collect();
        assert_eq!(plain, ["pause", "kill", "client-pause"]);
        assert_eq!(
            FaultKind::ALL.map(FaultKind::recovery_leases),
            [0, 2, 0, 0, 0, 0]
        );
    }

    #[test]
    fn parses_fault_lists() {
        assert_eq!(parse_fault_list("none").unwrap(), vec![]);
        assert_eq!(
            parse_fault_list("kill, pause,kill").unwrap(),
            vec![FaultKind::Kill, FaultKind::Pause]
        );
        let e = parse_fault_list("pause,partiton").unwrap_err();
        assert!(e.contains("partiton"), "{e}");
        assert_eq!(
            e,
            "unknown fault \"partiton\" (expected pause, kill, client-pause, clock, partition, \
             netem, or none)"
        );
        assert!(parse_fault_list("").is_err());
        assert!(plan(&ScheduleConfig {
            faults: vec![],
            ..cfg(1)
        })
        .faults
        .is_empty());
    }
}
