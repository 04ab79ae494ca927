//! A seeded simulator of a *correct* system: a lock service with leases and fencing tokens, a
//! fenced store in mode `all`, and the counter workload, driven by several clients while a
//! nemesis pauses, partitions, kills and skews the service and stalls holders past their lease.
//!
//! Its histories are what a correct service may produce, so every checker must find them
//! valid; the property and mutation tests and the throughput example are built on them.
//! Each op takes effect at one point inside its `[invoke, complete]` window (or, when its answer
//! is lost, maybe at no point, maybe after the client gave up), which is what the checkers must
//! be robust to. Same seed and parameters, same history.

use history::{Aim, FaultFamily, Op, OpType, OpValue, Process, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct GenParams {
    /// Concurrent client workers (each may crash and continue under new process numbers).
    pub clients: usize,
    /// Locks; lock `L<i>` protects the counter register `k<i>`.
    pub locks: usize,
    /// Roughly how many events to record before winding down (the wind-down adds a few).
    pub events: usize,
    /// The lease every acquire and renew asks for.
    pub ttl_ms: u64,
    /// The chance that a client op's answer is lost (the op ends `info`, the client crashes).
    pub info_rate: f64,
    /// The chance that a holder stalls past its lease just before writing, then writes with its
    /// old token anyway (the GC-pause case; mode `all` must reject the write if anyone else
    /// used the store meanwhile).
    pub client_pause_rate: f64,
    /// Whether the nemesis pauses, partitions, kills/restarts and skews the lock service.
    pub nemesis: bool,
    /// Whether ok acquires carry `lease_last_ok_ns` / `lease_ttl_ms` evidence.
    pub lease_evidence: bool,
    /// The longest usual one-way network latency; a few ops are up to 5x slower. At most a
    /// tenth of `ttl_ms`, and 5x of it must stay under the liveness grace, since a lost acquire
    /// may take effect that long after its invoke.
    pub latency_max_ms: u64,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            clients: 4,
            locks: 2,
            events: 2_000,
            ttl_ms: 1_000,
            info_rate: 0.02,
            client_pause_rate: 0.02,
            nemesis: true,
            lease_evidence: true,
            latency_max_ms: 20,
        }
    }
}

impl GenParams {
    /// Parameters that vary with `seed` (clients, locks, faults, evidence), with losses and
    /// stalls frequent enough to reach the model's corners in a few hundred events: the corpus
    /// the equivalence tests run over.
    pub fn varied(seed: u64, events: usize) -> GenParams {
        GenParams {
            clients: 1 + (seed as usize % 6),
            locks: 1 + (seed as usize % 3),
            events,
            info_rate: 0.05,
            client_pause_rate: 0.05,
            nemesis: seed % 2 == 0,
            lease_evidence: seed % 3 != 0,
            ..GenParams::default()
        }
    }
}

const MS: u64 = 1_000_000;

/// The whole history of one simulated run.
pub fn correct_history(seed: u64, params: &GenParams) -> Vec<Op> {
    assert!(
        params.clients >= 1 && params.locks >= 1,
        "need a client and a lock"
    );
    assert!(
        params.ttl_ms >= 20,
        "a ttl under 20 ms leaves no room for latency"
    );
    let mut sim = Sim::new(seed, params);
    sim.run(&mut |_: &[Op]| {});
    sim.ops
}

/// The same history as [`correct_history`] (same seed and parameters, same ops), handed to
/// `sink` in order, a few thousand ops at a time, so a history of any length is generated in
/// bounded memory.
pub fn correct_history_into(seed: u64, params: &GenParams, sink: &mut dyn FnMut(&[Op])) {
    assert!(
        params.clients >= 1 && params.locks >= 1,
        "need a client and a lock"
    );
    assert!(
        params.ttl_ms >= 20,
        "a ttl under 20 ms leaves no room for latency"
    );
    let mut sim = Sim::new(seed, params);
    sim.streaming = true;
    sim.run(sink);
    sink(&sim.ops);
}

/// Ops kept before a streaming generator hands them on.
const STREAM_BATCH: usize = 4_096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
    Acquire,
    Renew,
    Release,
    Read,
    Write,
}

impl Func {
    fn f(self) -> F {
        match self {
            Func::Acquire => F::Acquire,
            Func::Renew => F::Renew,
            Func::Release => F::Release,
            Func::Read => F::Read,
            Func::Write => F::Write,
        }
    }
    fn is_lock_op(self) -> bool {
        matches!(self, Func::Acquire | Func::Renew | Func::Release)
    }
}

