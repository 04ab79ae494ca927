//! The names the walk finds grants by (`walk.rs`): a lock and a token, a lock and a grant id,
//! a process's own grants, its latest grant of a lock, the token of a store op, and a lock's
//! grants without a token (what an ambiguous op may name).
//!
//! A streaming reader drops closed grants (`Walk::drop_closed`), and then prunes what names
//! them ([`Names::prune`]), keeping only what tells a name of a dropped grant from a name no
//! grant carries: per lock, the highest token and id a dropped grant carried; per process
//! still running, the highest of its own; per lock, how many grants without a token were
//! dropped. A lock's names rise with time, so one number stands for the set of names dropped.
//! A name at most that high that no kept grant carries is [`Named::Forgotten`]: it may be a
//! dropped grant's, and the walk counts it as reached late, never as a name no grant carries.
//! Entries of crashed processes go whole: a process whose op went unanswered never acts again
//! (docs/history.md, rule 9), and only a process's own ops look up its entries.

use crate::model::OpPos;
use crate::FxMap;

/// Grants by one name (a lock and a token, or a lock and a grant id), as `(invoke, position)`
/// of their ok acquires, sorted: the latest asked for by an instant is found by bisection.
/// Position order is invoke order, so the acquires of dropped grants are a prefix of each list.
type ByName = FxMap<(u32, u64), Vec<(u64, OpPos)>>;

/// What a name leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    /// A grant by its number (one the walk keeps, or one it dropped).
    Grant(u32),
    /// The ok acquire at this position (walked or not yet).
    Acquire(OpPos),
    /// No kept grant carries it, and it is no higher than a dropped grant's name: maybe a
    /// dropped grant's.
    Forgotten,
}

/// The highest names of dropped grants ([`Names::prune`]).
#[derive(Debug, Default, Clone)]
struct Dropped {
    /// Per lock, the highest token, and the highest grant id, a dropped grant carried.
    token_max: FxMap<u32, u64>,
    id_max: FxMap<u32, u64>,
    /// Per lock, how many of its grants without a token were dropped: the first ones of the
    /// list an ambiguous op reads.
    untokened: FxMap<u32, u64>,
    /// Per process still running and lock, the highest token and id of its own dropped grants.
    own_token_max: FxMap<(u64, u32), u64>,
    own_id_max: FxMap<(u64, u32), u32>,
    /// Per process still running, the highest token of its dropped grants (store ops).
    store_token_max: FxMap<u64, u64>,
}

/// The name indexes of the walk.
#[derive(Debug, Default, Clone)]
pub(crate) struct Names {
    /// Ok acquires with a target, by name, from their completion on.
    by_lock_token: ByName,
    by_lock_id: ByName,
    /// Per lock, `(invoke, position)` of its ok acquires without a token, from their
    /// completion on, sorted.
    untokened: FxMap<u32, Vec<(u64, OpPos)>>,
    /// (process, token) -> grant, for store ops.
    by_token: FxMap<(u64, u64), u32>,
    /// (process, lock, token or id) -> the process's latest grant with it, in program order.
    own_by_token: FxMap<(u64, u32, u64), u32>,
    own_by_id: FxMap<(u64, u32, u32), u32>,
    /// (process, lock) -> the process's latest grant of the lock, in program order; kept
    /// while the process runs (a few per process), dropped grant or not.
    latest: FxMap<(u64, u32), u32>,
    dropped: Dropped,
}

impl Names {
    /// The ok acquire at `at` (invoke, position) has completed, on lock `target`.
    pub(crate) fn completed(
        &mut self,
        target: u32,
        token: Option<u64>,
        id: Option<u32>,
        at: (u64, OpPos),
    ) {
        if let Some(t) = token {
            insert_sorted(self.by_lock_token.entry((target, t)).or_default(), at);
        } else {
            insert_sorted(self.untokened.entry(target).or_default(), at);
        }
        if let Some(i) = id {
            insert_sorted(
                self.by_lock_id.entry((target, u64::from(i))).or_default(),
                at,
            );
        }
    }

