//! The run directory's `config.toml` and the command line that reruns a run (same seed).

use super::{RunConfig, Target};
use anyhow::{Context, Result};
use nemesis::schedule::FaultKind;

impl RunConfig {
    /// `config.toml` of the run directory: the resolved settings, with the command that reruns
    /// them on the second line. `lockpick run --config` reads it back.
    pub fn file_text(&self) -> Result<String> {
        let toml = toml::to_string_pretty(self).context("cannot serialize the resolved config")?;
        Ok(format!(
            "# Resolved configuration of this run.\n# Rerun: {}\n\n{toml}",
            self.repro_command()
        ))
    }

    /// The command line that reruns this test with the same seed.
    pub fn repro_command(&self) -> String {
        let mut c = vec![
            "lockpick run".to_string(),
            format!("--seed {}", self.seed),
            format!("--workload {}", self.workload),
            format!("--clients {}", self.clients),
            format!("--locks {}", self.locks),
            format!("--ttl {}ms", self.ttl_ms),
        ];
        if self.renew_ttl_ms != self.ttl_ms {
            c.push(format!("--renew-ttl {}ms", self.renew_ttl_ms));
        }
        c.extend([
            format!("--hold {}ms..{}ms", self.hold_min_ms, self.hold_max_ms),
            format!("--duration {}ms", self.duration_ms),
            format!("--op-timeout {}ms", self.op_timeout_ms),
            format!("--acquire-wait {}ms", self.acquire_wait_ms),
            format!(
                "--nemesis {}",
                if self.nemesis.is_empty() {
                    "none".to_string()
                } else {
                    self.nemesis.join(",")
                }
            ),
            format!("--nemesis-interval {}ms", self.nemesis_interval_ms),
        ]);
        if self.adapter != "reference" {
            c.push(format!("--adapter {}", self.adapter));
        }
        if self.adapter == "etcd" && self.etcd_api != "/v3" {
            c.push(format!("--etcd-api {}", self.etcd_api));
        }
        if let Some(f) = &self.template_file {
            // The file's [template] section is the adapter; its other keys are all spelled out
            // here as flags, which override it.
            c.push(format!(
                "--config {}",
                shell_quote(&f.display().to_string())
            ));
        }
        if self.nodes > 1 {
            c.push(format!("--nodes {}", self.nodes));
            c.push(format!("--nemesis-targets {}", self.nemesis_targets));
        }
        c.push(format!("--runtime {}", self.runtime));
        if self.faults.contains(&FaultKind::Partition) {
            c.push(format!(
                "--partition-topologies {}",
                self.partition_topologies.join(",")
            ));
        }
        if self.faults.contains(&FaultKind::ClientPause) && !self.client_faults.is_empty() {
            c.push(format!("--client-faults {}", self.client_faults.join(",")));
        }
        if self.faults.contains(&FaultKind::Clock) {
            if !self.clock_faults.is_empty() {
                c.push(format!("--clock-faults {}", self.clock_faults.join(",")));
            }
            c.push(format!("--clock-scope {}", self.clock_scope));
            c.push(format!("--clock-bump {}ms", self.clock_bump_ms));
            c.push(format!("--clock-rate {}", self.clock_rate));
        }
        if let Some(n) = self.ops_max {
            c.push(format!("--ops-max {n}"));
        }
        match &self.target {
            Target::Embedded => {}
            Target::Command { template } => c.push(format!("--node-cmd {}", shell_quote(template))),
            Target::Url { url } => c.push(format!("--url {}", shell_quote(url))),
        }
        if let Some(m) = &self.unsafe_mode {
            c.push(format!("--unsafe {m}"));
        }
        match &self.store {
            Some(Target::Embedded) => c.push(format!("--store-fence {}", self.store_fence)),
            Some(Target::Command { template }) => {
                c.push(format!("--store-cmd {}", shell_quote(template)))
            }
            Some(Target::Url { url }) => c.push(format!("--store-url {}", shell_quote(url))),
            None => {}
        }
        if self.drift > 0.0 {
            c.push(format!("--drift {}", self.drift));
        }
        c.push(format!("--liveness-grace {}ms", self.liveness_grace_ms));
        if let Some(f) = &self.schedule_file {
            c.push(format!(
                "--schedule {}",
                shell_quote(&f.display().to_string())
            ));
        }
        c.push(format!("--name {}", shell_quote(&self.name)));
        c.join(" ")
    }
}

pub(super) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
