//! What adapters record about a grant beyond the reference protocol, read from a completion's
//! value through the evidence sets `history` declares ([`history::evidence`]): lease evidence
//! (`lease_last_ok_ns`, `lease_ttl_ms`, `lease_from_ns`), the service's own record of the lock
//! key at the revision it answered at, how a grant holds, and the worker's context. A leaf
//! module: the digest reads it, the model keeps it, the lease checker judges it.

use history::{Evidence, HoldEvidence, LeaseEvidence, ReadBack, WorkerEvidence};
use serde_json::{Map, Value};

pub use history::{Hold, KeyState};

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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

impl GrantEvidence {
    /// From an op's value fields as recorded, read through the evidence sets that declare
    /// them: the lease evidence `grant-on-expired-lease` judges (when the lease was last surely
    /// alive, and its ttl, when both are recorded), and the rest, `None` when there is none.
    pub(crate) fn read(value: &Map<String, Value>) -> (Option<(u64, u64)>, Option<Box<Self>>) {
        let lease = LeaseEvidence::read(value);
        let lease_bound = lease.lease_last_ok_ns.zip(lease.lease_ttl_ms);
        let back = ReadBack::read(value);
        let key = (|| {
            Some(KeyEvidence {
                revision: back.answer_revision?,
                state: back.key_at_revision?,
                lock_key: back.lock_key?,
                lease_id: back.lease_id,
            })
        })();
        let worker = WorkerEvidence::read(value);
        let hold = HoldEvidence::read(value).hold;
        let evidence = GrantEvidence {
            lease_from_ns: lease.lease_from_ns,
            key,
            round: worker.round,
            grant: worker.grant,
            hold,
            wait_ms: worker.wait_ms,
            transfer: worker.transfer,
        };
        let evidence = (evidence != GrantEvidence::default()).then(|| Box::new(evidence));
        (lease_bound, evidence)
    }
}
