//! The suite's plan: every cell the target allows (each clock direction on each node role,
//! each client-stall aim x wake-up op, pause and kill of each role, each partition topology,
//! contention on each workload), and the choice of the next scenario from what the finished
//! ones exercised. Pure: no I/O, no clock; `lockpick test` runs what it picks.
//!
//! A scenario aims instead of drawing: its faults are written as a schedule, one per cell it
//! covers, each sized from the lease so it can meet its target state (a stall that outlives
//! the lease, a pause longer than one, a kill followed by the recovery wait and a grant, a
//! clock change lasting several leases). Each fault family says which cells it has and how
//! its fault for one is sized (`FaultKind::suite_cells`, `FaultKind::aim`, in its module of
//! nemesis::fault); this plan packs them into scenarios.

use crate::flags;
use history::coverage::Cell;
use nemesis::scenario::{Aimed, CellPlan};
pub use nemesis::scenario::{Profile, Target};
use nemesis::schedule::{FaultKind, PlannedFault, Schedule};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use workloads::WorkloadKind;

/// A scenario's faults are packed until their planned time reaches this: short enough that a
/// violation stops the suite soon after it happens, long enough that start-up is not most of
/// the cost.
const SCENARIO_FAULTS_MS_MAX: u64 = 12_000;
/// A cell that was tried this many times without being exercised is given up on: the suite
/// says "requested, not exercised" for it rather than trying for ever.
pub const TRIES_MAX: u32 = 3;
/// What a run costs beyond its planned duration before the first one is measured (start-up,
/// probe, heal, quiet period, final reads, check, report).
pub const OVERHEAD_MS_GUESS: u64 = 4_000;

/// One cell of the plan: what the suite must see exercised, and how a scenario aims at it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCell {
    /// The coverage cell it counts (kind, variant, wake-up op, role), as results.json has it.
    pub cell: Cell,
    /// Lower runs first: cheap and likely to find something.
    pub rank: u32,
    /// How the clients behave in its scenario; a scenario packs cells of one profile.
    pub profile: Profile,
    /// The fault family that aims at it (`None`: a contention cell, no fault).
    pub family: Option<FaultKind>,
}

/// The odd lease length of [`Profile::OddTtl`]: a little under the target's, off any round
/// number (2000 ms -> 1893 ms, 500 ms -> 468 ms).
pub fn odd_ttl_ms(ttl_ms: u64) -> u64 {
    (ttl_ms - ttl_ms / 20).saturating_sub(7).max(11)
}

impl PlanCell {
    /// A family's cell (`None`: contention).
    fn of(family: Option<FaultKind>, c: CellPlan) -> PlanCell {
        PlanCell {
            cell: c.cell,
            rank: c.rank,
            profile: c.profile,
            family,
        }
    }

    pub fn label(&self) -> String {
        self.cell.label()
    }

    /// Whether a run's coverage cell counts for this plan cell.
    pub fn counts(&self, c: &Cell) -> bool {
        let p = &self.cell;
        // Any scope: the suite moves the clocks `--clock-scope` names.
        p.kind == c.kind && p.variant == c.variant && p.wake == c.wake && p.role == c.role
    }
}

/// A contention cell: no fault, its workload alone.
fn contention(variant: &str) -> PlanCell {
    let c = nemesis::scenario::cell(CONTENTION, variant, "", "", 0, Profile::Plain);
    PlanCell::of(None, c)
}

/// The kind name of contention cells: no fault, many clients on one lock.
pub const CONTENTION: &str = "contention";
/// The contention cell of the bank workload: exercised by a wait-for cycle that formed.
pub const BANK: &str = "bank";

/// How long the bank contention scenario's acquires may wait: a tenth of a lease.
fn bank_wait_ms(t: &Target) -> u64 {
    (t.lease_ms / 10).clamp(50, 500)
}

/// The bank contention scenario's flags: two accounts, opposite lock orders, short waits, and
/// leases and request timeouts longer than a wait plus the liveness grace, so a cycle no wait
/// breaks stands past its deadline (a `deadlock`) before any lease could lapse and break it.
fn bank_contention_flags(t: &Target) -> Vec<String> {
    let wait_ms = bank_wait_ms(t);
    let deadline_ms = wait_ms + t.liveness_grace_ms;
    let ttl_ms = t.lease_ms.max(deadline_ms * 2 + 1_000);
    [
        flags::WORKLOAD.with("bank"),
        flags::ACCOUNTS.with(2),
        flags::LOCK_ORDER_POLICY.with("random"),
        flags::NEMESIS.with("none"),
        flags::CLIENTS.with(6),
        flags::TTL.with(format!("{ttl_ms}ms")),
        flags::ACQUIRE_WAIT.with(format!("{wait_ms}ms")),
        flags::OP_TIMEOUT.with(format!("{}ms", t.liveness_grace_ms + 1_000)),
    ]
    .concat()
}

