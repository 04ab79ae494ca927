//! CI gating: which classes of finding fail the build (`--fail-on`), and GitHub Actions
//! annotation lines.

use crate::escape::{gh_data, gh_property};
use history::{ExitCode, KindClass, Results, Validity, ViolationKind};
use std::str::FromStr;

/// Which findings make the exit code non-zero. Default: safety and liveness violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailOn {
    pub safety: bool,
    pub liveness: bool,
    pub warnings: bool,
    /// Requested fault kinds and client-fault shapes the run exercised nowhere
    /// ([`crate::coverage_gaps`]).
    pub coverage: bool,
}

impl Default for FailOn {
    fn default() -> Self {
        FailOn {
            safety: true,
            liveness: true,
            warnings: false,
            coverage: false,
        }
    }
}

/// A `--fail-on` value that is not a list of safety, liveness, warnings, coverage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--fail-on {0:?}: expected a comma-separated list of safety, liveness, warnings, coverage")]
pub struct FailOnError(pub String);

impl FromStr for FailOn {
    type Err = FailOnError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut f = FailOn {
            safety: false,
            liveness: false,
            warnings: false,
            coverage: false,
        };
        for part in s.split(',').map(str::trim) {
            match part {
                "safety" => f.safety = true,
                "liveness" => f.liveness = true,
                "warnings" => f.warnings = true,
                "coverage" => f.coverage = true,
                _ => return Err(FailOnError(s.to_string())),
            }
        }
        Ok(f)
    }
}

impl FailOn {
    /// The policy `--fail-on` gave, or the default: safety and liveness, with `coverage` added
    /// when the process runs under CI (`CI` or `GITHUB_ACTIONS` set to anything but `false` or
    /// empty): a gate must not pass a run that exercised less than it asked for.
    pub fn given_or_default(given: Option<FailOn>) -> FailOn {
        let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty() && v != "false");
        given.unwrap_or(FailOn {
            coverage: set("CI") || set("GITHUB_ACTIONS"),
            ..FailOn::default()
        })
    }

    /// The classes this policy fails on, in the words `--fail-on` takes.
    pub fn names(&self) -> Vec<&'static str> {
        [
            ("safety", self.safety),
            ("liveness", self.liveness),
            ("warnings", self.warnings),
            ("coverage", self.coverage),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect()
    }

    /// The exit code for `r` under this policy. `unknown` stays 2 whatever the policy: a run
    /// that proved nothing must never pass a gate. Invalid results whose violations are all of
    /// classes the policy ignores pass (0).
    /// Whether a finding of `kind` fails the run under this policy.
    pub fn counts(&self, kind: ViolationKind) -> bool {
        match kind.class() {
            KindClass::Safety => self.safety,
            KindClass::Liveness => self.liveness,
            KindClass::Warning => self.warnings,
        }
    }

    pub fn exit_code(&self, r: &Results) -> ExitCode {
        if r.violations.iter().any(|v| self.counts(v.kind))
            || (self.warnings && !r.warnings.is_empty())
        {
            return ExitCode::Invalid;
        }
        // A run that exercised nothing of something it asked for rests on less than its
        // verdict says: it fails like a counted violation (an unknown verdict stays unknown).
        if self.coverage && r.valid != Validity::Unknown && !crate::coverage_gaps(r).is_empty() {
            return ExitCode::Invalid;
        }
        match r.valid {
            Validity::Unknown => ExitCode::Unknown,
            // A run cut short passes no gate: what it did not record may hold the violation.
            _ if r.incomplete().is_some() => ExitCode::Unknown,
            // Invalid with no counted violation (e.g. only liveness under --fail-on safety).
            Validity::Invalid | Validity::Valid => ExitCode::Valid,
        }
    }
}

/// Detailed annotations printed when `GITHUB_ACTIONS=true`, after the one summary line:
/// GitHub shows only the first few per step anyway, and a wall of them hides the verdict.
const ANNOTATIONS_MAX: usize = 10;

/// One summary line first (`::error` when the policy fails the run, else `::notice`: the
/// verdict, counts by kind, where the report is), then at most [`ANNOTATIONS_MAX`] detailed
/// lines: `::error` for the violations the policy counts, `::warning` for the rest and for
/// warnings, and a last `::notice` counting what was left out. `report` is the path of
/// report.html, named in each message.
pub fn github_annotations(r: &Results, fail_on: &FailOn, report: &str) -> Vec<String> {
    let counted = |k: ViolationKind| fail_on.counts(k);
    let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
    for v in r.violations.iter().chain(&r.warnings) {
        *kinds.entry(v.kind.as_str()).or_default() += 1;
    }
    let mut by_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    // Counted past those results.json lists: their kinds are not kept.
    if r.warnings_unlisted > 0 {
        by_kind.push(format!("warnings not listed x{}", r.warnings_unlisted));
    }
    let fails = fail_on.exit_code(r).code() != 0;
    // Why an unknown verdict is unknown, as summary.txt says it (the cut short, said just
    // before, once).
    let why: Vec<String> = (crate::unknown_reasons(r).into_iter())
        .filter(|w| r.incomplete().is_none() || !w.starts_with("the run did not complete"))
        .collect();
    let mut out = vec![format!(
        "::{} title={}::{}",
        if fails { "error" } else { "notice" },
        gh_property("lockpick verdict"),
        gh_data(&format!(
            "{}{}{}: {} violation(s), {} warning(s){}{} (see {report})",
            r.valid.as_str().to_uppercase(),
            r.incomplete()
                .map(|c| format!(" (incomplete run, {})", c.headline()))
                .unwrap_or_default(),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            },
            r.violations.len(),
            r.warnings_found(),
            if by_kind.is_empty() { "" } else { ": " },
            by_kind.join(", ")
        ))
    )];
    for v in r.violations.iter().chain(&r.warnings).take(ANNOTATIONS_MAX) {
        let level = if counted(v.kind) { "error" } else { "warning" };
        let title = format!("lockpick {}", v.kind);
        out.push(format!(
            "::{level} title={}::{}",
            gh_property(&title),
            gh_data(&format!("{} (see {report})", v.explanation))
        ));
    }
    if fail_on.coverage {
        for gap in crate::coverage_gaps(r) {
            out.push(format!(
                "::error title={}::{}",
                gh_property("lockpick coverage"),
                gh_data(&format!("{gap} (see {report})"))
            ));
        }
    }
    let total = r.violations.len() + r.warnings_found() as usize;
    if total > ANNOTATIONS_MAX {
        out.push(format!(
            "::notice::{} more finding(s) in {}",
            total - ANNOTATIONS_MAX,
            gh_data(report)
        ));
    }
    out
}
