//! `activate_skill` (spec §1.15): loads one skill's instructions into the conversation, as the
//! tool's result.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::catalogue::Catalogue;
use super::discovery::read_bounded;
use super::front_matter;
use super::skill::Skill;
use crate::tools::{required_str, FileSystem, Tool, ToolContext, ToolError};

pub(crate) const NAME: &str = "activate_skill";

/// Said after the skill's directory, so the model builds paths from it.
const DIRECTORY_NOTE: &str = "Relative paths in the skill's instructions (e.g. scripts/foo.py) \
resolve against this skill directory, NOT your current working directory. Build absolute paths \
from the skill directory before reading or running them.\n";

pub(crate) struct ActivateSkill {
    catalogue: Arc<Catalogue>,
    parameters: Value,
}

impl ActivateSkill {
    pub(crate) fn new(catalogue: Arc<Catalogue>) -> Self {
        // The names as an enum, so a typo is caught by the model's own decoding.
        let names: Vec<&str> = catalogue.names().collect();
        let parameters = json!({"type": "object", "properties": {
            "skill_name": {"type": "string", "enum": names,
                "description": "Name of the skill to activate"},
            "task_description": {"type": "string",
                "description": "The task that you will do with this skill."}},
            "required": ["skill_name", "task_description"]});
        ActivateSkill {
            catalogue,
            parameters,
        }
    }

    /// A skill's instructions: an inline skill's own, else its file's body, read again through
    /// the agent's file system with the bounds discovery applied.
    fn instructions(&self, skill: &Skill, fs: &dyn FileSystem) -> Result<Arc<str>, String> {
        if let Some(text) = &skill.instructions {
            return Ok(text.clone());
        }
        let Some(path) = &skill.path else {
            return Err("the skill has no instructions".into());
        };
        if fs.is_local_disk() {
            // Discovery kept the resolved path; a link swapped in since may not lead elsewhere.
            let now = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
            if &now != path {
                return Err(format!(
                    "{} now resolves to {}, not where it was found",
                    path.display(),
                    now.display()
                ));
            }
        }
        let text = read_bounded(fs, path).map_err(|e| e.to_string())?;
        let parsed = front_matter::parse(&text)?;
        Ok(parsed.body.trim().into())
    }
}

impl Tool for ActivateSkill {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Activate a skill. A skill gives you instructions and files for one type of task."
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn is_read_only(&self) -> bool {
        // It reads a skill's file and adds text to the conversation; what the instructions
        // then ask for is decided call by call.
        true
    }

    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let name = required_str(args, "skill_name", NAME)?;
        let task = required_str(args, "task_description", NAME)?;
        let Some(skill) = self.catalogue.get(name) else {
            let names: Vec<&str> = self.catalogue.names().collect();
            return Ok(format!(
                "Error: Unknown skill '{name}'. Available skills: {}",
                names.join(", ")
            ));
        };
        let instructions = match self.instructions(skill, &*ctx.services.fs()) {
            Ok(text) => text,
            Err(e) => return Ok(format!("Error activating skill: {e}")),
        };
        Ok(activation_text(skill, task, &instructions))
    }
}

/// The result: the reference's activation lines, then the instructions.
pub(crate) fn activation_text(skill: &Skill, task: &str, instructions: &str) -> String {
    let mut out = format!(
        "\nSkill Activated: {}\nTitle: {}\n",
        skill.name, skill.title
    );
    if !skill.description.is_empty() {
        let short: String = skill.description.chars().take(200).collect();
        out.push_str(&format!("Description: {short}...\n"));
    }
    out.push_str(&format!("Task: {task}\n"));
    match &skill.path {
        Some(p) => out.push_str(&format!("Documentation: {}\n", p.display())),
        None => out.push_str("Documentation: N/A\n"),
    }
    if let Some(dir) = skill.directory() {
        out.push_str(&format!("Skill directory: {}\n", dir.display()));
        out.push_str(DIRECTORY_NOTE);
    }
    out.push_str("\n=== Skill Instructions ===\n");
    out.push_str(instructions);
    out.push_str("\n\nThe skill is now active. Follow its instructions for this task.");
    out
}
