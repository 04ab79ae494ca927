//! `lockpick clock-agent` (hidden): the clock agent the ssh runtime runs on a node's host,
//! from lockpick's binary copied there. `attach` patches the node's service (or every process
//! of its group) to read the node's control page, creating the page, true, if it is missing;
//! `set` writes the page. Each call does its one thing and exits: nothing stays running on the
//! host, and the page and the binary go with the node's directory at the end of the run.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct ClockAgentArgs {
    #[command(subcommand)]
    pub op: AgentOp,
}

#[derive(Debug, Clone, Subcommand)]
pub enum AgentOp {
    /// Patch process PID (with --group, every process of its group) to read PAGE.
    Attach {
        #[arg(long, value_name = "PATH")]
        page: PathBuf,
        #[arg(long, value_name = "PID")]
        pid: i32,
        #[arg(long)]
        group: bool,
    },
    /// Set PAGE's clocks of SCOPE: OFFSET_NS from the true time, RATE times as fast from now.
    Set {
        #[arg(long, value_name = "PATH")]
        page: PathBuf,
        #[arg(long, value_name = "wall|all")]
        scope: vclock::ClockScope,
        #[arg(long, value_name = "NS", allow_hyphen_values = true)]
        offset_ns: i64,
        #[arg(long, value_name = "RATE")]
        rate: f64,
    },
}

pub fn run(a: ClockAgentArgs) -> Result<history::ExitCode> {
    match a.op {
        AgentOp::Attach { page, pid, group } => {
            let control = vclock::ControlPage::open_or_create(&page)
                .with_context(|| format!("clock page {}", page.display()))?;
            let patched = if group {
                vclock::patch_group(pid, &control)?
            } else {
                usize::from(matches!(
                    vclock::patch(pid, &control)?,
                    vclock::Patched::Now(_)
                ))
            };
            println!("{patched}");
        }
        AgentOp::Set {
            page,
            scope,
            offset_ns,
            rate,
        } => {
            anyhow::ensure!(
                rate > 0.0 && rate.is_finite(),
                "--rate {rate}: a clock rate must be positive"
            );
            let control = vclock::ControlPage::open_or_create(&page)
                .with_context(|| format!("clock page {}", page.display()))?;
            control.change(scope, |_, _| (offset_ns, rate));
        }
    }
    Ok(history::ExitCode::Valid)
}
