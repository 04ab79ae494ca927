//! [`Service`]: the descriptor of one kind of lock service. It says how lockpick starts the
//! service (its command, ports and health path), which fault mechanisms reach it, which settings
//! it cannot honour, and how to connect one node's [`Adapter`]. One implementation per file,
//! beside the service's [`LockClient`](crate::LockClient) and
//! [`FencedResource`](crate::FencedResource); [`crate::SERVICES`] lists them, and `--adapter
//! NAME` looks the name up with [`service`].

use crate::adapter::Adapter;
use crate::api::{FencedResource, LockClient, Tokens};
use crate::client::{ClientError, RefClient};
use crate::template::TemplateSpec;
use nemesis::{Readiness, Shutdown};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Reads the history's clock (ns since the test started): lease evidence an adapter records
/// must be on the same clock as the ops it is compared with.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// What a service's own start command is built from.
pub struct Launch<'a> {
    /// This lockpick binary (services it embeds, such as lockd, are its subcommands).
    pub exe: &'a Path,
    /// How many nodes the run starts.
    pub nodes: usize,
    /// `--unsafe MODE`, for services that have unsafe modes.
    pub unsafe_mode: Option<&'a str>,
    /// `--lock-order ORDER`, for the embedded lockd.
    pub lock_order: Option<&'a str>,
    /// The service's own settings (`--adapter-opt`).
    pub options: &'a ServiceOptions,
}

/// The resolved settings a service may refuse.
pub struct Settings<'a> {
    /// `--renew-ttl`, as given, when it asks for a renew ttl other than `--ttl`.
    pub renew_ttl_apart: Option<&'a str>,
    /// Whether `--store-cmd` or `--store-url` was given.
    pub store_given: bool,
    /// Whether lockpick starts the service with its own command (no `--node-cmd`, no `--url`).
    pub launched: bool,
    /// `--nodes`.
    pub nodes: usize,
    /// Whether `--url` names a service already running.
    pub url: bool,
}

/// Settings of one service only; a service ignores the others.
#[derive(Debug, Clone, Default)]
pub struct AdapterOptions {
    /// The API a config file's `[template]` section describes.
    pub template: Option<TemplateSpec>,
    /// The service's own settings (`--adapter-opt`).
    pub own: ServiceOptions,
}

/// One setting of a service's own: `--adapter-opt NAME=VALUE` (the config file's
/// `adapter_opt`). The service's file lists its options; nothing else knows them.
#[derive(Debug)]
pub struct ServiceOption {
    pub name: &'static str,
    /// The values it takes; the first is the default.
    pub values: &'static [&'static str],
    /// One line for messages and `--help`.
    pub help: &'static str,
}

/// A service's own settings, each checked against its [`ServiceOption`]s, defaults filled in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceOptions {
    /// In the service's order, every option present.
    values: Vec<(&'static str, String)>,
}

impl ServiceOptions {
    /// `given` (`NAME=VALUE` each) checked against `service`'s options; an error names the
    /// pair and what was expected, in one line.
    pub fn parse(service: &dyn Service, given: &[String]) -> Result<ServiceOptions, String> {
        let options = service.options();
        let mut values: Vec<(&'static str, String)> = options
            .iter()
            .map(|o| (o.name, o.values.first().copied().unwrap_or("").to_string()))
            .collect();
        let mut seen: Vec<&str> = Vec::new();
        for pair in given {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(format!("{pair:?}: expected NAME=VALUE"));
            };
            let (name, value) = (name.trim(), value.trim());
            let Some(o) = options.iter().find(|o| o.name == name) else {
                return Err(match options.is_empty() {
                    true => format!(
                        "{pair:?}: --adapter {} has no options of its own",
                        service.name()
                    ),
                    false => format!(
                        "{pair:?}: --adapter {} has no option {name:?}; its options: {}",
                        service.name(),
                        describe(options)
                    ),
                });
            };
            if seen.contains(&o.name) {
                return Err(format!("{pair:?}: {name} is given twice"));
            }
            seen.push(o.name);
            if !o.values.contains(&value) {
                return Err(format!("{pair:?}: expected {name}={}", o.values.join("|")));
            }
            if let Some(v) = values.iter_mut().find(|(n, _)| *n == o.name) {
                v.1 = value.to_string();
            }
        }
        Ok(ServiceOptions { values })
    }

