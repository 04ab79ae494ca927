//! `partition`: cut the planned links between nodes (and between the clients and some nodes)
//! with the runtime's network faults, hold, heal.

use super::{Ctx, Healer};
use crate::schedule::{PartitionFault, PlannedFault};
use crate::Error;
use history::OpValue;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

/// A partition carries its cut.
pub type Plan = PartitionFault;

pub const START: &str = "start-partition";
pub const STOP: &str = "stop-partition";

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    let network = ctx
        .network
        .clone()
        .ok_or_else(|| Error::msg("partitions need --runtime netns"))?;
    let p = fault
        .partition()
        .ok_or_else(|| Error::msg(format!("fault {}: a partition without a cut", fault.id)))?;
    let links: Vec<[&str; 2]> = p
        .cut
        .iter()
        .map(|&(a, b)| [ctx.ids[a].as_str(), ctx.ids[b].as_str()])
        .collect();
    let v = OpValue::default()
        .with_extra("topology", json!(p.topology.as_str()))
        .with_extra("cut", json!(links))
        .with_extra("clients_cut_from", json!(ctx.names(&p.clients_cut_from)))
        .with_extra("length_ms", json!(fault.length_ms))
        .with_extra("fault", json!(fault.id));
    ctx.record(START, v.clone())?;
    tokio::task::block_in_place(|| {
        network.partition(&p.cut)?;
        network.cut_clients(&p.clients_cut_from)
    })?;
    ctx.set_active(Some(format!("partition {}", p.topology)));
    ctx.hold(Duration::from_millis(fault.length_ms)).await;
    tokio::task::block_in_place(|| network.heal())?;
    ctx.record(STOP, v)
}

/// Nothing is left: every partition ends with its heal, also when the run stops.
pub async fn heal(_h: &Healer<'_>) -> Result<(), Error> {
    Ok(())
}
