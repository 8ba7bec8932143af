//! One turn (spec §5), as stages strung together by the loop below:
//!
//! | stage | file |
//! |---|---|
//! | the LLM call: request, events, streamed pieces | `llm_call.rs` |
//! | planning: normalisation, repair, guards, lookup, permission decision | `plan.rs` |
//! | permission events and host confirmations | `confirm.rs` |
//! | execution: serial and parallel batches, tool events, the host bridge | `execute.rs` |
//! | history: what the turn appends, orphan backfill | `history.rs` |
//! | the request text the turn adds (system prompt, date/time reminder, volatile tail) | `prompt.rs`, the local clock `local_clock.rs` |
//! | background agents' notices, injected before an LLM call | `notices.rs` |
//! | how the turn ended | `outcome.rs`, and per call `tool_outcome.rs` |
//! | the user's lifecycle hooks at their points | `hooks.rs` |
//! | context compaction and the overflow recovery ladder | `compaction/` |
//!
//! Every internal event and host event of a turn is emitted from the turn's own task, so they
//! are in canonical order by construction. Tools run on blocking threads and report back
//! through a channel; host requests run on blocking threads and answer through replies.

pub mod compaction;
mod confirm;
pub(crate) mod events;
mod execute;
pub(crate) mod history;
mod hooks;
pub(crate) use hooks::permission_mode as hook_permission_mode;
mod llm_call;
mod local_clock;
mod notices;
pub mod outcome;
pub mod plan;
pub(crate) mod prompt;
pub(crate) mod tool_outcome;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::cancel::CancelToken;
use crate::config::ToolsConfig;
use crate::events::host::HostEventHub;
use crate::events::host_projection::has_host_event;
use crate::events::transport::Transport;
use crate::events::{Emitter, EventWriter, JsonText, TurnEvent};
use crate::llm::message::RunningCounts;
use crate::llm::{LlmClient, LlmResponse, Message, MessagesVersion, MessagesVersionCell};
use crate::permissions::PermissionEngine;
use crate::tools::{ToolRegistry, ToolServices};
pub(crate) use notices::BackgroundNotices;
pub use outcome::{IncompleteReason, TurnOutcome, TurnStatus};
use plan::Guards;

/// Where the streaming entry point wants text deltas.
#[derive(Clone, Default)]
pub enum DeltaSink {
    #[default]
    None,
    /// Called inline with `{"type":"text_delta","text":…}` (NUL-terminated, see [`JsonText`]).
    Callback(Arc<dyn Fn(JsonText<'_>) + Send + Sync>),
    /// A bounded queue; the turn waits for room (never drops) unless it is cancelled.
    Queue(mpsc::Sender<String>),
}

/// Everything a turn borrows from its agent.
pub(crate) struct TurnEnv<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) llm: &'a LlmClient,
    pub(crate) tools: &'a ToolRegistry,
    pub(crate) tool_services: &'a Arc<ToolServices>,
    pub(crate) tools_config: &'a ToolsConfig,
    pub(crate) workspace: &'a Path,
    pub(crate) system_prompt: &'a prompt::SystemPrompt,
    /// The memories recalled for this turn's message, if any: with the task list, the
    /// request-only volatile tail after the history ([`prompt::volatile_tail`]).
    pub(crate) recall: Option<&'a str>,
    pub(crate) emitter: &'a Emitter,
    pub(crate) hub: &'a HostEventHub,
    pub(crate) engine: &'a RwLock<Option<PermissionEngine>>,
    pub(crate) read_only: &'a AtomicBool,
    /// Read only: the turn's messages are its transcript, which the agent commits.
    pub(crate) history: &'a RwLock<Vec<Message>>,
    /// The history's version, read with it (under its read lock).
    pub(crate) history_version: &'a MessagesVersionCell,
    pub(crate) reply_timeout: Option<Duration>,
    /// The agent's background-agent notices; `None` for a turn that must not drain them.
    pub(crate) background: Option<&'a dyn BackgroundNotices>,
    /// The session's window, estimate anchor and compaction breaker.
    pub(crate) context: &'a compaction::ContextState,
    /// The host's compaction controller, asked before each full compaction.
    pub(crate) compaction_controller: Option<Arc<dyn compaction::controller::CompactionController>>,
    /// The images sent with the turn's message (validated).
    pub(crate) images: &'a [crate::llm::image::ImageInput],
    /// The user's lifecycle hooks; `None` (no hooks configured) costs the turn nothing.
    pub(crate) hooks: Option<Arc<crate::hooks::Hooks>>,
    /// The agent's first turn: `SessionStart` hooks run before it.
    pub(crate) session_start: bool,
    /// A sub-agent's turn: only the tool hooks run (the prompt and the stop are its parent's).
    pub(crate) tool_hooks_only: bool,
}

