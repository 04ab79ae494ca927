//! The one parser of a history line: [`parse_event`] reads a line into an [`EventRef`], a view
//! that borrows its strings from the line. Everything that reads the format goes through it:
//! [`Op`]'s deserialization is the view's, turned owned, and the checkers' digest reads the view
//! straight into its compact records.
//!
//! Two readers, one meaning: a strict byte scanner takes the writer's own lines (several times
//! faster than serde), and anything it does not know goes to the serde reader, which decides
//! whether a line is malformed and words the reason. The scanner never refuses a line: what it
//! accepts, it reads exactly as the serde reader would.

use crate::codec::Stamp;
use crate::fields::{
    check_nemesis_field, check_value_field, duplicate, FieldType, Read, Strict, Typed,
};
use crate::op::{Op, OpType, OpValue, Process, F};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// One history line, read: the fields of [`Op`], with strings borrowed from the line where it
/// has no escapes. [`Op::from`] makes it owned; [`Op::view`] makes one of an `Op`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRef<'a> {
    pub index: u64,
    pub time_ns: u64,
    pub process: Process,
    pub kind: OpType,
    /// Owned only for a function other than the five client ones (nemesis events).
    pub f: F,
    pub lock: Option<Cow<'a, str>>,
    pub key: Option<Cow<'a, str>>,
    pub value: ValueRef<'a>,
    /// Unknown top-level fields (the rest of the line), as `Op::extra` keeps them. Always empty
    /// for a line the scanner read: it leaves lines with unknown top-level fields to serde.
    pub extra: Cow<'a, Map<String, Value>>,
}

/// An event's `value`: the typed fields of [`OpValue`] and the rest of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueRef<'a> {
    pub token: Option<u64>,
    pub ttl_ms: Option<u64>,
    pub value: Option<i64>,
    pub seq: Option<u64>,
    pub error: Option<Cow<'a, str>>,
    pub is_final: bool,
    /// Unknown fields of the value (adapter evidence, nemesis details), as `OpValue::extra`.
    pub extra: Cow<'a, Map<String, Value>>,
}

/// No unknown fields: borrowed, so that an event without any (nearly every one) never builds
/// or drops a map.
fn no_extra<'a>() -> Cow<'a, Map<String, Value>> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    Cow::Borrowed(&EMPTY)
}

impl Default for ValueRef<'_> {
    #[inline]
    fn default() -> Self {
        ValueRef {
            token: None,
            ttl_ms: None,
            value: None,
            seq: None,
            error: None,
            is_final: false,
            extra: no_extra(),
        }
    }
}

impl EventRef<'_> {
    pub fn stamp(&self) -> Stamp {
        Stamp {
            index: self.index,
            time_ns: self.time_ns,
        }
    }
}

/// Reads one history line (without its newline): the scanner for the writer's own lines, the
/// serde reader for anything else, which words the reason a line is malformed.
#[inline(always)]
pub fn parse_event(line: &[u8]) -> Result<EventRef<'_>, String> {
    match scan(line) {
        Some(event) => Ok(event),
        None => read_serde(line),
    }
}

/// [`parse_event`], handing the event to `read` where it was built instead of returning it: the
/// reader's hot path, which spares copying the view.
#[inline(always)]
pub fn read_event<R>(line: &[u8], read: impl FnOnce(&EventRef<'_>) -> R) -> Result<R, String> {
    if let Some(ref event) = scan(line) {
        return Ok(read(event));
    }
    Ok(read(&read_serde(line)?))
}

/// The serde reader: any line, and the words for a malformed one.
fn read_serde(line: &[u8]) -> Result<EventRef<'_>, String> {
    serde_json::from_slice::<EventRef>(line).map_err(|e| reason(&e))
}

/// A parse error's words for a message that already names the file's line: its position as
/// the column within that line. serde's own "at line 1 column N" read beside `h.jsonl:10:`
/// as if it contradicted it.
fn reason(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&at) {
        Some(words) if e.line() == 1 => format!("{words} (column {})", e.column()),
        _ => full,
    }
}

