//! LocalNode against real processes: a small Python HTTP server as the node.

mod common;

use std::time::Duration;

use common::*;
use nemesis::{process_group_alive, process_state, LocalNode, NodeCommand, NodeError};

#[tokio::test]
async fn start_waits_for_health_and_logs_output() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut node = python_node(dir.path(), "n1");
        assert_eq!(node.pid(), None);
        node.start(STARTUP).await.unwrap();
        node.check_health(Duration::from_secs(2)).await.unwrap();
        assert_eq!(node.base_url(), format!("http://127.0.0.1:{}", node.port()));

        let pid = node.pid().unwrap();
        // `exec` replaced the shell: the pid we hold is the service itself.
        assert!(cmdline(pid).contains("python3"), "{}", cmdline(pid));
        // Its own process group, not ours.
        assert_eq!(stat_field(pid, 5), Some(pid.to_string()));
        assert_ne!(
            stat_field(pid, 5),
            stat_field(std::process::id(), 5),
            "the node must not share the harness's process group"
        );
        assert!(process_group_alive(pid));

        let stdout = std::fs::read_to_string(node.stdout_log()).unwrap();
        assert!(
            stdout.contains("--- lockpick: start #1 of node n1"),
            "{stdout}"
        );
        assert!(stdout.contains("listening on 127.0.0.1"), "{stdout}");
        let stderr = std::fs::read_to_string(node.stderr_log()).unwrap();
        assert!(stderr.contains("start #1 of node n1"), "{stderr}");
        let starts = std::fs::read_to_string(node.data_dir().join("starts")).unwrap();
        assert_eq!(starts.trim(), pid.to_string());

        let err = node.start(STARTUP).await.unwrap_err();
        assert!(matches!(err, NodeError::AlreadyRunning { .. }), "{err}");

        node.stop();
        assert_eq!(node.pid(), None);
        assert_eq!(process_state(pid), None, "stop must reap the process");
        assert!(!process_group_alive(pid));
    })
    .await
}

#[tokio::test]
async fn argv_command_starts_too() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let script = write_server(dir.path());
        let port = nemesis::free_port(LOCALHOST).unwrap();
        let node_dir = dir.path().join("n2");
        let argv = vec![
            "python3".to_string(),
            script.display().to_string(),
            "127.0.0.1".to_string(),
            port.to_string(),
            node_dir.join("data").display().to_string(),
        ];
        let mut node = LocalNode::new("n2", NodeCommand::Argv(argv), LOCALHOST, port, node_dir);
        node.start(STARTUP).await.unwrap();
        node.check_health(Duration::from_secs(2)).await.unwrap();

        let empty = LocalNode::new(
            "n3",
            NodeCommand::Argv(vec![]),
            LOCALHOST,
            port,
            dir.path().join("n3"),
        )
        .start(STARTUP)
        .await
        .unwrap_err();
        assert!(
            empty.to_string().contains("node n3: empty command"),
            "{empty}"
        );
    })
    .await
}

#[tokio::test]
async fn pause_stops_answers_and_resume_restores_them() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut node = python_node(dir.path(), "n1");
        node.start(STARTUP).await.unwrap();
        let pid = node.pid().unwrap();

        node.pause().unwrap();
        assert!(node.is_paused());
        assert!(wait_until(Duration::from_secs(2), || process_state(pid) == Some('T')));
        // The kernel still accepts the connection; nobody answers it.
        let err = node
            .check_health(Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(err, NodeError::Unhealthy { .. }), "{err}");
        assert!(err.to_string().starts_with("node n1: GET "), "{err}");

        node.resume().unwrap();
        assert!(!node.is_paused());
        assert!(wait_until(Duration::from_secs(2), || process_state(pid) != Some('T')));
        node.check_health(Duration::from_secs(2)).await.unwrap();

        // Stopping a paused node: SIGCONT first, so SIGTERM can end it.
        node.pause().unwrap();
        node.stop();
        assert!(!node.is_paused());
        assert_eq!(process_state(pid), None);
    })
    .await
}

#[tokio::test]
async fn kill_and_restart_give_a_new_process_on_the_same_data() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut node = python_node(dir.path(), "n1");
        node.start(STARTUP).await.unwrap();
        let first = node.pid().unwrap();

        // Killing a paused node works: SIGKILL ends stopped processes.
        node.pause().unwrap();
        node.kill().unwrap();
        assert_eq!(node.pid(), None);
        assert!(!node.is_paused());
        assert_eq!(process_state(first), None, "kill must reap: no zombie");
        assert!(node.check_health(Duration::from_millis(300)).await.is_err());
        let err = node.kill().unwrap_err();
        assert!(
            err.to_string()
                .contains("node n1: cannot kill: not running"),
            "{err}"
        );

        node.restart(STARTUP).await.unwrap();
        let second = node.pid().unwrap();
        assert_ne!(first, second);
        node.check_health(Duration::from_secs(2)).await.unwrap();

        // Restart of a running node kills it first.
        node.restart(STARTUP).await.unwrap();
        let third = node.pid().unwrap();
        assert_ne!(second, third);
        assert_eq!(process_state(second), None);

        let starts = std::fs::read_to_string(node.data_dir().join("starts")).unwrap();
        assert_eq!(
            starts.lines().collect::<Vec<_>>(),
            [first, second, third].map(|p| p.to_string())
        );
        let stdout = std::fs::read_to_string(node.stdout_log()).unwrap();
        assert!(stdout.contains("start #3 of node n1"), "{stdout}");
        assert_eq!(stdout.matches("listening on").count(), 3, "{stdout}");
    })
    .await
}

