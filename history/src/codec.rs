//! The JSONL codec: a writer that flushes every line and a streaming reader that names
//! `file:line` for anything it rejects.

use crate::op::Op;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Why a history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
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
    last_index: Option<u64>,
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
            last_index: None,
        }
    }

    /// Appends one op. Indices must ascend: a writer that would produce a history its own reader
    /// rejects is a harness bug, so this is an assertion, not an error.
    pub fn write(&mut self, op: &Op) -> io::Result<()> {
        assert!(
            self.last_index.is_none_or(|last| op.index > last),
            "history index {} written after {:?}",
            op.index,
            self.last_index
        );
        self.last_index = Some(op.index);
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

/// A non-fatal observation made while reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadWarning {
    pub line: u64,
    pub message: String,
}

/// Streams ops from JSONL. Blank lines are skipped. A final line without its newline that does
/// not parse is taken as a write cut short by a crash: it is dropped with a warning. Any other
/// bad line, or an index that does not ascend, is an error naming the line.
pub struct HistoryReader<R: BufRead> {
    input: R,
    path: PathBuf,
    line_no: u64,
    buf: Vec<u8>,
    last_index: Option<u64>,
    warnings: Vec<ReadWarning>,
    done: bool,
}

impl HistoryReader<BufReader<File>> {
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let file = File::open(path).map_err(|source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self::new(BufReader::with_capacity(1 << 20, file), path))
    }
}

impl<R: BufRead> HistoryReader<R> {
    /// `path` is used only in messages.
    pub fn new(input: R, path: &Path) -> Self {
        HistoryReader {
            input,
            path: path.to_path_buf(),
            line_no: 0,
            buf: Vec::with_capacity(512),
            last_index: None,
            warnings: Vec::new(),
            done: false,
        }
    }

    pub fn warnings(&self) -> &[ReadWarning] {
        &self.warnings
    }

    pub fn take_warnings(&mut self) -> Vec<ReadWarning> {
        std::mem::take(&mut self.warnings)
    }

    fn malformed(&self, reason: String) -> ReadError {
        ReadError::Malformed {
            path: self.path.clone(),
            line: self.line_no,
            reason,
        }
    }

    fn next_op(&mut self) -> Result<Option<Op>, ReadError> {
        // Bounded by the input's length: each pass consumes one line.
        loop {
            if self.done {
                return Ok(None);
            }
            self.buf.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| ReadError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            if n == 0 {
                self.done = true;
                return Ok(None);
            }
            self.line_no += 1;
            let complete_line = self.buf.last() == Some(&b'\n');
            let text = trim_ascii(&self.buf);
            if text.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Op>(text) {
                Ok(op) => {
                    if let Some(last) = self.last_index {
                        if op.index <= last {
                            return Err(self.malformed(format!(
                                "index {} does not ascend (previous index {last})",
                                op.index
                            )));
                        }
                    }
                    self.last_index = Some(op.index);
                    return Ok(Some(op));
                }
                Err(e) if !complete_line && self.at_eof()? => {
                    self.warnings.push(ReadWarning {
                        line: self.line_no,
                        message: format!(
                            "truncated final line ignored (the writer was probably killed mid-write): {e}"
                        ),
                    });
                    self.done = true;
                    return Ok(None);
                }
                Err(e) => return Err(self.malformed(e.to_string())),
            }
        }
    }

