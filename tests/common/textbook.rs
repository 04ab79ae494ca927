//! The gallery of anti-patterns (docs/anti-patterns.md): each one the command that shows it
//! and the violations lockpick reports for it, beside the correct counterparts that must stay
//! `valid`. One table for the end-to-end test (tests/textbook.rs, a few seeds) and the gallery
//! campaign (benches/gallery.rs, 10 seeds, time to the first violation), which writes the
//! tables of docs/anti-patterns.md and README.md.

#![allow(dead_code)]

use crate::shapes::{run_with, Outcome};
use std::path::Path;

/// One row: an anti-pattern (or its correct counterpart) as one `lockpick run`.
pub struct Row {
    /// Short id, for tests and the bench's progress lines.
    pub id: &'static str,
    /// The anti-pattern, in the chapters' words.
    pub anti_pattern: &'static str,
    /// Every flag after `lockpick run` but `--seed` and `--duration`: `args`, then `extra`
    /// (what sets a row apart from the one it shares `args` with).
    pub args: &'static [&'static str],
    pub extra: &'static [&'static str],
    /// The kinds that show it; empty: the row must stay `valid` (a control, or the happy path
    /// that hides the bug).
    pub expect_any: &'static [&'static str],
    /// Run length.
    pub duration_s: u64,
    /// Needs a clock backend (the vDSO or libfaketime).
    pub clock: bool,
}

impl Row {
    /// The command line, as a reader would type it (seed given).
    pub fn flags(&self) -> Vec<&'static str> {
        [self.args, self.extra].concat()
    }

    pub fn command(&self, seed: u64) -> String {
        format!(
            "lockpick run {} --duration {}s --seed {seed}",
            self.flags().join(" "),
            self.duration_s
        )
    }

    /// Whether `o` is what the row expects: caught with one of its kinds, or valid.
    pub fn met(&self, o: &Outcome) -> bool {
        // A correct row: no violation, and valid, or unknown only for a fault its draw left
        // unexercised (the verdict then names it).
        if self.expect_any.is_empty() {
            let gap = o.results["notes"]
                .to_string()
                .contains("requested, not exercised");
            return o.kinds.is_empty() && (o.code == 0 || (o.code == 2 && gap));
        }
        o.code == 1
            && self
                .expect_any
                .iter()
                .any(|k| o.kinds.iter().any(|f| f == k))
    }

    pub fn run(&self, bin: &str, out: &Path, seed: u64) -> Outcome {
        self.run_for(bin, out, seed, self.duration_s)
    }

    /// As `run`, for `duration_s` instead of the row's own length.
    pub fn run_for(&self, bin: &str, out: &Path, seed: u64, duration_s: u64) -> Outcome {
        run_with(bin, out, &[], &self.flags(), duration_s, seed)
    }
}

/// The textbook's contention rounds: 3 members, 10 ms ticks, every client asks once a round
/// within 20 ms. Holds outlast the window and waits end inside it, so only the first entry of a
/// round counts, as in the textbook's experiment.
const ROUNDS: &[&str] = &[
    "--nodes",
    "3",
    "--clients",
    "3",
    "--locks",
    "1",
    "--workload",
    "mutex",
    "--lock-order",
    "timestamp:10ms",
    "--arrivals",
    "rounds:20ms",
    "--hold",
    "28ms..30ms",
    "--acquire-wait",
    "15ms",
    "--ttl",
    "1s",
    "--nemesis",
    "none",
];

/// Frequent client stalls on short leases, each row adding its shape and its service.
const STALLS: &[&str] = &[
    "--nemesis",
    "client-pause",
    "--nemesis-interval",
    "1s",
    "--op-timeout",
    "500ms",
    "--ttl",
    "1s",
];

/// The counter under next-grant stalls that wake into the write, with holds shorter than the
/// check-then-put store's check-to-put gap, so the next holder's write lands inside it.
const NEXT_GRANT_WRITE: &[&str] = &[
    "--workload",
    "counter",
    "--nemesis",
    "client-pause",
    "--client-faults",
    "next-grant,write",
    "--nemesis-interval",
    "1s",
    "--op-timeout",
    "500ms",
    "--ttl",
    "1s",
    "--hold",
    "20ms..100ms",
];

