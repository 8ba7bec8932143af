//! The permission engine: a mode plus rules. (Placeholder until the rule engine lands: it knows
//! its mode and matches nothing.)

use serde_json::{Map, Value};

use super::{ActivePermissions, Mode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineAction {
    Allow,
    Deny,
    Ask,
}

#[derive(Debug, Clone)]
pub struct EngineMatch {
    pub action: EngineAction,
    pub rule: Option<Value>,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct PermissionEngine {
    mode: Mode,
}

impl PermissionEngine {
    pub fn new(mode: Mode) -> Self {
        PermissionEngine { mode }
    }

    /// Builds the engine the config's `permissions` object asks for; `Ok(None)` when the config
    /// has none (the reference's default: no engine, `default:no-engine`).
    pub fn from_config(
        permissions: Option<&Value>,
        _workspace: &std::path::Path,
    ) -> Result<Option<PermissionEngine>, String> {
        let Some(p) = permissions else {
            return Ok(None);
        };
        let mode = match p.get("mode") {
            None => Mode::WorkspaceWrite,
            Some(Value::String(s)) => Mode::parse(s)
                .ok_or_else(|| format!("config field `permissions.mode`: unknown mode '{s}'"))?,
            Some(_) => return Err("config field `permissions.mode`: must be a string".into()),
        };
        Ok(Some(PermissionEngine::new(mode)))
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn set_mode(&mut self, mode: Mode) -> Mode {
        std::mem::replace(&mut self.mode, mode)
    }

    pub fn decide_detail(&self, _tool: &str, _args: &Map<String, Value>) -> Option<EngineMatch> {
        None
    }

    pub fn active_permissions(&self) -> ActivePermissions {
        ActivePermissions {
            mode: self.mode.as_str().to_owned(),
            rules: Vec::new(),
            loaded_sources: vec![format!("preset:{}", self.mode.as_str())],
        }
    }
}