/// A turn that ended in error: the host failed a request, or a reply timed out.
#[derive(Debug, Clone)]
pub(crate) enum TurnFailure {
    Host(String),
    Timeout(String),
}

enum LoopError {
    Cancelled,
    Failed(TurnFailure),
}

/// The loop's own end: the final text and why it is not a complete answer, if it is not.
struct LoopEnd {
    text: String,
    reason: Option<IncompleteReason>,
}

fn cancel_reason(cancel: &CancelToken) -> &str {
    match cancel.reason() {
        "" => "cancelled",
        r => r,
    }
}

/// A turn that has run to its end, before its `turn_end` event: the agent commits the
/// transcript and the outcome, then calls [`Ended::finish`].
pub(crate) struct Ended<'e, 'a> {
    turn: Turn<'e, 'a>,
    pub(crate) outcome: TurnOutcome,
    pub(crate) failure: Option<TurnFailure>,
}

impl Ended<'_, '_> {
    /// The messages this turn added, for the agent's history (taken once).
    pub(crate) fn take_transcript(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.turn.transcript)
    }

    /// Emits `turn_end` (after the commit, so a host reading the last turn or the history
    /// from its handler sees this turn).
    pub(crate) fn finish(mut self) -> (TurnOutcome, Option<TurnFailure>) {
        self.turn
            .emit_event(&TurnEvent::TurnEnd(self.outcome.end_event()));
        (self.outcome, self.failure)
    }
}

/// Runs one turn up to its end. Never panics on model or host input. The history before the
/// turn must have every call answered (`history::backfill_orphans`).
pub(crate) async fn run_turn<'e, 'a>(
    env: &'e TurnEnv<'a>,
    user_message: &str,
    max_iterations: u32,
    cancel: &CancelToken,
    deltas: DeltaSink,
) -> Ended<'e, 'a> {
    let mut turn = Turn {
        env,
        cancel: cancel.clone(),
        turn_id: turn_id(),
        // Room for a turn's usual events (`llm_call_completed`, the largest fixed one, is
        // ~450 bytes): the buffer no longer grows several times in every turn.
        writer: EventWriter::with_capacity(1024),
        delta_writer: EventWriter::default(),
        deltas,
        transcript: Vec::new(),
        transcript_version: MessagesVersion::fresh(),
        attempt: 0,
        tool_count: 0,
        finish_reason_missing: false,
        delta_baseline: 0,
        counted: RunningCounts::default(),
        guards: Guards::default(),
        tools_hash: env
            .llm
            .tools_digest(&env.tools.schemas(), env.tools.names()),
        system_prompt_hash: env.system_prompt.digest(env.llm),
        give_up_at: std::sync::OnceLock::new(),
        compaction_latched: false,
        fixed_tokens: None,
        images_removed: false,
        hook_halt: None,
        stop_reentries: 0,
    };
    turn.emit_event(&TurnEvent::TurnBegin { user_message });
    let result = turn.run(user_message, max_iterations).await;
    let (outcome, failure) = turn.settle(result);
    Ended {
        turn,
        outcome,
        failure,
    }
}

