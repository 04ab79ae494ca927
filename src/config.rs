//! The resolved run configuration: flags validated and turned into plain values. Saved as
//! `config.toml` in the run directory, enough to rerun with the same seed.

mod faults;
mod repro;
pub(crate) use repro::shell_quote;

use crate::flags::{self, RunArgs};
use anyhow::{bail, Context, Result};
use nemesis::clock::ClockScope;
use nemesis::schedule::{
    parse_client_faults, parse_clock_modes, ClientFaults, ClockMode, FaultKind, Schedule, Topology,
};
use std::path::PathBuf;
use std::time::Duration;
use workloads::WorkloadKind;

/// `--drift`: a fraction in [0, 1) in whole parts per million, the unit the checkers compute
/// every bound in (so 0.07 is exactly 70,000 ppm, never a float a nanosecond off).
pub(crate) fn check_drift(drift: f64) -> Result<()> {
    if !(0.0..1.0).contains(&drift) {
        bail!("--drift {drift}: expected a fraction in [0, 1)");
    }
    let ppm = drift * 1e6;
    if (ppm - ppm.round()).abs() > 1e-6 {
        bail!("--drift {drift}: at most six decimals (the checkers count drift in whole ppm)");
    }
    Ok(())
}

/// Parses `500ms`, `2s`, `1m`, `1m30s`; names the flag when it cannot.
pub fn duration(flag: &str, s: &str) -> Result<Duration> {
    let t = s.trim();
    let expected = format!("--{flag} {s:?}: expected a duration such as 500ms, 2s or 1m");
    // The parser's own words for the two usual slips are about its grammar, not the flag.
    if t.starts_with('-') {
        bail!("{expected}, never negative");
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        bail!("{expected}: a number needs its unit ({t}ms or {t}s)");
    }
    humantime::parse_duration(t).map_err(|e| match e {
        // Which unit was not one is worth saying, in our words (the parser's list every
        // spelling it knows, "months, years (and few variations)"); where it stopped reading
        // (`expected number at 0`) is not.
        humantime::DurationError::UnknownUnit { unit, .. } => {
            anyhow::anyhow!("{expected}: unknown time unit {unit:?} (ms, s, m or h)")
        }
        humantime::DurationError::NumberOverflow => anyhow::anyhow!("{expected}: {e}"),
        _ => anyhow::anyhow!("{expected}"),
    })
}

fn ms(flag: &str, s: &str) -> Result<u64> {
    Ok(duration(flag, s)?.as_millis() as u64)
}

/// An `http://` or `https://` URL with a host, or an error naming the flag.
fn check_url(flag: &str, url: &str, schemes: &[&str]) -> Result<()> {
    let example = format!("{}://127.0.0.1:7000", schemes.first().unwrap_or(&"http"));
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| anyhow::anyhow!("--{flag} {url:?}: not a URL ({e}); e.g. {example}"))?;
    if !schemes.contains(&parsed.scheme()) || parsed.host_str().is_none() {
        let kinds: Vec<String> = schemes.iter().map(|s| format!("{s}://")).collect();
        bail!(
            "--{flag} {url:?}: expected a {} URL with a host, e.g. {example}",
            kinds.join(" or ")
        );
    }
    Ok(())
}

/// Parses `MIN..MAX` (two durations).
pub fn range_ms(flag: &str, s: &str) -> Result<(u64, u64)> {
    let Some((lo, hi)) = s.split_once("..") else {
        bail!("--{flag} {s:?}: expected MIN..MAX, e.g. 50ms..1s");
    };
    let (lo, hi) = (ms(flag, lo)?, ms(flag, hi)?);
    if lo > hi {
        bail!("--{flag} {s:?}: MIN is above MAX");
    }
    Ok((lo, hi))
}

/// Where the lock service (or the store) comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `lockpick lockd` / `lockpick store` started by the harness.
    Embedded,
    /// A shell command template started by the harness.
    Command { template: String },
    /// Already running; the harness only talks to it.
    Url { url: String },
}

impl Target {
    /// A command's target, else a URL's, else the embedded one.
    fn of(cmd: Option<&str>, url: Option<&str>) -> Target {
        match (cmd, url) {
            (Some(t), _) => Target::Command {
                template: t.to_string(),
            },
            (None, Some(u)) => Target::Url { url: u.to_string() },
            (None, None) => Target::Embedded,
        }
    }

