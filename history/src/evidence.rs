//! Evidence: what an adapter, or lockpick's worker, adds to an op's `value` beyond the
//! protocol's own fields (docs/history.md, "Fields of `value`"), declared as one typed struct
//! per writer with [`evidence!`]. The struct is how the writer writes the fields
//! ([`Evidence::write_into`]) and how a reader reads them back ([`Evidence::read`]); its field
//! list, registered into [`EVIDENCE_SETS`], is what the history reader holds each field's type
//! to. So a field's name and type are written once, where its writer is.
//!
//! The sets the checkers judge are declared here, in the vocabulary every crate shares:
//! [`LeaseEvidence`], [`ReadBack`], [`HoldEvidence`] and the worker's [`WorkerEvidence`]. A
//! service's own evidence, kept and not judged (a Redis master's identity, a ZooKeeper
//! session), is declared in the service's own file, so adding a service touches nothing here.

use crate::fields::{Field, FieldType};
use linkme::distributed_slice;
use std::sync::OnceLock;

// What `evidence!` expands to names these through this module, so a crate that declares
// evidence needs neither linkme nor serde_json of its own.
#[doc(hidden)]
pub use linkme;
#[doc(hidden)]
pub use serde_json::{Map, Value};

/// One writer's evidence fields, registered by [`evidence!`]: the reader types each field of
/// `value` it names.
#[derive(Debug)]
pub struct EvidenceSet {
    /// Who writes it (a service's `--adapter` name, or history's `lease`): how a test names
    /// two sets that declare one field.
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// Every evidence set of this build: history's own, and those the services' modules declare
/// (linked into any binary that links the workloads; a history read without them keeps those
/// fields unjudged, as any field it does not know).
#[distributed_slice]
pub static EVIDENCE_SETS: [EvidenceSet];

/// The evidence field `key` as a registered set declares it: the type the reader holds it to.
/// Asked for every key of a line's `value` the scanner does not type itself (a bank op's
/// `transfer` and `wait_ms`, a grant's name), so looked up in a table made once, not by a scan
/// of every set.
pub(crate) fn field(key: &str) -> Option<&'static Field> {
    // Sorted by name: a binary search of a few dozen short names beats hashing the key.
    static BY_NAME: OnceLock<Vec<&'static Field>> = OnceLock::new();
    let by_name = BY_NAME.get_or_init(|| {
        let mut by_name: Vec<&'static Field> =
            EVIDENCE_SETS.iter().flat_map(|set| set.fields).collect();
        // The first set to declare a name types it (a test holds every name to one set).
        by_name.sort_by_key(|f| f.name);
        by_name.dedup_by_key(|f| f.name);
        by_name
    });
    let i = by_name.binary_search_by(|f| f.name.cmp(key)).ok()?;
    Some(by_name[i])
}

/// A value an evidence field holds: its type in the reader's words, and how it is written into
/// `value` and read back from it.
pub trait EvidenceValue: Sized {
    const TYPE: FieldType;
    fn to_json(&self) -> Value;
    /// `None` for a value of another type, which the reader refuses before any checker sees it.
    fn from_json(v: &Value) -> Option<Self>;
}

impl EvidenceValue for u64 {
    const TYPE: FieldType = FieldType::U64;
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
    fn from_json(v: &Value) -> Option<u64> {
        v.as_u64()
    }
}

impl EvidenceValue for bool {
    const TYPE: FieldType = FieldType::Bool;
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
    fn from_json(v: &Value) -> Option<bool> {
        v.as_bool()
    }
}

impl EvidenceValue for String {
    const TYPE: FieldType = FieldType::Str;
    fn to_json(&self) -> Value {
        Value::from(self.as_str())
    }
    fn from_json(v: &Value) -> Option<String> {
        v.as_str().map(str::to_string)
    }
}

impl EvidenceValue for Vec<String> {
    const TYPE: FieldType = FieldType::Strings;
    fn to_json(&self) -> Value {
        Value::from(self.clone())
    }
    fn from_json(v: &Value) -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect()
    }
}

