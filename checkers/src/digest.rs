//! The compact digest: history events reduced to the few fields the checkers read, without
//! keeping the events. A history file is read by `history`'s one parser in parallel blocks, and
//! each event view goes straight into a small [`Event`] (names interned per block); then one
//! sequential pass pairs them into [`ClientOp`]s with `history`'s one pairing pass (the rules of
//! `History::new`). An in-memory [`History`] is fed through the same pass (its ops viewed as
//! events), so both paths build the same [`Model`].

use crate::evidence::{GrantEvidence, Hold};
use crate::faults::Faults;
use crate::model::{
    follow_lease, ClientOp, Drift, Func, Grant, Model, OpPos, NO_ERROR, NO_GRANT, NO_TARGET,
    SESSION_TTL_MS,
};
use crate::{CheckConfig, FxMap};
use history::{
    EventRef, History, Op, OpType, Outcome, Paired, Pairing, Process, ReadError, ReadWarning,
    Stamp, StructureError, F,
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
    /// `value.lease_from_ns`, `answer_revision`, `key_at_revision`, `lock_key`, `lease_id`
    /// (rare: etcd grants).
    key: Option<Box<GrantEvidence>>,
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
        let (lease, key) = if v.extra.is_empty() {
            (None, None)
        } else {
            GrantEvidence::read(&v.extra)
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
            key,
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

fn f_of(func: Func) -> F {
    match func {
        Func::Acquire => F::Acquire,
        Func::Renew => F::Renew,
        Func::Release => F::Release,
        Func::Read => F::Read,
        Func::Write => F::Write,
    }
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

/// The sequential pass: pairs events into client ops with `history::Pairing`, the pass
/// `History::new` runs.
pub(crate) struct Digest {
    pub(crate) events: u64,
    pub(crate) end_time_ns: u64,
    /// The structure rules; an op's slot in it is its position in `ops`.
    pairing: Pairing,
    pub(crate) ops: Vec<ClientOp>,
    pub(crate) locks: Vec<String>,
    lock_ids: FxMap<String, u32>,
    pub(crate) keys: Vec<String>,
    key_ids: FxMap<String, u32>,
    pub(crate) errors: Vec<String>,
    error_ids: FxMap<String, u32>,
    pub(crate) nemesis: Vec<Op>,
    /// (op position, lease_last_ok_ns, lease_ttl_ms) of completions carrying lease evidence.
    pub(crate) lease_evidence: Vec<(usize, u64, u64)>,
    /// (op position, evidence) of completions carrying a read of the grant's lock key.
    pub(crate) key_evidence: Vec<(usize, crate::evidence::KeyEvidence)>,
    /// (op position, `lease_from_ns`) of completions whose lease was set before them.
    pub(crate) lease_from: Vec<(usize, u64)>,
    pub(crate) rounds: Vec<(usize, u64)>,
    /// (op position, `wait_ms`) of the acquires that say how long they asked to wait, from
    /// their invoke and their completion (the first per op is kept).
    pub(crate) waits: Vec<(usize, u64)>,
    /// (op position, `transfer`) of the ops of a critical section that names itself.
    pub(crate) transfers: Vec<(usize, u64)>,
    /// (op position, `hold`) of the ok acquires that are no lease (a session's or a
    /// transaction's lock).
    pub(crate) holds: Vec<(usize, Hold)>,
    /// (op position, `grant`) of ops naming their grant by the service's own id, the first
    /// one each op gives (its invoke's, else its completion's).
    pub(crate) grant_ids: Vec<(usize, String)>,
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

/// The global id of piece-local id `local`, through the piece's `map` (`u32::MAX`: not yet
/// resolved): `intern` is asked once per piece and name.
fn global_id(map: &mut [u32], local: u32, intern: impl FnOnce(usize) -> u32) -> u32 {
    let g = &mut map[local as usize];
    if *g == u32::MAX {
        *g = intern(local as usize);
    }
    *g
}

impl Digest {
    pub(crate) fn new(capacity: usize) -> Digest {
        Digest {
            events: 0,
            end_time_ns: 0,
            pairing: Pairing::new(),
            ops: Vec::with_capacity(capacity),
            locks: Vec::new(),
            lock_ids: FxMap::default(),
            keys: Vec::new(),
            key_ids: FxMap::default(),
            errors: Vec::new(),
            error_ids: FxMap::default(),
            nemesis: Vec::new(),
            lease_evidence: Vec::new(),
            key_evidence: Vec::new(),
            lease_from: Vec::new(),
            rounds: Vec::new(),
            waits: Vec::new(),
            transfers: Vec::new(),
            holds: Vec::new(),
            grant_ids: Vec::new(),
            error: None,
        }
    }

    /// Pairs one piece's events, in order.
    pub(crate) fn feed(&mut self, piece: Piece) {
        // Piece-local ids to global ones, resolved once per piece and name.
        let mut lock_map = vec![u32::MAX; piece.names.len()];
        let mut key_map = vec![u32::MAX; piece.names.len()];
        let mut error_map = vec![u32::MAX; piece.errors.len()];
        // Piece-local ids to the pairing's, which holds a completion to its invoke's target.
        let mut pairing_map = vec![u32::MAX; piece.names.len()];
        // Bounded by the piece's events.
        for item in piece.items {
            self.events += 1;
            let Some(step) = self.pair(&item, &piece.names, &mut pairing_map) else {
                continue;
            };
            let (paired, e) = match (step, item) {
                (Err(err), _) => {
                    self.error = Some(err);
                    continue;
                }
                (Ok(Paired::Nemesis), Item::Other(op)) => {
                    self.nemesis.push(*op);
                    continue;
                }
                (Ok(paired), Item::Client(e)) => (paired, e),
                // `Other` holds nemesis events and client events of an unknown function, which
                // the pairing refuses.
                (Ok(paired), Item::Other(op)) => {
                    unreachable!("{paired:?} for op {}, which is not a client op", op.index)
                }
            };
            let error = match e.error {
                NO_ERROR => NO_ERROR,
                local => global_id(&mut error_map, local, |name| {
                    intern_global(&mut self.errors, &mut self.error_ids, &piece.errors[name])
                }),
            };
            let target = match e.name {
                NO_TARGET => NO_TARGET,
                local => {
                    let (map, names, ids) = if e.func.is_lock_op() {
                        (&mut lock_map, &mut self.locks, &mut self.lock_ids)
                    } else {
                        (&mut key_map, &mut self.keys, &mut self.key_ids)
                    };
                    global_id(map, local, |name| {
                        intern_global(names, ids, &piece.names[name])
                    })
                }
            };
            match paired {
                Paired::Invoke { slot } => {
                    debug_assert_eq!(slot, self.ops.len());
                    self.invoke(e, target);
                }
                Paired::Complete { slot, outcome } => self.complete(slot, outcome, e, error),
                Paired::Nemesis => unreachable!("a client event is never a nemesis event"),
            }
        }
    }

    /// The pairing's step for one event (`None`: after a structure error, events are counted
    /// but not paired). `names`: the piece's names, `pairing_map` their ids in the pairing.
    fn pair(
        &mut self,
        item: &Item,
        names: &[String],
        pairing_map: &mut [u32],
    ) -> Option<Result<Paired, StructureError>> {
        match item {
            Item::Client(e) => {
                self.end_time_ns = self.end_time_ns.max(e.time_ns);
                if self.error.is_some() {
                    return None;
                }
                let stamp = Stamp {
                    index: e.index,
                    time_ns: e.time_ns,
                };
                let target = match e.name {
                    NO_TARGET => Pairing::NO_TARGET,
                    local => global_id(pairing_map, local, |name| {
                        self.pairing.target(Some(&names[name]))
                    }),
                };
                Some(self.pairing.step(
                    stamp,
                    Process::Client(e.process),
                    e.kind,
                    &f_of(e.func),
                    target,
                ))
            }
            Item::Other(op) => {
                self.end_time_ns = self.end_time_ns.max(op.time_ns);
                if self.error.is_some() {
                    return None;
                }
                Some(
                    self.pairing
                        .step(op.stamp(), op.process, op.kind, &op.f, Pairing::NO_TARGET),
                )
            }
        }
    }

    /// Opens a client op.
    fn invoke(&mut self, e: Event, target: u32) {
        let mut op = ClientOp::invoked(e.func, e.process, target, e.time_ns, e.index, e.is_final);
        // An acquire's token is the one granted; other ops use their invoke's.
        if e.func != Func::Acquire {
            op.set_token(e.token);
        }
        op.set_ttl_ms(e.ttl_ms);
        op.set_requested_ttl_ms(e.ttl_ms);
        if e.func == Func::Write {
            op.set_value(e.value);
        }
        if let Some(g) = e.key.as_ref() {
            let slot = self.ops.len();
            if let Some(id) = g.grant.clone() {
                self.grant_ids.push((slot, id));
            }
            // Read from the invoke too: an acquire that never completed still waited.
            if let (Some(w), Func::Acquire) = (g.wait_ms, e.func) {
                self.waits.push((slot, w));
            }
            if let Some(t) = g.transfer {
                self.transfers.push((slot, t));
            }
        }
        self.ops.push(op);
    }

    /// Ends the client op at `slot` with its completion `e`.
    fn complete(&mut self, slot: usize, outcome: Outcome, e: Event, error: u32) {
        let o = &mut self.ops[slot];
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
            self.lease_evidence.push((slot, a, b));
        }
        if let Some(g) = e.key {
            let GrantEvidence {
                lease_from_ns,
                key,
                round,
                grant,
                hold,
                wait_ms,
                transfer,
            } = *g;
            if let (Some(w), Func::Acquire) = (wait_ms, o.func) {
                self.waits.push((slot, w));
            }
            if let Some(t) = transfer {
                self.transfers.push((slot, t));
            }
            if let (Some(h), Func::Acquire, Outcome::Ok) = (hold, o.func, o.outcome) {
                self.holds.push((slot, h));
            }
            if let Some(id) = grant {
                // Kept after the invoke's (pushed first): the model keeps the first per op.
                self.grant_ids.push((slot, id));
            }
            if let Some(r) = round {
                self.rounds.push((slot, r));
            }
            if let Some(k) = key {
                self.key_evidence.push((slot, k));
            }
            if let Some(from) = lease_from_ns {
                self.lease_from.push((slot, from));
            }
        }
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
    let file = open(path)?;
    // Reserve for every op up front (an event line is rarely under 60 bytes, an op is two
    // events): unused capacity is address space, never touched, and no regrowth copies.
    let capacity = file.metadata().map(|m| m.len() as usize / 120).unwrap_or(0);
    let (mut results, warnings) = check_input(file, path, capacity, cfg, true)?;
    read_evidence(path, &mut results);
    Ok((results, warnings))
}

/// Checks the first `bytes` bytes of a history file that may still be growing, as a live
/// check reads it: what was written after is not looked at, an op invoked and not yet
/// answered is pending. The caller cuts `bytes` at a line's end where time moves on (the
/// events of one instant may be written in any order). The evidence of the ops named is not
/// read: a live verdict is a headline, the final check fills it.
pub fn check_prefix(
    path: &Path,
    bytes: u64,
    cfg: &CheckConfig,
) -> Result<history::Results, CheckError> {
    use std::io::Read;
    let file = open(path)?;
    let (results, _) = check_input(file.take(bytes), path, bytes as usize / 120, cfg, false)?;
    Ok(results)
}

fn open(path: &Path) -> Result<std::fs::File, CheckError> {
    std::fs::File::open(path).map_err(|error| {
        ReadError::Io {
            path: path.to_path_buf(),
            error,
        }
        .into()
    })
}

/// The digest of `input` (named `path` in errors), and every checker run over it. The model is
/// freed on a thread of its own (`drop_aside`) or before returning (a live check, whose caller
/// then hands the memory back).
fn check_input(
    input: impl std::io::Read,
    path: &Path,
    capacity: usize,
    cfg: &CheckConfig,
    drop_aside: bool,
) -> Result<(history::Results, Vec<ReadWarning>), CheckError> {
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
        let warnings = history::read_pieces(input, path, &EventBuilder, move |piece| {
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
        return Err(CheckError::structure(path, error));
    }
    let model = Model::from_digest(digest, cfg);
    let results = crate::check_model(&model, cfg);
    // Freeing millions of ops takes a noticeable share of a check; nobody waits for it.
    if drop_aside {
        std::thread::spawn(move || drop(model));
    }
    Ok((results, warnings))
}

/// Fills `results.evidence` from the file: a second read, only when something was reported,
/// that parses only the lines of the ops named (the recorder writes `index` first) and stops
/// once it has them all. What cannot be read is left out: evidence is a courtesy to the
/// reader, the verdict does not rest on it.
fn read_evidence(path: &Path, results: &mut history::Results) {
    use std::io::BufRead;
    let mut wanted = results.evidence_wanted();
    if wanted.is_empty() {
        return;
    }
    wanted.sort_unstable();
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let mut left = wanted.len();
    // Bounded by the file's lines, and stops at the last op wanted.
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else { return };
        let index = line
            .strip_prefix("{\"index\":")
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse::<u64>().ok());
        let wanted_here = match index {
            Some(i) => wanted.binary_search(&i).is_ok(),
            // Another writer's field order: parse to know.
            None => true,
        };
        if !wanted_here {
            continue;
        }
        let Ok(op) = serde_json::from_str::<Op>(&line) else {
            continue;
        };
        if wanted.binary_search(&op.index).is_ok() {
            results.keep_evidence(&op);
            left = left.saturating_sub(1);
            if left == 0 {
                return;
            }
        }
    }
}

/// How many grants without a token of one lock a token no grant carries is taken to name (the
/// latest ones): a stated bound, counted in the notes when reached.
pub(crate) const UNTOKENED_CANDIDATES_MAX: usize = 64;

impl Model {
    /// Digests an in-memory history: the front end of the same pass a history file goes
    /// through ([`crate::check_path`]).
    pub fn new(h: &History, cfg: &CheckConfig) -> Model {
        let digest = Digest::of_history(h);
        assert!(
            digest.error.is_none(),
            "a History is validated by History::new: {:?}",
            digest.error
        );
        Model::from_digest(digest, cfg)
    }

    /// Builds the model from the paired ops, in order: the grants that are no lease, each
    /// op's grant (by name, [`GrantWalk`]), the run's ttl policy, the grants' epochs (with the
    /// ambiguous ops), the session grants' ends, and each grant's lease.
    pub(crate) fn from_digest(d: Digest, cfg: &CheckConfig) -> Model {
        let drift = Drift::from_fraction(cfg.drift);
        let mut ops = d.ops;
        let holds = apply_holds(d.holds, &mut ops);
        let names = GrantNames::index(&ops, intern_grant_ids(d.grant_ids));
        let walk = GrantWalk::new(&names, ops.len()).run(&ops);
        let ttl_policy = ttl_policy(&ops, &holds);
        apply_ttl_policy(&ttl_policy, &mut ops);
        let GrantWalk {
            mut grants,
            grant_of,
            acts,
            untokened,
            ambiguous,
            ok_acquires,
            unplaced,
            ..
        } = walk;
        add_acts(acts, &mut grants, &ops);
        let ambiguity_capped = add_ambiguous(&ambiguous, &untokened, &mut grants, &mut ops);
        let sessions = mark_holds(&holds, &grants, &mut ops);
        mark_crashes(&sessions, &mut grants, &mut ops);
        let mut lease_from = d.lease_from;
        lease_from.sort_unstable();
        for g in &mut grants {
            let from = crate::model::lease_from_of(&lease_from, g.op);
            follow_lease(g, &ops, drift, from, sessions.binary_search(&g.op).is_ok());
        }
        ops.shrink_to_fit();
        let mut lease_evidence = d.lease_evidence;
        lease_evidence.sort_unstable();
        let mut key_evidence = d.key_evidence;
        key_evidence.sort_by_key(|e| e.0);
        let mut rounds = d.rounds;
        rounds.sort_unstable();
        // The invoke's is pushed first, and a stable sort by position keeps it first.
        let mut waits = d.waits;
        waits.sort_by_key(|e| e.0);
        waits.dedup_by_key(|e| e.0);
        let mut transfers = d.transfers;
        transfers.sort_by_key(|e| e.0);
        transfers.dedup_by_key(|e| e.0);
        debug_assert_eq!(grant_of.len(), ops.len(), "one grant (or none) per op");
        let mut m = Model {
            drift,
            events: d.events,
            end_time_ns: d.end_time_ns,
            faults: Faults::from_nemesis(&d.nemesis, d.end_time_ns),
            locks: d.locks,
            keys: d.keys,
            errors: d.errors,
            nemesis: d.nemesis,
            lease_evidence,
            key_evidence,
            lease_from,
            rounds,
            waits,
            transfers,
            sessions,
            ops,
            grants,
            grant_of,
            ok_acquires,
            unplaced,
            ambiguity_capped,
            grant_named: names.grant_named(),
            ttl_policy,
        };
        for i in 0..m.grants.len() {
            let g = &m.grants[i];
            m.grants[i].alive_until_ns = m.span_end(g, g.invoke_ns).0;
        }
        debug_assert_digested(&m);
        m
    }
}

/// What the rules rely on of a model the digest built (they binary-search its lists and sweep
/// its ops in time order). Debug builds only: one pass over each list.
fn debug_assert_digested(m: &Model) {
    fn sorted_by_pos<T>(list: &[(usize, T)]) -> bool {
        list.windows(2).all(|w| w[0].0 < w[1].0)
    }
    // The pairing refuses times that go back: ops are in invoke order, in time too.
    debug_assert!(
        m.ops.windows(2).all(|w| w[0].invoke_ns <= w[1].invoke_ns),
        "ops are in invoke order"
    );
    debug_assert!(
        m.ops
            .iter()
            .all(|o| o.complete_ns().is_none_or(|c| c >= o.invoke_ns)),
        "an op completes no earlier than its invoke"
    );
    debug_assert_eq!(m.grant_of.len(), m.ops.len(), "one grant (or none) per op");
    debug_assert!(
        m.grant_of
            .iter()
            .all(|&g| g == NO_GRANT || (g as usize) < m.grants.len()),
        "grant_of names grants of the model"
    );
    debug_assert!(
        m.grants.windows(2).all(|w| w[0].op < w[1].op),
        "grants are in op order"
    );
    debug_assert!(
        m.grants.iter().all(|g| g.invoke_ns <= g.complete_ns
            && g.holds.iter().all(|s| s.start_ns < s.end_ns)
            && g.holds.windows(2).all(|w| w[0].end_ns <= w[1].start_ns)),
        "a grant's holds are non-empty and in time order"
    );
    debug_assert!(
        m.sessions.windows(2).all(|w| w[0] < w[1]),
        "sessions are sorted"
    );
    debug_assert!(
        sorted_by_pos(&m.lease_from)
            && sorted_by_pos(&m.waits)
            && sorted_by_pos(&m.transfers)
            && m.grant_named.windows(2).all(|w| w[0].0 < w[1].0),
        "the lists read by op position are sorted, one entry per op"
    );
    debug_assert!(
        m.lease_evidence.windows(2).all(|w| w[0] <= w[1])
            && m.key_evidence.windows(2).all(|w| w[0].0 <= w[1].0)
            && m.rounds.windows(2).all(|w| w[0] <= w[1]),
        "the evidence lists are sorted by op position"
    );
}

/// Grants that are no lease (model item 9). A session's lock is held, as far as its holder
/// knows, until something tells it otherwise: a lease that no time ends (the ops that tell it
/// are marked by [`mark_holds`], once the grants' ops are known). A transaction's lock proves
/// no hold at all: no ttl. Returns the holds sorted by op position.
fn apply_holds(mut holds: Vec<(usize, Hold)>, ops: &mut [ClientOp]) -> Vec<(usize, Hold)> {
    holds.sort_unstable_by_key(|e| e.0);
    for &(pos, h) in &holds {
        ops[pos].set_ttl_ms(match h {
            Hold::Session => Some(SESSION_TTL_MS),
            Hold::Transaction => None,
        });
    }
    holds
}

/// An op's grant id, interned: the invoke's (pushed first; the sort is stable), else the
/// completion's. Sorted by op position, one per op.
fn intern_grant_ids(mut grant_ids: Vec<(usize, String)>) -> Vec<(usize, u32)> {
    grant_ids.sort_by_key(|e| e.0);
    grant_ids.dedup_by_key(|e| e.0);
    let mut id_of: FxMap<String, u32> = FxMap::default();
    grant_ids
        .into_iter()
        .map(|(pos, id)| {
            let n = id_of.len() as u32;
            (pos, *id_of.entry(id).or_insert(n))
        })
        .collect()
}

/// (lock, token or interned id, invoke, grant), sorted.
type NameList = Vec<(u32, u64, u64, u32)>;

/// What names a lease (docs/checkers.md, model item 6): (lock, token) and (lock, grant id) ->
/// the grants with it, in invoke order, known before the walk: an op of another process may be
/// invoked at the same instant as the grant it names, or before it in the file (equal times
/// are not ordered), so it names the latest one asked for by the time it completed.
/// Sorted vectors, not maps of lists: one allocation for all grants, not one per grant.
struct GrantNames {
    /// (op position, interned grant id), sorted by position, one per op.
    ids: Vec<(usize, u32)>,
    by_lock_token: NameList,
    by_lock_id: NameList,
}

impl GrantNames {
    fn index(ops: &[ClientOp], ids: Vec<(usize, u32)>) -> GrantNames {
        debug_assert!(
            ids.windows(2).all(|w| w[0].0 < w[1].0),
            "grant ids are sorted by op position, one per op"
        );
        let mut names = GrantNames {
            ids,
            by_lock_token: Vec::new(),
            by_lock_id: Vec::new(),
        };
        let mut cursor = 0;
        let mut g = 0u32;
        for (pos, op) in ops.iter().enumerate() {
            if op.func != Func::Acquire || op.outcome != Outcome::Ok || op.target == NO_TARGET {
                continue;
            }
            if let Some(t) = op.token() {
                names.by_lock_token.push((op.target, t, op.invoke_ns, g));
            }
            if let Some(i) = names.id_at(&mut cursor, pos) {
                names
                    .by_lock_id
                    .push((op.target, u64::from(i), op.invoke_ns, g));
            }
            g += 1;
        }
        names.by_lock_token.sort_unstable();
        names.by_lock_id.sort_unstable();
        names
    }

    /// The grant id of the op at `pos`, for positions asked in increasing order.
    fn id_at(&self, cursor: &mut usize, pos: usize) -> Option<u32> {
        // Bounded by `ids`: the cursor only moves forward.
        while *cursor < self.ids.len() && self.ids[*cursor].0 < pos {
            *cursor += 1;
        }
        self.ids.get(*cursor).filter(|e| e.0 == pos).map(|e| e.1)
    }

    fn grant_named(&self) -> Vec<(OpPos, u32)> {
        self.ids.iter().map(|e| (e.0 as OpPos, e.1)).collect()
    }
}

/// The latest grant with that name asked for by `done_ns`.
fn named_by(list: &[(u32, u64, u64, u32)], lock: u32, name: u64, done_ns: u64) -> Option<u32> {
    let end = list.partition_point(|e| (e.0, e.1, e.2) <= (lock, name, done_ns));
    end.checked_sub(1)
        .map(|i| list[i])
        .filter(|e| (e.0, e.1) == (lock, name))
        .map(|e| e.3)
}

/// The walk over the ops, in order, that makes the grants and finds the grant each op acts on
/// or uses (model item 6).
struct GrantWalk<'a> {
    names: &'a GrantNames,
    /// `names.id_at`'s cursor.
    next_id: usize,
    grants: Vec<Grant>,
    /// Per op, the grant it acts on or uses, or [`NO_GRANT`].
    grant_of: Vec<u32>,
    /// (grant, op position) of every renew and release acting on a grant, in op order.
    acts: Vec<(u32, usize)>,
    /// (process, token) -> grant, for store ops.
    by_token: FxMap<(u64, u64), u32>,
    /// (process, lock, token or id) -> the process's latest grant with it, in program order.
    own_by_token: FxMap<(u64, u32, u64), u32>,
    own_by_id: FxMap<(u64, u32, u32), u32>,
    /// (process, lock) -> the process's latest grant of the lock, in program order.
    latest: FxMap<(u64, u32), u32>,
    /// Per lock, its latest grants without a token: what a token no grant carries may name.
    untokened: FxMap<u32, Vec<u32>>,
    /// The renews and releases whose token no grant of the lock carries.
    ambiguous: Vec<usize>,
    ok_acquires: u64,
    unplaced: u64,
}

impl<'a> GrantWalk<'a> {
    fn new(names: &'a GrantNames, ops: usize) -> GrantWalk<'a> {
        GrantWalk {
            names,
            next_id: 0,
            grants: Vec::new(),
            grant_of: Vec::with_capacity(ops),
            acts: Vec::new(),
            by_token: FxMap::default(),
            own_by_token: FxMap::default(),
            own_by_id: FxMap::default(),
            latest: FxMap::default(),
            untokened: FxMap::default(),
            ambiguous: Vec::new(),
            ok_acquires: 0,
            unplaced: 0,
        }
    }

    fn run(mut self, ops: &[ClientOp]) -> GrantWalk<'a> {
        // Bounded by the ops.
        for (pos, op) in ops.iter().enumerate() {
            let id = self.names.id_at(&mut self.next_id, pos);
            if op.target == NO_TARGET {
                self.unplaced += 1;
                self.grant_of.push(NO_GRANT);
                continue;
            }
            let uses = match op.func {
                Func::Acquire if op.outcome == Outcome::Ok => {
                    self.grant(pos, op, id);
                    NO_GRANT
                }
                Func::Acquire => NO_GRANT,
                Func::Renew | Func::Release => self.act(pos, op, id),
                Func::Read | Func::Write => op
                    .token()
                    .and_then(|t| self.by_token.get(&(op.process, t)))
                    .copied()
                    .unwrap_or(NO_GRANT),
            };
            self.grant_of.push(uses);
        }
        self
    }

    /// An ok acquire: a new grant, known by its names from here on.
    fn grant(&mut self, pos: usize, op: &ClientOp, id: Option<u32>) {
        let (p, target, token) = (op.process, op.target, op.token());
        self.ok_acquires += 1;
        let g = self.grants.len() as u32;
        if let Some(t) = token {
            self.by_token.insert((p, t), g);
            self.own_by_token.insert((p, target, t), g);
        }
        if let Some(i) = id {
            self.own_by_id.insert((p, target, i), g);
        }
        if token.is_none() {
            self.untokened.entry(target).or_default().push(g);
        }
        self.latest.insert((p, target), g);
        debug_assert!(
            self.grants.last().is_none_or(|last| last.op < pos),
            "grants are made in op order"
        );
        self.grants.push(Grant {
            op: pos,
            lock: target,
            process: p,
            token,
            ttl_ms: op.ttl_ms(),
            invoke_ns: op.invoke_ns,
            complete_ns: op.complete_ns().expect("an ok op has completed"),
            epoch_ops: Vec::new(),
            holds: Vec::new(),
            release_op: None,
            lease_lb_ns: 0,
            surely_dead_ns: None,
            alive_until_ns: 0,
        });
    }

    /// A renew or release acts on the lease it names, whichever process sent it: by its
    /// token, else by the service's grant id, else the sender's own latest grant of the lock.
    /// A name no grant carries acts on no known one. Returns the grant the op uses.
    fn act(&mut self, pos: usize, op: &ClientOp, id: Option<u32>) -> u32 {
        let (p, target, token) = (op.process, op.target, op.token());
        let done_ns = op.complete_or_max();
        // A name two grants carry (a token reused: each side of a split brain counts its own)
        // names the sender's own grant when it has one: it knows the name from its own grant.
        let named = match (token, id) {
            (Some(t), _) => self
                .own_by_token
                .get(&(p, target, t))
                .copied()
                .or_else(|| named_by(&self.names.by_lock_token, target, t, done_ns)),
            (None, Some(i)) => self
                .own_by_id
                .get(&(p, target, i))
                .copied()
                .or_else(|| named_by(&self.names.by_lock_id, target, u64::from(i), done_ns)),
            (None, None) => self.latest.get(&(p, target)).copied(),
        };
        let mut uses = NO_GRANT;
        // A token no grant of the lock carries may be that of any grant whose ok came without
        // a readable token (unknown, not absent): the op may have acted on each of them, so on
        // each it counts as indeterminate. It uses the sender's own, if that is one.
        if let (Some(_), None) = (token, named) {
            self.ambiguous.push(pos);
            uses = self
                .latest
                .get(&(p, target))
                .copied()
                .filter(|&g| self.grants[g as usize].token.is_none())
                .unwrap_or(NO_GRANT);
        }
        if let Some(g) = named {
            uses = g;
            self.acts.push((g, pos));
        }
        uses
    }
}

/// The run's ttl policy (model item 7): what answered requests for each ttl were granted.
/// A lost answer's lease is counted with the shortest of them for lower bounds and the longest
/// for upper bounds; a request no answer shared keeps the ttl it asked for.
fn ttl_policy(ops: &[ClientOp], holds: &[(usize, Hold)]) -> FxMap<u64, (u64, u64)> {
    let mut ttl_policy: FxMap<u64, (u64, u64)> = FxMap::default();
    for (pos, op) in ops.iter().enumerate() {
        // A grant that is no lease (model item 9) says nothing of the lease a lost answer
        // would have set.
        if holds.binary_search_by_key(&pos, |e| e.0).is_ok() {
            continue;
        }
        if let (Func::Acquire | Func::Renew, Outcome::Ok, Some(r), Some(t)) =
            (op.func, op.outcome, op.requested_ttl_ms(), op.ttl_ms())
        {
            let e = ttl_policy.entry(r).or_insert((t, t));
            *e = (e.0.min(t), e.1.max(t));
        }
    }
    ttl_policy
}

/// A lost answer's lease counts with the shortest ttl granted for its request.
fn apply_ttl_policy(ttl_policy: &FxMap<u64, (u64, u64)>, ops: &mut [ClientOp]) {
    for op in ops.iter_mut() {
        if matches!(op.func, Func::Acquire | Func::Renew)
            && matches!(op.outcome, Outcome::Info | Outcome::Pending)
        {
            if let Some(&(shortest, _)) = op.requested_ttl_ms().and_then(|r| ttl_policy.get(&r)) {
                op.set_ttl_ms(Some(shortest));
            }
        }
    }
}

/// Puts each renew and release in the epoch of the grant it acts on (in op order), and marks
/// each grant's first release.
fn add_acts(acts: Vec<(u32, usize)>, grants: &mut [Grant], ops: &[ClientOp]) {
    for (g, pos) in acts {
        let g = &mut grants[g as usize];
        debug_assert!(
            g.epoch_ops.last().is_none_or(|&e| (e as usize) < pos),
            "acts come in op order"
        );
        g.epoch_ops.push(pos as OpPos);
        if ops[pos].func == Func::Release && g.release_op.is_none() {
            g.release_op = Some(pos as OpPos);
        }
    }
}

/// Every grant without a token invoked before an ambiguous op completed may be the one it
/// named (the op may take effect after a grant asked for later than itself). Returns how many
/// candidates [`UNTOKENED_CANDIDATES_MAX`] left out.
fn add_ambiguous(
    ambiguous: &[usize],
    untokened: &FxMap<u32, Vec<u32>>,
    grants: &mut [Grant],
    ops: &mut [ClientOp],
) -> u64 {
    let mut ambiguity_capped = 0u64;
    for &pos in ambiguous {
        let op = &ops[pos];
        let Some(list) = untokened.get(&op.target) else {
            continue;
        };
        let done_ns = op.complete_or_max();
        let end = list.partition_point(|&g| grants[g as usize].invoke_ns <= done_ns);
        if end == 0 {
            continue;
        }
        let start = end.saturating_sub(UNTOKENED_CANDIDATES_MAX);
        ambiguity_capped += start as u64;
        for &g in &list[start..end] {
            let epoch = &mut grants[g as usize].epoch_ops;
            // Positions are invoke order: keep the epoch sorted.
            let at = epoch.partition_point(|&e| e < pos as OpPos);
            epoch.insert(at, pos as OpPos);
        }
        ops[pos].set_ambiguous();
    }
    ambiguity_capped
}

/// Ends each session grant's belief at its holder's crash (model item 9): a process whose op
/// went unanswered (`info`, whatever it asked) never acts again, so from that op's invoke its
/// belief may end, as its release would. The op joins the grant's epoch, marked
/// `session_end`, unless it is there already or the belief ended before it.
fn mark_crashes(sessions: &[usize], grants: &mut [Grant], ops: &mut [ClientOp]) {
    if sessions.is_empty() {
        return;
    }
    // A crashed process's one info op is its last (it gets a new number after it).
    let mut crash_of: FxMap<u64, usize> = FxMap::default();
    for (pos, op) in ops.iter().enumerate() {
        if op.outcome == Outcome::Info {
            crash_of.entry(op.process).or_insert(pos);
        }
    }
    for &pos in sessions {
        let Ok(gi) = grants.binary_search_by_key(&pos, |g| g.op) else {
            continue;
        };
        let g = &mut grants[gi];
        let Some(&crash) = crash_of.get(&g.process).filter(|&&c| c > g.op) else {
            continue;
        };
        let at = g.epoch_ops.partition_point(|&e| (e as usize) < crash);
        let ended = g.epoch_ops[..at]
            .iter()
            .any(|&e| ops[e as usize].session_end());
        if ended || g.epoch_ops.get(at) == Some(&(crash as OpPos)) {
            continue;
        }
        g.epoch_ops.insert(at, crash as OpPos);
        ops[crash].set_session_end();
    }
}

/// Marks the ops of the grants that are no lease (model item 9) and lists the session grants
/// (their acquires' positions, sorted). For a session grant: the holder's releases and its
/// renews that did not answer ok end what it believes (`session_end`); an ok renew, the check
/// of a live session, keeps it without end. A transaction grant's renews set no lease.
fn mark_holds(holds: &[(usize, Hold)], grants: &[Grant], ops: &mut [ClientOp]) -> Vec<usize> {
    let mut sessions = Vec::new();
    for &(pos, h) in holds {
        // Grants are in op order.
        let Ok(gi) = grants.binary_search_by_key(&pos, |g| g.op) else {
            continue;
        };
        let g = &grants[gi];
        if h == Hold::Session {
            sessions.push(pos);
        }
        for &e in &g.epoch_ops {
            let op = &mut ops[e as usize];
            let own = op.process == g.process;
            match (h, op.func, op.outcome) {
                (Hold::Transaction, Func::Renew, _) => op.set_ttl_ms(None),
                (Hold::Session, Func::Renew, Outcome::Ok) => op.set_ttl_ms(Some(SESSION_TTL_MS)),
                (Hold::Session, Func::Renew | Func::Release, _) if own => op.set_session_end(),
                // Another process's renew of the session's grant may have reached the
                // session; it tells the holder nothing.
                (Hold::Session, Func::Renew, _) => op.set_ttl_ms(Some(SESSION_TTL_MS)),
                _ => {}
            }
        }
    }
    sessions
}