    pub fn is_started_by_us(&self) -> bool {
        !matches!(self, Target::Url { .. })
    }
}

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub name: String,
    pub seed: u64,
    pub workload: WorkloadKind,
    pub clients: usize,
    pub locks: usize,
    pub ttl_ms: u64,
    /// The lease asked for with every renew (`--renew-ttl`; by default `ttl_ms`).
    pub renew_ttl_ms: u64,
    pub hold_min_ms: u64,
    pub hold_max_ms: u64,
    pub duration_ms: u64,
    pub ops_max: Option<u64>,
    pub op_timeout_ms: u64,
    /// How long an acquire may wait for a held lock (`--acquire-wait`; by default 5 x ttl).
    pub acquire_wait_ms: u64,
    /// The service `--adapter` named, chosen when the flags were resolved.
    pub service: &'static dyn workloads::Service,
    /// The adapter's own settings (`--adapter-opt`), defaults filled in.
    pub adapter_own: workloads::ServiceOptions,
    pub template_file: Option<PathBuf>,
    /// The file holding the hosts of --runtime ssh, and those hosts.
    pub hosts_file: Option<PathBuf>,
    pub hosts: Option<nemesis::ssh::Hosts>,
    pub nodes: usize,
    pub nemesis_targets: nemesis::schedule::Targets,
    /// Where the nodes run (`--runtime`, or the default for the faults asked for).
    pub runtime: &'static dyn nemesis::runtime::RuntimeKind,
    /// Whether `--partition-topologies` was given (`topologies` holds the resolved list).
    pub topologies_given: bool,
    pub nemesis_interval_ms: u64,
    pub clock_scope: ClockScope,
    pub clock_bump_ms: u64,
    pub clock_rate: f64,
    pub target: Target,
    pub unsafe_mode: Option<lockd::UnsafeMode>,
    /// `--lock-order` of the embedded lockd.
    pub lock_order: Option<lockd::LockOrder>,
    pub arrivals: workloads::Arrivals,
    /// The bank workload's accounts (`--accounts`).
    pub accounts: usize,
    /// The bank workload's lock order (`--lock-order-policy`).
    pub lock_order_policy: workloads::LockOrderPolicy,
    /// `None` for the mutex workload, which uses no store.
    pub store: Option<Target>,
    pub store_fence: lockd::FenceMode,
    pub drift: f64,
    pub liveness_grace_ms: u64,
    pub startup_timeout_ms: u64,
    pub out: PathBuf,
    /// The schedule file this run replayed (`--schedule`), if it did not draw its own.
    pub schedule_file: Option<PathBuf>,
    /// The replayed schedule, validated against this run.
    pub schedule: Option<Schedule>,
    /// `--fail-on`, or its default here.
    pub fail_on: reports::FailOn,
    /// `--fail-on` was given (a flag or the config file's key): only then does the run's
    /// config.toml pin the policy; else a rerun takes the default of where it runs (coverage
    /// too under CI).
    pub fail_on_given: bool,
    /// `--no-probe`: the run skips the conformance probe.
    pub no_probe: bool,
    /// `--stop-on-violation`: the clients stop at the first safety violation a live check
    /// proves.
    pub stop_on_violation: bool,
    pub faults: Vec<FaultKind>,
    pub clock_modes: Vec<ClockMode>,
    pub client_shapes: ClientFaults,
    pub template: Option<workloads::TemplateSpec>,
    pub topologies: Vec<Topology>,
}

/// Bounds on sizes a flag may ask for: past these the machine, not the service, is tested.
const CLIENTS_MAX: u64 = 1024;
const LOCKS_MAX: u64 = 10_000;
/// A loopback cluster beyond this is a different kind of test.
const NODES_MAX: u64 = 16;
/// Bounds on a lease (`--ttl`, `--renew-ttl`): the reference lockd refuses more than an hour.
const TTL_MS_MIN: u64 = 10;
const TTL_MS_MAX: u64 = 3_600_000;
/// The default acquire wait, in leases: several, so waiters outlive their own lease (and the
/// request timeout) while they wait, as real clients' waits do under contention.
const ACQUIRE_WAIT_LEASES: u64 = 5;
/// Bound on `--acquire-wait`: the reference lockd waits at most a minute anyway.
const ACQUIRE_WAIT_MS_MAX: u64 = 600_000;

impl RunConfig {
    pub fn from_args(a: &RunArgs) -> Result<RunConfig> {
        let (service, own, kind) = service_of(a)?;
        // `--nodes` resolved once, from the service when not given: every check below reads
        // the count the run will have.
        let mut resolved = a.clone();
        let nodes = a
            .count(&flags::NODES)
            .unwrap_or(service.nodes_default() as u64);
        resolved.set_count(&flags::NODES, Some(nodes));
        let checked = Checked::of(&resolved, service, own, kind)?;
        Ok(checked.lay_out(&resolved))
    }

    /// The checkers' settings this run is judged with.
    pub fn check_config(&self) -> checkers::CheckConfig {
        checkers::CheckConfig {
            drift: self.drift,
            liveness_grace_ns: self.liveness_grace_ms * 1_000_000,
            monotonic_clock_reach_ns: (self.faults.iter().any(|f| f.moves_clocks())
                && self.clock_scope == ClockScope::All)
                .then(|| self.lease_max_ms() * 1_000_000),
            ..Default::default()
        }
    }

