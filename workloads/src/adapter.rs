//! [`Adapter`]: what a worker calls, one node's [`LockClient`] and [`FencedResource`] together.

use crate::api::{FencedResource, Grant, LockClient, Reply, Wire};
use crate::pause::PauseBoard;
use history::Field;
use std::sync::Arc;

/// One node's lock client and the fenced resource beside it. Every call answers a [`Reply`]
/// (ok / fail / info) with the same meaning whatever the service: the workloads and the history
/// never see protocol details. Cheap to clone (shared handles).
#[derive(Clone)]
pub struct Adapter {
    lock: Arc<dyn LockClient>,
    /// `None` when the workload guards no register (mutex).
    resource: Option<Arc<dyn FencedResource>>,
    /// The evidence sets ([`history::Evidence::FIELDS`]) whose fields an ok acquire's,
    /// renew's or write's answer may carry, copied into the history beside the grant (the rest
    /// of an answer is not recorded: a service speaking the reference protocol cannot write
    /// the checkers' fields).
    evidence: &'static [&'static [Field]],
}

impl Adapter {
    pub fn new(lock: Arc<dyn LockClient>, resource: Option<Arc<dyn FencedResource>>) -> Self {
        Adapter {
            lock,
            resource,
            evidence: &[],
        }
    }

    /// Records the fields of these evidence sets found in ok acquires, renews and writes as
    /// the service's evidence (each service's file declares its own with `history::evidence!`
    /// and writes its answers through it; docs/history.md documents them).
    pub fn with_evidence(mut self, sets: &'static [&'static [Field]]) -> Self {
        self.evidence = sets;
        self
    }

    /// The evidence sets an answer may carry ([`Adapter::with_evidence`]).
    pub fn evidence(&self) -> &'static [&'static [Field]] {
        self.evidence
    }

    /// Asks for `lock` with a lease of `ttl_ms`, waiting up to `wait_ms` for it if it is held.
    /// `pauses` tells a waiting client's background work (etcd's keepalives) when the client
    /// is stalled.
    pub async fn acquire(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        match pauses {
            Some(p) => {
                self.lock
                    .acquire_stallable(client, lock, ttl_ms, wait_ms, p)
                    .await
            }
            None => self.lock.acquire(client, lock, ttl_ms, wait_ms).await,
        }
    }
    pub async fn renew(&self, client: &str, lock: &str, grant: &Grant, ttl_ms: u64) -> Reply {
        self.lock.renew(client, lock, grant, ttl_ms).await
    }
    pub async fn release(&self, client: &str, lock: &str, grant: &Grant) -> Reply {
        self.lock.release(client, lock, grant).await
    }
    pub async fn read(&self, client: &str, key: &str, token: u64) -> Reply {
        match &self.resource {
            Some(r) => r.read(client, key, token).await,
            None => no_resource(),
        }
    }
    pub async fn write(&self, client: &str, key: &str, token: u64, value: i64) -> Reply {
        match &self.resource {
            Some(r) => r.write(client, key, token, value).await,
            None => no_resource(),
        }
    }
    /// Hands the lock client the board of client stalls ([`LockClient::watch_stalls`]).
    pub fn watch_stalls(&self, pauses: &Arc<PauseBoard>) {
        self.lock.watch_stalls(pauses.clone());
    }
    /// Process `client` crashed ([`LockClient::crashed`]).
    pub fn crashed(&self, client: &str) {
        self.lock.crashed(client);
    }
    /// Whether the adapter has a fenced resource (the counter workload's register).
    pub fn has_resource(&self) -> bool {
        self.resource.is_some()
    }
    /// How a lock op goes over the wire (the probe's transcript).
    pub fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        self.lock.lock_wire(op, lock)
    }
    /// How a resource op goes over the wire (the probe's transcript).
    pub fn resource_wire(&self, op: &str, key: &str) -> Wire {
        match &self.resource {
            Some(r) => r.resource_wire(op, key),
            None => Wire::plain(op, key),
        }
    }
    pub async fn inspect(&self, key: &str) -> Reply {
        match &self.resource {
            Some(r) => r.inspect(key).await,
            None => no_resource(),
        }
    }
}

/// Only the counter workload touches the resource, and it always has one: nothing was sent.
fn no_resource() -> Reply {
    Reply::Fail("no fenced resource for this workload".into())
}
