//! The reference ACP schema and which of its definitions each server message must satisfy.
//! Shared by the tests and the `validate_transcript` example.

use std::collections::HashMap;

use serde_json::{json, Value};

pub struct Schemas {
    defs: Value,
    validators: HashMap<String, jsonschema::Validator>,
}

impl Schemas {
    pub fn load() -> Schemas {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/schema/host.acp.schema.json"
        ))
        .unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        Schemas {
            defs: doc["$defs"].clone(),
            validators: HashMap::new(),
        }
    }

    /// Panics with the errors when `v` is not a valid `def`.
    pub fn check(&mut self, def: &str, v: &Value) {
        assert!(self.defs.get(def).is_some(), "no definition {def}");
        let defs = &self.defs;
        let validator = self.validators.entry(def.to_owned()).or_insert_with(|| {
            jsonschema::validator_for(&json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$defs": defs,
                "$ref": format!("#/$defs/{def}"),
            }))
            .unwrap()
        });
        let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{def} rejects {v}: {errors:?}");
    }
}

pub fn result_def(method: &str) -> &'static str {
    match method {
        "initialize" => "AcpInitializeResponse",
        "session/new" => "AcpSessionNewResponse",
        "session/load" => "AcpSessionLoadResponse",
        "session/prompt" => "AcpSessionPromptResponse",
        "session/cancel" => "AcpSessionCancelResponse",
        // Not in the reference's schema (it predates the method): an empty object, as cancel's.
        "session/close" => "AcpSessionCancelResponse",
        "session/set_mode" => "AcpSessionSetModeResponse",
        "session/set_model" => "AcpSessionSetModelResponse",
        "session/list_models" => "AcpSessionListModelsResponse",
        "session/set_config_option" => "AcpSessionSetConfigOptionResponse",
        "_agentao.cn/set_model" => "AcpAgentaoSetModelResponse",
        other => panic!("no schema for the result of {other}"),
    }
}

impl Schemas {
    /// Validates one message the server sent; `methods` maps the ids of the client's requests
    /// to their methods (a response is checked against its request's result definition).
    pub fn check_server_message(&mut self, v: &Value, methods: &HashMap<u64, String>) {
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        if let Some(method) = v.get("method").and_then(Value::as_str) {
            let def = match (method, v.get("id").is_some()) {
                ("session/update", false) => "AcpSessionUpdateParams",
                ("session/request_permission", true) => "AcpRequestPermissionParams",
                ("_agentao.cn/ask_user", true) => "AcpAskUserParams",
                _ => panic!("unexpected message from the server: {v}"),
            };
            self.check(def, &v["params"]);
        } else if let Some(e) = v.get("error") {
            self.check("AcpError", e);
        } else if methods
            .get(&v["id"].as_u64().unwrap_or(0))
            .map(String::as_str)
            == Some("session/list")
        {
            // Upstream ACP's, newer than the reference's schema.
            check_session_list(&v["result"]);
        } else {
            let id = v["id"]
                .as_u64()
                .expect("a response to one of the client's requests");
            let method = methods
                .get(&id)
                .expect("a response to a request the client sent");
            self.check(result_def(method), &v["result"]);
        }
    }
}

/// Upstream ACP's `ListSessionsResponse`: `sessions` of `{sessionId, cwd}` (absolute), and an
/// optional string `nextCursor`.
fn check_session_list(r: &Value) {
    let sessions = r["sessions"].as_array().unwrap_or_else(|| panic!("{r}"));
    for s in sessions {
        assert!(s["sessionId"].is_string(), "{s}");
        assert!(s["cwd"].as_str().is_some_and(|c| c.starts_with('/')), "{s}");
    }
    assert!(r.get("nextCursor").is_none_or(Value::is_string), "{r}");
}
