//! [`run_to_end`]: a command the harness runs to completion (not a node): `lockpick shrink`
//! reruns `lockpick run` this way. Forked like every node, by the spawner thread, in its own
//! process group with `PR_SET_PDEATHSIG = SIGKILL`, so it never outlives the harness.

use crate::spawner;
use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::fs::File;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a one-shot command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (the number).
    Signalled(i32),
    /// It ran past its limit; its process group was killed.
    TimedOut,
    /// `interrupt` asked it to stop: it got SIGTERM, then exited (or was killed 30 s later).
    Interrupted,
}

/// Runs `program args` with stdout and stderr appended to `log`, no stdin, and waits for it.
/// Past `limit` its whole process group gets SIGKILL. When `interrupt()` turns true, the
/// command gets SIGTERM (a `lockpick run` then heals, checks what it recorded and exits) and
/// 30 s more before SIGKILL.
pub async fn run_to_end(
    program: &Path,
    args: &[String],
    log: &Path,
    limit: Duration,
    interrupt: impl Fn() -> bool,
) -> io::Result<Ended> {
    let out = File::options().create(true).append(true).open(log)?;
    let err = out.try_clone()?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    let pid = spawner::spawn(command).await?;
    let started = Instant::now();
    let mut term_sent: Option<Instant> = None;
    // Bounded: by `limit`, or 30 s after an interrupt.
    loop {
        let status = waitpid(pid, Some(WaitPidFlag::WNOHANG));
        if !matches!(status, Ok(WaitStatus::StillAlive)) {
            // Whatever the command left behind in its group goes with it (the group id stays
            // reserved while any member lives, so this reaches nobody else).
            let _ = killpg(pid, Signal::SIGKILL);
        }
        match status {
            Ok(WaitStatus::Exited(_, code)) => {
                return Ok(if term_sent.is_some() {
                    Ended::Interrupted
                } else {
                    Ended::Exited(code)
                })
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                return Ok(if term_sent.is_some() {
                    Ended::Interrupted
                } else {
                    Ended::Signalled(sig as i32)
                })
            }
            Ok(_) => {}
            Err(Errno::ECHILD) => return Ok(Ended::Exited(-1)),
            Err(e) => return Err(e.into()),
        }
        let now = Instant::now();
        if now.duration_since(started) > limit
            || term_sent.is_some_and(|t| now.duration_since(t) > Duration::from_secs(30))
        {
            kill_group(pid);
            return Ok(if term_sent.is_some() {
                Ended::Interrupted
            } else {
                Ended::TimedOut
            });
        }
        if term_sent.is_none() && interrupt() {
            let _ = kill(pid, Signal::SIGTERM);
            term_sent = Some(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn kill_group(pid: Pid) {
    let _ = killpg(pid, Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(5);
    // Bounded by the deadline.
    while Instant::now() < deadline {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(5)),
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn exit_codes_logs_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let sh = Path::new("/bin/sh");
        let args = |s: &str| vec!["-c".to_string(), s.to_string()];
        let r = run_to_end(
            sh,
            &args("echo hi; echo there >&2; exit 3"),
            &log,
            Duration::from_secs(10),
            || false,
        )
        .await
        .unwrap();
        assert_eq!(r, Ended::Exited(3));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("hi") && text.contains("there"), "{text}");
        let t = Instant::now();
        let r = run_to_end(
            sh,
            &args("sleep 30"),
            &log,
            Duration::from_millis(300),
            || false,
        )
        .await
        .unwrap();
        assert_eq!(r, Ended::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(5));
        let r = run_to_end(
            sh,
            &args("trap 'exit 0' TERM; sleep 30 & wait"),
            &log,
            Duration::from_secs(20),
            || true,
        )
        .await
        .unwrap();
        assert_eq!(r, Ended::Interrupted);
    }
}