impl From<EventRef<'_>> for Op {
    fn from(e: EventRef<'_>) -> Op {
        Op {
            index: e.index,
            time_ns: e.time_ns,
            process: e.process,
            kind: e.kind,
            f: e.f,
            lock: e.lock.map(Cow::into_owned),
            key: e.key.map(Cow::into_owned),
            value: e.value.into(),
            extra: e.extra.into_owned(),
        }
    }
}

impl From<&EventRef<'_>> for Op {
    fn from(e: &EventRef<'_>) -> Op {
        Op {
            index: e.index,
            time_ns: e.time_ns,
            process: e.process,
            kind: e.kind,
            f: e.f.clone(),
            lock: e.lock.as_deref().map(str::to_string),
            key: e.key.as_deref().map(str::to_string),
            value: OpValue {
                token: e.value.token,
                ttl_ms: e.value.ttl_ms,
                value: e.value.value,
                seq: e.value.seq,
                error: e.value.error.as_deref().map(str::to_string),
                is_final: e.value.is_final,
                extra: Map::clone(&e.value.extra),
            },
            extra: Map::clone(&e.extra),
        }
    }
}

impl From<ValueRef<'_>> for OpValue {
    fn from(v: ValueRef<'_>) -> OpValue {
        OpValue {
            token: v.token,
            ttl_ms: v.ttl_ms,
            value: v.value,
            seq: v.seq,
            error: v.error.map(Cow::into_owned),
            is_final: v.is_final,
            extra: v.extra.into_owned(),
        }
    }
}

impl Op {
    /// The op as the event view a parsed line gives, borrowing from the op.
    pub fn view(&self) -> EventRef<'_> {
        let v = &self.value;
        EventRef {
            index: self.index,
            time_ns: self.time_ns,
            process: self.process,
            kind: self.kind,
            f: self.f.clone(),
            lock: self.lock.as_deref().map(Cow::Borrowed),
            key: self.key.as_deref().map(Cow::Borrowed),
            value: ValueRef {
                token: v.token,
                ttl_ms: v.ttl_ms,
                value: v.value,
                seq: v.seq,
                error: v.error.as_deref().map(Cow::Borrowed),
                is_final: v.is_final,
                extra: Cow::Borrowed(&v.extra),
            },
            extra: Cow::Borrowed(&self.extra),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The serde reader: `Op`'s and `OpValue`'s deserialization, and the fallback of `parse_event`.

/// A map key read without allocating: most keys are names we know, the rest are borrowed from
/// the line unless they have escapes. This is the hot path of parsing a history.
enum Key<'de> {
    Known(&'static str),
    Other(Cow<'de, str>),
}

fn known_key(v: &str) -> Option<&'static str> {
    Some(match v {
        "index" => "index",
        "time_ns" => "time_ns",
        "process" => "process",
        "type" => "type",
        "f" => "f",
        "lock" => "lock",
        "key" => "key",
        "value" => "value",
        "token" => "token",
        "ttl_ms" => "ttl_ms",
        "seq" => "seq",
        "error" => "error",
        "final" => "final",
        _ => return None,
    })
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(known_key(v).map_or(Key::Other(Cow::Borrowed(v)), Key::Known))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(known_key(v).map_or_else(|| Key::Other(Cow::Owned(v.to_string())), Key::Known))
            }
        }
        d.deserialize_str(V)
    }
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Known(k) => k,
            Key::Other(s) => s,
        }
    }
    fn into_string(self) -> String {
        match self {
            Key::Known(k) => k.to_string(),
            Key::Other(s) => s.into_owned(),
        }
    }
}

// The typed fields, each with its path for the words of a refusal.
const INDEX: Typed = Typed::u64("index").required();
const TIME_NS: Typed = Typed::u64("time_ns").required();
const LOCK: Typed = Typed::str("lock");
const KEY: Typed = Typed::str("key");
const TOKEN: Typed = Typed::u64("value.token");
const TTL_MS: Typed = Typed::u64("value.ttl_ms");
const VALUE: Typed = Typed::i64("value.value");
const SEQ: Typed = Typed::u64("value.seq");
const ERROR: Typed = Typed::str("value.error");
const FINAL: Typed = Typed::bool("value.final");

