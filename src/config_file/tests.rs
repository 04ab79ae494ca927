//! The config file and a run's resolved config, read back as flags.

use super::*;

fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("lockpick.toml");
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

#[test]
fn the_starter_becomes_flags() {
    let (_d, p) = write(STARTER);
    let flags: Vec<String> = flags_from_file(&p)
        .unwrap()
        .into_iter()
        .map(|f| f.into_string().unwrap())
        .collect();
    let joined = flags.join(" ");
    assert!(joined.contains("--clients 5"), "{joined}");
    assert!(
        joined.contains("--nemesis pause,kill,client-pause"),
        "{joined}"
    );
    assert!(joined.contains("--fail-on safety,liveness"), "{joined}");
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
    let (_d, p) = write("[workload\n");
    assert!(flags_from_file(&p).unwrap_err().to_string().contains(":1:"));
}

#[test]
fn acquire_wait_is_a_workload_key() {
    let (_d, p) = write("[workload]\nop_timeout = \"1s\"\nacquire_wait = \"8s\"\n");
    let flags: Vec<String> = flags_from_file(&p)
        .unwrap()
        .into_iter()
        .map(|f| f.into_string().unwrap())
        .collect();
    let joined = flags.join(" ");
    assert!(joined.contains("--acquire-wait 8s"), "{joined}");
    assert!(joined.contains("--op-timeout 1s"), "{joined}");
    let (_d, p) = write("[workload]\nacquire_wait = 8\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":2: `workload.acquire_wait` must be a string, not integer"),
        "{e}"
    );
}

#[test]
fn renew_ttl_is_a_workload_key() {
    let (_d, p) = write("[workload]\nttl = \"2s\"\nrenew_ttl = \"600ms\"\n");
    let flags: Vec<String> = flags_from_file(&p)
        .unwrap()
        .into_iter()
        .map(|f| f.into_string().unwrap())
        .collect();
    let joined = flags.join(" ");
    assert!(joined.contains("--renew-ttl 600ms"), "{joined}");
    assert!(joined.contains("--ttl 2s"), "{joined}");
    let (_d, p) = write("[workload]\nrenew_ttl = 600\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":2: `workload.renew_ttl` must be a string, not integer"),
        "{e}"
    );
    let (_d, p) = write("[nemesis]\nrenew_ttl = \"1s\"\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains(":2: `nemesis.renew_ttl` belongs in [workload]"),
        "{e}"
    );
}

/// A run directory's config.toml, fed back to --config, resolves to the same settings.
#[test]
fn a_runs_config_toml_reruns_it() {
    let resolve = |argv: Vec<OsString>| {
        let argv = expand(argv).unwrap();
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Run(a) = cli.command else {
            unreachable!()
        };
        crate::config::RunConfig::from_args(&a, false).unwrap()
    };
    let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
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
        ],
        &[
            "--node-cmd",
            "./my-lockd --port {port}",
            "--store-url",
            "http://127.0.0.1:9",
            "--nemesis",
            "kill",
            "--ops-max",
            "500",
            "--name",
            "mine",
        ],
        &[
            "--url",
            "http://127.0.0.1:7000",
            "--nemesis",
            "client-pause",
            "--workload",
            "mutex",
        ],
    ] {
        let mut argv = os(&["lockpick", "run"]);
        argv.extend(os(flags));
        let first = resolve(argv);
        let (_d, p) = write(&first.file_text().unwrap());
        let again = resolve(vec![
            "lockpick".into(),
            "run".into(),
            "--config".into(),
            p.into_os_string(),
        ]);
        assert_eq!(
            toml::to_string(&again).unwrap(),
            toml::to_string(&first).unwrap(),
            "{flags:?}"
        );
    }
    let (_d, p) = write("# Resolved configuration of this run.\nttl_ms = 5\ncolour = 1\n");
    let e = flags_from_file(&p).unwrap_err().to_string();
    assert!(e.contains(":3: unknown key `colour`"), "{e}");
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
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    assert_eq!(out, ["lockpick", "run", "--clients", "5", "--clients", "9"]);
    let untouched: Vec<OsString> = ["lockpick", "check", "x"]
        .iter()
        .map(OsString::from)
        .collect();
    assert_eq!(expand(untouched.clone()).unwrap(), untouched);
}
