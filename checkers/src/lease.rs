//! The lease-expiry checker: grants that did not hold when the service said yes.
//!
//! - `grant-without-key`: the service's own versioned store, read by the adapter at the revision
//!   the grant's answer carries, holds no lock key for that grant (`key_at_revision: "absent"`
//!   with `answer_revision` and `lock_key` in the ok acquire's value). etcd's `lock/lock`
//!   answers with a header revision and the lock key; a `kv/range` of that key at that revision
//!   that returns nothing proves, from etcd's own records and without any clock, that etcd said
//!   "you hold the lock" as of a state in which this client's key (and the lease it was
//!   attached to) was gone: the etcd#11456 class.
//! - `grant-on-expired-lease`: an acquire returned ok after the lease backing it was surely
//!   dead by the harness's clock. The history alone cannot tell which lease backs a grant, so
//!   this is judged only where the adapter recorded the evidence in the ok acquire's value:
//!   `lease_last_ok_ns` (history time of the latest instant a grant or keepalive of that lease
//!   could have taken effect before the acquire returned) and `lease_ttl_ms`. Where the same
//!   grant was also read at its answer's revision, the service's record decides instead: a key
//!   present there shows the lease alive when the service granted (a late answer is a slow
//!   reply, not a grant on a dead lease), and an absent one is `grant-without-key`.

use crate::evidence::{KeyEvidence, KeyState};
use crate::inject::Injector;
use crate::model::{ClientOp, Drift, Func, Model};
use crate::text::{secs, token};
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};

pub struct LeaseExpiry;

impl Checker for LeaseExpiry {
    fn injectors(&self) -> &'static [Injector] {
        injectors::LEASE_EXPIRY
    }

    fn name(&self) -> &'static str {
        "lease-expiry"
    }

    fn kinds(&self) -> &'static [ViolationKind] {
        &[
            ViolationKind::GrantOnExpiredLease,
            ViolationKind::GrantWithoutKey,
        ]
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        debug_assert!(
            m.key_evidence.windows(2).all(|w| w[0].0 <= w[1].0),
            "the digest sorts key evidence by op position"
        );
        debug_assert!(
            m.lease_evidence.windows(2).all(|w| w[0] <= w[1]),
            "the digest sorts lease evidence by op position"
        );
        let (counts, decided) = decided_by_record(m);
        let judged = expired_grants(m, &decided, &mut out);
        keyless_grants(m, &mut out);
        out.nothing_to_judge(judged > 0 || !decided.is_empty(), || NO_LEASE.to_string());
        if let Some(note) = record_note(counts) {
            out.notes.push(note);
        }
        verdict(m, cfg, &mut out);
        out
    }
}

/// The ok grants read back at their answer's revision: how many per [`KeyState`], and the
/// positions of those the service's own record decided (present or absent), sorted.
fn decided_by_record(m: &Model) -> ([u64; 4], Vec<usize>) {
    let mut counts = [0u64; 4];
    let mut decided = Vec::new();
    for (pos, k) in &m.key_evidence {
        let op = &m.ops[*pos];
        if op.func != Func::Acquire || op.outcome != Outcome::Ok {
            continue;
        }
        counts[k.state as usize] += 1;
        if matches!(k.state, KeyState::Present | KeyState::Absent) {
            decided.push(*pos);
        }
    }
    (counts, decided)
}

/// `grant-on-expired-lease`, by the adapter's clock, for the grants the service's record did
/// not decide. Returns how many grants carried the evidence.
fn expired_grants(m: &Model, decided: &[usize], out: &mut CheckOutput) -> u64 {
    let mut judged = 0u64;
    for &(pos, last_ok_ns, lease_ttl_ms) in &m.lease_evidence {
        let op = &m.ops[pos];
        if op.func != Func::Acquire || op.outcome != Outcome::Ok || op.complete_ns().is_none() {
            continue;
        }
        judged += 1;
        if decided.binary_search(&pos).is_ok() {
            continue;
        }
        let lease = (last_ok_ns, lease_ttl_ms);
        out.violations
            .extend(expired(op, m.target_name(op), lease, m.drift));
    }
    judged
}

