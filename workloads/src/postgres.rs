//! `--adapter postgres`: PostgreSQL's advisory locks on one server lockpick starts (Debian's
//! `postgresql` package), in the two forms applications use them:
//!
//! - `form=session` (the default; migration tools, cron singletons, leader election): each
//!   client has one dedicated connection, its session, made on its first op. Acquire is
//!   `pg_try_advisory_lock(key)` tried every [`POLL_MS`] until the wait is over. Polling, not
//!   `pg_advisory_lock` under `lock_timeout`: each try is answered true or false at once, so a
//!   client-side timeout never falls between a grant and its answer, and a stalled client
//!   (the pause board) tries nothing while its stall lasts, as the paused program would. The
//!   grant lasts as long as the session: renew is a check (in `pg_locks`) that this session
//!   still holds the key, release is `pg_advisory_unlock(key)`. The answer carries no
//!   `ttl_ms`: the client has no lease it could count down; `hold: session` says so.
//! - `form=xact`: acquire opens a transaction and takes `pg_advisory_xact_lock(key)` under
//!   `SET LOCAL lock_timeout` (the wait); the lock ends with the transaction. The counter's
//!   register is a table in the same database, read and written inside that transaction on the
//!   same connection, and the write commits it: a client whose session was ended cannot
//!   commit, so the register needs no token (`hold: transaction`). The write's answer says
//!   `committed: true`, and the worker sends no release after it. Release is `ROLLBACK`.
//!
//! How a dead client's lock is reclaimed: every session is opened with
//! `idle_session_timeout` (session form) or `idle_in_transaction_session_timeout` (xact form)
//! set to the acquire's ttl, and each renew sets it to the renew's ttl. A client that goes
//! quiet for longer (crashed, stalled, cut off by a partition: the server ends the backend
//! whatever the socket's state) loses its lock when the server ends its session, and learns it
//! only at its next query, which finds the session gone (`session-lost`).
//!
//! The key of a lock is the 64-bit FNV-1a hash of its name's bytes, as a signed bigint: stable
//! across runs and machines. Every call is bounded by the op timeout and a client never
//! retries on its own; a lost answer drops the session (the server then ends it, and with it
//! any lock it held). Evidence copied into the history: `hold`, `pg_backend_pid` (the backend
//! that answered the grant) and the write's `committed`.

use crate::api::{
    BoxFuture, Failure, FencedResource, Grant, Kept, LockClient, Reply, Tokens, Wire,
};
use crate::pause::PauseBoard;
use crate::service::{
    host_port, Connect, ConnectError, Launch, Service, ServiceOption, ServiceOptions, Settings,
};
use crate::Adapter;
use history::reason::with_detail;
use history::{Evidence, Hold, HoldEvidence};
use nemesis::{Readiness, Shutdown, StopSignal};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::types::ToSql;
use tokio_postgres::NoTls;

/// How often a waiting session-form acquire tries again.
const POLL_MS: u64 = 100;
/// Sessions kept, one per client id; past this every one is dropped (as redis.rs does).
const CONNECTIONS_MAX: usize = 1024;
/// The server's connection limit: every client's session, the probe's and the closing read's.
const SERVER_CONNECTIONS: usize = CONNECTIONS_MAX + 16;
/// The role initdb creates and every session logs in as (trust authentication).
const USER: &str = "lockpick";
const DATABASE: &str = "postgres";
/// The counter's registers (form=xact): a bigint per key, a missing key reads 0.
const TABLE: &str = "lockpick_register";

/// Which advisory lock the adapter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Session,
    Xact,
}

impl Form {
    fn of(options: &ServiceOptions) -> Form {
        match options.get("form") {
            "xact" => Form::Xact,
            _ => Form::Session,
        }
    }

    /// The `hold` evidence of its grants.
    fn hold(self) -> Hold {
        match self {
            Form::Session => Hold::Session,
            Form::Xact => Hold::Transaction,
        }
    }

    /// The setting that ends a quiet client's session.
    fn idle_setting(self) -> &'static str {
        match self {
            Form::Session => "idle_session_timeout",
            Form::Xact => "idle_in_transaction_session_timeout",
        }
    }
}

