//! One test specification: the `run` flags, the `--config` file a team commits and a run
//! directory's `config.toml` share one schema, [`KEYS`]: every `run` flag is a key (named
//! after the flag, grouped in sections for reading), with the kind of value it takes. A flag on
//! the command line overrides the file. `lockpick init` writes a commented starter; the runner
//! writes a run's resolved settings with [`render`] in the same schema, so
//! `lockpick run --config RUN_DIR/config.toml` reruns that run with the same settings.
//!
//! The file is turned into flags placed before the user's own; clap is told that a later flag
//! overrides an earlier one, so there is exactly one parser and one set of rules for values.
//! An error about a value that came from the file names the file, line and key ([`Origins`]).

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::Path;

/// What a key's value must be.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    /// A non-negative integer.
    Count,
    Fraction,
    /// A string, or an array of strings joined with commas.
    List,
    /// `true` or `false`: a flag without a value, given when true.
    Switch,
}

/// Every key the file may hold: (section, key, flag, kind). Keys are the flag names with `_`
/// for `-`; sections only group them.
const KEYS: &[(&str, &str, &str, Kind)] = &[
    ("target", "adapter", "--adapter", Kind::Text),
    ("target", "etcd_api", "--etcd-api", Kind::Text),
    ("target", "adapter_opt", "--adapter-opt", Kind::List),
    ("target", "node_cmd", "--node-cmd", Kind::Text),
    ("target", "url", "--url", Kind::Text),
    ("target", "nodes", "--nodes", Kind::Count),
    ("target", "runtime", "--runtime", Kind::Text),
    ("target", "unsafe", "--unsafe", Kind::Text),
    ("target", "lock_order", "--lock-order", Kind::Text),
    ("target", "startup_timeout", "--startup-timeout", Kind::Text),
    ("store", "store_cmd", "--store-cmd", Kind::Text),
    ("store", "store_url", "--store-url", Kind::Text),
    ("store", "store_fence", "--store-fence", Kind::Text),
    ("workload", "workload", "--workload", Kind::Text),
    ("workload", "clients", "--clients", Kind::Count),
    ("workload", "locks", "--locks", Kind::Count),
    ("workload", "accounts", "--accounts", Kind::Count),
    (
        "workload",
        "lock_order_policy",
        "--lock-order-policy",
        Kind::Text,
    ),
    ("workload", "ttl", "--ttl", Kind::Text),
    ("workload", "renew_ttl", "--renew-ttl", Kind::Text),
    ("workload", "hold", "--hold", Kind::Text),
    ("workload", "arrivals", "--arrivals", Kind::Text),
    ("workload", "duration", "--duration", Kind::Text),
    ("workload", "ops_max", "--ops-max", Kind::Count),
    ("workload", "op_timeout", "--op-timeout", Kind::Text),
    ("workload", "acquire_wait", "--acquire-wait", Kind::Text),
    ("workload", "seed", "--seed", Kind::Count),
    ("nemesis", "nemesis", "--nemesis", Kind::List),
    (
        "nemesis",
        "nemesis_interval",
        "--nemesis-interval",
        Kind::Text,
    ),
    (
        "nemesis",
        "nemesis_targets",
        "--nemesis-targets",
        Kind::Text,
    ),
    ("nemesis", "schedule", "--schedule", Kind::Text),
    ("nemesis", "clock_faults", "--clock-faults", Kind::List),
    ("nemesis", "client_faults", "--client-faults", Kind::List),
    ("nemesis", "clock_scope", "--clock-scope", Kind::Text),
    ("nemesis", "clock_bump", "--clock-bump", Kind::Text),
    ("nemesis", "clock_rate", "--clock-rate", Kind::Fraction),
    (
        "nemesis",
        "partition_topologies",
        "--partition-topologies",
        Kind::List,
    ),
    ("check", "drift", "--drift", Kind::Fraction),
    ("check", "liveness_grace", "--liveness-grace", Kind::Text),
    ("check", "fail_on", "--fail-on", Kind::List),
    (
        "check",
        "stop_on_violation",
        "--stop-on-violation",
        Kind::Switch,
    ),
    ("output", "out", "--out", Kind::Text),
    ("output", "name", "--name", Kind::Text),
    // Set from a [template] section; a run's config.toml names the file that holds it.
    ("target", "template_file", "--template-file", Kind::Text),
    // Set from [[nodes]] and [ssh]; a run's config.toml names the file that holds them.
    ("target", "hosts_file", "--hosts-file", Kind::Text),
    ("target", "no_probe", "--no-probe", Kind::Switch),
];

