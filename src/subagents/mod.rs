//! Sub-agents (spec §6): definitions, the `agent_<name>` spawn tools, and the child run.
//!
//! | concept | file |
//! |---|---|
//! | one definition, its tool name | `definition.rs` |
//! | the config section and where definitions come from | `config.rs`, `builtin.rs`, `markdown.rs` |
//! | the spawn tool | `spawn_tool.rs` |
//! | what a child reads from its parent | `parent.rs` |
//! | the child's first message | `context.rs` |
//! | the child's tool set, `complete_task` | `narrow.rs`, `complete.rs` |
//! | the child's transport | `forward.rs` |
//! | one run, start to end | `run.rs` |
//! | classification, result text (the start and end events: `events::subagent_event`) | `outcome.rs` |
//! | background agents: store, notices, check/cancel tools | `background/` |
//!
//! This layer builds child turns, so it sits above `turn` and `tools` and below `agent`, which
//! implements [`ParentAgent`] and registers the spawn tools of each turn.

pub(crate) mod background;
pub(crate) mod builtin;
pub(crate) mod complete;
pub(crate) mod config;
pub(crate) mod context;
pub mod definition;
pub(crate) mod forward;
pub(crate) mod markdown;
pub(crate) mod narrow;
pub(crate) mod outcome;
pub(crate) mod parent;
pub(crate) mod run;
pub(crate) mod spawn_tool;

pub(crate) use config::SubagentsConfig;
pub use definition::SubagentDefinition;
pub(crate) use parent::{ParentAgent, ParentSnapshot};
pub(crate) use spawn_tool::SpawnTool;
