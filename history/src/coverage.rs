//! What a run exercised (`results.json`'s `coverage`): client stalls by how they ended, waiter
//! stalls, long lock waits, client ops and grants during each fault kind, the nodes each kind
//! hit, and the client-fault shapes the run asked for. The checkers count it from the history
//! (docs/checkers.md, "Coverage", defines every row); the reports show [`Coverage::rows`], and
//! `--fail-on coverage` fails a run whose [`Coverage::missing`] is not empty.
//!
//! Only counts: a 10M-event history costs a few hundred bytes here.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a note names what a run asked for and exercised nowhere.
pub const NOT_EXERCISED: &str = "requested, not exercised";
/// How the same is named once the run stopped at its first proven violation
/// (`--stop-on-violation`): not a gap of the run, the faults were never due.
pub const NOT_REACHED: &str = "not reached before the run stopped at its first proven violation";

/// The coverage of one history. Every count is present, zeros too, so a condition the run
/// never reached reads as such.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Client stalls recorded (`start-client-pause`), holder and waiter stalls together.
    pub stalls: u64,
    pub holder: HolderStalls,
    pub waiter: WaiterStalls,
    pub waits: LongWaits,
    /// By fault kind (`pause`, `kill`, `client-pause`, `partition`, `netem`, `clock`).
    #[serde(default)]
    pub faults: BTreeMap<String, FaultCoverage>,
    /// By the shape name a stall was recorded with (`value.shape`).
    #[serde(default)]
    pub shapes: BTreeMap<String, ShapeCoverage>,
    /// What `--fail-on coverage` requires at least one exercised instance of.
    #[serde(default)]
    pub requested: Requested,
    /// Every fault the history shows, grouped by what it was (kind, clock direction, stall
    /// shape x wake-up op, partition topology) and the role of what it hit, with how many of
    /// them met the state they aim at (docs/checkers.md, "Exercised").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<Cell>,
    /// What the run asked to exercise, each a need one exercised cell satisfies. Set by the
    /// harness from the run's settings and schedule (a lone history asks for nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<Need>,
}

/// The variant of a kill in two waves (its events carry `then_nodes`): one cell, whatever
/// nodes the waves hit.
pub const KILL_ROLLING: &str = "rolling";

/// One coverage cell: faults of one kind, one variant and one target role.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cell {
    /// The fault kind: `pause`, `kill`, `clock`, `client-pause`, `partition`, `netem`.
    pub kind: String,
    /// The variant: a clock direction (`bump-forward`, ...), a stall aim (`boundary`, ...), a
    /// partition topology, [`KILL_ROLLING`]; empty for kinds without one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub variant: String,
    /// A holder stall's wake-up op (`renew`, `write`, `release`, `read`); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wake: String,
    /// What the fault hit: `primary` or `other` (a node's role), a node id in histories that
    /// do not record roles, empty for faults that hit no node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    /// A clock fault's scope when it moved the monotonic clock too (`all`); empty for the
    /// default, the wall clock only, and for other kinds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
    /// Faults of this cell the history shows starting.
    pub started: u64,
    /// Of those, the ones that met the state they aim at.
    pub exercised: u64,
}

impl Cell {
    /// `clock bump-forward on primary`, `client-pause boundary/renew`, `kill on other`.
    pub fn label(&self) -> String {
        let mut out = self.kind.clone();
        if !self.variant.is_empty() {
            out.push(' ');
            out.push_str(&self.variant);
            if !self.wake.is_empty() {
                out.push('/');
                out.push_str(&self.wake);
            }
        }
        if !self.role.is_empty() {
            out.push_str(" on ");
            out.push_str(&self.role);
        }
        if self.scope == "all" {
            out.push_str(" (monotonic too)");
        }
        out
    }
}

/// Something a run asked to exercise: met when one cell of `kind` whose variant is one of
/// `variants` (any, when empty), whose wake-up op is one of `wakes` (any, when empty) and
/// whose role is `role` (any, when empty) was exercised at least `times` times.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Need {
    /// What the run asked for, in the words the gate prints: `clock bump-forward on primary`.
    pub label: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wakes: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    /// How many exercised faults it takes (1 unless the suite asks for more).
    #[serde(default = "one")]
    pub times: u64,
}

fn one() -> u64 {
    1
}

impl Need {
    /// A need met by any exercised fault of `kind`.
    pub fn kind(kind: &str) -> Need {
        Need {
            label: kind.to_string(),
            kind: kind.to_string(),
            times: 1,
            ..Need::default()
        }
    }

    /// Whether `c` is one of the cells this need counts.
    pub fn counts(&self, c: &Cell) -> bool {
        c.kind == self.kind
            && (self.variants.is_empty() || self.variants.contains(&c.variant))
            && (self.wakes.is_empty() || self.wakes.contains(&c.wake))
            && (self.role.is_empty() || self.role == c.role)
    }
}

