//! Tools: the [`Tool`] trait, the per-call [`ToolContext`], the registry, and the built-ins.
//!
//! Tools are synchronous and run on blocking threads (never on a runtime worker), so they may do
//! file I/O, wait for a child process, or block on a host answer; a tool whose call only awaits
//! (an MCP request) or is a small local read may run on the turn's task instead
//! ([`Tool::runs_on_task`]). They report failure the way
//! the reference does: most failures are `Ok("Error: ...")` strings the model reads; an
//! `Err(ToolError)` becomes `Error executing <tool>: <message>` with status `error`.

pub(crate) mod background_processes;
pub(crate) mod builtin;
pub(crate) mod config;
pub(crate) mod fs;
pub(crate) mod host;
pub(crate) mod memory;
#[cfg(feature = "sqlite-memory")]
pub(crate) mod memory_sqlite;
pub(crate) mod metadata;
pub(crate) mod output_mailbox;
pub(crate) mod probes;
pub(crate) mod replaced_file_writers;
pub(crate) mod result_format;
pub(crate) mod secrets;
pub(crate) mod selection;
pub(crate) mod shell_exec;
pub(crate) mod shell_run;
pub(crate) mod spill_dir;

pub(crate) use builtin::{
    ask_user, glob, list_directory, read_file, replace, save_memory, search, shell, todo,
    web_fetch, write_file,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Map, Value};

use crate::cancel::CancelToken;
use crate::permissions::listed_paths::ListedPaths;
use crate::permissions::path_policy;
use background_processes::BackgroundProcesses;

pub(crate) use config::ShellSettings;
pub use config::ToolsConfig;
pub use fs::{FileEntry, FileStat, FileSystem, LocalFileSystem, WalkEntry};
pub(crate) use memory::{MemoryRecord, MemoryScope, MemoryStore};
pub(crate) use metadata::tool_metadata;
pub(crate) use selection::ToolSelection;
pub use shell_exec::note_credential_value;
pub(crate) use shell_exec::{
    BackgroundError, BackgroundHandle, LocalShellExecutor, ShellDialect, ShellExecutor,
    ShellRequest, ShellResult, ShellSpec,
};
pub use spill_dir::SpillDir;
pub(crate) use todo::TodoItem;
pub(crate) use web_fetch::WebSettings;

/// A tool failure that is not a model-readable result string.
#[derive(Debug, Clone)]
pub struct ToolError {
    /// The reference's exception class name, reported as the host event's `error_type`.
    pub kind: String,
    pub message: String,
}

impl ToolError {
    pub(crate) fn new(kind: &str, message: impl Into<String>) -> Self {
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

    /// The conversation's last messages (history and the running turn's own, wire-shaped), for a
    /// spawn tool's parent-context block. Only a batch with a sub-agent call pays for them.
    fn recent_messages(&self) -> Vec<Value> {
        Vec::new()
    }
}

/// How many of the conversation's last messages [`HostRequests::recent_messages`] gives: a
/// sub-agent's parent-context window (spec §6.2).
pub const RECENT_MESSAGES: usize = 10;

/// Where a tool came from: sub-agents narrow their parent's tools by it (spec §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOrigin {
    Builtin,
    Mcp,
    /// A host tool; a sub-agent gets it only when the host said so.
    Host {
        copies_to_subagents: bool,
    },
    /// A sub-agent's spawn tool (`agent_<name>`).
    Agent,
}

/// Why a call may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// The presets' read-only shell set allowed it without asking the host, on the promise
    /// that it reads nothing outside the workspace (unless outside reads are allowed): the
    /// tool keeps that promise at launch too, where the permission check could not see.
    ReadOnlySet,
    /// Anything else: the host confirmed it, a rule allowed it, or the tool needs no
    /// confirmation.
    Other,
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
    /// Why this call may run.
    pub approval: Approval,
}

