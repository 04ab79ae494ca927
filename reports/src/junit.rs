//! `junit.xml`: one test case per checker, failures carry the violation sentences, so any CI
//! that reads JUnit shows which rule broke and why.

use crate::escape::xml;
use crate::FailOn;
use checkers::checker_of;
use history::{CheckerResult, Coverage, Results, Validity, Violation};
use std::fmt::Write;

/// Sentences listed per failing checker; the rest are counted (results.json has them all).
const SENTENCES_MAX: usize = 50;

/// Renders `junit.xml`. `suite` names the test (the run's name). A checker whose verdict is
/// `unknown` is a skipped case with its notes: it proved nothing, which is neither a pass nor a
/// failure. Warnings go to the case's `system-out`. What fails is what `gate` (the run's
/// `--fail-on`) counts, as the exit code does: a violation of a class it leaves out, or a
/// coverage gap it leaves out, is said in the case's `system-out`, not as a failure, so a CI
/// that reads JUnit is red exactly when the step is.
pub fn junit_xml(r: &Results, suite: &str, gate: &FailOn) -> String {
    let failures = r.checkers.iter().filter(|c| fails(r, c, gate)).count();
    let checkers_skipped = r
        .checkers
        .iter()
        .filter(|c| c.valid == Validity::Unknown || c.status() == "not-judged")
        .count();
    let time_s = r.stats.duration_ns as f64 / 1e9;
    // A run cut short is one more case, in error: CI shows the harness failed, not a checker.
    // One stopped at its first proven violation did what it was asked: its checker fails.
    // It has a passing case saying so, and what it asked for and never reached is skipped,
    // not failed.
    let stopped = r
        .incomplete()
        .filter(|c| c.state == history::RunState::Stopped);
    let incomplete = r.incomplete().filter(|_| stopped.is_none());
    let errors = usize::from(incomplete.is_some());
    // What the verdict rests on is a case of its own: a run that exercised less than it asked
    // for must not read green.
    let coverage = r
        .coverage
        .as_ref()
        .filter(|c| !c.cells.is_empty() || !c.needs.is_empty());
    let unmet = coverage.map(|c| c.not_exercised()).unwrap_or_default();
    // A gap fails the case when the gate counts coverage, or when it made the verdict unknown
    // (which exits 2 whatever the gate says).
    let unmet_fails =
        !unmet.is_empty() && stopped.is_none() && (gate.coverage || r.valid == Validity::Unknown);
    let failures = failures + usize::from(unmet_fails);
    let skipped = checkers_skipped + usize::from(!unmet.is_empty() && !unmet_fails);
    let tests = r.checkers.len()
        + errors
        + usize::from(stopped.is_some())
        + usize::from(coverage.is_some());
    let mut s = String::new();
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"lockpick\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time_s:.3}\">"
    );
    let _ = writeln!(
        s,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time_s:.3}\">",
        xml(suite)
    );
    let _ = writeln!(
        s,
        "    <properties>\n      <property name=\"verdict\" value=\"{}\"/>\n      <property name=\"events\" value=\"{}\"/>\n      <property name=\"grants\" value=\"{}\"/>\n    </properties>",
        r.valid, r.stats.events, r.stats.grants
    );
    if let Some(c) = incomplete {
        let _ = writeln!(
            s,
            "    <testcase classname=\"lockpick.{}\" name=\"run-completeness\" time=\"0\">\n      <error type=\"{}\" message=\"{}\"/>\n    </testcase>",
            xml(suite),
            c.state,
            xml(&format!("incomplete run: {}", c.headline()))
        );
    }
    if let Some(c) = stopped {
        let _ = writeln!(
            s,
            "    <testcase classname=\"lockpick.{}\" name=\"run-completeness\" time=\"0\">\n      <system-out>{}</system-out>\n    </testcase>",
            xml(suite),
            xml(&format!("stopped at the first proven violation: {}", c.reason))
        );
    }
    for c in &r.checkers {
        checker_case(&mut s, r, c, suite, gate);
    }
    if let Some(c) = coverage {
        let why_not_failed = match (stopped.is_some(), unmet_fails) {
            (true, _) => Some(NotFailed::Stopped),
            (false, false) => Some(NotFailed::Ungated),
            (false, true) => None,
        };
        coverage_case(&mut s, c, &unmet, why_not_failed, suite);
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

/// Whether checker `c`'s case fails: it proved a violation `gate` counts.
fn fails(r: &Results, c: &CheckerResult, gate: &FailOn) -> bool {
    r.violations
        .iter()
        .any(|v| checker_of(v.kind) == c.name && gate.counts(v.kind))
}

/// Why a coverage gap is not a failure.
#[derive(Clone, Copy, PartialEq)]
enum NotFailed {
    /// The run stopped at its first proven violation before reaching it.
    Stopped,
    /// The run's `--fail-on` leaves coverage out.
    Ungated,
}

/// One checker's test case: empty when it passed with nothing to say, else its failure (the
/// violation sentences the gate counts), its skip (unknown or not judged) and its notes,
/// warnings and the violations the gate does not count.
fn checker_case(s: &mut String, r: &Results, c: &CheckerResult, suite: &str, gate: &FailOn) {
    let _ = write!(
        s,
        "    <testcase classname=\"lockpick.{}\" name=\"{}\" time=\"0\"",
        xml(suite),
        xml(&c.name)
    );
    let violations: Vec<&Violation> = r
        .violations
        .iter()
        .filter(|v| checker_of(v.kind) == c.name)
        .collect();
    let warnings: Vec<&Violation> = r
        .warnings
        .iter()
        .filter(|v| checker_of(v.kind) == c.name)
        .collect();
    if c.valid == Validity::Valid
        && warnings.is_empty()
        && c.notes.is_empty()
        && c.not_judged.is_none()
    {
        s.push_str("/>\n");
        return;
    }
    s.push_str(">\n");
    let failed = fails(r, c, gate);
    match c.valid {
        Validity::Invalid if failed => failure(s, c, &violations),
        // Proven, but of a class the run's --fail-on leaves out: said, not failed.
        Validity::Invalid => {}
        Validity::Unknown => {
            let _ = writeln!(
                s,
                "      <skipped message=\"unknown: {}\"/>",
                xml(&c.notes.join("; "))
            );
        }
        // It looked at nothing: neither a pass nor a failure.
        Validity::Valid => {
            if let Some(why) = &c.not_judged {
                let _ = writeln!(s, "      <skipped message=\"not judged: {}\"/>", xml(why));
            }
        }
    }
    // A failing case's sentences are in its failure; a passing one's are told here.
    let ungated: &[&Violation] = if failed { &[] } else { &violations };
    if !warnings.is_empty() || !c.notes.is_empty() || !ungated.is_empty() {
        system_out(s, c, &warnings, ungated);
    }
    s.push_str("    </testcase>\n");
}

/// A failing checker's `<failure>`: its violations' kinds, count and first sentence as the
/// message, and up to [`SENTENCES_MAX`] sentences with their ops as the body.
fn failure(s: &mut String, c: &CheckerResult, violations: &[&Violation]) {
    let kinds: Vec<String> = {
        let mut k: Vec<String> = violations.iter().map(|v| v.kind.to_string()).collect();
        k.sort();
        k.dedup();
        k
    };
    let _ = write!(
        s,
        "      <failure type=\"{}\" message=\"{} violation(s): {}\">",
        xml(&kinds.join(",")),
        c.violations,
        xml(violations
            .first()
            .map(|v| v.explanation.as_str())
            .unwrap_or(""))
    );
    for v in violations.iter().take(SENTENCES_MAX) {
        let ops: Vec<String> = v.ops.iter().map(u64::to_string).collect();
        let _ = write!(
            s,
            "{}&#10;",
            xml(&format!(
                "[{}] {} (ops {})",
                v.kind,
                v.explanation,
                ops.join(", ")
            ))
        );
    }
    if violations.len() > SENTENCES_MAX {
        let _ = write!(
            s,
            "... and {} more in results.json&#10;",
            violations.len() - SENTENCES_MAX
        );
    }
    s.push_str("</failure>\n");
}

/// A checker's notes, the violations the gate does not count and up to [`SENTENCES_MAX`] of
/// its warnings, as the case's `system-out`.
fn system_out(s: &mut String, c: &CheckerResult, warnings: &[&Violation], ungated: &[&Violation]) {
    s.push_str("      <system-out>");
    if !ungated.is_empty() {
        let _ = write!(
            s,
            "{}&#10;",
            xml(&format!(
                "{} violation(s) proven, not counted by the run's --fail-on:",
                ungated.len()
            ))
        );
    }
    for v in ungated.iter().take(SENTENCES_MAX) {
        let _ = write!(
            s,
            "{}&#10;",
            xml(&format!("[{}] {}", v.kind, v.explanation))
        );
    }
    for n in &c.notes {
        let _ = write!(s, "{}&#10;", xml(&format!("note: {n}")));
    }
    for v in warnings.iter().take(SENTENCES_MAX) {
        let _ = write!(
            s,
            "{}&#10;",
            xml(&format!("[{}] {}", v.kind, v.explanation))
        );
    }
    // The checker's figure counts the warnings results.json lists and those it only counts.
    let found = (c.warnings as usize).max(warnings.len());
    let shown = warnings.len().min(SENTENCES_MAX);
    if found > shown {
        let _ = write!(s, "... and {} more warnings&#10;", found - shown);
    }
    s.push_str("</system-out>\n");
}

/// The coverage case: failed when a requested cell was not exercised (`unmet`), skipped when
/// that is `not_failed` (the run stopped at its first proven violation before reaching it, or
/// its gate leaves coverage out), with every cell's started and exercised counts as its
/// `system-out`.
fn coverage_case(
    s: &mut String,
    c: &Coverage,
    unmet: &[String],
    not_failed: Option<NotFailed>,
    suite: &str,
) {
    let _ = writeln!(
        s,
        "    <testcase classname=\"lockpick.{}\" name=\"coverage\" time=\"0\">",
        xml(suite)
    );
    let skip = |s: &mut String, why: &str| {
        let _ = writeln!(
            s,
            "      <skipped message=\"{}\"/>",
            xml(&format!("{why}: {}", unmet.join(", ")))
        );
    };
    if unmet.is_empty() {
    } else if not_failed == Some(NotFailed::Stopped) {
        skip(s, history::coverage::NOT_REACHED);
    } else if not_failed == Some(NotFailed::Ungated) {
        skip(
            s,
            "requested, not exercised (not counted by the run's --fail-on, which leaves coverage out)",
        );
    } else {
        let _ = writeln!(
            s,
            "      <failure type=\"not-exercised\" message=\"{}\"/>",
            xml(&format!("requested, not exercised: {}", unmet.join(", ")))
        );
    }
    s.push_str("      <system-out>");
    for cell in &c.cells {
        let _ = write!(
            s,
            "{}&#10;",
            xml(&format!(
                "{}: started {}, exercised {}",
                cell.label(),
                cell.started,
                cell.exercised
            ))
        );
    }
    s.push_str("</system-out>\n    </testcase>\n");
}
