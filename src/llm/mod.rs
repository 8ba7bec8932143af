//! The LLM layer: one streamed chat-completions call with the reference's retry policy.
//!
//! A call is pulled, not pushed: the turn loop asks [`LlmCall::next`] for the next [`Piece`]
//! (a text delta, a reasoning delta, or a retry notice) and does its own async work (emitting,
//! back-pressure) between pieces. Pieces borrow the call's reusable buffers, so streaming a delta
//! allocates nothing here. Where a delta is parsed: [`openai`] (wire chunks) and [`assembly`]
//! (accumulation of text, reasoning and tool-call slots).

mod anthropic;
mod appended_chunks;
pub(crate) mod assembly;
mod budget;
mod chunk_head;
pub(crate) mod config;
pub mod error_kind;
mod event_scan;
pub(crate) mod fingerprint;
mod http_lane;
pub mod image;
mod lane_pool;
pub(crate) mod message;
mod model_http;
pub mod openai;
pub(crate) mod request_body;
mod request_deadline;
mod responses;
pub(crate) mod retry;
pub mod script;
pub(crate) mod scripted;
mod sealed_conversation;
pub mod sse;
mod text_chunk;
pub mod tool_call;
mod tool_chunk;
mod typed_body;
#[cfg(test)]
mod typed_wire_bodies;
pub(crate) mod wire;
mod wire_cache;

pub use anthropic::decode_for_fuzzing as anthropic_decode_for_fuzzing;
pub use responses::decode_for_fuzzing as responses_decode_for_fuzzing;
pub use wire_cache::MessagesVersion;
pub(crate) use wire_cache::MessagesVersionCell;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cancel::CancelToken;
use assembly::Assembler;
pub use assembly::{LlmResponse, Usage};
use config::{LlmConfig, RetryConfig, WireKind};
pub use error_kind::ErrorKind;
use fingerprint::{PerList, SharedMemo};
pub use message::Message;
use message::WireJson;
pub use model_http::HttpClientChoice;
pub(crate) use tool_call::{ArgumentsError, ToolCall};
use wire::{Wire, WireBackend, WireStream};

/// What the turn loop receives while a call streams.
#[derive(Debug)]
pub enum Piece<'a> {
    Text(StreamedText<'a>),
    Reasoning(&'a str),
    /// Emitted before the backoff sleep of a retry.
    Retry {
        retry: u32,
        max_retries: u32,
        delay: Duration,
        reason: String,
    },
}

/// A text piece: the text, and whether its JSON string is its bytes between quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamedText<'a> {
    pub text: &'a str,
    /// Every byte of `text` came from a wire string without escapes, so it holds no `"`, `\`
    /// or control character: written as JSON it needs no escaping (each delta is written as
    /// JSON for the host, and scanning it again for escapes was a tenth of a delta's cost).
    /// `false` promises nothing.
    pub verbatim_json: bool,
}

