//! Resolving flags into a run's configuration.

use super::repro::shell_quote;
use super::*;

#[test]
fn durations_and_ranges() {
    assert_eq!(ms("ttl", "500ms").unwrap(), 500);
    assert_eq!(ms("ttl", "2s").unwrap(), 2000);
    assert_eq!(ms("ttl", "1m").unwrap(), 60_000);
    let e = ms("ttl", "2 parsecs").unwrap_err().to_string();
    assert!(e.starts_with("--ttl \"2 parsecs\""), "{e}");
    // The two usual slips are said in the flag's words, not the parser's.
    let e = ms("ttl", "5").unwrap_err().to_string();
    assert!(e.ends_with("a number needs its unit (5ms or 5s)"), "{e}");
    let e = ms("duration", "-1s").unwrap_err().to_string();
    assert!(e.ends_with("never negative"), "{e}");
    // Where the parser stopped reading is no help; which unit it did not know is.
    let e = format!("{:#}", ms("ttl", "soon").unwrap_err());
    assert_eq!(
        e,
        "--ttl \"soon\": expected a duration such as 500ms, 2s or 1m"
    );
    let e = format!("{:#}", ms("ttl", "2 parsecs").unwrap_err());
    assert!(
        e.ends_with("unknown time unit \"parsecs\" (ms, s, m or h)"),
        "{e}"
    );
    let e = format!("{:#}", ms("duration", "1x").unwrap_err());
    assert!(
        !e.contains("months"),
        "the parser's whole list of units: {e}"
    );
    assert_eq!(range_ms("hold", "50ms..1s").unwrap(), (50, 1000));
    assert!(range_ms("hold", "2s..1s").is_err());
    assert!(range_ms("hold", "2s").is_err());
}

fn resolve(flags: &[&str]) -> Result<RunConfig> {
    let mut argv = vec!["lockpick", "run", "--nemesis", "none"];
    argv.extend_from_slice(flags);
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Run(a) = cli.command else {
        unreachable!()
    };
    RunConfig::from_args(&a)
}

