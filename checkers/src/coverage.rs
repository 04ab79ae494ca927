//! Coverage: what a history exercised (docs/checkers.md, "Coverage"). A verdict of `valid`
//! says the rules found nothing; these counts say what the rules had to look at: which client
//! stalls ended where, whether waiters stalled, which faults met client ops and grants.
//!
//! Counted as the history is read ([`CoverageCounts`]): the nemesis events as they come, the
//! client ops in invoke order (as the walk takes them) and each grant once it is closed. What
//! it keeps is per fault still waiting (its instants, its cells or its stall) and per process
//! not crashed, never per op or per grant: a stall is placed on the op or grant its process had
//! when it began, what its tally reads of that grant is taken when the grant closes, and once
//! nothing to come can change it the stall is tallied and let go; a fault aimed at leases is
//! counted and let go once it met every lease it can and a grant walked after it says what
//! it exercised. At most [`FAULTS_KEPT_MAX`] wait at once. The batch feeds it the same way
//! from the whole model.

use crate::exercised::{FaultAims, Lease};
use crate::faults::{Fault, FaultLog};
use crate::model::{ClientOp, Drift, Func, Grant, Model, SpanEnd, View};
use crate::FxMap;
use history::coverage::{Cell, Coverage, FaultCoverage};
use history::{stall_fields, FaultFamily, FaultOp, Op, Outcome};
use serde_json::Value;
use std::collections::VecDeque;

/// One client stall and what the passes learn about it.
#[derive(Debug, Default)]
struct Stall {
    /// Its family's kind: one whose faults stall clients (`Aim::ClientStall`).
    kind: &'static str,
    process: u64,
    /// Interned lock the stall names, `None` when it names none or one the history never used.
    lock: Option<u32>,
    names_lock: bool,
    /// The lock it names, by name (placed by id once it is reached).
    lock_name: Option<String>,
    token: Option<u64>,
    /// What the stall was aimed at (`value.shape`: boundary, next-grant, long, waiter).
    shape: Option<String>,
    /// What the holder was to wake into (`value.wake`: renew, write, release, read).
    planned_wake: Option<String>,
    start_ns: u64,
    /// Whether an op invoked at or after its stop was walked (it then waits for its process's
    /// next op).
    ended: bool,
    /// The acquire in flight when the stall began.
    waiting_on: Option<ClientOp>,
    /// The holder's grant (its number, in walk order).
    grant: Option<u32>,
    /// What its tally reads of that grant, taken when the grant closed.
    bound: Option<BoundAt>,
    /// When that grant was answered: the other grants counted completed after it.
    grant_complete_ns: u64,
    /// The first op the process invoked at or after the stall's end.
    wake: Option<Func>,
    /// Grants of the lock to other processes between the holder's grant and the stall's end.
    others: u64,
    first_other_ns: u64,
    /// Its fault's place in the log, and its stop once read.
    place: usize,
    stop_ns: Option<u64>,
    /// Whether it was placed; and whether its process's next op, its grant's closing or the
    /// grants of its lock still to come can change it: it is tallied once none can.
    placed: bool,
    in_waking: bool,
    in_awaiting: bool,
    in_counting: bool,
}

/// Where a holder stall ended against its lease's lower bound.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Before,
    Between,
    JustPast,
    Past,
    Unknown,
}

/// Where a holder stall ended against other processes' grants of its lock.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Next {
    NoneYet,
    JustAfter,
    Later,
    Unknown,
}

/// Counts the coverage of a digested history. Requested kinds and shapes are those the history
/// shows (faults started, shapes recorded); the caller adds the run's schedule's.
pub fn coverage(m: &Model) -> Coverage {
    // Nothing let go before the end: the reading the streamed one, which lets each fault go
    // once nothing to come changes it, must equal.
    let mut counts = CoverageCounts::new(m.drift, CoverageLimits::NONE);
    counts.keep_all = true;
    for op in &m.nemesis {
        counts.nemesis(op);
    }
    let lock_ids: FxMap<String, u32> = (m.locks.iter().enumerate())
        .map(|(i, l)| (l.clone(), i as u32))
        .collect();
    let read = GrantRead {
        view: m,
        policy: &m.ttl_policy,
    };
    let mut next_grant = 0;
    for (pos, op) in m.ops.iter().enumerate() {
        // Grants are numbered in op order: the walk's order.
        let grant = (m.grants.get(next_grant))
            .filter(|g| g.op == pos)
            .map(|g| (next_grant as u32, g));
        next_grant += usize::from(grant.is_some());
        counts.walked(op, grant, &lock_ids);
    }
    // Closed once every op is walked (each stall placed reads its grant's bounds as of the
    // stall's start), in invoke order: a fault stopped before a grant was invoked has met
    // every lease it can by then.
    for (g, grant) in m.grants.iter().enumerate() {
        counts.settle(grant.invoke_ns);
        counts.closed(g as u32, grant, &read);
    }
    counts.finish(m.end_time_ns, &lock_ids)
}

/// Where a holder stall's lease stood, as its tally reads it: taken from the grant when it
/// closed, counting the ops invoked by the stall's start.
#[derive(Debug, Clone, Copy)]
enum BoundAt {
    /// Its lower bound, its upper bound (none when an op that never completed may set it),
    /// and the ttl.
    Lease {
        lb: u64,
        ub: Option<u64>,
        ttl_ms: u64,
    },
    Unknown,
}

