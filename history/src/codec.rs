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

/// Reads a whole history file into memory, with the reader's warnings.
pub fn read_ops(path: &Path) -> Result<(Vec<Op>, Vec<ReadWarning>), ReadError> {
    let mut reader = HistoryReader::open(path)?;
    let mut ops = Vec::new();
    for op in reader.by_ref() {
        ops.push(op?);
    }
    let warnings = reader.take_warnings();
    Ok((ops, warnings))
}

/// Reads ops from any reader (for tests and stdin).
pub fn read_ops_from(
    input: impl Read,
    name: &Path,
) -> Result<(Vec<Op>, Vec<ReadWarning>), ReadError> {
    let mut reader = HistoryReader::new(BufReader::new(input), name);
    let mut ops = Vec::new();
    for op in reader.by_ref() {
        ops.push(op?);
    }
    let warnings = reader.take_warnings();
    Ok((ops, warnings))
}
