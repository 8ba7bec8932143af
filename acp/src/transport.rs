//! The agent's transport for one ACP session: the turn's typed events (observed in-process,
//! never re-parsed from JSON) become `session/update` notifications, confirmations become
//! `session/request_permission` round trips, `ask_user` becomes the `_agentao.cn/ask_user`
//! extension request.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use agentao::events::transport::{
    Answer, ConfirmRequest, Confirmation, Reply, Transport, NON_INTERACTIVE_ANSWER,
};
use agentao::events::turn_event::ToolStatus;
use agentao::events::TurnEvent;
use serde_json::{json, Map, Value};

use crate::protocol::{
    permission_options, AskUserParams, AskUserResponse, PermissionOutcome, PlanEntry,
    RequestPermissionParams, RequestPermissionResponse, SessionUpdate, SessionUpdateParams,
    TextBlock, ToolCallContent, ToolCallStatus, ToolCallSummary, ToolKind, ASK_USER_METHOD,
};
use crate::rpc::{Outbox, Pending};
use crate::session::Session;

/// What `ask_user` answers when the client dismissed the question.
pub const ASK_USER_CANCELLED: &str = "[ask_user: cancelled by the user]";

pub struct AcpTransport {
    session_id: String,
    cwd: PathBuf,
    out: Outbox,
    pending: Arc<Pending>,
    session: OnceLock<Weak<Session>>,
    /// Calls already announced with a `tool_call` update (at confirmation or start).
    announced: Mutex<HashSet<String>>,
    /// The model's text streamed since the turn began: a turn's closing notice is sent only when
    /// the client has not just seen it streamed.
    streamed: Mutex<String>,
}

impl AcpTransport {
    pub fn new(session_id: String, cwd: PathBuf, out: Outbox, pending: Arc<Pending>) -> Self {
        AcpTransport {
            session_id,
            cwd,
            out,
            pending,
            session: OnceLock::new(),
            announced: Mutex::new(HashSet::new()),
            streamed: Mutex::new(String::new()),
        }
    }

    pub fn attach(&self, session: Weak<Session>) {
        let _ = self.session.set(session);
    }

    pub fn update(&self, update: SessionUpdate<'_>) {
        self.out.notify(
            "session/update",
            &SessionUpdateParams {
                session_id: &self.session_id,
                update,
            },
        );
    }

