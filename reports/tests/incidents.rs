//! Incidents first (issue 24): summary.txt and report.html open the violations with one line
//! (one card) per root cause and its consequences counted under it; every violation is still
//! listed by kind and sits in exactly one card. A `token-regressed` whose tokens rose in real
//! time is said to follow from the overlap, not from a token counter going back.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use history::Validity;
use std::path::Path;

/// One history line: `(ms, process, type, f, value)` on lock L0 (`None` process: the nemesis).
type Line = (u64, Option<u64>, &'static str, &'static str, &'static str);

fn write_run_dir(dir: &Path, lines: &[Line]) -> history::Results {
    let mut text = String::new();
    for (i, (ms, p, ty, f, v)) in lines.iter().enumerate() {
        let process = p.map_or("\"nemesis\"".to_string(), |p| p.to_string());
        let lock = if p.is_some() { ",\"lock\":\"L0\"" } else { "" };
        text.push_str(&format!(
            "{{\"index\":{i},\"time_ns\":{},\"process\":{process},\"type\":\"{ty}\",\"f\":\"{f}\"{lock},\"value\":{{{v}}}}}\n",
            ms * 1_000_000
        ));
    }
    let path = dir.join("history.jsonl");
    std::fs::write(&path, text).unwrap();
    let (results, _) = checkers::check_path(&path, &Default::default()).unwrap();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&results).unwrap(),
    )
    .unwrap();
    results
}

/// p0 holds token 3; a restart that forgot everything grants tokens 1 and 2 inside its lease.
const RESET: &[Line] = &[
    (0, Some(0), "invoke", "acquire", "\"ttl_ms\":1000"),
    (10, Some(0), "ok", "acquire", "\"ttl_ms\":1000,\"token\":1"),
    (100, Some(0), "invoke", "release", "\"token\":1"),
    (110, Some(0), "ok", "release", "\"token\":1"),
    (200, Some(0), "invoke", "acquire", "\"ttl_ms\":1000"),
    (210, Some(0), "ok", "acquire", "\"ttl_ms\":1000,\"token\":2"),
    (300, Some(0), "invoke", "release", "\"token\":2"),
    (310, Some(0), "ok", "release", "\"token\":2"),
    (400, Some(0), "invoke", "acquire", "\"ttl_ms\":1000"),
    (410, Some(0), "ok", "acquire", "\"ttl_ms\":1000,\"token\":3"),
    (500, None, "info", "kill", "\"nodes\":[\"n1\"]"),
    (600, None, "info", "restart", "\"nodes\":[\"n1\"]"),
    (700, Some(1), "invoke", "acquire", "\"ttl_ms\":1000"),
    (710, Some(1), "ok", "acquire", "\"ttl_ms\":1000,\"token\":1"),
    (800, Some(1), "invoke", "release", "\"token\":1"),
    (810, Some(1), "ok", "release", "\"token\":1"),
    (900, Some(2), "invoke", "acquire", "\"ttl_ms\":1000"),
    (910, Some(2), "ok", "acquire", "\"ttl_ms\":1000,\"token\":2"),
    (1000, Some(2), "invoke", "release", "\"token\":2"),
    (1010, Some(2), "ok", "release", "\"token\":2"),
    (1300, Some(0), "invoke", "release", "\"token\":3"),
    (
        1310,
        Some(0),
        "fail",
        "release",
        "\"token\":3,\"error\":\"not-holder\"",
    ),
];

#[test]
fn a_token_reset_is_one_incident_first_in_the_summary_and_one_card_in_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let r = write_run_dir(tmp.path(), RESET);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(r.violations.len() >= 6, "{:#?}", r.violations);
    assert_eq!(r.incidents.len(), 1, "{:#?}", r.incidents);
    let w = reports::write_run_reports(tmp.path()).unwrap();

    let summary = std::fs::read_to_string(&w.summary).unwrap();
    let incidents = summary
        .find("1 incident(s)")
        .unwrap_or_else(|| panic!("no incidents line:\n{summary}"));
    let violations = summary.find("\nviolations (").unwrap();
    assert!(incidents < violations, "incidents come first:\n{summary}");
    assert!(
        summary.contains("  1. double grant of L0 at 0.710 s: p1 was granted it (token 1, op 13) while p0's lease (token 3, op 9) surely lasted; the lock's tokens went back from 3 to 1 (op 13)"),
        "{summary}"
    );
    let consequences = summary
        .lines()
        .find(|l| l.trim_start().starts_with("consequences: "))
        .unwrap_or_else(|| panic!("no consequences:\n{summary}"));
    for k in [
        "more double-grant",
        "token-reused",
        "token-regressed",
        "stale-release-accepted",
    ] {
        assert!(consequences.contains(k), "{k} missing: {consequences}");
    }
    // The individual violations are still there, by kind.
    assert!(summary.contains("  token-reused [safety] x2"), "{summary}");

    let html = std::fs::read_to_string(&w.report).unwrap();
    assert_eq!(html.matches("data-violation-card").count(), 1, "one card");
    assert!(
        html.contains(&format!("data-violations=\"{}\"", r.violations.len())),
        "the card holds every violation"
    );
    assert!(html.contains("consequences: "), "the card counts them");
    assert!(html.contains("went back from 3 to 1"));
}

