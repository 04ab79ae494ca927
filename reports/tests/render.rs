//! Data-driven tests of the renderers: a fixture run directory in, files out. summary.txt and
//! junit.xml are snapshot-tested (insta); report.html is checked for what it must and must not
//! contain (its Chromium checks are in the workspace's tests/report.rs).

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use history::{
    ActiveFault, CheckerResult, Percentiles, Results, Stats, Validity, Violation, ViolationKind,
};
use reports::{github_annotations, junit_xml, summary_text, FailOn};
use std::collections::BTreeMap;
use std::path::Path;

const SCRIPT: &str = "<script>alert(1)</script>";

fn violation(kind: ViolationKind, lock: &str, ops: &[u64], sentence: &str) -> Violation {
    Violation {
        cycle: Vec::new(),
        kind,
        lock: Some(lock.to_string()),
        ops: ops.to_vec(),
        window_ns: [2_000_000, 400_000_000],
        nemesis: vec![ActiveFault {
            index: 6,
            f: "start-pause".into(),
            value: serde_json::json!({"nodes": ["n1"]}),
        }],
        explanation: sentence.to_string(),
    }
}

fn checker(name: &str, valid: Validity, violations: u64, warnings: u64) -> CheckerResult {
    CheckerResult {
        name: name.into(),
        valid,
        violations,
        warnings,
        notes: vec![],
        not_judged: None,
    }
}

/// Results with a double grant on a lock named like a script, a lock-stuck, a warning and an
/// unknown checker: every branch of the renderers.
/// A run that stalled one holder just past its lease, paused n1, and asked for a waiter stall
/// it never made: the coverage table shows counts, `none` rows and the gap.
fn coverage() -> history::Coverage {
    let mut c = history::Coverage {
        stalls: 1,
        ..Default::default()
    };
    c.holder.count = 1;
    c.holder.wake_up.renew = 1;
    c.holder.lease_bound.just_past = 1;
    c.holder.next_grant.just_after = 1;
    c.request_fault("pause");
    c.request_shape("waiter");
    let pause = c.faults.get_mut("pause").unwrap();
    pause.started = 1;
    pause.ops_during = 4;
    pause.grants_during = 1;
    pause.nodes.insert("n1".into(), 1);
    c
}

fn fixture() -> Results {
    let lock = format!("{SCRIPT}\"'🔒");
    let mut ops = BTreeMap::new();
    ops.insert(
        "acquire".to_string(),
        BTreeMap::from([("ok".to_string(), 2), ("fail".to_string(), 1)]),
    );
    let mut latency = BTreeMap::new();
    latency.insert(
        "acquire".to_string(),
        Percentiles {
            count: 3,
            p50_ms: 1.0,
            p95_ms: 2.0,
            p99_ms: 2.5,
            max_ms: 3.0,
        },
    );
    let mut unknown = checker("lease-expiry", Validity::Unknown, 0, 0);
    unknown
        .notes
        .push("no lease evidence & <nothing> to judge".into());
    Results {
        valid: Validity::Invalid,
        violations: vec![
            violation(
                ViolationKind::DoubleGrant,
                &lock,
                &[1, 3],
                &format!("p0 held {lock} with token 1, yet p1 was granted {lock} with token 2\n::error::forged"),
            ),
            violation(
                ViolationKind::LockStuck,
                "L1",
                &[5],
                "L1 stayed held for 9.000 s after every lease surely expired",
            ),
        ],
        incidents: vec![],
        warnings: vec![violation(
            ViolationKind::UnsafeOverlap,
            "L0",
            &[1, 9],
            "p0's lease on L0 was surely dead, yet p0 wrote with token 1; the store rejected it (stale-token)",
        )],
        warnings_unlisted: 0,
        expected: vec![],
        checkers: vec![
            checker("mutual-exclusion", Validity::Invalid, 1, 1),
            unknown,
            checker("liveness", Validity::Invalid, 1, 0),
            CheckerResult {
                not_judged: Some("no counter write and no final read".into()),
                ..checker("counter", Validity::Valid, 0, 0)
            },
        ],
        stats: Stats {
            events: 12,
            duration_ns: 510_000_000,
            ops,
            latency,
            grants: 2,
            nemesis_events: 2,
            faults: BTreeMap::from([("pause".to_string(), 1)]),
            reasons: BTreeMap::from([(
                "acquire".to_string(),
                BTreeMap::from([(
                    "fail".to_string(),
                    BTreeMap::from([("held".to_string(), 1)]),
                )]),
            )]),
            extra: BTreeMap::new(),
        },
        coverage: Some(coverage()),
        notes: vec!["history.jsonl:13: truncated final line dropped".into()],
        completeness: None,
        judged_from: None,
        evidence: BTreeMap::from([(
            3,
            serde_json::Map::from_iter([
                ("redis_node".to_string(), serde_json::json!("127.0.0.1:7001")),
                ("redis_offset".to_string(), serde_json::json!(42)),
            ]),
        )]),
    }
}

