//! The types docs/history.md gives the fields of a line, as the serde reader holds a line to
//! them: a known field of the wrong type is a refusal naming the field (never read as absent,
//! which would silently change a verdict), and a key written twice in one object is a refusal
//! (never "the last one wins"). The byte scanner needs none of this: it takes only the
//! writer's own lines, whose fields it types itself, and leaves the rest to serde.

use serde::de::{self, DeserializeSeed, Expected, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::Deserializer;
use serde_json::{Map, Number, Value};
use std::fmt;

/// A field's type, in the words a refusal uses. The reader's own tables type the fields every
/// op may carry; a fault family declares its ops' own fields with these
/// ([`crate::FaultFamily::fields`]), in its own module, so the reader needs no edit for a new
/// family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
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
    /// An object whose known fields are typed by the list (a netem fault's settings); its
    /// other fields are kept, as any unknown field is.
    Object(&'static [Field]),
    /// A string that is one of these words (`key_at_revision`): another word would read as
    /// no evidence at all, so it is refused.
    OneOf(&'static [&'static str]),
}

/// A field of a fault family's ops' `value`, and its type: what the reader holds the field to
/// on every nemesis event (docs/history.md, "Nemesis events").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Its key in `value` (or in the object it is a field of).
    pub name: &'static str,
    pub ty: FieldType,
    /// Its strings name nodes the fault hit (a partition's `cut`), beyond the `nodes` every
    /// fault carries: the coverage counts them as hit.
    pub names_nodes: bool,
}

impl Field {
    /// A field `name` of type `ty`.
    pub const fn new(name: &'static str, ty: FieldType) -> Field {
        Field {
            name,
            ty,
            names_nodes: false,
        }
    }

    /// A field `name` of type `ty` (strings, or pairs of them) whose strings name nodes the
    /// fault hit.
    pub const fn naming_nodes(name: &'static str, ty: FieldType) -> Field {
        Field {
            names_nodes: true,
            ..Field::new(name, ty)
        }
    }
}

impl FieldType {
    fn words(self) -> &'static str {
        match self {
            FieldType::U64 => "u64",
            FieldType::I64 => "i64",
            FieldType::Str => "a string",
            FieldType::Bool => "a boolean",
            FieldType::Strings => "an array of strings",
            FieldType::Number => "a number",
            FieldType::StringPairs => "an array of pairs of strings",
            FieldType::Object(_) => "an object",
            FieldType::OneOf(_) => "a string",
        }
    }
}

/// Where a field is in a line, for a refusal's words: a path of keys (`value.netem.loss_pct`),
/// each step borrowed from the one it is in, so a nested field's path is made without a
/// string.
#[derive(Clone, Copy)]
pub(crate) struct Path<'a> {
    within: Option<&'a Path<'a>>,
    name: &'static str,
}

impl<'a> Path<'a> {
    /// A path written whole (`value.lease_from_ns`, `time_ns`).
    pub(crate) const fn whole(name: &'static str) -> Path<'static> {
        Path { within: None, name }
    }

    /// The field `name` of the object at this path.
    fn field(&'a self, name: &'static str) -> Path<'a> {
        Path {
            within: Some(self),
            name,
        }
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if let Some(within) = self.within {
            write!(f, "{within}.")?;
        }
        f.write_str(self.name)
    }
}

/// The path of an event's `value`, which a family's fields are in.
static VALUE: Path<'static> = Path::whole("value");

/// What a refusal says was expected: the type, and the field by its path in the line
/// (`value.lease_from_ns`).
struct Expect<'a> {
    kind: FieldType,
    field: Path<'a>,
}

impl Expected for Expect<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} in `{}`", self.kind.words(), self.field)
    }
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
/// names, beyond the typed ones of the event view (`token`, `ttl_ms`, `error`): here the ones
/// every family's faults carry (what a fault hit, for how long, its id, and `process`, the
/// target a client stall is paired by), and after them the fields each registered family
/// declares for its own ops ([`crate::FaultFamily::fields`]). They are typed on nemesis events
/// only, whatever their `f` (free text, read by prefix): on a client op these names are unknown
/// fields, kept and not judged. Coverage, the exercised cells and the faults listed with each
/// violation read them, so a wrong type read as absent would silently drop a fault from what
/// the verdict rests on.
fn nemesis_field(key: &str) -> Option<(FieldType, Path<'static>)> {
    let common = match key {
        "nodes" => Some((FieldType::Strings, "value.nodes")),
        "roles" => Some((FieldType::Strings, "value.roles")),
        "length_ms" => Some((FieldType::U64, "value.length_ms")),
        "fault" => Some((FieldType::Str, "value.fault")),
        "process" => Some((FieldType::U64, "value.process")),
        _ => None,
    };
    if let Some((ty, path)) = common {
        return Some((ty, Path::whole(path)));
    }
    let field = crate::FaultFamily::all()
        .iter()
        .flat_map(|family| family.fields)
        .find(|f| f.name == key)?;
    Some((field.ty, VALUE.field(field.name)))
}

