//! Conformance first: the probe (workloads::probe) against a deployment, before a run's clock
//! and workers start, and `lockpick probe`, which deploys the same target, probes it and
//! tears it down. Nothing the probe does is recorded in a history.

use super::deploy::{self, Deployment};
use crate::config::RunConfig;
use anyhow::{Context, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// The shortest time the probe waits for an answer, whatever `--op-timeout` says.
const PROBE_OP_TIMEOUT_FLOOR_MS: u64 = 5_000;

/// Probes the first node of `dep` through the service's own adapter: the transcript, or the
/// one-line failure (an error whose text starts `probe: `) with the transcript up to it.
pub async fn conformance(
    cfg: &RunConfig,
    dep: &Deployment,
) -> Result<Vec<String>, workloads::ProbeError> {
    // The probe checks what the service answers, not how fast: a first answer slower than a
    // short --op-timeout (a service just started, a loaded machine) is not a protocol error.
    let mut cfg = cfg.clone();
    cfg.op_timeout_ms = cfg.op_timeout_ms.max(PROBE_OP_TIMEOUT_FLOOR_MS);
    let cfg = &cfg;
    let adapters = super::connect(cfg, dep, Instant::now()).map_err(|e| workloads::ProbeError {
        line: format!("cannot connect the {} adapter: {e:#}", cfg.service.name()),
        transcript: Vec::new(),
    })?;
    let target = workloads::ProbeTarget {
        adapter: &adapters[0],
        url: &dep.urls[0],
        readiness: &cfg.service.readiness(),
        tokens: cfg.service.tokens(&cfg.adapter_own),
        ttl_ms: cfg.ttl_ms,
        drift: cfg.drift,
        op_timeout: Duration::from_millis(cfg.op_timeout_ms),
        store: cfg.kind().uses_store(),
    };
    workloads::probe(&target).await
}

/// `lockpick probe`: deploys what `run` would (nodes' files in `scratch`), probes it, stops it.
/// The transcript, or the transcript up to the failure and the failure.
pub async fn probe_service(
    cfg: &RunConfig,
    scratch: &Path,
) -> Result<Result<Vec<String>, workloads::ProbeError>> {
    let startup = Duration::from_millis(cfg.startup_timeout_ms);
    let dep = deploy::deploy(cfg, scratch, startup)
        .await
        .context("cannot start the service to probe")?;
    let outcome = conformance(cfg, &dep).await;
    dep.teardown()?;
    Ok(outcome)
}
