//! The agent configuration: JSON in, a validated [`AgentConfig`] out.
//!
//! Every key set is closed, so a misspelt key is an error that names it. Values the config leaves
//! out for the `openai` provider fall back to the environment the way the reference's
//! `discover_llm_kwargs` does (`LLM_PROVIDER`, `{P}_API_KEY`, `{P}_BASE_URL`, `{P}_MODEL`,
//! `LLM_TEMPERATURE`, `LLM_MAX_TOKENS`, `LLM_EXTRA_BODY`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

pub const DEFAULT_MAX_ITERATIONS: u32 = 100;
pub const DEFAULT_MAX_TOKENS: u32 = 65536;
/// Default bound on one SSE line, one event's data, and a whole-JSON response body.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;
/// Bytes of text, reasoning and tool calls allowed per token of `max_tokens` by default (a
/// token is about 4 bytes; escapes and arguments as objects can make it more).
pub const RESPONSE_BYTES_PER_TOKEN: usize = 64;

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
    pub tools: ToolsConfig,
    /// Raw permission settings, validated by the permissions layer.
    pub permissions: Option<Value>,
    /// Raw memory settings (`sqlite_path`), validated by the tools layer.
    pub memory: Option<Value>,
}

// One per agent, never in a collection: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum LlmConfig {
    OpenAi(OpenAiConfig),
    /// The scripted provider's script, validated by the LLM layer when the agent is built.
    Scripted(Value),
}

impl LlmConfig {
    pub fn model(&self) -> &str {
        match self {
            LlmConfig::OpenAi(c) => &c.model,
            LlmConfig::Scripted(s) => s.get("model").and_then(Value::as_str).unwrap_or("scripted"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    pub temperature: Option<f64>,
    pub max_tokens: u32,
    pub headers: BTreeMap<String, String>,
    pub extra_body: Map<String, Value>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    /// Optional bound on one LLM call as a whole (every attempt and backoff included).
    pub call_timeout: Option<Duration>,
    /// Bound on one SSE line, one event's data, and a whole-JSON body.
    pub max_event_bytes: usize,
    /// Bound on the text, reasoning and tool calls one response accumulates.
    pub max_response_bytes: usize,
    pub retry: RetryConfig,
}

/// Retry policy knobs; defaults are the reference's (5 attempts, 7.5 s base, 60 s cap).
#[derive(Debug, Clone, Copy)]
pub struct RetryConfig {
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            backoff_base: Duration::from_millis(7500),
            backoff_cap: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ToolsConfig {
    /// When set, only these built-ins are registered.
    pub enabled: Option<Vec<String>>,
    pub disabled: Vec<String>,
    /// Allow read tools outside the workspace (the reference always does; we refuse by default).
    pub allow_reads_outside_workspace: bool,
    /// Extra settings for individual tools, validated by the tools layer.
    pub settings: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    working_directory: Option<String>,
    max_iterations: Option<u32>,
    system_prompt: Option<String>,
    reply_timeout_ms: Option<u64>,
    llm: Option<RawLlm>,
    tools: Option<RawTools>,
    permissions: Option<Value>,
    memory: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLlm {
    provider: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    model: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    extra_body: Option<Map<String, Value>>,
    connect_timeout_ms: Option<u64>,
    read_timeout_ms: Option<u64>,
    call_timeout_ms: Option<u64>,
    max_event_bytes: Option<usize>,
    max_response_bytes: Option<usize>,
    retry_backoff_base_ms: Option<u64>,
    retry_backoff_cap_ms: Option<u64>,
    max_attempts: Option<u32>,
    script: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTools {
    enabled: Option<Vec<String>>,
    #[serde(default)]
    disabled: Vec<String>,
    #[serde(default)]
    allow_reads_outside_workspace: bool,
    #[serde(default)]
    settings: Map<String, Value>,
}

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into(), ConfigErrorKind::Invalid)
}

/// Where environment fallbacks come from; a trait so tests need not touch the process env.
pub trait Env {
    fn var(&self, key: &str) -> Option<String>;
}

pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, key: &str) -> Option<String> {
        std::env::var(key).ok().filter(|v| !v.trim().is_empty())
    }
}

impl AgentConfig {
    /// Parses and validates a config JSON document, reading fallbacks from the process env.
    pub fn from_json(json: &str) -> Result<Self, ConfigError> {
        Self::from_json_with_env(json, &ProcessEnv)
    }

    pub fn from_json_with_env(json: &str, env: &dyn Env) -> Result<Self, ConfigError> {
        let de = &mut serde_json::Deserializer::from_str(json);
        let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            // A type error can come before a syntax error further on; the document is then
            // still reported as malformed JSON. Only a failed parse pays for this second look.
            if let Err(syntax) = serde_json::from_str::<serde::de::IgnoredAny>(json) {
                return ConfigError(syntax.to_string(), ConfigErrorKind::Json);
            }
            let path = e.path().to_string();
            if path == "." {
                err(format!("config: {}", e.inner()))
            } else {
                err(format!("config field `{path}`: {}", e.inner()))
            }
        })?;

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

        let llm = parse_llm(raw.llm, env)?;
        let tools = raw
            .tools
            .map(|t| ToolsConfig {
                enabled: t.enabled,
                disabled: t.disabled,
                allow_reads_outside_workspace: t.allow_reads_outside_workspace,
                settings: t.settings,
            })
            .unwrap_or_default();
        if tools.enabled.is_some() && !tools.disabled.is_empty() {
            return Err(err(
                "config field `tools`: `enabled` and `disabled` cannot be combined",
            ));
        }
        if let Some(p) = &raw.permissions {
            if !p.is_object() {
                return Err(err("config field `permissions`: must be an object"));
            }
        }

        Ok(AgentConfig {
            working_directory,
            max_iterations: raw.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS),
            system_prompt_extra: raw.system_prompt.filter(|s| !s.is_empty()),
            llm,
            reply_timeout: raw.reply_timeout_ms.map(Duration::from_millis),
            tools,
            permissions: raw.permissions,
            memory: raw.memory,
        })
    }
}

