//! One turn (spec §5): the LLM call, tool-call planning, permission decisions and
//! confirmations, execution, the loop guards, and the outcome.
//!
//! Every internal event and host event of a turn is emitted from the turn's own task, so they
//! are in canonical order by construction. Tools run on blocking threads and report back
//! through a channel; host requests run on blocking threads and answer through replies.

pub mod events;
pub mod outcome;
pub mod planning;
pub mod prompt;
pub mod tool_output;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::cancel::CancelToken;
use crate::config::ToolsConfig;
use crate::events::host::{
    CallIds, HostEvent, HostEventHub, PermissionDecisionEvent, PermissionOutcome,
    ToolLifecycleEvent, ToolOutcome,
};
use crate::events::transport::{Answer, ConfirmRequest, Confirmation, Reply, ReplyKind, Transport};
use crate::events::{Emitter, EventWriter};
use crate::llm::{ChatRequest, LlmClient, LlmError, LlmResponse, Piece};
use crate::permissions::{
    self, ActivePermissions, Decision, DenyKind, PermissionEngine, ToolFacts, Verdict,
};
use crate::tools::result_format::strip_tag_chars;
use crate::tools::{HostRequests, Tool, ToolContext, ToolRegistry, ToolServices};
pub use outcome::{IncompleteReason, TurnOutcome, TurnStatus};
use planning::Guards;
use tool_output::OutputMailbox;

const DNR: &str = "Do not retry this call, rephrase its arguments, or use a different tool to achieve the same outcome.";
const NO_RESPONSE: &str = "[No response]";
const NO_TEXT_RESPONSE: &str = "[No text response]";
const ORPHAN_TEXT: &str = "Tool call interrupted: the turn ended before this tool's result was recorded. The tool may or may not have run — verify the current state before retrying, as re-running may repeat a side effect.";
const LENGTH_REASONS: &[&str] = &["length", "max_tokens", "model_length"];

/// Where the streaming entry point wants text deltas.
#[derive(Clone, Default)]
pub enum DeltaSink {
    #[default]
    None,
    /// Called inline with `{"type":"text_delta","text":…}`.
    Callback(Arc<dyn Fn(&str) + Send + Sync>),
    /// A bounded queue; the turn waits for room (never drops) unless it is cancelled.
    Queue(mpsc::Sender<String>),
}

/// Everything a turn borrows from its agent.
pub struct TurnEnv<'a> {
    pub session_id: &'a str,
    pub llm: &'a LlmClient,
    pub tools: &'a ToolRegistry,
    pub tool_services: &'a Arc<ToolServices>,
    pub tools_config: &'a ToolsConfig,
    pub workspace: &'a Path,
    pub system_prompt: &'a str,
    /// The request-only reminder after the history (memory recall), if any.
    pub volatile_tail: Option<&'a str>,
    pub emitter: &'a Emitter,
    pub hub: &'a HostEventHub,
    pub engine: &'a RwLock<Option<PermissionEngine>>,
    pub read_only: &'a AtomicBool,
    pub history: &'a Mutex<Vec<Value>>,
    pub last_turn: &'a Mutex<Option<TurnOutcome>>,
    pub reply_timeout: Option<Duration>,
}

/// A turn that ended in error: the host failed a request, or a reply timed out.
#[derive(Debug, Clone)]
pub enum TurnFailure {
    Host(String),
    Timeout(String),
}

enum LoopError {
    Cancelled,
    Failed(TurnFailure),
}

