//! The `hooks` config section, in the shape Claude Code's `settings.json` uses, so a user's
//! existing hook configuration can be pasted in unchanged:
//!
//! ```json
//! "hooks": {
//!   "PreToolUse": [
//!     {"matcher": "run_shell_command|Bash", "hooks": [{"type": "command", "command": "…", "timeout": 30}]}
//!   ]
//! }
//! ```
//!
//! Errors name the field the way the rest of the config does (`config field
//! `hooks.PreToolUse[0].hooks[0].command`: …`).

use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde_json::{Map, Value};

use super::event::HookEvent;

/// A command hook's timeout when its entry names none (Claude Code's default).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout an entry may ask for: a hook holds up the turn while it runs.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// Claude Code events this library does not fire. A settings file written for Claude Code may
/// configure them; they are accepted and never run (docs/hooks.md), rather than refusing the
/// whole configuration.
const NOT_FIRED: &[&str] = &[
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "SessionEnd",
    "PermissionRequest",
    "PermissionDenied",
];

/// Which calls (or sources, triggers) a matcher group applies to.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// Absent, `""` or `"*"`.
    All,
    /// Letters, digits, `_` and `|` only: one of these names exactly (Claude Code's rule).
    Names(Vec<String>),
    /// Anything else: a regular expression searched in the name.
    Pattern(Regex),
}

impl Matcher {
    fn parse(text: &str) -> Result<Matcher, String> {
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        if text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
        {
            return Ok(Matcher::Names(
                text.split('|')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ));
        }
        Regex::new(text)
            .map(Matcher::Pattern)
            .map_err(|e| format!("not a valid regular expression: {e}"))
    }

    /// Whether the matcher takes `name` (or, for a tool, its Claude Code name `alias`).
    pub(crate) fn matches(&self, name: &str, alias: Option<&str>) -> bool {
        let one = |n: &str| match self {
            Matcher::All => true,
            Matcher::Names(names) => names.iter().any(|x| x == n),
            Matcher::Pattern(re) => re.is_match(n),
        };
        one(name) || alias.is_some_and(one)
    }
}

/// One command hook.
#[derive(Debug, Clone)]
pub(crate) struct CommandHook {
    /// Run as `<shell> -c <command>` in the working directory.
    pub(crate) command: String,
    pub(crate) timeout: Duration,
}

/// A matcher and the hooks it runs.
#[derive(Debug, Clone)]
pub(crate) struct MatcherGroup {
    pub(crate) matcher: Matcher,
    pub(crate) hooks: Vec<CommandHook>,
}

/// The parsed section: the groups of each event fired here.
#[derive(Debug, Clone, Default)]
pub struct HooksConfig {
    pub(crate) groups: Vec<(HookEvent, Arc<[MatcherGroup]>)>,
}

impl HooksConfig {
    pub(crate) fn is_empty(&self) -> bool {
        self.groups.iter().all(|(_, g)| g.is_empty())
    }

    pub(crate) fn groups(&self, event: HookEvent) -> &[MatcherGroup] {
        self.groups
            .iter()
            .find(|(e, _)| *e == event)
            .map_or(&[], |(_, g)| g)
    }

    /// Reads the section (`hooks` of the agent config).
    pub(crate) fn parse(section: &Value) -> Result<HooksConfig, String> {
        let at = |path: &str, msg: &str| format!("config field `hooks{path}`: {msg}");
        let Value::Object(events) = section else {
            return Err(at("", "must be an object"));
        };
        let mut groups = Vec::new();
        for (name, list) in events {
            let event = match HookEvent::parse(name) {
                Some(e) => e,
                None if NOT_FIRED.contains(&name.as_str()) => continue,
                None => {
                    return Err(at(
                        &format!(".{name}"),
                        &format!("unknown hook event (known: {})", HookEvent::names()),
                    ))
                }
            };
            let Value::Array(list) = list else {
                return Err(at(&format!(".{name}"), "must be an array"));
            };
            let mut parsed = Vec::with_capacity(list.len());
            for (i, group) in list.iter().enumerate() {
                parsed.push(parse_group(group, &format!(".{name}[{i}]"), &at)?);
            }
            groups.push((event, Arc::from(parsed)));
        }
        Ok(HooksConfig { groups })
    }
}

