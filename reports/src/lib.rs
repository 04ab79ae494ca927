//! Renderers over recorded data. Everything here reads the files of a run directory
//! (`results.json`, `history.jsonl`, `config.toml`) and never live runner state, so a report
//! can be regenerated later, elsewhere, from the files alone (`lockpick report RUN_DIR`).
//!
//! - [`write_run_reports`]: renders `report.html`, `junit.xml` and `summary.txt` of a run
//!   directory; [`render_report`] is the same without writing.
//! - [`summary_text`]: the plain-text summary (`summary.txt`, and what `lockpick check` prints);
//!   [`unknown_reasons`] / [`verdict_line`]: why a verdict is unknown, the one reason the
//!   summary's verdict line, report.html's header and `lockpick report` give.
//! - [`junit_xml`]: one JUnit test case per checker.
//! - incidents.rs: the checkers' incidents (one root cause, its consequences under it), first
//!   in the summary and the report.
//! - reasons.rs: why ops did not take effect (`stats.reasons`: `acquire refused: held x9584`,
//!   `acquire info: http-423 x8352`), one breakdown drawn by the summary and the report.
//! - [`coverage_gaps`]: what a run asked for and exercised nowhere (`--fail-on coverage`).
//! - [`FailOn`]: the `--fail-on` policy that turns [`history::Results`] into an exit code, and
//!   [`github_annotations`] for GitHub Actions.
//! - [`index_html`] / [`write_index`]: `<out>/index.html`, every run with its verdict.
//! - [`RunConfigView`]: what the report shows of `config.toml` (parameters, rerun command).
//!
//! Every string that comes from a history or a service goes through [`escape`] before it
//! reaches HTML, XML or an annotation line.

// The unit tests read histories with faults: the fault families' entries are registered by the
// nemesis's modules (history::FAULT_FAMILIES), linked here for the tests only.
#[cfg(test)]
use nemesis as _;

mod coverage;
mod cycle;
pub mod escape;
mod gate;
mod html;
mod incidents;
mod index;
mod junit;
mod model;
mod reasons;
mod summary;
mod svg;

pub use checkers::checker_of;
pub use coverage::coverage_gaps;
pub use gate::{github_annotations, FailOn, FailOnError};
pub use index::{index_html, write_index};
pub use junit::junit_xml;
pub use summary::{summary_text, unknown_reasons, verdict_line};

use history::{layout, Results};
use std::io;
use std::path::{Path, PathBuf};

