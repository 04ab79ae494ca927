//! `schedule.json`: a [`Schedule`] as a file, version 1.
//!
//! ```json
//! {
//!   "version": 1,
//!   "seed": 7,
//!   "nodes": 3,
//!   "primary": 0,
//!   "faults": [
//!     {"id": "f1", "kind": "pause", "at_ms": 1480, "length_ms": 1210, "nodes": ["n2"]},
//!     {"id": "f2", "kind": "client-pause", "at_ms": 4100, "length_ms": 2600, "window_ms": 1000,
//!      "shape": "boundary", "wake": "renew", "after_ms": 30},
//!     {"id": "f3", "kind": "clock", "at_ms": 8000, "length_ms": 4000, "nodes": ["n1"],
//!      "mode": "bump-forward", "delta_ms": 3000},
//!     {"id": "f4", "kind": "partition", "at_ms": 13000, "length_ms": 2000,
//!      "topology": "halves", "cut": [["n1", "n2"], ["n1", "n3"]], "clients_cut_from": []},
//!     {"id": "f5", "kind": "netem", "at_ms": 16000, "length_ms": 2000, "nodes": ["n3"],
//!      "netem": {"delay_ms": 50, "jitter_ms": 20, "loss_pct": 5.0, "duplicate_pct": 1.0,
//!                "reorder_pct": 5.0}}
//!   ]
//! }
//! ```
//!
//! - `version` (required): 1. `seed` (optional): what the plan was drawn from, a note only.
//!   `nodes`: how many nodes it was drawn for; `primary`: the primary's node (0-based) then.
//!   `by_role` (optional, default false): the faults were aimed at roles, not at nodes. When
//!   the run's primary is another node (an ensemble elected another leader), the faults on
//!   the planned primary go to the run's primary and the other way round; without it they go
//!   to the nodes the file names. `lockpick test` writes its scenarios' schedules by role.
//! - A fault: `id` (unique), `kind` (`pause`, `kill`, `client-pause`, `clock`, `partition`,
//!   `netem`), `at_ms` (start, ms after the run's start), `length_ms` (> 0). Faults are in
//!   start order and never overlap: each ends (`at_ms + length_ms`) before the next starts.
//! - `nodes`: the node ids a pause, kill, clock or netem fault hits (`n1` is the first node).
//! - kill: `then_nodes` (optional), a second wave: killed once `nodes` are back, for the same
//!   `length_ms` (a rolling restart; the fault then ends `2 * length_ms` after `at_ms`).
//! - clock: `mode` (`bump-forward`, `bump-back`, `strobe`: `delta_ms`, the step; `fast`,
//!   `slow`: `rate`, the clock's speed, above 1 for fast and below for slow).
//! - partition: `topology` (the shape's name, a label), `cut` (node pairs that cannot talk),
//!   `clients_cut_from` (nodes the harness's clients cannot reach).
//! - netem: `netem` (default: the planner's; see [`NETEM`](crate::fault::netem::NETEM)).
//! - client-pause: `window_ms`, how long the stall request waits for a lock holder to take it
//!   (default: `length_ms`). Which client stalls is the one holding a lock then (for the
//!   `waiter` shape, one waiting for a lock). `shape` (optional): what the stall is aimed at,
//!   `boundary` (ends `after_ms` past the holder's lease), `next-grant` (ends `after_ms` past
//!   the next grant of the same lock), `long` (lasts `length_ms`) or `waiter` (a client
//!   waiting in acquire stalls for `length_ms`); `length_ms` bounds every shape. `wake`
//!   (holders only): what the holder does first when it wakes, `renew`, `write`, `release` or
//!   `read`. Without `shape` (a file written before shapes) the holder stalls for
//!   `length_ms` and wakes into the workload's next op, as it did then.
//!
//! Unknown keys are refused, so a typo never silently drops part of a fault.

use super::{FaultKind, Payload, PlannedFault, Schedule, MAX_FAULTS};
use crate::fault::{fields_of, Keys};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

/// The format version this build reads and writes.
pub const SCHEDULE_VERSION: u64 = 1;

/// A fault may not end later than this after the run's start (30 days): a bound, and a guard
/// against seconds taken for milliseconds many times over.
pub(crate) const END_MS_MAX: u64 = 30 * 24 * 3_600_000;

