//! `todo_write` (spec §1.13): the session's task list; each call replaces it. The list lives in
//! [`ToolServices`](crate::tools::ToolServices) (memory only).

use serde_json::{Map, Value};

use super::{tool_metadata, Tool, ToolContext, ToolError};

/// One task as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoItem {
    pub content: String,
    pub status: String,
}

pub struct TodoWrite;

impl Tool for TodoWrite {
    tool_metadata! {
        name: "todo_write",
        read_only: true,
        description: "Replace the task list for this session. Use this tool at the start of a task with several steps. \
         Update each status as you work: pending, then in_progress, then completed. Always send the complete \
         task list, because each call replaces the previous list. Do not use this tool for a request with \
         one simple step.",
        parameters: {"type": "object", "properties": {
            "todos": {"type": "array", "description": "The complete task list. It replaces the current task list.",
                "items": {"type": "object", "properties": {
                    "content": {"type": "string", "description": "What the task is."},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"], "description": "Current status of the task"}},
                    "required": ["content", "status"]}}},
            "required": ["todos"]},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let todos = match args.get("todos") {
            Some(Value::Array(items)) => items,
            None => {
                return Err(ToolError::new(
                    "TypeError",
                    "todo_write() missing 1 required positional argument: 'todos'",
                ))
            }
            Some(_) => {
                return Err(ToolError::new(
                    "TypeError",
                    "argument 'todos' must be an array",
                ))
            }
        };
        let mut list = Vec::with_capacity(todos.len());
        for item in todos {
            let Value::Object(obj) = item else {
                return Err(ToolError::new("TypeError", "each todo must be an object"));
            };
            let field = |key: &str| -> Result<String, ToolError> {
                match obj.get(key) {
                    Some(Value::String(s)) => Ok(s.clone()),
                    Some(other) => Ok(other.to_string()),
                    None => Err(ToolError::new("KeyError", format!("'{key}'"))),
                }
            };
            list.push(TodoItem {
                content: field("content")?,
                status: field("status")?,
            });
        }
        let count = |s: &str| list.iter().filter(|t| t.status == s).count();
        let (pending, in_progress, completed) =
            (count("pending"), count("in_progress"), count("completed"));
        let n = list.len();
        ctx.services.set_todos(list);
        Ok(format!(
            "Todo list updated: {n} task(s) ({completed} completed, {in_progress} in progress, {pending} pending)"
        ))
    }
}
