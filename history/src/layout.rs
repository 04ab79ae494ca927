//! The run directory's layout and the process exit codes: names every crate agrees on.

use std::path::{Path, PathBuf};

pub const HISTORY_FILE: &str = "history.jsonl";
pub const RESULTS_FILE: &str = "results.json";
pub const SUMMARY_FILE: &str = "summary.txt";
pub const REPORT_FILE: &str = "report.html";
pub const JUNIT_FILE: &str = "junit.xml";
pub const CONFIG_FILE: &str = "config.toml";
pub const LOG_FILE: &str = "lockpick.log";
/// Lists what a run set up (children, namespaces, rules) so `lockpick cleanup` can undo it
/// after the harness was killed; removed when the run cleans up after itself.
pub const STATE_FILE: &str = "state.json";
/// Per-node folders are `nodes/<id>/` with `stdout.log`/`stderr.log` and the node's data dir.
pub const NODES_DIR: &str = "nodes";
pub const LATEST_LINK: &str = "latest";
/// `<out>/index.html`, every run and suite under an output folder; also a suite's own page.
pub const INDEX_FILE: &str = "index.html";

/// A suite's directory (`lockpick test`) sits where a run's would, `<out>/<name>/<stamp>/`,
/// and holds its verdict in `suite.json` in place of a run's results.json.
pub const SUITE_FILE: &str = "suite.json";
/// The settings every scenario of a suite runs with, in config.toml's schema.
pub const SUITE_CONFIG_FILE: &str = "base.toml";
/// A suite's scenarios are runs under `<suite>/scenarios/<scenario id>/<stamp>/`.
pub const SCENARIOS_DIR: &str = "scenarios";

/// Where a node's files go.
pub fn node_dir(run_dir: &Path, node_id: &str) -> PathBuf {
    run_dir.join(NODES_DIR).join(node_id)
}

/// Given a path to a run directory or a history file, the history file.
pub fn history_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(HISTORY_FILE)
    } else {
        path.to_path_buf()
    }
}

/// Process exit codes of every `lockpick` command that yields a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    Valid = 0,
    Invalid = 1,
    Unknown = 2,
    /// Bad flag or config, setup failure, harness crash.
    Error = 3,
}

impl ExitCode {
    pub fn code(self) -> u8 {
        self as u8
    }
}
