//! Nodes run as local child processes, and the process faults on them: [`LocalNode`] (node
//! control) and [`Local`], the runtime that puts every node on loopback.

use crate::ready::Readiness;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::node::{BoxFuture, NodeControl, NodeLogs, Shutdown};
use crate::runtime::{NetworkFaults, NodeSpec, Runtime, RuntimeKind, RuntimeSpec};
use crate::{spawner, Error, NodeCommand, NodeError};

/// The endpoint every node answers with 200 once it serves.
pub const HEALTH_PATH: &str = "/v1/health";

const HEALTH_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// One health request never waits longer than this, so a node that accepts connections but
/// hangs is re-probed (and its exit noticed) at least once a second.
const HEALTH_PROBE_TIMEOUT_MAX: Duration = Duration::from_secs(1);
const STOP_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How long reaping may take after the process is known to be dead or SIGKILLed.
const REAP_LIMIT: Duration = Duration::from_secs(2);
const REAP_POLL_INTERVAL: Duration = Duration::from_millis(2);
const STDERR_TAIL_LINES: usize = 5;
const STDERR_TAIL_BYTES: u64 = 4096;

/// The lowest port handed to a node: below it are the well-known and registered ports of
/// services people run on their own machines.
const PORT_FLOOR: u16 = 20_000;
/// Where the kernel's ephemeral range starts when /proc does not say (Linux's default).
const EPHEMERAL_LOW_DEFAULT: u16 = 32_768;
/// How many candidate ports one pick may try before it gives up.
const PORT_TRIES_MAX: usize = 500;
/// How many of the ports this process handed out are remembered and not handed out again: a
/// node that is down (killed, not yet restarted, or not yet started) does not hold its port.
const PORTS_RECENT_MAX: usize = 1024;

/// The file whose byte N another lockpick process locks while it holds port N: the name every
/// process on the machine agrees on.
const PORT_LOCKS_FILE: &str = "lockpick-ports.lock";

/// The ports this process handed out last, oldest first.
static PORTS_RECENT: std::sync::Mutex<std::collections::VecDeque<u16>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

/// Picks a port that is free on `host` right now; [`free_ports`] with one.
pub fn free_port(host: IpAddr) -> Result<u16, NodeError> {
    Ok(free_ports(host, 1)?[0])
}

/// Picks `n` distinct ports that are free on `host` right now.
///
/// They come from below the kernel's ephemeral range (`ip_local_port_range`), at random.
/// Why not port 0: the kernel hands out port-0 binds from the same range it takes the source
/// ports of outgoing connections from, so on a busy machine any process's next connection
/// could take a node's port between this pick and the node's bind, or while a killed node is
/// down before its restart (seen in CI as "cannot bind: Address already in use"). Below the
/// range a port is only ever taken by an explicit bind. Each candidate is bound to prove it
/// free, and all are held until the last is picked, so one call never returns a port twice;
/// the last [`PORTS_RECENT_MAX`] ports handed out are skipped, so neither do two calls.
/// Across processes, each port handed out is reserved for this process's life (a lock on its
/// byte of a file in the temp dir, see [`reserve_port`]): two runs started at once, or one
/// whose node is down between a kill and its restart, never give another run's port to theirs.
pub fn free_ports(host: IpAddr, n: usize) -> Result<Vec<u16>, NodeError> {
    let high = ephemeral_low().saturating_sub(1);
    if high < PORT_FLOOR.saturating_add(u16::try_from(n).unwrap_or(u16::MAX)) {
        // A machine whose ephemeral range reaches down to the floor: only the kernel knows
        // what is free there.
        return (0..n).map(|_| kernel_port(host)).collect();
    }
    let span = u32::from(high - PORT_FLOOR) + 1;
    // A poisoned lock still holds a usable list: the worst a panic mid-update leaves is a
    // port remembered twice.
    let mut recent = PORTS_RECENT.lock().unwrap_or_else(|e| e.into_inner());
    let mut held = Vec::with_capacity(n);
    let mut last_error = None;
    for _ in 0..PORT_TRIES_MAX {
        if held.len() == n {
            break;
        }
        let port = PORT_FLOOR + (rand::random::<u32>() % span) as u16;
        if recent.contains(&port) {
            continue;
        }
        match TcpListener::bind(SocketAddr::new(host, port)) {
            Ok(listener) if reserve_port(port) => held.push(listener),
            Ok(_) => {}
            Err(e) => last_error = Some(e),
        }
    }
    if held.len() < n {
        let source = last_error.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrInUse));
        return Err(NodeError::FreePort { host, source });
    }
    let ports = held
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<u16>, io::Error>>()
        .map_err(|source| NodeError::FreePort { host, source })?;
    for &port in &ports {
        if recent.len() == PORTS_RECENT_MAX {
            recent.pop_front();
        }
        recent.push_back(port);
    }
    Ok(ports)
}

