//! The agent config parser (`config::AgentConfig::from_json_with_env`) and what
//! `agentao_agent_new` builds from a parsed config: the permission engine
//! (`PermissionEngine::from_config`, which may read `permissions.rules_file`) and the LLM client
//! (`LlmClient::new`, which validates a scripted provider's script).
//!
//! Asserts: no panic and no unbounded read; an accepted config satisfies the documented
//! invariants (absolute existing working directory, http(s) base URL without a trailing slash,
//! `max_tokens` >= 1, at least one attempt, finite temperature, valid headers, `enabled` and
//! `disabled` not both set); round trip: the accepted config, written back as config JSON (the
//! typed `tools.settings` and `permissions` sections copied from the input), parses to the same
//! config.
#![no_main]

use agentao::config::{AgentConfig, Env, LlmConfig};
use agentao::llm::LlmClient;
use agentao::permissions::PermissionEngine;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

/// No environment fallbacks: every value comes from the input.
struct NoEnv;
impl Env for NoEnv {
    fn var(&self, _: &str) -> Option<String> {
        None
    }
}

fn render(c: &AgentConfig, input: &Value) -> Option<Value> {
    let mut o = Map::new();
    o.insert(
        "working_directory".into(),
        json!(c.working_directory.to_str()?),
    );
    o.insert("max_iterations".into(), json!(c.max_iterations));
    if let Some(s) = &c.system_prompt_extra {
        o.insert("system_prompt".into(), json!(s));
    }
    if let Some(t) = c.reply_timeout {
        o.insert("reply_timeout_ms".into(), json!(t.as_millis() as u64));
    }
    let llm = match &c.llm {
        LlmConfig::OpenAi(l) => {
            let mut m = json!({
                "provider": "openai",
                "base_url": l.base_url,
                "api_key": l.api_key,
                "model": l.model,
                "max_tokens": l.max_tokens,
                "headers": l.headers,
                "extra_body": l.extra_body,
                "connect_timeout_ms": l.connect_timeout.as_millis() as u64,
                "read_timeout_ms": l.read_timeout.as_millis() as u64,
                "retry_backoff_base_ms": l.retry.backoff_base.as_millis() as u64,
                "retry_backoff_cap_ms": l.retry.backoff_cap.as_millis() as u64,
                "max_attempts": l.retry.max_attempts,
            });
            if let Some(t) = l.temperature {
                m["temperature"] = json!(t);
            }
            m
        }
        LlmConfig::Scripted(s) => json!({"provider": "scripted", "script": s}),
    };
    o.insert("llm".into(), llm);
    let mut tools = json!({
        "disabled": c.tools.disabled,
        "allow_reads_outside_workspace": c.tools.allow_reads_outside_workspace,
    });
    if let Some(s) = input.get("tools").and_then(|t| t.get("settings")) {
        tools["settings"] = s.clone();
    }
    if let Some(e) = &c.tools.enabled {
        tools["enabled"] = json!(e);
    }
    o.insert("tools".into(), tools);
    if c.permissions.is_some() {
        o.insert("permissions".into(), input.get("permissions")?.clone());
    }
    Some(Value::Object(o))
}

fn check_invariants(c: &AgentConfig) {
    assert!(c.working_directory.is_absolute() && c.working_directory.is_dir());
    if let LlmConfig::OpenAi(l) = &c.llm {
        assert!(l.base_url.starts_with("http://") || l.base_url.starts_with("https://"));
        assert!(!l.base_url.ends_with('/'), "{}", l.base_url);
        assert!(!l.api_key.trim().is_empty() && !l.model.trim().is_empty());
        assert!(l.max_tokens >= 1 && l.retry.max_attempts >= 1);
        assert!(l.temperature.is_none_or(f64::is_finite));
    }
    assert!(c.tools.enabled.is_none() || c.tools.disabled.is_empty());
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = AgentConfig::from_json_with_env(text, &NoEnv) else {
        return;
    };
    check_invariants(&config);
    let input: Value = serde_json::from_str(text).expect("an accepted config is JSON");
    if let Some(rendered) = render(&config, &input) {
        let again = AgentConfig::from_json_with_env(&rendered.to_string(), &NoEnv)
            .unwrap_or_else(|e| panic!("{rendered} refused: {}", e.0));
        assert_eq!(format!("{config:?}"), format!("{again:?}"), "round trip");
    }
    let _ = PermissionEngine::from_config(config.permissions.as_ref(), &config.working_directory);
    let _ = LlmClient::new(&config.llm);
});
