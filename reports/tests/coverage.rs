//! The coverage table end to end: a history checked by the checkers, its results.json written,
//! the run directory rendered; the same rows must be in results.json, summary.txt and
//! report.html. And `--fail-on coverage`: what it fails, what it lets pass.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use history::{Results, Validity};
use reports::{coverage_gaps, github_annotations, FailOn};
use std::path::{Path, PathBuf};

/// A correct history with one holder stall ending 5% of the ttl past its lease's bound, just
/// after another client's grant, waking into a renew (the checkers' own coverage fixture).
fn history_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../checkers/tests/coverage/holder-just-past-bound-just-after-next-grant.jsonl")
}

/// A run directory holding that history and the results the checkers made of it.
fn checked_run_dir(dir: &Path) -> Results {
    std::fs::copy(history_path(), dir.join("history.jsonl")).unwrap();
    let (results, _) =
        checkers::check_path(&dir.join("history.jsonl"), &Default::default()).unwrap();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&results).unwrap(),
    )
    .unwrap();
    results
}

#[test]
fn the_coverage_table_is_in_results_json_summary_txt_and_report_html() {
    let tmp = tempfile::tempdir().unwrap();
    let results = checked_run_dir(tmp.path());
    assert_eq!(results.valid, Validity::Valid);
    let w = reports::write_run_reports(tmp.path()).unwrap();

    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("results.json")).unwrap()).unwrap();
    let c = &json["coverage"];
    assert_eq!(c["holder"]["lease_bound"]["just_past"], 1, "{c:#}");
    assert_eq!(
        c["holder"]["lease_bound"]["before"], 0,
        "zeros are written: {c:#}"
    );
    assert_eq!(c["holder"]["wake_up"]["renew"], 1);
    assert_eq!(c["shapes"]["boundary"]["reached"], 1);

    let summary = std::fs::read_to_string(&w.summary).unwrap();
    assert!(
        summary.contains("coverage (what this run exercised"),
        "{summary}"
    );
    let row = |label: &str| {
        summary
            .lines()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no row {label:?} in\n{summary}"))
            .split_whitespace()
            .last()
            .unwrap()
            .to_string()
    };
    assert_eq!(row("0-10% ttl after it surely ended"), "1");
    assert_eq!(row("< 1 ttl after the next grant"), "1");
    assert_eq!(row("before its lease could end"), "none");
    assert_eq!(row("lease lapsed while stalled"), "none");
    assert!(!summary.contains("requested, not exercised"), "{summary}");
    assert!(!summary.contains("  not exercised: "), "{summary}");

    let html = std::fs::read_to_string(&w.report).unwrap();
    let at = html
        .find("<h2 id=\"coverage\">")
        .expect("a coverage section");
    let table = &html[at..at + html[at..].find("</table>").expect("its table")];
    assert!(
        table.contains("<td>0-10% ttl after it surely ended</td><td class=\"n\">1</td>"),
        "{table}"
    );
    assert!(
        table.contains("<td>before its lease could end</td><td class=\"n muted\">none</td>"),
        "{table}"
    );
    assert!(html.contains("<a href=\"#coverage\">Coverage</a>"));
    // Every row of the one list is in both renderings.
    for r in results.coverage.as_ref().unwrap().rows() {
        assert!(
            summary.contains(&r.condition),
            "{} not in summary",
            r.condition
        );
        let cell = format!("<td>{}", reports::escape::html(&r.condition));
        assert!(table.contains(&cell), "{} not in report.html", r.condition);
    }
}

#[test]
fn an_old_results_file_without_coverage_still_renders_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let mut results = checked_run_dir(tmp.path());
    let mut json = serde_json::to_value(&results).unwrap();
    json.as_object_mut().unwrap().remove("coverage");
    std::fs::write(tmp.path().join("results.json"), json.to_string()).unwrap();
    let w = reports::write_run_reports(tmp.path()).unwrap();
    assert_eq!(w.results.coverage, None);
    let summary = std::fs::read_to_string(&w.summary).unwrap();
    assert!(summary.contains("coverage: not counted"), "{summary}");
    // Nothing counted is nothing exercised: the gate cannot pass it.
    results.coverage = None;
    let gate = "coverage".parse::<FailOn>().unwrap();
    assert_eq!(gate.exit_code(&results).code(), 1);
    assert_eq!(coverage_gaps(&results).len(), 1);
}

#[test]
fn fail_on_coverage_fails_a_run_that_exercised_nothing_of_a_requested_kind_or_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let mut r = checked_run_dir(tmp.path());
    let gate = "safety,liveness,coverage".parse::<FailOn>().unwrap();
    assert!(gate.coverage && gate.safety && gate.liveness);
    assert!(
        !FailOn::default().coverage,
        "coverage is asked for, never the default"
    );
    // What the history shows it asked for (client-pause, boundary, renew), it exercised.
    assert_eq!(gate.exit_code(&r).code(), 0, "{:?}", coverage_gaps(&r));
    let c = r.coverage.as_mut().unwrap();
    c.request_shape("waiter");
    c.request_fault("pause");
    assert_eq!(
        coverage_gaps(&r),
        [
            "fault pause: no client op overlapped one",
            "client-fault shape waiter: no stall reached its condition"
        ]
    );
    assert_eq!(gate.exit_code(&r).code(), 1);
    assert_eq!(
        FailOn::default().exit_code(&r).code(),
        0,
        "only when asked for"
    );
    let lines = github_annotations(&r, &gate, "r.html");
    assert!(
        lines[0].starts_with("::error title=lockpick verdict::"),
        "{lines:?}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("::error title=lockpick coverage::"))
            .count(),
        2,
        "{lines:?}"
    );
    // An unknown verdict stays unknown (2), whatever coverage says.
    r.valid = Validity::Unknown;
    assert_eq!(gate.exit_code(&r).code(), 2);
    assert!("coverage,bogus".parse::<FailOn>().is_err());
}
