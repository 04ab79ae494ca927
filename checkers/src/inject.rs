//! Violations injected into a correct history (from [`crate::gen`]) at random points, for
//! `lockpick synth --inject`, the property tests and benchmarks. Each injection changes or adds
//! a few ops so the history shows exactly one more violation of its kind, and returns the
//! indices of the ops the violation's witness must name.
//!
//! The injectors themselves live beside the rules that must find what they add, in each
//! checker's module (its `injectors` module, listed by `Checker::injectors`); this module
//! holds what they share: the registry ([`InjectKind::all`]), [`inject`], and the helpers that
//! find grants and holds and insert ops in time order.

// Every mutation has one signature, and some insert ops, so they all take `&mut Vec<Op>`.
#![allow(clippy::ptr_arg)]

use history::{Evidence as _, History, Op, OpType, OpValue, Outcome, Process, ViolationKind, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

/// What every checker's `injectors` module works with, imported in one line
/// (`use crate::inject::prelude::*;`): this module's helpers and the history and randomness
/// they take.
pub(crate) mod prelude {
    pub(crate) use super::{
        fresh_grant, fresh_process, grants, holds, insert, lock_op, make_room, ok_writes, pick,
        Injector, G, WITNESS,
    };
    pub(crate) use history::{
        Evidence as _, History, KeyState, Op, OpType, OpValue, Outcome, Process, ViolationKind, F,
    };
    pub(crate) use rand::Rng;
    pub(crate) use rand_chacha::ChaCha8Rng;
    pub(crate) use serde_json::json;
}

/// One way to add a violation to a correct history: its name for `synth --inject`, the kind
/// the checkers must then report, and the mutation. Each lives in its checker's module, beside
/// the rule that finds it, and that checker lists it (`Checker::injectors`): a new kind's
/// injector is in the file of its rule.
#[derive(Debug)]
pub struct Injector {
    /// Its name for `synth --inject` (a kind's own name for its plainest injector).
    pub name: &'static str,
    /// The violation kind the checkers must report for it.
    pub kind: ViolationKind,
    /// One of the adapter shapes of docs/checkers.md's model items 3, 6, 8 and 9
    /// (checkers/tests/inject_adapter.rs asks for their witness ops too).
    pub adapter_shape: bool,
    pub(crate) mutate: Mutation,
}

/// An injector, as `synth --inject` and the tests name it.
#[derive(Debug, Clone, Copy)]
pub struct InjectKind(&'static Injector);

impl PartialEq for InjectKind {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}
impl Eq for InjectKind {}
impl PartialOrd for InjectKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InjectKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.name.cmp(other.0.name)
    }
}
impl std::hash::Hash for InjectKind {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.name.hash(h)
    }
}

impl InjectKind {
    /// Every injector, in the checkers' order ([`crate::all_checkers`]).
    pub fn all() -> Vec<InjectKind> {
        crate::all_checkers()
            .iter()
            .flat_map(|c| c.injectors())
            .map(InjectKind)
            .collect()
    }

    /// The adapter shapes ([`Injector::adapter_shape`]).
    pub fn adapter() -> Vec<InjectKind> {
        InjectKind::all()
            .into_iter()
            .filter(|k| k.0.adapter_shape)
            .collect()
    }

    pub fn as_str(self) -> &'static str {
        self.0.name
    }

    pub fn parse(s: &str) -> Option<InjectKind> {
        InjectKind::all().into_iter().find(|k| k.as_str() == s)
    }

    /// The injector named `name`; a name no checker lists is a bug of the caller.
    pub fn named(name: &str) -> InjectKind {
        InjectKind::parse(name).unwrap_or_else(|| panic!("no injector is named {name:?}"))
    }

    /// The violation kind the checkers must report for it.
    pub fn violation(self) -> ViolationKind {
        self.0.kind
    }
}

/// Injects one violation of `kind` at a point chosen by `seed`. Returns the indices of the ops
/// its witness must name, or `None` when this history offers no place for it (too few grants,
/// writes, ...). `ops` must be a structurally valid history; it stays one (indices are
/// renumbered when ops are inserted).
pub fn inject(ops: &mut Vec<Op>, kind: InjectKind, seed: u64) -> Option<Vec<u64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (kind.0.mutate)(ops, &mut rng)
}

/// An ok acquire, as the mutations see it.
#[derive(Debug, Clone)]
pub(crate) struct G {
    pub(crate) invoke: usize,
    pub(crate) complete: usize,
    pub(crate) process: u64,
    pub(crate) lock: String,
    pub(crate) token: u64,
    pub(crate) ttl_ms: u64,
}

pub(crate) fn grants(h: &History) -> Vec<G> {
    h.operations()
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && h.invoke_of(o).f == F::Acquire)
        .map(|o| {
            let done = h.complete_of(o).unwrap();
            G {
                invoke: o.invoke,
                complete: o.complete.unwrap(),
                process: done.process.client().unwrap(),
                lock: done.lock.clone().unwrap(),
                token: done.value.token.unwrap(),
                ttl_ms: done.value.ttl_ms.unwrap(),
            }
        })
        .collect()
}

