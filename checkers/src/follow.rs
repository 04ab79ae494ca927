//! A history checked as another process writes it: the streaming rules (`stream.rs`) run over
//! the lines as they are handed in, and what they prove is handed back once, when proven.
//! What one read costs is what its lines cost, whatever was read before; what is kept is the
//! streaming reader's window (the grants open, the ops not yet walked), not the history.
//!
//! A violation proven here is one the whole history's check proves too (the walk tests assert
//! it on every history of the corpus, grants gone stale included), with one reading of its
//! own: the model search's verdict on a lock is handed back when the rules have proven nothing
//! about that lock so far, where the whole check lists it only when no rule proves anything
//! about the lock in the whole history (a rule may, later: then both are handed back, and the
//! whole check lists the rule's). A `deadlock` is handed back once its cycle is judged, when
//! every acquire invoked before it is resolved. A `non-serializable` is handed back when a
//! round of the critical sections (one each second of history time) finds its cycle.
//! `total-changed` rests on the closing reads, made once the clients stop, and is judged once
//! the history is read whole, and `lock-stuck` is judged at the end only: a follower is for
//! seeing early what is already proven, the final check is still the whole history's.

use crate::digest::{Digest, EventBuilder};
use crate::mutex::window_end_by;
use crate::{CheckConfig, CheckError};
use history::{BlockReader, Violation};
use std::path::{Path, PathBuf};

/// How far past a grant's reach (its last op's answer plus twice its longest lease) the
/// follower keeps it: a later op that still names it (a release sent long after, a renew
/// answered late) is judged with it while inside this; past it the grant is dropped, and what
/// names it is not judged against it (never a false finding, a finding missed). It is also
/// part of how long a proof waits: the double-grant and token readings word a violation as the
/// whole history's check does once no grant closed later can come before it, so a violation is
/// proven about this long after the grants it rests on could last be reached. One second found
/// every injected violation of the 10M-event synthetic histories (BENCHMARKS.md).
pub const FOLLOW_HORIZON_NS: u64 = 1_000_000_000;

/// A history file read a block of whole lines at a time as it is written.
pub struct Follower {
    path: PathBuf,
    digest: Digest,
    reader: BlockReader<'static, EventBuilder>,
    /// The rules' violations already handed back, the model search's and the deadlocks
    /// looked at.
    handed: usize,
    searched: usize,
    deadlocks: usize,
    /// A read failed: nothing more can be placed after the line it refused.
    failed: bool,
}

/// What one [`Follower::read`] found.
#[derive(Debug, Default)]
pub struct Read {
    /// The violations the new lines proved, in the words of the whole history's check; a window
    /// that would reach past the lines read ends at the last of them for now.
    pub proven: Vec<Violation>,
    /// Events read so far, and the time of the latest, in ns.
    pub events: u64,
    pub through_ns: u64,
}

impl Follower {
    /// A follower of the history at `path` (named in errors), checked with `cfg`.
    pub fn new(path: &Path, cfg: &CheckConfig) -> Follower {
        Follower {
            path: path.to_path_buf(),
            digest: Digest::streaming_for(cfg, FOLLOW_HORIZON_NS),
            reader: BlockReader::new(path, &EventBuilder),
            handed: 0,
            searched: 0,
            deadlocks: 0,
            failed: false,
        }
    }

    /// Reads `lines`, the history's next lines, each ended by its newline. The caller cuts
    /// them where time moves on (the events of one instant may be written in any order, and one
    /// not yet written can change what the others prove). Once a read fails, every later one
    /// fails too, saying so: what follows a refused line cannot be placed.
    pub fn read(&mut self, lines: &[u8]) -> Result<Read, CheckError> {
        if self.failed {
            return Err(history::ReadError::Malformed {
                path: self.path.clone(),
                line: self.reader.lines(),
                reason: "not read: a line before it was refused".into(),
            }
            .into());
        }
        let digest = &mut self.digest;
        let read = self.reader.read(lines, false, |piece| digest.feed(piece));
        if let Err(e) = read {
            self.failed = true;
            return Err(e.into());
        }
        if let Some(error) = self.digest.error.take() {
            self.failed = true;
            return Err(CheckError::structure(&self.path, error));
        }
        let through_ns = self.digest.end_time_ns;
        let rules = self.digest.proven();
        let proven = &rules[self.handed..];
        self.handed += proven.len();
        // The search's verdict on a lock the rules proved nothing about yet, as the whole
        // check gives it only for a lock no rule proves anything about (a rule may still, later).
        let searched = &self.digest.searched()[self.searched..];
        self.searched += searched.len();
        let searched = searched.iter().map(|(_, v)| v).filter(|v| {
            let lock = v.lock.as_deref();
            !rules
                .iter()
                .any(|r| r.kind != history::ViolationKind::Deadlock && r.lock.as_deref() == lock)
        });
        let deadlocks = &self.digest.deadlocks()[self.deadlocks..];
        self.deadlocks += deadlocks.len();
        let proven = proven
            .iter()
            .chain(searched)
            .chain(deadlocks)
            .map(|v| {
                let mut v = v.clone();
                // As the whole check lists them (`Model::finish`).
                v.ops.sort_unstable();
                v.ops.dedup();
                v.window_ns[1] = window_end_by(through_ns, v.window_ns[0], v.window_ns[1]);
                v
            })
            .collect();
        Ok(Read {
            proven,
            events: self.digest.events,
            through_ns,
        })
    }
}