/// A lock's advisory key: FNV-1a (64 bits) of its name.
pub(crate) fn key_of(lock: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lock.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// How `pg_locks` shows a bigint key: its high half as `classid`, its low half as `objid`.
fn halves(key: i64) -> (u32, u32) {
    let k = key as u64;
    ((k >> 32) as u32, k as u32)
}

/// One client's session.
struct Session {
    client: tokio_postgres::Client,
    backend_pid: u32,
    /// Whether a transaction (an xact grant) is open on it.
    in_txn: AtomicBool,
}


/// What a statement's error says: the session ended (the server terminated it, or the
/// connection was closed), an error the server answered, or a transport failure after the
/// request went out (the answer is lost).
fn failure_of(e: &tokio_postgres::Error) -> Failure {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        let detail = format!("{code} {}", db.message());
        // Class 57 (admin_shutdown, crash_shutdown, idle_session_timeout...) and the idle
        // in-transaction timeout end the backend, and every lock it held.
        if code.starts_with("57") || code == "25P03" || matches!(db.severity(), "FATAL" | "PANIC")
        {
            return Failure::Definite(with_detail("session-lost", &detail));
        }
        // An error in the server's words that this adapter does not expect: the statement
        // did not run, but it is counted as not understood.
        return Failure::Definite(with_detail("bad-body", &detail));
    }
    if e.is_closed() {
        return Failure::Definite(with_detail("session-lost", "the connection is closed"));
    }
    Failure::Indefinite(with_detail("transport", &e.to_string()))
}

/// Why a connection could not be made: nothing was sent on it.
fn connect_failure(e: &tokio_postgres::Error) -> Failure {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        let detail = format!("{code} {}", db.message());
        // Starting up, shutting down, in recovery (57P03), or out of connection slots: no
        // session could be made, as with a refused connection (and the workers back off the
        // same way while a restarted server recovers).
        return Failure::Definite(match code {
            "57P03" | "53300" => with_detail(&format!("connect: unavailable {code}"), db.message()),
            _ => with_detail("connect", &detail),
        });
    }
    let mut source = std::error::Error::source(e);
    // Bounded by the error chain's length.
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Failure::Definite(with_detail("connect: refused", &io.to_string()));
            }
        }
        source = s.source();
    }
    Failure::Definite(with_detail("connect", &e.to_string()))
}

/// The advisory-lock client of one server, one session per client id, and (form=xact) the
/// register inside the grant's transaction.
pub struct PgLock {
    config: tokio_postgres::Config,
    form: Form,
    op_timeout: Duration,
    /// Each client's session. A failed op forgets it, and forgetting drops it: the server
    /// then ends the session (its transaction rolls back, its locks go).
    sessions: Kept<String, Arc<Session>>,
    /// Numbers the grants: `<backend pid>.<n>` names each one.
    grants: AtomicU64,
    /// Whether the register's table is known to exist (form=xact).
    table_ready: tokio::sync::Mutex<bool>,
}

impl PgLock {
    fn new(host: &str, port: u16, form: Form, op_timeout: Duration) -> PgLock {
        let mut config = tokio_postgres::Config::new();
        config
            .host(host)
            .port(port)
            .user(USER)
            .dbname(DATABASE)
            .application_name("lockpick")
            .connect_timeout(op_timeout);
        PgLock {
            config,
            form,
            op_timeout,
            sessions: Kept::new(CONNECTIONS_MAX),
            grants: AtomicU64::new(0),
            table_ready: tokio::sync::Mutex::new(false),
        }
    }

    fn forget(&self, client: &str) {
        self.sessions.forget(client);
    }

    /// Runs `f` within the op timeout; a timeout is a lost answer.
    async fn bounded<T>(
        &self,
        limit: Duration,
        f: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(limit, f).await {
            Err(_) => Err(Failure::Indefinite("timeout".into())),
            Ok(Err(e)) => Err(failure_of(&e)),
            Ok(Ok(v)) => Ok(v),
        }
    }

