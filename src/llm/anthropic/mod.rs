//! The Anthropic Messages wire (`provider: "anthropic"`), always streaming: request rendering
//! in [`request`], the event stream in [`decode`], and here the headers, the one-shot
//! `max_tokens` repair and the overflow wording. It never sends `temperature`.

mod decode;
mod fast_event;
mod request;
#[cfg(test)]
mod tests;

pub use decode::decode_for_fuzzing;
#[cfg(test)]
pub(crate) use request::{render as render_from_scratch, render_body, RenderCache};

use std::sync::atomic::{AtomicU32, Ordering};

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Map, Value};

use crate::llm::assembly::Assembler;
use crate::llm::config::OpenAiConfig;
use crate::llm::request_body::RequestBody;
use crate::llm::wire::{number_after, Flow, Overflow, Wire, WireSettings};
use crate::llm::{ChatRequest, LlmError};

/// The API version the wire is written against.
const API_VERSION: &str = "2023-06-01";

pub(crate) struct Anthropic {
    /// The output cap a server named when it refused `max_tokens` (0: none yet); latched for
    /// the client's life.
    max_tokens_cap: AtomicU32,
}

impl Wire for Anthropic {
    const PATH: &'static str = "/v1/messages";
    type Decoder = decode::Decoder;
    type RenderCache = request::RenderCache;

    fn new(_: &OpenAiConfig) -> Self {
        Anthropic {
            max_tokens_cap: AtomicU32::new(0),
        }
    }

    fn headers(c: &OpenAiConfig) -> Result<HeaderMap, String> {
        let mut h = HeaderMap::new();
        h.insert(
            "x-api-key",
            HeaderValue::from_str(&c.api_key)
                .map_err(|_| "config field `llm.api_key`: not a valid header value".to_owned())?,
        );
        h.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        Ok(h)
    }

    fn render_body(
        &self,
        req: &ChatRequest<'_>,
        s: &WireSettings,
        cache: &mut request::RenderCache,
    ) -> RequestBody {
        let cap = self.max_tokens_cap.load(Ordering::Relaxed);
        let max_tokens = if cap > 0 {
            s.max_tokens.min(cap)
        } else {
            s.max_tokens
        };
        request::render_body(req, s, max_tokens, cache)
    }

    fn decode(
        dec: &mut decode::Decoder,
        data: &[u8],
        asm: &mut Assembler,
    ) -> Result<Flow, LlmError> {
        decode::decode(dec, data, asm)
    }

    fn at_eof(dec: &mut decode::Decoder, asm: &mut Assembler) -> Result<(), LlmError> {
        decode::at_eof(dec, asm)
    }

    /// `max_tokens: 65536 > 64000, which is the maximum allowed number of output tokens for
    /// …`: the body is sent again once with the cap, and every later request uses it.
    fn repair(&self, e: &LlmError, body: &mut Map<String, Value>) -> bool {
        if e.status != Some(400) || !e.message.contains("max_tokens") {
            return false;
        }
        let Some(cap) = number_after(&e.message, ">").and_then(|n| u32::try_from(n).ok()) else {
            return false;
        };
        let current = body.get("max_tokens").and_then(Value::as_u64);
        if cap == 0 || current.is_none_or(|m| m <= u64::from(cap)) {
            return false;
        }
        if self.max_tokens_cap.swap(cap, Ordering::Relaxed) != 0 {
            return false;
        }
        body.insert("max_tokens".into(), json!(cap));
        true
    }

    /// `prompt is too long: 210000 tokens > 200000 maximum`, or `input length and max_tokens
    /// exceed context limit: 188240 + 21333 > 200000`.
    fn overflow(e: &LlmError) -> Option<Overflow> {
        let m = e.message.to_ascii_lowercase();
        (m.contains("prompt is too long") || m.contains("exceed context limit")).then(|| Overflow {
            limit: number_after(&m, ">"),
        })
    }
}