/// The grant a client believes it holds, and so what it does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hold {
    lock: usize,
    token: u64,
    /// Invoke time of the last ok grant or renew: the client renews ttl/3 after it.
    renewed_at_ns: u64,
    step: Step,
    /// Read-write cycles done under this grant.
    cycles: u32,
    /// Just woke from a stall: it writes at once, believing no time passed.
    woke: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Read,
    Write(i64),
    Release,
}

/// One client op, from its invoke to its (possibly late) effect.
#[derive(Debug, Clone)]
struct Request {
    client: usize,
    serial: u64,
    process: u64,
    func: Func,
    lock: usize,
    token: u64,
    value: i64,
    invoke_ns: u64,
    /// The answer will be lost: the op ends info whatever happens.
    lost: bool,
    /// What still refers to it: the client's op in flight, its effect still to come.
    refs: u8,
}

#[derive(Debug, Clone)]
struct InFlight {
    serial: u64,
    request: usize,
    /// Set when the effect produced an answer that will reach the client.
    answer: Option<(OpType, OpValue)>,
}

struct Client {
    process: u64,
    /// `None`: idle, it acquires next.
    hold: Option<Hold>,
    in_flight: Option<InFlight>,
    serial: u64,
}

#[derive(Debug, Clone, Copy)]
struct Lease {
    process: u64,
    token: u64,
    expires_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Pause,
    Partition,
    Kill,
    Clock,
}

impl Fault {
    /// The family the simulated fault is written as: the simulator models a fault by what it
    /// does to the service (the service frozen, its leases lost with a restart, a clock moved,
    /// a link cut), which is what a family's [`Aim`] says, so it asks the registered families
    /// for that rather than naming one.
    fn family(self) -> &'static FaultFamily {
        family_aiming(match self {
            Fault::Pause => Aim::FrozenPastLeaseBound,
            Fault::Partition => Aim::LeaseLiveDuring,
            Fault::Kill => Aim::BackBeforeLeaseEnds,
            Fault::Clock => Aim::ClockUnderLease,
        })
    }
}

/// The first registered family (in the nemesis's `families!` order) whose faults aim at
/// `aim`: a partition before a lossy link. A binary that simulates must link the nemesis,
/// whose modules register the families; without it the simulator cannot name its ops.
fn family_aiming(aim: Aim) -> &'static FaultFamily {
    FaultFamily::all()
        .iter()
        .copied()
        .find(|f| f.aim == aim)
        .unwrap_or_else(|| {
            panic!("no fault family aims at {aim:?} in this build: link the nemesis (`use nemesis as _;`)")
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Invoke(usize),
    Effect(usize),
    Complete(usize, u64),
    Timeout(usize, u64),
    Wake(usize),
    Nemesis,
}

struct Sim<'p> {
    p: &'p GenParams,
    rng: ChaCha8Rng,
    now_ns: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    queued: u64,
    ops: Vec<Op>,
    /// Ops emitted so far (`ops` may have been handed on).
    emitted: u64,
    streaming: bool,
    clients: Vec<Client>,
    /// The requests something still refers to (an op in flight, an effect to come), by id:
    /// each is dropped when its last reference goes, so a long history is generated in
    /// bounded memory.
    requests: crate::FxMap<usize, Request>,
    next_request: usize,
    next_process: u64,
    // the lock service
    leases: Vec<Option<Lease>>,
    next_token: Vec<u64>,
    max_ttl_ms: u64,
    recovering_until_ns: u64,
    /// Effects held back by a pause, applied in order when it ends.
    deferred: Vec<usize>,
    fault: Option<Fault>,
    // the fenced store, per key: (value, fence); `seq` counts accepted writes
    store: Vec<(i64, u64)>,
    seq: u64,
    winding_down: bool,
}

