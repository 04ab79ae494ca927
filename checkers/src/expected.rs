//! Violations no lease-based service can avoid: under `--clock-scope all` a clock fault moves
//! the service's monotonic clock, the one its lease timers run on, so it ends leases early by
//! construction. Those of [`KINDS`] whose window meets a clock fault (or the lease after it)
//! are set apart as expected, with why; what the fenced resource decides (stale writes, lost
//! updates) and tokens handed out twice stay judged, since fencing is what can keep the
//! resource safe then. Decided from the model's faults: the history is read once.

use crate::model::Model;
use crate::CheckOutput;
use history::{FaultFamily, FaultOp, Validity, Violation, ViolationKind};

/// The kinds a moved monotonic clock makes unavoidable.
pub const KINDS: [ViolationKind; 7] = {
    use ViolationKind::*;
    [
        DoubleGrant,
        GrantOnExpiredLease,
        GrantWithoutKey,
        StaleRenewAccepted,
        StaleReleaseAccepted,
        TokenRegressed,
        LockStuck,
    ]
};

/// What an expected violation's explanation starts with.
const WHY: &str = "expected under this fault for any lease-based service (its monotonic clock \
                   was moved, --clock-scope all): only the fenced resource can stay safe. ";

/// Whether the nemesis op `f` opens a fault that moves clocks.
fn moves_clocks(f: &str) -> bool {
    FaultOp::of(f)
        .opened_family()
        .is_some_and(FaultFamily::moves_clocks)
}

/// The clock faults of `m` as `[start, stop + reach_ns]`: a lease timed on a moved clock may
/// end wrongly up to a lease (`reach_ns`) after the clock is set right.
pub(crate) fn clock_windows(m: &Model, reach_ns: u64) -> Vec<(u64, u64)> {
    m.faults
        .list()
        .iter()
        .filter(|f| moves_clocks(&f.f))
        .map(|f| (f.start_ns, f.end_ns.saturating_add(reach_ns)))
        .collect()
}

/// Moves `out`'s violations that a moved monotonic clock explains into `expected`: of
/// [`KINDS`], during a clock fault or inside one of its `windows` ([`clock_windows`]). A
/// checker left with none is valid, and says how many it set apart.
pub(crate) fn set_apart(
    windows: &[(u64, u64)],
    out: &mut CheckOutput,
    expected: &mut Vec<Violation>,
) {
    let under_clock = |v: &Violation| {
        KINDS.contains(&v.kind)
            && (v.nemesis.iter().any(|f| moves_clocks(&f.f))
                || windows
                    .iter()
                    .any(|&(a, b)| v.window_ns[0] <= b && a <= v.window_ns[1]))
    };
    if !out.violations.iter().any(under_clock) {
        return;
    }
    let (apart, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut out.violations)
        .into_iter()
        .partition(under_clock);
    let n = apart.len();
    out.violations = kept;
    expected.extend(apart.into_iter().map(|mut v| {
        v.explanation = format!("{WHY}{}", v.explanation);
        v
    }));
    if out.valid == Validity::Invalid && out.violations.is_empty() {
        out.valid = Validity::Valid;
    }
    out.notes.push(format!(
        "{n} violation(s) expected under monotonic clock faults, listed apart"
    ));
}