/// Reserves `port` for this process's life among lockpick processes; false when another holds
/// it. The reservation is an open-file-description lock on byte `port` of one shared file, so
/// the kernel drops it when the process ends, however it ends, and nothing is left to clean
/// up. Where that file cannot be opened (a read-only temp dir) every port counts as free:
/// the bind check and this process's own recent list still hold.
fn reserve_port(port: u16) -> bool {
    use nix::fcntl::{fcntl, FcntlArg};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::OnceLock;
    static LOCKS: OnceLock<Option<File>> = OnceLock::new();
    let file = LOCKS.get_or_init(|| {
        let path = std::env::temp_dir().join(PORT_LOCKS_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .ok()?;
        // Any user's run takes part: a write lock needs the file open for writing. Only its
        // creator may change the mode, and a failure leaves the others to the bind check.
        let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o666));
        Some(file)
    });
    let Some(file) = file else {
        return true;
    };
    let lock = nix::libc::flock {
        l_type: nix::libc::F_WRLCK as i16,
        l_whence: nix::libc::SEEK_SET as i16,
        l_start: i64::from(port),
        l_len: 1,
        l_pid: 0,
    };
    match fcntl(file, FcntlArg::F_OFD_SETLK(&lock)) {
        Ok(_) => true,
        Err(Errno::EAGAIN | Errno::EACCES) => false,
        // Locks not supported where the temp dir is: as if the file could not be opened.
        Err(_) => true,
    }
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_low() -> u16 {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(EPHEMERAL_LOW_DEFAULT)
}

