//! The HTTP exchange of one attempt: the request on the lean lane or reqwest, a refused
//! redirect or an error status turned into an [`LlmError`], and the body read event by event.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::time::Instant;

use super::decode::{decode_event, decode_event_by, DecodePath, Decoded};
use super::OpenAiBackend;
use crate::llm::assembly::Assembler;
use crate::llm::http_lane::Response;
use crate::llm::request_body::RequestBody;
use crate::llm::sse::SseParser;
use crate::llm::text_chunk::{read_framed, LastTextChunk};
use crate::llm::{retry, LlmError};

/// Bodies of failed responses are read up to this size for their error message.
pub(super) const ERROR_BODY_LIMIT: usize = 64 * 1024;
impl OpenAiBackend {
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
            let retry_after = retry_after(&resp);
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
    /// The request on the agent's model client (the lean lane or reqwest): its future itself,
    /// not one more state machine around it.
    pub(super) fn send(
        &self,
        body: RequestBody,
    ) -> impl std::future::Future<Output = Result<Response, LlmError>> + '_ {
        self.http.post(body)
    }
}

/// Locations longer than this are cut in the error: the text reaches the host and the history.
pub(super) const LOCATION_LIMIT: usize = 512;

/// The server's `retry-after` on a refused request, as the retry policy reads it.
pub(crate) fn retry_after(resp: &Response) -> Option<Duration> {
    resp.header("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(retry::parse_retry_after)
}

/// The error for a 3xx answer: not followed (see [`crate::llm::model_http::agent_client`]) and not retried (the server
/// would answer the same). It names the status and the `Location`, so the fix is one edit.
pub(crate) fn redirect_refused(resp: &Response) -> LlmError {
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

/// The next piece of a response's body before `deadline` (`None` at its end).
pub(crate) async fn next_body_chunk(
    resp: &mut Response,
    deadline: Instant,
) -> Result<Option<Bytes>, LlmError> {
    match tokio::time::timeout_at(deadline, resp.chunk()).await {
        Err(_) => Err(LlmError::timeout()),
        Ok(Ok(chunk)) => Ok(chunk),
        Ok(Err(e)) => Err(LlmError::connection(format!(
            "Connection dropped while reading the response body: {}",
            connection_message(&e)
        ))),
    }
}

/// "Connection error: " and the deepest source of `e` (`e` itself is the client's wrapper).
pub(crate) fn connection_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = String::from("Connection error.");
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg = format!("Connection error: {s}");
        src = s.source();
    }
    msg
}

pub(crate) async fn read_limited(mut resp: Response, timeout: Duration) -> Vec<u8> {
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
pub(crate) fn parse_error_body(body: &[u8]) -> (String, Option<String>, Option<String>) {
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
pub(super) fn too_large(message: String) -> LlmError {
    LlmError::api(message)
}

impl OpenAiStream {
    pub(super) fn event_too_large(&self) -> LlmError {
        too_large(format!(
            "The model server sent a line or event larger than llm.max_event_bytes ({} bytes); the response was abandoned.",
            self.max_event_bytes
        ))
    }

    /// Decodes the ready event: `Ok(false)` at `[DONE]`. Progress restarts the idle timer;
    /// a response past its size bound is abandoned.
    pub(super) fn decode_ready(&mut self, asm: &mut Assembler) -> Result<bool, LlmError> {
        let before = asm.received();
        let decoded = decode_event_by(
            self.parser.data(),
            asm,
            DecodePath::Auto,
            &mut self.last_text_chunk,
        );
        self.after_decoded(asm, before, decoded)
    }

    pub(super) fn after_decoded(
        &mut self,
        asm: &Assembler,
        before: usize,
        decoded: Result<Decoded, LlmError>,
    ) -> Result<bool, LlmError> {
        let decoded = decoded?;
        self.after_event(asm, before)?;
        Ok(!matches!(decoded, Decoded::Done))
    }

    pub(super) fn after_event(&mut self, asm: &Assembler, before: usize) -> Result<(), LlmError> {
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
            // `read_framed` leaves `asm` alone when it does not read the event.
            let before = asm.received();
            if let Some(n) = read_framed(&mut self.parser, &self.last_text_chunk, input, asm) {
                self.pos += n;
                return Some(self.after_decoded(asm, before, Ok(Decoded::Fast)));
            }
            let (n, data) = self.parser.next_event(&self.buf[self.pos..]);
            self.pos += n;
            if let Some(data) = data {
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