#[tokio::test]
async fn stop_is_idempotent_and_leaves_nothing() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut node = python_node(dir.path(), "n1");
        node.stop(); // never started: nothing to do
        node.start(STARTUP).await.unwrap();
        let pid = node.pid().unwrap();
        node.stop();
        node.stop();
        assert_eq!(process_state(pid), None);
        assert!(!process_group_alive(pid));
        for result in [node.pause(), node.resume()] {
            let err = result.unwrap_err();
            assert!(matches!(err, NodeError::NotRunning { .. }), "{err}");
        }
        drop(node);
        assert_eq!(process_state(pid), None);
    })
    .await
}

#[tokio::test]
async fn drop_stops_the_node() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut node = python_node(dir.path(), "n1");
        node.start(STARTUP).await.unwrap();
        let pid = node.pid().unwrap();
        node.pause().unwrap();
        drop(node);
        assert_eq!(process_state(pid), None);
    })
    .await
}

#[tokio::test]
async fn a_command_that_exits_fails_start_with_its_stderr() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let port = nemesis::free_port(LOCALHOST).unwrap();
        let line = format!("echo first line >&2; echo 'boom: cannot bind {port}' >&2; exit 3");
        let mut node = LocalNode::new(
            "n7",
            NodeCommand::Shell(line),
            LOCALHOST,
            port,
            dir.path().join("n7"),
        );
        let err = node.start(STARTUP).await.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, NodeError::ExitedBeforeHealthy { .. }),
            "{msg}"
        );
        assert!(
            msg.starts_with("node n7: exited with status 3 before answering GET"),
            "{msg}"
        );
        assert!(msg.contains(&format!("boom: cannot bind {port}")), "{msg}");
        assert!(msg.contains("first line | boom"), "{msg}");
        // The tail is this start's output only, not the marker line.
        assert!(!msg.contains("--- lockpick"), "{msg}");
        assert_eq!(node.pid(), None);

        // Again: the log accumulates, the error shows only the new start's lines.
        let err = node.start(STARTUP).await.unwrap_err().to_string();
        assert!(err.contains("first line | boom"), "{err}");
        let log = std::fs::read_to_string(node.stderr_log()).unwrap();
        assert_eq!(
            log.lines().filter(|l| l.starts_with("boom")).count(),
            2,
            "{log}"
        );
        assert!(log.contains("start #2 of node n7"), "{log}");
    })
    .await
}

/// A service that listens where it was told but answers the readiness check with 404 (no
/// `/v1/health`) is told so, not asked whether it listens elsewhere.
#[tokio::test]
async fn a_service_that_answers_without_health_is_told_what_to_serve() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let port = nemesis::free_port(LOCALHOST).unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        // Python's file server: every path it lacks, /v1/health too, answers 404.
        let line = format!(
            "exec python3 -m http.server {port} --bind 127.0.0.1 --directory {}",
            empty.display()
        );
        let node_dir = dir.path().join("n9");
        let mut node = LocalNode::new("n9", NodeCommand::Shell(line), LOCALHOST, port, node_dir);
        // Long enough for Python to be listening well before it, on a loaded machine too.
        let err = node.start(Duration::from_secs(5)).await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, NodeError::HealthTimeout { .. }), "{msg}");
        // Said from the answers, though the last probe, given the few ms left, timed out.
        assert!(msg.contains("(last answer: HTTP 404"), "{msg}");
        assert!(msg.contains("It listens where it was told"), "{msg}");
        assert!(msg.contains("GET /v1/health with 200"), "{msg}");
        assert!(!msg.contains("listen on the {host} and {port}"), "{msg}");
        assert_eq!(node.pid(), None);
    })
    .await
}

#[tokio::test]
async fn a_command_that_never_answers_times_out_and_is_killed() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let port = nemesis::free_port(LOCALHOST).unwrap();
        let node_dir = dir.path().join("n8");
        let pid_file = node_dir.join("data").join("pid");
        // A single command: exec keeps the shell's pid, which it writes first.
        let line = format!("sh -c 'echo $$ > {}; exec sleep 30'", pid_file.display());
        let mut node = LocalNode::new("n8", NodeCommand::Shell(line), LOCALHOST, port, node_dir);
        let err = node.start(Duration::from_millis(400)).await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, NodeError::HealthTimeout { .. }), "{msg}");
        assert!(
            msg.starts_with("node n8: not ready within 400 ms: GET http://"),
            "{msg}"
        );
        assert!(msg.contains("killed it."), "{msg}");
        // The likeliest cause, named: a service listening elsewhere than it was told.
        assert!(msg.contains("listen on the {host} and {port}"), "{msg}");
        assert_eq!(node.pid(), None);
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(process_state(pid), None);
    })
    .await
}

