//! `netem`: delay, drop, duplicate and reorder the planned nodes' packets with the runtime's
//! network faults, hold, clear.

use history::FaultFamily;
use super::{Ctx, Healer};
use crate::netns::NetemSpec;
use crate::schedule::file::{at, needs_nodes, RawFault};
use crate::schedule::{Draws, Drawn, FaultKind, Payload, PlannedFault, ScheduleError};
use rand::Rng;
use crate::Error;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

/// A netem fault carries what it does to packets.
pub type Plan = NetemSpec;

/// What every netem fault does to the targeted nodes' packets.
pub const NETEM: NetemSpec = NetemSpec {
    delay_ms: 50,
    jitter_ms: 20,
    loss_pct: 5.0,
    duplicate_pct: 1.0,
    reorder_pct: 5.0,
};

/// It shapes the traffic of the nodes' namespaces.
pub const SERVER_SIDE: bool = true;
pub const NEEDS_NETNS: bool = true;

pub const START: &str = FaultFamily::NETEM.opens;
pub const STOP: &str = FaultFamily::NETEM.closes;

/// The planner's [`NETEM`] on the picked nodes, straddling the lease like a pause.
pub(crate) fn draw(d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
    let ttl = d.ttl_ms;
    Drawn {
        length_ms: d.rng.random_range(ttl..=ttl * 3),
        nodes: picked,
        payload: Payload::Netem(NETEM),
        recovery_ms: 0,
    }
}

/// `netem`, the spec.
pub(crate) fn own_key(raw: &RawFault) -> Option<&'static str> {
    raw.netem.is_some().then_some("netem")
}

/// `netem` (default: the planner's [`NETEM`]), which `tc` must take.
pub(crate) fn read(id: &str, raw: &RawFault, nodes: &[usize]) -> Result<Plan, ScheduleError> {
    needs_nodes(id, FaultKind::Netem, nodes)?;
    let spec = raw.netem.clone().unwrap_or(NETEM);
    spec.tc_args().map_err(|e| at(id, e.to_string()))?;
    Ok(spec)
}

pub(crate) fn write(plan: &Plan, raw: &mut RawFault) {
    raw.netem = Some(plan.clone());
}

/// A netem spec names no nodes beyond its own.
pub(crate) fn nodes_named(_plan: &Plan) -> Vec<usize> {
    Vec::new()
}

pub(crate) fn renumber(_plan: &mut Plan, _to: &dyn Fn(usize) -> usize) {}

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    let network = ctx
        .network
        .clone()
        .ok_or_else(|| Error::msg("netem needs --runtime netns"))?;
    let spec = fault.netem().cloned().unwrap_or(NETEM);
    let v = ctx.value(fault).with_extra(
        "netem",
        json!({"delay_ms": spec.delay_ms, "jitter_ms": spec.jitter_ms,
               "loss_pct": spec.loss_pct, "duplicate_pct": spec.duplicate_pct,
               "reorder_pct": spec.reorder_pct}),
    );
    ctx.record(START, v.clone())?;
    tokio::task::block_in_place(|| network.netem(&fault.nodes, &spec))?;
    let label = format!("{} {}", fault.kind(), ctx.names(&fault.nodes).join(","));
    ctx.set_active(Some(label));
    ctx.hold(Duration::from_millis(fault.length_ms)).await;
    tokio::task::block_in_place(|| network.clear_netem(&fault.nodes))?;
    ctx.record(STOP, v)
}

/// Nothing is left: every netem fault ends with its clear, also when the run stops.
pub async fn heal(_h: &Healer<'_>) -> Result<(), Error> {
    Ok(())
}
