//! `--runtime ssh` end to end against real sshd: three "hosts" made of network namespaces
//! (tests/common/sshbed.rs), each running its own sshd with a test key. lockpick drives them
//! through the system's ssh client; the verdicts must be those of the namespace runtime on the
//! same seeds, and nothing of a run may be left on any host afterwards.

mod common;
#[path = "common/sshbed.rs"]
mod sshbed;

use common::Run;
use sshbed::{require_sshbed, SshBed};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);

fn short_run<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "--runtime",
        "ssh",
        "--nodes",
        "3",
        "--ttl",
        "1s",
        "--hold",
        "50ms..600ms",
        "--duration",
        "10s",
        "--op-timeout",
        "1s",
        "--nemesis-interval",
        "1s",
    ];
    a.extend_from_slice(extra);
    a
}

/// Nothing of run `run_id` on hosts `hosts` of the bed: no process, chain, directory or qdisc.
fn assert_no_run_left(bed: &SshBed, run_id: &str, hosts: std::ops::Range<usize>, context: &str) {
    let all = hosts.len() == bed.hosts();
    for i in hosts {
        let left = bed.leftovers(i, run_id);
        assert!(left.is_empty(), "host {i} keeps {left:?}\n{context}");
    }
    if all {
        // Every host cleaned: the harness's control directory (master sockets) is gone too.
        let control = format!("/tmp/lp-ssh-{run_id}");
        assert!(
            !std::path::Path::new(&control).exists(),
            "{control} is left\n{context}"
        );
    }
}

/// Nothing of `run` on any host of the bed.
fn assert_clean(bed: &SshBed, run: &Run) {
    let run_id = sshbed::run_id_of(&run.run_dir());
    assert_no_run_left(bed, &run_id, 0..3, &run.describe());
}

/// Whether a node's own /v1/time showed a skew of at least half a second in `run`'s history:
/// the agent's page reached its process.
fn clock_observed_skewed(run: &Run) -> bool {
    let history = std::fs::read_to_string(run.run_dir().join("history.jsonl")).unwrap();
    history
        .lines()
        .filter(|l| l.contains("\"clock-observed\""))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["value"]["realtime_offset_ms"].as_i64())
        .any(|ms| ms.abs() >= 500)
}

/// The correct lockd over ssh under partition, pause, kill and clock faults is valid on three
/// seeds, as in namespaces (tests/netns.rs, tests/clock.rs); the clocks really moved, every
/// node's log is fetched, nothing is left on any host, and a rule lockpick did not make stays.
#[test]
fn correct_lockd_over_ssh_is_valid_on_three_seeds() {
    if !require_sshbed() || !common::require_vdso_clock() {
        return;
    }
    let bed = SshBed::start(3);
    bed.ssh(0, "iptables -w 5 -A INPUT -s 192.0.2.1 -j ACCEPT");
    let mut skewed = 0;
    for seed in ["1", "2", "3"] {
        let tmp = tempfile::tempdir().unwrap();
        let r = bed.run(
            tmp.path(),
            &short_run(&["--seed", seed, "--nemesis", "clock,partition,pause,kill"]),
            LIMIT,
        );
        r.assert_clean();
        assert_clean(&bed, &r);
        for n in ["n1", "n2", "n3"] {
            let log = r.run_dir().join("nodes").join(n).join("stdout.log");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(text.contains("--- start"), "{}: {text:?}", log.display());
        }
        skewed += usize::from(clock_observed_skewed(&r));
    }
    assert!(skewed >= 1, "no run observed a skewed node clock");
    let rules = bed.ssh(0, "iptables -w 5 -S INPUT");
    assert!(rules.contains("-s 192.0.2.1/32 -j ACCEPT"), "{rules}");
}

