//! `lockpick`: the command-line front end. Flags are parsed into plain structs (`cli`; `run`'s
//! flags from their one table, `flags`), turned into a resolved configuration (`config`), and
//! handed to the runner or the servers.

// mimalloc, not glibc's malloc: a check parses blocks on one thread and frees them on
// another, and glibc's per-thread arenas kept the freed pages, so `lockpick check`'s RSS grew
// with the history's length (83, 102 and 154 MiB at 10M, 30M and 100M events) while its heap's
// peak stayed 57 MB. mimalloc returns cross-thread frees to the page's owner: 98 MiB at 10M and
// at 30M (BENCHMARKS.md). Also what the harness and `lockpick lockd` (run under libfaketime in
// the clock tests) allocate with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod agent_cmd;
mod check_cmd;
mod cli;
mod config;
mod config_file;
mod doctor;
mod export_cmd;
mod flags;
mod live;
mod logging;
mod probe_cmd;
mod report_cmd;
mod requested;
mod run_cmd;
mod runner;
mod shrink;
mod status;
mod suite;
mod synth_cmd;

use anyhow::{Context, Result};
use cli::{Cli, Command, LockdArgs, StoreArgs};
use history::ExitCode;
use std::net::SocketAddr;

fn main() -> std::process::ExitCode {
    // Die quietly on a closed stdout (`lockpick check ... | head`) instead of panicking. A run
    // killed this way still leaves its history, and its nodes die with it (PDEATHSIG).
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
    // Flags that came from a --config file, with the file:line of each: an error about such a
    // value names the file, not a flag the user never typed.
    let (args, origins) = match config_file::expand(std::env::args_os().collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            return std::process::ExitCode::from(ExitCode::Error.code());
        }
    };
    // The word typed after `lockpick`: a usage error points at its own --help if it names a
    // subcommand (looked up only then).
    let typed = args.get(1).and_then(|a| a.to_str()).map(str::to_string);
    let command = cli::command();
    if let Some(e) = cli::value_left_out(&command, &args) {
        eprintln!("error: {e}");
        return std::process::ExitCode::from(ExitCode::Error.code());
    }
    let parsed = command
        .try_get_matches_from(args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return std::process::ExitCode::SUCCESS;
            }
            // clap's usage errors exit 2, which means `unknown` here: report them as 3.
            let first = usage_error_text(&e);
            eprintln!("error: {}{}", origins.locate(&first), suggestion(&e));
            let sub = typed.filter(|t| {
                use clap::CommandFactory;
                Cli::command().get_subcommands().any(|c| c.get_name() == t)
            });
            match sub {
                Some(s) => eprintln!("(see `lockpick {s} --help`)"),
                None => eprintln!("(see `lockpick --help`)"),
            }
            return std::process::ExitCode::from(ExitCode::Error.code());
        }
    };
    match dispatch(cli.command, &origins) {
        Ok(code) => std::process::ExitCode::from(code.code()),
        Err(e) => {
            eprintln!("error: {}", origins.locate(&error_text(&e)));
            std::process::ExitCode::from(ExitCode::Error.code())
        }
    }
}

/// clap's guess at what a misspelt flag, subcommand or value meant, as ` (did you mean
/// `--clients`?)`; empty when it has none. Its own tip is on a later line, which is not shown.
fn suggestion(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let kinds = [
        ContextKind::SuggestedArg,
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedValue,
    ];
    let guesses: Vec<String> = kinds
        .iter()
        .filter_map(|k| match e.get(*k)? {
            ContextValue::String(s) => Some(vec![s.clone()]),
            ContextValue::Strings(v) => Some(v.clone()),
            _ => None,
        })
        .flatten()
        .map(|s| format!("`{s}`"))
        .collect();
    if guesses.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", guesses.join(" or "))
    }
}

/// A clap usage error in one line, without its `error: `: the first paragraph, since a
/// missing argument's name is on the lines under clap's first one.
pub fn usage_error_text(e: &clap::Error) -> String {
    let msg = e.to_string();
    let para: Vec<&str> = msg.lines().take_while(|l| !l.trim().is_empty()).collect();
    let first = match para.is_empty() {
        true => "bad command line".to_string(),
        false => one_line(&para.join(" ")),
    };
    first.strip_prefix("error: ").unwrap_or(&first).to_string()
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An error and its causes in one line, each cause once: many error types print their source
/// in their own message and also hand it on as `source()`, and a plain `{:#}` would repeat it
/// ("...: No such file or directory (os error 2): No such file or directory (os error 2)").
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    one_line(&text)
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `origins`: where each flag from a `--config` file was set, for the suite's warning about
/// settings it does not use.
fn dispatch(cmd: Command, origins: &config_file::Origins) -> Result<ExitCode> {
    match cmd {
        Command::Demo(a) => suite::demo(a, origins),
        Command::Run(a) => run_cmd::run(a),
        Command::Test(a) => suite::test(a, origins),
        Command::Probe(a) => probe_cmd::probe(a),
        Command::Check(a) => check_cmd::check(a),
        Command::Doctor(a) => doctor::run_with(a.config.as_deref()),
        Command::Init(a) => config_file::init(&a.path, a.force).map(|()| ExitCode::Valid),
        Command::Export(a) => export_cmd::export(&a),
        Command::Cleanup(a) => doctor::cleanup(&a.path),
        Command::Report(a) => report_cmd::report(a),
        Command::Synth(a) => synth_cmd::synth(a),
        Command::Shrink(a) => shrink::shrink(a),
        Command::Lockd(a) => lockd(a),
        Command::Store(a) => store(a),
        Command::ClockAgent(a) => agent_cmd::run(a),
        Command::LiveCheck(a) => live::live_check(a),
    }
}

fn listen(addr: &str) -> Result<SocketAddr> {
    addr.parse()
        .with_context(|| format!("--listen {addr:?}: expected HOST:PORT, e.g. 127.0.0.1:7000"))
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}

fn lockd(a: LockdArgs) -> Result<ExitCode> {
    logging::to_stderr();
    let addr = listen(&a.listen)?;
    let unsafe_mode = a
        .unsafe_mode
        .as_deref()
        .map(str::parse::<lockd::UnsafeMode>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--unsafe: {e}"))?;
    let cfg = lockd::LockdConfig {
        data_dir: a.data_dir,
        unsafe_mode,
        peers: a
            .peers
            .into_iter()
            .filter(|p| !p.trim().is_empty())
            .collect(),
        advertise: a.advertise,
        order: lockd::LockOrder::parse(&a.lock_order)
            .map_err(|e| anyhow::anyhow!("--lock-order: {e}"))?,
    };
    runtime()?.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--listen {addr}: cannot bind"))?;
        lockd::serve_lockd(listener, cfg, shutdown_signal()).await?;
        Ok(ExitCode::Valid)
    })
}

fn store(a: StoreArgs) -> Result<ExitCode> {
    logging::to_stderr();
    let addr = listen(&a.listen)?;
    let fence = a
        .fence
        .parse::<lockd::FenceMode>()
        .map_err(|e| anyhow::anyhow!("--fence: {e}"))?;
    runtime()?.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--listen {addr}: cannot bind"))?;
        lockd::serve_store(listener, lockd::StoreConfig { fence }, shutdown_signal()).await?;
        Ok(ExitCode::Valid)
    })
}
