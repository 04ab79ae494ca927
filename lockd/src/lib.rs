//! The reference lock service (`lockd`) and the fenced store that lockpick tests by default.
//!
//! Main types:
//!
//! - [`serve_lockd`] with [`LockdConfig`]: the lock service of DESIGN.md's "Reference lock
//!   protocol". Leases run on the monotonic clock; fencing tokens are persisted in
//!   `data_dir` (see [`STATE_FILE_NAME`]) before any grant is acknowledged, so they keep
//!   increasing across `kill -9`; after a restart every acquire is answered `recovering`
//!   until any lease the previous incarnation may have granted has surely expired.
//! - [`UnsafeMode`]: one deliberately broken behaviour per variant (reused tokens, no TTL,
//!   wall-clock leases, no token check, a check-then-grant race), so the harness can prove
//!   that it catches each anti-pattern.
//! - [`serve_store`] with [`StoreConfig`] and [`FenceMode`]: the protected resource, an
//!   in-memory map of `i64` registers that rejects tokens below its fence.
//! - [`LockdError`]: why a server could not start or stopped; [`ParseModeError`]: an unknown
//!   mode name, listing the valid ones.
//!
//! Invariant (absence): no handler holds a state mutex across an `.await`. The mutexes are
//! `std::sync::Mutex`, whose guard is `!Send`, so a handler that kept one across an await
//! would not compile as an axum handler. Even the `racy` mode keeps it: it breaks atomicity
//! by dropping the mutex between its check and its grant, not by holding it while waiting.

mod error;
mod http;
mod mode;
mod persist;
mod service;
mod store;

pub use error::{LockdError, ParseModeError};
pub use mode::{FenceMode, UnsafeMode};
pub use persist::STATE_FILE_NAME;
pub use service::{serve_lockd, LockdConfig};
pub use store::{serve_store, StoreConfig};