impl BoundAt {
    /// Where a stall ending at `end_ns` ended against it, and the ttl.
    fn of(self, end_ns: u64) -> (Bound, Option<u64>) {
        let BoundAt::Lease { lb, ub, ttl_ms } = self else {
            return (Bound::Unknown, None);
        };
        let bound = match ub {
            _ if end_ns < lb => Bound::Before,
            Some(ub) if end_ns >= ub => {
                // a tenth of the ttl, in ns
                if end_ns - ub <= ttl_ms.saturating_mul(100_000) {
                    Bound::JustPast
                } else {
                    Bound::Past
                }
            }
            // Past the lower bound, short of the upper (or the upper is unknown: an op that
            // never completed may set the lease at any time).
            _ => Bound::Between,
        };
        (bound, Some(ttl_ms))
    }
}

/// What the bounds of a closed grant are read from: its ops (a view) and the run's ttl policy
/// (an answer lost may have set the longest ttl the run granted). A streaming reader gives
/// the policy read so far, the batch the whole run's: a lost answer whose longest ttl is
/// granted only later could put a stall's upper bound earlier than the batch's (they agree on
/// every history of the tests' corpus).
pub(crate) struct GrantRead<'a, V: View> {
    pub(crate) view: &'a V,
    pub(crate) policy: &'a FxMap<u64, (u64, u64)>,
}

impl<V: View> GrantRead<'_, V> {
    /// Where grant `g`'s lease stood for a stall that began at `cutoff_ns`: before its lower
    /// bound, between the bounds, or past the upper bound, and the ttl of that lease.
    fn bound(&self, g: &Grant, cutoff_ns: u64) -> BoundAt {
        let m = self.view;
        // A session's grant, or a transaction's (no ttl at all): no lease its holder counts.
        if m.is_session(g) || g.ttl_ms.is_none() {
            return self.session_bound(g, cutoff_ns);
        }
        let (lb, set_by) = crate::model::span_end_until(m, g, g.invoke_ns, cutoff_ns);
        let ttl_ms = match set_by {
            SpanEnd::Lease(Some(pos)) => m.op(pos as usize).ttl_ms().or(g.ttl_ms),
            _ => g.ttl_ms,
        };
        let Some(ttl_ms) = ttl_ms else {
            return BoundAt::Unknown;
        };
        let ub = self.surely_dead_by(g, cutoff_ns);
        BoundAt::Lease { lb, ub, ttl_ms }
    }

    /// [`GrantRead::bound`] for a grant that is no lease (model item 9: a session's or a
    /// transaction's): its holder counts no lease, so what a stall must outlast to reach the
    /// state where bugs live is the server's timeout of the session (or of the idle
    /// transaction), the ttl the client asked for, counted from its last op the service
    /// confirmed before the stall (its acquire, or an ok renew: the check of a live session).
    /// Without a requested ttl, unknown.
    fn session_bound(&self, g: &Grant, cutoff_ns: u64) -> BoundAt {
        let m = self.view;
        let mut last = m.op(g.op);
        for &pos in &g.epoch_ops {
            let op = m.op(pos as usize);
            if op.invoke_ns > cutoff_ns {
                break;
            }
            if op.func == Func::Renew && op.outcome == Outcome::Ok {
                last = op;
            }
        }
        let (Some(ttl_ms), Some(done_ns)) = (last.requested_ttl_ms(), last.complete_ns()) else {
            return BoundAt::Unknown;
        };
        let drift = m.drift();
        BoundAt::Lease {
            lb: last.invoke_ns.saturating_add(drift.lower_ns(ttl_ms)),
            ub: Some(done_ns.saturating_add(drift.upper_ns(ttl_ms))),
            ttl_ms,
        }
    }

    /// When grant `g`'s lease was surely over, counting the ops invoked by `cutoff_ns`: the
    /// completion plus `ttl*(1+drift)` of the last op that could have set it (the acquire, an
    /// ok renew, which replaces it; an indeterminate renew may have applied, so the later of
    /// the two), as `Grant::surely_dead_ns` counts it for the whole epoch. A release may end it
    /// sooner, never later, so it does not count.
    fn surely_dead_by(&self, g: &Grant, cutoff_ns: u64) -> Option<u64> {
        let m = self.view;
        let drift = m.drift();
        let acquire = m.op(g.op);
        let mut dead = crate::model::upper_ttl_ms(self.policy, acquire)
            .zip(acquire.complete_ns())
            .map(|(ttl, c)| c.saturating_add(drift.upper_ns(ttl)));
        for &pos in &g.epoch_ops {
            let op = m.op(pos as usize);
            if op.invoke_ns > cutoff_ns {
                break;
            }
            if op.func != Func::Renew {
                continue;
            }
            let ttl = op.ttl_ms().or(op.requested_ttl_ms()).or(g.ttl_ms);
            let set = match (op.complete_ns(), ttl) {
                (Some(c), Some(t)) => Some(c.saturating_add(drift.upper_ns(t))),
                _ => None,
            };
            dead = match op.lease_outcome() {
                Outcome::Ok => set,
                Outcome::Fail => dead,
                Outcome::Info | Outcome::Pending => dead.zip(set).map(|(a, b)| a.max(b)),
            };
        }
        dead
    }

    /// Grant `g`'s lease as an interval: from its invoke (the earliest instant the service may
    /// have set it) to the instant it is surely over (its release's invoke, or its upper
    /// bound; `u64::MAX`, the history's end, when an op that never completed may still set it).
    fn lease(&self, g: &Grant) -> Lease {
        let m = self.view;
        let upper = g.surely_dead_ns.unwrap_or(u64::MAX);
        // A release the service refused (or never got: a refused connection) leaves the lease
        // in force; any other may have ended it at its invoke.
        let released = (g.epoch_ops.iter())
            .map(|&pos| m.op(pos as usize))
            .find(|op| op.func == Func::Release && op.outcome != Outcome::Fail)
            .map_or(u64::MAX, |op| op.invoke_ns);
        Lease {
            from_ns: g.invoke_ns,
            to_ns: upper.min(released).max(g.invoke_ns),
            lb_ns: g.lease_lb_ns,
            invoke_ns: g.invoke_ns,
        }
    }
}

