//! `lockpick test` end to end: the suite against the embedded lockd and store, correct and with
//! one bug class at a time, each found by the scenario aimed at it with nothing but the target
//! given; the budget kept; a violation stopping the suite and shrunk. And the verdict's gate on
//! what a single run exercised: a run that drew no fault, or only a slow clock, is `unknown`.
//!
//! Leases of 500 ms keep every scenario a few seconds long; the faults are aimed by the plan,
//! so each bug is met by construction, not by a lucky draw.

mod common;

use common::BIN;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Shortens every scenario: a 500 ms lease, holds well inside it.
const FAST: &[&str] = &[
    "--ttl",
    "500ms",
    "--hold",
    "20ms..200ms",
    "--op-timeout",
    "500ms",
];

fn suite(out: &Path, args: &[&str], limit: Duration) -> common::Suite {
    let mut all = vec!["--seed", "1"];
    all.extend_from_slice(FAST);
    all.extend_from_slice(args);
    common::suite(out, &all, limit)
}

/// Each bug class of the embedded services, found by the suite with only the bug given, and
/// which scenario kind found it.
#[test]
fn every_bug_class_is_found_by_the_scenario_aimed_at_it() {
    if !common::require_clock_faults() {
        return;
    }
    let cases: &[(&[&str], &str, &[&str])] = &[
        (
            &["--unsafe", "racy", "--workload", "mutex"],
            "contention",
            &["double-grant"],
        ),
        (
            &["--unsafe", "renew-grace", "--workload", "mutex"],
            "client-pause",
            &["stale-renew-accepted"],
        ),
        // Waits never refused: the bank's contention scenario (opposite lock orders).
        (
            &["--unsafe", "no-wait-timeout"],
            "contention",
            &["deadlock"],
        ),
        (
            &["--store-fence", "none"],
            "client-pause",
            &["lost-update", "stale-write-accepted"],
        ),
        (
            &[
                "--unsafe",
                "volatile",
                "--workload",
                "mutex",
                "--nemesis",
                "kill",
            ],
            "kill",
            &["double-grant", "token-reused", "token-regressed"],
        ),
        (
            &[
                "--unsafe",
                "wall-clock",
                "--workload",
                "mutex",
                "--nemesis",
                "clock",
            ],
            "clock",
            &["double-grant", "token-regressed"],
        ),
    ];
    // Stand-ins outside lockd, written from docs/protocol.md: a restart that grants at once,
    // and a lease kept in whole seconds (shown by a lease that is not one: --ttl 1500ms).
    let flawed = |bug: &str| {
        format!(
            "python3 {}/tests/services/flawed_lockd.py --host {{host}} --port {{port}} --data-dir {{data_dir}} --bug {bug}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let (no_recovery, ttl_unit) = (flawed("no-recovery"), flawed("ttl-unit"));
    let standins: Vec<(Vec<&str>, &str, &[&str])> = vec![
        // A Python service takes a few hundred ms to come back: a 2 s lease outlives that.
        (
            vec![
                "--node-cmd",
                &no_recovery,
                "--workload",
                "mutex",
                "--nemesis",
                "kill",
                "--ttl",
                "2s",
            ],
            "kill",
            &["double-grant"],
        ),
        (
            vec![
                "--node-cmd",
                &ttl_unit,
                "--workload",
                "mutex",
                "--ttl",
                "1500ms",
            ],
            "client-pause",
            &["double-grant", "token-regressed", "stale-renew-accepted"],
        ),
    ];
    let python = common::require_python();
    let cases: Vec<(&[&str], &str, &[&str])> = cases
        .iter()
        .copied()
        .chain(
            standins
                .iter()
                .filter(|_| python)
                .map(|(a, s, k)| (a.as_slice(), *s, *k)),
        )
        .collect();
    std::thread::scope(|s| {
        for &(args, scenario, kinds) in &cases {
            s.spawn(move || {
                let tmp = tempfile::tempdir().unwrap();
                let mut all = args.to_vec();
                all.extend_from_slice(&["--no-shrink"]);
                let r = suite(tmp.path(), &all, Duration::from_secs(300));
                assert_eq!(r.code, 1, "{args:?}: expected invalid\n{}", r.stdout);
                let j = r.json();
                assert_eq!(j["valid"], false, "{args:?}");
                let scenarios = j["scenarios"].as_array().unwrap();
                let last = scenarios.last().unwrap();
                assert_eq!(
                    last["verdict"], "invalid",
                    "{args:?}: the suite stops at the first violation"
                );
                let aims: Vec<&str> = last["aims"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                // The odd-ttl cell is a stall too (boundary/renew under an odd lease).
                let stall = |a: &&str| {
                    a.starts_with(scenario)
                        || (scenario == "client-pause" && a.starts_with("lease"))
                };
                assert!(
                    aims.iter().any(stall),
                    "{args:?}: found by {aims:?}, expected a {scenario} scenario\n{}",
                    r.stdout
                );
                let found: Vec<&str> = last["violations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert!(
                    found.iter().any(|k| kinds.contains(k)),
                    "{args:?}: {found:?}"
                );
                assert!(j["first_violation_ms"].as_u64().is_some());
                // One report per scenario, linked from the suite's index.
                let index = std::fs::read_to_string(r.dir.join("index.html")).unwrap();
                assert!(index.contains("report.html"), "{args:?}");
                // And what the terminal said of it: the cells by kind, the first violation.
                assert!(
                    index.contains("by kind:") && index.contains("first violation:"),
                    "{args:?}: {index}"
                );
                let junit = std::fs::read_to_string(r.dir.join("junit.xml")).unwrap();
                assert!(junit.contains("<failure"), "{args:?}");
                // The counts CI tools read are the cases': one failure per failing scenario,
                // and the cells left beside it skipped, not a second failure.
                let attr = |name: &str| -> usize {
                    let at = junit.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    junit[at..].split('"').next().unwrap().parse().unwrap()
                };
                assert_eq!(
                    attr("failures"),
                    junit.matches("<failure ").count(),
                    "{junit}"
                );
                assert_eq!(
                    attr("skipped"),
                    junit.matches("<skipped ").count(),
                    "{junit}"
                );
                let left = !j["not_exercised"].as_array().unwrap().is_empty();
                assert_eq!(attr("skipped"), usize::from(left), "{junit}");
            });
        }
    });
}

/// The correct lockd (mutex, no clock faults to keep it short): every cell exercised, valid,
/// exit 0; each scenario has its run directory and report.
#[test]
fn the_correct_lockd_is_valid_with_every_cell_exercised() {
    let tmp = tempfile::tempdir().unwrap();
    let r = suite(
        tmp.path(),
        &[
            "--workload",
            "mutex",
            "--nemesis",
            "pause,kill,client-pause",
        ],
        Duration::from_secs(400),
    );
    let j = r.json();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, j["why"]);
    assert_eq!(j["valid"], true);
    assert_eq!(j["ended"], "planned", "{j}");
    assert!(j["not_exercised"].as_array().unwrap().is_empty());
    let cells = j["cells"].as_array().unwrap();
    // Contention on the mutex (the workload named), the odd ttl, 3 aims x 2 wakes (mutex),
    // waiter, kill, pause.
    assert_eq!(cells.len(), 1 + 1 + 6 + 1 + 2, "{cells:?}");
    for c in cells {
        assert!(c["exercised"].as_u64().unwrap() >= 1, "{c}");
        assert!(c["tries"].as_u64().unwrap() <= 3, "{c}");
    }
    // Each run asked for the faults its scenario aimed, not for every kind of the suite.
    assert_exercised_scenarios_are_valid(&r.stdout);
    for s in j["scenarios"].as_array().unwrap() {
        let d = PathBuf::from(s["run_dir"].as_str().unwrap());
        assert!(d.join("report.html").is_file(), "{s}");

        let replay = s["replay"].as_str().unwrap();
        assert!(replay.starts_with("lockpick run --config "), "{replay}");
        assert_replays_outside_the_suite(replay, &d);
    }
}

/// A replay line names `--out` last, a folder outside the suite that ran `run_dir`: the
/// scenario's config.toml pins its run's folder, inside the suite, and a replay that went
/// there would land in the archived suite.
fn assert_replays_outside_the_suite(replay: &str, run_dir: &std::path::Path) {
    let (rest, out) = replay.rsplit_once(' ').unwrap();
    assert!(rest.ends_with(" --out"), "{replay}");
    let suite_dir = run_dir.ancestors().nth(3).unwrap();
    assert!(
        !std::path::Path::new(out).starts_with(suite_dir),
        "{replay} replays into the suite at {}",
        suite_dir.display()
    );
}

/// A valid suite holds no scenario whose own run is unknown though it exercised every cell it
/// aimed at: each run asks for the faults its scenario aimed. The scenario aimed at a slow clock alone asks for a slow clock
/// (`--clock-faults slow`), not for the step or fast clock a run of the suite's settings (clock
/// faults in their default directions) must reach, which its schedule never holds.
#[test]
fn a_valid_suite_holds_no_scenario_whose_own_run_is_unknown() {
    if !common::require_clock_faults() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The default lease, not FAST's: with a short one every clock cell fits one scenario, and
    // the slow one is never alone.
    let args = ["--workload", "mutex", "--nemesis", "clock", "--seed", "7"];
    let r = common::suite(tmp.path(), &args, Duration::from_secs(400));
    let j = r.json();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, j["why"]);
    let scenarios = j["scenarios"].as_array().unwrap();
    let slow_alone = |s: &&Value| {
        s["aims"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a.as_str().unwrap().starts_with("clock slow"))
    };
    // With this seed the slow clock is planned alone once the other directions are
    // exercised; a retried cell packed beside it (a loaded machine) leaves no such scenario,
    // and the unit tests of `asked_of` and the gate's needs hold the rule then. Said, not hidden.
    if !scenarios.iter().any(|s| slow_alone(&s)) {
        eprintln!("NOTE: no scenario aimed at a slow clock alone this time: {scenarios:?}");
    }
    assert_exercised_scenarios_are_valid(&r.stdout);
}

/// Every scenario line of a valid suite's output (`  ID  planned  X s  VERDICT  took  Y s
/// exercised A/B`) whose aimed cells were all exercised says `valid`: its run asked for what its
/// schedule held, and got it. (A scenario whose stall no holder took is `unknown`, rightly: the
/// suite retries its cell.) At least one line is read.
fn assert_exercised_scenarios_are_valid(stdout: &str) {
    let mut read = 0;
    for line in stdout.lines() {
        // An id longer than its column is on the line before, alone.
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "planned") else {
            continue;
        };
        let ["planned", _, "s", verdict, "took", _, "s", "exercised", counts, ..] = words[at..]
        else {
            continue;
        };
        read += 1;
        let (a, b) = counts.split_once('/').unwrap();
        if a == b {
            assert_eq!(verdict, "valid", "{line}\n{stdout}");
        }
    }
    assert!(read > 0, "no scenario line read:\n{stdout}");
}

