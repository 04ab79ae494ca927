//! `--adapter zookeeper`: ZooKeeper's lock recipe, taken as Curator's `InterProcessMutex` and
//! kazoo's `Lock` take it, on one standalone server or an ensemble of `--nodes` members
//! (Debian's `zookeeper` package) that lockpick starts, pauses, kills and restarts.
//!
//! - An ensemble's members are configured from `{peer_list}` (`server.N=host:quorum:election`)
//!   with `myid` their node's number; a member is ready once it answers a session, which it
//!   does only after it joined a quorum. Each client's connect string is every member, its
//!   own node first: its session starts there and moves to the next member (the relay's next
//!   connection) when the connection breaks, and each grant names the member it was answered
//!   on (`zk_server`).
//! - Each client process (`p3`) has one ZooKeeper session, made at its first acquire with the
//!   acquire's ttl as the session timeout (the server clamps it to its own bounds; the timeout
//!   it agreed to is recorded as `zk_timeout_ms`). The session is the grant's lease: the server
//!   ends it, and its nodes with it, once it has heard nothing from the client for that long.
//! - acquire: create `/lockpick/<lock>/lock-` ephemeral and sequential, list the lock's
//!   children; the lowest sequence holds. Otherwise watch the next lower node and look again
//!   when it changes, until the wait is over; then delete our node and answer `held`. The
//!   token is the lock node's `czxid` (the zxid of its creation: ZooKeeper's zxids only
//!   increase, so each grant of a lock has a larger one than the grant before it).
//! - renew: nothing is sent to extend anything (the session's heartbeats do that on their
//!   own); it is what the holder's client would tell it: lost, if the session's state
//!   listener has reported a disconnection, an expiry or a close since the grant (Curator's
//!   advice: on `SUSPENDED` or `LOST`, assume the lock is gone), else whether our node is
//!   still there.
//! - release: delete our node.
//!
//! A client-pause stalls the whole client process: its session's heartbeats too. The client
//! library sends them on its own, so each session talks to its server through a relay of this
//! adapter's own on loopback, which carries nothing either way while the pause board says the
//! process is stalled (the state listener, likewise, learns nothing until the stall ends). A
//! holder stalled past its session timeout thus loses its session on the server, exactly as a
//! paused JVM would, and learns it when it wakes.
//!
//! Every call is bounded by the op timeout, and nothing is retried (the library reconnects a
//! session's connection on its own, as every ZooKeeper client does; a request whose connection
//! broke is answered with that loss, never sent again).

use crate::api::{BoxFuture, Grant, Kept, LockClient, Reply, Wire};
use crate::pause::PauseBoard;
use crate::service::{host_port, Clock, Connect, ConnectError, Launch, Service, Settings};
use crate::Adapter;
use history::reason::with_detail;
use history::{Evidence, Hold, HoldEvidence};
use nemesis::Readiness;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;
use zookeeper_client as zk;

/// Where every lock's nodes live: `/lockpick/<lock>/lock-0000000007`.
const ROOT: &str = "/lockpick";
/// The name a lock node is created with; the server appends its sequence.
const PREFIX: &str = "lock-";
/// The server's classes (the jar's manifest names its dependencies, all from Debian's
/// packages) and a logger that writes to stderr, the node's log in the run directory.
const JARS: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-simple.jar",
];
/// Sessions kept, one per client process; past this they are all dropped (processes are
/// renumbered after every indeterminate answer).
const SESSIONS_MAX: usize = 1024;
/// Bad session states remembered per session (it is dropped at the first one a holder hears
/// of, so a handful is plenty).
const EVENTS_MAX: usize = 16;
/// Grants remembered per session: one is held at a time; old ones are dropped past this.
const GRANTS_MAX: usize = 64;
/// Bounds a waiting acquire's rounds (list, then watch): each ends at a change of the node
/// watched or at the wait's end.
const ROUNDS_MAX: usize = 10_000;
/// Bounds how many stalls in a row a relay or listener sits out (each is bounded itself).
const STALLS_MAX: usize = 64;

/// A stalled process sends and hears nothing: waits while the board says `client` is stalled.
#[derive(Clone)]
struct Stalls {
    board: Arc<OnceLock<Arc<PauseBoard>>>,
    client: String,
}

impl Stalls {
    async fn sit_out(&self) {
        for _ in 0..STALLS_MAX {
            match self.board.get().and_then(|b| b.stalled_until(&self.client)) {
                Some(until) => tokio::time::sleep_until(until.into()).await,
                None => return,
            }
        }
    }
}

