//! The control page: one 4 KiB file that lockpick maps and every patched process of a node
//! maps too (`MAP_SHARED`), so a clock change is a store into this page, seen by the target on
//! its next clock read with no stop and no system call in the target.
//!
//! Layout (little-endian; offsets in bytes):
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `LPVCLK01` |
//! | 8 | `seq`, u32: odd while lockpick writes (a seqlock: the hook re-reads until even and unchanged) |
//! | 64 + 32 id | clock `id`'s parameters: `t0_ns`, `off_ns`, `excess_q32` (i64 each) |
//! | 2048 + 64 id | `applied_ns`: the offset the target's last read of clock `id` applied (the target writes it) |
//!
//! For a clock with true reading `t`, the target sees
//! `t + off_ns + ((t - t0_ns) * excess_q32) >> 32`: an offset, plus `rate - 1` (in 32.32 fixed
//! point) times the time since `t0_ns`. A rate change stores the offset reached so far as
//! `off_ns` and now as `t0_ns`, so the clock never jumps when its rate switches.

use crate::{ClockScope, Error};
use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};
use nix::time::{clock_gettime, ClockId};
use std::fs::OpenOptions;
use std::num::NonZeroUsize;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

pub const PAGE_BYTES: usize = 4096;
/// Clock ids `0..CLOCKS` have a slot; the hook passes any other id (CPU-time clocks, the
/// negative per-process ids) through untouched.
pub const CLOCKS: usize = 16;
pub(crate) const MAGIC: &[u8; 8] = b"LPVCLK01";
const SEQ: usize = 8;
const PARAMS: usize = 64;
const PARAM_BYTES: usize = 32;
const APPLIED: usize = 2048;
const APPLIED_BYTES: usize = 64;

/// Linux clock ids (uapi/linux/time.h).
pub const CLOCK_REALTIME: usize = 0;
pub const CLOCK_MONOTONIC: usize = 1;
pub const CLOCK_MONOTONIC_RAW: usize = 4;
pub const CLOCK_REALTIME_COARSE: usize = 5;
pub const CLOCK_MONOTONIC_COARSE: usize = 6;
pub const CLOCK_BOOTTIME: usize = 7;
pub const CLOCK_REALTIME_ALARM: usize = 8;
pub const CLOCK_BOOTTIME_ALARM: usize = 9;
pub const CLOCK_TAI: usize = 11;

/// The wall clocks: what `--clock-scope wall` moves (gettimeofday and time read slot 0).
const WALL: [usize; 4] = [
    CLOCK_REALTIME,
    CLOCK_REALTIME_COARSE,
    CLOCK_REALTIME_ALARM,
    CLOCK_TAI,
];
/// The clocks that count elapsed time: moved too with `--clock-scope all`.
const ELAPSED: [usize; 5] = [
    CLOCK_MONOTONIC,
    CLOCK_MONOTONIC_RAW,
    CLOCK_MONOTONIC_COARSE,
    CLOCK_BOOTTIME,
    CLOCK_BOOTTIME_ALARM,
];

/// The clock ids a scope moves.
pub fn clocks_of(scope: ClockScope) -> Vec<usize> {
    match scope {
        ClockScope::Wall => WALL.to_vec(),
        ClockScope::All => WALL.iter().chain(ELAPSED.iter()).copied().collect(),
    }
}

/// One clock's setting: where it stands and how fast it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// The true reading (of this clock) when the setting was made.
    pub t0_ns: i64,
    /// The offset at `t0_ns`.
    pub off_ns: i64,
    /// `(rate - 1) * 2^32`.
    pub excess_q32: i64,
}

impl Setting {
    pub const TRUE: Setting = Setting {
        t0_ns: 0,
        off_ns: 0,
        excess_q32: 0,
    };

    /// The offset this setting gives at true reading `t_ns`: the hook's formula, with the
    /// same 128-bit product and arithmetic shift.
    pub fn offset_at(&self, t_ns: i64) -> i64 {
        let product = (t_ns.wrapping_sub(self.t0_ns) as i128) * (self.excess_q32 as i128);
        self.off_ns.wrapping_add((product >> 32) as i64)
    }

    pub fn rate(&self) -> f64 {
        1.0 + self.excess_q32 as f64 / 4_294_967_296.0
    }
}

/// `rate - 1` in 32.32 fixed point. Rates outside (0, 1000] are refused by the caller.
pub fn excess_q32(rate: f64) -> i64 {
    ((rate - 1.0) * 4_294_967_296.0).round() as i64
}

/// The control page as lockpick holds it: a file mapped shared, read and written with atomic
/// loads and stores (the target reads it concurrently).
#[derive(Debug)]
pub struct ControlPage {
    path: PathBuf,
    base: NonNull<u8>,
}

// The mapping is plain shared memory accessed only through atomics.
unsafe impl Send for ControlPage {}
unsafe impl Sync for ControlPage {}

impl ControlPage {
    /// Creates (or truncates) the file at `path` with every clock true, and maps it.
    pub fn create(path: &Path) -> Result<ControlPage, Error> {
        ControlPage::map(path, true)
    }