/// A workload the user names is the suite's: only the cells it exercises are planned and
/// counted, and the cell count and the verdict say so, naming the other workloads' cells left
/// out. Unnamed, every workload the service runs has its contention cell. A budget of 1 s plans
/// no scenario, so the plan is all that is looked at.
#[test]
fn a_named_workload_plans_and_counts_only_its_own_cells() {
    // The flags, the contention cells planned, suite.json's `workload`, and what the cell
    // count says after its figure.
    type Case<'a> = (&'a [&'a str], &'a [&'a str], Option<&'a str>, &'a str);
    let cases: [Case; 3] = [
        (
            &["--workload", "mutex"],
            &["contention mutex"],
            Some("mutex"),
            "(workload mutex only; not planned: contention counter, contention bank)",
        ),
        (
            &["--workload", "bank"],
            &["contention bank"],
            Some("bank"),
            "(workload bank only; not planned: contention mutex, contention counter)",
        ),
        (
            &[],
            &["contention mutex", "contention counter", "contention bank"],
            None,
            "",
        ),
    ];
    for (args, contention, workload, scope) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let mut all = vec!["--nemesis", "client-pause", "--budget", "1s"];
        all.extend_from_slice(args);
        let r = suite(tmp.path(), &all, Duration::from_secs(60));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stdout);
        let j = r.json();
        let cells: Vec<&str> = j["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["cell"].as_str())
            .collect();
        let planned: Vec<&str> = cells
            .iter()
            .copied()
            .filter(|c| c.starts_with("contention"))
            .collect();
        assert_eq!(planned, contention, "{args:?}");
        assert_eq!(j["workload"].as_str(), workload, "{args:?}");
        // A bank transfer's holder can be stalled between its reads and its writes, as a
        // counter's can: the bank's suite aims there too (a mutex holder neither reads nor
        // writes).
        let aims_write = cells.contains(&"client-pause boundary/write");
        assert_eq!(aims_write, workload != Some("mutex"), "{args:?}: {cells:?}");
        let summary = std::fs::read_to_string(r.dir.join("summary.txt")).unwrap();
        let line = format!("cells exercised: 0 of {}", cells.len());
        let said = summary
            .lines()
            .find(|l| l.contains(&line))
            .unwrap_or_else(|| panic!("{args:?}: {summary}"));
        assert_eq!(said.trim(), format!("{line} {scope}").trim(), "{args:?}");
        assert!(
            r.stdout.contains(scope.trim_matches(['(', ')'])),
            "{args:?}"
        );
    }
}

/// A duration set in the config file does not apply to the suite (it plans each scenario's
/// length), and the suite says so in one line naming the file, line and key and what to use
/// instead, on stderr and in summary.txt, rather than ignore it; the starter `lockpick init`
/// writes draws no warning. A budget of 1 s plans no scenario.
#[test]
fn a_duration_in_the_config_file_is_named_not_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let file = tmp.path().join("lockpick.toml");
    std::fs::write(&file, "[workload]\nclients = 3\nduration = \"20s\"\n").unwrap();
    let starter = tmp.path().join("starter.toml");
    let o = common::run_with_limit(
        &["init", starter.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(0));
    let warning = format!(
        "warning: {}:3: `workload.duration` = \"20s\" does not apply to the suite: each \
         scenario's length comes from its plan; bound the whole suite with --budget (now 1s)",
        file.display()
    );
    for (config, said) in [(&file, Some(warning.as_str())), (&starter, None)] {
        let o = common::run_with_limit(
            &[
                "test",
                "--config",
                config.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--nemesis",
                "client-pause",
                "--budget",
                "1s",
            ],
            Duration::from_secs(60),
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stdout}\n{stderr}");
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("warning: "))
            .collect();
        assert_eq!(warnings, Vec::from_iter(said), "{config:?}");
        let dir = stdout
            .lines()
            .find_map(|l| l.strip_prefix("suite directory: "))
            .unwrap()
            .trim();
        let summary = std::fs::read_to_string(Path::new(dir).join("summary.txt")).unwrap();
        match said {
            Some(w) => assert!(summary.contains(&format!("  {w}\n")), "{summary}"),
            None => assert!(!summary.contains("warning"), "{summary}"),
        }
    }
}