/// One client process's session: the library's client, what its state listener heard, and
/// the nodes granted on it.
struct Session {
    client: zk::Client,
    /// The session id as ZooKeeper prints it (`0x...`).
    id: String,
    /// The timeout the server agreed to.
    timeout_ms: u64,
    /// States that end a holder's belief (disconnected, expired, closed), each with the
    /// history time the listener heard of it.
    events: Arc<Mutex<Vec<(zk::SessionState, u64)>>>,
    servers: Arc<Vec<Server>>,
    /// The server the session's connection is on now (a position in `servers`).
    current: Arc<std::sync::atomic::AtomicUsize>,
    /// Our lock nodes' paths, each with the history time it was granted.
    grants: Kept<String, u64>,
    /// The listener and the relay's accept loop. A relay's open connections end on their own
    /// once the library closes its side (after the session's close request went through).
    tasks: Vec<AbortHandle>,
}

impl Drop for Session {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn lock_of<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A ZooKeeper call's failure as a reason a reader can act on: the recipe's step and
/// ZooKeeper's error kind (`list: connection-loss`), with ZooKeeper's message as the detail. The
/// step alone (`list`) said where the recipe stopped but not why.
fn zk_reason(step: &str, e: &zk::Error) -> String {
    // The variant's name, as its Debug form begins (`ConnectionLoss`, `Other(..)`).
    let debug = format!("{e:?}");
    let variant = debug
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    let mut kind = String::with_capacity(variant.len() + 4);
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                kind.push('-');
            }
            kind.push(c.to_ascii_lowercase());
        } else {
            kind.push(c);
        }
    }
    if kind.is_empty() {
        return with_detail(step, &e.to_string());
    }
    let said = e.to_string();
    with_detail(&format!("{step}: {}", custom_kind(&kind, &said)), &said)
}

/// The client library's own errors (`Custom`) are its connection's: a request it gave up on
/// unanswered ("no response from connection in 800ms") is a `timeout`, anything else the
/// `transport`'s. Both codes say the answer was lost (`history::reason::kind_of`); `custom`
/// said nothing, and read as the service's refusal.
fn custom_kind(kind: &str, said: &str) -> String {
    if kind != "custom" {
        return kind.to_string();
    }
    if said.contains("no response") || said.contains("timeout") || said.contains("timed out") {
        "timeout".into()
    } else {
        "transport".into()
    }
}

/// Whether a state ends what a holder may believe (Curator's `SUSPENDED` and `LOST`).
fn ends_belief(state: zk::SessionState) -> bool {
    !matches!(
        state,
        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
    )
}

fn state_name(state: zk::SessionState) -> &'static str {
    match state {
        zk::SessionState::Disconnected => "disconnected",
        zk::SessionState::SyncConnected => "connected",
        zk::SessionState::AuthFailed => "auth-failed",
        zk::SessionState::ConnectedReadOnly => "read-only",
        zk::SessionState::Expired => "expired",
        zk::SessionState::Closed => "closed",
    }
}

impl Session {
    /// The name of the server the session is connected to now (`n2`).
    fn server(&self) -> String {
        let at = self.current.load(std::sync::atomic::Ordering::Relaxed);
        self.servers.get(at).map(|s| s.name.clone()).unwrap_or_default()
    }

    /// Why a holder of `path` no longer believes it holds: the first bad state heard since
    /// its grant, or the state the library is in now if that is one. `None` while it holds.
    fn lost_since(&self, path: &str, now_ns: u64) -> Option<String> {
        let granted = self.grants.get(path)?;
        let mut events = lock_of(&self.events);
        let now = self.client.state();
        if ends_belief(now) && !events.iter().any(|(_, at)| *at >= granted) {
            // Heard now, by the op that asks (the listener has not run yet).
            events.push((now, now_ns));
        }
        events
            .iter()
            .find(|(_, at)| *at >= granted)
            .map(|(state, at)| format!("session-lost; {} at {at} ns", state_name(*state)))
    }
}

/// One server of the ensemble, as the evidence names it and as a client reaches it.
#[derive(Debug, Clone)]
struct Server {
    /// `n2`.
    name: String,
    /// `host:port`.
    addr: String,
}

/// The lock recipe on a server or an ensemble: a session per client process.
pub struct ZkLock {
    /// Every server, this client's own first and then the others in node order: the connect
    /// string a client is given, tried in turn as ZooKeeper's clients do.
    servers: Arc<Vec<Server>>,
    op_timeout: Duration,
    clock: Clock,
    board: Arc<OnceLock<Arc<PauseBoard>>>,
    sessions: Kept<String, Arc<Session>>,
    /// Locks whose parent node this adapter has made (or found).
    parents: Mutex<HashSet<String>>,
}

