//! The fault families, one module each: how a planned fault of the family is carried out on
//! the nodes, the history ops that open and close it (its `FAMILY`'s `opens` and `closes`), and
//! its heal. [`run_plan`] interprets a schedule with them, fault by fault; [`heal_all`] is the
//! final heal at the end of a run.
//!
//! A family module has the same items:
//! - `FAMILY`: its entry in history's table (`history::FaultFamily`: its name, ops, colour, how
//!   its faults count as exercised and its ops' own fields with their types), which its line
//!   in `families!` registers (`history::FAULT_FAMILIES`) for every reader of a history; its
//!   [`FaultKind`] variant is made by `families!` too;
//! - `Plan`: what a planned fault of the family carries beyond its id, start, length and nodes
//!   ([`Payload`]'s variant for it), and `draw(draws, picked)`, what a seeded plan draws for
//!   one of its faults (its length, its choices, its cut or shape) from the plan's streams,
//!   each in the order it always drew them, so a seed gives the schedule it gave;
//! - its `schedule.json` keys: `Keys` (a serde struct of them, in the order they are written;
//!   the reader hands each key of a fault to the family whose `Keys` has it, and refuses one
//!   no family has or another family's), `read(id, raw, keys, nodes)` (its keys read and
//!   checked, and whether it takes `nodes`) and `write(plan)`;
//! - `nodes_named(plan)` and `renumber(plan, to)`: the node positions its plan names beyond
//!   the fault's `nodes`, for the checks against the run and for a fault moved to another
//!   primary; `shapes_asked(plan)`: the coverage shapes a planned fault of it asks to exercise
//!   (a client stall's aim and wake-up op), which a run's verdict then rests on;
//!   `settings_asked(plan)`: the values of its setting a run asking for that fault alone lists;
//! - `FACTS` ([`Facts`]): what its faults need (the service's processes, network namespaces,
//!   the nodes' clocks, runtime tools), the run settings that shape them, the leases a
//!   service needs after one, and whether the suite retries a missed cell of it alone; and
//!   `here()`, `lockpick doctor`'s row for it;
//! - `requested(asked)`: what a run that asked for it needs exercised, from the run's settings;
//! - its cells in `lockpick test`'s plan: `suite_cells(target)` and `aim(...)` (a fault aimed
//!   at one of them, sized from the lease);
//! - `async fn run(ctx, fault)`: start, hold for the fault's length or until the run stops,
//!   end (the end always runs);
//! - `async fn heal(healer)`: what is left to undo once the run is over.
//!
//! A new family is one module here plus its line in `families!` below: history, the checkers
//! and the reports read its entry from the registered table.

use crate::node::Node;
use crate::ready::Readiness;
use crate::runtime::NetworkFaults;
use crate::scenario::{Aimed, CellPlan, Target};
use crate::schedule::file::RawFault;
use crate::schedule::{Drawn, Draws, PlannedFault, ScheduleError};
use crate::{clock::NodeClock, Error};
use history::coverage::{Cell, Need};
use history::{FaultFamily, OpValue, Recorder};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub use client_pause::{longest_ms as longest_client_stall_ms, ClientStalls, StallRequest};