struct LoopEnd {
    text: String,
    reason: Option<IncompleteReason>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn hex16(data: &[u8]) -> String {
    Sha256::digest(data)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn cancelled_text(reason: &str) -> String {
    format!("[Cancelled: {reason}]")
}

/// Runs one turn to its end. Never panics on model or host input; the outcome is also stored
/// as the agent's last turn before `turn_end` is emitted.
pub async fn run_turn(
    env: &TurnEnv<'_>,
    user_message: &str,
    max_iterations: u32,
    cancel: &CancelToken,
    deltas: DeltaSink,
) -> (TurnOutcome, Option<TurnFailure>) {
    let mut turn = Turn {
        env,
        cancel: cancel.clone(),
        turn_id: uuid::Uuid::new_v4().to_string(),
        writer: EventWriter::default(),
        delta_writer: EventWriter::default(),
        deltas,
        attempt: 0,
        tool_count: 0,
        finish_reason_missing: false,
        delta_baseline: 0,
        guards: Guards::default(),
        tools_hash: String::new(),
        system_prompt_hash: hex16(env.system_prompt.as_bytes()),
    };
    backfill_orphans(&mut lock(env.history));
    turn.emit("turn_begin", &json!({ "user_message": user_message }));
    let result = turn.run(user_message, max_iterations).await;
    let (mut outcome, failure) = match result {
        Ok(end) => {
            let status = if cancel.is_cancelled() {
                TurnStatus::Cancelled
            } else {
                TurnStatus::Ok
            };
            (
                TurnOutcome {
                    text: end.text,
                    status,
                    incomplete_reason: end.reason,
                    tool_count: turn.tool_count,
                    error: None,
                    finish_reason_missing: turn.finish_reason_missing,
                },
                None,
            )
        }
        Err(LoopError::Cancelled) => {
            let text = cancelled_text(cancel_reason(cancel));
            {
                let mut h = lock(env.history);
                backfill_orphans(&mut h);
                h.push(json!({"role": "assistant", "content": text}));
            }
            (
                TurnOutcome {
                    text,
                    status: TurnStatus::Cancelled,
                    incomplete_reason: None,
                    tool_count: turn.tool_count,
                    error: None,
                    finish_reason_missing: false,
                },
                None,
            )
        }
        Err(LoopError::Failed(f)) => {
            backfill_orphans(&mut lock(env.history));
            let msg = match &f {
                TurnFailure::Host(m) | TurnFailure::Timeout(m) => m.clone(),
            };
            (
                TurnOutcome {
                    text: String::new(),
                    status: TurnStatus::Error,
                    incomplete_reason: None,
                    tool_count: turn.tool_count,
                    error: Some(msg),
                    finish_reason_missing: turn.finish_reason_missing,
                },
                Some(f),
            )
        }
    };
    if outcome.status == TurnStatus::Cancelled {
        outcome.error = Some(cancel_reason(cancel).to_owned());
        outcome.incomplete_reason = None;
        outcome.finish_reason_missing = false;
    }
    *lock(env.last_turn) = Some(outcome.clone());
    turn.emit(
        "turn_end",
        &json!({
            "final_text": outcome.text,
            "status": outcome.status.as_str(),
            "error": outcome.error,
            "tool_count": outcome.tool_count,
            "incomplete_reason": outcome.incomplete_reason.map(IncompleteReason::as_str),
            "finish_reason_missing": outcome.finish_reason_missing,
        }),
    );
    (outcome, failure)
}

fn cancel_reason(cancel: &CancelToken) -> &str {
    match cancel.reason() {
        "" => "cancelled",
        r => r,
    }
}

/// Answers every assistant tool call that has no tool result yet (right after that message's
/// existing results), so the history is always valid for the next request.
pub fn backfill_orphans(history: &mut Vec<Value>) {
    let mut i = 0;
    while i < history.len() {
        let is_assistant = history[i].get("role").and_then(Value::as_str) == Some("assistant");
        let Some(calls) = history[i]
            .get("tool_calls")
            .and_then(Value::as_array)
            .filter(|_| is_assistant)
        else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < history.len() && history[j].get("role").and_then(Value::as_str) == Some("tool") {
            j += 1;
        }
        let answered = |id: &str| {
            history[i + 1..j]
                .iter()
                .any(|m| m.get("tool_call_id").and_then(Value::as_str) == Some(id))
        };
        let missing: Vec<Value> = calls
            .iter()
            .filter_map(|call| {
                let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                (!answered(id)).then(|| {
                    let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or("unknown");
                    json!({"role": "tool", "tool_call_id": id, "name": name, "content": ORPHAN_TEXT})
                })
            })
            .collect();
        let added = missing.len();
        history.splice(j..j, missing);
        i = j + added;
    }
}

struct Turn<'e, 'a> {
    env: &'e TurnEnv<'a>,
    cancel: CancelToken,
    turn_id: String,
    writer: EventWriter,
    delta_writer: EventWriter,
    deltas: DeltaSink,
    attempt: u32,
    tool_count: u64,
    finish_reason_missing: bool,
    delta_baseline: usize,
    guards: Guards,
    tools_hash: String,
    system_prompt_hash: String,
}

/// Arguments up to this size (a whole batch) are prepared on the turn's own worker.
const INLINE_PLANNING_BYTES: usize = 16 * 1024;

/// One call after the argument-size-dependent part of planning.
enum Prepared {
    /// The arguments are not a JSON object (why).
    Unparsed(String),
    /// No tool by that name.
    Unknown,
    /// The tool refused the arguments before anything looked at them (the result text).
    Rejected(String),
    Decided(Arc<dyn Tool>, Map<String, Value>, Decision),
}

fn prepare_call(
    engine: Option<&PermissionEngine>,
    read_only: bool,
    tool: Option<Arc<dyn Tool>>,
    raw: &str,
) -> Prepared {
    let args = match planning::parse_arguments(raw) {
        Ok(a) => a,
        Err(why) => return Prepared::Unparsed(why),
    };
    let Some(tool) = tool else {
        return Prepared::Unknown;
    };
    let args = if args.values().any(Value::is_null) {
        drop_optional_nulls(args, &tool.parameters())
    } else {
        args
    };
    if let Some(text) = tool.reject_early(&args) {
        return Prepared::Rejected(text);
    }
    let decision = permissions::decide(
        engine,
        read_only,
        ToolFacts {
            name: tool.name(),
            is_read_only: tool.is_read_only(),
            requires_confirmation: tool.requires_confirmation(),
        },
        &args,
    );
    Prepared::Decided(tool, args, decision)
}

/// A planned call.
struct Plan {
    call_id: String,
    name: String,
    tool: Arc<dyn Tool>,
    args: Map<String, Value>,
    decision: Decision,
    state: PlanState,
}

#[derive(Clone, Copy, PartialEq)]
enum PlanState {
    Allow,
    Deny(DenyKind),
    Declined,
    DeclinedUnavailable,
}

/// What one executed (or refused) call produced.
struct CallResult {
    raw: String,
    status: &'static str,
    error: Option<String>,
    duration_ms: f64,
}

/// One call handed to a blocking thread: index, tool, arguments, call id.
type Job = (usize, Arc<dyn Tool>, Map<String, Value>, String);

/// A call that finished on its thread: index, result, the error type for the host event.
struct CallDone(usize, CallResult, Option<String>);

impl<'e, 'a> Turn<'e, 'a> {
    fn emit<T: serde::Serialize + ?Sized>(&mut self, ty: &str, data: &T) {
        let ev = self.writer.event(ty, data);
        self.env.emitter.emit(ev);
    }

    fn transport(&self) -> Arc<dyn Transport> {
        self.env.emitter.transport().clone()
    }

    async fn publish(&self, event: &HostEvent) {
        self.env
            .hub
            .publish(self.env.session_id, event, &self.cancel)
            .await;
    }

    async fn run(&mut self, user_message: &str, max_iterations: u32) -> Result<LoopEnd, LoopError> {
        {
            let mut h = lock(self.env.history);
            self.delta_baseline = h.len();
            h.push(json!({"role": "user", "content": prompt::user_message(user_message)}));
        }
        let schemas = self.env.tools.schemas();
        let names: Vec<&str> = self.env.tools.names().collect();
        self.tools_hash = hex16(serde_json::to_string(&names).unwrap_or_default().as_bytes());
        let mut iteration = 0u32;
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
            self.emit(
                "turn_start",
                &events::TurnStart {
                    display_reset: false,
                },
            );
            let response = match self.call_llm(&schemas).await {
                Ok(r) => r,
                Err(e) => {
                    let text = format!("[LLM API error: {}]", e.reference_text());
                    lock(self.env.history).push(json!({"role": "assistant", "content": text}));
                    return Ok(LoopEnd {
                        text,
                        reason: Some(IncompleteReason::LlmError),
                    });
                }
            };
            if response.finish_reason.is_none() {
                self.finish_reason_missing = true;
            }
            let truncated = response
                .finish_reason
                .as_deref()
                .is_some_and(|r| LENGTH_REASONS.contains(&r.to_ascii_lowercase().as_str()));
            if response.tool_calls.is_empty() {
                return Ok(self.final_response(response, truncated));
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
                self.record_assistant(&response, &self.prepass(&response));
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

    /// One LLM call with its events; text deltas go to the transport and the stream sink.
    async fn call_llm(&mut self, schemas: &Arc<Vec<Value>>) -> Result<LlmResponse, LlmError> {
        self.attempt += 1;
        let attempt = self.attempt;
        let env = self.env;
        let mut call = {
            let history = lock(env.history);
            let n_tool = history.iter().filter(|m| m["role"] == "tool").count();
            let n_reminders = history
                .iter()
                .filter(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("<system-reminder>"))
                })
                .count();
            let started = events::LlmCallStarted {
                attempt,
                model: env.llm.model(),
                temperature: env.llm.temperature(),
                max_tokens: env.llm.max_tokens(),
                n_messages: history.len() + 1,
                n_tool_messages: n_tool,
                n_system_reminder_blocks: n_reminders,
                system_prompt_hash: &self.system_prompt_hash,
                tools_hash: &self.tools_hash,
                tool_count: schemas.len(),
            };
            env.emitter
                .emit(self.writer.event("llm_call_started", &started));
            let start = self.delta_baseline.min(history.len());
            let delta = events::LlmCallDelta {
                attempt,
                delta_start_index: start,
                total_messages: history.len(),
                added_messages: &history[start..],
            };
            env.emitter
                .emit(self.writer.event("llm_call_delta", &delta));
            self.delta_baseline = history.len();
            let req = ChatRequest {
                system: env.system_prompt,
                history: &history,
                tail: env.volatile_tail,
                tools: schemas,
            };
            env.llm.start(&req, &self.cancel)
        };
        loop {
            let piece = match call.next().await {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    let message: String = e.to_string().chars().take(500).collect();
                    let u = call.usage().copied();
                    let data = events::LlmCallCompleted {
                        attempt,
                        status: "error",
                        duration_ms: call.elapsed_ms(),
                        model_latency_ms: call.elapsed_ms(),
                        first_token_ms: None,
                        first_reasoning_ms: None,
                        error_class: Some(e.class),
                        error_message: Some(&message),
                        finish_reason: None,
                        finish_reason_reported: None,
                        prompt_tokens: u.map(|u| u.prompt_tokens),
                        completion_tokens: u.map(|u| u.completion_tokens),
                        cache_read_tokens: u.map(|u| u.cache_read_tokens),
                        cache_creation_tokens: u.map(|u| u.cache_creation_tokens),
                        reasoning_tokens: u.map(|u| u.reasoning_tokens),
                        streamed: Some(e.streamed),
                    };
                    drop(call);
                    self.emit("llm_call_completed", &data);
                    return Err(e);
                }
            };
            match piece {
                Piece::Text(t) => {
                    let ev = self.writer.text_event("llm_text", "chunk", t);
                    env.emitter.emit(ev);
                    match &self.deltas {
                        DeltaSink::None => {}
                        DeltaSink::Callback(cb) => cb(self.delta_writer.text_delta(t)),
                        DeltaSink::Queue(tx) => {
                            let item = self.delta_writer.text_delta(t).to_owned();
                            // Once cancelled, a blocked write is dropped instead of waiting.
                            tokio::select! {
                                biased;
                                _ = tx.send(item) => {}
                                _ = self.cancel.cancelled() => {}
                            }
                        }
                    }
                }
                Piece::Reasoning(r) => {
                    let ev = self.writer.text_event("thinking", "text", r);
                    env.emitter.emit(ev);
                }
                Piece::Retry {
                    retry,
                    max_retries,
                    delay,
                    reason,
                } => {
                    let delay_s = (delay.as_secs_f64() * 100.0).round() / 100.0;
                    self.emit(
                        "llm_retry",
                        &json!({"retry": retry, "max_retries": max_retries, "delay_s": delay_s, "reason": reason}),
                    );
                }
            }
        }
        let cancelled = call.was_cancelled();
        let r = call.finish();
        let ms =
            |d: Option<Duration>| d.map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0);
        let duration_ms = ms(Some(r.duration)).unwrap_or_default();
        let u = r.usage;
        self.emit(
            "llm_call_completed",
            &events::LlmCallCompleted {
                attempt,
                status: "ok",
                duration_ms,
                model_latency_ms: duration_ms,
                first_token_ms: ms(r.first_token),
                first_reasoning_ms: ms(r.first_reasoning),
                error_class: None,
                error_message: None,
                finish_reason: Some(r.finish_reason.as_deref().unwrap_or("stop")),
                finish_reason_reported: Some(r.finish_reason.is_some()),
                prompt_tokens: u.map(|u| u.prompt_tokens),
                completion_tokens: u.map(|u| u.completion_tokens),
                cache_read_tokens: u.map(|u| u.cache_read_tokens),
                cache_creation_tokens: u.map(|u| u.cache_creation_tokens),
                reasoning_tokens: u.map(|u| u.reasoning_tokens),
                streamed: None,
            },
        );
        let _ = cancelled;
        Ok(r)
    }

