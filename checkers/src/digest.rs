//! The compact digest: history events reduced to the few fields the checkers read, without
//! keeping the events. A history file is parsed in parallel blocks straight into small
//! [`Event`]s (names interned per block), then one sequential pass pairs them into
//! [`ClientOp`]s with the structure rules of `History::new`. An in-memory [`History`] is fed
//! through the same pass, so both paths build the same [`Model`].

use crate::model::{ClientOp, Func, Model, NO_ERROR, NO_TARGET};
use crate::{CheckConfig, FxMap};
use history::{
    History, Op, OpType, Outcome, Process, ReadError, ReadWarning, Stamp, StructureError, F,
};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use std::path::Path;

/// Why a history file could not be checked: the error, and the words, of every command that
/// reads a history (`history::read_history`).
pub use history::LoadError as CheckError;

/// One client event of a known client function.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    index: u64,
    time_ns: u64,
    process: u64,
    kind: OpType,
    func: Func,
    /// Piece-local id of the lock (lock ops) or key (store ops), or [`NO_TARGET`].
    name: u32,
    token: Option<u64>,
    ttl_ms: Option<u64>,
    value: Option<i64>,
    seq: Option<u64>,
    /// Piece-local id of `value.error`, or [`NO_ERROR`].
    error: u32,
    is_final: bool,
    /// `value.lease_last_ok_ns` and `value.lease_ttl_ms`, read as the lease checker reads them.
    lease: Option<(u64, u64)>,
}

pub(crate) enum Item {
    Client(Event),
    /// Nemesis events (few, and their values matter to fault pairing) and client events of an
    /// unknown function (a structure error when reached): kept whole.
    Other(Box<Op>),
}

/// The events of one range of lines, with the names they use.
pub(crate) struct Piece {
    items: Vec<Item>,
    names: Vec<String>,
    name_ids: FxMap<String, u32>,
    errors: Vec<String>,
    error_ids: FxMap<String, u32>,
}

/// Few distinct names per block: a linear scan beats hashing until there are many.
fn intern_local(names: &mut Vec<String>, ids: &mut FxMap<String, u32>, name: &str) -> u32 {
    if names.len() <= 8 {
        if let Some(i) = names.iter().position(|n| n == name) {
            return i as u32;
        }
        if names.len() < 8 {
            names.push(name.to_string());
            return names.len() as u32 - 1;
        }
        // Moving to the map: index what the scan knew.
        if ids.is_empty() {
            for (i, n) in names.iter().enumerate() {
                ids.insert(n.clone(), i as u32);
            }
        }
    }
    if let Some(&i) = ids.get(name) {
        return i;
    }
    names.push(name.to_string());
    let i = names.len() as u32 - 1;
    ids.insert(name.to_string(), i);
    i
}

impl Piece {
    pub(crate) fn with_capacity(n: usize) -> Piece {
        Piece {
            items: Vec::with_capacity(n),
            names: Vec::new(),
            name_ids: FxMap::default(),
            errors: Vec::new(),
            error_ids: FxMap::default(),
        }
    }

    fn name(&mut self, name: Option<&str>) -> u32 {
        match name {
            Some(n) => intern_local(&mut self.names, &mut self.name_ids, n),
            None => NO_TARGET,
        }
    }

    fn error(&mut self, error: Option<&str>) -> u32 {
        match error {
            Some(e) => intern_local(&mut self.errors, &mut self.error_ids, e),
            None => NO_ERROR,
        }
    }

    fn push_client(
        &mut self,
        (index, time_ns, process, kind, func): (u64, u64, u64, OpType, Func),
        name: Option<&str>,
        error: Option<&str>,
        f: Fields,
    ) {
        let name = self.name(name);
        let error = self.error(error);
        self.items.push(Item::Client(Event {
            index,
            time_ns,
            process,
            kind,
            func,
            name,
            token: f.token,
            ttl_ms: f.ttl_ms,
            value: f.value,
            seq: f.seq,
            error,
            is_final: f.is_final,
            lease: f.lease,
        }));
    }