#[test]
fn summary_snapshot() {
    let s = summary_text(&fixture());
    assert!(
        !s.lines().any(|l| l.starts_with("::")),
        "no line can start a workflow command"
    );
    insta::assert_snapshot!("summary_txt", s);
}

#[test]
fn junit_snapshot() {
    let x = junit_xml(&fixture(), "nightly <mutex> & \"racy\"", &FailOn::default());
    assert!(!x.contains(SCRIPT));
    insta::assert_snapshot!("junit_xml", x);
}

#[test]
fn junit_of_a_clean_run_has_only_passing_cases() {
    let r = Results {
        valid: Validity::Valid,
        violations: vec![],
        incidents: vec![],
        warnings: vec![],
        warnings_unlisted: 0,
        expected: vec![],
        checkers: vec![
            checker("mutual-exclusion", Validity::Valid, 0, 0),
            checker("liveness", Validity::Valid, 0, 0),
        ],
        stats: Stats::default(),
        coverage: None,
        notes: vec![],
        completeness: None,
        judged_from: None,
        evidence: Default::default(),
    };
    let x = junit_xml(&r, "t", &FailOn::default());
    assert!(x.contains("tests=\"2\" failures=\"0\""), "{x}");
    assert!(!x.contains("<failure"), "{x}");
}

#[test]
fn fail_on_policies() {
    let r = fixture();
    let code = |s: &str| s.parse::<FailOn>().unwrap().exit_code(&r).code();
    assert_eq!(FailOn::default().exit_code(&r).code(), 1);
    assert_eq!(code("safety"), 1);
    assert_eq!(code("liveness"), 1);
    assert_eq!(code("warnings"), 1);
    let mut safety_only = r.clone();
    safety_only
        .violations
        .retain(|v| v.kind == ViolationKind::LockStuck);
    let code2 = |s: &str| s.parse::<FailOn>().unwrap().exit_code(&safety_only).code();
    assert_eq!(code2("safety"), 0, "liveness only is not a safety failure");
    assert_eq!(code2("safety,liveness"), 1);
    let mut clean = r.clone();
    clean.violations.clear();
    clean.valid = Validity::Valid;
    assert_eq!(FailOn::default().exit_code(&clean).code(), 0);
    assert_eq!(
        "warnings"
            .parse::<FailOn>()
            .unwrap()
            .exit_code(&clean)
            .code(),
        1
    );
    clean.valid = Validity::Unknown;
    assert_eq!(
        FailOn::default().exit_code(&clean).code(),
        2,
        "unknown never passes"
    );
    assert!("safety,bogus".parse::<FailOn>().is_err());
}

#[test]
fn annotations_are_one_line_each() {
    let r = fixture();
    let lines = github_annotations(&r, &FailOn::default(), "runs/x/report.html");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].starts_with("::error title=lockpick verdict::INVALID: 2 violation(s), 1 warning(s): double-grant x1, lock-stuck x1, unsafe-overlap x1"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("::error title=lockpick double-grant::"));
    assert!(lines[1].contains("%0A::error::forged"));
    assert!(lines[2].starts_with("::error title=lockpick lock-stuck::"));
    assert!(lines[3].starts_with("::warning title=lockpick unsafe-overlap::"));
    for l in &lines {
        assert!(!l.contains('\n'));
    }
}