impl ZkLock {
    fn new(servers: Vec<Server>, op_timeout: Duration, clock: Clock) -> ZkLock {
        ZkLock {
            servers: Arc::new(servers),
            op_timeout,
            clock,
            board: Arc::default(),
            sessions: Kept::new(SESSIONS_MAX),
            parents: Mutex::new(HashSet::new()),
        }
    }

    fn dir(lock: &str) -> String {
        format!("{ROOT}/{lock}")
    }

    /// `call` within the op timeout; a call past it is `None`.
    async fn bounded<T>(&self, call: impl Future<Output = T>) -> Option<T> {
        tokio::time::timeout(self.op_timeout, call).await.ok()
    }

    /// `client`'s session if it has one that is not over.
    fn current(&self, client: &str) -> Option<Arc<Session>> {
        self.sessions.get(client)
    }

    /// Forgets `client`'s session: the library closes it once no op uses it any more, and
    /// the server deletes its ephemeral nodes then (or at its expiry, if the close is lost).
    fn drop_session(&self, client: &str) {
        self.sessions.forget(client);
    }

    /// `client`'s session, made now (timeout `ttl_ms`) if it has none or its last one is
    /// over. Nothing of the lock was sent when this fails.
    async fn session(&self, client: &str, ttl_ms: u64) -> Result<Arc<Session>, String> {
        if let Some(s) = self.current(client) {
            if !s.client.state().is_terminated() {
                return Ok(s);
            }
            self.drop_session(client);
        }
        // The first connection is made here, so a server that is down is a refused connect
        // (every server down: the session is surely not made).
        let (first, at) = match self.bounded(connect_any(&self.servers, 0)).await {
            None => return Err("connect: timeout".into()),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(with_detail("connect: refused", &e.to_string()))
            }
            Some(Err(e)) => return Err(with_detail("connect", &e.to_string())),
            Some(Ok(s)) => s,
        };
        let current = Arc::new(std::sync::atomic::AtomicUsize::new(at));
        let stalls = Stalls {
            board: self.board.clone(),
            client: client.to_string(),
        };
        let (relay_addr, relay) = self
            .start_relay(first, current.clone(), stalls.clone())
            .await?;
        let connector = zk::Client::connector()
            .with_session_timeout(Duration::from_millis(ttl_ms.max(1)))
            .with_fail_eagerly();
        let made = self
            .bounded(connector.connect(&relay_addr.to_string()))
            .await;
        let zc = match made {
            None => {
                relay.abort();
                return Err("connect: timeout".into());
            }
            Some(Err(e)) => {
                relay.abort();
                return Err(zk_reason("connect", &e));
            }
            Some(Ok(c)) => c,
        };
        let events = Arc::new(Mutex::new(Vec::new()));
        let listen = tokio::spawn(listen(
            zc.state_watcher(),
            events.clone(),
            self.clock.clone(),
            stalls,
        ));
        let session = Arc::new(Session {
            servers: self.servers.clone(),
            current,
            id: zc.session_id().to_string(),
            timeout_ms: zc.session_timeout().as_millis() as u64,
            client: zc,
            events,
            grants: Kept::new(GRANTS_MAX),
            tasks: vec![relay.abort_handle(), listen.abort_handle()],
        });
        self.keep_session(client, session.clone());
        Ok(session)
    }

    /// The relay the session's client connects through (see [`relay`]): listening on a
    /// loopback port, its first server connection `first`, the server in use `current`.
    async fn start_relay(
        &self,
        first: TcpStream,
        current: Arc<std::sync::atomic::AtomicUsize>,
        stalls: Stalls,
    ) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>), String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| with_detail("connect: relay", &e.to_string()))?;
        let relay_addr = listener
            .local_addr()
            .map_err(|e| with_detail("connect: relay", &e.to_string()))?;
        let relay = tokio::spawn(relay(
            listener,
            first,
            self.servers.clone(),
            current,
            stalls,
        ));
        Ok((relay_addr, relay))
    }

    /// Keeps `client`'s new session for its next ops (the table is bounded: past
    /// [`SESSIONS_MAX`] it starts over, and a forgotten session is made anew).
    fn keep_session(&self, client: &str, session: Arc<Session>) {
        self.sessions.keep(client.to_string(), session);
    }

    /// Makes `/lockpick/<lock>` once (a persistent node; found there after a restart).
    async fn parent(&self, s: &Session, lock: &str) -> Result<(), String> {
        if lock_of(&self.parents).contains(lock) {
            return Ok(());
        }
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match self.bounded(s.client.mkdir(&Self::dir(lock), &options)).await {
            None => Err("mkdir: timeout".into()),
            Some(Err(e)) => Err(zk_reason("mkdir", &e)),
            Some(Ok(())) => {
                lock_of(&self.parents).insert(lock.to_string());
                Ok(())
            }
        }
    }

    /// The recipe, waiting up to `wait_ms`; a stalled client does nothing while its stall
    /// lasts (nor does its session: see the relay).
    async fn acquire_waiting(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let s = match self.session(client, ttl_ms).await {
            Ok(s) => s,
            Err(e) => return Reply::Fail(e),
        };
        if let Err(e) = self.parent(&s, lock).await {
            return Reply::Fail(e);
        }
        let state = s.client.state();
        if ends_belief(state) {
            // Nothing would go out on this session now.
            if state.is_terminated() {
                self.drop_session(client);
            }
            return Reply::Fail(format!("connect: {}", state_name(state)));
        }
        let dir = Self::dir(lock);
        let (stat, seq) = match self.create_node(client, &s, lock, &dir).await {
            Ok(created) => created,
            Err(r) => return r,
        };
        let name = format!("{PREFIX}{seq}");
        let path = format!("{dir}/{name}");
        let mine = seq.into_i64();
        match self.wait_lowest(client, &s, &dir, mine, deadline, pauses).await {
            Ok(true) => {}
            Ok(false) => return self.withdraw(client, &s, &path).await,
            Err(f) => {
                // Our node exists and may have become the lowest: whether the lock was ours
                // for a while is unknown. Closing the session removes the node.
                self.drop_session(client);
                return Reply::Info(f);
            }
        }
        self.granted(&s, path, &name, &stat)
    }

    /// Creates the client's ephemeral sequential node under `dir`, the lock's: its stat and
    /// sequence number, else the reply (a refusal when nothing was made; indeterminate when
    /// the answer was lost, with the session dropped so the node goes with it).
    async fn create_node(
        &self,
        client: &str,
        s: &Session,
        lock: &str,
        dir: &str,
    ) -> Result<(zk::Stat, zk::CreateSequence), Reply> {
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let created = self
            .bounded(s.client.create(&format!("{dir}/{PREFIX}"), &[], &options))
            .await;
        match created {
            Some(Ok(c)) => Ok(c),
            Some(Err(e)) if refused_before_applied(&e) => {
                if matches!(e, zk::Error::NoNode) {
                    lock_of(&self.parents).remove(lock);
                }
                if s.client.state().is_terminated() {
                    self.drop_session(client);
                }
                Err(Reply::Fail(zk_reason("create", &e)))
            }
            // The answer was lost: our node may exist. Closing the session removes it.
            Some(Err(e)) => {
                self.drop_session(client);
                Err(Reply::Info(zk_reason("create", &e)))
            }
            None => {
                self.drop_session(client);
                Err(Reply::Info("create: timeout".into()))
            }
        }
    }

    /// The grant of the node at `path` (`name` in its directory): remembered with its time,
    /// answered with its token (the node's czxid) and the session that holds it.
    fn granted(&self, s: &Session, path: String, name: &str, stat: &zk::Stat) -> Reply {
        let granted_ns = (self.clock)();
        s.grants.keep(path.clone(), granted_ns);
        let mut body = Map::new();
        body.insert("token".into(), json!(stat.czxid as u64));
        body.insert(history::GRANT.into(), json!(name));
        let hold = HoldEvidence {
            hold: Some(Hold::Session),
            committed: None,
        };
        hold.write_into(&mut body);
        let evidence = ZkEvidence {
            zk_session: Some(s.id.clone()),
            zk_server: Some(s.server()),
            zk_node: Some(path),
            zk_timeout_ms: Some(s.timeout_ms),
        };
        evidence.write_into(&mut body);
        Reply::Ok(Value::Object(body))
    }

    /// Lists the lock's nodes until ours is the lowest (`true`) or the wait is over
    /// (`false`); between looks, waits for the node just below ours to change.
    async fn wait_lowest(
        &self,
        client: &str,
        s: &Session,
        dir: &str,
        mine: i64,
        deadline: Instant,
        pauses: Option<&PauseBoard>,
    ) -> Result<bool, String> {
        for _ in 0..ROUNDS_MAX {
            if let Some(until) = pauses.and_then(|p| p.stalled_until(client)) {
                tokio::time::sleep_until(until.into()).await;
            }
            let children = match self.bounded(s.client.list_children(dir)).await {
                None => return Err("list: timeout".into()),
                Some(Err(e)) => return Err(zk_reason("list", &e)),
                Some(Ok(c)) => c,
            };
            let mut seqs: Vec<i64> = children.iter().filter_map(|c| sequence(c)).collect();
            seqs.sort_unstable();
            if !seqs.contains(&mine) {
                return Err("list: our node is gone".into());
            }
            let Some(&below) = seqs.iter().rev().find(|q| **q < mine) else {
                return Ok(true);
            };
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            let watched = format!("{dir}/{PREFIX}{}", zk_sequence(below));
            let watcher = match self.bounded(s.client.check_and_watch_stat(&watched)).await {
                None => return Err("watch: timeout".into()),
                Some(Err(e)) => return Err(zk_reason("watch", &e)),
                // Gone between the list and the watch: look again.
                Some(Ok((None, _))) => continue,
                Some(Ok((Some(_), w))) => w,
            };
            let _ = tokio::time::timeout_at(deadline.into(), watcher.changed()).await;
        }
        Ok(false)
    }

    /// Not granted in time: deletes our node, so it never holds.
    async fn withdraw(&self, client: &str, s: &Session, path: &str) -> Reply {
        match self.bounded(s.client.delete(path, None)).await {
            Some(Ok(())) | Some(Err(zk::Error::NoNode)) => Reply::Fail("held".into()),
            // Our node may still be there, and may be the lowest now.
            Some(Err(e)) => {
                self.drop_session(client);
                Reply::Info(zk_reason("delete", &e))
            }
            None => {
                self.drop_session(client);
                Reply::Info("delete: timeout".into())
            }
        }
    }

    /// The session and node path `grant` names, or why the holder knows it does not hold.
    fn held(
        &self,
        client: &str,
        lock: &str,
        grant: &Grant,
    ) -> Result<(Arc<Session>, String), Reply> {
        let Some(s) = self.current(client) else {
            return Err(Reply::Fail("not-holder; no session".into()));
        };
        let Some(name) = &grant.id else {
            return Err(Reply::Fail("not-holder; no lock node".into()));
        };
        let path = format!("{}/{name}", Self::dir(lock));
        if !s.grants.lock().contains_key(&path) {
            return Err(Reply::Fail(
                "not-holder; granted on another session".into(),
            ));
        }
        if let Some(lost) = s.lost_since(&path, (self.clock)()) {
            self.drop_session(client);
            return Err(Reply::Fail(lost));
        }
        Ok((s, path))
    }

    /// An error of a call on a held node: the session's end is a definite loss, anything
    /// else leaves the call's effect unknown. Either way the session is dropped.
    fn broken(&self, client: &str, op: &str, e: &zk::Error) -> Reply {
        self.drop_session(client);
        match e {
            zk::Error::SessionExpired | zk::Error::ClientClosed => Reply::Fail(format!(
                "session-lost; {} at {} ns",
                match e {
                    zk::Error::SessionExpired => "expired",
                    _ => "closed",
                },
                (self.clock)()
            )),
            _ => Reply::Info(zk_reason(op, e)),
        }
    }

    async fn renew(&self, client: &str, lock: &str, grant: &Grant) -> Reply {
        let (s, path) = match self.held(client, lock, grant) {
            Ok(h) => h,
            Err(r) => return r,
        };
        match self.bounded(s.client.check_stat(&path)).await {
            Some(Ok(Some(_))) => Reply::Ok(json!({})),
            Some(Ok(None)) => Reply::Fail("not-holder".into()),
            Some(Err(e)) => self.broken(client, "exists", &e),
            None => {
                self.drop_session(client);
                Reply::Info("exists: timeout".into())
            }
        }
    }

    async fn release(&self, client: &str, lock: &str, grant: &Grant) -> Reply {
        let (s, path) = match self.held(client, lock, grant) {
            Ok(h) => h,
            Err(r) => return r,
        };
        match self.bounded(s.client.delete(&path, None)).await {
            Some(Ok(())) => {
                s.grants.forget(&path);
                Reply::Ok(json!({}))
            }
            Some(Err(zk::Error::NoNode)) => {
                s.grants.forget(&path);
                Reply::Fail("not-holder".into())
            }
            Some(Err(e)) => self.broken(client, "delete", &e),
            None => {
                self.drop_session(client);
                Reply::Info("delete: timeout".into())
            }
        }
    }
}

