//! The table of `run`'s flags is the one place each flag is written: these tests hold every
//! other place to it.

use super::*;
use crate::config::{RunConfig, Target};

fn resolve(flags: &[&str]) -> RunConfig {
    let mut argv = vec!["lockpick", "run"];
    argv.extend_from_slice(flags);
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Run(a) = cli.command else {
        unreachable!()
    };
    RunConfig::from_args(&a).unwrap()
}

/// Runs between them every flag's writer speaks for: the defaults, and runs that set each
/// setting a default run leaves out (a target of each kind, the bank, a replay ...).
fn runs_that_set_everything() -> Vec<RunConfig> {
    let plain = resolve(&["--nemesis", "none"]);
    let mut given = resolve(&[
        "--nemesis",
        "client-pause",
        "--client-faults",
        "boundary,renew",
        "--clock-faults",
        "fast",
        "--renew-ttl",
        "600ms",
        "--ops-max",
        "10",
        "--unsafe",
        "racy",
        "--lock-order",
        "primary",
        "--arrivals",
        "rounds:100ms",
        "--workload",
        "bank",
        "--no-probe",
        "--stop-on-violation",
        "--fail-on",
        "safety,coverage",
    ]);
    // What this machine may not resolve (a replay, hosts, a template, partitions), set on
    // the resolved run itself: the writers read only the resolved settings.
    given.schedule_file = Some("schedule.json".into());
    given.hosts_file = Some("hosts.toml".into());
    given.template_file = Some("api.toml".into());
    given.faults.push(nemesis::schedule::FaultKind::Partition);
    given.topologies_given = true;
    given.adapter_own = workloads::ServiceOptions::parse(
        workloads::service("redis").unwrap(),
        &["fence=counter".to_string()],
    )
    .unwrap();
    let mut url = plain.clone();
    url.target = Target::Url {
        url: "http://127.0.0.1:7000".into(),
    };
    url.store = Some(Target::Url {
        url: "http://127.0.0.1:7001".into(),
    });
    let mut cmd = plain.clone();
    cmd.target = Target::Command {
        template: "my-lockd {port}".into(),
    };
    cmd.store = Some(Target::Command {
        template: "my-store {port}".into(),
    });
    vec![plain, given, url, cmd]
}

/// Every flag of the table is in `run --help` and `test --help` (but those set by a config
/// file's own sections, and `--schedule` in `test`'s, which refuses it), is read from a config
/// file under its key, and is written back by a run that sets it: to config.toml under its
/// key, and to the reproduce line as itself.
#[test]
fn every_flag_is_in_help_the_schema_the_file_and_the_reproduce_line() {
    let mut cmd = crate::cli::command();
    for sub in ["run", "test"] {
        let help = cmd
            .find_subcommand_mut(sub)
            .unwrap()
            .render_long_help()
            .to_string();
        // The suite writes each scenario's schedule itself.
        let refused = |f: &Flag| sub == "test" && f.name == SCHEDULE.name;
        for f in RUN.iter().filter(|f| !f.hide && !refused(f)) {
            let named = help.lines().map(str::trim).any(|l| {
                l == f.to_string() || l.starts_with(&format!("{f} ")) // a switch, or a value
            });
            assert!(named, "{sub} --help lacks {f}");
            assert!(
                help.contains(&fill(f.help)),
                "{sub} --help lacks {f}'s help"
            );
        }
    }
    let mut written = Vec::new();
    for run in runs_that_set_everything() {
        let (file, line) = (run.file_text().unwrap(), run.repro_command());
        for f in RUN.iter().filter(|f| (f.write)(&run).is_some()) {
            assert!(file.contains(&format!("\n{} = ", f.key())), "{f}: {file}");
            let shown = if f.rerun_as_config { &CONFIG } else { *f };
            assert!(line.contains(&format!(" {shown}")), "{f}: {line}");
            written.push(f.name);
        }
    }
    for f in RUN.iter().filter(|f| f.section != Section::CommandLine) {
        assert!(written.contains(&f.name), "no run writes {f} back");
    }
}

/// A config file's key for each flag is read back as that flag.
#[test]
fn every_key_reads_back_as_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    for f in RUN.iter().filter(|f| f.section != Section::CommandLine) {
        let value = match f.kind {
            Kind::Count(_) => "3",
            Kind::Fraction(_) => "0.5",
            Kind::Switch => "true",
            _ => "\"x\"",
        };
        let p = dir.path().join(format!("{}.toml", f.key()));
        let text = format!("[{}]\n{} = {value}\n", f.section.name(), f.key());
        std::fs::write(&p, text).unwrap();
        let flags = crate::config_file::flags_from_file(&p).unwrap().flags;
        let first = flags[0].to_str().unwrap();
        assert!(
            first == f.to_string() || first.starts_with(&format!("{f}=")),
            "{f}: {flags:?}"
        );
    }
}

/// The lines of a product source that are not a test module's.
fn product_lines(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests {") {
        Some(end) => &text[..end],
        None => text,
    }
}

/// No product code of the binary but the table spells a flag of `run`: a flag's name is
/// written once, as are its help and its key. (The other crates cannot see the table; a name
/// there is another program's flag: lockd's `--unsafe`, etcd's `--name`.) Another command's
/// flag of the same name is its own, and is named here with why.
#[test]
fn no_code_outside_the_table_spells_a_run_flag() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let table = root.join("src/flags/defs.rs");
    let others = [
        // `lockpick live-check --drift`, the live check's child: its own flag.
        "src/live.rs: \"--drift\"",
        // `lockpick lockd --unsafe`: the reference service's own flag.
        "src/cli.rs: a clap argument --unsafe",
        // `check --drift` and `check --fail-on` say what run's say of a history judged
        // offline, with their own defaults.
        "src/cli.rs: --drift's help",
        "src/cli.rs: --fail-on's help",
    ];
    let mut found = Vec::new();
    let binary = crate::config::tests::product_sources(root)
        .into_iter()
        .filter(|p| p.starts_with(root.join("src")) && *p != table);
    for path in binary {
        let text = std::fs::read_to_string(&path).unwrap();
        let text = product_lines(&text);
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        for f in RUN.iter() {
            let quoted = format!("\"{f}\"");
            if text.contains(&quoted) {
                found.push(format!("{rel}: {quoted}"));
            }
            if text.contains(&format!("long = \"{}\"", f.name)) {
                found.push(format!("{rel}: a clap argument {f}"));
            }
            // A help text is long and particular: its opening words anywhere else are a copy.
            let opening: String = f.help.chars().take(48).collect();
            if opening.len() >= 40 && text.contains(&opening) {
                found.push(format!("{rel}: {f}'s help"));
            }
        }
    }
    found.retain(|f| !others.contains(&f.as_str()));
    assert!(found.is_empty(), "{found:#?}");
}

/// `--fail-on` is pinned in a run's config.toml only when it was given: its default depends on
/// where the run is (coverage too under CI), and a rerun of the file under CI must get CI's.
#[test]
fn the_fail_on_policy_is_pinned_only_when_given() {
    let unset = resolve(&["--nemesis", "none"]).file_text().unwrap();
    assert!(!unset.contains("fail_on"), "{unset}");
    let given = resolve(&["--nemesis", "none", "--fail-on", "safety"])
        .file_text()
        .unwrap();
    assert!(given.contains("fail_on = [\"safety\"]"), "{given}");
}
