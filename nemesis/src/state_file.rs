//! What the runtimes' state files (netns, ssh) share: written whole or not at all, and
//! refused for cleanup while the run that wrote them is alive. Each runtime keeps its own
//! schema and its own error type; these return the failed step and its reason for it to wrap.

use std::path::{Path, PathBuf};

/// Writes `value` as pretty JSON beside `path`, then renames it into place, so a reader (a
/// later `lockpick cleanup`) never sees half a file. On failure: what could not be done, and why.
pub(crate) fn write_json<T: serde::Serialize>(
    path: &Path,
    value: &T,
) -> Result<(), (&'static str, String)> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| ("encode", e.to_string()))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, json).map_err(|e| ("write", e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| ("rename into place", e.to_string()))
}

/// Whether the run that wrote a state file (its pid and start time) is still running and is
/// not this process: its own teardown will clean up, so a cleanup must not race it. Without a
/// recorded start time the pid may have been reused, so the run counts as gone.
pub(crate) fn other_run_alive(pid: i32, start_ticks: Option<u64>) -> bool {
    pid != std::process::id() as i32
        && start_ticks.is_some()
        && crate::process::start_ticks(pid) == start_ticks
}