/// The contention cell of each workload the service can run, in plan order: the mutex
/// always; the counter where grants carry fencing tokens; the bank where they do and a client
/// can hold two locks at once. Transfers that hold one account's lock while they wait for the
/// other's, in either order, form wait-for cycles a correct service breaks (it refuses a wait
/// once it is over). Tokenless services run the bank too, but are not planned its cell yet:
/// how often their waits form a cycle is not measured (PostgreSQL's queued waits formed none
/// in one 10 s run of these flags), and a cell that may go unexercised is no verdict.
fn contention_cells(t: &Target) -> Vec<(WorkloadKind, PlanCell)> {
    [
        (WorkloadKind::Mutex, true),
        (WorkloadKind::Counter, t.fencing),
        (WorkloadKind::Bank, t.fencing && t.bank),
    ]
    .into_iter()
    .filter(|(_, runs)| *runs)
    .map(|(w, _)| (w, contention(w.as_str())))
    .collect()
}

/// Every cell the target allows, in the order the suite tries them: contention on each
/// workload, then each fault family's own cells (`FaultKind::suite_cells`), by rank.
///
/// `named`: the workload the user named (`--workload`, or `workload` in the config file).
/// Then only its own contention cell is planned: another workload's contention scenario would
/// run clients the user did not ask for, and its cell would count toward a verdict about them.
/// Unnamed, every workload the service can run has its cell (the fault scenarios run the
/// default workload).
pub fn cells(t: &Target, named: Option<WorkloadKind>) -> Vec<PlanCell> {
    let mut out: Vec<PlanCell> = contention_cells(t)
        .into_iter()
        .filter(|(w, _)| named.is_none_or(|n| n == *w))
        .map(|(_, c)| c)
        .collect();
    for kind in FaultKind::ALL.into_iter().filter(|k| t.kinds.contains(k)) {
        let own = kind.suite_cells(t).into_iter();
        out.extend(own.map(|c| PlanCell::of(Some(kind), c)));
    }
    // Stable: cells of one rank keep the order above.
    out.sort_by_key(|c| c.rank);
    out
}

/// The cells of the service's other workloads that naming `named` leaves out of the plan
/// (labels, in plan order): what the suite's verdict does not rest on. Empty when unnamed.
pub fn not_planned(t: &Target, named: Option<WorkloadKind>) -> Vec<String> {
    let Some(named) = named else {
        return Vec::new();
    };
    contention_cells(t)
        .into_iter()
        .filter(|(w, _)| *w != named)
        .map(|(_, c)| c.label())
        .collect()
}

/// What the suite knows of one cell so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Scenarios that aimed at it.
    pub tries: u32,
    /// Faults of it that started, over every scenario.
    pub started: u64,
    /// Of those, the ones that met their target state.
    pub exercised: u64,
}

/// A scenario: a short run aimed at some cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Positions in the plan's cells of the cells it aims at.
    pub aims: Vec<usize>,
    /// Flags that shape it beyond the base settings (`--workload mutex`, `--nemesis none`).
    pub flags: Vec<String>,
    /// Its faults, replayed with `--schedule`; `None` for a scenario without faults.
    pub schedule: Option<Schedule>,
    /// How its clients behave (the next scenario prefers another profile).
    pub profile: Profile,
    pub duration_ms: u64,
    pub seed: u64,
}

impl Scenario {
    /// A short name for its folder: its first cell whole, then each other kind of fault it
    /// aims at, once: `03-client-pause-boundary-renew`,
    /// `05-client-pause-boundary-write+2-more+pause+kill+clock` (two more stalls, a pause, a kill,
    /// a clock fault). "and 4 more" hid which faults a scenario held.
    pub fn slug(&self, index: usize, cells: &[PlanCell]) -> String {
        let first = &cells[self.aims[0]].cell;
        let mut s = format!("{index:02}-{}", first.kind);
        for part in [&first.variant, &first.wake, &first.role] {
            if !part.is_empty() {
                s.push('-');
                s.push_str(part);
            }
        }
        let rest = &self.aims[1..];
        let same = rest
            .iter()
            .filter(|&&i| cells[i].cell.kind == first.kind)
            .count();
        if same > 0 {
            s.push_str(&format!("+{same}-more"));
        }
        // Bounded by the scenario's aims; each other kind named once, in the plan's order.
        let mut named: Vec<&str> = vec![first.kind.as_str()];
        for &i in rest {
            let kind = cells[i].cell.kind.as_str();
            if !named.contains(&kind) {
                named.push(kind);
                s.push('+');
                s.push_str(kind);
            }
        }
        s
    }
}

/// Whether cell `i` still needs a scenario.
pub fn open(tally: &Tally, times: u64) -> bool {
    tally.exercised < times && tally.tries < TRIES_MAX
}

