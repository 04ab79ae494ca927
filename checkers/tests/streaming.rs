//! The streaming path (`check_path`: a history file parsed straight into the compact digest)
//! must give exactly what the in-memory path (`check` on a `History`) gives, for correct
//! histories, for every injected violation, and for the odd corners of the format.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::gen::{correct_history, GenParams};
use checkers::inject::{inject, InjectKind};
use checkers::{check, check_path, check_path_within, CheckConfig};
use history::{read_ops, History, HistoryWriter, Op};
use std::path::Path;

fn params(seed: u64, events: usize) -> GenParams {
    GenParams::varied(seed, events)
}

fn write(path: &Path, ops: &[Op]) {
    let mut w = HistoryWriter::create(path).unwrap();
    for op in ops {
        w.write(op).unwrap();
    }
}

/// Both paths over the same file, as JSON text.
fn both(path: &Path, cfg: &CheckConfig) -> (String, String) {
    let (ops, _) = read_ops(path).unwrap();
    let h = History::new(ops).unwrap();
    let via_history = serde_json::to_string(&check(&h, cfg)).unwrap();
    let (r, _) = check_path(path, cfg).unwrap();
    (via_history, serde_json::to_string(&r).unwrap())
}

#[test]
fn streaming_equals_in_memory_for_generated_and_injected_histories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let mut invalid = 0;
    for seed in 0..24u64 {
        let kinds = std::iter::once(None).chain(InjectKind::all().into_iter().map(Some));
        for kind in kinds {
            let mut ops = correct_history(seed, &params(seed, 300 + 40 * seed as usize));
            if let Some(k) = kind {
                inject(&mut ops, k, seed);
            }
            write(&path, &ops);
            let cfg = CheckConfig {
                drift: if seed % 4 == 0 { 0.01 } else { 0.0 },
                ..CheckConfig::default()
            };
            let (a, b) = both(&path, &cfg);
            assert_eq!(a, b, "seed {seed}, {kind:?}");
            invalid += a.starts_with("{\"valid\":false") as u32;
        }
    }
    // The comparison must have covered violations, not only valid verdicts.
    assert!(invalid > 100, "only {invalid} invalid histories");
}

/// A history file too long to read whole for its incidents (the limit set to 0 here) is
/// checked by the streaming rules alone whatever its verdict, its incidents grouped from a
/// second streamed reading: its violations, their faults and evidence, its incidents and every
/// other field are the whole reading's.
#[test]
fn past_the_whole_read_limit_the_results_are_the_batchs_incidents_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let (mut grouped, mut incidents, mut violations) = (0, 0, 0);
    for seed in 0..24u64 {
        for kind in InjectKind::all() {
            let mut ops = correct_history(seed, &params(seed, 300 + 40 * seed as usize));
            inject(&mut ops, kind, seed);
            write(&path, &ops);
            let cfg = CheckConfig {
                drift: if seed % 4 == 0 { 0.01 } else { 0.0 },
                ..CheckConfig::default()
            };
            let (whole, _) = check_path(&path, &cfg).unwrap();
            let (past, _) = check_path_within(&path, &cfg, 0).unwrap();
            let what = format!("seed {seed}, {kind:?}");
            assert_eq!(
                serde_json::to_value(&past).unwrap(),
                serde_json::to_value(&whole).unwrap(),
                "{what}"
            );
            // Read by the streaming rules (not whole, as a grant reached after it closed is),
            // with something to group.
            let streamed = checkers::check_path_streamed(&path, &cfg).unwrap();
            if let (Some(_), false) = (streamed, past.violations.is_empty()) {
                grouped += 1;
                incidents += past.incidents.len();
                violations += past.violations.len();
            }
        }
    }
    assert!(
        grouped > 400,
        "only {grouped} histories grouped from a second reading"
    );
    assert!(incidents > 400, "only {incidents} incidents compared");
    assert!(violations > 600, "only {violations} violations compared");
}

