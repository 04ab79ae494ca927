//! The shared vocabulary of lockpick: what every other crate reads and writes.
//!
//! - [`Op`]: one line of `history.jsonl` (an invoke, ok, fail or info event), with its
//!   [`Process`], [`OpType`], function [`F`] and typed [`OpValue`]; unknown fields are kept.
//! - [`HistoryWriter`] / [`read_ops`] / [`read_pieces`]: the JSONL codec. The writer flushes
//!   every line; the one reader parses blocks of lines on every core, names `file:line` for a
//!   malformed line (an index that does not ascend, a time that goes back) and drops a final
//!   line cut off mid-write with a warning. [`read_history`] adds the structure checks.
//! - [`parse_event`] / [`EventRef`]: the one parser of a line (a fast scanner for the writer's
//!   own lines, serde for anything else) and the borrowed view it gives; `Op` is built from it.
//! - [`Pairing`]: the one pairing pass (the structure rules, one event at a time), which
//!   [`History::new`] and the checkers' streaming digest both run.
//! - [`History`]: a structurally checked history whose client events are paired into
//!   [`Operation`]s (invoke + completion + [`Outcome`]).
//! - [`Results`], [`Violation`], [`Validity`]: the serialized checker results (`results.json`),
//!   the one form in which reports see them; [`Coverage`] (in [`coverage`]), what a run
//!   exercised, counted by the checkers and drawn as one table by every report.
//! - [`Recorder`]: assigns index and time to live events and writes them at once.
//! - [`layout`]: run-directory file names and [`ExitCode`]s.
//! - [`evidence`]: what adapters and the worker add to an op's `value`, one typed struct per
//!   writer ([`evidence!`]), registered so the reader types every field it names.
//! - [`reason`]: the reason codes of failed and indeterminate ops (`held`, `http-423`,
//!   `connect: refused`), how they are written, read back and classified.
//!
//! This crate does no I/O beyond reading and writing history files.

mod codec;
mod completeness;
pub mod coverage;
mod event;
pub mod evidence;
mod fault_op;
mod fields;
mod history;
pub mod layout;
pub mod nearest;
mod op;
mod pairing;
pub mod reason;
mod recorder;
mod results;

pub use codec::{
    read_history, read_ops, read_ops_from, read_pieces, read_pieces_in, BlockReader, HistoryWriter,
    LoadError, PieceBuilder, ReadError, ReadWarning, Stamp, BLOCK_BYTES,
};
pub use completeness::{Completeness, RunState};
pub use coverage::Coverage;
pub use event::{parse_event, read_event, EventRef, ValueRef};
pub use evidence::{
    Evidence, EvidenceSet, EvidenceValue, Hold, HoldEvidence, KeyState, LeaseEvidence, ReadBack,
    WorkerEvidence, EVIDENCE_SETS,
};
pub use fault_op::{stall_fields, Aim, FaultFamily, FaultOp, Registered, FAULT_FAMILIES};
pub use fields::{nemesis_field_type, Field, FieldType};
pub use history::{History, Operation, Outcome, StructureError};
pub use layout::ExitCode;
pub use op::{Op, OpType, OpValue, Process, F, GRANT};
pub use pairing::{Paired, Pairing};
pub use recorder::{CountsSnapshot, Recorder};
pub use results::{
    ActiveFault, CheckerResult, CycleEdge, Incident, JudgedFrom, KindClass, Percentiles, Results,
    Stats, TokenReset, Validity, Violation, ViolationKind, PROVES_NOTHING,
};