/// A failed LLM call, after retries.
#[derive(Debug, Clone)]
pub struct LlmError {
    /// The reference's exception class name (`APIStatusError`, `APIConnectionError`, ...).
    pub class: &'static str,
    pub message: String,
    pub status: Option<u16>,
    pub retryable: bool,
    pub(crate) retry_after: Option<Duration>,
    /// Whether text had reached the host before the failure.
    pub streamed: bool,
    /// An error event inside a 200 stream: `status` only classifies it for the retry policy,
    /// and the model-visible text has no `Error code: NNN - ` prefix (as the reference's SDK).
    pub(crate) in_stream: bool,
    /// What the loop's recovery ladder makes of it.
    pub kind: ErrorKind,
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(code) => write!(f, "Error code: {code} - {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for LlmError {}

impl LlmError {
    /// The text the reference puts in `[LLM API error: …]`: its SDK's `str(exc)`, which is the
    /// fixed `Connection error.` for any connection failure (the reason stays in `message`, for
    /// the `llm_call_completed` event and the log) and the bare message for in-stream errors.
    pub(crate) fn reference_text(&self) -> std::borrow::Cow<'_, str> {
        if self.class == "APIConnectionError" {
            "Connection error.".into()
        } else if self.in_stream {
            self.message.as_str().into()
        } else {
            self.to_string().into()
        }
    }

    /// An error the policy does not map to a status: not retried.
    pub(crate) fn api(message: String) -> Self {
        LlmError {
            class: "APIError",
            kind: error_kind::classify(None, None, &message),
            message,
            status: None,
            retryable: false,
            retry_after: None,
            streamed: false,
            in_stream: false,
        }
    }

    /// Classifies again with the error's `code` (an OpenAI-wire error body's).
    pub(crate) fn with_code(mut self, code: Option<&str>) -> Self {
        self.kind = error_kind::classify(self.status, code, &self.message);
        self
    }

    /// Marks an error that arrived as an event inside a 200 stream.
    pub(crate) fn in_stream(mut self) -> Self {
        self.in_stream = true;
        self
    }

    pub(crate) fn connection(message: impl Into<String>) -> Self {
        LlmError {
            class: "APIConnectionError",
            kind: ErrorKind::Other,
            message: message.into(),
            status: None,
            retryable: true,
            retry_after: None,
            streamed: false,
            in_stream: false,
        }
    }

    pub(crate) fn timeout() -> Self {
        LlmError {
            class: "APITimeoutError",
            kind: ErrorKind::Other,
            message: "Request timed out.".into(),
            status: None,
            retryable: true,
            retry_after: None,
            streamed: false,
            in_stream: false,
        }
    }

    /// An HTTP error status (or an in-stream error mapped to one), classified per the policy.
    pub(crate) fn status(
        status: u16,
        message: String,
        code: Option<&str>,
        error_type: Option<&str>,
    ) -> Self {
        LlmError {
            class: retry::status_class(status),
            kind: error_kind::classify(Some(status), code, &message),
            message,
            status: Some(status),
            retryable: retry::is_retryable_status(status, code, error_type),
            retry_after: None,
            streamed: false,
            in_stream: false,
        }
    }
}

/// The request as the turn loop assembles it.
pub struct ChatRequest<'a> {
    pub system: &'a str,
    /// The history before this turn.
    pub history: &'a [Message],
    /// Which state of the history that is ([`MessagesVersion::unknown`]: every message is
    /// checked against the request cache).
    pub history_version: MessagesVersion,
    /// This turn's messages so far (sent after `history`).
    pub transcript: &'a [Message],
    /// Which state of the transcript that is (as `history_version`).
    pub transcript_version: MessagesVersion,
    /// Request-only volatile `user` message, never stored in history.
    pub tail: Option<&'a str>,
    /// The `tools` array (already sorted by name); empty means none are sent. Shared, so its
    /// rendering is kept for the next request with the same list.
    pub tools: &'a Arc<Vec<Value>>,
}

/// Session totals of provider-reported usage (failed attempts included).
#[derive(Default)]
pub struct UsageTotals {
    pub(crate) prompt: AtomicU64,
    pub(crate) completion: AtomicU64,
    pub(crate) cache_read: AtomicU64,
    pub(crate) cache_creation: AtomicU64,
    pub(crate) reasoning: AtomicU64,
    pub(crate) cost_nano_usd: AtomicU64,
}

impl UsageTotals {
    pub(crate) fn add(&self, u: &Usage) {
        self.prompt.fetch_add(u.prompt_tokens, Ordering::Relaxed);
        self.completion
            .fetch_add(u.completion_tokens, Ordering::Relaxed);
        self.cache_read
            .fetch_add(u.cache_read_tokens, Ordering::Relaxed);
        self.cache_creation
            .fetch_add(u.cache_creation_tokens, Ordering::Relaxed);
        self.reasoning
            .fetch_add(u.reasoning_tokens, Ordering::Relaxed);
        self.cost_nano_usd
            .fetch_add(u.cost_nano_usd, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt.load(Ordering::Relaxed),
            completion_tokens: self.completion.load(Ordering::Relaxed),
            cache_read_tokens: self.cache_read.load(Ordering::Relaxed),
            cache_creation_tokens: self.cache_creation.load(Ordering::Relaxed),
            reasoning_tokens: self.reasoning.load(Ordering::Relaxed),
            cost_nano_usd: self.cost_nano_usd.load(Ordering::Relaxed),
        }
    }
}