/// What is wrong with a schedule, naming the fault when one fault is at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleError {
    /// The fault's id (or `#N`, its position, when it has no usable id).
    pub fault: Option<String>,
    pub message: String,
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fault {
            Some(id) => write!(f, "fault {id}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ScheduleError {}

fn whole(message: impl Into<String>) -> ScheduleError {
    ScheduleError {
        fault: None,
        message: message.into(),
    }
}

pub(crate) fn at(fault: &str, message: impl Into<String>) -> ScheduleError {
    ScheduleError {
        fault: Some(fault.to_string()),
        message: message.into(),
    }
}

/// What the run about to replay a schedule can do, for [`Schedule::check`].
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// The lock service's nodes; 0 when the harness did not start them (`--url`).
    pub nodes: usize,
    /// Whether partitions and netem can run; the error says why not.
    pub netns: Result<(), String>,
    /// Whether faults that move clocks can run; the error says why not.
    pub clock: Result<(), String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    version: Value,
    #[serde(default)]
    seed: Option<u64>,
    nodes: usize,
    #[serde(default)]
    primary: usize,
    #[serde(default)]
    by_role: bool,
    faults: Vec<Value>,
}

/// The keys every fault has in `schedule.json`; a family's own keys are its `Keys`
/// ([`crate::fault::Payload::read`], [`crate::fault::Payload::write`]). Each key of a fault
/// is handed to the one that has it (serde cannot combine `flatten` with
/// `deny_unknown_fields`), and a key none has is refused. The order of the fields is the
/// order of the keys in the file.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFault {
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) at_ms: u64,
    pub(crate) length_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) nodes: Vec<String>,
}

/// A fault as the file is written: the keys every fault has, then its family's.
#[derive(Serialize)]
struct OutFault {
    #[serde(flatten)]
    common: RawFault,
    #[serde(flatten)]
    own: Keys,
}

/// Every key a fault may have, the common ones first, then each family's in `--nemesis`
/// order: what a refusal of an unknown key lists.
fn every_key() -> &'static [&'static str] {
    static KEYS: OnceLock<Vec<&'static str>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = fields_of::<RawFault>().to_vec();
        for kind in FaultKind::ALL {
            keys.extend(kind.keys());
        }
        keys
    })
}

/// A `schedule.json` fault split by who reads each key: the keys every fault has, and each
/// family's that it has keys of, read by that family's `Keys`. A key no one has is refused as
/// serde refuses an unknown field.
fn split(v: Value, label: &str) -> Result<(RawFault, Vec<Keys>), ScheduleError> {
    let to_err = |e: serde_json::Error| at(label, e.to_string());
    let Value::Object(map) = v else {
        // Not an object: serde says what it expected.
        return serde_json::from_value::<RawFault>(v)
            .map(|r| (r, Vec::new()))
            .map_err(to_err);
    };
    let common_keys = fields_of::<RawFault>();
    let mut common = Map::new();
    let mut parts: Vec<(FaultKind, Map<String, Value>)> = Vec::new();
    for (key, value) in map {
        if common_keys.contains(&key.as_str()) {
            common.insert(key, value);
            continue;
        }
        let Some(kind) = FaultKind::ALL
            .into_iter()
            .find(|k| k.keys().contains(&key.as_str()))
        else {
            return Err(to_err(serde::de::Error::unknown_field(&key, every_key())));
        };
        match parts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, part)) => {
                part.insert(key, value);
            }
            None => parts.push((kind, Map::from_iter([(key, value)]))),
        }
    }
    let raw: RawFault = serde_json::from_value(Value::Object(common)).map_err(to_err)?;
    parts.sort_by_key(|(k, _)| *k);
    let mut keys = Vec::with_capacity(parts.len());
    for (kind, part) in parts {
        keys.push(kind.read_keys(part).map_err(to_err)?);
    }
    Ok((raw, keys))
}

/// The first of a family's keys that holds something (a key written empty, `null` or `[]`,
/// says nothing), in the order of its `Keys`.
fn first_set(keys: &Keys) -> Option<&'static str> {
    let written = serde_json::to_value(keys).ok()?;
    let written = written.as_object()?;
    keys.kind()
        .keys()
        .iter()
        .copied()
        .find(|k| written.contains_key(*k))
}