/// A grant a process holds, as the stalls placed on it read it.
#[derive(Debug, Clone, Copy)]
struct Held {
    grant: u32,
    lock: u32,
    token: Option<u64>,
    complete_ns: u64,
}

/// What is kept per process (every process: a stall may name any).
#[derive(Default)]
struct Track {
    /// Its latest op walked.
    last_op: Option<ClientOp>,
    /// Its latest grant of each lock it was granted, latest last: a client may hold several
    /// locks at once (the bank's two accounts), and a stall names the one it is about. At most
    /// [`TRACKED_LOCKS_MAX`], the oldest dropped first.
    last_grants: Vec<Held>,
    /// Stalls of this process that ended and await the process's next invoke.
    waking: Vec<usize>,
}

/// The most locks whose latest grant is kept per process: far more than a client holds at
/// once (a transfer holds two), and a bound on what one process's track can grow to.
const TRACKED_LOCKS_MAX: usize = 64;

/// The most grants of each lock remembered (their completion and process) for the stalls
/// placed later, which count the grants of their lock to other processes since their holder's
/// grant: past it the earliest are forgotten (counted in [`CoverageCounts::grants_forgotten`]),
/// and a stall whose holder's grant is older than them may count too few.
pub(crate) const RECENT_GRANTS_MAX: usize = 4096;

/// The most leases of closed grants kept for the faults read later: a lease is kept while a
/// fault still to come may start inside it, so about the leases of the last few seconds, and
/// those an op never answered keeps open to the end (a crashed holder's); past it the oldest
/// is dropped (counted in [`CoverageCounts::leases_dropped`]), and a fault it would have met
/// may be counted as not exercised (never the other way).
pub(crate) const LEASES_KEPT_MAX: usize = 65_536;

/// The most faults that still meet the leases of grants as they close: a fault waits until
/// every grant invoked by its end is closed, which an op never answered can hold off to the
/// history's end. Past it the oldest waiting is settled (counted in
/// [`CoverageCounts::settled_early`]): a grant closed later may then not count toward it (a
/// fault counted not exercised, never the other way). Each grant closed is held against at
/// most this many.
pub(crate) const UNSETTLED_MAX: usize = 256;

/// The most records of faults coverage keeps at once: client stalls not yet tallied, faults
/// aimed at leases not yet counted, faults still on, and their kinds' faults the ops walked
/// have not passed (a fault may have a record in several). A fault is let go once nothing to come can change
/// what it counts (its stall placed, ended, its holder's grant closed, its process's next op
/// walked; its leases met and a grant walked after it), so this many wait at once only when
/// something holds them all off (a process that never runs again, a service that never grants
/// again). Past it the nemesis events are counted, not read (a run note says how many).
pub(crate) const FAULTS_KEPT_MAX: usize = 65_536;

/// The run's note for the `skipped` nemesis events a streamed coverage did not read, past the
/// first `read` of them, when `kept_max` faults were waiting at once.
fn skipped_note(skipped: u64, read: u64, kept_max: usize) -> String {
    format!(
        "coverage counted the faults of the first {read} nemesis events only, not the \
         {skipped} after them: it keeps at most {kept_max} records of faults waiting at once \
         for what settles them (a grant to close, a stalled process to run again), and \
         reached that; what the faults after them exercised is not counted, so the coverage \
         and the faults a verdict rests on read less than the run did"
    )
}

/// One fault kind's faults, for the ops it meets.
struct Kind {
    name: String,
    /// Its faults not yet reached by the ops walked: their places in the log, starts and
    /// ends (`u64::MAX` while on), by start.
    places: VecDeque<(usize, u64, u64)>,
    /// Those started by the op walked last that may still be on (open, or ended no earlier),
    /// with their ends (`u64::MAX` while on).
    on: Vec<(usize, u64)>,
    /// Ops and grants met.
    ops: u64,
    grants: u64,
}

/// A fault aimed at leases (not a client stall), and what the leases closed so far say of it.
struct Aimed {
    place: usize,
    start_ns: u64,
    /// Its stop (its start for an instant), `None` while it is on.
    stop_ns: Option<u64>,
    aims: FaultAims,
    cells: crate::exercised::Cells,
}

impl Aimed {
    /// Whether it has met every lease it can: it stopped before every grant still to close
    /// was invoked.
    fn settled(&self, before_ns: u64) -> bool {
        self.stop_ns.is_some_and(|e| e < before_ns)
    }
}

/// [`UNSETTLED_MAX`], [`LEASES_KEPT_MAX`], [`RECENT_GRANTS_MAX`] and [`FAULTS_KEPT_MAX`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoverageLimits {
    pub(crate) unsettled: usize,
    pub(crate) leases: usize,
    pub(crate) recent: usize,
    pub(crate) faults_kept: usize,
}

impl Default for CoverageLimits {
    fn default() -> Self {
        CoverageLimits {
            unsettled: UNSETTLED_MAX,
            leases: LEASES_KEPT_MAX,
            recent: RECENT_GRANTS_MAX,
            faults_kept: FAULTS_KEPT_MAX,
        }
    }
}

impl CoverageLimits {
    /// No limit: the batch's, which holds the whole history anyway. It reads every nemesis
    /// event before the first grant closes, so every fault waits for the grants at once.
    const NONE: CoverageLimits = CoverageLimits {
        unsettled: usize::MAX,
        leases: usize::MAX,
        recent: usize::MAX,
        faults_kept: usize::MAX,
    };
}