/// A long correct run, many faults and late holders: the file is read by the streaming rules
/// alone (no violation), the faults of its warnings read again from the file, and the results
/// are the in-memory batch's, byte for byte.
#[test]
fn a_long_correct_run_streamed_is_the_batchs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let params = GenParams {
        clients: 8,
        locks: 4,
        events: 60_000,
        info_rate: 0.01,
        ..GenParams::default()
    };
    write(&path, &correct_history(3, &params));
    let (a, b) = both(&path, &CheckConfig::default());
    assert_eq!(a, b);
    let r: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(r["valid"], true);
    let warnings = r["warnings"].as_array().expect("warnings");
    let with_faults = (warnings.iter())
        .filter(|w| w["nemesis"].as_array().is_some_and(|n| !n.is_empty()))
        .count();
    // Seeded: every one of its late holders stalled under some fault.
    assert!(warnings.len() >= 5, "{} warnings", warnings.len());
    assert_eq!(with_faults, warnings.len());
}

#[test]
fn streaming_equals_in_memory_on_format_corners() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    // Escaped names and errors, unknown fields, null values and names, keys in odd order,
    // a missing lock, a completion without its invoke's key, a blank line and a truncated
    // final line.
    let text = concat!(
        r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L\"0","value":{"ttl_ms":1000,"x":[1,{"y":2}]}}"#,
        "\n",
        r#"{"process":1,"index":1,"time_ns":20,"type":"ok","f":"acquire","lock":"L\"0","value":{"token":5,"ttl_ms":1000,"lease_last_ok_ns":10,"lease_ttl_ms":1}}"#,
        "\n\n",
        r#"{"index":2,"time_ns":30,"process":2,"type":"invoke","f":"acquire","lock":"L\"0","value":null,"extra":"x"}"#,
        "\n",
        r#"{"index":3,"time_ns":40,"process":2,"type":"fail","f":"acquire","lock":null,"value":{"error":"he\u006cd"}}"#,
        "\n",
        r#"{"index":4,"time_ns":50,"process":"nemesis","type":"info","f":"start-pause","value":{"nodes":["n1"]}}"#,
        "\n",
        r#"{"index":5,"time_ns":60,"process":1,"type":"invoke","f":"write","key":"k\\1","value":{"token":5,"value":1}}"#,
        "\n",
        r#"{"index":6,"time_ns":70,"process":1,"type":"ok","f":"write","key":"k\\1","value":{"token":5,"value":1,"seq":1}}"#,
        "\n",
        r#"{"index":7,"time_ns":80,"process":3,"type":"invoke","f":"release"}"#,
        "\n",
        r#"{"index":8,"time_ns":90,"process":1,"type":"invoke","f":"read","key":"k\\1","value":{"token":5,"final":true}}"#,
        "\n",
        r#"{"index":9,"time_ns":95,"process":1,"type":"ok","f":"read","key":"k\\1","value":{"token":5,"value":1}}"#,
        "\n",
        r#"{ "index" : 10 , "time_ns":100,"process":4,"type":"invoke","f":"write","key":"k\\1","value":{"token":6,"value":-7,"final":null}}"#,
        "\n",
        r#"{"index":11,"time_ns":110,"process":4,"type":"ok","f":"write","key":"k\\1","value":{"token":6,"value":-7,"seq":3,"error":null}}"#,
        "\n",
        r#"{"index":12,"time_ns":120,"process":4,"type":"invoke","f":"write","key":"k\\1","value":{"token":6,"value":0}}"#,
        "\n",
        r#"{"index":13,"time_ns":130,"process":4,"type":"ok","f":"write","value":{"token":6,"seq":18446744073709551615}}"#,
        "\n",
        r#"{"index":14,"time_ns":140,"process":4,"type":"invoke","f":"read","key":"ké","value":{"token":6,"value":-9223372036854775808}}"#,
        "\n",
        r#"{"index":15,"time_ns":150,"process":4,"type":"info","f":"read","key":"ké","value":{"error":"t\u00e9\n"}}"#,
        "\n",
        r#"{"index":16,"time_ns":100,"process":1,"ty"#,
    );
    std::fs::write(&path, text).unwrap();
    let cfg = CheckConfig::default();
    let (a, b) = both(&path, &cfg);
    assert_eq!(a, b);
    let (_, w1) = read_ops(&path).unwrap();
    let (_, w2) = check_path(&path, &cfg).unwrap();
    assert_eq!(w1, w2);
    assert_eq!(w2.len(), 1);
}