#[derive(Serialize)]
struct OutSchedule {
    version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    nodes: usize,
    primary: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    by_role: bool,
    faults: Vec<OutFault>,
}

/// `n1` for position 0: the runner's node ids.
pub fn node_id(i: usize) -> String {
    format!("n{}", i + 1)
}

pub(crate) fn node_index(fault: &str, id: &str) -> Result<usize, ScheduleError> {
    id.strip_prefix('n')
        .and_then(|k| k.parse::<usize>().ok())
        .filter(|&k| k >= 1 && !id[1..].starts_with('0'))
        .map(|k| k - 1)
        .ok_or_else(|| {
            at(
                fault,
                format!("node {id:?}: expected a node id n1, n2, ..."),
            )
        })
}

/// Node ids read as positions, sorted; a node named twice is refused.
fn read_nodes(id: &str, named: &[String]) -> Result<Vec<usize>, ScheduleError> {
    let mut nodes = Vec::with_capacity(named.len());
    for n in named {
        let i = node_index(id, n)?;
        if nodes.contains(&i) {
            return Err(at(id, format!("node {n} is named twice")));
        }
        nodes.push(i);
    }
    nodes.sort_unstable();
    Ok(nodes)
}

/// For the families that act on nodes: `nodes` is not empty.
pub(crate) fn needs_nodes(id: &str, kind: FaultKind, nodes: &[usize]) -> Result<(), ScheduleError> {
    if nodes.is_empty() {
        return Err(at(
            id,
            format!("a {kind} fault needs `nodes` (e.g. [\"n1\"])"),
        ));
    }
    Ok(())
}

/// For the families that name no nodes in `nodes`: it is empty; `instead` says what they
/// take.
pub(crate) fn refuses_nodes(
    id: &str,
    kind: FaultKind,
    nodes: &[usize],
    instead: &str,
) -> Result<(), ScheduleError> {
    if !nodes.is_empty() {
        return Err(at(
            id,
            format!("`nodes` is not for {kind} faults ({instead})"),
        ));
    }
    Ok(())
}

impl PlannedFault {
    fn to_raw(&self) -> OutFault {
        OutFault {
            common: RawFault {
                id: self.id.clone(),
                kind: self.kind().as_str().to_string(),
                at_ms: self.at_ms,
                length_ms: self.length_ms,
                nodes: self.nodes.iter().map(|&i| node_id(i)).collect(),
            },
            own: self.payload.write(),
        }
    }

    /// Checks what every fault has (its kind, its span, its nodes), refuses another family's
    /// keys, and leaves the rest to its family.
    fn from_raw(r: RawFault, keys: Vec<Keys>) -> Result<PlannedFault, ScheduleError> {
        let id = r.id.as_str();
        let kind: FaultKind = r.kind.parse().map_err(|_| {
            let names = FaultKind::names();
            at(
                id,
                format!("unknown fault kind {:?} (expected {names})", r.kind),
            )
        })?;
        if r.length_ms == 0 {
            return Err(at(id, "length_ms must be positive"));
        }
        if r.at_ms.saturating_add(r.length_ms) > END_MS_MAX {
            return Err(at(id, "ends more than 30 days after the run's start"));
        }
        // Another family's keys, so a typo'd kind or a key on the wrong fault never silently
        // drops part of a fault.
        let mut own = None;
        for k in keys {
            if k.kind() == kind {
                own = Some(k);
            } else if let Some(key) = first_set(&k) {
                return Err(at(
                    id,
                    format!("`{key}` is for {} faults, not {kind}", k.kind()),
                ));
            }
        }
        let own = match own {
            Some(k) => k,
            None => kind
                .read_keys(Map::new())
                .map_err(|e| at(id, e.to_string()))?,
        };
        let nodes = read_nodes(id, &r.nodes)?;
        let payload = Payload::read(own, id, &r, &nodes)?;
        debug_assert_eq!(payload.kind(), kind);
        Ok(PlannedFault {
            id: r.id,
            at_ms: r.at_ms,
            length_ms: r.length_ms,
            nodes,
            payload,
        })
    }

