//! The two seams a lock service is driven through, each answering every call with a [`Reply`]
//! of the same meaning whatever the service:
//!
//! - [`LockClient`]: acquire, renew, release.
//! - [`FencedResource`]: read, write, inspect: the register the lock guards, fenced by its
//!   tokens. A service may be its own resource (etcd), or the resource may be another service
//!   (lockpick's fenced store) reached through the reference protocol.
//!
//! A service's file implements them (client.rs, etcd.rs, template.rs) and says how to start and
//! reach the service in its [`Service`](crate::Service) descriptor.

use crate::pause::PauseBoard;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// An adapter's answer to one op, in history terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Took effect; the response body.
    Ok(serde_json::Value),
    /// Surely did not take effect; why.
    Fail(String),
    /// May or may not have taken effect; why.
    Info(String),
}

/// Why an op of a native adapter did not take effect, or may have: the answer in history
/// terms, before it becomes a [`Reply`].
pub(crate) enum Failure {
    /// Surely not applied (a refused connection, an error the service answers before it runs
    /// anything; for a session's own lock, surely not held any more).
    Definite(String),
    /// May have been applied.
    Indefinite(String),
}

impl From<Failure> for Reply {
    fn from(f: Failure) -> Reply {
        match f {
            Failure::Definite(e) => Reply::Fail(e),
            Failure::Indefinite(e) => Reply::Info(e),
        }
    }
}

/// What an ok acquire gave its holder: what it renews, releases and fences with. Services
/// differ in what a grant carries, and the history says which (docs/history.md): a fencing
/// token (a number the service guarantees to increase from grant to grant of a lock: lockd,
/// etcd's create_revision, ZooKeeper's czxid), an identity with no order (a Redis lock value:
/// it names the grant, it fences nothing), both, or neither (the session itself is the grant).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// The fencing token, if the service gives one.
    pub token: Option<u64>,
    /// The service's own name for the grant, when the token is not it.
    pub id: Option<String>,
}

impl Grant {
    /// A grant named by its fencing token alone.
    pub fn token(token: u64) -> Grant {
        Grant {
            token: Some(token),
            id: None,
        }
    }

    /// What an ok acquire's answer names: `token` (a number) and `grant` (a string).
    pub fn from_answer(body: &serde_json::Value) -> Grant {
        Grant {
            token: body.get("token").and_then(serde_json::Value::as_u64),
            id: body
                .get(history::GRANT)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
        }
    }

    /// The token to send to a service whose every grant carries one (their grants without
    /// one are never held: see [`UNREAD`]); 0 for a grant that has none.
    pub fn fence(&self) -> u64 {
        self.token.unwrap_or(0)
    }
}

/// Which kind of grant a service gives ([`Grant`]), so the workloads know what they can do
/// with it: only grants with a fencing token can guard the counter's fenced register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokens {
    /// Every grant carries a fencing token.
    Fencing,
    /// Grants carry no fencing token (an identity at most).
    None,
}

/// The key an adapter adds to an ok acquire whose token it could not read: the answer,
/// abridged. The grant stays a grant; the probe and the run's watch of unexpected answers say
/// what came instead of a token.
pub const UNREAD: &str = "unread";

/// How one op goes over the wire, for the probe's transcript and its one-line failures.
#[derive(Debug, Clone, PartialEq)]
pub struct Wire {
    /// The request (`POST /v1/locks/L0/acquire`).
    pub request: String,
    /// The answer that means it took effect (`200`).
    pub ok: String,
    /// The answer that means the service refused (`409`).
    pub refused: String,
}

impl Wire {
    /// A request the adapter does not describe: the op and its lock or key.
    pub fn plain(op: &str, target: &str) -> Wire {
        Wire {
            request: format!("{op} {target}"),
            ok: "ok".into(),
            refused: "a refusal".into(),
        }
    }
}

