//! OpenAI chat completions over SSE: request rendering, the HTTP exchange, and chunk decoding.
//!
//! A plain text chunk is read by the scanner of `text_chunk.rs`, a chunk of tool-call deltas by
//! `tool_chunk.rs`; every other chunk is decoded
//! with serde visitors that write straight into the [`Assembler`]. Either way a text delta is
//! copied once from the network buffer and nothing is allocated for it (no `Vec` of choices,
//! no owned strings). Every quirk of `openai-wire-and-quirks.md` §4 is tolerated here:
//! null, empty or missing `choices`, usage-only chunks, errors inside a 200 stream in both
//! shapes, `reasoning_content` or `reasoning`, arguments as a string or an object.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::assembly::{Assembler, Usage};
use super::config::OpenAiConfig;
use super::fingerprint::{PerList, SharedMemo};
use super::http_lane::{Lane, LaneError, Response};
use super::message::WireJson;
use super::request_body::RequestBody;
use super::request_deadline::RequestDeadline;
use super::sse::SseParser;
use super::text_chunk::{read_framed, text_chunk, LastTextChunk};
use super::tool_chunk::tool_chunk;
use super::wire_cache::{RenderedMessages, SystemWire, UserWire};
use super::Message;
use super::{retry, ChatRequest, LlmError};

/// Bodies of failed responses are read up to this size for their error message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The agent's own HTTP client: its connection pool closes with the agent (a shared pool kept
/// an idle connection to the server open after `agentao_agent_free`). Building one costs a few
/// microseconds (the webpki roots are static; about 6 µs in a release build on these machines).
/// It follows no redirect: the request carries the conversation and `llm.headers`, which
/// reqwest would have sent to any origin a server named (it strips only `Authorization`),
/// over plain `http` or to a loopback or metadata address as well ([`redirect_refused`]).
fn agent_client(connect_timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

pub(crate) struct OpenAiBackend {
    transport: Transport,
    headers: HeaderMap,
    url: Endpoint,
    model: String,
    temperature: Option<f64>,
    max_tokens: u32,
    extra_body: Map<String, Value>,
    read_timeout: Duration,
    /// The read timeout of `open`, on one timer kept between requests.
    request_deadline: RequestDeadline,
    max_event_bytes: usize,
    max_response_bytes: usize,
    /// One-shot repairs (spec §4.6), latched for the client's life once a server asked.
    use_max_completion_tokens: AtomicBool,
    drop_temperature: AtomicBool,
    /// The static parts of a body are rendered once and spliced as bytes (their escaping was
    /// most of a request's cost): the system message per distinct prompt, the tools array per
    /// tool list, both shared process-wide; this agent's last tools array is kept here.
    tools: Mutex<Option<RenderedTools>>,
    /// The conversation as of the last request, each message rendered once.
    messages: Mutex<RenderedMessages>,
    /// The last system message and the prompt it renders, shared with the process-wide memo:
    /// comparing the prompt with it (a `memcmp`) is cheaper than the memo's hash of the whole
    /// prompt, and than matching the prompt against the JSON (~2k instructions a request,
    /// issue 12).
    system: Mutex<Option<RenderedSystem>>,
    /// The last body's size: the next one is allocated once.
    body_size_hint: AtomicUsize,
}

/// How the request goes out. Each answer, a redirect included, is the answer: nothing goes to
/// reqwest after the lane (it used to take every 3xx and follow it).
enum Transport {
    /// The lean lane, when the endpoint allows it (plain `http://`, no proxy): an agent on it
    /// does not pay for a reqwest client (~6 µs and its memory per agent).
    Lane(Lane),
    /// Built with the backend, so a client that cannot be built fails the agent's creation.
    Reqwest(reqwest::Client),
}

/// The chat-completions URL, parsed once. One that does not parse keeps its error where it
/// always was: each request fails with a connection error.
enum Endpoint {
    Parsed(reqwest::Url),
    Unparsed(String),
}

impl Endpoint {
    fn new(url: String) -> Endpoint {
        match reqwest::Url::parse(&url) {
            Ok(u) => Endpoint::Parsed(u),
            Err(_) => Endpoint::Unparsed(url),
        }
    }
}

/// A `tools` array rendered as JSON, for the schemas it was rendered from.
type RenderedTools = PerList<Bytes>;

/// The `tools` array of `schemas` as JSON, rendered once per process for each distinct
/// schema list (agents of one tool selection share the list).
fn rendered_tools(schemas: &Arc<Vec<Value>>) -> Bytes {
    static SHARED: Mutex<Vec<RenderedTools>> = Mutex::new(Vec::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = shared.iter().find(|r| r.of(schemas)) {
        return r.value.clone();
    }
    shared.retain(RenderedTools::is_live);
    let json = json_bytes(&**schemas);
    shared.push(RenderedTools::new(schemas, json.clone()));
    json
}

/// A system prompt and its message's JSON.
#[derive(Clone)]
struct RenderedSystem {
    prompt: Arc<str>,
    json: Bytes,
}

fn json_bytes<T: serde::Serialize + ?Sized>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("serializing JSON values cannot fail"))
}