#[test]
fn annotations_are_one_summary_and_at_most_ten_details() {
    let mut r = fixture();
    let v = r.violations[0].clone();
    r.violations = (0..30).map(|_| v.clone()).collect();
    let lines = github_annotations(&r, &FailOn::default(), "r.html");
    assert!(
        lines[0].starts_with("::error title=lockpick verdict::"),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 1 + 10 + 1, "{lines:#?}");
    assert!(
        lines[11].starts_with("::notice::21 more finding(s)"),
        "{}",
        lines[11]
    );
}

/// Writes a run directory: a history with a double grant, a pause, a store write and a lock
/// name holding markup; results as given; a config with a seed above i64::MAX.
fn run_dir(dir: &Path, results: &Results) {
    let l = serde_json::to_string(&format!("{SCRIPT}\"'🔒")).unwrap();
    let history = format!(
        r#"{{"index":0,"time_ns":1000000,"process":0,"type":"invoke","f":"acquire","lock":{l},"value":{{"ttl_ms":1000}}}}
{{"index":1,"time_ns":2000000,"process":0,"type":"ok","f":"acquire","lock":{l},"value":{{"token":1,"ttl_ms":1000}}}}
{{"index":2,"time_ns":3000000,"process":1,"type":"invoke","f":"acquire","lock":{l},"value":{{"ttl_ms":1000}}}}
{{"index":3,"time_ns":4000000,"process":1,"type":"ok","f":"acquire","lock":{l},"value":{{"token":2,"ttl_ms":1000}}}}
{{"index":4,"time_ns":5000000,"process":0,"type":"invoke","f":"write","key":"k0","value":{{"token":1,"value":1}}}}
{{"index":5,"time_ns":6000000,"process":0,"type":"ok","f":"write","key":"k0","value":{{"token":1,"value":1,"seq":1}}}}
{{"index":6,"time_ns":7000000,"process":"nemesis","type":"info","f":"start-pause","value":{{"nodes":["n1"]}}}}
{{"index":7,"time_ns":300000000,"process":"nemesis","type":"info","f":"stop-pause","value":{{"nodes":["n1"]}}}}
{{"index":8,"time_ns":400000000,"process":0,"type":"invoke","f":"release","lock":{l},"value":{{"token":1}}}}
{{"index":9,"time_ns":410000000,"process":0,"type":"ok","f":"release","lock":{l},"value":{{"token":1}}}}
{{"index":10,"time_ns":1500000000,"process":1,"type":"invoke","f":"renew","lock":{l},"value":{{"token":2,"ttl_ms":1000}}}}
{{"index":11,"time_ns":1510000000,"process":1,"type":"fail","f":"renew","lock":{l},"value":{{"error":"not-holder"}}}}
"#
    );
    std::fs::write(dir.join("history.jsonl"), history).unwrap();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(results).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "# Resolved configuration of this run.\n# Rerun: lockpick run --seed 18446744073709551615 --workload mutex\n\nname = \"fixture\"\nseed = 18446744073709551615\nworkload = \"mutex\"\nttl_ms = 1000\nnemesis = [\"pause\"]\n\n[target]\nkind = \"embedded\"\n",
    )
    .unwrap();
}

