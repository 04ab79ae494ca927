//! [`Service`]: the descriptor of one kind of lock service. It says how lockpick starts the
//! service (its command, ports and health path), which fault mechanisms reach it, which settings
//! it cannot honour, and how to connect one node's [`Adapter`]. One implementation per file,
//! beside the service's [`LockClient`](crate::LockClient) and
//! [`FencedResource`](crate::FencedResource); [`crate::SERVICES`] lists them, and `--adapter
//! NAME` looks the name up with [`service`].

use crate::adapter::Adapter;
use crate::client::ClientError;
use crate::template::TemplateSpec;
use std::path::Path;
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
}

/// The resolved settings a service may refuse.
pub struct Settings<'a> {
    /// `--renew-ttl`, as given, when it asks for a renew ttl other than `--ttl`.
    pub renew_ttl_apart: Option<&'a str>,
    pub unsafe_mode: Option<&'a str>,
    /// Whether `--store-cmd` or `--store-url` was given.
    pub store_given: bool,
    /// Whether lockpick starts the service with its own command (no `--node-cmd`, no `--url`).
    pub launched: bool,
}

/// Settings of one service only; a service ignores the others.
#[derive(Debug, Clone, Default)]
pub struct AdapterOptions {
    /// etcd's JSON gateway prefix (`--etcd-api`).
    pub etcd_api: String,
    /// The API a config file's `[template]` section describes.
    pub template: Option<TemplateSpec>,
}

/// What one node's adapter is connected with.
pub struct Connect<'a> {
    /// The node's base URL, `http://host:port`.
    pub url: &'a str,
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

/// One kind of lock service, as lockpick starts, hurts and drives it. Defaults describe a
/// service speaking the reference protocol's conventions: health at `/v1/health`, one port,
/// reached by every fault, the counter's register in a separate fenced store.
pub trait Service: Sync {
    /// `--adapter NAME`.
    fn name(&self) -> &'static str;

    /// The command lockpick runs for each node when no `--node-cmd` is given (placeholders as
    /// `--node-cmd`'s); `None` when lockpick has none, so `--node-cmd` or `--url` is needed.
    fn launch(&self, launch: &Launch) -> Option<Vec<String>>;

    /// The path that answers 200 once a node serves.
    fn health_path(&self) -> &'static str {
        "/v1/health"
    }

    /// Whether each node also listens on a peer port (`{peer_port}`, `{initial_cluster}`).
    fn peer_port(&self) -> bool {
        false
    }

    /// Why clock faults through libfaketime (preloaded into each node: the fallback where the
    /// vDSO backend cannot run) cannot reach the service, if they cannot: they are then
    /// refused before any traffic on such a machine. The vDSO backend reaches every service.
    fn clock_faults(&self) -> Result<(), &'static str> {
        Ok(())
    }

    /// Whether the service keeps the counter's register itself (no separate store).
    fn own_resource(&self) -> bool {
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

/// Whether `program` is an executable file on `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
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
