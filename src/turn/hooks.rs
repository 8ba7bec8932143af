//! Where the user's lifecycle hooks (`crate::hooks`, docs/hooks.md) run in a turn, and what the
//! loop does with their verdicts:
//!
//! | point | when | what a verdict does |
//! |---|---|---|
//! | `SessionStart` | before the agent's first turn | context appended to the user's message |
//! | `UserPromptSubmit` | before the user's message is recorded | context appended to it; a block ends the turn (`hook_stop`), the message unrecorded |
//! | `PreToolUse` | after planning, before permission events and confirmations | deny / ask / allow / a new input, combined with the permission decision (below) |
//! | `PostToolUse`, `PostToolUseFailure` | after a batch ran, before its results are recorded | context appended to the call's result |
//! | `Stop` | on the final answer | a block re-enters the loop with the reason as the next user message |
//!
//! A `PreToolUse` verdict and the permission decision combine in one order: the hardline floor
//! and a deny of the engine or the read-only mode come first and are final (hooks do not even
//! run for such a call); then the hooks; a rewritten input is decided again from the start (so
//! a rewrite into a hardline command is refused); a hook's `ask` turns an allow into a
//! confirmation; a hook's `allow` skips only the confirmation a tool asks for by default, never
//! one a permission rule asks for; then the host confirms what still asks.
//!
//! With no hooks configured (`TurnEnv::hooks` is `None`) none of this runs.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::plan::{facts, Batch, Plan};
use super::tool_outcome::{Refusal, ToolOutcome};
use super::{LoopEnd, LoopError, Turn};
use crate::events::turn_event::PluginHookFired;
use crate::events::TurnEvent;
use crate::hooks::dispatch::{self, HookScope, PointVerdict, PreToolVerdict};
use crate::hooks::event::stdin_tool_name;
use crate::hooks::{HookDecision, HookEvent};
use crate::permissions::{self, Decision, DenyKind, Verdict};

/// How many times `Stop` hooks may send the agent back to work in one turn (the reference's
/// limit under its Claude Code hook contract).
pub(crate) const MAX_STOP_REENTRIES: u32 = 8;

/// The reason of a permission decision made by a hook (the reference's vocabulary).
fn hook_reason(reason: Option<&str>) -> String {
    match reason {
        Some(r) if !r.is_empty() => format!("pre-tool-hook: {r}"),
        _ => "pre-tool-hook".to_owned(),
    }
}

/// A hook's context as the model reads it (spec: appended as `<system-reminder>` blocks).
pub(crate) fn reminder(context: &str) -> String {
    format!("\n\n<system-reminder>\n{context}\n</system-reminder>")
}

fn outcome_word(decision: Option<HookDecision>, halt: bool, context: bool) -> &'static str {
    match decision {
        _ if halt => "halt",
        Some(HookDecision::Block) => "deny",
        Some(HookDecision::Ask) => "ask",
        Some(HookDecision::Allow) => "allow",
        None if context => "context",
        None => "none",
    }
}

fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The permission mode a hook's input names (`permission_mode`).
pub(crate) fn permission_mode(
    engine: &std::sync::RwLock<Option<permissions::PermissionEngine>>,
) -> &'static str {
    engine
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or("workspace-write", |e| e.mode().as_str())
}

