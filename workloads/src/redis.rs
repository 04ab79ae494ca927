//! `--adapter redis`: a lock on one Redis server, taken the way the common clients take it
//! (redis-py's `Lock`, Redisson, node-redlock on a single node):
//!
//! - acquire: `SET key value NX PX ttl` with a value drawn at random for each acquire; a
//!   client that may wait polls every [`POLL_MS`] until its wait is over, as redis-py's
//!   `Lock.acquire` does. The value names the grant (`grant` in the history); it is no order.
//! - renew: a script that `PEXPIRE`s the key only while it still holds the value;
//!   release: a script that `DEL`s it only while it still holds the value.
//! - `--adapter-opt fence=counter`: the acquire is a script that also `INCR`s a counter beside
//!   the key when the `SET` succeeds, and the counter is the grant's fencing token (the usual
//!   bolted-on token: on the same server, as durable as the lock itself).
//! - `--adapter-opt persistence=...`: how the server keeps its keys across a restart (none,
//!   snapshots every second, an append-only file synced every second or on every write).
//!
//! Every answer is bounded by the op timeout; a client never retries on its own (a retry
//! hides the fault it answers). Evidence on each grant: the server that answered and its
//! replication role and offset right after the grant (`redis_node`, `redis_role`,
//! `redis_offset`). Readiness is `PING` answered `+PONG`; no HTTP anywhere.

use crate::api::{Failure, Grant, Kept, LockClient, Reply, Tokens, Wire};
use crate::pause::PauseBoard;
use crate::service::{
    host_port, Connect, ConnectError, Launch, Service, ServiceOption, ServiceOptions,
    Settings,
};
use crate::Adapter;
use history::reason::with_detail;
use history::Evidence;
use nemesis::Readiness;
use rand::Rng;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often a waiting acquire tries again (redis-py's `Lock` sleeps 0.1 s between tries).
const POLL_MS: u64 = 100;
/// Connections kept, one per client id; past this the oldest are dropped (clients come and go
/// as crashed processes are renumbered).
const CONNECTIONS_MAX: usize = 1024;

/// `SET` the key if absent and, only then, count the grant: the fencing token.
const ACQUIRE_FENCED: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
     return redis.call('INCR', KEYS[2]) else return false end";
/// Extend the lease only while the key still holds this grant's value.
pub(crate) const RENEW: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
/// Delete the key only while it still holds this grant's value.
pub(crate) const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) else return 0 end";

/// Errors Redis answers before it runs a command, while it cannot serve one (a replica, a
/// server still loading its data, a master without its replicas): definite refusals.
const UNAVAILABLE: &[&str] = &["READONLY", "LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN", "NOREPLICAS"];

/// One server's lock client: a connection per client id, made on first use and dropped when
/// it fails or the server closes it, so a client's next op connects anew.
pub struct RedisLock {
    client: redis::Client,
    /// `host:port`, as the evidence names the server.
    node: String,
    op_timeout: Duration,
    fenced: bool,
    connections: Kept<String, Conn>,
}

/// A client's connection, and whether the server has closed it: a request is never sent on a
/// connection known closed (it would fail without leaving the client, yet read as a lost
/// answer), so an op after a server's death is a refused connection, surely not applied.
#[derive(Clone)]
struct Conn {
    conn: redis::aio::MultiplexedConnection,
    closed: Arc<AtomicBool>,
}


impl RedisLock {
    pub fn new(addr: &str, op_timeout: Duration, fenced: bool) -> Result<RedisLock, String> {
        // RESP3: the client library tells of a closed connection only on it.
        let client = redis::Client::open(format!("redis://{addr}/?protocol=resp3"))
            .map_err(|e| format!("{addr}: {e}"))?;
        Ok(RedisLock {
            client,
            node: addr.to_string(),
            op_timeout,
            fenced,
            connections: Kept::new(CONNECTIONS_MAX),
        })
    }

    /// The client of the server at `url` (`redis://host:port` or `host:port`).
    pub(crate) fn at(url: &str, op_timeout: Duration, fenced: bool) -> Result<RedisLock, String> {
        RedisLock::new(&addr_of(url)?, op_timeout, fenced)
    }

    /// Names the server `name` in the evidence (`redis_node`) instead of its address: a
    /// deployment's clients may reach it at an address of the harness's own (netns's proxy).
    pub(crate) fn named(mut self, name: &str) -> RedisLock {
        self.node = name.to_string();
        self
    }

    pub(crate) fn key(lock: &str) -> String {
        format!("lockpick:lock:{lock}")
    }

