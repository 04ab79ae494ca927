//! Holding a process still with ptrace, making it run system calls for us, writing its memory,
//! and letting it go.
//!
//! Rules this module keeps:
//! - It attaches with `PTRACE_SEIZE` + `PTRACE_INTERRUPT` (no SIGSTOP is sent, so the target's
//!   job-control state is never touched) and refuses a process that is already stopped: a
//!   paused node is the nemesis's, and the tracer never fights it.
//! - Every wait is bounded ([`WAIT_LIMIT`]); a thread that exits meanwhile is dropped, a
//!   process that exits ends the attach with [`Error::Exited`].
//! - [`Stopped`] detaches every thread when dropped, on every path, re-delivering any signal
//!   that arrived while the thread was held; registers and memory used for an injected call
//!   are restored first. A tracer killed outright is detached by the kernel.

use crate::process::{parent, state, threads};
use crate::Error;
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// How long one thread may take to stop, or one injected call to return. A stop normally
/// takes microseconds, but a thread inside a system call that cannot be interrupted (an fsync
/// of the service's state under heavy disk load) stops only when it returns: on two cores
/// shared with a build and a parallel test suite, waits past 1 s and then past 3 s were seen
/// (the second on an ssh host), each failing the run that patched the node. Past this the
/// patch is refused, as before.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_millis(10_000);
const WAIT_POLL: Duration = Duration::from_micros(200);
/// How long a wait trusts `waitid` alone before it also reads the thread's state in /proc.
const NOTIFY_GRACE: Duration = Duration::from_millis(100);
/// Rounds of listing /proc/PID/task until no new thread shows up (threads created while we
/// stop the others).
const THREAD_ROUNDS: usize = 50;
/// A process with more threads than this is refused rather than held for long.
const MAX_THREADS: usize = 4096;
/// Single steps allowed to move a thread out of a range about to be rewritten.
const MAX_STEPS: usize = 64;

/// Single steps allowed for an injected system call to return (a stop reported before it,
/// such as a pending interrupt, takes one).
const INJECT_STEPS: usize = 4;

/// Signals kept per thread while it is held.
const MAX_PENDING: usize = 32;

struct Thread {
    tid: Pid,
    /// Signals the thread was about to receive while we held it (each stop for one suppresses
    /// it): given back at detach, in order.
    pending: std::cell::RefCell<Vec<Signal>>,
}

/// Every thread of one process, stopped under our ptrace.
pub(crate) struct Stopped {
    pid: i32,
    threads: Vec<Thread>,
}

fn ptrace_err(pid: i32, what: &'static str) -> impl Fn(Errno) -> Error {
    move |source| Error::Ptrace { pid, what, source }
}

/// How a wait for one thread ended.
enum Waited {
    Stopped(Option<Signal>),
    Gone,
}

/// `thread T: state S, in WCHAN`, from /proc: why a thread may not be stopping (`D`, an
/// uninterruptible sleep such as a disk write, ends only when the kernel is done).
fn thread_state(pid: i32, tid: Pid) -> String {
    let dir = format!("/proc/{pid}/task/{}", tid.as_raw());
    // The state is the field after the command's closing parenthesis.
    let state = std::fs::read_to_string(format!("{dir}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string))
        })
        .unwrap_or_else(|| "unknown".into());
    let wchan = std::fs::read_to_string(format!("{dir}/wchan")).unwrap_or_default();
    match wchan.trim() {
        "" | "0" => format!("thread {}: state {state}", tid.as_raw()),
        w => format!("thread {}: state {state}, in {w}", tid.as_raw()),
    }
}

