//! Node control and faults: how lockpick starts the services under test and hurts them.
//!
//! - [`NodeControl`] ([`node`]): what the harness does to one node (start, stop, pause, resume,
//!   kill, restart, logs), whatever runs it. [`LocalNode`] is the node of this machine: a child
//!   process group started from a [`NodeCommand`], waited for until its health path answers
//!   200; [`pause`] is SIGSTOP to the group (and to descendants that left it, as
//!   PostgreSQL's backends do), [`resume`] SIGCONT, [`kill`] SIGKILL and reap,
//!   [`restart`] the same command again. It stops the node when dropped.
//! - [`runtime`]: where nodes run. A [`runtime::Runtime`] gives each node its address, makes
//!   its node control, offers its network faults and tears down; [`RUNTIMES`] lists the kinds
//!   `--runtime` names: [`local`] (loopback), [`netns`] (a network namespace per node) and
//!   [`ssh`] (a host per node, over the system's ssh client).
//! - [`fault`]: one module per fault family (its history op names, how it is carried out, its
//!   heal) and [`fault::run_plan`], the interpreter of a planned schedule.
//! - [`substitute`] and [`Placeholders`]: fill a command template's `{id} {host} {port}
//!   {data_dir} {peers}`; [`free_ports`] picks ports for nodes (never from the ephemeral range).
//! - [`NodeError`]: every failure of node control, each naming the node and what failed;
//!   [`Error`]: any failure of a runtime or a fault; [`StateFileError`]: a netns or ssh state
//!   file that cannot be used, or whose run is alive.
//! - [`process_state`] and [`process_group_alive`]: read-only looks at processes, for tests and
//!   cleanup checks.
//!
//! Invariants: every child is forked by one never-exiting thread with `PR_SET_PDEATHSIG =
//! SIGKILL`, so a harness killed with SIGKILL takes its nodes along; a node runs in its own
//! process group, so a fault reaches a whole shell pipeline and the terminal's Ctrl-C does
//! not. Nothing here signals a process it did not start.
//!
//! - [`clock`]: per-node clocks ([`clock::NodeClock`]): a control page each node's processes are
//!   patched to read (the `vclock` crate), or libfaketime control files where that cannot run.
//! - [`schedule`]: the fault plan as data ([`schedule::plan`] draws it, `schedule.json` holds
//!   it) and `--nemesis` parsing.
//! - [`netns`]: nodes in network namespaces ([`netns::NetnsCluster`]): partitions, netem, proxy.
//! - [`oneshot`]: a command run to completion under the same supervision as the nodes (how
//!   `lockpick shrink` reruns `lockpick run`).
//!
//! [`pause`]: LocalNode::pause
//! [`resume`]: LocalNode::resume
//! [`kill`]: LocalNode::kill
//! [`restart`]: LocalNode::restart

pub mod clock;
mod command;
mod error;
pub mod fault;
mod named;
pub mod node;
pub mod oneshot;
mod process;
mod ready;
pub mod runtime;
pub mod scenario;
pub mod schedule;
mod spawner;
mod state_file;
mod template;

/// Registers every runtime: declares its module and lists its kind in [`RUNTIMES`]. A new
/// runtime is one file (its [`runtime::Runtime`] and [`node::NodeControl`]) plus one line in
/// the list below.
macro_rules! runtimes {
    ($($module:ident :: $kind:ident),+ $(,)?) => {
        $(pub mod $module;)+
        /// Every runtime `--runtime` can name.
        pub static RUNTIMES: &[&dyn runtime::RuntimeKind] = &[$(&$module::$kind),+];
    };
}

runtimes! {
    local::Local,
    netns::Netns,
    ssh::Ssh,
}

pub use error::{Error, NodeError};
pub use local::{free_port, free_ports, LocalNode, HEALTH_PATH};
pub use node::{Node, NodeControl, Shutdown, StopSignal};
pub use process::{process_group_alive, process_state};
pub use ready::{NotReady, Readiness};
pub use state_file::StateFileError;
pub use template::{substitute, NodeCommand, Placeholders};