/// A boxed future: the traits below are called through `dyn`, one per service.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The lock: `client` is the calling process's id (`p3`), `lock` the lock's name. An ok acquire
/// or renew answers `{"token", "ttl_ms"}` (or `"grant"` instead of or beside `"token"`: see
/// [`Grant`]; plus the evidence its service declares, such as `lease_last_ok_ns`), an ok
/// release `{}`.
pub trait LockClient: Send + Sync {
    /// Asks for `lock` with a lease of `ttl_ms`, waiting up to `wait_ms` if it is held.
    fn acquire<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> BoxFuture<'a, Reply>;
    /// [`LockClient::acquire`] by a client that a client-pause may stall while it waits: a
    /// client that works in the background while an acquire waits (etcd's lease keepalives)
    /// does nothing while `pauses` says it is stalled, as a paused process would. By default,
    /// plain `acquire`: nothing happens in the background.
    fn acquire_stallable<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: &'a PauseBoard,
    ) -> BoxFuture<'a, Reply> {
        let _ = pauses;
        self.acquire(client, lock, ttl_ms, wait_ms)
    }
    /// Extends the lease of `grant` to end `ttl_ms` from now.
    fn renew<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Reply>;
    /// Gives the lock held by `grant` back.
    fn release<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
    ) -> BoxFuture<'a, Reply>;
    /// How `op` (`acquire`, `renew`, `release`) on `lock` goes over the wire, as the probe
    /// names it.
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        Wire::plain(op, lock)
    }
    /// Hands the client the board of client stalls, once, before the workers start. A client
    /// whose library works on its own between ops (a ZooKeeper session's heartbeats) stops
    /// that work while the board says its process is stalled, as a paused process would. By
    /// default nothing: the other clients send nothing between ops.
    fn watch_stalls(&self, pauses: Arc<PauseBoard>) {
        let _ = pauses;
    }
    /// Process `client` crashed (an op of its went unanswered): it never acts again, and what
    /// its library held for it goes as a dead process's would (docs/checkers.md, model item
    /// 9): a PostgreSQL session's connection closes, a ZooKeeper session is closed. By default
    /// nothing: the other clients hold nothing between ops.
    fn crashed(&self, client: &str) {
        let _ = client;
    }
}

/// The [`LockClient`] methods `acquire`, `renew` and `release` of a type whose inherent async
/// methods of the same names and arguments do the work: each boxes the inherent call. Used
/// inside an `impl LockClient for T` block, which adds what differs (`lock_wire`, overrides).
macro_rules! boxed_lock_ops {
    ($t:ty) => {
        fn acquire<'a>(
            &'a self,
            client: &'a str,
            lock: &'a str,
            ttl_ms: u64,
            wait_ms: u64,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(<$t>::acquire(self, client, lock, ttl_ms, wait_ms))
        }
        // These services' grants all carry a token (one without is never held).
        fn renew<'a>(
            &'a self,
            client: &'a str,
            lock: &'a str,
            grant: &'a $crate::api::Grant,
            ttl_ms: u64,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(<$t>::renew(self, client, lock, grant.fence(), ttl_ms))
        }
        fn release<'a>(
            &'a self,
            client: &'a str,
            lock: &'a str,
            grant: &'a $crate::api::Grant,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(<$t>::release(self, client, lock, grant.fence()))
        }
    };
}
pub(crate) use boxed_lock_ops;

/// The [`LockClient`] methods `acquire` and `acquire_stallable` of a type whose inherent
/// `acquire_waiting(client, lock, ttl_ms, wait_ms, pauses)` tries until granted or the wait is
/// over, trying nothing while `pauses` says the client is stalled (a client that polls, as
/// Redis's do): both are that loop, with and without the board.
macro_rules! waiting_acquire_ops {
    () => {
        fn acquire<'a>(
            &'a self,
            client: &'a str,
            lock: &'a str,
            ttl_ms: u64,
            wait_ms: u64,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(self.acquire_waiting(client, lock, ttl_ms, wait_ms, None))
        }
        fn acquire_stallable<'a>(
            &'a self,
            client: &'a str,
            lock: &'a str,
            ttl_ms: u64,
            wait_ms: u64,
            pauses: &'a $crate::pause::PauseBoard,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(self.acquire_waiting(client, lock, ttl_ms, wait_ms, Some(pauses)))
        }
    };
}
pub(crate) use waiting_acquire_ops;

