//! An unknown verdict says why, in the same words, on summary.txt's verdict line and in
//! report.html's header: the reason is the one that made it unknown (a requested fault never
//! exercised, a history that proves nothing, a run cut short, a checker that could not
//! decide), never a guess. The trial's report said "the history proves too little (see the
//! checker notes)" of a run the coverage gate had made unknown, and the notes said nothing.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use history::{Completeness, Results, Stats};
use reports::escape::html as esc;

/// The checkers of the cases: `(name, verdict, notes)`.
type Checkers<'a> = &'a [(&'a str, &'a str, &'a [&'a str])];

const ALL_VALID: Checkers = &[
    ("mutual-exclusion", "valid", &[]),
    ("deadlock", "valid", &[]),
];

const GATE_NOTE: &str = "requested, not exercised: kill, client-pause, clock (a step or a fast \
                         clock: a slow one only lengthens leases, so it does not count however \
                         often it ran)";

struct Case {
    what: &'static str,
    valid: &'static str,
    checkers: Checkers<'static>,
    notes: &'static [&'static str],
    completeness: Option<Completeness>,
    /// The reasons both outputs must give, in order; none for a verdict that is not unknown.
    reasons: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "the coverage gate made a clean run unknown (the trial's run)",
            valid: "unknown",
            checkers: ALL_VALID,
            notes: &[GATE_NOTE],
            completeness: None,
            reasons: &[GATE_NOTE],
        },
        Case {
            what: "an empty history proves nothing, every checker unknown for that one reason",
            valid: "unknown",
            checkers: &[
                ("mutual-exclusion", "unknown", &[]),
                ("deadlock", "unknown", &[]),
            ],
            notes: &["the history is empty: it proves nothing"],
            completeness: None,
            reasons: &["the history is empty: it proves nothing"],
        },
        Case {
            what: "a run cut short with nothing else missing",
            valid: "unknown",
            checkers: ALL_VALID,
            notes: &[],
            completeness: Some(Completeness::interrupted("stopped by SIGINT (Ctrl-C)")),
            reasons: &["the run did not complete (interrupted)"],
        },
        Case {
            what: "a checker that could not decide on its own",
            valid: "unknown",
            checkers: &[
                ("mutual-exclusion", "valid", &[]),
                (
                    "deadlock",
                    "unknown",
                    &["3 wait-for cycle(s) past the first 1000 were not judged"],
                ),
            ],
            notes: &[],
            completeness: None,
            reasons: &[
                "the deadlock checker could not decide: 3 wait-for cycle(s) past the \
                        first 1000 were not judged",
            ],
        },
        Case {
            what: "a run cut short that had not yet exercised a fault",
            valid: "unknown",
            checkers: ALL_VALID,
            notes: &["requested, not exercised: pause"],
            completeness: Some(Completeness::error("node n1 did not come back")),
            reasons: &[
                "the run did not complete (error)",
                "requested, not exercised: pause",
            ],
        },
        Case {
            what: "a valid run gives no reason",
            valid: "valid",
            checkers: ALL_VALID,
            notes: &[],
            completeness: None,
            reasons: &[],
        },
    ]
}

fn results(c: &Case) -> Results {
    let checkers: Vec<serde_json::Value> = (c.checkers.iter())
        .map(|(name, valid, notes)| {
            serde_json::json!({
                "name": name, "valid": valid, "violations": 0, "warnings": 0, "notes": notes,
            })
        })
        .collect();
    let mut r: Results = serde_json::from_value(serde_json::json!({
        "valid": c.valid,
        "violations": [],
        "warnings": [],
        "checkers": checkers,
        "notes": c.notes,
        "stats": Stats::default(),
    }))
    .unwrap();
    if let Some(cut) = &c.completeness {
        r.set_completeness(cut.clone());
    }
    r
}

#[test]
fn an_unknown_verdict_gives_the_same_reason_in_the_summary_and_the_report_header() {
    for c in cases() {
        let r = results(&c);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("results.json"),
            serde_json::to_string(&r).unwrap(),
        )
        .unwrap();
        let rendered = reports::render_report(dir.path()).unwrap();
        let summary = &rendered.summary_txt;
        let verdict = summary
            .lines()
            .find(|l| l.starts_with("verdict: "))
            .unwrap_or_else(|| panic!("{}: no verdict line\n{summary}", c.what));
        let html = &rendered.report_html;
        let header = &html[..html.find("</header>").expect("the report has a header")];
        if c.reasons.is_empty() {
            assert_eq!(
                verdict,
                format!("verdict: {}", c.valid.to_uppercase()),
                "{}",
                c.what
            );
            assert!(!header.contains("Unknown because"), "{}: {header}", c.what);
            continue;
        }
        // GitHub's summary annotation gives the reasons too, the cut short said once.
        let annotations = reports::github_annotations(&r, &Default::default(), "r.html");
        let first = &annotations[0];
        for reason in c.reasons {
            let said_apart = c.completeness.is_some() && reason.starts_with("the run did not");
            assert_eq!(
                first.contains(reason),
                !said_apart,
                "{}: {reason:?} in {first}",
                c.what
            );
        }
        if c.completeness.is_some() {
            assert!(first.contains("(incomplete run, "), "{}: {first}", c.what);
        }
        let said = c.reasons.join("; ");
        assert_eq!(verdict, format!("verdict: UNKNOWN ({said})"), "{}", c.what);
        assert!(
            header.contains(&format!("Unknown because: {}</p>", esc(&said))),
            "{}: the header does not say {said:?}\n{header}",
            c.what
        );
        // Nothing else is offered as the reason, and the verdict line's reasons are not
        // repeated as notes below it.
        assert!(!html.contains("proves too little"), "{}", c.what);
        for reason in c.reasons {
            assert!(
                !summary.contains(&format!("note: {reason}")),
                "{}: said twice\n{summary}",
                c.what
            );
        }
        // A fault asked for and not exercised comes with what to do about it, in both.
        let hint = "a longer --duration gives each more tries";
        let gated = c
            .notes
            .iter()
            .any(|n| n.starts_with("requested, not exercised"));
        assert_eq!(summary.contains(hint), gated, "{}\n{summary}", c.what);
        assert_eq!(header.contains(hint), gated, "{}", c.what);
    }
}
