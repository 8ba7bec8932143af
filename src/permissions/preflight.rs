//! The answer to "what would happen if the model called this tool with these arguments now?",
//! from the planner's own [`decide`](super::decide), without running anything.

use serde::Serialize;
use serde_json::{Map, Value};

use super::{
    decide_probing, hardline_verdict, Decision, Mode, PermissionEngine, Probe, ProbeAnswer,
    ToolFacts, Verdict,
};
use crate::events::host::project_rule;

/// The step of the pipeline that settled a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum DecisionSource {
    /// The read-only gate (spec §3.1 step 1).
    ReadOnlyGate,
    /// The hardline floor.
    Hardline,
    /// A run-scope rule (`add_run_rules`).
    RunRule,
    /// A rule of the mode's preset.
    Preset,
    /// A user or host-injected rule.
    UserRule,
    /// No rule decided: the tool's `requires_confirmation` flag did.
    Fallback,
}

/// One preflight answer, as the C API hands it out.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Preflight {
    /// `allow`, `deny` or `prompt` (the PermissionDecisionEvent's words).
    pub(crate) outcome: &'static str,
    pub(crate) reason: String,
    /// The rule that decided, projected as in the host event; `null` when none did.
    pub(crate) matched_rule: Option<Value>,
    pub(crate) source: DecisionSource,
    /// The permission mode the answer was computed in.
    pub(crate) mode: &'static str,
    /// The floor's description when it refuses this command: while planning (`outcome` is
    /// `deny`) or, without an engine, when the command is launched after the prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hardline: Option<String>,
}

fn source_of(d: &Decision) -> DecisionSource {
    let r = d.reason.as_str();
    if d.matched_rule.is_none() {
        if r == "mode-preset:read-only" {
            DecisionSource::ReadOnlyGate
        } else if r.starts_with("hardline:") {
            DecisionSource::Hardline
        } else {
            DecisionSource::Fallback
        }
    } else if r.starts_with("injected:run-spec:") {
        DecisionSource::RunRule
    } else if r.starts_with("mode-preset:") {
        DecisionSource::Preset
    } else {
        DecisionSource::UserRule
    }
}

/// Decides one call exactly as the turn's planner would, its probes answered by `answer`.
pub(crate) fn preflight(
    engine: Option<&PermissionEngine>,
    read_only_flag: bool,
    tool: ToolFacts<'_>,
    args: &Map<String, Value>,
    answer: impl FnMut(&Probe) -> ProbeAnswer,
) -> Preflight {
    let d = decide_probing(engine, read_only_flag, tool, args, answer);
    let hardline = match d.reason.strip_prefix("hardline:") {
        Some(desc) if d.matched_rule.is_none() => Some(desc.to_owned()),
        // Without an engine the floor runs when the command is launched (spec §3.1).
        _ if engine.is_none() && d.verdict != Verdict::Deny && tool.name == "run_shell_command" => {
            args.get("command")
                .and_then(Value::as_str)
                .and_then(hardline_verdict)
        }
        _ => None,
    };
    let mode = engine.map_or(Mode::WorkspaceWrite, PermissionEngine::mode);
    let mode = if read_only_flag { Mode::ReadOnly } else { mode };
    Preflight {
        outcome: d.verdict.outcome(),
        source: source_of(&d),
        matched_rule: d.matched_rule.as_ref().and_then(project_rule),
        reason: d.reason,
        mode: mode.as_str(),
        hardline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn unasked(p: &Probe) -> ProbeAnswer {
        panic!("no probe expected, got {p:?}")
    }

    const SHELL: ToolFacts<'static> = ToolFacts {
        name: "run_shell_command",
        is_read_only: false,
        requires_confirmation: true,
    };

    #[test]
    fn hardline_without_an_engine_is_reported_for_launch() {
        let p = preflight(
            None,
            false,
            SHELL,
            &args(json!({"command": "rm -rf /"})),
            unasked,
        );
        assert_eq!(p.outcome, "prompt");
        assert_eq!(p.source, DecisionSource::Fallback);
        assert!(p.hardline.is_some());
        let p = preflight(None, false, SHELL, &args(json!({"command": "ls"})), unasked);
        assert!(p.hardline.is_none());
    }

    #[test]
    fn engine_sources() {
        let e = PermissionEngine::new(Mode::WorkspaceWrite, std::path::Path::new("/w"));
        let p = preflight(
            Some(&e),
            false,
            SHELL,
            &args(json!({"command": "mkfs /dev/sda"})),
            unasked,
        );
        assert_eq!((p.outcome, p.source), ("deny", DecisionSource::Hardline));
        assert!(p.hardline.is_some());
        let p = preflight(
            Some(&e),
            true,
            SHELL,
            &args(json!({"command": "ls"})),
            unasked,
        );
        assert_eq!(
            (p.outcome, p.source),
            ("deny", DecisionSource::ReadOnlyGate)
        );
        assert_eq!(p.mode, "read-only");
    }
}
