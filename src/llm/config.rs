//! The `llm` section of the agent config. Values the config leaves out for the `openai`
//! provider fall back to the environment the way the reference's `discover_llm_kwargs` does
//! (`LLM_PROVIDER`, `{P}_API_KEY`, `{P}_BASE_URL`, `{P}_MODEL`, `LLM_TEMPERATURE`,
//! `LLM_MAX_TOKENS`, `LLM_EXTRA_BODY`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config_field::Section;

pub const DEFAULT_MAX_TOKENS: u32 = 65536;
/// Default bound on one SSE line, one event's data, and a whole-JSON response body.
pub(crate) const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;
/// Bytes of text, reasoning and tool calls allowed per token of `max_tokens` by default (a
/// token is about 4 bytes; escapes and arguments as objects can make it more).
pub(crate) const RESPONSE_BYTES_PER_TOKEN: usize = 64;

// One per agent, never in a collection: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum LlmConfig {
    OpenAi(OpenAiConfig),
    /// The scripted provider's script, validated by the LLM layer when the agent is built.
    Scripted(Value),
}

impl LlmConfig {}

/// Which HTTP wire a model client speaks (`llm.provider`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WireKind {
    /// OpenAI Chat Completions (`openai`).
    #[default]
    ChatCompletions,
    /// Anthropic Messages (`anthropic`).
    Anthropic,
    /// OpenAI Responses (`openai-responses`).
    Responses,
}

impl WireKind {
    /// The provider name as the config writes it.
    pub fn name(self) -> &'static str {
        match self {
            WireKind::ChatCompletions => "openai",
            WireKind::Anthropic => "anthropic",
            WireKind::Responses => "openai-responses",
        }
    }
}

/// The settings of an HTTP model client, whichever wire it speaks.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The wire; the other fields mean the same on each.
    pub wire: WireKind,
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
    pub(crate) call_timeout: Option<Duration>,
    /// Bound on one SSE line, one event's data, and a whole-JSON body.
    pub(crate) max_event_bytes: usize,
    /// Bound on the text, reasoning and tool calls one response accumulates.
    pub(crate) max_response_bytes: usize,
    pub retry: RetryConfig,
    /// The optional price table, by model (sub-agents may use other models).
    pub(crate) prices: BTreeMap<String, Price>,
    pub(crate) budgets: Budgets,
    /// Which HTTP client reaches the model; not a config field (the default picks by URL).
    pub http_client: crate::llm::HttpClientChoice,
}

/// Limits a host sets on one turn and on the session (`llm.budgets`); a turn past one ends as
/// a cancellation whose reason names it. Tokens are prompt plus completion tokens; USD needs
/// `llm.prices`; checked before each model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    pub turn_tokens: Option<u64>,
    pub turn_usd: Option<f64>,
    pub turn_ms: Option<u64>,
    pub session_tokens: Option<u64>,
    pub session_usd: Option<f64>,
    pub session_ms: Option<u64>,
}

/// One model's prices in US dollars per million tokens (`llm.prices.<model>`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    /// What `u` costs, in billionths of a dollar: prompt tokens that were neither read from
    /// nor written to the cache at the input price, cache reads and writes at theirs (the
    /// input price when the table leaves them out), completion tokens at the output price.
    pub(crate) fn cost_nano_usd(&self, u: &super::Usage) -> u64 {
        let cached = u.cache_read_tokens.saturating_add(u.cache_creation_tokens);
        let plain = u.prompt_tokens.saturating_sub(cached) as f64;
        let nano = plain * self.input
            + u.cache_read_tokens as f64 * self.cache_read.unwrap_or(self.input)
            + u.cache_creation_tokens as f64 * self.cache_write.unwrap_or(self.input)
            + u.completion_tokens as f64 * self.output;
        // Per million tokens, in billionths: x1000. Finite and non-negative by validation.
        (nano * 1000.0).round() as u64
    }

    fn check(&self, model: &str) -> Result<(), String> {
        let fields = [
            ("input", Some(self.input)),
            ("output", Some(self.output)),
            ("cache_read", self.cache_read),
            ("cache_write", self.cache_write),
        ];
        for (name, v) in fields {
            if v.is_some_and(|v| !v.is_finite() || !(0.0..=1e6).contains(&v)) {
                return Err(format!(
                    "config field `llm.prices.{model}.{name}`: must be a number of dollars per million tokens between 0 and 1000000"
                ));
            }
        }
        Ok(())
    }
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

