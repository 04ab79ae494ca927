//! The one pairing pass: the structure rules of a history, one event at a time, as a small
//! state machine (the last event's stamp, each client process's op in flight, the processes an
//! `info` crashed). [`History::new`](crate::History::new) and the checkers' streaming digest
//! both feed it, so they accept the same histories and word a refusal the same way.

use crate::codec::{out_of_order, Stamp};
use crate::history::{Outcome, StructureError};
use crate::op::{OpType, Process, F};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// What an event is to the pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paired {
    /// A nemesis event: in order, and not paired.
    Nemesis,
    /// A client invoke, which opens client operation number `slot` (operations are numbered
    /// from 0 in invoke order, so `slot` is the count of invokes before this one).
    Invoke { slot: usize },
    /// A client completion, which ends operation `slot` with `outcome`.
    Complete { slot: usize, outcome: Outcome },
}

/// A client op in flight.
#[derive(Debug, Clone, Copy)]
struct Open {
    slot: usize,
    index: u64,
    time_ns: u64,
    /// The client function's name.
    f: &'static str,
    /// What its invoke named: [`Pairing::target`]'s id of its lock or key, or [`NO_TARGET`].
    target: u32,
}

const NO_TARGET: u32 = Pairing::NO_TARGET;

/// The field an op of client function `f` names its target in: `lock` for acquire, renew and
/// release, `key` for read and write.
fn target_field(f: &str) -> &'static str {
    match f {
        "read" | "write" => "key",
        _ => "lock",
    }
}

/// The name of a client function, `None` for any other.
#[inline]
fn client_function(f: &F) -> Option<&'static str> {
    Some(match f {
        F::Acquire => "acquire",
        F::Renew => "renew",
        F::Release => "release",
        F::Read => "read",
        F::Write => "write",
        F::Other(_) => return None,
    })
}

/// Where a client process stands.
#[derive(Debug, Clone, Copy)]
enum Proc {
    /// No op in flight.
    Idle,
    InFlight(Open),
    /// An `info` at this index crashed it: it must not run further ops.
    Crashed(u64),
}

/// The client processes by number.
type Procs = HashMap<u64, Proc, BuildHasherDefault<ProcessHasher>>;

/// Pairs a history's events in file order under the history format's structure rules (docs/history.md): indices ascend and
/// times never go back, client events name one of the client functions, each client process
/// has at most one op in flight, each completion matches its invoke, and no process runs an op
/// after an `info` crashed it. After the first error the pairing is over: the caller stops.
#[derive(Debug, Default)]
pub struct Pairing {
    last: Option<Stamp>,
    /// Every client process seen and not folded into `crashed`: one lookup per event.
    procs: Procs,
    /// How many of `procs` are crashed.
    crashed_kept: usize,
    /// The crashed processes folded out of `procs`: a recorder gives a new number to a
    /// process after each lost answer, so a long history crashes hundreds of thousands of
    /// numbers, which a set of runs of numbers holds in the space of the few still running.
    crashed: rangemap::RangeInclusiveSet<u64>,
    /// The highest index of an `info` folded into `crashed`: what a refusal can still say.
    crashed_through: u64,
    invokes: usize,
    /// The names of the targets seen, by id, and their ids.
    targets: Vec<Box<str>>,
    target_ids: HashMap<Box<str>, u32, BuildHasherDefault<ProcessHasher>>,
}

impl Pairing {
    /// The target of an event that names none (no `lock` on a lock op, no `key` on a store op;
    /// nemesis events).
    pub const NO_TARGET: u32 = u32::MAX;

    pub fn new() -> Pairing {
        Pairing::default()
    }

    /// The id [`Pairing::step`] takes for the lock or key `name` (the same name, the same id),
    /// or [`NO_TARGET`] for none. A caller may keep it for the name: ids never change.
    pub fn target(&mut self, name: Option<&str>) -> u32 {
        let Some(name) = name else {
            return NO_TARGET;
        };
        if let Some(&id) = self.target_ids.get(name) {
            return id;
        }
        let id = self.targets.len() as u32;
        self.targets.push(name.into());
        self.target_ids.insert(name.into(), id);
        id
    }

