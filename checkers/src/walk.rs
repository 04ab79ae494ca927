//! The walk that makes the grants (docs/checkers.md, model item 6): each op is visited once, in
//! position (invoke) order, and finds the grant it acts on or uses; each ok acquire becomes a
//! grant, known by its names from then on.
//!
//! The walk is incremental, so that a history can be walked as it is read: an answer is told
//! to the walk when it completes ([`Walk::completed`]: an ok acquire joins the names, any ok
//! acquire or renew the ttl policy), and an op is walked ([`Walk::walk`]) once every acquire
//! that could be its grant has answered. A renew or release names "the latest grant with that
//! name asked for by the time it completed", and that grant may be invoked after it (an op of
//! another process at the same instant, or before it in the file): so an op is walkable once it
//! has completed, time has moved past its completion, and no acquire invoked by then is still
//! unanswered (the rule `Digest::advance` keeps). A name that points ahead of the walk is kept
//! until the grant it names is walked, and attached then (`deferred`). The policy is applied
//! when a lease is judged ([`settle`]), not when an op is walked.
//!
//! Grants close ([`Walk::close`]) once the walk has passed their reach by a horizon: their
//! lease is followed then, and a streaming rule may take them (`stream.rs`). What reaches a
//! closed grant later (an op naming it, its session holder's crash, a mark on one of its ops, a
//! ttl the policy sets otherwise) makes it stale. Walking a whole history at its end, closing
//! nothing before, is the batch model; the walk done one event at a time, closing at once, is
//! held to it (`digest::walk_order_tests`).

use crate::evidence::Hold;
use crate::model::{
    follow_lease, span_end_of, ClientOp, Drift, Func, Grant, OpPos, SpanOf, NO_GRANT, NO_TARGET,
    SESSION_TTL_MS,
};
use crate::names::{Named, Names};
use crate::window::Window;
use crate::FxMap;
use history::Outcome;

/// The ops the walk reads, by position.
pub(crate) type Ops = Window<ClientOp>;

/// How many grants without a token of one lock a token no grant carries is taken to name (the
/// latest ones): a stated bound, counted in the notes when reached.
pub(crate) const UNTOKENED_CANDIDATES_MAX: usize = 64;

/// The fewest grants dropped between two prunes of the maps that point at grants
/// ([`Walk::drop_closed`]); a prune also waits for as many drops as the entries it left.
const PRUNE_EVERY: usize = 4096;

/// How an op joins the epoch of a grant the walk has not reached yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// It names the grant: it acts on it, and uses it.
    Named,
    /// Its token no grant carries: the grant, one without a token, is one it may have named.
    Candidate,
}

/// Whether a grant is closed ([`Walk::close`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Close {
    Open,
    Closed,
    /// Closed, and reached by something after its closing.
    Stale,
}

