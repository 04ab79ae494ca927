//! `lockpick check PATH`, and the one way a history becomes a verdict: read back from its
//! file, the same path for a live run and for an offline check.

use crate::cli::CheckArgs;
use crate::report_cmd;
use anyhow::Result;
use history::{layout, Completeness, ExitCode, JudgedFrom, Results, Validity};
use std::path::Path;

/// Reads a history file back and checks it: the run's verdict comes from the file, the same
/// path `lockpick check` takes, so the file is the one boundary.
pub fn check_file(path: &Path, cfg: &checkers::CheckConfig) -> Result<Results> {
    // What the verdict is judged from, hashed beside the check (hashing first took a tenth of
    // a 10M-event check, on the critical path). A history that changed while it was judged
    // (its length or modification time differ after) is recorded with no hash, so it never
    // matches and is judged again: never the other way round.
    let before = fingerprint(path);
    let (judged, checked) = std::thread::scope(|scope| {
        let hashing = scope.spawn(|| judged_from(path, Digest::Blake3).ok());
        // Streams the file into the checkers' compact digest: the events are never all in
        // memory.
        let checked = checkers::check_path(path, cfg);
        (hashing.join().ok().flatten(), checked)
    });
    let (mut results, warnings) = checked?;
    results.judged_from = judged.map(|mut j| {
        if before.is_none() || fingerprint(path) != before {
            j.blake3.clear();
        }
        j
    });
    for w in &warnings {
        results
            .notes
            .push(format!("{}:{}: {}", path.display(), w.line, w.message));
    }
    // A cut-off last line (the reader's one warning) says the writer was killed mid-run: what
    // it never wrote may hold the violation, so the history is judged as a cut-short run.
    if let Some(w) = warnings.first() {
        results.set_completeness(Completeness::interrupted(format!(
            "the history's last line ({}:{}) was cut off mid-write: its writer was stopped before the run ended",
            path.display(),
            w.line
        )));
    }
    // What the run's plan asked for, beside what its history shows: `--fail-on coverage`.
    crate::requested::add_from_schedule(path, &mut results);
    // A verdict rests on what the run exercised of what it asked for.
    crate::requested::gate_on_exercise(path, &mut results);
    Ok(results)
}

/// How the run in `dir` ended, as its results.json says. A run directory with a history but no
/// results never finished (the harness was killed, or the directory was put together by hand
/// around a history: either way nothing says the run went its whole way): `named` says `dir`
/// was named as the run directory; otherwise (a history.jsonl named) only a folder the runner
/// made (its log and config.toml beside the history) is taken for a run. `None` for a lone
/// history file.
pub fn run_completeness(dir: &Path, named: bool) -> Option<Completeness> {
    if !dir.is_dir() {
        return None;
    }
    match std::fs::read(dir.join(layout::RESULTS_FILE)) {
        Ok(bytes) => {
            #[derive(serde::Deserialize)]
            struct Said {
                completeness: Option<Completeness>,
                judged_from: Option<JudgedFrom>,
            }
            let said = serde_json::from_slice::<Said>(&bytes).ok()?;
            let now = std::fs::metadata(dir.join(layout::HISTORY_FILE)).map(|m| m.len());
            match (said.completeness, said.judged_from, now) {
                // A history shorter than the one its run judged lost lines, most likely its
                // last ones (a copy cut short, a disk that filled): that the run went its whole
                // way no longer says anything about what is left of it.
                (c, Some(was), Ok(now))
                    if now < was.bytes && c.as_ref().is_none_or(Completeness::is_complete) =>
                {
                    Some(Completeness::interrupted(format!(
                        "{} is {now} bytes, {} when its run judged it: lines the run wrote are missing",
                        layout::HISTORY_FILE,
                        was.bytes
                    )))
                }
                (c, _, _) => c,
            }
        }
        // The runner writes its log, config.toml and history first, results.json last.
        Err(_)
            if dir.join(layout::HISTORY_FILE).is_file()
                && (named
                    || [layout::LOG_FILE, layout::CONFIG_FILE]
                        .iter()
                        .all(|f| dir.join(f).is_file())) =>
        {
            Some(Completeness::interrupted(
                // Still true once `report` has judged the history and written one.
                "the run never finished: it wrote its history but not its verdict (results.json)",
            ))
        }
        Err(_) => None,
    }
}

/// A file's length and modification time, to tell it changed.
fn fingerprint(path: &Path) -> Option<(u64, std::time::SystemTime)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// The digest a [`JudgedFrom`] records.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Digest {
    /// What every verdict records now: 0.15 s of CPU for a 1.3 GB history, where SHA-256
    /// took 0.8 s of a check that has two cores.
    Blake3,
    /// What a results.json written before BLAKE3 holds, to compare it with.
    Sha256,
}