#[test]
fn streaming_reports_the_same_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let cfg = CheckConfig::default();
    let good = r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0"}"#;
    let cases = [
        // structure errors, in History::new's words
        r#"{"index":1,"time_ns":20,"process":1,"type":"invoke","f":"acquire","lock":"L0"}"#,
        r#"{"index":1,"time_ns":20,"process":2,"type":"ok","f":"acquire","lock":"L0"}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"release","lock":"L0"}"#,
        r#"{"index":1,"time_ns":5,"process":1,"type":"ok","f":"acquire","lock":"L0"}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"invoke","f":"frobnicate"}"#,
        // malformed lines, in the reader's words
        r#"{"index":1,"time_ns":20,"process":-1,"type":"ok","f":"acquire"}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"maybe","f":"acquire"}"#,
        r#"{"index":0,"time_ns":20,"process":1,"type":"ok","f":"acquire"}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","value":[5]}"#,
        r#"[1,20,1,"ok","acquire"]"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","value":{"value":-0}}"#,
        r#"{"index":01,"time_ns":20,"process":1,"type":"ok","f":"acquire"}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","value":{"ttl_ms":1.5}}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","value":{"ttl_ms":1e3}}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","value":{"token":18446744073709551616}}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","value":{"final":1}}"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","lock":"L0"} x"#,
        r#"{"index":1,"time_ns":20,"process":1,"type":"ok""#,
    ];
    for case in cases {
        std::fs::write(&path, format!("{good}\n{case}\n")).unwrap();
        // Both paths refuse it, in the same words (`both_or_error` compares them).
        assert!(both_or_error(&path, &cfg).is_err(), "{case} was accepted");
    }
}

/// A history file through both paths: the results as JSON text and the reader's warning lines,
/// or the error's text.
fn both_or_error(path: &Path, cfg: &CheckConfig) -> Result<(String, Vec<u64>), String> {
    let lines = |w: Vec<history::ReadWarning>| w.iter().map(|w| w.line).collect::<Vec<_>>();
    let in_memory = history::read_history(path)
        .map(|(h, w)| (serde_json::to_string(&check(&h, cfg)).unwrap(), lines(w)))
        .map_err(|e| e.to_string());
    let streamed = check_path(path, cfg)
        .map(|(r, w)| (serde_json::to_string(&r).unwrap(), lines(w)))
        .map_err(|e| e.to_string());
    assert_eq!(in_memory, streamed, "{}", path.display());
    streamed
}