#[test]
fn renew_ttl_defaults_to_ttl_and_is_bounded() {
    let c = resolve(&["--ttl", "1500ms"]).unwrap();
    assert_eq!((c.ttl_ms, c.renew_ttl_ms), (1500, 1500));
    assert!(!c.repro_command().contains("--renew-ttl"));
    assert_eq!(c.clock_bump_ms, 4500);

    let c = resolve(&["--ttl", "2s", "--renew-ttl", "600ms"]).unwrap();
    assert_eq!(
        (c.ttl_ms, c.renew_ttl_ms, c.lease_max_ms()),
        (2000, 600, 2000)
    );
    assert!(
        c.repro_command().contains("--ttl 2000ms --renew-ttl 600ms"),
        "{}",
        c.repro_command()
    );

    let c = resolve(&["--ttl", "1s", "--renew-ttl", "5s"]).unwrap();
    assert_eq!((c.lease_max_ms(), c.clock_bump_ms), (5000, 15_000));

    for bad in ["0s", "5ms", "2h", "soon", ""] {
        let e = format!("{:#}", resolve(&["--renew-ttl", bad]).unwrap_err());
        assert!(
            e.starts_with(&format!("--renew-ttl {bad}"))
                || e.starts_with(&format!("--renew-ttl {bad:?}")),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }
    let e = resolve(&["--adapter", "etcd", "--ttl", "2s", "--renew-ttl", "1s"]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("--renew-ttl 1s: not with --adapter etcd"),
        "{e}"
    );
}

#[test]
fn quoting() {
    assert_eq!(shell_quote("abc"), "abc");
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
}

#[test]
fn acquire_wait_defaults_to_five_leases_apart_from_the_op_timeout() {
    let c = resolve(&["--ttl", "2s", "--op-timeout", "1s"]).unwrap();
    assert_eq!((c.acquire_wait_ms, c.op_timeout_ms), (10_000, 1000));
    assert!(
        c.repro_command()
            .contains("--op-timeout 1000ms --acquire-wait 10000ms"),
        "{}",
        c.repro_command()
    );
    let c = resolve(&["--ttl", "1s", "--acquire-wait", "0s"]).unwrap();
    assert_eq!(c.acquire_wait_ms, 0);
    let c = resolve(&["--acquire-wait", "30s"]).unwrap();
    assert_eq!(c.acquire_wait_ms, 30_000);
    for bad in ["11m", "soon"] {
        let e = format!("{:#}", resolve(&["--acquire-wait", bad]).unwrap_err());
        assert!(
            e.starts_with(&format!("--acquire-wait {bad}"))
                || e.starts_with(&format!("--acquire-wait {bad:?}")),
            "{e}"
        );
    }
}

/// `--help` names every registered service, what it is, and every option of each: written
/// from the registry, so a new service's file is all the help a user reads to find it.
#[test]
fn help_names_every_service_and_its_options() {
    let mut cmd = crate::cli::command();
    let run = cmd.find_subcommand_mut("run").expect("run");
    let help = run.render_long_help().to_string();
    for s in workloads::SERVICES {
        assert!(help.contains(s.name()), "--help does not name {}", s.name());
        assert!(
            help.contains(s.about()),
            "--help does not say what {} is",
            s.name()
        );
        for o in s.options() {
            for v in o.values {
                let pair = format!("{}={}", o.name, v);
                assert!(
                    help.contains(&pair)
                        || help.contains(&format!("{}={}", o.name, o.values.join("|"))),
                    "--help does not show {} for {}",
                    pair,
                    s.name()
                );
            }
        }
    }
}

#[test]
fn a_service_without_tokens_defaults_to_the_mutex_and_records_its_options() {
    let c = resolve(&["--adapter", "redis", "--no-probe"]).unwrap();
    assert_eq!(c.kind(), WorkloadKind::Mutex);
    assert_eq!(
        c.adapter_own.pairs(),
        vec!["persistence=none".to_string(), "fence=none".to_string()]
    );
    let c = resolve(&["--adapter", "redis", "--adapter-opt", "fence=counter"]).unwrap();
    assert_eq!(
        c.kind(),
        WorkloadKind::Counter,
        "a token makes the counter the default"
    );
    assert!(c
        .repro_command()
        .contains("--adapter-opt persistence=none,fence=counter"));
}

/// A misspelt --adapter is answered with the names and, when one is near, the one meant.
#[test]
fn a_misspelt_adapter_names_the_one_meant() {
    for (given, meant) in [
        ("redsi", Some("redis")),
        ("zookeper", Some("zookeeper")),
        ("postgress", Some("postgres")),
        ("foo", None),
    ] {
        let e = resolve(&["--adapter", given]).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--adapter {given:?}: expected ")),
            "{e}"
        );
        match meant {
            Some(m) => assert!(e.ends_with(&format!("(did you mean `{m}`?)")), "{e}"),
            None => assert!(!e.contains("did you mean"), "{e}"),
        }
    }
}

/// A mutex holder neither reads nor writes: a read or write wake-up asked of it is asked for
/// as the release it does instead (else the coverage waits for a wake it never performs and
/// the run can only end unknown); the counter keeps what was asked.
#[test]
fn a_mutex_holders_read_and_write_wakes_are_its_releases() {
    let cases: [(&str, &str, &[&str]); 4] = [
        ("mutex", "long,read,renew", &["long", "release", "renew"]),
        ("mutex", "boundary,write,read", &["boundary", "release"]),
        ("mutex", "long", &["long"]),
        ("counter", "long,read", &["long", "read"]),
    ];
    for (workload, asked, want) in cases {
        let c = resolve(&["--workload", workload, "--client-faults", asked]).unwrap();
        assert_eq!(c.client_shapes.names(), want, "{workload} {asked}");
    }
}

/// lockd's modes are refused for every other service, named by the descriptor, not by a
/// comparison with a service's name.
#[test]
fn lockd_modes_are_refused_for_other_services() {
    for adapter in ["standin", "redis", "etcd"] {
        let e = resolve(&["--adapter", adapter, "--lock-order", "timestamp"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!("--lock-order: the timestamp order is a mode of the embedded lockd (--adapter reference), not of {adapter}"),
        );
    }
    assert!(resolve(&["--lock-order", "timestamp"]).is_ok());
    let e = resolve(&["--adapter", "redis", "--lock-order", "ring"])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--lock-order: the ring order is a mode"),
        "{e}"
    );
}

