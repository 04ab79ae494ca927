//! `pause`: SIGSTOP the nodes' process groups (through their node control) for the fault's
//! length, then SIGCONT.

use super::{Asked, Ctx, Facts, Healer, Here};
use crate::scenario::{cell, Aimed, CellPlan, Profile, Target};
use crate::schedule::file::{needs_nodes, RawFault};
use crate::schedule::{Drawn, Draws, FaultKind, Payload, PlannedFault, ScheduleError};
use crate::Error;
use history::coverage::{Cell, Need};
use history::{Aim, FaultFamily};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::Duration;

/// A pause carries nothing beyond its nodes and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Plan;

/// Its entry in history's table of families (registered by its `families!` line): a pause
/// opens with `start-pause` and carries no field of its own.
pub const FAMILY: FaultFamily = FaultFamily {
    kind: "pause",
    opens: "start-pause",
    closes: "stop-pause",
    colour: "#f08c00",
    aim: Aim::FrozenPastLeaseBound,
    variant_field: "",
    per_role: true,
    rolls: false,
    scoped: false,
    fields: &[],
};

/// It stops the service's processes, and needs nothing else.
pub const FACTS: Facts = Facts::ON_NODES;

pub fn here() -> Here {
    Here::ready("SIGSTOP/SIGCONT to the process group of a node lockpick started")
}

/// Any pause that froze the service past a lease (on the primary, if the run aimed there).
pub fn requested(asked: &Asked<'_>) -> Vec<Need> {
    vec![asked.on_role(Need::kind(FAMILY.kind))]
}

/// A pause of each node role. Cheap, and often what finds a lease kept past its end.
pub fn suite_cells(t: &Target) -> Vec<CellPlan> {
    let roles = t.roles().iter();
    roles
        .map(|r| cell(FAMILY.kind, "", "", r, 2, Profile::Plain))
        .collect()
}

/// Longer than a lease: one live at the start runs out while the service is frozen.
pub fn aim(
    _t: &Target,
    _cell: &Cell,
    role_node: Vec<usize>,
    ttl: u64,
    _rng: &mut ChaCha8Rng,
) -> Option<Aimed> {
    Some(Aimed {
        length_ms: ttl * 3 / 2,
        nodes: role_node,
        payload: Payload::Pause(Plan),
        after_ms: 0,
    })
}

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
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Keys {}

pub(crate) fn read(
    id: &str,
    _raw: &RawFault,
    _keys: Keys,
    nodes: &[usize],
) -> Result<Plan, ScheduleError> {
    needs_nodes(id, FaultKind::Pause, nodes)?;
    Ok(Plan)
}

pub(crate) fn write(_plan: &Plan) -> Keys {
    Keys {}
}

/// A pause names no nodes beyond its own.
pub(crate) fn nodes_named(_plan: &Plan) -> Vec<usize> {
    Vec::new()
}

pub(crate) fn shapes_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

/// A pause has no setting of its own to ask with.
pub(crate) fn settings_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

pub(crate) fn renumber(_plan: &mut Plan, _to: &dyn Fn(usize) -> usize) {}

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    ctx.record(FAMILY.opens, ctx.value(fault))?;
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
    ctx.record(FAMILY.closes, ctx.value(fault))
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