    /// `query_one` within the op timeout.
    async fn one(
        &self,
        pg: &tokio_postgres::Client,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<tokio_postgres::Row, Failure> {
        self.bounded(self.op_timeout, pg.query_one(sql, params)).await
    }

    /// `query_opt` within the op timeout.
    async fn opt(
        &self,
        pg: &tokio_postgres::Client,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<tokio_postgres::Row>, Failure> {
        self.bounded(self.op_timeout, pg.query_opt(sql, params)).await
    }

    /// A new connection with its background task; nothing about locks sent on it yet.
    async fn open(&self) -> Result<tokio_postgres::Client, Failure> {
        let made = tokio::time::timeout(self.op_timeout, self.config.connect(NoTls)).await;
        let (client, connection) = match made {
            Err(_) => return Err(Failure::Definite("connect: timeout".into())),
            Ok(Err(e)) => return Err(connect_failure(&e)),
            Ok(Ok(pair)) => pair,
        };
        // Ends when the connection does (the server closed it, or the client was dropped).
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Creates the register's table once (form=xact), on `client` outside any transaction.
    async fn ensure_table(&self, client: &tokio_postgres::Client) -> Result<(), Failure> {
        let mut ready = self.table_ready.lock().await;
        if *ready {
            return Ok(());
        }
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {TABLE} (key text PRIMARY KEY, value bigint NOT NULL)"
        );
        self.bounded(self.op_timeout, client.batch_execute(&ddl))
            .await
            .map_err(|f| match f {
                // Nothing about locks was sent: a table that may not exist yet is retried by
                // the next session.
                Failure::Definite(e) | Failure::Indefinite(e) => {
                    Failure::Definite(with_detail("connect", &e))
                }
            })?;
        *ready = true;
        Ok(())
    }

    /// `client`'s session, opened now (with the idle timeout of `ttl_ms`) if it has none or
    /// the server closed it.
    async fn session_for_acquire(&self, client: &str, ttl_ms: u64) -> Result<Arc<Session>, Failure> {
        if let Some(s) = self.sessions.get(client) {
            if !s.client.is_closed() {
                return Ok(s);
            }
        }
        self.forget(client);
        let pg = self.open().await?;
        if self.form == Form::Xact {
            self.ensure_table(&pg).await?;
        }
        let (setting, ttl) = (self.form.idle_setting(), format!("{ttl_ms}ms"));
        let setup = "SELECT pg_backend_pid(), set_config($1, $2, false)";
        let row = self.one(&pg, setup, &[&setting, &ttl]).await.map_err(|f| match f {
            Failure::Definite(e) | Failure::Indefinite(e) => {
                Failure::Definite(with_detail("connect", &e))
            }
        })?;
        let pid: i32 = row.get(0);
        let session = Arc::new(Session {
            client: pg,
            backend_pid: pid as u32,
            in_txn: AtomicBool::new(false),
        });
        self.sessions.keep(client.to_string(), session.clone());
        Ok(session)
    }

    /// The session a grant of `client` lives on: refused when there is none, when the server
    /// has closed it, or when the grant was made on another session.
    fn session_of(&self, client: &str, grant: Option<&Grant>) -> Result<Arc<Session>, Failure> {
        let Some(s) = self.sessions.get(client) else {
            return Err(Failure::Definite("not-holder; no session".into()));
        };
        if s.client.is_closed() {
            self.forget(client);
            return Err(Failure::Definite(
                "session-lost; the server closed the session".into(),
            ));
        }
        if let Some(id) = grant.and_then(|g| g.id.as_deref()) {
            if id.split('.').next() != Some(s.backend_pid.to_string().as_str()) {
                return Err(Failure::Definite(with_detail(
                    "not-holder",
                    &format!("grant {id} is not of this session (backend {})", s.backend_pid),
                )));
            }
        }
        Ok(s)
    }

    /// The session of `client`'s open transaction (form=xact).
    fn txn_of(&self, client: &str, grant: Option<&Grant>) -> Result<Arc<Session>, Failure> {
        let s = self.session_of(client, grant)?;
        if !s.in_txn.load(Ordering::SeqCst) {
            return Err(Failure::Definite("not-holder; no transaction".into()));
        }
        Ok(s)
    }

    /// The body of an ok acquire.
    fn granted(&self, s: &Session) -> Value {
        let n = self.grants.fetch_add(1, Ordering::SeqCst) + 1;
        let mut body = Map::new();
        body.insert(history::GRANT.into(), json!(format!("{}.{n}", s.backend_pid)));
        let hold = HoldEvidence {
            hold: Some(self.form.hold()),
            committed: None,
        };
        hold.write_into(&mut body);
        let pg_backend_pid = Some(u64::from(s.backend_pid));
        PgEvidence { pg_backend_pid }.write_into(&mut body);
        Value::Object(body)
    }

    /// One `pg_try_advisory_lock`: the grant's body, `None` if the lock is held.
    async fn try_session_lock(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
    ) -> Result<Option<Value>, Failure> {
        let s = self.session_for_acquire(client, ttl_ms).await?;
        let (key, setting, ttl) = (key_of(lock), self.form.idle_setting(), format!("{ttl_ms}ms"));
        let sql = "SELECT pg_try_advisory_lock($1), set_config($2, $3, false)";
        let row = self.one(&s.client, sql, &[&key, &setting, &ttl]).await;
        let row = self.sessions.forget_if_failed(client, row)?;
        let got: bool = row.get(0);
        Ok(got.then(|| self.granted(&s)))
    }

    /// Session form: tries until granted or `wait_ms` is over; a stalled client tries nothing
    /// while its stall lasts.
    async fn acquire_session(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        crate::pause::poll_for_grant(client, wait_ms, POLL_MS, pauses, || {
            self.try_session_lock(client, lock, ttl_ms)
        })
        .await
    }

    /// Xact form: `BEGIN`, then the transaction-scoped lock, waiting up to `wait_ms` on the
    /// server (`lock_timeout`); refused, the transaction is rolled back.
    async fn acquire_xact(&self, client: &str, lock: &str, ttl_ms: u64, wait_ms: u64) -> Reply {
        let s = match self.session_for_acquire(client, ttl_ms).await {
            Ok(s) => s,
            Err(f) => return f.into(),
        };
        // A transaction left open by an earlier grant of this client is not this grant's.
        if s.in_txn.swap(false, Ordering::SeqCst) {
            let r = self.bounded(self.op_timeout, s.client.batch_execute("ROLLBACK")).await;
            if let Err(f) = self.sessions.forget_if_failed(client, r) {
                return f.into();
            }
        }
        let begin = format!(
            "BEGIN; SET LOCAL lock_timeout = '{wait_ms}ms'; SET {} = '{ttl_ms}ms'",
            self.form.idle_setting()
        );
        let r = self.bounded(self.op_timeout, s.client.batch_execute(&begin)).await;
        if let Err(f) = self.sessions.forget_if_failed(client, r) {
            return f.into();
        }
        s.in_txn.store(true, Ordering::SeqCst);
        let key = key_of(lock);
        // lock_timeout 0 would wait for ever: a client that may not wait only tries.
        let taken = if wait_ms == 0 {
            self.one(&s.client, "SELECT pg_try_advisory_xact_lock($1)", &[&key])
                .await
                .map(|row| row.get::<_, bool>(0))
        } else {
            let limit = self.op_timeout + Duration::from_millis(wait_ms);
            let params: [&(dyn ToSql + Sync); 1] = [&key];
            let q = s.client.execute("SELECT pg_advisory_xact_lock($1)", &params);
            match tokio::time::timeout(limit, q).await {
                Err(_) => Err(Failure::Indefinite("timeout".into())),
                Ok(Ok(_)) => Ok(true),
                Ok(Err(e)) => match e.code() {
                    Some(c) if *c == tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE => {
                        Ok(false)
                    }
                    _ => Err(failure_of(&e)),
                },
            }
        };
        match taken {
            Ok(true) => Reply::Ok(self.granted(&s)),
            Ok(false) => {
                s.in_txn.store(false, Ordering::SeqCst);
                let r = self.bounded(self.op_timeout, s.client.batch_execute("ROLLBACK")).await;
                // The refusal stands whatever the rollback answered: the lock was not taken.
                let _ = self.sessions.forget_if_failed(client, r);
                Reply::Fail("held".into())
            }
            Err(f) => {
                self.forget(client);
                f.into()
            }
        }
    }

    async fn acquire_waiting(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        match self.form {
            Form::Session => self.acquire_session(client, lock, ttl_ms, wait_ms, pauses).await,
            Form::Xact => self.acquire_xact(client, lock, ttl_ms, wait_ms).await,
        }
    }

    async fn renew_grant(&self, client: &str, lock: &str, grant: &Grant, ttl_ms: u64) -> Reply {
        let ttl = format!("{ttl_ms}ms");
        let setting = self.form.idle_setting();
        match self.form {
            Form::Session => {
                let s = match self.session_of(client, Some(grant)) {
                    Ok(s) => s,
                    Err(f) => return f.into(),
                };
                let (classid, objid) = halves(key_of(lock));
                let sql = "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
                     AND pid = pg_backend_pid() AND granted AND classid = $1 AND objid = $2 \
                     AND objsubid = 1), set_config($3, $4, false)";
                let q = self.one(&s.client, sql, &[&classid, &objid, &setting, &ttl]).await;
                holder_answer(self.sessions.forget_if_failed(client, q))
            }
            Form::Xact => {
                let s = match self.txn_of(client, Some(grant)) {
                    Ok(s) => s,
                    Err(f) => return f.into(),
                };
                // Any answer proves the transaction, and the lock with it, is still open.
                let sql = "SELECT set_config($1, $2, false)";
                let q = self.one(&s.client, sql, &[&setting, &ttl]).await;
                match self.sessions.forget_if_failed(client, q) {
                    Ok(_) => Reply::Ok(json!({})),
                    Err(f) => f.into(),
                }
            }
        }
    }

    async fn release_grant(&self, client: &str, lock: &str, grant: &Grant) -> Reply {
        match self.form {
            Form::Session => {
                let s = match self.session_of(client, Some(grant)) {
                    Ok(s) => s,
                    Err(f) => return f.into(),
                };
                let key = key_of(lock);
                let q = self.one(&s.client, "SELECT pg_advisory_unlock($1)", &[&key]).await;
                holder_answer(self.sessions.forget_if_failed(client, q))
            }
            Form::Xact => {
                let s = match self.txn_of(client, Some(grant)) {
                    Ok(s) => s,
                    Err(f) => return f.into(),
                };
                s.in_txn.store(false, Ordering::SeqCst);
                let r = self.bounded(self.op_timeout, s.client.batch_execute("ROLLBACK")).await;
                match self.sessions.forget_if_failed(client, r) {
                    Ok(()) => Reply::Ok(json!({})),
                    Err(f) => f.into(),
                }
            }
        }
    }

    /// Reads `key` inside the client's open transaction (form=xact).
    async fn read_register(&self, client: &str, key: &str) -> Reply {
        let s = match self.txn_of(client, None) {
            Ok(s) => s,
            Err(f) => return f.into(),
        };
        let sql = format!("SELECT value FROM {TABLE} WHERE key = $1");
        let q = self.opt(&s.client, &sql, &[&key]).await;
        match self.sessions.forget_if_failed(client, q) {
            Ok(row) => Reply::Ok(json!({ "value": row.map_or(0, |r| r.get::<_, i64>(0)) })),
            Err(f) => {
                s.in_txn.store(false, Ordering::SeqCst);
                f.into()
            }
        }
    }

    /// Writes `value` to `key` and commits the client's transaction (form=xact): the lock goes
    /// with the commit. Until `COMMIT` is sent nothing can have been applied.
    async fn write_register(&self, client: &str, key: &str, value: i64) -> Reply {
        let s = match self.txn_of(client, None) {
            Ok(s) => s,
            Err(f) => return f.into(),
        };
        // From here the transaction ends, one way or another.
        s.in_txn.store(false, Ordering::SeqCst);
        let sql = format!(
            "INSERT INTO {TABLE} (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        );
        let params: [&(dyn ToSql + Sync); 2] = [&key, &value];
        let upsert = self
            .bounded(self.op_timeout, s.client.execute(&sql, &params))
            .await;
        if let Err(f) = upsert {
            // Not committed: dropping the session rolls the transaction back.
            self.forget(client);
            return Reply::Fail(match f {
                Failure::Definite(e) | Failure::Indefinite(e) => e,
            });
        }
        let commit = tokio::time::timeout(self.op_timeout, s.client.batch_execute("COMMIT")).await;
        match commit {
            Ok(Ok(())) => {
                let mut body = Map::new();
                let committed = HoldEvidence {
                    hold: None,
                    committed: Some(true),
                };
                committed.write_into(&mut body);
                Reply::Ok(Value::Object(body))
            }
            Ok(Err(e)) if e.as_db_error().is_some() => {
                // The server answered COMMIT with an error: rolled back.
                self.forget(client);
                failure_of(&e).into()
            }
            Ok(Err(e)) => {
                self.forget(client);
                Reply::Info(with_detail("transport", &format!("COMMIT sent: {e}")))
            }
            Err(_) => {
                self.forget(client);
                Reply::Info("timeout; COMMIT sent".into())
            }
        }
    }

    /// The closing read, on a connection of its own outside any transaction.
    async fn inspect_register(&self, key: &str) -> Reply {
        let pg = match self.open().await {
            Ok(pg) => pg,
            Err(f) => return f.into(),
        };
        if let Err(f) = self.ensure_table(&pg).await {
            return f.into();
        }
        let sql = format!("SELECT value FROM {TABLE} WHERE key = $1");
        match self.opt(&pg, &sql, &[&key]).await {
            Ok(row) => Reply::Ok(json!({ "value": row.map_or(0, |r| r.get::<_, i64>(0)) })),
            Err(f) => f.into(),
        }
    }
}

impl LockClient for PgLock {
    crate::api::waiting_acquire_ops!();
    /// A dead process's connection closes: its backend ends, and the session's locks with it.
    fn crashed(&self, client: &str) {
        self.forget(client);
    }
    fn renew<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(self.renew_grant(client, lock, grant, ttl_ms))
    }
    fn release<'a>(
        &'a self,
        client: &'a str,
        lock: &'a str,
        grant: &'a Grant,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(self.release_grant(client, lock, grant))
    }
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        let key = key_of(lock);
        let (request, ok, refused) = match (op, self.form) {
            ("acquire", Form::Session) => (
                format!("SELECT pg_try_advisory_lock({key}) every {POLL_MS} ms until the wait is over"),
                "true",
                "false",
            ),
            ("renew", Form::Session) => (
                format!("SELECT EXISTS (this session's granted advisory lock {key} in pg_locks)"),
                "true",
                "false",
            ),
            (_, Form::Session) => (format!("SELECT pg_advisory_unlock({key})"), "true", "false"),
            ("acquire", Form::Xact) => (
                format!(
                    "BEGIN; SET LOCAL lock_timeout = <wait>; SELECT pg_advisory_xact_lock({key}) \
                     (pg_try_advisory_xact_lock when the wait is 0)"
                ),
                "granted, the transaction left open",
                "55P03 lock_not_available (or false), then ROLLBACK",
            ),
            ("renew", Form::Xact) => (
                "SELECT set_config(...) in the grant's transaction".to_string(),
                "a row",
                "an error (the session or the transaction is gone)",
            ),
            (_, Form::Xact) => (
                "ROLLBACK of the grant's transaction".to_string(),
                "ROLLBACK",
                "no transaction open",
            ),
        };
        Wire {
            request,
            ok: ok.into(),
            refused: refused.into(),
        }
    }
}

