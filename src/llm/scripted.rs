//! The scripted provider: plays a [`Script`] one response per request, with its faults, through
//! the same assembler and retry policy as the HTTP client.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::assembly::{Assembler, Usage};
use super::script::{Fault, Script, ScriptArgs, ScriptResponse};
use super::{retry, LlmError};

pub(crate) struct ScriptedBackend {
    model: Option<String>,
    // Shared, so a request does not copy its response.
    responses: Vec<Arc<ScriptResponse>>,
    exhausted: Arc<ScriptResponse>,
    next: AtomicUsize,
}

impl ScriptedBackend {
    pub(crate) fn new(script: Script) -> Self {
        let exhausted = script.response(usize::MAX);
        ScriptedBackend {
            model: script.model,
            responses: script.responses.into_iter().map(Arc::new).collect(),
            exhausted: Arc::new(exhausted),
            next: AtomicUsize::new(0),
        }
    }

    pub(crate) fn model(&self) -> &str {
        self.model.as_deref().unwrap_or("scripted")
    }

    pub(crate) fn open(&self) -> Result<ScriptedStream, LlmError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let resp = self.responses.get(n).unwrap_or(&self.exhausted).clone();
        if let Some(Fault::HttpError {
            status,
            message,
            error_type,
            code,
            headers,
        }) = &resp.fault
        {
            let mut e = LlmError::status(
                *status,
                message.clone(),
                code.as_deref(),
                error_type.as_deref(),
            );
            e.retry_after = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
                .and_then(|(_, v)| retry::parse_retry_after(v));
            return Err(e);
        }
        let mut order = Vec::new();
        order.extend((0..resp.reasoning_chunks.len()).map(Ev::Reasoning));
        order.extend((0..resp.text_chunks.len()).map(Ev::Text));
        for (slot, call) in resp.tool_calls.iter().enumerate() {
            let pieces = match &call.args {
                ScriptArgs::Pieces(p) => p.len().max(1),
                ScriptArgs::Object(_) => 1,
            };
            order.extend((0..pieces).map(|p| Ev::Tool(slot, p)));
        }
        if resp.finish_reason.is_some() {
            order.push(Ev::Finish);
        }
        if resp.usage.is_some() {
            order.push(Ev::Usage);
        }
        Ok(ScriptedStream {
            resp,
            order,
            pos: 0,
        })
    }
}

#[derive(Clone, Copy)]
enum Ev {
    Reasoning(usize),
    Text(usize),
    Tool(usize, usize),
    Finish,
    Usage,
}

pub(crate) struct ScriptedStream {
    resp: Arc<ScriptResponse>,
    order: Vec<Ev>,
    pos: usize,
}

impl ScriptedStream {
    /// The next event at once, when nothing (a delay or a stall) is due before it.
    pub(crate) fn try_ready(&mut self, asm: &mut Assembler) -> Option<Result<bool, LlmError>> {
        let stall_due = self.pos == 0 && matches!(self.resp.fault, Some(Fault::Stall { .. }));
        if self.resp.delay_ms > 0 || stall_due {
            return None;
        }
        Some(self.step(asm))
    }

    pub(crate) async fn next(&mut self, asm: &mut Assembler) -> Result<bool, LlmError> {
        if self.pos == 0 {
            if let Some(Fault::Stall { ms }) = &self.resp.fault {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
            }
        }
        let fault_due = match &self.resp.fault {
            Some(Fault::Drop { after_events })
            | Some(Fault::InStreamError { after_events, .. }) => self.pos >= *after_events,
            _ => false,
        };
        if self.resp.delay_ms > 0 && !fault_due && self.pos < self.order.len() {
            tokio::time::sleep(Duration::from_millis(self.resp.delay_ms)).await;
        }
        self.step(asm)
    }

    fn step(&mut self, asm: &mut Assembler) -> Result<bool, LlmError> {
        match &self.resp.fault {
            Some(Fault::Drop { after_events }) if self.pos >= *after_events => {
                return Err(LlmError::connection(
                    "Connection dropped while reading the response body",
                ))
            }
            Some(Fault::InStreamError {
                after_events,
                message,
                code,
                error_type,
            }) if self.pos >= *after_events => {
                let code_str = code.as_ref().and_then(|c| c.as_str());
                let status = match code {
                    Some(serde_json::Value::Number(n)) => n.as_u64().map(|n| n as u16),
                    _ => match code_str {
                        Some("server_error") => Some(500),
                        Some("rate_limit_exceeded") => Some(429),
                        _ => None,
                    },
                };
                let e = match status {
                    Some(s) => {
                        LlmError::status(s, message.clone(), code_str, error_type.as_deref())
                    }
                    None => LlmError::api(message.clone()),
                };
                return Err(e.in_stream());
            }
            _ => {}
        }
        let Some(ev) = self.order.get(self.pos).copied() else {
            return Ok(false);
        };
        self.pos += 1;
        let r = &self.resp;
        match ev {
            Ev::Reasoning(i) => asm.reasoning(&r.reasoning_chunks[i]),
            Ev::Text(i) => asm.text(&r.text_chunks[i]),
            Ev::Tool(slot, piece) => {
                let call = &r.tool_calls[slot];
                let first = piece == 0;
                let args = match &call.args {
                    ScriptArgs::Pieces(p) => p.get(piece).cloned().unwrap_or_default(),
                    ScriptArgs::Object(v) => v.to_string(),
                };
                asm.tool_delta(
                    call.index,
                    if first { call.id.as_deref() } else { None },
                    if first {
                        Some(call.name.as_str())
                    } else {
                        None
                    },
                    Some(&args),
                );
            }
            Ev::Finish => asm.finish_reason(r.finish_reason.as_deref().unwrap_or("")),
            Ev::Usage => asm.usage(Usage::from_openai(r.usage.as_ref().expect("usage event"))),
        }
        // A script is refused where a server would be, so a host's script tests the bound.
        match asm.call_bound_error() {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }
}
