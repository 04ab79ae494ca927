//! The JSONL codec: a writer that flushes every line and the one reader of the format, which
//! parses blocks of lines on every core (each line with the one parser, `event.rs`) and names
//! `file:line` for anything it rejects.
//!
//! The reader's rules (docs/history.md, "The reader's rules"): blank lines are skipped; `index` ascends
//! and `time_ns` never goes back, in file order; a line that does not parse is an error naming
//! its line, except a JSON object cut off by the end of the input without a newline (a write cut
//! short by a crash), which is dropped with a warning. Every caller (`lockpick check`,
//! `report`, `export`, the run's verdict) reads through [`read_pieces`], so they accept the
//! same files and word their refusals the same way.

use crate::event::{read_event, EventRef};
use crate::history::{History, StructureError};
use crate::op::Op;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

/// Why a history could not be read. Its text says it all: no variant has a `source()`, so that
/// an error chain printed whole (anyhow's `{:#}`) does not repeat the reason.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error("{path}:{line}: {reason}")]
    Malformed {
        path: PathBuf,
        line: u64,
        reason: String,
    },
}

/// Writes ops one per line and flushes each line to the OS at once, so a harness killed mid-run
/// leaves every op it had recorded (at worst a truncated last line, which readers accept).
pub struct HistoryWriter<W: Write = File> {
    out: BufWriter<W>,
    line: Vec<u8>,
    last: Option<Stamp>,
}

impl HistoryWriter<File> {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> io::Result<Self> {
        Ok(Self::new(File::create(path)?))
    }
}

impl<W: Write> HistoryWriter<W> {
    pub fn new(out: W) -> Self {
        HistoryWriter {
            out: BufWriter::with_capacity(64 * 1024, out),
            line: Vec::with_capacity(256),
            last: None,
        }
    }

    /// Appends one op. Indices must ascend and times must not go back: a writer that would
    /// produce a history its own reader rejects is a harness bug, so this is an assertion, not
    /// an error.
    pub fn write(&mut self, op: &Op) -> io::Result<()> {
        let stamp = op.stamp();
        if let Some(reason) = self.last.and_then(|last| out_of_order(last, stamp)) {
            panic!("history op written out of order: {reason}");
        }
        self.last = Some(stamp);
        self.line.clear();
        serde_json::to_writer(&mut self.line, op).map_err(io::Error::other)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.out.flush()
    }

    pub fn into_inner(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

/// A non-fatal observation made while reading. There is one kind: the file's last line was
/// cut off mid-write (`line` is that line), which is what a writer killed mid-line leaves, so a
/// history with a warning is one whose run did not end as it should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadWarning {
    pub line: u64,
    pub message: String,
}

/// What the reader's ordering rules read of a parsed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub index: u64,
    pub time_ns: u64,
}

impl Op {
    pub fn stamp(&self) -> Stamp {
        Stamp {
            index: self.index,
            time_ns: self.time_ns,
        }
    }
}

/// The rules between consecutive events in file order: `index` ascends and `time_ns` never goes
/// back (equal times are fine: two events can fall in one clock tick). The reason, if broken.
#[inline]
pub(crate) fn out_of_order(prev: Stamp, next: Stamp) -> Option<String> {
    if next.index <= prev.index {
        // Named from this line, whose index is the one to compare: the previous line's is the
        // larger (or equal) one, which a reader may otherwise take for the culprit.
        return Some(format!(
            "index {} is not above the previous line's index {}: indexes ascend line by line",
            next.index, prev.index
        ));
    }
    if next.time_ns < prev.time_ns {
        return Some(format!(
            "time_ns {} goes back (previous event's time_ns {})",
            next.time_ns, prev.time_ns
        ));
    }
    None
}

/// Whether `line` is the beginning of a JSON object cut off by the end of the input: what a
/// writer killed mid-write leaves (it ends every line with a newline, so a cut line has none).
/// The only bad line a reader forgives, and only as the input's last line.
fn is_cut_off_object(line: &[u8]) -> bool {
    line.first() == Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err_and(|e| e.is_eof())
}

/// Why a history file could not be read as a [`History`]: the reader refused a line, or the
/// file breaks a structure rule of `History::new`. One type, so that every command that reads a
/// history (`lockpick check`, `report`, `export`) words a refusal the same way. Like
/// [`ReadError`], its text is whole and it has no `source()`.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// `line`: the line of the op the error names, when the file still shows it.
    #[error("{}: {error}", at_line(path, *line))]
    Structure {
        path: PathBuf,
        line: Option<u64>,
        error: StructureError,
    },
}