/// The walk's state. Grants are numbered in position order, as the walk makes them.
pub(crate) struct Walk {
    /// The run's ttl policy (model item 7) as the completions told so far give it: requested
    /// ttl -> (shortest, longest) granted.
    pub(crate) ttl_policy: FxMap<u64, (u64, u64)>,
    /// The names grants are found by, from their acquire's completion on.
    names: Names,
    /// The same names never pruned, for the tests: what a name the reader forgot named.
    #[cfg(test)]
    shadow: Names,
    /// Names the reader forgot whose grant the tests cannot tell from the walk's: each such
    /// history is left out of the grant-by-grant comparison (the reader counts them late).
    #[cfg(test)]
    pub(crate) uncertain: u64,
    /// The op being walked, and the ops whose grant the reader could not give because it was
    /// dropped or forgotten (counted late), for the tests.
    #[cfg(test)]
    walking: Option<OpPos>,
    #[cfg(test)]
    pub(crate) late_ops: crate::model::FxSet<OpPos>,
    /// The next position to walk.
    next: usize,
    /// The invoke of the last op walked.
    walked_ns: u64,
    /// The grants, by number; a streaming reader drops the closed ones before the first open
    /// one ([`Walk::drop_closed`]).
    pub(crate) grants: Window<Grant>,
    /// Per op walked, the grant it acts on or uses, or [`NO_GRANT`].
    pub(crate) grant_of: Window<u32>,
    /// Ops that name, or may name, a grant the walk has not reached, by that grant's position:
    /// attached when it is walked. Bounded by the ops whose names point ahead.
    deferred: FxMap<OpPos, Vec<(OpPos, Join)>>,
    /// Grants that are no lease (model item 9), by position, until walked.
    holds: FxMap<OpPos, Hold>,
    /// Per grant walked, whether it is no lease.
    hold_of: FxMap<u32, Hold>,
    /// Per process, the position of its first unanswered op (a crash: it never acts again);
    /// pruned once no grant the walk keeps is the process's.
    first_info: FxMap<u64, OpPos>,
    /// Positions of the session grants, sorted.
    pub(crate) sessions: Vec<usize>,
    pub(crate) ok_acquires: u64,
    pub(crate) unplaced: u64,
    /// Candidates [`UNTOKENED_CANDIDATES_MAX`] left out.
    pub(crate) ambiguity_capped: u64,
    /// Per grant, whether it is closed: followed ([`Walk::close`]) once the walk passed its
    /// reach by [`Walk::horizon_ns`], and whether something the walk learned after closing it
    /// could change what its closing found (an op that joined it, a crash of its session's
    /// holder, a mark on one of its ops, a ttl the policy set later): stale, what a reader
    /// that forgets closed grants would have judged without.
    pub(crate) state: Window<Close>,
    /// The grants not closed, in position order.
    open: Vec<u32>,
    /// How many grants are closed.
    pub(crate) closed: usize,
    /// How many session grants are closed: they close in position order (a crash marked while
    /// closing one marks an op the later ones read), the others whenever the walk passes them.
    sessions_closed: usize,
    /// How long past a grant's reach (the completion of its last op plus twice its longest
    /// ttl) the walk waits before closing it; `u64::MAX`: never before the end.
    pub(crate) horizon_ns: u64,
    /// `(grant, requested ttl, ttl)` of the lost answers the policy had set no ttl for when
    /// their closed grant was followed, or the one it had set: checked against the final
    /// policy ([`Walk::settle_all`]) without their ops.
    early_ttls: Vec<(u32, u64, Option<u64>)>,
    /// Those of them whose grant was dropped, as a count per (requested ttl, ttl): all the end
    /// needs of them (with the grants, for the tests' count of what reached dropped ones).
    early_dropped: FxMap<(u64, Option<u64>), EarlyDropped>,
    /// The most grants walked and not closed at once, after closing.
    pub(crate) open_max: usize,
    /// The grants whose epochs an unanswered op joined, by its position: the one kind of op a
    /// crash mark may mark after a grant holding it closed.
    info_in: FxMap<OpPos, Vec<u32>>,
    /// Per process, its closed session grants.
    closed_sessions_of: FxMap<u64, Vec<u32>>,
    /// Per process still running, how many of its closed session grants were dropped: each
    /// is reached late if it crashes. The tests also keep which.
    dropped_sessions_of: FxMap<u64, u64>,
    #[cfg(test)]
    dropped_sessions_which: FxMap<u64, Vec<u32>>,
    /// What reached a grant after it was dropped (a name, a crash, a mark, a ttl), and the
    /// stale grants dropped: what a streaming reader judged without.
    pub(crate) late: u64,
    pub(crate) stale_dropped: u64,
    /// The grants dropped stale or reached late, for the tests.
    #[cfg(test)]
    pub(crate) late_grants: Vec<u32>,
    /// The grants closed, as closed, for the tests (a streaming reader drops them).
    #[cfg(test)]
    pub(crate) closed_log: Vec<(u32, String)>,
    /// The dropped grants by their acquire's position, for the tests.
    #[cfg(test)]
    dropped_at: FxMap<OpPos, u32>,
    /// The number of grants dropped when the maps that point at grants were last pruned,
    /// and the entries that prune left.
    pruned_at: usize,
    survivors: usize,
    /// The fewest grants dropped between two prunes ([`PRUNE_EVERY`]; the tests prune at
    /// every drop).
    pub(crate) prune_every: usize,
}

/// Where a name points, for the walk.
enum Found {
    /// A grant the walk made and keeps.
    Walked(u32),
    /// An ok acquire the walk has not reached, at this position.
    Ahead(OpPos),
    /// A grant a streaming reader dropped: its number, or the position of its acquire.
    Dropped(Result<u32, OpPos>),
    /// A name the reader pruned, which may have been a dropped grant's (`names.rs`).
    Forgotten,
}

