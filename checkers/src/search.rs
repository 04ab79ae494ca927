//! The model, searched: for every lock no rule proved a violation on, a search over the
//! orders a correct service could have taken decides whether the lock's history is possible
//! at all (docs/checkers.md, "The ground-truth model", and "The model, searched").
//!
//! The rules are fast readings of the model and each says why it is true; together they are
//! not complete where the order of the grants is open: without tokens (Redis's lock value,
//! PostgreSQL's advisory locks), or where an acquire's answer was lost and a later renew or
//! release names it, or where equal instants leave two ops of different processes unordered,
//! a history can be impossible only because every order fails somewhere (three grants without
//! tokens inside one lease's length; two names for the one lost grant; a renew that could only
//! have come before a grant that its lease would then have blocked). The search tries the
//! orders, in time order, keeping only those still open; the rules' sentences stay the first
//! explanation, the search's the last word.
//!
//! How: the lock's events are read in time order. An order is the set of ops placed so far
//! (each at one instant inside its window, as early as it can be: for one order the earliest
//! instants are the best any service could pick), the lease in force with the instant it may
//! expire, the highest token granted and the instant of the last placement. At each instant
//! where ops complete, every order still open is extended by placing ops still in flight until
//! each `ok` op completing then is placed; an `info` op completing then is placed or never
//! takes effect. Orders that no longer differ but in being later are dropped (an order that is
//! earlier in both its last instant and its lease's expiry does everything the later one can).
//! The orders kept are bounded by the ops in flight at once, not by the history's length (the
//! lock's ops are listed once, a compact copy of the model's).
//!
//! When no order is left, the op that could not be placed is reported: a grant as
//! `double-grant` (in every order it was granted while another lease surely lasted), a renew or
//! release as `stale-renew-accepted` or `stale-release-accepted` (in every order it named no
//! current lease). One per lock, the first: after it, the lock's history has no possible
//! reading to go on from.
//!
//! Where the model leaves room, this search is the more permissive reading (so it never
//! reports what the model allows): a renew or release is matched against the lease in force,
//! by its token, else its grant id, else its process, as the model's item 6 says of a lease's
//! name, without the rule's tie-break among grants that carry the same name (a reused token is
//! `token-reused`'s); a token the history does not know (a lost answer's, or that of a grant
//! answered without one), once named, is held above the tokens granted before it, not below
//! those granted after.
//!
//! Limits, stated: at most [`ORDERS_MAX`] open orders and [`OPEN_MAX`] ops in flight per lock
//! at once, and [`PLACEMENTS_MAX`] placements tried at one instant. Past any of them the search of
//! that lock stops, with a note; the rules' readings stand.

use crate::model::{ClientOp, Func, FxSet, Model};
use crate::text::secs;
use history::{Outcome, Violation, ViolationKind};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet, VecDeque};

/// Open orders kept at once per lock.
pub(crate) const ORDERS_MAX: usize = 4096;
/// Ops in flight at once per lock (one bit each in an order).
const OPEN_MAX: usize = 64;
/// Placements tried at one instant (the work is otherwise linear in the history's length).
pub(crate) const PLACEMENTS_MAX: u64 = 1_000_000;
/// Orders the scratch of one instant keeps room for after it.
const SCRATCH_KEPT: usize = 256;
/// Grants named in a sentence.
const NAMED_MAX: usize = 3;

/// What the history says of a grant's name: not known (its acquire's answer was lost; for a
/// token, also an answer that showed none), or known to be this value or absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Known<T> {
    Unknown,
    Is(Option<T>),
}

/// One op of the lock, as the search reads it: all it reads of the op, so a search needs no
/// model (a reader that streams the history drops the ops it handed over).
#[derive(Debug)]
pub(crate) struct LockOp {
    /// The op's index in the history (what a sentence names it by).
    index: u64,
    /// When an acquire's `ok` answer came.
    answered_ns: Option<u64>,
    func: Func,
    process: u64,
    /// `ok`: it must take effect; `info` and pending ops may.
    must: bool,
    invoke_ns: u64,
    /// Its completion, or `u64::MAX` when pending.
    latest_ns: u64,
    /// A grant's token (its `ok` answer's); a renew's or release's, the token it names.
    token: Option<u64>,
    /// The same for the service's grant id, interned.
    grant: Option<u32>,
    /// An acquire whose answer came: its token and id are known, present or absent.
    answered: bool,
    ttl_ms: Option<u64>,
    lease_from_ns: Option<u64>,
    /// The op of the same process on this lock just before it: program order.
    prev: Option<usize>,
    /// A release, or a renew that did not answer ok, by a session grant's holder (model item
    /// 9): on its own session's lease it is a release that may take effect in its window.
    session_end: bool,
    /// The crash of a session grant's holder (its op went unanswered): on its own session's
    /// lease it is a release that may take effect in the op's window; on any other, nothing.
    crash: bool,
    /// It failed: it changed nothing, unless it was the holder's word on its session.
    refused: bool,
    /// An answered grant of a session's lock (model item 9).
    session: bool,
    /// Its slot while it is in flight.
    slot: Option<u8>,
    /// Its completion was read by the search (or it never completes): a kept op is dropped
    /// once done and named by no order's lease.
    done: bool,
}