    /// Process `p`'s ok acquire of `target` was walked, as grant `g`.
    pub(crate) fn granted(
        &mut self,
        p: u64,
        target: u32,
        token: Option<u64>,
        id: Option<u32>,
        g: u32,
    ) {
        if let Some(t) = token {
            self.by_token.insert((p, t), g);
            self.own_by_token.insert((p, target, t), g);
        }
        if let Some(i) = id {
            self.own_by_id.insert((p, target, i), g);
        }
        self.latest.insert((p, target), g);
    }

    /// The grant a renew or release of process `p` on `target` names, answered by `done_ns`:
    /// by its token, else by the service's grant id, else the sender's own latest grant of the
    /// lock. A name two grants carry (a token reused: each side of a split brain counts its
    /// own) names the sender's own grant when it has one: it knows the name from its own
    /// grant. `None`: a name no grant carries.
    pub(crate) fn named(
        &self,
        p: u64,
        target: u32,
        token: Option<u64>,
        id: Option<u32>,
        done_ns: u64,
    ) -> Option<Named> {
        let d = &self.dropped;
        match (token, id) {
            (Some(t), _) => match self.own_by_token.get(&(p, target, t)) {
                Some(&g) => Some(Named::Grant(g)),
                None if d.own_token_max.get(&(p, target)).is_some_and(|&m| t <= m) => {
                    Some(Named::Forgotten)
                }
                None => by_name(&self.by_lock_token, &d.token_max, target, t, done_ns),
            },
            (None, Some(i)) => match self.own_by_id.get(&(p, target, i)) {
                Some(&g) => Some(Named::Grant(g)),
                None if d.own_id_max.get(&(p, target)).is_some_and(|&m| i <= m) => {
                    Some(Named::Forgotten)
                }
                None => by_name(&self.by_lock_id, &d.id_max, target, u64::from(i), done_ns),
            },
            (None, None) => self.latest(p, target).map(Named::Grant),
        }
    }

    /// The grant whose token process `p`'s store op carries: [`Named::Grant`] or
    /// [`Named::Forgotten`].
    pub(crate) fn store(&self, p: u64, token: u64) -> Option<Named> {
        match self.by_token.get(&(p, token)) {
            Some(&g) => Some(Named::Grant(g)),
            None => self
                .dropped
                .store_token_max
                .get(&p)
                .is_some_and(|&m| token <= m)
                .then_some(Named::Forgotten),
        }
    }

    /// Process `p`'s latest grant of `target`, kept or dropped.
    pub(crate) fn latest(&self, p: u64, target: u32) -> Option<u32> {
        self.latest.get(&(p, target)).copied()
    }

    /// The grants without a token of `target` invoked by `done_ns`, the latest `max`:
    /// `(left out, dropped, kept)`, where the first `dropped` of them were dropped and `kept`
    /// holds the positions of the others' acquires.
    pub(crate) fn untokened(
        &self,
        target: u32,
        done_ns: u64,
        max: usize,
    ) -> (u64, usize, Vec<OpPos>) {
        let dropped = self.dropped.untokened.get(&target).copied().unwrap_or(0) as usize;
        let list = self.untokened.get(&target).map_or(&[][..], Vec::as_slice);
        // Every dropped one was invoked before any op the walk reaches now.
        let end = dropped + list.partition_point(|e| e.0 <= done_ns);
        let start = end.saturating_sub(max);
        let kept = list[start.saturating_sub(dropped)..end - dropped]
            .iter()
            .map(|e| e.1)
            .collect();
        (start as u64, dropped.saturating_sub(start), kept)
    }

