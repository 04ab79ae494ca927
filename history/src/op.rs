//! One history event ([`Op`]) and its parts.

use crate::event::{EventRef, ValueRef};
use serde::de::{self, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::fmt;

/// Who performed an op: a client process (numbered; a crashed client's worker continues under
/// a new number) or the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    Client(u64),
    Nemesis,
}

impl Process {
    pub fn is_nemesis(self) -> bool {
        matches!(self, Process::Nemesis)
    }
    pub fn client(self) -> Option<u64> {
        match self {
            Process::Client(p) => Some(p),
            Process::Nemesis => None,
        }
    }
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(p) => write!(f, "p{p}"),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}

impl Serialize for Process {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(p) => s.serialize_u64(*p),
            Process::Nemesis => s.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Process;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative process number or \"nemesis\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Process, E> {
                Ok(Process::Client(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Process, E> {
                u64::try_from(v)
                    .map(Process::Client)
                    .map_err(|_| E::custom(format!("process {v} is negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Process, E> {
                if v == "nemesis" {
                    Ok(Process::Nemesis)
                } else {
                    Err(E::custom(format!(
                        "process {v:?} is neither a number nor \"nemesis\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The event's place in an operation's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The op was sent.
    Invoke,
    /// It took effect.
    Ok,
    /// It surely did not take effect.
    Fail,
    /// Indeterminate (timeout, connection lost after sending); for the nemesis, a fault event.
    Info,
}

impl OpType {
    pub fn as_str(self) -> &'static str {
        match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        }
    }
}

/// The operation's function. Client functions are closed; nemesis functions are open-ended
/// (`start-pause`, `kill`, ...) and kept as text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum F {
    Acquire,
    Renew,
    Release,
    Read,
    Write,
    Other(String),
}

impl F {
    pub fn as_str(&self) -> &str {
        match self {
            F::Acquire => "acquire",
            F::Renew => "renew",
            F::Release => "release",
            F::Read => "read",
            F::Write => "write",
            F::Other(s) => s,
        }
    }
    /// Lock ops (as opposed to store ops and nemesis ops).
    pub fn is_lock_op(&self) -> bool {
        matches!(self, F::Acquire | F::Renew | F::Release)
    }
    pub fn is_store_op(&self) -> bool {
        matches!(self, F::Read | F::Write)
    }
}

impl From<&str> for F {
    fn from(s: &str) -> F {
        match s {
            "acquire" => F::Acquire,
            "renew" => F::Renew,
            "release" => F::Release,
            "read" => F::Read,
            "write" => F::Write,
            other => F::Other(other.to_string()),
        }
    }
}

impl fmt::Display for F {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for F {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for F {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = F;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a function name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<F, E> {
                Ok(F::from(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// An op's `value`. The fields the checkers read are typed; anything else (adapter evidence,
/// nemesis details such as `nodes`) is kept in `extra`, in order, and written back unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpValue {
    /// Fencing token.
    pub token: Option<u64>,
    /// Lease duration requested (on invoke) or granted (on ok).
    pub ttl_ms: Option<u64>,
    /// Register value read or written.
    pub value: Option<i64>,
    /// The store's acceptance order of a write.
    pub seq: Option<u64>,
    /// Why an op failed or is indeterminate.
    pub error: Option<String>,
    /// Marks the counter workload's closing read.
    pub is_final: bool,
    /// Everything else, kept verbatim.
    pub extra: Map<String, Value>,
}

impl OpValue {
    pub fn is_empty(&self) -> bool {
        self.token.is_none()
            && self.ttl_ms.is_none()
            && self.value.is_none()
            && self.seq.is_none()
            && self.error.is_none()
            && !self.is_final
            && self.extra.is_empty()
    }
    pub fn with_token(mut self, token: u64) -> Self {
        self.token = Some(token);
        self
    }
    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }
    pub fn with_value(mut self, value: i64) -> Self {
        self.value = Some(value);
        self
    }
    pub fn with_seq(mut self, seq: u64) -> Self {
        self.seq = Some(seq);
        self
    }
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }
    pub fn with_extra(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_string(), value);
        self
    }
    /// With the fields of `evidence` that are set ([`crate::evidence`]).
    pub fn with_evidence(mut self, evidence: &impl crate::Evidence) -> Self {
        evidence.write_into(&mut self.extra);
        self
    }
    /// The service's own identity of the grant this op names, when the grant carries no
    /// order of its own (a Redis lock value): it identifies, it does not fence. Written on an
    /// ok acquire and on the renews and releases of that grant.
    pub fn grant(&self) -> Option<&str> {
        self.extra.get(GRANT).and_then(Value::as_str)
    }
    pub fn with_grant(self, id: &str) -> Self {
        self.with_extra(GRANT, Value::from(id))
    }
}

/// The key of [`OpValue::grant`] in `value`.
pub const GRANT: &str = "grant";

impl Serialize for OpValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(t) = self.token {
            m.serialize_entry("token", &t)?;
        }
        if let Some(t) = self.ttl_ms {
            m.serialize_entry("ttl_ms", &t)?;
        }
        if let Some(v) = self.value {
            m.serialize_entry("value", &v)?;
        }
        if let Some(v) = self.seq {
            m.serialize_entry("seq", &v)?;
        }
        if let Some(e) = &self.error {
            m.serialize_entry("error", e)?;
        }
        if self.is_final {
            m.serialize_entry("final", &true)?;
        }
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Read as the one parser reads it ([`ValueRef`]).
impl<'de> Deserialize<'de> for OpValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ValueRef::deserialize(d).map(OpValue::from)
    }
}

/// One line of history.jsonl.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Unique and ascending within a history.
    pub index: u64,
    /// Nanoseconds since the test started, on the harness's monotonic clock.
    pub time_ns: u64,
    pub process: Process,
    pub kind: OpType,
    pub f: F,
    /// The lock a lock op names.
    pub lock: Option<String>,
    /// The store register a store op names.
    pub key: Option<String>,
    pub value: OpValue,
    /// Unknown top-level fields, kept verbatim.
    pub extra: Map<String, Value>,
}

impl Op {
    pub fn new(index: u64, time_ns: u64, process: Process, kind: OpType, f: F) -> Op {
        Op {
            index,
            time_ns,
            process,
            kind,
            f,
            lock: None,
            key: None,
            value: OpValue::default(),
            extra: Map::new(),
        }
    }
    pub fn with_lock(mut self, lock: impl Into<String>) -> Self {
        self.lock = Some(lock.into());
        self
    }
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub fn with_value(mut self, value: OpValue) -> Self {
        self.value = value;
        self
    }
}

impl Serialize for Op {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("index", &self.index)?;
        m.serialize_entry("time_ns", &self.time_ns)?;
        m.serialize_entry("process", &self.process)?;
        m.serialize_entry("type", &self.kind)?;
        m.serialize_entry("f", &self.f)?;
        if let Some(l) = &self.lock {
            m.serialize_entry("lock", l)?;
        }
        if let Some(k) = &self.key {
            m.serialize_entry("key", k)?;
        }
        if !self.value.is_empty() {
            m.serialize_entry("value", &self.value)?;
        }
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Read as the one parser reads a line ([`EventRef`]), then made owned.
impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EventRef::deserialize(d).map(Op::from)
    }
}