/// What a lock op's own fields do not say, from the walk and the adapter's evidence.
pub(crate) struct Facts {
    /// An answered grant the walk took as a session's (model item 9).
    pub(crate) session: bool,
    /// The service's grant id it carries, numbered (equal ids, equal numbers).
    pub(crate) grant: Option<u32>,
    /// The adapter's evidence that its lease was set before its answer.
    pub(crate) lease_from_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Lease {
    /// The grant's index among the lock's ops.
    grant: u32,
    process: u64,
    token: Known<u64>,
    id: Known<u32>,
    ttl_ms: Option<u64>,
    /// A session's lock (model item 9): it lasts until its holder's word.
    session: bool,
    /// The first instant it may have expired.
    expires_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Order {
    /// Slots (ops in flight) placed, and skipped (never to take effect).
    placed: u64,
    skipped: u64,
    now_ns: u64,
    lease: Option<Lease>,
    max_token: Option<u64>,
}

/// An order's placements, lease (without its expiry) and highest token.
type OrderKey = (
    u64,
    u64,
    Option<(u32, u64, Known<u64>, Known<u32>)>,
    Option<u64>,
);

impl Order {
    fn decided(&self) -> u64 {
        self.placed | self.skipped
    }

    /// Everything but the two instants, which only ever make an order worse when later.
    fn key(&self) -> OrderKey {
        (
            self.placed,
            self.skipped,
            self.lease.map(|l| (l.grant, l.process, l.token, l.id)),
            self.max_token,
        )
    }
}

/// Why an op could not be placed in some order: the lease that blocked it, if any.
#[derive(Default)]
struct Blocked {
    /// Grants whose lease was surely live when a grant would have taken effect.
    by_lease: Vec<u32>,
    /// A renew or release met no lease, or another lease than it names.
    unnamed: bool,
}

/// What the search of one lock concluded.
pub(crate) enum Searched {
    Possible,
    Impossible(Violation),
    /// Stopped at a stated limit: why.
    Stopped(String),
}

/// The search of one lock: its ops are pushed in invoke order ([`Search::push`]) and its
/// instants searched as far as every op invoked before them is known ([`Search::run_to`]).
pub(crate) struct Search {
    lock_name: String,
    drift: crate::Drift,
    /// The lock ops from number `base` on that are still read: in flight, not yet searched,
    /// or the grant of an open order's lease.
    ops: VecDeque<LockOp>,
    base: usize,
    /// `(instant, 0 = invoke / 1 = completion, lock op)`, earliest first.
    events: BinaryHeap<Reverse<(u64, u8, usize)>>,
    /// The orders still open.
    orders: Vec<Order>,
    /// Lock-op number of the op in each slot.
    slots: [Option<usize>; OPEN_MAX],
    /// Per process, its last op pushed (program order).
    last_of: crate::FxMap<u64, usize>,
    /// Grant ids of the lock's answered grants: one of those is not a lost grant's. A
    /// streamed search knows those pushed so far, the latest `ids_max` of them (in the order
    /// first answered, `answered_order`).
    answered_ids: FxSet<u32>,
    answered_order: VecDeque<u32>,
    ids_max: usize,
    placements: u64,
    /// Scratch of `extend`, kept between instants (one allocation per lock, not per instant).
    seen: FxSet<Order>,
    queue: Vec<Order>,
    /// What decided the lock (`Impossible` or `Stopped`), after which nothing is searched.
    decided: Option<Searched>,
    /// The most ops kept at once, and the limit past which the search of the lock stops.
    pub(crate) kept_most: usize,
    kept_max: usize,
}

/// Searches lock `lock` of the model (see the module's comment).
/// `positions`: the lock's renews, releases and acquires that did not fail, in `Model::ops`
/// order (invoke order); `crashes`: the crash ops of its session grants' holders, in any order
/// (see [`search_all`]).
fn search_lock(m: &Model, lock: u32, positions: &[usize], crashes: &[usize]) -> Searched {
    debug_assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "the lock's ops come in Model::ops order"
    );
    // In invoke order, a crash after the op it shares a position with; a crash two grants of
    // the holder share, once.
    let mut all: Vec<(usize, bool)> = positions.iter().map(|&p| (p, false)).collect();
    all.extend(crashes.iter().map(|&p| (p, true)));
    all.sort_unstable();
    all.dedup();
    let mut s = Search::new(m.lock_name(lock), m.drift, usize::MAX);
    for (pos, crash) in all {
        debug_assert!(
            crash || m.ops[pos].target == lock,
            "a lock's search reads only the lock's ops"
        );
        let op = &m.ops[pos];
        s.push(if crash {
            LockOp::crash(op)
        } else {
            let answered = op.func == Func::Acquire && op.outcome == Outcome::Ok;
            let facts = Facts {
                session: answered && m.sessions.binary_search(&pos).is_ok(),
                grant: m.grant_id_of(pos),
                lease_from_ns: crate::model::lease_from_of(&m.lease_from, pos),
            };
            LockOp::of(op, &facts)
        });
    }
    s.finish()
}

/// Whether the search reads op `op` of its lock: its renews, releases and acquires, but those
/// refused (unless the refusal may end a session's belief, model item 9).
pub(crate) fn searched_op(op: &ClientOp) -> bool {
    matches!(op.func, Func::Acquire | Func::Renew | Func::Release)
        && (op.outcome != Outcome::Fail || op.session_end())
}

impl LockOp {
    /// The crash of a session grant's holder at its unanswered op `op`: a release that may
    /// take effect in the op's window, on its own session's lease only.
    pub(crate) fn crash(op: &ClientOp) -> LockOp {
        LockOp {
            index: op.index,
            answered_ns: None,
            func: Func::Release,
            process: op.process,
            must: false,
            session_end: true,
            crash: true,
            refused: false,
            session: false,
            invoke_ns: op.invoke_ns,
            latest_ns: op.complete_or_max(),
            token: None,
            grant: None,
            answered: false,
            ttl_ms: None,
            lease_from_ns: None,
            prev: None,
            slot: None,
            done: false,
        }
    }