    /// How clock faults reach the nodes on this machine: the vDSO, else libfaketime.
    pub fn clock_backend(&self) -> Result<nemesis::clock::Backend> {
        nemesis::clock::Backend::detect().map_err(|why| anyhow::anyhow!("--nemesis clock: {why}"))
    }

    /// The settings of the adapter's own (`--adapter-opt`, the `[template]` section).
    pub fn adapter_options(&self) -> workloads::AdapterOptions {
        workloads::AdapterOptions {
            template: self.template.clone(),
            own: self.adapter_own.clone(),
        }
    }

    /// The run's faults, comma-separated.
    pub fn fault_names(&self) -> String {
        let names: Vec<String> = self.faults.iter().map(|f| f.to_string()).collect();
        names.join(",")
    }

    pub fn kind(&self) -> WorkloadKind {
        self.workload
    }

    /// The longest lease a client can hold: the acquire's or the renew's. What a fault must
    /// outlast to outlive a lease, and what the service needs to let every lease lapse.
    pub fn lease_max_ms(&self) -> u64 {
        self.ttl_ms.max(self.renew_ttl_ms)
    }
}

/// The service `--adapter` names, its own settings, and the workload: counter by default, the
/// mutex for a service whose grants carry no fencing token.
fn service_of(
    a: &RunArgs,
) -> Result<(
    &'static dyn workloads::Service,
    workloads::ServiceOptions,
    WorkloadKind,
)> {
    let adapter = a.value(&flags::ADAPTER);
    let service = workloads::service(adapter).with_context(|| {
        // A misspelt name is most often one letter off: say which was meant, as clap does
        // for a misspelt flag.
        let meant =
            history::nearest::did_you_mean(adapter, workloads::SERVICES.iter().map(|s| s.name()));
        format!(
            "--adapter {:?}: expected {}{meant}",
            adapter,
            workloads::service_names()
        )
    })?;
    let own = own_options(a, service)?;
    // A register written inside the grant (a transaction-scoped lock's commit) needs no token.
    let fencing =
        service.tokens(&own) == workloads::Tokens::Fencing || service.grant_guards_resource(&own);
    let kind: WorkloadKind = match a.text(&flags::WORKLOAD) {
        Some(w) => w
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--workload: {e}"))?,
        None if fencing => WorkloadKind::Counter,
        None => WorkloadKind::Mutex,
    };
    if kind == WorkloadKind::Bank && !service.holds_several_locks(&own) {
        let several: Vec<&str> = workloads::SERVICES
            .iter()
            .filter(|s| {
                workloads::ServiceOptions::parse(**s, &[])
                    .is_ok_and(|defaults| s.holds_several_locks(&defaults))
            })
            .map(|s| s.name())
            .collect();
        bail!(
            "--workload bank: a transfer holds two accounts' locks at once, which --adapter {}{} \
             does not do as lockpick drives it; these do, with their default options: {}",
            service.name(),
            match own.pairs() {
                p if p.is_empty() => String::new(),
                p => format!(" with {}", p.join(",")),
            },
            several.join(", ")
        );
    }
    // The bank needs no token: its transfers keep their writes inside their leases by their
    // own clocks where a grant carries none, and the versions they read and wrote prove any
    // harm. The counter is the fencing workload: without tokens its store fences nothing and
    // its checks read the tokens its writes carry.
    if kind == WorkloadKind::Counter && !fencing {
        bail!(
            "--workload counter: the counter's register is fenced by the lock's tokens, and \
             the grants of --adapter {} carry none as configured; use --workload mutex or bank{}",
            service.name(),
            service
                .fencing_hint()
                .map(|h| format!(", or {h}"))
                .unwrap_or_default()
        );
    }
    Ok((service, own, kind))
}

/// What `from_args` resolved and checked, in the order it checks the flags, before it is
/// laid out as a [`RunConfig`].
struct Checked {
    kind: WorkloadKind,
    own: workloads::ServiceOptions,
    t: Timing,
    nemesis_interval_ms: u64,
    arrivals: workloads::Arrivals,
    unsafe_mode: Option<lockd::UnsafeMode>,
    store_fence: lockd::FenceMode,
    targets: nemesis::schedule::Targets,
    lock_order_policy: workloads::LockOrderPolicy,
    target: Target,
    template: Option<workloads::TemplateSpec>,
    store: Option<Target>,
    replay: Option<(PathBuf, Schedule)>,
    faults: Vec<FaultKind>,
    clocks: Clocks,
    service: &'static dyn workloads::Service,
    lock_order: Option<lockd::LockOrder>,
    runtime: &'static dyn nemesis::runtime::RuntimeKind,
    topologies: Vec<Topology>,
    seed: u64,
    name: String,
    hosts: Option<nemesis::ssh::Hosts>,
    liveness_grace_ms: u64,
    startup_timeout_ms: u64,
}

