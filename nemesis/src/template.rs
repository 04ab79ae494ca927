//! Command templates: how a node is started, and the placeholders filled in for it.

use std::path::PathBuf;

use crate::NodeError;

/// How a node is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeCommand {
    /// Program and arguments, run directly (no shell).
    Argv(Vec<String>),
    /// A shell command line, run with `sh -c`. A single simple command is prefixed with
    /// `exec ` (see [`NodeCommand::shell_line`]) so the shell is replaced by the service.
    Shell(String),
}

impl NodeCommand {
    /// The line given to `sh -c` for a [`NodeCommand::Shell`].
    ///
    /// A single simple command gets `exec ` in front so that the service itself, not a
    /// waiting shell, is the process we started: then SIGTERM on stop reaches a process that
    /// handles it, the pid we report (and look up in `/proc`) is the service's, and
    /// `PR_SET_PDEATHSIG` (which is kept across `execve` but not inherited by a fork) stays
    /// on the service. A line with control operators (`;`, `&&`, `|`, `&`, newlines,
    /// subshells), a leading variable assignment or a reserved word is left alone: `exec`
    /// would cut it short. Such a shell stays the group leader; pause/kill/stop still reach
    /// the whole group, but only the shell carries PDEATHSIG.
    pub fn shell_line(line: &str) -> String {
        if is_single_simple_command(line) {
            format!("exec {}", line.trim_start())
        } else {
            line.to_string()
        }
    }

    /// A printable form for logs and error messages.
    pub fn display(&self) -> String {
        match self {
            NodeCommand::Argv(argv) => argv.join(" "),
            NodeCommand::Shell(line) => format!("sh -c {line:?}"),
        }
    }
}

/// Placeholder values for a command template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholders {
    pub id: String,
    pub host: String,
    pub port: u16,
    pub data_dir: PathBuf,
    /// The other nodes, in whatever form the service expects (e.g. `host:port,host:port`).
    pub peers: String,
    /// Further named values a target kind defines (e.g. etcd's `{peer_port}` and
    /// `{initial_cluster}`), in the same `{name}` syntax.
    pub extra: Vec<(String, String)>,
}

/// Fills `{id} {host} {port} {data_dir} {peers}` into `template`. `{{` and `}}` stand for
/// literal braces (so a shell `${VAR}` is written `${{VAR}}`). An unknown `{name}`, an
/// unclosed `{` or a lone `}` is an error naming it.
///
/// Values are inserted verbatim, not shell-quoted: a `data_dir` with spaces needs quotes
/// around `{data_dir}` in a shell template.
pub fn substitute(template: &str, p: &Placeholders) -> Result<String, NodeError> {
    let malformed = |reason: String| NodeError::MalformedTemplate {
        template: template.to_string(),
        reason,
    };
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    // Every iteration consumes at least one character, so this ends.
    while let Some(c) = rest.chars().next() {
        match c {
            '{' if rest.starts_with("{{") => {
                out.push('{');
                rest = &rest[2..];
            }
            '{' => {
                let Some(end) = rest.find('}') else {
                    return Err(malformed(format!(
                        "unclosed `{{` at byte {}",
                        template.len() - rest.len()
                    )));
                };
                let name = &rest[1..end];
                match name {
                    "id" => out.push_str(&p.id),
                    "host" => out.push_str(&p.host),
                    "port" => out.push_str(&p.port.to_string()),
                    "data_dir" => out.push_str(&p.data_dir.to_string_lossy()),
                    "peers" => out.push_str(&p.peers),
                    other if p.extra.iter().any(|(k, _)| k == other) => {
                        let (_, v) = p.extra.iter().find(|(k, _)| k == other).expect("checked");
                        out.push_str(v);
                    }
                    _ => {
                        return Err(NodeError::UnknownPlaceholder {
                            name: name.to_string(),
                            template: template.to_string(),
                        })
                    }
                }
                rest = &rest[end + 1..];
            }
            '}' if rest.starts_with("}}") => {
                out.push('}');
                rest = &rest[2..];
            }
            '}' => {
                return Err(malformed(format!(
                    "lone `}}` at byte {} (write `}}}}` for a literal brace)",
                    template.len() - rest.len()
                )));
            }
            _ => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    Ok(out)
}

const RESERVED_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "in", "function", "select", "time", "{", "}", "!", "[[", "]]", "exec",
];

/// Whether `exec <line>` runs the same thing as `<line>`: one simple command, no control
/// operators outside quotes. Errs towards "no" (the shell then merely stays around).
fn is_single_simple_command(line: &str) -> bool {
    let line = line.trim();
    let Some(first) = line.split_whitespace().next() else {
        return false;
    };
    if RESERVED_WORDS.contains(&first) || is_assignment(first) {
        return false;
    }
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut quote = Quote::None;
    // Depth inside `$( ... )`: a command substitution runs before `exec`, so what it
    // contains does not matter.
    let mut substitution = 0usize;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev = if i > 0 { Some(chars[i - 1]) } else { None };
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double => match c {
                '\\' => i += 1,
                '"' => quote = Quote::None,
                _ => {}
            },
            Quote::None => match c {
                '\\' => i += 1,
                '\'' => quote = Quote::Single,
                '"' => quote = Quote::Double,
                '(' if prev == Some('$') || substitution > 0 => substitution += 1,
                ')' if substitution > 0 => substitution -= 1,
                _ if substitution > 0 => {}
                ';' | '|' | '(' | ')' | '\n' => return false,
                '&' => {
                    // `2>&1`, `<&0` and `&>` are redirections, not control operators.
                    let redirect =
                        matches!(prev, Some('>') | Some('<')) || chars.get(i + 1) == Some(&'>');
                    if !redirect {
                        return false;
                    }
                }
                // A comment runs to the end of the line, and newlines were rejected above.
                '#' if prev.is_none_or(char::is_whitespace) => return true,
                _ => {}
            },
        }
        i += 1;
    }
    // An unterminated quote: leave the line alone and let the shell report it.
    quote == Quote::None && substitution == 0
}

