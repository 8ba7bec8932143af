//! What decides the content of a built-in tool registry: which tools, and the settings their
//! descriptions mention. Agents with equal selections share one registry.

use std::path::PathBuf;

use ipnet::IpNet;

use super::{shell_exec, ToolsConfig};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ToolSelection {
    pub(crate) enabled: Option<Vec<String>>,
    pub(crate) disabled: Vec<String>,
    /// Named in `run_shell_command`'s description.
    pub(crate) interpreter: PathBuf,
    /// Named in `web_fetch`'s description.
    pub(crate) web_allow: Vec<IpNet>,
}

impl ToolSelection {
    pub(crate) fn of(config: &ToolsConfig) -> Self {
        let settings = &config.settings;
        ToolSelection {
            enabled: config.enabled.clone(),
            disabled: config.disabled.clone(),
            interpreter: settings
                .shell
                .interpreter
                .clone()
                .unwrap_or_else(shell_exec::default_interpreter),
            web_allow: settings.web_fetch.resolve().allow,
        }
    }

    /// Whether the selection keeps the tool `name` (a built-in or an MCP resource tool).
    pub fn selects(&self, name: &str) -> bool {
        match &self.enabled {
            Some(list) => list.iter().any(|n| n == name),
            None => !self.disabled.iter().any(|n| n == name),
        }
    }
}