    /// The value of option `name` (its default if not given); empty for a name the service
    /// does not have.
    pub fn get(&self, name: &str) -> &str {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// Every option as `NAME=VALUE`, defaults included: what a run's config.toml records.
    pub fn pairs(&self) -> Vec<String> {
        self.values
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect()
    }
}

/// `persistence (none|rdb|...), fence (none|counter)`.
fn describe(options: &[ServiceOption]) -> String {
    let each: Vec<String> = options
        .iter()
        .map(|o| format!("{} ({})", o.name, o.values.join("|")))
        .collect();
    each.join(", ")
}

/// What one node's adapter is connected with.
pub struct Connect<'a> {
    /// The node's base URL, `http://host:port` (or what `--url` gave: a service that does
    /// not speak HTTP reads its host and port with [`host_port`]).
    pub url: &'a str,
    /// Every node's URL, in node order (this node's included): for a client that talks to
    /// all of them at once (Redlock's independent masters).
    pub peers: &'a [String],
    /// Every node's `host:port` as the other nodes know it (`{peers}`), in node order: what a
    /// service that names its members to its clients answers (Sentinel's master address).
    /// The harness reaches node `i` at `peers[i]`, which is another address where the runtime
    /// proxies it (netns). Empty for a `--url` target.
    pub known_as: &'a [String],
    /// Every node's peer port (`{peer_port}`) as the harness reaches it, `tcp://host:port`, in
    /// node order, for a service whose clients talk to it there (Redis Sentinel's sentinels);
    /// empty unless the service has a peer port.
    pub peer_urls: &'a [String],
    /// The fenced store's base URL, when the workload has a store apart from the service.
    pub store_url: Option<&'a str>,
    /// Bounds every request end to end: past it the op is indeterminate.
    pub op_timeout: Duration,
    /// Client workers sharing the connection pool.
    pub clients: usize,
    /// The history's clock.
    pub clock: Clock,
    pub options: &'a AdapterOptions,
}

impl Connect<'_> {
    /// The fenced store beside a service of another protocol (lockpick's own store, when the
    /// workload has one), as every such adapter's resource.
    pub fn store_beside(&self) -> Result<Option<Arc<dyn FencedResource>>, ClientError> {
        match self.store_url {
            Some(s) => Ok(Some(Arc::new(RefClient::store_only(
                s,
                self.op_timeout,
                self.clients,
            )?))),
            None => Ok(None),
        }
    }

    /// The adapter of a lock client of another protocol: `lock`, the [`Connect::store_beside`]
    /// as its resource, `evidence` the keys of its answers the history keeps.
    pub(crate) fn beside_store(
        &self,
        lock: Arc<dyn LockClient>,
        evidence: &'static [&'static [history::Field]],
    ) -> Result<Adapter, ConnectError> {
        Ok(Adapter::new(lock, self.store_beside()?).with_evidence(evidence))
    }
}

/// Why an adapter could not be connected.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("--adapter {adapter}: {reason}")]
    Refused {
        adapter: &'static str,
        reason: String,
    },
}

impl ConnectError {
    /// How a service's connect refuses a setting (`.map_err(ConnectError::refused_by(...))`),
    /// named by the service's `--adapter` name.
    pub(crate) fn refused_by(adapter: &'static str) -> impl Fn(String) -> ConnectError + Copy {
        move |reason| ConnectError::Refused { adapter, reason }
    }
}

/// One kind of lock service, as lockpick starts, hurts and drives it. Defaults describe a
/// service speaking the reference protocol's conventions: health at `/v1/health`, one port,
/// reached by every fault, the counter's register in a separate fenced store.
pub trait Service: Sync {
    /// `--adapter NAME`.
    fn name(&self) -> &'static str;

    /// What the service is and how lockpick drives it, in one sentence for `--help` (its
    /// options and node count are added there from [`Service::options`] and
    /// [`Service::nodes_default`]).
    fn about(&self) -> &'static str;

