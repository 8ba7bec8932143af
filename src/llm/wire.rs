//! One wire abstraction: what makes a model API a wire of ours is its request rendering, its
//! stream decoding into the [`Assembler`] (text, reasoning, tool-call slots, finish reason,
//! usage) and its error classification for the retry policy. A wire is one module that
//! implements [`Wire`]; [`WireBackend`] gives it the rest (the lean HTTP lane or reqwest, the
//! SSE parser, the limits, the idle timer), monomorphised per wire, so nothing dispatches
//! dynamically per delta.
//!
//! The Chat Completions wire keeps its own backend (`openai/`): its per-delta fast paths and
//! its request cache are specific to it, and its decoder and error parser are the ones this
//! module's defaults reuse.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::assembly::Assembler;
use super::config::OpenAiConfig;
use super::http_lane::Response;
use super::model_http::ModelHttp;
use super::openai::http::{
    next_body_chunk, parse_error_body, read_limited, redirect_refused, retry_after,
};
use super::request_body::RequestBody;
use super::sse::SseParser;
use super::{ChatRequest, LlmError};

/// What a decoded event means for the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// More events follow.
    More,
    /// The wire's terminal event: the response is complete.
    End,
}

/// The settings every wire renders from.
#[derive(Debug, Clone)]
pub(crate) struct WireSettings {
    pub(crate) model: String,
    pub(crate) max_tokens: u32,
    pub(crate) temperature: Option<f64>,
    /// Keys merged into the body last (they win), as on Chat Completions.
    pub(crate) extra_body: Map<String, Value>,
}

/// A context-overflow refusal as a wire words it: the ladder's trigger, with the window the
/// server named when it named one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub(crate) limit: Option<u64>,
}

/// One model API.
pub(crate) trait Wire: Send + Sync + Sized + 'static {
    /// Appended to `llm.base_url`.
    const PATH: &'static str;
    /// The per-attempt decoding state.
    type Decoder: Default + Send;
    /// What one client keeps between requests to render the next one (the conversation
    /// rendered so far, the static parts).
    type RenderCache: Default + Send;

    /// The client's wire state (the one-shot repair latches).
    fn new(c: &OpenAiConfig) -> Self;

    /// The authentication and version headers (content type and accept are added).
    fn headers(c: &OpenAiConfig) -> Result<HeaderMap, String>;

    /// The request body for `req` (the wire's keys, with `extra_body`'s value in a key's place
    /// and its other keys after), rendered with what `cache` kept from the requests before.
    fn render_body(
        &self,
        req: &ChatRequest<'_>,
        s: &WireSettings,
        cache: &mut Self::RenderCache,
    ) -> RequestBody;

    /// One SSE event's data into `asm`; an in-stream error as the policy classifies it.
    fn decode(dec: &mut Self::Decoder, data: &[u8], asm: &mut Assembler) -> Result<Flow, LlmError>;

    /// The body ended before the terminal event: what the attempt amounts to.
    fn at_eof(dec: &mut Self::Decoder, asm: &mut Assembler) -> Result<(), LlmError>;

    /// An HTTP error answer.
    fn classify(status: u16, body: &[u8]) -> LlmError {
        let (message, code, error_type) = parse_error_body(body);
        LlmError::status(status, message, code.as_deref(), error_type.as_deref())
    }

    /// A one-shot repair of `body` for `e` (latched in `self`); `false` when none fits.
    fn repair(&self, e: &LlmError, body: &mut Map<String, Value>) -> bool;

    /// Whether `e` says the request was larger than the model's context window.
    fn overflow(e: &LlmError) -> Option<Overflow>;
}

/// The error of a stream that ended without its wire's terminal event: retryable (the
/// reference's SDKs raise it as a transport failure).
pub(crate) fn truncated(terminal: &str) -> LlmError {
    LlmError::connection(format!(
        "Connection error: the stream ended without its `{terminal}` event."
    ))
}