/// A struct of evidence fields declared with [`evidence!`].
pub trait Evidence: Default {
    /// Its fields, by name and type, in declaration order.
    const FIELDS: &'static [Field];
    /// Adds the fields that are set to `value` (an op's `value`, or an adapter's answer).
    fn write_into(&self, value: &mut Map<String, Value>);
    /// The fields as recorded in `value`; a field absent, or of another type, is `None`. One
    /// pass over its entries: an op's `value` holds a few, fewer than the fields to look up.
    fn read(value: &Map<String, Value>) -> Self;
}

/// Declares a struct of evidence fields, each an `Option` of an [`EvidenceValue`], and
/// registers its fields for the history reader under `name`:
///
/// ```ignore
/// history::evidence! {
///     /// What a grant of this service carries.
///     pub(crate) struct MyEvidence for "my-service" {
///         /// The server that answered.
///         my_node: String,
///         my_offset: u64,
///     }
/// }
/// ```
#[macro_export]
macro_rules! evidence {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident for $set:literal {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        $vis struct $name {
            $( $(#[$fmeta])* pub $field: Option<$ty>, )+
        }

        impl $crate::Evidence for $name {
            const FIELDS: &'static [$crate::Field] = &[
                $( $crate::Field::new(
                    stringify!($field),
                    <$ty as $crate::EvidenceValue>::TYPE,
                ), )+
            ];
            fn write_into(
                &self,
                value: &mut $crate::evidence::Map<String, $crate::evidence::Value>,
            ) {
                $(
                    if let Some(v) = &self.$field {
                        value.insert(
                            stringify!($field).to_string(),
                            $crate::EvidenceValue::to_json(v),
                        );
                    }
                )+
            }
            fn read(
                value: &$crate::evidence::Map<String, $crate::evidence::Value>,
            ) -> Self {
                let mut out = $name::default();
                // Bounded by the map's entries.
                for (k, v) in value {
                    match k.as_str() {
                        $( stringify!($field) => {
                            out.$field = <$ty as $crate::EvidenceValue>::from_json(v);
                        } )+
                        _ => {}
                    }
                }
                out
            }
        }

        const _: () = {
            #[$crate::evidence::linkme::distributed_slice($crate::EVIDENCE_SETS)]
            #[linkme(crate = $crate::evidence::linkme)]
            static SET: $crate::EvidenceSet = $crate::EvidenceSet {
                name: $set,
                fields: <$name as $crate::Evidence>::FIELDS,
            };
        };
    };
}

/// What an adapter found when it read the grant's lock key at the revision the answer carries
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

/// The words `value.key_at_revision` may hold, in [`KeyState`]'s order.
const KEY_STATE_WORDS: &[&str] = &["present", "absent", "compacted", "unread"];
const KEY_STATES: [KeyState; 4] = [
    KeyState::Present,
    KeyState::Absent,
    KeyState::Compacted,
    KeyState::Unread,
];

impl KeyState {
    pub fn parse(s: &str) -> Option<KeyState> {
        let i = KEY_STATE_WORDS.iter().position(|w| *w == s)?;
        Some(KEY_STATES[i])
    }
    pub fn as_str(self) -> &'static str {
        KEY_STATE_WORDS[self as usize]
    }
}

impl EvidenceValue for KeyState {
    // A word the checkers do not know would read as no evidence at all, and be explained as
    // a service that reports none: the reader refuses it.
    const TYPE: FieldType = FieldType::OneOf(KEY_STATE_WORDS);
    fn to_json(&self) -> Value {
        Value::from(self.as_str())
    }
    fn from_json(v: &Value) -> Option<KeyState> {
        KeyState::parse(v.as_str()?)
    }
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
    pub fn as_str(self) -> &'static str {
        match self {
            Hold::Session => "session",
            Hold::Transaction => "transaction",
        }
    }
}

impl EvidenceValue for Hold {
    // Any string: another value is read as a lease (docs/history.md), not refused, so a
    // history from a newer writer still reads.
    const TYPE: FieldType = FieldType::Str;
    fn to_json(&self) -> Value {
        Value::from(self.as_str())
    }
    fn from_json(v: &Value) -> Option<Hold> {
        Hold::parse(v.as_str()?)
    }
}