/// A turn's id: a version-4 UUID from the thread's fast generator. `Uuid::new_v4` asks the
/// kernel (a `getrandom` system call) for every id; a turn id names events, it guards nothing.
fn turn_id() -> String {
    let id = uuid::Builder::from_random_bytes(fastrand::u128(..).to_le_bytes()).into_uuid();
    // Encoded into a buffer: `to_string` went through the formatting machinery.
    let mut buf = uuid::Uuid::encode_buffer();
    id.hyphenated().encode_lower(&mut buf).to_owned()
}

struct Turn<'e, 'a> {
    env: &'e TurnEnv<'a>,
    cancel: CancelToken,
    turn_id: String,
    writer: EventWriter,
    delta_writer: EventWriter,
    deltas: DeltaSink,
    /// The messages this turn added, in order.
    transcript: Vec<Message>,
    /// Renewed by any change of `transcript` but an append (the request cache trusts what it
    /// checked while it holds).
    transcript_version: MessagesVersion,
    attempt: u32,
    tool_count: u64,
    finish_reason_missing: bool,
    /// How much of the transcript the last `llm_call_delta` reported.
    delta_baseline: usize,
    /// What `llm_call_started` counts, kept as the transcript grows.
    counted: RunningCounts,
    guards: Guards,
    tools_hash: Arc<str>,
    system_prompt_hash: Arc<str>,
    /// Once cancelled: when the turn stops waiting for host code that has not returned (see
    /// `Turn::give_up_at`).
    give_up_at: std::sync::OnceLock<tokio::time::Instant>,
    /// A compaction was cancelled: none other this turn.
    compaction_latched: bool,
    /// The system prompt's and tools' tokens, measured once per turn.
    fixed_tokens: Option<u64>,
    /// The image rung of the recovery ladder was taken.
    images_removed: bool,
    /// A hook answered `continue: false`: the turn ends after the batch, with this text.
    hook_halt: Option<String>,
    /// How many times `Stop` hooks sent the agent back to work this turn.
    stop_reentries: u32,
}

impl Turn<'_, '_> {
    /// Sends an event that has no host event to the transport (typed, JSON or both:
    /// [`Emitter::send`]), unless nobody listens ([`Emitter::listens`]).
    fn emit_event(&mut self, event: &TurnEvent<'_>) {
        debug_assert!(
            !has_host_event(event),
            "{} goes through Turn::report",
            event.kind()
        );
        self.send(event);
    }

    fn send(&mut self, event: &TurnEvent<'_>) {
        if self.env.emitter.listens() {
            self.env.emitter.send(&mut self.writer, event);
        }
    }

    /// Sends an event to the transport as [`Turn::emit_event`] does, then publishes the host
    /// event projected from it, when anyone listens for host events (the projection is not
    /// made otherwise).
    async fn report(&mut self, event: &TurnEvent<'_>) {
        self.send(event);
        // The projection's future (the host event and its publication, ~1.4 KB) is built, and
        // boxed, only when someone listens: in the caller's state it was a 1.4 KB copy for every
        // tool start and end, heard or not.
        if self.env.hub.has_listeners() {
            Box::pin(self.env.hub.project(
                event,
                self.env.session_id,
                Some(&self.turn_id),
                &self.cancel,
            ))
            .await;
        }
    }

    fn transport(&self) -> Arc<dyn Transport> {
        self.env.emitter.transport().clone()
    }

