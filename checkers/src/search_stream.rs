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
    /// The searches, when they run on the reader's thread (and once a searching thread is
    /// joined).
    searches: Searches,
    /// Whether the searches run on a thread of their own ([`SearchStream::on_a_thread`]).
    threaded: bool,
    /// That thread, once started, and the steps not yet sent to it.
    worker: Option<Worker>,
    batch: Vec<Step>,
    /// Per lock id: whether its search was opened.
    opened: Vec<bool>,
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
    /// stops there). On a thread of their own, the searches report them a little after.
    pub(crate) found: Vec<(u32, Violation)>,
    /// The most ops one lock's search kept at once ([`SEARCH_KEPT_MAX`]; the tests set less),
    /// and the answered ids it remembers ([`ANSWERED_IDS_MAX`]).
    pub(crate) kept_max: Option<usize>,
    pub(crate) ids_max: Option<usize>,
}

/// What the searches are told, in the order the reader tells them: the same steps whether
/// they run on the reader's thread or their own, so both reach the same verdicts.
enum Step {
    /// The first op of a lock is coming: its search starts.
    Open {
        lock: u32,
        name: String,
        drift: Drift,
        kept_max: usize,
        ids_max: usize,
    },
    Push(u32, LockOp),
    /// Every op invoked before this instant was pushed: search up to it.
    RunTo(u64),
}

/// The steps sent to a searching thread at once: few sends, and at most this many ops of
/// the history's held in a batch (about 400 KB).
const STEPS_PER_BATCH: usize = 4096;

/// Every lock's search, by lock id, and what they proved.
#[derive(Default)]
struct Searches {
    locks: Vec<Option<Search>>,
    /// Proven and not yet reported.
    found: Vec<(u32, Violation)>,
    kept_most: usize,
}

impl Searches {
    fn apply(&mut self, step: Step) {
        match step {
            Step::Open {
                lock,
                name,
                drift,
                kept_max,
                ids_max,
            } => {
                let at = lock as usize;
                if self.locks.len() <= at {
                    self.locks.resize_with(at + 1, || None);
                }
                self.locks[at] = Some(Search::new(&name, drift, kept_max).remember_ids(ids_max));
            }
            Step::Push(lock, op) => {
                if let Some(Some(s)) = self.locks.get_mut(lock as usize) {
                    s.push(op);
                }
            }
            Step::RunTo(before_ns) => {
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
        }
    }
}

/// The searching thread: the batches of steps it is sent, the violations it reports as it
/// proves them, and, once joined, its searches.
struct Worker {
    steps: std::sync::mpsc::SyncSender<Vec<Step>>,
    found: std::sync::mpsc::Receiver<Vec<(u32, Violation)>>,
    thread: std::thread::JoinHandle<Searches>,
}

impl Worker {
    fn start() -> Worker {
        // Two batches queued: the reader runs at most that far ahead of the searches.
        let (steps, steps_rx) = std::sync::mpsc::sync_channel::<Vec<Step>>(2);
        let (found_tx, found) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut searches = Searches::default();
            // Bounded by the batches sent, which end when the reader drops its sender.
            for batch in steps_rx {
                for step in batch {
                    searches.apply(step);
                }
                if !searches.found.is_empty() {
                    // At most one violation per lock is ever sent. The reader gone, the
                    // report has no one to read it.
                    let _ = found_tx.send(std::mem::take(&mut searches.found));
                }
            }
            searches
        });
        Worker {
            steps,
            found,
            thread,
        }
    }
}