/// Whether /proc shows `tid` in a ptrace stop under this thread (state `t`, `TracerPid` us).
/// A stop whose wait notification never arrives has been seen (CI, an ssh host: the leader
/// in `ptrace_stop` for the whole limit while `waitid` said nothing): the kernel's own record
/// is then the answer.
fn traced_stop_by_us(pid: i32, tid: Pid) -> bool {
    let dir = format!("/proc/{pid}/task/{}", tid.as_raw());
    let Ok(status) = std::fs::read_to_string(format!("{dir}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let traced = field("State:").is_some_and(|s| s.starts_with('t'));
    // The tracer is a thread, not a process: `TracerPid` is the id of the thread that
    // attached, which is this one (ptrace requests must come from it), not the process's id
    // unless the main thread traces (the stop seen on CI was under a worker thread).
    let tracer = field("TracerPid:").and_then(|t| t.parse::<i32>().ok());
    let ours =
        tracer == Some(nix::unistd::gettid().as_raw()) || tracer == Some(std::process::id() as i32);
    traced && ours
}

/// Waits (bounded) for `tid` to stop. A signal-delivery stop is returned with its signal so
/// the caller can deliver it later.
///
/// Stops are taken with `waitid(WSTOPPED)`, which never consumes an exit. When this process
/// is also the target's parent (a node lockpick spawned), the leader's exit (`tid == pid`) is
/// only looked at (`WNOWAIT`): reaping it here would take its exit status from the code that
/// owns the process. Any other exit is consumed: only the tracer's wait passes it on to the
/// real parent, or releases an exited thread.
fn wait_stop(pid: i32, tid: Pid, what: &'static str) -> Result<Waited, Error> {
    let started = Instant::now();
    let deadline = started + WAIT_LIMIT;
    let ours = tid.as_raw() == pid && parent(pid) == Some(std::process::id() as i32);
    let exit_flags = if ours {
        WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT
    } else {
        WaitPidFlag::WEXITED
    };
    loop {
        match waitid(
            Id::Pid(tid),
            WaitPidFlag::WSTOPPED | WaitPidFlag::__WALL | WaitPidFlag::WNOHANG,
        ) {
            Ok(WaitStatus::StillAlive) => {}
            // PTRACE_EVENT_STOP (what PTRACE_INTERRUPT asks for, also a group-stop report) or
            // another ptrace event: stopped, nothing to re-deliver.
            Ok(WaitStatus::PtraceEvent(_, _, event)) if event != 0 => {
                return Ok(Waited::Stopped(None))
            }
            // Our single step's trap: stopped, nothing to re-deliver.
            Ok(WaitStatus::PtraceEvent(_, Signal::SIGTRAP, _))
            | Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => return Ok(Waited::Stopped(None)),
            // A signal-delivery stop: the signal is handed back for later delivery.
            Ok(WaitStatus::PtraceEvent(_, sig, _)) | Ok(WaitStatus::Stopped(_, sig)) => {
                return Ok(Waited::Stopped(Some(sig)))
            }
            Ok(_) => {}
            Err(Errno::ECHILD) => return Ok(Waited::Gone),
            Err(Errno::EINTR) => {}
            Err(source) => return Err(Error::Ptrace { pid, what, source }),
        }
        match waitid(
            Id::Pid(tid),
            exit_flags | WaitPidFlag::__WALL | WaitPidFlag::WNOHANG,
        ) {
            Ok(WaitStatus::Exited(..)) | Ok(WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => {
                return Ok(Waited::Gone)
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(source) => return Err(Error::Ptrace { pid, what, source }),
        }
        // No notification yet: after a while, ask the kernel whether the thread is stopped for
        // us all the same (a notification that never comes would otherwise cost the limit).
        if started.elapsed() >= NOTIFY_GRACE && traced_stop_by_us(pid, tid) {
            return Ok(Waited::Stopped(None));
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                pid,
                what,
                waited_ms: WAIT_LIMIT.as_millis() as u64,
                state: thread_state(pid, tid),
            });
        }
        std::thread::sleep(WAIT_POLL);
    }
}

impl Stopped {
    /// Seizes and stops every thread of `pid`.
    pub(crate) fn stop(pid: i32) -> Result<Stopped, Error> {
        match state(pid) {
            None | Some('Z') | Some('X') => return Err(Error::Exited { pid }),
            Some(s @ ('T' | 't')) => return Err(Error::TargetStopped { pid, state: s }),
            Some(_) => {}
        }
        let mut held = Stopped {
            pid,
            threads: Vec::new(),
        };
        for _ in 0..THREAD_ROUNDS {
            let fresh: Vec<i32> = threads(pid)?
                .into_iter()
                .filter(|t| !held.threads.iter().any(|h| h.tid.as_raw() == *t))
                .collect();
            if fresh.is_empty() {
                if held.threads.iter().all(|t| t.tid.as_raw() != pid) {
                    // The leader is gone (a zombie leader of live threads cannot be traced).
                    return Err(Error::Exited { pid });
                }
                return Ok(held);
            }
            if held.threads.len() + fresh.len() > MAX_THREADS {
                return Err(Error::TooManyThreads {
                    pid,
                    limit: MAX_THREADS,
                });
            }
            for t in fresh {
                held.hold(t)?;
            }
        }
        Err(Error::Unsettled {
            pid,
            what: "its thread list (threads kept appearing)",
            attempts: THREAD_ROUNDS,
        })
    }

    /// Seizes thread `t` of the process and waits for it to stop; a thread that exits
    /// meanwhile is left out (unless it is the leader: then the process is gone).
    fn hold(&mut self, t: i32) -> Result<(), Error> {
        let pid = self.pid;
        let tid = Pid::from_raw(t);
        match ptrace::seize(tid, ptrace::Options::empty()) {
            Ok(()) => {}
            // Exited between the listing and now.
            Err(Errno::ESRCH) => return Ok(()),
            // The kernel refuses to attach to a thread that is already exiting
            // (EPERM, as for a tracer it forbids): that one is gone, not forbidden.
            Err(Errno::EPERM) if crate::process::thread_exiting(pid, t) => {
                if t == pid {
                    return Err(Error::Exited { pid });
                }
                return Ok(());
            }
            Err(Errno::EPERM) => {
                return Err(Error::Permission {
                    pid,
                    reason: crate::process::ptrace_permission()
                        .err()
                        .unwrap_or_else(|| {
                            "PTRACE_SEIZE was refused (EPERM): another tracer, or \
                             no permission over this process"
                                .into()
                        }),
                })
            }
            Err(source) => {
                return Err(Error::Ptrace {
                    pid,
                    what: "PTRACE_SEIZE",
                    source,
                })
            }
        }
        // Seized: from here on, drop detaches it (it is in the list before any wait).
        self.threads.push(Thread {
            tid,
            pending: std::cell::RefCell::new(Vec::new()),
        });
        match ptrace::interrupt(tid) {
            Ok(()) => {}
            Err(Errno::ESRCH) => {
                self.threads.pop();
                return Ok(());
            }
            Err(source) => {
                return Err(Error::Ptrace {
                    pid,
                    what: "PTRACE_INTERRUPT",
                    source,
                })
            }
        }
        match wait_stop(pid, tid, "a thread stopping")? {
            Waited::Stopped(sig) => {
                let t = self.threads.last().expect("pushed");
                self.settle(t, Waited::Stopped(sig))?;
            }
            Waited::Gone => {
                self.threads.pop();
            }
        }
        Ok(())
    }

    /// After a stop: a thread that vanished ends the attach; a signal that arrived (instead of
    /// the stop asked for) is kept for detach.
    fn settle(&self, t: &Thread, waited: Waited) -> Result<(), Error> {
        match waited {
            Waited::Gone => Err(Error::Exited { pid: self.pid }),
            Waited::Stopped(Some(sig)) => {
                let mut pending = t.pending.borrow_mut();
                // A hold lasts milliseconds; the bound only guards against a signal storm.
                if pending.len() < MAX_PENDING {
                    pending.push(sig);
                }
                Ok(())
            }
            Waited::Stopped(None) => Ok(()),
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    fn leader(&self) -> Pid {
        Pid::from_raw(self.pid)
    }

    /// Reads `len` bytes at `addr` word by word (works on any readable mapping, the vDSO too).
    pub(crate) fn peek(&self, addr: u64, len: usize) -> Result<Vec<u8>, Error> {
        let start = addr & !7;
        let end = (addr + len as u64).div_ceil(8) * 8;
        let mut bytes = Vec::with_capacity((end - start) as usize);
        let mut at = start;
        while at < end {
            let word = ptrace::read(self.leader(), at as ptrace::AddressType)
                .map_err(ptrace_err(self.pid, "PTRACE_PEEKDATA"))?;
            bytes.extend_from_slice(&word.to_le_bytes());
            at += 8;
        }
        let skip = (addr - start) as usize;
        Ok(bytes[skip..skip + len].to_vec())
    }

    /// Writes `data` at `addr` word by word; partial words are read first. POKEDATA writes
    /// even read-only mappings such as the vDSO's text (the kernel copies the page for this
    /// process).
    pub(crate) fn poke(&self, addr: u64, data: &[u8]) -> Result<(), Error> {
        let start = addr & !7;
        let end = (addr + data.len() as u64).div_ceil(8) * 8;
        let mut image = self.peek(start, (end - start) as usize)?;
        let skip = (addr - start) as usize;
        image[skip..skip + data.len()].copy_from_slice(data);
        for (i, chunk) in image.chunks_exact(8).enumerate() {
            let word = i64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            ptrace::write(
                self.leader(),
                (start + 8 * i as u64) as ptrace::AddressType,
                word as _,
            )
            .map_err(ptrace_err(self.pid, "PTRACE_POKEDATA"))?;
        }
        Ok(())
    }

    /// Single-steps any thread whose instruction pointer lies in `[lo, hi)` until it leaves,
    /// so code there can be rewritten under no thread's feet.
    pub(crate) fn step_out_of(&self, lo: u64, hi: u64) -> Result<(), Error> {
        for t in &self.threads {
            for step in 0..=MAX_STEPS {
                let rip = ptrace::getregs(t.tid)
                    .map_err(ptrace_err(self.pid, "PTRACE_GETREGS"))?
                    .rip;
                if !(lo..hi).contains(&rip) {
                    break;
                }
                if step == MAX_STEPS {
                    return Err(Error::Unsettled {
                        pid: self.pid,
                        what: "a thread single-stepped out of the code being patched",
                        attempts: MAX_STEPS,
                    });
                }
                ptrace::step(t.tid, None).map_err(ptrace_err(self.pid, "PTRACE_SINGLESTEP"))?;
                self.settle(t, wait_stop(self.pid, t.tid, "a single step")?)?;
            }
        }
        Ok(())
    }

    /// Makes the leader thread run system call `nr` with `args`, executing a `syscall`
    /// instruction written at `scratch` (an address no thread runs: the vDSO's ELF header),
    /// then puts back its registers and the scratch bytes. Returns the raw result (`-errno` on
    /// failure).
    pub(crate) fn syscall(&self, scratch: u64, nr: i64, args: [u64; 6]) -> Result<i64, Error> {
        let tid = self.leader();
        let saved = ptrace::getregs(tid).map_err(ptrace_err(self.pid, "PTRACE_GETREGS"))?;
        let saved_code = self.peek(scratch, 8)?;
        // 0f 05: syscall; the rest int3 (cc), should anything ever run past it.
        self.poke(scratch, &[0x0f, 0x05, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc])?;
        let mut regs = saved;
        regs.rip = scratch;
        regs.rax = nr as u64;
        // orig_rax -1: the kernel must not treat the stop as an interrupted call to restart.
        regs.orig_rax = u64::MAX;
        regs.rdi = args[0];
        regs.rsi = args[1];
        regs.rdx = args[2];
        regs.r10 = args[3];
        regs.r8 = args[4];
        regs.r9 = args[5];
        let ran = (|| {
            ptrace::setregs(tid, regs).map_err(ptrace_err(self.pid, "PTRACE_SETREGS"))?;
            // A pending interrupt may report first: step again, a bounded number of times.
            for _ in 0..INJECT_STEPS {
                ptrace::step(tid, None).map_err(ptrace_err(self.pid, "PTRACE_SINGLESTEP"))?;
                let leader = self.threads.iter().find(|t| t.tid == tid);
                match leader {
                    Some(t) => {
                        self.settle(t, wait_stop(self.pid, tid, "an injected system call")?)?
                    }
                    None => return Err(Error::Exited { pid: self.pid }),
                }
                let after = ptrace::getregs(tid).map_err(ptrace_err(self.pid, "PTRACE_GETREGS"))?;
                if after.rip == scratch + 2 {
                    return Ok(after.rax as i64);
                }
            }
            Err(Error::Unsettled {
                pid: self.pid,
                what: "an injected system call returning",
                attempts: INJECT_STEPS,
            })
        })();
        // Put everything back whatever happened (a vanished thread makes these fail: fine).
        let restored_regs = ptrace::setregs(tid, saved);
        let restored_code = self.poke(scratch, &saved_code);
        let result = ran?;
        restored_regs.map_err(ptrace_err(self.pid, "PTRACE_SETREGS"))?;
        restored_code?;
        Ok(result)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for t in self.threads.drain(..) {
            // ESRCH: the thread is gone; nothing to let go of.
            let pending = t.pending.into_inner();
            let _ = ptrace::detach(t.tid, pending.first().copied());
            // The detach delivers one; the others are queued to the thread again.
            for sig in pending.iter().skip(1) {
                // Safety: tgkill with our target's ids; ESRCH (gone) is fine to ignore.
                unsafe {
                    libc::syscall(libc::SYS_tgkill, self.pid, t.tid.as_raw(), *sig as i32);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timeout names what the thread was doing, read from /proc; a thread that is gone says
    /// so rather than failing.
    #[test]
    fn a_threads_state_is_read_from_proc() {
        let pid = std::process::id() as i32;
        let tid = nix::unistd::gettid();
        let s = thread_state(pid, tid);
        assert!(
            s.starts_with(&format!("thread {}: state R", tid.as_raw())),
            "a running thread: {s}"
        );
        let gone = thread_state(pid, Pid::from_raw(i32::MAX));
        assert_eq!(gone, format!("thread {}: state unknown", i32::MAX));
    }
}
