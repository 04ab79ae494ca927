//! `client-pause`: a lock holder stalls past its lease, then carries on with its old token (a
//! GC pause), or a client waiting for a lock stalls while its acquire is outstanding. The
//! plan's [`ClientFault`] says what the stall is aimed at and what the holder wakes into. The
//! nemesis only asks ([`ClientStalls`]); the client that takes the request records the stall's
//! start and stop itself, with its process, lock, token and shape, under the op names given
//! here and the fault's id.

use super::{Asked, Ctx, Facts, Healer, Here};
use crate::named::{self, named_enum};
use crate::scenario::{cell, Aimed, CellPlan, Profile, Target};
use crate::schedule::file::{at, refuses_nodes, RawFault};
use crate::schedule::{Drawn, Draws, FaultKind, Payload, PlannedFault, ScheduleError};
use crate::Error;
use history::coverage::{Cell, Need};
use history::{stall_fields, Aim, FaultFamily, Field, FieldType};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::{Duration, Instant};

/// A client-pause's request window and shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// How long the stall request waits for a lock holder to take it.
    pub window_ms: u64,
    /// Its shape (`None`: a schedule written before shapes; the holder stalls for the whole
    /// length and wakes into the workload's next op).
    pub shape: Option<ClientFault>,
}

named_enum! {
    /// What a client-pause stall is aimed at: when, relative to the stalled client's lease and to
    /// the other clients' grants, it ends. Each aim exposes a different class of service bug.
    pub enum StallAim: "stall aim" {
        /// A holder stalls until just past the end of its lease (its last ok grant or renew's
        /// answer plus the ttl, plus [`ClientFault::after_ms`]): a late renew or write arrives
        /// while the service may still remember the lease.
        Boundary => "boundary",
        /// A holder stalls until another client has just been granted the same lock (plus
        /// `after_ms`): the stale op lands right after the next holder's grant, before a second
        /// one, when the next holder's token is the only one past its own.
        NextGrant => "next-grant",
        /// A holder stalls for the fault's whole length (1.5-2.5 leases): it wakes several grants
        /// later.
        Long => "long",
        /// A client stalls while its acquire is outstanding (its keepalives stop, as a paused
        /// process's would) for longer than its lease, then goes on waiting.
        Waiter => "waiter",
    }
}

named_enum! {
    /// What a stalled holder does first when it wakes.
    pub enum WakeOp: "wake-up op" {
        /// Renews: a real renew timer fires first after a pause.
        Renew => "renew",
        /// Writes the protected register (counter workload; a mutex holder releases instead).
        Write => "write",
        /// Releases the lock.
        Release => "release",
        /// Reads the protected register (counter workload: the stall strikes between the grant
        /// and the read; a mutex holder releases instead).
        Read => "read",
    }
}

/// A client-pause's shape: what it is aimed at, and what the stalled holder wakes into
/// (`None` for a waiter, which goes on waiting, and for a schedule written before shapes,
/// whose holders wake into the workload's next op).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientFault {
    pub aim: StallAim,
    pub wake: Option<WakeOp>,
    /// For `boundary` and `next-grant`: how long after the aimed instant the stall ends.
    pub after_ms: u64,
}

/// Named choices of `--client-faults`: stall aims and wake-up ops. An empty list of either
/// means all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFaults {
    pub aims: Vec<StallAim>,
    pub wakes: Vec<WakeOp>,
}

/// Parses `--client-faults`: a comma-separated list of stall aims and wake-up ops.
pub fn parse_client_faults(s: &str) -> Result<ClientFaults, String> {
    let mut out = ClientFaults::default();
    for part in s.split(',').map(str::trim) {
        if let Ok(a) = part.parse::<StallAim>() {
            if !out.aims.contains(&a) {
                out.aims.push(a);
            }
        } else if let Ok(w) = part.parse::<WakeOp>() {
            if !out.wakes.contains(&w) {
                out.wakes.push(w);
            }
        } else {
            return Err(format!(
                "unknown client fault {part:?} (expected {} (stall aims), {} (wake-up ops))",
                named::words::<StallAim>(),
                named::words::<WakeOp>()
            ));
        }
    }
    Ok(out)
}