/// The `llm` section as written; [`LlmSection::resolve`] fills it from the environment.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LlmSection {
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
    #[serde(default)]
    prices: BTreeMap<String, Price>,
    #[serde(default)]
    budgets: Budgets,
}

impl Section for LlmSection {}

/// Whether `url` (an http(s) URL) names this machine: `localhost` (or a name under it), an
/// IPv4 address in 127.0.0.0/8, or `[::1]`. Only such a server may do without an API key.
fn is_loopback_url(url: &str) -> bool {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()))
    {
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Where environment fallbacks come from; a trait so tests need not touch the process env.
pub trait Env {
    fn var(&self, key: &str) -> Option<String>;
}

pub(crate) struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, key: &str) -> Option<String> {
        std::env::var(key).ok().filter(|v| !v.trim().is_empty())
    }
}

impl LlmSection {
    /// The provider's config: values left out for `openai` come from `env`. Errors name the
    /// field (`config field `llm.base_url`: required (or set OPENAI_BASE_URL)`).
    pub(crate) fn resolve(self, env: &dyn Env) -> Result<LlmConfig, String> {
        let provider = self.provider.as_deref().unwrap_or("openai");
        match provider {
            "scripted" => {
                let script = self
                    .script
                    .ok_or_else(|| "config field `llm.script`: required for provider `scripted`".to_owned())?;
                Ok(LlmConfig::Scripted(script))
            }
            "openai" | "anthropic" | "openai-responses" => {
                let wire = match provider {
                    "anthropic" => WireKind::Anthropic,
                    "openai-responses" => WireKind::Responses,
                    _ => WireKind::ChatCompletions,
                };
                if self.script.is_some() {
                    return Err("config field `llm.script`: only valid with provider `scripted`".to_owned());
                }
                // The Anthropic wire reads the variables its SDK reads; the others keep the
                // reference's `LLM_PROVIDER` prefix.
                let prefix = match wire {
                    WireKind::Anthropic => "ANTHROPIC".to_owned(),
                    _ => env
                        .var("LLM_PROVIDER")
                        .map(|p| p.trim().to_uppercase())
                        .unwrap_or_else(|| "OPENAI".to_owned()),
                };
                let pick = |value: Option<String>, field: &str| -> Result<String, String> {
                    let var = format!("{prefix}_{}", field.to_uppercase());
                    match value.filter(|v| !v.trim().is_empty()).or_else(|| env.var(&var)) {
                        Some(v) => Ok(v.trim().to_owned()),
                        None => Err(format!(
                            "config field `llm.{field}`: required (or set {var})"
                        )),
                    }
                };
                // Trimmed before the check, so a URL that is only a scheme (`http://`) cannot
                // pass it and then lose its slashes.
                let given = match (wire, pick(self.base_url, "base_url")) {
                    // The Anthropic SDK's default endpoint.
                    (WireKind::Anthropic, Err(_)) => "https://api.anthropic.com".to_owned(),
                    (_, r) => r?,
                };
                let base_url = given
                    .trim_end_matches(|c: char| c == '/' || c.is_whitespace())
                    .to_owned();
                let host = base_url
                    .strip_prefix("http://")
                    .or_else(|| base_url.strip_prefix("https://"));
                if host.is_none_or(str::is_empty) {
                    return Err(format!(
                        "config field `llm.base_url`: '{given}' is not an http(s) URL"
                    ));
                }
                let api_key = match pick(self.api_key, "api_key") {
                    Ok(key) => key,
                    // A local server (llama.cpp, Ollama, vLLM on loopback) checks no key:
                    // demanding one only makes every host invent a dummy. Empty means that
                    // no Authorization header is sent.
                    Err(_) if is_loopback_url(&base_url) => String::new(),
                    Err(e) => return Err(format!("{e}; only a loopback base_url may omit it")),
                };
                let model = pick(self.model, "model")?;
                let temperature = match self.temperature {
                    Some(t) => Some(t),
                    None => match env.var("LLM_TEMPERATURE") {
                        Some(v) => Some(v.trim().parse::<f64>().map_err(|_| {
                            format!("LLM_TEMPERATURE: '{v}' is not a number")
                        })?),
                        None => None,
                    },
                };
                if let Some(t) = temperature {
                    if !t.is_finite() {
                        return Err("config field `llm.temperature`: must be finite".to_owned());
                    }
                }
                let max_tokens = match self.max_tokens {
                    Some(m) => m,
                    None => match env.var("LLM_MAX_TOKENS") {
                        Some(v) => v.trim().parse::<u32>().map_err(|_| {
                            format!("LLM_MAX_TOKENS: '{v}' is not a positive integer")
                        })?,
                        None => DEFAULT_MAX_TOKENS,
                    },
                };
                if max_tokens == 0 {
                    return Err("config field `llm.max_tokens`: must be at least 1".to_owned());
                }
                let extra_body = match self.extra_body {
                    Some(b) => b,
                    // The reference logs and ignores an invalid LLM_EXTRA_BODY; so do we.
                    None => env
                        .var("LLM_EXTRA_BODY")
                        .and_then(|v| serde_json::from_str::<Map<String, Value>>(&v).ok())
                        .unwrap_or_default(),
                };
                for (name, value) in &self.headers {
                    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
                        || reqwest::header::HeaderValue::from_str(value).is_err()
                    {
                        return Err(format!(
                            "config field `llm.headers.{name}`: not a valid HTTP header"
                        ));
                    }
                }
                let positive = |v: Option<usize>, field: &str| match v {
                    Some(0) => Err(format!("config field `llm.{field}`: must be at least 1")),
                    other => Ok(other),
                };
                let max_event_bytes = positive(self.max_event_bytes, "max_event_bytes")?
                    .unwrap_or(DEFAULT_MAX_EVENT_BYTES);
                let max_response_bytes = positive(self.max_response_bytes, "max_response_bytes")?
                    .unwrap_or_else(|| {
                        (max_tokens as usize)
                            .saturating_mul(RESPONSE_BYTES_PER_TOKEN)
                            .max(DEFAULT_MAX_EVENT_BYTES)
                    });
                for (name, v) in [
                    ("turn_usd", self.budgets.turn_usd),
                    ("session_usd", self.budgets.session_usd),
                ] {
                    if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
                        return Err(format!(
                            "config field `llm.budgets.{name}`: must be a non-negative number of dollars"
                        ));
                    }
                }
                for (model, p) in &self.prices {
                    p.check(model)?;
                }
                if self.call_timeout_ms == Some(0) {
                    return Err("config field `llm.call_timeout_ms`: must be at least 1".to_owned());
                }
                let defaults = RetryConfig::default();
                let retry = RetryConfig {
                    max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts).max(1),
                    backoff_base: self
                        .retry_backoff_base_ms
                        .map(Duration::from_millis)
                        .unwrap_or(defaults.backoff_base),
                    backoff_cap: self
                        .retry_backoff_cap_ms
                        .map(Duration::from_millis)
                        .unwrap_or(defaults.backoff_cap),
                };
                Ok(LlmConfig::OpenAi(OpenAiConfig {
                    http_client: crate::llm::HttpClientChoice::Auto,
                    wire,
                    base_url,
                    api_key,
                    model,
                    temperature,
                    max_tokens,
                    headers: self.headers,
                    extra_body,
                    connect_timeout: Duration::from_millis(self.connect_timeout_ms.unwrap_or(10_000)),
                    read_timeout: Duration::from_millis(self.read_timeout_ms.unwrap_or(600_000)),
                    call_timeout: self.call_timeout_ms.map(Duration::from_millis),
                    max_event_bytes,
                    max_response_bytes,
                    retry,
                    prices: self.prices,
                    budgets: self.budgets,
                }))
            }
            other => Err(format!(
                "config field `llm.provider`: unknown provider '{other}' (expected `openai`, `anthropic`, `openai-responses` or `scripted`)"
            )),
        }
    }
}
