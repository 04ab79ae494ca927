//! The live status line: elapsed and remaining time, ops, outcomes, active faults, and the
//! violations found so far. A spinner line on a terminal; plain lines every few seconds
//! otherwise (CI logs).

use crate::live::LiveVerdict;
use crate::runner::{Live, Progress};
use history::Recorder;
use indicatif::{ProgressBar, ProgressStyle};
use nemesis::fault::ActiveFaults;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The phase while the clients run.
const RUNNING: &str = "running";

pub struct Status {
    task: tokio::task::JoinHandle<()>,
    phase: Arc<Mutex<String>>,
    bar: Option<ProgressBar>,
}

impl Status {
    pub fn start<W: std::io::Write + Send + 'static>(
        recorder: Arc<Recorder<W>>,
        active: ActiveFaults,
        duration: Duration,
        verdict: watch::Receiver<LiveVerdict>,
    ) -> Status {
        let tty = std::io::stdout().is_terminal();
        let bar = tty.then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        let phase = Arc::new(Mutex::new(RUNNING.to_string()));
        let task = {
            let bar = bar.clone();
            let phase = phase.clone();
            tokio::spawn(async move {
                let start = recorder.start();
                let every = if tty {
                    Duration::from_secs(1)
                } else {
                    Duration::from_secs(5)
                };
                // Ends when the runner aborts the task; each pass sleeps `every`.
                loop {
                    tokio::time::sleep(every).await;
                    let c = recorder.counts();
                    let elapsed = start.elapsed();
                    let faults = active.lock().map(|a| a.join(", ")).unwrap_or_default();
                    let phase = phase.lock().map(|p| p.clone()).unwrap_or_default();
                    // Time left means something only while the clients run.
                    let left = if phase == RUNNING {
                        format!(
                            ", {:>5.1}s left",
                            duration.saturating_sub(elapsed).as_secs_f64()
                        )
                    } else {
                        String::new()
                    };
                    let line = format!(
                        "{phase} {:>5.1}s elapsed{left} | ops {} ok {} fail {} info {} | faults: {} | violations so far: {}",
                        elapsed.as_secs_f64(),
                        c.invoked,
                        c.ok,
                        c.fail,
                        c.info,
                        if faults.is_empty() { "none" } else { &faults },
                        so_far(&verdict.borrow(), elapsed),
                    );
                    match &bar {
                        Some(b) => b.set_message(line),
                        None => println!("{line}"),
                    }
                }
            })
        };
        Status { task, phase, bar }
    }

    pub fn set_phase(&self, p: &str) {
        if let Ok(mut ph) = self.phase.lock() {
            *ph = p.to_string();
        }
    }

    pub fn finish(self) {
        self.task.abort();
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

/// The status line as a run's [`Progress`]: shown from the clients' start until the service
/// is left alone.
#[derive(Default)]
pub struct StatusLine(Mutex<Option<Status>>);

impl StatusLine {
    fn status(&self) -> std::sync::MutexGuard<'_, Option<Status>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Progress for StatusLine {
    fn started(&self, live: Live) {
        *self.status() = Some(Status::start(
            live.recorder,
            live.active,
            live.duration,
            live.verdict,
        ));
    }
    fn phase(&self, phase: &str) {
        if let Some(s) = self.status().as_ref() {
            s.set_phase(phase);
        }
    }
    fn finished(&self) {
        if let Some(s) = self.status().take() {
            s.finish();
        }
    }
}

/// `2 (first: double-grant proven at 1.23 s ...)`, `0`, or `not checked yet`, with how far
/// behind the run the check is once that is more than a second, and past the whole-prefix
/// checks' size limit, that only the streaming rules run.
fn so_far(v: &LiveVerdict, elapsed: Duration) -> String {
    let behind_s = elapsed.as_secs_f64() - v.checked_through_ns as f64 / 1e9;
    let count = count_so_far(v);
    let count = match v.whole_stopped_at_events {
        Some(events) => format!("{count} (past {events} events the streaming rules only)"),
        None => count,
    };
    if v.violations.is_some() && behind_s >= 1.0 {
        format!("{count} (as of {behind_s:.1} s ago)")
    } else {
        count
    }
}

fn count_so_far(v: &LiveVerdict) -> String {
    match (&v.violations, &v.first_safety) {
        (None, None) => "not checked yet".into(),
        (n, Some(p)) => format!(
            "{} (first: {})",
            n.map_or("?".into(), |n| n.to_string()),
            p.headline()
        ),
        (Some(n), None) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::Proven;

    fn verdict(violations: Option<usize>, through_s: f64, stopped: Option<u64>) -> LiveVerdict {
        LiveVerdict {
            violations,
            first_safety: None,
            checked_events: 100,
            checked_through_ns: (through_s * 1e9) as u64,
            whole_stopped_at_events: stopped,
        }
    }

    /// (verdict, seconds into the run, what the status line says of the violations so far)
    #[test]
    fn the_status_line_says_how_old_the_verdict_is_and_what_runs() {
        let mut proven = verdict(Some(2), 9.5, None);
        proven.first_safety = Some(Proven {
            violation: history::Violation {
                kind: history::ViolationKind::DoubleGrant,
                lock: Some("L0".into()),
                ops: vec![5, 6],
                window_ns: [20_000_000, 250_000_000],
                nemesis: Vec::new(),
                explanation: String::new(),
                cycle: Vec::new(),
            },
            proven_at_s: 0.27,
        });
        let cases: Vec<(LiveVerdict, f64, &str)> = vec![
            (verdict(None, 0.0, None), 0.5, "not checked yet"),
            (verdict(Some(0), 9.5, None), 10.0, "0"),
            (verdict(Some(0), 7.0, None), 10.0, "0 (as of 3.0 s ago)"),
            (
                verdict(Some(1), 9.8, Some(4_000_000)),
                10.0,
                "1 (past 4000000 events the streaming rules only)",
            ),
            (
                proven,
                10.0,
                "2 (first: double-grant on L0 proven at 0.27 s (ops 5, 6, from 0.020 s to 0.250 s))",
            ),
        ];
        for (v, at_s, want) in cases {
            assert_eq!(so_far(&v, Duration::from_secs_f64(at_s)), want);
        }
    }
}
