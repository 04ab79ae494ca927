//! The plan a run carries out: the schedule replayed (`--schedule`) or drawn from the seed
//! before the first fault, written to the run directory; and the client workers' stall board
//! as the nemesis's client-pause family sees it.

use crate::config::RunConfig;
use anyhow::{Context, Result};
use nemesis::fault::{ClientStalls, StallRequest};
use nemesis::schedule::{plan, Schedule, ScheduleConfig, SCHEDULE_FILE};
use nemesis::schedule::{ClientFault, StallAim, WakeOp};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use workloads::{PauseBoard, Stall, Wake};

/// The run's schedule, on disk before its first fault: a run killed mid-way can still be
/// replayed. `nodes` and `primary` are the lock service's as deployed.
pub fn schedule(cfg: &RunConfig, nodes: usize, primary: usize, run_dir: &Path) -> Result<Schedule> {
    let schedule = match &cfg.schedule {
        Some(s) if s.by_role && s.primary != primary && nodes > 1 => {
            tracing::info!(
                "the schedule was drawn for another primary: the faults it planned for n{} go to \
                 n{}, the primary now, and the other way round (schedule.json says where each went)",
                s.primary + 1,
                primary + 1
            );
            s.with_primary(primary)
        }
        Some(s) => {
            if s.primary != primary && nodes > 1 {
                tracing::warn!(
                    "the schedule was drawn with n{} the primary, and n{} is now: its faults \
                     hit the nodes it names (`\"by_role\": true` in it would move them)",
                    s.primary + 1,
                    primary + 1
                );
            }
            s.clone()
        }
        None => plan(&ScheduleConfig {
            seed: cfg.seed,
            faults: cfg.faults.clone(),
            interval_ms: cfg.nemesis_interval_ms,
            duration_ms: cfg.duration_ms,
            // Stalls and pauses are sized to outlast the longest lease a client may hold.
            ttl_ms: cfg.lease_max_ms(),
            clock_modes: cfg.clock_modes.clone(),
            // A mutex holder wakes only into a renew or a release: a stall drawn to wake into
            // a read or a write would be asked of the coverage and never performed.
            client_faults: match cfg.kind() {
                workloads::WorkloadKind::Mutex => cfg.client_shapes.without_data(),
                _ => cfg.client_shapes.clone(),
            },
            topologies: cfg.topologies.clone(),
            nodes,
            primary,
            targets: cfg.nemesis_targets,
            clock_bump_ms: cfg.clock_bump_ms,
            clock_rate: cfg.clock_rate,
        }),
    };
    let schedule_path = run_dir.join(SCHEDULE_FILE);
    std::fs::write(&schedule_path, schedule.to_json())
        .with_context(|| format!("cannot write {}", schedule_path.display()))?;
    tracing::info!(
        faults = schedule.faults.len(),
        replayed = cfg.schedule.is_some(),
        "fault schedule written"
    );
    Ok(schedule)
}

/// The client workers' [`PauseBoard`], where the client-pause family posts its stalls.
pub struct Stalls(pub Arc<PauseBoard>);

impl ClientStalls for Stalls {
    fn request(&self, s: StallRequest, deadline: Instant) {
        let (aim, wake) = stall_shape(s.shape);
        let stall = Stall {
            length: s.length,
            fault: Some(s.fault),
            ops: s.ops,
            aim,
            wake,
        };
        self.0.request_stall(stall, deadline);
    }
    fn cancel(&self) {
        self.0.cancel();
    }
}

/// The plan's client-pause shape as the workers take it (a schedule from before shapes: the
/// whole length, waking into the workload's next op).
fn stall_shape(shape: Option<ClientFault>) -> (workloads::StallAim, Option<Wake>) {
    let Some(c) = shape else {
        return (workloads::StallAim::Long, None);
    };
    let after = Duration::from_millis(c.after_ms);
    let aim = match c.aim {
        StallAim::Boundary => workloads::StallAim::Boundary { after },
        StallAim::NextGrant => workloads::StallAim::NextGrant { after },
        StallAim::Long => workloads::StallAim::Long,
        StallAim::Waiter => workloads::StallAim::Waiter,
    };
    let wake = c.wake.map(|w| match w {
        WakeOp::Renew => Wake::Renew,
        WakeOp::Write => Wake::Write,
        WakeOp::Release => Wake::Release,
        WakeOp::Read => Wake::Read,
    });
    (aim, wake)
}
