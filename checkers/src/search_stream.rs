//! The model search (search.rs) made as the history is read. Each op is handed to its lock's
//! search once no later step of the walk reads it (so its marks, and the crashes of the
//! session grants whose epoch holds it, are final), in position order; each search then
//! searches its instants up to the invoke of the first op not yet handed over, before which
//! every op of the lock is known. What a search keeps is its ops in flight and the grants its
//! open orders name, not the lock's history ([`SEARCH_KEPT_MAX`] ops at most).
//!
//! Read to the end, it decides what the batch's `search_all` decides of the same history, with
//! one difference stated: a renew or release naming the grant id of a lost grant is matched
//! against the ids answered before it is searched (the latest [`ANSWERED_IDS_MAX`] of them),
//! where the batch knows every id the history answers (an id answered only later, by a grant
//! invoked after the renew, or long before, is the batch's alone). Ops the walk stopped waiting
//! for, taken as pending, are searched as pending.

use crate::model::{Grant, OpPos};
use crate::search::{searched_op, Facts, LockOp, Search};
use crate::walk::Ops;
use crate::{Drift, FxMap};
use history::{Outcome, Violation};
use std::collections::BTreeMap;

/// The most ops one lock's search keeps at once: an op in flight for good (pending, or taken
/// as pending by the walk) keeps every op after it; past this the search of the lock stops,
/// with a note, and the rules' readings stand.
pub(crate) const SEARCH_KEPT_MAX: usize = 1 << 16;

/// The answered grant ids one lock's search remembers (services that send ids give every
/// grant its own): the latest this many, about 1 MiB. An id older than that, named by a renew
/// or release for a lost grant, is taken as the lost grant's (the batch, which knows every id,
/// may find that order impossible: a finding missed, never one made up).
pub(crate) const ANSWERED_IDS_MAX: usize = 1 << 16;

/// Every lock's search, fed as the walk passes the ops.
#[derive(Default)]
pub(crate) struct SearchStream {
    /// By lock id.
    locks: Vec<Option<Search>>,
    /// Ops handed over: every position before it.
    pub(crate) fed: usize,
    /// Per op walked and not yet handed over: the number of the grant id it carries.
    ids: FxMap<OpPos, u32>,
    /// The walked ops not yet handed over that the walk took as session grants.
    sessions: crate::model::FxSet<OpPos>,
    /// Crash ops of session grants' holders not yet handed over, with the locks of those
    /// grants (model item 9).
    crashes: BTreeMap<OpPos, Vec<u32>>,
    /// The violations proven, each once, with its lock (at most one per lock: its search
    /// stops there).
    pub(crate) found: Vec<(u32, Violation)>,
    /// The most ops one lock's search kept at once ([`SEARCH_KEPT_MAX`]; the tests set less),
    /// and the answered ids it remembers ([`ANSWERED_IDS_MAX`]).
    pub(crate) kept_max: Option<usize>,
    pub(crate) ids_max: Option<usize>,
    pub(crate) kept_most: usize,
}

impl SearchStream {
    /// Op `pos` was walked, carrying grant id number `id`; `session`: it is the acquire of a
    /// grant the walk took as a session's.
    pub(crate) fn walked(&mut self, pos: usize, id: Option<u32>, session: bool) {
        if let Some(id) = id {
            self.ids.insert(pos as OpPos, id);
        }
        if session {
            self.sessions.insert(pos as OpPos);
        }
    }

    /// Session grant `g` closed: the unanswered ops of its epoch that end its belief are its
    /// holder's crash, read by the search of its lock as a release (see `search_all`).
    pub(crate) fn closed_session(&mut self, g: &Grant, ops: &Ops) {
        for &e in &g.epoch_ops {
            let op = &ops[e as usize];
            if op.session_end() && op.outcome == Outcome::Info {
                let locks = self.crashes.entry(e).or_default();
                if !locks.contains(&g.lock) {
                    locks.push(g.lock);
                }
            }
        }
    }

    /// Hands every op before `upto` to its lock's search and searches each lock as far as
    /// the ops handed over allow; `before_ns`: the invoke of the first op not handed over (or
    /// the instant read to).
    pub(crate) fn feed(&mut self, upto: usize, before_ns: u64, read: &Read<'_>) {
        // Bounded by the ops read.
        while self.fed < upto {
            let pos = self.fed;
            self.fed += 1;
            let op = &read.ops[pos];
            let key = pos as OpPos;
            let id = self.ids.remove(&key);
            let session = self.sessions.remove(&key);
            if (op.target as usize) < read.locks.len() && searched_op(op) {
                let facts = Facts {
                    session,
                    grant: id,
                    lease_from_ns: read.lease_from.get(&key).copied(),
                };
                self.search(op.target, read).push(LockOp::of(op, &facts));
            }
            // After the op it shares a position with, as the batch orders them.
            if let Some(locks) = self.crashes.remove(&key) {
                for lock in locks {
                    self.search(lock, read).push(LockOp::crash(op));
                }
            }
        }
        for (lock, s) in self.locks.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            let was = s.impossible().is_some();
            s.run_to(before_ns);
            self.kept_most = self.kept_most.max(s.kept_most);
            if let (false, Some(v)) = (was, s.impossible()) {
                self.found.push((lock as u32, v.clone()));
            }
        }
    }

    fn search(&mut self, lock: u32, read: &Read<'_>) -> &mut Search {
        let at = lock as usize;
        if self.locks.len() <= at {
            self.locks.resize_with(at + 1, || None);
        }
        let kept_max = self.kept_max.unwrap_or(SEARCH_KEPT_MAX);
        let ids_max = self.ids_max.unwrap_or(ANSWERED_IDS_MAX);
        self.locks[at].get_or_insert_with(|| {
            let name = read.locks.get(at).map_or("?", String::as_str);
            Search::new(name, read.drift, kept_max).remember_ids(ids_max)
        })
    }

    /// The answered grant ids the searches remember, over every lock.
    #[cfg(test)]
    pub(crate) fn ids_kept(&self) -> usize {
        self.locks.iter().flatten().map(Search::ids_kept).sum()
    }

    /// The processes whose last op the searches remember, over every lock.
    #[cfg(test)]
    pub(crate) fn processes_kept(&self) -> usize {
        self.locks
            .iter()
            .flatten()
            .map(Search::processes_kept)
            .sum()
    }

    /// Every lock's verdict once the history is read (each op handed over): as `search_all`
    /// gives them, one per lock of the `locks` the history names.
    pub(crate) fn finish(&mut self, locks: usize) -> Vec<(u32, crate::search::Searched)> {
        let mut all = std::mem::take(&mut self.locks);
        all.resize_with(locks.max(all.len()), || None);
        all.into_iter()
            .enumerate()
            .map(|(lock, s)| {
                let possible = crate::search::Searched::Possible;
                (lock as u32, s.map_or(possible, Search::finish))
            })
            .collect()
    }
}

/// What the search reads of the digest as it hands ops over.
pub(crate) struct Read<'a> {
    pub(crate) ops: &'a Ops,
    pub(crate) locks: &'a [String],
    pub(crate) lease_from: &'a FxMap<OpPos, u64>,
    pub(crate) drift: Drift,
}
