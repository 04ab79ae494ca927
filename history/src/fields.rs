//! The types docs/history.md gives the fields of a line, as the serde reader holds a line to
//! them: a known field of the wrong type is a refusal naming the field (never read as absent,
//! which would silently change a verdict), and a key written twice in one object is a refusal
//! (never "the last one wins"). The byte scanner needs none of this: it takes only the
//! writer's own lines, whose fields it types itself, and leaves the rest to serde.

use serde::de::{self, DeserializeSeed, Expected, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::Deserializer;
use serde_json::{Map, Number, Value};
use std::fmt;

/// A field's type, in the words a refusal uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    U64,
    I64,
    Str,
    Bool,
    /// An array of strings.
    Strings,
    /// Any JSON number: an integer or a float (a rate, a share of packets).
    Number,
    /// An array of two-string arrays (a partition's cut links).
    StringPairs,
    /// A netem fault's settings: an object whose known fields are typed by [`netem_field`].
    Netem,
}

impl Kind {
    fn words(self) -> &'static str {
        match self {
            Kind::U64 => "u64",
            Kind::I64 => "i64",
            Kind::Str => "a string",
            Kind::Bool => "a boolean",
            Kind::Strings => "an array of strings",
            Kind::Number => "a number",
            Kind::StringPairs => "an array of pairs of strings",
            Kind::Netem => "an object",
        }
    }
}

/// What a refusal says was expected: the type, and the field by its path in the line
/// (`value.lease_from_ns`).
struct Expect {
    kind: Kind,
    field: &'static str,
}

impl Expected for Expect {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} in `{}`", self.kind.words(), self.field)
    }
}

/// The fields of `value` that docs/history.md names and types beyond the ones the event view
/// holds typed (`token`, `ttl_ms`, `value`, `seq`, `error`, `final`): the adapters' evidence,
/// which the checkers read (`lease_*`, the lock key's read-back, `round`) or keep, and the
/// grant's own name. `fence` is any JSON and has no entry. With the field's path, for the words.
pub(crate) fn value_field(key: &str) -> Option<(Kind, &'static str)> {
    Some(match key {
        "grant" => (Kind::Str, "value.grant"),
        "lease_last_ok_ns" => (Kind::U64, "value.lease_last_ok_ns"),
        "lease_ttl_ms" => (Kind::U64, "value.lease_ttl_ms"),
        "lease_from_ns" => (Kind::U64, "value.lease_from_ns"),
        "hold" => (Kind::Str, "value.hold"),
        "lease_gone_ns" => (Kind::U64, "value.lease_gone_ns"),
        "lease_id" => (Kind::Str, "value.lease_id"),
        "redis_node" => (Kind::Str, "value.redis_node"),
        "redis_role" => (Kind::Str, "value.redis_role"),
        "redis_offset" => (Kind::U64, "value.redis_offset"),
        "sentinel" => (Kind::Str, "value.sentinel"),
        "redlock_nodes" => (Kind::Strings, "value.redlock_nodes"),
        "redlock_validity_ms" => (Kind::U64, "value.redlock_validity_ms"),
        "lock_key" => (Kind::Str, "value.lock_key"),
        "answer_revision" => (Kind::U64, "value.answer_revision"),
        "key_at_revision" => (Kind::Str, "value.key_at_revision"),
        "round" => (Kind::U64, "value.round"),
        "wait_ms" => (Kind::U64, "value.wait_ms"),
        "transfer" => (Kind::U64, "value.transfer"),
        "zk_session" => (Kind::Str, "value.zk_session"),
        "zk_server" => (Kind::Str, "value.zk_server"),
        "zk_node" => (Kind::Str, "value.zk_node"),
        "zk_timeout_ms" => (Kind::U64, "value.zk_timeout_ms"),
        "session_event_ns" => (Kind::U64, "value.session_event_ns"),
        "pg_backend_pid" => (Kind::U64, "value.pg_backend_pid"),
        "committed" => (Kind::Bool, "value.committed"),
        _ => return None,
    })
}

/// What serde calls a JSON value when it is the wrong type.
fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (_, Some(i)) => Unexpected::Signed(i),
            _ => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// The fields of a nemesis event's `value` that docs/history.md's table of nemesis events
