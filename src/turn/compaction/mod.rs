//! Context compaction (spec §5.10): the token estimate and window, microcompaction, full
//! compaction by an LLM summary, their events, and (in `in_turn.rs`) where the turn loop
//! enters them: before each LLM call, and on the overflow recovery ladder (spec §5.4).
//!
//! | concept | file |
//! |---|---|
//! | the local token estimate | `estimate.rs` |
//! | microcompaction (clipping old tool results) | `clip.rs` |
//! | where a full compaction cuts the history | `split.rs` |
//! | the summarizer's prompt, input and call | `summary.rs` |
//! | the session's window, anchor and breaker | `state.rs` |
//! | the host's say before a full compaction | `controller.rs` |
//! | the turn's use of all of it, and the recovery ladder | `in_turn.rs` |

pub(crate) mod clip;
pub mod controller;
pub(crate) mod estimate;
mod in_turn;
pub(crate) mod split;
mod state;
pub(crate) mod summary;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

pub(crate) use state::{ContextState, ContextUsage};

use crate::cancel::CancelToken;
use crate::events::turn_event::{
    CompactionSettled, CompactionStarted, ContextCompressed, PluginHookFired, SessionSummaryWritten,
};
use crate::events::{Emitter, EventWriter, TurnEvent};
use crate::hooks::dispatch::{self, HookScope};
use crate::hooks::{HookEvent, Hooks};
use crate::llm::{LlmClient, Message};
use crate::tools::memory::{MemoryRecord, MemoryScope, MemoryStore, SESSION_SUMMARY_KIND};
use controller::{CompactionController, CompactionFacts, Verdict};
use estimate::messages_tokens;
use split::Keep;

/// Microcompaction starts above this share of the window, in percent.
pub(crate) const MICRO_PERCENT: u64 = 55;
/// Full compaction starts above this share of the window, in percent.
pub(crate) const FULL_PERCENT: u64 = 80;
/// The most a kept tail may take of the window, in percent: a tail near the threshold would
/// be compacted again at once.
const TAIL_PERCENT: u64 = 40;
/// The most the summarizer's input may take of the window, in percent.
const SUMMARIZER_INPUT_PERCENT: u64 = 50;

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The estimate passed a threshold before an LLM call.
    Auto,
    /// The provider refused the request (the recovery ladder).
    Overflow,
    /// The host asked (`agentao_agent_compact`).
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Auto => "auto",
            Trigger::Overflow => "overflow",
            Trigger::Manual => "manual",
        }
    }
}

/// What a compaction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Old tool results clipped; no LLM.
    Micro,
    /// An LLM summary replaces the older history; the recent messages are kept.
    Full,
    /// An LLM summary replaces all but the last exchange.
    Minimal,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Micro => "microcompact",
            Kind::Full => "full",
            Kind::Minimal => "minimal",
        }
    }
}

/// One compaction asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'r> {
    pub(crate) trigger: Trigger,
    pub(crate) kind: Kind,
    pub(crate) reason: &'r str,
}

/// How a compaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionStatus {
    Success,
    Cancelled,
    Failed,
    /// Nothing to do: too short a history, or nothing to clip. No event.
    Skipped,
}

impl CompactionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStatus::Success => "success",
            CompactionStatus::Cancelled => "cancelled",
            CompactionStatus::Failed => "failed",
            CompactionStatus::Skipped => "skipped",
        }
    }
}

/// A compaction's figures, as `compaction_settled` reports them.
#[derive(Debug, Clone)]
pub struct CompactionReport {
    pub status: CompactionStatus,
    pub pre_msgs: usize,
    pub post_msgs: usize,
    /// History only (the system prompt excluded).
    pub pre_tokens: u64,
    pub post_tokens: u64,
    pub duration_ms: u64,
    pub detail: Option<String>,
}

impl CompactionReport {
    fn skipped(pre_msgs: usize, pre_tokens: u64, detail: &str) -> Self {
        CompactionReport {
            status: CompactionStatus::Skipped,
            pre_msgs,
            post_msgs: pre_msgs,
            pre_tokens,
            post_tokens: pre_tokens,
            duration_ms: 0,
            detail: Some(detail.to_owned()),
        }
    }

    /// The host's view (`agentao_agent_compact`).
    pub fn to_json(&self) -> String {
        json!({
            "status": self.status.as_str(),
            "pre_msgs": self.pre_msgs,
            "post_msgs": self.post_msgs,
            "pre_tokens_history": self.pre_tokens,
            "post_tokens_history": self.post_tokens,
            "duration_ms": self.duration_ms,
            "detail": self.detail,
        })
        .to_string()
    }
}