/// A history file by content: its length and its digest (see [`JudgedFrom`]), read in blocks.
pub fn judged_from(path: &Path, digest: Digest) -> std::io::Result<JudgedFrom> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut blake3 = blake3::Hasher::new();
    let mut sha256 = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    // Blocks of 1 MiB: BLAKE3 hashes many of its 1 KiB chunks at once on wide registers.
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    // Bounded by the file's length.
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        match digest {
            Digest::Blake3 => {
                blake3.update(&buf[..n]);
            }
            Digest::Sha256 => sha256.update(&buf[..n]),
        }
        bytes += n as u64;
    }
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    Ok(match digest {
        Digest::Blake3 => JudgedFrom {
            bytes,
            blake3: blake3.finalize().to_hex().to_string(),
            sha256: String::new(),
        },
        Digest::Sha256 => JudgedFrom {
            bytes,
            blake3: String::new(),
            sha256: hex(sha256.finish().as_ref()),
        },
    })
}

/// Why the run directory's results.json is not the verdict of its history as it is now: the
/// history is not the one it records it was judged from (its length or digest differ), or,
/// for a results.json written before that was recorded, the history was modified after it.
/// `None` when it is, or either is missing.
pub fn stale_results(dir: &Path) -> Option<String> {
    let (history, results) = (
        dir.join(layout::HISTORY_FILE),
        dir.join(layout::RESULTS_FILE),
    );
    #[derive(serde::Deserialize)]
    struct Said {
        judged_from: Option<JudgedFrom>,
    }
    let said = std::fs::read(&results)
        .ok()
        .and_then(|b| serde_json::from_slice::<Said>(&b).ok())
        .and_then(|s| s.judged_from);
    if let Some(was) = said {
        let len = std::fs::metadata(&history).ok()?.len();
        // Compared by the digest it records: BLAKE3, or an older results.json's SHA-256.
        let (digest, name) = if was.blake3.is_empty() && !was.sha256.is_empty() {
            (Digest::Sha256, "SHA-256")
        } else {
            (Digest::Blake3, "BLAKE3")
        };
        // The length first: most edits change it, and it costs no read.
        let now = if len == was.bytes {
            judged_from(&history, digest).ok()?
        } else {
            JudgedFrom {
                bytes: len,
                blake3: String::new(),
                sha256: String::new(),
            }
        };
        return (now != was).then(|| {
            let how = if now.bytes != was.bytes {
                format!("it is now {} bytes, {} when judged", now.bytes, was.bytes)
            } else {
                format!("its {name} differs")
            };
            format!(
                "{} is not what {} was judged from: {how}",
                layout::HISTORY_FILE,
                layout::RESULTS_FILE
            )
        });
    }
    // A results.json from before `judged_from`: only the modification times can tell.
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(&history)? > modified(&results)?).then(|| {
        format!(
            "{} changed after {} was written",
            layout::HISTORY_FILE,
            layout::RESULTS_FILE
        )
    })
}

/// The verdict a run directory's results.json records, if it can be read.
pub fn recorded_validity(dir: &Path) -> Option<Validity> {
    #[derive(serde::Deserialize)]
    struct Said {
        valid: Validity,
    }
    let bytes = std::fs::read(dir.join(layout::RESULTS_FILE)).ok()?;
    serde_json::from_slice::<Said>(&bytes).ok().map(|s| s.valid)
}

/// The run directory `path` names: itself, or the folder of a history.jsonl named; with
/// whether the directory itself was named.
fn run_dir_of(path: &Path) -> Option<(&Path, bool)> {
    if path.is_dir() {
        Some((path, true))
    } else if path.file_name() == Some(std::ffi::OsStr::new(layout::HISTORY_FILE)) {
        path.parent().map(|d| {
            if d.as_os_str().is_empty() {
                (Path::new("."), false)
            } else {
                (d, false)
            }
        })
    } else {
        None
    }
}

/// The verdict of a history file or run directory, judged with the run's own settings
/// (config.toml beside the history, as `report` reads it) unless `drift` or `liveness_grace`
/// say otherwise, and with how the run ended (its directory's results.json).
pub fn judge(path: &Path, drift: Option<f64>, liveness_grace: Option<&str>) -> Result<Results> {
    if path.is_dir() && !path.join(layout::HISTORY_FILE).exists() {
        anyhow::bail!("{}", not_a_run_dir(path));
    }
    let history = history::layout::history_path(path);
    let cfg = check_config(&history, drift, liveness_grace)?;
    let mut results = check_file(&history, &cfg)?;
    // Given as the directory or as its history.jsonl, a run keeps how it ended. A cut-off
    // history stays cut off whatever results.json says.
    if let Some(c) = run_dir_of(path).and_then(|(dir, named)| run_completeness(dir, named)) {
        if results.incomplete().is_none() {
            results.set_completeness(c);
        }
    }
    Ok(results)
}

