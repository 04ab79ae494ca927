//! `--renew-ttl`: holders renew with a ttl other than the acquire's, and the lease in force is
//! the last renew's. Runs against the embedded `lockpick lockd` (its default, correct mode),
//! which sets a renewed lease's expiry to now + the renew's ttl: a renew may shorten a lease.
//!
//! With renewals shorter than acquires and stalled holders, a lease that a renew shortened
//! lapses before the acquire's ttl would have run out, and the next holder is granted in that
//! window. That is correct: a checker that still bounds the lease by the acquire's ttl calls
//! it a `double-grant`. The same setting against `--unsafe skip-token-check` must be caught.

mod common;

use common::{run, Aim, Run};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);
const TTL_MS: u64 = 2000;
const RENEW_TTL_MS: u64 = 600;

/// The mutex workload with renewals shorter than acquires; holds long enough for several
/// renewals each, and client pauses (3 to 5 s: past either lease) every 1 to 2 s or so.
fn shorter_renewals(seed: &str, extra: &[&str]) -> (tempfile::TempDir, Run) {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--workload",
        "mutex",
        "--ttl",
        "2s",
        "--renew-ttl",
        "600ms",
        "--hold",
        "300ms..2s",
        "--duration",
        "12s",
        "--op-timeout",
        "500ms",
        "--nemesis",
        "client-pause",
        "--nemesis-interval",
        "1s",
        "--seed",
        seed,
    ];
    args.extend_from_slice(extra);
    let r = run(tmp.path(), &args, LIMIT);
    (tmp, r)
}