/// Stalls of a client that held a lock and had no op in flight.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HolderStalls {
    pub count: u64,
    /// The first op the stalled process invoked after its stall ended.
    pub wake_up: WakeUps,
    /// Where the stall ended against the holder's lease: its lower bound (the lease may have
    /// ended from then on) and its upper bound (it has surely ended), as the history showed
    /// them when the stall began.
    pub lease_bound: BoundDistance,
    /// Where the stall ended against the grants of the same lock to other processes.
    pub next_grant: NextGrant,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WakeUps {
    pub renew: u64,
    pub write: u64,
    pub release: u64,
    pub read: u64,
    pub acquire: u64,
    /// The process invoked nothing after the stall (or the stall never ended).
    pub none: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BoundDistance {
    /// Ended before the lower bound: the lease was surely still alive.
    pub before: u64,
    /// Ended between the bounds: the lease may or may not have ended.
    #[serde(default)]
    pub between: u64,
    /// Ended at or past the upper bound, by at most a tenth of the lease's ttl: the lease had
    /// just surely ended.
    pub just_past: u64,
    /// Ended more than a tenth of the ttl past the upper bound.
    pub past: u64,
    /// No grant of the stalled holder is known, or its ttl is not.
    pub unknown: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NextGrant {
    /// No other process was granted the lock between the holder's grant and the stall's end.
    pub none_yet: u64,
    /// Exactly one other grant, completed less than one ttl before the stall ended.
    pub just_after: u64,
    /// Two or more other grants, or one completed a ttl or more before the stall ended.
    pub later: u64,
    /// No grant of the stalled holder is known (or, with one other grant, no ttl).
    pub unknown: u64,
}

/// Stalls of a client while its acquire was outstanding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaiterStalls {
    pub count: u64,
    /// The stall outlasted the lease the acquire asked for (ttl*(1+drift)).
    pub lease_lapsed: u64,
    /// The stall was no longer than that lease (or the acquire named no ttl).
    pub lease_outlived: u64,
    /// Of the lapsed ones, those whose acquire then answered ok.
    pub granted_after_lapse: u64,
}

/// Acquires that waited longer than the lease they asked for (invoke to completion > ttl).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LongWaits {
    /// ... and were granted.
    pub granted: u64,
    /// ... and were refused or ended indeterminate.
    pub not_granted: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultCoverage {
    /// Faults of this kind the history shows starting.
    pub started: u64,
    /// Client ops whose `[invoke, completion]` overlaps one of them (pending ops: to the end).
    pub ops_during: u64,
    /// Ok acquires whose `[invoke, completion]` overlaps one of them.
    pub grants_during: u64,
    /// Faults of this kind that named each node (`nodes`, a partition's `cut` and
    /// `clients_cut_from`).
    #[serde(default)]
    pub nodes: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShapeCoverage {
    /// Stalls recorded with this shape.
    pub stalls: u64,
    /// Of those, the ones that reached the condition the shape aims at (docs/checkers.md).
    pub reached: u64,
}

/// What the run asked for: fault kinds and client-fault shapes, from its schedule and history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Requested {
    pub faults: Vec<String>,
    pub shapes: Vec<String>,
}

/// One row of the coverage table: a group, the condition, and how many times the run met it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub group: String,
    pub condition: String,
    pub count: u64,
    /// The run asked for this and met it nowhere (`--fail-on coverage` fails on it).
    pub missing: bool,
}

impl Coverage {
    /// Asks for at least one exercised instance of fault kind `kind`, with a row even if the
    /// history never shows one.
    pub fn request_fault(&mut self, kind: &str) {
        if !self.requested.faults.iter().any(|k| k == kind) {
            self.requested.faults.push(kind.to_string());
            self.requested.faults.sort();
        }
        self.faults.entry(kind.to_string()).or_default();
    }

    /// Asks for at least one stall of shape `shape` that reached its condition.
    pub fn request_shape(&mut self, shape: &str) {
        if !self.requested.shapes.iter().any(|k| k == shape) {
            self.requested.shapes.push(shape.to_string());
            self.requested.shapes.sort();
        }
        self.shapes.entry(shape.to_string()).or_default();
    }

    /// Whether fault kind `kind` was exercised: a stall for `client-pause`, otherwise a client
    /// op that overlapped one of its faults.
    pub fn fault_exercised(&self, kind: &str) -> bool {
        if stalls_clients(kind) {
            return self.stalls > 0;
        }
        self.faults.get(kind).is_some_and(|f| f.ops_during > 0)
    }

    /// Exercised faults of the cells `need` counts.
    pub fn exercised(&self, need: &Need) -> u64 {
        self.cells
            .iter()
            .filter(|c| need.counts(c))
            .map(|c| c.exercised)
            .sum()
    }

