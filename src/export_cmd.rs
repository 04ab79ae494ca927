//! `lockpick export RUN_DIR --format jepsen`: the history as Jepsen EDN ops, one map per line,
//! so Jepsen's tooling (Knossos, Elle, its timeline) can read a lockpick run.
//!
//! Mapping: `type` and `f` become keywords (`:invoke`, `:acquire`), the process a number or
//! `:nemesis`, `time_ns` Jepsen's `:time` (nanoseconds, same origin), and the op's lock, key and
//! value fields one `:value` map with kebab-case keyword keys (`:ttl-ms`, `:token`).

use anyhow::{Context, Result};
use history::{Op, Process};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// `lockpick export`: writes the history, then says where (not when it went to stdout).
pub fn export(a: &crate::cli::ExportArgs) -> Result<history::ExitCode> {
    if let Some(written) = export_jepsen(&a.path, a.out.as_deref())? {
        println!("wrote {}", written.display());
    }
    Ok(history::ExitCode::Valid)
}

/// Writes `history.edn` next to the history (or to `out`; `-` is standard output) and returns
/// the file's path (`None` for standard output). Reads the history as `lockpick check` does
/// (`history::read_history`): a history check refuses is refused here in the same words, and
/// the reader's warnings go to stderr.
pub fn export_jepsen(path: &Path, out: Option<&Path>) -> Result<Option<std::path::PathBuf>> {
    let history_path = history::layout::history_path(path);
    let (history, warnings) = history::read_history(&history_path)?;
    for w in warnings {
        eprintln!(
            "warning: {}:{}: {}",
            history_path.display(),
            w.line,
            w.message
        );
    }
    let target = match out {
        Some(o) if o == Path::new("-") => None,
        Some(o) => Some(o.to_path_buf()),
        None => Some(history_path.with_file_name("history.edn")),
    };
    let name = target.as_ref().map_or_else(
        || "standard output".to_string(),
        |t| t.display().to_string(),
    );
    let sink: Box<dyn std::io::Write> = match &target {
        Some(t) => {
            Box::new(std::fs::File::create(t).with_context(|| format!("cannot create {name}"))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = std::io::BufWriter::new(sink);
    let mut line = String::with_capacity(256);
    for op in &history.ops {
        line.clear();
        op_to_edn(op, &mut line);
        line.push('\n');
        w.write_all(line.as_bytes())
            .with_context(|| format!("cannot write {name}"))?;
    }
    w.flush().with_context(|| format!("cannot write {name}"))?;
    Ok(target)
}

/// One op as an EDN map.
pub fn op_to_edn(op: &Op, out: &mut String) {
    let _ = write!(
        out,
        "{{:index {}, :time {}, :type :{}, :process ",
        op.index,
        op.time_ns,
        op.kind.as_str()
    );
    match op.process {
        Process::Client(p) => {
            let _ = write!(out, "{p}");
        }
        Process::Nemesis => out.push_str(":nemesis"),
    }
    out.push_str(", :f ");
    keyword(op.f.as_str(), out);
    out.push_str(", :value {");
    let mut first = true;
    let mut field = |k: &str, v: &Value, out: &mut String| {
        if !first {
            out.push_str(", ");
        }
        first = false;
        keyword(k, out);
        out.push(' ');
        value(v, out);
    };
    if let Some(l) = &op.lock {
        field("lock", &Value::from(l.as_str()), out);
    }
    if let Some(k) = &op.key {
        field("key", &Value::from(k.as_str()), out);
    }
    if let Ok(Value::Object(m)) = serde_json::to_value(&op.value) {
        for (k, v) in &m {
            field(k, v, out);
        }
    }
    out.push_str("}}");
}

/// A keyword from a name: kebab-case, and only characters EDN keywords allow.
fn keyword(name: &str, out: &mut String) {
    out.push(':');
    if name.is_empty() {
        out.push('_');
    }
    for c in name.chars() {
        match c {
            '_' | ' ' => out.push('-'),
            c if c.is_alphanumeric() || "-*+!?<>=.".contains(c) => out.push(c),
            _ => out.push('_'),
        }
    }
}

fn value(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("nil"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                value(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                keyword(k, out);
                out.push(' ');
                value(x, out);
            }
            out.push('}');
        }
    }
}

fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use history::{OpType, OpValue, F};

    #[test]
    fn ops_become_jepsen_maps() {
        let op = Op::new(1, 880_000, Process::Client(3), OpType::Ok, F::Acquire)
            .with_lock("L0")
            .with_value(OpValue::default().with_token(41).with_ttl_ms(2000));
        let mut s = String::new();
        op_to_edn(&op, &mut s);
        assert_eq!(
            s,
            "{:index 1, :time 880000, :type :ok, :process 3, :f :acquire, :value {:lock \"L0\", :token 41, :ttl-ms 2000}}"
        );
        let nem = Op::new(
            8,
            2_000_000,
            Process::Nemesis,
            OpType::Info,
            F::from("start-pause"),
        )
        .with_value(OpValue::default().with_extra("nodes", serde_json::json!(["n1"])));
        s.clear();
        op_to_edn(&nem, &mut s);
        assert_eq!(
            s,
            "{:index 8, :time 2000000, :type :info, :process :nemesis, :f :start-pause, :value {:nodes [\"n1\"]}}"
        );
    }

    #[test]
    fn strings_are_escaped_and_keywords_sanitised() {
        let op = Op::new(0, 0, Process::Client(0), OpType::Fail, F::Acquire)
            .with_lock("a \"quoted\"\nlock\\")
            .with_value(
                OpValue::default()
                    .with_error("held")
                    .with_extra("odd key/é", serde_json::json!(null)),
            );
        let mut s = String::new();
        op_to_edn(&op, &mut s);
        assert!(s.contains(r#":lock "a \"quoted\"\nlock\\""#), "{s}");
        assert!(s.contains(":odd-key_é nil"), "{s}");
    }
}