/// Past this size the history is not read into memory for the timelines (about 4 million
/// events, some 1.6 GB resident): the report then shows the verdict, checkers, cards and
/// tables from results.json, and says why the pictures are missing.
pub const HISTORY_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a results file: {source}")]
    Results {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: {source}")]
    Config {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
}

/// The keys of a run's `config.toml` that the reports and the binary's gates read by name:
/// each is the config key of a `run` flag (the binary's flag table, which writes the file;
/// `the_reports_config_keys_are_the_flags` there holds them to it), or a key of runs recorded
/// before the one schema ([`config_keys::legacy`]), still read so their reports and checks
/// keep their settings.
pub mod config_keys {
    pub const TTL: &str = "ttl";
    pub const RENEW_TTL: &str = "renew_ttl";
    pub const DRIFT: &str = "drift";
    pub const LIVENESS_GRACE: &str = "liveness_grace";
    pub const CLOCK_SCOPE: &str = "clock_scope";
    pub const NEMESIS: &str = "nemesis";
    pub const NEMESIS_TARGETS: &str = "nemesis_targets";
    pub const URL: &str = "url";
    pub const NODE_CMD: &str = "node_cmd";
    pub const ADAPTER: &str = "adapter";
    pub const UNSAFE: &str = "unsafe";
    pub const NAME: &str = "name";
    pub const SEED: &str = "seed";
    pub const OUT: &str = "out";
    pub const FAIL_ON: &str = "fail_on";
    /// Every key above.
    pub const FLAGS: &[&str] = &[
        TTL,
        RENEW_TTL,
        DRIFT,
        LIVENESS_GRACE,
        CLOCK_SCOPE,
        NEMESIS,
        NEMESIS_TARGETS,
        URL,
        NODE_CMD,
        ADAPTER,
        UNSAFE,
        NAME,
        SEED,
        OUT,
        FAIL_ON,
    ];
    /// The template adapter's section: its requests, not settings.
    pub const TEMPLATE_SECTION: &str = "template";

    /// Keys only runs from before the one schema wrote.
    pub mod legacy {
        /// The liveness grace in milliseconds, a number.
        pub const LIVENESS_GRACE_MS: &str = "liveness_grace_ms";
        /// `--unsafe`'s mode.
        pub const UNSAFE_MODE: &str = "unsafe_mode";
        /// What was tested, a table with a `kind`; settings tables have none.
        pub const TARGET: &str = "target";
        pub const TARGET_KIND: &str = "kind";
    }
}

use config_keys as key;

/// What the report shows of a run's `config.toml`: its top-level settings and the rerun
/// command the runner writes on its second line (`# Rerun: lockpick run --seed ...`).
#[derive(Debug, Clone)]
pub struct RunConfigView {
    pub rerun: Option<String>,
    table: toml::Table,
}

impl RunConfigView {
    pub fn read(path: &Path) -> Result<RunConfigView, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|source| ReportError::Config {
            path: path.to_path_buf(),
            source,
        })
    }

    pub fn parse(text: &str) -> Result<RunConfigView, toml::de::Error> {
        let rerun = text
            .lines()
            .take(5)
            .find_map(|l| l.strip_prefix("# Rerun: "))
            .map(|s| s.trim().to_string());
        // TOML integers are i64, but seeds are u64: the runner writes a seed above i64::MAX
        // as a bare number that no TOML parser accepts. Read such numbers as strings.
        let table = match text.parse::<toml::Table>() {
            Ok(t) => t,
            Err(e) => {
                let fixed: Vec<String> = text.lines().map(quote_big_integer).collect();
                fixed.join("\n").parse::<toml::Table>().map_err(|_| e)?
            }
        };
        Ok(RunConfigView { rerun, table })
    }

    /// A setting's value: a top-level key, else a key of a section (`[workload] ttl`): the
    /// config schema groups settings in sections, runs before it wrote them flat.
    fn value(&self, key: &str) -> Option<&toml::Value> {
        self.table
            .get(key)
            .or_else(|| self.sections().find_map(|(_, keys)| keys.get(key)))
    }

    /// The schema's sections (tables without a `kind`: a run before the schema wrote its
    /// targets as `{kind = "url", ...}` tables, which are settings).
    fn sections(&self) -> impl Iterator<Item = (&String, &toml::Table)> {
        self.table.iter().filter_map(|(k, v)| match v {
            toml::Value::Table(t)
                if !t.contains_key(key::legacy::TARGET_KIND) && k != key::TEMPLATE_SECTION =>
            {
                Some((k, t))
            }
            _ => None,
        })
    }

    /// The `--fail-on` the run resolved (the CI default included), as it wrote it; `None` for
    /// a run that wrote none or one this lockpick cannot read.
    pub fn fail_on(&self) -> Option<FailOn> {
        self.get(key::FAIL_ON)?.parse().ok()
    }

    /// A setting as text: scalars as they are, arrays joined by commas, tables as `k=v`.
    pub fn get(&self, key: &str) -> Option<String> {
        self.value(key).map(show)
    }

    /// A setting that is never a table, as text: a key of a section first (`[nemesis]
    /// nemesis`, whose section has the same name), else a top-level one.
    pub fn setting(&self, key: &str) -> Option<String> {
        self.sections()
            .find_map(|(_, keys)| keys.get(key))
            .or_else(|| self.table.get(key).filter(|v| !v.is_table()))
            .map(show)
    }

    /// What was tested, in a few words: `embedded`, `url http://...`, `command ./my-lockd
    /// ...`, `redis: started by lockpick`, with the adapter when not the reference one and the
    /// unsafe mode if any.
    pub fn target(&self) -> String {
        let adapter = self.get(key::ADAPTER).filter(|a| a != "reference");
        let mut t = match (self.get(key::URL), self.get(key::NODE_CMD)) {
            (Some(u), _) => format!("url {u}"),
            (None, Some(c)) => format!("command {c}"),
            // Before the schema: a `target` table; after it, nothing set is the embedded one.
            _ => match self.table.get(key::legacy::TARGET) {
                Some(t @ toml::Value::Table(k)) if k.contains_key(key::legacy::TARGET_KIND) => {
                    show(t)
                }
                // The reference protocol's own lockd runs inside lockpick; another
                // service's server (Redis, ZooKeeper, ...) is one lockpick started.
                _ if adapter.is_some() => "started by lockpick".to_string(),
                _ => "embedded".to_string(),
            },
        };
        if let Some(a) = adapter {
            t = format!("{a}: {t}");
        }
        if let Some(m) = self
            .get(key::UNSAFE)
            .or_else(|| self.get(key::legacy::UNSAFE_MODE))
        {
            t.push_str(&format!(" (unsafe {m})"));
        }
        t
    }

    /// Every setting but the output folder, in file order (a section's keys in its place).
    pub fn params(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v) in &self.table {
            match v {
                toml::Value::Table(keys) if !keys.contains_key(key::legacy::TARGET_KIND) => {
                    if k != key::TEMPLATE_SECTION {
                        out.extend(keys.iter().map(|(k, v)| (k.clone(), show(v))));
                    }
                }
                _ => out.push((k.clone(), show(v))),
            }
        }
        out.retain(|(k, _)| k != key::OUT);
        out
    }

    /// The checkers' settings the run was checked with, as the runner passes them (`drift`,
    /// `liveness_grace`, which the runner writes in milliseconds, `"2000ms"`; before the
    /// config schema `liveness_grace_ms`); a setting the file lacks is the checkers' default,
    /// as for `lockpick check` without flags. The report's holds and lease bounds follow this
    /// drift, and `lockpick check RUN_DIR` judges with these.
    pub fn check_config(&self) -> checkers::CheckConfig {
        let mut c = checkers::CheckConfig::default();
        if let Some(d) = self.float(key::DRIFT) {
            c.drift = d;
        }
        let grace_ms = match self.value(key::LIVENESS_GRACE) {
            Some(toml::Value::String(s)) => duration_ms(s),
            _ => self.float(key::legacy::LIVENESS_GRACE_MS),
        };
        if let Some(g) = grace_ms {
            c.liveness_grace_ns = (g * 1e6) as u64;
        }
        // Clock faults that moved the monotonic clock: what they make unavoidable is set
        // apart, reaching a lease past each fault.
        if self.setting(key::CLOCK_SCOPE).as_deref() == Some("all") {
            let lease_ms = [key::TTL, key::RENEW_TTL]
                .iter()
                .filter_map(|k| self.setting(k))
                .filter_map(|v| duration_ms(&v))
                .fold(0.0, f64::max);
            c.monotonic_clock_reach_ns = Some((lease_ms * 1e6) as u64);
        }
        c
    }

    fn float(&self, key: &str) -> Option<f64> {
        match self.value(key)? {
            toml::Value::Float(f) => Some(*f),
            toml::Value::Integer(i) => Some(*i as f64),
            _ => None,
        }
    }
}

