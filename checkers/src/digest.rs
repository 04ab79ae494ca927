//! The compact digest: history events reduced to the few fields the checkers read, without
//! keeping the events. A history file is read by `history`'s one parser in parallel blocks, and
//! each event view goes straight into a small [`Event`] (names interned per block); then one
//! sequential pass pairs them into [`ClientOp`]s with `history`'s one pairing pass (the rules of
//! `History::new`). An in-memory [`History`] is fed through the same pass (its ops viewed as
//! events), so both paths build the same [`Model`].

use crate::evidence::{GrantEvidence, Hold};
use crate::faults::Faults;
use crate::model::{
    ClientOp, Drift, Func, Grant, Model, OpPos, View, NO_ERROR, NO_GRANT, NO_TARGET, SESSION_TTL_MS,
};
use crate::stream::{Reach, Streamed, TokenKey};
use crate::walk::{Close, Ops, Walk};
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
        // Compared byte by byte in line: the names are a few bytes, shorter than a call.
        let same =
            |n: &String| n.len() == name.len() && n.bytes().zip(name.bytes()).all(|(a, b)| a == b);
        if let Some(i) = names.iter().position(same) {
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
    pub(crate) ops: Ops,
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
    pub(crate) rounds: Vec<(usize, u64)>,
    /// (op position, `wait_ms`) of the acquires that say how long they asked to wait, from
    /// their invoke and their completion (the first per op is kept).
    pub(crate) waits: Vec<(usize, u64)>,
    /// (op position, `transfer`) of the ops of a critical section that names itself.
    pub(crate) transfers: Vec<(usize, u64)>,
    /// (op position, `hold`) of the ok acquires that are no lease (a session's or a
    /// transaction's lock), for the tests' whole walk.
    #[cfg(test)]
    holds: Vec<(usize, Hold)>,
    /// The tests' oracle reads a history without walking it.
    #[cfg(test)]
    hold_walk: bool,
    /// What the reader dropped of `walk.grant_of`, for the tests.
    #[cfg(test)]
    grant_of_dropped: Vec<u32>,
    /// The walk that makes the grants, done as the ops are read: each op walked as soon as
    /// `walk.rs`'s rule allows ([`Digest::advance`]).
    walk: Walk,
    /// Acquires invoked and not yet answered, `(invoke, position)`: an op is walked only once
    /// none invoked by its completion is left.
    open_acquires: crate::ascending::AscendingQueue<(u64, OpPos), ()>,
    /// Grant ids (`value.grant`) by their text, numbered as they are read: equal ids, equal
    /// numbers.
    id_numbers: FxMap<String, u32>,
    /// Per op not yet walked, the number of the grant id it carries: the first one it gives
    /// (its invoke's, else its completion's).
    id_of: FxMap<OpPos, u32>,
    /// Read numbers to the model's, which numbers ids by the position of the first op that
    /// carries each (the walk's order), whatever order the file gives them in.
    renumber: FxMap<u32, u32>,
    /// `(position, model's number)` of the ops that carry a grant id, in position order.
    pub(crate) grant_named: Vec<(OpPos, u32)>,
    /// The drift the leases of closed grants are followed with.
    drift: Drift,
    /// `lease_from_ns` of the completions whose lease was set before them, by position: read
    /// as grants close, and sorted into the model's list at the end.
    lease_from_at: FxMap<OpPos, u64>,
    /// The most ops read and not yet walked at once.
    unwalked_max: usize,
    /// How many ops a dropping reader lets wait to be walked before it stops waiting for the
    /// op that holds them ([`UNWALKED_OPS_MAX`]; the tests set less).
    pub(crate) unwalked_limit: usize,
    /// The ops the reader stopped waiting for (pending, or acquires still unanswered), by
    /// position: taken as pending from then on, whatever answer comes.
    forced: crate::model::FxSet<OpPos>,
    /// How many times it stopped waiting, and the answers that came after it did (each counted
    /// late: the ops walked meanwhile did not see it).
    pub(crate) forced_count: u64,
    pub(crate) late_answers: u64,
    /// The rules run as the history is read, over the grants the walk closes: only where
    /// grants are closed before the end (`Walk::horizon_ns`).
    stream: Option<Streamed>,
    /// Drop the ops no later step reads ([`Walk::first_needed`]): only where no batch rule
    /// runs after the walk.
    evict: bool,
    /// A proven violation makes the whole check read the file whole ([`Digest::gives_up`]),
    /// for its incidents: not for a file past [`WHOLE_READ_BYTES_MAX`], whose incidents are
    /// grouped from a second streamed reading.
    violations_read_whole: bool,
    /// A second reading's: the facts of the ops the first one's violations name, for their
    /// incidents ([`check_streamed`]).
    capture: Option<Box<crate::incidents::Capture>>,
    /// A whole check's: the nemesis events read so far, one JSON line each, for the words of
    /// the findings once they are known (the faults that meet them), while they take at most
    /// [`FAULT_LINES_BYTES_MAX`]; `None` once they took more (or when not asked for): the
    /// faults are then read again from the file ([`faults_meeting`]).
    faults_kept: Option<Vec<u8>>,
    /// The most ops kept at once after dropping.
    kept_max: usize,
    /// The first structure error; events after it are counted but not paired.
    pub(crate) error: Option<StructureError>,
}

/// The most bytes of nemesis events a whole check keeps as it reads, for the findings' words,
/// before it lets them go and reads the file's faults again at the end (0.3 s of a 10M-event
/// check, on its critical path). The synthetic 10M-event history's 90,000 nemesis events take
/// 11 MB; a real run has one every few seconds. Kept as text, not as paired faults: those
/// took 31 MiB for the same events.
pub(crate) const FAULT_LINES_BYTES_MAX: usize = 16 << 20;

/// How many ops a reader that drops them lets wait to be walked behind one op (pending, or
/// waiting for an acquire unanswered) before it stops waiting for that op and takes it as
/// pending: about 12 s at the harness's top rate of 21k ops a second, 17 MiB of ops.
pub const UNWALKED_OPS_MAX: usize = 1 << 18;

/// The blocks of text a streaming reader parses at a time.
const STREAM_BLOCK_BYTES: usize = 1 << 20;

/// What a streaming reader keeps of the history, as the sentences of violations read it.
struct Live<'a> {
    ops: &'a Ops,
    locks: &'a [String],
    /// Positions of the session grants kept, sorted.
    sessions: &'a [usize],
    lease_from: &'a FxMap<OpPos, u64>,
    end_time_ns: u64,
    drift: Drift,
}

