//! The serialized form of checker results (`results.json`): what reports read.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// A three-valued verdict. Serialized as `true`, `false` or `null` (unknown): only a valid
/// verdict is truthy, so a script that reads `valid` as a boolean (`jq -e .valid`, Python's
/// `if r["valid"]`) never passes an unknown one. Read back from those, and from the words
/// (`"unknown"` is what results.json held before).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Validity {
    Valid,
    Invalid,
    /// The history proves nothing either way (too little happened, or a checker could not finish).
    Unknown,
}

impl Validity {
    /// Combines verdicts: invalid beats unknown beats valid.
    pub fn merge(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (Invalid, _) | (_, Invalid) => Invalid,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => Valid,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::Invalid => "invalid",
            Validity::Unknown => "unknown",
        }
    }
    /// The process exit code for this verdict (see [`crate::ExitCode`]).
    pub fn exit_code(self) -> crate::ExitCode {
        match self {
            Validity::Valid => crate::ExitCode::Valid,
            Validity::Invalid => crate::ExitCode::Invalid,
            Validity::Unknown => crate::ExitCode::Unknown,
        }
    }
}

impl fmt::Display for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Validity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::Valid => s.serialize_bool(true),
            Validity::Invalid => s.serialize_bool(false),
            Validity::Unknown => s.serialize_unit(),
        }
    }
}

