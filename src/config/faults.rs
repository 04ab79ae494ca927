//! Which faults a run performs and where its nodes run: each checked against the target, the
//! service's descriptor and this machine, refused up front with what is missing.

use super::Target;
use crate::flags::{self, RunArgs};
use anyhow::{bail, Context, Result};
use nemesis::schedule::{
    parse_fault_list, parse_topologies, Capabilities, FaultKind, Schedule, Topology,
};
use std::path::PathBuf;
use workloads::Service;

/// The faults of the run: a replayed schedule's (checked by [`load_schedule`]), `--nemesis`'s,
/// or by default every fault the target, the service and this machine allow.
pub(super) fn faults(
    a: &RunArgs,
    target: &Target,
    service: &dyn Service,
    replay: Option<&Schedule>,
) -> Result<Vec<FaultKind>> {
    Ok(match a.text(&flags::NEMESIS) {
        // A replay's faults are the schedule's, checked by load_schedule.
        _ if replay.is_some() => replay.map(|s| s.kinds()).unwrap_or_default(),
        Some(list) => {
            let faults = parse_fault_list(list).map_err(|e| anyhow::anyhow!("--nemesis: {e}"))?;
            if !target.is_started_by_us() {
                if let Some(f) = faults.iter().find(|f| f.is_server_side()) {
                    bail!(
                        "--nemesis {f}: impossible with --url (the harness did not start the \
                         service, so it cannot {f} it); use --node-cmd, or only client-pause"
                    );
                }
            }
            if let Some(f) = faults.iter().find(|f| f.moves_clocks()) {
                if let Err(why) = clock_reaches(service) {
                    bail!("--nemesis {f}: {why}");
                }
            }
            faults
        }
        None => {
            let probed = std::cell::OnceCell::new();
            let capabilities = nemesis::netns::capabilities;
            FaultKind::ALL
                .into_iter()
                .filter(|f| target.is_started_by_us() || !f.is_server_side())
                // Not where no clock backend runs, nor for a service the fallback, libfaketime,
                // does not reach (Go programs such as etcd).
                .filter(|f| !f.moves_clocks() || clock_reaches(service).is_ok())
                // Network faults only where the user chose a runtime that makes them: it needs
                // root and changes how nodes are reached, which a default should not spring on
                // anyone.
                .filter(|f| {
                    !f.needs_netns()
                        || a.text(&flags::RUNTIME)
                            .and_then(nemesis::runtime::runtime)
                            .is_some_and(|r| r.network_faults())
                })
                // Nor where the namespaces lack a tool the family uses (netem's kernel module),
                // probed once.
                .filter(|f| {
                    !f.needs_netns() || tools_available(probed.get_or_init(capabilities), f.tools())
                })
                .collect()
        }
    })
}

/// The runtime: asked for, or the default one (a runtime that makes network faults when
/// partition or netem faults need it); refused if this machine cannot run it. Each runtime
/// says what it needs (nemesis's `RuntimeKind`): nothing here knows one by its name.
pub(super) fn runtime(
    a: &RunArgs,
    faults: &[FaultKind],
    replayed: bool,
    target: &Target,
) -> Result<&'static dyn nemesis::runtime::RuntimeKind> {
    let wants_network = faults.iter().any(|f| f.needs_netns());
    let kind = match a.text(&flags::RUNTIME) {
        Some(name) => nemesis::runtime::runtime(name)
            .with_context(|| format!("--runtime {name:?}: expected {}", runtime_names()))?,
        None => nemesis::runtime::default_runtime(wants_network),
    };
    let name = kind.name();
    if wants_network && !replayed && !kind.network_faults() {
        bail!(
            "--runtime {name}: partition and netem faults need {} (each node on a network of \
             its own)",
            nemesis::runtime::network_runtime_names()
        );
    }
    if let Some(why) = kind.refuses_url() {
        if !target.is_started_by_us() {
            bail!("--runtime {name}: a --url target is not started by lockpick, so it {why}");
        }
    }
    if let Some(what) = kind.needs_hosts() {
        if a.path(&flags::HOSTS_FILE).is_none() {
            bail!("--runtime {name}: {what}");
        }
    }
    // Refused up front, before any traffic, with what is missing.
    // Each names what is missing (`netem: ...`): the runtime itself may run here, and only a
    // fault this run asked for needs what is not.
    let missing = kind.missing_here(faults);
    if !missing.is_empty() {
        bail!(
            "--runtime {name}: what this run needs of it cannot run here: {} (`lockpick doctor` \
             lists what can)",
            missing.join("; ")
        );
    }
    Ok(kind)
}

