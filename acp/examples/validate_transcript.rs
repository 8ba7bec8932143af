//! Validates a client transcript (JSONL of `{"dir": "client"|"server", "line": "<message>"}`,
//! as written by tests/acp-node/client.mjs) against the reference ACP schema: every message the
//! server sent must satisfy its definition. Prints the count; panics (non-zero exit) on the first invalid one.
//!
//!   cargo run -p agentao-acp --example validate_transcript -- transcript.jsonl

#[path = "../tests/common/schema.rs"]
mod schema;

use std::collections::HashMap;

use serde_json::Value;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: validate_transcript <transcript.jsonl>");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2);
    });
    let mut schemas = schema::Schemas::load();
    let mut methods = HashMap::new();
    let mut validated = 0usize;
    for (n, entry) in text.lines().enumerate() {
        let entry: Value = serde_json::from_str(entry).expect("a transcript entry");
        let line = entry["line"].as_str().expect("a line");
        let msg: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{path}:{}: not JSON ({e}): {line}", n + 1));
        match entry["dir"].as_str() {
            Some("client") => {
                if let (Some(id), Some(m)) = (msg["id"].as_u64(), msg["method"].as_str()) {
                    methods.insert(id, m.to_owned());
                }
            }
            Some("server") => {
                schemas.check_server_message(&msg, &methods);
                validated += 1;
            }
            other => panic!("{path}:{}: unknown direction {other:?}", n + 1),
        }
    }
    println!("server messages validated against host.acp.schema.json: {validated}");
}