impl<'de> Deserialize<'de> for Validity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Validity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true, false or null")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Validity, E> {
                Ok(Validity::Unknown)
            }
            fn visit_none<E: de::Error>(self) -> Result<Validity, E> {
                Ok(Validity::Unknown)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Validity, E> {
                Ok(if v {
                    Validity::Valid
                } else {
                    Validity::Invalid
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Validity, E> {
                match v {
                    "unknown" => Ok(Validity::Unknown),
                    "valid" => Ok(Validity::Valid),
                    "invalid" => Ok(Validity::Invalid),
                    _ => Err(E::custom(format!("unknown validity {v:?}"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Every violation and warning kind docs/checkers.md defines, one entry each: its variant,
/// its name in results.json and `--fail-on`, its class, and the sentence a report shows above
/// its violations (why a correct service cannot produce it). The entry is the whole of a
/// kind's facts; its rule and its injector are its checker's (checkers/src).
macro_rules! violation_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $class:ident, $meaning:expr; )+) => {
        /// Every violation and warning kind docs/checkers.md defines.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum ViolationKind {
            $( $(#[$doc])* #[serde(rename = $name)] $variant, )+
        }

        impl ViolationKind {
            pub const ALL: [ViolationKind; [$($name),+].len()] = [$(ViolationKind::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ViolationKind::$variant => $name,)+
                }
            }

            /// Why a correct service cannot produce this, in one sentence a report shows above
            /// the violations of the kind.
            pub fn meaning(self) -> &'static str {
                match self {
                    $(ViolationKind::$variant => $meaning,)+
                }
            }

            /// Safety, liveness, or a warning.
            pub fn class(self) -> KindClass {
                match self {
                    $(ViolationKind::$variant => KindClass::$class,)+
                }
            }
        }
    };
}

/// The stale-release and stale-renew sentence: one rule read for two ops.
const STALE_LOCK_OP: &str = "A release or renew with a token older than a grant that completed before it must be refused: the old holder no longer owns the lock.";

violation_kinds! {
    DoubleGrant = "double-grant", Safety,
        "A correct lock service grants a lock to one client at a time. The ops below prove that one grant took effect while another grant surely still held the lock (its lease not yet over, or its session still believed alive), whatever the timing inside each op (docs/checkers.md, double-grant).";
    GrantOnExpiredLease = "grant-on-expired-lease", Safety,
        "A grant or renewal may only extend a lease that is still alive; this one completed after the lease was surely dead, so another client may already hold the lock.";
    /// The service's own versioned store, read at the revision its grant answered at, holds no
    /// lock key for that grant (etcd: the key of a lease that expired while its client waited).
    GrantWithoutKey = "grant-without-key", Safety,
        "A grant must hold at the point the service answered at: here the service's own store, read at the revision its answer carries, has no lock key for this grant (its lease was gone), so the lock was free or someone else's when the service said yes.";
    TokenReused = "token-reused", Safety,
        "Fencing tokens must be unique per lock: two grants with the same token make the resource unable to tell the old holder from the new one.";
    TokenRegressed = "token-regressed", Safety,
        "A grant that starts after another completed must carry a larger token; otherwise the resource would reject the new holder or accept the old one.";
    StaleWriteAccepted = "stale-write-accepted", Safety,
        "A fenced resource must refuse a token lower than one it has already accepted; here it accepted a write from an older holder after a newer one's.";
    LostUpdate = "lost-update", Safety,
        "Each holder writes the value it read plus one under the lock; two acknowledged writes of one value (or a final read below the number of writes) prove an update was lost.";
    StaleReleaseAccepted = "stale-release-accepted", Safety,
        STALE_LOCK_OP;
    StaleRenewAccepted = "stale-renew-accepted", Safety,
        STALE_LOCK_OP;
    LockStuck = "lock-stuck", Liveness,
        "Once every lease has surely expired (plus the grace), a correct service grants the lock again; it kept answering `held` to every acquire.";
    /// Clients each held a lock and waited for another's, in a cycle, and nothing broke the
    /// cycle (no wait answered, no lease lapsed) for the liveness grace past every wait's own
    /// `wait_ms` (docs/checkers.md, deadlock).
    Deadlock = "deadlock", Liveness,
        "Each client in the cycle held a lock the next one waited for, and nothing broke the cycle: no wait was answered (a correct service refuses a wait once its wait_ms is over) and no lease lapsed, for the liveness grace past every wait's wait_ms. Acquiring the locks in one order (--lock-order-policy sorted) makes such a cycle impossible.";
    /// The bank's accounts, every transfer applied whole, do not sum to what they started
    /// with (docs/checkers.md, total-changed).
    TotalChanged = "total-changed", Safety,
        "A transfer moves money from one account to another and never changes the total; with every transfer applied whole, a total that changed proves two transfers overwrote each other's balances: their critical sections were not exclusive, or the store took a stale write.";
    /// The bank's critical sections, judged by the versions they read and wrote, form a cycle
    /// no order of them run one at a time can give (docs/checkers.md, non-serializable).
    NonSerializable = "non-serializable", Safety,
        "Critical sections guarded by a lock run one at a time, so some order of them explains every balance each one read and wrote. The store numbers each account's accepted writes and each read says which version it saw; these sections depend on each other in a circle (each read what the next overwrote, or wrote what the next read or overwrote), so no order exists: two of them were inside their critical sections at once, or the store took a stale write.";
    /// A warning, not a service bug: a paused holder outlived its lease while another held.
    UnsafeOverlap = "unsafe-overlap", Warning,
        "Not a service bug: the client's lease had surely expired while another client held the lock, yet it still acted as holder. Only fencing at the resource makes this safe; the sentence says what the store did.";
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KindClass {
    Safety,
    Liveness,
    Warning,
}

/// A fault that was active during a violation's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveFault {
    /// Index of the nemesis op that started it.
    pub index: u64,
    /// Its function, e.g. `start-pause`.
    pub f: String,
    /// What was done to which node.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub value: serde_json::Value,
}

/// One violation (or warning): what the history proves, and how a reader can check it by hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    pub kind: ViolationKind,
    /// The lock (or store key) concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// Indices of the ops that prove it.
    pub ops: Vec<u64>,
    /// `[start, end]` in history time.
    pub window_ns: [u64; 2],
    /// Faults active during the window.
    #[serde(default)]
    pub nemesis: Vec<ActiveFault>,
    /// One plain sentence.
    pub explanation: String,
    /// A cycle the violation is (a deadlock's waits, a non-serializable run of critical
    /// sections): its edges in order, the last leading back to the first's start, for the
    /// report's drawing. Empty for every other kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<CycleEdge>,
}

/// One edge of a violation's cycle: who depends on whom, and why in a few words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleEdge {
    /// The node it leaves (`p1`, `transfer 12 (p3)`).
    pub from: String,
    /// The node it reaches.
    pub to: String,
    /// Why (`waits for A1`, `rw balance-A0 v7`).
    pub label: String,
}

/// The violations of one root cause, grouped after the checkers ran (checkers/src/incidents.rs):
/// one double grant, or one token reset, with what followed from it (the tokens reused and
/// regressed, the stale releases and writes accepted), so a reader meets the cause once instead
/// of as dozens of violations of four kinds. Every violation of `Results::violations` is in
/// exactly one incident; grouping changes no count and no verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    /// What the incident is: `double-grant`, `token-reset` (the lock's tokens went back, with
    /// no double grant proven), or the kind of its only or first violation.
    pub cause: String,
    /// The lock (or store key) concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// Its root violation: a position in `Results::violations`.
    pub root: usize,
    /// Every member, root first, then in the order of `Results::violations` (positions).
    pub violations: Vec<usize>,
    /// Members by kind, the root's included.
    pub kinds: BTreeMap<String, u64>,
    /// The members' windows, joined.
    pub window_ns: [u64; 2],
    /// When the lock's tokens went back: the highest token granted before (`from`), the
    /// first token granted below or at it (`to`), and that grant's op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_reset: Option<TokenReset>,
    /// Members that are `token-regressed` by exclusivity, not by real time: the tokens rose in
    /// the order the grants answered, and the one with the higher token came while the other's
    /// lease surely lasted. They follow from the overlap, not from a token counter going back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_overlap: Vec<usize>,
    /// One sentence: the cause, where and when.
    pub explanation: String,
}

/// A lock's tokens going back (see [`Incident::token_reset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenReset {
    pub from: u64,
    pub to: u64,
    pub op: u64,
}

/// What one checker concluded. In results.json a checker that judged nothing has a `valid`
/// of `null` beside `not_judged`'s reason, so that a script reading only `valid` never counts
/// it as a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "CheckerWire", from = "CheckerWire")]
pub struct CheckerResult {
    pub name: String,
    pub valid: Validity,
    /// Violations found.
    pub violations: u64,
    pub warnings: u64,
    /// Why the verdict is unknown, or other notes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Set when the history held nothing this checker's rules read (no store write for the
    /// store's fencing, no lease evidence for `grant-on-expired-lease`, ...): why. Such a
    /// checker found nothing because it looked at nothing, so it is shown as `not-judged`,
    /// never as a pass; it does not change the run's verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_judged: Option<String>,
}

/// [`CheckerResult`] as results.json holds it: `valid` is the checker's status.
#[derive(Serialize, Deserialize)]
struct CheckerWire {
    name: String,
    valid: Status,
    violations: u64,
    warnings: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    not_judged: Option<String>,
}

/// A checker's `valid` in results.json: its verdict, or not judged (`null`, as an unknown
/// verdict is: `not_judged` beside it tells the two apart).
enum Status {
    Verdict(Validity),
    NotJudged,
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Status::Verdict(v) => v.serialize(s),
            Status::NotJudged => s.serialize_unit(),
        }
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            // What results.json held for a while, and what a reader may write by hand.
            serde_json::Value::String(s) if s == "not-judged" => Ok(Status::NotJudged),
            v => Validity::deserialize(v)
                .map(Status::Verdict)
                .map_err(de::Error::custom),
        }
    }
}

