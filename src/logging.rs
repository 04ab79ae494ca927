//! Where the harness's own log goes: `lockpick.log` in the run directory for `run`, stderr for
//! the `lockd` and `store` servers (their node folder captures it).

use anyhow::{Context, Result};
use std::path::Path;
use tracing_subscriber::EnvFilter;

fn filter() -> EnvFilter {
    EnvFilter::try_from_env("LOCKPICK_LOG").unwrap_or_else(|_| EnvFilter::new("info"))
}

pub fn to_file(path: &Path) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    // A second run in the same process (tests) keeps the first subscriber; that is harmless.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
    Ok(())
}

/// Colour only on a terminal: a node's stderr is a log file in its run directory, where
/// escape codes are noise.
pub fn to_stderr() {
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
