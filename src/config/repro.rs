//! The run directory's `config.toml` and the command line that reruns a run (same seed): both
//! written from one list of the resolved settings, keyed by flag, in the config schema
//! (`config_file::KEYS`), so `lockpick run --config RUN_DIR/config.toml` resolves to the same
//! settings and writes the same `config.toml`.

use super::{RunConfig, Target};
use crate::config_file::{render, Setting};
use anyhow::Result;
use nemesis::schedule::FaultKind;
use workloads::WorkloadKind;

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
            match (flag, value.arg()) {
                // The [template] section is read from its file: `--config` names it, and every
                // other setting follows as a flag, which overrides the file.
                ("--template-file", Some(f)) => {
                    c.insert(1, format!("--config {}", shell_quote(&f)))
                }
                (_, Some(v)) => c.push(format!("{flag} {}", shell_quote(&v))),
                (_, None) => c.push(flag.to_string()),
            }
        }
        c.join(" ")
    }

    /// Every resolved setting that makes this run what it is, keyed by its flag. Durations in
    /// milliseconds; settings at their "not given" value (no op budget, no replayed schedule)
    /// and those that shape nothing this run does (a partition's topologies without partition
    /// faults) are left out.
    fn settings(&self) -> Vec<(&'static str, Setting)> {
        let mut s = Vec::new();
        self.workload_settings(&mut s);
        self.service_settings(&mut s);
        self.fault_shape_settings(&mut s);
        self.client_settings(&mut s);
        self.check_settings(&mut s);
        s
    }

    /// The workload, its sizes and times, and the nemesis's faults and pace.
    fn workload_settings(&self, s: &mut Vec<(&'static str, Setting)>) {
        use Setting::*;
        s.extend([
            ("--seed", Count(self.seed)),
            ("--workload", Text(self.workload.clone())),
            ("--clients", Count(self.clients as u64)),
            ("--locks", Count(self.locks as u64)),
            ("--ttl", ms(self.ttl_ms)),
        ]);
        if self.renew_ttl_ms != self.ttl_ms {
            s.push(("--renew-ttl", ms(self.renew_ttl_ms)));
        }
        s.extend([
            (
                "--hold",
                Text(format!("{}ms..{}ms", self.hold_min_ms, self.hold_max_ms)),
            ),
            ("--duration", ms(self.duration_ms)),
            ("--op-timeout", ms(self.op_timeout_ms)),
            ("--acquire-wait", ms(self.acquire_wait_ms)),
            ("--nemesis", List(self.nemesis.clone())),
            ("--nemesis-interval", ms(self.nemesis_interval_ms)),
        ]);
    }

    /// The service, its options, and where its nodes run.
    fn service_settings(&self, s: &mut Vec<(&'static str, Setting)>) {
        use Setting::*;
        s.extend([
            ("--adapter", Text(self.adapter.clone())),
            ("--etcd-api", Text(self.etcd_api.clone())),
        ]);
        if !self.adapter_own.pairs().is_empty() {
            s.push(("--adapter-opt", List(self.adapter_own.pairs())));
        }
        if let Some(f) = &self.template_file {
            s.push(("--template-file", Text(f.display().to_string())));
        }
        if let Some(f) = &self.hosts_file {
            s.push(("--hosts-file", Text(f.display().to_string())));
        }
        s.extend([
            ("--nodes", Count(self.nodes as u64)),
            ("--nemesis-targets", Text(self.nemesis_targets.clone())),
            ("--runtime", Text(self.runtime.clone())),
        ]);
    }

    /// The shapes of the partition, client-stall and clock faults.
    fn fault_shape_settings(&self, s: &mut Vec<(&'static str, Setting)>) {
        use Setting::*;
        // Written only when asked for: a run's config.toml says what it asked to exercise, and
        // the default (every topology that cuts something) is what a rerun resolves anyway.
        if self.faults.contains(&FaultKind::Partition) && !self.partition_topologies.is_empty() {
            s.push((
                "--partition-topologies",
                List(self.partition_topologies.clone()),
            ));
        }
        if self.faults.contains(&FaultKind::ClientPause) && !self.client_faults.is_empty() {
            s.push(("--client-faults", List(self.client_faults.clone())));
        }
        if !self.clock_faults.is_empty() {
            s.push(("--clock-faults", List(self.clock_faults.clone())));
        }
        s.extend([
            ("--clock-scope", Text(self.clock_scope.clone())),
            ("--clock-bump", ms(self.clock_bump_ms)),
            ("--clock-rate", Fraction(self.clock_rate)),
        ]);
    }

    /// The op budget, the target, and how the clients arrive and order their locks.
    fn client_settings(&self, s: &mut Vec<(&'static str, Setting)>) {
        use Setting::*;
        if let Some(n) = self.ops_max {
            s.push(("--ops-max", Count(n)));
        }
        match &self.target {
            Target::Embedded => {}
            Target::Command { template } => s.push(("--node-cmd", Text(template.clone()))),
            Target::Url { url } => s.push(("--url", Text(url.clone()))),
        }
        if let Some(m) = &self.unsafe_mode {
            s.push(("--unsafe", Text(m.clone())));
        }
        if let Some(o) = &self.lock_order {
            s.push(("--lock-order", Text(o.clone())));
        }
        if self.arrivals != "steady" {
            s.push(("--arrivals", Text(self.arrivals.clone())));
        }
        // Written for the bank only: every other workload's config.toml stays as it was.
        if self.kind() == WorkloadKind::Bank {
            s.push(("--accounts", Count(self.accounts as u64)));
            s.push((
                "--lock-order-policy",
                Text(self.lock_order_policy.as_str().to_string()),
            ));
        }
    }

    /// The store, how the history is checked, and where the run goes.
    fn check_settings(&self, s: &mut Vec<(&'static str, Setting)>) {
        use Setting::*;
        match &self.store {
            // The fence is a mode of the embedded store only (clap refuses it beside the others).
            Some(Target::Embedded) | None => {
                s.push(("--store-fence", Text(self.store_fence.clone())))
            }
            Some(Target::Command { template }) => s.push(("--store-cmd", Text(template.clone()))),
            Some(Target::Url { url }) => s.push(("--store-url", Text(url.clone()))),
        }
        s.extend([
            ("--drift", Fraction(self.drift)),
            ("--liveness-grace", ms(self.liveness_grace_ms)),
            ("--startup-timeout", ms(self.startup_timeout_ms)),
            ("--fail-on", List(self.fail_on.clone())),
        ]);
        if self.no_probe {
            s.push(("--no-probe", Switch(true)));
        }
        if self.stop_on_violation {
            s.push(("--stop-on-violation", Switch(true)));
        }
        if let Some(f) = &self.schedule_file {
            s.push(("--schedule", Text(f.display().to_string())));
        }
        s.extend([
            ("--out", Text(self.out.display().to_string())),
            ("--name", Text(self.name.clone())),
        ]);
    }
}

/// A duration setting, in milliseconds.
fn ms(v: u64) -> Setting {
    Setting::Text(format!("{v}ms"))
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
