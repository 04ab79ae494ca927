//! `run`'s flags, each defined once (`flags/defs.rs`): one [`Flag`] gives the clap argument
//! (name, value, default, help), the config key and its section, the value a config file must
//! hold, the line `lockpick init` writes for it, and how a resolved run writes it back to its
//! `config.toml` and its reproduce line. `lockpick test`, `demo` and `probe` take the same
//! flags. Everything else reads a flag through its definition: clap's arguments are built
//! from [`RUN`] ([`RunArgs`]'s `clap::Args`), the config schema is [`RUN`] with its sections,
//! and the writers walk [`RUN`] in order.
//!
//! The values given are kept as given ([`RunArgs`]); `config.rs` parses them, subsystem by
//! subsystem, into the typed [`crate::config::RunConfig`].

mod defs;

pub use defs::*;

use crate::config::RunConfig;
use clap::{Arg, ArgAction, ArgMatches};
use std::path::{Path, PathBuf};

/// Where a flag's key sits in a config file: sections only group keys for reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Target,
    Store,
    Workload,
    Nemesis,
    Check,
    Output,
    /// Not a key: a flag of the command line only (`--config` itself).
    CommandLine,
}

impl Section {
    /// The file's sections, in the order a config file is written.
    pub const IN_FILE: [Section; 6] = [
        Section::Target,
        Section::Store,
        Section::Workload,
        Section::Nemesis,
        Section::Check,
        Section::Output,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Section::Target => "target",
            Section::Store => "store",
            Section::Workload => "workload",
            Section::Nemesis => "nemesis",
            Section::Check => "check",
            Section::Output => "output",
            Section::CommandLine => "",
        }
    }

    /// The comment `lockpick init` writes under the section's header.
    pub fn intro(self) -> Option<&'static str> {
        match self {
            Section::Target => {
                Some("Which lock service to test. Nothing set here: the embedded reference lockd.")
            }
            Section::Store => {
                Some("The fenced resource the counter and bank workloads write through the lock.")
            }
            _ => None,
        }
    }
}

