//! The scripted model: a JSON list of model responses, consumed one per request.
//!
//! The vocabulary is the one the reference transcripts use (`tests/conformance/transcripts`), so
//! a recorded scenario drives our scripted provider and our loopback mock of the OpenAI wire alike:
//!
//! ```json
//! {"model": "scripted",
//!  "responses": [
//!    {"reasoning": "…", "reasoning_chunk_size": 10,
//!     "text": "Hello", "chunk_size": 2,            // or "chunks": ["He","llo"], or
//!     "repeat_text": {"unit": "ab ", "count": 300},
//!     "tool_calls": [{"id": "call_1", "name": "read_file",
//!                     "arguments": {"file_path": "a"}, "arg_chunks": 3}],
//!     "finish_reason": "stop",                      // null: none is sent; default stop/tool_calls
//!     "usage": {"prompt_tokens": 10, "completion_tokens": 2},
//!     "delay_ms": 1,                                // before every chunk
//!     "repeat": 3,                                  // this entry 3 times; "{i}" becomes 1, 2, 3
//!     "fault": {"type": "http_error", "status": 500, "message": "…", "code": "…",
//!               "headers": {"Retry-After": "0"}}}],
//!  "exhausted": {"text": "(script exhausted)"},
//!  "subagents": {"codebase-investigator": {"responses": […]}}}
//! ```
//!
//! `subagents` scripts sub-agents by name: each child run of that sub-agent plays its own
//! script from the start (a list or an object like this one). A sub-agent with no entry gets
//! the `exhausted` answer at once. Over HTTP (mock-openai) there are no names: child requests
//! take the next entries of the one `responses` sequence, in request order.
//!
//! Faults: `http_error` (the request fails with that status), `drop` (`after_events` chunks, then
//! the connection breaks), `malformed` (`line`: a raw bad data line, then the rest), `stall`
//! (`ms` of silence before the first chunk) and `in_stream_error` (`after_events` chunks, then an
//! error object inside the 200 stream).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

#[derive(Debug, Clone, Default)]
pub struct Script {
    pub model: Option<String>,
    pub responses: Vec<ScriptResponse>,
    pub(crate) exhausted: Option<ScriptResponse>,
}

#[derive(Debug, Clone, Default)]
pub struct ScriptResponse {
    pub(crate) reasoning_chunks: Vec<String>,
    pub text_chunks: Vec<String>,
    pub tool_calls: Vec<ScriptToolCall>,
    /// `None`: no finish reason is sent at all.
    pub finish_reason: Option<String>,
    pub(crate) usage: Option<Value>,
    pub delay_ms: u64,
    pub fault: Option<Fault>,
}

#[derive(Debug, Clone)]
pub struct ScriptToolCall {
    pub id: Option<String>,
    pub name: String,
    /// Argument pieces as they go on the wire; a JSON object sent whole is `ArgsObject`.
    pub args: ScriptArgs,
    /// Whether the wire carries an `index` (Gemini-style servers omit it).
    pub index: Option<u64>,
}

#[derive(Debug, Clone)]
pub enum ScriptArgs {
    Pieces(Vec<String>),
    Object(Value),
}

#[derive(Debug, Clone)]
pub enum Fault {
    HttpError {
        status: u16,
        message: String,
        error_type: Option<String>,
        code: Option<String>,
        headers: BTreeMap<String, String>,
    },
    Drop {
        after_events: usize,
    },
    Malformed {
        line: String,
    },
    Stall {
        ms: u64,
    },
    InStreamError {
        after_events: usize,
        message: String,
        code: Option<Value>,
        error_type: Option<String>,
    },
}