impl Walk {
    pub(crate) fn new() -> Walk {
        Walk {
            ttl_policy: FxMap::default(),
            names: Names::default(),
            #[cfg(test)]
            shadow: Names::default(),
            #[cfg(test)]
            uncertain: 0,
            #[cfg(test)]
            walking: None,
            #[cfg(test)]
            late_ops: Default::default(),
            next: 0,
            walked_ns: 0,
            grants: Window::with_capacity(0),
            grant_of: Window::with_capacity(0),
            deferred: FxMap::default(),
            holds: FxMap::default(),
            hold_of: FxMap::default(),
            first_info: FxMap::default(),
            sessions: Vec::new(),
            ok_acquires: 0,
            unplaced: 0,
            ambiguity_capped: 0,
            state: Window::with_capacity(0),
            open: Vec::new(),
            closed: 0,
            sessions_closed: 0,
            horizon_ns: u64::MAX,
            early_ttls: Vec::new(),
            early_dropped: FxMap::default(),
            open_max: 0,
            info_in: FxMap::default(),
            closed_sessions_of: FxMap::default(),
            dropped_sessions_of: FxMap::default(),
            #[cfg(test)]
            dropped_sessions_which: FxMap::default(),
            late: 0,
            stale_dropped: 0,
            #[cfg(test)]
            late_grants: Vec::new(),
            #[cfg(test)]
            closed_log: Vec::new(),
            #[cfg(test)]
            dropped_at: FxMap::default(),
            pruned_at: 0,
            survivors: 0,
            prune_every: PRUNE_EVERY,
        }
    }

    /// The next position the walk will visit (a streaming reader walks up to where its rule
    /// allows; the tests walk in file order with it).
    pub(crate) fn next(&self) -> usize {
        self.next
    }

    /// The op at `pos` has completed (its grant id, if any, and whether it is no lease, are
    /// known): its answer joins the ttl policy, and an ok acquire joins the names from here
    /// on. Called for every op as it completes, before any op completed after its invoke is
    /// walked.
    pub(crate) fn completed(
        &mut self,
        pos: usize,
        op: &ClientOp,
        id: Option<u32>,
        hold: Option<Hold>,
    ) {
        // A grant that is no lease (model item 9) says nothing of the lease a lost answer
        // would have set.
        if let (Func::Acquire | Func::Renew, Outcome::Ok, Some(r), Some(t), None) = (
            op.func,
            op.outcome,
            op.requested_ttl_ms(),
            op.ttl_ms(),
            hold,
        ) {
            let e = self.ttl_policy.entry(r).or_insert((t, t));
            *e = (e.0.min(t), e.1.max(t));
        }
        if op.func != Func::Acquire || op.outcome != Outcome::Ok || op.target == NO_TARGET {
            return;
        }
        let at = (op.invoke_ns, pos as OpPos);
        self.names.completed(op.target, op.token(), id, at);
        #[cfg(test)]
        self.shadow.completed(op.target, op.token(), id, at);
        if let Some(h) = hold {
            self.holds.insert(pos as OpPos, h);
        }
    }

    /// Walks the op at [`Walk::next`]: `ops[pos]` has completed (or never will), and every
    /// acquire it may name has been told to [`Walk::completed`]. `id`: its grant id.
    pub(crate) fn walk(&mut self, ops: &mut Ops, id: Option<u32>) {
        let pos = self.next;
        self.next += 1;
        let op = &ops[pos];
        self.walked_ns = op.invoke_ns;
        if op.outcome == Outcome::Info && !self.first_info.contains_key(&op.process) {
            self.first_info.insert(op.process, pos as OpPos);
            self.crashed_late(op.process, pos);
        }
        if op.target == NO_TARGET {
            self.unplaced += 1;
            self.grant_of.push(NO_GRANT);
            return;
        }
        if op.func == Func::Acquire && op.outcome == Outcome::Ok {
            self.grant_of.push(NO_GRANT);
            return self.grant(pos, ops, id);
        }
        #[cfg(test)]
        {
            self.walking = Some(pos as OpPos);
        }
        let uses = match op.func {
            Func::Acquire => NO_GRANT,
            Func::Renew | Func::Release => self.act(pos, ops, id),
            Func::Read | Func::Write => {
                let (p, token) = (op.process, op.token());
                match token.and_then(|t| self.names.store(p, t)) {
                    Some(Named::Grant(g)) if (g as usize) < self.grants.base() => {
                        self.went_stale(g as usize);
                        NO_GRANT
                    }
                    Some(Named::Grant(g)) => g,
                    // A store op with no grant changes no grant: only a dropped one matters.
                    Some(_) => {
                        #[cfg(test)]
                        let exact = (token.and_then(|t| self.shadow.store(p, t)), true);
                        self.forgotten(
                            #[cfg(test)]
                            exact,
                        );
                        NO_GRANT
                    }
                    None => NO_GRANT,
                }
            }
        };
        #[cfg(test)]
        {
            self.walking = None;
        }
        self.grant_of.push(uses);
    }