/// [`boxed_lock_ops`] for [`FencedResource`]: `read`, `write` and `inspect`.
macro_rules! boxed_resource_ops {
    ($t:ty) => {
        fn read<'a>(
            &'a self,
            client: &'a str,
            key: &'a str,
            token: u64,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(<$t>::read(self, client, key, token))
        }
        fn write<'a>(
            &'a self,
            client: &'a str,
            key: &'a str,
            token: u64,
            value: i64,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(<$t>::write(self, client, key, token, value))
        }
        fn inspect<'a>(&'a self, key: &'a str) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            Box::pin(<$t>::inspect(self, key))
        }
    };
}
pub(crate) use boxed_resource_ops;

/// The resource the lock protects: a register per key, fenced by the lock's tokens. An ok read
/// answers `{"value"}`, an ok write may carry `{"seq"}` (its place in the store's order); both
/// may say the `fence` they were judged against.
pub trait FencedResource: Send + Sync {
    /// Reads `key` with `token` (a fenced read: it may raise the fence).
    fn read<'a>(&'a self, client: &'a str, key: &'a str, token: u64) -> BoxFuture<'a, Reply>;
    /// Writes `value` to `key` with `token`, refused if the fence is past it.
    fn write<'a>(
        &'a self,
        client: &'a str,
        key: &'a str,
        token: u64,
        value: i64,
    ) -> BoxFuture<'a, Reply>;
    /// The unfenced closing read, after every lease has lapsed: it must not move the fence.
    fn inspect<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Reply>;
    /// How `op` (`read`, `write`) on `key` goes over the wire, as the probe names it.
    fn resource_wire(&self, op: &str, key: &str) -> Wire {
        Wire::plain(op, key)
    }
}

/// What an adapter keeps between one client's ops (its connection, its session, the master it
/// was told of, its leases): an entry a key, made on first use and forgotten when it fails so
/// the next op makes it anew. Bounded: clients come and go as crashed processes are
/// renumbered, so past `max` entries the table starts over (a forgotten entry is made anew).
pub(crate) struct Kept<K, V> {
    max: usize,
    all: std::sync::Mutex<std::collections::HashMap<K, V>>,
}

impl<K: Eq + std::hash::Hash, V> Kept<K, V> {
    pub(crate) fn new(max: usize) -> Self {
        assert!(
            max > 0,
            "a table that keeps nothing starts over on every insert"
        );
        Kept {
            max,
            all: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The table itself; a holder that panicked left it consistent (every change is one call).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<K, V>> {
        self.all.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of `key`, if one is kept.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + std::hash::Hash + ?Sized,
        V: Clone,
    {
        self.lock().get(key).cloned()
    }

    /// Keeps `value` as `key`'s entry, starting the table over first if it is full.
    pub(crate) fn keep(&self, key: K, value: V) {
        let mut all = self.lock();
        if all.len() >= self.max {
            all.clear();
        }
        all.insert(key, value);
    }

    /// Forgets `key`'s entry (dropped here: a session's connection closes with it).
    pub(crate) fn forget<Q>(&self, key: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + std::hash::Hash + ?Sized,
    {
        self.lock().remove(key);
    }

    /// `r`, after which the entry of a client whose op failed is forgotten: its next op
    /// starts afresh (connects, opens a session, asks for the master again).
    pub(crate) fn forget_if_failed<Q, T, E>(&self, key: &Q, r: Result<T, E>) -> Result<T, E>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + std::hash::Hash + ?Sized,
    {
        if r.is_err() {
            self.forget(key);
        }
        r
    }
}