fn at_line(path: &Path, line: Option<u64>) -> String {
    match line {
        Some(l) => format!("{}:{l}", path.display()),
        None => path.display().to_string(),
    }
}

impl LoadError {
    /// The structure error of the history file `path`, with the line of the op it names: found
    /// by reading the file again, which only a refusal pays for.
    #[cold]
    pub fn structure(path: &Path, error: StructureError) -> LoadError {
        LoadError::Structure {
            path: path.to_path_buf(),
            line: line_of_index(path, error.index),
            error,
        }
    }
}

/// The line (1-based, blank lines counted) of the event with `index` in the history file at
/// `path`: the first, as indices ascend in a file the reader took.
fn line_of_index(path: &Path, index: u64) -> Option<u64> {
    let text = std::fs::read(path).ok()?;
    // Bounded by the file's lines.
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match read_event(line, |e| e.index) {
            Ok(i) if i == index => return Some(n as u64 + 1),
            Ok(i) if i > index => return None,
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Reads a whole history file and checks its structure: [`read_ops`], then [`History::new`].
pub fn read_history(path: &Path) -> Result<(History, Vec<ReadWarning>), LoadError> {
    let (ops, warnings) = read_ops(path)?;
    let history = History::new(ops).map_err(|error| LoadError::structure(path, error))?;
    Ok((history, warnings))
}

/// Reads a whole history file into memory, with the reader's warnings (see the module's rules).
pub fn read_ops(path: &Path) -> Result<(Vec<Op>, Vec<ReadWarning>), ReadError> {
    let file = File::open(path).map_err(|error| ReadError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    // Reserve for the whole history up front: growing a vector of large ops by doubling copies
    // it again and again. Lines are rarely under 60 bytes, and unused capacity is only address
    // space, never touched.
    let capacity = file.metadata().map(|m| m.len() as usize / 60).unwrap_or(0);
    read_ops_with_capacity(file, path, capacity)
}

/// Bytes of history parsed per round: big enough to keep every core busy, small enough that
/// the raw text held at once stays a few MB whatever the history's size.
pub const BLOCK_BYTES: usize = 8 << 20;

/// Reads ops from any reader (`name` is used only in messages). Parses in parallel.
pub fn read_ops_from(
    input: impl Read,
    name: &Path,
) -> Result<(Vec<Op>, Vec<ReadWarning>), ReadError> {
    read_ops_with_capacity(input, name, 0)
}

fn read_ops_with_capacity(
    input: impl Read,
    name: &Path,
    capacity: usize,
) -> Result<(Vec<Op>, Vec<ReadWarning>), ReadError> {
    let mut ops = Vec::with_capacity(capacity);
    let warnings = read_pieces(input, name, &OpBuilder, |piece| ops.extend(piece))?;
    Ok((ops, warnings))
}

/// Builds a per-range accumulator (a "piece") of the events the reader parsed. [`read_pieces`]
/// runs one piece per range of lines, on every core, so a builder may keep per-piece state
/// (interned names) without locks. It never sees a line: every line is read by the one parser
/// ([`crate::parse_event`]), so every reader accepts the same lines and words a refusal the
/// same way.
pub trait PieceBuilder: Sync {
    type Piece: Send;
    /// An empty piece for a range of `bytes` bytes of text.
    fn new_piece(&self, bytes: usize) -> Self::Piece;
    /// Adds one event, read from the piece's next non-blank line.
    fn push(&self, event: &EventRef<'_>, piece: &mut Self::Piece);
}

/// The plain builder: one [`Op`] per line.
struct OpBuilder;

impl PieceBuilder for OpBuilder {
    type Piece = Vec<Op>;
    fn new_piece(&self, bytes: usize) -> Vec<Op> {
        Vec::with_capacity(bytes / 60)
    }
    #[inline]
    fn push(&self, event: &EventRef<'_>, piece: &mut Vec<Op>) {
        piece.push(Op::from(event));
    }
}

/// Reads a history into pieces built by `builder`, handing `sink` each piece in file order,
/// and returns the reader's warnings. Applies the module's rules; parses blocks of lines on
/// every core and never holds more than a few blocks of text.
pub fn read_pieces<P: PieceBuilder>(
    input: impl Read,
    name: &Path,
    builder: &P,
    sink: impl FnMut(P::Piece),
) -> Result<Vec<ReadWarning>, ReadError> {
    read_pieces_in(input, name, builder, sink, BLOCK_BYTES)
}

/// [`read_pieces`] in blocks of about `block_bytes` (at least a line; [`BLOCK_BYTES`] for
/// [`read_pieces`]): a reader whose own state is small reads in smaller blocks, so that the
/// text and pieces in flight stay few MB.
pub fn read_pieces_in<P: PieceBuilder>(
    input: impl Read,
    name: &Path,
    builder: &P,
    sink: impl FnMut(P::Piece),
    block_bytes: usize,
) -> Result<Vec<ReadWarning>, ReadError> {
    read_blocks(input, name, builder, sink, block_bytes.max(1))
}

/// [`read_pieces`] in blocks of `block_bytes` (tests use tiny blocks to put a boundary
/// between every two lines).
fn read_blocks<P: PieceBuilder>(
    mut input: impl Read,
    name: &Path,
    builder: &P,
    mut sink: impl FnMut(P::Piece),
    block_bytes: usize,
) -> Result<Vec<ReadWarning>, ReadError> {
    let io_err = |error| ReadError::Io {
        path: name.to_path_buf(),
        error,
    };
    let mut reader = BlockReader::new(name, builder);
    // Tests read in tiny blocks to put edges between lines everywhere: split across threads too.
    if block_bytes < SMALL_BLOCK_BYTES {
        reader.inline_below = 0;
    }
    std::thread::scope(|scope| {
        // The parsers beside this thread, for the whole read. A thread made for each block
        // cost its start and a fresh heap, whose pages the kernel zeroed, every block: at 1 MiB
        // blocks some 7% of a 10M-event check's samples.
        let pool = Pool::start(scope, builder, reader.threads.saturating_sub(1));
        // One buffer for the whole read: `buf[..kept]` is a line begun in the last block, and
        // the next block is read after it. The parsers share it while they parse a block and
        // give it back before their pieces come back. A buffer made for each block cost a
        // fresh allocation, zeroed and faulted in, every MiB.
        let mut buf: Vec<u8> = Vec::new();
        let mut kept = 0;
        // Bounded by the input: every pass consumes at least one block or ends at EOF.
        loop {
            if buf.len() < kept + block_bytes {
                // Grown, and zeroed, once (or for a line longer than a block).
                buf.resize(kept + block_bytes, 0);
            }
            let (filled, eof) =
                fill_at(&mut input, &mut buf[..kept + block_bytes], kept).map_err(io_err)?;
            if filled == 0 {
                break;
            }
            let whole = if eof {
                filled
            } else {
                match memchr::memrchr(b'\n', &buf[..filled]) {
                    Some(p) => p + 1,
                    // One line longer than a block: keep reading until it ends.
                    None => {
                        kept = filled;
                        continue;
                    }
                }
            };
            let shared = Arc::new(std::mem::take(&mut buf));
            reader.read_shared(&shared, whole, eof, &pool, &mut sink)?;
            if eof {
                break;
            }
            // Every parser dropped its share before sending its piece back.
            buf = Arc::try_unwrap(shared).expect("a parser kept its share of the block");
            buf.copy_within(whole..filled, 0);
            kept = filled - whole;
        }
        Ok(reader.into_warnings())
    })
}

/// A range of lines of a shared block to parse: `text[from..to]`, after `lines_before` lines
/// of the input; `at_end`: it ends the input.
struct Job {
    text: Arc<Vec<u8>>,
    from: usize,
    to: usize,
    lines_before: u64,
    at_end: bool,
}

/// Parser threads that live as long as a read: each takes one range of a block at a time
/// and sends back its piece. Dropping the pool ends them.
struct Pool<T> {
    workers: Vec<(mpsc::Sender<Job>, mpsc::Receiver<Piece<T>>)>,
}

impl<T: Send> Pool<T> {
    fn start<'scope, 'env, P: PieceBuilder<Piece = T>>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        builder: &'env P,
        threads: usize,
    ) -> Pool<T>
    where
        T: 'scope,
    {
        let workers = (0..threads)
            .map(|_| {
                let (job_tx, job_rx) = mpsc::channel::<Job>();
                let (piece_tx, piece_rx) = mpsc::channel();
                scope.spawn(move || {
                    // Bounded by the jobs sent, which end when the pool is dropped.
                    for job in job_rx {
                        let text = &job.text[job.from..job.to];
                        let piece = parse_piece(builder, text, job.lines_before, job.at_end);
                        // The block goes back to the reader before its piece does.
                        drop(job);
                        if piece_tx.send(piece).is_err() {
                            return;
                        }
                    }
                });
                (job_tx, piece_rx)
            })
            .collect();
        Pool { workers }
    }
}

/// A history read a block of whole lines at a time, as it arrives: what [`read_pieces`] reads
/// a file with, and what follows a file another process is still writing. Keeps what the
/// module's rules need across blocks: the lines read before (for messages), the last event's
/// stamp (time never goes back across a block's edge), and whether the first block (which may
/// start with a byte-order mark) was read.
pub struct BlockReader<'a, P: PieceBuilder> {
    name: std::path::PathBuf,
    builder: &'a P,
    threads: usize,
    /// Blocks shorter than this are parsed on the caller's thread.
    inline_below: usize,
    lines_before: u64,
    last: Option<Stamp>,
    started: bool,
    warnings: Vec<ReadWarning>,
}

impl<'a, P: PieceBuilder> BlockReader<'a, P> {
    /// A reader of the history named `name` (in messages only).
    pub fn new(name: &Path, builder: &'a P) -> BlockReader<'a, P> {
        BlockReader {
            name: name.to_path_buf(),
            builder,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(8),
            inline_below: SMALL_BLOCK_BYTES,
            lines_before: 0,
            last: None,
            started: false,
            warnings: Vec::new(),
        }
    }

    /// Parses `block`, the next lines of the history, on every core and hands `sink` its
    /// pieces in order. The block ends at a line's end, unless `at_end`: it ends the input, and
    /// its last line may be a write cut short (a warning, not an error). After an error the
    /// reader must not be given more: what follows cannot be placed.
    pub fn read(
        &mut self,
        block: &[u8],
        at_end: bool,
        sink: impl FnMut(P::Piece),
    ) -> Result<(), ReadError> {
        let Some((start, ranges)) = self.ranges(block) else {
            return Ok(());
        };
        let block = &block[start..];
        let (builder, lines_before) = (self.builder, self.lines_before);
        let results: Vec<Piece<P::Piece>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ranges
                .iter()
                .enumerate()
                .map(|(i, &(from, to, first_line))| {
                    let text = &block[from..to];
                    let at_end = at_end && i + 1 == ranges.len();
                    let parse =
                        move || parse_piece(builder, text, lines_before + first_line, at_end);
                    if ranges.len() == 1 {
                        Ok(parse())
                    } else {
                        Err(scope.spawn(parse))
                    }
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.unwrap_or_else(|h| h.join().expect("history parser thread panicked")))
                .collect()
        });
        self.accept(block, &ranges, results, sink)
    }

    /// [`BlockReader::read`] of `shared[..len]`, by this thread and the `pool`'s.
    fn read_shared(
        &mut self,
        shared: &Arc<Vec<u8>>,
        len: usize,
        at_end: bool,
        pool: &Pool<P::Piece>,
        sink: impl FnMut(P::Piece),
    ) -> Result<(), ReadError> {
        let Some((start, ranges)) = self.ranges(&shared[..len]) else {
            return Ok(());
        };
        let block = &shared[start..len];
        let lines_before = self.lines_before;
        let last = ranges.len() - 1;
        // The ranges after the first go to the pool (one each: there are no more ranges than
        // the pool's threads and this one), the first is parsed here meanwhile.
        let workers = &pool.workers[..last];
        for (&(from, to, first_line), (jobs, _)) in ranges[1..].iter().zip(workers) {
            let job = Job {
                text: Arc::clone(shared),
                from: start + from,
                to: start + to,
                lines_before: lines_before + first_line,
                at_end: at_end && to == block.len(),
            };
            jobs.send(job).expect("history parser thread panicked");
        }
        let (from, to, first_line) = ranges[0];
        let first = parse_piece(
            self.builder,
            &block[from..to],
            lines_before + first_line,
            at_end && last == 0,
        );
        let results = std::iter::once(first)
            .chain(
                workers
                    .iter()
                    .map(|(_, pieces)| pieces.recv().expect("history parser thread panicked")),
            )
            .collect();
        self.accept(block, &ranges, results, sink)
    }

    /// Where the lines of `block` start (past a byte-order mark first in the input) and the
    /// ranges to parse them in, one per thread; `None` for no lines.
    #[allow(clippy::type_complexity)]
    fn ranges(&mut self, block: &[u8]) -> Option<(usize, Vec<(usize, usize, u64)>)> {
        // A UTF-8 byte-order mark some editors put first is no part of the first line: JSON
        // readers may ignore it (RFC 8259), and lockpick does. A block of whole lines holds
        // the whole mark if the file starts with one.
        let mut start = 0;
        if !self.started && !block.is_empty() {
            self.started = true;
            if block.starts_with(UTF8_BOM) {
                start = UTF8_BOM.len();
            }
        }
        let block = &block[start..];
        if block.is_empty() {
            return None;
        }
        // A block too small to be worth a thread per core (a followed file's few new lines)
        // is parsed here.
        let threads = if block.len() < self.inline_below {
            1
        } else {
            self.threads
        };
        Some((start, split_lines(block, threads)))
    }

    /// Hands `sink` the `pieces` of `block`'s `ranges` in order, once the rules across them
    /// hold.
    fn accept(
        &mut self,
        block: &[u8],
        ranges: &[(usize, usize, u64)],
        pieces: Vec<Piece<P::Piece>>,
        mut sink: impl FnMut(P::Piece),
    ) -> Result<(), ReadError> {
        for piece in pieces {
            // Across ranges: the range's first event against the previous range's last.
            let across = match (self.last, piece.first) {
                (Some(prev), Some((line, first))) => out_of_order(prev, first).map(|r| (line, r)),
                _ => None,
            };
            if let Some((line, reason)) = across.or(piece.error) {
                return Err(ReadError::Malformed {
                    path: self.name.clone(),
                    line,
                    reason,
                });
            }
            if piece.last.is_some() {
                self.last = piece.last;
            }
            sink(piece.items);
            self.warnings.extend(piece.warning);
        }
        self.lines_before += ranges.last().map_or(0, |&(from, to, before)| {
            before + bytecount(&block[from..to])
        });
        Ok(())
    }

    /// The lines read so far.
    pub fn lines(&self) -> u64 {
        self.lines_before
    }

    /// The warnings of every block read.
    pub fn into_warnings(self) -> Vec<ReadWarning> {
        self.warnings
    }
}

/// Under this many bytes a block is parsed on the reader's own thread.
const SMALL_BLOCK_BYTES: usize = 64 << 10;

/// The UTF-8 byte-order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads into `buf[from..]` until it is full or the input ends: the bytes then in `buf`, and
/// true at the end.
fn fill_at(input: &mut impl Read, buf: &mut [u8], from: usize) -> io::Result<(usize, bool)> {
    let mut len = from;
    // Bounded by the buffer: every read fills some of it or ends the input.
    while len < buf.len() {
        match input.read(&mut buf[len..]) {
            Ok(0) => return Ok((len, true)),
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((len, false))
}

fn bytecount(b: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', b).count() as u64
}

/// Splits `block` into up to `n` ranges that end at line ends, each with the number of lines
/// before it within the block.
fn split_lines(block: &[u8], n: usize) -> Vec<(usize, usize, u64)> {
    let mut out = Vec::with_capacity(n);
    let mut from = 0;
    let mut lines = 0;
    let step = block.len().div_ceil(n.max(1)).max(1);
    while from < block.len() {
        let mut to = (from + step).min(block.len());
        if to < block.len() {
            to = match memchr::memchr(b'\n', &block[to..]) {
                Some(p) => to + p + 1,
                None => block.len(),
            };
        }
        out.push((from, to, lines));
        lines += bytecount(&block[from..to]);
        from = to;
    }
    out
}

/// One range of lines, parsed.
struct Piece<T> {
    items: T,
    /// Line and stamp of its first op, to check order across ranges.
    first: Option<(u64, Stamp)>,
    /// Stamp of its last op.
    last: Option<Stamp>,
    /// The first bad line.
    error: Option<(u64, String)>,
    warning: Option<ReadWarning>,
}

/// `lines_before`: lines of the input before this range. `at_end`: the range ends the input,
/// so its last line may be a write cut short.
fn parse_piece<P: PieceBuilder>(
    builder: &P,
    text: &[u8],
    lines_before: u64,
    at_end: bool,
) -> Piece<P::Piece> {
    let mut piece = Piece {
        items: builder.new_piece(text.len()),
        first: None,
        last: None,
        error: None,
        warning: None,
    };
    let mut line_no = lines_before;
    let mut rest = text;
    // Bounded by the text: each pass consumes one line.
    while !rest.is_empty() {
        let (line, complete) = match memchr::memchr(b'\n', rest) {
            Some(p) => {
                let l = &rest[..p];
                rest = &rest[p + 1..];
                (l, true)
            }
            None => {
                let l = rest;
                rest = &[];
                (l, false)
            }
        };
        line_no += 1;
        let t = line.trim_ascii();
        if t.is_empty() {
            continue;
        }
        let items = &mut piece.items;
        match read_event(t, |event| {
            builder.push(event, items);
            event.stamp()
        }) {
            Ok(stamp) => {
                if let Some(reason) = piece.last.and_then(|prev| out_of_order(prev, stamp)) {
                    piece.error = Some((line_no, reason));
                    return piece;
                }
                if piece.first.is_none() {
                    piece.first = Some((line_no, stamp));
                }
                piece.last = Some(stamp);
            }
            // Only the input's last line can have been cut short, and only if it is the start
            // of an object: a complete line, or one that is no object's beginning, is malformed.
            Err(e) if at_end && !complete && is_cut_off_object(t) => {
                piece.warning = Some(ReadWarning {
                    line: line_no,
                    message: format!(
                        "truncated final line ignored (the writer was probably killed mid-write): {e}"
                    ),
                });
            }
            Err(e) => {
                piece.error = Some((line_no, e));
                return piece;
            }
        }
    }
    piece
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` in blocks of `block_bytes`: the ops, or the error's text.
    fn read_in(text: &str, block_bytes: usize) -> Result<(usize, Vec<u64>), String> {
        let mut n = 0;
        read_blocks(
            text.as_bytes(),
            Path::new("h"),
            &OpBuilder,
            |ops: Vec<Op>| n += ops.len(),
            block_bytes,
        )
        .map(|w| (n, w.iter().map(|w| w.line).collect()))
        .map_err(|e| e.to_string())
    }

    fn line(index: u64, time_ns: u64) -> String {
        format!(r#"{{"index":{index},"time_ns":{time_ns},"process":1,"type":"info","f":"x"}}"#)
    }

    /// Every block size from one byte (a boundary between every two lines, and inside every
    /// line) to the whole text gives the same answer: the rules hold across blocks and pieces.
    #[test]
    fn rules_hold_across_every_block_boundary() {
        let ok = [line(0, 5), line(1, 5), line(2, 7)].join("\n") + "\n";
        let cases = [
            (ok.clone(), Ok((3, vec![]))),
            (
                ok.clone() + &line(3, 6) + "\n",
                Err("h:4: time_ns 6 goes back (previous event's time_ns 7)"),
            ),
            (
                ok.clone() + &line(2, 8) + "\n",
                Err("h:4: index 2 is not above the previous line's index 2: indexes ascend line by line"),
            ),
            (ok.clone() + &line(3, 7)[..20], Ok((3, vec![4]))),
            (
                ok.clone() + &line(3, 7)[..20] + "\n",
                Err("h:4: EOF while parsing"),
            ),
            (
                ok.clone() + "\n\n" + &line(3, 4),
                Err("h:6: time_ns 4 goes back"),
            ),
            // A byte-order mark first is read past; anywhere else it is the line's.
            (format!("\u{feff}{ok}"), Ok((3, vec![]))),
            (
                format!("{ok}\u{feff}{}\n", line(3, 7)),
                Err("h:4: expected value"),
            ),
        ];
        for (text, want) in cases {
            for block_bytes in 1..=text.len() {
                let got = read_in(&text, block_bytes);
                match (&want, &got) {
                    (Ok(w), Ok(g)) if w == g => {}
                    (Err(w), Err(g)) if g.starts_with(w) => {}
                    _ => panic!("blocks of {block_bytes}: {text:?}: want {want:?}, got {got:?}"),
                }
            }
        }
    }
}