    /// The lock op `op`, as the search reads it.
    pub(crate) fn of(op: &ClientOp, facts: &Facts) -> LockOp {
        let answered = op.func == Func::Acquire && op.outcome == Outcome::Ok;
        let named = op.func != Func::Acquire || answered;
        LockOp {
            index: op.index,
            answered_ns: if answered { op.complete_ns() } else { None },
            func: op.func,
            process: op.process,
            must: op.outcome == Outcome::Ok,
            session_end: op.session_end(),
            crash: false,
            refused: op.outcome == Outcome::Fail,
            session: answered && facts.session,
            invoke_ns: op.invoke_ns,
            latest_ns: op.complete_or_max(),
            token: if named { op.token() } else { None },
            grant: if named { facts.grant } else { None },
            answered,
            ttl_ms: op.ttl_ms(),
            lease_from_ns: if answered { facts.lease_from_ns } else { None },
            prev: None,
            slot: None,
            done: false,
        }
    }
}

impl Search {
    /// The search of lock `lock_name` under `drift`; past `kept_max` ops kept at once (ops
    /// held by one still in flight) it stops, with a note.
    pub(crate) fn new(lock_name: &str, drift: crate::Drift, kept_max: usize) -> Search {
        Search {
            lock_name: lock_name.to_string(),
            drift,
            ops: VecDeque::new(),
            base: 0,
            events: BinaryHeap::new(),
            orders: vec![Order {
                placed: 0,
                skipped: 0,
                now_ns: 0,
                lease: None,
                max_token: None,
            }],
            slots: [None; OPEN_MAX],
            last_of: crate::FxMap::default(),
            answered_ids: FxSet::default(),
            answered_order: VecDeque::new(),
            ids_max: usize::MAX,
            placements: 0,
            seen: FxSet::default(),
            queue: Vec::new(),
            decided: None,
            kept_most: 0,
            kept_max,
        }
    }

    fn op(&self, i: usize) -> &LockOp {
        &self.ops[i - self.base]
    }

    /// The slot of lock op `i`, if it is in flight (an op no longer kept is not).
    fn slot_of(&self, i: usize) -> Option<u8> {
        i.checked_sub(self.base)
            .and_then(|k| self.ops.get(k))
            .and_then(|o| o.slot)
    }

