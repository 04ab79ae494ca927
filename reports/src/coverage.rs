//! The coverage table ("what this run exercised") in summary.txt and report.html, and the
//! gaps `--fail-on coverage` fails on. Both renderers draw [`history::Coverage::rows`], the
//! one list of rows, so the two files always show the same conditions; a count of 0 is written
//! `none`, so a condition the run never reached reads as such.

use crate::escape::{html as esc, plain};
use history::Results;
use std::fmt::Write;

/// Why `--fail-on coverage` fails `r`: each requested fault kind or client-fault shape it
/// exercised nowhere, or the absence of coverage in a results.json written before it existed.
pub fn coverage_gaps(r: &Results) -> Vec<String> {
    match &r.coverage {
        Some(c) => c.missing(),
        None => vec![NOT_COUNTED.to_string()],
    }
}

const NOT_COUNTED: &str = "results.json has no coverage (written by an older lockpick): \
                           `lockpick check RUN_DIR` counts it from the history";

fn count(n: u64) -> String {
    if n == 0 {
        "none".to_string()
    } else {
        n.to_string()
    }
}

/// The table as text: one row per condition, the group named on its first row.
pub(crate) fn text(s: &mut String, r: &Results) {
    let Some(c) = &r.coverage else {
        let _ = writeln!(s, "\ncoverage: not counted: {NOT_COUNTED}");
        return;
    };
    let _ = writeln!(
        s,
        "\ncoverage (what this run exercised; none = never reached; docs/checkers.md):"
    );
    let mark = format!("  <- {}", gap_words(r));
    let mut last = String::new();
    for row in c.rows() {
        let group = if row.group == last { "" } else { &row.group };
        let _ = writeln!(
            s,
            "  {:<36} {:<38} {:>6}{}",
            plain(group),
            plain(&row.condition),
            count(row.count),
            if row.missing { mark.as_str() } else { "" }
        );
        last.clone_from(&row.group);
    }
    let lead = if stopped(r) {
        "not reached"
    } else {
        "not exercised"
    };
    for gap in c.missing() {
        let _ = writeln!(s, "  {lead}: {}", plain(&gap));
    }
}

/// Whether the run stopped at its first proven violation (`--stop-on-violation`): what it
/// asked for and never reached is then no gap of it.
fn stopped(r: &Results) -> bool {
    r.incomplete()
        .is_some_and(|c| c.state == history::RunState::Stopped)
}

/// How a requested row never exercised is marked.
fn gap_words(r: &Results) -> &'static str {
    if stopped(r) {
        "not reached: the run stopped at its first proven violation"
    } else {
        history::coverage::NOT_EXERCISED
    }
}

/// The table as an HTML section, in the report's table style.
pub(crate) fn html(s: &mut String, r: &Results) {
    s.push_str("<h2 id=\"coverage\">What this run exercised</h2>");
    let Some(c) = &r.coverage else {
        let _ = write!(
            s,
            "<p class=\"muted\">Not counted: {}.</p>",
            esc(NOT_COUNTED)
        );
        return;
    };
    s.push_str("<p class=\"muted\">Every condition the checkers count (definitions in docs/checkers.md, \"Coverage\"); <i>none</i> means the run never reached it.</p>");
    s.push_str("<table class=\"coverage\"><tr><th>what</th><th>condition</th><th>count</th></tr>");
    let rows = c.rows();
    let badge = if stopped(r) { "b-unknown" } else { "b-invalid" };
    let mut i = 0;
    // Bounded by the rows: each pass takes one group's rows.
    while i < rows.len() {
        let n = rows[i..]
            .iter()
            .take_while(|r| r.group == rows[i].group)
            .count();
        for (j, row) in rows[i..i + n].iter().enumerate() {
            s.push_str("<tr>");
            if j == 0 {
                let _ = write!(s, "<td rowspan=\"{n}\">{}</td>", esc(&row.group));
            }
            let _ = write!(
                s,
                "<td>{}{}</td><td class=\"n{}\">{}</td></tr>",
                esc(&row.condition),
                if row.missing {
                    format!(" <span class=\"badge {badge}\">{}</span>", gap_words(r))
                } else {
                    String::new()
                },
                if row.count == 0 { " muted" } else { "" },
                count(row.count)
            );
        }
        i += n;
    }
    s.push_str("</table>");
}