/// Errors the server (or the library, before sending) gives for a create it did not apply.
fn refused_before_applied(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::NoNode
            | zk::Error::NoAuth
            | zk::Error::InvalidAcl
            | zk::Error::BadArguments(_)
            | zk::Error::SessionExpired
            | zk::Error::ClientClosed
            | zk::Error::AuthFailed
            | zk::Error::NoChildrenForEphemerals
            | zk::Error::Throttled
    )
}

/// The sequence of a lock node's name (`lock-0000000007` → 7).
fn sequence(name: &str) -> Option<i64> {
    name.strip_prefix(PREFIX)?.parse().ok()
}

/// A sequence as the server writes it in a name: ten digits (nineteen past 32 bits).
fn zk_sequence(seq: i64) -> String {
    match seq <= i32::MAX as i64 {
        true => format!("{seq:010}"),
        false => format!("{seq:019}"),
    }
}

/// The first of `servers` that takes a connection, trying each once from position `from`.
async fn connect_any(
    servers: &[Server],
    from: usize,
) -> std::io::Result<(TcpStream, usize)> {
    let mut last = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    for k in 0..servers.len() {
        let at = (from + k) % servers.len();
        match TcpStream::connect(&servers[at].addr).await {
            Ok(s) => return Ok((s, at)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Carries one session's connections to the servers, and nothing while its process is
/// stalled. `first` is the connection made before the session (so a server that is down is
/// refused at once); later ones (the library reconnecting) go to the next server that takes
/// one, as a client given the ensemble's connect string moves on, and `current` says which.
async fn relay(
    listener: TcpListener,
    first: TcpStream,
    servers: Arc<Vec<Server>>,
    current: Arc<std::sync::atomic::AtomicUsize>,
    stalls: Stalls,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut first = Some(first);
    // Bounded by the session: the loop is aborted when the session is dropped.
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            return;
        };
        let outbound = match first.take() {
            Some(s) => s,
            None => match connect_any(&servers, current.load(Relaxed) + 1).await {
                Ok((s, at)) => {
                    current.store(at, Relaxed);
                    s
                }
                // Dropping the inbound side is what a refused connection looks like to the
                // library: it tries again on its own schedule.
                Err(_) => continue,
            },
        };
        let stalls = stalls.clone();
        tokio::spawn(async move {
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            tokio::join!(pump(ri, wo, &stalls), pump(ro, wi, &stalls));
        });
    }
}

/// Copies `from` to `to` until either ends; what arrives during a stall waits for its end
/// (a paused process neither sends nor reads), a close included.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    stalls: &Stalls,
) {
    let mut buf = vec![0u8; 16 * 1024];
    // Bounded by the connection: each pass reads something or ends.
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        stalls.sit_out().await;
        if n == 0 {
            let _ = to.shutdown().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The session's state listener: records each state that ends a holder's belief with the
/// history time it was heard (after any stall: a paused process hears it when it wakes).
async fn listen(
    mut watcher: zk::StateWatcher,
    events: Arc<Mutex<Vec<(zk::SessionState, u64)>>>,
    clock: Clock,
    stalls: Stalls,
) {
    // Bounded: the session's states end with a terminal one, and the task is aborted when
    // the session is dropped.
    loop {
        let state = watcher.changed().await;
        stalls.sit_out().await;
        if ends_belief(state) {
            let mut e = lock_of(&events);
            if e.len() >= EVENTS_MAX {
                e.remove(0);
            }
            e.push((state, clock()));
        }
        if state.is_terminated() {
            return;
        }
    }
}

impl LockClient for ZkLock {
    crate::api::waiting_acquire_ops!();
    /// The dead process's session is dropped: the library closes it and the server deletes
    /// its lock nodes (a process killed outright would leave it to expire after the session
    /// timeout instead; either way nothing of it holds the lock for the rest of the run).
    fn crashed(&self, client: &str) {
        self.drop_session(client);
    }
    fn renew<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
        _ttl_ms: u64,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(ZkLock::renew(self, client, lock, grant))
    }
    fn release<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(ZkLock::release(self, client, lock, grant))
    }
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        let dir = Self::dir(lock);
        let (request, ok, refused) = match op {
            "acquire" => (
                format!(
                    "create {dir}/{PREFIX} ephemeral-sequential, list {dir}, watch the next lower"
                ),
                "the lowest sequence (czxid the token)",
                "a lower node still there at the wait's end",
            ),
            "renew" => (
                format!("session listener, then exists {dir}/<node>"),
                "connected, the node there",
                "session lost, or no node",
            ),
            _ => (
                format!("delete {dir}/<node>"),
                "deleted",
                "no node, or session lost",
            ),
        };
        Wire {
            request,
            ok: ok.into(),
            refused: refused.into(),
        }
    }
    fn watch_stalls(&self, pauses: Arc<PauseBoard>) {
        let _ = self.board.set(pauses);
    }
}