impl View for Live<'_> {
    fn op(&self, pos: usize) -> &ClientOp {
        &self.ops[pos]
    }
    fn lock_name(&self, id: u32) -> &str {
        self.locks.get(id as usize).map_or("?", |s| s.as_str())
    }
    fn is_session(&self, g: &Grant) -> bool {
        self.sessions.binary_search(&g.op).is_ok()
    }
    fn lease_set_before(&self, g: &Grant) -> Option<u64> {
        self.lease_from.get(&(g.op as OpPos)).copied()
    }
    fn end_time_ns(&self) -> u64 {
        self.end_time_ns
    }
    fn drift(&self) -> Drift {
        self.drift
    }
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
    pub(crate) fn new(capacity: usize, drift: Drift) -> Digest {
        Digest {
            events: 0,
            end_time_ns: 0,
            pairing: Pairing::new(),
            ops: Ops::with_capacity(capacity),
            locks: Vec::new(),
            lock_ids: FxMap::default(),
            keys: Vec::new(),
            key_ids: FxMap::default(),
            errors: Vec::new(),
            error_ids: FxMap::default(),
            nemesis: Vec::new(),
            lease_evidence: Vec::new(),
            key_evidence: Vec::new(),
            rounds: Vec::new(),
            waits: Vec::new(),
            transfers: Vec::new(),
            #[cfg(test)]
            holds: Vec::new(),
            #[cfg(test)]
            hold_walk: false,
            #[cfg(test)]
            grant_of_dropped: Vec::new(),
            walk: Walk::new(),
            open_acquires: Default::default(),
            id_numbers: FxMap::default(),
            id_of: FxMap::default(),
            renumber: FxMap::default(),
            grant_named: Vec::new(),
            drift,
            lease_from_at: FxMap::default(),
            unwalked_max: 0,
            unwalked_limit: UNWALKED_OPS_MAX,
            forced: Default::default(),
            forced_count: 0,
            late_answers: 0,
            stream: None,
            evict: false,
            violations_read_whole: true,
            capture: None,
            faults_kept: None,
            kept_max: 0,
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
                    if let Some(lines) = self.faults_kept.as_mut() {
                        // An op read from JSON writes back to JSON.
                        let _ = serde_json::to_writer(&mut *lines, &op);
                        lines.push(b'\n');
                        if lines.len() > FAULT_LINES_BYTES_MAX {
                            self.faults_kept = None;
                        }
                    }
                    if let Some(stream) = self.stream.as_mut() {
                        stream.stuck.faults.push(&op);
                        stream.counts.nemesis(op.f.as_str());
                        stream.coverage.nemesis(&op);
                    }
                    if self.keeps_all() {
                        self.nemesis.push(*op);
                    }
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
        self.advance(false);
    }

    /// Whether the op at `pos` may be walked now: it has completed, time has moved past its
    /// completion (the events of one instant come in any order), and no acquire invoked by
    /// then is still unanswered (it may be the grant the op names). An op the reader stopped
    /// waiting for is walked as it stands.
    fn ready(&self, pos: usize) -> bool {
        if self.forced.contains(&(pos as OpPos)) {
            return true;
        }
        let Some(done) = self.ops[pos].complete_ns() else {
            return false;
        };
        done < self.end_time_ns
            && self
                .open_acquires
                .first()
                .is_none_or(|((invoke, _), ())| invoke > done)
    }

    /// A dropping reader past [`Digest::unwalked_limit`] stops waiting for what holds the op
    /// at `pos`: the op itself if it is pending, else the earliest acquire still unanswered
    /// that was invoked by its completion. Whether anything was given up (not when only time
    /// has to move on).
    fn stop_waiting(&mut self, pos: usize) -> bool {
        let op = &self.ops[pos];
        let at = match op.complete_ns() {
            None => pos as OpPos,
            Some(done) => match self.open_acquires.first() {
                Some(((invoke, at), ())) if invoke <= done => at,
                _ => return false,
            },
        };
        let acquire = &self.ops[at as usize];
        if acquire.func == Func::Acquire {
            self.open_acquires.remove((acquire.invoke_ns, at));
        }
        self.forced.insert(at);
        self.forced_count += 1;
        true
    }

    /// Walks the ops the walk may take now (`end`: the history is read whole, every op may
    /// be taken), in position order, each once it is [`Digest::ready`]. An op left pending
    /// holds the walk: a reader that keeps every op waits until the end, one that drops them
    /// stops waiting past [`Digest::unwalked_limit`] ops read and not walked.
    fn advance(&mut self, end: bool) {
        #[cfg(test)]
        if self.hold_walk {
            return;
        }
        if self.error.is_some() {
            return;
        }
        // Bounded by the ops read (each pass walks one, or gives up one op waited for).
        while self.walk.next() < self.ops.len() {
            let pos = self.walk.next();
            if !end && !self.ready(pos) {
                let over = self.evict && self.ops.len() - pos > self.unwalked_limit;
                if over && self.stop_waiting(pos) {
                    continue;
                }
                break;
            }
            let id = crate::model::take(&mut self.id_of, pos as OpPos);
            // The tests' whole walk reads the dropping reader's names too.
            if let (Some(read), true) = (id, self.keeps_all() || cfg!(test)) {
                let n = self.renumber.len() as u32;
                let model = *self.renumber.entry(read).or_insert(n);
                self.grant_named.push((pos as OpPos, model));
            }
            let grants_before = self.walk.grants.len();
            self.walk.walk(&mut self.ops, id);
            if let Some(capture) = self.capture.as_mut() {
                capture.walked(pos, &self.ops[pos], self.walk.grant_of[pos]);
            }
            if let Some(stream) = self.stream.as_mut() {
                let session = self.walk.sessions.last() == Some(&pos);
                stream.search.walked(pos, id, session);
                stream.deadlock.walked(pos, &self.ops[pos]);
                if self.walk.grants.len() > grants_before {
                    stream.deadlock.opened(self.ops[pos].process);
                }
                let op = &self.ops[pos];
                let lock_op = matches!(op.func, Func::Renew | Func::Release);
                if lock_op && self.walk.grant_of[pos] == NO_GRANT {
                    stream.stale.orphan(pos as OpPos, id.is_some());
                }
                let transfer = crate::model::take(&mut stream.transfer_of, pos as OpPos);
                stream.store.walked(pos, op, transfer.is_some(), &self.keys);
                let grant = self.walk.grant_of[pos];
                stream.late.walked(pos, op, grant);
                let account = stream.store.of_the_bank(op);
                let acts_on = (grant, &self.walk.grants);
                stream.judged.walked(op, account, acts_on, &self.errors);
                stream.bank.walked(op, transfer);
                if let Some(t) = transfer {
                    stream.serial.add(op, t);
                    stream.serial_round(op.invoke_ns, &self.keys);
                }
                stream.counts.push(op);
                stream.liveness.push(op, &self.errors, self.end_time_ns);
                let made = (self.walk.grants.len() > grants_before).then_some(grants_before);
                if let Some(round) = crate::model::take(&mut stream.round_of, pos as OpPos) {
                    stream
                        .rounds
                        .asked(op.target, round, made.map(|g| g as u32));
                }
                let made = made.map(|g| (g as u32, &self.walk.grants[g]));
                stream.coverage.walked(op, made, &self.lock_ids);
                let read = crate::stuck_stream::Read {
                    locks: &self.locks,
                    errors: &self.errors,
                    policy: &self.walk.ttl_policy,
                    drift: self.drift,
                    end_ns: self.end_time_ns,
                };
                stream.stuck.walked(pos, op, &read);
            }
        }
        if !end {
            self.unwalked_max = self.unwalked_max.max(self.ops.len() - self.walk.next());
            let lease_from = &self.lease_from_at;
            let closed = self.walk.close(&mut self.ops, self.drift, |pos| {
                lease_from.get(&(pos as OpPos)).copied()
            });
            let pinned = self.run_stream(&closed, false);
            // Only a streaming reader searches as it reads (the batch keeps every grant open,
            // so asking what the walk still reads would cost a pass over all of them).
            let keep = self
                .stream
                .as_ref()
                .map(|_| self.walk.first_needed(&pinned));
            if let Some(keep) = keep {
                self.feed_search(keep);
            }
            if let (Some(keep), true) = (keep, self.evict) {
                if let Some(capture) = self.capture.as_mut() {
                    let walk = &self.walk;
                    capture.dropping(
                        keep,
                        (&self.ops, &walk.grant_of),
                        (&walk.grants, &walk.sessions),
                    );
                }
                self.ops.drop_before(keep);
                #[cfg(test)]
                self.grant_of_dropped
                    .extend((self.walk.grant_of.base()..keep).map(|p| self.walk.grant_of[p]));
                self.walk.grant_of.drop_before(keep);
                if self.walk.drop_closed(&pinned) {
                    // Read only for a grant's acquire, when it closes: none before `keep`.
                    self.lease_from_at.retain(|&pos, _| pos as usize >= keep);
                }
                self.kept_max = self.kept_max.max(self.ops.len() - self.ops.base());
            }
        }
    }

    /// Ends the walk once the history is read: every op walked, every lost answer given the
    /// whole run's ttl policy, the crashes of session holders marked, every grant still open
    /// followed (and handed to the streaming rules).
    fn finish_walk(&mut self) {
        self.advance(true);
        self.walk.settle_all(&mut self.ops);
        self.walk.mark_crashes(&mut self.ops);
        let lease_from = &self.lease_from_at;
        self.walk.follow_rest(&self.ops, self.drift, |pos| {
            lease_from.get(&(pos as OpPos)).copied()
        });
        if let Some(stream) = self.stream.as_mut() {
            // An acquire never answered is an answer lost.
            for ((invoke_ns, pos), ()) in self.open_acquires.iter() {
                let op = &self.ops[pos as usize];
                let at = (pos, op.process, op.target);
                stream
                    .stale
                    .acquire_answered(at, invoke_ns, Outcome::Pending);
            }
        }
        let open = self.walk.open().to_vec();
        self.run_stream(&open, true);
        self.feed_search(self.ops.len());
        if let Some(stream) = self.stream.as_mut() {
            stream.search.settle();
        }
    }

    /// Hands the ops before `upto` (none of which a later step of the walk reads) to the
    /// streaming model search, which then searches every instant before the first op not
    /// handed over: its invoke, or the last instant read (whose events may not all be read).
    /// At the end, `upto` is every op and every instant is searched.
    fn feed_search(&mut self, upto: usize) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        let before_ns = self
            .ops
            .get(upto)
            .map_or(self.end_time_ns, |op| op.invoke_ns);
        let read = crate::search_stream::Read {
            ops: &self.ops,
            locks: &self.locks,
            lease_from: &self.lease_from_at,
            drift: self.drift,
        };
        stream.search.feed(upto, before_ns, &read);
    }

    /// Hands the grants just `closed` to the streaming rules, if any run, and runs them as far
    /// as the walk allows (`end`: the history is read, every grant is closed). Returns the
    /// grants they pin.
    fn run_stream(&mut self, closed: &[u32], end: bool) -> Vec<u32> {
        let Some(mut stream) = self.stream.take() else {
            return Vec::new();
        };
        let grants = &self.walk.grants;
        let live = Live {
            ops: &self.ops,
            locks: &self.locks,
            sessions: &self.walk.sessions,
            lease_from: &self.lease_from_at,
            end_time_ns: self.end_time_ns,
            drift: self.drift,
        };
        let read = crate::coverage::GrantRead {
            view: &live,
            policy: &self.walk.ttl_policy,
        };
        for &g in closed {
            let grant = &grants[g as usize];
            stream.closed(g, grant, (&self.ops, &self.walk.grant_of), self.drift);
            let session = self.walk.sessions.binary_search(&grant.op).is_ok();
            if let Some(capture) = self.capture.as_mut() {
                capture.closed(g, grant, session, (&self.ops, &self.walk.grant_of));
            }
            if session {
                stream.search.closed_session(grant, &self.ops);
            }
            stream.deadlock.closed(g, grant, &self.ops);
            stream.coverage.closed(g, grant, &read);
        }
        if end {
            stream.sweep(u64::MAX, grants, &live);
            stream.walk_tokens(&[], grants, &live);
            stream.judge(
                &Reach::END,
                (&self.walk.grant_of, grants),
                &live,
                &self.keys,
            );
            stream
                .late
                .judge((u64::MAX, u32::MAX), &self.target_names());
            stream.finish_stuck(&self.stuck_read());
            stream.finish_bank(&self.keys);
            stream.finish_serial(&self.keys);
            stream.deadlock.finish(self.end_time_ns, &self.names());
            stream.finish(self.end_time_ns);
        } else {
            // An op not read yet is invoked no earlier than the last event read: with nothing
            // open or unwalked, that is the watermark.
            let watermark_ns = self.walk.watermark_ns(&self.ops).min(self.end_time_ns);
            stream.sweep(watermark_ns, grants, &live);
            // The renews and releases naming no grant before what the walk still reads can
            // no longer be given one, and every grant they read is closed. The first op the
            // walk still reads bounds the ops of the grants still open; every op completed
            // before the next op to walk was invoked has been walked.
            let before = self.walk.first_needed(&[]);
            let next = self.ops.get(self.walk.next());
            let reach = Reach {
                watermark_ns,
                first_op_ns: self.ops.get(before).map_or(u64::MAX, |o| o.invoke_ns),
                walked_ns: next.map_or(self.end_time_ns, |o| o.invoke_ns),
                orphans_before: before,
            };
            stream.judge(&reach, (&self.walk.grant_of, grants), &live, &self.keys);
            // Every grant invoked before both is closed.
            (stream.coverage).settle(reach.first_op_ns.min(reach.walked_ns));
            stream.stuck.judge(reach.walked_ns, &self.stuck_read());
            let kept_from = self.walk.grants.base() as u32;
            (stream.late).judge((reach.walked_ns, kept_from), &self.target_names());
            let names = self.names();
            stream
                .deadlock
                .judge(reach.watermark_ns, reach.walked_ns, &names);
            let open: Vec<(u32, TokenKey)> = (self.walk.open().iter())
                .filter_map(|&g| {
                    let grant = &grants[g as usize];
                    grant.token.map(|t| (grant.lock, (t, grant.complete_ns, g)))
                })
                .collect();
            stream.walk_tokens(&open, grants, &live);
        }
        let pinned = stream.pinned();
        self.stream = Some(stream);
        pinned
    }

    /// The stats of the ops walked so far, over the events read (the streaming rules' count:
    /// every op once walked, as it then stood).
    pub(crate) fn stats(&self) -> Option<history::Stats> {
        let stream = self.stream.as_ref()?;
        let whole = crate::stats::Whole {
            events: self.events,
            duration_ns: self.end_time_ns,
            errors: &self.errors,
        };
        Some(stream.counts.stats(whole))
    }

    /// The liveness and fairness figures of the ops walked so far (`Stats.extra`'s
    /// `fairness`, `unavailability` and `never_completed`).
    pub(crate) fn liveness_figures(
        &self,
        active: &dyn Fn(u64, u64) -> Vec<history::ActiveFault>,
    ) -> Option<std::collections::BTreeMap<String, serde_json::Value>> {
        let stream = self.stream.as_ref()?;
        Some(stream.liveness.figures(active, &self.locks))
    }

    /// The windows whose faults the whole check's results name, as read so far: the
    /// violations proven, the warnings listed, the longest stretches of unavailability.
    fn finding_windows(&self) -> Vec<[u64; 2]> {
        let Some(s) = self.stream.as_ref() else {
            return Vec::new();
        };
        let violations = (s.proven.violations.iter())
            .chain(s.search.found.iter().map(|(_, v)| v))
            .chain(&s.deadlock.found);
        let mut windows: Vec<[u64; 2]> = violations.map(|v| v.window_ns).collect();
        windows.extend(s.late.warnings.listed().0.iter().map(|v| v.window_ns));
        windows.extend(s.liveness.listed_windows());
        windows
    }

    /// The coverage of the history read, once it is read whole (taken: asked once).
    pub(crate) fn take_coverage(&mut self) -> Option<history::coverage::Coverage> {
        let stream = self.stream.as_mut()?;
        let counts = std::mem::take(&mut stream.coverage);
        Some(counts.finish(self.end_time_ns, &self.lock_ids))
    }

    /// The contention rounds' figures of the ops walked so far (`Stats.extra`'s `rounds`).
    pub(crate) fn round_figures(
        &self,
    ) -> Option<std::collections::BTreeMap<String, serde_json::Value>> {
        Some(self.stream.as_ref()?.rounds.figures())
    }

    /// The whole check's results, from a streaming reader that has read the history to its end
    /// ([`Digest::finish_walk`]): every checker's output from what the streaming rules proved
    /// and counted, merged as the batch merges its own (`crate::merge`), each finding's faults
    /// from `active`, the incidents from `incidents`. `None` before the walk has ended.
    pub(crate) fn streamed_results(
        &mut self,
        cfg: &CheckConfig,
        active: &dyn Fn(u64, u64) -> Vec<history::ActiveFault>,
        incidents: impl FnOnce(&[history::Violation]) -> Vec<history::Incident>,
    ) -> Option<history::Results> {
        use crate::judged::Twice;
        let stats = self.stats()?;
        let mut extra = self.liveness_figures(active)?;
        extra.extend(self.round_figures()?);
        let coverage = self.take_coverage()?;
        let names = self.names();
        let stream = self.stream.as_ref()?;
        let j = &stream.judged;
        let whole = crate::Whole {
            empty: self.events == 0,
            ok_acquires: self.walk.ok_acquires,
            ambiguity_capped: self.walk.ambiguity_capped,
            unplaced: self.walk.unplaced,
        };
        let mut outs = Vec::new();
        for c in crate::all_checkers() {
            let mut out = crate::CheckOutput::new();
            let name = c.name();
            out.violations = (stream.proven.violations.iter())
                .filter(|v| c.kinds().contains(&v.kind))
                .cloned()
                .collect();
            match name {
                "mutual-exclusion" => {
                    let locks = stream.forced.unsettled_locks();
                    if locks > 0 {
                        out.notes.push(crate::mutex::unsettled_note(locks));
                    }
                    (out.warnings, out.warnings_unlisted) = stream.late.warnings.listed();
                    out.notes.extend(stream.late.notes());
                    out.nothing_to_judge(j.granted_twice(Twice::ProvingHold), || {
                        crate::mutex::no_pair(j.grants, j.granted_twice(Twice::Any))
                    });
                }
                "lease-expiry" => {
                    out.nothing_to_judge(j.lease_judged || j.decided, || {
                        crate::lease::NO_LEASE.to_string()
                    });
                    out.notes.extend(crate::lease::record_note(j.key_states));
                }
                "fencing-tokens" => {
                    if j.untokened > 0 {
                        out.notes.push(crate::tokens::untokened_note(j.untokened));
                    }
                    out.nothing_to_judge(j.granted_twice(Twice::Tokened), || {
                        crate::tokens::NO_TOKEN_ORDER.to_string()
                    });
                }
                "stale-lock-ops" => {
                    out.nothing_to_judge(j.stale_read, || crate::tokens::NO_STALE.to_string())
                }
                "store-fencing" => {
                    if j.writes_unordered > 0 {
                        out.notes
                            .push(crate::store::unordered_note(j.writes_unordered));
                    }
                    out.nothing_to_judge(j.writes_fenced, || {
                        crate::store::NO_FENCED_WRITE.to_string()
                    });
                }
                "counter" => out.nothing_to_judge(j.counter, || crate::store::NO_COUNTER.into()),
                "bank-total" => {
                    out.notes.extend(stream.bank_notes.iter().cloned());
                    out.not_judged.clone_from(&stream.bank_not_judged);
                }
                "serializability" => out.notes.extend(stream.serial_notes.iter().cloned()),
                "liveness" if stream.stuck.unjudged > 0 => {
                    out.notes
                        .push(crate::liveness::unjudged_note(stream.stuck.unjudged));
                }
                "deadlock" => out = stream.deadlock.output(&names),
                _ => {}
            }
            crate::verdict_of(&whole, cfg, &mut out);
            match name {
                "bank-total" => out.nothing_to_judge(stream.bank.transfers(), || {
                    stream.bank.no_transfer().to_string()
                }),
                "serializability" => stream
                    .serial
                    .nothing_to_judge(stream.serial_judged, &mut out),
                "liveness" => out.nothing_to_judge(j.held, || crate::liveness::NO_HELD.into()),
                "deadlock" => {
                    out.nothing_to_judge(stream.deadlock.waited, || {
                        crate::deadlock::NO_WAIT.to_string()
                    });
                    if stream.deadlock.unjudged() > 0 && out.valid == history::Validity::Valid {
                        // A cycle not judged may be the deadlock.
                        out.valid = history::Validity::Unknown;
                    }
                }
                _ => {}
            }
            outs.push((name, out));
        }
        // The search decides only the locks the rules proved nothing about.
        let proven: std::collections::HashSet<String> = (outs.iter())
            .flat_map(|(_, o)| o.violations.iter())
            .filter(|v| v.kind != history::ViolationKind::Deadlock)
            .filter_map(|v| v.lock.clone())
            .collect();
        let locks = self.locks.len();
        let stream = self.stream.as_mut()?;
        let searched = stream.search.finish(locks);
        outs.push((
            "model-search",
            crate::search::judged(&self.locks, searched, &proven),
        ));
        for (_, out) in &mut outs {
            crate::model::finish_output(out, active);
        }
        let mut stats = stats;
        stats.extra.extend(extra);
        Some(crate::merge(
            (outs, stats, coverage),
            &whole,
            cfg,
            None,
            incidents,
        ))
    }

    /// Whether a streamed whole check already knows it must read the file whole: a violation
    /// proven (its incidents are grouped from the whole model), an op it stopped waiting for, a
    /// grant reached after it was dropped. Each is known in
    /// constant time.
    fn gives_up(&self) -> bool {
        let Some(s) = self.stream.as_ref() else {
            return false;
        };
        let proven = !s.proven.violations.is_empty()
            || !s.search.found.is_empty()
            || !s.deadlock.found.is_empty();
        (proven && self.violations_read_whole)
            || s.serial.window().is_some_and(|w| w.inexact.is_some())
            || self.forced_count > 0
            || self.walk.late > 0
            || self.walk.stale_dropped > 0
    }

    /// Whether the streaming rules read the history as the batch does: nothing made it give
    /// up ([`Digest::gives_up`]), no grant was reached after it closed, and no reading met a
    /// limit past which it could miss a violation (those past which it only words one
    /// differently, or counts less exercised, are said in [`Digest::limit_notes`]).
    fn streamed_exactly(&self) -> bool {
        let Some(s) = self.stream.as_ref() else {
            return false;
        };
        // A forgotten name, or a grant reached after it was dropped, is counted late
        // (`gives_up`); one reached while kept is marked stale.
        let stale = self.walk.state.iter().any(|&c| c == Close::Stale);
        let limits = [
            s.forced.cut_short,
            s.fencing.cut_short,
            s.swept_early,
            s.left_out,
            s.store.out_of_order,
            s.stuck.cut_short,
            s.deadlock.resolved_early,
            s.out_of_order(),
            s.late.unsure,
        ];
        !self.gives_up() && !stale && limits.iter().all(|&n| n == 0)
    }

    /// What the streamed reading says of the limits it met that a whole check in memory
    /// would not: a finding it may word differently, or not make.
    fn limit_notes(&self) -> Vec<String> {
        let Some(s) = self.stream.as_ref() else {
            return Vec::new();
        };
        let mut notes = Vec::new();
        if s.fencing.forgotten > 0 {
            notes.push(format!(
                "the first grants of {} token(s) were forgotten past the latest {} remembered \
                 (a long history, read with bounded memory): a later grant with one of those \
                 tokens shows as token-regressed if it is below a token granted before it, \
                 and is not named token-reused",
                s.fencing.forgotten, s.fencing.remembered_max
            ));
        }
        if s.store.forgotten > 0 {
            notes.push(format!(
                "the first writes of {} counter value(s) were forgotten past the latest {} \
                 remembered (a long history, read with bounded memory): a value written again \
                 that long after is not lost-update by the same-value reading; the final \
                 reads still count every acknowledged write",
                s.store.forgotten, s.store.remembered_max
            ));
        }
        if s.coverage.nemesis_skipped > 0 {
            notes.push(s.coverage.skipped_note());
        }
        notes
    }

    /// The names the unsafe-overlap warnings read.
    fn target_names(&self) -> crate::mutex::TargetNames<'_> {
        crate::mutex::TargetNames {
            locks: &self.locks,
            keys: &self.keys,
            errors: &self.errors,
        }
    }

    /// The names the deadlock sentences read.
    fn names(&self) -> crate::deadlock_stream::NamesOf<'_> {
        crate::deadlock_stream::NamesOf {
            locks: &self.locks,
            errors: &self.errors,
        }
    }

    /// What the `lock-stuck` reading reads of the digest.
    fn stuck_read(&self) -> crate::stuck_stream::Read<'_> {
        crate::stuck_stream::Read {
            locks: &self.locks,
            errors: &self.errors,
            policy: &self.walk.ttl_policy,
            drift: self.drift,
            end_ns: self.end_time_ns,
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
        if e.func == Func::Acquire {
            (self.open_acquires).push((e.time_ns, self.ops.len() as OpPos), ());
        }
        if let Some(g) = e.key.as_ref() {
            let slot = self.ops.len();
            if let Some(id) = g.grant.clone() {
                let n = id_number(&mut self.id_numbers, id);
                self.id_of.insert(slot as OpPos, n);
            }
            // Read from the invoke too: an acquire that never completed still waited.
            if let (Some(w), Func::Acquire) = (g.wait_ms, e.func) {
                if self.keeps_all() {
                    self.waits.push((slot, w));
                }
                if let Some(stream) = self.stream.as_mut() {
                    stream.deadlock.asked(slot, w);
                }
            }
            if let Some(t) = g.transfer {
                if self.keeps_all() {
                    self.transfers.push((slot, t));
                }
                if let Some(stream) = self.stream.as_mut() {
                    stream.transfer_of.entry(slot as OpPos).or_insert(t);
                }
            }
        }
        self.ops.push(op);
    }

    /// Ends the client op at `slot` with its completion `e`.
    fn complete(&mut self, slot: usize, outcome: Outcome, e: Event, error: u32) {
        if !self.forced.is_empty() && self.forced.remove(&(slot as OpPos)) {
            // The reader stopped waiting for it: it stays pending, and the ops walked since
            // did not see this answer.
            self.late_answers += 1;
            self.walk.late += 1;
            #[cfg(test)]
            {
                self.walk.uncertain += 1;
            }
            return;
        }
        let keeps_all = self.keeps_all();
        let o = &mut self.ops[slot];
        if o.func == Func::Acquire {
            self.open_acquires.remove((o.invoke_ns, slot as OpPos));
        }
        o.complete(outcome, e.time_ns);
        if let Some(stream) = self.stream.as_mut() {
            if o.func == Func::Acquire {
                let at = (slot as OpPos, o.process, o.target);
                stream.stale.acquire_answered(at, o.invoke_ns, outcome);
            }
            if outcome == Outcome::Info {
                stream.stale.crashed(slot as OpPos, o.process);
            }
        }
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
        if let (Some((a, b)), true) = (e.lease, keeps_all) {
            self.lease_evidence.push((slot, a, b));
        }
        let mut hold_of = None;
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
                if keeps_all {
                    self.waits.push((slot, w));
                }
                if let Some(stream) = self.stream.as_mut() {
                    stream.deadlock.asked(slot, w);
                }
            }
            if let Some(t) = transfer {
                if keeps_all {
                    self.transfers.push((slot, t));
                }
                if let Some(stream) = self.stream.as_mut() {
                    stream.transfer_of.entry(slot as OpPos).or_insert(t);
                }
            }
            if let (Some(h), Func::Acquire, Outcome::Ok) = (hold, o.func, o.outcome) {
                // A session's lock is held, as far as its holder knows, until something tells
                // it otherwise: a lease that no time ends (model item 9). A transaction's lock
                // proves no hold at all: no ttl.
                o.set_ttl_ms(match h {
                    Hold::Session => Some(SESSION_TTL_MS),
                    Hold::Transaction => None,
                });
                hold_of = Some(h);
                #[cfg(test)]
                self.holds.push((slot, h));
            }
            if let Some(id) = grant {
                // The invoke's, if it gave one, is the op's.
                if !self.id_of.contains_key(&(slot as OpPos)) {
                    let n = id_number(&mut self.id_numbers, id);
                    self.id_of.insert(slot as OpPos, n);
                }
            }
            if let (Some(r), true) = (round, keeps_all) {
                self.rounds.push((slot, r));
            }
            if let (Some(r), Some(stream)) = (round, self.stream.as_mut()) {
                stream.rounds.tagged = true;
                if o.func == Func::Acquire {
                    stream.round_of.insert(slot as OpPos, r);
                }
            }
            if let Some(k) = key {
                // A dropping reader reads only the op's own, just below.
                if !keeps_all {
                    self.key_evidence.clear();
                }
                self.key_evidence.push((slot, k));
            }
            if let Some(from) = lease_from_ns {
                self.lease_from_at.insert(slot as OpPos, from);
            }
        }
        if let Some(stream) = self.stream.as_mut() {
            let key = (self.key_evidence.last()).and_then(|(at, k)| (*at == slot).then_some(k));
            stream.answered(&self.ops[slot], (e.lease, key), &self.locks, self.drift);
        }
        let id = (!self.id_of.is_empty())
            .then(|| self.id_of.get(&(slot as OpPos)).copied())
            .flatten();
        self.walk.completed(slot, &self.ops[slot], id, hold_of);
    }

    /// Whether the lists only the batch model reads (the evidence, waits, transfers, rounds
    /// and grant names of every op) are kept: not by a reader that drops ops, which runs no
    /// batch rule after its walk, so that what it keeps does not grow with the history.
    fn keeps_all(&self) -> bool {
        !self.evict
    }

    /// A digest that runs the streaming rules as it reads and drops what they no longer need,
    /// closing grants `horizon_ns` past their reach.
    pub(crate) fn streaming(drift: Drift, horizon_ns: u64) -> Digest {
        // No room reserved for every op: the ops kept are few, and a ring that wraps in a
        // small buffer touches few pages.
        let mut digest = Digest::new(0, drift);
        digest.walk.horizon_ns = horizon_ns;
        let mut stream = Streamed::default();
        stream.coverage.drift = drift;
        // A section whose process never moves on (it crashed mid-transfer) is done once no op
        // of it came for as long as a grant is kept past its reach.
        stream.serial = crate::serial::Sections::windowed(
            crate::serial::ROUND_SECTIONS_MIN,
            horizon_ns.max(CHECK_HORIZON_NS),
        );
        digest.stream = Some(stream);
        digest.evict = true;
        digest
    }

    /// [`Digest::streaming`] for the checks of `cfg`: its patience with stuck locks and
    /// deadlocks too.
    pub(crate) fn streaming_for(cfg: &CheckConfig, horizon_ns: u64) -> Digest {
        let mut digest = Digest::streaming(Drift::from_fraction(cfg.drift), horizon_ns);
        let stream = digest.stream.as_mut().expect("set above");
        stream.stuck.grace_ns = cfg.liveness_grace_ns;
        stream.deadlock.grace_ns = cfg.liveness_grace_ns;
        digest
    }

    /// What the streaming rules proved so far (none when they do not run).
    pub(crate) fn proven(&self) -> &[history::Violation] {
        self.stream
            .as_ref()
            .map_or(&[], |s| s.proven.violations.as_slice())
    }

    /// What the streamed model search proved so far, each with its lock (none when the
    /// streaming rules do not run).
    pub(crate) fn searched(&self) -> &[(u32, history::Violation)] {
        self.stream
            .as_ref()
            .map_or(&[], |s| s.search.found.as_slice())
    }

    /// The deadlocks the streamed wait-for sweep proved so far (none when the streaming
    /// rules do not run).
    pub(crate) fn deadlocks(&self) -> &[history::Violation] {
        self.stream
            .as_ref()
            .map_or(&[], |s| s.deadlock.found.as_slice())
    }

    /// Digests an in-memory history.
    pub(crate) fn of_history(h: &History, drift: Drift) -> Digest {
        Digest::of_history_in(h, 64 * 1024, Digest::new(h.operations().len(), drift))
    }

    /// Feeds history `h` to `d` in pieces of `events`.
    fn of_history_in(h: &History, events: usize, mut d: Digest) -> Digest {
        // In slices, so the piece's names stay few and its events bounded.
        for chunk in h.ops.chunks(events) {
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
    check_path_within(path, cfg, WHOLE_READ_BYTES_MAX)
}

/// The largest history file whose violations are grouped into incidents from the whole model,
/// read into memory: about 0.65 bytes of memory per byte of history (8.3 GiB for 100M
/// events, 13 GB). Past it the streaming rules prove the violations as the batch does, and a
/// second streamed reading takes what grouping reads of the ops they name
/// (`incidents_read_again`): the check's memory is then the live window's whatever the
/// verdict, for about twice the time. 2 GiB is about 16M events, 1.4 GiB read whole.
pub const WHOLE_READ_BYTES_MAX: u64 = 2 << 30;

/// [`check_path`], grouping the violations of a history file of at most
/// `whole_read_bytes_max` bytes into incidents from the whole model, and those of a longer one
/// from a second streamed reading ([`WHOLE_READ_BYTES_MAX`]; the tests pass 0).
pub fn check_path_within(
    path: &Path,
    cfg: &CheckConfig,
    whole_read_bytes_max: u64,
) -> Result<(history::Results, Vec<ReadWarning>), CheckError> {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    // The monotonic clock's expected violations are set apart from the whole model.
    let past = bytes > whole_read_bytes_max && cfg.monotonic_clock_reach_ns.is_none();
    if let Some(checked) = check_streamed(path, cfg, past.then_some(bytes))? {
        return Ok(checked);
    }
    let file = open(path)?;
    // Reserve for every op up front (an event line is rarely under 60 bytes, an op is two
    // events): unused capacity is address space, never touched, and no regrowth copies.
    let capacity = file.metadata().map(|m| m.len() as usize / 120).unwrap_or(0);
    let (mut results, warnings) = check_input(file, path, capacity, cfg, true)?;
    read_evidence(path, &mut results);
    Ok((results, warnings))
}

/// [`check_path`] by the streaming reader alone, past the whole-read limit whatever the file's
/// size: `None` where it gives up and the check would read the file whole. For the tests,
/// which hold it to the whole check.
#[doc(hidden)]
pub fn check_path_streamed(
    path: &Path,
    cfg: &CheckConfig,
) -> Result<Option<(history::Results, Vec<ReadWarning>)>, CheckError> {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    if cfg.monotonic_clock_reach_ns.is_some() {
        return Ok(None);
    }
    check_streamed(path, cfg, Some(bytes))
}

/// How far past a grant's reach a whole check's streaming reader closes it: a renew or release
/// that reaches a grant after it closed makes the streamed reading not the batch's (the check
/// then reads the file again whole), and a stalled client wakes within seconds. On the
/// synthetic 10M-event history, a horizon of 1 s left six grants stale, one of 10 s none.
pub(crate) const CHECK_HORIZON_NS: u64 = 10_000_000_000;

/// The whole check of a history file by the streaming reader, which keeps only the live
/// window: the batch's results, field for field (`digest::walk_order_tests`), each finding's
/// faults and evidence read again from the file. `None` where the streamed reading is not the
/// batch's yet, and the check reads the file whole: a history with violations of at most
/// [`WHOLE_READ_BYTES_MAX`] (their incidents are
/// grouped from the whole model), a grant reached after it closed or an op the reader stopped
/// waiting for, a reading that met a limit past which it could miss a violation.
///
/// `past_whole_read`: the file's size, when it is too long to read whole for its violations'
/// incidents: they are then grouped from a second streamed reading
/// ([`incidents_read_again`]), else listed ungrouped with a note.
fn check_streamed(
    path: &Path,
    cfg: &CheckConfig,
    past_whole_read: Option<u64>,
) -> Result<Option<(history::Results, Vec<ReadWarning>)>, CheckError> {
    let file = open(path)?;
    let mut digest = Digest::streaming_for(cfg, CHECK_HORIZON_NS);
    digest.violations_read_whole = past_whole_read.is_none();
    digest.faults_kept = Some(Vec::new());
    // The reader's thread is the check's critical path: the model search goes beside it.
    if let Some(stream) = digest.stream.as_mut() {
        stream.search.on_a_thread();
    }
    // Once the file must be read whole, reading on is wasted: the reader then ends early.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let input = Stoppable {
        inner: file,
        stop: &stop,
    };
    let (mut d, warnings) = digest_input(input, path, digest, Some(&stop))?;
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(None);
    }
    d.finish_walk();
    if !d.streamed_exactly() {
        return Ok(None);
    }
    let notes = d.limit_notes();
    // The faults the results name: those that meet a finding or a listed stretch of
    // unavailability (the streaming rules let every other go), paired from the nemesis events
    // kept as the file was read, or read again from it past their limit.
    let windows = d.finding_windows();
    let faults = match d.faults_kept.take() {
        _ if windows.is_empty() => Faults::default(),
        Some(lines) => {
            let meets = meeting(&windows);
            let mut folding = FaultsFolding::default();
            folding.fold(&lines, &meets);
            folding.finish(&meets, d.end_time_ns)
        }
        None => faults_meeting(path, &windows, d.end_time_ns),
    };
    let active = |s: u64, e: u64| faults.active(s, e);
    let Some(mut results) = d.streamed_results(cfg, &active, |_| Vec::new()) else {
        return Ok(None);
    };
    if !results.violations.is_empty() {
        let Some(bytes) = past_whole_read else {
            return Ok(None);
        };
        let marks = d.stream.as_ref().map_or(&[][..], |s| &s.fencing.era_marks);
        match incidents_read_again(path, cfg, &results.violations, marks)? {
            Some(incidents) => results.incidents = incidents,
            None => results.notes.push(ungrouped_note(bytes)),
        }
    }
    results.notes.extend(notes);
    read_evidence(path, &mut results);
    Ok(Some((results, warnings)))
}

/// The incidents of the violations `vs` a streamed reading of the file at `path` proved, with
/// the `marks` of its token resets: a second streamed reading takes the facts of the ops they
/// name while it holds them (`incidents::Capture`), so its memory is the live window's too.
/// `None` if some fact was not found (the violations are then listed ungrouped).
fn incidents_read_again(
    path: &Path,
    cfg: &CheckConfig,
    vs: &[history::Violation],
    marks: &[crate::incidents::EraMark],
) -> Result<Option<Vec<history::Incident>>, CheckError> {
    use crate::incidents::{Capture, EraMark};
    let named = (vs.iter().flat_map(|v| v.ops.iter().copied())).chain(EraMark::ops(marks));
    let mut digest = Digest::streaming_for(cfg, CHECK_HORIZON_NS);
    digest.violations_read_whole = false;
    digest.capture = Some(Box::new(Capture::new(named)));
    if let Some(stream) = digest.stream.as_mut() {
        stream.search.on_a_thread();
    }
    let (d, _) = digest_input(open(path)?, path, digest, None)?;
    Ok(match d.captured_facts(marks) {
        (true, Some(facts)) => Some(crate::incidents::group(&facts, vs)),
        _ => None,
    })
}

impl Digest {
    /// Ends a reading that captures the facts of named ops (`Digest::capture`): the walk
    /// finished, the ops still kept taken, the token resets' `marks` placed. Whether the
    /// reading was exact (the same file read the same way is; one changed since need not be),
    /// and the facts unless one was not found.
    fn captured_facts(
        mut self,
        marks: &[crate::incidents::EraMark],
    ) -> (bool, Option<crate::incidents::Facts>) {
        self.finish_walk();
        let exact = self.streamed_exactly();
        let Some(mut capture) = self.capture.take() else {
            return (exact, None);
        };
        let walk = &self.walk;
        capture.dropping(
            usize::MAX,
            (&self.ops, &walk.grant_of),
            (&walk.grants, &walk.sessions),
        );
        (exact, capture.into_facts(marks))
    }
}

/// The run's note for violations listed without their incidents, in a history of `bytes`
/// whose second reading did not find what grouping reads (a file changed since the first).
fn ungrouped_note(bytes: u64) -> String {
    format!(
        "the violations are listed each on its own, not grouped into incidents: this history \
         ({:.1} GB, past the {:.1} GB read whole into memory) is grouped from a second \
         reading, which did not find the ops the first one named (was the file written to \
         between the two?)",
        bytes as f64 / 1e9,
        WHOLE_READ_BYTES_MAX as f64 / 1e9,
    )
}

/// A reader that reads as at its end once `stop` is set.
struct Stoppable<'a, R> {
    inner: R,
    stop: &'a std::sync::atomic::AtomicBool,
}

impl<R: std::io::Read> std::io::Read for Stoppable<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(0);
        }
        self.inner.read(buf)
    }
}

/// The faults of the history at `path` that meet any of `windows`, read again from the file:
/// its nemesis events paired as the batch pairs them, each fault let go once it stopped unless
/// it meets a window, so what is kept is the faults open at once and those asked about. The
/// history ends at `end_ns`. A line that cannot be read is left out: the faults are a courtesy
/// to the reader, the verdict does not rest on them.
fn faults_meeting(path: &Path, windows: &[[u64; 2]], end_ns: u64) -> Faults {
    faults_meeting_in(path, windows, end_ns, FOUND_RUN_BYTES)
}

/// Whether a fault meets any of `windows`.
fn meeting(windows: &[[u64; 2]]) -> impl Fn(&crate::faults::Fault) -> bool {
    let mut sorted: Vec<[u64; 2]> = windows.to_vec();
    sorted.sort_unstable();
    // The latest end among the windows starting by each one.
    let reach: Vec<u64> = (sorted.iter())
        .scan(0, |top, w| {
            *top = (*top).max(w[1]);
            Some(*top)
        })
        .collect();
    move |f: &crate::faults::Fault| {
        let n = sorted.partition_point(|w| w[0] <= f.end_ns);
        n > 0 && reach[n - 1] >= f.start_ns
    }
}

/// [`faults_meeting`], the lines found handed to their parse in runs of `run_bytes` (the tests
/// pass less).
fn faults_meeting_in(path: &Path, windows: &[[u64; 2]], end_ns: u64, run_bytes: usize) -> Faults {
    let meets = meeting(windows);
    let mut folding = FaultsFolding::default();
    let Ok(file) = std::fs::File::open(path) else {
        return Faults::default();
    };
    // The search of the text beside the parse of the lines found (each about half of the
    // time): the lines go across in runs of [`FOUND_RUN_BYTES`], at most two runs waiting.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut run = Vec::with_capacity(run_bytes);
            lines_containing(file, b"\"nemesis\"", STREAM_BLOCK_BYTES, |line| {
                run.extend_from_slice(line);
                run.push(b'\n');
                if run.len() >= run_bytes {
                    // The receiver only stops when this thread is done: a send cannot fail.
                    let _ = tx.send(std::mem::replace(&mut run, Vec::with_capacity(run_bytes)));
                }
                true
            });
            let _ = tx.send(run);
        });
        // Bounded by the runs sent, which end when the searching thread returns.
        for run in rx {
            folding.fold(&run, &meets);
        }
    });
    folding.finish(&meets, end_ns)
}

/// The faults of nemesis event lines read in file order, those stopped that meet no window
/// let go as it reads (every 4,096 events), so that what it keeps is what the windows need.
#[derive(Default)]
struct FaultsFolding {
    log: crate::faults::FaultLog,
    read: u64,
}

impl FaultsFolding {
    /// Folds in `lines`, the next lines (a line that is no nemesis event is passed over: the
    /// text search finds the word anywhere), keeping the faults that `meets`.
    fn fold(&mut self, lines: &[u8], meets: &impl Fn(&crate::faults::Fault) -> bool) {
        for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(op) = serde_json::from_slice::<Op>(line) else {
                continue;
            };
            if op.process.is_nemesis() {
                self.log.push(&op);
                self.read += 1;
                if self.read % 4096 == 0 {
                    self.log.forget_stopped(meets);
                }
            }
        }
    }

    /// The faults kept, the history ending at `end_ns`.
    fn finish(mut self, meets: &impl Fn(&crate::faults::Fault) -> bool, end_ns: u64) -> Faults {
        self.log.forget_stopped(meets);
        Faults::from_log(self.log, end_ns)
    }
}