fn next_u64<'de, A: MapAccess<'de>>(map: &mut A, t: Typed) -> Result<Option<u64>, A::Error> {
    Ok(match map.next_value_seed(t)? {
        Read::U64(n) => Some(n),
        _ => None,
    })
}

/// A string borrowed from the line when it has no escapes, owned otherwise.
fn next_str<'de, A: MapAccess<'de>>(
    map: &mut A,
    t: Typed,
) -> Result<Option<Cow<'de, str>>, A::Error> {
    Ok(match map.next_value_seed(t)? {
        Read::Str(s) => Some(s),
        _ => None,
    })
}

impl<'de> Deserialize<'de> for ValueRef<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ValueRef<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ValueRef<'de>, A::Error> {
                let mut v = ValueRef::default();
                let mut extra = Map::new();
                let mut seen = 0u32;
                // Bounded by the map's entries.
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let bit = match key.as_str() {
                        "token" => {
                            v.token = next_u64(&mut map, TOKEN)?;
                            1
                        }
                        "ttl_ms" => {
                            v.ttl_ms = next_u64(&mut map, TTL_MS)?;
                            2
                        }
                        "value" => {
                            v.value = match map.next_value_seed(VALUE)? {
                                Read::I64(n) => Some(n),
                                _ => None,
                            };
                            4
                        }
                        "seq" => {
                            v.seq = next_u64(&mut map, SEQ)?;
                            8
                        }
                        "error" => {
                            v.error = next_str(&mut map, ERROR)?;
                            16
                        }
                        "final" => {
                            v.is_final = matches!(map.next_value_seed(FINAL)?, Read::Bool(true));
                            32
                        }
                        _ => {
                            let k = key.into_string();
                            if extra.contains_key(&k) {
                                return Err(duplicate(&format!("value.{k}")));
                            }
                            let val: Value = map.next_value_seed(Strict)?;
                            check_value_field(&k, &val)?;
                            extra.insert(k, val);
                            continue;
                        }
                    };
                    if seen & bit != 0 {
                        return Err(duplicate(&format!("value.{}", key.as_str())));
                    }
                    seen |= bit;
                }
                if !extra.is_empty() {
                    v.extra = Cow::Owned(extra);
                }
                Ok(v)
            }
            fn visit_unit<E: de::Error>(self) -> Result<ValueRef<'de>, E> {
                Ok(ValueRef::default())
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for EventRef<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EventRef<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a history op object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EventRef<'de>, A::Error> {
                let mut index = None;
                let mut time_ns = None;
                let mut process = None;
                let mut kind = None;
                let mut f = None;
                let mut lock = None;
                let mut key = None;
                let mut value = ValueRef::default();
                let mut extra = Map::new();
                let mut seen = 0u32;
                // Bounded by the map's entries.
                while let Some(k) = map.next_key::<Key<'de>>()? {
                    let bit = match k.as_str() {
                        "index" => {
                            index = next_u64(&mut map, INDEX)?;
                            1
                        }
                        "time_ns" => {
                            time_ns = next_u64(&mut map, TIME_NS)?;
                            2
                        }
                        "process" => {
                            process = Some(map.next_value::<Process>()?);
                            4
                        }
                        "type" => {
                            kind = Some(map.next_value::<OpType>()?);
                            8
                        }
                        "f" => {
                            f = Some(map.next_value::<F>()?);
                            16
                        }
                        "lock" => {
                            lock = next_str(&mut map, LOCK)?;
                            32
                        }
                        "key" => {
                            key = next_str(&mut map, KEY)?;
                            64
                        }
                        "value" => {
                            value = map.next_value::<ValueRef<'de>>()?;
                            128
                        }
                        _ => {
                            let k = k.into_string();
                            if extra.contains_key(&k) {
                                return Err(duplicate(&k));
                            }
                            let v: Value = map.next_value_seed(Strict)?;
                            extra.insert(k, v);
                            continue;
                        }
                    };
                    if seen & bit != 0 {
                        return Err(duplicate(k.as_str()));
                    }
                    seen |= bit;
                }
                // A nemesis event's own fields, typed once the line is read whole: `process`
                // may come after `value`.
                if process == Some(Process::Nemesis) {
                    for (k, v) in value.extra.iter() {
                        check_nemesis_field(k, v)?;
                    }
                }
                Ok(EventRef {
                    index: index.ok_or_else(|| de::Error::missing_field("index"))?,
                    time_ns: time_ns.ok_or_else(|| de::Error::missing_field("time_ns"))?,
                    process: process.ok_or_else(|| de::Error::missing_field("process"))?,
                    kind: kind.ok_or_else(|| de::Error::missing_field("type"))?,
                    f: f.ok_or_else(|| de::Error::missing_field("f"))?,
                    lock,
                    key,
                    value,
                    extra: if extra.is_empty() {
                        no_extra()
                    } else {
                        Cow::Owned(extra)
                    },
                })
            }
        }
        d.deserialize_map(V)
    }
}

