//! `kill`: SIGKILL the nodes, wait out the fault's length (the downtime), then restart each
//! with the same command and data dir (up to [`RESTART_ATTEMPTS`] times). A rolling kill
//! (`then_nodes`) does the same to its second wave once the first is back; it is one fault,
//! `kill` to `restart`, whose events name both waves.

use history::FaultFamily;
use super::{Ctx, Healer};
use crate::node::Node;
use crate::schedule::file::{at, needs_nodes, node_id, node_index, RawFault};
use crate::schedule::{Draws, Drawn, FaultKind, Payload, PlannedFault, ScheduleError};
use rand::Rng;
use crate::Error;
use history::OpValue;
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

/// A kill's second wave (empty: none): these nodes are killed once the fault's `nodes` are
/// back, for the same downtime. A rolling restart, each wave a minority, harmless alone to a
/// service whose grants live on a majority: together they can leave a grant on no node that
/// remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub then_nodes: Vec<usize>,
}

/// It kills the service's processes.
pub const SERVER_SIDE: bool = true;
pub const NEEDS_NETNS: bool = false;

pub const START: &str = FaultFamily::KILL.opens;
pub const STOP: &str = FaultFamily::KILL.closes;

/// A kill of the picked nodes in one wave: a downtime, then the restart waits out the lease
/// itself.
pub(crate) fn draw(d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
    let ttl = d.ttl_ms;
    Drawn {
        length_ms: d.rng.random_range(100..=ttl.max(101)),
        nodes: picked,
        payload: Payload::Kill(Plan::default()),
        // A correct service refuses grants after a restart until every lease it may have
        // granted has lapsed (up to about 2 ttl with rounding); a kill inside that window
        // would keep the lock unavailable all run and test nothing.
        recovery_ms: ttl * 2,
    }
}

/// `then_nodes`, the second wave.
pub(crate) fn own_key(raw: &RawFault) -> Option<&'static str> {
    (!raw.then_nodes.is_empty()).then_some("then_nodes")
}

/// `then_nodes`: node ids apart from `nodes` and from each other.
pub(crate) fn read(id: &str, raw: &RawFault, nodes: &[usize]) -> Result<Plan, ScheduleError> {
    let mut then_nodes = Vec::with_capacity(raw.then_nodes.len());
    for n in &raw.then_nodes {
        let i = node_index(id, n)?;
        if nodes.contains(&i) || then_nodes.contains(&i) {
            return Err(at(
                id,
                format!("node {n} is named twice (`then_nodes` is a second wave, apart from `nodes`)"),
            ));
        }
        then_nodes.push(i);
    }
    then_nodes.sort_unstable();
    needs_nodes(id, FaultKind::Kill, nodes)?;
    Ok(Plan { then_nodes })
}

pub(crate) fn write(plan: &Plan, raw: &mut RawFault) {
    raw.then_nodes = plan.then_nodes.iter().map(|&i| node_id(i)).collect();
}

/// The second wave.
pub(crate) fn nodes_named(plan: &Plan) -> Vec<usize> {
    plan.then_nodes.clone()
}

pub(crate) fn renumber(plan: &mut Plan, to: &dyn Fn(usize) -> usize) {
    for i in &mut plan.then_nodes {
        *i = to(*i);
    }
}

/// Restart attempts after a kill before the run gives up on the node.
pub const RESTART_ATTEMPTS: u32 = 3;

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    ctx.record(START, with_waves(ctx, fault, ctx.value(fault)))?;
    let mut stopped = false;
    for wave in [&fault.nodes[..], fault.then_nodes()] {
        // A run told to stop during the first wave brings it back and kills no more.
        if wave.is_empty() || stopped {
            continue;
        }
        stopped = down_and_up(ctx, fault, wave).await?;
    }
    let value = OpValue::default()
        .with_extra("nodes", json!(ctx.names(&fault.nodes)))
        .with_extra("roles", json!(ctx.roles(&fault.nodes)))
        .with_extra("fault", json!(fault.id));
    ctx.record(STOP, with_waves(ctx, fault, value))
}

/// A rolling kill's events also name its second wave (`then_nodes`), by which coverage tells
/// it from a kill of all its nodes at once.
fn with_waves<W: Write + Send>(ctx: &Ctx<W>, fault: &PlannedFault, value: OpValue) -> OpValue {
    match fault.then_nodes().is_empty() {
        true => value,
        false => value.with_extra("then_nodes", json!(ctx.names(fault.then_nodes()))),
    }
}

/// Kills `wave`, waits out the downtime (or until the stop signal: then true), restarts each
/// node of it.
async fn down_and_up<W: Write + Send>(
    ctx: &mut Ctx<W>,
    fault: &PlannedFault,
    wave: &[usize],
) -> Result<bool, Error> {
    for &i in wave {
        ctx.nodes[i].lock().await.kill().await?;
    }
    let label = format!("{} {}", fault.kind(), ctx.names(wave).join(","));
    ctx.set_active(Some(label));
    let stopped = ctx
        .sleep_or_stop(Instant::now() + Duration::from_millis(fault.length_ms))
        .await;
    for &i in wave {
        restart(&ctx.nodes[i], &ctx.ids[i], ctx.startup).await?;
        let started = ctx.nodes[i].lock().await.started_at();
        if let (Some(clock), Some(at)) = (ctx.clocks[i].as_mut(), started) {
            // A new process: libfaketime counts rates from its start (a control page needs
            // nothing: the restart patched the new process to read it).
            clock.rebase(at)?;
        }
    }
    Ok(stopped)
}

/// Nothing is left: every kill ends with its restart, also when the run stops.
pub async fn heal(_h: &Healer<'_>) -> Result<(), Error> {
    Ok(())
}

async fn restart(node: &Node, id: &str, startup: Duration) -> Result<(), Error> {
    let mut last = None;
    for attempt in 1..=RESTART_ATTEMPTS {
        match node.lock().await.restart(startup).await {
            Ok(()) => return Ok(()),
            Err(e) => {
                tracing::warn!(attempt, error = %e, "restart failed");
                last = Some(e);
            }
        }
    }
    Err(Error::msg(format!(
        "node {id} did not come back after {RESTART_ATTEMPTS} restarts: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    )))
}
