//! `clock`: skew the nodes' clocks ([`NodeClock`]: a control page its patched processes read,
//! or libfaketime's control file): a bump, a strobe between the skew and the true time, or a
//! fast or slow rate; hold; set right. After each change every skewed node's clock is observed
//! and the offset it really shows is recorded (`clock-observed`), so the history says what the
//! service's clocks did, not only what was asked: through the node's `/v1/time` where it
//! answers one, else (vDSO backend) the offset the node's own patched code applied to its next
//! wall-clock read.

use super::{variant_need, Asked, Ctx, Facts, Healer, Here};
use crate::clock::{Backend, NodeClock};
use crate::named::{self, named_enum};
use crate::scenario::{cell, Aimed, CellPlan, Profile, Target};
use crate::schedule::file::{at, needs_nodes, RawFault, END_MS_MAX};
use crate::schedule::{Drawn, Draws, FaultKind, Payload, PlannedFault, ScheduleError};
use crate::Error;
use history::coverage::{Cell, Need};
use history::{Aim, FaultFamily, Field, FieldType, OpValue, Recorder};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

/// A clock fault carries its change.
pub type Plan = ClockFault;

named_enum! {
    /// What a clock fault does to the node's clock.
    pub enum ClockMode: "clock fault" {
        /// Jump forward by the bump.
        BumpForward => "bump-forward",
        /// Jump back by the bump.
        BumpBack => "bump-back",
        /// Oscillate between the true time and the bump, several times a second.
        Strobe => "strobe",
        /// Run faster by the rate factor.
        Fast => "fast",
        /// Run slower by the rate factor.
        Slow => "slow",
    }
}

/// Parses `--clock-faults`: a comma-separated list of clock modes.
pub fn parse_clock_modes(s: &str) -> Result<Vec<ClockMode>, String> {
    named::parse_list(s)
}

/// A clock fault's change: a step of `delta_ms` (bumps; strobe flips between the true time
/// and the step) or a rate (fast, slow).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockFault {
    pub mode: ClockMode,
    pub delta_ms: Option<i64>,
    pub rate: Option<f64>,
}

/// Its entry in history's table of families (registered by its `families!` line): one coverage
/// cell per `mode`; `scope` `all` is a cell of its own. Its fields include those of its
/// `clock-observed` instants (`realtime_offset_ms`, `monotonic_ms`, `observed_by`).
pub const FAMILY: FaultFamily = FaultFamily {
    kind: "clock",
    opens: "start-clock",
    closes: "stop-clock",
    colour: "#1c7ed6",
    aim: Aim::ClockUnderLease,
    variant_field: "mode",
    per_role: true,
    rolls: false,
    scoped: true,
    fields: &[
        Field::new("mode", FieldType::Str),
        Field::new(FaultFamily::SCOPE, FieldType::Str),
        Field::new("delta_ms", FieldType::I64),
        Field::new("rate", FieldType::Number),
        Field::new("realtime_offset_ms", FieldType::I64),
        Field::new("monotonic_ms", FieldType::U64),
        Field::new("observed_by", FieldType::Str),
    ],
};

/// It moves the clocks the service's processes read: the nodes start with a clock the harness
/// controls, which on an ssh host needs ptrace; `--clock-faults` chooses the modes drawn from.
pub const FACTS: Facts = Facts {
    moves_clocks: true,
    tools: &["ptrace"],
    settings: &["clock_faults"],
    ..Facts::ON_NODES
};

/// Which backend runs here (the vDSO, else libfaketime), or why neither does.
pub fn here() -> Here {
    match Backend::detect() {
        Ok(Backend::Vdso) => Here::ready(
            "vdso backend: each node's processes patched through ptrace to read a control page \
             (x86_64); reaches Go, Python, Rust, C and static binaries",
        ),
        Ok(Backend::Faketime(_)) => Here::ready(
            "libfaketime backend (the vDSO one cannot run here); \
             per-node control files; does not reach Go or static binaries",
        ),
        Err(why) => Here {
            missing: Some(why),
            note: "patched vDSO clocks (x86_64, ptrace), or libfaketime",
        },
    }
}

/// The clock directions that can end a lease early or reorder what a clock orders on a
/// service that reads its clock wrongly; a slow clock only makes leases last longer, so a run
/// whose only clock fault was slow has not tried the clock fault's harmful directions.
fn harmful() -> Vec<String> {
    let modes = ClockMode::ALL.into_iter().filter(|m| *m != ClockMode::Slow);
    modes.map(|m| m.as_str().to_string()).collect()
}

