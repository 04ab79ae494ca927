//! Per-process clock control: patch a running process's vDSO clock functions through ptrace,
//! so its clocks follow a control page lockpick writes.
//!
//! - [`patch`] stops every thread of a process (`PTRACE_SEIZE` + `PTRACE_INTERRUPT`), makes it
//!   map a page of our code ([`hook::CODE`]) and the control file (`MAP_SHARED`), rewrites the
//!   entries of `__vdso_clock_gettime`, `__vdso_gettimeofday` and `__vdso_time` with a jump to
//!   that code, and lets the process go. The hooks read the true clock through the vDSO's own
//!   `clock_gettime` (its first instructions relocated into a trampoline) where they can, else
//!   through the system call ([`hook`]). It is held for milliseconds, once; from then on its
//!   clocks are a function of the control page.
//! - [`ControlPage`] ([`page`]): the shared page. A bump, a strobe, a fast or slow clock is a
//!   store into it ([`ControlPage::change`]); the target sees it on its next clock read, with
//!   no stop and no system call in the target. Clocks are set per id, so a scope of wall
//!   clocks leaves the monotonic ones true ([`ClockScope`]).
//! - [`unpatch`] puts the original vDSO bytes back (the code page stays mapped, unused);
//!   [`ControlPage::reset`] alone already gives the target its true clocks back.
//! - [`elf`]: the vDSO's dynamic symbols; [`process`]: /proc reads, and the permission check.
//!
//! Reach: every program that reads time through the vDSO — glibc's `clock_gettime`,
//! `gettimeofday` and `time` (C, Rust's std, Python, the JVM), Go's runtime (which calls the
//! vDSO directly), static binaries. Not reached: a program that makes the clock system call
//! itself, and children exec'd after the patch (an exec maps a fresh vDSO; a fork inherits
//! the patch and the page).
//!
//! Supported: x86_64 only (its hooks are x86_64 code); elsewhere [`patch`] refuses with
//! [`Error::UnsupportedArch`]. Refusals up front: no ptrace permission (Yama's
//! `ptrace_scope`, CAP_SYS_PTRACE), a stopped target, a vDSO without the symbols.
//!
//! Invariants: the tracer never leaves a process stopped or traced — every thread is detached
//! on every path out of [`patch`] and [`unpatch`], errors included, and a tracer that dies is
//! detached by the kernel; every wait is bounded (a second per thread); a target is never
//! attached while it is stopped (a paused node belongs to the nemesis).

pub mod elf;
pub mod hook;
pub mod page;
pub mod process;
mod trace;

pub use page::{clocks_of, ControlPage, Setting};

use std::path::PathBuf;

/// Which clocks a clock fault moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockScope {
    /// Only the wall clocks (realtime and its coarse, alarm and TAI variants).
    Wall,
    /// The monotonic and boot-time clocks too: what a service's timers see.
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

impl std::fmt::Display for ClockScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ClockScope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "wall" => Ok(ClockScope::Wall),
            "all" => Ok(ClockScope::All),
            _ => Err(format!("unknown clock scope {s:?} (expected wall or all)")),
        }
    }
}

/// Whether this machine can patch processes' clocks, and if not, why (the architecture, or
/// ptrace permission as far as it can be told without a target).
pub fn available() -> Result<(), String> {
    if !cfg!(target_arch = "x86_64") {
        return Err(format!(
            "vDSO clock control is implemented for x86_64 only, not {}",
            std::env::consts::ARCH
        ));
    }
    process::ptrace_permission()
}

