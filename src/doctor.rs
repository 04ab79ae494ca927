//! `lockpick doctor`: for each fault, whether this machine can run it, and if not, why and
//! what to install. The same checks refuse a run up front (exit 3) before any traffic.

use nemesis::schedule::FaultKind;
use std::path::{Path, PathBuf};

/// One fault's readiness.
pub struct Check {
    pub fault: &'static str,
    /// `None` when the fault can run here; else why not and the fix.
    pub missing: Option<String>,
    pub note: &'static str,
    /// A fault a run needs whatever it asks for: the default run draws from it, and it needs
    /// nothing but a node lockpick started. The others are optional: a run that asks for one
    /// this machine cannot run is refused up front, one that does not ask runs without it.
    pub required: bool,
}

/// Each fault family's row, in `--nemesis` order: what it says of this machine.
pub fn checks() -> Vec<Check> {
    FaultKind::ALL
        .into_iter()
        .map(|kind| {
            let here = kind.here();
            Check {
                fault: kind.as_str(),
                missing: here.missing,
                note: here.note,
                required: kind.needs_nothing_here(),
            }
        })
        .collect()
}

/// How far `lockpick cleanup` searches below the folder it is given.
#[derive(Debug, Clone, Copy)]
struct SearchLimits {
    /// Levels of folders below it.
    depth: usize,
    /// Directory entries read in all.
    entries: usize,
}

/// A suite's scenario runs are 5 levels below the output folder
/// (`runs/NAME/TIME/scenarios/ID/TIME`) and a shrink's candidate runs 4 more below a run
/// (`shrink/candidates/cN/TIME`): 12 levels leave room for both and a folder of output
/// folders. 200,000 entries read find every run of a large output folder and end the search
/// of a tree named by mistake (a home directory) in a second or two.
const CLEANUP_SEARCH: SearchLimits = SearchLimits {
    depth: 12,
    entries: 200_000,
};

/// What the search below a folder found.
#[derive(Debug, Default)]
struct StateSearch {
    /// The state files found, sorted.
    states: Vec<PathBuf>,
    /// Folders holding a run's `config.toml` (every run writes it first): run directories.
    run_dirs: usize,
    /// Folders read.
    folders: usize,
    /// The entry limit cut the search short (some folders were not read): the limit.
    cut_short: Option<usize>,
}

impl StateSearch {
    /// The line `cleanup` prints when there is nothing to clean up under `root`.
    fn nothing_found(&self, root: &Path, limits: SearchLimits) -> String {
        format!(
            "nothing to clean up under {}: no {} in its {} run director{} ({} folder(s) \
             searched, down to {} levels){}",
            root.display(),
            history::layout::STATE_FILE,
            self.run_dirs,
            if self.run_dirs == 1 { "y" } else { "ies" },
            self.folders,
            limits.depth,
            self.cut_short_note()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        )
    }

    /// What a search cut short by its entry limit left out, if it was.
    fn cut_short_note(&self) -> Option<String> {
        self.cut_short.map(|n| {
            format!("the search stopped after {n} entries, some folders unread: name a folder nearer the runs")
        })
    }
}

/// The state files below `root`, within `limits`, without following symlinks: `runs/latest`
/// points at a run already found by its own name, and a link out of the tree could lead
/// anywhere.
fn find_states(root: &Path, limits: SearchLimits) -> anyhow::Result<StateSearch> {
    use anyhow::Context as _;
    use history::layout::{CONFIG_FILE, STATE_FILE};
    let mut found = StateSearch::default();
    let mut entries = 0;
    let mut dirs = vec![(root.to_path_buf(), 0)];
    // Bounded: no link is followed, so each folder is pushed once, and at most
    // `limits.entries` entries are read in all.
    while let Some((dir, depth)) = dirs.pop() {
        found.folders += 1;
        let read = || format!("cannot read {}", dir.display());
        for entry in std::fs::read_dir(&dir).with_context(read)? {
            let entry = entry.with_context(read)?;
            entries += 1;
            if entries > limits.entries {
                found.cut_short = Some(limits.entries);
                dirs.clear();
                break;
            }
            // The entry's own type, not its target's: a symlink is neither file nor folder.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if kind.is_file() && name == STATE_FILE {
                found.states.push(entry.path());
            } else if kind.is_file() && name == CONFIG_FILE {
                found.run_dirs += 1;
            } else if kind.is_dir() && depth < limits.depth {
                dirs.push((entry.path(), depth + 1));
            }
        }
    }
    found.states.sort();
    Ok(found)
}