fn parse_llm(raw: Option<RawLlm>, env: &dyn Env) -> Result<LlmConfig, ConfigError> {
    let raw = raw.unwrap_or(RawLlm {
        provider: None,
        base_url: None,
        api_key: None,
        model: None,
        temperature: None,
        max_tokens: None,
        headers: BTreeMap::new(),
        extra_body: None,
        connect_timeout_ms: None,
        read_timeout_ms: None,
        call_timeout_ms: None,
        max_event_bytes: None,
        max_response_bytes: None,
        retry_backoff_base_ms: None,
        retry_backoff_cap_ms: None,
        max_attempts: None,
        script: None,
    });
    let provider = raw.provider.as_deref().unwrap_or("openai");
    match provider {
        "scripted" => {
            let script = raw
                .script
                .ok_or_else(|| err("config field `llm.script`: required for provider `scripted`"))?;
            Ok(LlmConfig::Scripted(script))
        }
        "openai" => {
            if raw.script.is_some() {
                return Err(err(
                    "config field `llm.script`: only valid with provider `scripted`",
                ));
            }
            let prefix = env
                .var("LLM_PROVIDER")
                .map(|p| p.trim().to_uppercase())
                .unwrap_or_else(|| "OPENAI".to_owned());
            let pick = |value: Option<String>, field: &str| -> Result<String, ConfigError> {
                let var = format!("{prefix}_{}", field.to_uppercase());
                match value.filter(|v| !v.trim().is_empty()).or_else(|| env.var(&var)) {
                    Some(v) => Ok(v.trim().to_owned()),
                    None => Err(err(format!(
                        "config field `llm.{field}`: required (or set {var})"
                    ))),
                }
            };
            let base_url = pick(raw.base_url, "base_url")?;
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                return Err(err(format!(
                    "config field `llm.base_url`: '{base_url}' is not an http(s) URL"
                )));
            }
            let api_key = pick(raw.api_key, "api_key")?;
            let model = pick(raw.model, "model")?;
            let temperature = match raw.temperature {
                Some(t) => Some(t),
                None => match env.var("LLM_TEMPERATURE") {
                    Some(v) => Some(v.trim().parse::<f64>().map_err(|_| {
                        err(format!("LLM_TEMPERATURE: '{v}' is not a number"))
                    })?),
                    None => None,
                },
            };
            if let Some(t) = temperature {
                if !t.is_finite() {
                    return Err(err("config field `llm.temperature`: must be finite"));
                }
            }
            let max_tokens = match raw.max_tokens {
                Some(m) => m,
                None => match env.var("LLM_MAX_TOKENS") {
                    Some(v) => v.trim().parse::<u32>().map_err(|_| {
                        err(format!("LLM_MAX_TOKENS: '{v}' is not a positive integer"))
                    })?,
                    None => DEFAULT_MAX_TOKENS,
                },
            };
            if max_tokens == 0 {
                return Err(err("config field `llm.max_tokens`: must be at least 1"));
            }
            let extra_body = match raw.extra_body {
                Some(b) => b,
                // The reference logs and ignores an invalid LLM_EXTRA_BODY; so do we.
                None => env
                    .var("LLM_EXTRA_BODY")
                    .and_then(|v| serde_json::from_str::<Map<String, Value>>(&v).ok())
                    .unwrap_or_default(),
            };
            for (name, value) in &raw.headers {
                if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
                    || reqwest::header::HeaderValue::from_str(value).is_err()
                {
                    return Err(err(format!(
                        "config field `llm.headers.{name}`: not a valid HTTP header"
                    )));
                }
            }
            let positive = |v: Option<usize>, field: &str| match v {
                Some(0) => Err(err(format!("config field `llm.{field}`: must be at least 1"))),
                other => Ok(other),
            };
            let max_event_bytes = positive(raw.max_event_bytes, "max_event_bytes")?
                .unwrap_or(DEFAULT_MAX_EVENT_BYTES);
            let max_response_bytes = positive(raw.max_response_bytes, "max_response_bytes")?
                .unwrap_or_else(|| {
                    (max_tokens as usize)
                        .saturating_mul(RESPONSE_BYTES_PER_TOKEN)
                        .max(DEFAULT_MAX_EVENT_BYTES)
                });
            if raw.call_timeout_ms == Some(0) {
                return Err(err("config field `llm.call_timeout_ms`: must be at least 1"));
            }
            let defaults = RetryConfig::default();
            let retry = RetryConfig {
                max_attempts: raw.max_attempts.unwrap_or(defaults.max_attempts).max(1),
                backoff_base: raw
                    .retry_backoff_base_ms
                    .map(Duration::from_millis)
                    .unwrap_or(defaults.backoff_base),
                backoff_cap: raw
                    .retry_backoff_cap_ms
                    .map(Duration::from_millis)
                    .unwrap_or(defaults.backoff_cap),
            };
            Ok(LlmConfig::OpenAi(OpenAiConfig {
                base_url: base_url.trim_end_matches('/').to_owned(),
                api_key,
                model,
                temperature,
                max_tokens,
                headers: raw.headers,
                extra_body,
                connect_timeout: Duration::from_millis(raw.connect_timeout_ms.unwrap_or(10_000)),
                read_timeout: Duration::from_millis(raw.read_timeout_ms.unwrap_or(600_000)),
                call_timeout: raw.call_timeout_ms.map(Duration::from_millis),
                max_event_bytes,
                max_response_bytes,
                retry,
            }))
        }
        other => Err(err(format!(
            "config field `llm.provider`: unknown provider '{other}' (expected `openai` or `scripted`)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