/// Coverage counted as the history is read (see the module's words).
#[derive(Default)]
pub(crate) struct CoverageCounts {
    /// The faults on, paired as read (each let go once it stopped: what is read of it is
    /// kept where it counts).
    log: FaultLog,
    nemesis_read: u64,
    pub(crate) nemesis_skipped: u64,
    /// Faults of the log looked at so far.
    seen: usize,
    kinds: Vec<Kind>,
    /// Client stalls not yet tallied, by number (their start order); how many were read, and
    /// the first not yet placed (none placed is tallied).
    stalls: FxMap<usize, Stall>,
    stalls_read: usize,
    next_stall: usize,
    /// Stalls not yet stopped; and those stopped, by (end, stall), not yet handed to their
    /// process's next op.
    running: Vec<usize>,
    ending: std::collections::BTreeSet<(u64, usize)>,
    /// Per process not crashed.
    tracks: FxMap<u64, Track>,
    /// Holder stalls whose grant is still open, by grant.
    awaiting: FxMap<u32, Vec<usize>>,
    /// What the stalls placed later read of the grants the tracks hold, once closed.
    closed_held: FxMap<u32, BoundAt>,
    /// Per lock, the grants walked lately: (completion, process).
    recent: FxMap<u32, VecDeque<(u64, u64)>>,
    pub(crate) grants_forgotten: u64,
    /// Per lock, the placed holder stalls still counting the other grants.
    counting: FxMap<u32, Vec<usize>>,
    /// Faults aimed at leases still meeting the leases of grants as they close, in start
    /// order (settled ones among them are let go lazily: see [`CoverageCounts::settle`]).
    unsettled: Vec<Aimed>,
    /// Let go of at [`UNSETTLED_MAX`] while still on: counted once stopped.
    early: Vec<Aimed>,
    /// Done with leases, waiting for a grant walked after them to say what they count.
    after_grant: Vec<Aimed>,
    /// What the stalls and faults let go of counted.
    tallied: Coverage,
    /// Faults started and nodes hit, by kind.
    started: std::collections::BTreeMap<String, FaultCoverage>,
    /// The latest instant before which every grant is closed ([`CoverageCounts::settle`]): a
    /// fault stopped before it is settled.
    settled_before_ns: u64,
    /// The leases of closed grants that a fault not yet read may still meet (a grant closes
    /// once no op can change it, which can be before its lease is over), at most
    /// [`LEASES_KEPT_MAX`].
    leases: VecDeque<Lease>,
    pub(crate) leases_dropped: u64,
    /// Faults settled at [`UNSETTLED_MAX`] before every grant invoked by their end closed.
    pub(crate) settled_early: u64,
    /// The limits above, which the tests lower.
    pub(crate) limits: CoverageLimits,
    /// The latest grant invoke walked.
    last_grant_invoke_ns: Option<u64>,
    waits: (u64, u64),
    /// The drift a waiter stall's lease is read with.
    pub(crate) drift: Drift,
    /// The most records of faults kept at once ([`CoverageCounts::kept`]).
    pub(crate) kept_most: usize,
    /// Whether every stall and fault is kept to the end, none let go once settled (the
    /// batch's reading).
    keep_all: bool,
}

impl CoverageCounts {
    /// Counts with `drift`, within `limits`.
    pub(crate) fn new(drift: Drift, limits: CoverageLimits) -> CoverageCounts {
        CoverageCounts {
            drift,
            limits,
            ..CoverageCounts::default()
        }
    }

    /// The run's note for the nemesis events not read past the limit on the faults kept.
    pub(crate) fn skipped_note(&self) -> String {
        let kept_max = self.limits.faults_kept;
        skipped_note(self.nemesis_skipped, self.nemesis_read, kept_max)
    }

    /// How many faults done with leases wait for a grant walked after them.
    #[cfg(test)]
    pub(crate) fn waiting_for_a_grant(&self) -> usize {
        self.after_grant.len()
    }

    /// How many records of faults are kept now: those [`FAULTS_KEPT_MAX`] bounds.
    fn kept(&self) -> usize {
        let kinds: usize = (self.kinds.iter())
            .map(|k| k.places.len() + k.on.len())
            .sum();
        self.log.kept()
            + self.stalls.len()
            + self.unsettled.len()
            + self.early.len()
            + self.after_grant.len()
            + kinds
    }

    /// A nemesis event, in history order. Once one is skipped at the limit every later one
    /// is: a stop read without its start would pair with another fault.
    pub(crate) fn nemesis(&mut self, op: &Op) {
        if self.nemesis_skipped > 0 || self.kept() >= self.limits.faults_kept {
            self.nemesis_skipped += 1;
            return;
        }
        self.nemesis_read += 1;
        let stopped = self.log.push(op);
        self.look();
        if let Some(place) = stopped {
            self.stopped(place, op.time_ns);
        }
        // What is read of a fault was taken when it was looked at and stopped.
        self.log.forget_stopped(|_| false);
        self.kept_most = self.kept_most.max(self.kept());
    }

    /// The fault at `place` stopped at `end_ns`: its stall waits for its process's next op,
    /// its kind's ops meet it until then, and a fault aimed at leases settles by then.
    fn stopped(&mut self, place: usize, end_ns: u64) {
        let stalls = &mut self.stalls;
        if let Some(at) = (self.running.iter()).position(|i| stalls[i].place == place) {
            let i = self.running.remove(at);
            stalls.get_mut(&i).expect("running").stop_ns = Some(end_ns);
            self.ending.insert((end_ns, i));
        }
        for kind in &mut self.kinds {
            for (p, _, e) in kind.places.iter_mut() {
                if *p == place {
                    *e = end_ns;
                }
            }
            for (p, e) in kind.on.iter_mut() {
                if *p == place {
                    *e = end_ns;
                }
            }
        }
        if let Ok(k) = (self.unsettled).binary_search_by_key(&place, |a| a.place) {
            self.unsettled[k].stop_ns = Some(end_ns);
        } else if let Some(k) = self.early.iter().position(|a| a.place == place) {
            let mut a = self.early.remove(k);
            a.stop_ns = Some(end_ns);
            self.resolve(a);
        }
    }