    /// Adds a parsed op: the conversion both the file path and the [`History`] path use.
    pub(crate) fn push_op(&mut self, op: &Op) {
        let func = client_func(&op.f);
        let (Process::Client(process), Some(func)) = (op.process, func) else {
            self.items.push(Item::Other(Box::new(op.clone())));
            return;
        };
        let name = if func.is_lock_op() {
            op.lock.as_deref()
        } else {
            op.key.as_deref()
        };
        let lease = match (
            crate::lease::as_u64(op.value.extra.get("lease_last_ok_ns")),
            crate::lease::as_u64(op.value.extra.get("lease_ttl_ms")),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        };
        let v = &op.value;
        let fields = Fields {
            token: v.token,
            ttl_ms: v.ttl_ms,
            value: v.value,
            seq: v.seq,
            is_final: v.is_final,
            lease,
        };
        self.push_client(
            (op.index, op.time_ns, process, op.kind, func),
            name,
            v.error.as_deref(),
            fields,
        );
    }
}

fn client_func(f: &F) -> Option<Func> {
    Some(match f {
        F::Acquire => Func::Acquire,
        F::Renew => Func::Renew,
        F::Release => Func::Release,
        F::Read => Func::Read,
        F::Write => Func::Write,
        F::Other(_) => return None,
    })
}

fn func_of_str(f: &str) -> Option<Func> {
    Some(match f {
        "acquire" => Func::Acquire,
        "renew" => Func::Renew,
        "release" => Func::Release,
        "read" => Func::Read,
        "write" => Func::Write,
        _ => return None,
    })
}

/// A string borrowed from the line when it has no escapes, owned otherwise.
struct CowStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A JSON value read and dropped, refusing exactly what `serde_json::Value` refuses (a number
/// out of range such as `1e400`, a lone surrogate escape, invalid UTF-8, nesting beyond
/// serde_json's limit), none of which `IgnoredAny` notices. `Op` keeps unknown fields as
/// `Value`s, so the fast readers skip them with this, or they would accept lines `Op` refuses.
struct AnyJson;

impl<'de> Deserialize<'de> for AnyJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyJson)
    }
}

impl<'de> Visitor<'de> for AnyJson {
    type Value = AnyJson;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_unit<E: de::Error>(self) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AnyJson, A::Error> {
        // Bounded by the array's elements.
        while seq.next_element::<AnyJson>()?.is_some() {}
        Ok(AnyJson)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyJson, A::Error> {
        // Bounded by the object's entries.
        while map.next_entry::<AnyJson, AnyJson>()?.is_some() {}
        Ok(AnyJson)
    }
}

/// The value fields the checkers read; everything else is skipped (checked, not kept).
#[derive(Default)]
struct RawValue<'a> {
    token: Option<u64>,
    ttl_ms: Option<u64>,
    value: Option<i64>,
    seq: Option<u64>,
    error: Option<CowStr<'a>>,
    is_final: bool,
    lease_last_ok_ns: Option<Value>,
    lease_ttl_ms: Option<Value>,
}

impl<'de> Deserialize<'de> for RawValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawValue<'de>, A::Error> {
                let mut v = RawValue::default();
                // Bounded by the map's entries.
                while let Some(key) = map.next_key::<CowStr<'de>>()? {
                    match &*key.0 {
                        "token" => v.token = map.next_value()?,
                        "ttl_ms" => v.ttl_ms = map.next_value()?,
                        "value" => v.value = map.next_value()?,
                        "seq" => v.seq = map.next_value()?,
                        "error" => v.error = map.next_value()?,
                        "final" => v.is_final = map.next_value::<Option<bool>>()?.unwrap_or(false),
                        "lease_last_ok_ns" => v.lease_last_ok_ns = Some(map.next_value()?),
                        "lease_ttl_ms" => v.lease_ttl_ms = Some(map.next_value()?),
                        _ => {
                            map.next_value::<AnyJson>()?;
                        }
                    }
                }
                Ok(v)
            }
            fn visit_unit<E: de::Error>(self) -> Result<RawValue<'de>, E> {
                Ok(RawValue::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// One line as the checkers need it, read without allocating (unless a name has escapes).
/// Mirrors `Op`'s deserializer field for field, so whatever it accepts `Op` accepts with the
/// same values; on anything else the line is re-read as an `Op` (see [`EventParser`]).
struct RawLine<'a> {
    index: u64,
    time_ns: u64,
    process: Process,
    kind: OpType,
    f: CowStr<'a>,
    lock: Option<CowStr<'a>>,
    key: Option<CowStr<'a>>,
    value: RawValue<'a>,
}