// One per agent, never in a collection: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Backend {
    /// Boxed: its HTTP lane, caches and headers would otherwise size every agent's client,
    /// scripted ones too (10,000 of them in the scale run).
    OpenAi(Box<openai::OpenAiBackend>),
    Anthropic(Box<WireBackend<anthropic::Anthropic>>),
    Responses(Box<WireBackend<responses::Responses>>),
    Scripted(scripted::ScriptedBackend),
}

/// One agent's model client.
pub struct LlmClient {
    backend: Backend,
    retry: RetryConfig,
    /// The optional bound on a whole call (`llm.call_timeout_ms`).
    call_timeout: Option<Duration>,
    pub usage: UsageTotals,
    /// The price of this client's model in the config's table, if it lists it.
    price: Option<config::Price>,
    budgets: config::Budgets,
    /// When the session's clock started (for `session_ms`).
    created: Instant,
    /// The last tool list's `tools_hash`: a turn with the same list takes it by the list's
    /// address instead of hashing its names to find the process-wide memo.
    tools_digest: Mutex<Option<PerList<Arc<str>>>>,
}

impl LlmClient {
    pub fn new(config: &LlmConfig) -> Result<Self, String> {
        Ok(match config {
            LlmConfig::OpenAi(c) => LlmClient {
                backend: match c.wire {
                    WireKind::ChatCompletions => {
                        Backend::OpenAi(Box::new(openai::OpenAiBackend::new(c)?))
                    }
                    WireKind::Anthropic => Backend::Anthropic(Box::new(WireBackend::new(c)?)),
                    WireKind::Responses => Backend::Responses(Box::new(WireBackend::new(c)?)),
                },
                retry: c.retry,
                call_timeout: c.call_timeout,
                usage: UsageTotals::default(),
                price: c.prices.get(&c.model).copied(),
                budgets: c.budgets,
                created: Instant::now(),
                tools_digest: Mutex::default(),
            },
            LlmConfig::Scripted(s) => LlmClient {
                backend: Backend::Scripted(scripted::ScriptedBackend::new(
                    script::Script::from_value(s.clone())
                        .map_err(|e| format!("config field `llm.script`: {e}"))?,
                )),
                // Scripted faults retry at once: the script is a test double, not a server.
                retry: RetryConfig {
                    max_attempts: 5,
                    backoff_base: Duration::ZERO,
                    backoff_cap: Duration::ZERO,
                },
                call_timeout: None,
                usage: UsageTotals::default(),
                price: None,
                budgets: config::Budgets::default(),
                created: Instant::now(),
                tools_digest: Mutex::default(),
            },
        })
    }

    pub(crate) fn model(&self) -> &str {
        match &self.backend {
            Backend::OpenAi(b) => b.model(),
            Backend::Anthropic(b) => &b.settings().model,
            Backend::Responses(b) => &b.settings().model,
            Backend::Scripted(b) => b.model(),
        }
    }

    /// `temperature` as sent (`None`: not sent).
    pub(crate) fn temperature(&self) -> Option<f64> {
        match &self.backend {
            Backend::OpenAi(b) => b.temperature(),
            // Never sent on the Anthropic wire.
            Backend::Anthropic(_) => None,
            Backend::Responses(b) => b.settings().temperature,
            Backend::Scripted(_) => None,
        }
    }

    pub(crate) fn max_tokens(&self) -> u32 {
        match &self.backend {
            Backend::OpenAi(b) => b.max_tokens(),
            Backend::Anthropic(b) => b.settings().max_tokens,
            Backend::Responses(b) => b.settings().max_tokens,
            Backend::Scripted(_) => config::DEFAULT_MAX_TOKENS,
        }
    }

