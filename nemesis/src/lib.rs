//! Node control and faults: how lockpick starts the services under test and hurts them.
//!
//! - [`LocalNode`]: one node run as a local child process from a [`NodeCommand`]. It starts
//!   the node and waits for `GET /v1/health`, and injects the process faults: [`pause`]
//!   (SIGSTOP to the node's process group), [`resume`] (SIGCONT), [`kill`] (SIGKILL and
//!   reap) and [`restart`]. It stops the node when dropped.
//! - [`substitute`] and [`Placeholders`]: fill a command template's `{id} {host} {port}
//!   {data_dir} {peers}`; [`free_port`] picks a port for a node.
//! - [`NodeError`]: every failure, each naming the node and what failed.
//! - [`process_state`] and [`process_group_alive`]: read-only looks at processes, for tests and
//!   cleanup checks.
//!
//! Invariants: every child is forked by one never-exiting thread with `PR_SET_PDEATHSIG =
//! SIGKILL`, so a harness killed with SIGKILL takes its nodes along; a node runs in its own
//! process group, so a fault reaches a whole shell pipeline and the terminal's Ctrl-C does
//! not. Nothing here signals a process it did not start.
//!
//! - [`clock`]: per-node clocks through libfaketime control files ([`clock::NodeClock`]).
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
mod error;
mod local;
pub mod netns;
pub mod oneshot;
mod process;
pub mod schedule;
mod spawner;
mod template;

pub use error::NodeError;
pub use local::{free_port, LocalNode, HEALTH_PATH};
pub use process::{process_group_alive, process_state};
pub use template::{substitute, NodeCommand, Placeholders};