    /// The `session/update` notifications of one turn event: a projection of the typed
    /// event (its fields are read, not parsed out of JSON), with the session's stream state.
    fn on_event(&self, event: &TurnEvent<'_>) {
        match event {
            // The hot path: one streamed model delta.
            TurnEvent::LlmText { chunk } => {
                let chunk = chunk.as_str();
                if !chunk.is_empty() {
                    self.streamed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push_str(chunk);
                    self.update(SessionUpdate::AgentMessageChunk {
                        content: TextBlock::new(chunk),
                    });
                }
            }
            TurnEvent::TurnBegin { .. } => self
                .streamed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear(),
            TurnEvent::Thinking { text } => {
                if !text.is_empty() {
                    self.update(SessionUpdate::AgentThoughtChunk {
                        content: TextBlock::new(text),
                    });
                }
            }
            TurnEvent::ToolConfirmation(c) => {
                if self.announce(c.call_id) {
                    self.update(SessionUpdate::ToolCall(summary(
                        c.tool,
                        c.args,
                        c.call_id,
                        ToolCallStatus::Pending,
                        &self.cwd,
                    )));
                }
            }
            TurnEvent::ToolStart(c) => {
                if self.announce(c.call_id) {
                    self.update(SessionUpdate::ToolCall(summary(
                        c.tool,
                        c.args,
                        c.call_id,
                        ToolCallStatus::InProgress,
                        &self.cwd,
                    )));
                } else {
                    self.update(SessionUpdate::ToolCallUpdate {
                        tool_call_id: c.call_id,
                        status: ToolCallStatus::InProgress,
                        content: None,
                    });
                }
                if c.tool == "todo_write" {
                    if let Some(entries) = plan_entries(c.args) {
                        self.update(SessionUpdate::Plan { entries });
                    }
                }
            }
            TurnEvent::ToolOutput(o) => {
                self.update(SessionUpdate::ToolCallUpdate {
                    tool_call_id: o.call_id,
                    status: ToolCallStatus::InProgress,
                    content: Some(vec![ToolCallContent::Content {
                        content: TextBlock::new(o.chunk),
                    }]),
                });
            }
            TurnEvent::ToolComplete(c) => {
                self.announced
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(c.call_id);
                self.update(SessionUpdate::ToolCallUpdate {
                    tool_call_id: c.call_id,
                    status: call_status(c.status),
                    content: c.error.map(|e| {
                        vec![ToolCallContent::Content {
                            content: TextBlock::new(e),
                        }]
                    }),
                });
            }
            TurnEvent::ToolResult(r) => {
                self.update(SessionUpdate::ToolCallUpdate {
                    tool_call_id: r.call_id,
                    status: call_status(r.status),
                    content: Some(vec![ToolCallContent::Content {
                        content: TextBlock::new(r.content),
                    }]),
                });
            }
            // Not part of the ACP stream.
            TurnEvent::TurnStart(_)
            | TurnEvent::PermissionDecision(_)
            | TurnEvent::SubagentSpawned(_)
            | TurnEvent::SubagentEnded(_)
            | TurnEvent::ReadonlyModeChanged(_)
            | TurnEvent::PermissionModeChanged(_)
            | TurnEvent::McpServerStatus(_)
            | TurnEvent::SessionCommitted(_)
            | TurnEvent::LlmCallStarted(_)
            | TurnEvent::LlmCallDelta(_)
            | TurnEvent::LlmCallCompleted(_)
            | TurnEvent::LlmRetry(_)
            | TurnEvent::BackgroundNotificationInjected(_)
            | TurnEvent::CompactionStarted(_)
            | TurnEvent::CompactionSettled(_)
            | TurnEvent::ContextCompressed(_)
            | TurnEvent::SessionSummaryWritten(_)
            | TurnEvent::ImagesRemoved(_)
            | TurnEvent::PluginHookFired(_)
            | TurnEvent::TurnEnd(_) => {}
        }
    }

    /// Sends the text a turn ended with, when it says something the client has not just been
    /// streamed (a harness notice such as `[LLM API error: …]` or a doom-loop halt is never
    /// streamed; a partial answer cut short usually is).
    pub fn notice(&self, text: &str) {
        let seen = std::mem::take(&mut *self.streamed.lock().unwrap_or_else(|e| e.into_inner()));
        let text = text.trim();
        let seen = seen.trim_end();
        if text.is_empty() || seen.ends_with(text) {
            return;
        }
        // Not glued to the end of a message the stream left unfinished.
        let text = if seen.is_empty() {
            Cow::Borrowed(text)
        } else {
            Cow::Owned(format!("\n\n{text}"))
        };
        self.update(SessionUpdate::AgentMessageChunk {
            content: TextBlock::new(&text),
        });
    }

    /// Marks a call as announced; true the first time.
    fn announce(&self, call_id: &str) -> bool {
        self.announced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(call_id.to_owned())
    }
}

impl Transport for AcpTransport {
    /// Every event is observed typed (`observe`); none is wanted as JSON.
    fn emit(&self, _event: &str) {}

    fn listens(&self) -> bool {
        false
    }

    fn observes(&self) -> bool {
        true
    }

    fn observe(&self, event: &TurnEvent<'_>) {
        self.on_event(event);
    }

