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
}

impl Kind {
    fn words(self) -> &'static str {
        match self {
            Kind::U64 => "u64",
            Kind::I64 => "i64",
            Kind::Str => "a string",
            Kind::Bool => "a boolean",
            Kind::Strings => "an array of strings",
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
        "lease_gone_ns" => (Kind::U64, "value.lease_gone_ns"),
        "lease_id" => (Kind::Str, "value.lease_id"),
        "redis_node" => (Kind::Str, "value.redis_node"),
        "redis_role" => (Kind::Str, "value.redis_role"),
        "redis_offset" => (Kind::U64, "value.redis_offset"),
        "redlock_nodes" => (Kind::Strings, "value.redlock_nodes"),
        "redlock_validity_ms" => (Kind::U64, "value.redlock_validity_ms"),
        "lock_key" => (Kind::Str, "value.lock_key"),
        "answer_revision" => (Kind::U64, "value.answer_revision"),
        "key_at_revision" => (Kind::Str, "value.key_at_revision"),
        "round" => (Kind::U64, "value.round"),
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

/// Whether `v`, the value of the field `key` of an event's `value`, has the type
/// docs/history.md gives that field (`null` is absent, as for every field): the refusal, in
/// serde's words, if not. The serde reader and [`crate::History::new`] (for ops built in
/// memory) both ask it, so a history refused from a file is refused from memory in the same
/// words.
pub(crate) fn check_value_field<E: de::Error>(key: &str, v: &Value) -> Result<(), E> {
    let Some((kind, field)) = value_field(key) else {
        return Ok(());
    };
    let bad = match (kind, v) {
        (_, Value::Null) => None,
        (Kind::U64, Value::Number(n)) if n.is_u64() => None,
        (Kind::I64, Value::Number(n)) if n.is_i64() => None,
        (Kind::Str, Value::String(_)) | (Kind::Bool, Value::Bool(_)) => None,
        (Kind::Strings, Value::Array(items)) => items.iter().find(|i| !i.is_string()),
        (_, v) => Some(v),
    };
    if let Some(b) = bad {
        return Err(E::invalid_type(unexpected(b), &Expect { kind, field }));
    }
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
        assert_eq!(seen, 15, "the table and value_field differ in number");
    }
}
