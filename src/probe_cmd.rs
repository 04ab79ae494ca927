//! `lockpick probe`: the conformance checks `run` makes before its clock starts, alone. The
//! target is resolved from `run`'s flags (and `--config`), deployed as `run` would deploy it
//! (into a scratch folder, kept only when the service does not start, so its node logs can be
//! read), probed and stopped.

use crate::config::RunConfig;
use crate::flags::{self, RunArgs};
use anyhow::{Context, Result};
use history::ExitCode;
use std::fs;

pub fn probe(mut a: RunArgs) -> Result<ExitCode> {
    // The probe hurts nothing: no fault is prepared (no clock control, no replayed schedule),
    // so the service starts exactly as it is.
    a.set_text(&flags::NEMESIS, Some("none"));
    a.set_path(&flags::SCHEDULE, None);
    let cfg = RunConfig::from_args(&a)?;
    let scratch = std::env::temp_dir().join(format!("lockpick-probe-{}", std::process::id()));
    fs::create_dir_all(&scratch).with_context(|| format!("cannot create {}", scratch.display()))?;
    // The harness's log goes beside the nodes' logs, so stdout is only the transcript.
    crate::logging::to_file(&scratch.join(history::layout::LOG_FILE))?;
    let outcome = crate::runtime()?.block_on(crate::runner::probe_service(&cfg, &scratch));
    let (lines, failure) = match outcome {
        Ok(Ok(lines)) => (lines, None),
        Ok(Err(e)) => (e.transcript.clone(), Some(e)),
        // The service did not start: its logs are kept, and named.
        Err(e) => {
            let why = crate::error_text(&e);
            anyhow::bail!("{why} (its logs are in {})", scratch.display());
        }
    };
    // It started and answered: its logs are not needed (best effort: a folder left behind
    // loses nothing).
    let _ = fs::remove_dir_all(&scratch);
    println!("probing {}", target_text(&cfg));
    for l in &lines {
        println!("  {l}");
    }
    match failure {
        None => {
            // A warning line (a service slower than its lease) is no request.
            let requests = lines.iter().filter(|l| l.contains(" -> ")).count();
            println!("probe: passed ({requests} requests)");
            Ok(ExitCode::Valid)
        }
        // One line: main prints it as `error: probe: ...` with exit 3.
        Some(e) => Err(anyhow::anyhow!("{e}")),
    }
}

/// Where the probed service is: its URL, or what lockpick starts.
/// What is probed, for the transcript's first line: `the redis service lockpick starts`.
fn target_text(cfg: &RunConfig) -> String {
    let name = cfg.service.name();
    match &cfg.target {
        crate::config::Target::Url { url } => format!("the {name} adapter's service at {url}"),
        crate::config::Target::Command { template } => {
            format!("the {name} adapter's service that `{template}` starts")
        }
        crate::config::Target::Embedded => format!("the {name} service lockpick starts"),
    }
}