/// Ok writes as (invoke, complete) positions.
pub(crate) fn ok_writes(h: &History) -> Vec<(usize, usize)> {
    h.operations()
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && h.invoke_of(o).f == F::Write)
        .map(|o| (o.invoke, o.complete.unwrap()))
        .collect()
}

pub(crate) const MARK: &str = "injected";
/// Marks the ops being inserted by the current injection.
pub(crate) const INSERTING: &str = "injecting";
/// Marks an existing op of the witness while ops are inserted.
pub(crate) const WITNESS: &str = "witness";

/// Inserts ops (marked, so they can be found after renumbering) in time order and renumbers
/// every index; returns the new indices of the marked ops.
pub(crate) fn insert(ops: &mut Vec<Op>, new: Vec<Op>) -> Vec<u64> {
    for mut op in new {
        op.extra.insert(INSERTING.to_string(), json!(true));
        let at = ops.partition_point(|o| o.time_ns <= op.time_ns);
        ops.insert(at, op);
    }
    let mut out = Vec::new();
    for (i, o) in ops.iter_mut().enumerate() {
        o.index = i as u64;
        // Ops inserted by an earlier injection keep only `MARK`: they are not this one's.
        if o.extra.remove(INSERTING).is_some() {
            o.extra.insert(MARK.to_string(), json!(true));
            if o.kind != OpType::Invoke {
                out.push(o.index);
            }
        }
    }
    out
}

/// The process an injection that adds a client uses: one above the highest in `ops`.
pub fn fresh_process(ops: &[Op]) -> u64 {
    ops.iter()
        .filter_map(|o| o.process.client())
        .max()
        .unwrap_or(0)
        + 1
}

pub(crate) fn lock_op(
    process: u64,
    time_ns: u64,
    kind: OpType,
    f: F,
    lock: &str,
    v: OpValue,
) -> Op {
    Op::new(0, time_ns, Process::Client(process), kind, f)
        .with_lock(lock)
        .with_value(v)
}

/// A mutation: changes a correct history so it shows one violation; returns the indices that
/// the violation's witness must include, or `None` when this history offers no place for it.
pub(crate) type Mutation = fn(&mut Vec<Op>, &mut ChaCha8Rng) -> Option<Vec<u64>>;

pub(crate) fn pick<T: Clone>(rng: &mut ChaCha8Rng, v: &[T]) -> Option<T> {
    (!v.is_empty()).then(|| v[rng.random_range(0..v.len())].clone())
}

/// Each grant's definite hold, as `[start, end)`: from its ok to its release's invoke or its
/// lease's lower bound (counted from `lease_from_ns` when the grant carries it, else from its
/// invoke; drift 0), when longer than `room_ns`.
pub(crate) fn holds(ops: &[Op], gs: &[G], room_ns: u64) -> Vec<(G, u64, u64)> {
    gs.iter()
        .filter_map(|g| {
            let start = ops[g.complete].time_ns;
            let from = history::LeaseEvidence::read(&ops[g.complete].value.extra)
                .lease_from_ns
                .unwrap_or(ops[g.invoke].time_ns);
            let lease_end = from + g.ttl_ms * 1_000_000;
            // Only up to the lease's end: past it the release no longer bounds the hold (and
            // scanning to the history's end for every unreleased grant is quadratic).
            let release = ops[g.complete..]
                .iter()
                .take_while(|o| o.time_ns <= lease_end)
                .find(|o| {
                    o.kind == OpType::Invoke
                        && o.f == F::Release
                        && o.process == Process::Client(g.process)
                        && o.value.token == Some(g.token)
                })
                .map_or(u64::MAX, |o| o.time_ns);
            let end = lease_end.min(release);
            (end > start + room_ns).then(|| (g.clone(), start, end))
        })
        .collect()
}

/// A fresh process's acquire of `lock` invoked at `t`, answered `ok` with `answer` at `done`.
pub(crate) fn fresh_grant(
    q: u64,
    lock: &str,
    t: u64,
    done: u64,
    ttl_ms: u64,
    answer: OpValue,
) -> Vec<Op> {
    vec![
        lock_op(
            q,
            t,
            OpType::Invoke,
            F::Acquire,
            lock,
            OpValue::default().with_ttl_ms(ttl_ms),
        ),
        lock_op(q, done, OpType::Ok, F::Acquire, lock, answer),
    ]
}

/// Frees token `after + 1` on `lock` by raising every larger token of that lock, and of the
/// register it guards (the generator's lock `L<i>` guards `k<i>`), by one: an order-preserving
/// renumbering, so the history stays correct and an injected grant can take `after + 1`
/// without a cascade of further violations against every later grant.
pub(crate) fn make_room(ops: &mut [Op], lock: &str, after: u64) -> u64 {
    let key = lock.strip_prefix('L').map(|i| format!("k{i}"));
    for o in ops.iter_mut() {
        let mine = o.lock.as_deref() == Some(lock)
            || (o.key.is_some() && o.key.as_deref() == key.as_deref());
        if let (true, Some(t)) = (mine, o.value.token) {
            if t > after {
                o.value.token = Some(t + 1);
            }
        }
    }
    after + 1
}