// ---------------------------------------------------------------------------------------------
// The scanner: the writer's own lines, fast.

/// A strict reader of the exact subset of JSON the harness's writer produces for events
/// without unknown fields: no whitespace, ASCII strings without escapes, integers without sign
/// (but `value`), fraction or exponent, known keys each at most once. It never decides that a
/// line is malformed: on anything else it gives up (`None`) and the serde reader takes the line,
/// so what it accepts it reads exactly as serde would, only several times faster.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    #[inline(always)]
    fn eat(&mut self, c: u8) -> Option<()> {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// Reads past `lit` if the text goes on with it.
    #[inline(always)]
    fn lit(&mut self, lit: &[u8]) -> Option<()> {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Some(())
        } else {
            None
        }
    }

    #[inline(always)]
    fn null(&mut self) -> bool {
        self.lit(b"null").is_some()
    }

    /// A string's bytes: printable ASCII only, so any of them is valid UTF-8 as it stands.
    #[inline(always)]
    fn bytes(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.b[self.i..];
        // Escapes, control characters and non-ASCII end the string too: the serde reader's
        // business.
        let n = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || !(0x20..0x7f).contains(&c))?;
        if rest[n] != b'"' {
            return None;
        }
        self.i += n + 1;
        Some(&rest[..n])
    }

    /// An object key. Only known keys are read (each a plain name), so the key is whatever
    /// comes before the next quote: a key with an escape, a control character or non-ASCII
    /// names no known key and is refused by the caller all the same.
    #[inline(always)]
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.b[self.i..];
        let n = rest.iter().position(|&c| c == b'"')?;
        self.i += n + 1;
        Some(&rest[..n])
    }

    #[inline(always)]
    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    #[inline(always)]
    fn u64(&mut self) -> Option<u64> {
        let rest = &self.b[self.i..];
        let digits = rest.iter().take_while(|d| d.is_ascii_digit()).count();
        // No digits, a leading zero, or a fraction or exponent follows.
        if digits == 0 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        if matches!(rest.get(digits), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let ten = |n: u64, &d: &u8| n * 10 + u64::from(d - b'0');
        // 19 digits never pass u64::MAX (20 digits long): only longer ones are checked.
        let n = if digits <= 19 {
            rest[..digits].iter().fold(0, ten)
        } else {
            (rest[..digits].iter()).try_fold(0u64, |n, &d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })?
        };
        self.i += digits;
        Some(n)
    }

    #[inline(always)]
    fn i64(&mut self) -> Option<i64> {
        if self.eat(b'-').is_some() {
            let n = self.u64()?;
            // serde_json reads -0 as a float (which an i64 refuses); the most negative value is
            // left to it too.
            if n == 0 {
                return None;
            }
            i64::try_from(n).ok().map(|n| -n)
        } else {
            i64::try_from(self.u64()?).ok()
        }
    }

    #[inline(always)]
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            Some(None)
        } else {
            self.u64().map(Some)
        }
    }

    #[inline(always)]
    fn opt_str(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null() {
            Some(None)
        } else {
            self.str().map(|s| Some(Cow::Borrowed(s)))
        }
    }

    /// Calls `field` for each `"key":` of an object, which must read the value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        // Bounded by the line: each pass consumes a key.
        loop {
            let key = self.key()?;
            self.eat(b':')?;
            field(self, key)?;
            if self.eat(b'}').is_some() {
                return Some(());
            }
            self.eat(b',')?;
        }
    }

    /// An event's `value`: `null` or an object of known keys: the typed fields of
    /// [`ValueRef`], and the evidence docs/history.md types as a u64 or a string (a bank
    /// transfer's `transfer` and `wait_ms`, a grant's name), kept in `extra` as serde keeps
    /// them. Any other key is serde's.
    #[inline(always)]
    fn value(&mut self, v: &mut ValueRef<'a>) -> Option<()> {
        if self.null() {
            return Some(());
        }
        let mut seen = 0u32;
        let mut extra: Option<Map<String, Value>> = None;
        self.object(|s, k| {
            let bit = match k {
                b"token" => {
                    v.token = s.opt_u64()?;
                    1
                }
                b"ttl_ms" => {
                    v.ttl_ms = s.opt_u64()?;
                    2
                }
                b"value" => {
                    v.value = if s.null() { None } else { Some(s.i64()?) };
                    4
                }
                b"seq" => {
                    v.seq = s.opt_u64()?;
                    8
                }
                b"error" => {
                    v.error = s.opt_str()?;
                    16
                }
                b"final" => {
                    v.is_final = if s.lit(b"true").is_some() {
                        true
                    } else if s.lit(b"false").is_some() || s.null() {
                        false
                    } else {
                        return None;
                    };
                    32
                }
                other => {
                    s.evidence(other, extra.get_or_insert_with(Map::new))?;
                    0
                }
            };
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            Some(())
        })?;
        if let Some(map) = extra {
            v.extra = Cow::Owned(map);
        }
        Some(())
    }

    /// One evidence field of a value, `key` read: docs/history.md types it as a u64 or a
    /// string (a word, `OneOf`, is checked by the serde reader). Any other key (a typed
    /// field's names no evidence) is serde's.
    #[inline(always)]
    fn evidence(&mut self, key: &[u8], map: &mut Map<String, Value>) -> Option<()> {
        let key = std::str::from_utf8(key).ok()?;
        let read = match crate::evidence::field(key)?.ty {
            FieldType::U64 => Value::from(self.u64()?),
            FieldType::Str => Value::from(self.str()?),
            _ => return None,
        };
        // Twice in one object is serde's refusal; more than a few is not the writer's line.
        if map.len() >= SCANNED_EVIDENCE_MAX || map.contains_key(key) {
            return None;
        }
        map.insert(key.to_string(), read);
        Some(())
    }

    /// Reads past `,` and then `key` (`"name":`), or `key` alone for an object's first;
    /// false, reading nothing, if the text does not go on with it.
    #[inline(always)]
    fn next_key(&mut self, key: &[u8], first: &mut bool) -> bool {
        let at = self.i + usize::from(!*first);
        let comma = *first || self.b.get(self.i) == Some(&b',');
        if comma && self.b.get(at..).is_some_and(|rest| rest.starts_with(key)) {
            self.i = at + key.len();
            *first = false;
            true
        } else {
            false
        }
    }

    /// An event's `value` as the writer writes it (`OpValue`'s `Serialize`): its typed
    /// fields in their order, none null, then evidence fields. Anything else is
    /// [`Scan::value`]'s.
    #[inline(always)]
    fn value_in_order(&mut self, v: &mut ValueRef<'a>) -> Option<()> {
        self.eat(b'{')?;
        let mut first = true;
        if self.next_key(b"\"token\":", &mut first) {
            v.token = Some(self.u64()?);
        }
        if self.next_key(b"\"ttl_ms\":", &mut first) {
            v.ttl_ms = Some(self.u64()?);
        }
        if self.next_key(b"\"value\":", &mut first) {
            v.value = Some(self.i64()?);
        }
        if self.next_key(b"\"seq\":", &mut first) {
            v.seq = Some(self.u64()?);
        }
        if self.next_key(b"\"error\":", &mut first) {
            v.error = Some(Cow::Borrowed(self.str()?));
        }
        if self.next_key(b"\"final\":true", &mut first) {
            v.is_final = true;
        }
        if self.eat(b'}').is_some() {
            return Some(());
        }
        let mut extra = Map::new();
        // Bounded by the line: each pass reads a field.
        loop {
            if !first {
                self.eat(b',')?;
            }
            first = false;
            let key = self.key()?;
            self.eat(b':')?;
            self.evidence(key, &mut extra)?;
            if self.eat(b'}').is_some() {
                break;
            }
        }
        v.extra = Cow::Owned(extra);
        Some(())
    }
}