/// One chunk of a scripted response, in wire order.
#[derive(Debug, Clone)]
pub enum ScriptEvent<'a> {
    Reasoning(&'a str),
    Text(&'a str),
    ToolCall {
        slot: usize,
        call: &'a ScriptToolCall,
        /// The argument piece of this chunk (first chunk also carries id and name).
        piece: usize,
    },
    Finish(&'a str),
    Usage(&'a Value),
}

fn split_chunks(text: &str, size: usize) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let size = size.max(1);
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn substitute(v: &Value, i: usize) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{i}", &i.to_string())),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, i)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), substitute(x, i)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

fn as_str<'a>(o: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

fn as_u64(o: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be a non-negative integer")),
    }
}

/// The script is expanded when the agent is made: a `repeat` or `repeat_text` no memory holds
/// must fail the config, not abort the process in an allocation.
const MAX_RESPONSES: u64 = 1_000_000;
const MAX_REPEAT_TEXT_CHUNKS: u64 = 10_000_000;
const MAX_REPEAT_TEXT_BYTES: u64 = 64 << 20;

const RESPONSE_KEYS: &[&str] = &[
    "text",
    "chunk_size",
    "chunks",
    "repeat_text",
    "reasoning",
    "reasoning_chunk_size",
    "tool_calls",
    "finish_reason",
    "usage",
    "delay_ms",
    "repeat",
    "fault",
];

impl Script {
    /// Accepts `{"responses": [...]}`, a transcript's `{"llm": {...}}` wrapper, or a bare list.
    pub fn from_value(v: Value) -> Result<Script, String> {
        let v = match v {
            Value::Object(mut o) if o.contains_key("llm") && !o.contains_key("responses") => {
                o.remove("llm").unwrap_or(Value::Null)
            }
            other => other,
        };
        let (obj, list) = match v {
            Value::Array(a) => (Map::new(), a),
            Value::Object(mut o) => {
                for k in o.keys() {
                    if !["responses", "exhausted", "model", "subagents"].contains(&k.as_str()) {
                        return Err(format!("unknown key `{k}`"));
                    }
                }
                let list = match o.remove("responses") {
                    Some(Value::Array(a)) => a,
                    None => Vec::new(),
                    Some(_) => return Err("`responses` must be a list".into()),
                };
                (o, list)
            }
            _ => return Err("must be an object with `responses`".into()),
        };
        let mut responses = Vec::new();
        for (n, entry) in list.iter().enumerate() {
            let o = entry
                .as_object()
                .ok_or_else(|| format!("responses[{n}] must be an object"))?;
            let repeat = as_u64(o, "repeat").map_err(|e| format!("responses[{n}]: {e}"))?;
            if repeat.is_some_and(|r| r > MAX_RESPONSES) {
                return Err(format!(
                    "responses[{n}]: `repeat` must be at most {MAX_RESPONSES}"
                ));
            }
            match repeat {
                None => responses
                    .push(ScriptResponse::parse(o, 1).map_err(|e| format!("responses[{n}]: {e}"))?),
                Some(count) => {
                    if responses.len() as u64 + count > MAX_RESPONSES {
                        return Err(format!(
                            "responses[{n}]: a script holds at most {MAX_RESPONSES} responses"
                        ));
                    }
                    for i in 1..=count as usize {
                        let Value::Object(sub) = substitute(entry, i) else {
                            unreachable!()
                        };
                        responses.push(
                            ScriptResponse::parse(&sub, i)
                                .map_err(|e| format!("responses[{n}]: {e}"))?,
                        );
                    }
                }
            }
        }
        match obj.get("subagents") {
            None | Some(Value::Null) => {}
            Some(Value::Object(subs)) => {
                for (name, sub) in subs {
                    Script::from_value(sub.clone())
                        .map_err(|e| format!("subagents.{name}: {e}"))?;
                }
            }
            Some(_) => return Err("`subagents` must be an object of scripts by name".into()),
        }
        let exhausted = match obj.get("exhausted") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => {
                Some(ScriptResponse::parse(o, 1).map_err(|e| format!("exhausted: {e}"))?)
            }
            Some(_) => return Err("`exhausted` must be an object".into()),
        };
        Ok(Script {
            model: obj.get("model").and_then(Value::as_str).map(str::to_owned),
            responses,
            exhausted,
        })
    }

    /// The response for request number `n` (0-based).
    pub fn response(&self, n: usize) -> ScriptResponse {
        self.responses
            .get(n)
            .cloned()
            .or_else(|| self.exhausted.clone())
            .unwrap_or_else(|| ScriptResponse {
                text_chunks: vec!["(script exhausted)".to_owned()],
                finish_reason: Some("stop".to_owned()),
                ..Default::default()
            })
    }
}

/// The script a sub-agent named `name` plays (`subagents.<name>` of a validated script; an
/// empty one without it), with the parent's model name unless it names its own.
pub fn subagent_script(script: &Value, name: &str) -> Value {
    let script = match script {
        Value::Object(o) if o.contains_key("llm") && !o.contains_key("responses") => &o["llm"],
        other => other,
    };
    let mut sub = match script.get("subagents").and_then(|s| s.get(name)) {
        Some(Value::Array(list)) => json!({"responses": list}),
        Some(v @ Value::Object(_)) => v.clone(),
        _ => json!({"responses": []}),
    };
    if let (Some(model), Some(o)) = (script.get("model"), sub.as_object_mut()) {
        o.entry("model").or_insert_with(|| model.clone());
    }
    sub
}

impl ScriptResponse {
    fn parse(o: &Map<String, Value>, _i: usize) -> Result<ScriptResponse, String> {
        for k in o.keys() {
            if !RESPONSE_KEYS.contains(&k.as_str()) {
                return Err(format!("unknown key `{k}`"));
            }
        }
        let chunk_size = as_u64(o, "chunk_size")?.map(|v| v as usize);
        let mut text_chunks = match (o.get("chunks"), as_str(o, "text")?, o.get("repeat_text")) {
            (Some(Value::Array(a)), _, _) => a
                .iter()
                .map(|c| {
                    c.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| "`chunks` must hold strings".to_owned())
                })
                .collect::<Result<Vec<_>, _>>()?,
            (Some(_), _, _) => return Err("`chunks` must be a list".into()),
            (None, _, Some(rt)) => {
                let unit = rt.get("unit").and_then(Value::as_str).unwrap_or("");
                let count = rt.get("count").and_then(Value::as_u64).unwrap_or(0);
                let bytes = count.saturating_mul(unit.len().max(1) as u64);
                if count > MAX_REPEAT_TEXT_CHUNKS || bytes > MAX_REPEAT_TEXT_BYTES {
                    return Err(format!(
                        "`repeat_text` must make at most {MAX_REPEAT_TEXT_CHUNKS} chunks and \
                         {MAX_REPEAT_TEXT_BYTES} bytes"
                    ));
                }
                (0..count).map(|_| unit.to_owned()).collect()
            }
            (None, Some(t), None) => match chunk_size {
                Some(size) => split_chunks(t, size),
                None if t.is_empty() => Vec::new(),
                None => vec![t.to_owned()],
            },
            (None, None, None) => Vec::new(),
        };
        text_chunks.retain(|c| !c.is_empty());
        let reasoning_chunks = match as_str(o, "reasoning")? {
            Some(r) => split_chunks(
                r,
                as_u64(o, "reasoning_chunk_size")?.map_or(usize::MAX, |v| v as usize),
            ),
            None => Vec::new(),
        };
        let mut tool_calls = Vec::new();
        if let Some(tc) = o.get("tool_calls") {
            let list = tc.as_array().ok_or("`tool_calls` must be a list")?;
            for (slot, call) in list.iter().enumerate() {
                let c = call.as_object().ok_or("a tool call must be an object")?;
                let name = as_str(c, "name")?.unwrap_or("").to_owned();
                let arg_chunks = as_u64(c, "arg_chunks")?.unwrap_or(1) as usize;
                let args = match c.get("arguments") {
                    None | Some(Value::Null) => ScriptArgs::Pieces(vec![String::new()]),
                    Some(Value::String(s)) => ScriptArgs::Pieces(split_even(s, arg_chunks)),
                    Some(v @ Value::Object(_))
                        if c.get("arguments_as_object") == Some(&json!(true)) =>
                    {
                        ScriptArgs::Object(v.clone())
                    }
                    // Python's json.dumps default separators, as the reference's mock sends them.
                    Some(v) => {
                        ScriptArgs::Pieces(split_even(&crate::pycompat::python_json(v), arg_chunks))
                    }
                };
                let index = match c.get("index") {
                    Some(Value::Null) => None,
                    Some(v) => Some(v.as_u64().ok_or("`index` must be an integer or null")?),
                    None => Some(slot as u64),
                };
                tool_calls.push(ScriptToolCall {
                    id: as_str(c, "id")?.map(str::to_owned),
                    name,
                    args,
                    index,
                });
            }
        }
        let finish_reason = match o.get("finish_reason") {
            Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("`finish_reason` must be a string or null".into()),
            None if tool_calls.is_empty() => Some("stop".to_owned()),
            None => Some("tool_calls".to_owned()),
        };
        let fault = match o.get("fault") {
            None | Some(Value::Null) => None,
            Some(Value::Object(f)) => Some(parse_fault(f)?),
            Some(_) => return Err("`fault` must be an object".into()),
        };
        Ok(ScriptResponse {
            reasoning_chunks,
            text_chunks,
            tool_calls,
            finish_reason,
            usage: o.get("usage").filter(|u| !u.is_null()).cloned(),
            delay_ms: as_u64(o, "delay_ms")?.unwrap_or(0),
            fault,
        })
    }

    /// The chunks of this response in the order a server sends them.
    pub fn events(&self) -> Vec<ScriptEvent<'_>> {
        let mut out = Vec::new();
        out.extend(
            self.reasoning_chunks
                .iter()
                .map(|r| ScriptEvent::Reasoning(r)),
        );
        out.extend(self.text_chunks.iter().map(|t| ScriptEvent::Text(t)));
        for (slot, call) in self.tool_calls.iter().enumerate() {
            let pieces = match &call.args {
                ScriptArgs::Pieces(p) => p.len().max(1),
                ScriptArgs::Object(_) => 1,
            };
            for piece in 0..pieces {
                out.push(ScriptEvent::ToolCall { slot, call, piece });
            }
        }
        if let Some(f) = &self.finish_reason {
            out.push(ScriptEvent::Finish(f));
        }
        if let Some(u) = &self.usage {
            out.push(ScriptEvent::Usage(u));
        }
        out
    }
}

