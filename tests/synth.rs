//! `lockpick synth --inject-every N`: a streamed history with one violation in every stretch of
//! N events. Each injected violation is found by `check`, naming the ops the file tags as its
//! witness; the history stays whole (no structure error across stretches); the same seed
//! writes the same bytes; bad settings are refused with the flag named.

mod common;

use common::run_with_limit;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn synth(out: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["synth", "--events", "400000", "--seed", "7", "--out", out];
    args.extend_from_slice(extra);
    run_with_limit(&args, LIMIT)
}

#[test]
fn every_stretch_gets_a_violation_the_checker_finds() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path().join("h.jsonl");
    let h = h.to_str().unwrap();
    let kinds = [
        "double-grant",
        "stale-write-accepted",
        "token-reused",
        "stale-renew-accepted",
    ];
    let mut args = vec!["--inject-every", "100000"];
    for k in kinds {
        args.extend(["--inject", k]);
    }
    let o = synth(h, &args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("0 stretch(es) offered no place"),
        "{stderr}"
    );

    // The witness ops the file tags, by kind (these kinds' names are the violations').
    let text = std::fs::read_to_string(h).unwrap();
    let mut tagged: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in text.lines() {
        let op: Value = serde_json::from_str(line).unwrap();
        for k in op["witness_of"].as_array().into_iter().flatten() {
            let k = k.as_str().unwrap().to_string();
            tagged
                .entry(k)
                .or_default()
                .push(op["index"].as_u64().unwrap());
        }
    }
    // 400k events in stretches of at least 100k: three full ones and the rest, each with one.
    assert_eq!(tagged.len(), kinds.len(), "{tagged:?}");

    let o = run_with_limit(&["check", "--json", h], LIMIT);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let results: Value = serde_json::from_slice(&o.stdout).unwrap();
    let violations = results["violations"].as_array().unwrap();
    for (kind, witness) in &tagged {
        let named = violations
            .iter()
            .filter(|v| v["kind"] == kind.as_str())
            .flat_map(|v| {
                v["ops"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i.as_u64().unwrap())
            })
            .collect::<Vec<u64>>();
        for w in witness {
            assert!(
                named.contains(w),
                "{kind}: witness op {w} named by no {kind} violation (named: {named:?})"
            );
        }
    }

    // The same seed, the same bytes.
    let again = tmp.path().join("again.jsonl");
    let o = synth(again.to_str().unwrap(), &args);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        std::fs::read(&again).unwrap() == text.as_bytes(),
        "two runs differ"
    );
}

#[test]
fn bad_stretch_settings_are_refused_by_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path().join("h.jsonl");
    let h = h.to_str().unwrap();
    for (args, says) in [
        (
            &["--inject-every", "0", "--inject", "double-grant"][..],
            "--inject-every 0",
        ),
        // clap names the missing flag under its first line: the one-line error keeps it.
        (
            &["--inject-every", "1000"][..],
            "not provided: --inject <KIND>",
        ),
        // No stretch can hold a lock stuck long after everything: refused, not written clean.
        (
            &["--inject-every", "100000", "--inject", "lock-stuck"][..],
            "lock-stuck",
        ),
    ] {
        let o = synth(h, args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