/// A port the kernel chose (a port-0 bind), released at once.
fn kernel_port(host: IpAddr) -> Result<u16, NodeError> {
    TcpListener::bind(SocketAddr::new(host, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| NodeError::FreePort { host, source })
}

/// One node run as a local child process.
///
/// The process is the leader of its own process group (pgid = [`LocalNode::pid`]), forked
/// with `PR_SET_PDEATHSIG = SIGKILL`. `node_dir` holds `stdout.log` and `stderr.log`
/// (appended across restarts, with a marker line per start) and `data/`, the data dir.
///
/// Signalling the group is safe only while its leader is not reaped: until then its pid
/// (= the pgid) cannot be handed to an unrelated process. So the pid is kept until this node
/// reaps it itself, and exits are detected with `waitid(WNOWAIT)`, which does not reap.
///
/// `kill` and `stop` block the calling thread while they wait for the process (bounded: a
/// few ms after SIGKILL, up to its [`Shutdown`]'s grace (2 s by default) for its stop signal).
/// Dropping the node stops it.
#[derive(Debug)]
pub struct LocalNode {
    id: String,
    command: NodeCommand,
    host: IpAddr,
    port: u16,
    node_dir: PathBuf,
    /// The group leader, from spawn until we reap it.
    pid: Option<Pid>,
    paused: AtomicBool,
    starts: u32,
    /// Extra environment for every start (e.g. libfaketime's preload and control file).
    env: Vec<(String, String)>,
    /// When the current process was spawned.
    spawned_at: Option<std::time::Instant>,
    /// How the node shows it serves.
    readiness: Readiness,
    /// How `stop` asks it to exit.
    shutdown: Shutdown,
    /// The clock control page every process of this node is patched to read (vDSO clocks).
    clock_page: Option<std::sync::Arc<vclock::ControlPage>>,
}

impl LocalNode {
    /// A node that is not started yet. Nothing is created on disk until [`LocalNode::start`].
    pub fn new(
        id: &str,
        command: NodeCommand,
        host: IpAddr,
        port: u16,
        node_dir: PathBuf,
    ) -> LocalNode {
        LocalNode {
            id: id.to_string(),
            command,
            host,
            port,
            node_dir,
            pid: None,
            paused: AtomicBool::new(false),
            starts: 0,
            env: Vec::new(),
            spawned_at: None,
            readiness: Readiness::http(HEALTH_PATH),
            shutdown: Shutdown::TERM,
            clock_page: None,
        }
    }

    /// Patches every start's processes to read their clocks through `page`: the spawned
    /// process at once (before it can serve), and after it answers healthy every process of
    /// its group (a shell's child, or the program `ip netns exec` became).
    pub fn with_clock_page(mut self, page: Option<std::sync::Arc<vclock::ControlPage>>) -> Self {
        self.clock_page = page;
        self
    }

    /// Waits for `readiness` instead of the reference protocol's `GET /v1/health` (etcd
    /// answers on `/health`, Redis to `PING`).
    pub fn with_readiness(mut self, readiness: Readiness) -> LocalNode {
        self.readiness = readiness;
        self
    }

    /// Stops it with `shutdown` instead of SIGTERM and 2 s.
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> LocalNode {
        self.shutdown = shutdown;
        self
    }

    /// Adds environment variables to every start of this node.
    pub fn with_env(mut self, vars: impl IntoIterator<Item = (String, String)>) -> LocalNode {
        self.env.extend(vars);
        self
    }

    /// When the running process was spawned (`None` before the first start).
    pub fn spawned_at(&self) -> Option<std::time::Instant> {
        self.spawned_at
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn command(&self) -> &NodeCommand {
        &self.command
    }

    pub fn host(&self) -> IpAddr {
        self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://host:port` (IPv6 hosts in brackets).
    pub fn base_url(&self) -> String {
        format!("http://{}", SocketAddr::new(self.host, self.port))
    }

    /// The readiness check in words: `GET http://host:port/v1/health`, `PING on host:port`.
    pub fn readiness_check(&self) -> String {
        self.readiness.described(&self.host.to_string(), self.port)
    }

    pub fn node_dir(&self) -> &Path {
        &self.node_dir
    }

    /// `node_dir/data`: the `{data_dir}` to give the command template; kept across restarts.
    pub fn data_dir(&self) -> PathBuf {
        self.node_dir.join("data")
    }

    pub fn stdout_log(&self) -> PathBuf {
        self.node_dir.join("stdout.log")
    }

    pub fn stderr_log(&self) -> PathBuf {
        self.node_dir.join("stderr.log")
    }

    /// The pid of the process we started, which is also its process group id; `Some` from
    /// start until the node is killed, stopped or found dead (possibly a zombie until then).
    pub fn pid(&self) -> Option<u32> {
        self.pid.map(|p| p.as_raw() as u32)
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Spawns the node, then polls `GET /v1/health` every 20 ms until it answers 200.
    ///
    /// Fails if the node is already running; if the process exits first (with its exit
    /// status and the last lines of this start's stderr); or, after killing it, if no 200
    /// came within `startup_timeout`.
    pub async fn start(&mut self, startup_timeout: Duration) -> Result<(), NodeError> {
        self.reap_if_exited()?;
        if let Some(pid) = self.pid {
            return Err(NodeError::AlreadyRunning {
                node: self.id.clone(),
                action: "start",
                pid: pid.as_raw(),
            });
        }
        let data_dir = self.data_dir();
        fs::create_dir_all(&data_dir).map_err(|source| NodeError::Io {
            node: self.id.clone(),
            what: "cannot create data dir",
            path: data_dir.clone(),
            source,
        })?;
        self.starts += 1;
        let marker = format!(
            "--- lockpick: start #{} of node {} at unix_ms {}: {} ---\n",
            self.starts,
            self.id,
            unix_ms(),
            self.command.display()
        );
        let stdout = self.open_log(self.stdout_log(), &marker)?;
        let stderr = self.open_log(self.stderr_log(), &marker)?;
        let stderr_offset = stderr.metadata().map(|m| m.len()).unwrap_or(0);

        let command = self.spawn_command(stdout, stderr)?;
        let pid = spawner::spawn(command)
            .await
            .map_err(|source| NodeError::Spawn {
                node: self.id.clone(),
                command: self.command.display(),
                source,
            })?;
        self.pid = Some(pid);
        self.spawned_at = Some(std::time::Instant::now());
        self.paused.store(false, Ordering::SeqCst);
        tracing::info!(node = %self.id, pid = pid.as_raw(), start = self.starts, "node spawned");
        if let Err(e) = self.patch_clock(pid, false) {
            // It may have exited on its own: then its exit is the better reason.
            if let Some(status) = self.reap_if_exited()? {
                let check = self.readiness_check();
                return Err(self.exited_before_healthy(status, check, stderr_offset));
            }
            self.kill_after_failed_start();
            return Err(e);
        }
        self.wait_healthy(startup_timeout, stderr_offset).await?;
        if let Err(e) = self.patch_clock(pid, true) {
            self.kill_after_failed_start();
            return Err(e);
        }
        Ok(())
    }

    /// The node's command (its argv, or its line run by `sh -c`) with its environment, no
    /// stdin, and its output appended to this start's logs.
    fn spawn_command(&self, stdout: fs::File, stderr: fs::File) -> Result<Command, NodeError> {
        let mut command = match &self.command {
            NodeCommand::Argv(argv) => {
                let (program, args) = argv.split_first().ok_or(NodeError::EmptyCommand {
                    node: self.id.clone(),
                })?;
                let mut command = Command::new(program);
                command.args(args);
                command
            }
            NodeCommand::Shell(line) => {
                let mut command = Command::new("sh");
                command.arg("-c").arg(NodeCommand::shell_line(line));
                command
            }
        };
        command
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        Ok(command)
    }

    /// Patches the node's process (or, with `group`, every process of its group not patched
    /// yet) to follow its clock page, if it has one. Holds the processes for milliseconds and
    /// never while the node is paused: pause, resume and this all need the node itself.
    fn patch_clock(&self, pid: Pid, group: bool) -> Result<(), NodeError> {
        let Some(page) = &self.clock_page else {
            return Ok(());
        };
        // The patched process opens the control file itself (read and write): a node that
        // dropped root (postgres runs as its own user) must own it. Best effort: a process of
        // our own user, or a harness without root, needs nothing.
        if let Ok(meta) = std::fs::metadata(format!("/proc/{}", pid.as_raw())) {
            use std::os::unix::fs::MetadataExt;
            if meta.uid() != nix::unistd::geteuid().as_raw() {
                let _ = std::os::unix::fs::chown(page.path(), Some(meta.uid()), Some(meta.gid()));
            }
        }
        let patched = if group {
            vclock::patch_group(pid.as_raw(), page)
        } else {
            vclock::patch(pid.as_raw(), page)
                .map(|p| usize::from(matches!(p, vclock::Patched::Now(_))))
        };
        match patched {
            Ok(n) => {
                tracing::info!(node = %self.id, pid = pid.as_raw(), patched = n, "clock patched");
                Ok(())
            }
            Err(source) => Err(NodeError::Clock {
                node: self.id.clone(),
                source,
            }),
        }
    }

    /// Kills the node if it is still running, then [`LocalNode::start`]s it again with the
    /// same command and data dir.
    pub async fn restart(&mut self, startup_timeout: Duration) -> Result<(), NodeError> {
        if self.pid.is_some() {
            self.kill()?;
        }
        self.start(startup_timeout).await
    }

    /// One readiness check bounded by `timeout` (`GET /v1/health` answering 200 by default).
    pub async fn check_health(&self, timeout: Duration) -> Result<(), NodeError> {
        self.readiness
            .check(&self.host.to_string(), self.port, timeout)
            .await
            .map_err(|why| NodeError::Unhealthy {
                node: self.id.clone(),
                check: self.readiness_check(),
                reason: why.reason,
            })
    }

    /// SIGSTOP to the node's process group.
    pub fn pause(&self) -> Result<(), NodeError> {
        let pid = self.live_pid("pause")?;
        self.signal_group(pid, Signal::SIGSTOP)?;
        self.paused.store(true, Ordering::SeqCst);
        tracing::info!(node = %self.id, pid = pid.as_raw(), "node paused");
        Ok(())
    }

    /// SIGCONT to the node's process group.
    pub fn resume(&self) -> Result<(), NodeError> {
        let pid = self.live_pid("resume")?;
        self.signal_group(pid, Signal::SIGCONT)?;
        self.paused.store(false, Ordering::SeqCst);
        tracing::info!(node = %self.id, pid = pid.as_raw(), "node resumed");
        Ok(())
    }

    /// SIGKILL to the node's process group (works on a paused node too), then reaps the
    /// leader so no zombie is left. A node that already died on its own is just reaped.
    pub fn kill(&mut self) -> Result<(), NodeError> {
        let Some(pid) = self.pid else {
            return Err(NodeError::NotRunning {
                node: self.id.clone(),
                action: "kill",
            });
        };
        self.signal_group(pid, Signal::SIGKILL)?;
        self.reap(pid, "SIGKILL")?;
        tracing::info!(node = %self.id, pid = pid.as_raw(), "node killed");
        Ok(())
    }

    /// Stops the node if it runs; idempotent. SIGCONT first (a stopped process cannot handle
    /// a signal), then its shutdown signal (SIGTERM unless [`LocalNode::with_shutdown`] said
    /// otherwise) to the group, up to its grace for the leader to exit, then SIGKILL to
    /// whatever is left of the group, and reap. Errors are logged, not returned: this is the
    /// cleanup path, also run on drop.
    pub fn stop(&mut self) {
        let Some(pid) = self.pid else {
            return;
        };
        // The leader is unreaped here, so the group is ours; ESRCH just means it is empty.
        let _ = killpg(pid, Signal::SIGCONT);
        let _ = killpg(pid, self.shutdown.signal.signal());
        self.paused.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + self.shutdown.grace();
        // Bounded by the shutdown's grace.
        while Instant::now() < deadline {
            match peek_exit(pid) {
                Ok(None) => std::thread::sleep(STOP_POLL_INTERVAL),
                _ => break,
            }
        }
        // Also ends group members that outlived the leader or ignored the signal.
        let _ = killpg(pid, Signal::SIGKILL);
        match self.reap(pid, "SIGKILL") {
            Ok(()) => tracing::info!(node = %self.id, pid = pid.as_raw(), "node stopped"),
            Err(e) => tracing::warn!("{e}"),
        }
    }

    fn open_log(&self, path: PathBuf, marker: &str) -> Result<File, NodeError> {
        let io_err = |what: &'static str, path: &Path| {
            let node = self.id.clone();
            let path = path.to_path_buf();
            move |source| NodeError::Io {
                node,
                what,
                path,
                source,
            }
        };
        fs::create_dir_all(&self.node_dir)
            .map_err(io_err("cannot create node dir", &self.node_dir))?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err("cannot open log", &path))?;
        file.write_all(marker.as_bytes())
            .map_err(io_err("cannot write log", &path))?;
        Ok(file)
    }

    async fn wait_healthy(
        &mut self,
        startup_timeout: Duration,
        stderr_offset: u64,
    ) -> Result<(), NodeError> {
        let check = self.readiness_check();
        let host = self.host.to_string();
        let deadline = Instant::now() + startup_timeout;
        // Each attempt sleeps a poll interval, so the deadline ends the loop first; the
        // attempt limit is the backstop.
        let max_attempts = startup_timeout.as_millis() / HEALTH_POLL_INTERVAL.as_millis() + 2;
        let mut last_error = None;
        for _ in 0..max_attempts {
            if let Some(status) = self.reap_if_exited()? {
                return Err(self.exited_before_healthy(status, check, stderr_offset));
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let probe_timeout = (deadline - now).min(HEALTH_PROBE_TIMEOUT_MAX);
            match self.readiness.check(&host, self.port, probe_timeout).await {
                Ok(()) => {
                    tracing::info!(node = %self.id, "node healthy");
                    return Ok(());
                }
                Err(why) => last_error = Some(why.after(last_error.take())),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(HEALTH_POLL_INTERVAL.min(left)).await;
        }
        // It may have died during the last probe: then its exit status is the better reason.
        if let Some(status) = self.reap_if_exited()? {
            return Err(self.exited_before_healthy(status, check, stderr_offset));
        }
        self.kill_after_failed_start();
        Err(NodeError::HealthTimeout {
            node: self.id.clone(),
            check,
            timeout_ms: startup_timeout.as_millis(),
            hint: crate::ready::not_ready_hint(last_error.as_ref()),
            last_error: crate::ready::last_said(last_error.as_ref()),
        })
    }

    fn exited_before_healthy(&self, status: String, check: String, offset: u64) -> NodeError {
        let log = self.stderr_log();
        NodeError::ExitedBeforeHealthy {
            node: self.id.clone(),
            status,
            check,
            stderr_tail: stderr_tail(&log, offset),
            log,
        }
    }

    fn kill_after_failed_start(&mut self) {
        if let Err(e) = self.kill() {
            tracing::warn!("{e}");
        }
    }

    /// The pid, if the process is there and has not exited (it may be a zombie we have not
    /// reaped: then the action is refused with its exit status).
    fn live_pid(&self, action: &'static str) -> Result<Pid, NodeError> {
        let Some(pid) = self.pid else {
            return Err(NodeError::NotRunning {
                node: self.id.clone(),
                action,
            });
        };
        match peek_exit(pid) {
            Ok(None) => Ok(pid),
            Ok(Some(status)) => Err(NodeError::Exited {
                node: self.id.clone(),
                action,
                pid: pid.as_raw(),
                status,
            }),
            Err(source) => Err(NodeError::Wait {
                node: self.id.clone(),
                pid: pid.as_raw(),
                source,
            }),
        }
    }

    /// `signal` to the group, and to the leader's descendants that left it (PostgreSQL's
    /// backends each lead a session of their own): a paused or killed node is all of it.
    fn signal_group(&self, pid: Pid, signal: Signal) -> Result<(), NodeError> {
        // Before the signal (a killed leader's children are re-parented, no longer found) and
        // after it (a stopped leader forks no more: a backend it forked while the signal was on
        // its way, and that left the group, is found now).
        let mut strays = crate::process::strays_of(pid.as_raw());
        killpg(pid, signal).map_err(|source| NodeError::Signal {
            node: self.id.clone(),
            signal: signal.as_str(),
            pgid: pid.as_raw(),
            source,
        })?;
        strays.extend(crate::process::strays_of(pid.as_raw()));
        strays.sort_unstable();
        strays.dedup();
        for stray in strays {
            // One that ended meanwhile is simply gone.
            let _ = nix::sys::signal::kill(Pid::from_raw(stray), signal);
        }
        Ok(())
    }

    /// If the leader has exited, ends what is left of its group, reaps it and returns how it
    /// ended.
    fn reap_if_exited(&mut self) -> Result<Option<String>, NodeError> {
        let Some(pid) = self.pid else {
            return Ok(None);
        };
        match peek_exit(pid) {
            Ok(None) => Ok(None),
            Ok(Some(status)) => {
                // Safe: the unreaped leader still holds the group id.
                let _ = killpg(pid, Signal::SIGKILL);
                self.reap(pid, "its exit")?;
                tracing::info!(node = %self.id, pid = pid.as_raw(), %status, "node exited");
                Ok(Some(status))
            }
            Err(source) => Err(NodeError::Wait {
                node: self.id.clone(),
                pid: pid.as_raw(),
                source,
            }),
        }
    }

    /// Waits (bounded by REAP_LIMIT) for the dead or dying leader and reaps it.
    fn reap(&mut self, pid: Pid, after: &'static str) -> Result<(), NodeError> {
        let deadline = Instant::now() + REAP_LIMIT;
        loop {
            match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {}
                // ECHILD: someone else reaped it; either way it is gone.
                Ok(_) | Err(Errno::ECHILD) => {
                    self.pid = None;
                    self.paused.store(false, Ordering::SeqCst);
                    return Ok(());
                }
                Err(Errno::EINTR) => {}
                Err(source) => {
                    return Err(NodeError::Wait {
                        node: self.id.clone(),
                        pid: pid.as_raw(),
                        source,
                    })
                }
            }
            if Instant::now() >= deadline {
                return Err(NodeError::ReapTimeout {
                    node: self.id.clone(),
                    pid: pid.as_raw(),
                    signal: after,
                    waited_ms: REAP_LIMIT.as_millis(),
                });
            }
            std::thread::sleep(REAP_POLL_INTERVAL);
        }
    }
}

impl Drop for LocalNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How the process ended, if it has, without reaping it (`WNOWAIT`).
fn peek_exit(pid: Pid) -> Result<Option<String>, Errno> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(pid), flags) {
        Ok(WaitStatus::Exited(_, code)) => Ok(Some(format!("exited with status {code}"))),
        Ok(WaitStatus::Signaled(_, signal, _)) => {
            Ok(Some(format!("was killed by {}", signal.as_str())))
        }
        Ok(_) => Ok(None),
        Err(Errno::ECHILD) => Ok(Some("was reaped elsewhere (status unknown)".into())),
        // nix reports a signal number it cannot name (a realtime signal) as EINVAL.
        Err(Errno::EINVAL) => Ok(Some("was killed by a signal".into())),
        Err(e) => Err(e),
    }
}

/// A fresh client per use: a reqwest client is tied to the tokio runtime it first ran on,
/// and nodes outlive runtimes in tests. Never goes through a proxy: the nodes are local.
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build HTTP client: {}", error_chain(&e)))
}

