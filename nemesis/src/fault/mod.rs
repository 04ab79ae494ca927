//! The fault families, one module each: how a planned fault of the family is carried out on
//! the nodes, the history ops that open and close it (each module's `START` and `STOP`), and
//! its heal. [`run_plan`] interprets a schedule with them, fault by fault; [`heal_all`] is the
//! final heal at the end of a run.
//!
//! A family module has the same items:
//! - `Plan`: what a planned fault of the family carries beyond its id, start, length and nodes
//!   ([`Payload`]'s variant for it), and `draw(draws, picked)`, what a seeded plan draws for
//!   one of its faults (its length, its choices, its cut or shape) from the plan's streams,
//!   each in the order it always drew them, so a seed gives the schedule it gave;
//! - its `schedule.json` keys: `own_key(raw)` (the first of its keys a fault has: refused on
//!   another family's fault), `read(id, raw, nodes)` (its keys read and checked, and whether
//!   it takes `nodes`) and `write(plan, raw)`;
//! - `nodes_named(plan)` and `renumber(plan, to)`: the node positions its plan names beyond
//!   the fault's `nodes`, for the checks against the run and for a fault moved to another
//!   primary;
//! - `SERVER_SIDE` (its faults act on the service's processes: not against a bare URL) and
//!   `NEEDS_NETNS` (they need the nodes in network namespaces);
//! - `START` and `STOP`, the history ops that open and close its faults (from
//!   `history::FaultFamily`, where the history's readers find them);
//! - `async fn run(ctx, fault)`: start, hold for the fault's length or until the run stops,
//!   end (the end always runs);
//! - `async fn heal(healer)`: what is left to undo once the run is over.
//!
//! A new family is one module here plus its line in `families!` below, and its kind in
//! [`FaultKind`] (`schedule.rs`).

use crate::node::Node;
use crate::ready::Readiness;
use crate::runtime::NetworkFaults;
use crate::schedule::file::{at, RawFault};
use crate::schedule::{Drawn, Draws, FaultKind, PlannedFault, ScheduleError};
use crate::{clock::NodeClock, Error};
use history::{OpValue, Recorder};
use serde_json::json;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub use client_pause::{longest_ms as longest_client_stall_ms, ClientStalls, StallRequest};

/// Registers every family: declares its module and routes its kind to it.
macro_rules! families {
    ($($kind:ident => $module:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// What a planned fault carries for its family: one variant per family, each with
        /// that family's own data, so a fault cannot hold another family's fields.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Payload {
            $($kind($module::Plan),)+
        }

        impl Payload {
            /// The family's kind.
            pub fn kind(&self) -> FaultKind {
                match self {
                    $(Payload::$kind(_) => FaultKind::$kind,)+
                }
            }

            /// Reads a `schedule.json` fault's family part with its family (`nodes`, read
            /// already, for the family to check).
            pub(crate) fn read(
                kind: FaultKind,
                id: &str,
                raw: &RawFault,
                nodes: &[usize],
            ) -> Result<Payload, ScheduleError> {
                match kind {
                    $(FaultKind::$kind => $module::read(id, raw, nodes).map(Payload::$kind),)+
                }
            }

            /// The node positions the family part names (a kill's second wave, a cut's ends).
            pub fn nodes_named(&self) -> Vec<usize> {
                match self {
                    $(Payload::$kind(plan) => $module::nodes_named(plan),)+
                }
            }

            /// Moves every node position the family part names through `to` (a fault moved
            /// to another primary).
            pub fn renumber(&mut self, to: &dyn Fn(usize) -> usize) {
                match self {
                    $(Payload::$kind(plan) => $module::renumber(plan, to),)+
                }
            }

            /// Writes the family part into a `schedule.json` fault.
            pub(crate) fn write(&self, raw: &mut RawFault) {
                match self {
                    $(Payload::$kind(plan) => $module::write(plan, raw),)+
                }
            }

            /// Refuses a key of another family than `kind`'s, so a typo'd kind or a key on
            /// the wrong fault never silently drops part of a fault.
            pub(crate) fn refuse_other_families_keys(
                kind: FaultKind,
                id: &str,
                raw: &RawFault,
            ) -> Result<(), ScheduleError> {
                $(
                    if kind != FaultKind::$kind {
                        if let Some(key) = $module::own_key(raw) {
                            return Err(at(
                                id,
                                format!("`{key}` is for {} faults, not {kind}", FaultKind::$kind),
                            ));
                        }
                    }
                )+
                Ok(())
            }
        }

        /// Whether `kind`'s faults act on the service's processes: its family's `SERVER_SIDE`.
        pub(crate) fn server_side(kind: FaultKind) -> bool {
            match kind {
                $(FaultKind::$kind => $module::SERVER_SIDE,)+
            }
        }

        /// Whether `kind`'s faults need the nodes in network namespaces: its family's
        /// `NEEDS_NETNS`.
        pub(crate) fn needs_netns(kind: FaultKind) -> bool {
            match kind {
                $(FaultKind::$kind => $module::NEEDS_NETNS,)+
            }
        }

        /// Draws one fault of `kind` for a seeded plan with its family (`picked`: the nodes
        /// the plan's targets picked for it).
        pub(crate) fn draw(kind: FaultKind, d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
            match kind {
                $(FaultKind::$kind => $module::draw(d, picked),)+
            }
        }

        /// Carries out one planned fault with its family.
        async fn dispatch<W: Write + Send>(
            ctx: &mut Ctx<W>,
            fault: &PlannedFault,
        ) -> Result<(), Error> {
            match fault.kind() {
                $(FaultKind::$kind => $module::run(ctx, fault).await,)+
            }
        }

        /// Each family's kind with the ops that open and close its faults.
        #[cfg(test)]
        fn op_names() -> Vec<(FaultKind, &'static str, &'static str)> {
            vec![$((FaultKind::$kind, $module::START, $module::STOP)),+]
        }

        /// The final heal: every family undoes what may be left of its faults.
        pub async fn heal_all(healer: &Healer<'_>) -> Result<(), Error> {
            $($module::heal(healer).await?;)+
            Ok(())
        }
    };
}