/// What a flag takes, with its value's name in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text(&'static str),
    /// A file or folder.
    Path(&'static str),
    /// A non-negative integer.
    Count(&'static str),
    /// A number, fractional or not.
    Fraction(&'static str),
    /// Comma-separated names, or an array of them in a config file.
    List(&'static str),
    /// A list whose flag may also be repeated (each value split at commas).
    Repeated(&'static str),
    /// No value: on when given (`true` in a config file).
    Switch,
}

impl Kind {
    fn value_name(self) -> Option<&'static str> {
        match self {
            Kind::Text(n)
            | Kind::Path(n)
            | Kind::Count(n)
            | Kind::Fraction(n)
            | Kind::List(n)
            | Kind::Repeated(n) => Some(n),
            Kind::Switch => None,
        }
    }
}

/// The line `lockpick init` writes for a flag: its TOML value and a note.
#[derive(Debug, Clone, Copy)]
pub enum Init {
    /// Not in the starter.
    Omit,
    /// Set to the flag's default.
    Default(&'static str),
    /// Set to this value (for a flag whose default is decided when the run resolves).
    Set(&'static str, &'static str),
    /// Shown commented out, with an example value.
    Example(&'static str, &'static str),
}

/// A resolved setting as a run writes it back: to its `config.toml` and its reproduce line.
pub enum Setting {
    Text(String),
    Count(u64),
    Fraction(f64),
    List(Vec<String>),
    Switch(bool),
}

impl Setting {
    /// The value as the flag's argument (`None` for a switch).
    pub fn arg(&self) -> Option<String> {
        match self {
            Setting::Text(s) => Some(s.clone()),
            Setting::Count(n) => Some(n.to_string()),
            Setting::Fraction(f) => Some(f.to_string()),
            Setting::List(v) if v.is_empty() => Some("none".into()),
            Setting::List(v) => Some(v.join(",")),
            Setting::Switch(_) => None,
        }
    }

    /// The value as a config file holds it.
    pub fn toml(&self) -> toml::Value {
        match self {
            Setting::Text(s) => toml::Value::String(s.clone()),
            // TOML integers are i64: a larger seed is written as a string (read back alike).
            Setting::Count(n) => i64::try_from(*n)
                .map(toml::Value::Integer)
                .unwrap_or_else(|_| toml::Value::String(n.to_string())),
            Setting::Fraction(f) => toml::Value::Float(*f),
            Setting::List(v) => {
                toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect())
            }
            Setting::Switch(b) => toml::Value::Boolean(*b),
        }
    }
}

/// The lists a help text or a starter line names by placeholder, each from its registry, so
/// that a fault, mode or runtime added there is offered here.
fn lists() -> Vec<(&'static str, Vec<String>)> {
    use nemesis::fault::client_pause::{StallAim, WakeOp};
    use nemesis::schedule::{ClockMode, FaultKind, Topology};
    let runtimes = nemesis::RUNTIMES
        .iter()
        .map(|r| match (r.network_faults(), r.needs_hosts()) {
            (_, Some(_)) => format!("{} (hosts in [[nodes]])", r.name()),
            (true, None) => format!("{} (network faults)", r.name()),
            (false, None) => r.name().to_string(),
        })
        .collect();
    let mut shapes = names(&StallAim::ALL);
    shapes.extend(names(&WakeOp::ALL));
    // The faults any runtime makes, and those that need a runtime of network faults.
    let (anywhere, networked): (Vec<FaultKind>, Vec<FaultKind>) =
        FaultKind::ALL.into_iter().partition(|f| !f.needs_netns());
    let faults_where = |keep: fn(&FaultKind) -> bool| {
        names(&FaultKind::ALL.into_iter().filter(keep).collect::<Vec<_>>())
    };
    let networked_runtimes = nemesis::RUNTIMES
        .iter()
        .filter(|r| r.network_faults() && r.needs_hosts().is_none())
        .map(|r| format!("--runtime {}", r.name()))
        .collect();
    vec![
        (
            "services",
            workloads::SERVICES
                .iter()
                .map(|s| s.name().to_string())
                .collect(),
        ),
        ("faults", names(&FaultKind::ALL)),
        ("faults_anywhere", names(&anywhere)),
        ("faults_networked", names(&networked)),
        // What a bare --url target can be given: the faults that act on no server process.
        ("faults_client_side", faults_where(|f| !f.is_server_side())),
        ("faults_clocks", faults_where(|f| f.moves_clocks())),
        ("networked_runtimes", networked_runtimes),
        ("clock_modes", names(&ClockMode::ALL)),
        ("topologies", names(&Topology::ALL)),
        ("client_shapes", shapes),
        (
            "fence_modes",
            lockd::FenceMode::ALL
                .iter()
                .map(|m| m.name().to_string())
                .collect(),
        ),
        ("runtimes", runtimes),
        (
            "runtime",
            vec![nemesis::runtime::default_runtime(false).name().to_string()],
        ),
    ]
}

/// Values as the names their flags take.
pub fn names<T: std::fmt::Display>(values: &[T]) -> Vec<String> {
    values.iter().map(T::to_string).collect()
}

/// `text` with its placeholders filled from the registries ([`lists`]): `{name}` becomes
/// `a, b, c`, `{name|}` `a | b | c`, and `[{name}]` a TOML array of them.
pub fn fill(text: &str) -> String {
    let mut out = text.to_string();
    for (name, items) in lists() {
        let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
        out = out
            .replace(
                &format!("[{{{name}}}]"),
                &format!("[{}]", quoted.join(", ")),
            )
            .replace(&format!("{{{name}|}}"), &items.join(" | "))
            .replace(&format!("{{{name}}}"), &items.join(", "));
    }
    out
}

/// A duration setting, in milliseconds.
pub fn ms(v: u64) -> Setting {
    Setting::Text(format!("{v}ms"))
}

/// A check of a flag's value as clap parses it: the reason it is refused.
pub type Check = fn(&str) -> Result<(), String>;

/// One `run` flag: everything any part of lockpick knows about it, beside the code that
/// resolves its value (config.rs).
pub struct Flag {
    /// The long name, without `--`; the config key is it with `_` for `-`.
    pub name: &'static str,
    pub section: Section,
    pub kind: Kind,
    /// clap's default, shown in `--help` (and used by `Init::Default`).
    pub default: Option<&'static str>,
    pub help: &'static str,
    /// Not in `--help`: set by a config file's own sections.
    pub hide: bool,
    /// Flags it cannot be given with.
    pub conflicts: &'static [&'static str],
    /// A check clap makes of the value as it parses it (clap's refusal names the flag).
    pub check: Option<Check>,
    pub init: Init,
    /// The resolved setting a run writes back for it, or `None` when it shapes nothing the
    /// run does (or sits at its "not given").
    pub write: fn(&RunConfig) -> Option<Setting>,
    /// The file this flag names is the config file a rerun reads (`--config FILE` first on
    /// the reproduce line).
    pub rerun_as_config: bool,
}

impl Flag {
    /// What every definition starts from (`..Flag::NONE`).
    pub const NONE: Flag = Flag {
        name: "",
        section: Section::CommandLine,
        kind: Kind::Switch,
        default: None,
        help: "",
        hide: false,
        conflicts: &[],
        check: None,
        init: Init::Omit,
        write: |_| None,
        rerun_as_config: false,
    };

    /// The flag and its value, as two arguments of a command line.
    pub fn with(&self, value: impl std::fmt::Display) -> [String; 2] {
        [self.to_string(), value.to_string()]
    }

    /// The key in a config file: the name with `_` for `-`.
    pub fn key(&self) -> String {
        self.name.replace('-', "_")
    }

    /// The clap argument.
    fn arg(&self) -> Arg {
        let mut arg = Arg::new(self.name)
            .long(self.name)
            .help(fill(self.help))
            .hide(self.hide)
            .conflicts_with_all(self.conflicts);
        if let Some(n) = self.kind.value_name() {
            arg = arg.value_name(n);
        }
        if let Some(d) = self.default {
            arg = arg.default_value(d);
        }
        arg = match self.kind {
            Kind::Switch => arg.action(ArgAction::SetTrue),
            Kind::Repeated(_) => arg
                .action(ArgAction::Append)
                .value_delimiter(',')
                .value_parser(clap::value_parser!(String)),
            Kind::Count(_) => arg.value_parser(clap::value_parser!(u64)),
            Kind::Fraction(_) => arg.value_parser(clap::value_parser!(f64)),
            Kind::Path(_) => arg.value_parser(clap::value_parser!(PathBuf)),
            Kind::Text(_) | Kind::List(_) => match self.check {
                Some(check) => arg.value_parser(move |s: &str| check(s).map(|()| s.to_string())),
                None => arg.value_parser(clap::value_parser!(String)),
            },
        };
        arg
    }

    /// The value clap parsed for it, if any (defaults included).
    fn given(&self, m: &ArgMatches) -> Option<Given> {
        let id = self.name;
        match self.kind {
            Kind::Switch => Some(Given::Switch(m.get_flag(id))),
            Kind::Repeated(_) => m
                .get_many::<String>(id)
                .map(|v| Given::List(v.cloned().collect())),
            Kind::Count(_) => m.get_one::<u64>(id).copied().map(Given::Count),
            Kind::Fraction(_) => m.get_one::<f64>(id).copied().map(Given::Fraction),
            Kind::Path(_) => m.get_one::<PathBuf>(id).cloned().map(Given::Path),
            Kind::Text(_) | Kind::List(_) => m.get_one::<String>(id).cloned().map(Given::Text),
        }
    }
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--{}", self.name)
    }
}

impl std::fmt::Debug for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--{}", self.name)
    }
}

