//! Why ops did not take effect: the fail and info completions of `results.json`'s
//! `stats.reasons`, one row per op and reason (`acquire refused: held x9584`, `acquire info:
//! http-423 x8352`, `acquire fail: connect: refused x2135`), drawn by the summary and the
//! report alike. A fail in the service's own words is a refusal, not a failure: the lock was
//! held, the answer as the protocol says. The kind of each reason (history::reason) says what
//! it tells about the service.

use history::reason::{kind_of, ReasonKind};
use history::Results;
use std::fmt::Write;

/// Reasons shown per op and outcome before the rest are counted together.
const SHOWN: usize = 8;

/// One line of the breakdown.
pub(crate) struct Row<'a> {
    pub op: &'a str,
    /// `refused`, `fail` or `info`.
    pub label: &'static str,
    pub reason: &'a str,
    pub count: u64,
    /// What the kind of reason tells, for those a reader must act on.
    pub meaning: &'static str,
}

fn meaning(kind: ReasonKind) -> &'static str {
    match kind {
        ReasonKind::Refused => "",
        ReasonKind::Unexpected => "an answer the adapter does not understand",
        ReasonKind::Unreachable => "nothing answered",
        ReasonKind::Lost => "",
        ReasonKind::Unavailable => "the service said it cannot decide now",
    }
}

/// Every row, per op: the outcomes in order (fail, then info), each by count, the most first;
/// past [`SHOWN`] per outcome, one row `other reasons` with the rest.
pub(crate) fn rows(r: &Results) -> Vec<Row<'_>> {
    let mut out = Vec::new();
    for (op, by_outcome) in &r.stats.reasons {
        for (outcome, by_reason) in by_outcome {
            let mut reasons: Vec<(&String, &u64)> = by_reason.iter().collect();
            reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let rest: u64 = reasons.iter().skip(SHOWN).map(|(_, n)| **n).sum();
            for (reason, n) in reasons.into_iter().take(SHOWN) {
                let kind = kind_of(reason);
                let label = match (outcome.as_str(), kind) {
                    ("fail", ReasonKind::Refused) => "refused",
                    ("fail", _) => "fail",
                    _ => "info",
                };
                out.push(Row {
                    op,
                    label,
                    reason,
                    count: *n,
                    meaning: meaning(kind),
                });
            }
            if rest > 0 {
                out.push(Row {
                    op,
                    label: if outcome == "fail" { "fail" } else { "info" },
                    reason: "other reasons",
                    count: rest,
                    meaning: "",
                });
            }
        }
    }
    out
}

/// Fail completions of `op` that were refusals.
pub(crate) fn refused(r: &Results, op: &str) -> u64 {
    r.stats
        .reasons
        .get(op)
        .and_then(|o| o.get("fail"))
        .map(|by| {
            by.iter()
                .filter(|(reason, _)| kind_of(reason) == ReasonKind::Refused)
                .map(|(_, n)| n)
                .sum()
        })
        .unwrap_or(0)
}

/// The summary's section.
pub(crate) fn text(s: &mut String, r: &Results) {
    let rows = rows(r);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nwhy ops did not take effect (refused: the service said no; fail: surely not done; \
         info: indeterminate):"
    );
    for row in rows {
        let what = format!("{} {}: {}", row.op, row.label, row.reason);
        let _ = write!(s, "  {} x{}", crate::escape::plain(&what), row.count);
        if !row.meaning.is_empty() {
            let _ = write!(s, "  ({})", row.meaning);
        }
        let _ = writeln!(s);
    }
}

/// The report's table.
pub(crate) fn html(s: &mut String, r: &Results) {
    let rows = rows(r);
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "<h3 id=\"reasons\">Why ops did not take effect</h3><p class=\"muted\">refused: the \
         service said no in its own words (the lock was held); fail: surely not done; info: \
         indeterminate. The reason is the one each op recorded in the history.</p><table><tr>\
         <th>op</th><th>outcome</th><th>reason</th><th>count</th><th></th></tr>",
    );
    for row in rows {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"n\">{}</td><td>{}</td></tr>",
            crate::escape::html(row.op),
            row.label,
            crate::escape::html(row.reason),
            row.count,
            row.meaning
        );
    }
    s.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(reasons: &[(&str, &str, &str, u64)]) -> Results {
        let mut r: Results = serde_json::from_value(serde_json::json!({
            "valid": "valid", "violations": [], "warnings": [], "checkers": [],
            "stats": {"events": 0, "duration_ns": 0, "ops": {}, "latency": {}, "grants": 0,
                      "nemesis_events": 0}
        }))
        .unwrap();
        for (op, outcome, reason, n) in reasons {
            r.stats
                .reasons
                .entry(op.to_string())
                .or_default()
                .entry(outcome.to_string())
                .or_default()
                .insert(reason.to_string(), *n);
        }
        r
    }

    #[test]
    fn refusals_are_called_refused_and_the_rest_by_what_they_are() {
        let r = results(&[
            ("acquire", "fail", "held", 9584),
            ("acquire", "fail", "connect: refused", 2135),
            ("acquire", "info", "http-423", 8352),
            ("acquire", "info", "timeout", 3),
        ]);
        let mut s = String::new();
        text(&mut s, &r);
        for want in [
            "acquire refused: held x9584\n",
            "acquire fail: connect: refused x2135  (nothing answered)",
            "acquire info: http-423 x8352  (an answer the adapter does not understand)",
            "acquire info: timeout x3\n",
        ] {
            assert!(s.contains(want), "{want:?} missing from\n{s}");
        }
        assert!(
            s.find("held").unwrap() < s.find("connect").unwrap(),
            "most first"
        );
        assert_eq!(refused(&r, "acquire"), 9584);
        assert_eq!(refused(&r, "renew"), 0);
    }

    #[test]
    fn past_the_shown_reasons_the_rest_are_one_row() {
        let many: Vec<(String, u64)> = (0..12).map(|i| (format!("word-{i:02}"), 100 - i)).collect();
        let rows: Vec<(&str, &str, &str, u64)> = many
            .iter()
            .map(|(w, n)| ("release", "fail", w.as_str(), *n))
            .collect();
        let r = results(&rows);
        let shown = super::rows(&r);
        assert_eq!(shown.len(), SHOWN + 1);
        let last = shown.last().unwrap();
        assert_eq!(last.reason, "other reasons");
        assert_eq!(last.count, (8..12).map(|i| 100 - i).sum::<u64>());
    }

    #[test]
    fn html_escapes_what_the_service_said() {
        let r = results(&[
            ("acquire", "info", "http-500", 1),
            ("acquire", "fail", "<b>", 2),
        ]);
        let mut s = String::new();
        html(&mut s, &r);
        assert!(s.contains("&lt;b&gt;"), "{s}");
        assert!(!s.contains("<b>"), "{s}");
    }
}