    fn fence_key(lock: &str) -> String {
        format!("lockpick:fence:{lock}")
    }

    /// `client`'s connection, made now if it has none. A connection that cannot be made was
    /// never used: nothing was sent.
    async fn connection(
        &self,
        client: &str,
    ) -> Result<redis::aio::MultiplexedConnection, Failure> {
        {
            let mut all = self.connections.lock();
            match all.get(client) {
                Some(c) if !c.closed.load(Ordering::SeqCst) => return Ok(c.conn.clone()),
                Some(_) => {
                    all.remove(client);
                }
                None => {}
            }
        }
        let closed = Arc::new(AtomicBool::new(false));
        let seen = closed.clone();
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.op_timeout))
            .set_response_timeout(None)
            .set_push_sender(move |info: redis::PushInfo| {
                if info.kind == redis::PushKind::Disconnection {
                    seen.store(true, Ordering::SeqCst);
                }
                Ok::<(), std::convert::Infallible>(())
            });
        let made = tokio::time::timeout(
            self.op_timeout,
            self.client.get_multiplexed_async_connection_with_config(&config),
        )
        .await;
        let conn = match made {
            Err(_) => return Err(Failure::Definite("connect: timeout".into())),
            Ok(Err(e)) if e.is_connection_refusal() => {
                return Err(Failure::Definite(with_detail("connect: refused", &e.to_string())))
            }
            Ok(Err(e)) => {
                return Err(Failure::Definite(with_detail("connect", &e.to_string())));
            }
            Ok(Ok(c)) => c,
        };
        let kept = Conn {
            conn: conn.clone(),
            closed,
        };
        self.connections.keep(client.to_string(), kept);
        Ok(conn)
    }

    /// Sends `pipe` on `client`'s connection within the op timeout. A transport failure drops
    /// the connection: the answer is lost, so whether it took effect is unknown.
    pub(crate) async fn send(
        &self,
        client: &str,
        pipe: &redis::Pipeline,
    ) -> Result<Vec<redis::Value>, Failure> {
        let mut conn = self.connection(client).await?;
        let sent = tokio::time::timeout(self.op_timeout, pipe.query_async(&mut conn)).await;
        let failure = match sent {
            Ok(Ok(values)) => return Ok(values),
            Err(_) => Failure::Indefinite("timeout".into()),
            Ok(Err(e)) => match e.code() {
                Some(code) if UNAVAILABLE.contains(&code) => {
                    return Err(Failure::Definite(with_detail(
                        &format!("unavailable: {code}"),
                        e.detail().unwrap_or(""),
                    )))
                }
                // An error Redis answered that this adapter does not expect: counted as
                // not understood (a script may have run in part).
                Some(_) => Failure::Indefinite(with_detail("bad-body", &e.to_string())),
                None => Failure::Indefinite(with_detail("transport", &e.to_string())),
            },
        };
        self.connections.forget(client);
        Err(failure)
    }

    /// One try: the grant's answer, `None` if the lock is held.
    pub(crate) async fn try_acquire(
        &self,
        client: &str,
        lock: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<Option<Value>, Failure> {
        let mut pipe = redis::pipe();
        if self.fenced {
            pipe.cmd("EVAL")
                .arg(ACQUIRE_FENCED)
                .arg(2)
                .arg(Self::key(lock))
                .arg(Self::fence_key(lock))
                .arg(value)
                .arg(ttl_ms);
        } else {
            pipe.cmd("SET")
                .arg(Self::key(lock))
                .arg(value)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms);
        }
        // Right after the grant, on the same connection: the server's role and offset.
        pipe.cmd("INFO").arg("replication");
        let answers = self.send(client, &pipe).await?;
        let (granted, info) = match answers.as_slice() {
            [g, i] => (g, i),
            _ => return Err(Failure::Indefinite("bad-body; a pipeline answer short".into())),
        };
        let token = match granted {
            redis::Value::Nil => return Ok(None),
            redis::Value::Okay => None,
            redis::Value::Int(n) if self.fenced && *n > 0 => Some(*n as u64),
            other => {
                return Err(Failure::Indefinite(with_detail(
                    "bad-body",
                    &format!("{other:?}"),
                )))
            }
        };
        let mut body = Map::new();
        if let Some(t) = token {
            body.insert("token".into(), json!(t));
        }
        body.insert(history::GRANT.into(), json!(value));
        body.insert("ttl_ms".into(), json!(ttl_ms));
        let mut evidence = RedisEvidence {
            redis_node: Some(self.node.clone()),
            ..Default::default()
        };
        let info = match info {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::VerbatimString { text, .. } => text.clone(),
            _ => String::new(),
        };
        for line in info.lines() {
            if let Some(role) = line.strip_prefix("role:") {
                evidence.redis_role = Some(role.trim().to_string());
            }
            if let Some(o) = line.strip_prefix("master_repl_offset:") {
                if let Ok(o) = o.trim().parse::<u64>() {
                    evidence.redis_offset = Some(o);
                }
            }
        }
        evidence.write_into(&mut body);
        Ok(Some(Value::Object(body)))
    }

    /// Tries until granted or `wait_ms` is over; a stalled client does not try while its
    /// stall lasts (the paused program polls nothing).
    async fn acquire_waiting(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        let value = format!("{:032x}", rand::rng().random::<u128>());
        crate::pause::poll_for_grant(client, wait_ms, POLL_MS, pauses, || {
            self.try_acquire(client, lock, &value, ttl_ms)
        })
        .await
    }

    /// Runs `script` on the grant's key with its value and `extra`; 1 means it took effect.
    pub(crate) async fn compare(
        &self,
        client: &str,
        lock: &str,
        grant: &Grant,
        script: &str,
        extra: Option<u64>,
    ) -> Result<bool, Failure> {
        let Some(value) = &grant.id else {
            // Every grant of this adapter has its value: one without was never ours.
            return Err(Failure::Definite("not-holder; no grant value".into()));
        };
        let mut pipe = redis::pipe();
        let cmd = pipe.cmd("EVAL").arg(script).arg(1).arg(Self::key(lock)).arg(value);
        if let Some(e) = extra {
            cmd.arg(e);
        }
        match self.send(client, &pipe).await?.as_slice() {
            [redis::Value::Int(1)] => Ok(true),
            [redis::Value::Int(0)] => Ok(false),
            other => Err(Failure::Indefinite(with_detail("bad-body", &format!("{other:?}")))),
        }
    }
}