impl<'de> Deserialize<'de> for RawLine<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawLine<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a history op object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawLine<'de>, A::Error> {
                let mut index = None;
                let mut time_ns = None;
                let mut process = None;
                let mut kind = None;
                let mut f = None;
                let mut lock = None;
                let mut key = None;
                let mut value = RawValue::default();
                // Bounded by the map's entries.
                while let Some(k) = map.next_key::<CowStr<'de>>()? {
                    match &*k.0 {
                        "index" => index = Some(map.next_value::<u64>()?),
                        "time_ns" => time_ns = Some(map.next_value::<u64>()?),
                        "process" => process = Some(map.next_value::<Process>()?),
                        "type" => kind = Some(map.next_value::<OpType>()?),
                        "f" => f = Some(map.next_value::<CowStr<'de>>()?),
                        "lock" => lock = map.next_value()?,
                        "key" => key = map.next_value()?,
                        "value" => value = map.next_value()?,
                        _ => {
                            map.next_value::<AnyJson>()?;
                        }
                    }
                }
                Ok(RawLine {
                    index: index.ok_or_else(|| de::Error::missing_field("index"))?,
                    time_ns: time_ns.ok_or_else(|| de::Error::missing_field("time_ns"))?,
                    process: process.ok_or_else(|| de::Error::missing_field("process"))?,
                    kind: kind.ok_or_else(|| de::Error::missing_field("type"))?,
                    f: f.ok_or_else(|| de::Error::missing_field("f"))?,
                    lock,
                    key,
                    value,
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// Parses history lines into [`Piece`]s for [`history::read_pieces`].
pub(crate) struct EventParser;

impl history::PieceParser for EventParser {
    type Piece = Piece;

    fn new_piece(&self, bytes: usize) -> Piece {
        Piece::with_capacity(bytes / 100)
    }

    fn parse_line(&self, line: &[u8], piece: &mut Piece) -> Result<Stamp, String> {
        // The writer's own lines take the scanner; anything it does not know, the serde reader.
        if let Some(stamp) = scan_line(line, piece) {
            return Ok(stamp);
        }
        if let Ok(raw) = serde_json::from_slice::<RawLine>(line) {
            if let (Process::Client(process), Some(func)) = (raw.process, func_of_str(&raw.f.0)) {
                let name = if func.is_lock_op() { raw.lock } else { raw.key };
                let v = raw.value;
                let lease = match (
                    crate::lease::as_u64(v.lease_last_ok_ns.as_ref()),
                    crate::lease::as_u64(v.lease_ttl_ms.as_ref()),
                ) {
                    (Some(a), Some(b)) => Some((a, b)),
                    _ => None,
                };
                let fields = Fields {
                    token: v.token,
                    ttl_ms: v.ttl_ms,
                    value: v.value,
                    seq: v.seq,
                    is_final: v.is_final,
                    lease,
                };
                piece.push_client(
                    (raw.index, raw.time_ns, process, raw.kind, func),
                    name.as_ref().map(|n| &*n.0),
                    v.error.as_ref().map(|e| &*e.0),
                    fields,
                );
                return Ok(Stamp {
                    index: raw.index,
                    time_ns: raw.time_ns,
                });
            }
        }
        // Nemesis events, unknown functions and anything the fast readers refused: the full
        // reader decides, with its own words for a bad line.
        let op = serde_json::from_slice::<Op>(line).map_err(|e| e.to_string())?;
        piece.push_op(&op);
        Ok(op.stamp())
    }
}

/// The value fields of a client event that are plain numbers and flags.
#[derive(Default)]
struct Fields {
    token: Option<u64>,
    ttl_ms: Option<u64>,
    value: Option<i64>,
    seq: Option<u64>,
    is_final: bool,
    lease: Option<(u64, u64)>,
}

/// A strict reader of the exact subset of JSON the harness's writer produces for client
/// events: no whitespace, ASCII strings without escapes, integers without sign (but `value`),
/// fraction or exponent, known keys each at most once. It never decides that a line is
/// malformed: on anything else it returns `None` and the serde readers take the line, so what
/// it accepts it reads exactly as they would, only several times faster.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn eat(&mut self, c: u8) -> Option<()> {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    fn null(&mut self) -> bool {
        if self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    /// A string's bytes: printable ASCII only, so any of them is valid UTF-8 as it stands.
    fn bytes(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        // Bounded by the line.
        loop {
            match *self.b.get(self.i)? {
                b'"' => break,
                // Escapes, control characters and non-ASCII: the serde reader's business.
                b'\\' | 0..0x20 | 0x7f.. => return None,
                _ => self.i += 1,
            }
        }
        let s = &self.b[start..self.i];
        self.i += 1;
        Some(s)
    }

    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    fn u64(&mut self) -> Option<u64> {
        let start = self.i;
        let mut n: u64 = 0;
        // Bounded by the line.
        while let Some(&d) = self.b.get(self.i) {
            if !d.is_ascii_digit() {
                break;
            }
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        // No digits, a leading zero, or a fraction or exponent follows.
        if digits == 0 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        if matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(n)
    }

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

    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            Some(None)
        } else {
            self.u64().map(Some)
        }
    }

    fn opt_str(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            Some(None)
        } else {
            self.str().map(Some)
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
            let key = self.bytes()?;
            self.eat(b':')?;
            field(self, key)?;
            if self.eat(b'}').is_some() {
                return Some(());
            }
            self.eat(b',')?;
        }
    }
}