/// Every failure of patching, each naming the process and what failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("vDSO clock control is implemented for x86_64 only, not {arch}")]
    UnsupportedArch { arch: &'static str },
    #[error("cannot trace process {pid}: {reason}")]
    Permission { pid: i32, reason: String },
    #[error("process {pid} is stopped (state {state}): refusing to attach to a paused process")]
    TargetStopped { pid: i32, state: char },
    #[error("process {pid} exited while its clock was being patched")]
    Exited { pid: i32 },
    #[error("process {pid} has no [vdso] mapping")]
    NoVdso { pid: i32 },
    #[error("process {pid}: its vDSO cannot be patched: {reason}")]
    Vdso { pid: i32, reason: String },
    #[error("process {pid} has more than {limit} threads")]
    TooManyThreads { pid: i32, limit: usize },
    #[error("process {pid}: {what} failed: {source}")]
    Ptrace {
        pid: i32,
        what: &'static str,
        source: nix::errno::Errno,
    },
    #[error("process {pid}: {what} took too long (limit {waited_ms} ms; {state})")]
    Timeout {
        pid: i32,
        what: &'static str,
        waited_ms: u64,
        /// What the kernel said the thread was doing then (`thread 812: state D, in
        /// jbd2_log_wait_commit`): an uninterruptible sleep cannot be stopped until it ends.
        state: String,
    },
    #[error("process {pid}: {what} did not settle after {attempts} attempts")]
    Unsettled {
        pid: i32,
        what: &'static str,
        attempts: usize,
    },
    #[error("process {pid}: the injected {call} failed with errno {errno}")]
    Injected {
        pid: i32,
        call: &'static str,
        errno: i64,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The vDSO functions patched, by symbol, and the hook each jumps to. `clock_gettime` must be
/// there; the others are patched where the kernel offers them.
const TARGETS: [(&str, usize, bool); 3] = [
    ("__vdso_clock_gettime", hook::CLOCK_GETTIME, true),
    ("__vdso_gettimeofday", hook::GETTIMEOFDAY, false),
    ("__vdso_time", hook::TIME, false),
];

/// `movabs rax, imm64; jmp rax`: 12 bytes that reach any address. rax is free at a function's
/// entry (it carries no argument).
const JUMP_BYTES: usize = hook::ENTRY_BYTES;

fn jump_to(target: u64) -> [u8; JUMP_BYTES] {
    let mut code = [0u8; JUMP_BYTES];
    code[0] = 0x48; // REX.W
    code[1] = 0xb8; // mov rax, imm64
    code[2..10].copy_from_slice(&target.to_le_bytes());
    code[10] = 0xff; // jmp rax (ff /4, modrm e0)
    code[11] = 0xe0;
    code
}

/// One patched function: where, and what was there.
#[derive(Debug, Clone)]
pub struct PatchedFn {
    pub symbol: &'static str,
    pub addr: u64,
    pub original: [u8; JUMP_BYTES],
}

/// What [`patch`] did to a process, enough to undo it.
#[derive(Debug, Clone)]
pub struct Patch {
    pub pid: i32,
    /// The code page in the target.
    pub code_addr: u64,
    /// The control page's mapping in the target.
    pub page_addr: u64,
    pub functions: Vec<PatchedFn>,
    /// Whether the hooks read the true clock through the vDSO's own function (a trampoline
    /// past its relocated entry) rather than the system call.
    pub fast: bool,
}

/// How [`patch`] found the process.
#[derive(Debug, Clone)]
pub enum Patched {
    /// Patched now.
    Now(Patch),
    /// Its vDSO already jumps to a hook: it was patched before, or forked from a patched
    /// process (and so maps the same control page).
    Already,
}

// Linux x86_64 mmap/mprotect/open constants (uapi), for the injected calls.
const PROT_READ: u64 = 1;
const PROT_WRITE: u64 = 2;
const PROT_EXEC: u64 = 4;
const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_ANONYMOUS: u64 = 0x20;
const O_RDWR: u64 = 2;
const O_CLOEXEC: u64 = 0o2000000;
const AT_FDCWD: i64 = -100;
const PAGE: u64 = page::PAGE_BYTES as u64;
/// The longest control file path the code page has room for.
const MAX_PATH_BYTES: usize = 1024;

/// Patches process `pid` so its clocks follow the control page at `page` (a file made by
/// [`ControlPage::create`]; the path must be visible to the target as it is to us).
pub fn patch(pid: i32, page: &ControlPage) -> Result<Patched, Error> {
    if !cfg!(target_arch = "x86_64") {
        return Err(Error::UnsupportedArch {
            arch: std::env::consts::ARCH,
        });
    }
    let path_c = control_path(page)?;
    // The mapping is read only once the process is held: a process that was just spawned may
    // still be inside an exec (a shell exec'ing the service), which moves the vDSO, and
    // reading the old address would fail with EIO. A held process cannot exec.
    let stopped = trace::Stopped::stop(pid)?;
    let (vdso, vdso_end) = process::vdso_range(pid)?;
    let image = stopped.peek(vdso, (vdso_end - vdso) as usize)?;
    let found = vdso_targets(pid, &image)?;
    // Already patched: the entry starts with our `movabs rax` ... `jmp rax`.
    let (_, _, first) = found[0];
    let head = &image[first.offset as usize..first.offset as usize + JUMP_BYTES];
    if head[0..2] == [0x48, 0xb8] && head[10..12] == [0xff, 0xe0] {
        return Ok(Patched::Already);
    }

    let call = |nr: i64, name: &'static str, args: [u64; 6]| -> Result<u64, Error> {
        let r = stopped.syscall(vdso, nr, args)?;
        if (-4095..0).contains(&r) {
            return Err(Error::Injected {
                pid,
                call: name,
                errno: -r,
            });
        }
        Ok(r as u64)
    };
    let (code_addr, page_addr) = map_pages(&stopped, &call, &path_c)?;
    let entry = first.offset as usize;
    let entry_bytes = &image[entry..(entry + 32).min(image.len())];
    let (code, fast) = hook::code_page(page_addr, code_addr, vdso + first.offset, entry_bytes);
    stopped.poke(code_addr, &code)?;
    call(
        libc::SYS_mprotect,
        "mprotect of the code page",
        [code_addr, PAGE, PROT_READ | PROT_EXEC, 0, 0, 0],
    )?;
    let functions = jump_to_hooks(&stopped, vdso, &image, found, code_addr)?;
    drop(stopped);
    Ok(Patched::Now(Patch {
        pid,
        code_addr,
        page_addr,
        functions,
        fast,
    }))
}

/// Overwrites each found vDSO function's entry with a jump to its hook on the code page at
/// `code_addr`: what each entry held, to undo it.
fn jump_to_hooks(
    stopped: &trace::Stopped,
    vdso: u64,
    image: &[u8],
    found: Vec<(&'static str, usize, elf::Symbol)>,
    code_addr: u64,
) -> Result<Vec<PatchedFn>, Error> {
    let mut functions = Vec::with_capacity(found.len());
    for (symbol, entry, sym) in found {
        let addr = vdso + sym.offset;
        let mut original = [0u8; JUMP_BYTES];
        original.copy_from_slice(&image[sym.offset as usize..sym.offset as usize + JUMP_BYTES]);
        // A thread paused inside the bytes we replace would resume mid-instruction.
        stopped.step_out_of(addr + 1, addr + JUMP_BYTES as u64)?;
        stopped.poke(addr, &jump_to(code_addr + entry as u64))?;
        functions.push(PatchedFn {
            symbol,
            addr,
            original,
        });
    }
    Ok(functions)
}

/// The control file's canonical path, NUL-terminated for the injected `openat`: one the code
/// page has room for.
fn control_path(page: &ControlPage) -> Result<Vec<u8>, Error> {
    let path = page.path().canonicalize().map_err(|source| Error::Io {
        path: page.path().to_path_buf(),
        source,
    })?;
    let path_bytes = path.as_os_str().as_encoded_bytes();
    if path_bytes.len() >= MAX_PATH_BYTES {
        return Err(Error::Io {
            path: path.clone(),
            source: std::io::Error::other("control file path too long for the code page"),
        });
    }
    let mut path_c = path_bytes.to_vec();
    path_c.push(0);
    Ok(path_c)
}

/// The [`TARGETS`] the vDSO `image` of `pid` has, in their order, each with its symbol: long
/// enough for the jump, and `clock_gettime` (the first) always among them.
fn vdso_targets(pid: i32, image: &[u8]) -> Result<Vec<(&'static str, usize, elf::Symbol)>, Error> {
    let vdso_err = |reason: String| Error::Vdso { pid, reason };
    elf::check_x86_64(image).map_err(vdso_err)?;
    let mut found = Vec::new();
    for (symbol, entry, required) in TARGETS {
        match elf::find_symbol(image, symbol).map_err(vdso_err)? {
            Some(sym) if sym.size >= JUMP_BYTES as u64 => found.push((symbol, entry, sym)),
            Some(sym) => {
                return Err(vdso_err(format!(
                    "{symbol} is {} bytes, too short for a {JUMP_BYTES}-byte jump",
                    sym.size
                )))
            }
            None if required => return Err(vdso_err(format!("no symbol {symbol}"))),
            None => {}
        }
    }
    // The patch reads the first target's entry: it is the required clock_gettime.
    debug_assert!(found.first().is_some_and(|f| f.0 == TARGETS[0].0));
    Ok(found)
}

/// Maps, in the held process, a private page for the hook code (the control file's path,
/// `path_c`, written into it for the `openat`) and the control file itself, shared: their
/// addresses, code page first. `call` makes a system call in the process.
fn map_pages(
    stopped: &trace::Stopped,
    call: &impl Fn(i64, &'static str, [u64; 6]) -> Result<u64, Error>,
    path_c: &[u8],
) -> Result<(u64, u64), Error> {
    debug_assert!(path_c.ends_with(&[0]), "the path is NUL-terminated");
    let anon = MAP_PRIVATE | MAP_ANONYMOUS;
    let code_addr = call(
        libc::SYS_mmap,
        "mmap of the code page",
        [0, PAGE, PROT_READ | PROT_WRITE, anon, u64::MAX, 0],
    )?;
    stopped.poke(code_addr + hook::PATH_OFFSET as u64, path_c)?;
    let fd = call(
        libc::SYS_openat,
        "openat of the control file",
        [
            AT_FDCWD as u64,
            code_addr + hook::PATH_OFFSET as u64,
            O_RDWR | O_CLOEXEC,
            0,
            0,
            0,
        ],
    )?;
    let mapped = call(
        libc::SYS_mmap,
        "mmap of the control file",
        [0, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0],
    );
    // The mapping holds the file; the descriptor is closed whether or not mmap worked.
    call(libc::SYS_close, "close", [fd, 0, 0, 0, 0, 0])?;
    Ok((code_addr, mapped?))
}

/// Patches every process of process group `pgid` that is not patched yet (a node's command
/// may be a shell whose child is the service); returns how many were patched now. A member
/// that exits meanwhile is skipped; a group whose leader is gone is [`Error::Exited`].
pub fn patch_group(pgid: i32, page: &ControlPage) -> Result<usize, Error> {
    let mut patched = 0;
    for pid in process::group_members(pgid)? {
        match patch(pid, page) {
            Ok(Patched::Now(_)) => patched += 1,
            Ok(Patched::Already) => {}
            // A member without a vDSO is a zombie or a kernel oddity: nothing reads a clock.
            Err(Error::Exited { .. }) | Err(Error::NoVdso { .. }) if pid != pgid => {}
            Err(e) => return Err(e),
        }
    }
    Ok(patched)
}

/// Puts the original vDSO bytes back: the process reads its clocks as before the patch (the
/// code and control pages stay mapped, unused: a thread may still be inside the hook).
pub fn unpatch(patch: &Patch) -> Result<(), Error> {
    let stopped = trace::Stopped::stop(patch.pid)?;
    for f in &patch.functions {
        stopped.step_out_of(f.addr + 1, f.addr + JUMP_BYTES as u64)?;
        stopped.poke(f.addr, &f.original)?;
    }
    debug_assert_eq!(stopped.pid(), patch.pid);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_encodes_movabs_rax_then_jmp_rax() {
        let j = jump_to(0x1122_3344_5566_7788);
        assert_eq!(
            j,
            [0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xff, 0xe0]
        );
    }
}