impl Turn<'_, '_> {
    pub(in crate::turn) fn permission_mode(&self) -> &'static str {
        permission_mode(self.env.engine)
    }

    fn hooks_want(&self, event: HookEvent, name: Option<&str>) -> bool {
        self.env
            .hooks
            .as_ref()
            .is_some_and(|h| h.wants(event, name))
    }

    async fn fire(
        &self,
        event: HookEvent,
        name: Option<&str>,
        fields: Map<String, Value>,
    ) -> Vec<crate::hooks::protocol::HookResult> {
        let Some(hooks) = self.env.hooks.as_ref() else {
            return Vec::new();
        };
        let scope = HookScope {
            session_id: self.env.session_id,
            permission_mode: self.permission_mode(),
        };
        hooks.fire(event, name, &scope, fields, &self.cancel).await
    }

    fn report_fired(
        &mut self,
        event: HookEvent,
        call: Option<(&str, &str)>,
        ran: usize,
        failed: usize,
        outcome: &'static str,
        reason: Option<&str>,
    ) {
        self.emit_event(&TurnEvent::PluginHookFired(PluginHookFired {
            hook_name: event.as_str(),
            tool_name: call.map(|c| c.0),
            call_id: call.map(|c| c.1),
            hooks: ran,
            failed,
            outcome,
            reason,
        }));
    }

    async fn fire_point(
        &mut self,
        event: HookEvent,
        name: Option<&str>,
        call: Option<(&str, &str)>,
        fields: Map<String, Value>,
    ) -> PointVerdict {
        let results = self.fire(event, name, fields).await;
        let v = dispatch::at_point(event, &results);
        let outcome = if v.halt.is_some() {
            "halt"
        } else if v.block.is_some() {
            "block"
        } else if v.context.is_some() {
            "context"
        } else {
            "none"
        };
        let reason = v.halt.clone().or_else(|| v.block.clone());
        self.report_fired(
            event,
            call,
            results.len(),
            v.failed,
            outcome,
            reason.as_deref(),
        );
        v
    }

    /// `SessionStart` (the agent's first turn) and `UserPromptSubmit`: the context to append to
    /// the user's message, or the end of a turn whose prompt a hook blocked.
    pub(super) async fn prompt_hooks(&mut self, user_message: &str) -> Result<String, LoopEnd> {
        let mut context = String::new();
        if self.env.session_start && self.hooks_want(HookEvent::SessionStart, Some("startup")) {
            let v = self
                .fire_point(
                    HookEvent::SessionStart,
                    Some("startup"),
                    None,
                    // The model's name too, as Claude Code sends it (the reference has the key
                    // in its payload but its entry point passes none).
                    fields([
                        ("source", "startup".into()),
                        ("model", self.env.llm.model().into()),
                    ]),
                )
                .await;
            if let Some(c) = v.context {
                context.push_str(&reminder(&c));
            }
        }
        if self.hooks_want(HookEvent::UserPromptSubmit, None) {
            let v = self
                .fire_point(
                    HookEvent::UserPromptSubmit,
                    None,
                    None,
                    fields([("prompt", user_message.into())]),
                )
                .await;
            if let Some(why) = v.halt.or(v.block) {
                return Err(LoopEnd {
                    text: format!("Prompt blocked by a UserPromptSubmit hook: {why}"),
                    reason: Some(super::IncompleteReason::HookStop),
                });
            }
            if let Some(c) = v.context {
                context.push_str(&reminder(&c));
            }
        }
        Ok(context)
    }

    /// `PreToolUse` for every planned call the permission decision has not refused.
    pub(super) async fn pre_tool_hooks(&mut self, batch: &mut Batch) -> Result<(), LoopError> {
        for i in 0..batch.plans.len() {
            let p = &batch.plans[i];
            if p.refusal.is_some() || !self.hooks_want(HookEvent::PreToolUse, Some(&p.name)) {
                continue;
            }
            let (name, call_id) = (p.name.clone(), p.call_id.clone());
            let input = fields([
                ("tool_name", stdin_tool_name(&name).into()),
                ("tool_input", Value::Object((*p.args).clone())),
                ("tool_use_id", (*call_id).into()),
            ]);
            let results = self.fire(HookEvent::PreToolUse, Some(&name), input).await;
            if self.cancel.is_cancelled() {
                return Err(LoopError::Cancelled);
            }
            let v = dispatch::pre_tool(&results);
            self.report_fired(
                HookEvent::PreToolUse,
                Some((&name, &call_id)),
                results.len(),
                v.failed,
                outcome_word(v.decision, v.halt.is_some(), v.context.is_some()),
                v.reason.as_deref(),
            );
            if let Some(why) = &v.halt {
                self.hook_halt.get_or_insert_with(|| why.clone());
            }
            self.apply_pre_tool(&mut batch.plans[i], v).await?;
        }
        Ok(())
    }

    async fn apply_pre_tool(&mut self, p: &mut Plan, v: PreToolVerdict) -> Result<(), LoopError> {
        if let Some(c) = &v.context {
            p.hook_context.push_str(&reminder(c));
        }
        if v.decision == Some(HookDecision::Block) || v.halt.is_some() {
            let reason = v.reason.or(v.halt).unwrap_or_default();
            p.decision = Decision {
                verdict: Verdict::Deny,
                deny_kind: None,
                matched_rule: None,
                reason: hook_reason(Some(&reason)),
            };
            p.refusal = Some(Refusal::Hook(Arc::from(reason.as_str())));
            return Ok(());
        }
        if let Some(input) = v.updated_input {
            let args = Arc::new(input);
            let decision = self.decide_again(p, args.clone()).await?;
            p.args = args;
            if decision.verdict == Verdict::Deny {
                p.refusal = Some(Refusal::denied(
                    decision.deny_kind.unwrap_or(DenyKind::Rules),
                ));
                p.decision = decision;
                return Ok(());
            }
            p.decision = decision;
        }
        match (v.decision, p.decision.verdict) {
            (Some(HookDecision::Ask), Verdict::Allow) => {
                p.decision = Decision {
                    verdict: Verdict::Ask,
                    deny_kind: None,
                    matched_rule: None,
                    reason: hook_reason(v.reason.as_deref()),
                };
            }
            // Only the confirmation the tool asks for by default: a rule that asks still asks.
            (Some(HookDecision::Allow), Verdict::Ask) if p.decision.matched_rule.is_none() => {
                p.decision = Decision {
                    verdict: Verdict::Allow,
                    deny_kind: None,
                    matched_rule: None,
                    reason: hook_reason(v.reason.as_deref()),
                };
            }
            _ => {}
        }
        Ok(())
    }

    /// The permission decision of a call whose input a hook rewrote: made from the start, with
    /// the floor checked on the new command even when no engine is configured.
    async fn decide_again(
        &self,
        p: &Plan,
        args: Arc<Map<String, Value>>,
    ) -> Result<Decision, LoopError> {
        if p.tool.name() == "run_shell_command" {
            if let Some(why) = args
                .get("command")
                .and_then(Value::as_str)
                .and_then(permissions::hardline_verdict)
            {
                return Ok(Decision {
                    verdict: Verdict::Deny,
                    deny_kind: Some(DenyKind::Rules),
                    matched_rule: None,
                    reason: format!("hardline:{why}"),
                });
            }
        }
        let engine = self.engine_copy();
        let read_only = self
            .env
            .read_only
            .load(std::sync::atomic::Ordering::Acquire);
        let services = self.env.tool_services.clone();
        let tool = p.tool.clone();
        self.off_workers(move || {
            permissions::decide_probing(engine.as_ref(), read_only, facts(&*tool), &args, |q| {
                services.answer_probe(q)
            })
        })
        .await
    }

    /// `PostToolUse` / `PostToolUseFailure` for every call that ran; their context goes to the
    /// call's result.
    pub(super) async fn post_tool_hooks(&mut self, plans: &mut [Plan], results: &[ToolOutcome]) {
        for (p, outcome) in plans.iter_mut().zip(results) {
            let (event, key, text, duration_ms) = match outcome {
                ToolOutcome::Success { text, duration_ms } => {
                    (HookEvent::PostToolUse, "tool_response", text, duration_ms)
                }
                ToolOutcome::Failed {
                    text, duration_ms, ..
                } => (HookEvent::PostToolUseFailure, "error", text, duration_ms),
                ToolOutcome::Refused(_) | ToolOutcome::Cancelled { .. } => continue,
            };
            if self.cancel.is_cancelled() || !self.hooks_want(event, Some(&p.name)) {
                continue;
            }
            let input = fields([
                ("tool_name", stdin_tool_name(&p.name).into()),
                ("tool_input", Value::Object((*p.args).clone())),
                (key, text.as_str().into()),
                ("tool_use_id", (*p.call_id).into()),
                // Whole milliseconds, as the reference sends them (a timing hook's input).
                ("duration_ms", (duration_ms.max(0.0).round() as u64).into()),
            ]);
            let (name, call_id) = (p.name.clone(), p.call_id.clone());
            let v = self
                .fire_point(event, Some(&name), Some((&name, &call_id)), input)
                .await;
            // The tool has run: a block is only more for the model to read.
            for c in [v.block, v.context].into_iter().flatten() {
                p.hook_context.push_str(&reminder(&c));
            }
            if let Some(why) = v.halt {
                self.hook_halt.get_or_insert(why);
            }
        }
    }

    /// `Stop` on the final answer: `Some(reason)` sends the agent back to work with it.
    pub(super) async fn stop_hooks(&mut self, end: &LoopEnd) -> Option<String> {
        if !self.hooks_want(HookEvent::Stop, None) || self.cancel.is_cancelled() {
            return None;
        }
        let input = fields([
            ("stop_hook_active", (self.stop_reentries > 0).into()),
            ("last_assistant_message", end.text.as_str().into()),
        ]);
        let v = self.fire_point(HookEvent::Stop, None, None, input).await;
        if v.halt.is_some() || self.stop_reentries >= MAX_STOP_REENTRIES {
            return None;
        }
        let why = v.block?;
        self.stop_reentries += 1;
        Some(why)
    }
}
