//! `summary.txt`: the plain-text summary, also what `lockpick check` prints.

use crate::escape::plain;
use history::{KindClass, Results, Violation, ViolationKind};
use std::fmt::Write;

/// The contention rounds of an `--arrivals rounds:...` run in one line, the figure the
/// textbook's tie experiment gives: how many rounds, how many contended, and how many of those
/// ended with more than one holder. None for other runs.
pub fn rounds_line(r: &Results) -> Option<String> {
    let rounds = r.stats.extra.get("rounds")?;
    let n = |k: &str| rounds[k].as_u64().unwrap_or(0);
    let (contended, multi) = (n("contended"), n("more_than_one_holder"));
    let share = if contended > 0 {
        format!(" ({:.1}%)", 100.0 * multi as f64 / contended as f64)
    } else {
        String::new()
    };
    Some(format!(
        "rounds: {} in all, {contended} contended, {multi} of them ended with more than one holder{share}",
        n("rounds")
    ))
}

/// What summary.txt and report.html add below an unknown verdict that a requested fault was
/// never exercised: a fault started is not yet exercised, so the faults counted in the
/// coverage may be the very ones named.
pub(crate) const NOT_EXERCISED_HINT: &str = "a fault is exercised once it reached the state its \
     bugs live in (the coverage below says which did); a longer --duration gives each more \
     tries, and `lockpick test` plans every fault and retries each until it was exercised";

/// Why the verdict is unknown, a phrase per reason, empty unless it is: the run cut short,
/// the whole history proving nothing, requested faults never exercised (the coverage gate's
/// note), and each checker that could not decide on its own. summary.txt's verdict line and
/// report.html's header both say these, so the two give the same reason.
pub fn unknown_reasons(r: &Results) -> Vec<String> {
    if r.valid != history::Validity::Unknown {
        return Vec::new();
    }
    let mut why = Vec::new();
    // The cut itself is said above the verdict in both outputs: here only that it counts.
    if let Some(c) = r.incomplete() {
        why.push(format!("the run did not complete ({})", c.state));
    }
    let proves_nothing = r
        .notes
        .iter()
        .find(|n| n.ends_with(history::PROVES_NOTHING));
    why.extend(proves_nothing.cloned());
    why.extend(
        (r.notes.iter())
            .filter(|n| n.starts_with(history::coverage::NOT_EXERCISED))
            .cloned(),
    );
    // A history that proves nothing leaves every checker unknown for that one reason.
    if proves_nothing.is_none() {
        for c in r
            .checkers
            .iter()
            .filter(|c| c.valid == history::Validity::Unknown)
        {
            why.push(match c.notes.as_slice() {
                [] => format!("the {} checker could not decide", c.name),
                notes => format!(
                    "the {} checker could not decide: {}",
                    c.name,
                    notes.join("; ")
                ),
            });
        }
    }
    if why.is_empty() {
        // A results.json written by hand or by another version: say so rather than guess.
        why.push("results.json records no reason".to_string());
    }
    why
}

/// `verdict: VALID`, or `verdict: UNKNOWN (why)` with [`unknown_reasons`]: summary.txt's line
/// and `lockpick report`'s.
pub fn verdict_line(r: &Results) -> String {
    match unknown_reasons(r).join("; ") {
        why if why.is_empty() => format!("verdict: {}", r.valid.as_str().to_uppercase()),
        why => format!("verdict: UNKNOWN ({})", plain(&why)),
    }
}

/// What a verdict rests on, in one line: the successful lock and store ops and the faults by
/// kind, so a clean verdict that exercised nothing reads as such.
pub fn rests_on(r: &Results) -> String {
    let ok = |f: &str| ok_count(r, f);
    let mut s = format!(
        "{} grant(s), {} renewal(s), {} release(s), {} store write(s)",
        r.stats.grants,
        ok("renew"),
        ok("release"),
        ok("write")
    );
    if r.stats.faults.is_empty() {
        s.push_str("; no faults");
    } else {
        let faults: Vec<String> = r
            .stats
            .faults
            .iter()
            .map(|(k, n)| format!("{k} x{n}"))
            .collect();
        s.push_str("; faults: ");
        s.push_str(&faults.join(", "));
    }
    s
}

/// How many ops of client function `f` (`write`, `renew`, ...) answered ok.
fn ok_count(r: &Results, f: &str) -> u64 {
    r.stats
        .ops
        .get(f)
        .and_then(|by| by.get("ok"))
        .copied()
        .unwrap_or(0)
}

/// The kinds that judge the data a lock guards (its writes), not the lock itself.
const DATA_KINDS: [ViolationKind; 4] = [
    ViolationKind::StaleWriteAccepted,
    ViolationKind::LostUpdate,
    ViolationKind::TotalChanged,
    ViolationKind::NonSerializable,
];