/// `seed = 14634224980613359122` -> `seed = "14634224980613359122"`; other lines unchanged.
fn quote_big_integer(line: &str) -> String {
    if let Some((k, v)) = line.split_once(" = ") {
        let v = v.trim();
        if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && v.parse::<i64>().is_err() {
            return format!("{k} = \"{v}\"");
        }
    }
    line.to_string()
}

fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) if a.is_empty() => "none".into(),
        toml::Value::Array(a) => a.iter().map(show).collect::<Vec<_>>().join(","),
        toml::Value::Table(t) => {
            // A target is `{kind = "url", url = "..."}`: show the kind, then the rest.
            let kind = key::legacy::TARGET_KIND;
            let mut parts: Vec<String> = t.get(kind).map(show).into_iter().collect();
            parts.extend(
                t.iter()
                    .filter(|(k, _)| k.as_str() != kind)
                    .map(|(k, v)| format!("{k}={}", show(v))),
            );
            parts.join(" ")
        }
        other => other.to_string(),
    }
}

/// The rendered files of one run directory.
pub struct Rendered {
    pub report_html: String,
    pub junit_xml: String,
    pub summary_txt: String,
    pub results: Results,
}

/// Paths written by [`write_run_reports`].
pub struct Written {
    pub report: PathBuf,
    pub junit: PathBuf,
    pub summary: PathBuf,
    pub results: Results,
}

