//! The store rules (`store.rs`) made as the history is read: `stale-write-accepted` and both
//! readings of `lost-update`, with the batch's pairs and words, each from what it keeps of
//! the ops it still needs ([`StoreOp`]), never from the ops themselves.
//!
//! Ops are walked in position order, which is invoke order (times never go back), so once the
//! walk is past instant `t` (the next op to walk was invoked after it), every op completed
//! before `t` has been walked:
//!
//! - a write is judged for `stale-write-accepted` once the walk is past its completion: every
//!   write the store accepted before it was sent before it answered. Each key's writes are
//!   judged in seq order against its frontier, the writes no other write beats (a lower or
//!   equal seq with a higher token, or the same token and an earlier place in the batch's
//!   order): the last of them below a write's seq is the one the batch names. A write walked
//!   below a seq already judged (the store's order contradicting real time) is counted out of
//!   order: it is judged with what is kept, and the reading may then differ from the batch's;
//! - the counters' acknowledged writes leave the walk in (completion, position) order, the
//!   batch's: each is paired with the first write of its value, and counted into what a final
//!   read sent after its completion must show. A final read is judged as it is walked.
//!
//! A key is an account, not a counter, from the first op of a transfer that touches it, in
//! position order, and a final read is a bank's closing read from the first op of any transfer:
//! the batch's reading too.

use crate::model::{ClientOp, Func};
use crate::store::{same_value, short_final, stale_write, StoreOp};
use crate::FxMap;
use history::{Outcome, Violation};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// The most (key, value) pairs the `lost-update` reading remembers the first write of; past
/// it the earliest remembered is forgotten (counted in [`StoreStream::forgotten`]): a write of
/// a value forgotten is then taken as the first of it. A counter moves on, so a duplicate is
/// near its first. 7/8 of 65,536, the most a table of 65,536 slots holds before it doubles:
/// about 4 MiB in all.
pub(crate) const VALUES_REMEMBERED_MAX: usize = 57_344;

/// A write waiting to leave, in `(order, position)` order.
type Waiting = Reverse<((u64, usize), StoreOp)>;

/// One key's reading.
#[derive(Default)]
struct KeyStore {
    /// Whether an op of a transfer has touched it: an account from then on.
    account: bool,
    /// Acknowledged writes with seq and token, by seq: ascending seq, strictly ascending
    /// token (one is kept only while no other beats it).
    frontier: BTreeMap<u64, StoreOp>,
    /// Writes of the frontier's kind walked and not yet judged, by seq.
    fenced: BinaryHeap<Waiting>,
    /// The highest seq judged.
    judged_seq: Option<u64>,
    /// Acknowledged counter writes left, and the last of them to leave.
    acked: u64,
    last_acked: Option<StoreOp>,
    /// Indeterminate counter writes walked.
    unsure: u64,
}

/// The store rules' state.
pub(crate) struct StoreStream {
    /// Per key id.
    keys: Vec<KeyStore>,
    /// Acknowledged counter writes walked and not yet left, by (completion, position).
    counted: BinaryHeap<Waiting>,
    /// The first write of each (key, value) remembered, and the order they were remembered in.
    first_of: FxMap<(u32, i64), First>,
    remembered: VecDeque<(u32, i64)>,
    /// [`VALUES_REMEMBERED_MAX`] unless the tests set another.
    pub(crate) remembered_max: usize,
    pub(crate) remembered_most: usize,
    pub(crate) forgotten: u64,
    /// Writes walked below a seq already judged on their key.
    pub(crate) out_of_order: u64,
    /// The most writes waiting to be judged or to leave at once.
    pub(crate) waiting_most: usize,
    /// What was proven since it was last taken.
    found: Vec<Violation>,
    /// An op of a transfer was walked: a bank run's from there on (`store::bank_from`).
    banking: bool,
}

impl Default for StoreStream {
    fn default() -> Self {
        StoreStream {
            keys: Vec::new(),
            counted: BinaryHeap::new(),
            first_of: FxMap::default(),
            remembered: VecDeque::new(),
            remembered_max: VALUES_REMEMBERED_MAX,
            remembered_most: 0,
            forgotten: 0,
            out_of_order: 0,
            waiting_most: 0,
            found: Vec::new(),
            banking: false,
        }
    }
}

/// What a `lost-update` pair words of the first write of a value: a third of a [`StoreOp`],
/// for the many remembered.
#[derive(Clone, Copy)]
struct First {
    process: u64,
    index: u64,
    invoke_ns: u64,
    complete_ns: u64,
}

impl First {
    fn of(w: &StoreOp) -> First {
        First {
            process: w.process,
            index: w.index,
            invoke_ns: w.invoke_ns,
            complete_ns: w.complete_ns,
        }
    }

    /// The write again, as the sentences read it, for value `value` of key `key`.
    fn op(&self, key: u32, value: i64) -> StoreOp {
        StoreOp {
            pos: 0,
            key,
            process: self.process,
            index: self.index,
            invoke_ns: self.invoke_ns,
            complete_ns: self.complete_ns,
            seq: None,
            token: None,
            value: Some(value),
        }
    }
}

/// Whether `p` beats `e` in the batch's reading: a higher token, or the same token earlier in
/// (seq, position) order.
fn beats(p: &StoreOp, e: &StoreOp) -> bool {
    (p.token > e.token) || (p.token == e.token && (p.seq, p.pos) < (e.seq, e.pos))
}

impl StoreStream {
    fn key(&mut self, key: u32) -> &mut KeyStore {
        let k = key as usize;
        if self.keys.len() <= k {
            self.keys.resize_with(k + 1, KeyStore::default);
        }
        &mut self.keys[k]
    }

