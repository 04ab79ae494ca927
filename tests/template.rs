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

/// The run and the folder holding it (removed when dropped, after the caller's assertions).
fn via_template(extra: &[&str]) -> (common::Run, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config();
    let mut args = vec![
        "--config",
        &cfg,
        "--ttl",
        "1s",
        "--hold",
        "50ms..600ms",
        "--duration",
        "10s",
        "--op-timeout",
        "500ms",
        "--nemesis-interval",
        "1s",
    ];
    args.extend_from_slice(extra);
    (run(tmp.path(), &args, LIMIT), tmp)
}

fn caught(extra: &[&str], expect_any: &[&str]) {
    let (r, _dir) = via_template(extra);
    assert_eq!(r.code, 1, "expected invalid; {}", r.describe());
    let kinds = r.kinds("violations");
    assert!(
        expect_any.iter().any(|k| kinds.iter().any(|f| f == k)),
        "expected one of {expect_any:?}, found {kinds:?}"
    );
    let config = std::fs::read_to_string(r.run_dir().join("config.toml")).unwrap();
    assert!(config.contains("adapter = \"template\""), "{config}");
}

#[test]
fn template_correct_lockd_is_valid() {
    let (r, _dir) = via_template(&["--seed", "1", "--nemesis", "pause,kill,client-pause"]);
    assert_eq!(r.code, 0, "{}", r.describe());
}

#[test]
fn template_reuse_tokens_under_kill_is_caught() {
    caught(
        &[
            "--seed",
            "4",
            "--unsafe",
            "reuse-tokens",
            "--nemesis",
            "kill",
        ],
        &["token-regressed", "token-reused"],
    );
}

#[test]
fn template_no_ttl_under_client_pause_is_caught() {
    caught(
        &[
            "--seed",
            "5",
            "--unsafe",
            "no-ttl",
            "--nemesis",
            "client-pause",
            "--liveness-grace",
            "200ms",
        ],
        &["lock-stuck"],
    );
}

#[test]
fn template_skip_token_check_under_client_pause_is_caught() {
    caught(
        &[
            "--seed",
            "6",
            "--unsafe",
            "skip-token-check",
            "--nemesis",
            "client-pause",
        ],
        &["stale-release-accepted", "stale-renew-accepted"],
    );
}

#[test]
fn template_racy_without_faults_is_caught() {
    caught(
        &[
            "--seed",
            "7",
            "--unsafe",
            "racy",
            "--nemesis",
            "none",
            "--workload",
            "mutex",
        ],
        &["double-grant"],
    );
}

#[test]
fn template_unfenced_store_under_client_pause_is_caught() {
    caught(
        &[
            "--seed",
            "8",
            "--store-fence",
            "none",
            "--nemesis",
            "client-pause",
        ],
        &["stale-write-accepted", "lost-update"],
    );
}

#[test]
fn template_wall_clock_under_forward_bumps_is_caught() {
    if !common::require_libfaketime() {
        return;
    }
    caught(
        &[
            "--seed",
            "1",
            "--workload",
            "mutex",
            "--unsafe",
            "wall-clock",
            "--nemesis",
            "clock",
            "--clock-faults",
            "bump-forward",
        ],
        &["double-grant"],
    );
}

#[test]
fn template_split_brain_with_its_primary_cut_off_is_caught() {
    caught(
        &[
            "--seed",
            "1",
            "--nodes",
            "3",
            "--unsafe",
            "split-brain",
            "--workload",
            "mutex",
            "--nemesis",
            "pause",
            "--nemesis-targets",
            "primary",
            "--op-timeout",
            "1s",
        ],
        &["double-grant"],
    );
}
