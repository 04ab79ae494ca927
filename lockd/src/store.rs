//! The fenced store: the resource a lock protects, rejecting tokens below its fence.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::error::LockdError;
use crate::http::{
    health, named_request, not_found, path_name, ApiError, ClientBody, BODY_BYTES_MAX,
};
use crate::mode::{FenceMode, CHECK_PUT_GAP_MS};

/// Registers are never dropped (their value is the state under test), so their number is
/// capped instead.
const KEYS_MAX: usize = 100_000;

/// How to run the fenced store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub fence: FenceMode,
}

/// Serves the fenced store on `listener` until `shutdown` resolves. State is in memory only:
/// a restart empties the store, which the harness sees as lost writes.
///
/// # Errors
///
/// The listener has no local address, or the server fails.
pub async fn serve_store(
    listener: TcpListener,
    cfg: StoreConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LockdError> {
    let addr = listener.local_addr().map_err(LockdError::LocalAddr)?;
    info!(%addr, fence = %cfg.fence, "store listening");
    let hole = match cfg.fence {
        FenceMode::All => None,
        FenceMode::Write => Some("does not fence reads"),
        FenceMode::None => Some("does not fence reads or writes"),
        FenceMode::OffByOne => Some("lets a token one below the fence through"),
        FenceMode::CheckThenPut => {
            Some("checks a write's token, then puts it in a second step, not atomically")
        }
        FenceMode::OneUnfenced => {
            Some("does not fence the register named ...0 (balance-A0, counter-L0)")
        }
    };
    if let Some(hole) = hole {
        warn!(
            "fence mode `{}`: the store {hole}; stale holders can corrupt data",
            cfg.fence
        );
    }
    let svc = Arc::new(Store {
        fence: cfg.fence,
        registers: Mutex::new(HashMap::new()),
    });
    let app = Router::new()
        .route("/v1/store/{key}/read", post(read_handler))
        .route("/v1/store/{key}/write", post(write_handler))
        .route("/v1/store/{key}", get(get_handler))
        .route("/v1/health", get(health))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(svc);
    let listener = listener.tap_io(|tcp| {
        // Same reason as lockd: keep-alive request/response pairs must not wait on Nagle.
        if let Err(e) = tcp.set_nodelay(true) {
            debug!("set_nodelay failed: {e}");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(LockdError::Serve)?;
    info!(%addr, "store stopped");
    Ok(())
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Register {
    value: i64,
    /// Highest token seen by an operation the mode lets move the fence.
    fence: u64,
    /// Accepted writes so far: the store's acceptance order.
    seq: u64,
    /// `one-unfenced`: this register is the one left without a fence.
    unfenced: bool,
}

struct Store {
    fence: FenceMode,
    /// Never held across an `.await`: every operation is one synchronous critical section.
    registers: Mutex<HashMap<String, Register>>,
}

impl Store {
    /// How `reg` is fenced: the store's mode, but for `one-unfenced` each register's own.
    fn mode_of(&self, reg: &Register) -> FenceMode {
        match self.fence {
            FenceMode::OneUnfenced if reg.unfenced => FenceMode::None,
            FenceMode::OneUnfenced => FenceMode::All,
            m => m,
        }
    }

    fn registers(&self) -> MutexGuard<'_, HashMap<String, Register>> {
        self.registers.lock().expect("store mutex poisoned")
    }

    /// Runs `op` on `key`'s register, creating it if new.
    fn with_register<T>(
        &self,
        key: &str,
        op: impl FnOnce(&mut Register) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let mut regs = self.registers();
        if let Some(reg) = regs.get_mut(key) {
            return op(reg);
        }
        if regs.len() >= KEYS_MAX {
            return Err(ApiError::Unavailable("too-many-keys"));
        }
        let unfenced = self.fence == FenceMode::OneUnfenced && numbered_zero(key);
        op(regs.entry(key.to_owned()).or_insert(Register {
            unfenced,
            ..Register::default()
        }))
    }
}

/// Whether `key` ends in the number 0 (`balance-A0`, `counter-L0`; not `balance-A10`): the
/// register `one-unfenced` leaves open. By name, not by creation order, so the probe's own
/// register (created first) does not take its place.
fn numbered_zero(key: &str) -> bool {
    key.strip_suffix('0')
        .is_some_and(|rest| !rest.ends_with(|c: char| c.is_ascii_digit()))
}

/// Whether `mode` refuses `token` against `fence`.
fn stale(mode: FenceMode, token: u64, fence: u64) -> bool {
    match mode {
        FenceMode::All | FenceMode::Write => token < fence,
        // The bug: one below the fence passes.
        FenceMode::OffByOne => token.saturating_add(1) < fence,
        FenceMode::None => false,
        // Resolved per register by `Store::mode_of` before any check.
        FenceMode::OneUnfenced => token < fence,
        // Only the check step of a write, which `check_then_put` calls itself.
        FenceMode::CheckThenPut => token < fence,
    }
}

/// Returns the fence to report.
fn read(mode: FenceMode, reg: &mut Register, token: u64) -> Result<u64, ApiError> {
    match mode {
        FenceMode::All | FenceMode::OffByOne | FenceMode::OneUnfenced => {
            if stale(mode, token, reg.fence) {
                return Err(ApiError::StaleToken { fence: reg.fence });
            }
            reg.fence = reg.fence.max(token);
        }
        FenceMode::Write | FenceMode::CheckThenPut => {}
        // Not a check: the fence is evidence of the highest token that reached the store.
        FenceMode::None => reg.fence = reg.fence.max(token),
    }
    Ok(reg.fence)
}

/// Returns (seq, fence) of the accepted write.
fn write(
    mode: FenceMode,
    reg: &mut Register,
    token: u64,
    value: i64,
) -> Result<(u64, u64), ApiError> {
    check_write(mode, reg, token)?;
    Ok(put(reg, reg.fence.max(token), value))
}

/// A write's fence check, without its effect.
fn check_write(mode: FenceMode, reg: &Register, token: u64) -> Result<(), ApiError> {
    if stale(mode, token, reg.fence) {
        return Err(ApiError::StaleToken { fence: reg.fence });
    }
    Ok(())
}

/// A write's effect; returns (seq, fence).
fn put(reg: &mut Register, fence: u64, value: i64) -> (u64, u64) {
    reg.fence = fence;
    reg.value = value;
    reg.seq += 1;
    (reg.seq, reg.fence)
}

#[derive(Deserialize)]
struct ReadReq {
    client: String,
    token: u64,
}

#[derive(Deserialize)]
struct WriteReq {
    client: String,
    token: u64,
    value: i64,
}

impl ClientBody for ReadReq {
    fn client(&self) -> &str {
        &self.client
    }
}

impl ClientBody for WriteReq {
    fn client(&self) -> &str {
        &self.client
    }
}

async fn read_handler(
    State(store): State<Arc<Store>>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let (key, req): (String, ReadReq) = named_request("key", path, &body)?;
    let (value, fence, seq) = store.with_register(&key, |reg| {
        let fence = read(store.mode_of(reg), reg, req.token)?;
        Ok((reg.value, fence, reg.seq))
    })?;
    // `seq`: the number of the accepted write whose value this is (0: none yet), so a reader's
    // critical section can be placed among the writers'.
    Ok(Json(json!({ "value": value, "fence": fence, "seq": seq })))
}

async fn write_handler(
    State(store): State<Arc<Store>>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let (key, req): (String, WriteReq) = named_request("key", path, &body)?;
    let (seq, fence) = if store.fence == FenceMode::CheckThenPut {
        check_then_put(&store, &key, req.token, req.value).await?
    } else {
        store.with_register(&key, |reg| {
            write(store.mode_of(reg), reg, req.token, req.value)
        })?
    };
    Ok(Json(json!({ "seq": seq, "fence": fence })))
}

/// The `check-then-put` anti-pattern: `last := get(key); if token < last { reject };
/// put(key, value, token)` as two critical sections with the store's own storage round trip
/// between them, so another write can land in between and this put then overwrites it with
/// a lower token (and sets the fence back to it, as a put of the pair does).
async fn check_then_put(
    store: &Store,
    key: &str,
    token: u64,
    value: i64,
) -> Result<(u64, u64), ApiError> {
    store.with_register(key, |reg| check_write(FenceMode::CheckThenPut, reg, token))?;
    tokio::time::sleep(std::time::Duration::from_millis(CHECK_PUT_GAP_MS)).await;
    store.with_register(key, |reg| Ok(put(reg, token, value)))
}

/// Observes without fencing, so the harness can inspect a register without a token.
async fn get_handler(
    State(store): State<Arc<Store>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let key = path_name("key", path)?;
    let reg = store.registers().get(&key).copied().unwrap_or_default();
    Ok(Json(
        json!({ "value": reg.value, "fence": reg.fence, "seq": reg.seq }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_check_and_move_the_fence() {
        fn stale<T>(fence: u64) -> Result<T, ApiError> {
            Err(ApiError::StaleToken { fence })
        }

        let mut r = Register::default();
        assert_eq!(write(FenceMode::All, &mut r, 5, 1), Ok((1, 5)));
        assert_eq!(read(FenceMode::All, &mut r, 4), stale(5));
        assert_eq!(read(FenceMode::All, &mut r, 7), Ok(7));
        assert_eq!(write(FenceMode::All, &mut r, 6, 2), stale(7));

        let mut r = Register::default();
        assert_eq!(read(FenceMode::Write, &mut r, 9), Ok(0));
        assert_eq!(write(FenceMode::Write, &mut r, 5, 1), Ok((1, 5)));
        assert_eq!(read(FenceMode::Write, &mut r, 1), Ok(5));
        assert_eq!(write(FenceMode::Write, &mut r, 4, 2), stale(5));

        // off-by-one: one below the fence passes (and leaves the fence), two below do not.
        let mut r = Register::default();
        assert_eq!(read(FenceMode::OffByOne, &mut r, 7), Ok(7));
        assert_eq!(write(FenceMode::OffByOne, &mut r, 6, 1), Ok((1, 7)));
        assert_eq!(read(FenceMode::OffByOne, &mut r, 6), Ok(7));
        assert_eq!(write(FenceMode::OffByOne, &mut r, 5, 2), stale(7));
        assert_eq!(read(FenceMode::OffByOne, &mut r, 5), stale(7));
        assert_eq!(write(FenceMode::All, &mut r, 6, 2), stale(7));

        // check-then-put: reads pass and leave the fence; the check alone refuses a lower token.
        let mut r = Register::default();
        assert_eq!(write(FenceMode::CheckThenPut, &mut r, 5, 1), Ok((1, 5)));
        assert_eq!(read(FenceMode::CheckThenPut, &mut r, 3), Ok(5));
        assert_eq!(check_write(FenceMode::CheckThenPut, &r, 4), stale(5));
        assert_eq!(check_write(FenceMode::CheckThenPut, &r, 5), Ok(()));

        let mut r = Register::default();
        assert_eq!(write(FenceMode::None, &mut r, 5, 1), Ok((1, 5)));
        assert_eq!(write(FenceMode::None, &mut r, 3, 2), Ok((2, 5)));
        assert_eq!(read(FenceMode::None, &mut r, 8), Ok(8));
        assert_eq!(
            r,
            Register {
                value: 2,
                fence: 8,
                seq: 2,
                unfenced: false,
            }
        );
    }

    #[tokio::test]
    async fn check_then_put_lets_a_stale_put_land_after_a_newer_write() {
        let store = Arc::new(Store {
            fence: FenceMode::CheckThenPut,
            registers: Mutex::new(HashMap::new()),
        });
        let stale_writer = {
            let store = Arc::clone(&store);
            tokio::spawn(async move { check_then_put(&store, "k", 5, 1).await })
        };
        // Inside the stale writer's gap, the next holder's write lands in full.
        tokio::time::sleep(std::time::Duration::from_millis(CHECK_PUT_GAP_MS / 4)).await;
        let newer = store.with_register("k", |reg| write(FenceMode::CheckThenPut, reg, 6, 2));
        assert_eq!(newer, Ok((1, 6)));
        // The stale put is accepted after it, with the lower token, and sets the fence back.
        assert_eq!(stale_writer.await.unwrap(), Ok((2, 5)));
        assert_eq!(store.registers()["k"].value, 1);
    }
}
