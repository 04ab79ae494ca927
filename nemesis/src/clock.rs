//! Per-node clocks, through one of two backends:
//!
//! - **vDSO** (the default where it can run: x86_64 and ptrace permission): each node's
//!   processes are patched right after they start ([`vclock::patch`]) so their clock functions
//!   read a control page of the node's own, [`vclock::ControlPage`]; a clock change is a store
//!   into it. Reaches any program that reads time through the vDSO, Go (etcd) and static
//!   binaries included, and adds about 10 ns to a clock read (BENCHMARKS.md).
//! - **libfaketime** (the fallback: another architecture, or no ptrace permission): every node
//!   runs with libfaketime preloaded and its own control file; rewriting the file changes that
//!   node's clock at once (it is re-read on every clock call). Reaches only programs that read
//!   time through libc (not Go), and slows some of them down a lot (BENCHMARKS.md).
//!
//! The host clock is never touched.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub use vclock::{ClockScope, ControlPage};

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

/// Why the vDSO backend cannot run here, if it cannot.
pub fn vdso_unavailable() -> Option<String> {
    vclock::available().err()
}

/// How clock faults reach a node's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// Patched vDSO clock functions and a control page per node.
    Vdso,
    /// libfaketime preloaded (the library's path) and a control file per node.
    Faketime(PathBuf),
}