    /// The loop (spec §5.2): call the model; no calls is the answer; calls are planned,
    /// confirmed, executed and answered, and the model is called again.
    async fn run(&mut self, user_message: &str, max_iterations: u32) -> Result<LoopEnd, LoopError> {
        let mut text = prompt::user_message(user_message);
        if self.env.hooks.is_some() && !self.env.tool_hooks_only {
            match self.prompt_hooks(user_message).await {
                Ok(context) => text.push_str(&context),
                Err(blocked) => return Ok(blocked),
            }
        }
        if self.env.images.is_empty() {
            self.record_user(text);
        } else {
            let m = crate::llm::image::user_message_with_images(text, self.env.images);
            self.transcript.push(m);
        }
        let schemas = self.env.tools.schemas();
        let mut iteration = 0u32;
        let (budget_usage, budget_started) =
            (self.env.llm.usage.snapshot(), std::time::Instant::now());
        loop {
            if iteration >= max_iterations {
                match self.max_iterations_reached(max_iterations).await? {
                    Some(end) => return Ok(end),
                    None => {
                        iteration = 0;
                        continue;
                    }
                }
            }
            iteration += 1;
            if self.cancel.is_cancelled() {
                return Err(LoopError::Cancelled);
            }
            // A budget ends the turn as a host's cancel would, its reason naming the budget.
            if let Some(reason) = self.env.llm.budget_exceeded(&budget_usage, budget_started) {
                self.cancel.cancel(&reason);
                return Err(LoopError::Cancelled);
            }
            self.manage_context(&schemas).await;
            self.inject_background_notices();
            self.emit_event(&TurnEvent::TurnStart(events::TurnStart {
                display_reset: false,
                child_task_id: None,
            }));
            let mut response = match self.call_llm_recovering(&schemas).await {
                Ok(r) => r,
                Err(e) => {
                    let text = format!("[LLM API error: {}]", e.reference_text());
                    self.record_text(&text);
                    return Ok(LoopEnd {
                        text,
                        reason: Some(IncompleteReason::LlmError),
                    });
                }
            };
            if response.finish_reason.is_none() {
                self.finish_reason_missing = true;
            }
            let truncated = llm_call::is_truncated(&response);
            if response.tool_calls.is_empty() {
                let end = self.final_response(response, truncated);
                if self.env.hooks.is_some() && !self.env.tool_hooks_only {
                    if let Some(why) = self.stop_hooks(&end).await {
                        // Sent back to work: the budget starts again (spec §5.7).
                        self.record_user(why);
                        iteration = 0;
                        continue;
                    }
                }
                return Ok(end);
            }
            self.tool_count += response.tool_calls.len() as u64;
            if truncated {
                if let Some(end) = self.truncated_tool_calls(response) {
                    return Ok(end);
                }
                continue;
            }
            self.guards.length_truncations = 0;
            if self.cancel.is_cancelled() {
                // Record what the model asked for, answer nothing (backfilled), ask nobody.
                let calls = self.prepass(&mut response);
                self.record_assistant(&response, &calls);
                return Err(LoopError::Cancelled);
            }
            if let Some(end) = self.tool_batch(response).await? {
                return Ok(end);
            }
            if self.cancel.is_cancelled() {
                return Err(LoopError::Cancelled);
            }
        }
    }

    /// One batch of calls through plan, confirm and execute. `Some(end)` ends the turn.
    async fn tool_batch(&mut self, mut r: LlmResponse) -> Result<Option<LoopEnd>, LoopError> {
        let calls = self.prepass(&mut r);
        self.record_assistant(&r, &calls);
        let prepared = self.prepare(&calls).await?;
        let mut batch = self.plan_batch(&calls, prepared);
        if batch.doom {
            self.record_answers(batch.early);
            return Ok(Some(self.doom_end(r.content.trim())));
        }
        if self.env.hooks.is_some() {
            if let Err(e) = self.pre_tool_hooks(&mut batch).await {
                self.record_answers(batch.early);
                return Err(e);
            }
        }
        self.report_decisions(&batch).await;
        if let Err(e) = self.confirm(&mut batch).await {
            self.record_answers(batch.early);
            return Err(e);
        }
        let results = self.execute(&batch.plans).await;
        if self.env.hooks.is_some() {
            self.post_tool_hooks(&mut batch.plans, &results).await;
        }
        let answers = self.report_results(batch.plans, results).await;
        // Early rejections first, then the planned calls, each in call order.
        self.record_answers(batch.early);
        self.record_answers(answers);
        if let Some(text) = self.hook_halt.take() {
            self.record_text(&text);
            return Ok(Some(LoopEnd {
                text,
                reason: Some(IncompleteReason::HookStop),
            }));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn turn_ids_are_distinct_version_4_uuids() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| super::turn_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            let u = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(u.get_version_num(), 4, "{id}");
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{id}");
            assert_eq!(u.to_string(), *id);
        }
    }
}
