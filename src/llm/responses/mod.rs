//! The OpenAI Responses wire (`provider: "openai-responses"`): request rendering in
//! [`request`], the typed event stream in [`decode`], and here the headers, the one-shot
//! `temperature` repair and the overflow wording.

mod decode;
mod fast_event;
mod read_members;
mod request;
#[cfg(test)]
mod tests;

pub use decode::decode_for_fuzzing;
#[cfg(test)]
pub(crate) use request::{render as render_from_scratch, render_body, RenderCache};

use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{Map, Value};

use crate::llm::assembly::Assembler;
use crate::llm::config::OpenAiConfig;
use crate::llm::request_body::RequestBody;
use crate::llm::wire::{Flow, Overflow, Wire, WireSettings};
use crate::llm::{ChatRequest, LlmError};

pub(crate) struct Responses {
    /// A server said `temperature` is unsupported (reasoning models do): latched off.
    drop_temperature: AtomicBool,
}

impl Wire for Responses {
    const PATH: &'static str = "/responses";
    type Decoder = decode::Decoder;
    type RenderCache = request::RenderCache;

    fn new(_: &OpenAiConfig) -> Self {
        Responses {
            drop_temperature: AtomicBool::new(false),
        }
    }

    fn headers(c: &OpenAiConfig) -> Result<HeaderMap, String> {
        let mut h = HeaderMap::new();
        h.insert(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {}", c.api_key))
                .map_err(|_| "config field `llm.api_key`: not a valid header value".to_owned())?,
        );
        Ok(h)
    }

    fn render_body(
        &self,
        req: &ChatRequest<'_>,
        s: &WireSettings,
        cache: &mut request::RenderCache,
    ) -> RequestBody {
        let t = s
            .temperature
            .filter(|_| !self.drop_temperature.load(Ordering::Relaxed));
        request::render_body(req, s, t, cache)
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

    fn repair(&self, e: &LlmError, body: &mut Map<String, Value>) -> bool {
        if !matches!(e.status, Some(400) | Some(422)) {
            return false;
        }
        let msg = e.message.to_ascii_lowercase();
        let unsupported = ["unsupported", "not supported", "does not support"]
            .iter()
            .any(|w| msg.contains(w));
        if msg.contains("temperature")
            && unsupported
            && body.contains_key("temperature")
            && !self.drop_temperature.swap(true, Ordering::Relaxed)
        {
            body.remove("temperature");
            return true;
        }
        false
    }

    /// `context_length_exceeded`, or `Your input exceeds the context window of this model.`
    fn overflow(e: &LlmError) -> Option<Overflow> {
        let m = e.message.to_ascii_lowercase();
        (m.contains("context_length_exceeded")
            || m.contains("exceeds the context window")
            || m.contains("maximum context length"))
        .then(|| Overflow {
            limit: crate::llm::wire::number_after(&m, "maximum context length is"),
        })
    }
}