/// Keys only the config.toml of runs from before the one schema held (in milliseconds, the
/// targets as tables): such a file is refused with what to do instead.
const LEGACY_KEYS: [&str; 4] = ["ttl_ms", "duration_ms", "op_timeout_ms", "hold_min_ms"];

const SECTIONS: [&str; 6] = ["target", "store", "workload", "nemesis", "check", "output"];
/// The template adapter's requests: read by the runner from the file itself.
const TEMPLATE_SECTION: &str = "template";
/// The hosts of --runtime ssh (`[[nodes]]`) and the ssh settings (`[ssh]`): read by the runner
/// from the file itself.
const HOSTS_KEYS: [&str; 2] = nemesis::ssh::CONFIG_SECTIONS;

/// The line a key (or section header) sits on, for messages; 0 when not found.
fn line_of(text: &str, section: Option<&str>, key: &str) -> usize {
    let mut in_section = section.is_none();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let name = name.trim();
            if section.is_none() && name == key {
                return i + 1;
            }
            in_section = Some(name) == section;
            continue;
        }
        if in_section {
            let k = t.split('=').next().unwrap_or("").trim().trim_matches('"');
            if k == key {
                return i + 1;
            }
        }
    }
    0
}

/// What a config file stands for: the flags, in file order, and where each came from.
#[derive(Debug)]
pub struct FileFlags {
    pub flags: Vec<OsString>,
    /// Each flag's key in the file, `path:line: `section.key``: an error about the flag's
    /// value is reported there, not as a flag the user never typed.
    pub origins: Origins,
}

/// Flags that came from a config file, with the place each was read from.
#[derive(Debug, Clone, Default)]
pub struct Origins(Vec<(String, String)>);

impl Origins {
    /// `message` about a flag (`--ttl "soon": expected ...`, or clap's `invalid value 'x' for
    /// '--clients <N>'`) as the place the flag's value came from, when it came from a file.
    pub fn locate(&self, message: &str) -> String {
        for (flag, at) in &self.0 {
            if let Some(rest) = message.strip_prefix(flag.as_str()) {
                if rest.is_empty() || rest.starts_with([' ', ':', '=']) {
                    return format!("{at}{rest}");
                }
            }
            if message.contains(&format!("'{flag} ")) || message.contains(&format!("'{flag}'")) {
                return format!("{at}: {message}");
            }
        }
        message.to_string()
    }
}

/// The flags a config file stands for. Every key is checked before any is refused, so one try
/// names every unknown key, misplaced key and wrong type.
pub fn flags_from_file(path: &Path) -> Result<FileFlags> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--config {}: cannot read it", path.display()))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let at = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
            .unwrap_or(0);
        anyhow::anyhow!("{}:{at}: {}", path.display(), e.message())
    })?;
    if let Some(key) = table.keys().find(|k| LEGACY_KEYS.contains(&k.as_str())) {
        bail!(
            "{}:{}: `{key}`: a run's config.toml from an older lockpick (keys in \
             milliseconds); rerun it with the command on its second line",
            path.display(),
            line_of(&text, None, key)
        );
    }
    let mut out = FileFlags {
        flags: Vec::new(),
        origins: Origins::default(),
    };
    let mut errors = Vec::new();
    for (name, value) in &table {
        let r = match value {
            toml::Value::Table(_) if name == TEMPLATE_SECTION => {
                out.flags.push("--template-file".into());
                out.flags.push(path.as_os_str().to_owned());
                Ok(())
            }
            // The hosts of --runtime ssh: read by the runner from the file itself.
            toml::Value::Array(_) | toml::Value::Table(_)
                if HOSTS_KEYS.contains(&name.as_str()) =>
            {
                if !out.flags.iter().any(|f| f == "--hosts-file") {
                    out.flags.push("--hosts-file".into());
                    out.flags.push(path.as_os_str().to_owned());
                }
                Ok(())
            }
            toml::Value::Table(keys) if SECTIONS.contains(&name.as_str()) => {
                for (key, v) in keys {
                    if let Err(e) = push_flag(&mut out, path, &text, Some(name), key, v) {
                        errors.push(e.to_string());
                    }
                }
                Ok(())
            }
            toml::Value::Table(_) => Err(anyhow::anyhow!(
                "{}:{}: unknown section [{name}] (known: {}, {TEMPLATE_SECTION})",
                path.display(),
                line_of(&text, None, name),
                SECTIONS.join(", ")
            )),
            v => push_flag(&mut out, path, &text, None, name, v),
        };
        if let Err(e) = r {
            errors.push(e.to_string());
        }
    }
    if !errors.is_empty() {
        bail!("{}", errors.join("; "));
    }
    Ok(out)
}

