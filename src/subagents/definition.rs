//! One sub-agent definition (spec §6.1) and its spawn tool's name.

use serde::Deserialize;
use serde_json::Value;

/// `max_turns` of a definition that does not say (the built-ins say 100).
pub(crate) const DEFAULT_MAX_TURNS: u32 = 15;

/// A sub-agent: what the parent model sees (`name`, `description`) and how the child runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentDefinition {
    pub name: String,
    pub description: String,
    /// Added to the child's system prompt (a markdown definition's body).
    pub instructions: Option<String>,
    /// The parent tools the child may get; `None`: every eligible one.
    pub tools: Option<Vec<String>>,
    /// The child's iteration budget.
    pub max_turns: u32,
    /// `provider/model` or a bare model name; `None` inherits the parent's.
    pub model: Option<String>,
    /// `None` inherits the parent's.
    pub temperature: Option<f64>,
}

/// `tools`: a list of names, or one comma-separated string (as markdown front matter allows).
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolList {
    List(Vec<String>),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefinition {
    name: String,
    #[serde(default)]
    description: String,
    instructions: Option<String>,
    tools: Option<ToolList>,
    max_turns: Option<u32>,
    model: Option<String>,
    temperature: Option<f64>,
}

impl SubagentDefinition {
    /// Parses one definition object: `{"name", "description"?, "instructions"?, "tools"?,
    /// "max_turns"?, "model"?, "temperature"?}`. Errors say what is wrong.
    pub(crate) fn from_value(v: &Value) -> Result<Self, String> {
        let raw: RawDefinition = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        let tools = raw.tools.map(|t| match t {
            ToolList::List(l) => l,
            ToolList::Text(s) => s.split(',').map(|t| t.trim().to_owned()).collect(),
        });
        Self::checked(SubagentDefinition {
            name: raw.name,
            description: raw.description,
            instructions: raw
                .instructions
                .map(|i| i.trim().to_owned())
                .filter(|i| !i.is_empty()),
            tools,
            max_turns: raw.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
            model: raw.model.filter(|m| !m.is_empty()),
            temperature: raw.temperature,
        })
    }

    /// The rules every source shares: a name that makes a valid tool name, a budget of at least
    /// one turn.
    pub(crate) fn checked(self) -> Result<Self, String> {
        let ok = !self.name.is_empty()
            && self.tool_name().len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(format!(
                "sub-agent name '{}': use 1 to 58 letters, digits, '-' or '_'",
                self.name
            ));
        }
        if self.max_turns == 0 {
            return Err(format!(
                "sub-agent '{}': max_turns must be at least 1",
                self.name
            ));
        }
        Ok(self)
    }

    /// `agent_` + the name with `-` replaced by `_` (spec §6.1).
    pub(crate) fn tool_name(&self) -> String {
        format!("agent_{}", self.name.replace('-', "_"))
    }

    /// The model the child asks for: a `provider/model` definition names the part after `/`.
    pub(crate) fn model_name(&self) -> Option<&str> {
        self.model
            .as_deref()
            .map(|m| m.split_once('/').map_or(m, |(_, name)| name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_with_defaults_and_names_the_tool() {
        let d = SubagentDefinition::from_value(&json!({"name": "code-reviewer"})).unwrap();
        assert_eq!(d.tool_name(), "agent_code_reviewer");
        assert_eq!(d.max_turns, DEFAULT_MAX_TURNS);
        assert_eq!(d.tools, None);
        let d = SubagentDefinition::from_value(
            &json!({"name": "x", "tools": "read_file, glob", "model": "openai/gpt-x"}),
        )
        .unwrap();
        assert_eq!(d.tools, Some(vec!["read_file".into(), "glob".into()]));
        assert_eq!(d.model_name(), Some("gpt-x"));
    }

    #[test]
    fn refuses_bad_definitions() {
        for bad in [
            json!({"name": ""}),
            json!({"name": "a b"}),
            json!({"name": "x", "max_turns": 0}),
            json!({"name": "x", "bogus": 1}),
            json!({"description": "no name"}),
            json!({"name": "x", "tools": 3}),
        ] {
            assert!(SubagentDefinition::from_value(&bad).is_err(), "{bad}");
        }
    }
}
