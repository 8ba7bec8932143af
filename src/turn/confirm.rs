//! Permission decisions and host confirmations: the decisions' events (the `permission_decision`
//! host events are projected from them), the `confirm_tool` request of every call that asks (in
//! call order, before anything runs), and the other blocking host request of the loop,
//! `on_max_iterations`.

use std::sync::Arc;

use serde_json::Value;

use super::outcome::IncompleteReason;
use super::plan::Batch;
use super::tool_outcome::Refusal;
use super::{events, LoopEnd, LoopError, Turn, TurnFailure};
use crate::events::host::PermissionOutcome;
use crate::events::transport::{
    ask_blocking, Answer, ConfirmRequest, Confirmation, Reply, ReplyKind, Transport, Unanswered,
};
use crate::events::turn_event::PermissionDecision;
use crate::events::TurnEvent;
use crate::permissions::Verdict;

impl Turn<'_, '_> {
    /// `on_max_iterations`: `Some(end)` to stop, `None` to go on with a fresh budget.
    pub(super) async fn max_iterations_reached(
        &mut self,
        max: u32,
    ) -> Result<Option<LoopEnd>, LoopError> {
        let (pending_json, last_text) = self.last_assistant();
        let answer = self
            .request(ReplyKind::MaxIterations, move |t, reply| {
                t.on_max_iterations(max, &pending_json, reply)
            })
            .await?;
        let decision = match answer {
            Answer::Json(j) => serde_json::from_str::<Value>(&j).unwrap_or(Value::Null),
            Answer::Fail(m) => return Err(LoopError::Failed(TurnFailure::Host(m))),
            _ => Value::Null,
        };
        match decision
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("stop")
        {
            "continue" => Ok(None),
            "new_instruction" => {
                if let Some(m) = decision
                    .get("message")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                {
                    self.record_user(m.to_owned());
                }
                Ok(None)
            }
            _ => {
                let text =
                    last_text.unwrap_or_else(|| "Maximum tool call iterations reached.".to_owned());
                self.record_text(&text);
                Ok(Some(LoopEnd {
                    text,
                    reason: Some(IncompleteReason::MaxIterations),
                }))
            }
        }
    }

    /// Runs a blocking host request on a blocking thread and waits for its reply, cancellably.
    pub(super) async fn request(
        &self,
        kind: ReplyKind,
        f: impl FnOnce(Arc<dyn Transport>, Reply) + Send + 'static,
    ) -> Result<Answer, LoopError> {
        let transport = self.transport();
        match ask_blocking(
            kind,
            move |reply| f(transport, reply),
            &self.cancel,
            self.env.reply_timeout,
        )
        .await
        {
            Ok(r) => Ok(r.unwrap_or_else(|_| Answer::Fail("the host dropped the request".into()))),
            Err(Unanswered::Cancelled) => Err(LoopError::Cancelled),
            Err(Unanswered::TimedOut(t)) => Err(LoopError::Failed(TurnFailure::Timeout(format!(
                "the host did not answer within {} ms",
                t.as_millis()
            )))),
        }
    }

    /// One [`PermissionDecision`] per planned call (the `permission_decision` host event),
    /// when anyone listens for host events or observes typed events.
    pub(super) async fn report_decisions(&mut self, batch: &Batch) {
        let Some(snapshot) = &batch.snapshot else {
            return;
        };
        for p in &batch.plans {
            self.report(&TurnEvent::PermissionDecision(PermissionDecision {
                tool: &p.name,
                call_id: &p.call_id,
                decision_id: uuid::Uuid::new_v4(),
                outcome: match p.decision.verdict {
                    Verdict::Allow => PermissionOutcome::Allow,
                    Verdict::Deny => PermissionOutcome::Deny,
                    Verdict::Ask => PermissionOutcome::Prompt,
                },
                mode: &snapshot.mode,
                loaded_sources: &snapshot.loaded_sources,
                matched_rule: p.decision.matched_rule.as_ref(),
                reason: &p.decision.reason,
            }))
            .await;
        }
    }

    /// Asks the host about every call whose verdict is `Ask`; a declined call is refused.
    pub(super) async fn confirm(&mut self, batch: &mut Batch) -> Result<(), LoopError> {
        for p in batch.plans.iter_mut() {
            if p.decision.verdict != Verdict::Ask {
                continue;
            }
            if self.cancel.is_cancelled() {
                // Never prompt for a cancelled turn (the reference does: a deliberate fix).
                return Err(LoopError::Cancelled);
            }
            self.emit_event(&TurnEvent::ToolConfirmation(events::ToolCall {
                tool: &p.name,
                args: &p.args,
                call_id: &p.call_id,
                child_task_id: None,
            }));
            let req = ConfirmRequest {
                tool_name: p.name.to_string(),
                description: p.tool.description().to_owned(),
                args_json: serde_json::to_string(&p.args).unwrap_or_default(),
                call_id: p.call_id.to_string(),
            };
            let answer = self
                .request(ReplyKind::Confirm, move |t, reply| {
                    t.confirm_tool(req, reply)
                })
                .await?;
            match answer {
                Answer::Confirm(Confirmation::Allow) => {}
                Answer::Confirm(c) => {
                    p.refusal = Some(if c == Confirmation::DenyUnavailable {
                        Refusal::ApprovalUnavailable
                    } else {
                        Refusal::NotApproved
                    });
                    self.emit_event(&TurnEvent::TurnStart(events::TurnStart {
                        display_reset: true,
                        child_task_id: None,
                    }));
                }
                Answer::Fail(m) => return Err(LoopError::Failed(TurnFailure::Host(m))),
                _ => {
                    return Err(LoopError::Failed(TurnFailure::Host(
                        "confirm_tool answered with something other than a confirmation".into(),
                    )))
                }
            }
        }
        Ok(())
    }
}