/// How many bytes of the lines [`faults_meeting`]'s search finds go to their parse at once.
const FOUND_RUN_BYTES: usize = 64 << 10;

/// Hands `each` every line of `input` holding `needle`, in order, searching blocks of text
/// whole rather than line by line (a history's nemesis lines are a few in a thousand: read a
/// line at a time, 10M events took 0.97 s; searched by the block, about what reading takes).
/// Reads blocks of `block_bytes` (more for a longer line). Stops at the input's end, its first
/// read error, or once `each` returns false.
fn lines_containing(
    mut input: impl std::io::Read,
    needle: &[u8],
    block_bytes: usize,
    mut each: impl FnMut(&[u8]) -> bool,
) {
    let finder = memchr::memmem::Finder::new(needle);
    let mut buf = vec![0u8; block_bytes.max(1)];
    // buf[..filled] is text read and not yet searched; it starts at a line's start.
    let mut filled = 0;
    // Bounded by the input: every pass reads into the buffer or ends.
    loop {
        if filled == buf.len() {
            // One line longer than the buffer: room for more of it.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match input.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        let at_end = n == 0;
        filled += n;
        // The whole lines read: up to the last line's end, or everything at the input's end.
        let whole = if at_end {
            filled
        } else {
            match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(p) => p + 1,
                None => continue,
            }
        };
        let mut from = 0;
        // Bounded by the block: every hit moves past its line.
        while let Some(hit) = finder.find(&buf[from..whole]) {
            let at = from + hit;
            let start = memchr::memrchr(b'\n', &buf[from..at]).map_or(from, |p| from + p + 1);
            let end = memchr::memchr(b'\n', &buf[at..whole]).map_or(whole, |p| at + p);
            if !each(&buf[start..end]) {
                return;
            }
            from = end;
        }
        buf.copy_within(whole..filled, 0);
        filled -= whole;
        if at_end {
            return;
        }
    }
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
    let digest = Digest::new(capacity, Drift::from_fraction(cfg.drift));
    let (digest, warnings) = digest_input(input, path, digest, None)?;
    let model = Model::from_digest(digest, cfg);
    let results = crate::check_model(&model, cfg);
    // Freeing millions of ops takes a noticeable share of a check; nobody waits for it.
    if drop_aside {
        std::thread::spawn(move || drop(model));
    }
    Ok((results, warnings))
}

/// What a reader that closes grants as its walk passes them would hold of a history file:
/// `lockpick check`'s reading, with grants closed `horizon_ns` past their reach (see
/// `walk.rs`), and no checker run. For measuring the window a streaming check needs.
pub fn window_of_path(
    path: &Path,
    cfg: &CheckConfig,
    horizon_ns: u64,
) -> Result<WindowStats, CheckError> {
    let file = open(path)?;
    let digest = Digest::streaming(Drift::from_fraction(cfg.drift), horizon_ns);
    let (mut d, _) = digest_input(file, path, digest, None)?;
    d.finish_walk();
    let stream = d.stream.as_ref().expect("set above");
    Ok(WindowStats {
        events: d.events,
        ops: d.ops.len() as u64,
        grants: d.walk.grants.len() as u64,
        closed: d.walk.closed as u64,
        stale: d.walk.state.iter().filter(|&&s| s == Close::Stale).count() as u64
            + d.walk.stale_dropped,
        late: d.walk.late,
        open_grants_max: d.walk.open_max as u64,
        unwalked_ops_max: d.unwalked_max as u64,
        ops_kept_max: d.kept_max as u64,
        holds_waiting_max: stream.pending_max as u64,
        double_grants: stream.double_grants.len() as u64,
        violations: stream.proven.violations.len() as u64,
        violations_by_kind: (stream.proven.violations.iter()).fold(
            std::collections::BTreeMap::new(),
            |mut by, v| {
                *by.entry(v.kind.as_str()).or_insert(0) += 1;
                by
            },
        ),
        out_of_order: stream.out_of_order(),
        stopped_waiting: d.forced_count,
        late_answers: d.late_answers,
        forced_kept_most: stream.forced.kept_most as u64,
        forced_cut_short: stream.forced.cut_short,
        fencing_kept_most: stream.fencing.kept_most as u64,
        fencing_cut_short: stream.fencing.cut_short,
        fencing_forgotten: stream.fencing.forgotten,
        swept_early: stream.swept_early,
        store_waiting_most: stream.store.waiting_most as u64,
        store_out_of_order: stream.store.out_of_order,
        values_forgotten: stream.store.forgotten,
        stuck_cut_short: stream.stuck.cut_short,
        search_kept_most: stream.search.kept_most() as u64,
        searched_impossible: stream.search.found.len() as u64,
        waits_kept_most: stream.deadlock.waits_most as u64,
        deadlocks: stream.deadlock.found.len() as u64,
    })
}

/// See [`window_of_path`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowStats {
    pub events: u64,
    /// Client ops, and grants among them.
    pub ops: u64,
    pub grants: u64,
    /// Grants closed before the end, and of them those something reached after their closing
    /// (what a reader that forgets closed grants would judge without).
    pub closed: u64,
    pub stale: u64,
    /// What reached a grant after the reader dropped it.
    pub late: u64,
    /// The most grants walked and not closed at once, and the most ops read and not walked.
    pub open_grants_max: u64,
    pub unwalked_ops_max: u64,
    /// The most ops kept at once, once those no later step of the walk reads are dropped.
    pub ops_kept_max: u64,
    /// The most holds of closed grants left waiting for the double-grant sweep after a block,
    /// and the overlapping holds it found.
    pub holds_waiting_max: u64,
    pub double_grants: u64,
    /// The violations the streamed readings proved (double-grant's three readings, the
    /// fencing-tokens, stale-lock-ops and store rules), and the grants the token walk left out, closed after one later in token order.
    pub violations: u64,
    pub violations_by_kind: std::collections::BTreeMap<&'static str, u64>,
    pub out_of_order: u64,
    /// How many times the reader stopped waiting for an op that held the walk past its limit
    /// of ops waiting (taking it as pending), and the answers that came after it did.
    pub stopped_waiting: u64,
    pub late_answers: u64,
    /// The most grants the forced-order reading kept for one lock, and the grants it let go at
    /// its limit whatever their chain.
    pub forced_kept_most: u64,
    pub forced_cut_short: u64,
    /// The same for the fencing-tokens reading, and the first grants of tokens it forgot at
    /// its limit of tokens remembered.
    pub fencing_kept_most: u64,
    pub fencing_cut_short: u64,
    pub fencing_forgotten: u64,
    /// Holds the double-grant sweep swept before the watermark passed them, at its limit.
    pub swept_early: u64,
    /// The most store writes waiting to be judged at once, those walked below a seq already
    /// judged, and the counter values whose first write was forgotten at its limit.
    pub store_waiting_most: u64,
    pub store_out_of_order: u64,
    pub values_forgotten: u64,
    /// `held` answers stuck so far that the lock-stuck reading judged at its limit.
    pub stuck_cut_short: u64,
    /// The most ops one lock's model search kept at once, and the locks it proved impossible.
    pub search_kept_most: u64,
    pub searched_impossible: u64,
    /// The most acquires the wait-for sweep kept waiting to be resolved, and the deadlocks it
    /// proved.
    pub waits_kept_most: u64,
    pub deadlocks: u64,
}