/// The type the reader holds the field `key` of a nemesis event's `value` to: one every family's
/// faults carry, or one a family of this build declares; `None` for a field it keeps unjudged
/// (the event view's own, `token`, `ttl_ms`, `error` and `grant`, are typed as on any op).
pub fn nemesis_field_type(key: &str) -> Option<FieldType> {
    nemesis_field(key).map(|(ty, _)| ty)
}

/// `v` held to `kind`, as the field at `field`: the refusal, in serde's words, if it is another
/// type (`null` is absent, at any depth a family's fields name).
fn check_kind<E: de::Error>(kind: FieldType, field: Path<'_>, v: &Value) -> Result<(), E> {
    let bad = match (kind, v) {
        (_, Value::Null) => None,
        (FieldType::U64, Value::Number(n)) if n.is_u64() => None,
        (FieldType::I64, Value::Number(n)) if n.is_i64() => None,
        (FieldType::Number, Value::Number(_)) => None,
        (FieldType::Str, Value::String(_)) | (FieldType::Bool, Value::Bool(_)) => None,
        (FieldType::OneOf(words), Value::String(w)) => {
            if words.contains(&w.as_str()) {
                return Ok(());
            }
            return Err(E::invalid_value(
                Unexpected::Str(w),
                &Words { words, field },
            ));
        }
        (FieldType::Strings, Value::Array(items)) => items.iter().find(|i| !i.is_string()),
        (FieldType::StringPairs, Value::Array(items)) => items.iter().find(|i| {
            !matches!(i, Value::Array(pair) if pair.len() == 2 && pair.iter().all(Value::is_string))
        }),
        (FieldType::Object(known), Value::Object(fields)) => {
            for (k, sub) in fields {
                if let Some(f) = known.iter().find(|f| f.name == k) {
                    check_kind(f.ty, field.field(f.name), sub)?;
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
    // Beyond the fields the event view holds typed (`token`, `ttl_ms`, `value`, `seq`,
    // `error`, `final`), `value`'s fields are evidence, typed by the set that declares them;
    // `fence` is any JSON, and a field no set of this build declares is kept unjudged.
    match crate::evidence::field(key) {
        Some(f) => check_kind(f.ty, VALUE.field(f.name), v),
        None => Ok(()),
    }
}

/// What a refusal of a word says was expected: the words, and the field.
struct Words<'a> {
    words: &'static [&'static str],
    field: Path<'a>,
}

impl Expected for Words<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if let Some((last, first)) = self.words.split_last() {
            match first {
                [] => write!(f, "{last}")?,
                _ => write!(f, "{} or {last}", first.join(", "))?,
            }
        }
        write!(f, " in `{}`", self.field)
    }
}

/// A typed field of the event view, read with its path in the refusal's words: `Option<u64>`
/// and so on, `null` being absent unless `required`.
#[derive(Clone, Copy)]
pub(crate) struct Typed {
    pub kind: FieldType,
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
            kind: FieldType::U64,
            field,
            required: false,
        }
    }
    pub(crate) const fn i64(field: &'static str) -> Typed {
        Typed {
            kind: FieldType::I64,
            field,
            ..Typed::u64(field)
        }
    }
    pub(crate) const fn str(field: &'static str) -> Typed {
        Typed {
            kind: FieldType::Str,
            field,
            ..Typed::u64(field)
        }
    }
    pub(crate) const fn bool(field: &'static str) -> Typed {
        Typed {
            kind: FieldType::Bool,
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

    fn expect(&self) -> Expect<'static> {
        Expect {
            kind: self.kind,
            field: Path::whole(self.field),
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
            FieldType::U64 => Ok(Read::U64(v)),
            FieldType::I64 => i64::try_from(v)
                .map(Read::I64)
                .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self.expect())),
            _ => self.wrong(Unexpected::Unsigned(v)),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Read<'de>, E> {
        match self.kind {
            FieldType::I64 => Ok(Read::I64(v)),
            FieldType::U64 if v >= 0 => Ok(Read::U64(v as u64)),
            _ => self.wrong(Unexpected::Signed(v)),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Read<'de>, E> {
        self.wrong(Unexpected::Float(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Read<'de>, E> {
        match self.kind {
            FieldType::Bool => Ok(Read::Bool(v)),
            _ => self.wrong(Unexpected::Bool(v)),
        }
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Read<'de>, E> {
        match self.kind {
            FieldType::Str => Ok(Read::Str(std::borrow::Cow::Borrowed(v))),
            _ => self.wrong(Unexpected::Str(v)),
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Read<'de>, E> {
        match self.kind {
            FieldType::Str => Ok(Read::Str(std::borrow::Cow::Owned(v.to_string()))),
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
