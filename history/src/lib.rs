//! The shared vocabulary of lockpick: what every other crate reads and writes.
//!
//! - [`Op`]: one line of `history.jsonl` (an invoke, ok, fail or info event), with its
//!   [`Process`], [`OpType`], function [`F`] and typed [`OpValue`]; unknown fields are kept.
//! - [`HistoryWriter`] / [`HistoryReader`]: the JSONL codec. The writer flushes every line; the
//!   reader streams, names `file:line` for a malformed line and drops a truncated final line
//!   with a warning.
//! - [`History`]: a structurally checked history whose client events are paired into
//!   [`Operation`]s (invoke + completion + [`Outcome`]).
//! - [`Results`], [`Violation`], [`Validity`]: the serialized checker results (`results.json`),
//!   the one form in which reports see them.
//! - [`Recorder`]: assigns index and time to live events and writes them at once.
//! - [`layout`]: run-directory file names and [`ExitCode`]s.
//!
//! This crate does no I/O beyond reading and writing history files.

mod codec;
mod history;
pub mod layout;
mod op;
mod recorder;
mod results;

pub use codec::{
    read_ops, read_ops_from, read_pieces, HistoryReader, HistoryWriter, PieceParser, ReadError,
    ReadWarning,
};
pub use history::{History, Operation, Outcome, StructureError};
pub use layout::ExitCode;
pub use op::{Op, OpType, OpValue, Process, F};
pub use recorder::{CountsSnapshot, Recorder};
pub use results::{
    ActiveFault, CheckerResult, KindClass, Percentiles, Results, Stats, Validity, Violation,
    ViolationKind,
};