    /// The grants before number `k` were dropped, and with them the ok acquires before
    /// position `first_op`; `crashed` tells the processes whose op went unanswered. Returns
    /// how many entries are left, which the next prune waits for as many drops as.
    pub(crate) fn prune(
        &mut self,
        k: u32,
        first_op: OpPos,
        crashed: impl Fn(u64) -> bool,
    ) -> usize {
        let d = &mut self.dropped;
        prune_index(&mut self.by_lock_token, first_op, &mut d.token_max);
        prune_index(&mut self.by_lock_id, first_op, &mut d.id_max);
        self.untokened.retain(|&lock, list| {
            let n = list.partition_point(|e| e.1 < first_op);
            if n > 0 {
                *d.untokened.entry(lock).or_default() += n as u64;
                list.drain(..n);
            }
            !list.is_empty()
        });
        let crashed = &crashed;
        prune_own(
            &mut self.own_by_token,
            k,
            crashed,
            &mut d.own_token_max,
            |(p, lock, t)| (p, (p, lock), t),
        );
        prune_own(
            &mut self.own_by_id,
            k,
            crashed,
            &mut d.own_id_max,
            |(p, lock, i)| (p, (p, lock), i),
        );
        prune_own(
            &mut self.by_token,
            k,
            crashed,
            &mut d.store_token_max,
            |(p, t)| (p, p, t),
        );
        self.latest.retain(|&(p, _), _| !crashed(p));
        d.own_token_max.retain(|&(p, _), _| !crashed(p));
        d.own_id_max.retain(|&(p, _), _| !crashed(p));
        d.store_token_max.retain(|&p, _| !crashed(p));
        self.by_lock_token.len()
            + self.by_lock_id.len()
            + self.untokened.values().map(Vec::len).sum::<usize>()
            + self.by_token.len()
            + self.own_by_token.len()
            + self.own_by_id.len()
            + self.latest.len()
            + d.own_token_max.len()
            + d.own_id_max.len()
            + d.store_token_max.len()
    }
}

/// The latest ok acquire with that name asked for by `done_ns`, or [`Named::Forgotten`] for a
/// name no kept acquire carries by then and no higher than `dropped_max`'s for the lock. Every
/// dropped acquire was asked for before `done_ns`: the walk reaches an op only after the
/// grants before it.
fn by_name(
    index: &ByName,
    dropped_max: &FxMap<u32, u64>,
    lock: u32,
    name: u64,
    done_ns: u64,
) -> Option<Named> {
    let kept = index.get(&(lock, name)).and_then(|list| {
        let end = list.partition_point(|e| e.0 <= done_ns);
        end.checked_sub(1).map(|i| Named::Acquire(list[i].1))
    });
    kept.or_else(|| {
        dropped_max
            .get(&lock)
            .is_some_and(|&m| name <= m)
            .then_some(Named::Forgotten)
    })
}

/// Drops the acquires before `first_op` from each name's list, raising the lock's highest
/// dropped name.
fn prune_index(index: &mut ByName, first_op: OpPos, dropped_max: &mut FxMap<u32, u64>) {
    index.retain(|&(lock, name), list| {
        let n = list.partition_point(|e| e.1 < first_op);
        if n > 0 {
            raise(dropped_max.entry(lock).or_default(), name);
            list.drain(..n);
        }
        !list.is_empty()
    });
}

/// Drops from a map of a process's grants by name those of crashed processes, and those before
/// grant `k`, raising the highest name dropped under the key `split` gives (with the process
/// and the name).
fn prune_own<K: Copy + Eq + std::hash::Hash, D: Eq + std::hash::Hash, N: Ord + Copy + Default>(
    map: &mut FxMap<K, u32>,
    k: u32,
    crashed: &impl Fn(u64) -> bool,
    dropped_max: &mut FxMap<D, N>,
    split: impl Fn(K) -> (u64, D, N),
) {
    map.retain(|&key, g| {
        let (p, under, name) = split(key);
        if crashed(p) {
            return false;
        }
        if *g < k {
            raise(dropped_max.entry(under).or_default(), name);
        }
        *g >= k
    });
}

fn raise<T: Ord + Copy>(at: &mut T, to: T) {
    *at = (*at).max(to);
}

/// Inserts into a sorted list: almost always at its end (ops complete roughly in order).
fn insert_sorted<T: Ord>(list: &mut Vec<T>, x: T) {
    let at = list.partition_point(|e| *e < x);
    list.insert(at, x);
}