/// A budget too small for the plan: the suite stops planning, keeps the budget, and says which
/// cells it never tried; unknown, exit 2.
#[test]
fn the_budget_is_kept_and_what_it_left_out_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let r = suite(
        tmp.path(),
        &["--workload", "mutex", "--budget", "12s"],
        Duration::from_secs(120),
    );
    let spent = started.elapsed();
    assert_eq!(r.code, 2, "{}", r.stdout);
    let j = r.json();
    assert_eq!(j["valid"], serde_json::Value::Null);
    // Not interrupted: the budget ended it, and suite.json says so.
    assert_eq!(
        (&j["complete"], &j["ended"]),
        (&true.into(), &"budget".into()),
        "{j}"
    );
    let why = j["why"].as_str().unwrap();
    assert!(
        why.contains("requested, not exercised") && why.contains("budget"),
        "{why}"
    );
    assert!(
        j["not_exercised"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().ends_with("(not tried)")),
        "{j}"
    );
    // The budget bounds the scenarios planned; start-up and the report add a little.
    assert!(spent < Duration::from_secs(12 + 15), "{spent:?}");
    // The output folder's index lists the suite with its verdict and a link to its page
    // (it once showed every suite as unreadable).
    let index = std::fs::read_to_string(tmp.path().join("index.html")).unwrap();
    let mut last_two = r.dir.iter().rev().take(2);
    let (stamp, name) = (last_two.next().unwrap(), last_two.next().unwrap());
    let page = format!(
        "<a href=\"{}/{}/index.html\">",
        name.to_string_lossy(),
        stamp.to_string_lossy()
    );
    let row = index
        .lines()
        .find(|l| l.contains(&page))
        .unwrap_or_else(|| panic!("no row links {page}\n{index}"));
    assert!(
        row.contains("<td class=\"unknown\">unknown") && row.contains("requested, not exercised"),
        "{row}"
    );
}