    /// The command lockpick runs for each node when no `--node-cmd` is given (placeholders as
    /// `--node-cmd`'s); `None` when lockpick has none, so `--node-cmd` or `--url` is needed.
    fn launch(&self, launch: &Launch) -> Option<Vec<String>>;

    /// What answers once a node serves: by default `GET /v1/health` answering 200.
    fn readiness(&self) -> Readiness {
        Readiness::http("/v1/health")
    }

    /// How a node is stopped at the end of a run before what is left is killed: by default
    /// SIGTERM and 2 s. A service whose program cleans up only in its own shutdown (files,
    /// shared memory) asks for the signal that starts it and the time it takes.
    fn shutdown(&self) -> Shutdown {
        Shutdown::TERM
    }

    /// Which kind of grant the service gives (see [`Grant`](crate::Grant)) with these
    /// settings: by default every grant carries a fencing token.
    fn tokens(&self, _options: &ServiceOptions) -> Tokens {
        Tokens::Fencing
    }

    /// The program its own command runs and the Debian package that has it (`redis-server`,
    /// `redis-server`), when that is not lockpick itself: where [`Service::find_program`]
    /// finds none a launched run is refused up front, and `lockpick doctor` says which
    /// services can start here. A path (ZooKeeper's jar) is looked for as that file.
    fn program(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// Where the program [`Service::program`] names is installed here: by default the first
    /// on `PATH`. A service whose package installs it off `PATH` (PostgreSQL's, under
    /// `/usr/lib/postgresql/<version>/bin`) looks where its own command will.
    fn find_program(&self) -> Option<PathBuf> {
        self.program().and_then(|(p, _)| find_on_path(p))
    }

    /// The URL schemes `--url` may name it by (`http`, `https`; Redis's `redis`).
    fn url_schemes(&self) -> &'static [&'static str] {
        &["http", "https"]
    }

    /// Whether its own command is the embedded lockd, which takes `--unsafe MODE` (lockd's
    /// deliberate bugs): every other service's run refuses the flag, in one line, before any
    /// traffic.
    fn takes_unsafe(&self) -> bool {
        false
    }

    /// Whether its own command is the embedded lockd, whose modes (`--lock-order timestamp`)
    /// the command takes; no other service has them.
    fn lockd_modes(&self) -> bool {
        false
    }

