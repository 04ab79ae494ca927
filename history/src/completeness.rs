//! Whether the run behind a history ran to its end: `results.json`'s `completeness`. A history
//! cut short (Ctrl-C, a node that never came back, a harness error) proves what it recorded
//! and no more, so its verdict is at best `unknown` unless a violation was proven before the
//! cut.

use crate::{Results, Validity, ViolationKind};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// The clients ran their whole duration (or op budget), the faults healed, the history
    /// was checked.
    Complete,
    /// Stopped early by a signal (Ctrl-C, SIGTERM) or never finished (no results were written).
    Interrupted,
    /// A harness-side failure: a node that did not come back, a setup step, a crash.
    Error,
    /// Ended early on purpose, at the first safety violation a live check proved
    /// (`--stop-on-violation`): the verdict is that violation's, re-proven from the history.
    Stopped,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Complete => "complete",
            RunState::Interrupted => "interrupted",
            RunState::Error => "error",
            RunState::Stopped => "stopped",
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `results.json`'s `completeness`: how the run ended and, when it did not complete, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completeness {
    pub state: RunState,
    /// Why the run is incomplete, in one line (empty for a complete run).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A stopped run: the kind of the violation it stopped on (the reason names it too, in
    /// words), for tools that pick it up again (`lockpick shrink` keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_on: Option<ViolationKind>,
}

impl Completeness {
    pub fn complete() -> Completeness {
        Completeness {
            state: RunState::Complete,
            reason: String::new(),
            stopped_on: None,
        }
    }
    pub fn interrupted(reason: impl Into<String>) -> Completeness {
        Completeness {
            state: RunState::Interrupted,
            reason: reason.into(),
            stopped_on: None,
        }
    }
    pub fn error(reason: impl Into<String>) -> Completeness {
        Completeness {
            state: RunState::Error,
            reason: reason.into(),
            stopped_on: None,
        }
    }
    pub fn stopped(on: ViolationKind, reason: impl Into<String>) -> Completeness {
        Completeness {
            state: RunState::Stopped,
            reason: reason.into(),
            stopped_on: Some(on),
        }
    }
    pub fn is_complete(&self) -> bool {
        self.state == RunState::Complete
    }
    /// `interrupted: <reason>` in one line, for the summary, the report and JUnit.
    pub fn headline(&self) -> String {
        if self.reason.is_empty() {
            self.state.to_string()
        } else {
            format!("{}: {}", self.state, self.reason)
        }
    }
}

impl Results {
    /// Records how the run ended. An incomplete run's verdict is at best `unknown`: a `valid`
    /// becomes `unknown` (what was not recorded may hold the violation), an `invalid` stays
    /// (its violation was proven from what was recorded before the cut).
    pub fn set_completeness(&mut self, c: Completeness) {
        if !c.is_complete() && self.valid == Validity::Valid {
            self.valid = Validity::Unknown;
        }
        // What a run stopped at its first violation never reached is not a gap of it.
        if c.state == RunState::Stopped {
            for note in &mut self.notes {
                if let Some(rest) = note.strip_prefix(crate::coverage::NOT_EXERCISED) {
                    *note = format!("{}{rest}", crate::coverage::NOT_REACHED);
                }
            }
        }
        self.completeness = Some(c);
    }

    /// The run's completeness when it did not complete; `None` for a complete run or a
    /// history checked on its own.
    pub fn incomplete(&self) -> Option<&Completeness> {
        self.completeness.as_ref().filter(|c| !c.is_complete())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stats;

    /// Results with nothing in them but a verdict (built from JSON: every field with a
    /// default stays default).
    fn results(valid: Validity) -> Results {
        serde_json::from_value(serde_json::json!({
            "valid": valid,
            "violations": [],
            "warnings": [],
            "checkers": [],
            "stats": Stats::default(),
        }))
        .unwrap()
    }

    /// (verdict checked, how the run ended, verdict kept)
    #[test]
    fn an_incomplete_run_is_at_best_unknown() {
        use Validity::*;
        let cases = [
            (Valid, Completeness::complete(), Valid),
            (Valid, Completeness::interrupted("Ctrl-C"), Unknown),
            (
                Valid,
                Completeness::error("node n1 did not come back"),
                Unknown,
            ),
            (Unknown, Completeness::error("x"), Unknown),
            (Invalid, Completeness::interrupted("Ctrl-C"), Invalid),
            (Invalid, Completeness::error("x"), Invalid),
            (
                Invalid,
                Completeness::stopped(ViolationKind::DoubleGrant, "double-grant proven at 1.2 s"),
                Invalid,
            ),
            // A stop the final check did not confirm (a bug of lockpick): never valid.
            (
                Valid,
                Completeness::stopped(ViolationKind::DoubleGrant, "x"),
                Unknown,
            ),
        ];
        for (before, c, after) in cases {
            let mut r = results(before);
            r.set_completeness(c.clone());
            assert_eq!(r.valid, after, "{before:?} {c:?}");
            assert_eq!(r.incomplete().is_some(), !c.is_complete());
        }
    }

    #[test]
    fn a_stopped_run_says_what_it_asked_for_was_not_reached() {
        let gap = format!("{}: pause, kill", crate::coverage::NOT_EXERCISED);
        for (c, want) in [
            (
                Completeness::stopped(
                    ViolationKind::DoubleGrant,
                    "double-grant on L0 proven at 0.3 s",
                ),
                format!("{}: pause, kill", crate::coverage::NOT_REACHED),
            ),
            (Completeness::interrupted("Ctrl-C"), gap.clone()),
        ] {
            let mut r = results(Validity::Invalid);
            r.notes = vec![gap.clone(), "another note".into()];
            r.set_completeness(c);
            assert_eq!(r.notes, vec![want, "another note".to_string()]);
        }
    }

    #[test]
    fn completeness_round_trips_in_results_json() {
        let mut r = results(Validity::Valid);
        r.set_completeness(Completeness::interrupted("interrupted by Ctrl-C at 2.0 s"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["completeness"]["state"], "interrupted");
        assert_eq!(
            json["completeness"]["reason"],
            "interrupted by Ctrl-C at 2.0 s"
        );
        assert_eq!(json["valid"], serde_json::Value::Null);
        let back: Results = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        // Files written before the field existed read as "not said".
        let mut old = serde_json::to_value(results(Validity::Valid)).unwrap();
        old.as_object_mut().unwrap().remove("completeness");
        let back: Results = serde_json::from_value(old).unwrap();
        assert_eq!(back.completeness, None);
    }
}