impl OpenAiBackend {
    pub(crate) fn new(c: &OpenAiConfig) -> Result<Self, String> {
        let mut headers = HeaderMap::new();
        let auth = HeaderValue::from_str(&format!("Bearer {}", c.api_key))
            .map_err(|_| "config field `llm.api_key`: not a valid header value".to_owned())?;
        headers.insert(AUTHORIZATION, auth);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (k, v) in &c.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("config field `llm.headers.{k}`: bad header name"))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| format!("config field `llm.headers.{k}`: bad header value"))?;
            headers.insert(name, value);
        }
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let url = Endpoint::new(format!("{}/chat/completions", c.base_url));
        let lane = match &url {
            Endpoint::Parsed(u) => Lane::for_url(u, c.connect_timeout),
            Endpoint::Unparsed(_) => None,
        };
        let transport = match lane {
            Some(lane) => Transport::Lane(lane),
            None => Transport::Reqwest(agent_client(c.connect_timeout)?),
        };
        Ok(OpenAiBackend {
            transport,
            headers,
            url,
            model: c.model.clone(),
            temperature: c.temperature,
            max_tokens: c.max_tokens,
            extra_body: c.extra_body.clone(),
            read_timeout: c.read_timeout,
            request_deadline: RequestDeadline::default(),
            max_event_bytes: c.max_event_bytes,
            max_response_bytes: c.max_response_bytes,
            use_max_completion_tokens: AtomicBool::new(false),
            drop_temperature: AtomicBool::new(false),
            tools: Mutex::new(None),
            messages: Mutex::new(RenderedMessages::default()),
            system: Mutex::new(None),
            body_size_hint: AtomicUsize::new(4096),
        })
    }

    /// `{"role":"system","content":…}`, rendered once per distinct prompt.
    fn system_message(&self, system: &str) -> Bytes {
        static RENDERED: SharedMemo<RenderedSystem> = SharedMemo::new();
        let mut mine = self.system.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = mine.as_ref().filter(|r| *r.prompt == *system) {
            return r.json.clone();
        }
        let r = RENDERED.get_or(system.as_bytes(), || RenderedSystem {
            prompt: Arc::from(system),
            json: json_bytes(&SystemWire(system)),
        });
        let json = r.json.clone();
        *mine = Some(r);
        json
    }

    /// The rendered `tools` array; this agent's last one is kept here so a request takes no
    /// process-wide lock.
    fn tools_json(&self, schemas: &Arc<Vec<Value>>) -> Bytes {
        let mut mine = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = mine.as_ref().filter(|r| r.of(schemas)) {
            return r.value.clone();
        }
        let json = rendered_tools(schemas);
        *mine = Some(RenderedTools::new(schemas, json.clone()));
        json
    }

    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    pub(crate) fn temperature(&self) -> Option<f64> {
        self.temperature
    }

    pub(crate) fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// See [`super::LlmClient::offer_rendered`].
    pub(crate) fn offer_rendered(&self, at: usize, messages: &[Message], json: Vec<WireJson>) {
        let mut rendered = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        rendered.offer(at, messages, json);
    }

    /// The request body, in the reference's key order; `extra_body` keys win. Written as
    /// serde_json's compact map would write it, with our keys as literals (they need no
    /// escape; serde's map path scanned each for one) and the rendered parts spliced as bytes.
    pub(crate) fn render_body(&self, req: &ChatRequest<'_>) -> RequestBody {
        let mut body = JsonObject::with_capacity(self.body_size_hint.load(Ordering::Relaxed));
        let extra = &self.extra_body;
        let own = |k: &str| !extra.contains_key(k);
        if own("model") {
            write_json(body.key("model"), &self.model);
        }
        if own("messages") {
            let mut rendered = self.messages.lock().unwrap_or_else(|e| e.into_inner());
            rendered.sync(
                (req.history, req.history_version),
                (req.transcript, req.transcript_version),
            );
            let system = self.system_message(req.system);
            body.key("messages").push(b'[');
            body.share(system);
            let out = body.out();
            rendered.write_into(req.history.iter().chain(req.transcript), out);
            if let Some(tail) = req.tail {
                out.push(b',');
                write_json(out, &UserWire(tail));
            }
            out.push(b']');
        }
        if own("stream") {
            body.key("stream").extend_from_slice(b"true");
        }
        if own("stream_options") {
            body.key("stream_options")
                .extend_from_slice(br#"{"include_usage":true}"#);
        }
        let temperature = self
            .temperature
            .filter(|_| !self.drop_temperature.load(Ordering::Relaxed));
        if let Some(t) = temperature.filter(|_| own("temperature")) {
            write_json(body.key("temperature"), &t);
        }
        if !req.tools.is_empty() {
            if own("tools") {
                body.key("tools");
                body.share(self.tools_json(req.tools));
            }
            if own("tool_choice") {
                body.key("tool_choice").extend_from_slice(br#""auto""#);
            }
        }
        let max_key = if self.use_max_completion_tokens.load(Ordering::Relaxed) {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        if own(max_key) {
            write_json(body.key(max_key), &self.max_tokens);
        }
        for (k, v) in extra {
            let out = body.escaped_key(k);
            write_json(out, v);
        }
        let (mut out, shared) = body.end();
        // Room for the next request's additions (one more exchange of history).
        self.body_size_hint
            .store(out.len() + out.len() / 4 + 1024, Ordering::Relaxed);
        // The body lives as long as the call; its unused room (a quarter of it and more) was
        // most of the scale run's memory per agent in flight. Shrinking is done in place.
        out.shrink_to_fit();
        RequestBody::spliced(out, shared)
    }

    /// The one-shot request repairs of spec §4.6: a server that rejects `max_tokens` in favour
    /// of `max_completion_tokens`, or rejects `temperature`, gets the body fixed once (and every
    /// later request of this client). Returns the repaired body, or `None` when no repair fits.
    pub(crate) fn repair(&self, e: &LlmError, body: &RequestBody) -> Option<RequestBody> {
        if !matches!(e.status, Some(400) | Some(422)) {
            return None;
        }
        let msg = e.message.to_ascii_lowercase();
        let mut v: Map<String, Value> = serde_json::from_slice(&body.to_bytes()).ok()?;
        if msg.contains("max_tokens")
            && msg.contains("max_completion_tokens")
            && !self.use_max_completion_tokens.swap(true, Ordering::Relaxed)
        {
            v = v
                .into_iter()
                .map(|(k, val)| {
                    if k == "max_tokens" {
                        ("max_completion_tokens".to_owned(), val)
                    } else {
                        (k, val)
                    }
                })
                .collect();
        } else if msg.contains("temperature")
            && [
                "unsupported",
                "not supported",
                "does not support",
                "deprecated",
            ]
            .iter()
            .any(|w| msg.contains(w))
            && v.contains_key("temperature")
            && !self.drop_temperature.swap(true, Ordering::Relaxed)
        {
            v.remove("temperature");
        } else {
            return None;
        }
        serde_json::to_vec(&v).ok().map(|b| Bytes::from(b).into())
    }

    /// The streaming-unsupported fallback of spec §4.6: a server whose refusal says it cannot
    /// stream gets this one request again without `stream` (its JSON answer is decoded as one
    /// chunk). Not latched: the body of the next call streams again.
    pub(crate) fn without_stream(&self, e: &LlmError, body: &RequestBody) -> Option<RequestBody> {
        const PHRASES: [&str; 5] = [
            "does not support streaming",
            "streaming is not supported",
            "streaming not supported",
            "stream=true is not supported",
            "stream is not supported",
        ];
        if e.retryable || e.status.is_none() || e.in_stream {
            return None;
        }
        let msg = e.message.to_ascii_lowercase();
        if !PHRASES.iter().any(|p| msg.contains(p)) {
            return None;
        }
        let mut v: Map<String, Value> = serde_json::from_slice(&body.to_bytes()).ok()?;
        v.remove("stream")?;
        v.remove("stream_options");
        serde_json::to_vec(&v).ok().map(|b| Bytes::from(b).into())
    }

    /// Sends the request; a non-2xx status becomes an [`LlmError`] carrying the server's message.
    pub(crate) async fn open(&self, body: RequestBody) -> Result<OpenAiStream, LlmError> {
        let sent = self
            .request_deadline
            .within(self.read_timeout, self.send(body));
        let resp = match sent.await {
            None => return Err(LlmError::timeout()),
            Some(r) => r?,
        };
        let status = resp.status();
        if status.is_redirection() {
            return Err(redirect_refused(&resp));
        }
        if !status.is_success() {
            let retry_after = resp
                .header("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(retry::parse_retry_after);
            let body = read_limited(resp, self.read_timeout).await;
            let (message, code, error_type) = parse_error_body(&body);
            let mut e = LlmError::status(
                status.as_u16(),
                message,
                code.as_deref(),
                error_type.as_deref(),
            );
            e.retry_after = retry_after;
            return Err(e);
        }
        let whole_json = resp
            .header("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/json"));
        Ok(OpenAiStream {
            whole_json,
            resp,
            buf: Bytes::new(),
            pos: 0,
            parser: SseParser::with_limit(self.max_event_bytes),
            max_event_bytes: self.max_event_bytes,
            max_response_bytes: self.max_response_bytes,
            read_timeout: self.read_timeout,
            deadline: Instant::now() + self.read_timeout,
            progressed: false,
            eof: false,
            last_text_chunk: LastTextChunk::default(),
        })
    }
}

impl OpenAiBackend {
    /// The request on the lane when it applies, else through reqwest.
    async fn send(&self, body: RequestBody) -> Result<Response, LlmError> {
        let http = match &self.transport {
            Transport::Lane(lane) => {
                return match lane.post(&self.headers, body).await {
                    Err(LaneError::ConnectTimeout) => Err(LlmError::timeout()),
                    Err(e) => Err(LlmError::connection(connection_message(&e))),
                    Ok(r) => Ok(Response::Lane(r)),
                }
            }
            Transport::Reqwest(http) => http,
        };
        let post = match &self.url {
            Endpoint::Parsed(u) => http.post(u.clone()),
            Endpoint::Unparsed(u) => http.post(u),
        };
        match post
            .headers(self.headers.clone())
            .body(body.to_bytes())
            .send()
            .await
        {
            Ok(r) => Ok(Response::Reqwest(r)),
            Err(e) if e.is_timeout() => Err(LlmError::timeout()),
            Err(e) => Err(LlmError::connection(connection_message(&e))),
        }
    }
}

/// Locations longer than this are cut in the error: the text reaches the host and the history.
const LOCATION_LIMIT: usize = 512;

/// The error for a 3xx answer: not followed (see [`agent_client`]) and not retried (the server
/// would answer the same). It names the status and the `Location`, so the fix is one edit.
fn redirect_refused(resp: &Response) -> LlmError {
    let status = resp.status().as_u16();
    // `to_str` admits visible ASCII only, so the cut below is on a character boundary.
    let message = match resp.header("location").and_then(|v| v.to_str().ok()) {
        Some(location) => {
            let location = match location.get(..LOCATION_LIMIT) {
                Some(head) if location.len() > LOCATION_LIMIT => format!("{head}…"),
                _ => location.to_owned(),
            };
            format!(
                "The endpoint redirected to {location} (HTTP {status}); redirects are not followed, the request carries the conversation and credentials: set llm.base_url to the final URL."
            )
        }
        None => format!(
            "The endpoint answered HTTP {status} without a readable Location; redirects are not followed, the request carries the conversation and credentials: set llm.base_url to the final URL."
        ),
    };
    let mut e = LlmError::status(status, message, None, None);
    e.retryable = false;
    e
}

/// "Connection error: " and the deepest source of `e` (`e` itself is the client's wrapper).
fn connection_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = String::from("Connection error.");
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg = format!("Connection error: {s}");
        src = s.source();
    }
    msg
}