/// `lockpick cleanup PATH`: finds state files and undoes what they list.
pub fn cleanup(path: &Path) -> anyhow::Result<history::ExitCode> {
    let states = if path.is_file() {
        vec![path.to_path_buf()]
    } else if path.is_dir() {
        let found = find_states(path, CLEANUP_SEARCH)?;
        if found.states.is_empty() {
            println!("{}", found.nothing_found(path, CLEANUP_SEARCH));
            return Ok(history::ExitCode::Valid);
        }
        if let Some(note) = found.cut_short_note() {
            eprintln!("warning: {}: {note}", path.display());
        }
        found.states
    } else {
        anyhow::bail!("{}: no such run directory or state file", path.display());
    };
    let mut failed = 0;
    for state in states {
        // Each runtime knows its own state files and how to undo what they list.
        match nemesis::RUNTIMES.iter().find_map(|r| r.cleanup(&state)) {
            Some(Ok(done)) => println!("{}: {done}", state.display()),
            Some(Err(lines)) => {
                failed += 1;
                for line in lines {
                    eprintln!("{}: {line}", state.display());
                }
            }
            None => {
                failed += 1;
                eprintln!(
                    "{}: names a runtime this lockpick does not know: {}",
                    state.display(),
                    nemesis::runtime::state_runtime(&state).unwrap_or_default()
                );
            }
        }
    }
    Ok(if failed == 0 {
        history::ExitCode::Valid
    } else {
        history::ExitCode::Error
    })
}

/// The file read as `lockpick run --config FILE` reads it: its keys, their values and what
/// the run would refuse before any traffic, each named at its line.
fn settings_error(file: &Path) -> anyhow::Result<()> {
    let mut argv: Vec<std::ffi::OsString> = vec!["lockpick".into(), "run".into()];
    argv.push(crate::flags::CONFIG.to_string().into());
    argv.push(file.as_os_str().to_owned());
    let (args, origins) = crate::config_file::expand(argv)?;
    let located = |e: String| anyhow::anyhow!(origins.locate(&e));
    // In the words `run` would say them in.
    let usage = |e: clap::Error| located(crate::usage_error_text(&e));
    let matches = crate::cli::command()
        .try_get_matches_from(args)
        .map_err(usage)?;
    let cli =
        <crate::cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches).map_err(usage)?;
    let crate::cli::Command::Run(a) = cli.command else {
        unreachable!("parsed as `run`")
    };
    crate::config::RunConfig::from_args(&a)
        .map(|_| ())
        .map_err(|e| located(crate::error_text(&e)))
}

/// `lockpick doctor [--config FILE]`: this machine's table, the file's keys checked as a run
/// reads them, then, when the file lists hosts
/// (`[[nodes]]`), each host's checks over ssh. Exit 3 when this machine lacks a required
/// fault or a host lacks what every ssh run needs (reachable, root, arch, disk); a host
/// lacking an optional one (iptables, netem, ptrace) is a warning.
pub fn run_with(config: Option<&Path>) -> anyhow::Result<history::ExitCode> {
    // The file's keys, as a run reads them, first: an unknown, misplaced or mistyped key is
    // named at its line in one line, before the machine's checks, not when the run it was
    // written for starts.
    if let Some(file) = config {
        settings_error(file)?;
    }
    let local = run();
    let Some(file) = config else {
        return Ok(local);
    };
    println!(
        "\n{}: every key known and every value taken, as `lockpick run --config` reads them",
        file.display()
    );
    // A file without hosts (the starter `lockpick init` writes, a local or netns run's) has
    // nothing more to check: only the ssh runtime's hosts are checked from it.
    let Some(hosts) = crate::config::load_hosts(file, false)? else {
        println!(
            "\n{}: no hosts ([[nodes]], the ssh runtime's): only this machine was checked",
            file.display()
        );
        return Ok(local);
    };
    let always = nemesis::ssh::required_checks(&[]);
    let mut failed = false;
    for (host, checks) in nemesis::ssh::check_hosts(&hosts) {
        println!("\nhost {host}");
        for c in &checks {
            let state = if c.ok { "ok" } else { "missing" };
            println!("  {:<10} {state:<8} {}", c.name, c.why);
            if !c.ok && always.contains(&c.name.as_str()) {
                failed = true;
                eprintln!("error: host {host}: {}: {}", c.name, c.why);
            } else if !c.ok {
                eprintln!(
                    "warning: host {host}: {} cannot run there ({}): a run that needs it is \
                     refused",
                    c.name, c.why
                );
            }
        }
    }
    Ok(if failed {
        history::ExitCode::Error
    } else {
        local
    })
}

