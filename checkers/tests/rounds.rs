//! Contention rounds in `stats.extra.rounds`: a round is contended with two or more acquires of
//! one lock, and counted as ended with more than one holder when two of its grants' definite
//! holds overlap. The file and in-memory paths agree.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::CheckConfig;
use serde_json::{json, Value};

/// (time_ms, process, type, f, value) of a history with three rounds of lock L: round 7 two
/// overlapping grants, round 8 one grant and one refusal, round 9 one acquire alone.
const EVENTS: &[(u64, u64, &str, &str, &str)] = &[
    (1, 0, "invoke", "acquire", r#"{"ttl_ms":1000,"round":7}"#),
    (2, 1, "invoke", "acquire", r#"{"ttl_ms":1000,"round":7}"#),
    (
        3,
        0,
        "ok",
        "acquire",
        r#"{"token":1,"ttl_ms":1000,"round":7}"#,
    ),
    (
        4,
        1,
        "ok",
        "acquire",
        r#"{"token":2,"ttl_ms":1000,"round":7}"#,
    ),
    (10, 0, "invoke", "release", r#"{"token":1}"#),
    (11, 0, "ok", "release", r#"{"token":1}"#),
    (12, 1, "invoke", "release", r#"{"token":2}"#),
    (13, 1, "ok", "release", r#"{"token":2}"#),
    (20, 0, "invoke", "acquire", r#"{"ttl_ms":1000,"round":8}"#),
    (21, 1, "invoke", "acquire", r#"{"ttl_ms":1000,"round":8}"#),
    (
        22,
        0,
        "ok",
        "acquire",
        r#"{"token":3,"ttl_ms":1000,"round":8}"#,
    ),
    (
        30,
        1,
        "fail",
        "acquire",
        r#"{"ttl_ms":1000,"round":8,"error":"held"}"#,
    ),
    (40, 0, "invoke", "release", r#"{"token":3}"#),
    (41, 0, "ok", "release", r#"{"token":3}"#),
    (50, 0, "invoke", "acquire", r#"{"ttl_ms":1000,"round":9}"#),
    (
        51,
        0,
        "ok",
        "acquire",
        r#"{"token":4,"ttl_ms":1000,"round":9}"#,
    ),
    (52, 0, "invoke", "release", r#"{"token":4}"#),
    (53, 0, "ok", "release", r#"{"token":4}"#),
];

#[test]
fn rounds_count_the_contended_ones_and_those_with_two_holders() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    let lines: Vec<String> = EVENTS
        .iter()
        .enumerate()
        .map(|(i, (ms, p, t, f, v))| {
            format!(
                r#"{{"index":{i},"time_ns":{},"process":{p},"type":"{t}","f":"{f}","lock":"L","value":{v}}}"#,
                ms * 1_000_000
            )
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let cfg = CheckConfig::default();
    let (from_file, _) = checkers::check_path(&path, &cfg).expect("check_path");
    let (h, _) = history::read_history(&path).expect("read_history");
    let in_memory = checkers::check(&h, &cfg);
    let expected = json!({"rounds": 3, "contended": 2, "more_than_one_holder": 1,
        "more_than_one_holder_share": 0.5});
    for r in [&from_file, &in_memory] {
        assert_eq!(r.stats.extra.get("rounds"), Some(&expected));
        let kinds: Vec<&str> = r.violations.iter().map(|v| v.kind.as_str()).collect();
        assert!(kinds.contains(&"double-grant"), "{kinds:?}");
    }
    // The same history without round numbers has no such figure.
    let plain: Vec<String> = lines
        .iter()
        .map(|l| (7..=9).fold(l.clone(), |l, r| l.replace(&format!(r#","round":{r}"#), "")))
        .collect();
    std::fs::write(&path, plain.join("\n") + "\n").unwrap();
    let (r, _) = checkers::check_path(&path, &cfg).expect("check_path");
    assert_eq!(r.stats.extra.get("rounds"), None::<&Value>);
}