impl From<CheckerResult> for CheckerWire {
    fn from(c: CheckerResult) -> CheckerWire {
        let valid = match (&c.not_judged, c.valid) {
            (Some(_), Validity::Valid) => Status::NotJudged,
            (_, v) => Status::Verdict(v),
        };
        CheckerWire {
            name: c.name,
            valid,
            violations: c.violations,
            warnings: c.warnings,
            notes: c.notes,
            not_judged: c.not_judged,
        }
    }
}

impl From<CheckerWire> for CheckerResult {
    fn from(w: CheckerWire) -> CheckerResult {
        let (valid, not_judged) = match (w.valid, w.not_judged) {
            // A reason lost by a hand edit is still a checker that judged nothing.
            (Status::NotJudged, why) => (Validity::Valid, why.or_else(|| Some(String::new()))),
            // `null` with a reason: not judged; without one, unknown.
            (Status::Verdict(Validity::Unknown), Some(why)) => (Validity::Valid, Some(why)),
            (Status::Verdict(v), why) => (v, why),
        };
        CheckerResult {
            name: w.name,
            valid,
            violations: w.violations,
            warnings: w.warnings,
            notes: w.notes,
            not_judged,
        }
    }
}

impl CheckerResult {
    /// `valid`, `invalid`, `unknown` or `not-judged`: what a reader is shown.
    pub fn status(&self) -> &'static str {
        if self.not_judged.is_some() && self.valid != Validity::Invalid {
            "not-judged"
        } else {
            self.valid.as_str()
        }
    }
}

