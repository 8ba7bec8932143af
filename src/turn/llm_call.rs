//! The LLM call as the turn drives it: the request (system prompt, history, tool schemas),
//! its `llm_call_*` events, and the stream of text, reasoning and retry pieces handed to the
//! transport and the stream sink. Retries themselves happen below, in `llm`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::history::read;
use super::{events, prompt, DeltaSink, Turn};
use crate::events::turn_event::Text;
use crate::events::TurnEvent;
use crate::llm::message::WireJson;
use crate::llm::{ChatRequest, LlmError, LlmResponse, Piece};

/// The finish reasons that mean the output hit the token limit.
const LENGTH_REASONS: &[&str] = &["length", "max_tokens", "model_length"];

/// Whether a response was cut off at the output-token limit.
pub(super) fn is_truncated(r: &LlmResponse) -> bool {
    r.finish_reason
        .as_deref()
        .is_some_and(|r| LENGTH_REASONS.iter().any(|l| l.eq_ignore_ascii_case(r)))
}

impl Turn<'_, '_> {
    /// One LLM call with its events; text deltas go to the transport and the stream sink.
    pub(super) async fn call_llm(
        &mut self,
        schemas: &Arc<Vec<Value>>,
    ) -> Result<LlmResponse, LlmError> {
        self.attempt += 1;
        let attempt = self.attempt;
        let env = self.env;
        let mut call = {
            let history = read(env.history);
            let turn = &self.transcript;
            let total = history.len() + turn.len();
            let listens = env.emitter.listens();
            if listens {
                // Only the event needs them: a walk of the history nobody reads is skipped.
                let counts = self.counted.update(&history, turn);
                let started = events::LlmCallStarted {
                    attempt,
                    model: env.llm.model(),
                    temperature: env.llm.temperature(),
                    max_tokens: env.llm.max_tokens(),
                    n_messages: total + 1,
                    n_tool_messages: counts.tool_messages,
                    n_system_reminder_blocks: counts.reminders,
                    system_prompt_hash: &self.system_prompt_hash,
                    tools_hash: &self.tools_hash,
                    tool_count: schemas.len(),
                };
                env.emitter
                    .send(&mut self.writer, &TurnEvent::LlmCallStarted(started));
            }
            // Everything added since the last call is this turn's.
            let start = self.delta_baseline.min(turn.len());
            if listens {
                // Rendered once, for the event and the request. With nobody to hear the
                // event the request's cache renders them itself, straight into its bytes:
                // made here they were three allocations and a copy an iteration more.
                let added = &turn[start..];
                let rendered: Vec<WireJson> = added.iter().map(WireJson::of).collect();
                let delta = events::LlmCallDelta {
                    attempt,
                    delta_start_index: history.len() + start,
                    total_messages: total,
                    added_messages: &rendered,
                };
                env.emitter
                    .send(&mut self.writer, &TurnEvent::LlmCallDelta(delta));
                env.llm
                    .offer_rendered(history.len() + start, added, rendered);
            }
            self.delta_baseline = turn.len();
            let tail = prompt::volatile_tail(&env.tool_services.todos(), env.recall);
            let req = ChatRequest {
                system: env.system_prompt.text(),
                history: &history,
                history_version: env.history_version.get(),
                transcript: turn,
                transcript_version: self.transcript_version,
                tail: tail.as_deref(),
                tools: schemas,
            };
            env.llm.start(&req, &self.cancel)
        };
        loop {
            // Buffered pieces without an await each (the async step and its budget charge
            // were a sixth of a streamed delta); `next` waits when they are used up.
            let next = match call.next_ready() {
                Some(next) => next,
                None => call.next().await,
            };
            let piece = match next {
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
                    self.emit_event(&TurnEvent::LlmCallCompleted(data));
                    return Err(e);
                }
            };
            match piece {
                Piece::Text(streamed) => {
                    let t = streamed.text;
                    let json = env.emitter.writes_json();
                    let no_sink = matches!(self.deltas, DeltaSink::None);
                    if !json && no_sink {
                        if env.emitter.observes() {
                            let ev = TurnEvent::LlmText {
                                chunk: Text::new(t),
                            };
                            env.emitter.send_with(&mut self.writer, &ev, false);
                        }
                        continue;
                    }
                    // The item is rendered first so the event reuses its escaped text.
                    let item = if streamed.verbatim_json {
                        self.delta_writer.text_delta_verbatim(t)
                    } else {
                        self.delta_writer.text_delta(t)
                    };
                    if json || env.emitter.observes() {
                        let ev = TurnEvent::LlmText {
                            chunk: Text::escaped(t, item.text_json()),
                        };
                        env.emitter.send_with(&mut self.writer, &ev, json);
                    }
                    match &self.deltas {
                        DeltaSink::None => {}
                        DeltaSink::Callback(cb) => cb(item.json()),
                        DeltaSink::Queue(tx) => {
                            let item = item.as_str().to_owned();
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
                    self.emit_event(&TurnEvent::Thinking { text: r });
                }
                Piece::Retry {
                    retry,
                    max_retries,
                    delay,
                    reason,
                } => {
                    let delay_s = (delay.as_secs_f64() * 100.0).round() / 100.0;
                    self.emit_event(&TurnEvent::LlmRetry(events::LlmRetry {
                        retry,
                        max_retries,
                        delay_s,
                        reason: &reason,
                    }));
                }
            }
        }
        let r = call.finish();
        let ms =
            |d: Option<Duration>| d.map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0);
        let duration_ms = ms(Some(r.duration)).unwrap_or_default();
        let u = r.usage;
        self.emit_event(&TurnEvent::LlmCallCompleted(events::LlmCallCompleted {
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
        }));
        Ok(r)
    }
}
