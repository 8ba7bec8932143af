//! Rendering a script as the chunks of an SSE stream: wire options and the `data:` frames.

use agentao::llm::script::{Script, ScriptArgs, ScriptEvent};
use bytes::Bytes;
use serde_json::{json, Map, Value};

/// How the `choices` key of the trailing usage chunk is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageChoices {
    /// `"choices": []` (OpenAI).
    #[default]
    Empty,
    /// `"choices": null` (some vLLM versions).
    Null,
    /// No `choices` key at all.
    Absent,
}

/// Framing options of the rendered stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireOptions {
    /// End lines with CRLF instead of LF.
    pub crlf: bool,
    /// Send a `: keep-alive` comment before every event, and every `keepalive_interval_ms`
    /// during a stall.
    pub keepalive_comments: bool,
    pub keepalive_interval_ms: u64,
    /// Do not send `data: [DONE]`.
    pub omit_done: bool,
    /// Write `data:` without the space.
    pub no_space: bool,
    /// A `stall` fault happens before the response head instead of after it.
    pub stall_before_headers: bool,
    pub usage_choices: UsageChoices,
    /// Milliseconds between `data: [DONE]` and the chunked body's end (`0\r\n\r\n`), which
    /// some servers write a moment later in a write of their own.
    pub end_after_done_ms: u64,
    /// Write each event of a scripted stream in HTTP chunks of at most this many bytes, each
    /// flushed on its own (0: one chunk per event): the client meets chunk boundaries inside
    /// lines, inside `data:` and inside multibyte characters.
    pub split_bytes: usize,
}

impl Default for WireOptions {
    fn default() -> Self {
        WireOptions {
            crlf: false,
            keepalive_comments: false,
            keepalive_interval_ms: 50,
            omit_done: false,
            no_space: false,
            stall_before_headers: false,
            usage_choices: UsageChoices::Empty,
            end_after_done_ms: 0,
            split_bytes: 0,
        }
    }
}

impl WireOptions {
    /// Reads `{"crlf": bool, "keepalive_comments": bool, "keepalive_interval_ms": n,
    /// "omit_done": bool, "no_space": bool, "stall_before_headers": bool,
    /// "usage_choices": "empty"|"null"|"absent", "end_after_done_ms": n, "split_bytes": n}`.
    pub fn from_value(v: &Value) -> Result<WireOptions, String> {
        let o = v.as_object().ok_or("`wire` must be an object")?;
        let mut w = WireOptions::default();
        for (k, val) in o {
            let flag = || {
                val.as_bool()
                    .ok_or_else(|| format!("wire.{k} must be a boolean"))
            };
            match k.as_str() {
                "crlf" => w.crlf = flag()?,
                "keepalive_comments" => w.keepalive_comments = flag()?,
                "omit_done" => w.omit_done = flag()?,
                "no_space" => w.no_space = flag()?,
                "stall_before_headers" => w.stall_before_headers = flag()?,
                "keepalive_interval_ms" => {
                    w.keepalive_interval_ms = val
                        .as_u64()
                        .filter(|n| *n > 0)
                        .ok_or("wire.keepalive_interval_ms must be a positive integer")?
                }
                "split_bytes" => {
                    w.split_bytes = val
                        .as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or("wire.split_bytes must be a non-negative integer")?
                }
                "end_after_done_ms" => {
                    w.end_after_done_ms = val
                        .as_u64()
                        .ok_or("wire.end_after_done_ms must be a non-negative integer")?
                }
                "usage_choices" => {
                    w.usage_choices = match val.as_str() {
                        Some("empty") => UsageChoices::Empty,
                        Some("null") => UsageChoices::Null,
                        Some("absent") => UsageChoices::Absent,
                        _ => return Err("wire.usage_choices must be empty, null or absent".into()),
                    }
                }
                other => return Err(format!("unknown wire option `{other}`")),
            }
        }
        Ok(w)
    }

    pub(crate) fn eol(&self) -> &'static [u8] {
        if self.crlf {
            b"\r\n"
        } else {
            b"\n"
        }
    }

    pub(crate) fn data_prefix(&self) -> &'static [u8] {
        if self.no_space {
            b"data:"
        } else {
            b"data: "
        }
    }
}

/// Splits a script document into its `wire` options and the part [`Script::from_value`] reads.
pub(crate) fn split_wire(script: Value) -> Result<(Value, Option<WireOptions>), String> {
    match script {
        Value::Object(mut o) => {
            let wire = match o.remove("wire") {
                Some(w) => Some(WireOptions::from_value(&w)?),
                None => None,
            };
            Ok((Value::Object(o), wire))
        }
        other => Ok((other, None)),
    }
}

/// Renders the first response of a script as the SSE body a server sends (no delays, no
/// faults): the input of [`MockServer::start_prerendered`]. The script's `wire` key applies.
///
/// [`MockServer::start_prerendered`]: crate::MockServer::start_prerendered
pub fn render_sse(script: Value) -> Result<Bytes, String> {
    let (v, wire) = split_wire(script)?;
    let script = Script::from_value(v)?;
    Ok(render_one(&script, 0, wire.as_ref()))
}