/// A compare-and-`PEXPIRE`'s answer as a renew's reply: 1 renewed, 0 not this grant's lock.
pub(crate) fn renew_reply(r: Result<bool, Failure>, ttl_ms: u64) -> Reply {
    match r {
        Ok(true) => Reply::Ok(json!({ "ttl_ms": ttl_ms })),
        Ok(false) => Reply::Fail("not-holder".into()),
        Err(f) => f.into(),
    }
}

/// A compare-and-`DEL`'s answer as a release's reply: 1 released, 0 not this grant's lock.
pub(crate) fn release_reply(r: Result<bool, Failure>) -> Reply {
    match r {
        Ok(true) => Reply::Ok(json!({})),
        Ok(false) => Reply::Fail("not-holder".into()),
        Err(f) => f.into(),
    }
}

/// The [`LockClient`] methods `renew` and `release` of a type whose inherent
/// `compare(client, lock, grant, script, extra)` runs a compare script where the lock is (the
/// one server, or the master the sentinels name): renew is the compare-and-`PEXPIRE` answered
/// by [`renew_reply`], release the compare-and-`DEL` answered by [`release_reply`].
macro_rules! compare_lock_ops {
    () => {
        fn renew<'a>(
            &'a self,
            client: &'a str,
            lock: &'a str,
            grant: &'a $crate::api::Grant,
            ttl_ms: u64,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            let script = $crate::redis::RENEW;
            Box::pin(async move {
                let r = self.compare(client, lock, grant, script, Some(ttl_ms)).await;
                $crate::redis::renew_reply(r, ttl_ms)
            })
        }
        fn release<'a>(
            &'a self,
            client: &'a str,
            lock: &'a str,
            grant: &'a $crate::api::Grant,
        ) -> $crate::api::BoxFuture<'a, $crate::api::Reply> {
            let script = $crate::redis::RELEASE;
            Box::pin(async move {
                let r = self.compare(client, lock, grant, script, None).await;
                $crate::redis::release_reply(r)
            })
        }
    };
}
pub(crate) use compare_lock_ops;

impl LockClient for RedisLock {
    crate::api::waiting_acquire_ops!();
    compare_lock_ops!();
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        let key = Self::key(lock);
        let (request, ok, refused) = match (op, self.fenced) {
            ("acquire", false) => (format!("SET {key} <value> NX PX <ttl>"), "OK", "nil"),
            ("acquire", true) => (format!("EVAL <set-nx-then-incr> {key}"), "a token", "nil"),
            ("renew", _) => (format!("EVAL <compare-and-pexpire> {key}"), "1", "0"),
            _ => (format!("EVAL <compare-and-del> {key}"), "1", "0"),
        };
        Wire {
            request,
            ok: ok.into(),
            refused: refused.into(),
        }
    }
}

