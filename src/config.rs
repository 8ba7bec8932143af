//! The agent configuration: JSON in, a validated [`AgentConfig`] out, in one parse.
//!
//! Each layer owns its section (`llm::config`, `tools::config`, `permissions::config`); this
//! module composes them, so a new section is one field of `RawConfig` and [`AgentConfig`].
//! Every key set is closed, so a misspelt key is an error that names it (see `config_field`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::config_field::{self, optional_object, Section};
use crate::llm::config::LlmSection;
pub(crate) use crate::llm::config::ProcessEnv;
pub use crate::llm::config::{Env, LlmConfig, DEFAULT_MAX_TOKENS};
pub(crate) use crate::permissions::PermissionsConfig;
use crate::telemetry::config::TelemetrySection;
pub use crate::telemetry::TelemetryConfig;
pub use crate::tools::ToolsConfig;

pub(crate) const DEFAULT_MAX_ITERATIONS: u32 = 100;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String, pub ConfigErrorKind);

/// Whether the document is not JSON at all or is JSON that is not a valid config: the C layer
/// reports them with different statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigErrorKind {
    Json,
    Invalid,
}

/// The context window assumed when the config states none (the reference's default).
pub const DEFAULT_MAX_CONTEXT_TOKENS: u64 = 200_000;
/// Below this no history fits beside a system prompt and the tools.
const MIN_CONTEXT_TOKENS: u64 = 1_024;

/// A validated agent configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub working_directory: PathBuf,
    pub max_iterations: u32,
    /// Host text appended to our own system prompt.
    pub system_prompt_extra: Option<String>,
    pub llm: LlmConfig,
    /// Optional bound on how long a confirmation / question / max-iterations reply may take.
    pub reply_timeout: Option<Duration>,
    /// The model's context window as the host states it (compaction's bound, with what an
    /// overflow error teaches).
    pub max_context_tokens: u64,
    pub tools: ToolsConfig,
    /// `None`: no permission engine.
    pub permissions: Option<PermissionsConfig>,
    /// Raw memory settings (`sqlite_path`), validated by the tools layer.
    pub(crate) memory: Option<Value>,
    /// `mcp_servers` and `mcp_config_files`, validated by the mcp layer.
    pub(crate) mcp: McpSources,
    /// The raw `subagents` section, typed by the subagents layer (above this one).
    pub(crate) subagents: Option<Value>,
    /// `skills`, raw (typed by `crate::skills::config`).
    pub(crate) skills: Option<Value>,
    /// `session`: where the session is committed and who it is.
    pub(crate) session: SessionConfig,
    /// Lifecycle hooks in Claude Code's shape (docs/hooks.md).
    pub(crate) hooks: crate::hooks::HooksConfig,
    /// `telemetry` with the `OTEL_*` environment: where spans and metrics go; `None`: nowhere.
    pub telemetry: Option<TelemetryConfig>,
}

/// The `session` section: the store the session is committed to after every turn, and the
/// session's identity in it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionConfig {
    /// A store URL (`sqlite:PATH`, `memory:NAME`, `postgres://…`); none: nothing is committed.
    pub(crate) store: Option<String>,
    /// The session id; when the store holds it, the agent resumes it.
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) tenant: String,
    #[serde(default)]
    pub(crate) owner: String,
    /// How long one store operation may take (default 10 s).
    pub(crate) timeout_ms: Option<u64>,
}

impl Section for SessionConfig {}

impl SessionConfig {
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(10_000))
    }
}

/// The MCP keys of the config, as given (typed by `crate::mcp::config`).
#[derive(Debug, Clone, Default)]
pub(crate) struct McpSources {
    pub(crate) servers: Map<String, Value>,
    pub(crate) config_files: Option<Value>,
    /// `mcp_limits`, raw.
    pub(crate) limits: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    working_directory: Option<String>,
    max_iterations: Option<u32>,
    system_prompt: Option<String>,
    reply_timeout_ms: Option<u64>,
    max_context_tokens: Option<u64>,
    #[serde(default, deserialize_with = "optional_object")]
    llm: Option<LlmSection>,
    #[serde(default, deserialize_with = "optional_object")]
    tools: Option<ToolsConfig>,
    #[serde(default, deserialize_with = "optional_object")]
    permissions: Option<PermissionsConfig>,
    mcp_servers: Option<Map<String, Value>>,
    mcp_config_files: Option<Value>,
    mcp_limits: Option<Value>,
    memory: Option<Value>,
    subagents: Option<Value>,
    skills: Option<Value>,
    #[serde(default, deserialize_with = "optional_object")]
    session: Option<SessionConfig>,
    hooks: Option<Value>,
    #[serde(default, deserialize_with = "optional_object")]
    telemetry: Option<TelemetrySection>,
}

impl Section for RawConfig {}

/// The document: an object, never an array read by position.
struct Document(RawConfig);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        config_field::object(d).map(Document)
    }
}

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into(), ConfigErrorKind::Invalid)
}

impl AgentConfig {
    /// Parses and validates a config JSON document, reading fallbacks from the process env.
    pub fn from_json(json: &str) -> Result<Self, ConfigError> {
        Self::from_json_with_env(json, &ProcessEnv)
    }