#[test]
fn report_html_is_self_contained_and_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let r = fixture();
    run_dir(tmp.path(), &r);
    let w = reports::write_run_reports(tmp.path()).unwrap();
    let html = std::fs::read_to_string(&w.report).unwrap();
    assert!(!html.contains(SCRIPT), "unescaped script tag");
    assert_eq!(
        html.matches("<script").count(),
        1,
        "only the report's own script"
    );
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;🔒"));
    assert_eq!(html.matches("data-violation-card").count(), 2);
    assert!(html.contains("lockpick run --seed 18446744073709551615 --workload mutex"));
    assert!(html.contains("Content-Security-Policy"));
    for external in ["http://", "https://", "src=\"", "url(http", "@import"] {
        let hits: Vec<_> = html
            .match_indices(external)
            .filter(|(i, _)| !html[*i..].starts_with("http://www.w3.org/2000/svg"))
            .collect();
        assert!(
            hits.is_empty(),
            "external reference {external:?} in the report"
        );
    }
    // The zoomed timeline shows both holders and their tokens.
    assert!(html.contains(">token 1<") && html.contains(">token 2<"));
    assert!(html.contains(">p0<") && html.contains(">p1<"));
    // The service's own evidence on the double grant's op 3, under its sentence.
    let card = &html[html.find("data-violation-card").unwrap()..];
    let card = &card[..card.find("</article>").unwrap()];
    assert!(
        card.contains("The service's evidence: op 3: redis_node 127.0.0.1:7001, redis_offset 42"),
        "{card}"
    );
    // The pause shows as a band, the write as an accepted store op.
    assert!(html.contains("pause n1"));
    assert!(html.contains("write k0 by p0 with token 1, value 1: accepted as seq 1"));
    // Regenerating gives the same bytes: the report depends on the files only.
    let again = reports::render_report(tmp.path()).unwrap();
    assert!(
        again.report_html == html,
        "the report differs when regenerated"
    );
    assert_eq!(
        std::fs::read_to_string(&w.junit).unwrap(),
        junit_xml(&r, "fixture", &FailOn::default())
    );
}

/// Warnings a check counted past those it listed are in every count a reader sees: the
/// report's summary and heading, summary.txt, the JUnit case's output and the gate's line.
#[test]
fn warnings_counted_and_not_listed_show_in_every_count() {
    let tmp = tempfile::tempdir().unwrap();
    let mut r = fixture();
    let listed = r.warnings.len();
    assert!(listed > 0);
    r.warnings_unlisted = 41;
    let found = listed + 41;
    // As a check counts them: the checker's figure holds every warning found.
    let mutex = (r.checkers.iter_mut()).find(|c| c.name == "mutual-exclusion");
    mutex.expect("the fixture's").warnings = found as u64;
    run_dir(tmp.path(), &r);
    let w = reports::write_run_reports(tmp.path()).unwrap();
    let html = std::fs::read_to_string(&w.report).unwrap();
    assert!(html.contains(&format!("{found} warning(s)")), "summary");
    assert!(html.contains(&format!("Warnings ({found})")), "heading");
    assert!(
        html.contains("41 more counted and not listed"),
        "what the list leaves out"
    );
    let lines = github_annotations(&r, &FailOn::default(), "report.html");
    assert!(
        lines[0].contains(&format!("{found} warning(s)")),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("warnings not listed x41"), "{}", lines[0]);
    let text = summary_text(&r);
    assert!(
        text.contains("... and 41 more warning(s) counted and not listed"),
        "{text}"
    );
    let junit = junit_xml(&r, "fixture", &FailOn::default());
    assert!(junit.contains("... and 41 more warnings&#10;"), "{junit}");
}

#[test]
fn report_without_history_or_config_still_renders() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("results.json"),
        serde_json::to_string(&fixture()).unwrap(),
    )
    .unwrap();
    let r = reports::render_report(tmp.path()).unwrap();
    assert!(r.report_html.contains("No timeline"));
    assert!(r.report_html.contains("parameters unknown"));
    assert_eq!(r.report_html.matches("data-violation-card").count(), 2);
    assert!(reports::render_report(&tmp.path().join("missing")).is_err());
}

#[test]
fn index_lists_runs_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    // A test name is free text, but a folder name cannot hold `/`.
    let name = "t<b onmouseover=x>\"'🔒".to_string();
    for stamp in ["20261130T010000.000Z", "20261130T020000.000Z"] {
        let d = out.join(&name).join(stamp);
        std::fs::create_dir_all(&d).unwrap();
        run_dir(&d, &fixture());
        reports::write_run_reports(&d).unwrap();
    }
    std::fs::create_dir_all(out.join("t2/20261130T030000.000Z")).unwrap();
    let p = reports::write_index(out).unwrap();
    let html = std::fs::read_to_string(p).unwrap();
    assert!(!html.contains("<b onmouseover"));
    let a = html.find("2026-11-30 03:00:00").unwrap();
    let b = html.find("2026-11-30 02:00:00").unwrap();
    let c = html.find("2026-11-30 01:00:00").unwrap();
    assert!(a < b && b < c, "newest first");
    assert!(
        html.contains("unreadable"),
        "a run without results is listed as such"
    );
    assert!(html
        .contains("t%3Cb%20onmouseover%3Dx%3E%22%27%F0%9F%94%92/20261130T020000.000Z/report.html"));
    assert!(html.contains("embedded"));
}