fn push_flag(
    out: &mut FileFlags,
    path: &Path,
    text: &str,
    section: Option<&str>,
    key: &str,
    value: &toml::Value,
) -> Result<()> {
    let key_path = match section {
        Some(s) => format!("{s}.{key}"),
        None => key.to_string(),
    };
    let at = line_of(text, section, key);
    let (flag, kind) = key_of(path, at, section, key, &key_path)?;
    let wrong = |what: &str| {
        // A number or a switch is shown as written; other values by their type.
        let was = match value {
            toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                value.to_string()
            }
            _ => format!("a {}", value.type_str()),
        };
        anyhow::anyhow!(
            "{}:{at}: `{key_path}` must be {what}, not {was}",
            path.display()
        )
    };
    let text_value = match flag_value(kind, value).map_err(wrong)? {
        FlagValue::Text(v) => v,
        // A switch is a flag without a value: present when true.
        FlagValue::Switch(on) => {
            if on {
                out.flags.push(flag.into());
            }
            return Ok(());
        }
    };
    // One argument, `--flag=value`: a value that starts with `-` (`-1s`, a node command's
    // `--version`) is then the flag's value, never read as a flag of its own.
    out.flags.push(format!("{flag}={text_value}").into());
    out.origins.0.push((
        flag.to_string(),
        format!("{}:{at}: `{key_path}`", path.display()),
    ));
    Ok(())
}

/// The flag and kind of `key` (`-` or `_` alike), refused when unknown (naming the section's
/// keys) or in another section than its own.
fn key_of(
    path: &Path,
    at: usize,
    section: Option<&str>,
    key: &str,
    key_path: &str,
) -> Result<(&'static str, Kind)> {
    let normal = key.replace('-', "_");
    let Some(&(home, _, flag, kind)) = KEYS.iter().find(|(_, k, _, _)| *k == normal) else {
        let in_section: Vec<&str> = KEYS
            .iter()
            .filter(|(s, ..)| Some(*s) == section)
            .map(|(_, k, ..)| *k)
            .collect();
        bail!(
            "{}:{at}: unknown key `{key_path}`{}",
            path.display(),
            if in_section.is_empty() {
                String::new()
            } else {
                format!(" (known here: {})", in_section.join(", "))
            }
        );
    };
    if let Some(s) = section {
        if s != home {
            bail!(
                "{}:{at}: `{key_path}` belongs in [{home}], not [{s}]",
                path.display()
            );
        }
    }
    Ok((flag, kind))
}

/// A file value as its flag takes it.
enum FlagValue {
    /// The flag's value, as it would be written after `=`.
    Text(String),
    /// A switch, on or off.
    Switch(bool),
}