// The order is the order of the final heal (a stall request is withdrawn before paused nodes
// resume; the other families leave nothing) and of the checks for another family's keys in
// `schedule.json` (the first one found is the one named).
families! {
    Clock => clock,
    Partition => partition,
    Netem => netem,
    ClientPause => client_pause,
    Pause => pause,
    Kill => kill,
}

/// Faults in progress, for the status line.
pub type ActiveFaults = Arc<Mutex<Vec<String>>>;

/// Everything a fault acts on, and where it records what it did.
pub struct Ctx<W: Write + Send> {
    /// The lock service's nodes (none for a service the harness did not start).
    pub nodes: Vec<Node>,
    /// Their ids (`n1`, ...), by position.
    pub ids: Vec<String>,
    /// The runtime's network faults, if it has any.
    pub network: Option<Arc<dyn NetworkFaults>>,
    /// Each node's clock, when clock faults are on.
    pub clocks: Vec<Option<NodeClock>>,
    /// How a lock holder is asked to stall (client-pause).
    pub stalls: Arc<dyn ClientStalls>,
    pub recorder: Arc<Recorder<W>>,
    /// Turns true when the run ends: the fault in progress ends at once.
    pub stop: watch::Receiver<bool>,
    /// The test's start: faults start at offsets from it.
    pub start: Instant,
    /// How long a restarted node may take to answer its health path.
    pub startup: Duration,
    pub active: ActiveFaults,
    /// The position of the node that holds the lock state (lockd's primary, an ensemble's
    /// leader as the deployment found it), so each fault records the role of what it hit
    /// (`roles`: `primary` or `other`) beside the node ids.
    pub primary: usize,
    /// Which clocks a clock fault moves (`wall` or `all`), recorded with each clock fault.
    pub clock_scope: &'static str,
    /// For a service whose primary moves while it runs (the token ring's holder), where to
    /// find it as each fault starts; `None`: it stays at `primary`.
    pub locate: Option<Locate>,
}

/// How to find the node that is the primary at this moment: the check holds on its client
/// port there only.
pub struct Locate {
    pub check: Readiness,
    /// Each node's client `host` and `port`, by position.
    pub addrs: Vec<(String, u16)>,
}

/// Passes over the nodes before a fault goes where it was planned: the primary may be between
/// two nodes (the ring's token in flight) for a moment.
const LOCATE_PASSES_MAX: u32 = 10;
/// Each node's answer is waited for this long: a paused or cut-off node is not the primary.
const LOCATE_TIMEOUT_MS: u64 = 300;

