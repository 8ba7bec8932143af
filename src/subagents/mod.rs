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
//! | classification, result text, lifecycle events | `outcome.rs` |
//! | background agents: store, notices, check/cancel tools | `background/` |
//!
//! This layer builds child turns, so it sits above `turn` and `tools` and below `agent`, which
//! implements [`ParentAgent`] and registers the spawn tools of each turn.

pub(crate) mod background;
pub mod builtin;
pub mod complete;
pub mod config;
pub mod context;
pub mod definition;
pub mod forward;
pub mod markdown;
pub mod narrow;
pub mod outcome;
pub mod parent;
pub mod run;
pub mod spawn_tool;

pub use config::{BackgroundConfig, SubagentsConfig};
pub use definition::SubagentDefinition;
pub use forward::ChildMode;
pub use outcome::ChildState;
pub use parent::{ParentAgent, ParentSnapshot, ParentView};
pub use run::{run_child, ChildReport};
pub use spawn_tool::SpawnTool;