/// Each mode `--clock-faults` asked for, or one of the harmful ones (on the primary, if the
/// run aimed there).
pub fn requested(asked: &Asked<'_>) -> Vec<Need> {
    let modes = (asked.list)(FACTS.settings[0]);
    let mut needs = Vec::new();
    if modes.is_empty() {
        needs.push(asked.on_role(Need {
            label: format!(
                "{} (a step or a fast clock: a slow one only lengthens leases, so it does \
                 not count however often it ran)",
                FAMILY.kind
            ),
            kind: FAMILY.kind.into(),
            variants: harmful(),
            times: 1,
            ..Need::default()
        }));
    }
    for m in modes {
        needs.push(asked.on_role(variant_need(FAMILY.kind, m)));
    }
    needs
}

/// Each chosen mode (every one by default) on each node role.
pub fn suite_cells(t: &Target) -> Vec<CellPlan> {
    let modes: &[ClockMode] = if t.clock_modes.is_empty() {
        &ClockMode::ALL
    } else {
        &t.clock_modes
    };
    let mut out = Vec::new();
    for m in modes {
        for r in t.roles() {
            out.push(cell(FAMILY.kind, m.as_str(), "", r, 3, Profile::Plain));
        }
    }
    out
}

/// A change of the cell's mode, lasting several leases.
pub fn aim(
    t: &Target,
    c: &Cell,
    role_node: Vec<usize>,
    ttl: u64,
    _rng: &mut ChaCha8Rng,
) -> Option<Aimed> {
    let mode: ClockMode = c.variant.parse().ok()?;
    Some(Aimed {
        length_ms: ttl * 3,
        nodes: role_node,
        payload: Payload::Clock(change(mode, t.clock_bump_ms, t.clock_rate)),
        after_ms: 0,
    })
}

/// After each change: the offset a node's `/v1/time` really showed.
pub const OBSERVED: &str = "clock-observed";

/// A change of the picked nodes' clocks, of a mode drawn from the chosen ones, long enough for
/// several leases to be judged on the skewed clock.
pub(crate) fn draw(d: &mut Draws<'_>, picked: Vec<usize>) -> Drawn {
    let ttl = d.ttl_ms;
    let length_ms = d.rng.random_range(ttl * 2..=ttl * 4);
    let modes: &[ClockMode] = if d.cfg.clock_modes.is_empty() {
        &ClockMode::ALL
    } else {
        &d.cfg.clock_modes
    };
    let mode = modes[d.rng.random_range(0..modes.len())];
    Drawn {
        length_ms,
        nodes: picked,
        payload: Payload::Clock(change(mode, d.cfg.clock_bump_ms, d.cfg.clock_rate)),
        recovery_ms: 0,
    }
}

/// The change a clock fault of `mode` makes: bumps and strobes step by `bump_ms` (back: the
/// other way), a fast clock runs `rate` times as fast and a slow one `1 / rate`.
pub fn change(mode: ClockMode, bump_ms: u64, rate: f64) -> ClockFault {
    let bump = bump_ms as i64;
    let (delta_ms, rate) = match mode {
        ClockMode::BumpForward | ClockMode::Strobe => (Some(bump), None),
        ClockMode::BumpBack => (Some(-bump), None),
        ClockMode::Fast => (None, Some(rate)),
        ClockMode::Slow => (None, Some(1.0 / rate)),
    };
    ClockFault {
        mode,
        delta_ms,
        rate,
    }
}

/// A clock fault's keys in `schedule.json`: `mode`, `delta_ms` and `rate`, the change.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Keys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delta_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
}

/// `mode`, then the step (`delta_ms`) of a bump or strobe, or the `rate` of a fast or slow
/// clock: the other of the two is refused.
pub(crate) fn read(
    id: &str,
    _raw: &RawFault,
    raw: Keys,
    nodes: &[usize],
) -> Result<Plan, ScheduleError> {
    needs_nodes(id, FaultKind::Clock, nodes)?;
    let mode: ClockMode = raw
        .mode
        .as_deref()
        .ok_or_else(|| at(id, "a clock fault needs `mode`"))?
        .parse()
        .map_err(|e: String| at(id, e))?;
    let (delta_ms, rate) = match mode {
        ClockMode::BumpForward | ClockMode::BumpBack | ClockMode::Strobe => {
            (Some(read_step(id, &raw, mode)?), None)
        }
        ClockMode::Fast | ClockMode::Slow => (None, Some(read_rate(id, &raw, mode)?)),
    };
    Ok(ClockFault {
        mode,
        delta_ms,
        rate,
    })
}