impl ClientFaults {
    /// The shapes a holder that never reads or writes (the mutex workload) performs: each
    /// `read` or `write` becomes the `release` it does instead, and the list of every wake-up
    /// op (empty) is `renew` and `release`. The aims stay as they are.
    pub fn without_data(&self) -> ClientFaults {
        let listed: &[WakeOp] = if self.wakes.is_empty() {
            &WakeOp::ALL
        } else {
            &self.wakes
        };
        let mut wakes = Vec::new();
        for &w in listed {
            let w = match w {
                WakeOp::Read | WakeOp::Write => WakeOp::Release,
                w => w,
            };
            if !wakes.contains(&w) {
                wakes.push(w);
            }
        }
        ClientFaults {
            aims: self.aims.clone(),
            wakes,
        }
    }

    /// Whether the list names a wake-up op that reads or writes the protected register.
    pub fn names_data_ops(&self) -> bool {
        (self.wakes.iter()).any(|w| matches!(w, WakeOp::Read | WakeOp::Write))
    }

    /// The list's names, aims first, as `--client-faults` takes them.
    pub fn names(&self) -> Vec<String> {
        let aims = self.aims.iter().map(|a| a.to_string());
        aims.chain(self.wakes.iter().map(|w| w.to_string()))
            .collect()
    }
}

/// Its entry in history's table of families (registered by its `families!` line). Its ops
/// are written by the stalled client itself (workloads), and carry what the coverage pass
/// places a stall by: its lock, its shape and what it woke into, and how it ended.
pub const FAMILY: FaultFamily = FaultFamily {
    kind: "client-pause",
    opens: "start-client-pause",
    closes: "stop-client-pause",
    colour: "#d6a400",
    aim: Aim::ClientStall,
    variant_field: "",
    per_role: true,
    rolls: false,
    scoped: false,
    fields: &[
        Field::new(stall_fields::LOCK, FieldType::Str),
        Field::new("stall_ms", FieldType::U64),
        Field::new(stall_fields::SHAPE, FieldType::Str),
        Field::new(stall_fields::WAKE, FieldType::Str),
        Field::new("lease_end_ns", FieldType::U64),
        Field::new("after_ms", FieldType::U64),
        Field::new("acquire", FieldType::U64),
        Field::new("stalled_ms", FieldType::U64),
        Field::new("ended_by", FieldType::Str),
        Field::new("next_grant_ns", FieldType::U64),
    ],
};

/// It stalls the harness's own client: any service, also a bare URL, and nothing else needed;
/// `--client-faults` chooses the aims and wake-up ops drawn from.
pub const FACTS: Facts = Facts {
    server_side: false,
    settings: &["client_faults"],
    ..Facts::ON_NODES
};

pub fn here() -> Here {
    Here::ready("a lock holder stalls past its lease in the harness itself")
}

/// The needs of `--client-faults` (empty: any stall that reached its aim): each aim asked for,
/// with the wake-up ops asked for; each wake-up op asked for without an aim.
pub fn requested(asked: &Asked<'_>) -> Vec<Need> {
    let shapes = (asked.list)(FACTS.settings[0]);
    let aims: Vec<&String> = shapes
        .iter()
        .filter(|s| s.parse::<StallAim>().is_ok())
        .collect();
    let wakes: Vec<String> = shapes
        .iter()
        .filter(|s| s.parse::<WakeOp>().is_ok())
        .cloned()
        .collect();
    let stall = |label: String, variants: Vec<String>, wakes: Vec<String>| Need {
        label,
        kind: FAMILY.kind.into(),
        variants,
        wakes,
        times: 1,
        ..Need::default()
    };
    if aims.is_empty() && wakes.is_empty() {
        return vec![Need::kind(FAMILY.kind)];
    }
    if aims.is_empty() {
        return wakes
            .iter()
            .map(|w| {
                stall(
                    format!("{} waking into {w}", FAMILY.kind),
                    vec![],
                    vec![w.clone()],
                )
            })
            .collect();
    }
    aims.into_iter()
        .map(|a| {
            let waiter = a.parse::<StallAim>() == Ok(StallAim::Waiter);
            let w = if waiter { vec![] } else { wakes.clone() };
            let label = match w.as_slice() {
                [] => format!("{} {a}", FAMILY.kind),
                ws => format!("{} {a}/{}", FAMILY.kind, ws.join("|")),
            };
            stall(label, vec![a.clone()], w)
        })
        .collect()
}