impl FencedResource for PgLock {
    fn read<'a>(&'a self, client: &'a str, key: &'a str, _token: u64) -> BoxFuture<'a, Reply> {
        Box::pin(self.read_register(client, key))
    }
    fn write<'a>(
        &'a self,
        client: &'a str,
        key: &'a str,
        _token: u64,
        value: i64,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(self.write_register(client, key, value))
    }
    fn inspect<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Reply> {
        Box::pin(self.inspect_register(key))
    }
    fn resource_wire(&self, op: &str, key: &str) -> Wire {
        let (request, ok) = match op {
            "read" => (
                format!("SELECT value FROM {TABLE} WHERE key = '{key}' (in the grant's transaction)"),
                "a row, or none (0)",
            ),
            _ => (
                format!("INSERT INTO {TABLE} ... ON CONFLICT DO UPDATE ('{key}'); COMMIT"),
                "COMMIT",
            ),
        };
        Wire {
            request,
            ok: ok.into(),
            refused: "an error (rolled back)".into(),
        }
    }
}

/// The bin directory of PostgreSQL's programs here: the one holding `postgres` on `PATH`,
/// else the highest version under `/usr/lib/postgresql` (where Debian's package puts them,
/// off `PATH`).
pub(crate) fn bin_dir() -> Option<PathBuf> {
    if let Some(p) = crate::service::find_on_path("postgres") {
        return p.parent().map(PathBuf::from);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// The start command's script. It finds the programs as [`bin_dir`] does (on the host that
/// runs it), makes the data directory once with `initdb`, and ends by exec'ing the postmaster,
/// so the pid lockpick signals is the postmaster's. As root it runs them as user `postgres`
/// (postgres refuses root), keeping the one capability that lets it reach a data directory
/// under a directory only root may enter (`CAP_DAC_READ_SEARCH`: search and read, no write).
/// After a kill it first waits, a bounded while, for the killed server's backends (which end
/// themselves once they see the postmaster gone) to leave the directory: a new postmaster
/// refuses to start while they still hold the old shared memory. Under libfaketime (clock
/// faults' fallback backend) the root shell's libfaketime made a semaphore that user
/// `postgres` may not open and names it in `FAKETIME_SHARED`: unset, each program makes its
/// own (the clock file is re-read on each call either way; checked: a server's `now()` moved
/// with the file). initdb trusts only loopback; a server on a host's or a namespace's address
/// also trusts the harness's own: the address its ssh session came from, or the server's own
/// subnets (`samenet`), for the one role and database lockpick uses.
fn start_script() -> String {
    let script = r#"set -e
P=$(command -v postgres || true)
if [ -n "$P" ]; then B=$(dirname "$P"); else B=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4,4n | tail -n 1); fi
if [ -z "$B" ] || [ ! -x "$B/postgres" ]; then echo "postgres is not installed (apt-get install postgresql)" >&2; exit 127; fi
mkdir -p "{data_dir}"
D=$(cd "{data_dir}" && pwd -P)
RUN=
if [ "$(id -u)" = 0 ]; then
  chown -R postgres:postgres "$D"
  RUN="setpriv --reuid=postgres --regid=postgres --init-groups --inh-caps=+dac_read_search --ambient-caps=+dac_read_search --"
fi
i=0
while [ $i -lt 50 ] && ls -l /proc/[0-9]*/cwd 2>/dev/null | grep -q -- "-> $D\$"; do sleep 0.1; i=$((i+1)); done
cd "$D"
unset FAKETIME_SHARED
if [ ! -f "$D/PG_VERSION" ]; then $RUN "$B/initdb" -D "$D" -A trust -U lockpick --no-sync >"$D/../initdb.log"; fi
if [ -n "$SSH_CLIENT" ]; then A=$(echo "$SSH_CLIENT" | cut -d' ' -f1); case $A in *:*) A=$A/128;; *) A=$A/32;; esac; else A=samenet; fi
grep -q "lockpick-harness" "$D/pg_hba.conf" || echo "host $DB lockpick $A trust # lockpick-harness" >> "$D/pg_hba.conf"
exec $RUN "$B/postgres" -D "$D" -p {port} -c listen_addresses={host} -c unix_socket_directories= -c fsync=on -c max_connections=CONNECTIONS"#;
    script
        .replace("CONNECTIONS", &SERVER_CONNECTIONS.to_string())
        .replace("$DB", DATABASE)
}

