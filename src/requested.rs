//! What a run asked to exercise, for its coverage: the fault kinds and client-fault shapes of
//! the `schedule.json` beside its history. The checkers count only what the history shows
//! (faults that started, shapes a stall was recorded with); a fault the plan drew that never
//! happened (a stall request no client took, a fault after the run stopped) is in the schedule
//! alone, and `--fail-on coverage` must see it to fail the run for it.

use history::coverage::Need;
use history::Results;
use nemesis::schedule::Schedule;
use reports::config_keys as key;
use std::path::Path;

/// Adds the kinds and client-fault shapes (a stall's aim and wake-up op) of the schedule beside
/// `history` to `results.coverage.requested`. No schedule (a history checked on its own) adds
/// nothing; one that cannot be read adds a note saying so, and the history's own requests
/// stand. The file is read by the schedule's one reader, and each fault's family says what
/// shapes it asks for (`Payload::shapes_asked`).
pub fn add_from_schedule(history: &Path, results: &mut Results) {
    let path = history.with_file_name(nemesis::schedule::SCHEDULE_FILE);
    if results.coverage.is_none() {
        return;
    }
    let schedule = match std::fs::read_to_string(&path) {
        Ok(text) => match Schedule::parse(&text) {
            Ok(s) => s,
            Err(e) => return note(results, &path, &e.to_string()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return note(results, &path, &e.to_string()),
    };
    let Some(coverage) = results.coverage.as_mut() else {
        return;
    };
    // Bounded by the schedule's faults (at most 10,000, as the planner and reader allow).
    for f in &schedule.faults {
        coverage.request_fault(f.kind().as_str());
        for shape in f.payload.shapes_asked() {
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

/// What the run whose settings `config` holds asked to exercise (docs/checkers.md,
/// "Exercised"), or `None` for a config without a fault list (a history checked on its own,
/// or a run recorded before the list was written). Each family says what a run that asked
/// for it needs, from the run's settings (`FaultKind::requested`); a kind this build does not
/// know needs any exercised fault of it.
pub fn needs_of(config: &reports::RunConfigView) -> Option<Vec<Need>> {
    let list = |key: &str| -> Vec<String> {
        config
            .setting(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    // An empty list reads as `none`.
                    .filter(|s| !s.is_empty() && *s != "none")
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    config.setting(key::NEMESIS)?;
    let asked = nemesis::fault::Asked {
        list: &list,
        on_primary: config.setting(key::NEMESIS_TARGETS).as_deref() == Some("primary"),
    };
    let mut needs = Vec::new();
    for kind in list(key::NEMESIS) {
        match kind.parse::<nemesis::schedule::FaultKind>() {
            Ok(k) => needs.extend(k.requested(&asked)),
            Err(_) => needs.push(Need::kind(&kind)),
        }
    }
    Some(needs)
}

/// A verdict rests on what was exercised: with the needs of the run beside `history` (its
/// config.toml), a `valid` verdict whose run left a need unmet becomes `unknown`, with a note
/// "requested, not exercised: ..."; a run without faults (`--nemesis none`) stays valid and
/// says "happy path only". A history without a run's config is left as it is.
pub fn gate_on_exercise(history: &Path, results: &mut Results) {
    let config = history.with_file_name(history::layout::CONFIG_FILE);
    let Ok(view) = reports::RunConfigView::read(&config) else {
        return;
    };
    let Some(needs) = needs_of(&view) else {
        return;
    };
    let Some(coverage) = results.coverage.as_mut() else {
        return;
    };
    let none_asked = needs.is_empty();
    coverage.needs = needs;
    if none_asked {
        results.notes.push(
            "happy path only: the run asked for no fault (--nemesis none), so the verdict says \
             nothing about faults"
                .into(),
        );
        return;
    }
    let missing = coverage.not_exercised();
    if missing.is_empty() {
        return;
    }
    results.notes.push(format!(
        "{}: {}",
        history::coverage::NOT_EXERCISED,
        missing.join(", ")
    ));
    if results.valid == history::Validity::Valid {
        results.valid = history::Validity::Unknown;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A need as a row: its label, variants, wake-up ops and role.
    type Row = (String, Vec<String>, Vec<String>, String);

    fn needs(toml: &str) -> Option<Vec<Row>> {
        let view = reports::RunConfigView::parse(toml).unwrap();
        needs_of(&view).map(|ns| {
            ns.into_iter()
                .map(|n| (n.label, n.variants, n.wakes, n.role))
                .collect()
        })
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_run_asks_for_each_kind_and_each_direction_or_shape_it_names() {
        // No fault list: a config from before it was written asks for nothing.
        assert_eq!(needs("[workload]\nttl = \"2s\"\n"), None);
        // `--nemesis none`: nothing asked.
        assert_eq!(needs("[nemesis]\nnemesis = []\n"), Some(vec![]));
        // The defaults: each kind, the clock in a direction that can shorten a lease.
        let d = needs("[nemesis]\nnemesis = [\"pause\", \"clock\", \"client-pause\"]\n").unwrap();
        assert_eq!(d[0], ("pause".into(), vec![], vec![], String::new()));
        assert_eq!(d[1].1, s(&["bump-forward", "bump-back", "strobe", "fast"]));
        assert_eq!(d[2].0, "client-pause");
        // Named directions, shapes and the primary as target.
        let n = needs(
            "[nemesis]\nnemesis = [\"clock\", \"client-pause\", \"kill\"]\n\
             clock_faults = [\"slow\"]\nclient_faults = [\"boundary\", \"waiter\", \"renew\"]\n\
             nemesis_targets = \"primary\"\n",
        )
        .unwrap();
        assert_eq!(
            n[0],
            (
                "clock slow on primary".into(),
                s(&["slow"]),
                vec![],
                "primary".into()
            )
        );
        assert_eq!(
            n[1],
            (
                "client-pause boundary/renew".into(),
                s(&["boundary"]),
                s(&["renew"]),
                String::new()
            )
        );
        assert_eq!(
            n[2],
            (
                "client-pause waiter".into(),
                s(&["waiter"]),
                vec![],
                String::new()
            )
        );
        assert_eq!(
            n[3],
            ("kill on primary".into(), vec![], vec![], "primary".into())
        );
        // Wake-up ops alone: one need each, any aim.
        let w = needs("[nemesis]\nnemesis = [\"client-pause\"]\nclient_faults = [\"write\"]\n")
            .unwrap();
        assert_eq!(
            w,
            vec![(
                "client-pause waking into write".into(),
                vec![],
                s(&["write"]),
                String::new()
            )]
        );
    }
}
