//! `netem`: delay, drop, duplicate and reorder the planned nodes' packets with the runtime's
//! network faults, hold, clear.

use super::{Asked, Ctx, Facts, Healer, Here};
use crate::netns::NetemSpec;
use crate::scenario::{cell, Aimed, CellPlan, Profile, Target};
use crate::schedule::file::{at, needs_nodes, RawFault};
use crate::schedule::{Drawn, Draws, FaultKind, Payload, PlannedFault, ScheduleError};
use crate::Error;
use history::coverage::{Cell, Need};
use history::{Aim, FaultFamily, Field, FieldType};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
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

/// Its entry in history's table of families (registered by its `families!` line): a lossy
/// link, not a node hit, with its settings as one object (`netem`).
pub const FAMILY: FaultFamily = FaultFamily {
    kind: "netem",
    opens: "start-netem",
    closes: "stop-netem",
    colour: "#0ca678",
    aim: Aim::LeaseLiveDuring,
    variant_field: "",
    per_role: false,
    rolls: false,
    scoped: false,
    fields: &[Field::new(
        "netem",
        FieldType::Object(&[
            Field::new("delay_ms", FieldType::U64),
            Field::new("jitter_ms", FieldType::U64),
            Field::new("loss_pct", FieldType::Number),
            Field::new("duplicate_pct", FieldType::Number),
            Field::new("reorder_pct", FieldType::Number),
        ]),
    )],
};

/// It shapes the traffic of the nodes' namespaces, with tc's netem qdisc.
pub const FACTS: Facts = Facts {
    needs_netns: true,
    tools: &["netem"],
    ..Facts::ON_NODES
};

pub fn here() -> Here {
    Here::network(
        FaultKind::Netem,
        "tc netem delay/loss/duplicate/reorder inside the nodes' namespaces",
    )
}

/// Any netem fault while a lease was live.
pub fn requested(_asked: &Asked<'_>) -> Vec<Need> {
    vec![Need::kind(FAMILY.kind)]
}

/// One cell: the planner's netem, last (the costliest to set up, the least aimed).
pub fn suite_cells(_t: &Target) -> Vec<CellPlan> {
    vec![cell(FAMILY.kind, "", "", "", 7, Profile::Plain)]
}

/// The planner's netem on the primary.
pub fn aim(
    _t: &Target,
    _c: &Cell,
    _role_node: Vec<usize>,
    ttl: u64,
    _rng: &mut ChaCha8Rng,
) -> Option<Aimed> {
    Some(Aimed {
        length_ms: ttl * 2,
        nodes: vec![0],
        payload: Payload::Netem(NETEM),
        after_ms: 0,
    })
}

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

/// A netem fault's key in `schedule.json`: `netem`, the spec.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Keys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netem: Option<NetemSpec>,
}

/// `netem` (default: the planner's [`NETEM`]), which `tc` must take.
pub(crate) fn read(
    id: &str,
    _raw: &RawFault,
    keys: Keys,
    nodes: &[usize],
) -> Result<Plan, ScheduleError> {
    needs_nodes(id, FaultKind::Netem, nodes)?;
    let spec = keys.netem.unwrap_or(NETEM);
    spec.tc_args().map_err(|e| at(id, e.to_string()))?;
    Ok(spec)
}

pub(crate) fn write(plan: &Plan) -> Keys {
    Keys {
        netem: Some(plan.clone()),
    }
}

/// A netem spec names no nodes beyond its own.
pub(crate) fn nodes_named(_plan: &Plan) -> Vec<usize> {
    Vec::new()
}

pub(crate) fn shapes_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

/// Netem has no setting of its own to ask with.
pub(crate) fn settings_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

pub(crate) fn renumber(_plan: &mut Plan, _to: &dyn Fn(usize) -> usize) {}

/// What a planned fault carries for this family, asked of any fault.
impl PlannedFault {
    /// For netem, what it does to packets.
    pub fn netem(&self) -> Option<&NetemSpec> {
        match &self.payload {
            Payload::Netem(n) => Some(n),
            _ => None,
        }
    }
}

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
    ctx.record(FAMILY.opens, v.clone())?;
    tokio::task::block_in_place(|| network.netem(&fault.nodes, &spec))?;
    let label = format!("{} {}", fault.kind(), ctx.names(&fault.nodes).join(","));
    ctx.set_active(Some(label));
    ctx.hold(Duration::from_millis(fault.length_ms)).await;
    tokio::task::block_in_place(|| network.clear_netem(&fault.nodes))?;
    ctx.record(FAMILY.closes, v)
}

/// Nothing is left: every netem fault ends with its clear, also when the run stops.
pub async fn heal(_h: &Healer<'_>) -> Result<(), Error> {
    Ok(())
}
