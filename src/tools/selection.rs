//! What decides the content of a built-in tool registry: which tools, and the settings their
//! descriptions mention. Agents with equal selections share one registry.

use std::path::PathBuf;

use ipnet::IpNet;

use crate::config::ToolsConfig;

use super::{parse_shell_settings, parse_web_settings, shell_exec};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolSelection {
    pub enabled: Option<Vec<String>>,
    pub disabled: Vec<String>,
    /// Named in `run_shell_command`'s description.
    pub interpreter: PathBuf,
    /// Named in `web_fetch`'s description.
    pub web_allow: Vec<IpNet>,
}

impl ToolSelection {
    /// Invalid settings fall back to defaults here; `ToolServices::new` reports them.
    pub fn of(config: &ToolsConfig) -> Self {
        let interpreter = config
            .settings
            .get("shell")
            .and_then(|v| parse_shell_settings(v).ok())
            .and_then(|s| s.interpreter)
            .unwrap_or_else(shell_exec::default_interpreter);
        let web = parse_web_settings(config.settings.get("web_fetch")).unwrap_or_default();
        ToolSelection {
            enabled: config.enabled.clone(),
            disabled: config.disabled.clone(),
            interpreter,
            web_allow: web.allow,
        }
    }
}
