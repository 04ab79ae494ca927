//! [`Recorder`]: the one place a live run turns events into history lines.

use crate::codec::HistoryWriter;
use crate::op::{Op, OpType, OpValue, Process, F};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Live counts for the status line.
#[derive(Debug, Default)]
pub struct Counters {
    pub invoked: AtomicU64,
    pub ok: AtomicU64,
    pub fail: AtomicU64,
    pub info: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountsSnapshot {
    pub invoked: u64,
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
}

/// Assigns each event its index and time and writes it at once. Index and time are taken under
/// the same lock as the write, so both ascend in file order: a reader may rely on that.
pub struct Recorder<W: Write + Send = std::fs::File> {
    start: Instant,
    inner: Mutex<Inner<W>>,
    counters: Counters,
}

struct Inner<W: Write> {
    writer: HistoryWriter<W>,
    next_index: u64,
    /// The first write error; later writes are refused so the file never gets a gap.
    failed: Option<String>,
}

impl<W: Write + Send> Recorder<W> {
    pub fn new(writer: HistoryWriter<W>, start: Instant) -> Self {
        Recorder {
            start,
            inner: Mutex::new(Inner {
                writer,
                next_index: 0,
                failed: None,
            }),
            counters: Counters::default(),
        }
    }

    /// Nanoseconds since the test started on the harness's monotonic clock.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// Records one event and returns it as written.
    pub fn record(
        &self,
        process: Process,
        kind: OpType,
        f: F,
        lock: Option<&str>,
        key: Option<&str>,
        value: OpValue,
    ) -> io::Result<Op> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = &inner.failed {
            return Err(io::Error::other(format!(
                "history writer failed earlier: {e}"
            )));
        }
        let op = Op {
            index: inner.next_index,
            time_ns: self.now_ns(),
            process,
            kind,
            f,
            lock: lock.map(str::to_string),
            key: key.map(str::to_string),
            value,
            extra: Default::default(),
        };
        if let Err(e) = inner.writer.write(&op) {
            inner.failed = Some(e.to_string());
            return Err(e);
        }
        inner.next_index += 1;
        drop(inner);
        if !process.is_nemesis() {
            let c = match kind {
                OpType::Invoke => &self.counters.invoked,
                OpType::Ok => &self.counters.ok,
                OpType::Fail => &self.counters.fail,
                OpType::Info => &self.counters.info,
            };
            c.fetch_add(1, Ordering::Relaxed);
        }
        Ok(op)
    }

    /// Records a nemesis event (`type: info`).
    pub fn nemesis(&self, f: &str, value: OpValue) -> io::Result<Op> {
        self.record(
            Process::Nemesis,
            OpType::Info,
            F::from(f),
            None,
            None,
            value,
        )
    }

    pub fn counts(&self) -> CountsSnapshot {
        CountsSnapshot {
            invoked: self.counters.invoked.load(Ordering::Relaxed),
            ok: self.counters.ok.load(Ordering::Relaxed),
            fail: self.counters.fail.load(Ordering::Relaxed),
            info: self.counters.info.load(Ordering::Relaxed),
        }
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_index
    }

    pub fn into_writer(self) -> io::Result<W> {
        self.inner
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .writer
            .into_inner()
    }
}
