//! The config file and a run's resolved config, read back as flags.

use super::*;

fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("lockpick.toml");
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

/// The flags a config file becomes, as one line.
fn joined_flags(p: &std::path::Path) -> String {
    let flags: Vec<String> = flags_from_file(p)
        .unwrap()
        .flags
        .into_iter()
        .map(|f| f.into_string().unwrap())
        .collect();
    flags.join(" ")
}

#[test]
fn the_starter_becomes_flags() {
    let (_d, p) = write(&starter());
    let joined = joined_flags(&p);
    assert!(joined.contains("--clients=5"), "{joined}");
    // No fault list: a run from the starter draws what a bare `run` draws.
    assert!(!joined.contains("--nemesis="), "{joined}");
    // No --fail-on either: a run from the starter keeps the default, which CI widens with
    // coverage (set in the file, it would not be).
    assert!(!joined.contains("--fail-on"), "{joined}");
    assert!(starter().contains("# fail_on = "));
}

/// The starter's comment on `store_fence` offers every fence mode the embedded store has.
#[test]
fn the_starter_lists_every_fence_mode() {
    let text = starter();
    let line = text
        .lines()
        .find(|l| l.starts_with("store_fence = "))
        .expect("the starter sets store_fence");
    let (_, comment) = line.split_once('#').expect("store_fence has a comment");
    for m in lockd::FenceMode::ALL {
        assert!(
            comment.contains(&format!(" {} ", m.name())),
            "{m} missing: {line}"
        );
    }
    assert!(!text.contains("{fence_modes}"), "{text}");
}

