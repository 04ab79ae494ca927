//! `lockpick run`: resolve the flags, make the run directory and its log,
//! run the test with the status line, print the verdict and where to read it.

use crate::config::RunConfig;
use crate::flags::{self, RunArgs};
use crate::runner::{self, RunSpec};
use crate::status::StatusLine;
use anyhow::{bail, Context, Result};
use history::{layout, ExitCode};
use std::fs;
use std::path::{Path, PathBuf};

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let cfg = RunConfig::from_args(&a)?;
    print_plan(&cfg);
    let run_dir = create_run_dir(&cfg.out, &cfg.name)?;
    crate::logging::to_file(&run_dir.join(layout::LOG_FILE))?;
    let spec = RunSpec {
        cfg: cfg.clone(),
        run_dir: run_dir.clone(),
        probe: !a.switch(&flags::NO_PROBE),
    };
    let out = match crate::runtime()?.block_on(runner::run(spec, &StatusLine::default())) {
        Ok(out) => out,
        Err(e) => return run_failed(e, &run_dir, &cfg),
    };
    print!("{}", reports::summary_text(&out.results));
    println!("\nrun directory: {}", out.run_dir.display());
    println!(
        "report: {}",
        out.run_dir.join(history::layout::REPORT_FILE).display()
    );
    println!("reproduce: {}", cfg.repro_command());
    if let Some(e) = out.error {
        // A violation proven before the failure stands (exit 1); anything else is an error.
        if out.results.valid != history::Validity::Invalid {
            anyhow::bail!(
                "{e} (the history up to then was checked: {})",
                out.results.valid
            );
        }
        eprintln!("error: {e} (the history up to then was checked: invalid)");
    }
    Ok(crate::report_cmd::gate(
        &out.results,
        &reports::FailOn::given_or_default(crate::config::fail_on(&a)),
        &out.run_dir.join(history::layout::REPORT_FILE),
        true,
    ))
}

/// The run's one line before it starts: workload, clients, locks, lease, time, faults, seed.
fn print_plan(cfg: &RunConfig) {
    // The bank's locks are its accounts', one each.
    let locks = if cfg.kind() == workloads::WorkloadKind::Bank {
        format!(
            "{} account(s) with a lock each, {} lock order",
            cfg.accounts,
            cfg.lock_order_policy.as_str()
        )
    } else {
        format!("{} lock(s)", cfg.locks)
    };
    println!(
        "lockpick: {} workload, {} client(s), {locks}, ttl {} ms{}, {} s, faults: {}, seed {}",
        cfg.workload.as_str(),
        cfg.clients,
        cfg.ttl_ms,
        if cfg.renew_ttl_ms != cfg.ttl_ms {
            format!(" (renew {} ms)", cfg.renew_ttl_ms)
        } else {
            String::new()
        },
        cfg.duration_ms as f64 / 1000.0,
        if cfg.faults.is_empty() {
            "none".to_string()
        } else {
            cfg.fault_names()
        },
        cfg.seed
    );
}

/// The runner failed: whatever stopped the run is written into its directory (log, results,
/// summary, report, index), not only printed. A run the user stopped is `unknown`, not an
/// error.
fn run_failed(e: anyhow::Error, run_dir: &Path, cfg: &RunConfig) -> Result<ExitCode> {
    let reason = crate::error_text(&e);
    tracing::error!(error = %reason, "the run failed");
    let interrupted = e.downcast_ref::<runner::Interrupted>().is_some();
    let how = if interrupted {
        history::Completeness::interrupted(&reason)
    } else {
        history::Completeness::error(&reason)
    };
    if let Err(e2) = record_failure(run_dir, cfg, how) {
        eprintln!(
            "warning: the failure could not be recorded in {}: {}",
            run_dir.display(),
            crate::error_text(&e2)
        );
    }
    println!("run directory: {}", run_dir.display());
    if interrupted {
        // Not a failure: the user stopped it. Nothing was proven either way.
        eprintln!("lockpick: {reason}");
        return Ok(ExitCode::Unknown);
    }
    Err(e)
}

/// After the runner failed (or was stopped before its clients started): the verdict of
/// whatever history was recorded (an empty one when none was), marked `error` (or
/// `interrupted`) with the reason, in results.json, summary.txt and the reports.
fn record_failure(run_dir: &Path, cfg: &RunConfig, how: history::Completeness) -> Result<()> {
    let history = run_dir.join(layout::HISTORY_FILE);
    if !history.exists() {
        // Nothing was recorded: an empty history says so to every reader.
        fs::write(&history, b"").with_context(|| format!("cannot create {}", history.display()))?;
    }
    let mut results = crate::check_cmd::check_file(&history, &cfg.check_config())?;
    results.set_completeness(how);
    crate::report_cmd::write_results(run_dir, &results)
}

/// Makes `<out>/<name>/<UTC timestamp>/` and points `<out>/latest` at it.
pub(crate) fn create_run_dir(out: &Path, name: &str) -> Result<PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let parent = out.join(name);
    fs::create_dir_all(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let mut dir = parent.join(&stamp);
    // Two runs in the same millisecond (tests in parallel) get distinct folders.
    for i in 2..100 {
        match fs::create_dir(&dir) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                dir = parent.join(format!("{stamp}-{i}"));
            }
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    if !dir.is_dir() {
        bail!(
            "cannot create a fresh run directory under {}",
            parent.display()
        );
    }
    let link = out.join(layout::LATEST_LINK);
    let target = Path::new(name).join(dir.file_name().unwrap_or_default());
    let tmp = out.join(format!(".latest-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    // Best effort: a missing `latest` link loses nothing.
    if std::os::unix::fs::symlink(&target, &tmp).is_ok() && fs::rename(&tmp, &link).is_err() {
        let _ = fs::remove_file(&tmp);
    }
    Ok(dir)
}