/// A single lockd running the mutex workload; the row adds the mode and the faults.
const MUTEX: &[&str] = &[
    "--workload",
    "mutex",
    "--ttl",
    "1s",
    "--hold",
    "50ms..600ms",
];

pub const ROWS: &[Row] = &[
    Row {
        id: "no-ttl",
        anti_pattern: "No TTL: a stalled (or crashed) holder blocks everyone",
        args: STALLS,
        extra: &[
            "--workload",
            "mutex",
            "--hold",
            "50ms..600ms",
            "--unsafe",
            "no-ttl",
            "--client-faults",
            "long",
            "--liveness-grace",
            "200ms",
            "--acquire-wait",
            "500ms",
        ],
        expect_any: &["lock-stuck"],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "no-fence",
        anti_pattern: "TTL without fencing: a paused holder writes over its successor",
        args: STALLS,
        extra: &[
            "--workload",
            "counter",
            "--hold",
            "50ms..600ms",
            "--store-fence",
            "none",
            "--client-faults",
            "next-grant,write",
        ],
        expect_any: &["stale-write-accepted", "lost-update"],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "check-then-put",
        anti_pattern: "The fenced write as the textbook writes it: check the last token, then put",
        args: NEXT_GRANT_WRITE,
        extra: &["--store-fence", "check-then-put"],
        expect_any: &["stale-write-accepted"],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "local-clock",
        anti_pattern: "Judging a lease by a local clock (lockd's wall clock, bumped forward)",
        args: MUTEX,
        extra: &[
            "--unsafe",
            "wall-clock",
            "--nemesis",
            "clock",
            "--clock-faults",
            "bump-forward",
            "--nemesis-interval",
            "1s",
            "--op-timeout",
            "500ms",
        ],
        expect_any: &["double-grant"],
        duration_s: 15,
        clock: true,
    },
    Row {
        id: "no-tiebreak",
        anti_pattern: "Timestamps without a tie-break (3 members, 10 ms ticks, rounds over 20 ms)",
        args: ROUNDS,
        extra: &["--unsafe", "no-tiebreak"],
        expect_any: &["double-grant"],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "timeout-is-ft",
        anti_pattern: "\"A lock that times out is fault tolerance\": the timeout frees the lock, \
                       the paused holder still writes",
        args: STALLS,
        extra: &[
            "--workload",
            "counter",
            "--hold",
            "50ms..600ms",
            "--store-fence",
            "none",
            "--client-faults",
            "long,write",
        ],
        expect_any: &["stale-write-accepted", "lost-update"],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "volatile",
        anti_pattern: "A single lock server that forgets its locks on restart",
        args: MUTEX,
        extra: &[
            "--unsafe",
            "volatile",
            "--nemesis",
            "kill",
            "--nemesis-interval",
            "1s",
        ],
        expect_any: &["double-grant"],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "happy-path",
        anti_pattern: "Testing only the happy path: the same forgetful server, no faults",
        args: MUTEX,
        extra: &["--unsafe", "volatile", "--nemesis", "none"],
        expect_any: &[],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "tiebreak",
        anti_pattern: "(correct) Timestamps ordered by (timestamp, member id), same rounds",
        args: ROUNDS,
        extra: &[],
        expect_any: &[],
        duration_s: 15,
        clock: false,
    },
    Row {
        id: "fence-all",
        anti_pattern: "(correct) The atomic fenced write, same stalls as check-then-put",
        args: NEXT_GRANT_WRITE,
        extra: &["--store-fence", "all"],
        expect_any: &[],
        duration_s: 15,
        clock: false,
    },
];

pub fn row(id: &str) -> &'static Row {
    ROWS.iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no gallery row {id}"))
}

/// `(contended rounds, rounds with more than one holder)` from a run's results.
pub fn rounds(o: &Outcome) -> Option<(u64, u64)> {
    let r = &o.results["stats"]["extra"]["rounds"];
    Some((
        r["contended"].as_u64()?,
        r["more_than_one_holder"].as_u64()?,
    ))
}
