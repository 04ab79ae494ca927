//! `lockpick run --config lockpick.toml`: the file a team commits. Its keys are the `run`
//! flags (grouped in sections for reading), so everything a flag can say the file can say, and
//! a flag on the command line overrides the file. `lockpick init` writes a commented starter.
//!
//! The file is turned into flags placed before the user's own; clap is told that a later flag
//! overrides an earlier one, so there is exactly one parser and one set of rules for values.

mod resolved;

use anyhow::{bail, Context, Result};
use resolved::{flags_from_resolved, is_resolved};
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
}

/// Every key the file may hold: (section, key, flag, kind). Keys are the flag names with `_`
/// for `-`; sections only group them.
const KEYS: &[(&str, &str, &str, Kind)] = &[
    ("target", "adapter", "--adapter", Kind::Text),
    ("target", "etcd_api", "--etcd-api", Kind::Text),
    ("target", "node_cmd", "--node-cmd", Kind::Text),
    ("target", "url", "--url", Kind::Text),
    ("target", "nodes", "--nodes", Kind::Count),
    ("target", "runtime", "--runtime", Kind::Text),
    ("target", "unsafe", "--unsafe", Kind::Text),
    ("target", "startup_timeout", "--startup-timeout", Kind::Text),
    ("store", "store_cmd", "--store-cmd", Kind::Text),
    ("store", "store_url", "--store-url", Kind::Text),
    ("store", "store_fence", "--store-fence", Kind::Text),
    ("workload", "workload", "--workload", Kind::Text),
    ("workload", "clients", "--clients", Kind::Count),
    ("workload", "locks", "--locks", Kind::Count),
    ("workload", "ttl", "--ttl", Kind::Text),
    ("workload", "renew_ttl", "--renew-ttl", Kind::Text),
    ("workload", "hold", "--hold", Kind::Text),
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
    ("output", "out", "--out", Kind::Text),
    ("output", "name", "--name", Kind::Text),
];

const SECTIONS: [&str; 6] = ["target", "store", "workload", "nemesis", "check", "output"];
/// The template adapter's requests: read by the runner from the file itself.
const TEMPLATE_SECTION: &str = "template";

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

/// The flags a config file stands for, in file order.
pub fn flags_from_file(path: &Path) -> Result<Vec<OsString>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--config {}: cannot read it", path.display()))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let at = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
            .unwrap_or(0);
        anyhow::anyhow!("{}:{at}: {}", path.display(), e.message())
    })?;
    if is_resolved(&text, &table) {
        return flags_from_resolved(path, &text, &table);
    }
    let mut flags = Vec::new();
    for (name, value) in &table {
        match value {
            toml::Value::Table(_) if name == TEMPLATE_SECTION => {
                flags.push("--template-file".into());
                flags.push(path.as_os_str().to_owned());
            }
            toml::Value::Table(keys) if SECTIONS.contains(&name.as_str()) => {
                for (key, v) in keys {
                    push_flag(&mut flags, path, &text, Some(name), key, v)?;
                }
            }
            toml::Value::Table(_) => bail!(
                "{}:{}: unknown section [{name}] (known: {}, {TEMPLATE_SECTION})",
                path.display(),
                line_of(&text, None, name),
                SECTIONS.join(", ")
            ),
            v => push_flag(&mut flags, path, &text, None, name, v)?,
        }
    }
    Ok(flags)
}

