//! The template adapter with examples/lockd.toml: the reference protocol described in a config
//! file gives the same verdicts and violation kinds as the native adapter, on the same seeds and
//! faults as tests/runs.rs.

mod common;

use common::run;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

fn config() -> String {
    format!("{}/examples/lockd.toml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn template_correct_lockd_is_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config();
    let mut args = vec!["--config", &cfg];
    args.extend_from_slice(common::FAST);
    args.extend_from_slice(&["--seed", "1", "--nemesis", "pause,kill,client-pause"]);
    let r = run(tmp.path(), &args, LIMIT);
    r.assert_clean();
}

/// The template adapter's config, as flags put before each scenario's own.
fn template() -> Vec<String> {
    vec!["--config".to_string(), config()]
}

fn caught(name: &str) {
    let t = template();
    let t: Vec<&str> = t.iter().map(String::as_str).collect();
    common::assert_caught(&t, name, |r| {
        let config = std::fs::read_to_string(r.run_dir().join("config.toml")).unwrap();
        assert!(config.contains("adapter = \"template\""), "{config}");
    });
}

#[test]
fn template_reuse_tokens_under_kill_is_caught() {
    caught("reuse-tokens");
}

#[test]
fn template_no_ttl_under_client_pause_is_caught() {
    caught("no-ttl");
}

#[test]
fn template_skip_token_check_under_client_pause_is_caught() {
    caught("skip-token-check");
}

#[test]
fn template_racy_without_faults_is_caught() {
    caught("racy");
}

#[test]
fn template_unfenced_store_under_client_pause_is_caught() {
    caught("store-none");
}

#[test]
fn template_wall_clock_under_forward_bumps_is_caught() {
    caught("wall-clock");
}

#[test]
fn template_split_brain_with_its_primary_cut_off_is_caught() {
    caught("split-brain");
}

/// A member that cannot reach its primary answers `503 {"error": "primary-unreachable"}`. The
/// template reads that as the native adapter does, the service saying it cannot decide now
/// (`unavailable: <reason>`), which faults cause; never as an answer it does not understand,
/// which would count toward stopping the run.
#[test]
fn template_reads_a_cut_off_members_503_as_unavailable() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config();
    let args = [
        "--config",
        &cfg,
        "--seed",
        "1",
        "--duration",
        "12s",
        "--ttl",
        "1s",
        "--nodes",
        "3",
        "--workload",
        "mutex",
        "--nemesis",
        "pause",
        "--nemesis-targets",
        "primary",
        // Longer than a member's 2 s wait for its primary, so its 503 arrives.
        "--op-timeout",
        "4s",
        "--acquire-wait",
        "200ms",
    ];
    let r = run(tmp.path(), &args, LIMIT);
    r.assert_clean();
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.run_dir().join("results.json")).unwrap())
            .unwrap();
    let reasons = &results["stats"]["reasons"];
    let info: Vec<&String> = ["acquire", "renew", "release"]
        .iter()
        .filter_map(|f| reasons[f]["info"].as_object())
        .flat_map(|m| m.keys())
        .collect();
    assert!(
        info.iter()
            .any(|k| *k == "unavailable: primary-unreachable"),
        "no 503 was read as unavailable: {reasons}"
    );
    assert!(
        !info.iter().any(|k| k.starts_with("http-503")),
        "a 503 was read as not understood: {reasons}"
    );
}

/// The bank through the template (examples/lockd.toml maps a read's `seq` as the native
/// adapter records it): the racy lockd's overlapping transfers are proven from the data,
/// `non-serializable`, as with the native adapter. The store does not fence, so the overlaps
/// lose updates every run (a fencing store refuses most of them).
#[test]
fn template_bank_against_the_racy_lockd_is_non_serializable() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config();
    let mut args = vec!["--config", &cfg];
    args.extend_from_slice(common::BANK_CONTENDED);
    args.extend_from_slice(&["--unsafe", "racy", "--store-fence", "none", "--seed", "1"]);
    let r = run(tmp.path(), &args, LIMIT);
    assert_eq!(r.code, 1, "{}", r.describe());
    let kinds = r.kinds("violations");
    assert!(
        kinds.iter().any(|k| k == "non-serializable"),
        "{kinds:?}\n{}",
        r.describe()
    );
}
