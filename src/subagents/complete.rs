//! `complete_task(result)`: how a sub-agent hands back its answer (always in its tool set).
//! The call is an ordinary read-only tool whose result is the payload; the run's
//! classification finds it in the child's transcript (spec §6.4).

use serde_json::{Map, Value};

use crate::tools::{required_str, tool_metadata, Tool, ToolContext, ToolError};

pub(crate) const COMPLETE_TASK: &str = "complete_task";

pub(crate) struct CompleteTask;

impl Tool for CompleteTask {
    tool_metadata! {
        name: COMPLETE_TASK,
        read_only: true,
        description: "Call this tool when you finish the assigned task. Pass the final result as a string. You MUST call this tool to finish.",
        parameters: {
            "type": "object",
            "properties": {
                "result": {
                    "type": "string",
                    "description": "The final result of the completed task",
                }
            },
            "required": ["result"],
        },
    }

    fn execute(
        &self,
        args: &Map<String, Value>,
        _ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        Ok(required_str(args, "result", COMPLETE_TASK)?.to_owned())
    }
}
