//! `lockpick doctor`: for each fault, whether this machine can run it, and if not, why and
//! what to install. The same checks refuse a run up front (exit 3) before any traffic.

use nemesis::schedule::FaultKind;
use std::path::Path;

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

/// `lockpick cleanup PATH`: finds state files and undoes what they list.
pub fn cleanup(path: &Path) -> anyhow::Result<history::ExitCode> {
    let state_name = history::layout::STATE_FILE;
    let mut states = Vec::new();
    if path.is_file() {
        states.push(path.to_path_buf());
    } else if path.is_dir() {
        // <out>/<name>/<timestamp>/state.json, or a run dir itself: bounded depth, no symlinks
        // followed (runs/latest would list a run twice).
        let mut dirs = vec![(path.to_path_buf(), 0)];
        while let Some((dir, depth)) = dirs.pop() {
            let candidate = dir.join(state_name);
            if candidate.is_file() {
                states.push(candidate);
            }
            if depth >= 2 {
                continue;
            }
            for entry in std::fs::read_dir(&dir)?.flatten() {
                if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    dirs.push((entry.path(), depth + 1));
                }
            }
        }
    } else {
        anyhow::bail!("{}: no such run directory or state file", path.display());
    }
    if states.is_empty() {
        println!("nothing to clean up under {}", path.display());
        return Ok(history::ExitCode::Valid);
    }
    let mut failed = 0;
    states.sort();
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

/// `lockpick doctor [--config FILE]`: this machine's table, then, when the file lists hosts
/// (`[[nodes]]`), each host's checks over ssh. Exit 3 when this machine lacks a required
/// fault or a host lacks what every ssh run needs (reachable, root, arch, disk); a host
/// lacking an optional one (iptables, netem, ptrace) is a warning.
pub fn run_with(config: Option<&Path>) -> anyhow::Result<history::ExitCode> {
    let local = run();
    let Some(file) = config else {
        return Ok(local);
    };
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