/// A bump's or a strobe's `delta_ms`: forward > 0, back < 0, strobe not 0.
fn read_step(id: &str, raw: &Keys, mode: ClockMode) -> Result<i64, ScheduleError> {
    if raw.rate.is_some() {
        return Err(at(
            id,
            format!("`rate` is for fast and slow clocks, not {mode}"),
        ));
    }
    let d = raw
        .delta_ms
        .ok_or_else(|| at(id, format!("a {mode} clock fault needs `delta_ms`")))?;
    let ok = match mode {
        ClockMode::BumpForward => d > 0,
        ClockMode::BumpBack => d < 0,
        _ => d != 0,
    };
    if !ok || d.unsigned_abs() > END_MS_MAX {
        return Err(at(
            id,
            format!("delta_ms {d} does not fit {mode} (forward > 0, back < 0, strobe not 0; at most 30 days)"),
        ));
    }
    Ok(d)
}

/// A fast or slow clock's `rate`: above 1 for fast, below for slow.
fn read_rate(id: &str, raw: &Keys, mode: ClockMode) -> Result<f64, ScheduleError> {
    if raw.delta_ms.is_some() {
        return Err(at(
            id,
            format!("`delta_ms` is for bumps and strobes, not {mode}"),
        ));
    }
    let rate = raw
        .rate
        .ok_or_else(|| at(id, format!("a {mode} clock fault needs `rate`")))?;
    let ok = match mode {
        ClockMode::Fast => rate > 1.0 && rate <= 1000.0,
        _ => (0.001..1.0).contains(&rate),
    };
    if !ok {
        return Err(at(
            id,
            format!("rate {rate} does not fit {mode} (fast: above 1, at most 1000; slow: below 1, at least 0.001)"),
        ));
    }
    Ok(rate)
}

pub(crate) fn write(plan: &Plan) -> Keys {
    Keys {
        mode: Some(plan.mode.as_str().to_string()),
        delta_ms: plan.delta_ms,
        rate: plan.rate,
    }
}

/// A clock change names no nodes beyond its own.
pub(crate) fn nodes_named(_plan: &Plan) -> Vec<usize> {
    Vec::new()
}

pub(crate) fn shapes_asked(_plan: &Plan) -> Vec<&'static str> {
    Vec::new()
}

/// The value of `clock_faults` a run asking for this fault alone lists: its mode.
pub(crate) fn settings_asked(plan: &Plan) -> Vec<&'static str> {
    vec![plan.mode.as_str()]
}

pub(crate) fn renumber(_plan: &mut Plan, _to: &dyn Fn(usize) -> usize) {}

/// How often a strobing clock flips.
const STROBE_PERIOD: Duration = Duration::from_millis(200);

/// How long an observation through the control page waits for the node to read its clock.
const OBSERVE_LIMIT: Duration = Duration::from_millis(300);

/// What a planned fault carries for this family, asked of any fault.
impl PlannedFault {
    /// For a clock fault, what it does to the clock.
    pub fn clock(&self) -> Option<ClockFault> {
        match &self.payload {
            Payload::Clock(c) => Some(*c),
            _ => None,
        }
    }
}

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    let change = fault
        .clock()
        .ok_or_else(|| Error::msg(format!("fault {}: a clock fault without a mode", fault.id)))?;
    let names = ctx.names(&fault.nodes).join(",");
    ctx.set_active(Some(format!("clock {} {names}", change.mode)));
    let picked = &fault.nodes;
    let mode = change.mode;
    let length = Duration::from_millis(fault.length_ms);
    let delta_s = change.delta_ms.unwrap_or(0) as f64 / 1000.0;
    let rate = change.rate.unwrap_or(1.0);
    let mut value = OpValue::default()
        .with_extra("nodes", json!(ctx.names(picked)))
        .with_extra("roles", json!(ctx.roles(picked)))
        .with_extra("mode", json!(mode.as_str()))
        .with_extra("scope", json!(ctx.clock_scope))
        .with_extra("length_ms", json!(length.as_millis() as u64))
        .with_extra("fault", json!(fault.id));
    value = match (change.delta_ms, change.rate) {
        (Some(d), _) => value.with_extra("delta_ms", json!(d)),
        (None, Some(r)) => value.with_extra("rate", json!(r)),
        (None, None) => value,
    };
    let mut before_s = Vec::with_capacity(picked.len());
    for &i in picked {
        let clock = ctx.clocks[i]
            .as_ref()
            .ok_or_else(|| Error::msg("clock faults need the nodes started with a clock"))?;
        before_s.push(clock.offset_s(Instant::now()));
    }
    ctx.record(FAMILY.opens, value.clone())?;
    for (k, &i) in picked.iter().enumerate() {
        let clock = ctx.clocks[i].as_mut().expect("checked above");
        match mode {
            ClockMode::BumpForward | ClockMode::BumpBack => clock.bump(delta_s)?,
            ClockMode::Strobe => clock.set_offset(before_s[k] + delta_s)?,
            ClockMode::Fast | ClockMode::Slow => clock.set_rate(rate)?,
        }
    }
    observe(ctx, picked, &fault.id).await?;
    let until = Instant::now() + length;
    if mode == ClockMode::Strobe {
        // Flip between the skew and the true time; bounded by the fault's length.
        let mut skewed = true;
        while !ctx
            .sleep_or_stop((Instant::now() + STROBE_PERIOD).min(until))
            .await
            && Instant::now() < until
        {
            skewed = !skewed;
            for (k, &i) in picked.iter().enumerate() {
                let clock = ctx.clocks[i].as_mut().expect("checked above");
                clock.set_offset(before_s[k] + if skewed { delta_s } else { 0.0 })?;
            }
        }
    } else {
        ctx.sleep_or_stop(until).await;
    }
    for (k, &i) in picked.iter().enumerate() {
        let clock = ctx.clocks[i].as_mut().expect("checked above");
        match mode {
            // A clock that ran fast or slow gets the true rate back without stepping back: a
            // monotonic clock never goes backwards, and a wall clock being disciplined slews.
            ClockMode::Fast | ClockMode::Slow => clock.set_rate(1.0)?,
            _ => clock.set_offset(before_s[k])?,
        }
    }
    observe(ctx, picked, &fault.id).await?;
    ctx.record(FAMILY.closes, value)
}