/// `grant-on-expired-lease` for ok acquire `op` on lock `name`, whose lease was last granted
/// or kept alive at `last_ok_ns` with `lease_ttl_ms`, if it answered after that lease was
/// surely dead.
fn expired(
    op: &ClientOp,
    name: &str,
    (last_ok_ns, lease_ttl_ms): (u64, u64),
    drift: Drift,
) -> Option<Violation> {
    let done_ns = op.complete_ns()?;
    let dead_ns = last_ok_ns.saturating_add(drift.upper_ns(lease_ttl_ms));
    if done_ns <= dead_ns {
        return None;
    }
    Some(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::GrantOnExpiredLease,
        lock: Some(name.to_string()),
        ops: vec![op.index],
        window_ns: [dead_ns, done_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{} was granted {name} with {} at {} (op {}), but by the adapter's evidence its lease was last granted or kept alive at {} with ttl {lease_ttl_ms} ms, so it was surely dead after {}",
            op.process,
            token(op.token()),
            secs(done_ns),
            op.index,
            secs(last_ok_ns),
            secs(dead_ns),
        ),
    })
}

/// `grant-without-key`: the grants whose lock key the service's record did not hold.
fn keyless_grants(m: &Model, out: &mut CheckOutput) {
    for (pos, k) in &m.key_evidence {
        let op = &m.ops[*pos];
        let lease = (m.lease_evidence)
            .binary_search_by_key(pos, |e| e.0)
            .ok()
            .map(|i| (m.lease_evidence[i].1, m.lease_evidence[i].2));
        out.violations
            .extend(keyless(op, m.target_name(op), k, lease, m.drift));
    }
}

/// `grant-without-key` for acquire `op` on lock `name`, if it answered ok and the service's
/// record `k` held no lock key for it; the adapter's `lease` evidence, where it agrees, is a
/// second reading for the sentence.
fn keyless(
    op: &ClientOp,
    name: &str,
    k: &KeyEvidence,
    lease: Option<(u64, u64)>,
    drift: Drift,
) -> Option<Violation> {
    if op.func != Func::Acquire || op.outcome != Outcome::Ok || k.state != KeyState::Absent {
        return None;
    }
    let done_ns = op.complete_ns()?;
    let lease_id = match &k.lease_id {
        Some(l) => format!(" (lease {l})"),
        None => String::new(),
    };
    // The harness's clock, where it agrees, as a second reading for the sentence.
    let clock = lease
        .map(|(last_ok, ttl)| last_ok.saturating_add(drift.upper_ns(ttl)))
        .filter(|dead| *dead < done_ns)
        .map(|dead| {
            format!(
                "; by the adapter's clock too, its lease was surely dead after {}",
                secs(dead)
            )
        })
        .unwrap_or_default();
    Some(Violation {
        cycle: Vec::new(),
        kind: ViolationKind::GrantWithoutKey,
        lock: Some(name.to_string()),
        ops: vec![op.index],
        window_ns: [op.invoke_ns, done_ns],
        nemesis: Vec::new(),
        explanation: format!(
            "p{} was granted {name} at {} (op {}, {}): the service answered at revision {} with lock key \"{}\"{lease_id}, but kv/range of \"{}\" at revision {} returned no key, so at the revision it answered at the service held no lock key for this grant{clock}",
            op.process,
            secs(done_ns),
            op.index,
            token(op.token()),
            k.revision,
            k.lock_key,
            k.lock_key,
            k.revision,
        ),
    })
}