/// Renewal shapes the checkers' lease model distinguishes, under a drift of 0.1 (config.toml):
///
/// - p1 (op 1, token 1): ttl 100 ms from its invoke at 0 (lower bound 90 ms); an ok renew
///   invoked at 50 ms asks for 30 ms and *replaces* the bound with 77 ms (a shorter lease); a
///   renew invoked at 200 ms, after that bound, opens a second segment at its completion
///   (210 ms), which the release invoked at 250 ms ends.
/// - p2 (op 7, token 2): an ok renew in time (bound 540 ms), then one after a gap: segments
///   410–540 ms and 610–690 ms, lease surely dead after 720 ms.
/// - p3 (op 13, token 3): a reply so slow (95 ms of a 100 ms lease) that with drift 0.1 the
///   history proves no hold at all (with drift 0 it would prove 895–900 ms).
/// - p4 (op 15): an indeterminate acquire, never a grant.
fn lease_shapes() -> Vec<history::Op> {
    use history::{Op, OpType::*, OpValue, Process, F};
    let ms = |x: u64| x * 1_000_000;
    let mut n = 0u64;
    let mut op = |t: u64, p: u64, kind, f, v: OpValue| {
        n += 1;
        Op::new(n - 1, ms(t), Process::Client(p), kind, f)
            .with_lock("L0")
            .with_value(v)
    };
    let ttl = |t: u64| OpValue::default().with_ttl_ms(t);
    vec![
        op(0, 1, Invoke, F::Acquire, ttl(100)),
        op(10, 1, Ok, F::Acquire, ttl(100).with_token(1)),
        op(50, 1, Invoke, F::Renew, ttl(30).with_token(1)),
        op(55, 1, Ok, F::Renew, ttl(30).with_token(1)),
        op(200, 1, Invoke, F::Renew, ttl(100).with_token(1)),
        op(210, 1, Ok, F::Renew, ttl(100).with_token(1)),
        op(250, 1, Invoke, F::Release, OpValue::default().with_token(1)),
        op(260, 1, Ok, F::Release, OpValue::default().with_token(1)),
        op(400, 2, Invoke, F::Acquire, ttl(100)),
        op(410, 2, Ok, F::Acquire, ttl(100).with_token(2)),
        op(450, 2, Invoke, F::Renew, ttl(100).with_token(2)),
        op(455, 2, Ok, F::Renew, ttl(100).with_token(2)),
        op(600, 2, Invoke, F::Renew, ttl(100).with_token(2)),
        op(610, 2, Ok, F::Renew, ttl(100).with_token(2)),
        op(800, 3, Invoke, F::Acquire, ttl(100)),
        op(895, 3, Ok, F::Acquire, ttl(100).with_token(3)),
        op(950, 4, Invoke, F::Acquire, ttl(100)),
        op(
            960,
            4,
            Info,
            F::Acquire,
            OpValue::default().with_error("timeout"),
        ),
    ]
}

const SHAPES_DRIFT: f64 = 0.1;

/// A run directory of [`lease_shapes`] checked with drift 0.1, plus a warning on L0 naming
/// every acquire, so a zoomed timeline draws each process's bars too. Returns the rendered
/// report and the history.
fn render_lease_shapes(dir: &Path) -> (String, history::History) {
    let ops = lease_shapes();
    let text: String = ops
        .iter()
        .map(|o| serde_json::to_string(o).unwrap() + "\n")
        .collect();
    std::fs::write(dir.join("history.jsonl"), text).unwrap();
    let h = history::History::new(ops).unwrap();
    let cfg = checkers::CheckConfig {
        drift: SHAPES_DRIFT,
        ..Default::default()
    };
    let mut results = checkers::check(&h, &cfg);
    results.warnings.push(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::UnsafeOverlap,
        lock: Some("L0".into()),
        ops: vec![1, 9, 15, 17],
        window_ns: [0, 960_000_000],
        nemesis: vec![],
        explanation: "a card whose timeline shows every hold".into(),
    });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&results).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "name = \"shapes\"\nttl_ms = 100\ndrift = {SHAPES_DRIFT}\nliveness_grace_ms = 2000\n"
        ),
    )
    .unwrap();
    let html = reports::render_report(dir).unwrap().report_html;
    (html, h)
}

