//! The child's tool set (spec §6.3, the reference's `_narrow_tools`): the parent's tools of
//! this turn, narrowed to the definition's list, then by origin, plus `complete_task`.

use std::sync::Arc;

use super::complete::CompleteTask;
use super::definition::SubagentDefinition;
use crate::tools::{Tool, ToolOrigin, ToolRegistry};

/// Whether a parent tool of this origin reaches a child. Built-in and MCP tools do (ours hold
/// no per-agent state: the child's todo list and services are its own); a host tool only when
/// it copies to sub-agents, and otherwise its name is left out entirely, so no built-in of that
/// name stands in for it; spawn tools never (depth one).
fn inherited(origin: ToolOrigin) -> bool {
    match origin {
        ToolOrigin::Builtin | ToolOrigin::Mcp => true,
        ToolOrigin::Host {
            copies_to_subagents,
        } => copies_to_subagents,
        ToolOrigin::Agent => false,
    }
}

pub(crate) fn narrow(parent: &ToolRegistry, def: &SubagentDefinition) -> ToolRegistry {
    let kept: Vec<Arc<dyn Tool>> = parent
        .names()
        .filter(|n| def.tools.as_ref().is_none_or(|l| l.iter().any(|t| t == n)))
        .filter_map(|n| parent.get(n))
        .filter(|t| inherited(t.origin()))
        .cloned()
        .chain(std::iter::once(Arc::new(CompleteTask) as Arc<dyn Tool>))
        .collect();
    let mut reg = ToolRegistry::default();
    reg.extend(kept);
    reg
}