async fn read_limited(mut resp: Response, timeout: Duration) -> Vec<u8> {
    let mut body = Vec::new();
    let deadline = Instant::now() + timeout;
    while body.len() < ERROR_BODY_LIMIT {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(c))) => body.extend_from_slice(&c),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    body
}

/// `(message, code, type)` from `{"error": {...}}`, `{"object":"error","message":…}`, or raw text.
fn parse_error_body(body: &[u8]) -> (String, Option<String>, Option<String>) {
    let text = String::from_utf8_lossy(body);
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => {
            let e = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
            let s = |k: &str| match e.get(k) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            let message = s("message")
                .or_else(|| v.get("error").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| text.trim().to_owned());
            (message, s("code"), s("type"))
        }
        Err(_) => (text.trim().chars().take(500).collect(), None, None),
    }
}

/// An in-stream error object, mapped to an HTTP status where the policy says so.
fn in_stream_error(e: &Value) -> LlmError {
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error in stream")
        .to_owned();
    let code = e.get("code");
    let error_type = e.get("type").and_then(Value::as_str);
    let status = match code {
        Some(Value::Number(n)) => n.as_u64().map(|n| n as u16),
        Some(Value::String(s)) if s == "server_error" => Some(500),
        Some(Value::String(s)) if s == "rate_limit_exceeded" => Some(429),
        Some(Value::String(s)) => s.parse::<u16>().ok(),
        _ if error_type == Some("server_error") => Some(500),
        _ => None,
    };
    match status {
        Some(s) => LlmError::status(s, message, code.and_then(Value::as_str), error_type),
        None => LlmError::api(message),
    }
    .in_stream()
}