    fn final_response(&mut self, r: LlmResponse, truncated: bool) -> LoopEnd {
        let blank = r.content.trim().is_empty();
        let (text, reason) = if truncated {
            let text = if blank {
                if r.reasoning.is_empty() {
                    NO_RESPONSE
                } else {
                    NO_TEXT_RESPONSE
                }
                .to_owned()
            } else {
                strip_tag_chars(&r.content)
            };
            (text, Some(IncompleteReason::LengthTruncated))
        } else if blank && !r.reasoning.trim().is_empty() {
            (
                NO_TEXT_RESPONSE.to_owned(),
                Some(IncompleteReason::ReasoningOnly),
            )
        } else if blank {
            (NO_RESPONSE.to_owned(), Some(IncompleteReason::NoOutput))
        } else {
            (strip_tag_chars(&r.content), None)
        };
        let mut msg = json!({"role": "assistant", "content": text});
        if !r.reasoning.is_empty() {
            msg["reasoning_content"] = Value::String(r.reasoning);
        }
        lock(self.env.history).push(msg);
        LoopEnd { text, reason }
    }

    /// Tool calls cut off at the token limit: answered, never run; the third time in a row
    /// ends the turn.
    fn truncated_tool_calls(&mut self, r: LlmResponse) -> Option<LoopEnd> {
        let calls = self.prepass(&r);
        self.record_assistant(&r, &calls);
        {
            let mut h = lock(self.env.history);
            for (id, name, _) in &calls {
                let name = if name.trim().is_empty() {
                    "unknown"
                } else {
                    name
                };
                h.push(json!({"role": "tool", "tool_call_id": id, "name": name, "content": planning::TRUNCATED_CALL_TEXT}));
            }
        }
        self.guards.length_truncations += 1;
        if self.guards.length_truncations >= planning::LENGTH_TRUNCATION_THRESHOLD {
            let text = if r.content.trim().is_empty() {
                "Tool calls were repeatedly cut off at the output-token limit and could not be completed.".to_owned()
            } else {
                r.content.clone()
            };
            lock(self.env.history).push(json!({"role": "assistant", "content": text}));
            return Some(LoopEnd {
                text,
                reason: Some(IncompleteReason::LengthTruncated),
            });
        }
        None
    }