/// `host:port` of a node's URL, as the redis crate connects to it.
fn addr_of(url: &str) -> Result<String, String> {
    let (host, port) = host_port(url).ok_or_else(|| format!("{url}: no host and port"))?;
    Ok(match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    })
}

history::evidence! {
    /// What each grant carries (docs/history.md): the server that answered and its
    /// replication state right after the grant. Kept, not judged.
    pub(crate) struct RedisEvidence for "redis" {
        /// `host:port`, or the node's name under Sentinel (`n1`...).
        redis_node: String,
        /// `INFO replication`'s `role`.
        redis_role: String,
        /// `INFO replication`'s `master_repl_offset`.
        redis_offset: u64,
    }
}

/// The evidence each grant carries.
const EVIDENCE: &[&[history::Field]] = &[RedisEvidence::FIELDS];

const OPTIONS: &[ServiceOption] = &[
    ServiceOption {
        name: "persistence",
        values: &["none", "rdb", "aof-everysec", "aof-always"],
        help: "how the server keeps keys across a restart: not at all, a snapshot every \
               second, an append-only file synced every second, or on every write",
    },
    ServiceOption {
        name: "fence",
        values: &["none", "counter"],
        help: "none: the lock value alone (redis-py's Lock); counter: each grant also INCRs a \
               counter on the same server, its fencing token",
    },
];

/// A single Redis server (`redis-server` from Debian's redis-server package), started by
/// lockpick with the persistence asked for, fresh data for each run.
pub struct Redis;

impl Service for Redis {
    fn name(&self) -> &'static str {
        "redis"
    }
    fn about(&self) -> &'static str {
        "one Redis server, locked as redis-py's Lock does (SET NX PX with a random value, compare-and-PEXPIRE and compare-and-DEL scripts); lockpick starts Debian's `redis-server`"
    }
    fn launch(&self, l: &Launch) -> Option<Vec<String>> {
        let mut argv: Vec<String> = [
            "redis-server",
            "--port",
            "{port}",
            "--bind",
            "{host}",
            // Reached on a namespace's address without a password: a test server.
            "--protected-mode",
            "no",
            "--dir",
            "{data_dir}",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let persistence: &[&str] = match l.options.get("persistence") {
            "rdb" => &["--save", "1 1", "--appendonly", "no"],
            "aof-everysec" => &["--save", "", "--appendonly", "yes", "--appendfsync", "everysec"],
            "aof-always" => &["--save", "", "--appendonly", "yes", "--appendfsync", "always"],
            _ => &["--save", "", "--appendonly", "no"],
        };
        argv.extend(persistence.iter().map(|a| a.to_string()));
        Some(argv)
    }
    fn url_schemes(&self) -> &'static [&'static str] {
        &["redis"]
    }
    fn readiness(&self) -> Readiness {
        Readiness::Exchange {
            name: "PING",
            send: b"PING\r\n".to_vec(),
            expect: b"+PONG".to_vec(),
        }
    }
    fn clock_faults(&self) -> Result<(), &'static str> {
        Err("libfaketime hangs Debian's redis-server at start-up (its allocator reads the clock \
             before libfaketime is ready)")
    }
    fn tokens(&self, options: &ServiceOptions) -> Tokens {
        match options.get("fence") {
            "counter" => Tokens::Fencing,
            _ => Tokens::None,
        }
    }
    fn options(&self) -> &'static [ServiceOption] {
        OPTIONS
    }
    fn fencing_hint(&self) -> Option<&'static str> {
        Some("--adapter-opt fence=counter")
    }
    fn holds_several_locks(&self, _options: &ServiceOptions) -> bool {
        // Each grant is its own key and value (and counter, with fence=counter); renew and
        // release name the value: a client's grants are independent.
        true
    }
    fn program(&self) -> Option<(&'static str, &'static str)> {
        Some(("redis-server", "redis-server"))
    }
    fn check(&self, s: &Settings) -> Result<(), String> {
        if s.nodes > 1 {
            return Err(format!(
                "--nodes {}: --adapter redis is one server (its replicas and Redlock's \
                 independent masters are not this adapter)",
                s.nodes
            ));
        }
        Ok(())
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let refused = ConnectError::refused_by(self.name());
        let fenced = c.options.own.get("fence") == "counter";
        let lock = Arc::new(RedisLock::at(c.url, c.op_timeout, fenced).map_err(refused)?);
        c.beside_store(lock, EVIDENCE)
    }
}