/// Each registered service, whether lockpick can start it here (`--adapter NAME` without
/// `--node-cmd` or `--url`), and why not: (name, state, note).
fn services() -> Vec<(String, &'static str, String)> {
    workloads::SERVICES
        .iter()
        .map(|s| {
            let name = format!("--adapter {}", s.name());
            let options = workloads::ServiceOptions::parse(*s, &[]).unwrap_or_default();
            if let Some(section) = s.config_section() {
                let why = format!("its API is a config file's [{section}] section: --config FILE");
                return (name, "ok", why);
            }
            if s.launch(&crate::config::launch_probe(&options)).is_none() {
                let why = "lockpick has no command for it: give --node-cmd or --url";
                return (name, "ok", why.to_string());
            }
            match s.program() {
                None => (name, "ok", "lockpick starts it itself".to_string()),
                Some((p, _)) if s.find_program().is_some() => {
                    (name, "ok", format!("lockpick starts `{p}` for it"))
                }
                Some((p, package)) => (
                    name,
                    "missing",
                    format!("`{p}` is not installed (apt-get install {package}); --node-cmd or --url still work"),
                ),
            }
        })
        .collect()
}

/// Prints the table; the exit code is 0 when every required fault can run (a missing optional
/// one is a warning), 3 otherwise.
pub fn run() -> history::ExitCode {
    let checks = checks();
    for c in &checks {
        match &c.missing {
            None => println!("{:<13} ok       {}", c.fault, c.note),
            Some(why) => println!("{:<13} missing  {why}", c.fault),
        }
    }
    println!();
    let services = services();
    // As wide as the longest service's name.
    let width = services.iter().map(|(n, ..)| n.len()).max().unwrap_or(0);
    for (name, state, note) in services {
        println!("{name:<width$} {state:<8} {note}");
    }
    let missing = |required: bool| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.missing.is_some() && c.required == required)
            .map(|c| c.fault)
            .collect()
    };
    let optional = missing(false);
    if !optional.is_empty() {
        eprintln!(
            "warning: optional fault(s) that cannot run here: {} (a run that asks for them is \
             refused; every other run works)",
            optional.join(", ")
        );
    }
    let required = missing(true);
    if required.is_empty() {
        history::ExitCode::Valid
    } else {
        eprintln!(
            "error: required fault(s) that cannot run here: {}",
            required.join(", ")
        );
        history::ExitCode::Error
    }
}

#[cfg(test)]
mod tests {
    use super::{find_states, SearchLimits, CLEANUP_SEARCH};
    use std::path::{Path, PathBuf};

    /// A suite killed mid-scenario (`runs/NAME/TIME/scenarios/ID/TIME`), a scenario that
    /// cleaned up after itself, a plain run killed beside it, and a shrink's candidate killed
    /// below another run; `runs/latest` links to the suite's scenario.
    const TREE: &[&str] = &[
        "runs/lockd-counter-test/T1/suite.json",
        "runs/lockd-counter-test/T1/base.toml",
        "runs/lockd-counter-test/T1/scenarios/01-partition/T2/config.toml",
        "runs/lockd-counter-test/T1/scenarios/01-partition/T2/state.json",
        "runs/lockd-counter-test/T1/scenarios/02-contention/T3/config.toml",
        "runs/plain/T4/config.toml",
        "runs/plain/T4/state.json",
        "runs/failing/T5/config.toml",
        "runs/failing/T5/shrink/candidates/c1/T6/config.toml",
        "runs/failing/T5/shrink/candidates/c1/T6/state.json",
        "elsewhere/T7/config.toml",
        "elsewhere/T7/state.json",
    ];
    const SCENARIO: &str = "runs/lockd-counter-test/T1/scenarios/01-partition/T2/state.json";
    const PLAIN: &str = "runs/plain/T4/state.json";
    const CANDIDATE: &str = "runs/failing/T5/shrink/candidates/c1/T6/state.json";

