//! One test specification: the `run` flags, the `--config` file a team commits and a run
//! directory's `config.toml` share one schema, `flags::RUN`: every `run` flag is a key (named
//! after the flag, in the section its definition names), with the kind of value it takes. A
//! flag on the command line overrides the file. `lockpick init` writes a commented starter; the runner
//! writes a run's resolved settings with [`render`] in the same schema, so
//! `lockpick run --config RUN_DIR/config.toml` reruns that run with the same settings.
//!
//! The file is turned into flags placed before the user's own; clap is told that a later flag
//! overrides an earlier one, so there is exactly one parser and one set of rules for values.
//! An error about a value that came from the file names the file, line and key ([`Origins`]).

use crate::flags::{self, Flag, Init, Kind, RunArgs, Section, Setting};
use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::Path;

/// Keys only the config.toml of runs from before the one schema held (in milliseconds, the
/// targets as tables): such a file is refused with what to do instead.
const LEGACY_KEYS: [&str; 4] = ["ttl_ms", "duration_ms", "op_timeout_ms", "hold_min_ms"];

/// The template adapter's requests: read by the runner from the file itself (the reports
/// skip it among the settings by the same name).
const TEMPLATE_SECTION: &str = reports::config_keys::TEMPLATE_SECTION;
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

/// The line (1-based) the byte at `at` of `text` is on; past the end, the last line.
fn line_at(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.lines().count().max(1);
    }
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A file that does not read as TOML, in one line naming the file and the line the toml
/// reader placed the error on.
pub fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let Some(span) = e.span() else {
        return anyhow::anyhow!("{}: {}", path.display(), e.message().trim());
    };
    let line = line_at(text, span.start);
    let message = e.message().trim();
    let written = text.lines().nth(line - 1).unwrap_or("").trim();
    let header = |l: &str| {
        let name = l.trim().strip_prefix('[')?.strip_suffix(']')?;
        Some(name.trim().to_string())
    };
    // Where the key or table was first set, if found.
    let first =
        |section: Option<&str>, key: &str| Some(line_of(text, section, key)).filter(|&at| at > 0);
    // toml's "duplicate key" names neither the key nor where it was first set.
    let message = match (message, header(written)) {
        ("duplicate key", Some(name)) => format!(
            "duplicate table [{name}]{}: one table per section, its keys together",
            first(None, &name).map_or(String::new(), |at| format!(" (first at line {at})"))
        ),
        ("duplicate key", None) => {
            let key = written
                .split('=')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches('"');
            // The section it is in: the last header above it.
            let section = text.lines().take(line - 1).filter_map(header).last();
            let within = section
                .as_ref()
                .map_or(String::new(), |s| format!(" in [{s}]"));
            let earlier = first(section.as_deref(), key);
            let earlier = earlier.map_or(String::new(), |at| format!(", first at line {at}"));
            format!("duplicate key `{key}`{within}{earlier}")
        }
        (other, _) => other.to_string(),
    };
    anyhow::anyhow!("{}:{line}: {message}", path.display())
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
    /// Where a config file set `flag` (`path:line: `section.key``), when its value came from
    /// the file and no flag on the command line overrode it.
    pub fn of(&self, flag: &Flag) -> Option<&str> {
        let name = flag.to_string();
        self.0
            .iter()
            .find(|(f, _)| *f == name)
            .map(|(_, at)| at.as_str())
    }

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
    let table: toml::Table = text.parse().map_err(|e| toml_error(path, &text, &e))?;
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
        let r =
            match value {
                toml::Value::Table(_) if name == TEMPLATE_SECTION => {
                    out.flags.push(flags::TEMPLATE_FILE.to_string().into());
                    out.flags.push(path.as_os_str().to_owned());
                    Ok(())
                }
                // The hosts of --runtime ssh: read by the runner from the file itself.
                toml::Value::Array(_) | toml::Value::Table(_)
                    if HOSTS_KEYS.contains(&name.as_str()) =>
                {
                    let hosts_file = flags::HOSTS_FILE.to_string();
                    if out.flags.iter().any(|f| *f == *hosts_file) {
                        Ok(())
                    } else {
                        out.flags.push(hosts_file.into());
                        out.flags.push(path.as_os_str().to_owned());
                        hosts_error(path, &text)
                    }
                }
                toml::Value::Table(keys) if section_named(name).is_some() => {
                    for (key, v) in keys {
                        if let Err(e) = push_flag(&mut out, path, &text, Some(name), key, v) {
                            errors.push(e.to_string());
                        }
                    }
                    Ok(())
                }
                toml::Value::Table(_) => {
                    Err(anyhow::anyhow!(
                "{}:{}: unknown section [{name}] (known: {}, {TEMPLATE_SECTION}, and the ssh \
                 runtime's {})",
                path.display(),
                line_of(&text, None, name),
                Section::IN_FILE.map(Section::name).join(", "),
                HOSTS_KEYS
                    .iter()
                    .map(|k| if *k == "nodes" { "[[nodes]]".to_string() } else { format!("[{k}]") })
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))
                }
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

/// The file's `[[nodes]]` and `[ssh]` read now, by the runner's own reader, so a typo in them
/// is named with the file's other errors, at its line. No `[[nodes]]` (`[ssh]` alone) is left
/// to the runtime to refuse, if it is ssh.
fn hosts_error(path: &Path, text: &str) -> Result<()> {
    match nemesis::ssh::Hosts::from_config(text, Path::new(".")) {
        Err(e @ nemesis::ssh::HostsError::Bad { .. }) => {
            bail!("{}:{}: {e}", path.display(), e.line().unwrap_or(0))
        }
        _ => Ok(()),
    }
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
    // A service option's former flag (`etcd_api` in older runs' config.toml): its flag.
    let normal = key.replace('-', "_");
    let former = flags::former_flags().find(|(f, ..)| f.replace('-', "_") == normal);
    if let (Some((flag, ..)), None | Some("target")) = (former, section) {
        let toml::Value::String(v) = value else {
            bail!("{}:{at}: `{key_path}` must be a string", path.display());
        };
        out.flags.push(format!("--{flag}={v}").into());
        return Ok(());
    }
    let flag = key_of(path, at, section, key, &key_path)?;
    let wrong = |what: &str| {
        // A number or a switch is shown as written; other values by their type.
        let was = match value {
            toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                value.to_string()
            }
            _ => format!("a {}", value.type_str()),
        };
        // A duration written as a bare number: the string it must be, with its unit.
        let hint = match (flag.kind, value) {
            (flags::Kind::Text("DURATION"), toml::Value::Integer(n)) => {
                format!(" (a duration with its unit: \"{n}ms\" or \"{n}s\")")
            }
            _ => String::new(),
        };
        anyhow::anyhow!(
            "{}:{at}: `{key_path}` must be {what}, not {was}{hint}",
            path.display()
        )
    };
    let text_value = match flag_value(flag.kind, value).map_err(wrong)? {
        FlagValue::Text(v) => v,
        // A switch is a flag without a value: present when true.
        FlagValue::Switch(on) => {
            if on {
                out.flags.push(flag.to_string().into());
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

/// The section a file's `[name]` is, if it is one of the schema's.
fn section_named(name: &str) -> Option<Section> {
    Section::IN_FILE.into_iter().find(|s| s.name() == name)
}

/// The flag of `key` (`-` or `_` alike), refused when unknown (naming the section's keys) or
/// in another section than its own.
fn key_of(
    path: &Path,
    at: usize,
    section: Option<&str>,
    key: &str,
    key_path: &str,
) -> Result<&'static Flag> {
    let normal = key.replace('-', "_");
    let keyed = flags::RUN
        .iter()
        .filter(|f| f.section != Section::CommandLine);
    let Some(flag) = keyed.clone().find(|f| f.key() == normal) else {
        let in_section: Vec<String> = keyed
            .filter(|f| Some(f.section.name()) == section)
            .map(|f| f.key())
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
    let home = flag.section.name();
    match section {
        Some(s) if s != home => bail!(
            "{}:{at}: `{key_path}` belongs in [{home}], not [{s}]",
            path.display()
        ),
        // Before any section header: a misplaced line, not a setting of no section.
        None => bail!(
            "{}:{at}: `{key_path}` is outside any section: put it under [{home}]",
            path.display()
        ),
        Some(_) => Ok(flag),
    }
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
        (Kind::Text(_) | Kind::Path(_), toml::Value::String(s)) => s.clone(),
        (Kind::Text(_) | Kind::Path(_), _) => return Err("a string"),
        (Kind::Count(_), toml::Value::Integer(n)) if *n >= 0 => n.to_string(),
        // A seed may exceed TOML's integers: written as a string, and only then.
        (Kind::Count(_), toml::Value::String(s))
            if s.parse::<u64>().is_ok() && s.parse::<i64>().is_err() =>
        {
            s.clone()
        }
        (Kind::Count(_), _) => return Err("a non-negative integer"),
        (Kind::Fraction(_), toml::Value::Float(f)) => f.to_string(),
        (Kind::Fraction(_), toml::Value::Integer(n)) => n.to_string(),
        (Kind::Fraction(_), _) => return Err("a number"),
        (Kind::List(_) | Kind::Repeated(_), toml::Value::String(s)) => s.clone(),
        (Kind::List(_) | Kind::Repeated(_), toml::Value::Array(items)) => {
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
        (Kind::List(_) | Kind::Repeated(_), _) => return Err("a string or an array of strings"),
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
        let config_flag = flags::CONFIG.to_string();
        if s == config_flag {
            match it.next() {
                Some(p) => config = Some(p.clone()),
                None => bail!("--config: expected a file path"),
            }
        } else if let Some(p) = s
            .strip_prefix(config_flag.as_str())
            .and_then(|r| r.strip_prefix('='))
        {
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

/// Settings, keyed by their flag, as a config file: each in its section, sections in the
/// file's order and keys in the flags' (`flags::RUN`), so the same settings always make the
/// same bytes.
pub fn render(settings: &[(&'static Flag, Setting)]) -> String {
    let mut s = String::new();
    for section in Section::IN_FILE {
        let mut first = true;
        for (flag, value) in settings.iter().filter(|(f, _)| f.section == section) {
            if first {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(&format!("[{}]\n", section.name()));
                first = false;
            }
            s.push_str(&format!("{} = {}\n", flag.key(), value.toml()));
        }
    }
    s
}

/// A config file (a run's config.toml or a team's lockpick.toml) read into `run`'s flags, as
/// `lockpick run --config FILE` would: the one reader, for `check` and `shrink` to see a run's
/// own settings.
pub fn run_args(path: &Path) -> Result<RunArgs> {
    let mut argv: Vec<OsString> = vec!["lockpick".into(), "run".into()];
    argv.extend(flags_from_file(path)?.flags);
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim()))?;
    match cli.command {
        crate::cli::Command::Run(a) => Ok(a),
        _ => unreachable!("parsed as `run`"),
    }
}

/// The top of the starter config `lockpick init` writes.
const STARTER_HEAD: &str = "\
# lockpick.toml: a lock-service test your team keeps in its repository.
# Run the suite with `lockpick test --config lockpick.toml` (what CI should gate on: every
# fault this target allows, aimed, until each was exercised), or one run with `lockpick run
# --config lockpick.toml`. A flag on the command line overrides the same key here (e.g.
# `--seed 7`). Every key is a `lockpick run` flag; see `lockpick run --help`.
";

/// The column a starter line's note starts at.
const NOTE_COLUMN: usize = 42;

/// The starter config: every section, with each flag's `init` line (`flags::RUN`): the
/// defaults spelled out, and what each key means. It runs as is against the embedded
/// reference service. Lists of modes, faults and runtimes come from their registries
/// (`flags::fill`), so one added there is offered here.
pub fn starter() -> String {
    let mut out = STARTER_HEAD.to_string();
    for section in Section::IN_FILE {
        out.push_str(&format!("\n[{}]\n", section.name()));
        if let Some(intro) = section.intro() {
            out.push_str(&format!("# {intro}\n"));
        }
        for flag in flags::RUN.iter().filter(|f| f.section == section) {
            out.push_str(&starter_line(flag));
        }
    }
    out
}

/// A flag's line in the starter, with its note (continued on lines of their own, aligned).
fn starter_line(flag: &Flag) -> String {
    let default = || {
        let d = flag
            .default
            .expect("Init::Default on a flag with a default");
        match flag.kind {
            Kind::Count(_) => d.to_string(),
            Kind::Fraction(_) => format!("{:?}", d.parse::<f64>().expect("a number")),
            _ => format!("{d:?}"),
        }
    };
    // A commented-out line's note continues commented out.
    let (line, note, more_from) = match flag.init {
        Init::Omit => return String::new(),
        Init::Default(note) => (format!("{} = {}", flag.key(), default()), note, ""),
        Init::Set(value, note) => (format!("{} = {value}", flag.key()), note, ""),
        Init::Example(value, note) => (format!("# {} = {value}", flag.key()), note, "#"),
    };
    let (line, note) = (flags::fill(&line), flags::fill(note));
    if note.is_empty() {
        return format!("{line}\n");
    }
    let mut notes = note.lines();
    let first = notes.next().unwrap_or_default();
    let mut out = if line.len() < NOTE_COLUMN - 1 {
        format!("{line:<width$}# {first}\n", width = NOTE_COLUMN)
    } else {
        format!("{line}  # {first}\n")
    };
    for more in notes {
        out.push_str(&format!(
            "{more_from:<width$}# {more}\n",
            width = NOTE_COLUMN
        ));
    }
    out
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