    /// Whether `e` is this wire's context-overflow refusal, and the window it named: what
    /// the overflow ladder learns the context window from.
    pub(crate) fn overflow(&self, e: &LlmError) -> Option<wire::Overflow> {
        match &self.backend {
            Backend::Anthropic(_) => anthropic::Anthropic::overflow(e),
            Backend::Responses(_) => responses::Responses::overflow(e),
            Backend::OpenAi(_) | Backend::Scripted(_) => None,
        }
    }

    /// The first budget of `llm.budgets` the session or this turn (which started at `started`
    /// with the session's usage at `at_start`) has reached, as the cancellation reason.
    pub(crate) fn budget_exceeded(&self, at_start: &Usage, started: Instant) -> Option<String> {
        budget::exceeded(
            &self.budgets,
            &self.usage.snapshot(),
            at_start,
            started,
            self.created,
        )
    }

    /// Whether the config's price table lists this client's model.
    pub(crate) fn priced(&self) -> bool {
        self.price.is_some()
    }

    pub(crate) fn max_retries(&self) -> u32 {
        self.retry.max_attempts.saturating_sub(1)
    }

    /// `system_prompt_hash` of `llm_call_started` (SHA-256 prefix), computed once per distinct
    /// prompt instead of once per turn (the turn's `SystemPrompt` keeps it for its text).
    pub(crate) fn prompt_digest(&self, system: &str) -> Arc<str> {
        static DIGESTS: SharedMemo<Arc<str>> = SharedMemo::new();
        DIGESTS.get_or(system.as_bytes(), || {
            fingerprint::hex16(system.as_bytes()).into()
        })
    }

    /// `tools_hash` of `llm_call_started`: the SHA-256 prefix of the JSON list of tool names,
    /// computed once per distinct list. `names` are the names of the tools `schemas` was built
    /// from (the registry's, in order), so the list's address stands for them.
    pub(crate) fn tools_digest<'n>(
        &self,
        schemas: &Arc<Vec<Value>>,
        names: impl Iterator<Item = &'n str>,
    ) -> Arc<str> {
        static DIGESTS: SharedMemo<Arc<str>> = SharedMemo::new();
        let mut last = self.tools_digest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = last.as_ref().filter(|d| d.of(schemas)) {
            return d.value.clone();
        }
        let names: Vec<&str> = names.collect();
        // Names joined by a byte no UTF-8 text holds, so ["ab"] and ["a", "b"] differ.
        let mut key = Vec::with_capacity(names.iter().map(|n| n.len() + 1).sum());
        for n in &names {
            key.extend_from_slice(n.as_bytes());
            key.push(0xff);
        }
        let digest = DIGESTS.get_or(&key, || {
            fingerprint::hex16(serde_json::to_string(&names).unwrap_or_default().as_bytes()).into()
        });
        *last = Some(PerList::new(schemas, digest.clone()));
        digest
    }

    /// The JSON of `messages`, which the next request carries at positions `at..` of its
    /// conversation (after the system message), as the turn rendered it for `llm_call_delta`:
    /// the request's cache uses it instead of rendering them again, for each message still
    /// equal to the one rendered. `json[i]` must be `WireJson::of(&messages[i])`.
    pub(crate) fn offer_rendered(&self, at: usize, messages: &[Message], json: Vec<WireJson>) {
        match &self.backend {
            Backend::OpenAi(b) => b.offer_rendered(at, messages, json),
            Backend::Anthropic(_) | Backend::Responses(_) | Backend::Scripted(_) => {}
        }
    }

    /// Starts a call; nothing is sent until the first [`LlmCall::next`].
    pub fn start<'c>(&'c self, req: &ChatRequest<'_>, cancel: &CancelToken) -> LlmCall<'c> {
        let body = match &self.backend {
            Backend::OpenAi(b) => Some(b.render_body(req)),
            Backend::Anthropic(b) => Some(b.render_body(req)),
            Backend::Responses(b) => Some(b.render_body(req)),
            Backend::Scripted(_) => None,
        };
        LlmCall {
            client: self,
            body,
            cancel: cancel.clone(),
            asm: Assembler::default(),
            stream: None,
            attempt: 0,
            pending_sleep: None,
            done: false,
            cancelled: false,
            started: Instant::now(),
            deadline: self.call_timeout.map(|t| tokio::time::Instant::now() + t),
            ready_run: 0,
        }
    }
}