    fn confirm_tool(&self, req: ConfirmRequest, reply: Reply) {
        if self.out.is_closed() {
            let _ = reply.answer(Answer::Confirm(Confirmation::DenyUnavailable));
            return;
        }
        let args: Map<String, Value> = serde_json::from_str(&req.args_json).unwrap_or_default();
        let session = self.session.get().cloned();
        let always = allow_always_rule(&req.tool_name, &args);
        let offer_always = matches!(always, AlwaysAllow::Rule(_));
        let id = self.pending.register(Box::new(move |result| {
            let confirmation = match result
                .ok()
                .and_then(|v| serde_json::from_value::<RequestPermissionResponse>(v).ok())
                .map(|r| r.outcome)
            {
                Some(PermissionOutcome::Selected { option_id }) => match option_id.as_str() {
                    "allow_once" => Confirmation::Allow,
                    "allow_always" => {
                        // Without a rule (none safe to remember, or the session is gone) the
                        // user's "allow" still holds for this call.
                        if let (AlwaysAllow::Rule(rule), Some(s)) =
                            (always, session.and_then(|s| s.upgrade()))
                        {
                            if let Err(e) = s.remember_allow(rule) {
                                eprintln!("agentao-acp: an \"always allow\" rule was refused: {e}");
                            }
                        }
                        Confirmation::Allow
                    }
                    _ => Confirmation::Deny,
                },
                // Cancelled, an error, an unknown option or an unreadable answer: not allowed.
                _ => Confirmation::Deny,
            };
            let _ = reply.answer(Answer::Confirm(confirmation));
        }));
        let mut tool_call = summary(
            &req.tool_name,
            &args,
            &req.call_id,
            ToolCallStatus::Pending,
            &self.cwd,
        );
        if tool_call.content.is_empty() && !req.description.is_empty() {
            tool_call.content.push(ToolCallContent::Content {
                content: TextBlock::new(&req.description),
            });
        }
        self.out.request(
            id,
            "session/request_permission",
            &RequestPermissionParams {
                session_id: &self.session_id,
                tool_call,
                options: permission_options(offer_always),
            },
        );
    }

    fn ask_user(&self, question: &str, hints_json: &str, reply: Reply) {
        if self.out.is_closed() {
            let _ = reply.answer(Answer::Text(NON_INTERACTIVE_ANSWER.to_owned()));
            return;
        }
        let hints: Value = serde_json::from_str(hints_json).unwrap_or(Value::Null);
        let id = self.pending.register(Box::new(move |result| {
            let text = match result.map(serde_json::from_value::<AskUserResponse>) {
                Ok(Ok(AskUserResponse::Answered { text })) => text,
                Ok(Ok(AskUserResponse::Cancelled)) => ASK_USER_CANCELLED.to_owned(),
                // The client does not implement the extension (or answered nonsense).
                _ => NON_INTERACTIVE_ANSWER.to_owned(),
            };
            let _ = reply.answer(Answer::Text(text));
        }));
        let strings = |v: &Value| -> Option<Vec<String>> {
            v.as_array().map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
        };
        self.out.request(
            id,
            ASK_USER_METHOD,
            &AskUserParams {
                session_id: &self.session_id,
                question,
                header: hints["header"].as_str().map(str::to_owned),
                options: strings(&hints["options"]),
                multiple: hints["multiple"].as_bool().unwrap_or(false),
                allow_custom: hints["allow_custom"].as_bool().unwrap_or(true),
            },
        );
    }
}

fn call_status(s: ToolStatus) -> ToolCallStatus {
    if s == ToolStatus::Ok {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    }
}

pub fn tool_kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "list_directory" => ToolKind::Read,
        "write_file" | "replace" => ToolKind::Edit,
        "glob" | "search_file_content" | "grep" => ToolKind::Search,
        "run_shell_command" => ToolKind::Execute,
        "web_fetch" | "web_search" => ToolKind::Fetch,
        "todo_write" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// Arguments that say what a call acts on, in order of preference.
const SUBJECT_KEYS: [&str; 5] = ["command", "file_path", "url", "path", "pattern"];

/// The argument that says what a call acts on, for titles.
fn subject(args: &Map<String, Value>) -> Option<(&'static str, &str)> {
    SUBJECT_KEYS
        .into_iter()
        .find_map(|k| args.get(k).and_then(Value::as_str).map(|v| (k, v)))
}

