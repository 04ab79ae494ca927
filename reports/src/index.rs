//! `<out>/index.html`: every run and suite under an output folder with its verdict, date,
//! target and faults, newest first. Rewritten after each run and suite from their directories
//! alone: a run's results.json, a suite's suite.json (and its scenarios' results.json).

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

/// Scenarios of one suite whose results are read: a suite runs at most 500
/// (src/suite.rs's `SCENARIOS_MAX`); a suite.json claiming more is not read past them.
const SCENARIOS_READ_MAX: usize = 500;

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

/// The part of a suite's suite.json the index shows (src/suite.rs writes it).
#[derive(Deserialize)]
struct SuiteLite {
    valid: Validity,
    /// Why the verdict is what it is, in a line.
    why: String,
    complete: bool,
    scenarios: Vec<ScenarioLite>,
}

#[derive(Deserialize)]
struct ScenarioLite {
    id: String,
    /// Where its run was, as the suite saw it (absolute); `None` when it never started.
    run_dir: Option<std::path::PathBuf>,
}

#[derive(Default)]
struct Row {
    name: String,
    stamp: String,
    verdict: String,
    /// A line under the verdict, with its class: `incomplete` (red) for a run or suite cut
    /// short, `why` for a suite's reason or why a directory is unreadable.
    said: Option<(&'static str, String)>,
    violations: usize,
    warnings: usize,
    target: String,
    faults: String,
    seed: String,
    /// The page the row links to (report.html, a suite's index.html) and the link's words.
    link: Option<(&'static str, String)>,
}

/// Renders the index of `out` (folders `<out>/<name>/<stamp>/` holding a run's results.json or
/// a suite's suite.json). A directory with neither, or one that cannot be read (a run still in
/// progress, a crashed one), is listed as unreadable, with why.
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
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>lockpick runs</title><style>body{{font:14px/1.45 system-ui,\"DejaVu Sans\",sans-serif;margin:24px;color:#212529}}table{{border-collapse:collapse}}th,td{{border:1px solid #dee2e6;padding:3px 9px;text-align:left}}th{{background:#f1f3f5}}.invalid{{color:#c92a2a;font-weight:700}}.valid{{color:#2b8a3e;font-weight:700}}.unknown,.unreadable{{color:#e67700;font-weight:700}}td.n{{text-align:right}}.incomplete{{color:#c92a2a;font-size:12px;display:block}}.why{{color:#495057;font-weight:400;font-size:12px;display:block}}</style></head><body><h1>lockpick runs ({total})</h1><table><tr><th>date (UTC)</th><th>test</th><th>verdict</th><th>violations</th><th>warnings</th><th>target</th><th>faults</th><th>seed</th><th>report</th></tr>\n"
    );
    for r in &rows {
        let link = |(file, words): &(&str, String)| {
            let path = format!("{}/{}/{file}", r.name, r.stamp);
            format!(
                "<a href=\"{}\">{}</a>",
                esc(&percent_path(&path)),
                esc(words)
            )
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td class=\"{v}\">{v}{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&pretty_stamp(&r.stamp)),
            esc(&r.name),
            r.said
                .as_ref()
                .map(|(class, c)| format!("<span class=\"{class}\">{}</span>", esc(c)))
                .unwrap_or_default(),
            r.violations,
            r.warnings,
            esc(&r.target),
            esc(&r.faults),
            esc(&r.seed),
            r.link.as_ref().map(link).unwrap_or_else(|| "—".into()),
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
    let path = out.join(layout::INDEX_FILE);
    crate::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

/// A directory's row: a run's (results.json), a suite's (suite.json), or an unreadable one
/// with why.
fn row(name: &str, dir: &Path) -> Row {
    let stamp = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (config, found) = if dir.join(layout::RESULTS_FILE).exists() {
        (layout::CONFIG_FILE, run_row(dir))
    } else if dir.join(layout::SUITE_FILE).exists() {
        (layout::SUITE_CONFIG_FILE, suite_row(dir))
    } else if dir.join(layout::SUITE_CONFIG_FILE).exists() {
        let why = format!(
            "a suite with no {} yet: still running, or stopped before its verdict",
            layout::SUITE_FILE
        );
        (layout::SUITE_CONFIG_FILE, Err(why))
    } else {
        let why = format!(
            "no {} yet: a run still in progress, or one stopped before its verdict (`lockpick \
             report` on its directory judges its history)",
            layout::RESULTS_FILE
        );
        (layout::CONFIG_FILE, Err(why))
    };
    let cfg = RunConfigView::read(&dir.join(config)).ok();
    let get = |k: &str| cfg.as_ref().and_then(|c| c.get(k)).unwrap_or_default();
    let mut row = found.unwrap_or_else(|why| Row {
        verdict: "unreadable".into(),
        said: Some(("why", why)),
        ..Row::default()
    });
    row.name = name.to_string();
    row.stamp = stamp;
    row.target = cfg.as_ref().map(RunConfigView::target).unwrap_or_default();
    row.faults = get(crate::config_keys::NEMESIS);
    row.seed = get(crate::config_keys::SEED);
    row
}

/// Reads `path` as `T`, or says in a line why it cannot.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let bytes = fs::read(path).map_err(|e| format!("{name}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{name}: {e}"))
}

/// A run's verdict and counts from its results.json.
fn run_row(dir: &Path) -> Result<Row, String> {
    let r: Lite = read_json(&dir.join(layout::RESULTS_FILE))?;
    Ok(Row {
        verdict: r.valid.as_str().to_string(),
        said: (r.completeness.as_ref())
            .filter(|c| !c.is_complete())
            .map(|c| ("incomplete", format!("incomplete run ({})", c.headline()))),
        violations: r.violations.len(),
        warnings: r.warnings.len() + r.warnings_unlisted as usize,
        link: dir
            .join(layout::REPORT_FILE)
            .is_file()
            .then(|| (layout::REPORT_FILE, "report".to_string())),
        ..Row::default()
    })
}

/// A suite's verdict from its suite.json, and its scenarios' violations and warnings counted
/// from their runs' results.json (suite.json names only their kinds).
fn suite_row(dir: &Path) -> Result<Row, String> {
    let suite: SuiteLite = read_json(&dir.join(layout::SUITE_FILE))?;
    let (mut violations, mut warnings) = (0, 0);
    for sc in suite.scenarios.iter().take(SCENARIOS_READ_MAX) {
        // Found under this suite's directory as it is now, by the scenario's id and its run's
        // stamp: the path suite.json recorded is stale once the output folder moves.
        let Some(stamp) = sc.run_dir.as_deref().and_then(Path::file_name) else {
            continue;
        };
        // An id is one folder's name; one that would climb out of the suite is not followed.
        let one_name = matches!(
            Path::new(&sc.id).components().collect::<Vec<_>>()[..],
            [std::path::Component::Normal(_)]
        );
        if !one_name {
            continue;
        }
        let run = dir.join(layout::SCENARIOS_DIR).join(&sc.id).join(stamp);
        if let Ok(r) = read_json::<Lite>(&run.join(layout::RESULTS_FILE)) {
            violations += r.violations.len();
            warnings += r.warnings.len() + r.warnings_unlisted as usize;
        }
    }
    Ok(Row {
        verdict: suite.valid.as_str().to_string(),
        said: Some(match suite.complete {
            true => ("why", suite.why),
            false => ("incomplete", format!("incomplete suite ({})", suite.why)),
        }),
        violations,
        warnings,
        link: dir.join(layout::INDEX_FILE).is_file().then(|| {
            let n = suite.scenarios.len();
            (layout::INDEX_FILE, format!("suite: {n} scenario(s)"))
        }),
        ..Row::default()
    })
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
