//! `clock`: skew the nodes' clocks through libfaketime (each node runs with the library
//! preloaded and its own control file, [`NodeClock`]): a bump, a strobe between the skew and
//! the true time, or a fast or slow rate; hold; set right. After each change every skewed
//! node's `/v1/time` is read and the offset it really shows is recorded (`clock-observed`), so
//! the history says what the service's clocks did, not only what was asked.

use super::{Ctx, Healer};
use crate::clock::{faketime_env, ClockScope, NodeClock};
use crate::schedule::{ClockMode, PlannedFault};
use crate::Error;
use history::{OpValue, Recorder};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

pub const START: &str = "start-clock";
pub const STOP: &str = "stop-clock";
/// After each change: the offset a node's `/v1/time` really showed.
pub const OBSERVED: &str = "clock-observed";

/// How often a strobing clock flips.
const STROBE_PERIOD: Duration = Duration::from_millis(200);

/// Before a node first starts: its control file (libfaketime reads it from the first clock
/// call on), true for now, and the environment that makes the node's clock follow it.
pub fn prepare(
    node_dir: &Path,
    libfaketime: &Path,
    scope: ClockScope,
) -> Result<(NodeClock, Vec<(String, String)>), Error> {
    let control = node_dir.join("faketime.ctl");
    std::fs::create_dir_all(node_dir)?;
    let clock = NodeClock::create(control.clone(), Instant::now())?;
    Ok((clock, faketime_env(libfaketime, &control, scope)))
}

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    let change = fault
        .clock
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
        .with_extra("mode", json!(mode.as_str()))
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
            .ok_or_else(|| Error::msg("clock faults need the nodes started under libfaketime"))?;
        before_s.push(clock.offset_s(Instant::now()));
    }
    ctx.record(START, value.clone())?;
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
    ctx.record(STOP, value)
}

/// Nothing is left: every clock fault ends with its clocks set right, also when the run stops.
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
        observe_one(&ctx.recorder, &ctx.ids[i], &url, fault).await?;
    }
    Ok(())
}

/// Reads the node's `/v1/time` and records the offset of its realtime clock from the
/// harness's (midpoint of the request), and its raw monotonic reading.
async fn observe_one<W: Write + Send>(
    recorder: &Recorder<W>,
    id: &str,
    url: &str,
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
    match answer {
        Ok(body) => {
            if let Some(rt) = body.get("realtime_ms").and_then(serde_json::Value::as_i64) {
                v = v.with_extra("realtime_offset_ms", json!(rt - (before + after) / 2));
            }
            if let Some(m) = body.get("monotonic_ms") {
                v = v.with_extra("monotonic_ms", m.clone());
            }
        }
        // The service may not answer /v1/time (it is optional): say so, carry on.
        Err(e) => v = v.with_error(format!("no /v1/time: {e}")),
    }
    recorder.nemesis(OBSERVED, v)?;
    Ok(())
}