/// Latency percentiles in milliseconds, by nearest rank: exact while a function has at most
/// 262,144 latencies; past that, each is the top of its bucket of 3 significant digits (at
/// most 0.1% above the exact rank), so that what the checker keeps does not grow with the
/// history. `count` and `max_ms` are always exact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Whole-history statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub events: u64,
    pub duration_ns: u64,
    /// `f -> outcome -> count` (outcome: ok, fail, info, pending).
    pub ops: BTreeMap<String, BTreeMap<String, u64>>,
    /// Latency of completed lock and store ops, by `f`.
    pub latency: BTreeMap<String, Percentiles>,
    pub grants: u64,
    pub nemesis_events: u64,
    /// Faults started, by kind (`pause`, `kill`, `partition`, `clock`, `client-pause`, ...):
    /// with the op counts, what a verdict rests on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub faults: BTreeMap<String, u64>,
    /// Fail and info completions by op, outcome and reason code (`acquire -> fail -> held ->
    /// 9584`, `acquire -> info -> http-423 -> 8352`; see [`crate::reason`]): why ops did not
    /// take effect, in the words a reader can act on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>,
    /// Further figures a checker wants to show.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// How the run's note that its history proves nothing whatever the rules (empty, or too few
/// grants) ends: the checkers write it, the summary shows it beside the verdict.
pub const PROVES_NOTHING: &str = "proves nothing";

/// The content of `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub valid: Validity,
    pub violations: Vec<Violation>,
    /// The violations grouped by root cause ([`Incident`]); empty when there are none, and in
    /// a results.json written before incidents were grouped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incidents: Vec<Incident>,
    /// The first warnings by time, at most `checkers::WARNINGS_LISTED_MAX`.
    pub warnings: Vec<Violation>,
    /// Warnings found past those listed: counted (here and in each checker's `warnings`), not
    /// kept. 0 in a results.json written before the list had a limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warnings_unlisted: u64,
    /// Violations no lease-based service can avoid under a fault the run opted into (its
    /// monotonic clock stepped or sped, `--clock-scope all`): proven, reported, and kept out of
    /// the verdict, which then rests on the resource's fencing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<Violation>,
    pub checkers: Vec<CheckerResult>,
    pub stats: Stats,
    /// What the run exercised ([`crate::coverage`]). `None` in a results.json written before
    /// coverage was counted: `lockpick check RUN_DIR` counts it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<crate::Coverage>,
    /// Notes from reading the history (e.g. a truncated final line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// How the run that recorded the history ended (a run always writes it; a history checked
    /// on its own has none). See [`crate::Completeness`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completeness: Option<crate::Completeness>,
    /// The history file this verdict was judged from ([`JudgedFrom`]): what tells a
    /// results.json that is the verdict of its history from one that is not. `None` for a
    /// verdict not judged from a file, and in a results.json written before it was recorded
    /// (whose staleness is then judged by modification times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_from: Option<JudgedFrom>,
    /// The service's own evidence on the ops the violations and warnings name, by op index:
    /// the fields of each op's line that are no field of lockpick's own (the backend pid, the
    /// ZooKeeper session, the Redis node and offset, a grant's own name), so a sentence can be
    /// checked against the service's own words. At most [`EVIDENCE_OPS_MAX`] ops.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub evidence: std::collections::BTreeMap<u64, serde_json::Map<String, serde_json::Value>>,
}

/// The most ops whose evidence [`Results::evidence`] keeps: the first violations' ops are the
/// ones read first.
pub const EVIDENCE_OPS_MAX: usize = 64;
/// The most fields kept of one op's evidence.
pub const EVIDENCE_FIELDS_MAX: usize = 12;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Results {
    /// Every warning found: those listed and those only counted.
    pub fn warnings_found(&self) -> u64 {
        self.warnings.len() as u64 + self.warnings_unlisted
    }

    /// The op indices whose evidence is wanted: those the violations name, then the
    /// warnings', in order, at most [`EVIDENCE_OPS_MAX`].
    pub fn evidence_wanted(&self) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        for v in self.violations.iter().chain(&self.warnings) {
            for &i in &v.ops {
                if out.len() >= EVIDENCE_OPS_MAX {
                    return out;
                }
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
        out
    }

    /// Keeps `op`'s evidence: the fields of its `value` no typed field of lockpick's holds
    /// (`value.extra`) but the workload's own context ([`crate::evidence::is_workload_context`]:
    /// a bank op's transfer, an acquire's wait), at most [`EVIDENCE_FIELDS_MAX`], long strings
    /// cut.
    pub fn keep_evidence(&mut self, op: &crate::Op) {
        let mut fields = serde_json::Map::new();
        let said =
            (op.value.extra.iter()).filter(|(k, _)| !crate::evidence::is_workload_context(k));
        for (k, v) in said.take(EVIDENCE_FIELDS_MAX) {
            let v = match v {
                serde_json::Value::String(s) if s.chars().count() > 80 => {
                    serde_json::Value::String(s.chars().take(80).collect::<String>() + "...")
                }
                serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                    let t = v.to_string();
                    if t.chars().count() > 80 {
                        serde_json::Value::String(t.chars().take(80).collect::<String>() + "...")
                    } else {
                        v.clone()
                    }
                }
                _ => v.clone(),
            };
            fields.insert(k.clone(), v);
        }
        if !fields.is_empty() {
            self.evidence.insert(op.index, fields);
        }
    }
}

