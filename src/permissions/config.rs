//! The `permissions` config section (closed key set, see docs/permissions.md), validated when
//! the config is parsed: the mode, compiled inline rules and the `web_fetch_domains` host list.
//! Reading `rules_file` is left to [`PermissionEngine::from_config`](super::PermissionEngine).

use serde::de::Error;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::config_field::{optional_bool, worded, Section, UnknownKey};

use super::rules::Rule;
use super::Mode;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// `read-only`, `workspace-write` or `full-access`; `None`: `workspace-write`.
    #[serde(default, deserialize_with = "mode")]
    pub mode: Option<Mode>,
    /// A permissions.json; a relative path is resolved against the workspace.
    #[serde(default, deserialize_with = "optional_string")]
    pub rules_file: Option<String>,
    /// Inline rules, labelled `injected:config`.
    #[serde(default, deserialize_with = "rules")]
    pub rules: Option<Vec<Rule>>,
    /// The hardline floor; `None`: on.
    #[serde(default, deserialize_with = "optional_bool")]
    pub hardline: Option<bool>,
    /// Hosts `web_fetch` may reach without asking, lowercased.
    #[serde(default, deserialize_with = "hosts")]
    pub web_fetch_domains: Option<Vec<String>>,
}

impl Section for PermissionsConfig {
    const KEYS: &'static [&'static str] = &[
        "mode",
        "rules_file",
        "rules",
        "hardline",
        "web_fetch_domains",
    ];

    fn unknown_key(key: &str) -> UnknownKey {
        UnknownKey::AtObject(format!(
            "unknown key `{key}` (allowed: {})",
            Self::KEYS.join(", ")
        ))
    }
}

fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Mode>, D::Error> {
    let Some(s) = worded::<D, Option<String>>(d, "must be a string")? else {
        return Ok(None);
    };
    match Mode::parse(&s) {
        Some(Mode::Plan) => Err(D::Error::custom(
            "'plan' cannot be set at construction; plan mode is entered through the plan session",
        )),
        Some(m) => Ok(Some(m)),
        None => Err(D::Error::custom(format!(
            "unknown mode '{s}' (expected read-only, workspace-write or full-access)"
        ))),
    }
}

fn optional_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    worded(d, "must be a string")
}

/// A rule keeps its JSON as given (snapshots and events show it), so items are read as values
/// and compiled by the rule format's own validator.
fn rules<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Rule>>, D::Error> {
    let Some(items) = worded::<D, Option<Vec<Value>>>(d, "must be a list of rule objects")? else {
        return Ok(None);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, r)| Rule::parse(r).map_err(|e| D::Error::custom(format!("[{i}]: {e}"))))
        .collect::<Result<_, _>>()
        .map(Some)
}

fn hosts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let Some(items) = worded::<D, Option<Vec<Value>>>(d, "must be a list of host names")? else {
        return Ok(None);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_str() {
            Some(h) if is_host_pattern(h) => Ok(h.to_ascii_lowercase()),
            _ => Err(D::Error::custom(format!(
                "[{i}]: must be a host name such as \"docs.rs\" or \".python.org\""
            ))),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A host name, or `.domain` for the domain and its subdomains (the rule `domain` syntax).
fn is_host_pattern(h: &str) -> bool {
    !h.is_empty()
        && h.trim_start_matches('.')
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
}