/// Folders below the one named that may hold runs: a suite's `scenarios/NAME/TIME`, an
/// output folder's `NAME/TIME`.
const RUN_SEARCH_DEPTH: usize = 3;
/// Entries read per folder in that search.
const RUN_SEARCH_ENTRIES_MAX: usize = 10_000;

/// Why `dir`, which holds no history, is not a run directory, and where the runs below it
/// are: a suite's directory or an output folder is named where one of its runs was meant.
pub fn not_a_run_dir(dir: &Path) -> String {
    let what = if dir.join(history::layout::SUITE_FILE).is_file() {
        "a suite directory (`lockpick test`), not a run directory"
    } else {
        "not a run directory"
    };
    // A suite's first failing scenario is the run most often meant (to shrink, to check):
    // named without walking the folders below.
    if let Some(failing) = first_failing_scenario(dir) {
        return format!(
            "{}: {what}; its first failing scenario: {}",
            dir.display(),
            failing.display()
        );
    }
    let mut runs = Vec::new();
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..RUN_SEARCH_DEPTH {
        let mut next = Vec::new();
        for d in &level {
            let Ok(entries) = std::fs::read_dir(d) else {
                continue;
            };
            for e in entries.flatten().take(RUN_SEARCH_ENTRIES_MAX) {
                let p = e.path();
                // `latest` is a link to a run already found by its own name.
                if e.file_name() == layout::LATEST_LINK || !p.is_dir() {
                    continue;
                }
                if p.join(layout::HISTORY_FILE).is_file() {
                    runs.push(p);
                } else {
                    next.push(p);
                }
            }
        }
        level = next;
    }
    // Run directories are named by their start time: the newest sorts last.
    runs.sort_by(|a, b| a.file_name().cmp(&b.file_name()).then(a.cmp(b)));
    match runs.as_slice() {
        [] => format!(
            "{}: {what} (it holds no {})",
            dir.display(),
            layout::HISTORY_FILE
        ),
        [one] => format!(
            "{}: {what}; the run below it: {}",
            dir.display(),
            one.display()
        ),
        [.., newest] => format!(
            "{}: {what}; {} runs below it, the newest {}",
            dir.display(),
            runs.len(),
            newest.display()
        ),
    }
}

/// The run directory of the first scenario suite.json in `dir` records as invalid, if any
/// (and still there).
fn first_failing_scenario(dir: &Path) -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string(dir.join(history::layout::SUITE_FILE)).ok()?;
    let suite: serde_json::Value = serde_json::from_str(&text).ok()?;
    let scenarios = suite.get("scenarios")?.as_array()?;
    let failing = scenarios.iter().find(|s| s["verdict"] == "invalid")?;
    let run_dir = std::path::PathBuf::from(failing["run_dir"].as_str()?);
    run_dir
        .join(layout::HISTORY_FILE)
        .is_file()
        .then_some(run_dir)
}

/// What a history is checked with: the run's own settings (its config.toml), unless `drift` or
/// `liveness_grace` say otherwise.
fn check_config(
    history: &Path,
    drift: Option<f64>,
    liveness_grace: Option<&str>,
) -> Result<checkers::CheckConfig> {
    // A run made with --drift or --liveness-grace is judged as it was when it ran.
    let mut cfg = reports::RunConfigView::read(&history.with_file_name(layout::CONFIG_FILE))
        .map(|c| c.check_config())
        .unwrap_or_default();
    if let Some(g) = liveness_grace {
        cfg.liveness_grace_ns = crate::config::duration("liveness-grace", g)?.as_nanos() as u64;
    }
    if let Some(d) = drift {
        crate::config::check_drift(d)?;
        cfg.drift = d;
    }
    Ok(cfg)
}

/// How many of the violations a follow printed the verdict lists under other ops, said in a
/// sentence; `None` when it lists them all as printed.
fn renamed_note(f: &crate::live::Followed, results: &Results) -> Option<String> {
    let renamed = f
        .printed
        .iter()
        .filter(|(kind, lock, ops)| {
            !results.violations.iter().any(|v| {
                let mut o = v.ops.clone();
                o.sort_unstable();
                v.kind == *kind && v.lock == *lock && o == *ops
            })
        })
        .count();
    (renamed > 0).then(|| {
        format!(
            "{renamed} of the {} violation(s) printed while following are listed below under \
             other ops: the verdict names each by the ops that prove it in the whole history, \
             which later events can change (another grant of the same double grant, a shorter \
             witness)",
            f.printed.len()
        )
    })
}