/// An order's own unsafe mode needs that order; an order that is not one is refused with the
/// orders there are.
#[test]
fn an_orders_unsafe_mode_needs_its_order() {
    for (args, says) in [
        (
            &["--unsafe", "ring-regenerate"][..],
            "--unsafe ring-regenerate: needs --lock-order ring",
        ),
        (
            &["--unsafe", "ring-regenerate", "--lock-order", "timestamp"][..],
            "--unsafe ring-regenerate: needs --lock-order ring",
        ),
        (
            &["--unsafe", "no-tiebreak", "--lock-order", "ring"][..],
            "--unsafe no-tiebreak: needs --lock-order timestamp",
        ),
        (
            &["--lock-order", "ring:5"][..],
            "--lock-order: lock order `ring:5`: the duration needs a unit",
        ),
        (
            &["--lock-order", "token"][..],
            "--lock-order: lock order `token`: unknown order",
        ),
    ] {
        let e = resolve(args).unwrap_err().to_string();
        assert!(e.starts_with(says), "{args:?}: {e}");
    }
    for ok in [
        &["--nodes", "3", "--lock-order", "ring"][..],
        &[
            "--nodes",
            "3",
            "--lock-order",
            "ring:20ms",
            "--unsafe",
            "ring-regenerate",
        ][..],
    ] {
        assert!(resolve(ok).is_ok(), "{ok:?}");
    }
}

/// `--nodes` not given is what the adapter needs to be itself: Redlock's five masters as
/// published, Sentinel's quorum of three, one server for the others; given, it is as given.
#[test]
fn nodes_default_to_the_adapters_own() {
    for (adapter, want) in [
        ("redlock", 5),
        ("redis-sentinel", 3),
        ("redis", 1),
        ("reference", 1),
    ] {
        // A command of the user's own: no system package is looked for.
        let c = resolve(&["--adapter", adapter, "--node-cmd", "true {port}"]).unwrap();
        assert_eq!(c.nodes, want, "{adapter}");
    }
    let c = resolve(&[
        "--adapter",
        "redlock",
        "--node-cmd",
        "true {port}",
        "--nodes",
        "3",
    ])
    .unwrap();
    assert_eq!(c.nodes, 3);
}

/// Every crate's Rust sources under its `src/` (the binary's included), without test files
/// (`tests/` folders, `tests.rs`).
pub(crate) fn product_sources(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut sources = Vec::new();
    let mut dirs: Vec<std::path::PathBuf> = vec![root.join("src")];
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        if entry.path().join("Cargo.toml").is_file() && entry.path().join("src").is_dir() {
            dirs.push(entry.path().join("src"));
        }
    }
    // Bounded by the tree: every directory is read once.
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                sources.push(path);
            }
        }
    }
    assert!(sources.len() > 50, "found only {sources:?}");
    sources
}

/// The module of a family: nemesis/src/fault/<name>.rs, named for its kind.
fn family_module(root: &std::path::Path, kind: &str) -> std::path::PathBuf {
    root.join("nemesis/src/fault")
        .join(format!("{}.rs", kind.replace('-', "_")))
}

