//! Shared helpers of the MCP tests: a recording host, a scripted agent with MCP servers, and
//! the fault server's path.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use agentao::agent::Agent;
use serde_json::{json, Value};

#[path = "../common/mod.rs"]
mod common;
pub use common::RecordingHost as Host;

pub struct Run {
    pub agent: Agent,
    pub host: Arc<Host>,
    pub dir: tempfile::TempDir,
}

/// One scripted response calling `name` with `args`, then a final text.
pub fn call(name: &str, args: Value) -> Vec<Value> {
    vec![
        json!({"tool_calls": [{"id": "c1", "name": name, "arguments": args}]}),
        json!({"text": "done"}),
    ]
}

pub fn agent(responses: Vec<Value>, servers: Value, extra: Value) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut config = json!({
        "working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": responses}},
        "mcp_servers": servers,
    });
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            config[k] = v;
        }
    }
    let host = Arc::new(Host::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    Run { agent, host, dir }
}

impl Run {
    pub fn tool_messages(&self) -> Vec<String> {
        let h: Value = serde_json::from_str(&self.agent.history_json()).unwrap();
        h.as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    }

    pub fn status(&self) -> Value {
        serde_json::from_str(&self.agent.mcp_status_json()).unwrap()
    }

    pub fn server_status(&self, name: &str) -> Value {
        self.status()["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    }

    pub fn events_of(&self, ty: &str) -> Vec<Value> {
        self.host.events_of(ty)
    }
}

/// `target/<profile>/mcp-fault-server`, built on first use when a lone `cargo test --test`
/// did not build the workspace's binaries; `MCP_FAULT_SERVER` names another binary (with a
/// target directory shared between checkouts, that path holds whichever built it last).
pub fn fault_server() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(path) = std::env::var_os("MCP_FAULT_SERVER") {
            return PathBuf::from(path);
        }
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let path = dir.join("mcp-fault-server");
        if !path.exists() {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "--quiet", "-p", "mcp-fault-server"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .unwrap();
            assert!(status.success(), "cannot build mcp-fault-server");
        }
        assert!(path.exists(), "{} is missing", path.display());
        path
    })
    .clone()
}

pub fn fault(args: &[&str]) -> Value {
    json!({"command": fault_server(), "args": args})
}

/// Whether `pid` is gone or a zombie that is not ours to reap.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim().chars().next()
}