/// Per-agent state the tools share, built once from the config when the agent is created.
/// The file system and shell seams default to the local implementations; a host may swap them
/// with [`ToolServices::with_file_system`], or between turns with
/// [`ToolServices::set_file_system`] / [`ToolServices::set_shell`].
pub struct ToolServices {
    fs: RwLock<Arc<dyn FileSystem>>,
    shell: RwLock<Arc<dyn ShellExecutor>>,
    /// What `set_shell(None)` restores: the local executor with the configured interpreter.
    local_shell: Arc<dyn ShellExecutor>,
    pub shell_settings: ShellSettings,
    pub web: WebSettings,
    /// Where results over 40,000 characters are spilled (`tool_outputs_dir`; default
    /// `<workspace>/.agentao/tool-outputs`).
    pub tool_outputs: SpillDir,
    todos: Mutex<Vec<TodoItem>>,
    memory: RwLock<Arc<dyn MemoryStore>>,
    /// The process groups background shell runs started, shared with every sub-agent's view.
    processes: Arc<BackgroundProcesses>,
    /// What `save_memory` may add to the store (config `memory.max_entries`, `max_bytes`).
    pub(crate) memory_budget: memory::MemoryBudget,
}

impl Default for ToolServices {
    fn default() -> Self {
        let local_shell: Arc<dyn ShellExecutor> = Arc::new(LocalShellExecutor::default());
        ToolServices {
            fs: RwLock::new(Arc::new(LocalFileSystem)),
            shell: RwLock::new(local_shell.clone()),
            local_shell,
            shell_settings: ShellSettings::default(),
            web: WebSettings::default(),
            tool_outputs: SpillDir::unconfined(PathBuf::from(result_format::DEFAULT_OUTPUT_DIR)),
            todos: Mutex::new(Vec::new()),
            memory: RwLock::new(Arc::new(memory::InMemoryStore::default())),
            processes: Arc::default(),
            memory_budget: memory::MemoryBudget::default(),
        }
    }
}

impl ToolServices {
    /// Builds the local services for `workspace` (absolute, canonical) from the validated
    /// `tools` config.
    pub fn new(config: &ToolsConfig, workspace: &Path) -> Self {
        let settings = &config.settings;
        let mut services = ToolServices {
            shell_settings: settings.shell.clone(),
            web: settings.web_fetch.resolve(),
            tool_outputs: SpillDir::new(
                workspace,
                settings
                    .tool_outputs_dir
                    .as_deref()
                    .unwrap_or(result_format::DEFAULT_OUTPUT_DIR),
            ),
            ..ToolServices::default()
        };
        if let Some(interp) = &services.shell_settings.interpreter {
            services.local_shell = Arc::new(LocalShellExecutor {
                interpreter: interp.clone(),
            });
            services.set_shell(None);
        }
        services
    }

    /// A sub-agent's services (spec §6.2): the same file system, shell, memory store and
    /// settings, with a todo list of its own.
    pub fn child_view(&self) -> ToolServices {
        ToolServices {
            fs: RwLock::new(self.fs()),
            shell: RwLock::new(self.shell()),
            local_shell: self.local_shell.clone(),
            shell_settings: self.shell_settings.clone(),
            web: self.web.clone(),
            tool_outputs: self.tool_outputs.clone(),
            todos: Mutex::new(Vec::new()),
            memory: RwLock::new(self.memory()),
            processes: self.processes.clone(),
            memory_budget: self.memory_budget,
        }
    }

    /// Replaces the file-system seam (spec §5.1).
    pub fn with_file_system(self, fs: Arc<dyn FileSystem>) -> Self {
        self.set_file_system(Some(fs));
        self
    }

