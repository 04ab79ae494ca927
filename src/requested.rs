//! What a run asked to exercise, for its coverage: the fault kinds and client-fault shapes of
//! the `schedule.json` beside its history. The checkers count only what the history shows
//! (faults that started, shapes a stall was recorded with); a fault the plan drew that never
//! happened (a stall request no client took, a fault after the run stopped) is in the schedule
//! alone, and `--fail-on coverage` must see it to fail the run for it.

use history::Results;
use serde_json::Value;
use std::path::Path;

/// Adds the kinds (`kind`) and client-fault shapes (`shape`, `wake`) of the schedule beside
/// `history` to `results.coverage.requested`. No schedule (a history checked on its own) adds
/// nothing; one that cannot be read adds a note saying so, and the history's own requests
/// stand. The file is read as plain JSON, field by field: the run that wrote it checked it.
pub fn add_from_schedule(history: &Path, results: &mut Results) {
    let path = history.with_file_name(nemesis::schedule::SCHEDULE_FILE);
    if results.coverage.is_none() {
        return;
    }
    let faults = match std::fs::read_to_string(&path) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => match v.get("faults").and_then(Value::as_array) {
                Some(f) => f.clone(),
                None => return note(results, &path, "no `faults` list"),
            },
            Err(e) => return note(results, &path, &e.to_string()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return note(results, &path, &e.to_string()),
    };
    let Some(coverage) = results.coverage.as_mut() else {
        return;
    };
    // Bounded by the schedule's faults (at most 10,000, as the planner and reader allow).
    for f in &faults {
        let text = |k: &str| f.get(k).and_then(Value::as_str);
        if let Some(kind) = text("kind") {
            coverage.request_fault(kind);
        }
        for shape in [text("shape"), text("wake")].into_iter().flatten() {
            coverage.request_shape(shape);
        }
    }
}

fn note(results: &mut Results, path: &Path, why: &str) {
    results.notes.push(format!(
        "{}: not read ({why}): coverage asks only for what the history shows",
        path.display()
    ));
}