/// For a verdict invalid on the lock's safety alone, whether the data it guards held: every
/// checker of the data that judged anything is valid, over the writes the history has. `None`
/// when the data was hurt, not written, or not judged, and when the lock's failures were all
/// of liveness (a lock stuck, a deadlock): nothing then got past the lock for a fence to stop.
fn data_held(r: &Results) -> Option<String> {
    if r.valid != history::Validity::Invalid
        || r.violations.iter().any(|v| DATA_KINDS.contains(&v.kind))
        || !(r.violations.iter()).any(|v| v.kind.class() == history::KindClass::Safety)
    {
        return None;
    }
    let writes = ok_count(r, "write");
    let mut names: Vec<&str> = DATA_KINDS
        .iter()
        .map(|k| checkers::checker_of(*k))
        .collect();
    names.dedup();
    // The data's checkers that judged something, each once.
    let judged: Vec<&history::CheckerResult> = names
        .iter()
        .filter_map(|n| {
            r.checkers
                .iter()
                .find(|c| c.name == *n && c.not_judged.is_none())
        })
        .collect();
    let all_valid = judged.iter().all(|c| c.valid == history::Validity::Valid);
    (writes > 0 && !judged.is_empty() && all_valid).then(|| {
        let names: Vec<&str> = judged.iter().map(|c| c.name.as_str()).collect();
        format!(
            "the lock failed, but the data it guards held: {} valid over {writes} store \
             write(s), so no stale write was accepted and no update was lost (the fencing \
             tokens protected it)",
            names.join(", ")
        )
    })
}

/// How many violations of one kind the summary spells out before counting the rest.
const SHOWN_PER_KIND: usize = 5;

/// Renders `summary.txt`: the verdict, each checker's result, the violations (a few per kind,
/// with their sentence), warnings and the main statistics.
pub fn summary_text(r: &Results) -> String {
    let mut s = String::new();
    // Before the verdict: a cut-short run's verdict rests on part of a test.
    match r.incomplete() {
        Some(c) if c.state == history::RunState::Stopped => {
            let _ = writeln!(
                s,
                "run: STOPPED at the first proven violation: {}",
                plain(&c.reason)
            );
        }
        Some(c) => {
            let _ = writeln!(s, "run: INCOMPLETE ({}): {}", c.state, plain(&c.reason));
        }
        None => {}
    }
    // An unknown verdict says why on its line: a run whose checkers all passed reads oddly
    // without it.
    let why_unknown = unknown_reasons(r);
    let _ = writeln!(s, "{}", verdict_line(r));
    if (why_unknown.iter()).any(|w| w.starts_with(history::coverage::NOT_EXERCISED)) {
        let _ = writeln!(s, "  {NOT_EXERCISED_HINT}");
    }
    if let Some(line) = data_held(r) {
        let _ = writeln!(s, "  {line}");
    }
    let _ = writeln!(s, "rests on: {}", plain(&rests_on(r)));
    let _ = writeln!(
        s,
        "history: {} events over {} s, {} grants, {} nemesis events",
        r.stats.events,
        crate::escape::secs_value(r.stats.duration_ns),
        r.stats.grants,
        r.stats.nemesis_events
    );
    if let Some(line) = rounds_line(r) {
        let _ = writeln!(s, "{line}");
    }
    // A note the verdict line already gives is not said twice.
    for n in r.notes.iter().filter(|n| !why_unknown.contains(n)) {
        let _ = writeln!(s, "note: {}", plain(n));
    }
    checkers_text(&mut s, r);
    crate::incidents::text(&mut s, r);
    section(
        &mut s,
        ("violations", &r.violations),
        &crate::incidents::by_overlap(r),
        &r.evidence,
    );
    section(
        &mut s,
        (
            "expected under monotonic clock faults, not counted",
            &r.expected,
        ),
        &[],
        &r.evidence,
    );
    section(&mut s, ("warnings", &r.warnings), &[], &r.evidence);
    if r.warnings_unlisted > 0 {
        let _ = writeln!(
            s,
            "  ... and {} more warning(s) counted and not listed (a check lists the first {})",
            r.warnings_unlisted,
            r.warnings.len()
        );
    }
    ops_text(&mut s, r);
    crate::reasons::text(&mut s, r);
    latency_text(&mut s, r);
    crate::coverage::text(&mut s, r);
    s
}

/// Each checker's status, counts, and why it did not judge or what it noted.
fn checkers_text(s: &mut String, r: &Results) {
    let _ = writeln!(s, "\ncheckers:");
    for c in &r.checkers {
        let _ = write!(s, "  {:<24} {:<10}", plain(&c.name), c.status());
        if c.violations > 0 {
            let _ = write!(s, " {} violation(s)", c.violations);
        }
        if c.warnings > 0 {
            let _ = write!(s, " {} warning(s)", c.warnings);
        }
        let _ = writeln!(s);
        if let Some(why) = &c.not_judged {
            let _ = writeln!(s, "  {:<24} not judged: {}", "", plain(why));
        }
        for n in &c.notes {
            let _ = writeln!(s, "  {:<24} note: {}", "", plain(n));
        }
    }
}