/// `--partition-topologies`, or every topology that cuts something with this many nodes.
pub(super) fn topologies(a: &RunArgs) -> Result<Vec<Topology>> {
    Ok(match a.text(&flags::PARTITION_TOPOLOGIES) {
        Some(list) => {
            let t = parse_topologies(list)
                .map_err(|e| anyhow::anyhow!("--partition-topologies: {e}"))?;
            if let Some(bad) = t.iter().find(|t| t.nodes_min() > a.nodes()) {
                bail!(
                    "--partition-topologies {bad}: cuts nothing with {} node(s) (needs {})",
                    a.nodes(),
                    bad.nodes_min()
                );
            }
            t
        }
        None => Topology::ALL
            .into_iter()
            .filter(|t| t.nodes_min() <= a.nodes())
            .collect(),
    })
}

/// Reads `--schedule FILE` and checks it against the run the flags describe, before anything
/// starts: every error is one line naming the file (and the fault, when one is to blame).
pub(super) fn load_schedule(
    path: &std::path::Path,
    a: &RunArgs,
    target: &Target,
    service: &dyn workloads::Service,
) -> Result<(PathBuf, Schedule)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--schedule {}: cannot read it", path.display()))?;
    let schedule =
        Schedule::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let kinds = schedule.kinds();
    let netns = if !kinds.iter().any(|k| k.needs_netns()) {
        Ok(())
    } else {
        let kind = match a.text(&flags::RUNTIME) {
            Some(name) => nemesis::runtime::runtime(name),
            None => Some(nemesis::runtime::default_runtime(true)),
        };
        match kind {
            // An unknown name is refused with the list where the runtime is chosen.
            None => Ok(()),
            Some(k) if !k.network_faults() => Err(format!(
                "needs {} (each node on a network of its own), not --runtime {}",
                nemesis::runtime::network_runtime_names(),
                k.name()
            )),
            Some(k) => {
                let missing = k.missing_here(&kinds);
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "needs --runtime {}, which cannot run here: {}",
                        k.name(),
                        missing.join("; ")
                    ))
                }
            }
        }
    };
    let clock = if !kinds.iter().any(|k| k.moves_clocks()) {
        Ok(())
    } else {
        clock_reaches(service)
    };
    let caps = Capabilities {
        nodes: if target.is_started_by_us() {
            a.nodes()
        } else {
            0
        },
        netns,
        clock,
    };
    schedule
        .check(&caps)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // Recorded absolute, so the run's config.toml replays it from anywhere.
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok((path, schedule))
}

/// Whether the namespaces' `probed` capabilities have every one of `tools` that they probe.
fn tools_available(probed: &[nemesis::netns::Capability], tools: &[&str]) -> bool {
    probed.iter().all(|c| c.ok || !tools.contains(&c.name))
}

/// `local or netns`.
fn runtime_names() -> String {
    let names: Vec<&str> = nemesis::RUNTIMES.iter().map(|r| r.name()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Whether clock faults reach the service's nodes on this machine, and if not, why. The vDSO
/// backend reaches every service; libfaketime, the fallback, not those whose descriptor says
/// so (Go programs such as etcd).
fn clock_reaches(service: &dyn workloads::Service) -> Result<(), String> {
    match nemesis::clock::Backend::detect()? {
        nemesis::clock::Backend::Vdso => Ok(()),
        nemesis::clock::Backend::Faketime(_) => service.clock_faults().map_err(|why| {
            format!(
                "not with --adapter {} on this machine: {}, and libfaketime, the fallback: {why}",
                service.name(),
                nemesis::clock::vdso_unavailable().unwrap_or_default()
            )
        }),
    }
}
