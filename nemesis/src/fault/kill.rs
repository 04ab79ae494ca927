//! `kill`: SIGKILL the nodes, wait out the fault's length (the downtime), then restart each
//! with the same command and data dir (up to [`RESTART_ATTEMPTS`] times). A rolling kill
//! (`then_nodes`) does the same to its second wave once the first is back; it is one fault,
//! `kill` to `restart`, whose events name both waves.

use super::{Asked, Ctx, Facts, Healer, Here};
use crate::node::Node;
use crate::scenario::{cell, Aimed, CellPlan, Profile, Target};
use crate::schedule::file::{at, needs_nodes, node_id, node_index, RawFault};
use crate::schedule::{Drawn, Draws, FaultKind, Payload, PlannedFault, ScheduleError};
use crate::Error;
use history::coverage::{Cell, Need, KILL_ROLLING};
use history::{Aim, FaultFamily, Field, FieldType, OpValue};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
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

/// Its entry in history's table of families (registered by its `families!` line). Its ops are
/// the one exception to `start-`/`stop-`: `restart` is written once the nodes answer again, a
/// different moment from a signal's end. A rolling kill names its second wave in `then_nodes`.
pub const FAMILY: FaultFamily = FaultFamily {
    kind: "kill",
    opens: "kill",
    closes: "restart",
    colour: "#e03131",
    aim: Aim::BackBeforeLeaseEnds,
    variant_field: "",
    per_role: true,
    rolls: true,
    scoped: false,
    fields: &[Field::new(FaultFamily::THEN_NODES, FieldType::Strings)],
};

/// It kills the service's processes, and needs nothing else. A correct service refuses grants
/// after a restart until every lease it may have granted has lapsed (up to about 2 leases with
/// rounding); a kill that missed its state is tried again on its own with longer leases: a
/// node slower to restart than a lease is back only once every lease it granted is over.
pub const FACTS: Facts = Facts {
    recovery_leases: 2,
    heal_startups: RESTART_ATTEMPTS,
    retried_alone: true,
    ..Facts::ON_NODES
};

pub fn here() -> Here {
    Here::ready("SIGKILL, then restart with the same command and data dir")
}

/// Any kill that met its state (on the primary, if the run aimed there).
pub fn requested(asked: &Asked<'_>) -> Vec<Need> {
    vec![asked.on_role(Need::kind(FAMILY.kind))]
}

/// A kill of each node role, and with 3 nodes or more a rolling kill: two minorities
/// restarted one after the other under one live grant, harmless to a quorum that remembers,
/// and a lost grant where a majority of nodes held it in memory. A kill costs the most time
/// (the service's recovery wait follows it): after the pause and the clock in each scenario.
pub fn suite_cells(t: &Target) -> Vec<CellPlan> {
    let mut out: Vec<CellPlan> = t
        .roles()
        .iter()
        .map(|r| cell(FAMILY.kind, "", "", r, 4, Profile::Plain))
        .collect();
    if t.nodes >= 3 {
        out.push(cell(
            FAMILY.kind,
            KILL_ROLLING,
            "",
            "",
            4,
            Profile::LongHold,
        ));
    }
    out
}

/// A kill of the role's node, or a rolling kill; a short downtime: the node must be back
/// while a lease it granted is still live.
pub fn aim(
    t: &Target,
    c: &Cell,
    role_node: Vec<usize>,
    ttl: u64,
    _rng: &mut ChaCha8Rng,
) -> Option<Aimed> {
    let (nodes, then_nodes) = match c.variant.as_str() {
        KILL_ROLLING => rolling_waves(t.nodes),
        _ => (role_node, Vec::new()),
    };
    Some(Aimed {
        length_ms: (ttl / 4).max(100),
        nodes,
        payload: Payload::Kill(Plan { then_nodes }),
        // A correct service refuses grants for up to about 2 leases after its restart; the
        // scenario goes on past that so a grant follows.
        after_ms: ttl * FACTS.recovery_leases + ttl / 2,
    })
}