/// Renders every listed response of a script (at least one) the way [`render_sse`] renders
/// the first: the input of [`MockBuilder::start_prerendered_many`].
///
/// [`MockBuilder::start_prerendered_many`]: crate::MockBuilder::start_prerendered_many
pub fn render_sse_all(script: Value) -> Result<Vec<Bytes>, String> {
    let (v, wire) = split_wire(script)?;
    let script = Script::from_value(v)?;
    let n = script.responses.len().max(1);
    Ok((0..n)
        .map(|i| render_one(&script, i, wire.as_ref()))
        .collect())
}

fn render_one(script: &Script, n: usize, wire: Option<&WireOptions>) -> Bytes {
    let resp = script.response(n);
    let model = script.model.as_deref().unwrap_or("mock-model");
    let ctx = Ctx {
        id: format!("chatcmpl-mock-{}", n + 1),
        model: model.into(),
        created: unix_now(),
        wire: wire.cloned().unwrap_or_default(),
    };
    let mut out = Vec::new();
    for (i, ev) in resp.events().iter().enumerate() {
        if ctx.wire.keepalive_comments {
            ctx.comment(&mut out);
        }
        ctx.event(&mut out, ev, i == 0);
    }
    if !ctx.wire.omit_done {
        ctx.data(&mut out, b"[DONE]");
    }
    Bytes::from(out)
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What every chunk of one response shares.
pub(crate) struct Ctx {
    pub(crate) id: String,
    pub(crate) model: String,
    pub(crate) created: u64,
    pub(crate) wire: WireOptions,
}

impl Ctx {
    pub(crate) fn data(&self, out: &mut Vec<u8>, payload: &[u8]) {
        let eol = self.wire.eol();
        out.extend_from_slice(self.wire.data_prefix());
        out.extend_from_slice(payload);
        out.extend_from_slice(eol);
        out.extend_from_slice(eol);
    }

    pub(crate) fn comment(&self, out: &mut Vec<u8>) {
        let eol = self.wire.eol();
        out.extend_from_slice(b": keep-alive");
        out.extend_from_slice(eol);
        out.extend_from_slice(eol);
    }

    fn chunk(&self, choices: Option<Value>, usage: Value) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!("chat.completion.chunk"));
        m.insert("created".into(), json!(self.created));
        m.insert("model".into(), json!(self.model));
        m.insert("system_fingerprint".into(), json!("fp_mock"));
        if let Some(c) = choices {
            m.insert("choices".into(), c);
        }
        m.insert("usage".into(), usage);
        Value::Object(m)
    }

    fn choice(&self, delta: Map<String, Value>, finish: Option<&str>) -> Value {
        json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}])
    }

    /// Appends one event's `data:` frame.
    pub(crate) fn event(&self, out: &mut Vec<u8>, ev: &ScriptEvent<'_>, first: bool) {
        let mut delta = Map::new();
        if first {
            delta.insert("role".into(), json!("assistant"));
        }
        let v = match ev {
            ScriptEvent::Reasoning(r) => {
                delta.insert("content".into(), Value::Null);
                delta.insert("reasoning_content".into(), json!(r));
                self.chunk(Some(self.choice(delta, None)), Value::Null)
            }
            ScriptEvent::Text(t) => {
                delta.insert("content".into(), json!(t));
                self.chunk(Some(self.choice(delta, None)), Value::Null)
            }
            ScriptEvent::ToolCall {
                slot: _,
                call,
                piece,
            } => {
                let mut tc = Map::new();
                if let Some(i) = call.index {
                    tc.insert("index".into(), json!(i));
                }
                let mut function = Map::new();
                if *piece == 0 {
                    if let Some(id) = &call.id {
                        tc.insert("id".into(), json!(id));
                    }
                    tc.insert("type".into(), json!("function"));
                    function.insert("name".into(), json!(call.name));
                }
                let args = match &call.args {
                    ScriptArgs::Pieces(p) => json!(p.get(*piece).map(String::as_str).unwrap_or("")),
                    ScriptArgs::Object(o) => o.clone(),
                };
                function.insert("arguments".into(), args);
                tc.insert("function".into(), Value::Object(function));
                delta.insert("tool_calls".into(), json!([tc]));
                self.chunk(Some(self.choice(delta, None)), Value::Null)
            }
            ScriptEvent::Finish(f) => self.chunk(Some(self.choice(delta, Some(f))), Value::Null),
            ScriptEvent::Usage(u) => {
                let choices = match self.wire.usage_choices {
                    UsageChoices::Empty => Some(json!([])),
                    UsageChoices::Null => Some(Value::Null),
                    UsageChoices::Absent => None,
                };
                self.chunk(choices, (*u).clone())
            }
        };
        let payload = serde_json::to_vec(&v).unwrap_or_default();
        self.data(out, &payload);
    }
}
