//! `partition`: cut the planned links between nodes (and between the clients and some nodes)
//! with the runtime's network faults, hold, heal.

use super::{variant_need, Asked, Ctx, Facts, Healer, Here};
use crate::named::{self, named_enum};
use crate::netns::topology;
use crate::scenario::{cell, Aimed, CellPlan, Profile, Target};
use crate::schedule::file::{at, node_id, node_index, refuses_nodes, RawFault};
use crate::schedule::{Drawn, Draws, FaultKind, Payload, PlannedFault, ScheduleError};
use crate::Error;
use history::coverage::{Cell, Need};
use history::{Aim, FaultFamily, Field, FieldType, OpValue};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::Write;
use std::time::Duration;

/// A partition carries its cut.
pub type Plan = PartitionFault;

named_enum! {
    /// Which links a partition cuts, after Jepsen's partition nemeses.
    pub enum Topology: "partition topology" {
        /// One node from all the others.
        Isolate => "isolate",
        /// Two random halves.
        Halves => "halves",
        /// Every node sees a majority, but no two nodes the same one.
        MajoritiesRing => "majorities-ring",
        /// Two halves joined through one node that sees both.
        Bridge => "bridge",
        /// The harness's clients from some nodes; the nodes still see each other.
        Clients => "clients",
    }
}

impl Topology {
    /// The fewest nodes for which the topology cuts anything.
    pub fn nodes_min(self) -> usize {
        match self {
            Topology::Isolate | Topology::Halves => 2,
            Topology::MajoritiesRing | Topology::Bridge => 3,
            Topology::Clients => 1,
        }
    }
}

/// Parses `--partition-topologies`.
pub fn parse_topologies(s: &str) -> Result<Vec<Topology>, String> {
    named::parse_list(s)
}

/// A partition's cut, node positions 0-based.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionFault {
    /// The name of the shape it was drawn as (a label: the cut is what is applied).
    pub topology: Topology,
    /// Node pairs that cannot talk, each `(a, b)` with `a < b`.
    pub cut: Vec<(usize, usize)>,
    /// Nodes the harness's clients cannot reach.
    pub clients_cut_from: Vec<usize>,
}

/// Its entry in history's table of families (registered by its `families!` line): it cuts
/// links, not a node, so its cells are per `topology`, not per node role.
pub const FAMILY: FaultFamily = FaultFamily {
    kind: "partition",
    opens: "start-partition",
    closes: "stop-partition",
    colour: "#7048e8",
    aim: Aim::LeaseLiveDuring,
    variant_field: "topology",
    per_role: false,
    rolls: false,
    scoped: false,
    fields: &[
        Field::new("topology", FieldType::Str),
        Field::naming_nodes("cut", FieldType::StringPairs),
        Field::naming_nodes("clients_cut_from", FieldType::Strings),
    ],
};

/// It cuts links between the nodes' namespaces, with iptables; `--partition-topologies`
/// chooses the topologies drawn from.
pub const FACTS: Facts = Facts {
    needs_netns: true,
    tools: &["iptables"],
    settings: &["partition_topologies"],
    ..Facts::ON_NODES
};

pub fn here() -> Here {
    Here::network(
        FaultKind::Partition,
        "iptables DROP rules inside the nodes' own network namespaces (--runtime netns)",
    )
}

/// Each topology `--partition-topologies` asked for, or any cut.
pub fn requested(asked: &Asked<'_>) -> Vec<Need> {
    let topologies = (asked.list)(FACTS.settings[0]);
    if topologies.is_empty() {
        return vec![Need::kind(FAMILY.kind)];
    }
    let need = |t: String| variant_need(FAMILY.kind, t);
    topologies.into_iter().map(need).collect()
}

/// Each topology of the target.
pub fn suite_cells(t: &Target) -> Vec<CellPlan> {
    let topologies = t.topologies.iter();
    topologies
        .map(|topo| cell(FAMILY.kind, topo.as_str(), "", "", 6, Profile::Plain))
        .collect()
}

/// A cut of the cell's topology, around the primary where it singles a node out.
pub fn aim(
    t: &Target,
    c: &Cell,
    _role_node: Vec<usize>,
    ttl: u64,
    rng: &mut ChaCha8Rng,
) -> Option<Aimed> {
    let topology: Topology = c.variant.parse().ok()?;
    let n = t.nodes;
    let (cut, clients_cut_from) = match topology {
        Topology::Isolate => (topology::isolate(n, 0), vec![]),
        Topology::Halves => (topology::halves(n, rng), vec![]),
        Topology::MajoritiesRing => (topology::majorities_ring(n), vec![]),
        Topology::Bridge => (topology::bridge(n), vec![]),
        Topology::Clients => (vec![], vec![0]),
    };
    Some(Aimed {
        length_ms: ttl * 2,
        nodes: Vec::new(),
        payload: Payload::Partition(PartitionFault {
            topology,
            cut,
            clients_cut_from,
        }),
        after_ms: 0,
    })
}