/// Nothing is left: every clock fault ends with its clocks set right, also when the run stops
/// (a fast or slow clock with its true rate, keeping the offset it gained: see `run`).
pub async fn heal(_h: &Healer<'_>) -> Result<(), Error> {
    Ok(())
}

async fn observe<W: Write + Send>(
    ctx: &Ctx<W>,
    picked: &[usize],
    fault: &str,
) -> Result<(), Error> {
    for &i in picked {
        let url = ctx.nodes[i].lock().await.base_url();
        observe_one(
            &ctx.recorder,
            &ctx.ids[i],
            &url,
            ctx.clocks[i].as_ref(),
            fault,
        )
        .await?;
    }
    Ok(())
}

/// Reads the node's `/v1/time` and records the offset of its realtime clock from the
/// harness's (midpoint of the request), and its raw monotonic reading; a node without
/// `/v1/time` is observed through its control page (`observed_by: "vdso"`).
async fn observe_one<W: Write + Send>(
    recorder: &Recorder<W>,
    id: &str,
    url: &str,
    clock: Option<&NodeClock>,
    fault: &str,
) -> Result<(), Error> {
    let unix_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    };
    let before = unix_ms();
    let answer = async {
        let body: serde_json::Value = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .no_proxy()
            .build()?
            .get(format!("{url}/v1/time"))
            .send()
            .await?
            .json()
            .await?;
        Ok::<_, reqwest::Error>(body)
    }
    .await;
    let after = unix_ms();
    let mut v = OpValue::default()
        .with_extra("nodes", json!([id]))
        .with_extra("fault", json!(fault));
    // The service's own answer, if it has the realtime field.
    let answered = match answer {
        Ok(body) => match body.get("realtime_ms").and_then(serde_json::Value::as_i64) {
            // `monotonic_ms` as answered, when it is what the protocol says (ms, an unsigned
            // integer): the history's reader refuses a nemesis field of another type.
            Some(rt) => Ok((rt, body.get("monotonic_ms").filter(|m| m.is_u64()).cloned())),
            None => Err("its /v1/time answer has no realtime_ms".to_string()),
        },
        Err(e) => Err(format!("no /v1/time: {e}")),
    };
    match (answered, clock) {
        (Ok((rt, mono)), _) => {
            v = v.with_extra("realtime_offset_ms", json!(rt - (before + after) / 2));
            if let Some(m) = mono {
                v = v.with_extra("monotonic_ms", m);
            }
        }
        (Err(why), Some(c)) if c.page().is_some() => match c.observe_offset_ms(OBSERVE_LIMIT).await
        {
            Some(ms) => {
                v = v
                    .with_extra("realtime_offset_ms", json!(ms))
                    .with_extra("observed_by", json!("vdso"))
            }
            None => v = v.with_error(format!("{why}, and no clock read seen on its page")),
        },
        // The service may not answer /v1/time (it is optional): say so, carry on.
        (Err(why), _) => v = v.with_error(why),
    }
    recorder.nemesis(OBSERVED, v)?;
    Ok(())
}
