//! A seeded fault schedule: which fault starts when and how long it lasts.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::str::FromStr;

/// The faults of the local runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// SIGSTOP the lock service's process group, SIGCONT later.
    Pause,
    /// SIGKILL the lock service, restart it with the same command and data dir.
    Kill,
    /// A lock-holding client stalls past its lease, then carries on with its old token.
    ClientPause,
    /// Skew the lock service's clock through libfaketime (see [`ClockMode`]).
    Clock,
    /// Cut the network between nodes (or between clients and nodes) with iptables inside the
    /// nodes' namespaces (see [`Topology`]).
    Partition,
    /// Delay, lose, duplicate or reorder packets with tc netem inside the nodes' namespaces.
    Netem,
}

/// Which links a partition cuts, after Jepsen's partition nemeses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Topology {
    /// One node from all the others.
    Isolate,
    /// Two random halves.
    Halves,
    /// Every node sees a majority, but no two nodes the same one.
    MajoritiesRing,
    /// Two halves joined through one node that sees both.
    Bridge,
    /// The harness's clients from some nodes; the nodes still see each other.
    Clients,
}

impl Topology {
    pub const ALL: [Topology; 5] = [
        Topology::Isolate,
        Topology::Halves,
        Topology::MajoritiesRing,
        Topology::Bridge,
        Topology::Clients,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Isolate => "isolate",
            Topology::Halves => "halves",
            Topology::MajoritiesRing => "majorities-ring",
            Topology::Bridge => "bridge",
            Topology::Clients => "clients",
        }
    }
    /// The fewest nodes for which the topology cuts anything.
    pub fn nodes_min(self) -> usize {
        match self {
            Topology::Isolate | Topology::Halves => 2,
            Topology::MajoritiesRing | Topology::Bridge => 3,
            Topology::Clients => 1,
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Topology {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Topology::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown partition topology {s:?} (expected isolate, halves, majorities-ring, bridge, clients)"
                )
            })
    }
}

/// Parses `--partition-topologies`.
pub fn parse_topologies(s: &str) -> Result<Vec<Topology>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let t: Topology = part.trim().parse()?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

/// What a clock fault does to the node's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClockMode {
    /// Jump forward by the bump.
    BumpForward,
    /// Jump back by the bump.
    BumpBack,
    /// Oscillate between the true time and the bump, several times a second.
    Strobe,
    /// Run faster by the rate factor.
    Fast,
    /// Run slower by the rate factor.
    Slow,
}

impl ClockMode {
    pub const ALL: [ClockMode; 5] = [
        ClockMode::BumpForward,
        ClockMode::BumpBack,
        ClockMode::Strobe,
        ClockMode::Fast,
        ClockMode::Slow,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ClockMode::BumpForward => "bump-forward",
            ClockMode::BumpBack => "bump-back",
            ClockMode::Strobe => "strobe",
            ClockMode::Fast => "fast",
            ClockMode::Slow => "slow",
        }
    }
}

impl fmt::Display for ClockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ClockMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ClockMode::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown clock fault {s:?} (expected bump-forward, bump-back, strobe, fast, slow)"
                )
            })
    }
}

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

/// Parses `--clock-faults`: a comma-separated list of clock modes.
pub fn parse_clock_modes(s: &str) -> Result<Vec<ClockMode>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let m: ClockMode = part.trim().parse()?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

impl FaultKind {
    /// The faults of the local runtime, in the order `--nemesis` documents them.
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Pause,
        FaultKind::Kill,
        FaultKind::ClientPause,
        FaultKind::Clock,
        FaultKind::Partition,
        FaultKind::Netem,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::Kill => "kill",
            FaultKind::ClientPause => "client-pause",
            FaultKind::Clock => "clock",
            FaultKind::Partition => "partition",
            FaultKind::Netem => "netem",
        }
    }

    /// Whether the fault acts on the service's processes (impossible against a bare URL).
    pub fn is_server_side(self) -> bool {
        matches!(
            self,
            FaultKind::Pause
                | FaultKind::Kill
                | FaultKind::Clock
                | FaultKind::Partition
                | FaultKind::Netem
        )
    }

    /// Whether the fault needs the nodes in network namespaces.
    pub fn needs_netns(self) -> bool {
        matches!(self, FaultKind::Partition | FaultKind::Netem)
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
                format!("unknown fault {s:?} (expected pause, kill, client-pause, clock, partition, netem, or none)")
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
    /// Quiet time between one fault's end and the next one's start (jittered ±50%).
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
}

/// One planned fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFault {
    /// Start, in ms since the test started.
    pub at_ms: u64,
    pub kind: FaultKind,
    /// How long it lasts: the pause, the stall, the skew, or the downtime before the restart.
    pub length_ms: u64,
    /// For a clock fault, what it does to the clock.
    pub clock: Option<ClockMode>,
    /// For a partition, which links it cuts.
    pub topology: Option<Topology>,
}