    /// An ok acquire: a new grant, known by its names from here on; the ops that named it
    /// ahead of the walk join its epoch.
    fn grant(&mut self, pos: usize, ops: &mut Ops, id: Option<u32>) {
        let op = &ops[pos];
        let (p, target, token) = (op.process, op.target, op.token());
        self.ok_acquires += 1;
        let g = self.grants.len() as u32;
        self.names.granted(p, target, token, id, g);
        #[cfg(test)]
        self.shadow.granted(p, target, token, id, g);
        self.state.push(Close::Open);
        debug_assert_eq!(
            self.state.len(),
            self.grants.len() + 1,
            "one state per grant"
        );
        self.open.push(g);
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
        if let Some(h) = self.holds.remove(&(pos as OpPos)) {
            self.hold_of.insert(g, h);
            if h == Hold::Session {
                self.sessions.push(pos);
            }
        }
        // Those ops come before the grant in position order: the epoch stays sorted.
        for (at, join) in self.deferred.remove(&(pos as OpPos)).unwrap_or_default() {
            if join == Join::Named {
                self.grant_of[at as usize] = g;
            }
            self.join(g, at as usize, ops, join);
        }
    }

    /// Op `pos` joins grant `g`'s epoch (positions come in order for each grant), and takes
    /// the marks of a grant that is no lease (model item 9): the holder's releases and its
    /// renews that did not answer ok end a session's belief (`session_end`); an ok renew, the
    /// check of a live session, or another process's renew, keeps it without end; a
    /// transaction's renews set no lease.
    fn join(&mut self, g: u32, pos: usize, ops: &mut Ops, join: Join) {
        self.went_stale(g as usize);
        let grant = &mut self.grants[g as usize];
        debug_assert!(
            grant.epoch_ops.last().is_none_or(|&e| (e as usize) < pos),
            "an epoch's ops join in position order"
        );
        grant.epoch_ops.push(pos as OpPos);
        let op = &mut ops[pos];
        if op.outcome == Outcome::Info && self.horizon_ns != u64::MAX {
            self.info_in.entry(pos as OpPos).or_default().push(g);
        }
        if join == Join::Named && op.func == Func::Release && grant.release_op.is_none() {
            grant.release_op = Some(pos as OpPos);
        }
        let Some(&h) = self.hold_of.get(&g) else {
            return;
        };
        let own = op.process == grant.process;
        match (h, op.func, op.outcome) {
            (Hold::Transaction, Func::Renew, _) => op.set_ttl_by_hold(None),
            (Hold::Session, Func::Renew, Outcome::Ok) => op.set_ttl_by_hold(Some(SESSION_TTL_MS)),
            (Hold::Session, Func::Renew | Func::Release, _) if own => op.set_session_end(),
            (Hold::Session, Func::Renew, _) => op.set_ttl_by_hold(Some(SESSION_TTL_MS)),
            _ => {}
        }
    }

    /// A renew or release acts on the lease it names, whichever process sent it: by its
    /// token, else by the service's grant id, else the sender's own latest grant of the lock.
    /// A name no grant carries acts on no known one. Returns the grant the op uses
    /// ([`NO_GRANT`] while the grant it names is ahead of the walk: set when it is walked).
    fn act(&mut self, pos: usize, ops: &mut Ops, id: Option<u32>) -> u32 {
        let op = &ops[pos];
        let (p, target, token) = (op.process, op.target, op.token());
        let done_ns = op.complete_or_max();
        let named = self
            .names
            .named(p, target, token, id, done_ns)
            .map(|n| self.found(n));
        match named {
            Some(Found::Walked(g)) => {
                self.join(g, pos, ops, Join::Named);
                g
            }
            Some(Found::Ahead(at)) => {
                self.defer(at, pos, Join::Named);
                NO_GRANT
            }
            Some(Found::Dropped(which)) => {
                self.reached_dropped(which);
                NO_GRANT
            }
            Some(Found::Forgotten) => {
                // What the name named, and whether naming no grant would have changed none
                // (an op without a token, or no grant without one to take it).
                #[cfg(test)]
                let exact = (
                    self.shadow.named(p, target, token, id, done_ns),
                    token.is_none()
                        || self
                            .shadow
                            .untokened(target, done_ns, UNTOKENED_CANDIDATES_MAX)
                            .2
                            .is_empty(),
                );
                self.forgotten(
                    #[cfg(test)]
                    exact,
                );
                NO_GRANT
            }
            // A token no grant of the lock carries may be that of any grant whose ok came
            // without a readable token (unknown, not absent): the op may have acted on each of
            // them, so on each it counts as indeterminate. It uses the sender's own, if that
            // is one.
            None if token.is_some() => {
                self.ambiguous(pos, ops);
                self.names
                    .latest(p, target)
                    .filter(|&g| {
                        self.grants
                            .get(g as usize)
                            .is_some_and(|g| g.token.is_none())
                    })
                    .unwrap_or(NO_GRANT)
            }
            None => NO_GRANT,
        }
    }