    /// Ids normalised (a fresh UUID for a blank one), names cleaned and repaired: what history
    /// and execution both see. Returns `(id, name, raw arguments)`.
    fn prepass(&self, r: &LlmResponse) -> Vec<(String, String, String)> {
        r.tool_calls
            .iter()
            .map(|c| {
                let id = if c.id.trim().is_empty() {
                    uuid::Uuid::new_v4().to_string()
                } else {
                    c.id.clone()
                };
                let name = strip_tag_chars(&c.name);
                let name = if self.env.tools.get(&name).is_some() || name.trim().is_empty() {
                    name
                } else {
                    {
                        let offered: Vec<&str> = self.env.tools.names().collect();
                        planning::repair_name(&name, offered.iter().copied()).unwrap_or(name)
                    }
                };
                (id, name, c.arguments.clone())
            })
            .collect()
    }

    fn record_assistant(&self, r: &LlmResponse, calls: &[(String, String, String)]) {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, raw)| {
                let canonical = planning::parse_arguments(raw)
                    .map(|m| crate::pycompat::python_json(&Value::Object(m)))
                    .unwrap_or_else(|_| "{}".to_owned());
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": canonical}})
            })
            .collect();
        let mut msg = json!({"role": "assistant", "content": r.content, "tool_calls": tool_calls});
        if !r.reasoning.is_empty() {
            msg["reasoning_content"] = Value::String(r.reasoning.clone());
        }
        lock(self.env.history).push(msg);
    }

    /// `on_max_iterations`: `Some(end)` to stop, `None` to go on with a fresh budget.
    async fn max_iterations_reached(&mut self, max: u32) -> Result<Option<LoopEnd>, LoopError> {
        let (pending, last_text) = {
            let h = lock(self.env.history);
            let last = h.iter().rev().find(|m| m["role"] == "assistant");
            let pending: Vec<Value> = last
                .and_then(|m| m["tool_calls"].as_array())
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| json!({"name": c["function"]["name"], "args": c["function"]["arguments"]}))
                        .collect()
                })
                .unwrap_or_default();
            let text = last
                .and_then(|m| m["content"].as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            (pending, text)
        };
        let pending_json = Value::Array(pending).to_string();
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
                    lock(self.env.history).push(json!({"role": "user", "content": m}));
                }
                Ok(None)
            }
            _ => {
                let text =
                    last_text.unwrap_or_else(|| "Maximum tool call iterations reached.".to_owned());
                lock(self.env.history).push(json!({"role": "assistant", "content": text}));
                Ok(Some(LoopEnd {
                    text,
                    reason: Some(IncompleteReason::MaxIterations),
                }))
            }
        }
    }

    /// Runs a blocking host request on a blocking thread and waits for its reply, cancellably.
    async fn request(
        &self,
        kind: ReplyKind,
        f: impl FnOnce(Arc<dyn Transport>, Reply) + Send + 'static,
    ) -> Result<Answer, LoopError> {
        let (reply, rx) = Reply::new(kind);
        let transport = self.transport();
        if self.cancel.is_cancelled() {
            return Err(LoopError::Cancelled);
        }
        // Not awaited: a deferred host answers later, from any thread.
        drop(tokio::task::spawn_blocking(move || f(transport, reply)));
        let timeout = self.env.reply_timeout;
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(LoopError::Cancelled),
            r = rx => Ok(r.unwrap_or_else(|_| Answer::Fail("the host dropped the request".into()))),
            _ = async {
                match timeout {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            } => Err(LoopError::Failed(TurnFailure::Timeout(format!(
                "the host did not answer within {} ms", timeout.map_or(0, |t| t.as_millis())
            )))),
        }
    }

    /// Plans, decides, confirms, executes and records one batch. `Some(end)` ends the turn.
    async fn tool_batch(&mut self, r: LlmResponse) -> Result<Option<LoopEnd>, LoopError> {
        let calls = self.prepass(&r);
        self.record_assistant(&r, &calls);
        let content = r.content.trim().to_owned();

        let prepared = self.prepare(&calls).await?;
        let (early, mut plans, doom, snapshot) = self.plan_batch(&calls, prepared);

        if doom {
            self.append_results(&early, &[]);
            let text = if content.is_empty() {
                "Tool execution halted by doom-loop detection.".to_owned()
            } else {
                content
            };
            lock(self.env.history).push(json!({"role": "assistant", "content": text}));
            return Ok(Some(LoopEnd {
                text,
                reason: Some(IncompleteReason::DoomLoop),
            }));
        }

        if let Some(snapshot) = &snapshot {
            for p in &plans {
                let ev = PermissionDecisionEvent::decided(
                    &self.ids(p),
                    match p.decision.verdict {
                        Verdict::Allow => PermissionOutcome::Allow,
                        Verdict::Deny => PermissionOutcome::Deny,
                        Verdict::Ask => PermissionOutcome::Prompt,
                    },
                    &snapshot.mode,
                    &snapshot.loaded_sources,
                    p.decision.matched_rule.as_ref(),
                    &p.decision.reason,
                );
                self.publish(&ev).await;
            }
        }

        // Confirmations: in call order, before anything runs.
        for p in plans.iter_mut() {
            if p.decision.verdict != Verdict::Ask {
                continue;
            }
            if self.cancel.is_cancelled() {
                // Never prompt for a cancelled turn (the reference does: a deliberate fix).
                self.append_results(&early, &[]);
                return Err(LoopError::Cancelled);
            }
            self.emit(
                "tool_confirmation",
                &events::ToolCall {
                    tool: &p.name,
                    args: &p.args,
                    call_id: &p.call_id,
                },
            );
            let req = ConfirmRequest {
                tool_name: p.name.clone(),
                description: p.tool.description().to_owned(),
                args_json: serde_json::to_string(&p.args).unwrap_or_default(),
                call_id: p.call_id.clone(),
            };
            let answer = match self
                .request(ReplyKind::Confirm, move |t, reply| {
                    t.confirm_tool(req, reply)
                })
                .await
            {
                Ok(a) => a,
                Err(e) => {
                    self.append_results(&early, &[]);
                    return Err(e);
                }
            };
            match answer {
                Answer::Confirm(Confirmation::Allow) => {}
                Answer::Confirm(c) => {
                    p.state = if c == Confirmation::DenyUnavailable {
                        PlanState::DeclinedUnavailable
                    } else {
                        PlanState::Declined
                    };
                    self.emit(
                        "turn_start",
                        &events::TurnStart {
                            display_reset: true,
                        },
                    );
                }
                Answer::Fail(m) => {
                    self.append_results(&early, &[]);
                    return Err(LoopError::Failed(TurnFailure::Host(m)));
                }
                _ => {
                    self.append_results(&early, &[]);
                    return Err(LoopError::Failed(TurnFailure::Host(
                        "confirm_tool answered with something other than a confirmation".into(),
                    )));
                }
            }
        }

        let results = self.execute(&plans).await;
        // tool_result events in call order, then history: early rejections first.
        let mut formatted = Vec::with_capacity(plans.len());
        for (p, res) in plans.iter().zip(results) {
            let f = self.env.tool_services.format_result(&p.name, &res.raw);
            self.emit(
                "tool_result",
                &events::ToolResult {
                    tool: &p.name,
                    call_id: &p.call_id,
                    content: &res.raw,
                    content_hash: &f.content_hash,
                    original_chars: f.original_chars,
                    saved_to_disk: f.saved_to_disk,
                    disk_path: f.disk_path.as_ref().map(|d| d.display().to_string()),
                    status: res.status,
                    duration_ms: res.duration_ms,
                    error: res.error.as_deref(),
                },
            );
            formatted.push((p.call_id.clone(), p.name.clone(), f.model_text));
        }
        self.append_results(&early, &formatted);
        Ok(None)
    }

    /// The part of planning whose cost grows with the arguments (parsing, the tool's early
    /// refusal, the permission decision, which scans a shell command). A large batch is
    /// prepared on a blocking thread, so no runtime worker scans a huge command, and a cancel
    /// stops the wait at once (the thread finishes on its own; commands are bounded).
    async fn prepare(
        &self,
        calls: &[(String, String, String)],
    ) -> Result<Vec<Prepared>, LoopError> {
        let read_only = self.env.read_only.load(Ordering::Acquire);
        let tools = self.env.tools;
        let size: usize = calls.iter().map(|(_, _, raw)| raw.len()).sum();
        if size <= INLINE_PLANNING_BYTES {
            let engine = self.env.engine.read().unwrap_or_else(|e| e.into_inner());
            return Ok(calls
                .iter()
                .map(|(_, name, raw)| {
                    prepare_call(engine.as_ref(), read_only, tools.get(name).cloned(), raw)
                })
                .collect());
        }
        let engine = self
            .env
            .engine
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let jobs: Vec<(Option<Arc<dyn Tool>>, String)> = calls
            .iter()
            .map(|(_, name, raw)| (tools.get(name).cloned(), raw.clone()))
            .collect();
        let task = tokio::task::spawn_blocking(move || {
            jobs.into_iter()
                .map(|(tool, raw)| prepare_call(engine.as_ref(), read_only, tool, &raw))
                .collect::<Vec<_>>()
        });
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(LoopError::Cancelled),
            r = task => match r {
                Ok(prepared) => Ok(prepared),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => Err(LoopError::Failed(TurnFailure::Host(format!("planning stopped: {e}")))),
            },
        }
    }

    /// Planning (spec §5.5): rejections, guards, argument repair, lookup and the permission
    /// decision of every call. Returns early results, plans, whether a guard tripped, and the
    /// permission snapshot when anyone listens for host events.
    #[allow(clippy::type_complexity)]
    fn plan_batch(
        &mut self,
        calls: &[(String, String, String)],
        prepared: Vec<Prepared>,
    ) -> (
        Vec<(String, String, String)>,
        Vec<Plan>,
        bool,
        Option<ActivePermissions>,
    ) {
        let mut early: Vec<(String, String, String)> = Vec::new(); // (id, name, text)
        let mut plans: Vec<Plan> = Vec::new();
        let mut doom = false;
        let engine_guard = self.env.engine.read().unwrap_or_else(|e| e.into_inner());
        let engine = engine_guard.as_ref();
        for (n, ((id, name, raw), prep)) in calls.iter().zip(prepared).enumerate() {
            let halt_rest = |early: &mut Vec<(String, String, String)>, plans: &mut Vec<Plan>| {
                for p in plans.drain(..) {
                    early.push((p.call_id, p.name, planning::HALTED_TEXT.to_owned()));
                }
                for (id, name, _) in &calls[n + 1..] {
                    let name = if name.trim().is_empty() {
                        "unknown"
                    } else {
                        name
                    };
                    early.push((
                        id.clone(),
                        name.to_owned(),
                        planning::HALTED_TEXT.to_owned(),
                    ));
                }
            };
            if name.trim().is_empty() {
                self.guards.empty_names += 1;
                let mut text = planning::EMPTY_NAME_TEXT.to_owned();
                if self.guards.empty_names >= planning::EMPTY_NAME_THRESHOLD {
                    text.push_str(planning::EMPTY_NAME_STOP);
                    early.push((id.clone(), "unknown".into(), text));
                    halt_rest(&mut early, &mut plans);
                    doom = true;
                    break;
                }
                early.push((id.clone(), "unknown".into(), text));
                continue;
            }
            if self.guards.count_identical(name, raw) {
                early.push((id.clone(), name.clone(), planning::doom_text(name)));
                halt_rest(&mut early, &mut plans);
                doom = true;
                break;
            }
            let prep = match prep {
                Prepared::Unparsed(why) => {
                    if self.guards.parse_failed(name) {
                        early.push((id.clone(), name.clone(), planning::parse_doom_text(name)));
                        halt_rest(&mut early, &mut plans);
                        doom = true;
                        break;
                    }
                    early.push((
                        id.clone(),
                        name.clone(),
                        planning::parse_error_text(name, &why),
                    ));
                    continue;
                }
                p => {
                    self.guards.parse_ok(name);
                    p
                }
            };
            let (tool, args, decision) = match prep {
                Prepared::Decided(tool, args, decision) => (tool, args, decision),
                Prepared::Rejected(text) => {
                    early.push((id.clone(), name.clone(), text));
                    continue;
                }
                Prepared::Unknown | Prepared::Unparsed(_) => {
                    let available: Vec<&str> = self.env.tools.names().collect();
                    early.push((
                        id.clone(),
                        name.clone(),
                        format!(
                            "Tool '{name}' not found. Available tools: {}",
                            available.join(", ")
                        ),
                    ));
                    continue;
                }
            };
            if decision.verdict != Verdict::Deny && !tool.is_read_only() {
                self.guards.clear_other_identical(name, raw);
            }
            let state = match decision.verdict {
                Verdict::Deny => PlanState::Deny(decision.deny_kind.unwrap_or(DenyKind::Rules)),
                _ => PlanState::Allow,
            };
            plans.push(Plan {
                call_id: id.clone(),
                name: name.clone(),
                tool,
                args,
                decision,
                state,
            });
        }
        let snapshot = if !doom && self.env.hub.has_listeners() {
            Some(engine.map_or_else(
                ActivePermissions::no_engine,
                PermissionEngine::active_permissions,
            ))
        } else {
            None
        };
        (early, plans, doom, snapshot)
    }

    fn append_results(
        &self,
        early: &[(String, String, String)],
        planned: &[(String, String, String)],
    ) {
        let mut h = lock(self.env.history);
        for (id, name, text) in early.iter().chain(planned) {
            h.push(json!({"role": "tool", "tool_call_id": id, "name": name, "content": text}));
        }
    }

    fn ids<'p>(&'p self, p: &'p Plan) -> CallIds<'p> {
        CallIds {
            session_id: self.env.session_id,
            turn_id: &self.turn_id,
            tool_call_id: &p.call_id,
            tool_name: &p.name,
        }
    }

    /// Executes the batch: read-only batches in parallel (calls to one tool still one at a
    /// time unless it is re-entrant), anything else in call order. Results come back in call order.
    async fn execute(&mut self, plans: &[Plan]) -> Vec<CallResult> {
        let mut results: Vec<Option<CallResult>> = plans.iter().map(|_| None).collect();
        let runnable: Vec<usize> = (0..plans.len())
            .filter(|&i| plans[i].state == PlanState::Allow)
            .collect();
        let parallel = runnable.len() > 1 && runnable.iter().all(|&i| plans[i].tool.is_read_only());
        let mut started_at: Vec<String> = vec![String::new(); plans.len()];
        let mailbox = Arc::new(OutputMailbox::new(plans.len()));
        if parallel {
            for i in 0..plans.len() {
                if plans[i].state != PlanState::Allow {
                    results[i] = Some(self.refuse(&plans[i]).await);
                }
            }
            let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
            for &i in &runnable {
                let shared = !plans[i].tool.is_reentrant();
                match groups
                    .iter_mut()
                    .find(|(n, _)| shared && *n == plans[i].name)
                {
                    Some((_, g)) => g.push(i),
                    None => groups.push((plans[i].name.clone(), vec![i])),
                }
            }
            // Announced together, in call order, so the start events do not depend on how
            // fast the first call happens to finish.
            for &i in &runnable {
                self.call_started(plans, i, &mut started_at).await;
            }
            let (tx, rx) = mpsc::unbounded_channel();
            for (_, group) in groups {
                self.spawn_calls(plans, group, &mailbox, tx.clone());
            }
            drop(tx);
            self.pump(plans, &mailbox, rx, &mut results, &mut started_at)
                .await;
        } else {
            for i in 0..plans.len() {
                if plans[i].state != PlanState::Allow {
                    results[i] = Some(self.refuse(&plans[i]).await);
                    continue;
                }
                // Announced here rather than from the tool's thread: one thread wake-up less.
                self.call_started(plans, i, &mut started_at).await;
                let (tx, rx) = mpsc::unbounded_channel();
                self.spawn_calls(plans, vec![i], &mailbox, tx);
                self.pump(plans, &mailbox, rx, &mut results, &mut started_at)
                    .await;
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or(CallResult {
                    raw: "Error executing tool: the call did not finish".into(),
                    status: "error",
                    error: Some("the call did not finish".into()),
                    duration_ms: 0.0,
                })
            })
            .collect()
    }

    /// A call that does not run: denied or declined.
    async fn refuse(&mut self, p: &Plan) -> CallResult {
        let (text, error) = match p.state {
            PlanState::Deny(DenyKind::ReadOnly) => (
                format!("[Readonly mode] Tool '{}' is blocked — only read-only tools are permitted in readonly mode. {DNR}", p.name),
                "denied by permission engine",
            ),
            PlanState::Deny(DenyKind::Rules) => (
                format!("Tool execution denied: '{}' is not permitted by the current permission rules. {DNR}", p.name),
                "denied by permission engine",
            ),
            PlanState::DeclinedUnavailable => (
                format!("Tool execution declined: '{}' needed approval, and approval is unavailable in non-interactive mode, so this call was not executed. Do not retry this call. You may use an alternative permitted by the current permission rules.", p.name),
                "approval unavailable",
            ),
            _ => (
                format!("Tool execution declined: '{}' needed approval and was not approved. {DNR}", p.name),
                "not approved",
            ),
        };
        self.emit(
            "tool_start",
            &events::ToolCall {
                tool: &p.name,
                args: &p.args,
                call_id: &p.call_id,
            },
        );
        self.emit(
            "tool_complete",
            &events::ToolComplete {
                tool: &p.name,
                call_id: &p.call_id,
                status: "cancelled",
                duration_ms: 0.0,
                error: Some(error),
            },
        );
        let now = crate::events::host::now_rfc3339();
        let ev =
            ToolLifecycleEvent::finished(&self.ids(p), &now, ToolOutcome::Cancelled, error, None);
        self.publish(&ev).await;
        CallResult {
            raw: text,
            status: "cancelled",
            error: Some(error.to_owned()),
            duration_ms: 0.0,
        }
    }

    fn spawn_calls(
        &self,
        plans: &[Plan],
        group: Vec<usize>,
        mailbox: &Arc<OutputMailbox>,
        tx: mpsc::UnboundedSender<CallDone>,
    ) {
        let jobs: Vec<Job> = group
            .into_iter()
            .map(|i| {
                (
                    i,
                    plans[i].tool.clone(),
                    plans[i].args.clone(),
                    plans[i].call_id.clone(),
                )
            })
            .collect();
        let cancel = self.cancel.clone();
        let workspace = self.env.workspace.to_path_buf();
        let settings = self.env.tools_config.clone();
        let host = TurnHost {
            transport: self.transport(),
            cancel: cancel.clone(),
            timeout: self.env.reply_timeout,
            handle: tokio::runtime::Handle::current(),
        };
        let services = self.env.tool_services.clone();
        let mailbox = mailbox.clone();
        drop(tokio::task::spawn_blocking(move || {
            for (i, tool, args, call_id) in jobs {
                let t0 = Instant::now();
                let mailbox = &mailbox;
                let output = move |chunk: &str| mailbox.push(i, chunk);
                let (result, error_type) = if cancel.is_cancelled() {
                    (
                        CallResult {
                            raw: format!("[Operation Cancelled] {}", cancel_reason(&cancel)),
                            status: "cancelled",
                            error: Some("cancelled by user".into()),
                            duration_ms: 0.0,
                        },
                        None,
                    )
                } else {
                    let ctx = ToolContext {
                        workspace: &workspace,
                        call_id: &call_id,
                        cancel: &cancel,
                        output: &output,
                        host: &host,
                        settings: &settings,
                        services: &services,
                    };
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        crate::tools::check_declared(tool.as_ref(), &args)
                            .and_then(|()| tool.execute(&args, &ctx))
                    }));
                    let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
                    match run {
                        Ok(Ok(text)) if cancel.is_cancelled() => (
                            CallResult {
                                raw: text,
                                status: "cancelled",
                                error: Some("cancelled by user".into()),
                                duration_ms,
                            },
                            None,
                        ),
                        Ok(Ok(text)) => (
                            CallResult {
                                raw: text,
                                status: "ok",
                                error: None,
                                duration_ms,
                            },
                            None,
                        ),
                        Ok(Err(e)) => (
                            CallResult {
                                raw: format!("Error executing {}: {}", tool.name(), e.message),
                                status: "error",
                                error: Some(e.message.chars().take(200).collect()),
                                duration_ms,
                            },
                            Some(e.kind),
                        ),
                        Err(_) => (
                            CallResult {
                                raw: format!("Error executing {}: the tool panicked", tool.name()),
                                status: "error",
                                error: Some("the tool panicked".into()),
                                duration_ms,
                            },
                            Some("Panic".to_owned()),
                        ),
                    }
                };
                let _ = tx.send(CallDone(i, result, error_type));
            }
        }));
    }

    async fn call_started(&mut self, plans: &[Plan], i: usize, started_at: &mut [String]) {
        let p = &plans[i];
        self.emit(
            "tool_start",
            &events::ToolCall {
                tool: &p.name,
                args: &p.args,
                call_id: &p.call_id,
            },
        );
        started_at[i] = crate::events::host::now_rfc3339();
        let ev = ToolLifecycleEvent::started(&self.ids(p), &started_at[i]);
        self.publish(&ev).await;
    }

    /// Turns execution reports into events, in the order they happen. Streamed output is
    /// taken from the mailbox as it comes; a cancel discards what is queued, and the pump then
    /// only waits for the calls to finish (the tools see the same token and stop).
    async fn pump(
        &mut self,
        plans: &[Plan],
        mailbox: &OutputMailbox,
        mut rx: mpsc::UnboundedReceiver<CallDone>,
        results: &mut [Option<CallResult>],
        started_at: &mut [String],
    ) {
        let mut discarding = false;
        loop {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled(), if !discarding => {
                    mailbox.close();
                    discarding = true;
                }
                done = rx.recv() => match done {
                    Some(CallDone(i, res, error_type)) => {
                        // Its output came before its end.
                        self.stream_output(plans, mailbox, i);
                        self.call_finished(&plans[i], &started_at[i], &res, error_type)
                            .await;
                        results[i] = Some(res);
                    }
                    None => break,
                },
                _ = mailbox.pushed(), if !discarding => {
                    for i in 0..mailbox.calls() {
                        self.stream_output(plans, mailbox, i);
                    }
                }
            }
        }
    }

    /// One `tool_output` event with everything waiting for call `i`.
    fn stream_output(&mut self, plans: &[Plan], mailbox: &OutputMailbox, i: usize) {
        let Some(taken) = mailbox.take(i) else {
            return;
        };
        let notice = taken.skipped_notice();
        let mut chunk = taken.text;
        if let Some(notice) = notice {
            chunk.push_str(&notice);
        }
        let p = &plans[i];
        self.emit(
            "tool_output",
            &events::ToolOutput {
                tool: &p.name,
                chunk: &chunk,
                call_id: &p.call_id,
            },
        );
    }

    async fn call_finished(
        &mut self,
        p: &Plan,
        started_at: &str,
        res: &CallResult,
        error_type: Option<String>,
    ) {
        self.emit(
            "tool_complete",
            &events::ToolComplete {
                tool: &p.name,
                call_id: &p.call_id,
                status: res.status,
                duration_ms: res.duration_ms,
                error: res.error.as_deref(),
            },
        );
        let (outcome, summary) = match res.status {
            "ok" => (ToolOutcome::Ok, format!("{} succeeded", p.name)),
            "error" => (ToolOutcome::Error, format!("{} failed", p.name)),
            _ => (ToolOutcome::Cancelled, "cancelled by user".to_owned()),
        };
        let ev =
            ToolLifecycleEvent::finished(&self.ids(p), started_at, outcome, &summary, error_type);
        self.publish(&ev).await;
    }
}

