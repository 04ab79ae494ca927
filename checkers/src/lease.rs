//! `grant-on-expired-lease`: an acquire returned ok after the lease backing it was surely dead
//! (the etcd#11456 class, where the lock key is attached to a lease that expired meanwhile).
//!
//! The history alone cannot tell which lease backs a grant, so this rule is judged only where
//! the adapter recorded the evidence in the ok acquire's value: `lease_last_ok_ns` (history time
//! of the completion of the last grant or keepalive of that lease that could have taken effect
//! before the acquire returned) and `lease_ttl_ms`.

use crate::model::{ttl_upper_ns, Func, Model};
use crate::text::{secs, token};
use crate::{verdict, CheckConfig, CheckOutput, Checker};
use history::{Outcome, Violation, ViolationKind};
use serde_json::Value;

pub struct LeaseExpiry;

pub(crate) fn as_u64(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

impl Checker for LeaseExpiry {
    fn name(&self) -> &'static str {
        "lease-expiry"
    }

    fn check_model(&self, m: &Model, cfg: &CheckConfig) -> CheckOutput {
        let mut out = CheckOutput::new();
        let mut judged = 0u64;
        for &(pos, last_ok_ns, lease_ttl_ms) in &m.lease_evidence {
            let op = &m.ops[pos];
            if op.func != Func::Acquire || op.outcome != Outcome::Ok {
                continue;
            }
            let Some(done_ns) = op.complete_ns() else {
                continue;
            };
            judged += 1;
            let dead_ns = last_ok_ns.saturating_add(ttl_upper_ns(lease_ttl_ms, m.drift));
            if done_ns <= dead_ns {
                continue;
            }
            let name = m.target_name(op);
            out.violations.push(Violation {
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
            });
        }
        out.nothing_to_judge(judged > 0, || {
            "no ok acquire carries lease evidence (lease_last_ok_ns, lease_ttl_ms): grant-on-expired-lease was not judged".to_string()
        });
        verdict(m, cfg, &mut out);
        out
    }
}
