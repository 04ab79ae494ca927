//! Lock-service clients and the workloads that drive them.
//!
//! - [`RefClient`]: the reference-protocol adapter (reqwest, one pooled client). Every answer is
//!   a [`Reply`]: `Ok` (took effect), `Fail` (surely did not: a 409, or a refused connection)
//!   or `Info` (indeterminate: timeout, transport error after sending, unexpected status or an
//!   unreadable 200).
//! - [`EtcdClient`]: etcd v3 over its JSON gateway (lease + lock + create_revision as the
//!   token; the store is etcd itself, fenced by a txn). [`TemplateClient`]: any HTTP lock API
//!   described in a config file.
//! - The seams: [`LockClient`] (acquire, renew, release) and [`FencedResource`] (read, write,
//!   inspect), which every service's clients implement; [`Service`], its descriptor (how to
//!   start it, which faults reach it, how to connect); [`SERVICES`], the registry `--adapter`
//!   looks names up in. [`Adapter`]: one node's lock client and resource, what workers call.
//! - [`run_workers`]: one task per client slot running the [`WorkloadKind::Mutex`],
//!   [`WorkloadKind::Counter`] or [`WorkloadKind::Bank`] workload, recording every invoke and completion through a
//!   [`history::Recorder`]. A process that sees `Info` is crashed and its slot continues under a
//!   new process number. [`final_reads`] makes the counter's (and the bank's) closing reads.
//! - [`PauseBoard`]: how the nemesis asks a holder to stall past its lease (client-pause).
//! - [`Budget`]: the `--ops-max` bound shared by all workers.
//! - [`probe`]: the conformance probe (health, grant with a numeric token, a second client
//!   refused, renew, the store round trip, release, `/v1/time` noted) through the same seams,
//!   before a run's clock starts and for `lockpick probe`; one line naming the request, the
//!   answer and what was expected when the service fails it.
//! - [`AnswerWatch`]: answers the adapter does not understand (reason `http-NNN`, `bad-body`, a
//!   grant without a numeric token), counted while the run goes on; past a threshold the run
//!   stops naming the op, the status and the body. Every fail and info carries a reason code
//!   (`history::reason`).

mod adapter;
mod api;
mod pause;
mod probe;
mod service;
mod watch;
mod workload;

/// Registers every lock service: declares its module and lists its descriptor in [`SERVICES`].
/// A new service is one file in this folder (its clients and its [`Service`]) plus one line in
/// the list below.
macro_rules! services {
    ($($module:ident :: $service:ident),+ $(,)?) => {
        $(mod $module;)+
        /// Every service `--adapter` can name, in this order in messages.
        pub static SERVICES: &[&dyn Service] = &[$(&$module::$service),+];
    };
}

services! {
    client::Reference,
    etcd::Etcd,
    template::Template,
    standin::StandIn,
    redis::Redis,
    redlock::RedlockService,
    redis_sentinel::RedisSentinel,
    zookeeper::ZooKeeper,
    postgres::Postgres,
}

pub use adapter::Adapter;
pub use api::{BoxFuture, FencedResource, Grant, LockClient, Reply, Tokens};
pub use client::{ClientError, RefClient};
pub use etcd::EtcdClient;
pub use pause::{PauseBoard, Stall, StallAim, Wake};
pub use probe::{probe, ProbeError, ProbeTarget, PROBE_LOCK};
pub use service::{
    find_on_path, host_port, on_path, service, service_names, AdapterOptions, Clock, Connect,
    ConnectError, Launch, Service, ServiceOption, ServiceOptions, Settings,
};
pub use template::{CallSpec, TemplateClient, TemplateSpec};
pub use watch::{AnswerWatch, UNEXPECTED_MIN, WINDOW};
pub use workload::{
    final_reads, run_workers, Arrivals, Budget, LockOrderPolicy, WorkersDone, WorkloadConfig,
    WorkloadError, WorkloadKind,
};