    fn at_eof(&mut self) -> Result<bool, ReadError> {
        let buf = self.input.fill_buf().map_err(|source| ReadError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(buf.is_empty())
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

impl<R: BufRead> Iterator for HistoryReader<R> {
    type Item = Result<Op, ReadError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_op() {
            Ok(Some(op)) => Some(Ok(op)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Reads a whole history file into memory, with the reader's warnings. Same rules and
/// messages as [`HistoryReader`], but parses blocks of lines on every core.
pub fn read_ops(path: &Path) -> Result<(Vec<Op>, Vec<ReadWarning>), ReadError> {
    let file = File::open(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Reserve for the whole history up front: growing a vector of large ops by doubling copies
    // it again and again. Lines are rarely under 60 bytes, and unused capacity is only address
    // space, never touched.
    let capacity = file.metadata().map(|m| m.len() as usize / 60).unwrap_or(0);
    read_ops_with_capacity(file, path, capacity)
}

/// Bytes of history parsed per round: big enough to keep every core busy, small enough that
/// the raw text held at once stays a few MB whatever the history's size.
const BLOCK_BYTES: usize = 8 << 20;

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
    let warnings = read_pieces(input, name, &OpParser, |piece| ops.extend(piece))?;
    Ok((ops, warnings))
}

/// Parses lines into a per-range accumulator (a "piece"). [`read_pieces`] runs one per range of
/// lines, on every core, so a parser may keep per-piece state (interned names) without locks.
pub trait PieceParser: Sync {
    type Piece: Send;
    /// An empty piece for a range of `bytes` bytes of text.
    fn new_piece(&self, bytes: usize) -> Self::Piece;
    /// Parses one non-blank line into `piece` and returns its `index`, or the reason the line
    /// is malformed (as [`HistoryReader`] would word it).
    fn parse_line(&self, line: &[u8], piece: &mut Self::Piece) -> Result<u64, String>;
}

/// The plain parser: one [`Op`] per line.
struct OpParser;

impl PieceParser for OpParser {
    type Piece = Vec<Op>;
    fn new_piece(&self, bytes: usize) -> Vec<Op> {
        Vec::with_capacity(bytes / 60)
    }
    fn parse_line(&self, line: &[u8], piece: &mut Vec<Op>) -> Result<u64, String> {
        let op = serde_json::from_slice::<Op>(line).map_err(|e| e.to_string())?;
        let index = op.index;
        piece.push(op);
        Ok(index)
    }
}

/// Reads a history with `parser`, handing `sink` each parsed piece in file order, and returns
/// the reader's warnings. Same rules and messages as [`HistoryReader`] (indices ascend, a
/// malformed line names `file:line`, a truncated final line is a warning), but parses blocks
/// of lines on every core and never holds more than a few blocks of text.
pub fn read_pieces<P: PieceParser>(
    mut input: impl Read,
    name: &Path,
    parser: &P,
    mut sink: impl FnMut(P::Piece),
) -> Result<Vec<ReadWarning>, ReadError> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    let io_err = |source| ReadError::Io {
        path: name.to_path_buf(),
        source,
    };
    let mut warnings = Vec::new();
    let mut carry: Vec<u8> = Vec::new();
    let mut lines_before = 0u64;
    let mut last_index: Option<u64> = None;
    // Bounded by the input: every pass consumes at least one block or ends at EOF.
    loop {
        let mut block = std::mem::take(&mut carry);
        let eof = fill(&mut input, &mut block, BLOCK_BYTES).map_err(io_err)?;
        if block.is_empty() {
            break;
        }
        if !eof {
            match memchr::memrchr(b'\n', &block) {
                Some(p) => carry = block.split_off(p + 1),
                // One line longer than a block: keep reading until it ends.
                None => {
                    carry = block;
                    continue;
                }
            }
        }
        let pieces = split_lines(&block, threads);
        let results: Vec<Piece<P::Piece>> = std::thread::scope(|scope| {
            let handles: Vec<_> = pieces
                .iter()
                .enumerate()
                .map(|(i, &(from, to, first_line))| {
                    let text = &block[from..to];
                    let at_end = eof && i + 1 == pieces.len();
                    scope
                        .spawn(move || parse_piece(parser, text, lines_before + first_line, at_end))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("history parser thread panicked"))
                .collect()
        });
        for piece in results {
            if let (Some((line, index)), Some(last)) = (piece.first, last_index) {
                if index <= last {
                    return Err(ReadError::Malformed {
                        path: name.to_path_buf(),
                        line,
                        reason: format!("index {index} does not ascend (previous index {last})"),
                    });
                }
            }
            if let Some((line, reason)) = piece.error {
                return Err(ReadError::Malformed {
                    path: name.to_path_buf(),
                    line,
                    reason,
                });
            }
            if piece.last.is_some() {
                last_index = piece.last;
            }
            sink(piece.items);
            warnings.extend(piece.warning);
        }
        lines_before += pieces.last().map_or(0, |&(from, to, before)| {
            before + bytecount(&block[from..to])
        });
        if eof {
            break;
        }
    }
    Ok(warnings)
}

/// Reads until `buf` holds at least `want` bytes or the input ends; true at the end.
fn fill(input: &mut impl Read, buf: &mut Vec<u8>, want: usize) -> io::Result<bool> {
    let mut len = buf.len();
    let target = len + want;
    // Read straight into the block: no intermediate buffer to copy from.
    buf.resize(target, 0);
    let mut eof = false;
    while len < target {
        match input.read(&mut buf[len..]) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
    buf.truncate(len);
    Ok(eof)
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
    /// Line and index of its first op, to check ascent across ranges.
    first: Option<(u64, u64)>,
    /// Index of its last op.
    last: Option<u64>,
    /// The first bad line.
    error: Option<(u64, String)>,
    warning: Option<ReadWarning>,
}

/// `lines_before`: lines of the input before this range. `at_end`: the range ends the input,
/// so its last line may be a write cut short.
fn parse_piece<P: PieceParser>(
    parser: &P,
    text: &[u8],
    lines_before: u64,
    at_end: bool,
) -> Piece<P::Piece> {
    let mut piece = Piece {
        items: parser.new_piece(text.len()),
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
        match parser.parse_line(t, &mut piece.items) {
            Ok(index) => {
                if let Some(prev) = piece.last {
                    if index <= prev {
                        piece.error = Some((
                            line_no,
                            format!("index {index} does not ascend (previous index {prev})"),
                        ));
                        return piece;
                    }
                }
                if piece.first.is_none() {
                    piece.first = Some((line_no, index));
                }
                piece.last = Some(index);
            }
            Err(e) if at_end && !complete => {
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