/// The service's own settings: `--adapter-opt`, with a former flag of its options
/// (`--etcd-api /v3`, as older runs' reproduce lines give it) read as that option where
/// `--adapter-opt` does not set it. Another service's former flag at its default is what
/// every older run wrote, whatever its adapter, and is let be; at any other value it is
/// refused, naming the service it belongs to.
fn own_options(
    a: &RunArgs,
    service: &'static dyn workloads::Service,
) -> Result<workloads::ServiceOptions> {
    let mut pairs = a.list(&flags::ADAPTER_OPT).to_vec();
    for &((flag, owner, option), ref value) in a.former() {
        if owner.name() == service.name() {
            let set = pairs
                .iter()
                .any(|p| p.split_once('=').map(|(n, _)| n.trim()) == Some(option));
            if !set {
                pairs.push(format!("{option}={value}"));
            }
            continue;
        }
        let default = owner
            .options()
            .iter()
            .find(|o| o.name == option)
            .and_then(|o| o.values.first());
        if default != Some(&value.as_str()) {
            bail!(
                "--{flag} {value:?}: a setting of --adapter {} (now `--adapter-opt \
                 {option}={value}`), not of --adapter {}",
                owner.name(),
                service.name()
            );
        }
    }
    workloads::ServiceOptions::parse(service, &pairs)
        .map_err(|e| anyhow::anyhow!("--adapter-opt {e}"))
}

impl Checked {
    /// Every flag checked, subsystem by subsystem; `a` has its `--nodes` resolved.
    fn of(
        a: &RunArgs,
        service: &'static dyn workloads::Service,
        own: workloads::ServiceOptions,
        kind: WorkloadKind,
    ) -> Result<Checked> {
        let t = Timing::of(a)?;
        let interval = a.value(&flags::NEMESIS_INTERVAL);
        let nemesis_interval_ms = ms(flags::NEMESIS_INTERVAL.name, interval)?;
        if nemesis_interval_ms == 0 {
            bail!(
                "--nemesis-interval {interval}: must be at least 1ms (--nemesis none runs without faults)"
            );
        }
        check_drift(a.fraction(&flags::DRIFT))?;
        let (unsafe_mode, store_fence, lock_order) = lockd_modes(a, service)?;
        let (arrivals, lock_order_policy) = workload_shape(a, kind)?;
        let (target, template, store) = target_of(a, service, &own, kind, &t)?;
        let replay = match a.path(&flags::SCHEDULE) {
            Some(path) => Some(faults::load_schedule(path, a, &target, service)?),
            None => None,
        };
        if let Some(late) = (replay.as_ref()).and_then(|(_, s)| past_the_end(s, t.duration_ms)) {
            let path = replay.as_ref().map(|(p, _)| p.display().to_string());
            eprintln!("warning: --schedule {}: {late}", path.unwrap_or_default());
        }
        let faults = faults::faults(a, &target, service, replay.as_ref().map(|(_, s)| s))?;
        let mut clocks = Clocks::of(a, &t)?;
        if kind == WorkloadKind::Mutex && clocks.client_shapes.names_data_ops() {
            // Asked for as given, a read or write wake-up would be asked of the coverage and
            // never performed: the run could only end unknown.
            let asked = clocks.client_shapes.names().join(",");
            clocks.client_shapes = clocks.client_shapes.without_data();
            eprintln!(
                "warning: --client-faults {asked}: a mutex holder neither reads nor writes, it \
                 releases instead: drawn and asked for as {}",
                clocks.client_shapes.names().join(",")
            );
        }
        let targets = check_nodes(a, &target)?;
        let runtime = faults::runtime(a, &faults, replay.is_some(), &target)?;
        let topologies = faults::topologies(a)?;
        // Drawn seeds stay below 2^53: exact as a JSON number in any reader (the report's
        // scripts included) and a plain TOML integer.
        let seed = a
            .count(&flags::SEED)
            .unwrap_or_else(|| rand::random::<u64>() >> 11);
        let name = run_name(a, &target, service, kind)?;
        let hosts = match a.path(&flags::HOSTS_FILE) {
            Some(f) => load_hosts(f, true)?,
            None => None,
        };
        Ok(Checked {
            service,
            lock_order,
            kind,
            own,
            t,
            nemesis_interval_ms,
            arrivals,
            unsafe_mode,
            store_fence,
            targets,
            lock_order_policy,
            target,
            template,
            store,
            replay,
            faults,
            clocks,
            runtime,
            topologies,
            seed,
            name,
            hosts,
            liveness_grace_ms: ms(flags::LIVENESS_GRACE.name, a.value(&flags::LIVENESS_GRACE))?,
            startup_timeout_ms: ms(
                flags::STARTUP_TIMEOUT.name,
                a.value(&flags::STARTUP_TIMEOUT),
            )?,
        })
    }

