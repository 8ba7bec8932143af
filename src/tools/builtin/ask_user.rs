//! `ask_user` (spec §1.12): a question for the user, with optional choice hints. The host always
//! receives every hint (`header`, `options`, `multiple`, `allow_custom`); the answer comes back
//! unchanged.

use serde_json::{json, Map, Value};

use super::{arg_bool, arg_str, required_str, tool_metadata, Tool, ToolContext, ToolError};

pub(crate) struct AskUser;

impl Tool for AskUser {
    tool_metadata! {
        name: "ask_user",
        read_only: true,
        description: "Ask the user a question and wait for the answer. Use this tool when you need information that \
         you do not have, or when a requirement has more than one meaning. Do not use this tool for a \
         yes/no confirmation. To offer choices, pass `options`. To let the user pick more than one option, \
         set `multiple` to true. To accept only the listed options, set `allow_custom` to false.",
        parameters: {"type": "object", "properties": {
            "question": {"type": "string", "description": "The question to ask the user"},
            "header": {"type": "string", "description": "Optional short label (a few words) categorizing the question."},
            "options": {"type": "array", "items": {"type": "string"}, "description": "Optional list of suggested answers to present as choices. The user may still type a custom answer unless allow_custom is false."},
            "multiple": {"type": "boolean", "description": "Whether the user may select more than one option. Default false."},
            "allow_custom": {"type": "boolean", "description": "Whether the user may type a free-form answer in addition to any options. Default true."}},
            "required": ["question"]},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let question = required_str(args, "question", "ask_user")?;
        let header = arg_str(args, "header")?;
        let options = match args.get("options") {
            None | Some(Value::Null) => Value::Null,
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                Value::Array(items.clone())
            }
            Some(_) => {
                return Err(ToolError::new(
                    "TypeError",
                    "argument 'options' must be an array of strings",
                ))
            }
        };
        let multiple = arg_bool(args, "multiple")?.unwrap_or(false);
        let allow_custom = arg_bool(args, "allow_custom")?.unwrap_or(true);
        let hints = json!({
            "header": header,
            "options": options,
            "multiple": multiple,
            "allow_custom": allow_custom,
        });
        ctx.host
            .ask_user(question, &hints)
            .map_err(|msg| ToolError::new("AskUserError", msg))
    }
}
