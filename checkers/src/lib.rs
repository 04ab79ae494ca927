//! Checkers: pure functions from a [`History`] to a verdict with explained violations.
//!
//! The main types:
//!
//! - [`CheckConfig`]: what the service claims (`drift`) and how patient liveness is
//!   (`liveness_grace_ns`), and how many grants a history needs to prove anything.
//! - [`Checker`]: one family of rules from docs/checkers.md. Each returns a
//!   [`CheckOutput`]: its verdict, the violations it proved, the warnings it could only suspect,
//!   and notes on what it could not judge.
//! - [`Model`]: the history digested once (locks and keys interned, grants with their lease
//!   bounds and definite holds, nemesis faults paired into intervals); every checker reads it.
//! - [`check`]: runs [`all_checkers`] over one model and merges everything into the
//!   serialized [`Results`] that `results.json` and the reports use; [`stats`] fills its figures.
//! - [`check_path`]: the same for a history file, streamed: lines are parsed in parallel
//!   blocks straight into a compact digest (the `digest` module), paired and walked in one
//!   sequential pass, and judged by the streaming rules as the walk closes grants, so only the
//!   live window is held; their results are the batch's, field for field. Where the streamed
//!   reading is not yet the batch's (a bank run, a history with violations, a grant reached
//!   after it closed), the file is read whole into the batch [`Model`], the path [`check`]
//!   takes for a [`History`].
//! - [`gen`]: a seeded simulator of a *correct* lock service, fenced store and counter workload,
//!   for property tests, mutation tests and benchmarks; [`gen::correct_history_into`] streams
//!   one of any length. [`inject`] adds one violation of a named kind at a random point.
//! - [`liveness_stats`]: per-client acquire attempts, grants, waits and Jain's fairness index,
//!   unavailability windows per lock with the faults active then, and never-completed ops;
//!   [`check`] puts them in `Stats.extra` (`fairness`, `unavailability`, `never_completed`,
//!   and `rounds` for a history of contention rounds: how many ended with more than one holder).
//! - incidents.rs: the violations of one root cause (a double grant, a token reset) grouped
//!   after the checkers ran, into `Results.incidents`; no count or verdict changes.
//! - [`coverage()`]: what the history exercised (client stalls by wake-up op and by where they
//!   ended against the lease bound and the other processes' grants, waiter stalls, long lock
//!   waits, ops and grants during each fault kind, nodes hit, stall shapes reached);
//!   [`check`] puts it in `Results.coverage`.
//!
//! Invariants, stated as absences: checkers do no I/O, read no clock, and their output never
//! depends on hash-map iteration order. A violation is reported only when the history proves
//! it whatever the timing of each op inside its `[invoke, complete]` window; anything merely
//! possible is a warning. Every op is named by the index of its completion event (the line
//! that says what happened), or of its invoke event when it never completed.
//!
//! Where the model leaves room, these readings hold (each module says why):
//!
//! - One fact, one violation: equal tokens are `token-reused`, never also `token-regressed`.
//! - `token-regressed` also covers the grant order that exclusivity forces, not only real time:
//!   a grant that completed while another grant of the lock was surely still alive (whenever
//!   that one was granted) must have come first. The precedence graph this defines (real-time,
//!   exclusivity and token edges) is decided by a frontier sweep, and a cycle is reported as
//!   its shortest witness: the two grants plus the ops that prove how long the later one lived
//!   (see `tokens::forced_before`). Pairs whose definite holds overlap are `double-grant`'s.
//! - `lock-stuck` judges each `held` answer against the grants, renews and faults that could
//!   have affected it (those begun before it completed), not against the history's last one,
//!   so a lock stuck mid-run is caught even if it recovers later. A fault never stopped makes
//!   later `held` answers unjudgeable.
//! - `lost-update` takes every store key as a counter register (the counter workload is the
//!   only one that writes), and counts only writes acknowledged before the final read was sent.
//! - `unsafe-overlap` is one warning per grant, listing its late ops.

