//! The catalogue: the skills an agent may activate, sorted by name, and the block of the system
//! prompt that lists them.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::discovery::{Discovered, SkippedSkill};
use super::skill::Skill;
use super::MAX_CATALOGUE_BYTES;

const HEAD: &str = "=== Available Skills ===\n\
Skills hold instructions for particular kinds of task. When a request matches a skill's \
description, call the activate_skill tool with its name before you start on the task; the \
skill's instructions come back as the tool's result. Relative paths in a skill's instructions \
resolve against the skill's own directory, which activation reports.\n";

#[derive(Debug, Default)]
pub(crate) struct Catalogue {
    skills: BTreeMap<String, Skill>,
    skipped: Vec<SkippedSkill>,
    /// The system prompt's block; empty when no skill has a description.
    block: String,
}

impl Catalogue {
    pub(crate) fn new(found: Discovered) -> Self {
        let block = render(&found.skills);
        Catalogue {
            skills: found.skills,
            skipped: found.skipped,
            block,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// Every name, sorted.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.skills.keys().map(String::as_str)
    }

    /// The system prompt's block, `None` when there is nothing to list.
    pub(crate) fn prompt_block(&self) -> Option<&str> {
        (!self.block.is_empty()).then_some(self.block.as_str())
    }

    /// What the host reads (`agentao_agent_skills`): the skills and what was skipped, why.
    pub(crate) fn report(&self) -> Value {
        let skills: Vec<Value> = self
            .skills
            .values()
            .map(|s| {
                let origin: &'static str = s.origin.into();
                json!({"name": s.name, "description": s.description, "origin": origin,
                    "path": s.path.as_ref().map(|p| p.display().to_string())})
            })
            .collect();
        let skipped: Vec<Value> = self
            .skipped
            .iter()
            .map(|s| {
                json!({"path": s.path.as_ref().map(|p| p.display().to_string()),
                    "name": s.name, "kind": s.reason.kind(), "reason": s.reason.to_string()})
            })
            .collect();
        json!({"enabled": true, "skills": skills, "skipped": skipped,
            "prompt_chars": self.block.chars().count()})
    }
}

/// One line of text: a description's line breaks and runs of blanks become one space, so no
/// skill can start a line of its own in the system prompt.
fn push_one_line(out: &mut String, text: &str) {
    let mut first = true;
    for word in text.split_whitespace() {
        if !first {
            out.push(' ');
        }
        out.push_str(word);
        first = false;
    }
}

/// The block: a line per skill with a description (one without gives the model nothing to
/// match, as in the reference), up to [`MAX_CATALOGUE_BYTES`]; the rest are counted.
fn render(skills: &BTreeMap<String, Skill>) -> String {
    let described: Vec<&Skill> = skills
        .values()
        .filter(|s| !s.description.trim().is_empty())
        .collect();
    if described.is_empty() {
        return String::new();
    }
    let mut out = String::from(HEAD);
    out.push('\n');
    let mut left_out = 0usize;
    let mut line = String::new();
    for skill in &described {
        line.clear();
        line.push_str("- ");
        push_one_line(&mut line, &skill.name);
        line.push_str(": ");
        push_one_line(&mut line, &skill.description);
        line.push('\n');
        if !skill.when_to_use.is_empty() {
            line.push_str("  Use when: ");
            push_one_line(&mut line, &skill.when_to_use);
            line.push('\n');
        }
        if left_out > 0 || out.len() + line.len() > MAX_CATALOGUE_BYTES {
            left_out += 1;
            continue;
        }
        out.push_str(&line);
    }
    if left_out > 0 {
        out.push_str(&format!(
            "({left_out} more skills are not listed here; activate_skill accepts every name its \
             schema lists.)\n"
        ));
    }
    out.truncate(out.trim_end().len());
    out
}
