//! `<out>/index.html` lists a suite's directory (`lockpick test`, `lockpick demo`) as the suite
//! it is: its verdict from suite.json, its scenarios' violations counted from their runs, and a
//! link to its own index.html. The trial's index showed every suite as "unreadable" (it looked
//! for a run's results.json there). A directory that really cannot be read is still listed as
//! unreadable, and says why.

use std::path::Path;

/// A scenario's run under the suite: its id, its violations and its warnings.
type Scenario = (&'static str, usize, usize);

/// What a case puts in its directory.
enum Dir {
    Suite {
        valid: &'static str,
        why: &'static str,
        complete: bool,
        scenarios: &'static [Scenario],
    },
    /// A suite whose suite.json is not written yet: only its base.toml.
    SuiteStarting,
    /// A run directory with this results.json text.
    Results(&'static str),
    Empty,
}

struct Case {
    what: &'static str,
    name: &'static str,
    /// The directory's stamp: each case's row is found by its date.
    stamp: &'static str,
    dir: Dir,
    /// The verdict cell's class (and word), the line under it, violations, warnings, and the
    /// link's target file (none: no link).
    verdict: &'static str,
    said: &'static str,
    counts: (usize, usize),
    link: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "a valid demo",
            name: "demo",
            stamp: "20261207T135930.000Z",
            dir: Dir::Suite {
                valid: "valid",
                why: "every cell exercised 1 time(s), no violation",
                complete: true,
                scenarios: &[("01-contention-mutex", 0, 0), ("02-pause-primary", 0, 1)],
            },
            verdict: "valid",
            said: "every cell exercised 1 time(s), no violation",
            counts: (0, 1),
            link: Some("index.html"),
        },
        Case {
            what: "an invalid suite: its scenarios' violations are counted, not their kinds",
            name: "redis-mutex-test",
            stamp: "20261207T140409.000Z",
            dir: Dir::Suite {
                valid: "invalid",
                why: "scenario 02-client-pause found lost-update",
                complete: true,
                scenarios: &[("01-contention-mutex", 0, 0), ("02-client-pause", 3, 2)],
            },
            verdict: "invalid",
            said: "scenario 02-client-pause found lost-update",
            counts: (3, 2),
            link: Some("index.html"),
        },
        Case {
            what: "a suite stopped by Ctrl-C",
            name: "lockd-counter-test",
            stamp: "20261207T141007.000Z",
            dir: Dir::Suite {
                valid: "unknown",
                why: "stopped by Ctrl-C before every cell was exercised",
                complete: false,
                scenarios: &[("01-contention-counter", 0, 0)],
            },
            verdict: "unknown",
            said: "incomplete suite (stopped by Ctrl-C before every cell was exercised)",
            counts: (0, 0),
            link: Some("index.html"),
        },
        Case {
            what: "a suite still running",
            name: "lockd-counter-test",
            stamp: "20261207T141107.000Z",
            dir: Dir::SuiteStarting,
            verdict: "unreadable",
            said: "a suite with no suite.json yet",
            counts: (0, 0),
            link: None,
        },
        Case {
            what: "a run whose results.json is cut off",
            name: "lockd-counter",
            stamp: "20261207T141207.000Z",
            dir: Dir::Results("{\"valid\": tr"),
            verdict: "unreadable",
            said: "results.json: ",
            counts: (0, 0),
            link: None,
        },
        Case {
            what: "a run that wrote nothing yet",
            name: "lockd-counter",
            stamp: "20261207T141307.000Z",
            dir: Dir::Empty,
            verdict: "unreadable",
            said: "no results.json yet",
            counts: (0, 0),
            link: None,
        },
    ]
}

/// A verdict as results.json and suite.json write it: `true`, `false` or `null`.
fn written(verdict: &str) -> serde_json::Value {
    match verdict {
        "valid" => true.into(),
        "invalid" => false.into(),
        _ => serde_json::Value::Null,
    }
}

/// results.json of a run with `violations` and `warnings` (built as JSON: the index reads only
/// the verdict, the lists and how the run ended).
fn results(violations: usize, warnings: usize) -> String {
    let v = serde_json::json!({"kind": "double-grant", "ops": [], "window_ns": [0, 1]});
    serde_json::json!({
        "valid": written(if violations > 0 { "invalid" } else { "valid" }),
        "violations": vec![v.clone(); violations],
        "warnings": vec![v; warnings],
    })
    .to_string()
}

fn make(dir: &Path, what: &Dir) {
    std::fs::create_dir_all(dir).unwrap();
    match what {
        Dir::Suite {
            valid,
            why,
            complete,
            scenarios,
        } => {
            std::fs::write(dir.join("base.toml"), "[run]\nseed = 5\n").unwrap();
            let mut listed = Vec::new();
            for (id, violations, warnings) in *scenarios {
                let run = dir.join("scenarios").join(id).join("20261207T150000.000Z");
                std::fs::create_dir_all(&run).unwrap();
                std::fs::write(run.join("results.json"), results(*violations, *warnings)).unwrap();
                // As the suite records it: an absolute path, which may be stale by now.
                let recorded = Path::new("/elsewhere/runs/suite/scenarios")
                    .join(id)
                    .join("20261207T150000.000Z");
                listed.push(serde_json::json!({"id": id, "run_dir": recorded, "violations": []}));
            }
            let suite = serde_json::json!({
                "valid": written(valid), "why": why, "complete": complete, "scenarios": listed,
            });
            std::fs::write(dir.join("suite.json"), suite.to_string()).unwrap();
            std::fs::write(dir.join("index.html"), "<html></html>").unwrap();
        }
        Dir::SuiteStarting => std::fs::write(dir.join("base.toml"), "").unwrap(),
        Dir::Results(text) => std::fs::write(dir.join("results.json"), text).unwrap(),
        Dir::Empty => {}
    }
}

#[test]
fn a_suite_is_listed_with_its_verdict_and_an_unreadable_directory_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    let cases = cases();
    for c in &cases {
        make(&out.join(c.name).join(c.stamp), &c.dir);
    }
    let html = std::fs::read_to_string(reports::write_index(out).unwrap()).unwrap();
    for c in &cases {
        let date = format!(
            "{}-{}-{} {}:{}:{}",
            &c.stamp[0..4],
            &c.stamp[4..6],
            &c.stamp[6..8],
            &c.stamp[9..11],
            &c.stamp[11..13],
            &c.stamp[13..15]
        );
        let row = html
            .lines()
            .find(|l| l.contains(&date))
            .unwrap_or_else(|| panic!("{}: no row\n{html}", c.what));
        assert!(
            row.contains(&format!("<td class=\"{0}\">{0}<span class=\"", c.verdict)),
            "{}: {row}",
            c.what
        );
        assert!(row.contains(c.said), "{}: {row}", c.what);
        let (violations, warnings) = c.counts;
        assert!(
            row.contains(&format!(
                "<td class=\"n\">{violations}</td><td class=\"n\">{warnings}</td>"
            )),
            "{}: {row}",
            c.what
        );
        match c.link {
            Some(file) => assert!(
                row.contains(&format!("<a href=\"{}/{}/{file}\">", c.name, c.stamp)),
                "{}: {row}",
                c.what
            ),
            None => assert!(!row.contains("<a href"), "{}: {row}", c.what),
        }
        if let Dir::Suite { .. } = c.dir {
            // The suite's settings, from its base.toml.
            assert!(row.contains("<td>5</td>"), "{}: the seed\n{row}", c.what);
        }
    }
}