/// Drops `null` values of optional parameters whose schema does not allow null.
fn drop_optional_nulls(mut args: Map<String, Value>, schema: &Value) -> Map<String, Value> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    args.retain(|k, v| {
        if !v.is_null() || required.contains(&k.as_str()) {
            return true;
        }
        let ty = &schema["properties"][k]["type"];
        ty == "null" || ty.as_array().is_some_and(|a| a.iter().any(|t| t == "null"))
    });
    args
}

/// Host requests made from inside a running tool (`ask_user`).
struct TurnHost {
    transport: Arc<dyn Transport>,
    cancel: CancelToken,
    timeout: Option<Duration>,
    handle: tokio::runtime::Handle,
}

impl HostRequests for TurnHost {
    fn ask_user(&self, question: &str, hints: &Value) -> Result<String, String> {
        if self.cancel.is_cancelled() {
            return Err(format!("cancelled: {}", cancel_reason(&self.cancel)));
        }
        let (reply, rx) = Reply::new(ReplyKind::AskUser);
        // We are on a blocking thread already: call the host here.
        self.transport.ask_user(question, &hints.to_string(), reply);
        let timeout = self.timeout;
        self.handle.block_on(async {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Err(format!("cancelled: {}", cancel_reason(&self.cancel))),
                r = rx => match r {
                    Ok(Answer::Text(t)) => Ok(t),
                    Ok(Answer::Fail(m)) => Err(m),
                    Ok(_) => Err("ask_user answered with something other than text".into()),
                    Err(_) => Err("the host dropped the question".into()),
                },
                _ = async {
                    match timeout {
                        Some(t) => tokio::time::sleep(t).await,
                        None => std::future::pending().await,
                    }
                } => Err("the host did not answer in time".into()),
            }
        })
    }
}