/// Reads `input` (named `path` in errors) into `digest`: parsed in parallel blocks, paired
/// and walked on a thread of its own, each block while the next is parsed. `stop`, if given,
/// is set (and the pieces still coming are not read) once the streamed reading cannot be the
/// whole check's ([`Digest::gives_up`]).
fn digest_input(
    input: impl std::io::Read,
    path: &Path,
    digest: Digest,
    stop: Option<&std::sync::atomic::AtomicBool>,
) -> Result<(Digest, Vec<ReadWarning>), CheckError> {
    // A streaming reader's own state is a few MB: the text and pieces in flight would be most
    // of what it holds in the batch's blocks (8 MiB, about 100 MB resident at 10M events
    // against about 40 in blocks of 1 MiB, and faster: BENCHMARKS.md).
    let block_bytes = if digest.evict {
        STREAM_BLOCK_BYTES
    } else {
        history::BLOCK_BYTES
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<Piece>(4);
    let (warnings, mut digest) = std::thread::scope(|scope| {
        let pairer = scope.spawn(move || {
            let mut digest = digest;
            // Bounded by the pieces sent, which end when the reader returns.
            for piece in rx {
                if let Some(stop) = stop {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        continue;
                    }
                    digest.feed(piece);
                    if digest.gives_up() {
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    continue;
                }
                digest.feed(piece);
            }
            digest
        });
        let send = move |piece| {
            // The pairer only stops when this sender is dropped: a send cannot fail.
            let _ = tx.send(piece);
        };
        let warnings = history::read_pieces_in(input, path, &EventBuilder, send, block_bytes);
        (
            warnings,
            pairer.join().expect("history pairing thread panicked"),
        )
    });
    let warnings = warnings?;
    if let Some(error) = digest.error.take() {
        return Err(CheckError::structure(path, error));
    }
    Ok((digest, warnings))
}

/// Fills `results.evidence` from the file: a second read, only when something was reported,
/// that parses only the lines of the ops named (the recorder writes `index` first) and stops
/// once it has them all. What cannot be read is left out: evidence is a courtesy to the
/// reader, the verdict does not rest on it.
fn read_evidence(path: &Path, results: &mut history::Results) {
    let mut wanted = results.evidence_wanted();
    if wanted.is_empty() {
        return;
    }
    wanted.sort_unstable();
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let mut left = wanted.len();
    // Every event names its index: each line is handed over, searched by the block.
    lines_containing(file, b"\"index\"", STREAM_BLOCK_BYTES, |line| {
        let index = line.strip_prefix(b"{\"index\":").and_then(|rest| {
            let digits = rest.iter().take_while(|d| d.is_ascii_digit()).count();
            std::str::from_utf8(&rest[..digits])
                .ok()?
                .parse::<u64>()
                .ok()
        });
        let wanted_here = match index {
            Some(i) => wanted.binary_search(&i).is_ok(),
            // Another writer's field order: parse to know.
            None => true,
        };
        if !wanted_here {
            return true;
        }
        let Ok(op) = serde_json::from_slice::<Op>(line) else {
            return true;
        };
        if wanted.binary_search(&op.index).is_ok() {
            results.keep_evidence(&op);
            left = left.saturating_sub(1);
        }
        left > 0
    });
}

impl Model {
    /// Digests an in-memory history: the front end of the same pass a history file goes
    /// through ([`crate::check_path`]).
    pub fn new(h: &History, cfg: &CheckConfig) -> Model {
        let digest = Digest::of_history(h, Drift::from_fraction(cfg.drift));
        assert!(
            digest.error.is_none(),
            "a History is validated by History::new: {:?}",
            digest.error
        );
        Model::from_digest(digest, cfg)
    }

    /// Builds the model from the digest: the walk ended (every op's grant by name, the
    /// grants' epochs with the ambiguous ops, the run's ttl policy, the session grants' ends,
    /// each grant's lease; `walk.rs`), and the lists the rules read by position sorted.
    pub(crate) fn from_digest(d: Digest, cfg: &CheckConfig) -> Model {
        let drift = Drift::from_fraction(cfg.drift);
        let mut d = d;
        d.finish_walk();
        let (mut ops, mut walk) = (d.ops.into_vec(), d.walk);
        let mut lease_from: Vec<(usize, u64)> = d
            .lease_from_at
            .iter()
            .map(|(&pos, &from)| (pos as usize, from))
            .collect();
        lease_from.sort_unstable();
        let sessions = std::mem::take(&mut walk.sessions);
        let Walk {
            grants,
            grant_of,
            ok_acquires,
            unplaced,
            ambiguity_capped,
            ttl_policy,
            ..
        } = walk;
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
        let m = Model {
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
            grants: grants.into_vec(),
            grant_of: grant_of.into_vec(),
            ok_acquires,
            unplaced,
            ambiguity_capped,
            grant_named: d.grant_named,
            ttl_policy,
        };
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

/// The walk over a whole history (every op walkable, every ok acquire told to the walk before
/// the first op is walked), with the crashes of session holders marked: the oracle the walk
/// done as the history is read is held to. `ids` and `holds` are sorted by position, one per
/// op.
#[cfg(test)]
fn walk_whole(ops: &mut Ops, ids: &[(usize, u32)], holds: &[(usize, Hold)]) -> Walk {
    let mut walk = Walk::new();
    let (mut next_id, mut next_hold) = (0, 0);
    for pos in 0..ops.len() {
        let id = at_pos(ids, &mut next_id, pos);
        let hold = at_pos(holds, &mut next_hold, pos);
        walk.completed(pos, &ops[pos], id, hold);
    }
    next_id = 0;
    for pos in 0..ops.len() {
        let id = at_pos(ids, &mut next_id, pos);
        walk.walk(ops, id);
    }
    walk.settle_all(ops);
    walk.mark_crashes(ops);
    walk
}

/// The number of grant id `id` in `numbers`, numbered as read.
fn id_number(numbers: &mut FxMap<String, u32>, id: String) -> u32 {
    let n = numbers.len() as u32;
    *numbers.entry(id).or_insert(n)
}

/// The entry of a list sorted by position (one per op) at `pos`, for positions asked in
/// increasing order: `cursor` only moves forward.
#[cfg(test)]
fn at_pos<T: Copy>(list: &[(usize, T)], cursor: &mut usize, pos: usize) -> Option<T> {
    // Bounded by the list.
    while *cursor < list.len() && list[*cursor].0 < pos {
        *cursor += 1;
    }
    list.get(*cursor).filter(|e| e.0 == pos).map(|e| e.1)
}

#[cfg(test)]
mod walk_order_tests {
    //! The walk done as a history is read (each op walked as soon as the rule of `walk.rs`
    //! allows) makes exactly the grants, names and marks the walk of the whole history makes.

    use super::*;
    use crate::gen::{correct_history, GenParams};
    use crate::inject::{inject, InjectKind};
    use crate::mutex::{overlapping_holds, Earlier, Hold, HoldSweep};
    use history::Op;

    /// What one comparison saw.
    #[derive(Debug, Default)]
    struct Seen {
        /// Epoch ops of grants ahead of themselves.
        ahead: usize,
        /// Grants closed before the end, and of them those found stale.
        closed: usize,
        stale: usize,
        /// What the streamed readings matched of the batch's, where no grant went stale.
        compared: Compared,
        /// What the streaming rules kept at most, and let go at their limits.
        limits: Limits,
        /// Whether a name the reader forgot led the walk where the tests cannot follow.
        uncertain: bool,
        /// What reached a grant after it was dropped.
        late: u64,
        /// The most ops read and not walked at once, and the ops the reader stopped waiting
        /// for.
        unwalked_max: usize,
        forced: u64,
    }

    /// What the streaming rules kept at most, and what they let go at their limits.
    #[derive(Debug, Default)]
    struct Limits {
        /// Grants the forced-order reading let go at its limit, and the most a lock kept.
        forced_cut_short: u64,
        forced_kept_most: usize,
        /// The same for the fencing-tokens reading, and the first grants of tokens it forgot
        /// and remembered at most.
        fencing_cut_short: u64,
        fencing_kept_most: usize,
        fencing_forgotten: u64,
        fencing_remembered_most: usize,
        /// The same for the stale-lock-ops reading.
        stale_cut_short: u64,
        stale_kept_most: usize,
        /// Store writes walked below a seq already judged, and (key, value) pairs forgotten and
        /// remembered at most.
        store_out_of_order: u64,
        values_forgotten: u64,
        values_remembered_most: usize,
        /// `lost-update` violations streamed.
        lost_updates: usize,
        /// Stuck `held` answers judged at the limit with what was read, and the most waiting.
        stuck_cut_short: u64,
        stuck_waiting_most: usize,
        /// Holds swept before the watermark passed them, at the limit, and the most waiting.
        swept_early: u64,
        holds_waiting_most: usize,
        /// Holds of grants closed after the sweep passed their start, left out of it.
        left_out: u64,
    }

    impl Limits {
        fn of(stream: &Streamed) -> Limits {
            Limits {
                forced_cut_short: stream.forced.cut_short,
                forced_kept_most: stream.forced.kept_most,
                fencing_cut_short: stream.fencing.cut_short,
                fencing_kept_most: stream.fencing.kept_most,
                fencing_forgotten: stream.fencing.forgotten,
                fencing_remembered_most: stream.fencing.remembered_most,
                stale_cut_short: stream.stale.cut_short,
                stale_kept_most: stream.stale.kept_most,
                store_out_of_order: stream.store.out_of_order,
                values_forgotten: stream.store.forgotten,
                values_remembered_most: stream.store.remembered_most,
                stuck_cut_short: stream.stuck.cut_short,
                stuck_waiting_most: stream.stuck.waiting_most,
                lost_updates: of_kinds(stream, &[history::ViolationKind::LostUpdate]).len(),
                swept_early: stream.swept_early,
                holds_waiting_most: stream.pending_max,
                left_out: stream.left_out,
            }
        }
    }

    /// Both walks over one history: the digest's, done as it reads the history one event at a
    /// time, closing grants `horizon_ns` past their reach, and the whole walk, every grant
    /// followed at the end. Every grant the digest did not find stale is the oracle's.
    fn same_walks(h: &History, what: &str, horizon_ns: u64, drift: Drift, evict: bool) -> Seen {
        same_walks_within(h, what, (horizon_ns, usize::MAX, usize::MAX), drift, evict)
    }

    /// [`same_walks`], the reader letting at most `unwalked_limit` ops wait to be walked.
    fn same_walks_within(
        h: &History,
        what: &str,
        (horizon_ns, unwalked_limit, kept_max): (u64, usize, usize),
        drift: Drift,
        evict: bool,
    ) -> Seen {
        let mut read = Digest::new(0, drift);
        read.unwalked_limit = unwalked_limit;
        read.walk.horizon_ns = horizon_ns;
        let mut stream = Streamed::default();
        stream.coverage.drift = drift;
        if kept_max != usize::MAX {
            stream.forced.kept_max = kept_max;
            stream.fencing.kept_max = kept_max;
            stream.fencing.remembered_max = kept_max;
            stream.stale.kept_max = kept_max;
            stream.store.remembered_max = kept_max;
            stream.stuck.waiting_max = kept_max;
            stream.holds_waiting_max = Some(kept_max);
        }
        read.stream = Some(stream);
        read.evict = evict;
        // Pruned at every drop: what the names keep of dropped grants is what is read.
        read.walk.prune_every = 1;
        let mut read = Digest::of_history_in(h, 1, read);
        read.finish_walk();
        let (unwalked_max, forced) = (read.unwalked_max, read.forced_count);
        // The model search reads the ops as the walk leaves them, not the grants: the batch's
        // verdicts on every lock, grants gone stale or not, unless an answer came to an op the
        // reader had stopped waiting for.
        let searched = match read.stream.as_mut() {
            Some(stream) if forced == 0 => compare_search(h, what, drift, stream, read.locks.len()),
            _ => [0; 3],
        };
        let cycles = if forced == 0 {
            compare_deadlock(h, what, drift, &read)
        } else {
            [0; 2]
        };
        let bank = if forced == 0 {
            compare_stats(h, what, drift, &read)
        } else {
            0
        };
        let rounds = read.round_figures().expect("a streaming reader");
        let coverage = read.take_coverage().expect("a streaming reader");
        let mut oracle = Digest::new(0, drift);
        oracle.hold_walk = true;
        let oracle = Digest::of_history_in(h, 1, oracle);
        let ids: Vec<(usize, u32)> = read
            .grant_named
            .iter()
            .map(|&(pos, id)| (pos as usize, id))
            .collect();
        let lease_from = |map: &FxMap<OpPos, u64>, pos: usize| map.get(&(pos as OpPos)).copied();
        let mut a_ops = oracle.ops;
        let mut a = walk_whole(&mut a_ops, &ids, &oracle.holds);
        a.follow_rest(&a_ops, drift, |pos| lease_from(&oracle.lease_from_at, pos));
        let stream = read.stream.as_ref().expect("set above");
        let limits = Limits::of(stream);
        // The store and lease rules read no grant: compared whatever went stale, unless an
        // answer came to an op the reader had stopped waiting for (the batch reads it).
        let by_op = compare_by_op(h, what, (stream, drift), forced == 0);
        let (b_ops, b) = (read.ops, read.walk);
        if !evict {
            assert_eq!(
                format!("{:?}", a.grant_of),
                format!("{:?}", b.grant_of),
                "{what}: grant_of"
            );
        }
        // Each op's grant, the dropped ones' as they were dropped, unless the grant it names
        // was dropped or forgotten (counted late).
        let mut b_grant_of = read.grant_of_dropped;
        b_grant_of.extend(b.grant_of.iter().copied());
        assert_eq!(a.grant_of.len(), b_grant_of.len(), "{what}: grant_of");
        if b.uncertain == 0 {
            for (pos, (x, y)) in a.grant_of.iter().zip(&b_grant_of).enumerate() {
                if !b.late_ops.contains(&(pos as OpPos)) {
                    assert_eq!(x, y, "{what}: the grant of op {pos}");
                }
            }
        }
        // The reader that drops grants drops their sessions' positions too.
        assert!(a.sessions.ends_with(&b.sessions), "{what}: sessions");
        if !evict {
            assert_eq!(a.sessions, b.sessions, "{what}: sessions");
        }
        assert_eq!(
            (
                a.ok_acquires,
                a.unplaced,
                a.ambiguity_capped,
                a.grants.len()
            ),
            (
                b.ok_acquires,
                b.unplaced,
                b.ambiguity_capped,
                b.grants.len()
            ),
            "{what}: counts"
        );
        // A grant the reader dropped is compared as it was when closed; one it keeps, as it
        // is now. Neither when stale or reached after it was dropped.
        let stale = b.state.iter().filter(|&&s| s == Close::Stale).count()
            + b.late_grants.len()
            + b.uncertain as usize;
        assert!(
            b.late >= b.uncertain,
            "{what}: a forgotten name not counted late"
        );
        assert!(
            b.late + b.stale_dropped >= b.late_grants.len() as u64,
            "{what}: a grant reached late not counted"
        );
        let late: std::collections::HashSet<u32> = b.late_grants.iter().copied().collect();
        let closed: std::collections::HashMap<u32, &String> =
            b.closed_log.iter().map(|(g, text)| (*g, text)).collect();
        for (g, x) in a.grants.iter().enumerate() {
            let now = b.grants.get(g).map(|y| format!("{y:?}"));
            let Some(y) = now.as_ref().or(closed.get(&(g as u32)).copied()) else {
                panic!("{what}: grant {g} was dropped unclosed");
            };
            let kept_stale = b.state.get(g) == Some(&Close::Stale);
            if !kept_stale && !late.contains(&(g as u32)) && b.uncertain == 0 {
                assert_eq!(&format!("{x:?}"), y, "{what}: grant {g}");
            }
        }
        if stale > 0 {
            sound_where_stale(h, what, drift, stream);
        }
        let mut compared = Compared {
            by_op,
            searched,
            cycles,
            bank,
            ..Compared::default()
        };
        if stale == 0 {
            if !evict {
                assert_eq!(format!("{a_ops:?}"), format!("{b_ops:?}"), "{what}: ops");
            }
            if forced == 0 {
                // The rounds read the grants' holds as they closed.
                let (m, _) = batch_model(h, drift);
                assert_eq!(rounds, crate::rounds::round_stats(&m), "{what}: rounds");
                // The coverage reads the grants as they closed.
                let want = serde_json::to_value(crate::coverage::coverage(&m));
                let got = serde_json::to_value(&coverage).expect("coverage serializes");
                assert_eq!(got, want.expect("coverage serializes"), "{what}: coverage");
            }
            let stream = read.stream.expect("set above");
            compared = Compared {
                by_op,
                searched,
                cycles,
                bank,
                ..compare_streamed(h, what, drift, (&a, &a_ops), &stream)
            };
        }
        Seen {
            compared,
            limits,
            ahead: a
                .grants
                .iter()
                .map(|g| g.epoch_ops.iter().filter(|&&e| (e as usize) < g.op).count())
                .sum(),
            closed: b.closed,
            stale,
            uncertain: b.uncertain > 0,
            late: b.late,
            unwalked_max,
            forced,
        }
    }

    /// The streamed readings against the batch's over one history no grant of which went stale:
    /// the overlapping holds, and every violation worded as the batch words it, unless a grant
    /// closed out of token order or a reading let grants go at its limit (each counted).
    fn compare_streamed(
        h: &History,
        what: &str,
        drift: Drift,
        (a, a_ops): (&Walk, &Ops),
        stream: &Streamed,
    ) -> Compared {
        let (m, _) = batch_model(h, drift);
        use history::ViolationKind as K;
        let streamed_double = of_kinds(stream, &[K::DoubleGrant]);
        // The stale-lock-ops rules over the ops that act on a grant.
        let stale = compare_rule(
            what,
            &crate::tokens::stale_streamed_readings(&m),
            &of_kinds(stream, &[K::StaleReleaseAccepted, K::StaleRenewAccepted]),
            stream.stale.cut_short == 0,
            |_| false,
        );
        // The fencing-tokens rules, whatever the token walk left out. Once the first grant of
        // a token was forgotten, a reuse may name a later one as the first.
        let forgot = stream.fencing.forgotten > 0;
        let fencing = compare_rule(
            what,
            &crate::tokens::streamed_readings(&m),
            &of_kinds(stream, &[K::TokenReused, K::TokenRegressed]),
            stream.fencing.cut_short == 0 && !forgot,
            |v| forgot && v.kind == K::TokenReused,
        );
        // Once the sweep met its limit nothing is compared (it counts what it left out), but
        // every pair it found still overlaps.
        if stream.swept_early > 0 {
            for &(ga, sa, gb, sb) in &stream.double_grants {
                let x = &a.grants[ga as usize].holds[sa as usize];
                let y = &a.grants[gb as usize].holds[sb as usize];
                assert!(
                    x.start_ns < y.end_ns && y.start_ns < x.end_ns,
                    "{what}: holds of grants {ga} and {gb} swept as overlapping"
                );
            }
            return Compared {
                fencing,
                stale,
                ..Compared::default()
            };
        }
        // The streamed sweep finds the overlapping holds the batch sweep finds.
        let mut holds: Vec<Hold> = Vec::new();
        for (i, g) in a.grants.iter().enumerate() {
            holds.extend(Hold::of(i as u32, g));
        }
        holds.sort_unstable();
        let holds = holds.into_iter().map(|h| {
            let g = &a.grants[h.grant as usize];
            (h, Earlier::of(a_ops, g, &g.holds[h.segment as usize]))
        });
        let mut sweep = HoldSweep::default();
        let mut batch: Vec<_> = overlapping_holds(&mut sweep, holds).collect();
        let mut streamed = stream.double_grants.clone();
        batch.sort_unstable();
        streamed.sort_unstable();
        assert_eq!(batch, streamed, "{what}: overlapping holds");
        // And each is worded as the batch check words it, from what the reader kept.
        assert_eq!(stream.forced.unsettled, 0, "{what}: unsettled forced order");
        let out_of_order = stream.out_of_order();
        let (mut token_order, mut forced_order) = (0, 0);
        if out_of_order == 0 && stream.forced.cut_short == 0 {
            let [holds, tokens, forced] = crate::mutex::streamed_readings(&m);
            (token_order, forced_order) = (tokens.len(), forced.len());
            let batch = [holds, tokens, forced].concat();
            assert_eq!(
                words(&batch),
                words(&streamed_double),
                "{what}: the streamed readings' violations"
            );
        }
        Compared {
            double_grants: batch.len(),
            token_order,
            forced_order,
            fencing,
            stale,
            out_of_order,
            by_op: [0; 4],
            searched: [0; 3],
            cycles: [0; 2],
            bank: 0,
        }
    }

    /// Where a grant went stale the readings may word a violation otherwise, but never find
    /// one the batch does not: each is the batch's by kind, lock and first op (the grant or op
    /// it is about).
    fn sound_where_stale(h: &History, what: &str, drift: Drift, stream: &Streamed) {
        let (m, cfg) = batch_model(h, drift);
        let about = |v: &history::Violation| (v.kind, v.lock.clone(), v.ops.iter().min().copied());
        let batch: std::collections::HashSet<_> = (crate::all_checkers().iter())
            .flat_map(|c| c.check_model(&m, &cfg).violations)
            .map(|v| about(&v))
            .collect();
        for v in &stream.proven.violations {
            assert!(
                batch.contains(&about(v)),
                "{what}: streamed, not the batch's: {v:?}"
            );
        }
    }

    /// The streamed violations of the rules that read ops, not grants, against the batch's:
    /// `stale-write-accepted`, `lost-update` and the lease rules, each the batch's while its
    /// reading was exact (`answered`: no answer came late to an op the reader had stopped
    /// waiting for).
    fn compare_by_op(
        h: &History,
        what: &str,
        (stream, drift): (&Streamed, Drift),
        answered: bool,
    ) -> [usize; 4] {
        let (m, cfg) = batch_model(h, drift);
        use history::ViolationKind as K;
        let s = &stream.store;
        let stale = compare_rule(
            what,
            &crate::Checker::check_model(&crate::store::StoreFencing, &m, &cfg).violations,
            &of_kinds(stream, &[K::StaleWriteAccepted]),
            answered && s.out_of_order == 0,
            |_| s.out_of_order > 0 || !answered,
        );
        // Once a value was forgotten, a write of it may be paired with a later first.
        let lost = compare_rule(
            what,
            &crate::Checker::check_model(&crate::store::Counter, &m, &cfg).violations,
            &of_kinds(stream, &[K::LostUpdate]),
            answered && s.forgotten == 0,
            |v| {
                !answered
                    || (s.forgotten > 0 && v.ops.len() == 2 && v.explanation.contains("same value"))
            },
        );
        // The lease rules, each resting on one answer.
        let lease = compare_rule(
            what,
            &crate::Checker::check_model(&crate::lease::LeaseExpiry, &m, &cfg).violations,
            &of_kinds(stream, &[K::GrantOnExpiredLease, K::GrantWithoutKey]),
            answered,
            |_| !answered,
        );
        // Lock-stuck, the stuck answers judged again at the end.
        let stuck = compare_rule(
            what,
            &crate::Checker::check_model(&crate::liveness::Liveness, &m, &cfg).violations,
            &of_kinds(stream, &[K::LockStuck]),
            answered && stream.stuck.cut_short == 0,
            |_| !answered || stream.stuck.cut_short > 0,
        );
        [stale, lost, lease, stuck]
    }

    /// Violations as sorted text, to compare.
    fn words(v: &[history::Violation]) -> Vec<String> {
        let mut v: Vec<String> = v.iter().map(|v| format!("{v:?}")).collect();
        v.sort_unstable();
        v
    }

    /// The violations of `kinds` the streaming rules proved.
    fn of_kinds(stream: &Streamed, kinds: &[history::ViolationKind]) -> Vec<history::Violation> {
        (stream.proven.violations.iter())
            .filter(|v| kinds.contains(&v.kind))
            .cloned()
            .collect()
    }

    /// One rule's `streamed` violations against the `batch`'s: the same while the reading let
    /// no grant go at its limit (`exact`), and then how many; else none the batch does not
    /// find, but those `unjudged` says.
    fn compare_rule(
        what: &str,
        batch: &[history::Violation],
        streamed: &[history::Violation],
        exact: bool,
        unjudged: impl Fn(&history::Violation) -> bool,
    ) -> usize {
        if exact {
            assert_eq!(words(batch), words(streamed), "{what}: streamed violations");
            return batch.len();
        }
        let batch = words(batch);
        let judged: Vec<_> = streamed.iter().filter(|v| !unjudged(v)).cloned().collect();
        for v in words(&judged) {
            assert!(batch.contains(&v), "{what}: {v} streamed past the limit");
        }
        0
    }

    /// What [`compare_streamed`] compared: overlapping holds, violations of the token-order
    /// and forced-order readings and of the fencing-tokens rules, and grants out of token
    /// order.
    #[derive(Debug, Default)]
    struct Compared {
        double_grants: usize,
        token_order: usize,
        forced_order: usize,
        fencing: usize,
        stale: usize,
        out_of_order: u64,
        /// `stale-write-accepted`, `lost-update`, lease-rule and `lock-stuck` violations.
        by_op: [usize; 4],
        /// Locks the streamed model search decided as the batch's: possible, impossible, or
        /// stopped at a limit.
        searched: [usize; 3],
        /// Wait-for cycles the streamed sweep judged as the batch's, and deadlocks among them.
        cycles: [usize; 2],
        /// `total-changed` violations.
        bank: usize,
    }

    /// The streamed wait-for sweep against the batch's: the same cycles judged, in the same
    /// words (violations, notes, figures), and the same finding of a holding wait. Returns the
    /// cycles and deadlocks compared.
    fn compare_deadlock(h: &History, what: &str, drift: Drift, read: &Digest) -> [usize; 2] {
        let (m, cfg) = batch_model(h, drift);
        let (batch, batch_waited) = crate::deadlock::batch_sweep(&m, cfg.liveness_grace_ns);
        let stream = &read.stream.as_ref().expect("streaming").deadlock;
        let names = read.names();
        let streamed = stream.output(&names);
        assert_eq!(batch_waited, stream.waited, "{what}: a holding wait");
        assert_eq!(
            format!("{:?} {:?}", batch.violations, batch.notes),
            format!("{:?} {:?}", streamed.violations, streamed.notes),
            "{what}: the wait-for cycles"
        );
        assert_eq!(batch.extra, streamed.extra, "{what}: the cycles' figures");
        assert_eq!(
            format!("{:?}", batch.violations),
            format!("{:?}", stream.found),
            "{what}: the deadlocks proven as read"
        );
        let formed = (batch.extra.get("cycles"))
            .and_then(|c| c["formed"].as_u64())
            .unwrap_or(0);
        [formed as usize, batch.violations.len()]
    }

    /// The batch's model of `h` under `drift`, and the settings it was built with: what each
    /// streamed reading is compared with.
    /// The stats the streaming reader counts as it walks are the batch's, exactly (the
    /// latencies of a corpus history are far below the exact limit), and so is its reading of
    /// the bank's total (violations and notes). Returns the `total-changed` violations compared.
    fn compare_stats(h: &History, what: &str, drift: Drift, read: &Digest) -> usize {
        let (m, _) = batch_model(h, drift);
        let want = serde_json::to_value(crate::stats::stats_of(&m)).expect("stats serialize");
        let got = serde_json::to_value(read.stats().expect("a streaming reader"));
        assert_eq!(got.expect("stats serialize"), want, "{what}: stats");
        let active = |s, e| m.faults.active(s, e);
        let got = read.liveness_figures(&active).expect("a streaming reader");
        assert_eq!(
            got,
            crate::fairness::liveness_stats(&m),
            "{what}: liveness figures"
        );
        let stream = read.stream.as_ref().expect("a streaming reader");
        let mut streamed = crate::CheckOutput::new();
        stream.bank.judge(&read.keys, &mut streamed);
        let mut batch = crate::bank::BankTotal::default();
        for (pos, o) in m.ops.iter().enumerate() {
            batch.walked(o, m.transfer_of(pos));
        }
        let mut want = crate::CheckOutput::new();
        batch.judge(&m.keys, &mut want);
        assert_eq!(
            words(&streamed.violations),
            words(&want.violations),
            "{what}: bank"
        );
        assert_eq!(streamed.notes, want.notes, "{what}: bank notes");
        assert_eq!(
            streamed.not_judged, want.not_judged,
            "{what}: bank not judged"
        );
        let proven = of_kinds(stream, &[history::ViolationKind::TotalChanged]);
        assert_eq!(
            words(&proven),
            words(&want.violations),
            "{what}: bank, proven"
        );
        want.violations.len()
    }

    fn batch_model(h: &History, drift: Drift) -> (Model, CheckConfig) {
        let cfg = CheckConfig {
            drift: drift.ppm() as f64 / 1e6,
            ..CheckConfig::default()
        };
        (Model::new(h, &cfg), cfg)
    }

    /// A lock's search verdict, in words to compare.
    fn searched_words(s: &crate::search::Searched) -> (usize, String) {
        use crate::search::Searched;
        match s {
            Searched::Possible => (0, "possible".to_string()),
            Searched::Impossible(v) => (
                1,
                format!(
                    "{:?} {:?} {:?} {:?}: {}",
                    v.kind, v.lock, v.ops, v.window_ns, v.explanation
                ),
            ),
            Searched::Stopped(why) => (2, format!("stopped: {why}")),
        }
    }

    /// The streamed model search against the batch's, lock by lock: the same verdict in the
    /// same words. Returns how many of each were compared.
    fn compare_search(
        h: &History,
        what: &str,
        drift: Drift,
        stream: &mut Streamed,
        locks: usize,
    ) -> [usize; 3] {
        let (m, _) = batch_model(h, drift);
        let batch = crate::search::search_all(&m);
        let streamed = stream.search.finish(locks);
        assert_eq!(batch.len(), streamed.len(), "{what}: locks searched");
        let mut counted = [0; 3];
        for ((la, a), (lb, b)) in batch.iter().zip(&streamed) {
            assert_eq!(la, lb, "{what}: lock order");
            let (kind, a) = searched_words(a);
            let (_, b) = searched_words(b);
            assert_eq!(a, b, "{what}: the search of lock {la}");
            counted[kind] += 1;
        }
        // Each impossible lock was proven as read, once.
        let found = stream.search.found.len();
        assert!(
            found <= counted[1],
            "{what}: {found} found as read, {} at the end",
            counted[1]
        );
        counted
    }

    /// One history from its lines: `(time_ms, process, type, f, value)` on lock L0 (store ops
    /// on key k0).
    fn lines(events: &[(u64, u64, &str, &str, &str)]) -> History {
        let ops = events
            .iter()
            .enumerate()
            .map(|(i, &(ms, p, kind, f, value))| {
                let target = match f {
                    "read" | "write" => r#""key":"k0""#,
                    _ => r#""lock":"L0""#,
                };
                let line = format!(
                    r#"{{"index":{i},"time_ns":{},"process":{p},"type":"{kind}","f":"{f}",{target},"value":{{{value}}}}}"#,
                    ms * 1_000_000
                );
                serde_json::from_str::<Op>(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
            })
            .collect();
        History::new(ops).expect("a well-formed history")
    }

    /// Histories whose ops name grants asked for after them, each way a name can point ahead.
    fn named_ahead() -> Vec<(&'static str, History)> {
        let ttl = r#""ttl_ms":1000"#;
        vec![
            (
                "a renew names by token a grant invoked after it",
                lines(&[
                    (0, 1, "invoke", "acquire", ttl),
                    (1, 1, "ok", "acquire", r#""token":1,"ttl_ms":1000"#),
                    (5, 2, "invoke", "renew", r#""token":2,"ttl_ms":1000"#),
                    (6, 3, "invoke", "acquire", ttl),
                    (7, 3, "ok", "acquire", r#""token":2,"ttl_ms":1000"#),
                    (8, 2, "ok", "renew", r#""token":2,"ttl_ms":1000"#),
                    (9, 3, "invoke", "release", r#""token":2"#),
                    (10, 3, "ok", "release", r#""token":2"#),
                ]),
            ),
            (
                "a renew names a grant asked for before it completed, answered after it",
                lines(&[
                    (5, 2, "invoke", "renew", r#""token":2,"ttl_ms":1000"#),
                    (6, 3, "invoke", "acquire", ttl),
                    (8, 2, "ok", "renew", r#""token":2,"ttl_ms":1000"#),
                    (9, 3, "ok", "acquire", r#""token":2,"ttl_ms":1000"#),
                    (10, 2, "invoke", "renew", r#""token":2,"ttl_ms":1000"#),
                    (11, 2, "ok", "renew", r#""token":2,"ttl_ms":1000"#),
                ]),
            ),
            (
                "a renew names a grant still unanswered when time moved past the renew",
                lines(&[
                    (5, 2, "invoke", "renew", r#""token":2,"ttl_ms":1000"#),
                    (6, 3, "invoke", "acquire", ttl),
                    (8, 2, "ok", "renew", r#""token":2,"ttl_ms":1000"#),
                    (9, 4, "invoke", "acquire", ttl),
                    (10, 3, "ok", "acquire", r#""token":2,"ttl_ms":1000"#),
                    (11, 4, "fail", "acquire", r#""error":"held""#),
                ]),
            ),
            (
                "a renew names a grant invoked at the instant the renew completed, after it in \
                 the file",
                lines(&[
                    (5, 2, "invoke", "renew", r#""token":2,"ttl_ms":1000"#),
                    (8, 2, "ok", "renew", r#""token":2,"ttl_ms":1000"#),
                    (8, 3, "invoke", "acquire", ttl),
                    (9, 3, "ok", "acquire", r#""token":2,"ttl_ms":1000"#),
                ]),
            ),
            (
                "a release names by grant id a grant invoked after it",
                lines(&[
                    (5, 2, "invoke", "release", r#""grant":"g9""#),
                    (6, 3, "invoke", "acquire", ttl),
                    (7, 3, "ok", "acquire", r#""grant":"g9","ttl_ms":1000"#),
                    (8, 2, "info", "release", r#""grant":"g9""#),
                ]),
            ),
            (
                "a token no grant carries may name grants without one, asked for after it",
                lines(&[
                    (0, 1, "invoke", "acquire", ttl),
                    (1, 1, "ok", "acquire", ttl),
                    (5, 2, "invoke", "renew", r#""token":7,"ttl_ms":1000"#),
                    (6, 3, "invoke", "acquire", ttl),
                    (7, 3, "ok", "acquire", ttl),
                    (8, 2, "ok", "renew", r#""token":7,"ttl_ms":1000"#),
                ]),
            ),
            (
                "a session holder's crash, and another's renew of a session named ahead",
                lines(&[
                    (0, 1, "invoke", "acquire", ttl),
                    (1, 1, "ok", "acquire", r#""token":1,"hold":"session""#),
                    (5, 2, "invoke", "renew", r#""token":2,"ttl_ms":1000"#),
                    (6, 3, "invoke", "acquire", ttl),
                    (7, 3, "ok", "acquire", r#""token":2,"hold":"session""#),
                    (8, 2, "info", "renew", r#""error":"timeout""#),
                    (9, 1, "invoke", "renew", r#""token":1"#),
                    (10, 1, "info", "renew", r#""error":"timeout""#),
                    (11, 3, "invoke", "write", r#""token":2,"value":1"#),
                ]),
            ),
        ]
    }

    /// Histories in which something reaches a grant after a walk that closes grants at once
    /// has closed it: each way a closed grant goes stale.
    fn closing_corners() -> Vec<(&'static str, History)> {
        let session = r#""token":1,"hold":"session""#;
        vec![
            (
                "a lost renew's ttl is learned from an answer after its grant closed",
                lines(&[
                    (0, 1, "invoke", "acquire", r#""ttl_ms":100"#),
                    (1, 1, "ok", "acquire", r#""token":1,"ttl_ms":100"#),
                    (5, 1, "invoke", "renew", r#""token":1,"ttl_ms":30"#),
                    (6, 1, "info", "renew", r#""error":"timeout""#),
                    (300, 2, "invoke", "acquire", r#""ttl_ms":100"#),
                    (301, 2, "ok", "acquire", r#""token":2,"ttl_ms":100"#),
                    (302, 2, "invoke", "renew", r#""token":2,"ttl_ms":30"#),
                    (303, 2, "ok", "renew", r#""token":2,"ttl_ms":15"#),
                ]),
            ),
            (
                "a session released by another process, its holder crashing after it closed",
                lines(&[
                    (0, 1, "invoke", "acquire", ""),
                    (1, 1, "ok", "acquire", session),
                    (2, 2, "invoke", "release", r#""token":1"#),
                    (3, 2, "ok", "release", r#""token":1"#),
                    (10, 3, "invoke", "acquire", ""),
                    (11, 3, "fail", "acquire", r#""error":"held""#),
                    (12, 1, "invoke", "acquire", ""),
                    (13, 1, "info", "acquire", r#""error":"timeout""#),
                ]),
            ),
            (
                "a crash marked while closing a later session ends an earlier closed one",
                lines(&[
                    (0, 1, "invoke", "acquire", ""),
                    (1, 1, "ok", "acquire", session),
                    (2, 2, "invoke", "acquire", ""),
                    (3, 2, "ok", "acquire", r#""token":2,"hold":"session""#),
                    (5, 2, "invoke", "renew", r#""token":1"#),
                    (6, 2, "info", "renew", r#""error":"timeout""#),
                    (7, 1, "invoke", "release", r#""token":1"#),
                    (8, 1, "ok", "release", r#""token":1"#),
                    (10, 3, "invoke", "acquire", ""),
                    (11, 3, "fail", "acquire", r#""error":"held""#),
                    (12, 4, "invoke", "acquire", ""),
                    (13, 4, "fail", "acquire", r#""error":"held""#),
                ]),
            ),
        ]
    }

    /// Histories in which an op names a grant a reader that closes at once has dropped, and
    /// whose name it pruned (`names.rs`): each way a name is kept of a dropped grant.
    fn forgetting_corners() -> Vec<(&'static str, History)> {
        let ttl = r#""ttl_ms":100"#;
        // Grant 0, released; then grant 1, released too, which takes grant 0's place in the
        // token walk; the walk then passes both, and grant 0 is dropped.
        let first = [
            (0, 1, "invoke", "acquire", ttl),
            (1, 1, "ok", "acquire", r#""token":1,"ttl_ms":100"#),
            (2, 1, "invoke", "release", r#""token":1"#),
            (3, 1, "ok", "release", r#""token":1"#),
            (10, 3, "invoke", "acquire", ttl),
            (11, 3, "ok", "acquire", r#""token":5,"ttl_ms":100"#),
            (12, 3, "invoke", "release", r#""token":5"#),
            (13, 3, "ok", "release", r#""token":5"#),
            (15, 4, "invoke", "acquire", ttl),
            (16, 4, "fail", "acquire", r#""error":"held""#),
        ];
        let then = |rest: &[(u64, u64, &'static str, &'static str, &'static str)]| {
            lines(&[&first[..], rest].concat())
        };
        vec![
            (
                "a write with the token of a dropped grant",
                then(&[
                    (20, 1, "invoke", "write", r#""token":1,"value":5"#),
                    (21, 1, "ok", "write", r#""token":1,"value":5"#),
                ]),
            ),
            (
                "a token reused after its first grant was dropped, renewed by its first holder",
                then(&[
                    (20, 2, "invoke", "acquire", ttl),
                    (21, 2, "ok", "acquire", r#""token":1,"ttl_ms":100"#),
                    (22, 1, "invoke", "renew", r#""token":1,"ttl_ms":100"#),
                    (23, 1, "fail", "renew", r#""error":"not-holder""#),
                ]),
            ),
            (
                "a token no grant carries, after a grant without a token was dropped",
                lines(&[
                    (0, 1, "invoke", "acquire", ttl),
                    (1, 1, "ok", "acquire", ttl),
                    (2, 1, "invoke", "release", ""),
                    (3, 1, "ok", "release", ""),
                    (10, 3, "invoke", "acquire", ttl),
                    (11, 3, "ok", "acquire", r#""token":5,"ttl_ms":100"#),
                    (20, 2, "invoke", "renew", r#""token":9,"ttl_ms":100"#),
                    (21, 2, "fail", "renew", r#""error":"not-holder""#),
                ]),
            ),
            (
                "a release without a name after its grant was dropped",
                lines(&[
                    (0, 1, "invoke", "acquire", ttl),
                    (1, 1, "ok", "acquire", ttl),
                    (300, 3, "invoke", "acquire", ttl),
                    (301, 3, "ok", "acquire", r#""token":5,"ttl_ms":100"#),
                    (400, 2, "invoke", "acquire", ttl),
                    (401, 2, "fail", "acquire", r#""error":"held""#),
                    (410, 1, "invoke", "release", ""),
                    (411, 1, "fail", "release", r#""error":"not-holder""#),
                ]),
            ),
            (
                "a grant id reused after its first grant was dropped, renewed by its first holder",
                lines(&[
                    (0, 1, "invoke", "acquire", ttl),
                    (1, 1, "ok", "acquire", r#""grant":"a","ttl_ms":100"#),
                    (2, 1, "invoke", "release", r#""grant":"a""#),
                    (3, 1, "ok", "release", r#""grant":"a""#),
                    (10, 3, "invoke", "acquire", ttl),
                    (11, 3, "ok", "acquire", r#""grant":"b","ttl_ms":100"#),
                    (20, 2, "invoke", "acquire", ttl),
                    (21, 2, "ok", "acquire", r#""grant":"a","ttl_ms":100"#),
                    (22, 1, "invoke", "renew", r#""grant":"a","ttl_ms":100"#),
                    (23, 1, "fail", "renew", r#""error":"not-holder""#),
                ]),
            ),
        ]
    }

    /// Histories where a forced-order violation rests on a chain the reader judged in two
    /// steps. Grant u (no token) pushes t (token 5, asked for at 20 and answered at 1800, its
    /// lease let lapse) to 1000; k (token 6) was asked for at 1500 while t was pending,
    /// returned at 1900 and held until 2300, so t came first and k took effect no earlier than
    /// t's span end, 2000: after k returned. Only u's lack of a token makes the chain forced
    /// order's. A grant x asked for at `x_ms` and open until 4600 keeps the walk's watermark
    /// before k's end: t is judged before k is. With x asked for after t returned, t leaves the
    /// reader before k is judged and its push is what it left behind; with x asked for before,
    /// t stays, judged, its instant and chain held.
    fn forced_corners() -> Vec<(&'static str, History)> {
        let ttl = r#""ttl_ms":1000"#;
        let chain = |x_ms: u64| {
            let mut events = vec![
                (0, 1, "invoke", "acquire", ttl),
                (10, 1, "ok", "acquire", ttl),
                (20, 2, "invoke", "acquire", ttl),
                (1500, 3, "invoke", "acquire", ttl),
                (1800, 2, "ok", "acquire", r#""token":5,"ttl_ms":1000"#),
                (1900, 3, "ok", "acquire", r#""token":6,"ttl_ms":1000"#),
                (2300, 3, "invoke", "release", r#""token":6"#),
                (2301, 3, "ok", "release", r#""token":6"#),
                (2600, 4, "ok", "acquire", r#""token":7,"ttl_ms":1000"#),
                (4100, 5, "invoke", "acquire", ttl),
                (4101, 5, "fail", "acquire", r#""error":"held""#),
                (4700, 6, "invoke", "acquire", ttl),
                (4701, 6, "fail", "acquire", r#""error":"held""#),
                (4800, 5, "invoke", "acquire", ttl),
                (4801, 5, "fail", "acquire", r#""error":"held""#),
            ];
            let at = events.partition_point(|e| e.0 < x_ms);
            events.insert(at, (x_ms, 4, "invoke", "acquire", ttl));
            lines(&events)
        };
        vec![
            (
                "a forced push left behind by a grant the reader let go",
                chain(2100),
            ),
            ("a forced push from a grant judged and kept", chain(1700)),
        ]
    }

    /// Histories in which the fencing-tokens reading must wait, or keep a grant, for what it
    /// finds, each with the fencing-tokens violations the batch finds in it.
    fn fencing_corners() -> Vec<(&'static str, History, usize)> {
        let acquired = |tok: u64, ttl_ms: u64| format!(r#""token":{tok},"ttl_ms":{ttl_ms}"#);
        // (process, invoke, answer, token, ttl, release invoked): an acquire and its release
        // (none at 0: the lease runs out).
        let held = |specs: &[(u64, u64, u64, u64, u64, u64)], then: &[u64]| {
            let mut owned: Vec<(u64, u64, &str, &str, String)> = Vec::new();
            for &(p, at, ok, tok, ttl_ms, release) in specs {
                let ttl = format!(r#""ttl_ms":{ttl_ms}"#);
                owned.push((at, p, "invoke", "acquire", ttl));
                owned.push((ok, p, "ok", "acquire", acquired(tok, ttl_ms)));
                if release > 0 {
                    let tok = format!(r#""token":{tok}"#);
                    owned.push((release, p, "invoke", "release", tok.clone()));
                    owned.push((release + 1, p, "ok", "release", tok));
                }
            }
            // Refused acquires move the walk on.
            for &at in then {
                owned.push((at, 9, "invoke", "acquire", r#""ttl_ms":1000"#.to_string()));
                owned.push((
                    at + 1,
                    9,
                    "fail",
                    "acquire",
                    r#""error":"held""#.to_string(),
                ));
            }
            owned.sort_by_key(|e| e.0);
            let events: Vec<(u64, u64, &str, &str, &str)> = (owned.iter())
                .map(|(t, p, k, f, v)| (*t, *p, *k, *f, v.as_str()))
                .collect();
            lines(&events)
        };
        vec![
            (
                "a regression over a grant still open when the later one closes",
                held(
                    &[(1, 0, 10, 10, 10_000, 5000), (2, 100, 110, 5, 1000, 200)],
                    &[300, 400],
                ),
                1,
            ),
            (
                "the first grant of a token closes after a later one",
                held(
                    &[(1, 0, 10, 7, 10_000, 5000), (2, 100, 110, 7, 1000, 200)],
                    &[300, 400],
                ),
                1,
            ),
            (
                "a reuse whose first grant answered after the later one's forced instant",
                held(
                    &[(2, 0, 500, 7, 100, 0), (1, 200, 300, 7, 10_000, 5000)],
                    &[800, 900],
                ),
                1,
            ),
            (
                "a grant judged waits for one invoked before it and still waiting",
                held(
                    &[
                        (1, 0, 500, 9, 1000, 600),
                        (2, 1000, 1050, 5, 10_000, 3000),
                        (3, 1010, 1100, 10, 1000, 1150),
                        (4, 1200, 1250, 11, 20_000, 10_000),
                    ],
                    &[3100, 3200],
                ),
                1,
            ),
            (
                "two grants of one token above a later grant's",
                held(
                    &[
                        (1, 0, 10, 9, 1000, 100),
                        (2, 200, 210, 9, 1000, 1000),
                        (3, 400, 410, 5, 1000, 500),
                    ],
                    &[1100, 1200],
                ),
                2,
            ),
        ]
    }

    /// Refused acquires of process 9 on L0 from `from_ms`, every 20 ms for 200 ms: they move
    /// the walk on.
    fn refused(
        events: &mut Vec<(u64, u64, &'static str, &'static str, &'static str)>,
        from_ms: u64,
    ) {
        for at in (from_ms..from_ms + 200).step_by(20) {
            events.push((at, 9, "invoke", "acquire", r#""ttl_ms":1000"#));
            events.push((at + 1, 9, "fail", "acquire", r#""error":"held""#));
        }
    }

    /// Histories of renews and releases that name no grant, each with the stale-lock-ops
    /// violations the batch finds in it.
    fn orphan_corners() -> Vec<(&'static str, History, usize)> {
        let ttl = r#""ttl_ms":1000"#;
        // A release by token 3, which no grant carries, after token 5 was granted: stale by
        // token, and naming no lease unless an acquire whose answer was lost could be it.
        let orphan = |lost: &[(u64, u64, u64)], pending: bool| {
            let mut events = vec![
                (0, 1, "invoke", "acquire", ttl),
                (1, 1, "ok", "acquire", r#""token":5,"ttl_ms":1000"#),
                (6, 6, "invoke", "release", r#""token":3"#),
                (8, 6, "ok", "release", r#""token":3"#),
            ];
            // (process, invoke, answer) of acquires whose answer was lost.
            for &(p, at, answer) in lost {
                events.push((at, p, "invoke", "acquire", ttl));
                events.push((answer, p, "info", "acquire", r#""error":"timeout""#));
            }
            if pending {
                events.push((5, 7, "invoke", "acquire", ttl));
            }
            refused(&mut events, 100);
            events.sort_by_key(|e| e.0);
            lines(&events)
        };
        // A release by a grant id no grant carries, after an acquire whose answer was lost.
        let mut by_id = vec![
            (0, 4, "invoke", "acquire", ttl),
            (6, 6, "invoke", "release", r#""grant":"nobody""#),
            (8, 6, "ok", "release", r#""grant":"nobody""#),
            (50, 4, "info", "acquire", r#""error":"timeout""#),
        ];
        refused(&mut by_id, 100);
        vec![
            ("a release by a token no grant carries", orphan(&[], false), 2),
            (
                "the same, an acquire whose answer was lost invoked before it, answered after another",
                orphan(&[(4, 10, 50), (5, 5, 60)], false),
                1,
            ),
            (
                "the same, an acquire never answered invoked before it",
                orphan(&[], true),
                1,
            ),
            (
                "a release by a grant id no grant carries, an answer lost before it",
                lines(&by_id),
                0,
            ),
        ]
    }

    /// Histories in which the stale-lock-ops reading must keep a grant, or name the first of
    /// two, each with the stale-lock-ops violations the batch finds in it.
    /// One line of [`lines`] with its value owned.
    type OwnedLine = (u64, u64, &'static str, &'static str, String);

    /// A history from whole lines, `(time_ms, process, type, f, rest)`: `rest` follows the
    /// `f` field (a lock, a value); process `0` is the nemesis.
    fn raw(events: &[(u64, u64, &str, &str, &str)]) -> History {
        let ops = (events.iter().enumerate())
            .map(|(i, &(ms, p, kind, f, rest))| {
                let process = match p {
                    0 => r#""nemesis""#.to_string(),
                    p => p.to_string(),
                };
                let line = format!(
                    r#"{{"index":{i},"time_ns":{},"process":{process},"type":"{kind}","f":"{f}"{rest}}}"#,
                    ms * 1_000_000
                );
                serde_json::from_str::<Op>(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
            })
            .collect();
        History::new(ops).expect("a well-formed history")
    }

    /// Histories of `lock-stuck`'s corners, each with the stretches the streamed reading must
    /// find as the batch does.
    fn stuck_corners() -> Vec<(&'static str, History, usize)> {
        let ask = r#","lock":"L0","value":{"ttl_ms":1000}"#;
        let granted = r#","lock":"L0","value":{"token":1,"ttl_ms":1000}"#;
        let held = r#","lock":"L0","value":{"error":"held"}"#;
        let lost = r#","lock":"L0","value":{"error":"timeout"}"#;
        vec![
            (
                // p2 is refused long after p1's lost answer, by the policy read then; p3's grant
                // then shows the service gives 1000 s for 1000 ms asked: p1's lease may have
                // lasted, p2's refusal is fine. p4's, past p3's lease, is stuck.
                "the ttl policy grows after a refusal stuck so far",
                raw(&[
                    (0, 1, "invoke", "acquire", ask),
                    (1, 1, "info", "acquire", lost),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                    (200_000, 3, "invoke", "acquire", ask),
                    (
                        200_001,
                        3,
                        "ok",
                        "acquire",
                        r#","lock":"L0","value":{"token":2,"ttl_ms":1000000}"#,
                    ),
                    (1_500_000, 4, "invoke", "acquire", ask),
                    (1_500_001, 4, "fail", "acquire", held),
                ]),
                1,
            ),
            (
                // A partition that ended at 20 s held p1's lease back at most until then.
                "a refusal stuck since a fault ended",
                raw(&[
                    (0, 1, "invoke", "acquire", ask),
                    (1, 1, "ok", "acquire", granted),
                    (
                        10_000,
                        0,
                        "info",
                        "start-partition",
                        r#","value":{"nodes":["n1"]}"#,
                    ),
                    (
                        20_000,
                        0,
                        "info",
                        "stop-partition",
                        r#","value":{"nodes":["n1"]}"#,
                    ),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                ]),
                1,
            ),
            (
                // Two refusals stuck since p1's lease: one stretch; one since p3's: another.
                "two stretches",
                raw(&[
                    (0, 1, "invoke", "acquire", ask),
                    (1, 1, "ok", "acquire", granted),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                    (101_000, 4, "invoke", "acquire", ask),
                    (101_001, 4, "fail", "acquire", held),
                    (150_000, 3, "invoke", "acquire", ask),
                    (
                        150_001,
                        3,
                        "ok",
                        "acquire",
                        r#","lock":"L0","value":{"token":2,"ttl_ms":1000}"#,
                    ),
                    (200_000, 2, "invoke", "acquire", ask),
                    (200_001, 2, "fail", "acquire", held),
                ]),
                2,
            ),
            (
                // p3 asks at the instant p2 is refused: its lease is not one p2's answer was
                // judged against, so p2 is stuck since p1's.
                "an acquire sent at the instant of a refusal",
                raw(&[
                    (0, 1, "invoke", "acquire", ask),
                    (1, 1, "ok", "acquire", granted),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                    (100_001, 3, "invoke", "acquire", ask),
                    (
                        100_002,
                        3,
                        "ok",
                        "acquire",
                        r#","lock":"L0","value":{"token":2,"ttl_ms":1000000}"#,
                    ),
                ]),
                1,
            ),
            (
                // The partition ended at the instant p1's grant was answered: both leases die
                // together, and the fault is named.
                "a grant answered as a fault ended",
                raw(&[
                    (
                        10_000,
                        0,
                        "info",
                        "start-partition",
                        r#","value":{"nodes":["n1"]}"#,
                    ),
                    (19_000, 1, "invoke", "acquire", ask),
                    (20_000, 1, "ok", "acquire", granted),
                    (
                        20_000,
                        0,
                        "info",
                        "stop-partition",
                        r#","value":{"nodes":["n1"]}"#,
                    ),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                ]),
                1,
            ),
            (
                // p1's grant says no ttl: what it holds is unknown, p2's refusal not judged.
                "a lease of unknown length",
                raw(&[
                    (0, 1, "invoke", "acquire", r#","lock":"L0","value":{}"#),
                    (1, 1, "ok", "acquire", r#","lock":"L0","value":{"token":1}"#),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                ]),
                0,
            ),
            (
                // p1's acquire never answered: it may take effect at the run's end, later than
                // p0's lost one.
                "a refusal after an acquire never answered",
                raw(&[
                    (0, 5, "invoke", "acquire", ask),
                    (1, 5, "info", "acquire", lost),
                    (2, 1, "invoke", "acquire", ask),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                    (200_000, 3, "invoke", "acquire", ask),
                    (200_001, 3, "fail", "acquire", held),
                ]),
                0,
            ),
            (
                // A fault still going when the refusal is judged ends after it.
                "a refusal while a fault goes on",
                raw(&[
                    (0, 1, "invoke", "acquire", ask),
                    (1, 1, "ok", "acquire", granted),
                    (
                        10_000,
                        0,
                        "info",
                        "start-partition",
                        r#","value":{"nodes":["n1"]}"#,
                    ),
                    (100_000, 2, "invoke", "acquire", ask),
                    (100_001, 2, "fail", "acquire", held),
                    (
                        300_000,
                        0,
                        "info",
                        "stop-partition",
                        r#","value":{"nodes":["n1"]}"#,
                    ),
                    (400_000, 3, "invoke", "acquire", ask),
                    (400_001, 3, "fail", "acquire", held),
                ]),
                1,
            ),
        ]
    }

    /// Histories of the store rules' corners, each with the `stale-write-accepted` and
    /// `lost-update` violations the streamed readings must find as the batch does, and the
    /// writes they must count out of order.
    fn store_corners() -> Vec<(&'static str, History, [usize; 2], u64)> {
        let w = |v: u64, tok: u64| format!(r#""value":{v},"token":{tok}"#);
        let ok = |v: u64, tok: u64, seq: u64| format!(r#""value":{v},"token":{tok},"seq":{seq}"#);
        let tr = |v: u64, seq: u64| format!(r#""value":{v},"token":1,"seq":{seq},"transfer":4"#);
        let fin = |v: u64| format!(r#""final":true,"value":{v}"#);
        /// (what, events, violations, out of order)
        type Corner = (&'static str, Vec<OwnedLine>, [usize; 2], u64);
        let owned: Vec<Corner> = vec![
            (
                // p1's write, sent first and accepted first, answers after p2's: p2's lower
                // token, accepted later, is stale however the answers came.
                "a stale write answered before the write it came after",
                vec![
                    (0, 1, "invoke", "write", w(1, 2)),
                    (1, 2, "invoke", "write", w(2, 1)),
                    (2, 2, "ok", "write", ok(2, 1, 2)),
                    (5, 1, "ok", "write", ok(1, 2, 1)),
                ],
                [1, 0],
                0,
            ),
            (
                // Two writes of one seq with the same token: the first is named.
                "equal tokens in one seq before a stale write",
                vec![
                    (0, 1, "invoke", "write", w(1, 5)),
                    (0, 2, "invoke", "write", w(2, 5)),
                    (1, 2, "ok", "write", ok(2, 5, 1)),
                    (1, 1, "ok", "write", ok(1, 5, 1)),
                    (2, 3, "invoke", "write", w(3, 4)),
                    (3, 3, "ok", "write", ok(3, 4, 2)),
                    (4, 3, "invoke", "write", w(4, 6)),
                    (5, 3, "ok", "write", ok(4, 6, 3)),
                    (6, 1, "invoke", "write", w(5, 5)),
                    (7, 1, "ok", "write", ok(5, 5, 4)),
                ],
                [2, 0],
                0,
            ),
            (
                // The store's seq goes against real time: p2's write, sent after p1's was
                // answered, was given the lower seq. Counted, and not read as the batch reads.
                "a store whose seq contradicts real time",
                vec![
                    (0, 1, "invoke", "write", w(1, 5)),
                    (1, 1, "ok", "write", ok(1, 5, 2)),
                    (10, 2, "invoke", "write", w(2, 9)),
                    (11, 2, "ok", "write", ok(2, 9, 1)),
                    (20, 3, "invoke", "write", w(3, 9)),
                    (21, 3, "ok", "write", ok(3, 9, 1)),
                ],
                [0, 0],
                2,
            ),
            (
                // The second write of value 1 to be sent is the first answered: it is the
                // first of its value.
                "a lost update answered out of order",
                vec![
                    (0, 1, "invoke", "write", w(1, 1)),
                    (1, 2, "invoke", "write", w(1, 2)),
                    (2, 2, "ok", "write", ok(1, 2, 1)),
                    (5, 1, "ok", "write", ok(1, 1, 2)),
                ],
                [1, 1],
                0,
            ),
            (
                // Two writes acknowledged before the final read was sent, one answered after:
                // the read must show two; an indeterminate write sent before it widens it.
                "a final read short of the writes acknowledged before it",
                vec![
                    (0, 1, "invoke", "write", w(1, 1)),
                    (1, 1, "ok", "write", ok(1, 1, 1)),
                    (2, 1, "invoke", "write", w(2, 2)),
                    (3, 1, "ok", "write", ok(2, 2, 2)),
                    (4, 2, "invoke", "write", w(3, 3)),
                    (5, 2, "info", "write", w(3, 3)),
                    (6, 1, "invoke", "write", w(4, 4)),
                    (7, 3, "invoke", "read", r#""final":true"#.to_string()),
                    (8, 1, "ok", "write", ok(4, 4, 3)),
                    (9, 3, "ok", "read", fin(1)),
                    (10, 4, "invoke", "read", r#""final":true"#.to_string()),
                    (11, 4, "ok", "read", fin(3)),
                ],
                [0, 1],
                0,
            ),
            (
                // p1's write, sent first, was accepted second: walked first, it leaves the
                // frontier when p2's enters below it with a higher token, and p3's is judged
                // against p2's.
                "a stale write walked before the write it came after",
                vec![
                    (0, 1, "invoke", "write", w(1, 3)),
                    (1, 2, "invoke", "write", w(2, 9)),
                    (2, 1, "ok", "write", ok(1, 3, 2)),
                    (3, 2, "ok", "write", ok(2, 9, 1)),
                    (4, 3, "invoke", "write", w(3, 5)),
                    (5, 3, "ok", "write", ok(3, 5, 3)),
                ],
                [2, 0],
                0,
            ),
            (
                // p3's write, sent after p2's was judged, was given p2's seq: judged against
                // what is below that seq, which the frontier kept.
                "a seq given again after it was judged",
                vec![
                    (0, 1, "invoke", "write", w(1, 5)),
                    (1, 1, "ok", "write", ok(1, 5, 1)),
                    (2, 2, "invoke", "write", w(2, 7)),
                    (3, 2, "ok", "write", ok(2, 7, 2)),
                    (10, 3, "invoke", "write", w(3, 4)),
                    (11, 3, "ok", "write", ok(3, 4, 2)),
                ],
                [1, 0],
                0,
            ),
            (
                // Two writes the store gave one seq, the lower token second: not one after the
                // other in its order, so neither is stale.
                "two tokens in one seq",
                vec![
                    (0, 1, "invoke", "write", w(1, 5)),
                    (1, 1, "ok", "write", ok(1, 5, 1)),
                    (2, 2, "invoke", "write", w(2, 3)),
                    (3, 2, "ok", "write", ok(2, 3, 1)),
                ],
                [0, 0],
                0,
            ),
            (
                // p2's write, sent at the instant p1's answered, was accepted before it: p1's
                // waits for it, and is stale.
                "a write accepted at the instant another answered",
                vec![
                    (0, 1, "invoke", "write", w(1, 3)),
                    (5, 1, "ok", "write", ok(1, 3, 2)),
                    (5, 2, "invoke", "write", w(2, 9)),
                    (6, 2, "ok", "write", ok(2, 9, 1)),
                ],
                [1, 0],
                0,
            ),
            (
                // A write answered at the instant the final read was sent need not show in it.
                "a write answered as the final read was sent",
                vec![
                    (0, 1, "invoke", "write", w(1, 1)),
                    (1, 1, "ok", "write", ok(1, 1, 1)),
                    (2, 1, "invoke", "write", w(2, 2)),
                    (5, 1, "ok", "write", ok(2, 2, 2)),
                    (5, 2, "invoke", "read", r#""final":true"#.to_string()),
                    (6, 2, "ok", "read", fin(1)),
                ],
                [0, 0],
                0,
            ),
            (
                // Counter writes of one value, then a transfer touches the key: an account
                // from there on, so only the two before it pair.
                "a counter that becomes an account",
                vec![
                    (0, 1, "invoke", "write", w(1, 1)),
                    (1, 1, "ok", "write", ok(1, 1, 1)),
                    (2, 2, "invoke", "write", w(1, 2)),
                    (3, 2, "ok", "write", ok(1, 2, 2)),
                    (
                        4,
                        3,
                        "invoke",
                        "write",
                        r#""value":1,"token":3,"transfer":4"#.to_string(),
                    ),
                    (5, 3, "ok", "write", tr(1, 3)),
                    (6, 1, "invoke", "write", w(1, 4)),
                    (7, 1, "ok", "write", ok(1, 4, 4)),
                    (8, 4, "invoke", "read", r#""final":true"#.to_string()),
                    (9, 4, "ok", "read", fin(0)),
                ],
                [0, 1],
                0,
            ),
        ];
        owned
            .into_iter()
            .map(|(what, events, found, out_of_order)| {
                let events: Vec<(u64, u64, &str, &str, &str)> = (events.iter())
                    .map(|(t, p, kind, f, v)| (*t, *p, *kind, *f, v.as_str()))
                    .collect();
                (what, lines(&events), found, out_of_order)
            })
            .collect()
    }

    fn stale_corners() -> Vec<(&'static str, History, usize)> {
        let ttl = r#""ttl_ms":1000"#;
        // p1's renew names token 7 before the acquire that returns it was asked for; the
        // higher token 9 completed before that renew, the still higher 10 after it.
        let mut ahead = vec![
            (0, 4, "invoke", "acquire", ttl),
            (2, 4, "ok", "acquire", r#""token":9,"ttl_ms":1000"#),
            (3, 4, "invoke", "release", r#""token":9"#),
            (3, 4, "ok", "release", r#""token":9"#),
            (4, 3, "invoke", "acquire", ttl),
            (5, 1, "invoke", "renew", r#""token":7,"ttl_ms":1000"#),
            (6, 3, "ok", "acquire", r#""token":10,"ttl_ms":1000"#),
            (7, 3, "invoke", "release", r#""token":10"#),
            (7, 3, "ok", "release", r#""token":10"#),
            (8, 2, "invoke", "acquire", ttl),
            (9, 2, "ok", "acquire", r#""token":7,"ttl_ms":1000"#),
            (20, 1, "ok", "renew", r#""token":7,"ttl_ms":1000"#),
        ];
        refused(&mut ahead, 30);
        ahead.extend([
            (300, 2, "invoke", "release", r#""token":7"#),
            (301, 2, "ok", "release", r#""token":7"#),
        ]);
        // Two grants with token 9 leave before a release with token 7.
        let mut twice = vec![
            (0, 4, "invoke", "acquire", ttl),
            (2, 4, "ok", "acquire", r#""token":9,"ttl_ms":1000"#),
            (3, 4, "invoke", "release", r#""token":9"#),
            (3, 4, "ok", "release", r#""token":9"#),
            (4, 5, "invoke", "acquire", ttl),
            (5, 5, "ok", "acquire", r#""token":9,"ttl_ms":1000"#),
            (6, 5, "invoke", "release", r#""token":9"#),
            (6, 5, "ok", "release", r#""token":9"#),
            (10, 2, "invoke", "acquire", ttl),
            (11, 2, "ok", "acquire", r#""token":7,"ttl_ms":1000"#),
        ];
        refused(&mut twice, 20);
        twice.extend([
            (300, 2, "invoke", "release", r#""token":7"#),
            (301, 2, "ok", "release", r#""token":7"#),
        ]);
        // Two grants asked for at one instant, after p1's returned, both returned before p1
        // renewed it.
        let mut replaced = vec![
            (0, 1, "invoke", "acquire", ttl),
            (1, 1, "ok", "acquire", ttl),
            (2, 2, "invoke", "acquire", ttl),
            (2, 3, "invoke", "acquire", ttl),
            (3, 2, "ok", "acquire", ttl),
            (4, 3, "ok", "acquire", ttl),
            (5, 1, "invoke", "renew", ttl),
            (6, 1, "ok", "renew", ttl),
        ];
        refused(&mut replaced, 20);
        let mut corners = orphan_corners();
        corners.extend(vec![
            (
                "a renew named ahead of its grant, a higher token left behind before it",
                lines(&ahead),
                2,
            ),
            (
                "two grants of one token left before a stale release",
                lines(&twice),
                1,
            ),
            (
                "two grants asked at one instant replace a grant",
                lines(&replaced),
                1,
            ),
        ]);
        corners
    }

    /// A history in which a prune comes between a crash and the grants of the crashed process
    /// it must keep the crash for.
    fn pruning_corners() -> Vec<(&'static str, History)> {
        let ttl = r#""ttl_ms":100"#;
        vec![(
            "a session holder crashes while an earlier grant is open, then dropped",
            lines(&[
                (0, 2, "invoke", "acquire", ttl),
                (1, 2, "ok", "acquire", r#""token":1,"ttl_ms":100"#),
                (2, 1, "invoke", "acquire", ""),
                (3, 1, "ok", "acquire", r#""token":2,"hold":"session""#),
                // Another process's renew, answered late, keeps the session open past A.
                (4, 4, "invoke", "renew", r#""token":2"#),
                (6, 1, "invoke", "write", r#""token":2,"value":1"#),
                (7, 1, "info", "write", r#""error":"timeout""#),
                (300, 3, "invoke", "acquire", ttl),
                (301, 3, "fail", "acquire", r#""error":"held""#),
                (350, 4, "ok", "renew", r#""token":2"#),
                // Time moves on: the walk reaches 300 ms and closes A, not the session.
                (400, 5, "invoke", "acquire", ttl),
                (401, 5, "fail", "acquire", r#""error":"held""#),
            ]),
        )]
    }

    /// A grant asked for after another was closed and walked in token order, with a lower
    /// token: the streamed token walk counts it out of order rather than walk it out of place.
    #[test]
    fn a_token_regression_past_the_token_walk_is_counted_out_of_order() {
        let ttl = r#""ttl_ms":100"#;
        let h = lines(&[
            (0, 1, "invoke", "acquire", ttl),
            (1, 1, "ok", "acquire", r#""token":3,"ttl_ms":100"#),
            (2, 1, "invoke", "release", r#""token":3"#),
            (3, 1, "ok", "release", r#""token":3"#),
            // The walk passes the release: the grant of token 3 is closed and walked.
            (5, 4, "invoke", "acquire", ttl),
            (6, 4, "fail", "acquire", r#""error":"held""#),
            (10, 2, "invoke", "acquire", ttl),
            (11, 2, "ok", "acquire", r#""token":2,"ttl_ms":100"#),
            (12, 2, "invoke", "release", r#""token":2"#),
            (13, 2, "ok", "release", r#""token":2"#),
            (20, 3, "invoke", "acquire", ttl),
            (21, 3, "fail", "acquire", r#""error":"held""#),
        ]);
        let mut read = Digest::new(0, Drift::from_ppm(0));
        read.walk.horizon_ns = 0;
        read.stream = Some(Streamed::default());
        let mut read = Digest::of_history_in(&h, 1, read);
        read.finish_walk();
        assert_eq!(read.stream.expect("set above").out_of_order(), 1);
    }

    /// The model search on a thread of its own (a whole file's check) proves what it proves
    /// on the reader's, in the same order, keeps as many ops, and gives every lock the same
    /// verdict, over the corpus (injected violations among it); and what it proved reaches
    /// `found` while the history is still being read, not only when the thread is joined.
    #[test]
    fn the_search_on_its_own_thread_is_the_search_on_the_readers() {
        // `early`: wait (boundedly) for what the thread proved before the end, where the
        // reader's own search proved something before it.
        let run = |h: &History, threaded: bool, early: Option<&mut usize>| {
            let mut read = Digest::streaming(Drift::from_ppm(0), 0);
            let stream = read.stream.as_mut().expect("streaming");
            if threaded {
                stream.search.on_a_thread();
            }
            let mut read = Digest::of_history_in(h, 64, read);
            if threaded {
                // The thread started with what was handed over so far: what it proves of the
                // rest comes back as it is joined.
                read.stream.as_mut().expect("streaming").search.send();
            }
            if let Some(early) = early {
                let search = &mut read.stream.as_mut().expect("streaming").search;
                // What the thread proved of the ops handed over, asked for before the end.
                let wait = std::time::Instant::now();
                // Bounded: two seconds for a few thousand ops.
                while search.found.is_empty() && wait.elapsed().as_secs() < 2 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    search.take_found();
                }
                *early += usize::from(!search.found.is_empty());
            }
            read.finish_walk();
            let locks = read.locks.len();
            let search = &mut read.stream.as_mut().expect("streaming").search;
            let found: Vec<String> = (search.found.iter())
                .map(|(l, v)| format!("{l} {:?} {:?}: {}", v.kind, v.ops, v.explanation))
                .collect();
            let verdicts: Vec<String> = (search.finish(locks).iter())
                .map(|(_, s)| searched_words(s).1)
                .collect();
            (found, search.kept_most(), verdicts)
        };
        // Two grants of the lock at once, neither ever released: their ops are handed to the
        // search only at the end, and what it proves comes back from the thread as it is
        // joined.
        let held = r#""token":1,"ttl_ms":100000"#;
        let both = lines(&[
            (10, 1, "invoke", "acquire", r#""ttl_ms":100000"#),
            (11, 1, "ok", "acquire", held),
            (20, 2, "invoke", "acquire", r#""ttl_ms":100000"#),
            (21, 2, "ok", "acquire", &held.replace('1', "2")),
            (30, 3, "invoke", "write", r#""value":1"#),
        ]);
        let at_the_end = run(&both, true, None);
        assert_eq!(at_the_end.0.len(), 1, "{at_the_end:?}");
        assert_eq!(at_the_end, run(&both, false, None));
        let (mut proven, mut early, mut kept) = (0, 0, 0);
        for (what, h) in corpus() {
            let here = run(&h, false, None);
            // Proven before the end on this thread: the ops read before it reach `found`.
            let proven_early = {
                let mut read = Digest::streaming(Drift::from_ppm(0), 0);
                read = Digest::of_history_in(&h, 64, read);
                !read
                    .stream
                    .as_ref()
                    .expect("streaming")
                    .search
                    .found
                    .is_empty()
            };
            let beside = run(&h, true, proven_early.then_some(&mut early));
            assert_eq!(here, beside, "{what}");
            proven += usize::from(!here.0.is_empty());
            kept += here.1;
        }
        assert!(kept > 0, "no op kept by any search");
        assert!(
            proven > 20,
            "only {proven} histories with a search violation"
        );
        assert!(early > 0, "no violation reached `found` before the end");
    }

    /// An op pending forever holds the walk; a reader that drops ops stops waiting for it past
    /// its limit and takes it as pending, as the end of the history does: the same grants, and
    /// nothing late. An answer that comes after is counted late.
    /// An acquire pending forever keeps its slot in the lock's search, and with it every op
    /// of the lock after it: past its limit of ops kept the streamed search of the lock stops,
    /// saying why (the batch, which keeps them all, finds the lock possible); under the limit
    /// it decides as the batch does, keeping few ops when nothing is pending.
    #[test]
    fn the_streamed_search_stops_past_its_limit_of_ops_kept() {
        let ttl = r#""ttl_ms":100"#;
        let history = |pending: bool| {
            let mut events = Vec::new();
            if pending {
                events.push((1, 9, "invoke", "acquire", ttl));
            }
            for i in 0..60u64 {
                let t = 10 + 10 * i;
                events.extend([
                    (t, 1, "invoke", "acquire", ttl),
                    (t + 1, 1, "ok", "acquire", ttl),
                    (t + 2, 1, "invoke", "release", ""),
                    (t + 3, 1, "ok", "release", ""),
                ]);
            }
            lines(&events)
        };
        let streamed = |h: &History, kept_max: usize| {
            let mut read = Digest::new(0, Drift::from_ppm(0));
            read.unwalked_limit = 8;
            read.walk.horizon_ns = 0;
            let mut stream = Streamed::default();
            stream.search.kept_max = Some(kept_max);
            read.stream = Some(stream);
            read.evict = true;
            let mut read = Digest::of_history_in(h, 1, read);
            read.finish_walk();
            let locks = read.locks.len();
            let stream = read.stream.as_mut().expect("set above");
            let out = stream.search.finish(locks);
            let words: Vec<String> = out.iter().map(|(_, s)| searched_words(s).1).collect();
            (words, stream.search.kept_most())
        };
        let batch = |h: &History| {
            let m = Model::new(h, &CheckConfig::default());
            let out = crate::search::search_all(&m);
            out.iter()
                .map(|(_, s)| searched_words(s).1)
                .collect::<Vec<_>>()
        };
        let pending = history(true);
        assert_eq!(batch(&pending), ["possible"]);
        let (words, kept) = streamed(&pending, 32);
        assert_eq!(
            words,
            ["stopped: more than 32 of its ops kept at once behind op 0, still in flight"]
        );
        assert_eq!(kept, 33);
        let (words, kept) = streamed(&pending, 1000);
        assert_eq!(words, ["possible"]);
        assert!(kept > 100, "{kept} ops kept behind the pending acquire");
        let (words, kept) = streamed(&history(false), 32);
        assert_eq!(words, ["possible"]);
        assert!(kept <= 4, "{kept} ops kept with nothing pending");
        // Processes that come and go (a client replaced after each lost answer) are not
        // remembered for the whole history.
        let mut events = Vec::new();
        for p in 0..3000u64 {
            let t = 10 * p;
            events.extend([
                (t, p, "invoke", "acquire", ttl),
                (t + 1, p, "ok", "acquire", ttl),
                (t + 2, p, "invoke", "release", ""),
                (t + 3, p, "info", "release", r#""error":"timeout""#),
            ]);
        }
        let mut read = Digest::streaming(Drift::from_ppm(0), 0);
        read = Digest::of_history_in(&lines(&events), 64, read);
        let kept = read
            .stream
            .as_ref()
            .expect("streaming")
            .search
            .processes_kept();
        assert!(kept < 200, "{kept} processes remembered of 3000");
        // A service that gives every grant its own id: the ids remembered stay at the limit.
        let mut events = Vec::new();
        let ids: Vec<String> = (0..300)
            .map(|i| format!(r#""ttl_ms":100,"grant":"g{i}""#))
            .collect();
        for (i, id) in ids.iter().enumerate() {
            let t = 10 * i as u64;
            events.extend([
                (t, 1, "invoke", "acquire", ttl),
                (t + 1, 1, "ok", "acquire", id.as_str()),
                (t + 2, 1, "invoke", "release", id.as_str()),
                (t + 3, 1, "ok", "release", ""),
            ]);
        }
        let h = lines(&events);
        let mut read = Digest::streaming(Drift::from_ppm(0), 0);
        read.stream.as_mut().expect("streaming").search.ids_max = Some(50);
        read = Digest::of_history_in(&h, 64, read);
        read.finish_walk();
        let stream = read.stream.as_mut().expect("streaming");
        assert_eq!(stream.search.ids_kept(), 50);
        let words: Vec<String> = (stream.search.finish(1).iter())
            .map(|(_, s)| searched_words(s).1)
            .collect();
        assert_eq!(words, ["possible"]);
        assert_eq!(batch(&h), ["possible"]);
    }

    /// Bank runs: clients that hold one account's lock while they wait for the other's (the
    /// wait-for graph's edges), with a deadlock injected into some: the streamed sweep judges
    /// the batch's cycles in its words, closing grants at once or a second past their reach,
    /// and keeps a few acquires and holds, not the history.
    #[test]
    fn the_streamed_wait_for_sweep_is_the_batchs_on_bank_runs() {
        use crate::gen_bank::{bank_history_into, BankParams};
        let (mut waited, mut deadlocks) = (0, 0);
        let (mut waits_most, mut holds_most) = (0, 0);
        for seed in 0..12u64 {
            let (_, mut ops) = varied_bank_run(seed, 2_000);
            if seed % 3 == 0 {
                inject(&mut ops, InjectKind::named("deadlock"), seed);
            }
            let h = History::new(ops).expect("generated histories are well formed");
            for horizon_ns in [0, 1_000_000_000] {
                let what = format!("bank seed {seed}, horizon {horizon_ns}");
                let mut read = Digest::streaming(Drift::from_ppm(0), horizon_ns);
                read = Digest::of_history_in(&h, 1, read);
                read.finish_walk();
                let [_, found] = compare_deadlock(&h, &what, Drift::from_ppm(0), &read);
                let stream = &read.stream.as_ref().expect("streaming").deadlock;
                waited += stream.waited as usize;
                deadlocks += found;
                waits_most = waits_most.max(stream.waits_most);
                holds_most = holds_most.max(stream.holds_most);
                assert_eq!(stream.resolved_early, 0, "{what}: resolved at the limit");
            }
        }
        assert_eq!(
            waited, 24,
            "every bank run holds one lock while it waits for another"
        );
        assert_eq!(deadlocks, 8, "the injected deadlocks, at both horizons");
        eprintln!("at most {waits_most} acquires and {holds_most} holds kept");
        // What is kept follows how long a grant stays open (its reach and the horizon), not
        // the history: a run twenty times as long keeps about as much.
        let kept = |events: usize| {
            let params = BankParams {
                clients: 4,
                accounts: 3,
                events,
                ttl_ms: 300,
                partial_pct: 0,
            };
            let mut read = Digest::streaming(Drift::from_ppm(0), 1_000_000_000);
            bank_history_into(7, &params, &mut |chunk| {
                let mut piece = Piece::with_capacity(chunk.len());
                for op in chunk {
                    piece.push(&op.view());
                }
                read.feed(piece);
            });
            read.finish_walk();
            let stream = &read.stream.as_ref().expect("streaming").deadlock;
            assert!(stream.waited && stream.resolved_early == 0);
            (stream.waits_most, stream.holds_most)
        };
        let (short, long) = (kept(5_000), kept(100_000));
        eprintln!("kept at 5k events {short:?}, at 100k {long:?}");
        assert!(
            long.0 <= 2 * short.0 + 16 && long.1 <= 2 * short.1 + 16,
            "kept {short:?} of 5k events, {long:?} of 100k"
        );
        // The sweep keeps up with the acquires resolved, and forgets the holds it passed: a
        // few at once (a sweep held back by an acquire resolved and still counted as left
        // kept hundreds).
        assert!(
            short.1 <= 16 && long.1 <= 16,
            "holds kept {short:?} and {long:?}"
        );
    }

    /// Past its limit of acquires waiting, the streamed sweep resolves the earliest with the
    /// holds it knows: it may then miss a cycle, never make one up (each deadlock it finds is
    /// one the batch finds).
    /// The contention rounds counted as the streaming reader walks and closes grants are the
    /// batch's, on generated runs whose acquires are tagged with rounds of 50 ms and 400 ms
    /// (double grants injected into some), and a round is counted once it is done: what is
    /// kept open stays small.
    #[test]
    fn the_streamed_rounds_are_the_batchs() {
        let (mut contended, mut multi, mut open_most, mut compared) = (0, 0, 0, 0);
        for seed in 0..16u64 {
            let params = GenParams::varied(seed, 800);
            let mut ops = correct_history(seed, &params);
            if seed % 2 == 0 {
                inject(&mut ops, InjectKind::named("double-grant"), seed);
            }
            let period_ns = if seed % 4 < 2 {
                50_000_000
            } else {
                400_000_000
            };
            // Each acquire's completion says the round its invoke fell in.
            let mut invoked: FxMap<history::Process, u64> = FxMap::default();
            for op in &mut ops {
                if op.f != F::Acquire {
                    continue;
                }
                if op.kind == OpType::Invoke {
                    invoked.insert(op.process, op.time_ns);
                } else if let Some(&at) = invoked.get(&op.process) {
                    let round = history::WorkerEvidence {
                        round: Some(at / period_ns),
                        ..Default::default()
                    };
                    op.value = std::mem::take(&mut op.value).with_evidence(&round);
                }
            }
            let h = History::new(ops).expect("generated histories are well formed");
            let (m, _) = batch_model(&h, Drift::from_ppm(0));
            let want = crate::rounds::round_stats(&m);
            for horizon_ns in [0, 1_000_000_000] {
                let what = format!("seed {seed}, horizon {horizon_ns}");
                let mut read = Digest::streaming(Drift::from_ppm(0), horizon_ns);
                read = Digest::of_history_in(&h, 1, read);
                read.finish_walk();
                let w = &read.walk;
                let stale = w.state.iter().filter(|&&s| s == Close::Stale).count()
                    + w.late_grants.len()
                    + (w.uncertain + w.stale_dropped) as usize;
                if read.forced_count > 0 || stale > 0 {
                    continue;
                }
                let stream = read.stream.as_ref().expect("streaming");
                assert_eq!(read.round_figures().expect("streaming"), want, "{what}");
                open_most = open_most.max(stream.rounds.open_most);
                compared += 1;
            }
            let r = &want["rounds"];
            contended += r["contended"].as_u64().expect("counted");
            multi += r["more_than_one_holder"].as_u64().expect("counted");
        }
        eprintln!(
            "{compared} compared: {contended} contended rounds, {multi} with two holders, \
             {open_most} kept"
        );
        assert!(compared >= 16, "only {compared} runs compared");

        assert!(
            contended > 100 && multi > 0,
            "{contended} contended, {multi} doubled"
        );
        assert!(open_most < 64, "{open_most} rounds kept open at once");
    }

    #[test]
    fn the_streamed_wait_for_sweep_past_its_limit_finds_no_deadlock_the_batch_does_not() {
        use crate::gen_bank::{bank_history_into, BankParams};
        let mut early = 0;
        for seed in 0..6u64 {
            let params = BankParams {
                clients: 4,
                accounts: 2 + seed as usize % 2,
                events: 2_000,
                ttl_ms: 10_000,
                partial_pct: 0,
            };
            let mut ops = Vec::new();
            bank_history_into(seed, &params, &mut |chunk| ops.extend_from_slice(chunk));
            inject(&mut ops, InjectKind::named("deadlock"), seed);
            let h = History::new(ops).expect("generated histories are well formed");
            let m = Model::new(&h, &CheckConfig::default());
            let (batch, _) = crate::deadlock::batch_sweep(&m, m_grace());
            let mut read = Digest::streaming(Drift::from_ppm(0), 1_000_000_000);
            read.stream.as_mut().expect("streaming").deadlock.waits_max = 4;
            read = Digest::of_history_in(&h, 1, read);
            read.finish_walk();
            let stream = &read.stream.as_ref().expect("streaming").deadlock;
            early += stream.resolved_early;
            let names = read.names();
            for v in stream.output(&names).violations {
                assert!(
                    batch.violations.iter().any(|b| b.ops == v.ops),
                    "seed {seed}: {v:?} is not the batch's"
                );
            }
        }
        assert!(early > 100, "only {early} acquires resolved at the limit");
    }

    /// A generated bank run of `events` whose clients, accounts and ttl vary with `seed` (3 to 6
    /// clients, 2 to 4 accounts, leases of 10 s or 300 ms), with its parameters.
    fn varied_bank_run(seed: u64, events: usize) -> (crate::gen_bank::BankParams, Vec<Op>) {
        varied_partial_bank_run(seed, events, 0)
    }

    /// [`varied_bank_run`] with `partial_pct` of its transfers applied in part.
    fn varied_partial_bank_run(
        seed: u64,
        events: usize,
        partial_pct: u32,
    ) -> (crate::gen_bank::BankParams, Vec<Op>) {
        let params = crate::gen_bank::BankParams {
            clients: 3 + seed as usize % 4,
            accounts: 2 + seed as usize % 3,
            events,
            ttl_ms: if seed % 2 == 0 { 10_000 } else { 300 },
            partial_pct,
        };
        let mut ops = Vec::new();
        crate::gen_bank::bank_history_into(seed, &params, &mut |chunk| {
            ops.extend_from_slice(chunk)
        });
        (params, ops)
    }

    /// The liveness grace the checks default to.
    fn m_grace() -> u64 {
        CheckConfig::default().liveness_grace_ns
    }

    #[test]
    fn a_reader_stops_waiting_for_an_op_pending_past_its_limit() {
        let ttl = r#""ttl_ms":100"#;
        // Process 9's op never answers (or answers at the very end); process 1 takes and
        // gives back the lock twenty times meanwhile.
        let cycles =
            |first: Vec<(u64, u64, &'static str, &'static str, &'static str)>,
             last: Vec<(u64, u64, &'static str, &'static str, &'static str)>| {
                let mut events = first;
                for i in 0..20u64 {
                    let t = 10 + 10 * i;
                    events.extend([
                        (t, 1, "invoke", "acquire", ttl),
                        (t + 1, 1, "ok", "acquire", r#""ttl_ms":100"#),
                        (t + 2, 1, "invoke", "release", ""),
                        (t + 3, 1, "ok", "release", ""),
                    ]);
                }
                events.extend(last);
                lines(&events)
            };
        let renew = vec![
            (1, 9, "invoke", "acquire", ttl),
            (2, 9, "ok", "acquire", r#""token":1,"ttl_ms":100"#),
            (3, 9, "invoke", "renew", r#""token":1,"ttl_ms":100"#),
        ];
        let acquire = vec![(1, 9, "invoke", "acquire", ttl)];
        let cases = [
            (
                "a renew pending forever",
                cycles(renew.clone(), vec![]),
                false,
            ),
            (
                "an acquire pending forever",
                cycles(acquire.clone(), vec![]),
                false,
            ),
            (
                "a renew answered after the reader stopped waiting",
                cycles(
                    renew,
                    vec![(500, 9, "fail", "renew", r#""error":"timeout""#)],
                ),
                true,
            ),
            (
                "an acquire answered after the reader stopped waiting",
                cycles(
                    acquire,
                    vec![(500, 9, "fail", "acquire", r#""error":"held""#)],
                ),
                true,
            ),
        ];
        for (what, h, answered) in cases {
            let unlimited = same_walks_within(
                &h,
                what,
                (1_000_000_000, usize::MAX, usize::MAX),
                Drift::from_ppm(0),
                true,
            );
            assert!(
                unlimited.unwalked_max > 30,
                "{what}: the pending op held the walk"
            );
            let limits = (1_000_000_000, 8, usize::MAX);
            let seen = same_walks_within(&h, what, limits, Drift::from_ppm(0), true);
            assert!(seen.forced > 0, "{what}: the reader never stopped waiting");
            // Taken as pending, the renew holds its grant open, and the watermark with it: the
            // forced-order reading keeps every grant closed after, up to its limit.
            if what.starts_with("a renew pending") {
                let all = same_walks_within(&h, what, (0, 8, usize::MAX), Drift::from_ppm(0), true);
                assert!(all.limits.forced_kept_most >= 15, "{what}: {all:?}");
                assert!(all.limits.holds_waiting_most >= 15, "{what}: {all:?}");
                let held = same_walks_within(&h, what, (0, 8, 4), Drift::from_ppm(0), true);
                assert!(held.limits.forced_cut_short > 0, "{what}: nothing let go");
                assert!(held.limits.forced_kept_most <= 4, "{what}: {held:?}");
                assert!(held.limits.swept_early > 0, "{what}: nothing swept early");
                assert!(held.limits.holds_waiting_most <= 4, "{what}: {held:?}");
                // A second grant held open, whose hold starts before those swept early: left
                // out of the sweep, never paired out of order.
                let events = vec![
                    (1, 9, "invoke", "acquire", ttl),
                    (2, 9, "ok", "acquire", r#""token":1,"ttl_ms":100"#),
                    (3, 9, "invoke", "renew", r#""token":1,"ttl_ms":100"#),
                    (5, 3, "invoke", "acquire", ttl),
                    (6, 3, "ok", "acquire", r#""ttl_ms":2"#),
                    (7, 3, "invoke", "renew", r#""ttl_ms":2"#),
                ];
                let late = cycles(events, vec![]);
                let what = "a hold that starts before those swept early";
                let seen = same_walks_within(&late, what, (0, 8, 4), Drift::from_ppm(0), true);
                assert!(seen.limits.left_out > 0, "{what}: {seen:?}");
            }
            assert!(
                seen.unwalked_max <= 9,
                "{what}: {} ops waited",
                seen.unwalked_max
            );
            assert_eq!(seen.late > 0, answered, "{what}: late");
        }
    }

    /// A renew held open holds the watermark (as in the test above), before pairs of grants
    /// with tokens where the one asked for first answers second with the lower token (a
    /// double grant, no token regressed): the token readings keep them all without their
    /// limits, and with them let some go and find nothing the batch does not (the one let go
    /// answered after the next was asked for).
    #[test]
    fn the_token_readings_let_grants_go_past_their_limits() {
        let ttl = r#""ttl_ms":100"#;
        let mut owned: Vec<(u64, u64, &str, &str, String)> = vec![
            (1, 9, "invoke", "acquire", ttl.to_string()),
            (
                2,
                9,
                "ok",
                "acquire",
                r#""token":1,"ttl_ms":100"#.to_string(),
            ),
            (
                3,
                9,
                "invoke",
                "renew",
                r#""token":1,"ttl_ms":100"#.to_string(),
            ),
        ];
        for i in 0..20u64 {
            let t = 10 + 10 * i;
            let (first, second) = (2 * i + 2, 2 * i + 3);
            let with = |tok: u64| format!(r#""token":{tok},"ttl_ms":100"#);
            let named = |tok: u64| format!(r#""token":{tok}"#);
            owned.extend([
                (t, 2, "invoke", "acquire", ttl.to_string()),
                // A renew of the first grant, by its token, sent before the second returned:
                // a reading that let the second go must not judge it against that one.
                (t + 1, 5, "invoke", "renew", with(first)),
                (t + 1, 1, "invoke", "acquire", ttl.to_string()),
                (t + 2, 1, "ok", "acquire", with(second)),
                (t + 3, 2, "ok", "acquire", with(first)),
                (t + 4, 5, "ok", "renew", with(first)),
                (t + 4, 1, "invoke", "release", named(second)),
                (t + 5, 1, "ok", "release", named(second)),
                (t + 6, 2, "invoke", "release", named(first)),
                (t + 7, 2, "ok", "release", named(first)),
            ]);
        }
        let events: Vec<(u64, u64, &str, &str, &str)> = (owned.iter())
            .map(|(t, p, k, f, v)| (*t, *p, *k, *f, v.as_str()))
            .collect();
        let h = lines(&events);
        let what = "pairs with tokens behind a renew held open";
        let all = same_walks_within(&h, what, (0, 8, usize::MAX), Drift::from_ppm(0), true);
        assert!(all.limits.fencing_kept_most >= 15, "{what}: {all:?}");
        assert!(all.limits.stale_kept_most >= 15, "{what}: {all:?}");
        let held = same_walks_within(&h, what, (0, 8, 4), Drift::from_ppm(0), true);
        assert!(held.limits.fencing_cut_short > 0, "{what}: nothing let go");
        assert!(held.limits.fencing_kept_most <= 4, "{what}: {held:?}");
        assert!(held.limits.stale_cut_short > 0, "{what}: nothing let go");
        assert!(held.limits.stale_kept_most <= 4, "{what}: {held:?}");
        assert!(
            held.limits.fencing_forgotten > 0,
            "{what}: no token forgotten"
        );
        // Past the limit, only those of grants still kept wait (at most 4 more).
        assert!(held.limits.fencing_remembered_most <= 8, "{what}: {held:?}");
        // What it found was compared with the batch's.
        assert_eq!(held.stale, 0, "{what}: {held:?}");
    }

    /// The store rules and lock-stuck judge an op walked in the same piece as the ops before
    /// it (the reader's pieces hold thousands of events; the other tests feed one at a time):
    /// each corner read as one piece gives the batch's violations.
    #[test]
    fn the_rules_that_read_ops_judge_within_one_piece() {
        use history::ViolationKind as K;
        let stuck = stuck_corners()
            .into_iter()
            .map(|(what, h, _)| (what, h, [0; 2], 0));
        for (what, h, _, out_of_order) in store_corners().into_iter().chain(stuck) {
            if out_of_order > 0 {
                continue;
            }
            let mut read = Digest::new(0, Drift::from_ppm(0));
            read.walk.horizon_ns = 0;
            read.stream = Some(Streamed::default());
            read.evict = true;
            let mut read = Digest::of_history_in(&h, usize::MAX, read);
            read.finish_walk();
            let stream = read.stream.as_ref().expect("set above");
            let cfg = CheckConfig::default();
            let m = Model::new(&h, &cfg);
            let batch = [
                crate::Checker::check_model(&crate::store::StoreFencing, &m, &cfg).violations,
                crate::Checker::check_model(&crate::store::Counter, &m, &cfg).violations,
                crate::Checker::check_model(&crate::liveness::Liveness, &m, &cfg).violations,
            ]
            .concat();
            let kinds = [K::StaleWriteAccepted, K::LostUpdate, K::LockStuck];
            let streamed = of_kinds(stream, &kinds);
            assert_eq!(words(&batch), words(&streamed), "{what}");
        }
    }

    /// The lease rules judge ok acquires only: a renew, or a refused acquire, carrying lease
    /// evidence past its ttl proves nothing, and a grant whose key the service's record holds is
    /// decided by it.
    #[test]
    fn the_lease_rules_judge_the_answers_of_grants_only() {
        let ttl = r#""ttl_ms":1000"#;
        let late = r#""token":1,"ttl_ms":1000,"lease_last_ok_ns":1000000,"lease_ttl_ms":1000"#;
        let present = r#""token":2,"ttl_ms":1000,"lease_last_ok_ns":1000000,"lease_ttl_ms":1000,"answer_revision":7,"lock_key":"k","key_at_revision":"present""#;
        let h = lines(&[
            (0, 1, "invoke", "acquire", ttl),
            (5000, 1, "ok", "acquire", late),
            (5001, 1, "invoke", "renew", r#""token":1,"ttl_ms":1000"#),
            (5002, 1, "ok", "renew", late),
            (5003, 1, "invoke", "release", r#""token":1"#),
            (5004, 1, "ok", "release", r#""token":1"#),
            (5005, 2, "invoke", "acquire", ttl),
            (
                5006,
                2,
                "fail",
                "acquire",
                r#""error":"held","lease_last_ok_ns":1000000,"lease_ttl_ms":1000"#,
            ),
            (6000, 3, "invoke", "acquire", ttl),
            (6001, 3, "ok", "acquire", present),
        ]);
        let what = "a late grant, then a renew, a refusal and a grant the record decides";
        let seen = same_walks(&h, what, 0, Drift::from_ppm(0), true);
        assert_eq!(seen.compared.by_op[..3], [0, 0, 1], "{what}: {seen:?}");
    }

    /// Past its limit of `held` answers stuck so far, the lock-stuck reading judges the
    /// earliest with what it has read and lets it go.
    #[test]
    fn the_stuck_reading_settles_answers_past_its_limit() {
        let (what, h, found) = (stuck_corners().into_iter())
            .find(|c| c.0 == "two stretches")
            .expect("a corner");
        let held = same_walks_within(&h, what, (0, usize::MAX, 1), Drift::from_ppm(0), true);
        assert!(held.limits.stuck_cut_short > 0, "{what}: {held:?}");
        assert_eq!(held.limits.stuck_waiting_most, 1, "{what}: {held:?}");
        let whole = same_walks(&h, what, 0, Drift::from_ppm(0), true);
        assert_eq!(whole.limits.stuck_cut_short, 0, "{what}: {whole:?}");
        assert_eq!(whole.compared.by_op[3], found, "{what}: {whole:?}");
    }

    /// A counter's values past the reading's limit are forgotten, and a write of one taken as
    /// its first (a duplicate of one remembered is still found); what it keeps stays there.
    #[test]
    fn the_counter_reading_forgets_values_past_its_limit() {
        let mut owned = Vec::new();
        for v in 1..=20u64 {
            let t = 2 * v;
            owned.push((t, 1, "invoke", "write", format!(r#""value":{v},"token":1"#)));
            owned.push((
                t + 1,
                1,
                "ok",
                "write",
                format!(r#""value":{v},"token":1,"seq":{v}"#),
            ));
        }
        for (t, v, seq) in [(100, 1, 21), (102, 19, 22)] {
            owned.push((t, 2, "invoke", "write", format!(r#""value":{v},"token":1"#)));
            owned.push((
                t + 1,
                2,
                "ok",
                "write",
                format!(r#""value":{v},"token":1,"seq":{seq}"#),
            ));
        }
        let events: Vec<(u64, u64, &str, &str, &str)> = (owned.iter())
            .map(|(t, p, kind, f, v)| (*t, *p, *kind, *f, v.as_str()))
            .collect();
        let h = lines(&events);
        let what = "twenty counter writes, then value 1 and value 19 again";
        let held = same_walks_within(&h, what, (0, usize::MAX, 4), Drift::from_ppm(0), true);
        assert!(held.limits.values_forgotten > 0, "{what}: {held:?}");
        assert_eq!(held.limits.values_remembered_most, 4, "{what}: {held:?}");
        // Value 19's first is remembered, value 1's forgotten.
        assert_eq!(held.limits.lost_updates, 1, "{what}: {held:?}");
        let whole = same_walks(&h, what, 0, Drift::from_ppm(0), true);
        assert_eq!(whole.limits.lost_updates, 2, "{what}: {whole:?}");
        assert_eq!(whole.compared.by_op, [0, 2, 0, 0], "{what}: {whole:?}");
    }

    /// Every history of the corpus: the named-ahead ones, the closing and forgetting corners,
    /// generated and injected ones, and the fixtures.
    fn corpus() -> Vec<(String, History)> {
        let mut all: Vec<(String, History)> = named_ahead()
            .into_iter()
            .chain(closing_corners())
            .chain(forgetting_corners())
            .chain(pruning_corners())
            .chain(forced_corners())
            .map(|(what, h)| (what.to_string(), h))
            .collect();
        for seed in 0..40u64 {
            let params = GenParams::varied(seed, 300 + 40 * seed as usize);
            let kinds = std::iter::once(None).chain(InjectKind::all().into_iter().map(Some));
            for kind in kinds {
                let mut ops = correct_history(seed, &params);
                if let Some(k) = kind {
                    inject(&mut ops, k, seed);
                }
                // And as a service without tokens would have answered (Redis's lock value,
                // PostgreSQL's advisory locks): the forced-order reading's histories.
                if seed % 2 == 1 {
                    let mut bare = ops.clone();
                    for op in &mut bare {
                        op.value.token = None;
                    }
                    let h = History::new(bare).expect("generated histories are well formed");
                    all.push((format!("seed {seed}, {kind:?}, without tokens"), h));
                }
                let h = History::new(ops).expect("generated histories are well formed");
                all.push((format!("seed {seed}, {kind:?}"), h));
            }
        }
        // Bank runs: correct; a read here and there made stale (it says the version before the
        // one it returned, so its section read what a section that ended before it began had
        // overwritten: a cycle through real-time edges in the middle of the run); the bank's
        // injected kinds.
        for seed in 0..12u64 {
            let (_, ops) = varied_bank_run(seed, 1_500 + 100 * seed as usize);
            let mut stale = ops.clone();
            let reads = (stale.iter_mut())
                .filter(|o| o.kind == history::OpType::Ok && o.f == history::F::Read)
                .filter(|o| o.value.seq.is_some_and(|v| v >= 2));
            for o in reads.step_by(40 + seed as usize) {
                o.value.seq = o.value.seq.map(|v| v - 1);
            }
            all.push((
                format!("bank seed {seed}, stale reads"),
                History::new(stale).unwrap(),
            ));
            // And one read far behind, whose next version's writer the rounds have let go.
            let mut behind = ops.clone();
            let late = (behind.iter_mut())
                .filter(|o| o.kind == history::OpType::Ok && o.f == history::F::Read)
                .filter(|o| o.value.seq.is_some_and(|v| v >= 30))
                .nth(5 + seed as usize);
            if let Some(o) = late {
                o.value.seq = o.value.seq.map(|v| v - 25);
                let h = History::new(behind).unwrap();
                all.push((format!("bank seed {seed}, a read far behind"), h));
            }
            for kind in ["non-serializable", "total-changed", "deadlock"] {
                let mut injected = ops.clone();
                inject(&mut injected, InjectKind::named(kind), seed);
                let h = History::new(injected).expect("injected histories are well formed");
                all.push((format!("bank seed {seed}, {kind}"), h));
            }
            all.push((format!("bank seed {seed}"), History::new(ops).unwrap()));
        }
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let coverage = fixtures.with_file_name("coverage");
        let mut read = 0;
        let files =
            (std::fs::read_dir(&fixtures).unwrap()).chain(std::fs::read_dir(&coverage).unwrap());
        for entry in files {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            let Ok((ops, _)) = history::read_ops(&path) else {
                continue;
            };
            let Ok(h) = History::new(ops) else { continue };
            all.push((path.display().to_string(), h));
            read += 1;
        }
        assert!(read > 100, "only {read} fixtures read");
        all
    }

    /// A bank run's cycle is proven while the history is read, within about a second of
    /// history time after its sections are done (`serial::ROUND_EVERY_NS`), not at its end:
    /// a read made stale a third of the way in is proven from the events up to 2 s past the
    /// violation's window, and the whole reading proves it once, as the batch does.
    #[test]
    fn a_bank_runs_cycle_is_proven_as_the_history_is_read() {
        use history::ViolationKind::NonSerializable;
        for seed in [0, 1, 2, 3, 5, 7u64] {
            // From seed 4, transfers applied in part: a process whose write went unanswered
            // runs no more, and its section is judged without waiting out its quiet time. (Odd
            // seeds: 300 ms leases, so the locks a crashed process held lapse soon, and the
            // history goes on past the violation.)
            let partial_pct = if seed >= 4 { 10 } else { 0 };
            let (_, mut ops) = varied_partial_bank_run(seed, 6_000, partial_pct);
            let third = ops.len() / 3;
            assert!(crate::gen_bank::stale_read_before(&mut ops[..third]));
            let h = History::new(ops.clone()).expect("well formed");
            let (m, cfg) = batch_model(&h, Drift::from_ppm(0));
            let want = crate::check_model(&m, &cfg);
            let wanted: Vec<_> = (want.violations.iter())
                .filter(|v| v.kind == NonSerializable)
                .collect();
            assert!(!wanted.is_empty(), "seed {seed}: the batch finds the cycle");
            let by_ns = wanted[0].window_ns[1] + 2_000_000_000;
            let end_ns = ops.last().expect("ops").time_ns;
            assert!(by_ns < end_ns, "seed {seed}: the history goes on past it");
            let prefix: Vec<Op> = ops.into_iter().filter(|o| o.time_ns <= by_ns).collect();
            let prefix = History::new(prefix).expect("a prefix is well formed");
            let early = Digest::streaming(Drift::from_ppm(0), CHECK_HORIZON_NS);
            let early = Digest::of_history_in(&prefix, 1, early);
            let proven: Vec<_> = (early.proven().iter())
                .filter(|v| v.kind == NonSerializable)
                .collect();
            assert_eq!(
                proven.first().map(|v| &v.ops),
                Some(&wanted[0].ops),
                "seed {seed}: proven by {by_ns} ns of {end_ns}"
            );
            let mut whole = Digest::streaming(Drift::from_ppm(0), CHECK_HORIZON_NS);
            whole = Digest::of_history_in(&h, 1, whole);
            whole.finish_walk();
            let all: Vec<_> = (whole.proven().iter())
                .filter(|v| v.kind == NonSerializable)
                .collect();
            assert_eq!(all, wanted, "seed {seed}: proven once each, as the batch");
        }
    }

    /// The accounts' total read as the streaming reader walks is the batch's on bank runs
    /// (a closing read off by 7 in a third; transfers applied in part, refused or unanswered,
    /// in another third), violations and notes alike; past its limits it
    /// finds no violation the batch does not (a closing read's balance not remembered is
    /// worded as not known to be stored) and judges nothing while a transfer was counted
    /// before its process moved on. What it keeps does not grow with the run.
    #[test]
    fn the_streamed_bank_total_is_the_batchs_on_bank_runs() {
        let (mut violations, mut limited) = (0, 0);
        for seed in 0..24u64 {
            let partial_pct = if seed % 3 == 1 { 10 } else { 0 };
            let (params, mut ops) = varied_partial_bank_run(seed, 3_000, partial_pct);
            if seed % 3 == 0 {
                // The last closing read returns 7 more than its account holds: money made.
                let last = (ops.iter_mut().rev())
                    .find(|o| o.f == F::Read && o.kind == OpType::Ok)
                    .expect("closing reads");
                last.value.value = last.value.value.map(|v| v + 7);
            }
            let h = History::new(ops).expect("generated histories are well formed");
            let (m, cfg) = batch_model(&h, Drift::from_ppm(0));
            let want = crate::Checker::check_model(&crate::bank::Total, &m, &cfg);
            assert_eq!(
                want.violations.len(),
                usize::from(seed % 3 == 0),
                "seed {seed}"
            );
            for (horizon_ns, remembered_max, open_max) in [
                (0, usize::MAX, usize::MAX),
                (1_000_000_000, 3, usize::MAX),
                (0, usize::MAX, 2),
            ] {
                let what = format!(
                    "bank seed {seed}, horizon {horizon_ns}, limits {remembered_max} {open_max}"
                );
                let mut read = Digest::streaming(Drift::from_ppm(0), horizon_ns);
                let stream = read.stream.as_mut().expect("streaming");
                stream.bank.remembered_max = remembered_max;
                stream.bank.open_max = open_max;
                read = Digest::of_history_in(&h, 1, read);
                read.finish_walk();
                assert_eq!(read.forced_count, 0, "{what}");
                let stream = read.stream.as_ref().expect("streaming");
                let bank = &stream.bank;
                let proven = of_kinds(stream, &[history::ViolationKind::TotalChanged]);
                if bank.forgotten == 0 && bank.closed_early == 0 {
                    violations += compare_stats(&h, &what, Drift::from_ppm(0), &read);
                    // A transfer is counted once its process moves on: one open per client.
                    assert!(bank.open.len() <= params.clients, "{what}: open transfers");
                    continue;
                }
                limited += 1;
                let about = |v: &[history::Violation]| -> Vec<_> {
                    v.iter()
                        .map(|v| (v.kind, v.ops.clone(), v.window_ns))
                        .collect()
                };
                if bank.closed_early > 0 {
                    assert!(proven.is_empty(), "{what}: judged past the open limit");
                } else {
                    assert_eq!(about(&proven), about(&want.violations), "{what}");
                }
                assert!(
                    bank.remembered.len() <= remembered_max,
                    "{what}: remembered"
                );
                assert!(bank.open.len() <= open_max, "{what}: open");
            }
        }
        assert_eq!(violations, 8, "the injected total-changed, each found");
        assert_eq!(limited, 48, "every run read past both limits");
    }

    /// The streamed coverage lets each fault go once nothing to come can change what it
    /// counts: over histories of hundreds of faults of every kind (stalls of holders and of
    /// waiters, pauses, kills, clocks, partitions) it keeps records of fewer than half of them
    /// at once (those still waiting, and settled ones let go in batches), where keeping every
    /// fault would be more, and counts what the batch counts, field for field.
    #[test]
    fn the_streamed_coverage_keeps_few_faults_and_counts_what_the_batch_counts() {
        let (mut faults, mut stalls, mut cells) = (0, 0, 0);
        for seed in 0..8u64 {
            let params = GenParams {
                clients: 2 + seed as usize % 7,
                locks: 1 + seed as usize % 4,
                events: 24_000,
                info_rate: 0.01 + 0.01 * (seed % 3) as f64,
                client_pause_rate: 0.05,
                ..GenParams::default()
            };
            let h = History::new(correct_history(seed, &params)).expect("well formed");
            let nemesis = h.ops.iter().filter(|o| o.process.is_nemesis()).count();
            let (m, cfg) = batch_model(&h, Drift::from_ppm(20_000 * (seed % 2)));
            let want = crate::coverage::coverage(&m);
            let mut read = Digest::streaming_for(&cfg, CHECK_HORIZON_NS);
            read = Digest::of_history_in(&h, 1, read);
            read.finish_walk();
            let counts = &read.stream.as_ref().expect("streaming").coverage;
            let (kept_most, skipped) = (counts.kept_most, counts.nemesis_skipped);
            assert_eq!(skipped, 0, "seed {seed}");
            // Those a grant walked after them settles are let go by it.
            assert!(counts.waiting_for_a_grant() <= 1, "seed {seed}");
            assert!(
                kept_most * 2 < nemesis,
                "seed {seed}: {kept_most} of {nemesis} nemesis events' faults kept at once"
            );
            let got = read.take_coverage().expect("streaming");
            assert_eq!(got, want, "seed {seed}");
            faults += nemesis;
            stalls += got.stalls;
            cells += got.cells.len();
        }
        assert!(
            faults > 2_000 && stalls > 200 && cells > 20,
            "{faults} {stalls} {cells}"
        );
    }

    /// Past the faults the streamed coverage keeps at once, the run's notes say how many
    /// nemesis events it did not count, and the faults the results name (the unavailability's
    /// longest stretches among them) are still every one the batch names: they are read again
    /// from the file, not from the coverage's faults.
    #[test]
    fn past_the_faults_coverage_keeps_the_notes_say_so_and_the_stretches_keep_their_faults() {
        let params = GenParams {
            clients: 8,
            locks: 4,
            events: 20_000,
            info_rate: 0.01,
            ..GenParams::default()
        };
        let h = History::new(correct_history(3, &params)).expect("well formed");
        let nemesis = h.ops.iter().filter(|o| o.process.is_nemesis()).count() as u64;
        assert!(nemesis > 100, "{nemesis} nemesis events");
        let (m, cfg) = batch_model(&h, Drift::from_ppm(0));
        let mut read = Digest::streaming_for(&cfg, CHECK_HORIZON_NS);
        let coverage = &mut read.stream.as_mut().expect("streaming").coverage;
        coverage.limits.faults_kept = 40;
        let mut read = Digest::of_history_in(&h, 1, read);
        read.finish_walk();
        let notes = read.limit_notes();
        let counts = &read.stream.as_ref().expect("streaming").coverage;
        let read_before = nemesis - counts.nemesis_skipped;
        assert!(
            counts.nemesis_skipped > 0 && read_before >= 10,
            "{read_before}"
        );
        assert!(counts.kept_most <= 40, "{}", counts.kept_most);
        let said = counts.skipped_note();
        assert!(said.contains(&format!("the first {read_before} nemesis events")));
        assert!(said.contains(&format!("not the {} after", nemesis - read_before)));
        assert!(notes.contains(&said), "{notes:?}");
        let active = |s, e| m.faults.active(s, e);
        let got = read.liveness_figures(&active).expect("streaming");
        let want = crate::fairness::liveness_stats(&m);
        assert_eq!(got, want);
        let stretches = |x: &std::collections::BTreeMap<String, serde_json::Value>| {
            (x["unavailability"].as_object().expect("per lock").values())
                .flat_map(|l| l["longest"].as_array().expect("a list").clone())
                .filter(|w| w["faults"].as_array().is_some_and(|f| !f.is_empty()))
                .count()
        };
        assert!(stretches(&got) > 0, "no stretch met a fault");
    }

    /// Past its limits (faults waiting for grants to close, leases kept for faults read
    /// later, grants kept for stalls placed later) the streamed coverage counts no cell more
    /// exercised than the batch, and the faults and ops as the batch does; an acquire pending
    /// for good holds every fault waiting, up to the limit.
    #[test]
    fn the_streamed_coverage_past_its_limits_never_counts_more_exercised() {
        let limits = crate::coverage::CoverageLimits {
            unsettled: 2,
            leases: 4,
            recent: 2,
            ..crate::coverage::CoverageLimits::default()
        };
        let (mut cells, mut fewer, mut early, mut dropped) = (0, 0, 0, 0);
        for seed in 0..24u64 {
            let params = GenParams::varied(seed, 1_200);
            let mut ops = correct_history(seed, &params);
            if seed % 2 == 0 {
                // An acquire of a process of its own, invoked first and never answered.
                let first = ops.first().map_or(0, |o| o.time_ns);
                let p = history::Process::Client(900 + seed);
                let op = history::Op::new(0, first, p, OpType::Invoke, F::Acquire)
                    .with_lock("L0")
                    .with_value(history::OpValue::default().with_ttl_ms(1_000));
                ops.insert(0, op);
                for (i, o) in ops.iter_mut().enumerate() {
                    o.index = i as u64;
                }
            }
            let h = History::new(ops).expect("generated histories are well formed");
            let (m, _) = batch_model(&h, Drift::from_ppm(0));
            let want = crate::coverage::coverage(&m);
            let mut read = Digest::streaming(Drift::from_ppm(0), 1_000_000_000);
            read.stream.as_mut().expect("streaming").coverage.limits = limits;
            read = Digest::of_history_in(&h, 1, read);
            read.finish_walk();
            let counts = &read.stream.as_ref().expect("streaming").coverage;
            early += counts.settled_early;
            dropped += counts.leases_dropped + counts.grants_forgotten;
            let got = read.take_coverage().expect("streaming");
            let what = format!("seed {seed}");
            assert_eq!(got.faults, want.faults, "{what}: faults and ops met");
            assert_eq!(got.cells.len(), want.cells.len(), "{what}: cells");
            for (a, b) in got.cells.iter().zip(&want.cells) {
                assert_eq!(
                    (&a.kind, &a.variant, &a.role, a.started),
                    (&b.kind, &b.variant, &b.role, b.started),
                    "{what}"
                );
                assert!(
                    a.exercised <= b.exercised,
                    "{what}: {a:?} counted more than {b:?}"
                );
                cells += 1;
                fewer += usize::from(a.exercised < b.exercised);
            }
        }
        eprintln!("{cells} cells, {fewer} counted less; {early} faults settled early, {dropped} leases and grants let go");
        assert!(early > 0 && dropped > 0, "the limits were reached");
    }

    /// The whole check a streaming reader assembles is the batch's, field for field, wherever
    /// no grant went stale and the reader never stopped waiting.
    #[test]
    fn the_streamed_results_are_the_batchs() {
        let corpus = corpus();
        let (mut compared, mut violations, mut warnings, mut notes) = (0, 0, 0, 0);
        let (mut grouped_again, mut resets_again) = (0, 0);
        let (mut banks, mut non_serializable, mut banks_with_cycles) = (0, 0, 0);
        let (mut let_go, mut banks_let_go, mut serial_inexact) = (0, 0, 0);
        for (horizon_ns, evict) in [(0, true), (1_000_000_000, true), (u64::MAX, false)] {
            for (i, (what, h)) in corpus.iter().enumerate() {
                let drift = Drift::from_ppm(10_000 * (i as u64 % 2));
                let what = format!("{what}, horizon {horizon_ns}");
                let (m, cfg) = batch_model(h, drift);
                let mut read = Digest::streaming(drift, horizon_ns);
                read.evict = evict;
                // The critical sections judged in rounds of a few (the default waits for
                // thousands), or kept whole.
                if i % 3 != 2 {
                    read.stream
                        .as_mut()
                        .expect("streaming")
                        .serial
                        .rounds_from(4 + i % 3);
                }
                let mut read = Digest::of_history_in(h, 1, read);
                read.finish_walk();
                let stale = read.walk.state.iter().any(|&s| s == Close::Stale)
                    || !read.walk.late_grants.is_empty()
                    || read.walk.uncertain > 0
                    || read.walk.stale_dropped > 0;
                if stale || read.forced_count > 0 {
                    continue;
                }
                let serial = (read.stream.as_ref()).and_then(|s| s.serial.window());
                let serial = serial.expect("the streaming reader's rounds");
                if !m.transfers.is_empty() {
                    let_go += serial.let_go_count;
                    banks_let_go += usize::from(serial.let_go_count > 0);
                }
                if serial.inexact.is_some() {
                    // The check reads the file whole (`gives_up`).
                    assert!(read.gives_up(), "{what}");
                    serial_inexact += 1;
                    continue;
                }
                let active = |a, b| m.faults.active(a, b);
                // The incidents as a check past the whole-read limit groups them: from a
                // second streamed reading of the same history, which takes the facts of the
                // ops the violations name.
                let marks =
                    (read.stream.as_ref()).map_or(Vec::new(), |s| s.fencing.era_marks.clone());
                let incidents = |v: &[history::Violation]| {
                    let want = crate::incidents::group_model(&m, v);
                    if v.is_empty() {
                        return want;
                    }
                    let mut again = Digest::streaming(drift, horizon_ns);
                    again.evict = evict;
                    again.violations_read_whole = false;
                    let named = v.iter().flat_map(|v| v.ops.iter().copied());
                    let named = named.chain(crate::incidents::EraMark::ops(&marks));
                    again.capture = Some(Box::new(crate::incidents::Capture::new(named)));
                    let again = Digest::of_history_in(h, 1, again);
                    let facts = (again.captured_facts(&marks).1).expect("every fact captured");
                    let got = crate::incidents::group(&facts, v);
                    assert_eq!(
                        serde_json::to_value(&got).expect("serializes"),
                        serde_json::to_value(&want).expect("serializes"),
                        "{what}: incidents from a second streamed reading"
                    );
                    grouped_again += got.len();
                    resets_again += got.iter().filter(|i| i.token_reset.is_some()).count();
                    want
                };
                let got = read.streamed_results(&cfg, &active, incidents);
                let got = got.unwrap_or_else(|| panic!("{what}: not assembled"));
                let want = crate::check_model(&m, &cfg);
                let (got, want) = (serde_json::to_value(&got), serde_json::to_value(&want));
                let (got, want) = (got.expect("serializes"), want.expect("serializes"));
                for (field, w) in want.as_object().expect("an object") {
                    assert_eq!(&got[field], w, "{what}: {field}");
                }
                compared += 1;
                if !m.transfers.is_empty() {
                    banks += 1;
                    let kinds = want["violations"].as_array().expect("a list").iter();
                    let cycles = kinds.filter(|v| v["kind"] == "non-serializable").count();
                    non_serializable += cycles;
                    banks_with_cycles += usize::from(cycles > 0);
                }
                violations += want["violations"].as_array().map_or(0, Vec::len);
                warnings += want["warnings"].as_array().map_or(0, Vec::len);
                notes += (want["checkers"].as_array().expect("a list").iter())
                    .map(|c| c["notes"].as_array().map_or(0, Vec::len))
                    .sum::<usize>();
            }
        }
        assert!(compared > 2800, "{compared} histories compared");
        eprintln!(
            "{banks} bank runs, {banks_with_cycles} with {non_serializable} non-serializable"
        );
        eprintln!("{banks_let_go} bank runs let {let_go} sections go; {serial_inexact} inexact");
        assert!(banks > 400, "{banks} bank runs compared");
        assert!(
            banks_let_go > 100 && let_go > 10_000,
            "{banks_let_go} bank runs let {let_go} sections go"
        );
        // The reads far behind, each an edge into a section let go.
        assert!(
            serial_inexact >= 30,
            "{serial_inexact} readings made inexact"
        );
        assert!(
            banks_with_cycles > 150 && non_serializable > 300,
            "{banks_with_cycles} bank runs compared with {non_serializable} non-serializable"
        );
        assert!(violations > 3400, "{violations} violations compared");
        assert!(notes > 3400, "{notes} notes compared");
        assert!(warnings > 250, "{warnings} warnings compared");
        assert!(
            grouped_again > 2000,
            "{grouped_again} incidents grouped again"
        );
        assert!(
            resets_again > 150,
            "{resets_again} token resets grouped again"
        );
    }

    /// A run with more warnings than a check lists (the crate's tests list 3): the stream,
    /// which keeps only the first as it goes, lists and counts what the batch does, and every
    /// figure counts them all.
    #[test]
    fn the_warnings_listed_past_the_limit_are_the_batchs() {
        let params = GenParams {
            clients: 8,
            locks: 4,
            events: 60_000,
            info_rate: 0.01,
            ..GenParams::default()
        };
        let h = History::new(correct_history(3, &params)).expect("well formed");
        let (m, cfg) = batch_model(&h, Drift::from_ppm(0));
        let mut read = Digest::of_history_in(&h, 1, Digest::streaming_for(&cfg, CHECK_HORIZON_NS));
        read.finish_walk();
        assert!(read.streamed_exactly());
        let active = |a, b| m.faults.active(a, b);
        let incidents = |v: &[history::Violation]| crate::incidents::group_model(&m, v);
        let got = (read.streamed_results(&cfg, &active, incidents)).expect("streamed");
        let want = crate::check_model(&m, &cfg);
        let found = want.warnings_found() as usize;
        assert!(found > crate::WARNINGS_LISTED_MAX, "{found} warnings");
        assert_eq!(want.warnings.len(), crate::WARNINGS_LISTED_MAX);
        let mutex = (want.checkers.iter()).find(|c| c.name == "mutual-exclusion");
        assert_eq!(mutex.map(|c| c.warnings), Some(found as u64));
        assert!(
            want.notes.iter().any(|n| n.contains("not listed")),
            "{:?}",
            want.notes
        );
        let (got, want) = (serde_json::to_value(&got), serde_json::to_value(&want));
        assert_eq!(got.expect("serializes"), want.expect("serializes"));
    }

    /// On a run with many more faults aimed at leases than the streaming reader holds open at
    /// once (`coverage::UNSETTLED_MAX`), the batch, which reads every nemesis event before the
    /// first grant closes, counts what the streaming reader counts: every fault that met its
    /// state (it once settled all but the last 256 unmet).
    #[test]
    fn the_batch_coverage_of_a_long_run_is_the_streamed_one() {
        let params = GenParams {
            clients: 8,
            locks: 4,
            events: 100_000,
            info_rate: 0.01,
            ..GenParams::default()
        };
        let h = History::new(correct_history(7, &params)).expect("well formed");
        let (m, cfg) = batch_model(&h, Drift::from_ppm(0));
        let want = crate::coverage::coverage(&m);
        let mut read = Digest::streaming_for(&cfg, CHECK_HORIZON_NS);
        read = Digest::of_history_in(&h, 1024, read);
        read.finish_walk();
        assert!(read.streamed_exactly());
        let got = read.take_coverage().expect("a streaming reader");
        let (want, got) = (serde_json::to_value(want), serde_json::to_value(got));
        let want = want.expect("serializes");
        assert_eq!(got.expect("serializes"), want);
        let exercised: u64 = (want["cells"].as_array().expect("cells").iter())
            .map(|c| c["exercised"].as_u64().unwrap_or(0))
            .sum();
        assert!(
            exercised > crate::coverage::UNSETTLED_MAX as u64,
            "{exercised}"
        );
    }

    /// The notes and warnings the corpus never shows, each on a history made for it, streamed
    /// as the batch words them: two grants that prove no hold (a transaction's lock), a counter
    /// only read at the end, a `held` answer while a lease of unknown ttl could be in force;
    /// a stalled holder's late write against a newer token the store was shown only after its
    /// invoke: accepted (fenced), indeterminate until after (suspect), never answered
    /// (suspect: it may land any time).
    #[test]
    fn the_streamed_notes_are_the_batchs_on_their_corners() {
        let late_write = |outcome: &'static str, done_ms: u64, said: &'static str| {
            let mut events = vec![
                (0, 1, "invoke", "acquire", r#""ttl_ms":100"#),
                (1, 1, "ok", "acquire", r#""token":1,"ttl_ms":100"#),
                (300, 2, "invoke", "acquire", r#""ttl_ms":100"#),
                (301, 2, "ok", "acquire", r#""token":2,"ttl_ms":100"#),
                (302, 1, "invoke", "write", r#""token":1,"value":1,"seq":1"#),
                (305, 2, "invoke", "write", r#""token":2,"value":1,"seq":2"#),
                (306, 2, "ok", "write", r#""token":2,"value":1,"seq":2"#),
                (310, 2, "invoke", "release", r#""token":2"#),
                (311, 2, "ok", "release", r#""token":2"#),
            ];
            if outcome != "pending" {
                let done = (
                    done_ms,
                    1,
                    outcome,
                    "write",
                    r#""token":1,"value":1,"seq":1"#,
                );
                let at = events.partition_point(|e| e.0 <= done_ms);
                events.insert(at, done);
            }
            (outcome, lines(&events), said)
        };
        let late = [
            late_write("ok", 303, "could undo a newer holder"),
            late_write("info", 320, "whether the store applied it is indeterminate"),
            late_write("pending", 0, "it never completed"),
        ];
        let corners = [
            (
                "two transaction grants",
                lines(&[
                    (0, 1, "invoke", "acquire", r#""hold":"transaction""#),
                    (1, 1, "ok", "acquire", r#""hold":"transaction","token":1"#),
                    (2, 2, "invoke", "acquire", r#""hold":"transaction""#),
                    (3, 2, "ok", "acquire", r#""hold":"transaction","token":2"#),
                ]),
                "none of the 2 grant(s) proves a hold",
            ),
            (
                "a counter only read at the end",
                lines(&[
                    (0, 1, "invoke", "acquire", r#""ttl_ms":1000"#),
                    (1, 1, "ok", "acquire", r#""token":1,"ttl_ms":1000"#),
                    (2, 2, "invoke", "read", r#""final":true"#),
                    (3, 2, "ok", "read", r#""final":true,"value":0"#),
                ]),
                "no lock was granted twice",
            ),
            (
                "held while a lease of unknown ttl could be in force",
                lines(&[
                    (0, 1, "invoke", "acquire", ""),
                    (1, 1, "ok", "acquire", r#""token":1"#),
                    (5000, 2, "invoke", "acquire", r#""ttl_ms":1000"#),
                    (5001, 2, "fail", "acquire", r#""error":"held""#),
                ]),
                "1 held answer(s) came while a lease of unknown ttl could be in force",
            ),
        ];
        for (what, h, said) in corners.into_iter().chain(late) {
            let (m, cfg) = batch_model(&h, Drift::from_ppm(0));
            let want = crate::check_model(&m, &cfg);
            let mut read = Digest::streaming(Drift::from_ppm(0), 0);
            read = Digest::of_history_in(&h, 1, read);
            read.finish_walk();
            let active = |a, b| m.faults.active(a, b);
            let incidents = |v: &[history::Violation]| crate::incidents::group_model(&m, v);
            let got = read.streamed_results(&cfg, &active, incidents);
            let got = serde_json::to_value(got.expect("no transfer"));
            let want = serde_json::to_value(want).expect("serializes");
            assert_eq!(got.expect("serializes"), want, "{what}");
            assert!(want.to_string().contains(said), "{what}: {want}");
        }
    }

    #[test]
    fn walking_as_read_makes_the_grants_of_the_whole_walk() {
        for (what, h) in named_ahead() {
            let seen = same_walks(&h, what, u64::MAX, Drift::from_ppm(0), false);
            assert!(
                seen.ahead > 0,
                "{what}: no op named a grant ahead of itself"
            );
        }
        for (i, (what, h)) in corpus().iter().enumerate() {
            let drift = Drift::from_ppm(10_000 * (i as u64 % 2));
            let seen = same_walks(h, what, u64::MAX, drift, false);
            assert_eq!(seen.closed, 0, "{what}: a grant closed before the end");
        }
    }

    /// Each corner, closing at once: the closing ones leave a grant stale, the forgetting ones
    /// reach one late (when the reader drops them), and the others give the batch's count of
    /// the violations their reading must wait or keep a grant for.
    fn corners_hold(evict: bool) {
        let walk = |h: &History, what: &str| same_walks(h, what, 0, Drift::from_ppm(0), evict);
        for (what, h) in closing_corners() {
            assert!(walk(&h, what).stale > 0, "{what}: no grant went stale");
        }
        for (what, h) in forced_corners() {
            let seen = walk(&h, what);
            assert_eq!(
                seen.compared.forced_order, 1,
                "{what}: forced-order violations"
            );
        }
        type Count = fn(&Compared) -> usize;
        let counted: [(Vec<_>, Count); 2] = [
            (stale_corners(), |c| c.stale),
            (fencing_corners(), |c| c.fencing),
        ];
        for (corners, count) in counted {
            for (what, h, found) in corners {
                let seen = walk(&h, what);
                assert_eq!(seen.stale, 0, "{what}: a grant went stale");
                assert_eq!(count(&seen.compared), found, "{what}: violations");
            }
        }
        for (what, h, found) in stuck_corners() {
            let seen = walk(&h, what);
            assert_eq!(seen.compared.by_op[3], found, "{what}: stretches");
        }
        for (what, h, found, out_of_order) in store_corners() {
            let seen = walk(&h, what);
            assert_eq!(seen.compared.by_op[..2], found, "{what}: violations");
            let counted = seen.limits.store_out_of_order;
            assert_eq!(counted, out_of_order, "{what}: out of order");
        }
        if evict {
            for (what, h) in forgetting_corners() {
                assert!(walk(&h, what).late > 0, "{what}: nothing reached late");
            }
        }
    }

    /// Closing grants as the walk passes them (as a reader that forgets them would) changes
    /// no grant it does not call stale, however soon it closes them; dropping the ops no later
    /// step reads changes nothing either (a step that read one would find it gone).
    #[test]
    fn a_grant_closed_as_the_walk_passes_it_is_the_whole_walks_or_stale() {
        let corpus = corpus();
        let runs = [
            (0, false),
            (0, true),
            (1_000_000_000, false),
            (1_000_000_000, true),
            (30_000_000_000, false),
        ];
        for (horizon_ns, evict) in runs {
            let (mut closed, mut stale, mut double_grants) = (0, 0, 0);
            let (mut token_order, mut forced_order, mut fencing, mut stale_ops) = (0, 0, 0, 0);
            let mut by_op = [0; 4];
            let mut bank = 0;
            let mut searched = [0; 3];
            let mut cycles = [0; 2];
            let mut kept_most = 0;
            let mut out_of_order = Vec::new();
            let mut uncertain = Vec::new();
            for (i, (what, h)) in corpus.iter().enumerate() {
                let drift = Drift::from_ppm(10_000 * (i as u64 % 2));
                let what = format!("{what}, horizon {horizon_ns}, evict {evict}");
                let seen = same_walks(h, &what, horizon_ns, drift, evict);
                closed += seen.closed;
                stale += seen.stale;
                double_grants += seen.compared.double_grants;
                token_order += seen.compared.token_order;
                forced_order += seen.compared.forced_order;
                fencing += seen.compared.fencing;
                stale_ops += seen.compared.stale;
                for (sum, n) in by_op.iter_mut().zip(seen.compared.by_op) {
                    *sum += n;
                }
                bank += seen.compared.bank;
                for (sum, n) in searched.iter_mut().zip(seen.compared.searched) {
                    *sum += n;
                }
                for (sum, n) in cycles.iter_mut().zip(seen.compared.cycles) {
                    *sum += n;
                }
                assert_eq!(
                    seen.limits.store_out_of_order, 0,
                    "{what}: a store out of order"
                );
                kept_most = kept_most.max(seen.limits.stale_kept_most);
                if seen.compared.out_of_order > 0 {
                    out_of_order.push(what.clone());
                }
                if seen.uncertain {
                    uncertain.push(what);
                }
            }
            eprintln!(
                "horizon {horizon_ns} ns, evict {evict}: {closed} grants closed early, {stale} \
                 stale, {double_grants} overlapping holds, {token_order} token-order and \
                 {forced_order} forced-order, {fencing} fencing-tokens and {stale_ops} \
                 stale-lock-ops violations streamed (the stale reading kept at most {kept_most} grants of a lock), {} stale-write-accepted, {} lost-update, {} lease-rule and {} lock-stuck violations streamed, {} histories left out of the comparison by a forgotten name, {} by a \
                 grant closed out of token order",
                by_op[0],
                by_op[1],
                by_op[2],
                by_op[3],
                uncertain.len(),
                out_of_order.len()
            );
            // Only a token regression (or a token reused) closes a grant out of token order.
            let unexpected: Vec<&String> = out_of_order
                .iter()
                .filter(|w| !w.contains("token-regressed") && !w.contains("token-reused"))
                .collect();
            assert!(
                unexpected.is_empty(),
                "grants closed out of token order without a token regression: {unexpected:?}"
            );
            assert!(token_order > 0, "no token-order violation compared");
            assert!(forced_order > 0, "no forced-order violation compared");
            assert!(fencing > 0, "no fencing-tokens violation compared");
            assert!(stale_ops > 0, "no stale-lock-ops violation compared");
            assert!(by_op[0] > 0, "no stale-write-accepted violation compared");
            assert!(by_op[1] > 0, "no lost-update violation compared");
            assert!(by_op[2] > 0, "no lease-rule violation compared");
            assert!(by_op[3] > 0, "no lock-stuck violation compared");
            assert!(bank > 0, "no total-changed violation compared");
            eprintln!(
                "model search, streamed as the batch's: {} locks possible, {} impossible, {} \
                 stopped",
                searched[0], searched[1], searched[2]
            );
            assert!(
                searched[0] > 100,
                "only {} possible locks compared",
                searched[0]
            );
            assert!(
                searched[1] > 10,
                "only {} impossible locks compared",
                searched[1]
            );
            eprintln!(
                "wait-for sweep, streamed as the batch's: {} cycles, {} deadlocks",
                cycles[0], cycles[1]
            );
            assert!(cycles[1] > 10, "only {} deadlocks compared", cycles[1]);
            // What the readings keep follows the walk: an op naming no grant, judged once the
            // walk is past it, does not hold the grants kept (judged only once the reader could
            // drop it, it waited for the grants the reading itself pinned, 35 at every horizon).
            if horizon_ns <= 1_000_000_000 {
                assert!(
                    kept_most <= 16,
                    "the stale reading kept {kept_most} grants of a lock"
                );
            }
            // A forgotten name leads elsewhere than a dropped grant only where a process names
            // a token it was never granted: rare, and each such history still counts it late.
            assert!(
                uncertain.len() * 20 <= corpus.len(),
                "{} of {} histories left out: {uncertain:?}",
                uncertain.len(),
                corpus.len()
            );
            assert!(
                double_grants > 50,
                "only {double_grants} overlapping holds compared"
            );
            if horizon_ns == 0 {
                corners_hold(evict);
            }
            assert!(
                closed > 1000,
                "horizon {horizon_ns}: only {closed} grants closed"
            );
            if horizon_ns == 0 {
                // The staleness checks were reached, not only grants nothing came back to.
                assert!(stale > 0, "closing at once left no grant stale");
            }
        }
    }
}

#[cfg(test)]
mod lines_containing_tests {
    use super::{faults_meeting_in, lines_containing, Faults, FOUND_RUN_BYTES};
    use crate::gen::{correct_history, GenParams};
    use history::{History, Op};

    /// The faults read again from a history file, the lines found handed to their parse in
    /// runs of any size (a line each, up to the default), and those a whole check kept as it
    /// read, are those of the whole list of its faults that meet a window, and those never
    /// stopped.
    #[test]
    fn the_faults_found_again_are_those_of_the_whole_list_that_meet_a_window() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut files = 0;
        for seed in (0..16u64).filter(|s| s % 2 == 0) {
            let params = GenParams::varied(seed, 2_000);
            let h = History::new(correct_history(seed, &params)).expect("well formed");
            let nemesis: Vec<Op> = h.nemesis().cloned().collect();
            if nemesis.len() < 20 {
                continue;
            }
            files += 1;
            let path = dir.path().join(format!("h{seed}.jsonl"));
            let text: String = (h.ops.iter())
                .map(|op| serde_json::to_string(op).expect("an op writes") + "\n")
                .collect();
            std::fs::write(&path, text).expect("written");
            let end_ns = h.end_time_ns();
            // Windows spread over the run, a few short and one long.
            let step = end_ns / 7 + 1;
            let windows: Vec<[u64; 2]> = (0..7u64)
                .map(|k| [k * step, k * step + step / (k + 2)])
                .chain([[end_ns / 3, end_ns / 2]])
                .collect();
            let meets = |f: &crate::faults::Fault| {
                windows
                    .iter()
                    .any(|w| w[0] <= f.end_ns && f.start_ns <= w[1])
            };
            let all = Faults::from_nemesis(&nemesis, end_ns);
            let want: Vec<&crate::faults::Fault> = (all.list().iter())
                .filter(|f| f.stop_index.is_none() || meets(f))
                .collect();
            assert!(
                want.len() < all.list().len(),
                "seed {seed}: every fault meets"
            );
            for run_bytes in [1, 100, 4096, FOUND_RUN_BYTES] {
                let got = faults_meeting_in(&path, &windows, end_ns, run_bytes);
                let got: Vec<&crate::faults::Fault> = got.list().iter().collect();
                assert_eq!(got, want, "seed {seed}, runs of {run_bytes} bytes");
            }
            // And those a whole check kept as it read, once the windows are known.
            let mut digest =
                super::Digest::streaming_for(&Default::default(), super::CHECK_HORIZON_NS);
            digest.faults_kept = Some(Vec::new());
            let file = std::fs::File::open(&path).expect("opens");
            let (mut d, _) = super::digest_input(file, &path, digest, None).expect("reads");
            let lines = d.faults_kept.take().expect("under the limit");
            let meets = super::meeting(&windows);
            let mut folding = super::FaultsFolding::default();
            folding.fold(&lines, &meets);
            let kept = folding.finish(&meets, end_ns);
            let kept: Vec<&crate::faults::Fault> = kept.list().iter().collect();
            assert_eq!(kept, want, "seed {seed}, kept while reading");
        }
        assert!(files >= 4, "only {files} histories with faults");
    }

    /// Past [`super::FAULT_LINES_BYTES_MAX`] bytes of nemesis events the reader lets them go
    /// (they are read again at the end): what it keeps does not grow with the history.
    #[test]
    fn a_reader_lets_the_faults_go_past_its_limit() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("h.jsonl");
        // Each event writes back to more than 64 bytes.
        let pairs = super::FAULT_LINES_BYTES_MAX / 128 + 10;
        let mut text = String::with_capacity(pairs * 2 * 110);
        for i in 0..pairs {
            for (k, f) in [(0, "start-pause"), (1, "stop-pause")] {
                let index = 2 * i + k;
                text.push_str(&format!(
                    "{{\"index\":{index},\"time_ns\":{},\"process\":\"nemesis\",\"type\":\"info\",\"f\":\"{f}\",\"value\":{{\"nodes\":[\"n1\"]}}}}\n",
                    index * 1000
                ));
            }
        }
        std::fs::write(&path, text).expect("written");
        let mut digest = super::Digest::streaming_for(&Default::default(), super::CHECK_HORIZON_NS);
        digest.faults_kept = Some(Vec::new());
        let file = std::fs::File::open(&path).expect("opens");
        let (d, _) = super::digest_input(file, &path, digest, None).expect("reads");
        assert!(d.faults_kept.is_none(), "kept every one of {pairs} faults");
    }

    /// Every block size puts the blocks' edges somewhere else: inside the needle, on a line's
    /// end, inside a line longer than the block. The lines found are those a line-by-line
    /// filter finds, in order, whatever the edges.
    #[test]
    fn the_lines_found_are_the_filters_at_every_block_size() {
        let texts: [&[u8]; 6] = [
            b"a nemesis line\nplain\n\nnemesis\nnemesisnemesis\nlast nemesis",
            b"nemesis\n",
            b"\n\nplain only\nno match here\n",
            b"",
            b"one very long line without the word and then nemesis at its end\nnemesis\n",
            b"nemesis\r\nplain\r\nx nemesis y\r\n",
        ];
        for text in texts {
            let want: Vec<&[u8]> = (text.split(|&b| b == b'\n'))
                .filter(|l| l.windows(7).any(|w| w == b"nemesis"))
                .collect();
            for block_bytes in 1..=text.len() + 2 {
                let mut got: Vec<Vec<u8>> = Vec::new();
                lines_containing(text, b"nemesis", block_bytes, |l| {
                    got.push(l.to_vec());
                    true
                });
                assert_eq!(
                    got,
                    want,
                    "{:?} in blocks of {block_bytes}",
                    String::from_utf8_lossy(text)
                );
                // Stopped after the second line found: no line after it is handed over.
                let mut first_two: Vec<Vec<u8>> = Vec::new();
                lines_containing(text, b"nemesis", block_bytes, |l| {
                    first_two.push(l.to_vec());
                    first_two.len() < 2
                });
                assert_eq!(first_two, want[..want.len().min(2)], "stopped after two");
            }
        }
    }
}