/// The test's name: `name` from config.toml, else the run directory's parent folder.
fn test_name(run_dir: &Path, cfg: Option<&RunConfigView>) -> String {
    cfg.and_then(|c| c.get(key::NAME))
        .or_else(|| {
            run_dir
                .canonicalize()
                .ok()?
                .parent()?
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "lockpick".into())
}

/// Renders a run directory from its files. `results.json` is required; without a readable
/// `history.jsonl` the report still shows the verdict, checkers and sentences, and says why the
/// timelines are missing; without `config.toml` it says the parameters are unknown.
pub fn render_report(run_dir: &Path) -> Result<Rendered, ReportError> {
    let results_path = run_dir.join(layout::RESULTS_FILE);
    let bytes = std::fs::read(&results_path).map_err(|source| ReportError::Io {
        path: results_path.clone(),
        source,
    })?;
    let results: Results =
        serde_json::from_slice(&bytes).map_err(|source| ReportError::Results {
            path: results_path,
            source,
        })?;
    let cfg = RunConfigView::read(&run_dir.join(layout::CONFIG_FILE)).ok();
    let title = test_name(run_dir, cfg.as_ref());
    let history_path = run_dir.join(layout::HISTORY_FILE);
    let history = match std::fs::metadata(&history_path) {
        Ok(m) if m.len() > HISTORY_BYTES_MAX => Err(format!(
            "{} is {} MB, more than the {} MB the report models in memory; results.json has \
             every violation",
            history_path.display(),
            m.len() / 1_000_000,
            HISTORY_BYTES_MAX / 1_000_000
        )),
        // Read as `lockpick check` reads it, so a refusal reads the same.
        _ => history::read_history(&history_path)
            .map(|(history, _)| history)
            .map_err(|e| e.to_string()),
    };
    // The drift the run was checked with: the holds drawn are the checkers' own.
    let check_cfg = cfg
        .as_ref()
        .map(RunConfigView::check_config)
        .unwrap_or_default();
    let model = history.as_ref().map(|h| model::Model::new(h, &check_cfg));
    let report_html = html::render(&html::Input {
        results: &results,
        model: model.as_ref().map_err(|e| e.to_string()),
        config: cfg.as_ref(),
        title: &title,
    });
    Ok(Rendered {
        report_html,
        junit_xml: junit_xml(
            &results,
            &title,
            // The run's policy where it pinned one, else the default of here (as `report`'s
            // exit code reads it).
            &FailOn::given_or_default(cfg.as_ref().and_then(RunConfigView::fail_on)),
        ),
        summary_txt: summary_text(&results),
        results,
    })
}

/// Renders and writes `report.html`, `junit.xml` and `summary.txt` into `run_dir`.
pub fn write_run_reports(run_dir: &Path) -> Result<Written, ReportError> {
    let r = render_report(run_dir)?;
    let w = Written {
        report: run_dir.join(layout::REPORT_FILE),
        junit: run_dir.join(layout::JUNIT_FILE),
        summary: run_dir.join(layout::SUMMARY_FILE),
        results: r.results,
    };
    write_atomic(&w.report, r.report_html.as_bytes())?;
    write_atomic(&w.junit, r.junit_xml.as_bytes())?;
    write_atomic(&w.summary, r.summary_txt.as_bytes())?;
    Ok(w)
}

/// Writes through a temporary file and a rename, so a browser or CI never reads half a file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let io = |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// A duration as config.toml writes it (`2000ms`, `2s`), in milliseconds.
fn duration_ms(s: &str) -> Option<f64> {
    match s.trim().strip_suffix("ms") {
        Some(ms) => ms.parse().ok(),
        None => s
            .trim()
            .strip_suffix('s')
            .and_then(|n| n.parse::<f64>().ok())
            .map(|s| s * 1e3),
    }
}