history::evidence! {
    /// What a grant carries beyond its `hold` (docs/history.md). Kept, not judged.
    pub(crate) struct ZkEvidence for "zookeeper" {
        /// The session the grant is held by (its id, `0x...`).
        zk_session: String,
        /// The server that session was connected to when the grant was answered (`n2`).
        zk_server: String,
        /// The lock node (`/lockpick/<lock>/lock-<sequence>`).
        zk_node: String,
        /// The session timeout the server agreed to.
        zk_timeout_ms: u64,
    }
}

/// The evidence each grant carries.
const EVIDENCE: &[&[history::Field]] = &[HoldEvidence::FIELDS, ZkEvidence::FIELDS];

/// The zoo.cfg the node writes into its data dir at each start, then the server in the
/// foreground. Sessions may be as short as 200 ms (a `--ttl` of 1-2 s, or less, is the
/// session timeout asked for), up to 60 s; the AdminServer (an HTTP port of its own) is off,
/// and of the four-letter words only `srvr` answers (how the harness finds an ensemble's
/// leader: [`LEADER`]); the data dir, kept across restarts, holds the znodes and the
/// sessions, so a restarted server still knows both (its sessions then expire on their own).
const SCRIPT: &str = "printf '%s\\n' \
    'dataDir={data_dir}' \
    'clientPort={port}' \
    'clientPortAddress={host}' \
    'tickTime=100' \
    'minSessionTimeout=200' \
    'maxSessionTimeout=60000' \
    'maxClientCnxns=0' \
    'admin.enableServer=false' \
    '4lw.commands.whitelist=srvr' \
    'preAllocSize=1024' \
    > '{data_dir}/zoo.cfg' && \
    ENSEMBLE\
    exec java -Xmx256m -XX:+UseSerialGC -cp JARS \
    org.apache.zookeeper.server.quorum.QuorumPeerMain '{data_dir}/zoo.cfg'";

