//! How a run's clients' time ends: the duration, the op budget, or a signal (Ctrl-C, SIGTERM),
//! after which a second Ctrl-C exits at once.

use crate::config::RunConfig;
use std::time::{Duration, Instant};
use workloads::Budget;

/// Why the clients stopped.
pub struct End {
    /// For the log: `duration reached`, `ops budget spent`, `interrupted (Ctrl-C) ...`.
    pub why: &'static str,
    /// Set when a signal cut the run short: what the run's completeness says.
    pub interrupted: Option<String>,
}

pub async fn wait_for_end(cfg: &RunConfig, budget: &Budget, start: Instant) -> End {
    let end = start + Duration::from_millis(cfg.duration_ms);
    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let term = async {
        match sigterm.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    let budget_spent = async {
        // Polled: the budget is an atomic shared with the workers; 20 ms is far below any run.
        while !budget.exhausted() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (why, signal) = tokio::select! {
        _ = tokio::time::sleep_until(end.into()) => ("duration reached", None),
        _ = budget_spent => ("ops budget spent", None),
        _ = tokio::signal::ctrl_c() => {
            spawn_second_signal_exit();
            ("interrupted (Ctrl-C): healing and checking what was recorded", Some("SIGINT (Ctrl-C)"))
        }
        _ = term => {
            spawn_second_signal_exit();
            ("terminated (SIGTERM): healing and checking what was recorded", Some("SIGTERM"))
        }
    };
    End {
        why,
        interrupted: signal.map(|s| {
            format!(
                "stopped by {s} after {:.1} s of the {:.1} s the clients were to run",
                start.elapsed().as_secs_f64(),
                cfg.duration_ms as f64 / 1000.0
            )
        }),
    }
}
fn spawn_second_signal_exit() {
    eprintln!("lockpick: stopping; press Ctrl-C again to abort at once");
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "lockpick: aborted; the history recorded so far is kept. If the run used \
                 network namespaces, `lockpick cleanup` removes what is left."
            );
            std::process::exit(history::ExitCode::Error.code() as i32);
        }
    });
}
