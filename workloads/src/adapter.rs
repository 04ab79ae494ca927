//! [`Adapter`]: the lock-service protocols a workload can speak, behind one set of calls.

use crate::client::{RefClient, Reply};
use crate::etcd::EtcdClient;
use crate::template::TemplateClient;
use std::sync::Arc;

/// One protocol's client. Every call answers a [`Reply`] (ok / fail / info) with the same
/// meaning whatever the service: the workloads and the history never see protocol details.
#[derive(Clone)]
pub enum Adapter {
    /// The reference protocol (lockd and anything that speaks it).
    Reference(RefClient),
    /// etcd v3 over its JSON gateway; the store is etcd itself, fenced by a txn.
    Etcd(Arc<EtcdClient>),
    /// Any HTTP lock API described in a config file: `(lock service, store)`. Store calls go to
    /// the store's own URL when it has one, described by the same file.
    Template(Arc<TemplateClient>, Option<Arc<TemplateClient>>),
}

impl Adapter {
    pub async fn acquire(&self, client: &str, lock: &str, ttl_ms: u64, wait_ms: u64) -> Reply {
        match self {
            Adapter::Reference(c) => c.acquire(client, lock, ttl_ms, wait_ms).await,
            Adapter::Etcd(c) => c.acquire(client, lock, ttl_ms, wait_ms).await,
            Adapter::Template(c, _) => c.acquire(client, lock, ttl_ms, wait_ms).await,
        }
    }
    pub async fn renew(&self, client: &str, lock: &str, token: u64, ttl_ms: u64) -> Reply {
        match self {
            Adapter::Reference(c) => c.renew(client, lock, token, ttl_ms).await,
            Adapter::Etcd(c) => c.renew(client, lock, token, ttl_ms).await,
            Adapter::Template(c, _) => c.renew(client, lock, token, ttl_ms).await,
        }
    }
    pub async fn release(&self, client: &str, lock: &str, token: u64) -> Reply {
        match self {
            Adapter::Reference(c) => c.release(client, lock, token).await,
            Adapter::Etcd(c) => c.release(client, lock, token).await,
            Adapter::Template(c, _) => c.release(client, lock, token).await,
        }
    }
    pub async fn read(&self, client: &str, key: &str, token: u64) -> Reply {
        match self {
            Adapter::Reference(c) => c.read(client, key, token).await,
            Adapter::Etcd(c) => c.read(client, key, token).await,
            // The store may be a second service described by the same file.
            Adapter::Template(c, store) => {
                store.as_ref().unwrap_or(c).read(client, key, token).await
            }
        }
    }
    pub async fn write(&self, client: &str, key: &str, token: u64, value: i64) -> Reply {
        match self {
            Adapter::Reference(c) => c.write(client, key, token, value).await,
            Adapter::Etcd(c) => c.write(client, key, token, value).await,
            Adapter::Template(c, store) => {
                store
                    .as_ref()
                    .unwrap_or(c)
                    .write(client, key, token, value)
                    .await
            }
        }
    }
    pub async fn inspect(&self, key: &str) -> Reply {
        match self {
            Adapter::Reference(c) => c.inspect(key).await,
            Adapter::Etcd(c) => c.inspect(key).await,
            Adapter::Template(c, store) => store.as_ref().unwrap_or(c).inspect(key).await,
        }
    }
}