/// A violation stops the suite and is shrunk: the minimal schedule and its replay command are
/// printed and kept in suite.json.
#[test]
fn a_violation_stops_the_suite_and_is_shrunk() {
    let tmp = tempfile::tempdir().unwrap();
    let r = suite(
        tmp.path(),
        &[
            "--unsafe",
            "renew-grace",
            "--workload",
            "mutex",
            "--shrink-budget",
            "60s",
        ],
        Duration::from_secs(300),
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    let j = r.json();
    let shrunk = &j["shrunk"];
    let found = j["scenarios"].as_array().unwrap().last().unwrap()["violations"].clone();
    assert!(found.as_array().unwrap().contains(&shrunk["kind"]), "{j}");
    let replay = shrunk["replay"].as_str().unwrap();
    assert!(
        replay.starts_with("lockpick run --config ") && replay.contains("--schedule"),
        "{replay}"
    );
    let failing = PathBuf::from(
        j["scenarios"].as_array().unwrap().last().unwrap()["run_dir"]
            .as_str()
            .unwrap(),
    );
    assert_replays_outside_the_suite(replay, &failing);
    // Shrunk, or (a machine so loaded that no smaller candidate failed within the budget)
    // said not to be, with why: never "minimal" for a schedule no candidate made smaller.
    let said = match shrunk["shrunk"].as_bool() {
        Some(true) => "minimal replay: lockpick run --config",
        _ => "not shrunk: none of the",
    };
    assert!(r.stdout.contains(said), "{said}\n{}", r.stdout);
    // Nothing was planned after the failing scenario.
    let last = j["scenarios"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["verdict"], "invalid");
}

/// The gate of a single run: one that drew no fault asked for every default kind and
/// exercised none, so it is unknown (exit 2) and says what; `--nemesis none` is valid and says
/// happy path only.
#[test]
fn a_run_that_exercised_nothing_it_asked_for_is_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let r = common::run(
        tmp.path(),
        &["--duration", "1s", "--seed", "1"],
        Duration::from_secs(60),
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let res = r.results();
    assert_eq!(res["valid"], serde_json::Value::Null);
    let notes: Vec<&str> = res["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let line = notes
        .iter()
        .find(|n| n.starts_with("requested, not exercised: "))
        .expect("the note");
    for kind in ["pause", "kill", "client-pause"] {
        assert!(line.contains(kind), "{line}");
    }
    let summary = std::fs::read_to_string(r.run_dir().join("summary.txt")).unwrap();
    assert!(summary.contains("requested, not exercised"), "{summary}");

    let tmp = tempfile::tempdir().unwrap();
    let r = common::run(
        tmp.path(),
        &["--duration", "1s", "--seed", "1", "--nemesis", "none"],
        Duration::from_secs(60),
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let res = r.results();
    assert!(
        res["notes"].to_string().contains("happy path only"),
        "{res}"
    );
}

/// A run whose only clock fault was slow (replayed from a schedule, so it is exactly that) asked
/// for clock faults in their default directions and met none that can shorten a lease: unknown,
/// naming the clock.
#[test]
fn a_run_whose_only_clock_fault_was_slow_is_unknown() {
    if !common::require_clock_faults() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let schedule = tmp.path().join("slow.json");
    std::fs::write(
        &schedule,
        r#"{"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": [
            {"id": "f1", "kind": "clock", "at_ms": 500, "length_ms": 2000, "nodes": ["n1"],
             "mode": "slow", "rate": 0.25}]}"#,
    )
    .unwrap();
    let out = tmp.path().join("runs");
    let mut args = vec![
        "--workload",
        "mutex",
        "--duration",
        "4s",
        "--seed",
        "1",
        "--schedule",
        schedule.to_str().unwrap(),
    ];
    args.extend_from_slice(FAST);
    let r = common::run(&out, &args, Duration::from_secs(60));
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let res = r.results();
    let notes = res["notes"].to_string();
    assert!(
        notes.contains("requested, not exercised: clock (a step or a fast clock"),
        "{notes}"
    );
    let cells = res["coverage"]["cells"].as_array().unwrap();
    assert!(
        cells
            .iter()
            .any(|c| c["variant"] == "slow" && c["exercised"] == 1),
        "the slow clock itself was exercised: {cells:?}"
    );
    let _ = BIN;
}

/// `lockpick demo --unsafe racy` fails in its first scenario, a short run without faults
/// stopped on its violation: there is nothing to shrink, and the output says that once, in
/// plain words, without a length it did not use or a reason that did not happen.
#[test]
fn the_racy_demo_says_its_failure_is_already_minimal() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let o = common::run_with_limit(
        &["demo", "--out", out.to_str().unwrap(), "--unsafe", "racy"],
        Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    // A scenario's line: `  01-contention-mutex    planned   2.0 s ...`.
    let scenarios: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains(" planned ") && l.contains(" took "))
        .collect();
    assert!(
        scenarios.len() == 1 && scenarios[0].contains("01-contention-mutex"),
        "{stdout}"
    );
    for said in [
        "not shrunk: already minimal: no faults to remove, and its 2.0 s run is no longer than \
         the shortest a shrink tries (2.0 s); the failing schedule as it ran:",
        "  0 fault(s), 2.0 s run, double-grant",
        "  not shrunk: already minimal: no faults to remove",
    ] {
        assert!(stdout.contains(said), "{said:?} not in\n{stdout}");
    }
    for unsaid in [
        "with a lease to spare",
        "smallest failing schedule:",
        "no candidate could run",
    ] {
        assert!(!stdout.contains(unsaid), "{unsaid:?} in\n{stdout}");
    }
}

