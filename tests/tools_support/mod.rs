//! Shared fixtures for the tools_* integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agentao::cancel::CancelToken;
use agentao::config::{AgentConfig, ToolsConfig};
use agentao::tools::{HostRequests, ToolContext, ToolError, ToolRegistry, ToolServices};
use serde_json::{Map, Value};

/// A host that records ask_user calls and answers from a script.
#[derive(Default)]
pub struct Host {
    pub asked: Mutex<Vec<(String, Value)>>,
    pub answer: Option<Result<String, String>>,
}

impl HostRequests for Host {
    fn ask_user(&self, question: &str, hints: &Value) -> Result<String, String> {
        self.asked
            .lock()
            .unwrap()
            .push((question.to_owned(), hints.clone()));
        self.answer.clone().unwrap_or_else(|| Ok("yes".to_owned()))
    }
}

/// A workspace (canonical temp dir) plus everything a ToolContext needs.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub config: ToolsConfig,
    pub services: ToolServices,
    pub registry: ToolRegistry,
    pub cancel: CancelToken,
    pub host: Host,
}

impl Env {
    pub fn new() -> Self {
        Self::with_config(ToolsConfig::default())
    }

    pub fn with_config(config: ToolsConfig) -> Self {
        Self::build(config, tempfile::tempdir().unwrap())
    }

    /// A workspace on tmpfs when the machine has one (for tests that create many files).
    pub fn on_tmpfs() -> Self {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap_or_else(|_| tempfile::tempdir().unwrap())
        } else {
            tempfile::tempdir().unwrap()
        };
        Self::build(ToolsConfig::default(), dir)
    }

    fn build(config: ToolsConfig, dir: tempfile::TempDir) -> Self {
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let services = ToolServices::new(&config, &root);
        let registry = ToolRegistry::builtin(&config).unwrap();
        Env {
            dir,
            root,
            config,
            services,
            registry,
            cancel: CancelToken::new(),
            host: Host::default(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, data: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, data).unwrap();
        p
    }

    pub fn try_call(&self, tool: &str, args: Value) -> Result<String, ToolError> {
        self.try_call_with_output(tool, args, &|_| {})
    }

    pub fn try_call_with_output(
        &self,
        tool: &str,
        args: Value,
        output: &(dyn Fn(&str) + Sync),
    ) -> Result<String, ToolError> {
        let args: Map<String, Value> = match args {
            Value::Object(m) => m,
            _ => panic!("args must be an object"),
        };
        let ctx = ToolContext {
            workspace: &self.root,
            call_id: "call_1",
            cancel: &self.cancel,
            output,
            host: &self.host,
            settings: &self.config,
            services: &self.services,
            approval: agentao::tools::Approval::Other,
        };
        self.registry
            .get(tool)
            .expect("tool registered")
            .execute(&args, &ctx)
    }

    pub fn call(&self, tool: &str, args: Value) -> String {
        self.try_call(tool, args)
            .unwrap_or_else(|e| panic!("{tool} raised {}: {}", e.kind, e.message))
    }
}

/// The `tools` section of a config whose `tools.settings` is `v`, parsed as the agent parses it.
pub fn parse_settings(v: Value) -> Result<ToolsConfig, String> {
    let doc = serde_json::json!({
        "working_directory": std::env::temp_dir(),
        "llm": {"provider": "scripted", "script": []},
        "tools": {"settings": v},
    });
    AgentConfig::from_json(&doc.to_string())
        .map(|c| c.tools)
        .map_err(|e| e.0)
}

pub fn settings(v: Value) -> ToolsConfig {
    parse_settings(v).unwrap()
}

pub fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}