/// `value` read as a value of `kind`; the error is what it must be instead.
fn flag_value(kind: Kind, value: &toml::Value) -> Result<FlagValue, &'static str> {
    let text = match (kind, value) {
        (Kind::Text, toml::Value::String(s)) => s.clone(),
        (Kind::Text, _) => return Err("a string"),
        (Kind::Count, toml::Value::Integer(n)) if *n >= 0 => n.to_string(),
        // A seed may exceed TOML's integers: written as a string.
        (Kind::Count, toml::Value::String(s)) if s.parse::<u64>().is_ok() => s.clone(),
        (Kind::Count, _) => return Err("a non-negative integer"),
        (Kind::Fraction, toml::Value::Float(f)) => f.to_string(),
        (Kind::Fraction, toml::Value::Integer(n)) => n.to_string(),
        (Kind::Fraction, _) => return Err("a number"),
        (Kind::List, toml::Value::String(s)) => s.clone(),
        (Kind::List, toml::Value::Array(items)) => {
            let mut parts = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    toml::Value::String(s) => parts.push(s.clone()),
                    _ => return Err("a string or an array of strings"),
                }
            }
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(",")
            }
        }
        (Kind::List, _) => return Err("a string or an array of strings"),
        (Kind::Switch, toml::Value::Boolean(on)) => return Ok(FlagValue::Switch(*on)),
        (Kind::Switch, _) => return Err("true or false"),
    };
    Ok(FlagValue::Text(text))
}

/// Rewrites the process arguments: `lockpick run|demo|probe ... --config FILE ...` becomes
/// `lockpick run|demo|probe <flags from FILE> ...` (the user's flags after, so they win), and
/// says where each flag from the file came from (those the user's own flags override are left
/// out: an error about them is about the user's flag).
pub fn expand(args: Vec<OsString>) -> Result<(Vec<OsString>, Origins)> {
    let Some(sub) = args.get(1).and_then(|a| a.to_str()) else {
        return Ok((args, Origins::default()));
    };
    if !matches!(sub, "run" | "demo" | "probe" | "test") {
        return Ok((args, Origins::default()));
    }
    let mut rest = Vec::with_capacity(args.len());
    let mut config = None;
    let mut it = args.iter().skip(2);
    // Bounded by the argument list.
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--config" {
            match it.next() {
                Some(p) => config = Some(p.clone()),
                None => bail!("--config: expected a file path"),
            }
        } else if let Some(p) = s.strip_prefix("--config=") {
            config = Some(p.into());
        } else {
            rest.push(a.clone());
        }
    }
    let Some(config) = config else {
        return Ok((args, Origins::default()));
    };
    let file = flags_from_file(Path::new(&config))?;
    let mut origins = file.origins;
    origins.0.retain(|(flag, _)| {
        !rest.iter().any(|a| {
            let a = a.to_string_lossy();
            a == flag.as_str() || a.starts_with(&format!("{flag}="))
        })
    });
    let mut out = args[..2].to_vec();
    out.extend(file.flags);
    out.extend(rest);
    Ok((out, origins))
}

/// A value of one setting, as [`render`] writes it and [`flags_from_file`] reads it back.
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

    fn toml(&self) -> toml::Value {
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

/// Settings, keyed by their flag, as a config file: each in its section, sections and keys in
/// the schema's order, so the same settings always make the same bytes. Panics on a flag the
/// schema does not know (a test checks every `run` flag is in it).
pub fn render(settings: &[(&str, Setting)]) -> String {
    let mut s = String::new();
    for section in SECTIONS {
        let mut first = true;
        for (home, key, flag, _) in KEYS {
            if *home != section {
                continue;
            }
            let Some((_, value)) = settings.iter().find(|(f, _)| f == flag) else {
                continue;
            };
            if first {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(&format!("[{section}]\n"));
                first = false;
            }
            s.push_str(&format!("{key} = {}\n", value.toml()));
        }
    }
    for (flag, _) in settings {
        assert!(
            KEYS.iter().any(|(_, _, f, _)| f == flag),
            "{flag} is not in the config schema"
        );
    }
    s
}

/// A config file (a run's config.toml or a team's lockpick.toml) read into `run`'s flags, as
/// `lockpick run --config FILE` would: the one reader, for `check` and `shrink` to see a run's
/// own settings.
pub fn run_args(path: &Path) -> Result<crate::cli::RunArgs> {
    let mut argv: Vec<OsString> = vec!["lockpick".into(), "run".into()];
    argv.extend(flags_from_file(path)?.flags);
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim()))?;
    match cli.command {
        crate::cli::Command::Run(a) => Ok(a),
        _ => unreachable!("parsed as `run`"),
    }
}