/// The kind of the suite's cell that runs a stall under an odd lease length; any exercised
/// stall exercises it.
pub const LEASE: &str = "lease";

/// The client-stall cells: the odd lease, and each stall aim x wake-up op the workload has
/// (a waiter's stall has no wake-up op). A long stall is where a lock that never expires
/// shows: the others are refused past every lease only if they do not wait out the stall.
pub fn suite_cells(t: &Target) -> Vec<CellPlan> {
    let aims: &[StallAim] = if t.aims.is_empty() {
        &StallAim::ALL
    } else {
        &t.aims
    };
    let wakes: Vec<WakeOp> = if t.wakes.is_empty() {
        WakeOp::ALL.to_vec()
    } else {
        t.wakes.clone()
    };
    // A mutex holder releases where a counter holder would read or write.
    let wakes: Vec<WakeOp> = wakes
        .into_iter()
        .filter(|w| t.counter || matches!(w, WakeOp::Renew | WakeOp::Release))
        .filter(|w| !(t.counter && t.write_ends_grant && *w == WakeOp::Release))
        .collect();
    // A holder stalled to just past an odd lease, waking into a renew: where a service
    // that rounds the lease down has already granted the lock to another.
    let mut out = vec![cell(LEASE, "odd-ttl", "", "", 1, Profile::OddTtl)];
    for &aim in aims {
        if aim == StallAim::Waiter {
            out.push(cell(FAMILY.kind, aim.as_str(), "", "", 5, Profile::Plain));
            continue;
        }
        let profile = match aim {
            StallAim::Long => Profile::ShortWait,
            _ => Profile::Plain,
        };
        for w in &wakes {
            out.push(cell(FAMILY.kind, aim.as_str(), w.as_str(), "", 1, profile));
        }
    }
    out
}

/// A stall of the cell's aim and wake-up op, or for the odd-lease cell a holder stalled to
/// just past its lease that renews.
pub fn aim(
    t: &Target,
    c: &Cell,
    _role_node: Vec<usize>,
    ttl: u64,
    rng: &mut ChaCha8Rng,
) -> Option<Aimed> {
    let (aim, wake, length_ms) = if c.kind == LEASE {
        (StallAim::Boundary, Some(WakeOp::Renew), ttl * 2)
    } else {
        let aim: StallAim = c.variant.parse().ok()?;
        let wake = if aim == StallAim::Waiter {
            None
        } else {
            Some(c.wake.parse::<WakeOp>().ok()?)
        };
        // A long stall outlasts the lease, the liveness grace and another lease: a lock
        // still held then is stuck, and the others asking meanwhile are refused.
        let length_ms = match aim {
            StallAim::Long => (ttl * 2).max(ttl * 2 + t.liveness_grace_ms),
            _ => ttl * 2,
        };
        (aim, wake, length_ms)
    };
    // As the drawn plan sizes them: a few ms past the aimed instant.
    let after_ms = draw_after_ms(aim, ttl, rng);
    Some(Aimed {
        length_ms,
        nodes: Vec::new(),
        payload: Payload::ClientPause(Plan {
            // Well past the lease: the aimed instants lie within it.
            window_ms: ttl.max(500),
            shape: Some(ClientFault {
                aim,
                wake,
                after_ms,
            }),
        }),
        after_ms: 0,
    })
}

