//! Firing an event: the hooks whose matcher takes it run side by side (as Claude Code runs
//! them), and their answers are combined into one typed verdict per kind of point.
//!
//! Precedence between hooks that disagree is Claude Code's: deny > ask > allow. A `PreToolUse`
//! hook that fails (an exit code other than 0 or 2, output that breaks the protocol, a
//! timeout, too much output) denies the call: the user put the hook there to guard calls, and
//! a guard that did not answer has not let anything through. At every other point a failed
//! hook is reported and otherwise ignored, as Claude Code ignores a non-blocking error.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Map, Value};

use super::command;
use super::config::HooksConfig;
use super::event::{claude_code_alias, HookEvent};
use super::host::{self, HookRequest, HostHooks};
use super::protocol::{HookDecision, HookResult};
use crate::cancel::CancelToken;

/// The hooks of one agent: the configured command hooks and the host's. Built only when there
/// are some: an agent without hooks holds `None` and its turns do nothing extra.
pub struct Hooks {
    config: HooksConfig,
    cwd: PathBuf,
    interpreter: PathBuf,
    /// Asked at every point, after the command hooks in the results' order.
    host: Option<Arc<dyn HostHooks>>,
    /// How long the host's answer is awaited (the config's `reply_timeout_ms`).
    reply_timeout: Option<Duration>,
}

/// The facts every hook input carries.
pub(crate) struct HookScope<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) permission_mode: &'a str,
}

impl Hooks {
    /// `None` when `config` configures no hook and there is no host.
    pub(crate) fn new(
        config: HooksConfig,
        cwd: &Path,
        host: Option<Arc<dyn HostHooks>>,
        reply_timeout: Option<Duration>,
    ) -> Option<Hooks> {
        if config.is_empty() && host.is_none() {
            return None;
        }
        Some(Hooks {
            config,
            cwd: cwd.to_path_buf(),
            interpreter: crate::tools::shell_exec::default_interpreter(),
            host,
            reply_timeout,
        })
    }

    /// Whether any hook would run for `event` on `name` (a tool, a source, a trigger).
    pub(crate) fn wants(&self, event: HookEvent, name: Option<&str>) -> bool {
        self.host.is_some()
            || self.config.groups(event).iter().any(|g| {
                !g.hooks.is_empty()
                    && name.is_none_or(|n| g.matcher.matches(n, claude_code_alias(n)))
            })
    }

    /// Runs every hook of `event` whose matcher takes `name` (every one when `name` is
    /// `None`), with `fields` added to the common input; the results in config order.
    pub(crate) async fn fire(
        &self,
        event: HookEvent,
        name: Option<&str>,
        scope: &HookScope<'_>,
        fields: Map<String, Value>,
        cancel: &CancelToken,
    ) -> Vec<HookResult> {
        let mut input = Map::new();
        input.insert("session_id".into(), scope.session_id.into());
        // No transcript file is kept; the history is the host's (docs/hooks.md).
        input.insert("transcript_path".into(), Value::Null);
        input.insert("cwd".into(), self.cwd.display().to_string().into());
        input.insert("permission_mode".into(), scope.permission_mode.into());
        input.insert("hook_event_name".into(), event.as_str().into());
        let call_id = fields
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        input.extend(fields);
        let input = serde_json::to_string(&Value::Object(input)).unwrap_or_default();
        let asked = async {
            let Some(h) = &self.host else {
                return None;
            };
            let request = HookRequest {
                event,
                tool_name: fields_tool(event, name),
                call_id,
                input_json: input.clone(),
            };
            Some(host::ask(h, request, cancel, self.reply_timeout).await)
        };
        let mut commands = Vec::new();
        let has_commands = !self.config.groups(event).is_empty();
        let env: Vec<(OsString, OsString)> = if has_commands {
            crate::tools::shell_exec::build_child_env(true)
        } else {
            Vec::new()
        };
        let input_bytes = input.as_bytes();
        let runs = self
            .config
            .groups(event)
            .iter()
            .filter(|g| name.is_none_or(|n| g.matcher.matches(n, claude_code_alias(n))))
            .flat_map(|g| g.hooks.iter())
            .map(|hook| async {
                HookResult::from_run(
                    command::run(
                        hook,
                        &self.interpreter,
                        input_bytes,
                        &self.cwd,
                        &env,
                        cancel,
                    )
                    .await,
                )
            });
        let (ran, asked) = futures_util::future::join(join_all(runs), asked).await;
        commands.extend(ran);
        commands.extend(asked);
        commands
    }
}

/// The tool a request names: only the tool points name one.
fn fields_tool(event: HookEvent, name: Option<&str>) -> Option<String> {
    match event {
        HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::PostToolUseFailure => {
            name.map(str::to_owned)
        }
        _ => None,
    }
}

/// What the `PreToolUse` hooks of one call decided together.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct PreToolVerdict {
    pub(crate) decision: Option<HookDecision>,
    /// The reasons of the hooks that gave the winning decision, one per line.
    pub(crate) reason: Option<String>,
    /// The last replacement input in config order (none when the call is denied).
    pub(crate) updated_input: Option<Map<String, Value>>,
    pub(crate) context: Option<String>,
    /// `continue: false`: the turn ends after this batch, with this reason.
    pub(crate) halt: Option<String>,
    pub(crate) failed: usize,
}

/// What the hooks at any other point decided together.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct PointVerdict {
    /// A block (`decision: "block"` or exit 2), with the reasons.
    pub(crate) block: Option<String>,
    pub(crate) context: Option<String>,
    pub(crate) halt: Option<String>,
    pub(crate) failed: usize,
}

fn joined(parts: Vec<String>, sep: &str) -> Option<String> {
    let parts: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    (!parts.is_empty()).then(|| parts.join(sep))
}