    /// The file system the tools use now.
    pub(crate) fn fs(&self) -> Arc<dyn FileSystem> {
        self.fs.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The shell executor `run_shell_command` uses now.
    pub(crate) fn shell(&self) -> Arc<dyn ShellExecutor> {
        self.shell.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Installs a file system; `None` restores the local one. Calls already running keep the
    /// one they started with (the agent only swaps between turns).
    pub(crate) fn set_file_system(&self, fs: Option<Arc<dyn FileSystem>>) {
        let fs = fs.unwrap_or_else(|| Arc::new(LocalFileSystem));
        *self.fs.write().unwrap_or_else(|e| e.into_inner()) = fs;
    }

    /// Installs a shell executor; `None` restores the local one.
    pub(crate) fn set_shell(&self, shell: Option<Arc<dyn ShellExecutor>>) {
        let shell = shell.unwrap_or_else(|| self.local_shell.clone());
        *self.shell.write().unwrap_or_else(|e| e.into_inner()) = shell;
    }

    /// The process groups this agent's background shell runs started, its sub-agents' included.
    pub(crate) fn processes(&self) -> &BackgroundProcesses {
        &self.processes
    }

    /// The current `todo_write` list (shown to the model in the volatile reminder).
    pub fn todos(&self) -> Vec<TodoItem> {
        self.todos.lock().map(|t| t.clone()).unwrap_or_default()
    }

    pub(crate) fn set_todos(&self, todos: Vec<TodoItem>) {
        if let Ok(mut t) = self.todos.lock() {
            *t = todos;
        }
    }

    /// The memory store (spec §5.4; default in memory).
    pub(crate) fn memory(&self) -> Arc<dyn MemoryStore> {
        self.memory
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the memory store; returns the previous one (for the caller to drop outside
    /// its locks).
    pub(crate) fn set_memory(&self, store: Arc<dyn MemoryStore>) -> Arc<dyn MemoryStore> {
        std::mem::replace(
            &mut *self.memory.write().unwrap_or_else(|e| e.into_inner()),
            store,
        )
    }

    /// [`result_format::format_result_to`] the configured spill directory, through the tools' file system.
    pub fn format_result(&self, tool_name: &str, raw: &str) -> result_format::FormattedResult {
        result_format::format_result_to(&self.tool_outputs, tool_name, raw, &*self.fs())
    }
}

impl ToolContext<'_> {
    /// The read path policy for the paths one listing yields: whichever slot of the file
    /// system listed them, and whichever reads them next, the local disk decides where they
    /// lead, as it does for a path the model names.
    pub(crate) fn listed_paths(&self) -> ListedPaths<'_> {
        ListedPaths::new(self.workspace, self.settings.allow_reads_outside_workspace)
    }

    /// Resolves a path a read-side tool wants; outside the workspace it is refused unless the
    /// config allows it (a deliberate deviation: the reference reads anywhere). A path with a
    /// NUL byte passes through (the tool then finds nothing there, as the reference does).
    pub(crate) fn resolve_read(&self, raw: &str) -> Result<PathBuf, String> {
        self.resolve_read_leaf(raw).map(|(path, _)| path)
    }

    /// [`ToolContext::resolve_read`] and what the policy's walk saw at the path itself.
    fn resolve_read_leaf(&self, raw: &str) -> Result<(PathBuf, path_policy::Leaf), String> {
        path_policy::resolve_for_read_leaf(
            self.workspace,
            raw,
            self.settings.allow_reads_outside_workspace,
        )
        .map_err(|msg| format!("Error: {msg}"))
    }

    /// A read-side tool's path argument resolved (as [`ToolContext::resolve_read`]) and found
    /// as `target` requires. `Err` is the text the call returns instead: the refusal, or the
    /// reference's `Error: Directory <raw> does not exist` (`File` for a file).
    pub(crate) fn existing_for_read(
        &self,
        raw: &str,
        target: ReadTarget,
    ) -> Result<PathBuf, String> {
        let (path, leaf) = self.resolve_read_leaf(raw)?;
        let fs = self.services.fs();
        let (found, what) = match target {
            ReadTarget::Directory => (fs.exists(&path), "Directory"),
            // The policy's last `lstat` already saw a regular file on this disk: a second
            // `stat` would say the same (the open after it follows the path either way).
            ReadTarget::File if leaf == path_policy::Leaf::File && fs.is_local_disk() => {
                (true, "File")
            }
            ReadTarget::File => (fs.is_file(&path), "File"),
        };
        if found {
            Ok(path)
        } else {
            Err(format!("Error: {what} {raw} does not exist"))
        }
    }
}

/// What a read-side tool's path argument must name ([`ToolContext::existing_for_read`]).
#[derive(Clone, Copy)]
pub(crate) enum ReadTarget {
    /// Anything that exists (the tool reports a non-directory itself).
    Directory,
    /// A regular file.
    File,
}

pub(crate) fn resolve_path(workspace: &Path, raw: &str) -> PathBuf {
    path_policy::join_to_root(workspace, raw)
}

/// Lexical `.`/`..` folding (no symlink resolution).
pub(crate) fn normalize(p: &Path) -> PathBuf {
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
    /// Reads only: it may run in a parallel batch and is allowed in read-only mode.
    fn is_read_only(&self) -> bool {
        false
    }
    /// Asks the host before running (unless a permission rule decides); by default, whatever
    /// is not read-only asks.
    fn requires_confirmation(&self) -> bool {
        !self.is_read_only()
    }
    /// Whether two calls in one parallel batch may run at once (spec §2.5 serialises them
    /// otherwise).
    fn is_reentrant(&self) -> bool {
        false
    }
    /// A refusal decided from the arguments alone, before planning looks at them (an argument
    /// too large to check); the text is the call's result.
    fn reject_early(&self, _args: &Map<String, Value>) -> Option<String> {
        None
    }
    fn origin(&self) -> ToolOrigin {
        ToolOrigin::Builtin
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError>;
    /// Whether the turn runs this tool's calls on its own task ([`Tool::execute_async`])
    /// instead of a blocking thread. A blocking-thread call costs two thread wake-ups (there
    /// and back), tens of µs each on a loaded machine, which dominates a call that is mostly
    /// waiting on a socket (an MCP request) or a small local read. Only for a call that does
    /// not block for long: the task shares a runtime worker with every agent's turns, so no
    /// host callback, no [`HostRequests::ask_user`], and anything that may block (a big file,
    /// a process) wrapped in `tokio::task::block_in_place`. `services` are the ones the call
    /// will use: a call that reaches a host's file system is host code, which runs on a blocking
    /// thread, where a cancelled turn can leave it behind if it never returns.
    fn runs_on_task(&self, _services: &ToolServices) -> bool {
        false
    }
    /// The call as a future, polled on the turn's task when [`Tool::runs_on_task`]. It is
    /// polled to the end even after a cancel (the turn waits for every call), so it must watch
    /// `ctx.cancel` itself; a panic while it is polled is the same "the tool panicked"
    /// failure as in [`Tool::execute`]. By default it runs [`Tool::execute`] when polled.
    fn execute_async<'a>(
        &'a self,
        args: &'a Map<String, Value>,
        ctx: &'a ToolContext<'a>,
    ) -> ToolFuture<'a> {
        Box::pin(async move { self.execute(args, ctx) })
    }
}

/// A call run on the turn's task ([`Tool::execute_async`]).
pub type ToolFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, ToolError>> + Send + 'a>>;

/// The built-in tool names a config may enable or disable.
pub const BUILTIN_TOOL_NAMES: &[&str] = &[
    "ask_user",
    "glob",
    "list_directory",
    "read_file",
    "replace",
    "run_shell_command",
    "save_memory",
    "search_file_content",
    "todo_write",
    "web_fetch",
    "write_file",
];

/// The MCP resource tools (registered by `mcp` when a server offers resources), which a config
/// may enable or disable as the reference's `MCP_RESOURCE_TOOL_NAMES`.
pub const MCP_RESOURCE_TOOL_NAMES: &[&str] = &[
    "list_mcp_resource_templates",
    "list_mcp_resources",
    "read_mcp_resource",
];

/// The skill tools (registered by `skills` when the agent has a skill), which a config may
/// enable or disable as the reference's `disable_tools` accepts skill names.
pub const SKILL_TOOL_NAMES: &[&str] = &["activate_skill"];

/// The tools of one agent, by name, with their schemas sorted by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    schemas: Arc<Vec<Value>>,
}