impl<'p> Sim<'p> {
    fn new(seed: u64, p: &'p GenParams) -> Sim<'p> {
        let clients = (0..p.clients)
            .map(|i| Client {
                process: i as u64,
                hold: None,
                in_flight: None,
                serial: 0,
            })
            .collect();
        Sim {
            p,
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ns: 0,
            queue: BinaryHeap::new(),
            queued: 0,
            ops: Vec::with_capacity(p.events.min(1 << 20) + 64),
            emitted: 0,
            streaming: false,
            clients,
            requests: crate::FxMap::default(),
            next_request: 0,
            next_process: p.clients as u64,
            leases: vec![None; p.locks],
            next_token: vec![1; p.locks],
            max_ttl_ms: 0,
            recovering_until_ns: 0,
            deferred: Vec::new(),
            fault: None,
            store: vec![(0, 0); p.locks],
            seq: 0,
            winding_down: false,
        }
    }

    fn ttl_ns(&self) -> u64 {
        self.p.ttl_ms * MS
    }

    fn timeout_ns(&self) -> u64 {
        // Longer than most round trips (so most ops complete) yet short against the lease, so a
        // client that timed out and moved on still leaves lease-sized gaps to check.
        (self.ttl_ns() / 4).max(6 * self.p.latency_max_ms * MS)
    }

    fn at(&mut self, time_ns: u64, ev: Ev) {
        self.queued += 1;
        self.queue.push(Reverse((time_ns, self.queued, ev)));
    }

    /// One-way latency: usually up to `latency_max_ms`, sometimes five times that.
    fn latency_ns(&mut self) -> u64 {
        let max = self.p.latency_max_ms.max(1) * MS;
        let max = if self.rng.random_bool(0.05) {
            5 * max
        } else {
            max
        };
        self.rng.random_range(0..=max)
    }

    fn emit(&mut self, process: Process, kind: OpType, f: F, value: OpValue) -> &mut Op {
        let op = Op::new(self.emitted, self.now_ns, process, kind, f).with_value(value);
        self.emitted += 1;
        self.ops.push(op);
        self.ops.last_mut().expect("just pushed")
    }

    fn nemesis(&mut self, f: &str, value: Value) {
        let mut v = OpValue::default();
        if let Value::Object(map) = value {
            v.extra = map;
        }
        self.emit(Process::Nemesis, OpType::Info, F::Other(f.to_string()), v);
    }

    fn run(&mut self, sink: &mut dyn FnMut(&[Op])) {
        for c in 0..self.clients.len() {
            let t = self.rng.random_range(0..=self.p.latency_max_ms * MS);
            self.at(t, Ev::Invoke(c));
        }
        if self.p.nemesis {
            let t = self.rng.random_range(self.ttl_ns() / 2..=2 * self.ttl_ns());
            self.at(t, Ev::Nemesis);
        }
        // Every event is handled once; each schedules at most a few more, and none are
        // scheduled once the wind-down has drained the clients, so this bound is generous.
        let limit = 50 * (self.p.events as u64 + 1_000);
        let mut steps = 0u64;
        while let Some(Reverse((t, _, ev))) = self.queue.pop() {
            steps += 1;
            assert!(steps <= limit, "simulation did not wind down");
            self.now_ns = t;
            if self.streaming && self.ops.len() >= STREAM_BATCH {
                sink(&self.ops);
                self.ops.clear();
            }
            if !self.winding_down && self.emitted >= self.p.events as u64 {
                self.winding_down = true;
            }
            match ev {
                Ev::Invoke(c) => self.invoke(c),
                Ev::Effect(r) => self.effect(r),
                Ev::Complete(c, s) => self.complete(c, s),
                Ev::Timeout(c, s) => self.timeout(c, s),
                Ev::Wake(c) => self.wake(c),
                Ev::Nemesis => self.nemesis_step(),
            }
        }
        self.final_reads();
    }

    fn invoke(&mut self, c: usize) {
        if self.winding_down {
            return; // the client stops; the run drains
        }
        let now = self.now_ns;
        let ttl_ns = self.ttl_ns();
        let (func, lock, token, value) = match self.clients[c].hold {
            None => (Func::Acquire, self.rng.random_range(0..self.p.locks), 0, 0),
            Some(h) if !h.woke && now.saturating_sub(h.renewed_at_ns) >= ttl_ns / 3 => {
                (Func::Renew, h.lock, h.token, 0)
            }
            Some(h) => match h.step {
                Step::Read => (Func::Read, h.lock, h.token, 0),
                Step::Write(v) => {
                    if !h.woke && self.rng.random_bool(self.p.client_pause_rate) {
                        self.stall(c);
                        return;
                    }
                    (Func::Write, h.lock, h.token, v)
                }
                Step::Release => (Func::Release, h.lock, h.token, 0),
            },
        };
        if let Some(h) = &mut self.clients[c].hold {
            h.woke = false;
        }
        let client = &mut self.clients[c];
        client.serial += 1;
        let serial = client.serial;
        let process = client.process;
        let mut v = OpValue::default();
        match func {
            Func::Acquire => v.ttl_ms = Some(self.p.ttl_ms),
            Func::Renew => {
                v.token = Some(token);
                v.ttl_ms = Some(self.p.ttl_ms);
            }
            Func::Release | Func::Read => v.token = Some(token),
            Func::Write => {
                v.token = Some(token);
                v.value = Some(value);
            }
        }
        let op = self.emit(Process::Client(process), OpType::Invoke, func.f(), v);
        if func.is_lock_op() {
            op.lock = Some(format!("L{lock}"));
        } else {
            op.key = Some(format!("k{lock}"));
        }
        let lost = self.rng.random_bool(self.p.info_rate);
        let request = self.next_request;
        self.next_request += 1;
        // A lost answer may also mean a lost request: then the op never takes effect.
        let takes_effect = !(lost && self.rng.random_bool(0.5));
        self.requests.insert(
            request,
            Request {
                client: c,
                serial,
                process,
                func,
                lock,
                token,
                value,
                invoke_ns: now,
                lost,
                refs: 1 + u8::from(takes_effect),
            },
        );
        self.clients[c].in_flight = Some(InFlight {
            serial,
            request,
            answer: None,
        });
        if takes_effect {
            let a = self.latency_ns();
            self.at(now + a, Ev::Effect(request));
        }
        let timeout = self.timeout_ns();
        self.at(now + timeout, Ev::Timeout(c, serial));
    }

    /// A holder stalls past its lease (GC pause, SIGSTOP), then goes on with its write.
    fn stall(&mut self, c: usize) {
        let process = self.clients[c].process;
        self.nemesis(
            family_aiming(Aim::ClientStall).opens,
            json!({ "process": process }),
        );
        let ttl = self.ttl_ns();
        let d = self.rng.random_range(ttl + ttl / 5..=3 * ttl);
        self.at(self.now_ns + d, Ev::Wake(c));
    }

    fn wake(&mut self, c: usize) {
        let process = self.clients[c].process;
        self.nemesis(
            family_aiming(Aim::ClientStall).closes,
            json!({ "process": process }),
        );
        if let Some(h) = &mut self.clients[c].hold {
            h.woke = true;
        }
        self.invoke(c);
    }

    fn effect(&mut self, r: usize) {
        let func = self.requests[&r].func;
        if func.is_lock_op() {
            match self.fault {
                Some(Fault::Pause) => {
                    self.deferred.push(r);
                    return;
                }
                Some(Fault::Kill) => return self.release(r),
                Some(Fault::Partition) => {
                    // The request may cross before the cut, but no answer comes back.
                    if self.rng.random_bool(0.5) {
                        self.apply(r);
                    }
                    return self.release(r);
                }
                _ => {}
            }
        }
        let answer = self.apply(r);
        let req = &self.requests[&r];
        let (lost, c, serial) = (req.lost, req.client, req.serial);
        self.release(r);
        if lost {
            return;
        }
        let Some(f) = self.clients[c].in_flight.as_mut() else {
            return;
        };
        if f.serial != serial {
            return; // the client gave up already; the effect came late
        }
        f.answer = Some(answer);
        let b = self.latency_ns();
        self.at(self.now_ns + b, Ev::Complete(c, serial));
    }

    /// One reference to request `r` is gone; the last takes the request with it.
    fn release(&mut self, r: usize) {
        let req = self
            .requests
            .get_mut(&r)
            .expect("a request is kept while referred to");
        req.refs -= 1;
        if req.refs == 0 {
            self.requests.remove(&r);
        }
    }

    /// The service's or store's decision, at this instant.
    fn apply(&mut self, r: usize) -> (OpType, OpValue) {
        let req = self.requests[&r].clone();
        match req.func {
            Func::Acquire => self.apply_acquire(&req),
            Func::Renew | Func::Release => self.apply_lease_op(&req),
            Func::Read | Func::Write => self.apply_store_op(&req),
        }
    }

    /// The lease in force on `lock`, if it has not expired by now.
    fn live_lease(&self, lock: usize) -> Option<Lease> {
        let now = self.now_ns;
        self.leases[lock].filter(|l| l.expires_ns > now)
    }

    /// An acquire: granted with the next token unless recovering or held.
    fn apply_acquire(&mut self, req: &Request) -> (OpType, OpValue) {
        let now = self.now_ns;
        if now < self.recovering_until_ns {
            return refused("recovering");
        }
        if self.live_lease(req.lock).is_some() {
            return refused("held");
        }
        let token = self.next_token[req.lock];
        self.next_token[req.lock] += 1;
        self.max_ttl_ms = self.max_ttl_ms.max(self.p.ttl_ms);
        self.leases[req.lock] = Some(Lease {
            process: req.process,
            token,
            expires_ns: now + self.ttl_ns(),
        });
        let mut v = OpValue::default()
            .with_token(token)
            .with_ttl_ms(self.p.ttl_ms);
        if self.p.lease_evidence {
            v = v.with_evidence(&history::LeaseEvidence {
                lease_last_ok_ns: Some(now),
                lease_ttl_ms: Some(self.p.ttl_ms),
                lease_from_ns: None,
            });
        }
        (OpType::Ok, v)
    }

    /// A renew or release: accepted only from the live lease's holder, with its token.
    fn apply_lease_op(&mut self, req: &Request) -> (OpType, OpValue) {
        let mine = self
            .live_lease(req.lock)
            .is_some_and(|l| l.process == req.process && l.token == req.token);
        if !mine {
            return refused("not-holder");
        }
        if req.func == Func::Renew {
            self.leases[req.lock] = Some(Lease {
                process: req.process,
                token: req.token,
                expires_ns: self.now_ns + self.ttl_ns(),
            });
            (
                OpType::Ok,
                OpValue::default()
                    .with_token(req.token)
                    .with_ttl_ms(self.p.ttl_ms),
            )
        } else {
            self.leases[req.lock] = None;
            (OpType::Ok, OpValue::default().with_token(req.token))
        }
    }

    /// A read or write of the fenced store. Mode `all`: every op raises the fence, anything
    /// below it is refused.
    fn apply_store_op(&mut self, req: &Request) -> (OpType, OpValue) {
        let (value, fence) = self.store[req.lock];
        if req.token < fence {
            return (
                OpType::Fail,
                OpValue::default()
                    .with_error("stale-token")
                    .with_extra("fence", json!(fence)),
            );
        }
        if req.func == Func::Read {
            self.store[req.lock] = (value, req.token);
            (
                OpType::Ok,
                OpValue::default().with_token(req.token).with_value(value),
            )
        } else {
            self.seq += 1;
            self.store[req.lock] = (req.value, req.token);
            (
                OpType::Ok,
                OpValue::default()
                    .with_token(req.token)
                    .with_value(req.value)
                    .with_seq(self.seq),
            )
        }
    }

    fn complete(&mut self, c: usize, serial: u64) {
        let Some(f) = self.clients[c].in_flight.take_if(|f| f.serial == serial) else {
            return;
        };
        let (kind, value) = f.answer.expect("completion scheduled with an answer");
        let req = self.requests[&f.request].clone();
        self.release(f.request);
        let ok = kind == OpType::Ok;
        let read_value = value.value;
        let token = value.token;
        self.emit(Process::Client(req.process), kind, req.func.f(), value);
        let last = self.ops.last_mut().expect("just emitted");
        if req.func.is_lock_op() {
            last.lock = Some(format!("L{}", req.lock));
        } else {
            last.key = Some(format!("k{}", req.lock));
        }
        let again = self.rng.random_bool(0.4);
        let client = &mut self.clients[c];
        client.hold = match (client.hold, req.func, ok) {
            (None, Func::Acquire, true) => Some(Hold {
                lock: req.lock,
                token: token.expect("grants carry a token"),
                renewed_at_ns: req.invoke_ns,
                step: Step::Read,
                cycles: 0,
                woke: false,
            }),
            (Some(_), Func::Release, _) => None,
            (Some(h), Func::Renew, true) => Some(Hold {
                renewed_at_ns: req.invoke_ns,
                ..h
            }),
            // A refused renew means the lease is gone.
            (Some(_), Func::Renew, false) => None,
            // Fenced out: someone newer holds it; release (which should be refused) and move on.
            (Some(h), Func::Read | Func::Write, false) => Some(Hold {
                step: Step::Release,
                ..h
            }),
            (Some(h), Func::Read, true) => Some(Hold {
                step: Step::Write(read_value.unwrap_or(0) + 1),
                ..h
            }),
            (Some(h), Func::Write, true) => Some(Hold {
                step: if h.cycles < 2 && again {
                    Step::Read
                } else {
                    Step::Release
                },
                cycles: h.cycles + 1,
                ..h
            }),
            (h, _, _) => h,
        };
        let think = if self.clients[c].hold.is_none() && !ok {
            // Refused: back off a little before asking again.
            self.rng.random_range(0..=self.ttl_ns() / 8)
        } else if self.clients[c].hold.is_some() && self.rng.random_bool(0.25) {
            // Work while holding, long enough that renewals are due.
            self.rng.random_range(0..=self.ttl_ns() / 2)
        } else {
            self.rng.random_range(0..=self.p.latency_max_ms * MS)
        };
        self.at(self.now_ns + think, Ev::Invoke(c));
    }

    fn timeout(&mut self, c: usize, serial: u64) {
        let Some(f) = self.clients[c].in_flight.take_if(|f| f.serial == serial) else {
            return;
        };
        let req = self.requests[&f.request].clone();
        self.release(f.request);
        let op = self.emit(
            Process::Client(req.process),
            OpType::Info,
            req.func.f(),
            OpValue::default().with_error("timeout"),
        );
        if req.func.is_lock_op() {
            op.lock = Some(format!("L{}", req.lock));
        } else {
            op.key = Some(format!("k{}", req.lock));
        }
        // The process is considered crashed; its worker goes on as a new one.
        let client = &mut self.clients[c];
        client.process = self.next_process;
        self.next_process += 1;
        client.hold = None;
        let think = self.rng.random_range(0..=self.p.latency_max_ms * MS);
        self.at(self.now_ns + think, Ev::Invoke(c));
    }

    fn nemesis_step(&mut self) {
        let nodes = json!({ "nodes": ["n1"] });
        if let Some(fault) = self.fault.take() {
            self.nemesis(fault.family().closes, nodes);
            match fault {
                Fault::Pause => {
                    for r in std::mem::take(&mut self.deferred) {
                        self.at(self.now_ns, Ev::Effect(r));
                    }
                }
                Fault::Kill => {
                    // Leases are not persisted: refuse grants until any lease granted before
                    // the crash has surely expired.
                    self.leases.iter_mut().for_each(|l| *l = None);
                    self.recovering_until_ns = self.now_ns + self.max_ttl_ms * MS;
                }
                Fault::Partition | Fault::Clock => {}
            }
        } else if !self.winding_down {
            let fault = match self.rng.random_range(0..4) {
                0 => Fault::Pause,
                1 => Fault::Partition,
                2 => Fault::Kill,
                _ => Fault::Clock,
            };
            let family = fault.family();
            let value = match fault {
                Fault::Pause | Fault::Kill => nodes,
                // One cut: the node isolated, as its family's variant names it.
                Fault::Partition if !family.variant_field.is_empty() => {
                    let mut v = nodes;
                    v[family.variant_field] = json!("isolate");
                    v
                }
                Fault::Partition => nodes,
                Fault::Clock => {
                    // The step's size was drawn here once, and is still drawn so that a seed
                    // gives the history it gave; no checker reads a step's size, and the
                    // simulator writes no field of the family's own.
                    let _delta_ms: i64 = self.rng.random_range(-500..=500);
                    json!({ "nodes": ["n1"] })
                }
            };
            self.nemesis(family.opens, value);
            self.fault = Some(fault);
        } else {
            return;
        }
        let ttl = self.ttl_ns();
        let next = if self.winding_down && self.fault.is_some() {
            0 // heal at once
        } else if self.fault.is_some() {
            self.rng.random_range(ttl / 10..=ttl)
        } else {
            self.rng.random_range(ttl / 2..=2 * ttl)
        };
        self.at(self.now_ns + next, Ev::Nemesis);
    }

    /// After every fault is healed and the clients are quiet, read each register once.
    fn final_reads(&mut self) {
        let process = self.next_process;
        self.next_process += 1;
        self.now_ns += 2 * self.ttl_ns();
        for k in 0..self.p.locks {
            let v = OpValue {
                is_final: true,
                ..OpValue::default()
            };
            self.emit(Process::Client(process), OpType::Invoke, F::Read, v)
                .key = Some(format!("k{k}"));
            self.now_ns += self.latency_ns() + 1;
            let mut v = OpValue::default().with_value(self.store[k].0);
            v.is_final = true;
            self.emit(Process::Client(process), OpType::Ok, F::Read, v)
                .key = Some(format!("k{k}"));
            self.now_ns += 1;
        }
    }
}

/// A refusal with `error`.
fn refused(error: &str) -> (OpType, OpValue) {
    (OpType::Fail, OpValue::default().with_error(error))
}
