//! How a run's clients' time ends: the duration, the op budget, or a signal (Ctrl-C, SIGTERM),
//! after which a second Ctrl-C exits at once. Signals are listened for from the run's start: one
//! that arrives while the service starts is kept until the runner can act on it.

use crate::config::RunConfig;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use workloads::Budget;

/// The first Ctrl-C or SIGTERM since the run started, if any.
pub struct Signals(watch::Receiver<Option<&'static str>>);

impl Signals {
    /// Listens from now on (Ctrl-C no longer kills the process: the run stops, heals, checks).
    /// `run_dir`: the run's directory, named if a second Ctrl-C aborts it.
    pub fn listen(run_dir: &Path) -> Signals {
        let (tx, rx) = watch::channel(None);
        let run_dir = run_dir.to_path_buf();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let mut sigterm = signal(SignalKind::terminate()).ok();
            // One listener for both Ctrl-Cs: a second pressed before the first was handled is
            // kept by it, where a listener made after the first would never see it.
            let mut sigint = signal(SignalKind::interrupt()).ok();
            let term = async {
                match sigterm.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let int = async {
                match sigint.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            };
            let name = tokio::select! {
                () = int => "SIGINT (Ctrl-C)",
                () = term => "SIGTERM",
            };
            let _ = tx.send(Some(name));
            spawn_second_signal_exit(run_dir, sigint);
        });
        Signals(rx)
    }

    /// The signal received so far, if any.
    pub fn received(&self) -> Option<&'static str> {
        *self.0.borrow()
    }

    async fn wait(&mut self) -> &'static str {
        // Ends at the first signal; the listener sends once, then the channel stays as is.
        loop {
            if let Some(s) = *self.0.borrow_and_update() {
                return s;
            }
            if self.0.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A run stopped by a signal before its clients started: nothing was recorded, and the run is
/// `interrupted`, not failed.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

/// Why the clients stopped.
pub struct End {
    /// For the log: `duration reached`, `ops budget spent`, `interrupted (Ctrl-C) ...`.
    pub why: &'static str,
    /// Set when a signal cut the run short: what the run's completeness says.
    pub interrupted: Option<String>,
    /// Set when the run stopped on a proven violation (`--stop-on-violation`): its kind, and
    /// which and when in words.
    pub stopped: Option<(history::ViolationKind, String)>,
}

pub async fn wait_for_end(
    cfg: &RunConfig,
    budget: &Budget,
    start: Instant,
    signals: &mut Signals,
) -> End {
    let end = start + Duration::from_millis(cfg.duration_ms);
    let budget_spent = async {
        // Polled: the budget is an atomic shared with the workers; 20 ms is far below any run.
        while !budget.exhausted() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (why, signal) = tokio::select! {
        _ = tokio::time::sleep_until(end.into()) => ("duration reached", None),
        _ = budget_spent => ("ops budget spent", None),
        s = signals.wait() => ("stopped by a signal: healing and checking what was recorded", Some(s)),
    };
    End {
        why,
        stopped: None,
        interrupted: signal.map(|s| {
            format!(
                "stopped by {s} after {:.1} s of the {:.1} s the clients were to run",
                start.elapsed().as_secs_f64(),
                cfg.duration_ms as f64 / 1000.0
            )
        }),
    }
}

/// After the first signal: a second Ctrl-C exits at once, naming `run_dir`. `sigint` is the
/// listener that may already hold it.
fn spawn_second_signal_exit(run_dir: PathBuf, sigint: Option<tokio::signal::unix::Signal>) {
    eprintln!("lockpick: stopping; press Ctrl-C again to abort at once");
    tokio::spawn(async move {
        let again = match sigint {
            Some(mut s) => s.recv().await.is_some(),
            None => tokio::signal::ctrl_c().await.is_ok(),
        };
        if again {
            eprintln!("{}", aborted(&run_dir));
            std::process::exit(history::ExitCode::Error.code() as i32);
        }
    });
}

/// What a run aborted by a second Ctrl-C says: where its history is and the commands, with
/// its directory, that judge it and undo what it set up (its teardown never ran).
fn aborted(run_dir: &Path) -> String {
    let dir = crate::config::shell_quote(&run_dir.display().to_string());
    format!(
        "lockpick: aborted; the history recorded so far is kept in {dir} (`lockpick report \
         {dir}` judges it and writes the verdict). If the run used network namespaces or ssh \
         hosts, `lockpick cleanup {dir}` removes what is left."
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn an_aborted_run_names_its_directory_in_each_command() {
        // (run directory, how the commands name it: pasted into a shell, it is one word)
        for (dir, word) in [
            (
                "runs/lockd-mutex/20261207T140956.967Z",
                "runs/lockd-mutex/20261207T140956.967Z",
            ),
            ("/tmp/my runs/r1", "'/tmp/my runs/r1'"),
        ] {
            let said = super::aborted(Path::new(dir));
            assert!(!said.contains("RUN_DIR"), "{said}");
            for command in ["lockpick report", "lockpick cleanup"] {
                assert!(said.contains(&format!("`{command} {word}`")), "{said}");
            }
        }
    }
}
