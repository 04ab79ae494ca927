//! What the runtimes' state files (netns, ssh) share: written whole or not at all, refused for
//! cleanup while the run that wrote them is alive, and one error type for both
//! ([`StateFileError`], which each runtime's error wraps). Each runtime keeps its own schema.

use std::path::{Path, PathBuf};

/// A state file that could not be used, or whose run is still alive.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("state file {path}: cannot {what}: {reason}")]
    Io {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
    #[error(
        "state file {path} belongs to run pid {pid}, which is still alive; stop it first \
         (its own teardown cleans up)"
    )]
    RunAlive { path: PathBuf, pid: i32 },
}

impl StateFileError {
    /// `what` could not be done with the state file at `path`, because of `reason`.
    pub(crate) fn io(path: &Path, what: &'static str, reason: impl ToString) -> StateFileError {
        StateFileError::Io {
            path: path.to_path_buf(),
            what,
            reason: reason.to_string(),
        }
    }
}

/// Writes `value` as pretty JSON beside `path`, then renames it into place, so a reader (a
/// later `lockpick cleanup`) never sees half a file.
pub(crate) fn write_json<T: serde::Serialize>(
    path: &Path,
    value: &T,
) -> Result<(), StateFileError> {
    let err = |what| move |e: std::io::Error| StateFileError::io(path, what, e);
    let json =
        serde_json::to_vec_pretty(value).map_err(|e| StateFileError::io(path, "encode", e))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, json).map_err(err("write"))?;
    std::fs::rename(&tmp, path).map_err(err("rename into place"))
}

/// Refuses, with [`StateFileError::RunAlive`], a cleanup from the state file at `path` while
/// the run that wrote it is alive ([`other_run_alive`]).
pub(crate) fn refuse_if_alive(
    path: &Path,
    pid: i32,
    start_ticks: Option<u64>,
) -> Result<(), StateFileError> {
    if other_run_alive(pid, start_ticks) {
        return Err(StateFileError::RunAlive {
            path: path.to_path_buf(),
            pid,
        });
    }
    Ok(())
}

/// Whether the run that wrote a state file (its pid and start time) is still running and is
/// not this process: its own teardown will clean up, so a cleanup must not race it. Without a
/// recorded start time the pid may have been reused, so the run counts as gone.
pub(crate) fn other_run_alive(pid: i32, start_ticks: Option<u64>) -> bool {
    pid != std::process::id() as i32
        && start_ticks.is_some()
        && crate::process::start_ticks(pid) == start_ticks
}
