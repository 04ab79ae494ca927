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

/// The descendants of `leader` (a node's group leader) that have left its process group: a
/// service that makes each child the leader of a session of its own (PostgreSQL's postmaster
/// does, for every backend) would otherwise stay out of reach of a signal to the group, and a
/// paused server would go on answering on its open sessions. Read before signalling: once a
/// parent is killed its children are re-parented and the tree is gone.
pub(crate) fn strays_of(leader: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // (pid, parent, group) of every process.
    let mut all: Vec<(i32, i32, i32)> = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name: state, parent, group.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut fields = stat[close + 1..].split_whitespace().skip(1);
        let parent = fields.next().and_then(|f| f.parse().ok());
        let group = fields.next().and_then(|f| f.parse().ok());
        if let (Some(parent), Some(group)) = (parent, group) {
            all.push((pid, parent, group));
        }
    }
    let mut tree = vec![leader];
    let mut strays = Vec::new();
    let mut next = 0;
    // Bounded: each process joins the tree at most once, and the tree is walked once.
    while next < tree.len() {
        let parent = tree[next];
        next += 1;
        for &(pid, p, group) in &all {
            if p == parent && !tree.contains(&pid) {
                tree.push(pid);
                if group != leader {
                    strays.push(pid);
                }
            }
        }
    }
    strays
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that made itself a session leader is found; the group's own members are not.
    #[test]
    fn a_descendant_in_a_session_of_its_own_is_a_stray() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & setsid sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let leader = child.id() as i32;
        let comm = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_default()
        };
        // Bounded: both sleeps are forked within a few ms. `setsid` makes its session before
        // it becomes `sleep`, so the stray is awaited under its final name.
        let mut strays = Vec::new();
        for _ in 0..300 {
            strays = strays_of(leader);
            if strays.len() == 1 && comm(strays[0]) == "sleep" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let named: Vec<String> = strays.iter().map(|&p| comm(p)).collect();
        // Our own child's group and the stray, by pid: nothing else is signalled.
        let _ = killpg(Pid::from_raw(leader), nix::sys::signal::Signal::SIGKILL);
        for p in &strays {
            let _ = nix::sys::signal::kill(Pid::from_raw(*p), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = child.wait();
        assert_eq!(named, vec!["sleep".to_string()], "{strays:?}");
    }

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