    /// Every node position the fault names (targets, cut ends, nodes cut from clients).
    pub fn nodes_named(&self) -> BTreeSet<usize> {
        let mut all: BTreeSet<usize> = self.nodes.iter().copied().collect();
        all.extend(self.payload.nodes_named());
        all
    }

    /// When the fault ends, in ms since the run's start (a rolling kill's second wave after
    /// the first: the restarts' own time is not counted, as for any kill).
    pub fn end_ms(&self) -> u64 {
        let waves = if self.then_nodes().is_empty() { 1 } else { 2 };
        self.at_ms + self.length_ms * waves
    }
}

impl Schedule {
    /// The file's text: pretty JSON, one key per line.
    pub fn to_json(&self) -> String {
        let out = OutSchedule {
            version: SCHEDULE_VERSION,
            seed: self.seed,
            nodes: self.nodes,
            primary: self.primary,
            by_role: self.by_role,
            faults: self.faults.iter().map(PlannedFault::to_raw).collect(),
        };
        serde_json::to_string_pretty(&out).expect("a schedule always serializes") + "\n"
    }

    /// Reads a schedule file's text and checks what the file alone can say is wrong: the
    /// version, each fault's keys and values, unique ids, and that faults come in start order
    /// without overlapping. [`Schedule::check`] then checks it against the run.
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| whole(format!("not JSON: {e}")))?;
        match value.get("version") {
            Some(v) if v.as_u64() == Some(SCHEDULE_VERSION) => {}
            Some(v) => {
                return Err(whole(format!(
                "version {v} is not one this lockpick reads (it reads version {SCHEDULE_VERSION})"
            )))
            }
            None => return Err(whole("no `version` (this lockpick reads version 1)")),
        }
        // A top-level key missing or of the wrong type: the whole object is at fault, so no line
        // helps; the keys it needs do.
        let raw: RawSchedule = serde_json::from_value(value).map_err(|e| {
            whole(format!(
                "its top level: {e} (a schedule's top level holds `version`, `nodes` and \
                 `faults`, and may hold `seed`, `primary` and `by_role`, as each run's \
                 schedule.json does)"
            ))
        })?;
        let _ = raw.version;
        if raw.faults.len() > MAX_FAULTS {
            return Err(whole(format!(
                "{} faults; a schedule holds at most {MAX_FAULTS}",
                raw.faults.len()
            )));
        }
        if raw.nodes > 0 && raw.primary >= raw.nodes {
            return Err(whole(format!(
                "primary {} is not a node of {} (0-based)",
                raw.primary, raw.nodes
            )));
        }
        let mut faults: Vec<PlannedFault> = Vec::with_capacity(raw.faults.len());
        let mut ids = BTreeSet::new();
        for (i, v) in raw.faults.into_iter().enumerate() {
            let label = v
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| format!("#{}", i + 1));
            let (r, keys) = split(v, &label)?;
            if r.id.is_empty() || r.id.len() > 64 || r.id.chars().any(char::is_whitespace) {
                return Err(at(&label, "`id` must be a short word (f1, f2, ...)"));
            }
            if !ids.insert(r.id.clone()) {
                return Err(at(&label, "the id is used twice"));
            }
            let f = PlannedFault::from_raw(r, keys)?;
            if let Some(prev) = faults.last() {
                if f.at_ms < prev.end_ms() {
                    return Err(at(
                        &f.id,
                        format!(
                            "starts at {} ms, before fault {} ends ({} ms): faults may not overlap",
                            f.at_ms,
                            prev.id,
                            prev.end_ms()
                        ),
                    ));
                }
            }
            faults.push(f);
        }
        Ok(Schedule {
            seed: raw.seed,
            nodes: raw.nodes,
            primary: raw.primary,
            by_role: raw.by_role,
            faults,
        })
    }

    /// Whether the run described by `caps` can take every fault: targets within its nodes,
    /// node faults only on nodes it started, partitions and netem only in namespaces, clock
    /// faults only under libfaketime.
    pub fn check(&self, caps: &Capabilities) -> Result<(), ScheduleError> {
        for f in &self.faults {
            if f.kind().is_server_side() && caps.nodes == 0 {
                return Err(at(
                    &f.id,
                    format!(
                        "{} needs nodes the harness started (this run's target is a --url)",
                        f.kind()
                    ),
                ));
            }
            if let Some(&beyond) = f.nodes_named().iter().find(|&&i| i >= caps.nodes) {
                return Err(at(
                    &f.id,
                    format!(
                        "names node {}, but the run has {} node(s)",
                        node_id(beyond),
                        caps.nodes
                    ),
                ));
            }
            if f.kind().needs_netns() {
                if let Err(why) = &caps.netns {
                    return Err(at(&f.id, format!("{} {why}", f.kind())));
                }
            }
            if f.kind().moves_clocks() {
                if let Err(why) = &caps.clock {
                    return Err(at(&f.id, format!("{} {why}", f.kind())));
                }
            }
        }
        Ok(())
    }

    /// The fault kinds it holds, in `--nemesis` order.
    pub fn kinds(&self) -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|k| self.faults.iter().any(|f| f.kind() == *k))
            .collect()
    }

    /// When its last fault ends (0 without faults), in ms since the run's start.
    pub fn end_ms(&self) -> u64 {
        self.faults
            .iter()
            .map(PlannedFault::end_ms)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{plan, ClientFault, ScheduleConfig, StallAim, Targets, WakeOp};
    use super::*;

    fn cfg(seed: u64, nodes: usize) -> ScheduleConfig {
        ScheduleConfig {
            seed,
            faults: FaultKind::ALL.to_vec(),
            interval_ms: 1000,
            duration_ms: 30_000,
            ttl_ms: 1000,
            clock_modes: vec![],
            topologies: vec![],
            nodes,
            primary: 0,
            targets: Targets::Minority,
            clock_bump_ms: 3000,
            clock_rate: 4.0,
            client_faults: Default::default(),
        }
    }

    fn caps(nodes: usize) -> Capabilities {
        Capabilities {
            nodes,
            netns: Ok(()),
            clock: Ok(()),
        }
    }

    #[test]
    fn a_plan_round_trips_through_its_file() {
        for seed in 0..30 {
            for nodes in [1, 3, 5] {
                let p = plan(&cfg(seed, nodes));
                let text = p.to_json();
                let back = Schedule::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
                assert_eq!(back, p, "{text}");
                back.check(&caps(nodes)).unwrap();
                assert!(text.contains("\"version\": 1"));
            }
        }
    }

    fn one(fault: &str) -> String {
        format!(r#"{{"version": 1, "nodes": 3, "primary": 0, "faults": [{fault}]}}"#)
    }

    fn err(text: &str) -> String {
        Schedule::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn bad_files_name_the_fault() {
        let e = err(&one(
            r#"{"id": "f3", "kind": "pauze", "at_ms": 1, "length_ms": 5, "nodes": ["n1"]}"#,
        ));
        assert!(
            e.starts_with("fault f3: unknown fault kind \"pauze\""),
            "{e}"
        );
        let e = err(&one(
            r#"{"id": "f2", "kind": "pause", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "colour": 1}"#,
        ));
        assert!(e.starts_with("fault f2: unknown field `colour`"), "{e}");
        let e = err(&one(
            r#"{"id": "f1", "kind": "pause", "at_ms": 1, "length_ms": 5}"#,
        ));
        assert!(
            e.starts_with("fault f1: a pause fault needs `nodes`"),
            "{e}"
        );
        let e = err(&one(
            r#"{"id": "f1", "kind": "pause", "at_ms": 1, "length_ms": 5, "nodes": ["x1"]}"#,
        ));
        assert!(e.starts_with("fault f1: node \"x1\""), "{e}");
        let e = err(&one(
            r#"{"id": "f4", "kind": "clock", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "mode": "fast", "rate": 0.5}"#,
        ));
        assert!(e.starts_with("fault f4: rate 0.5 does not fit fast"), "{e}");
        let e = err(&one(
            r#"{"kind": "pause", "at_ms": 1, "length_ms": 5, "nodes": ["n1"]}"#,
        ));
        assert!(e.starts_with("fault #1: missing field `id`"), "{e}");
        let e = err(r#"{"version": 2, "nodes": 1, "faults": []}"#);
        assert!(
            e.starts_with("version 2 is not one this lockpick reads"),
            "{e}"
        );
        let e = err(r#"{"nodes": 1, "faults": []}"#);
        assert!(e.starts_with("no `version`"), "{e}");
        let e = err(r#"{"version": 1, "faults": []}"#);
        assert!(
            e.starts_with("its top level: missing field `nodes`")
                && e.contains("holds `version`, `nodes` and `faults`"),
            "{e}"
        );
        let e = err(r#"{"version": 1, "nodes": 1, "faults": ["#);
        assert!(e.starts_with("not JSON"), "{e}");
        let two = r#"{"version": 1, "nodes": 3, "faults": [
            {"id": "f1", "kind": "pause", "at_ms": 1000, "length_ms": 500, "nodes": ["n1"]},
            {"id": "f2", "kind": "kill", "at_ms": 1400, "length_ms": 500, "nodes": ["n2"]}]}"#;
        let e = err(two);
        assert!(
            e.starts_with("fault f2: starts at 1400 ms, before fault f1 ends (1500 ms)"),
            "{e}"
        );
        let dup = two.replace("\"f2\"", "\"f1\"").replace("1400", "1600");
        assert!(
            err(&dup).starts_with("fault f1: the id is used twice"),
            "{}",
            err(&dup)
        );
    }

    /// A rolling kill reads back as written, ends after both waves, and a second wave that
    /// repeats the first or sits on another kind is named.
    #[test]
    fn rolling_kills_read_back_and_bad_ones_are_named() {
        let text = one(
            r#"{"id": "f1", "kind": "kill", "at_ms": 100, "length_ms": 50, "nodes": ["n3"], "then_nodes": ["n2"]}"#,
        );
        let s = Schedule::parse(&text).unwrap();
        let f = &s.faults[0];
        assert_eq!(
            (f.nodes.clone(), f.then_nodes().to_vec()),
            (vec![2], vec![1])
        );
        assert_eq!(f.end_ms(), 200);
        assert_eq!(Schedule::parse(&s.to_json()).unwrap(), s);
        for (fault, want) in [
            (
                r#"{"id": "f1", "kind": "kill", "at_ms": 1, "length_ms": 5, "nodes": ["n3"], "then_nodes": ["n3"]}"#,
                "fault f1: node n3 is named twice (`then_nodes` is a second wave, apart from `nodes`)",
            ),
            (
                r#"{"id": "f2", "kind": "pause", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "then_nodes": ["n2"]}"#,
                "fault f2: `then_nodes` is for kill faults, not pause",
            ),
            (
                r#"{"id": "f3", "kind": "kill", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "then_nodes": ["m2"]}"#,
                "fault f3: node \"m2\": expected a node id n1, n2, ...",
            ),
        ] {
            assert_eq!(err(&one(fault)), want);
        }
        // The second wave counts against the run's nodes, as the first does.
        let beyond = one(
            r#"{"id": "f4", "kind": "kill", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "then_nodes": ["n4"]}"#,
        );
        let e = Schedule::parse(&beyond)
            .unwrap()
            .check(&caps(3))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "fault f4: names node n4, but the run has 3 node(s)"
        );
    }

    #[test]
    fn client_pause_shapes_read_back_and_bad_ones_are_named() {
        let f = |extra: &str| {
            one(&format!(
                r#"{{"id": "f2", "kind": "client-pause", "at_ms": 1, "length_ms": 3000{extra}}}"#
            ))
        };
        // A file from before shapes: no shape, the old behaviour.
        let s = Schedule::parse(&f("")).unwrap();
        assert_eq!(s.faults[0].client(), None);
        let s = Schedule::parse(&f(
            r#", "shape": "next-grant", "wake": "write", "after_ms": 40"#,
        ))
        .unwrap();
        assert_eq!(
            s.faults[0].client(),
            Some(ClientFault {
                aim: StallAim::NextGrant,
                wake: Some(WakeOp::Write),
                after_ms: 40
            })
        );
        assert_eq!(Schedule::parse(&s.to_json()).unwrap(), s);
        // An offset past the bound (a length shrink halved) is kept: the bound ends the stall.
        let s = Schedule::parse(&f(
            r#", "shape": "boundary", "wake": "renew", "after_ms": 5000"#,
        ))
        .unwrap();
        assert_eq!(s.faults[0].client().unwrap().after_ms, 5000);
        let s = Schedule::parse(&f(r#", "shape": "waiter""#)).unwrap();
        assert_eq!(s.faults[0].client().unwrap().wake, None);
        for (extra, want) in [
            (
                r#", "shape": "sideways", "wake": "renew""#,
                "fault f2: unknown stall aim \"sideways\"",
            ),
            (
                r#", "shape": "long""#,
                "fault f2: a long stall needs `wake`",
            ),
            (
                r#", "shape": "long", "wake": "nap""#,
                "fault f2: unknown wake-up op \"nap\"",
            ),
            (
                r#", "shape": "waiter", "wake": "renew""#,
                "fault f2: `wake` is for holder stalls",
            ),
            (
                r#", "shape": "boundary", "wake": "renew""#,
                "fault f2: a boundary stall needs `after_ms`",
            ),
            (
                r#", "shape": "long", "wake": "read", "after_ms": 5"#,
                "fault f2: `after_ms` is for boundary",
            ),
            (
                r#", "wake": "read""#,
                "fault f2: `wake` and `after_ms` need a `shape`",
            ),
        ] {
            let e = err(&f(extra));
            assert!(e.starts_with(want), "{extra}: {e}");
        }
        let e = err(&one(
            r#"{"id": "f1", "kind": "pause", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "shape": "long"}"#,
        ));
        assert!(
            e.starts_with("fault f1: `shape` is for client-pause faults"),
            "{e}"
        );
    }

    /// Each key goes to the family that has it: one no family has is refused as serde
    /// refuses an unknown field, listing every key; another family's key is named with its
    /// family, unless it holds nothing (`null`, `[]`), which reads as absent.
    #[test]
    fn each_key_goes_to_its_family() {
        let e = err(&one(
            r#"{"id": "f2", "kind": "pause", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "colour": 1}"#,
        ));
        assert_eq!(
            e,
            "fault f2: unknown field `colour`, expected one of `id`, `kind`, `at_ms`, \
             `length_ms`, `nodes`, `then_nodes`, `window_ms`, `shape`, `wake`, `after_ms`, \
             `mode`, `delta_ms`, `rate`, `topology`, `cut`, `clients_cut_from`, `netem`"
        );
        let e = err(&one(
            r#"{"id": "f3", "kind": "kill", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "rate": 2.0, "mode": "fast"}"#,
        ));
        assert_eq!(e, "fault f3: `mode` is for clock faults, not kill");
        let e = err(&one(
            r#"{"id": "f3", "kind": "clock", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "mode": 7}"#,
        ));
        assert!(e.starts_with("fault f3: invalid type: integer `7`"), "{e}");
        let e = err(r#"{"version": 1, "nodes": 3, "faults": [5]}"#);
        assert!(e.starts_with("fault #1: invalid type: integer `5`"), "{e}");
        let quiet = one(
            r#"{"id": "f1", "kind": "pause", "at_ms": 1, "length_ms": 5, "nodes": ["n1"], "mode": null, "then_nodes": []}"#,
        );
        let s = Schedule::parse(&quiet).unwrap();
        assert_eq!(s.faults[0].kind(), FaultKind::Pause);
    }

    #[test]
    fn checks_against_the_run_name_the_fault() {
        let s = Schedule::parse(&one(
            r#"{"id": "f7", "kind": "kill", "at_ms": 1, "length_ms": 5, "nodes": ["n3"]}"#,
        ))
        .unwrap();
        s.check(&caps(3)).unwrap();
        let e = s.check(&caps(2)).unwrap_err().to_string();
        assert_eq!(e, "fault f7: names node n3, but the run has 2 node(s)");
        let e = s.check(&caps(0)).unwrap_err().to_string();
        assert!(
            e.starts_with("fault f7: kill needs nodes the harness started"),
            "{e}"
        );
        let p = Schedule::parse(&one(
            r#"{"id": "f5", "kind": "partition", "at_ms": 1, "length_ms": 5, "topology": "isolate", "cut": [["n2", "n1"]]}"#,
        ))
        .unwrap();
        assert_eq!(p.faults[0].partition().unwrap().cut, vec![(0, 1)]);
        let e = p
            .check(&Capabilities {
                nodes: 3,
                netns: Err("needs --runtime netns".into()),
                clock: Ok(()),
            })
            .unwrap_err()
            .to_string();
        assert_eq!(e, "fault f5: partition needs --runtime netns");
    }
}
