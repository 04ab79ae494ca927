//! The reference lock service (`lockd`) and the fenced store that lockpick tests by default.
//!
//! Main types:
//!
//! - [`serve_lockd`] with [`LockdConfig`]: the lock service of docs/protocol.md. Leases run
//!   on the monotonic clock; fencing tokens are persisted in `data_dir` (see
//!   [`STATE_FILE_NAME`]) before any grant is acknowledged, so they keep increasing across
//!   `kill -9`; after a restart every acquire is answered `recovering`
//!   until any lease the previous incarnation may have granted has surely expired.
//!   With [`LockdConfig::peers`] it is one member of a fixed membership: the member with the
//!   smallest address ([`primary_of`]) holds all lock state, the others relay acquire, renew
//!   and release to it (one attempt, [`FORWARD_TIMEOUT_MS`]) and answer 503
//!   `primary-unreachable` when they cannot: safe, not highly available. Responses name the
//!   member that decided in [`NODE_HEADER`].
//!   With [`LockdConfig::order`] set to a [`TimestampOrder`] the members instead decide
//!   together: each stamps its clients' requests with its own clock in ticks, exchanges them
//!   with the others, and grants when its request has the smallest timestamp (ties broken by
//!   member id, except in the `no-tiebreak` anti-pattern): Lamport's mutual exclusion with
//!   physical timestamps, not fault tolerant, with no durable state. With a [`RingOrder`]
//!   one token goes round the members and only its holder grants: the textbook's token ring,
//!   which loses the token when its holder dies (the `ring-regenerate` anti-pattern makes a
//!   second one on a timeout).
//! - [`UnsafeMode`]: one deliberately broken behaviour per variant (reused tokens, no TTL,
//!   wall-clock leases, no token check, a check-then-grant race, split-brain local grants),
//!   so the harness can prove that it catches each anti-pattern.
//! - [`serve_store`] with [`StoreConfig`] and [`FenceMode`]: the protected resource, an
//!   in-memory map of `i64` registers that rejects tokens below its fence.
//! - [`LockdError`]: why a server could not start or stopped; [`ParseModeError`]: an unknown
//!   mode name, listing the valid ones.
//!
//! Invariant (absence): no handler holds a state mutex across an `.await`. The mutexes are
//! `std::sync::Mutex`, whose guard is `!Send`, so a handler that kept one across an await
//! would not compile as an axum handler. Even the `racy` mode keeps it: it breaks atomicity
//! by dropping the mutex between its check and its grant, not by holding it while waiting.
//!
//! Invariants (absence) of a multi-node lockd: a non-primary member never grants, renews or
//! releases from its own table except in the `split-brain` mode, and a relayed request is
//! never relayed again (a member that is not the sender's primary refuses it), so a
//! misconfigured membership cannot loop or elect two primaries silently.
//!
//! Invariants (absence) of a token ring: a member never grants without the token, never passes
//! it while a lease it granted is live, and grants nothing while a pass it sent is
//! unacknowledged; no token is made after the first member's first start except by the
//! `ring-regenerate` mode.

mod cluster;
mod error;
mod http;
mod mode;
mod order;
mod ordered;
mod persist;
mod ring;
mod service;
mod store;

pub use cluster::{primary_of, FORWARD_TIMEOUT_MS, NODE_HEADER};
pub use error::{LockdError, ParseModeError, ParseOrderError};
pub use mode::{FenceMode, UnsafeMode};
pub use order::LockOrder;
pub use ordered::TimestampOrder;
pub use persist::STATE_FILE_NAME;
pub use ring::{RingOrder, REGENERATE_AFTER_MS, RING_MARKER};
pub use service::{serve_lockd, LockdConfig};
pub use store::{serve_store, StoreConfig};
