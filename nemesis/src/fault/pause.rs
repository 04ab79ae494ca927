//! `pause`: SIGSTOP the nodes' process groups (through their node control) for the fault's
//! length, then SIGCONT.

use history::FaultFamily;
use super::{Ctx, Healer};
use crate::schedule::file::{needs_nodes, RawFault};
use crate::schedule::{Draws, Drawn, FaultKind, Payload, PlannedFault, ScheduleError};
use rand::Rng;
use crate::Error;
use std::io::Write;
use std::time::Duration;

/// A pause carries nothing beyond its nodes and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Plan;

/// It stops the service's processes.
pub const SERVER_SIDE: bool = true;
pub const NEEDS_NETNS: bool = false;

pub const START: &str = FaultFamily::PAUSE.opens;
pub const STOP: &str = FaultFamily::PAUSE.closes;

/// A pause of the picked nodes that straddles the lease: some end before it lapses, most
/// after.
pub(crate) fn draw(d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
    let ttl = d.ttl_ms;
    Drawn {
        length_ms: d.rng.random_range(ttl / 2..=ttl * 2),
        nodes: picked,
        payload: Payload::Pause(Plan),
        recovery_ms: 0,
    }
}

/// A pause has no keys of its own in `schedule.json`.
pub(crate) fn own_key(_raw: &RawFault) -> Option<&'static str> {
    None
}

pub(crate) fn read(id: &str, _raw: &RawFault, nodes: &[usize]) -> Result<Plan, ScheduleError> {
    needs_nodes(id, FaultKind::Pause, nodes)?;
    Ok(Plan)
}

pub(crate) fn write(_plan: &Plan, _raw: &mut RawFault) {}

/// A pause names no nodes beyond its own.
pub(crate) fn nodes_named(_plan: &Plan) -> Vec<usize> {
    Vec::new()
}

pub(crate) fn renumber(_plan: &mut Plan, _to: &dyn Fn(usize) -> usize) {}

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    ctx.record(START, ctx.value(fault))?;
    for &i in &fault.nodes {
        ctx.nodes[i].lock().await.pause().await?;
    }
    let label = format!("{} {}", fault.kind(), ctx.names(&fault.nodes).join(","));
    ctx.set_active(Some(label));
    // Heal on stop too: the fault's end always runs.
    ctx.hold(Duration::from_millis(fault.length_ms)).await;
    for &i in &fault.nodes {
        ctx.nodes[i].lock().await.resume().await?;
    }
    ctx.record(STOP, ctx.value(fault))
}

/// Whatever the nemesis left paused runs again before the final reads.
pub async fn heal(h: &Healer<'_>) -> Result<(), Error> {
    for node in h.nodes {
        let n = node.lock().await;
        if n.is_paused() {
            n.resume().await?;
        }
    }
    Ok(())
}
