//! The `tools` config section: which built-ins, outside reads, and each tool's settings
//! (`tools.settings`), validated when the config is parsed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::de::Error;
use serde::{Deserialize, Deserializer};

use crate::config_field::{boolean, object, worded, Section, UnknownKey};
use crate::permissions::url_policy;

use super::{shell, WebSettings};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// When set, only these built-ins are registered.
    pub enabled: Option<Vec<String>>,
    #[serde(default)]
    pub disabled: Vec<String>,
    /// Allow read tools outside the workspace (the reference always does; we refuse by default).
    #[serde(default)]
    pub allow_reads_outside_workspace: bool,
    #[serde(default, deserialize_with = "object")]
    pub settings: ToolSettings,
}

impl Section for ToolsConfig {}

/// `tools.settings`: one member per tool that has settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSettings {
    #[serde(default, deserialize_with = "object")]
    pub shell: ShellSettings,
    #[serde(default, deserialize_with = "object")]
    pub web_fetch: WebFetchSettings,
    /// Where results over 40,000 characters are spilled, relative to the workspace (default
    /// `.agentao/tool-outputs`; `~` is the home directory).
    #[serde(default, deserialize_with = "outputs_dir")]
    pub tool_outputs_dir: Option<String>,
}

impl Section for ToolSettings {
    const KEYS: &'static [&'static str] = &["shell", "tool_outputs_dir", "web_fetch"];

    fn unknown_key(_: &str) -> UnknownKey {
        unknown_setting(Self::KEYS)
    }
}

/// `tools.settings.shell`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShellSettings {
    /// Default inactivity timeout when a call gives none (`timeout_s`, default 120).
    #[serde(deserialize_with = "seconds")]
    pub timeout_s: f64,
    /// Remove provider credentials from the child environment (`scrub_env`, default true).
    #[serde(deserialize_with = "boolean")]
    pub scrub_env: bool,
    /// The interpreter for the local executor (`interpreter`; default `/bin/bash`, else `bash`
    /// on PATH, else `/bin/sh`).
    #[serde(deserialize_with = "absolute_path")]
    pub interpreter: Option<PathBuf>,
    /// Apply the hardline floor when the command is launched (default true). Not a config key:
    /// the agent turns it off only when a permission engine is configured with `hardline: false`.
    #[serde(skip)]
    pub(crate) hardline_at_launch: bool,
}

impl Default for ShellSettings {
    fn default() -> Self {
        ShellSettings {
            timeout_s: shell::DEFAULT_TIMEOUT_S,
            scrub_env: true,
            interpreter: None,
            hardline_at_launch: true,
        }
    }
}

impl Section for ShellSettings {
    const KEYS: &'static [&'static str] = &["interpreter", "scrub_env", "timeout_s"];

    fn unknown_key(_: &str) -> UnknownKey {
        unknown_setting(Self::KEYS)
    }
}

/// `tools.settings.web_fetch`; the environment's allow list is added where the tool is built.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebFetchSettings {
    /// Non-public ranges the operator allows (a list, or one string of CIDRs and addresses).
    #[serde(deserialize_with = "allow_list")]
    pub allow_private: Vec<IpNet>,
    /// Bound on each phase of a fetch (connect, headers, each read), seconds.
    #[serde(deserialize_with = "optional_seconds")]
    pub timeout_s: Option<f64>,
    /// Bound on a whole fetch, seconds.
    #[serde(deserialize_with = "optional_seconds")]
    pub total_timeout_s: Option<f64>,
}

impl Section for WebFetchSettings {
    const KEYS: &'static [&'static str] = &["allow_private", "timeout_s", "total_timeout_s"];

    fn unknown_key(_: &str) -> UnknownKey {
        unknown_setting(Self::KEYS)
    }
}

impl WebFetchSettings {
    /// The tool's settings: these, with `AGENTAO_WEB_FETCH_ALLOW_CIDRS` added to the allow list.
    pub(crate) fn resolve(&self) -> WebSettings {
        let defaults = WebSettings::default();
        let mut allow = url_policy::allow_list_from_env();
        allow.extend(self.allow_private.iter().copied());
        WebSettings {
            allow,
            phase_timeout: self
                .timeout_s
                .map_or(defaults.phase_timeout, Duration::from_secs_f64),
            total_timeout: self
                .total_timeout_s
                .map_or(defaults.total_timeout, Duration::from_secs_f64),
        }
    }
}

fn unknown_setting(keys: &[&str]) -> UnknownKey {
    UnknownKey::AtKey(format!("unknown setting (known: {})", keys.join(", ")))
}

fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    const WORDS: &str = "must be a positive number of seconds";
    match worded::<D, f64>(d, WORDS)? {
        f if f > 0.0 && f.is_finite() && f <= 1e9 => Ok(f),
        _ => Err(D::Error::custom(WORDS)),
    }
}

fn optional_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    seconds(d).map(Some)
}

fn absolute_path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    const WORDS: &str = "must be an absolute path";
    match worded::<D, String>(d, WORDS)? {
        s if Path::new(&s).is_absolute() && !s.contains('\0') => Ok(Some(PathBuf::from(s))),
        _ => Err(D::Error::custom(WORDS)),
    }
}

fn outputs_dir<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    const WORDS: &str = "must be a non-empty path";
    match worded::<D, String>(d, WORDS)? {
        s if !s.is_empty() && !s.contains('\0') => Ok(Some(s)),
        _ => Err(D::Error::custom(WORDS)),
    }
}

fn allow_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Tokens {
        Text(String),
        List(Vec<String>),
    }
    let tokens: Tokens = worded(d, "must be a list of CIDRs or IP addresses")?;
    let parsed = match &tokens {
        Tokens::Text(s) => {
            url_policy::parse_allow_list(s.split(|c: char| c == ',' || c.is_whitespace()))
        }
        Tokens::List(items) => url_policy::parse_allow_list(items.iter().map(String::as_str)),
    };
    parsed.map_err(D::Error::custom)
}