/// A cut of a topology drawn from the chosen ones, straddling the lease like a pause (a cut
/// shorter than a lease tests little). Its nodes are in its cut: `picked` is whom a `clients`
/// cut cuts the clients from.
pub(crate) fn draw(d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
    let ttl = d.ttl_ms;
    let length_ms = d.rng.random_range(ttl..=ttl * 3);
    let all: &[Topology] = if d.cfg.topologies.is_empty() {
        &Topology::ALL
    } else {
        &d.cfg.topologies
    };
    let topology = all[d.rng.random_range(0..all.len())];
    let n = d.cfg.nodes;
    let (cut, clients_cut_from) = match topology {
        _ if n == 0 => (vec![], vec![]),
        Topology::Isolate => (
            topology::isolate(n, d.targets_rng.random_range(0..n)),
            vec![],
        ),
        Topology::Halves => (topology::halves(n, &mut d.targets_rng), vec![]),
        Topology::MajoritiesRing => (topology::majorities_ring(n), vec![]),
        Topology::Bridge => (topology::bridge(n), vec![]),
        Topology::Clients => (vec![], picked),
    };
    Drawn {
        length_ms,
        nodes: Vec::new(),
        payload: Payload::Partition(PartitionFault {
            topology,
            cut,
            clients_cut_from,
        }),
        recovery_ms: 0,
    }
}

/// A partition's keys in `schedule.json`: `topology`, `cut` and `clients_cut_from`.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Keys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topology: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cut: Option<Vec<[String; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clients_cut_from: Option<Vec<String>>,
}

/// `topology` (a label), `cut` (pairs, each ordered, sorted, without repeats) and
/// `clients_cut_from`; the cut names the nodes, `nodes` is refused.
pub(crate) fn read(
    id: &str,
    _raw: &RawFault,
    raw: Keys,
    nodes: &[usize],
) -> Result<Plan, ScheduleError> {
    refuses_nodes(
        id,
        FaultKind::Partition,
        nodes,
        "use `cut` and `clients_cut_from`",
    )?;
    let topology: Topology = raw
        .topology
        .as_deref()
        .ok_or_else(|| at(id, "a partition needs `topology`"))?
        .parse()
        .map_err(|e: String| at(id, e))?;
    let mut cut = Vec::new();
    for [a, b] in raw.cut.iter().flatten() {
        let (x, y) = (node_index(id, a)?, node_index(id, b)?);
        if x == y {
            return Err(at(
                id,
                format!("cut [{a}, {b}]: a node cannot be cut from itself"),
            ));
        }
        cut.push((x.min(y), x.max(y)));
    }
    cut.sort_unstable();
    cut.dedup();
    let mut clients_cut_from = Vec::new();
    for n in raw.clients_cut_from.iter().flatten() {
        clients_cut_from.push(node_index(id, n)?);
    }
    clients_cut_from.sort_unstable();
    clients_cut_from.dedup();
    Ok(PartitionFault {
        topology,
        cut,
        clients_cut_from,
    })
}

pub(crate) fn write(plan: &Plan) -> Keys {
    Keys {
        topology: Some(plan.topology.as_str().to_string()),
        cut: Some(
            plan.cut
                .iter()
                .map(|&(a, b)| [node_id(a), node_id(b)])
                .collect(),
        ),
        clients_cut_from: Some(plan.clients_cut_from.iter().map(|&i| node_id(i)).collect()),
    }
}

/// The ends of every cut link and the nodes cut from the clients.
pub(crate) fn nodes_named(plan: &Plan) -> Vec<usize> {
    let ends = plan.cut.iter().flat_map(|&(a, b)| [a, b]);
    ends.chain(plan.clients_cut_from.iter().copied()).collect()
}

pub(crate) fn shapes_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

/// The value of `partition_topologies` a run asking for this fault alone lists: its topology.
pub(crate) fn settings_asked(plan: &Plan) -> Vec<&'static str> {
    vec![plan.topology.as_str()]
}

/// Each cut link stays ordered (`a < b`).
pub(crate) fn renumber(plan: &mut Plan, to: &dyn Fn(usize) -> usize) {
    for (a, b) in &mut plan.cut {
        let (x, y) = (to(*a), to(*b));
        (*a, *b) = (x.min(y), x.max(y));
    }
    for i in &mut plan.clients_cut_from {
        *i = to(*i);
    }
}

/// What a planned fault carries for this family, asked of any fault.
impl PlannedFault {
    /// For a partition, which links it cuts.
    pub fn partition(&self) -> Option<&PartitionFault> {
        match &self.payload {
            Payload::Partition(p) => Some(p),
            _ => None,
        }
    }
}

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
    ctx.record(FAMILY.opens, v.clone())?;
    tokio::task::block_in_place(|| {
        network.partition(&p.cut)?;
        network.cut_clients(&p.clients_cut_from)
    })?;
    ctx.set_active(Some(format!("partition {}", p.topology)));
    ctx.hold(Duration::from_millis(fault.length_ms)).await;
    tokio::task::block_in_place(|| network.heal())?;
    ctx.record(FAMILY.closes, v)
}

/// Nothing is left: every partition ends with its heal, also when the run stops.
pub async fn heal(_h: &Healer<'_>) -> Result<(), Error> {
    Ok(())
}
