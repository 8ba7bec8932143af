//! Permissions: where a tool call is decided (allow / deny / ask).
//!
//! [`decide`] is the reference's planner pipeline (spec §3.1): the read-only gate, then the
//! engine (hardline floor, run-scope denies, preset and user rules in the mode's order), then
//! the confirmation fallback. Without an engine only the gate and the fallback apply, and the
//! snapshot reports `default:no-engine`.
//!
//! Deciding starts no process: a verdict that depends on a run (where git's repository lies)
//! comes back as a [`Probe`] for the caller to answer through its own seams, and
//! [`decide_probing`] (which the turn, the preflight and the fuzz targets share) decides again
//! with the answer. `git_launch` is the launch side of the same promise and the probe's local
//! answer.

pub(crate) mod config;
pub(crate) mod engine;
pub(crate) mod git_launch;
pub mod hardline;
pub(crate) mod listed_paths;
pub mod path_policy;
pub(crate) mod preflight;
pub(crate) mod presets;
pub mod probe;
pub mod rules;
pub(crate) mod shell_reads;
pub mod url_policy;

use serde::Serialize;
use serde_json::{Map, Value};

pub use config::PermissionsConfig;
pub use engine::{AddedRules, EngineAction, EngineMatch, PermissionEngine};
pub use probe::{Probe, ProbeAnswer, Probed, Probing};

/// The four modes; the strings are wire values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    ReadOnly,
    WorkspaceWrite,
    FullAccess,
    Plan,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
            Mode::Plan => "plan",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "read-only" => Mode::ReadOnly,
            "workspace-write" => Mode::WorkspaceWrite,
            "full-access" => Mode::FullAccess,
            "plan" => Mode::Plan,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
    Ask,
}

impl Verdict {
    /// The host event's `outcome` word.
    pub fn outcome(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Ask => "prompt",
        }
    }
}

/// Why a call was denied; it picks the text the model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DenyKind {
    ReadOnly,
    Rules,
}

#[derive(Debug, Clone)]
pub struct Decision {
    pub verdict: Verdict,
    pub(crate) deny_kind: Option<DenyKind>,
    /// The matched rule as it stands in the rules (projected for host events later).
    pub matched_rule: Option<Value>,
    pub reason: String,
}

/// `ActivePermissions`: mode, rules in evaluation order, source labels.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ActivePermissions {
    pub mode: String,
    pub rules: Vec<Value>,
    pub loaded_sources: Vec<String>,
}

impl ActivePermissions {
    pub fn no_engine() -> Self {
        ActivePermissions {
            mode: Mode::WorkspaceWrite.as_str().to_owned(),
            rules: Vec::new(),
            loaded_sources: vec!["default:no-engine".to_owned()],
        }
    }
}

/// What the planner knows about the tool being called.
#[derive(Debug, Clone, Copy)]
pub struct ToolFacts<'a> {
    pub name: &'a str,
    pub is_read_only: bool,
    pub requires_confirmation: bool,
}

/// The hardline floor for a shell command (spec §3.7): `Some(description)` when the command
/// is refused in every mode. Used by the planner through the engine and by `run_shell_command`
/// at launch when no engine is configured.
pub fn hardline_verdict(command: &str) -> Option<String> {
    hardline::check(command).map(str::to_owned)
}

/// Whether `decision` is an allow of the presets' read-only shell rule (made without the
/// host, on the promise that the command reads only inside the workspace).
pub(crate) fn by_read_only_set(decision: &Decision) -> bool {
    decision.verdict == Verdict::Allow
        && decision.reason.starts_with("mode-preset:")
        && decision
            .matched_rule
            .as_ref()
            .and_then(|r| r.get("args")?.get("command")?.as_str())
            == Some(presets::READ_ONLY_SHELL)
}

/// The planner's decision for one call (spec §3.1 / §5.6), with every probe it needs
/// answered by `answer` (see [`probe`]): the one path the turn, the preflight and the fuzz
/// targets share.
pub fn decide_probing(
    engine: Option<&PermissionEngine>,
    read_only_flag: bool,
    tool: ToolFacts<'_>,
    args: &Map<String, Value>,
    answer: impl FnMut(&Probe) -> ProbeAnswer,
) -> Decision {
    Probing::resolve(
        |probed| decide(engine, read_only_flag, tool, args, probed),
        answer,
    )
}

/// The planner's decision for one call (spec §3.1 / §5.6) from the answers in `probed`, or
/// the probe it needs first. Pure: it starts no process.
pub fn decide(
    engine: Option<&PermissionEngine>,
    read_only_flag: bool,
    tool: ToolFacts<'_>,
    args: &Map<String, Value>,
    probed: &Probed,
) -> Probing<Decision> {
    let read_only = read_only_flag || engine.is_some_and(|e| e.mode() == Mode::ReadOnly);
    if read_only && !tool.is_read_only {
        return Probing::Decided(Decision {
            verdict: Verdict::Deny,
            deny_kind: Some(DenyKind::ReadOnly),
            matched_rule: None,
            reason: "mode-preset:read-only".to_owned(),
        });
    }
    let matched = match engine.map(|e| e.decide_detail(tool.name, args, probed)) {
        None => None,
        Some(Probing::Decided(m)) => m,
        Some(Probing::NeedsProbe(p)) => return Probing::NeedsProbe(p),
    };
    Probing::Decided(match matched {
        Some(EngineMatch {
            action: EngineAction::Deny,
            rule,
            reason,
        }) => Decision {
            verdict: Verdict::Deny,
            deny_kind: Some(DenyKind::Rules),
            matched_rule: rule,
            reason,
        },
        Some(EngineMatch {
            action: EngineAction::Allow,
            rule,
            reason,
        }) => Decision {
            verdict: Verdict::Allow,
            deny_kind: None,
            matched_rule: rule,
            reason,
        },
        // An engine `ask` always prompts, even on a tool that does not itself need confirmation
        // (deviation: the reference runs such a call as `allow`; see docs/deviations.md).
        Some(EngineMatch {
            action: EngineAction::Ask,
            rule,
            reason,
        }) => Decision {
            verdict: Verdict::Ask,
            deny_kind: None,
            matched_rule: rule,
            reason,
        },
        None if tool.requires_confirmation => Decision {
            verdict: Verdict::Ask,
            deny_kind: None,
            matched_rule: None,
            reason: "tool requires_confirmation fallback".to_owned(),
        },
        None => Decision {
            verdict: Verdict::Allow,
            deny_kind: None,
            matched_rule: None,
            reason: "no rule matched; tool does not require confirmation".to_owned(),
        },
    })
}