/// The starter config `lockpick init` writes ([`starter`]), with `{fence_modes}` for the
/// embedded store's fence modes: every section, the defaults spelled out, and what each key
/// means. It runs as is against the embedded reference service.
const STARTER: &str = r#"# lockpick.toml: a lock-service test your team keeps in its repository.
# Run the suite with `lockpick test --config lockpick.toml` (what CI should gate on: every
# fault this target allows, aimed, until each was exercised), or one run with `lockpick run
# --config lockpick.toml`. A flag on the command line overrides the same key here (e.g.
# `--seed 7`). Every key is a `lockpick run` flag; see `lockpick run --help`.

[target]
# Which lock service to test. Nothing set here: the embedded reference lockd.
# node_cmd = "./my-lockd --listen {host}:{port} --data {data_dir} --peers {peers}"
# url = "http://127.0.0.1:7000"          # already running: only client-side faults then
nodes = 1                                 # members; client i talks to node i mod nodes
runtime = "{runtime}"                         # {runtimes}
startup_timeout = "10s"                   # how long a node may take to answer GET /v1/health

[store]
# The fenced resource the counter workload writes through the lock.
store_fence = "all"                       # {fence_modes} (embedded store)
# store_cmd = "./my-store --listen {host}:{port}"
# store_url = "http://127.0.0.1:7001"

[workload]
workload = "counter"                      # counter (fencing + lost updates) or mutex
clients = 5
locks = 1
ttl = "2s"                                # lease requested on every acquire (and renew)
# renew_ttl = "600ms"                     # lease on every renew instead (default: ttl)
hold = "50ms..1s"                         # how long a holder keeps the lock
duration = "30s"
op_timeout = "1s"                         # past this an op is indeterminate (info)
# acquire_wait = "10s"                    # how long an acquire may wait (default: 5 x ttl)
# seed = 42                               # fixed seed: the same faults at the same times
# ops_max = 100000

[nemesis]
# nemesis = ["pause", "kill", "client-pause", "clock"]  # default: every fault this target and
#                                         # machine allow; also partition, netem; [] for none
nemesis_interval = "3s"                   # quiet time between faults
nemesis_targets = "one"                   # one | minority | majority | all | primary
# clock_faults = ["bump-forward", "bump-back", "strobe", "fast", "slow"]
# client_faults = ["boundary", "next-grant", "long", "waiter", "renew", "write", "release", "read"]
# clock_scope = "wall"                    # wall | all (monotonic too)
# partition_topologies = ["isolate", "halves", "majorities-ring", "bridge", "clients"]

[check]
drift = 0.0                               # clock-rate error the service claims to tolerate
liveness_grace = "2s"                     # slack before a held lock counts as stuck
fail_on = ["safety", "liveness"]          # add "warnings" (unsafe-overlap), "coverage" (a requested
                                          # fault kind or client-fault shape never exercised)
# stop_on_violation = true                # end the clients at the first proven safety violation

[output]
out = "runs"
# name = "my-lock-service"
"#;

/// The starter config: [`STARTER`] with the fence modes listed from [`lockd::FenceMode::ALL`],
/// so that a mode added there is offered here.
pub fn starter() -> String {
    let modes: Vec<&str> = lockd::FenceMode::ALL.iter().map(|m| m.name()).collect();
    let runtimes: Vec<String> = nemesis::RUNTIMES
        .iter()
        .map(|r| match (r.network_faults(), r.needs_hosts()) {
            (_, Some(_)) => format!("{} (hosts in [[nodes]])", r.name()),
            (true, None) => format!("{} (network faults)", r.name()),
            (false, None) => r.name().to_string(),
        })
        .collect();
    STARTER
        .replace("{fence_modes}", &modes.join(" | "))
        .replace("{runtime}", nemesis::runtime::default_runtime(false).name())
        .replace("{runtimes}", &runtimes.join(" | "))
}

/// `lockpick init [PATH]`: writes the starter, never over an existing file unless forced.
pub fn init(path: &Path, force: bool) -> Result<()> {
    if path.exists() && !force {
        bail!("{} exists; pass --force to overwrite it", path.display());
    }
    std::fs::write(path, starter()).with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "wrote {}; run the suite with `lockpick test --config {}` (one run: `lockpick run --config {}`)",
        path.display(),
        path.display(),
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests;