/// The most evidence fields the scanner reads into one value's `extra` (a grant's name and a
/// transfer's two numbers are three); a line with more is serde's.
const SCANNED_EVIDENCE_MAX: usize = 8;

/// Reads a line with [`Scan`]; `None` leaves it to the serde reader. Inlined, like
/// [`parse_event`], so that the view is built where its reader keeps it, not copied there.
#[inline(always)]
fn scan(line: &[u8]) -> Option<EventRef<'_>> {
    scan_in_order(line).or_else(|| scan_any_order(line))
}

/// The fields in the order the writer puts them (`Op`'s `Serialize`): each key is then a
/// known run of bytes, compared as it stands, not read and looked up. Any other order, or a
/// field the writer does not write, is [`scan_any_order`]'s.
#[inline(always)]
fn scan_in_order(line: &[u8]) -> Option<EventRef<'_>> {
    let mut s = Scan { b: line, i: 0 };
    s.lit(b"{\"index\":")?;
    let index = s.u64()?;
    s.lit(b",\"time_ns\":")?;
    let time_ns = s.u64()?;
    s.lit(b",\"process\":")?;
    let process = if s.lit(b"\"nemesis\"").is_some() {
        Process::Nemesis
    } else {
        Process::Client(s.u64()?)
    };
    s.lit(b",\"type\":\"")?;
    let kind = if s.lit(b"invoke\"").is_some() {
        OpType::Invoke
    } else if s.lit(b"ok\"").is_some() {
        OpType::Ok
    } else if s.lit(b"fail\"").is_some() {
        OpType::Fail
    } else {
        s.lit(b"info\"")?;
        OpType::Info
    };
    s.lit(b",\"f\":\"")?;
    let f = if s.lit(b"acquire\"").is_some() {
        F::Acquire
    } else if s.lit(b"release\"").is_some() {
        F::Release
    } else if s.lit(b"renew\"").is_some() {
        F::Renew
    } else if s.lit(b"read\"").is_some() {
        F::Read
    } else {
        s.lit(b"write\"")?;
        F::Write
    };
    let lock = if s.lit(b",\"lock\":").is_some() {
        s.opt_str()?
    } else {
        None
    };
    let key = if s.lit(b",\"key\":").is_some() {
        s.opt_str()?
    } else {
        None
    };
    let mut value = ValueRef::default();
    if s.lit(b",\"value\":").is_some() {
        s.value_in_order(&mut value)?;
    }
    s.lit(b"}")?;
    if s.i != line.len() {
        return None;
    }
    Some(EventRef {
        index,
        time_ns,
        process,
        kind,
        f,
        lock,
        key,
        value,
        extra: no_extra(),
    })
}