pub(crate) async fn probe(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<(), crate::ready::NotReady> {
    match client.get(url).timeout(timeout).send().await {
        Ok(response) if response.status() == reqwest::StatusCode::OK => Ok(()),
        Ok(response) => Err(crate::ready::NotReady {
            reason: format!("HTTP {}", response.status()),
            answered: true,
        }),
        Err(e) => Err(crate::ready::NotReady {
            reason: error_chain(&e),
            answered: false,
        }),
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    // Error chains are short; the limit only guards against a cyclic `source`.
    for _ in 0..8 {
        let Some(e) = source else { break };
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

/// The last non-empty lines written to `log` since byte `offset`, joined with ` | `.
fn stderr_tail(log: &Path, offset: u64) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(log)?;
        let len = file.metadata()?.len();
        let from = offset.max(len.saturating_sub(STDERR_TAIL_BYTES));
        file.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        file.take(STDERR_TAIL_BYTES).read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text
                .lines()
                .map(str::trim_end)
                .filter(|l| !l.is_empty())
                .collect();
            if lines.is_empty() {
                "(nothing on stderr)".into()
            } else {
                lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join(" | ")
            }
        }
        Err(e) => format!("(cannot read stderr log: {e})"),
    }
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

impl NodeControl for LocalNode {
    fn id(&self) -> &str {
        LocalNode::id(self)
    }
    fn base_url(&self) -> String {
        LocalNode::base_url(self)
    }
    fn readiness_check(&self) -> String {
        LocalNode::readiness_check(self)
    }
    fn start(&mut self, startup: Duration) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(LocalNode::start(self, startup))
    }
    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move { LocalNode::stop(self) })
    }
    fn pause(&self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move { LocalNode::pause(self) })
    }
    fn resume(&self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move { LocalNode::resume(self) })
    }
    fn kill(&mut self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move { LocalNode::kill(self) })
    }
    fn restart(&mut self, startup: Duration) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(LocalNode::restart(self, startup))
    }
    fn logs(&self) -> NodeLogs {
        NodeLogs {
            stdout: self.stdout_log(),
            stderr: self.stderr_log(),
        }
    }
    fn is_paused(&self) -> bool {
        LocalNode::is_paused(self)
    }
    fn started_at(&self) -> Option<Instant> {
        self.spawned_at()
    }
    fn pid(&self) -> Option<u32> {
        LocalNode::pid(self)
    }
}

