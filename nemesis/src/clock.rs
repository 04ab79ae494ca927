//! Per-node clock faults through libfaketime: every node runs with libfaketime preloaded and
//! its own control file; rewriting the file changes that node's clock at once (the file is
//! re-read on every clock call). The host clock is never touched.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

/// Where Debian's `libfaketime` package puts the library; the multi-threaded variant first,
/// since the services under test are threaded.
const LIBFAKETIME_CANDIDATES: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
];

/// The libfaketime library to preload, if installed.
pub fn find_libfaketime() -> Option<PathBuf> {
    LIBFAKETIME_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Which clocks a clock fault moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockScope {
    /// Only the realtime (wall) clock; CLOCK_MONOTONIC runs true.
    Wall,
    /// The monotonic clock too: what a service's lease timers see.
    All,
}

impl ClockScope {
    pub fn as_str(self) -> &'static str {
        match self {
            ClockScope::Wall => "wall",
            ClockScope::All => "all",
        }
    }
}

impl fmt::Display for ClockScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ClockScope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "wall" => Ok(ClockScope::Wall),
            "all" => Ok(ClockScope::All),
            _ => Err(format!("unknown clock scope {s:?} (expected wall or all)")),
        }
    }
}

/// The environment a node needs so its clock follows `control`.
pub fn faketime_env(lib: &Path, control: &Path, scope: ClockScope) -> Vec<(String, String)> {
    let mut env = vec![
        ("LD_PRELOAD".to_string(), lib.display().to_string()),
        (
            "FAKETIME_TIMESTAMP_FILE".to_string(),
            control.display().to_string(),
        ),
        // Without this libfaketime caches the file for seconds: a fault would land late.
        ("FAKETIME_NO_CACHE".to_string(), "1".to_string()),
    ];
    if scope == ClockScope::Wall {
        env.push(("FAKETIME_DONT_FAKE_MONOTONIC".to_string(), "1".to_string()));
    }
    env
}

/// One node's clock: the control file and what it currently says.
///
/// libfaketime reads `+O xR` as "offset O seconds, and since the process started the clock runs
/// R times as fast", so a rate applies from the process's start, not from when it was written.
/// To switch rates without a jump, the offset written is chosen so the faked clock is
/// continuous at the moment of the switch (to within the few ms between our record of the
/// spawn and libfaketime's own).
#[derive(Debug)]
pub struct NodeClock {
    control: PathBuf,
    /// The `O` last written.
    base_s: f64,
    /// The `R` last written.
    rate: f64,
    /// When the node's current process started (libfaketime's origin for rates).
    origin: Instant,
}

impl NodeClock {
    /// Creates the control file with a true clock (`+0`).
    pub fn create(control: PathBuf, origin: Instant) -> io::Result<NodeClock> {
        let c = NodeClock {
            control,
            base_s: 0.0,
            rate: 1.0,
            origin,
        };
        c.write()?;
        Ok(c)
    }

    pub fn control(&self) -> &Path {
        &self.control
    }

    /// The offset the node's clock has now, in seconds.
    pub fn offset_s(&self, now: Instant) -> f64 {
        self.base_s + (self.rate - 1.0) * now.saturating_duration_since(self.origin).as_secs_f64()
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The node was restarted: a new process, a new libfaketime origin. Keeps the offset it
    /// had and drops any rate (faults are healed before a kill).
    pub fn rebase(&mut self, origin: Instant) -> io::Result<()> {
        let off = self.offset_s(Instant::now());
        self.origin = origin;
        self.base_s = off;
        self.rate = 1.0;
        self.write()
    }

    /// Jumps the clock by `delta_s` (negative: back).
    pub fn bump(&mut self, delta_s: f64) -> io::Result<()> {
        self.base_s += delta_s;
        self.write()
    }

    /// Sets the offset outright, keeping the rate.
    pub fn set_offset(&mut self, offset_s: f64) -> io::Result<()> {
        let now = Instant::now();
        self.base_s += offset_s - self.offset_s(now);
        self.write()
    }

    /// Makes the clock run `rate` times as fast from now on, without a jump.
    pub fn set_rate(&mut self, rate: f64) -> io::Result<()> {
        assert!(rate > 0.0, "a clock rate must be positive");
        let now = Instant::now();
        let off = self.offset_s(now);
        let since = now.saturating_duration_since(self.origin).as_secs_f64();
        self.base_s = off - (rate - 1.0) * since;
        self.rate = rate;
        self.write()
    }

    /// Back to the true clock.
    pub fn reset(&mut self) -> io::Result<()> {
        self.base_s = 0.0;
        self.rate = 1.0;
        self.write()
    }

    /// The control file's text for the current state.
    pub fn spec(&self) -> String {
        if (self.rate - 1.0).abs() < f64::EPSILON {
            format!("{:+.3}", self.base_s)
        } else {
            format!("{:+.3} x{:.4}", self.base_s, self.rate)
        }
    }

    fn write(&self) -> io::Result<()> {
        // Write-then-rename: a reader must never see a half-written spec (it would parse as a
        // different offset).
        let tmp = self.control.with_extension("tmp");
        std::fs::write(&tmp, self.spec() + "\n")?;
        std::fs::rename(&tmp, &self.control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn specs_and_continuity() {
        let dir = tempfile::tempdir().unwrap();
        let origin = Instant::now() - Duration::from_secs(10);
        let mut c = NodeClock::create(dir.path().join("clock"), origin).unwrap();
        assert_eq!(std::fs::read_to_string(c.control()).unwrap(), "+0.000\n");
        c.bump(10.0).unwrap();
        assert_eq!(c.spec(), "+10.000");
        c.bump(-15.5).unwrap();
        assert_eq!(c.spec(), "-5.500");
        // Switching rate keeps the offset where it was (continuity), then it grows.
        let before = c.offset_s(Instant::now());
        c.set_rate(2.0).unwrap();
        let after = c.offset_s(Instant::now());
        assert!((after - before).abs() < 0.05, "{before} -> {after}");
        assert!(c.spec().ends_with(" x2.0000"), "{}", c.spec());
        // base = off - (rate-1) * ~10 s since the origin.
        assert!(c.base_s < -15.0 && c.base_s > -15.6, "{}", c.base_s);
        c.reset().unwrap();
        assert_eq!(c.spec(), "+0.000");
        assert_eq!("all".parse::<ClockScope>().unwrap(), ClockScope::All);
        assert!("both".parse::<ClockScope>().is_err());
    }

    #[test]
    fn env_leaves_monotonic_alone_only_for_wall() {
        let wall = faketime_env(Path::new("/lib.so"), Path::new("/c"), ClockScope::Wall);
        assert!(wall
            .iter()
            .any(|(k, _)| k == "FAKETIME_DONT_FAKE_MONOTONIC"));
        let all = faketime_env(Path::new("/lib.so"), Path::new("/c"), ClockScope::All);
        assert!(!all.iter().any(|(k, _)| k == "FAKETIME_DONT_FAKE_MONOTONIC"));
        assert!(all
            .iter()
            .any(|(k, v)| k == "FAKETIME_NO_CACHE" && v == "1"));
    }
}