// The unit tests read histories with faults: the fault families' entries are registered by the
// nemesis's modules (history::FAULT_FAMILIES), linked here for the tests only.
#[cfg(test)]
use nemesis as _;

mod ascending;
mod bank;
mod coverage;
mod deadlock;
mod deadlock_stream;
mod digest;
mod evidence;
mod exercised;
mod expected;
mod fairness;
mod faults;
mod fencing;
mod follow;
mod forced;
pub mod gen;
pub mod gen_bank;
mod incidents;
pub mod inject;
mod judged;
mod late_stream;
mod lease;
mod liveness;
mod model;
mod mutex;
mod names;
mod rounds;
mod search;
mod search_stream;
mod serial;
mod stale;
mod stats;
mod store;
mod store_stream;
mod stream;
mod stuck_stream;
mod text;
mod tokens;
mod walk;
mod window;

pub use coverage::coverage;
pub use digest::{
    check_path, check_path_streamed, check_path_within, check_prefix, window_of_path, CheckError,
    WindowStats, UNWALKED_OPS_MAX, WHOLE_READ_BYTES_MAX,
};
pub use evidence::{KeyEvidence, KeyState};
pub use fairness::liveness_stats;
pub use faults::{Fault, Faults};
pub use follow::{Follower, Read as FollowerRead, FOLLOW_HORIZON_NS};
pub use model::{
    ClientOp, Drift, Func, Grant, Model, Segment, SpanEnd, NO_ERROR, NO_GRANT, NO_TARGET,
};
pub use stats::{stats, stats_of};

pub(crate) use model::FxMap;

use history::{CheckerResult, History, Results, Validity, Violation, ViolationKind};

/// What the checkers assume about the service and the run.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckConfig {
    /// The clock-rate error the service claims to tolerate (0.01 = 1 %): leases are trusted to
    /// live at least `ttl * (1 - drift)` and to be dead after `ttl * (1 + drift)`.
    pub drift: f64,
    /// How long past a surely expired lease the service may keep answering `held` before the
    /// lock counts as stuck (`--liveness-grace`).
    pub liveness_grace_ns: u64,
    /// With fewer ok acquires than this, the history proves nothing: the verdict is unknown.
    pub min_grants: u64,
    /// `--clock-scope all`: clock faults moved the service's monotonic clock. Violations no
    /// lease-based service avoids then, during a clock fault or this long after it (the
    /// longest lease), are set apart in `Results::expected` and do not count.
    pub monotonic_clock_reach_ns: Option<u64>,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            drift: 0.0,
            liveness_grace_ns: 2_000_000_000,
            min_grants: 1,
            monotonic_clock_reach_ns: None,
        }
    }
}

/// What one checker concluded about one history.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOutput {
    pub valid: Validity,
    pub violations: Vec<Violation>,
    pub warnings: Vec<Violation>,
    /// Warnings found past those kept in `warnings` ([`FirstWarnings`]): counted, not listed.
    pub warnings_unlisted: u64,
    /// Why the verdict is unknown, what could not be judged.
    pub notes: Vec<String>,
    /// The history held nothing this checker's rules read: why (see
    /// `CheckerResult::not_judged`).
    pub not_judged: Option<String>,
    /// Figures for `stats.extra` (the deadlock checker's `cycles`: what a bank run exercised).
    pub extra: std::collections::BTreeMap<String, serde_json::Value>,
}

/// One family of rules. Implementors only write [`Checker::check_model`]; the model is shared
/// when [`check`] runs them all.
pub trait Checker {
    fn name(&self) -> &'static str;

    /// The violation and warning kinds it reports: each kind has exactly one checker, which
    /// is how the reports and the gate group findings under it ([`checker_of`]).
    fn kinds(&self) -> &'static [ViolationKind];

    /// Checks a history on its own (builds a model for it).
    fn check(&self, h: &History, cfg: &CheckConfig) -> CheckOutput {
        let m = Model::new(h, cfg);
        let mut out = self.check_model(&m, cfg);
        m.finish(&mut out);
        out
    }