/// The bug on purpose is caught over ssh as in namespaces (tests/netns.rs, same schedule and
/// flags): a partitioned split-brain lockd grants one lock twice. Aimed, not drawn: the
/// primary is cut from both other members for 4 leases while every member has clients asking,
/// so each side grants from its own table.
#[test]
fn split_brain_over_ssh_double_grants() {
    if !require_sshbed() {
        return;
    }
    let bed = SshBed::start(3);
    let tmp = tempfile::tempdir().unwrap();
    let schedule = tmp.path().join("isolate-primary.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "seed": 1, "nodes": 3, "primary": 0, "faults": [
            {"id": "f1", "kind": "partition", "at_ms": 1000, "length_ms": 4000,
             "topology": "isolate", "cut": [["n1", "n2"], ["n1", "n3"]], "clients_cut_from": []}]}"#,
    )
    .unwrap();
    let args: Vec<&str> = short_run(&[
        "--seed",
        "1",
        "--unsafe",
        "split-brain",
        "--workload",
        "mutex",
        "--nemesis",
        "partition",
        "--schedule",
        schedule.to_str().unwrap(),
        "--duration",
        "7s",
        // As in tests/netns.rs: members cut from their primary grant alone within the cut,
        // and holds of a lease or more overlap across them.
        "--acquire-wait",
        "200ms",
        "--hold",
        "1s..1500ms",
    ]);
    let r = bed.run(&tmp.path().join("runs"), &args, LIMIT);
    assert_eq!(r.code, 1, "{}", r.describe());
    let kinds = r.kinds("violations");
    assert!(
        kinds
            .iter()
            .any(|k| k == "double-grant" || k == "token-reused"),
        "{kinds:?}\n{}",
        r.describe()
    );
    // What it rests on: the cut met live leases.
    let cells = r.results()["coverage"]["cells"].clone();
    assert!(
        cells
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "partition" && c["exercised"] == 1),
        "{cells}"
    );
    assert_clean(&bed, &r);
}

/// etcd, or a visible skip (a failure under LOCKPICK_SYSTEM_TESTS=1).
fn require_etcd() -> bool {
    common::require_etcd()
}

/// A 3-member etcd over ssh, the counter fenced by etcd's own txn: under partitions, pauses
/// and kills the register neither takes a stale write nor loses an increment.
#[test]
fn etcd_over_ssh_fenced_counter_holds() {
    if !require_sshbed() || !require_etcd() {
        return;
    }
    let bed = SshBed::start(3);
    let tmp = tempfile::tempdir().unwrap();
    let r = bed.run(
        tmp.path(),
        &short_run(&[
            "--adapter",
            "etcd",
            "--ttl",
            "2s",
            "--seed",
            "1",
            "--workload",
            "counter",
            "--nemesis",
            "partition,pause,kill",
        ]),
        LIMIT,
    );
    // 2 only when the verdict names what the draw left unexercised.
    assert!(matches!(r.code, 0..=2), "{}", r.describe());
    if r.code == 2 {
        assert!(
            r.results()["notes"]
                .to_string()
                .contains("requested, not exercised"),
            "{}",
            r.describe()
        );
    }
    let kinds = r.kinds("violations");
    assert!(
        !kinds.contains(&"stale-write-accepted".to_string()),
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"lost-update".to_string()), "{kinds:?}");
    assert!(
        r.results()["stats"]["grants"].as_u64().unwrap() >= 3,
        "{}",
        r.describe()
    );
    assert_clean(&bed, &r);
}