/// A budget too small for the first scenario runs nothing (as a plan-only suite does) and
/// says why, in the verdict's reason and on stderr, naming the budget, the scenario's length
/// and a budget that runs it; that budget does.
#[test]
fn a_budget_too_small_for_the_first_scenario_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let flags = ["--nemesis", "client-pause", "--seed", "3"];
    let mut small = vec!["test", "--out", out.to_str().unwrap(), "--budget", "5s"];
    small.extend(flags);
    let o = common::run_with_limit(&small, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stdout}\n{stderr}");
    let why = "nothing was run: --budget 5s is too small for the first scenario, planned for ";
    assert!(
        stdout.contains(&format!("suite verdict: UNKNOWN\n  {why}")),
        "{stdout}"
    );
    assert!(stderr.contains(&format!("lockpick: {why}")), "{stderr}");
    // The budget it names runs the first scenario.
    let enough = stderr
        .split("give --budget ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no budget named: {stderr}"));
    let r = common::suite(
        &out,
        &[&["--budget", enough][..], &flags].concat(),
        Duration::from_secs(120),
    );
    let j = r.json();
    assert!(
        !j["scenarios"].as_array().unwrap().is_empty(),
        "--budget {enough} ran nothing: {}",
        r.stdout
    );
}

/// Bad input is refused in one line naming the flag, before any suite directory exists.
#[test]
fn bad_suite_flags_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    for (args, needle) in [
        (&["--budget", "0s"][..], "--budget 0s"),
        (&["--budget", "soon"][..], "--budget \"soon\""),
        (&["--times", "0"][..], "--times 0"),
        (
            &["--schedule", "/nonexistent.json"][..],
            "--schedule /nonexistent.json",
        ),
    ] {
        let mut all = vec!["test", "--out", out.to_str().unwrap()];
        all.extend_from_slice(args);
        let o = common::run_with_limit(&all, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} made {}", out.display());
    }
    // What is refused is not offered: `test --help` and `demo --help` do not list it.
    for command in ["test", "demo"] {
        let o = common::run_with_limit(&[command, "--help"], Duration::from_secs(30));
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("--budget"), "{command}: {help}");
        assert!(!help.contains("--schedule"), "{command}: {help}");
    }
}