/// Each violation's kind and its plain sentence, for the failure message.
fn violations(r: &Run) -> String {
    r.results()["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            format!(
                "{}: {}",
                v["kind"].as_str().unwrap_or("?"),
                v["explanation"].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The history's ops, parsed.
fn ops(r: &Run) -> Vec<Value> {
    std::fs::read_to_string(r.run_dir().join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the workload asked for and when: acquires ask for the ttl, renews for the renew ttl,
/// and a renew that follows an ok renew of the same hold is sent a third of the renew ttl
/// after it (not a third of the acquire's ttl). Returns how many such renew-to-renew gaps the
/// history holds.
fn assert_renew_cadence(r: &Run) -> usize {
    let ops = ops(r);
    let u = |op: &Value, k: &str| op["value"][k].as_u64();
    // Per process: when its last renew was invoked, while that renew is the lease in force.
    let mut last_renew: HashMap<u64, (u64, bool)> = HashMap::new();
    let mut gaps = Vec::new();
    for op in &ops {
        // A stalled holder renews when it wakes (a client-pause may wake it into a renew), not
        // on the cadence: its next renew starts a new count.
        if op["f"] == "start-client-pause" {
            if let Some(p) = op["value"]["process"].as_u64() {
                last_renew.remove(&p);
            }
        }
        let (Some(p), Some(f), Some(t)) = (
            op["process"].as_u64(),
            op["f"].as_str(),
            op["type"].as_str(),
        ) else {
            continue;
        };
        let now = op["time_ns"].as_u64().unwrap();
        match (f, t) {
            ("acquire", "invoke") => {
                assert_eq!(u(op, "ttl_ms"), Some(TTL_MS), "{op}");
                last_renew.remove(&p);
            }
            ("release", "invoke") => {
                last_renew.remove(&p);
            }
            ("renew", "invoke") => {
                assert_eq!(u(op, "ttl_ms"), Some(RENEW_TTL_MS), "{op}");
                if let Some((at, true)) = last_renew.get(&p) {
                    gaps.push((now - at, op.clone()));
                }
                last_renew.insert(p, (now, false));
            }
            ("renew", "ok") => {
                assert_eq!(u(op, "ttl_ms"), Some(RENEW_TTL_MS), "{op}");
                if let Some(e) = last_renew.get_mut(&p) {
                    e.1 = true;
                }
            }
            _ => {}
        }
    }
    let third = RENEW_TTL_MS * 1_000_000 / 3;
    for (gap, op) in &gaps {
        // Never early (a few ms for recording under the history's lock), and never waiting
        // for a third of the acquire's ttl, which would let a 600 ms lease run to 667 ms.
        assert!(
            *gap + 10_000_000 >= third && *gap < TTL_MS * 1_000_000 / 3,
            "renew {gap} ns after the last one, expected about {third} ns: {op}"
        );
    }
    gaps.len()
}

fn shorter_renewals_are_valid(seed: &str) {
    let (_tmp, r) = shorter_renewals(seed, &[]);
    println!("seed {seed}: exit {}\n{}", r.code, r.stdout);
    let config = std::fs::read_to_string(r.run_dir().join("config.toml")).unwrap();
    assert!(config.contains("renew_ttl = \"600ms\""), "{config}");
    assert!(
        config.contains("--ttl 2000ms --renew-ttl 600ms"),
        "{config}"
    );
    let gaps = assert_renew_cadence(&r);
    // How many holds last long enough for two renewals depends on the hold lengths drawn and
    // on how loaded the machine is; two pairs are enough to see the cadence.
    assert!(
        gaps >= 2,
        "seed {seed}: only {gaps} renewals followed a renewal"
    );
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(
        history.contains("start-client-pause"),
        "seed {seed}: no holder was stalled"
    );
    // No violation; valid, or unknown naming the stall shape a 12 s draw did not bring to its
    // state.
    r.assert_clean();
    let res = r.results();
    assert!(res["stats"]["grants"].as_u64().unwrap() >= 3, "{res}");
}

#[test]
fn shorter_renewals_under_client_pause_are_valid_seed_1() {
    shorter_renewals_are_valid("1");
}

#[test]
fn shorter_renewals_under_client_pause_are_valid_seed_2() {
    shorter_renewals_are_valid("2");
}

#[test]
fn shorter_renewals_under_client_pause_are_valid_seed_3() {
    shorter_renewals_are_valid("3");
}

/// A stalled holder wakes and renews or releases with its old token; skip-token-check accepts it.
/// The stalls are aimed: each holder wakes into its renew (then one into its release) 50 ms
/// after the next holder's grant, so its token is older than a grant that returned, whichever
/// lease (the acquire's 2 s or a renewal's 600 ms) was in force. Bounded by 3 s, past either.
#[test]
fn shorter_renewals_against_skip_token_check_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let aim = Aim::new(TTL_MS, 1)
        .stall_for("next-grant", Some("renew"), Some(50), 3000)
        .stall_for("next-grant", Some("release"), Some(50), 3000);
    let schedule = aim.write(dir.path());
    let duration = format!("{}ms", aim.duration_ms());
    let (_tmp, r) = shorter_renewals(
        "1",
        &[
            "--unsafe",
            "skip-token-check",
            "--schedule",
            schedule.to_str().unwrap(),
            "--duration",
            &duration,
        ],
    );
    println!("exit {}\n{}", r.code, r.stdout);
    assert_eq!(r.code, 1, "expected invalid; {}", r.describe());
    let kinds = r.kinds("violations");
    assert!(
        kinds
            .iter()
            .any(|k| k == "stale-renew-accepted" || k == "stale-release-accepted"),
        "expected stale-renew-accepted or stale-release-accepted, found {kinds:?}\n{}",
        violations(&r)
    );
    common::assert_aim_exercised(&aim, &r.results(), &r.describe());
}

/// A bad renew ttl is refused before anything starts, on one line naming the flag.
#[test]
fn a_bad_renew_ttl_is_refused_on_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["0s", "2h", "soon"] {
        let r = run(tmp.path(), &["--renew-ttl", bad], Duration::from_secs(10));
        assert_eq!(r.code, 3, "{}", r.describe());
        assert!(r.stderr.starts_with("error: --renew-ttl"), "{}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    }
    // From a config file: a wrong type names the file, the key and its line.
    let cfg = tmp.path().join("lockpick.toml");
    std::fs::write(&cfg, "[workload]\nttl = \"2s\"\nrenew_ttl = 600\n").unwrap();
    let r = run(
        tmp.path(),
        &["--config", cfg.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(r.code, 3, "{}", r.describe());
    assert!(
        r.stderr
            .contains("lockpick.toml:3: `workload.renew_ttl` must be a string"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}
