//! What adapters record about a grant beyond the reference protocol, read from a completion's
//! value: lease evidence (`lease_last_ok_ns`, `lease_ttl_ms`, `lease_from_ns`) and the
//! service's own record of the lock key at the revision it answered at. A leaf module: the
//! digest reads it, the model keeps it, the lease checker judges it.

use serde_json::Value;

/// An evidence field the reader typed (docs/history.md): an unsigned integer or absent, never
/// a float truncated into one.
pub(crate) fn as_u64(v: Option<&Value>) -> Option<u64> {
    v?.as_u64()
}

/// What the adapter found when it read the grant's lock key at the revision the answer carries
/// (`key_at_revision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// The key existed at that revision: the grant held there.
    Present,
    /// No key at that revision: the service granted without holding the lock for this client.
    Absent,
    /// The service had compacted that revision away: nothing can be said.
    Compacted,
    /// The read failed (timeout, error): nothing can be said.
    Unread,
}

impl KeyState {
    pub fn parse(s: &str) -> Option<KeyState> {
        Some(match s {
            "present" => KeyState::Present,
            "absent" => KeyState::Absent,
            "compacted" => KeyState::Compacted,
            "unread" => KeyState::Unread,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            KeyState::Present => "present",
            KeyState::Absent => "absent",
            KeyState::Compacted => "compacted",
            KeyState::Unread => "unread",
        }
    }
}

/// The adapter's read of the service's own record of a grant: `answer_revision` (the revision
/// the grant's answer carries), `lock_key`, `key_at_revision`, and `lease_id` when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEvidence {
    pub revision: u64,
    pub state: KeyState,
    pub lock_key: String,
    pub lease_id: Option<String>,
}

/// What an adapter recorded about a grant beyond the reference protocol (rare: etcd grants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantEvidence {
    /// `lease_from_ns`: the grant came with a lease set before it (etcd: the session lease,
    /// granted and kept alive while the client waited), which surely lasts until this instant
    /// plus its ttl, whenever the grant took effect; the grant does not set a lease of its own.
    pub lease_from_ns: Option<u64>,
    /// The read of the grant's lock key at its answer's revision.
    pub key: Option<KeyEvidence>,
    /// `round`: the contention round the acquire was made in (`--arrivals rounds:...`).
    pub round: Option<u64>,
    /// `grant`: the service's own name for the grant (a Redis lock value), on an ok acquire
    /// and on the renews and releases sent for it: what names the lease when no token does.
    pub grant: Option<String>,
    /// `hold`: how long an ok acquire holds when it is not a lease ([`Hold`]); `None` for a
    /// lease (and for a value this version does not know: read as a lease).
    pub hold: Option<Hold>,
    /// `wait_ms`: how long an acquire asked the service to wait for a held lock (the bank
    /// workload records it): a correct service answers the wait by then.
    pub wait_ms: Option<u64>,
    /// `transfer`: the critical section (the bank workload's transfer) the op belongs to.
    pub transfer: Option<u64>,
}

/// An ok acquire's `hold` (docs/history.md): a grant that is no lease the holder can count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// `session`: held while the client's session lives (a PostgreSQL session advisory lock, a
    /// ZooKeeper ephemeral node). The holder is not told when the session ends, so it believes
    /// it holds the lock from the grant until it releases it or an op on the lock tells it
    /// otherwise (docs/checkers.md, model item 9).
    Session,
    /// `transaction`: held until the transaction it was taken in ends, and the protected write
    /// commits in that transaction (PostgreSQL's `pg_advisory_xact_lock`): no hold is proven;
    /// the data is what is judged.
    Transaction,
}

impl Hold {
    pub fn parse(s: &str) -> Option<Hold> {
        match s {
            "session" => Some(Hold::Session),
            "transaction" => Some(Hold::Transaction),
            _ => None,
        }
    }
}

impl GrantEvidence {
    /// From the value fields as recorded (`get` looks one up); `None` when there is none.
    pub(crate) fn read<'a>(get: impl Fn(&str) -> Option<&'a Value>) -> Option<Box<Self>> {
        let key = (|| {
            Some(KeyEvidence {
                revision: as_u64(get("answer_revision"))?,
                state: KeyState::parse(get("key_at_revision")?.as_str()?)?,
                lock_key: get("lock_key")?.as_str()?.to_string(),
                lease_id: get("lease_id").and_then(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                }),
            })
        })();
        let lease_from_ns = as_u64(get("lease_from_ns"));
        let round = as_u64(get("round"));
        let grant = get("grant").and_then(Value::as_str).map(str::to_string);
        let hold = get("hold").and_then(Value::as_str).and_then(Hold::parse);
        let wait_ms = as_u64(get("wait_ms"));
        let transfer = as_u64(get("transfer"));
        (key.is_some()
            || lease_from_ns.is_some()
            || round.is_some()
            || grant.is_some()
            || hold.is_some()
            || wait_ms.is_some()
            || transfer.is_some())
        .then(|| {
            Box::new(GrantEvidence {
                lease_from_ns,
                key,
                round,
                grant,
                hold,
                wait_ms,
                transfer,
            })
        })
    }
}