    /// Looks at the faults read since last time: each stall is listed, each other kind's
    /// fault joins its kind, and each fault aimed at leases waits for them.
    fn look(&mut self) {
        // Bounded by the faults read.
        while self.seen < self.log.len() {
            let place = self.seen;
            self.seen += 1;
            let Some(f) = self.log.get(place) else {
                continue;
            };
            let Some(name) = crate::faults::opened_kind(&f.f) else {
                continue;
            };
            let family = FaultOp::of(&f.f)
                .opened_family()
                .unwrap_or(&FaultFamily::UNKNOWN);
            let k = match self.kinds.iter().position(|k| k.name == name) {
                Some(i) => i,
                None => {
                    self.kinds.push(Kind {
                        name: name.to_string(),
                        places: VecDeque::new(),
                        on: Vec::new(),
                        ops: 0,
                        grants: 0,
                    });
                    self.kinds.len() - 1
                }
            };
            let stop_ns = f.stop_index.map(|_| f.end_ns);
            (self.kinds[k].places).push_back((place, f.start_ns, stop_ns.unwrap_or(u64::MAX)));
            // Faults started and nodes hit, by kind.
            let c: &mut FaultCoverage = self.started.entry(name.to_string()).or_default();
            c.started += 1;
            for n in nodes_of(&f.value, family) {
                *c.nodes.entry(n).or_insert(0) += 1;
            }
            if family.stalls_clients() {
                if let Some(mut s) = stall_of(f, family) {
                    s.place = place;
                    s.stop_ns = stop_ns;
                    let i = self.stalls_read;
                    self.stalls_read += 1;
                    self.stalls.insert(i, s);
                    // An instant never stops: its stall ends with the history.
                    self.running.push(i);
                }
            } else if let Some(cells) = crate::exercised::cells_of(f) {
                let mut aims = FaultAims::default();
                for lease in &self.leases {
                    aims.meet(lease, f.start_ns);
                }
                let aimed = Aimed {
                    place,
                    start_ns: f.start_ns,
                    stop_ns,
                    aims,
                    cells,
                };
                if self.unsettled.len() >= self.limits.unsettled {
                    self.compact_unsettled();
                }
                if self.unsettled.len() >= self.limits.unsettled {
                    let first = self.unsettled.remove(0);
                    self.settled_early += 1;
                    self.let_go(first);
                }
                self.unsettled.push(aimed);
            }
            // What is read of its value was taken above: its start, end and name stay.
            self.log.strip(place);
        }
    }

    /// Client op `o` was walked (ops come in invoke order), with the grant it made, if any.
    /// `lock_ids`: the locks' ids by name, as read so far.
    pub(crate) fn walked(
        &mut self,
        o: &ClientOp,
        grant: Option<(u32, &Grant)>,
        lock_ids: &FxMap<String, u32>,
    ) {
        self.look();
        // Bounded by the stalls read: each is placed once.
        while (self.stalls.get(&self.next_stall)).is_some_and(|s| s.start_ns < o.invoke_ns) {
            self.place(self.next_stall, lock_ids);
            self.next_stall += 1;
        }
        self.wake_due(o.invoke_ns);
        let is_grant = grant.is_some();
        if let Some(t) = self.tracks.get_mut(&o.process) {
            let woken = std::mem::take(&mut t.waking);
            for i in woken {
                if let Some(s) = self.stalls.get_mut(&i) {
                    s.wake = Some(o.func);
                    s.in_waking = false;
                }
                self.try_fold(i);
            }
        }
        let t = self.tracks.entry(o.process).or_default();
        t.last_op = Some(o.clone());
        if let Some((g, grant)) = grant {
            let held = Held {
                grant: g,
                lock: grant.lock,
                token: grant.token,
                complete_ns: grant.complete_ns,
            };
            let closed_held = &mut self.closed_held;
            t.last_grants.retain(|h| {
                let keep = h.lock != held.lock;
                if !keep {
                    closed_held.remove(&h.grant);
                }
                keep
            });
            if t.last_grants.len() == TRACKED_LOCKS_MAX {
                closed_held.remove(&t.last_grants.remove(0).grant);
            }
            t.last_grants.push(held);
            self.other_grant(grant);
            self.last_grant_invoke_ns = Some(grant.invoke_ns);
            // A grant walked after them may say what the faults done with leases count.
            if !self.keep_all {
                for a in std::mem::take(&mut self.after_grant) {
                    self.resolve(a);
                }
            }
        }
        let done_ns = o.complete_ns().unwrap_or(u64::MAX);
        for kind in &mut self.kinds {
            // Bounded by the kind's faults.
            while let Some(&(p, start_ns, end_ns)) = kind.places.front() {
                if start_ns > o.invoke_ns {
                    break;
                }
                kind.places.pop_front();
                kind.on.push((p, end_ns));
            }
            kind.on.retain(|&(_, end_ns)| end_ns >= o.invoke_ns);
            let starts_within = (kind.places.front()).is_some_and(|&(_, s, _)| s <= done_ns);
            if !kind.on.is_empty() || starts_within {
                kind.ops += 1;
                kind.grants += u64::from(is_grant);
            }
        }
        if o.func == Func::Acquire {
            long_wait(o, &mut self.waits);
        }
        if o.outcome == Outcome::Info {
            // A crashed process runs no further op, and the run stalls its worker under the
            // process that carries on: no stall is placed on it or wakes into its ops.
            if let Some(t) = self.tracks.remove(&o.process) {
                for h in t.last_grants {
                    self.closed_held.remove(&h.grant);
                }
                for i in t.waking {
                    if let Some(s) = self.stalls.get_mut(&i) {
                        s.in_waking = false;
                    }
                    self.try_fold(i);
                }
            }
        }
    }

