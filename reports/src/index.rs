//! `<out>/index.html`: every run under an output folder with its verdict, date, target and
//! faults, newest first. Rewritten after each run from the run directories alone.

use crate::escape::html as esc;
use crate::{ReportError, RunConfigView};
use history::layout;
use history::Validity;
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::fmt::Write;
use std::fs;
use std::path::Path;

/// Runs listed; older ones are counted. Also bounds the folders scanned per test name.
const RUNS_MAX: usize = 2000;

/// The part of results.json the index shows: the index is rewritten after every run and reads
/// every run's results, so it skips building what it does not need.
#[derive(Deserialize)]
struct Lite {
    valid: Validity,
    violations: Vec<IgnoredAny>,
    warnings: Vec<IgnoredAny>,
    #[serde(default)]
    warnings_unlisted: u64,
    #[serde(default)]
    completeness: Option<history::Completeness>,
}

struct Row {
    name: String,
    stamp: String,
    verdict: String,
    /// `interrupted: <reason>` or `error: <reason>` for a run cut short.
    incomplete: Option<String>,
    violations: usize,
    warnings: usize,
    target: String,
    faults: String,
    seed: String,
    has_report: bool,
}

/// Renders the index of `out` (folders `<out>/<name>/<stamp>/` holding a results.json).
/// Unreadable runs (a run still in progress, a crashed one) are listed as such.
pub fn index_html(out: &Path) -> Result<String, ReportError> {
    let mut rows = Vec::new();
    let names = fs::read_dir(out).map_err(|source| ReportError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    for name in names.flatten().take(RUNS_MAX) {
        let name_path = name.path();
        let file_name = name.file_name().to_string_lossy().into_owned();
        // `latest` is a link to a run, not a test name.
        if file_name.starts_with('.') || file_name == layout::LATEST_LINK || !name_path.is_dir() {
            continue;
        }
        let Ok(stamps) = fs::read_dir(&name_path) else {
            continue;
        };
        for run in stamps.flatten().take(RUNS_MAX) {
            let dir = run.path();
            if !dir.is_dir() {
                continue;
            }
            rows.push(row(&file_name, &dir));
        }
    }
    rows.sort_by(|a, b| b.stamp.cmp(&a.stamp).then(a.name.cmp(&b.name)));
    let total = rows.len();
    rows.truncate(RUNS_MAX);
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>lockpick runs</title><style>body{{font:14px/1.45 system-ui,\"DejaVu Sans\",sans-serif;margin:24px;color:#212529}}table{{border-collapse:collapse}}th,td{{border:1px solid #dee2e6;padding:3px 9px;text-align:left}}th{{background:#f1f3f5}}.invalid{{color:#c92a2a;font-weight:700}}.valid{{color:#2b8a3e;font-weight:700}}.unknown,.unreadable{{color:#e67700;font-weight:700}}td.n{{text-align:right}}.incomplete{{color:#c92a2a;font-size:12px;display:block}}</style></head><body><h1>lockpick runs ({total})</h1><table><tr><th>date (UTC)</th><th>test</th><th>verdict</th><th>violations</th><th>warnings</th><th>target</th><th>faults</th><th>seed</th><th>report</th></tr>\n"
    );
    for r in &rows {
        let link = format!("{}/{}/{}", r.name, r.stamp, layout::REPORT_FILE);
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td class=\"{v}\">{v}{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&pretty_stamp(&r.stamp)),
            esc(&r.name),
            r.incomplete
                .as_ref()
                .map(|c| format!("<span class=\"incomplete\">incomplete run ({})</span>", esc(c)))
                .unwrap_or_default(),
            r.violations,
            r.warnings,
            esc(&r.target),
            esc(&r.faults),
            esc(&r.seed),
            if r.has_report {
                format!("<a href=\"{}\">report</a>", esc(&percent_path(&link)))
            } else {
                "—".into()
            },
            v = esc(&r.verdict)
        );
    }
    if total > rows.len() {
        let _ = write!(
            s,
            "<p>… {} older run(s) not listed.</p>",
            total - rows.len()
        );
    }
    s.push_str("</table></body></html>\n");
    Ok(s)
}

/// Writes `<out>/index.html` atomically (a reader never sees half a file).
pub fn write_index(out: &Path) -> Result<std::path::PathBuf, ReportError> {
    let text = index_html(out)?;
    let path = out.join("index.html");
    crate::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

fn row(name: &str, dir: &Path) -> Row {
    let stamp = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let results: Option<Lite> = fs::read(dir.join(layout::RESULTS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let cfg = RunConfigView::read(&dir.join(layout::CONFIG_FILE)).ok();
    let get = |k: &str| cfg.as_ref().and_then(|c| c.get(k)).unwrap_or_default();
    let target = cfg.as_ref().map(RunConfigView::target).unwrap_or_default();
    Row {
        name: name.to_string(),
        verdict: results
            .as_ref()
            .map(|r| r.valid.as_str().to_string())
            .unwrap_or_else(|| "unreadable".into()),
        incomplete: results
            .as_ref()
            .and_then(|r| r.completeness.as_ref())
            .filter(|c| !c.is_complete())
            .map(history::Completeness::headline),
        violations: results.as_ref().map(|r| r.violations.len()).unwrap_or(0),
        warnings: (results.as_ref()).map_or(0, |r| r.warnings.len() + r.warnings_unlisted as usize),
        target,
        faults: get(crate::config_keys::NEMESIS),
        seed: get(crate::config_keys::SEED),
        has_report: dir.join(layout::REPORT_FILE).is_file(),
        stamp,
    }
}

/// `20261130T010203.456Z` -> `2026-11-30 01:02:03`; anything else unchanged.
fn pretty_stamp(s: &str) -> String {
    let b = s.as_bytes();
    if b.len() >= 15 && b[8] == b'T' && s.is_char_boundary(15) {
        format!(
            "{}-{}-{} {}:{}:{}",
            &s[0..4],
            &s[4..6],
            &s[6..8],
            &s[9..11],
            &s[11..13],
            &s[13..15]
        )
    } else {
        s.to_string()
    }
}

/// Percent-encodes what a relative URL path cannot hold as is (test names are free text).
fn percent_path(p: &str) -> String {
    let mut out = String::new();
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}
