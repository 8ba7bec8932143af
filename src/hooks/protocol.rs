//! What a command hook says back, read the way Claude Code reads it: the exit code first
//! (0 success, 2 a blocking error whose stderr is the reason, anything else an error), then on
//! exit 0 the JSON object on stdout (`continue`, `stopReason`, `systemMessage`,
//! `decision`/`reason`, `hookSpecificOutput` with `permissionDecision`,
//! `permissionDecisionReason`, `updatedInput`, `additionalContext`) or plain text.

use serde_json::{Map, Value};

use super::command::{Exited, RunFailure};

/// The most characters of one hook's text (a reason, a context) that reach the model or the
/// host; Claude Code caps injected hook output the same way.
pub(crate) const MAX_TEXT_CHARS: usize = 10_000;

/// A decision a hook can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookDecision {
    /// Let the call run without asking (`PreToolUse` `allow`, legacy `approve`).
    Allow,
    /// Ask the host to confirm (`PreToolUse` `ask`).
    Ask,
    /// Refuse the call (`PreToolUse` `deny`), block the prompt or the stop (`block`).
    Block,
}

/// One hook's answer, read from its output.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HookReply {
    /// `continue: false`: the turn ends after this point, with `stop_reason`.
    pub(crate) halt: bool,
    pub(crate) stop_reason: Option<String>,
    pub(crate) decision: Option<HookDecision>,
    pub(crate) reason: Option<String>,
    pub(crate) updated_input: Option<Map<String, Value>>,
    pub(crate) additional_context: Option<String>,
    pub(crate) system_message: Option<String>,
    /// Exit 0 with stdout that is not a JSON object: context for the events that take it.
    pub(crate) plain_output: Option<String>,
}

/// How one hook ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HookResult {
    /// Exit 0.
    Replied(HookReply),
    /// Exit 2: a blocking error, with stderr as its reason.
    Blocked(String),
    /// Any other end: an exit code other than 0 or 2, output that is not what the protocol
    /// says, a timeout, a signal, too much output, no start at all.
    Failed(String),
}

pub(crate) fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => format!("{}… [truncated]", &text[..at]),
        None => text.to_owned(),
    }
}

impl HookResult {
    pub(crate) fn from_run(run: Result<Exited, RunFailure>) -> HookResult {
        let exited = match run {
            Ok(e) => e,
            Err(f) => return HookResult::Failed(format!("hook {f}")),
        };
        match exited.code {
            0 => match parse_stdout(&exited.stdout) {
                Ok(reply) => HookResult::Replied(reply),
                Err(e) => HookResult::Failed(format!("hook output: {e}")),
            },
            2 => HookResult::Blocked(match clip(&exited.stderr) {
                s if s.is_empty() => "blocked by hook (exit code 2)".to_owned(),
                s => s,
            }),
            code => HookResult::Failed(match clip(&exited.stderr) {
                s if s.is_empty() => format!("hook exited with code {code}"),
                s => format!("hook exited with code {code}: {s}"),
            }),
        }
    }
}

fn text_field(o: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(clip(s))),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// Reads a hook's stdout after exit 0.
pub(crate) fn parse_stdout(stdout: &str) -> Result<HookReply, String> {
    let trimmed = stdout.trim();
    if !trimmed.starts_with('{') {
        return Ok(HookReply {
            plain_output: (!trimmed.is_empty()).then(|| clip(trimmed)),
            ..HookReply::default()
        });
    }
    let o = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err("not a JSON object".to_owned()),
        Err(e) => return Err(format!("invalid JSON: {e}")),
    };
    let mut reply = HookReply {
        halt: match o.get("continue") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => !b,
            Some(_) => return Err("`continue` must be a boolean".to_owned()),
        },
        stop_reason: text_field(&o, "stopReason")?,
        reason: text_field(&o, "reason")?,
        system_message: text_field(&o, "systemMessage")?,
        decision: match o.get("decision") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == "block" => Some(HookDecision::Block),
            Some(Value::String(s)) if s == "approve" => Some(HookDecision::Allow),
            Some(_) => return Err("`decision` must be \"block\" or \"approve\"".to_owned()),
        },
        ..HookReply::default()
    };
    match o.get("hookSpecificOutput") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            match h.get("permissionDecision") {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => {
                    reply.decision = Some(match s.as_str() {
                        "allow" => HookDecision::Allow,
                        "ask" => HookDecision::Ask,
                        "deny" => HookDecision::Block,
                        other => {
                            return Err(format!(
                                "`permissionDecision` '{other}' is not allow, deny or ask"
                            ))
                        }
                    })
                }
                Some(_) => return Err("`permissionDecision` must be a string".to_owned()),
            }
            if let Some(r) = text_field(h, "permissionDecisionReason")? {
                reply.reason = Some(r);
            }
            reply.additional_context = text_field(h, "additionalContext")?;
            reply.updated_input = match h.get("updatedInput") {
                None | Some(Value::Null) => None,
                Some(Value::Object(m)) => Some(m.clone()),
                Some(_) => return Err("`updatedInput` must be an object".to_owned()),
            };
        }
        Some(_) => return Err("`hookSpecificOutput` must be an object".to_owned()),
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32, stdout: &str, stderr: &str) -> HookResult {
        HookResult::from_run(Ok(Exited {
            code,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }))
    }

    #[test]
    fn exit_codes_follow_claude_code() {
        assert_eq!(
            exited(2, "", "no rm\n"),
            HookResult::Blocked("no rm".into())
        );
        assert!(
            matches!(exited(1, "", "boom"), HookResult::Failed(m) if m.contains("code 1: boom"))
        );
        let HookResult::Replied(r) = exited(0, "some context\n", "") else {
            panic!()
        };
        assert_eq!(r.plain_output.as_deref(), Some("some context"));
    }

    #[test]
    fn json_output_is_read() {
        let r = parse_stdout(
            r#"{"continue": true, "hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny", "permissionDecisionReason": "no",
            "updatedInput": {"command": "ls"}, "additionalContext": "ctx"}}"#,
        )
        .unwrap();
        assert_eq!(r.decision, Some(HookDecision::Block));
        assert_eq!(r.reason.as_deref(), Some("no"));
        assert_eq!(r.updated_input.unwrap()["command"], "ls");
        assert_eq!(r.additional_context.as_deref(), Some("ctx"));
        let legacy = parse_stdout(r#"{"decision": "approve", "reason": "ok"}"#).unwrap();
        assert_eq!(legacy.decision, Some(HookDecision::Allow));
        let halt = parse_stdout(r#"{"continue": false, "stopReason": "done"}"#).unwrap();
        assert!(halt.halt);
    }

    #[test]
    fn bad_output_is_a_failure() {
        assert!(parse_stdout("{not json").is_err());
        assert!(
            parse_stdout(r#"{"hookSpecificOutput": {"permissionDecision": "maybe"}}"#).is_err()
        );
        assert!(parse_stdout(r#"{"continue": "no"}"#).is_err());
        assert!(parse_stdout(r#"{"hookSpecificOutput": {"updatedInput": "x"}}"#).is_err());
    }

    #[test]
    fn long_text_is_clipped() {
        let long = "x".repeat(MAX_TEXT_CHARS + 10);
        assert!(clip(&long).ends_with("[truncated]"));
    }
}