/// A stall that must outlive the lease surely (well past it), of a shape drawn from the
/// chosen ones; the request waits a quiet interval for a holder.
pub(crate) fn draw(d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
    debug_assert!(picked.is_empty(), "a client-pause hits no node: {picked:?}");
    let ttl = d.ttl_ms;
    Drawn {
        length_ms: d.rng.random_range(ttl * 3 / 2..=ttl * 5 / 2),
        nodes: picked,
        payload: Payload::ClientPause(Plan {
            window_ms: d.interval_ms,
            shape: Some(draw_shape(&mut d.client_rng, &d.cfg.client_faults, ttl)),
        }),
        recovery_ms: 0,
    }
}

/// Draws a client-pause's shape: an aim and (for a holder) a wake-up op from the chosen ones,
/// and how far past the aimed instant it ends.
fn draw_shape(rng: &mut impl Rng, chosen: &ClientFaults, ttl_ms: u64) -> ClientFault {
    let aims: &[StallAim] = if chosen.aims.is_empty() {
        &StallAim::ALL
    } else {
        &chosen.aims
    };
    let wakes: &[WakeOp] = if chosen.wakes.is_empty() {
        &WakeOp::ALL
    } else {
        &chosen.wakes
    };
    let aim = aims[rng.random_range(0..aims.len())];
    let wake = wakes[rng.random_range(0..wakes.len())];
    ClientFault {
        aim,
        wake: (aim != StallAim::Waiter).then_some(wake),
        after_ms: draw_after_ms(aim, ttl_ms, rng),
    }
}

/// The longest client stall a plan holds (0: none): the runner waits this long, beside the
/// leases, for a stalled worker to wake before it gives up on the run's end.
pub fn longest_ms(faults: &[PlannedFault]) -> u64 {
    faults
        .iter()
        .filter(|f| f.kind() == FaultKind::ClientPause)
        .map(|f| f.length_ms)
        .max()
        .unwrap_or(0)
}

/// How far past the aimed instant a `boundary` or `next-grant` stall ends (0 for the others,
/// and nothing drawn): a few ms, late enough that the service has acted on it (the lease
/// lapsed, the next holder's first op landed), early enough that nothing else has.
pub fn draw_after_ms(aim: StallAim, ttl_ms: u64, rng: &mut impl Rng) -> u64 {
    match aim {
        StallAim::Boundary => rng.random_range(10..=(ttl_ms / 20).max(20)),
        StallAim::NextGrant => rng.random_range(10..=(ttl_ms / 10).max(20)),
        StallAim::Long | StallAim::Waiter => 0,
    }
}

/// A client-pause's keys in `schedule.json`: `window_ms`, `shape`, `wake` and `after_ms`.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Keys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shape: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wake: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_ms: Option<u64>,
}

/// The shape, `window_ms` (default: `length_ms`); the client holding a lock is who stalls,
/// `nodes` is refused.
pub(crate) fn read(
    id: &str,
    raw: &RawFault,
    keys: Keys,
    nodes: &[usize],
) -> Result<Plan, ScheduleError> {
    let shape = read_shape(id, &keys)?;
    refuses_nodes(
        id,
        FaultKind::ClientPause,
        nodes,
        "the client holding a lock stalls",
    )?;
    Ok(Plan {
        window_ms: keys.window_ms.unwrap_or(raw.length_ms),
        shape,
    })
}

/// A client-pause's `shape`, `wake` and `after_ms`, checked together.
fn read_shape(id: &str, r: &Keys) -> Result<Option<ClientFault>, ScheduleError> {
    let Some(shape) = r.shape.as_deref() else {
        if r.wake.is_some() || r.after_ms.is_some() {
            return Err(at(id, "`wake` and `after_ms` need a `shape`"));
        }
        return Ok(None);
    };
    let aim: StallAim = shape.parse().map_err(|e: String| at(id, e))?;
    let wake = match (aim, r.wake.as_deref()) {
        (StallAim::Waiter, Some(_)) => {
            return Err(at(
                id,
                "`wake` is for holder stalls; a waiter goes on waiting",
            ))
        }
        (StallAim::Waiter, None) => None,
        (_, Some(w)) => Some(w.parse::<WakeOp>().map_err(|e: String| at(id, e))?),
        (_, None) => return Err(at(id, format!("a {aim} stall needs `wake`"))),
    };
    // An offset past the bound is kept as written: the stall ends at its bound (`length_ms`)
    // whatever it aims at, and `shrink` halves lengths without touching offsets.
    let after_ms = match (aim, r.after_ms) {
        (StallAim::Boundary | StallAim::NextGrant, Some(ms)) => ms,
        (StallAim::Boundary | StallAim::NextGrant, None) => {
            return Err(at(id, format!("a {aim} stall needs `after_ms`")))
        }
        (_, Some(_)) => {
            return Err(at(
                id,
                format!("`after_ms` is for boundary and next-grant stalls, not {aim}"),
            ))
        }
        (_, None) => 0,
    };
    Ok(Some(ClientFault {
        aim,
        wake,
        after_ms,
    }))
}