/// The history a verdict was judged from, by content: its length in bytes and its BLAKE3
/// (lowercase hex, as `b3sum` prints it), read before it was checked. A results.json whose
/// history no longer has both is stale, whatever the files' modification times say: a hand
/// edit, a `cp -p` or a `touch` moves them, not the content. A results.json written before
/// BLAKE3 holds the SHA-256 instead (a fifth of the CPU of a 10M-event check); it is still
/// compared by that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedFrom {
    pub bytes: u64,
    /// Empty when the history changed while it was judged: then it matches no history.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub blake3: String,
    /// Only in a results.json written before `blake3`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sha256: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An op's evidence is what the service said on it: the grant's name and an adapter's
    /// fields, never the workload's own context of the op (a bank transfer, an acquire's wait).
    #[test]
    fn kept_evidence_is_the_services_words_only() {
        let line = r#"{"index":6,"time_ns":5,"process":1,"type":"ok","f":"acquire","lock":"a0","value":{"token":3,"transfer":9,"wait_ms":100,"round":2,"grant":"g-17","redis_node":"n1"}}"#;
        let op: crate::Op = serde_json::from_str(line).unwrap();
        let mut r: Results = serde_json::from_value(serde_json::json!({
            "valid": true, "violations": [], "warnings": [], "checkers": [],
            "stats": crate::Stats::default(),
        }))
        .unwrap();
        r.keep_evidence(&op);
        let kept: Vec<&str> = r.evidence[&6].keys().map(String::as_str).collect();
        assert_eq!(kept, ["grant", "redis_node"]);
        // Nothing said by the service: nothing kept for the op.
        let line = r#"{"index":8,"time_ns":6,"process":1,"type":"invoke","f":"acquire","lock":"a0","value":{"transfer":9,"wait_ms":100}}"#;
        r.keep_evidence(&serde_json::from_str(line).unwrap());
        assert!(!r.evidence.contains_key(&8));
    }

    /// A checker that judged nothing has a `null` `valid` in results.json, never `true`, and an
    /// unknown verdict is `null` too: only a pass is truthy. Each reads back as it was.
    #[test]
    fn a_checker_that_judged_nothing_is_never_written_valid() {
        let checker = |valid, not_judged: Option<&str>| CheckerResult {
            name: "c".into(),
            valid,
            violations: 0,
            warnings: 0,
            notes: vec![],
            not_judged: not_judged.map(str::to_string),
        };
        let cases = [
            (
                checker(Validity::Valid, Some("no store write")),
                serde_json::Value::Null,
            ),
            (checker(Validity::Valid, None), serde_json::json!(true)),
            (checker(Validity::Invalid, None), serde_json::json!(false)),
            (checker(Validity::Unknown, None), serde_json::Value::Null),
            // Found something anyway: its verdict stands.
            (
                checker(Validity::Invalid, Some("x")),
                serde_json::json!(false),
            ),
        ];
        for (c, want) in cases {
            let json = serde_json::to_value(&c).unwrap();
            assert_eq!(json["valid"], want, "{c:?}");
            assert_eq!(
                json.get("not_judged").and_then(|v| v.as_str()),
                c.not_judged.as_deref()
            );
            let back: CheckerResult = serde_json::from_value(json).unwrap();
            assert_eq!(back, c);
            assert_eq!(back.status(), c.status());
        }
        // A hand-edited file that lost the reason still reads as not judged.
        let back: CheckerResult = serde_json::from_value(serde_json::json!({
            "name": "c", "valid": "not-judged", "violations": 0, "warnings": 0,
        }))
        .unwrap();
        assert_eq!(back.status(), "not-judged");
        // What results.json held before: the words.
        for (word, want) in [
            ("unknown", "unknown"),
            ("valid", "valid"),
            ("invalid", "invalid"),
        ] {
            let back: CheckerResult = serde_json::from_value(serde_json::json!({
                "name": "c", "valid": word, "violations": 0, "warnings": 0,
            }))
            .unwrap();
            assert_eq!(back.status(), want);
        }
        let bad = serde_json::from_value::<CheckerResult>(serde_json::json!({
            "name": "c", "valid": "maybe", "violations": 0, "warnings": 0,
        }));
        assert!(bad.unwrap_err().to_string().contains("maybe"));
    }
}
