//! The compact digest: history events reduced to the few fields the checkers read, without
//! keeping the events. A history file is read by `history`'s one parser in parallel blocks, and
//! each event view goes straight into a small [`Event`] (names interned per block); then one
//! sequential pass pairs them into [`ClientOp`]s with the structure rules of `History::new`. An
//! in-memory [`History`] is fed through the same pass (its ops viewed as events), so both paths
//! build the same [`Model`].

use crate::model::{ClientOp, Func, Model, NO_ERROR, NO_TARGET};
use crate::{CheckConfig, FxMap};
use history::{
    EventRef, History, Op, OpType, Outcome, Process, ReadError, ReadWarning, StructureError, F,
};
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

    /// Adds one event: what both the file path (a parsed line) and the [`History`] path (an
    /// op's view) give.
    #[inline]
    pub(crate) fn push(&mut self, e: &EventRef<'_>) {
        let (Process::Client(process), Some(func)) = (e.process, client_func(&e.f)) else {
            self.items.push(Item::Other(Box::new(Op::from(e))));
            return;
        };
        let name = if func.is_lock_op() { &e.lock } else { &e.key };
        let name = self.name(name.as_deref());
        let v = &e.value;
        let error = self.error(v.error.as_deref());
        // Adapter evidence is rare: most values have no unknown field to look up.
        let lease = if v.extra.is_empty() {
            None
        } else {
            match (
                crate::lease::as_u64(v.extra.get("lease_last_ok_ns")),
                crate::lease::as_u64(v.extra.get("lease_ttl_ms")),
            ) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            }
        };
        self.items.push(Item::Client(Event {
            index: e.index,
            time_ns: e.time_ns,
            process,
            kind: e.kind,
            func,
            name,
            token: v.token,
            ttl_ms: v.ttl_ms,
            value: v.value,
            seq: v.seq,
            error,
            is_final: v.is_final,
            lease,
        }));
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

/// Builds [`Piece`]s of the events [`history::read_pieces`] parses.
pub(crate) struct EventBuilder;

impl history::PieceBuilder for EventBuilder {
    type Piece = Piece;

    fn new_piece(&self, bytes: usize) -> Piece {
        Piece::with_capacity(bytes / 100)
    }

    #[inline]
    fn push(&self, event: &EventRef<'_>, piece: &mut Piece) {
        piece.push(event);
    }
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
                piece.push(&op.view());
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
        let warnings = history::read_pieces(file, path, &EventBuilder, move |piece| {
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
