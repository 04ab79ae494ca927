//! Read-only looks at a process through /proc: its threads, state and mappings.

use crate::Error;

/// `start-end` of a /proc/PID/maps line.
pub(crate) fn parse_range(line: &str) -> Option<(u64, u64)> {
    let range = line.split_whitespace().next()?;
    let (a, b) = range.split_once('-')?;
    Some((
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    ))
}

/// The `[vdso]` mapping of `pid`: start and end address.
pub(crate) fn vdso_range(pid: i32) -> Result<(u64, u64), Error> {
    let path = format!("/proc/{pid}/maps");
    let maps = std::fs::read_to_string(&path).map_err(|source| gone_or_io(pid, &path, source))?;
    maps.lines()
        .find(|l| l.ends_with("[vdso]"))
        .and_then(parse_range)
        .ok_or(Error::NoVdso { pid })
}

/// The thread ids of `pid` now.
pub(crate) fn threads(pid: i32) -> Result<Vec<i32>, Error> {
    let path = format!("/proc/{pid}/task");
    let dir = std::fs::read_dir(&path).map_err(|source| gone_or_io(pid, &path, source))?;
    let mut tids: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The processes of process group `pgid`, the leader first (a scan of /proc; members that
/// vanish during it are left out).
pub fn group_members(pgid: i32) -> Result<Vec<i32>, Error> {
    let dir = std::fs::read_dir("/proc").map_err(|source| Error::Io {
        path: "/proc".into(),
        source,
    })?;
    let mut members: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pgrp(pid) == Some(pgid))
        .collect();
    members.sort_unstable_by_key(|&p| (p != pgid, p));
    if members.first() != Some(&pgid) {
        return Err(Error::Exited { pid: pgid });
    }
    Ok(members)
}

/// The process group of `pid`: the third field after the command name in /proc/PID/stat.
fn pgrp(pid: i32) -> Option<i32> {
    stat_number(pid, 2)
}

/// The (real) parent of `pid`, which ptrace does not change: the second field after the
/// command name in /proc/PID/stat.
pub(crate) fn parent(pid: i32) -> Option<i32> {
    stat_number(pid, 1)
}

/// The `n`th field (0: the state) after the command name in /proc/PID/stat, as a number.
fn stat_number(pid: i32, n: usize) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(n)?
        .parse()
        .ok()
}

/// The state letter of /proc/PID/stat (`R`, `S`, `T` stopped, `t` traced, `Z`, ...).
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether thread `tid` of `pid` is exiting or gone: no /proc entry left, or its state a
/// zombie's (`Z`) or a dead task's (`X`).
pub fn thread_exiting(pid: i32, tid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) else {
        return true;
    };
    // The state follows the command name, which is in parentheses and may hold anything.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    matches!(state, Some('Z' | 'X') | None)
}

/// The pid of the process tracing `pid` (0: none), from /proc/PID/status.
pub fn tracer(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))?
        .trim()
        .parse()
        .ok()
}

fn gone_or_io(pid: i32, path: &str, source: std::io::Error) -> Error {
    match source.kind() {
        std::io::ErrorKind::NotFound => Error::Exited { pid },
        // /proc/PID/maps needs the same permission as tracing: say so, not just "EACCES".
        std::io::ErrorKind::PermissionDenied => Error::Permission {
            pid,
            reason: format!(
                "{path} is not readable by this process (another user's process, and no \
                 CAP_SYS_PTRACE)"
            ),
        },
        _ => Error::Io {
            path: path.into(),
            source,
        },
    }
}

/// Whether this process may trace others, and if not, why: Yama's `ptrace_scope` (3 forbids
/// all tracing; 2 needs CAP_SYS_PTRACE; 1 allows only descendants, which lockpick's nodes
/// are) and the capability itself.
pub fn ptrace_permission() -> Result<(), String> {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u8>().ok());
    let cap = has_cap_sys_ptrace();
    match scope {
        Some(3) => Err("ptrace is disabled: /proc/sys/kernel/yama/ptrace_scope is 3".into()),
        Some(2) if !cap => Err(
            "/proc/sys/kernel/yama/ptrace_scope is 2 and this process lacks CAP_SYS_PTRACE".into(),
        ),
        _ => Ok(()),
    }
}

/// CAP_SYS_PTRACE (bit 19) in this process's effective set.
pub fn has_cap_sys_ptrace() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
            u64::from_str_radix(hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << 19) != 0)
}