    /// The run's configuration: the checked values, and the flags taken as given.
    fn lay_out(self, a: &RunArgs) -> RunConfig {
        RunConfig {
            name: self.name,
            seed: self.seed,
            workload: self.kind,
            clients: a.number(&flags::CLIENTS) as usize,
            locks: a.number(&flags::LOCKS) as usize,
            ttl_ms: self.t.ttl_ms,
            renew_ttl_ms: self.t.renew_ttl_ms,
            hold_min_ms: self.t.hold_min_ms,
            hold_max_ms: self.t.hold_max_ms,
            duration_ms: self.t.duration_ms,
            ops_max: a.count(&flags::OPS_MAX),
            op_timeout_ms: self.t.op_timeout_ms,
            acquire_wait_ms: self.t.acquire_wait_ms,
            nemesis_interval_ms: self.nemesis_interval_ms,
            service: self.service,
            template_file: a.path(&flags::TEMPLATE_FILE).map(PathBuf::from),
            adapter_own: self.own,
            // Recorded absolute, so the run's config.toml reruns it from anywhere.
            hosts_file: a
                .path(&flags::HOSTS_FILE)
                .map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| f.to_path_buf())),
            hosts: self.hosts,
            nodes: a.nodes(),
            nemesis_targets: self.targets,
            runtime: self.runtime,
            // As asked for; `topologies` holds the resolved list.
            topologies_given: a.text(&flags::PARTITION_TOPOLOGIES).is_some(),
            clock_scope: self.clocks.scope,
            clock_bump_ms: self.clocks.bump_ms,
            clock_rate: a.fraction(&flags::CLOCK_RATE),
            target: self.target,
            unsafe_mode: self.unsafe_mode,
            lock_order: self.lock_order,
            arrivals: self.arrivals,
            accounts: a.number(&flags::ACCOUNTS) as usize,
            lock_order_policy: self.lock_order_policy,
            store: self.store,
            store_fence: self.store_fence,
            drift: a.fraction(&flags::DRIFT),
            liveness_grace_ms: self.liveness_grace_ms,
            startup_timeout_ms: self.startup_timeout_ms,
            out: a.path(&flags::OUT).map(PathBuf::from).unwrap_or_default(),
            schedule_file: self.replay.as_ref().map(|(p, _)| p.clone()),
            schedule: self.replay.map(|(_, s)| s),
            fail_on: reports::FailOn::given_or_default(fail_on(a)),
            fail_on_given: fail_on(a).is_some(),
            no_probe: a.switch(&flags::NO_PROBE),
            stop_on_violation: a.switch(&flags::STOP_ON_VIOLATION),
            faults: self.faults,
            clock_modes: self.clocks.modes,
            client_shapes: self.clocks.client_shapes,
            template: self.template,
            topologies: self.topologies,
        }
    }
}

/// `--arrivals` and `--lock-order-policy` parsed, and `--accounts` checked for the bank.
fn workload_shape(
    a: &RunArgs,
    kind: WorkloadKind,
) -> Result<(workloads::Arrivals, workloads::LockOrderPolicy)> {
    let arrivals = a.value(&flags::ARRIVALS);
    let arrivals_shape = arrivals
        .parse::<workloads::Arrivals>()
        .map_err(|e| anyhow::anyhow!("--arrivals {arrivals}: {e}"))?;
    let lock_order_policy = a
        .value(&flags::LOCK_ORDER_POLICY)
        .parse::<workloads::LockOrderPolicy>()
        .map_err(|e| anyhow::anyhow!("--lock-order-policy: {e}"))?;
    let accounts = a.number(&flags::ACCOUNTS);
    if kind == WorkloadKind::Bank && !(2..=LOCKS_MAX).contains(&accounts) {
        bail!(
            "--accounts {accounts}: the bank moves money between two accounts, so 2 to {LOCKS_MAX}"
        );
    }
    Ok((arrivals_shape, lock_order_policy))
}

/// The workload's sizes and times, each checked.
struct Timing {
    ttl_ms: u64,
    renew_ttl_ms: u64,
    hold_min_ms: u64,
    hold_max_ms: u64,
    duration_ms: u64,
    op_timeout_ms: u64,
    acquire_wait_ms: u64,
}