    /// The next event, in file order: what it is to the pairing, or the rule it breaks.
    /// `target` is [`Pairing::target`]'s id of the lock (lock ops) or key (store ops) it names:
    /// a completion names its invoke's, or none (it then keeps its invoke's).
    #[inline]
    pub fn step(
        &mut self,
        stamp: Stamp,
        process: Process,
        kind: OpType,
        f: &F,
        target: u32,
    ) -> Result<Paired, StructureError> {
        let index = stamp.index;
        if let Some(reason) = self.last.and_then(|last| out_of_order(last, stamp)) {
            return refuse(index, format_args!("{reason}"));
        }
        self.last = Some(stamp);
        let Process::Client(p) = process else {
            return Ok(Paired::Nemesis);
        };
        let Some(name) = client_function(f) else {
            return refuse(
                index,
                format_args!(
                    "client function {:?} is not one of acquire, renew, release, read, write",
                    f.as_str()
                ),
            );
        };
        let state = proc_state(
            &mut self.procs,
            &self.crashed,
            self.crashed_through,
            p,
            index,
        )?;
        match (*state, kind) {
            (Proc::Crashed(at), _) => refuse(
                index,
                format_args!(
                    "process {p} crashed (info at index {at}) and must not run further ops"
                ),
            ),
            (Proc::InFlight(open), OpType::Invoke) => refuse(
                index,
                format_args!(
                    "process {p} invoked while its op at index {} is still in flight",
                    open.index
                ),
            ),
            (Proc::Idle, OpType::Invoke) => {
                let slot = self.invokes;
                self.invokes += 1;
                *state = Proc::InFlight(Open {
                    slot,
                    index,
                    time_ns: stamp.time_ns,
                    f: name,
                    target,
                });
                Ok(Paired::Invoke { slot })
            }
            (Proc::Idle, kind) => refuse(
                index,
                format_args!(
                    "{} for process {p}, which has no op in flight",
                    kind.as_str()
                ),
            ),
            (Proc::InFlight(open), kind) => {
                if open.f != name {
                    return refuse(
                        index,
                        format_args!(
                            "completes a {name} but process {p} invoked a {} at index {}",
                            open.f, open.index
                        ),
                    );
                }
                if target != open.target && target != NO_TARGET {
                    return self.other_target(index, p, open, target);
                }
                let paired = complete(state, open, stamp, kind);
                if matches!(
                    paired,
                    Ok(Paired::Complete {
                        outcome: Outcome::Info,
                        ..
                    })
                ) {
                    self.crashed_kept += 1;
                    if self.crashed_kept > CRASHED_KEPT_MAX {
                        self.fold_crashed();
                    }
                }
                paired
            }
        }
    }

    /// Moves the crashed processes out of the map of processes into the set of runs of
    /// crashed numbers. Each fold costs the map's size, and comes once
    /// [`CRASHED_KEPT_MAX`] processes crashed again.
    #[cold]
    fn fold_crashed(&mut self) {
        let (crashed, through) = (&mut self.crashed, &mut self.crashed_through);
        self.procs.retain(|&p, state| match *state {
            Proc::Crashed(at) => {
                crashed.insert(p..=p);
                *through = (*through).max(at);
                false
            }
            _ => true,
        });
        self.crashed_kept = 0;
    }
}

/// Where client process `p` stands (a new one is idle), or the refusal of an event of a
/// process folded into `crashed` (by an info at or before index `through`).
#[inline]
fn proc_state<'a>(
    procs: &'a mut Procs,
    crashed: &rangemap::RangeInclusiveSet<u64>,
    through: u64,
    p: u64,
    index: u64,
) -> Result<&'a mut Proc, StructureError> {
    use std::collections::hash_map::Entry;
    match procs.entry(p) {
        Entry::Occupied(e) => Ok(e.into_mut()),
        Entry::Vacant(_) if crashed.contains(&p) => Err(StructureError {
            index,
            reason: format!(
                "process {p} crashed (info at or before index {through}) and must not run \
                 further ops"
            ),
        }),
        Entry::Vacant(e) => Ok(e.insert(Proc::Idle)),
    }
}

/// How many crashed processes the pairing keeps by number, with the index of the `info` that
/// crashed each (what a refusal names), before folding them into runs of numbers.
const CRASHED_KEPT_MAX: usize = 4096;

