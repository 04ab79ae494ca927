//! Lock-service clients and the workloads that drive them.
//!
//! - [`RefClient`]: the reference-protocol adapter (reqwest, one pooled client). Every answer is
//!   a [`Reply`]: `Ok` (took effect), `Fail` (surely did not: a 409, or a refused connection)
//!   or `Info` (indeterminate: timeout, transport error after sending, unexpected status or an
//!   unreadable 200).
//! - [`EtcdClient`]: etcd v3 over its JSON gateway (lease + lock + create_revision as the
//!   token; the store is etcd itself, fenced by a txn). [`Adapter`] puts the protocols behind
//!   one set of calls.
//! - [`run_workers`]: one task per client slot running the [`WorkloadKind::Mutex`] or
//!   [`WorkloadKind::Counter`] workload, recording every invoke and completion through a
//!   [`history::Recorder`]. A process that sees `Info` is crashed and its slot continues under a
//!   new process number. [`final_reads`] makes the counter's closing reads.
//! - [`PauseBoard`]: how the nemesis asks a holder to stall past its lease (client-pause).
//! - [`Budget`]: the `--ops-max` bound shared by all workers.

mod adapter;
mod client;
mod etcd;
mod pause;
mod template;
mod workload;

pub use adapter::Adapter;
pub use client::{ClientError, RefClient, Reply};
pub use etcd::{Clock, EtcdClient};
pub use pause::{PauseBoard, Stall};
pub use template::{CallSpec, TemplateClient, TemplateSpec};
pub use workload::{
    final_reads, run_workers, Budget, WorkersDone, WorkloadConfig, WorkloadError, WorkloadKind,
};
