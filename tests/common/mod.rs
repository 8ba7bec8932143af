//! Shared test helpers.

// Each test crate that declares `mod common;` uses only some of them.
#![allow(dead_code)]

use std::io::Write as _;
use std::sync::mpsc;
use std::time::Instant;

use agentao::agent::{Agent, TurnOptions, TurnResult};
use agentao::cancel::CancelToken;
use agentao::turn::DeltaSink;
use serde_json::Value;

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
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/validated-host-events.log"
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "{}", events.len());
    }
    events.len()
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
