//! `kill`: SIGKILL the nodes, wait out the fault's length (the downtime), then restart each
//! with the same command and data dir (up to [`RESTART_ATTEMPTS`] times).

use super::{Ctx, Healer};
use crate::node::Node;
use crate::schedule::PlannedFault;
use crate::Error;
use history::OpValue;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

pub const START: &str = "kill";
pub const STOP: &str = "restart";

/// Restart attempts after a kill before the run gives up on the node.
pub const RESTART_ATTEMPTS: u32 = 3;

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    ctx.record(START, ctx.value(fault))?;
    for &i in &fault.nodes {
        ctx.nodes[i].lock().await.kill().await?;
    }
    let label = format!("{} {}", fault.kind, ctx.names(&fault.nodes).join(","));
    ctx.set_active(Some(label));
    ctx.hold(Duration::from_millis(fault.length_ms)).await;
    for &i in &fault.nodes {
        restart(&ctx.nodes[i], &ctx.ids[i], ctx.startup).await?;
        let started = ctx.nodes[i].lock().await.started_at();
        if let (Some(clock), Some(at)) = (ctx.clocks[i].as_mut(), started) {
            // A new process: libfaketime counts rates from its start (a control page needs
            // nothing: the restart patched the new process to read it).
            clock.rebase(at)?;
        }
    }
    let value = OpValue::default()
        .with_extra("nodes", json!(ctx.names(&fault.nodes)))
        .with_extra("roles", json!(ctx.roles(&fault.nodes)))
        .with_extra("fault", json!(fault.id));
    ctx.record(STOP, value)
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