/// names, beyond the typed ones of the event view (`token`, `ttl_ms`, `error`), with the
/// field's path. They are typed on nemesis events only, whatever their `f` (free text, read by
/// prefix): on a client op these names are unknown fields, kept and not judged. Coverage, the
/// exercised cells and the faults listed with each violation read them, so a wrong type read
/// as absent would silently drop a fault from what the verdict rests on.
pub(crate) fn nemesis_field(key: &str) -> Option<(Kind, &'static str)> {
    Some(match key {
        "nodes" => (Kind::Strings, "value.nodes"),
        "roles" => (Kind::Strings, "value.roles"),
        "then_nodes" => (Kind::Strings, "value.then_nodes"),
        "length_ms" => (Kind::U64, "value.length_ms"),
        "fault" => (Kind::Str, "value.fault"),
        "process" => (Kind::U64, "value.process"),
        "lock" => (Kind::Str, "value.lock"),
        "stall_ms" => (Kind::U64, "value.stall_ms"),
        "shape" => (Kind::Str, "value.shape"),
        "wake" => (Kind::Str, "value.wake"),
        "lease_end_ns" => (Kind::U64, "value.lease_end_ns"),
        "after_ms" => (Kind::U64, "value.after_ms"),
        "acquire" => (Kind::U64, "value.acquire"),
        "stalled_ms" => (Kind::U64, "value.stalled_ms"),
        "ended_by" => (Kind::Str, "value.ended_by"),
        "next_grant_ns" => (Kind::U64, "value.next_grant_ns"),
        "topology" => (Kind::Str, "value.topology"),
        "cut" => (Kind::StringPairs, "value.cut"),
        "clients_cut_from" => (Kind::Strings, "value.clients_cut_from"),
        "netem" => (Kind::Netem, "value.netem"),
        "mode" => (Kind::Str, "value.mode"),
        "scope" => (Kind::Str, "value.scope"),
        "delta_ms" => (Kind::I64, "value.delta_ms"),
        "rate" => (Kind::Number, "value.rate"),
        "realtime_offset_ms" => (Kind::I64, "value.realtime_offset_ms"),
        "monotonic_ms" => (Kind::U64, "value.monotonic_ms"),
        "observed_by" => (Kind::Str, "value.observed_by"),
        _ => return None,
    })
}

/// The fields of a netem fault's `value.netem`.
pub(crate) fn netem_field(key: &str) -> Option<(Kind, &'static str)> {
    Some(match key {
        "delay_ms" => (Kind::U64, "value.netem.delay_ms"),
        "jitter_ms" => (Kind::U64, "value.netem.jitter_ms"),
        "loss_pct" => (Kind::Number, "value.netem.loss_pct"),
        "duplicate_pct" => (Kind::Number, "value.netem.duplicate_pct"),
        "reorder_pct" => (Kind::Number, "value.netem.reorder_pct"),
        _ => return None,
    })
}

/// `v` held to `kind`, as the field at `field`: the refusal, in serde's words, if it is another
/// type (`null` is absent, at any depth the tables name).
fn check_kind<E: de::Error>(kind: Kind, field: &'static str, v: &Value) -> Result<(), E> {
    let bad = match (kind, v) {
        (_, Value::Null) => None,
        (Kind::U64, Value::Number(n)) if n.is_u64() => None,
        (Kind::I64, Value::Number(n)) if n.is_i64() => None,
        (Kind::Number, Value::Number(_)) => None,
        (Kind::Str, Value::String(_)) | (Kind::Bool, Value::Bool(_)) => None,
        (Kind::Strings, Value::Array(items)) => items.iter().find(|i| !i.is_string()),
        (Kind::StringPairs, Value::Array(items)) => items.iter().find(|i| {
            !matches!(i, Value::Array(pair) if pair.len() == 2 && pair.iter().all(Value::is_string))
        }),
        (Kind::Netem, Value::Object(fields)) => {
            for (k, sub) in fields {
                if let Some((kind, field)) = netem_field(k) {
                    check_kind(kind, field, sub)?;
                }
            }
            None
        }
        (_, v) => Some(v),
    };
    match bad {
        Some(b) => Err(E::invalid_type(unexpected(b), &Expect { kind, field })),
        None => Ok(()),
    }
}

/// Whether `v`, the value of the field `key` of a nemesis event's `value`, has the type
/// docs/history.md gives that field; unknown keys pass. Asked, like [`check_value_field`], by
/// the serde reader (once the whole line is read: `process` may come after `value`) and by
/// [`crate::History::new`].
pub(crate) fn check_nemesis_field<E: de::Error>(key: &str, v: &Value) -> Result<(), E> {
    match nemesis_field(key) {
        Some((kind, field)) => check_kind(kind, field, v),
        None => Ok(()),
    }
}

/// Whether `v`, the value of the field `key` of an event's `value`, has the type
/// docs/history.md gives that field (`null` is absent, as for every field): the refusal, in
/// serde's words, if not. The serde reader and [`crate::History::new`] (for ops built in
/// memory) both ask it, so a history refused from a file is refused from memory in the same
/// words.
pub(crate) fn check_value_field<E: de::Error>(key: &str, v: &Value) -> Result<(), E> {
    let Some((kind, field)) = value_field(key) else {
        return Ok(());
    };
    check_kind(kind, field, v)?;
    // A word the checkers do not know would read as no evidence at all, and be explained as
    // a service that reports none.
    if let ("key_at_revision", Value::String(w)) = (key, v) {
        if !KEY_AT_REVISION_WORDS.contains(&w.as_str()) {
            return Err(E::invalid_value(
                Unexpected::Str(w),
                &"present, absent, compacted or unread in `value.key_at_revision`",
            ));
        }
    }
    Ok(())
}