/// Reads a client event line with [`Scan`] into `piece`; `None` leaves it to the serde readers.
fn scan_line(line: &[u8], piece: &mut Piece) -> Option<Stamp> {
    let mut s = Scan { b: line, i: 0 };
    let (mut index, mut time_ns, mut process, mut kind, mut func) = (None, None, None, None, None);
    let mut lock = None;
    let mut key = None;
    let mut error = None;
    let mut fields = Fields::default();
    let mut seen = 0u32;
    let mut seen_v = 0u32;
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
            // A nemesis process is a string: left to the serde readers.
            b"process" => {
                process = Some(s.u64()?);
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
                func = Some(match s.bytes()? {
                    b"acquire" => Func::Acquire,
                    b"renew" => Func::Renew,
                    b"release" => Func::Release,
                    b"read" => Func::Read,
                    b"write" => Func::Write,
                    _ => return None,
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
                if !s.null() {
                    s.object(|s, k| {
                        let bit = match k {
                            b"token" => {
                                fields.token = s.opt_u64()?;
                                1
                            }
                            b"ttl_ms" => {
                                fields.ttl_ms = s.opt_u64()?;
                                2
                            }
                            b"value" => {
                                fields.value = if s.null() { None } else { Some(s.i64()?) };
                                4
                            }
                            b"seq" => {
                                fields.seq = s.opt_u64()?;
                                8
                            }
                            b"error" => {
                                error = s.opt_str()?;
                                16
                            }
                            b"final" => {
                                fields.is_final = if s.b[s.i..].starts_with(b"true") {
                                    s.i += 4;
                                    true
                                } else if s.b[s.i..].starts_with(b"false") {
                                    s.i += 5;
                                    false
                                } else if s.null() {
                                    false
                                } else {
                                    return None;
                                };
                                32
                            }
                            _ => return None,
                        };
                        if seen_v & bit != 0 {
                            return None;
                        }
                        seen_v |= bit;
                        Some(())
                    })?;
                }
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
    let (index, time_ns, process, kind, func) = (index?, time_ns?, process?, kind?, func?);
    let name = if func.is_lock_op() { lock } else { key };
    piece.push_client((index, time_ns, process, kind, func), name, error, fields);
    Some(Stamp { index, time_ns })
}

/// The sequential pass: pairs events into client ops under `History::new`'s rules.
pub(crate) struct Digest {
    pub(crate) events: u64,
    pub(crate) end_time_ns: u64,
    last_index: Option<u64>,
    pub(crate) ops: Vec<ClientOp>,
    /// process -> position in `ops` of its op in flight
    in_flight: FxMap<u64, usize>,
    /// process -> index of the `info` that crashed it
    crashed: FxMap<u64, u64>,
    pub(crate) locks: Vec<String>,
    lock_ids: FxMap<String, u32>,
    pub(crate) keys: Vec<String>,
    key_ids: FxMap<String, u32>,
    pub(crate) errors: Vec<String>,
    error_ids: FxMap<String, u32>,
    pub(crate) nemesis: Vec<Op>,
    /// (op position, lease_last_ok_ns, lease_ttl_ms) of completions carrying lease evidence.
    pub(crate) lease_evidence: Vec<(usize, u64, u64)>,
    /// The first structure error; events after it are counted but not paired.
    pub(crate) error: Option<StructureError>,
}

fn intern_global(names: &mut Vec<String>, ids: &mut FxMap<String, u32>, name: &str) -> u32 {
    if let Some(&i) = ids.get(name) {
        return i;
    }
    names.push(name.to_string());
    let i = names.len() as u32 - 1;
    ids.insert(name.to_string(), i);
    i
}

fn f_name(func: Func) -> &'static str {
    func.as_str()
}

impl Digest {
    pub(crate) fn new(capacity: usize) -> Digest {
        Digest {
            events: 0,
            end_time_ns: 0,
            last_index: None,
            ops: Vec::with_capacity(capacity),
            in_flight: FxMap::default(),
            crashed: FxMap::default(),
            locks: Vec::new(),
            lock_ids: FxMap::default(),
            keys: Vec::new(),
            key_ids: FxMap::default(),
            errors: Vec::new(),
            error_ids: FxMap::default(),
            nemesis: Vec::new(),
            lease_evidence: Vec::new(),
            error: None,
        }
    }

    /// Pairs one piece's events, in order.
    pub(crate) fn feed(&mut self, piece: Piece) {
        // Piece-local ids to global ones, resolved once per piece and name.
        let mut lock_map = vec![u32::MAX; piece.names.len()];
        let mut key_map = vec![u32::MAX; piece.names.len()];
        let mut error_map = vec![u32::MAX; piece.errors.len()];
        // Bounded by the piece's events.
        for item in piece.items {
            self.events += 1;
            let (index, time_ns) = match &item {
                Item::Client(e) => (e.index, e.time_ns),
                Item::Other(op) => (op.index, op.time_ns),
            };
            self.end_time_ns = self.end_time_ns.max(time_ns);
            if self.error.is_some() {
                continue;
            }
            if let Some(last) = self.last_index {
                if index <= last {
                    self.error = Some(StructureError {
                        index,
                        reason: format!("index does not ascend (previous index {last})"),
                    });
                    continue;
                }
            }
            self.last_index = Some(index);
            let e = match item {
                Item::Client(e) => e,
                Item::Other(op) => {
                    match op.process {
                        Process::Nemesis => self.nemesis.push(*op),
                        Process::Client(_) => {
                            self.error = Some(StructureError {
                                index,
                                reason: format!(
                                    "client function {:?} is not one of acquire, renew, release, read, write",
                                    op.f.as_str()
                                ),
                            });
                        }
                    }
                    continue;
                }
            };
            let error = match e.error {
                NO_ERROR => NO_ERROR,
                local => {
                    let g = &mut error_map[local as usize];
                    if *g == u32::MAX {
                        *g = intern_global(
                            &mut self.errors,
                            &mut self.error_ids,
                            &piece.errors[local as usize],
                        );
                    }
                    *g
                }
            };
            let target = match e.name {
                NO_TARGET => NO_TARGET,
                local => {
                    let (map, names, ids) = if e.func.is_lock_op() {
                        (&mut lock_map, &mut self.locks, &mut self.lock_ids)
                    } else {
                        (&mut key_map, &mut self.keys, &mut self.key_ids)
                    };
                    let g = &mut map[local as usize];
                    if *g == u32::MAX {
                        *g = intern_global(names, ids, &piece.names[local as usize]);
                    }
                    *g
                }
            };
            if let Err(err) = self.pair(e, target, error) {
                self.error = Some(err);
            }
        }
    }

    fn pair(&mut self, e: Event, target: u32, error: u32) -> Result<(), StructureError> {
        let p = e.process;
        if let Some(at) = self.crashed.get(&p) {
            return Err(StructureError {
                index: e.index,
                reason: format!(
                    "process {p} crashed (info at index {at}) and must not run further ops"
                ),
            });
        }
        if e.kind == OpType::Invoke {
            if let Some(&open) = self.in_flight.get(&p) {
                return Err(StructureError {
                    index: e.index,
                    reason: format!(
                        "process {p} invoked while its op at index {} is still in flight",
                        self.ops[open].index
                    ),
                });
            }
            self.in_flight.insert(p, self.ops.len());
            let mut op = ClientOp::invoked(e.func, p, target, e.time_ns, e.index, e.is_final);
            // An acquire's token is the one granted; other ops use their invoke's.
            if e.func != Func::Acquire {
                op.set_token(e.token);
            }
            op.set_ttl_ms(e.ttl_ms);
            op.set_requested_ttl_ms(e.ttl_ms);
            if e.func == Func::Write {
                op.set_value(e.value);
            }
            self.ops.push(op);
            return Ok(());
        }
        let Some(open) = self.in_flight.remove(&p) else {
            return Err(StructureError {
                index: e.index,
                reason: format!(
                    "{} for process {p}, which has no op in flight",
                    e.kind.as_str()
                ),
            });
        };
        let o = &mut self.ops[open];
        if o.func != e.func {
            return Err(StructureError {
                index: e.index,
                reason: format!(
                    "completes a {} but process {p} invoked a {} at index {}",
                    f_name(e.func),
                    f_name(o.func),
                    o.index
                ),
            });
        }
        if e.time_ns < o.invoke_ns {
            return Err(StructureError {
                index: e.index,
                reason: format!(
                    "completes at time_ns {} before its invoke at index {} (time_ns {})",
                    e.time_ns, o.index, o.invoke_ns
                ),
            });
        }
        let outcome = match e.kind {
            OpType::Ok => Outcome::Ok,
            OpType::Fail => Outcome::Fail,
            _ => {
                self.crashed.insert(p, e.index);
                Outcome::Info
            }
        };
        o.complete(outcome, e.time_ns);
        o.index = e.index;
        if o.func == Func::Acquire {
            if o.outcome == Outcome::Ok {
                o.set_token(e.token);
            }
        } else if o.token().is_none() {
            o.set_token(e.token);
        }
        if let (Outcome::Ok, Some(t)) = (o.outcome, e.ttl_ms) {
            o.set_ttl_ms(Some(t));
        }
        o.set_seq(e.seq);
        if o.func != Func::Write || o.value().is_none() {
            o.set_value(e.value);
        }
        o.error = error;
        o.is_final |= e.is_final;
        if let Some((a, b)) = e.lease {
            self.lease_evidence.push((open, a, b));
        }
        Ok(())
    }

    /// Digests an in-memory history.
    pub(crate) fn of_history(h: &History) -> Digest {
        let mut d = Digest::new(h.operations().len());
        // In slices, so the piece's names stay few and its events bounded.
        for chunk in h.ops.chunks(64 * 1024) {
            let mut piece = Piece::with_capacity(chunk.len());
            for op in chunk {
                piece.push_op(op);
            }
            d.feed(piece);
        }
        d
    }
}

/// Checks a history file without keeping its events: parses it in parallel blocks into the
/// compact digest, pairs it, and runs every checker. Returns the reader's warnings with the
/// results.
pub fn check_path(
    path: &Path,
    cfg: &CheckConfig,
) -> Result<(history::Results, Vec<ReadWarning>), CheckError> {
    let file = std::fs::File::open(path).map_err(|error| ReadError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    // Reserve for every op up front (an event line is rarely under 60 bytes, an op is two
    // events): unused capacity is address space, never touched, and no regrowth copies.
    let capacity = file.metadata().map(|m| m.len() as usize / 120).unwrap_or(0);
    // Pairing is sequential: it runs on its own thread, on each block while the next is parsed.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Piece>(4);
    let (warnings, mut digest) = std::thread::scope(|scope| {
        let pairer = scope.spawn(move || {
            let mut digest = Digest::new(capacity);
            // Bounded by the pieces sent, which end when the reader returns.
            for piece in rx {
                digest.feed(piece);
            }
            digest
        });
        let warnings = history::read_pieces(file, path, &EventParser, move |piece| {
            // The pairer only stops when this sender is dropped: a send cannot fail.
            let _ = tx.send(piece);
        });
        (
            warnings,
            pairer.join().expect("history pairing thread panicked"),
        )
    });
    let warnings = warnings?;
    if let Some(error) = digest.error.take() {
        return Err(CheckError::Structure {
            path: path.to_path_buf(),
            error,
        });
    }
    let model = Model::from_digest(digest, cfg);
    let results = crate::check_model(&model, cfg);
    // Freeing millions of ops takes a noticeable share of a check; nobody waits for it.
    std::thread::spawn(move || drop(model));
    Ok((results, warnings))
}