/// The next scenario: the open cells of the lowest rank first (contention cells alone, each
/// with its workload; fault cells packed into one schedule up to [`SCENARIO_FAULTS_MS_MAX`]),
/// or `None` when every cell is exercised `times` times or given up. `seed` seeds the
/// scenario (the run's workload and the few things drawn here: a stall's few ms past its
/// aim, a halves cut).
///
/// `previous` is the profile of the scenario before: while cells of another profile are open,
/// the next scenario takes those, so a long stall (short waits) or an odd lease is not left
/// until every plain cell is done.
pub fn next(
    t: &Target,
    cells: &[PlanCell],
    tallies: &[Tally],
    seed: u64,
    previous: Option<Profile>,
) -> Option<Scenario> {
    let open_cells: Vec<usize> = (0..cells.len())
        .filter(|&i| open(&tallies[i], t.times))
        .collect();
    let first = pick_first(cells, &open_cells, previous)?;
    if cells[first].cell.kind == CONTENTION {
        return Some(contention_scenario(t, &cells[first], first, seed));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7375_6974_6521);
    if let Some(s) = kill_again(t, cells, tallies, &open_cells, seed, &mut rng) {
        return Some(s);
    }
    fault_scenario(t, cells, &open_cells, cells[first].profile, seed, &mut rng)
}

/// The first open cell, unless the scenario before had its profile and a fault cell of
/// another profile is open: then that one.
fn pick_first(
    cells: &[PlanCell],
    open_cells: &[usize],
    previous: Option<Profile>,
) -> Option<usize> {
    let mut first = *open_cells.first()?;
    if let Some(prev) = previous {
        let other = open_cells
            .iter()
            .copied()
            .find(|&i| cells[i].cell.kind != CONTENTION && cells[i].profile != prev);
        if let (Some(o), true) = (other, cells[first].cell.kind != CONTENTION) {
            if cells[first].profile == prev {
                first = o;
            }
        }
    }
    Some(first)
}

/// A contention cell's scenario: no fault, its workload alone (the bank's own flags).
fn contention_scenario(t: &Target, c: &PlanCell, i: usize, seed: u64) -> Scenario {
    debug_assert_eq!(c.cell.kind, CONTENTION);
    if c.cell.variant == BANK {
        let wait_ms = bank_wait_ms(t);
        return Scenario {
            aims: vec![i],
            flags: bank_contention_flags(t),
            schedule: None,
            profile: Profile::Plain,
            // Cycles form within the first transfers; the deadline is a wait and the grace
            // past them.
            duration_ms: (wait_ms + t.liveness_grace_ms + 2_000).clamp(3_000, 12_000),
            seed,
        };
    }
    let workload = c.cell.variant.clone();
    // Many clients asking at once, each once a round: grants race, and a service that
    // lets two in is caught without any fault.
    let window_ms = (t.lease_ms / 4).clamp(50, 500);
    Scenario {
        aims: vec![i],
        flags: [
            flags::WORKLOAD.with(workload),
            flags::NEMESIS.with("none"),
            flags::CLIENTS.with(10),
            flags::ARRIVALS.with(format!("rounds:{window_ms}ms")),
        ]
        .concat(),
        schedule: None,
        profile: Profile::Plain,
        duration_ms: (t.lease_ms * 2).clamp(2_000, 4_000),
        seed,
    }
}

/// How many kinds of fault the open cells of `profile` hold.
fn open_kinds(cells: &[PlanCell], open_cells: &[usize], profile: Profile) -> usize {
    let mut k: Vec<&str> = open_cells
        .iter()
        .filter(|&&i| cells[i].profile == profile && cells[i].cell.kind != CONTENTION)
        .map(|&i| cells[i].cell.kind.as_str())
        .collect();
    k.sort_unstable();
    k.dedup();
    k.len()
}