    fn map(path: &Path, fresh: bool) -> Result<ControlPage, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(fresh)
            .truncate(fresh)
            .open(path)
            .map_err(io)?;
        file.set_len(PAGE_BYTES as u64).map_err(io)?;
        // Safety: a fresh shared mapping of a file we sized to one page; nothing aliases it in
        // this process but this struct.
        let base = unsafe {
            mmap(
                None,
                NonZeroUsize::new(PAGE_BYTES).expect("non-zero"),
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                file.as_fd(),
                0,
            )
        }
        .map_err(|e| io(std::io::Error::from(e)))?;
        let page = ControlPage {
            path: path.to_path_buf(),
            base: base.cast(),
        };
        if !fresh {
            return Ok(page);
        }
        // Safety: inside the page, which is ours.
        unsafe { std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), page.base.as_ptr(), 8) };
        for id in 0..CLOCKS {
            page.applied(id).store(0, Ordering::SeqCst);
        }
        page.reset();
        Ok(page)
    }

    /// Maps an existing control file (made by [`ControlPage::create`]) as it is, or creates
    /// one if there is none.
    pub fn open_or_create(path: &Path) -> Result<ControlPage, Error> {
        match std::fs::read(path) {
            Ok(bytes) if bytes.len() == PAGE_BYTES && bytes.starts_with(MAGIC) => {
                ControlPage::map(path, false)
            }
            _ => ControlPage::create(path),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn word(&self, offset: usize) -> &AtomicI64 {
        debug_assert!(offset % 8 == 0 && offset + 8 <= PAGE_BYTES);
        // Safety: aligned, inside the mapping, which lives as long as self.
        unsafe { &*(self.base.as_ptr().add(offset) as *const AtomicI64) }
    }

    fn seq(&self) -> &AtomicU32 {
        // Safety: as in `word`.
        unsafe { &*(self.base.as_ptr().add(SEQ) as *const AtomicU32) }
    }

    fn applied(&self, id: usize) -> &AtomicI64 {
        self.word(APPLIED + id * APPLIED_BYTES)
    }

    /// The setting of clock `id`.
    pub fn setting(&self, id: usize) -> Setting {
        let at = PARAMS + id * PARAM_BYTES;
        Setting {
            t0_ns: self.word(at).load(Ordering::SeqCst),
            off_ns: self.word(at + 8).load(Ordering::SeqCst),
            excess_q32: self.word(at + 16).load(Ordering::SeqCst),
        }
    }

    /// Writes the settings of `ids` under the seqlock: the hook never uses a half-written set.
    pub fn write(&self, ids: &[usize], setting: impl Fn(usize) -> Setting) {
        let seq = self.seq();
        seq.fetch_add(1, Ordering::SeqCst);
        for &id in ids {
            let s = setting(id);
            let at = PARAMS + id * PARAM_BYTES;
            self.word(at).store(s.t0_ns, Ordering::SeqCst);
            self.word(at + 8).store(s.off_ns, Ordering::SeqCst);
            self.word(at + 16).store(s.excess_q32, Ordering::SeqCst);
        }
        seq.fetch_add(1, Ordering::SeqCst);
    }

    /// The offset the target's last read of clock `id` applied (0 if it never read it).
    pub fn applied_ns(&self, id: usize) -> i64 {
        self.applied(id).load(Ordering::SeqCst)
    }

    /// Sets what [`ControlPage::applied_ns`] reports, so a later read proves a fresh read.
    pub fn mark_applied(&self, id: usize, value: i64) {
        self.applied(id).store(value, Ordering::SeqCst)
    }

    /// The offset clock `id` shows now, by its setting.
    pub fn offset_ns(&self, id: usize) -> i64 {
        self.setting(id).offset_at(now_ns(id))
    }

    /// Changes every clock of `scope` at once: `change` gets a clock's offset now and its
    /// rate, and returns its new offset and rate, which count from now (so a rate switch
    /// never jumps).
    pub fn change(&self, scope: ClockScope, change: impl Fn(i64, f64) -> (i64, f64)) {
        let ids = clocks_of(scope);
        self.write(&ids, |id| {
            let t0_ns = now_ns(id);
            let old = self.setting(id);
            let (off_ns, rate) = change(old.offset_at(t0_ns), old.rate());
            Setting {
                t0_ns,
                off_ns,
                excess_q32: excess_q32(rate),
            }
        });
    }

    /// Every clock true again.
    pub fn reset(&self) {
        self.write(&(0..CLOCKS).collect::<Vec<_>>(), |_| Setting::TRUE);
    }

    /// The address of the mapping (the tests run the hook in this process against it).
    pub fn as_ptr(&self) -> *const u8 {
        self.base.as_ptr()
    }
}

impl Drop for ControlPage {
    fn drop(&mut self) {
        // Safety: our own mapping, unmapped once.
        let _ = unsafe { munmap(self.base.cast(), PAGE_BYTES) };
    }
}

/// This process's true reading of clock `id` (lockpick itself is never patched). The alarm
/// clocks read as their base clocks (reading them may need an RTC this machine lacks).
pub fn now_ns(id: usize) -> i64 {
    let base = match id {
        CLOCK_REALTIME_ALARM => CLOCK_REALTIME,
        CLOCK_BOOTTIME_ALARM => CLOCK_BOOTTIME,
        other => other,
    };
    clock_gettime(ClockId::from_raw(base as libc::clockid_t))
        .or_else(|_| clock_gettime(ClockId::CLOCK_REALTIME))
        .map(|ts| ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
        .unwrap_or(0)
}