    /// Checks an already digested history. Violations may leave `nemesis` empty: the caller
    /// fills it from the model ([`Model::finish`]).
    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput;

    /// What adds one violation of each of its kinds to a correct history (`synth --inject`,
    /// the mutation tests): every kind it reports has at least one, beside its rule.
    fn injectors(&self) -> &'static [inject::Injector] {
        &[]
    }
}

/// Every checker, in the order their results are listed.
pub fn all_checkers() -> Vec<Box<dyn Checker>> {
    vec![
        Box::new(mutex::MutualExclusion),
        Box::new(lease::LeaseExpiry),
        Box::new(tokens::FencingTokens),
        Box::new(tokens::StaleLockOps),
        Box::new(store::StoreFencing),
        Box::new(store::Counter),
        Box::new(bank::Total),
        Box::new(serial::Serializability),
        Box::new(liveness::Liveness),
        Box::new(deadlock::Deadlock),
    ]
}

/// The checker that reports `kind` (its name, as in `results.json`'s `checkers`), from the
/// kinds each checker says it reports.
pub fn checker_of(kind: ViolationKind) -> &'static str {
    all_checkers()
        .iter()
        .find(|c| c.kinds().contains(&kind))
        .map(|c| c.name())
        .expect("every violation kind has a checker (every_kind_has_one_checker)")
}

/// Runs every checker over `h` and merges their verdicts (invalid > unknown > valid).
/// A front end to the same digest and checkers as [`check_path`].
pub fn check(h: &History, cfg: &CheckConfig) -> Results {
    let mut r = check_model(&Model::new(h, cfg), cfg);
    for i in r.evidence_wanted() {
        // The ops are in index order (the reader's rules).
        if let Ok(at) = h.ops.binary_search_by_key(&i, |o| o.index) {
            r.keep_evidence(&h.ops[at]);
        }
    }
    r
}

/// Runs every checker over a digested history and merges their verdicts.
pub(crate) fn check_model(m: &Model, cfg: &CheckConfig) -> Results {
    let (outs, stats, coverage) = run_checkers(m, cfg);
    let windows = cfg
        .monotonic_clock_reach_ns
        .map(|reach_ns| expected::clock_windows(m, reach_ns));
    let whole = Whole::of(m);
    merge(
        (outs, stats, coverage),
        &whole,
        cfg,
        windows,
        |violations| incidents::group_model(m, violations),
    )
}

/// What the merge reads of the history as a whole, beside the checkers' outputs.
pub(crate) struct Whole {
    /// No event was read.
    pub(crate) empty: bool,
    pub(crate) ok_acquires: u64,
    /// The walk's counts the run's notes give (`Model`'s fields of these names).
    pub(crate) ambiguity_capped: u64,
    pub(crate) unplaced: u64,
}

impl Whole {
    fn of(m: &Model) -> Whole {
        Whole {
            empty: m.is_empty(),
            ok_acquires: m.ok_acquires,
            ambiguity_capped: m.ambiguity_capped,
            unplaced: m.unplaced,
        }
    }
}