/// Code only: neither a test module at the end nor a comment (a format's example).
fn code_of(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fault's op names are written once, in its family's entry (`FAMILY`, a
/// `history::FaultFamily` in its own module, nemesis/src/fault/<name>.rs): the nemesis records
/// them from it, the checkers and reports read them through history's registered table
/// (`FaultOp`), and no other code spells one or takes a kind apart from an op by its
/// `start-`/`stop-` prefix (history/src/fault_op.rs, the convention's one reader, excepted).
/// An op that is also a kind's name (`kill`) cannot be told from the kind by its text, so it is
/// not looked for. Test modules are not product code.
#[test]
fn no_code_outside_the_family_table_spells_a_fault_op() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let families = history::FaultFamily::all();
    assert_eq!(families.len(), nemesis::schedule::FaultKind::ALL.len());
    let kinds: Vec<&str> = families.iter().map(|f| f.kind).collect();
    // Each op with the one file allowed to spell it.
    let mut ops: Vec<(String, std::path::PathBuf)> = families
        .iter()
        .flat_map(|f| [(f.opens, f.kind), (f.closes, f.kind)])
        .filter(|(op, _)| !kinds.contains(op))
        .map(|(op, kind)| (format!("\"{op}\""), family_module(root, kind)))
        .collect();
    for prefix in ["\"start-\"", "\"stop-\""] {
        ops.push((prefix.to_string(), root.join("history/src/fault_op.rs")));
    }
    for path in product_sources(root) {
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (op, home) in &ops {
            assert!(
                path == *home || !code.contains(op.as_str()),
                "{} spells the fault op {op}: take it from its family's FAMILY",
                path.display()
            );
        }
    }
}

/// A fault family is its module (nemesis/src/fault/<name>.rs) plus its line in `families!`:
/// no other code of the binary, the nemesis or the readers of a history (history, checkers,
/// reports) spells its name (`"client-pause"`), its `FaultKind` variant or its `Payload`
/// variant, so nothing else needs an edit when one is added; the binary and the nemesis ask
/// the kind (`FaultKind::moves_clocks`, `suite_cells`, `requested`, ...), the readers ask
/// history's registered table (`history::FaultFamily`: what a family's faults aim at, how
/// they are counted, their ops' fields). The exceptions are words that also name something
/// else: a node's `pause` and `kill` steps (node control, which every runtime has whatever
/// the families), and tc's `netem` qdisc, which the namespaces probe. Test modules and comments
/// are not code a family needs.
#[test]
fn no_code_outside_a_family_module_names_it() {
    use nemesis::schedule::FaultKind;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let other_meaning = [
        ("nemesis/src/local.rs", "\"pause\""),
        ("nemesis/src/local.rs", "\"kill\""),
        ("nemesis/src/netns.rs", "\"netem\""),
    ]
    .map(|(file, word)| (root.join(file), word));
    let dirs = [
        "src",
        "nemesis/src",
        "history/src",
        "checkers/src",
        "reports/src",
    ];
    let dirs = dirs.map(|d| root.join(d));
    let sources: Vec<_> = product_sources(root)
        .into_iter()
        .filter(|p| dirs.iter().any(|d| p.starts_with(d)))
        .collect();
    let readers = sources
        .iter()
        .filter(|p| dirs[2..].iter().any(|d| p.starts_with(d)));
    assert!(readers.count() > 30, "found only {sources:?}");
    let code: Vec<(&std::path::PathBuf, String)> =
        sources.iter().map(|p| (p, code_of(p))).collect();
    for kind in FaultKind::ALL {
        let module = family_module(root, kind.as_str());
        assert!(module.is_file(), "{kind}: no {}", module.display());
        let spellings = [
            format!("\"{kind}\""),
            format!("FaultKind::{kind:?}"),
            format!("Payload::{kind:?}"),
        ];
        for (path, code) in code.iter().filter(|(p, _)| **p != module) {
            for s in &spellings {
                if other_meaning.contains(&((*path).clone(), s.as_str())) {
                    continue;
                }
                assert!(
                    !code.contains(s.as_str()),
                    "{} spells the fault family {kind} ({s}): ask the kind, whose module says it",
                    path.display()
                );
            }
        }
    }
}

/// No reader of a history (history, checkers, reports, the binary) spells a field a fault
/// family declares for its ops: the reader types it from the family's entry, the coverage
/// finds the nodes a fault hit by `Field::names_nodes`, its variant by `variant_field`, and
/// the fields the facts rest on (`then_nodes`, `scope`, a client stall's `shape` and `wake`)
/// by the names history gives them (`FaultFamily::THEN_NODES`, `stall_fields`), which the
/// families declare theirs with. Two are also other words: `acquire` (a stall's acquire in
/// flight; also an op's name) and `lock` (the stalled holder's lock; also every lock op's).
#[test]
fn no_reader_spells_a_family_field() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs = ["src", "history/src", "checkers/src", "reports/src"].map(|d| root.join(d));
    let fields: Vec<&str> = history::FaultFamily::all()
        .iter()
        .flat_map(|family| family.fields)
        .map(|f| f.name)
        .filter(|name| !["acquire", "lock"].contains(name))
        .collect();
    assert!(
        fields.contains(&"cut"),
        "the families are linked: {fields:?}"
    );
    let contract = root.join("history/src/fault_op.rs");
    for path in product_sources(root) {
        if !dirs.iter().any(|d| path.starts_with(d)) || path == contract {
            continue;
        }
        let code = code_of(&path);
        for name in &fields {
            assert!(
                !code.contains(&format!("\"{name}\"")),
                "{} spells the fault field \"{name}\": ask its family's entry",
                path.display()
            );
        }
    }
}

