//! A run directory's own `config.toml` (the resolved configuration, keys in milliseconds, the
//! targets as tables) read back as the flags it stands for.

use super::line_of;
use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::Path;

/// The first line the runner writes atop a run directory's `config.toml`.
const RESOLVED_HEADER: &str = "# Resolved configuration of this run.";

/// Whether the file is a run directory's `config.toml` (the resolved configuration, keys in
/// milliseconds) rather than a `lockpick init` file (keys named after the flags).
pub(super) fn is_resolved(text: &str, table: &toml::Table) -> bool {
    text.starts_with(RESOLVED_HEADER) || table.contains_key("ttl_ms")
}

/// A run directory's `config.toml` as flags, so `lockpick run --config RUN_DIR/config.toml`
/// reruns that run (same seed; `lockpick shrink` reruns it with a smaller schedule). Every key
/// the runner writes is read; any other key is refused like a typo.
pub(super) fn flags_from_resolved(
    path: &Path,
    text: &str,
    table: &toml::Table,
) -> Result<Vec<OsString>> {
    let mut flags: Vec<OsString> = Vec::new();
    let mut push = |flag: &str, value: String| {
        flags.push(flag.into());
        flags.push(value.into());
    };
    let at = |key: &str| line_of(text, None, key);
    let wrong = |key: &str, what: &str| {
        anyhow::anyhow!("{}:{}: `{key}` must be {what}", path.display(), at(key))
    };
    let string = |key: &str| -> Result<Option<String>> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(wrong(key, "a string")),
        }
    };
    let number = |key: &str| -> Result<Option<String>> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) if *n >= 0 => Ok(Some(n.to_string())),
            Some(toml::Value::Float(f)) => Ok(Some(f.to_string())),
            // A seed above TOML's integers is written as a string.
            Some(toml::Value::String(s)) if s.parse::<u64>().is_ok() => Ok(Some(s.clone())),
            Some(_) => Err(wrong(key, "a non-negative number")),
        }
    };
    let list = |key: &str| -> Result<Option<Vec<String>>> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    toml::Value::String(s) => Ok(s.clone()),
                    _ => Err(wrong(key, "an array of strings")),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(_) => Err(wrong(key, "an array of strings")),
        }
    };
    let target = |key: &str| -> Result<Option<(String, Option<String>)>> {
        let Some(v) = table.get(key) else {
            return Ok(None);
        };
        let t = v.as_table().ok_or_else(|| wrong(key, "a table"))?;
        let kind = t
            .get("kind")
            .and_then(toml::Value::as_str)
            .ok_or_else(|| wrong(key, "a table with a `kind`"))?;
        let arg = match kind {
            "embedded" => None,
            "command" => Some(
                t.get("template")
                    .and_then(toml::Value::as_str)
                    .ok_or_else(|| wrong(key, "a table with a `template`"))?
                    .to_string(),
            ),
            "url" => Some(
                t.get("url")
                    .and_then(toml::Value::as_str)
                    .ok_or_else(|| wrong(key, "a table with a `url`"))?
                    .to_string(),
            ),
            other => {
                return Err(wrong(
                    key,
                    &format!("embedded, command or url, not {other:?}"),
                ))
            }
        };
        Ok(Some((kind.to_string(), arg)))
    };
    let ms = |key: &str| -> Result<Option<String>> { Ok(number(key)?.map(|n| format!("{n}ms"))) };

    const KNOWN: &[&str] = &[
        "name",
        "seed",
        "workload",
        "clients",
        "locks",
        "ttl_ms",
        "renew_ttl_ms",
        "hold_min_ms",
        "hold_max_ms",
        "duration_ms",
        "ops_max",
        "op_timeout_ms",
        "acquire_wait_ms",
        "adapter",
        "etcd_api",
        "template_file",
        "nodes",
        "nemesis_targets",
        "runtime",
        "partition_topologies",
        "nemesis",
        "nemesis_interval_ms",
        "clock_faults",
        "client_faults",
        "clock_scope",
        "clock_bump_ms",
        "clock_rate",
        "target",
        "unsafe_mode",
        "store",
        "store_fence",
        "drift",
        "liveness_grace_ms",
        "startup_timeout_ms",
        "out",
        "schedule",
    ];
    if let Some(key) = table.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        bail!(
            "{}:{}: unknown key `{key}` in a run's resolved configuration",
            path.display(),
            at(key)
        );
    }
    for (key, flag) in [
        ("name", "--name"),
        ("workload", "--workload"),
        ("adapter", "--adapter"),
        ("etcd_api", "--etcd-api"),
        ("template_file", "--template-file"),
        ("nemesis_targets", "--nemesis-targets"),
        ("runtime", "--runtime"),
        ("clock_scope", "--clock-scope"),
        ("unsafe_mode", "--unsafe"),
        ("out", "--out"),
        ("schedule", "--schedule"),
    ] {
        if let Some(v) = string(key)? {
            push(flag, v);
        }
    }
    for (key, flag) in [
        ("seed", "--seed"),
        ("clients", "--clients"),
        ("locks", "--locks"),
        ("ops_max", "--ops-max"),
        ("nodes", "--nodes"),
        ("clock_rate", "--clock-rate"),
        ("drift", "--drift"),
    ] {
        if let Some(v) = number(key)? {
            push(flag, v);
        }
    }
    for (key, flag) in [
        ("ttl_ms", "--ttl"),
        ("renew_ttl_ms", "--renew-ttl"),
        ("duration_ms", "--duration"),
        ("op_timeout_ms", "--op-timeout"),
        ("acquire_wait_ms", "--acquire-wait"),
        ("nemesis_interval_ms", "--nemesis-interval"),
        ("clock_bump_ms", "--clock-bump"),
        ("liveness_grace_ms", "--liveness-grace"),
        ("startup_timeout_ms", "--startup-timeout"),
    ] {
        if let Some(v) = ms(key)? {
            push(flag, v);
        }
    }
    if let (Some(lo), Some(hi)) = (ms("hold_min_ms")?, ms("hold_max_ms")?) {
        push("--hold", format!("{lo}..{hi}"));
    }
    for (key, flag) in [
        ("nemesis", "--nemesis"),
        ("partition_topologies", "--partition-topologies"),
        ("clock_faults", "--clock-faults"),
        ("client_faults", "--client-faults"),
    ] {
        if let Some(items) = list(key)? {
            match (key, items.is_empty()) {
                ("nemesis", true) => push(flag, "none".into()),
                (_, true) => {}
                _ => push(flag, items.join(",")),
            }
        }
    }
    match target("target")? {
        Some((k, Some(t))) if k == "command" => push("--node-cmd", t),
        Some((k, Some(u))) if k == "url" => push("--url", u),
        _ => {}
    }
    match target("store")? {
        Some((k, Some(t))) if k == "command" => push("--store-cmd", t),
        Some((k, Some(u))) if k == "url" => push("--store-url", u),
        // The fence is a mode of the embedded store only (clap refuses it beside the others).
        _ => {
            if let Some(f) = string("store_fence")? {
                push("--store-fence", f);
            }
        }
    }
    Ok(flags)
}