/// p1 is answered token 17 before p0 is answered token 13, both asked at about the same time:
/// whoever came first, the other was granted while its lease surely lasted.
const OVERLAP: &[Line] = &[
    (0, Some(0), "invoke", "acquire", "\"ttl_ms\":1000"),
    (10, Some(1), "invoke", "acquire", "\"ttl_ms\":1000"),
    (40, Some(1), "ok", "acquire", "\"ttl_ms\":1000,\"token\":17"),
    (41, Some(1), "invoke", "release", "\"token\":17"),
    (42, Some(1), "ok", "release", "\"token\":17"),
    (50, Some(0), "ok", "acquire", "\"ttl_ms\":1000,\"token\":13"),
    (1100, Some(0), "invoke", "release", "\"token\":13"),
    (
        1110,
        Some(0),
        "fail",
        "release",
        "\"token\":13,\"error\":\"not-holder\"",
    ),
];

#[test]
fn a_token_regressed_by_exclusivity_is_said_to_follow_from_the_overlap() {
    let tmp = tempfile::tempdir().unwrap();
    let r = write_run_dir(tmp.path(), OVERLAP);
    let kinds: Vec<&str> = r.violations.iter().map(|v| v.kind.as_str()).collect();
    assert_eq!(kinds, ["token-regressed"], "{:#?}", r.violations);
    assert_eq!(r.incidents.len(), 1);
    let inc = &r.incidents[0];
    assert_eq!(inc.cause, "overlap");
    assert_eq!(inc.by_overlap, [0]);
    assert!(
        inc.explanation
            .contains("the token counter did not go back"),
        "{}",
        inc.explanation
    );
    let w = reports::write_run_reports(tmp.path()).unwrap();
    let summary = std::fs::read_to_string(&w.summary).unwrap();
    assert!(
        summary.contains("a consequence of the overlap, not of a token counter going back"),
        "{summary}"
    );
    let html = std::fs::read_to_string(&w.report).unwrap();
    assert!(html.contains("The tokens did not go backwards in real time"));
}

/// The zoomed timeline draws an acquire still waiting for its answer in its own style, with a
/// legend entry, not in the red the legend gives refusals; so is a proving acquire's wait.
#[test]
fn a_waiting_acquire_has_its_own_style_and_legend_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let mut lines = RESET.to_vec();
    // p5 asks inside the double grant's window and the history ends before any answer.
    lines.insert(13, (705, Some(5), "invoke", "acquire", "\"ttl_ms\":1000"));
    write_run_dir(tmp.path(), &lines);
    let w = reports::write_run_reports(tmp.path()).unwrap();
    let html = std::fs::read_to_string(&w.report).unwrap();
    let waiting = html
        .split("<rect ")
        .find(|r| r.contains("data-waiting="))
        .and_then(|r| r.split("</rect>").next())
        .unwrap_or_else(|| panic!("no waiting acquire drawn"));
    assert!(
        !waiting.contains("#c92a2a"),
        "drawn in the refusal red: {waiting}"
    );
    assert!(html.contains("acquire still waiting when the history ends"));
    // The proving acquires' spans (their wait for the lock) are not drawn as refusals.
    let spans: Vec<&str> = html
        .split("<line ")
        .filter_map(|l| l.split("</line>").next())
        .filter(|l| l.contains("data-waiting-op"))
        .collect();
    assert!(!spans.is_empty(), "no proving acquire drawn as waiting");
    assert!(spans.iter().all(|l| !l.contains("#c92a2a")));
    assert!(html.contains("acquire waiting for its answer"));
}

/// p0's lease (token 1) lapses, p1 is granted token 2, the service accepts p0's late renew
/// of token 1, and once p1 has released, p0 renews again and p2 is granted token 3 inside
/// p0's renewed lease, which the second renew makes last past p2's release.
const LATE_RENEW: &[Line] = &[
    (0, Some(0), "invoke", "acquire", "\"ttl_ms\":1000"),
    (10, Some(0), "ok", "acquire", "\"ttl_ms\":1000,\"token\":1"),
    (1100, Some(1), "invoke", "acquire", "\"ttl_ms\":1000"),
    (
        1110,
        Some(1),
        "ok",
        "acquire",
        "\"ttl_ms\":1000,\"token\":2",
    ),
    (
        1200,
        Some(0),
        "invoke",
        "renew",
        "\"token\":1,\"ttl_ms\":1000",
    ),
    (1210, Some(0), "ok", "renew", "\"token\":1,\"ttl_ms\":1000"),
    (1300, Some(1), "invoke", "release", "\"token\":2"),
    (1310, Some(1), "ok", "release", "\"token\":2"),
    (
        1350,
        Some(0),
        "invoke",
        "renew",
        "\"token\":1,\"ttl_ms\":1000",
    ),
    (1360, Some(0), "ok", "renew", "\"token\":1,\"ttl_ms\":1000"),
    (1400, Some(2), "invoke", "acquire", "\"ttl_ms\":1000"),
    (
        1410,
        Some(2),
        "ok",
        "acquire",
        "\"ttl_ms\":1000,\"token\":3",
    ),
    (2300, Some(2), "invoke", "release", "\"token\":3"),
    (2310, Some(2), "ok", "release", "\"token\":3"),
];

/// The headline of a double grant inside a lease that a late renew kept names the renews:
/// p0's lease from its grant (op 1) was surely over when p2 was granted; the late renew
/// (op 5) opened the hold and the next (op 9) made it last.
#[test]
fn a_double_grant_inside_a_late_renewed_lease_names_the_renew_in_its_headline() {
    let tmp = tempfile::tempdir().unwrap();
    let r = write_run_dir(tmp.path(), LATE_RENEW);
    assert_eq!(r.valid, Validity::Invalid);
    let explanations: Vec<&str> = r.incidents.iter().map(|i| i.explanation.as_str()).collect();
    assert!(
        explanations.contains(&"double grant of L0 at 1.410 s: p2 was granted it (token 3, op 11) while p0's lease (token 1, op 1, renewed by ops 5 and 9) surely lasted"),
        "{explanations:#?}\n{:#?}",
        r.violations
    );
}