/// Waits for the call's deadline (forever without one).
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

// One lives in each call, never in a collection: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum AttemptStream {
    OpenAi(openai::OpenAiStream),
    Anthropic(WireStream<anthropic::Anthropic>),
    Responses(WireStream<responses::Responses>),
    Scripted(scripted::ScriptedStream),
}

/// One LLM call in flight (all its attempts).
pub struct LlmCall<'c> {
    client: &'c LlmClient,
    body: Option<request_body::RequestBody>,
    cancel: CancelToken,
    asm: Assembler,
    stream: Option<AttemptStream>,
    attempt: u32,
    pending_sleep: Option<(Duration, LlmError)>,
    done: bool,
    cancelled: bool,
    started: Instant,
    deadline: Option<tokio::time::Instant>,
    /// Pieces [`LlmCall::next_ready`] gave since `next` last ran.
    ready_run: u32,
}

/// How many pieces [`LlmCall::next_ready`] gives in a row before `next` charges the task's
/// cooperative budget once (it charged per piece before): a long buffered run still lets the
/// worker's other tasks in, at a fraction of the cost per delta.
const READY_RUN: u32 = 32;

impl LlmCall<'_> {
    /// Between two pieces: a fired cancel ends the call (`true`: it is marked done), a passed
    /// deadline fails it.
    #[inline]
    fn stopped(&mut self) -> Result<bool, LlmError> {
        if self.cancel.is_cancelled() {
            self.cancelled = true;
            self.done = true;
            return Ok(true);
        }
        if self
            .deadline
            .is_some_and(|d| tokio::time::Instant::now() >= d)
        {
            return Err(self.deadline_error());
        }
        Ok(false)
    }

    fn deadline_error(&mut self) -> LlmError {
        self.done = true;
        self.stream = None;
        let ms = self.client.call_timeout.map_or(0, |t| t.as_millis());
        LlmError {
            class: "APITimeoutError",
            kind: ErrorKind::Other,
            message: format!(
                "Request timed out: the LLM call took longer than llm.call_timeout_ms ({ms} ms)."
            ),
            status: None,
            retryable: false,
            retry_after: None,
            streamed: self.asm.progress,
            in_stream: false,
        }
    }

    /// The next piece, `Ok(None)` at the end of the stream (or when the token was cancelled:
    /// what arrived is kept), or the final error.
    pub async fn next(&mut self) -> Result<Option<Piece<'_>>, LlmError> {
        self.ready_run = 0;
        loop {
            if let Some(kind) = self.asm.pop_piece(|| self.started.elapsed()) {
                return Ok(Some(self.asm.piece(kind)));
            }
            if self.done {
                return Ok(None);
            }
            if let Some((delay, original)) = self.pending_sleep.take() {
                if !delay.is_zero() {
                    tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => return Err(original),
                        _ = until(self.deadline) => return Err(self.deadline_error()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
                if self.cancel.is_cancelled() {
                    return Err(original);
                }
            }
            if self.stopped()? {
                continue;
            }
            let deadline = self.deadline;
            let step = match &mut self.stream {
                None => {
                    self.attempt += 1;
                    // Opening races the cancel and the deadline, the same way on every wire.
                    macro_rules! open_racing {
                        ($call:ident, $backend:expr, $variant:path) => {{
                            let body = $call.body.clone().unwrap_or_default();
                            tokio::select! {
                                biased;
                                _ = $call.cancel.cancelled() => None,
                                _ = until(deadline) => return Err($call.deadline_error()),
                                r = $backend.open(body) => Some(r.map($variant)),
                            }
                        }};
                    }
                    let opened = match &self.client.backend {
                        Backend::OpenAi(b) => open_racing!(self, b, AttemptStream::OpenAi),
                        Backend::Anthropic(b) => open_racing!(self, b, AttemptStream::Anthropic),
                        Backend::Responses(b) => open_racing!(self, b, AttemptStream::Responses),
                        Backend::Scripted(b) => Some(b.open().map(AttemptStream::Scripted)),
                    };
                    match opened {
                        None => {
                            self.cancelled = true;
                            self.done = true;
                            continue;
                        }
                        Some(Ok(s)) => {
                            self.stream = Some(s);
                            continue;
                        }
                        Some(Err(e)) => Err(e),
                    }
                }
                Some(stream) => {
                    let asm = &mut self.asm;
                    // Buffered data needs no wait, so no cancellation waiter either: the token
                    // was checked above, and a delta costs no lock.
                    let ready = match stream {
                        AttemptStream::OpenAi(s) => s.try_ready(asm),
                        AttemptStream::Anthropic(s) => s.try_ready(asm),
                        AttemptStream::Responses(s) => s.try_ready(asm),
                        AttemptStream::Scripted(s) => s.try_ready(asm),
                    };
                    if let Some(r) = ready {
                        // A long buffered run still lets the worker's other tasks in.
                        tokio::task::consume_budget().await;
                        r
                    } else {
                        // The stream first: a body chunk already received needs no
                        // cancellation waiter (registering one and taking it off again cost a
                        // tool-loop iteration ~800 instructions). The token is checked again
                        // before the next read (`stopped`), so a cancel still ends the call.
                        tokio::select! {
                            biased;
                            r = async {
                                match stream {
                                    AttemptStream::OpenAi(s) => s.next(asm).await,
                                    AttemptStream::Anthropic(s) => s.next(asm).await,
                                    AttemptStream::Responses(s) => s.next(asm).await,
                                    AttemptStream::Scripted(s) => s.next(asm).await,
                                }
                            } => r,
                            _ = self.cancel.cancelled() => {
                                self.cancelled = true;
                                self.done = true;
                                continue;
                            }
                            _ = until(deadline) => Err(LlmError::timeout()),
                        }
                    }
                }
            };
            if let Some(r) = self.settle(step, deadline) {
                return r;
            }
        }
    }

    /// The next piece from what is already buffered, without waiting: `None` when the next
    /// step must wait (the network, a retry's sleep, a new attempt) or after [`READY_RUN`]
    /// pieces in a row; then [`LlmCall::next`] goes on (and lets the worker's other tasks in).
    /// Between two pieces it checks the token and the deadline as `next` does, so a cancel
    /// from the host's callback for one delta stops the deltas after it.
    pub(crate) fn next_ready(&mut self) -> Option<Result<Option<Piece<'_>>, LlmError>> {
        loop {
            if self.ready_run >= READY_RUN {
                return None;
            }
            if let Some(kind) = self.asm.pop_piece(|| self.started.elapsed()) {
                self.ready_run += 1;
                return Some(Ok(Some(self.asm.piece(kind))));
            }
            if self.done {
                return Some(Ok(None));
            }
            if self.pending_sleep.is_some() {
                return None;
            }
            match self.stopped() {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => return Some(Err(e)),
            }
            let deadline = self.deadline;
            let asm = &mut self.asm;
            let step = match self.stream.as_mut()? {
                AttemptStream::OpenAi(s) => s.try_ready(asm),
                AttemptStream::Anthropic(s) => s.try_ready(asm),
                AttemptStream::Responses(s) => s.try_ready(asm),
                AttemptStream::Scripted(s) => s.try_ready(asm),
            }?;
            // An event decoded: the common step, settled here without the call.
            if matches!(step, Ok(true)) {
                continue;
            }
            if let Some(r) = self.settle(step, deadline) {
                return Some(r);
            }
        }
    }

    /// What one step of the attempt means for the call: `None` goes on to the next step;
    /// else what `next` returns (a retry's piece, or the final error).
    fn settle(
        &mut self,
        step: Result<bool, LlmError>,
        deadline: Option<tokio::time::Instant>,
    ) -> Option<Result<Option<Piece<'static>>, LlmError>> {
        if step.is_err() && deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            // Whatever failed, the call's time is up: no retry.
            return Some(Err(self.deadline_error()));
        }
        let mut e = match step {
            Ok(true) => return None,
            Ok(false) => {
                self.finish_attempt();
                self.done = true;
                return None;
            }
            Err(e) => e,
        };
        self.finish_attempt();
        self.stream = None;
        if !self.asm.progress {
            let repaired = match (&self.client.backend, &self.body) {
                (Backend::Anthropic(b), Some(body)) => b.repair(&e, body),
                (Backend::Responses(b), Some(body)) => b.repair(&e, body),
                _ => None,
            };
            if let Some(repaired) = repaired {
                self.body = Some(repaired);
                self.attempt -= 1;
                self.asm.reset_for_retry();
                return Some(Ok(Some(Piece::Retry {
                    retry: self.attempt + 1,
                    max_retries: self.client.max_retries(),
                    delay: Duration::ZERO,
                    reason: "parameter_repair".to_owned(),
                })));
            }
            if let (Backend::OpenAi(b), Some(body)) = (&self.client.backend, &self.body) {
                if let Some(plain) = b.without_stream(&e, body) {
                    // Not a retry either, and no event: the reference replays the answer as
                    // if it had streamed.
                    self.body = Some(plain);
                    self.attempt -= 1;
                    self.asm.reset_for_retry();
                    return None;
                }
                if let Some(repaired) = b.repair(&e, body) {
                    // A repair is not a retry: it spends no attempt.
                    self.body = Some(repaired);
                    self.attempt -= 1;
                    self.asm.reset_for_retry();
                    return Some(Ok(Some(Piece::Retry {
                        retry: self.attempt + 1,
                        max_retries: self.client.max_retries(),
                        delay: Duration::ZERO,
                        reason: "parameter_repair".to_owned(),
                    })));
                }
            }
        }
        let max = self.client.retry.max_attempts;
        if e.retryable && !self.asm.progress && self.attempt < max {
            let delay = retry::backoff(&self.client.retry, self.attempt - 1, e.retry_after);
            let reason = match e.status {
                Some(s) => format!("status={s}"),
                None => e.class.to_owned(),
            };
            self.asm.reset_for_retry();
            let retry = self.attempt;
            self.pending_sleep = Some((delay, e));
            return Some(Ok(Some(Piece::Retry {
                retry,
                max_retries: self.client.max_retries(),
                delay,
                reason,
            })));
        }
        e.streamed = self.asm.progress;
        self.done = true;
        Some(Err(e))
    }

    fn finish_attempt(&mut self) {
        if let Some(u) = self.asm.usage.as_ref() {
            let mut u = *u;
            if let Some(p) = &self.client.price {
                u.cost_nano_usd = p.cost_nano_usd(&u);
            }
            self.client.usage.add(&u);
        }
    }

    /// Milliseconds since the call started (all attempts).
    pub(crate) fn elapsed_ms(&self) -> f64 {
        (self.started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
    }

    /// Whether the stream stopped because the token was cancelled.
    pub fn was_cancelled(&self) -> bool {
        self.cancelled
    }

    /// The attempt's provider-reported usage, when any.
    pub(crate) fn usage(&self) -> Option<&Usage> {
        self.asm.usage.as_ref()
    }

    /// Builds the response from everything that arrived.
    pub fn finish(self) -> LlmResponse {
        let mut r = self.asm.finish();
        r.duration = self.started.elapsed();
        if r.model.is_empty() {
            r.model = self.client.model().to_owned();
        }
        r
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire_conformance;