/// The words `value.key_at_revision` may hold (docs/history.md).
pub(crate) const KEY_AT_REVISION_WORDS: [&str; 4] = ["present", "absent", "compacted", "unread"];

/// A typed field of the event view, read with its path in the refusal's words: `Option<u64>`
/// and so on, `null` being absent unless `required`.
#[derive(Clone, Copy)]
pub(crate) struct Typed {
    pub kind: Kind,
    pub field: &'static str,
    pub required: bool,
}

/// What a [`Typed`] field read. Strings are borrowed from the line when they can be.
pub(crate) enum Read<'de> {
    Absent,
    U64(u64),
    I64(i64),
    Bool(bool),
    Str(std::borrow::Cow<'de, str>),
}

impl Typed {
    pub(crate) const fn u64(field: &'static str) -> Typed {
        Typed {
            kind: Kind::U64,
            field,
            required: false,
        }
    }
    pub(crate) const fn i64(field: &'static str) -> Typed {
        Typed {
            kind: Kind::I64,
            field,
            ..Typed::u64(field)
        }
    }
    pub(crate) const fn str(field: &'static str) -> Typed {
        Typed {
            kind: Kind::Str,
            field,
            ..Typed::u64(field)
        }
    }
    pub(crate) const fn bool(field: &'static str) -> Typed {
        Typed {
            kind: Kind::Bool,
            field,
            ..Typed::u64(field)
        }
    }
    pub(crate) const fn required(self) -> Typed {
        Typed {
            required: true,
            ..self
        }
    }

