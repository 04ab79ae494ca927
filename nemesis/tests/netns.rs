//! The network-namespace runtime on real namespaces (root, `ip`, `iptables`).
//!
//! Without root or the tools every test prints `SKIPPED: ...` and passes, except under
//! LOCKPICK_SYSTEM_TESTS=1, where it fails. The netem timing needs the kernel's sch_netem;
//! without it the test checks that netem is refused with that reason (and fails only under
//! LOCKPICK_NETEM_TESTS=1). Every test creates its own cluster with a unique prefix, bounds
//! its duration and checks that none of its namespaces are left.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nemesis::netns::{
    capabilities, cleanup_from_state, probe_tcp, tcp_listener_in, topology, NetemSpec,
    NetnsCluster, NetnsError,
};
use nemesis::{LocalNode, NodeCommand, StateFileError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ECHO_PORT: u16 = 7000;
const PROBE: Duration = Duration::from_millis(500);
const TEST_LIMIT: Duration = Duration::from_secs(60);

fn forced(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// Whether this machine can run namespace tests; prints why not.
fn system_ready(test: &str) -> bool {
    let missing: Vec<String> = capabilities()
        .into_iter()
        .filter(|c| matches!(c.name, "root" | "ip" | "netns" | "iptables") && !c.ok)
        .map(|c| match c.package {
            Some(p) => format!("{}: {} (package {p})", c.name, c.why),
            None => format!("{}: {}", c.name, c.why),
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = missing.join("; ");
    if forced("LOCKPICK_SYSTEM_TESTS") {
        panic!("{test} must run under LOCKPICK_SYSTEM_TESTS=1 but cannot: {why}");
    }
    eprintln!("SKIPPED: {test}: {why}");
    false
}

/// The state file's place, and a guard that cleans from it if a test failed before its
/// cluster's own teardown ran (e.g. after a forget).
struct StateGuard {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl StateGuard {
    fn new() -> StateGuard {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("netns-state.json");
        StateGuard { _dir: dir, path }
    }
}

impl Drop for StateGuard {
    fn drop(&mut self) {
        if self.path.exists() {
            let _ = cleanup_from_state(&self.path);
        }
    }
}

fn our_namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

fn iptables_rules(ns: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "iptables", "-w", "5", "-S"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// An echo server on `addr` inside `ns`, served by a thread until dropped (or 60 s).
struct Echo {
    stop: Arc<AtomicBool>,
}

impl Echo {
    fn start(ns: &str, addr: SocketAddrV4) -> Echo {
        let listener = tcp_listener_in(ns, addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || serve_echo(listener, flag));
        Echo { stop }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_echo(listener: TcpListener, stop: Arc<AtomicBool>) {
    let deadline = Instant::now() + TEST_LIMIT;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        match listener.accept() {
            Ok((mut conn, _)) => {
                std::thread::spawn(move || {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 || conn.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Connects to `addr` and echoes one message, within `limit`; returns how long it took.
async fn round_trip(addr: SocketAddr, limit: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let attempt = async {
        let mut conn = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        conn.write_all(b"ping")
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if &buf != b"ping" {
            return Err(format!("echoed {buf:?}"));
        }
        Ok(started.elapsed())
    };
    tokio::time::timeout(limit, attempt)
        .await
        .map_err(|_| format!("no echo within {limit:?}"))?
}

fn echo_addr(cluster: &NetnsCluster, node: usize) -> SocketAddrV4 {
    SocketAddrV4::new(cluster.node_ip(node), ECHO_PORT)
}

fn reaches(cluster: &NetnsCluster, from: usize, to: usize) -> bool {
    probe_tcp(cluster.node_ns(from), echo_addr(cluster, to), PROBE).unwrap()
}

fn create(hint: &str, nodes: usize, state: &StateGuard) -> NetnsCluster {
    let cluster = NetnsCluster::create(hint, nodes, &state.path).unwrap();
    assert!(
        state.path.exists(),
        "the state file is written during the run"
    );
    cluster
}

#[test]
fn partition_isolates_one_node_and_heal_restores_it() {
    if !system_ready("partition_isolates_one_node_and_heal_restores_it") {
        return;
    }
    let state = StateGuard::new();
    let cluster = create("part", 3, &state);
    let prefix = cluster.prefix().to_string();
    let _echo: Vec<Echo> = (0..3)
        .map(|i| Echo::start(cluster.node_ns(i), echo_addr(&cluster, i)))
        .collect();
    let pairs = [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)];
    for (a, b) in pairs {
        assert!(reaches(&cluster, a, b), "before the partition {a} -> {b}");
    }

    cluster.partition(&topology::isolate(3, 0)).unwrap();
    assert!(cluster.is_partitioned());
    for (a, b) in pairs {
        let cut = a == 0 || b == 0;
        assert_eq!(
            reaches(&cluster, a, b),
            !cut,
            "{a} -> {b} during isolate(0)"
        );
    }
    // Partitioning the same pairs again adds no second rule.
    cluster.partition(&[(1, 0)]).unwrap();
    assert_eq!(iptables_rules(cluster.node_ns(0)).len(), 3 + 2);
    assert_eq!(iptables_rules(cluster.node_ns(1)).len(), 3 + 1);

    cluster.heal().unwrap();
    assert!(!cluster.is_partitioned());
    for (a, b) in pairs {
        assert!(reaches(&cluster, a, b), "after heal {a} -> {b}");
    }
    for i in 0..3 {
        let rules = iptables_rules(cluster.node_ns(i));
        assert!(
            rules.iter().all(|r| r.starts_with("-P ")),
            "node {i} keeps only the default policies: {rules:?}"
        );
    }
    drop(cluster);
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_reaches_a_node_and_cut_clients_blocks_only_clients() {
    if !system_ready("proxy_reaches_a_node_and_cut_clients_blocks_only_clients") {
        return;
    }
    let state = StateGuard::new();
    let cluster = create("proxy", 2, &state);
    let prefix = cluster.prefix().to_string();
    let _echo = Echo::start(cluster.node_ns(1), echo_addr(&cluster, 1));
    tokio::time::timeout(TEST_LIMIT, async {
        let addr = cluster.proxy(1, ECHO_PORT).await.unwrap();
        assert!(addr.ip().is_loopback(), "{addr}");
        assert_eq!(
            cluster.proxy(1, ECHO_PORT).await.unwrap(),
            addr,
            "one proxy per target"
        );
        round_trip(addr, Duration::from_secs(2)).await.unwrap();

        cluster.cut_clients(&[1]).unwrap();
        let cut = round_trip(addr, Duration::from_secs(2)).await;
        assert!(cut.is_err(), "clients are cut off: {cut:?}");
        assert!(reaches(&cluster, 0, 1), "peers still reach the node");
        // Both ways: what the node sends to the hub (an answer it was already deciding) is
        // dropped too, not only what it receives from it.
        let rules = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                cluster.node_ns(1),
                "iptables",
                "-w",
                "5",
                "-S",
            ])
            .output()
            .unwrap();
        let rules = String::from_utf8_lossy(&rules.stdout);
        for want in [
            "-A INPUT -s 10.213.0.1/32 -j DROP",
            "-A OUTPUT -d 10.213.0.1/32 -j DROP",
        ] {
            assert!(rules.contains(want), "{want} missing: {rules}");
        }

        cluster.heal().unwrap();
        round_trip(addr, Duration::from_secs(2)).await.unwrap();
        // Many connections at once, all answered.
        let many: Vec<_> = (0..20)
            .map(|_| tokio::spawn(round_trip(addr, Duration::from_secs(5))))
            .collect();
        for conn in many {
            conn.await.unwrap().unwrap();
        }
    })
    .await
    .expect("test exceeded its time limit");
    drop(cluster);
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netem_delays_round_trips_until_cleared() {
    if !system_ready("netem_delays_round_trips_until_cleared") {
        return;
    }
    let state = StateGuard::new();
    let cluster = create("netem", 1, &state);
    let _echo = Echo::start(cluster.node_ns(0), echo_addr(&cluster, 0));
    let delay = NetemSpec {
        delay_ms: 200,
        ..NetemSpec::default()
    };
    tokio::time::timeout(TEST_LIMIT, async {
        let addr = cluster.proxy(0, ECHO_PORT).await.unwrap();
        let quick = round_trip(addr, Duration::from_secs(2)).await.unwrap();
        assert!(quick < Duration::from_millis(100), "{quick:?} before netem");
        match cluster.netem(&[0], &delay) {
            Ok(()) => {}
            Err(NetnsError::NetemUnavailable { reason }) => {
                assert!(
                    !forced("LOCKPICK_NETEM_TESTS"),
                    "LOCKPICK_NETEM_TESTS=1 but netem is unavailable: {reason}"
                );
                let doctor = capabilities()
                    .into_iter()
                    .find(|c| c.name == "netem")
                    .unwrap();
                assert!(!doctor.ok, "doctor agrees netem is missing: {doctor:?}");
                eprintln!("SKIPPED: netem timing: {reason}");
                return;
            }
            Err(e) => panic!("netem failed: {e}"),
        }
        // The delay applies to what the node sends: SYN-ACK and echo, so ≥ 2 × 200 ms.
        let slow = round_trip(addr, Duration::from_secs(5)).await.unwrap();
        assert!(
            slow >= Duration::from_millis(200),
            "{slow:?} with a 200 ms delay"
        );
        cluster.clear_netem(&[0]).unwrap();
        let quick = round_trip(addr, Duration::from_secs(2)).await.unwrap();
        assert!(quick < Duration::from_millis(100), "{quick:?} after clear");
    })
    .await
    .expect("test exceeded its time limit");
}

/// Dropping a cluster with live proxies from inside a current-thread runtime returns: the
/// teardown cannot wait for the runtime (it is blocked in the drop).
#[test]
fn drop_inside_a_current_thread_runtime_returns() {
    if !system_ready("drop_inside_a_current_thread_runtime_returns") {
        return;
    }
    let state = StateGuard::new();
    let path = state.path.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let cluster = NetnsCluster::create("ctrt", 1, &path).unwrap();
            let _echo = Echo::start(cluster.node_ns(0), echo_addr(&cluster, 0));
            let addr = cluster.proxy(0, ECHO_PORT).await.unwrap();
            round_trip(addr, Duration::from_secs(2)).await.unwrap();
            let prefix = cluster.prefix().to_string();
            drop(cluster);
            let _ = done_tx.send(prefix);
        });
    });
    let prefix = done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("drop inside a current-thread runtime hung (or the body failed)");
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
}

#[test]
fn teardown_and_drop_remove_every_namespace() {
    if !system_ready("teardown_and_drop_remove_every_namespace") {
        return;
    }
    let state = StateGuard::new();
    let mut cluster = create("down", 3, &state);
    let prefix = cluster.prefix().to_string();
    let mut expected = vec![format!("{prefix}-hub")];
    expected.extend((0..3).map(|i| format!("{prefix}-n{i}")));
    let mut listed = our_namespaces(&prefix);
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected);
    let recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state.path).unwrap()).unwrap();
    assert_eq!(
        recorded["namespaces"].as_array().unwrap().len(),
        4,
        "{recorded}"
    );
    assert_eq!(recorded["pid"], std::process::id());

    cluster.teardown().unwrap();
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
    assert!(
        !state.path.exists(),
        "a clean teardown removes the state file"
    );
    cluster.teardown().unwrap();
    assert!(matches!(
        cluster.partition(&[(0, 1)]),
        Err(NetnsError::TornDown { .. })
    ));
    drop(cluster);

    let state = StateGuard::new();
    let cluster = create("drop", 2, &state);
    let prefix = cluster.prefix().to_string();
    assert_eq!(our_namespaces(&prefix).len(), 3);
    drop(cluster);
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
    assert!(!state.path.exists());
}

#[test]
fn bad_arguments_create_nothing() {
    let state = StateGuard::new();
    let err = NetnsCluster::create("bad", 0, &state.path).unwrap_err();
    assert!(
        matches!(err, NetnsError::NodeCount { nodes: 0, .. }),
        "{err}"
    );
    assert!(!state.path.exists());
    if !system_ready("bad_arguments_create_nothing") {
        return;
    }
    // A state file in a missing directory: refused before any namespace exists.
    let missing = state.path.join("no/such/dir/state.json");
    let err = NetnsCluster::create("bad", 1, &missing).unwrap_err();
    assert!(
        matches!(err, NetnsError::StateFile(StateFileError::Io { .. })),
        "{err}"
    );
    assert_eq!(our_namespaces("lp-bad-"), Vec::<String>::new());
}

#[test]
fn forgotten_cluster_is_removed_from_its_state_file() {
    if !system_ready("forgotten_cluster_is_removed_from_its_state_file") {
        return;
    }
    let state = StateGuard::new();
    let cluster = create("forget", 2, &state);
    let prefix = cluster.prefix().to_string();
    std::mem::forget(cluster); // as if the run died: no Drop, no teardown
    assert_eq!(our_namespaces(&prefix).len(), 3);
    let report = cleanup_from_state(&state.path).unwrap();
    assert_eq!(report.removed.len(), 3, "{report:?}");
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
    assert!(!state.path.exists());
}

/// Run as a child process by the SIGKILL test: holds a cluster until killed.
#[test]
#[ignore = "helper process for sigkilled_run_is_cleaned_up_from_its_state_file"]
fn child_holds_a_cluster_until_killed() {
    let Ok(path) = std::env::var("LOCKPICK_NETNS_CHILD_STATE") else {
        return;
    };
    let cluster = NetnsCluster::create("killed", 2, Path::new(&path)).unwrap();
    println!("READY {}", cluster.prefix());
    std::io::stdout().flush().unwrap();
    // Bounded even if the parent never kills us.
    std::thread::sleep(TEST_LIMIT);
}

#[test]
fn sigkilled_run_is_cleaned_up_from_its_state_file() {
    if !system_ready("sigkilled_run_is_cleaned_up_from_its_state_file") {
        return;
    }
    let state = StateGuard::new();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holds_a_cluster_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LOCKPICK_NETNS_CHILD_STATE", &state.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kills the child (ours) if an assertion below fails.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut child = KillOnDrop(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints the test's name on the same line first.
            if let Some((_, prefix)) = line.split_once("READY ") {
                let _ = tx.send(prefix.trim().to_string());
            }
        }
    });
    let prefix = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the child did not create its cluster");
    assert!(prefix.starts_with("lp-killed-"), "{prefix}");
    assert_eq!(our_namespaces(&prefix).len(), 3);

    let err = cleanup_from_state(&state.path).unwrap_err();
    assert!(
        matches!(err, NetnsError::StateFile(StateFileError::RunAlive { .. })),
        "{err}"
    );
    assert_eq!(our_namespaces(&prefix).len(), 3, "a live run is left alone");

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let report = cleanup_from_state(&state.path).unwrap();
    let mut removed = report.removed.clone();
    removed.sort();
    assert_eq!(
        removed,
        vec![
            format!("{prefix}-hub"),
            format!("{prefix}-n0"),
            format!("{prefix}-n1")
        ]
    );
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
    assert!(!state.path.exists());
    // A second cleanup finds no state file: an error naming it, nothing touched.
    let again = cleanup_from_state(&state.path).unwrap_err();
    assert!(again.to_string().contains("netns-state.json"), "{again}");
}

#[test]
fn wrap_runs_commands_inside_the_node_namespace() {
    if !system_ready("wrap_runs_commands_inside_the_node_namespace") {
        return;
    }
    let state = StateGuard::new();
    let cluster = create("wrap", 2, &state);
    let run = |cmd: NodeCommand| {
        let NodeCommand::Argv(argv) = cmd else {
            panic!("wrap returns an argv");
        };
        assert_eq!(argv[..4], ["ip", "netns", "exec", cluster.node_ns(1)]);
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let argv = run(cluster.wrap(
        1,
        NodeCommand::Argv(
            ["ip", "-4", "-o", "addr", "show"]
                .map(String::from)
                .to_vec(),
        ),
    ));
    assert!(
        argv.contains(&format!("{}/24", cluster.node_ip(1))),
        "{argv}"
    );
    assert!(!argv.contains(&cluster.node_ip(0).to_string()), "{argv}");
    let shell = run(cluster.wrap(1, NodeCommand::Shell("ip -4 -o addr show | wc -l".into())));
    assert_eq!(shell.trim(), "2", "lo and eth0 only: {shell}");
}

fn python3_available(test: &str) -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if forced("LOCKPICK_SYSTEM_TESTS") {
            panic!("{test}: python3 is required under LOCKPICK_SYSTEM_TESTS=1");
        }
        eprintln!("SKIPPED: {test}: python3 not found (apt-get install python3)");
    }
    ok
}

/// The composition the runner uses: a LocalNode whose command is wrapped into the node's
/// namespace and whose health checks go through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_node_runs_inside_a_namespace_behind_the_proxy() {
    let test = "local_node_runs_inside_a_namespace_behind_the_proxy";
    if !system_ready(test) || !python3_available(test) {
        return;
    }
    let state = StateGuard::new();
    let dir = tempfile::tempdir().unwrap();
    let cluster = create("node", 1, &state);
    let prefix = cluster.prefix().to_string();
    tokio::time::timeout(TEST_LIMIT, async {
        let script = common::write_server(dir.path());
        let node_dir = dir.path().join("n0");
        let port = 7001;
        let line = format!(
            "python3 {} {} {port} {}",
            script.display(),
            cluster.node_ip(0),
            node_dir.join("data").display()
        );
        let proxy = cluster.proxy(0, port).await.unwrap();
        let mut node = LocalNode::new(
            "n0",
            cluster.wrap(0, NodeCommand::Shell(line)),
            proxy.ip(),
            proxy.port(),
            node_dir,
        );
        node.start(Duration::from_secs(10)).await.unwrap();
        let pid = node.pid().unwrap();
        // `ip netns exec` and the shell exec'd: the forked process is the service itself,
        // inside the node's namespace.
        let cmdline = common::cmdline(pid);
        assert!(
            cmdline.contains("python3")
                && !cmdline.starts_with("ip ")
                && !cmdline.starts_with("sh "),
            "{cmdline}"
        );
        let ns_of = |p: &str| std::fs::read_link(p).unwrap();
        assert_ne!(
            ns_of(&format!("/proc/{pid}/ns/net")),
            ns_of("/proc/self/ns/net")
        );

        cluster.cut_clients(&[0]).unwrap();
        assert!(node.check_health(Duration::from_secs(1)).await.is_err());
        cluster.heal().unwrap();
        node.check_health(Duration::from_secs(2)).await.unwrap();
        node.stop();
        assert!(common::wait_until(Duration::from_secs(5), || common::gone(
            pid
        )));
    })
    .await
    .expect("test exceeded its time limit");
    drop(cluster);
    assert_eq!(our_namespaces(&prefix), Vec::<String>::new());
}

#[test]
fn capabilities_name_every_requirement() {
    let caps = capabilities();
    let names: Vec<&str> = caps.iter().map(|c| c.name).collect();
    assert_eq!(names, ["root", "ip", "netns", "iptables", "netem"]);
    for c in &caps {
        assert!(!c.why.is_empty(), "{c:?}");
    }
    assert_eq!(
        caps.iter().find(|c| c.name == "iptables").unwrap().package,
        Some("iptables")
    );
}