fn split_even(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let n = n.max(1);
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(n);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn parse_fault(f: &Map<String, Value>) -> Result<Fault, String> {
    let kind = as_str(f, "type")?.ok_or("fault needs a `type`")?;
    let after = as_u64(f, "after_events")?
        .or(as_u64(f, "after")?)
        .unwrap_or(0) as usize;
    Ok(match kind {
        "http_error" => Fault::HttpError {
            status: as_u64(f, "status")?.unwrap_or(500) as u16,
            message: as_str(f, "message")?.unwrap_or("error").to_owned(),
            error_type: as_str(f, "error_type")?.map(str::to_owned),
            code: as_str(f, "code")?.map(str::to_owned),
            headers: match f.get("headers") {
                Some(Value::Object(h)) => h
                    .iter()
                    .map(|(k, v)| {
                        let v = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (k.clone(), v)
                    })
                    .collect(),
                _ => BTreeMap::new(),
            },
        },
        "drop" => Fault::Drop {
            after_events: after,
        },
        "malformed" => Fault::Malformed {
            line: as_str(f, "line")?.unwrap_or("data: {not json").to_owned(),
        },
        "stall" => Fault::Stall {
            ms: as_u64(f, "ms")?.unwrap_or(u64::MAX / 4),
        },
        "in_stream_error" => Fault::InStreamError {
            after_events: after,
            message: as_str(f, "message")?.unwrap_or("stream error").to_owned(),
            code: f.get("code").cloned(),
            error_type: as_str(f, "error_type")?.map(str::to_owned),
        },
        other => return Err(format!("unknown fault type `{other}`")),
    })
}

/// The reference transcripts of `tests/conformance/transcripts`, parsed.
#[cfg(test)]
pub(crate) fn conformance_transcripts() -> Vec<Value> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance/transcripts");
    let entries = std::fs::read_dir(dir).expect("tests/conformance/transcripts");
    let mut paths: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            serde_json::from_str(&std::fs::read_to_string(p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_scripts_parse() {
        let transcripts = conformance_transcripts();
        for v in &transcripts {
            let s = Script::from_value(v["model_script"].clone())
                .unwrap_or_else(|e| panic!("{}: {e}", v["scenario"]));
            assert!(!s.responses.is_empty());
        }
        assert_eq!(transcripts.len(), 10);
    }

    #[test]
    fn repeat_substitutes_index() {
        let s = Script::from_value(json!({"responses":[{"repeat":2,"text":"n{i}"}]})).unwrap();
        assert_eq!(s.responses[1].text_chunks, vec!["n2"]);
    }
}