    fn expect(&self) -> Expect {
        Expect {
            kind: self.kind,
            field: self.field,
        }
    }
    fn wrong<E: de::Error>(&self, u: Unexpected<'_>) -> Result<Read<'static>, E> {
        Err(E::invalid_type(u, &self.expect()))
    }
}

impl<'de> DeserializeSeed<'de> for Typed {
    type Value = Read<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Read<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Typed {
    type Value = Read<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.expect().fmt(f)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Read<'de>, E> {
        match self.kind {
            Kind::U64 => Ok(Read::U64(v)),
            Kind::I64 => i64::try_from(v)
                .map(Read::I64)
                .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self.expect())),
            _ => self.wrong(Unexpected::Unsigned(v)),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Read<'de>, E> {
        match self.kind {
            Kind::I64 => Ok(Read::I64(v)),
            Kind::U64 if v >= 0 => Ok(Read::U64(v as u64)),
            _ => self.wrong(Unexpected::Signed(v)),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Read<'de>, E> {
        self.wrong(Unexpected::Float(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Read<'de>, E> {
        match self.kind {
            Kind::Bool => Ok(Read::Bool(v)),
            _ => self.wrong(Unexpected::Bool(v)),
        }
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Read<'de>, E> {
        match self.kind {
            Kind::Str => Ok(Read::Str(std::borrow::Cow::Borrowed(v))),
            _ => self.wrong(Unexpected::Str(v)),
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Read<'de>, E> {
        match self.kind {
            Kind::Str => Ok(Read::Str(std::borrow::Cow::Owned(v.to_string()))),
            _ => self.wrong(Unexpected::Str(v)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Read<'de>, E> {
        if self.required {
            self.wrong(Unexpected::Unit)
        } else {
            Ok(Read::Absent)
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Read<'de>, A::Error> {
        self.wrong(Unexpected::Seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Read<'de>, A::Error> {
        self.wrong(Unexpected::Map)
    }
}

/// The refusal of a key written twice in one object.
pub(crate) fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("duplicate field `{key}`"))
}

/// Any JSON value, as `serde_json::Value` reads it, except that an object with a key written
/// twice, at any depth, is refused instead of keeping the last. Only fields the event view does
/// not type are read this way: evidence and nemesis details, a few lines in a history.
pub(crate) struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Strict)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        // Bounded by the array's elements.
        while let Some(v) = seq.next_element_seed(Strict)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        // Bounded by the object's entries.
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(duplicate(&k));
            }
            let v = map.next_value_seed(Strict)?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value table of docs/history.md and [`value_field`] name the same fields with the
    /// same types: the page promises what the reader holds a line to.
    #[test]
    fn the_docs_table_of_value_fields_is_the_readers() {
        let doc = include_str!("../../docs/history.md");
        let table = doc
            .split("### Fields of `value`")
            .nth(1)
            .and_then(|t| t.split("\n\n").nth(1))
            .expect("docs/history.md has the table of value fields");
        let typed = ["token", "ttl_ms", "value", "seq", "error", "final", "fence"];
        let mut seen = 0;
        for row in table.lines().skip(2) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let names: Vec<&str> = cells[1].split('`').skip(1).step_by(2).collect();
            let types: Vec<&str> = cells[2].split(", ").collect();
            for (i, name) in names.iter().enumerate() {
                if typed.contains(name) {
                    continue;
                }
                let ty = types.get(i).or(types.first()).copied().unwrap_or_default();
                let want = match ty {
                    "unsigned integer" | "unsigned integers" => Kind::U64,
                    "string" => Kind::Str,
                    "array of strings" => Kind::Strings,
                    "boolean" => Kind::Bool,
                    other => panic!("{name}: the table's type {other:?} has no Kind"),
                };
                assert_eq!(
                    value_field(name).map(|(k, _)| k),
                    Some(want),
                    "`{name}` is {ty} in docs/history.md"
                );
                seen += 1;
            }
        }
        // Every field value_field types, and no other.
        assert_eq!(seen, 26, "the table and value_field differ in number");
    }

    /// The nemesis type table of docs/history.md and [`nemesis_field`] (with [`netem_field`])
    /// name the same fields with the same types, and every field the table of nemesis events
    /// names is typed: the page's promise for nemesis events is the reader's.
    #[test]
    fn the_docs_table_of_nemesis_fields_is_the_readers() {
        let doc = include_str!("../../docs/history.md");
        let section = doc
            .split("## Nemesis events")
            .nth(1)
            .and_then(|t| t.split("\n## ").next())
            .expect("docs/history.md has its nemesis events");
        let names = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(|n| n.split(':').next().unwrap_or(n).to_string())
                .collect()
        };
        let types = section
            .split("| field | type |")
            .nth(1)
            .and_then(|t| t.split("\n\n").next())
            .expect("the nemesis fields' type table");
        let event_typed = ["token", "ttl_ms", "error", "grant"];
        let mut typed = Vec::new();
        for row in types.lines().skip(2) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let ty = cells[2];
            for name in names(cells[1]) {
                typed.push(name.clone());
                if event_typed.contains(&name.as_str()) {
                    assert!(nemesis_field(&name).is_none(), "{name} is the view's");
                    continue;
                }
                let want = match ty.split(':').next().unwrap() {
                    "unsigned integer" => Kind::U64,
                    "signed integer" => Kind::I64,
                    "string" => Kind::Str,
                    "number" => Kind::Number,
                    "array of strings" => Kind::Strings,
                    "array of pairs of strings" => Kind::StringPairs,
                    "object" => Kind::Netem,
                    other => panic!("{name}: the table's type {other:?} has no Kind"),
                };
                assert_eq!(
                    nemesis_field(&name).map(|(k, _)| k),
                    Some(want),
                    "`{name}` is {ty} in docs/history.md"
                );
            }
            if let Some(fields) = ty.strip_prefix("object: ") {
                for part in fields.split("; ") {
                    let (list, ty) = part.rsplit_once(' ').unwrap();
                    let want = match ty {
                        "integers" => Kind::U64,
                        "numbers" => Kind::Number,
                        other => panic!("netem's type {other:?}"),
                    };
                    for name in names(list) {
                        assert_eq!(netem_field(&name).map(|(k, _)| k), Some(want), "{name}");
                        typed.push(name);
                    }
                }
            }
        }
        // Every field the events table names (a word in backticks in its `value` column that
        // is a field name, not one of its words such as `primary`) is in the type table.
        let events = section
            .split("\n\n")
            .find(|t| t.starts_with("| `f` |"))
            .unwrap();
        let words = [
            "n1",
            "primary",
            "other",
            "boundary",
            "next-grant",
            "long",
            "waiter",
            "renew",
            "write",
            "release",
            "read",
            "aim",
            "length",
            "bump-forward",
            "bump-back",
            "strobe",
            "fast",
            "slow",
            "wall",
            "all",
            "observed_by: \"vdso\"",
            "f1",
        ];
        for row in events.lines().skip(2) {
            let cell = row.split('|').nth(2).unwrap();
            for part in cell.split('`').skip(1).step_by(2) {
                let name = part.trim_start_matches('[').trim_end_matches(']');
                if words.contains(&part) || name.starts_with('"') || name.starts_with("[\"") {
                    continue;
                }
                let name = name.split(':').next().unwrap();
                if ["kill", "restart"].contains(&name) {
                    continue;
                }
                assert!(
                    typed.iter().any(|t| t == name),
                    "`{name}` has no type in the table"
                );
            }
        }
        assert!(nemesis_field("nodes").is_some() && netem_field("delay_ms").is_some());
    }
}