/// `NAME=value` as the first word is an assignment: `exec NAME=value cmd` would try to run
/// a program called `NAME=value`.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholders() -> Placeholders {
        Placeholders {
            id: "n1".into(),
            host: "127.0.0.1".into(),
            port: 7001,
            data_dir: PathBuf::from("/runs/t/nodes/n1/data"),
            peers: "127.0.0.1:7002,127.0.0.1:7003".into(),
            extra: vec![("peer_port".into(), "7101".into())],
        }
    }

    #[test]
    fn substitutes_extra_values() {
        assert_eq!(
            substitute("--peer {peer_port}", &placeholders()).unwrap(),
            "--peer 7101"
        );
        assert!(substitute("{initial_cluster}", &placeholders()).is_err());
    }

    #[test]
    fn substitutes_every_placeholder() {
        let got = substitute(
            "lockd --id {id} --listen {host}:{port} --data-dir {data_dir} --peers {peers} {id}",
            &placeholders(),
        )
        .unwrap();
        assert_eq!(
            got,
            "lockd --id n1 --listen 127.0.0.1:7001 --data-dir /runs/t/nodes/n1/data \
             --peers 127.0.0.1:7002,127.0.0.1:7003 n1"
        );
    }

    #[test]
    fn unknown_placeholder_is_named() {
        let err = substitute("svc --x {nope} {port}", &placeholders()).unwrap_err();
        assert!(matches!(&err, NodeError::UnknownPlaceholder { name, .. } if name == "nope"));
        let msg = err.to_string();
        assert!(msg.contains("{nope}"), "{msg}");
        assert!(msg.contains("svc --x {nope} {port}"), "{msg}");
    }

    #[test]
    fn doubled_braces_escape() {
        let got = substitute("echo ${{HOME}} {{port}} {port} }}{{", &placeholders()).unwrap();
        assert_eq!(got, "echo ${HOME} {port} 7001 }{");
    }

    #[test]
    fn malformed_braces_are_errors() {
        let unclosed = substitute("svc {port", &placeholders()).unwrap_err();
        assert!(unclosed.to_string().contains("unclosed `{`"), "{unclosed}");
        let lone = substitute("svc port}", &placeholders()).unwrap_err();
        assert!(lone.to_string().contains("lone `}`"), "{lone}");
        let empty = substitute("svc {}", &placeholders()).unwrap_err();
        assert!(matches!(empty, NodeError::UnknownPlaceholder { name, .. } if name.is_empty()));
    }

    #[test]
    fn non_ascii_text_passes_through() {
        let got = substitute("é {id} ü", &placeholders()).unwrap();
        assert_eq!(got, "é n1 ü");
    }

    #[test]
    fn exec_prefix_only_for_single_commands() {
        let exec = |l: &str| NodeCommand::shell_line(l).starts_with("exec ");
        assert!(exec("python3 server.py 127.0.0.1 7001"));
        assert!(exec("  lockd --data-dir '/a b' 2>&1 >log"));
        assert!(exec("svc --name 'a;b' \"c|d\" e\\;f"));
        assert!(exec("svc $(cat port) # comment; with ; stuff"));
        assert!(!exec("echo hi >&2; exit 1"));
        assert!(!exec("a && b"));
        assert!(!exec("a || b"));
        assert!(!exec("a | b"));
        assert!(!exec("a &"));
        assert!(!exec("(a)"));
        assert!(!exec("a\nb"));
        assert!(!exec("FOO=1 svc"));
        assert!(!exec("if true; then svc; fi"));
        assert!(!exec("svc 'unterminated"));
        assert!(exec("svc --n $((1 + 2)) --x \"$(a; b | c)\""));
        assert!(!exec("svc $(unclosed"));
        assert!(!exec("   "));
        assert_eq!(NodeCommand::shell_line("exec svc"), "exec svc");
    }
}