    /// The needs the run did not meet, each as `label` (with `(k of n)` when it asked for more
    /// than one): what "requested, not exercised" lists.
    pub fn not_exercised(&self) -> Vec<String> {
        self.needs
            .iter()
            .filter_map(|n| {
                let got = self.exercised(n);
                (got < n.times).then(|| {
                    if n.times > 1 {
                        format!("{} ({got} of {})", n.label, n.times)
                    } else {
                        n.label.clone()
                    }
                })
            })
            .collect()
    }

    /// Counts one fault of `cell` (its counts ignored), exercised or not. Cells stay sorted.
    pub fn count_cell(&mut self, mut cell: Cell, exercised: bool) {
        cell.started = 0;
        cell.exercised = 0;
        let key = |c: &Cell| {
            (
                c.kind.clone(),
                c.variant.clone(),
                c.wake.clone(),
                c.role.clone(),
                c.scope.clone(),
            )
        };
        let want = key(&cell);
        let i = match self.cells.binary_search_by(|c| key(c).cmp(&want)) {
            Ok(i) => i,
            Err(i) => {
                self.cells.insert(i, cell);
                i
            }
        };
        self.cells[i].started += 1;
        self.cells[i].exercised += u64::from(exercised);
    }

    /// The requested kinds and shapes the run exercised nowhere, each in a phrase.
    pub fn missing(&self) -> Vec<String> {
        let mut out = Vec::new();
        for k in &self.requested.faults {
            if !self.fault_exercised(k) {
                out.push(if stalls_clients(k) {
                    format!("fault {k}: no client stalled")
                } else {
                    format!("fault {k}: no client op overlapped one")
                });
            }
        }
        for s in &self.requested.shapes {
            if self.shapes.get(s).is_none_or(|c| c.reached == 0) {
                out.push(format!(
                    "client-fault shape {s}: no stall reached its condition"
                ));
            }
        }
        out
    }

    /// The table every renderer shows, in a fixed order; zeros included.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        self.stall_rows(&mut rows);
        self.fault_rows(&mut rows);
        for (shape, c) in &self.shapes {
            let group = format!("shape {shape}");
            let missing = self.requested.shapes.iter().any(|s| s == shape) && c.reached == 0;
            add_row(&mut rows, &group, "stalls", c.stalls, false);
            add_row(
                &mut rows,
                &group,
                "reached its condition",
                c.reached,
                missing,
            );
        }
        for c in &self.cells {
            let group = c.label();
            let unmet = self
                .needs
                .iter()
                .any(|n| n.counts(c) && self.exercised(n) < n.times);
            add_row(&mut rows, &group, "started", c.started, false);
            add_row(
                &mut rows,
                &group,
                "exercised (met its target state)",
                c.exercised,
                unmet,
            );
        }
        rows
    }

    /// The rows of the client stalls and of the long acquire waits: the same rows every run.
    fn stall_rows(&self, rows: &mut Vec<Row>) {
        let (h, v) = (&self.holder, &self.waiter);
        let (w, b, g) = (&h.wake_up, &h.lease_bound, &h.next_grant);
        let fixed: [(&str, &[(&str, u64)]); 6] = [
            (
                "client stalls",
                &[("holder stalls", h.count), ("waiter stalls", v.count)],
            ),
            (
                "holder stall wakes into",
                &[
                    ("renew", w.renew),
                    ("write", w.write),
                    ("release", w.release),
                    ("read", w.read),
                    ("acquire", w.acquire),
                    ("nothing", w.none),
                ],
            ),
            (
                "holder stall end vs its lease",
                &[
                    ("before its lease could end", b.before),
                    ("while it may have ended", b.between),
                    ("0-10% ttl after it surely ended", b.just_past),
                    ("more than 10% ttl after", b.past),
                    ("unknown (no grant known)", b.unknown),
                ],
            ),
            (
                "holder stall end vs others' grants",
                &[
                    ("before any other grant", g.none_yet),
                    ("< 1 ttl after the next grant", g.just_after),
                    ("later: 2+ grants, or >= 1 ttl after", g.later),
                    ("unknown (no grant known)", g.unknown),
                ],
            ),
            (
                "waiter stall",
                &[
                    ("lease lapsed while stalled", v.lease_lapsed),
                    ("lease outlived the stall", v.lease_outlived),
                    ("then granted after the lapse", v.granted_after_lapse),
                ],
            ),
            (
                "acquire waited > 1 ttl",
                &[
                    ("granted", self.waits.granted),
                    ("not granted", self.waits.not_granted),
                ],
            ),
        ];
        for (group, conditions) in fixed {
            for &(c, n) in conditions {
                add_row(rows, group, c, n, false);
            }
        }
    }

    /// The rows of each fault kind the run injected.
    fn fault_rows(&self, rows: &mut Vec<Row>) {
        for (kind, f) in &self.faults {
            let group = format!("fault {kind}");
            let missing =
                self.requested.faults.iter().any(|k| k == kind) && !self.fault_exercised(kind);
            // The row the gate reads: a stall for client-pause, a client op for the others.
            let stall_kind = stalls_clients(kind);
            add_row(rows, &group, "started", f.started, missing && stall_kind);
            add_row(
                rows,
                &group,
                "client ops during",
                f.ops_during,
                missing && !stall_kind,
            );
            add_row(rows, &group, "grants during", f.grants_during, false);
            for (node, n) in &f.nodes {
                add_row(rows, &group, &format!("hit node {node}"), *n, false);
            }
        }
    }
}

