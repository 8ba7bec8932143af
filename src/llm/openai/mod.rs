//! OpenAI chat completions over SSE: request rendering, the HTTP exchange, and chunk decoding.
//!
//! A plain text chunk is read by the scanner of `text_chunk.rs`, a chunk of tool-call deltas by
//! `tool_chunk.rs`; every other chunk is decoded
//! with serde visitors that write straight into the [`Assembler`]. Either way a text delta is
//! copied once from the network buffer and nothing is allocated for it (no `Vec` of choices,
//! no owned strings). Every quirk of `openai-wire-and-quirks.md` §4 is tolerated here:
//! null, empty or missing `choices`, usage-only chunks, errors inside a 200 stream in both
//! shapes, `reasoning_content` or `reasoning`, arguments as a string or an object.
//!
//! The module is cut by concept: [`request`] renders the body, [`http`] sends it and reads the
//! answer event by event, [`decode`] turns each event into assembler calls.

mod decode;
pub(crate) mod http;
mod request;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{Map, Value};

use crate::llm::config::OpenAiConfig;
use crate::llm::model_http::ModelHttp;
use crate::llm::request_deadline::RequestDeadline;
use crate::llm::wire_cache::RenderedMessages;

pub use decode::{
    decode_event_after_for_fuzzing, decode_event_for_fuzzing, decode_events_for_fuzzing,
    DecodePath, DecodedEvent,
};
pub(crate) use http::OpenAiStream;
use request::{RenderedSystem, RenderedTools};

pub(crate) struct OpenAiBackend {
    http: ModelHttp,
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
    /// prompt, and than matching the prompt against the JSON.
    system: Mutex<Option<RenderedSystem>>,
    /// The last body's size: the next one is allocated once.
    body_size_hint: AtomicUsize,
}

impl OpenAiBackend {
    pub(crate) fn new(c: &OpenAiConfig) -> Result<Self, String> {
        let mut headers = HeaderMap::new();
        // No key (allowed for a loopback server only): no Authorization header at all,
        // rather than a `Bearer ` a server would read as a malformed credential.
        if !c.api_key.is_empty() {
            let auth = HeaderValue::from_str(&format!("Bearer {}", c.api_key))
                .map_err(|_| "config field `llm.api_key`: not a valid header value".to_owned())?;
            headers.insert(AUTHORIZATION, auth);
        }
        let http = ModelHttp::new(c, "/chat/completions", headers)?;
        Ok(OpenAiBackend {
            http,
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
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    pub(crate) fn temperature(&self) -> Option<f64> {
        self.temperature
    }

    pub(crate) fn max_tokens(&self) -> u32 {
        self.max_tokens
    }
}