evidence! {
    /// The lease under a grant, from an adapter that can see it (etcd's): what
    /// `grant-on-expired-lease` judges, and where the checkers count a lease from.
    pub struct LeaseEvidence for "lease" {
        /// The latest instant a grant or keepalive of the lease could have taken effect before
        /// the acquire returned (`time_ns` clock).
        lease_last_ok_ns: u64,
        /// The lease's ttl.
        lease_ttl_ms: u64,
        /// The lease came before the grant (etcd's session lease, kept alive while the client
        /// waited): it surely lasts its ttl from this instant, whenever the grant took effect.
        lease_from_ns: u64,
    }
}

evidence! {
    /// The service's own record of a grant, read back at the revision its answer carries:
    /// what `grant-without-key` judges.
    pub struct ReadBack for "read-back" {
        /// The lock key the grant names.
        lock_key: String,
        /// The revision the grant's answer carries.
        answer_revision: u64,
        /// What reading the lock key at that revision found.
        key_at_revision: KeyState,
        /// The lease the key is attached to, as the service names it.
        lease_id: String,
    }
}

evidence! {
    /// How a grant holds when it is no lease, and a write that ends it: what the checkers'
    /// model (docs/checkers.md, item 9) and the worker read.
    pub struct HoldEvidence for "holds" {
        /// `session` or `transaction`; absent for a lease.
        hold: Hold,
        /// On an ok write: it committed the grant's transaction, ending the grant.
        committed: bool,
    }
}

evidence! {
    /// What lockpick's worker records itself: the service's name for the grant, and the
    /// workload's own context of an op.
    pub struct WorkerEvidence for "worker" {
        /// The service's own name for the grant ([`crate::GRANT`]), on an ok acquire and on
        /// the renews and releases sent for it.
        grant: String,
        /// The contention round the acquire was made in (`--arrivals rounds:...`).
        round: u64,
        /// How long an acquire asked the service to wait for a held lock (the bank).
        wait_ms: u64,
        /// The bank transfer the op belongs to.
        transfer: u64,
    }
}

/// Whether `key` is one of the worker's fields that are the workload's own context of an op
/// (its round, its wait, its transfer), not anything the service said: a report's "the
/// service's evidence" leaves them out. The grant's name stays: the service gave it.
pub fn is_workload_context(key: &str) -> bool {
    key != crate::GRANT && (WorkerEvidence::FIELDS.iter()).any(|f| f.name == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workload's context is the worker's fields but the grant's name, the service's own;
    /// an adapter's field is never taken for it.
    #[test]
    fn the_workloads_context_is_the_workers_own_fields_but_the_grant() {
        for (key, context) in [
            ("round", true),
            ("wait_ms", true),
            ("transfer", true),
            ("grant", false),
            ("redis_offset", false),
            ("backend_pid", false),
        ] {
            assert_eq!(is_workload_context(key), context, "{key}");
        }
    }

    /// A struct's fields go into `value` and come back as they were; a field of another type
    /// reads as absent (the reader refuses it first).
    #[test]
    fn evidence_is_written_and_read_back_through_its_type() {
        let e = ReadBack {
            lock_key: Some("L0/7".into()),
            answer_revision: Some(9),
            key_at_revision: Some(KeyState::Absent),
            lease_id: None,
        };
        let mut value = Map::new();
        e.write_into(&mut value);
        assert_eq!(
            Value::Object(value.clone()),
            serde_json::json!({"lock_key": "L0/7", "answer_revision": 9, "key_at_revision": "absent"})
        );
        assert_eq!(ReadBack::read(&value), e);
        value.insert("answer_revision".into(), Value::from("9"));
        assert_eq!(ReadBack::read(&value).answer_revision, None);
    }

    /// Every word of [`KeyState`] reads back as itself, and no other.
    #[test]
    fn key_states_round_trip() {
        for s in KEY_STATES {
            assert_eq!(KeyState::parse(s.as_str()), Some(s));
        }
        assert_eq!(KeyState::parse("deleted"), None);
    }

    /// history's own sets are registered, each field once.
    #[test]
    fn history_registers_its_own_sets() {
        for set in ["lease", "read-back", "holds", "worker"] {
            assert!(EVIDENCE_SETS.iter().any(|s| s.name == set), "{set}");
        }
        let ty = |k| field(k).map(|f| f.ty);
        assert_eq!(ty("key_at_revision"), Some(KeyState::TYPE));
        assert_eq!(ty("round"), Some(FieldType::U64));
        assert_eq!(ty("redis_offset_nowhere"), None);
    }
}