fn title(tool: &str, args: &Map<String, Value>) -> String {
    match subject(args) {
        Some((_, v)) => {
            let v: String = v.chars().take(160).collect();
            format!("{tool}: {v}")
        }
        None => tool.to_owned(),
    }
}

fn absolute(cwd: &Path, p: &str) -> String {
    let path = Path::new(p);
    if path.is_absolute() {
        p.to_owned()
    } else {
        cwd.join(path).display().to_string()
    }
}

/// The `AcpToolCallSummary` of a call; file edits carry their diff.
pub fn summary<'a>(
    tool: &str,
    args: &'a Map<String, Value>,
    call_id: &'a str,
    status: ToolCallStatus,
    cwd: &Path,
) -> ToolCallSummary<'a> {
    let mut content = Vec::new();
    let str_arg = |k: &str| args.get(k).and_then(Value::as_str);
    if let Some(path) = str_arg("file_path") {
        match tool {
            "write_file" => {
                if let Some(new_text) = str_arg("content") {
                    content.push(ToolCallContent::Diff {
                        path: absolute(cwd, path),
                        old_text: None,
                        new_text,
                    });
                }
            }
            "replace" => {
                // The tool's own argument names (spec: `old_text`, `new_text`).
                if let (Some(old), Some(new_text)) = (str_arg("old_text"), str_arg("new_text")) {
                    content.push(ToolCallContent::Diff {
                        path: absolute(cwd, path),
                        old_text: Some(old),
                        new_text,
                    });
                }
            }
            _ => {}
        }
    }
    ToolCallSummary {
        tool_call_id: call_id,
        title: title(tool, args),
        kind: tool_kind(tool),
        status,
        raw_input: args,
        content,
    }
}

/// `todo_write`'s list as plan entries (the reference synthesizes priority `medium`).
fn plan_entries(args: &Map<String, Value>) -> Option<Vec<PlanEntry<'_>>> {
    let todos = args.get("todos")?.as_array()?;
    Some(
        todos
            .iter()
            .filter_map(|t| {
                let content = t.get("content")?.as_str()?;
                let status = match t.get("status").and_then(Value::as_str) {
                    Some("in_progress") => "in_progress",
                    Some("completed") => "completed",
                    _ => "pending",
                };
                Some(PlanEntry {
                    content,
                    priority: "medium",
                    status,
                })
            })
            .collect(),
    )
}

/// What an "always allow" answer remembers for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum AlwaysAllow {
    /// An engine rule for later calls.
    Rule(Value),
    /// Nothing: no rule narrower than the whole tool describes the call (its subject is missing
    /// or not a string), and a wider one would allow calls the user never saw.
    OnlyThisCall,
}

/// The arguments that say what a built-in tool acts on.
struct ToolScope {
    /// Must be a string for anything to be remembered.
    subject: Option<&'static str>,
    /// Where the call acts (a directory): pinned as given, or to "absent"; any other type leaves
    /// nothing remembered. Without them, allowing `rm -rf *` here would allow it in `$HOME`.
    context: &'static [&'static str],
}

fn tool_scope(tool: &str) -> Option<ToolScope> {
    let scope = |subject, context| Some(ToolScope { subject, context });
    match tool {
        "run_shell_command" => scope(Some("command"), &["working_directory"]),
        "read_file" | "write_file" | "replace" => scope(Some("file_path"), &[]),
        "web_fetch" => scope(Some("url"), &[]),
        "glob" => scope(Some("pattern"), &["directory"]),
        "search_file_content" => scope(Some("pattern"), &["directory", "file_pattern"]),
        "list_directory" => scope(None, &["directory_path"]),
        _ => None,
    }
}

/// Matches exactly `v`; the engine matches an absent argument as "".
fn exactly(v: &str) -> String {
    format!(r"\A{}\Z", regex::escape(v))
}