/// The v3 startup packet for user `lockpick`, database `postgres`, then a Terminate: a server
/// that serves answers AuthenticationOk (trust) and ends the session at once; one still
/// starting answers an error.
fn startup_packet() -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec(); // protocol 3.0
    for s in ["user", USER, "database", DATABASE] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut packet = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    packet.extend_from_slice(&[b'X', 0, 0, 0, 4]);
    packet
}

/// The evidence each op's answer carries (docs/history.md).
const EVIDENCE: &[&[history::Field]] = &[HoldEvidence::FIELDS, PgEvidence::FIELDS];

history::evidence! {
    /// What a grant carries beyond its `hold` (docs/history.md). Kept.
    pub(crate) struct PgEvidence for "postgres" {
        /// The server backend that answered the grant.
        pg_backend_pid: u64,
    }
}

const OPTIONS: &[ServiceOption] = &[ServiceOption {
    name: "form",
    values: &["session", "xact"],
    help: "session: pg_try_advisory_lock held by the client's session (the counter needs \
           tokens it has none of: mutex); xact: pg_advisory_xact_lock in a transaction that \
           also reads and writes the counter's register and commits it",
}];

/// How long a fast shutdown may take before the server is killed: its shutdown checkpoint
/// fsyncs, which on a shared, busy disk has taken seconds; a server that exits sooner is not
/// waited for.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// One PostgreSQL server (Debian's `postgresql`), started by lockpick with fresh data for
/// each run, its advisory locks the lock.
pub struct Postgres;