/// Whether `kind`'s faults are client stalls (exercised by a stall, not by an op during one).
fn stalls_clients(kind: &str) -> bool {
    crate::FaultFamily::named(kind).is_some_and(crate::FaultFamily::stalls_clients)
}

fn add_row(rows: &mut Vec<Row>, group: &str, condition: &str, count: u64, missing: bool) {
    rows.push(Row {
        group: group.to_string(),
        condition: condition.to_string(),
        count,
        missing,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Aim, FaultFamily, Registered};

    /// A family whose faults stall clients, under client-pause's kind: this crate's unit tests
    /// link no nemesis, and the rows of a stall family differ. Only its kind and its aim are
    /// read here.
    #[linkme::distributed_slice(crate::FAULT_FAMILIES)]
    static CLIENT_STALLS: Registered = Registered {
        place: 0,
        family: &FaultFamily {
            kind: "client-pause",
            aim: Aim::ClientStall,
            ..FaultFamily::UNKNOWN
        },
    };

    #[test]
    fn a_requested_kind_or_shape_never_met_is_missing_and_flagged_in_its_row() {
        let mut c = Coverage::default();
        c.request_fault("pause");
        c.request_fault("client-pause");
        c.request_shape("boundary");
        assert_eq!(
            c.missing(),
            vec![
                "fault client-pause: no client stalled",
                "fault pause: no client op overlapped one",
                "client-fault shape boundary: no stall reached its condition",
            ]
        );
        let flagged: Vec<String> = c
            .rows()
            .into_iter()
            .filter(|r| r.missing)
            .map(|r| r.group)
            .collect();
        assert_eq!(
            flagged,
            ["fault client-pause", "fault pause", "shape boundary"]
        );
        c.faults.get_mut("pause").unwrap().ops_during = 1;
        c.stalls = 1;
        c.shapes.get_mut("boundary").unwrap().reached = 1;
        assert!(c.missing().is_empty());
    }

    fn cell(kind: &str, variant: &str, wake: &str, role: &str) -> Cell {
        Cell {
            kind: kind.into(),
            variant: variant.into(),
            wake: wake.into(),
            role: role.into(),
            ..Cell::default()
        }
    }

    #[test]
    fn needs_are_met_by_exercised_cells_only() {
        let mut c = Coverage::default();
        c.count_cell(cell("clock", "slow", "", "primary"), true);
        c.count_cell(cell("clock", "bump-forward", "", "primary"), false);
        c.count_cell(cell("client-pause", "boundary", "renew", ""), true);
        c.count_cell(cell("client-pause", "boundary", "renew", ""), false);
        let steps = Need {
            label: "clock (a step or a fast clock)".into(),
            kind: "clock".into(),
            variants: vec!["bump-forward".into(), "fast".into()],
            times: 1,
            ..Need::default()
        };
        let renew = Need {
            label: "client-pause boundary/renew".into(),
            kind: "client-pause".into(),
            variants: vec!["boundary".into()],
            wakes: vec!["renew".into()],
            times: 2,
            ..Need::default()
        };
        c.needs = vec![Need::kind("clock"), steps, renew, Need::kind("kill")];
        assert_eq!(
            c.not_exercised(),
            [
                "clock (a step or a fast clock)",
                "client-pause boundary/renew (1 of 2)",
                "kill"
            ]
        );
        assert_eq!(c.cells[0].label(), "client-pause boundary/renew");
        assert_eq!((c.cells[0].started, c.cells[0].exercised), (2, 1));
        assert_eq!(c.cells[1].label(), "clock bump-forward on primary");
        let unmet: Vec<String> = c
            .rows()
            .into_iter()
            .filter(|r| r.missing)
            .map(|r| r.group)
            .collect();
        assert_eq!(
            unmet,
            [
                "client-pause boundary/renew",
                "clock bump-forward on primary"
            ]
        );
    }

    #[test]
    fn zero_rows_are_kept() {
        let rows = Coverage::default().rows();
        assert!(rows.len() >= 20);
        assert!(rows.iter().all(|r| r.count == 0 && !r.missing));
    }
}