/// Registers every family: declares its module, makes its [`FaultKind`] variant and routes
/// every question about the kind to its module.
macro_rules! families {
    (@one $kind:ident) => {
        1
    };
    ($($kind:ident => $module:ident),+ $(,)?) => {
        $(pub mod $module;)+

        // Each family's entry in history's table (its module's `FAMILY`), registered here so
        // that the history's readers (history, checkers, reports) know it without depending
        // on this crate, in the place of its line below (its `FaultKind`'s), so that the
        // table's order is the order of these lines, as `--nemesis` lists them.
        $(
            const _: () = {
                #[linkme::distributed_slice(history::FAULT_FAMILIES)]
                static REGISTERED: history::Registered = history::Registered {
                    place: FaultKind::$kind as u32,
                    family: &$module::FAMILY,
                };
            };
        )+

        /// A fault family, as `--nemesis` and `schedule.json` name it: one variant per module
        /// of [`crate::fault`], in the order of `families!` (the order `--nemesis` lists them).
        /// What a kind's faults need and do is its module's to say; the methods below ask it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum FaultKind {
            $(
                #[doc = concat!("The faults of [`crate::fault::", stringify!($module), "`].")]
                $kind,
            )+
        }

        impl FaultKind {
            /// Every kind, in `--nemesis` order.
            pub const ALL: [FaultKind; 0 $(+ families!(@one $kind))+] = [$(FaultKind::$kind),+];

            /// Its entry in history's table of families (its name, ops, colour and how its
            /// faults count as exercised).
            pub fn family(self) -> &'static FaultFamily {
                match self {
                    $(FaultKind::$kind => &$module::FAMILY,)+
                }
            }

            /// Its name, as `--nemesis` and `schedule.json` spell it.
            pub fn as_str(self) -> &'static str {
                self.family().kind
            }

            /// What its faults need and how they are planned around: its module's `FACTS`.
            pub fn facts(self) -> &'static Facts {
                match self {
                    $(FaultKind::$kind => &$module::FACTS,)+
                }
            }

            /// Whether its faults act on the service's processes (impossible against a bare
            /// URL).
            pub fn is_server_side(self) -> bool {
                self.facts().server_side
            }

            /// Whether its faults need the nodes in network namespaces (a runtime that makes
            /// network faults).
            pub fn needs_netns(self) -> bool {
                self.facts().needs_netns
            }

            /// Whether its faults move the nodes' clocks, so the nodes must start with a clock
            /// the harness controls and the service must be reachable by a clock backend.
            pub fn moves_clocks(self) -> bool {
                self.facts().moves_clocks
            }

            /// The features of a runtime its faults use, by the names the runtimes check them
            /// under (`iptables`, `ptrace`).
            pub fn tools(self) -> &'static [&'static str] {
                self.facts().tools
            }

            /// Whether a run can always make its faults on nodes lockpick started, needing
            /// nothing of this machine (no namespace, clock backend or tool).
            pub fn needs_nothing_here(self) -> bool {
                !self.needs_netns() && !self.moves_clocks() && self.tools().is_empty()
            }

            /// The run settings (config keys) that shape its faults.
            pub fn settings(self) -> &'static [&'static str] {
                self.facts().settings
            }

            /// How many leases a service needs after one of its faults before it grants again
            /// (a restart's).
            pub fn recovery_leases(self) -> u64 {
                self.facts().recovery_leases
            }

            /// How many node startups the end of one of its faults may wait for.
            pub fn heal_startups(self) -> u32 {
                self.facts().heal_startups
            }

            /// Whether this machine can make its faults, for `lockpick doctor`.
            pub fn here(self) -> Here {
                match self {
                    $(FaultKind::$kind => $module::here(),)+
                }
            }

            /// What a run that asked for it needs exercised (the coverage gate's needs), from
            /// the run's settings.
            pub fn requested(self, asked: &Asked<'_>) -> Vec<Need> {
                match self {
                    $(FaultKind::$kind => $module::requested(asked),)+
                }
            }

            /// The suite's cells for it on `t`.
            pub fn suite_cells(self, t: &Target) -> Vec<CellPlan> {
                match self {
                    $(FaultKind::$kind => $module::suite_cells(t),)+
                }
            }

            /// A fault of it aimed at the suite's `cell` (`role_node`: the node of the cell's
            /// role), sized from the lease `ttl`; `None` if the cell is not one it aims at.
            pub fn aim(
                self,
                t: &Target,
                cell: &Cell,
                role_node: Vec<usize>,
                ttl: u64,
                rng: &mut ChaCha8Rng,
            ) -> Option<Aimed> {
                match self {
                    $(FaultKind::$kind => $module::aim(t, cell, role_node, ttl, rng),)+
                }
            }

            /// Whether a cell of it that missed its state is tried again on its own with
            /// longer leases (a kill, whose restart may outlast a lease).
            pub fn retried_alone(self) -> bool {
                self.facts().retried_alone
            }

            /// The keys of `schedule.json` its faults have beyond the ones every fault has,
            /// read from its `Keys` (so they are written once).
            pub(crate) fn keys(self) -> &'static [&'static str] {
                match self {
                    $(FaultKind::$kind => fields_of::<$module::Keys>(),)+
                }
            }

            /// Reads its keys of a `schedule.json` fault (the ones it owns, split off).
            pub(crate) fn read_keys(self, part: Map<String, Value>) -> Result<Keys, serde_json::Error> {
                match self {
                    $(FaultKind::$kind => serde_json::from_value(Value::Object(part)).map(Keys::$kind),)+
                }
            }

            /// Draws one fault of it for a seeded plan (`picked`: the nodes the plan's targets
            /// picked for it).
            pub(crate) fn draw(self, d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
                match self {
                    $(FaultKind::$kind => $module::draw(d, picked),)+
                }
            }
        }

        /// What a planned fault carries for its family: one variant per family, each with
        /// that family's own data, so a fault cannot hold another family's fields.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Payload {
            $($kind($module::Plan),)+
        }

        /// A fault's own keys in `schedule.json`, as its family reads and writes them (written
        /// after the keys every fault has, in the order of the family's `Keys`).
        #[derive(Serialize)]
        #[serde(untagged)]
        pub(crate) enum Keys {
            $($kind($module::Keys),)+
        }

        impl Keys {
            /// The family whose keys these are.
            pub(crate) fn kind(&self) -> FaultKind {
                match self {
                    $(Keys::$kind(_) => FaultKind::$kind,)+
                }
            }
        }

        impl Payload {
            /// The family's kind.
            pub fn kind(&self) -> FaultKind {
                match self {
                    $(Payload::$kind(_) => FaultKind::$kind,)+
                }
            }

            /// Reads a `schedule.json` fault's family part with its family (`raw`: the keys
            /// every fault has; `nodes`, read already, for the family to check).
            pub(crate) fn read(
                keys: Keys,
                id: &str,
                raw: &RawFault,
                nodes: &[usize],
            ) -> Result<Payload, ScheduleError> {
                match keys {
                    $(Keys::$kind(k) => $module::read(id, raw, k, nodes).map(Payload::$kind),)+
                }
            }

            /// The node positions the family part names (a kill's second wave, a cut's ends).
            pub fn nodes_named(&self) -> Vec<usize> {
                match self {
                    $(Payload::$kind(plan) => $module::nodes_named(plan),)+
                }
            }

            /// The coverage shapes the family part asks to exercise (a client stall's aim and
            /// wake-up op; none for most families), as `results.json`'s coverage names them.
            pub fn shapes_asked(&self) -> Vec<&'static str> {
                match self {
                    $(Payload::$kind(plan) => $module::shapes_asked(plan),)+
                }
            }

            /// The values of its family's setting (`Facts::settings`) that a run asking for
            /// this fault alone would list (a clock's mode, a cut's topology, a stall's aim
            /// and wake-up op; none for a family without one): what `lockpick test` tells a
            /// scenario's run it asks for, so its own verdict rests on its own faults.
            pub fn settings_asked(&self) -> Vec<&'static str> {
                match self {
                    $(Payload::$kind(plan) => $module::settings_asked(plan),)+
                }
            }

            /// Moves every node position the family part names through `to` (a fault moved
            /// to another primary).
            pub fn renumber(&mut self, to: &dyn Fn(usize) -> usize) {
                match self {
                    $(Payload::$kind(plan) => $module::renumber(plan, to),)+
                }
            }

            /// The family part as `schedule.json` keys.
            pub(crate) fn write(&self) -> Keys {
                match self {
                    $(Payload::$kind(plan) => Keys::$kind($module::write(plan)),)+
                }
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
            vec![$((FaultKind::$kind, $module::FAMILY.opens, $module::FAMILY.closes)),+]
        }

        /// The final heal: every family undoes what may be left of its faults, last registered
        /// first (a client's stall request is withdrawn before paused nodes resume).
        pub async fn heal_all(healer: &Healer<'_>) -> Result<(), Error> {
            families!(@heal healer; $($module),+);
            Ok(())
        }
    };
    (@heal $healer:ident; $first:ident $(, $rest:ident)*) => {
        families!(@heal $healer; $($rest),*);
        $first::heal($healer).await?;
    };
    (@heal $healer:ident;) => {};
}