impl Locate {
    /// The position of the node on which the check holds now, if one answers so.
    pub async fn find(&self) -> Option<usize> {
        let timeout = Duration::from_millis(LOCATE_TIMEOUT_MS);
        for _ in 0..LOCATE_PASSES_MAX {
            for (i, (host, port)) in self.addrs.iter().enumerate() {
                if self.check.check(host, *port, timeout).await.is_ok() {
                    return Some(i);
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }
}

/// What the final heal reaches: the nodes and the stall board, shared with the runner (the
/// heal runs even when the nemesis did not finish in time).
pub struct Healer<'a> {
    pub nodes: &'a [Node],
    pub stalls: &'a dyn ClientStalls,
}

impl<W: Write + Send> Ctx<W> {
    /// The ids of the nodes at `picked`.
    pub fn names(&self, picked: &[usize]) -> Vec<&str> {
        picked.iter().map(|&i| self.ids[i].as_str()).collect()
    }

    /// The role of each node at `picked`: `primary` (the node holding the lock state) or
    /// `other`. Coverage counts faults by role, which means the same thing whatever the
    /// node's id.
    pub fn roles(&self, picked: &[usize]) -> Vec<&'static str> {
        picked
            .iter()
            .map(|&i| {
                if i == self.primary {
                    "primary"
                } else {
                    "other"
                }
            })
            .collect()
    }

    /// The value of a node fault's start and stop ops: its nodes (and their roles), length and
    /// id.
    pub fn value(&self, fault: &PlannedFault) -> OpValue {
        OpValue::default()
            .with_extra("nodes", json!(self.names(&fault.nodes)))
            .with_extra("roles", json!(self.roles(&fault.nodes)))
            .with_extra("length_ms", json!(fault.length_ms))
            .with_extra("fault", json!(fault.id))
    }

    /// Records a nemesis op.
    pub fn record(&self, f: &str, value: OpValue) -> Result<(), Error> {
        self.recorder.nemesis(f, value)?;
        Ok(())
    }

    /// What the status line shows as in progress (`None`: nothing).
    pub fn set_active(&self, what: Option<String>) {
        let mut a = self.active.lock().unwrap_or_else(|p| p.into_inner());
        a.clear();
        a.extend(what);
    }

    /// Sleeps until `until` or the stop signal; true if stopped.
    pub async fn sleep_or_stop(&mut self, until: Instant) -> bool {
        let stopped = tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => false,
            _ = self.stop.wait_for(|s| *s) => true,
        };
        stopped || *self.stop.borrow()
    }

    /// Holds a fault for `length`, or until the run stops.
    pub async fn hold(&mut self, length: Duration) {
        self.sleep_or_stop(Instant::now() + length).await;
    }
}

/// Carries the plan out as it is: nothing about a fault is drawn here. Each fault starts at its
/// offset from the test's start; the stop signal ends the fault in progress (healed) and the
/// plan.
pub async fn run_plan<W: Write + Send>(
    mut ctx: Ctx<W>,
    plan: Vec<PlannedFault>,
) -> Result<(), Error> {
    let planned = ctx.primary;
    for fault in plan {
        let at = ctx.start + Duration::from_millis(fault.at_ms);
        if ctx.sleep_or_stop(at).await {
            break;
        }
        // A primary that moves: the fault planned for it goes where it is now, and the node
        // there takes the place the plan gave the primary's.
        let fault = match &ctx.locate {
            Some(l) if fault.kind().is_server_side() => match l.find().await {
                Some(now) => {
                    ctx.primary = now;
                    fault.with_primary(planned, now)
                }
                None => {
                    tracing::warn!(
                        fault = fault.id,
                        "no node answered as the primary: the fault goes where it was planned"
                    );
                    ctx.primary = planned;
                    fault
                }
            },
            _ => fault,
        };
        if fault.kind().is_server_side() && ctx.nodes.is_empty() {
            return Err(Error::msg(format!(
                "{} needs nodes the harness started",
                fault.kind()
            )));
        }
        if let Some(&i) = fault.nodes_named().iter().find(|&&i| i >= ctx.nodes.len()) {
            return Err(Error::msg(format!(
                "fault {} names node n{}, but the run has {} node(s)",
                fault.id,
                i + 1,
                ctx.nodes.len()
            )));
        }
        dispatch(&mut ctx, &fault).await?;
        ctx.set_active(None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use history::FaultOp;

    /// The checkers and the report pair a fault's ops by the history's reading of their names
    /// (`history::FaultOp`), not by this crate's: every family's ops must read as its kind.
    #[test]
    fn every_familys_ops_read_as_its_kind_in_the_history() {
        let names = op_names();
        assert_eq!(names.len(), FaultKind::ALL.len());
        for (kind, start, stop) in names {
            assert_eq!(FaultOp::of(start), FaultOp::Opens(kind.as_str()), "{start}");
            assert_eq!(FaultOp::of(stop), FaultOp::Closes(kind.as_str()), "{stop}");
        }
    }

    /// The history's table of families is this crate's: every family it has is there under
    /// its kind, and the table holds no other.
    #[test]
    fn every_family_is_in_the_historys_table() {
        assert_eq!(history::FaultFamily::ALL.len(), FaultKind::ALL.len());
        for (kind, start, stop) in op_names() {
            let family = history::FaultFamily::named(kind.as_str())
                .unwrap_or_else(|| panic!("{kind} is not in history::FaultFamily::ALL"));
            assert_eq!((family.opens, family.closes), (start, stop), "{kind}");
        }
    }
}