/// The waves of a rolling kill on `nodes` (3 or more), never the primary (position 0): first
/// the nodes beyond a bare majority (so a grant on every node is left on exactly a majority
/// that remembers it), then as many more as make the forgetful nodes a majority themselves
/// (one, for an odd count). 3 nodes: n3, then n2; 5: n4 and n5, then n3.
fn rolling_waves(nodes: usize) -> (Vec<usize>, Vec<usize>) {
    let majority = nodes / 2 + 1;
    let first = nodes - majority;
    let then = (2 * majority - nodes).min(nodes - 1 - first);
    let mut others = (1..nodes).rev();
    let mut wave = |k: usize| -> Vec<usize> {
        let mut w: Vec<usize> = others.by_ref().take(k).collect();
        w.sort_unstable();
        w
    };
    let a = wave(first);
    (a, wave(then))
}

/// A kill of the picked nodes in one wave: a downtime, then the restart waits out the lease
/// itself.
pub(crate) fn draw(d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
    let ttl = d.ttl_ms;
    Drawn {
        length_ms: d.rng.random_range(100..=ttl.max(101)),
        nodes: picked,
        payload: Payload::Kill(Plan::default()),
        // A kill inside the recovery window would keep the lock unavailable all run and test
        // nothing.
        recovery_ms: ttl * FACTS.recovery_leases,
    }
}

/// A kill's key in `schedule.json`: `then_nodes`, the second wave.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Keys {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    then_nodes: Vec<String>,
}

/// `then_nodes`: node ids apart from `nodes` and from each other.
pub(crate) fn read(
    id: &str,
    _raw: &RawFault,
    keys: Keys,
    nodes: &[usize],
) -> Result<Plan, ScheduleError> {
    let mut then_nodes = Vec::with_capacity(keys.then_nodes.len());
    for n in &keys.then_nodes {
        let i = node_index(id, n)?;
        if nodes.contains(&i) || then_nodes.contains(&i) {
            return Err(at(
                id,
                format!(
                    "node {n} is named twice (`then_nodes` is a second wave, apart from `nodes`)"
                ),
            ));
        }
        then_nodes.push(i);
    }
    then_nodes.sort_unstable();
    needs_nodes(id, FaultKind::Kill, nodes)?;
    Ok(Plan { then_nodes })
}

pub(crate) fn write(plan: &Plan) -> Keys {
    Keys {
        then_nodes: plan.then_nodes.iter().map(|&i| node_id(i)).collect(),
    }
}

/// The second wave.
pub(crate) fn nodes_named(plan: &Plan) -> Vec<usize> {
    plan.then_nodes.clone()
}

pub(crate) fn shapes_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

/// A kill has no setting of its own to ask with.
pub(crate) fn settings_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

pub(crate) fn renumber(plan: &mut Plan, to: &dyn Fn(usize) -> usize) {
    for i in &mut plan.then_nodes {
        *i = to(*i);
    }
}

/// Restart attempts after a kill before the run gives up on the node.
const RESTART_ATTEMPTS: u32 = 3;

/// What a planned fault carries for this family, asked of any fault.
impl PlannedFault {
    /// For a kill, its second wave (empty: none, and for every other family).
    pub fn then_nodes(&self) -> &[usize] {
        match &self.payload {
            Payload::Kill(k) => &k.then_nodes,
            _ => &[],
        }
    }
}

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    ctx.record(FAMILY.opens, with_waves(ctx, fault, ctx.value(fault)))?;
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
    ctx.record(FAMILY.closes, with_waves(ctx, fault, value))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each wave of a rolling kill is a minority that spares the primary; a grant on every
    /// node is left on a bare majority by the first and on a minority by the second.
    #[test]
    fn a_rolling_kill_leaves_a_grant_on_every_node_on_a_minority() {
        for (nodes, first, then) in [
            (3, vec![2], vec![1]),
            (4, vec![3], vec![1, 2]),
            (5, vec![3, 4], vec![2]),
            (7, vec![4, 5, 6], vec![3]),
        ] {
            let (a, b) = rolling_waves(nodes);
            assert_eq!((&a, &b), (&first, &then), "{nodes} nodes");
            let majority = nodes / 2 + 1;
            assert!(a.len() < majority && b.len() < majority, "{nodes}");
            assert!(!a.contains(&0) && !b.contains(&0), "{nodes}");
            // The nodes that forgot are a majority once both waves are back.
            assert!(a.len() + b.len() >= majority, "{nodes}");
        }
    }
}