/// The streamed reading: `grant-on-expired-lease` or `grant-without-key` for `op` on lock
/// `name`, just answered with `lease` and `key` evidence. Each rests on that one answer, so it
/// is judged as it is read, as the batch judges it.
pub(crate) fn answered(
    op: &ClientOp,
    name: &str,
    lease: Option<(u64, u64)>,
    key: Option<&KeyEvidence>,
    drift: Drift,
) -> Option<Violation> {
    if op.func != Func::Acquire || op.outcome != Outcome::Ok {
        return None;
    }
    match key.map(|k| (k, k.state)) {
        Some((k, KeyState::Absent)) => keyless(op, name, k, lease, drift),
        Some((_, KeyState::Present)) => None,
        _ => expired(op, name, lease?, drift),
    }
}

/// Why the lease rules judged nothing.
pub(crate) const NO_LEASE: &str = "the service reports no lease of its own with its grants \
    (only adapters that can read one, such as etcd's, record it): grant-on-expired-lease and \
    grant-without-key need that evidence, so they judge nothing here";

/// The note on the grants read back at their answer's revision, if any was.
pub(crate) fn record_note(counts: [u64; 4]) -> Option<String> {
    if counts.iter().all(|c| *c == 0) {
        return None;
    }
    let [present, absent, compacted, unread] = counts;
    let mut s = format!(
        "{} grant(s) read back at the revision their answer carries: {present} with the lock key present, {absent} absent",
        counts.iter().sum::<u64>()
    );
    if compacted > 0 {
        s.push_str(&format!(
            ", {compacted} compacted away (not judged by the service's record)"
        ));
    }
    if unread > 0 {
        s.push_str(&format!(
            ", {unread} unread (the read failed: not judged by the service's record)"
        ));
    }
    Some(s)
}

/// The injectors of this module's kinds (`synth --inject`, the mutation tests): each changes
/// a correct history so it shows one violation the rules above must find.
mod injectors {
    #![allow(clippy::ptr_arg)]
    use crate::inject::prelude::*;

    /// LeaseExpiry's injectors.
    pub(crate) const LEASE_EXPIRY: &[Injector] = &[
        Injector {
            name: "grant-on-expired-lease",
            kind: ViolationKind::GrantOnExpiredLease,
            adapter_shape: false,
            mutate: grant_on_dead_lease,
        },
        Injector {
            name: "grant-without-key",
            kind: ViolationKind::GrantWithoutKey,
            adapter_shape: false,
            mutate: grant_without_key,
        },
    ];

    /// The adapter's evidence shows the grant's lease long dead when it returned.
    fn grant_on_dead_lease(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs: Vec<G> = grants(&h)
            .into_iter()
            .filter(|g| ops[g.complete].time_ns > 3 * g.ttl_ms * 1_000_000)
            .collect();
        let g = pick(rng, &gs)?;
        let done = ops[g.complete].time_ns;
        let lease = history::LeaseEvidence {
            lease_last_ok_ns: Some(done - 2 * g.ttl_ms * 1_000_000),
            lease_ttl_ms: Some(g.ttl_ms),
            lease_from_ns: None,
        };
        lease.write_into(&mut ops[g.complete].value.extra);
        Some(vec![ops[g.complete].index])
    }

    /// A grant whose adapter read its lock key back at the answer's revision and found none (as
    /// etcd's adapter records it): the service answered a grant it held no key for. The token
    /// stays, so nothing else in the history changes.
    fn grant_without_key(ops: &mut Vec<Op>, rng: &mut ChaCha8Rng) -> Option<Vec<u64>> {
        let h = History::new(ops.clone()).unwrap();
        let gs = grants(&h);
        let g = pick(rng, &gs)?;
        let back = history::ReadBack {
            lock_key: Some(format!("{}/694d", g.lock)),
            answer_revision: Some(1000 + g.token),
            key_at_revision: Some(KeyState::Absent),
            lease_id: None,
        };
        back.write_into(&mut ops[g.complete].value.extra);
        Some(vec![ops[g.complete].index])
    }
}
