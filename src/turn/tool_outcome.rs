//! `ToolOutcome`: how one tool call ended, from planning to history. The statuses, errors and
//! error types of the `tool_complete` / `tool_result` events are derived here, and nowhere else
//! (the host event's outcome and summary are projected from `tool_complete`).

use crate::permissions::DenyKind;

const DNR: &str = "Do not retry this call, rephrase its arguments, or use a different tool to achieve the same outcome.";

/// Why a planned call was not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Denied by the permission engine in read-only mode.
    ReadOnly,
    /// Denied by the permission rules.
    Rules,
    /// The host declined the confirmation.
    NotApproved,
    /// The host cannot ask anyone (non-interactive).
    ApprovalUnavailable,
    /// A `PreToolUse` hook denied it (failed, timed out or exited 2), with the hook's reason.
    Hook(std::sync::Arc<str>),
}

impl Refusal {
    pub(crate) fn denied(kind: DenyKind) -> Refusal {
        match kind {
            DenyKind::ReadOnly => Refusal::ReadOnly,
            DenyKind::Rules => Refusal::Rules,
        }
    }

    /// The `error` of the call's events.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Refusal::Hook(_) => "denied by pre-tool-use hook",
            Refusal::ReadOnly | Refusal::Rules => "denied by permission engine",
            Refusal::ApprovalUnavailable => "approval unavailable",
            Refusal::NotApproved => "not approved",
        }
    }

    /// What the model is told.
    pub(crate) fn text(&self, name: &str) -> String {
        match self {
            Refusal::Hook(reason) => {
                // The reference's two closes: with a reason the model is pointed at it (a
                // hook often names the tool to use instead), without one at another way.
                let reason = reason.trim();
                if reason.is_empty() {
                    format!("Tool execution blocked by a PreToolUse hook: '{name}'. Do not re-issue this call unchanged; use a different tool or approach to achieve the same outcome.")
                } else {
                    let clipped: String = reason.chars().take(500).collect();
                    format!("Tool execution blocked by a PreToolUse hook: '{name}'. Do not re-issue this call unchanged; if the hook's reason below names an alternative, follow it. Hook reason: {clipped}")
                }
            }
            Refusal::ReadOnly => format!("[Readonly mode] Tool '{name}' is blocked — only read-only tools are permitted in readonly mode. {DNR}"),
            Refusal::Rules => format!("Tool execution denied: '{name}' is not permitted by the current permission rules. {DNR}"),
            Refusal::ApprovalUnavailable => format!("Tool execution declined: '{name}' needed approval, and approval is unavailable in non-interactive mode, so this call was not executed. Do not retry this call. You may use an alternative permitted by the current permission rules."),
            Refusal::NotApproved => format!("Tool execution declined: '{name}' needed approval and was not approved. {DNR}"),
        }
    }
}

/// How one call ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolOutcome {
    /// The tool ran and returned its text.
    Success { text: String, duration_ms: f64 },
    /// The tool ran and failed (or panicked, or never reported back).
    Failed {
        text: String,
        /// The event's `error` (at most 200 characters of the tool's message).
        message: String,
        /// The host event's `error_type` (the tool error's kind).
        error_type: Option<String>,
        duration_ms: f64,
    },
    /// Refused by the permission engine or the host; never ran.
    Refused(Refusal),
    /// The turn was cancelled before or while the tool ran.
    Cancelled { text: String, duration_ms: f64 },
}

pub(crate) use crate::events::turn_event::ToolStatus;

impl ToolOutcome {
    /// The result text before it is formatted for history (a refusal's is built for `name`).
    pub(crate) fn text(&self, name: &str) -> std::borrow::Cow<'_, str> {
        match self {
            ToolOutcome::Success { text, .. }
            | ToolOutcome::Failed { text, .. }
            | ToolOutcome::Cancelled { text, .. } => text.as_str().into(),
            ToolOutcome::Refused(r) => r.text(name).into(),
        }
    }

    pub(crate) fn status(&self) -> ToolStatus {
        match self {
            ToolOutcome::Success { .. } => ToolStatus::Ok,
            ToolOutcome::Failed { .. } => ToolStatus::Error,
            ToolOutcome::Refused(_) | ToolOutcome::Cancelled { .. } => ToolStatus::Cancelled,
        }
    }

    /// The events' `error`.
    pub(crate) fn error(&self) -> Option<&str> {
        match self {
            ToolOutcome::Success { .. } => None,
            ToolOutcome::Failed { message, .. } => Some(message),
            ToolOutcome::Refused(r) => Some(r.reason()),
            ToolOutcome::Cancelled { .. } => Some("cancelled by user"),
        }
    }

    pub(crate) fn duration_ms(&self) -> f64 {
        match self {
            ToolOutcome::Success { duration_ms, .. }
            | ToolOutcome::Failed { duration_ms, .. }
            | ToolOutcome::Cancelled { duration_ms, .. } => *duration_ms,
            ToolOutcome::Refused(_) => 0.0,
        }
    }

    /// The failed tool's error kind (the host event's `error_type`).
    pub(crate) fn error_type(&self) -> Option<&str> {
        match self {
            ToolOutcome::Failed { error_type, .. } => error_type.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_come_from_the_outcome() {
        let ok = ToolOutcome::Success {
            text: "t".into(),
            duration_ms: 1.0,
        };
        assert_eq!((ok.status().as_str(), ok.error()), ("ok", None));
        let refused = ToolOutcome::Refused(Refusal::NotApproved);
        assert_eq!(refused.status().as_str(), "cancelled");
        assert_eq!(refused.error(), Some("not approved"));
        assert!(refused.text("w").contains("'w' needed approval"));
        let failed = ToolOutcome::Failed {
            text: "Error executing x: y".into(),
            message: "y".into(),
            error_type: Some("IoError".into()),
            duration_ms: 2.0,
        };
        assert_eq!(failed.status().as_str(), "error");
        assert_eq!(failed.error_type(), Some("IoError"));
        assert_eq!(refused.error_type(), None);
    }
}