/// `lockpick check PATH`: the verdict of a history file or run directory, offline (with
/// `--follow`, once its writer is done).
pub fn check(a: CheckArgs) -> Result<ExitCode> {
    let path = history::layout::history_path(&a.path);
    let followed = if a.follow {
        let idle = crate::config::duration("idle", &a.idle)?;
        let cfg = check_config(&path, a.drift, a.liveness_grace.as_deref())?;
        Some(crate::live::follow_until_closed(&path, &cfg, idle, a.json)?)
    } else {
        None
    };
    let mut results = judge(&a.path, a.drift, a.liveness_grace.as_deref())?;
    if let Some(f) = &followed {
        // Cut short by the one following it: that is why, whatever the run directory says.
        if let Some(why) = &f.cut_short {
            results.set_completeness(Completeness::interrupted(why.clone()));
        }
        if let Some(note) = renamed_note(f, &results) {
            if a.json {
                eprintln!("note: {note}");
            } else {
                println!("note: {note}");
            }
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", reports::summary_text(&results));
    }
    if results.valid != Validity::Valid {
        eprintln!("{}: {}", path.display(), results.valid);
    }
    // `check` writes nothing: an offline check (perhaps with other settings, of a copy, on a
    // read-only disk) never changes what a run recorded. It says when the run's results.json
    // is not this verdict; `report` re-judges and rewrites it.
    if let Some((dir, _)) = run_dir_of(&a.path) {
        let own_settings = a.drift.is_none() && a.liveness_grace.is_none();
        let recorded = recorded_validity(dir);
        let why = match (stale_results(dir), recorded) {
            (Some(why), _) => Some(why),
            (None, Some(r)) if own_settings && r != results.valid => {
                Some(format!("it records {r}"))
            }
            _ => None,
        };
        if let Some(why) = why {
            eprintln!(
                "note: {} is not this verdict ({why}; this check: {}): `lockpick report {}` re-judges the history and rewrites it",
                dir.join(layout::RESULTS_FILE).display(),
                results.valid,
                dir.display()
            );
        }
    }
    let report = path.with_file_name(layout::REPORT_FILE);
    let shown = if report.is_file() { report } else { path };
    // Annotation lines would corrupt the JSON on stdout.
    Ok(report_cmd::gate(
        &results,
        &reports::FailOn::given_or_default(a.fail_on),
        &shown,
        !a.json,
    ))
}

#[cfg(test)]
mod tests {
    use super::renamed_note;
    use crate::live::Followed;
    use history::{Violation, ViolationKind};

    fn violation(kind: ViolationKind, lock: &str, ops: &[u64]) -> Violation {
        Violation {
            kind,
            lock: Some(lock.to_string()),
            ops: ops.to_vec(),
            window_ns: [0, 1],
            nemesis: Vec::new(),
            explanation: "a sentence".into(),
            cycle: Vec::new(),
        }
    }

    /// The note counts the printed violations the verdict does not list by the same kind, lock
    /// and ops (in any order), and is absent when it lists them all.
    #[test]
    fn the_follow_says_how_many_printed_violations_the_verdict_names_otherwise() {
        use ViolationKind::{DoubleGrant, TokenReused};
        let verdict = [
            violation(DoubleGrant, "L0", &[9, 4]),
            violation(TokenReused, "L1", &[3, 7]),
        ];
        type Printed<'a> = &'a [(ViolationKind, &'a str, &'a [u64])];
        let cases: [(Printed, Option<&str>); 5] = [
            (&[], None),
            (&[(DoubleGrant, "L0", &[4, 9])], None),
            (
                &[(DoubleGrant, "L0", &[4, 9]), (TokenReused, "L1", &[3, 7])],
                None,
            ),
            (
                &[(DoubleGrant, "L0", &[4, 8])],
                Some("1 of the 1 violation(s)"),
            ),
            (
                &[
                    (DoubleGrant, "L1", &[4, 9]),
                    (TokenReused, "L1", &[3, 7]),
                    (TokenReused, "L0", &[3, 7]),
                ],
                Some("2 of the 3 violation(s)"),
            ),
        ];
        let mut results = checkers::check(
            &history::History::new(Vec::new()).unwrap(),
            &checkers::CheckConfig::default(),
        );
        results.violations = verdict.to_vec();
        for (printed, want) in cases {
            let f = Followed {
                cut_short: None,
                printed: printed
                    .iter()
                    .map(|(k, l, o)| (*k, Some(l.to_string()), o.to_vec()))
                    .collect(),
            };
            let got = renamed_note(&f, &results);
            match want {
                None => assert_eq!(got, None, "{printed:?}"),
                Some(start) => {
                    let got = got.unwrap_or_default();
                    assert!(got.starts_with(start), "{printed:?}: {got}");
                }
            }
        }
    }
}