    /// The stalls that stopped by `invoke_ns` go to their process's next op.
    fn wake_due(&mut self, invoke_ns: u64) {
        // Bounded by the stalls stopped.
        while let Some(&(end_ns, i)) = self.ending.first() {
            if end_ns > invoke_ns {
                break;
            }
            self.ending.pop_first();
            let s = self.stalls.get_mut(&i).expect("a stall ending is kept");
            s.ended = true;
            s.in_waking = true;
            self.tracks.entry(s.process).or_default().waking.push(i);
        }
    }

    /// Tallies stall `i` and lets it go once nothing to come can change it: placed, ended,
    /// its process's next op walked (or its process crashed), its grant closed, and the
    /// other grants of its lock counted.
    fn try_fold(&mut self, i: usize) {
        let Some(s) = self.stalls.get(&i).filter(|_| !self.keep_all) else {
            return;
        };
        if s.placed && s.ended && !s.in_waking && !s.in_awaiting && !s.in_counting {
            let s = self.stalls.remove(&i).expect("read above");
            let end_ns = s.stop_ns.expect("an ended stall stopped");
            tally(&s, end_ns, self.drift, &mut self.tallied);
        }
    }

    /// Places stall `i` when its start is reached: a waiter stall if its process's last op is
    /// an acquire still in flight then, else a holder stall on its process's latest grant
    /// (which must be of the lock and token the stall names, when it names them).
    fn place(&mut self, i: usize, lock_ids: &FxMap<String, u32>) {
        self.place_stall(i, lock_ids);
        self.try_fold(i);
    }

    fn place_stall(&mut self, i: usize, lock_ids: &FxMap<String, u32>) {
        let s = self
            .stalls
            .get_mut(&i)
            .expect("a stall is kept until placed");
        s.placed = true;
        s.lock = s
            .lock_name
            .as_deref()
            .and_then(|l| lock_ids.get(l).copied());
        let Some(t) = self.tracks.get(&s.process) else {
            return;
        };
        if let Some(op) = &t.last_op {
            if op.func == Func::Acquire && op.complete_ns().is_none_or(|c| c > s.start_ns) {
                s.waiting_on = Some(op.clone());
                return;
            }
        }
        // The latest grant of the lock the stall names, else the latest of any lock.
        let latest = match s.names_lock {
            true => t.last_grants.iter().rev().find(|h| s.lock == Some(h.lock)),
            false => t.last_grants.last(),
        };
        let Some(held) = latest
            .copied()
            .filter(|h| s.token.is_none_or(|t| h.token == Some(t)))
        else {
            return;
        };
        s.grant = Some(held.grant);
        s.grant_complete_ns = held.complete_ns;
        match self.closed_held.get(&held.grant) {
            // Closed before the stall began: every op of it was invoked by then.
            Some(&b) => s.bound = Some(b),
            None => {
                s.in_awaiting = true;
                self.awaiting.entry(held.grant).or_default().push(i);
            }
        }
        // The grants of its lock to other processes since the holder's, walked so far.
        // Walked before the stall began, but answered after it ended: not inside it (a stall
        // still running when placed ends after every answer read).
        let (from, process) = (held.complete_ns, s.process);
        let to = s.stop_ns.unwrap_or(u64::MAX);
        let recent = self.recent.get(&held.lock);
        for &(c, p) in recent.into_iter().flatten() {
            if c >= from && c <= to && p != process {
                count_other(s, c);
            }
        }
        s.in_counting = true;
        self.counting.entry(held.lock).or_default().push(i);
    }

    /// A grant was walked: the placed holder stalls of its lock count it if it completed within
    /// their window, and it is remembered for those placed later.
    fn other_grant(&mut self, g: &Grant) {
        let c = g.complete_ns;
        if let Some(list) = self.counting.get_mut(&g.lock) {
            let stalls = &mut self.stalls;
            let mut done = Vec::new();
            list.retain(|&i| {
                let s = stalls.get_mut(&i).expect("a stall counting is kept");
                let end_ns = s.stop_ns.unwrap_or(u64::MAX);
                if c >= s.grant_complete_ns && c <= end_ns && g.process != s.process {
                    count_other(s, c);
                }
                // Grants walked later complete after this one's invoke.
                let counts_on = end_ns >= g.invoke_ns;
                if !counts_on {
                    s.in_counting = false;
                    done.push(i);
                }
                counts_on
            });
            for i in done {
                self.try_fold(i);
            }
        }
        let recent = self.recent.entry(g.lock).or_default();
        if recent.len() >= self.limits.recent {
            recent.pop_front();
            self.grants_forgotten += 1;
        }
        recent.push_back((c, g.process));
    }

    /// Every grant invoked before `before_ns` is closed, and every fault not yet read starts
    /// after it: the faults that stopped before it have met every lease they can, and the
    /// leases over before it can meet no fault to come.
    pub(crate) fn settle(&mut self, before_ns: u64) {
        self.leases.retain(|l| l.to_ns >= before_ns);
        // Settled faults are let go lazily (a list of a whole run's faults, as the batch reads
        // them, filtered at every grant would cost faults x grants): skipped as a grant meets
        // them, the list compacted once a grant met many of them or it is at its limit.
        self.settled_before_ns = self.settled_before_ns.max(before_ns);
    }