/// What a compaction works with; the same for a turn's and for the host's.
pub(crate) struct Compactor<'a> {
    pub(crate) llm: &'a LlmClient,
    pub(crate) emitter: &'a Emitter,
    pub(crate) state: &'a ContextState,
    pub(crate) memory: Arc<dyn MemoryStore>,
    pub(crate) session_id: &'a str,
    pub(crate) cancel: CancelToken,
    /// The system prompt's (and tools') tokens, for the system-inclusive figures.
    pub(crate) fixed_tokens: u64,
    /// The host's say before a full compaction, if it has one.
    pub(crate) controller: Option<Arc<dyn CompactionController>>,
    /// How long the controller may take to answer (the config's `reply_timeout_ms`).
    pub(crate) reply_timeout: Option<Duration>,
    /// The user's hooks, for `PreCompact` (`None` in a sub-agent: its hooks are the parent's
    /// tool hooks only).
    pub(crate) hooks: Option<&'a Hooks>,
    /// The permission mode a hook's input names.
    pub(crate) permission_mode: &'static str,
}

impl Compactor<'_> {
    /// A compaction's events have no host event.
    fn emit(&self, writer: &mut EventWriter, event: &TurnEvent<'_>) {
        debug_assert!(!crate::events::host_projection::has_host_event(event));
        if self.emitter.listens() {
            self.emitter.send(writer, event);
        }
    }

    /// A full (or minimal) compaction of `messages`: the new history on success. Emits
    /// `compaction_started`, `compaction_settled`, then on success `context_compressed` and,
    /// when the store took the summary, `session_summary_written`.
    pub(crate) async fn full(
        &self,
        writer: &mut EventWriter,
        messages: &[Message],
        req: Request<'_>,
    ) -> (CompactionReport, Option<Vec<Message>>) {
        let started = Instant::now();
        let pre_msgs = messages.len();
        let pre_tokens = messages_tokens(messages);
        let window = self.state.window();
        let keep = match req.kind {
            Kind::Minimal => Keep::Minimal,
            _ => Keep::Recent {
                max_tokens: window * TAIL_PERCENT / 100,
            },
        };
        let Some(cut) = split::cut(messages, keep) else {
            return (
                CompactionReport::skipped(pre_msgs, pre_tokens, "too few messages to compact"),
                None,
            );
        };
        self.pre_compact_hooks(writer, req).await;
        self.emit(
            writer,
            &TurnEvent::CompactionStarted(CompactionStarted {
                trigger: req.trigger.as_str(),
                kind: req.kind.as_str(),
                reason: req.reason,
                child_task_id: None,
            }),
        );
        let verdict = match &self.controller {
            Some(c) => {
                let facts = CompactionFacts {
                    trigger: req.trigger,
                    kind: req.kind,
                    reason: req.reason.to_owned(),
                    estimated_tokens: pre_tokens + self.fixed_tokens,
                    window,
                    messages_json: serde_json::to_string(&messages[..cut])
                        .unwrap_or_else(|_| "[]".into()),
                    to_summarize: cut,
                    kept: pre_msgs - cut,
                    child_task_id: None,
                };
                controller::ask(c, facts, &self.cancel, self.reply_timeout).await
            }
            None => Verdict::Allow,
        };
        let outcome = match verdict {
            Verdict::Allow => {
                let input_chars = (window * SUMMARIZER_INPUT_PERCENT / 100 * 4) as usize;
                let rendered = summary::render(&messages[..cut], input_chars);
                summary::summarize(self.llm, rendered, &self.cancel).await
            }
            Verdict::Summary(text) => Ok(text),
            Verdict::Cancel(why) => Err(summary::SummaryError::Cancelled(why)),
        };
        let (status, detail, new) = match outcome {
            Err(summary::SummaryError::Cancelled(why)) => {
                (CompactionStatus::Cancelled, Some(why), None)
            }
            Err(summary::SummaryError::Failed(d)) => (CompactionStatus::Failed, Some(d), None),
            Ok(text) => {
                let mut new = Vec::with_capacity(1 + pre_msgs - cut);
                new.push(summary::summary_message(&text));
                new.extend_from_slice(&messages[cut..]);
                if messages_tokens(&new) >= pre_tokens {
                    (
                        CompactionStatus::Failed,
                        Some("the summary did not shrink the history".to_owned()),
                        None,
                    )
                } else {
                    (CompactionStatus::Success, None, Some((new, text)))
                }
            }
        };
        self.state.record(status);
        let (post_msgs, post_tokens) = match &new {
            Some((n, _)) => (n.len(), messages_tokens(n)),
            None => (pre_msgs, pre_tokens),
        };
        let report = CompactionReport {
            status,
            pre_msgs,
            post_msgs,
            pre_tokens,
            post_tokens,
            duration_ms: started.elapsed().as_millis() as u64,
            detail,
        };
        self.settled(writer, req, &report);
        let Some((new, text)) = new else {
            return (report, None);
        };
        self.compressed(writer, req, &report);
        if let Some(id) = self.store_summary(&text).await {
            self.emit(
                writer,
                &TurnEvent::SessionSummaryWritten(SessionSummaryWritten {
                    summary_id: &id,
                    session_id: self.session_id,
                    tokens_before: pre_tokens,
                    messages_summarized: cut,
                    summary_size: text.len(),
                    child_task_id: None,
                }),
            );
        }
        (report, Some(new))
    }

    /// Claude Code's `PreCompact` before a full compaction: matched by its trigger (`manual`,
    /// or `auto` for the estimate's and the overflow ladder's), with the host's reason as the
    /// custom instructions of a manual one. It observes: as in Claude Code, nothing it says
    /// stops the compaction, and a failure is only reported.
    async fn pre_compact_hooks(&self, writer: &mut EventWriter, req: Request<'_>) {
        let trigger = match req.trigger {
            Trigger::Manual => "manual",
            Trigger::Auto | Trigger::Overflow => "auto",
        };
        let Some(hooks) = self
            .hooks
            .filter(|h| h.wants(HookEvent::PreCompact, Some(trigger)))
        else {
            return;
        };
        let mut fields = serde_json::Map::new();
        fields.insert("trigger".into(), trigger.into());
        let instructions = if req.trigger == Trigger::Manual {
            req.reason
        } else {
            ""
        };
        fields.insert("custom_instructions".into(), instructions.into());
        let scope = HookScope {
            session_id: self.session_id,
            permission_mode: self.permission_mode,
        };
        let results = hooks
            .fire(
                HookEvent::PreCompact,
                Some(trigger),
                &scope,
                fields,
                &self.cancel,
            )
            .await;
        let v = dispatch::at_point(HookEvent::PreCompact, &results);
        self.emit(
            writer,
            &TurnEvent::PluginHookFired(PluginHookFired {
                hook_name: HookEvent::PreCompact.as_str(),
                tool_name: None,
                call_id: None,
                hooks: results.len(),
                failed: v.failed,
                outcome: if v.context.is_some() {
                    "context"
                } else {
                    "none"
                },
                reason: v.halt.as_deref().or(v.block.as_deref()),
            }),
        );
    }

    /// The events of a microcompaction that clipped something.
    pub(crate) fn micro_done(
        &self,
        writer: &mut EventWriter,
        req: Request<'_>,
        report: &CompactionReport,
    ) {
        self.state.record(report.status);
        self.settled(writer, req, report);
        self.compressed(writer, req, report);
    }

    fn settled(&self, writer: &mut EventWriter, req: Request<'_>, r: &CompactionReport) {
        self.emit(
            writer,
            &TurnEvent::CompactionSettled(CompactionSettled {
                trigger: req.trigger.as_str(),
                kind: req.kind.as_str(),
                reason: req.reason,
                status: r.status.as_str(),
                pre_msgs: r.pre_msgs,
                post_msgs: r.post_msgs,
                pre_tokens_history: r.pre_tokens,
                post_tokens_history: r.post_tokens,
                duration_ms: r.duration_ms,
                detail: r.detail.as_deref(),
                child_task_id: None,
            }),
        );
    }

    fn compressed(&self, writer: &mut EventWriter, req: Request<'_>, r: &CompactionReport) {
        self.emit(
            writer,
            &TurnEvent::ContextCompressed(ContextCompressed {
                kind: req.kind.as_str(),
                reason: req.reason,
                pre_msgs: r.pre_msgs,
                post_msgs: r.post_msgs,
                pre_est_tokens: r.pre_tokens + self.fixed_tokens,
                post_est_tokens: r.post_tokens + self.fixed_tokens,
                duration_ms: r.duration_ms,
                child_task_id: None,
            }),
        );
    }

    /// Writes the summary to the memory store as the session's latest summary (one record per
    /// session, replaced by each compaction); its id, or `None` when the store refused it.
    async fn store_summary(&self, text: &str) -> Option<String> {
        let now = crate::events::host::now_rfc3339();
        let id = format!("{:08x}", fastrand::u32(..));
        let record = MemoryRecord {
            id: id.clone(),
            scope: MemoryScope::Project,
            kind: SESSION_SUMMARY_KIND.to_owned(),
            key_normalized: format!("session_summary_{}", self.session_id),
            title: "Session summary".to_owned(),
            content: text.to_owned(),
            tags: vec![SESSION_SUMMARY_KIND.to_owned()],
            keywords: Vec::new(),
            source: "auto".to_owned(),
            confidence: 1.0,
            sensitivity: "normal".to_owned(),
            created_at: now.clone(),
            updated_at: now,
            deleted_at: None,
        };
        let store = self.memory.clone();
        let written = if store.may_block() {
            tokio::task::spawn_blocking(move || store.upsert(&record).is_ok())
                .await
                .unwrap_or(false)
        } else {
            store.upsert(&record).is_ok()
        };
        written.then_some(id)
    }
}
