//! `lockpick synth`: writes a synthetic history (docs/history.md), correct by construction
//! (`checkers::gen`), optionally with violations injected at random points
//! (`checkers::inject`), for tests and benchmarks.

use crate::cli::SynthArgs;
use anyhow::{bail, Context, Result};
use checkers::gen::{correct_history, correct_history_into, GenParams};
use checkers::inject::{inject, InjectKind};
use history::{ExitCode, Op};
use std::fs::File;
use std::io::{self, BufWriter, Write};

mod stream;

pub fn synth(a: SynthArgs) -> Result<ExitCode> {
    if a.clients == 0 || a.locks == 0 {
        bail!("--clients and --locks must be at least 1");
    }
    if !(0.0..1.0).contains(&a.info_rate) {
        bail!("--info-rate {}: expected a fraction in [0, 1)", a.info_rate);
    }
    // clap took only the injector's own names (cli.rs, `inject_kinds`).
    let kinds: Vec<InjectKind> = a
        .inject
        .iter()
        .map(|name| InjectKind::parse(name).expect("--inject is one of InjectKind::all()"))
        .collect();
    let params = GenParams {
        clients: a.clients,
        locks: a.locks,
        events: a.events,
        info_rate: a.info_rate,
        nemesis: !a.no_nemesis,
        ..GenParams::default()
    };
    let out: Box<dyn Write> = if a.out == "-" {
        Box::new(io::stdout().lock())
    } else {
        Box::new(File::create(&a.out).with_context(|| format!("cannot create {}", a.out))?)
    };
    let mut out = OpWriter {
        out: BufWriter::with_capacity(1 << 20, out),
        line: Vec::with_capacity(512),
    };
    let bank = match a.workload.as_str() {
        "counter" => false,
        "bank" => true,
        other => bail!("--workload {other}: expected counter or bank"),
    };
    let events = if bank {
        bank_history(&a, &kinds, &mut out)?
    } else if let Some(every) = a.inject_every {
        streamed_injections(&a, &params, &kinds, every, &mut out)?
    } else if kinds.is_empty() {
        // Streams: a history of any length in bounded memory.
        let mut events = 0u64;
        let mut err = None;
        correct_history_into(a.seed, &params, &mut |ops| {
            events += ops.len() as u64;
            if err.is_none() {
                err = out.write(ops).err();
            }
        });
        if let Some(e) = err {
            return Err(e).context("cannot write the history");
        }
        events
    } else {
        injected_history(&a, &params, &kinds, &mut out)?
    };
    out.out.flush().context("cannot write the history")?;
    eprintln!("synth: {events} events (seed {})", a.seed);
    Ok(ExitCode::Valid)
}

/// Ops written one JSON line each.
struct OpWriter {
    out: BufWriter<Box<dyn Write>>,
    /// Reused for every line.
    line: Vec<u8>,
}

impl OpWriter {
    fn write(&mut self, ops: &[Op]) -> io::Result<()> {
        for op in ops {
            self.line.clear();
            serde_json::to_writer(&mut self.line, op).map_err(io::Error::other)?;
            self.line.push(b'\n');
            self.out.write_all(&self.line)?;
        }
        Ok(())
    }
}

/// A bank history, streamed; the events written.
fn bank_history(a: &SynthArgs, kinds: &[InjectKind], out: &mut OpWriter) -> Result<u64> {
    if a.accounts < 2 {
        bail!(
            "--accounts {}: the bank moves money between two accounts",
            a.accounts
        );
    }
    if !kinds.is_empty() {
        bail!("--inject: the injectors work on counter histories; leave out --workload bank");
    }
    let p = checkers::gen_bank::BankParams {
        clients: a.clients,
        accounts: a.accounts,
        events: a.events,
        ..Default::default()
    };
    let mut events = 0u64;
    let mut err = None;
    checkers::gen_bank::bank_history_into(a.seed, &p, &mut |ops| {
        events += ops.len() as u64;
        if err.is_none() {
            err = out.write(ops).err();
        }
    });
    if let Some(e) = err {
        return Err(e).context("cannot write the history");
    }
    Ok(events)
}

/// A counter history streamed with one violation in every stretch of `every` events
/// (`--inject-every`), what went in said on stderr; the events written.
fn streamed_injections(
    a: &SynthArgs,
    params: &GenParams,
    kinds: &[InjectKind],
    every: usize,
    out: &mut OpWriter,
) -> Result<u64> {
    if every == 0 {
        bail!("--inject-every 0: expected a stretch of at least 1 event");
    }
    let mut stretches = stream::Stretches::new(every, kinds, a.seed);
    let mut err = None;
    correct_history_into(a.seed, params, &mut |ops| {
        if err.is_none() {
            err = stretches.push(ops, out).err();
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    stretches.flush(out)?;
    if stretches.injected.is_empty() {
        // A clean history under a name that promises violations would mislead: not kept.
        if a.out != "-" {
            let _ = std::fs::remove_file(&a.out);
        }
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        bail!(
            "--inject {}: no stretch of {every} events offered a place for it (a kind that needs \
             the whole history, such as a lock stuck after everything, takes --inject without \
             --inject-every)",
            names.join(", ")
        );
    }
    let made: Vec<String> = stretches
        .injected
        .iter()
        .map(|(k, n)| format!("{k} x{n}"))
        .collect();
    eprintln!(
        "injected one violation in each stretch of {every} events: {}; {} stretch(es) offered no place",
        made.join(", "),
        stretches.missed
    );
    Ok(stretches.written())
}

/// A counter history with `kinds` injected, each witness tagged (`witness_of`) and said on
/// stderr; the events written.
fn injected_history(
    a: &SynthArgs,
    params: &GenParams,
    kinds: &[InjectKind],
    out: &mut OpWriter,
) -> Result<u64> {
    // Injections look at the whole history to choose their place: held in memory.
    let mut ops = correct_history(a.seed, params);
    for (i, k) in kinds.iter().enumerate() {
        let seed = a.seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1));
        let Some(witness) = inject(&mut ops, *k, seed) else {
            bail!(
                "--inject {}: this history offers no place for it (try more events)",
                k.as_str()
            );
        };
        // Tag the witness in the file (unknown fields are kept and ignored): later
        // injections may insert ops and renumber, so indices are read back at the end.
        for w in witness {
            tag_witness(&mut ops[w as usize], *k);
        }
    }
    for k in kinds {
        let at: Vec<u64> = ops
            .iter()
            .filter(|o| {
                o.extra
                    .get("witness_of")
                    .and_then(|v| v.as_array())
                    .is_some_and(|v| v.iter().any(|t| t == k.as_str()))
            })
            .map(|o| o.index)
            .collect();
        eprintln!("injected {}: witness ops {at:?}", k.as_str());
    }
    out.write(&ops).context("cannot write the history")?;
    Ok(ops.len() as u64)
}

/// Tags `op` in the file as a witness of an injected `kind` (`witness_of`, a list: one op can
/// witness several); readers keep unknown fields and ignore them.
fn tag_witness(op: &mut Op, kind: InjectKind) {
    let tags = op
        .extra
        .entry("witness_of")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let serde_json::Value::Array(v) = tags {
        v.push(kind.as_str().into());
    }
}