/// `lockpick run` started in the bed's hub, killed with SIGKILL by the test if it outlives
/// the test.
struct Harness(std::process::Child);

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a 30 s run and waits (up to 60 s) until its three nodes are up; returns the harness
/// and its run directory.
fn start_long_run(bed: &SshBed, out: &std::path::Path) -> (Harness, std::path::PathBuf) {
    let config = bed.write_config("");
    let hub = bed.hub();
    let mut args = vec![
        "netns",
        "exec",
        &hub,
        common::BIN,
        "run",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let run_args: Vec<&str> = short_run(&["--seed", "4", "--nemesis", "partition"])
        .into_iter()
        .map(|a| if a == "10s" { "30s" } else { a })
        .collect();
    args.extend(run_args);
    let child = std::process::Command::new("ip")
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let harness = Harness(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not come up"
        );
        std::thread::sleep(Duration::from_millis(200));
        let Some(run_dir) = std::fs::read_dir(out.join("lockd-counter"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path())
        else {
            continue;
        };
        let log = std::fs::read_to_string(run_dir.join("lockpick.log")).unwrap_or_default();
        if log.matches("node up").count() >= 4 && log.contains("fault schedule written") {
            // A fault or two in.
            std::thread::sleep(Duration::from_secs(2));
            return (harness, run_dir);
        }
    }
}

fn wait_exit(h: &mut Harness, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = h.0.try_wait().unwrap() {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "the run did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C: the run stops, and its own teardown leaves nothing on any host.
#[test]
fn ctrl_c_leaves_nothing_on_the_hosts() {
    if !require_sshbed() {
        return;
    }
    let bed = SshBed::start(3);
    let tmp = tempfile::tempdir().unwrap();
    let (mut h, run_dir) = start_long_run(&bed, tmp.path());
    let run_id = sshbed::run_id_of(&run_dir);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(h.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    wait_exit(&mut h, Duration::from_secs(60));
    assert_no_run_left(&bed, &run_id, 0..3, "");
    assert!(
        !run_dir.join("state.json").exists(),
        "the state file is removed"
    );
}

/// SIGKILL leaves the run on the hosts; `lockpick cleanup RUN_DIR` removes all of it and
/// nothing else (a rule lockpick did not make stays).
#[test]
fn sigkill_then_cleanup_leaves_nothing_on_the_hosts() {
    if !require_sshbed() {
        return;
    }
    let bed = SshBed::start(3);
    bed.ssh(1, "iptables -w 5 -A INPUT -s 192.0.2.7 -j ACCEPT");
    let tmp = tempfile::tempdir().unwrap();
    let (mut h, run_dir) = start_long_run(&bed, tmp.path());
    let run_id = sshbed::run_id_of(&run_dir);
    h.0.kill().unwrap();
    wait_exit(&mut h, Duration::from_secs(10));
    let left: Vec<String> = (0..3).flat_map(|i| bed.leftovers(i, &run_id)).collect();
    assert!(
        left.iter().any(|l| l.starts_with("process"))
            && left.iter().any(|l| l.starts_with("iptables")),
        "a killed run leaves its nodes and chain: {left:?}"
    );
    let o = bed.lockpick(
        &["cleanup", run_dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("cleaned 3 host(s)"));
    assert_no_run_left(&bed, &run_id, 0..3, "");
    assert!(bed
        .ssh(1, "iptables -w 5 -S INPUT")
        .contains("-s 192.0.2.7/32 -j ACCEPT"));
    assert!(
        !run_dir.join("state.json").exists(),
        "the state file is removed"
    );
}

/// A host whose sshd stops mid-run: the run ends as a harness error (exit 3), and every
/// artifact says which host and when; never a verdict.
#[test]
fn a_host_that_stops_answering_is_a_harness_error() {
    if !require_sshbed() {
        return;
    }
    let mut bed = SshBed::start(3);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().to_path_buf();
    let (mut h, run_dir) = start_long_run(&bed, &out);
    bed.stop_sshd(2);
    let status = wait_exit(&mut h, Duration::from_secs(90));
    assert_eq!(status.code(), Some(3), "{status:?}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let text = results.to_string();
    assert!(
        text.contains("10.213.0.13"),
        "results.json names the host: {text}"
    );
    assert_ne!(results["valid"], true, "{text}");
    let error = results["completeness"].to_string();
    assert!(
        error.contains("10.213.0.13") && error.contains("not answering"),
        "{error}"
    );
    for file in ["summary.txt", "junit.xml", "report.html"] {
        let body = std::fs::read_to_string(run_dir.join(file)).unwrap_or_default();
        assert!(body.contains("10.213.0.13"), "{file} names the host");
    }
    // The run's own teardown could not reach host 3; cleanup after sshd is back would.
    let log = std::fs::read_to_string(run_dir.join("lockpick.log")).unwrap();
    let run_id = sshbed::run_id_of(&run_dir);
    assert_no_run_left(&bed, &run_id, 0..2, &log);
    // What the run could not remove on the host that stopped answering stays listed in its
    // state file; once the host is back, `lockpick cleanup` removes it.
    assert!(
        run_dir.join("state.json").exists(),
        "the state file keeps the host"
    );
    bed.restart_sshd(2);
    let o = bed.lockpick(
        &["cleanup", run_dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_no_run_left(&bed, &run_id, 0..3, &log);
}

/// `doctor --config` checks every host over ssh; a run refuses up front, naming the host and
/// the reason, when a host cannot run what it asks for (here: a host with no sshd, and netem
/// where this kernel has none).
#[test]
fn doctor_checks_the_hosts_and_a_run_refuses_what_they_lack() {
    if !require_sshbed() {
        return;
    }
    let bed = SshBed::start(3);
    let config = bed.write_config("");
    let o = bed.lockpick(
        &["doctor", "--config", config.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    for i in 0..3 {
        assert!(
            stdout.contains(&format!("host root@{}:22", bed.ip(i))),
            "{stdout}"
        );
    }
    for check in [
        "reachable",
        "root",
        "arch",
        "disk",
        "iptables",
        "netem",
        "ptrace",
    ] {
        assert_eq!(
            stdout.matches(&format!("\n  {check} ")).count(),
            3,
            "{check} once per host: {stdout}"
        );
    }
    assert_eq!(o.status.code(), Some(0), "{stdout}");

    // A fourth "host" with no sshd: doctor fails, and a run over it is refused before any
    // traffic, with the host named.
    let unreachable = bed.dir.path().join("four.toml");
    let text = std::fs::read_to_string(&config).unwrap()
        + "[[nodes]]\naddress = \"10.213.0.14\"\nuser = \"root\"\nport = 22\n";
    std::fs::write(&unreachable, text).unwrap();
    let o = bed.lockpick(
        &["doctor", "--config", unreachable.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("10.213.0.14"));
    let tmp = tempfile::tempdir().unwrap();
    let o = bed.lockpick(
        &[
            "run",
            "--config",
            unreachable.to_str().unwrap(),
            "--out",
            tmp.path().to_str().unwrap(),
            "--runtime",
            "ssh",
            "--nodes",
            "4",
            "--duration",
            "5s",
            "--nemesis",
            "pause",
        ],
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("10.213.0.14") && stderr.contains("reachable"),
        "{stderr}"
    );

    // netem where a host lacks it: refused up front with the host and the reason.
    if stdout.contains("netem      missing") {
        let tmp = tempfile::tempdir().unwrap();
        let r = bed.run(
            tmp.path(),
            &short_run(&["--seed", "1", "--nemesis", "netem"]),
            LIMIT,
        );
        assert_eq!(r.code, 3, "{}", r.describe());
        assert!(
            r.stderr.contains("10.213.0.11") && r.stderr.contains("netem"),
            "{}",
            r.describe()
        );
    }
}

/// A `[[nodes]]` entry's own `command` runs on its host with its placeholders filled in (here
/// lockd started from the test's binary path, as a service installed on the host would be).
#[test]
fn a_nodes_own_command_runs_on_its_host() {
    if !require_sshbed() {
        return;
    }
    let bed = SshBed::start(1);
    let config = bed.dir.path().join("own.toml");
    std::fs::write(
        &config,
        format!(
            "[ssh]\nconfig = \"ssh_config\"\n\n[[nodes]]\naddress = \"{}\"\nservice_port = 7100\n\
             command = \"{} lockd --listen {{host}}:{{port}} --data-dir {{data_dir}}\"\n",
            bed.ip(0),
            common::BIN
        ),
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let o = bed.lockpick(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--out",
            tmp.path().to_str().unwrap(),
            "--runtime",
            "ssh",
            "--nodes",
            "1",
            "--duration",
            "3s",
            "--nemesis",
            "pause,kill",
            "--seed",
            "1",
        ],
        LIMIT,
    );
    let r = Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        out_dir: tmp.path().to_path_buf(),
    };
    r.assert_clean();
    let log = std::fs::read_to_string(r.run_dir().join("lockpick.log")).unwrap();
    assert!(
        log.contains(&format!("checked=GET http://{}:7100/", bed.ip(0))),
        "{log}"
    );
    // The run's config.toml names the hosts' file by its absolute path: it reruns from anywhere.
    let recorded = std::fs::read_to_string(r.run_dir().join("config.toml")).unwrap();
    let absolute = std::fs::canonicalize(&config).unwrap();
    assert!(
        recorded.contains(&format!("hosts_file = \"{}\"", absolute.display())),
        "{recorded}"
    );
    assert_no_run_left(&bed, &sshbed::run_id_of(&r.run_dir()), 0..1, &r.describe());
}

/// A service lockpick starts itself, run on the bed's hosts: its flags, the faults that find
/// what it gets wrong (aimed by a schedule, as in its own tests), and the field of each grant
/// that is the service's evidence.
struct OnHosts {
    adapter: &'static str,
    nodes: usize,
    args: &'static [&'static str],
    faults: &'static str,
    /// The violation the faults must find, as they do on the local runtime.
    found: &'static str,
    evidence: &'static str,
}

/// Three clients, each holding for 9 s under a 30 s lease: a holder's first renew would come
/// at a third of it, 10 s, after its release, so nothing the holder does can repair what a
/// restart early in the run made the service forget. The restarts are asked for at 2.5 s: the
/// first grant lies inside its hold whenever it came in the first 2.5 s (on a machine starved
/// by other work it once came after 1 s, where the kill was), and the restart has until the
/// holder's release, 6.5 s later, to be carried out and won by another client (with a 6 s hold
/// under a 12 s lease, a loaded machine once still had the kill under way at 5 s: the holder's
/// renew at 4 s found its keys on a majority, and nothing was exercised).
const LEASE_PAST_THE_RUN: &[&str] = &[
    "--clients",
    "3",
    "--ttl",
    "30s",
    "--hold",
    "9s..9s",
    "--duration",
    "11s",
];

/// Holds of 1-2 s under a 500 ms session, for [`STALL_PAST_THE_SESSION`].
const STALLED_HOLDER: &[&str] = &[
    "--workload",
    "mutex",
    "--ttl",
    "500ms",
    "--hold",
    "1s..2s",
    "--duration",
    "6s",
];

/// A holder stalled for 2 s from 0.8 s, waking into a renew: past any session timeout of a
/// 500 ms ttl.
const STALL_PAST_THE_SESSION: &str = r#"{"id": "f1", "kind": "client-pause", "at_ms": 800,
  "length_ms": 2000, "window_ms": 2000, "shape": "long", "wake": "renew"}"#;

/// `case` over ssh: its nodes are started, faulted and stopped on the hosts, the aimed faults
/// find the same violation as on the local runtime, every grant carries the service's own
/// evidence, every node's log is fetched back, and nothing of the run is left on any host.
fn real_service_over_ssh(case: &OnHosts) {
    let bed = SshBed::start(case.nodes);
    let tmp = tempfile::tempdir().unwrap();
    let schedule = tmp.path().join("schedule.json");
    std::fs::write(
        &schedule,
        format!(
            r#"{{"version": 1, "seed": 1, "nodes": {}, "primary": 0, "faults": [{}]}}"#,
            case.nodes, case.faults
        ),
    )
    .unwrap();
    let nodes = case.nodes.to_string();
    let mut args = vec![
        "--runtime",
        "ssh",
        "--adapter",
        case.adapter,
        "--nodes",
        &nodes,
        "--seed",
        "1",
        "--schedule",
        schedule.to_str().unwrap(),
    ];
    args.extend_from_slice(case.args);
    let r = bed.run(&tmp.path().join("runs"), &args, LIMIT);
    let context = format!("{}: {}", case.adapter, r.describe());
    assert_eq!(r.code, 1, "{context}");
    assert!(
        r.kinds("violations").iter().any(|k| k == case.found),
        "{context}"
    );
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    let grants: Vec<serde_json::Value> = history
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|o| o["type"] == "ok" && o["f"] == "acquire")
        .collect();
    assert!(grants.len() >= 2, "{context}");
    for g in &grants {
        assert!(!g["value"][case.evidence].is_null(), "{g}\n{context}");
    }
    for n in 1..=case.nodes {
        let dir = r.run_dir().join("nodes").join(format!("n{n}"));
        let logged = ["stdout.log", "stderr.log"]
            .iter()
            .any(|f| std::fs::metadata(dir.join(f)).is_ok_and(|m| m.len() > 0));
        assert!(logged, "no log fetched from n{n}\n{context}");
    }
    let run_id = sshbed::run_id_of(&r.run_dir());
    assert_no_run_left(&bed, &run_id, 0..case.nodes, &context);
}

/// Single Redis without persistence, killed while a grant is held: it restarts empty and
/// grants the same lock again, before the holder's first renew.
#[test]
fn redis_over_ssh_forgets_the_lock_on_a_restart() {
    if !require_sshbed() || !common::require_redis() {
        return;
    }
    real_service_over_ssh(&OnHosts {
        adapter: "redis",
        nodes: 1,
        args: LEASE_PAST_THE_RUN,
        faults: r#"{"id": "f1", "kind": "kill", "at_ms": 2500, "length_ms": 200, "nodes": ["n1"]}"#,
        found: "double-grant",
        evidence: "redis_node",
    });
}

/// Redis with Sentinel: the master cut off from the other two boxes (not from the clients)
/// keeps granting while the sentinels there promote a replica that grants too.
#[test]
fn redis_sentinel_over_ssh_grants_on_both_sides_of_a_cut() {
    if !require_sshbed() || !common::require_redis() {
        return;
    }
    real_service_over_ssh(&OnHosts {
        adapter: "redis-sentinel",
        nodes: 3,
        args: &[
            "--clients",
            "6",
            "--ttl",
            "1s",
            "--hold",
            "50ms..300ms",
            "--op-timeout",
            "500ms",
            "--duration",
            "10s",
        ],
        faults: r#"{"id": "f1", "kind": "partition", "at_ms": 1000, "length_ms": 7000,
            "topology": "isolate", "cut": [["n1", "n2"], ["n1", "n3"]], "clients_cut_from": []}"#,
        found: "double-grant",
        evidence: "sentinel",
    });
}

/// Redlock over three masters without persistence, two of them restarted under a live grant:
/// whichever majority the grant was on, at most one master remembers it, and another client
/// wins the other two before the holder's first renew.
#[test]
fn redlock_over_ssh_loses_its_majority_to_restarts() {
    if !require_sshbed() || !common::require_redis() {
        return;
    }
    real_service_over_ssh(&OnHosts {
        adapter: "redlock",
        nodes: 3,
        args: LEASE_PAST_THE_RUN,
        faults: r#"{"id": "f1", "kind": "kill", "at_ms": 2500, "length_ms": 200, "nodes": ["n2", "n3"]}"#,
        found: "double-grant",
        evidence: "redlock_nodes",
    });
}

/// A three-member ZooKeeper ensemble on three hosts: a holder stalled past its session timeout
/// loses its lock node, another client is granted, and the stalled one believes it holds the
/// lock until it wakes and hears its session was lost.
#[test]
fn zookeeper_ensemble_over_ssh_loses_a_stalled_holders_session() {
    if !require_sshbed() || !common::require_zookeeper() {
        return;
    }
    real_service_over_ssh(&OnHosts {
        adapter: "zookeeper",
        nodes: 3,
        args: STALLED_HOLDER,
        faults: STALL_PAST_THE_SESSION,
        found: "double-grant",
        evidence: "zk_server",
    });
}

/// A PostgreSQL session advisory lock: the stalled holder's session is ended by its idle
/// timeout, its lock with it, and another client is granted while it still believes.
#[test]
fn postgres_over_ssh_loses_a_stalled_holders_session() {
    if !require_sshbed() || !common::require_postgres() {
        return;
    }
    real_service_over_ssh(&OnHosts {
        adapter: "postgres",
        nodes: 1,
        args: STALLED_HOLDER,
        faults: STALL_PAST_THE_SESSION,
        found: "double-grant",
        evidence: "pg_backend_pid",
    });
}

/// Not a check: prints what the ssh runtime costs on the bed (BENCHMARKS.md), from one short
/// run's log: setting the hosts up (connect, check, copy the binary, chain); and the time of
/// one remote command through a multiplexed connection (what each pause, resume, kill, rule
/// or clock change costs).
#[test]
#[ignore]
fn measure_ssh_runtime() {
    if !require_sshbed() {
        return;
    }
    let bed = SshBed::start(3);
    let tmp = tempfile::tempdir().unwrap();
    let r = bed.run(
        tmp.path(),
        &short_run(&[
            "--seed",
            "1",
            "--nemesis",
            "pause",
            "--nemesis-interval",
            "300ms",
        ]),
        LIMIT,
    );
    r.assert_clean();
    let log = std::fs::read_to_string(r.run_dir().join("lockpick.log")).unwrap();
    let at = |needle: &str| -> f64 {
        let line = log.lines().find(|l| l.contains(needle)).unwrap();
        let t = &line[11..26]; // HH:MM:SS.ffffff
        let p: Vec<f64> = t.split(':').map(|x| x.parse().unwrap()).collect();
        p[0] * 3600.0 + p[1] * 60.0 + p[2]
    };
    let exe = std::fs::metadata(common::BIN).unwrap().len() >> 20;
    println!(
        "setup of 3 hosts (checks, {exe} MiB binary copied to each, chain): {:.2} s",
        at("ssh hosts ready") - at("node up node=\"store\"")
    );
    // One remote command through a multiplexed connection, as every fault's call makes it.
    let hub = bed.hub();
    let config = bed.dir.path().join("ssh_config");
    let control = format!("ControlPath={}/%C", bed.dir.path().display());
    let dest = format!("root@{}", bed.ip(0));
    let ssh = |extra: &[&str]| {
        let mut argv = vec!["netns", "exec", &hub, "ssh", "-F", config.to_str().unwrap()];
        argv.extend([
            "-o",
            "ControlMaster=auto",
            "-o",
            &control,
            "-o",
            "ControlPersist=10",
        ]);
        argv.extend_from_slice(extra);
        let started = std::time::Instant::now();
        let ok = std::process::Command::new("ip")
            .args(&argv)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "{argv:?}");
        started.elapsed().as_secs_f64() * 1e3
    };
    ssh(&[&dest, "true"]);
    let mut ms: Vec<f64> = (0..21).map(|_| ssh(&[&dest, "kill -0 1"])).collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ssh(&["-O", "exit", &dest]);
    println!(
        "one remote command over the multiplexed connection: median {:.1} ms, max {:.1} ms (21 calls)",
        ms[10], ms[20]
    );
}