impl Service for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }
    fn about(&self) -> &'static str {
        "PostgreSQL advisory locks on one server lockpick starts from Debian's `postgresql` (a session's lock, or a transaction's with the counter's register written inside it)"
    }
    fn launch(&self, _l: &Launch) -> Option<Vec<String>> {
        Some(vec!["sh".into(), "-c".into(), start_script()])
    }
    fn readiness(&self) -> Readiness {
        Readiness::Exchange {
            name: "startup",
            send: startup_packet(),
            expect: vec![b'R', 0, 0, 0, 8, 0, 0, 0, 0],
        }
    }
    fn url_schemes(&self) -> &'static [&'static str] {
        &["postgres", "postgresql"]
    }
    fn shutdown(&self) -> Shutdown {
        // SIGTERM is PostgreSQL's smart shutdown: it waits for every session to end, and the
        // workers' sessions stay open until their idle timeout (the lease's ttl) ends them, so
        // with a ttl of 2 s or more the default's 2 s ran out and the kill left the server's
        // /dev/shm segments behind (it removes them only as it exits). SIGINT is its fast
        // shutdown: it ends the sessions, writes a checkpoint (with fsync on: seconds on a
        // loaded disk) and exits, its segments removed.
        Shutdown {
            signal: StopSignal::Int,
            grace: SHUTDOWN_GRACE,
        }
    }
    fn tokens(&self, _options: &ServiceOptions) -> Tokens {
        Tokens::None
    }
    fn grant_guards_resource(&self, options: &ServiceOptions) -> bool {
        Form::of(options) == Form::Xact
    }
    fn options(&self) -> &'static [ServiceOption] {
        OPTIONS
    }
    fn fencing_hint(&self) -> Option<&'static str> {
        Some("--adapter-opt form=xact")
    }
    fn program(&self) -> Option<(&'static str, &'static str)> {
        Some(("postgres", "postgresql"))
    }
    fn find_program(&self) -> Option<PathBuf> {
        bin_dir().map(|b| b.join("postgres"))
    }
    fn own_resource(&self, options: &ServiceOptions) -> bool {
        // The session form guards lockpick's store beside it, as a team's session lock
        // guards what its pool writes: the lock's connection is not the data's.
        Form::of(options) == Form::Xact
    }
    fn holds_several_locks(&self, options: &ServiceOptions) -> bool {
        // A session holds any number of advisory locks; a transaction-scoped lock ends with
        // the transaction the first account's write commits.
        Form::of(options) == Form::Session
    }
    fn check(&self, s: &Settings) -> Result<(), String> {
        if s.nodes > 1 {
            return Err(format!(
                "--nodes {}: --adapter postgres is one server (its advisory locks are not \
                 replicated)",
                s.nodes
            ));
        }
        Ok(())
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let refused = ConnectError::refused_by(self.name());
        let no_host_port = || refused(format!("{}: no host and port", c.url));
        let (host, port) = host_port(c.url).ok_or_else(no_host_port)?;
        let form = Form::of(&c.options.own);
        let lock = Arc::new(PgLock::new(&host, port, form, c.op_timeout));
        let resource = match form {
            Form::Xact => Some(lock.clone() as Arc<dyn FencedResource>),
            Form::Session => c.store_beside()?,
        };
        Ok(Adapter::new(lock, resource).with_evidence(EVIDENCE))
    }
}

