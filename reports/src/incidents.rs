//! The checkers' incidents (`Results::incidents`: the violations of one root cause) as the
//! summary and the report show them: the cause first, its consequences counted under it, the
//! violations themselves still listed by kind.

use crate::escape::plain;
use history::{Incident, Results};
use std::fmt::Write;

/// How many incidents the summary spells out before counting the rest.
const SHOWN: usize = 10;

/// What a `token-regressed` of the exclusivity reading is, said where it is listed: the kind
/// names the token counter, but the counter did not go back.
pub const BY_OVERLAP: &str = "by overlap: the tokens rose in the order the grants were answered; one grant came while the other's lease surely lasted";

/// `2 more double-grant, 9 token-reused, 8 token-regressed (2 by overlap: ...)`: the members
/// other than the root, by kind; None for an incident of one violation.
pub fn consequences(inc: &Incident, r: &Results) -> Option<String> {
    if inc.violations.len() < 2 {
        return None;
    }
    let root_kind = r
        .violations
        .get(inc.root)
        .map(|v| v.kind.as_str())
        .unwrap_or("");
    let overlap = inc.by_overlap.iter().filter(|&&i| i != inc.root).count() as u64;
    let mut parts = Vec::new();
    // The root's own kind first, then the others in the order of the kinds.
    let mut kinds: Vec<(&String, u64)> = inc.kinds.iter().map(|(k, n)| (k, *n)).collect();
    kinds.sort_by_key(|(k, _)| (k.as_str() != root_kind, k.as_str() == "token-regressed"));
    for (k, n) in kinds {
        let n = if k == root_kind { n - 1 } else { n };
        if n == 0 {
            continue;
        }
        let more = if k == root_kind { " more" } else { "" };
        let mut p = format!("{n}{more} {k}");
        if k == "token-regressed" && overlap > 0 {
            let _ = write!(p, " ({overlap} {BY_OVERLAP})");
        }
        parts.push(p);
    }
    Some(parts.join(", "))
}

/// For each violation of `r`, whether an incident lists it as `token-regressed` by overlap.
pub fn by_overlap(r: &Results) -> Vec<bool> {
    let mut v = vec![false; r.violations.len()];
    for i in r.incidents.iter().flat_map(|inc| &inc.by_overlap) {
        if let Some(b) = v.get_mut(*i) {
            *b = true;
        }
    }
    v
}

/// The summary's `incidents` section: one line per incident and its consequences. Nothing
/// for a run without violations, or a results.json from before incidents were grouped.
pub fn text(s: &mut String, r: &Results) {
    if r.incidents.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n{} incident(s), {} violation(s) in all (each violation is in one incident; the violations by kind follow):",
        r.incidents.len(),
        r.violations.len()
    );
    for (n, inc) in r.incidents.iter().enumerate().take(SHOWN) {
        let _ = writeln!(s, "  {}. {}", n + 1, plain(&inc.explanation));
        match consequences(inc, r) {
            Some(c) => {
                let _ = writeln!(s, "     consequences: {}", plain(&c));
            }
            None => {
                if let Some(v) = r.violations.get(inc.root) {
                    let _ = writeln!(s, "     {}", plain(&v.explanation));
                }
            }
        }
    }
    if r.incidents.len() > SHOWN {
        let _ = writeln!(
            s,
            "  ... and {} more incident(s) in results.json",
            r.incidents.len() - SHOWN
        );
    }
}