impl Timing {
    fn of(a: &RunArgs) -> Result<Timing> {
        let clients = a.number(&flags::CLIENTS);
        if clients == 0 || clients > CLIENTS_MAX {
            bail!("--clients {clients}: expected 1..={CLIENTS_MAX}");
        }
        let locks = a.number(&flags::LOCKS);
        if locks == 0 || locks > LOCKS_MAX {
            bail!("--locks {locks}: expected 1..={LOCKS_MAX}");
        }
        let ttl = a.value(&flags::TTL);
        let ttl_ms = ms(flags::TTL.name, ttl)?;
        if !(TTL_MS_MIN..=TTL_MS_MAX).contains(&ttl_ms) {
            bail!("--ttl {ttl}: expected between 10ms and 1h");
        }
        let renew_ttl_ms = match a.text(&flags::RENEW_TTL) {
            None => ttl_ms,
            Some(r) => {
                let r_ms = ms(flags::RENEW_TTL.name, r)?;
                if !(TTL_MS_MIN..=TTL_MS_MAX).contains(&r_ms) {
                    bail!("--renew-ttl {r}: expected between 10ms and 1h");
                }
                r_ms
            }
        };
        let (hold_min_ms, hold_max_ms) = range_ms(flags::HOLD.name, a.value(&flags::HOLD))?;
        let duration = a.value(&flags::DURATION);
        let duration_ms = ms(flags::DURATION.name, duration)?;
        // Durations are kept in whole milliseconds: below one is nothing.
        if duration_ms == 0 {
            bail!("--duration {duration}: must be at least 1ms");
        }
        let op_timeout = a.value(&flags::OP_TIMEOUT);
        let op_timeout_ms = ms(flags::OP_TIMEOUT.name, op_timeout)?;
        if op_timeout_ms == 0 {
            bail!("--op-timeout {op_timeout}: must be at least 1ms");
        }
        if a.count(&flags::OPS_MAX) == Some(0) {
            bail!("--ops-max 0: must be at least 1 (leave it out to run for --duration)");
        }
        let acquire_wait_ms = match a.text(&flags::ACQUIRE_WAIT) {
            None => ttl_ms * ACQUIRE_WAIT_LEASES,
            Some(w) => {
                let w_ms = ms(flags::ACQUIRE_WAIT.name, w)?;
                if w_ms > ACQUIRE_WAIT_MS_MAX {
                    bail!("--acquire-wait {w}: expected at most 10m");
                }
                w_ms
            }
        };
        Ok(Timing {
            ttl_ms,
            renew_ttl_ms,
            hold_min_ms,
            hold_max_ms,
            duration_ms,
            op_timeout_ms,
            acquire_wait_ms,
        })
    }
}

/// The embedded lockd's and store's modes, each checked against what it needs.
/// `--unsafe`, `--store-fence` and `--lock-order` (`None` where not given).
type LockdModes = (
    Option<lockd::UnsafeMode>,
    lockd::FenceMode,
    Option<lockd::LockOrder>,
);

