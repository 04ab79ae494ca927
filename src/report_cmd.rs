//! `lockpick report RUN_DIR`, and the reporting side of `run` and `check`: rendering a run
//! directory's report files, the `--fail-on` exit code and GitHub Actions annotations.

use crate::cli::ReportArgs;
use anyhow::{Context, Result};
use history::{layout, ExitCode, Results};
use reports::FailOn;
use std::fs;
use std::path::Path;

/// Writes a run's verdict (results.json, summary.txt), then renders its report files.
pub fn write_results(run_dir: &Path, results: &Results) -> Result<()> {
    write_results_json(run_dir, results)?;
    fs::write(
        run_dir.join(layout::SUMMARY_FILE),
        reports::summary_text(results),
    )
    .with_context(|| {
        format!(
            "cannot write {}",
            run_dir.join(layout::SUMMARY_FILE).display()
        )
    })?;
    // report.html, junit.xml and <out>/index.html render the files just written. A failure
    // there must not cost the run its verdict, so it is reported as a warning, not an error.
    after_run(run_dir);
    Ok(())
}

/// Writes a run's results.json through a temporary file and a rename: a reader (or a crash)
/// sees the verdict before or after, never half of one.
fn write_results_json(run_dir: &Path, results: &Results) -> Result<()> {
    let path = run_dir.join(layout::RESULTS_FILE);
    let json = serde_json::to_string_pretty(results)? + "\n";
    let tmp = run_dir.join(format!(
        ".{}.tmp-{}",
        layout::RESULTS_FILE,
        std::process::id()
    ));
    fs::write(&tmp, json)
        .and_then(|()| fs::rename(&tmp, &path))
        .inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
        .with_context(|| format!("cannot write {}", path.display()))
}

/// After a run wrote results.json: render report.html, junit.xml and summary.txt, and rewrite
/// `<out>/index.html` (the run directory is `<out>/<name>/<stamp>/`). Failures are warnings:
/// the verdict is already on disk and must not be lost to a rendering problem.
pub fn after_run(run_dir: &Path) {
    if let Err(e) = reports::write_run_reports(run_dir) {
        tracing::warn!(error = %e, "report not written");
        eprintln!("warning: report.html/junit.xml not written: {e}");
    }
    rewrite_index(run_dir);
}

/// Rewrites `<out>/index.html` around `dir`, a run's or a suite's directory
/// (`<out>/<name>/<stamp>/`), once its verdict is on disk. A failure is a warning: the verdict
/// is already written and must not be lost to the listing.
pub fn rewrite_index(dir: &Path) {
    if let Some(out) = dir.parent().and_then(Path::parent) {
        if let Err(e) = reports::write_index(out) {
            tracing::warn!(error = %e, "index not written");
            eprintln!(
                "warning: {} not written: {e}",
                out.join(layout::INDEX_FILE).display()
            );
        }
    }
}

/// `lockpick report RUN_DIR`: regenerate the report files from the run directory's files.
pub fn report(a: ReportArgs) -> Result<ExitCode> {
    let dir = &a.run_dir;
    if dir.is_dir()
        && !dir.join(layout::RESULTS_FILE).exists()
        && !dir.join(layout::HISTORY_FILE).exists()
    {
        anyhow::bail!("{}", crate::check_cmd::not_a_run_dir(dir));
    }
    if !dir.is_dir() {
        // A history file named on its own: `check` judges it; `report` writes into the
        // folder that holds it, which must be that history's run directory.
        let hint = if dir.is_file() {
            format!(
                "; for a history file, `lockpick check {}` gives its verdict, and a folder \
                 holding it as {} can be reported",
                dir.display(),
                layout::HISTORY_FILE
            )
        } else {
            String::new()
        };
        anyhow::bail!(
            "{}: not a run directory (expected a folder with {} or {}){hint}",
            dir.display(),
            layout::HISTORY_FILE,
            layout::RESULTS_FILE
        );
    }
    let results_path = dir.join(layout::RESULTS_FILE);
    // The verdict shown is the history's as it is now: a run stopped before it wrote its
    // verdict (a second Ctrl-C, a killed harness), or whose history changed after it (by hand),
    // is judged as `check` judges it, and the verdict written. If the history cannot be judged,
    // nothing is written: what the run recorded stays as it was.
    let rejudge = if !results_path.is_file() {
        dir.join(layout::HISTORY_FILE)
            .is_file()
            .then(|| "the run never wrote its verdict".to_string())
    } else {
        crate::check_cmd::stale_results(dir)
    };
    if let Some(why) = rejudge {
        let recorded = crate::check_cmd::recorded_validity(dir);
        let results = crate::check_cmd::judge(dir, None, None).with_context(|| {
            // Nothing is written: say whether a verdict was there to keep.
            let kept = if results_path.is_file() {
                format!("{} left as it was", layout::RESULTS_FILE)
            } else {
                format!("no {} written", layout::RESULTS_FILE)
            };
            format!(
                "{}: {why}, and the history cannot be judged ({kept})",
                results_path.display()
            )
        })?;
        write_results_json(dir, &results)?;
        let was = match recorded {
            Some(r) if r != results.valid => format!(", which said {r}"),
            _ => String::new(),
        };
        eprintln!(
            "{}: {why}; judged its history ({}) and wrote it{was}",
            results_path.display(),
            results.valid
        );
    }
    let w = reports::write_run_reports(dir)
        .with_context(|| format!("cannot render the report of {}", dir.display()))?;
    // The verdict the exit code gives, said first, with why when it is unknown (the reason
    // summary.txt and report.html give).
    println!("{}", reports::verdict_line(&w.results));
    println!("report:  {}", w.report.display());
    println!("junit:   {}", w.junit.display());
    println!("summary: {}", w.summary.display());
    // The index is rewritten only where one exists: a run directory copied elsewhere has no
    // runs folder around it to list.
    if let Some(out) = dir
        .canonicalize()
        .ok()
        .as_deref()
        .and_then(Path::parent)
        .and_then(Path::parent)
    {
        if out.join(layout::INDEX_FILE).is_file() {
            let p = reports::write_index(out)?;
            println!("index:   {}", p.display());
        }
    }
    // The exit code `check` gives the same verdict.
    Ok(gate(
        &w.results,
        &FailOn::given_or_default(a.fail_on),
        &w.report,
        true,
    ))
}

/// The exit code under `--fail-on`, printing `::error`/`::warning` annotation lines first when
/// `annotate` and running under GitHub Actions.
pub fn gate(results: &Results, fail_on: &FailOn, report: &Path, annotate: bool) -> ExitCode {
    if annotate && std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true") {
        for line in reports::github_annotations(results, fail_on, &report.display().to_string()) {
            println!("{line}");
        }
    }
    fail_on.exit_code(results)
}
