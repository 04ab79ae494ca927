//! One bounded external command: the `ip`/`iptables`/`tc` calls of the namespace runtime and
//! the `ssh` calls of the ssh runtime. The command never runs longer than its timeout (it is
//! killed, by its own pid, and reaped), its output is drained on threads so a chatty command
//! cannot block on a full pipe, and a failure carries the command line and its stderr.

use std::fs::File;
use std::io::{self, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Most bytes kept of a command's stdout or stderr: far beyond what ip, iptables and tc print,
/// and room for a node's log fetched over ssh (which fetches at most its last 32 MiB).
pub const OUTPUT_BYTES_MAX: u64 = 64 << 20;

/// How a bounded command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        /// The exit code, if it exited (255 is ssh's own failure).
        code: Option<i32>,
        status: String,
        stderr: String,
    },
    #[error("`{command}` did not finish within {timeout_ms} ms; killed it")]
    Timeout { command: String, timeout_ms: u128 },
}

/// Runs `argv` (its first element the program) with `stdin` (a file, or nothing), waits at
/// most `timeout`, and returns its stdout. `shown` is the command line errors print (a
/// caller may shorten a long script).
pub fn run(
    argv: &[String],
    stdin: Option<File>,
    timeout: Duration,
    shown: &str,
) -> Result<String, CommandError> {
    let command = shown.to_string();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(stdin.map_or_else(Stdio::null, Stdio::from))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CommandError::Spawn {
            command: command.clone(),
            source,
        })?;
    let (tx, rx) = mpsc::channel::<(bool, String)>();
    for (is_stdout, pipe) in [
        (
            true,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            false,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(OUTPUT_BYTES_MAX).read_to_end(&mut bytes);
            }
            let _ = tx.send((is_stdout, String::from_utf8_lossy(&bytes).into_owned()));
        });
    }
    drop(tx);
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Ok(None) => {
                // Our own child, not yet reaped: its pid is still ours to signal.
                let _ = child.kill();
                let _ = child.wait();
                return Err(CommandError::Timeout {
                    command,
                    timeout_ms: timeout.as_millis(),
                });
            }
            Err(source) => return Err(CommandError::Spawn { command, source }),
        }
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    for _ in 0..2 {
        // A grandchild that kept a pipe open (a daemon) must not hold us: a second at most.
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok((true, text)) => stdout = text,
            Ok((false, text)) => stderr = text,
            Err(_) => break,
        }
    }
    if status.success() {
        Ok(stdout)
    } else {
        Err(CommandError::Failed {
            command,
            code: status.code(),
            status: status.to_string(),
            stderr: stderr.trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn failures_name_the_command_and_stderr_and_timeouts_kill() {
        let err = run(
            &argv(&["sh", "-c", "echo boom >&2; exit 3"]),
            None,
            Duration::from_secs(5),
            "boom-cmd",
        )
        .unwrap_err();
        assert!(
            matches!(err, CommandError::Failed { code: Some(3), .. }),
            "{err}"
        );
        assert!(err.to_string().contains("boom-cmd") && err.to_string().contains("boom"));
        let started = Instant::now();
        let err = run(
            &argv(&["sleep", "5"]),
            None,
            Duration::from_millis(100),
            "sleep 5",
        )
        .unwrap_err();
        assert!(matches!(err, CommandError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
        let out = run(&argv(&["echo", "hi"]), None, Duration::from_secs(5), "echo").unwrap();
        assert_eq!(out, "hi\n");
    }
}