/// The body of one attempt, read event by event.
pub(crate) struct OpenAiStream {
    /// The server answered with one JSON document instead of a stream (a non-streaming
    /// completion, or an error object with status 200): decoded as one chunk.
    whole_json: bool,
    resp: Response,
    buf: Bytes,
    pos: usize,
    parser: SseParser,
    max_event_bytes: usize,
    max_response_bytes: usize,
    read_timeout: Duration,
    /// Reset by progress only (text, reasoning or tool-call bytes): keep-alive comments and
    /// empty deltas do not hide a stalled stream.
    deadline: Instant,
    /// Progress since the deadline was last reset: it is reset when the buffered events are
    /// used up and the network is read next, not on every delta (a clock read was ~3 % of a
    /// delta's instructions and ~20 ns of its ~250).
    progressed: bool,
    eof: bool,
    last_text_chunk: LastTextChunk,
}

/// A response the limits refuse: not retried (the server would send the same again).
fn too_large(message: String) -> LlmError {
    LlmError::api(message)
}

impl OpenAiStream {
    fn event_too_large(&self) -> LlmError {
        too_large(format!(
            "The model server sent a line or event larger than llm.max_event_bytes ({} bytes); the response was abandoned.",
            self.max_event_bytes
        ))
    }

    /// Decodes the ready event: `Ok(false)` at `[DONE]`. Progress restarts the idle timer;
    /// a response past its size bound is abandoned.
    fn decode_ready(&mut self, asm: &mut Assembler) -> Result<bool, LlmError> {
        let before = asm.received();
        let decoded = decode_event_by(
            self.parser.data(),
            asm,
            DecodePath::Auto,
            &mut self.last_text_chunk,
        );
        self.after_decoded(asm, before, decoded)
    }

    fn after_decoded(
        &mut self,
        asm: &Assembler,
        before: usize,
        decoded: Result<Decoded, LlmError>,
    ) -> Result<bool, LlmError> {
        let decoded = decoded?;
        self.after_event(asm, before)?;
        Ok(!matches!(decoded, Decoded::Done))
    }

    fn after_event(&mut self, asm: &Assembler, before: usize) -> Result<(), LlmError> {
        self.progressed |= asm.received() > before;
        if let Some(e) = asm.call_bound_error() {
            return Err(e);
        }
        if asm.received() > self.max_response_bytes {
            return Err(too_large(format!(
                "The model server's response exceeded llm.max_response_bytes ({} bytes of text, reasoning and tool calls); the response was abandoned.",
                self.max_response_bytes
            )));
        }
        Ok(())
    }

    /// The next data event from what is already buffered, without waiting; `None` when the
    /// network must be read (the idle timer restarts then, if the events since brought progress).
    pub(crate) fn try_ready(&mut self, asm: &mut Assembler) -> Option<Result<bool, LlmError>> {
        if self.whole_json {
            return None;
        }
        while self.pos < self.buf.len() {
            let input = &self.buf[self.pos..];
            if let Some((n, chunk)) = read_framed(&mut self.parser, &self.last_text_chunk, input) {
                let before = asm.received();
                chunk.apply(asm);
                self.pos += n;
                return Some(self.after_decoded(asm, before, Ok(Decoded::Fast)));
            }
            let (n, data) = self.parser.next_event(&self.buf[self.pos..]);
            self.pos += n;
            if let Some(data) = data {
                let before = asm.received();
                let decoded =
                    decode_event_by(data, asm, DecodePath::Auto, &mut self.last_text_chunk);
                return Some(self.after_decoded(asm, before, decoded));
            }
            if self.parser.overflowed() {
                return Some(Err(self.event_too_large()));
            }
        }
        if std::mem::take(&mut self.progressed) {
            self.deadline = Instant::now() + self.read_timeout;
        }
        None
    }

    /// Processes the next data event into `asm`. `Ok(false)`: the stream is over.
    pub(crate) async fn next(&mut self, asm: &mut Assembler) -> Result<bool, LlmError> {
        if self.whole_json {
            if self.eof {
                return Ok(false);
            }
            self.eof = true;
            let mut body = Vec::new();
            loop {
                match tokio::time::timeout_at(self.deadline, self.resp.chunk()).await {
                    Err(_) => return Err(LlmError::timeout()),
                    Ok(Ok(Some(b))) => {
                        if body.len() + b.len() > self.max_event_bytes {
                            return Err(too_large(format!(
                                "The model server's JSON response is larger than llm.max_event_bytes ({} bytes); the response was abandoned.",
                                self.max_event_bytes
                            )));
                        }
                        body.extend_from_slice(&b);
                    }
                    Ok(Ok(None)) => break,
                    Ok(Err(e)) => return Err(LlmError::connection(connection_message(&e))),
                }
            }
            let before = asm.received();
            decode_event(&body, asm)?;
            self.after_event(asm, before)?;
            return Ok(true);
        }
        loop {
            if let Some(r) = self.try_ready(asm) {
                return r;
            }
            if self.eof {
                if self.parser.finish() {
                    return self.decode_ready(asm);
                }
                return Ok(false);
            }
            match tokio::time::timeout_at(self.deadline, self.resp.chunk()).await {
                Err(_) => return Err(LlmError::timeout()),
                Ok(Ok(Some(b))) => {
                    self.buf = b;
                    self.pos = 0;
                }
                Ok(Ok(None)) => self.eof = true,
                Ok(Err(e)) => {
                    return Err(LlmError::connection(format!(
                        "Connection dropped while reading the response body: {}",
                        connection_message(&e)
                    )))
                }
            }
        }
    }
}

enum Decoded {
    Chunk,
    /// A chunk the fast path read.
    Fast,
    Done,
}

fn decode_event(data: &[u8], asm: &mut Assembler) -> Result<Decoded, LlmError> {
    decode_event_by(data, asm, DecodePath::Auto, &mut LastTextChunk::default())
}

fn decode_event_by(
    data: &[u8],
    asm: &mut Assembler,
    path: DecodePath,
    last: &mut LastTextChunk,
) -> Result<Decoded, LlmError> {
    let trimmed = data.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(Decoded::Done);
    }
    if path == DecodePath::Auto {
        if let Some(chunk) = last.read(trimmed) {
            chunk.apply(asm);
            return Ok(Decoded::Fast);
        }
    }
    // The event is checked for UTF-8 once (the standard library's ASCII fast path) rather than
    // each of its ~15 strings by the parser: that was a fifth of a delta's instructions. Not
    // UTF-8: parsed from bytes as before, so it fails where it always did.
    let text = std::str::from_utf8(trimmed).ok();
    if let (DecodePath::Auto | DecodePath::NoMemo, Some(text)) = (path, text) {
        // Before the text scanner, which would read a tool-call chunk up to its calls in vain.
        if let Some(chunk) = tool_chunk(text) {
            chunk.apply(asm);
            return Ok(Decoded::Fast);
        }
        if let Some(chunk) = text_chunk(text) {
            chunk.apply(asm);
            last.remember(text, &chunk);
            return Ok(Decoded::Fast);
        }
    }
    let mut error = None;
    let seed = ChunkSeed {
        asm,
        error: &mut error,
    };
    let parsed = match text {
        Some(text) => seed.deserialize(&mut serde_json::Deserializer::from_str(text)),
        None => seed.deserialize(&mut serde_json::Deserializer::from_slice(trimmed)),
    };
    // A line that is not a chunk is skipped: one garbled keep-alive must not end a good stream.
    if parsed.is_err() {
        return Ok(Decoded::Chunk);
    }
    match error {
        Some(e) => Err(e),
        None => Ok(Decoded::Chunk),
    }
}