/// Ctrl-C ends the suite at once: the scenario in progress stops and is checked, and the
/// suite writes its verdict so far, unknown and incomplete (exit 2).
#[test]
fn ctrl_c_ends_the_suite_with_the_verdict_so_far() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args([
            "test",
            "--out",
            tmp.path().to_str().unwrap(),
            "--seed",
            "1",
            "--workload",
            "mutex",
        ])
        .args(FAST)
        .env_remove("CI")
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut dir = None;
    // The suite directory, then the first scenario's line: the second scenario is running.
    for line in lines.by_ref().take(10) {
        let line = line.unwrap();
        if let Some(d) = line.strip_prefix("suite directory: ") {
            dir = Some(PathBuf::from(d.trim()));
        }
        if line.contains("01-contention") && line.contains("exercised") {
            break;
        }
    }
    let dir = dir.expect("the suite printed its directory");
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(2), "{rest:?}");
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("suite.json")).unwrap()).unwrap();
    assert_eq!(j["valid"], serde_json::Value::Null);
    assert_eq!(j["complete"], false);
    assert_eq!(j["ended"], "interrupted", "{j}");
    assert!(j["why"].as_str().unwrap().contains("Ctrl-C"), "{j}");
    assert_eq!(j["scenarios"].as_array().unwrap().len(), 2, "{j}");
}