impl ToolRegistry {
    /// The built-ins the config selects.
    pub fn builtin(config: &ToolsConfig) -> Result<Self, String> {
        Self::for_selection(&ToolSelection::of(config))
    }

    /// The built-in tools a selection names; errors name an unknown tool.
    pub(crate) fn for_selection(sel: &ToolSelection) -> Result<Self, String> {
        for name in sel.enabled.iter().flatten().chain(&sel.disabled) {
            let name = name.as_str();
            if BUILTIN_TOOL_NAMES.contains(&name)
                || MCP_RESOURCE_TOOL_NAMES.contains(&name)
                || SKILL_TOOL_NAMES.contains(&name)
            {
                continue;
            }
            // MCP tools are never pruned, so `enabled` may name them (the reference checks
            // they are live; they are not connected yet when the config is read).
            if name.starts_with("mcp_") && sel.enabled.is_some() {
                continue;
            }
            if name.starts_with("mcp_") {
                return Err(format!(
                    "config field `tools.disabled`: '{name}' is an MCP tool, which cannot be \
                     disabled by name (as in the reference); deny it with a permission rule \
                     or remove its server"
                ));
            }
            return Err(format!(
                "config field `tools`: unknown tool '{name}' (known: {}, {}, {})",
                BUILTIN_TOOL_NAMES.join(", "),
                MCP_RESOURCE_TOOL_NAMES.join(", "),
                SKILL_TOOL_NAMES.join(", ")
            ));
        }
        let web = WebSettings {
            allow: sel.web_allow.clone(),
            ..WebSettings::default()
        };
        let interpreter = &sel.interpreter;
        let all: Vec<Arc<dyn Tool>> = vec![
            Arc::new(ask_user::AskUser),
            Arc::new(glob::Glob),
            Arc::new(list_directory::ListDirectory),
            Arc::new(read_file::ReadFile),
            Arc::new(replace::Replace),
            Arc::new(shell::RunShellCommand::new(interpreter)),
            Arc::new(save_memory::SaveMemory),
            Arc::new(search::SearchFileContent),
            Arc::new(todo::TodoWrite),
            Arc::new(web_fetch::WebFetch::new(&web)),
            Arc::new(write_file::WriteFile),
        ];
        let mut reg = ToolRegistry::default();
        for tool in all {
            let name = tool.name();
            if sel.selects(name) {
                reg.tools.insert(name.to_owned(), tool);
            }
        }
        reg.rebuild_schemas();
        Ok(reg)
    }