    /// The op at `pos` was walked: every op invoked before it has been; `transfer`: it belongs
    /// to a transfer. `keys`: the keys' names, by id.
    pub(crate) fn walked(&mut self, pos: usize, o: &ClientOp, transfer: bool, keys: &[String]) {
        self.banking |= transfer;
        if o.func.is_lock_op() || o.target == crate::model::NO_TARGET {
            return;
        }
        // Every write completed before this op was sent has been walked.
        self.leave(o.invoke_ns, keys);
        let op = StoreOp::of(pos, o);
        let k = self.key(o.target);
        k.account |= transfer;
        let account = k.account;
        match (o.func, o.outcome) {
            (Func::Write, Outcome::Ok) => {
                if let (Some(seq), Some(_)) = (op.seq, op.token) {
                    if k.judged_seq.is_some_and(|j| seq < j) {
                        self.out_of_order += 1;
                    }
                    let k = self.key(o.target);
                    enter(&mut k.frontier, op);
                    k.fenced.push(Reverse(((seq, pos), op)));
                }
                if !account {
                    self.counted.push(Reverse(((op.complete_ns, pos), op)));
                }
            }
            (Func::Write, Outcome::Info | Outcome::Pending) if !account => {
                self.key(o.target).unsure += 1
            }
            (Func::Read, Outcome::Ok) if o.is_final && !account && !self.banking => {
                let k = &self.keys[o.target as usize];
                let counts = (k.acked, k.unsure);
                let name = name_of(keys, o.target);
                if let Some(v) = short_final(name, &op, counts, k.last_acked.as_ref()) {
                    self.found.push(v);
                }
            }
            _ => {}
        }
    }

    /// Whether key `key` is an account (an op of a transfer touched it).
    pub(crate) fn is_account(&self, key: u32) -> bool {
        self.keys.get(key as usize).is_some_and(|k| k.account)
    }

    /// Whether `o` reads or writes a bank's account: a key a transfer touched, or for a final
    /// read any key once a transfer began (`store::bank_from`).
    pub(crate) fn of_the_bank(&self, o: &ClientOp) -> bool {
        self.is_account(o.target) || (self.banking && o.func == Func::Read && o.is_final)
    }

    /// The counter writes completed before `before_ns` leave, in the batch's order: each is
    /// paired with the first of its value and counted as acknowledged.
    fn leave(&mut self, before_ns: u64, keys: &[String]) {
        // Bounded by the writes waiting.
        while let Some(&Reverse(((done_ns, _), w))) = self.counted.peek() {
            if done_ns >= before_ns {
                break;
            }
            self.counted.pop();
            let k = self.key(w.key);
            k.acked += 1;
            k.last_acked = Some(w);
            let Some(v) = w.value else { continue };
            match self.first_of.get(&(w.key, v)) {
                Some(a) => {
                    let a = a.op(w.key, v);
                    (self.found).push(same_value(name_of(keys, w.key), &a, &w))
                }
                None => {
                    // Forgotten before the new one is remembered: the table never holds one
                    // more than the limit, so it never grows past its size at the limit.
                    if self.remembered.len() >= self.remembered_max {
                        let old = self.remembered.pop_front().expect("at the limit");
                        self.first_of.remove(&old);
                        self.forgotten += 1;
                    }
                    self.first_of.insert((w.key, v), First::of(&w));
                    self.remembered.push_back((w.key, v));
                    self.remembered_most = self.remembered_most.max(self.remembered.len());
                }
            }
        }
    }

    /// Judges what the walk, past instant `walked_ns` (`u64::MAX`: the history is read),
    /// allows, and returns what was proven since last asked, each worded with its key's name.
    pub(crate) fn judge(&mut self, walked_ns: u64, keys: &[String]) -> Vec<Violation> {
        self.leave(walked_ns, keys);
        let mut waiting = self.counted.len();
        for (id, k) in self.keys.iter_mut().enumerate() {
            // Bounded by the key's writes waiting.
            while let Some(&Reverse(((seq, _), b))) = k.fenced.peek() {
                if b.complete_ns >= walked_ns {
                    break;
                }
                k.fenced.pop();
                if let Some((_, a)) = k.frontier.range(..seq).next_back() {
                    if a.token > b.token {
                        let name = name_of(keys, id as u32);
                        self.found.push(stale_write(name, a, &b));
                    }
                }
                k.judged_seq = k.judged_seq.max(Some(seq));
            }
            // A write judged later in order has a seq at or past the highest judged: only the
            // last entry below it, and those after, can be what it is judged against.
            if let Some(j) = k.judged_seq {
                if let Some(&last_below) = k.frontier.range(..j).next_back().map(|(s, _)| s) {
                    if k.frontier
                        .first_key_value()
                        .is_some_and(|(&s, _)| s < last_below)
                    {
                        k.frontier = k.frontier.split_off(&last_below);
                    }
                }
            }
            waiting += k.fenced.len();
        }
        self.waiting_most = self.waiting_most.max(waiting);
        std::mem::take(&mut self.found)
    }
}

/// `e` joins `frontier` unless a write kept beats it; the writes it beats leave.
fn enter(frontier: &mut BTreeMap<u64, StoreOp>, e: StoreOp) {
    let seq = e.seq.expect("a write with a seq");
    if let Some((_, p)) = frontier.range(..=seq).next_back() {
        if beats(p, &e) {
            return;
        }
    }
    // Bounded by the entries kept: each pass removes one.
    while let Some((&s, w)) = frontier.range(seq..).next() {
        if !beats(&e, w) {
            break;
        }
        frontier.remove(&s);
    }
    frontier.insert(seq, e);
}

fn name_of(keys: &[String], id: u32) -> &str {
    keys.get(id as usize).map_or("?", |s| s.as_str())
}