/// Nodes must outlive the thread (and runtime) that started them: PDEATHSIG is tied to the
/// forking thread, which is why every fork happens on the dedicated spawner thread.
#[tokio::test]
async fn node_survives_the_thread_that_started_it() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let node = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let mut node = python_node(&path, "n1");
            runtime.block_on(node.start(STARTUP)).unwrap();
            node
        })
        .join()
        .unwrap();
        let pid = node.pid().unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            matches!(process_state(pid), Some('S' | 'R')),
            "{:?}",
            process_state(pid)
        );
        node.check_health(Duration::from_secs(2)).await.unwrap();
    })
    .await
}

#[tokio::test]
async fn pause_of_a_dead_node_says_so() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let mut node = python_node(dir.path(), "n1");
        node.start(STARTUP).await.unwrap();
        let pid = node.pid().unwrap();
        // The test kills its own node's process behind LocalNode's back, as a crash would.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(wait_until(Duration::from_secs(2), || process_state(pid) == Some('Z')));
        let err = node.pause().unwrap_err().to_string();
        assert!(err.contains("node n1: cannot pause: process"), "{err}");
        assert!(err.contains("was killed by SIGKILL"), "{err}");
        // A crashed node can be started again without an explicit kill.
        node.start(STARTUP).await.unwrap();
        assert_ne!(node.pid(), Some(pid));
        assert_eq!(process_state(pid), None, "the crashed process was reaped");
    })
    .await
}

/// Node ports come from below the kernel's ephemeral range, where no outgoing connection can
/// take them between the pick and the node's bind; one call and successive calls in one
/// process never hand out the same port twice. A port is free when handed out; a process
/// outside lockpick (a service an earlier test started, still stopping) may bind it before
/// this test does, which no pick can prevent: a few such races among the 400 are allowed,
/// more mean the pick hands out taken ports.
#[test]
fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
    const TAKEN_BY_OTHERS_MAX: usize = 3;
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let ephemeral_low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut taken = Vec::new();
    for _ in 0..50 {
        let ports = nemesis::free_ports(LOCALHOST, 8).unwrap();
        assert_eq!(ports.len(), 8);
        for port in ports {
            assert!(
                port < ephemeral_low,
                "{port} is in the ephemeral range {range}"
            );
            assert!(seen.insert(port), "port {port} handed out twice");
            if let Err(e) = std::net::TcpListener::bind((LOCALHOST, port)) {
                taken.push(format!("{port}: {e}"));
            }
        }
    }
    assert!(
        taken.len() <= TAKEN_BY_OTHERS_MAX,
        "{} of 400 ports handed out were taken: {taken:?}",
        taken.len()
    );
    // A port someone holds is never handed out: hold a few hundred and ask again.
    let holders: Vec<_> = (20_000..20_300)
        .filter_map(|p| std::net::TcpListener::bind((LOCALHOST, p)).ok())
        .collect();
    let held: std::collections::HashSet<u16> = holders
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    for port in nemesis::free_ports(LOCALHOST, 200).unwrap() {
        assert!(!held.contains(&port), "{port} is held by this test");
    }
}

/// A port another lockpick process reserved is never handed out, even while nothing listens on
/// it (its node is down between a kill and a restart): the reservation is a lock on the port's
/// byte of one file in the temp dir, and a lock taken on a second open of that file conflicts
/// as another process's would.
#[test]
fn a_port_another_run_reserved_is_not_handed_out() {
    use nix::fcntl::{fcntl, FcntlArg};
    let path = std::env::temp_dir().join("lockpick-ports.lock");
    // Reserve 3000 ports of the range as another run would (those this process's own picks
    // already reserved are skipped: they are not handed out again anyway).
    let other = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .unwrap();
    let reserved: std::collections::HashSet<u16> = (20_000u16..23_000)
        .filter(|&port| {
            let lock = nix::libc::flock {
                l_type: nix::libc::F_WRLCK as i16,
                l_whence: nix::libc::SEEK_SET as i16,
                l_start: i64::from(port),
                l_len: 1,
                l_pid: 0,
            };
            fcntl(&other, FcntlArg::F_OFD_SETLK(&lock)).is_ok()
        })
        .collect();
    assert!(reserved.len() > 2_000, "only {} reserved", reserved.len());
    for port in nemesis::free_ports(LOCALHOST, 200).unwrap() {
        assert!(
            !reserved.contains(&port),
            "{port} is reserved by another run"
        );
    }
}