/// Merges every checker's output (in the order of `all_checkers`, then the model search's)
/// into the run's results: the verdict, the violations sorted, those a moved monotonic clock
/// explains set apart (`windows`: the clock faults' reach, under `--clock-scope all`), the
/// run's notes, and the incidents (`incidents`, from the sorted violations).
pub(crate) fn merge(
    (outs, mut stats, coverage): (
        Vec<(&'static str, CheckOutput)>,
        history::Stats,
        history::coverage::Coverage,
    ),
    whole: &Whole,
    cfg: &CheckConfig,
    windows: Option<Vec<(u64, u64)>>,
    incidents: impl FnOnce(&[Violation]) -> Vec<history::Incident>,
) -> Results {
    let mut valid = if whole.empty {
        Validity::Unknown
    } else {
        Validity::Valid
    };
    let mut violations = Vec::new();
    let mut warnings = Vec::new();
    let mut warnings_unlisted = 0;
    let mut checkers = Vec::new();
    let mut expected = Vec::new();
    // Why the whole history proves nothing is the run's note, said once, not each checker's.
    let shared = proves_nothing(whole, cfg);
    for (name, mut out) in outs {
        if let Some(w) = &windows {
            expected::set_apart(w, &mut out, &mut expected);
        }
        out.notes.retain(|n| Some(n) != shared.as_ref());
        valid = valid.merge(out.valid);
        stats.extra.append(&mut out.extra);
        // A checker that looked at nothing is not judged, whether or not the history proves
        // anything: one standing (`Valid` beside `not_judged`, shown and written as not
        // judged), so that results.json's `null` reads back as what it was.
        let judged_nothing = out.not_judged.is_some() && out.valid == Validity::Unknown;
        checkers.push(CheckerResult {
            name: name.to_string(),
            valid: if judged_nothing {
                Validity::Valid
            } else {
                out.valid
            },
            violations: out.violations.len() as u64,
            warnings: out.warnings.len() as u64 + out.warnings_unlisted,
            notes: out.notes,
            not_judged: out.not_judged,
        });
        violations.extend(out.violations);
        warnings.extend(out.warnings);
        warnings_unlisted += out.warnings_unlisted;
    }
    sort_violations(&mut violations);
    sort_violations(&mut warnings);
    sort_violations(&mut expected);
    if warnings.len() > WARNINGS_LISTED_MAX {
        warnings_unlisted += (warnings.len() - WARNINGS_LISTED_MAX) as u64;
        warnings.truncate(WARNINGS_LISTED_MAX);
    }
    let mut notes = run_notes(whole, expected.len());
    if warnings_unlisted > 0 {
        notes.push(unlisted_note(warnings_unlisted));
    }
    if let Some(why) = shared {
        notes.insert(0, why);
    }
    // After sorting: incidents name violations by their position in the list.
    let incidents = incidents(&violations);
    Results {
        valid,
        violations,
        incidents,
        warnings,
        warnings_unlisted,
        expected,
        checkers,
        stats,
        coverage: Some(coverage),
        notes,
        completeness: None,
        judged_from: None,
        evidence: Default::default(),
    }
}

/// Every checker's output in the order of `all_checkers`, then the model search's; the stats
/// (with the liveness and round figures in `extra`) and the coverage.
fn run_checkers(
    m: &Model,
    cfg: &CheckConfig,
) -> (
    Vec<(&'static str, CheckOutput)>,
    history::Stats,
    history::coverage::Coverage,
) {
    // The checkers only read the model: split them over two threads (this machine's cores) and
    // merge in the fixed order of `all_checkers`, so the output does not depend on timing.
    let list = all_checkers();
    let half = list.len() / 2;
    let run = |c: &dyn Checker| -> (&'static str, CheckOutput) {
        let mut out = c.check_model(m, cfg);
        m.finish(&mut out);
        (c.name(), out)
    };
    let ((mut outs, extra), (rest, (mut stats, coverage)), searched) =
        std::thread::scope(|scope| {
            // The search of the orders runs beside the rules, on every lock; the locks a rule
            // proved a violation on are dropped from it afterwards.
            let search = scope.spawn(|| search::search_all(m));
            let other = scope.spawn(|| {
                let list = all_checkers();
                let outs: Vec<_> = list[half..].iter().map(|c| run(c.as_ref())).collect();
                (outs, (stats::stats_of(m), coverage::coverage(m)))
            });
            let outs: Vec<_> = list[..half].iter().map(|c| run(c.as_ref())).collect();
            let mut extra = fairness::liveness_stats(m);
            extra.extend(rounds::round_stats(m));
            (
                (outs, extra),
                other.join().expect("checker thread panicked"),
                search.join().expect("search thread panicked"),
            )
        });
    outs.extend(rest);
    debug_assert_eq!(outs.len(), list.len(), "one output per checker");
    // The search runs last: it decides only the locks the rules proved nothing about.
    // A deadlock names a lock of its cycle but proves nothing about the lock's grants.
    let proven: std::collections::HashSet<String> = outs
        .iter()
        .flat_map(|(_, o)| {
            o.violations
                .iter()
                .filter(|v| v.kind != history::ViolationKind::Deadlock)
                .filter_map(|v| v.lock.clone())
        })
        .collect();
    let mut searched = search::judged(&m.locks, searched, &proven);
    m.finish(&mut searched);
    outs.push(("model-search", searched));
    stats.extra.extend(extra);
    (outs, stats, coverage)
}

/// The run's notes: violations set apart as expected, and ops the model could not place.
fn run_notes(m: &Whole, expected: usize) -> Vec<String> {
    let mut notes = Vec::new();
    if expected > 0 {
        notes.push(format!(
            "{expected} violation(s) expected under monotonic clock faults (--clock-scope all) \
             are listed apart and do not count: no lease-based service survives its own clock \
             jumping"
        ));
    }
    if m.ambiguity_capped > 0 {
        notes.push(format!(
            "{} grant(s) without a readable token were past the latest {} of their lock when a \
             renew or release named a token no grant carries: that op was not counted against them",
            m.ambiguity_capped,
            walk::UNTOKENED_CANDIDATES_MAX
        ));
    }
    if m.unplaced > 0 {
        notes.push(format!(
            "{} client op(s) name no lock (lock ops) or no key (store ops): not checked",
            m.unplaced
        ));
    }
    notes
}

/// How many warnings a check lists (`Results::warnings`, the first by time); those past it are
/// counted (`Results::warnings_unlisted` and each checker's figure), not kept. A long run under
/// faults suspects much alike (14,297 `unsafe-overlap` warnings in 100M synthetic events):
/// keeping every one, with the faults that met it, made a check's memory grow with the
/// history. The HTML report shows the first 300. (The crate's own tests list 3: their
/// histories then meet the limit, the batch's and the stream's alike.)
#[cfg(not(test))]
pub const WARNINGS_LISTED_MAX: usize = 1000;
#[cfg(test)]
pub const WARNINGS_LISTED_MAX: usize = 3;

/// The run's note for `n` warnings counted and not listed.
fn unlisted_note(n: u64) -> String {
    format!(
        "{n} more warning(s) were found past the first {WARNINGS_LISTED_MAX} listed (by time): \
         counted in the checkers' figures, not listed"
    )
}

/// The first [`WARNINGS_LISTED_MAX`] of the warnings pushed, in the order of
/// `Results::warnings`, held in at most twice that many; and how many others were pushed. A
/// streaming rule keeps its warnings here, so what it holds does not grow with the history.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstWarnings {
    kept: Vec<Violation>,
    unlisted: u64,
}

impl FirstWarnings {
    pub(crate) fn push(&mut self, mut v: Violation) {
        // The order reads the ops as a checker's output leaves them (`model::finish_output`).
        v.ops.sort_unstable();
        v.ops.dedup();
        self.kept.push(v);
        if self.kept.len() >= 2 * WARNINGS_LISTED_MAX {
            self.cut();
        }
    }

    /// Keeps the first [`WARNINGS_LISTED_MAX`] and counts the rest.
    fn cut(&mut self) {
        sort_violations(&mut self.kept);
        if self.kept.len() > WARNINGS_LISTED_MAX {
            self.unlisted += (self.kept.len() - WARNINGS_LISTED_MAX) as u64;
            self.kept.truncate(WARNINGS_LISTED_MAX);
        }
    }

    /// The warnings listed, and how many more were found.
    pub(crate) fn listed(&self) -> (Vec<Violation>, u64) {
        let mut first = self.clone();
        first.cut();
        (first.kept, first.unlisted)
    }
}

/// By window start, then kind, then ops: stable across runs and readable in time order.
pub(crate) fn sort_violations(v: &mut [Violation]) {
    v.sort_by(|a, b| {
        (a.window_ns[0], a.kind, &a.ops, a.window_ns[1]).cmp(&(
            b.window_ns[0],
            b.kind,
            &b.ops,
            b.window_ns[1],
        ))
    });
}

/// The verdict every checker shares: proven violations make it invalid; a history with too few
/// grants proves nothing, so it is unknown rather than valid.
pub(crate) fn verdict(m: &Model, cfg: &CheckConfig, out: &mut CheckOutput) {
    verdict_of(&Whole::of(m), cfg, out);
}

/// [`verdict`], from what the history shows as a whole.
pub(crate) fn verdict_of(m: &Whole, cfg: &CheckConfig, out: &mut CheckOutput) {
    out.valid = if !out.violations.is_empty() {
        Validity::Invalid
    } else if let Some(why) = proves_nothing(m, cfg) {
        out.notes.push(why);
        Validity::Unknown
    } else {
        Validity::Valid
    };
}

/// Why the history proves nothing whatever the rules (empty, or too few grants), if it does
/// not: every checker's unknown verdict, said once for the run.
fn proves_nothing(m: &Whole, cfg: &CheckConfig) -> Option<String> {
    if m.empty {
        Some(format!(
            "the history is empty: it {}",
            history::PROVES_NOTHING
        ))
    } else if m.ok_acquires < cfg.min_grants {
        Some(format!(
            "only {} ok acquire(s), fewer than the {} needed (min_grants): the history {}",
            m.ok_acquires,
            cfg.min_grants,
            history::PROVES_NOTHING
        ))
    } else {
        None
    }
}

impl CheckOutput {
    pub(crate) fn new() -> CheckOutput {
        CheckOutput {
            valid: Validity::Valid,
            violations: Vec::new(),
            warnings: Vec::new(),
            warnings_unlisted: 0,
            notes: Vec::new(),
            not_judged: None,
            extra: std::collections::BTreeMap::new(),
        }
    }

    /// Marks the checker as having had nothing to judge, unless it found something anyway.
    pub(crate) fn nothing_to_judge(&mut self, judged: bool, why: impl FnOnce() -> String) {
        if !judged && self.violations.is_empty() && self.warnings.is_empty() {
            self.not_judged = Some(why());
        }
    }
}

#[cfg(test)]
mod first_warnings_tests {
    use super::*;
    use history::ViolationKind;

    fn warning(start_ns: u64, ops: &[u64]) -> Violation {
        Violation {
            kind: ViolationKind::UnsafeOverlap,
            lock: Some("L0".into()),
            ops: ops.to_vec(),
            window_ns: [start_ns, start_ns + 5],
            nemesis: Vec::new(),
            explanation: String::new(),
            cycle: Vec::new(),
        }
    }

    /// Whatever the order they come in, and however many: the warnings kept are the first of
    /// all of them as `Results::warnings` sorts them (ops as a checker's output leaves them),
    /// the rest counted, and never more than twice the limit held.
    #[test]
    fn the_warnings_kept_are_the_first_of_all_in_any_order() {
        let n = WARNINGS_LISTED_MAX;
        for count in [
            0,
            1,
            n - 1,
            n,
            n + 1,
            2 * n - 1,
            2 * n,
            2 * n + 1,
            7 * n + 2,
        ] {
            for order in 0..4u64 {
                // Windows that tie (two warnings per instant, their ops then decide), pushed
                // in an order that is not theirs.
                let all: Vec<Violation> = (0..count as u64)
                    .map(|i| (i * 7919 + order * 31) % (count as u64).max(1))
                    .map(|i| warning(i / 2, &[i + 2, i % 2, i + 2]))
                    .collect();
                let mut first = FirstWarnings::default();
                for v in &all {
                    first.push(v.clone());
                    assert!(first.kept.len() < 2 * n, "held {}", first.kept.len());
                }
                let mut want: Vec<Violation> = all.clone();
                for v in &mut want {
                    v.ops.sort_unstable();
                    v.ops.dedup();
                }
                sort_violations(&mut want);
                want.truncate(n);
                let (listed, unlisted) = first.listed();
                assert_eq!(listed, want, "{count} warnings, order {order}");
                assert_eq!(unlisted as usize + listed.len(), count, "{count} warnings");
            }
        }
    }
}