/// `s` with a number after `marker` (digits, commas skipped), the first such occurrence.
pub(crate) fn number_after(s: &str, marker: &str) -> Option<u64> {
    let at = s.find(marker)? + marker.len();
    let digits: String = s[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A model client on wire `W`.
pub(crate) struct WireBackend<W: Wire> {
    wire: W,
    settings: WireSettings,
    render_cache: Mutex<W::RenderCache>,
    http: ModelHttp,
    read_timeout: Duration,
    max_event_bytes: usize,
    max_response_bytes: usize,
}

impl<W: Wire> WireBackend<W> {
    pub(crate) fn new(c: &OpenAiConfig) -> Result<Self, String> {
        let http = ModelHttp::new(c, W::PATH, W::headers(c)?)?;
        Ok(WireBackend {
            wire: W::new(c),
            settings: WireSettings {
                model: c.model.clone(),
                max_tokens: c.max_tokens,
                temperature: c.temperature,
                extra_body: c.extra_body.clone(),
            },
            render_cache: Mutex::default(),
            http,
            read_timeout: c.read_timeout,
            max_event_bytes: c.max_event_bytes,
            max_response_bytes: c.max_response_bytes,
        })
    }

    pub(crate) fn settings(&self) -> &WireSettings {
        &self.settings
    }

    pub(crate) fn render_body(&self, req: &ChatRequest<'_>) -> RequestBody {
        let mut cache = self.render_cache.lock().unwrap_or_else(|poisoned| {
            // A render that panicked may have left the cache half brought up to date: what it
            // kept is dropped rather than trusted.
            let mut cache = poisoned.into_inner();
            *cache = W::RenderCache::default();
            self.render_cache.clear_poison();
            cache
        });
        self.wire.render_body(req, &self.settings, &mut cache)
    }

    /// See [`Wire::repair`]: the repaired body, or `None`.
    pub(crate) fn repair(&self, e: &LlmError, body: &RequestBody) -> Option<RequestBody> {
        let mut v: Map<String, Value> = serde_json::from_slice(&body.to_bytes()).ok()?;
        self.wire.repair(e, &mut v).then(|| body_of(&v))
    }

    async fn send(&self, body: RequestBody) -> Result<Response, LlmError> {
        self.http.post(body).await
    }

    /// Sends the request; a non-2xx status becomes the wire's [`LlmError`].
    pub(crate) async fn open(&self, body: RequestBody) -> Result<WireStream<W>, LlmError> {
        let resp = match tokio::time::timeout(self.read_timeout, self.send(body)).await {
            Err(_) => return Err(LlmError::timeout()),
            Ok(r) => r?,
        };
        let status = resp.status();
        if status.is_redirection() {
            return Err(redirect_refused(&resp));
        }
        if !status.is_success() {
            let retry_after = retry_after(&resp);
            let body = read_limited(resp, self.read_timeout).await;
            let mut e = W::classify(status.as_u16(), &body);
            e.retry_after = retry_after;
            return Err(e);
        }
        Ok(WireStream {
            resp,
            buf: Bytes::new(),
            pos: 0,
            parser: SseParser::with_limit(self.max_event_bytes),
            dec: W::Decoder::default(),
            max_event_bytes: self.max_event_bytes,
            max_response_bytes: self.max_response_bytes,
            read_timeout: self.read_timeout,
            deadline: Instant::now() + self.read_timeout,
            eof: false,
            ended: false,
        })
    }
}

fn body_of(v: &Map<String, Value>) -> RequestBody {
    Bytes::from(serde_json::to_vec(v).expect("JSON values serialize")).into()
}

/// The body of one attempt on wire `W`, read event by event.
pub(crate) struct WireStream<W: Wire> {
    resp: Response,
    buf: Bytes,
    pos: usize,
    parser: SseParser,
    dec: W::Decoder,
    max_event_bytes: usize,
    max_response_bytes: usize,
    read_timeout: Duration,
    /// Reset by progress only, so keep-alives do not hide a stalled stream.
    deadline: Instant,
    eof: bool,
    /// The terminal event arrived.
    ended: bool,
}

/// One event through the wire's decoder, then the limits.
#[allow(clippy::too_many_arguments)]
fn step<W: Wire>(
    dec: &mut W::Decoder,
    data: &[u8],
    asm: &mut Assembler,
    max_response_bytes: usize,
    deadline: &mut Instant,
    read_timeout: Duration,
    ended: &mut bool,
) -> Result<bool, LlmError> {
    let before = asm.received();
    let flow = W::decode(dec, data, asm)?;
    if asm.received() > before {
        *deadline = Instant::now() + read_timeout;
    }
    if let Some(e) = asm.call_bound_error() {
        return Err(e);
    }
    if asm.received() > max_response_bytes {
        return Err(LlmError::api(format!(
            "The model server's response exceeded llm.max_response_bytes ({max_response_bytes} bytes of text, reasoning and tool calls); the response was abandoned."
        )));
    }
    if flow == Flow::End {
        *ended = true;
    }
    Ok(flow == Flow::More)
}

impl<W: Wire> WireStream<W> {
    fn event_too_large(&self) -> LlmError {
        LlmError::api(format!(
            "The model server sent a line or event larger than llm.max_event_bytes ({} bytes); the response was abandoned.",
            self.max_event_bytes
        ))
    }

    /// The next event from what is buffered, without waiting; `None` when the network must
    /// be read. `Ok(false)`: the stream is over.
    pub(crate) fn try_ready(&mut self, asm: &mut Assembler) -> Option<Result<bool, LlmError>> {
        if self.ended {
            return Some(Ok(false));
        }
        while self.pos < self.buf.len() {
            let (n, data) = self.parser.next_event(&self.buf[self.pos..]);
            self.pos += n;
            if let Some(data) = data {
                return Some(step::<W>(
                    &mut self.dec,
                    data,
                    asm,
                    self.max_response_bytes,
                    &mut self.deadline,
                    self.read_timeout,
                    &mut self.ended,
                ));
            }
            if self.parser.overflowed() {
                return Some(Err(self.event_too_large()));
            }
        }
        None
    }

    /// Processes the next event into `asm`. `Ok(false)`: the stream is over.
    pub(crate) async fn next(&mut self, asm: &mut Assembler) -> Result<bool, LlmError> {
        loop {
            if let Some(r) = self.try_ready(asm) {
                return r;
            }
            if self.eof {
                if self.parser.finish() {
                    let data = self.parser.data().to_vec();
                    let more = step::<W>(
                        &mut self.dec,
                        &data,
                        asm,
                        self.max_response_bytes,
                        &mut self.deadline,
                        self.read_timeout,
                        &mut self.ended,
                    )?;
                    if more {
                        continue;
                    }
                    return Ok(false);
                }
                W::at_eof(&mut self.dec, asm)?;
                return Ok(false);
            }
            match next_body_chunk(&mut self.resp, self.deadline).await? {
                Some(b) => {
                    self.buf = b;
                    self.pos = 0;
                }
                None => self.eof = true,
            }
        }
    }
}

/// The JSON form of each message of a request (the Chat Completions shape every wire's
/// renderer converts from): history, then this turn's, then the volatile tail. (The wires
/// convert message by message from their caches; this whole list is their tests' reference.)
#[cfg(test)]
pub(crate) fn conversation(req: &ChatRequest<'_>) -> Vec<Value> {
    let mut out: Vec<Value> = req
        .history
        .iter()
        .chain(req.transcript)
        .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
        .filter(Value::is_object)
        .collect();
    if let Some(tail) = req.tail {
        out.push(serde_json::json!({"role": "user", "content": tail}));
    }
    out
}

/// A message's text: a string content, or its text parts joined.
pub(crate) fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A Chat Completions image part's URL (`{"type":"image_url","image_url":{"url"}}`, or the
/// URL as a string).
pub(crate) fn image_url(part: &Value) -> Option<&str> {
    if part.get("type").and_then(Value::as_str) != Some("image_url") {
        return None;
    }
    let u = part.get("image_url")?;
    u.get("url").and_then(Value::as_str).or_else(|| u.as_str())
}

/// Messages of our own shapes for the typed wires' tests of their straight writers: users',
/// tools' and assistants' (without calls, with none, with one per id and its arguments in
/// turn, with and without reasoning), over texts with every kind of escape (quotes,
/// backslashes, control characters, non-ASCII, U+2028, DEL).
#[cfg(test)]
pub(crate) fn messages_of_our_shapes(ids: &[&str], arguments: &[&str]) -> Vec<super::Message> {
    use super::message::{AssistantMessage, HistoryCall, ToolAnswer};
    use super::Message;
    let texts = [
        "",
        "plain",
        "q\"b\\n\nt\tc\u{1}\u{1f}e\u{e9} \u{1f600} </s> \u{2028}\u{7f}",
    ];
    let mut messages = Vec::new();
    for t in texts {
        messages.push(Message::User(t.to_owned()));
        for id in ids {
            messages.push(Message::Tool(ToolAnswer::new(*id, "read_file", t)));
        }
        let calls: Vec<HistoryCall> = ids
            .iter()
            .zip(arguments.iter().cycle())
            .map(|(id, a)| HistoryCall {
                id: (*id).into(),
                name: format!("f{t}").into(),
                arguments: (*a).to_owned(),
            })
            .collect();
        for tool_calls in [None, Some(Vec::new()), Some(calls)] {
            for reasoning in [None, Some(t.to_owned())] {
                messages.push(Message::Assistant(AssistantMessage {
                    content: t.to_owned(),
                    tool_calls: tool_calls.clone(),
                    reasoning,
                }));
            }
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_after_their_marker() {
        assert_eq!(
            number_after("max_tokens: 65536 > 64000, which", ">"),
            Some(64000)
        );
        assert_eq!(
            number_after("limit is 128,000 tokens", "limit is"),
            Some(128000)
        );
        assert_eq!(number_after("nothing here", ">"), None);
    }
}