fn halt_of(results: &[HookResult]) -> Option<String> {
    results.iter().find_map(|r| match r {
        HookResult::Replied(r) if r.halt => Some(
            r.stop_reason
                .clone()
                .unwrap_or_else(|| "Stopped by a hook.".to_owned()),
        ),
        _ => None,
    })
}

/// Combines the `PreToolUse` results of one call.
pub(crate) fn pre_tool(results: &[HookResult]) -> PreToolVerdict {
    let each: Vec<(Option<HookDecision>, Option<String>)> = results
        .iter()
        .map(|r| match r {
            HookResult::Replied(r) => (r.decision, r.reason.clone()),
            HookResult::Blocked(why) => (Some(HookDecision::Block), Some(why.clone())),
            HookResult::Failed(why) => (Some(HookDecision::Block), Some(why.clone())),
        })
        .collect();
    let decision = each.iter().filter_map(|(d, _)| *d).max();
    let reason = decision.and_then(|won| {
        joined(
            each.iter()
                .filter(|(d, _)| *d == Some(won))
                .filter_map(|(_, r)| r.clone())
                .collect(),
            "\n",
        )
    });
    let updated_input = if decision == Some(HookDecision::Block) {
        None
    } else {
        // The first rewrite in config order, as the reference takes it.
        results.iter().find_map(|r| match r {
            HookResult::Replied(r) => r.updated_input.clone(),
            _ => None,
        })
    };
    let context = joined(
        results
            .iter()
            .filter_map(|r| match r {
                HookResult::Replied(r) => r.additional_context.clone(),
                _ => None,
            })
            .collect(),
        "\n\n",
    );
    PreToolVerdict {
        decision,
        reason,
        updated_input,
        context,
        halt: halt_of(results),
        failed: results
            .iter()
            .filter(|r| matches!(r, HookResult::Failed(_)))
            .count(),
    }
}

/// Combines the results at any point but `PreToolUse`. Where plain stdout counts as context
/// (`UserPromptSubmit`, `SessionStart`, as in Claude Code) and what a block means is the
/// caller's: a block at `PostToolUse*` is only more context, the tool has run.
pub(crate) fn at_point(event: HookEvent, results: &[HookResult]) -> PointVerdict {
    let plain_is_context = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart);
    let mut blocks = Vec::new();
    let mut context = Vec::new();
    let mut failed = 0;
    for r in results {
        match r {
            HookResult::Replied(r) => {
                if r.decision == Some(HookDecision::Block) {
                    blocks.push(
                        r.reason
                            .clone()
                            .unwrap_or_else(|| "Blocked by a hook.".into()),
                    );
                }
                if let Some(c) = &r.additional_context {
                    context.push(c.clone());
                }
                if let (true, Some(p)) = (plain_is_context, &r.plain_output) {
                    context.push(p.clone());
                }
            }
            HookResult::Blocked(why) => blocks.push(why.clone()),
            HookResult::Failed(_) => failed += 1,
        }
    }
    PointVerdict {
        block: joined(blocks, "\n"),
        context: joined(context, "\n\n"),
        halt: halt_of(results),
        failed,
    }
}

#[cfg(test)]
mod tests {
    use super::super::protocol::HookReply;
    use super::*;

    fn decided(d: HookDecision, why: &str) -> HookResult {
        HookResult::Replied(HookReply {
            decision: Some(d),
            reason: Some(why.into()),
            ..HookReply::default()
        })
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        use HookDecision::*;
        let v = pre_tool(&[decided(Allow, "a"), decided(Ask, "b"), decided(Block, "c")]);
        assert_eq!((v.decision, v.reason.as_deref()), (Some(Block), Some("c")));
        let v = pre_tool(&[decided(Allow, "a"), decided(Ask, "b")]);
        assert_eq!((v.decision, v.reason.as_deref()), (Some(Ask), Some("b")));
        let v = pre_tool(&[decided(Allow, "a"), decided(Allow, "b")]);
        assert_eq!(
            (v.decision, v.reason.as_deref()),
            (Some(Allow), Some("a\nb"))
        );
    }

    #[test]
    fn a_failed_pre_tool_hook_denies() {
        let v = pre_tool(&[
            decided(HookDecision::Allow, "fine"),
            HookResult::Failed("hook timed out after 1 s".into()),
        ]);
        assert_eq!(v.decision, Some(HookDecision::Block));
        assert_eq!(v.failed, 1);
    }

    #[test]
    fn the_first_rewrite_in_config_order_wins_as_in_the_reference() {
        let rewrite = |command: &str| {
            let mut input = Map::new();
            input.insert("command".into(), command.into());
            HookResult::Replied(HookReply {
                updated_input: Some(input),
                ..HookReply::default()
            })
        };
        let v = pre_tool(&[rewrite("first"), rewrite("second")]);
        assert_eq!(v.updated_input.unwrap()["command"], "first");
    }

    #[test]
    fn a_denied_call_keeps_its_input() {
        let rewrite = HookResult::Replied(HookReply {
            updated_input: Some(Map::new()),
            ..HookReply::default()
        });
        assert!(pre_tool(std::slice::from_ref(&rewrite))
            .updated_input
            .is_some());
        assert!(pre_tool(&[rewrite, HookResult::Blocked("no".into())])
            .updated_input
            .is_none());
    }

    #[test]
    fn a_failure_elsewhere_is_ignored() {
        let v = at_point(HookEvent::Stop, &[HookResult::Failed("x".into())]);
        assert_eq!((v.block, v.failed), (None, 1));
        let v = at_point(HookEvent::Stop, &[HookResult::Blocked("go on".into())]);
        assert_eq!(v.block.as_deref(), Some("go on"));
    }
}