/// The completion `kind` at `stamp` of the op `open` of the process whose state is `state`
/// (its function and target already matched): it ends the op, and an `info` crashes the
/// process.
#[inline]
fn complete(
    state: &mut Proc,
    open: Open,
    stamp: Stamp,
    kind: OpType,
) -> Result<Paired, StructureError> {
    debug_assert!(kind != OpType::Invoke, "a completion");
    let index = stamp.index;
    if stamp.time_ns < open.time_ns {
        return refuse(
            index,
            format_args!(
                "completes at time_ns {} before its invoke at index {} (time_ns {})",
                stamp.time_ns, open.index, open.time_ns
            ),
        );
    }
    let outcome = match kind {
        OpType::Ok => Outcome::Ok,
        OpType::Fail => Outcome::Fail,
        _ => Outcome::Info,
    };
    *state = match outcome {
        Outcome::Info => Proc::Crashed(index),
        _ => Proc::Idle,
    };
    Ok(Paired::Complete {
        slot: open.slot,
        outcome,
    })
}

impl Pairing {
    /// The refusal of a completion that names another lock (or key) than its invoke.
    #[cold]
    #[inline(never)]
    fn other_target(
        &self,
        index: u64,
        p: u64,
        open: Open,
        target: u32,
    ) -> Result<Paired, StructureError> {
        let field = target_field(open.f);
        let invoked = match self.targets.get(open.target as usize) {
            Some(name) => format!("{field} {name:?}"),
            None => format!("no {field}"),
        };
        refuse(
            index,
            format_args!(
                "completes a {} of {field} {:?} but process {p} invoked it on {invoked} at index {}",
                open.f, self.targets[target as usize], open.index
            ),
        )
    }
}

/// A structure error: off the hot path, where its words are written.
#[cold]
#[inline(never)]
fn refuse(index: u64, reason: std::fmt::Arguments<'_>) -> Result<Paired, StructureError> {
    Err(StructureError {
        index,
        reason: reason.to_string(),
    })
}

/// FxHash for process numbers: the pairing's maps are only looked up, never iterated, and
/// SipHash would be a measurable share of pairing millions of events.
#[derive(Default, Clone, Copy)]
struct ProcessHasher(u64);