/// A value as given on the command line (or by its default).
#[derive(Debug, Clone, PartialEq)]
enum Given {
    Text(String),
    Path(PathBuf),
    Count(u64),
    Fraction(f64),
    List(Vec<String>),
    Switch(bool),
}

/// `run`'s flags as given, keyed by their definition: what `config.rs` resolves. A flag
/// absent here was not given and has no default.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    given: Vec<(&'static str, Given)>,
    /// The former flags of services' options given (`--etcd-api /v3`), each with its value.
    former: Vec<(FormerFlag, String)>,
}

impl RunArgs {
    fn get(&self, f: &Flag) -> Option<&Given> {
        self.given
            .iter()
            .find(|(n, _)| *n == f.name)
            .map(|(_, v)| v)
    }

    fn put(&mut self, f: &'static Flag, v: Option<Given>) {
        self.given.retain(|(n, _)| *n != f.name);
        if let Some(v) = v {
            self.given.push((f.name, v));
        }
    }

    /// The former flags given ([`former_flags`]), each with its value, in no particular order.
    pub fn former(&self) -> &[(FormerFlag, String)] {
        &self.former
    }

    /// A text or list flag's value, if given (or defaulted).
    pub fn text(&self, f: &Flag) -> Option<&str> {
        match self.get(f) {
            Some(Given::Text(s)) => Some(s),
            None => None,
            Some(other) => panic!("{f} is not text: {other:?}"),
        }
    }

    /// A text flag that has a default: always there.
    pub fn value(&self, f: &Flag) -> &str {
        self.text(f)
            .unwrap_or_else(|| panic!("{f} has a default, so a value"))
    }