struct ChunkSeed<'a> {
    asm: &'a mut Assembler,
    error: &'a mut Option<LlmError>,
}

impl<'de> DeserializeSeed<'de> for ChunkSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChunkSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chat.completion.chunk object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut object_error = false;
        let mut message: Option<String> = None;
        let mut code: Option<Value> = None;
        let mut error_type: Option<Value> = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.as_ref() {
                "choices" => map.next_value_seed(ChoicesSeed(self.asm))?,
                "usage" => {
                    if let Some(u) = map.next_value::<Option<Value>>()? {
                        if u.is_object() {
                            self.asm.usage(Usage::from_openai(&u));
                        }
                    }
                }
                "model" => {
                    if let Some(m) = map.next_value::<Option<Str<'de>>>()? {
                        self.asm.model(&m);
                    }
                }
                "error" => {
                    let e = map.next_value::<Value>()?;
                    if !e.is_null() {
                        let obj = if e.is_object() {
                            e
                        } else {
                            serde_json::json!({"message": e.as_str().unwrap_or("error in stream")})
                        };
                        *self.error = Some(in_stream_error(&obj));
                    }
                }
                "object" => {
                    object_error =
                        map.next_value::<Option<Str<'de>>>()?.as_deref() == Some("error");
                }
                "message" => {
                    message = map.next_value::<Option<String>>().ok().flatten();
                }
                "code" => code = Some(map.next_value::<Value>()?),
                "type" => error_type = Some(map.next_value::<Value>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if object_error && self.error.is_none() {
            let msg = message.unwrap_or_else(|| "error in stream".into());
            *self.error = Some(in_stream_error(
                &serde_json::json!({"message": msg, "code": code, "type": error_type}),
            ));
        }
        Ok(())
    }
}

/// A key or short string value, borrowed from the chunk when it has no escapes. (serde's own
/// `Cow<str>` always deserializes owned: that was one allocation per key, ~10 per delta.)
struct Str<'de>(Cow<'de, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Str<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

struct ChoicesSeed<'a>(&'a mut Assembler);

impl<'de> DeserializeSeed<'de> for ChoicesSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ChoicesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of choices or null")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(MapSeed(&mut *self.0, Level::Choice))?
            .is_some()
        {}
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Level {
    Choice,
    Delta,
}

struct MapSeed<'a>(&'a mut Assembler, Level);

impl<'de> DeserializeSeed<'de> for MapSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MapSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let asm = self.0;
        let mut saw_reasoning_content = false;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match (self.1, key.as_ref()) {
                (Level::Choice, "delta") | (Level::Choice, "message") => {
                    map.next_value_seed(MapSeed(&mut *asm, Level::Delta))?
                }
                (Level::Choice, "finish_reason") => {
                    if let Some(r) = map.next_value::<Option<Str<'de>>>()? {
                        asm.finish_reason(&r);
                    }
                }
                (Level::Delta, "content") => map.next_value_seed(TextSeed(&mut *asm, false))?,
                (Level::Delta, "reasoning_content") => {
                    saw_reasoning_content = true;
                    map.next_value_seed(TextSeed(&mut *asm, true))?
                }
                (Level::Delta, "reasoning") if !saw_reasoning_content => {
                    map.next_value_seed(TextSeed(&mut *asm, true))?
                }
                (Level::Delta, "tool_calls") => {
                    for call in map
                        .next_value::<Option<Vec<ToolCallDelta<'de>>>>()?
                        .unwrap_or_default()
                    {
                        let f = call.function.as_ref();
                        let args = f.and_then(|f| f.arguments.as_ref()).map(|a| match a {
                            Value::String(s) => Cow::Borrowed(s.as_str()),
                            Value::Null => Cow::Borrowed(""),
                            other => Cow::Owned(other.to_string()),
                        });
                        let id = call.id.as_deref().or(f.and_then(|f| f.id.as_deref()));
                        asm.tool_delta(
                            call.index,
                            id,
                            f.and_then(|f| f.name.as_deref()),
                            args.as_deref(),
                        );
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    arguments: Option<Value>,
    // Old llama.cpp put the call id here.
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
}

/// Writes a string value straight into the assembler (text or reasoning); null is nothing.
struct TextSeed<'a>(&'a mut Assembler, bool);

impl<'de> DeserializeSeed<'de> for TextSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or null")
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        if self.1 {
            self.0.reasoning(s);
        } else {
            self.0.text(s);
        }
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A JSON object written as serde_json's compact formatter writes a map: `{`, entries
/// separated by `,`, `}`.
struct JsonObject {
    out: Vec<u8>,
    entries: usize,
    /// Rendered parts to insert at offsets of `out` instead of copying them in.
    shared: Vec<(usize, Bytes)>,
}

impl JsonObject {
    fn with_capacity(n: usize) -> Self {
        let mut out = Vec::with_capacity(n);
        out.push(b'{');
        JsonObject {
            out,
            entries: 0,
            shared: Vec::new(),
        }
    }

    fn separate(&mut self) {
        if self.entries > 0 {
            self.out.push(b',');
        }
        self.entries += 1;
    }

    /// `"key":` for one of our keys (plain ASCII, nothing to escape); the value is written to
    /// the returned buffer.
    fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        debug_assert!(!key.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
        self.separate();
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        &mut self.out
    }

    /// `"key":` for a key from the config, escaped.
    fn escaped_key(&mut self, key: &str) -> &mut Vec<u8> {
        self.separate();
        write_json(&mut self.out, key);
        self.out.push(b':');
        &mut self.out
    }

