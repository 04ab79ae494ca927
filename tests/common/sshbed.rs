//! The ssh test bed: "hosts" made of network namespaces (the namespace runtime's own
//! [`NetnsCluster`]: a hub with a bridge, one namespace per host at 10.213.0.(11+i)), each
//! running its own `sshd -D` with a generated host key, listening on the host's address and
//! letting in one generated test key. A generated client config (the known host keys written
//! in, the test key, `BatchMode`) makes lockpick use the system `ssh` as it would anywhere.
//! lockpick itself runs inside the hub namespace, where it reaches every host's address
//! directly; nothing is added to the host's own network namespace, and the host's sshd
//! configuration, `~/.ssh` and firewall are never read or touched.
//!
//! Everything is removed on drop, also when a test fails: every process left in the bed's
//! namespaces (sshd and its sessions, services the harness started, ssh masters in the hub),
//! then the namespaces, then the temporary directory.

use crate::common::Run;

/// The ssh runtime's id of the run in `run_dir`, from its log.
pub fn run_id_of(run_dir: &Path) -> String {
    let log = std::fs::read_to_string(run_dir.join("lockpick.log")).unwrap();
    let at = log.find("run_id=").expect("the log names the ssh run id") + "run_id=".len();
    log[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_matches('"')
        .to_string()
}
use nemesis::netns::NetnsCluster;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's openssh-server puts the daemon.
pub const SSHD: &str = "/usr/sbin/sshd";

/// Root, the namespace tools and sshd, or a visible skip (a failure under
/// LOCKPICK_SYSTEM_TESTS=1).
pub fn require_sshbed() -> bool {
    let mut missing: Vec<String> = nemesis::netns::capabilities()
        .into_iter()
        .filter(|c| !c.ok && ["root", "ip", "netns", "iptables"].contains(&c.name))
        .map(|c| format!("{}: {}", c.name, c.why))
        .collect();
    if !Path::new(SSHD).exists() {
        missing.push(format!("{SSHD} not found (apt-get install openssh-server)"));
    }
    for tool in ["ssh", "ssh-keygen"] {
        if Command::new(tool).arg("-V").output().is_err() {
            missing.push(format!("{tool} not found (apt-get install openssh-client)"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
        panic!("ssh tests must run under LOCKPICK_SYSTEM_TESTS=1: {missing:?}");
    }
    eprintln!("SKIPPED: {}", missing.join("; "));
    false
}

pub struct SshBed {
    /// Declared first: dropped (its files removed) last.
    cluster: Option<NetnsCluster>,
    sshds: Vec<Child>,
    pub dir: tempfile::TempDir,
    hosts: usize,
}

fn run_ok(argv: &[&str]) -> String {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl SshBed {
    /// `hosts` hosts, each with sshd answering on port 22 (waited for, up to 10 s).
    pub fn start(hosts: usize) -> SshBed {
        sweep_dead_beds();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let cluster = NetnsCluster::create("sshbed", hosts, &d.join("bed-state.json"))
            .expect("the bed's namespaces");
        let mut bed = SshBed {
            cluster: Some(cluster),
            sshds: Vec::new(),
            dir,
            hosts,
        };
        let d = bed.dir.path().to_path_buf();
        let key = |name: &str| {
            run_ok(&[
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "lockpick-test",
                "-f",
                d.join(name).to_str().unwrap(),
            ]);
        };
        key("host_key");
        key("id_test");
        std::fs::copy(d.join("id_test.pub"), d.join("authorized_keys")).unwrap();
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        let host_pub = host_pub
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        // sshd's privilege separation directory; Debian's package makes it at boot. Created
        // if missing, never removed (it is empty and belongs to the system's layout).
        std::fs::create_dir_all("/run/sshd").unwrap();
        let mut known = String::new();
        for i in 0..hosts {
            let ip = bed.ip(i);
            let config = d.join(format!("sshd_{i}.conf"));
            std::fs::write(
                &config,
                format!(
                    "ListenAddress {ip}:22\n\
                     HostKey {hk}\n\
                     AuthorizedKeysFile {ak}\n\
                     PidFile {pid}\n\
                     PermitRootLogin prohibit-password\n\
                     PasswordAuthentication no\n\
                     KbdInteractiveAuthentication no\n\
                     UsePAM no\n\
                     StrictModes no\n\
                     MaxSessions 64\n\
                     MaxStartups 64\n\
                     LogLevel ERROR\n",
                    hk = d.join("host_key").display(),
                    ak = d.join("authorized_keys").display(),
                    pid = d.join(format!("sshd_{i}.pid")).display(),
                ),
            )
            .unwrap();
            let child = bed.spawn_sshd(i);
            bed.sshds.push(child);
            known.push_str(&format!("{ip} {host_pub}\n"));
        }
        std::fs::write(d.join("known_hosts"), known).unwrap();
        std::fs::write(
            d.join("ssh_config"),
            format!(
                "Host *\n  \
                   IdentityFile {id}\n  \
                   IdentitiesOnly yes\n  \
                   UserKnownHostsFile {kh}\n  \
                   GlobalKnownHostsFile /dev/null\n  \
                   StrictHostKeyChecking yes\n  \
                   BatchMode yes\n",
                id = d.join("id_test").display(),
                kh = d.join("known_hosts").display(),
            ),
        )
        .unwrap();
        for i in 0..hosts {
            bed.wait_sshd(i);
        }
        bed
    }

    /// Host `i`'s sshd, in its namespace, with the config `start` wrote.
    fn spawn_sshd(&self, i: usize) -> Child {
        let d = self.dir.path();
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(d.join(format!("sshd_{i}.log")))
            .unwrap();
        let ns = self.cluster().node_ns(i).to_string();
        Command::new("ip")
            .args(["netns", "exec", &ns, SSHD, "-D", "-e", "-f"])
            .arg(d.join(format!("sshd_{i}.conf")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start sshd")
    }

    /// Waits (up to 10 s) until host `i`'s sshd accepts connections.
    fn wait_sshd(&self, i: usize) {
        let addr = SocketAddrV4::new(self.cluster().node_ip(i), 22);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !nemesis::netns::probe_tcp(&self.hub(), addr, Duration::from_millis(200)).unwrap() {
            assert!(Instant::now() < deadline, "sshd on {addr} did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Host `i` answers ssh again (after [`SshBed::stop_sshd`]).
    #[allow(dead_code)]
    pub fn restart_sshd(&mut self, i: usize) {
        let child = self.spawn_sshd(i);
        self.sshds[i] = child;
        self.wait_sshd(i);
    }

    fn cluster(&self) -> &NetnsCluster {
        self.cluster.as_ref().expect("the bed is up")
    }

    pub fn ip(&self, i: usize) -> String {
        self.cluster().node_ip(i).to_string()
    }

    /// How many hosts the bed has.
    pub fn hosts(&self) -> usize {
        self.hosts
    }

    /// The hub namespace, where lockpick runs.
    pub fn hub(&self) -> String {
        self.cluster().hub_ns_name()
    }

    /// A lockpick.toml listing the hosts (`[[nodes]]`) and the bed's ssh config, plus `extra`
    /// (more sections).
    pub fn write_config(&self, extra: &str) -> PathBuf {
        let mut text = String::from("[ssh]\nconfig = \"ssh_config\"\n\n");
        for i in 0..self.hosts {
            text.push_str(&format!(
                "[[nodes]]\naddress = \"{}\"\nuser = \"root\"\nport = 22\n\n",
                self.ip(i)
            ));
        }
        text.push_str(extra);
        let path = self.dir.path().join("lockpick.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `lockpick ARGS` inside the hub namespace, bounded by `limit`.
    pub fn lockpick(&self, args: &[&str], limit: Duration) -> std::process::Output {
        let hub = self.hub();
        let mut argv = vec!["ip", "netns", "exec", &hub, crate::common::BIN];
        argv.extend_from_slice(args);
        crate::common::run_argv_with_limit(&argv, limit)
    }

    /// `lockpick run --config <bed config> --out OUT ARGS` inside the hub.
    pub fn run(&self, out: &Path, args: &[&str], limit: Duration) -> Run {
        let config = self.write_config("");
        let mut all = vec![
            "run",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        let o = self.lockpick(&all, limit);
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            out_dir: out.to_path_buf(),
        }
    }

    /// `script` on host `i` over ssh, as the harness would (from the hub, the bed's config).
    pub fn ssh(&self, i: usize, script: &str) -> String {
        let hub = self.hub();
        let config = self.dir.path().join("ssh_config");
        let ip = self.ip(i);
        run_ok(&[
            "ip",
            "netns",
            "exec",
            &hub,
            "ssh",
            "-F",
            config.to_str().unwrap(),
            "-o",
            "ConnectTimeout=5",
            &format!("root@{ip}"),
            script,
        ])
    }

    /// What run `run_id` may have left on host `i`: its processes (by the tag in their
    /// environment, or working in the node's directory: Redis and PostgreSQL write their
    /// titles over the environment; the bed's hosts share one pid space, so by the host's own
    /// node), its iptables chain and the jumps to it, its node's directory (they share /tmp
    /// too), any netem qdisc. Empty when clean.
    pub fn leftovers(&self, i: usize, run_id: &str) -> Vec<String> {
        let out = self.ssh(
            i,
            &format!(
                "for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $e 2>/dev/null | grep -qx 'LOCKPICK_RUN={run_id}/n{n}' && echo \"process $e\"; done; \
                 find /proc/[0-9]* -maxdepth 1 -name cwd \\( -lname /tmp/lockpick-{run_id}/n{n} -o -lname '/tmp/lockpick-{run_id}/n{n}/*' -o -lname '/tmp/lockpick-{run_id}/n{n} (deleted)' \\) 2>/dev/null | sed 's/^/process in the node directory: /'; \
                 iptables -w 5 -S | grep 'LP-{run_id}' | sed 's/^/iptables /'; \
                 tc qdisc show | grep netem | sed 's/^/qdisc /'; \
                 ls -d /tmp/lockpick-{run_id}/n{n} 2>/dev/null | sed 's/^/dir /'; true",
                n = i + 1
            ),
        );
        out.lines().map(str::to_string).collect()
    }

    /// Host `i` stops answering ssh: its sshd and every session of it (the run's master
    /// connection included) are killed, by pid, inside the host's own namespace.
    #[allow(dead_code)]
    pub fn stop_sshd(&mut self, i: usize) {
        let child = &mut self.sshds[i];
        let _ = child.kill();
        let _ = child.wait();
        let ns = self.cluster().node_ns(i).to_string();
        let out = run_ok(&["ip", "netns", "pids", &ns]);
        for pid in out.split_whitespace() {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "sshd" {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid.parse().unwrap()),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Removes the namespaces of beds whose test process is gone (`lp-sshbed-<pid>-...`, the pid
/// no longer running): a test killed before its `Drop` ran (a timeout, a session's end)
/// leaves its bed behind, and the next bed clears it. Only beds, only of dead processes: a
/// bed in use belongs to a live test.
fn sweep_dead_beds() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    // Bounded by the namespaces listed.
    for ns in listed.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = ns
            .strip_prefix("lp-sshbed-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        kill_all_in(ns);
        let _ = Command::new("ip").args(["netns", "delete", ns]).status();
        eprintln!("ssh bed: removed {ns}, left by a test process that is gone (pid {pid})");
    }
}

/// SIGKILL to every process in namespace `ns`: all of a bed's are its test's own.
fn kill_all_in(ns: &str) {
    if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

impl Drop for SshBed {
    fn drop(&mut self) {
        for child in &mut self.sshds {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(cluster) = self.cluster.take() {
            // Everything still running inside the bed's own namespaces was started by this
            // test (sshd's sessions, the services, ssh masters in the hub).
            let mut spaces: Vec<String> = (0..self.hosts)
                .map(|i| cluster.node_ns(i).to_string())
                .collect();
            spaces.push(cluster.hub_ns_name());
            for ns in &spaces {
                kill_all_in(ns);
            }
            std::thread::sleep(Duration::from_millis(100));
            drop(cluster);
        }
        // Runs' directories on the "hosts" live in the shared /tmp: removed by the runs
        // themselves; the tests check that they did.
    }
}