    pub fn path(&self, f: &Flag) -> Option<&Path> {
        match self.get(f) {
            Some(Given::Path(p)) => Some(p),
            None => None,
            Some(other) => panic!("{f} is not a path: {other:?}"),
        }
    }

    pub fn count(&self, f: &Flag) -> Option<u64> {
        match self.get(f) {
            Some(Given::Count(n)) => Some(*n),
            None => None,
            Some(other) => panic!("{f} is not a count: {other:?}"),
        }
    }

    /// A count flag that has a default: always there.
    pub fn number(&self, f: &Flag) -> u64 {
        self.count(f)
            .unwrap_or_else(|| panic!("{f} has a default, so a value"))
    }

    /// A number flag (each has a default).
    pub fn fraction(&self, f: &Flag) -> f64 {
        match self.get(f) {
            Some(Given::Fraction(x)) => *x,
            other => panic!("{f} is not a number with a default: {other:?}"),
        }
    }

    /// `--nodes`, or 1 where it was not given (a resolved RunArgs has the service's own).
    pub fn nodes(&self) -> usize {
        self.count(&NODES).unwrap_or(1) as usize
    }

    /// A repeated flag's values (none when not given).
    pub fn list(&self, f: &Flag) -> &[String] {
        match self.get(f) {
            Some(Given::List(v)) => v,
            None => &[],
            Some(other) => panic!("{f} is not a list: {other:?}"),
        }
    }

    pub fn switch(&self, f: &Flag) -> bool {
        matches!(self.get(f), Some(Given::Switch(true)))
    }

    pub fn set_text(&mut self, f: &'static Flag, v: Option<&str>) {
        self.put(f, v.map(|s| Given::Text(s.to_string())));
    }

    pub fn set_path(&mut self, f: &'static Flag, v: Option<&Path>) {
        self.put(f, v.map(|p| Given::Path(p.to_path_buf())));
    }

    pub fn set_count(&mut self, f: &'static Flag, v: Option<u64>) {
        self.put(f, v.map(Given::Count));
    }

    pub fn set_switch(&mut self, f: &'static Flag, on: bool) {
        self.put(f, Some(Given::Switch(on)));
    }
}

/// A service option's former flag: (flag, its service, the option it now is).
pub type FormerFlag = (&'static str, &'static dyn workloads::Service, &'static str);

/// Every service's former flags (`Service::former_flags`). Hidden flags of `run`, and keys of a config file's `[target]`, so that older runs'
/// reproduce lines and config files still read; each is defined by its service alone.
pub fn former_flags() -> impl Iterator<Item = FormerFlag> {
    workloads::SERVICES.iter().flat_map(|s| {
        s.former_flags()
            .iter()
            .map(move |(flag, option)| (*flag, *s, *option))
    })
}

/// After `run --help`'s flags.
const RUN_AFTER: &str = "Examples:
  lockpick run --seed 7                               embedded lockd + store, every fault
  lockpick run --workload mutex --nemesis none --unsafe racy --duration 10s
  lockpick run --node-cmd './my-lockd --host {host} --port {port} --dir {data_dir}' --nemesis pause,kill
  lockpick run --url http://127.0.0.1:7000 --store-url http://127.0.0.1:7001

Results go to <out>/<name>/<timestamp>/ (history.jsonl, results.json, report.html, junit.xml,
summary.txt, config.toml, lockpick.log, nodes/<id>/ logs); <out>/latest points at the newest run
and <out>/index.html lists every run.";

impl clap::Args for RunArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        // A later flag overrides an earlier one: that is how a flag overrides `--config`'s
        // file. Values may start with `-`, so `--duration -1s` or `--drift -1` is judged as
        // that flag's value and refused naming the flag, not taken for a flag of its own.
        let cmd = former_flags().fold(cmd, |cmd, (flag, ..)| {
            cmd.arg(
                Arg::new(flag)
                    .long(flag)
                    .hide(true)
                    .value_parser(clap::value_parser!(String)),
            )
        });
        RUN.iter()
            .fold(cmd, |cmd, f| cmd.arg(f.arg()))
            .after_help(RUN_AFTER)
            .args_override_self(true)
            .allow_hyphen_values(true)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for RunArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let given = RUN
            .iter()
            .filter_map(|f| f.given(m).map(|v| (f.name, v)))
            .collect();
        let former = former_flags()
            .filter_map(|f| m.get_one::<String>(f.0).map(|v| (f, v.clone())))
            .collect();
        Ok(RunArgs { given, former })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