    /// Where the next bytes of a value go.
    fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// `json` comes next, as its own piece of the body.
    fn share(&mut self, json: Bytes) {
        self.shared.push((self.out.len(), json));
    }

    fn end(mut self) -> (Vec<u8>, Vec<(usize, Bytes)>) {
        self.out.push(b'}');
        (self.out, self.shared)
    }
}

/// `v` as compact JSON, appended to `out`.
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    serde_json::to_writer(out, v).expect("serializing JSON values into a Vec cannot fail");
}

/// The chunk decoder applied to a sequence of SSE data payloads, as one attempt reads them:
/// stops at `[DONE]` or at the first in-stream error. Only for the fuzz targets in `fuzz/`,
/// which cannot reach the private decoder otherwise.
#[doc(hidden)]
pub fn decode_events_for_fuzzing<'a>(
    events: impl IntoIterator<Item = &'a [u8]>,
) -> (super::LlmResponse, Option<LlmError>) {
    let mut asm = Assembler::default();
    let mut error = None;
    let mut last = LastTextChunk::default();
    for data in events {
        match decode_event_by(data, &mut asm, DecodePath::Auto, &mut last) {
            Ok(Decoded::Chunk | Decoded::Fast) => {}
            Ok(Decoded::Done) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    (asm.finish(), error)
}

/// Which decoder [`decode_event_for_fuzzing`] uses.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodePath {
    /// As the library decodes: the fast path for plain text chunks, the general decoder else.
    Auto,
    /// As `Auto`, without the remembered last text chunk (`LastTextChunk`).
    NoMemo,
    /// The general decoder for every event.
    GeneralOnly,
}

/// One event decoded into a fresh assembler, for `tests/delta.rs` and the fuzz target, which
/// check that both paths agree.
#[doc(hidden)]
#[derive(Debug, PartialEq, Eq)]
pub struct DecodedEvent {
    /// The fast path read it.
    pub fast: bool,
    /// `[DONE]`.
    pub done: bool,
    /// The assembler's whole state afterwards (`Debug`).
    pub assembler: String,
    /// The in-stream error (`Debug`).
    pub error: Option<String>,
}

#[doc(hidden)]
pub fn decode_event_for_fuzzing(data: &[u8], path: DecodePath) -> DecodedEvent {
    decode_event_after_for_fuzzing(&[], data, path)
}

/// As [`decode_event_for_fuzzing`], after `previous` was decoded the same way (what the decoder
/// remembers of it is used for `data`; its effect on the assembler is not kept).
#[doc(hidden)]
pub fn decode_event_after_for_fuzzing(
    previous: &[u8],
    data: &[u8],
    path: DecodePath,
) -> DecodedEvent {
    let mut last = LastTextChunk::default();
    let _ = decode_event_by(previous, &mut Assembler::default(), path, &mut last);
    let mut asm = Assembler::default();
    let decoded = decode_event_by(data, &mut asm, path, &mut last);
    DecodedEvent {
        fast: matches!(decoded, Ok(Decoded::Fast)),
        done: matches!(decoded, Ok(Decoded::Done)),
        assembler: format!("{asm:?}"),
        error: decoded.err().map(|e| format!("{e:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, MessagesVersion};

    /// Buffered events read as `try_ready` reads them (the remembered chunk's framed read
    /// first, then the parser's whole-event path and the decoder) leave the assembler as the
    /// general parser and the general decoder leave it, however the body is cut into reads.
    #[test]
    fn the_framed_read_decodes_as_the_parser_and_the_decoder() {
        let frame = |model: &str, content: &str, finish: &str| {
            format!(
                r#"{{"id":"c-1","object":"chat.completion.chunk","created":1,"model":"{model}","choices":[{{"index":0,"delta":{{"content":{content}}},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}"#
            )
        };
        let contents = [
            r#""abcd""#,
            r#""""#,
            r#""a\nb\"c\\""#,
            r#""\ud83d\ude00 é""#,
            r#""\ud800""#,
            "\"a\u{1}\"",
            "\"a\\\nb\"",
            "null",
            r#""a","x":"y""#,
            r#""xyz""#,
        ];
        let mut bodies = Vec::new();
        for (prefix, end) in [
            ("data: ", "\n"),
            ("data:", "\r\n"),
            ("data: ", "\r"),
            ("data:  ", "\n"),
        ] {
            let mut body = String::new();
            let event = |body: &mut String, data: &str| {
                body.push_str(prefix);
                body.push_str(data);
                body.push_str(end);
                body.push_str(end);
            };
            for (i, content) in contents.iter().cycle().take(30).enumerate() {
                let model = if i == 17 { "n" } else { "m" };
                // The bytes after the content differ, at the same length.
                let finish = if i == 21 { r#""ab""# } else { "null" };
                event(&mut body, &frame(model, content, finish));
                if i == 9 {
                    body.push_str(&format!(": keep-alive{end}"));
                }
                if i == 12 {
                    // One chunk over two data lines: the remembered sides then hold an LF.
                    let f = frame("m", r#""ab""#, "null");
                    let (a, b) = f.split_at(20);
                    body.push_str(&format!("data: {a}{end}data: {b}{end}{end}"));
                }
            }
            for _ in 0..20 {
                event(&mut body, &frame("m", r#""plain""#, "null"));
            }
            event(&mut body, &frame("m", r#""end""#, r#""stop""#));
            event(
                &mut body,
                r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
            );
            event(&mut body, "[DONE]");
            bodies.push(body);
        }
        let mut framed = 0;
        for body in &bodies {
            let body = body.as_bytes();
            for cut in [body.len(), 1, 7, 64, 333] {
                for limit in [1 << 20, 240] {
                    // The assembler after each event, both ways.
                    let (mut states, mut general_states) = (Vec::new(), Vec::new());
                    let mut asm = Assembler::default();
                    let (mut p, mut last) =
                        (SseParser::with_limit(limit), LastTextChunk::default());
                    for part in body.chunks(cut) {
                        let mut pos = 0;
                        while pos < part.len() && !p.overflowed() {
                            let input = &part[pos..];
                            if let Some((n, chunk)) = read_framed(&mut p, &last, input) {
                                chunk.apply(&mut asm);
                                pos += n;
                                framed += 1;
                                states.push(format!("{asm:?}"));
                                continue;
                            }
                            let (n, data) = p.next_event(input);
                            pos += n;
                            if let Some(d) = data {
                                let _ = decode_event_by(d, &mut asm, DecodePath::Auto, &mut last);
                                states.push(format!("{asm:?}"));
                            }
                        }
                    }
                    if p.finish() {
                        let _ = decode_event_by(p.data(), &mut asm, DecodePath::Auto, &mut last);
                    }
                    let mut general = Assembler::default();
                    let mut q = SseParser::with_limit(limit);
                    let mut no_memo = LastTextChunk::default();
                    let mut pos = 0;
                    while pos < body.len() && !q.overflowed() {
                        let (n, ready) = q.advance(&body[pos..]);
                        pos += n;
                        if ready {
                            let _ = decode_event_by(
                                q.data(),
                                &mut general,
                                DecodePath::GeneralOnly,
                                &mut no_memo,
                            );
                            general_states.push(format!("{general:?}"));
                        }
                    }
                    if q.finish() {
                        let _ = decode_event_by(
                            q.data(),
                            &mut general,
                            DecodePath::GeneralOnly,
                            &mut no_memo,
                        );
                    }
                    assert_eq!(p.overflowed(), q.overflowed(), "cut {cut}, limit {limit}");
                    assert_eq!(states, general_states, "cut {cut}, limit {limit}");
                    assert_eq!(
                        format!("{asm:?}"),
                        format!("{general:?}"),
                        "cut {cut}, limit {limit}: {}",
                        String::from_utf8_lossy(body)
                    );
                }
            }
        }
        // Most of the adversarial contents above go to the general path; the plain run does not.
        assert!(framed > 60, "{framed} events took the framed read");
    }

    fn feed(lines: &[&str]) -> (Assembler, Option<LlmError>) {
        let mut asm = Assembler::default();
        for l in lines {
            if let Err(e) = decode_event(l.as_bytes(), &mut asm) {
                return (asm, Some(e));
            }
        }
        (asm, None)
    }

    /// The body as it was rendered before its static parts were cached (issue 12): one
    /// `serde_json` map in the reference's key order, `extra_body` keys appended and winning.
    fn reference_body(b: &OpenAiBackend, req: &ChatRequest<'_>) -> Vec<u8> {
        let extra = &b.extra_body;
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            if !extra.contains_key(k) {
                m.insert(k.to_owned(), v);
            }
        };
        let mut messages = vec![serde_json::json!({"role": "system", "content": req.system})];
        messages.extend(
            req.history
                .iter()
                .chain(req.transcript)
                .map(|m| serde_json::to_value(m).unwrap()),
        );
        if let Some(t) = req.tail {
            messages.push(serde_json::json!({"role": "user", "content": t}));
        }
        put("model", Value::from(b.model.as_str()));
        put("messages", Value::Array(messages));
        put("stream", Value::Bool(true));
        put("stream_options", serde_json::json!({"include_usage": true}));
        if let Some(t) = b
            .temperature
            .filter(|_| !b.drop_temperature.load(Ordering::Relaxed))
        {
            put("temperature", Value::from(t));
        }
        if !req.tools.is_empty() {
            put("tools", Value::Array(req.tools.to_vec()));
            put("tool_choice", Value::from("auto"));
        }
        if b.use_max_completion_tokens.load(Ordering::Relaxed) {
            put("max_completion_tokens", Value::from(b.max_tokens));
        } else {
            put("max_tokens", Value::from(b.max_tokens));
        }
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
        serde_json::to_vec(&Value::Object(m)).unwrap()
    }

    fn backend(llm: Value) -> (OpenAiBackend, Arc<Vec<Value>>) {
        let mut llm = llm;
        let o = llm.as_object_mut().unwrap();
        o.insert("provider".into(), "openai".into());
        o.insert("base_url".into(), "http://127.0.0.1:9/v1".into());
        o.insert("api_key".into(), "k".into());
        let config = crate::config::AgentConfig::from_json(
            &serde_json::json!({"working_directory": std::env::temp_dir(), "llm": llm}).to_string(),
        )
        .map_err(|e| e.0)
        .unwrap();
        let crate::config::LlmConfig::OpenAi(c) = &config.llm else {
            panic!("an openai config")
        };
        let tools = crate::tools::ToolRegistry::builtin(&config.tools).unwrap();
        (OpenAiBackend::new(c).unwrap(), tools.schemas())
    }

    /// Every request of the recorded reference transcripts (their message lists as history),
    /// under several configs, with and without tools, across cache hits and changes of the
    /// system prompt and the tool list: the spliced body is byte for byte the old rendering.
    #[test]
    fn body_is_the_old_rendering_for_the_transcripts() {
        let mut histories = Vec::new();
        for t in crate::llm::script::conformance_transcripts() {
            for r in t["turns"][0]["requests"].as_array().unwrap() {
                let messages = r["messages"].as_array().unwrap();
                assert_eq!(messages[0]["role"], "system");
                let typed: Vec<Message> = messages[1..]
                    .iter()
                    .map(|m| Message::from_host(m.as_object().unwrap().clone()))
                    .collect();
                histories.push(typed);
            }
        }
        // The ten transcripts hold 19 requests.
        assert!(histories.len() >= 19, "{} requests", histories.len());

        let configs = [
            serde_json::json!({"model": "mock-model"}),
            serde_json::json!({"model": "m\u{e9}\"q\"", "temperature": 0.2, "max_tokens": 77}),
            serde_json::json!({"model": "m", "temperature": 1.0,
                "extra_body": {"top_p": 0.5, "stream": false, "tools": [], "seed": 7,
                    "stream_options": null, "k\"\u{1}\u{e9}y": "v\n"}}),
            serde_json::json!({"model": "m", "extra_body": {"messages": [], "model": "x",
                "tool_choice": "none", "max_tokens": 1}}),
        ];
        let systems = [
            "You are a test.",
            "You are a tesT.",
            "Quotes \" and \\ and\nnew lines, \u{1} control, </script>, \u{2028}, caf\u{e9} \u{1f600}",
        ];
        let mut compared = 0;
        for (n, llm) in configs.iter().enumerate() {
            let (b, schemas) = backend(llm.clone());
            let fewer = Arc::new(schemas[..3].to_vec());
            let none = Arc::new(Vec::new());
            if n == 1 {
                // The latched repairs of spec §4.6.
                b.drop_temperature.store(true, Ordering::Relaxed);
                b.use_max_completion_tokens.store(true, Ordering::Relaxed);
            }
            for history in &histories {
                for system in systems {
                    for tools in [&schemas, &fewer, &none, &schemas] {
                        for tail in [None, Some("volatile \"tail\"")] {
                            // The turn's own messages follow the history in the body.
                            let (history, transcript) = history.split_at(history.len() / 2);
                            let req = ChatRequest {
                                system,
                                history,
                                history_version: MessagesVersion::unknown(),
                                transcript_version: MessagesVersion::unknown(),
                                transcript,
                                tail,
                                tools,
                            };
                            let new = b.render_body(&req).to_bytes();
                            assert_eq!(
                                std::str::from_utf8(&new).unwrap(),
                                std::str::from_utf8(&reference_body(&b, &req)).unwrap(),
                                "config {llm}"
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared >= 4 * 19 * 3 * 4 * 2, "{compared} bodies compared");
    }

    /// Each message's rendering is kept between requests: a message edited in place (same
    /// length), inserted before others or replaced is sent as it is now.
    #[test]
    fn an_edited_history_is_sent_as_edited() {
        use crate::llm::message::ToolAnswer;
        let (b, schemas) = backend(serde_json::json!({"model": "m"}));
        let check = |history: &[Message], transcript: &[Message]| {
            let req = ChatRequest {
                system: "s",
                history,
                history_version: MessagesVersion::unknown(),
                transcript_version: MessagesVersion::unknown(),
                transcript,
                tail: Some("t"),
                tools: &schemas,
            };
            assert_eq!(
                std::str::from_utf8(&b.render_body(&req).to_bytes()).unwrap(),
                std::str::from_utf8(&reference_body(&b, &req)).unwrap()
            );
        };
        let mut history = vec![
            Message::User("one".into()),
            Message::Tool(ToolAnswer::new("c", "read_file", "abc")),
            Message::assistant_text("two"),
        ];
        let turn = vec![Message::User("three".into())];
        check(&history, &turn);
        check(&history, &turn);
        let Message::Tool(t) = &mut history[1] else {
            unreachable!()
        };
        t.content = "xyz".into();
        check(&history, &turn);
        history.insert(0, Message::User("zero".into()));
        check(&history, &turn);
        check(&history[2..], &[]);
    }

    #[test]
    fn decodes_text_reasoning_tools_usage() {
        let (asm, err) = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}],"usage":null}"#,
            r#"{"choices":[{"delta":{"content":"Hi \"there\"","reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"x","arguments":{"k":2}}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
            r#"{"choices":null,"usage":null}"#,
            r#"{"id":"x"}"#,
        ]);
        assert!(err.is_none());
        let r = asm.finish();
        assert_eq!(r.content, "Hi \"there\"");
        assert_eq!(r.reasoning, "think");
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].raw_arguments, "{\"a\":1}");
        assert_eq!(r.tool_calls[1].raw_arguments, "{\"k\":2}");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        let u = r.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.cache_read_tokens, u.reasoning_tokens),
            (5, 2, 1)
        );
    }

    /// Checking the whole event for UTF-8 first changes nothing: every event decodes as the
    /// byte parser alone decoded it, valid or not, whatever the invalid byte's place.
    #[test]
    fn events_decode_as_the_byte_parser_decoded_them() {
        fn as_before(events: &[&[u8]]) -> (String, String, Option<String>) {
            let mut asm = Assembler::default();
            let mut error = None;
            for data in events {
                let mut de = serde_json::Deserializer::from_slice(data.trim_ascii());
                let seed = ChunkSeed {
                    asm: &mut asm,
                    error: &mut error,
                };
                let _ = seed.deserialize(&mut de);
            }
            let r = asm.finish();
            (r.content, r.reasoning, error.map(|e| e.message))
        }
        fn now(events: &[&[u8]]) -> (String, String, Option<String>) {
            let mut asm = Assembler::default();
            let mut error = None;
            for data in events {
                if let Err(e) = decode_event(data, &mut asm) {
                    error = Some(e.message);
                }
            }
            let r = asm.finish();
            (r.content, r.reasoning, error)
        }
        let cases: [&[&[u8]]; 4] = [
            &[
                b"{\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}",
                b"{\"choices\":[{\"delta\":{\"content\":\"ok\"}}],\"id\":\"\xff\"}",
                b"{\"choices\":[{\"delta\":{\"content\":\"!\"}}]} ",
            ],
            &[
                b"{\"choices\":[{\"delta\":{\"reasoning_content\":\"r\",\"\xfe\":1,\"content\":\"c\"}}]}",
                "{\"choices\":[{\"delta\":{\"content\":\"caf\u{e9} \\u00e9 \u{1f600}\"}}]}".as_bytes(),
            ],
            &[b"{\"error\":{\"message\":\"bad \xff\",\"code\":500}}"],
            &[b"{\"error\":{\"message\":\"bad \\\" x\",\"code\":500}}"],
        ];
        for events in cases {
            assert_eq!(now(events), as_before(events), "{events:?}");
        }
        assert_eq!(now(cases[1]).0, "caf\u{e9} \u{e9} \u{1f600}");
    }

    #[test]
    fn errors_inside_a_200_stream() {
        let (_, e) = feed(&[
            r#"{"error":{"message":"overloaded","type":"server_error","code":"server_error"}}"#,
        ]);
        let e = e.unwrap();
        assert_eq!(e.status, Some(500));
        assert!(e.retryable);
        let (_, e) = feed(&[r#"{"object":"error","message":"bad things","code":400}"#]);
        let e = e.unwrap();
        assert!(e.message.contains("bad things"));
        let (_, e) = feed(&[r#"{"error":{"message":"nope","code":"invalid_request"}}"#]);
        assert!(!e.unwrap().retryable);
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let (asm, err) = feed(&["{not json", r#"{"choices":[{"delta":{"content":"ok"}}]}"#]);
        assert!(err.is_none());
        assert_eq!(asm.finish().content, "ok");
    }

    #[test]
    fn error_body_shapes() {
        let (m, c, t) = parse_error_body(br#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#);
        assert_eq!(
            (m.as_str(), c.as_deref(), t.as_deref()),
            (
                "quota",
                Some("insufficient_quota"),
                Some("insufficient_quota")
            )
        );
        let (m, _, _) = parse_error_body(b"Bad Gateway");
        assert_eq!(m, "Bad Gateway");
    }
}