    /// The lock's next op, in invoke order (a crash after the op it shares a position with).
    pub(crate) fn push(&mut self, mut op: LockOp) {
        if self.decided.is_some() {
            return;
        }
        let i = self.base + self.ops.len();
        op.prev = self.last_of.insert(op.process, i);
        // A process's last op no longer kept is in no slot, which is all program order asks
        // of it: forgotten, so that processes that came and went (a client replaced after a
        // lost answer) are not kept for the whole history.
        if self.last_of.len() > 2 * self.ops.len() + 64 {
            let base = self.base;
            self.last_of.retain(|_, &mut at| at >= base);
        }
        self.events.push(Reverse((op.invoke_ns, 0, i)));
        // An op that never completes stays in its slot: never done.
        if op.latest_ns != u64::MAX {
            self.events.push(Reverse((op.latest_ns, 1, i)));
        }
        if let (true, Some(id)) = (op.answered, op.grant) {
            if self.answered_ids.insert(id) && self.ids_max != usize::MAX {
                self.answered_order.push_back(id);
                if self.answered_order.len() > self.ids_max {
                    let old = self.answered_order.pop_front().expect("over the limit");
                    self.answered_ids.remove(&old);
                }
            }
        }
        self.ops.push_back(op);
        self.kept_most = self.kept_most.max(self.ops.len());
        if self.ops.len() > self.kept_max {
            let held = self.ops.front().map_or(0, |o| o.index);
            self.stop(format!(
                "more than {} of its ops kept at once behind op {held}, still in flight",
                self.kept_max
            ));
        }
    }

    /// What decided the lock: nothing is searched or kept after it.
    fn stop(&mut self, why: String) {
        self.decide(Searched::Stopped(why));
    }

    fn decide(&mut self, s: Searched) {
        self.decided = Some(s);
        self.ops = VecDeque::new();
        self.events = BinaryHeap::new();
        self.orders = Vec::new();
        self.seen = FxSet::default();
        self.queue = Vec::new();
        self.last_of = crate::FxMap::default();
        self.answered_ids = FxSet::default();
    }

    /// The search's verdict on the lock, once every op is pushed.
    pub(crate) fn finish(mut self) -> Searched {
        self.run_to(u64::MAX);
        self.decided.take().unwrap_or(Searched::Possible)
    }

    /// A streamed search remembers the ids of the latest `ids_max` answered grants only: an
    /// older one named for a lost grant then fits it (a finding missed, never one made up).
    pub(crate) fn remember_ids(mut self, ids_max: usize) -> Search {
        self.ids_max = ids_max;
        self
    }

    /// The grant ids it remembers as answered.
    #[cfg(test)]
    pub(crate) fn ids_kept(&self) -> usize {
        self.answered_ids.len()
    }

    /// The processes whose last op it remembers (program order).
    #[cfg(test)]
    pub(crate) fn processes_kept(&self) -> usize {
        self.last_of.len()
    }

    /// A violation it proved, once (the search of the lock stops there).
    pub(crate) fn impossible(&self) -> Option<&Violation> {
        match &self.decided {
            Some(Searched::Impossible(v)) => Some(v),
            _ => None,
        }
    }

    /// Searches every instant before `before_ns`: the caller has pushed every op invoked
    /// before it.
    pub(crate) fn run_to(&mut self, before_ns: u64) {
        // Bounded by the events: each pass consumes those of one instant.
        while let Some(&Reverse((t, _, _))) = self.events.peek() {
            if t >= before_ns || self.decided.is_some() {
                break;
            }
            // Invokes first at an instant, since equal times are not ordered (model item 8):
            // an op invoked at the instant another completes may have taken effect before it.
            let mut completing: Vec<usize> = Vec::new();
            while let Some(&Reverse((at, what, i))) = self.events.peek() {
                if at != t {
                    break;
                }
                self.events.pop();
                if what == 1 {
                    completing.push(i);
                    continue;
                }
                let Some(b) = self.slots.iter().position(Option::is_none) else {
                    self.stop(format!(
                        "more than {OPEN_MAX} ops of the lock in flight at once at {}",
                        secs(t)
                    ));
                    return;
                };
                self.slots[b] = Some(i);
                self.ops[i - self.base].slot = Some(b as u8);
            }
            if !completing.is_empty() {
                self.instant(t, &completing);
            }
        }
    }