pub(crate) fn write(plan: &Plan) -> Keys {
    Keys {
        window_ms: Some(plan.window_ms),
        shape: plan.shape.map(|c| c.aim.as_str().to_string()),
        wake: plan
            .shape
            .and_then(|c| c.wake)
            .map(|w| w.as_str().to_string()),
        after_ms: plan
            .shape
            .filter(|c| matches!(c.aim, StallAim::Boundary | StallAim::NextGrant))
            .map(|c| c.after_ms),
    }
}

/// A stall names no nodes.
pub(crate) fn nodes_named(_plan: &Plan) -> Vec<usize> {
    Vec::new()
}

/// The stall's aim and its wake-up op (a waiter's stall has none).
pub(crate) fn shapes_asked(plan: &Plan) -> Vec<&'static str> {
    let Some(shape) = &plan.shape else {
        return Vec::new();
    };
    let wake = shape.wake.map(WakeOp::as_str);
    std::iter::once(shape.aim.as_str()).chain(wake).collect()
}

/// The values of `client_faults` a run asking for this stall alone lists: its aim and wake-up
/// op (none for a stall without a shape, which any stall meets).
pub(crate) fn settings_asked(plan: &Plan) -> Vec<&'static str> {
    shapes_asked(plan)
}

pub(crate) fn renumber(_plan: &mut Plan, _to: &dyn Fn(usize) -> usize) {}

/// A stall for the next lock holder to take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallRequest {
    pub length: Duration,
    /// The planned fault's id, for the holder's ops.
    pub fault: String,
    /// The ops the holder records when the stall starts and ends.
    pub ops: [&'static str; 2],
    /// Its shape (`None`: a schedule from before shapes).
    pub shape: Option<ClientFault>,
}

/// Where stall requests go: the client workers' board.
pub trait ClientStalls: Send + Sync {
    /// Asks the next holder to stall; the request lapses at `deadline`.
    fn request(&self, stall: StallRequest, deadline: Instant);
    /// Withdraws any outstanding request.
    fn cancel(&self);
}

/// What a planned fault carries for this family, asked of any fault.
impl PlannedFault {
    /// For a client-pause, how long the stall request waits for a lock holder to take it.
    pub fn window_ms(&self) -> Option<u64> {
        match &self.payload {
            Payload::ClientPause(c) => Some(c.window_ms),
            _ => None,
        }
    }

    /// For a client-pause, its shape (`None` also for a schedule written before shapes).
    pub fn client(&self) -> Option<ClientFault> {
        match &self.payload {
            Payload::ClientPause(c) => c.shape,
            _ => None,
        }
    }
}

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    let length = Duration::from_millis(fault.length_ms);
    let window = Duration::from_millis(fault.window_ms().unwrap_or(fault.length_ms));
    ctx.stalls.request(
        StallRequest {
            length,
            fault: fault.id.clone(),
            ops: [FAMILY.opens, FAMILY.closes],
            shape: fault.client(),
        },
        Instant::now() + window,
    );
    ctx.set_active(Some("client-pause".into()));
    ctx.hold(length.min(window)).await;
    Ok(())
}

/// A request nobody took is withdrawn (a stall in progress runs out on its own: a paused
/// program does not know the test is ending).
pub async fn heal(h: &Healer<'_>) -> Result<(), Error> {
    h.stalls.cancel();
    Ok(())
}