    pub fn from_json_with_env(json: &str, env: &dyn Env) -> Result<Self, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(json);
        let Document(raw) = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            // A type error can come before a syntax error further on; the document is then
            // still reported as malformed JSON. Only a failed parse pays for this second look.
            if let Err(syntax) = serde_json::from_str::<serde::de::IgnoredAny>(json) {
                return ConfigError(syntax.to_string(), ConfigErrorKind::Json);
            }
            err(config_field::message(&e))
        })?;
        // The document must be the whole text: `deserialize` stops at the end of the value.
        de.end()
            .map_err(|e| ConfigError(e.to_string(), ConfigErrorKind::Json))?;

        let wd = raw
            .working_directory
            .ok_or_else(|| err("config field `working_directory`: required"))?;
        if wd.is_empty() {
            return Err(err("config field `working_directory`: must not be empty"));
        }
        let working_directory = std::fs::canonicalize(&wd).map_err(|e| {
            err(format!(
                "config field `working_directory`: cannot resolve '{wd}': {e}"
            ))
        })?;
        if !working_directory.is_dir() {
            return Err(err(format!(
                "config field `working_directory`: '{wd}' is not a directory"
            )));
        }

        let llm = raw.llm.unwrap_or_default().resolve(env).map_err(err)?;
        let tools = raw.tools.unwrap_or_default();
        if tools.enabled.is_some() && !tools.disabled.is_empty() {
            return Err(err(
                "config field `tools`: `enabled` and `disabled` cannot be combined",
            ));
        }

        let telemetry = raw
            .telemetry
            .unwrap_or_default()
            .resolve(env)
            .map_err(err)?;

        let max_context_tokens = raw.max_context_tokens.unwrap_or(DEFAULT_MAX_CONTEXT_TOKENS);
        if max_context_tokens < MIN_CONTEXT_TOKENS {
            return Err(err(format!(
                "config field `max_context_tokens`: must be at least {MIN_CONTEXT_TOKENS}"
            )));
        }

        Ok(AgentConfig {
            working_directory,
            max_context_tokens,
            max_iterations: raw.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS),
            system_prompt_extra: raw.system_prompt.filter(|s| !s.is_empty()),
            llm,
            reply_timeout: raw.reply_timeout_ms.map(Duration::from_millis),
            tools,
            permissions: raw.permissions,
            mcp: McpSources {
                servers: raw.mcp_servers.unwrap_or_default(),
                config_files: raw.mcp_config_files,
                limits: raw.mcp_limits,
            },
            memory: raw.memory,
            subagents: raw.subagents,
            skills: raw.skills,
            session: check_session(raw.session.unwrap_or_default())?,
            hooks: match &raw.hooks {
                None | Some(Value::Null) => crate::hooks::HooksConfig::default(),
                Some(section) => crate::hooks::HooksConfig::parse(section).map_err(err)?,
            },
            telemetry,
        })
    }
}

fn check_session(s: SessionConfig) -> Result<SessionConfig, ConfigError> {
    if let Some(id) = &s.id {
        crate::session_store::check_session_id(id)
            .map_err(|e| err(format!("config field `session.id`: {e}")))?;
    }
    if s.store.as_deref() == Some("") {
        return Err(err("config field `session.store`: must not be empty"));
    }
    if s.timeout_ms == Some(0) {
        return Err(err("config field `session.timeout_ms`: must be positive"));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A number a config holds is written back (a rendered config, a scripted delay) as the
    /// same number: serde_json's float parsing is correctly rounded (`float_roundtrip`), so
    /// its shortest form reads back as itself. The fuzz target `config` found one that did not.
    #[test]
    fn a_float_reads_back_as_itself_when_written() {
        for text in [
            "507777000000000000000000000000000000000.6714515034139233848",
            "0.1",
            "2.2250738585072011e-308",
            "1.7976931348623157e308",
            "123456789012345678901234567890.123456789",
        ] {
            let v: f64 = serde_json::from_str(text).unwrap();
            let written = serde_json::to_string(&v).unwrap();
            let again: f64 = serde_json::from_str(&written).unwrap();
            assert_eq!(v.to_bits(), again.to_bits(), "{text} -> {written}");
        }
    }

    struct FakeEnv(Vec<(&'static str, &'static str)>);
    impl Env for FakeEnv {
        fn var(&self, key: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
    }

    fn wd() -> String {
        std::env::temp_dir().display().to_string()
    }

    #[test]
    fn env_fallbacks_fill_missing_openai_fields() {
        let env = FakeEnv(vec![
            ("OPENAI_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1/"),
            ("OPENAI_MODEL", "m"),
            ("LLM_MAX_TOKENS", "42"),
        ]);
        let c = AgentConfig::from_json_with_env(
            &format!(r#"{{"working_directory":"{}"}}"#, wd()),
            &env,
        )
        .unwrap();
        let LlmConfig::OpenAi(o) = c.llm else {
            panic!()
        };
        assert_eq!(o.base_url, "http://127.0.0.1:1/v1");
        assert_eq!(o.max_tokens, 42);
        assert_eq!(c.max_iterations, 100);
    }

    #[test]
    fn errors_name_the_field() {
        let env = FakeEnv(vec![]);
        let e = AgentConfig::from_json_with_env(
            &format!(
                r#"{{"working_directory":"{}","llm":{{"max_tokens":"x"}}}}"#,
                wd()
            ),
            &env,
        )
        .unwrap_err();
        assert!(e.0.contains("llm.max_tokens"), "{e}");
        let e = AgentConfig::from_json_with_env(
            &format!(r#"{{"working_directory":"{}","bogus":1}}"#, wd()),
            &env,
        )
        .unwrap_err();
        assert!(e.0.contains("bogus"), "{e}");
        let e = AgentConfig::from_json_with_env(
            &format!(r#"{{"working_directory":"{}"}}"#, wd()),
            &env,
        )
        .unwrap_err();
        assert!(e.0.contains("llm.base_url"), "{e}");
        let e = AgentConfig::from_json_with_env(r#"{}"#, &env).unwrap_err();
        assert!(e.0.contains("working_directory"), "{e}");
    }
}
