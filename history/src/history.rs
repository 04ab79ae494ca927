//! A whole history, checked for structure, and its client ops paired into [`Operation`]s.

use crate::op::{Op, Process, F};
use crate::pairing::{Paired, Pairing};

/// A structural rule of the history format (docs/history.md) that a history breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("op index {index}: {reason}")]
pub struct StructureError {
    pub index: u64,
    pub reason: String,
}

/// How a client operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Took effect.
    Ok,
    /// Surely did not take effect.
    Fail,
    /// May or may not have taken effect.
    Info,
    /// The history ends before the op completed (the harness stopped); as uncertain as `Info`.
    Pending,
}

impl Outcome {
    /// Whether the op may have taken effect without the history showing it.
    pub fn is_indeterminate(self) -> bool {
        matches!(self, Outcome::Info | Outcome::Pending)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
            Outcome::Pending => "pending",
        }
    }
}

/// A client op: its invoke paired with its completion. Positions index into `History::ops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub invoke: usize,
    /// `None` when the history ends first.
    pub complete: Option<usize>,
    pub outcome: Outcome,
}

/// A validated history: indices ascend, times never go back, each client process has at most
/// one op in flight, each completion matches its invoke, and no process number is reused after
/// an `info`.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub ops: Vec<Op>,
    operations: Vec<Operation>,
}

impl History {
    pub fn new(ops: Vec<Op>) -> Result<History, StructureError> {
        let operations = pair(&ops)?;
        Ok(History { ops, operations })
    }

    /// Client operations, in invoke order.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    pub fn invoke_of(&self, o: &Operation) -> &Op {
        &self.ops[o.invoke]
    }

    pub fn complete_of(&self, o: &Operation) -> Option<&Op> {
        o.complete.map(|i| &self.ops[i])
    }

    /// Nemesis events, in history order.
    pub fn nemesis(&self) -> impl Iterator<Item = &Op> {
        self.ops.iter().filter(|o| o.process.is_nemesis())
    }

    /// The time of the last event (the length of the test as recorded).
    pub fn end_time_ns(&self) -> u64 {
        self.ops.iter().map(|o| o.time_ns).max().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Pairs the client events with the one pairing pass.
fn pair(ops: &[Op]) -> Result<Vec<Operation>, StructureError> {
    let mut operations: Vec<Operation> = Vec::new();
    let mut pairing = Pairing::new();
    for (pos, op) in ops.iter().enumerate() {
        // What the reader refuses in a file, refused in memory too, in its words.
        let nemesis = op.process == Process::Nemesis;
        for (k, v) in &op.value.extra {
            crate::fields::check_value_field::<serde_json::Error>(k, v)
                .and_then(|()| match nemesis {
                    true => crate::fields::check_nemesis_field(k, v),
                    false => Ok(()),
                })
                .map_err(|e| StructureError {
                    index: op.index,
                    reason: e.to_string(),
                })?;
        }
        let target = match op.f {
            F::Read | F::Write => op.key.as_deref(),
            _ => op.lock.as_deref(),
        };
        let target = match op.process {
            Process::Client(_) => pairing.target(target),
            Process::Nemesis => Pairing::NO_TARGET,
        };
        match pairing.step(op.stamp(), op.process, op.kind, &op.f, target)? {
            Paired::Nemesis => {}
            Paired::Invoke { slot } => {
                debug_assert_eq!(slot, operations.len());
                operations.push(Operation {
                    invoke: pos,
                    complete: None,
                    outcome: Outcome::Pending,
                });
            }
            Paired::Complete { slot, outcome } => {
                let o = &mut operations[slot];
                o.complete = Some(pos);
                o.outcome = outcome;
            }
        }
    }
    Ok(operations)
}