    /// The grant made by the ok acquire at `at`: one the walk keeps, one ahead of it, or one
    /// a streaming reader dropped.
    fn walked(&self, at: OpPos) -> Found {
        if (at as usize) >= self.next {
            return Found::Ahead(at);
        }
        let g = self.grants.partition_point(|g| g.op < at as usize);
        match self.grants.get(g) {
            Some(grant) if grant.op == at as usize => Found::Walked(g as u32),
            _ => {
                debug_assert!(
                    self.grants.base() > 0 && g == self.grants.base(),
                    "an ok acquire walked is a grant, kept or dropped"
                );
                Found::Dropped(Err(at))
            }
        }
    }

    /// Where a name leads.
    fn found(&self, n: Named) -> Found {
        match n {
            Named::Grant(g) => self.kept(g),
            Named::Acquire(at) => self.walked(at),
            Named::Forgotten => Found::Forgotten,
        }
    }

    /// A name the reader pruned may have been a dropped grant's: counted late, as reaching
    /// it. The tests learn from the names never pruned (`exact`: what it named, and whether
    /// naming no grant changes none) which dropped grant it reached, or leave the history out
    /// of the grant-by-grant comparison when the walk went elsewhere.
    fn forgotten(&mut self, #[cfg(test)] exact: (Option<Named>, bool)) {
        self.late += 1;
        #[cfg(test)]
        self.late_ops.extend(self.walking);
        #[cfg(test)]
        match exact.0.map(|n| self.found(n)) {
            Some(Found::Dropped(Ok(g))) => self.late_grants.push(g),
            Some(Found::Dropped(Err(at))) => self.late_grants.push(self.dropped_at[&at]),
            None if exact.1 => {}
            _ => self.uncertain += 1,
        }
    }

    /// Grant number `g`, kept or dropped.
    fn kept(&self, g: u32) -> Found {
        if (g as usize) < self.grants.base() {
            Found::Dropped(Ok(g))
        } else {
            Found::Walked(g)
        }
    }

    fn defer(&mut self, grant_at: OpPos, pos: usize, join: Join) {
        self.deferred
            .entry(grant_at)
            .or_default()
            .push((pos as OpPos, join));
    }

    /// Every grant without a token invoked before the ambiguous op at `pos` completed may be
    /// the one it named (the op may take effect after a grant asked for later than itself):
    /// the latest [`UNTOKENED_CANDIDATES_MAX`] of them.
    fn ambiguous(&mut self, pos: usize, ops: &mut Ops) {
        let op = &ops[pos];
        let (target, done_ns) = (op.target, op.complete_or_max());
        let (capped, dropped, candidates) =
            self.names
                .untokened(target, done_ns, UNTOKENED_CANDIDATES_MAX);
        if dropped == 0 && candidates.is_empty() {
            return;
        }
        self.ambiguity_capped += capped;
        ops[pos].set_ambiguous();
        // The dropped ones come first: the shadow's first ones are theirs.
        #[cfg(test)]
        let shadow = self
            .shadow
            .untokened(target, done_ns, UNTOKENED_CANDIDATES_MAX)
            .2;
        #[cfg(test)]
        for &at in &shadow[..dropped] {
            self.reached_dropped(Err(at));
        }
        #[cfg(not(test))]
        {
            self.late += dropped as u64;
        }
        for at in candidates {
            match self.walked(at) {
                Found::Walked(g) => self.join(g, pos, ops, Join::Candidate),
                Found::Ahead(at) => self.defer(at, pos, Join::Candidate),
                Found::Dropped(which) => self.reached_dropped(which),
                Found::Forgotten => unreachable!("a kept acquire's position is walked or ahead"),
            }
        }
    }

    /// [`Walk::mark_crash`] for every session grant not closed, in position order.
    pub(crate) fn mark_crashes(&mut self, ops: &mut Ops) {
        for i in self.sessions_closed..self.sessions.len() {
            let g = self.grants.partition_point(|g| g.op < self.sessions[i]);
            self.mark_crash(g, ops);
        }
    }