/// What an ensemble's member adds to its config before it starts: the limits a follower has
/// to join and keep up (in ticks of 100 ms: 5 s and 2 s), a `server.N=host:quorum:election`
/// line per member from `{peer_list}`, and its own number (`n2` is 2) in `myid`.
const ENSEMBLE: &str = "printf '%s\\n' 'initLimit=50' 'syncLimit=20' >> '{data_dir}/zoo.cfg' && \
    i=1 && for m in $(echo '{peer_list}' | tr ',' ' '); do \
    echo \"server.$i=$m\" >> '{data_dir}/zoo.cfg'; i=$((i + 1)); done && \
    echo '{id}' | tr -d n > '{data_dir}/myid' && ";

/// What `srvr` shows on the member that leads an ensemble (a follower says `Mode:
/// follower`; a lone server, `Mode: standalone`).
const LEADER: &str = "Mode: leader";

/// A ConnectRequest asking for the shortest session: protocol 0, no zxid seen, timeout 1 ms
/// (the server raises it to its minimum), no session, a zero password, not read-only; 45
/// bytes after the length.
fn connect_request() -> Vec<u8> {
    let mut body = Vec::with_capacity(49);
    body.extend_from_slice(&45i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&0i64.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i64.to_be_bytes());
    body.extend_from_slice(&16i32.to_be_bytes());
    body.extend_from_slice(&[0u8; 16]);
    body.push(0);
    body
}

