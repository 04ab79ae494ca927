//! `netem`: delay, drop, duplicate and reorder the planned nodes' packets with the runtime's
//! network faults, hold, clear.

use super::{Ctx, Healer};
use crate::netns::NetemSpec;
use crate::schedule::{PlannedFault, NETEM};
use crate::Error;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

/// A netem fault carries what it does to packets.
pub type Plan = NetemSpec;

pub const START: &str = "start-netem";
pub const STOP: &str = "stop-netem";

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