    /// Ends session grant `g`'s belief at its holder's crash (model item 9): a process whose
    /// op went unanswered (`info`, whatever it asked) never acts again, so from that op's
    /// invoke its belief may end, as its release would. The op joins the grant's epoch, marked
    /// `session_end`, unless it is there already or the belief ended before it. Called once
    /// per session grant, in position order, once the ops before the crash have their marks
    /// (every grant they may name walked) and before any lease is followed.
    fn mark_crash(&mut self, g: usize, ops: &mut Ops) {
        let grant = &mut self.grants[g];
        let Some(&crash) = self.first_info.get(&grant.process) else {
            return;
        };
        if crash as usize <= grant.op {
            return;
        }
        let epoch = &mut grant.epoch_ops;
        let at = epoch.partition_point(|&e| e < crash);
        let ended = epoch[..at].iter().any(|&e| ops[e as usize].session_end());
        if ended || epoch.get(at) == Some(&crash) {
            return;
        }
        epoch.insert(at, crash);
        if !ops[crash as usize].session_end() {
            ops[crash as usize].set_session_end();
            self.marked(crash, g);
        }
    }

    /// Op `pos` was marked `session_end` while closing grant `by`: every other closed grant
    /// whose epoch holds it was followed without the mark.
    fn marked(&mut self, pos: OpPos, by: usize) {
        let holders = self.info_in.get(&pos).cloned().unwrap_or_default();
        for g in holders {
            if g as usize != by {
                self.went_stale(g as usize);
            }
        }
    }

    /// Process `p`'s first unanswered op, at `pos`, came after some of its session grants
    /// were closed: each would have taken it as its holder's crash.
    fn crashed_late(&mut self, p: u64, pos: usize) {
        self.late += self.dropped_sessions_of.remove(&p).unwrap_or(0);
        #[cfg(test)]
        self.late_grants
            .extend(self.dropped_sessions_which.remove(&p).unwrap_or_default());
        for g in self.closed_sessions_of.remove(&p).unwrap_or_default() {
            // A session grant of the process comes before its first unanswered op, whether the
            // walk still keeps it or not.
            if self
                .grants
                .get(g as usize)
                .is_none_or(|grant| grant.op < pos)
            {
                self.went_stale(g as usize);
            }
        }
    }

    /// Closes the open grants whose reach the walk has passed by [`Walk::horizon_ns`] (a
    /// session only once every earlier session is closed): see [`Walk::close_one`].
    /// `lease_from`: the adapter's evidence that a grant's lease was set before it. Returns the
    /// grants it closed, in the order it closed them.
    pub(crate) fn close(
        &mut self,
        ops: &mut Ops,
        drift: Drift,
        lease_from: impl Fn(usize) -> Option<u64>,
    ) -> Vec<u32> {
        let mut closed = Vec::new();
        if self.horizon_ns == u64::MAX || self.next == 0 {
            self.open_max = self.open_max.max(self.open.len());
            return closed;
        }
        // Every op invoked before this instant has been walked.
        let now = self.walked_ns;
        let mut open = std::mem::take(&mut self.open);
        let mut sessions_wait = false;
        // Bounded by the grants open.
        open.retain(|&g| {
            let g = g as usize;
            let session = self.is_session(g);
            if (session && sessions_wait)
                || self.reach(g, ops).saturating_add(self.horizon_ns) >= now
            {
                sessions_wait |= session;
                return true;
            }
            self.close_one(g, session, ops, drift, &lease_from);
            closed.push(g as u32);
            false
        });
        self.open = open;
        self.open_max = self.open_max.max(self.open.len());
        closed
    }

    /// Closes grant `g`: its lost answers take the ttl the policy gives now, its holder's
    /// crash is marked if it held a session, and its lease is followed.
    fn close_one(
        &mut self,
        g: usize,
        session: bool,
        ops: &mut Ops,
        drift: Drift,
        lease_from: &impl Fn(usize) -> Option<u64>,
    ) {
        for i in 0..self.grants[g].epoch_ops.len() {
            let e = self.grants[g].epoch_ops[i];
            let op = &mut ops[e as usize];
            if let (true, Some(r)) = (settle(&self.ttl_policy, op), op.requested_ttl_ms()) {
                let set = self.ttl_policy.get(&r).map(|p| p.0);
                self.early_ttls.push((g as u32, r, set));
            }
        }
        self.state[g] = Close::Closed;
        self.closed += 1;
        if session {
            self.sessions_closed += 1;
            self.mark_crash(g, ops);
            let p = self.grants[g].process;
            if !self.first_info.contains_key(&p) {
                self.closed_sessions_of.entry(p).or_default().push(g as u32);
            }
        }
        let grant = &mut self.grants[g];
        let from = lease_from(grant.op);
        follow(grant, ops, drift, from, session);
        #[cfg(test)]
        self.closed_log.push((g as u32, format!("{grant:?}")));
    }