/// The open fault cells of `profile` packed into one schedule up to
/// [`SCENARIO_FAULTS_MS_MAX`], one of each kind first; `None` if none yields a fault.
fn fault_scenario(
    t: &Target,
    cells: &[PlanCell],
    open_cells: &[usize],
    profile: Profile,
    seed: u64,
    rng: &mut ChaCha8Rng,
) -> Option<Scenario> {
    let kinds = open_kinds(cells, open_cells, profile);
    let ttl = match profile {
        Profile::OddTtl => odd_ttl_ms(t.lease_ms.max(10)),
        _ => t.lease_ms.max(10),
    };
    // Time for the clients to hold a lease again between faults.
    let gap_ms = (ttl / 2).max(300);
    let mut at_ms = gap_ms;
    let mut faults = Vec::new();
    let mut aims = Vec::new();
    // The first pass (one cell of each kind) always goes in, so every kind is met in every
    // scenario while it has open cells; more only while the scenario is short.
    for (n, i) in breadth_first(cells, open_cells, profile)
        .into_iter()
        .enumerate()
    {
        if n >= kinds && at_ms >= SCENARIO_FAULTS_MS_MAX {
            break;
        }
        let Some((f, after_ms)) = fault_for(t, &cells[i], at_ms, ttl, rng) else {
            continue;
        };
        let f = PlannedFault {
            id: format!("f{}", faults.len() + 1),
            ..f
        };
        at_ms = f.end_ms() + after_ms + gap_ms;
        faults.push(f);
        aims.push(i);
    }
    if faults.is_empty() {
        return None;
    }
    let faults_end_ms = faults.last().map_or(0, PlannedFault::end_ms);
    let flags = profile_flags(profile, ttl, faults_end_ms);
    Some(Scenario {
        aims,
        flags,
        profile,
        schedule: Some(Schedule {
            seed: Some(seed),
            nodes: t.nodes,
            primary: 0,
            // Aimed at roles: a ZooKeeper ensemble's leader is wherever its election put it.
            by_role: true,
            faults,
        }),
        // Past the last fault (and what must follow it: a kill's recovery and a grant, both in
        // `at_ms`), a lease for its effects to show.
        duration_ms: at_ms + ttl,
        seed,
    })
}

/// The flags of a scenario of `profile` whose lease is `ttl` and whose last fault ends at
/// `faults_end_ms`.
fn profile_flags(profile: Profile, ttl: u64, faults_end_ms: u64) -> Vec<String> {
    match profile {
        Profile::Plain => Vec::new(),
        Profile::ShortWait => short_wait(ttl),
        Profile::OddTtl => ttl_flags(ttl),
        // The first grant (made before the first fault) holds a lease past the last one and
        // two leases more, for the restarts (Debian's etcd takes 1.5-2.5 s each); waits are
        // short, so a grant after the faults is asked for after them (what a kill's cell
        // needs to be met), inside the recovery time the scenario leaves after a kill.
        Profile::LongHold => {
            let hold_ms = faults_end_ms + 2 * ttl;
            let mut hold = flags::HOLD
                .with(format!("{hold_ms}ms..{hold_ms}ms"))
                .to_vec();
            hold.extend(short_wait(ttl));
            hold
        }
    }
}

/// Acquires that wait at most half a lease.
fn short_wait(ttl: u64) -> Vec<String> {
    flags::ACQUIRE_WAIT
        .with(format!("{}ms", (ttl / 2).max(1)))
        .to_vec()
}

/// A lease of `ttl` for acquires and renews alike.
fn ttl_flags(ttl: u64) -> Vec<String> {
    [
        flags::TTL.with(format!("{ttl}ms")),
        flags::RENEW_TTL.with(format!("{ttl}ms")),
    ]
    .concat()
}

/// A kill that missed its state, tried again on its own with leases twice as long for each
/// miss (at most 16 times the default) and the first grant held past the restart (the first
/// try, packed with other faults, leaves that to holds of a few hundred ms): a node slower to
/// restart than a lease (Debian's etcd takes 1.5-2.5 s here, against the default 2 s lease) is
/// back only once every lease it granted is over, and then nothing it remembers is put to use
/// while it matters.
fn kill_again(
    t: &Target,
    cells: &[PlanCell],
    tallies: &[Tally],
    open_cells: &[usize],
    seed: u64,
    rng: &mut ChaCha8Rng,
) -> Option<Scenario> {
    let k = *open_cells
        .iter()
        .find(|&&i| cells[i].family.is_some_and(|f| f.retried_alone()) && tallies[i].tries > 0)?;
    let ttl = t.lease_ms.max(10) << tallies[k].tries.min(4);
    let gap_ms = (ttl / 2).max(300);
    let (f, after_ms) = fault_for(t, &cells[k], gap_ms, ttl, rng)?;
    let f = PlannedFault {
        id: "f1".into(),
        ..f
    };
    let end_ms = f.end_ms() + after_ms;
    let mut flags = ttl_flags(ttl);
    // A retry does not leave it to luck: the first grant holds past the restart.
    flags.extend(profile_flags(Profile::LongHold, ttl, f.end_ms()));
    Some(Scenario {
        aims: vec![k],
        flags,
        profile: cells[k].profile,
        duration_ms: end_ms + ttl,
        schedule: Some(Schedule {
            seed: Some(seed),
            nodes: t.nodes,
            primary: 0,
            by_role: true,
            faults: vec![f],
        }),
        seed,
    })
}