/// The engine rule an "always allow" answer adds: the tool, scoped to the exact subject
/// (command, file, URL) and the directory it acts in, so allowing `ls` never allows `rm`.
/// A tool the server does not know is scoped to the first subject-like argument it has, and
/// allowed as a whole only when it has none.
pub fn allow_always_rule(tool: &str, args: &Map<String, Value>) -> AlwaysAllow {
    let tool_re = format!("^{}$", regex::escape(tool));
    let mut pinned = Map::new();
    match tool_scope(tool) {
        Some(scope) => {
            if let Some(key) = scope.subject {
                match args.get(key) {
                    Some(Value::String(v)) => {
                        pinned.insert(key.to_owned(), Value::String(exactly(v)));
                    }
                    _ => return AlwaysAllow::OnlyThisCall,
                }
            }
            for &key in scope.context {
                let v = match args.get(key) {
                    None | Some(Value::Null) => "",
                    Some(Value::String(v)) => v.as_str(),
                    Some(_) => return AlwaysAllow::OnlyThisCall,
                };
                pinned.insert(key.to_owned(), Value::String(exactly(v)));
            }
        }
        None => {
            // The first such argument decides: a malformed one never falls through to another.
            if let Some(key) = SUBJECT_KEYS.into_iter().find(|k| args.contains_key(*k)) {
                match &args[key] {
                    Value::String(v) => {
                        pinned.insert(key.to_owned(), Value::String(exactly(v)));
                    }
                    _ => return AlwaysAllow::OnlyThisCall,
                }
            }
        }
    }
    AlwaysAllow::Rule(if pinned.is_empty() {
        json!({"tool": tool_re, "action": "allow"})
    } else {
        json!({"tool": tool_re, "args": pinned, "action": "allow"})
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(tool: &str, args: Value) -> AlwaysAllow {
        allow_always_rule(tool, args.as_object().expect("an object"))
    }

    #[test]
    fn a_replace_shows_its_diff() {
        let args = json!({"file_path": "a.txt", "old_text": "one", "new_text": "two"});
        let s = summary(
            "replace",
            args.as_object().expect("an object"),
            "c1",
            ToolCallStatus::Pending,
            Path::new("/ws"),
        );
        let content = serde_json::to_value(&s.content).expect("serializes");
        assert_eq!(
            content,
            json!([{"type": "diff", "path": "/ws/a.txt", "oldText": "one", "newText": "two"}])
        );
    }

    #[test]
    fn always_allow_is_scoped_or_not_remembered() {
        let exact = |v: &str| Value::String(exactly(v));
        assert_eq!(
            rule("run_shell_command", json!({"command": "ls", "timeout": 5})),
            AlwaysAllow::Rule(json!({"tool": "^run_shell_command$",
                "args": {"command": exact("ls"), "working_directory": exact("")},
                "action": "allow"}))
        );
        for args in [
            json!({}),
            json!({"command": ["ls"]}),
            json!({"command": ["ls"], "path": "."}),
            json!({"command": "ls", "working_directory": ["/"]}),
        ] {
            assert_eq!(
                rule("run_shell_command", args.clone()),
                AlwaysAllow::OnlyThisCall,
                "{args}"
            );
        }
        assert_eq!(
            rule("list_directory", json!({})),
            AlwaysAllow::Rule(json!({"tool": "^list_directory$",
                "args": {"directory_path": exact("")}, "action": "allow"}))
        );
        // A tool the server does not know: its first subject-like argument, never another.
        assert_eq!(
            rule("mcp_x", json!({"url": 1, "path": "."})),
            AlwaysAllow::OnlyThisCall
        );
        assert_eq!(
            rule("mcp_x", json!({"path": "a", "q": 1})),
            AlwaysAllow::Rule(json!({"tool": "^mcp_x$", "args": {"path": exact("a")},
                "action": "allow"}))
        );
        assert_eq!(
            rule("todo_write", json!({"todos": []})),
            AlwaysAllow::Rule(json!({"tool": "^todo_write$", "action": "allow"}))
        );
    }
}