#[test]
fn a_typo_names_the_key_path_and_line() {
    let (_d, p) = write("[workload]\nclients = 5\nclinets = 3\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains(":3: unknown key `workload.clinets`"), "{e}");
    assert!(e.contains("clients"), "{e}");
}

#[test]
fn wrong_types_and_places_are_named() {
    let (_d, p) = write("[workload]\nclients = \"five\"\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":2: `workload.clients` must be a non-negative integer"),
        "{e}"
    );
    let (_d, p) = write("[nemesis]\nclients = 5\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains("belongs in [workload]"), "{e}");
    let (_d, p) = write("[workloads]\nclients = 5\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains(":1: unknown section [workloads]"), "{e}");
    // Every section a file may hold is offered, the ssh runtime's too.
    assert!(e.contains("[[nodes]] and [ssh]"), "{e}");
    let (_d, p) = write("[workload\n");
    assert!(flags_from_file(&p).unwrap_err().to_string().contains(":1:"));
    // A key before any section header is a misplaced line, named with its section.
    let (_d, p) = write("ttl = \"3s\"\n[workload]\nclients = 3\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":1: `ttl` is outside any section: put it under [workload]"),
        "{e}"
    );
    // A section or a key twice: which, and where it first was.
    let (_d, p) = write("[workload]\nclients = 3\n\n[workload]\nttl = \"2s\"\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":4: duplicate table [workload] (first at line 1)"),
        "{e}"
    );
    let (_d, p) =
        write("[nemesis]\nseed = 1\n[workload]\nclients = 3\nttl = \"1s\"\nclients = 4\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":6: duplicate key `clients` in [workload], first at line 4"),
        "{e}"
    );
}

#[test]
fn acquire_wait_is_a_workload_key() {
    let (_d, p) = write("[workload]\nop_timeout = \"1s\"\nacquire_wait = \"8s\"\n");
    let joined = joined_flags(&p);
    assert!(joined.contains("--acquire-wait=8s"), "{joined}");
    assert!(joined.contains("--op-timeout=1s"), "{joined}");
    let (_d, p) = write("[workload]\nacquire_wait = 8\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":2: `workload.acquire_wait` must be a string, not 8"),
        "{e}"
    );
}

#[test]
fn renew_ttl_is_a_workload_key() {
    let (_d, p) = write("[workload]\nttl = \"2s\"\nrenew_ttl = \"600ms\"\n");
    let joined = joined_flags(&p);
    assert!(joined.contains("--renew-ttl=600ms"), "{joined}");
    assert!(joined.contains("--ttl=2s"), "{joined}");
    let (_d, p) = write("[workload]\nrenew_ttl = 600\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":2: `workload.renew_ttl` must be a string, not 600")
            && e.ends_with("(a duration with its unit: \"600ms\" or \"600s\")"),
        "{e}"
    );
    let (_d, p) = write("[nemesis]\nrenew_ttl = \"1s\"\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":2: `nemesis.renew_ttl` belongs in [workload]"),
        "{e}"
    );
}

fn resolve(argv: Vec<OsString>) -> Result<crate::config::RunConfig> {
    let (argv, _) = expand(argv)?;
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Run(a) = cli.command else {
        unreachable!()
    };
    crate::config::RunConfig::from_args(&a)
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

/// A run directory's config.toml, fed back to --config, resolves to the same settings: it
/// writes the same config.toml, byte for byte.
#[test]
fn a_runs_config_toml_reruns_it() {
    for flags in [
        &[
            "--seed",
            "7",
            "--nemesis",
            "pause,kill,client-pause",
            "--ttl",
            "1500ms",
        ][..],
        &[
            "--workload",
            "mutex",
            "--nemesis",
            "none",
            "--unsafe",
            "racy",
            "--hold",
            "0ms..20ms",
            "--fail-on",
            "safety",
            "--no-probe",
            "--stop-on-violation",
        ],
        &[
            "--seed",
            "18446744073709551615",
            "--nodes",
            "3",
            "--nemesis-targets",
            "primary",
            "--nemesis",
            "pause",
            "--store-fence",
            "none",
            "--renew-ttl",
            "600ms",
            "--drift",
            "0.01",
            "--liveness-grace",
            "750ms",
            "--clock-rate",
            "2.5",
        ],
        &[
            "--node-cmd",
            "./my-lockd --port {port} --dir '{data_dir}'",
            "--store-url",
            "http://127.0.0.1:9",
            "--nemesis",
            "kill",
            "--ops-max",
            "500",
            "--name",
            "mine",
            "--startup-timeout",
            "3s",
        ],
        &[
            "--url",
            "http://127.0.0.1:7000",
            "--nemesis",
            "client-pause",
            "--workload",
            "mutex",
            "--out",
            "elsewhere",
        ],
    ] {
        let mut argv = os(&["lockpick", "run"]);
        argv.extend(os(flags));
        let first = resolve(argv).unwrap().file_text().unwrap();
        let (_d, p) = write(&first);
        let again = resolve(os(&["lockpick", "run", "--config", p.to_str().unwrap()]))
            .unwrap()
            .file_text()
            .unwrap();
        assert_eq!(again, first, "{flags:?}");
        // Every flag given is in the file, in the schema's keys.
        for flag in flags.iter().filter(|f| f.starts_with("--")) {
            let key = flag.trim_start_matches("--").replace('-', "_");
            assert!(first.contains(&format!("\n{key} = ")), "{key}: {first}");
        }
    }
}

/// Every `run` flag is a key of the one schema, and every key a `run` flag: a flag added to
/// the command line without its key would be lost from a run's config.toml. (Both now come
/// from `flags::RUN`; the test keeps the promise checked from clap's side.)
#[test]
fn the_schema_is_the_flags() {
    use clap::CommandFactory;
    let cli = crate::cli::Cli::command();
    let run = cli.find_subcommand("run").unwrap();
    let flags: Vec<String> = run
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| !["config", "help"].contains(l))
        .map(|l| format!("--{l}"))
        .collect();
    let keyed = || {
        crate::flags::RUN
            .iter()
            .filter(|f| f.section != Section::CommandLine)
    };
    // A service option's former flag is the service's (`Service::former_flags`), read from
    // [target] as the key it was (`an_older_runs_etcd_api_key_still_reads`).
    let former: Vec<String> = crate::flags::former_flags()
        .map(|(f, ..)| format!("--{f}"))
        .collect();
    for f in flags.iter().filter(|f| !former.contains(f)) {
        assert!(
            keyed().any(|flag| flag.to_string() == *f),
            "{f} has no key in flags::RUN"
        );
    }
    for flag in keyed() {
        assert!(flags.contains(&flag.to_string()), "{flag} is no run flag");
        assert_eq!(flag.name.replace('-', "_"), flag.key());
    }
}

/// One try names every key the file gets wrong, each with its line.
#[test]
fn every_bad_key_is_named_at_once() {
    let (_d, p) = write("[workload]\nclinets = 3\nttl = 5\n\n[output]\ncolour = 1\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains(":2: unknown key `workload.clinets`"), "{e}");
    assert!(e.contains(":3: `workload.ttl` must be a string"), "{e}");
    assert!(e.contains(":6: unknown key `output.colour`"), "{e}");
    // A run's config.toml from before the schema: refused with what to do.
    let (_d, p) = write("# Resolved configuration of this run.\nttl_ms = 5\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains(":2: `ttl_ms`") && e.contains("rerun it"), "{e}");
}

/// A mistake inside `[[nodes]]` (the ssh runtime's hosts) is named at its line like any other
/// key's, with the rest of the file's mistakes; the runner's own reader of the hosts, and
/// doctor's, names the same line.
#[test]
fn a_typo_in_the_hosts_names_its_line() {
    let text = "[workload]\nclinets = 3\n\n[[nodes]]\naddress = \"10.0.0.1\"\n\n[[nodes]]\nadress = \"10.0.0.2\"\n";
    let (_d, p) = write(text);
    let path = p.display();
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains(":2: unknown key `workload.clinets`"), "{e}");
    assert!(
        e.contains(&format!(
            "{path}:8: [[nodes]]: unknown field `adress`, expected one of `address`"
        )),
        "{e}"
    );
    let e = crate::config::load_hosts(&p, true).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{path}:8: [[nodes]]: unknown field `adress`")),
        "{e}"
    );
    // A file that is not TOML at all: the line of the mistake, at the start of its line too.
    let (_d, p) = write("[workload]\nttl = \"1s\"\nttl = \"2s\"\n");
    let e = crate::config::load_hosts(&p, false)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&format!("{}:3: ", p.display())), "{e}");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:3: ", p.display())), "{e}");
}

/// A bad value inside a config file is reported at its file, line and key, not as the flag it
/// became; a flag the user typed over it is reported as the flag.
#[test]
fn a_bad_value_in_the_file_is_named_where_it_is() {
    let (_d, p) = write("[workload]\nclients = 3\nttl = \"soon\"\n");
    let path = p.to_str().unwrap();
    let (argv, origins) = expand(os(&["lockpick", "run", "--config", path])).unwrap();
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Run(a) = cli.command else {
        unreachable!()
    };
    let e = crate::config::RunConfig::from_args(&a)
        .unwrap_err()
        .to_string();
    let shown = origins.locate(&e);
    assert!(
        shown.starts_with(&format!(
            "{path}:3: `workload.ttl` \"soon\": expected a duration"
        )),
        "{shown}"
    );
    let (_, origins) =
        expand(os(&["lockpick", "run", "--config", path, "--ttl", "later"])).unwrap();
    assert_eq!(origins.locate("--ttl \"later\": x"), "--ttl \"later\": x");
    // clap's own refusals name the flag inside quotes.
    let (_d, p) = write("[nemesis]\nnemesis_interval = \"1s\"\n[workload]\nlocks = 0\n");
    let (_, origins) = expand(os(&["lockpick", "run", "--config", p.to_str().unwrap()])).unwrap();
    let shown = origins.locate("invalid value 'x' for '--locks <N>'");
    assert!(
        shown.contains(":4: `workload.locks`: invalid value"),
        "{shown}"
    );
}

#[test]
fn user_flags_come_after_the_file() {
    let (_d, p) = write("[workload]\nclients = 5\n");
    let args: Vec<OsString> = ["lockpick", "run", "--clients", "9", "--config"]
        .iter()
        .map(OsString::from)
        .chain([p.clone().into_os_string()])
        .collect();
    let out: Vec<String> = expand(args)
        .unwrap()
        .0
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    assert_eq!(out, ["lockpick", "run", "--clients=5", "--clients", "9"]);
    let untouched: Vec<OsString> = ["lockpick", "check", "x"]
        .iter()
        .map(OsString::from)
        .collect();
    assert_eq!(expand(untouched.clone()).unwrap().0, untouched);
}

/// The keys the reports and the coverage gate read of a run's config.toml by name
/// (`reports::config_keys`) are keys this table writes: a flag renamed here is renamed there,
/// or this fails.
#[test]
fn the_reports_config_keys_are_the_flags() {
    let keys: Vec<String> = crate::flags::RUN.iter().map(|f| f.key()).collect();
    for k in reports::config_keys::FLAGS {
        assert!(
            keys.iter().any(|key| key == k),
            "`{k}` is no run flag's key: {keys:?}"
        );
    }
    // The legacy keys are no flag's: a flag that took one of their names would be read as both.
    use reports::config_keys::legacy;
    for k in [
        legacy::LIVENESS_GRACE_MS,
        legacy::UNSAFE_MODE,
        legacy::TARGET,
    ] {
        assert!(
            !keys.iter().any(|key| key == k),
            "`{k}` is a flag's key now"
        );
    }
}

/// An older run's config.toml has `etcd_api` in [target]: it reads as the flag it was, which
/// the etcd service takes as its `api` option; any other type is refused naming the line.
#[test]
fn an_older_runs_etcd_api_key_still_reads() {
    let (_d, p) = write("[target]\nadapter = \"etcd\"\netcd_api = \"/v3beta\"\n");
    let joined = joined_flags(&p);
    assert!(joined.contains("--etcd-api=/v3beta"), "{joined}");
    let (_d, p) = write("[target]\netcd_api = 3\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains("lockpick.toml:2: `target.etcd_api` must be a string"),
        "{e}"
    );
    let (_d, p) = write("[workload]\netcd_api = \"/v3\"\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains("unknown key `workload.etcd_api`"), "{e}");
}

/// A count is a TOML integer; a string only for a seed past TOML's integers, as a run writes
/// it (`"5"` is refused as the message says: not a string).
#[test]
fn a_count_written_as_a_string_is_refused_but_a_seed_too_big_for_toml() {
    let (_d, p) = write("[workload]\nclients = \"5\"\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(
            "lockpick.toml:2: `workload.clients` must be a non-negative integer, not a string"
        ),
        "{e}"
    );
    let (_d, p) = write("[workload]\nseed = \"14634224980613359122\"\n");
    assert!(joined_flags(&p).contains("--seed=14634224980613359122"));
}