/// Each reader rule with a case it must refuse, naming the line, and the near-miss it must
/// accept; the streaming and the in-memory paths agree on every one.
#[test]
fn both_paths_refuse_and_accept_alike() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let cfg = CheckConfig::default();
    let first = r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#;
    let grant = |time_ns: u64, token: &str| {
        format!(
            r#"{{"index":1,"time_ns":{time_ns},"process":1,"type":"ok","f":"acquire","lock":"L0","value":{{"token":{token},"ttl_ms":1000}}}}"#
        )
    };
    // p2 is granted L0 inside p1's lease: a double grant whose sentence names both tokens.
    let rival = concat!(
        r#"{"index":2,"time_ns":30,"process":2,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#,
        "\n",
        r#"{"index":3,"time_ns":40,"process":2,"type":"ok","f":"acquire","lock":"L0","value":{"token":5,"ttl_ms":1000}}"#,
        "\n"
    );
    // (why, what follows the first line, `Err(line and words)` to refuse or `Ok(warning line,
    // words the results must hold)` to accept)
    type Want = Result<(Option<u64>, &'static str), (u64, &'static str)>;
    let cases: Vec<(&str, String, Want)> = vec![
        (
            "lease evidence as a float",
            grant(20, "1").replace("}}", r#","lease_last_ok_ns":1.0e1,"lease_ttl_ms":1}}"#) + "\n",
            Err((2, "expected u64 in `value.lease_last_ok_ns`")),
        ),
        (
            "lease evidence as a string",
            grant(20, "1").replace("}}", r#","lease_from_ns":"0"}}"#) + "\n",
            Err((2, "expected u64 in `value.lease_from_ns`")),
        ),
        (
            "lease evidence as integers",
            grant(20, "1").replace("}}", r#","lease_last_ok_ns":10,"lease_ttl_ms":1}}"#) + "\n",
            Ok((None, "")),
        ),
        (
            "a token written twice",
            grant(20, "1,\"token\":5") + "\n" + rival,
            Err((2, "duplicate field `value.token`")),
        ),
        (
            "a lock written twice",
            grant(20, "1").replace(r#""lock":"L0""#, r#""lock":"L1","lock":"L0""#) + "\n",
            Err((2, "duplicate field `lock`")),
        ),
        (
            "a completion naming another lock",
            grant(20, "1").replace(r#""lock":"L0""#, r#""lock":"L1""#) + "\n",
            Err((
                2,
                r#"op index 1: completes a acquire of lock "L1" but process 1 invoked it on lock "L0" at index 0"#,
            )),
        ),
        (
            "a completion naming no lock",
            grant(20, "1").replace(r#","lock":"L0""#, "") + "\n" + rival,
            Ok((None, "token 1")),
        ),
        (
            "time_ns going back",
            grant(9, "1") + "\n",
            Err((2, "time_ns 9 goes back")),
        ),
        (
            "time_ns equal to the previous event's",
            grant(10, "1") + "\n",
            Ok((None, "")),
        ),
        (
            "a cut-off object without a newline",
            grant(20, "1")[..60].to_string(),
            Ok((Some(2), "")),
        ),
        (
            "a cut-off object with a newline",
            grant(20, "1")[..60].to_string() + "\n",
            Err((2, "EOF")),
        ),
        (
            "valid JSON but no op, last, without a newline",
            r#"{"index":1,"time_ns":20}"#.into(),
            Err((2, "missing field")),
        ),
        (
            "a complete last line that is not JSON",
            "nonsense\n".into(),
            Err((2, "expected ident")),
        ),
        (
            "a token of u64::MAX",
            grant(20, "18446744073709551615") + "\n" + rival,
            Ok((None, "token 18446744073709551615")),
        ),
        (
            "a token of 2^64",
            grant(20, "18446744073709551616") + "\n",
            Err((2, "expected u64")),
        ),
        (
            "a negative token",
            grant(20, "-1") + "\n",
            Err((2, "expected u64")),
        ),
        (
            "a fractional token",
            grant(20, "2.5") + "\n",
            Err((2, "expected u64")),
        ),
        (
            "a number out of range in an unknown field",
            grant(20, "1").replace("}}", r#","x":-1e999}}"#) + "\n",
            Err((2, "number out of range")),
        ),
    ];
    for (why, rest, want) in cases {
        std::fs::write(&path, format!("{first}\n{rest}")).unwrap();
        match (want, both_or_error(&path, &cfg)) {
            (Err((line, words)), Err(e)) => {
                let at = format!("{}:{line}: ", path.display());
                assert!(e.starts_with(&at) && e.contains(words), "{why}: {e}");
            }
            (Ok((warning, words)), Ok((results, warnings))) => {
                assert_eq!(warnings, Vec::from_iter(warning), "{why}");
                assert!(results.contains(words), "{why}: {results}");
            }
            (want, got) => panic!("{why}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn a_prefix_of_the_file_is_checked_as_the_ops_before_its_cut() {
    // `check_prefix` reads the first bytes of a file still being written: the same verdict as
    // the in-memory check of the ops those bytes hold (evidence aside: a live check skips it).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let mut compared = 0;
    for seed in 0..6u64 {
        let kinds = std::iter::once(None).chain(InjectKind::all().into_iter().map(Some));
        for kind in kinds {
            let mut ops = correct_history(seed, &params(seed, 400));
            if let Some(k) = kind {
                inject(&mut ops, k, seed);
            }
            write(&path, &ops);
            let text = std::fs::read(&path).unwrap();
            let ends: Vec<usize> = text
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1)
                .collect();
            let cfg = CheckConfig::default();
            for (lines, &end) in ends.iter().enumerate().step_by(37) {
                let h = History::new(ops[..=lines].to_vec()).unwrap();
                let mut want = check(&h, &cfg);
                want.evidence.clear();
                let got = checkers::check_prefix(&path, end as u64, &cfg).unwrap();
                assert_eq!(
                    serde_json::to_string(&want).unwrap(),
                    serde_json::to_string(&got).unwrap(),
                    "seed {seed}, {kind:?}, first {} lines",
                    lines + 1
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 300, "{compared}");
}