// The order is `--nemesis`'s (and `FaultKind`'s); the final heal runs it backwards.
families! {
    Pause => pause,
    Kill => kill,
    ClientPause => client_pause,
    Clock => clock,
    Partition => partition,
    Netem => netem,
}

/// What a family's faults need and how the harness plans around them, declared once in its
/// module (`FACTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// They act on the service's processes: impossible against a bare URL.
    pub server_side: bool,
    /// They need the nodes in network namespaces (a runtime that makes network faults).
    pub needs_netns: bool,
    /// They move the nodes' clocks: the nodes start with a clock the harness controls.
    pub moves_clocks: bool,
    /// The features of a runtime they use, by the names the runtimes check them under.
    pub tools: &'static [&'static str],
    /// The run settings (config keys) that shape them.
    pub settings: &'static [&'static str],
    /// How many leases a service needs after one before it grants again.
    pub recovery_leases: u64,
    /// How many node startups the end of one of its faults may wait for (a kill restarts its
    /// nodes, retrying): the runner's wait for the nemesis to heal allows that many
    /// `--startup-timeout`s beyond its drain.
    pub heal_startups: u32,
    /// A suite cell of the family that missed its state is tried again alone, with longer
    /// leases.
    pub retried_alone: bool,
}

impl Facts {
    /// Faults on the service's processes that need nothing else: what a family's `FACTS`
    /// start from.
    pub const ON_NODES: Facts = Facts {
        server_side: true,
        needs_netns: false,
        moves_clocks: false,
        tools: &[],
        settings: &[],
        recovery_leases: 0,
        heal_startups: 0,
        retried_alone: false,
    };
}