    /// No grant closed from now on holds the lock before this instant: the earliest invoke
    /// of a grant still open or an op not yet walked (a hold starts at its grant's answer or
    /// at a renew's, both after the grant's invoke). `u64::MAX` when neither is left.
    pub(crate) fn watermark_ns(&self, ops: &Ops) -> u64 {
        let open = self
            .open
            .first()
            .map_or(u64::MAX, |&g| self.grants[g as usize].invoke_ns);
        let unwalked = ops.get(self.next).map_or(u64::MAX, |o| o.invoke_ns);
        open.min(unwalked)
    }

    /// The first position a later step of the walk may read: the next op to walk, the ops of
    /// the grants still open (an epoch may hold ops before its grant, named ahead of it), and
    /// the ops waiting for a grant ahead of the walk; and the ops of the `pinned` grants, which
    /// a streaming rule may still render. A streaming reader drops every op before it.
    pub(crate) fn first_needed(&self, pinned: &[u32]) -> usize {
        let mut first = self.next;
        for &g in self.open.iter().chain(pinned) {
            let grant = &self.grants[g as usize];
            first = first.min(grant.op);
            if let Some(&e) = grant.epoch_ops.first() {
                first = first.min(e as usize);
            }
        }
        for list in self.deferred.values() {
            for &(at, _) in list {
                first = first.min(at as usize);
            }
        }
        first
    }

    /// The grants not closed, in position order.
    pub(crate) fn open(&self) -> &[u32] {
        &self.open
    }

    /// Whether grant `g` (one the walk keeps) is a session's (model item 9).
    fn is_session(&self, g: usize) -> bool {
        self.hold_of.get(&(g as u32)) == Some(&Hold::Session)
    }

    /// A closed grant `g` was reached after its closing (or after it was dropped).
    fn went_stale(&mut self, g: usize) {
        if g < self.state.base() {
            self.reached_dropped(Ok(g as u32));
        } else if self.state[g] == Close::Closed {
            self.state[g] = Close::Stale;
        }
    }

    /// Something reached a dropped grant (by number, or by its acquire's position).
    fn reached_dropped(&mut self, which: Result<u32, OpPos>) {
        self.late += 1;
        #[cfg(test)]
        self.late_ops.extend(self.walking);
        #[cfg(test)]
        self.late_grants.push(match which {
            Ok(g) => g,
            Err(at) => self.dropped_at[&at],
        });
        #[cfg(not(test))]
        let _ = which;
    }

    /// Drops the closed grants before the first one open (a streaming reader's), and, now and
    /// then, prunes what points at dropped grants: the names (of which only what tells a name
    /// of a dropped grant from a name no grant carries is kept, `names.rs`), and the maps of
    /// grants and processes. Returns whether it pruned.
    /// The `pinned` grants are kept, and every grant after the first of them.
    pub(crate) fn drop_closed(&mut self, pinned: &[u32]) -> bool {
        let open = self.open.first().map_or(self.grants.len(), |&g| g as usize);
        let keep = pinned.iter().map(|&g| g as usize).fold(open, usize::min);
        for g in self.state.base()..keep {
            if self.state[g] == Close::Stale {
                self.stale_dropped += 1;
                #[cfg(test)]
                self.late_grants.push(g as u32);
            }
        }
        #[cfg(test)]
        for g in self.grants.base()..keep {
            self.dropped_at.insert(self.grants[g].op as OpPos, g as u32);
        }
        let first_op = self.grants.get(keep).map_or(self.next, |g| g.op);
        self.grants.drop_before(keep);
        self.state.drop_before(keep);
        let dropped = self.sessions.partition_point(|&s| s < first_op);
        self.sessions.drain(..dropped);
        self.sessions_closed -= dropped;
        // Each prune costs the size of the maps it prunes: done once as many grants were
        // dropped as it left entries, so that its cost is spread over the drops.
        if keep < self.pruned_at + self.prune_every.max(self.survivors) {
            return false;
        }
        self.pruned_at = keep;
        let k = keep as u32;
        let dropped = &mut self.early_dropped;
        self.early_ttls.retain(|&(g, r, set)| {
            if g >= k {
                return true;
            }
            let e = dropped.entry((r, set)).or_default();
            e.count += 1;
            #[cfg(test)]
            e.grants.push(g);
            false
        });
        let first_info = &self.first_info;
        let names = self
            .names
            .prune(k, first_op as OpPos, |p| first_info.contains_key(&p));
        // A crashed process never acts again: its crash matters only to its grants kept.
        let holders: crate::model::FxSet<u64> = self.grants.iter().map(|g| g.process).collect();
        self.first_info.retain(|p, _| holders.contains(p));
        self.hold_of.retain(|g, _| *g >= k);
        self.info_in.retain(|_, list| {
            list.retain(|&g| g >= k);
            !list.is_empty()
        });
        let dropped_of = &mut self.dropped_sessions_of;
        #[cfg(test)]
        let which = &mut self.dropped_sessions_which;
        self.closed_sessions_of.retain(|&p, list| {
            list.retain(|&g| {
                if g < k {
                    *dropped_of.entry(p).or_default() += 1;
                    #[cfg(test)]
                    which.entry(p).or_default().push(g);
                }
                g >= k
            });
            !list.is_empty()
        });
        self.survivors = names
            + self.first_info.len()
            + self.hold_of.len()
            + self.info_in.len()
            + self.closed_sessions_of.len()
            + self.dropped_sessions_of.len()
            + self.early_ttls.len();
        true
    }