    fn tree(root: &Path) {
        for f in TREE {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "{}").unwrap();
        }
        // Links the search must not follow: `latest` (a run found by its own name) and one
        // out of the tree named.
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        };
        link(
            "lockd-counter-test/T1/scenarios/01-partition/T2",
            "runs/latest",
        );
        link("../../elsewhere", "runs/plain/outside");
    }

    #[test]
    fn cleanup_finds_state_files_at_any_depth_once_each_and_not_through_links() {
        let tmp = tempfile::tempdir().unwrap();
        tree(tmp.path());
        let tight = |depth, entries| SearchLimits { depth, entries };
        // (folder named, limits, state files found, run directories counted, cut short)
        let cases: &[(&str, SearchLimits, &[&str], usize, bool)] = &[
            (
                "runs",
                CLEANUP_SEARCH,
                &[CANDIDATE, SCENARIO, PLAIN],
                5,
                false,
            ),
            (
                "runs/lockd-counter-test",
                CLEANUP_SEARCH,
                &[SCENARIO],
                2,
                false,
            ),
            (
                "runs/lockd-counter-test/T1/scenarios/01-partition/T2",
                CLEANUP_SEARCH,
                &[SCENARIO],
                1,
                false,
            ),
            (
                "runs/latest",
                CLEANUP_SEARCH,
                &["runs/latest/state.json"],
                1,
                false,
            ),
            // The scenario's state file is 5 levels down: 4 leaves it out, 5 finds it.
            ("runs", tight(4, 1000), &[PLAIN], 2, false),
            ("runs", tight(5, 1000), &[SCENARIO, PLAIN], 4, false),
            (
                "runs/lockd-counter-test/T1/scenarios",
                tight(1, 1000),
                &[],
                0,
                false,
            ),
            // Three entries read: `runs`' own, whichever they are; the search says it stopped.
            ("runs", tight(12, 3), &[], 0, true),
        ];
        for &(named, limits, want, run_dirs, cut_short) in cases {
            let root = tmp.path().join(named);
            let found = find_states(&root, limits).unwrap();
            let want: Vec<PathBuf> = want.iter().map(|p| tmp.path().join(p)).collect();
            assert_eq!(found.states, want, "{named} {limits:?}");
            assert_eq!(found.run_dirs, run_dirs, "{named} {limits:?}");
            assert_eq!(found.cut_short.is_some(), cut_short, "{named} {limits:?}");
        }
    }

    /// `cleanup --help` and the README state the search's depth: the one the code uses.
    #[test]
    fn the_help_and_readme_state_the_depth_searched() {
        use clap::CommandFactory;
        let mut cli = crate::cli::Cli::command();
        let help = cli
            .find_subcommand_mut("cleanup")
            .unwrap()
            .render_long_help()
            .to_string();
        // Lines wrap anywhere: compare words.
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        let said = format!("up to {} folders down", CLEANUP_SEARCH.depth);
        assert!(words(&help).contains(&said), "{help}");
        assert!(
            words(include_str!("../README.md")).contains(&said),
            "README.md does not say {said:?}"
        );
    }

    #[test]
    fn nothing_to_clean_up_says_how_many_run_directories_were_searched() {
        let tmp = tempfile::tempdir().unwrap();
        tree(tmp.path());
        for f in [SCENARIO, PLAIN, CANDIDATE] {
            std::fs::remove_file(tmp.path().join(f)).unwrap();
        }
        let root = tmp.path().join("runs");
        let found = find_states(&root, CLEANUP_SEARCH).unwrap();
        assert!(found.states.is_empty());
        let said = found.nothing_found(&root, CLEANUP_SEARCH);
        assert!(
            said.starts_with(&format!(
                "nothing to clean up under {}: no state.json in its 5 run directories (",
                root.display()
            )) && said.contains("down to 12 levels"),
            "{said}"
        );
        let cut = find_states(
            &root,
            SearchLimits {
                depth: 12,
                entries: 3,
            },
        )
        .unwrap();
        let said = cut.nothing_found(&root, CLEANUP_SEARCH);
        assert!(said.contains("stopped after 3 entries"), "{said}");
    }
}
