//! Read-only looks at processes: what state a pid is in, whether a group still has members.

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `T` stopped, `Z` zombie, ...), or
/// `None` if there is no such process.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself contain `)` or spaces:
    // the state is the first field after the last `)`.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().next()?.chars().next()
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`, in clock ticks since
/// boot): with the pid, it names one process, so a pid reused later is not taken for it (the
/// state files of the runtimes record both).
pub(crate) fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses; fields after the last
    // `)` start at field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether process group `pgid` still has a member (a zombie counts). Sends no signal:
/// `killpg` with signal 0 only checks existence and permission.
pub fn process_group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    if raw <= 1 {
        // 0 and 1 would mean "our own group" / init's: never a node's group.
        return false;
    }
    match killpg(Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        // EPERM: it exists but is not ours.
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_running() {
        let state = process_state(std::process::id()).unwrap();
        assert!(matches!(state, 'R' | 'S'), "{state}");
    }

    #[test]
    fn missing_process_has_no_state() {
        // Above the kernel's pid_max limit (2^22), so never a live pid.
        assert_eq!(process_state(4_194_305), None);
        assert!(!process_group_alive(4_194_305));
        assert!(!process_group_alive(0));
    }
}