impl Backend {
    /// The backend this machine can run: the vDSO where it works, else libfaketime; if
    /// neither, why not (both reasons).
    pub fn detect() -> Result<Backend, String> {
        match vclock::available() {
            Ok(()) => Ok(Backend::Vdso),
            Err(vdso) => match find_libfaketime() {
                Some(lib) => Ok(Backend::Faketime(lib)),
                None => Err(format!(
                    "{vdso}, and libfaketime, the fallback, is not installed (apt-get install \
                     libfaketime)"
                )),
            },
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Vdso => "vdso",
            Backend::Faketime(_) => "libfaketime",
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

/// A clock set by an agent on the node's own host (the ssh runtime: lockpick's binary there,
/// `lockpick clock-agent set`, writes the node's control page). Each call is one round trip.
pub trait RemoteClock: Send + Sync + std::fmt::Debug {
    /// Sets the clocks of `scope` to `offset_ns` from the true time, running `rate` times as
    /// fast from now on.
    fn set(&self, scope: ClockScope, offset_ns: i64, rate: f64) -> io::Result<()>;
}

/// One node's clock: what a clock fault changes, through the node's backend.
#[derive(Debug)]
pub struct NodeClock {
    sink: Sink,
}

#[derive(Debug)]
enum Sink {
    /// libfaketime's control file and what it currently says.
    Faketime(FaketimeFile),
    /// The node's control page, and which clocks a change moves.
    Page {
        page: Arc<ControlPage>,
        scope: ClockScope,
    },
    /// A page on another host, through its agent, and what it was last set to (the offset
    /// at `at`, and the rate since).
    Remote {
        clock: Arc<dyn RemoteClock>,
        scope: ClockScope,
        offset_ns: i64,
        rate: f64,
        at: Instant,
    },
}

const NS_PER_S: f64 = 1e9;

impl NodeClock {
    /// A clock through libfaketime: creates the control file with a true clock (`+0`).
    pub fn create(control: PathBuf, origin: Instant) -> io::Result<NodeClock> {
        Ok(NodeClock {
            sink: Sink::Faketime(FaketimeFile::create(control, origin)?),
        })
    }

    /// A clock through the vDSO: creates the control page at `path`, every clock true. The
    /// node's processes are patched to follow it when they start ([`NodeClock::page`]).
    pub fn create_page(path: &Path, scope: ClockScope) -> Result<NodeClock, vclock::Error> {
        Ok(NodeClock {
            sink: Sink::Page {
                page: Arc::new(ControlPage::create(path)?),
                scope,
            },
        })
    }

    /// A clock on another host, set through `clock`, true for now.
    pub fn remote(clock: Arc<dyn RemoteClock>, scope: ClockScope) -> NodeClock {
        NodeClock {
            sink: Sink::Remote {
                clock,
                scope,
                offset_ns: 0,
                rate: 1.0,
                at: Instant::now(),
            },
        }
    }

    /// The control page, for the vDSO backend.
    pub fn page(&self) -> Option<Arc<ControlPage>> {
        match &self.sink {
            Sink::Page { page, .. } => Some(page.clone()),
            Sink::Faketime(_) | Sink::Remote { .. } => None,
        }
    }

    /// The libfaketime control file, for that backend.
    pub fn control(&self) -> Option<&Path> {
        match &self.sink {
            Sink::Faketime(f) => Some(&f.control),
            Sink::Page { .. } | Sink::Remote { .. } => None,
        }
    }

    /// The offset the node's (wall) clock has now, in seconds.
    pub fn offset_s(&self, now: Instant) -> f64 {
        match &self.sink {
            Sink::Faketime(f) => f.offset_s(now),
            Sink::Page { page, .. } => {
                page.offset_ns(vclock::page::CLOCK_REALTIME) as f64 / NS_PER_S
            }
            Sink::Remote {
                offset_ns,
                rate,
                at,
                ..
            } => {
                *offset_ns as f64 / NS_PER_S
                    + (rate - 1.0) * now.saturating_duration_since(*at).as_secs_f64()
            }
        }
    }

    pub fn rate(&self) -> f64 {
        match &self.sink {
            Sink::Faketime(f) => f.rate,
            Sink::Page { page, .. } => page.setting(vclock::page::CLOCK_REALTIME).rate(),
            Sink::Remote { rate, .. } => *rate,
        }
    }

    /// The node was restarted: a new process. libfaketime counts rates from a process's
    /// start, so its file is rewritten to keep the offset (and drop any rate: faults are healed
    /// before a kill); the control page needs nothing, the new process follows it as it is.
    pub fn rebase(&mut self, origin: Instant) -> io::Result<()> {
        match &mut self.sink {
            Sink::Faketime(f) => f.rebase(origin),
            Sink::Page { .. } | Sink::Remote { .. } => Ok(()),
        }
    }

    /// Jumps the clock by `delta_s` (negative: back).
    pub fn bump(&mut self, delta_s: f64) -> io::Result<()> {
        self.change(|off_s, rate| (off_s + delta_s, rate))
    }

    /// Sets the offset outright, keeping the rate.
    pub fn set_offset(&mut self, offset_s: f64) -> io::Result<()> {
        self.change(|_, rate| (offset_s, rate))
    }

    /// Makes the clock run `rate` times as fast from now on, without a jump.
    pub fn set_rate(&mut self, rate: f64) -> io::Result<()> {
        assert!(rate > 0.0, "a clock rate must be positive");
        self.change(|off_s, _| (off_s, rate))
    }

    /// Back to the true clock.
    pub fn reset(&mut self) -> io::Result<()> {
        self.change(|_, _| (0.0, 1.0))
    }

    /// The one way a clock changes: `f` maps (offset now in s, rate) to the new pair, which
    /// counts from now.
    fn change(&mut self, f: impl Fn(f64, f64) -> (f64, f64)) -> io::Result<()> {
        match &mut self.sink {
            Sink::Faketime(file) => {
                let now = Instant::now();
                let (off, rate) = f(file.offset_s(now), file.rate);
                file.set(now, off, rate)
            }
            Sink::Page { page, scope } => {
                page.change(*scope, |off_ns, rate| {
                    let (off, rate) = f(off_ns as f64 / NS_PER_S, rate);
                    ((off * NS_PER_S).round() as i64, rate)
                });
                Ok(())
            }
            Sink::Remote { .. } => {
                let now = Instant::now();
                let (off, new_rate) = {
                    let Sink::Remote { rate, .. } = &self.sink else {
                        unreachable!()
                    };
                    f(self.offset_s(now), *rate)
                };
                let Sink::Remote {
                    clock,
                    scope,
                    offset_ns,
                    rate,
                    at,
                } = &mut self.sink
                else {
                    unreachable!()
                };
                let off_ns = (off * NS_PER_S).round() as i64;
                clock.set(*scope, off_ns, new_rate)?;
                (*offset_ns, *rate, *at) = (off_ns, new_rate, now);
                Ok(())
            }
        }
    }

    /// What the node's clock really showed on its last read after now: for the vDSO backend
    /// the offset the patched code applied to its next wall-clock read, waited for up to
    /// `limit`; `None` for libfaketime (it reports nothing back) or a node that read no clock.
    pub async fn observe_offset_ms(&self, limit: std::time::Duration) -> Option<i64> {
        let Sink::Page { page, .. } = &self.sink else {
            return None;
        };
        const UNREAD: i64 = i64::MIN;
        let id = vclock::page::CLOCK_REALTIME;
        page.mark_applied(id, UNREAD);
        let deadline = Instant::now() + limit;
        // Bounded by the deadline.
        loop {
            let applied = page.applied_ns(id);
            if applied != UNREAD {
                return Some(applied.div_euclid(1_000_000));
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}

/// libfaketime's control file.
///
/// libfaketime reads `+O xR` as "offset O seconds, and since the process started the clock runs
/// R times as fast", so a rate applies from the process's start, not from when it was written.
/// To switch rates without a jump, the offset written is chosen so the faked clock is
/// continuous at the moment of the switch (to within the few ms between our record of the
/// spawn and libfaketime's own).
#[derive(Debug)]
struct FaketimeFile {
    control: PathBuf,
    /// The `O` last written.
    base_s: f64,
    /// The `R` last written.
    rate: f64,
    /// When the node's current process started (libfaketime's origin for rates).
    origin: Instant,
}

impl FaketimeFile {
    fn create(control: PathBuf, origin: Instant) -> io::Result<FaketimeFile> {
        let f = FaketimeFile {
            control,
            base_s: 0.0,
            rate: 1.0,
            origin,
        };
        f.write()?;
        Ok(f)
    }

    fn offset_s(&self, now: Instant) -> f64 {
        self.base_s + (self.rate - 1.0) * now.saturating_duration_since(self.origin).as_secs_f64()
    }

    fn rebase(&mut self, origin: Instant) -> io::Result<()> {
        let off = self.offset_s(Instant::now());
        self.origin = origin;
        self.base_s = off;
        self.rate = 1.0;
        self.write()
    }

    /// Offset `off_s` at `now`, rate `rate` from then on.
    fn set(&mut self, now: Instant, off_s: f64, rate: f64) -> io::Result<()> {
        let since = now.saturating_duration_since(self.origin).as_secs_f64();
        self.base_s = off_s - (rate - 1.0) * since;
        self.rate = rate;
        self.write()
    }

    /// The control file's text for the current state.
    fn spec(&self) -> String {
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

/// What a node needs, before it first starts, for its clock to follow a [`NodeClock`].
pub struct Hookup {
    /// Environment for every start (libfaketime's preload and control file).
    pub env: Vec<(String, String)>,
    /// The control page its processes are patched to read (vDSO backend).
    pub page: Option<Arc<ControlPage>>,
}

/// Before a node first starts, when the run's faults move clocks: its control page or file,
/// true for now, and what makes the node's clock follow it.
pub fn prepare_node(
    node_dir: &Path,
    backend: &Backend,
    scope: ClockScope,
) -> Result<(NodeClock, Hookup), crate::Error> {
    std::fs::create_dir_all(node_dir)?;
    match backend {
        Backend::Vdso => {
            let clock = NodeClock::create_page(&node_dir.join("clock.page"), scope)
                .map_err(|e| crate::Error::msg(e.to_string()))?;
            let page = clock.page();
            Ok((
                clock,
                Hookup {
                    env: Vec::new(),
                    page,
                },
            ))
        }
        Backend::Faketime(lib) => {
            let control = node_dir.join("faketime.ctl");
            let clock = NodeClock::create(control.clone(), Instant::now())?;
            let env = faketime_env(lib, &control, scope);
            Ok((clock, Hookup { env, page: None }))
        }
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
        let control = c.control().unwrap().to_path_buf();
        assert_eq!(std::fs::read_to_string(&control).unwrap(), "+0.000\n");
        let spec = || {
            std::fs::read_to_string(&control)
                .unwrap()
                .trim_end()
                .to_string()
        };
        c.bump(10.0).unwrap();
        assert_eq!(spec(), "+10.000");
        c.bump(-15.5).unwrap();
        assert_eq!(spec(), "-5.500");
        // Switching rate keeps the offset where it was (continuity), then it grows.
        let before = c.offset_s(Instant::now());
        c.set_rate(2.0).unwrap();
        let after = c.offset_s(Instant::now());
        assert!((after - before).abs() < 0.05, "{before} -> {after}");
        assert!(spec().ends_with(" x2.0000"), "{}", spec());
        // base = off - (rate-1) * ~10 s since the origin.
        let base: f64 = spec().split_whitespace().next().unwrap().parse().unwrap();
        assert!(base < -15.0 && base > -15.6, "{base}");
        c.reset().unwrap();
        assert_eq!(spec(), "+0.000");
        assert_eq!("all".parse::<ClockScope>().unwrap(), ClockScope::All);
        assert!("both".parse::<ClockScope>().is_err());
    }

    #[test]
    fn a_page_clock_moves_the_scope_it_was_made_with() {
        let dir = tempfile::tempdir().unwrap();
        let mut c =
            NodeClock::create_page(&dir.path().join("clock.page"), ClockScope::Wall).unwrap();
        let page = c.page().unwrap();
        c.bump(10.0).unwrap();
        assert!((c.offset_s(Instant::now()) - 10.0).abs() < 0.01);
        assert_eq!(page.offset_ns(vclock::page::CLOCK_MONOTONIC), 0);
        let before = c.offset_s(Instant::now());
        c.set_rate(2.0).unwrap();
        assert!((c.offset_s(Instant::now()) - before).abs() < 0.01);
        assert!((c.rate() - 2.0).abs() < 1e-6);
        c.set_offset(-3.0).unwrap();
        assert!((c.offset_s(Instant::now()) + 3.0).abs() < 0.01);
        c.reset().unwrap();
        assert_eq!(
            page.setting(vclock::page::CLOCK_REALTIME),
            vclock::Setting {
                t0_ns: page.setting(vclock::page::CLOCK_REALTIME).t0_ns,
                off_ns: 0,
                excess_q32: 0,
            }
        );
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