fn push_flag(
    flags: &mut Vec<OsString>,
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
    let wrong = |what: &str| {
        anyhow::anyhow!(
            "{}:{at}: `{key_path}` must be {what}, not {}",
            path.display(),
            value.type_str()
        )
    };
    let text_value = match (kind, value) {
        (Kind::Text, toml::Value::String(s)) => s.clone(),
        (Kind::Text, _) => return Err(wrong("a string")),
        (Kind::Count, toml::Value::Integer(n)) if *n >= 0 => n.to_string(),
        // A seed may exceed TOML's integers: written as a string.
        (Kind::Count, toml::Value::String(s)) if s.parse::<u64>().is_ok() => s.clone(),
        (Kind::Count, _) => return Err(wrong("a non-negative integer")),
        (Kind::Fraction, toml::Value::Float(f)) => f.to_string(),
        (Kind::Fraction, toml::Value::Integer(n)) => n.to_string(),
        (Kind::Fraction, _) => return Err(wrong("a number")),
        (Kind::List, toml::Value::String(s)) => s.clone(),
        (Kind::List, toml::Value::Array(items)) => {
            let mut parts = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    toml::Value::String(s) => parts.push(s.clone()),
                    _ => return Err(wrong("a string or an array of strings")),
                }
            }
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(",")
            }
        }
        (Kind::List, _) => return Err(wrong("a string or an array of strings")),
    };
    flags.push(flag.into());
    flags.push(text_value.into());
    Ok(())
}

/// Rewrites the process arguments: `lockpick run|demo|probe ... --config FILE ...` becomes
/// `lockpick run|demo|probe <flags from FILE> ...` (the user's flags after, so they win).
pub fn expand(args: Vec<OsString>) -> Result<Vec<OsString>> {
    let Some(sub) = args.get(1).and_then(|a| a.to_str()) else {
        return Ok(args);
    };
    if sub != "run" && sub != "demo" && sub != "probe" {
        return Ok(args);
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
        return Ok(args);
    };
    let mut out = args[..2].to_vec();
    out.extend(flags_from_file(Path::new(&config))?);
    out.extend(rest);
    Ok(out)
}

/// The starter config `lockpick init` writes: every section, the defaults spelled out, and
/// what each key means. It runs as is against the embedded reference service.
pub const STARTER: &str = r#"# lockpick.toml: a lock-service test your team keeps in its repository.
# Run it with `lockpick run --config lockpick.toml`; a flag on the command line overrides the
# same key here (e.g. `--seed 7`). Every key is a `lockpick run` flag; see `lockpick run --help`.

[target]
# Which lock service to test. Nothing set here: the embedded reference lockd.
# node_cmd = "./my-lockd --listen {host}:{port} --data {data_dir} --peers {peers}"
# url = "http://127.0.0.1:7000"          # already running: only client-side faults then
nodes = 1                                 # members; client i talks to node i mod nodes
runtime = "local"                         # local (loopback) or netns (root; network faults)
startup_timeout = "10s"                   # how long a node may take to answer GET /v1/health

[store]
# The fenced resource the counter workload writes through the lock.
store_fence = "all"                       # all | write | none (embedded store)
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
nemesis = ["pause", "kill", "client-pause"]   # also: clock, partition, netem; [] for none
nemesis_interval = "3s"                   # quiet time between faults
nemesis_targets = "one"                   # one | minority | majority | all | primary
# clock_faults = ["bump-forward", "bump-back", "strobe", "fast", "slow"]
# client_faults = ["boundary", "next-grant", "long", "waiter", "renew", "write", "release", "read"]
# clock_scope = "wall"                    # wall | all (monotonic too)
# partition_topologies = ["isolate", "halves", "majorities-ring", "bridge", "clients"]

[check]
drift = 0.0                               # clock-rate error the service claims to tolerate
liveness_grace = "2s"                     # slack before a held lock counts as stuck
fail_on = ["safety", "liveness"]          # add "warnings" to fail on unsafe-overlap

[output]
out = "runs"
# name = "my-lock-service"
"#;

/// `lockpick init [PATH]`: writes the starter, never over an existing file unless forced.
pub fn init(path: &Path, force: bool) -> Result<()> {
    if path.exists() && !force {
        bail!("{} exists; pass --force to overwrite it", path.display());
    }
    std::fs::write(path, STARTER).with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "wrote {}; run it with `lockpick run --config {}`",
        path.display(),
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests;
