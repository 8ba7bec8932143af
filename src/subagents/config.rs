//! The `subagents` section of the agent config (docs/config.md), typed, and the definitions it
//! yields: built-ins, then the markdown directory, then the inline list (a later definition
//! replaces an earlier one of the same name, as the reference's loader does).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::builtin::builtin_definitions;
use super::definition::SubagentDefinition;
use super::markdown;

/// `subagents.background`: what the background engineer's store does with it (spec §6.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BackgroundConfig {
    /// Offers `run_in_background` on every spawn tool.
    #[serde(default)]
    pub(crate) enabled: bool,
    /// Writes the store to `<workspace>/.agentao/background_tasks.json`.
    #[serde(default)]
    pub(crate) persist: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSection {
    #[serde(default)]
    builtin: bool,
    directory: Option<String>,
    #[serde(default)]
    definitions: Vec<Value>,
    #[serde(default)]
    relay_events: bool,
    #[serde(default)]
    background: BackgroundConfig,
}

/// The validated section.
#[derive(Debug, Clone, Default)]
pub(crate) struct SubagentsConfig {
    /// Every definition the agent starts with, in order, names unique.
    pub(crate) definitions: Vec<SubagentDefinition>,
    /// Republish a child's own host events on the parent's stream (under the child's session).
    pub(crate) relay_events: bool,
    pub(crate) background: BackgroundConfig,
}

impl SubagentsConfig {
    /// Reads the raw section (`None`: no sub-agents). A relative `directory` is resolved against
    /// the workspace; an unreadable directory is an error, a file in it that does not parse is
    /// skipped (as the reference skips it).
    pub(crate) fn from_value(v: Option<&Value>, workspace: &Path) -> Result<Self, String> {
        let Some(v) = v else {
            return Ok(SubagentsConfig::default());
        };
        let raw: RawSection = serde_json::from_value(v.clone())
            .map_err(|e| format!("config field `subagents`: {e}"))?;
        let mut defs = Vec::new();
        if raw.builtin {
            defs.extend(builtin_definitions());
        }
        if let Some(d) = raw.directory.filter(|d| !d.is_empty()) {
            let dir = crate::tools::resolve_path(workspace, &d);
            defs.extend(
                markdown::load_directory(&dir)
                    .map_err(|e| format!("config field `subagents.directory`: {e}"))?,
            );
        }
        for (i, d) in raw.definitions.iter().enumerate() {
            defs.push(
                SubagentDefinition::from_value(d)
                    .map_err(|e| format!("config field `subagents.definitions[{i}]`: {e}"))?,
            );
        }
        let mut definitions: Vec<SubagentDefinition> = Vec::with_capacity(defs.len());
        for d in defs {
            upsert(&mut definitions, d);
        }
        Ok(SubagentsConfig {
            definitions,
            relay_events: raw.relay_events,
            background: raw.background,
        })
    }
}

/// Adds `d`, replacing a definition of the same name in place.
pub(crate) fn upsert(defs: &mut Vec<SubagentDefinition>, d: SubagentDefinition) {
    match defs.iter_mut().find(|x| x.name == d.name) {
        Some(slot) => *slot = d,
        None => defs.push(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn section_defaults_and_sources() {
        let wd = std::env::temp_dir();
        let c = SubagentsConfig::from_value(None, &wd).unwrap();
        assert!(c.definitions.is_empty());
        let c = SubagentsConfig::from_value(
            Some(&json!({"builtin": true, "definitions": [
                {"name": "generalist", "description": "mine"}, {"name": "x"}],
                "background": {"enabled": true}})),
            &wd,
        )
        .unwrap();
        let names: Vec<_> = c.definitions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["codebase-investigator", "generalist", "x"]);
        assert_eq!(c.definitions[1].description, "mine");
        assert!(c.background.enabled && !c.background.persist);
        for bad in [
            json!({"relay_events": "yes"}),
            json!({"bogus": 1}),
            json!({"background": {"x": 1}}),
            json!({"definitions": [{"name": "a b"}]}),
        ] {
            assert!(
                SubagentsConfig::from_value(Some(&bad), &wd).is_err(),
                "{bad}"
            );
        }
    }
}