/// Whether this machine can make a family's faults, for `lockpick doctor` (the same checks
/// refuse a run that asks for them).
#[derive(Debug, Clone, PartialEq)]
pub struct Here {
    /// `None` when its faults can run here; else why not and the fix.
    pub missing: Option<String>,
    /// How its faults are made (here).
    pub note: &'static str,
}

impl Here {
    /// A family whose faults need nothing of this machine.
    pub const fn ready(note: &'static str) -> Here {
        Here {
            missing: None,
            note,
        }
    }

    /// A network family: what the runtime a run with `kind`'s faults would take lacks for
    /// them here, from the runtime's own probes (the same words a run's refusal gives).
    pub fn network(kind: FaultKind, note: &'static str) -> Here {
        let missing = crate::runtime::default_runtime(true).missing_here(&[kind]);
        Here {
            missing: (!missing.is_empty()).then(|| missing.join("; ")),
            note,
        }
    }
}

/// What a run's settings asked of a family, for the coverage gate: the run's settings by
/// config key, and whether its node faults were aimed at the primary.
pub struct Asked<'a> {
    /// A list setting's words (`clock_faults`); empty when not set.
    pub list: &'a dyn Fn(&str) -> Vec<String>,
    /// `nemesis_targets = "primary"`: node faults are counted on the primary only.
    pub on_primary: bool,
}

impl Asked<'_> {
    /// `need`, asked of the primary when the run aimed its node faults there.
    pub fn on_role(&self, mut need: Need) -> Need {
        if self.on_primary {
            need.role = "primary".into();
            need.label = format!("{} on primary", need.label);
        }
        need
    }
}

/// A need met by an exercised fault of `kind` of `variant` (a clock mode, a topology):
/// `clock fast`.
pub fn variant_need(kind: &str, variant: String) -> Need {
    Need {
        label: format!("{kind} {variant}"),
        kind: kind.into(),
        variants: vec![variant],
        times: 1,
        ..Need::default()
    }
}

/// The fields a serde struct reads, asked of its `Deserialize` (the derive hands them to
/// `deserialize_struct`), so a family's keys are listed once, in its `Keys`.
pub(crate) fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{self, Visitor};
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("only its fields were asked for"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
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
    /// its kind, in the order of `families!`, and the table holds no other.
    #[test]
    fn every_family_is_in_the_historys_table() {
        let kinds: Vec<&str> = history::FaultFamily::all().iter().map(|f| f.kind).collect();
        let ours: Vec<&str> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(kinds, ours);
        for (kind, start, stop) in op_names() {
            let family = history::FaultFamily::named(kind.as_str())
                .unwrap_or_else(|| panic!("{kind} is not in history::FAULT_FAMILIES"));
            assert_eq!((family.opens, family.closes), (start, stop), "{kind}");
        }
    }
}