    /// Until when grant `g` may still matter: the completion of its last op (never, while one
    /// is pending) plus twice its longest ttl, unless a release or its holder's crash ended
    /// it.
    fn reach(&self, g: usize, ops: &Ops) -> u64 {
        let grant = &self.grants[g];
        let mut last = grant.complete_ns;
        let mut ttl_ms = grant.ttl_ms.unwrap_or(0);
        let mut ended = self
            .first_info
            .get(&grant.process)
            .is_some_and(|&c| c as usize > grant.op);
        for &e in &grant.epoch_ops {
            let op = &ops[e as usize];
            last = last.max(op.complete_or_max());
            ttl_ms = ttl_ms.max(op.ttl_ms().or(op.requested_ttl_ms()).unwrap_or(0));
            ended |= op.func == Func::Release && op.outcome == Outcome::Ok;
        }
        if ended {
            return last;
        }
        last.saturating_add(ttl_ms.saturating_mul(2_000_000))
    }

    /// The end of the walk: every op's lost answer takes the ttl of the whole run's policy,
    /// and a closed grant whose lost answers the policy sets otherwise than at its closing is
    /// stale.
    pub(crate) fn settle_all(&mut self, ops: &mut Ops) {
        for op in ops.iter_mut() {
            settle(&self.ttl_policy, op);
        }
        for i in 0..self.early_ttls.len() {
            let (g, r, set) = self.early_ttls[i];
            if self.ttl_policy.get(&r).map(|p| p.0) != set {
                self.went_stale(g as usize);
            }
        }
        let dropped = std::mem::take(&mut self.early_dropped);
        for ((r, set), e) in dropped {
            if self.ttl_policy.get(&r).map(|p| p.0) != set {
                // Each dropped grant went stale: `went_stale` of a dropped one.
                self.late += e.count;
                #[cfg(test)]
                self.late_grants.extend(e.grants);
            }
        }
    }

    /// Follows every grant not closed, after [`Walk::settle_all`] and the crashes marked.
    pub(crate) fn follow_rest(
        &mut self,
        ops: &Ops,
        drift: Drift,
        lease_from: impl Fn(usize) -> Option<u64>,
    ) {
        for &g in &self.open {
            let g = g as usize;
            let session = self.is_session(g);
            let grant = &mut self.grants[g];
            let from = lease_from(grant.op);
            follow(grant, ops, drift, from, session);
        }
    }
}

/// The lost answers of dropped grants whose policy was read early, for one (requested ttl, ttl).
#[derive(Debug, Default)]
struct EarlyDropped {
    count: u64,
    #[cfg(test)]
    grants: Vec<u32>,
}

/// Follows grant `g`'s lease (its holds and bounds) and the span it surely lasts whenever it
/// took effect (`Grant::alive_until_ns`), once its epoch and the policy are final.
fn follow(g: &mut Grant, ops: &Ops, drift: Drift, lease_from_ns: Option<u64>, session: bool) {
    follow_lease(g, ops, drift, lease_from_ns, session);
    let of = SpanOf {
        drift,
        lease_from_ns,
        session,
    };
    g.alive_until_ns = span_end_of(ops, g, (g.invoke_ns, u64::MAX), of).0;
}

/// A lost answer's lease counts with the shortest ttl the run granted for its request (model
/// item 7), unless a grant that is no lease set its ttl (model item 9). Called for each op once
/// the policy is the one it is judged with, before its lease is followed.
/// Whether `op` is one the policy sets.
pub(crate) fn settle(ttl_policy: &FxMap<u64, (u64, u64)>, op: &mut ClientOp) -> bool {
    let lost = matches!(op.func, Func::Acquire | Func::Renew)
        && matches!(op.outcome, Outcome::Info | Outcome::Pending)
        && !op.ttl_set_by_hold();
    if lost {
        if let Some(&(shortest, _)) = op.requested_ttl_ms().and_then(|r| ttl_policy.get(&r)) {
            op.set_ttl_ms(Some(shortest));
        }
    }
    lost
}