/// The open fault cells of `profile`, one of each kind in turn (kinds in plan order, each
/// kind's cells in plan order): a scenario then meets every kind early, so a bug that only one
/// kind exposes is not left waiting behind a dozen stall shapes.
fn breadth_first(cells: &[PlanCell], open_cells: &[usize], profile: Profile) -> Vec<usize> {
    let mut by_kind: Vec<(&str, std::collections::VecDeque<usize>)> = Vec::new();
    for &i in open_cells {
        let c = &cells[i];
        if c.cell.kind == CONTENTION || c.profile != profile {
            continue;
        }
        match by_kind.iter_mut().find(|(k, _)| *k == c.cell.kind) {
            Some((_, q)) => q.push_back(i),
            None => by_kind.push((&c.cell.kind, std::collections::VecDeque::from([i]))),
        }
    }
    let mut out = Vec::with_capacity(open_cells.len());
    // Bounded: each pass takes at least one cell until all are taken.
    while out.len() < open_cells.len() {
        let before = out.len();
        for (_, q) in by_kind.iter_mut() {
            out.extend(q.pop_front());
        }
        if out.len() == before {
            break;
        }
    }
    out
}

/// The fault aimed at `c`, starting at `at_ms`, and how long after it the scenario must go on
/// for it to meet its state (a kill's recovery wait and a grant). Each family sizes its own
/// (`FaultKind::aim`).
fn fault_for(
    t: &Target,
    c: &PlanCell,
    at_ms: u64,
    ttl: u64,
    rng: &mut ChaCha8Rng,
) -> Option<(PlannedFault, u64)> {
    // The node of the cell's role, for the families that hit one.
    let role_node = match c.cell.role.as_str() {
        "other" if t.nodes > 1 => vec![other_node(t.nodes, at_ms)],
        _ => vec![0],
    };
    let aimed: Aimed = c.family?.aim(t, &c.cell, role_node, ttl, rng)?;
    let fault = PlannedFault {
        id: String::new(),
        at_ms,
        length_ms: aimed.length_ms,
        nodes: aimed.nodes,
        payload: aimed.payload,
    };
    Some((fault, aimed.after_ms))
}

