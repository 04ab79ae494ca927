//! The run directory's `config.toml` and the command line that reruns a run (same seed): both
//! written from one list of the resolved settings, each written by its flag's definition
//! (`flags::RUN`), so `lockpick run --config RUN_DIR/config.toml` resolves to the same
//! settings and writes the same `config.toml`.

use super::RunConfig;
use crate::config_file::render;
use crate::flags::{self, Flag, Setting};
use anyhow::Result;

/// The first line of a run's `config.toml`.
pub const RESOLVED_HEADER: &str = "# Resolved configuration of this run.";

impl RunConfig {
    /// `config.toml` of the run directory: the resolved settings in the config file's schema,
    /// with the command that reruns them on the second line. `lockpick run --config` reads it
    /// back.
    pub fn file_text(&self) -> Result<String> {
        Ok(format!(
            "{RESOLVED_HEADER}\n# Rerun: {}\n\n{}",
            self.repro_command(),
            render(&self.settings())
        ))
    }

    /// The command line that reruns this test with the same seed.
    pub fn repro_command(&self) -> String {
        let mut c = vec!["lockpick run".to_string()];
        for (flag, value) in self.settings() {
            match value.arg() {
                // The [template] section is read from its file: `--config` names it, and every
                // other setting follows as a flag, which overrides the file.
                Some(f) if flag.rerun_as_config => {
                    c.insert(1, format!("{} {}", flags::CONFIG, shell_quote(&f)))
                }
                Some(v) => c.push(format!("{flag} {}", shell_quote(&v))),
                None => c.push(flag.to_string()),
            }
        }
        c.join(" ")
    }

    /// Every resolved setting that makes this run what it is, each flag's as its definition
    /// writes it (`Flag::write`), in the flags' order. Durations in milliseconds; settings at
    /// their "not given" value (no op budget, no replayed schedule) and those that shape
    /// nothing this run does (a partition's topologies without partition faults) are left out.
    fn settings(&self) -> Vec<(&'static Flag, Setting)> {
        flags::RUN
            .iter()
            .filter_map(|f| (f.write)(self).map(|v| (*f, v)))
            .collect()
    }
}

/// `s` as one shell word: as it is when that is safe, else in single quotes.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