/// A service (and a runtime) is one file plus its registration line: no code outside its own
/// file (and the registry's list) spells its `--adapter` (`--runtime`) name, so nothing else needs an edit when one is
/// added. The exceptions are the default (`reference`, named by `--adapter`'s default and
/// left out of report titles) and `template`, whose API is the config file's `[template]`
/// section. Test modules are not code a service needs.
#[test]
fn no_code_outside_a_service_file_names_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = product_sources(root);
    // A runtime's name belongs to its module (nemesis/src/<name>.rs and nemesis/src/<name>/).
    for r in nemesis::RUNTIMES {
        let quoted = format!("\"{}\"", r.name());
        let module = root.join("nemesis/src").join(r.name());
        for path in &sources {
            if path.starts_with(&module) || path == &module.with_extension("rs") {
                continue;
            }
            let text = std::fs::read_to_string(path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            assert!(
                !code.contains(&quoted),
                "{} spells --runtime {quoted}: a runtime's name belongs to its own module",
                path.display()
            );
        }
    }
    for s in workloads::SERVICES {
        if ["reference", "template"].contains(&s.name()) {
            continue;
        }
        let quoted = format!("\"{}\"", s.name());
        for path in &sources {
            let text = std::fs::read_to_string(path).unwrap();
            // The service's own file is the one that names it in `fn name`.
            let own = text.contains(&format!(
                "fn name(&self) -> &'static str {{\n        {quoted}"
            ));
            if own || path.ends_with("workloads/src/lib.rs") {
                continue;
            }
            // Code only: a `#[cfg(test)]` module at the end of a file is not code a service
            // needs.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            assert!(
                !code.contains(&quoted),
                "{} spells --adapter {quoted}: a service's name belongs to its own file",
                path.display()
            );
        }
    }
}

/// The runtime checks ask the runtime registry: each refusal names the runtime and what it
/// lacks, whichever runtime it is (no check here knows one by name).
#[test]
fn runtime_refusals_come_from_the_runtime_itself() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--runtime", "local", "--nemesis", "partition"],
            "--runtime local: partition and netem faults need --runtime netns or --runtime ssh",
        ),
        (
            &["--runtime", "ssh", "--url", "http://127.0.0.1:9"],
            "--runtime ssh: a --url target is not started by lockpick, so it has no host to run on",
        ),
        (
            &["--runtime", "netns", "--url", "http://127.0.0.1:9"],
            "--runtime netns: a --url target is not started by lockpick, so it cannot be put in a namespace",
        ),
        (
            &["--runtime", "ssh"],
            "--runtime ssh: list the hosts as [[nodes]]",
        ),
        (&["--runtime", "moon"], "--runtime \"moon\": expected local, netns or ssh"),
    ];
    for (flags, expected) in cases {
        // `--nemesis` given last wins over resolve's `none`.
        let e = match resolve(flags) {
            Ok(_) => panic!("{flags:?}: accepted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(e.starts_with(expected), "{flags:?}: {e}");
    }
    // Partition faults with no runtime named take the first that makes them and needs no
    // hosts.
    assert_eq!(nemesis::runtime::default_runtime(true).name(), "netns");
    assert_eq!(nemesis::runtime::default_runtime(false).name(), "local");
}

/// An evidence field is written and read through the struct that declares it
/// (`history::evidence!`): no product code spells one as a key. Three names are other words
/// as well and are not looked for: `grant` (also the protocol's answer field, spelled once as
/// `history::GRANT`), `wait_ms` (also the reference protocol's request field) and `hold`
/// (also the `--hold` flag).
#[test]
fn no_code_spells_an_evidence_field() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let fields: Vec<&str> = history::EVIDENCE_SETS
        .iter()
        .flat_map(|set| set.fields)
        .map(|f| f.name)
        .filter(|name| !["grant", "wait_ms", "hold"].contains(name))
        .collect();
    assert!(
        fields.contains(&"redis_offset"),
        "the services' sets are linked: {fields:?}"
    );
    for path in product_sources(root) {
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for name in &fields {
            assert!(
                !code.contains(&format!("\"{name}\"")),
                "{} spells the evidence field \"{name}\": write and read it through its set",
                path.display()
            );
        }
    }
}

