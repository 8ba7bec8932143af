//! The lifecycle points a hook can run at, named as Claude Code names them, and the Claude
//! Code names of the built-in tools (so a matcher written for Claude Code, `Bash` or
//! `Edit|Write`, still selects the same kind of call here).

/// A point in the agent loop where hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// Before a planned tool call runs; may allow, deny, ask or rewrite its input.
    PreToolUse,
    /// After a tool call succeeded; may add context for the model.
    PostToolUse,
    /// After a tool call failed; may add context for the model.
    PostToolUseFailure,
    /// Before the user's message reaches the model; may add context or block it.
    UserPromptSubmit,
    /// When the model gave its final answer; may make the agent continue.
    Stop,
    /// Before the first turn of the agent; may add context.
    SessionStart,
    /// Before a full compaction summarises the older history; observes only.
    PreCompact,
}

const ALL: [HookEvent; 7] = [
    HookEvent::PreToolUse,
    HookEvent::PostToolUse,
    HookEvent::PostToolUseFailure,
    HookEvent::UserPromptSubmit,
    HookEvent::Stop,
    HookEvent::SessionStart,
    HookEvent::PreCompact,
];

impl HookEvent {
    /// The name in the config, in the hook's input (`hook_event_name`) and in events.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::PreCompact => "PreCompact",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<HookEvent> {
        ALL.into_iter().find(|e| e.as_str() == name)
    }

    pub(crate) fn names() -> String {
        ALL.map(HookEvent::as_str).join(", ")
    }
}

/// The name a hook command reads in `tool_name`: Claude Code's name of a built-in tool (what
/// the reference sends too, so pasted guard scripts that test `tool_name == "Bash"` keep
/// working), else the tool's own name.
pub(crate) fn stdin_tool_name(tool: &str) -> &str {
    claude_code_alias(tool).unwrap_or(tool)
}

/// The Claude Code name of a built-in tool, when it has one.
pub(crate) fn claude_code_alias(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "run_shell_command" => "Bash",
        "read_file" => "Read",
        "write_file" => "Write",
        "replace" => "Edit",
        "glob" => "Glob",
        "search_file_content" => "Grep",
        "list_directory" => "LS",
        "web_fetch" => "WebFetch",
        "web_search" => "WebSearch",
        "todo_write" => "TodoWrite",
        _ => return None,
    })
}
