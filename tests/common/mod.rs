//! Shared test helpers.

// Each test crate that declares `mod common;` uses only some of them.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::Path;
use std::sync::mpsc;
use std::time::Instant;

use agentao::agent::{Agent, TurnOptions, TurnResult};
use agentao::cancel::CancelToken;
use agentao::config::{AgentConfig, Env, LlmConfig};
use agentao::turn::DeltaSink;
use serde_json::{json, Value};

/// Validates host events against the v3 schema the library exports, panicking on the first
/// invalid one, and records how many were checked (`scripts/test.sh` prints the total).
pub fn validate_host_events(events: &[Value]) -> usize {
    let schema: Value = serde_json::from_str(agentao::events::host::HOST_EVENTS_SCHEMA_V3).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for e in events {
        let errors: Vec<String> = validator.iter_errors(e).map(|x| x.to_string()).collect();
        assert!(
            errors.is_empty(),
            "host event {e} fails the v3 schema: {errors:?}"
        );
    }
    record_validated(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/target/validated-host-events.log"
        )),
        events.len(),
    );
    events.len()
}

/// Adds a line with `n` to `log` (best effort: the count is a report, not a check).
pub fn record_validated(log: &Path, n: usize) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        // One write of the whole line: test binaries run at once and append to the same file,
        // and `writeln!` writes the number and the newline separately (two writers could make
        // "12" and "34" one line of "1234").
        let _ = f.write_all(format!("{n}\n").as_bytes());
    }
}

/// The contents of the `tool` messages of the agent's history, in order: what the model saw.
pub fn tool_results(agent: &Agent) -> Vec<String> {
    let h: Value = serde_json::from_str(&agent.history_json()).unwrap();
    h.as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// Starts a turn on `message` with a fresh cancel token; returns the token and where the
/// completion arrives, with the time it arrived.
pub fn start_cancellable(
    agent: &Agent,
    message: &str,
) -> (CancelToken, mpsc::Receiver<(Instant, TurnResult)>) {
    let token = CancelToken::new();
    let (tx, rx) = mpsc::channel();
    agent
        .start_turn(
            message.into(),
            TurnOptions {
                cancel: Some(token.clone()),
                ..Default::default()
            },
            DeltaSink::None,
            move |r| {
                let _ = tx.send((Instant::now(), r));
            },
        )
        .unwrap();
    (token, rx)
}

/// What [`RecordingHost`] answers every `ask_user` question with.
pub const HOST_ANSWER: &str = "blue";

/// A transport that records every event (parsed), every confirmation's tool name and every
/// question; it allows each confirmation (denies when `deny`) and answers each question with
/// [`HOST_ANSWER`].
#[derive(Default)]
pub struct RecordingHost {
    pub events: std::sync::Mutex<Vec<Value>>,
    pub confirms: std::sync::Mutex<Vec<String>>,
    pub questions: std::sync::Mutex<Vec<String>>,
    pub deny: bool,
}

impl RecordingHost {
    /// The events of type `ty` emitted so far, in order.
    #[allow(dead_code)] // not every test file that includes this module uses it
    pub fn events_of(&self, ty: &str) -> Vec<Value> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == ty)
            .cloned()
            .collect()
    }
}

impl agentao::events::transport::Transport for RecordingHost {
    fn emit(&self, event: &str) {
        self.events
            .lock()
            .unwrap()
            .push(serde_json::from_str(event).unwrap());
    }
    fn confirm_tool(
        &self,
        req: agentao::events::transport::ConfirmRequest,
        reply: agentao::events::transport::Reply,
    ) {
        use agentao::events::transport::{Answer, Confirmation};
        self.confirms.lock().unwrap().push(req.tool_name);
        let c = if self.deny {
            Confirmation::Deny
        } else {
            Confirmation::Allow
        };
        reply.answer(Answer::Confirm(c)).unwrap();
    }
    fn ask_user(&self, question: &str, _hints: &str, reply: agentao::events::transport::Reply) {
        self.questions.lock().unwrap().push(question.to_owned());
        reply
            .answer(agentao::events::transport::Answer::Text(HOST_ANSWER.into()))
            .unwrap();
    }
}

/// No environment fallbacks: tests must not depend on the developer's `LLM_*` variables.
struct NoEnv;
impl Env for NoEnv {
    fn var(&self, _: &str) -> Option<String> {
        None
    }
}

/// The LLM config of an OpenAI-compatible endpoint at `base_url` with quick retries and a 5 s
/// read timeout, `extra`'s keys set over those, read with no environment fallbacks.
pub fn openai_llm_config(base_url: &str, extra: Value) -> LlmConfig {
    let mut llm = json!({
        "provider": "openai",
        "base_url": base_url,
        "api_key": "test",
        "model": "mock-model",
        "retry_backoff_base_ms": 10,
        "retry_backoff_cap_ms": 100,
        "read_timeout_ms": 5000,
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        llm[k] = v;
    }
    let doc = json!({
        "working_directory": std::env::temp_dir().display().to_string(),
        "llm": llm,
    });
    AgentConfig::from_json_with_env(&doc.to_string(), &NoEnv)
        .expect("valid config")
        .llm
}
