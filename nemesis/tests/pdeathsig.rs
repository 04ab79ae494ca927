//! A harness killed with SIGKILL takes its nodes along, paused or not.
//!
//! The test re-runs this test binary as the "harness" (only `harness_helper`, selected by an
//! environment variable), which starts two nodes through LocalNode, pauses one, reports their
//! pids and sleeps. The test then SIGKILLs that helper and checks both nodes die.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

const HELPER_DIR_ENV: &str = "NEMESIS_TEST_PDEATHSIG_HELPER_DIR";
/// The helper never outlives this, even if the test that should kill it is gone.
const HELPER_LIFETIME: Duration = Duration::from_secs(30);

/// Not a test on its own: the body of the re-executed helper. Without the variable it does
/// nothing.
#[test]
fn harness_helper() {
    let Ok(dir) = std::env::var(HELPER_DIR_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (running, paused) = runtime.block_on(async {
        let mut running = python_node(dir, "running");
        let mut paused = python_node(dir, "paused");
        running.start(STARTUP).await.unwrap();
        paused.start(STARTUP).await.unwrap();
        paused.pause().unwrap();
        (running, paused)
    });
    let pids = format!("{} {}\n", running.pid().unwrap(), paused.pid().unwrap());
    std::fs::write(dir.join("pids.tmp"), pids).unwrap();
    std::fs::rename(dir.join("pids.tmp"), dir.join("pids")).unwrap();
    std::thread::sleep(HELPER_LIFETIME);
    // Only reached if nobody killed us: the nodes are stopped on drop.
}

/// Kills (and reaps) the helper, and any node it left, whatever the test's outcome.
struct Cleanup {
    helper: Child,
    dir: std::path::PathBuf,
    node_pids: Vec<u32>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = self.helper.kill();
        let _ = self.helper.wait();
        for &pid in &self.node_pids {
            // Only a process that is still one of ours: running our script from our dir, as
            // the leader of its own group.
            let ours = cmdline(pid).contains(&self.dir.display().to_string())
                && stat_field(pid, 5) == Some(pid.to_string());
            if ours && !gone(pid) {
                let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}

#[test]
fn nodes_die_when_the_harness_is_killed() {
    if std::env::var_os(HELPER_DIR_ENV).is_some() {
        return; // inside the helper
    }
    let dir = tempfile::tempdir().unwrap();
    let helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "harness_helper",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_DIR_ENV, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("helper.stderr")).unwrap())
        .spawn()
        .unwrap();
    let mut cleanup = Cleanup {
        helper,
        dir: dir.path().to_path_buf(),
        node_pids: Vec::new(),
    };

    let pids_file = dir.path().join("pids");
    let ready = wait_until(TEST_LIMIT, || {
        pids_file.exists() || matches!(cleanup.helper.try_wait(), Ok(Some(_)))
    });
    assert!(
        ready && pids_file.exists(),
        "helper did not report its nodes: {}",
        std::fs::read_to_string(dir.path().join("helper.stderr")).unwrap_or_default()
    );
    let pids: Vec<u32> = std::fs::read_to_string(&pids_file)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    cleanup.node_pids = pids.clone();
    let (running, paused) = (pids[0], pids[1]);
    assert!(matches!(nemesis::process_state(running), Some('S' | 'R')));
    assert!(wait_until(Duration::from_secs(2), || {
        nemesis::process_state(paused) == Some('T')
    }));

    cleanup.helper.kill().unwrap(); // SIGKILL: no destructor runs in the helper
    cleanup.helper.wait().unwrap();

    for pid in [running, paused] {
        assert!(
            wait_until(Duration::from_secs(2), || gone(pid)),
            "node {pid} outlived its SIGKILLed harness (state {:?})",
            nemesis::process_state(pid)
        );
    }
}