impl SearchStream {
    /// Runs the searches on a thread of their own, beside the reader's, from the first op
    /// handed over: a whole file's check, whose reader is the critical path (the searches
    /// were a fifth of its work). Their violations then reach `found` a batch late, and all
    /// of them once [`SearchStream::settle`] joins the thread.
    pub(crate) fn on_a_thread(&mut self) {
        self.threaded = true;
    }

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
            let id = crate::model::take(&mut self.ids, key);
            let session = !self.sessions.is_empty() && self.sessions.remove(&key);
            if (op.target as usize) < read.locks.len() && searched_op(op) {
                let facts = Facts {
                    session,
                    grant: id,
                    lease_from_ns: read.lease_from.get(&key).copied(),
                };
                self.open(op.target, read);
                self.tell(Step::Push(op.target, LockOp::of(op, &facts)));
            }
            // After the op it shares a position with, as the batch orders them.
            if let Some(locks) = self.crashes.remove(&key) {
                for lock in locks {
                    self.open(lock, read);
                    self.tell(Step::Push(lock, LockOp::crash(op)));
                }
            }
        }
        self.tell(Step::RunTo(before_ns));
        if self.batch.len() >= STEPS_PER_BATCH {
            self.send();
        }
        self.take_found();
    }

    /// Opens lock `lock`'s search before its first op.
    fn open(&mut self, lock: u32, read: &Read<'_>) {
        let at = lock as usize;
        if self.opened.len() <= at {
            self.opened.resize(at + 1, false);
        }
        if self.opened[at] {
            return;
        }
        self.opened[at] = true;
        self.tell(Step::Open {
            lock,
            name: read.locks.get(at).map_or("?", String::as_str).to_string(),
            drift: read.drift,
            kept_max: self.kept_max.unwrap_or(SEARCH_KEPT_MAX),
            ids_max: self.ids_max.unwrap_or(ANSWERED_IDS_MAX),
        });
    }

    /// Applies `step` here, or batches it for the searching thread.
    fn tell(&mut self, step: Step) {
        if self.threaded {
            self.batch.push(step);
        } else {
            self.searches.apply(step);
        }
    }

    /// Sends the batch to the searching thread, started the first time.
    pub(crate) fn send(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let worker = self.worker.get_or_insert_with(Worker::start);
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(STEPS_PER_BATCH));
        if worker.steps.send(batch).is_err() {
            // The thread is gone (it panicked): joining it says why.
            self.settle();
        }
    }

    /// Moves what the searches proved into `found`.
    pub(crate) fn take_found(&mut self) {
        if let Some(w) = &self.worker {
            // Bounded by the reports sent: at most one violation per lock.
            while let Ok(found) = w.found.try_recv() {
                self.found.extend(found);
            }
        }
        self.found.append(&mut self.searches.found);
    }

    /// The most ops one lock's search kept at once: known here once the searches are settled
    /// (a searching thread keeps its own count until it is joined).
    pub(crate) fn kept_most(&self) -> usize {
        self.searches.kept_most
    }

    /// Brings the searches back to this thread once every op is handed over: what they proved
    /// is all in `found`, and `kept_most` is theirs. Nothing to do when they ran here.
    pub(crate) fn settle(&mut self) {
        if self.threaded {
            self.threaded = false;
            let batch = std::mem::take(&mut self.batch);
            if let Some(w) = self.worker.take() {
                // The last batch, then the end of the steps: the thread applies them, reports
                // and returns. Its reports are all sent once it is joined, and read then.
                let _ = w.steps.send(batch);
                drop(w.steps);
                let searches = match w.thread.join() {
                    Ok(s) => s,
                    Err(panic) => std::panic::resume_unwind(panic),
                };
                self.found.extend(w.found.try_iter().flatten());
                self.searches = searches;
            } else {
                for step in batch {
                    self.searches.apply(step);
                }
            }
        }
        self.take_found();
    }

    /// The answered grant ids the searches remember, over every lock.
    #[cfg(test)]
    pub(crate) fn ids_kept(&self) -> usize {
        (self.searches.locks.iter().flatten())
            .map(Search::ids_kept)
            .sum()
    }

    /// The processes whose last op the searches remember, over every lock.
    #[cfg(test)]
    pub(crate) fn processes_kept(&self) -> usize {
        (self.searches.locks.iter().flatten())
            .map(Search::processes_kept)
            .sum()
    }

    /// Every lock's verdict once the history is read (each op handed over): as `search_all`
    /// gives them, one per lock of the `locks` the history names.
    pub(crate) fn finish(&mut self, locks: usize) -> Vec<(u32, crate::search::Searched)> {
        self.settle();
        let mut all = std::mem::take(&mut self.searches.locks);
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