fn parse_group(
    group: &Value,
    path: &str,
    at: &dyn Fn(&str, &str) -> String,
) -> Result<MatcherGroup, String> {
    let Value::Object(group) = group else {
        return Err(at(path, "must be an object"));
    };
    closed(group, &["matcher", "hooks"], path, at)?;
    let matcher = match group.get("matcher") {
        None | Some(Value::Null) => Matcher::All,
        Some(Value::String(s)) => {
            Matcher::parse(s).map_err(|e| at(&format!("{path}.matcher"), &e))?
        }
        Some(_) => return Err(at(&format!("{path}.matcher"), "must be a string")),
    };
    let Some(Value::Array(list)) = group.get("hooks") else {
        return Err(at(&format!("{path}.hooks"), "required, an array"));
    };
    let mut hooks = Vec::with_capacity(list.len());
    for (i, hook) in list.iter().enumerate() {
        let path = format!("{path}.hooks[{i}]");
        let Value::Object(hook) = hook else {
            return Err(at(&path, "must be an object"));
        };
        closed(hook, &["type", "command", "timeout"], &path, at)?;
        match hook.get("type") {
            Some(Value::String(t)) if t == "command" => {}
            Some(Value::String(t)) => {
                return Err(at(
                    &format!("{path}.type"),
                    &format!("'{t}' hooks are not supported; only \"command\""),
                ))
            }
            _ => return Err(at(&format!("{path}.type"), "required: \"command\"")),
        }
        let command = match hook.get("command") {
            Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
            _ => {
                return Err(at(
                    &format!("{path}.command"),
                    "required, a non-empty string",
                ))
            }
        };
        let timeout = match hook.get("timeout") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT,
            Some(v) => match v.as_f64() {
                Some(s) if s > 0.0 && s <= MAX_TIMEOUT.as_secs_f64() => Duration::from_secs_f64(s),
                _ => {
                    return Err(at(
                        &format!("{path}.timeout"),
                        &format!(
                            "must be a number of seconds above 0, at most {}",
                            MAX_TIMEOUT.as_secs()
                        ),
                    ))
                }
            },
        };
        hooks.push(CommandHook { command, timeout });
    }
    Ok(MatcherGroup { matcher, hooks })
}

fn closed(
    object: &Map<String, Value>,
    keys: &[&str],
    path: &str,
    at: &dyn Fn(&str, &str) -> String,
) -> Result<(), String> {
    match object.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(at(
            &format!("{path}.{k}"),
            &format!("unknown field (known: {})", keys.join(", ")),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_code_shape_parses() {
        let c = HooksConfig::parse(&json!({
            "PreToolUse": [{"matcher": "Bash|write_file", "hooks": [{"type": "command", "command": "x", "timeout": 5}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "y"}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "z"}]}]
        }))
        .unwrap();
        let pre = c.groups(HookEvent::PreToolUse);
        assert_eq!(pre[0].hooks[0].timeout, Duration::from_secs(5));
        assert!(pre[0].matcher.matches("run_shell_command", Some("Bash")));
        assert!(!pre[0].matcher.matches("read_file", Some("Read")));
        assert_eq!(
            c.groups(HookEvent::Stop)[0].hooks[0].timeout,
            DEFAULT_TIMEOUT
        );
    }

    #[test]
    fn matchers_follow_claude_code() {
        let m = |s: &str| Matcher::parse(s).unwrap();
        assert!(m("*").matches("anything", None));
        assert!(m("").matches("anything", None));
        assert!(m("Edit|Write").matches("Write", None));
        assert!(!m("Write").matches("write_file", None));
        assert!(m("mcp__.*").matches("mcp__srv__tool", None));
        assert!(m("Notebook.*").matches("NotebookEdit", None));
    }

    #[test]
    fn errors_name_the_field() {
        let e = |v: Value| HooksConfig::parse(&v).unwrap_err();
        assert!(e(json!({"Bogus": []})).contains("`hooks.Bogus`"));
        assert!(
            e(json!({"Stop": [{"hooks": [{"type": "prompt", "prompt": "p"}]}]}))
                .contains("`hooks.Stop[0].hooks[0].prompt`")
        );
        assert!(e(json!({"Stop": [{"hooks": [{"type": "prompt"}]}]})).contains("only \"command\""));
        assert!(e(
            json!({"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]})
        )
        .contains("timeout"));
        assert!(e(json!({"PreToolUse": [{"matcher": "(", "hooks": []}]}))
            .contains("regular expression"));
    }
}