/// etcd's gateway prefix is its own option; `--etcd-api`, the flag it was, still reruns older
/// runs (their reproduce lines give it whatever the adapter), and is refused only where it
/// would set something another service cannot take.
#[test]
fn the_etcd_api_is_etcds_option_and_its_former_flag_still_reads() {
    let api = |c: &RunConfig| c.adapter_own.get("api").to_string();
    let c = resolve(&["--adapter", "etcd", "--no-probe"]).unwrap();
    assert_eq!(api(&c), "/v3");
    assert!(c.repro_command().contains("--adapter-opt api=/v3"));
    let c = resolve(&[
        "--adapter",
        "etcd",
        "--adapter-opt",
        "api=/v3beta",
        "--no-probe",
    ])
    .unwrap();
    assert_eq!(api(&c), "/v3beta");
    // The former flag, as an older run's reproduce line gives it.
    let c = resolve(&["--adapter", "etcd", "--etcd-api", "/v3beta", "--no-probe"]).unwrap();
    assert_eq!(api(&c), "/v3beta");
    let line = c.repro_command();
    assert!(line.contains("--adapter-opt api=/v3beta"), "{line}");
    assert!(!line.contains("--etcd-api"), "{line}");
    // --adapter-opt wins over the former flag.
    let c = resolve(&[
        "--adapter",
        "etcd",
        "--etcd-api",
        "/v3beta",
        "--adapter-opt",
        "api=/v3",
        "--no-probe",
    ])
    .unwrap();
    assert_eq!(api(&c), "/v3");
    let e = resolve(&["--adapter", "etcd", "--etcd-api", "/v2", "--no-probe"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--adapter-opt \"api=/v2\": expected api=/v3|/v3beta"),
        "{e}"
    );
    // Every older run wrote `--etcd-api /v3`, whatever its adapter.
    let c = resolve(&["--etcd-api", "/v3"]).unwrap();
    assert!(c.adapter_own.pairs().is_empty());
    assert!(!c.repro_command().contains("api"));
    let e = resolve(&["--etcd-api", "/v3beta"]).unwrap_err().to_string();
    assert!(
        e.contains("--etcd-api \"/v3beta\": a setting of --adapter etcd")
            && e.contains("--adapter-opt api=/v3beta")
            && e.contains("not of --adapter reference"),
        "{e}"
    );
    // Hidden: `--help` teaches the option, not the flag.
    let help = crate::cli::command()
        .find_subcommand_mut("run")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(!help.contains("--etcd-api"), "{help}");
    assert!(
        help.contains("/v3beta"),
        "etcd's option is listed under --adapter"
    );
}

/// A replay whose `--duration` ends before some of its faults says how many will not run and
/// the duration that replays them all; one that fits says nothing.
#[test]
fn a_replay_shorter_than_its_schedule_says_what_it_drops() {
    let s = nemesis::schedule::Schedule::parse(
        r#"{"version": 1, "seed": 1, "nodes": 1, "primary": 0, "faults": [
            {"id": "f1", "kind": "pause", "at_ms": 1500, "length_ms": 1000, "nodes": ["n1"]},
            {"id": "f2", "kind": "pause", "at_ms": 8600, "length_ms": 1000, "nodes": ["n1"]},
            {"id": "f3", "kind": "pause", "at_ms": 20800, "length_ms": 700, "nodes": ["n1"]}]}"#,
    )
    .unwrap();
    // (--duration in ms, what is said)
    for (duration_ms, said) in [
        (
            3_000,
            Some(
                "2 of its 3 fault(s) start at or after --duration 3s (the first at 8.6 s) and \
                 will not run; --duration 22s or more replays them all",
            ),
        ),
        (
            8_600,
            Some("2 of its 3 fault(s) start at or after --duration 8s 600ms"),
        ),
        (
            8_601,
            Some("1 of its 3 fault(s) start at or after --duration 8s 601ms (the first at 20.8 s)"),
        ),
        (30_000, None),
    ] {
        let got = super::past_the_end(&s, duration_ms);
        match said {
            Some(w) => assert!(got.as_deref().is_some_and(|g| g.starts_with(w)), "{got:?}"),
            None => assert_eq!(got, None),
        }
    }
}
