//! Clock faults against the real `lockpick lockd`: the skew reaches the service's clocks as
//! asked through either backend (the vDSO patch, the default; libfaketime, the fallback), a
//! wall-clock lease service is caught, and a fast monotonic clock breaks mutual exclusion while
//! fencing keeps the store safe (the runs use whichever backend this machine runs: the vDSO).

mod common;

use common::{require_clock_faults, require_libfaketime, run, Aim};
use nemesis::clock::{faketime_env, find_libfaketime, Backend, ClockScope, NodeClock};
use nemesis::{LocalNode, NodeCommand};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LIMIT: Duration = Duration::from_secs(120);

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `(realtime offset from ours, monotonic_ms)` of the node.
async fn node_time(url: &str) -> (i64, i64) {
    let before = unix_ms();
    let body: serde_json::Value = reqwest::get(format!("{url}/v1/time"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let after = unix_ms();
    (
        body["realtime_ms"].as_i64().unwrap() - (before + after) / 2,
        body["monotonic_ms"].as_i64().unwrap(),
    )
}

async fn bump_shows_in_v1_time(scope: ClockScope, backend: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let port = nemesis::free_port(host).unwrap();
    let control = tmp.path().join("clock.ctl");
    let (mut clock, env) = match backend {
        Backend::Faketime(lib) => (
            NodeClock::create(control.clone(), Instant::now()).unwrap(),
            faketime_env(&lib, &control, scope),
        ),
        Backend::Vdso => (
            NodeClock::create_page(&tmp.path().join("clock.page"), scope).unwrap(),
            Vec::new(),
        ),
    };
    let argv = vec![
        common::BIN.to_string(),
        "lockd".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--data-dir".into(),
        tmp.path().join("data").display().to_string(),
    ];
    let mut node = LocalNode::new(
        "n1",
        NodeCommand::Argv(argv),
        host,
        port,
        tmp.path().join("n1"),
    )
    .with_env(env)
    .with_clock_page(clock.page());
    node.start(Duration::from_secs(10)).await.unwrap();
    let url = node.base_url();
    let (off0, mono0) = node_time(&url).await;
    assert!(off0.abs() < 500, "clock skewed before any fault: {off0} ms");
    let bumped_at = Instant::now();
    clock.bump(10.0).unwrap();
    // Within 1 s the realtime clock shows the bump.
    let (off1, mono1) = loop {
        let t = node_time(&url).await;
        if (t.0 - 10_000).abs() < 500 || bumped_at.elapsed() > Duration::from_secs(1) {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(bumped_at.elapsed() <= Duration::from_secs(1) + Duration::from_millis(200));
    assert!(
        (off1 - 10_000).abs() < 500,
        "realtime offset {off1} ms, wanted +10 s"
    );
    let real_elapsed_ms = bumped_at.elapsed().as_millis() as i64 + 1000;
    let mono_moved_ms = mono1 - mono0;
    match scope {
        ClockScope::Wall => assert!(
            (0..real_elapsed_ms).contains(&mono_moved_ms),
            "monotonic moved {mono_moved_ms} ms with scope wall"
        ),
        ClockScope::All => assert!(
            mono_moved_ms >= 9_500,
            "monotonic moved only {mono_moved_ms} ms with scope all"
        ),
    }
    node.stop();
}

#[tokio::test]
async fn a_bump_with_scope_wall_moves_realtime_only() {
    if !require_libfaketime() {
        return;
    }
    let lib = find_libfaketime().unwrap();
    bump_shows_in_v1_time(ClockScope::Wall, Backend::Faketime(lib)).await;
}

#[tokio::test]
async fn a_bump_with_scope_all_moves_both_clocks() {
    if !require_libfaketime() {
        return;
    }
    let lib = find_libfaketime().unwrap();
    bump_shows_in_v1_time(ClockScope::All, Backend::Faketime(lib)).await;
}

#[tokio::test]
async fn a_vdso_bump_with_scope_wall_moves_realtime_only() {
    if !common::require_vdso_clock() {
        return;
    }
    bump_shows_in_v1_time(ClockScope::Wall, Backend::Vdso).await;
}

#[tokio::test]
async fn a_vdso_bump_with_scope_all_moves_both_clocks() {
    if !common::require_vdso_clock() {
        return;
    }
    bump_shows_in_v1_time(ClockScope::All, Backend::Vdso).await;
}

const FAST: &[&str] = &[
    "--ttl",
    "1s",
    "--hold",
    "50ms..600ms",
    "--op-timeout",
    "500ms",
    "--nemesis-interval",
    "1s",
];

fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a: Vec<&str> = FAST.to_vec();
    a.extend_from_slice(extra);
    a
}

/// Forward steps of three leases on the node, each landing under a live lease: a wall-clock
/// lease service sees the lease as over at once and grants the lock again.
fn forward_steps() -> Aim {
    Aim::new(1000, 1)
        .clock_step("n1", 3000)
        .clock_step("n1", 3000)
}

/// Forward bumps expire a wall-clock lease early: a second holder is granted while the first
/// still surely holds the lock. The bumps are aimed (two steps under live leases), so every
/// seed must catch it; three seeds run side by side.
#[test]
fn wall_clock_leases_under_forward_bumps_give_double_grants() {
    if !require_clock_faults() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let aim = forward_steps();
    let schedule = aim.write(tmp.path());
    let duration = format!("{}ms", aim.duration_ms());
    let handles: Vec<_> = (1..=3u64)
        .map(|seed| {
            let out = tmp.path().join(format!("s{seed}"));
            let (schedule, duration) = (schedule.clone(), duration.clone());
            std::thread::spawn(move || {
                let seed = seed.to_string();
                let r = run(
                    &out,
                    &with(&[
                        "--seed",
                        &seed,
                        "--duration",
                        &duration,
                        "--workload",
                        "mutex",
                        "--unsafe",
                        "wall-clock",
                        "--nemesis",
                        "clock",
                        "--clock-faults",
                        "bump-forward",
                        "--schedule",
                        schedule.to_str().unwrap(),
                    ]),
                    LIMIT,
                );
                (seed, r)
            })
        })
        .collect();
    for h in handles {
        let (seed, r) = h.join().unwrap();
        assert_eq!(r.code, 1, "seed {seed}: {}", r.describe());
        let kinds = r.kinds("violations");
        assert!(
            kinds.contains(&"double-grant".to_string()),
            "seed {seed}: {kinds:?}\n{}",
            r.describe()
        );
        common::assert_aim_exercised(&aim, &r.results(), &r.describe());
    }
}

/// A monotonic clock running fast expires correct leases early: `double-grant`, reported as
/// such. The store in mode `all` still refuses every stale write: no `stale-write-accepted`, no
/// `lost-update`. The reason fencing exists, in one run. The fast clock is aimed: two spells of
/// three leases at 4x, while clients hold and ask for the lock.
#[test]
fn fast_monotonic_clock_breaks_mutual_exclusion_but_fencing_holds() {
    if !require_clock_faults() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let aim = Aim::new(1000, 1)
        .clock_rate("n1", 4.0)
        .clock_rate("n1", 4.0);
    let schedule = aim.write(tmp.path());
    let duration = format!("{}ms", aim.duration_ms());
    let r = run(
        &tmp.path().join("runs"),
        &with(&[
            "--seed",
            "1",
            "--duration",
            &duration,
            "--nemesis",
            "clock",
            "--clock-faults",
            "fast",
            "--clock-scope",
            "all",
            "--store-fence",
            "all",
            "--schedule",
            schedule.to_str().unwrap(),
        ]),
        LIMIT,
    );
    // The double grants a sped-up monotonic clock causes are proven, and listed apart as
    // expected of any lease-based service; the fenced store held, so the verdict is valid.
    assert_eq!(r.code, 0, "{}", r.describe());
    let expected = r.kinds("expected");
    assert!(
        expected.contains(&"double-grant".to_string()),
        "{expected:?}"
    );
    let res = r.results();
    assert!(
        res["expected"][0]["explanation"]
            .as_str()
            .unwrap()
            .starts_with("expected under this fault for any lease-based service"),
        "{res}"
    );
    let kinds = r.kinds("violations");
    assert!(kinds.is_empty(), "{kinds:?}");
    assert!(res["notes"].to_string().contains("listed apart"), "{res}");
    // Its coverage cell says the monotonic clock moved too.
    let cells = res["coverage"]["cells"].as_array().unwrap();
    assert!(
        cells
            .iter()
            .any(|c| c["kind"] == "clock" && c["variant"] == "fast" && c["scope"] == "all"),
        "{cells:?}"
    );
}

/// Correct lockd under clock faults alone, every mode, on three seeds side by side: its leases
/// run on the monotonic clock, so wall-clock skew through the patched vDSO changes nothing.
#[test]
fn correct_lockd_is_valid_under_clock_faults_on_three_seeds() {
    if !require_clock_faults() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let handles: Vec<_> = [5u64, 6, 7]
        .into_iter()
        .map(|seed| {
            let out = tmp.path().join(format!("s{seed}"));
            std::thread::spawn(move || {
                let seed = seed.to_string();
                let r = run(
                    &out,
                    &with(&[
                        "--seed",
                        &seed,
                        "--duration",
                        "8s",
                        "--workload",
                        "mutex",
                        "--nemesis",
                        "clock",
                        "--clock-scope",
                        "wall",
                    ]),
                    LIMIT,
                );
                (seed, r)
            })
        })
        .collect();
    for h in handles {
        let (seed, r) = h.join().unwrap();
        r.assert_clean();
        let ops = common::nemesis_ops(&r.run_dir());
        assert!(
            ops.iter().any(|o| o["f"] == "start-clock"),
            "seed {seed}: no clock fault ran"
        );
    }
}

/// Correct lockd leases run on the monotonic clock: wall-clock skew of any kind changes nothing.
#[test]
fn correct_lockd_is_valid_under_wall_clock_faults_and_the_rest() {
    if !require_clock_faults() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = run(
        tmp.path(),
        &with(&[
            "--seed",
            "4",
            "--duration",
            "12s",
            "--nemesis",
            "clock,pause,kill,client-pause",
            "--clock-scope",
            "wall",
        ]),
        LIMIT,
    );
    r.assert_clean();
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(history.contains("\"start-clock\""), "no clock fault ran");
    assert!(
        history.contains("realtime_offset_ms"),
        "no clock observation recorded"
    );
}