    /// The ops `completing` at `t`: every order still open extended to place those that
    /// must, the rest decided never; the ops no order reads any more dropped.
    fn instant(&mut self, t: u64, completing: &[usize]) {
        let required: Vec<usize> = completing
            .iter()
            .copied()
            .filter(|&i| self.op(i).must)
            .collect();
        let mut blocked = Blocked::default();
        self.placements = 0;
        let orders = std::mem::take(&mut self.orders);
        let next = match self.extend(&orders, t, completing, &required, &mut blocked) {
            Ok(next) => next,
            Err(why) => return self.stop(why),
        };
        if next.is_empty() {
            let v = self.blame(&orders, t, completing, &required);
            return self.decide(Searched::Impossible(v));
        }
        let mut orders = next;
        // The ops that completed are decided in every order: free their slots.
        for &i in completing {
            let op = &mut self.ops[i - self.base];
            op.done = true;
            if let Some(b) = op.slot.take() {
                self.slots[b as usize] = None;
                let bit = !(1u64 << b);
                for o in &mut orders {
                    o.placed &= bit;
                    o.skipped &= bit;
                }
            }
        }
        self.orders = prune(orders);
        // The ops in front that are done and no open order's lease names leave.
        let named = (self.orders.iter())
            .filter_map(|o| o.lease.map(|l| l.grant as usize))
            .min()
            .unwrap_or(usize::MAX);
        // Bounded by the ops kept.
        while self.ops.front().is_some_and(|o| o.done && o.slot.is_none()) && self.base < named {
            self.ops.pop_front();
            self.base += 1;
        }
    }

    /// Every order that extends one of `orders` by placing ops in flight (each at an instant
    /// by `t`) until each of `required` is placed, ending with an op completing at `t`: later
    /// placements wait for later instants, which lose nothing (their instants stay free).
    fn extend(
        &mut self,
        orders: &[Order],
        t: u64,
        completing: &[usize],
        required: &[usize],
        blocked: &mut Blocked,
    ) -> Result<Vec<Order>, String> {
        let mut req_mask = 0u64;
        let mut done_mask = 0u64;
        for &i in completing {
            let b = 1u64 << self.slot_of(i).expect("in flight");
            done_mask |= b;
            if required.contains(&i) {
                req_mask |= b;
            }
        }
        let mut out: Vec<Order> = Vec::new();
        let mut seen = std::mem::take(&mut self.seen);
        let mut queue = std::mem::take(&mut self.queue);
        seen.clear();
        queue.clear();
        for o in orders {
            if o.placed & req_mask == req_mask {
                out.push(o.clone());
            }
            if seen.insert(o.clone()) {
                queue.push(o.clone());
            }
        }
        let result = self.expand(
            &mut seen, &mut queue, &mut out, t, done_mask, req_mask, blocked,
        );
        // Kept between instants, but not at the size of the busiest one: a streamed search
        // lives as long as the history.
        seen.shrink_to(SCRATCH_KEPT);
        queue.shrink_to(SCRATCH_KEPT);
        self.seen = seen;
        self.queue = queue;
        result?;
        let out = prune(out);
        if out.len() > ORDERS_MAX {
            return Err(format!(
                "more than {ORDERS_MAX} orders open at once, at {}",
                secs(t)
            ));
        }
        Ok(out)
    }

    /// The breadth of `extend`: every placement from the orders queued, each new order once.
    #[allow(clippy::too_many_arguments)]
    fn expand(
        &mut self,
        seen: &mut FxSet<Order>,
        queue: &mut Vec<Order>,
        out: &mut Vec<Order>,
        t: u64,
        done_mask: u64,
        req_mask: u64,
        blocked: &mut Blocked,
    ) -> Result<(), String> {
        // Bounded by `seen`: every order is expanded once, and by PLACEMENTS_MAX.
        while let Some(o) = queue.pop() {
            for b in 0..OPEN_MAX {
                let Some(i) = self.slots[b] else { continue };
                if o.decided() & (1 << b) != 0 {
                    continue;
                }
                self.placements += 1;
                if self.placements > PLACEMENTS_MAX {
                    return Err(format!(
                        "more than {PLACEMENTS_MAX} placements tried at one instant, {}",
                        secs(t)
                    ));
                }
                let Some(n) = self.place(&o, i, t, blocked) else {
                    continue;
                };
                if !seen.insert(n.clone()) {
                    continue;
                }
                if seen.len() > ORDERS_MAX * 16 {
                    return Err(format!(
                        "more than {} orders open at once, at {}",
                        ORDERS_MAX * 16,
                        secs(t)
                    ));
                }
                if (1u64 << b) & done_mask != 0 && n.placed & req_mask == req_mask {
                    out.push(n.clone());
                }
                queue.push(n);
            }
        }
        // An info op completing now and still undecided in an order never took effect there:
        // its slot is freed by the caller.
        Ok(())
    }

