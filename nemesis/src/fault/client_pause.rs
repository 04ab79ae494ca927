//! `client-pause`: a lock holder stalls past its lease, then carries on with its old token (a
//! GC pause), or a client waiting for a lock stalls while its acquire is outstanding. The
//! plan's [`ClientFault`] says what the stall is aimed at and what the holder wakes into. The
//! nemesis only asks ([`ClientStalls`]); the client that takes the request records the stall's
//! start and stop itself, with its process, lock, token and shape, under the op names given
//! here and the fault's id.

use super::{Ctx, Healer};
use crate::schedule::{ClientFault, PlannedFault};
use crate::Error;
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

pub const START: &str = "start-client-pause";
pub const STOP: &str = "stop-client-pause";

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

pub async fn run<W: Write + Send>(ctx: &mut Ctx<W>, fault: &PlannedFault) -> Result<(), Error> {
    let length = Duration::from_millis(fault.length_ms);
    let window = Duration::from_millis(fault.window_ms().unwrap_or(fault.length_ms));
    ctx.stalls.request(
        StallRequest {
            length,
            fault: fault.id.clone(),
            ops: [START, STOP],
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
