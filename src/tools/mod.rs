//! Tools: the [`Tool`] trait, the per-call [`ToolContext`], the registry, and the built-ins.
//!
//! Tools are synchronous and run on blocking threads (never on a runtime worker), so they may do
//! file I/O, wait for a child process, or block on a host answer. They report failure the way
//! the reference does: most failures are `Ok("Error: ...")` strings the model reads; an
//! `Err(ToolError)` becomes `Error executing <tool>: <message>` with status `error`.

pub mod list_directory;
pub mod read_file;
pub mod result_format;
pub mod write_file;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::cancel::CancelToken;
use crate::config::ToolsConfig;

/// A tool failure that is not a model-readable result string.
#[derive(Debug, Clone)]
pub struct ToolError {
    /// The reference's exception class name, reported as the host event's `error_type`.
    pub kind: String,
    pub message: String,
}

impl ToolError {
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        ToolError {
            kind: kind.to_owned(),
            message: message.into(),
        }
    }
}

/// What a running tool may ask of its host.
pub trait HostRequests: Send + Sync {
    /// Asks the user; blocks until the host answers, the turn is cancelled, or the host fails.
    /// `hints` is `{"header", "options", "multiple", "allow_custom"}`.
    fn ask_user(&self, question: &str, hints: &Value) -> Result<String, String>;
}

/// Everything a tool call may use besides its arguments.
pub struct ToolContext<'a> {
    pub workspace: &'a Path,
    pub call_id: &'a str,
    pub cancel: &'a CancelToken,
    /// Streams a chunk of output to the host as a `tool_output` event.
    pub output: &'a (dyn Fn(&str) + Sync),
    pub host: &'a dyn HostRequests,
    pub settings: &'a ToolsConfig,
    /// Shared per-agent services (file system, shell executor, policies), built once.
    pub services: &'a ToolServices,
}

/// Per-agent state the tools share, built once from the config when the agent is created.
#[derive(Default)]
pub struct ToolServices {}

impl ToolServices {
    pub fn new(_config: &ToolsConfig, _workspace: &Path) -> Result<Self, String> {
        Ok(ToolServices {})
    }
}

impl ToolContext<'_> {
    /// `~` expanded, absolute kept, relative joined to the workspace (the reference's rule).
    pub fn resolve(&self, raw: &str) -> PathBuf {
        resolve_path(self.workspace, raw)
    }

    /// Resolves a path a read-side tool wants; outside the workspace it is refused unless the
    /// config allows it (a deliberate deviation: the reference reads anywhere).
    pub fn resolve_read(&self, raw: &str) -> Result<PathBuf, String> {
        if raw.contains('\0') {
            return Err(format!(
                "Error: path '{}' contains a NUL byte",
                raw.replace('\0', "\\0")
            ));
        }
        let path = self.resolve(raw);
        if self.settings.allow_reads_outside_workspace {
            return Ok(path);
        }
        let resolved = normalize(&path);
        let resolved = std::fs::canonicalize(&resolved).unwrap_or(resolved);
        if resolved.starts_with(self.workspace) {
            Ok(path)
        } else {
            Err(format!(
                "Error: PathPolicy: refused '{raw}' — resolves to '{}', outside project_root '{}'",
                resolved.display(),
                self.workspace.display()
            ))
        }
    }
}

pub fn resolve_path(workspace: &Path, raw: &str) -> PathBuf {
    let expanded = if raw == "~" || raw.starts_with("~/") {
        match std::env::var_os("HOME") {
            Some(home) => {
                PathBuf::from(home).join(raw.trim_start_matches('~').trim_start_matches('/'))
            }
            None => PathBuf::from(raw),
        }
    } else {
        PathBuf::from(raw)
    };
    if expanded.is_absolute() {
        expanded
    } else {
        workspace.join(expanded)
    }
}

/// Lexical `.`/`..` folding (no symlink resolution).
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The JSON Schema of the arguments (`function.parameters`).
    fn parameters(&self) -> Value;
    fn is_read_only(&self) -> bool;
    fn requires_confirmation(&self) -> bool;
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError>;
}

/// The built-in tool names a config may enable or disable.
pub const BUILTIN_TOOL_NAMES: &[&str] = &["list_directory", "read_file", "write_file"];

/// The tools of one agent, by name, with their schemas sorted by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    schemas: Arc<Vec<Value>>,
}

impl ToolRegistry {
    /// The built-ins the config selects.
    pub fn builtin(config: &ToolsConfig) -> Result<Self, String> {
        for name in config.enabled.iter().flatten().chain(&config.disabled) {
            if !BUILTIN_TOOL_NAMES.contains(&name.as_str()) {
                return Err(format!(
                    "config field `tools`: unknown tool '{name}' (known: {})",
                    BUILTIN_TOOL_NAMES.join(", ")
                ));
            }
        }
        let all: Vec<Arc<dyn Tool>> = vec![
            Arc::new(list_directory::ListDirectory),
            Arc::new(read_file::ReadFile),
            Arc::new(write_file::WriteFile),
        ];
        let mut reg = ToolRegistry::default();
        for tool in all {
            let name = tool.name();
            let on = match &config.enabled {
                Some(list) => list.iter().any(|n| n == name),
                None => !config.disabled.iter().any(|n| n == name),
            };
            if on {
                reg.tools.insert(name.to_owned(), tool);
            }
        }
        reg.rebuild_schemas();
        Ok(reg)
    }

    /// Adds or replaces a tool.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_owned(), tool);
        self.rebuild_schemas();
    }

    pub fn remove(&mut self, name: &str) -> bool {
        let removed = self.tools.remove(name).is_some();
        self.rebuild_schemas();
        removed
    }

    fn rebuild_schemas(&mut self) {
        self.schemas = Arc::new(
            self.tools
                .values()
                .map(|t| {
                    serde_json::json!({"type": "function", "function": {
                        "name": t.name(), "description": t.description(), "parameters": t.parameters()}})
                })
                .collect(),
        );
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Names in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// `{"type":"function","function":{…}}` entries sorted by name; shared, cheap to clone.
    pub fn schemas(&self) -> Arc<Vec<Value>> {
        self.schemas.clone()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Reads an optional argument of one JSON type; a wrong type is a ToolError as the reference's
/// TypeError would be.
pub(crate) fn arg_str<'a>(
    args: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ToolError::new(
            "TypeError",
            format!(
                "argument '{key}' must be a string, not {}",
                json_type(other)
            ),
        )),
    }
}

pub(crate) fn arg_bool(args: &Map<String, Value>, key: &str) -> Result<Option<bool>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ToolError::new(
            "TypeError",
            format!(
                "argument '{key}' must be a boolean, not {}",
                json_type(other)
            ),
        )),
    }
}

pub(crate) fn arg_i64(args: &Map<String, Value>, key: &str) -> Result<Option<i64>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
        Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
            Ok(n.as_f64().map(|f| f as i64))
        }
        Some(other) => Err(ToolError::new(
            "TypeError",
            format!(
                "argument '{key}' must be an integer, not {}",
                json_type(other)
            ),
        )),
    }
}

pub(crate) fn required_str<'a>(
    args: &'a Map<String, Value>,
    key: &str,
    tool: &str,
) -> Result<&'a str, ToolError> {
    arg_str(args, key)?.ok_or_else(|| {
        ToolError::new(
            "TypeError",
            format!("{tool}() missing 1 required positional argument: '{key}'"),
        )
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