    /// Order `o` with lock op `i` placed as early as it can be by `t`, if a correct service may
    /// do it then.
    fn place(&self, o: &Order, i: usize, t: u64, blocked: &mut Blocked) -> Option<Order> {
        let op = self.op(i);
        let mut n = o.clone();
        self.decide_earlier(&mut n, op)?;
        let mut now_ns = o.now_ns.max(op.invoke_ns);
        match op.func {
            Func::Acquire => now_ns = self.place_grant(o, &mut n, i, t, now_ns, blocked)?,
            Func::Renew | Func::Release => self.place_act(o, &mut n, op, now_ns, blocked)?,
            _ => return None,
        }
        if now_ns > t || now_ns > op.latest_ns {
            return None;
        }
        n.now_ns = now_ns;
        n.placed |= 1u64 << self.slot_of(i).expect("in flight");
        Some(n)
    }

    /// Program order: the process's earlier ops come first; one that may never have taken
    /// effect is then decided never, one that must is a block (`None`).
    fn decide_earlier(&self, n: &mut Order, op: &LockOp) -> Option<()> {
        let mut p = op.prev;
        // Bounded by the process's ops on the lock.
        while let Some(q) = p {
            let Some(b) = self.slot_of(q) else { break };
            let bit = 1u64 << b;
            if n.decided() & bit == 0 {
                if self.op(q).must {
                    return None;
                }
                n.skipped |= bit;
            }
            p = self.op(q).prev;
        }
        Some(())
    }

    /// The shortest a lease of `ttl_ms` may have lasted, under the run's drift.
    fn lower_ns(&self, ttl_ms: Option<u64>) -> u64 {
        ttl_ms.map_or(0, |t| self.drift.lower_ns(t))
    }

    /// Grant `i` placed into `n`, not before the lease in force may have expired: the instant
    /// it takes effect, or `None` when its token cannot come after those granted before.
    fn place_grant(
        &self,
        o: &Order,
        n: &mut Order,
        i: usize,
        t: u64,
        mut now_ns: u64,
        blocked: &mut Blocked,
    ) -> Option<u64> {
        let op = self.op(i);
        if let Some(l) = o.lease {
            now_ns = now_ns.max(l.expires_ns);
            if now_ns > t.min(op.latest_ns) && op.must {
                blocked.by_lease.push(l.grant);
            }
        }
        // A grant without a token fits anywhere in token order.
        if let (Some(tk), Some(max)) = (op.token, o.max_token) {
            if tk <= max {
                return None;
            }
        }
        n.max_token = o.max_token.max(op.token);
        let expires_ns = match op.lease_from_ns {
            Some(from) => now_ns.max(from.saturating_add(self.lower_ns(op.ttl_ms))),
            None => now_ns.saturating_add(self.lower_ns(op.ttl_ms)),
        };
        // A grant answered without a token may have had one the answer did not show (model
        // item 6: a token no grant carries may name it); one answered without a grant id had
        // none.
        let (token, id) = if op.answered {
            (
                op.token.map_or(Known::Unknown, |t| Known::Is(Some(t))),
                Known::Is(op.grant),
            )
        } else {
            (Known::Unknown, Known::Unknown)
        };
        n.lease = Some(Lease {
            grant: i as u32,
            process: op.process,
            token,
            id,
            ttl_ms: op.ttl_ms,
            session: op.session,
            expires_ns,
        });
        Some(now_ns)
    }

    /// A renew or release placed into `n` at `now_ns`: on the lease in force, if it names it.
    fn place_act(
        &self,
        o: &Order,
        n: &mut Order,
        op: &LockOp,
        now_ns: u64,
        blocked: &mut Blocked,
    ) -> Option<()> {
        let Some(mut l) = o.lease else {
            blocked.unnamed = true;
            return None;
        };
        if op.crash {
            // Only the crashed holder's own session ends with it.
            if !(l.session && l.process == op.process) {
                return None;
            }
            n.lease = None;
            return Some(());
        }
        if !self.names(o, n, &mut l, op) {
            if op.must {
                blocked.by_lease.push(l.grant);
            }
            return None;
        }
        if op.session_end && l.session && l.process == op.process {
            // The holder's word on its own session: its belief ends here.
            n.lease = None;
        } else if op.refused {
            return None;
        } else {
            n.lease = (op.func == Func::Renew).then(|| Lease {
                expires_ns: now_ns.saturating_add(self.lower_ns(op.ttl_ms.or(l.ttl_ms))),
                ..l
            });
        }
        Some(())
    }

