//! What a run exercised (`results.json`'s `coverage`): client stalls by how they ended, waiter
//! stalls, long lock waits, client ops and grants during each fault kind, the nodes each kind
//! hit, and the client-fault shapes the run asked for. The checkers count it from the history
//! (docs/checkers.md, "Coverage", defines every row); the reports show [`Coverage::rows`], and
//! `--fail-on coverage` fails a run whose [`Coverage::missing`] is not empty.
//!
//! Only counts: a 10M-event history costs a few hundred bytes here.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
        if kind == "client-pause" {
            return self.stalls > 0;
        }
        self.faults.get(kind).is_some_and(|f| f.ops_during > 0)
    }

    /// The requested kinds and shapes the run exercised nowhere, each in a phrase.
    pub fn missing(&self) -> Vec<String> {
        let mut out = Vec::new();
        for k in &self.requested.faults {
            if !self.fault_exercised(k) {
                out.push(if k == "client-pause" {
                    "fault client-pause: no client stalled".to_string()
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
        let mut add = |group: &str, condition: &str, count: u64, missing: bool| {
            rows.push(Row {
                group: group.to_string(),
                condition: condition.to_string(),
                count,
                missing,
            })
        };
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
                add(group, c, n, false);
            }
        }
        for (kind, f) in &self.faults {
            let group = format!("fault {kind}");
            let missing =
                self.requested.faults.iter().any(|k| k == kind) && !self.fault_exercised(kind);
            // The row the gate reads: a stall for client-pause, a client op for the others.
            let stall_kind = kind == "client-pause";
            add(&group, "started", f.started, missing && stall_kind);
            add(
                &group,
                "client ops during",
                f.ops_during,
                missing && !stall_kind,
            );
            add(&group, "grants during", f.grants_during, false);
            for (node, n) in &f.nodes {
                add(&group, &format!("hit node {node}"), *n, false);
            }
        }
        for (shape, c) in &self.shapes {
            let group = format!("shape {shape}");
            let missing = self.requested.shapes.iter().any(|s| s == shape) && c.reached == 0;
            add(&group, "stalls", c.stalls, false);
            add(&group, "reached its condition", c.reached, missing);
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn zero_rows_are_kept() {
        let rows = Coverage::default().rows();
        assert!(rows.len() >= 20);
        assert!(rows.iter().all(|r| r.count == 0 && !r.missing));
    }
}