/// A node other than the primary (position 0), varied by the fault's start so repeated tries
/// do not always hit the same one (deterministic: the schedule is data either way).
fn other_node(nodes: usize, at_ms: u64) -> usize {
    1 + (at_ms as usize / 7) % (nodes - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nemesis::fault::client_pause::LEASE;
    use nemesis::schedule::Topology;

    fn target(kinds: &[FaultKind], nodes: usize) -> Target {
        Target {
            kinds: kinds.to_vec(),
            nodes,
            counter: true,
            fencing: true,
            bank: true,
            write_ends_grant: false,
            lease_ms: 1000,
            clock_bump_ms: 3000,
            clock_rate: 4.0,
            clock_modes: vec![],
            aims: vec![],
            wakes: vec![],
            topologies: vec![Topology::Isolate],
            times: 1,
            liveness_grace_ms: 2000,
        }
    }

    fn labels(cells: &[PlanCell]) -> Vec<String> {
        cells.iter().map(PlanCell::label).collect()
    }

    /// The rolling kill runs alone, its first grant holding past both waves, and a kill
    /// that missed is tried again with the same hold.
    #[test]
    fn a_rolling_kill_scenario_holds_past_both_waves() {
        let t = target(&[FaultKind::Kill], 3);
        let cells = cells(&t, None);
        let k = cells
            .iter()
            .position(|c| c.label() == "kill rolling")
            .expect("a rolling cell");
        let mut tallies = vec![Tally::default(); cells.len()];
        for (i, tally) in tallies.iter_mut().enumerate() {
            if i != k {
                tally.exercised = 1;
            }
        }
        for tries in [0, 1] {
            tallies[k].tries = tries;
            let s = next(&t, &cells, &tallies, 7, None).expect("a scenario");
            let f = &s.schedule.as_ref().unwrap().faults;
            assert_eq!(f.len(), 1, "{s:?}");
            assert_eq!(
                (f[0].nodes.clone(), f[0].then_nodes().to_vec()),
                (vec![2], vec![1])
            );
            let hold = s.flags.iter().position(|a| a == "--hold").expect("--hold");
            let ms: u64 = s.flags[hold + 1]
                .split("ms..")
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(ms > f[0].end_ms(), "{s:?}");
            assert!(s.duration_ms > ms, "{s:?}");
            assert!(s.flags.contains(&"--acquire-wait".to_string()), "{s:?}");
        }
    }

    /// A scenario's folder names its first cell whole and every other kind it aims at.
    #[test]
    fn a_scenarios_name_says_every_kind_of_fault_it_holds() {
        let all = [
            FaultKind::Pause,
            FaultKind::Kill,
            FaultKind::ClientPause,
            FaultKind::Clock,
        ];
        let cells = cells(&target(&all, 1), None);
        let at = |label: &str| {
            (cells.iter().position(|c| c.label() == label))
                .unwrap_or_else(|| panic!("no cell {label}: {:?}", labels(&cells)))
        };
        // (the aims by label, the name)
        let cases: &[(&[&str], &str)] = &[
            (
                &["client-pause boundary/renew"],
                "03-client-pause-boundary-renew",
            ),
            (
                &[
                    "client-pause boundary/write",
                    "client-pause long/read",
                    "pause on primary",
                    "client-pause next-grant/renew",
                    "kill on primary",
                    "clock bump-forward on primary",
                    "clock slow on primary",
                ],
                "03-client-pause-boundary-write+2-more+pause+kill+clock",
            ),
            (&["pause on primary"], "03-pause-primary"),
        ];
        for (aims, name) in cases {
            let aims: Vec<usize> = aims.iter().map(|l| at(l)).collect();
            let s = Scenario {
                profile: cells[aims[0]].profile,
                aims,
                flags: Vec::new(),
                schedule: None,
                duration_ms: 2000,
                seed: 1,
            };
            assert_eq!(s.slug(3, &cells), *name);
        }
    }

    #[test]
    fn the_plan_has_a_cell_per_direction_shape_and_role_the_target_allows() {
        let all = [
            FaultKind::Pause,
            FaultKind::Kill,
            FaultKind::ClientPause,
            FaultKind::Clock,
        ];
        let one = cells(&target(&all, 1), None);
        let l = labels(&one);
        assert_eq!(l[0], "contention mutex");
        // 3 contention + odd ttl + 12 holder stalls + waiter + kill + pause + 5 clock directions.
        assert_eq!(one.len(), 3 + 1 + 12 + 1 + 1 + 1 + 5, "{l:?}");
        assert!(l.contains(&"client-pause boundary/renew".to_string()));
        assert!(l.contains(&"clock slow on primary".to_string()));
        assert!(!l.iter().any(|c| c.contains("other")));
        let three = cells(&target(&all, 3), None);
        // + pause, kill and 5 clock directions on other, and the rolling kill.
        assert_eq!(three.len(), one.len() + 1 + 1 + 5 + 1);
        assert!(labels(&three).contains(&"kill on other".to_string()));
        assert!(labels(&three).contains(&"kill rolling".to_string()));
        // A mutex holder has no read or write to wake into.
        let mutex = cells(
            &Target {
                counter: false,
                fencing: true,
                write_ends_grant: false,
                ..target(&[FaultKind::ClientPause], 1)
            },
            None,
        );
        assert_eq!(mutex.len(), 3 + 1 + 3 * 2 + 1, "{:?}", labels(&mutex));
        // A write that commits the grant away (PostgreSQL's form=xact): no holder wakes into
        // a release, so no cell waits for one.
        let committing = cells(
            &Target {
                write_ends_grant: true,
                ..target(&[FaultKind::ClientPause], 1)
            },
            None,
        );
        let plain = cells(&target(&[FaultKind::ClientPause], 1), None);
        assert!(!labels(&committing).iter().any(|c| c.contains("/release")));
        assert_eq!(
            committing.len(),
            plain.len() - 3,
            "{:?}",
            labels(&committing)
        );
        // Only what the target allows: a --url target has client stalls only.
        let url = cells(&target(&[FaultKind::ClientPause], 1), None);
        assert!(url
            .iter()
            .all(|c| c.cell.kind != "kill" && c.cell.kind != "clock"));
    }

    /// A named workload plans its own contention cell only, and says which cells of the
    /// service's other workloads it left out; unnamed, each workload the service can run has
    /// its cell. The fault cells are the same either way (the fault scenarios run the
    /// target's workload, `Target::counter`).
    #[test]
    fn a_named_workload_plans_only_its_own_contention_cell() {
        let both = [FaultKind::ClientPause];
        let tokenless = Target {
            fencing: false,
            ..target(&both, 1)
        };
        // The target, the workload named, the contention cells planned, the cells left out.
        type Case<'a> = (
            &'a Target,
            Option<WorkloadKind>,
            &'a [&'a str],
            &'a [&'a str],
        );
        let cases: [Case; 6] = [
            (
                &target(&both, 1),
                None,
                &["contention mutex", "contention counter", "contention bank"],
                &[],
            ),
            (
                &target(&both, 1),
                Some(WorkloadKind::Mutex),
                &["contention mutex"],
                &["contention counter", "contention bank"],
            ),
            (
                &target(&both, 1),
                Some(WorkloadKind::Counter),
                &["contention counter"],
                &["contention mutex", "contention bank"],
            ),
            (
                &target(&both, 1),
                Some(WorkloadKind::Bank),
                &["contention bank"],
                &["contention mutex", "contention counter"],
            ),
            // A service without tokens runs the mutex only: nothing else to leave out.
            (&tokenless, None, &["contention mutex"], &[]),
            (
                &tokenless,
                Some(WorkloadKind::Mutex),
                &["contention mutex"],
                &[],
            ),
        ];
        for (t, named, planned, left_out) in cases {
            let plan = cells(t, named);
            let contention: Vec<String> = labels(&plan)
                .into_iter()
                .filter(|l| l.starts_with(CONTENTION))
                .collect();
            assert_eq!(contention, planned, "{named:?}");
            assert_eq!(not_planned(t, named), left_out, "{named:?}");
            let faults = |p: &[PlanCell]| p.iter().filter(|c| c.family.is_some()).count();
            assert_eq!(faults(&plan), faults(&cells(t, None)), "{named:?}");
        }
    }

    #[test]
    fn a_covered_cell_is_not_repeated_while_others_are_open() {
        let t = target(
            &[FaultKind::ClientPause, FaultKind::Kill, FaultKind::Clock],
            1,
        );
        let plan = cells(&t, None);
        let mut tallies = vec![Tally::default(); plan.len()];
        let mut seen = Vec::new();
        // Every scenario exercises what it aims at: each cell is aimed at exactly once.
        for round in 0..100 {
            let Some(s) = next(&t, &plan, &tallies, round, None) else {
                break;
            };
            for &i in &s.aims {
                assert_eq!(tallies[i].tries, 0, "{} aimed at twice", plan[i].label());
                tallies[i].tries += 1;
                tallies[i].exercised += 1;
                seen.push(i);
            }
            if let Some(sch) = &s.schedule {
                assert_eq!(sch.faults.len(), s.aims.len());
                let last = sch.faults.last().unwrap();
                assert!(s.duration_ms > last.at_ms + last.length_ms);
                assert!(sch.faults.first().unwrap().at_ms > 0);
            }
        }
        seen.sort();
        assert_eq!(seen, (0..plan.len()).collect::<Vec<_>>());
        assert!(next(&t, &plan, &tallies, 999, None).is_none());
    }

    #[test]
    fn the_first_fault_scenario_meets_every_kind() {
        let t = target(
            &[
                FaultKind::ClientPause,
                FaultKind::Kill,
                FaultKind::Pause,
                FaultKind::Clock,
            ],
            1,
        );
        let plan = cells(&t, None);
        let mut tallies = vec![Tally::default(); plan.len()];
        tallies[0].exercised = 1;
        tallies[1].exercised = 1;
        tallies[2].exercised = 1;
        let s = next(&t, &plan, &tallies, 1, None).unwrap();
        // The odd-ttl cell runs alone, under its own lease length.
        assert_eq!(s.aims.len(), 1);
        assert_eq!(plan[s.aims[0]].cell.kind, LEASE);
        assert_eq!(s.flags, ["--ttl", "943ms", "--renew-ttl", "943ms"]);
        tallies[s.aims[0]].exercised = 1;
        let s = next(&t, &plan, &tallies, 1, None).unwrap();
        let kinds: Vec<&str> = s.aims.iter().map(|&i| plan[i].cell.kind.as_str()).collect();
        assert_eq!(
            &kinds[..4],
            ["client-pause", "pause", "clock", "kill"],
            "{kinds:?}"
        );
    }

    #[test]
    fn scenarios_alternate_profiles_while_both_have_open_cells() {
        let t = target(&[FaultKind::ClientPause, FaultKind::Kill], 1);
        let plan = cells(&t, None);
        let mut tallies = vec![Tally::default(); plan.len()];
        for (i, c) in plan.iter().enumerate() {
            if c.cell.kind == CONTENTION || c.cell.kind == LEASE {
                tallies[i].exercised = 1;
            }
        }
        let a = next(&t, &plan, &tallies, 1, None).unwrap();
        assert_eq!(a.profile, Profile::Plain);
        // Every kind in the first pass, the kill too, however long that makes it.
        let kinds: Vec<&str> = a.aims.iter().map(|&i| plan[i].cell.kind.as_str()).collect();
        assert!(kinds.contains(&"kill"), "{kinds:?}");
        let b = next(&t, &plan, &tallies, 2, Some(a.profile)).unwrap();
        assert_eq!(b.profile, Profile::ShortWait, "the long stalls come next");
        let c = next(&t, &plan, &tallies, 3, Some(b.profile)).unwrap();
        assert_eq!(c.profile, Profile::Plain);
    }

    #[test]
    fn a_cell_not_exercised_is_tried_again_up_to_the_limit() {
        let t = target(&[FaultKind::Kill], 1);
        let plan = cells(&t, None);
        let kill = plan.iter().position(|c| c.cell.kind == "kill").unwrap();
        let mut tallies = vec![Tally::default(); plan.len()];
        for (i, tally) in tallies.iter_mut().enumerate() {
            if i != kill {
                tally.exercised = 1;
            }
        }
        for n in 0..TRIES_MAX {
            let s = next(&t, &plan, &tallies, 1, None).expect("kill is still open");
            assert_eq!(s.aims, vec![kill]);
            let f = &s.schedule.as_ref().unwrap().faults[0];
            // The kill, then the recovery wait and time for a grant.
            assert!(s.duration_ms >= f.at_ms + f.length_ms + 2 * 1000, "{s:?}");
            // A retry has leases twice as long for each miss, the first try the default.
            let ttl = s
                .flags
                .iter()
                .position(|f| f == "--ttl")
                .map(|i| s.flags[i + 1].clone());
            let want = (n > 0).then(|| format!("{}ms", t.lease_ms << n));
            assert_eq!(ttl, want, "try {n}: {s:?}");
            tallies[kill].tries += 1;
        }
        assert!(
            next(&t, &plan, &tallies, 1, None).is_none(),
            "given up after {TRIES_MAX}"
        );
    }

    #[test]
    fn long_stalls_run_apart_with_short_waits_and_outlast_the_liveness_grace() {
        let t = target(&[FaultKind::ClientPause], 1);
        let plan = cells(&t, None);
        let mut tallies = vec![Tally::default(); plan.len()];
        for (i, c) in plan.iter().enumerate() {
            if c.cell.variant != "long" {
                tallies[i].exercised = 1;
            }
        }
        let s = next(&t, &plan, &tallies, 1, None).unwrap();
        assert_eq!(s.flags, ["--acquire-wait", "500ms"]);
        assert_eq!(odd_ttl_ms(2000), 1893);
        assert_eq!(odd_ttl_ms(500), 468);
        assert!(s.aims.iter().all(|&i| plan[i].cell.variant == "long"));
        for f in &s.schedule.unwrap().faults {
            assert!(f.length_ms >= 1000 * 2 + 2000, "{f:?}");
        }
    }

    /// The bank's contention scenario: opposite lock orders on two accounts, and a lease and
    /// a request timeout past a wait plus the liveness grace, so a cycle no wait breaks is a
    /// `deadlock` before any lease could lapse and break it.
    #[test]
    fn the_bank_contention_scenario_outlasts_its_deadline() {
        let t = target(&[FaultKind::ClientPause], 1);
        let plan = cells(&t, None);
        let mut tallies = vec![Tally::default(); plan.len()];
        tallies[0].exercised = 1;
        tallies[1].exercised = 1;
        let s = next(&t, &plan, &tallies, 1, None).unwrap();
        assert_eq!(plan[s.aims[0]].label(), "contention bank");
        assert!(s.schedule.is_none());
        let flag = |name: &str| {
            let at = s.flags.iter().position(|f| f == name).unwrap();
            s.flags[at + 1].clone()
        };
        assert_eq!(flag("--workload"), "bank");
        assert_eq!(flag("--lock-order-policy"), "random");
        assert_eq!(flag("--nemesis"), "none");
        let ms = |v: String| v.trim_end_matches("ms").parse::<u64>().unwrap();
        let wait = ms(flag("--acquire-wait"));
        let deadline = wait + t.liveness_grace_ms;
        assert!(ms(flag("--ttl")) > deadline, "{:?}", s.flags);
        assert!(wait + ms(flag("--op-timeout")) > deadline, "{:?}", s.flags);
        assert!(s.duration_ms > deadline, "{}", s.duration_ms);
        // Not planned without fencing tokens (see `cells`), nor for a service that cannot
        // hold two locks at once.
        for t in [
            Target {
                fencing: false,
                ..target(&[FaultKind::ClientPause], 1)
            },
            Target {
                bank: false,
                ..target(&[FaultKind::ClientPause], 1)
            },
        ] {
            assert!(!labels(&cells(&t, None)).contains(&"contention bank".to_string()));
        }
    }

    #[test]
    fn scenarios_pack_faults_up_to_their_length_and_aim_each_at_its_state() {
        let t = target(
            &[FaultKind::ClientPause, FaultKind::Pause, FaultKind::Clock],
            2,
        );
        let plan = cells(&t, None);
        let mut tallies = vec![Tally::default(); plan.len()];
        tallies[0].exercised = 1;
        tallies[1].exercised = 1;
        tallies[2].exercised = 1;
        let odd = plan.iter().position(|c| c.cell.kind == LEASE).unwrap();
        tallies[odd].exercised = 1;
        let s = next(&t, &plan, &tallies, 3, None).unwrap();
        let sch = s.schedule.unwrap();
        assert!(sch.faults.len() > 1);
        let start_of_last = sch.faults.last().unwrap().at_ms;
        assert!(start_of_last < SCENARIO_FAULTS_MS_MAX, "{start_of_last}");
        assert!(
            s.flags.is_empty(),
            "boundary and next-grant stalls keep the target's waits"
        );
        for f in &sch.faults {
            match f.kind() {
                FaultKind::ClientPause => assert!(f.length_ms > 1000 && f.client().is_some()),
                FaultKind::Pause => assert!(f.length_ms > 1000),
                FaultKind::Clock => assert!(f.length_ms >= 3000),
                _ => {}
            }
        }
        // Faults never overlap.
        for w in sch.faults.windows(2) {
            assert!(w[0].at_ms + w[0].length_ms < w[1].at_ms, "{w:?}");
        }
    }
}