/// Ops by function and outcome, with the refusals among the failures.
fn ops_text(s: &mut String, r: &Results) {
    if !r.stats.ops.is_empty() {
        let _ = writeln!(s, "\nops (ok/fail/info/pending):");
        for (f, by) in &r.stats.ops {
            let g = |k: &str| by.get(k).copied().unwrap_or(0);
            let _ = write!(
                s,
                "  {:<10} {}/{}/{}/{}",
                plain(f),
                g("ok"),
                g("fail"),
                g("info"),
                g("pending")
            );
            // A refusal is the protocol's answer to a held lock, not a failure.
            match crate::reasons::refused(r, f) {
                0 => {
                    let _ = writeln!(s);
                }
                n => {
                    let _ = writeln!(s, "  (fail: {n} refused)");
                }
            }
        }
    }
}

/// Latency percentiles by function.
fn latency_text(s: &mut String, r: &Results) {
    if !r.stats.latency.is_empty() {
        let _ = writeln!(s, "\nlatency ms (p50/p95/p99/max):");
        for (f, p) in &r.stats.latency {
            let _ = writeln!(
                s,
                "  {:<10} {:.2}/{:.2}/{:.2}/{:.2} over {} ops",
                plain(f),
                p.p50_ms,
                p.p95_ms,
                p.p99_ms,
                p.max_ms,
                p.count
            );
        }
    }
}

/// `overlap[i]`: item `i` is a `token-regressed` by overlap (said before its sentence).
/// The service's own evidence on a violation's ops (`Results::evidence`):
/// `op 13: pg_backend_pid 5231, grant 5231.7; op 15: ...`, or nothing.
pub fn evidence_line(v: &Violation, evidence: &Evidence) -> Option<String> {
    let each: Vec<String> = v
        .ops
        .iter()
        .filter_map(|i| {
            let fields = evidence.get(i)?;
            let shown: Vec<String> = fields
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(t) => format!("{k} {}", plain(t)),
                    other => format!("{k} {other}"),
                })
                .collect();
            Some(format!("op {i}: {}", shown.join(", ")))
        })
        .collect();
    (!each.is_empty()).then(|| each.join("; "))
}

/// `Results::evidence`.
pub type Evidence = std::collections::BTreeMap<u64, serde_json::Map<String, serde_json::Value>>;

fn section(
    s: &mut String,
    (title, items): (&str, &[Violation]),
    overlap: &[bool],
    evidence: &Evidence,
) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n{title} ({}):", items.len());
    let mut kinds: Vec<_> = items.iter().map(|v| v.kind).collect();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let of_kind: Vec<(usize, &Violation)> = items
            .iter()
            .enumerate()
            .filter(|(_, v)| v.kind == kind)
            .collect();
        let class = match kind.class() {
            KindClass::Safety => "safety",
            KindClass::Liveness => "liveness",
            KindClass::Warning => "warning",
        };
        let _ = writeln!(s, "  {kind} [{class}] x{}", of_kind.len());
        for &(i, v) in of_kind.iter().take(SHOWN_PER_KIND) {
            if overlap.get(i).copied().unwrap_or(false) {
                let _ = writeln!(
                    s,
                    "    - ({}; a consequence of the overlap, not of a token counter going back) {}",
                    crate::incidents::BY_OVERLAP,
                    plain(&v.explanation)
                );
            } else {
                let _ = writeln!(s, "    - {}", plain(&v.explanation));
            }
            let ops: Vec<String> = v.ops.iter().map(u64::to_string).collect();
            let _ = write!(
                s,
                "      ops {} in {}..{} s",
                ops.join(", "),
                crate::escape::secs_value(v.window_ns[0]),
                crate::escape::secs_value(v.window_ns[1])
            );
            if !v.nemesis.is_empty() {
                let faults: Vec<String> = v
                    .nemesis
                    .iter()
                    .map(|f| format!("{} (op {})", plain(&f.f), f.index))
                    .collect();
                let _ = write!(s, " during {}", faults.join(", "));
            }
            let _ = writeln!(s);
            if let Some(e) = evidence_line(v, evidence) {
                let _ = writeln!(s, "      the service's evidence: {e}");
            }
        }
        if of_kind.len() > SHOWN_PER_KIND {
            let _ = writeln!(
                s,
                "    ... and {} more in results.json",
                of_kind.len() - SHOWN_PER_KIND
            );
        }
    }
}