    /// Lets go of the settled faults among those meeting leases.
    fn compact_unsettled(&mut self) {
        let before_ns = self.settled_before_ns;
        let list = std::mem::take(&mut self.unsettled);
        let (settled, unsettled) = list.into_iter().partition(|a| a.settled(before_ns));
        self.unsettled = unsettled;
        for a in settled {
            self.let_go(a);
        }
    }

    /// A fault aimed at leases meets no more of them: counted once it stopped and what it
    /// counts is known.
    fn let_go(&mut self, a: Aimed) {
        match a.stop_ns {
            None => self.early.push(a),
            Some(_) => self.resolve(a),
        }
    }

    /// Counts a stopped fault done with leases, if what it counts is known; else it waits for
    /// a grant walked after it.
    fn resolve(&mut self, a: Aimed) {
        let span = (a.start_ns, a.stop_ns.expect("resolved once stopped"));
        let last_grant = self.last_grant_invoke_ns;
        let cov = &mut self.tallied;
        if self.keep_all || !crate::exercised::count_final(&a.cells, &a.aims, span, last_grant, cov)
        {
            self.after_grant.push(a);
        }
    }

    /// Grant `g` closed: the stalls placed on it read its bounds, and the faults aimed at
    /// leases meet its lease.
    pub(crate) fn closed<V: View>(&mut self, g: u32, grant: &Grant, read: &GrantRead<'_, V>) {
        if let Some(list) = self.awaiting.remove(&g) {
            for i in list {
                if let Some(s) = self.stalls.get_mut(&i) {
                    s.bound = Some(read.bound(grant, s.start_ns));
                    s.in_awaiting = false;
                }
                self.try_fold(i);
            }
        }
        let held = (self.tracks.get(&grant.process))
            .is_some_and(|t| t.last_grants.iter().any(|h| h.grant == g));
        if held {
            self.closed_held.insert(g, read.bound(grant, u64::MAX));
        }
        let lease = read.lease(grant);
        if self.leases.len() >= self.limits.leases {
            self.leases.pop_front();
            self.leases_dropped += 1;
        }
        self.leases.push_back(lease);
        // In start order (nemesis events come in time order): a fault that starts after the
        // lease is over and after its grant was invoked learns nothing from it.
        let before_ns = self.settled_before_ns;
        let mut skipped = 0;
        for a in &mut self.unsettled {
            if a.settled(before_ns) {
                skipped += 1;
                continue;
            }
            if a.start_ns > lease.to_ns && a.start_ns > lease.invoke_ns {
                break;
            }
            a.aims.meet(&lease, a.start_ns);
        }
        // What each grant walks past is bounded: a list that holds many settled faults is
        // compacted (each compaction lets go of at least this many).
        if skipped >= 64 {
            self.compact_unsettled();
        }
    }

    /// The coverage of the history read, which ended at `end_ns`.
    pub(crate) fn finish(mut self, end_ns: u64, lock_ids: &FxMap<String, u32>) -> Coverage {
        self.look();
        while self.next_stall < self.stalls_read {
            self.place_stall(self.next_stall, lock_ids);
            self.next_stall += 1;
        }
        let mut cov = std::mem::take(&mut self.tallied);
        cov.waits.granted = self.waits.0;
        cov.waits.not_granted = self.waits.1;
        cov.faults = std::mem::take(&mut self.started);
        for kind in &self.kinds {
            let c = cov.faults.entry(kind.name.clone()).or_default();
            c.ops_during = kind.ops;
            c.grants_during = kind.grants;
        }
        for s in self.stalls.values() {
            // One never stopped ends with the history.
            tally(s, s.stop_ns.unwrap_or(end_ns), self.drift, &mut cov);
        }
        let grants_after = self.last_grant_invoke_ns;
        let waiting = (self.unsettled.iter())
            .chain(&self.early)
            .chain(&self.after_grant);
        for a in waiting {
            let span = (a.start_ns, a.stop_ns.unwrap_or(end_ns));
            crate::exercised::count(&a.cells, &a.aims, span, (grants_after, end_ns), &mut cov);
        }
        let started: Vec<String> = cov
            .faults
            .iter()
            .filter(|(_, f)| f.started > 0)
            .map(|(k, _)| k.clone())
            .collect();
        for k in started {
            cov.request_fault(&k);
        }
        let shapes: Vec<String> = cov.shapes.keys().cloned().collect();
        for s in shapes {
            cov.request_shape(&s);
        }
        cov
    }
}

/// Counts another process's grant, completed at `c_ns`, in a holder stall's window.
fn count_other(s: &mut Stall, c_ns: u64) {
    if s.others == 0 || c_ns < s.first_other_ns {
        s.first_other_ns = c_ns;
    }
    s.others += 1;
}

/// The nodes a fault names: `nodes`, and the fields its family says name nodes (a partition's
/// `cut` pairs and `clients_cut_from`).
fn nodes_of(v: &Value, family: &FaultFamily) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |n: &Value| {
        if let Some(s) = n.as_str() {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_string());
            }
        }
    };
    let naming = family
        .fields
        .iter()
        .filter(|f| f.names_nodes)
        .map(|f| f.name);
    for key in std::iter::once("nodes").chain(naming) {
        // Strings, or pairs of them (a cut's links).
        for n in v.get(key).and_then(Value::as_array).into_iter().flatten() {
            match n.as_array() {
                Some(pair) => pair.iter().for_each(&mut add),
                None => add(n),
            }
        }
    }
    out
}