impl ProcessHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for ProcessHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `(index, time_ns, process, kind, f)` events; what each is, or the first error.
    fn run(events: &[(u64, u64, Process, OpType, F)]) -> Result<Vec<Paired>, String> {
        let mut pairing = Pairing::new();
        events
            .iter()
            .map(|(index, time_ns, process, kind, f)| {
                let stamp = Stamp {
                    index: *index,
                    time_ns: *time_ns,
                };
                pairing
                    .step(stamp, *process, *kind, f, NO_TARGET)
                    .map_err(|e| e.to_string())
            })
            .collect()
    }

    #[test]
    fn slots_count_invokes_and_completions_find_theirs() {
        use OpType::*;
        let (p1, p2) = (Process::Client(1), Process::Client(2));
        let got = run(&[
            (0, 0, p1, Invoke, F::Acquire),
            (1, 1, Process::Nemesis, Info, F::Other("kill".into())),
            (2, 1, p2, Invoke, F::Write),
            (3, 2, p2, Fail, F::Write),
            (4, 3, p1, Info, F::Acquire),
            (5, 3, p2, Invoke, F::Read),
        ]);
        assert_eq!(
            got,
            Result::Ok(vec![
                Paired::Invoke { slot: 0 },
                Paired::Nemesis,
                Paired::Invoke { slot: 1 },
                Paired::Complete {
                    slot: 1,
                    outcome: Outcome::Fail
                },
                Paired::Complete {
                    slot: 0,
                    outcome: Outcome::Info
                },
                Paired::Invoke { slot: 2 },
            ])
        );
    }

    /// Every rule, in the words `History::new` and the streaming check both report.
    #[test]
    fn each_rule_in_its_words() {
        use OpType::*;
        let p1 = Process::Client(1);
        let invoke = (0, 10, p1, Invoke, F::Acquire);
        let cases = [
            (
                vec![invoke.clone(), (0, 10, p1, Ok, F::Acquire)],
                "op index 0: index 0 is not above the previous line's index 0: indexes ascend line by line",
            ),
            (
                vec![invoke.clone(), (1, 9, p1, Ok, F::Acquire)],
                "op index 1: time_ns 9 goes back (previous event's time_ns 10)",
            ),
            (
                vec![(0, 10, p1, Invoke, F::Other("frob".into()))],
                "op index 0: client function \"frob\" is not one of acquire, renew, release, read, write",
            ),
            (
                vec![invoke.clone(), (1, 10, p1, Invoke, F::Renew)],
                "op index 1: process 1 invoked while its op at index 0 is still in flight",
            ),
            (
                vec![invoke.clone(), (1, 10, Process::Client(2), Ok, F::Acquire)],
                "op index 1: ok for process 2, which has no op in flight",
            ),
            (
                vec![invoke.clone(), (1, 10, p1, Ok, F::Release)],
                "op index 1: completes a release but process 1 invoked a acquire at index 0",
            ),
            (
                vec![
                    invoke.clone(),
                    (1, 11, p1, Info, F::Acquire),
                    (2, 12, p1, Invoke, F::Acquire),
                ],
                "op index 2: process 1 crashed (info at index 1) and must not run further ops",
            ),
        ];
        for (events, want) in cases {
            assert_eq!(run(&events).unwrap_err(), want);
        }
    }

    /// Crashed processes folded out of the map (past [`CRASHED_KEPT_MAX`]) are refused as
    /// before, with the last index folded; processes never crashed between them run on.
    #[test]
    fn crashed_processes_folded_into_runs_stay_crashed() {
        use OpType::*;
        let mut events = Vec::new();
        let crashes = 3 * CRASHED_KEPT_MAX as u64 + 7;
        // Odd processes crash, even ones (never crashed) sit between them.
        for i in 0..crashes {
            let p = Process::Client(2 * i + 1);
            let index = events.len() as u64;
            events.push((index, index, p, Invoke, F::Acquire));
            events.push((index + 1, index + 1, p, Info, F::Acquire));
        }
        let last_info = events.len() as u64 - 1;
        let n = events.len() as u64;
        let with = |p: u64| {
            let mut e = events.clone();
            e.push((n, n, Process::Client(p), Invoke, F::Acquire));
            run(&e).map(|_| ())
        };
        assert_eq!(
            with(2 * 5),
            Result::Ok(()),
            "a process between crashed ones"
        );
        assert_eq!(with(2 * crashes + 1), Result::Ok(()), "a new process");
        assert_eq!(
            with(2 * 5 + 1),
            Err(format!(
                "op index {n}: process 11 crashed (info at or before index {}) and must not run \
                 further ops",
                // Folded at each (CRASHED_KEPT_MAX + 1)th crash: the third fold's last info.
                2 * (3 * (CRASHED_KEPT_MAX as u64 + 1) - 1) + 1
            ))
        );
        // The last ones are still kept by number, with their own index.
        assert_eq!(
            with(2 * (crashes - 1) + 1),
            Err(format!(
                "op index {n}: process {} crashed (info at index {last_info}) and must not run \
                 further ops",
                2 * (crashes - 1) + 1
            ))
        );
    }

    /// A completion names its invoke's lock (or key), or none; another is refused.
    #[test]
    fn a_completion_names_its_invokes_target_or_none() {
        use OpType::*;
        let p1 = Process::Client(1);
        let stamp = |index| Stamp {
            index,
            time_ns: index * 10,
        };
        let pair = |f: F, invoke: Option<&str>, complete: Option<&str>| {
            let mut pairing = Pairing::new();
            let (i, c) = (pairing.target(invoke), pairing.target(complete));
            pairing.step(stamp(0), p1, Invoke, &f, i).unwrap();
            pairing
                .step(stamp(1), p1, Ok, &f, c)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(pair(F::Acquire, Some("L0"), Some("L0")), Result::Ok(()));
        assert_eq!(pair(F::Acquire, Some("L0"), None), Result::Ok(()));
        assert_eq!(pair(F::Acquire, None, None), Result::Ok(()));
        assert_eq!(
            pair(F::Acquire, Some("L0"), Some("L1")).unwrap_err(),
            "op index 1: completes a acquire of lock \"L1\" but process 1 invoked it on lock \"L0\" at index 0"
        );
        assert_eq!(
            pair(F::Release, None, Some("L1")).unwrap_err(),
            "op index 1: completes a release of lock \"L1\" but process 1 invoked it on no lock at index 0"
        );
        assert_eq!(
            pair(F::Write, Some("k0"), Some("k1")).unwrap_err(),
            "op index 1: completes a write of key \"k1\" but process 1 invoked it on key \"k0\" at index 0"
        );
    }
}