/// The writer's subset of JSON with its known keys in any order, each at most once.
#[inline(always)]
fn scan_any_order(line: &[u8]) -> Option<EventRef<'_>> {
    let mut s = Scan { b: line, i: 0 };
    let (mut index, mut time_ns, mut process, mut kind, mut f) = (None, None, None, None, None);
    let mut lock = None;
    let mut key = None;
    let mut value = ValueRef::default();
    let mut seen = 0u32;
    s.object(|s, k| {
        let bit = match k {
            b"index" => {
                index = Some(s.u64()?);
                1
            }
            b"time_ns" => {
                time_ns = Some(s.u64()?);
                2
            }
            b"process" => {
                process = Some(if s.b.get(s.i) == Some(&b'"') {
                    match s.bytes()? {
                        b"nemesis" => Process::Nemesis,
                        _ => return None,
                    }
                } else {
                    Process::Client(s.u64()?)
                });
                4
            }
            b"type" => {
                kind = Some(match s.bytes()? {
                    b"invoke" => OpType::Invoke,
                    b"ok" => OpType::Ok,
                    b"fail" => OpType::Fail,
                    b"info" => OpType::Info,
                    _ => return None,
                });
                8
            }
            b"f" => {
                f = Some(match s.bytes()? {
                    b"acquire" => F::Acquire,
                    b"renew" => F::Renew,
                    b"release" => F::Release,
                    b"read" => F::Read,
                    b"write" => F::Write,
                    other => F::Other(std::str::from_utf8(other).ok()?.to_string()),
                });
                16
            }
            b"lock" => {
                lock = s.opt_str()?;
                32
            }
            b"key" => {
                key = s.opt_str()?;
                64
            }
            b"value" => {
                s.value(&mut value)?;
                128
            }
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        Some(())
    })?;
    if s.i != line.len() {
        return None;
    }
    Some(EventRef {
        index: index?,
        time_ns: time_ns?,
        process: process?,
        kind: kind?,
        f: f?,
        lock,
        key,
        value,
        extra: no_extra(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The scanner and the serde reader read every line the scanner takes alike.
    #[test]
    fn the_scanner_reads_what_serde_reads() {
        let lines = [
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#,
            r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","lock":"L0","value":{"token":18446744073709551615,"ttl_ms":1000}}"#,
            r#"{"index":2,"time_ns":30,"process":2,"type":"info","f":"write","key":"k","value":{"token":3,"value":-9223372036854775807,"seq":0,"error":"timeout","final":true}}"#,
            r#"{"index":3,"time_ns":40,"process":"nemesis","type":"info","f":"start-pause","value":null}"#,
            r#"{"index":4,"time_ns":50,"process":3,"type":"fail","f":"frobnicate","lock":null,"key":null,"value":{"final":null,"error":null}}"#,
            r#"{"f":"read","type":"ok","process":0,"time_ns":0,"index":5,"value":{}}"#,
            // The bank's transfer evidence and a grant's name.
            r#"{"index":6,"time_ns":60,"process":0,"type":"invoke","f":"acquire","lock":"A1","value":{"ttl_ms":600,"transfer":12,"wait_ms":250}}"#,
            r#"{"index":7,"time_ns":70,"process":0,"type":"ok","f":"acquire","lock":"A1","value":{"ttl_ms":600,"grant":"3f2a","transfer":12,"wait_ms":250}}"#,
            r#"{"index":8,"time_ns":80,"process":0,"type":"ok","f":"write","key":"balance-A1","value":{"value":-4,"seq":9,"grant":"3f2a","transfer":12}}"#,
            // Another writer's order, of the keys and of a value's: every function and type.
            r#"{"process":1,"index":9,"time_ns":90,"f":"renew","type":"ok","lock":"L0","value":{"ttl_ms":1000,"token":4}}"#,
            r#"{"time_ns":95,"index":10,"f":"release","process":2,"type":"fail","lock":"L0","value":{"error":"not-holder"}}"#,
            r#"{"value":{"seq":2},"key":"k","f":"read","type":"info","process":3,"time_ns":96,"index":11}"#,
            r#"{"index":12,"time_ns":97,"process":4,"type":"invoke","lock":"L1","f":"acquire"}"#,
            r#"{"index":13,"time_ns":98,"process":4,"type":"ok","f":"acquire","lock":"L1","value":{"ttl_ms":5,"grant":"g","token":2}}"#,
            // The longest numbers read unchecked (19 digits), and the first checked (20).
            r#"{"index":9999999999999999999,"time_ns":10000000000000000000,"process":1,"type":"invoke","f":"acquire"}"#,
        ];
        for line in lines {
            let scanned = scan(line.as_bytes()).unwrap_or_else(|| panic!("not scanned: {line}"));
            let serde: EventRef = serde_json::from_str(line).unwrap();
            assert_eq!(scanned, serde, "{line}");
        }
        // Left to serde: unknown fields, escapes (in a key too), whitespace, odd numbers,
        // duplicate keys.
        for line in [
            r#"{"ind\u0065x":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire"}"#,
            r#"{"index\"":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire"}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","node":"n1"}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","value":{"x":1}}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L\"0"}"#,
            r#"{"index":0, "time_ns":10,"process":1,"type":"invoke","f":"acquire"}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","value":{"value":-0}}"#,
            r#"{"index":0,"index":1,"time_ns":10,"process":1,"type":"invoke","f":"acquire"}"#,
            // Evidence of the wrong type, twice, of a kind the scanner does not read, or with
            // words serde checks.
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","value":{"transfer":"12"}}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","value":{"transfer":1,"transfer":2}}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","value":{"wait_ms":null}}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"ok","f":"acquire","value":{"redlock_nodes":["n1"]}}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"ok","f":"acquire","value":{"key_at_revision":"present"}}"#,
            r#"{"index":0,"time_ns":10,"process":"nemesis2","type":"info","f":"kill"}"#,
            // Past the object's end, or a key twice in the writer's own order.
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire"}x"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0"}}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0"} "#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0","lock":"L1"}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"ok","f":"acquire","value":{"token":1,"token":2}}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"ok","f":"acquire","value":{"token":1,"grant":"g","token":2}}"#,
            // Past u64::MAX: serde reads it as a float.
            r#"{"index":18446744073709551616,"time_ns":10,"process":1,"type":"invoke","f":"acquire"}"#,
            r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","value":{"ttl_ms":99999999999999999999}}"#,
        ] {
            assert!(scan(line.as_bytes()).is_none(), "{line}");
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9_-]{0,8}",
            "[ -~]{0,6}",
            "[a\\\\\"\n\u{7f}\u{0}é☃]{0,4}",
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        let head = (
            any::<u64>(),
            any::<u64>(),
            prop_oneof![
                any::<u64>().prop_map(Process::Client),
                Just(Process::Nemesis)
            ],
            prop_oneof![
                Just(OpType::Invoke),
                Just(OpType::Ok),
                Just(OpType::Fail),
                Just(OpType::Info)
            ],
            prop_oneof![
                Just(F::Acquire),
                Just(F::Renew),
                Just(F::Release),
                Just(F::Read),
                Just(F::Write),
                text().prop_map(|s| F::from(s.as_str())),
            ],
            proptest::option::of(text()),
            proptest::option::of(text()),
        );
        let value = (
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<i64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(text()),
            any::<bool>(),
            proptest::option::weighted(0.2, (text(), any::<i64>())),
            proptest::option::weighted(0.2, (text(), text())),
        );
        (head, value).prop_map(|((index, time_ns, process, kind, f, lock, key), v)| {
            let (token, ttl_ms, value, seq, error, is_final, vx, x) = v;
            let mut op = Op::new(index, time_ns, process, kind, f);
            op.lock = lock;
            op.key = key;
            op.value = OpValue {
                token,
                ttl_ms,
                value,
                seq,
                error,
                is_final,
                extra: Map::new(),
            };
            if let Some((k, n)) = vx {
                op.value.extra.insert(format!("x{k}"), Value::from(n));
            }
            if let Some((k, s)) = x {
                op.extra.insert(format!("x{k}"), Value::from(s));
            }
            op
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        /// Whatever op the writer writes, the scanner (when it takes the line) reads what serde
        /// reads, and the view is the op.
        #[test]
        fn any_written_op_reads_back_alike(op in op()) {
            let line = serde_json::to_vec(&op).unwrap();
            let serde: EventRef = serde_json::from_slice(&line).unwrap();
            if let Some(scanned) = scan(&line) {
                prop_assert_eq!(&scanned, &serde);
            }
            prop_assert_eq!(&parse_event(&line).unwrap(), &serde);
            prop_assert_eq!(&Op::from(&serde), &op);
            prop_assert_eq!(&op.view(), &serde);
            prop_assert_eq!(Op::from(serde), op);
        }
    }
}