fn lockd_modes(a: &RunArgs, service: &dyn workloads::Service) -> Result<LockdModes> {
    if a.text(&flags::UNSAFE).is_some() && !service.takes_unsafe() {
        bail!(
            "--unsafe is a mode of the embedded lockd, not of {}",
            service.name()
        );
    }
    let mode = a
        .text(&flags::UNSAFE)
        .map(str::parse::<lockd::UnsafeMode>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--unsafe: {e}"))?;
    let fence = a
        .value(&flags::STORE_FENCE)
        .parse::<lockd::FenceMode>()
        .map_err(|e| anyhow::anyhow!("--store-fence: {e}"))?;
    let order = match a.text(&flags::LOCK_ORDER) {
        Some(o) => lockd::LockOrder::parse(o).map_err(|e| anyhow::anyhow!("--lock-order: {e}"))?,
        None => lockd::LockOrder::Primary,
    };
    if order != lockd::LockOrder::Primary && !service.lockd_modes() {
        bail!(
            "--lock-order: the {} order is a mode of the embedded lockd (--adapter reference), not of {}",
            order.name(),
            service.name()
        );
    }
    if let Some(m) = mode {
        if let Some((name, why)) = m.order().filter(|(name, _)| order.name() != *name) {
            bail!("--unsafe {m}: needs --lock-order {name} ({why})");
        }
    }
    let order = a.text(&flags::LOCK_ORDER).is_some().then_some(order);
    Ok((mode, fence, order))
}

/// Where the service and its fenced store are, the service's API section, and what the
/// service refuses of these settings.
fn target_of(
    a: &RunArgs,
    service: &dyn workloads::Service,
    own: &workloads::ServiceOptions,
    kind: WorkloadKind,
    t: &Timing,
) -> Result<(Target, Option<workloads::TemplateSpec>, Option<Target>)> {
    let (ttl_ms, renew_ttl_ms) = (t.ttl_ms, t.renew_ttl_ms);
    check_urls(a, service, kind)?;
    let target = Target::of(a.text(&flags::NODE_CMD), a.text(&flags::URL));
    let template = match (service.config_section(), a.path(&flags::TEMPLATE_FILE)) {
        (Some(_), Some(file)) => Some(load_template(file)?),
        (Some(section), None) => bail!(
            "--adapter {}: the API is described in a config file's [{section}] section; \
                 use --config FILE (see examples/lockd.toml)",
            service.name()
        ),
        (None, _) => None,
    };
    service
        .check(&workloads::Settings {
            renew_ttl_apart: (renew_ttl_ms != ttl_ms)
                .then(|| a.text(&flags::RENEW_TTL).unwrap_or_default()),
            store_given: store_given(a),
            launched: matches!(target, Target::Embedded),
            nodes: a.nodes(),
            url: matches!(target, Target::Url { .. }),
        })
        .map_err(|e| anyhow::anyhow!(e))?;
    check_launchable(service, own, &target)?;
    let store = match kind {
        _ if service.own_resource(own) => None,
        WorkloadKind::Mutex => None,
        WorkloadKind::Counter | WorkloadKind::Bank => Some(Target::of(
            a.text(&flags::STORE_CMD),
            a.text(&flags::STORE_URL),
        )),
    };
    Ok((target, template, store))
}

/// `--url` and `--store-url` checked before anything exists (a typo costs no run directory),
/// and a warning for a store the mutex workload does not use.
fn check_urls(a: &RunArgs, service: &dyn workloads::Service, kind: WorkloadKind) -> Result<()> {
    // The store speaks the reference protocol; the service, whatever its descriptor says.
    let http: &[&str] = &["http", "https"];
    for (flag, schemes) in [
        (&flags::URL, service.url_schemes()),
        (&flags::STORE_URL, http),
    ] {
        if let Some(u) = a.text(flag) {
            check_url(flag.name, u, schemes)?;
        }
    }
    if kind == WorkloadKind::Mutex && store_given(a) {
        // A warning, not a refusal: a team's config file may name its store while one run
        // tests mutual exclusion alone.
        eprintln!(
                "warning: --workload mutex uses no store: --store-url and --store-cmd are ignored (they serve --workload counter)"
            );
    }
    Ok(())
}

/// What a replayed schedule loses to a `--duration` shorter than it: its faults that start
/// at or after the clients stop never run (the nemesis plans within the run), so a replay
/// meant to reproduce would silently test less.
fn past_the_end(s: &Schedule, duration_ms: u64) -> Option<String> {
    let late: Vec<u64> = (s.faults.iter())
        .filter(|f| f.at_ms >= duration_ms)
        .map(|f| f.at_ms)
        .collect();
    let first = *late.iter().min()?;
    let end_ms = s.faults.iter().map(|f| f.end_ms()).max().unwrap_or(0);
    Some(format!(
        "{} of its {} fault(s) start at or after --duration {} (the first at {:.1} s) and will \
         not run; --duration {}s or more replays them all",
        late.len(),
        s.faults.len(),
        humantime::format_duration(std::time::Duration::from_millis(duration_ms)),
        first as f64 / 1000.0,
        end_ms / 1000 + 1
    ))
}

/// Whether `--store-cmd` or `--store-url` was given.
fn store_given(a: &RunArgs) -> bool {
    a.text(&flags::STORE_CMD).is_some() || a.text(&flags::STORE_URL).is_some()
}

/// `--fail-on`, if given (clap has checked it).
pub fn fail_on(a: &RunArgs) -> Option<reports::FailOn> {
    a.text(&flags::FAIL_ON)
        .map(|s| s.parse().expect("--fail-on is checked as it is parsed"))
}

/// Refuses an embedded target this machine or lockpick cannot start.
fn check_launchable(
    service: &dyn workloads::Service,
    own: &workloads::ServiceOptions,
    target: &Target,
) -> Result<()> {
    if let (Target::Embedded, Some((program, package))) = (target, service.program()) {
        if service.find_program().is_none() {
            bail!(
                "--adapter {}: `{program}` is not installed here (apt-get install {package}), or \
                 give --node-cmd or --url",
                service.name()
            );
        }
    }
    if matches!(target, Target::Embedded) && service.launch(&launch_probe(own)).is_none() {
        bail!(
            "--adapter {}: lockpick cannot start this service itself; give --node-cmd or --url",
            service.name()
        );
    }
    Ok(())
}

/// The clock and client-stall settings.
struct Clocks {
    modes: Vec<ClockMode>,
    client_shapes: ClientFaults,
    scope: ClockScope,
    bump_ms: u64,
}

impl Clocks {
    fn of(a: &RunArgs, t: &Timing) -> Result<Clocks> {
        let (ttl_ms, renew_ttl_ms) = (t.ttl_ms, t.renew_ttl_ms);
        let clock_modes = match a.text(&flags::CLOCK_FAULTS) {
            Some(list) => {
                parse_clock_modes(list).map_err(|e| anyhow::anyhow!("--clock-faults: {e}"))?
            }
            None => Vec::new(),
        };
        let client_shapes = match a.text(&flags::CLIENT_FAULTS) {
            Some(list) => {
                parse_client_faults(list).map_err(|e| anyhow::anyhow!("--client-faults: {e}"))?
            }
            None => ClientFaults::default(),
        };
        let clock_scope: ClockScope = a
            .value(&flags::CLOCK_SCOPE)
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--clock-scope: {e}"))?;
        let clock_bump_ms = match a.text(&flags::CLOCK_BUMP) {
            Some(b) => ms(flags::CLOCK_BUMP.name, b)?,
            None => ttl_ms.max(renew_ttl_ms) * 3,
        };
        let rate = a.fraction(&flags::CLOCK_RATE);
        if !(rate > 1.0 && rate <= 1000.0) {
            bail!("--clock-rate {rate}: expected a factor above 1 (and at most 1000)");
        }
        Ok(Clocks {
            modes: clock_modes,
            client_shapes,
            scope: clock_scope,
            bump_ms: clock_bump_ms,
        })
    }
}

/// `--nodes` against the target and the modes that need several, and `--nemesis-targets`.
fn check_nodes(a: &RunArgs, target: &Target) -> Result<nemesis::schedule::Targets> {
    if a.nodes() == 0 || a.nodes() as u64 > NODES_MAX {
        bail!("--nodes {}: expected 1..={NODES_MAX}", a.nodes());
    }
    if a.nodes() > 1 && matches!(target, Target::Url { .. }) {
        bail!(
            "--nodes {}: a --url target is one service; start the nodes with --node-cmd",
            a.nodes()
        );
    }
    if a.text(&flags::UNSAFE) == Some("split-brain") && a.nodes() < 2 {
        bail!("--unsafe split-brain needs --nodes 2 or more (one node cannot split)");
    }
    a.value(&flags::NEMESIS_TARGETS)
        .parse::<nemesis::schedule::Targets>()
        .map_err(|e| anyhow::anyhow!("--nemesis-targets: {e}"))
}

/// `--name`, or one made of the target and workload.
fn run_name(
    a: &RunArgs,
    target: &Target,
    service: &dyn workloads::Service,
    kind: WorkloadKind,
) -> Result<String> {
    let name = match a.text(&flags::NAME) {
        Some(n) => {
            if n.is_empty()
                || n.contains('/')
                || n.contains('\\')
                || n == "."
                || n == ".."
                || n == history::layout::LATEST_LINK
            {
                bail!("--name {n:?}: must be a plain folder name");
            }
            n.to_string()
        }
        None => {
            let t = match &target {
                Target::Embedded => service.run_name(a.text(&flags::UNSAFE)),
                Target::Command { .. } => "node-cmd".to_string(),
                Target::Url { .. } => "url".to_string(),
            };
            format!("{t}-{}", kind.as_str())
        }
    };
    Ok(name)
}

/// Reads the [template] section of a config file into the adapter's spec; a wrong key or type
/// names its path.
fn load_template(file: &std::path::Path) -> Result<workloads::TemplateSpec> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: cannot read it", file.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{}: {}", file.display(), e.message()))?;
    let section = table
        .get("template")
        .cloned()
        .context("no [template] section")?;
    section
        .try_into::<workloads::TemplateSpec>()
        .map_err(|e| anyhow::anyhow!("{}: [template]: {}", file.display(), e.message()))
}