/// A client stall's record, if it names the client process it stalled (one that does not
/// cannot be placed: it is not counted).
fn stall_of(f: &Fault, family: &FaultFamily) -> Option<Stall> {
    let process = f.value.get("process").and_then(Value::as_u64)?;
    let lock_name = f.value.get(stall_fields::LOCK).and_then(Value::as_str);
    let text = |k: &str| f.value.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Stall {
        kind: family.kind,
        process,
        names_lock: lock_name.is_some(),
        lock_name: lock_name.map(str::to_string),
        token: f.value.get("token").and_then(Value::as_u64),
        shape: text(stall_fields::SHAPE),
        planned_wake: text(stall_fields::WAKE),
        start_ns: f.start_ns,
        ..Stall::default()
    })
}

/// Counts an acquire that waited longer than the lease it asked for: (granted, not granted).
fn long_wait(op: &ClientOp, waits: &mut (u64, u64)) {
    let (Some(done), Some(ttl_ms)) = (op.complete_ns(), op.requested_ttl_ms().or(op.ttl_ms()))
    else {
        return;
    };
    if done - op.invoke_ns <= ttl_ms.saturating_mul(1_000_000) {
        return;
    }
    if op.outcome == Outcome::Ok {
        waits.0 += 1;
    } else {
        waits.1 += 1;
    }
}

fn next_of(s: &Stall, end_ns: u64, ttl_ms: Option<u64>) -> Next {
    if s.grant.is_none() {
        return Next::Unknown;
    }
    match (s.others, ttl_ms) {
        (0, _) => Next::NoneYet,
        (1, Some(t)) if end_ns - s.first_other_ns < t.saturating_mul(1_000_000) => Next::JustAfter,
        (1, None) => Next::Unknown,
        _ => Next::Later,
    }
}

/// Whether a stall recorded with `shape` (an aim or a wake-up op, as `--client-faults` names
/// them) reached what the shape aims at; any other name counts every stall recorded with it.
fn reached(shape: &str, s: &Stall, bound: Bound, next: Next, lapsed: bool) -> bool {
    // The lease may have ended (past its lower bound) when the holder woke.
    let past = matches!(bound, Bound::Between | Bound::JustPast | Bound::Past);
    let holder = s.waiting_on.is_none();
    match shape {
        "boundary" => holder && bound == Bound::JustPast,
        "next-grant" => holder && next == Next::JustAfter,
        "long" => holder && next == Next::Later,
        "renew" => holder && past && s.wake == Some(Func::Renew),
        "write" => holder && past && s.wake == Some(Func::Write),
        "release" => holder && past && s.wake == Some(Func::Release),
        "read" => holder && past && s.wake == Some(Func::Read),
        "waiter" => !holder && lapsed,
        _ => true,
    }
}

/// Counts stall `s`, which ended at `end_ns` (its stop, or the history's end).
fn tally(s: &Stall, end_ns: u64, drift: Drift, cov: &mut Coverage) {
    cov.stalls += 1;
    let (mut bound, mut next, mut lapsed) = (Bound::Unknown, Next::Unknown, false);
    if let Some(op) = &s.waiting_on {
        let w = &mut cov.waiter;
        w.count += 1;
        let ttl = op.requested_ttl_ms().or(op.ttl_ms());
        lapsed = ttl.is_some_and(|t| end_ns - s.start_ns > drift.upper_ns(t));
        if lapsed {
            w.lease_lapsed += 1;
            if op.outcome == Outcome::Ok {
                w.granted_after_lapse += 1;
            }
        } else {
            w.lease_outlived += 1;
        }
    } else {
        let h = &mut cov.holder;
        h.count += 1;
        let w = &mut h.wake_up;
        *match s.wake.filter(|_| s.stop_ns.is_some()) {
            Some(Func::Renew) => &mut w.renew,
            Some(Func::Write) => &mut w.write,
            Some(Func::Release) => &mut w.release,
            Some(Func::Read) => &mut w.read,
            Some(Func::Acquire) => &mut w.acquire,
            None => &mut w.none,
        } += 1;
        let ttl;
        (bound, ttl) = match (s.grant, s.bound) {
            (Some(_), Some(b)) => b.of(end_ns),
            _ => (Bound::Unknown, None),
        };
        next = next_of(s, end_ns, ttl);
        let b = &mut h.lease_bound;
        *match bound {
            Bound::Before => &mut b.before,
            Bound::Between => &mut b.between,
            Bound::JustPast => &mut b.just_past,
            Bound::Past => &mut b.past,
            Bound::Unknown => &mut b.unknown,
        } += 1;
        let n = &mut h.next_grant;
        *match next {
            Next::NoneYet => &mut n.none_yet,
            Next::JustAfter => &mut n.just_after,
            Next::Later => &mut n.later,
            Next::Unknown => &mut n.unknown,
        } += 1;
    }
    for shape in [&s.shape, &s.planned_wake].into_iter().flatten() {
        let c = cov.shapes.entry(shape.clone()).or_default();
        c.stalls += 1;
        c.reached += u64::from(reached(shape, s, bound, next, lapsed));
    }
    // The stall's cell: its aim and wake-up op together, exercised when both reached what
    // they aim at (a waiter has no wake-up op). A stall recorded before shapes has no cell.
    if let Some(aim) = &s.shape {
        let wake = s.planned_wake.clone().filter(|_| aim != "waiter");
        let exercised = reached(aim, s, bound, next, lapsed)
            && wake
                .as_deref()
                .is_none_or(|w| reached(w, s, bound, next, lapsed));
        cov.count_cell(
            Cell {
                kind: s.kind.to_string(),
                variant: aim.clone(),
                wake: wake.unwrap_or_default(),
                ..Cell::default()
            },
            exercised,
        );
    }
}