    /// The service's own settings (`--adapter-opt NAME=VALUE`); none by default.
    fn options(&self) -> &'static [ServiceOption] {
        &[]
    }

    /// The flags its options were before `--adapter-opt`, as (flag, option): etcd's `api` was
    /// `--etcd-api`. Hidden, and still read, so that the reproduce lines and config files of
    /// older runs rerun as they ran.
    fn former_flags(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// For a service whose grants carry no token as configured, the setting that gives them
    /// one (`--adapter-opt fence=counter`), if any: named when the counter workload is refused.
    fn fencing_hint(&self) -> Option<&'static str> {
        None
    }

    /// `--nodes` when none is given: the nodes a deployment of the service needs to be itself
    /// (Sentinel's quorum); one by default.
    fn nodes_default(&self) -> usize {
        1
    }

    /// Whether each node also listens on a peer port (`{peer_port}`, `{initial_cluster}`).
    fn peer_port(&self) -> bool {
        false
    }

    /// What shows that the nodes, each serving on its own, have formed one deployment: checked
    /// on every node's peer port (as the harness reaches it) once all of them serve, until it
    /// holds on every one, within the start-up timeout, before the probe and the first fault
    /// (Sentinel: every sentinel names the first node its master and sees the others' servers
    /// and sentinels). `known_as` is every node's `host:port` as its peers know it. None by
    /// default: a node that serves is all a service needs.
    fn settled(&self, _known_as: &[String]) -> Option<Readiness> {
        None
    }

    /// What holds, on its client port, only on the node that is the primary now (ZooKeeper's
    /// leader, which an ensemble elects as it starts, wherever it likes): asked of each node
    /// once all serve and settled, so the faults planned for the primary hit the node that
    /// leads, and the role each fault records is true at least until a fault moves the lead.
    /// None by default: the primary is where lockd's rule puts it (the smallest address), or
    /// the first node for a service that names none.
    fn primary_check(&self) -> Option<Readiness> {
        None
    }

    /// What holds, on its client port, only on the node that is the primary at this moment,
    /// for a service whose primary moves all the time as it runs (the embedded lockd's token
    /// ring: the member holding the token): asked of every node as each fault starts, so a
    /// fault planned for the primary hits the node that is it then. None by default: the
    /// primary moves only when a fault moves it.
    fn moving_primary(&self, _launch: &Launch) -> Option<Readiness> {
        None
    }

    /// Whether each node also listens on a second peer port (`{peer_port_2}`; ZooKeeper's
    /// election port beside its quorum port). Every node's host and peer ports are then in
    /// `{peer_list}` (`host:peer_port:peer_port_2`, comma-separated, in node order).
    fn second_peer_port(&self) -> bool {
        false
    }

    /// Why clock faults through libfaketime (preloaded into each node: the fallback where the
    /// vDSO backend cannot run) cannot reach the service, if they cannot: they are then
    /// refused before any traffic on such a machine. The vDSO backend reaches every service.
    fn clock_faults(&self) -> Result<(), &'static str> {
        Ok(())
    }

    /// Whether a client can hold several of its locks at once as lockpick drives it, so the
    /// bank workload (two accounts' locks per transfer) runs against it. Off until a service's
    /// adapter is shown to (an adapter that remembers one grant per client would refuse the
    /// first lock's reads and release once the second is granted).
    fn holds_several_locks(&self, _options: &ServiceOptions) -> bool {
        false
    }

    /// Whether the service keeps the counter's register itself (no separate store).
    fn own_resource(&self, _options: &ServiceOptions) -> bool {
        false
    }

    /// Whether, with these settings, the register the service keeps itself is written inside
    /// the grant, so that a holder that lost its lock cannot write (PostgreSQL's
    /// transaction-scoped lock: the write commits the lock's transaction): the counter workload
    /// then needs no fencing token, and is the default.
    fn grant_guards_resource(&self, _options: &ServiceOptions) -> bool {
        false
    }

    /// The config file's section that describes the service's API, if it needs one.
    fn config_section(&self) -> Option<&'static str> {
        None
    }

    /// Refuses settings the service cannot honour: one line naming the flag.
    fn check(&self, _settings: &Settings) -> Result<(), String> {
        Ok(())
    }

    /// The test name of a run of the service started by lockpick's own command (the run
    /// directory is `<out>/<name>/<stamp>`).
    fn run_name(&self, _unsafe_mode: Option<&str>) -> String {
        self.name().to_string()
    }

    /// One node's lock client and fenced resource.
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError>;
}

/// The service `--adapter NAME` names.
pub fn service(name: &str) -> Option<&'static dyn Service> {
    crate::SERVICES.iter().copied().find(|s| s.name() == name)
}

/// Every service's name, for messages: `reference, etcd or template`.
pub fn service_names() -> String {
    let names: Vec<&str> = crate::SERVICES.iter().map(|s| s.name()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The host and port of `url` (`scheme://host:port/...`; an IPv6 host without its brackets),
/// for services reached over plain TCP.
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let u = reqwest::Url::parse(url).ok()?;
    let host = u.host_str()?.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), u.port_or_known_default()?))
}

/// Whether `program` is an executable file on `PATH`; a `program` with a `/` in it is a path,
/// and is there when that file is (a service whose program is a file, not a command: a jar).
pub fn on_path(program: &str) -> bool {
    find_on_path(program).is_some()
}

/// The first `program` on `PATH`; a path (a service whose program is a file, such as a jar)
/// is that file, if it is there.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}

/// A service shows as its name (a resolved run's configuration holds the descriptor itself).
impl std::fmt::Debug for dyn Service + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_is_found_by_its_name_once() {
        for s in crate::SERVICES {
            let same = crate::SERVICES.iter().filter(|t| t.name() == s.name());
            assert_eq!(same.count(), 1, "{} is registered twice", s.name());
            assert_eq!(service(s.name()).map(|f| f.name()), Some(s.name()));
        }
        assert!(service("nope").is_none());
        assert!(service_names().starts_with("reference, etcd"));
    }
}