/// The `[[nodes]]` and `[ssh]` of a config file: the hosts of --runtime ssh. Relative paths
/// (identity files, the ssh config) are taken from the file's directory.
/// `None` when the file has no `[[nodes]]` at all and `required` is false (`lockpick doctor`
/// of a file for another runtime); a run on the ssh runtime requires them, and is told how.
/// An error names the file and, where the toml reader placed it, the line (`f.toml:7:
/// [[nodes]]: unknown field `adress``), as the rest of the file's errors do.
pub(crate) fn load_hosts(
    file: &std::path::Path,
    required: bool,
) -> Result<Option<nemesis::ssh::Hosts>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: cannot read it", file.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| crate::config_file::toml_error(file, &text, &e))?;
    if !required && !table.contains_key("nodes") {
        return Ok(None);
    }
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    nemesis::ssh::Hosts::from_config(&text, dir)
        .map(Some)
        .map_err(|e| match e.line() {
            Some(line) => anyhow::anyhow!("{}:{line}: {e}", file.display()),
            None => anyhow::anyhow!("{}: {e}", file.display()),
        })
}

/// A launch with no particulars: whether a service has a command of its own at all (the
/// run's refusal, `lockpick doctor`).
pub(crate) fn launch_probe(options: &workloads::ServiceOptions) -> workloads::Launch<'_> {
    workloads::Launch {
        exe: std::path::Path::new("lockpick"),
        nodes: 1,
        unsafe_mode: None,
        lock_order: None,
        options,
    }
}

#[cfg(test)]
pub(crate) mod tests;