    /// Whether renew or release `op` names lease `l`: by its token, else its grant id, else its
    /// process. Naming a token or id the history does not know says which it was: `l` (and
    /// `n`'s highest token) learn it.
    fn names(&self, o: &Order, n: &mut Order, l: &mut Lease, op: &LockOp) -> bool {
        match (op.token, op.grant) {
            (Some(tk), _) => match l.token {
                Known::Is(own) => own == Some(tk),
                // A token the history does not know (a lost answer, or one without a readable
                // token) is unknown, not any: naming it says which, and it is above every
                // earlier grant's (tokens are positive).
                Known::Unknown => {
                    let fits = tk > 0 && o.max_token.is_none_or(|m| tk > m);
                    if fits {
                        l.token = Known::Is(Some(tk));
                        n.max_token = Some(tk);
                    }
                    fits
                }
            },
            (None, Some(g)) => match l.id {
                Known::Is(own) => own == Some(g),
                // An id an answered grant carries is not a lost grant's.
                Known::Unknown => {
                    let fits = !self.answered_ids.contains(&g);
                    if fits {
                        l.id = Known::Is(Some(g));
                    }
                    fits
                }
            },
            (None, None) => l.process == op.process,
        }
    }

    /// The violation when no order places every `ok` op completing at `t`: the first of them
    /// that no order can place on its own (a grant before a renew before a release when only
    /// their sum is impossible).
    fn blame(
        &mut self,
        orders: &[Order],
        t: u64,
        completing: &[usize],
        required: &[usize],
    ) -> Violation {
        let mut culprit: Option<(usize, Blocked)> = None;
        for &r in required {
            let mut blocked = Blocked::default();
            self.placements = 0;
            let alone = self.extend(orders, t, completing, &[r], &mut blocked);
            if matches!(&alone, Ok(v) if v.is_empty()) {
                culprit = Some((r, blocked));
                break;
            }
        }
        let (r, blocked) = culprit.unwrap_or_else(|| {
            let r = required
                .iter()
                .copied()
                .min_by_key(|&i| match self.op(i).func {
                    Func::Acquire => 0,
                    Func::Renew => 1,
                    _ => 2,
                })
                .expect("an impossible instant has a required op");
            let mut blocked = Blocked::default();
            self.placements = 0;
            let _ = self.extend(orders, t, completing, &[r], &mut blocked);
            (r, blocked)
        });
        self.violation(r, t, blocked)
    }

    fn violation(&self, r: usize, t: u64, blocked: Blocked) -> Violation {
        let op = self.op(r);
        let lock = self.lock_name.clone();
        let mut by: Vec<u32> = blocked.by_lease;
        by.sort_unstable();
        by.dedup();
        by.retain(|&g| g as usize != r);
        let mut ops = vec![op.index];
        let mut first_ns = op.invoke_ns;
        let named: Vec<String> = by
            .iter()
            .take(NAMED_MAX)
            .map(|&g| {
                let go = self.op(g as usize);
                ops.push(go.index);
                first_ns = first_ns.min(go.invoke_ns);
                self.lease_phrase(go)
            })
            .collect();
        let more = by.len().saturating_sub(NAMED_MAX);
        let list = |what: &str| leases_list(what, &named, more);
        let asked = format!("invoked at {}, answered at {}", secs(op.invoke_ns), secs(t));
        let (kind, explanation) = match op.func {
            Func::Acquire => (
                ViolationKind::DoubleGrant,
                format!(
                    "p{} was granted {lock} (op {}, {asked}), yet no order of {lock}'s grants, \
                     renews and releases up to then fits a correct service: in every one, this \
                     grant took effect while another lease was surely still live{}; some two \
                     of these grants held the lock at once",
                    op.process,
                    op.index,
                    list("the leases in the way")
                ),
            ),
            f => {
                let mut instead = list("in force instead, in some order");
                if blocked.unnamed {
                    instead = if instead.is_empty() {
                        " (no lease was in force: released, or none granted)".to_string()
                    } else {
                        format!("{}, or none at all)", &instead[..instead.len() - 1])
                    };
                }
                let kind = if f == Func::Renew {
                    ViolationKind::StaleRenewAccepted
                } else {
                    ViolationKind::StaleReleaseAccepted
                };
                (kind, self.stale_sentence(op, &lock, &asked, &instead))
            }
        };
        ops.sort_unstable();
        ops.dedup();
        Violation {
            cycle: Vec::new(),
            kind,
            lock: Some(lock),
            ops,
            window_ns: [first_ns, t],
            nemesis: Vec::new(),
            explanation,
        }
    }

    /// The sentence of a renew or release accepted though it named no lease in force:
    /// `instead`, the leases that were (or none).
    fn stale_sentence(&self, op: &LockOp, lock: &str, asked: &str, instead: &str) -> String {
        format!(
            "p{}'s {} of {lock} (op {}, {asked}{}) was accepted, yet in no order of \
             {lock}'s grants, renews and releases up to then was the lease it names \
             the current one{instead}: it named no lease a correct service could \
             have had in force",
            op.process,
            op.func.as_str(),
            op.index,
            match (op.token, op.grant) {
                (Some(tk), _) => format!(", token {tk}"),
                (None, Some(_)) => ", by the service's grant id".to_string(),
                _ => ", without token or grant id".to_string(),
            }
        )
    }