/// One standalone ZooKeeper server, or an ensemble (Debian's `zookeeper` package, each member
/// run by `java` as its init script would, in the foreground).
pub struct ZooKeeper;

impl Service for ZooKeeper {
    fn name(&self) -> &'static str {
        "zookeeper"
    }
    fn about(&self) -> &'static str {
        "ZooKeeper's lock recipe on one standalone server or an ensemble of 3 or more (ephemeral sequential nodes, the node's czxid as the token, a grant held by its session); lockpick starts Debian's `zookeeper`"
    }
    fn launch(&self, l: &Launch) -> Option<Vec<String>> {
        let ensemble = if l.nodes > 1 { ENSEMBLE } else { "" };
        let script = SCRIPT
            .replace("JARS", &JARS.join(":"))
            .replace("ENSEMBLE", ensemble);
        Some(vec!["sh".into(), "-c".into(), script])
    }
    /// An ensemble's members talk on two ports each: the quorum's and the leader election's.
    fn peer_port(&self) -> bool {
        true
    }
    /// The leader, as `srvr` names it: the member the ensemble elected, often not `n1`.
    fn primary_check(&self) -> Option<Readiness> {
        Some(Readiness::Answer {
            name: "srvr",
            send: b"srvr".to_vec(),
            until: Vec::new(),
            contains: vec![LEADER.as_bytes().to_vec()],
            lacks: Vec::new(),
        })
    }
    fn second_peer_port(&self) -> bool {
        true
    }
    fn holds_several_locks(&self, _options: &crate::ServiceOptions) -> bool {
        // A client's session holds one node per lock, each remembered by its path.
        true
    }
    fn url_schemes(&self) -> &'static [&'static str] {
        &["zk"]
    }
    /// A session offered and accepted: a ConnectResponse (37 bytes, protocol 0). It proves
    /// what the clients need, that the server makes sessions; a server still loading its
    /// data closes the connection instead. `ruok` answers `imok` before the server makes
    /// sessions, and would need whitelisting besides. The session it opens is never used and
    /// expires after the minimum timeout.
    fn readiness(&self) -> Readiness {
        Readiness::Exchange {
            name: "ConnectRequest",
            send: connect_request(),
            expect: [37i32.to_be_bytes(), 0i32.to_be_bytes()].concat(),
        }
    }
    fn clock_faults(&self) -> Result<(), &'static str> {
        Err("libfaketime stalls Debian's ZooKeeper 3.8 at start-up under OpenJDK 17 (it binds \
             its port, then never serves a session)")
    }
    fn program(&self) -> Option<(&'static str, &'static str)> {
        Some((JARS[0], "zookeeper"))
    }
    fn check(&self, s: &Settings) -> Result<(), String> {
        if s.nodes == 2 {
            return Err("--nodes 2: a ZooKeeper ensemble of two stops at the loss of either \
                 member (its quorum is both); run one server or three or more"
                .into());
        }
        if let Some(r) = s.renew_ttl_apart {
            return Err(format!(
                "--renew-ttl {r}: a ZooKeeper session's timeout is fixed when the session is \
                 made; a renew cannot ask for another"
            ));
        }
        Ok(())
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let refused = ConnectError::refused_by(self.name());
        let addr_of = |url: &str| -> Result<String, ConnectError> {
            let (host, port) =
                host_port(url).ok_or_else(|| refused(format!("{url}: no host and port")))?;
            Ok(match host.contains(':') {
                true => format!("[{host}]:{port}"),
                false => format!("{host}:{port}"),
            })
        };
        // This node first, then the others after it in node order (a URL target is a
        // server alone).
        let peers: Vec<&str> = match c.peers.is_empty() {
            true => vec![c.url],
            false => c.peers.iter().map(String::as_str).collect(),
        };
        let own = peers.iter().position(|p| *p == c.url).unwrap_or(0);
        let mut servers = Vec::with_capacity(peers.len());
        for k in 0..peers.len() {
            let at = (own + k) % peers.len();
            servers.push(Server {
                name: format!("n{}", at + 1),
                addr: addr_of(peers[at])?,
            });
        }
        let lock = Arc::new(ZkLock::new(servers, c.op_timeout, c.clock.clone()));
        c.beside_store(lock, EVIDENCE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_node_names_read_back_as_their_sequence() {
        assert_eq!(sequence("lock-0000000007"), Some(7));
        assert_eq!(sequence("other-0000000007"), None);
        assert_eq!(zk_sequence(7), "0000000007");
        assert_eq!(sequence(&format!("{PREFIX}{}", zk_sequence(1 << 40))), Some(1 << 40));
    }

    #[test]
    fn a_failed_call_names_zookeepers_error_kind_in_its_reason() {
        use history::reason::{detail_of, reason_of};
        for (e, reason) in [
            (zk::Error::ConnectionLoss, "list: connection-loss"),
            (zk::Error::Timeout, "list: timeout"),
            (zk::Error::NoNode, "list: no-node"),
            (
                zk::Error::UnexpectedError("boom".into()),
                "list: unexpected-error",
            ),
        ] {
            let text = zk_reason("list", &e);
            assert_eq!(reason_of(&text), reason, "{text}");
            assert_eq!(detail_of(&text), e.to_string(), "{text}");
        }
    }

    /// The client library's own errors name no kind (`Custom`): one that gave up on an
    /// answer is a timeout, any other its transport's, both an answer lost, never the
    /// service's refusal.
    #[test]
    fn the_client_librarys_own_errors_are_lost_answers() {
        use history::reason::{kind_of, ReasonKind};
        for (kind, said, want) in [
            ("custom", "no response from connection in 800ms", "timeout"),
            ("custom", "connection closed", "transport"),
            ("no-node", "no node", "no-node"),
        ] {
            let got = custom_kind(kind, said);
            assert_eq!(got, want, "{said}");
            if kind == "custom" {
                assert_eq!(kind_of(&format!("delete: {got}")), ReasonKind::Lost);
            }
        }
    }

    #[test]
    fn the_readiness_request_is_a_whole_connect_request() {
        let r = connect_request();
        assert_eq!(r.len(), 4 + 45);
        assert_eq!(&r[..4], &45i32.to_be_bytes());
    }
}