    /// Adds or replaces a tool.
    pub(crate) fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_owned(), tool);
        self.rebuild_schemas();
    }

    /// Adds or replaces many tools, rebuilding the schemas once.
    pub(crate) fn extend(&mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) {
        for tool in tools {
            self.tools.insert(tool.name().to_owned(), tool);
        }
        self.rebuild_schemas();
    }

    pub(crate) fn remove(&mut self, name: &str) -> bool {
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

    /// A tool's `parameters` schema as rendered into [`ToolRegistry::schemas`].
    pub(crate) fn parameters(&self, name: &str) -> Option<&Value> {
        let i = self.tools.keys().position(|n| n == name)?;
        member(member(&self.schemas[i], "function")?, "parameters")
    }

    /// Names in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// `{"type":"function","function":{…}}` entries sorted by name; shared, cheap to clone.
    pub fn schemas(&self) -> Arc<Vec<Value>> {
        self.schemas.clone()
    }
}

/// Reads an optional argument of one JSON type (`what`, as the message words it); a wrong type
/// is a ToolError as the reference's TypeError would be.
fn typed_arg<'a, T>(
    args: &'a Map<String, Value>,
    key: &str,
    what: &str,
    read: impl FnOnce(&'a Value) -> Option<T>,
) -> Result<Option<T>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => read(v).map(Some).ok_or_else(|| {
            ToolError::new(
                "TypeError",
                format!("argument '{key}' must be {what}, not {}", json_type(v)),
            )
        }),
    }
}

pub(crate) fn arg_str<'a>(
    args: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, ToolError> {
    typed_arg(args, key, "a string", Value::as_str)
}