/// A bound on the plan's size, whatever the flags: a schedule is for humans to read, too.
pub const MAX_FAULTS: usize = 10_000;

/// The seeded plan: faults one at a time, each followed by a quiet interval (and, after a
/// kill, time for the service's recovery). The same config
/// always yields the same plan.
pub fn plan(cfg: &ScheduleConfig) -> Vec<PlannedFault> {
    let mut out = Vec::new();
    if cfg.faults.is_empty() {
        return out;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x6E65_6D65_7369_7321);
    let interval = cfg.interval_ms.max(1);
    let ttl = cfg.ttl_ms.max(1);
    let mut t = jitter(&mut rng, interval);
    // Faults come in rounds, each a random order of every chosen fault, so a short run still
    // exercises each of them and no kind is starved by chance.
    let mut round: Vec<FaultKind> = Vec::new();
    while t < cfg.duration_ms && out.len() < MAX_FAULTS {
        if round.is_empty() {
            round = cfg.faults.clone();
            round.shuffle(&mut rng);
        }
        let kind = round.pop().expect("refilled above");
        let length_ms = match kind {
            // Straddle the lease: some pauses end before it lapses, most after.
            FaultKind::Pause => rng.random_range(ttl / 2..=ttl * 2),
            // Downtime; the restart then waits out the lease itself (recovery).
            FaultKind::Kill => rng.random_range(100..=ttl.max(101)),
            // Must outlive the lease surely: well past ttl.
            FaultKind::ClientPause => rng.random_range(ttl * 3 / 2..=ttl * 5 / 2),
            // Long enough for several leases to be judged on the skewed clock.
            FaultKind::Clock => rng.random_range(ttl * 2..=ttl * 4),
            // Straddle the lease, like a pause: a cut shorter than a lease tests little.
            FaultKind::Partition | FaultKind::Netem => rng.random_range(ttl..=ttl * 3),
        };
        let topology = (kind == FaultKind::Partition).then(|| {
            let all: &[Topology] = if cfg.topologies.is_empty() {
                &Topology::ALL
            } else {
                &cfg.topologies
            };
            all[rng.random_range(0..all.len())]
        });
        let clock = (kind == FaultKind::Clock).then(|| {
            let modes: &[ClockMode] = if cfg.clock_modes.is_empty() {
                &ClockMode::ALL
            } else {
                &cfg.clock_modes
            };
            modes[rng.random_range(0..modes.len())]
        });
        out.push(PlannedFault {
            at_ms: t,
            kind,
            length_ms,
            clock,
            topology,
        });
        // A correct service refuses grants after a restart until every lease it may have
        // granted has lapsed (up to about 2 ttl with rounding); a kill inside that window would
        // keep the lock unavailable all run and test nothing.
        let recovery_ms = if kind == FaultKind::Kill { ttl * 2 } else { 0 };
        t += length_ms + recovery_ms + jitter(&mut rng, interval);
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
        }
    }

    #[test]
    fn same_seed_same_plan_other_seed_other_plan() {
        assert_eq!(plan(&cfg(7)), plan(&cfg(7)));
        assert_ne!(plan(&cfg(7)), plan(&cfg(8)));
    }

    #[test]
    fn faults_do_not_overlap_and_start_within_the_run() {
        for seed in 0..50 {
            let p = plan(&cfg(seed));
            assert!(!p.is_empty());
            for w in p.windows(2) {
                assert!(w[0].at_ms + w[0].length_ms < w[1].at_ms, "{w:?}");
                if w[0].kind == FaultKind::Kill {
                    assert!(w[0].at_ms + w[0].length_ms + 4000 <= w[1].at_ms, "{w:?}");
                }
            }
            assert!(p.iter().all(|f| f.at_ms < 30_000));
            let stalls = p.iter().filter(|f| f.kind == FaultKind::ClientPause);
            assert!(stalls.clone().all(|f| f.length_ms > 2000));
            assert!(p
                .iter()
                .all(|f| f.clock.is_some() == (f.kind == FaultKind::Clock)));
        }
    }

    #[test]
    fn every_chosen_fault_appears_once_per_round() {
        for seed in 0..50 {
            let p = plan(&cfg(seed));
            for round in p.chunks(6).filter(|r| r.len() == 6) {
                let mut kinds: Vec<_> = round.iter().map(|f| f.kind).collect();
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

    #[test]
    fn parses_fault_lists() {
        assert_eq!(parse_fault_list("none").unwrap(), vec![]);
        assert_eq!(
            parse_fault_list("kill, pause,kill").unwrap(),
            vec![FaultKind::Kill, FaultKind::Pause]
        );
        let e = parse_fault_list("pause,partiton").unwrap_err();
        assert!(e.contains("partiton"), "{e}");
        assert!(parse_fault_list("").is_err());
        assert!(plan(&ScheduleConfig {
            faults: vec![],
            ..cfg(1)
        })
        .is_empty());
    }
}