/// A session's check or unlock answered with one boolean: still the holder, or not.
fn holder_answer(answer: Result<tokio_postgres::Row, Failure>) -> Reply {
    match answer {
        Ok(row) if row.get::<_, bool>(0) => Reply::Ok(json!({})),
        Ok(_) => Reply::Fail("not-holder".into()),
        Err(f) => f.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_key_is_stable_and_shown_in_two_halves() {
        // FNV-1a's published value for the empty input, and one name of the workload.
        assert_eq!(key_of("") as u64, 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_of("L0"), key_of("L0"));
        assert_ne!(key_of("L0"), key_of("L1"));
        let (hi, lo) = halves(-2);
        assert_eq!((hi, lo), (u32::MAX, u32::MAX - 1));
    }

    #[test]
    fn the_startup_packet_is_sized_and_ends_with_a_terminate() {
        let p = startup_packet();
        let len = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize;
        assert_eq!(len + 5, p.len());
        assert_eq!(&p[4..8], &196_608u32.to_be_bytes());
        assert_eq!(&p[len..], &[b'X', 0, 0, 0, 4]);
    }

    #[test]
    fn the_start_script_fills_only_lockpicks_placeholders() {
        let ph = nemesis::Placeholders {
            id: "n1".into(),
            host: "127.0.0.1".into(),
            port: 5432,
            data_dir: "/tmp/run/n1/data".into(),
            peers: String::new(),
            extra: Vec::new(),
        };
        let line = nemesis::substitute(&start_script(), &ph).unwrap();
        assert!(line.contains("mkdir -p \"/tmp/run/n1/data\""), "{line}");
        assert!(line.contains("-p 5432 -c listen_addresses=127.0.0.1"), "{line}");
        assert!(!line.contains('{') && !line.contains('}'), "{line}");
    }
}
