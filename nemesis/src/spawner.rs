//! The one thread that forks every node.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not when the
//! process does. tokio worker and blocking-pool threads come and go (blocking threads retire
//! after being idle), so a child forked from one of them would be SIGKILLed at a random
//! moment mid-run. Every child is therefore forked by a single dedicated thread that never
//! returns; it only dies with the whole process, which is exactly when the children should.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::sync::oneshot;

/// Spawn requests waiting for the thread; spawning takes milliseconds, so a full queue means
/// something is badly wrong and the caller gets an error rather than a growing backlog.
const QUEUE_LEN: usize = 64;

struct Request {
    command: Command,
    reply: oneshot::Sender<io::Result<Pid>>,
}

static SPAWNER: Mutex<Option<SyncSender<Request>>> = Mutex::new(None);

fn sender() -> io::Result<SyncSender<Request>> {
    let mut guard = SPAWNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(tx) = guard.as_ref() {
        return Ok(tx.clone());
    }
    let (tx, rx) = mpsc::sync_channel::<Request>(QUEUE_LEN);
    std::thread::Builder::new()
        .name("nemesis-spawner".into())
        .spawn(move || serve(rx))?;
    *guard = Some(tx.clone());
    Ok(tx)
}

/// Never returns while the process lives: the static sender keeps the channel open.
fn serve(rx: mpsc::Receiver<Request>) {
    while let Ok(Request { mut command, reply }) = rx.recv() {
        // `Child` is dropped right away: it neither kills nor waits on drop, and the node
        // reaps its process by pid itself (with WNOWAIT peeks, which `Child` cannot do).
        let result = command
            .spawn()
            .map(|child| Pid::from_raw(child.id() as i32));
        drop(command); // closes our copies of the log file descriptors
        if let Err(Ok(pid)) = reply.send(result) {
            // The caller went away (its start future was dropped): nobody owns this child,
            // so take it down rather than leak it.
            kill_and_reap_orphan(pid);
        }
    }
}

fn kill_and_reap_orphan(pid: Pid) {
    let _ = killpg(pid, Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    // Bounded by the deadline; SIGKILL is usually reaped within a millisecond or two.
    while Instant::now() < deadline {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(2)),
            _ => return,
        }
    }
    tracing::warn!(
        pid = pid.as_raw(),
        "orphaned child not reaped within 2 s of SIGKILL"
    );
}

/// Forks `command` on the spawner thread in a new process group (pgid = its pid), with
/// `PR_SET_PDEATHSIG = SIGKILL`, and returns its pid.
pub(crate) async fn spawn(mut command: Command) -> io::Result<Pid> {
    // Own process group: pause/kill reach a whole pipeline, and the terminal's Ctrl-C (sent
    // to the foreground group) does not hit the nodes behind the harness's back; the harness
    // stops them itself.
    command.process_group(0);
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs between fork and exec, so it may only make async-signal-safe
    // calls: two raw syscalls and an io::Error built from an errno (no allocation).
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // If the harness died between fork and prctl, the death signal was never armed
            // and never will fire: we were already reparented, so bail out instead of running
            // unsupervised.
            if nix::unistd::getppid() != parent {
                return Err(Errno::ESRCH.into());
            }
            Ok(())
        });
    }
    let (reply, answer) = oneshot::channel();
    sender()?
        .try_send(Request { command, reply })
        .map_err(|e| match e {
            TrySendError::Full(_) => io::Error::other("spawner queue full"),
            TrySendError::Disconnected(_) => io::Error::other("spawner thread is gone"),
        })?;
    answer
        .await
        .map_err(|_| io::Error::other("spawner thread dropped the request"))?
}