/// `--runtime local`: every node a child process group on this machine, on a free loopback
/// port. No network faults.
pub struct Local;

impl RuntimeKind for Local {
    fn name(&self) -> &'static str {
        "local"
    }
    fn about(&self) -> &'static str {
        "processes on loopback"
    }
    fn open(&self, _spec: &RuntimeSpec) -> Result<Box<dyn Runtime>, Error> {
        Ok(Box::new(LocalRuntime))
    }
}

/// Nodes as local processes on loopback (also how the store always runs).
pub struct LocalRuntime;

const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

impl Runtime for LocalRuntime {
    fn addresses(&self, n: usize) -> Result<Vec<(String, u16)>, Error> {
        let mut ports = free_ports(LOOPBACK, n)?;
        // One host: the smallest address as text is the smallest port as text.
        ports.sort_by_key(|p| p.to_string());
        Ok(ports
            .into_iter()
            .map(|p| (LOOPBACK.to_string(), p))
            .collect())
    }
    /// Free ports, never one handed out lately (so two sets never share one).
    fn peer_ports(&self, n: usize, _set: u16) -> Result<Vec<u16>, Error> {
        Ok(free_ports(LOOPBACK, n)?)
    }
    fn reach(&self, _i: usize, port: u16) -> BoxFuture<'_, Result<(String, u16), Error>> {
        Box::pin(async move { Ok((LOOPBACK.to_string(), port)) })
    }
    fn node(&self, _i: usize, s: NodeSpec) -> BoxFuture<'_, Result<Box<dyn NodeControl>, Error>> {
        let node = LocalNode::new(&s.id, s.command, LOOPBACK, s.port, s.node_dir)
            .with_env(s.env)
            .with_clock_page(s.clock_page)
            .with_readiness(s.readiness.clone())
            .with_shutdown(s.shutdown);
        Box::pin(async move { Ok(Box::new(node) as Box<dyn NodeControl>) })
    }
    fn network(&self) -> Option<std::sync::Arc<dyn NetworkFaults>> {
        None
    }
    fn teardown(self: Box<Self>) -> Result<(), Error> {
        Ok(())
    }
}
