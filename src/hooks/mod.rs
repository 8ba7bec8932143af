//! Lifecycle hooks (docs/hooks.md): commands the user configured, in Claude Code's format and
//! speaking its protocol, run at fixed points of the agent loop.
//!
//! | file | concept |
//! |---|---|
//! | `event.rs` | the points (`PreToolUse`, …) and the Claude Code names of the built-in tools |
//! | `config.rs` | the `hooks` section: events → matcher groups → command hooks |
//! | `command.rs` | one command run: stdin, bounded output, timeout, cancel, its process group |
//! | `protocol.rs` | what a hook said: exit code, then JSON or plain stdout, typed |
//! | `host.rs` | hooks a host answers in-process (the C capability), with the same input and output |
//! | `dispatch.rs` | firing a point: matching, running side by side, combining (deny > ask > allow) |
//!
//! Where each point sits in the turn, and what the loop does with a verdict, is the turn's
//! (`turn/hooks.rs`).

pub(crate) mod command;
pub mod config;
pub(crate) mod dispatch;
pub mod event;
pub mod host;
pub(crate) mod protocol;

pub use config::HooksConfig;
pub use dispatch::Hooks;
pub use event::HookEvent;
pub use host::{HookRequest, HostHooks};
pub use protocol::HookDecision;
