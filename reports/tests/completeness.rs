//! An incomplete run as each renderer shows it: summary.txt's first line, JUnit's `<error>`,
//! the GitHub summary annotation, and a gate that never passes it.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use history::{Completeness, ExitCode, Results, Stats};
use reports::{github_annotations, junit_xml, summary_text, FailOn};

/// Results with one checker and no violation (built from JSON: every other field defaults).
fn clean() -> Results {
    serde_json::from_value(serde_json::json!({
        "valid": true,
        "violations": [],
        "warnings": [],
        "checkers": [{"name": "mutual-exclusion", "valid": true, "violations": 0, "warnings": 0}],
        "stats": Stats::default(),
    }))
    .unwrap()
}

#[test]
fn a_complete_run_shows_nothing_of_it() {
    let mut r = clean();
    r.set_completeness(Completeness::complete());
    assert!(summary_text(&r).starts_with("verdict: VALID"));
    let x = junit_xml(&r, "t", &FailOn::default());
    assert!(x.contains("errors=\"0\"") && !x.contains("<error"), "{x}");
    assert_eq!(FailOn::default().exit_code(&r), ExitCode::Valid);
}

/// (how the run ended, the JUnit error type)
#[test]
fn an_incomplete_run_says_so_first_everywhere() {
    for c in [
        Completeness::interrupted("stopped by SIGINT (Ctrl-C) after 1.0 s"),
        Completeness::error("node n1 did not come back after 3 restarts"),
    ] {
        let mut r = clean();
        r.set_completeness(c.clone());
        let s = summary_text(&r);
        let first = s.lines().next().unwrap();
        assert_eq!(
            first,
            format!("run: INCOMPLETE ({}): {}", c.state, c.reason),
            "{s}"
        );
        assert!(s.contains("verdict: UNKNOWN"), "{s}");
        let x = junit_xml(&r, "t", &FailOn::default());
        assert!(
            x.contains("tests=\"2\"") && x.contains("errors=\"1\""),
            "{x}"
        );
        assert!(
            x.contains(&format!(
                "<error type=\"{}\" message=\"incomplete run: ",
                c.state
            )),
            "{x}"
        );
        let a = github_annotations(&r, &FailOn::default(), "r.html");
        assert!(a[0].contains("incomplete run"), "{a:?}");
        assert_eq!(FailOn::default().exit_code(&r), ExitCode::Unknown);
    }
}

/// An invalid run cut short stays invalid, and even findings the policy ignores do not let
/// it pass: what was never recorded may hold what the policy counts.
#[test]
fn an_incomplete_run_passes_no_gate() {
    let mut r: Results = serde_json::from_value(serde_json::json!({
        "valid": false,
        "violations": [{"kind": "lock-stuck", "ops": [1], "window_ns": [0, 1], "explanation": "x"}],
        "warnings": [],
        "checkers": [],
        "stats": Stats::default(),
    }))
    .unwrap();
    let safety_only: FailOn = "safety".parse().unwrap();
    assert_eq!(safety_only.exit_code(&r), ExitCode::Valid);
    r.set_completeness(Completeness::interrupted("Ctrl-C"));
    assert_eq!(r.valid, history::Validity::Invalid);
    assert_eq!(safety_only.exit_code(&r), ExitCode::Unknown);
    assert_eq!(FailOn::default().exit_code(&r), ExitCode::Invalid);
}