    /// A grant in a violation's sentence: its process, op and instants.
    fn lease_phrase(&self, go: &LockOp) -> String {
        format!(
            "p{}'s (op {}, asked at {}{})",
            go.process,
            go.index,
            secs(go.invoke_ns),
            match go.answered_ns {
                Some(d) => format!(", answered at {}", secs(d)),
                None => ", answer lost".to_string(),
            }
        )
    }
}

/// The grants named in a violation's sentence, as ` (what: a, b and n more)`, or nothing.
fn leases_list(what: &str, named: &[String], more: usize) -> String {
    if named.is_empty() {
        String::new()
    } else {
        format!(
            " ({what}: {}{})",
            named.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    }
}

/// Drops every order another one does better than: same placements, lease and tokens, with a
/// last instant and a lease expiry no later.
fn prune(mut orders: Vec<Order>) -> Vec<Order> {
    orders.sort_by(|a, b| {
        (a.key(), a.now_ns, a.lease.map(|l| l.expires_ns)).cmp(&(
            b.key(),
            b.now_ns,
            b.lease.map(|l| l.expires_ns),
        ))
    });
    let mut out: Vec<Order> = Vec::with_capacity(orders.len());
    let mut group_start = 0;
    for o in orders {
        if out.get(group_start).is_none_or(|g| g.key() != o.key()) {
            group_start = out.len();
        }
        let expires = o.lease.map_or(0, |l| l.expires_ns);
        // Sorted by now within a group: an earlier one dominates when its expiry is no later.
        let dominated = out[group_start..]
            .iter()
            .any(|k| k.now_ns <= o.now_ns && k.lease.map_or(0, |l| l.expires_ns) <= expires);
        if !dominated {
            out.push(o);
        }
    }
    out
}

/// The search of every lock, each on its own (run beside the rules: which locks a rule proved
/// a violation on is known only after them, and [`judged`] drops those).
pub(crate) fn search_all(m: &Model) -> Vec<(u32, Searched)> {
    // One pass over the ops for every lock, not one per lock.
    let mut by_lock: Vec<Vec<usize>> = vec![Vec::new(); m.locks.len()];
    for (pos, op) in m.ops.iter().enumerate() {
        if (op.target as usize) < by_lock.len() && searched_op(op) {
            by_lock[op.target as usize].push(pos);
        }
    }
    // The crashes of each lock's session grants' holders (model item 9): each is the holder's
    // word on its own session, at its crash op's window, whatever that op asked or named (a
    // store write, another lock's acquire, a renew naming another grant).
    let mut crashes: Vec<Vec<usize>> = vec![Vec::new(); m.locks.len()];
    for g in m.grants.iter().filter(|g| m.is_session(g)) {
        let Some(list) = crashes.get_mut(g.lock as usize) else {
            continue;
        };
        list.extend(
            g.epoch_ops
                .iter()
                .map(|&e| e as usize)
                .filter(|&e| m.ops[e].session_end() && m.ops[e].outcome == Outcome::Info),
        );
    }
    by_lock
        .iter()
        .zip(&crashes)
        .enumerate()
        .map(|(lock, (positions, crashes))| {
            (lock as u32, search_lock(m, lock as u32, positions, crashes))
        })
        .collect()
}

/// What the search says of the locks on which no rule proved anything (`proven`: the locks a
/// violation names already; the search would only restate them).
pub(crate) fn judged(
    locks: &[String],
    searched: Vec<(u32, Searched)>,
    proven: &HashSet<String>,
) -> crate::CheckOutput {
    let mut out = crate::CheckOutput::new();
    let mut judged = 0;
    for (lock, s) in searched {
        let name = locks.get(lock as usize).map_or("?", String::as_str);
        if proven.contains(name) {
            continue;
        }
        judged += 1;
        match s {
            Searched::Possible => {}
            Searched::Impossible(v) => out.violations.push(v),
            Searched::Stopped(why) => out.notes.push(format!(
                "the search of {name}'s orders stopped ({why}): its rules' readings stand"
            )),
        }
    }
    out.valid = if out.violations.is_empty() {
        history::Validity::Valid
    } else {
        history::Validity::Invalid
    };
    out.nothing_to_judge(judged > 0, || {
        "no lock was left to search: a rule proved a violation on every lock (or there was no \
         lock op)"
            .to_string()
    });
    out
}