pub(crate) fn arg_bool(args: &Map<String, Value>, key: &str) -> Result<Option<bool>, ToolError> {
    typed_arg(args, key, "a boolean", Value::as_bool)
}

pub(crate) fn arg_i64(args: &Map<String, Value>, key: &str) -> Result<Option<i64>, ToolError> {
    typed_arg(args, key, "an integer", |v| {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
    })
}

pub(crate) fn arg_f64(args: &Map<String, Value>, key: &str) -> Result<Option<f64>, ToolError> {
    typed_arg(args, key, "a number", Value::as_f64)
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

/// The reference calls `execute(**args)`, so an argument the tool does not declare is a
/// `TypeError` raised before the tool's own missing-argument checks. A schema that opens
/// `additionalProperties` accepts any name.
pub(crate) fn check_declared(tool: &dyn Tool, args: &Map<String, Value>) -> Result<(), ToolError> {
    if args.is_empty() {
        return Ok(());
    }
    check_declared_in(tool, &tool.parameters(), args)
}

/// What Python calls the method that raised, as its TypeError names it: the model reads the
/// reference's `<Class>.execute`. Class names are the reference's; a host's or an MCP server's
/// tool has no class of ours to name, so it keeps the tool's name.
fn python_method(tool: &dyn Tool) -> &str {
    let class = match tool.origin() {
        ToolOrigin::Agent => Some("AgentToolWrapper.execute"),
        ToolOrigin::Builtin => match tool.name() {
            "read_file" => Some("ReadFileTool.execute"),
            "write_file" => Some("WriteFileTool.execute"),
            "replace" => Some("EditTool.execute"),
            "list_directory" => Some("ReadFolderTool.execute"),
            "glob" => Some("FindFilesTool.execute"),
            "search_file_content" => Some("SearchTextTool.execute"),
            "run_shell_command" => Some("ShellTool.execute"),
            // The reference awaits the async tool's coroutine method.
            "web_fetch" => Some("WebFetchTool.async_execute"),
            "web_search" => Some("WebSearchTool.execute"),
            "save_memory" => Some("SaveMemoryTool.execute"),
            "activate_skill" => Some("ActivateSkillTool.execute"),
            "ask_user" => Some("AskUserTool.execute"),
            "todo_write" => Some("TodoWriteTool.execute"),
            "check_background_agent" => Some("CheckBackgroundAgentTool.execute"),
            "cancel_background_agent" => Some("CancelBackgroundAgentTool.execute"),
            "complete_task" => Some("CompleteTaskTool.execute"),
            _ => None,
        },
        ToolOrigin::Mcp | ToolOrigin::Host { .. } => None,
    };
    class.unwrap_or(tool.name())
}

/// [`check_declared`] against the tool's `parameters` schema as the registry rendered it
/// ([`ToolRegistry::parameters`]): building the schema on every call was 5 % of a tool-loop
/// iteration.
pub(crate) fn check_declared_in(
    tool: &dyn Tool,
    schema: &Value,
    args: &Map<String, Value>,
) -> Result<(), ToolError> {
    if args.is_empty() {
        return Ok(());
    }
    if !matches!(
        member(schema, "additionalProperties"),
        None | Some(Value::Bool(false))
    ) {
        return Ok(());
    }
    let declared = member(schema, "properties").and_then(Value::as_object);
    match args
        .keys()
        .find(|k| !declared.is_some_and(|d| has_member(d, k)))
    {
        Some(key) => Err(ToolError::new(
            "TypeError",
            format!(
                "{}() got an unexpected keyword argument '{key}'",
                python_method(tool)
            ),
        )),
        None => Ok(()),
    }
}

/// Up to this many members, an object's member is found by comparing keys in order: hashing
/// the key (serde_json's map hashes with SipHash) cost more than the whole scan, a few times a
/// call. Larger objects (a server's schema may be anything) are looked up by hash.
const SCANNED_MEMBERS: usize = 16;

/// `v[key]` when `v` is an object that has it.
fn member<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let map = v.as_object()?;
    if map.len() > SCANNED_MEMBERS {
        return map.get(key);
    }
    map.iter().find_map(|(k, v)| (k == key).then_some(v))
}