/// The text of the element with `id` (up to its chart's closing `</svg>`).
fn chart<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}"));
    let end = at + html[at..].find("</svg>").unwrap();
    &html[at..end]
}

/// The drawn definite holds, `(acquire index, start ns, end ns)`, in document order.
fn drawn_holds(svg: &str) -> Vec<(u64, u64, u64)> {
    let attr = |s: &str, name: &str| -> u64 {
        let k = format!("{name}=\"");
        let a = s.find(&k).unwrap() + k.len();
        s[a..a + s[a..].find('"').unwrap()].parse().unwrap()
    };
    svg.split("data-hold=\"")
        .skip(1)
        .map(|rest| {
            let tag = &rest[..rest.find('>').unwrap()];
            let full = format!("data-hold=\"{tag}");
            (
                attr(&full, "data-hold"),
                attr(&full, "data-start-ns"),
                attr(&full, "data-end-ns"),
            )
        })
        .collect()
}

/// The checkers' definite holds for the same history and drift, named as the report names
/// them.
fn checker_holds(h: &history::History, drift: f64) -> Vec<(u64, u64, u64)> {
    let m = checkers::Model::new(
        h,
        &checkers::CheckConfig {
            drift,
            ..Default::default()
        },
    );
    let mut out: Vec<(u64, u64, u64)> = m
        .grants
        .iter()
        .flat_map(|g| {
            let index = m.ops[g.op].index;
            g.holds.iter().map(move |s| (index, s.start_ns, s.end_ns))
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn drawn_holds_are_the_checkers_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let (html, h) = render_lease_shapes(tmp.path());
    let expected = checker_holds(&h, SHAPES_DRIFT);
    let ms = |x: u64| x * 1_000_000;
    // What the checkers prove: the shorter renew ends p1's first segment at 77 ms (not the
    // grant's 90 ms), and each renew after a gap starts a second segment at its completion.
    assert_eq!(
        expected,
        vec![
            (1, ms(10), ms(77)),
            (1, ms(210), ms(250)),
            (9, ms(410), ms(540)),
            (9, ms(610), ms(690)),
        ]
    );
    for id in ["full", "z-w1"] {
        let mut drawn = drawn_holds(chart(&html, id));
        drawn.sort_unstable();
        assert_eq!(drawn, expected, "the solid bars of #{id}");
    }
    // Lease marks are the checkers' bounds too (p2: lower bound 690 ms, dead after 720 ms).
    let zoom = chart(&html, "z-w1");
    assert!(
        zoom.contains("lease of token 2 surely alive until 0.690 s"),
        "{zoom}"
    );
    assert!(
        zoom.contains("lease of token 2 surely dead after 0.720 s"),
        "{zoom}"
    );
    // The client believed it held through the gaps: drawn hatched, not solid.
    assert_eq!(zoom.matches("data-unproven=\"1\"").count(), 1, "p1's gap");
    assert_eq!(zoom.matches("data-unproven=\"9\"").count(), 1, "p2's gap");
    // The fairness table counts the same holds.
    assert!(html.contains("<td>p1</td><td class=\"n\">1</td><td class=\"n\">1</td><td class=\"n\">0</td><td class=\"n\">0</td><td class=\"n\">100%</td><td class=\"n\">0.107 s</td>"), "p1: 67 + 40 ms definitely held");
}

#[test]
fn a_grant_the_checkers_prove_no_hold_for_has_no_solid_bar() {
    let tmp = tempfile::tempdir().unwrap();
    let (html, h) = render_lease_shapes(tmp.path());
    // p3's grant (op 15) proves nothing under the run's drift; under drift 0 it would, so the
    // report must have used the drift in config.toml.
    let m = checkers::Model::new(
        &h,
        &checkers::CheckConfig {
            drift: SHAPES_DRIFT,
            ..Default::default()
        },
    );
    let g = m.grants.iter().find(|g| m.ops[g.op].index == 15).unwrap();
    assert!(g.holds.is_empty(), "{g:?}");
    assert!(checker_holds(&h, 0.0).iter().any(|x| x.0 == 15));
    for id in ["full", "z-w1"] {
        let svg = chart(&html, id);
        assert!(
            !drawn_holds(svg).iter().any(|x| x.0 == 15 || x.0 == 17),
            "#{id} draws a definite hold the checkers did not prove"
        );
    }
    let zoom = chart(&html, "z-w1");
    // Still shown: its label, and a dotted tick with the checkers' verdict in its tooltip.
    assert!(zoom.contains(">token 3<"));
    assert!(zoom.contains("data-no-hold=\"15\""));
    assert!(zoom.contains(
        "p3 holds L0 with token 3: granted 0.895 s (op 15); the checkers prove no definite hold"
    ));
    // p4's indeterminate acquire is a dashed "maybe", marked as not proven.
    assert!(zoom.contains("data-maybe=\"17\""));
    assert!(
        zoom.contains("p4 may hold L0 (indeterminate acquire, op 17): invoked 0.950 s; not proven")
    );
}

/// Overlapping double-grants on one lock are one incident card that counts the clients and
/// lists the pairs; one elsewhere in time stays its own card.
#[test]
fn overlapping_violations_are_one_incident() {
    let tmp = tempfile::tempdir().unwrap();
    let mut r = fixture();
    let dg = r.violations[0].clone();
    let at = |w: [u64; 2], ops: Vec<u64>, text: &str| Violation {
        cycle: Vec::new(),
        window_ns: w,
        ops,
        explanation: text.into(),
        nemesis: vec![],
        ..dg.clone()
    };
    r.violations = vec![
        at([4_000_000, 9_000_000], vec![1, 3], "pair one"),
        at([5_000_000, 8_000_000], vec![1, 3], "pair two"),
        at([8_000_000, 12_000_000], vec![3, 1], "pair three"),
        at([900_000_000, 950_000_000], vec![1, 3], "far away"),
    ];
    run_dir(tmp.path(), &r);
    let html = reports::render_report(tmp.path()).unwrap().report_html;
    assert_eq!(
        html.matches("data-violation-card").count(),
        2,
        "two incidents"
    );
    assert!(html.contains("data-violations=\"3\""));
    assert!(
        html.contains("2 clients held"),
        "the incident counts its clients"
    );
    for text in ["pair one", "pair two", "pair three", "far away"] {
        assert!(html.contains(text), "{text} listed");
    }
    assert!(html.contains("Violations (4, in 2 incident(s))"));
    // Faults are told in words.
    let mut with_fault = fixture();
    with_fault.violations[0].nemesis = vec![history::ActiveFault {
        index: 6,
        f: "start-pause".into(),
        value: serde_json::json!({"nodes": ["n1"], "length_ms": 1500, "fault": "f1"}),
    }];
    run_dir(tmp.path(), &with_fault);
    let html = reports::render_report(tmp.path()).unwrap().report_html;
    assert!(
        html.contains("Faults active: pause of n1 for 1.500 s (op 6)."),
        "faults in words"
    );
}

/// A contention-rounds run shows its rounds figure in summary.txt and at the top of the report;
/// other runs show none.
#[test]
fn contention_rounds_are_in_the_summary_and_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = fixture();
    run_dir(tmp.path(), &plain);
    let html = reports::render_report(tmp.path()).unwrap().report_html;
    assert!(!html.contains("class=\"rounds\""));
    assert!(!summary_text(&plain).contains("rounds:"));

    let mut r = fixture();
    r.stats.extra.insert(
        "rounds".into(),
        serde_json::json!({"rounds": 640, "contended": 600, "more_than_one_holder": 375}),
    );
    run_dir(tmp.path(), &r);
    let line =
        "rounds: 640 in all, 600 contended, 375 of them ended with more than one holder (62.5%)";
    assert!(summary_text(&r).contains(line), "{}", summary_text(&r));
    let html = reports::render_report(tmp.path()).unwrap().report_html;
    let header = &html[..html.find("</header>").unwrap()];
    assert!(
        header.contains(line),
        "no rounds line in the report's header"
    );
}

/// An invalid verdict of the lock alone says whether the data it guards held: only when the
/// data checkers judged the writes and found nothing.
#[test]
fn a_lock_failure_whose_fenced_data_held_says_so() {
    let held = "the lock failed, but the data it guards held: store-fencing, counter valid over 7 store write(s)";
    let with = |writes: u64, checkers: Vec<CheckerResult>, data_violation: bool| {
        let mut r = fixture();
        r.stats.ops.insert(
            "write".to_string(),
            BTreeMap::from([("ok".to_string(), writes)]),
        );
        r.checkers = checkers;
        if data_violation {
            r.violations.push(violation(
                ViolationKind::LostUpdate,
                "k0",
                &[7],
                "an acknowledged write was lost",
            ));
        }
        summary_text(&r)
    };
    let judged = || {
        vec![
            checker("mutual-exclusion", Validity::Invalid, 1, 0),
            checker("store-fencing", Validity::Valid, 0, 0),
            checker("counter", Validity::Valid, 0, 0),
        ]
    };
    assert!(with(7, judged(), false).contains(held));
    // Hurt, unwritten, or judged invalid: nothing said.
    assert!(!with(7, judged(), true).contains("data it guards held"));
    assert!(!with(0, judged(), false).contains("data it guards held"));
    let mut hurt = judged();
    hurt[1].valid = Validity::Invalid;
    assert!(!with(7, hurt, false).contains("data it guards held"));
    // A lock that failed only to be live (stuck): no stale holder reached the data, so no
    // fence is credited with holding it.
    let mut r = fixture();
    r.stats
        .ops
        .insert("write".to_string(), BTreeMap::from([("ok".to_string(), 7)]));
    r.checkers = judged();
    r.violations = vec![violation(
        ViolationKind::LockStuck,
        "L0",
        &[3],
        "no client could take L0 for 9 s",
    )];
    assert!(!summary_text(&r).contains("data it guards held"));
}

/// The index names what was tested: the embedded lockd, or another service's server that
/// lockpick started (not "embedded"), or the target a run was pointed at.
#[test]
fn the_target_says_who_started_the_service() {
    for (toml, want) in [
        ("name = \"x\"\n", "embedded"),
        ("adapter = \"reference\"\n", "embedded"),
        (
            "adapter = \"zookeeper\"\n",
            "zookeeper: started by lockpick",
        ),
        (
            "adapter = \"redis\"\nurl = \"redis://127.0.0.1:6390\"\n",
            "redis: url redis://127.0.0.1:6390",
        ),
        ("unsafe = \"racy\"\n", "embedded (unsafe racy)"),
    ] {
        let view = reports::RunConfigView::parse(toml).unwrap();
        assert_eq!(view.target(), want, "{toml}");
    }
}

/// junit.xml fails what the run's --fail-on counts, as the exit code does: under `safety`
/// alone the lock-stuck is said in its case's output, not failed, so a CI that reads JUnit is
/// red exactly when the step is.
#[test]
fn junit_fails_what_the_gate_counts() {
    let r = fixture();
    let liveness_case = |x: &str| -> String {
        let at = x.find("name=\"liveness\"").expect("a liveness case");
        let end = x[at..].find("</testcase>").unwrap();
        x[at..at + end].to_string()
    };
    let all = junit_xml(&r, "t", &FailOn::default());
    assert!(all.contains("failures=\"2\""), "{all}");
    assert!(liveness_case(&all).contains("<failure"), "{all}");
    let safety: FailOn = "safety".parse().unwrap();
    assert_eq!(safety.exit_code(&r).code(), 1);
    let x = junit_xml(&r, "t", &safety);
    assert!(x.contains("failures=\"1\""), "{x}");
    let case = liveness_case(&x);
    assert!(!case.contains("<failure"), "{case}");
    assert!(
        case.contains("1 violation(s) proven, not counted by the run&apos;s --fail-on")
            || case.contains("1 violation(s) proven, not counted by the run's --fail-on"),
        "{case}"
    );
}