fn has_member(map: &Map<String, Value>, key: &str) -> bool {
    if map.len() > SCANNED_MEMBERS {
        return map.contains_key(key);
    }
    map.keys().any(|k| k == key)
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

#[cfg(test)]
mod argument_tests {
    use serde_json::json;

    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// Members are found alike in objects scanned in order and in larger ones looked up by
    /// hash.
    #[test]
    fn declared_arguments_are_checked_in_small_and_large_schemas() {
        let registry = ToolRegistry::builtin(&ToolsConfig::default()).unwrap();
        let tool = registry.get("read_file").unwrap();
        for n in [1, SCANNED_MEMBERS, SCANNED_MEMBERS + 1, 40] {
            let properties: Map<String, Value> =
                (0..n).map(|i| (format!("p{i}"), json!({}))).collect();
            let schema = json!({"type": "object", "properties": properties});
            let last = format!("p{}", n - 1);
            assert!(
                check_declared_in(tool.as_ref(), &schema, &args(json!({"p0": 1, last: 2}))).is_ok()
            );
            let e = check_declared_in(tool.as_ref(), &schema, &args(json!({"p0": 1, "q": 2})))
                .unwrap_err();
            assert!(
                e.message.contains("unexpected keyword argument 'q'"),
                "{n}: {e:?}"
            );
            let open =
                json!({"type": "object", "properties": properties, "additionalProperties": true});
            assert!(check_declared_in(tool.as_ref(), &open, &args(json!({"q": 2}))).is_ok());
        }
    }

    fn type_error<T: std::fmt::Debug>(r: Result<T, ToolError>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.kind, "TypeError");
        e.message
    }

    /// Absent and `null` read as unset; a whole float is an integer; a wrong type is the
    /// reference's TypeError naming the argument and the JSON type it got.
    #[test]
    fn typed_readers_accept_their_type_and_word_the_rest() {
        let a = args(json!({"s": "x", "b": true, "i": 3, "w": 4.0, "f": 2.5, "n": null}));
        assert_eq!(arg_str(&a, "s").unwrap(), Some("x"));
        assert_eq!(arg_str(&a, "n").unwrap(), None);
        assert_eq!(arg_str(&a, "absent").unwrap(), None);
        assert_eq!(arg_bool(&a, "b").unwrap(), Some(true));
        assert_eq!(arg_i64(&a, "i").unwrap(), Some(3));
        assert_eq!(arg_i64(&a, "w").unwrap(), Some(4));
        assert_eq!(arg_f64(&a, "i").unwrap(), Some(3.0));
        assert_eq!(arg_f64(&a, "f").unwrap(), Some(2.5));
        assert_eq!(
            type_error(arg_str(&a, "b")),
            "argument 'b' must be a string, not boolean"
        );
        assert_eq!(
            type_error(arg_bool(&a, "s")),
            "argument 's' must be a boolean, not string"
        );
        assert_eq!(
            type_error(arg_i64(&a, "f")),
            "argument 'f' must be an integer, not number"
        );
        assert_eq!(
            type_error(arg_f64(&args(json!({"f": [1]})), "f")),
            "argument 'f' must be a number, not array"
        );
        assert_eq!(required_str(&a, "s", "t").unwrap(), "x");
        assert_eq!(
            type_error(required_str(&a, "n", "read_file")),
            "read_file() missing 1 required positional argument: 'n'"
        );
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    /// The rendered schema the turn checks arguments against is each tool's own.
    #[test]
    fn parameters_are_each_tools_own() {
        let reg = ToolRegistry::builtin(&ToolsConfig::default()).unwrap();
        assert!(reg.names().count() > 5);
        for name in reg.names() {
            let tool = reg.get(name).unwrap();
            assert_eq!(reg.parameters(name), Some(&tool.parameters()), "{name}");
        }
        assert_eq!(reg.parameters("no_such_tool"), None);
    }
}
